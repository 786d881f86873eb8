/*
 * steps.cu -- kernels launched in a time loop with scalars that change every launch: one
 * whose step is only a value (`advance`: the accesses are the same every step), one whose
 * shift moves its reads (`shifted`: out[i] = in[i + shift]), each checked against the same
 * computation on the host. Rates are powers of two, so every product is exact and a GPU's
 * fused multiply-add rounds as the host's multiply and add do.
 * Usage: steps [N [STEPS]]   (defaults 10000 20)
 * Prints PASS or FAIL and `checksum <hex>` of the results.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

__global__ void advance(float *x, const float *rate, int n, int step) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * rate[i] + (float)(step % 7);
}

__global__ void shifted(const float *in, float *out, int n, int shift) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i + shift < n) out[i] = in[i + shift] * 0.5f;
}

static uint64_t fnv(const float *v, int n, uint64_t sum) {
  for (int i = 0; i < n; ++i) {
    uint32_t bits;
    memcpy(&bits, &v[i], sizeof bits);
    sum = (sum ^ bits) * 1099511628211ull;
  }
  return sum;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 10000;
  int steps = argc > 2 ? atoi(argv[2]) : 20;
  if (n < 1 || steps < 1 || steps >= n) {
    fprintf(stderr, "usage: steps [N >= 1 [1 <= STEPS < N]]\n");
    return 2;
  }
  size_t bytes = (size_t)n * sizeof(float);
  float *x = (float *)malloc(bytes), *rate = (float *)malloc(bytes), *out = (float *)malloc(bytes);
  float *want_x = (float *)malloc(bytes), *want_out = (float *)malloc(bytes);
  for (int i = 0; i < n; ++i) {
    x[i] = want_x[i] = (float)(i % 13) / 13.0f;
    rate[i] = i % 2 ? 0.5f : 0.25f;
    want_out[i] = -1.0f;
  }
  float *dx, *drate, *dout;
  if (cudaMalloc(&dx, bytes) || cudaMalloc(&drate, bytes) || cudaMalloc(&dout, bytes)) return 1;
  cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(drate, rate, bytes, cudaMemcpyHostToDevice);
  for (int i = 0; i < n; ++i) out[i] = -1.0f;
  cudaMemcpy(dout, out, bytes, cudaMemcpyHostToDevice);
  int block = 128, grid = (n + block - 1) / block;
  for (int s = 0; s < steps; ++s) {
    advance<<<grid, block>>>(dx, drate, n, s);
    shifted<<<grid, block>>>(dx, dout, n, s);
    for (int i = 0; i < n; ++i) want_x[i] = want_x[i] * rate[i] + (float)(s % 7);
    for (int i = 0; i + s < n; ++i) want_out[i] = want_x[i + s] * 0.5f;
  }
  if (cudaGetLastError() != cudaSuccess) return 1;
  cudaMemcpy(x, dx, bytes, cudaMemcpyDeviceToHost);
  cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < n; ++i) bad += x[i] != want_x[i] || out[i] != want_out[i];
  printf("%s\n", bad ? "FAIL" : "PASS");
  printf("checksum %016llx\n", (unsigned long long)fnv(out, n, fnv(x, n, 1469598103934665603ull)));
  cudaFree(dx);
  cudaFree(drate);
  cudaFree(dout);
  free(x), free(rate), free(out), free(want_x), free(want_out);
  return bad != 0;
}
