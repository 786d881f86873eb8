/*
 * jacobi1d.c -- a 1-D Jacobi sweep written the common GPU way: the block size is a run-time
 * value (a parameter of the root), and each instance computes its global index as
 * `parent id × instances of self + own id`. The grid of blocks is rounded up, so the last
 * block has instances past the end, which the `if` leaves idle.
 *
 *   Root (CPU) -> Blocks (GPU, ceil(n / block) instances) -> Sweep (leaf, `block` instances)
 *
 * Usage: jacobi1d [N [BLOCK [STEPS]]]   (defaults 1000 64 4). Prints a checksum; exit 0 PASS.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

void Sweep(float *in, size_t bytes_in, float *out, size_t bytes_out, long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  void *self = __hpvm__getNode();
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getParentNode(self)) * __hpvm__getNumNodeInstances_x(self) +
           __hpvm__getNodeInstanceID_x(self);
  if (i > 0 && i < n - 1) {
    out[i] = (in[i - 1] + in[i] + in[i + 1]) / 3.0f;
  } else if (i < n) {
    out[i] = in[i];
  }
  __hpvm__return(0);
}

void Blocks(float *in, size_t bytes_in, float *out, size_t bytes_out, long n, long block) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  void *s = __hpvm__createNodeND(1, Sweep, block);
  __hpvm__bindIn(s, 0, 0, 0);
  __hpvm__bindIn(s, 1, 1, 0);
  __hpvm__bindIn(s, 2, 2, 0);
  __hpvm__bindIn(s, 3, 3, 0);
  __hpvm__bindIn(s, 4, 4, 0);
}

void Root(float *in, size_t bytes_in, float *out, size_t bytes_out, long n, long block, long blocks) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, in, 1, out);
  void *b = __hpvm__createNodeND(1, Blocks, blocks);
  __hpvm__bindIn(b, 0, 0, 0);
  __hpvm__bindIn(b, 1, 1, 0);
  __hpvm__bindIn(b, 2, 2, 0);
  __hpvm__bindIn(b, 3, 3, 0);
  __hpvm__bindIn(b, 4, 4, 0);
  __hpvm__bindIn(b, 5, 5, 0);
}

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *out;
  size_t bytes_out;
  long n, block, blocks;
} In;

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000;
  long block = argc > 2 ? atol(argv[2]) : 64;
  long steps = argc > 3 ? atol(argv[3]) : 4;
  if (n < 1 || block < 1 || steps < 1 || argc > 4) {
    fprintf(stderr, "usage: %s [N [BLOCK [STEPS]]]\n", argv[0]);
    return 2;
  }
  size_t bytes = (size_t)n * sizeof(float);
  float *a = malloc(bytes), *b = malloc(bytes), *ra = malloc(bytes), *rb = malloc(bytes);
  for (long i = 0; i < n; ++i) {
    a[i] = ra[i] = (float)((i * 7) % 13);
    b[i] = rb[i] = 0.0f;
  }
  __hpvm__init();
  llvm_hpvm_track_mem(a, bytes);
  llvm_hpvm_track_mem(b, bytes);
  for (long s = 0; s < steps; ++s) {
    In args = {s % 2 ? b : a, bytes, s % 2 ? a : b, bytes, n, block, (n + block - 1) / block};
    void *g = __hpvm__launch(0, Root, &args);
    __hpvm__wait(g);
  }
  float *res = steps % 2 ? b : a;
  llvm_hpvm_request_mem(res, bytes);
  for (long s = 0; s < steps; ++s) {
    float *in = s % 2 ? rb : ra, *out = s % 2 ? ra : rb;
    for (long i = 0; i < n; ++i) {
      out[i] = i > 0 && i < n - 1 ? (in[i - 1] + in[i] + in[i + 1]) / 3.0f : in[i];
    }
  }
  float *ref = steps % 2 ? rb : ra;
  long bad = 0;
  for (long i = 0; i < n; ++i) {
    bad += res[i] != ref[i];
  }
  printf("checksum %016llx\n", fnv1a(res, bytes));
  __hpvm__cleanup();
  printf("jacobi1d n=%ld block=%ld: %s (%ld wrong)\n", n, block, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
