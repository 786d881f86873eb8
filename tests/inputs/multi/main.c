/* An HPVM program whose reference lives in another, plain C file (helper.c). */
#include <hpvm.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "helper.h"

void Scale(float *a, size_t bytes_a, long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, a, 1, a);
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (i < n)
    a[i] = sqrtf(a[i]) * FACTOR;
  __hpvm__return(0);
}

void Root(float *a, size_t bytes_a, long n) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, a, 1, a);
  void *s = __hpvm__createNodeND(1, Scale, n);
  __hpvm__bindIn(s, 0, 0, 0);
  __hpvm__bindIn(s, 1, 1, 0);
  __hpvm__bindIn(s, 2, 2, 0);
}

typedef struct __attribute__((__packed__)) {
  float *a;
  size_t bytes_a;
  long n;
} RootIn;

int main(void) {
  long n = 1000;
  float *a = malloc(n * sizeof(float));
  fill_squares(a, n);
  __hpvm__init();
  llvm_hpvm_track_mem(a, n * sizeof(float));
  RootIn args = {a, n * sizeof(float), n};
  void *g = __hpvm__launch(0, Root, &args);
  __hpvm__wait(g);
  llvm_hpvm_request_mem(a, n * sizeof(float));
  long bad = count_wrong(a, n, FACTOR);
  llvm_hpvm_untrack_mem(a);
  __hpvm__cleanup();
  free(a);
  printf("multi: %s\n", bad == 0 ? "PASS" : "FAIL");
  return bad != 0;
}
