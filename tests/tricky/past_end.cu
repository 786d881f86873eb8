// Reads just past a buffer's end, which a GPU tolerates (cudaMalloc rounds allocations up):
// a 3-point stencil whose last thread reads one element beyond the array, its value unused.
// The array ends exactly at a 64 KiB boundary, where a device copy backed granule by granule
// would end too.
#include <cstdio>
#include <cuda_runtime.h>
#include <cstdlib>
#include "../programs/check.h"

__global__ void smooth(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float right = in[i + 1];  // in[n] is read, and dropped below
    out[i] = i + 1 < n ? (in[i] + right) * 0.5f : in[i];
  }
}

int main(int argc, char **argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 1 << 16;  // 256 KiB of floats
  float *h = new float[n], *r = new float[n];
  for (int i = 0; i < n; i++) h[i] = (float)(i % 100);
  float *din, *dout;
  cudaMalloc(&din, n * sizeof(float));
  cudaMalloc(&dout, n * sizeof(float));
  cudaMemcpy(din, h, n * sizeof(float), cudaMemcpyHostToDevice);
  smooth<<<(n + 255) / 256, 256>>>(din, dout, n);
  cudaMemcpy(r, dout, n * sizeof(float), cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < n; i++) bad += r[i] != (i + 1 < n ? (h[i] + h[i + 1]) * 0.5f : h[i]);
  printf("checksum %016llx\n", fnv1a(r, n * sizeof(float)));
  printf("%s: %d wrong\n", bad ? "FAIL" : "PASS", bad);
  return bad != 0;
}
