// A recursive device function that writes memory: it cannot be inlined into the kernel, and
// the build must say so (recursion over values alone is a call both backends make).
__device__ void fill(int *p, int n) { if (n > 0) { p[n - 1] = n; fill(p, n - 1); } }

__global__ void fills(int *out) { fill(out + 8 * threadIdx.x, 8); }

int main() {
  fills<<<1, 8>>>(nullptr);
  return 0;
}
