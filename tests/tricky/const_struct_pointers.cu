// Device pointers kept in a __constant__ struct: the kernel reads its inputs and writes its
// output through pointers loaded from constant memory, not passed as arguments.
#include <cstdio>
#include <cuda_runtime.h>
#include <cstdlib>
#include "../programs/check.h"

struct Arrays {
  const float *in;
  float *out;
  int n;
};

__constant__ Arrays arrays;

// Written through an argument first, so that the devices, not the host, hold the input.
__global__ void init(float *in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) in[i] = (float)i;
}

__global__ void twice_plus_one() {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < arrays.n) arrays.out[i] = 2.0f * arrays.in[i] + 1.0f;
}

int main(int argc, char **argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 4096;
  float *h = new float[n], *r = new float[n];
  for (int i = 0; i < n; i++) h[i] = -1.0f;
  Arrays a;
  cudaMalloc(&a.in, n * sizeof(float));
  cudaMalloc(&a.out, n * sizeof(float));
  a.n = n;
  cudaMemcpy((void *)a.in, h, n * sizeof(float), cudaMemcpyHostToDevice);
  init<<<(n + 255) / 256, 256>>>((float *)a.in, n);
  cudaMemset(a.out, 0xff, n * sizeof(float));
  cudaMemcpyToSymbol(arrays, &a, sizeof a);
  twice_plus_one<<<(n + 255) / 256, 256>>>();
  cudaMemcpy(r, a.out, n * sizeof(float), cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < n; i++) bad += r[i] != 2.0f * i + 1.0f;
  printf("checksum %016llx\n", fnv1a(r, n * sizeof(float)));
  printf("%s: %d wrong\n", bad ? "FAIL" : "PASS", bad);
  return bad != 0;
}
