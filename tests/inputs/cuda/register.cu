// `register` under -std=c++17: gcc (nvcc's host compiler) warns, and so does hpvm-mgpu.
#include <cstdio>
__global__ void k(int *a) { register int x = threadIdx.x; a[x] = x; }
int main() { register int n = 32; int *a; cudaMalloc(&a, 4 * n); k<<<1, n>>>(a); int h[32]; cudaMemcpy(h, a, sizeof h, cudaMemcpyDeviceToHost); printf("%d\n", h[31]); }
