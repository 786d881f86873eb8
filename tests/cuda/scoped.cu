/*
 * scoped.cu -- atomics at block and system scope (`atomicMax_system`, `atomicMin_block`...) on
 * signed and unsigned operands of 32 and 64 bits: clang gives both signednesses one
 * intrinsic, which the build must tell apart (an unsigned maximum of 0xfc000000 is not the
 * signed one, 0x7c000000). Checked against the host exactly.
 * Usage: scoped [BLOCKS]   (default 5)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>

__global__ void extremes(int *a, unsigned *b, long long *c, unsigned long long *d) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  atomicMax_system(a, t - 40);
  atomicMin_system(a + 1, t - 40);
  atomicMax_block(a + 2, t - 40);
  atomicMax_system(b, (unsigned)t * 0x4000000u);
  atomicMin_block(b + 1, 0x80000000u + t);
  atomicMax_block(b + 2, 0x7ffffff0u + t);
  atomicMax_block(c, (long long)t - 40);
  atomicMin_system(c + 1, (long long)t - 40);
  atomicMax_system(d, 0x8000000000000000ull + t);
  atomicMin_block(d + 1, 0x8000000000000000ull - t);
}

int main(int argc, char **argv) {
  int blocks = argc > 1 ? atoi(argv[1]) : 5;
  if (blocks < 1) {
    fprintf(stderr, "usage: scoped [BLOCKS >= 1]\n");
    return 2;
  }
  int *a;
  unsigned *b;
  long long *c;
  unsigned long long *d;
  cudaMallocManaged(&a, 3 * sizeof(int));
  cudaMallocManaged(&b, 3 * sizeof(unsigned));
  cudaMallocManaged(&c, 2 * sizeof(long long));
  cudaMallocManaged(&d, 2 * sizeof(unsigned long long));
  a[0] = -1000, a[1] = 1000, a[2] = -1000;
  b[0] = 0, b[1] = 0xffffffffu, b[2] = 0;
  c[0] = -1000, c[1] = 1000;
  d[0] = 0, d[1] = ~0ull;
  extremes<<<blocks, 64>>>(a, b, c, d);
  cudaDeviceSynchronize();
  long long last = blocks * 64 - 1;
  unsigned maxb = 0;
  for (long long t = 0; t <= last; ++t)
    maxb = maxb > (unsigned)t * 0x4000000u ? maxb : (unsigned)t * 0x4000000u;
  bool ok = a[0] == last - 40 && a[1] == -40 && a[2] == last - 40 && b[0] == maxb && b[1] == 0x80000000u &&
            b[2] == 0x7ffffff0u + (unsigned)last && c[0] == last - 40 && c[1] == -40 &&
            d[0] == 0x8000000000000000ull + last && d[1] == 0x8000000000000000ull - last;
  uint64_t h = 1469598103934665603ull;
  uint64_t all[] = {(uint64_t)a[0], (uint64_t)a[1], (uint64_t)a[2], b[0], b[1], b[2], (uint64_t)c[0], (uint64_t)c[1], d[0], d[1]};
  for (uint64_t v : all)
    h = (h ^ v) * 1099511628211ull;
  printf("checksum %016llx\n%s\n", (unsigned long long)h, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
