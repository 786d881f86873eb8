/*
 * mathfns.c -- a GPU leaf calling libm: functions with an exact LLVM intrinsic (sqrtf,
 * fabsf) and functions the GPU gets from libdevice (expf, logf, powf, sinf, cosf, tanhf,
 * and exp/log in double). On the CPU they are libm's; on a GPU, libdevice's (which may differ
 * by an ulp or two), so the result is checked against the host within a relative tolerance,
 * and compared bit for bit only across device counts of one kind.
 *
 * Usage: mathfns [N]   (default 1000). Prints a checksum; exit 0 PASS.
 */
#include <hpvm.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

static float f(float x, double d) {
  float a = expf(-x) * sinf(3.0f * x) + cosf(x) * tanhf(x - 1.0f);
  float b = logf(1.0f + x) + powf(x, 1.5f) + sqrtf(x) - fabsf(x - 2.0f);
  return a + b + (float)(exp(-d) + log(1.0 + d));
}

void Math(float *in, size_t bytes_in, float *out, size_t bytes_out, long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (i < n) {
    out[i] = f(in[i], (double)in[i] * 0.5);
  }
  __hpvm__return(0);
}

void Root(float *in, size_t bytes_in, float *out, size_t bytes_out, long n) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, in, 1, out);
  void *k = __hpvm__createNodeND(1, Math, n);
  __hpvm__bindIn(k, 0, 0, 0);
  __hpvm__bindIn(k, 1, 1, 0);
  __hpvm__bindIn(k, 2, 2, 0);
  __hpvm__bindIn(k, 3, 3, 0);
  __hpvm__bindIn(k, 4, 4, 0);
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
  if (n < 1 || argc > 2) {
    fprintf(stderr, "usage: %s [N]\n", argv[0]);
    return 2;
  }
  size_t bytes = (size_t)n * sizeof(float);
  float *in = malloc(bytes), *out = malloc(bytes);
  for (long i = 0; i < n; ++i) {
    in[i] = (float)(i % 997) * 0.01f;
  }
  __hpvm__init();
  llvm_hpvm_track_mem(in, bytes);
  llvm_hpvm_track_mem(out, bytes);
  In args = {in, bytes, out, bytes, n};
  void *g = __hpvm__launch(0, Root, &args);
  __hpvm__wait(g);
  llvm_hpvm_request_mem(out, bytes);
  long bad = 0;
  for (long i = 0; i < n; ++i) {
    float want = f(in[i], (double)in[i] * 0.5);
    if (!(fabsf(out[i] - want) <= 1e-5f * fmaxf(1.0f, fabsf(want)))) {
      if (bad++ < 5) fprintf(stderr, "out[%ld] = %.9g, want %.9g\n", i, out[i], want);
    }
  }
  printf("checksum %016llx\n", fnv1a(out, bytes));
  __hpvm__cleanup();
  free(in);
  free(out);
  printf("%s\n", bad ? "FAIL" : "PASS");
  return bad != 0;
}
