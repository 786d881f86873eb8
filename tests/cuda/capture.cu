/*
 * capture.cu -- CUDA graphs as programs build them, each result checked against the host:
 *   stream capture   a copy in, two launches, a memset and a host function captured on one
 *                    stream, a launch on a second stream joined by an event, then the graph
 *                    instantiated and launched three times (arguments are the values at
 *                    capture, whatever the variables hold later)
 *   built by hand    memset, kernel, copy and host nodes with dependencies (one added after
 *                    its nodes), cloned, a kernel node's scalar changed in the instantiated
 *                    graph, and the graph updated back from the original
 * Usage: capture [N]   (default 1000)
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

__global__ void axpb(float *x, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] = a * x[i] + b;
}

__global__ void add(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] += x[i];
}

static int host_calls = 0;
static void CUDART_CB count_call(void *) { ++host_calls; }

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  if (n < 1) {
    fprintf(stderr, "usage: capture [N >= 1]\n");
    return 2;
  }
  size_t bytes = n * sizeof(float);
  float *h = (float *)malloc(bytes), *got = (float *)malloc(bytes), *want = (float *)malloc(bytes);
  for (int i = 0; i < n; ++i)
    h[i] = (float)(i % 17);
  float *x, *y;
  EXPECT(cudaMalloc(&x, bytes) == cudaSuccess);
  EXPECT(cudaMalloc(&y, bytes) == cudaSuccess);
  cudaStream_t s, t;
  cudaEvent_t forked, joined;
  cudaStreamCreate(&s);
  cudaStreamCreate(&t);
  cudaEventCreate(&forked);
  cudaEventCreate(&joined);
  int blocks = (n + 127) / 128;

  // Stream capture.
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusActive;
  EXPECT(cudaStreamIsCapturing(s, &status) == cudaSuccess && status == cudaStreamCaptureStatusNone);
  EXPECT(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal) != cudaSuccess);
  cudaGetLastError();
  EXPECT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
  EXPECT(cudaStreamIsCapturing(s, &status) == cudaSuccess && status == cudaStreamCaptureStatusActive);
  float a = 2.0f, b = 1.0f;
  cudaMemcpyAsync(x, h, bytes, cudaMemcpyHostToDevice, s);
  cudaMemsetAsync(y, 0, bytes, s);
  axpb<<<blocks, 128, 0, s>>>(x, a, b, n);
  a = 100.0f; // the captured launch keeps 2
  cudaEventRecord(forked, s);
  cudaStreamWaitEvent(t, forked, 0);
  add<<<blocks, 128, 0, t>>>(x, y, n);
  cudaEventRecord(joined, t);
  cudaStreamWaitEvent(s, joined, 0);
  axpb<<<blocks, 128, 0, s>>>(y, 3.0f, -1.0f, n);
  cudaLaunchHostFunc(s, count_call, nullptr);
  EXPECT(host_calls == 0);
  cudaGraph_t graph;
  EXPECT(cudaStreamEndCapture(s, &graph) == cudaSuccess);
  EXPECT(cudaStreamIsCapturing(s, &status) == cudaSuccess && status == cudaStreamCaptureStatusNone);
  size_t count = 0;
  EXPECT(cudaGraphGetNodes(graph, nullptr, &count) == cudaSuccess && count == 6);
  cudaGraphExec_t exec;
  EXPECT(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  EXPECT(cudaGraphUpload(exec, s) == cudaSuccess);
  EXPECT(cudaGraphUpload(nullptr, s) == cudaErrorInvalidValue);
  for (int k = 0; k < 3; ++k)
    EXPECT(cudaGraphLaunch(exec, s) == cudaSuccess);
  EXPECT(cudaStreamSynchronize(s) == cudaSuccess);
  EXPECT(host_calls == 3);
  cudaMemcpy(got, y, bytes, cudaMemcpyDeviceToHost);
  uint64_t sum = 1469598103934665603ull;
  for (int i = 0; i < n; ++i) {
    float xi = 2.0f * h[i] + 1.0f;
    want[i] = 3.0f * xi - 1.0f;
    EXPECT(got[i] == want[i] || failures > 10);
    sum = (sum ^ (uint32_t)got[i]) * 1099511628211ull;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  // Built by hand: y = 0; x = h; x = 5x + 2 (node K); y += x; then a host call.
  cudaGraph_t built;
  EXPECT(cudaGraphCreate(&built, 0) == cudaSuccess);
  cudaGraphNode_t set, copy, k1, k2, host;
  cudaMemsetParams mp = {};
  mp.dst = y;
  mp.value = 0;
  mp.elementSize = 4;
  mp.width = n;
  mp.height = 1;
  EXPECT(cudaGraphAddMemsetNode(&set, built, nullptr, 0, &mp) == cudaSuccess);
  cudaMemcpy3DParms cp = {};
  cp.srcPtr = make_cudaPitchedPtr(h, bytes, n, 1);
  cp.dstPtr = make_cudaPitchedPtr(x, bytes, n, 1);
  cp.extent = make_cudaExtent(bytes, 1, 1);
  cp.kind = cudaMemcpyHostToDevice;
  EXPECT(cudaGraphAddMemcpyNode(&copy, built, nullptr, 0, &cp) == cudaSuccess);
  float five = 5.0f, two = 2.0f;
  int nn = n;
  void *k1_args[] = {&x, &five, &two, &nn};
  cudaKernelNodeParams kp = {};
  kp.func = (void *)axpb;
  kp.gridDim = dim3(blocks);
  kp.blockDim = dim3(128);
  kp.kernelParams = k1_args;
  EXPECT(cudaGraphAddKernelNode(&k1, built, &copy, 1, &kp) == cudaSuccess);
  void *k2_args[] = {&x, &y, &nn};
  cudaKernelNodeParams kp2 = kp;
  kp2.func = (void *)add;
  kp2.kernelParams = k2_args;
  cudaGraphNode_t k2_deps[] = {k1};
  EXPECT(cudaGraphAddKernelNode(&k2, built, k2_deps, 1, &kp2) == cudaSuccess);
  // The memset before the add, said after both exist.
  EXPECT(cudaGraphAddDependencies(built, &set, &k2, 1) == cudaSuccess);
  cudaHostNodeParams hp = {count_call, nullptr};
  EXPECT(cudaGraphAddHostNode(&host, built, &k2, 1, &hp) == cudaSuccess);
  cudaGraph_t cloned;
  EXPECT(cudaGraphClone(&cloned, built) == cudaSuccess);
  cudaGraphExec_t bexec;
  EXPECT(cudaGraphInstantiate(&bexec, built, 0) == cudaSuccess);
  // K's scale becomes 7 in the instantiated graph only.
  float seven = 7.0f;
  void *k1_seven[] = {&x, &seven, &two, &nn};
  kp.kernelParams = k1_seven;
  EXPECT(cudaGraphExecKernelNodeSetParams(bexec, k1, &kp) == cudaSuccess);
  EXPECT(cudaGraphLaunch(bexec, s) == cudaSuccess);
  cudaStreamSynchronize(s);
  cudaMemcpy(got, y, bytes, cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i) {
    EXPECT(got[i] == 7.0f * h[i] + 2.0f || failures > 10);
    sum = (sum ^ (uint32_t)got[i]) * 1099511628211ull;
  }
  // Back to the clone's parameters (scale 5), then run it.
  cudaGraphExecUpdateResultInfo info;
  EXPECT(cudaGraphExecUpdate(bexec, cloned, &info) == cudaSuccess && info.result == cudaGraphExecUpdateSuccess);
  EXPECT(cudaGraphLaunch(bexec, s) == cudaSuccess);
  cudaStreamSynchronize(s);
  cudaMemcpy(got, y, bytes, cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i) {
    EXPECT(got[i] == 5.0f * h[i] + 2.0f || failures > 10);
    sum = (sum ^ (uint32_t)got[i]) * 1099511628211ull;
  }
  EXPECT(host_calls == 5);
  // cudaMemcpy3D: a box of 5 rows of 7 floats from a host matrix of rows of 9 into a device
  // one of rows of 8, starting at column 1 and row 2, and back.
  {
    float src[9 * 8], back[8 * 6] = {0};
    for (int k = 0; k < 9 * 8; ++k)
      src[k] = (float)k;
    float *dev;
    EXPECT(cudaMalloc(&dev, 8 * 6 * sizeof(float)) == cudaSuccess);
    cudaMemset(dev, 0, 8 * 6 * sizeof(float));
    cudaMemcpy3DParms in = {};
    in.srcPtr = make_cudaPitchedPtr(src, 9 * sizeof(float), 9, 8);
    in.srcPos = make_cudaPos(1 * sizeof(float), 2, 0);
    in.dstPtr = make_cudaPitchedPtr(dev, 8 * sizeof(float), 8, 6);
    in.extent = make_cudaExtent(7 * sizeof(float), 5, 1);
    in.kind = cudaMemcpyHostToDevice;
    EXPECT(cudaMemcpy3D(&in) == cudaSuccess);
    cudaMemcpy3DParms out = {};
    out.srcPtr = make_cudaPitchedPtr(dev, 8 * sizeof(float), 8, 6);
    out.dstPtr = make_cudaPitchedPtr(back, 8 * sizeof(float), 8, 6);
    out.extent = make_cudaExtent(8 * sizeof(float), 6, 1);
    out.kind = cudaMemcpyDeviceToHost;
    EXPECT(cudaMemcpy3D(&out) == cudaSuccess);
    for (int r = 0; r < 6; ++r)
      for (int c = 0; c < 8; ++c) {
        float want3d = r < 5 && c < 7 ? src[(r + 2) * 9 + c + 1] : 0.0f;
        EXPECT(back[r * 8 + c] == want3d || failures > 10);
        sum = (sum ^ (uint32_t)back[r * 8 + c]) * 1099511628211ull;
      }
    cudaFree(dev);
  }
  cudaGraphExecDestroy(bexec);
  cudaGraphDestroy(built);
  cudaGraphDestroy(cloned);
  printf("checksum %016llx\n%s\n", (unsigned long long)sum, failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
