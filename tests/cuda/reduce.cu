/*
 * reduce.cu -- reductions through atomics, the way CUDA programs write them: a histogram at
 * data-dependent bins, a per-block histogram, a float sum, an int and an unsigned minimum and
 * maximum, 64-bit sums and maxima, a double sum, bit sets by and/or/xor, a subtraction, a
 * grid-stride count and histogram, and atomics that are no reduction (a slot counter whose old value is
 * used; an update beside a plain read). Every buffer starts from values of its own (not the
 * identity), some elements are never updated, and one float element is -0.0 and stays so.
 * Integer results are checked exactly, and so is the float sum of small integers while no
 * partial sum can reach 2^24 (N * ROUNDS * 43 < 2^24; beyond, within the bound below, and
 * left out of the checksum). Sums of floats that round are checked within
 * |got - want| <= a * 2^-24 * S, for a additions whose partial sums S = sum |x| bounds: each
 * addition rounds by at most half an ulp of a partial sum, 2^-24 of its size.
 * Usage: reduce [N [ROUNDS]]   (defaults 100003 2)
 * Prints PASS or FAIL and `checksum <hex>` of the exact results.
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define BINS 256

__global__ void histogram(const int *in, unsigned *bins, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&bins[in[i] & (BINS - 1)], 1u);
}

// One histogram of 16 bins per block of the launch.
__global__ void block_histogram(const int *in, int *hist, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&hist[blockIdx.x * 16 + (in[i] & 15)], 1);
}

__global__ void sum(const float *x, float *total, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(total, x[i]);
}

__global__ void extremes(const int *v, int *lo, int *hi, unsigned *ulo, unsigned *uhi, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    atomicMin(lo, v[i]);
    atomicMax(hi, v[i]);
    atomicMin(ulo, (unsigned)v[i]);
    atomicMax(uhi, (unsigned)v[i]);
  }
}

__global__ void wide(const int *v, unsigned long long *total, long long *top, double *dsum, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    atomicAdd(total, (unsigned long long)(unsigned)v[i] << 20);
    atomicMax(top, (long long)v[i] * 4096 - i);
    atomicAdd(dsum, (double)(v[i] % 1000));
  }
}

// Bit sets: each thread sets, clears or flips its own bit of a word shared with 31 others.
__global__ void bits(const int *v, unsigned *set, unsigned *keep, unsigned *flip, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned bit = 1u << (i & 31);
    if (v[i] & 1) atomicOr(&set[i / 32], bit);
    if (v[i] & 2) atomicAnd(&keep[i / 32], ~bit);
    atomicXor(&flip[i / 32], v[i] & 4 ? bit : 0u);
  }
}

__global__ void take(const int *v, int *budget, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicSub(budget, v[i] & 7);
}

// A grid-stride count of the positive values.
__global__ void count_positive(const int *v, unsigned *count, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    if (v[i] > 0) atomicAdd(count, 1u);
}

// No reduction: the old value hands out slots (a stream compaction). Runs whole.
__global__ void compact(const int *v, int *out, int *slots, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && v[i] % 3 == 0) out[atomicAdd(slots, 1)] = v[i];
}

// No reduction: the counter is also read plainly. Runs whole.
__global__ void capped(const int *v, int *count, int n, int cap) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && *count < cap && v[i] > 0) atomicAdd(count, 1);
}

__global__ void rounded_sum(const float *x, float *total, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&total[1], x[i]);
}

// A grid-stride histogram at data-dependent bins: no map bounds the loop, so the launch's own
// blocks run their loops as written, each device into its private bins.
__global__ void stride_histogram(const int *v, unsigned *bins, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    atomicAdd(&bins[v[i] & 63], 1u);
}

static uint64_t fnv(const void *p, size_t bytes, uint64_t h) {
  const unsigned char *b = (const unsigned char *)p;
  for (size_t i = 0; i < bytes; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

#define CHECK(x)                                                                           \
  do {                                                                                     \
    cudaError_t e = (x);                                                                   \
    if (e != cudaSuccess) {                                                                \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e));           \
      exit(2);                                                                             \
    }                                                                                      \
  } while (0)

template <typename T> static T *upload(const T *h, size_t count) {
  T *d;
  CHECK(cudaMalloc((void **)&d, count * sizeof(T)));
  CHECK(cudaMemcpy(d, h, count * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <typename T> static void download(T *h, const T *d, size_t count) {
  CHECK(cudaMemcpy(h, d, count * sizeof(T), cudaMemcpyDeviceToHost));
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100003;
  int rounds = argc > 2 ? atoi(argv[2]) : 2;
  if (n < 1 || rounds < 1) {
    fprintf(stderr, "usage: reduce [N >= 1 [ROUNDS >= 1]]\n");
    return 2;
  }
  int threads = 128, blocks = (n + threads - 1) / threads;
  int words = (n + 31) / 32;

  int *v = (int *)malloc(n * sizeof(int));
  float *x = (float *)malloc(n * sizeof(float)), *r = (float *)malloc(n * sizeof(float));
  uint32_t s = 12345;
  for (int i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    v[i] = (int)(s >> 8) % 200001 - 100000;
    x[i] = (float)((int)(s >> 20) % 64 - 20);
    r[i] = (float)(s >> 9) / 8388608.0f - 0.25f;
  }

  // Host reference, ROUNDS launches of each kernel.
  unsigned bins[BINS];
  for (int b = 0; b < BINS; b++) bins[b] = b * 3u;
  int *hist = (int *)calloc((size_t)blocks * 16, sizeof(int));
  for (int k = 0; k < blocks * 16; k++) hist[k] = k % 5;
  float total[2] = {100.0f, 0.5f};
  float neg_zero[2] = {-0.0f, 0.0f};
  int lo = 7, hi = -7;
  unsigned ulo = 4000000000u, uhi = 5;
  unsigned long long wsum = 99;
  long long top = -1;
  double dsum = 0.25;
  unsigned *set = (unsigned *)malloc(words * 4), *keep = (unsigned *)malloc(words * 4),
           *flip = (unsigned *)malloc(words * 4);
  for (int w = 0; w < words; w++) set[w] = 0x10u * w, keep[w] = ~0u ^ w, flip[w] = 0xF0F0F0F0u + w;
  int budget = 1 << 30;
  unsigned count = 11;
  int slots = 0, capped_count = 0;

  unsigned sbins[64];
  for (int b = 0; b < 64; b++) sbins[b] = 1000u * b;
  unsigned want_sbins[64];
  memcpy(want_sbins, sbins, sizeof sbins);
  unsigned want_bins[BINS];
  memcpy(want_bins, bins, sizeof bins);
  int *want_hist = (int *)malloc((size_t)blocks * 16 * sizeof(int));
  memcpy(want_hist, hist, (size_t)blocks * 16 * sizeof(int));
  float want_total = total[0];
  int want_lo = lo, want_hi = hi;
  unsigned want_ulo = ulo, want_uhi = uhi;
  unsigned long long want_wsum = wsum;
  long long want_top = top;
  double want_dsum = dsum;
  unsigned *want_set = (unsigned *)malloc(words * 4), *want_keep = (unsigned *)malloc(words * 4),
           *want_flip = (unsigned *)malloc(words * 4);
  memcpy(want_set, set, words * 4), memcpy(want_keep, keep, words * 4), memcpy(want_flip, flip, words * 4);
  int want_budget = budget;
  unsigned want_count = count;
  int want_slots = 0, positives = 0;
  double want_rounded = total[1], magnitude = fabs(total[1]);
  for (int k = 0; k < rounds; k++)
    for (int i = 0; i < n; i++) {
      want_bins[v[i] & (BINS - 1)]++;
      want_sbins[v[i] & 63]++;
      want_hist[(i / threads) * 16 + (v[i] & 15)]++;
      want_total += x[i];
      want_lo = v[i] < want_lo ? v[i] : want_lo;
      want_hi = v[i] > want_hi ? v[i] : want_hi;
      want_ulo = (unsigned)v[i] < want_ulo ? (unsigned)v[i] : want_ulo;
      want_uhi = (unsigned)v[i] > want_uhi ? (unsigned)v[i] : want_uhi;
      want_wsum += (unsigned long long)(unsigned)v[i] << 20;
      long long t = (long long)v[i] * 4096 - i;
      want_top = t > want_top ? t : want_top;
      want_dsum += (double)(v[i] % 1000);
      unsigned bit = 1u << (i & 31);
      if (v[i] & 1) want_set[i / 32] |= bit;
      if (v[i] & 2) want_keep[i / 32] &= ~bit;
      want_flip[i / 32] ^= v[i] & 4 ? bit : 0u;
      want_budget -= v[i] & 7;
      want_count += v[i] > 0;
      want_slots += v[i] % 3 == 0;
      want_rounded += r[i];
      magnitude += fabs(r[i]);
      if (k == 0) positives += v[i] > 0;
    }

  int *dv = upload(v, n);
  float *dx = upload(x, n), *dr = upload(r, n);
  unsigned *dbins = upload(bins, BINS), *dsbins = upload(sbins, 64);
  int *dhist = upload(hist, (size_t)blocks * 16);
  float *dtotal = upload(total, 2), *dzero = upload(neg_zero, 2);
  int *dlo = upload(&lo, 1), *dhi = upload(&hi, 1);
  unsigned *dulo = upload(&ulo, 1), *duhi = upload(&uhi, 1);
  unsigned long long *dwsum = upload(&wsum, 1);
  long long *dtop = upload(&top, 1);
  double *ddsum = upload(&dsum, 1);
  unsigned *dset = upload(set, words), *dkeep = upload(keep, words), *dflip = upload(flip, words);
  int *dbudget = upload(&budget, 1);
  unsigned *dcount = upload(&count, 1);
  int *dout, *dslots = upload(&slots, 1), *dcapped = upload(&capped_count, 1);
  CHECK(cudaMalloc((void **)&dout, (size_t)n * rounds * sizeof(int)));
  for (int k = 0; k < rounds; k++) {
    histogram<<<blocks, threads>>>(dv, dbins, n);
    block_histogram<<<blocks, threads>>>(dv, dhist, n);
    sum<<<blocks, threads>>>(dx, dtotal, n);
    // Nothing updates dzero[0]: it keeps its -0.0 on every device count.
    sum<<<blocks, threads>>>(dx, dzero + 1, n);
    extremes<<<blocks, threads>>>(dv, dlo, dhi, dulo, duhi, n);
    wide<<<blocks, threads>>>(dv, dwsum, dtop, ddsum, n);
    bits<<<blocks, threads>>>(dv, dset, dkeep, dflip, n);
    take<<<blocks, threads>>>(dv, dbudget, n);
    count_positive<<<(blocks + 7) / 8, threads>>>(dv, dcount, n);
    compact<<<blocks, threads>>>(dv, dout, dslots, n);
    capped<<<blocks, threads>>>(dv, dcapped, n, 1 << 30);
    rounded_sum<<<blocks, threads>>>(dr, dtotal, n);
    stride_histogram<<<(blocks + 3) / 4, threads>>>(dv, dsbins, n);
  }
  CHECK(cudaGetLastError());

  unsigned got_bins[BINS], got_sbins[64];
  int *got_hist = (int *)malloc((size_t)blocks * 16 * sizeof(int));
  float got_total[2], got_zero[2];
  int got_lo, got_hi, got_budget, got_slots, got_capped;
  unsigned got_ulo, got_uhi, got_count;
  unsigned long long got_wsum;
  long long got_top;
  double got_dsum;
  unsigned *got_set = (unsigned *)malloc(words * 4), *got_keep = (unsigned *)malloc(words * 4),
           *got_flip = (unsigned *)malloc(words * 4);
  int *got_out = (int *)malloc((size_t)n * rounds * sizeof(int));
  download(got_bins, dbins, BINS);
  download(got_sbins, dsbins, 64);
  download(got_hist, dhist, (size_t)blocks * 16);
  download(got_total, dtotal, 2);
  download(got_zero, dzero, 2);
  download(&got_lo, dlo, 1), download(&got_hi, dhi, 1), download(&got_ulo, dulo, 1), download(&got_uhi, duhi, 1);
  download(&got_wsum, dwsum, 1), download(&got_top, dtop, 1), download(&got_dsum, ddsum, 1);
  download(got_set, dset, words), download(got_keep, dkeep, words), download(got_flip, dflip, words);
  download(&got_budget, dbudget, 1), download(&got_count, dcount, 1);
  download(&got_slots, dslots, 1), download(&got_capped, dcapped, 1);
  download(got_out, dout, (size_t)n * rounds);

  int bad = 0;
  bad += memcmp(got_bins, want_bins, sizeof got_bins) != 0;
  bad += memcmp(got_sbins, want_sbins, sizeof got_sbins) != 0;
  bad += memcmp(got_hist, want_hist, (size_t)blocks * 16 * sizeof(int)) != 0;
  // Every partial sum of the small integers is exact below 2^24, in any order.
  int exact = (double)n * rounds * 43 + 100 < 16777216.0;
  // Twice: the host's own float sum (the reference) rounds as much.
  double loose = 2.0 * n * rounds * (100.0 + (double)n * rounds * 43) / 16777216.0;
  bad += exact ? got_total[0] != want_total : fabs((double)got_total[0] - want_total) > loose;
  bad += memcmp(&got_zero[0], &neg_zero[0], sizeof(float)) != 0;
  bad += exact ? got_zero[1] != want_total - 100.0f : fabs((double)got_zero[1] - (want_total - 100.0)) > loose;
  bad += got_lo != want_lo || got_hi != want_hi || got_ulo != want_ulo || got_uhi != want_uhi;
  bad += got_wsum != want_wsum || got_top != want_top || got_dsum != want_dsum;
  bad += memcmp(got_set, want_set, words * 4) != 0;
  bad += memcmp(got_keep, want_keep, words * 4) != 0;
  bad += memcmp(got_flip, want_flip, words * 4) != 0;
  bad += got_budget != want_budget || got_count != want_count || got_slots != want_slots;
  bad += got_capped != positives * rounds;
  // The compacted values, in whatever order the slots went: each multiple of 3 once per round.
  long long out_sum = 0, want_out_sum = 0;
  for (int i = 0; i < got_slots && i < n * rounds; i++) out_sum += got_out[i];
  for (int i = 0; i < n; i++)
    if (v[i] % 3 == 0) want_out_sum += (long long)v[i] * rounds;
  bad += out_sum != want_out_sum;
  double bound = (double)n * rounds * magnitude / 16777216.0;
  if (fabs((double)got_total[1] - want_rounded) > bound) {
    fprintf(stderr, "rounded sum %.9g, want %.9g within %.3g\n", got_total[1], want_rounded, bound);
    bad++;
  }
  if (bad) {
    fprintf(stderr, "bins %u/%u hist %d/%d total %g/%g lo %d/%d hi %d/%d wsum %llu/%llu top %lld/%lld dsum %g/%g "
                    "budget %d/%d count %u/%u slots %d/%d capped %d/%d\n",
            got_bins[0], want_bins[0], got_hist[0], want_hist[0], got_total[0], want_total, got_lo, want_lo, got_hi,
            want_hi, got_wsum, want_wsum, got_top, want_top, got_dsum, want_dsum, got_budget, want_budget, got_count,
            want_count, got_slots, want_slots, got_capped, positives * rounds);
  }

  uint64_t h = 14695981039346656037ull;
  h = fnv(got_bins, sizeof got_bins, h);
  h = fnv(got_sbins, sizeof got_sbins, h);
  h = fnv(got_hist, (size_t)blocks * 16 * sizeof(int), h);
  if (exact) h = fnv(&got_total[0], sizeof(float), h), h = fnv(&got_zero[1], sizeof(float), h);
  h = fnv(&got_zero[0], sizeof(float), h);
  h = fnv(&got_lo, sizeof got_lo, h), h = fnv(&got_hi, sizeof got_hi, h);
  h = fnv(&got_ulo, sizeof got_ulo, h), h = fnv(&got_uhi, sizeof got_uhi, h);
  h = fnv(&got_wsum, sizeof got_wsum, h), h = fnv(&got_top, sizeof got_top, h), h = fnv(&got_dsum, sizeof got_dsum, h);
  h = fnv(got_set, words * 4, h), h = fnv(got_keep, words * 4, h), h = fnv(got_flip, words * 4, h);
  h = fnv(&got_budget, sizeof got_budget, h), h = fnv(&got_count, sizeof got_count, h);
  h = fnv(&got_slots, sizeof got_slots, h), h = fnv(&got_capped, sizeof got_capped, h);
  h = fnv(&out_sum, sizeof out_sum, h);
  printf("%s\nchecksum %016llx\n", bad ? "FAIL" : "PASS", (unsigned long long)h);
  return bad ? 1 : 0;
}
