/*
 * histogram.cu -- reductions through atomics, written the common way: a 256-bin histogram of
 * N bytes (each block counts into a shared-memory histogram, then adds it to the global one
 * with atomicAdd) and a sum of N floats (a block's threads add up their elements, then one
 * atomicAdd per block); STEPS rounds of both, timed with CUDA events around the loop.
 * Usage: histogram [N [STEPS]]   (defaults 1<<28 20)
 * Prints `kernel_ms <ms>` (the loop, between the events), PASS when the bins count every byte
 * once per step, the float sum, and `checksum <hex>` of the bins (the sum, added in any
 * order, rounds differently from run to run once it passes 2^24).
 */
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

#define BINS 256
#define PER_THREAD 16

// Each thread counts PER_THREAD consecutive bytes into its block's shared histogram.
__global__ void histogram(const unsigned char *__restrict__ data, unsigned *bins, int n) {
  __shared__ unsigned local[BINS];
  local[threadIdx.x] = 0;
  __syncthreads();
  int first = (blockIdx.x * blockDim.x + threadIdx.x) * PER_THREAD;
  for (int k = 0; k < PER_THREAD; ++k)
    if (first + k < n) atomicAdd(&local[data[first + k]], 1u);
  __syncthreads();
  atomicAdd(&bins[threadIdx.x], local[threadIdx.x]);
}

__global__ void sum(const float *__restrict__ x, float *total, int n) {
  __shared__ float part[BINS];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  part[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(total, part[0]);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1 << 28;
  int steps = argc > 2 ? atoi(argv[2]) : 20;
  if (n < 1 || steps < 1) {
    fprintf(stderr, "usage: histogram [N >= 1 [STEPS >= 1]]\n");
    return 2;
  }
  unsigned char *h = (unsigned char *)malloc(n);
  float *hx = (float *)malloc((size_t)n * sizeof(float));
  for (int i = 0; i < n; ++i) {
    uint32_t v = (uint32_t)i * 2654435761u;
    h[i] = (unsigned char)(v >> 24);
    hx[i] = (float)((v >> 20) % 8);
  }
  unsigned char *data;
  unsigned *bins;
  float *x, *total;
  CHECK(cudaMalloc(&data, n));
  CHECK(cudaMalloc(&x, (size_t)n * sizeof(float)));
  CHECK(cudaMalloc(&bins, BINS * sizeof(unsigned)));
  CHECK(cudaMalloc(&total, sizeof(float)));
  CHECK(cudaMemcpy(data, h, n, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(x, hx, (size_t)n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(bins, 0, BINS * sizeof(unsigned)));
  CHECK(cudaMemset(total, 0, sizeof(float)));
  int hist_blocks = (n + BINS * PER_THREAD - 1) / (BINS * PER_THREAD), sum_blocks = (n + BINS - 1) / BINS;
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start));
  for (int s = 0; s < steps; ++s) {
    histogram<<<hist_blocks, BINS>>>(data, bins, n);
    sum<<<sum_blocks, BINS>>>(x, total, n);
  }
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  CHECK(cudaGetLastError());
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  unsigned got[BINS];
  float t = 0;
  CHECK(cudaMemcpy(got, bins, sizeof got, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&t, total, sizeof t, cudaMemcpyDeviceToHost));
  unsigned long long want_total = 0, counted = 0;
  for (int i = 0; i < n; ++i) want_total += (unsigned long long)hx[i];
  for (int b = 0; b < BINS; ++b) counted += got[b];
  int ok = counted == (unsigned long long)n * steps;
  uint64_t sum_hash = 1469598103934665603ull;
  for (int b = 0; b < BINS; ++b) sum_hash = (sum_hash ^ got[b]) * 1099511628211ull;
  printf("kernel_ms %.3f\n", ms);
  printf("%s\n", ok ? "PASS" : "FAIL");
  printf("sum %.6g (exact: %.6g)\n", t, (double)want_total * steps);
  printf("checksum %016llx\n", (unsigned long long)sum_hash);
  CHECK(cudaFree(data));
  CHECK(cudaFree(x));
  CHECK(cudaFree(bins));
  CHECK(cudaFree(total));
  free(h);
  free(hx);
  return ok ? 0 : 1;
}
