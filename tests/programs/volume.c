/*
 * volume.c -- a 3-D grid: out[z][y][x] = 2 * in[z][y][x] + in[z][y][x + 1] + in[z + 1][y][x]
 * (neighbours past the edges read as the element itself), twice, swapping the buffers: a
 * split along any dimension needs halos from the neighbouring partition.
 *
 * Usage: volume [W [H [D]]]   (defaults 20 12 9). Prints a checksum; exit 0 PASS, 1 FAIL.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

void Cell(float *in, size_t bytes_in, float *out, size_t bytes_out, long w, long h, long d) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  void *self = __hpvm__getNode();
  long x = __hpvm__getNodeInstanceID_x(self);
  long y = __hpvm__getNodeInstanceID_y(self);
  long z = __hpvm__getNodeInstanceID_z(self);
  if (x < w && y < h && z < d) {
    long i = (z * h + y) * w + x;
    float right = x + 1 < w ? in[i + 1] : in[i];
    float back = z + 1 < d ? in[i + w * h] : in[i];
    out[i] = 2.0f * in[i] + right + back;
  }
  __hpvm__return(0);
}

void VolumeRoot(float *in, size_t bytes_in, float *out, size_t bytes_out, long w, long h, long d) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, in, 1, out);
  void *c = __hpvm__createNodeND(3, Cell, w, h, d);
  __hpvm__bindIn(c, 0, 0, 0);
  __hpvm__bindIn(c, 1, 1, 0);
  __hpvm__bindIn(c, 2, 2, 0);
  __hpvm__bindIn(c, 3, 3, 0);
  __hpvm__bindIn(c, 4, 4, 0);
  __hpvm__bindIn(c, 5, 5, 0);
  __hpvm__bindIn(c, 6, 6, 0);
}

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *out;
  size_t bytes_out;
  long w;
  long h;
  long d;
} In;

static void reference(const float *in, float *out, long w, long h, long d) {
  for (long z = 0; z < d; ++z) {
    for (long y = 0; y < h; ++y) {
      for (long x = 0; x < w; ++x) {
        long i = (z * h + y) * w + x;
        float right = x + 1 < w ? in[i + 1] : in[i];
        float back = z + 1 < d ? in[i + w * h] : in[i];
        out[i] = 2.0f * in[i] + right + back;
      }
    }
  }
}

int main(int argc, char **argv) {
  long w = argc > 1 ? atol(argv[1]) : 20;
  long h = argc > 2 ? atol(argv[2]) : 12;
  long d = argc > 3 ? atol(argv[3]) : 9;
  if (w < 1 || h < 1 || d < 1 || argc > 4) {
    fprintf(stderr, "usage: %s [W [H [D]]]\n", argv[0]);
    return 2;
  }
  long n = w * h * d;
  size_t bytes = (size_t)n * sizeof(float);
  float *a = malloc(bytes), *b = malloc(bytes), *ra = malloc(bytes), *rb = malloc(bytes);
  for (long i = 0; i < n; ++i) {
    a[i] = ra[i] = (float)(i % 7) * 0.25f;
    b[i] = rb[i] = -1.0f;
  }
  __hpvm__init();
  llvm_hpvm_track_mem(a, bytes);
  llvm_hpvm_track_mem(b, bytes);
  In fwd = {a, bytes, b, bytes, w, h, d};
  In bwd = {b, bytes, a, bytes, w, h, d};
  for (int k = 0; k < 2; ++k) {
    void *g = __hpvm__launch(0, VolumeRoot, k % 2 ? (void *)&bwd : (void *)&fwd);
    __hpvm__wait(g);
    if (k % 2) reference(rb, ra, w, h, d); else reference(ra, rb, w, h, d);
  }
  llvm_hpvm_request_mem(a, bytes);
  long bad = 0;
  for (long i = 0; i < n; ++i) bad += a[i] != ra[i];
  printf("checksum %016llx\n", fnv1a(a, bytes));
  __hpvm__cleanup();
  printf("volume %ldx%ldx%ld: %s (%ld wrong)\n", w, h, d, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
