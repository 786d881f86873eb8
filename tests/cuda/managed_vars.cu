/*
 * managed_vars.cu -- __managed__ variables as programs use them: a scalar the host sets
 * before each launch and kernels read, an array kernels fill and the host reads after a
 * synchronization and changes in place between launches, a counter kernels update with
 * atomics, and a struct; cudaMemcpyToSymbol and cudaMemcpyFromSymbol on one of them too.
 * Checked against the same steps on the host.
 * Usage: managed_vars [N [ROUNDS]]   (defaults 64 5; N at most 4096)
 * Prints PASS or FAIL and `checksum <hex>` of the results.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CAP 4096

struct Params {
  int scale;
  int shift;
};

__managed__ int modulus;
__managed__ int table[CAP];
__managed__ unsigned long long hits;
__managed__ Params params;

__global__ void step(int n, int round) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    table[i] = (table[i] * params.scale + i + round) % modulus + params.shift;
    if (table[i] % 3 == 0) atomicAdd(&hits, 1ull);
  }
}

static uint64_t fnv(const int *v, int n, uint64_t sum) {
  for (int i = 0; i < n; ++i) sum = (sum ^ (uint32_t)v[i]) * 1099511628211ull;
  return sum;
}

#define CHECK(call)                                                                              \
  do {                                                                                           \
    cudaError_t e = (call);                                                                      \
    if (e != cudaSuccess) {                                                                      \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e));                 \
      return 1;                                                                                  \
    }                                                                                            \
  } while (0)

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 64, rounds = argc > 2 ? atoi(argv[2]) : 5;
  if (n < 1 || n > CAP || rounds < 1) {
    fprintf(stderr, "usage: managed_vars [N [ROUNDS]]   (N at most %d)\n", CAP);
    return 2;
  }
  int want[CAP];
  unsigned long long want_hits = 0;
  Params p = {3, 1};
  // Host writes before any launch, straight into the variables.
  modulus = 1000;
  params = p;
  hits = 0;
  for (int i = 0; i < n; i++) table[i] = want[i] = i * 7;
  uint64_t sum = 1469598103934665603ull;
  for (int r = 0; r < rounds; r++) {
    step<<<(n + 63) / 64, 64>>>(n, r);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < n; i++) {
      want[i] = (want[i] * p.scale + i + r) % (1000 + 37 * r) + p.shift;
      if (want[i] % 3 == 0) want_hits++;
    }
    // The host reads what the kernel wrote, then changes the variables in place.
    sum = fnv(table, n, sum);
    sum = (sum ^ hits) * 1099511628211ull;
    for (int i = 0; i < n; i += 5) {
      table[i] += 11;
      want[i] += 11;
    }
    modulus = 1000 + 37 * (r + 1);
    // Every other round through the API instead of a store.
    p.scale = 3 + (r + 1) % 4;
    p.shift = (r + 1) % 2;
    if (r % 2 == 0) {
      CHECK(cudaMemcpyToSymbol(params, &p, sizeof p));
    } else {
      params = p;
    }
  }
  int back[CAP];
  CHECK(cudaMemcpyFromSymbol(back, table, n * sizeof(int)));
  int bad = 0;
  for (int i = 0; i < n && !bad; i++) {
    if (table[i] != want[i] || back[i] != want[i]) {
      fprintf(stderr, "table[%d]: %d (from the symbol %d), expected %d\n", i, table[i], back[i], want[i]);
      bad = 1;
    }
  }
  if (!bad && hits != want_hits) {
    fprintf(stderr, "hits: %llu, expected %llu\n", hits, want_hits);
    bad = 1;
  }
  printf("%s\nchecksum %016llx\n", bad ? "FAIL" : "PASS", (unsigned long long)sum);
  return bad;
}
