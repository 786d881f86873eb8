/*
 * rng.cu -- cuRAND's device API as Monte Carlo codes use it: curand_init per thread (its
 * skip-ahead reads `static __device__` tables of cuRAND's header that host code never names),
 * curand_uniform and curand_normal. Checked: a state initialised at offset k draws what a
 * state at offset 0 draws after k draws (the offset table, exactly), and the uniform draws
 * average 0.5 within 0.02.
 * Usage: rng [N]   (default 4096)
 * Prints `checksum <hex>` of the draws' bits, then PASS or FAIL.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <curand_kernel.h>

__global__ void draw(unsigned long long seed, float *uniform, float *normal, unsigned *same, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  curandState s;
  curand_init(seed, i, 0, &s);
  uniform[i] = curand_uniform(&s);
  normal[i] = curand_normal(&s);
  // Offset k = i % 7 + 1: the state made there draws what this one's k-th next draw is.
  int k = i % 7 + 1;
  curandState at, stepped;
  curand_init(seed, i, k, &at);
  curand_init(seed, i, 0, &stepped);
  for (int j = 0; j < k; ++j)
    curand(&stepped);
  same[i] = curand(&at) == curand(&stepped);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4096;
  if (n < 1) {
    fprintf(stderr, "usage: rng [N >= 1]\n");
    return 2;
  }
  float *u, *g;
  unsigned *same;
  cudaMalloc(&u, n * sizeof(float));
  cudaMalloc(&g, n * sizeof(float));
  cudaMalloc(&same, n * sizeof(unsigned));
  draw<<<(n + 127) / 128, 128>>>(1234ull, u, g, same, n);
  float *hu = (float *)malloc(n * sizeof(float)), *hg = (float *)malloc(n * sizeof(float));
  unsigned *hs = (unsigned *)malloc(n * sizeof(unsigned));
  cudaMemcpy(hu, u, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(hg, g, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(hs, same, n * sizeof(unsigned), cudaMemcpyDeviceToHost);
  bool ok = true;
  double sum = 0;
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) {
    ok &= hs[i] == 1 && hu[i] > 0.0f && hu[i] <= 1.0f;
    sum += hu[i];
    uint32_t a, b;
    memcpy(&a, &hu[i], 4);
    memcpy(&b, &hg[i], 4);
    h = (h ^ a) * 1099511628211ull;
    h = (h ^ b) * 1099511628211ull;
  }
  if (n >= 1000)
    ok &= sum / n > 0.48 && sum / n < 0.52;
  printf("checksum %016llx\n%s\n", (unsigned long long)h, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
