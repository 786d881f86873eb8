// Pointers kept in memory in the other forms programs use: as integers (a lock-free stack
// pushed with atomicCAS on its head), as a [begin, end) pair walked with a one-past-the-end
// pointer, and as pointers into the middle of buffers, copied back to the host and
// compared there.
#include <cstdio>
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdlib>
#include "../programs/check.h"

struct Item {
  int value;
  Item *next;
};

struct Span {
  const float *begin, *end;
};

// Every thread pushes its item onto the stack whose head is an integer.
__global__ void push(Item *items, unsigned long long *head, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Item *me = &items[i];
  me->value = i + 1;
  unsigned long long old = *head, seen;
  do {
    seen = old;
    me->next = (Item *)seen;
    old = atomicCAS(head, seen, (unsigned long long)(uintptr_t)me);
  } while (old != seen);
}

__global__ void pop_all(const unsigned long long *head, long long *sum, int *count) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  long long s = 0;
  int k = 0;
  for (const Item *p = (const Item *)(uintptr_t)*head; p != nullptr; p = p->next) {
    s += p->value;
    k++;
  }
  *sum = s;
  *count = k;
}

// Span j covers the elements [j * w, (j + 1) * w) of `data`: pointers into its middle.
__global__ void make_spans(const float *data, Span *spans, int w, int m) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j < m) spans[j] = Span{data + j * w, data + (j + 1) * w};
}

__global__ void span_sums(const Span *spans, float *out, int m) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= m) return;
  float s = 0;
  for (const float *p = spans[j].begin; p != spans[j].end; ++p) s += *p;
  out[j] = s;
}

int main(int argc, char **argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 1000;
  const int w = 7, m = n;
  Item *items;
  unsigned long long *head;
  long long *sum;
  int *count;
  float *data, *out;
  Span *spans;
  cudaMalloc(&items, n * sizeof(Item));
  cudaMalloc(&head, sizeof *head);
  cudaMalloc(&sum, sizeof *sum);
  cudaMalloc(&count, sizeof *count);
  cudaMalloc(&data, m * w * sizeof(float));
  cudaMalloc(&out, m * sizeof(float));
  cudaMalloc(&spans, m * sizeof(Span));
  cudaMemset(head, 0, sizeof *head);
  push<<<(n + 127) / 128, 128>>>(items, head, n);
  pop_all<<<1, 32>>>(head, sum, count);

  float *h = new float[m * w];
  for (int i = 0; i < m * w; i++) h[i] = (float)(i % 5);
  cudaMemcpy(data, h, m * w * sizeof(float), cudaMemcpyHostToDevice);
  make_spans<<<(m + 63) / 64, 64>>>(data, spans, w, m);
  span_sums<<<(m + 63) / 64, 64>>>(spans, out, m);

  long long s = 0;
  int k = 0, bad = 0;
  cudaMemcpy(&s, sum, sizeof s, cudaMemcpyDeviceToHost);
  cudaMemcpy(&k, count, sizeof k, cudaMemcpyDeviceToHost);
  bad += k != n;
  bad += s != (long long)n * (n + 1) / 2;
  float *got = new float[m];
  cudaMemcpy(got, out, m * sizeof(float), cudaMemcpyDeviceToHost);
  for (int j = 0; j < m; j++) {
    float e = 0;
    for (int i = j * w; i < (j + 1) * w; i++) e += (float)(i % 5);
    bad += got[j] != e;
  }
  // The spans the device wrote hold the program's addresses, as cudaMalloc returned them.
  Span last;
  cudaMemcpy(&last, &spans[m - 1], sizeof last, cudaMemcpyDeviceToHost);
  bad += last.begin != data + (m - 1) * w || last.end != data + m * w;
  unsigned long long top = 0;
  cudaMemcpy(&top, head, sizeof top, cudaMemcpyDeviceToHost);
  bad += top < (unsigned long long)(uintptr_t)items || top >= (unsigned long long)(uintptr_t)(items + n);
  printf("checksum %016llx\n", fnv1a(got, m * sizeof(float)) ^ (unsigned long long)s ^ (unsigned long long)k);
  printf("%s: %d items, %d wrong\n", bad ? "FAIL" : "PASS", k, bad);
  return bad != 0;
}
