/*
 * initialized.cu -- device variables of struct types with initial values, as programs declare
 * their coefficients and tables: a `__constant__ float3` (NVIDIA's dxtc weighs its colour
 * error by one), a constant struct holding an array and a nested struct, a constant array of
 * structs, and a writable `__device__` struct the kernels update. Each is read on the device
 * and checked against the values the source gives.
 * Usage: initialized [N]   (default 1000)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

/* A float's bits (memcpy: reading a float through an integer pointer is undefined). */
static uint32_t bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

struct Range {
  int lo, hi;
};
struct Coefficients {
  float weights[3];
  Range range;
  double scale;
};
struct Pair {
  short a;
  char b;
  float c;
};

__constant__ float3 kMetric = {0.25f, 2.0f, -1.5f};
__constant__ Coefficients kCoef = {{1.0f, -2.0f, 0.5f}, {-3, 40}, 1.5};
__constant__ Pair kPairs[3] = {{1, 'x', 0.5f}, {-2, 'y', 1.25f}, {300, 'z', -4.0f}};
__device__ Range gCounter = {7, 1000};

__global__ void apply(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float x = in[i];
  float v = kMetric.x * x + kMetric.y * x * x + kMetric.z;
  v += kCoef.weights[i % 3] * (float)kCoef.scale;
  v = fminf(fmaxf(v, (float)kCoef.range.lo), (float)kCoef.range.hi);
  const Pair &p = kPairs[i % 3];
  out[i] = v + p.a + p.b * p.c;
  if (i == 0)
    atomicAdd(&gCounter.lo, gCounter.hi);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  if (n < 1) {
    fprintf(stderr, "usage: initialized [N >= 1]\n");
    return 2;
  }
  float *in, *out;
  cudaMallocManaged(&in, n * sizeof(float));
  cudaMallocManaged(&out, n * sizeof(float));
  for (int i = 0; i < n; ++i)
    in[i] = (float)(i % 17) * 0.5f - 3.0f;
  apply<<<(n + 127) / 128, 128>>>(in, out, n);
  Range counter;
  if (cudaMemcpyFromSymbol(&counter, gCounter, sizeof counter) != cudaSuccess) {
    fprintf(stderr, "cudaMemcpyFromSymbol failed\n");
    return 1;
  }
  bool ok = counter.lo == 1007 && counter.hi == 1000;
  const float metric[3] = {0.25f, 2.0f, -1.5f}, weights[3] = {1.0f, -2.0f, 0.5f};
  const short as[3] = {1, -2, 300};
  const char bs[3] = {'x', 'y', 'z'};
  const float cs[3] = {0.5f, 1.25f, -4.0f};
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) {
    float x = in[i];
    float v = metric[0] * x + metric[1] * x * x + metric[2];
    v += weights[i % 3] * 1.5f;
    v = fminf(fmaxf(v, -3.0f), 40.0f);
    float want = v + as[i % 3] + bs[i % 3] * cs[i % 3];
    ok &= out[i] == want;
    h = (h ^ bits(out[i])) * 1099511628211ull;
  }
  printf("checksum %016llx\n%s\n", (unsigned long long)h, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
