// Inline PTX: the lane id read through `mov.u32 %0, %%laneid;`, the four-byte sum of
// absolute differences (`vabsdiff4...add`, NVIDIA's stereoDisparity `__usad4`), and registers
// spelled with one `%` as nvcc takes them (`%lanemask_lt`, HeCBench bscan; `%globaltimer`,
// NVIDIA's cudaGraphsPerfScaling), which clang alone refuses.
#include <cstdio>
#include <cuda_runtime.h>
#include <cstdlib>
#include "../programs/check.h"

__device__ unsigned lane_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(id));
  return id;
}

__device__ unsigned lanes_below() {
  unsigned mask;
  asm("mov.u32 %0, %lanemask_lt;" : "=r"(mask));
  return mask;
}

__device__ unsigned long long timer() {
  unsigned long long ns;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(ns));
  return ns;
}

__device__ unsigned sad4(unsigned a, unsigned b, unsigned c) {
  unsigned r;
  asm("vabsdiff4.u32.u32.u32.add %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}

static unsigned word(int i) { return (unsigned)i * 2654435761u; }

__global__ void lanes(unsigned *out, unsigned *sads, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned long long t0 = timer();
  if (i < n) {
    // The lane, the lanes below it as bits (their count is the lane), and whether the timer
    // went forward.
    out[i] = lane_id() | (__popc(lanes_below()) << 8) | ((timer() >= t0) << 16);
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
    bad += h[i] != ((unsigned)(i % 32) | (unsigned)(i % 32) << 8 | 1u << 16);
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
