/*
 * openmp.cu -- host code parallelized with OpenMP around a kernel, as applications prepare
 * inputs and check outputs: built with nvcc's `-Xcompiler -fopenmp`. The host threads fill
 * the input and reduce the output; the kernel squares. Prints PASS, the thread count seen
 * (at least one) and the sum.
 */
#include <cstdio>
#include <cuda_runtime.h>
#include <omp.h>

__global__ void square(const int *in, long long *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = (long long)in[i] * in[i];
}

int main() {
  const int n = 100000;
  int *in = new int[n];
  long long *out = new long long[n];
  int threads = 0;
#pragma omp parallel
  {
#pragma omp single
    threads = omp_get_num_threads();
#pragma omp for
    for (int i = 0; i < n; ++i) in[i] = i % 1000 - 500;
  }
  int *din;
  long long *dout;
  cudaMalloc(&din, n * sizeof(int));
  cudaMalloc(&dout, n * sizeof(long long));
  cudaMemcpy(din, in, n * sizeof(int), cudaMemcpyHostToDevice);
  square<<<(n + 255) / 256, 256>>>(din, dout, n);
  cudaMemcpy(out, dout, n * sizeof(long long), cudaMemcpyDeviceToHost);
  long long sum = 0, want = 0;
#pragma omp parallel for reduction(+ : sum)
  for (int i = 0; i < n; ++i) sum += out[i];
  for (int i = 0; i < n; ++i) want += (long long)(i % 1000 - 500) * (i % 1000 - 500);
  printf("%s threads>=1 %d sum %lld\n", sum == want && threads >= 1 ? "PASS" : "FAIL", threads >= 1, sum);
  cudaFree(din);
  cudaFree(dout);
  delete[] in;
  delete[] out;
  return sum != want;
}
