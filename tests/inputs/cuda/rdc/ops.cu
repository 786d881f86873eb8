// Relocatable device code, the file that defines: a `__device__` function and a `__device__`
// variable that main.cu's kernel uses, and a `static` kernel and variable whose names main.cu's
// own share (each file must keep its own).
#include <cuda_runtime.h>

__device__ float offset;
static __device__ float step = 0.5f;

__device__ float transform(float x) { return 3.0f * x + offset; }

static __global__ void bump(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += step;
}

void set_offset(float v) { cudaMemcpyToSymbol(offset, &v, sizeof v); }

void run_ops(float *d, int n) { bump<<<(n + 127) / 128, 128>>>(d, n); }
