// Two streams, of the lowest and the highest priority, each copying its own array in halves
// through pointers into it, as NVIDIA's StreamPriorities sample does: no stream's kernels touch
// another's buffers, so neither waits for the other, and no launch needs its maps to say so
// (tests/gpu_path.rs reads the stand-in driver's trace and the policy log).
// Usage: stream_own [N]  (default 8192 elements per array); prints PASS or FAIL.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void copy(int *dst, const int *src, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) dst[i] = src[i] + 1;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 8192;
  cudaStream_t low, high;
  int least = 0, greatest = 0;
  cudaDeviceGetStreamPriorityRange(&least, &greatest);
  cudaStreamCreateWithPriority(&low, cudaStreamNonBlocking, least);
  cudaStreamCreateWithPriority(&high, cudaStreamNonBlocking, greatest);
  int *src[2], *dst[2];
  int *host = (int *)malloc(n * sizeof(int));
  for (int i = 0; i < n; ++i) host[i] = i;
  for (int s = 0; s < 2; ++s) {
    cudaMalloc(&src[s], n * sizeof(int));
    cudaMalloc(&dst[s], n * sizeof(int));
    cudaMemcpy(src[s], host, n * sizeof(int), cudaMemcpyHostToDevice);
  }
  int half = n / 2;
  for (int j = 0; j < n; j += half) {
    copy<<<8, 128, 0, low>>>(dst[0] + j, src[0] + j, half);
    copy<<<8, 128, 0, high>>>(dst[1] + j, src[1] + j, half);
  }
  cudaDeviceSynchronize();
  int bad = 0;
  for (int s = 0; s < 2; ++s) {
    cudaMemcpy(host, dst[s], n * sizeof(int), cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; ++i) bad += host[i] != i + 1;
  }
  printf("%s\n", bad ? "FAIL" : "PASS");
  return bad != 0;
}
