/*
 * unsigned.c -- index arithmetic in 32-bit `unsigned`, the common CUDA style
 * (`unsigned row = blockIdx.y * blockDim.y + threadIdx.y; C[row * n + col]`), which C lets
 * wrap around: the analysis widens it to 64 bits under bounds the runtime checks.
 *
 *   DiffRoot (CPU) -> DiffBlocks (GPU, ceil(w / bx) x ceil(h / by)) -> Diff (leaf, bx x by
 *                     threads, run-time sizes): forward differences, `x + 1 < w` guards
 *   LapRoot (CPU)  -> LapBlocks (GPU, as DiffBlocks) -> Lap (leaf): a 5-point Laplacian of the
 *                     interior, written one column to the left: `unsigned` differences
 *                     (`y - 1`, `x - 1`, `w - 1`) that the guards keep from wrapping
 *   MatRoot (CPU)  -> MatBlocks (GPU, ceil(n / 8) x ceil(n / 8)) -> Mat (leaf, 8 x 8): C = A B
 *                     with an `unsigned` k loop
 *   SumRoot (CPU)  -> RowSum (leaf, H + SPARE instances): row sums through an `unsigned`
 *                     helper; the spare instances do nothing, but with enough of them the
 *                     largest index the analysis must allow for passes 2^32, and the runtime
 *                     runs the node unsplit
 *
 * Usage: unsigned [W [H [BX [BY [SPARE]]]]]   (defaults 45 29 8 4 0). Prints a checksum; exit 0
 * PASS.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

#define TILE 8

/* Binds a child's first N inputs to the parent's, port for port (HPVM's ports are constants). */
#define BIND2(n, k) __hpvm__bindIn(n, k, k, 0), __hpvm__bindIn(n, k + 1, k + 1, 0)
#define BIND6(n) BIND2(n, 0), BIND2(n, 2), BIND2(n, 4)
#define BIND7(n) BIND6(n), __hpvm__bindIn(n, 6, 6, 0)
#define BIND8(n) BIND6(n), BIND2(n, 6)

static unsigned at(unsigned row, unsigned col, unsigned width) { return row * width + col; }

void Diff(float *in, size_t bytes_in, float *out, size_t bytes_out, unsigned w, unsigned h) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  void *self = __hpvm__getNode();
  void *blocks = __hpvm__getParentNode(self);
  unsigned x = __hpvm__getNodeInstanceID_x(blocks) * __hpvm__getNumNodeInstances_x(self) +
               __hpvm__getNodeInstanceID_x(self);
  unsigned y = __hpvm__getNodeInstanceID_y(blocks) * __hpvm__getNumNodeInstances_y(self) +
               __hpvm__getNodeInstanceID_y(self);
  if (x + 1 < w && y + 1 < h) {
    unsigned i = y * w + x;
    out[i] = in[i + 1] - in[i] + in[i + w] - in[(y + 1) * w + x + 1];
  }
  __hpvm__return(0);
}

void DiffBlocks(float *in, size_t bytes_in, float *out, size_t bytes_out, unsigned w, unsigned h, unsigned bx,
                unsigned by) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  void *d = __hpvm__createNodeND(2, Diff, (long)bx, (long)by);
  BIND6(d);
}

void DiffRoot(float *in, size_t bytes_in, float *out, size_t bytes_out, unsigned w, unsigned h, unsigned bx,
              unsigned by) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, in, 1, out);
  void *b = __hpvm__createNodeND(2, DiffBlocks, (long)((w + bx - 1) / bx), (long)((h + by - 1) / by));
  BIND8(b);
}

void Lap(float *in, size_t bytes_in, float *lap, size_t bytes_lap, unsigned w, unsigned h) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, lap);
  void *self = __hpvm__getNode();
  void *blocks = __hpvm__getParentNode(self);
  unsigned x = __hpvm__getNodeInstanceID_x(blocks) * __hpvm__getNumNodeInstances_x(self) +
               __hpvm__getNodeInstanceID_x(self);
  unsigned y = __hpvm__getNodeInstanceID_y(blocks) * __hpvm__getNumNodeInstances_y(self) +
               __hpvm__getNodeInstanceID_y(self);
  if (x > 0 && y > 0 && x < w - 1 && y < h - 1) {
    lap[y * w + x - 1] = 4.0f * in[y * w + x] - in[(y - 1) * w + x] - in[(y + 1) * w + x] - in[y * w + x - 1] -
                         in[y * w + x + 1];
  }
  __hpvm__return(0);
}

void LapBlocks(float *in, size_t bytes_in, float *lap, size_t bytes_lap, unsigned w, unsigned h, unsigned bx,
               unsigned by) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, lap);
  void *d = __hpvm__createNodeND(2, Lap, (long)bx, (long)by);
  BIND6(d);
}

void LapRoot(float *in, size_t bytes_in, float *lap, size_t bytes_lap, unsigned w, unsigned h, unsigned bx,
             unsigned by) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, in, 1, lap);
  void *b = __hpvm__createNodeND(2, LapBlocks, (long)((w + bx - 1) / bx), (long)((h + by - 1) / by));
  BIND8(b);
}

void Mat(float *a, size_t bytes_a, float *b, size_t bytes_b, float *c, size_t bytes_c, unsigned n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(2, a, b, 1, c);
  void *self = __hpvm__getNode();
  void *blocks = __hpvm__getParentNode(self);
  unsigned col = __hpvm__getNodeInstanceID_x(blocks) * TILE + __hpvm__getNodeInstanceID_x(self);
  unsigned row = __hpvm__getNodeInstanceID_y(blocks) * TILE + __hpvm__getNodeInstanceID_y(self);
  if (row < n && col < n) {
    float s = 0.0f;
    for (unsigned k = 0; k < n; ++k) {
      s += a[row * n + k] * b[k * n + col];
    }
    c[row * n + col] = s;
  }
  __hpvm__return(0);
}

void MatBlocks(float *a, size_t bytes_a, float *b, size_t bytes_b, float *c, size_t bytes_c, unsigned n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(2, a, b, 1, c);
  void *m = __hpvm__createNodeND(2, Mat, (long)TILE, (long)TILE);
  BIND7(m);
}

void MatRoot(float *a, size_t bytes_a, float *b, size_t bytes_b, float *c, size_t bytes_c, unsigned n) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(2, a, b, 1, c);
  long tiles = (long)((n + TILE - 1) / TILE);
  void *m = __hpvm__createNodeND(2, MatBlocks, tiles, tiles);
  BIND7(m);
}

void RowSum(float *in, size_t bytes_in, float *sums, size_t bytes_sums, unsigned w, unsigned h) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, sums);
  unsigned row = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (row < h) {
    float s = 0.0f;
    for (unsigned col = 0; col < w; ++col) {
      s += in[at(row, col, w)];
    }
    sums[row] = s;
  }
  __hpvm__return(0);
}

void SumRoot(float *in, size_t bytes_in, float *sums, size_t bytes_sums, unsigned w, unsigned h, long rows) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, in, 1, sums);
  void *r = __hpvm__createNodeND(1, RowSum, rows);
  BIND6(r);
}

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *out;
  size_t bytes_out;
  unsigned w, h, bx, by;
} DiffIn;

typedef struct __attribute__((__packed__)) {
  float *a;
  size_t bytes_a;
  float *b;
  size_t bytes_b;
  float *c;
  size_t bytes_c;
  unsigned n;
} MatIn;

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *sums;
  size_t bytes_sums;
  unsigned w, h;
  long rows;
} SumIn;

int main(int argc, char **argv) {
  long w = argc > 1 ? atol(argv[1]) : 45, h = argc > 2 ? atol(argv[2]) : 29;
  long bx = argc > 3 ? atol(argv[3]) : 8, by = argc > 4 ? atol(argv[4]) : 4, spare = argc > 5 ? atol(argv[5]) : 0;
  if (w < 1 || h < 1 || bx < 1 || by < 1 || w > 65535 || h > 65535 || spare < 0 || argc > 6) {
    fprintf(stderr, "usage: %s [W [H [BX [BY [SPARE]]]]]   (sizes 1 to 65535)\n", argv[0]);
    return 2;
  }
  /* The product is square: n x n with n = h. */
  long n = h, cells = w * h;
  size_t bytes = (size_t)cells * sizeof(float), mbytes = (size_t)(n * n) * sizeof(float);
  float *img = malloc(bytes), *diff = calloc((size_t)cells, sizeof(float)), *lap = calloc((size_t)cells, sizeof(float));
  float *sums = malloc((size_t)h * sizeof(float));
  float *a = malloc(mbytes), *b = malloc(mbytes), *c = malloc(mbytes);
  /* Small integers: every sum and product below is exact, so any order of operations (and a
   * GPU's fused multiply-adds) gives the host's bits. */
  for (long i = 0; i < cells; ++i) {
    img[i] = (float)((i * 7) % 11);
  }
  for (long i = 0; i < n * n; ++i) {
    a[i] = (float)(i % 5);
    b[i] = (float)((i * 3) % 4);
  }
  __hpvm__init();
  llvm_hpvm_track_mem(img, bytes);
  llvm_hpvm_track_mem(diff, bytes);
  llvm_hpvm_track_mem(lap, bytes);
  llvm_hpvm_track_mem(sums, (size_t)h * sizeof(float));
  llvm_hpvm_track_mem(a, mbytes);
  llvm_hpvm_track_mem(b, mbytes);
  llvm_hpvm_track_mem(c, mbytes);
  DiffIn dargs = {img, bytes, diff, bytes, (unsigned)w, (unsigned)h, (unsigned)bx, (unsigned)by};
  void *g = __hpvm__launch(0, DiffRoot, &dargs);
  __hpvm__wait(g);
  DiffIn largs = {img, bytes, lap, bytes, (unsigned)w, (unsigned)h, (unsigned)bx, (unsigned)by};
  g = __hpvm__launch(0, LapRoot, &largs);
  __hpvm__wait(g);
  MatIn margs = {a, mbytes, b, mbytes, c, mbytes, (unsigned)n};
  g = __hpvm__launch(0, MatRoot, &margs);
  __hpvm__wait(g);
  SumIn sargs = {img, bytes, sums, (size_t)h * sizeof(float), (unsigned)w, (unsigned)h, h + spare};
  g = __hpvm__launch(0, SumRoot, &sargs);
  __hpvm__wait(g);
  llvm_hpvm_request_mem(diff, bytes);
  llvm_hpvm_request_mem(lap, bytes);
  llvm_hpvm_request_mem(c, mbytes);
  llvm_hpvm_request_mem(sums, (size_t)h * sizeof(float));
  long bad = 0;
  for (long y = 0; y < h; ++y) {
    float s = 0.0f;
    for (long x = 0; x < w; ++x) {
      long i = y * w + x;
      float want = x + 1 < w && y + 1 < h ? img[i + 1] - img[i] + img[i + w] - img[i + w + 1] : 0.0f;
      bad += diff[i] != want;
      /* Column x of an interior row lands at x - 1; the last two columns stay 0. */
      int inner = y > 0 && y + 1 < h && x + 2 < w;
      float lwant = inner ? 4.0f * img[i + 1] - img[i + 1 - w] - img[i + 1 + w] - img[i] - img[i + 2] : 0.0f;
      bad += lap[i] != lwant;
      s += img[i];
    }
    bad += sums[y] != s;
  }
  for (long i = 0; i < n; ++i) {
    for (long j = 0; j < n; ++j) {
      float s = 0.0f;
      for (long k = 0; k < n; ++k) {
        s += a[i * n + k] * b[k * n + j];
      }
      bad += c[i * n + j] != s;
    }
  }
  unsigned long long sum = fnv1a(diff, bytes) ^ fnv1a(lap, bytes) * 3 ^ fnv1a(c, mbytes) ^ fnv1a(sums, (size_t)h * sizeof(float));
  printf("checksum %016llx\n", sum);
  __hpvm__cleanup();
  printf("unsigned %ldx%ld blocks %ldx%ld: %s (%ld wrong)\n", w, h, bx, by, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
