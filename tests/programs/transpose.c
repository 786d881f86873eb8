/*
 * transpose.c -- a transpose followed by a read of row neighbours: every partition of the
 * second launch needs elements every partition of the first one wrote (all-to-all
 * dependencies between launches).
 *
 *   Transpose: t[x][y] = m[y][x]                  (m is H x W, t is W x H)
 *   Neighbours: r[y][x] = t[y][x] + t[y][x + 1]   (x + 1 wrapped to 0 at the end of a row)
 *
 * Usage: transpose [W [H]]   (defaults 40 24). Prints a checksum; exit 0 PASS, 1 FAIL.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

void Transpose(float *m, size_t bytes_m, float *t, size_t bytes_t, long w, long h) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, m, 1, t);
  void *self = __hpvm__getNode();
  long x = __hpvm__getNodeInstanceID_x(self);
  long y = __hpvm__getNodeInstanceID_y(self);
  if (x < w && y < h) {
    t[x * h + y] = m[y * w + x];
  }
  __hpvm__return(0);
}

void TransposeRoot(float *m, size_t bytes_m, float *t, size_t bytes_t, long w, long h) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, m, 1, t);
  void *n = __hpvm__createNodeND(2, Transpose, w, h);
  __hpvm__bindIn(n, 0, 0, 0);
  __hpvm__bindIn(n, 1, 1, 0);
  __hpvm__bindIn(n, 2, 2, 0);
  __hpvm__bindIn(n, 3, 3, 0);
  __hpvm__bindIn(n, 4, 4, 0);
  __hpvm__bindIn(n, 5, 5, 0);
}

void Neighbours(float *t, size_t bytes_t, float *r, size_t bytes_r, long w, long h) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, t, 1, r);
  void *self = __hpvm__getNode();
  long x = __hpvm__getNodeInstanceID_x(self); /* column of t: 0..h-1 */
  long y = __hpvm__getNodeInstanceID_y(self); /* row of t: 0..w-1 */
  if (x < h && y < w) {
    long next = x + 1 < h ? x + 1 : 0;
    r[y * h + x] = t[y * h + x] + t[y * h + next];
  }
  __hpvm__return(0);
}

void NeighboursRoot(float *t, size_t bytes_t, float *r, size_t bytes_r, long w, long h) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, t, 1, r);
  void *n = __hpvm__createNodeND(2, Neighbours, h, w);
  __hpvm__bindIn(n, 0, 0, 0);
  __hpvm__bindIn(n, 1, 1, 0);
  __hpvm__bindIn(n, 2, 2, 0);
  __hpvm__bindIn(n, 3, 3, 0);
  __hpvm__bindIn(n, 4, 4, 0);
  __hpvm__bindIn(n, 5, 5, 0);
}

typedef struct __attribute__((__packed__)) {
  float *a;
  size_t bytes_a;
  float *b;
  size_t bytes_b;
  long w;
  long h;
} In;


int main(int argc, char **argv) {
  long w = argc > 1 ? atol(argv[1]) : 40;
  long h = argc > 2 ? atol(argv[2]) : 24;
  if (w < 1 || h < 1 || argc > 3) {
    fprintf(stderr, "usage: %s [W [H]]\n", argv[0]);
    return 2;
  }
  size_t bytes = (size_t)(w * h) * sizeof(float);
  float *m = malloc(bytes), *t = malloc(bytes), *r = malloc(bytes);
  for (long i = 0; i < w * h; ++i) {
    m[i] = (float)(i % 101);
    t[i] = r[i] = -1.0f;
  }
  __hpvm__init();
  llvm_hpvm_track_mem(m, bytes);
  llvm_hpvm_track_mem(t, bytes);
  llvm_hpvm_track_mem(r, bytes);
  for (int round = 0; round < 2; ++round) {
    In a = {m, bytes, t, bytes, w, h};
    void *g = __hpvm__launch(0, TransposeRoot, &a);
    __hpvm__wait(g);
    In b = {t, bytes, r, bytes, w, h};
    g = __hpvm__launch(0, NeighboursRoot, &b);
    __hpvm__wait(g);
  }
  llvm_hpvm_request_mem(r, bytes);
  long bad = 0;
  for (long y = 0; y < w; ++y) {
    for (long x = 0; x < h; ++x) {
      long next = x + 1 < h ? x + 1 : 0;
      float want = m[x * w + y] + m[next * w + y];
      bad += r[y * h + x] != want;
    }
  }
  printf("checksum %016llx\n", fnv1a(r, bytes));
  __hpvm__cleanup();
  printf("transpose %ldx%ld: %s (%ld wrong)\n", w, h, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
