// The host and a kernel update managed memory. `race`: the host updates what the kernel
// updates without waiting for it (NVIDIA's systemWideAtomics does), which a GPU without
// concurrent managed access forbids and which must never lose an update silently.
// `apart`: the host writes another managed array meanwhile, then waits; `polled`: the host
// waits by polling `cudaStreamQuery`. Both are right, and print the sums.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

__global__ void add(int *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd_system(&a[i % 4], 1);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "race";
  int n = argc > 2 ? atoi(argv[2]) : 1000;
  int *a, *b;
  cudaMallocManaged(&a, 4 * sizeof(int));
  cudaMallocManaged(&b, 4 * sizeof(int));
  for (int i = 0; i < 4; i++) a[i] = b[i] = 0;
  add<<<(n + 127) / 128, 128>>>(a, n);
  int *host = strcmp(mode, "race") == 0 ? a : b;
  if (strcmp(mode, "polled") == 0) {
    while (cudaStreamQuery(0) != cudaSuccess) {
    }
    host = a;
  }
  for (int i = 0; i < 4; i++) host[i] += 1000;
  cudaDeviceSynchronize();
  printf("%d %d %d %d | %d %d %d %d\n", a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]);
  return 0;
}
