// A __device__ table of device function pointers, initialised where it is declared: each
// thread picks its operation from the table by an index read from memory.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include "../programs/check.h"

typedef float (*op_t)(float, float);

__device__ float add(float a, float b) { return a + b; }
__device__ float mul(float a, float b) { return a * b; }
__device__ float sub(float a, float b) { return a - b; }
__device__ float mad3(float a, float b) { return a * 3.0f + b; }

__device__ op_t ops[4] = {add, mul, sub, mad3};

__global__ void apply(const float *x, const float *y, float *out, const int *which, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = ops[which[i]](x[i], y[i]);
}

int main(int argc, char **argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 1000;
  float *hx = new float[n], *hy = new float[n], *ho = new float[n];
  int *hw = new int[n];
  for (int i = 0; i < n; i++) {
    hx[i] = (float)(i % 97);
    hy[i] = (float)(i % 5) - 2.0f;
    hw[i] = (i * 7) % 4;
  }
  float *x, *y, *o;
  int *w;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  cudaMalloc(&o, n * sizeof(float));
  cudaMalloc(&w, n * sizeof(int));
  cudaMemcpy(x, hx, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(y, hy, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(w, hw, n * sizeof(int), cudaMemcpyHostToDevice);
  apply<<<(n + 127) / 128, 128>>>(x, y, o, w, n);
  cudaMemcpy(ho, o, n * sizeof(float), cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < n; i++) {
    float a = hx[i], b = hy[i];
    float e = hw[i] == 0 ? a + b : hw[i] == 1 ? a * b : hw[i] == 2 ? a - b : a * 3.0f + b;
    bad += ho[i] != e;
  }
  printf("checksum %016llx\n", fnv1a(ho, n * sizeof(float)));
  printf("%s: %d wrong\n", bad ? "FAIL" : "PASS", bad);
  return bad != 0;
}
