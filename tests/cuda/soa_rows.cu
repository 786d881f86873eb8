/*
 * soa_rows.cu -- data laid out one row per quantity, each row as long as the grid has threads
 * (`a[q * blockDim.x * gridDim.x + tid]`), as chemistry and physics codes lay out their
 * per-point arrays (HeCBench s3d's `RF(q)`, `C(q)`). `blockDim.x * gridDim.x` multiplies two
 * launch values: the analysis names it as a parameter the runtime computes, so every thread's
 * writes are exact and the kernels split. Also a row offset times that stride (a scalar
 * factor), and a 2-D grid whose plane (`blockDim.x * gridDim.x * blockDim.y * gridDim.y`) is
 * the stride. Integers, checked against the host.
 * Usage: soa_rows [BLOCKS [OFFSET]]   (default 8 1)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

#define N_GP (blockDim.x * gridDim.x)
#define TID (threadIdx.x + blockIdx.x * blockDim.x)
#define ROW(p, q) (p[((q) - 1) * (N_GP) + TID])

const int ROWS = 5;

// Five rows from one input per point, each a function of the point alone.
__global__ void rates(const int *__restrict__ t, int *__restrict__ rf, int k) {
  const int v = t[TID] * k;
  ROW(rf, 1) = v + 3;
  ROW(rf, 2) = v * 7 - 1;
  ROW(rf, 3) = v ^ 0x55;
  ROW(rf, 4) = (v >> 2) + ROW(rf, 1);
  ROW(rf, 5) = v % 11;
}

// Rows of `rf` combined into rows `off + 1`, `off + 2` of `c` (rows before `off` untouched).
__global__ void combine(const int *__restrict__ rf, int *__restrict__ c, int off) {
  int s = ROW(rf, 1) * ROW(rf, 2) - ROW(rf, 5);
  c[(off + 0) * N_GP + TID] = s;
  c[(off + 1) * N_GP + TID] = ROW(rf, 3) + ROW(rf, 4);
}

// A 2-D grid: planes of `blockDim.x * gridDim.x * blockDim.y * gridDim.y` points.
__global__ void planes(const int *__restrict__ t, int *__restrict__ out) {
  unsigned x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  unsigned w = blockDim.x * gridDim.x, plane = w * blockDim.y * gridDim.y;
  unsigned at = y * w + x;
  int v = t[at % 64];
  out[at] = v + (int)y;
  out[plane + at] = v - (int)x;
  out[2 * plane + at] = (int)(x * y);
}

int main(int argc, char **argv) {
  int blocks = argc > 1 ? atoi(argv[1]) : 8, off = argc > 2 ? atoi(argv[2]) : 1;
  const int threads = 64, n = blocks * threads;
  int *t, *rf, *c, *p;
  CHECK(cudaMalloc(&t, n * sizeof(int)));
  CHECK(cudaMalloc(&rf, ROWS * n * sizeof(int)));
  CHECK(cudaMalloc(&c, (off + 2) * n * sizeof(int)));
  int *ht = (int *)malloc(n * sizeof(int));
  for (int i = 0; i < n; ++i) ht[i] = (i * 2654435761u) >> 20;
  CHECK(cudaMemcpy(t, ht, n * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(c, 0, (off + 2) * n * sizeof(int)));
  for (int k = 1; k <= 3; ++k) {
    rates<<<blocks, threads>>>(t, rf, k);
    combine<<<blocks, threads>>>(rf, c, off);
  }
  // 2-D: (blocks x 2) blocks of 8 x 4 threads.
  dim3 grid(blocks, 2), block(8, 4);
  const int w = blocks * 8, h = 2 * 4, plane = w * h;
  CHECK(cudaMalloc(&p, 3 * plane * sizeof(int)));
  planes<<<grid, block>>>(t, p);
  int *hc = (int *)malloc((off + 2) * n * sizeof(int)), *hp = (int *)malloc(3 * plane * sizeof(int));
  CHECK(cudaMemcpy(hc, c, (off + 2) * n * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hp, p, 3 * plane * sizeof(int), cudaMemcpyDeviceToHost));
  int bad = 0;
  uint64_t digest = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) {
    int v = ht[i] * 3, r1 = v + 3, r2 = v * 7 - 1, r3 = v ^ 0x55, r4 = (v >> 2) + r1, r5 = v % 11;
    for (int row = 0; row < off + 2; ++row) {
      int want = row < off ? 0 : row == off ? r1 * r2 - r5 : r3 + r4;
      int got = hc[row * n + i];
      bad += got != want;
      digest = (digest ^ (uint32_t)got) * 1099511628211ull;
    }
  }
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      int at = y * w + x, v = ht[at % 64];
      int want[3] = {v + y, v - x, x * y};
      for (int q = 0; q < 3; ++q) {
        bad += hp[q * plane + at] != want[q];
        digest = (digest ^ (uint32_t)hp[q * plane + at]) * 1099511628211ull;
      }
    }
  printf("%d differ\n", bad);
  printf("checksum %016llx\n", (unsigned long long)digest);
  printf("%s\n", bad ? "FAIL" : "PASS");
  CHECK(cudaFree(t));
  CHECK(cudaFree(rf));
  CHECK(cudaFree(c));
  CHECK(cudaFree(p));
  free(ht);
  free(hc);
  free(hp);
  return bad ? 1 : 0;
}
