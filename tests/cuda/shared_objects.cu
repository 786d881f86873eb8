/*
 * shared_objects.cu -- `__shared__` variables of class type whose constructors do something,
 * which nvcc takes without running the constructor (it warns; programs initialize the object
 * themselves, as NVIDIA's samples do with `init(&barrier, n)`): a struct with member
 * initializers, an array of them, a `static` one, and one of a template parameter's type in
 * a kernel template. Each block sums its elements through them; checked against the host.
 * Usage: shared_objects [N]   (default 1000)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

struct Acc {
  float sum = 0.0f;
  int count;
  __device__ Acc() : count(0) {}
  __device__ void add(float v) {
    atomicAdd(&sum, v);
    atomicAdd(&count, 1);
  }
};

struct Weights {
  int w[4];
  __device__ Weights() {
    for (int i = 0; i < 4; ++i) w[i] = i + 1;
  }
};

template <typename T> struct Box {
  T value;
  __device__ Box() : value(T(7)) {}
};

__global__ void block_sums(const float *x, float *sums, int *counts, int n) {
  __shared__ Acc acc;
  __shared__ Weights weights[2];
  static __shared__ Acc
      odd;  // split over two lines, as formatters leave long declarations
  if (threadIdx.x == 0) {
    acc = Acc();
    odd = Acc();
    weights[0] = Weights();
    weights[1] = Weights();
    weights[1].w[3] = 10;
  }
  __syncthreads();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i] * (float)weights[threadIdx.x & 1].w[threadIdx.x & 3];
    acc.add(v);
    if (i & 1) odd.add(v);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    sums[2 * blockIdx.x] = acc.sum;
    sums[2 * blockIdx.x + 1] = odd.sum;
    counts[blockIdx.x] = acc.count + 1000 * odd.count;
  }
}

template <typename T> __global__ void boxed_max(const T *x, T *out, int n) {
  __shared__ Box<T> best;
  if (threadIdx.x == 0) best.value = T(0);
  __syncthreads();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicMax(&best.value, x[i]);
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = best.value;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  if (n < 1) {
    fprintf(stderr, "usage: shared_objects [N >= 1]\n");
    return 2;
  }
  const int B = 64;
  int blocks = (n + B - 1) / B;
  float *hx = (float *)malloc(n * sizeof(float));
  int *hi = (int *)malloc(n * sizeof(int));
  for (int i = 0; i < n; ++i) {
    hx[i] = (float)(i % 5);
    hi[i] = (i * 37) % 1001;
  }
  float *x, *sums;
  int *counts, *xi, *maxes;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&sums, 2 * blocks * sizeof(float)));
  CHECK(cudaMalloc(&counts, blocks * sizeof(int)));
  CHECK(cudaMalloc(&xi, n * sizeof(int)));
  CHECK(cudaMalloc(&maxes, blocks * sizeof(int)));
  CHECK(cudaMemcpy(x, hx, n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(xi, hi, n * sizeof(int), cudaMemcpyHostToDevice));
  block_sums<<<blocks, B>>>(x, sums, counts, n);
  boxed_max<int><<<blocks, B>>>(xi, maxes, n);
  CHECK(cudaGetLastError());
  float *gs = (float *)malloc(2 * blocks * sizeof(float));
  int *gc = (int *)malloc(blocks * sizeof(int)), *gm = (int *)malloc(blocks * sizeof(int));
  CHECK(cudaMemcpy(gs, sums, 2 * blocks * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(gc, counts, blocks * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(gm, maxes, blocks * sizeof(int), cudaMemcpyDeviceToHost));
  int bad = 0;
  uint64_t digest = 1469598103934665603ull;
  for (int b = 0; b < blocks; ++b) {
    float s = 0.0f, so = 0.0f;
    int c = 0, co = 0, m = 0;
    for (int t = 0; t < B && b * B + t < n; ++t) {
      int i = b * B + t;
      int w = (t & 1) && (t & 3) == 3 ? 10 : (t & 3) + 1;
      float v = hx[i] * (float)w;
      s += v;
      ++c;
      if (i & 1) {
        so += v;
        ++co;
      }
      m = hi[i] > m ? hi[i] : m;
    }
    bad += gs[2 * b] != s || gs[2 * b + 1] != so || gc[b] != c + 1000 * co || gm[b] != m;
    uint32_t words[4] = {0, 0, (uint32_t)gc[b], (uint32_t)gm[b]};
    memcpy(&words[0], &gs[2 * b], 4);
    memcpy(&words[1], &gs[2 * b + 1], 4);
    for (int k = 0; k < 4; ++k) digest = (digest ^ words[k]) * 1099511628211ull;
  }
  printf("%d of %d blocks differ\n", bad, blocks);
  printf("checksum %016llx\n", (unsigned long long)digest);
  printf("%s\n", bad ? "FAIL" : "PASS");
  CHECK(cudaFree(x));
  CHECK(cudaFree(sums));
  CHECK(cudaFree(counts));
  CHECK(cudaFree(xi));
  CHECK(cudaFree(maxes));
  free(hx);
  free(hi);
  free(gs);
  free(gc);
  free(gm);
  return bad ? 1 : 0;
}
