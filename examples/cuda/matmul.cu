/*
 * matmul.cu -- a CUDA program written for one GPU, as people write it: C = A B for N x N
 * floats with 16 x 16 shared-memory tiles (N need not be a multiple of 16), the operands
 * copied in and the product out with cudaMemcpy, every call checked.
 *
 * Built with `hpvm-mgpu build` instead of nvcc, the same executable runs its kernel split
 * across all GPUs of the machine (or simulated CPU devices without one) and prints the same
 * result. It checks C against a sequential product on the host (exactly: the operands are
 * small integers, so every sum is exact in float) and prints PASS or FAIL.
 *
 * Usage: matmul [N]   (default 512)
 * Prints `checksum <hex>` of C, then PASS or FAIL.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define TILE 16
#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

__global__ void matmul(const float *A, const float *B, float *C, int n) {
  __shared__ float ta[TILE][TILE];
  __shared__ float tb[TILE][TILE];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int t = 0; t < n; t += TILE) {
    ta[ty][tx] = row < n && t + tx < n ? A[row * n + t + tx] : 0.0f;
    tb[ty][tx] = t + ty < n && col < n ? B[(t + ty) * n + col] : 0.0f;
    __syncthreads();
    for (int k = 0; k < TILE; ++k)
      acc += ta[ty][k] * tb[k][tx];
    __syncthreads();
  }
  if (row < n && col < n)
    C[row * n + col] = acc;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 512;
  if (n < 1 || n > 8192) {
    fprintf(stderr, "usage: matmul [N in 1..8192]\n");
    return 2;
  }
  size_t bytes = (size_t)n * n * sizeof(float);
  std::vector<float> a((size_t)n * n), b((size_t)n * n), c((size_t)n * n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      a[(size_t)i * n + j] = (float)((i * 3 + j) % 7 - 3);
      b[(size_t)i * n + j] = (float)((i + 2 * j) % 5 - 2);
    }
  float *da, *db, *dc;
  CHECK(cudaMalloc(&da, bytes));
  CHECK(cudaMalloc(&db, bytes));
  CHECK(cudaMalloc(&dc, bytes));
  CHECK(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));
  dim3 block(TILE, TILE), grid((n + TILE - 1) / TILE, (n + TILE - 1) / TILE);
  matmul<<<grid, block>>>(da, db, dc, n);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(c.data(), dc, bytes, cudaMemcpyDeviceToHost));
  CHECK(cudaFree(da));
  CHECK(cudaFree(db));
  CHECK(cudaFree(dc));

  bool ok = true;
  uint64_t h = 1469598103934665603ull;
  std::vector<float> row(n);
  for (int i = 0; i < n; ++i) {
    std::fill(row.begin(), row.end(), 0.0f);
    for (int k = 0; k < n; ++k) {
      float aik = a[(size_t)i * n + k];
      for (int j = 0; j < n; ++j)
        row[j] += aik * b[(size_t)k * n + j];
    }
    for (int j = 0; j < n; ++j) {
      float got = c[(size_t)i * n + j];
      ok &= got == row[j];
      uint32_t bits;
      memcpy(&bits, &got, sizeof bits);
      h = (h ^ bits) * 1099511628211ull;
    }
  }
  printf("checksum %016llx\n%s\n", (unsigned long long)h, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
