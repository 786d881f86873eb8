/*
 * lattice.c -- a lattice-Boltzmann-like sweep in the shape of Parboil's lbm as HPVM ships it:
 * one array holding every field of every cell, rows padded past the grid's width (32 floats
 * per row for 24 cells), a margin of planes before and after, constant extents, a linear index
 * `field * FIELD + MARGIN + x + y * PX + z * PX * NY`; the block size is a run-time value (one
 * row of cells, as lbm's `dim_X1`), the block ids are the row and the plane. Each cell gathers
 * every field from the neighbour it streams from (into the padding at the row's ends, into
 * the margin at the volume's), then relaxes or, where a read-only flag marks an obstacle,
 * bounces back. Two grids swap each step.
 *
 *   Top (CPU) -> Sweep (GPU, NY x NZ blocks) -> Cell (leaf, NX threads)
 *
 * Usage: lattice [STEPS]   (default 3). Prints a checksum.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

#define NX 24
#define NY 10
#define NZ 12
#define PX (NX + 8)
#define PLANE (PX * NY)
#define FIELD (PLANE * (NZ + 2))
#define MARGIN PLANE
#define FIELDS 7
#define FLAGS FIELDS
#define CELLS ((FIELDS + 1) * FIELD)
#define AT(x, y, z, e) ((e) * FIELD + MARGIN + (x) + (y) * PX + (z) * PLANE)

/* One cell's update: shared by the node and the host's reference. Fields stream along rest,
 * -x, +x, -y, +y, -z, +z: each is gathered from the neighbour it comes from. */
static void update(const float *src, float *dst, int x, int y, int z) {
  float f[FIELDS];
  f[0] = src[AT(x, y, z, 0)];
  f[1] = src[AT(x + 1, y, z, 1)];
  f[2] = src[AT(x - 1, y, z, 2)];
  f[3] = src[AT(x, y + 1, z, 3)];
  f[4] = src[AT(x, y - 1, z, 4)];
  f[5] = src[AT(x, y, z + 1, 5)];
  f[6] = src[AT(x, y, z - 1, 6)];
  unsigned flags;
  memcpy(&flags, &src[AT(x, y, z, FLAGS)], sizeof flags);
  if (flags & 1u) {
    /* Bounce back: each field leaves along the way it came. */
    dst[AT(x, y, z, 0)] = f[0];
    dst[AT(x, y, z, 1)] = f[2];
    dst[AT(x, y, z, 2)] = f[1];
    dst[AT(x, y, z, 3)] = f[4];
    dst[AT(x, y, z, 4)] = f[3];
    dst[AT(x, y, z, 5)] = f[6];
    dst[AT(x, y, z, 6)] = f[5];
    return;
  }
  float rho = f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6];
  float eq = rho * (1.0f / FIELDS);
  dst[AT(x, y, z, 0)] = f[0] + 0.5f * (eq - f[0]);
  dst[AT(x, y, z, 1)] = f[1] + 0.5f * (eq - f[1]);
  dst[AT(x, y, z, 2)] = f[2] + 0.5f * (eq - f[2]);
  dst[AT(x, y, z, 3)] = f[3] + 0.5f * (eq - f[3]);
  dst[AT(x, y, z, 4)] = f[4] + 0.5f * (eq - f[4]);
  dst[AT(x, y, z, 5)] = f[5] + 0.5f * (eq - f[5]);
  dst[AT(x, y, z, 6)] = f[6] + 0.5f * (eq - f[6]);
}

void Cell(float *src, size_t bytes_src, float *dst, size_t bytes_dst) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(2, src, dst, 1, dst);
  void *self = __hpvm__getNode();
  void *parent = __hpvm__getParentNode(self);
  int x = __hpvm__getNodeInstanceID_x(self);
  int y = __hpvm__getNodeInstanceID_x(parent);
  int z = __hpvm__getNodeInstanceID_y(parent);
  update(src, dst, x, y, z);
}

void Sweep(float *src, size_t bytes_src, float *dst, size_t bytes_dst, size_t row) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(2, src, dst, 1, dst);
  void *c = __hpvm__createNodeND(1, Cell, row);
  __hpvm__bindIn(c, 0, 0, 0);
  __hpvm__bindIn(c, 1, 1, 0);
  __hpvm__bindIn(c, 2, 2, 0);
  __hpvm__bindIn(c, 3, 3, 0);
}

void Top(float *src, size_t bytes_src, float *dst, size_t bytes_dst, size_t row, size_t rows, size_t planes) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(2, src, dst, 1, dst);
  void *s = __hpvm__createNodeND(2, Sweep, rows, planes);
  __hpvm__bindIn(s, 0, 0, 0);
  __hpvm__bindIn(s, 1, 1, 0);
  __hpvm__bindIn(s, 2, 2, 0);
  __hpvm__bindIn(s, 3, 3, 0);
  __hpvm__bindIn(s, 4, 4, 0);
}

typedef struct __attribute__((__packed__)) {
  float *src;
  size_t bytes_src;
  float *dst;
  size_t bytes_dst;
  size_t row, rows, planes;
} In;

/* Fields from a cheap hash; every cell on the volume's faces and a few inside are obstacles. */
static void fill(float *g) {
  memset(g, 0, CELLS * sizeof(float));
  for (int z = 0; z < NZ; ++z)
    for (int y = 0; y < NY; ++y)
      for (int x = 0; x < NX; ++x) {
        for (int e = 0; e < FIELDS; ++e) {
          g[AT(x, y, z, e)] = (float)(((x * 7 + y * 13 + z * 29 + e * 3) % 17) + 1) / 16.0f;
        }
        unsigned flags = (x == 0 || y == 0 || z == 0 || x == NX - 1 || y == NY - 1 || z == NZ - 1 ||
                          (x * 5 + y * 3 + z) % 11 == 0);
        memcpy(&g[AT(x, y, z, FLAGS)], &flags, sizeof flags);
      }
}

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 3;
  if (argc > 2 || steps < 0) {
    fprintf(stderr, "usage: %s [STEPS]\n", argv[0]);
    return 2;
  }
  size_t bytes = CELLS * sizeof(float);
  float *a = malloc(bytes), *b = malloc(bytes), *ra = malloc(bytes), *rb = malloc(bytes);
  fill(a);
  fill(b);
  memcpy(ra, a, bytes);
  memcpy(rb, b, bytes);
  __hpvm__init();
  llvm_hpvm_track_mem(a, bytes);
  llvm_hpvm_track_mem(b, bytes);
  for (int s = 0; s < steps; ++s) {
    In in = {s % 2 ? b : a, bytes, s % 2 ? a : b, bytes, NX, NY, NZ};
    void *g = __hpvm__launch(0, Top, &in);
    __hpvm__wait(g);
  }
  float *res = steps % 2 ? b : a;
  llvm_hpvm_request_mem(res, bytes);
  for (int s = 0; s < steps; ++s) {
    float *src = s % 2 ? rb : ra, *dst = s % 2 ? ra : rb;
    for (int z = 0; z < NZ; ++z)
      for (int y = 0; y < NY; ++y)
        for (int x = 0; x < NX; ++x) {
          update(src, dst, x, y, z);
        }
  }
  float *ref = steps % 2 ? rb : ra;
  long bad = 0;
  for (size_t i = 0; i < CELLS; ++i) {
    float d = res[i] - ref[i];
    bad += d > 1e-5f || d < -1e-5f;
  }
  printf("checksum %016llx\n", fnv1a(res, bytes));
  __hpvm__cleanup();
  printf("lattice %dx%dx%d, %d steps: %s (%ld wrong)\n", NX, NY, NZ, steps, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
