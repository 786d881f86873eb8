// Device printf: every conversion C has, from one thread (so the output is deterministic),
// and a line per block from the first thread of each.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void report(const float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i == 0) {
    printf("n=%d x0=%.3f x1=%e big=%lld hex=%#x char=%c str=%s ptr-null=%d |%*d|%-4u|\n", n, x[0], x[1],
           (long long)n * 4000000000LL, 255, 'q', "device", x == nullptr, 5, 42, 7u);
  }
  if (threadIdx.x == 0 && blockIdx.x < 3) printf("block %d\n", blockIdx.x);
}

int main() {
  const int n = 256;
  float h[n];
  for (int i = 0; i < n; i++) h[i] = 0.5f * i;
  float *d;
  cudaMalloc(&d, sizeof h);
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  printf("before\n");
  fflush(stdout);
  report<<<n / 64, 64>>>(d, n);
  cudaDeviceSynchronize();
  printf("after\n");
  return 0;
}
