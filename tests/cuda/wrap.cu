/*
 * wrap.cu -- unsigned 32-bit indices into shared memory that wrap around, as HeCBench's merge
 * writes its binary search (`BS[~Ax]` for `BS[-Ax - 1]`): a GPU addresses shared memory with
 * 32 bits, so the index lands before the pointer, and programs built by nvcc rely on it.
 * Each block reverses its slice through a pointer into the middle of shared memory and
 * complemented indices, and takes neighbours at `u - 1` with `u` unsigned and possibly 0.
 * Checked against the host exactly.
 * Usage: wrap [BLOCKS]   (default 5)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>

__global__ void reverse(const int *in, int *out, int *left) {
  __shared__ int s[256];
  unsigned t = threadIdx.x;
  s[t] = in[blockIdx.x * 256 + t];
  __syncthreads();
  int *mid = s + 128;
  // t < 128: mid[~t] is mid[-t - 1] = s[127 - t]; t >= 128: mid[t - 128] is s[t].
  unsigned at = t < 128 ? ~t : t - 128;
  out[blockIdx.x * 256 + t] = mid[at];
  // The left neighbour through a pointer one past the block's first element.
  int *one = s + 1;
  unsigned back = t - 1; // wraps to 0xffffffff for thread 0: s[0] through one[-1]
  left[blockIdx.x * 256 + t] = one[back];
}

int main(int argc, char **argv) {
  int blocks = argc > 1 ? atoi(argv[1]) : 5;
  if (blocks < 1) {
    fprintf(stderr, "usage: wrap [BLOCKS >= 1]\n");
    return 2;
  }
  int n = blocks * 256;
  int *in, *out, *left;
  cudaMallocManaged(&in, n * sizeof(int));
  cudaMallocManaged(&out, n * sizeof(int));
  cudaMallocManaged(&left, n * sizeof(int));
  for (int i = 0; i < n; ++i)
    in[i] = (i * 37) % 1001 - 500;
  reverse<<<blocks, 256>>>(in, out, left);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    fprintf(stderr, "reverse failed\n");
    return 1;
  }
  bool ok = true;
  uint64_t h = 1469598103934665603ull;
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < 256; ++t) {
      int want = t < 128 ? in[b * 256 + 127 - t] : in[b * 256 + t];
      ok &= out[b * 256 + t] == want && left[b * 256 + t] == in[b * 256 + t];
      h = (h ^ (uint32_t)out[b * 256 + t]) * 1099511628211ull;
      h = (h ^ (uint32_t)left[b * 256 + t]) * 1099511628211ull;
    }
  printf("checksum %016llx\n%s\n", (unsigned long long)h, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
