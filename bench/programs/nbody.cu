/*
 * nbody.cu -- the Mekong thesis's third benchmark (section 4.3) as plain single-GPU CUDA:
 * N bodies under gravity with softening, one thread per body, no shared memory; each step
 * launches update_velocities (every thread reads every body's position) then
 * update_positions, timed with CUDA events around the STEPS steps.
 * Usage: nbody [N [STEPS]]   (defaults 4096 5)
 * Prints `kernel_ms <ms>`, `checksum <hex>` of the positions, then PASS or FAIL against the
 * same steps on the host (within a relative 1e-3), or `unchecked` when N * N * STEPS > 2^31.
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

__global__ void update_velocities(const float *masses, const float *px, const float *py, const float *pz, float *vx,
                                  float *vy, float *vz, float dt, float eps, int n) {
  int id = blockIdx.x * blockDim.x + threadIdx.x;
  if (id >= n) return;
  float ax = 0, ay = 0, az = 0;
  for (int j = 0; j < n; ++j) {
    float dx = px[j] - px[id], dy = py[j] - py[id], dz = pz[j] - pz[id];
    float d2 = dx * dx + dy * dy + dz * dz + eps * eps;
    float inv = 1.0f / sqrtf(d2);
    float s = masses[j] * inv * inv * inv;
    ax += dx * s;
    ay += dy * s;
    az += dz * s;
  }
  vx[id] += ax * dt;
  vy[id] += ay * dt;
  vz[id] += az * dt;
}

__global__ void update_positions(float *px, float *py, float *pz, const float *vx, const float *vy, const float *vz,
                                 float dt, int n) {
  int id = blockIdx.x * blockDim.x + threadIdx.x;
  if (id >= n) return;
  px[id] += vx[id] * dt;
  py[id] += vy[id] * dt;
  pz[id] += vz[id] * dt;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4096;
  int steps = argc > 2 ? atoi(argv[2]) : 5;
  if (n < 1 || steps < 1) {
    fprintf(stderr, "usage: nbody [N >= 1 [STEPS >= 1]]\n");
    return 2;
  }
  const float dt = 0.01f, eps = 0.1f;
  size_t bytes = (size_t)n * sizeof(float);
  // h[0] masses, h[1..3] positions, h[4..6] velocities.
  float *h[7], *d[7];
  for (int k = 0; k < 7; ++k) {
    h[k] = (float *)malloc(bytes);
    for (int i = 0; i < n; ++i) {
      uint32_t r = (uint32_t)(i * 7 + k) * 2654435761u;
      h[k][i] = k == 0 ? 1.0f + (float)(r % 100) / 100.0f : k <= 3 ? (float)(r % 2000) / 100.0f - 10.0f : 0.0f;
    }
    CHECK(cudaMalloc(&d[k], bytes));
    CHECK(cudaMemcpy(d[k], h[k], bytes, cudaMemcpyHostToDevice));
  }
  int block = 256, grid = (n + block - 1) / block;
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start));
  for (int s = 0; s < steps; ++s) {
    update_velocities<<<grid, block>>>(d[0], d[1], d[2], d[3], d[4], d[5], d[6], dt, eps, n);
    update_positions<<<grid, block>>>(d[1], d[2], d[3], d[4], d[5], d[6], dt, n);
  }
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  CHECK(cudaGetLastError());
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  float *got[3];
  uint64_t sum = 1469598103934665603ull;
  for (int k = 0; k < 3; ++k) {
    got[k] = (float *)malloc(bytes);
    CHECK(cudaMemcpy(got[k], d[k + 1], bytes, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i) {
      uint32_t bits;
      memcpy(&bits, &got[k][i], sizeof bits);
      sum = (sum ^ bits) * 1099511628211ull;
    }
  }
  printf("kernel_ms %.3f\n", ms);
  printf("checksum %016llx\n", (unsigned long long)sum);
  int bad = 0;
  if ((double)n * n * steps > (double)(1u << 31)) {
    printf("unchecked (N * N * STEPS > 2^31)\n");
  } else {
    float *m = h[0], *p[3] = {h[1], h[2], h[3]}, *v[3] = {h[4], h[5], h[6]};
    for (int s = 0; s < steps; ++s) {
      for (int i = 0; i < n; ++i) {
        float a[3] = {0, 0, 0};
        for (int j = 0; j < n; ++j) {
          float dx = p[0][j] - p[0][i], dy = p[1][j] - p[1][i], dz = p[2][j] - p[2][i];
          float inv = 1.0f / sqrtf(dx * dx + dy * dy + dz * dz + eps * eps);
          float w = m[j] * inv * inv * inv;
          a[0] += dx * w;
          a[1] += dy * w;
          a[2] += dz * w;
        }
        for (int k = 0; k < 3; ++k) v[k][i] += a[k] * dt;
      }
      for (int k = 0; k < 3; ++k)
        for (int i = 0; i < n; ++i) p[k][i] += v[k][i] * dt;
    }
    for (int k = 0; k < 3; ++k)
      for (int i = 0; i < n; ++i) bad += fabsf(got[k][i] - p[k][i]) > 1e-3f * (1 + fabsf(p[k][i]));
    printf("%s (%d of %d coordinates differ)\n", bad ? "FAIL" : "PASS", bad, 3 * n);
  }
  for (int k = 0; k < 7; ++k) {
    CHECK(cudaFree(d[k]));
    free(h[k]);
  }
  for (int k = 0; k < 3; ++k) free(got[k]);
  return bad ? 1 : 0;
}
