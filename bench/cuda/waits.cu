/*
 * waits.cu -- launch, wait, launch, wait: the loop of programs that synchronize after every
 * kernel (PolyBench-ACC's lu and jacobi-1D, per-row eliminations), where each step costs a
 * launch's latency plus a wait's and the runtime's work on both paths shows undiluted.
 * Each step launches two short kernels over a shrinking range (the row k of an elimination),
 * each followed by a wait of the chosen kind.
 * Usage: waits [N [STEPS [device|stream|event]]]   (defaults 4096 2000 device)
 * Prints `kernel_ms` (the loop, between CUDA events), `us_per_wait` and `checksum <hex>`.
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

__global__ void scale_row(float *a, int n, int k) {
  int j = k + 1 + blockIdx.x * blockDim.x + threadIdx.x;
  if (j < n) a[j] = a[j] / (a[k] + 2.0f);
}

__global__ void update_rest(float *a, float *b, int n, int k) {
  int j = k + 1 + blockIdx.x * blockDim.x + threadIdx.x;
  if (j < n) b[j] = b[j] - a[j] * 0.5f;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4096;
  int steps = argc > 2 ? atoi(argv[2]) : 2000;
  const char *mode = argc > 3 ? argv[3] : "device";
  bool by_stream = strcmp(mode, "stream") == 0, by_event = strcmp(mode, "event") == 0;
  if (n < 2 || steps < 1 || (!by_stream && !by_event && strcmp(mode, "device") != 0)) {
    fprintf(stderr, "usage: waits [N >= 2 [STEPS >= 1 [device|stream|event]]]\n");
    return 2;
  }
  size_t bytes = (size_t)n * sizeof(float);
  float *host = (float *)malloc(bytes);
  for (int i = 0; i < n; ++i) host[i] = (float)(i % 89) / 89.0f;
  float *a, *b;
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  CHECK(cudaMemcpy(a, host, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(b, host, bytes, cudaMemcpyHostToDevice));
  cudaEvent_t start, stop, done;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventCreate(&done));
  auto wait = [&]() {
    if (by_stream) {
      CHECK(cudaStreamSynchronize(0));
    } else if (by_event) {
      CHECK(cudaEventRecord(done));
      CHECK(cudaEventSynchronize(done));
    } else {
      CHECK(cudaDeviceSynchronize());
    }
  };
  CHECK(cudaEventRecord(start));
  for (int t = 0; t < steps; ++t) {
    int k = t % (n - 1);
    int grid = (n - k - 1 + 255) / 256;
    scale_row<<<grid, 256>>>(a, n, k);
    wait();
    update_rest<<<grid, 256>>>(a, b, n, k);
    wait();
  }
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  CHECK(cudaGetLastError());
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaMemcpy(host, b, bytes, cudaMemcpyDeviceToHost));
  uint64_t sum = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) {
    uint32_t bits;
    memcpy(&bits, &host[i], sizeof bits);
    sum = (sum ^ bits) * 1099511628211ull;
  }
  printf("kernel_ms %.3f\n", ms);
  printf("us_per_wait %.3f\n", 1000.0 * ms / (2.0 * steps));
  printf("checksum %016llx\n", (unsigned long long)sum);
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  free(host);
  return 0;
}
