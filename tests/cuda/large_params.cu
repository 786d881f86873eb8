// Kernel parameters passed by value that are larger than scalars can carry: a struct of 3000
// floats (12 KB, as CUDA 12.1 allows up to 32 KB) and a 2-D array, each launch with other
// values and no synchronization between launches (the launches are held and replayed on
// GPUs), then the same value again, and a kernel that writes its own copy of the value.
// Checked against the host.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include "../programs/check.h"

#define TERMS 3000

struct Poly {
  float c[TERMS];
  int used;
};

struct Grid {
  short w[20][30];
};

__global__ void evaluate(const Poly p, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc = 0.0f;
  for (int k = p.used - 1; k >= 0; k--) acc = acc * x[i] + p.c[k];
  y[i] = acc;
}

__global__ void weigh(Grid g, int *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] += g.w[i % 20][i % 30];
}

// Writes its own copy of the parameter: each thread's copy, not the one buffer.
__global__ void shift(Poly p, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  p.c[i % TERMS] = y[i];
  y[i] = p.c[i % TERMS] + p.c[(i + 1) % TERMS];
}

int main(int argc, char **argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 1000, rounds = 5;
  const int threads = 128, blocks = (n + threads - 1) / threads;
  float *x, *y;
  int *w;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, rounds * n * sizeof(float));
  cudaMalloc(&w, n * sizeof(int));
  cudaMemset(w, 0, n * sizeof(int));
  float *hx = new float[n];
  // Small integers throughout: every sum and product is exact, fused or not (GPUs fuse).
  for (int i = 0; i < n; i++) hx[i] = (float)(i % 3) - 1.0f;
  cudaMemcpy(x, hx, n * sizeof(float), cudaMemcpyHostToDevice);
  Poly *p = new Poly[rounds];
  Grid g;
  int *want_w = new int[n]();
  for (int r = 0; r < rounds; r++) {
    for (int k = 0; k < TERMS; k++) p[r].c[k] = (float)((k * 7 + r * 13) % 23) - 11.0f;
    p[r].used = 10 + 700 * r;
    // The last round repeats the first's value.
    if (r == rounds - 1) p[r] = p[0];
    evaluate<<<blocks, threads>>>(p[r], x, y + r * n, n);
    for (int a = 0; a < 20; a++)
      for (int b = 0; b < 30; b++) g.w[a][b] = (short)(a * 30 + b + r);
    weigh<<<blocks, threads>>>(g, w, n);
    for (int i = 0; i < n; i++) want_w[i] += g.w[i % 20][i % 30];
  }
  // After every round: y[i] (round 0) += p[0].c[i + 1], per thread, whatever the others wrote.
  shift<<<blocks, threads>>>(p[0], y, n);
  float *hy = new float[rounds * n];
  int *hw = new int[n];
  cudaMemcpy(hy, y, rounds * n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(hw, w, n * sizeof(int), cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int r = 0; r < rounds; r++)
    for (int i = 0; i < n; i++) {
      float acc = 0.0f;
      for (int k = p[r].used - 1; k >= 0; k--) acc = acc * hx[i] + p[r].c[k];
      if (r == 0) acc = acc + p[0].c[(i + 1) % TERMS];
      bad += hy[r * n + i] != acc;
    }
  for (int i = 0; i < n; i++) bad += hw[i] != want_w[i];
  printf("checksum %016llx %016llx\n", fnv1a(hy, rounds * n * sizeof(float)), fnv1a(hw, n * sizeof(int)));
  printf("%s: %d wrong\n", bad ? "FAIL" : "PASS", bad);
  return bad != 0;
}
