/*
 * hostwrites.c -- the host writes tracked buffers between launches, as HPVM programs do:
 * - `in` is only ever read by the node, and the host rewrites it before every launch without
 *   asking for it back (HPVM copies a node's inputs at every launch);
 * - `acc` is read and written by the node; the host asks for its first half back
 *   (`llvm_hpvm_request_mem`), changes it there, and the next launch must see the change,
 *   while the second half, never asked for, stays on the devices.
 * A runtime that reused the devices' copies of what the host holds would compute from stale
 * data.
 *
 * Usage: hostwrites [N [ROUNDS]]   (default 1000 4). Prints a checksum; exit 0 PASS.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

void Step(float *in, size_t bytes_in, float *acc, size_t bytes_acc, long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(2, in, acc, 1, acc);
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (i < n) {
    acc[i] = acc[i] * 0.5f + in[i];
  }
  __hpvm__return(0);
}

void Root(float *in, size_t bytes_in, float *acc, size_t bytes_acc, long n) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(2, in, acc, 1, acc);
  void *k = __hpvm__createNodeND(1, Step, n);
  __hpvm__bindIn(k, 0, 0, 0);
  __hpvm__bindIn(k, 1, 1, 0);
  __hpvm__bindIn(k, 2, 2, 0);
  __hpvm__bindIn(k, 3, 3, 0);
  __hpvm__bindIn(k, 4, 4, 0);
}

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *acc;
  size_t bytes_acc;
  long n;
} In;

/* What the host does to its buffers before round r (in, and the first half of acc). */
static void host_round(float *in, float *acc, long n, int r) {
  for (long i = 0; i < n; ++i) {
    in[i] = (float)((i * 13 + r * 7) % 64) / 4.0f;
  }
  if (r > 0) {
    for (long i = 0; i < n / 2; ++i) {
      acc[i] += (float)(i % 3);
    }
  }
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000;
  int rounds = argc > 2 ? atoi(argv[2]) : 4;
  if (n < 2 || rounds < 1 || argc > 3) {
    fprintf(stderr, "usage: %s [N >= 2 [ROUNDS >= 1]]\n", argv[0]);
    return 2;
  }
  size_t bytes = (size_t)n * sizeof(float);
  float *in = malloc(bytes), *acc = malloc(bytes);
  float *rin = malloc(bytes), *racc = malloc(bytes);
  for (long i = 0; i < n; ++i) {
    acc[i] = racc[i] = (float)(i % 5);
  }
  for (int r = 0; r < rounds; ++r) {
    host_round(rin, racc, n, r);
    for (long i = 0; i < n; ++i) {
      racc[i] = racc[i] * 0.5f + rin[i];
    }
  }

  __hpvm__init();
  llvm_hpvm_track_mem(in, bytes);
  llvm_hpvm_track_mem(acc, bytes);
  for (int r = 0; r < rounds; ++r) {
    if (r > 0) {
      llvm_hpvm_request_mem(acc, (size_t)(n / 2) * sizeof(float));
    }
    host_round(in, acc, n, r);
    In args = {in, bytes, acc, bytes, n};
    void *g = __hpvm__launch(0, Root, &args);
    __hpvm__wait(g);
  }
  llvm_hpvm_request_mem(acc, bytes);
  long bad = 0;
  for (long i = 0; i < n; ++i) {
    bad += acc[i] != racc[i];
  }
  printf("checksum %016llx\n", fnv1a(acc, bytes));
  __hpvm__cleanup();
  printf("hostwrites n=%ld rounds=%d: %s (%ld mismatches)\n", n, rounds, bad ? "FAIL" : "PASS", bad);
  free(in);
  free(acc);
  free(rin);
  free(racc);
  return bad ? 1 : 0;
}
