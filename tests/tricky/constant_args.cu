// Kernels that take their buffers and sizes from `__constant__` memory, which the host
// rewrites between launches: ping-pong through a constant struct of pointers, a constant
// array of pointers read at a fixed index and at a computed one, an asynchronous symbol copy
// on the launch's stream, a captured graph launched again after the constant changed (a
// kernel reads constant memory when it runs, as CUDA defines it), and a copy through the
// symbol's address. Checked on the host.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include "../programs/check.h"

struct Step {
  const float *src;
  float *dst;
  int n;
  float scale;
};

__constant__ Step step;
__constant__ float *bufs[2];

__global__ void scale_step() {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < step.n) step.dst[i] = step.scale * step.src[i] + 1.0f;
}

// bufs[1] at a fixed index; bufs[k] at one the launch computes.
__global__ void add_fixed(int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) bufs[1][i] += 0.5f;
}

__global__ void add_chosen(int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) bufs[k][i] -= 0.25f;
}

int main(int argc, char **argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 4096;
  const int threads = 128, blocks = (n + threads - 1) / threads;
  float *a, *b;
  cudaMalloc(&a, n * sizeof(float));
  cudaMalloc(&b, n * sizeof(float));
  float *h = new float[n], *ref_a = new float[n], *ref_b = new float[n];
  for (int i = 0; i < n; i++) h[i] = ref_a[i] = (float)(i % 97) - 40.0f;
  for (int i = 0; i < n; i++) ref_b[i] = 0.0f;
  cudaMemcpy(a, h, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(b, 0, n * sizeof(float));
  // Ping-pong: a -> b with 2, b -> a with 3, a -> b with 0.5 (an asynchronous copy).
  Step s = {a, b, n, 2.0f};
  cudaMemcpyToSymbol(step, &s, sizeof s);
  scale_step<<<blocks, threads>>>();
  for (int i = 0; i < n; i++) ref_b[i] = 2.0f * ref_a[i] + 1.0f;
  s = {b, a, n, 3.0f};
  cudaMemcpyToSymbol(step, &s, sizeof s);
  scale_step<<<blocks, threads>>>();
  for (int i = 0; i < n; i++) ref_a[i] = 3.0f * ref_b[i] + 1.0f;
  static Step s3 = {a, b, n, 0.5f};
  cudaMemcpyToSymbolAsync(step, &s3, sizeof s3, 0, cudaMemcpyHostToDevice, 0);
  scale_step<<<blocks, threads>>>();
  for (int i = 0; i < n; i++) ref_b[i] = 0.5f * ref_a[i] + 1.0f;
  // Constant pointers: bufs = {a, b}; fixed index 1 (b), computed index 0 (a).
  float *both[2] = {a, b};
  cudaMemcpyToSymbol(bufs, both, sizeof both);
  add_fixed<<<blocks, threads>>>(n);
  for (int i = 0; i < n; i++) ref_b[i] += 0.5f;
  add_chosen<<<blocks, threads>>>(n, 0);
  for (int i = 0; i < n; i++) ref_a[i] -= 0.25f;
  // A graph of one launch, captured with step = {b -> a, 1}, launched, then launched again
  // after step became {a -> b, -1}.
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  Step g1 = {b, a, n, 1.0f};
  cudaMemcpyToSymbol(step, &g1, sizeof g1);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
  scale_step<<<blocks, threads, 0, stream>>>();
  cudaStreamEndCapture(stream, &graph);
  cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphLaunch(exec, stream);
  cudaStreamSynchronize(stream);
  for (int i = 0; i < n; i++) ref_a[i] = 1.0f * ref_b[i] + 1.0f;
  Step g2 = {a, b, n, -1.0f};
  cudaMemcpyToSymbol(step, &g2, sizeof g2);
  cudaGraphLaunch(exec, stream);
  cudaStreamSynchronize(stream);
  for (int i = 0; i < n; i++) ref_b[i] = -1.0f * ref_a[i] + 1.0f;
  // Written through the symbol's address, as device memory: step = {b -> a, 4}.
  Step *where;
  cudaGetSymbolAddress((void **)&where, step);
  Step s4 = {b, a, n, 4.0f};
  cudaMemcpy(where, &s4, sizeof s4, cudaMemcpyHostToDevice);
  scale_step<<<blocks, threads>>>();
  for (int i = 0; i < n; i++) ref_a[i] = 4.0f * ref_b[i] + 1.0f;
  float *ra = new float[n], *rb = new float[n];
  cudaMemcpy(ra, a, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(rb, b, n * sizeof(float), cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < n; i++) bad += (ra[i] != ref_a[i]) + (rb[i] != ref_b[i]);
  printf("checksum %016llx %016llx\n", fnv1a(ra, n * sizeof(float)), fnv1a(rb, n * sizeof(float)));
  printf("%s: %d wrong\n", bad ? "FAIL" : "PASS", bad);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  cudaFree(a);
  cudaFree(b);
  return bad != 0;
}
