/*
 * merged.cu -- kernels that write where no analysis can tell, each element by one block:
 * a placement through two levels of indices (`out[pos[perm[i]]]`, a counting sort's last
 * step), a placement at an index computed from a float the kernel loads, and a flag set under
 * a data-dependent condition by any number of threads (all of them writing the same value).
 * Their blocks cannot talk through memory, so a split runs each device's blocks on a whole
 * copy of the output and merges the bytes each device changed; so does a kernel writing at
 * `i ^ mask`, which the launch's values leave beyond affine arithmetic (the analysis marks it
 * for a merge where they do). A last kernel publishes its
 * result for other blocks behind a fence and a volatile flag: that one must stay whole.
 * Checked against the same computations on the host.
 * Usage: merged [N [ROUNDS]]   (defaults 50000 2)
 * Prints PASS or FAIL and `checksum <hex>` of the outputs' bits.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

__global__ void place(const int *perm, const int *pos, const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[pos[perm[i]]] = in[i] * 0.5f + 1.0f;
}

// `key` holds each element's destination as a float (exact below 2^24).
__global__ void by_key(const float *key, const int *in, int *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[(int)key[i]] = in[i] * 3 - 7;
}

// Element `i ^ mask`: beyond affine arithmetic whatever `mask` is, so that the launch's
// values leave it as it is, and the runtime merges it (the analysis's fallback).
__global__ void swizzle(const int *in, int *out, int mask, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int j = i ^ mask;
  if (i < n && j < n) out[j] = in[i] + 11;
}

// Any thread whose element passes sets the flag; all write 1.
__global__ void any_above(const float *in, int *flag, float threshold, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && in[i] > threshold) flag[0] = 1;
}

// Merge path (HeCBench merge's first kernel): where each block's diagonal crosses the path
// through two sorted arrays, found by a 32-wide search that ends when a volatile shared flag
// is raised. Polly's assumptions for that loop hold for no launch, so no map is used: every
// read is whole and every write merged. `bit` is 1 up to the crossing and 0 after it.
__global__ void cuts(const int *a, int na, const int *b, int nb, int *out) {
  volatile __shared__ int lo, hi, found;
  __shared__ int bit[32];
  int diag = (int)((uint64_t)blockIdx.x * (uint64_t)(na + nb) / gridDim.x);
  int first = diag > nb ? diag - nb : 0, last = diag < na ? diag : na;
  if (threadIdx.x == 0) lo = first, hi = last, found = 0;
  __syncthreads();
  while (!found) {
    int x = lo + (hi - lo) / 2 + (int)threadIdx.x - 16;
    bit[threadIdx.x] = x <= first ? 1 : x > last ? 0 : a[x - 1] <= b[diag - x] ? 1 : 0;
    __syncthreads();
    if (threadIdx.x > 0 && bit[threadIdx.x] != bit[threadIdx.x - 1]) {
      found = 1;
      out[blockIdx.x] = x;
      out[blockIdx.x + gridDim.x + 1] = diag - x;
    }
    __syncthreads();
    if (threadIdx.x == 16 && !found) {
      if (bit[31]) lo = x + 15;
      else hi = x - 16;
    }
    __syncthreads();
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    out[gridDim.x] = na;
    out[gridDim.x + gridDim.x + 1] = nb;
  }
}

// Each block publishes its sum at a slot read from memory, then raises its flag behind a
// fence, as a block does for another that waits on it: blocks that talk within the launch,
// which no split may cut.
__global__ void publish(const int *in, const int *slot, int *sums, volatile int *ready, int n) {
  if (threadIdx.x == 0) {
    int s = 0;
    for (int k = 0; k < blockDim.x && blockIdx.x * blockDim.x + k < n; k++) s += in[blockIdx.x * blockDim.x + k];
    sums[slot[blockIdx.x]] = s;
    __threadfence();
    ready[blockIdx.x] = 1;
  }
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 50000;
  int rounds = argc > 2 ? atoi(argv[2]) : 2;
  if (n < 1 || n > (1 << 24) || rounds < 1) {
    fprintf(stderr, "usage: merged [N 1..2^24 [ROUNDS>0]]\n");
    return 2;
  }
  int *perm = (int *)malloc(n * sizeof(int)), *pos = (int *)malloc(n * sizeof(int));
  int *ivals = (int *)malloc(n * sizeof(int)), *iout = (int *)malloc(n * sizeof(int));
  float *in = (float *)malloc(n * sizeof(float)), *out = (float *)malloc(n * sizeof(float));
  float *key = (float *)malloc(n * sizeof(float));
  uint32_t s = 777;
  auto next = [&]() { return s = s * 1664525u + 1013904223u; };
  // Two permutations (Fisher-Yates) and the destinations of a third, as floats.
  for (int i = 0; i < n; i++) perm[i] = pos[i] = i, key[i] = (float)i;
  for (int i = n - 1; i > 0; i--) {
    int j = (int)(next() % (uint32_t)(i + 1)), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
    j = (int)(next() % (uint32_t)(i + 1)), t = pos[i];
    pos[i] = pos[j], pos[j] = t;
    j = (int)(next() % (uint32_t)(i + 1));
    float f = key[i];
    key[i] = key[j], key[j] = f;
  }
  for (int i = 0; i < n; i++) in[i] = (float)(next() % 1000) / 8.0f, ivals[i] = (int)(next() % 100000);
  int *d_perm, *d_pos, *d_ivals, *d_iout, *d_flag, *d_sums, *d_ready, *d_swz;
  float *d_in, *d_out, *d_key;
  int blocks = (n + 127) / 128;
  cudaMalloc(&d_perm, n * sizeof(int));
  cudaMalloc(&d_pos, n * sizeof(int));
  cudaMalloc(&d_ivals, n * sizeof(int));
  cudaMalloc(&d_iout, n * sizeof(int));
  cudaMalloc(&d_swz, n * sizeof(int));
  cudaMalloc(&d_flag, 2 * sizeof(int));
  cudaMalloc(&d_sums, n * sizeof(int));
  cudaMalloc(&d_ready, blocks * sizeof(int));
  cudaMalloc(&d_in, n * sizeof(float));
  cudaMalloc(&d_out, n * sizeof(float));
  cudaMalloc(&d_key, n * sizeof(float));
  cudaMemcpy(d_perm, perm, n * sizeof(int), cudaMemcpyHostToDevice);
  cudaMemcpy(d_pos, pos, n * sizeof(int), cudaMemcpyHostToDevice);
  cudaMemcpy(d_ivals, ivals, n * sizeof(int), cudaMemcpyHostToDevice);
  cudaMemcpy(d_in, in, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(d_key, key, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(d_out, 0, n * sizeof(float));
  cudaMemset(d_iout, 0, n * sizeof(int));
  cudaMemset(d_swz, 0, n * sizeof(int));
  cudaMemset(d_flag, 0, 2 * sizeof(int));
  cudaMemset(d_ready, 0, blocks * sizeof(int));
  cudaMemset(d_sums, 0, n * sizeof(int));
  for (int r = 0; r < rounds; r++) {
    place<<<blocks, 128>>>(d_perm, d_pos, d_in, d_out, n);
    by_key<<<blocks, 128>>>(d_key, d_ivals, d_iout, n);
    swizzle<<<blocks, 128>>>(d_ivals, d_swz, 5 + r, n);
  }
  // The largest value passes in one block only; no value passes 1000.
  any_above<<<blocks, 128>>>(d_in, d_flag, 124.0f, n);
  any_above<<<blocks, 128>>>(d_in, d_flag + 1, 1000.0f, n);
  publish<<<blocks, 128>>>(d_ivals, d_pos, d_sums, d_ready, n);
  // Two sorted arrays (multiples of 3 and odd numbers) and their merge path's crossings.
  int na = n, nb = n / 2 + 1, parts = blocks < 64 ? blocks : 64;
  int *sa = (int *)malloc(na * sizeof(int)), *sb = (int *)malloc(nb * sizeof(int));
  int *cut = (int *)malloc(2 * (parts + 1) * sizeof(int));
  for (int i = 0; i < na; i++) sa[i] = 3 * i;
  for (int i = 0; i < nb; i++) sb[i] = 2 * i + 1;
  int *d_sa, *d_sb, *d_cut;
  cudaMalloc(&d_sa, na * sizeof(int));
  cudaMalloc(&d_sb, nb * sizeof(int));
  cudaMalloc(&d_cut, 2 * (parts + 1) * sizeof(int));
  cudaMemcpy(d_sa, sa, na * sizeof(int), cudaMemcpyHostToDevice);
  cudaMemcpy(d_sb, sb, nb * sizeof(int), cudaMemcpyHostToDevice);
  cudaMemset(d_cut, 0xff, 2 * (parts + 1) * sizeof(int));
  cuts<<<parts, 32>>>(d_sa, na, d_sb, nb, d_cut);
  cudaMemcpy(cut, d_cut, 2 * (parts + 1) * sizeof(int), cudaMemcpyDeviceToHost);
  int flag[2], total = 0, ready = 0;
  int *sums = (int *)malloc(n * sizeof(int)), *readys = (int *)malloc(blocks * sizeof(int));
  int *swz = (int *)malloc(n * sizeof(int)), *swz_ref = (int *)calloc(n, sizeof(int));
  cudaMemcpy(swz, d_swz, n * sizeof(int), cudaMemcpyDeviceToHost);
  for (int r = 0; r < rounds; r++)
    for (int i = 0; i < n; i++)
      if ((i ^ (5 + r)) < n) swz_ref[i ^ (5 + r)] = ivals[i] + 11;
  cudaMemcpy(sums, d_sums, n * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(readys, d_ready, blocks * sizeof(int), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; i++) total += sums[i];
  for (int b = 0; b < blocks; b++) ready += readys[b];
  cudaMemcpy(out, d_out, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(iout, d_iout, n * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(flag, d_flag, sizeof flag, cudaMemcpyDeviceToHost);
  int bad = 0, want_total = 0, above = 0;
  for (int i = 0; i < n; i++) {
    if (out[pos[perm[i]]] != in[i] * 0.5f + 1.0f) bad++;
    if (iout[(int)key[i]] != ivals[i] * 3 - 7) bad++;
    if (swz[i] != swz_ref[i]) bad++;
    want_total += ivals[i];
    above |= in[i] > 124.0f;
  }
  // The crossing of each diagonal: the first x past the path, searched for here one by one.
  for (int p = 0; p < parts; p++) {
    int diag = (int)((uint64_t)p * (uint64_t)(na + nb) / parts);
    int first = diag > nb ? diag - nb : 0, last = diag < na ? diag : na, x = first + 1;
    while (x <= last && sa[x - 1] <= sb[diag - x]) x++;
    if (cut[p] != x || cut[p + parts + 1] != diag - x) bad++;
  }
  if (cut[parts] != na || cut[2 * parts + 1] != nb) bad++;
  // `pos` is a permutation of 0..n: each block's sum lands in a slot of its own.
  if (flag[0] != above || flag[1] != 0 || ready != blocks || total != want_total) bad++;
  uint64_t sum = 0;
  for (int i = 0; i < n; i++) {
    uint32_t b;
    memcpy(&b, &out[i], 4);
    sum = sum * 31 + b;
    sum = sum * 31 + (uint32_t)iout[i];
  }
  for (int i = 0; i < n; i++) sum = (sum * 31 + (uint32_t)sums[i]) * 31 + (uint32_t)swz[i];
  sum = sum * 31 + (uint32_t)flag[0] * 2 + (uint32_t)flag[1] + (uint32_t)ready;
  for (int i = 0; i < 2 * (parts + 1); i++) sum = sum * 31 + (uint32_t)cut[i];
  printf("%s\nchecksum %016llx\n", bad ? "FAIL" : "PASS", (unsigned long long)sum);
  cudaFree(d_perm);
  cudaFree(d_pos);
  cudaFree(d_ivals);
  cudaFree(d_iout);
  cudaFree(d_flag);
  cudaFree(d_sums);
  cudaFree(d_ready);
  cudaFree(d_swz);
  cudaFree(d_in);
  cudaFree(d_out);
  cudaFree(d_key);
  cudaFree(d_sa);
  cudaFree(d_sb);
  cudaFree(d_cut);
  free(sa);
  free(sb);
  free(cut);
  free(perm);
  free(pos);
  free(ivals);
  free(iout);
  free(in);
  free(out);
  free(key);
  free(sums);
  free(readys);
  free(swz);
  free(swz_ref);
  return bad ? 1 : 0;
}
