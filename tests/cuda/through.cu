/*
 * through.cu -- `threadIdx` and `blockDim` taken whole (`dim3 t = threadIdx`, as cooperative
 * groups' `thread_rank()` hands them to a conversion) and a warp reduction taking its
 * operation as a device function passed by pointer, as `cg::reduce(tile, v, op)` takes it
 * (called through the pointer, and calling `expf`).
 * Checked against the host: integer results exactly, the float one within 1e-4.
 * Usage: through [ROWS]   (default 300)
 * Prints PASS or FAIL and `checksum <hex>` of the integer results.
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

struct Pair {
  int most;
  float weight;
};

__device__ Pair combine(Pair a, Pair b) {
  Pair r;
  r.most = a.most > b.most ? a.most : b.most;
  r.weight = a.weight + b.weight * expf(0.0f);
  return r;
}

template <typename Op> __device__ Pair warp_reduce(Pair p, Op op) {
  for (int o = 16; o > 0; o /= 2) {
    Pair q = {__shfl_down_sync(0xffffffffu, p.most, o), __shfl_down_sync(0xffffffffu, p.weight, o)};
    p = op(p, q);
  }
  return p;
}

// One warp per row of 32: each row's largest value and the sum of exp(v / 64) over it.
__global__ void rows(const int *v, int *most, float *weight, int n) {
  dim3 t = threadIdx, size = blockDim;
  unsigned rank = t.x + size.x * (t.y + size.y * t.z);
  int row = blockIdx.x * (blockDim.x / 32) + rank / 32;
  if (row >= n) return;
  int x = v[row * 32 + rank % 32];
  Pair p = {x, expf((float)x / 64.0f)};
  Pair r = warp_reduce(p, combine);
  if (rank % 32 == 0) {
    most[row] = r.most;
    weight[row] = r.weight;
  }
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 300;
  if (n < 1) {
    fprintf(stderr, "usage: through [ROWS >= 1]\n");
    return 2;
  }
  std::vector<int> h(n * 32), most(n);
  std::vector<float> weight(n);
  for (int i = 0; i < n * 32; ++i) h[i] = (int)((i * 2654435761u) >> 20) % 200 - 100;
  int *dv, *dmost;
  float *dweight;
  cudaMalloc(&dv, n * 32 * sizeof(int));
  cudaMalloc(&dmost, n * sizeof(int));
  cudaMalloc(&dweight, n * sizeof(float));
  cudaMemcpy(dv, h.data(), n * 32 * sizeof(int), cudaMemcpyHostToDevice);
  rows<<<(n + 3) / 4, 128>>>(dv, dmost, dweight, n);
  cudaMemcpy(most.data(), dmost, n * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(weight.data(), dweight, n * sizeof(float), cudaMemcpyDeviceToHost);
  int bad = 0;
  uint64_t sum = 1469598103934665603ull;
  for (int r = 0; r < n; ++r) {
    int m = -1000;
    double w = 0;
    for (int k = 0; k < 32; ++k) {
      m = h[r * 32 + k] > m ? h[r * 32 + k] : m;
      w += exp(h[r * 32 + k] / 64.0);
    }
    bad += most[r] != m || fabs(weight[r] - w) > 1e-4 * w;
    sum = (sum ^ (uint32_t)most[r]) * 1099511628211ull;
  }
  printf("%s\n", bad ? "FAIL" : "PASS");
  printf("checksum %016llx\n", (unsigned long long)sum);
  cudaFree(dv);
  cudaFree(dmost);
  cudaFree(dweight);
  return bad != 0;
}
