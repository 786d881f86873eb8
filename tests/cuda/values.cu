/*
 * values.cu -- kernels whose indices multiply or divide by run-time values, as applications
 * write them: a periodic stencil over a flat index (`i % width`, `i / width`, HeCBench heat2d),
 * a 2-D grid walking the layers of a 3-D array (`j * cols`, `c += cols * rows`, hotspot3D), and
 * a 2-D grid of blocks numbered flat (`blockIdx.y * gridDim.x + blockIdx.x`). No affine map
 * holds for every value of those; the runtime analyses them again with a launch's values
 * built in. So it does for a kernel whose maps hold only for its first block (mixbench). Integer arithmetic (wrapping), checked against the host.
 * Usage: values [WIDTH [HEIGHT [LAYERS [STEPS]]]]   (defaults 64 40 3 4)
 * Prints PASS or FAIL and `checksum <hex>` of the results.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void periodic(unsigned *out, const unsigned *in, int width, int height, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int x = i % width;
  int y = i / width;
  int east = y * width + (x + 1) % width;
  int west = y * width + (width + x - 1) % width;
  int south = ((y + 1) % height) * width + x;
  int north = ((height + y - 1) % height) * width + x;
  out[y * width + x] = 3u * in[i] + in[east] + 5u * in[west] + 7u * in[south] + 11u * in[north];
}

__global__ void layers(unsigned *out, const unsigned *in, int cols, int rows, int depth) {
  int i = blockDim.x * blockIdx.x + threadIdx.x;
  int j = blockDim.y * blockIdx.y + threadIdx.y;
  if (i >= cols || j >= rows) return;
  int c = i + j * cols;
  int xy = cols * rows;
  int w = i == 0 ? c : c - 1;
  int e = i == cols - 1 ? c : c + 1;
  int n = j == 0 ? c : c - cols;
  int s = j == rows - 1 ? c : c + cols;
  for (int k = 0; k < depth; ++k) {
    out[c] = in[c] + 2u * in[w] + 3u * in[e] + 5u * in[n] + 7u * in[s] + (unsigned)k;
    c += xy;
    w += xy;
    e += xy;
    n += xy;
    s += xy;
  }
}

__global__ void flat(unsigned *out, const unsigned *in, int n) {
  int block = blockIdx.y * gridDim.x + blockIdx.x;
  int i = block * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * 2654435761u + (unsigned)block;
}

// Each block's eight elements a block apart, in four rounds a grid apart (HeCBench mixbench):
// Polly's maps for these products of run-time values hold only for the first block
// (`boffx = 0`), so the build's maps fail at every launch of more than one block; the launch's
// values make them exact.
#define PER 8
#define ROUNDS 4
__global__ void strided(unsigned *data, int iters) {
  const unsigned size = blockDim.x;
  const int step = size;
  int idx = blockIdx.x * size * PER + threadIdx.x;
  const int big = gridDim.x * size * PER;
  unsigned v[PER];
  for (int k = 0; k < ROUNDS; k++) {
#pragma unroll
    for (int j = 0; j < PER; j++) {
      v[j] = data[idx + j * step + k * big];
      for (int i = 0; i < iters; i++) v[j] = v[j] * v[j] + 7u;
    }
    unsigned s = 0;
#pragma unroll
    for (int j = 0; j < PER; j += 2) s += v[j] * v[j + 1];
    data[idx + k * big] = s;
  }
}

static void host_strided(unsigned *data, int blocks, int size, int iters) {
  for (int k = 0; k < ROUNDS; k++)
    for (int b = 0; b < blocks; b++)
      for (int t = 0; t < size; t++) {
        size_t at = (size_t)b * size * PER + t + (size_t)k * blocks * size * PER;
        unsigned v[PER], s = 0;
        for (int j = 0; j < PER; j++) {
          v[j] = data[at + (size_t)j * size];
          for (int i = 0; i < iters; i++) v[j] = v[j] * v[j] + 7u;
        }
        for (int j = 0; j < PER; j += 2) s += v[j] * v[j + 1];
        data[at] = s;
      }
}

static void host_periodic(unsigned *out, const unsigned *in, int width, int height) {
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      int i = y * width + x;
      out[i] = 3u * in[i] + in[y * width + (x + 1) % width] + 5u * in[y * width + (width + x - 1) % width] +
               7u * in[((y + 1) % height) * width + x] + 11u * in[((height + y - 1) % height) * width + x];
    }
}

static void host_layers(unsigned *out, const unsigned *in, int cols, int rows, int depth) {
  for (int k = 0; k < depth; ++k)
    for (int j = 0; j < rows; ++j)
      for (int i = 0; i < cols; ++i) {
        int c = i + j * cols + k * cols * rows;
        int w = i == 0 ? c : c - 1, e = i == cols - 1 ? c : c + 1;
        int n = j == 0 ? c : c - cols, s = j == rows - 1 ? c : c + cols;
        out[c] = in[c] + 2u * in[w] + 3u * in[e] + 5u * in[n] + 7u * in[s] + (unsigned)k;
      }
}

static uint64_t fnv(uint64_t sum, const unsigned *v, size_t n) {
  for (size_t i = 0; i < n; ++i) sum = (sum ^ v[i]) * 1099511628211ull;
  return sum;
}

int main(int argc, char **argv) {
  int width = argc > 1 ? atoi(argv[1]) : 64, height = argc > 2 ? atoi(argv[2]) : 40;
  int depth = argc > 3 ? atoi(argv[3]) : 3, steps = argc > 4 ? atoi(argv[4]) : 4;
  if (width < 1 || height < 1 || depth < 1 || steps < 1) {
    fprintf(stderr, "usage: values [WIDTH >= 1 [HEIGHT >= 1 [LAYERS >= 1 [STEPS >= 1]]]]\n");
    return 2;
  }
  int n = width * height;
  size_t all = (size_t)n * depth;
  unsigned *h = (unsigned *)malloc(all * 4), *ref = (unsigned *)malloc(all * 4), *tmp = (unsigned *)malloc(all * 4);
  unsigned *got = (unsigned *)malloc(all * 4);
  for (size_t i = 0; i < all; ++i) h[i] = (unsigned)(i * 2654435761u >> 7);
  unsigned *a, *b;
  if (cudaMalloc(&a, all * 4) || cudaMalloc(&b, all * 4)) return 1;
  int bad = 0;
  uint64_t sum = 1469598103934665603ull;

  // The periodic stencil, `steps` times back and forth.
  cudaMemcpy(a, h, (size_t)n * 4, cudaMemcpyHostToDevice);
  for (int i = 0; i < n; ++i) ref[i] = h[i];
  for (int s = 0; s < steps; ++s) {
    periodic<<<(n + 127) / 128, 128>>>(b, a, width, height, n);
    unsigned *t = a;
    a = b;
    b = t;
    host_periodic(tmp, ref, width, height);
    for (int i = 0; i < n; ++i) ref[i] = tmp[i];
  }
  cudaMemcpy(got, a, (size_t)n * 4, cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i) bad += got[i] != ref[i];
  sum = fnv(sum, got, n);

  // The layers, on a 2-D grid of 16 x 8 blocks.
  cudaMemcpy(a, h, all * 4, cudaMemcpyHostToDevice);
  for (size_t i = 0; i < all; ++i) ref[i] = h[i];
  dim3 block(16, 8), grid((width + 15) / 16, (height + 7) / 8);
  for (int s = 0; s < steps; ++s) {
    layers<<<grid, block>>>(b, a, width, height, depth);
    unsigned *t = a;
    a = b;
    b = t;
    host_layers(tmp, ref, width, height, depth);
    for (size_t i = 0; i < all; ++i) ref[i] = tmp[i];
  }
  cudaMemcpy(got, a, all * 4, cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < all; ++i) bad += got[i] != ref[i];
  sum = fnv(sum, got, all);

  // Blocks numbered flat over a grid of 4 columns (256 where there are many: a grid's y
  // extent is at most 65535).
  int blocks = (int)((all + 63) / 64), columns = blocks > 4 * 65535 ? 256 : 4;
  cudaMemcpy(a, h, all * 4, cudaMemcpyHostToDevice);
  flat<<<dim3(columns, (blocks + columns - 1) / columns), 64>>>(b, a, (int)all);
  cudaMemcpy(got, b, all * 4, cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < all; ++i) bad += got[i] != h[i] * 2654435761u + (unsigned)(i / 64);
  sum = fnv(sum, got, all);

  // Rounds a grid apart, over as many blocks of 32 as the layers give (at least one).
  int sblocks = (int)(all / (32 * PER * ROUNDS));
  if (sblocks < 1) sblocks = 1;
  size_t sn = (size_t)sblocks * 32 * PER * ROUNDS;
  unsigned *s_h = (unsigned *)malloc(sn * 4), *sd;
  if (cudaMalloc(&sd, sn * 4)) return 1;
  for (size_t i = 0; i < sn; ++i) s_h[i] = (unsigned)(i * 2246822519u >> 5);
  cudaMemcpy(sd, s_h, sn * 4, cudaMemcpyHostToDevice);
  strided<<<sblocks, 32>>>(sd, steps);
  host_strided(s_h, sblocks, 32, steps);
  unsigned *s_got = (unsigned *)malloc(sn * 4);
  cudaMemcpy(s_got, sd, sn * 4, cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < sn; ++i) bad += s_got[i] != s_h[i];
  sum = fnv(sum, s_got, sn);
  cudaFree(sd);
  free(s_h);
  free(s_got);

  printf("%s\n", bad ? "FAIL" : "PASS");
  printf("checksum %016llx\n", (unsigned long long)sum);
  cudaFree(a);
  cudaFree(b);
  free(h);
  free(ref);
  free(tmp);
  free(got);
  return bad != 0;
}
