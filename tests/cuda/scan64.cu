/*
 * scan64.cu -- CUB's device-wide scan of 64-bit values and run-length encoding, checked
 * against the host. Their kernels pass tile states between blocks (decoupled look-back) as
 * {status, value} pairs of 128 bits, stored and loaded at once (`st.relaxed.gpu.v2.u64`,
 * `ld.relaxed.gpu.v2.u64`): on simulated devices the runtime's 128-bit strong accesses.
 * Usage: scan64 [N]   (default 100000)
 * Prints PASS or FAIL and `checksum <hex>` of the results.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cub/cub.cuh>
#include <vector>

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100000;
  if (n < 1) {
    fprintf(stderr, "usage: scan64 [N >= 1]\n");
    return 2;
  }
  std::vector<unsigned long long> h(n);
  std::vector<int> keys(n);
  for (int i = 0; i < n; ++i) {
    h[i] = (unsigned long long)i * 2654435761ull + ((unsigned long long)i << 33);
    keys[i] = (i / 7 + (i % 13 == 0)) % 5;
  }
  unsigned long long *din, *dout;
  int *dkeys, *dunique, *dcounts, *druns;
  cudaMalloc(&din, n * sizeof *din);
  cudaMalloc(&dout, n * sizeof *dout);
  cudaMalloc(&dkeys, n * sizeof *dkeys);
  cudaMalloc(&dunique, n * sizeof *dunique);
  cudaMalloc(&dcounts, n * sizeof *dcounts);
  cudaMalloc(&druns, sizeof *druns);
  cudaMemcpy(din, h.data(), n * sizeof *din, cudaMemcpyHostToDevice);
  cudaMemcpy(dkeys, keys.data(), n * sizeof *dkeys, cudaMemcpyHostToDevice);

  void *temp = nullptr;
  size_t bytes = 0, more = 0;
  cub::DeviceScan::InclusiveSum(temp, bytes, din, dout, n);
  cub::DeviceRunLengthEncode::Encode(temp, more, dkeys, dunique, dcounts, druns, n);
  bytes = bytes > more ? bytes : more;
  cudaMalloc(&temp, bytes);
  more = bytes;
  cub::DeviceScan::InclusiveSum(temp, more, din, dout, n);
  more = bytes;
  cub::DeviceRunLengthEncode::Encode(temp, more, dkeys, dunique, dcounts, druns, n);

  std::vector<unsigned long long> got(n);
  std::vector<int> unique(n), counts(n);
  int runs = 0;
  cudaMemcpy(got.data(), dout, n * sizeof *dout, cudaMemcpyDeviceToHost);
  cudaMemcpy(&runs, druns, sizeof runs, cudaMemcpyDeviceToHost);
  cudaMemcpy(unique.data(), dunique, n * sizeof *dunique, cudaMemcpyDeviceToHost);
  cudaMemcpy(counts.data(), dcounts, n * sizeof *dcounts, cudaMemcpyDeviceToHost);

  int bad = 0;
  unsigned long long sum = 0;
  uint64_t check = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) {
    sum += h[i];
    bad += got[i] != sum;
    check = (check ^ got[i]) * 1099511628211ull;
  }
  int want = 0;
  for (int i = 0, start = 0; i < n; ++i) {
    if (i + 1 == n || keys[i + 1] != keys[i]) {
      bad += want >= runs || unique[want] != keys[i] || counts[want] != i + 1 - start;
      ++want;
      start = i + 1;
    }
  }
  bad += runs != want;
  for (int r = 0; r < runs && r < n; ++r) check = (check ^ (uint64_t)(unique[r] * 131 + counts[r])) * 1099511628211ull;
  printf("%s\n", bad ? "FAIL" : "PASS");
  printf("checksum %016llx\n", (unsigned long long)check);
  cudaFree(temp);
  cudaFree(din);
  cudaFree(dout);
  cudaFree(dkeys);
  cudaFree(dunique);
  cudaFree(dcounts);
  cudaFree(druns);
  return bad != 0;
}
