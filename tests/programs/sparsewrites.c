/*
 * sparsewrites.c -- the host changes a little of a large tracked input between launches, as
 * simulation drivers do (a boundary condition, a source term, a record read from a file):
 * - MODE `none`: the host writes nothing between launches; every input byte needs to reach a
 *   device once;
 * - MODE `store`: the host stores into a few scattered elements of `in` and one run of it,
 *   and also into `acc` after asking for it back (`llvm_hpvm_request_mem`);
 * - MODE `read`: the same run of `in` is filled by `read()` from a pipe: the kernel writes
 *   the program's memory on its behalf.
 * Every launch must see every change; the result is checked against a host reference.
 *
 * Usage: sparsewrites N STEPS MODE   (e.g. 300000 5 store). Prints a checksum; exit 0 PASS.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

void Step(float *in, size_t bytes_in, float *acc, size_t bytes_acc, long n, float s) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(2, in, acc, 1, acc);
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (i < n) {
    acc[i] = acc[i] * 0.5f + in[i] * s;
  }
  __hpvm__return(0);
}

void Root(float *in, size_t bytes_in, float *acc, size_t bytes_acc, long n, float s) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(2, in, acc, 1, acc);
  void *k = __hpvm__createNodeND(1, Step, n);
  __hpvm__bindIn(k, 0, 0, 0);
  __hpvm__bindIn(k, 1, 1, 0);
  __hpvm__bindIn(k, 2, 2, 0);
  __hpvm__bindIn(k, 3, 3, 0);
  __hpvm__bindIn(k, 4, 4, 0);
  __hpvm__bindIn(k, 5, 5, 0);
}

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *acc;
  size_t bytes_acc;
  long n;
  float s;
} In;

/* Elements RUN of `in` from `at` get value `v`: stored, or read from a pipe. */
enum { RUN = 2048 };

static void fill_run(float *dst, float v, int by_read) {
  float vals[RUN];
  for (int j = 0; j < RUN; ++j) {
    vals[j] = v + (float)(j % 5);
  }
  if (!by_read) {
    memcpy(dst, vals, sizeof vals);
    return;
  }
  int fds[2];
  if (pipe(fds) != 0 || write(fds[1], vals, sizeof vals) != (ssize_t)sizeof vals ||
      read(fds[0], dst, sizeof vals) != (ssize_t)sizeof vals) {
    perror("sparsewrites: pipe");
    exit(2);
  }
  close(fds[0]);
  close(fds[1]);
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 0;
  int steps = argc > 2 ? atoi(argv[2]) : 0;
  const char *mode = argc > 3 ? argv[3] : "";
  int store = !strcmp(mode, "store"), by_read = !strcmp(mode, "read");
  if (argc != 4 || n < 4 * RUN || steps < 1 || !(store || by_read || !strcmp(mode, "none"))) {
    fprintf(stderr, "usage: %s N STEPS none|store|read   (N >= %d)\n", argv[0], 4 * RUN);
    return 2;
  }
  size_t bytes = (size_t)n * sizeof(float);
  float *in = malloc(bytes), *acc = malloc(bytes), *rin = malloc(bytes), *racc = malloc(bytes);
  for (long i = 0; i < n; ++i) {
    in[i] = rin[i] = (float)((i * 37) % 101) * 0.25f;
    acc[i] = racc[i] = (float)(i % 7);
  }
  __hpvm__init();
  llvm_hpvm_track_mem(in, bytes);
  llvm_hpvm_track_mem(acc, bytes);
  for (int s = 0; s < steps; ++s) {
    float scale = 1.0f + 0.5f * (float)s;
    In args = {in, bytes, acc, bytes, n, scale};
    void *g = __hpvm__launch(0, Root, &args);
    __hpvm__wait(g);
    for (long i = 0; i < n; ++i) {
      racc[i] = racc[i] * 0.5f + rin[i] * scale;
    }
    if (store || by_read) {
      long at = ((long)s * 104729L) % (n - RUN);
      fill_run(&in[at], (float)s, by_read);
      fill_run(&rin[at], (float)s, 0);
    }
    if (store) {
      for (int j = 0; j < 3; ++j) {
        long i = ((long)s * 7919L + (long)j * 65537L) % n;
        in[i] = rin[i] = -1.0f - (float)j;
      }
      /* Asked back, then changed by the host: the next launch must see the change. */
      long a = ((long)s * 15485863L) % (n - 16);
      llvm_hpvm_request_mem(&acc[a], 16 * sizeof(float));
      for (int j = 0; j < 16; ++j) {
        acc[a + j] += 100.0f;
        racc[a + j] += 100.0f;
      }
    }
  }
  llvm_hpvm_request_mem(acc, bytes);
  long bad = 0;
  for (long i = 0; i < n; ++i) {
    bad += acc[i] != racc[i];
  }
  printf("checksum %016llx\n", fnv1a(acc, bytes));
  __hpvm__cleanup();
  printf("%s (%ld mismatches)\n", bad ? "FAIL" : "PASS", bad);
  free(in);
  free(acc);
  free(rin);
  free(racc);
  return bad ? 1 : 0;
}
