/*
 * matmul.c -- naive square matrix product C = A x B (N x N floats, row-major), one dynamic
 * instance per element of C, each looping over k (the kernel of figure 16 of the Mekong
 * thesis, with row = y and col = x).
 *
 * Dataflow graph (two levels, like HPVM's GPU examples: blocks of 16 x 16 threads):
 *
 *   MatMulRoot          internal, 0-D, CPU_TARGET
 *     MatMulBlocks      internal, 2-D grid (N/16) x (N/16), DEVICE   (thread blocks)
 *       MatMulThread    leaf, 2-D grid 16 x 16, DEVICE               (threads of a block)
 *
 *   Global coordinates in the leaf:
 *     x = InstanceID_x(parent) * NumInstances_x(this) + InstanceID_x(this)   (column)
 *     y = InstanceID_y(parent) * NumInstances_y(this) + InstanceID_y(this)   (row)
 *
 *   Root parameters: (float *A, size_t bytesA, float *B, size_t bytesB,
 *                     float *C, size_t bytesC, long N)
 *   All seven inputs are bound unchanged from each level to the next; no edges, no outputs.
 *
 * Usage: matmul [N]        (default N = 128; N must be a positive multiple of 16)
 * Exit status: 0 PASS, 1 FAIL, 2 bad arguments or out of memory.
 */
#include <hpvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Node parameters are wired by port number (bindIn / edge), not read by name, so internal
 * nodes leave most of them unused; that is the HPVM convention, not a mistake. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

/* Threads per block in each dimension. */
#define BLOCK 16

/* Relative tolerance of the check: |C - Cref| / |Cref| <= REL_TOL for every element. The
 * inputs are positive, so no sum cancels; the device may fuse multiply-adds and so round
 * differently from the host reference, by far less than this. */
#define REL_TOL 1e-4

/* ---- Dataflow graph ------------------------------------------------------------------ */

void MatMulThread(float *A, size_t bytesA, float *B, size_t bytesB, float *C, size_t bytesC,
                  long N) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(2, A, B, 1, C);

  void *thisNode = __hpvm__getNode();
  void *parentNode = __hpvm__getParentNode(thisNode);
  long x = __hpvm__getNodeInstanceID_x(parentNode) * __hpvm__getNumNodeInstances_x(thisNode) +
           __hpvm__getNodeInstanceID_x(thisNode);
  long y = __hpvm__getNodeInstanceID_y(parentNode) * __hpvm__getNumNodeInstances_y(thisNode) +
           __hpvm__getNodeInstanceID_y(thisNode);
  long row = y;
  long col = x;

  if (row < N && col < N) {
    float acc = 0.0f;
    for (long k = 0; k < N; ++k) {
      acc += A[row * N + k] * B[k * N + col];
    }
    C[row * N + col] = acc;
  }
  __hpvm__return(0);
}

void MatMulBlocks(float *A, size_t bytesA, float *B, size_t bytesB, float *C, size_t bytesC,
                  long N) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(2, A, B, 1, C);

  void *thread = __hpvm__createNodeND(2, MatMulThread, (size_t)BLOCK, (size_t)BLOCK);

  __hpvm__bindIn(thread, 0, 0, 0); /* A */
  __hpvm__bindIn(thread, 1, 1, 0); /* bytesA */
  __hpvm__bindIn(thread, 2, 2, 0); /* B */
  __hpvm__bindIn(thread, 3, 3, 0); /* bytesB */
  __hpvm__bindIn(thread, 4, 4, 0); /* C */
  __hpvm__bindIn(thread, 5, 5, 0); /* bytesC */
  __hpvm__bindIn(thread, 6, 6, 0); /* N */
}

void MatMulRoot(float *A, size_t bytesA, float *B, size_t bytesB, float *C, size_t bytesC,
                long N) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(2, A, B, 1, C);

  void *blocks = __hpvm__createNodeND(2, MatMulBlocks, N / BLOCK, N / BLOCK);

  __hpvm__bindIn(blocks, 0, 0, 0); /* A */
  __hpvm__bindIn(blocks, 1, 1, 0); /* bytesA */
  __hpvm__bindIn(blocks, 2, 2, 0); /* B */
  __hpvm__bindIn(blocks, 3, 3, 0); /* bytesB */
  __hpvm__bindIn(blocks, 4, 4, 0); /* C */
  __hpvm__bindIn(blocks, 5, 5, 0); /* bytesC */
  __hpvm__bindIn(blocks, 6, 6, 0); /* N */
}

/* The root's arguments, packed, in parameter order. */
typedef struct __attribute__((__packed__)) {
  float *A;
  size_t bytesA;
  float *B;
  size_t bytesB;
  float *C;
  size_t bytesC;
  long N;
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

static void reference_matmul(const float *A, const float *B, float *C, long N) {
  for (long row = 0; row < N; ++row) {
    for (long col = 0; col < N; ++col) {
      float acc = 0.0f;
      for (long k = 0; k < N; ++k) {
        acc += A[row * N + k] * B[k * N + col];
      }
      C[row * N + col] = acc;
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
  long N = arg_long(argc, argv, 1, 128);
  if (N <= 0 || argc > 2) {
    fprintf(stderr, "usage: %s [N > 0, a multiple of %d]\n", argv[0], BLOCK);
    return 2;
  }
  if (N % BLOCK != 0) {
    fprintf(stderr, "matmul: N=%ld is not a multiple of the block size %d\n", N, BLOCK);
    return 2;
  }

  size_t bytes = (size_t)N * (size_t)N * sizeof(float);
  float *A = malloc(bytes);
  float *B = malloc(bytes);
  float *C = malloc(bytes);
  float *ref = malloc(bytes);
  if (!A || !B || !C || !ref) {
    fprintf(stderr, "matmul: out of memory\n");
    return 2;
  }

  /* Values in (0, 1]. */
  uint32_t seed = 2024u;
  for (long i = 0; i < N * N; ++i) {
    A[i] = (float)(lcg_next(&seed) % 1000u + 1u) / 1000.0f;
    B[i] = (float)(lcg_next(&seed) % 1000u + 1u) / 1000.0f;
    C[i] = -1.0f;
  }

  __hpvm__init();
  llvm_hpvm_track_mem(A, bytes);
  llvm_hpvm_track_mem(B, bytes);
  llvm_hpvm_track_mem(C, bytes);

  RootIn args;
  args.A = A;
  args.bytesA = bytes;
  args.B = B;
  args.bytesB = bytes;
  args.C = C;
  args.bytesC = bytes;
  args.N = N;

  void *dfg = __hpvm__launch(0, MatMulRoot, (void *)&args);
  __hpvm__wait(dfg);

  llvm_hpvm_request_mem(C, bytes);
  printf("checksum %016llx\n", fnv1a(FNV_SEED, C, bytes));
  if (getenv("HPVM_EXAMPLE_SKIP_CHECK") != NULL) {
    /* For benchmarks: at their sizes the sequential reference would take minutes. */
    __hpvm__cleanup();
    printf("%s: reference check skipped (HPVM_EXAMPLE_SKIP_CHECK)\n", argv[0]);
    return 0;
  }

  reference_matmul(A, B, ref, N);
  double max_abs = 0.0;
  double max_rel = 0.0;
  long bad = 0; /* elements out of tolerance, NaN included */
  for (long i = 0; i < N * N; ++i) {
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
  printf("matmul N=%ld: %s (max abs err %.3g, max rel err %.3g, tolerance %.1g, %ld bad)\n", N,
         ok ? "PASS" : "FAIL", max_abs, max_rel, REL_TOL, bad);

  free(A);
  free(B);
  free(C);
  free(ref);
  return ok ? 0 : 1;
}
