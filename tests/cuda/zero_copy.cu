/*
 * zero_copy.cu -- page-locked host memory that kernels read and write in place, as CUDA maps
 * it under unified addressing: a flag a kernel raises while the host polls it without
 * synchronizing; results a grid-stride kernel writes straight into `cudaMallocHost` memory;
 * a counter in `cudaHostAlloc(..., cudaHostAllocPortable)` memory that every block adds to
 * atomically; a `cudaHostRegister`ed range read in place; memory freed and allocated again.
 * Checked against the host exactly.
 * Usage: zero_copy [N [ROUNDS]]   (default 5000 3)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void raise_flag(volatile int *flag, int value) { *flag = value; }

__global__ void squares(const int *in, long long *out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    out[i] = (long long)in[i] * in[i] - i;
}

__global__ void count_odd(const int *in, unsigned *counter, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && (in[i] & 1))
    atomicAdd(counter, 1u);
}

static uint64_t fnv(uint64_t h, uint64_t v) { return (h ^ v) * 1099511628211ull; }

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 5000, rounds = argc > 2 ? atoi(argv[2]) : 3;
  if (n < 1 || rounds < 1) {
    fprintf(stderr, "usage: zero_copy [N >= 1 [ROUNDS >= 1]]\n");
    return 2;
  }
  bool ok = true;
  uint64_t h = 1469598103934665603ull;

  // A flag the host polls: no synchronization until it is seen.
  int *flag;
  ok &= cudaMallocHost(&flag, sizeof(int)) == cudaSuccess;
  *(volatile int *)flag = 0;
  raise_flag<<<1, 1>>>(flag, 42);
  while (*(volatile int *)flag != 42) {
  }
  ok &= cudaDeviceSynchronize() == cudaSuccess;

  int *in;
  long long *out;
  unsigned *counter;
  ok &= cudaMallocHost(&in, n * sizeof(int)) == cudaSuccess;
  ok &= cudaMallocHost(&out, n * sizeof(long long)) == cudaSuccess;
  ok &= cudaHostAlloc(&counter, sizeof(unsigned), cudaHostAllocPortable) == cudaSuccess;
  cudaPointerAttributes attr;
  ok &= cudaPointerGetAttributes(&attr, out) == cudaSuccess && attr.type == cudaMemoryTypeHost;
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < n; ++i)
      in[i] = (i * 7919 + r * 104729) % 100003 - 50000;
    *counter = 0;
    squares<<<(n + 255) / 256 / 2 + 1, 256>>>(in, out, n);
    count_odd<<<(n + 127) / 128, 128>>>(in, counter, n);
    ok &= cudaDeviceSynchronize() == cudaSuccess;
    unsigned odd = 0;
    for (int i = 0; i < n; ++i) {
      ok &= out[i] == (long long)in[i] * in[i] - i;
      odd += in[i] & 1;
      h = fnv(h, (uint64_t)out[i]);
    }
    ok &= *counter == odd;
    h = fnv(h, *counter);
  }

  // A registered range read in place, the results into device memory.
  std::vector<int> plain(n);
  for (int i = 0; i < n; ++i)
    plain[i] = n - 3 * i;
  ok &= cudaHostRegister(plain.data(), n * sizeof(int), cudaHostRegisterDefault) == cudaSuccess;
  long long *dout;
  ok &= cudaMalloc(&dout, n * sizeof(long long)) == cudaSuccess;
  squares<<<4, 64>>>(plain.data(), dout, n);
  std::vector<long long> back(n);
  ok &= cudaMemcpy(back.data(), dout, n * sizeof(long long), cudaMemcpyDeviceToHost) == cudaSuccess;
  for (int i = 0; i < n; ++i) {
    ok &= back[i] == (long long)plain[i] * plain[i] - i;
    h = fnv(h, (uint64_t)back[i]);
  }
  ok &= cudaHostUnregister(plain.data()) == cudaSuccess;

  // Freed and allocated again: the new memory is reached in place too.
  ok &= cudaFreeHost(out) == cudaSuccess;
  ok &= cudaMallocHost(&out, n * sizeof(long long)) == cudaSuccess;
  squares<<<(n + 511) / 512, 512>>>(in, out, n);
  ok &= cudaDeviceSynchronize() == cudaSuccess;
  for (int i = 0; i < n; ++i) {
    ok &= out[i] == (long long)in[i] * in[i] - i;
    h = fnv(h, (uint64_t)out[i]);
  }

  ok &= cudaFree(dout) == cudaSuccess;
  ok &= cudaFreeHost(in) == cudaSuccess && cudaFreeHost(out) == cudaSuccess;
  ok &= cudaFreeHost(counter) == cudaSuccess && cudaFreeHost(flag) == cudaSuccess;
  printf("checksum %016llx\n%s\n", (unsigned long long)h, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
