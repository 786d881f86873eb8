/*
 * launch_probe.c -- what one kernel launch costs the host in the CUDA driver, by how it is
 * made: the runtime's launch path chooses its parameters' layout, its stream, and what it
 * does around each launch from these numbers. Plain C, the driver loaded with dlopen (no
 * toolkit needed); built by scripts/device/prepare, run on the GPU machine:
 *
 *   launch_probe [LAUNCHES [empty|kernel|none]]      (default 20000; a second argument: the
 *                                first graphs only, after that warm-up)
 *
 * Each case launches an empty-bodied one-block kernel LAUNCHES times and synchronizes; it
 * prints the host's microseconds per launch (median of 5 rounds). The round-trip cases
 * then wait after every launch (launch, wait, launch...: PolyBench's lu), by each of the ways
 * a runtime may wait (the driver's waits, or polling a query), and print the microseconds per launch-and-wait. Exit status: 0 done, 1 a
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
  CUresult (*GraphExecDestroy)(CUgraphExec);
  CUresult (*GraphLaunch)(CUgraphExec, CUstream);
  CUresult (*GraphExecKernelNodeSetParams)(CUgraphExec, CUgraphNode, const KernelNodeParams *);
  CUresult (*StreamBeginCapture)(CUstream, int);
  CUresult (*StreamEndCapture)(CUstream, CUgraph *);
  CUresult (*GraphExecUpdate)(CUgraphExec, CUgraph, void *);
  CUresult (*GraphDestroy)(CUgraph);
  CUresult (*GraphAddEmptyNode)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t);
  CUresult (*GraphNodeSetEnabled)(CUgraphExec, CUgraphNode, unsigned);
  CUresult (*MemcpyDtoH)(void *, unsigned long long, size_t);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*EventSynchronize)(CUevent);
  CUresult (*StreamQuery)(CUstream);
  CUresult (*EventQuery)(CUevent);
  CUresult (*DevicePrimaryCtxSetFlags)(CUdevice, unsigned);
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
enum { WAIT_CONTEXT, WAIT_STREAM, WAIT_EVENT, POLL_STREAM, POLL_EVENT };

/* CUDA_ERROR_NOT_READY: the work is not done yet. */
#define NOT_READY 600

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
      } else if (how == WAIT_EVENT) {
        check(cu.EventRecord(ev, s), "cuEventRecord");
        check(cu.EventSynchronize(ev), "cuEventSynchronize");
      } else if (how == POLL_STREAM) {
        CUresult q;
        while ((q = cu.StreamQuery(s)) == NOT_READY) {
        }
        check(q, "cuStreamQuery");
      } else {
        check(cu.EventRecord(ev, s), "cuEventRecord");
        CUresult q;
        while ((q = cu.EventQuery(ev)) == NOT_READY) {
        }
        check(q, "cuEventQuery");
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

/* Makes a chain of `nodes` launches of `f` (parameters of 17 words or 3, as `f` takes), launches
 * it once and waits for it; the caller times it. */
static void graph_one(CUfunction f, CUstream s, int nodes, unsigned long long word) {
  uint64_t a = word, w[17] = {0};
  void *ptrs[17];
  ptrs[0] = &a;
  for (int i = 1; i < 17; ++i) ptrs[i] = &w[i];
  KernelNodeParams p = {f, 1, 1, 1, 32, 1, 1, 0, ptrs, NULL};
  CUgraph g;
  CUgraphNode node[64];
  CUgraphExec exec;
  check(cu.GraphCreate(&g, 0), "cuGraphCreate");
  for (int i = 0; i < nodes; ++i)
    check(cu.GraphAddKernelNode(&node[i], g, i ? &node[i - 1] : NULL, i ? 1 : 0, &p), "cuGraphAddKernelNode");
  check(cu.GraphInstantiate(&exec, g, 0), "cuGraphInstantiate");
  check(cu.GraphLaunch(exec, s), "cuGraphLaunch");
  check(cu.StreamSynchronize(s), "cuStreamSynchronize");
}

/* One executable chain of CHAIN kernel nodes reused for every sequence: before each launch,
 * every node is given another kernel, grid and parameters (cuGraphExecKernelNodeSetParams may
 * change the function), alternating between two sequences, and the last `off` nodes are
 * disabled (cuGraphNodeSetEnabled) as a shorter sequence would need. The host's microseconds
 * per kernel run; *ok is set when a last run of k3 nodes, each writing its index, leaves the
 * index of the last enabled node (the chain ran in order, with the parameters set last). */
enum { CHAIN = 32 };
static double reused_chain(CUfunction k3, CUfunction k17, CUstream s, int n, int off, unsigned long long word, int *ok) {
  uint64_t a = word, w[17] = {0};
  uint32_t b[CHAIN];
  void *p3[CHAIN][3], *p17[17];
  p17[0] = &a;
  for (int i = 1; i < 17; ++i) p17[i] = &w[i];
  for (int k = 0; k < CHAIN; ++k) {
    b[k] = (uint32_t)k;
    p3[k][0] = &a;
    p3[k][1] = &b[k];
    p3[k][2] = &b[k];
  }
  KernelNodeParams q3 = {k3, 1, 1, 1, 32, 1, 1, 0, p3[0], NULL};
  KernelNodeParams q17 = {k17, 2, 1, 1, 64, 1, 1, 0, p17, NULL};
  CUgraph g;
  CUgraphNode node[CHAIN];
  CUgraphExec exec;
  check(cu.GraphCreate(&g, 0), "cuGraphCreate");
  for (int i = 0; i < CHAIN; ++i)
    check(cu.GraphAddKernelNode(&node[i], g, i ? &node[i - 1] : NULL, i ? 1 : 0, &q3), "cuGraphAddKernelNode");
  check(cu.GraphInstantiate(&exec, g, 0), "cuGraphInstantiate");
  for (int k = CHAIN - off; k < CHAIN; ++k) check(cu.GraphNodeSetEnabled(exec, node[k], 0), "cuGraphNodeSetEnabled");
  double rounds[5];
  int launches = n / CHAIN + 1;
  for (int r = 0; r < 5; ++r) {
    double t = now();
    for (int i = 0; i < launches; ++i) {
      for (int k = 0; k < CHAIN - off; ++k) {
        KernelNodeParams q = (i & 1) ? q17 : q3;
        if (!(i & 1)) q.kernelParams = p3[k];
        check(cu.GraphExecKernelNodeSetParams(exec, node[k], &q), "SetParams (another kernel)");
      }
      check(cu.GraphLaunch(exec, s), "cuGraphLaunch");
    }
    check(cu.StreamSynchronize(s), "cuStreamSynchronize");
    rounds[r] = (now() - t) / (launches * (CHAIN - off)) * 1e6;
  }
  for (int k = 0; k < CHAIN - off; ++k) {
    KernelNodeParams q = q3;
    q.kernelParams = p3[k];
    check(cu.GraphExecKernelNodeSetParams(exec, node[k], &q), "SetParams");
  }
  check(cu.GraphLaunch(exec, s), "cuGraphLaunch");
  check(cu.StreamSynchronize(s), "cuStreamSynchronize");
  uint32_t got = 0;
  check(cu.MemcpyDtoH(&got, word, 4), "cuMemcpyDtoH");
  *ok = got == (uint32_t)(CHAIN - off - 1);
  check(cu.GraphExecDestroy(exec), "cuGraphExecDestroy");
  check(cu.GraphDestroy(g), "cuGraphDestroy");
  qsort(rounds, 5, sizeof rounds[0], cmp);
  return rounds[2];
}

/* What making a graph of a chain of `nodes` launches of `f` costs the host before its first
 * kernel runs: create, add the nodes, instantiate, and the first cuGraphLaunch (which uploads
 * the graph), in microseconds per graph (median of 5, each a new graph); and, replayed after,
 * with every node's parameters set anew, the microseconds per kernel. Whether a sequence seen
 * once or twice is worth a graph, and how long a graph should be, follow from these. */
static void graph_build(CUfunction f, CUstream s, int nodes, unsigned long long word, double *build, double *replay) {
  uint64_t a = word;
  uint32_t b = 0, c = 0;
  void *ptrs[3] = {&a, &b, &c};
  KernelNodeParams p = {f, 1, 1, 1, 32, 1, 1, 0, ptrs, NULL};
  double rounds[5], again[5];
  for (int r = 0; r < 5; ++r) {
    CUgraph g;
    CUgraphNode node[64];
    CUgraphExec exec;
    check(cu.StreamSynchronize(s), "cuStreamSynchronize");
    double t = now();
    check(cu.GraphCreate(&g, 0), "cuGraphCreate");
    for (int i = 0; i < nodes; ++i)
      check(cu.GraphAddKernelNode(&node[i], g, i ? &node[i - 1] : NULL, i ? 1 : 0, &p), "cuGraphAddKernelNode");
    check(cu.GraphInstantiate(&exec, g, 0), "cuGraphInstantiate");
    check(cu.GraphLaunch(exec, s), "cuGraphLaunch");
    rounds[r] = (now() - t) * 1e6;
    check(cu.StreamSynchronize(s), "cuStreamSynchronize");
    int replays = 2000 / nodes + 1;
    t = now();
    for (int i = 0; i < replays; ++i) {
      b = (uint32_t)i;
      for (int k = 0; k < nodes; ++k) check(cu.GraphExecKernelNodeSetParams(exec, node[k], &p), "SetParams");
      check(cu.GraphLaunch(exec, s), "cuGraphLaunch");
    }
    check(cu.StreamSynchronize(s), "cuStreamSynchronize");
    again[r] = (now() - t) / (replays * nodes) * 1e6;
    check(cu.GraphExecDestroy(exec), "cuGraphExecDestroy");
    check(cu.GraphDestroy(g), "cuGraphDestroy");
  }
  qsort(rounds, 5, sizeof rounds[0], cmp);
  qsort(again, 5, sizeof again[0], cmp);
  *build = rounds[2];
  *replay = again[2];
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 20000;
  if (n < 1) {
    fprintf(stderr, "usage: launch_probe [LAUNCHES >= 1 [empty|kernel|none]]\n");
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
  LOAD(GraphExecDestroy, "cuGraphExecDestroy");
  LOAD(GraphAddEmptyNode, "cuGraphAddEmptyNode");
  LOAD(GraphNodeSetEnabled, "cuGraphNodeSetEnabled");
  LOAD(MemcpyDtoH, "cuMemcpyDtoH_v2");
  LOAD(StreamSynchronize, "cuStreamSynchronize");
  LOAD(EventSynchronize, "cuEventSynchronize");
  LOAD(StreamQuery, "cuStreamQuery");
  LOAD(EventQuery, "cuEventQuery");
  LOAD(DevicePrimaryCtxSetFlags, "cuDevicePrimaryCtxSetFlags_v2");
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction k3, k17, kp;
  CUstream nonblocking;
  CUevent ev[2];
  check(cu.Init(0), "cuInit");
  check(cu.DeviceGet(&dev, 0), "cuDeviceGet");
  /* LAUNCH_PROBE_SCHED=spin|yield|blocking: the context's scheduling flag (CU_CTX_SCHED_*;
   * default auto, as CUDA's runtime leaves it), set before the context is made. */
  const char *sched = getenv("LAUNCH_PROBE_SCHED");
  if (sched && *sched) {
    unsigned flag = strcmp(sched, "spin") == 0 ? 1 : strcmp(sched, "yield") == 0 ? 2 : strcmp(sched, "blocking") == 0 ? 4 : 0;
    check(cu.DevicePrimaryCtxSetFlags(dev, flag), "cuDevicePrimaryCtxSetFlags");
    printf("context scheduling: %s\n", sched);
  }
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
      {"wait: legacy stream, polling cuStreamQuery", k3, 3, NULL, POLL_STREAM},
      {"wait: non-blocking, polling cuStreamQuery", k3, 3, nonblocking, POLL_STREAM},
      {"wait: non-blocking, event record, polling", k3, 3, nonblocking, POLL_EVENT},
  };
  for (size_t c = 0; c < sizeof trips / sizeof trips[0]; ++c) {
    per_round_trip(trips[c].f, trips[c].nparams, trips[c].s, trips[c].how, n / 20 + 1, timeless, word);
    double us = per_round_trip(trips[c].f, trips[c].nparams, trips[c].s, trips[c].how, n / 4, timeless, word);
    printf("%-45s %.3f us/launch-and-wait\n", trips[c].name, us);
  }
  /* The process's first graph (a chain of 32) alone: what the driver does once per context
   * for graphs, beside what each graph costs (the cases after). `launch_probe N empty` or
   * `launch_probe N kernel` first makes and launches a graph of one empty node, or of one
   * kernel, and times that too: whether such a warm-up takes the first graph's extra cost. */
  {
    const char *warm = argc > 2 ? argv[2] : "none";
    if (strcmp(warm, "none") != 0) {
      double t = now();
      if (strcmp(warm, "empty") == 0) {
        CUgraph g;
        CUgraphNode node;
        CUgraphExec exec;
        check(cu.GraphCreate(&g, 0), "cuGraphCreate");
        check(cu.GraphAddEmptyNode(&node, g, NULL, 0), "cuGraphAddEmptyNode");
        check(cu.GraphInstantiate(&exec, g, 0), "cuGraphInstantiate");
        check(cu.GraphLaunch(exec, nonblocking), "cuGraphLaunch");
        check(cu.StreamSynchronize(nonblocking), "cuStreamSynchronize");
      } else {
        graph_one(k3, nonblocking, 1, word);
      }
      printf("warm-up graph (%s)                                 %.1f us\n", warm, (now() - t) * 1e6);
    }
    double t = now();
    graph_one(k17, nonblocking, 32, word);
    printf("first graph of the process (32 nodes), made and launched %.1f us\n", (now() - t) * 1e6);
    t = now();
    graph_one(k17, nonblocking, 32, word);
    printf("second graph of the same kernel                    %.1f us\n", (now() - t) * 1e6);
    t = now();
    graph_one(k3, nonblocking, 32, word);
    printf("third graph, another kernel                        %.1f us\n", (now() - t) * 1e6);
    if (argc > 2) return 0;
  }
  for (int off = 0; off <= 2; off += 2) {
    int ok = 0;
    reused_chain(k3, k17, nonblocking, n / 10 + 1, off, word, &ok); /* warm-up */
    double us = reused_chain(k3, k17, nonblocking, n, off, word, &ok);
    printf("one chain of %d reused, every node's kernel changed, %d disabled: %.3f us/kernel (%s)\n", CHAIN, off, us,
           ok ? "ran in order" : "WRONG RESULT");
  }
  static const int chains[] = {4, 8, 16, 32, 64};
  for (size_t c = 0; c < sizeof chains / sizeof chains[0]; ++c) {
    double build, replay;
    graph_build(k3, nonblocking, chains[c], word, &build, &replay); /* warm-up */
    graph_build(k3, nonblocking, chains[c], word, &build, &replay);
    printf("graph of %2d: made and first launched %9.1f us/graph; replayed, all params set %.3f us/kernel\n", chains[c], build, replay);
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
