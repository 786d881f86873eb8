/*
 * cas_loops.cu -- atomic updates written as compare-and-swap loops (`atomicCAS` until the
 * value found is the one assumed), as programs write a 64-bit sum, a float minimum or a double
 * maximum (HeCBench scatter): every thread scatters into a few elements that many blocks
 * update. What a CAS writes depends on the value it finds, so the blocks talk through the
 * element; split across devices with their writes merged, each device's updates of an element
 * lost the others'. Checked against the host; integers exactly, floats too (a minimum and a
 * maximum do not depend on the order).
 * Usage: cas_loops [N [BINS]]   (default 1000 7)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cfloat>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

__device__ void cas_add(long long *at, long long v) {
  unsigned long long *p = (unsigned long long *)at;
  unsigned long long old = *p, assumed;
  do {
    assumed = old;
    old = atomicCAS(p, assumed, (unsigned long long)((long long)assumed + v));
  } while (assumed != old);
}

__device__ void cas_min(float *at, float v) {
  int *p = (int *)at;
  int old = *p, assumed;
  do {
    assumed = old;
    old = atomicCAS(p, assumed, __float_as_int(fminf(v, __int_as_float(assumed))));
  } while (assumed != old);
}

__device__ void cas_max(double *at, double v) {
  unsigned long long *p = (unsigned long long *)at;
  unsigned long long old = *p, assumed;
  do {
    assumed = old;
    old = atomicCAS(p, assumed, __double_as_longlong(fmax(v, __longlong_as_double(assumed))));
  } while (assumed != old);
}

// The loops that are atomic updates of a reduction the devices can combine: a 64-bit sum, a
// double sum through the value's bits (`atomicAdd` on `double` before sm_60), an int maximum,
// an unsigned minimum.
__device__ void cas_add_double(double *at, double v) {
  unsigned long long *p = (unsigned long long *)at;
  unsigned long long old = *p, assumed;
  do {
    assumed = old;
    old = atomicCAS(p, assumed, __double_as_longlong(v + __longlong_as_double(assumed)));
  } while (assumed != old);
}

__device__ void cas_max_int(int *at, int v) {
  int old = *at, assumed;
  do {
    assumed = old;
    old = atomicCAS(at, assumed, max(v, assumed));
  } while (assumed != old);
}

__device__ void cas_min_unsigned(unsigned *at, unsigned v) {
  unsigned old = *at, assumed;
  do {
    assumed = old;
    old = atomicCAS(at, assumed, min(v, assumed));
  } while (assumed != old);
}

__global__ void combining(const int *x, const int *bin, long long *sums, double *dsums, int *maxes, unsigned *mins,
                          int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int b = bin[i];
    cas_add(&sums[b], (long long)x[i] * 7);
    // Halves of integers: every partial sum is exact, so any order gives the same double.
    cas_add_double(&dsums[b], (double)x[i] * 0.5);
    cas_max_int(&maxes[b], x[i]);
    cas_min_unsigned(&mins[b], (unsigned)(x[i] + 20000));
  }
}

__global__ void scatter(const int *x, const int *bin, long long *sums, float *mins, double *maxes, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int b = bin[i];
    cas_add(&sums[b], (long long)x[i] * 1000003);
    cas_min(&mins[b], (float)x[i] * 0.5f);
    cas_max(&maxes[b], (double)x[i] * 0.25);
  }
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000, bins = argc > 2 ? atoi(argv[2]) : 7;
  if (n < 1 || bins < 1) {
    fprintf(stderr, "usage: cas_loops [N >= 1 [BINS >= 1]]\n");
    return 2;
  }
  int *hx = (int *)malloc(n * sizeof(int)), *hb = (int *)malloc(n * sizeof(int));
  for (int i = 0; i < n; ++i) {
    hx[i] = (int)((i * 7919u) % 20011u) - 10000;
    hb[i] = (int)((i * 31u + i / 3) % (unsigned)bins);
  }
  long long *hs = (long long *)calloc(bins, sizeof(long long));
  float *hm = (float *)malloc(bins * sizeof(float));
  double *hM = (double *)malloc(bins * sizeof(double));
  for (int b = 0; b < bins; ++b) {
    hm[b] = FLT_MAX;
    hM[b] = -DBL_MAX;
  }
  int *x, *bin;
  long long *sums;
  float *mins;
  double *maxes;
  CHECK(cudaMalloc(&x, n * sizeof(int)));
  CHECK(cudaMalloc(&bin, n * sizeof(int)));
  CHECK(cudaMalloc(&sums, bins * sizeof(long long)));
  CHECK(cudaMalloc(&mins, bins * sizeof(float)));
  CHECK(cudaMalloc(&maxes, bins * sizeof(double)));
  CHECK(cudaMemcpy(x, hx, n * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(bin, hb, n * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(sums, hs, bins * sizeof(long long), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(mins, hm, bins * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(maxes, hM, bins * sizeof(double), cudaMemcpyHostToDevice));
  // Two launches: the second adds to what the first left.
  for (int k = 0; k < 2; ++k) scatter<<<(n + 63) / 64, 64>>>(x, bin, sums, mins, maxes, n);
  CHECK(cudaGetLastError());
  long long *csums;
  double *cdsums;
  int *cmaxes;
  unsigned *cmins;
  CHECK(cudaMalloc(&csums, bins * sizeof(long long)));
  CHECK(cudaMalloc(&cdsums, bins * sizeof(double)));
  CHECK(cudaMalloc(&cmaxes, bins * sizeof(int)));
  CHECK(cudaMalloc(&cmins, bins * sizeof(unsigned)));
  CHECK(cudaMemset(csums, 0, bins * sizeof(long long)));
  CHECK(cudaMemset(cdsums, 0, bins * sizeof(double)));
  CHECK(cudaMemset(cmaxes, 0x80, bins * sizeof(int)));
  CHECK(cudaMemset(cmins, 0xff, bins * sizeof(unsigned)));
  for (int k = 0; k < 2; ++k) combining<<<(n + 63) / 64, 64>>>(x, bin, csums, cdsums, cmaxes, cmins, n);
  CHECK(cudaGetLastError());
  long long *gcs = (long long *)malloc(bins * sizeof(long long)), *hcs = (long long *)calloc(bins, sizeof(long long));
  double *gcd = (double *)malloc(bins * sizeof(double)), *hcd = (double *)calloc(bins, sizeof(double));
  int *gcx = (int *)malloc(bins * sizeof(int)), *hcx = (int *)malloc(bins * sizeof(int));
  unsigned *gcn = (unsigned *)malloc(bins * sizeof(unsigned)), *hcn = (unsigned *)malloc(bins * sizeof(unsigned));
  CHECK(cudaMemcpy(gcs, csums, bins * sizeof(long long), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(gcd, cdsums, bins * sizeof(double), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(gcx, cmaxes, bins * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(gcn, cmins, bins * sizeof(unsigned), cudaMemcpyDeviceToHost));
  for (int b = 0; b < bins; ++b) {
    hcx[b] = (int)0x80808080;
    hcn[b] = 0xffffffffu;
  }
  for (int k = 0; k < 2; ++k)
    for (int i = 0; i < n; ++i) {
      int b = hb[i];
      hcs[b] += (long long)hx[i] * 7;
      hcd[b] += (double)hx[i] * 0.5;
      hcx[b] = hx[i] > hcx[b] ? hx[i] : hcx[b];
      unsigned u = (unsigned)(hx[i] + 20000);
      hcn[b] = u < hcn[b] ? u : hcn[b];
    }
  long long *gs = (long long *)malloc(bins * sizeof(long long));
  float *gm = (float *)malloc(bins * sizeof(float));
  double *gM = (double *)malloc(bins * sizeof(double));
  CHECK(cudaMemcpy(gs, sums, bins * sizeof(long long), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(gm, mins, bins * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(gM, maxes, bins * sizeof(double), cudaMemcpyDeviceToHost));
  for (int k = 0; k < 2; ++k)
    for (int i = 0; i < n; ++i) {
      int b = hb[i];
      hs[b] += (long long)hx[i] * 1000003;
      hm[b] = fminf((float)hx[i] * 0.5f, hm[b]);
      hM[b] = fmax((double)hx[i] * 0.25, hM[b]);
    }
  int bad = 0;
  uint64_t digest = 1469598103934665603ull;
  for (int b = 0; b < bins; ++b) {
    bad += gs[b] != hs[b] || gm[b] != hm[b] || gM[b] != hM[b];
    uint32_t fb;
    uint64_t db;
    memcpy(&fb, &gm[b], 4);
    memcpy(&db, &gM[b], 8);
    digest = (digest ^ (uint64_t)gs[b]) * 1099511628211ull;
    digest = (digest ^ fb) * 1099511628211ull;
    digest = (digest ^ db) * 1099511628211ull;
    bad += gcs[b] != hcs[b] || gcd[b] != hcd[b] || gcx[b] != hcx[b] || gcn[b] != hcn[b];
    memcpy(&db, &gcd[b], 8);
    digest = (digest ^ (uint64_t)gcs[b]) * 1099511628211ull;
    digest = (digest ^ db) * 1099511628211ull;
    digest = (digest ^ (uint32_t)gcx[b]) * 1099511628211ull;
    digest = (digest ^ gcn[b]) * 1099511628211ull;
  }
  printf("%d of %d bins differ\n", bad, bins);
  printf("checksum %016llx\n", (unsigned long long)digest);
  printf("%s\n", bad ? "FAIL" : "PASS");
  CHECK(cudaFree(x));
  CHECK(cudaFree(bin));
  CHECK(cudaFree(sums));
  CHECK(cudaFree(mins));
  CHECK(cudaFree(maxes));
  CHECK(cudaFree(csums));
  CHECK(cudaFree(cdsums));
  CHECK(cudaFree(cmaxes));
  CHECK(cudaFree(cmins));
  return bad ? 1 : 0;
}
