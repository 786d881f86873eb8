/*
 * streams.cu -- the host side of single-GPU CUDA programs as people write it, each part
 * checked against the host:
 *   two streams     copies and launches with <<<grid, block, 0, stream>>> and
 *                   cudaMemcpyAsync on two streams, joined by an event (cudaStreamWaitEvent),
 *                   timed with cudaEventElapsedTime
 *   sub-ranges      a kernel on the middle of a buffer (a pointer offset as its argument),
 *                   cudaMemcpy of sub-ranges in and out around it
 *   swapped loop    a 1-D three-point smoother in a loop, input and output swapped each step
 *   reduction       a float sum with atomicAdd (values are small integers, so every order of
 *                   the additions gives the same exact sum)
 *   pinned, managed cudaHostAlloc'd staging memory; cudaMallocManaged memory the host writes
 *                   and reads around synchronizations
 * Usage: streams [N]   (default 1000, at least 8)
 * Prints a line per part, `checksum <hex>` of every result, then PASS or FAIL.
 */
#include <cstdint>
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

__global__ void axpb(float *x, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + b;
}

__global__ void add(const float *x, const float *y, float *z, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = x[i] + y[i];
}

__global__ void smooth(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float l = in[i > 0 ? i - 1 : i], r = in[i < n - 1 ? i + 1 : i];
  out[i] = 0.25f * l + 0.5f * in[i] + 0.25f * r;
}

__global__ void sum(const float *x, float *total, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(total, x[i]);
}

static int failures = 0;
static uint64_t digest = 1469598103934665603ull;

static void fold(const float *v, int n) {
  for (int i = 0; i < n; ++i) {
    uint32_t bits;
    memcpy(&bits, &v[i], sizeof bits);
    digest = (digest ^ bits) * 1099511628211ull;
  }
}

static void expect(const char *what, const float *got, const float *want, int n) {
  int bad = 0;
  for (int i = 0; i < n; ++i) bad += got[i] != want[i];
  printf("%-12s %s (%d of %d differ)\n", what, bad ? "FAIL" : "ok", bad, n);
  failures += bad != 0;
  fold(got, n);
}

static int blocks(int n, int b) { return (n + b - 1) / b; }

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  if (n < 8) {
    fprintf(stderr, "usage: streams [N >= 8]\n");
    return 2;
  }
  size_t bytes = (size_t)n * sizeof(float);
  float *want = (float *)malloc(bytes), *got = (float *)malloc(bytes);

  // Two streams: x and y are prepared on their own streams, z waits for both.
  float *hx, *hy;
  CHECK(cudaHostAlloc((void **)&hx, bytes, cudaHostAllocDefault));
  CHECK(cudaMallocHost((void **)&hy, bytes));
  for (int i = 0; i < n; ++i) {
    hx[i] = (float)(i % 17);
    hy[i] = (float)(i % 5) * 0.5f;
  }
  float *dx, *dy, *dz;
  CHECK(cudaMalloc(&dx, bytes));
  CHECK(cudaMalloc(&dy, bytes));
  CHECK(cudaMalloc(&dz, bytes));
  cudaStream_t s1, s2;
  cudaEvent_t y_ready, start, stop;
  CHECK(cudaStreamCreate(&s1));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  CHECK(cudaEventCreate(&y_ready));
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start, s1));
  CHECK(cudaMemcpyAsync(dx, hx, bytes, cudaMemcpyHostToDevice, s1));
  CHECK(cudaMemcpyAsync(dy, hy, bytes, cudaMemcpyHostToDevice, s2));
  axpb<<<blocks(n, 128), 128, 0, s1>>>(dx, 2.0f, 1.0f, n);
  axpb<<<blocks(n, 64), 64, 0, s2>>>(dy, 4.0f, -1.0f, n);
  CHECK(cudaEventRecord(y_ready, s2));
  CHECK(cudaStreamWaitEvent(s1, y_ready, 0));
  add<<<blocks(n, 256), 256, 0, s1>>>(dx, dy, dz, n);
  CHECK(cudaMemcpyAsync(hx, dz, bytes, cudaMemcpyDeviceToHost, s1));
  CHECK(cudaEventRecord(stop, s1));
  CHECK(cudaStreamSynchronize(s1));
  CHECK(cudaStreamSynchronize(s2));
  float ms = -1;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  for (int i = 0; i < n; ++i) want[i] = ((float)(i % 17) * 2.0f + 1.0f) + ((float)(i % 5) * 0.5f * 4.0f - 1.0f);
  expect("two streams", hx, want, n);
  if (!(ms >= 0)) {
    printf("two streams  FAIL (elapsed %f ms)\n", ms);
    ++failures;
  }

  // Sub-ranges: the middle half of z (offset pointer as the kernel's argument), a quarter
  // of it rewritten from the host first, then read back in two pieces.
  int lo = n / 4, len = n / 2;
  for (int i = 0; i < n; ++i) want[i] = hx[i];
  for (int i = 0; i < len / 2; ++i) got[i] = (float)(100 + i % 7);
  CHECK(cudaMemcpy(dz + lo, got, (size_t)(len / 2) * sizeof(float), cudaMemcpyHostToDevice));
  for (int i = 0; i < len / 2; ++i) want[lo + i] = (float)(100 + i % 7);
  axpb<<<blocks(len, 32), 32>>>(dz + lo, 0.5f, 3.0f, len);
  for (int i = lo; i < lo + len; ++i) want[i] = want[i] * 0.5f + 3.0f;
  CHECK(cudaMemcpy(got, dz, (size_t)(lo + 3) * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(got + lo + 3, dz + lo + 3, (size_t)(n - lo - 3) * sizeof(float), cudaMemcpyDeviceToHost));
  expect("sub-ranges", got, want, n);

  // A loop with swapped pointers.
  float *a = dx, *b = dy;
  for (int i = 0; i < n; ++i) want[i] = (float)((i * 7) % 64);
  CHECK(cudaMemcpy(a, want, bytes, cudaMemcpyHostToDevice));
  int steps = 7;
  for (int s = 0; s < steps; ++s) {
    smooth<<<blocks(n, 128), 128>>>(a, b, n);
    float *t = a;
    a = b;
    b = t;
    for (int i = 0; i < n; ++i) {
      float l = want[i > 0 ? i - 1 : i], r = want[i < n - 1 ? i + 1 : i];
      got[i] = 0.25f * l + 0.5f * want[i] + 0.25f * r;
    }
    memcpy(want, got, bytes);
  }
  CHECK(cudaMemcpy(got, a, bytes, cudaMemcpyDeviceToHost));
  expect("swapped loop", got, want, n);

  // A reduction with atomics into managed memory the host set and reads.
  float *total;
  CHECK(cudaMallocManaged((void **)&total, sizeof(float), cudaMemAttachGlobal));
  *total = 10.0f;
  for (int i = 0; i < n; ++i) hy[i] = (float)(i % 9);
  CHECK(cudaMemcpy(dy, hy, bytes, cudaMemcpyHostToDevice));
  sum<<<blocks(n, 128), 128>>>(dy, total, n);
  CHECK(cudaDeviceSynchronize());
  float want_total = 10.0f;
  for (int i = 0; i < n; ++i) want_total += (float)(i % 9);
  expect("reduction", total, &want_total, 1);

  CHECK(cudaGetLastError());
  printf("checksum %016llx\n", (unsigned long long)digest);
  printf("%s\n", failures ? "FAIL" : "PASS");
  CHECK(cudaStreamDestroy(s1));
  CHECK(cudaStreamDestroy(s2));
  CHECK(cudaEventDestroy(y_ready));
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dy));
  CHECK(cudaFree(dz));
  CHECK(cudaFree(total));
  CHECK(cudaFreeHost(hx));
  CHECK(cudaFreeHost(hy));
  free(want);
  free(got);
  return failures ? 1 : 0;
}
