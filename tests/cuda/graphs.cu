/*
 * graphs.cu -- the rules a runtime that holds launches back (and replays repeated sequences
 * as CUDA graphs) must keep, each checked against a host reference:
 *   - a time-stepping loop of three kernels whose scalar changes every step (repeats);
 *   - an event recorded between launches, waited for, and the data read at that point;
 *   - a launch that fails (too many threads per block) inside a sequence: reported by
 *     cudaGetLastError at once, then cleared, and the sequence goes on;
 *   - managed memory written by kernels and read by the host after a synchronization;
 *   - two streams, the second waiting for an event of the first;
 *   - a sequence whose grid changes in the middle (a grid-stride kernel: same result).
 * Usage: graphs N STEPS    Prints `checksum <hex>` and PASS or FAIL.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

__global__ void source(unsigned *a, int n, int t) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = a[i] * 3u + (unsigned)t;
}

__global__ void mix(const unsigned *a, unsigned *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = b[i] ^ (a[i] >> 3);
}

__global__ void settle(unsigned *a, const unsigned *b, int n, int t) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = a[i] + b[i] + (unsigned)(t & 7);
}

/* A grid-stride loop: any grid gives the same result. */
__global__ void stride_add(unsigned *a, int n, unsigned v) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) a[i] += v;
}

static void step_host(unsigned *a, unsigned *b, int n, int t) {
  for (int i = 0; i < n; ++i) a[i] = a[i] * 3u + (unsigned)t;
  for (int i = 0; i < n; ++i) b[i] = b[i] ^ (a[i] >> 3);
  for (int i = 0; i < n; ++i) a[i] = a[i] + b[i] + (unsigned)(t & 7);
}

static int differs(const unsigned *x, const unsigned *y, int n) {
  int wrong = 0;
  for (int i = 0; i < n; ++i) wrong += x[i] != y[i];
  return wrong;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4096;
  int steps = argc > 2 ? atoi(argv[2]) : 64;
  if (n < 1 || steps < 2) {
    fprintf(stderr, "usage: graphs [N >= 1 [STEPS >= 2]]\n");
    return 2;
  }
  size_t bytes = (size_t)n * sizeof(unsigned);
  unsigned *ha = (unsigned *)malloc(bytes), *hb = (unsigned *)malloc(bytes), *got = (unsigned *)malloc(bytes);
  for (int i = 0; i < n; ++i) {
    ha[i] = (unsigned)i * 2654435761u;
    hb[i] = (unsigned)(i % 251);
  }
  unsigned *a, *b;
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  CHECK(cudaMemcpy(a, ha, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(b, hb, bytes, cudaMemcpyHostToDevice));
  int block = 128, grid = (n + block - 1) / block;
  int wrong = 0;
  cudaEvent_t mid;
  CHECK(cudaEventCreate(&mid));

  for (int t = 0; t < steps; ++t) {
    source<<<grid, block>>>(a, n, t);
    mix<<<grid, block>>>(a, b, n);
    settle<<<grid, block>>>(a, b, n, t);
    step_host(ha, hb, n, t);
    if (t == steps / 2) {
      // An event between launches: everything before it is done when it is.
      CHECK(cudaEventRecord(mid));
      CHECK(cudaEventSynchronize(mid));
      CHECK(cudaMemcpy(got, a, bytes, cudaMemcpyDeviceToHost));
      wrong += differs(got, ha, n);
    }
    if (t == steps / 3) {
      // A failing launch inside the sequence: reported now, then cleared; nothing ran.
      source<<<grid, 2048>>>(a, n, 99);
      cudaError_t e = cudaGetLastError();
      if (e != cudaErrorInvalidConfiguration && e != cudaErrorInvalidValue) {
        printf("failing launch reported %s\n", cudaGetErrorString(e));
        ++wrong;
      }
      if (cudaGetLastError() != cudaSuccess) ++wrong;
    }
    if (t % 5 == 4) {
      // The grid changes in the middle of the sequence.
      int g = t % 10 == 4 ? grid : (grid + 3) / 4;
      stride_add<<<g, block>>>(a, n, (unsigned)t);
      for (int i = 0; i < n; ++i) ha[i] += (unsigned)t;
    }
  }
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(got, a, bytes, cudaMemcpyDeviceToHost));
  wrong += differs(got, ha, n);

  // Managed memory, read by the host after a synchronization.
  unsigned *m;
  CHECK(cudaMallocManaged(&m, bytes));
  for (int i = 0; i < n; ++i) m[i] = (unsigned)i;
  for (int t = 0; t < 8; ++t) stride_add<<<grid, block>>>(m, n, 1u);
  CHECK(cudaDeviceSynchronize());
  for (int i = 0; i < n; ++i) wrong += m[i] != (unsigned)i + 8u;

  // Two streams: the second waits for an event of the first.
  cudaStream_t s1, s2;
  cudaEvent_t done1;
  CHECK(cudaStreamCreate(&s1));
  CHECK(cudaStreamCreate(&s2));
  CHECK(cudaEventCreateWithFlags(&done1, cudaEventDisableTiming));
  for (int t = 0; t < 6; ++t) stride_add<<<grid, block, 0, s1>>>(a, n, 5u);
  CHECK(cudaEventRecord(done1, s1));
  CHECK(cudaStreamWaitEvent(s2, done1, 0));
  for (int t = 0; t < 6; ++t) mix<<<grid, block, 0, s2>>>(a, b, n);
  CHECK(cudaStreamSynchronize(s2));
  for (int i = 0; i < n; ++i) ha[i] += 30u;
  for (int t = 0; t < 6; ++t)
    for (int i = 0; i < n; ++i) hb[i] ^= ha[i] >> 3;
  CHECK(cudaMemcpy(got, b, bytes, cudaMemcpyDeviceToHost));
  wrong += differs(got, hb, n);

  uint64_t sum = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) sum = (sum ^ got[i] ^ m[i]) * 1099511628211ull;
  printf("checksum %016llx\n", (unsigned long long)sum);
  printf("graphs %d x %d: %s (%d wrong)\n", n, steps, wrong ? "FAIL" : "PASS", wrong);
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(m));
  free(ha);
  free(hb);
  free(got);
  return wrong ? 1 : 0;
}
