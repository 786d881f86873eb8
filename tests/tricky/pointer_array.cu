// An array of device pointers in device memory: rows allocated apart, the kernel reaches
// each row through the table.
#include <cstdio>
#include <cuda_runtime.h>
#include <cstdlib>
#include "../programs/check.h"

__global__ void row_sums(float *const *rows, int cols, float *sums, int nrows) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= nrows) return;
  float s = 0;
  for (int c = 0; c < cols; c++) s += rows[r][c];
  sums[r] = s;
}

__global__ void scale_rows(float **rows, int cols, int nrows) {
  int r = blockIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < nrows && c < cols) rows[r][c] *= (float)(r + 1);
}

int main(int argc, char **argv) {
  const int nrows = argc > 2 ? atoi(argv[1]) : 64, cols = argc > 2 ? atoi(argv[2]) : 300;
  float **host_rows = new float *[nrows];
  float *h = new float[cols];
  for (int r = 0; r < nrows; r++) {
    cudaMalloc(&host_rows[r], cols * sizeof(float));
    for (int c = 0; c < cols; c++) h[c] = (float)(c % 7);
    cudaMemcpy(host_rows[r], h, cols * sizeof(float), cudaMemcpyHostToDevice);
  }
  float **rows;
  float *sums;
  cudaMalloc(&rows, nrows * sizeof(float *));
  cudaMalloc(&sums, nrows * sizeof(float));
  cudaMemcpy(rows, host_rows, nrows * sizeof(float *), cudaMemcpyHostToDevice);
  scale_rows<<<dim3((cols + 127) / 128, nrows), 128>>>(rows, cols, nrows);
  row_sums<<<(nrows + 63) / 64, 64>>>(rows, cols, sums, nrows);
  float *got = new float[nrows];
  cudaMemcpy(got, sums, nrows * sizeof(float), cudaMemcpyDeviceToHost);
  float base = 0;
  for (int c = 0; c < cols; c++) base += (float)(c % 7);
  int bad = 0;
  for (int r = 0; r < nrows; r++) bad += got[r] != base * (r + 1);
  // The rows themselves, read back through their own pointers.
  const int last = nrows - 1;
  cudaMemcpy(h, host_rows[last], cols * sizeof(float), cudaMemcpyDeviceToHost);
  for (int c = 0; c < cols; c++) bad += h[c] != (float)(last + 1) * (c % 7);
  printf("checksum %016llx\n", fnv1a(got, nrows * sizeof(float)) ^ fnv1a(h, cols * sizeof(float)));
  printf("%s: %d wrong\n", bad ? "FAIL" : "PASS", bad);
  return bad != 0;
}
