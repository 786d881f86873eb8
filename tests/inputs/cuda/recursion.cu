// A recursive device function that asks where it runs (its thread's index): it cannot be
// inlined into the kernel, and a call cannot ask that, so the build must say so. (Recursion
// that only computes and touches memory is a call both backends make: tests/cuda/recursion.cu.)
__device__ void fill(int *p, int n) { if (n > 0) { p[n - 1] = n + threadIdx.x; fill(p, n - 1); } }

__global__ void fills(int *out) { fill(out + 8 * threadIdx.x, 8); }

int main() {
  fills<<<1, 8>>>(nullptr);
  return 0;
}
