// A time-stepping loop whose launches replay (partitioned::replay) between copies that
// change what they read: every tenth step the host reads the result back and writes a new
// input, and the launch after it must see the new input.
// Usage: replay [N [STEPS]]; prints `checksum <hex>` of the result.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

__global__ void step(float *a, const float *b, int n, float t) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = a[i] * 0.5f + b[i] + t;
}

__global__ void scale(float *a, int n, float s) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] *= s;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4096;
  int steps = argc > 2 ? atoi(argv[2]) : 100;
  size_t bytes = (size_t)n * sizeof(float);
  float *ha = (float *)malloc(bytes), *hb = (float *)malloc(bytes);
  for (int i = 0; i < n; ++i) {
    ha[i] = (float)(i % 13);
    hb[i] = (float)(i % 7) * 0.25f;
  }
  float *a, *b;
  cudaMalloc(&a, bytes);
  cudaMalloc(&b, bytes);
  cudaMemcpy(a, ha, bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(b, hb, bytes, cudaMemcpyHostToDevice);
  int block = 128, grid = (n + block - 1) / block;
  for (int s = 0; s < steps; ++s) {
    step<<<grid, block>>>(a, b, n, (float)(s % 5));
    scale<<<grid, block>>>(a, n, 0.75f);
    if (s % 10 == 9) {
      // The host reads the state and changes the input the next steps read.
      cudaMemcpy(ha, a, bytes, cudaMemcpyDeviceToHost);
      hb[s % n] += ha[s % n];
      cudaMemcpy(b, hb, bytes, cudaMemcpyHostToDevice);
    }
  }
  cudaMemcpy(ha, a, bytes, cudaMemcpyDeviceToHost);
  uint64_t sum = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) {
    uint32_t bits;
    memcpy(&bits, &ha[i], sizeof bits);
    sum = (sum ^ bits) * 1099511628211ull;
  }
  printf("checksum %016llx\n", (unsigned long long)sum);
  cudaFree(a);
  cudaFree(b);
  free(ha);
  free(hb);
  return 0;
}
