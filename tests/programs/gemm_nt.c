/*
 * gemm_nt.c -- C = alpha * A * B^T + beta * C, column-major, written as CUDA ports usually are:
 * `int` indices and leading dimensions, a 2-D block whose size is chosen at run time, the
 * global index `parent id × instances of self + own id` computed in `int`, and a CPU level
 * above the GPU one.
 *
 *   Top (CPU, 1 instance) -> Grid (GPU, m/bx × n/by) -> Gemm (leaf, bx × by)
 *
 * Usage: gemm_nt [M [N [K [BX [BY]]]]]   (defaults 48 40 24 8 4; BX divides M, BY divides N).
 * Prints a checksum; exit 0 PASS.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

void Gemm(float *A, size_t bytes_A, int lda, float *B, size_t bytes_B, int ldb, float *C, size_t bytes_C,
          int ldc, int k, float alpha, float beta) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(3, A, B, C, 1, C);
  void *self = __hpvm__getNode();
  void *parent = __hpvm__getParentNode(self);
  int lx = __hpvm__getNodeInstanceID_x(self);
  int ly = __hpvm__getNodeInstanceID_y(self);
  int gx = __hpvm__getNodeInstanceID_x(parent);
  int gy = __hpvm__getNodeInstanceID_y(parent);
  int sx = __hpvm__getNumNodeInstances_x(self);
  int sy = __hpvm__getNumNodeInstances_y(self);
  int m = gx * sx + lx;
  int n = gy * sy + ly;
  float c = 0.0f;
  for (int i = 0; i < k; ++i) {
    c += A[m + i * lda] * B[n + i * ldb];
  }
  C[m + n * ldc] = C[m + n * ldc] * beta + alpha * c;
}

void Grid(float *A, size_t bytes_A, int lda, float *B, size_t bytes_B, int ldb, float *C, size_t bytes_C, int ldc,
          int k, float alpha, float beta, size_t bx, size_t by) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(3, A, B, C, 1, C);
  void *g = __hpvm__createNodeND(2, Gemm, bx, by);
  __hpvm__bindIn(g, 0, 0, 0);
  __hpvm__bindIn(g, 1, 1, 0);
  __hpvm__bindIn(g, 2, 2, 0);
  __hpvm__bindIn(g, 3, 3, 0);
  __hpvm__bindIn(g, 4, 4, 0);
  __hpvm__bindIn(g, 5, 5, 0);
  __hpvm__bindIn(g, 6, 6, 0);
  __hpvm__bindIn(g, 7, 7, 0);
  __hpvm__bindIn(g, 8, 8, 0);
  __hpvm__bindIn(g, 9, 9, 0);
  __hpvm__bindIn(g, 10, 10, 0);
  __hpvm__bindIn(g, 11, 11, 0);
}

void Top(float *A, size_t bytes_A, int lda, float *B, size_t bytes_B, int ldb, float *C, size_t bytes_C, int ldc,
         int k, float alpha, float beta, size_t bx, size_t by, size_t gx, size_t gy) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(3, A, B, C, 1, C);
  void *g = __hpvm__createNodeND(2, Grid, gx, gy);
  __hpvm__bindIn(g, 0, 0, 0);
  __hpvm__bindIn(g, 1, 1, 0);
  __hpvm__bindIn(g, 2, 2, 0);
  __hpvm__bindIn(g, 3, 3, 0);
  __hpvm__bindIn(g, 4, 4, 0);
  __hpvm__bindIn(g, 5, 5, 0);
  __hpvm__bindIn(g, 6, 6, 0);
  __hpvm__bindIn(g, 7, 7, 0);
  __hpvm__bindIn(g, 8, 8, 0);
  __hpvm__bindIn(g, 9, 9, 0);
  __hpvm__bindIn(g, 10, 10, 0);
  __hpvm__bindIn(g, 11, 11, 0);
  __hpvm__bindIn(g, 12, 12, 0);
  __hpvm__bindIn(g, 13, 13, 0);
}

typedef struct __attribute__((__packed__)) {
  float *A;
  size_t bytes_A;
  int lda;
  float *B;
  size_t bytes_B;
  int ldb;
  float *C;
  size_t bytes_C;
  int ldc;
  int k;
  float alpha, beta;
  size_t bx, by, gx, gy;
} In;

int main(int argc, char **argv) {
  int m = argc > 1 ? atoi(argv[1]) : 48, n = argc > 2 ? atoi(argv[2]) : 40, k = argc > 3 ? atoi(argv[3]) : 24;
  int bx = argc > 4 ? atoi(argv[4]) : 8, by = argc > 5 ? atoi(argv[5]) : 4;
  if (argc > 6 || m < 1 || n < 1 || k < 1 || bx < 1 || by < 1 || m % bx || n % by) {
    fprintf(stderr, "usage: %s [M [N [K [BX [BY]]]]] with BX | M and BY | N\n", argv[0]);
    return 2;
  }
  size_t ba = (size_t)m * k * sizeof(float), bb = (size_t)n * k * sizeof(float), bc = (size_t)m * n * sizeof(float);
  float *A = malloc(ba), *B = malloc(bb), *C = malloc(bc), *R = malloc(bc);
  for (long i = 0; i < (long)m * k; ++i) A[i] = (float)(i % 7) - 3.0f;
  for (long i = 0; i < (long)n * k; ++i) B[i] = (float)(i % 5) * 0.5f;
  for (long i = 0; i < (long)m * n; ++i) C[i] = R[i] = (float)(i % 3);
  const float alpha = 1.5f, beta = 0.5f;
  for (int y = 0; y < n; ++y) {
    for (int x = 0; x < m; ++x) {
      float c = 0.0f;
      for (int i = 0; i < k; ++i) c += A[x + i * m] * B[y + i * n];
      R[x + y * m] = R[x + y * m] * beta + alpha * c;
    }
  }
  __hpvm__init();
  llvm_hpvm_track_mem(A, ba);
  llvm_hpvm_track_mem(B, bb);
  llvm_hpvm_track_mem(C, bc);
  In in = {A, ba, m, B, bb, n, C, bc, m, k, alpha, beta, bx, by, m / bx, n / by};
  void *g = __hpvm__launch(0, Top, &in);
  __hpvm__wait(g);
  llvm_hpvm_request_mem(C, bc);
  long bad = 0;
  for (long i = 0; i < (long)m * n; ++i) {
    float d = C[i] - R[i];
    bad += d > 1e-3f || d < -1e-3f;
  }
  printf("checksum %016llx\n", fnv1a(C, bc));
  __hpvm__cleanup();
  printf("gemm_nt %dx%dx%d blocks %dx%d: %s (%ld wrong)\n", m, n, k, bx, by, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
