/*
 * open_probe.c -- what opening GPUs costs a process, phase by phase, so that the runtime's
 * start-up on several GPUs can be laid out from numbers: the driver's initialization, each
 * primary context (one GPU alone, two one after the other, two on threads of their own),
 * a stream, peer access between two GPUs. Plain C, the driver loaded with dlopen; run on
 * the GPU machine, one process per case (a process initializes the driver once):
 *
 *   open_probe one|serial|parallel|peer
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
  printf("gpu %d: context %.1f ms, stream %.1f ms\n", i, c - t, now() - c);
  return NULL;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "one") && strcmp(mode, "serial") && strcmp(mode, "parallel") && strcmp(mode, "peer")) {
    fprintf(stderr, "usage: open_probe one|serial|parallel|peer\n");
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
  double t = now();
  check(cu.Init(0), "cuInit");
  printf("dlopen %.1f ms, cuInit %.1f ms\n", t - start, now() - t);
  t = now();
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
