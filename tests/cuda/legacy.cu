/*
 * legacy.cu -- warp code written before CUDA 9, as older applications still have it:
 * `__shfl_down`, `__shfl_xor`, `__shfl_up` and `__shfl` without a mask (PTX has no such
 * shuffles for Volta and later; they mean the whole warp). A per-warp float sum, an integer
 * butterfly sum, and shifted values. Checked against the host exactly.
 * Usage: legacy [N]   (default 4096, a multiple of 32)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>

__global__ void sums(const int *in, float *fsum, int *isum, int *shifted) {
  int i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x % 32;
  float v = (float)in[i];
  int w = in[i] * 3;
  for (int o = 16; o > 0; o /= 2) {
    v += __shfl_down(v, o);
    w += __shfl_xor(w, o);
  }
  shifted[i] = __shfl_up(in[i], 1) + __shfl(in[i], 5);
  if (lane == 0) {
    fsum[i / 32] = v;
    isum[i / 32] = w;
  }
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4096;
  if (n < 32 || n % 32) {
    fprintf(stderr, "usage: legacy [N, a multiple of 32]\n");
    return 2;
  }
  int *in, *isum, *shifted;
  float *fsum;
  cudaMallocManaged(&in, n * sizeof(int));
  cudaMallocManaged(&isum, n / 32 * sizeof(int));
  cudaMallocManaged(&fsum, n / 32 * sizeof(float));
  cudaMallocManaged(&shifted, n * sizeof(int));
  for (int i = 0; i < n; ++i)
    in[i] = (i * 7919) % 201 - 100;
  sums<<<n / 32, 32>>>(in, fsum, isum, shifted);
  cudaDeviceSynchronize();
  bool ok = true;
  uint64_t h = 1469598103934665603ull;
  for (int w = 0; w < n / 32; ++w) {
    int s = 0;
    for (int l = 0; l < 32; ++l)
      s += in[w * 32 + l];
    ok &= fsum[w] == (float)s && isum[w] == 3 * s;
    h = (h ^ (uint32_t)isum[w]) * 1099511628211ull;
    for (int l = 0; l < 32; ++l) {
      int i = w * 32 + l;
      ok &= shifted[i] == in[l > 0 ? i - 1 : i] + in[w * 32 + 5];
      h = (h ^ (uint32_t)shifted[i]) * 1099511628211ull;
    }
  }
  printf("checksum %016llx\n%s\n", (unsigned long long)h, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
