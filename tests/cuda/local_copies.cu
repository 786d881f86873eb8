/*
 * local_copies.cu -- whole structs and vectors copied between a buffer and a thread's local
 * array, as FFT kernels load their `float2` data (`data[i] = work[gid + i * 64]`) and
 * particle codes copy a struct in and out: clang makes each a fixed-size `memcpy`, which the
 * analysis must read as the loads and stores it is, or the kernel runs whole.
 * Checked against the same arithmetic on the host.
 * Usage: local_copies [BLOCKS [STEPS]]   (defaults 64 3)
 * Prints PASS or FAIL and `checksum <hex>` of the results' bits.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

struct Particle {
  float x, y, z;
  int hits;
};

// Eight `float2` per thread, strided by 64 within a block's 512, as FFT's loads are.
__global__ void rotate8(float2 *work) {
  int gid = blockIdx.x * 512 + threadIdx.x;
  float2 data[8];
  for (int i = 0; i < 8; i++) data[i] = work[gid + i * 64];
  for (int i = 0; i < 8; i++) data[i] = make_float2(data[i].y + 1.0f, -data[i].x);
  for (int i = 0; i < 8; i++) work[gid + i * 64] = data[(i + 1) & 7];
}

// A struct in, a field changed, the struct out.
__global__ void step(const Particle *in, Particle *out, float dt, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Particle p = in[i];
  p.x += dt * p.y;
  p.hits += p.z > 0.5f;
  out[i] = p;
}

int main(int argc, char **argv) {
  int blocks = argc > 1 ? atoi(argv[1]) : 64;
  int steps = argc > 2 ? atoi(argv[2]) : 3;
  if (blocks < 1 || blocks > 65535 || steps < 1) {
    fprintf(stderr, "usage: local_copies [BLOCKS 1..65535 [STEPS>0]]\n");
    return 2;
  }
  int n = blocks * 512;
  float2 *work = (float2 *)malloc(n * sizeof(float2)), *ref = (float2 *)malloc(n * sizeof(float2));
  Particle *ps = (Particle *)malloc(n * sizeof(Particle)), *pref = (Particle *)malloc(n * sizeof(Particle));
  for (int i = 0; i < n; i++) {
    work[i] = make_float2((float)(i % 97), (float)(i % 13) - 6.0f);
    ps[i] = Particle{(float)(i % 11), (float)(i % 5) * 0.25f, (float)(i % 7) / 7.0f, i % 3};
  }
  memcpy(ref, work, n * sizeof(float2));
  memcpy(pref, ps, n * sizeof(Particle));
  float2 *d_work;
  Particle *d_a, *d_b;
  cudaMalloc(&d_work, n * sizeof(float2));
  cudaMalloc(&d_a, n * sizeof(Particle));
  cudaMalloc(&d_b, n * sizeof(Particle));
  cudaMemcpy(d_work, work, n * sizeof(float2), cudaMemcpyHostToDevice);
  cudaMemcpy(d_a, ps, n * sizeof(Particle), cudaMemcpyHostToDevice);
  for (int s = 0; s < steps; s++) {
    rotate8<<<blocks, 64>>>(d_work);
    step<<<(n + 127) / 128, 128>>>(d_a, d_b, 0.5f, n);
    Particle *t = d_a;
    d_a = d_b;
    d_b = t;
  }
  cudaMemcpy(work, d_work, n * sizeof(float2), cudaMemcpyDeviceToHost);
  cudaMemcpy(ps, d_a, n * sizeof(Particle), cudaMemcpyDeviceToHost);
  for (int s = 0; s < steps; s++) {
    for (int b = 0; b < blocks; b++)
      for (int t = 0; t < 64; t++) {
        float2 data[8];
        int gid = b * 512 + t;
        for (int i = 0; i < 8; i++) data[i] = ref[gid + i * 64];
        for (int i = 0; i < 8; i++) data[i] = make_float2(data[i].y + 1.0f, -data[i].x);
        for (int i = 0; i < 8; i++) ref[gid + i * 64] = data[(i + 1) & 7];
      }
    for (int i = 0; i < n; i++) {
      pref[i].x += 0.5f * pref[i].y;
      pref[i].hits += pref[i].z > 0.5f;
    }
  }
  int bad = 0;
  uint64_t sum = 0;
  for (int i = 0; i < n; i++) {
    if (work[i].x != ref[i].x || work[i].y != ref[i].y) bad++;
    if (ps[i].x != pref[i].x || ps[i].hits != pref[i].hits) bad++;
    uint32_t a, b;
    memcpy(&a, &work[i].x, 4);
    memcpy(&b, &ps[i].x, 4);
    sum = (sum * 31 + a) * 31 + b + (uint32_t)ps[i].hits;
  }
  printf("%s\nchecksum %016llx\n", bad ? "FAIL" : "PASS", (unsigned long long)sum);
  cudaFree(d_work);
  cudaFree(d_a);
  cudaFree(d_b);
  free(work);
  free(ref);
  free(ps);
  free(pref);
  return bad ? 1 : 0;
}
