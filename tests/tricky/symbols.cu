// Symbol copies are checked as CUDA checks them: too many bytes, an offset past the end, a
// host variable that is not a symbol and a bogus address fail with CUDA's codes and write
// nothing; the neighbouring variables keep their values.
#include <cstdio>
#include <cuda_runtime.h>
#include "../programs/check.h"

__constant__ int table[4];
__device__ int neighbour[4];
int host_only[4] = {7, 7, 7, 7};

__global__ void read_table(int *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 4) out[i] = table[i] + neighbour[i];
}

int main() {
  int bad = 0;
  int src[8] = {1, 2, 3, 4, 5, 6, 7, 8}, back[8] = {0};
  int zero[4] = {0, 0, 0, 0};
  bad += cudaMemcpyToSymbol(neighbour, zero, sizeof zero) != cudaSuccess;
  bad += cudaMemcpyToSymbol(table, src, 4 * sizeof(int)) != cudaSuccess;
  cudaError_t e = cudaMemcpyToSymbol(table, src, 8 * sizeof(int));
  if (e != cudaErrorInvalidValue) { printf("too many bytes: %s\n", cudaGetErrorName(e)); bad++; }
  e = cudaMemcpyToSymbol(table, src, 2 * sizeof(int), 3 * sizeof(int));
  if (e != cudaErrorInvalidValue) { printf("offset past the end: %s\n", cudaGetErrorName(e)); bad++; }
  e = cudaMemcpyToSymbol(host_only, src, sizeof(int));
  if (e != cudaErrorInvalidSymbol) { printf("host variable: %s\n", cudaGetErrorName(e)); bad++; }
  e = cudaMemcpyToSymbol((const void *)0x10, src, sizeof(int));
  if (e != cudaErrorInvalidSymbol) { printf("bogus address: %s\n", cudaGetErrorName(e)); bad++; }
  e = cudaMemcpyFromSymbol(back, table, 8 * sizeof(int));
  if (e != cudaErrorInvalidValue) { printf("from, too many bytes: %s\n", cudaGetErrorName(e)); bad++; }
  e = cudaMemcpyFromSymbol(back, host_only, sizeof(int));
  if (e != cudaErrorInvalidSymbol) { printf("from a host variable: %s\n", cudaGetErrorName(e)); bad++; }
  cudaGetLastError();
  bad += cudaMemcpyFromSymbol(back, table, 4 * sizeof(int)) != cudaSuccess;
  for (int i = 0; i < 4; i++) bad += back[i] != i + 1;
  for (int i = 0; i < 4; i++) bad += host_only[i] != 7;
  int *d, out[4];
  cudaMalloc(&d, sizeof out);
  read_table<<<4, 1>>>(d);
  cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost);
  for (int i = 0; i < 4; i++) bad += out[i] != i + 1;
  printf("checksum %016llx\n", fnv1a(out, sizeof out));
  printf("%s: %d wrong\n", bad ? "FAIL" : "PASS", bad);
  return bad != 0;
}
