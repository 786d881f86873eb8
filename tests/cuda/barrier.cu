/*
 * barrier.cu -- libcu++'s `cuda::barrier<cuda::thread_scope_block>` in shared memory, as
 * NVIDIA's simpleAWBarrier uses it: initialised by one thread, then each block's threads
 * meet at it between the steps of a tree sum (`arrive_and_wait`), and split arrive and wait
 * with work between them (`arrive` gives a token, `wait` takes it). On GPUs the barrier is
 * the hardware's (mbarrier PTX); on simulated devices libcu++'s atomic one. Checked against
 * the host.
 * Usage: barrier [N]   (default 1000)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cooperative_groups.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda/barrier>

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

constexpr int B = 128;

// Each block sums its B elements by halving, the threads meeting at the barrier after each
// step; then scales its elements by the sum, waiting for the barrier's phase between an
// arrive and a wait that have work between them.
__global__ void block_sums(const int *x, int *sums, int *scaled, int n) {
  using barrier = cuda::barrier<cuda::thread_scope_block>;
  __shared__ barrier bar;
  __shared__ int part[B];
  int t = threadIdx.x, i = blockIdx.x * B + t;
  if (t == 0) init(&bar, blockDim.x);
  __syncthreads();
  part[t] = i < n ? x[i] : 0;
  bar.arrive_and_wait();
  for (int half = B / 2; half > 0; half /= 2) {
    if (t < half) part[t] += part[t + half];
    bar.arrive_and_wait();
  }
  int total = part[0];
  barrier::arrival_token token = bar.arrive();
  // Work that needs no other thread's result, between arriving and waiting.
  int mine = i < n ? x[i] * 3 : 0;
  bar.wait(std::move(token));
  if (t == 0) sums[blockIdx.x] = total;
  if (i < n) scaled[i] = mine + total;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  if (n < 1) {
    fprintf(stderr, "usage: barrier [N >= 1]\n");
    return 2;
  }
  int blocks = (n + B - 1) / B;
  int *hx = (int *)malloc(n * sizeof(int));
  for (int i = 0; i < n; ++i) hx[i] = (i * 37) % 101 - 50;
  int *x, *sums, *scaled;
  CHECK(cudaMalloc(&x, n * sizeof(int)));
  CHECK(cudaMalloc(&sums, blocks * sizeof(int)));
  CHECK(cudaMalloc(&scaled, n * sizeof(int)));
  CHECK(cudaMemcpy(x, hx, n * sizeof(int), cudaMemcpyHostToDevice));
  block_sums<<<blocks, B>>>(x, sums, scaled, n);
  CHECK(cudaGetLastError());
  int *gs = (int *)malloc(blocks * sizeof(int)), *gc = (int *)malloc(n * sizeof(int));
  CHECK(cudaMemcpy(gs, sums, blocks * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(gc, scaled, n * sizeof(int), cudaMemcpyDeviceToHost));
  int bad = 0;
  uint64_t digest = 1469598103934665603ull;
  for (int b = 0; b < blocks; ++b) {
    int s = 0;
    for (int i = b * B; i < n && i < (b + 1) * B; ++i) s += hx[i];
    bad += gs[b] != s;
    for (int i = b * B; i < n && i < (b + 1) * B; ++i) bad += gc[i] != hx[i] * 3 + s;
    digest = (digest ^ (uint32_t)gs[b]) * 1099511628211ull;
  }
  for (int i = 0; i < n; ++i) digest = (digest ^ (uint32_t)gc[i]) * 1099511628211ull;
  printf("%d values differ\n", bad);
  printf("checksum %016llx\n", (unsigned long long)digest);
  printf("%s\n", bad ? "FAIL" : "PASS");
  CHECK(cudaFree(x));
  CHECK(cudaFree(sums));
  CHECK(cudaFree(scaled));
  free(hx);
  free(gs);
  free(gc);
  return bad ? 1 : 0;
}
