/*
 * pools.cu -- the newer host API single-GPU programs use, each call checked as CUDA defines it:
 *   stream-ordered allocation  cudaMallocAsync / cudaFreeAsync on a stream made with a
 *                              priority (cudaDeviceGetStreamPriorityRange), and from the
 *                              default pool after setting its release threshold
 *   pointer attributes         cudaPointerGetAttributes of device, managed, page-locked and
 *                              plain host memory (an address inside an allocation included)
 *   stream queries             priority, flags, an L2 access-policy attribute
 *   peer copies                cudaMemcpyPeer on the one device, and to a device there is not
 * A kernel squares a buffer allocated in stream order; checked against the host exactly.
 * Usage: pools [N]   (default 1000)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

static int failures = 0;
#define EXPECT(cond)                                                                         \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);                    \
      ++failures;                                                                            \
    }                                                                                        \
  } while (0)

__global__ void square(const int *in, int *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = in[i] * in[i] + 1;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  if (n < 1) {
    fprintf(stderr, "usage: pools [N >= 1]\n");
    return 2;
  }
  int least = 1, greatest = 1;
  EXPECT(cudaDeviceGetStreamPriorityRange(&least, &greatest) == cudaSuccess);
  EXPECT(greatest <= least);
  cudaStream_t s;
  EXPECT(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest) == cudaSuccess);
  int priority = 1;
  unsigned flags = 7;
  EXPECT(cudaStreamGetPriority(s, &priority) == cudaSuccess && priority == greatest);
  EXPECT(cudaStreamGetFlags(s, &flags) == cudaSuccess && flags == cudaStreamNonBlocking);
  EXPECT(cudaStreamCreateWithPriority(&s, 0x40, 0) == cudaErrorInvalidValue);
  cudaGetLastError();

  cudaMemPool_t pool;
  EXPECT(cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess);
  uint64_t threshold = UINT64_MAX, got_threshold = 0;
  EXPECT(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold) == cudaSuccess);
  EXPECT(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &got_threshold) == cudaSuccess);
  EXPECT(got_threshold == threshold);
  cudaMemAccessDesc access = {};
  access.location.type = cudaMemLocationTypeDevice;
  access.location.id = 0;
  access.flags = cudaMemAccessFlagsProtReadWrite;
  EXPECT(cudaMemPoolSetAccess(pool, &access, 1) == cudaSuccess);
  cudaMemAccessFlags flags_now = cudaMemAccessFlagsProtNone;
  EXPECT(cudaMemPoolGetAccess(&flags_now, pool, &access.location) == cudaSuccess);
  EXPECT(flags_now == cudaMemAccessFlagsProtReadWrite);
  access.location.id = 1;
  EXPECT(cudaMemPoolSetAccess(pool, &access, 1) == cudaErrorInvalidDevice);
  cudaGetLastError();
  EXPECT(cudaCtxResetPersistingL2Cache() == cudaSuccess);

  int *host = (int *)malloc(n * sizeof(int));
  for (int i = 0; i < n; ++i)
    host[i] = (i * 37) % 1001 - 500;
  int *in, *out;
  EXPECT(cudaMallocAsync((void **)&in, n * sizeof(int), s) == cudaSuccess);
  EXPECT(cudaMallocFromPoolAsync((void **)&out, n * sizeof(int), pool, s) == cudaSuccess);
  uint64_t used = 0;
  EXPECT(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess);
  EXPECT(used >= 2 * n * sizeof(int));
  cudaAccessPolicyWindow window = {};
  window.base_ptr = in;
  window.num_bytes = n * sizeof(int);
  window.hitRatio = 0.5f;
  window.hitProp = cudaAccessPropertyPersisting;
  window.missProp = cudaAccessPropertyStreaming;
  cudaStreamAttrValue attr = {};
  attr.accessPolicyWindow = window;
  EXPECT(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &attr) == cudaSuccess);

  EXPECT(cudaMemcpyAsync(in, host, n * sizeof(int), cudaMemcpyHostToDevice, s) == cudaSuccess);
  square<<<(n + 127) / 128, 128, 0, s>>>(in, out, n);
  EXPECT(cudaGetLastError() == cudaSuccess);
  int *result = (int *)malloc(n * sizeof(int));
  EXPECT(cudaMemcpyAsync(result, out, n * sizeof(int), cudaMemcpyDeviceToHost, s) == cudaSuccess);
  EXPECT(cudaStreamSynchronize(s) == cudaSuccess);
  // A peer copy on the one device there is, and one naming a device there is not.
  int *again = (int *)malloc(n * sizeof(int));
  EXPECT(cudaMemcpyPeer(in, 0, out, 0, n * sizeof(int)) == cudaSuccess);
  EXPECT(cudaMemcpy(again, in, n * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
  for (int i = 0; i < n; ++i)
    EXPECT(again[i] == result[i] || failures > 10);
  EXPECT(cudaMemcpyPeerAsync(in, 1, out, 0, sizeof(int), s) == cudaErrorInvalidDevice);
  cudaGetLastError();

  // Pointer attributes of every kind of memory.
  int *managed, *pinned, plain = 0;
  EXPECT(cudaMallocManaged((void **)&managed, 64) == cudaSuccess);
  EXPECT(cudaMallocHost((void **)&pinned, 64) == cudaSuccess);
  cudaPointerAttributes a;
  EXPECT(cudaPointerGetAttributes(&a, in + n / 2) == cudaSuccess);
  EXPECT(a.type == cudaMemoryTypeDevice && a.device == 0 && a.devicePointer == in + n / 2 && !a.hostPointer);
  EXPECT(cudaPointerGetAttributes(&a, managed) == cudaSuccess);
  EXPECT(a.type == cudaMemoryTypeManaged && a.hostPointer == managed);
  EXPECT(cudaPointerGetAttributes(&a, pinned) == cudaSuccess);
  EXPECT(a.type == cudaMemoryTypeHost && a.hostPointer == pinned);
  EXPECT(cudaPointerGetAttributes(&a, &plain) == cudaSuccess);
  EXPECT(a.type == cudaMemoryTypeUnregistered);

  EXPECT(cudaFreeAsync(in, s) == cudaSuccess);
  EXPECT(cudaFreeAsync(out, s) == cudaSuccess);
  EXPECT(cudaFreeAsync(out, s) == cudaErrorInvalidValue);
  cudaGetLastError();
  EXPECT(cudaStreamDestroy(s) == cudaSuccess);
  cudaFree(managed);
  cudaFreeHost(pinned);

  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) {
    EXPECT(result[i] == host[i] * host[i] + 1);
    h = (h ^ (uint32_t)result[i]) * 1099511628211ull;
    if (failures > 10)
      break;
  }
  printf("checksum %016llx\n%s\n", (unsigned long long)h, failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
