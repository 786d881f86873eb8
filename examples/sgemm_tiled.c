/*
 * sgemm_tiled.c -- C = alpha * A * B + beta * C with A (M x K), B (K x N), C (M x N), floats,
 * row-major, tiled through shared memory like HPVM's Parboil sgemm: each block of TILE x TILE
 * threads computes one TILE x TILE tile of C; per step along k it loads a tile of A and a tile
 * of B cooperatively (one element each per thread), synchronises, accumulates, synchronises.
 *
 * Dataflow graph (three levels):
 *
 *   SgemmRoot            internal, 0-D, CPU_TARGET
 *     SgemmBlock         internal, 2-D grid (N/TILE) x (M/TILE), DEVICE   (x: columns of C)
 *       SgemmAlloc       leaf, 0-D, DEVICE: allocation node, two __hpvm__malloc tiles per
 *                        block instance (shared memory on a GPU); outputs
 *                        (tileA, bytesTileA, tileB, bytesTileB)
 *       SgemmTile        leaf, 2-D grid TILE x TILE, DEVICE: one element of C per instance
 *
 *   Edges (all HPVM_EDGE_ALL_TO_ALL), SgemmAlloc -> SgemmTile:
 *       output 0 (tileA) -> input 11, output 1 (bytesTileA) -> input 12,
 *       output 2 (tileB) -> input 13, output 3 (bytesTileB) -> input 14.
 *   Bindings: SgemmBlock inputs 0..10 -> SgemmTile inputs 0..10;
 *             SgemmBlock inputs 11, 12 (tile sizes) -> SgemmAlloc inputs 0, 1.
 *
 *   Root parameters: (float *A, size_t bytesA, float *B, size_t bytesB, float *C, size_t bytesC,
 *                     long m, long n, long k, float alpha, float beta,
 *                     size_t bytesTileA, size_t bytesTileB)
 *   The host passes bytesTileA = bytesTileB = TILE * TILE * sizeof(float).
 *
 * Usage: sgemm_tiled [M [N [K]]]   (defaults 128 128 128; positive multiples of 16)
 * Exit status: 0 PASS, 1 FAIL, 2 bad arguments or out of memory.
 */
#include <hpvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Node parameters are wired by port number (bindIn / edge), not read by name, so internal
 * nodes leave most of them unused; that is the HPVM convention, not a mistake. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

/* Edge of a tile, and threads per block in each dimension. */
#define TILE 16

/* Tolerance of the check: |C - Cref| / |Cref| <= REL_TOL for every element. All inputs and
 * alpha, beta are positive, so no sum cancels; the accumulation order over k is the same as
 * in the reference, but the device may fuse multiply-adds and round differently. */
#define REL_TOL 1e-4

#define ALPHA 1.5f
#define BETA 0.5f

/* ---- Dataflow graph ------------------------------------------------------------------ */

/* Allocation node: one pair of tiles per instance of the parent (SgemmBlock). */
void SgemmAlloc(size_t bytesTileA, size_t bytesTileB) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(0, 0);

  float *tileA = (float *)__hpvm__malloc((long)bytesTileA);
  float *tileB = (float *)__hpvm__malloc((long)bytesTileB);
  __hpvm__return(4, tileA, bytesTileA, tileB, bytesTileB);
}

/* The shared tiles are not global buffers: they are left out of the attributes, which name
 * the buffers the memory tracker moves. */
void SgemmTile(float *A, size_t bytesA, float *B, size_t bytesB, float *C, size_t bytesC, long m,
               long n, long k, float alpha, float beta, float *tileA, size_t bytesTileA,
               float *tileB, size_t bytesTileB) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(3, A, B, C, 1, C);

  void *thisNode = __hpvm__getNode();
  void *parentNode = __hpvm__getParentNode(thisNode);
  long tx = __hpvm__getNodeInstanceID_x(thisNode);
  long ty = __hpvm__getNodeInstanceID_y(thisNode);
  long bx = __hpvm__getNodeInstanceID_x(parentNode);
  long by = __hpvm__getNodeInstanceID_y(parentNode);
  long col = bx * TILE + tx;
  long row = by * TILE + ty;

  /* m, n, k are multiples of TILE (the host checks), so every instance is in range and
   * reaches every barrier. */
  float acc = 0.0f;
  long numTiles = k / TILE;
  for (long t = 0; t < numTiles; ++t) {
    long kt = t * TILE;
    tileA[ty * TILE + tx] = A[row * k + kt + tx];
    tileB[ty * TILE + tx] = B[(kt + ty) * n + col];
    __hpvm__barrier();
    for (long kk = 0; kk < TILE; ++kk) {
      acc += tileA[ty * TILE + kk] * tileB[kk * TILE + tx];
    }
    __hpvm__barrier();
  }

  if (row < m && col < n) {
    C[row * n + col] = alpha * acc + beta * C[row * n + col];
  }
  __hpvm__return(0);
}

void SgemmBlock(float *A, size_t bytesA, float *B, size_t bytesB, float *C, size_t bytesC,
                long m, long n, long k, float alpha, float beta, size_t bytesTileA,
                size_t bytesTileB) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(3, A, B, C, 1, C);

  void *alloc = __hpvm__createNodeND(0, SgemmAlloc);
  void *tile = __hpvm__createNodeND(2, SgemmTile, (size_t)TILE, (size_t)TILE);

  __hpvm__bindIn(alloc, 11, 0, 0); /* bytesTileA */
  __hpvm__bindIn(alloc, 12, 1, 0); /* bytesTileB */

  __hpvm__bindIn(tile, 0, 0, 0);   /* A */
  __hpvm__bindIn(tile, 1, 1, 0);   /* bytesA */
  __hpvm__bindIn(tile, 2, 2, 0);   /* B */
  __hpvm__bindIn(tile, 3, 3, 0);   /* bytesB */
  __hpvm__bindIn(tile, 4, 4, 0);   /* C */
  __hpvm__bindIn(tile, 5, 5, 0);   /* bytesC */
  __hpvm__bindIn(tile, 6, 6, 0);   /* m */
  __hpvm__bindIn(tile, 7, 7, 0);   /* n */
  __hpvm__bindIn(tile, 8, 8, 0);   /* k */
  __hpvm__bindIn(tile, 9, 9, 0);   /* alpha */
  __hpvm__bindIn(tile, 10, 10, 0); /* beta */

  __hpvm__edge(alloc, tile, HPVM_EDGE_ALL_TO_ALL, 0, 11, 0); /* tileA */
  __hpvm__edge(alloc, tile, HPVM_EDGE_ALL_TO_ALL, 1, 12, 0); /* bytesTileA */
  __hpvm__edge(alloc, tile, HPVM_EDGE_ALL_TO_ALL, 2, 13, 0); /* tileB */
  __hpvm__edge(alloc, tile, HPVM_EDGE_ALL_TO_ALL, 3, 14, 0); /* bytesTileB */
}

void SgemmRoot(float *A, size_t bytesA, float *B, size_t bytesB, float *C, size_t bytesC, long m,
               long n, long k, float alpha, float beta, size_t bytesTileA, size_t bytesTileB) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(3, A, B, C, 1, C);

  void *block = __hpvm__createNodeND(2, SgemmBlock, n / TILE, m / TILE);

  __hpvm__bindIn(block, 0, 0, 0);   /* A */
  __hpvm__bindIn(block, 1, 1, 0);   /* bytesA */
  __hpvm__bindIn(block, 2, 2, 0);   /* B */
  __hpvm__bindIn(block, 3, 3, 0);   /* bytesB */
  __hpvm__bindIn(block, 4, 4, 0);   /* C */
  __hpvm__bindIn(block, 5, 5, 0);   /* bytesC */
  __hpvm__bindIn(block, 6, 6, 0);   /* m */
  __hpvm__bindIn(block, 7, 7, 0);   /* n */
  __hpvm__bindIn(block, 8, 8, 0);   /* k */
  __hpvm__bindIn(block, 9, 9, 0);   /* alpha */
  __hpvm__bindIn(block, 10, 10, 0); /* beta */
  __hpvm__bindIn(block, 11, 11, 0); /* bytesTileA */
  __hpvm__bindIn(block, 12, 12, 0); /* bytesTileB */
}

/* The root's arguments, packed, in parameter order. */
typedef struct __attribute__((__packed__)) {
  float *A;
  size_t bytesA;
  float *B;
  size_t bytesB;
  float *C;
  size_t bytesC;
  long m;
  long n;
  long k;
  float alpha;
  float beta;
  size_t bytesTileA;
  size_t bytesTileB;
} RootIn;

/* ---- Host ---------------------------------------------------------------------------- */

/* Parses argv[i] as a positive long; returns dflt when absent and -1 when malformed. */
static long arg_long(int argc, char **argv, int i, long dflt) {
  if (argc <= i) {
    return dflt;
  }
  char *end = NULL;
  long v = strtol(argv[i], &end, 10);
  if (argv[i][0] == '\0' || *end != '\0' || v <= 0) {
    return -1;
  }
  return v;
}

static uint32_t lcg_next(uint32_t *state) {
  *state = *state * 1664525u + 1013904223u;
  return *state >> 8;
}

static double abs_d(double v) { return v < 0.0 ? -v : v; }

/* The same accumulation order over k as SgemmTile. */
static void reference_sgemm(const float *A, const float *B, float *C, long m, long n, long k,
                            float alpha, float beta) {
  for (long row = 0; row < m; ++row) {
    for (long col = 0; col < n; ++col) {
      float acc = 0.0f;
      for (long kk = 0; kk < k; ++kk) {
        acc += A[row * k + kk] * B[kk * n + col];
      }
      C[row * n + col] = alpha * acc + beta * C[row * n + col];
    }
  }
}

/* FNV-1a over the result's bytes: printed so runs can be compared bit for bit. */
static unsigned long long fnv1a(unsigned long long h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; ++i) {
    h = (h ^ p[i]) * 1099511628211ULL;
  }
  return h;
}

#define FNV_SEED 14695981039346656037ULL

int main(int argc, char **argv) {
  long m = arg_long(argc, argv, 1, 128);
  long n = arg_long(argc, argv, 2, 128);
  long k = arg_long(argc, argv, 3, 128);
  if (m <= 0 || n <= 0 || k <= 0 || argc > 4) {
    fprintf(stderr, "usage: %s [M [N [K]]]  (positive multiples of %d)\n", argv[0], TILE);
    return 2;
  }
  if (m % TILE != 0 || n % TILE != 0 || k % TILE != 0) {
    fprintf(stderr, "sgemm_tiled: M=%ld, N=%ld, K=%ld must be multiples of the tile size %d\n",
            m, n, k, TILE);
    return 2;
  }

  size_t bytesA = (size_t)m * (size_t)k * sizeof(float);
  size_t bytesB = (size_t)k * (size_t)n * sizeof(float);
  size_t bytesC = (size_t)m * (size_t)n * sizeof(float);
  float *A = malloc(bytesA);
  float *B = malloc(bytesB);
  float *C = malloc(bytesC);
  float *ref = malloc(bytesC);
  if (!A || !B || !C || !ref) {
    fprintf(stderr, "sgemm_tiled: out of memory\n");
    return 2;
  }

  /* Values in (0, 1]. */
  uint32_t seed = 4242u;
  for (long i = 0; i < m * k; ++i) {
    A[i] = (float)(lcg_next(&seed) % 1000u + 1u) / 1000.0f;
  }
  for (long i = 0; i < k * n; ++i) {
    B[i] = (float)(lcg_next(&seed) % 1000u + 1u) / 1000.0f;
  }
  for (long i = 0; i < m * n; ++i) {
    C[i] = (float)(lcg_next(&seed) % 1000u + 1u) / 1000.0f;
    ref[i] = C[i];
  }

  __hpvm__init();
  llvm_hpvm_track_mem(A, bytesA);
  llvm_hpvm_track_mem(B, bytesB);
  llvm_hpvm_track_mem(C, bytesC);

  RootIn args;
  args.A = A;
  args.bytesA = bytesA;
  args.B = B;
  args.bytesB = bytesB;
  args.C = C;
  args.bytesC = bytesC;
  args.m = m;
  args.n = n;
  args.k = k;
  args.alpha = ALPHA;
  args.beta = BETA;
  args.bytesTileA = TILE * TILE * sizeof(float);
  args.bytesTileB = TILE * TILE * sizeof(float);

  void *dfg = __hpvm__launch(0, SgemmRoot, (void *)&args);
  __hpvm__wait(dfg);

  llvm_hpvm_request_mem(C, bytesC);
  printf("checksum %016llx\n", fnv1a(FNV_SEED, C, bytesC));
  if (getenv("HPVM_EXAMPLE_SKIP_CHECK") != NULL) {
    /* For benchmarks: at their sizes the sequential reference would take minutes. */
    __hpvm__cleanup();
    printf("%s: reference check skipped (HPVM_EXAMPLE_SKIP_CHECK)\n", argv[0]);
    return 0;
  }

  reference_sgemm(A, B, ref, m, n, k, ALPHA, BETA);
  double max_abs = 0.0;
  double max_rel = 0.0;
  long bad = 0; /* elements out of tolerance, NaN included */
  for (long i = 0; i < m * n; ++i) {
    double err = abs_d((double)C[i] - (double)ref[i]);
    double rel = err / abs_d((double)ref[i]); /* ref > 0: the inputs are positive */
    if (!(rel <= REL_TOL)) {
      ++bad;
    }
    if (err > max_abs) {
      max_abs = err;
    }
    if (rel > max_rel) {
      max_rel = rel;
    }
  }

  llvm_hpvm_untrack_mem(A);
  llvm_hpvm_untrack_mem(B);
  llvm_hpvm_untrack_mem(C);
  __hpvm__cleanup();

  int ok = bad == 0;
  printf("sgemm_tiled M=%ld N=%ld K=%ld: %s (max abs err %.3g, max rel err %.3g, tolerance "
         "%.1g, %ld bad)\n",
         m, n, k, ok ? "PASS" : "FAIL", max_abs, max_rel, REL_TOL, bad);

  free(A);
  free(B);
  free(C);
  free(ref);
  return ok ? 0 : 1;
}
