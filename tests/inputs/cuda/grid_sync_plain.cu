// A grid's barrier in a kernel launched the ordinary way (`<<<...>>>`), not cooperatively:
// CUDA's header traps there, as a GPU would; on simulated devices the run stops at this line.
#include <cooperative_groups.h>
#include <cstdio>
namespace cg = cooperative_groups;

__global__ void twice(int *a) {
  a[blockIdx.x] = 1;
  cg::this_grid().sync();
  a[blockIdx.x] += a[(blockIdx.x + 1) % gridDim.x];
}

int main() {
  int *a;
  cudaMalloc(&a, 4 * sizeof(int));
  twice<<<4, 32>>>(a);
  cudaError_t e = cudaDeviceSynchronize();
  printf("%s\n", cudaGetErrorString(e));
  return 0;
}
