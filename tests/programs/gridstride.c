/*
 * gridstride.c -- saxpy as CUDA code often writes it: a fixed number of blocks whose size is
 * a run-time value, and a grid-stride loop (`i += blocks × block`) that covers any `n`.
 * The stride is a product of two run-time values, beyond affine arithmetic; the analysis reads
 * the loop one iteration at a time (analysis/src/stride.rs), so the node splits.
 *
 *   Root (CPU) -> Blocks (GPU, BLOCKS instances) -> Saxpy (leaf, BLOCK instances)
 *
 * Usage: gridstride [N [BLOCK [BLOCKS]]]   (defaults 1000 32 5). Prints a checksum; exit 0 PASS.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

void Saxpy(float *x, size_t bytes_x, float *y, size_t bytes_y, int n, float a) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(2, x, y, 1, y);
  void *self = __hpvm__getNode();
  void *parent = __hpvm__getParentNode(self);
  long stride = __hpvm__getNumNodeInstances_x(parent) * __hpvm__getNumNodeInstances_x(self);
  long first = __hpvm__getNodeInstanceID_x(parent) * __hpvm__getNumNodeInstances_x(self) +
               __hpvm__getNodeInstanceID_x(self);
  for (long i = first; i < n; i += stride) {
    y[i] = a * x[i] + y[i];
  }
  __hpvm__return(0);
}

void Blocks(float *x, size_t bytes_x, float *y, size_t bytes_y, int n, float a, long block) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(2, x, y, 1, y);
  void *s = __hpvm__createNodeND(1, Saxpy, block);
  __hpvm__bindIn(s, 0, 0, 0);
  __hpvm__bindIn(s, 1, 1, 0);
  __hpvm__bindIn(s, 2, 2, 0);
  __hpvm__bindIn(s, 3, 3, 0);
  __hpvm__bindIn(s, 4, 4, 0);
  __hpvm__bindIn(s, 5, 5, 0);
}

void Root(float *x, size_t bytes_x, float *y, size_t bytes_y, int n, float a, long block, long blocks) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(2, x, y, 1, y);
  void *b = __hpvm__createNodeND(1, Blocks, blocks);
  __hpvm__bindIn(b, 0, 0, 0);
  __hpvm__bindIn(b, 1, 1, 0);
  __hpvm__bindIn(b, 2, 2, 0);
  __hpvm__bindIn(b, 3, 3, 0);
  __hpvm__bindIn(b, 4, 4, 0);
  __hpvm__bindIn(b, 5, 5, 0);
  __hpvm__bindIn(b, 6, 6, 0);
}

typedef struct __attribute__((__packed__)) {
  float *x;
  size_t bytes_x;
  float *y;
  size_t bytes_y;
  int n;
  float a;
  long block, blocks;
} In;

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  long block = argc > 2 ? atol(argv[2]) : 32, blocks = argc > 3 ? atol(argv[3]) : 5;
  if (n < 1 || block < 1 || blocks < 1 || argc > 4) {
    fprintf(stderr, "usage: %s [N [BLOCK [BLOCKS]]]\n", argv[0]);
    return 2;
  }
  size_t bytes = (size_t)n * sizeof(float);
  float *x = malloc(bytes), *y = malloc(bytes);
  for (int i = 0; i < n; ++i) {
    x[i] = (float)(i % 7);
    y[i] = (float)(i % 5);
  }
  __hpvm__init();
  llvm_hpvm_track_mem(x, bytes);
  llvm_hpvm_track_mem(y, bytes);
  In args = {x, bytes, y, bytes, n, 2.0f, block, blocks};
  void *g = __hpvm__launch(0, Root, &args);
  __hpvm__wait(g);
  llvm_hpvm_request_mem(y, bytes);
  long bad = 0;
  for (int i = 0; i < n; ++i) {
    bad += y[i] != 2.0f * (float)(i % 7) + (float)(i % 5);
  }
  printf("checksum %016llx\n", fnv1a(y, bytes));
  __hpvm__cleanup();
  printf("gridstride n=%d block=%ld blocks=%ld: %s (%ld wrong)\n", n, block, blocks, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
