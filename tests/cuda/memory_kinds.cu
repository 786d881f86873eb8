/*
 * memory_kinds.cu -- one kernel run over every kind of memory a program can give it, one kind
 * after another, as NVIDIA's UnifiedMemoryPerf does: managed memory (prefetched, with a latch
 * kernel holding the stream while the work is queued), managed memory alone, zero-copy
 * (`cudaMallocHost` + `cudaHostGetDevicePointer`), pageable memory copied to and from device
 * memory (synchronously and with `cudaMemcpyAsync`), page-locked memory copied likewise. Each
 * kind gets a fresh stream and latch, freed at its end, at sizes that cross the runtime's
 * staging threshold (256 KiB), so that each kind runs right after memory of another kind was
 * freed. Checked against the host exactly.
 * Usage: memory_kinds [MAX_N [LOOPS [LATCH]]]   (default 131072 2 0; N = 1024, 4096, ... up to
 * MAX_N floats; LATCH 1 holds the async managed runs' streams on a latch kernel, which needs a
 * GPU: a simulated device runs a kernel to its end when it is launched)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void spin(volatile unsigned *latch) {
  while (latch[0] < 1) {
  }
}

__global__ void combine(float *c, const float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    c[i] = a[i] * 2.0f + b[i];
}

// The same, for zero-copy memory (kept apart: such launches run whole).
__global__ void combine_mapped(float *c, const float *a, const float *b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    c[i] = a[i] * 2.0f + b[i];
}

enum Kind { HINTS, HINTS_ASYNC, MANAGED, ZERO_COPY, PAGEABLE, PAGEABLE_ASYNC, LOCKED, LOCKED_ASYNC, KINDS };
static const char *names[] = {"managed+prefetch", "managed+prefetch async", "managed", "zero-copy",
                              "pageable", "pageable async", "page-locked", "page-locked async"};

#define CHECK(call)                                                                                          \
  do {                                                                                                       \
    cudaError_t e_ = (call);                                                                                 \
    if (e_ != cudaSuccess) {                                                                                 \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));                             \
      exit(1);                                                                                               \
    }                                                                                                        \
  } while (0)

static uint64_t fnv(uint64_t h, uint64_t v) { return (h ^ v) * 1099511628211ull; }

// One kind at one size: returns whether every element is right, hashing them into `h`.
static bool run(Kind kind, int n, int loops, bool latched, uint64_t *h) {
  size_t size = (size_t)n * sizeof(float);
  float *ha = nullptr, *hb = nullptr, *hc = nullptr, *da = nullptr, *db = nullptr, *dc = nullptr;
  unsigned *latch;
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaMallocHost(&latch, sizeof(unsigned)));
  bool copies = false, hints = false, async = kind == HINTS_ASYNC || kind == PAGEABLE_ASYNC || kind == LOCKED_ASYNC;
  switch (kind) {
  case HINTS:
  case HINTS_ASYNC:
  case MANAGED:
    CHECK(cudaMallocManaged(&da, size));
    CHECK(cudaMallocManaged(&db, size));
    CHECK(cudaMallocManaged(&dc, size));
    ha = da, hb = db, hc = dc;
    hints = kind != MANAGED;
    break;
  case ZERO_COPY:
    CHECK(cudaMallocHost(&ha, size));
    CHECK(cudaMallocHost(&hb, size));
    CHECK(cudaMallocHost(&hc, size));
    CHECK(cudaHostGetDevicePointer(&da, ha, 0));
    CHECK(cudaHostGetDevicePointer(&db, hb, 0));
    CHECK(cudaHostGetDevicePointer(&dc, hc, 0));
    break;
  case PAGEABLE:
  case PAGEABLE_ASYNC:
    ha = (float *)malloc(size), hb = (float *)malloc(size), hc = (float *)malloc(size);
    copies = true;
    break;
  default:
    CHECK(cudaMallocHost(&ha, size));
    CHECK(cudaMallocHost(&hb, size));
    CHECK(cudaMallocHost(&hc, size));
    copies = true;
    break;
  }
  if (copies) {
    CHECK(cudaMalloc(&da, size));
    CHECK(cudaMalloc(&db, size));
    CHECK(cudaMalloc(&dc, size));
  }
  if (getenv("MEMORY_KINDS_VERBOSE"))
    fprintf(stderr, "%s, n = %d\n", names[kind], n);
  bool ok = true;
  int dev = 0;
  CHECK(cudaGetDevice(&dev));
  for (int l = 0; l < loops; l++) {
    for (int i = 0; i < n; i++) {
      ha[i] = (float)((i * 7 + l) % 1000) * 0.25f;
      hb[i] = (float)((i * 13 + kind) % 500) * 0.5f;
    }
    if (async && hints && latched) {
      *latch = 0;
      spin<<<1, 1, 0, s>>>(latch);
    }
    if (copies) {
      if (async) {
        CHECK(cudaMemcpyAsync(da, ha, size, cudaMemcpyHostToDevice, s));
        CHECK(cudaMemcpyAsync(db, hb, size, cudaMemcpyHostToDevice, s));
      } else {
        CHECK(cudaMemcpy(da, ha, size, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(db, hb, size, cudaMemcpyHostToDevice));
      }
    }
    if (hints) {
      cudaMemLocation to;
      to.type = cudaMemLocationTypeDevice;
      to.id = dev;
      CHECK(cudaMemPrefetchAsync(da, size, to, 0, s));
      CHECK(cudaMemPrefetchAsync(db, size, to, 0, s));
      CHECK(cudaMemPrefetchAsync(dc, size, to, 0, s));
      if (!async)
        CHECK(cudaStreamSynchronize(s));
    }
    if (kind == ZERO_COPY)
      combine_mapped<<<(n + 255) / 256, 256, 0, s>>>(dc, da, db, n);
    else
      combine<<<(n + 255) / 256, 256, 0, s>>>(dc, da, db, n);
    if (!async)
      CHECK(cudaStreamSynchronize(s));
    if (hints) {
      cudaMemLocation to;
      to.type = cudaMemLocationTypeHost;
      to.id = 0;
      CHECK(cudaMemPrefetchAsync(da, size, to, 0));
      CHECK(cudaMemPrefetchAsync(db, size, to, 0));
      CHECK(cudaMemPrefetchAsync(dc, size, to, 0));
    }
    if (copies) {
      if (async)
        CHECK(cudaMemcpyAsync(hc, dc, size, cudaMemcpyDeviceToHost, s));
      else
        CHECK(cudaMemcpy(hc, dc, size, cudaMemcpyDeviceToHost));
    }
    if (async) {
      if (hints)
        *latch = 1;
      CHECK(cudaStreamSynchronize(s));
    }
    for (int i = 0; i < n; i++) {
      float want = ha[i] * 2.0f + hb[i];
      if (hc[i] != want) {
        if (ok)
          fprintf(stderr, "%s, n = %d, loop %d: c[%d] = %g, want %g\n", names[kind], n, l, i, hc[i], want);
        ok = false;
      }
      uint32_t bits;
      memcpy(&bits, &hc[i], sizeof bits);
      *h = fnv(*h, bits);
    }
  }
  switch (kind) {
  case HINTS:
  case HINTS_ASYNC:
  case MANAGED:
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));
    break;
  case ZERO_COPY:
    CHECK(cudaFreeHost(ha));
    CHECK(cudaFreeHost(hb));
    CHECK(cudaFreeHost(hc));
    break;
  case PAGEABLE:
  case PAGEABLE_ASYNC:
    free(ha), free(hb), free(hc);
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));
    break;
  default:
    CHECK(cudaFreeHost(ha));
    CHECK(cudaFreeHost(hb));
    CHECK(cudaFreeHost(hc));
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));
    break;
  }
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFreeHost(latch));
  return ok;
}

int main(int argc, char **argv) {
  int max_n = argc > 1 ? atoi(argv[1]) : 131072, loops = argc > 2 ? atoi(argv[2]) : 2;
  bool latched = argc > 3 && atoi(argv[3]) != 0;
  if (max_n < 1 || loops < 1) {
    fprintf(stderr, "usage: memory_kinds [MAX_N >= 1 [LOOPS >= 1]]\n");
    return 2;
  }
  uint64_t h = 1469598103934665603ull;
  bool ok = true;
  for (int n = max_n < 1024 ? max_n : 1024; n <= max_n; n *= 4)
    for (int k = 0; k < KINDS; k++)
      ok &= run((Kind)k, n, loops, latched, &h);
  printf("checksum %016llx\n", (unsigned long long)h);
  printf(ok ? "PASS\n" : "FAIL\n");
  return ok ? 0 : 1;
}
