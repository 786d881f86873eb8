/*
 * vecadd.c -- element-wise vector addition, c[i] = a[i] + b[i], over n floats.
 *
 * Dataflow graph:
 *
 *   VecAddRoot      internal, 0-D, CPU_TARGET
 *     VecAdd        leaf, 1-D grid of n instances, DEVICE; instance i computes c[i]
 *
 *   Root parameters: (float *a, size_t bytes_a, float *b, size_t bytes_b,
 *                     float *c, size_t bytes_c, long n)
 *   Every root input is bound to the same port of VecAdd; there are no edges and no outputs.
 *
 * Usage: vecadd [n]        (default n = 65536)
 * Exit status: 0 PASS, 1 FAIL, 2 bad arguments or out of memory.
 */
#include <hpvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Node parameters are wired by port number (bindIn / edge), not read by name, so internal
 * nodes leave most of them unused; that is the HPVM convention, not a mistake. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

/* The inputs are small multiples of 1/8, so every sum is exact on every target: the check
 * is an exact comparison. */

/* ---- Dataflow graph ------------------------------------------------------------------ */

void VecAdd(float *a, size_t bytes_a, float *b, size_t bytes_b, float *c, size_t bytes_c,
            long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(2, a, b, 1, c);

  void *self = __hpvm__getNode();
  long i = __hpvm__getNodeInstanceID_x(self);
  if (i < n) {
    c[i] = a[i] + b[i];
  }
  __hpvm__return(0);
}

void VecAddRoot(float *a, size_t bytes_a, float *b, size_t bytes_b, float *c, size_t bytes_c,
                long n) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(2, a, b, 1, c);

  void *add = __hpvm__createNodeND(1, VecAdd, n);

  __hpvm__bindIn(add, 0, 0, 0); /* a */
  __hpvm__bindIn(add, 1, 1, 0); /* bytes_a */
  __hpvm__bindIn(add, 2, 2, 0); /* b */
  __hpvm__bindIn(add, 3, 3, 0); /* bytes_b */
  __hpvm__bindIn(add, 4, 4, 0); /* c */
  __hpvm__bindIn(add, 5, 5, 0); /* bytes_c */
  __hpvm__bindIn(add, 6, 6, 0); /* n */
}

/* The root's arguments, packed, in parameter order. */
typedef struct __attribute__((__packed__)) {
  float *a;
  size_t bytes_a;
  float *b;
  size_t bytes_b;
  float *c;
  size_t bytes_c;
  long n;
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

static void reference_vecadd(const float *a, const float *b, float *c, long n) {
  for (long i = 0; i < n; ++i) {
    c[i] = a[i] + b[i];
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
  long n = arg_long(argc, argv, 1, 1L << 16);
  if (n <= 0 || argc > 2) {
    fprintf(stderr, "usage: %s [n > 0]\n", argv[0]);
    return 2;
  }

  size_t bytes = (size_t)n * sizeof(float);
  float *a = malloc(bytes);
  float *b = malloc(bytes);
  float *c = malloc(bytes);
  float *ref = malloc(bytes);
  if (!a || !b || !c || !ref) {
    fprintf(stderr, "vecadd: out of memory\n");
    return 2;
  }

  uint32_t seed = 12345u;
  for (long i = 0; i < n; ++i) {
    a[i] = (float)(lcg_next(&seed) % 4096u) / 8.0f;
    b[i] = (float)(lcg_next(&seed) % 4096u) / 8.0f - 256.0f;
    c[i] = -1.0f;
  }

  __hpvm__init();
  llvm_hpvm_track_mem(a, bytes);
  llvm_hpvm_track_mem(b, bytes);
  llvm_hpvm_track_mem(c, bytes);

  RootIn args;
  args.a = a;
  args.bytes_a = bytes;
  args.b = b;
  args.bytes_b = bytes;
  args.c = c;
  args.bytes_c = bytes;
  args.n = n;

  void *dfg = __hpvm__launch(0, VecAddRoot, (void *)&args);
  __hpvm__wait(dfg);

  llvm_hpvm_request_mem(c, bytes);
  printf("checksum %016llx\n", fnv1a(FNV_SEED, c, bytes));

  reference_vecadd(a, b, ref, n);
  long mismatches = 0;
  long first_bad = -1;
  for (long i = 0; i < n; ++i) {
    if (c[i] != ref[i]) {
      if (first_bad < 0) {
        first_bad = i;
      }
      ++mismatches;
    }
  }

  llvm_hpvm_untrack_mem(a);
  llvm_hpvm_untrack_mem(b);
  llvm_hpvm_untrack_mem(c);
  __hpvm__cleanup();

  int ok = mismatches == 0;
  if (ok) {
    printf("vecadd n=%ld: PASS (exact)\n", n);
  } else {
    printf("vecadd n=%ld: FAIL (%ld mismatches; first at %ld: got %g, expected %g)\n", n,
           mismatches, first_bad, (double)c[first_bad], (double)ref[first_bad]);
  }

  free(a);
  free(b);
  free(c);
  free(ref);
  return ok ? 0 : 1;
}
