/*
 * recursion.cu -- device functions that call themselves and touch memory, as programs write
 * them: a walk of a binary tree held in a buffer (reads the buffer, counts its visits through
 * a pointer to the caller's variable; called twice, with a printf it never reaches), a divide
 * and conquer that fills the thread's own array, a recursive merge sort of each thread's
 * slice of a global buffer (writes the buffer inside the recursion), and mutual recursion;
 * a __device__ variable read inside recursions, one of them called from two kernels and from
 * another recursive function. The program raises the stack limit
 * first, as programs with deep recursion do. Checked against the same functions on the host.
 * Usage: recursion [N [DEPTH]]   (defaults 1000 12)
 * Prints PASS or FAIL and `checksum <hex>` of the results.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define SLICE 16

// Read inside a recursion: the call passes the kernel's binding of it on. The host's
// reference reads its own copy.
__device__ int bonus;
static int host_bonus;

__host__ __device__ int tree_sum(const int *tree, int n, int i, int *visits) {
  if (i < 0) printf("tree_sum: negative index %d\n", i);  // never: printf in a recursion
  if (i >= n) return 0;
  visits[0]++;
  return tree[i] + tree_sum(tree, n, 2 * i + 1, visits) + tree_sum(tree, n, 2 * i + 2, visits);
}

__host__ __device__ void fill(int *local, int lo, int hi, int v) {
  if (hi - lo <= 1) {
#ifdef __CUDA_ARCH__
    int extra = bonus;
#else
    int extra = host_bonus;
#endif
    if (lo < hi) local[lo] = v + lo + extra;
    return;
  }
  int mid = (lo + hi) / 2;
  fill(local, lo, mid, v * 3 + 1);
  fill(local, mid, hi, v * 2);
}

// Sorts a[lo, hi) through tmp, recursively.
__host__ __device__ void merge_sort(int *a, int *tmp, int lo, int hi) {
  if (hi - lo < 2) return;
  int mid = (lo + hi) / 2;
  merge_sort(a, tmp, lo, mid);
  merge_sort(a, tmp, mid, hi);
  int i = lo, j = mid, k = lo;
  while (i < mid && j < hi) tmp[k++] = a[i] <= a[j] ? a[i++] : a[j++];
  while (i < mid) tmp[k++] = a[i++];
  while (j < hi) tmp[k++] = a[j++];
  for (k = lo; k < hi; k++) a[k] = tmp[k];
}

// Called from two kernels and from another recursive function, naming `bonus` too.
__host__ __device__ int series(int v) {
#ifdef __CUDA_ARCH__
  int b = bonus;
#else
  int b = host_bonus;
#endif
  return v <= 0 ? b : series(v - 1) + v * (b % 7 + 1);
}

__host__ __device__ int nested(int *count, int v) {
  if (v <= 0) return series(3);
  count[0] += 1;
  int r = nested(count, v - 1);
  return r + series(v);
}

__host__ __device__ int is_odd(unsigned v);
__host__ __device__ int is_even(unsigned v) { return v == 0 ? 1 : is_odd(v - 1); }
__host__ __device__ int is_odd(unsigned v) { return v == 0 ? 0 : is_even(v - 1); }

__global__ void walk(const int *tree, int n, int *out, int *visits, int depth) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  int local[SLICE];
  fill(local, 0, SLICE, t);
  int s = 0;
  for (int k = 0; k < SLICE; k++) s += local[k] * (k + 1);
  int v = 0, w = 0;
  // Two calls of one recursive function: each call site keeps it.
  out[t] = tree_sum(tree, n, t, &v) + s + is_even((unsigned)(t % depth + depth)) +
           tree_sum(tree, n, n / 2 + t % 3, &w) + series(t % 5);
  visits[t] = v;
}

__global__ void sort_slices(int *data, int *scratch, int slices) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < slices) {
    merge_sort(data + t * SLICE, scratch + t * SLICE, 0, SLICE);
    int c = 0;
    int r = nested(&c, t % 4);
    data[t * SLICE] += r + c;
  }
}

static uint64_t fnv(const int *v, int n, uint64_t sum) {
  for (int i = 0; i < n; ++i) sum = (sum ^ (uint32_t)v[i]) * 1099511628211ull;
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
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  int depth = argc > 2 ? atoi(argv[2]) : 12;
  if (n < 1 || depth < 1) {
    fprintf(stderr, "usage: recursion [N [DEPTH]]\n");
    return 2;
  }
  CHECK(cudaDeviceSetLimit(cudaLimitStackSize, 16384));
  int bonus_value = depth * 5;
  CHECK(cudaMemcpyToSymbol(bonus, &bonus_value, sizeof bonus_value));
  host_bonus = bonus_value;
  size_t stack = 0;
  CHECK(cudaDeviceGetLimit(&stack, cudaLimitStackSize));
  if (stack < 16384) {
    fprintf(stderr, "stack limit %zu after asking for 16384\n", stack);
    return 1;
  }
  int slices = n;
  int *tree = (int *)malloc(n * sizeof(int)), *out = (int *)malloc(n * sizeof(int));
  int *visits = (int *)malloc(n * sizeof(int)), *data = (int *)malloc(slices * SLICE * sizeof(int));
  int *want_out = (int *)malloc(n * sizeof(int)), *want_visits = (int *)malloc(n * sizeof(int));
  int *want_data = (int *)malloc(slices * SLICE * sizeof(int)), *tmp = (int *)malloc(SLICE * sizeof(int));
  for (int i = 0; i < n; i++) tree[i] = (i * 37) % 11 - 5;
  uint32_t x = 12345;
  for (int i = 0; i < slices * SLICE; i++) {
    x = x * 1664525u + 1013904223u;
    data[i] = want_data[i] = (int)(x >> 8) % 1000;
  }
  int *d_tree, *d_out, *d_visits, *d_data, *d_scratch;
  CHECK(cudaMalloc(&d_tree, n * sizeof(int)));
  CHECK(cudaMalloc(&d_out, n * sizeof(int)));
  CHECK(cudaMalloc(&d_visits, n * sizeof(int)));
  CHECK(cudaMalloc(&d_data, slices * SLICE * sizeof(int)));
  CHECK(cudaMalloc(&d_scratch, slices * SLICE * sizeof(int)));
  CHECK(cudaMemcpy(d_tree, tree, n * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_data, data, slices * SLICE * sizeof(int), cudaMemcpyHostToDevice));
  walk<<<(n + 127) / 128, 128>>>(d_tree, n, d_out, d_visits, depth);
  CHECK(cudaGetLastError());
  sort_slices<<<(slices + 63) / 64, 64>>>(d_data, d_scratch, slices);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(out, d_out, n * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(visits, d_visits, n * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(data, d_data, slices * SLICE * sizeof(int), cudaMemcpyDeviceToHost));

  for (int t = 0; t < n; t++) {
    int local[SLICE];
    fill(local, 0, SLICE, t);
    int s = 0;
    for (int k = 0; k < SLICE; k++) s += local[k] * (k + 1);
    int v = 0, w = 0;
    want_out[t] = tree_sum(tree, n, t, &v) + s + is_even((unsigned)(t % depth + depth)) +
                  tree_sum(tree, n, n / 2 + t % 3, &w) + series(t % 5);
    want_visits[t] = v;
  }
  for (int t = 0; t < slices; t++) {
    merge_sort(want_data + t * SLICE, tmp, 0, SLICE);
    int c = 0;
    int r = nested(&c, t % 4);
    want_data[t * SLICE] += r + c;
  }
  int bad = 0;
  for (int i = 0; i < n && !bad; i++) {
    if (out[i] != want_out[i] || visits[i] != want_visits[i]) {
      fprintf(stderr, "thread %d: %d/%d, expected %d/%d\n", i, out[i], visits[i], want_out[i], want_visits[i]);
      bad = 1;
    }
  }
  for (int i = 0; i < slices * SLICE && !bad; i++) {
    if (data[i] != want_data[i]) {
      fprintf(stderr, "sorted element %d: %d, expected %d\n", i, data[i], want_data[i]);
      bad = 1;
    }
  }
  uint64_t sum = fnv(out, n, 1469598103934665603ull);
  sum = fnv(visits, n, sum);
  sum = fnv(data, slices * SLICE, sum);
  printf("%s\nchecksum %016llx\n", bad ? "FAIL" : "PASS", (unsigned long long)sum);
  cudaFree(d_tree);
  cudaFree(d_out);
  cudaFree(d_visits);
  cudaFree(d_data);
  cudaFree(d_scratch);
  free(tree);
  free(out);
  free(visits);
  free(data);
  free(want_out);
  free(want_visits);
  free(want_data);
  free(tmp);
  return bad;
}
