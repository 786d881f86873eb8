/*
 * A stand-in CUDA driver (libcuda.so) for machines without a GPU: it lets the runtime's GPU
 * path (contexts, streams, held launches, graphs, copies, address reservations) run on the
 * CPU, so that its own per-launch work can be profiled with perf and iterated on here.
 *
 * Kernels do not run: cuLaunchKernel only counts (and, with FAKECUDA_LAUNCH_NS, spins that
 * long, as a driver's submission would). Device memory is host memory, so copies move the
 * bytes they are asked to. Results of a program run on it are wrong by construction: this
 * is a profiling tool, never a test of results.
 *
 * Settings: FAKECUDA_GPUS (GPUs listed, default 1), FAKECUDA_LAUNCH_NS, FAKECUDA_COUNT,
 * FAKECUDA_ASSERT_AT=N: the Nth kernel launch stands for one whose device-side `assert`
 * failed; from then on every synchronization and copy answers CUDA_ERROR_ASSERT, as a real
 * driver's unusable context does; and FAKECUDA_LATCH=NAME: a kernel whose name contains NAME
 * spins, once launched, until the host sets the `unsigned` its first parameter points to (a
 * latch in page-locked memory): a call that would wait for the GPU meanwhile (a
 * synchronization, a synchronous copy) is the deadlock the real driver would meet, reported
 * (`fakecuda: deadlock: ...`) with exit status 3; queries answer "not ready"; and
 * FAKECUDA_TRACE=1: every call that orders work (stream creation, launch, event record, stream
 * wait, synchronization) on stderr, with its stream and event numbered in creation order, to
 * see which streams a program's launches go to and what each waits for.
 * Build: scripts/fake-cuda/build DIR; run with LD_LIBRARY_PATH=DIR HPVM_MGPU_DEVICES=cuda:1.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *Handle;

enum { OK = 0, INVALID_VALUE = 1, NOT_READY = 600, PEER_ALREADY = 704, ASSERT = 710 };

/* Set by the launch FAKECUDA_ASSERT_AT names. */
static int asserted;
#define FAULT if (asserted) return ASSERT

/* FAKECUDA_LATCH: the latch a launched spinning kernel waits on, until the host sets it. */
static volatile unsigned *latch;
static int spinning(void) {
    if (latch && *latch != 0) latch = NULL;
    return latch != NULL;
}
/* In a call that waits for the GPU: a spinning kernel would never let it return. */
#define WAITS do { if (spinning()) { \
    fprintf(stderr, "fakecuda: deadlock: %s waits for a kernel spinning on a latch the host has not set\n", __func__); \
    _exit(3); } } while (0)
#define QUERY do { if (spinning()) return NOT_READY; } while (0)

static int gpus(void) {
    const char *s = getenv("FAKECUDA_GPUS");
    int n = s ? atoi(s) : 1;
    return n < 1 ? 1 : n > 16 ? 16 : n;
}

static long long launch_ns = -1;

static void spin(long long ns) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec) < ns);
}


/* FAKECUDA_COUNT=1: how often each entry point was called, printed at exit. */
static struct { const char *name; unsigned long long n; } calls[128];
static unsigned long long launches;
static void report(void) {
    fprintf(stderr, "fakecuda %10llu kernels run\n", launches);
    for (int i = 0; i < 128 && calls[i].name; i++) fprintf(stderr, "fakecuda %10llu %s\n", calls[i].n, calls[i].name);
}
static void count(const char *name) {
    static int on = -1;
    if (on < 0) {
        on = getenv("FAKECUDA_COUNT") != NULL;
        if (on) atexit(report);
    }
    if (!on) return;
    for (int i = 0; i < 128; i++) {
        if (!calls[i].name) calls[i].name = name;
        if (calls[i].name == name) { calls[i].n++; return; }
    }
}
#define C count(__func__)

/* Every opaque handle (context, stream, event, module, function, graph) is a small heap
 * object that is never freed: the runtime keeps them for the run anyway. */
static Handle handle(void) { return calloc(1, 64); }

/* FAKECUDA_TRACE: streams and events carry their creation number at byte 8 of the handle. */
static int tracing(void) {
    static int on = -1;
    if (on < 0) on = getenv("FAKECUDA_TRACE") != NULL;
    return on;
}
static int numbered(Handle h, int *next) {
    if (!h) return 0;
    int *n = (int *)((char *)h + 8);
    if (!*n) *n = ++*next;
    return *n;
}
static int streams_made, events_made;
#define S(h) numbered(h, &streams_made)
#define E(h) numbered(h, &events_made)
#define TRACE(...) do { if (tracing()) fprintf(stderr, "fakecuda: " __VA_ARGS__); } while (0)

CUresult cuInit(unsigned flags) { C; (void)flags; return OK; }
CUresult cuDriverGetVersion(int *v) { C; *v = 12080; return OK; }
CUresult cuGetErrorString(CUresult e, const char **s) { C; (void)e; *s = "fake CUDA error"; return OK; }
CUresult cuGetErrorName(CUresult e, const char **s) { C; (void)e; *s = "CUDA_ERROR_FAKE"; return OK; }

CUresult cuDeviceGetCount(int *n) { C; *n = gpus(); return OK; }
CUresult cuDeviceGet(CUdevice *d, int i) { C; if (i < 0 || i >= gpus()) return INVALID_VALUE; *d = i; return OK; }
CUresult cuDeviceGetName(char *name, int len, CUdevice d) { C; snprintf(name, len, "Fake GPU %d", d); return OK; }
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) { C; (void)d; *bytes = 80ULL << 30; return OK; }

/* Attribute numbers as CUDA's headers give them; an H100's values. */
CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) { C;
    (void)d;
    switch (attr) {
    case 1: *v = 1024; break;                 /* max threads per block */
    case 2: *v = 1024; break;                 /* block x */
    case 3: *v = 1024; break;                 /* block y */
    case 4: *v = 64; break;                   /* block z */
    case 5: *v = 2147483647; break;           /* grid x */
    case 6: case 7: *v = 65535; break;        /* grid y, z */
    case 8: *v = 49152; break;                /* shared per block */
    case 9: *v = 65536; break;                /* constant memory */
    case 10: *v = 32; break;                  /* warp size */
    case 12: *v = 65536; break;               /* registers per block */
    case 13: *v = 1755000; break;             /* clock */
    case 16: *v = 132; break;                 /* multiprocessors */
    case 36: *v = 2619000; break;             /* memory clock */
    case 37: *v = 5120; break;                /* bus width */
    case 38: *v = 52428800; break;            /* L2 */
    case 39: *v = 2048; break;                /* threads per multiprocessor */
    case 75: *v = 9; break;                   /* capability major */
    case 76: *v = 0; break;                   /* minor */
    case 81: *v = 233472; break;              /* shared per multiprocessor */
    case 82: *v = 65536; break;               /* registers per multiprocessor */
    case 97: *v = 232448; break;              /* shared per block, opt-in */
    default: *v = 1; break;
    }
    return OK;
}
CUresult cuDeviceCanAccessPeer(int *can, CUdevice a, CUdevice b) { C; *can = a != b; return OK; }
CUresult cuDeviceGetP2PAttribute(int *v, int attr, CUdevice a, CUdevice b) { C; (void)a; (void)b; *v = attr == 1 ? 0 : 1; return OK; }

static Handle contexts[16];
static __thread Handle current;
CUresult cuDevicePrimaryCtxRetain(Handle *ctx, CUdevice d) { C;
    if (!contexts[d]) contexts[d] = handle();
    *ctx = contexts[d];
    return OK;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { C; (void)d; return OK; }
CUresult cuCtxSetCurrent(Handle ctx) { C; current = ctx; return OK; }
CUresult cuCtxGetCurrent(Handle *ctx) { C; *ctx = current; return OK; }
CUresult cuCtxPushCurrent_v2(Handle ctx) { C; current = ctx; return OK; }
CUresult cuCtxPopCurrent_v2(Handle *ctx) { C; if (ctx) *ctx = current; return OK; }
CUresult cuCtxSynchronize(void) { C; TRACE("context synchronized\n"); FAULT; WAITS; return OK; }
CUresult cuCtxEnablePeerAccess(Handle ctx, unsigned flags) { C; (void)ctx; (void)flags; return OK; }
static size_t limits[7];
CUresult cuCtxSetLimit(int limit, size_t value) { C; if (limit < 0 || limit > 6) return 1; limits[limit] = value; return OK; }
CUresult cuCtxGetLimit(size_t *value, int limit) { C; if (limit < 0 || limit > 6) return 1; *value = limits[limit]; return OK; }

CUresult cuStreamCreate(Handle *s, unsigned flags) { C; (void)flags; *s = handle(); TRACE("stream %d made\n", S(*s)); return OK; }
CUresult cuStreamCreateWithPriority(Handle *s, unsigned flags, int priority) { C; (void)flags; *s = handle(); TRACE("stream %d made with priority %d\n", S(*s), priority); return OK; }
CUresult cuStreamDestroy_v2(Handle s) { C; (void)s; return OK; }
CUresult cuStreamSynchronize(Handle s) { C; TRACE("stream %d synchronized\n", S(s)); FAULT; WAITS; return OK; }
CUresult cuStreamQuery(Handle s) { C; (void)s; FAULT; QUERY; return OK; }
CUresult cuStreamWaitEvent(Handle s, Handle e, unsigned f) { C; (void)f; TRACE("stream %d waits for event %d\n", S(s), E(e)); return OK; }

CUresult cuEventCreate(Handle *e, unsigned flags) { C; (void)flags; *e = handle(); return OK; }
CUresult cuEventDestroy_v2(Handle e) { C; (void)e; return OK; }
CUresult cuEventRecord(Handle e, Handle s) { C; TRACE("event %d recorded on stream %d\n", E(e), S(s)); return OK; }
CUresult cuEventSynchronize(Handle e) { C; (void)e; FAULT; WAITS; return OK; }
CUresult cuEventQuery(Handle e) { C; (void)e; FAULT; QUERY; return OK; }
CUresult cuEventElapsedTime(float *ms, Handle a, Handle b) { C; (void)a; (void)b; *ms = 0.001f; return OK; }
CUresult cuEventElapsedTime_v2(float *ms, Handle a, Handle b) { C; return cuEventElapsedTime(ms, a, b); }

CUresult cuModuleLoadData(Handle *m, const void *image) { C; (void)image; *m = handle(); return OK; }
CUresult cuModuleLoadDataEx(Handle *m, const void *image, unsigned n, void *o, void **v) { C;
    (void)n; (void)o; (void)v;
    return cuModuleLoadData(m, image);
}
CUresult cuModuleUnload(Handle m) { C; (void)m; return OK; }
CUresult cuModuleGetFunction(Handle *f, Handle m, const char *name) { C;
    (void)m;
    *f = handle();
    const char *spin = getenv("FAKECUDA_LATCH");
    if (spin && *spin && strstr(name, spin)) *(int *)*f = 1; /* marks a spinning kernel */
    return OK;
}
/* A module's global: 64 KiB of zeros, fresh per lookup (the runtime looks each up once). */
CUresult cuModuleGetGlobal_v2(CUdeviceptr *p, size_t *bytes, Handle m, const char *name) { C;
    (void)m; (void)name;
    if (p) *p = (CUdeviceptr)calloc(1, 65536);
    if (bytes) *bytes = 65536;
    return OK;
}
CUresult cuFuncSetAttribute(Handle f, int a, int v) { C; (void)f; (void)a; (void)v; return OK; }
CUresult cuFuncGetAttribute(int *v, int a, Handle f) { C; (void)a; (void)f; *v = 32; return OK; }
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, Handle f, int block, size_t shmem) { C;
    (void)f; (void)shmem;
    *n = block > 0 ? 2048 / block : 1;
    return OK;
}

CUresult cuLaunchKernel(Handle f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, Handle s, void **params, void **extra) {
    C;
    (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shmem; (void)params; (void)extra;
    TRACE("launch of %u x %u x %u blocks on stream %d\n", gx, gy, gz, S(s));
    if (launch_ns < 0) {
        const char *v = getenv("FAKECUDA_LAUNCH_NS");
        launch_ns = v ? atoll(v) : 0;
    }
    if (launch_ns) spin(launch_ns);
    launches++;
    if (*(int *)f == 1 && params) latch = *(volatile unsigned **)params[0];
    const char *at = getenv("FAKECUDA_ASSERT_AT");
    if (at && (unsigned long long)atoll(at) == launches) asserted = 1;
    return OK;
}

CUresult cuLaunchCooperativeKernel(Handle f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                   unsigned bz, unsigned shmem, Handle s, void **params) {
    C;
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, NULL);
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) { C;
    void *m = aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
    if (!m) return 2;
    *p = (CUdeviceptr)m;
    return OK;
}
CUresult cuMemFree_v2(CUdeviceptr p) { C; WAITS; free((void *)p); return OK; }
CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned flags) { C; (void)flags; *p = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096); return *p ? OK : 2; }
CUresult cuMemFreeHost(void *p) { C; free(p); return OK; }
CUresult cuMemHostRegister_v2(void *p, size_t bytes, unsigned flags) { C; (void)p; (void)bytes; (void)flags; return OK; }
CUresult cuMemHostUnregister(void *p) { C; (void)p; return OK; }
/* No pointer is the driver's own device memory here (a kernel's heap never runs). */
CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p) { C; (void)data; (void)attr; (void)p; return INVALID_VALUE; }
/* Unified addressing: mapped host memory has its host address on the device. */
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned flags) { C; (void)flags; *d = (CUdeviceptr)p; return OK; }

#define P(x) ((void *)(uintptr_t)(x))
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, Handle st) { C; (void)st; FAULT; memcpy(P(d), s, n); return OK; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { C; FAULT; WAITS; memcpy(P(d), s, n); return OK; }
CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, Handle st) { C; (void)st; FAULT; memcpy(d, P(s), n); return OK; }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { C; FAULT; WAITS; memcpy(d, P(s), n); return OK; }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { C; memmove(P(d), P(s), n); return OK; }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, Handle st) { C; (void)st; return cuMemcpyDtoD_v2(d, s, n); }
CUresult cuMemcpyPeerAsync(CUdeviceptr d, Handle dc, CUdeviceptr s, Handle sc, size_t n, Handle st) { C;
    (void)dc; (void)sc; (void)st;
    return cuMemcpyDtoD_v2(d, s, n);
}

typedef struct {
    size_t srcXInBytes, srcY;
    int srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    void *srcArray;
    size_t srcPitch;
    size_t dstXInBytes, dstY;
    int dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    void *dstArray;
    size_t dstPitch;
    size_t WidthInBytes, Height;
} Copy2D;

CUresult cuMemcpy2DAsync_v2(const Copy2D *c, Handle st) { C; FAULT;
    (void)st;
    const char *s = c->srcMemoryType == 1 ? c->srcHost : P(c->srcDevice);
    char *d = c->dstMemoryType == 1 ? c->dstHost : P(c->dstDevice);
    for (size_t y = 0; y < c->Height; y++)
        memmove(d + (c->dstY + y) * c->dstPitch + c->dstXInBytes, s + (c->srcY + y) * c->srcPitch + c->srcXInBytes,
                c->WidthInBytes);
    return OK;
}
CUresult cuMemcpy2D_v2(const Copy2D *c) { C; WAITS; return cuMemcpy2DAsync_v2(c, 0); }

typedef struct {
    size_t srcXInBytes, srcY, srcZ, srcLOD;
    int srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    void *srcArray, *srcContext;
    size_t srcPitch, srcHeight;
    size_t dstXInBytes, dstY, dstZ, dstLOD;
    int dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    void *dstArray, *dstContext;
    size_t dstPitch, dstHeight;
    size_t WidthInBytes, Height, Depth;
} Copy3DPeer;

CUresult cuMemcpy3DPeerAsync(const Copy3DPeer *c, Handle st) { C;
    (void)st;
    const char *s = c->srcMemoryType == 1 ? c->srcHost : P(c->srcDevice);
    char *d = c->dstMemoryType == 1 ? c->dstHost : P(c->dstDevice);
    for (size_t z = 0; z < c->Depth; z++)
        for (size_t y = 0; y < c->Height; y++)
            memmove(d + ((c->dstZ + z) * c->dstHeight + c->dstY + y) * c->dstPitch + c->dstXInBytes,
                    s + ((c->srcZ + z) * c->srcHeight + c->srcY + y) * c->srcPitch + c->srcXInBytes, c->WidthInBytes);
    return OK;
}

CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, Handle st) { C; (void)st; memset(P(d), v, n); return OK; }
CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { C; WAITS; memset(P(d), v, n); return OK; }
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, Handle st) { C;
    (void)st;
    for (size_t i = 0; i < n; i++) ((unsigned *)P(d))[i] = v;
    return OK;
}
CUresult cuMemsetD2D32Async(CUdeviceptr d, size_t pitch, unsigned v, size_t w, size_t h, Handle st) { C;
    (void)st;
    for (size_t y = 0; y < h; y++)
        for (size_t x = 0; x < w; x++) ((unsigned *)P(d + y * pitch))[x] = v;
    return OK;
}

/* Virtual memory: reservations are PROT_NONE mappings, maps make them readable. */
#define GRANULE (2u << 20)
CUresult cuMemGetAllocationGranularity(size_t *g, const void *prop, int option) { C; (void)prop; (void)option; *g = GRANULE; return OK; }
CUresult cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr, unsigned long long flags) { C;
    (void)align; (void)flags;
    void *m = mmap(P(addr), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return 2;
    *p = (CUdeviceptr)m;
    return OK;
}
CUresult cuMemAddressFree(CUdeviceptr p, size_t size) { C; munmap(P(p), size); return OK; }
CUresult cuMemCreate(unsigned long long *h, size_t size, const void *prop, unsigned long long flags) { C;
    (void)prop; (void)flags;
    size_t *s = malloc(sizeof *s);
    *s = size;
    *h = (unsigned long long)s;
    return OK;
}
CUresult cuMemRelease(unsigned long long h) { C; free(P(h)); return OK; }
CUresult cuMemMap(CUdeviceptr p, size_t size, size_t offset, unsigned long long h, unsigned long long flags) { C;
    (void)offset; (void)h; (void)flags;
    return mmap(P(p), size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED ? 2 : OK;
}
CUresult cuMemUnmap(CUdeviceptr p, size_t size) { C;
    return mmap(P(p), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED ? 2 : OK;
}
CUresult cuMemSetAccess(CUdeviceptr p, size_t size, const void *desc, size_t n) { C; (void)p; (void)size; (void)desc; (void)n; return OK; }

/* Graphs: replaying one counts its enabled kernel nodes as launches. */
typedef struct { unsigned nodes, disabled; Handle off[256]; } Graph;
CUresult cuGraphCreate(Handle *g, unsigned flags) { C; (void)flags; *g = calloc(1, sizeof(Graph)); return OK; }
CUresult cuGraphDestroy(Handle g) { C; free(g); return OK; }
CUresult cuGraphAddKernelNode_v2(Handle *node, Handle g, const Handle *deps, size_t n, const void *params) { C;
    (void)deps; (void)n; (void)params;
    ((Graph *)g)->nodes++;
    *node = handle();
    return OK;
}
CUresult cuGraphInstantiateWithFlags(Handle *exec, Handle g, unsigned long long flags) { C;
    (void)flags;
    Graph *e = malloc(sizeof *e);
    *e = *(Graph *)g;
    *exec = e;
    return OK;
}
CUresult cuGraphExecDestroy(Handle e) { C; free(e); return OK; }
CUresult cuGraphExecKernelNodeSetParams_v2(Handle e, Handle node, const void *params) { C; (void)e; (void)node; (void)params; return OK; }
CUresult cuGraphLaunch(Handle e, Handle st) { C; (void)st; launches += ((Graph *)e)->nodes - ((Graph *)e)->disabled; return OK; }
CUresult cuGraphNodeSetEnabled(Handle e, Handle node, unsigned on) { C;
    Graph *g = e;
    unsigned i = 0;
    while (i < g->disabled && g->off[i] != node) i++;
    if (on && i < g->disabled) g->off[i] = g->off[--g->disabled];
    else if (!on && i == g->disabled && g->disabled < 256) g->off[g->disabled++] = node;
    return OK;
}
