/*
 * struct_fields.cu -- a kernel taking its sizes in a struct passed by value, whose fields the
 * analysis sees as parameters `p_0`, `p_1`...: the names Polly gives the parameters it makes of
 * values it cannot keep affine. Here one is `blockIdx.y * p.width`, the row's start; taken for
 * the struct's field `p_7` it made every partition but the first write row 0, and the result
 * was wrong on several devices. One warp per pixel (its first lane writes), as HeCBench's dpid
 * writes its patches. Checked against the host.
 * Usage: struct_fields [WIDTH [HEIGHT]]   (defaults 100 60)
 * Prints PASS or FAIL and `checksum <hex>` of the result.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

struct Params {
  int width, height, scale, f3, f4, f5, f6, f7;
};

__global__ void doubled(const float *in, float *out, const Params p) {
  int px = blockIdx.x * 4 + threadIdx.x / 32;
  if (px >= p.width || (int)blockIdx.y >= p.height) return;
  float v = in[px + blockIdx.y * p.width];
  if (threadIdx.x % 32 == 0) out[px + blockIdx.y * p.width] = v * (float)p.scale;
}

int main(int argc, char **argv) {
  Params p = {argc > 1 ? atoi(argv[1]) : 100, argc > 2 ? atoi(argv[2]) : 60, 2, 0, 0, 0, 0, 0};
  if (p.width < 1 || p.height < 1) {
    fprintf(stderr, "usage: struct_fields [WIDTH >= 1 [HEIGHT >= 1]]\n");
    return 2;
  }
  size_t n = (size_t)p.width * p.height;
  float *h = (float *)malloc(n * sizeof(float)), *got = (float *)malloc(n * sizeof(float));
  for (size_t i = 0; i < n; ++i) h[i] = (float)(i % 97);
  float *din, *dout;
  if (cudaMalloc(&din, n * sizeof(float)) || cudaMalloc(&dout, n * sizeof(float))) return 1;
  cudaMemcpy(din, h, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(dout, 0, n * sizeof(float));
  doubled<<<dim3((p.width + 3) / 4, p.height), 128>>>(din, dout, p);
  cudaMemcpy(got, dout, n * sizeof(float), cudaMemcpyDeviceToHost);
  int bad = 0;
  uint64_t sum = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    bad += got[i] != h[i] * 2.0f;
    uint32_t bits;
    memcpy(&bits, &got[i], sizeof bits);
    sum = (sum ^ bits) * 1099511628211ull;
  }
  printf("%s\n", bad ? "FAIL" : "PASS");
  printf("checksum %016llx\n", (unsigned long long)sum);
  cudaFree(din);
  cudaFree(dout);
  free(h);
  free(got);
  return bad != 0;
}
