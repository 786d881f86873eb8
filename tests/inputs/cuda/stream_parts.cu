// Each of four streams fills its own quarter of one buffer, through a pointer into it, as
// simpleStreams and simpleHyperQ do; then one stream sums the whole buffer. On GPUs the four
// fills run beside one another (what each writes is exact, and they touch different bytes),
// and the sum waits for all four (tests/gpu_path.rs reads the stand-in driver's trace).
// Usage: stream_parts [N]  (default 4096 elements per stream); prints the sum and PASS or FAIL.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void fill(int *part, int n, int seed) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) part[i] = seed * 7 + i % 5;
}

__global__ void sum(const int *all, int n, long long *out) {
  long long s = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += all[i];
  atomicAdd((unsigned long long *)out, (unsigned long long)s);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4096;
  const int k = 4;
  int *d;
  long long *out;
  cudaStream_t s[k];
  for (int j = 0; j < k; ++j) cudaStreamCreate(&s[j]);
  cudaMalloc(&d, k * n * sizeof(int));
  cudaMalloc(&out, sizeof(long long));
  cudaMemset(out, 0, sizeof(long long));
  cudaDeviceSynchronize();
  for (int j = 0; j < k; ++j) fill<<<(n + 127) / 128, 128, 0, s[j]>>>(d + j * n, n, j);
  sum<<<1, 128, 0, s[0]>>>(d, k * n, out);
  long long got = 0, want = 0;
  cudaMemcpy(&got, out, sizeof got, cudaMemcpyDeviceToHost);
  for (int j = 0; j < k; ++j)
    for (int i = 0; i < n; ++i) want += j * 7 + i % 5;
  printf("sum %lld\n%s\n", got, got == want ? "PASS" : "FAIL");
  return got == want ? 0 : 1;
}
