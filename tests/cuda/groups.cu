/*
 * groups.cu -- cooperative groups as NVIDIA's samples write them: `this_thread_block()` (whose
 * constructor reaches the block's reserved shared memory through inline PTX), a block sync,
 * warp tiles reduced with `cg::reduce`, `binary_partition` groups, `this_grid()`, and tiles of
 * 64 and 128 threads, wider than a warp,
 * whose syncs and reductions go through that reserved scratch (and call the recursive
 * `constexpr log2`, which clang calls at run time without optimization).
 * Checked against the host exactly (integer sums).
 * Usage: groups [BLOCKS]   (default 37)
 * Prints PASS or FAIL and `checksum <hex>` of the results.
 */
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace cg = cooperative_groups;

// Per block of 256: the block's sum through shared memory, and each tile's sum for tiles of
// 32, 64 and 128 threads, written by the tile's first thread.
__global__ void sums(const int *v, int *block_sum, int *warp_sum, int *tile64_sum, int *tile128_sum,
                     int *odd_sum) {
  cg::thread_block block = cg::this_thread_block();
  // `this_grid()` reads the driver's environment registers (no workspace: not a cooperative
  // launch); its rank and size are the grid's.
  cg::grid_group grid = cg::this_grid();
  __shared__ int partial[8];
  unsigned rank = block.thread_rank();
  int x = v[blockIdx.x * 256 + rank];

  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  int w = cg::reduce(warp, x, cg::plus<int>());
  // Odd and even values of each warp in groups of their own (masks that differ by lane).
  cg::coalesced_group parity = cg::binary_partition(warp, x & 1);
  int p = cg::reduce(parity, x, cg::plus<int>());
  if (parity.thread_rank() == 0)
    odd_sum[(grid.thread_rank() / 32) * 2 + (x & 1)] = p + (int)(grid.size() / 256 - gridDim.x);
  if (warp.thread_rank() == 0) {
    warp_sum[blockIdx.x * 8 + rank / 32] = w;
    partial[rank / 32] = w;
  }
  block.sync();
  if (rank == 0) {
    int s = 0;
    for (int i = 0; i < 8; ++i)
      s += partial[i];
    block_sum[blockIdx.x] = s;
  }

  cg::thread_block_tile<64> t64 = cg::tiled_partition<64>(block);
  int s64 = cg::reduce(t64, x, cg::plus<int>());
  t64.sync();
  if (t64.thread_rank() == 0)
    tile64_sum[blockIdx.x * 4 + rank / 64] = s64;

  cg::thread_block_tile<128> t128 = cg::tiled_partition<128>(block);
  int s128 = cg::reduce(t128, x * 3 + 1, cg::plus<int>());
  if (t128.thread_rank() == 0)
    tile128_sum[blockIdx.x * 2 + rank / 128] = s128;
}

int main(int argc, char **argv) {
  int blocks = argc > 1 ? atoi(argv[1]) : 37;
  if (blocks < 1) {
    fprintf(stderr, "usage: groups [BLOCKS >= 1]\n");
    return 2;
  }
  int n = blocks * 256;
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i)
    v[i] = (int)((i * 2654435761u) >> 20) % 1000 - 500;
  int *dv, *db, *dw, *d64, *d128, *dodd;
  cudaMalloc(&dv, n * sizeof(int));
  cudaMalloc(&db, blocks * sizeof(int));
  cudaMalloc(&dw, blocks * 8 * sizeof(int));
  cudaMalloc(&d64, blocks * 4 * sizeof(int));
  cudaMalloc(&d128, blocks * 2 * sizeof(int));
  cudaMalloc(&dodd, blocks * 16 * sizeof(int));
  cudaMemset(dodd, 0, blocks * 16 * sizeof(int));
  cudaMemcpy(dv, v.data(), n * sizeof(int), cudaMemcpyHostToDevice);
  sums<<<blocks, 256>>>(dv, db, dw, d64, d128, dodd);
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    printf("FAIL: %s\n", cudaGetErrorString(err));
    return 1;
  }
  std::vector<int> b(blocks), w(blocks * 8), t64(blocks * 4), t128(blocks * 2), odd(blocks * 16);
  cudaMemcpy(odd.data(), dodd, odd.size() * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(b.data(), db, b.size() * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(w.data(), dw, w.size() * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(t64.data(), d64, t64.size() * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(t128.data(), d128, t128.size() * sizeof(int), cudaMemcpyDeviceToHost);
  bool ok = true;
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](int x) { h = (h ^ (uint32_t)x) * 1099511628211ull; };
  for (int k = 0; k < blocks; ++k) {
    int want_b = 0;
    for (int i = 0; i < 256; ++i)
      want_b += v[k * 256 + i];
    ok &= b[k] == want_b;
    mix(b[k]);
    for (int t = 0; t < 8; ++t) {
      int s = 0, by_parity[2] = {0, 0};
      for (int i = 0; i < 32; ++i) {
        int x = v[k * 256 + t * 32 + i];
        s += x;
        by_parity[x & 1] += x;
      }
      ok &= w[k * 8 + t] == s;
      mix(w[k * 8 + t]);
      for (int q = 0; q < 2; ++q) {
        // A parity no lane of the warp has leaves its slot 0.
        ok &= odd[(k * 8 + t) * 2 + q] == by_parity[q];
        mix(odd[(k * 8 + t) * 2 + q]);
      }
    }
    for (int t = 0; t < 4; ++t) {
      int s = 0;
      for (int i = 0; i < 64; ++i)
        s += v[k * 256 + t * 64 + i];
      ok &= t64[k * 4 + t] == s;
      mix(t64[k * 4 + t]);
    }
    for (int t = 0; t < 2; ++t) {
      int s = 0;
      for (int i = 0; i < 128; ++i)
        s += v[k * 256 + t * 128 + i] * 3 + 1;
      ok &= t128[k * 2 + t] == s;
      mix(t128[k * 2 + t]);
    }
  }
  printf("%s\nchecksum %016llx\n", ok ? "PASS" : "FAIL", (unsigned long long)h);
  return ok ? 0 : 1;
}
