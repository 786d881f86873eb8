#include <cuda_runtime.h>
#include <cstdio>
int main() { int n = -1; cudaGetDeviceCount(&n); float *p; cudaMalloc(&p, 16); printf("devices %d\n", n); cudaFree(p); return 0; }
