// A buffer cleared between kernels, as iterative solvers clear their residual: on GPUs each
// clear is left in flight, as CUDA's memsets of device memory are (tests/gpu_path.rs counts
// the waits). Usage: memset_loop [ROUNDS]  (default 50); prints the sum and PASS or FAIL.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void bump(int *x, int by, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += by + i % 3;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 50, n = 1000;
  int *x, *total;
  cudaMalloc(&x, n * sizeof(int));
  cudaMalloc(&total, n * sizeof(int));
  cudaMemset(total, 0, n * sizeof(int));
  for (int r = 0; r < rounds; ++r) {
    cudaMemset(x, 0, n * sizeof(int));
    bump<<<(n + 127) / 128, 128>>>(x, r, n);
    bump<<<(n + 127) / 128, 128>>>(total, r, n);
  }
  int *h = (int *)malloc(n * sizeof(int)), *t = (int *)malloc(n * sizeof(int));
  cudaMemcpy(h, x, n * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(t, total, n * sizeof(int), cudaMemcpyDeviceToHost);
  int bad = 0;
  long sum = 0;
  for (int i = 0; i < n; ++i) {
    bad += h[i] != rounds - 1 + i % 3 || t[i] != rounds * (rounds - 1) / 2 + rounds * (i % 3);
    sum += h[i] + t[i];
  }
  printf("sum %ld\n%s\n", sum, bad || cudaGetLastError() != cudaSuccess ? "FAIL" : "PASS");
  return bad ? 1 : 0;
}
