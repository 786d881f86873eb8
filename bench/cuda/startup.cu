/*
 * startup.cu -- a program whose whole run is start-up: one short kernel over a small array,
 * a copy back and a check. Its wall time against nvcc's build measures what the runtime
 * costs before and around a first launch (contexts, modules, peer access); scripts/device/
 * startup.sh runs it with the driver's JIT cache off.
 * Usage: startup [N]   (default 4096)
 * Prints PASS or FAIL, `kernel_ms` (the launch, between two events) and `checksum <hex>`.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

__global__ void axpy(float *y, const float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4096;
  if (n < 1 || n > (1 << 28)) {
    fprintf(stderr, "usage: startup [1 <= N <= 2^28]\n");
    return 2;
  }
  size_t bytes = (size_t)n * sizeof(float);
  float *x = (float *)malloc(bytes), *y = (float *)malloc(bytes);
  for (int i = 0; i < n; ++i) {
    x[i] = (float)(i % 17);
    y[i] = (float)(i % 5);
  }
  float *dx, *dy;
  if (cudaMalloc(&dx, bytes) != cudaSuccess || cudaMalloc(&dy, bytes) != cudaSuccess) return 1;
  cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  axpy<<<(n + 255) / 256, 256>>>(dy, dx, 2.0f, n);
  cudaEventRecord(stop);
  if (cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) return 1;
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  uint64_t sum = 1469598103934665603ull;
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    if (y[i] != 2.0f * (float)(i % 17) + (float)(i % 5)) ++bad;
    uint32_t bits;
    memcpy(&bits, &y[i], sizeof bits);
    sum = (sum ^ bits) * 1099511628211ull;
  }
  printf("%s\nkernel_ms %.3f\nchecksum %016llx\n", bad ? "FAIL" : "PASS", ms, (unsigned long long)sum);
  cudaFree(dx);
  cudaFree(dy);
  free(x);
  free(y);
  return bad != 0;
}
