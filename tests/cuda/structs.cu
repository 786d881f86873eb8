/*
 * structs.cu -- kernels taking structs and arrays by value, as CUDA programs often pass their
 * parameters:
 *   saxpy_params   a struct of two pointers, a count and a coefficient; fields read at constant
 *                  offsets (the analysis follows the pointers: partitionable)
 *   weighted_rows  a struct holding the grid's shape and a weight table indexed by the data:
 *                  the pointer is lost through memory, so the node runs whole, correctly
 *   nested         a struct inside a struct, and an array of two pointers
 * Usage: structs [N]   (default 1000, at least 1)
 * Prints a line per kernel and `checksum` with every kernel's sum; exit 0 PASS, 1 FAIL.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

struct Saxpy {
  const float *x;
  float *y;
  int n;
  float a;
};

struct Rows {
  float *data;
  int width, height;
  float weight[4];
};

struct Shape {
  int w, h;
};
struct Pair {
  Shape shape;
  float *planes[2];
};

__global__ void saxpy_params(Saxpy p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) p.y[i] = p.a * p.x[i] + p.y[i];
}

__global__ void weighted_rows(Rows r) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y;
  if (x < r.width && y < r.height) r.data[y * r.width + x] *= r.weight[(x + y) % 4];
}

__global__ void nested(Pair p, float bias) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < p.shape.w && y < p.shape.h) {
    int i = y * p.shape.w + x;
    p.planes[1][i] = p.planes[0][i] * 2.0f + bias;
  }
}

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

static int failures = 0;
static char sums[512];
static void expect(const char *what, bool ok, double checksum) {
  printf("%-14s %s %.6f\n", what, ok ? "ok  " : "FAIL", checksum);
  failures += !ok;
  size_t used = strlen(sums);
  snprintf(sums + used, sizeof sums - used, " %.6f", checksum);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  if (n < 1) {
    fprintf(stderr, "N must be positive\n");
    return 2;
  }
  {
    float *hx = (float *)malloc(n * sizeof(float)), *hy = (float *)malloc(n * sizeof(float));
    for (int i = 0; i < n; ++i) {
      hx[i] = (float)(i % 9);
      hy[i] = (float)(i % 4);
    }
    Saxpy p;
    p.n = n;
    p.a = 3.0f;
    CHECK(cudaMalloc((void **)&p.x, n * sizeof(float)));
    CHECK(cudaMalloc(&p.y, n * sizeof(float)));
    CHECK(cudaMemcpy((void *)p.x, hx, n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(p.y, hy, n * sizeof(float), cudaMemcpyHostToDevice));
    saxpy_params<<<(n + 63) / 64, 64>>>(p);
    float *out = (float *)malloc(n * sizeof(float));
    CHECK(cudaMemcpy(out, p.y, n * sizeof(float), cudaMemcpyDeviceToHost));
    bool ok = true;
    double sum = 0;
    for (int i = 0; i < n; ++i) {
      ok &= out[i] == 3.0f * hx[i] + hy[i];
      sum += out[i] * (1 + i % 5);
    }
    expect("saxpy_params", ok, sum);
    CHECK(cudaFree((void *)p.x));
    CHECK(cudaFree(p.y));
    free(hx);
    free(hy);
    free(out);
  }
  {
    Rows r;
    r.width = n / 3 + 1;
    r.height = 9;
    const float w[4] = {0.5f, 2.0f, -1.0f, 4.0f};
    memcpy(r.weight, w, sizeof w);
    size_t count = (size_t)r.width * r.height;
    float *h = (float *)malloc(count * sizeof(float)), *out = (float *)malloc(count * sizeof(float));
    for (size_t i = 0; i < count; ++i) h[i] = (float)(i % 11);
    CHECK(cudaMalloc(&r.data, count * sizeof(float)));
    CHECK(cudaMemcpy(r.data, h, count * sizeof(float), cudaMemcpyHostToDevice));
    weighted_rows<<<dim3((r.width + 31) / 32, r.height), 32>>>(r);
    CHECK(cudaMemcpy(out, r.data, count * sizeof(float), cudaMemcpyDeviceToHost));
    bool ok = true;
    double sum = 0;
    for (int y = 0; y < r.height; ++y)
      for (int x = 0; x < r.width; ++x) {
        size_t i = (size_t)y * r.width + x;
        ok &= out[i] == h[i] * w[(x + y) % 4];
        sum += out[i] * (1 + (x + 2 * y) % 7);
      }
    expect("weighted_rows", ok, sum);
    CHECK(cudaFree(r.data));
    free(h);
    free(out);
  }
  {
    Pair p;
    p.shape.w = n / 5 + 2;
    p.shape.h = 13;
    size_t count = (size_t)p.shape.w * p.shape.h;
    float *h = (float *)malloc(count * sizeof(float)), *out = (float *)malloc(count * sizeof(float));
    for (size_t i = 0; i < count; ++i) h[i] = (float)(i % 13) - 6.0f;
    CHECK(cudaMalloc(&p.planes[0], count * sizeof(float)));
    CHECK(cudaMalloc(&p.planes[1], count * sizeof(float)));
    CHECK(cudaMemcpy(p.planes[0], h, count * sizeof(float), cudaMemcpyHostToDevice));
    nested<<<dim3((p.shape.w + 15) / 16, (p.shape.h + 3) / 4), dim3(16, 4)>>>(p, 0.5f);
    CHECK(cudaMemcpy(out, p.planes[1], count * sizeof(float), cudaMemcpyDeviceToHost));
    bool ok = true;
    double sum = 0;
    for (size_t i = 0; i < count; ++i) {
      ok &= out[i] == h[i] * 2.0f + 0.5f;
      sum += out[i] * (1 + i % 3);
    }
    expect("nested", ok, sum);
    CHECK(cudaFree(p.planes[0]));
    CHECK(cudaFree(p.planes[1]));
    free(h);
    free(out);
  }
  printf("checksum%s\n", sums);
  printf("%s\n", failures ? "FAIL" : "PASS");
  return failures != 0;
}
