// A double's bits split into halves and put back together (`__double2hiint`,
// `__double2loint`, `__hiloint2double`), and wrapping counters (`atomicInc`, `atomicDec`):
// checked against the host's reading of the same bits.
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

__global__ void halves(const double *d, int *hi, int *lo, double *back, unsigned *counters, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  hi[i] = __double2hiint(d[i]);
  lo[i] = __double2loint(d[i]);
  back[i] = __hiloint2double(hi[i], lo[i]);
  atomicInc(&counters[0], 9u);
  atomicDec(&counters[1], 9u);
}

int main() {
  const int n = 100;
  double d[n], back[n];
  int hi[n], lo[n];
  for (int i = 0; i < n; ++i) d[i] = (i - 50) * 1.0e-3 + i * 12345.678;
  double *dd, *dback;
  int *dhi, *dlo;
  unsigned *dc, counters[2] = {0, 0};
  cudaMalloc(&dd, sizeof d);
  cudaMalloc(&dback, sizeof back);
  cudaMalloc(&dhi, sizeof hi);
  cudaMalloc(&dlo, sizeof lo);
  cudaMalloc(&dc, sizeof counters);
  cudaMemcpy(dd, d, sizeof d, cudaMemcpyHostToDevice);
  cudaMemcpy(dc, counters, sizeof counters, cudaMemcpyHostToDevice);
  halves<<<4, 32>>>(dd, dhi, dlo, dback, dc, n);
  cudaMemcpy(hi, dhi, sizeof hi, cudaMemcpyDeviceToHost);
  cudaMemcpy(lo, dlo, sizeof lo, cudaMemcpyDeviceToHost);
  cudaMemcpy(back, dback, sizeof back, cudaMemcpyDeviceToHost);
  cudaMemcpy(counters, dc, sizeof counters, cudaMemcpyDeviceToHost);
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    unsigned long long bits;
    memcpy(&bits, &d[i], sizeof bits);
    wrong += hi[i] != (int)(bits >> 32) || lo[i] != (int)(unsigned)bits || memcmp(&back[i], &d[i], sizeof(double));
  }
  // 100 increments wrapping at 9 end at 100 % 10; 100 decrements from 0 wrap to 9 each 10.
  wrong += counters[0] != 0 || counters[1] != 0;
  printf("%s (%d wrong; counters %u %u)\n", wrong ? "FAIL" : "PASS", wrong, counters[0], counters[1]);
  return wrong != 0;
}
