/*
 * exchange.c -- a benchmark of large exchanges between devices: an N x N float matrix
 * transposed ITER times between two buffers (out[y][x] = in[x][y]).
 *
 * Split by rows of `out`, device d computes rows [d N/D, (d+1) N/D) of `out` and reads
 * COLUMNS [d N/D, (d+1) N/D) of `in`, which the previous launch left split by rows: all but
 * 1/D of them are on the other devices. On two devices each launch moves an (N/2) x (N/2)
 * block each way, N*N bytes per direction, as 2-D strided peer copies. Nothing else moves
 * between launches, so the runtime's "copies between GPUs" time measures the exchange.
 *
 * Dataflow graph (two levels, blocks of 16 x 16):
 *   TransposeRoot      internal, 0-D, CPU_TARGET
 *     TransposeBlocks  internal, 2-D grid (N/16) x (N/16), DEVICE
 *       TransposeCell  leaf, 2-D grid 16 x 16, DEVICE; one element per instance
 *
 * Usage: exchange [N [ITER]]   (defaults 256 4; N a positive multiple of 16; ITER >= 1)
 * Prints a checksum of the result and PASS when it equals the input transposed ITER times.
 * Exit status: 0 PASS, 1 FAIL, 2 bad arguments or out of memory.
 */
#include <hpvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#pragma GCC diagnostic ignored "-Wunused-parameter"

#define BLOCK 16

void TransposeCell(float *in, size_t bytes_in, float *out, size_t bytes_out, long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  void *self = __hpvm__getNode();
  void *parent = __hpvm__getParentNode(self);
  long x = __hpvm__getNodeInstanceID_x(parent) * __hpvm__getNumNodeInstances_x(self) +
           __hpvm__getNodeInstanceID_x(self);
  long y = __hpvm__getNodeInstanceID_y(parent) * __hpvm__getNumNodeInstances_y(self) +
           __hpvm__getNodeInstanceID_y(self);
  if (x < n && y < n) {
    out[y * n + x] = in[x * n + y];
  }
  __hpvm__return(0);
}

void TransposeBlocks(float *in, size_t bytes_in, float *out, size_t bytes_out, long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  void *cell = __hpvm__createNodeND(2, TransposeCell, (size_t)BLOCK, (size_t)BLOCK);
  __hpvm__bindIn(cell, 0, 0, 0);
  __hpvm__bindIn(cell, 1, 1, 0);
  __hpvm__bindIn(cell, 2, 2, 0);
  __hpvm__bindIn(cell, 3, 3, 0);
  __hpvm__bindIn(cell, 4, 4, 0);
}

void TransposeRoot(float *in, size_t bytes_in, float *out, size_t bytes_out, long n) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, in, 1, out);
  void *blocks = __hpvm__createNodeND(2, TransposeBlocks, n / BLOCK, n / BLOCK);
  __hpvm__bindIn(blocks, 0, 0, 0);
  __hpvm__bindIn(blocks, 1, 1, 0);
  __hpvm__bindIn(blocks, 2, 2, 0);
  __hpvm__bindIn(blocks, 3, 3, 0);
  __hpvm__bindIn(blocks, 4, 4, 0);
}

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *out;
  size_t bytes_out;
  long n;
} RootIn;

static long arg_long(int argc, char **argv, int i, long dflt) {
  if (i >= argc) {
    return dflt;
  }
  char *end = NULL;
  long v = strtol(argv[i], &end, 10);
  return (argv[i][0] == '\0' || *end != '\0' || v <= 0) ? -1 : v;
}

int main(int argc, char **argv) {
  long n = arg_long(argc, argv, 1, 256);
  long iter = arg_long(argc, argv, 2, 4);
  if (n <= 0 || iter <= 0 || n % BLOCK != 0 || argc > 3) {
    fprintf(stderr, "usage: %s [N [ITER]]  (N a positive multiple of %d; ITER >= 1)\n", argv[0],
            BLOCK);
    return 2;
  }
  size_t bytes = (size_t)n * (size_t)n * sizeof(float);
  float *a = malloc(bytes);
  float *b = malloc(bytes);
  if (!a || !b) {
    fprintf(stderr, "exchange: out of memory\n");
    return 2;
  }
  for (long i = 0; i < n * n; ++i) {
    a[i] = (float)i;
    b[i] = -1.0f;
  }

  __hpvm__init();
  llvm_hpvm_track_mem(a, bytes);
  llvm_hpvm_track_mem(b, bytes);
  RootIn args[2] = {{a, bytes, b, bytes, n}, {b, bytes, a, bytes, n}};
  for (long it = 0; it < iter; ++it) {
    void *dfg = __hpvm__launch(0, TransposeRoot, (void *)&args[it % 2]);
    __hpvm__wait(dfg);
  }
  float *result = (iter % 2 == 1) ? b : a;
  llvm_hpvm_request_mem(result, bytes);

  uint64_t sum = 14695981039346656037ULL;
  long bad = 0;
  for (long y = 0; y < n; ++y) {
    for (long x = 0; x < n; ++x) {
      float v = result[y * n + x];
      float want = (float)(iter % 2 == 1 ? x * n + y : y * n + x);
      bad += v != want;
      uint32_t bits;
      __builtin_memcpy(&bits, &v, sizeof bits);
      sum = (sum ^ bits) * 1099511628211ULL;
    }
  }
  llvm_hpvm_untrack_mem(a);
  llvm_hpvm_untrack_mem(b);
  __hpvm__cleanup();
  printf("checksum %016llx\n", (unsigned long long)sum);
  printf("exchange N=%ld, %ld times: %s (%ld wrong)\n", n, iter, bad == 0 ? "PASS" : "FAIL", bad);
  free(a);
  free(b);
  return bad == 0 ? 0 : 1;
}
