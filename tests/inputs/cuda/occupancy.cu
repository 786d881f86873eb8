// Occupancy as the program is told it: blocks of 128 threads of a kernel with 48 KiB of
// dynamic shared memory per block, and of 96 threads with none.
#include <cstdio>

__global__ void fill(float *a, int n) {
  extern __shared__ float tile[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = (float)i;
  __syncthreads();
  if (i < n) a[i] = tile[blockDim.x - 1 - threadIdx.x];
}

int main() {
  int wide = 0, narrow = 0;
  cudaError_t e1 = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&wide, fill, 128, 48 * 1024);
  cudaError_t e2 = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&narrow, fill, 96, 0);
  printf("occupancy %d %d (%s, %s)\n", wide, narrow, cudaGetErrorString(e1), cudaGetErrorString(e2));
  return 0;
}
