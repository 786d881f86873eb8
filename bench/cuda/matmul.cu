/*
 * matmul.cu -- a single-GPU CUDA program as people write it: C = A B for N x N floats with
 * 32 x 32 shared-memory tiles, launched REPEATS times, timed with CUDA events.
 * Usage: matmul [N [REPEATS]]   (defaults 4096 5; N a multiple of 32)
 * Prints `kernel_ms <ms>` (all repeats, between the events) and `checksum <hex>` of C.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define TILE 32
#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

__global__ void matmul(const float *A, const float *B, float *C, int n) {
  __shared__ float ta[TILE][TILE];
  __shared__ float tb[TILE][TILE];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int t = 0; t < n; t += TILE) {
    ta[ty][tx] = A[row * n + t + tx];
    tb[ty][tx] = B[(t + ty) * n + col];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += ta[ty][k] * tb[k][tx];
    __syncthreads();
  }
  C[row * n + col] = acc;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4096;
  int repeats = argc > 2 ? atoi(argv[2]) : 5;
  if (n < TILE || n % TILE != 0 || repeats < 1) {
    fprintf(stderr, "usage: matmul [N, a multiple of %d [REPEATS >= 1]]\n", TILE);
    return 2;
  }
  size_t bytes = (size_t)n * n * sizeof(float);
  float *a = (float *)malloc(bytes), *b = (float *)malloc(bytes), *c = (float *)malloc(bytes);
  for (size_t i = 0; i < (size_t)n * n; ++i) {
    a[i] = (float)(i % 7) - 3.0f;
    b[i] = (float)(i % 5) - 2.0f;
  }
  float *da, *db, *dc;
  CHECK(cudaMalloc(&da, bytes));
  CHECK(cudaMalloc(&db, bytes));
  CHECK(cudaMalloc(&dc, bytes));
  CHECK(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start));
  for (int r = 0; r < repeats; ++r) matmul<<<dim3(n / TILE, n / TILE), dim3(TILE, TILE)>>>(da, db, dc, n);
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  CHECK(cudaGetLastError());
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost));
  uint64_t sum = 1469598103934665603ull;
  for (size_t i = 0; i < (size_t)n * n; ++i) {
    uint32_t bits;
    memcpy(&bits, &c[i], sizeof bits);
    sum = (sum ^ bits) * 1099511628211ull;
  }
  printf("kernel_ms %.3f\n", ms);
  printf("checksum %016llx\n", (unsigned long long)sum);
  return 0;
}
