/*
 * sequences.cu -- launch sequences that change between synchronizations: which kernels, in
 * which order, over which grids, and how many before the program next waits. Held launches
 * on a GPU run as CUDA graphs whose nodes are given other kernels, grids and parameters, with
 * nodes past a shorter sequence's end disabled (runtime/src/devices/held.rs); every kernel
 * here depends on the one before it, so a node run out of order, twice, not at all, or with
 * another launch's parameters changes the result. Checked against the same steps on the
 * host, in 32-bit unsigned arithmetic (exact everywhere).
 * Usage: sequences [N [ROUNDS]]   (defaults 4096 60)
 * Prints PASS or FAIL and `checksum <hex>` of the results.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

__global__ void scale(uint32_t *x, int n, uint32_t a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + (uint32_t)i;
}

__global__ void offset(uint32_t *x, int n, uint32_t b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += b ^ (uint32_t)i;
}

__global__ void mix(const uint32_t *x, uint32_t *y, int n, int s) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = (y[i] >> s) ^ (x[(i + 1) % n] << 3) ^ x[i];
}

/* One launch: the kernel, how many leading elements it covers, and its scalar. */
struct Step {
  int kernel;
  int m;
  uint32_t v;
};

static uint32_t next(uint64_t *state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(*state >> 33);
}

static void on_host(std::vector<uint32_t> &x, std::vector<uint32_t> &y, const Step &s) {
  switch (s.kernel) {
  case 0:
    for (int i = 0; i < s.m; ++i) x[i] = x[i] * s.v + (uint32_t)i;
    break;
  case 1:
    for (int i = 0; i < s.m; ++i) x[i] += s.v ^ (uint32_t)i;
    break;
  default:
    for (int i = 0; i < s.m; ++i) y[i] = (y[i] >> (s.v & 7)) ^ (x[(i + 1) % s.m] << 3) ^ x[i];
  }
}

static void launch(uint32_t *x, uint32_t *y, const Step &s) {
  switch (s.kernel) {
  case 0:
    scale<<<(s.m + 127) / 128, 128>>>(x, s.m, s.v);
    break;
  case 1:
    offset<<<(s.m + 255) / 256, 256>>>(x, s.m, s.v);
    break;
  default:
    mix<<<(s.m + 63) / 64, 64>>>(x, y, s.m, (int)(s.v & 7));
  }
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4096;
  int rounds = argc > 2 ? atoi(argv[2]) : 60;
  if (n < 64 || rounds < 1) {
    fprintf(stderr, "usage: sequences [N >= 64 [ROUNDS >= 1]]\n");
    return 2;
  }
  std::vector<uint32_t> x(n), y(n), gx(n), gy(n);
  for (int i = 0; i < n; ++i) {
    x[i] = (uint32_t)i * 2654435761u;
    y[i] = (uint32_t)i ^ 0x9e3779b9u;
  }
  uint32_t *dx, *dy;
  cudaMalloc(&dx, n * sizeof(uint32_t));
  cudaMalloc(&dy, n * sizeof(uint32_t));
  cudaMemcpy(dx, x.data(), n * sizeof(uint32_t), cudaMemcpyHostToDevice);
  cudaMemcpy(dy, y.data(), n * sizeof(uint32_t), cudaMemcpyHostToDevice);
  uint64_t state = 12345;
  // A fixed loop body (three kernels over the whole array) that every other round repeats,
  // and between them sequences drawn at random: 1 to 40 launches, kernels and extents
  // chosen per launch, so consecutive sequences share some nodes' kernels and not others.
  std::vector<Step> body = {{0, n, 3}, {1, n, 77}, {2, n, 1}};
  long launches = 0;
  for (int r = 0; r < rounds; ++r) {
    std::vector<Step> seq;
    if (r % 2 == 0) {
      for (int k = 0; k < 12; ++k)
        for (Step s : body) {
          s.v += (uint32_t)(r + k) * 2;
          seq.push_back(s);
        }
    } else {
      int len = 1 + (int)(next(&state) % 40);
      for (int k = 0; k < len; ++k) {
        Step s;
        s.kernel = (int)(next(&state) % 3);
        // At least half the array: every launch has blocks enough to cut on a few devices.
        s.m = s.kernel == 2 ? n : n / 2 + (int)(next(&state) % (n - n / 2));
        s.v = next(&state) | 1;
        seq.push_back(s);
      }
    }
    for (const Step &s : seq) {
      launch(dx, dy, s);
      on_host(x, y, s);
    }
    launches += (long)seq.size();
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      fprintf(stderr, "sequences: round %d: %s\n", r, cudaGetErrorString(e));
      return 1;
    }
  }
  cudaMemcpy(gx.data(), dx, n * sizeof(uint32_t), cudaMemcpyDeviceToHost);
  cudaMemcpy(gy.data(), dy, n * sizeof(uint32_t), cudaMemcpyDeviceToHost);
  int bad = 0;
  uint64_t sum = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) {
    bad += gx[i] != x[i] || gy[i] != y[i];
    sum = (sum ^ gx[i]) * 1099511628211ull;
    sum = (sum ^ gy[i]) * 1099511628211ull;
  }
  printf("%ld launches, %d elements differ from the host's\n", launches, bad);
  printf("%s\nchecksum %016llx\n", bad ? "FAIL" : "PASS", (unsigned long long)sum);
  cudaFree(dx);
  cudaFree(dy);
  return bad ? 1 : 0;
}
