/*
 * mesh.c -- a buffer written in turns by launches over different windows (the mesh-refinement
 * pattern the Mekong thesis could not handle), then read whole by the host.
 *
 * Window launch k updates a[off + i] = a[off + i] * 0.5 + k for i < len: a read and a write of
 * the same elements, over windows that overlap each other and the partitions of earlier
 * launches. A final Smooth launch reads neighbours across every window edge.
 *
 * Usage: mesh [N]   (default 1000). Prints a checksum; exit 0 PASS, 1 FAIL, 2 bad arguments.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

void Refine(float *a, size_t bytes_a, long off, long len, float k) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, a, 1, a);
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (i < len) {
    a[off + i] = a[off + i] * 0.5f + k;
  }
  __hpvm__return(0);
}

void RefineRoot(float *a, size_t bytes_a, long off, long len, float k) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, a, 1, a);
  void *n = __hpvm__createNodeND(1, Refine, len);
  __hpvm__bindIn(n, 0, 0, 0);
  __hpvm__bindIn(n, 1, 1, 0);
  __hpvm__bindIn(n, 2, 2, 0);
  __hpvm__bindIn(n, 3, 3, 0);
  __hpvm__bindIn(n, 4, 4, 0);
}

void Smooth(float *a, size_t bytes_a, float *b, size_t bytes_b, long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, a, 1, b);
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (i > 0 && i < n - 1) {
    b[i] = a[i - 1] + a[i] + a[i + 1];
  } else if (i < n) {
    b[i] = a[i];
  }
  __hpvm__return(0);
}

void SmoothRoot(float *a, size_t bytes_a, float *b, size_t bytes_b, long n) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, a, 1, b);
  void *s = __hpvm__createNodeND(1, Smooth, n);
  __hpvm__bindIn(s, 0, 0, 0);
  __hpvm__bindIn(s, 1, 1, 0);
  __hpvm__bindIn(s, 2, 2, 0);
  __hpvm__bindIn(s, 3, 3, 0);
  __hpvm__bindIn(s, 4, 4, 0);
}

typedef struct __attribute__((__packed__)) {
  float *a;
  size_t bytes_a;
  long off;
  long len;
  float k;
} RefineIn;

typedef struct __attribute__((__packed__)) {
  float *a;
  size_t bytes_a;
  float *b;
  size_t bytes_b;
  long n;
} SmoothIn;


int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000;
  if (n < 8 || argc > 2) {
    fprintf(stderr, "usage: %s [N >= 8]\n", argv[0]);
    return 2;
  }
  size_t bytes = (size_t)n * sizeof(float);
  float *a = malloc(bytes), *b = malloc(bytes), *ra = malloc(bytes), *rb = malloc(bytes);
  for (long i = 0; i < n; ++i) {
    a[i] = ra[i] = (float)(i % 17);
    b[i] = rb[i] = -1.0f;
  }
  /* Windows as fractions of n: overlapping, nested, at both ends. */
  long windows[][2] = {{0, n / 2}, {n / 4, n / 2}, {n / 3, n - n / 3}, {n / 2, n - n / 2},
                       {1, n / 8}, {n - n / 5, n / 5}, {n / 6, n / 6}};
  int count = sizeof windows / sizeof windows[0];

  __hpvm__init();
  llvm_hpvm_track_mem(a, bytes);
  llvm_hpvm_track_mem(b, bytes);
  for (int k = 0; k < count; ++k) {
    RefineIn in = {a, bytes, windows[k][0], windows[k][1], (float)k};
    void *g = __hpvm__launch(0, RefineRoot, &in);
    __hpvm__wait(g);
    for (long i = 0; i < windows[k][1]; ++i) {
      ra[windows[k][0] + i] = ra[windows[k][0] + i] * 0.5f + (float)k;
    }
  }
  SmoothIn s = {a, bytes, b, bytes, n};
  void *g = __hpvm__launch(0, SmoothRoot, &s);
  __hpvm__wait(g);
  llvm_hpvm_request_mem(a, bytes);
  llvm_hpvm_request_mem(b, bytes);
  for (long i = 0; i < n; ++i) {
    rb[i] = (i > 0 && i < n - 1) ? ra[i - 1] + ra[i] + ra[i + 1] : ra[i];
  }
  long bad = 0;
  for (long i = 0; i < n; ++i) {
    bad += a[i] != ra[i] || b[i] != rb[i];
  }
  printf("checksum %016llx\n", fnv1a(b, bytes) ^ fnv1a(a, bytes));
  __hpvm__cleanup();
  printf("mesh n=%ld: %s (%ld wrong)\n", n, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
