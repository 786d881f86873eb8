/*
 * rowptr.c -- neighbours reached through pointers chosen by clamps, a common way to write an
 * edge-replicating filter: `const float *up = y > 0 ? row - w : row;` then `up[x]`. The
 * analysis follows each way of the choice to the buffer it points into.
 *
 *   VRoot (CPU) -> VSmooth (leaf, W x H instances, DEVICE): out[y][x] = up[x] + 2 row[x] + down[x]
 *                  with the rows above and below clamped at the image's edges
 *   HRoot (CPU) -> HSmooth (leaf, H instances, DEVICE): a loop over the row, the left and right
 *                  neighbours chosen as pointers in a helper
 *
 * Usage: rowptr [W [H]]   (defaults 37 23). Prints a checksum; exit 0 PASS.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

#define BIND(n, k) __hpvm__bindIn(n, k, k, 0)
#define BIND6(n) BIND(n, 0), BIND(n, 1), BIND(n, 2), BIND(n, 3), BIND(n, 4), BIND(n, 5)

void VSmooth(float *in, size_t bytes_in, float *out, size_t bytes_out, long w, long h) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  void *self = __hpvm__getNode();
  long x = __hpvm__getNodeInstanceID_x(self);
  long y = __hpvm__getNodeInstanceID_y(self);
  const float *row = in + y * w;
  const float *up = y > 0 ? row - w : row;
  const float *down = y + 1 < h ? row + w : row;
  out[y * w + x] = up[x] + 2.0f * row[x] + down[x];
  __hpvm__return(0);
}

/* The element `d` steps from `p` along a row of `n`, or `p` itself past either end. */
static const float *step(const float *p, long at, long d, long n) {
  return at + d >= 0 && at + d < n ? p + d : p;
}

void HSmooth(float *in, size_t bytes_in, float *out, size_t bytes_out, long w, long h) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  long y = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (y < h) {
    for (long x = 0; x < w; ++x) {
      const float *c = in + y * w + x;
      out[y * w + x] = *step(c, x, -1, w) + 2.0f * *c + *step(c, x, 1, w);
    }
  }
  __hpvm__return(0);
}

void VRoot(float *in, size_t bytes_in, float *out, size_t bytes_out, long w, long h) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, in, 1, out);
  void *s = __hpvm__createNodeND(2, VSmooth, w, h);
  BIND6(s);
}

void HRoot(float *in, size_t bytes_in, float *out, size_t bytes_out, long w, long h, long rows) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, in, 1, out);
  void *s = __hpvm__createNodeND(1, HSmooth, rows);
  BIND6(s);
}

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *out;
  size_t bytes_out;
  long w, h;
} VIn;

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *out;
  size_t bytes_out;
  long w, h, rows;
} HIn;

int main(int argc, char **argv) {
  long w = argc > 1 ? atol(argv[1]) : 37, h = argc > 2 ? atol(argv[2]) : 23;
  if (w < 1 || h < 1 || argc > 3) {
    fprintf(stderr, "usage: %s [W [H]]\n", argv[0]);
    return 2;
  }
  long cells = w * h;
  size_t bytes = (size_t)cells * sizeof(float);
  float *img = malloc(bytes), *v = malloc(bytes), *hz = malloc(bytes);
  /* Small integers: every sum below is exact in any order. */
  for (long i = 0; i < cells; ++i) {
    img[i] = (float)((i * 5) % 13);
  }
  __hpvm__init();
  llvm_hpvm_track_mem(img, bytes);
  llvm_hpvm_track_mem(v, bytes);
  llvm_hpvm_track_mem(hz, bytes);
  VIn vargs = {img, bytes, v, bytes, w, h};
  void *g = __hpvm__launch(0, VRoot, &vargs);
  __hpvm__wait(g);
  /* Rows past the image: the spare instances do nothing. */
  HIn hargs = {v, bytes, hz, bytes, w, h, h + 3};
  g = __hpvm__launch(0, HRoot, &hargs);
  __hpvm__wait(g);
  llvm_hpvm_request_mem(v, bytes);
  llvm_hpvm_request_mem(hz, bytes);
  long bad = 0;
  for (long y = 0; y < h; ++y) {
    for (long x = 0; x < w; ++x) {
      long up = y > 0 ? y - 1 : y, down = y + 1 < h ? y + 1 : y;
      float want = img[up * w + x] + 2.0f * img[y * w + x] + img[down * w + x];
      bad += v[y * w + x] != want;
    }
  }
  for (long y = 0; y < h; ++y) {
    for (long x = 0; x < w; ++x) {
      long l = x > 0 ? x - 1 : x, r = x + 1 < w ? x + 1 : x;
      float want = v[y * w + l] + 2.0f * v[y * w + x] + v[y * w + r];
      bad += hz[y * w + x] != want;
    }
  }
  printf("checksum %016llx\n", fnv1a(v, bytes) ^ fnv1a(hz, bytes) * 3);
  __hpvm__cleanup();
  printf("rowptr %ldx%ld: %s (%ld wrong)\n", w, h, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
