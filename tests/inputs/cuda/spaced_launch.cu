// Launches written `<< <...>> >`, as nvcc takes them, beside templates that close `> >`.
#include <cstdio>
#include <vector>
#include "spaced_launch.h"

template <typename T> struct Box { T v; };

__global__ void iota(int *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = i;
}

int main() {
  const int n = 100;
  std::vector<Box<std::vector<int> > > boxes(2);
  int *a;
  cudaMalloc(&a, n * sizeof(int));
  iota<< <(n + SPACED_BLOCK - 1) / SPACED_BLOCK, SPACED_BLOCK>> >(a, n);
  int h[n];
  cudaMemcpy(h, a, sizeof h, cudaMemcpyDeviceToHost);
  int wrong = 0;
  for (int i = 0; i < n; ++i) wrong += h[i] != i;
  printf("%s (%d wrong, %zu boxes, line %d of %s)\n", wrong ? "FAIL" : "PASS", wrong, boxes.size(), __LINE__, __FILE__);
  return wrong != 0;
}
