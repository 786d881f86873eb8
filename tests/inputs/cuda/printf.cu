// printf in a kernel: not taken yet, the build must say so at the call's line.
#include <cstdio>

__global__ void hello(int *out) {
  printf("thread %d\n", (int)threadIdx.x);
  out[threadIdx.x] = 1;
}

int main() {
  hello<<<1, 4>>>(nullptr);
  return 0;
}
