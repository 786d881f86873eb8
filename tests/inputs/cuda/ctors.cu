// Constructors and destructors of every kind run, in order, whichever linker links the
// program: a prioritized constructor, a C++ static object, a destructor attribute. (LLVM's
// linker ignores the legacy `.ctors` sections; a program whose constructors do not run has no
// kernel registered.)
#include <cstdio>
#include <cuda_runtime.h>

static int order[4];
static int count;

__attribute__((constructor(101))) static void first() { order[count++] = 1; }

struct Later {
  Later() { order[count++] = 2; }
  ~Later() { printf("static destructor ran\n"); }
};
static Later later;

__attribute__((destructor)) static void last() { printf("destructor attribute ran\n"); }

__global__ void iota(int *x) { x[threadIdx.x] = threadIdx.x; }

int main() {
  int *d;
  int h[32];
  if (cudaMalloc(&d, sizeof h) != cudaSuccess) return 1;
  iota<<<1, 32>>>(d);
  if (cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) != cudaSuccess) return 1;
  printf("constructors %d %d of %d, kernel %d\n", order[0], order[1], count, h[31]);
  cudaFree(d);
  return 0;
}
