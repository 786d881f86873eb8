// Math library calls that nvcc simplifies: `powf(x, 2.0f)` is a multiplication and `pow(x, 1)`
// is `x`; `sin` and `cos` of one angle reduce it once (`sincos`). Other exponents stay `pow`.
// Checked against the host's library; prints PASS or FAIL and a checksum of the results' bits,
// the same for nvcc's build and ours on a GPU.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void squares(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = powf(x[i] - 1.0f, 2.f) + 10.f * powf(x[i], 2.f) + pow(x[i], 1.0f);
}

__global__ void cubes(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = powf(x[i], 3.f);
}

__global__ void rotate(const double* angle, double2* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    double a = angle[i] * 3.0;
    out[i] = make_double2(cos(a), sin(a));
  }
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  float *hx = (float*)malloc(n * sizeof(float)), *hy = (float*)malloc(n * sizeof(float));
  double* ha = (double*)malloc(n * sizeof(double));
  double2* hr = (double2*)malloc(n * sizeof(double2));
  for (int i = 0; i < n; i++) hx[i] = (float)((i * 7919) % 2001) / 100.0f - 10.0f, ha[i] = i * 0.37 - 50.0;
  float *x, *y, *z;
  double* a;
  double2* r;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  cudaMalloc(&z, n * sizeof(float));
  cudaMalloc(&a, n * sizeof(double));
  cudaMalloc(&r, n * sizeof(double2));
  cudaMemcpy(x, hx, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(a, ha, n * sizeof(double), cudaMemcpyHostToDevice);
  int blocks = (n + 255) / 256;
  squares<<<blocks, 256>>>(x, y, n);
  cubes<<<blocks, 256>>>(x, z, n);
  rotate<<<blocks, 256>>>(a, r, n);
  // Against the host's library, within the GPU library's documented errors.
  uint64_t sum = 0;
  int bad = 0;
  auto near = [](double got, double want, double rel) { return fabs(got - want) <= rel * (fabs(want) + 1.0); };
  cudaMemcpy(hy, y, n * sizeof(float), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; i++) {
    double v = hx[i];
    bad += !near(hy[i], (v - 1) * (v - 1) + 10 * v * v + v, 1e-6);
    uint32_t b;
    memcpy(&b, &hy[i], 4);
    sum = sum * 31 + b;
  }
  cudaMemcpy(hy, z, n * sizeof(float), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; i++) {
    double v = hx[i];
    bad += !near(hy[i], v * v * v, 1e-6);
    uint32_t b;
    memcpy(&b, &hy[i], 4);
    sum = sum * 31 + b;
  }
  cudaMemcpy(hr, r, n * sizeof(double2), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; i++) {
    bad += !near(hr[i].x, cos(ha[i] * 3.0), 1e-14) || !near(hr[i].y, sin(ha[i] * 3.0), 1e-14);
    uint64_t c, s;
    memcpy(&c, &hr[i].x, 8);
    memcpy(&s, &hr[i].y, 8);
    sum = (sum * 31 + c) * 31 + s;
  }
  printf("%s\nchecksum %016llx\n", bad ? "FAIL" : "PASS", (unsigned long long)sum);
  cudaFree(x);
  cudaFree(y);
  cudaFree(z);
  cudaFree(a);
  cudaFree(r);
  free(hx);
  free(hy);
  free(ha);
  free(hr);
  return 0;
}
