/*
 * open_probe.c -- what opening GPUs costs a process, phase by phase, so that the runtime's
 * start-up on several GPUs can be laid out from numbers: the driver's initialization, each
 * primary context (one GPU alone, two one after the other, two on threads of their own),
 * a stream, peer access between two GPUs), and whether opening a second GPU in the
 * background stalls work on the first (`work`: GPU 0's work alone; `background`: the same
 * work while another thread opens GPU 1 and enables peer access both ways). Plain C, the
 * driver loaded with dlopen; run on the GPU machine, one process per case (a process
 * initializes the driver once):
 *
 *   open_probe one|serial|parallel|peer|work|background
 *
 * Prints each phase's milliseconds; the caller times the whole process (exit included, where
 * the driver tears the contexts down). Exit status: 0 done, 1 a CUDA call failed, 2 usage.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUstream;

static struct {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*StreamCreate)(CUstream *, unsigned);
  CUresult (*CtxEnablePeerAccess)(CUcontext, unsigned);
  CUresult (*MemAlloc)(unsigned long long *, size_t);
  CUresult (*MemsetD8Async)(unsigned long long, unsigned char, size_t, CUstream);
  CUresult (*StreamSynchronize)(CUstream);
} cu;

static void check(CUresult r, const char *what) {
  if (r != 0) {
    fprintf(stderr, "open_probe: %s failed (%d)\n", what, r);
    exit(1);
  }
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static CUcontext ctx[2];
static CUstream stream[2];

/* Opens GPU `i`: its primary context, current on this thread, and a stream. */
static void *open_gpu(void *arg) {
  int i = (int)(long)arg;
  CUdevice d;
  CUstream s;
  double t = now();
  check(cu.DeviceGet(&d, i), "cuDeviceGet");
  check(cu.DevicePrimaryCtxRetain(&ctx[i], d), "cuDevicePrimaryCtxRetain");
  check(cu.CtxSetCurrent(ctx[i]), "cuCtxSetCurrent");
  double c = now();
  check(cu.StreamCreate(&s, 1), "cuStreamCreate");
  stream[i] = s;
  printf("gpu %d: context %.1f ms, stream %.1f ms\n", i, c - t, now() - c);
  return NULL;
}

/* Opens GPU 1 and enables peer access both ways, as a runtime would in the background. */
static void *open_second(void *arg) {
  (void)arg;
  double t = now();
  open_gpu((void *)1);
  check(cu.CtxEnablePeerAccess(ctx[0], 0), "cuCtxEnablePeerAccess 1->0");
  check(cu.CtxSetCurrent(ctx[0]), "cuCtxSetCurrent");
  check(cu.CtxEnablePeerAccess(ctx[1], 0), "cuCtxEnablePeerAccess 0->1");
  printf("background: GPU 1 open, peer access both ways, %.1f ms\n", now() - t);
  return NULL;
}

/* Work on GPU 0 from the main thread for 300 ms: an allocation, then short asynchronous
 * fills, each waited for and timed. A stall behind another thread's context creation shows
 * as a long step (those over 2 ms are listed, at their start since the work began). */
static void gpu0_work(void) {
  unsigned long long p;
  double t = now();
  check(cu.CtxSetCurrent(ctx[0]), "cuCtxSetCurrent");
  check(cu.MemAlloc(&p, 64 << 20), "cuMemAlloc");
  printf("work: allocation %.2f ms\n", now() - t);
  double worst = 0, all = now();
  int fills = 0;
  while (now() - all < 300) {
    double s = now();
    check(cu.MemsetD8Async(p, (unsigned char)fills, 1 << 20, stream[0]), "cuMemsetD8Async");
    check(cu.StreamSynchronize(stream[0]), "cuStreamSynchronize");
    double e = now() - s;
    if (e > 2) printf("work: a fill took %.2f ms, at %.1f ms\n", e, s - all);
    if (e > worst) worst = e;
    ++fills;
  }
  printf("work: %d fills in %.1f ms, the longest %.2f ms\n", fills, now() - all, worst);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  int work = !strcmp(mode, "work") || !strcmp(mode, "background");
  if (strcmp(mode, "one") && strcmp(mode, "serial") && strcmp(mode, "parallel") && strcmp(mode, "peer") && !work) {
    fprintf(stderr, "usage: open_probe one|serial|parallel|peer|work|background\n");
    return 2;
  }
  double start = now();
  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "open_probe: no CUDA driver: %s\n", dlerror());
    return 1;
  }
#define LOAD(field, name) *(void **)&cu.field = dlsym(lib, name)
  LOAD(Init, "cuInit");
  LOAD(DeviceGet, "cuDeviceGet");
  LOAD(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  LOAD(CtxSetCurrent, "cuCtxSetCurrent");
  LOAD(StreamCreate, "cuStreamCreate");
  LOAD(CtxEnablePeerAccess, "cuCtxEnablePeerAccess");
  LOAD(MemAlloc, "cuMemAlloc_v2");
  LOAD(MemsetD8Async, "cuMemsetD8Async");
  LOAD(StreamSynchronize, "cuStreamSynchronize");
  double t = now();
  check(cu.Init(0), "cuInit");
  printf("dlopen %.1f ms, cuInit %.1f ms\n", t - start, now() - t);
  t = now();
  if (work) {
    open_gpu((void *)0);
    printf("opening GPU 0 %.1f ms\n", now() - t);
    pthread_t opener;
    if (!strcmp(mode, "background")) pthread_create(&opener, NULL, open_second, NULL);
    gpu0_work();
    if (!strcmp(mode, "background")) pthread_join(opener, NULL);
    printf("total before exit %.1f ms\n", now() - start);
    return 0;
  }
  if (!strcmp(mode, "one")) {
    open_gpu((void *)0);
  } else if (!strcmp(mode, "serial")) {
    open_gpu((void *)0);
    open_gpu((void *)1);
  } else {
    pthread_t th[2];
    for (long i = 0; i < 2; ++i) pthread_create(&th[i], NULL, open_gpu, (void *)i);
    for (int i = 0; i < 2; ++i) pthread_join(th[i], NULL);
  }
  printf("opening (%s) %.1f ms\n", mode, now() - t);
  if (!strcmp(mode, "peer")) {
    t = now();
    check(cu.CtxSetCurrent(ctx[0]), "cuCtxSetCurrent");
    check(cu.CtxEnablePeerAccess(ctx[1], 0), "cuCtxEnablePeerAccess 0->1");
    check(cu.CtxSetCurrent(ctx[1]), "cuCtxSetCurrent");
    check(cu.CtxEnablePeerAccess(ctx[0], 0), "cuCtxEnablePeerAccess 1->0");
    printf("peer access both ways %.1f ms\n", now() - t);
  }
  printf("total before exit %.1f ms\n", now() - start);
  return 0;
}
