// A pointer inside a struct passed by value, written at a data-dependent index: clang names
// the struct's pieces `out.0`, ...; every reason names the parameter as the source does.
struct Out {
  float *p;
  int stride;
};

__global__ void scatter(Out out, const int *idx, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out.p[idx[i] * out.stride] = i;
}

int main() { return 0; }
