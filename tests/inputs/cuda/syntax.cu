// A kernel with a syntax error: the build must stop at this file's line, as clang says it.
__global__ void scale(float *a, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = a[i] * s
}
