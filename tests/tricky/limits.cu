// Launches beyond the device's limits fail at once with CUDA's codes, and leave the program
// able to go on. A bad block or grid shape is cudaErrorInvalidConfiguration up to CUDA 12 and
// cudaErrorInvalidValue under CUDA 13's runtime (seen on an H100 with driver 580): either is
// CUDA's answer.
#include <cstdio>
#include <cuda_runtime.h>
#include "../programs/check.h"

__global__ void fill(int *out, int n) {
  extern __shared__ int scratch[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  scratch[threadIdx.x] = i;
  __syncthreads();
  if (i < n) out[i] = scratch[threadIdx.x];
}

int main() {
  const int n = 256;
  int *d, h[n];
  int bad = 0;
  cudaMalloc(&d, sizeof h);
  fill<<<1, 256, 1u << 30>>>(d, n);
  cudaError_t e = cudaGetLastError();
  if (e != cudaErrorInvalidValue) { printf("1 GiB of shared memory: %s\n", cudaGetErrorName(e)); bad++; }
  fill<<<1, 2048, 0>>>(d, n);
  e = cudaGetLastError();
  if (e != cudaErrorInvalidConfiguration && e != cudaErrorInvalidValue) {
    printf("2048 threads: %s\n", cudaGetErrorName(e));
    bad++;
  }
  fill<<<dim3(1, 1u << 17), 1, 4>>>(d, n);
  e = cudaGetLastError();
  if (e != cudaErrorInvalidConfiguration && e != cudaErrorInvalidValue) {
    printf("grid y of 2^17: %s\n", cudaGetErrorName(e));
    bad++;
  }
  fill<<<4, 64, 64 * sizeof(int)>>>(d, n);
  bad += cudaGetLastError() != cudaSuccess;
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; i++) bad += h[i] != i;
  printf("checksum %016llx\n", fnv1a(h, sizeof h));
  printf("%s: %d wrong\n", bad ? "FAIL" : "PASS", bad);
  return bad != 0;
}
