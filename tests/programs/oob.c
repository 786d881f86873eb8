/*
 * oob.c -- a node whose reads reach one element past the end of its input (as a demosaic
 * stage reading one row past its image does): out[i] = in[i] + (i + 1 < n ? in[i + 1] : 0),
 * with the load of in[i + 1] made unconditionally. The element past the end is never used.
 *
 * Usage: oob [N]   (default 1000). Prints a checksum; exit 0 PASS, 1 FAIL.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#pragma GCC diagnostic ignored "-Wunused-parameter"

void Pairs(float *in, size_t bytes_in, float *out, size_t bytes_out, long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  float next = in[i + 1];
  out[i] = in[i] + (i + 1 < n ? next : 0.0f);
  __hpvm__return(0);
}

void PairsRoot(float *in, size_t bytes_in, float *out, size_t bytes_out, long n) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, in, 1, out);
  void *p = __hpvm__createNodeND(1, Pairs, n);
  __hpvm__bindIn(p, 0, 0, 0);
  __hpvm__bindIn(p, 1, 1, 0);
  __hpvm__bindIn(p, 2, 2, 0);
  __hpvm__bindIn(p, 3, 3, 0);
  __hpvm__bindIn(p, 4, 4, 0);
}

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *out;
  size_t bytes_out;
  long n;
} In;

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000;
  /* One spare element, so the host's own run of the node stays inside the allocation. */
  float *in = malloc((n + 1) * sizeof(float)), *out = malloc(n * sizeof(float));
  for (long i = 0; i <= n; ++i) in[i] = (float)(i % 13);
  __hpvm__init();
  llvm_hpvm_track_mem(in, n * sizeof(float));
  llvm_hpvm_track_mem(out, n * sizeof(float));
  In a = {in, n * sizeof(float), out, n * sizeof(float), n};
  void *g = __hpvm__launch(0, PairsRoot, &a);
  __hpvm__wait(g);
  llvm_hpvm_request_mem(out, n * sizeof(float));
  long bad = 0;
  for (long i = 0; i < n; ++i) bad += out[i] != in[i] + (i + 1 < n ? in[i + 1] : 0.0f);
  unsigned long long h = 14695981039346656037ULL;
  for (long i = 0; i < n; ++i) h = (h ^ (unsigned long long)out[i]) * 1099511628211ULL;
  printf("checksum %016llx\n", h);
  __hpvm__cleanup();
  printf("oob n=%ld: %s (%ld wrong)\n", n, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
