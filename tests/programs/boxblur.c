/*
 * boxblur.c -- image code written with `int` and `unsigned` parameters, as most C code is:
 *
 *   BlurRoot (CPU) -> BlurBlocks (GPU, ceil(w / bx) x ceil(h / by)) -> Blur (leaf, bx x by
 *                     threads, run-time sizes): a box filter of run-time radius `r`, its
 *                     neighbours clamped to the image by an `int` helper; `(h - 1) * w`, a
 *                     product of two `int` parameters, indexes the last row
 *   MirrorRoot (CPU) -> Mirror (leaf, w x h): the image turned by half a turn, in `unsigned`
 *                     arithmetic: `(h - 1 - y) * w + (w - 1 - x)`, differences of two
 *                     variables that the guards `x < w`, `y < h` keep from wrapping
 *
 * Usage: boxblur [W [H [BX [BY [R]]]]]   (defaults 53 29 8 4 2). Prints a checksum; exit 0 PASS.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

void Blur(float *in, size_t bytes_in, float *out, size_t bytes_out, int w, int h, int r) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  void *self = __hpvm__getNode();
  void *block = __hpvm__getParentNode(self);
  int x = __hpvm__getNodeInstanceID_x(block) * __hpvm__getNumNodeInstances_x(self) + __hpvm__getNodeInstanceID_x(self);
  int y = __hpvm__getNodeInstanceID_y(block) * __hpvm__getNumNodeInstances_y(self) + __hpvm__getNodeInstanceID_y(self);
  if (x < w && y < h) {
    float s = 0.0f;
    for (int dy = -r; dy <= r; ++dy) {
      for (int dx = -r; dx <= r; ++dx) {
        s += in[clampi(y + dy, 0, h - 1) * w + clampi(x + dx, 0, w - 1)];
      }
    }
    out[y * w + x] = s;
  }
  __hpvm__return(0);
}

void BlurBlocks(float *in, size_t bytes_in, float *out, size_t bytes_out, int w, int h, int r, long bx, long by) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  void *t = __hpvm__createNodeND(2, Blur, bx, by);
  __hpvm__bindIn(t, 0, 0, 0); __hpvm__bindIn(t, 1, 1, 0); __hpvm__bindIn(t, 2, 2, 0);
  __hpvm__bindIn(t, 3, 3, 0); __hpvm__bindIn(t, 4, 4, 0); __hpvm__bindIn(t, 5, 5, 0);
  __hpvm__bindIn(t, 6, 6, 0);
}

void BlurRoot(float *in, size_t bytes_in, float *out, size_t bytes_out, int w, int h, int r, long bx, long by) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, in, 1, out);
  void *b = __hpvm__createNodeND(2, BlurBlocks, (w + bx - 1) / bx, (h + by - 1) / by);
  __hpvm__bindIn(b, 0, 0, 0); __hpvm__bindIn(b, 1, 1, 0); __hpvm__bindIn(b, 2, 2, 0);
  __hpvm__bindIn(b, 3, 3, 0); __hpvm__bindIn(b, 4, 4, 0); __hpvm__bindIn(b, 5, 5, 0);
  __hpvm__bindIn(b, 6, 6, 0); __hpvm__bindIn(b, 7, 7, 0); __hpvm__bindIn(b, 8, 8, 0);
}

void Mirror(float *in, size_t bytes_in, float *out, size_t bytes_out, unsigned w, unsigned h) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  void *self = __hpvm__getNode();
  unsigned x = __hpvm__getNodeInstanceID_x(self);
  unsigned y = __hpvm__getNodeInstanceID_y(self);
  if (x < w && y < h) {
    out[y * w + x] = in[(h - 1 - y) * w + (w - 1 - x)];
  }
  __hpvm__return(0);
}

void MirrorRoot(float *in, size_t bytes_in, float *out, size_t bytes_out, unsigned w, unsigned h) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, in, 1, out);
  void *m = __hpvm__createNodeND(2, Mirror, w, h);
  __hpvm__bindIn(m, 0, 0, 0); __hpvm__bindIn(m, 1, 1, 0); __hpvm__bindIn(m, 2, 2, 0);
  __hpvm__bindIn(m, 3, 3, 0); __hpvm__bindIn(m, 4, 4, 0); __hpvm__bindIn(m, 5, 5, 0);
}

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *out;
  size_t bytes_out;
  int w, h, r;
  long bx, by;
} BlurIn;

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *out;
  size_t bytes_out;
  unsigned w, h;
} MirrorIn;

int main(int argc, char **argv) {
  int w = argc > 1 ? atoi(argv[1]) : 53, h = argc > 2 ? atoi(argv[2]) : 29;
  long bx = argc > 3 ? atol(argv[3]) : 8, by = argc > 4 ? atol(argv[4]) : 4;
  int r = argc > 5 ? atoi(argv[5]) : 2;
  if (w < 1 || h < 1 || bx < 1 || by < 1 || r < 0 || r > 8 || argc > 6) {
    fprintf(stderr, "usage: %s [W [H [BX [BY [R]]]]]   (R 0 to 8)\n", argv[0]);
    return 2;
  }
  size_t cells = (size_t)w * (size_t)h, bytes = cells * sizeof(float);
  float *img = malloc(bytes), *blur = malloc(bytes), *turned = malloc(bytes);
  /* Small integers: every sum is exact, in any order. */
  for (size_t i = 0; i < cells; ++i) {
    img[i] = (float)((i * 7) % 23);
    blur[i] = turned[i] = -1.0f;
  }
  __hpvm__init();
  llvm_hpvm_track_mem(img, bytes);
  llvm_hpvm_track_mem(blur, bytes);
  llvm_hpvm_track_mem(turned, bytes);
  BlurIn b = {img, bytes, blur, bytes, w, h, r, bx, by};
  void *g = __hpvm__launch(0, BlurRoot, &b);
  __hpvm__wait(g);
  MirrorIn m = {blur, bytes, turned, bytes, (unsigned)w, (unsigned)h};
  g = __hpvm__launch(0, MirrorRoot, &m);
  __hpvm__wait(g);
  llvm_hpvm_request_mem(blur, bytes);
  llvm_hpvm_request_mem(turned, bytes);
  long bad = 0;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      float s = 0.0f;
      for (int dy = -r; dy <= r; ++dy) {
        for (int dx = -r; dx <= r; ++dx) {
          s += img[clampi(y + dy, 0, h - 1) * w + clampi(x + dx, 0, w - 1)];
        }
      }
      bad += blur[y * w + x] != s;
      bad += turned[(h - 1 - y) * w + (w - 1 - x)] != s;
    }
  }
  printf("checksum %016llx\n", fnv1a(blur, bytes) ^ fnv1a(turned, bytes) * 3);
  __hpvm__cleanup();
  printf("boxblur %dx%d blocks %ldx%ld radius %d: %s (%ld wrong)\n", w, h, bx, by, r, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
