// CUDA's integer, bit, conversion, round-to-nearest and load intrinsics, checked against a host
// reference written from their definitions: exact on every device. And the fast
// approximations `__sincosf`, `__tanf` (the GPU's are approximate: within 1e-3 of the host's,
// left out of the checksum). And the cache-hinted loads and stores (`__ldcs`, `__stcs`...),
// which move what plain accesses move (checked, left out of the checksum).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <cuda_runtime.h>
#include "../programs/check.h"

__global__ void intrinsics(const unsigned *in, unsigned *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  // `__ldg`: a load through the read-only cache.
  unsigned x = __ldg(in + i), y = __ldg(&in[(i + 1) % n]);
  float f = __uint_as_float((x & 0x807fffffu) | 0x3f800000u) * (float)(i % 200 - 100);
  unsigned *o = out + 16 * i;
  o[0] = __byte_perm(x, y, i & 0x7777);
  o[1] = __umul24(x, y);
  o[2] = (unsigned)__mul24((int)x, (int)y);
  o[3] = (unsigned)__ffs((int)x);
  o[4] = (unsigned)__popc(x);
  o[5] = (unsigned)__clz((int)y);
  o[6] = __brev(x);
  o[7] = __umulhi(x, y);
  o[8] = (unsigned)__float2int_rn(f);
  o[9] = (unsigned)__float2int_rd(f);
  o[10] = (unsigned)(__float2ll_rz(f * 1e6f) >> 8);
  o[11] = __float_as_uint(__int2float_ru((int)x));
  o[12] = __float_as_uint(__fsqrt_rn(fabsf(f)));
  o[13] = __float_as_uint(__fdiv_rn(f, 3.0f));
  o[14] = __float_as_uint(__fmaf_rn(f, f, -1.0f));
  o[15] = (unsigned)__ffsll((long long)x << 20);
}

__global__ void fast(float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = (float)(i % 300 - 150) / 100.0f, s, c;
  __sincosf(x, &s, &c);
  out[3 * i] = s;
  out[3 * i + 1] = c;
  out[3 * i + 2] = __tanf(x / 2.0f);
}

__global__ void hinted(const unsigned *in, const float4 *v, unsigned *out, float4 *vout, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const unsigned *p = in + i;
  unsigned a = __ldcg(p) + 3u * __ldca(p) + 5u * __ldcs(p) + 7u * __ldlu(p) + 11u * __ldcv(p);
  __stwb(out + 4 * i, a);
  __stcg(out + 4 * i + 1, a ^ 1u);
  __stcs(out + 4 * i + 2, a + 2);  // an int value for an unsigned pointer converts
  __stwt(out + 4 * i + 3, a * 3u);
  float4 f = __ldcs(v + i), g = __ldcg(v + i), h = __ldcv(v + i);
  __stcs(vout + i, make_float4(f.x + g.w, f.y - h.z, f.z, f.w * 2.0f));
}

static unsigned bits(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static float from_bits(unsigned u) { float f; memcpy(&f, &u, 4); return f; }

int main(int argc, char **argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 1000;
  unsigned *in = new unsigned[n], *got = new unsigned[16 * n];
  unsigned s = 12345;
  for (int i = 0; i < n; i++) in[i] = s = s * 1103515245u + 12345u + (i % 7 == 0 ? 0 : s >> 7);
  unsigned *din, *dout;
  cudaMalloc(&din, n * sizeof(unsigned));
  cudaMalloc(&dout, 16 * n * sizeof(unsigned));
  cudaMemcpy(din, in, n * sizeof(unsigned), cudaMemcpyHostToDevice);
  intrinsics<<<(n + 63) / 64, 64>>>(din, dout, n);
  cudaMemcpy(got, dout, 16 * n * sizeof(unsigned), cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < n; i++) {
    unsigned x = in[i], y = in[(i + 1) % n], w[16];
    float f = from_bits((x & 0x807fffffu) | 0x3f800000u) * (float)(i % 200 - 100);
    unsigned long long yx = ((unsigned long long)y << 32) | x;
    unsigned sel = i & 0x7777, perm = 0;
    for (int b = 0; b < 4; b++) perm |= (unsigned)((yx >> (8 * ((sel >> (4 * b)) & 7))) & 0xff) << (8 * b);
    w[0] = perm;
    w[1] = (x & 0xffffff) * (y & 0xffffff);
    w[2] = (unsigned)((int)(x << 8) >> 8) * (unsigned)((int)(y << 8) >> 8);
    w[3] = x ? (unsigned)__builtin_ctz(x) + 1 : 0;
    w[4] = (unsigned)__builtin_popcount(x);
    w[5] = y ? (unsigned)__builtin_clz(y) : 32;
    unsigned r = 0;
    for (int b = 0; b < 32; b++) r |= ((x >> b) & 1u) << (31 - b);
    w[6] = r;
    w[7] = (unsigned)(((unsigned long long)x * y) >> 32);
    w[8] = (unsigned)(int)nearbyintf(f);
    w[9] = (unsigned)(int)floorf(f);
    w[10] = (unsigned)((long long)truncf(f * 1e6f) >> 8);
    double exact = (double)(int)x;
    float near = (float)(int)x;
    w[11] = bits((double)near < exact ? nextafterf(near, INFINITY) : near);
    w[12] = bits(sqrtf(fabsf(f)));
    w[13] = bits(f / 3.0f);
    w[14] = bits(fmaf(f, f, -1.0f));
    unsigned long long z = (unsigned long long)(long long)x << 20;
    w[15] = z ? (unsigned)__builtin_ctzll(z) + 1 : 0;
    for (int k = 0; k < 16; k++) {
      if (got[16 * i + k] != w[k]) {
        if (bad < 5) printf("element %d, result %d: %08x, want %08x\n", i, k, got[16 * i + k], w[k]);
        bad++;
      }
    }
  }
  float *dfast, *fgot = new float[3 * n];
  cudaMalloc(&dfast, 3 * n * sizeof(float));
  fast<<<(n + 63) / 64, 64>>>(dfast, n);
  cudaMemcpy(fgot, dfast, 3 * n * sizeof(float), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; i++) {
    float x = (float)(i % 300 - 150) / 100.0f;
    float w[3] = {sinf(x), cosf(x), tanf(x / 2.0f)};
    for (int k = 0; k < 3; k++) {
      if (fabsf(fgot[3 * i + k] - w[k]) > 1e-3f) {
        if (bad < 5) printf("element %d, fast result %d: %g, want %g\n", i, k, fgot[3 * i + k], w[k]);
        bad++;
      }
    }
  }
  float4 *v = new float4[n], *vgot = new float4[n], *dv, *dvout;
  unsigned *hgot = new unsigned[4 * n], *dh;
  for (int i = 0; i < n; i++) v[i] = make_float4(i * 0.5f, i % 13 - 6.0f, i * 0.25f, 1.0f / (i + 1));
  cudaMalloc(&dv, n * sizeof(float4));
  cudaMalloc(&dvout, n * sizeof(float4));
  cudaMalloc(&dh, 4 * n * sizeof(unsigned));
  cudaMemcpy(dv, v, n * sizeof(float4), cudaMemcpyHostToDevice);
  hinted<<<(n + 63) / 64, 64>>>(din, dv, dh, dvout, n);
  cudaMemcpy(hgot, dh, 4 * n * sizeof(unsigned), cudaMemcpyDeviceToHost);
  cudaMemcpy(vgot, dvout, n * sizeof(float4), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; i++) {
    unsigned a = 27u * in[i], w[4] = {a, a ^ 1u, a + 2u, a * 3u};
    float4 e = make_float4(v[i].x + v[i].w, v[i].y - v[i].z, v[i].z, v[i].w * 2.0f);
    for (int k = 0; k < 4; k++) {
      if (hgot[4 * i + k] != w[k]) {
        if (bad < 5) printf("element %d, hinted result %d: %08x, want %08x\n", i, k, hgot[4 * i + k], w[k]);
        bad++;
      }
    }
    if (memcmp(&vgot[i], &e, sizeof e) != 0) {
      if (bad < 5) printf("element %d, hinted float4: (%g %g %g %g), want (%g %g %g %g)\n", i, vgot[i].x, vgot[i].y,
                          vgot[i].z, vgot[i].w, e.x, e.y, e.z, e.w);
      bad++;
    }
  }
  printf("checksum %016llx\n", fnv1a(got, 16 * n * sizeof(unsigned)));
  printf("%s: %d wrong\n", bad ? "FAIL" : "PASS", bad);
  return bad != 0;
}
