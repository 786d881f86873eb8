// Relocatable device code (nvcc -rdc=true, -dc): main.cu's kernel calls a `__device__`
// function and reads a `__device__` variable defined in ops.cu; both files have a `static`
// kernel `bump` and a `static __device__` variable `step` of their own.
// Usage: main [N]   (default 100000). Prints PASS or FAIL and `checksum <hex>`.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

extern __device__ float offset;
__device__ float transform(float x);
void set_offset(float v);
void run_ops(float *d, int n);

static __device__ float step = -2.0f;

static __global__ void bump(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += step;
}

__global__ void apply(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = transform(x[i]) - offset * 0.25f;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100000;
  if (n < 1) return 2;
  float *h = (float *)malloc(n * sizeof(float));
  for (int i = 0; i < n; ++i) h[i] = (float)(i % 101) * 0.125f;
  float *d;
  cudaMalloc(&d, n * sizeof(float));
  cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
  set_offset(4.0f);
  apply<<<(n + 127) / 128, 128>>>(d, n);
  run_ops(d, n);
  bump<<<(n + 127) / 128, 128>>>(d, n);
  cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
  int bad = 0;
  uint64_t sum = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) {
    float x = (float)(i % 101) * 0.125f;
    float want = ((3.0f * x + 4.0f) - 4.0f * 0.25f) + 0.5f - 2.0f;
    bad += h[i] != want;
    uint32_t bits;
    memcpy(&bits, &h[i], sizeof bits);
    sum = (sum ^ bits) * 1099511628211ull;
  }
  printf("%s (%d wrong)\nchecksum %016llx\n", bad ? "FAIL" : "PASS", bad, (unsigned long long)sum);
  cudaFree(d);
  free(h);
  return bad != 0;
}
