/*
 * clocked.cu -- kernels that read the clock (NVIDIA's simpleHyperQ and concurrentKernels
 * spin on `clock()` so that streams overlap): each thread waits a few cycles with
 * `clock64()`, `clock()` or a loop on the clock around arithmetic, then writes its own
 * element, which the analysis maps exactly (the clock addresses nothing). A last kernel
 * picks the element it writes from the clock, which stays whole. Checked against the host.
 * Usage: clocked [N [CYCLES]]   (default 1000 200)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

// Waits `cycles` with clock64(), then writes a value of its index alone.
__global__ void after_wait(int *out, int n, long long cycles) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
  if (i < n) out[i] = 3 * i + 1;
}

// The 32-bit clock of simpleHyperQ, its wrap taken modulo 2^32; the waited time is kept in a
// register and only its sign reaches memory.
__global__ void wrapped_wait(int *out, int n, unsigned cycles) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned start = (unsigned)clock();
  unsigned waited = 0;
  while (waited < cycles) waited = (unsigned)clock() - start;
  if (i < n) out[i] = out[i] * 2 + (waited >= cycles);
}

// Arithmetic inside the loop on the clock, a result that does not depend on the clock.
__global__ void counted(float *x, int n, long long cycles) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  int k = 0;
  long long start = clock64();
  do {
    v = v * 0.5f + 1.0f;
    ++k;
  } while (clock64() - start < cycles || k < 8);
  x[i] = v > 0.0f ? 2.0f : -2.0f;
}

// The element written depends on the clock (always 0 on a real clock, which never runs
// backwards): the analysis cannot place it, and the kernel runs whole.
__global__ void clock_indexed(int *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  long long start = clock64();
  int back = clock64() < start;
  if (i < n) out[i + back] += 5;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  long long cycles = argc > 2 ? atoll(argv[2]) : 200;
  if (n < 1 || cycles < 0) {
    fprintf(stderr, "usage: clocked [N >= 1 [CYCLES >= 0]]\n");
    return 2;
  }
  int *out;
  float *x;
  CHECK(cudaMalloc(&out, (n + 1) * sizeof(int)));
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  float *hx = (float *)malloc(n * sizeof(float));
  for (int i = 0; i < n; ++i) hx[i] = (float)(i % 13) - 6.0f;
  CHECK(cudaMemcpy(x, hx, n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(out, 0, (n + 1) * sizeof(int)));
  int B = 128, blocks = (n + B - 1) / B;
  after_wait<<<blocks, B>>>(out, n, cycles);
  wrapped_wait<<<blocks, B>>>(out, n, (unsigned)cycles);
  counted<<<blocks, B>>>(x, n, cycles);
  clock_indexed<<<blocks, B>>>(out, n);
  CHECK(cudaGetLastError());
  int *got = (int *)malloc((n + 1) * sizeof(int));
  float *gx = (float *)malloc(n * sizeof(float));
  CHECK(cudaMemcpy(got, out, (n + 1) * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(gx, x, n * sizeof(float), cudaMemcpyDeviceToHost));
  int bad = got[n] != 0;
  uint64_t digest = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) {
    // The host's model of each step: 3i + 1, doubled plus one, plus five.
    int want = (3 * i + 1) * 2 + 1 + 5;
    float v = hx[i];
    for (int k = 0; k < 8; ++k) v = v * 0.5f + 1.0f;
    float wx = 2.0f;  // v stays positive once halved and raised by one eight times
    bad += got[i] != want || gx[i] != wx;
    uint32_t bits;
    memcpy(&bits, &gx[i], 4);
    digest = (digest ^ (uint32_t)got[i]) * 1099511628211ull;
    digest = (digest ^ bits) * 1099511628211ull;
  }
  printf("%d of %d elements differ\n", bad, n);
  printf("checksum %016llx\n", (unsigned long long)digest);
  printf("%s\n", bad ? "FAIL" : "PASS");
  CHECK(cudaFree(out));
  CHECK(cudaFree(x));
  free(hx);
  free(got);
  free(gx);
  return bad ? 1 : 0;
}
