// `a * b + c`: one fused multiply-add by default (nvcc's --fmad=true, clang's CUDA default),
// a multiplication and an addition each rounded with --fmad=false.
__global__ void axpy(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] * b[i] + c[i];
}
int main() { return 0; }
