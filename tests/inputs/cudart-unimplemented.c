/* A CUDA runtime function hpvm-mgpu does not implement (graphics interop): the build must fail
 * at link time, naming it and where the program calls it, rather than run with a silent no-op. */
#include <cuda_runtime_api.h>
#include <stdio.h>

int main(void) {
  cudaGraphicsResource_t resource = 0;
  cudaError_t e = cudaGraphicsMapResources(1, &resource, 0);
  printf("%d\n", (int)e);
  return 0;
}
