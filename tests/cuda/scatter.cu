/*
 * scatter.cu -- a scatter through a permutation written as Thrust's transform kernel writes
 * it (`thrust::scatter`): each block takes a tile of `per_thread` x 256 elements, so the
 * place a thread reads its index from multiplies the block id by a run-time scalar
 * (`blockIdx.x * tile`); the tile's valid length is a `min` the conditional operator computes
 * (branches and a phi); a full tile and the partial last one take different branches, each
 * writing through the same indices, over a loop of `per_thread` steps. With a launch's values
 * built in the places become affine, and the runtime reads the indices each partition writes
 * through (an inspector). A second kernel gathers back through the same permutation. Checked
 * against the same scatter on the host.
 * Usage: scatter [N [PER_THREAD [REPEAT]]]   (defaults 100000 2 3)
 * Prints PASS or FAIL and `checksum <hex>` of the output's bits.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

// As `cuda::std::min` is written: a reference to the smaller.
__device__ const int &smaller(const int &a, const int &b) { return b < a ? b : a; }

__global__ void scatter_tiles(const long *map, const double *in, double *out, int n, int per_thread) {
  int tile = 256 * per_thread;
  int base = blockIdx.x * tile;
  int left = n - base;
  int valid = smaller(tile, left);
  if (valid == tile) {
    for (int j = 0; j < per_thread; ++j) {
      int idx = j * 256 + threadIdx.x;
      out[map[base + idx]] = in[base + idx] * 2.0 + 1.0;
    }
  } else {
    for (int j = 0; j < per_thread; ++j) {
      int idx = j * 256 + threadIdx.x;
      if (idx < valid) out[map[base + idx]] = in[base + idx] * 2.0 + 1.0;
    }
  }
}

// back[i] = out[map[i]]: a gather, whose reads only the launch can place.
__global__ void gather(const long *map, const double *out, double *back, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) back[i] = out[map[i]] - 1.0;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100000;
  int per_thread = argc > 2 ? atoi(argv[2]) : 2;
  int repeat = argc > 3 ? atoi(argv[3]) : 3;
  if (n < 1 || per_thread < 1 || per_thread > 64 || repeat < 1) {
    fprintf(stderr, "usage: scatter [N>0 [PER_THREAD 1..64 [REPEAT>0]]]\n");
    return 2;
  }
  long *map = (long *)malloc(n * sizeof(long));
  double *in = (double *)malloc(n * sizeof(double));
  double *out = (double *)malloc(n * sizeof(double));
  double *back = (double *)malloc(n * sizeof(double));
  // A permutation: the identity shuffled by a fixed generator (Fisher-Yates).
  for (int i = 0; i < n; i++) map[i] = i;
  uint32_t s = 12345;
  for (int i = n - 1; i > 0; i--) {
    s = s * 1664525u + 1013904223u;
    int j = (int)(s % (uint32_t)(i + 1));
    long t = map[i];
    map[i] = map[j];
    map[j] = t;
  }
  for (int i = 0; i < n; i++) in[i] = (double)((i * 37) % 1000) / 7.0;
  long *d_map;
  double *d_in, *d_out, *d_back;
  cudaMalloc(&d_map, n * sizeof(long));
  cudaMalloc(&d_in, n * sizeof(double));
  cudaMalloc(&d_out, n * sizeof(double));
  cudaMalloc(&d_back, n * sizeof(double));
  cudaMemcpy(d_map, map, n * sizeof(long), cudaMemcpyHostToDevice);
  cudaMemcpy(d_in, in, n * sizeof(double), cudaMemcpyHostToDevice);
  cudaMemset(d_out, 0, n * sizeof(double));
  int tile = 256 * per_thread;
  int blocks = (n + tile - 1) / tile;
  for (int r = 0; r < repeat; r++) scatter_tiles<<<blocks, 256>>>(d_map, d_in, d_out, n, per_thread);
  gather<<<(n + 255) / 256, 256>>>(d_map, d_out, d_back, n);
  cudaMemcpy(out, d_out, n * sizeof(double), cudaMemcpyDeviceToHost);
  cudaMemcpy(back, d_back, n * sizeof(double), cudaMemcpyDeviceToHost);
  int bad = 0;
  uint64_t sum = 0;
  for (int i = 0; i < n; i++) {
    double want = in[i] * 2.0 + 1.0;
    if (out[map[i]] != want || back[i] != want - 1.0) bad++;
    uint64_t b;
    memcpy(&b, &out[i], 8);
    sum = sum * 31 + b;
  }
  printf("%s\nchecksum %016llx\n", bad ? "FAIL" : "PASS", (unsigned long long)sum);
  cudaFree(d_map);
  cudaFree(d_in);
  cudaFree(d_out);
  cudaFree(d_back);
  free(map);
  free(in);
  free(out);
  free(back);
  return bad ? 1 : 0;
}
