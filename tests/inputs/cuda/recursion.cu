// A recursive device function: cannot be inlined into the kernel, the build must say so.
__device__ int fact(int n) { return n <= 1 ? 1 : n * fact(n - 1); }

__global__ void facts(int *out) { out[threadIdx.x] = fact(threadIdx.x); }

int main() {
  facts<<<1, 8>>>(nullptr);
  return 0;
}
