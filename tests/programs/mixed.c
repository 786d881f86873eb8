/*
 * mixed.c -- a partitionable node, then one the analysis cannot split (an atomic histogram),
 * then a partitionable node reading the histogram: data crosses from partitions to the one
 * device of the fallback and back.
 *
 *   Scale:     v[i] = (v[i] * 3 + 1) mod 64                   (split)
 *   Histogram: bins[v[i] mod nb] += 1, atomically, below a cap (not split: it reads the
 *              bins it counts into, so private copies per device would see other counts)
 *   Weigh:     w[i] = bins[v[i] mod nb] * 2 + v[i]           (split; reads bins anywhere)
 *
 * Usage: mixed [N [NB]]   (defaults 3000 10). Prints a checksum; exit 0 PASS, 1 FAIL.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

void Scale(int *v, size_t bytes_v, int *bins, size_t bytes_bins, int *w, size_t bytes_w, long n, long nb) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, v, 1, v);
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (i < n) {
    v[i] = (v[i] * 3 + 1) % 64;
  }
  __hpvm__return(0);
}

void Histogram(int *v, size_t bytes_v, int *bins, size_t bytes_bins, int *w, size_t bytes_w, long n, long nb) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(2, v, bins, 1, bins);
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (i < n && bins[v[i] % nb] < 1 << 30) {
    __hpvm__atomic_add(&bins[v[i] % nb], 1);
  }
  __hpvm__return(0);
}

void Weigh(int *v, size_t bytes_v, int *bins, size_t bytes_bins, int *w, size_t bytes_w, long n, long nb) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(2, v, bins, 1, w);
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (i < n) {
    w[i] = bins[v[i] % nb] * 2 + v[i];
  }
  __hpvm__return(0);
}

void Root(int *v, size_t bytes_v, int *bins, size_t bytes_bins, int *w, size_t bytes_w, long n, long nb) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(2, v, bins, 3, v, bins, w);
  void *s = __hpvm__createNodeND(1, Scale, n);
  void *h = __hpvm__createNodeND(1, Histogram, n);
  void *g = __hpvm__createNodeND(1, Weigh, n);
  __hpvm__bindIn(s, 0, 0, 0);
  __hpvm__bindIn(h, 0, 0, 0);
  __hpvm__bindIn(g, 0, 0, 0);
  __hpvm__bindIn(s, 1, 1, 0);
  __hpvm__bindIn(h, 1, 1, 0);
  __hpvm__bindIn(g, 1, 1, 0);
  __hpvm__bindIn(s, 2, 2, 0);
  __hpvm__bindIn(h, 2, 2, 0);
  __hpvm__bindIn(g, 2, 2, 0);
  __hpvm__bindIn(s, 3, 3, 0);
  __hpvm__bindIn(h, 3, 3, 0);
  __hpvm__bindIn(g, 3, 3, 0);
  __hpvm__bindIn(s, 4, 4, 0);
  __hpvm__bindIn(h, 4, 4, 0);
  __hpvm__bindIn(g, 4, 4, 0);
  __hpvm__bindIn(s, 5, 5, 0);
  __hpvm__bindIn(h, 5, 5, 0);
  __hpvm__bindIn(g, 5, 5, 0);
  __hpvm__bindIn(s, 6, 6, 0);
  __hpvm__bindIn(h, 6, 6, 0);
  __hpvm__bindIn(g, 6, 6, 0);
  __hpvm__bindIn(s, 7, 7, 0);
  __hpvm__bindIn(h, 7, 7, 0);
  __hpvm__bindIn(g, 7, 7, 0);
}

typedef struct __attribute__((__packed__)) {
  int *v;
  size_t bytes_v;
  int *bins;
  size_t bytes_bins;
  int *w;
  size_t bytes_w;
  long n;
  long nb;
} In;


int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 3000;
  long nb = argc > 2 ? atol(argv[2]) : 10;
  if (n < 1 || nb < 1 || argc > 3) {
    fprintf(stderr, "usage: %s [N [NB]]\n", argv[0]);
    return 2;
  }
  int *v = malloc(n * sizeof(int)), *w = malloc(n * sizeof(int)), *bins = calloc(nb, sizeof(int));
  int *rv = malloc(n * sizeof(int)), *rw = malloc(n * sizeof(int)), *rbins = calloc(nb, sizeof(int));
  for (long i = 0; i < n; ++i) {
    v[i] = rv[i] = (int)((i * 7919) % 64);
    w[i] = rw[i] = -1;
  }
  __hpvm__init();
  llvm_hpvm_track_mem(v, n * sizeof(int));
  llvm_hpvm_track_mem(bins, nb * sizeof(int));
  llvm_hpvm_track_mem(w, n * sizeof(int));
  for (int round = 0; round < 2; ++round) {
    In in = {v, n * sizeof(int), bins, nb * sizeof(int), w, n * sizeof(int), n, nb};
    void *g = __hpvm__launch(0, Root, &in);
    __hpvm__wait(g);
    for (long i = 0; i < n; ++i) rv[i] = (rv[i] * 3 + 1) % 64;
    for (long i = 0; i < n; ++i) rbins[rv[i] % nb] += 1;
    for (long i = 0; i < n; ++i) rw[i] = rbins[rv[i] % nb] * 2 + rv[i];
  }
  llvm_hpvm_request_mem(v, n * sizeof(int));
  llvm_hpvm_request_mem(w, n * sizeof(int));
  llvm_hpvm_request_mem(bins, nb * sizeof(int));
  long bad = 0;
  for (long i = 0; i < n; ++i) bad += v[i] != rv[i] || w[i] != rw[i];
  for (long i = 0; i < nb; ++i) bad += bins[i] != rbins[i];
  printf("checksum %016llx\n", fnv1a(w, n * sizeof(int)) ^ fnv1a(bins, nb * sizeof(int)));
  __hpvm__cleanup();
  printf("mixed n=%ld nb=%ld: %s (%ld wrong)\n", n, nb, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
