/*
 * latch.cu -- a kernel that spins on a latch in page-locked host memory until the host sets
 * it, after the host queued more work behind it on the same stream (copies from and to
 * page-locked memory, launches on device and managed memory), as NVIDIA's UnifiedMemoryPerf
 * does: on CUDA the queued work waits on the GPU, and nothing the host calls before setting
 * the latch may wait for the stream. Events recorded before the latch and between the queued
 * work are not reached until it is set (`cudaEventQuery` and `cudaStreamQuery` say
 * `cudaErrorNotReady` without waiting), and time the work after. Runs on GPUs only (a simulated device runs a kernel to
 * its end when it is launched, so the latch would never be set).
 * Usage: latch [N [STEPS]]   (default 1048576 40)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void spin(volatile unsigned *latch) {
  while (latch[0] < 1) {
  }
}

__global__ void step(float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    a[i] = a[i] * 0.5f + b[i];
}

int main(int argc, char **argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 1 << 20, steps = argc > 2 ? atoi(argv[2]) : 40;
  if (n < 1 || steps < 0) {
    fprintf(stderr, "usage: latch [N >= 1 [STEPS >= 0]]\n");
    return 2;
  }
  bool ok = true;
  unsigned *latch;
  float *pinned, *back, *d, *managed;
  ok &= cudaMallocHost(&latch, sizeof(unsigned)) == cudaSuccess;
  ok &= cudaMallocHost(&pinned, n * sizeof(float)) == cudaSuccess;
  ok &= cudaMallocHost(&back, n * sizeof(float)) == cudaSuccess;
  ok &= cudaMalloc(&d, n * sizeof(float)) == cudaSuccess;
  ok &= cudaMallocManaged(&managed, n * sizeof(float)) == cudaSuccess;
  for (int i = 0; i < n; ++i) {
    pinned[i] = (float)(i % 97);
    managed[i] = (float)(i % 13);
  }
  cudaStream_t s;
  ok &= cudaStreamCreate(&s) == cudaSuccess;
  cudaEvent_t before, queued, after;
  ok &= cudaEventCreate(&before) == cudaSuccess && cudaEventCreate(&queued) == cudaSuccess;
  ok &= cudaEventCreateWithFlags(&after, cudaEventDisableTiming) == cudaSuccess;
  ok &= cudaEventRecord(before, s) == cudaSuccess;
  *(volatile unsigned *)latch = 0;
  spin<<<1, 1, 0, s>>>(latch);
  ok &= cudaMemcpyAsync(d, pinned, n * sizeof(float), cudaMemcpyHostToDevice, s) == cudaSuccess;
  ok &= cudaEventRecord(queued, s) == cudaSuccess;
  for (int k = 0; k < steps; ++k)
    step<<<(n + 255) / 256, 256, 0, s>>>(d, managed, n);
  ok &= cudaMemcpyAsync(back, d, n * sizeof(float), cudaMemcpyDeviceToHost, s) == cudaSuccess;
  ok &= cudaEventRecord(after, s) == cudaSuccess;
  // The spinning kernel holds the stream: nothing after it is reached, and asking waits not.
  cudaError_t eq = cudaEventQuery(queued), sq = cudaStreamQuery(s);
  if (eq != cudaErrorNotReady || sq != cudaErrorNotReady) {
    fprintf(stderr, "latch: work behind the spinning kernel reported done (event %d, stream %d)\n", eq, sq);
    ok = false;
  }
  float ms = -1;
  ok &= cudaEventElapsedTime(&ms, before, queued) == cudaErrorNotReady;
  ok &= cudaGetLastError() == cudaSuccess;
  // Nothing above may have waited for the stream: the spinning kernel holds it until now.
  *(volatile unsigned *)latch = 1;
  ok &= cudaEventSynchronize(after) == cudaSuccess;
  ok &= cudaStreamSynchronize(s) == cudaSuccess;
  ok &= cudaEventQuery(queued) == cudaSuccess && cudaStreamQuery(s) == cudaSuccess;
  ok &= cudaEventElapsedTime(&ms, before, queued) == cudaSuccess && ms >= 0;
  ok &= cudaEventElapsedTime(&ms, before, after) == cudaErrorInvalidResourceHandle;
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) {
    float x = (float)(i % 97);
    for (int k = 0; k < steps; ++k)
      x = x * 0.5f + (float)(i % 13);
    ok &= back[i] == x;
    uint32_t bits;
    memcpy(&bits, &back[i], 4);
    h = (h ^ bits) * 1099511628211ull;
  }
  printf("checksum %016llx\n%s\n", (unsigned long long)h, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
