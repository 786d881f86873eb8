/*
 * cudart.c -- the CUDA runtime API's memory, device, error, stream and event functions,
 * from NVIDIA's own header, over the runtime's virtual buffers: an HPVM-C node updates
 * cudaMalloc'd memory in place on the devices, and copies in and out of it (whole buffers,
 * sub-ranges, device to device, memset) must see and leave the latest bytes. Every step is
 * checked against a host model; errors are CUDA's codes.
 *
 * Usage: cudart [N]   (default 1000). Prints a checksum; exit 0 PASS.
 */
#include <cuda_runtime_api.h>
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../programs/check.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

static int failures = 0;
#define EXPECT(cond)                                                                               \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "cudart.c:%d: failed: %s\n", __LINE__, #cond);                               \
      ++failures;                                                                                  \
    }                                                                                              \
  } while (0)

void Twice(float *a, size_t bytes, long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, a, 1, a);
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (i < n) a[i] = 2.0f * a[i] + 1.0f;
  __hpvm__return(0);
}

void Root(float *a, size_t bytes, long n) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, a, 1, a);
  void *k = __hpvm__createNodeND(1, Twice, n);
  __hpvm__bindIn(k, 0, 0, 0);
  __hpvm__bindIn(k, 1, 1, 0);
  __hpvm__bindIn(k, 2, 2, 0);
}

typedef struct __attribute__((__packed__)) {
  float *a;
  size_t bytes;
  long n;
} In;

/* Host functions on a stream count their calls. */
static int host_calls = 0;
static void count_call(void *n) { ++*(int *)n; }
static void count_callback(cudaStream_t s, cudaError_t status, void *n) {
  if (status == cudaSuccess) ++*(int *)n;
}

/* The node on device memory `d`, and the same on the model `m`. */
static void twice(float *d, float *m, long n) {
  In args = {d, (size_t)n * sizeof(float), n};
  void *g = __hpvm__launch(0, Root, &args);
  __hpvm__wait(g);
  for (long i = 0; i < n; ++i) m[i] = 2.0f * m[i] + 1.0f;
}

/* The device buffer's bytes equal the model's. */
static int same(const float *d, const float *m, long n) {
  float *h = malloc((size_t)n * sizeof(float));
  int ok = cudaMemcpy(h, d, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess &&
           memcmp(h, m, (size_t)n * sizeof(float)) == 0;
  free(h);
  return ok;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000;
  if (n < 8 || argc > 2) {
    fprintf(stderr, "usage: %s [N >= 8]\n", argv[0]);
    return 2;
  }
  size_t bytes = (size_t)n * sizeof(float);
  __hpvm__init();
  int count = 0, dev = -1;
  EXPECT(cudaGetDeviceCount(&count) == cudaSuccess && count == 1);
  EXPECT(cudaSetDevice(0) == cudaSuccess && cudaGetDevice(&dev) == cudaSuccess && dev == 0);

  /* The one device: its properties, field by field the same as its attributes. */
  struct cudaDeviceProp p;
  memset(&p, 0xAB, sizeof p);
  EXPECT(cudaGetDeviceProperties(&p, 0) == cudaSuccess);
  EXPECT(strlen(p.name) > 0 && p.totalGlobalMem > 0 && p.managedMemory == 1 && p.unifiedAddressing == 1);
  int v = -1;
#define SAME_ATTRIBUTE(attr, field)                                                                \
  EXPECT(cudaDeviceGetAttribute(&v, attr, 0) == cudaSuccess && v == (int)(field))
  SAME_ATTRIBUTE(cudaDevAttrMultiProcessorCount, p.multiProcessorCount);
  SAME_ATTRIBUTE(cudaDevAttrMaxThreadsPerBlock, p.maxThreadsPerBlock);
  SAME_ATTRIBUTE(cudaDevAttrMaxBlockDimZ, p.maxThreadsDim[2]);
  SAME_ATTRIBUTE(cudaDevAttrMaxGridDimY, p.maxGridSize[1]);
  SAME_ATTRIBUTE(cudaDevAttrMaxSharedMemoryPerBlock, p.sharedMemPerBlock);
  SAME_ATTRIBUTE(cudaDevAttrMaxSharedMemoryPerBlockOptin, p.sharedMemPerBlockOptin);
  SAME_ATTRIBUTE(cudaDevAttrWarpSize, p.warpSize);
  SAME_ATTRIBUTE(cudaDevAttrComputeCapabilityMajor, p.major);
  SAME_ATTRIBUTE(cudaDevAttrComputeCapabilityMinor, p.minor);
  SAME_ATTRIBUTE(cudaDevAttrMaxRegistersPerBlock, p.regsPerBlock);
  SAME_ATTRIBUTE(cudaDevAttrL2CacheSize, p.l2CacheSize);
  SAME_ATTRIBUTE(cudaDevAttrMaxThreadsPerMultiProcessor, p.maxThreadsPerMultiProcessor);
  SAME_ATTRIBUTE(cudaDevAttrComputeMode, p.computeMode);
  SAME_ATTRIBUTE(cudaDevAttrUnifiedAddressing, p.unifiedAddressing);
  SAME_ATTRIBUTE(cudaDevAttrManagedMemory, p.managedMemory);
  EXPECT(p.multiProcessorCount >= 1 && p.maxThreadsPerBlock == 1024 && p.warpSize == 32 && p.major >= 3);
  EXPECT(p.maxThreadsDim[0] == 1024 && p.maxGridSize[0] == 2147483647);
  EXPECT(cudaGetDeviceProperties(&p, 1) == cudaErrorInvalidDevice && cudaGetLastError() == cudaErrorInvalidDevice);
  printf("device: %s, %d multiprocessors, compute capability %d.%d\n", p.name, p.multiProcessorCount, p.major,
         p.minor);

  float *model = malloc(bytes), *d = NULL, *e = NULL, *pinned = NULL;
  EXPECT(cudaMalloc((void **)&d, bytes) == cudaSuccess && d != NULL);
  EXPECT(cudaMalloc((void **)&e, bytes) == cudaSuccess && e != NULL);
  EXPECT(((size_t)d & 255) == 0);
  EXPECT(cudaMallocHost((void **)&pinned, bytes) == cudaSuccess);
  for (long i = 0; i < n; ++i) pinned[i] = model[i] = (float)(i % 101);

  cudaEvent_t start, stop;
  EXPECT(cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&stop) == cudaSuccess);
  EXPECT(cudaEventRecord(start, 0) == cudaSuccess);

  /* In, updated on the devices, out. */
  EXPECT(cudaMemcpy(d, pinned, bytes, cudaMemcpyHostToDevice) == cudaSuccess);
  twice(d, model, n);
  EXPECT(same(d, model, n));
  /* A sub-range in, through a pointer offset, while the devices hold the rest. */
  twice(d, model, n);
  float patch[5] = {-1, -2, -3, -4, -5};
  EXPECT(cudaMemcpy(d + n / 3, patch, sizeof patch, cudaMemcpyHostToDevice) == cudaSuccess);
  memcpy(model + n / 3, patch, sizeof patch);
  twice(d, model, n);
  EXPECT(same(d, model, n));
  /* A memset of the second half, then device to device into another buffer, on a stream. */
  cudaStream_t s;
  EXPECT(cudaStreamCreate(&s) == cudaSuccess);
  EXPECT(cudaMemsetAsync(d + n / 2, 0, (size_t)(n - n / 2) * sizeof(float), s) == cudaSuccess);
  memset(model + n / 2, 0, (size_t)(n - n / 2) * sizeof(float));
  EXPECT(cudaMemcpyAsync(e, d, bytes, cudaMemcpyDeviceToDevice, s) == cudaSuccess);
  EXPECT(cudaStreamSynchronize(s) == cudaSuccess);
  float *model_e = malloc(bytes);
  memcpy(model_e, model, bytes);
  twice(e, model_e, n);
  EXPECT(same(e, model_e, n));
  EXPECT(same(d, model, n));
  /* Overlapping device-to-device within one buffer, cudaMemcpyDefault. */
  EXPECT(cudaMemcpy(e + 1, e, 4 * sizeof(float), cudaMemcpyDefault) == cudaSuccess);
  memmove(model_e + 1, model_e, 4 * sizeof(float));
  EXPECT(same(e, model_e, n));
  EXPECT(cudaEventRecord(stop, s) == cudaSuccess && cudaEventSynchronize(stop) == cudaSuccess);
  float ms = -1;
  EXPECT(cudaEventElapsedTime(&ms, start, stop) == cudaSuccess && ms >= 0);

  /* A matrix in pitched memory. 2-D copies and memsets touch only the rows' bytes, and the node
   * runs over the whole allocation, padding included, which must keep its own values. */
  size_t rows = 7, cols = 33, pitch = 0;
  float *m2 = NULL, *mat = malloc(rows * cols * sizeof(float));
  EXPECT(cudaMallocPitch((void **)&m2, &pitch, cols * sizeof(float), rows) == cudaSuccess);
  EXPECT(pitch >= cols * sizeof(float) && pitch % 512 == 0);
  size_t stride = pitch / sizeof(float);
  long all = (long)(stride * rows);
  float *model_m = malloc(pitch * rows);
  for (size_t i = 0; i < rows * cols; ++i) mat[i] = (float)(i % 97);
  EXPECT(cudaMemset(m2, 0, pitch * rows) == cudaSuccess);
  memset(model_m, 0, pitch * rows);
  EXPECT(cudaMemcpy2D(m2, pitch, mat, cols * sizeof(float), cols * sizeof(float), rows, cudaMemcpyHostToDevice) ==
         cudaSuccess);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) model_m[r * stride + c] = mat[r * cols + c];
  twice(m2, model_m, all);
  EXPECT(same(m2, model_m, all));
  float sub[4 * 8];
  EXPECT(cudaMemcpy2D(sub, 8 * sizeof(float), m2 + 2 * stride + 3, pitch, 8 * sizeof(float), 4,
                      cudaMemcpyDeviceToHost) == cudaSuccess);
  for (size_t r = 0; r < 4; ++r)
    for (size_t c = 0; c < 8; ++c) EXPECT(sub[r * 8 + c] == model_m[(r + 2) * stride + 3 + c]);
  EXPECT(cudaMemset2D(m2 + stride, pitch, 0, 5 * sizeof(float), 3) == cudaSuccess);
  for (size_t r = 1; r < 4; ++r) memset(model_m + r * stride, 0, 5 * sizeof(float));
  twice(m2, model_m, all);
  EXPECT(same(m2, model_m, all));
  EXPECT(cudaMemcpy2D(m2, 4, mat, 4, 8, 1, cudaMemcpyHostToDevice) == cudaErrorInvalidPitchValue);
  EXPECT(cudaGetLastError() == cudaErrorInvalidPitchValue);
  EXPECT(cudaFree(m2) == cudaSuccess);
  free(mat);
  free(model_m);

  /* Errors: CUDA's codes, the last one kept until read. */
  EXPECT(cudaGetLastError() == cudaSuccess);
  EXPECT(cudaMemcpy(d + n - 1, patch, sizeof patch, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  EXPECT(cudaPeekAtLastError() == cudaErrorInvalidValue);
  EXPECT(cudaGetLastError() == cudaErrorInvalidValue && cudaGetLastError() == cudaSuccess);
  EXPECT(cudaMemcpy(patch, model, sizeof patch, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
  EXPECT(cudaMemcpy(d, patch, sizeof patch, (enum cudaMemcpyKind)7) == cudaErrorInvalidMemcpyDirection);
  EXPECT(cudaMemset(model, 0, 4) == cudaErrorInvalidValue);
  EXPECT(cudaSetDevice(1) == cudaErrorInvalidDevice);
  EXPECT(cudaFree(model) == cudaErrorInvalidValue);
  EXPECT(cudaFreeHost(d) == cudaErrorInvalidValue);
  EXPECT(cudaStreamDestroy(s) == cudaSuccess && cudaStreamDestroy(s) == cudaErrorInvalidResourceHandle);
  EXPECT(strcmp(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument") == 0);
  EXPECT(strcmp(cudaGetErrorName(cudaErrorInvalidDevice), "cudaErrorInvalidDevice") == 0);
  EXPECT(cudaGetLastError() == cudaErrorInvalidResourceHandle);

  /* Hints and limits: accepted, checked as CUDA checks them, changing nothing. */
  size_t limit = 0;
  EXPECT(cudaDeviceGetLimit(&limit, cudaLimitMallocHeapSize) == cudaSuccess && limit > 0);
  EXPECT(cudaDeviceSetLimit(cudaLimitStackSize, 4096) == cudaSuccess);
  EXPECT(cudaDeviceGetLimit(&limit, cudaLimitStackSize) == cudaSuccess && limit == 4096);
  EXPECT(cudaDeviceGetLimit(&limit, (enum cudaLimit)99) == cudaErrorUnsupportedLimit);
  EXPECT(cudaGetLastError() == cudaErrorUnsupportedLimit);
  int chosen = -1;
  EXPECT(cudaChooseDevice(&chosen, &p) == cudaSuccess && chosen == 0);
  float *um = NULL;
  EXPECT(cudaMallocManaged((void **)&um, 4096, cudaMemAttachGlobal) == cudaSuccess);
  EXPECT(cudaMemAdvise(um, 4096, cudaMemAdviseSetReadMostly, 0) == cudaSuccess);
  EXPECT(cudaMemAdvise(um, 4096, (enum cudaMemoryAdvise)42, 0) == cudaErrorInvalidValue);
  EXPECT(cudaMemPrefetchAsync(um + 16, 64, 0, 0) == cudaSuccess);
  EXPECT(cudaMemPrefetchAsync(um, 8192, cudaCpuDeviceId, 0) == cudaErrorInvalidValue);
  EXPECT(cudaMemPrefetchAsync(e, bytes, 0, 0) == cudaErrorInvalidValue);
  /* CUDA 12.2's spellings with a location, which the C++ overloads call. */
  struct cudaMemLocation gpu = {cudaMemLocationTypeDevice, 0}, cpu = {cudaMemLocationTypeHost, 0};
  struct cudaMemLocation none = {cudaMemLocationTypeInvalid, 0};
  EXPECT(cudaMemAdvise_v2(um, 4096, cudaMemAdviseSetPreferredLocation, gpu) == cudaSuccess);
  EXPECT(cudaMemAdvise_v2(um, 4096, cudaMemAdviseSetAccessedBy, none) == cudaErrorInvalidValue);
  EXPECT(cudaMemPrefetchAsync_v2(um, 4096, cpu, 0, 0) == cudaSuccess);
  EXPECT(cudaMemPrefetchAsync_v2(um, 4096, gpu, 1, 0) == cudaErrorInvalidValue);
  EXPECT(cudaMemPrefetchAsync_v2(e, bytes, gpu, 0, 0) == cudaErrorInvalidValue);
  EXPECT(cudaStreamAttachMemAsync(0, um, 0, cudaMemAttachHost) == cudaSuccess);
  EXPECT(cudaStreamAttachMemAsync(0, um + 8, 64, cudaMemAttachSingle) == cudaSuccess);
  EXPECT(cudaStreamAttachMemAsync(0, um, 0, 3) == cudaErrorInvalidValue);
  EXPECT(cudaStreamAttachMemAsync(0, e, 0, cudaMemAttachGlobal) == cudaErrorInvalidValue);
  EXPECT(cudaGetLastError() == cudaErrorInvalidValue);
  EXPECT(cudaFree(um) == cudaSuccess);
  float *page = malloc(4096);
  EXPECT(cudaHostRegister(page, 4096, cudaHostRegisterDefault) == cudaSuccess);
  EXPECT(cudaHostRegister(page, 4096, cudaHostRegisterDefault) == cudaErrorHostMemoryAlreadyRegistered);
  EXPECT(cudaHostUnregister(page) == cudaSuccess && cudaHostUnregister(page) == cudaErrorHostMemoryNotRegistered);
  EXPECT(cudaGetLastError() == cudaErrorHostMemoryNotRegistered);
  free(page);
  /* A host function on a stream runs after the stream's work: it sees the kernel's result. */
  cudaStream_t hs;
  EXPECT(cudaStreamCreate(&hs) == cudaSuccess);
  EXPECT(cudaLaunchHostFunc(hs, count_call, &host_calls) == cudaSuccess);
  EXPECT(cudaStreamAddCallback(hs, count_callback, &host_calls, 0) == cudaSuccess);
  EXPECT(cudaStreamAddCallback(hs, count_callback, &host_calls, 1) == cudaErrorInvalidValue);
  EXPECT(cudaStreamSynchronize(hs) == cudaSuccess && host_calls == 2);
  EXPECT(cudaStreamDestroy(hs) == cudaSuccess);
  EXPECT(cudaGetLastError() == cudaErrorInvalidValue);

  float *result = malloc(bytes);
  EXPECT(cudaMemcpy(result, e, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
  printf("checksum %016llx\n", fnv1a(result, bytes));
  EXPECT(cudaEventDestroy(start) == cudaSuccess && cudaEventDestroy(stop) == cudaSuccess);
  EXPECT(cudaFree(d) == cudaSuccess && cudaFree(e) == cudaSuccess && cudaFreeHost(pinned) == cudaSuccess);
  EXPECT(cudaFree(d) == cudaErrorInvalidValue);
  EXPECT(cudaDeviceSynchronize() == cudaSuccess);
  __hpvm__cleanup();
  free(model);
  free(model_e);
  free(result);
  printf("%s\n", failures ? "FAIL" : "PASS");
  return failures != 0;
}
