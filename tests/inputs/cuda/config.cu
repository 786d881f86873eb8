/*
 * config.cu -- the preference and query calls real programs make around their kernels
 * (cache and shared-memory configuration, function attributes, versions, free memory, peers,
 * asynchronous symbol copies), each checked against what CUDA answers, then a launch whose
 * result must be unaffected. Prints PASS or the failed checks.
 */
#include <cstdio>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

// cudaDeviceSetSharedMemConfig is deprecated, and programs still call it.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

__constant__ float coeff[4];

__global__ void scale(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * coeff[i % 4];
}

static int failures = 0;
#define EXPECT(cond)                                                  \
  do {                                                                \
    if (!(cond)) {                                                    \
      printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);          \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

int main() {
  EXPECT(cudaFuncSetCacheConfig(scale, cudaFuncCachePreferL1) == cudaSuccess);
  EXPECT(cudaFuncSetCacheConfig((const void *)&failures, cudaFuncCachePreferL1) == cudaErrorInvalidDeviceFunction);
  EXPECT(cudaGetLastError() == cudaErrorInvalidDeviceFunction);
  EXPECT(cudaDeviceSetCacheConfig(cudaFuncCachePreferShared) == cudaSuccess);
  EXPECT(cudaDeviceSetSharedMemConfig(cudaSharedMemBankSizeFourByte) == cudaSuccess);
  EXPECT(cudaFuncSetAttribute(scale, cudaFuncAttributeMaxDynamicSharedMemorySize, 32 * 1024) == cudaSuccess);
  EXPECT(cudaFuncSetAttribute(scale, cudaFuncAttributeMaxDynamicSharedMemorySize, 1 << 30) == cudaErrorInvalidValue);
  EXPECT(cudaFuncSetAttribute(scale, cudaFuncAttributePreferredSharedMemoryCarveout, 50) == cudaSuccess);
  // Function attributes and occupancy, as Thrust and CUB ask them before their launches:
  // CUB picks its tuning from ptxVersion, which must be the architecture the device code was
  // compiled for (sm_80 whatever GPUs the build assembles for).
  cudaFuncAttributes attr;
  EXPECT(cudaFuncGetAttributes(&attr, scale) == cudaSuccess);
  EXPECT(attr.ptxVersion == 80 && attr.binaryVersion == 80 && attr.maxThreadsPerBlock >= 1024);
  EXPECT(attr.maxDynamicSharedSizeBytes >= 48 * 1024);
  EXPECT(cudaFuncGetAttributes(&attr, (const void *)&failures) == cudaErrorInvalidDeviceFunction);
  EXPECT(cudaFuncGetAttributes(nullptr, scale) == cudaErrorInvalidValue);
  cudaGetLastError();
  int blocks = -1;
  EXPECT(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, scale, 256, 0) == cudaSuccess && blocks >= 1 && blocks <= 32);
  int wide = -1;
  EXPECT(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&wide, scale, 1024, 0, cudaOccupancyDefault) == cudaSuccess);
  EXPECT(wide >= 1 && wide <= blocks);
  EXPECT(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, scale, 0, 0) == cudaErrorInvalidValue);
  EXPECT(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, (const void *)&failures, 256, 0) == cudaErrorInvalidDeviceFunction);
  cudaGetLastError();
  EXPECT(cudaSetDeviceFlags(cudaDeviceScheduleAuto) == cudaSuccess);
  int driver = 0, runtime = 0;
  EXPECT(cudaDriverGetVersion(&driver) == cudaSuccess && driver >= 12000);
  EXPECT(cudaRuntimeGetVersion(&runtime) == cudaSuccess && runtime >= 12000);
  EXPECT(cudaProfilerStart() == cudaSuccess);
  int can = -1;
  EXPECT(cudaDeviceCanAccessPeer(&can, 0, 1) == cudaErrorInvalidDevice && can == 0);
  cudaGetLastError();
  can = -1;
  // A device is no peer of itself, which CUDA says without an error.
  EXPECT(cudaDeviceCanAccessPeer(&can, 0, 0) == cudaSuccess && can == 0);
  EXPECT(cudaGetLastError() == cudaSuccess);
  EXPECT(cudaDeviceEnablePeerAccess(1, 0) == cudaErrorInvalidDevice);
  cudaGetLastError();

  size_t free0 = 0, total = 0, free1 = 0;
  EXPECT(cudaMemGetInfo(&free0, &total) == cudaSuccess && total > 0 && free0 <= total);
  const int n = 1 << 20;
  float *x;
  EXPECT(cudaMalloc(&x, n * sizeof(float)) == cudaSuccess);
  EXPECT(cudaMemGetInfo(&free1, &total) == cudaSuccess && free1 + n * sizeof(float) <= free0);
  EXPECT(cudaMemGetInfo(nullptr, &total) == cudaErrorInvalidValue);
  cudaGetLastError();

  float host_coeff[4] = {0.5f, 2.0f, -1.0f, 4.0f}, back[4] = {0};
  cudaStream_t s;
  EXPECT(cudaStreamCreate(&s) == cudaSuccess);
  EXPECT(cudaMemcpyToSymbolAsync(coeff, host_coeff, sizeof host_coeff, 0, cudaMemcpyHostToDevice, s) == cudaSuccess);
  EXPECT(cudaMemcpyFromSymbolAsync(back, coeff, sizeof back, 0, cudaMemcpyDeviceToHost, s) == cudaSuccess);
  EXPECT(cudaStreamSynchronize(s) == cudaSuccess);
  for (int i = 0; i < 4; ++i) EXPECT(back[i] == host_coeff[i]);

  float *h = new float[n];
  for (int i = 0; i < n; ++i) h[i] = (float)(i % 9);
  cudaMemcpy(x, h, n * sizeof(float), cudaMemcpyHostToDevice);
  scale<<<(n + 255) / 256, 256, 0, s>>>(x, n);
  EXPECT(cudaGetLastError() == cudaSuccess);
  cudaMemcpy(h, x, n * sizeof(float), cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < n; ++i) bad += h[i] != (float)(i % 9) * host_coeff[i % 4];
  EXPECT(bad == 0);
  EXPECT(cudaProfilerStop() == cudaSuccess);
  cudaStreamDestroy(s);
  cudaFree(x);
  delete[] h;
  if (failures == 0) printf("PASS\n");
  return failures != 0;
}
