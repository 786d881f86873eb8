/*
 * mapped.cu -- zero-copy host memory, as programs use it: `cudaHostAlloc(...,
 * cudaHostAllocMapped)` and `cudaHostGetDevicePointer`, the host rewriting the inputs between
 * launches and reading the outputs after each synchronization; page-locked memory from
 * `cudaMallocHost` and a `cudaHostRegister`ed range handed to a kernel directly (unified
 * addressing); and the error for memory CUDA never saw. Checked against the host exactly.
 * Usage: mapped [N [ROUNDS]]   (default 1000 3)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void axpb(const int *in, int *out, int a, int b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = a * in[i] + b;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000, rounds = argc > 2 ? atoi(argv[2]) : 3;
  if (n < 1 || rounds < 1) {
    fprintf(stderr, "usage: mapped [N >= 1 [ROUNDS >= 1]]\n");
    return 2;
  }
  bool ok = true;
  uint64_t h = 1469598103934665603ull;
  int *hin, *hout, *din, *dout;
  ok &= cudaHostAlloc(&hin, n * sizeof(int), cudaHostAllocMapped) == cudaSuccess;
  ok &= cudaHostAlloc(&hout, n * sizeof(int), cudaHostAllocMapped) == cudaSuccess;
  ok &= cudaHostGetDevicePointer(&din, hin, 0) == cudaSuccess;
  ok &= cudaHostGetDevicePointer(&dout, hout, 0) == cudaSuccess;
  int blocks = (n + 127) / 128;
  for (int r = 0; r < rounds; ++r) {
    for (int i = 0; i < n; ++i)
      hin[i] = i * (r + 1) - 7;
    axpb<<<blocks, 128>>>(din, dout, 3, r, n);
    ok &= cudaDeviceSynchronize() == cudaSuccess;
    for (int i = 0; i < n; ++i) {
      ok &= hout[i] == 3 * (i * (r + 1) - 7) + r;
      h = (h ^ (uint32_t)hout[i]) * 1099511628211ull;
    }
  }
  // Page-locked and registered memory given to a kernel as they are.
  int *pinned;
  ok &= cudaMallocHost(&pinned, n * sizeof(int)) == cudaSuccess;
  std::vector<int> plain(n + 1024);
  ok &= cudaHostRegister(plain.data(), n * sizeof(int), cudaHostRegisterMapped) == cudaSuccess;
  int *dplain;
  ok &= cudaHostGetDevicePointer(&dplain, plain.data(), 0) == cudaSuccess;
  axpb<<<blocks, 128>>>(hout, pinned, -1, 5, n);
  axpb<<<blocks, 128>>>(pinned, dplain, 2, 0, n);
  ok &= cudaDeviceSynchronize() == cudaSuccess;
  for (int i = 0; i < n; ++i) {
    ok &= pinned[i] == 5 - hout[i] && plain[i] == 2 * pinned[i];
    h = (h ^ (uint32_t)plain[i]) * 1099511628211ull;
  }
  // Memory CUDA never saw has no device address.
  int *none = (int *)malloc(64), *d = nullptr;
  ok &= cudaHostGetDevicePointer(&d, none, 0) == cudaErrorInvalidValue;
  cudaGetLastError();
  free(none);
  ok &= cudaHostUnregister(plain.data()) == cudaSuccess;
  ok &= cudaFreeHost(hin) == cudaSuccess && cudaFreeHost(hout) == cudaSuccess && cudaFreeHost(pinned) == cudaSuccess;
  printf("checksum %016llx\n%s\n", (unsigned long long)h, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
