/*
 * cuda_probe.c -- measurements of the CUDA driver itself, outside the runtime, for the
 * questions the runtime's design depends on. Built here by scripts/device/prepare (plain C,
 * the driver loaded with dlopen, so no CUDA toolkit is needed on either machine) and run on
 * the GPU machine by scripts/device/probes.sh.
 *
 *   cuda_probe host N             the matmul example's naive reference loop (N x N), timed
 *                                 with no CUDA at all, then after each step a GPU run takes:
 *                                 cuInit, a current context, device allocations and copies,
 *                                 page-locked inputs; plus a memory-free ALU loop each time,
 *                                 so a clock change shows apart from a memory-system change
 *   cuda_probe host-par N         the loop with no CUDA at all, before and after the same
 *                                 product computed by 8 threads (the CPU fallback's kernel)
 *   cuda_probe cores N            the same loop (its first N/16 rows) and the ALU loop on each
 *                                 allowed core in turn: a virtual machine's cores need not be
 *                                 equally fast
 *   cuda_probe pin GIB THREADS    page-locking GIB GiB of touched pageable memory, whole and
 *                                 in THREADS parallel chunks; host->device bandwidth from
 *                                 pageable, from one registration, across chunk registrations;
 *                                 a THREADS-way memcpy into a pinned staging buffer
 *   cuda_probe occupancy PTX KERNEL BLOCK
 *                                 registers, and resident blocks per SM, of KERNEL in PTX
 *   cuda_probe hog LEAVE_MIB SECONDS
 *                                 takes all but LEAVE_MIB of the first visible GPU's free
 *                                 memory and holds it for SECONDS: another process's
 *                                 allocations on that GPU then run out of memory
 *
 * Exit status: 0 done, 1 a CUDA call failed (named on stderr), 2 bad arguments.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef unsigned long long CUdeviceptr;

static struct {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*CtxSynchronize)(void);
  CUresult (*MemAlloc)(CUdeviceptr *, size_t);
  CUresult (*MemFree)(CUdeviceptr);
  CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*MemHostRegister)(void *, size_t, unsigned);
  CUresult (*MemHostUnregister)(void *);
  CUresult (*ModuleLoadData)(CUmodule *, const void *);
  CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*FuncGetAttribute)(int *, int, CUfunction);
  CUresult (*Occupancy)(int *, CUfunction, int, size_t);
  CUresult (*MemGetInfo)(size_t *, size_t *);
} cu;

static CUcontext ctx;

static void check(CUresult r, const char *what) {
  if (r != 0) {
    fprintf(stderr, "cuda_probe: %s failed with CUDA error %d\n", what, r);
    exit(1);
  }
}

static void *sym(void *lib, const char *name) {
  void *p = dlsym(lib, name);
  if (p == NULL) {
    fprintf(stderr, "cuda_probe: libcuda has no %s\n", name);
    exit(1);
  }
  return p;
}

/* Resolves the driver entry points; does not call cuInit (the host probe times that). */
static void load_driver(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (lib == NULL) {
    fprintf(stderr, "cuda_probe: cannot load libcuda.so.1: %s\n", dlerror());
    exit(1);
  }
  cu.Init = sym(lib, "cuInit");
  cu.DeviceGet = sym(lib, "cuDeviceGet");
  cu.DeviceGetAttribute = sym(lib, "cuDeviceGetAttribute");
  cu.PrimaryCtxRetain = sym(lib, "cuDevicePrimaryCtxRetain");
  cu.CtxSetCurrent = sym(lib, "cuCtxSetCurrent");
  cu.CtxSynchronize = sym(lib, "cuCtxSynchronize");
  cu.MemAlloc = sym(lib, "cuMemAlloc_v2");
  cu.MemFree = sym(lib, "cuMemFree_v2");
  cu.MemcpyHtoD = sym(lib, "cuMemcpyHtoD_v2");
  cu.MemcpyDtoH = sym(lib, "cuMemcpyDtoH_v2");
  cu.MemHostRegister = sym(lib, "cuMemHostRegister_v2");
  cu.MemHostUnregister = sym(lib, "cuMemHostUnregister");
  cu.ModuleLoadData = sym(lib, "cuModuleLoadData");
  cu.ModuleGetFunction = sym(lib, "cuModuleGetFunction");
  cu.FuncGetAttribute = sym(lib, "cuFuncGetAttribute");
  cu.Occupancy = sym(lib, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  cu.MemGetInfo = sym(lib, "cuMemGetInfo_v2");
}

static void open_gpu0(void) {
  CUdevice dev;
  check(cu.Init(0), "cuInit");
  check(cu.DeviceGet(&dev, 0), "cuDeviceGet");
  check(cu.PrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cu.CtxSetCurrent(ctx), "cuCtxSetCurrent");
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- host: does the program's own host code slow down once CUDA is in the process? ---- */

/* The matmul example's reference loop, as it is written there, over its first `rows` rows. */
static void naive_rows(const float *A, const float *B, float *C, long N, long rows) {
  for (long row = 0; row < rows; ++row) {
    for (long col = 0; col < N; ++col) {
      float acc = 0.0f;
      for (long k = 0; k < N; ++k) {
        acc += A[row * N + k] * B[k * N + col];
      }
      C[row * N + col] = acc;
    }
  }
}

static void naive(const float *A, const float *B, float *C, long N) { naive_rows(A, B, C, N, N); }

/* N x N inputs in (0, 1], never zero (zeros can run faster than real data). */
static int make_inputs(long N, float **A, float **B, float **C) {
  size_t bytes = (size_t)N * (size_t)N * sizeof(float);
  *A = malloc(bytes);
  *B = malloc(bytes);
  *C = calloc((size_t)N * (size_t)N, sizeof(float));
  if (!*A || !*B || !*C) {
    fprintf(stderr, "cuda_probe: out of memory\n");
    return 0;
  }
  for (long i = 0; i < N * N; ++i) {
    (*A)[i] = (float)(i % 1000 + 1) / 1000.0f;
    (*B)[i] = (float)(i % 997 + 1) / 997.0f;
  }
  return 1;
}

/* A dependent integer chain: its time follows the core clock only. */
static uint64_t alu(uint64_t n) {
  uint64_t x = 88172645463325252ull;
  for (uint64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
  }
  return x;
}

static volatile uint64_t sink;

static void time_host(const char *stage, const float *A, const float *B, float *C, long N) {
  double t0 = now();
  sink = alu(400000000ull);
  double t1 = now();
  naive(A, B, C, N);
  double t2 = now();
  sink += (uint64_t)C[N * N - 1];
  printf("host %-44s alu %.3f s  naive %.3f s\n", stage, t1 - t0, t2 - t1);
  fflush(stdout);
}

struct pass {
  const float *A, *B;
  float *C;
  long N, row0, rows;
};

static void *pass_rows(void *arg) {
  struct pass *p = arg;
  naive_rows(p->A + p->row0 * p->N, p->B, p->C + p->row0 * p->N, p->N, p->rows);
  return NULL;
}

/* The product computed by `threads` threads, rows split evenly: what the CPU fallback's
 * kernel does to the same data before the host's own check. */
static void parallel_pass(const float *A, const float *B, float *C, long N, int threads) {
  pthread_t t[64];
  struct pass p[64];
  for (int i = 0; i < threads; ++i) {
    long lo = N * i / threads, hi = N * (i + 1) / threads;
    p[i] = (struct pass){A, B, C, N, lo, hi - lo};
    pthread_create(&t[i], NULL, pass_rows, &p[i]);
  }
  for (int i = 0; i < threads; ++i) {
    pthread_join(t[i], NULL);
  }
}

static int probe_host(long N) {
  size_t bytes = (size_t)N * (size_t)N * sizeof(float);
  float *A, *B, *C;
  if (!make_inputs(N, &A, &B, &C)) {
    return 2;
  }
  load_driver();
  time_host("no CUDA call yet", A, B, C, N);
  time_host("again (warm)", A, B, C, N);
  check(cu.Init(0), "cuInit");
  time_host("after cuInit", A, B, C, N);
  CUdevice dev;
  check(cu.DeviceGet(&dev, 0), "cuDeviceGet");
  check(cu.PrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cu.CtxSetCurrent(ctx), "cuCtxSetCurrent");
  time_host("after a current primary context", A, B, C, N);
  CUdeviceptr d[3];
  for (int i = 0; i < 3; ++i) {
    check(cu.MemAlloc(&d[i], bytes), "cuMemAlloc");
  }
  check(cu.MemcpyHtoD(d[0], A, bytes), "cuMemcpyHtoD");
  check(cu.MemcpyHtoD(d[1], B, bytes), "cuMemcpyHtoD");
  check(cu.MemcpyDtoH(C, d[2], bytes), "cuMemcpyDtoH");
  time_host("after allocations and pageable copies", A, B, C, N);
  check(cu.MemHostRegister(A, bytes, 1), "cuMemHostRegister");
  check(cu.MemHostRegister(B, bytes, 1), "cuMemHostRegister");
  check(cu.MemcpyHtoD(d[0], A, bytes), "cuMemcpyHtoD");
  time_host("with A and B page-locked", A, B, C, N);
  check(cu.MemHostUnregister(A), "cuMemHostUnregister");
  check(cu.MemHostUnregister(B), "cuMemHostUnregister");
  time_host("after unlocking them", A, B, C, N);
  float *A2 = malloc(bytes), *B2 = malloc(bytes);
  if (!A2 || !B2) {
    return 2;
  }
  memcpy(A2, A, bytes);
  memcpy(B2, B, bytes);
  time_host("fresh copies of A and B (new pages)", A2, B2, C, N);
  for (int i = 0; i < 3; ++i) {
    check(cu.MemFree(d[i]), "cuMemFree");
  }
  time_host("after freeing the device memory", A, B, C, N);
  parallel_pass(A, B, C, N, 8);
  time_host("after an 8-thread pass over A and B", A, B, C, N);
  time_host("again", A, B, C, N);
  return 0;
}

/* ---- cores: is every core equally fast? ----------------------------------------------- */

static int probe_cores(long N) {
  float *A, *B, *C;
  if (!make_inputs(N, &A, &B, &C)) {
    return 2;
  }
  cpu_set_t allowed;
  sched_getaffinity(0, sizeof allowed, &allowed);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) {
      continue;
    }
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    sched_setaffinity(0, sizeof one, &one);
    double t0 = now();
    sink = alu(100000000ull);
    double t1 = now();
    naive_rows(A, B, C, N, N / 16);
    sink += (uint64_t)C[(N / 16) * N - 1];
    double t2 = now();
    printf("core %2d: alu %.3f s  naive (N=%ld, first %ld rows) %.3f s\n", cpu, t1 - t0, N, N / 16, t2 - t1);
  }
  sched_setaffinity(0, sizeof allowed, &allowed);
  return 0;
}

/* ---- pin: what page-locking costs, and what it buys ------------------------------------- */

struct chunk {
  char *p;
  size_t n;
  const char *src;
  int op; /* 0 register, 1 unregister, 2 memcpy from src */
  CUresult r;
};

static void *chunk_work(void *arg) {
  struct chunk *c = arg;
  c->r = cu.CtxSetCurrent(ctx);
  if (c->r == 0) {
    if (c->op == 0) {
      c->r = cu.MemHostRegister(c->p, c->n, 1);
    } else if (c->op == 1) {
      c->r = cu.MemHostUnregister(c->p);
    } else {
      memcpy(c->p, c->src, c->n);
    }
  }
  return NULL;
}

/* Runs op over `threads` equal chunks of p[0..n), one thread each; returns seconds. */
static double parallel(int op, char *p, const char *src, size_t n, int threads) {
  pthread_t t[64];
  struct chunk c[64];
  size_t per = (n / (size_t)threads + 4095) & ~(size_t)4095;
  double t0 = now();
  for (int i = 0; i < threads; ++i) {
    size_t lo = per * (size_t)i;
    size_t hi = lo + per < n ? lo + per : n;
    c[i] = (struct chunk){p + lo, hi - lo, src ? src + lo : NULL, op, 0};
    pthread_create(&t[i], NULL, chunk_work, &c[i]);
  }
  for (int i = 0; i < threads; ++i) {
    pthread_join(t[i], NULL);
    check(c[i].r, op == 0 ? "cuMemHostRegister (chunk)" : "cuMemHostUnregister (chunk)");
  }
  return now() - t0;
}

/* Seconds for one synchronous host->device copy; negative when the driver refuses it. */
static double h2d(CUdeviceptr d, const void *h, size_t n) {
  double t0 = now();
  CUresult r = cu.MemcpyHtoD(d, h, n);
  if (r != 0) {
    printf("pin: cuMemcpyHtoD of %zu bytes refused with CUDA error %d\n", n, r);
    return -1.0;
  }
  check(cu.CtxSynchronize(), "cuCtxSynchronize");
  return now() - t0;
}

static int probe_pin(double gib, int threads) {
  size_t n = ((size_t)(gib * (double)(1ull << 30)) + 4095) & ~(size_t)4095;
  double g = (double)n / 1e9;
  char *h = aligned_alloc(4096, n);
  if (h == NULL) {
    return 2;
  }
  memset(h, 1, n);
  load_driver();
  open_gpu0();
  CUdeviceptr d;
  double t = now();
  check(cu.MemAlloc(&d, n), "cuMemAlloc");
  printf("pin %.2f GB: cuMemAlloc %.3f s\n", g, now() - t);
  t = now();
  check(cu.MemFree(d), "cuMemFree");
  printf("pin %.2f GB: cuMemFree %.3f s\n", g, now() - t);
  t = now();
  check(cu.MemAlloc(&d, n / 2), "cuMemAlloc");
  printf("pin %.2f GB: cuMemAlloc of half %.3f s\n", g, now() - t);
  check(cu.MemFree(d), "cuMemFree");
  check(cu.MemAlloc(&d, n), "cuMemAlloc");
  t = h2d(d, h, n);
  printf("pin %.2f GB: pageable host->device %.3f s (%.1f GB/s)\n", g, t, g / t);
  t = parallel(0, h, NULL, n, 1);
  printf("pin %.2f GB: register whole, 1 thread %.3f s (%.0f ms/GB)\n", g, t, 1e3 * t / g);
  t = h2d(d, h, n);
  printf("pin %.2f GB: host->device from one registration %.3f s (%.1f GB/s)\n", g, t, g / t);
  t = parallel(1, h, NULL, n, 1);
  printf("pin %.2f GB: unregister whole %.3f s\n", g, t);
  t = parallel(0, h, NULL, n, threads);
  printf("pin %.2f GB: register in %d chunks, %d threads %.3f s (%.0f ms/GB)\n", g, threads, threads, t,
         1e3 * t / g);
  t = h2d(d, h, n);
  printf("pin %.2f GB: one host->device copy across the %d registrations %.3f s (%.1f GB/s)\n", g, threads, t,
         g / t);
  t = parallel(1, h, NULL, n, threads);
  printf("pin %.2f GB: unregister %d chunks in parallel %.3f s\n", g, threads, t);
  size_t stage = (size_t)1 << 28;
  char *s = aligned_alloc(4096, stage);
  if (s == NULL) {
    return 2;
  }
  memset(s, 0, stage);
  check(cu.MemHostRegister(s, stage, 1), "cuMemHostRegister (staging)");
  for (int k = 1; k <= threads; k *= 2) {
    double best = 1e9;
    for (int rep = 0; rep < 3; ++rep) {
      double u = parallel(2, s, h + (size_t)rep * stage, stage, k);
      best = u < best ? u : best;
    }
    printf("pin: memcpy of 256 MiB pageable -> pinned staging, %d threads %.1f GB/s\n", k,
           (double)stage / 1e9 / best);
  }
  t = h2d(d, s, stage);
  printf("pin: host->device from the pinned staging buffer %.1f GB/s\n", (double)stage / 1e9 / t);
  return 0;
}

/* ---- occupancy ---------------------------------------------------------------------- */

static int probe_occupancy(const char *path, const char *kernel, int block) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "cuda_probe: cannot read %s\n", path);
    return 2;
  }
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *ptx = calloc((size_t)len + 1, 1);
  if (ptx == NULL || fread(ptx, 1, (size_t)len, f) != (size_t)len) {
    return 2;
  }
  fclose(f);
  load_driver();
  open_gpu0();
  CUmodule m;
  CUfunction fn;
  check(cu.ModuleLoadData(&m, ptx), "cuModuleLoadData");
  check(cu.ModuleGetFunction(&fn, m, kernel), "cuModuleGetFunction");
  int regs = 0, local = 0, blocks = 0, sms = 0;
  check(cu.FuncGetAttribute(&regs, 4, fn), "cuFuncGetAttribute(NUM_REGS)");
  check(cu.FuncGetAttribute(&local, 3, fn), "cuFuncGetAttribute(LOCAL_SIZE_BYTES)");
  check(cu.Occupancy(&blocks, fn, block, 0), "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  check(cu.DeviceGetAttribute(&sms, 16, 0), "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
  printf("occupancy %s: %d registers, %d B local, %d blocks of %d per SM, %d SMs (%d blocks at once)\n",
         kernel, regs, local, blocks, block, sms, blocks * sms);
  return 0;
}

/* ---- hog: leave a GPU almost full, to see how a program meets out-of-memory ---- */

static int probe_hog(double leave_mib, double seconds) {
  load_driver();
  open_gpu0();
  size_t free_b = 0, total_b = 0, held = 0;
  const size_t leave = (size_t)(leave_mib * 1048576.0), chunk = (size_t)256 << 20;
  check(cu.MemGetInfo(&free_b, &total_b), "cuMemGetInfo");
  /* Chunks, not one allocation: whatever the driver's own granularity, free ends near LEAVE. */
  while (free_b > leave + chunk) {
    CUdeviceptr p;
    if (cu.MemAlloc(&p, chunk) != 0) {
      break;
    }
    held += chunk;
    check(cu.MemGetInfo(&free_b, &total_b), "cuMemGetInfo");
  }
  printf("hog: holding %.0f MiB, %.0f MiB free of %.0f MiB\n", (double)held / 1048576.0, (double)free_b / 1048576.0,
         (double)total_b / 1048576.0);
  fflush(stdout);
  struct timespec t = {(time_t)seconds, 0};
  nanosleep(&t, NULL);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "host") == 0) {
    return probe_host(atol(argv[2]));
  }
  if (argc == 3 && strcmp(argv[1], "host-par") == 0) {
    long N = atol(argv[2]);
    float *A, *B, *C;
    if (!make_inputs(N, &A, &B, &C)) {
      return 2;
    }
    time_host("no CUDA, no threads", A, B, C, N);
    parallel_pass(A, B, C, N, 8);
    time_host("after an 8-thread pass over A and B", A, B, C, N);
    time_host("again", A, B, C, N);
    parallel_pass(A, B, C, N, 1);
    time_host("after a 1-thread pass", A, B, C, N);
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "cores") == 0) {
    return probe_cores(atol(argv[2]));
  }
  if (argc == 4 && strcmp(argv[1], "pin") == 0) {
    int threads = atoi(argv[3]);
    if (threads < 1 || threads > 64) {
      return 2;
    }
    return probe_pin(atof(argv[2]), threads);
  }
  if (argc == 4 && strcmp(argv[1], "hog") == 0) {
    return probe_hog(atof(argv[2]), atof(argv[3]));
  }
  if (argc == 5 && strcmp(argv[1], "occupancy") == 0) {
    return probe_occupancy(argv[2], argv[3], atoi(argv[4]));
  }
  fprintf(stderr,
          "usage: cuda_probe host N | host-par N | cores N | pin GIB THREADS | occupancy PTX KERNEL BLOCK | "
          "hog LEAVE_MIB SECONDS\n");
  return 2;
}
