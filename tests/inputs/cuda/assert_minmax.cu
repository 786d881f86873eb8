/*
 * assert_minmax.cu -- two things real programs write that nvcc takes: `assert` in device
 * code, and CUDA's integer and float min/max overloads called from host code and from
 * __host__ __device__ functions (nvcc declares them for both sides). With an argument
 * the kernel's assertion fails on purpose: the program must stop, naming the line.
 * Usage: assert_minmax [FAIL_AT]   Prints PASS and a checksum, or stops at the assertion.
 */
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__host__ __device__ int clamp_index(int i, unsigned n) { return min(max(i, 0), (int)n - 1) + (int)(max(n, 1u) - n); }

__global__ void gather(const float *in, float *out, int n, int fail_at) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    assert(i != fail_at);
    out[i] = in[clamp_index(i - 1, n)] + max(in[i], 0.5f);
  }
}

int main(int argc, char **argv) {
  int fail_at = argc > 1 ? atoi(argv[1]) : -1;
  const int n = 5000;
  float *in = new float[n], *out = new float[n];
  for (int i = 0; i < n; ++i) in[i] = (float)(i % 7) * 0.25f;
  float *din, *dout;
  cudaMalloc(&din, n * sizeof(float));
  cudaMalloc(&dout, n * sizeof(float));
  cudaMemcpy(din, in, n * sizeof(float), cudaMemcpyHostToDevice);
  gather<<<(n + 127) / 128, 128>>>(din, dout, n, fail_at);
  cudaMemcpy(out, dout, n * sizeof(float), cudaMemcpyDeviceToHost);
  int bad = 0;
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    float want = in[clamp_index(i - 1, n)] + max(in[i], 0.5f);
    bad += out[i] != want;
    sum += out[i];
  }
  unsigned u = 7;
  long long big = max(3ll, -4ll) + min(2, u);
  printf("%s %.3f %lld\n", bad == 0 && big == 5 ? "PASS" : "FAIL", sum, big);
  return bad != 0;
}
