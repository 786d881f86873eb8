/*
 * launch_probe.c -- what one kernel launch costs the host in the CUDA driver, by how it is
 * made: the runtime's launch path chooses its parameters' layout, its stream, and what it
 * does around each launch from these numbers. Plain C, the driver loaded with dlopen (no
 * toolkit needed); built by scripts/device/prepare, run on the GPU machine:
 *
 *   launch_probe [LAUNCHES]      (default 20000)
 *
 * Each case launches an empty-bodied one-block kernel LAUNCHES times and synchronizes; it
 * prints the host's microseconds per launch (median of 5 rounds). The round-trip cases
 * then wait after every launch (launch, wait, launch...: PolyBench's lu), by each of the ways
 * a runtime may wait, and print the microseconds per launch-and-wait. Exit status: 0 done, 1 a
 * CUDA call failed (named on stderr), 2 bad arguments.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream, *CUevent, *CUgraph, *CUgraphNode, *CUgraphExec;

/* CUDA_KERNEL_NODE_PARAMS (v1), as the driver's header lays it out. */
typedef struct {
  CUfunction func;
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
  void **kernelParams;
  void **extra;
} KernelNodeParams;

static struct {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*CtxSynchronize)(void);
  CUresult (*ModuleLoadData)(CUmodule *, const void *);
  CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*StreamCreate)(CUstream *, unsigned);
  CUresult (*EventCreate)(CUevent *, unsigned);
  CUresult (*EventRecord)(CUevent, CUstream);
  CUresult (*MemAlloc)(unsigned long long *, size_t);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                           void **, void **);
  CUresult (*GraphCreate)(CUgraph *, unsigned);
  CUresult (*GraphAddKernelNode)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const KernelNodeParams *);
  CUresult (*GraphInstantiate)(CUgraphExec *, CUgraph, unsigned long long);
  CUresult (*GraphLaunch)(CUgraphExec, CUstream);
  CUresult (*GraphExecKernelNodeSetParams)(CUgraphExec, CUgraphNode, const KernelNodeParams *);
  CUresult (*StreamBeginCapture)(CUstream, int);
  CUresult (*StreamEndCapture)(CUstream, CUgraph *);
  CUresult (*GraphExecUpdate)(CUgraphExec, CUgraph, void *);
  CUresult (*GraphDestroy)(CUgraph);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*EventSynchronize)(CUevent);
} cu;

static void check(CUresult r, const char *what) {
  if (r != 0) {
    fprintf(stderr, "launch_probe: %s failed (%d)\n", what, r);
    exit(1);
  }
}

/* Three kernels with the same body (thread 0 stores one word): 3 scalar parameters, 17
 * (the runtime's blocks kernels: pointers, scalars and the partition's offsets), and the 17
 * packed into one 136-byte parameter. */
static const char *PTX =
    ".version 7.8\n.target sm_80\n.address_size 64\n"
    ".visible .entry k3(.param .u64 a, .param .u32 b, .param .u32 c) {\n"
    " .reg .b64 %rd<2>; .reg .b32 %r<2>;\n ld.param.u64 %rd1, [a]; ld.param.u32 %r1, [b];\n"
    " st.global.u32 [%rd1], %r1; ret; }\n"
    ".visible .entry k17(.param .u64 a, .param .u64 p1, .param .u32 b, .param .u32 c, .param .u64 p4,"
    " .param .u64 p5, .param .u64 p6, .param .u64 p7, .param .u64 p8, .param .u64 p9, .param .u64 p10,"
    " .param .u64 p11, .param .u64 p12, .param .u64 p13, .param .u64 p14, .param .u64 p15, .param .u64 p16) {\n"
    " .reg .b64 %rd<2>; .reg .b32 %r<2>;\n ld.param.u64 %rd1, [a]; ld.param.u32 %r1, [b];\n"
    " st.global.u32 [%rd1], %r1; ret; }\n"
    ".visible .entry kpacked(.param .align 8 .b8 p[136]) {\n"
    " .reg .b64 %rd<2>; .reg .b32 %r<2>;\n ld.param.u64 %rd1, [p]; ld.param.u32 %r1, [p+16];\n"
    " st.global.u32 [%rd1], %r1; ret; }\n";

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

enum { PLAIN, SET_CURRENT, EVENTS };

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The kernels store to `word`, a device address. */
static double per_launch(CUfunction f, int nparams, CUstream s, int extra, int n, CUcontext ctx, CUevent *ev,
                         unsigned long long word) {
  uint64_t words[17] = {0};
  unsigned char packed[136] = {0};
  void *ptrs[17];
  for (int i = 0; i < 17; ++i) ptrs[i] = &words[i];
  words[0] = word;
  memcpy(packed, &word, sizeof word);
  double rounds[5];
  for (int r = 0; r < 5; ++r) {
    double t = now();
    for (int i = 0; i < n; ++i) {
      if (extra == SET_CURRENT) check(cu.CtxSetCurrent(ctx), "cuCtxSetCurrent");
      if (extra == EVENTS) check(cu.EventRecord(ev[0], s), "cuEventRecord");
      void *one[1] = {packed};
      check(cu.LaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, nparams == 1 ? one : ptrs, NULL), "cuLaunchKernel");
      if (extra == EVENTS) check(cu.EventRecord(ev[1], s), "cuEventRecord");
    }
    check(cu.CtxSynchronize(), "cuCtxSynchronize");
    rounds[r] = (now() - t) / n * 1e6;
  }
  qsort(rounds, 5, sizeof rounds[0], cmp);
  return rounds[2];
}

/* How a round-trip case waits after each launch. */
enum { WAIT_CONTEXT, WAIT_STREAM, WAIT_EVENT };

/* Launch, wait, launch...: the host's microseconds per launch-and-wait (median of 5). */
static double per_round_trip(CUfunction f, int nparams, CUstream s, int how, int n, CUevent ev,
                             unsigned long long word) {
  uint64_t words[17] = {0};
  void *ptrs[17];
  for (int i = 0; i < 17; ++i) ptrs[i] = &words[i];
  words[0] = word;
  (void)nparams;
  double rounds[5];
  for (int r = 0; r < 5; ++r) {
    double t = now();
    for (int i = 0; i < n; ++i) {
      check(cu.LaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, ptrs, NULL), "cuLaunchKernel");
      if (how == WAIT_CONTEXT) {
        check(cu.CtxSynchronize(), "cuCtxSynchronize");
      } else if (how == WAIT_STREAM) {
        check(cu.StreamSynchronize(s), "cuStreamSynchronize");
      } else {
        check(cu.EventRecord(ev, s), "cuEventRecord");
        check(cu.EventSynchronize(ev), "cuEventSynchronize");
      }
    }
    rounds[r] = (now() - t) / n * 1e6;
  }
  qsort(rounds, 5, sizeof rounds[0], cmp);
  return rounds[2];
}

/* Kernels per graph in the graph cases. */
enum { NODES = 30 };

/* A graph of NODES launches of `f` (3 parameters) in a chain, replayed n / NODES times:
 * the host's microseconds per kernel. With `changed` > 0, that many nodes get new parameter
 * values (cuGraphExecKernelNodeSetParams) before each replay, as a time step's scalar
 * changes; with `capture`, every replay is captured anew from plain launches on the stream
 * and the executable graph updated from it (cuGraphExecUpdate) instead. */
static double per_graph_kernel(CUfunction f, CUstream s, int n, int changed, int capture, unsigned long long word) {
  uint64_t a = word;
  uint32_t b = 0, c = 0;
  void *ptrs[3] = {&a, &b, &c};
  KernelNodeParams p = {f, 1, 1, 1, 32, 1, 1, 0, ptrs, NULL};
  CUgraph g;
  CUgraphNode nodes[NODES];
  check(cu.GraphCreate(&g, 0), "cuGraphCreate");
  for (int i = 0; i < NODES; ++i)
    check(cu.GraphAddKernelNode(&nodes[i], g, i ? &nodes[i - 1] : NULL, i ? 1 : 0, &p), "cuGraphAddKernelNode");
  CUgraphExec exec;
  check(cu.GraphInstantiate(&exec, g, 0), "cuGraphInstantiate");
  double rounds[5];
  int replays = n / NODES + 1;
  for (int r = 0; r < 5; ++r) {
    double t = now();
    for (int i = 0; i < replays; ++i) {
      b = (uint32_t)i;
      if (capture) {
        CUgraph cg;
        check(cu.StreamBeginCapture(s, 2 /* relaxed */), "cuStreamBeginCapture");
        for (int k = 0; k < NODES; ++k)
          check(cu.LaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, ptrs, NULL), "cuLaunchKernel (captured)");
        check(cu.StreamEndCapture(s, &cg), "cuStreamEndCapture");
        char result[64];
        check(cu.GraphExecUpdate(exec, cg, result), "cuGraphExecUpdate");
        check(cu.GraphDestroy(cg), "cuGraphDestroy");
      }
      for (int k = 0; k < changed; ++k) check(cu.GraphExecKernelNodeSetParams(exec, nodes[k], &p), "SetParams");
      check(cu.GraphLaunch(exec, s), "cuGraphLaunch");
    }
    check(cu.StreamSynchronize(s), "cuStreamSynchronize");
    rounds[r] = (now() - t) / (replays * NODES) * 1e6;
  }
  qsort(rounds, 5, sizeof rounds[0], cmp);
  return rounds[2];
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 20000;
  if (n < 1) {
    fprintf(stderr, "usage: launch_probe [LAUNCHES >= 1]\n");
    return 2;
  }
  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "launch_probe: no CUDA driver: %s\n", dlerror());
    return 1;
  }
#define LOAD(field, name) *(void **)&cu.field = dlsym(lib, name)
  LOAD(Init, "cuInit");
  LOAD(DeviceGet, "cuDeviceGet");
  LOAD(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  LOAD(CtxSetCurrent, "cuCtxSetCurrent");
  LOAD(CtxSynchronize, "cuCtxSynchronize");
  LOAD(ModuleLoadData, "cuModuleLoadData");
  LOAD(ModuleGetFunction, "cuModuleGetFunction");
  LOAD(StreamCreate, "cuStreamCreate");
  LOAD(EventCreate, "cuEventCreate");
  LOAD(EventRecord, "cuEventRecord");
  LOAD(LaunchKernel, "cuLaunchKernel");
  LOAD(MemAlloc, "cuMemAlloc_v2");
  LOAD(GraphCreate, "cuGraphCreate");
  LOAD(GraphAddKernelNode, "cuGraphAddKernelNode");
  LOAD(GraphInstantiate, "cuGraphInstantiateWithFlags");
  LOAD(GraphLaunch, "cuGraphLaunch");
  LOAD(GraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams");
  LOAD(StreamBeginCapture, "cuStreamBeginCapture_v2");
  LOAD(StreamEndCapture, "cuStreamEndCapture");
  LOAD(GraphExecUpdate, "cuGraphExecUpdate_v2");
  LOAD(GraphDestroy, "cuGraphDestroy");
  LOAD(StreamSynchronize, "cuStreamSynchronize");
  LOAD(EventSynchronize, "cuEventSynchronize");
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction k3, k17, kp;
  CUstream nonblocking;
  CUevent ev[2];
  check(cu.Init(0), "cuInit");
  check(cu.DeviceGet(&dev, 0), "cuDeviceGet");
  check(cu.DevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cu.CtxSetCurrent(ctx), "cuCtxSetCurrent");
  check(cu.ModuleLoadData(&mod, PTX), "cuModuleLoadData");
  check(cu.ModuleGetFunction(&k3, mod, "k3"), "k3");
  check(cu.ModuleGetFunction(&k17, mod, "k17"), "k17");
  check(cu.ModuleGetFunction(&kp, mod, "kpacked"), "kpacked");
  check(cu.StreamCreate(&nonblocking, 1), "cuStreamCreate");
  check(cu.EventCreate(&ev[0], 0), "cuEventCreate");
  check(cu.EventCreate(&ev[1], 0), "cuEventCreate");
  unsigned long long word;
  check(cu.MemAlloc(&word, 256), "cuMemAlloc");
  struct {
    const char *name;
    CUfunction f;
    int nparams;
    CUstream s;
    int extra;
  } cases[] = {
      {"3 params, legacy stream", k3, 3, NULL, PLAIN},
      {"3 params, non-blocking stream", k3, 3, nonblocking, PLAIN},
      {"17 params, non-blocking stream", k17, 17, nonblocking, PLAIN},
      {"17 params packed in one, non-blocking", kp, 1, nonblocking, PLAIN},
      {"17 params, cuCtxSetCurrent before each", k17, 17, nonblocking, SET_CURRENT},
      {"17 params, two cuEventRecord around each", k17, 17, nonblocking, EVENTS},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    per_launch(cases[c].f, cases[c].nparams, cases[c].s, cases[c].extra, n / 10 + 1, ctx, ev, word); /* warm-up */
    double us = per_launch(cases[c].f, cases[c].nparams, cases[c].s, cases[c].extra, n, ctx, ev, word);
    printf("%-45s %.3f us/launch\n", cases[c].name, us);
  }
  CUstream blocking;
  check(cu.StreamCreate(&blocking, 0), "cuStreamCreate");
  CUevent timeless;
  check(cu.EventCreate(&timeless, 2 /* CU_EVENT_DISABLE_TIMING */), "cuEventCreate");
  struct {
    const char *name;
    CUfunction f;
    int nparams;
    CUstream s;
    int how;
  } trips[] = {
      {"wait: legacy stream, cuCtxSynchronize", k3, 3, NULL, WAIT_CONTEXT},
      {"wait: legacy stream, cuStreamSynchronize", k3, 3, NULL, WAIT_STREAM},
      {"wait: blocking stream, cuStreamSynchronize", k3, 3, blocking, WAIT_STREAM},
      {"wait: non-blocking, cuStreamSynchronize", k3, 3, nonblocking, WAIT_STREAM},
      {"wait: non-blocking, 17 params", k17, 17, nonblocking, WAIT_STREAM},
      {"wait: non-blocking, cuCtxSynchronize", k3, 3, nonblocking, WAIT_CONTEXT},
      {"wait: non-blocking, event record and sync", k3, 3, nonblocking, WAIT_EVENT},
  };
  for (size_t c = 0; c < sizeof trips / sizeof trips[0]; ++c) {
    per_round_trip(trips[c].f, trips[c].nparams, trips[c].s, trips[c].how, n / 20 + 1, timeless, word);
    double us = per_round_trip(trips[c].f, trips[c].nparams, trips[c].s, trips[c].how, n / 4, timeless, word);
    printf("%-45s %.3f us/launch-and-wait\n", trips[c].name, us);
  }
  struct {
    const char *name;
    int changed, capture;
  } graphs[] = {
      {"graph of 30, replayed", 0, 0},
      {"graph of 30, 20 nodes' params set per replay", 20, 0},
      {"graph of 30, all 30 nodes' params set", NODES, 0},
      {"graph of 30, captured anew and updated", 0, 1},
  };
  for (size_t c = 0; c < sizeof graphs / sizeof graphs[0]; ++c) {
    per_graph_kernel(k3, nonblocking, n / 10 + 1, graphs[c].changed, graphs[c].capture, word); /* warm-up */
    double us = per_graph_kernel(k3, nonblocking, n, graphs[c].changed, graphs[c].capture, word);
    printf("%-45s %.3f us/kernel\n", graphs[c].name, us);
  }
  return 0;
}
