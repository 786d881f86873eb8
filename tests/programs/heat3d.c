/*
 * heat3d.c -- one explicit heat step on a 3-D grid, written as CUDA ports usually are: a 3-D
 * block whose size is chosen at run time, `int` coordinates and extents, and a linear index
 * `(z * ny + y) * nx + x` into arrays whose extents are known only at run time. The grid of
 * blocks is rounded up; boundary cells are copied unchanged.
 *
 *   Top (CPU) -> Blocks (GPU, ceil(n / b) per dimension) -> Cell (leaf, bx × by × bz)
 *
 * Usage: heat3d [NX NY NZ [BX BY BZ [STEPS]]]   (defaults 20 12 9 4 4 2 2). Prints a checksum.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

static int at(int x, int y, int z, int nx, int ny) { return (z * ny + y) * nx + x; }

void Cell(float *in, size_t bytes_in, float *out, size_t bytes_out, int nx, int ny, int nz) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  void *self = __hpvm__getNode();
  void *parent = __hpvm__getParentNode(self);
  int x = __hpvm__getNodeInstanceID_x(parent) * __hpvm__getNumNodeInstances_x(self) + __hpvm__getNodeInstanceID_x(self);
  int y = __hpvm__getNodeInstanceID_y(parent) * __hpvm__getNumNodeInstances_y(self) + __hpvm__getNodeInstanceID_y(self);
  int z = __hpvm__getNodeInstanceID_z(parent) * __hpvm__getNumNodeInstances_z(self) + __hpvm__getNodeInstanceID_z(self);
  if (x >= nx || y >= ny || z >= nz) {
    return;
  }
  int i = at(x, y, z, nx, ny);
  if (x < 1 || y < 1 || z < 1 || x > nx - 2 || y > ny - 2 || z > nz - 2) {
    out[i] = in[i];
  } else {
    out[i] = in[i] + 0.1f * (in[at(x - 1, y, z, nx, ny)] + in[at(x + 1, y, z, nx, ny)] + in[at(x, y - 1, z, nx, ny)] +
                             in[at(x, y + 1, z, nx, ny)] + in[at(x, y, z - 1, nx, ny)] + in[at(x, y, z + 1, nx, ny)] -
                             6.0f * in[i]);
  }
}

void Blocks(float *in, size_t bytes_in, float *out, size_t bytes_out, int nx, int ny, int nz, size_t bx, size_t by,
            size_t bz) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  void *c = __hpvm__createNodeND(3, Cell, bx, by, bz);
  __hpvm__bindIn(c, 0, 0, 0);
  __hpvm__bindIn(c, 1, 1, 0);
  __hpvm__bindIn(c, 2, 2, 0);
  __hpvm__bindIn(c, 3, 3, 0);
  __hpvm__bindIn(c, 4, 4, 0);
  __hpvm__bindIn(c, 5, 5, 0);
  __hpvm__bindIn(c, 6, 6, 0);
}

void Top(float *in, size_t bytes_in, float *out, size_t bytes_out, int nx, int ny, int nz, size_t bx, size_t by,
         size_t bz, size_t gx, size_t gy, size_t gz) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, in, 1, out);
  void *b = __hpvm__createNodeND(3, Blocks, gx, gy, gz);
  __hpvm__bindIn(b, 0, 0, 0);
  __hpvm__bindIn(b, 1, 1, 0);
  __hpvm__bindIn(b, 2, 2, 0);
  __hpvm__bindIn(b, 3, 3, 0);
  __hpvm__bindIn(b, 4, 4, 0);
  __hpvm__bindIn(b, 5, 5, 0);
  __hpvm__bindIn(b, 6, 6, 0);
  __hpvm__bindIn(b, 7, 7, 0);
  __hpvm__bindIn(b, 8, 8, 0);
  __hpvm__bindIn(b, 9, 9, 0);
}

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *out;
  size_t bytes_out;
  int nx, ny, nz;
  size_t bx, by, bz, gx, gy, gz;
} In;

int main(int argc, char **argv) {
  int v[7] = {20, 12, 9, 4, 4, 2, 2};
  if (argc != 1 && argc != 4 && argc != 7 && argc != 8) {
    fprintf(stderr, "usage: %s [NX NY NZ [BX BY BZ [STEPS]]]\n", argv[0]);
    return 2;
  }
  for (int a = 1; a < argc; ++a) {
    v[a - 1] = atoi(argv[a]);
    if (v[a - 1] < 1) {
      fprintf(stderr, "%s: sizes must be positive\n", argv[0]);
      return 2;
    }
  }
  int nx = v[0], ny = v[1], nz = v[2], steps = v[6];
  size_t cells = (size_t)nx * ny * nz, bytes = cells * sizeof(float);
  float *a = malloc(bytes), *b = malloc(bytes), *ra = malloc(bytes), *rb = malloc(bytes);
  for (size_t i = 0; i < cells; ++i) {
    a[i] = ra[i] = (float)((i * 13) % 17);
    b[i] = rb[i] = 0.0f;
  }
  __hpvm__init();
  llvm_hpvm_track_mem(a, bytes);
  llvm_hpvm_track_mem(b, bytes);
  for (int s = 0; s < steps; ++s) {
    In in = {s % 2 ? b : a, bytes, s % 2 ? a : b, bytes, nx, ny, nz,
             (size_t)v[3], (size_t)v[4], (size_t)v[5],
             (size_t)((nx + v[3] - 1) / v[3]), (size_t)((ny + v[4] - 1) / v[4]), (size_t)((nz + v[5] - 1) / v[5])};
    void *g = __hpvm__launch(0, Top, &in);
    __hpvm__wait(g);
  }
  float *res = steps % 2 ? b : a;
  llvm_hpvm_request_mem(res, bytes);
  for (int s = 0; s < steps; ++s) {
    float *src = s % 2 ? rb : ra, *dst = s % 2 ? ra : rb;
    for (int z = 0; z < nz; ++z)
      for (int y = 0; y < ny; ++y)
        for (int x = 0; x < nx; ++x) {
          int i = at(x, y, z, nx, ny);
          dst[i] = (x == 0 || y == 0 || z == 0 || x == nx - 1 || y == ny - 1 || z == nz - 1)
                       ? src[i]
                       : src[i] + 0.1f * (src[at(x - 1, y, z, nx, ny)] + src[at(x + 1, y, z, nx, ny)] +
                                          src[at(x, y - 1, z, nx, ny)] + src[at(x, y + 1, z, nx, ny)] +
                                          src[at(x, y, z - 1, nx, ny)] + src[at(x, y, z + 1, nx, ny)] - 6.0f * src[i]);
        }
  }
  float *ref = steps % 2 ? rb : ra;
  long bad = 0;
  for (size_t i = 0; i < cells; ++i) {
    float d = res[i] - ref[i];
    bad += d > 1e-4f || d < -1e-4f;
  }
  printf("checksum %016llx\n", fnv1a(res, bytes));
  __hpvm__cleanup();
  printf("heat3d %dx%dx%d: %s (%ld wrong)\n", nx, ny, nz, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
