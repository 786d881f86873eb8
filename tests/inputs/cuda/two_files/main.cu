// The other file: x = (2i + 1) * 3 - 5, through kernels defined in both files.
#include <cstdio>
#include <cuda_runtime.h>
#include "scale.cuh"

void run_a(float *d, int n);

static __global__ void bump(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] -= 5.0f;
}

int main() {
  const int n = 1000;
  float h[n];
  for (int i = 0; i < n; ++i) h[i] = (float)i;
  float *d;
  cudaMalloc(&d, n * sizeof(float));
  cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
  run_a(d, n);
  scale<float><<<(n + 127) / 128, 128>>>(d, 3.0f, n);
  bump<<<(n + 127) / 128, 128>>>(d, n);
  cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < n; ++i) bad += h[i] != (2.0f * i + 1.0f) * 3.0f - 5.0f;
  printf("%s\n", bad ? "FAIL" : "PASS");
  return bad != 0;
}
