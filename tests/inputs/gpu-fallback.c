/* Two GPU-hinted leaves that cannot be kernels: one prints (no printf on our GPU path),
 * one uses a barrier although its parent is not a GPU node (so its instances are not one
 * thread block). Both must run on the CPU, correctly, with the reason given at build time. */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>

void Chatty(int *a, size_t bytes_a, long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, a, 1, a);
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (i == 0)
    printf("chatty ran\n");
  if (i < n)
    a[i] += 1;
  __hpvm__return(1, bytes_a);
}

void Synced(int *a, size_t bytes_a, long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, a, 1, a);
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  int v = i < n ? a[i] : 0;
  __hpvm__barrier();
  if (i < n)
    a[n - 1 - i] = v * 2;
  __hpvm__return(0);
}

void Root(int *a, size_t bytes_a, long n) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, a, 1, a);
  void *c = __hpvm__createNodeND(1, Chatty, n);
  void *s = __hpvm__createNodeND(1, Synced, n);
  __hpvm__bindIn(c, 0, 0, 0);
  __hpvm__bindIn(c, 1, 1, 0);
  __hpvm__bindIn(c, 2, 2, 0);
  __hpvm__bindIn(s, 0, 0, 0);
  __hpvm__edge(c, s, HPVM_EDGE_ALL_TO_ALL, 0, 1, 0);
  __hpvm__bindIn(s, 2, 2, 0);
}

typedef struct __attribute__((__packed__)) {
  int *a;
  size_t bytes_a;
  long n;
} RootIn;

int main(void) {
  long n = 64;
  int *a = malloc(n * sizeof(int));
  for (long i = 0; i < n; ++i)
    a[i] = (int)i;
  __hpvm__init();
  llvm_hpvm_track_mem(a, n * sizeof(int));
  RootIn args = {a, n * sizeof(int), n};
  void *g = __hpvm__launch(0, Root, &args);
  __hpvm__wait(g);
  llvm_hpvm_request_mem(a, n * sizeof(int));
  long bad = 0;
  for (long i = 0; i < n; ++i)
    bad += a[n - 1 - i] != 2 * (int)(i + 1);
  llvm_hpvm_untrack_mem(a);
  __hpvm__cleanup();
  printf("gpu-fallback: %s\n", bad == 0 ? "PASS" : "FAIL");
  free(a);
  return bad != 0;
}
