/*
 * device_heap.cu -- the device heap: one kernel `malloc`s a row per thread and keeps the
 * pointers in a table in device memory, a second reads the rows through the table, a third
 * `free`s them; per-thread scratch `malloc`ed and `free`d in one kernel; the heap's size set
 * with cudaDeviceSetLimit. Pointers from a GPU's heap are valid on that GPU only: these
 * kernels run whole, on one device. Checked against the host exactly.
 * Usage: device_heap [N [LEN]]   (default 3000 7)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void make(int **table, int n, int len) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  int *row = (int *)malloc(len * sizeof(int));
  if (row)
    for (int j = 0; j < len; ++j)
      row[j] = i * 3 + j;
  table[i] = row;
}

__global__ void use(int *const *table, long long *out, int n, int len) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  long long s = -1;
  if (table[i]) {
    s = 0;
    for (int j = 0; j < len; ++j)
      s += table[i][j] * (long long)(j + 1);
  }
  out[i] = s;
}

__global__ void release(int **table, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    free(table[i]);
}

// Scratch that lives for one thread: written, summed in reverse, freed.
__global__ void scratch(long long *out, int n, int len) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  volatile long long *tmp = (long long *)malloc(len * sizeof(long long));
  if (!tmp) {
    out[i] = -1;
    return;
  }
  for (int j = 0; j < len; ++j)
    tmp[j] = (long long)i * i - j;
  long long s = 0;
  for (int j = len - 1; j >= 0; --j)
    s = s * 3 + tmp[j];
  out[i] += s;
  free((void *)tmp);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 3000, len = argc > 2 ? atoi(argv[2]) : 7;
  if (n < 1 || len < 1 || len > 64) {
    fprintf(stderr, "usage: device_heap [N >= 1 [1 <= LEN <= 64]]\n");
    return 2;
  }
  bool ok = cudaDeviceSetLimit(cudaLimitMallocHeapSize, 64 << 20) == cudaSuccess;
  size_t heap = 0;
  ok &= cudaDeviceGetLimit(&heap, cudaLimitMallocHeapSize) == cudaSuccess && heap >= (64u << 20);
  int **table;
  long long *out;
  ok &= cudaMalloc(&table, n * sizeof(int *)) == cudaSuccess;
  ok &= cudaMalloc(&out, n * sizeof(long long)) == cudaSuccess;
  int blocks = (n + 127) / 128;
  make<<<blocks, 128>>>(table, n, len);
  use<<<blocks, 128>>>(table, out, n, len);
  release<<<blocks, 128>>>(table, n);
  scratch<<<blocks, 128>>>(out, n, len);
  ok &= cudaGetLastError() == cudaSuccess;
  std::vector<long long> h(n);
  ok &= cudaMemcpy(h.data(), out, n * sizeof(long long), cudaMemcpyDeviceToHost) == cudaSuccess;
  uint64_t c = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) {
    long long e = 0, s = 0;
    for (int j = 0; j < len; ++j)
      e += (long long)(i * 3 + j) * (j + 1);
    for (int j = len - 1; j >= 0; --j)
      s = s * 3 + ((long long)i * i - j);
    ok &= h[i] == e + s;
    c = (c ^ (uint64_t)h[i]) * 1099511628211ull;
  }
  ok &= cudaFree(table) == cudaSuccess && cudaFree(out) == cudaSuccess;
  printf("checksum %016llx\n%s\n", (unsigned long long)c, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
