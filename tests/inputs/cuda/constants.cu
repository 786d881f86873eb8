/*
 * constants.cu -- for the stand-in driver (`tests/gpu_path.rs`): a `__constant__` array whose
 * GPU copy the runtime places in the module's constant bank (its kernel reads it there), and
 * one whose address the program passes as a pointer first, so that its copy is an ordinary
 * allocation by the time a kernel could read it from the bank (that kernel then reads it
 * through its parameter). Nothing is checked: kernels do not run on the stand-in.
 */
#include <cstdio>

__constant__ float kA[1024];
__constant__ float kB[64];

__global__ void read_a(float *out, int n, int m) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float acc = 0.0f;
  for (int j = 0; j < m; j++)
    acc += kA[j] * (float)i;
  out[i] = acc;
}

__global__ void read_b(float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] += kB[i % 64];
}

__global__ void via_pointer(const float *p, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = p[i % 64];
}

int main() {
  const int n = 4096;
  float host[1024];
  for (int j = 0; j < 1024; j++)
    host[j] = (float)j;
  cudaMemcpyToSymbol(kA, host, sizeof(kA));
  cudaMemcpyToSymbol(kB, host, sizeof(kB));
  float *out, *b;
  cudaMalloc(&out, n * sizeof(float));
  cudaGetSymbolAddress((void **)&b, kB);
  via_pointer<<<n / 128, 128>>>(b, out, n);
  for (int m = 1; m <= 3; m++)
    read_a<<<n / 128, 128>>>(out, n, m * 100);
  read_b<<<n / 128, 128>>>(out, n);
  cudaDeviceSynchronize();
  printf("done\n");
  return 0;
}
