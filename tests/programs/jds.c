/*
 * jds.c -- a sparse matrix-vector product in the jagged-diagonal format, written the way
 * GPU code scatters its results: rows are sorted by length, thread `ix` (global index from a
 * run-time block size, `int` arithmetic) computes sorted row `ix`, and writes it where the
 * row came from, `y[perm[ix]]`. The written elements are known only from `perm`'s values,
 * which the runtime reads at each launch (an inspector) to split the launch safely.
 * A second node, `Spread`, writes `out[key[i]]` with repeated keys: its launches must run
 * unsplit, and still give the same result.
 *
 *   Root (CPU) -> Blocks (GPU, ceil(rows / block)) -> Spmv (leaf, `block` instances)
 *   Root (CPU) -> Spread (leaf, 1-D grid of n instances)
 *
 * Usage: jds [ROWS [BLOCK [ROUNDS]]]   (defaults 1000 64 3). Prints a checksum; exit 0 PASS.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

void Spmv(float *y, size_t bytes_y, float *data, size_t bytes_data, int *col, size_t bytes_col,
          int *perm, size_t bytes_perm, float *x, size_t bytes_x, int *diag, size_t bytes_diag,
          int *len, size_t bytes_len, int rows) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(6, data, col, perm, x, diag, len, 1, y);
  void *self = __hpvm__getNode();
  int lx = __hpvm__getNodeInstanceID_x(self);
  int gx = __hpvm__getNodeInstanceID_x(__hpvm__getParentNode(self));
  int ix = gx * (int)__hpvm__getNumNodeInstances_x(self) + lx;
  if (ix < rows) {
    float sum = 0.0f;
    for (int k = 0; k < len[ix]; ++k) {
      int j = diag[k] + ix;
      sum += data[j] * x[col[j]];
    }
    y[perm[ix]] = sum;
  }
  __hpvm__return(0);
}

void Blocks(float *y, size_t bytes_y, float *data, size_t bytes_data, int *col, size_t bytes_col,
            int *perm, size_t bytes_perm, float *x, size_t bytes_x, int *diag, size_t bytes_diag,
            int *len, size_t bytes_len, int rows, long block) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(6, data, col, perm, x, diag, len, 1, y);
  void *s = __hpvm__createNodeND(1, Spmv, block);
  __hpvm__bindIn(s, 0, 0, 0);
  __hpvm__bindIn(s, 1, 1, 0);
  __hpvm__bindIn(s, 2, 2, 0);
  __hpvm__bindIn(s, 3, 3, 0);
  __hpvm__bindIn(s, 4, 4, 0);
  __hpvm__bindIn(s, 5, 5, 0);
  __hpvm__bindIn(s, 6, 6, 0);
  __hpvm__bindIn(s, 7, 7, 0);
  __hpvm__bindIn(s, 8, 8, 0);
  __hpvm__bindIn(s, 9, 9, 0);
  __hpvm__bindIn(s, 10, 10, 0);
  __hpvm__bindIn(s, 11, 11, 0);
  __hpvm__bindIn(s, 12, 12, 0);
  __hpvm__bindIn(s, 13, 13, 0);
  __hpvm__bindIn(s, 14, 14, 0);
}

void Spread(float *out, size_t bytes_out, long *key, size_t bytes_key, long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, key, 1, out);
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (i < n) {
    out[key[i]] = (float)key[i] * 0.5f;
  }
  __hpvm__return(0);
}

void Root(float *y, size_t bytes_y, float *data, size_t bytes_data, int *col, size_t bytes_col,
          int *perm, size_t bytes_perm, float *x, size_t bytes_x, int *diag, size_t bytes_diag,
          int *len, size_t bytes_len, int rows, long block, long blocks, float *out,
          size_t bytes_out, long *key, size_t bytes_key, long n) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(9, data, col, perm, x, diag, len, key, y, out, 2, y, out);
  void *b = __hpvm__createNodeND(1, Blocks, blocks);
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
  __hpvm__bindIn(b, 10, 10, 0);
  __hpvm__bindIn(b, 11, 11, 0);
  __hpvm__bindIn(b, 12, 12, 0);
  __hpvm__bindIn(b, 13, 13, 0);
  __hpvm__bindIn(b, 14, 14, 0);
  __hpvm__bindIn(b, 15, 15, 0);
  void *s = __hpvm__createNodeND(1, Spread, n);
  __hpvm__bindIn(s, 17, 0, 0);
  __hpvm__bindIn(s, 18, 1, 0);
  __hpvm__bindIn(s, 19, 2, 0);
  __hpvm__bindIn(s, 20, 3, 0);
  __hpvm__bindIn(s, 21, 4, 0);
}

typedef struct __attribute__((__packed__)) {
  float *y;
  size_t bytes_y;
  float *data;
  size_t bytes_data;
  int *col;
  size_t bytes_col;
  int *perm;
  size_t bytes_perm;
  float *x;
  size_t bytes_x;
  int *diag;
  size_t bytes_diag;
  int *len;
  size_t bytes_len;
  int rows;
  long block, blocks;
  float *out;
  size_t bytes_out;
  long *key;
  size_t bytes_key;
  long n;
} In;

static unsigned next(unsigned *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

int main(int argc, char **argv) {
  int rows = argc > 1 ? atoi(argv[1]) : 1000;
  long block = argc > 2 ? atol(argv[2]) : 64;
  int rounds = argc > 3 ? atoi(argv[3]) : 3;
  if (rows < 1 || block < 1 || rounds < 1 || argc > 4) {
    fprintf(stderr, "usage: %s [ROWS [BLOCK [ROUNDS]]]\n", argv[0]);
    return 2;
  }
  /* Row lengths 0..8, rows sorted longest first; perm[ix] is the original row of sorted row ix
   * (a shuffled permutation). Diagonal k holds the k-th entry of every row longer than k. */
  unsigned s = 7u;
  int *len = malloc(sizeof(int) * rows), *perm = malloc(sizeof(int) * rows);
  for (int i = 0; i < rows; ++i) {
    len[i] = (int)(next(&s) % 9u);
    perm[i] = i;
  }
  for (int i = 0; i < rows; ++i) { /* insertion sort, longest first */
    for (int j = i; j > 0 && len[j] > len[j - 1]; --j) {
      int t = len[j];
      len[j] = len[j - 1];
      len[j - 1] = t;
    }
  }
  for (int i = rows - 1; i > 0; --i) {
    int j = (int)(next(&s) % (unsigned)(i + 1)), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  int width = len[0];
  int *diag = malloc(sizeof(int) * (size_t)(width + 1));
  int nnz = 0;
  for (int k = 0; k < width; ++k) {
    diag[k] = nnz;
    for (int r = 0; r < rows && len[r] > k; ++r) {
      ++nnz;
    }
  }
  diag[width] = nnz;
  size_t padded = (size_t)nnz + (size_t)rows;
  float *data = malloc(sizeof(float) * padded);
  int *col = malloc(sizeof(int) * padded);
  for (size_t j = 0; j < padded; ++j) {
    data[j] = (float)(next(&s) % 16u) / 8.0f;
    col[j] = (int)(next(&s) % (unsigned)rows);
  }
  float *x = malloc(sizeof(float) * rows), *y = malloc(sizeof(float) * rows);
  float *ry = malloc(sizeof(float) * rows);
  long n = 2L * rows;
  long *key = malloc(sizeof(long) * n);
  float *out = malloc(sizeof(float) * rows), *rout = malloc(sizeof(float) * rows);
  for (int i = 0; i < rows; ++i) {
    y[i] = ry[i] = -1.0f;
    out[i] = rout[i] = 3.0f;
  }
  for (long i = 0; i < n; ++i) {
    key[i] = (long)(next(&s) % (unsigned)rows);
    rout[key[i]] = (float)key[i] * 0.5f;
  }

  __hpvm__init();
  llvm_hpvm_track_mem(y, sizeof(float) * rows);
  llvm_hpvm_track_mem(data, sizeof(float) * padded);
  llvm_hpvm_track_mem(col, sizeof(int) * padded);
  llvm_hpvm_track_mem(perm, sizeof(int) * rows);
  llvm_hpvm_track_mem(x, sizeof(float) * rows);
  llvm_hpvm_track_mem(diag, sizeof(int) * (width + 1));
  llvm_hpvm_track_mem(len, sizeof(int) * rows);
  llvm_hpvm_track_mem(out, sizeof(float) * rows);
  llvm_hpvm_track_mem(key, sizeof(long) * n);
  long bad = 0;
  unsigned long long h = 0;
  for (int r = 0; r < rounds; ++r) {
    /* A new x each round; from the second round on, the rows move (a new permutation). */
    for (int i = 0; i < rows; ++i) {
      x[i] = (float)((i * 5 + r * 3) % 11) / 4.0f;
    }
    if (r > 0) {
      for (int i = 0; i + 1 < rows; i += 2) {
        int t = perm[i];
        perm[i] = perm[i + 1];
        perm[i + 1] = t;
      }
    }
    for (int ix = 0; ix < rows; ++ix) {
      float sum = 0.0f;
      for (int k = 0; k < len[ix]; ++k) {
        int j = diag[k] + ix;
        sum += data[j] * x[col[j]];
      }
      ry[perm[ix]] = sum;
    }
    In args = {y,   sizeof(float) * rows, data, sizeof(float) * padded, col,  sizeof(int) * padded,
               perm, sizeof(int) * rows,  x,    sizeof(float) * rows,   diag, sizeof(int) * (width + 1),
               len, sizeof(int) * rows,   rows, block,                  (rows + block - 1) / block,
               out, sizeof(float) * rows, key,  sizeof(long) * n,       n};
    void *g = __hpvm__launch(0, Root, &args);
    __hpvm__wait(g);
    llvm_hpvm_request_mem(y, sizeof(float) * rows);
    llvm_hpvm_request_mem(out, sizeof(float) * rows);
    for (int i = 0; i < rows; ++i) {
      bad += y[i] != ry[i] || out[i] != rout[i];
    }
    h ^= fnv1a(y, sizeof(float) * rows) + (unsigned long long)r;
  }
  printf("checksum %016llx\n", h ^ fnv1a(out, sizeof(float) * rows));
  __hpvm__cleanup();
  printf("jds rows=%d block=%ld rounds=%d: %s (%ld mismatches)\n", rows, block, rounds,
         bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
