/*
 * malloc3d.cu -- a 3-D pitched allocation as programs use one: cudaMalloc3D, cudaMemset3D of
 * the whole extent and then of a smaller one (the bytes outside it keep their value), a
 * kernel that takes the cudaPitchedPtr by value and updates every element through its pitch,
 * and the slices read back with cudaMemcpy2D at the allocation's pitch. Checked against the
 * same steps on the host.
 * Usage: malloc3d [W [H [D]]]   (defaults 37 19 5; W in floats)
 * Prints PASS or FAIL and `checksum <hex>` of the results.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

__global__ void update(cudaPitchedPtr p, int w, int h, int d) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  int z = blockIdx.z * blockDim.z + threadIdx.z;
  if (x < w && y < h && z < d) {
    char *slice = (char *)p.ptr + (size_t)z * p.pitch * p.ysize;
    float *row = (float *)(slice + (size_t)y * p.pitch);
    row[x] = row[x] * 0.5f + (float)(x + 3 * y + 7 * z);
  }
}

static uint64_t fnv(const unsigned char *v, size_t n, uint64_t sum) {
  for (size_t i = 0; i < n; ++i) sum = (sum ^ v[i]) * 1099511628211ull;
  return sum;
}

#define CHECK(call)                                                                              \
  do {                                                                                           \
    cudaError_t e = (call);                                                                      \
    if (e != cudaSuccess) {                                                                      \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e));                 \
      return 1;                                                                                  \
    }                                                                                            \
  } while (0)

int main(int argc, char **argv) {
  int w = argc > 1 ? atoi(argv[1]) : 37, h = argc > 2 ? atoi(argv[2]) : 19, d = argc > 3 ? atoi(argv[3]) : 5;
  if (w < 1 || h < 1 || d < 1) {
    fprintf(stderr, "usage: malloc3d [W [H [D]]]\n");
    return 2;
  }
  cudaExtent extent = make_cudaExtent(w * sizeof(float), h, d);
  cudaPitchedPtr p;
  CHECK(cudaMalloc3D(&p, extent));
  if (p.pitch < w * sizeof(float) || p.xsize != w * sizeof(float) || p.ysize != (size_t)h) {
    fprintf(stderr, "pitched pointer: pitch %zu xsize %zu ysize %zu\n", p.pitch, p.xsize, p.ysize);
    return 1;
  }
  // 0x3f3f3f3f everywhere, then zero bytes in a box of half the width, height and depth.
  CHECK(cudaMemset3D(p, 0x3f, extent));
  cudaExtent part = make_cudaExtent((w / 2 + 1) * sizeof(float), h / 2 + 1, d / 2 + 1);
  CHECK(cudaMemset3D(p, 0, part));
  dim3 block(8, 4, 2), grid((w + 7) / 8, (h + 3) / 4, (d + 1) / 2);
  update<<<grid, block>>>(p, w, h, d);
  CHECK(cudaGetLastError());
  update<<<grid, block>>>(p, w, h, d);
  CHECK(cudaGetLastError());
  size_t plane = (size_t)w * h;
  float *got = (float *)malloc(plane * d * sizeof(float)), *want = (float *)malloc(plane * d * sizeof(float));
  for (int z = 0; z < d; z++) {
    const char *slice = (const char *)p.ptr + (size_t)z * p.pitch * p.ysize;
    CHECK(cudaMemcpy2D(got + z * plane, w * sizeof(float), slice, p.pitch, w * sizeof(float), h,
                       cudaMemcpyDeviceToHost));
  }
  float fill;
  memset(&fill, 0x3f, sizeof fill);
  for (int z = 0; z < d; z++)
    for (int y = 0; y < h; y++)
      for (int x = 0; x < w; x++) {
        bool zeroed = x <= w / 2 && y <= h / 2 && z <= d / 2;
        float v = zeroed ? 0.0f : fill;
        for (int k = 0; k < 2; k++) v = v * 0.5f + (float)(x + 3 * y + 7 * z);
        want[z * plane + y * w + x] = v;
      }
  int bad = 0;
  for (size_t i = 0; i < plane * d && !bad; i++) {
    if (got[i] != want[i]) {
      fprintf(stderr, "element %zu: %g, expected %g\n", i, got[i], want[i]);
      bad = 1;
    }
  }
  uint64_t sum = fnv((const unsigned char *)got, plane * d * sizeof(float), 1469598103934665603ull);
  printf("%s\nchecksum %016llx\n", bad ? "FAIL" : "PASS", (unsigned long long)sum);
  CHECK(cudaFree(p.ptr));
  free(got);
  free(want);
  return bad;
}
