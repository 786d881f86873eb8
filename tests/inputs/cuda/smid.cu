// Inline PTX the CPU has no meaning for (the multiprocessor a thread runs on): GPUs run it as
// written, simulated devices must stop at the call's line.
#include <cuda_runtime.h>

__global__ void where(unsigned *out) {
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  out[threadIdx.x] = sm;
}

int main() {
  unsigned *out;
  cudaMalloc(&out, 4 * sizeof(unsigned));
  where<<<1, 4>>>(out);
  cudaDeviceSynchronize();
  return 0;
}
