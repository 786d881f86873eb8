// Inline PTX: the lane id read through `mov.u32 %0, %%laneid;`, and the four-byte sum of
// absolute differences (`vabsdiff4...add`, NVIDIA's stereoDisparity `__usad4`).
#include <cstdio>
#include <cuda_runtime.h>
#include <cstdlib>
#include "../programs/check.h"

__device__ unsigned lane_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(id));
  return id;
}

__device__ unsigned sad4(unsigned a, unsigned b, unsigned c) {
  unsigned r;
  asm("vabsdiff4.u32.u32.u32.add %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}

static unsigned word(int i) { return (unsigned)i * 2654435761u; }

__global__ void lanes(unsigned *out, unsigned *sads, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = lane_id();
    sads[i] = sad4((unsigned)i * 2654435761u, (unsigned)(i + 7) * 2654435761u, (unsigned)i);
  }
}

int main(int argc, char **argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 1024;
  unsigned *d, *ds, *h = new unsigned[n], *hs = new unsigned[n];
  cudaMalloc(&d, n * sizeof(unsigned));
  cudaMalloc(&ds, n * sizeof(unsigned));
  lanes<<<(n + 127) / 128, 128>>>(d, ds, n);
  cudaMemcpy(h, d, n * sizeof(unsigned), cudaMemcpyDeviceToHost);
  cudaMemcpy(hs, ds, n * sizeof(unsigned), cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < n; i++) {
    bad += h[i] != (unsigned)(i % 32);
    unsigned a = word(i), b = word(i + 7), sum = (unsigned)i;
    for (int k = 0; k < 4; k++) {
      int x = (a >> (8 * k)) & 255, y = (b >> (8 * k)) & 255;
      sum += x > y ? x - y : y - x;
    }
    bad += hs[i] != sum;
  }
  printf("checksum %016llx\n", fnv1a(h, n * sizeof(unsigned)) ^ fnv1a(hs, n * sizeof(unsigned)));
  printf("%s: %d wrong\n", bad ? "FAIL" : "PASS", bad);
  return bad != 0;
}
