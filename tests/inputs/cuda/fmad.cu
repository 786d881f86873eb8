// `a * b + c`: one fused multiply-add by default (nvcc's --fmad=true, clang's CUDA default),
// a multiplication and an addition each rounded with --fmad=false.
__global__ void axpy(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] * b[i] + c[i];
}

// A product stored alone: `mul.f32` by default (ptxas may fuse it, as nvcc's PTX lets it),
// `mul.rn.f32` with --fmad=false.
__global__ void scale(const float *a, float *o, float s) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  o[i] = a[i] * s;
}

// HeCBench layout's loop: 4096 strided loads summed, unrolled 32 times as nvcc unrolls it.
__global__ void columns(const int *__restrict__ a, int *__restrict__ out) {
  unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
  int r = 0;
  for (int i = 0; i < 4096; i++) r += a[i * 4096 + g];
  out[g] = r;
}
int main() { return 0; }
