/* A grid whose instance count, computed from the arguments at run time, is negative. */
#include <hpvm.h>

void Leaf(float *a, size_t bytes_a, long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, a, 1, a);
  __hpvm__return(0);
}

void Root(float *a, size_t bytes_a, long n) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, a, 1, a);
  void *leaf = __hpvm__createNodeND(1, Leaf, n - 10);
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
  float a[6];
  RootIn args = {a, sizeof a, 6};
  __hpvm__init();
  void *g = __hpvm__launch(0, Root, &args);
  __hpvm__wait(g);
  __hpvm__cleanup();
  return 0;
}
