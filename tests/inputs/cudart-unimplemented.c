/* A CUDA runtime function hpvm-mgpu does not implement yet: the build must fail at link time,
 * naming it and where the program calls it, rather than run with a silent no-op. */
#include <cuda_runtime_api.h>
#include <stdio.h>

int main(void) {
  static float a[16], b[16];
  cudaError_t e = cudaMemcpy2D(a, 16, b, 16, 16, 4, cudaMemcpyHostToHost);
  printf("%d\n", (int)e);
  return 0;
}
