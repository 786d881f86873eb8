// A thread's small array indexed by loop counters, in loops whose bodies are long (the math
// library inlined): NVIDIA's compiler unrolls them and keeps the array in registers; so must we.
// HeCBench fft's `data[j] = cmplx_mul(data[j], exp_i(..))` is this shape.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

__device__ float twist(float a, float b) {
  return a * expf(-fabsf(b) * 0.5f) + logf(1.0f + fabsf(a)) * powf(fabsf(b) + 1.0f, 0.25f) +
         tanhf(a - b) * erff(0.25f * b);
}

__global__ void twiddle(const float* in, float* out, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const int order[8] = {0, 4, 2, 6, 1, 5, 3, 7};
  float v[8];
  for (int i = 0; i < 8; i++) v[i] = in[t * 8 + i];
  for (int j = 1; j < 8; j++) v[j] = twist(v[j], v[j - 1]);
  for (int i = 0; i < 8; i++) out[t * 8 + i] = v[order[i]];
}

// The same loop the user keeps rolled (`#pragma unroll 1` is theirs to say): the array stays in
// local memory, and the result is the same.
__global__ void rolled(const float* in, float* out, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const int order[8] = {0, 4, 2, 6, 1, 5, 3, 7};
  float v[8];
#pragma unroll 1
  for (int i = 0; i < 8; i++) v[i] = in[t * 8 + i];
#pragma unroll 1
  for (int j = 1; j < 8; j++) v[j] = twist(v[j], v[j - 1]);
#pragma unroll 1
  for (int i = 0; i < 8; i++) out[t * 8 + i] = v[order[i]];
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  size_t bytes = (size_t)n * 8 * sizeof(float);
  float* h = (float*)malloc(bytes);
  float* r = (float*)malloc(bytes);
  for (int i = 0; i < n * 8; i++) h[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  float *in, *a, *b;
  cudaMalloc(&in, bytes);
  cudaMalloc(&a, bytes);
  cudaMalloc(&b, bytes);
  cudaMemcpy(in, h, bytes, cudaMemcpyHostToDevice);
  int blocks = (n + 127) / 128;
  twiddle<<<blocks, 128>>>(in, a, n);
  rolled<<<blocks, 128>>>(in, b, n);
  // The two kernels compute the same, bit for bit.
  float* q = (float*)malloc(bytes);
  cudaMemcpy(r, a, bytes, cudaMemcpyDeviceToHost);
  cudaMemcpy(q, b, bytes, cudaMemcpyDeviceToHost);
  unsigned long long sum = 0;
  int bad = 0;
  for (int i = 0; i < n * 8; i++) {
    unsigned int u, v;
    memcpy(&u, &r[i], 4);
    memcpy(&v, &q[i], 4);
    bad += u != v;
    sum = sum * 31 + u;
  }
  printf("%s\nchecksum %016llx\n", bad ? "FAIL" : "PASS", sum);
  free(q);
  cudaFree(in);
  cudaFree(a);
  cudaFree(b);
  free(h);
  free(r);
  return 0;
}
