// A kernel taking a struct by value: not taken yet, the build must name the kernel.
struct Params {
  float *data;
  int n;
};

__global__ void fill(Params p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) p.data[i] = 1.0f;
}

int main() {
  Params p = {nullptr, 0};
  fill<<<1, 32>>>(p);
  return 0;
}
