/* A launch helper called with a root chosen at run time: after the helper is inlined, the
 * launch still does not name a node function. */
#include <hpvm.h>
#include <stdlib.h>

void Leaf(float *x, size_t bytes_x, long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, x, 1, x);
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (i < n) {
    x[i] += 1.0f;
  }
  __hpvm__return(0);
}

void Root(float *x, size_t bytes_x, long n) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, x, 1, x);
  void *l = __hpvm__createNodeND(1, Leaf, n);
  __hpvm__bindIn(l, 0, 0, 0);
  __hpvm__bindIn(l, 1, 1, 0);
  __hpvm__bindIn(l, 2, 2, 0);
}

typedef struct __attribute__((__packed__)) {
  float *x;
  size_t bytes_x;
  long n;
} In;

static void run(void *root, float *x, long n) {
  In in = {x, (size_t)n * sizeof(float), n};
  void *g = __hpvm__launch(0, root, &in); /* expect-error: not-a-function */
  __hpvm__wait(g);
}

int main(int argc, char **argv) {
  float *x = calloc(10, sizeof(float));
  void *roots[2] = {Root, (void *)main};
  __hpvm__init();
  run(roots[argc % 2], x, 10);
  __hpvm__cleanup();
  return 0;
}
