/*
 * thrust.cu -- a program written with Thrust, as CUDA programs often are: device vectors,
 * sequence, fill, transform with a functor and with one of Thrust's own, a copy back to a
 * host vector, a sum (CUB's reduction: warp shuffles in inline PTX, several blocks from 65537
 * elements on), an inclusive scan (CUB's decoupled look-back between blocks) and a sort (CUB's
 * radix sort: ballots, block counts, threads that end early by PTX exit). Thrust's
 * kernels are CUB's, compiled from the CCCL headers the toolchain carries. Checked against
 * the host's arithmetic, element by element.
 * Usage: thrust [N]   (default 1000, at least 1)
 * Prints `checksum <hex>` of the result and PASS or FAIL.
 */
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/fill.h>
#include <thrust/functional.h>
#include <thrust/host_vector.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <thrust/transform.h>

struct saxpy {
  float a;
  __host__ __device__ float operator()(float x, float y) const { return a * x + y; }
};

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  if (n < 1) {
    fprintf(stderr, "usage: thrust [N >= 1]\n");
    return 2;
  }
  thrust::device_vector<float> x(n), y(n);
  thrust::sequence(x.begin(), x.end(), 1.0f, 0.5f);
  thrust::fill(y.begin(), y.end(), 2.0f);
  thrust::transform(x.begin(), x.end(), y.begin(), y.begin(), saxpy{3.0f});
  thrust::transform(y.begin(), y.end(), x.begin(), thrust::negate<float>());
  thrust::host_vector<float> h = x;
  int bad = 0;
  unsigned long long sum = 1469598103934665603ull;
  for (int i = 0; i < n; i++) {
    float want = -(3.0f * (1.0f + 0.5f * (float)i) + 2.0f);
    if (h[i] != want) bad++;
    unsigned bits;
    memcpy(&bits, &h[i], sizeof bits);
    sum = (sum ^ bits) * 1099511628211ull;
  }
  // Integers, so that the sum and the scan are exact in any order.
  thrust::device_vector<long long> k(n);
  thrust::sequence(k.begin(), k.end(), 7LL, 3LL);
  long long total = thrust::reduce(k.begin(), k.end(), 0LL);
  long long want_total = 7LL * n + 3LL * n * (n - 1) / 2;
  if (total != want_total) bad++;
  thrust::device_vector<unsigned> u(n), scanned(n);
  thrust::sequence(u.begin(), u.end(), 1u, 2u);
  thrust::inclusive_scan(u.begin(), u.end(), scanned.begin());
  thrust::host_vector<unsigned> hs = scanned;
  for (int i = 0; i < n; i++) {
    // 1 + 3 + ... + (2i + 1)
    if (hs[i] != (unsigned)(i + 1) * (unsigned)(i + 1)) bad++;
    sum = (sum ^ hs[i]) * 1099511628211ull;
  }
  sum = (sum ^ (unsigned long long)total) * 1099511628211ull;
  std::vector<unsigned> keys(n);
  for (int i = 0; i < n; i++) keys[i] = (unsigned)i * 2654435761u;
  thrust::device_vector<unsigned> d_keys(keys.begin(), keys.end());
  thrust::sort(d_keys.begin(), d_keys.end());
  thrust::host_vector<unsigned> sorted = d_keys;
  std::sort(keys.begin(), keys.end());
  for (int i = 0; i < n; i++) {
    if (sorted[i] != keys[i]) bad++;
    sum = (sum ^ sorted[i]) * 1099511628211ull;
  }
  printf("checksum %016llx\n%s (%d mismatches)\n", sum, bad ? "FAIL" : "PASS", bad);
  return bad != 0;
}
