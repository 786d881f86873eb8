/*
 * tiles.cu -- warp-synchronous steps between tile syncs, written the way NVIDIA's dxtc
 * sample writes them: `sums[i] += sums[i ^ 8]; tile.sync(); ...` over 16-lane tiles of
 * cooperative groups, each step reading a partner's element that the partner writes in the
 * same step (a race in CUDA's memory model that a warp's lanes run loads-before-stores),
 * on float3 values as dxtc has them; and the same butterfly on ints with `__syncwarp()`.
 * Every lane ends with its tile's (warp's) sum. Checked against the host exactly (the
 * float values are small integers, so every order of additions gives the same sum).
 * Usage: tiles [BLOCKS]   (default 5)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cooperative_groups.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace cg = cooperative_groups;

__device__ float3 operator+(float3 a, float3 b) { return make_float3(a.x + b.x, a.y + b.y, a.z + b.z); }
__device__ void operator+=(float3 &a, float3 b) { a = a + b; }

__global__ void butterfly(const int *in, float3 *tile_sums, int *warp_sums) {
  __shared__ float3 sums[64];
  __shared__ int s[64];
  cg::thread_block cta = cg::this_thread_block();
  cg::thread_group tile = cg::tiled_partition(cta, 16);
  int idx = threadIdx.x, i = blockIdx.x * 64 + idx;
  int v = in[i];
  sums[idx] = make_float3((float)v, (float)(2 * v), (float)(v % 7));
  cg::sync(tile);
  int base = idx & ~15, lane = idx & 15;
  sums[idx] += sums[base + (lane ^ 8)];
  cg::sync(tile);
  sums[idx] += sums[base + (lane ^ 4)];
  cg::sync(tile);
  sums[idx] += sums[base + (lane ^ 2)];
  cg::sync(tile);
  sums[idx] += sums[base + (lane ^ 1)];
  tile_sums[i] = sums[idx];
  s[idx] = v;
  __syncwarp();
  for (int d = 16; d > 0; d /= 2) {
    s[idx] += s[(idx & ~31) + ((idx & 31) ^ d)];
    __syncwarp();
  }
  warp_sums[i] = s[idx];
}

int main(int argc, char **argv) {
  int blocks = argc > 1 ? atoi(argv[1]) : 5;
  if (blocks < 1) {
    fprintf(stderr, "usage: tiles [BLOCKS >= 1]\n");
    return 2;
  }
  int n = blocks * 64;
  int *in, *warp_sums;
  float3 *tile_sums;
  cudaMallocManaged(&in, n * sizeof(int));
  cudaMallocManaged(&tile_sums, n * sizeof(float3));
  cudaMallocManaged(&warp_sums, n * sizeof(int));
  for (int i = 0; i < n; ++i)
    in[i] = (i * 37) % 101 - 50;
  butterfly<<<blocks, 64>>>(in, tile_sums, warp_sums);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    fprintf(stderr, "butterfly failed\n");
    return 1;
  }
  bool ok = true;
  uint64_t h = 1469598103934665603ull;
  for (int t = 0; t < n / 16; ++t) {
    float x = 0, y = 0, z = 0;
    for (int l = 0; l < 16; ++l) {
      int v = in[t * 16 + l];
      x += (float)v, y += (float)(2 * v), z += (float)(v % 7);
    }
    for (int l = 0; l < 16; ++l) {
      float3 got = tile_sums[t * 16 + l];
      ok &= got.x == x && got.y == y && got.z == z;
      h = (h ^ (uint32_t)(int)got.x ^ (uint64_t)(uint32_t)(int)got.z << 32) * 1099511628211ull;
    }
  }
  for (int w = 0; w < n / 32; ++w) {
    int sum = 0;
    for (int l = 0; l < 32; ++l)
      sum += in[w * 32 + l];
    for (int l = 0; l < 32; ++l) {
      ok &= warp_sums[w * 32 + l] == sum;
      h = (h ^ (uint32_t)warp_sums[w * 32 + l]) * 1099511628211ull;
    }
  }
  printf("checksum %016llx\n%s\n", (unsigned long long)h, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
