/*
 * warps.cu -- warp-level code as CUDA programs write it: a block sum by __shfl_down_sync
 * within each warp and through shared memory across warps (the last warp step in warp 0
 * alone), a __ballot_sync per warp, and a maximum by __shfl_xor_sync butterflies; then per
 * warp __match_any_sync, __match_all_sync and the __reduce_*_sync family. The last block is
 * partial, so its last warp has lanes past the data. Checked against the host.
 * Usage: warps [N]   (default 10000, at least 1)
 * Prints `checksum <hex>` of the results and PASS or FAIL.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
// Warp-level sum with __shfl_down_sync, block sum through shared memory, plus a ballot count
// and a butterfly max; each block writes its results.
__global__ void reduce(const int *in, int *sums, unsigned *ballots, int *maxes, int n) {
  __shared__ int partial[32];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = i < n ? in[i] : 0;
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int s = v;
  for (int off = 16; off > 0; off /= 2) s += __shfl_down_sync(0xffffffffu, s, off);
  unsigned b = __ballot_sync(0xffffffffu, v % 3 == 0);
  int m = v;
  for (int off = 16; off > 0; off /= 2) m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
  if (lane == 0) partial[warp] = s;
  __syncthreads();
  if (warp == 0) {
    int t = lane < blockDim.x / 32 ? partial[lane] : 0;
    for (int off = 16; off > 0; off /= 2) t += __shfl_down_sync(0xffffffffu, t, off);
    if (lane == 0) sums[blockIdx.x] = t;
  }
  if (lane == 0) { ballots[blockIdx.x * (blockDim.x / 32) + warp] = b; maxes[blockIdx.x * (blockDim.x / 32) + warp] = m; }
}
// Per warp: lane 0's match mask of v % 4, whether the warp agrees on v / 1000 (all zero),
// and the warp's sum, signed min, unsigned max and xor of v - 500 by __reduce_*_sync.
__global__ void groups(const int *in, unsigned *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = i < n ? in[i] : 0;
  unsigned same = __match_any_sync(0xffffffffu, v % 4);
  int pred = 0;
  unsigned all = __match_all_sync(0xffffffffu, v / 1000, &pred);
  unsigned w = (unsigned)(v - 500);
  unsigned sum = __reduce_add_sync(0xffffffffu, w);
  int mn = __reduce_min_sync(0xffffffffu, (int)w);
  unsigned mx = __reduce_max_sync(0xffffffffu, w);
  unsigned x = __reduce_xor_sync(0xffffffffu, w);
  if (threadIdx.x % 32 == 0) {
    unsigned *o = out + (i / 32) * 6;
    o[0] = same; o[1] = all + (unsigned)pred; o[2] = sum; o[3] = (unsigned)mn; o[4] = mx; o[5] = x;
  }
}
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 10000;
  int threads = 256, blocks = (n + threads - 1) / threads, warps = blocks * threads / 32;
  int *h = (int *)malloc(n * sizeof(int));
  for (int i = 0; i < n; i++) h[i] = (int)((i * 2654435761u) % 1000);
  int *in, *sums, *maxes; unsigned *ballots;
  cudaMalloc(&in, n * sizeof(int)); cudaMalloc(&sums, blocks * sizeof(int));
  cudaMalloc(&ballots, warps * sizeof(unsigned)); cudaMalloc(&maxes, warps * sizeof(int));
  cudaMemcpy(in, h, n * sizeof(int), cudaMemcpyHostToDevice);
  reduce<<<blocks, threads>>>(in, sums, ballots, maxes, n);
  int *hs = (int *)malloc(blocks * sizeof(int)), *hm = (int *)malloc(warps * sizeof(int));
  unsigned *hb = (unsigned *)malloc(warps * sizeof(unsigned));
  cudaMemcpy(hs, sums, blocks * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(hb, ballots, warps * sizeof(unsigned), cudaMemcpyDeviceToHost);
  cudaMemcpy(hm, maxes, warps * sizeof(int), cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int bl = 0; bl < blocks; bl++) {
    int want = 0;
    for (int i = bl * threads; i < (bl + 1) * threads && i < n; i++) want += h[i];
    if (hs[bl] != want) bad++;
  }
  for (int w = 0; w < warps; w++) {
    unsigned want = 0; int mx = 0;
    for (int l = 0; l < 32; l++) { int i = w * 32 + l; int v = i < n ? h[i] : 0; if (v % 3 == 0) want |= 1u << l; mx = v > mx ? v : mx; }
    if (hb[w] != want || hm[w] != mx) bad++;
  }
  unsigned *g, *hg = (unsigned *)malloc(warps * 6 * sizeof(unsigned));
  cudaMalloc(&g, warps * 6 * sizeof(unsigned));
  groups<<<blocks, threads>>>(in, g, n);
  cudaMemcpy(hg, g, warps * 6 * sizeof(unsigned), cudaMemcpyDeviceToHost);
  for (int w = 0; w < warps; w++) {
    unsigned same = 0, sum = 0, mx = 0, x = 0; int mn = 0x7fffffff, v0 = w * 32 < n ? h[w * 32] : 0;
    for (int l = 0; l < 32; l++) {
      int i = w * 32 + l, v = i < n ? h[i] : 0;
      unsigned u = (unsigned)(v - 500);
      if (v % 4 == v0 % 4) same |= 1u << l;
      sum += u; mn = (int)u < mn ? (int)u : mn; mx = u > mx ? u : mx; x ^= u;
    }
    unsigned want[6] = {same, 0xffffffffu + 1u, sum, (unsigned)mn, mx, x};
    for (int k = 0; k < 6; k++) bad += hg[w * 6 + k] != want[k];
  }
  unsigned long long sum = 1469598103934665603ull;
  for (int k = 0; k < warps * 6; k++) sum = (sum ^ hg[k]) * 1099511628211ull;
  for (int b = 0; b < blocks; b++) sum = (sum ^ (unsigned)hs[b]) * 1099511628211ull;
  for (int w = 0; w < warps; w++) sum = (sum ^ hb[w] ^ (unsigned)hm[w]) * 1099511628211ull;
  printf("checksum %016llx\n%s (%d mismatches)\n", sum, bad ? "FAIL" : "PASS", bad);
  return bad != 0;
}
