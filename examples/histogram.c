/*
 * histogram.c -- two nodes whose writes go where the data says, which no access analysis can
 * predict: a histogram (atomic increments of bins[data[i] % nbins]: a reduction, each device
 * counting its part into a private copy of the bins, added up after the launch) and a scatter
 * (out[perm[i]] = in[i]), whose indices are read from `perm`, which the node only reads: the
 * runtime reads them at each launch and splits the launch when the parts write different
 * elements (a permutation does).
 *
 * Dataflow graph:
 *
 *   HistRoot       internal, 0-D, CPU_TARGET
 *     Histogram    leaf, 1-D grid n, DEVICE; instance i counts data[i]
 *     Scatter      leaf, 1-D grid n, DEVICE; instance i moves in[i] to out[perm[i]]
 *
 *   Root parameters: (int *data, size_t, int *bins, size_t, float *in, size_t, float *out,
 *                     size_t, int *perm, size_t, long n, long nbins); no edges, no outputs.
 *
 * Usage: histogram [N [NBINS]]   (defaults 4096 64; positive)
 * Exit status: 0 PASS, 1 FAIL, 2 bad arguments or out of memory.
 */
#include <hpvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#pragma GCC diagnostic ignored "-Wunused-parameter"

/* ---- Dataflow graph ------------------------------------------------------------------ */

void Histogram(int *data, size_t bytes_data, int *bins, size_t bytes_bins, long n, long nbins) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(2, data, bins, 1, bins);

  void *self = __hpvm__getNode();
  long i = __hpvm__getNodeInstanceID_x(self);
  if (i < n) {
    __hpvm__atomic_add(&bins[data[i] % nbins], 1);
  }
  __hpvm__return(0);
}

void Scatter(float *in, size_t bytes_in, float *out, size_t bytes_out, int *perm,
             size_t bytes_perm, long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(2, in, perm, 1, out);

  void *self = __hpvm__getNode();
  long i = __hpvm__getNodeInstanceID_x(self);
  if (i < n) {
    out[perm[i]] = in[i];
  }
  __hpvm__return(0);
}

void HistRoot(int *data, size_t bytes_data, int *bins, size_t bytes_bins, float *in,
              size_t bytes_in, float *out, size_t bytes_out, int *perm, size_t bytes_perm, long n,
              long nbins) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(4, data, bins, in, perm, 2, bins, out);

  void *hist = __hpvm__createNodeND(1, Histogram, n);
  void *scatter = __hpvm__createNodeND(1, Scatter, n);

  __hpvm__bindIn(hist, 0, 0, 0);  /* data */
  __hpvm__bindIn(hist, 1, 1, 0);  /* bytes_data */
  __hpvm__bindIn(hist, 2, 2, 0);  /* bins */
  __hpvm__bindIn(hist, 3, 3, 0);  /* bytes_bins */
  __hpvm__bindIn(hist, 10, 4, 0); /* n */
  __hpvm__bindIn(hist, 11, 5, 0); /* nbins */

  __hpvm__bindIn(scatter, 4, 0, 0);  /* in */
  __hpvm__bindIn(scatter, 5, 1, 0);  /* bytes_in */
  __hpvm__bindIn(scatter, 6, 2, 0);  /* out */
  __hpvm__bindIn(scatter, 7, 3, 0);  /* bytes_out */
  __hpvm__bindIn(scatter, 8, 4, 0);  /* perm */
  __hpvm__bindIn(scatter, 9, 5, 0);  /* bytes_perm */
  __hpvm__bindIn(scatter, 10, 6, 0); /* n */
}

typedef struct __attribute__((__packed__)) {
  int *data;
  size_t bytes_data;
  int *bins;
  size_t bytes_bins;
  float *in;
  size_t bytes_in;
  float *out;
  size_t bytes_out;
  int *perm;
  size_t bytes_perm;
  long n;
  long nbins;
} RootIn;

/* ---- Host ---------------------------------------------------------------------------- */

static long arg_long(int argc, char **argv, int i, long dflt) {
  if (argc <= i) {
    return dflt;
  }
  char *end = NULL;
  long v = strtol(argv[i], &end, 10);
  if (argv[i][0] == '\0' || *end != '\0' || v <= 0) {
    return -1;
  }
  return v;
}

static uint32_t lcg_next(uint32_t *state) {
  *state = *state * 1664525u + 1013904223u;
  return *state >> 8;
}

static unsigned long long fnv1a(unsigned long long h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; ++i) {
    h = (h ^ p[i]) * 1099511628211ULL;
  }
  return h;
}

int main(int argc, char **argv) {
  long n = arg_long(argc, argv, 1, 4096);
  long nbins = arg_long(argc, argv, 2, 64);
  if (n <= 0 || nbins <= 0 || argc > 3) {
    fprintf(stderr, "usage: %s [N > 0 [NBINS > 0]]\n", argv[0]);
    return 2;
  }
  size_t ibytes = (size_t)n * sizeof(int);
  size_t bbytes = (size_t)nbins * sizeof(int);
  size_t fbytes = (size_t)n * sizeof(float);
  int *data = malloc(ibytes), *bins = calloc((size_t)nbins, sizeof(int)), *perm = malloc(ibytes);
  int *ref_bins = calloc((size_t)nbins, sizeof(int));
  float *in = malloc(fbytes), *out = malloc(fbytes);
  if (!data || !bins || !perm || !ref_bins || !in || !out) {
    fprintf(stderr, "histogram: out of memory\n");
    return 2;
  }
  uint32_t seed = 777u;
  for (long i = 0; i < n; ++i) {
    data[i] = (int)(lcg_next(&seed) % 100000u);
    in[i] = (float)i;
    out[i] = -1.0f;
    perm[i] = (int)i;
  }
  /* A random permutation (Fisher-Yates). */
  for (long i = n - 1; i > 0; --i) {
    long j = (long)(lcg_next(&seed) % (uint32_t)(i + 1));
    int t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }

  __hpvm__init();
  llvm_hpvm_track_mem(data, ibytes);
  llvm_hpvm_track_mem(bins, bbytes);
  llvm_hpvm_track_mem(in, fbytes);
  llvm_hpvm_track_mem(out, fbytes);
  llvm_hpvm_track_mem(perm, ibytes);

  RootIn args = {data, ibytes, bins, bbytes, in, fbytes, out, fbytes, perm, ibytes, n, nbins};
  void *dfg = __hpvm__launch(0, HistRoot, (void *)&args);
  __hpvm__wait(dfg);
  llvm_hpvm_request_mem(bins, bbytes);
  llvm_hpvm_request_mem(out, fbytes);
  unsigned long long h = fnv1a(14695981039346656037ULL, bins, bbytes);
  printf("checksum %016llx\n", fnv1a(h, out, fbytes));

  long bad = 0;
  for (long i = 0; i < n; ++i) {
    ref_bins[data[i] % nbins] += 1;
    bad += out[perm[i]] != in[i];
  }
  for (long b = 0; b < nbins; ++b) {
    bad += bins[b] != ref_bins[b];
  }

  llvm_hpvm_untrack_mem(data);
  llvm_hpvm_untrack_mem(bins);
  llvm_hpvm_untrack_mem(in);
  llvm_hpvm_untrack_mem(out);
  llvm_hpvm_untrack_mem(perm);
  __hpvm__cleanup();
  printf("histogram n=%ld nbins=%ld: %s (%ld wrong)\n", n, nbins, bad ? "FAIL" : "PASS", bad);
  free(data);
  free(bins);
  free(perm);
  free(ref_bins);
  free(in);
  free(out);
  return bad ? 1 : 0;
}
