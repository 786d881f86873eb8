/*
 * launches.cu -- many short launches, as time-stepping CUDA programs make them: each step
 * launches three small kernels whose scalar argument (the step) changes every time, the
 * shape of PolyBench-ACC's fdtd-2d, adi and gramschmidt loops. With a small N the time is
 * the launch path's (the runtime's work per launch), not the kernels'.
 * Usage: launches [N [STEPS]]   (defaults 65536 1000)
 * Prints `kernel_ms <ms>` (the loop, between CUDA events) and `checksum <hex>` of the result.
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

__global__ void source(float *e, int n, int t) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i == 0) e[0] = (float)t;
  else if (i < n) e[i] = 0.999f * e[i];
}

__global__ void update_h(const float *e, float *h, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n - 1) h[i] = h[i] - 0.5f * (e[i + 1] - e[i]);
}

__global__ void update_e(float *e, const float *h, int n, int t) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > 0 && i < n) e[i] = e[i] - 0.5f * (h[i] - h[i - 1]) + (t & 1 ? 1e-6f : -1e-6f);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 65536;
  int steps = argc > 2 ? atoi(argv[2]) : 1000;
  if (n < 2 || steps < 1) {
    fprintf(stderr, "usage: launches [N >= 2 [STEPS >= 1]]\n");
    return 2;
  }
  size_t bytes = (size_t)n * sizeof(float);
  float *host = (float *)malloc(bytes);
  for (int i = 0; i < n; ++i) host[i] = (float)(i % 97) / 97.0f;
  float *e, *h;
  CHECK(cudaMalloc(&e, bytes));
  CHECK(cudaMalloc(&h, bytes));
  CHECK(cudaMemcpy(e, host, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(h, 0, bytes));
  int block = 256, grid = (n + block - 1) / block;
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start));
  for (int t = 0; t < steps; ++t) {
    source<<<grid, block>>>(e, n, t);
    update_h<<<grid, block>>>(e, h, n);
    update_e<<<grid, block>>>(e, h, n, t);
  }
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  CHECK(cudaGetLastError());
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(host, e, bytes, cudaMemcpyDeviceToHost));
  uint64_t sum = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) {
    uint32_t bits;
    memcpy(&bits, &host[i], sizeof bits);
    sum = (sum ^ bits) * 1099511628211ull;
  }
  printf("kernel_ms %.3f\n", ms);
  printf("checksum %016llx\n", (unsigned long long)sum);
  CHECK(cudaFree(e));
  CHECK(cudaFree(h));
  free(host);
  return 0;
}
