/*
 * chain.c -- nodes ordered by the values they return, the HPVM way: a blocks node whose leaf
 * returns its output buffer and size (`__hpvm__return(2, out, bytes_out)`, bound out of the
 * blocks node), fed along edges into the next node, whose own returned size reaches the host.
 *
 *   Root (CPU) -> Scale (GPU, ceil(n / block) blocks; bindOut of its leaf's two outputs)
 *                   -> ScaleThread (leaf, `block` threads): tmp[i] = 3 in[i] + 1
 *              -> Smooth (leaf, n instances): out[i] = tmp[i - 1] + tmp[i] + tmp[i + 1],
 *                 clamped; gets `tmp` and its size along all-to-all edges from Scale
 *              bindOut: Smooth's returned size is the root's output
 *
 * Usage: chain [N [BLOCK [ROUNDS]]]   (defaults 1000 64 2). Prints a checksum; exit 0 PASS.
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

void ScaleThread(float *in, size_t bytes_in, float *tmp, size_t bytes_tmp, long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, tmp);
  void *self = __hpvm__getNode();
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getParentNode(self)) * __hpvm__getNumNodeInstances_x(self) +
           __hpvm__getNodeInstanceID_x(self);
  if (i < n) {
    tmp[i] = 3.0f * in[i] + 1.0f;
  }
  __hpvm__return(2, tmp, bytes_tmp);
}

void Scale(float *in, size_t bytes_in, float *tmp, size_t bytes_tmp, long n, long block) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, tmp);
  void *t = __hpvm__createNodeND(1, ScaleThread, block);
  __hpvm__bindIn(t, 0, 0, 0);
  __hpvm__bindIn(t, 1, 1, 0);
  __hpvm__bindIn(t, 2, 2, 0);
  __hpvm__bindIn(t, 3, 3, 0);
  __hpvm__bindIn(t, 4, 4, 0);
  __hpvm__bindOut(t, 0, 0, 0);
  __hpvm__bindOut(t, 1, 1, 0);
}

void Smooth(float *tmp, size_t bytes_tmp, float *out, size_t bytes_out, long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, tmp, 1, out);
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (i < n) {
    long l = i > 0 ? i - 1 : 0, r = i + 1 < n ? i + 1 : n - 1;
    out[i] = tmp[l] + tmp[i] + tmp[r];
  }
  __hpvm__return(1, bytes_out);
}

void Root(float *in, size_t bytes_in, float *tmp, size_t bytes_tmp, float *out, size_t bytes_out, long n,
          long block) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(2, in, tmp, 2, tmp, out);
  void *scale = __hpvm__createNodeND(1, Scale, (n + block - 1) / block);
  void *smooth = __hpvm__createNodeND(1, Smooth, n);
  __hpvm__bindIn(scale, 0, 0, 0);
  __hpvm__bindIn(scale, 1, 1, 0);
  __hpvm__bindIn(scale, 2, 2, 0);
  __hpvm__bindIn(scale, 3, 3, 0);
  __hpvm__bindIn(scale, 6, 4, 0);
  __hpvm__bindIn(scale, 7, 5, 0);
  __hpvm__edge(scale, smooth, HPVM_EDGE_ALL_TO_ALL, 0, 0, 0);
  __hpvm__edge(scale, smooth, HPVM_EDGE_ALL_TO_ALL, 1, 1, 0);
  __hpvm__bindIn(smooth, 4, 2, 0);
  __hpvm__bindIn(smooth, 5, 3, 0);
  __hpvm__bindIn(smooth, 6, 4, 0);
  __hpvm__bindOut(smooth, 0, 0, 0);
}

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *tmp;
  size_t bytes_tmp;
  float *out;
  size_t bytes_out;
  long n, block;
  struct {
    size_t bytes;
  } ret;
} RootIn;

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000, block = argc > 2 ? atol(argv[2]) : 64;
  int rounds = argc > 3 ? atoi(argv[3]) : 2;
  if (n < 1 || block < 1 || rounds < 1 || argc > 4) {
    fprintf(stderr, "usage: %s [N [BLOCK [ROUNDS]]]\n", argv[0]);
    return 2;
  }
  size_t bytes = (size_t)n * sizeof(float);
  float *x = malloc(bytes), *y = malloc(bytes), *tmp = malloc(bytes);
  float *rx = malloc(bytes), *ry = malloc(bytes), *rtmp = malloc(bytes);
  for (long i = 0; i < n; ++i) {
    x[i] = rx[i] = (float)(i % 9) * 0.125f;
    y[i] = ry[i] = 0.0f;
  }
  __hpvm__init();
  llvm_hpvm_track_mem(x, bytes);
  llvm_hpvm_track_mem(y, bytes);
  llvm_hpvm_track_mem(tmp, bytes);
  long bad = 0;
  for (int round = 0; round < rounds; ++round) {
    /* Ping-pong: each round smooths the last one's result. */
    float *src = round % 2 ? y : x, *dst = round % 2 ? x : y;
    RootIn args = {src, bytes, tmp, bytes, dst, bytes, n, block, {0}};
    void *g = __hpvm__launch(0, Root, &args);
    __hpvm__wait(g);
    bad += args.ret.bytes != bytes;
    float *rs = round % 2 ? ry : rx, *rd = round % 2 ? rx : ry;
    for (long i = 0; i < n; ++i) {
      rtmp[i] = 3.0f * rs[i] + 1.0f;
    }
    for (long i = 0; i < n; ++i) {
      long l = i > 0 ? i - 1 : 0, r = i + 1 < n ? i + 1 : n - 1;
      rd[i] = rtmp[l] + rtmp[i] + rtmp[r];
    }
  }
  float *result = rounds % 2 ? y : x, *want = rounds % 2 ? ry : rx;
  llvm_hpvm_request_mem(result, bytes);
  for (long i = 0; i < n; ++i) {
    bad += result[i] != want[i];
  }
  printf("checksum %016llx\n", fnv1a(result, bytes));
  __hpvm__cleanup();
  printf("chain n=%ld block=%ld rounds=%d: %s (%ld wrong)\n", n, block, rounds, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
