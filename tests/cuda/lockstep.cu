/*
 * lockstep.cu -- warp-synchronous code written before Volta, as many applications still
 * have it: the last six steps of a block reduction through `volatile` shared memory with no
 * sync between them (NVIDIA's old reduction samples), counting on a warp's lanes reading
 * before any lane writes; and a warp-level inclusive scan the same way.
 * Checked against the host exactly.
 * Usage: lockstep [BLOCKS]   (default 9)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>

__device__ void warp_reduce(volatile int *s, int tid) {
  s[tid] += s[tid + 32];
  s[tid] += s[tid + 16];
  s[tid] += s[tid + 8];
  s[tid] += s[tid + 4];
  s[tid] += s[tid + 2];
  s[tid] += s[tid + 1];
}

__global__ void reduce(const int *in, int *out, int *scan) {
  __shared__ int s[256];
  __shared__ int t[256];
  int tid = threadIdx.x, i = blockIdx.x * 256 + tid;
  s[tid] = in[i];
  t[tid] = in[i];
  __syncthreads();
  for (int half = 128; half > 32; half /= 2) {
    if (tid < half)
      s[tid] += s[tid + half];
    __syncthreads();
  }
  if (tid < 32)
    warp_reduce(s, tid);
  // Inclusive scan within each warp, lanes reading their left neighbours in lockstep.
  volatile int *v = t;
  int lane = tid % 32;
  for (int d = 1; d < 32; d *= 2) {
    int left = lane >= d ? v[tid - d] : 0;
    v[tid] += left;
  }
  scan[i] = v[tid];
  if (tid == 0)
    out[blockIdx.x] = s[0];
}

int main(int argc, char **argv) {
  int blocks = argc > 1 ? atoi(argv[1]) : 9;
  if (blocks < 1) {
    fprintf(stderr, "usage: lockstep [BLOCKS >= 1]\n");
    return 2;
  }
  int n = blocks * 256;
  int *in, *out, *scan;
  cudaMallocManaged(&in, n * sizeof(int));
  cudaMallocManaged(&out, blocks * sizeof(int));
  cudaMallocManaged(&scan, n * sizeof(int));
  for (int i = 0; i < n; ++i)
    in[i] = (i * 37) % 101 - 50;
  reduce<<<blocks, 256>>>(in, out, scan);
  cudaDeviceSynchronize();
  bool ok = true;
  uint64_t h = 1469598103934665603ull;
  for (int b = 0; b < blocks; ++b) {
    int sum = 0;
    for (int k = 0; k < 256; ++k)
      sum += in[b * 256 + k];
    ok &= out[b] == sum;
    h = (h ^ (uint32_t)out[b]) * 1099511628211ull;
  }
  for (int w = 0; w < n / 32; ++w) {
    int run = 0;
    for (int l = 0; l < 32; ++l) {
      run += in[w * 32 + l];
      ok &= scan[w * 32 + l] == run;
      h = (h ^ (uint32_t)scan[w * 32 + l]) * 1099511628211ull;
    }
  }
  printf("checksum %016llx\n%s\n", (unsigned long long)h, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
