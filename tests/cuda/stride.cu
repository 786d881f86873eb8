/*
 * stride.cu -- grid-stride loops, the way most CUDA kernels are written: grids smaller than
 * the data (each thread runs several iterations), larger (some run none), `int` and `size_t`
 * counters, a stride computed before the loop, neighbour reads, a 2-D launch with a stride in
 * x, a thread that reads what its own earlier iteration wrote, two loops on the two ways of a
 * test every thread takes alike, and loops that must not split by iterations (a thread-dependent write outside the loop,
 * a data-dependent `break`, a per-thread sum combined through an atomic). Everything is
 * checked against the same steps on the host.
 * Usage: stride [N [ROUNDS]]   (defaults 100003 3)
 * Prints PASS or FAIL and `checksum <hex>` of the results.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

__global__ void axpy(float *y, const float *x, float a, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    y[i] = a * x[i] + y[i];
}

// `size_t` counter, the stride computed once, the thread id first.
__global__ void scale_wide(double *out, const double *in, double by, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = threadIdx.x + (size_t)blockIdx.x * blockDim.x; i < n; i += stride) out[i] = in[i] * by + 1.0;
}

// Neighbours, guarded at the ends.
__global__ void smooth(float *out, const float *in, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float l = i > 0 ? in[i - 1] : in[i];
    float r = i + 1 < n ? in[i + 1] : in[i];
    out[i] = 0.25f * l + 0.5f * in[i] + 0.25f * r;
  }
}

// Rows in y, columns by a grid-stride loop in x.
__global__ void rows(int *m, int w, int h) {
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (y >= h) return;
  for (int x = blockIdx.x * blockDim.x + threadIdx.x; x < w; x += blockDim.x * gridDim.x)
    m[y * w + x] = m[y * w + x] * 2 + x - y;
}

// Each thread carries a sum along its own iterations (it reads what its previous iteration
// wrote): split by the launch's own blocks, each running its rounds of iterations in order.
__global__ void carry(int *out, const int *in, int n) {
  int stride = blockDim.x * gridDim.x;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = (i >= stride ? out[i - stride] : 0) + in[i] % 7;
}

// Must not split by iterations: each block also marks itself, outside the loop.
__global__ void marked(int *v, int *mark, int n) {
  if (threadIdx.x == 0) mark[blockIdx.x] += 1;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) v[i] += 3;
}

// Must not split by iterations: a thread stops at the first negative value it meets.
__global__ void until_negative(int *v, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    if (v[i] < 0) break;
    v[i] = v[i] / 2;
  }
}

// A per-thread sum, combined through an atomic.
__global__ void total(const int *v, unsigned long long *sum, int n) {
  unsigned long long s = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) s += (unsigned)v[i];
  atomicAdd(sum, s);
}

// Two grid-stride loops, one on each way of a test every thread takes alike.
__global__ void either(float *out, const float *in, int n, int twice) {
  if (twice) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) out[i] = 2.0f * in[i];
  } else {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) out[i] = in[i] + 1.0f;
  }
}

// A constant bound, which LLVM widens to 64 bits in the loop's test but not in its entry's.
__global__ void fill_const(int *v) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < 4096; i += blockDim.x * gridDim.x) v[i] = i * 3 + v[i];
}

static uint64_t fnv(const void *p, size_t bytes, uint64_t h) {
  const unsigned char *c = (const unsigned char *)p;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100003;
  int rounds = argc > 2 ? atoi(argv[2]) : 3;
  if (n < 64 || rounds < 1) {
    fprintf(stderr, "usage: stride [N >= 64 [ROUNDS >= 1]]\n");
    return 2;
  }
  const int w = 1000, h = n / w > 0 ? n / w : 1;
  float *x = (float *)malloc(n * sizeof(float)), *y = (float *)malloc(n * sizeof(float));
  float *s = (float *)malloc(n * sizeof(float));
  double *din = (double *)malloc(n * sizeof(double)), *dout = (double *)malloc(n * sizeof(double));
  int *m = (int *)malloc((size_t)w * h * sizeof(int)), *v = (int *)malloc(n * sizeof(int));
  int *u = (int *)malloc(n * sizeof(int)), mark[48] = {0};
  int *c = (int *)malloc(n * sizeof(int));
  float *q = (float *)malloc(n * sizeof(float)), *dq;
  int *k = (int *)calloc(4096, sizeof(int)), *dk, *gk = (int *)malloc(4096 * sizeof(int));
  for (int i = 0; i < n; ++i) {
    x[i] = (float)(i % 97) * 0.5f;
    y[i] = (float)(i % 13);
    din[i] = i * 0.25;
    v[i] = i % 1000;
    u[i] = (i % 4099 == 4098) ? -1 : i % 777;
  }
  for (int i = 0; i < w * h; ++i) m[i] = i % 31;
  float *dx, *dy, *ds;
  double *ddin, *ddout;
  int *dm, *dv, *du, *dmark, *dc;
  unsigned long long *dsum, sum = 0, want_sum = 0;
  if (cudaMalloc(&dx, n * sizeof(float)) || cudaMalloc(&dy, n * sizeof(float)) || cudaMalloc(&ds, n * sizeof(float)) ||
      cudaMalloc(&ddin, n * sizeof(double)) || cudaMalloc(&ddout, n * sizeof(double)) ||
      cudaMalloc(&dm, (size_t)w * h * sizeof(int)) || cudaMalloc(&dv, n * sizeof(int)) ||
      cudaMalloc(&du, n * sizeof(int)) || cudaMalloc(&dmark, sizeof mark) || cudaMalloc(&dsum, sizeof sum) ||
      cudaMalloc(&dc, n * sizeof(int)) || cudaMalloc(&dq, n * sizeof(float)) || cudaMalloc(&dk, 4096 * sizeof(int)))
    return 1;
  cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dy, y, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(ddin, din, n * sizeof(double), cudaMemcpyHostToDevice);
  cudaMemcpy(dm, m, (size_t)w * h * sizeof(int), cudaMemcpyHostToDevice);
  cudaMemcpy(dv, v, n * sizeof(int), cudaMemcpyHostToDevice);
  cudaMemcpy(du, u, n * sizeof(int), cudaMemcpyHostToDevice);
  cudaMemcpy(dmark, mark, sizeof mark, cudaMemcpyHostToDevice);
  cudaMemcpy(dsum, &sum, sizeof sum, cudaMemcpyHostToDevice);
  cudaMemcpy(dk, k, 4096 * sizeof(int), cudaMemcpyHostToDevice);
  for (int r = 0; r < rounds; ++r) {
    // Fewer threads than elements (several iterations each), then more (some run none).
    int grid = r % 2 == 0 ? 40 : (n + 127) / 128 + 7;
    axpy<<<grid, 128>>>(dy, dx, 1.5f + r, n);
    for (int i = 0; i < n; ++i) y[i] = (1.5f + r) * x[i] + y[i];
    scale_wide<<<grid / 2 + 1, 64>>>(ddout, ddin, 0.5 + r, (size_t)n);
    for (int i = 0; i < n; ++i) dout[i] = din[i] * (0.5 + r) + 1.0;
    smooth<<<grid, 96>>>(ds, dy, n);
    for (int i = 0; i < n; ++i) {
      float l = i > 0 ? y[i - 1] : y[i], rr = i + 1 < n ? y[i + 1] : y[i];
      s[i] = 0.25f * l + 0.5f * y[i] + 0.25f * rr;
    }
    rows<<<dim3(3, h), 64>>>(dm, w, h);
    for (int yy = 0; yy < h; ++yy)
      for (int xx = 0; xx < w; ++xx) m[yy * w + xx] = m[yy * w + xx] * 2 + xx - yy;
    carry<<<5 + r, 32>>>(dc, dv, n);
    for (int i = 0; i < n; ++i) c[i] = (i >= (5 + r) * 32 ? c[i - (5 + r) * 32] : 0) + v[i] % 7;
    marked<<<48, 32>>>(dv, dmark, n);
    for (int b = 0; b < 48; ++b) mark[b] += 1;
    for (int i = 0; i < n; ++i) v[i] += 3;
    until_negative<<<24, 64>>>(du, n);
    for (int t = 0; t < 24 * 64; ++t)
      for (int i = t; i < n; i += 24 * 64) {
        if (u[i] < 0) break;
        u[i] = u[i] / 2;
      }
    either<<<grid, 64>>>(dq, dx, n, r % 2);
    for (int i = 0; i < n; ++i) q[i] = r % 2 ? 2.0f * x[i] : x[i] + 1.0f;
    fill_const<<<3 + r, 64>>>(dk);
    for (int i = 0; i < 4096; ++i) k[i] = i * 3 + k[i];
    total<<<16, 128>>>(dv, dsum, n);
    for (int i = 0; i < n; ++i) want_sum += (unsigned)v[i];
  }
  float *gy = (float *)malloc(n * sizeof(float)), *gs = (float *)malloc(n * sizeof(float));
  double *gout = (double *)malloc(n * sizeof(double));
  int *gm = (int *)malloc((size_t)w * h * sizeof(int)), *gv = (int *)malloc(n * sizeof(int));
  int *gu = (int *)malloc(n * sizeof(int)), gmark[48];
  int *gc = (int *)malloc(n * sizeof(int));
  float *gq = (float *)malloc(n * sizeof(float));
  cudaMemcpy(gq, dq, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(gk, dk, 4096 * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(gc, dc, n * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(gy, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(gs, ds, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(gout, ddout, n * sizeof(double), cudaMemcpyDeviceToHost);
  cudaMemcpy(gm, dm, (size_t)w * h * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(gv, dv, n * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(gu, du, n * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(gmark, dmark, sizeof gmark, cudaMemcpyDeviceToHost);
  cudaMemcpy(&sum, dsum, sizeof sum, cudaMemcpyDeviceToHost);
  int bad = 0;
  bad += memcmp(gy, y, n * sizeof(float)) != 0;
  bad += memcmp(gs, s, n * sizeof(float)) != 0;
  bad += memcmp(gout, dout, n * sizeof(double)) != 0;
  bad += memcmp(gm, m, (size_t)w * h * sizeof(int)) != 0;
  bad += memcmp(gv, v, n * sizeof(int)) != 0;
  bad += memcmp(gu, u, n * sizeof(int)) != 0;
  bad += memcmp(gmark, mark, sizeof mark) != 0;
  bad += sum != want_sum;
  bad += memcmp(gc, c, n * sizeof(int)) != 0;
  bad += memcmp(gq, q, n * sizeof(float)) != 0;
  bad += memcmp(gk, k, 4096 * sizeof(int)) != 0;
  uint64_t hsh = 14695981039346656037ull;
  hsh = fnv(gy, n * sizeof(float), hsh);
  hsh = fnv(gs, n * sizeof(float), hsh);
  hsh = fnv(gout, n * sizeof(double), hsh);
  hsh = fnv(gm, (size_t)w * h * sizeof(int), hsh);
  hsh = fnv(gv, n * sizeof(int), hsh);
  hsh = fnv(gu, n * sizeof(int), hsh);
  hsh = fnv(&sum, sizeof sum, hsh);
  hsh = fnv(gc, n * sizeof(int), hsh);
  hsh = fnv(gq, n * sizeof(float), hsh);
  hsh = fnv(gk, 4096 * sizeof(int), hsh);
  printf("%s\nchecksum %016llx\n", bad ? "FAIL" : "PASS", (unsigned long long)hsh);
  return bad ? 1 : 0;
}
