/*
 * grid_sync.cu -- a cooperative launch (cudaLaunchCooperativeKernel) whose blocks meet at
 * the grid's barrier (cooperative groups' this_grid().sync()): each phase reads what other
 * blocks wrote in the phase before, through a grid-stride loop over fewer blocks than
 * elements, as NVIDIA's reductionMultiBlockCG and conjugateGradientMultiBlockCG do. The
 * grid is sized from the occupancy the program is told, as theirs is; a grid no device can
 * hold at once is refused with cudaErrorCooperativeLaunchTooLarge, and runs nothing.
 * Checked against the host.
 * Usage: grid_sync [N]   (default 10000)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cooperative_groups.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace cg = cooperative_groups;

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

// a[i] = 3i + 1; then b[i] from two elements other blocks wrote; then a block sum of b per
// block into `sums`, and block 0 adds those up after the last barrier.
__global__ void phases(int *a, int *b, long long *sums, long long *total, int n) {
  cg::grid_group g = cg::this_grid();
  for (long long i = g.thread_rank(); i < n; i += g.size())
    a[i] = 3 * (int)i + 1;
  g.sync();
  for (long long i = g.thread_rank(); i < n; i += g.size())
    b[i] = a[n - 1 - i] - a[(i + 7) % n];
  g.sync();
  if (threadIdx.x == 0) {
    long long s = 0;
    for (long long i = blockIdx.x; i < n; i += gridDim.x)
      s += b[i];
    sums[blockIdx.x] = s;
  }
  g.sync();
  if (g.thread_rank() == 0) {
    long long s = 0;
    for (unsigned k = 0; k < gridDim.x; ++k)
      s += sums[k];
    *total = s;
  }
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 10000;
  if (n < 1) {
    fprintf(stderr, "usage: grid_sync [N >= 1]\n");
    return 2;
  }
  int cooperative = 0, sms = 0, per_sm = 0;
  CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, 0));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int threads = 128;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, phases, threads, 0));
  if (!cooperative || per_sm < 1) {
    printf("no cooperative launches\nFAIL\n");
    return 1;
  }
  int blocks = per_sm * sms < (n + threads - 1) / threads ? per_sm * sms : (n + threads - 1) / threads;
  blocks = blocks > 64 ? 64 : blocks;
  int *a, *b;
  long long *sums, *total;
  CHECK(cudaMalloc(&a, n * sizeof(int)));
  CHECK(cudaMalloc(&b, n * sizeof(int)));
  CHECK(cudaMalloc(&sums, blocks * sizeof(long long)));
  CHECK(cudaMalloc(&total, sizeof(long long)));
  CHECK(cudaMemset(total, 0, sizeof(long long)));
  void *args[] = {&a, &b, &sums, &total, &n};
  // More blocks than the device holds at once: refused, nothing run.
  cudaError_t big = cudaLaunchCooperativeKernel((void *)phases, dim3(per_sm * sms * 64 + 1), dim3(threads), args, 0, 0);
  bool ok = big == cudaErrorCooperativeLaunchTooLarge;
  if (!ok)
    printf("an oversized grid gave %s\n", cudaGetErrorString(big));
  cudaGetLastError();
  CHECK(cudaLaunchCooperativeKernel((void *)phases, dim3(blocks), dim3(threads), args, 0, 0));
  CHECK(cudaDeviceSynchronize());
  std::vector<int> hb(n);
  long long got = 0;
  CHECK(cudaMemcpy(hb.data(), b, n * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&got, total, sizeof got, cudaMemcpyDeviceToHost));
  long long want = 0;
  uint64_t sum = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) {
    int w = (3 * (n - 1 - i) + 1) - (3 * ((i + 7) % n) + 1);
    ok &= hb[i] == w;
    want += w;
    sum = (sum ^ (uint32_t)hb[i]) * 1099511628211ull;
  }
  ok &= got == want;
  sum = (sum ^ (uint64_t)got) * 1099511628211ull;
  printf("checksum %016llx\n%s\n", (unsigned long long)sum, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
