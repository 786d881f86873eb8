// A kernel writes the first half of a large managed array while the host, without waiting,
// stores into it. `apart`: the host writes only the second half, which no kernel writes, in
// pages next to (and one page shared with) the kernel's bytes; right, and printed after the
// wait. `race`: the host stores into the kernel's half, which must stop at that store's line.
// `thread`: the same race from a thread of the program's own; `memset`: through the C
// library's memset.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <cuda_runtime.h>

__global__ void fill(int *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = 3 * i;
}

static int *shared;

static void *store(void *) {
  shared[1001] = -1;
  return nullptr;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "apart";
  int n = 1 << 20, half = n / 2 + 7;
  int *a;
  cudaMallocManaged(&a, n * sizeof(int));
  memset(a, 0, n * sizeof(int));
  fill<<<(half + 255) / 256, 256>>>(a, half);
  if (strcmp(mode, "race") == 0) {
    a[1000] = -1;
  } else if (strcmp(mode, "thread") == 0) {
    shared = a;
    pthread_t t;
    pthread_create(&t, nullptr, store, nullptr);
    pthread_join(t, nullptr);
  } else if (strcmp(mode, "memset") == 0) {
    memset(a + 2000, 7, n / 1000);
  } else {
    for (int i = half; i < n; i++) a[i] = 5;
  }
  cudaDeviceSynchronize();
  long long sum = 0;
  for (int i = 0; i < n; i++) sum += a[i];
  long long want = 5LL * (n - half);
  for (long long i = 0; i < half; i++) want += 3 * i;
  printf("%lld\n%s\n", sum, sum == want ? "PASS" : "FAIL");
  cudaFree(a);
  return 0;
}
