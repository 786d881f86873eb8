// Inline PTX: the lane id read through `mov.u32 %0, %%laneid;`.
#include <cstdio>
#include <cuda_runtime.h>
#include <cstdlib>
#include "../programs/check.h"

__device__ unsigned lane_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(id));
  return id;
}

__global__ void lanes(unsigned *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = lane_id();
}

int main(int argc, char **argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 1024;
  unsigned *d, *h = new unsigned[n];
  cudaMalloc(&d, n * sizeof(unsigned));
  lanes<<<(n + 127) / 128, 128>>>(d, n);
  cudaMemcpy(h, d, n * sizeof(unsigned), cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < n; i++) bad += h[i] != (unsigned)(i % 32);
  printf("checksum %016llx\n", fnv1a(h, n * sizeof(unsigned)));
  printf("%s: %d wrong\n", bad ? "FAIL" : "PASS", bad);
  return bad != 0;
}
