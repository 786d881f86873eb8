// A warp reduction (__shfl_down_sync, __ballot_sync): GPUs run it, and simulated devices
// (the block's threads as fibers). Sums 0..n-1 per block of 256 and counts the blocks with a positive sum.
#include <cstdio>
#include <cstdlib>

__global__ void block_sums(const int *in, int *sums, unsigned *ballots, int n) {
  __shared__ int partial[8];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = i < n ? in[i] : 0;
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  unsigned odd = __ballot_sync(0xffffffffu, (i & 1) && i < n);
  if (threadIdx.x % 32 == 0) {
    partial[threadIdx.x / 32] = v;
    ballots[i / 32] = odd;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int s = 0;
    for (int w = 0; w < 8; ++w) s += partial[w];
    sums[blockIdx.x] = s;
  }
}

int main() {
  const int n = 1 << 20, blocks = n / 256;
  int *in, *sums;
  unsigned *ballots;
  cudaMallocManaged(&in, n * sizeof(int), 1);
  cudaMallocManaged(&sums, blocks * sizeof(int), 1);
  cudaMallocManaged(&ballots, n / 32 * sizeof(unsigned), 1);
  for (int i = 0; i < n; ++i) in[i] = i % 7;
  block_sums<<<blocks, 256>>>(in, sums, ballots, n);
  cudaDeviceSynchronize();
  int bad = 0;
  for (int b = 0; b < blocks; ++b) {
    int want = 0;
    for (int i = b * 256; i < b * 256 + 256; ++i) want += i % 7;
    bad += sums[b] != want;
  }
  for (int w = 0; w < n / 32; ++w) bad += ballots[w] != 0xaaaaaaaau;
  printf("%s\n", bad ? "FAIL" : "PASS");
  return bad != 0;
}
