// A kernel template that reads its second pointer only in one instantiation, as CUB's
// radix sort reads values only when it sorts pairs: the keys-only launches pass a pointer no
// buffer holds (`nullptr + offset`), which the kernel never touches. Such a launch must still
// run as a kernel (split across devices), not on the host; both give the host's results.
// `maybe` reads its pointer only when a run-time flag says so, which the analysis cannot
// rule out: given `nullptr + offset` and the flag off, it runs whole on a device with the
// pointer as it is (as nvcc's build would run it), not on the host.
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>

template <bool WITH_VALUES>
__global__ void scale(float *keys, const int *values, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float k = keys[i] * 2.0f + 1.0f;
  if (WITH_VALUES) k += (float)values[i];
  keys[i] = k;
}

__global__ void maybe(float *keys, const int *values, int n, int with_values) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float k = keys[i];
  if (with_values) k += (float)values[i];
  keys[i] = k - 1.0f;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 10000;
  float *h = new float[n];
  int *hv = new int[n];
  for (int i = 0; i < n; i++) h[i] = (float)(i % 97), hv[i] = i % 5;
  float *d;
  int *dv;
  cudaMalloc(&d, n * sizeof(float));
  cudaMalloc(&dv, n * sizeof(int));
  cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dv, hv, n * sizeof(int), cudaMemcpyHostToDevice);
  const int *nowhere = (const int *)nullptr + (1 << 28);
  scale<false><<<(n + 127) / 128, 128>>>(d, nowhere, n);
  scale<true><<<(n + 127) / 128, 128>>>(d, dv, n);
  maybe<<<(n + 127) / 128, 128>>>(d, nowhere, n, 0);
  float *got = new float[n];
  cudaMemcpy(got, d, n * sizeof(float), cudaMemcpyDeviceToHost);
  int bad = 0;
  uint64_t sum = 0;
  for (int i = 0; i < n; i++) {
    float want = ((float)(i % 97) * 2.0f + 1.0f) * 2.0f + 1.0f + (float)(i % 5) - 1.0f;
    if (got[i] != want) bad++;
    sum = sum * 31 + (uint64_t)got[i];
  }
  printf("checksum %016llx\n", (unsigned long long)sum);
  printf("%s: %d wrong\n", bad ? "FAIL" : "PASS", bad);
  return bad != 0;
}
