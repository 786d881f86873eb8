// A device-side assert that fails on a GPU leaves CUDA's context unusable: the
// synchronization that meets it and every call after it answer cudaErrorAssert, and the
// program goes on to say so (NVIDIA's simpleAssert checks exactly this). Run on the stand-in
// driver with FAKECUDA_ASSERT_AT=2 (its second launch stands for the failing one).
#include <cassert>
#include <cstdio>

__global__ void fill(int *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  assert(i < n);
  out[i] = i;
}

#define EXPECT(c)                                              \
  do {                                                         \
    if (!(c)) {                                                \
      printf("FAIL line %d: %s\n", __LINE__, #c);              \
      return 1;                                                \
    }                                                          \
  } while (0)

int main() {
  int *d, h[64] = {0};
  EXPECT(cudaMalloc(&d, sizeof h) == cudaSuccess);
  fill<<<2, 32>>>(d, 64);
  EXPECT(cudaDeviceSynchronize() == cudaSuccess);
  fill<<<2, 32>>>(d, 60);
  EXPECT(cudaDeviceSynchronize() == cudaErrorAssert);
  // Sticky: reading the error does not clear it, and nothing works after it.
  EXPECT(cudaGetLastError() == cudaErrorAssert);
  EXPECT(cudaGetLastError() == cudaErrorAssert);
  EXPECT(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) == cudaErrorAssert);
  int *e = nullptr;
  EXPECT(cudaMalloc(&e, 16) == cudaErrorAssert);
  EXPECT(cudaFree(d) == cudaErrorAssert);
  printf("assert seen: %s\n", cudaGetErrorString(cudaErrorAssert));
  printf("PASS\n");
  return 0;
}
