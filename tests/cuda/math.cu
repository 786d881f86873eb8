/*
 * math.cu -- kernels calling CUDA's math intrinsics, as applications write them: the fast
 * `__expf`/`__logf`/`__fdividef`, the rounded `__fsqrt_rn`, the tests `isinf`/`isnan` in a
 * guard, and `__float_as_uint` on the value written. These stay calls of libdevice functions
 * the analysis must know touch no memory, or a kernel using one runs whole. A polynomial
 * from a local constant table (`const float c[] = {...}`: a copy from a constant global, as
 * Goulash's gate kernel has), indexed by data as well. A bisection per
 * element (a loop with a data-dependent exit, as t-SNE's perplexity search has) writes its
 * row at every step. Integer powers (`pow(double, int)`, `pow(float, int)`: libdevice's
 * `__nv_powi`/`__nv_powif`, as a Lennard-Jones term is written). Each element's result is checked against the same arithmetic on the
 * host, within a relative bound of 1e-5 (the fast intrinsics are approximations on a GPU);
 * the checksum is of the results' bits, the same on every device count.
 * Usage: math [N [STEPS]]   (defaults 1000 4)
 * Prints PASS or FAIL and `checksum <hex>` of the results.
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

__global__ void fast(float *out, unsigned *bits, const float *in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = in[i];
  float y = __expf(-x) + __logf(1.0f + x) + __fdividef(x, 3.0f) + __fsqrt_rn(x);
  if (isinf(y) || isnan(y)) y = 0.0f;
  out[i] = y;
  bits[i] = __float_as_uint(y) >> 8;
}

// Horner's rule over a local table of coefficients, and a second table picked by the data.
__global__ void poly(float *out, const float *in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float c[6] = {0.5f, -1.25f, 0.75f, 0.125f, -0.0625f, 0.03125f};
  const int pick[8] = {3, 1, 4, 1, 5, 9, 2, 6};
  float x = in[i], s = 0.0f;
  for (int j = 5; j >= 0; j--) s = c[j] + x * s;
  out[i] = s + (float)pick[(int)x & 7];
}

// Per row of `k` values: scale the row until its sum is within `tol` of 1, at most `steps`
// times; every step writes the whole row.
__global__ void rows(float *p, const float *d, int n, int k, int steps, float tol) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int ik = i * k;
  float beta = 1.0f;
  for (int s = 0; s < steps; s++) {
    float sum = 0.0f;
    for (int j = 0; j < k; j++) {
      p[ik + j] = __expf(-d[ik + j] * beta);
      sum += p[ik + j];
    }
    if (fabsf(sum - 1.0f) <= tol) break;
    beta = isinf(sum) ? beta : beta * 1.5f;
  }
}

// A Lennard-Jones term: (s/r)^12 - (s/r)^6 through integer powers, and a float power.
__global__ void lj(double *e, float *f, const float *in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double q = 0.5 + in[i] / 8.0;
  double q6 = pow(q, 6);
  e[i] = pow(q, 12) - q6 + pow(q, -3);
  f[i] = pow((float)q, 5);
}

static bool near(float got, float want) {
  return fabsf(got - want) <= 1e-5f * fmaxf(1.0f, fabsf(want));
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000, steps = argc > 2 ? atoi(argv[2]) : 4;
  if (n < 1 || steps < 1) {
    fprintf(stderr, "usage: math [N >= 1 [STEPS >= 1]]\n");
    return 2;
  }
  const int k = 8;
  float *h = (float *)malloc((size_t)n * k * 4), *got = (float *)malloc((size_t)n * k * 4);
  unsigned *gotbits = (unsigned *)malloc((size_t)n * 4);
  for (int i = 0; i < n * k; ++i) h[i] = (float)((i * 2654435761u >> 9) % 1000) / 250.0f;
  float *in, *out, *p;
  unsigned *bits;
  if (cudaMalloc(&in, (size_t)n * k * 4) || cudaMalloc(&out, (size_t)n * 4) || cudaMalloc(&bits, (size_t)n * 4) ||
      cudaMalloc(&p, (size_t)n * k * 4))
    return 1;
  cudaMemcpy(in, h, (size_t)n * k * 4, cudaMemcpyHostToDevice);
  int bad = 0;
  uint64_t sum = 1469598103934665603ull;

  fast<<<(n + 127) / 128, 128>>>(out, bits, in, n);
  cudaMemcpy(got, out, (size_t)n * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(gotbits, bits, (size_t)n * 4, cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i) {
    float x = h[i];
    float y = expf(-x) + logf(1.0f + x) + x / 3.0f + sqrtf(x);
    bad += !near(got[i], y) || gotbits[i] != (*(unsigned *)&got[i] >> 8);
    sum = (sum ^ *(unsigned *)&got[i]) * 1099511628211ull;
  }

  poly<<<(n + 127) / 128, 128>>>(out, in, n);
  cudaMemcpy(got, out, (size_t)n * 4, cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i) {
    const float c[6] = {0.5f, -1.25f, 0.75f, 0.125f, -0.0625f, 0.03125f};
    const int pick[8] = {3, 1, 4, 1, 5, 9, 2, 6};
    float x = h[i], s = 0.0f;
    for (int j = 5; j >= 0; j--) s = c[j] + x * s;
    bad += !near(got[i], s + (float)pick[(int)x & 7]);
    sum = (sum ^ *(unsigned *)&got[i]) * 1099511628211ull;
  }

  rows<<<(n + 63) / 64, 64>>>(p, in, n, k, steps, 0.5f);
  cudaMemcpy(got, p, (size_t)n * k * 4, cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i) {
    float beta = 1.0f, row[k];
    for (int s = 0; s < steps; s++) {
      float t = 0.0f;
      for (int j = 0; j < k; j++) t += row[j] = expf(-h[i * k + j] * beta);
      if (fabsf(t - 1.0f) <= 0.5f) break;
      beta = std::isinf(t) ? beta : beta * 1.5f;
    }
    for (int j = 0; j < k; j++) {
      bad += !near(got[i * k + j], row[j]);
      sum = (sum ^ *(unsigned *)&got[i * k + j]) * 1099511628211ull;
    }
  }

  double *e, *ge = (double *)malloc((size_t)n * 8);
  if (cudaMalloc(&e, (size_t)n * 8)) return 1;
  lj<<<(n + 127) / 128, 128>>>(e, out, in, n);
  cudaMemcpy(ge, e, (size_t)n * 8, cudaMemcpyDeviceToHost);
  cudaMemcpy(got, out, (size_t)n * 4, cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i) {
    double q = 0.5 + h[i] / 8.0, want = std::pow(q, 12) - std::pow(q, 6) + std::pow(q, -3);
    bad += fabs(ge[i] - want) > 1e-12 * fmax(1.0, fabs(want)) || !near(got[i], powf((float)q, 5.0f));
    uint64_t b;
    memcpy(&b, &ge[i], 8);
    sum = (sum ^ b ^ *(unsigned *)&got[i]) * 1099511628211ull;
  }
  cudaFree(e);
  free(ge);

  printf("%s\nchecksum %016llx\n", bad ? "FAIL" : "PASS", (unsigned long long)sum);
  cudaFree(in);
  cudaFree(out);
  cudaFree(bits);
  cudaFree(p);
  free(h);
  free(got);
  free(gotbits);
  return bad != 0;
}
