// A texture object in a kernel: not taken yet, the build must say so at the call's line.
#include <cuda_runtime.h>

__global__ void fetch(cudaTextureObject_t t, float *out) {
  out[threadIdx.x] = tex1Dfetch<float>(t, (int)threadIdx.x);
}

int main() {
  fetch<<<1, 4>>>(0, nullptr);
  return 0;
}
