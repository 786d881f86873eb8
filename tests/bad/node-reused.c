/* One leaf function created by two parents.
 * The line marked expect-error must be reported with that rule. */
#include <hpvm.h>
#include <stdlib.h>

void Leaf(float *a, size_t bytes_a, long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, a, 1, a);
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (i < n)
    a[i] *= 2.0f;
  __hpvm__return(0);
}

void Left(float *a, size_t bytes_a, long n) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, a, 1, a);
  void *leaf = __hpvm__createNodeND(1, Leaf, n);
  __hpvm__bindIn(leaf, 0, 0, 0);
  __hpvm__bindIn(leaf, 1, 1, 0);
  __hpvm__bindIn(leaf, 2, 2, 0);
}

void Right(float *a, size_t bytes_a, long n) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, a, 1, a);
  void *leaf = __hpvm__createNodeND(1, Leaf, n); /* expect-error: node-reused */
  __hpvm__bindIn(leaf, 0, 0, 0);
  __hpvm__bindIn(leaf, 1, 1, 0);
  __hpvm__bindIn(leaf, 2, 2, 0);
}

void Root(float *a, size_t bytes_a, long n) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, a, 1, a);
  void *left = __hpvm__createNodeND(0, Left);
  void *right = __hpvm__createNodeND(0, Right);
  __hpvm__bindIn(left, 0, 0, 0);
  __hpvm__bindIn(left, 1, 1, 0);
  __hpvm__bindIn(left, 2, 2, 0);
  __hpvm__bindIn(right, 0, 0, 0);
  __hpvm__bindIn(right, 1, 1, 0);
  __hpvm__bindIn(right, 2, 2, 0);
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
