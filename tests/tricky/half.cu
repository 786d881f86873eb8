// CUDA's half-precision header, which is inline PTX underneath: conversions both ways,
// arithmetic, pairs of halves and their comparison.
#include <cstdio>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstdlib>
#include "../programs/check.h"

__global__ void roundtrip(const float *in, __half *h, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    h[i] = __float2half_rn(in[i]);
    // 2x + (x + x) - x * 1 = 3x: exact in half precision for the values below.
    __half x = h[i];
    __half y = __hsub(__hfma(x, __float2half_rn(2.0f), __hadd(x, x)), __hmul(x, __float2half_rn(1.0f)));
    out[i] = __half2float(x) + __half2float(y);
  }
}

// Pairs of halves, as CUDA's header writes them: blocks of statements over `.f16` registers
// (`__float2half2_rn`, `__low2float`, `__high2float`) and a comparison (`__hgt2`).
__global__ void pairs(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    __half2 p = __float2half2_rn(in[i]);
    __half2 q = __floats2half2_rn(in[i], -in[i]);
    __half2 gt = __hgt2(q, __float2half2_rn(0.0f));
    out[i] = __low2float(p) + __high2float(p) + 4.0f * __low2float(gt) + 8.0f * __high2float(gt);
  }
}

int main(int argc, char **argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 512;
  float *in = new float[n], *out = new float[n];
  for (int i = 0; i < n; i++) in[i] = i == 0 ? 0.0f : (float)i / 8.0f;
  float *din, *dout;
  __half *dh;
  cudaMalloc(&din, n * sizeof(float));
  cudaMalloc(&dout, n * sizeof(float));
  cudaMalloc(&dh, n * sizeof(__half));
  cudaMemcpy(din, in, n * sizeof(float), cudaMemcpyHostToDevice);
  roundtrip<<<(n + 127) / 128, 128>>>(din, dh, dout, n);
  cudaMemcpy(out, dout, n * sizeof(float), cudaMemcpyDeviceToHost);
  // Every value i/8 below 64 is exact in half precision (11 significant bits), and so are
  // 2, 3 and 4 times it: out is 4 times the input.
  int bad = 0;
  for (int i = 0; i < n && i < 512; i++) bad += out[i] != 4.0f * in[i];
  // 2x, plus 4 where x > 0 (low half of q), plus 8 where -x > 0 (never: x >= 0).
  float *pairs_out = new float[n], *dp;
  cudaMalloc(&dp, n * sizeof(float));
  pairs<<<(n + 127) / 128, 128>>>(din, dp, n);
  cudaMemcpy(pairs_out, dp, n * sizeof(float), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n && i < 512; i++) bad += pairs_out[i] != 2.0f * in[i] + (in[i] > 0.0f ? 4.0f : 0.0f);
  printf("checksum %016llx\n", fnv1a(out, n * sizeof(float)) ^ fnv1a(pairs_out, n * sizeof(float)));
  printf("%s: %d wrong (out[0] = %g, out[n - 1] = %g)\n", bad ? "FAIL" : "PASS", bad, out[0], out[n - 1]);
  return bad != 0;
}
