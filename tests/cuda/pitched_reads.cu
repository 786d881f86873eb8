/*
 * pitched_reads.cu -- a 2-D kernel over rows of pitch `w` that reads its input around each
 * point as far as a radius read from memory (HeCBench asmooth's adaptive smoothing): the reads
 * cannot be bounded, so each device is sent the whole input, while the writes are exactly
 * the point's own. The input's shape names its pitch (`img[*][w]`) though no map of it does;
 * the launch must still split. Checked against the host exactly.
 * Usage: pitched_reads [W [H]]   (default 45 37)
 * Prints `checksum <hex>` of the results, then PASS or FAIL.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>

__global__ void smooth(int w, int h, const int *img, const int *radius, int *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int j = blockIdx.y * blockDim.y + threadIdx.y;
  if (i < w && j < h) {
    int r = radius[j * w + i];
    int sum = img[j * w + i], n = 1;
    for (int dj = -r; dj <= r; dj++)
      for (int di = -r; di <= r; di++) {
        int x = i + di, y = j + dj;
        if (x >= 0 && x < w && y >= 0 && y < h) {
          sum += img[y * w + x];
          n++;
        }
      }
    out[j * w + i] = sum / n;
  }
}

int main(int argc, char **argv) {
  int w = argc > 1 ? atoi(argv[1]) : 45, h = argc > 2 ? atoi(argv[2]) : 37;
  if (w < 1 || h < 1) {
    fprintf(stderr, "usage: pitched_reads [W >= 1 [H >= 1]]\n");
    return 2;
  }
  int n = w * h;
  int *img, *radius, *out;
  cudaMallocManaged(&img, n * sizeof(int));
  cudaMallocManaged(&radius, n * sizeof(int));
  cudaMallocManaged(&out, n * sizeof(int));
  for (int k = 0; k < n; ++k) {
    img[k] = (k * 37) % 101 - 50;
    radius[k] = (k * 7) % 4;
  }
  dim3 block(16, 8), grid((w + 15) / 16, (h + 7) / 8);
  smooth<<<grid, block>>>(w, h, img, radius, out);
  cudaDeviceSynchronize();
  bool ok = true;
  uint64_t hash = 1469598103934665603ull;
  for (int j = 0; j < h; ++j)
    for (int i = 0; i < w; ++i) {
      int r = radius[j * w + i], sum = img[j * w + i], c = 1;
      for (int dj = -r; dj <= r; dj++)
        for (int di = -r; di <= r; di++) {
          int x = i + di, y = j + dj;
          if (x >= 0 && x < w && y >= 0 && y < h) {
            sum += img[y * w + x];
            c++;
          }
        }
      ok &= out[j * w + i] == sum / c;
      hash = (hash ^ (uint32_t)out[j * w + i]) * 1099511628211ull;
    }
  printf("checksum %016llx\n%s\n", (unsigned long long)hash, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
