// Atomics at block and system scope (`atomicAdd_block`, `atomicAdd_system`...), which clang
// makes scoped intrinsics: each thread of a grid adds, counts, swaps and masks, and the
// results are checked against what any order of those operations gives.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void scoped(int *i, unsigned *u, float *f, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  atomicAdd_system(&i[0], 2);
  atomicAdd_block(&i[1], 1);
  atomicAdd_system(&f[0], 0.5f);
  atomicInc_system(&u[0], 1u << 30);
  atomicOr_block(&u[1], 1u << (t % 32));
  atomicAnd_system(&u[2], ~(1u << (t % 16)));
  atomicXor_system(&u[3], 1u);
  int seen = atomicCAS_system(&i[2], 0, t + 1);
  if (seen == 0) atomicExch_system(&i[3], t + 1);
}

int main() {
  const int n = 1000;
  int *i, hi[4] = {0, 0, 0, -1};
  unsigned *u, hu[4] = {0, 0, ~0u, 0};
  float *f, hf = 0;
  cudaMalloc(&i, sizeof hi);
  cudaMalloc(&u, sizeof hu);
  cudaMalloc(&f, sizeof hf);
  cudaMemcpy(i, hi, sizeof hi, cudaMemcpyHostToDevice);
  cudaMemcpy(u, hu, sizeof hu, cudaMemcpyHostToDevice);
  cudaMemcpy(f, &hf, sizeof hf, cudaMemcpyHostToDevice);
  scoped<<<(n + 127) / 128, 128>>>(i, u, f, n);
  cudaMemcpy(hi, i, sizeof hi, cudaMemcpyDeviceToHost);
  cudaMemcpy(hu, u, sizeof hu, cudaMemcpyDeviceToHost);
  cudaMemcpy(&hf, f, sizeof hf, cudaMemcpyDeviceToHost);
  // The CAS winner is one thread, whichever; the exchange stores what it won with.
  int ok = hi[0] == 2 * n && hi[1] == n && hf == 0.5f * n && hu[0] == (unsigned)n && hu[1] == ~0u &&
           hu[2] == 0xffff0000u && hu[3] == (n & 1) && hi[2] >= 1 && hi[2] <= n && hi[3] == hi[2];
  printf("%d %d %g %u %x %x %u %d %d: %s\n", hi[0], hi[1], hf, hu[0], hu[1], hu[2], hu[3], hi[2], hi[3],
         ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
