// Device buffers the program never frees, one of them copied back once: at the process's
// exit nothing can read device memory, so the runtime copies nothing more back
// (tests/gpu_path.rs counts the driver's copies; a managed buffer is still made current).
#include <cstdio>

__global__ void fill(int *a, int *b, int *m, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    a[i] = i;
    b[i] = 2 * i;
    m[i] = 3 * i;
  }
}

int main() {
  const int n = 1024;
  int *a, *b, *m, host[n];
  cudaMalloc(&a, n * sizeof(int));
  cudaMalloc(&b, n * sizeof(int));
  cudaMallocManaged(&m, n * sizeof(int));
  fill<<<n / 256, 256>>>(a, b, m, n);
  cudaMemcpy(host, a, sizeof host, cudaMemcpyDeviceToHost);
  printf("%d\n", host[n - 1]);
  return 0;
}
