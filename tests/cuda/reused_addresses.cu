/*
 * reused_addresses.cu -- page-locked memory freed and device memory allocated at the same
 * address, given to the same kernel: a kernel run on page-locked memory in place, then
 * `cudaFreeHost`, then `cudaMalloc` of the same size (the allocator hands the address out
 * again), and the same kernel on the device memory, whose result another kernel reads.
 * NVIDIA's UnifiedMemoryPerf does this (its zero-copy run, then its pageable one): a launch
 * must not run on what it knew of the address before. Checked against the host exactly.
 * Usage: reused_addresses [N [ROUNDS]]   (default 4096 6)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void bump(float *p, int n, float by) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] += by;
}

__global__ void twice(float *out, const float *in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = 2.0f * in[i];
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4096, rounds = argc > 2 ? atoi(argv[2]) : 6;
  if (n < 1 || rounds < 1) {
    fprintf(stderr, "usage: reused_addresses [N >= 1 [ROUNDS >= 1]]\n");
    return 2;
  }
  size_t size = (size_t)n * sizeof(float);
  float *src = (float *)malloc(size), *back = (float *)malloc(size), *out;
  cudaMalloc(&out, size);
  bool ok = true;
  uint64_t h = 1469598103934665603ull;
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; i < n; i++)
      src[i] = (float)((i * 31 + r) % 1000);
    float *pinned;
    cudaMallocHost(&pinned, size);
    memcpy(pinned, src, size);
    bump<<<(n + 255) / 256, 256>>>(pinned, n, 1.0f);
    cudaDeviceSynchronize();
    for (int i = 0; i < n; i++)
      ok &= pinned[i] == src[i] + 1.0f;
    cudaFreeHost(pinned);
    float *d;
    cudaMalloc(&d, size);
    cudaMemcpy(d, src, size, cudaMemcpyHostToDevice);
    bump<<<(n + 255) / 256, 256>>>(d, n, 3.0f);
    twice<<<(n + 255) / 256, 256>>>(out, d, n);
    cudaMemcpy(back, out, size, cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; i++) {
      if (back[i] != 2.0f * (src[i] + 3.0f)) {
        if (ok)
          fprintf(stderr, "round %d: out[%d] = %g, want %g\n", r, i, back[i], 2.0f * (src[i] + 3.0f));
        ok = false;
      }
      uint32_t bits;
      memcpy(&bits, &back[i], 4);
      h = (h ^ bits) * 1099511628211ull;
    }
    cudaFree(d);
  }
  ok &= cudaGetLastError() == cudaSuccess;
  printf("checksum %016llx\n%s\n", (unsigned long long)h, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
