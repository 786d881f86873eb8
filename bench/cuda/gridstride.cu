/*
 * gridstride.cu -- kernels written the way most CUDA code is: a fixed grid of a few blocks per
 * SM and grid-stride loops over N elements. Each step is a 3-point smoothing of one array into
 * another and an axpy back (two launches), the buffers swapped after each step; timed with
 * CUDA events around the loop.
 * Usage: gridstride [N [STEPS [BLOCKS_PER_SM]]]   (defaults 1<<26 50 4)
 * Prints `kernel_ms <ms>` (the loop, between the events) and `checksum <hex>` of the result.
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

__global__ void smooth(const float *__restrict__ in, float *__restrict__ out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    float l = i > 0 ? in[i - 1] : in[i];
    float r = i + 1 < n ? in[i + 1] : in[i];
    out[i] = 0.25f * l + 0.5f * in[i] + 0.25f * r;
  }
}

__global__ void axpy(float *__restrict__ y, const float *__restrict__ x, float a, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1 << 26;
  int steps = argc > 2 ? atoi(argv[2]) : 50;
  int per_sm = argc > 3 ? atoi(argv[3]) : 4;
  if (n < 2 || steps < 1 || per_sm < 1) {
    fprintf(stderr, "usage: gridstride [N >= 2 [STEPS >= 1 [BLOCKS_PER_SM >= 1]]]\n");
    return 2;
  }
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  size_t bytes = (size_t)n * sizeof(float);
  float *h = (float *)malloc(bytes);
  for (int i = 0; i < n; ++i) h[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
  float *a, *b;
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  CHECK(cudaMemcpy(a, h, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(b, 0, bytes));
  int block = 256, grid = sms * per_sm;
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start));
  for (int s = 0; s < steps; ++s) {
    smooth<<<grid, block>>>(a, b, n);
    axpy<<<grid, block>>>(b, a, 0.5f, n);
    float *t = a;
    a = b;
    b = t;
  }
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  CHECK(cudaGetLastError());
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(h, a, bytes, cudaMemcpyDeviceToHost));
  uint64_t sum = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) {
    uint32_t bits;
    memcpy(&bits, &h[i], sizeof bits);
    sum = (sum ^ bits) * 1099511628211ull;
  }
  printf("kernel_ms %.3f\n", ms);
  printf("checksum %016llx\n", (unsigned long long)sum);
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  free(h);
  return 0;
}
