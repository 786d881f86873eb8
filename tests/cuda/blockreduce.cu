/*
 * blockreduce.cu -- per-block sums through CUB's BlockReduce (its warp shuffles are inline
 * PTX), as kernels that reduce rows or tiles write them: `row_sums` gives each block one row
 * of a matrix, `tile_max` a 2-D tile and its maximum. Integers, so every order of summing gives
 * the same result; checked against the host.
 * Usage: blockreduce [ROWS [COLS]]   (defaults 100 300)
 * Prints PASS or FAIL and `checksum <hex>` of the results.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cub/block/block_reduce.cuh>
#include <cuda_runtime.h>

#define THREADS 128

// The maximum as a functor of its own: CUDA 13's CCCL no longer has `cub::Max`.
struct Larger {
  __device__ int operator()(int a, int b) const { return a > b ? a : b; }
};

__global__ void row_sums(const int *m, long long *sums, int cols) {
  typedef cub::BlockReduce<long long, THREADS> Reduce;
  __shared__ typename Reduce::TempStorage scratch;
  long long mine = 0;
  for (int c = threadIdx.x; c < cols; c += THREADS) mine += m[(size_t)blockIdx.x * cols + c];
  long long total = Reduce(scratch).Sum(mine);
  if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

__global__ void tile_max(const int *m, int *maxima, int rows, int cols) {
  typedef cub::BlockReduce<int, 16, cub::BLOCK_REDUCE_WARP_REDUCTIONS, 8> Reduce;
  __shared__ typename Reduce::TempStorage scratch;
  int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 8 + threadIdx.y;
  int v = (x < cols && y < rows) ? m[(size_t)y * cols + x] : -1;
  int best = Reduce(scratch).Reduce(v, Larger());
  if (threadIdx.x == 0 && threadIdx.y == 0) maxima[blockIdx.y * gridDim.x + blockIdx.x] = best;
}

int main(int argc, char **argv) {
  int rows = argc > 1 ? atoi(argv[1]) : 100;
  int cols = argc > 2 ? atoi(argv[2]) : 300;
  if (rows < 1 || cols < 1) {
    fprintf(stderr, "usage: blockreduce [ROWS >= 1 [COLS >= 1]]\n");
    return 2;
  }
  size_t n = (size_t)rows * cols;
  int *m = (int *)malloc(n * sizeof(int));
  for (size_t i = 0; i < n; ++i) m[i] = (int)((i * 2654435761u) % 100003);
  dim3 tiles((cols + 15) / 16, (rows + 7) / 8);
  int ntiles = tiles.x * tiles.y;
  int *dm, *dmax;
  long long *dsums;
  if (cudaMalloc(&dm, n * sizeof(int)) || cudaMalloc(&dsums, rows * sizeof(long long)) ||
      cudaMalloc(&dmax, ntiles * sizeof(int)))
    return 1;
  cudaMemcpy(dm, m, n * sizeof(int), cudaMemcpyHostToDevice);
  row_sums<<<rows, THREADS>>>(dm, dsums, cols);
  tile_max<<<tiles, dim3(16, 8)>>>(dm, dmax, rows, cols);
  long long *sums = (long long *)malloc(rows * sizeof(long long));
  int *maxima = (int *)malloc(ntiles * sizeof(int));
  cudaMemcpy(sums, dsums, rows * sizeof(long long), cudaMemcpyDeviceToHost);
  cudaMemcpy(maxima, dmax, ntiles * sizeof(int), cudaMemcpyDeviceToHost);
  int bad = 0;
  uint64_t sum = 1469598103934665603ull;
  for (int r = 0; r < rows; ++r) {
    long long want = 0;
    for (int c = 0; c < cols; ++c) want += m[(size_t)r * cols + c];
    bad += sums[r] != want;
    sum = (sum ^ (uint64_t)sums[r]) * 1099511628211ull;
  }
  for (unsigned ty = 0; ty < tiles.y; ++ty)
    for (unsigned tx = 0; tx < tiles.x; ++tx) {
      int want = -1;
      for (int y = ty * 8; y < (int)(ty * 8 + 8) && y < rows; ++y)
        for (int x = tx * 16; x < (int)(tx * 16 + 16) && x < cols; ++x)
          want = want > m[(size_t)y * cols + x] ? want : m[(size_t)y * cols + x];
      int got = maxima[ty * tiles.x + tx];
      bad += got != want;
      sum = (sum ^ (uint64_t)(uint32_t)got) * 1099511628211ull;
    }
  printf("%s\n", bad ? "FAIL" : "PASS");
  printf("checksum %016llx\n", (unsigned long long)sum);
  cudaFree(dm);
  cudaFree(dsums);
  cudaFree(dmax);
  free(m);
  free(sums);
  free(maxima);
  return bad != 0;
}
