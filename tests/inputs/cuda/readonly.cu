// Which pointers a kernel only reads (declared `in`), whatever their qualifiers say.
#include <cuda_runtime.h>

__device__ void put(float *p, float v) { *p = v; }

__global__ void copy(const float *src, float *dst, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i];
}

__global__ void pick(float *a, float *b, int c) {
  float *p = c ? a : b;
  p[threadIdx.x] = 1.0f;
}

__global__ void count(const int *keys, int *bins) { atomicAdd(&bins[keys[threadIdx.x] & 15], 1); }

__global__ void casts_const_away(const float *a) { ((float *)a)[threadIdx.x] = 0.0f; }

__global__ void through_a_function(float *a, const float *b) { put(&a[threadIdx.x], b[threadIdx.x]); }

__global__ void stores_the_pointer(float *a, float **slot) { slot[threadIdx.x] = a; }

int main() {
  float *a, *b, **s;
  int *k, *h;
  cudaMalloc(&a, 1024);
  cudaMalloc(&b, 1024);
  cudaMalloc(&s, 1024);
  cudaMalloc(&k, 1024);
  cudaMalloc(&h, 1024);
  copy<<<1, 64>>>(a, b, 64);
  pick<<<1, 64>>>(a, b, 1);
  count<<<1, 64>>>(k, h);
  casts_const_away<<<1, 64>>>(a);
  through_a_function<<<1, 64>>>(a, b);
  stores_the_pointer<<<1, 64>>>(a, s);
  return cudaDeviceSynchronize() != cudaSuccess;
}
