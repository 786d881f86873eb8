/*
 * fence.cu -- memory fences in a kernel (`__threadfence`, `_block`, `_system`), as
 * reductions and work queues write them: the kernel must stay a GPU kernel (LLVM 19's NVPTX
 * cannot select the IR fence the CUDA frontend gives the CPU) and compute the same on every
 * device. Prints PASS and the last element.
 */
#include <cstdio>
__global__ void k(float *x, float *sum, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 2.0f * x[i];
  __threadfence();
  __threadfence_block();
  __threadfence_system();
  if (i < n) sum[i] = x[i] + 1.0f;
}
int main() {
  int n = 1000; float *x, *s; cudaMalloc(&x, n * 4); cudaMalloc(&s, n * 4);
  float h[1000]; for (int i = 0; i < n; ++i) h[i] = i;
  cudaMemcpy(x, h, n * 4, cudaMemcpyHostToDevice);
  k<<<(n + 255) / 256, 256>>>(x, s, n);
  cudaMemcpy(h, s, n * 4, cudaMemcpyDeviceToHost);
  printf("%s %g\n", h[999] == 1999.0f ? "PASS" : "FAIL", h[999]);
  return 0;
}
