/*
 * radius.c -- filters whose radius is a run-time value, written the common way: loops from
 * `-r` to `r`, the border clamped by helper functions (one with early returns), the block
 * size chosen at run time.
 *
 *   SmoothRoot (CPU) -> Rows (GPU, ceil(n / block) instances) -> Smooth (leaf, `block` instances)
 *   FilterRoot (CPU) -> Filter (leaf, W x H): a (2r+1) x (2r+1) mask buffer indexed
 *                       `(dy + r) * (2r + 1) + dx + r`, `int` sizes
 *
 * Usage: radius [W [H [R [BLOCK]]]]   (defaults 53 31 2 16). Prints a checksum; exit 0 PASS.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

static inline long clampl(long v, long lo, long hi) {
  if (v < lo)
    return lo;
  if (v > hi)
    return hi;
  return v;
}

static int clampi(int v, int lo, int hi) {
  int t = v > lo ? v : lo;
  return t < hi ? t : hi;
}

/* A 1-D box filter over the flattened image (row borders ignored on purpose: it is a
 * signal, not an image, to this stage). */
void Smooth(float *in, size_t bytes_in, float *out, size_t bytes_out, long n, long r) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  void *self = __hpvm__getNode();
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getParentNode(self)) * __hpvm__getNumNodeInstances_x(self) +
           __hpvm__getNodeInstanceID_x(self);
  if (i < n) {
    float s = 0.0f;
    for (long k = -r; k <= r; ++k) {
      s += in[clampl(i + k, 0, n - 1)];
    }
    out[i] = s / (float)(2 * r + 1);
  }
  __hpvm__return(0);
}

void Rows(float *in, size_t bytes_in, float *out, size_t bytes_out, long n, long r, long block) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  void *s = __hpvm__createNodeND(1, Smooth, block);
  __hpvm__bindIn(s, 0, 0, 0);
  __hpvm__bindIn(s, 1, 1, 0);
  __hpvm__bindIn(s, 2, 2, 0);
  __hpvm__bindIn(s, 3, 3, 0);
  __hpvm__bindIn(s, 4, 4, 0);
  __hpvm__bindIn(s, 5, 5, 0);
}

void Filter(float *in, size_t bytes_in, float *mask, size_t bytes_mask, float *out, size_t bytes_out, int w, int h,
            int r) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(2, in, mask, 1, out);
  void *self = __hpvm__getNode();
  int x = __hpvm__getNodeInstanceID_x(self), y = __hpvm__getNodeInstanceID_y(self);
  float s = 0.0f;
  for (int dy = -r; dy <= r; ++dy) {
    for (int dx = -r; dx <= r; ++dx) {
      int yy = clampi(y + dy, 0, h - 1), xx = clampi(x + dx, 0, w - 1);
      s += in[yy * w + xx] * mask[(dy + r) * (2 * r + 1) + dx + r];
    }
  }
  out[y * w + x] = s;
  __hpvm__return(0);
}

void SmoothRoot(float *in, size_t bytes_in, float *out, size_t bytes_out, long n, long r, long block, long blocks) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, in, 1, out);
  void *rows = __hpvm__createNodeND(1, Rows, blocks);
  __hpvm__bindIn(rows, 0, 0, 0);
  __hpvm__bindIn(rows, 1, 1, 0);
  __hpvm__bindIn(rows, 2, 2, 0);
  __hpvm__bindIn(rows, 3, 3, 0);
  __hpvm__bindIn(rows, 4, 4, 0);
  __hpvm__bindIn(rows, 5, 5, 0);
  __hpvm__bindIn(rows, 6, 6, 0);
}

void FilterRoot(float *in, size_t bytes_in, float *mask, size_t bytes_mask, float *out, size_t bytes_out, int w, int h,
                int r) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(2, in, mask, 1, out);
  void *f = __hpvm__createNodeND(2, Filter, (long)w, (long)h);
  __hpvm__bindIn(f, 0, 0, 0);
  __hpvm__bindIn(f, 1, 1, 0);
  __hpvm__bindIn(f, 2, 2, 0);
  __hpvm__bindIn(f, 3, 3, 0);
  __hpvm__bindIn(f, 4, 4, 0);
  __hpvm__bindIn(f, 5, 5, 0);
  __hpvm__bindIn(f, 6, 6, 0);
  __hpvm__bindIn(f, 7, 7, 0);
  __hpvm__bindIn(f, 8, 8, 0);
}

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *out;
  size_t bytes_out;
  long n, r, block, blocks;
} SmoothIn;

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *mask;
  size_t bytes_mask;
  float *out;
  size_t bytes_out;
  int w, h, r;
} FilterIn;

int main(int argc, char **argv) {
  int w = argc > 1 ? atoi(argv[1]) : 53, h = argc > 2 ? atoi(argv[2]) : 31, r = argc > 3 ? atoi(argv[3]) : 2;
  long block = argc > 4 ? atol(argv[4]) : 16;
  if (w < 1 || h < 1 || r < 0 || block < 1 || argc > 5) {
    fprintf(stderr, "usage: %s [W [H [R [BLOCK]]]]\n", argv[0]);
    return 2;
  }
  long n = (long)w * h, taps = (2L * r + 1) * (2L * r + 1);
  size_t bytes = (size_t)n * sizeof(float), mask_bytes = (size_t)taps * sizeof(float);
  float *img = malloc(bytes), *tmp = malloc(bytes), *out = malloc(bytes), *mask = malloc(mask_bytes);
  float *rtmp = malloc(bytes), *rout = malloc(bytes);
  for (long i = 0; i < n; ++i) {
    img[i] = (float)((i * 13) % 29) / 8.0f;
    tmp[i] = out[i] = 0.0f;
  }
  for (long t = 0; t < taps; ++t) {
    /* Powers of two: products are exact, so a GPU's fused multiply-adds round as the host does. */
    mask[t] = (float)(1 << (t % 4)) / 64.0f;
  }
  __hpvm__init();
  llvm_hpvm_track_mem(img, bytes);
  llvm_hpvm_track_mem(tmp, bytes);
  llvm_hpvm_track_mem(mask, mask_bytes);
  llvm_hpvm_track_mem(out, bytes);
  SmoothIn sargs = {img, bytes, tmp, bytes, n, r, block, (n + block - 1) / block};
  void *g = __hpvm__launch(0, SmoothRoot, &sargs);
  __hpvm__wait(g);
  FilterIn fargs = {tmp, bytes, mask, mask_bytes, out, bytes, w, h, r};
  g = __hpvm__launch(0, FilterRoot, &fargs);
  __hpvm__wait(g);
  llvm_hpvm_request_mem(out, bytes);
  for (long i = 0; i < n; ++i) {
    float s = 0.0f;
    for (long k = -r; k <= r; ++k) {
      s += img[clampl(i + k, 0, n - 1)];
    }
    rtmp[i] = s / (float)(2 * r + 1);
  }
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      float s = 0.0f;
      for (int dy = -r; dy <= r; ++dy) {
        for (int dx = -r; dx <= r; ++dx) {
          int yy = clampi(y + dy, 0, h - 1), xx = clampi(x + dx, 0, w - 1);
          s += rtmp[yy * w + xx] * mask[(dy + r) * (2 * r + 1) + dx + r];
        }
      }
      rout[y * w + x] = s;
    }
  }
  long bad = 0;
  for (long i = 0; i < n; ++i) {
    bad += out[i] != rout[i];
  }
  printf("checksum %016llx\n", fnv1a(out, bytes));
  __hpvm__cleanup();
  printf("radius %dx%d r=%d: %s (%ld wrong)\n", w, h, r, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
