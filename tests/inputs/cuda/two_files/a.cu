// One of two files of a program: scale<float> instantiated here too, and a `static` kernel
// whose name main.cu's own `static` kernel shares.
#include "scale.cuh"

static __global__ void bump(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

void run_a(float *d, int n) {
  scale<float><<<(n + 127) / 128, 128>>>(d, 2.0f, n);
  bump<<<(n + 127) / 128, 128>>>(d, n);
}
