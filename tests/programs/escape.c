/*
 * escape.c -- loops whose exit depends on the data, as in Mandelbrot sets, searches and
 * iterations to convergence: their trip counts are unknown, yet each instance writes its
 * own element after the loop, so the writes are exact and the nodes split.
 *
 *   CollatzRoot (CPU) -> CollatzBlocks (GPU, ceil(n / block)) -> Collatz (leaf, block
 *                        threads, run-time size): steps of the 3n + 1 map until 1
 *                        (`while (v != 1 && k < limit)`, an integer condition on a loaded start)
 *   GrowRoot (CPU)    -> Grow (leaf, w x h): doubles a pixel until it passes a limit, a
 *                        `float` condition (`while (x < limit && k < 30)`)
 *   FindRoot (CPU)    -> Find (leaf, h): the first column of each row at or above a
 *                        threshold, a search that `break`s (its loop has two exits); its
 *                        reads are bounded by the whole row, as if it never stopped early
 *
 * Usage: escape [W [H [BLOCK]]]   (defaults 37 23 16). Prints a checksum; exit 0 PASS.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

void Collatz(int *start, size_t bytes_start, int *steps, size_t bytes_steps, int n, int limit) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, start, 1, steps);
  void *self = __hpvm__getNode();
  int i = __hpvm__getNodeInstanceID_x(__hpvm__getParentNode(self)) * __hpvm__getNumNodeInstances_x(self) +
          __hpvm__getNodeInstanceID_x(self);
  if (i < n) {
    long v = start[i];
    int k = 0;
    while (v != 1 && k < limit) {
      v = v % 2 ? 3 * v + 1 : v / 2;
      ++k;
    }
    steps[i] = k;
  }
  __hpvm__return(0);
}

void CollatzBlocks(int *start, size_t bytes_start, int *steps, size_t bytes_steps, int n, int limit, long block) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, start, 1, steps);
  void *t = __hpvm__createNodeND(1, Collatz, block);
  __hpvm__bindIn(t, 0, 0, 0); __hpvm__bindIn(t, 1, 1, 0); __hpvm__bindIn(t, 2, 2, 0);
  __hpvm__bindIn(t, 3, 3, 0); __hpvm__bindIn(t, 4, 4, 0); __hpvm__bindIn(t, 5, 5, 0);
}

void CollatzRoot(int *start, size_t bytes_start, int *steps, size_t bytes_steps, int n, int limit, long block) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, start, 1, steps);
  void *b = __hpvm__createNodeND(1, CollatzBlocks, (n + block - 1) / block);
  __hpvm__bindIn(b, 0, 0, 0); __hpvm__bindIn(b, 1, 1, 0); __hpvm__bindIn(b, 2, 2, 0);
  __hpvm__bindIn(b, 3, 3, 0); __hpvm__bindIn(b, 4, 4, 0); __hpvm__bindIn(b, 5, 5, 0);
  __hpvm__bindIn(b, 6, 6, 0);
}

void Grow(float *in, size_t bytes_in, float *out, size_t bytes_out, int w, int h, float limit) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  void *self = __hpvm__getNode();
  int x = __hpvm__getNodeInstanceID_x(self), y = __hpvm__getNodeInstanceID_y(self);
  if (x < w && y < h) {
    float v = in[y * w + x];
    int k = 0;
    /* Small integers: every step is exact, fused or not. */
    while (v < limit && k < 30) {
      v = v * 2.0f + 1.0f;
      ++k;
    }
    out[y * w + x] = v + (float)k;
  }
  __hpvm__return(0);
}

void GrowRoot(float *in, size_t bytes_in, float *out, size_t bytes_out, int w, int h, float limit) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, in, 1, out);
  void *g = __hpvm__createNodeND(2, Grow, (long)w, (long)h);
  __hpvm__bindIn(g, 0, 0, 0); __hpvm__bindIn(g, 1, 1, 0); __hpvm__bindIn(g, 2, 2, 0);
  __hpvm__bindIn(g, 3, 3, 0); __hpvm__bindIn(g, 4, 4, 0); __hpvm__bindIn(g, 5, 5, 0);
  __hpvm__bindIn(g, 6, 6, 0);
}

void Find(float *m, size_t bytes_m, int *pos, size_t bytes_pos, int w, int h, float threshold) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, m, 1, pos);
  int y = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (y < h) {
    int found = -1;
    for (int x = 0; x < w; ++x) {
      if (m[y * w + x] >= threshold) {
        found = x;
        break;
      }
    }
    pos[y] = found;
  }
  __hpvm__return(0);
}

void FindRoot(float *m, size_t bytes_m, int *pos, size_t bytes_pos, int w, int h, float threshold) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, m, 1, pos);
  void *f = __hpvm__createNodeND(1, Find, (long)h);
  __hpvm__bindIn(f, 0, 0, 0); __hpvm__bindIn(f, 1, 1, 0); __hpvm__bindIn(f, 2, 2, 0);
  __hpvm__bindIn(f, 3, 3, 0); __hpvm__bindIn(f, 4, 4, 0); __hpvm__bindIn(f, 5, 5, 0);
  __hpvm__bindIn(f, 6, 6, 0);
}

typedef struct __attribute__((__packed__)) {
  int *start;
  size_t bytes_start;
  int *steps;
  size_t bytes_steps;
  int n, limit;
  long block;
} CollatzIn;

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *out;
  size_t bytes_out;
  int w, h;
  float limit;
} GrowIn;

typedef struct __attribute__((__packed__)) {
  float *m;
  size_t bytes_m;
  int *pos;
  size_t bytes_pos;
  int w, h;
  float threshold;
} FindIn;

int main(int argc, char **argv) {
  int w = argc > 1 ? atoi(argv[1]) : 37, h = argc > 2 ? atoi(argv[2]) : 23;
  long block = argc > 3 ? atol(argv[3]) : 16;
  if (w < 1 || h < 1 || block < 1 || argc > 4) {
    fprintf(stderr, "usage: %s [W [H [BLOCK]]]\n", argv[0]);
    return 2;
  }
  int n = w * h, limit = 200;
  size_t ibytes = (size_t)n * sizeof(int), fbytes = (size_t)n * sizeof(float), pbytes = (size_t)h * sizeof(int);
  int *start = malloc(ibytes), *steps = malloc(ibytes), *pos = malloc(pbytes);
  float *img = malloc(fbytes), *grown = malloc(fbytes);
  for (int i = 0; i < n; ++i) {
    start[i] = 1 + (i * 37) % 1000;
    img[i] = (float)((i * 7) % 29);
    steps[i] = -1;
    grown[i] = -1.0f;
  }
  for (int y = 0; y < h; ++y) {
    pos[y] = -2;
  }
  __hpvm__init();
  llvm_hpvm_track_mem(start, ibytes);
  llvm_hpvm_track_mem(steps, ibytes);
  llvm_hpvm_track_mem(img, fbytes);
  llvm_hpvm_track_mem(grown, fbytes);
  llvm_hpvm_track_mem(pos, pbytes);
  CollatzIn c = {start, ibytes, steps, ibytes, n, limit, block};
  void *g = __hpvm__launch(0, CollatzRoot, &c);
  __hpvm__wait(g);
  GrowIn gi = {img, fbytes, grown, fbytes, w, h, 100.0f};
  g = __hpvm__launch(0, GrowRoot, &gi);
  __hpvm__wait(g);
  FindIn f = {img, fbytes, pos, pbytes, w, h, 27.0f};
  g = __hpvm__launch(0, FindRoot, &f);
  __hpvm__wait(g);
  llvm_hpvm_request_mem(steps, ibytes);
  llvm_hpvm_request_mem(grown, fbytes);
  llvm_hpvm_request_mem(pos, pbytes);
  long bad = 0;
  for (int i = 0; i < n; ++i) {
    long v = start[i];
    int k = 0;
    while (v != 1 && k < limit) {
      v = v % 2 ? 3 * v + 1 : v / 2;
      ++k;
    }
    bad += steps[i] != k;
    float x = img[i];
    int j = 0;
    while (x < 100.0f && j < 30) {
      x = x * 2.0f + 1.0f;
      ++j;
    }
    bad += grown[i] != x + (float)j;
  }
  for (int y = 0; y < h; ++y) {
    int found = -1;
    for (int x = 0; x < w; ++x) {
      if (img[y * w + x] >= 27.0f) {
        found = x;
        break;
      }
    }
    bad += pos[y] != found;
  }
  printf("checksum %016llx\n", fnv1a(steps, ibytes) ^ fnv1a(grown, fbytes) * 3 ^ fnv1a(pos, pbytes) * 5);
  __hpvm__cleanup();
  printf("escape %dx%d block %ld: %s (%ld wrong)\n", w, h, block, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
