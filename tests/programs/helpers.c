/*
 * helpers.c -- launches written the common way: one helper builds the argument struct and
 * launches whichever root it is given, called for three different roots, one of them through
 * a second helper. Scale: b = 2a; Shift: c = b + 1; Mix: a = c - a (checked on the host).
 *
 * Usage: helpers [N]   (default 1000). Prints a checksum; exit 0 PASS, 1 FAIL.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

#define LEAF(NAME, EXPR)                                                                          \
  void NAME(float *x, size_t bytes_x, float *y, size_t bytes_y, long n) {                        \
    __hpvm__hint(DEVICE);                                                                         \
    __hpvm__attributes(2, x, y, 1, y);                                                            \
    long i = __hpvm__getNodeInstanceID_x(__hpvm__getNode());                                      \
    if (i < n) {                                                                                  \
      y[i] = EXPR;                                                                                \
    }                                                                                             \
    __hpvm__return(0);                                                                            \
  }

#define ROOT(NAME, LEAF_FN)                                                                       \
  void NAME(float *x, size_t bytes_x, float *y, size_t bytes_y, long n) {                        \
    __hpvm__hint(CPU_TARGET);                                                                     \
    __hpvm__attributes(2, x, y, 1, y);                                                            \
    void *l = __hpvm__createNodeND(1, LEAF_FN, n);                                                \
    __hpvm__bindIn(l, 0, 0, 0);                                                                   \
    __hpvm__bindIn(l, 1, 1, 0);                                                                   \
    __hpvm__bindIn(l, 2, 2, 0);                                                                   \
    __hpvm__bindIn(l, 3, 3, 0);                                                                   \
    __hpvm__bindIn(l, 4, 4, 0);                                                                   \
  }

LEAF(Scale, 2.0f * x[i])
LEAF(Shift, x[i] + 1.0f)
LEAF(Mix, x[i] - y[i])
ROOT(ScaleRoot, Scale)
ROOT(ShiftRoot, Shift)
ROOT(MixRoot, Mix)

typedef struct __attribute__((__packed__)) {
  float *x;
  size_t bytes_x;
  float *y;
  size_t bytes_y;
  long n;
} In;

/* The helper: packs the arguments and launches `root`. */
static void run(void *root, float *x, float *y, long n) {
  In in = {x, (size_t)n * sizeof(float), y, (size_t)n * sizeof(float), n};
  void *g = __hpvm__launch(0, root, &in);
  __hpvm__wait(g);
}

/* A helper of the helper. */
static void run_twice(void *root, float *x, float *y, long n) {
  run(root, x, y, n);
  run(root, x, y, n);
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000;
  if (n < 1 || argc > 2) {
    fprintf(stderr, "usage: %s [N]\n", argv[0]);
    return 2;
  }
  size_t bytes = (size_t)n * sizeof(float);
  float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes), *ra = malloc(bytes);
  for (long i = 0; i < n; ++i) {
    a[i] = ra[i] = (float)(i % 11);
    b[i] = c[i] = -1.0f;
  }
  __hpvm__init();
  llvm_hpvm_track_mem(a, bytes);
  llvm_hpvm_track_mem(b, bytes);
  llvm_hpvm_track_mem(c, bytes);
  run(ScaleRoot, a, b, n);      /* b = 2a */
  run_twice(ShiftRoot, b, c, n); /* c = b + 1 */
  run(MixRoot, c, a, n);        /* a = c - a = a + 1 */
  llvm_hpvm_request_mem(a, bytes);
  long bad = 0;
  for (long i = 0; i < n; ++i) {
    bad += a[i] != ra[i] + 1.0f;
  }
  printf("checksum %016llx\n", fnv1a(a, bytes));
  __hpvm__cleanup();
  printf("helpers n=%ld: %s (%ld wrong)\n", n, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
