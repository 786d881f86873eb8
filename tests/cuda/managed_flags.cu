/*
 * managed_flags.cu -- the loop of iterative GPU programs (HeCBench hungarian's steps): the host
 * resets a flag in managed memory, a kernel sets it while work remains, the host reads it after
 * a synchronization and loops again. The flag and a counter live in cudaMallocManaged memory
 * and in __managed__ variables; between rounds the host also stores, into a managed array, the
 * very values it held before the last kernel overwrote them. Each store must reach the next
 * kernel: a store of the value the host's copy held before the runtime copied a kernel's result
 * back went unseen once, and the loop never ended.
 * Usage: managed_flags [N [STEPS]]   (defaults 100 7)
 * Prints PASS or FAIL and `checksum <hex>` of the results.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__managed__ bool again;
__managed__ int rounds_seen;

// One step of work per launch: while any element is below `goal`, it grows, and the flags say
// another launch is needed.
__global__ void step(int *v, int n, int goal, bool *more, int *launches) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && v[i] < goal) {
    v[i] += 1 + i % 3;
    if (v[i] < goal) {
      *more = true;
      again = true;
    }
  }
  if (i == 0) {
    atomicAdd(launches, 1);
    atomicAdd(&rounds_seen, 1);
  }
}

// Overwrites the array with a pattern the host then stores back over.
__global__ void scramble(int *w, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) w[i] = -w[i] - 1;
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
  int n = argc > 1 ? atoi(argv[1]) : 100, goal = argc > 2 ? atoi(argv[2]) : 7;
  if (n < 1 || goal < 1) {
    fprintf(stderr, "usage: managed_flags [N [STEPS]]\n");
    return 2;
  }
  int *v, *w, *launches;
  bool *more;
  CHECK(cudaMallocManaged(&v, n * sizeof(int)));
  CHECK(cudaMallocManaged(&w, n * sizeof(int)));
  CHECK(cudaMallocManaged(&launches, sizeof(int)));
  CHECK(cudaMallocManaged(&more, sizeof(bool)));
  for (int i = 0; i < n; i++) {
    v[i] = i % 5;
    w[i] = i;
  }
  *launches = 0;
  rounds_seen = 0;
  int host_rounds = 0, bad = 0;
  // The host's model of the loop: the same steps on its own copy.
  int *want = (int *)malloc(n * sizeof(int));
  for (int i = 0; i < n; i++) want[i] = i % 5;
  bool want_more;
  do {
    *more = false;
    again = false;
    step<<<(n + 63) / 64, 64>>>(v, n, goal, more, launches);
    CHECK(cudaGetLastError());
    scramble<<<(n + 63) / 64, 64>>>(w, n);
    CHECK(cudaDeviceSynchronize());
    want_more = false;
    for (int i = 0; i < n; i++)
      if (want[i] < goal) {
        want[i] += 1 + i % 3;
        if (want[i] < goal) want_more = true;
      }
    host_rounds++;
    if (*more != want_more || again != want_more) {
      fprintf(stderr, "round %d: flags %d %d, expected %d\n", host_rounds, (int)*more, (int)again, (int)want_more);
      bad = 1;
      break;
    }
    // Store back what each element held before `scramble`: the value the host's copy held
    // before the runtime copied the kernel's result back.
    for (int i = 0; i < n; i++) w[i] = -w[i] - 1;
  } while (want_more && host_rounds < 10 * goal);
  for (int i = 0; i < n && !bad; i++) {
    if (v[i] != want[i] || w[i] != i) {
      fprintf(stderr, "element %d: %d %d, expected %d %d\n", i, v[i], w[i], want[i], i);
      bad = 1;
    }
  }
  if (!bad && (*launches != host_rounds || rounds_seen != host_rounds)) {
    fprintf(stderr, "launches counted %d and %d, expected %d\n", *launches, rounds_seen, host_rounds);
    bad = 1;
  }
  uint64_t sum = fnv(v, n, 1469598103934665603ull);
  sum = fnv(w, n, sum);
  sum = (sum ^ (uint32_t)host_rounds) * 1099511628211ull;
  printf("%s\nchecksum %016llx\n", bad ? "FAIL" : "PASS", (unsigned long long)sum);
  free(want);
  return bad;
}
