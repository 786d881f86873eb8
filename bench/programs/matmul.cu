/*
 * matmul.cu -- the Mekong thesis's first benchmark (section 4.1) as plain single-GPU CUDA:
 * C = A x B for square N x N float matrices, one thread per element of C, no shared memory,
 * 16 x 16 blocks, launched REPS times between two CUDA events.
 * Usage: matmul [N [REPS]]   (defaults 1024 1)
 * Prints `kernel_ms <ms>`, `checksum <hex>` of C, then PASS or FAIL: 64 rows of C (all of
 * them when N <= 64) against a double-precision host product, within a relative 1e-4.
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

__global__ void mat_mul(float *C, const float *A, const float *B, int n) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= n || col >= n) return;
  float acc = 0;
  for (int m = 0; m < n; ++m) acc += A[row * n + m] * B[m * n + col];
  C[row * n + col] = acc;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1024;
  int reps = argc > 2 ? atoi(argv[2]) : 1;
  if (n < 1 || reps < 1) {
    fprintf(stderr, "usage: matmul [N >= 1 [REPS >= 1]]\n");
    return 2;
  }
  size_t count = (size_t)n * n, bytes = count * sizeof(float);
  float *a = (float *)malloc(bytes), *b = (float *)malloc(bytes), *c = (float *)malloc(bytes);
  for (size_t i = 0; i < count; ++i) {
    a[i] = (float)((i * 7 + 3) % 101) / 101.0f - 0.5f;
    b[i] = (float)((i * 13 + 5) % 97) / 97.0f - 0.5f;
  }
  float *da, *db, *dc;
  CHECK(cudaMalloc(&da, bytes));
  CHECK(cudaMalloc(&db, bytes));
  CHECK(cudaMalloc(&dc, bytes));
  CHECK(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice));
  dim3 block(16, 16), grid((n + 15) / 16, (n + 15) / 16);
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start));
  for (int r = 0; r < reps; ++r) mat_mul<<<grid, block>>>(dc, da, db, n);
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  CHECK(cudaGetLastError());
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost));

  int bad = 0, rows = n < 64 ? n : 64;
  for (int k = 0; k < rows; ++k) {
    int row = (int)(((int64_t)k * 2654435761u) % n);
    if (rows == n) row = k;
    for (int col = 0; col < n; ++col) {
      double want = 0, scale = 0;
      for (int m = 0; m < n; ++m) {
        want += (double)a[(size_t)row * n + m] * b[(size_t)m * n + col];
        scale += fabs((double)a[(size_t)row * n + m] * b[(size_t)m * n + col]);
      }
      bad += fabs(c[(size_t)row * n + col] - want) > 1e-4 * scale + 1e-6;
    }
  }
  uint64_t sum = 1469598103934665603ull;
  for (size_t i = 0; i < count; ++i) {
    uint32_t bits;
    memcpy(&bits, &c[i], sizeof bits);
    sum = (sum ^ bits) * 1099511628211ull;
  }
  printf("kernel_ms %.3f\n", ms);
  printf("checksum %016llx\n", (unsigned long long)sum);
  printf("%s (%d of %d checked elements differ)\n", bad ? "FAIL" : "PASS", bad, rows * n);
  CHECK(cudaFree(da));
  CHECK(cudaFree(db));
  CHECK(cudaFree(dc));
  free(a);
  free(b);
  free(c);
  return bad ? 1 : 0;
}
