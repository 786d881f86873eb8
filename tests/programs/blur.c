/*
 * blur.c -- a 3x3 box blur written the common way: clamped neighbours through a helper
 * (`clampi`, min and max of affine values), `int` coordinates, a 2-D grid of blocks whose
 * size is a run-time value that need not divide the image.
 *
 *   Root (CPU) -> Blocks (GPU, ceil(w / bx) x ceil(h / by)) -> Pixel (leaf, bx x by)
 *
 * Usage: blur [W [H [BX [BY [STEPS]]]]]   (defaults 61 37 8 4 2). Prints a checksum; exit 0 PASS.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

void Pixel(float *in, size_t bytes_in, float *out, size_t bytes_out, long w, long h) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  void *self = __hpvm__getNode();
  void *parent = __hpvm__getParentNode(self);
  int x = __hpvm__getNodeInstanceID_x(parent) * __hpvm__getNumNodeInstances_x(self) + __hpvm__getNodeInstanceID_x(self);
  int y = __hpvm__getNodeInstanceID_y(parent) * __hpvm__getNumNodeInstances_y(self) + __hpvm__getNodeInstanceID_y(self);
  if (x < w && y < h) {
    float s = 0.0f;
    for (int dy = -1; dy <= 1; ++dy) {
      for (int dx = -1; dx <= 1; ++dx) {
        s += in[clampi(y + dy, 0, h - 1) * w + clampi(x + dx, 0, w - 1)];
      }
    }
    out[y * w + x] = s / 9.0f;
  }
  __hpvm__return(0);
}

void Blocks(float *in, size_t bytes_in, float *out, size_t bytes_out, long w, long h, long bx, long by) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  void *p = __hpvm__createNodeND(2, Pixel, bx, by);
  __hpvm__bindIn(p, 0, 0, 0);
  __hpvm__bindIn(p, 1, 1, 0);
  __hpvm__bindIn(p, 2, 2, 0);
  __hpvm__bindIn(p, 3, 3, 0);
  __hpvm__bindIn(p, 4, 4, 0);
  __hpvm__bindIn(p, 5, 5, 0);
}

void Root(float *in, size_t bytes_in, float *out, size_t bytes_out, long w, long h, long bx, long by, long gx,
          long gy) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, in, 1, out);
  void *b = __hpvm__createNodeND(2, Blocks, gx, gy);
  __hpvm__bindIn(b, 0, 0, 0);
  __hpvm__bindIn(b, 1, 1, 0);
  __hpvm__bindIn(b, 2, 2, 0);
  __hpvm__bindIn(b, 3, 3, 0);
  __hpvm__bindIn(b, 4, 4, 0);
  __hpvm__bindIn(b, 5, 5, 0);
  __hpvm__bindIn(b, 6, 6, 0);
  __hpvm__bindIn(b, 7, 7, 0);
}

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *out;
  size_t bytes_out;
  long w, h, bx, by, gx, gy;
} In;

static int clamp_ref(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

int main(int argc, char **argv) {
  long w = argc > 1 ? atol(argv[1]) : 61, h = argc > 2 ? atol(argv[2]) : 37;
  long bx = argc > 3 ? atol(argv[3]) : 8, by = argc > 4 ? atol(argv[4]) : 4;
  long steps = argc > 5 ? atol(argv[5]) : 2;
  if (w < 1 || h < 1 || bx < 1 || by < 1 || steps < 1 || argc > 6) {
    fprintf(stderr, "usage: %s [W [H [BX [BY [STEPS]]]]]\n", argv[0]);
    return 2;
  }
  size_t n = (size_t)(w * h), bytes = n * sizeof(float);
  float *a = malloc(bytes), *b = malloc(bytes), *ra = malloc(bytes), *rb = malloc(bytes);
  for (size_t i = 0; i < n; ++i) {
    a[i] = ra[i] = (float)((i * 11) % 17);
    b[i] = rb[i] = 0.0f;
  }
  __hpvm__init();
  llvm_hpvm_track_mem(a, bytes);
  llvm_hpvm_track_mem(b, bytes);
  for (long s = 0; s < steps; ++s) {
    In args = {s % 2 ? b : a, bytes, s % 2 ? a : b, bytes, w, h, bx, by, (w + bx - 1) / bx, (h + by - 1) / by};
    void *g = __hpvm__launch(0, Root, &args);
    __hpvm__wait(g);
  }
  float *res = steps % 2 ? b : a;
  llvm_hpvm_request_mem(res, bytes);
  for (long s = 0; s < steps; ++s) {
    float *in = s % 2 ? rb : ra, *out = s % 2 ? ra : rb;
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        float v = 0.0f;
        for (int dy = -1; dy <= 1; ++dy) {
          for (int dx = -1; dx <= 1; ++dx) {
            v += in[clamp_ref(y + dy, 0, h - 1) * w + clamp_ref(x + dx, 0, w - 1)];
          }
        }
        out[y * w + x] = v / 9.0f;
      }
    }
  }
  float *ref = steps % 2 ? rb : ra;
  long bad = 0;
  for (size_t i = 0; i < n; ++i) {
    bad += res[i] != ref[i];
  }
  printf("checksum %016llx\n", fnv1a(res, bytes));
  __hpvm__cleanup();
  printf("blur %ldx%ld block %ldx%ld: %s (%ld wrong)\n", w, h, bx, by, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
