/*
 * async_copies.cu -- cudaMemcpyAsync from pageable memory as programs use it: one host
 * buffer refilled and copied again at once (CUDA lets a program reuse pageable memory as
 * soon as the call returns), small copies at odd offsets and lengths into a buffer a kernel
 * just read (the copy must wait for it), on the default stream and on a stream of the
 * program's, each stream's kernels reading what its own copies brought. Checked against the
 * same steps on the host.
 * Usage: async_copies [N [ROUNDS]]   (defaults 4096 6)
 * Prints PASS or FAIL and `checksum <hex>` of the results.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void accumulate(const int *in, int *acc, int n, int round) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) acc[i] = acc[i] * 7 + in[i] + round;
}

static void accumulate_host(const int *in, int *acc, int n, int round) {
  for (int i = 0; i < n; ++i) acc[i] = acc[i] * 7 + in[i] + round;
}

static uint64_t fnv(const int *v, int n, uint64_t sum) {
  for (int i = 0; i < n; ++i) sum = (sum ^ (uint32_t)v[i]) * 1099511628211ull;
  return sum;
}

#define CHECK(call)                                                                              \
  do {                                                                                           \
    cudaError_t e_ = (call);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));                \
      return 1;                                                                                  \
    }                                                                                            \
  } while (0)

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4096;
  int rounds = argc > 2 ? atoi(argv[2]) : 6;
  if (n < 1 || rounds < 1) {
    fprintf(stderr, "usage: async_copies [N >= 1 [ROUNDS >= 1]]\n");
    return 2;
  }
  size_t bytes = (size_t)n * sizeof(int);
  int *h = (int *)malloc(bytes);
  // Per stream: what its device input and accumulator should hold.
  int *in_ref[2], *acc_ref[2], *d_in[2], *d_acc[2];
  cudaStream_t s[2] = {0, 0};
  CHECK(cudaStreamCreate(&s[1]));
  for (int k = 0; k < 2; ++k) {
    in_ref[k] = (int *)calloc(n, sizeof(int));
    acc_ref[k] = (int *)calloc(n, sizeof(int));
    CHECK(cudaMalloc(&d_in[k], bytes));
    CHECK(cudaMalloc(&d_acc[k], bytes));
    CHECK(cudaMemset(d_in[k], 0, bytes));
    CHECK(cudaMemset(d_acc[k], 0, bytes));
  }
  int threads = 128, blocks = (n + threads - 1) / threads;
  for (int r = 0; r < rounds; ++r) {
    for (int k = 0; k < 2; ++k) {
      // The whole input, from the one host buffer, which is overwritten at once.
      for (int i = 0; i < n; ++i) h[i] = i * 31 + r * 1000 + k;
      CHECK(cudaMemcpyAsync(d_in[k], h, bytes, cudaMemcpyHostToDevice, s[k]));
      for (int i = 0; i < n; ++i) in_ref[k][i] = h[i], h[i] = -1;
      accumulate<<<blocks, threads, 0, s[k]>>>(d_in[k], d_acc[k], n, r);
      accumulate_host(in_ref[k], acc_ref[k], n, r);
      // Pieces at odd offsets and lengths into the input the kernel just read.
      for (int piece = 0; piece < 3; ++piece) {
        int at = (r * 7 + piece * 13 + k) % n, len = 1 + (r * 5 + piece * 11) % (n - at);
        for (int i = 0; i < len; ++i) h[i] = -(r * 100 + piece * 10 + k + i);
        CHECK(cudaMemcpyAsync(d_in[k] + at, h, len * sizeof(int), cudaMemcpyHostToDevice, s[k]));
        for (int i = 0; i < len; ++i) in_ref[k][at + i] = h[i], h[i] = 7;
      }
      accumulate<<<blocks, threads, 0, s[k]>>>(d_in[k], d_acc[k], n, r + 50);
      accumulate_host(in_ref[k], acc_ref[k], n, r + 50);
    }
  }
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  int *got = (int *)malloc(bytes);
  int bad = 0;
  uint64_t sum = 1469598103934665603ull;
  for (int k = 0; k < 2; ++k) {
    CHECK(cudaMemcpy(got, d_acc[k], bytes, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i) {
      if (got[i] != acc_ref[k][i] && bad++ < 5) fprintf(stderr, "acc[%d][%d] = %d, expected %d\n", k, i, got[i], acc_ref[k][i]);
    }
    sum = fnv(got, n, sum);
    CHECK(cudaMemcpy(got, d_in[k], bytes, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i) {
      if (got[i] != in_ref[k][i] && bad++ < 5) fprintf(stderr, "in[%d][%d] = %d, expected %d\n", k, i, got[i], in_ref[k][i]);
    }
    sum = fnv(got, n, sum);
  }
  printf("checksum %016llx\n", (unsigned long long)sum);
  printf("%s\n", bad ? "FAIL" : "PASS");
  return bad != 0;
}
