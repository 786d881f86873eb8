/*
 * conv.c -- a 5x5 convolution written the common way: the filter is a buffer, the border is
 * clamped with the usual `MIN`/`MAX` macros (which compute `MAX(v, 0)` twice), `int` sizes,
 * and a flat 2-D grid of one instance per pixel.
 *
 *   Root (CPU) -> Conv (leaf, W x H)
 *
 * Usage: conv [W [H [STEPS]]]   (defaults 61 37 2). Prints a checksum; exit 0 PASS.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

#define R 2
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

void Conv(float *in, size_t bytes_in, float *mask, size_t bytes_mask, float *out, size_t bytes_out, int w, int h) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(2, in, mask, 1, out);
  void *self = __hpvm__getNode();
  int x = __hpvm__getNodeInstanceID_x(self), y = __hpvm__getNodeInstanceID_y(self);
  float s = 0.0f;
  for (int j = -R; j <= R; ++j) {
    for (int i = -R; i <= R; ++i) {
      int yy = MIN(MAX(y + j, 0), h - 1), xx = MIN(MAX(x + i, 0), w - 1);
      s += in[yy * w + xx] * mask[(j + R) * (2 * R + 1) + i + R];
    }
  }
  out[y * w + x] = s;
  __hpvm__return(0);
}

void Root(float *in, size_t bytes_in, float *mask, size_t bytes_mask, float *out, size_t bytes_out, int w, int h) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(2, in, mask, 1, out);
  void *c = __hpvm__createNodeND(2, Conv, (long)w, (long)h);
  __hpvm__bindIn(c, 0, 0, 0);
  __hpvm__bindIn(c, 1, 1, 0);
  __hpvm__bindIn(c, 2, 2, 0);
  __hpvm__bindIn(c, 3, 3, 0);
  __hpvm__bindIn(c, 4, 4, 0);
  __hpvm__bindIn(c, 5, 5, 0);
  __hpvm__bindIn(c, 6, 6, 0);
  __hpvm__bindIn(c, 7, 7, 0);
}

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *mask;
  size_t bytes_mask;
  float *out;
  size_t bytes_out;
  int w, h;
} In;

int main(int argc, char **argv) {
  int w = argc > 1 ? atoi(argv[1]) : 61, h = argc > 2 ? atoi(argv[2]) : 37;
  int steps = argc > 3 ? atoi(argv[3]) : 2;
  if (w < 1 || h < 1 || steps < 1 || argc > 4) {
    fprintf(stderr, "usage: %s [W [H [STEPS]]]\n", argv[0]);
    return 2;
  }
  size_t n = (size_t)w * (size_t)h, bytes = n * sizeof(float);
  size_t taps = (2 * R + 1) * (2 * R + 1), mask_bytes = taps * sizeof(float);
  float *a = malloc(bytes), *b = malloc(bytes), *ra = malloc(bytes), *rb = malloc(bytes), *mask = malloc(mask_bytes);
  for (size_t i = 0; i < n; ++i) {
    a[i] = ra[i] = (float)((i * 11) % 17) / 16.0f;
    b[i] = rb[i] = 0.0f;
  }
  for (size_t t = 0; t < taps; ++t) {
    mask[t] = (float)(t % 5 + 1) / 64.0f;
  }
  __hpvm__init();
  llvm_hpvm_track_mem(a, bytes);
  llvm_hpvm_track_mem(b, bytes);
  llvm_hpvm_track_mem(mask, mask_bytes);
  for (int s = 0; s < steps; ++s) {
    In args = {s % 2 ? b : a, bytes, mask, mask_bytes, s % 2 ? a : b, bytes, w, h};
    void *g = __hpvm__launch(0, Root, &args);
    __hpvm__wait(g);
  }
  float *res = steps % 2 ? b : a;
  llvm_hpvm_request_mem(res, bytes);
  for (int s = 0; s < steps; ++s) {
    float *in = s % 2 ? rb : ra, *out = s % 2 ? ra : rb;
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        float v = 0.0f;
        for (int j = -R; j <= R; ++j) {
          for (int i = -R; i <= R; ++i) {
            int yy = MIN(MAX(y + j, 0), h - 1), xx = MIN(MAX(x + i, 0), w - 1);
            v += in[yy * w + xx] * mask[(j + R) * (2 * R + 1) + i + R];
          }
        }
        out[y * w + x] = v;
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
  printf("conv %dx%d: %s (%ld wrong)\n", w, h, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
