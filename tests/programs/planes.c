/*
 * planes.c -- an image stored as three colour planes, each node a 1-D grid over rows whose
 * instances loop over the columns, indices computed in `int` from `size_t` sizes:
 * `int i = (c * rows + row) * cols + col` (the style of HPVM's camera pipeline). The
 * arithmetic is 64-bit and truncated to `int`: the analysis keeps it while its largest value
 * fits (a bound the runtime checks) and delinearizes the planes.
 *
 *   MosaicRoot (CPU) -> Mosaic (leaf, one instance per row): a Bayer-like pass, its reads a
 *                       row up and down (`i - cols`, `i + cols`) on alternate rows and columns
 *   MixRoot (CPU)    -> Mix (leaf, GRID instances): writes row `row` of each plane; two
 *                       instances would write the same elements if the grid had more rows
 *                       than a plane, so the analysis lets the node split only while it has not
 *
 * Usage: planes [COLS [ROWS [GRID]]]   (defaults 29 17 = ROWS). Prints a checksum; exit 0 PASS.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"

#define PLANES 3

void Mosaic(float *in, size_t bytes_in, float *out, size_t bytes_out, size_t rows, size_t cols) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  int row = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (row < 1 || row >= rows - 1) {
    __hpvm__return(0);
    return;
  }
  for (int col = 1; col < cols - 1; col++) {
    int i0 = (0 * rows + row) * cols + col;
    int i1 = (1 * rows + row) * cols + col;
    int i2 = (2 * rows + row) * cols + col;
    if (row % 2 == 0 && col % 2 == 0) {
      out[i0] = in[i0 - 1] + in[i0 + 1];
      out[i1] = in[i1] * 2;
      out[i2] = in[i2 - cols] + in[i2 + cols];
    } else if (row % 2 == 0) {
      out[i0] = in[i0];
      out[i1] = in[i1 - cols] + in[i1 + cols] + in[i1 - 1] + in[i1 + 1];
      out[i2] = in[i2 - cols - 1] + in[i2 + cols + 1];
    } else {
      out[i0] = in[i0 + cols];
      out[i1] = in[i1];
      out[i2] = in[i2 - 1];
    }
  }
  __hpvm__return(0);
}

void MosaicRoot(float *in, size_t bytes_in, float *out, size_t bytes_out, size_t rows, size_t cols) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, in, 1, out);
  void *m = __hpvm__createNodeND(1, Mosaic, rows);
  __hpvm__bindIn(m, 0, 0, 0); __hpvm__bindIn(m, 1, 1, 0); __hpvm__bindIn(m, 2, 2, 0);
  __hpvm__bindIn(m, 3, 3, 0); __hpvm__bindIn(m, 4, 4, 0); __hpvm__bindIn(m, 5, 5, 0);
}

void Mix(float *in, size_t bytes_in, float *out, size_t bytes_out, size_t rows, size_t cols) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  int row = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  for (int col = 0; col < cols; col++) {
    float a = in[(0 * rows + row) * cols + col], b = in[(1 * rows + row) * cols + col];
    float c = in[(2 * rows + row) * cols + col];
    out[(0 * rows + row) * cols + col] = a + b;
    out[(1 * rows + row) * cols + col] = b + c;
    out[(2 * rows + row) * cols + col] = c + a;
  }
  __hpvm__return(0);
}

void MixRoot(float *in, size_t bytes_in, float *out, size_t bytes_out, size_t rows, size_t cols, size_t grid) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, in, 1, out);
  void *m = __hpvm__createNodeND(1, Mix, grid);
  __hpvm__bindIn(m, 0, 0, 0); __hpvm__bindIn(m, 1, 1, 0); __hpvm__bindIn(m, 2, 2, 0);
  __hpvm__bindIn(m, 3, 3, 0); __hpvm__bindIn(m, 4, 4, 0); __hpvm__bindIn(m, 5, 5, 0);
}

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *out;
  size_t bytes_out;
  size_t rows, cols;
} MosaicIn;

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *out;
  size_t bytes_out;
  size_t rows, cols, grid;
} MixIn;

int main(int argc, char **argv) {
  long cols = argc > 1 ? atol(argv[1]) : 29, rows = argc > 2 ? atol(argv[2]) : 17;
  long grid = argc > 3 ? atol(argv[3]) : rows;
  /* A grid of fewer rows than the planes leaves the rows past it as they were. (More would
   * make two instances write the same elements: a race.) */
  if (cols < 1 || rows < 1 || grid < 1 || grid > rows || argc > 4) {
    fprintf(stderr, "usage: %s [COLS [ROWS [GRID]]]   (GRID at most ROWS)\n", argv[0]);
    return 2;
  }
  long room = PLANES * rows * cols;
  size_t bytes = (size_t)room * sizeof(float);
  float *img = malloc(bytes), *mos = malloc(bytes), *mix = malloc(bytes);
  float *want = malloc(bytes), *wmix = malloc(bytes);
  for (long i = 0; i < room; ++i) {
    img[i] = (float)((i * 5) % 19);
    mos[i] = want[i] = -1.0f;
    mix[i] = wmix[i] = -2.0f;
  }
  __hpvm__init();
  llvm_hpvm_track_mem(img, bytes);
  llvm_hpvm_track_mem(mos, bytes);
  llvm_hpvm_track_mem(mix, bytes);
  MosaicIn a = {img, bytes, mos, bytes, (size_t)rows, (size_t)cols};
  void *g = __hpvm__launch(0, MosaicRoot, &a);
  __hpvm__wait(g);
  MixIn b = {mos, bytes, mix, bytes, (size_t)rows, (size_t)cols, (size_t)grid};
  g = __hpvm__launch(0, MixRoot, &b);
  __hpvm__wait(g);
  llvm_hpvm_request_mem(mos, bytes);
  llvm_hpvm_request_mem(mix, bytes);
  /* The same passes on the host, in the order a single device runs them. */
  for (long row = 1; row + 1 < rows; ++row) {
    for (long col = 1; col + 1 < cols; ++col) {
      long i0 = row * cols + col, i1 = (rows + row) * cols + col, i2 = (2 * rows + row) * cols + col;
      if (row % 2 == 0 && col % 2 == 0) {
        want[i0] = img[i0 - 1] + img[i0 + 1];
        want[i1] = img[i1] * 2;
        want[i2] = img[i2 - cols] + img[i2 + cols];
      } else if (row % 2 == 0) {
        want[i0] = img[i0];
        want[i1] = img[i1 - cols] + img[i1 + cols] + img[i1 - 1] + img[i1 + 1];
        want[i2] = img[i2 - cols - 1] + img[i2 + cols + 1];
      } else {
        want[i0] = img[i0 + cols];
        want[i1] = img[i1];
        want[i2] = img[i2 - 1];
      }
    }
  }
  long bad = 0;
  for (long i = 0; i < room; ++i) {
    bad += mos[i] != want[i];
  }
  for (long row = 0; row < grid; ++row) {
    for (long col = 0; col < cols; ++col) {
      float x = want[row * cols + col], y = want[(rows + row) * cols + col], z = want[(2 * rows + row) * cols + col];
      wmix[row * cols + col] = x + y;
      wmix[(rows + row) * cols + col] = y + z;
      wmix[(2 * rows + row) * cols + col] = z + x;
    }
  }
  for (long i = 0; i < room; ++i) {
    bad += mix[i] != wmix[i];
  }
  printf("checksum %016llx\n", fnv1a(mos, bytes) ^ fnv1a(mix, bytes) * 3);
  __hpvm__cleanup();
  printf("planes %ldx%ld grid %ld: %s (%ld wrong)\n", cols, rows, grid, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
