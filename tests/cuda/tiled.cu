/*
 * tiled.cu -- kernels that stage a tile and its halo in shared memory, one thread per halo
 * side, as tiled stencils are written: `jacobi` (2-D, 16 x 8 blocks, all four sides and a
 * border, the shape Polly dismissed for its complexity until the analysis loosened the thread
 * tests), and `smooth` (1-D, a halo of two on each side loaded by the first two threads
 * through `!=` tests that skip the others). Each runs a few steps, two buffers swapped, checked
 * against the same computation on the host (weights are powers of two: every sum is exact).
 * Usage: tiled [N [STEPS]]   (defaults 200 4)
 * Prints PASS or FAIL and `checksum <hex>` of the results.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define TX 16
#define TY 8
#define R 2
#define TB 64

__global__ void jacobi(const float *in, float *out, int n) {
  __shared__ float tile[TY + 2][TX + 2];
  int x = blockIdx.x * TX + threadIdx.x;
  int y = blockIdx.y * TY + threadIdx.y;
  int lx = threadIdx.x + 1, ly = threadIdx.y + 1;
  if (x < n && y < n) tile[ly][lx] = in[y * n + x];
  if (threadIdx.x == 0 && x > 0 && y < n) tile[ly][0] = in[y * n + x - 1];
  if (threadIdx.x == TX - 1 && x + 1 < n && y < n) tile[ly][TX + 1] = in[y * n + x + 1];
  if (threadIdx.y == 0 && y > 0 && x < n) tile[0][lx] = in[(y - 1) * n + x];
  if (threadIdx.y == TY - 1 && y + 1 < n && x < n) tile[TY + 1][lx] = in[(y + 1) * n + x];
  __syncthreads();
  if (x >= n || y >= n) return;
  if (x == 0 || y == 0 || x == n - 1 || y == n - 1) {
    out[y * n + x] = tile[ly][lx];
  } else {
    out[y * n + x] = 0.25f * (tile[ly][lx - 1] + tile[ly][lx + 1] + tile[ly - 1][lx] + tile[ly + 1][lx]);
  }
}

__global__ void smooth(const float *in, float *out, int n) {
  __shared__ float s[TB + 2 * R];
  int i = blockIdx.x * TB + threadIdx.x;
  if (i < n) s[threadIdx.x + R] = in[i];
  for (int k = 0; k < R; ++k) {
    if (threadIdx.x != k) continue;
    int left = blockIdx.x * TB - R + k;
    int right = blockIdx.x * TB + TB + k;
    if (left >= 0 && left < n) s[k] = in[left];
    if (right < n) s[TB + R + k] = in[right];
  }
  __syncthreads();
  if (i >= n) return;
  if (i < R || i >= n - R) {
    out[i] = s[threadIdx.x + R];
  } else {
    float sum = 0.0f;
    for (int k = -R; k <= R; ++k) sum += s[threadIdx.x + R + k];
    out[i] = sum * 0.25f;
  }
}

static uint64_t fnv(const float *v, size_t n, uint64_t sum) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    memcpy(&bits, &v[i], sizeof bits);
    sum = (sum ^ bits) * 1099511628211ull;
  }
  return sum;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 200;
  int steps = argc > 2 ? atoi(argv[2]) : 4;
  if (n < 3 || steps < 1) {
    fprintf(stderr, "usage: tiled [N >= 3 [STEPS >= 1]]\n");
    return 2;
  }
  size_t cells = (size_t)n * n, bytes = cells * sizeof(float);
  float *grid = (float *)malloc(bytes), *want = (float *)malloc(bytes), *next = (float *)malloc(bytes);
  for (size_t i = 0; i < cells; ++i) grid[i] = want[i] = (float)((i * 7919) % 64);
  // The 1-D kernel smooths the first row of the grid's size, n * 4 elements.
  size_t len = (size_t)n * 4, lbytes = len * sizeof(float);
  float *line = (float *)malloc(lbytes), *lwant = (float *)malloc(lbytes), *lnext = (float *)malloc(lbytes);
  for (size_t i = 0; i < len; ++i) line[i] = lwant[i] = (float)((i * 104729) % 32);

  float *a, *b, *la, *lb;
  if (cudaMalloc(&a, bytes) || cudaMalloc(&b, bytes) || cudaMalloc(&la, lbytes) || cudaMalloc(&lb, lbytes)) return 1;
  cudaMemcpy(a, grid, bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(la, line, lbytes, cudaMemcpyHostToDevice);
  dim3 block(TX, TY), blocks((n + TX - 1) / TX, (n + TY - 1) / TY);
  int lblocks = (int)((len + TB - 1) / TB);
  for (int s = 0; s < steps; ++s) {
    jacobi<<<blocks, block>>>(a, b, n);
    smooth<<<lblocks, TB>>>(la, lb, (int)len);
    float *t = a;
    a = b;
    b = t;
    t = la;
    la = lb;
    lb = t;
  }
  if (cudaDeviceSynchronize() != cudaSuccess) return 1;
  cudaMemcpy(grid, a, bytes, cudaMemcpyDeviceToHost);
  cudaMemcpy(line, la, lbytes, cudaMemcpyDeviceToHost);

  for (int s = 0; s < steps; ++s) {
    for (int y = 0; y < n; ++y)
      for (int x = 0; x < n; ++x) {
        size_t i = (size_t)y * n + x;
        next[i] = (x == 0 || y == 0 || x == n - 1 || y == n - 1)
                      ? want[i]
                      : 0.25f * (want[i - 1] + want[i + 1] + want[i - n] + want[i + n]);
      }
    memcpy(want, next, bytes);
    for (size_t i = 0; i < len; ++i) {
      if (i < R || i >= len - R) {
        lnext[i] = lwant[i];
      } else {
        float sum = 0.0f;
        for (int k = -R; k <= R; ++k) sum += lwant[i + k];
        lnext[i] = sum * 0.25f;
      }
    }
    memcpy(lwant, lnext, lbytes);
  }
  int bad = memcmp(grid, want, bytes) != 0 || memcmp(line, lwant, lbytes) != 0;
  printf("%s\n", bad ? "FAIL" : "PASS");
  printf("checksum %016llx\n", (unsigned long long)fnv(line, len, fnv(grid, cells, 1469598103934665603ull)));
  cudaFree(a);
  cudaFree(b);
  cudaFree(la);
  cudaFree(lb);
  free(grid);
  free(want);
  free(next);
  free(line);
  free(lwant);
  free(lnext);
  return bad;
}
