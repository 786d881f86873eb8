/*
 * active.cu -- `__activemask` and cooperative groups' `coalesced_threads()` as programs use
 * them: warp-aggregated atomics inside a divergent branch (the lanes that took it elect a
 * leader, which adds for all of them; the others get their offsets by shuffle), and a
 * converged warp's mask used for a reduction. Checked against the host exactly.
 * Usage: active [N]   (default 5000)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cooperative_groups.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace cg = cooperative_groups;

// Keeps the positive values, compacted (in an order the atomics choose), counting them with
// one atomic per warp's group of lanes that have one.
__global__ void filter(const int *in, int *out, int *count, int *group_sizes, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && in[i] > 0) {
    cg::coalesced_group active = cg::coalesced_threads();
    int base = 0;
    if (active.thread_rank() == 0)
      base = atomicAdd(count, active.size());
    base = active.shfl(base, 0);
    out[base + active.thread_rank()] = in[i];
    if (active.thread_rank() == 0)
      group_sizes[i / 32] = active.size();
  }
}

// A converged warp: its mask names every lane still running (the last warp's tail returned).
__global__ void sums(const int *in, int *warp_sum, unsigned *masks, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  unsigned mask = __activemask();
  int v = in[i];
  for (int o = 16; o > 0; o /= 2) {
    int other = __shfl_down_sync(mask, v, o);
    if ((threadIdx.x % 32) + o < 32 && (mask >> ((threadIdx.x % 32) + o) & 1))
      v += other;
  }
  if (threadIdx.x % 32 == 0) {
    warp_sum[i / 32] = v;
    masks[i / 32] = mask;
  }
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 5000;
  if (n < 1) {
    fprintf(stderr, "usage: active [N >= 1]\n");
    return 2;
  }
  int warps = (n + 31) / 32;
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i)
    in[i] = (int)((i * 2654435761u) >> 22) % 9 - 4;
  int *din, *dout, *dcount, *dsizes, *dsum;
  unsigned *dmask;
  cudaMalloc(&din, n * sizeof(int));
  cudaMalloc(&dout, n * sizeof(int));
  cudaMalloc(&dcount, sizeof(int));
  cudaMalloc(&dsizes, warps * sizeof(int));
  cudaMalloc(&dsum, warps * sizeof(int));
  cudaMalloc(&dmask, warps * sizeof(unsigned));
  cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice);
  cudaMemset(dcount, 0, sizeof(int));
  cudaMemset(dsizes, 0, warps * sizeof(int));
  filter<<<(n + 127) / 128, 128>>>(din, dout, dcount, dsizes, n);
  sums<<<(n + 127) / 128, 128>>>(din, dsum, dmask, n);
  int count = 0;
  std::vector<int> out(n), sizes(warps), wsum(warps);
  std::vector<unsigned> masks(warps);
  cudaMemcpy(&count, dcount, sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(sizes.data(), dsizes, warps * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(wsum.data(), dsum, warps * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(masks.data(), dmask, warps * sizeof(unsigned), cudaMemcpyDeviceToHost);
  bool ok = true;
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint32_t x) { h = (h ^ x) * 1099511628211ull; };
  // The kept values, whatever their order: the same multiset as the host's.
  std::vector<int> kept_count(5, 0), want_count(5, 0);
  int want = 0;
  for (int i = 0; i < n; ++i)
    if (in[i] > 0) {
      ++want;
      ++want_count[in[i]];
    }
  ok &= count == want;
  for (int k = 0; k < count && k < n; ++k)
    if (out[k] > 0 && out[k] < 5)
      ++kept_count[out[k]];
  ok &= kept_count == want_count;
  for (int w = 0; w < warps; ++w) {
    int positives = 0, s = 0, lanes = 0;
    for (int l = 0; l < 32 && w * 32 + l < n; ++l) {
      positives += in[w * 32 + l] > 0;
      s += in[w * 32 + l];
      ++lanes;
    }
    // The group is the warp's lanes with a positive value; its leader wrote its size.
    ok &= sizes[w] == positives;
    ok &= wsum[w] == s && masks[w] == (lanes == 32 ? 0xffffffffu : (1u << lanes) - 1);
    mix(sizes[w]);
    mix(wsum[w]);
    mix(masks[w]);
  }
  mix(count);
  printf("checksum %016llx\n%s\n", (unsigned long long)h, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
