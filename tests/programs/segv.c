/*
 * segv.c -- a leaf with a bug that crashes it: each instance reads its row of an image and
 * the next one, so the last row reads one row past the input (a demosaic filter's classic
 * mistake). The input ends exactly at a page the program made inaccessible, so the read
 * faults every time. The runtime must name the node, its file:line, the address and the
 * buffer, flush what the program printed, and die of SIGSEGV.
 *
 * Usage: segv ROWS COLS. Prints a line, then crashes (there is no PASS).
 */
#include <hpvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wunused-parameter"

void Rows(float *in, size_t bytes_in, float *out, size_t bytes_out, long cols) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(1, in, 1, out);
  long r = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  float s = 0.0f;
  for (long c = 0; c < cols; ++c) {
    s += in[r * cols + c] + in[(r + 1) * cols + c];
  }
  out[r] = s;
  __hpvm__return(0);
}

void RowsRoot(float *in, size_t bytes_in, float *out, size_t bytes_out, long rows, long cols) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(1, in, 1, out);
  void *k = __hpvm__createNodeND(1, Rows, rows);
  __hpvm__bindIn(k, 0, 0, 0);
  __hpvm__bindIn(k, 1, 1, 0);
  __hpvm__bindIn(k, 2, 2, 0);
  __hpvm__bindIn(k, 3, 3, 0);
  __hpvm__bindIn(k, 5, 4, 0);
}

typedef struct __attribute__((__packed__)) {
  float *in;
  size_t bytes_in;
  float *out;
  size_t bytes_out;
  long rows;
  long cols;
} In;

int main(int argc, char **argv) {
  long rows = argc > 1 ? atol(argv[1]) : 0, cols = argc > 2 ? atol(argv[2]) : 0;
  long page = sysconf(_SC_PAGESIZE);
  size_t bytes = (size_t)(rows * cols) * sizeof(float);
  if (argc != 3 || rows < 1 || cols < 1 || bytes % (size_t)page != 0) {
    fprintf(stderr, "usage: %s ROWS COLS (ROWS * COLS * 4 a multiple of the page size)\n", argv[0]);
    return 2;
  }
  /* The input, then a page no one may touch. */
  char *map = mmap(NULL, bytes + (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED || mprotect(map + bytes, (size_t)page, PROT_NONE) != 0) {
    perror("segv: mmap");
    return 2;
  }
  float *in = (float *)map, *out = malloc((size_t)rows * sizeof(float));
  for (long i = 0; i < rows * cols; ++i) {
    in[i] = (float)(i % 13);
  }
  printf("segv: %ld rows of %ld, input at %p\n", rows, cols, (void *)in);
  __hpvm__init();
  llvm_hpvm_track_mem(in, bytes);
  llvm_hpvm_track_mem(out, (size_t)rows * sizeof(float));
  In args = {in, bytes, out, (size_t)rows * sizeof(float), rows, cols};
  void *g = __hpvm__launch(0, RowsRoot, &args);
  __hpvm__wait(g);
  llvm_hpvm_request_mem(out, (size_t)rows * sizeof(float));
  printf("not reached: %f\n", out[0]);
  __hpvm__cleanup();
  return 0;
}
