/*
 * copies.cu -- cudaMemcpy as programs use it, between kernels that split: whole buffers,
 * pieces at odd offsets and lengths into a buffer that devices hold in parts, a read-back of
 * a range some of which the host already holds (a read before it) and some of which only a
 * device holds, a copy between two device buffers, and copies of a buffer no kernel wrote.
 * Everything is checked against the same steps on the host.
 * Usage: copies [N [ROUNDS]]   (defaults 10000 4)
 * Prints PASS or FAIL and `checksum <hex>` of the results.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

__global__ void bump(int *x, int n, int by) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 3 + by + i % 5;
}

static uint64_t fnv(const int *v, int n, uint64_t sum) {
  for (int i = 0; i < n; ++i) sum = (sum ^ (uint32_t)v[i]) * 1099511628211ull;
  return sum;
}

static void bump_host(int *x, int n, int by) {
  for (int i = 0; i < n; ++i) x[i] = x[i] * 3 + by + i % 5;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 10000;
  int rounds = argc > 2 ? atoi(argv[2]) : 4;
  if (n < 8 || rounds < 1) {
    fprintf(stderr, "usage: copies [N >= 8 [ROUNDS >= 1]]\n");
    return 2;
  }
  size_t bytes = (size_t)n * sizeof(int);
  int *want = (int *)malloc(bytes), *got = (int *)malloc(bytes), *piece = (int *)malloc(bytes);
  int *untouched = (int *)malloc(bytes);
  for (int i = 0; i < n; ++i) want[i] = i * 7 % 101;
  int *dx, *dy, *dz;
  if (cudaMalloc(&dx, bytes) || cudaMalloc(&dy, bytes) || cudaMalloc(&dz, bytes)) return 1;
  if (cudaMemcpy(dx, want, bytes, cudaMemcpyHostToDevice)) return 1;
  // A buffer no kernel writes: what goes in comes back, from wherever it is held.
  for (int i = 0; i < n; ++i) untouched[i] = -i;
  if (cudaMemcpy(dz, untouched, bytes, cudaMemcpyHostToDevice)) return 1;
  int block = 64, grid = (n + block - 1) / block;
  int bad = 0;
  for (int r = 0; r < rounds; ++r) {
    bump<<<grid, block>>>(dx, n, r);
    bump_host(want, n, r);
    // A piece at an odd offset and length, over what the devices hold in parts.
    int at = (r * 37 + 3) % (n / 2), len = n / 3 + r;
    for (int i = 0; i < len; ++i) piece[i] = 1000 * r - i;
    if (cudaMemcpy(dx + at, piece, (size_t)len * sizeof(int), cudaMemcpyHostToDevice)) return 1;
    memcpy(want + at, piece, (size_t)len * sizeof(int));
    bump<<<grid, block>>>(dx, n, r + 1);
    bump_host(want, n, r + 1);
    // The host reads a middle range first, then a range that overlaps it and runs past it.
    int lo = n / 4 + r, mid = n / 2;
    if (cudaMemcpy(got + lo, dx + lo, (size_t)(mid - lo) * sizeof(int), cudaMemcpyDeviceToHost)) return 1;
    if (cudaMemcpy(got + 1, dx + 1, (size_t)(n - 2) * sizeof(int), cudaMemcpyDeviceToHost)) return 1;
    for (int i = 1; i < n - 1; ++i) bad += got[i] != want[i];
    // Device to device, then a kernel on the copy.
    if (cudaMemcpy(dy, dx, bytes, cudaMemcpyDeviceToDevice)) return 1;
    bump<<<grid, block>>>(dy, n, 7);
    if (cudaMemcpy(got, dy, bytes, cudaMemcpyDeviceToHost)) return 1;
    memcpy(piece, want, bytes);
    bump_host(piece, n, 7);
    for (int i = 0; i < n; ++i) bad += got[i] != piece[i];
  }
  if (cudaMemcpy(got, dz, bytes, cudaMemcpyDeviceToHost)) return 1;
  for (int i = 0; i < n; ++i) bad += got[i] != untouched[i];
  if (cudaMemcpy(got, dx, bytes, cudaMemcpyDeviceToHost)) return 1;
  for (int i = 0; i < n; ++i) bad += got[i] != want[i];
  printf("%s (%d mismatches)\n", bad ? "FAIL" : "PASS", bad);
  printf("checksum %016llx\n", (unsigned long long)fnv(got, n, 1469598103934665603ull));
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(dz);
  return bad != 0;
}
