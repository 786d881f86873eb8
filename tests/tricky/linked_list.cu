// A linked list built on the device: one kernel links nodes of a pool, another walks the
// list and writes what it finds.
#include <cstdio>
#include <cuda_runtime.h>
#include <cstdlib>
#include "../programs/check.h"

struct Node {
  int value;
  Node *next;
};

__global__ void link(Node *pool, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    pool[i].value = i * 3;
    pool[i].next = i + 1 < n ? &pool[i + 1] : nullptr;
  }
}

__global__ void walk(Node *head, int *out, int *count) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    int k = 0;
    for (Node *p = head; p; p = p->next) out[k++] = p->value;
    *count = k;
  }
}

int main(int argc, char **argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 1000;
  Node *pool;
  int *out, *count;
  cudaMalloc(&pool, n * sizeof(Node));
  cudaMalloc(&out, n * sizeof(int));
  cudaMalloc(&count, sizeof(int));
  link<<<(n + 127) / 128, 128>>>(pool, n);
  walk<<<1, 32>>>(pool, out, count);
  int *h = new int[n], k = 0;
  cudaMemcpy(h, out, n * sizeof(int), cudaMemcpyDeviceToHost);
  cudaMemcpy(&k, count, sizeof k, cudaMemcpyDeviceToHost);
  int bad = k != n;
  for (int i = 0; i < n && i < k; i++) bad += h[i] != i * 3;
  printf("checksum %016llx\n", fnv1a(h, n * sizeof(int)));
  printf("%s: %d nodes, %d wrong\n", bad ? "FAIL" : "PASS", k, bad);
  return bad != 0;
}
