/*
 * fast_math.cu -- a kernel of the functions nvcc's -use_fast_math computes with its
 * intrinsics (powf, expf, logf, sinf, a division): built with and without the flag, the GPU
 * code differs (tests/cuda.rs reads the PTX), and simulated devices compute both exactly.
 * Usage: fast_math [N]   (default 1000)
 * Prints `sum <value>` and PASS (every element within 1e-5 of the host's) or FAIL.
 */
#include <cmath>
#include <cstdio>
#include <cstdlib>

__global__ void curve(float *out, const float *in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = powf(in[i], 1.7f) + expf(-in[i]) / (in[i] + 3.0f) + sinf(in[i]) * logf(1.0f + in[i]);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  if (n < 1) return 2;
  float *h = (float *)malloc(n * sizeof(float)), *got = (float *)malloc(n * sizeof(float));
  for (int i = 0; i < n; i++) h[i] = (float)(i % 500) * 0.01f;
  float *in, *out;
  cudaMalloc(&in, n * sizeof(float));
  cudaMalloc(&out, n * sizeof(float));
  cudaMemcpy(in, h, n * sizeof(float), cudaMemcpyHostToDevice);
  curve<<<(n + 255) / 256, 256>>>(out, in, n);
  cudaMemcpy(got, out, n * sizeof(float), cudaMemcpyDeviceToHost);
  double sum = 0;
  int bad = 0;
  for (int i = 0; i < n; i++) {
    float x = h[i], want = powf(x, 1.7f) + expf(-x) / (x + 3.0f) + sinf(x) * logf(1.0f + x);
    bad += fabsf(got[i] - want) > 1e-5f * fmaxf(1.0f, fabsf(want));
    sum += got[i];
  }
  printf("sum %.6f\n%s\n", sum, bad ? "FAIL" : "PASS");
  cudaFree(in);
  cudaFree(out);
  free(h);
  free(got);
  return bad != 0;
}
