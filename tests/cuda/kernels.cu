/*
 * kernels.cu -- the common shapes of single-GPU CUDA programs, each checked against the host:
 *   scale<T>       a template kernel, 1-D grid, guard `i < n`, a __constant__ table read
 *   stencil2d      2-D grid of 2-D blocks, 5-point stencil, `__restrict__` input
 *   tiled_matmul   static __shared__ tiles, __syncthreads, a __device__ helper
 *   reverse_block  dynamic (extern) __shared__ memory sized by the launch
 *   histogram      atomicAdd into a small global histogram (a reduction: split, combined after)
 *   count_calls    atomicAdd on a __device__ variable read back with cudaMemcpyFromSymbol
 *   softplus       libdevice math (expf, log1pf, fmaxf)
 * and a launch CUDA refuses (2048 threads per block) must leave cudaErrorInvalidConfiguration.
 * Usage: kernels [N]   (default 1000, at least 16; N need not be a multiple of the block size)
 * Prints a line per kernel, then `checksum` with every kernel's sum; exit 0 PASS, 1 FAIL.
 */
#include <cmath>
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

__constant__ float offsets[4];
__device__ unsigned calls;

template <typename T> __global__ void scale(T *a, T s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = a[i] * s + offsets[i % 4];
}

__global__ void stencil2d(const float *__restrict__ in, float *out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x > 0 && y > 0 && x < w - 1 && y < h - 1)
    out[y * w + x] = 0.25f * (in[y * w + x - 1] + in[y * w + x + 1] + in[(y - 1) * w + x] + in[(y + 1) * w + x]) -
                     in[y * w + x];
}

#define TILE 16
__device__ float dot_tile(const float (*a)[TILE], const float (*b)[TILE], int ty, int tx) {
  float s = 0;
  for (int k = 0; k < TILE; ++k) s += a[ty][k] * b[k][tx];
  return s;
}

__global__ void tiled_matmul(const float *A, const float *B, float *C, int n) {
  __shared__ float ta[TILE][TILE];
  __shared__ float tb[TILE][TILE];
  int tx = threadIdx.x, ty = threadIdx.y;
  int col = blockIdx.x * TILE + tx, row = blockIdx.y * TILE + ty;
  float acc = 0;
  for (int t = 0; t < n / TILE; ++t) {
    ta[ty][tx] = A[row * n + t * TILE + tx];
    tb[ty][tx] = B[(t * TILE + ty) * n + col];
    __syncthreads();
    acc += dot_tile(ta, tb, ty, tx);
    __syncthreads();
  }
  C[row * n + col] = acc;
}

__global__ void reverse_block(const int *in, int *out, int n) {
  extern __shared__ int buf[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  buf[threadIdx.x] = i < n ? in[i] : -1;
  __syncthreads();
  int j = blockIdx.x * blockDim.x + (blockDim.x - 1 - threadIdx.x);
  if (j < n) out[j] = buf[threadIdx.x];
}

__global__ void histogram(const int *in, unsigned *bins, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&bins[in[i] & 15], 1u);
}

__global__ void count_calls(int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&calls, 1u);
}

__global__ void softplus(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.f) + log1pf(expf(-fabsf(x[i])));
}

static int failures = 0;
static char sums[1024];
static void expect(const char *what, bool ok, double checksum) {
  printf("%-14s %s %.6f\n", what, ok ? "ok  " : "FAIL", checksum);
  failures += !ok;
  size_t used = strlen(sums);
  snprintf(sums + used, sizeof sums - used, " %.6f", checksum);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  if (n < 16) {
    fprintf(stderr, "N must be at least 16\n");
    return 2;
  }
  int blocks = (n + 127) / 128;

  /* scale<float> with __constant__ offsets */
  {
    float *h = (float *)malloc(n * sizeof(float)), *d;
    for (int i = 0; i < n; ++i) h[i] = (float)(i % 17);
    const float off[4] = {0.5f, 1.5f, 2.5f, 3.5f};
    CHECK(cudaMemcpyToSymbol(offsets, off, sizeof off));
    CHECK(cudaMalloc(&d, n * sizeof(float)));
    CHECK(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
    scale<float><<<blocks, 128>>>(d, 2.0f, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
    bool ok = true;
    double sum = 0;
    for (int i = 0; i < n; ++i) {
      ok &= h[i] == (float)(i % 17) * 2.0f + off[i % 4];
      sum += h[i];
    }
    expect("scale<float>", ok, sum);
    CHECK(cudaFree(d));
    free(h);
  }

  /* stencil2d on a w x h grid with 16 x 8 blocks */
  {
    int w = n / 4 + 3, hgt = 37;
    size_t bytes = (size_t)w * hgt * sizeof(float);
    float *in = (float *)malloc(bytes), *out = (float *)malloc(bytes), *din, *dout;
    for (int i = 0; i < w * hgt; ++i) in[i] = (float)((i * 7) % 13);
    CHECK(cudaMalloc(&din, bytes));
    CHECK(cudaMalloc(&dout, bytes));
    CHECK(cudaMemcpy(din, in, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dout, 0, bytes));
    dim3 block(16, 8), grid((w + 15) / 16, (hgt + 7) / 8);
    stencil2d<<<grid, block>>>(din, dout, w, hgt);
    CHECK(cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost));
    bool ok = true;
    double sum = 0;
    for (int y = 0; y < hgt; ++y)
      for (int x = 0; x < w; ++x) {
        float want = 0;
        if (x > 0 && y > 0 && x < w - 1 && y < hgt - 1)
          want = 0.25f * (in[y * w + x - 1] + in[y * w + x + 1] + in[(y - 1) * w + x] + in[(y + 1) * w + x]) -
                 in[y * w + x];
        ok &= out[y * w + x] == want;
        sum += out[y * w + x] * (1 + (3 * x + y) % 7);
      }
    expect("stencil2d", ok, sum);
    CHECK(cudaFree(din));
    CHECK(cudaFree(dout));
    free(in);
    free(out);
  }

  /* tiled_matmul, m x m with m a multiple of TILE, at most 512 */
  {
    int m = ((n / 8 < 512 ? n / 8 : 512) + TILE - 1) / TILE * TILE; /* the host's check is cubic */
    size_t bytes = (size_t)m * m * sizeof(float);
    float *a = (float *)malloc(bytes), *b = (float *)malloc(bytes), *c = (float *)malloc(bytes);
    for (int i = 0; i < m * m; ++i) {
      a[i] = (float)(i % 5);
      b[i] = (float)(i % 3) - 1.0f;
    }
    float *da, *db, *dc;
    CHECK(cudaMalloc(&da, bytes));
    CHECK(cudaMalloc(&db, bytes));
    CHECK(cudaMalloc(&dc, bytes));
    CHECK(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice));
    tiled_matmul<<<dim3(m / TILE, m / TILE), dim3(TILE, TILE)>>>(da, db, dc, m);
    CHECK(cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost));
    bool ok = true;
    double sum = 0;
    for (int r = 0; r < m; ++r)
      for (int col = 0; col < m; ++col) {
        float want = 0;
        for (int k = 0; k < m; ++k) want += a[r * m + k] * b[k * m + col];
        ok &= c[r * m + col] == want; /* small integers: exact */
        sum += c[r * m + col] * (1 + (3 * col + r) % 7);
      }
    expect("tiled_matmul", ok, sum);
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));
    free(a);
    free(b);
    free(c);
  }

  /* reverse_block with 64 ints of dynamic shared memory per block */
  {
    int *h = (int *)malloc(n * sizeof(int)), *r = (int *)malloc(n * sizeof(int)), *din, *dout;
    for (int i = 0; i < n; ++i) h[i] = i * 3;
    CHECK(cudaMalloc(&din, n * sizeof(int)));
    CHECK(cudaMalloc(&dout, n * sizeof(int)));
    CHECK(cudaMemcpy(din, h, n * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dout, 0xff, n * sizeof(int)));
    reverse_block<<<(n + 63) / 64, 64, 64 * sizeof(int)>>>(din, dout, n);
    CHECK(cudaMemcpy(r, dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    bool ok = true;
    double sum = 0;
    for (int i = 0; i < n; ++i) {
      int blk = i / 64, t = 63 - i % 64, src = blk * 64 + t;
      ok &= r[i] == (src < n ? h[src] : -1);
      sum += r[i];
    }
    expect("reverse_block", ok, sum);
    CHECK(cudaFree(din));
    CHECK(cudaFree(dout));
    free(h);
    free(r);
  }

  /* histogram and a __device__ counter, both atomic */
  {
    int *h = (int *)malloc(n * sizeof(int)), *din;
    unsigned bins[16], want[16] = {0}, *dbins;
    for (int i = 0; i < n; ++i) {
      h[i] = (i * 37) % 101;
      want[h[i] & 15]++;
    }
    CHECK(cudaMalloc(&din, n * sizeof(int)));
    CHECK(cudaMalloc(&dbins, sizeof bins));
    CHECK(cudaMemcpy(din, h, n * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dbins, 0, sizeof bins));
    histogram<<<blocks, 128>>>(din, dbins, n);
    CHECK(cudaMemcpy(bins, dbins, sizeof bins, cudaMemcpyDeviceToHost));
    bool ok = true;
    double sum = 0;
    for (int b = 0; b < 16; ++b) {
      ok &= bins[b] == want[b];
      sum += bins[b] * (b + 1);
    }
    expect("histogram", ok, sum);
    unsigned zero = 0, got = 0;
    CHECK(cudaMemcpyToSymbol(calls, &zero, sizeof zero));
    count_calls<<<blocks, 128>>>(n);
    count_calls<<<blocks, 128>>>(n / 2);
    CHECK(cudaMemcpyFromSymbol(&got, calls, sizeof got));
    expect("count_calls", got == (unsigned)(n + n / 2), got);
    CHECK(cudaFree(din));
    CHECK(cudaFree(dbins));
    free(h);
  }

  /* softplus through libdevice math */
  {
    float *x = (float *)malloc(n * sizeof(float)), *y = (float *)malloc(n * sizeof(float)), *dx, *dy;
    for (int i = 0; i < n; ++i) x[i] = (float)(i % 41) * 0.25f - 5.0f;
    CHECK(cudaMalloc(&dx, n * sizeof(float)));
    CHECK(cudaMalloc(&dy, n * sizeof(float)));
    CHECK(cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice));
    softplus<<<blocks, 128>>>(dx, dy, n);
    CHECK(cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    bool ok = true;
    double sum = 0;
    for (int i = 0; i < n; ++i) {
      double want = log1p(exp((double)x[i]));
      ok &= fabs(y[i] - want) <= 1e-5 * (1 + want);
      sum += y[i];
    }
    expect("softplus", ok, sum);
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dy));
    free(x);
    free(y);
  }

  /* A launch CUDA refuses: nothing runs, the error is the last one. */
  {
    int *d;
    CHECK(cudaMalloc(&d, sizeof(int)));
    count_calls<<<1, 2048>>>(1);
    cudaError_t e = cudaGetLastError();
    expect("bad launch", e == cudaErrorInvalidConfiguration && cudaGetLastError() == cudaSuccess, e);
    CHECK(cudaFree(d));
  }

  printf("checksum%s\n", sums);
  printf("%s\n", failures ? "FAIL" : "PASS");
  return failures != 0;
}
