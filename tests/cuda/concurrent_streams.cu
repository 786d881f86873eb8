/*
 * concurrent_streams.cu -- kernels on many streams at once, as programs that use streams for
 * concurrency write them (HyperQ-style independent work, producer/consumer pairs joined by
 * events, a pipeline that hands buffers from stream to stream), each part checked against
 * the host:
 *   independent   S streams, each a chain of order-sensitive updates of its own buffer,
 *                 then one kernel on the legacy default stream that reads them all
 *   handoff       stream A fills a buffer, B reads it after an event, A overwrites it only
 *                 after B says (another event) it has read it
 *   pipeline      a smoother stepped on stream i % S, each step after the previous
 *                 stream's event, input and output swapped each step
 *   copies        device-to-host copies on one stream of buffers written on others, after
 *                 events
 *   spin          one long kernel per stream (a loop of dependent arithmetic), all at once
 * Usage: concurrent_streams [N [S [STEPS]]]   (defaults 4096 8 9; N >= 64, 2 <= S <= 64)
 * Prints a line per part, `checksum <hex>` of every result, then PASS or FAIL.
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

// x = x * a + b: the order of two updates of one buffer changes the result.
__global__ void affine(float *x, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + b;
}

__global__ void gather(float *const *parts, int count, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = 0.0f;
  for (int k = 0; k < count; ++k) s += parts[k][i] * (float)(k + 1);
  out[i] = s;
}

__global__ void sum2(const float *x, const float *y, float *z, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = x[i] + 2.0f * y[i];
}

__global__ void fill(float *x, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = v + (float)(i % 13);
}

__global__ void smooth(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float l = in[i > 0 ? i - 1 : i], r = in[i < n - 1 ? i + 1 : i];
  out[i] = 0.25f * l + 0.5f * in[i] + 0.25f * r;
}

// A long chain of dependent integer steps per element: minutes of it on the CPU, a few
// milliseconds on a GPU; exact, so every device gives the same bits.
__global__ void spin(unsigned *x, int rounds, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned v = x[i];
  for (int r = 0; r < rounds; ++r) v = v * 1664525u + 1013904223u + (v >> 13);
  x[i] = v;
}

static int failures = 0;
static uint64_t digest = 1469598103934665603ull;

static void fold(const void *v, int n) {
  const uint32_t *w = (const uint32_t *)v;
  for (int i = 0; i < n; ++i) digest = (digest ^ w[i]) * 1099511628211ull;
}

static void expect(const char *what, const float *got, const float *want, int n) {
  int bad = 0;
  for (int i = 0; i < n; ++i) bad += got[i] != want[i];
  printf("%-12s %s (%d of %d differ)\n", what, bad ? "FAIL" : "ok", bad, n);
  failures += bad != 0;
  fold(got, n);
}

static int blocks(int n, int b) { return (n + b - 1) / b; }

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4096;
  int S = argc > 2 ? atoi(argv[2]) : 8;
  int steps = argc > 3 ? atoi(argv[3]) : 9;
  if (n < 64 || S < 2 || S > 64 || steps < 1) {
    fprintf(stderr, "usage: concurrent_streams [N >= 64 [2 <= S <= 64 [STEPS >= 1]]]\n");
    return 2;
  }
  size_t bytes = (size_t)n * sizeof(float);
  // `got` also takes the spin part's 1024 words.
  float *want = (float *)malloc(bytes), *ref = (float *)malloc(bytes);
  float *got = (float *)malloc(n > 1024 ? bytes : 1024 * sizeof(float));
  cudaStream_t *st = (cudaStream_t *)malloc(S * sizeof(cudaStream_t));
  cudaEvent_t *ev = (cudaEvent_t *)malloc(S * sizeof(cudaEvent_t));
  for (int k = 0; k < S; ++k) {
    CHECK(cudaStreamCreateWithFlags(&st[k], k % 2 ? cudaStreamNonBlocking : cudaStreamDefault));
    CHECK(cudaEventCreateWithFlags(&ev[k], cudaEventDisableTiming));
  }

  // Independent: each stream updates its own buffer three times, in its order; the legacy
  // default stream waits for the blocking streams, and the non-blocking ones are joined by
  // their events.
  float **part = (float **)malloc(S * sizeof(float *));
  float **dparts, *out;
  CHECK(cudaMalloc(&dparts, S * sizeof(float *)));
  CHECK(cudaMalloc(&out, bytes));
  for (int k = 0; k < S; ++k) {
    CHECK(cudaMalloc(&part[k], bytes));
    for (int i = 0; i < n; ++i) got[i] = (float)((i + k) % 11);
    CHECK(cudaMemcpy(part[k], got, bytes, cudaMemcpyHostToDevice));
  }
  CHECK(cudaMemcpy(dparts, part, S * sizeof(float *), cudaMemcpyHostToDevice));
  CHECK(cudaDeviceSynchronize());
  for (int k = 0; k < S; ++k) {
    affine<<<blocks(n, 128), 128, 0, st[k]>>>(part[k], 2.0f, (float)k, n);
    affine<<<blocks(n, 256), 256, 0, st[k]>>>(part[k], 0.5f, 3.0f, n);
    affine<<<blocks(n, 64), 64, 0, st[k]>>>(part[k], 3.0f, -1.0f, n);
    CHECK(cudaEventRecord(ev[k], st[k]));
    CHECK(cudaStreamWaitEvent(0, ev[k], 0));
  }
  gather<<<blocks(n, 128), 128>>>(dparts, S, out, n);
  CHECK(cudaMemcpy(got, out, bytes, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    float s = 0.0f;
    for (int k = 0; k < S; ++k) {
      float v = (float)((i + k) % 11);
      v = v * 2.0f + (float)k;
      v = v * 0.5f + 3.0f;
      v = v * 3.0f - 1.0f;
      s += v * (float)(k + 1);
    }
    want[i] = s;
  }
  expect("independent", got, want, n);

  // Handoff: A fills p, B adds it into r after A's event, A refills p after B's event, and
  // B adds again: q = q0 + 2 * first + 2 * second.
  cudaStream_t A = st[0], B = st[1];
  float *p = part[0], *q = part[1], *r = out;
  fill<<<blocks(n, 128), 128, 0, B>>>(q, 0.0f, n);
  fill<<<blocks(n, 128), 128, 0, A>>>(p, 5.0f, n);
  CHECK(cudaEventRecord(ev[0], A));
  CHECK(cudaStreamWaitEvent(B, ev[0], 0));
  sum2<<<blocks(n, 128), 128, 0, B>>>(q, p, r, n);
  CHECK(cudaEventRecord(ev[1], B));
  CHECK(cudaStreamWaitEvent(A, ev[1], 0));
  fill<<<blocks(n, 128), 128, 0, A>>>(p, 40.0f, n);
  CHECK(cudaEventRecord(ev[0], A));
  CHECK(cudaStreamWaitEvent(B, ev[0], 0));
  sum2<<<blocks(n, 128), 128, 0, B>>>(r, p, q, n);
  CHECK(cudaStreamSynchronize(B));
  CHECK(cudaMemcpy(got, q, bytes, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) want[i] = (0.0f + (float)(i % 13)) + 2.0f * (5.0f + (float)(i % 13)) + 2.0f * (40.0f + (float)(i % 13));
  expect("handoff", got, want, n);

  // Pipeline: step s runs on stream s % S after step s - 1's event.
  float *a = part[2 % S], *b = part[3 % S];
  for (int i = 0; i < n; ++i) ref[i] = (float)((i * 7) % 64);
  CHECK(cudaMemcpy(a, ref, bytes, cudaMemcpyHostToDevice));
  for (int s = 0; s < steps; ++s) {
    cudaStream_t here = st[s % S];
    if (s > 0) CHECK(cudaStreamWaitEvent(here, ev[(s - 1) % S], 0));
    smooth<<<blocks(n, 128), 128, 0, here>>>(a, b, n);
    CHECK(cudaEventRecord(ev[s % S], here));
    float *t = a;
    a = b;
    b = t;
    for (int i = 0; i < n; ++i) {
      float l = ref[i > 0 ? i - 1 : i], rr = ref[i < n - 1 ? i + 1 : i];
      want[i] = 0.25f * l + 0.5f * ref[i] + 0.25f * rr;
    }
    memcpy(ref, want, bytes);
  }
  CHECK(cudaEventSynchronize(ev[(steps - 1) % S]));
  CHECK(cudaMemcpy(got, a, bytes, cudaMemcpyDeviceToHost));
  expect("pipeline", got, ref, n);

  // Copies: every stream writes its buffer; stream 0 copies them all back after their events.
  float *pinned;
  CHECK(cudaMallocHost((void **)&pinned, bytes * S));
  for (int k = 0; k < S; ++k) {
    fill<<<blocks(n, 256), 256, 0, st[k]>>>(part[k], (float)(10 * k), n);
    CHECK(cudaEventRecord(ev[k], st[k]));
  }
  for (int k = 0; k < S; ++k) {
    CHECK(cudaStreamWaitEvent(st[0], ev[k], 0));
    CHECK(cudaMemcpyAsync(pinned + (size_t)k * n, part[k], bytes, cudaMemcpyDeviceToHost, st[0]));
  }
  CHECK(cudaStreamSynchronize(st[0]));
  int bad = 0;
  for (int k = 0; k < S; ++k)
    for (int i = 0; i < n; ++i) bad += pinned[(size_t)k * n + i] != (float)(10 * k) + (float)(i % 13);
  printf("%-12s %s (%d of %d differ)\n", "copies", bad ? "FAIL" : "ok", bad, n * S);
  failures += bad != 0;
  fold(pinned, n * S);

  // Spin: one long kernel per stream, timed from the legacy stream.
  unsigned **u = (unsigned **)malloc(S * sizeof(unsigned *));
  int rounds = 1 << 14, un = 1024;
  unsigned *hu = (unsigned *)malloc(un * sizeof(unsigned));
  for (int i = 0; i < un; ++i) hu[i] = (unsigned)i * 2654435761u;
  for (int k = 0; k < S; ++k) {
    CHECK(cudaMalloc(&u[k], un * sizeof(unsigned)));
    CHECK(cudaMemcpy(u[k], hu, un * sizeof(unsigned), cudaMemcpyHostToDevice));
  }
  cudaEvent_t t0, t1;
  CHECK(cudaEventCreate(&t0));
  CHECK(cudaEventCreate(&t1));
  CHECK(cudaEventRecord(t0, 0));
  for (int k = 0; k < S; ++k) spin<<<blocks(un, 128), 128, 0, st[k]>>>(u[k], rounds + k, un);
  for (int k = 0; k < S; ++k) {
    CHECK(cudaEventRecord(ev[k], st[k]));
    CHECK(cudaStreamWaitEvent(0, ev[k], 0));
  }
  CHECK(cudaEventRecord(t1, 0));
  CHECK(cudaEventSynchronize(t1));
  float ms = -1.0f;
  CHECK(cudaEventElapsedTime(&ms, t0, t1));
  bad = 0;
  for (int k = 0; k < S; ++k) {
    CHECK(cudaMemcpy(got, u[k], un * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (int i = 0; i < un; ++i) {
      unsigned v = hu[i];
      for (int r2 = 0; r2 < rounds + k; ++r2) v = v * 1664525u + 1013904223u + (v >> 13);
      bad += ((unsigned *)got)[i] != v;
    }
    fold(got, un);
  }
  printf("%-12s %s (%d of %d differ)\n", "spin", bad ? "FAIL" : "ok", bad, un * S);
  failures += bad != 0 || !(ms >= 0.0f);
  // The time goes to stderr: it is not part of what every device must print alike.
  fprintf(stderr, "spin: %d kernels on %d streams took %.3f ms\n", S, S, ms);

  CHECK(cudaGetLastError());
  printf("checksum %016llx\n", (unsigned long long)digest);
  printf("%s\n", failures ? "FAIL" : "PASS");
  for (int k = 0; k < S; ++k) {
    CHECK(cudaStreamDestroy(st[k]));
    CHECK(cudaEventDestroy(ev[k]));
    CHECK(cudaFree(part[k]));
    CHECK(cudaFree(u[k]));
  }
  CHECK(cudaEventDestroy(t0));
  CHECK(cudaEventDestroy(t1));
  CHECK(cudaFree(dparts));
  CHECK(cudaFree(out));
  CHECK(cudaFreeHost(pinned));
  free(part);
  free(u);
  free(hu);
  free(st);
  free(ev);
  free(want);
  free(got);
  free(ref);
  return failures ? 1 : 0;
}
