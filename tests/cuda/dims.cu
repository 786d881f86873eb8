/*
 * dims.cu -- one 2-D kernel launched with grids of different shapes: a whole image (many
 * blocks along x and y), a single row (one block along y), and a single column of blocks (one
 * block along x). Each launch must be cut along a dimension that has blocks: a split along
 * `y` of a one-row grid would leave every block on one device. Checked against the host.
 * Usage: dims [W [H]]   (defaults 1024 96)
 * Prints PASS or FAIL and `checksum <hex>` of the image.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

__global__ void paint(float *img, int w, int h, int row0, float v) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = row0 + blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) img[y * w + x] = img[y * w + x] * 0.5f + v + (float)(x % 5);
}

static float host_paint(float old, int x, float v) { return old * 0.5f + v + (float)(x % 5); }

int main(int argc, char **argv) {
  int w = argc > 1 ? atoi(argv[1]) : 1024;
  int h = argc > 2 ? atoi(argv[2]) : 96;
  if (w < 1 || h < 2 || w > (1 << 16) || h > (1 << 16)) {
    fprintf(stderr, "usage: dims [1 <= W <= 65536 [2 <= H <= 65536]]\n");
    return 2;
  }
  size_t n = (size_t)w * h, bytes = n * sizeof(float);
  float *img = (float *)malloc(bytes), *want = (float *)malloc(bytes);
  for (size_t i = 0; i < n; ++i) img[i] = want[i] = (float)(i % 11);
  float *d;
  if (cudaMalloc(&d, bytes)) return 1;
  cudaMemcpy(d, img, bytes, cudaMemcpyHostToDevice);
  dim3 block(32, 4);
  // The whole image.
  dim3 whole((w + 31) / 32, (h + 3) / 4);
  paint<<<whole, block>>>(d, w, h, 0, 1.0f);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) want[(size_t)y * w + x] = host_paint(want[(size_t)y * w + x], x, 1.0f);
  // One band of rows: a single block along y.
  dim3 band((w + 31) / 32, 1);
  paint<<<band, block>>>(d, w, h, h / 2, 2.0f);
  for (int y = h / 2; y < h / 2 + 4 && y < h; ++y)
    for (int x = 0; x < w; ++x) want[(size_t)y * w + x] = host_paint(want[(size_t)y * w + x], x, 2.0f);
  // The first 32 columns: a single block along x.
  dim3 column(1, (h + 3) / 4);
  paint<<<column, block>>>(d, w, h, 0, 3.0f);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < 32 && x < w; ++x) want[(size_t)y * w + x] = host_paint(want[(size_t)y * w + x], x, 3.0f);
  if (cudaMemcpy(img, d, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) return 1;
  uint64_t sum = 1469598103934665603ull;
  int bad = 0;
  for (size_t i = 0; i < n; ++i) {
    if (img[i] != want[i] && bad++ < 5) fprintf(stderr, "img[%zu] = %g, want %g\n", i, img[i], want[i]);
    uint32_t bits;
    memcpy(&bits, &img[i], sizeof bits);
    sum = (sum ^ bits) * 1099511628211ull;
  }
  printf("%s\nchecksum %016llx\n", bad ? "FAIL" : "PASS", (unsigned long long)sum);
  cudaFree(d);
  free(img);
  free(want);
  return bad != 0;
}
