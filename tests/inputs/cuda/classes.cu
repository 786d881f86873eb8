// A class whose constructor and destructor are defined out of line in the .cu file, as
// applications write their simulation objects: clang names the complete-object constructor
// as an alias of the base-object one, and its host calls (cudaMalloc) must stay out of the
// GPU's code.
#include <cstdio>

struct Field {
  float *data;
  int n;
  Field(int n);
  ~Field();
};

__global__ void ramp(float *p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] = 0.5f * i;
}

Field::Field(int n) : n(n) { cudaMalloc(&data, n * sizeof(float)); }
Field::~Field() { cudaFree(data); }

int main() {
  Field f(1000);
  ramp<<<8, 128>>>(f.data, f.n);
  float last = 0;
  cudaMemcpy(&last, f.data + 999, sizeof(float), cudaMemcpyDeviceToHost);
  printf("%s\n", last == 499.5f ? "PASS" : "FAIL");
  return last == 499.5f ? 0 : 1;
}
