/*
 * replay_args.cu -- launches a replay must tell apart (runtime/src/partitioned/replay.rs):
 * two buffers swapped after every launch (two records of one kernel), scalars the kernel
 * only reads that change every launch (an int and a float), and a grid that changes every
 * fifth step with the same arguments otherwise.
 * Usage: replay_args [N [STEPS]]   (defaults 4096 60)
 * Prints `checksum <hex>` of both buffers' bits.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

__global__ void relax(const float *from, float *to, int n, float w) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > 0 && i < n - 1) to[i] = (1.0f - w) * from[i] + 0.5f * w * (from[i - 1] + from[i + 1]);
}

__global__ void shift(float *a, int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += (float)((i + k) % 11) * 0.125f;
}

/* Scales the first `blocks * blockDim.x` elements: the grid alone says how many. */
__global__ void head(float *a, float s) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  a[i] *= s;
}

static uint64_t fnv(uint64_t sum, const float *v, int n) {
  for (int i = 0; i < n; ++i) {
    uint32_t bits;
    memcpy(&bits, &v[i], sizeof bits);
    sum = (sum ^ bits) * 1099511628211ull;
  }
  return sum;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4096;
  int steps = argc > 2 ? atoi(argv[2]) : 60;
  if (n < 1024 || steps < 1) {
    fprintf(stderr, "usage: replay_args [N >= 1024 [STEPS >= 1]]\n");
    return 2;
  }
  size_t bytes = (size_t)n * sizeof(float);
  float *h = (float *)malloc(bytes);
  for (int i = 0; i < n; ++i) h[i] = (float)(i % 17) * 0.5f;
  float *a, *b;
  cudaMalloc(&a, bytes);
  cudaMalloc(&b, bytes);
  cudaMemcpy(a, h, bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(b, h, bytes, cudaMemcpyHostToDevice);
  int block = 128, grid = (n + block - 1) / block;
  for (int s = 0; s < steps; ++s) {
    relax<<<grid, block>>>(a, b, n, 0.5f + 0.01f * (float)(s % 7));
    float *t = a;
    a = b;
    b = t;
    shift<<<grid, block>>>(a, n, s);
    head<<<1 + (s / 5) % 4, block>>>(b, 0.875f);
  }
  cudaMemcpy(h, a, bytes, cudaMemcpyDeviceToHost);
  uint64_t sum = fnv(1469598103934665603ull, h, n);
  cudaMemcpy(h, b, bytes, cudaMemcpyDeviceToHost);
  sum = fnv(sum, h, n);
  printf("checksum %016llx\n", (unsigned long long)sum);
  cudaFree(a);
  cudaFree(b);
  free(h);
  return 0;
}
