/* A leaf declared to return a struct of two fields that returns one value.
 * The line marked expect-error must be reported with that rule. */
#include <hpvm.h>
#include <stdlib.h>

struct Out {
  size_t bytes;
  long count;
};

struct Out Leaf(float *a, size_t bytes_a, long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, a, 1, a);
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (i < n)
    a[i] *= 2.0f;
  __hpvm__return(1, bytes_a); /* expect-error: return-arity */
  struct Out out = {bytes_a, n};
  return out;
}
void Root(float *a, size_t bytes_a, long n) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, a, 1, a);
  void *leaf = __hpvm__createNodeND(1, Leaf, n);
  __hpvm__bindIn(leaf, 0, 0, 0);
  __hpvm__bindIn(leaf, 1, 1, 0);
  __hpvm__bindIn(leaf, 2, 2, 0);
}

typedef struct __attribute__((__packed__)) {
  float *a;
  size_t bytes_a;
  long n;
} RootIn;

int main(void) {
  long n = 64;
  float *a = calloc(n, sizeof(float));
  RootIn args = {a, n * sizeof(float), n};
  __hpvm__init();
  llvm_hpvm_track_mem(a, n * sizeof(float));
  void *dfg = __hpvm__launch(0, Root, &args);
  __hpvm__wait(dfg);
  llvm_hpvm_request_mem(a, n * sizeof(float));
  llvm_hpvm_untrack_mem(a);
  __hpvm__cleanup();
  free(a);
  return 0;
}
