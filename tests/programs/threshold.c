/*
 * threshold.c -- a write under a data-dependent condition: out[i] is replaced only where
 * in[i] passes the threshold, and keeps its previous value elsewhere, so a partitioned run
 * must bring each device's whole may-write region up to date before it runs. Two launches
 * with different thresholds, the second reading what the first wrote.
 *
 * Usage: threshold [N]   (default 1000). Prints a checksum; exit 0 PASS.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

void Keep(float *in, size_t bytes_in, float *out, size_t bytes_out, long n, float t) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(2, in, out, 1, out);
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (i < n && in[i] > t) {
    out[i] = in[i] * 2.0f + out[i];
  }
  __hpvm__return(0);
}

void Root(float *in, size_t bytes_in, float *out, size_t bytes_out, long n, float t) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(2, in, out, 1, out);
  void *k = __hpvm__createNodeND(1, Keep, n);
  __hpvm__bindIn(k, 0, 0, 0);
  __hpvm__bindIn(k, 1, 1, 0);
  __hpvm__bindIn(k, 2, 2, 0);
  __hpvm__bindIn(k, 3, 3, 0);
  __hpvm__bindIn(k, 4, 4, 0);
  __hpvm__bindIn(k, 5, 5, 0);
}

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *out;
  size_t bytes_out;
  long n;
  float t;
} In;

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000;
  if (n < 1 || argc > 2) {
    fprintf(stderr, "usage: %s [N]\n", argv[0]);
    return 2;
  }
  size_t bytes = (size_t)n * sizeof(float);
  float *in = malloc(bytes), *out = malloc(bytes), *ref = malloc(bytes);
  for (long i = 0; i < n; ++i) {
    in[i] = (float)((i * 37) % 101);
    out[i] = ref[i] = (float)(i % 7);
  }
  const float ts[2] = {50.0f, 20.0f};
  for (int r = 0; r < 2; ++r) {
    for (long i = 0; i < n; ++i) {
      if (in[i] > ts[r]) ref[i] = in[i] * 2.0f + ref[i];
    }
  }
  __hpvm__init();
  llvm_hpvm_track_mem(in, bytes);
  llvm_hpvm_track_mem(out, bytes);
  for (int r = 0; r < 2; ++r) {
    In args = {in, bytes, out, bytes, n, ts[r]};
    void *g = __hpvm__launch(0, Root, &args);
    __hpvm__wait(g);
  }
  llvm_hpvm_request_mem(out, bytes);
  long bad = 0;
  for (long i = 0; i < n; ++i) {
    bad += out[i] != ref[i];
  }
  printf("checksum %016llx\n", fnv1a(out, bytes));
  __hpvm__cleanup();
  printf("threshold n=%ld: %s (%ld wrong)\n", n, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
