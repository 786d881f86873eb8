/*
 * fenced.cu -- warp-synchronous code that orders its steps with `__threadfence_block()`
 * instead of `volatile` (HeCBench fpdc's compression kernel): each warp scans its values in
 * shared memory, Hillis-Steele in place (`b[i] += b[i - d]`, every lane's load before any
 * lane's store, as a warp's lanes make them together), in a loop; then the odd lanes alone
 * pack their even neighbour's code with theirs, which the even lanes overwrite at the next
 * trip (a GPU's warp meets again after the branch). The last warp's chunk is shorter.
 * Checked against the host exactly.
 * Usage: fenced [WARPS]   (default 37)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define WARPS_PER_BLOCK 4

// Warp w scans chunk w of `in` (chunks of `len` values, the last one shorter) in steps of 32:
// out[i] = the sum of the chunk's values up to i; pairs[i / 2] = the low four bits of in[i - 1]
// and in[i] for odd i.
__global__ void scan(const int *in, int *out, int *pairs, int n, int len) {
  __shared__ int b[WARPS_PER_BLOCK * 48];
  int lane = threadIdx.x & 31;
  int at = threadIdx.x / 32 * 48 + lane;
  b[at] = 0; // 16 zeros before each warp's 32 values
  // Without this fence the compiler may order this store after the loop's first, which
  // another lane's zero then overwrites (nvcc's build did).
  __threadfence_block();
  at += 16;
  int last = (threadIdx.x / 32 + 1) * 48 - 1;
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int start = warp * len, end = min(start + len, n);
  int carry = 0;
  for (int i = start + lane; i < end; i += 32) {
    b[at] = in[i];
    __threadfence_block();
    b[at] += b[at - 1];
    __threadfence_block();
    b[at] += b[at - 2];
    __threadfence_block();
    b[at] += b[at - 4];
    __threadfence_block();
    b[at] += b[at - 8];
    __threadfence_block();
    b[at] += b[at - 16];
    __threadfence_block();
    out[i] = carry + b[at];
    carry += b[last];
    __threadfence_block();
    b[at] = in[i] & 15;
    __threadfence_block();
    if (lane & 1)
      pairs[i / 2] = b[at - 1] | b[at] << 4;
  }
}

int main(int argc, char **argv) {
  int warps = argc > 1 ? atoi(argv[1]) : 37;
  if (warps < 1) {
    fprintf(stderr, "usage: fenced [WARPS >= 1]\n");
    return 2;
  }
  // Chunks of 96 values; the last chunk ends in a partial trip of the loop.
  int len = 96, n = warps * len;
  int full = (warps - 1) * len + 64; // the last warp's chunk: two trips of the loop
  int *in, *out, *pairs;
  cudaMallocManaged(&in, n * sizeof(int));
  cudaMallocManaged(&out, n * sizeof(int));
  cudaMallocManaged(&pairs, n / 2 * sizeof(int));
  for (int i = 0; i < n; ++i) {
    in[i] = (i * 37) % 101 - 50;
    out[i] = 0;
  }
  for (int i = 0; i < n / 2; ++i)
    pairs[i] = -1;
  int threads = WARPS_PER_BLOCK * 32;
  int blocks = (warps + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
  scan<<<blocks, threads>>>(in, out, pairs, full, len);
  cudaDeviceSynchronize();
  bool ok = true;
  int bad_scan = 0, bad_pairs = 0;
  uint64_t h = 1469598103934665603ull;
  for (int w = 0; w < warps; ++w) {
    int run = 0;
    for (int k = 0; k < len; ++k) {
      int i = w * len + k;
      int want = 0;
      if (i < full) {
        run += in[i];
        want = run;
      }
      bad_scan += out[i] != want;
      h = (h ^ (uint32_t)out[i]) * 1099511628211ull;
    }
  }
  for (int i = 1; i < n; i += 2) {
    int want = i < full ? (in[i - 1] & 15) | (in[i] & 15) << 4 : -1;
    bad_pairs += pairs[i / 2] != want;
    h = (h ^ (uint32_t)pairs[i / 2]) * 1099511628211ull;
  }
  ok = bad_scan == 0 && bad_pairs == 0;
  if (!ok)
    fprintf(stderr, "%d sums and %d pairs differ from the host's\n", bad_scan, bad_pairs);
  printf("checksum %016llx\n%s\n", (unsigned long long)h, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
