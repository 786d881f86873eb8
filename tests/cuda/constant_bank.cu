/*
 * constant_bank.cu -- `__constant__` arrays read at indices that change with a loop, as
 * programs keep their coefficients, sample points and filters: a 48 KB array of structs
 * every thread walks (HeCBench fhd's shape), a filter indexed by the thread (a divergent
 * index), the arrays rewritten by cudaMemcpyToSymbol between launches (whole, in part at an
 * offset, and a part the earlier launches never read), a launch loop that rewrites a
 * coefficient every step, a kernel given a constant's address (cudaGetSymbolAddress) as a
 * pointer, and cudaMemcpyFromSymbol reading a constant back. On GPUs the kernels read these
 * through the constant bank; every result is checked against the host's. The values are
 * small multiples of powers of two, so every product and sum is exact, whether or not a
 * compiler fuses them (nvcc does).
 * Usage: constant_bank [N [STEPS]]   (defaults 1000 and 6)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define POINTS 4096
#define TAPS 33

struct Point {
  float x, y, z;
};

__constant__ Point kPoints[POINTS];
__constant__ float kTaps[TAPS];
__constant__ float kStep[4];

/* Each thread sums over the first `m` points: every warp reads one point at a time. */
__global__ void sum_points(const float *in, float *out, int n, int m) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float a = in[i], acc = 0.0f;
  for (int j = 0; j < m; j++)
    acc += kPoints[j].x * a + kPoints[j].y - kPoints[j].z * a * a;
  out[i] = acc;
}

/* A filter whose tap depends on the thread: the warp's lanes read different taps. */
__global__ void taps(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  out[i] = in[i] * kTaps[i % TAPS] + kTaps[(i * 7) % TAPS];
}

/* One time step: the coefficient the host wrote before this launch. */
__global__ void step(float *x, int n, int s) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] = x[i] * kStep[s % 4] + kStep[(s + 1) % 4];
}

/* Reads a constant through a pointer the host got for it. */
__global__ void through_pointer(const float *taps, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] += taps[(i * 3) % TAPS];
}

static uint64_t h = 1469598103934665603ull;
static void mix(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  h = (h ^ u) * 1099511628211ull;
}

static bool same(const float *got, const float *want, int n, const char *what) {
  for (int i = 0; i < n; i++) {
    mix(got[i]);
    if (got[i] != want[i]) {
      printf("%s: element %d is %.9g, expected %.9g\n", what, i, got[i], want[i]);
      return false;
    }
  }
  return true;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  int steps = argc > 2 ? atoi(argv[2]) : 6;
  if (n < 1 || steps < 1) {
    fprintf(stderr, "usage: constant_bank [N >= 1 [STEPS >= 1]]\n");
    return 2;
  }
  static Point points[POINTS];
  for (int j = 0; j < POINTS; j++)
    points[j] = {(float)(j % 13) * 0.25f - 1.0f, (float)(j % 7) * 0.5f, (float)(j % 5) * 0.25f};
  float taps_h[TAPS], step_h[4];
  for (int t = 0; t < TAPS; t++)
    taps_h[t] = (float)(t % 9) * 0.75f - 2.0f;

  float *in_h = (float *)malloc(n * sizeof(float)), *out_h = (float *)malloc(n * sizeof(float));
  float *want = (float *)malloc(n * sizeof(float)), *x_h = (float *)malloc(n * sizeof(float));
  for (int i = 0; i < n; i++)
    in_h[i] = (float)(i % 11) * 0.125f - 0.5f;
  float *in, *out, *x;
  cudaMalloc(&in, n * sizeof(float));
  cudaMalloc(&out, n * sizeof(float));
  cudaMalloc(&x, n * sizeof(float));
  cudaMemcpy(in, in_h, n * sizeof(float), cudaMemcpyHostToDevice);
  int blocks = (n + 127) / 128;
  bool ok = true;

  /* The first half of the points only, then launches reading more of them: the second half
   * is written only before the launch that first reads it. */
  cudaMemcpyToSymbol(kPoints, points, POINTS / 2 * sizeof(Point));
  int counts[3] = {POINTS / 4, POINTS / 2, POINTS};
  for (int c = 0; c < 3 && ok; c++) {
    int m = counts[c];
    if (m == POINTS) {
      for (int j = POINTS / 2; j < POINTS; j++)
        points[j].y += 1.0f;
      cudaMemcpyToSymbol(kPoints, points + POINTS / 2, POINTS / 2 * sizeof(Point), POINTS / 2 * sizeof(Point));
    }
    sum_points<<<blocks, 128>>>(in, out, n, m);
    cudaMemcpy(out_h, out, n * sizeof(float), cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; i++) {
      float a = in_h[i], acc = 0.0f;
      for (int j = 0; j < m; j++)
        acc += points[j].x * a + points[j].y - points[j].z * a * a;
      want[i] = acc;
    }
    ok = same(out_h, want, n, "sum_points");
  }

  /* A filter, then the same filter rewritten in part, at an offset. */
  cudaMemcpyToSymbol(kTaps, taps_h, sizeof taps_h);
  for (int round = 0; round < 2 && ok; round++) {
    if (round == 1) {
      for (int t = 10; t < 20; t++)
        taps_h[t] = -taps_h[t] + 0.5f;
      cudaMemcpyToSymbol(kTaps, taps_h + 10, 10 * sizeof(float), 10 * sizeof(float));
    }
    taps<<<blocks, 128>>>(in, out, n);
    cudaMemcpy(out_h, out, n * sizeof(float), cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; i++)
      want[i] = in_h[i] * taps_h[i % TAPS] + taps_h[(i * 7) % TAPS];
    ok = ok && same(out_h, want, n, "taps");
  }

  /* The filter's address as a pointer. */
  if (ok) {
    float *taps_ptr = nullptr;
    if (cudaGetSymbolAddress((void **)&taps_ptr, kTaps) != cudaSuccess) {
      printf("cudaGetSymbolAddress failed\n");
      ok = false;
    } else {
      through_pointer<<<blocks, 128>>>(taps_ptr, out, n);
      cudaMemcpy(out_h, out, n * sizeof(float), cudaMemcpyDeviceToHost);
      for (int i = 0; i < n; i++)
        want[i] += taps_h[(i * 3) % TAPS];
      ok = same(out_h, want, n, "through_pointer");
    }
  }

  /* A coefficient rewritten before every step, the launches never waited for in between. */
  for (int i = 0; i < n; i++)
    x_h[i] = in_h[i];
  cudaMemcpy(x, x_h, n * sizeof(float), cudaMemcpyHostToDevice);
  for (int s = 0; s < steps && ok; s++) {
    const float choices[5] = {-2.0f, -1.0f, 1.0f, 2.0f, 3.0f};
    for (int k = 0; k < 4; k++)
      step_h[k] = choices[(s * 5 + k * 3) % 5];
    cudaMemcpyToSymbolAsync(kStep, step_h, sizeof step_h, 0, cudaMemcpyHostToDevice, 0);
    step<<<blocks, 128>>>(x, n, s);
    for (int i = 0; i < n; i++)
      x_h[i] = x_h[i] * step_h[s % 4] + step_h[(s + 1) % 4];
  }
  cudaMemcpy(out_h, x, n * sizeof(float), cudaMemcpyDeviceToHost);
  ok = ok && same(out_h, x_h, n, "step");

  /* A constant read back. */
  float back[TAPS];
  if (ok && (cudaMemcpyFromSymbol(back, kTaps, sizeof back) != cudaSuccess || memcmp(back, taps_h, sizeof back))) {
    printf("cudaMemcpyFromSymbol: the filter read back differs\n");
    ok = false;
  }
  if (cudaGetLastError() != cudaSuccess) {
    printf("a CUDA call failed\n");
    ok = false;
  }
  printf("checksum %016llx\n", (unsigned long long)h);
  printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
