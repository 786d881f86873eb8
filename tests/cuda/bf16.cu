/*
 * bf16.cu -- CUDA's bfloat16 arithmetic (cuda_bf16.h): __hadd, __hsub, __hmul, __hfma and
 * their pair forms, which the header builds on the GPU's `fma.rn.bf16` (inline PTX). Checked
 * bit for bit against the host, on values whose float results are exact (so rounding them
 * to bf16 once is what the GPU does).
 * Usage: bf16 [N]   (default 1000)
 * Prints PASS or FAIL and `checksum <hex>` of the results.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_bf16.h>
#include <vector>

__global__ void arith(const __nv_bfloat16 *a, const __nv_bfloat16 *b, const __nv_bfloat16 *c, __nv_bfloat16 *out,
                      int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[4 * i] = __hadd(a[i], b[i]);
  out[4 * i + 1] = __hsub(a[i], b[i]);
  out[4 * i + 2] = __hmul(a[i], b[i]);
  out[4 * i + 3] = __hfma(a[i], b[i], c[i]);
}

__global__ void pairs(const __nv_bfloat162 *a, const __nv_bfloat162 *b, __nv_bfloat162 *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[2 * i] = __hadd2(a[i], b[i]);
  out[2 * i + 1] = __hmul2(a[i], b[i]);
}

static uint16_t bits(__nv_bfloat16 h) {
  uint16_t v;
  memcpy(&v, &h, 2);
  return v;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  if (n < 2 || n % 2) {
    fprintf(stderr, "usage: bf16 [N >= 2, even]\n");
    return 2;
  }
  std::vector<__nv_bfloat16> a(n), b(n), c(n), got(4 * n), pgot(n * 2);
  std::vector<float> fa(n), fb(n), fc(n);
  for (int i = 0; i < n; ++i) {
    fa[i] = (float)(i % 61 - 30) / 8;
    fb[i] = (float)(i % 37 - 18) / 16;
    fc[i] = (float)(i % 23 - 11) / 4;
    a[i] = __float2bfloat16_rn(fa[i]);
    b[i] = __float2bfloat16_rn(fb[i]);
    c[i] = __float2bfloat16_rn(fc[i]);
  }
  __nv_bfloat16 *da, *db, *dc, *dout, *dpout;
  cudaMalloc(&da, n * 2);
  cudaMalloc(&db, n * 2);
  cudaMalloc(&dc, n * 2);
  cudaMalloc(&dout, 4 * n * 2);
  cudaMalloc(&dpout, 2 * n * 2);
  cudaMemcpy(da, a.data(), n * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), n * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dc, c.data(), n * 2, cudaMemcpyHostToDevice);
  arith<<<(n + 127) / 128, 128>>>(da, db, dc, dout, n);
  pairs<<<(n / 2 + 127) / 128, 128>>>((const __nv_bfloat162 *)da, (const __nv_bfloat162 *)db, (__nv_bfloat162 *)dpout,
                                      n / 2);
  cudaMemcpy(got.data(), dout, 4 * n * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(pgot.data(), dpout, 2 * n * 2, cudaMemcpyDeviceToHost);

  int bad = 0;
  uint64_t sum = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) {
    float want[4] = {fa[i] + fb[i], fa[i] - fb[i], fa[i] * fb[i], fa[i] * fb[i] + fc[i]};
    for (int k = 0; k < 4; ++k) {
      bad += bits(got[4 * i + k]) != bits(__float2bfloat16_rn(want[k]));
      sum = (sum ^ bits(got[4 * i + k])) * 1099511628211ull;
    }
  }
  for (int i = 0; i < n / 2; ++i) {
    for (int h = 0; h < 2; ++h) {
      int j = 2 * i + h;
      float sumv = fa[j] + fb[j], prod = fa[j] * fb[j];
      bad += bits(pgot[4 * i + h]) != bits(__float2bfloat16_rn(sumv));
      bad += bits(pgot[4 * i + 2 + h]) != bits(__float2bfloat16_rn(prod));
      sum = (sum ^ bits(pgot[4 * i + h]) ^ ((uint64_t)bits(pgot[4 * i + 2 + h]) << 16)) * 1099511628211ull;
    }
  }
  printf("%s\n", bad ? "FAIL" : "PASS");
  printf("checksum %016llx\n", (unsigned long long)sum);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  cudaFree(dout);
  cudaFree(dpout);
  return bad != 0;
}
