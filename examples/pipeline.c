/*
 * pipeline.c -- the non-linear Laplacian estimate of a greyscale image, the running example of
 * the HPVM paper (figure 1):
 *     Id = dilation of I by the structuring element B   (3 x 3 max filter)
 *     Ie = erosion  of I by B                            (3 x 3 min filter)
 *     L  = Id + Ie - 2 * I
 * B is a flat 3 x 3 structuring element given as a float mask: the neighbour (dx, dy) takes
 * part where B[(dy + 1) * 3 + dx + 1] != 0 (a cross here). Neighbours outside the image are
 * clamped to the nearest border pixel. Pixels are integers 0..255 stored as floats, so every
 * result is exact and the check compares exactly.
 *
 * Dataflow graph:
 *
 *   LaplacianEstimate      internal, 0-D, CPU_TARGET
 *     Dilation (DF)        leaf, 2-D grid w x h, DEVICE: writes Id, outputs (bytesId)
 *     Erosion (EF)         leaf, 2-D grid w x h, DEVICE: writes Ie, outputs (bytesIe)
 *     LinearCombination    leaf, 2-D grid w x h, DEVICE: reads I, Id, Ie at its own pixel,
 *     (LC)                 writes L
 *
 *   Edges (HPVM_EDGE_ONE_TO_ONE: the three grids are identical, and LC's pixel (x, y) needs
 *   only pixel (x, y) of Id and Ie):
 *       Dilation output 0 (bytesId) -> LinearCombination input 3 (bytesId)
 *       Erosion  output 0 (bytesIe) -> LinearCombination input 5 (bytesIe)
 *   All other inputs are bound from the root; LC thus waits for both filters.
 *
 *   Root parameters: (float *I, size_t bytesI, float *B, size_t bytesB, float *Id,
 *                     size_t bytesId, float *Ie, size_t bytesIe, float *L, size_t bytesL,
 *                     long w, long h)
 *
 * Usage: pipeline [W [H]]   (defaults 64 64; any positive size)
 * Exit status: 0 PASS, 1 FAIL, 2 bad arguments or out of memory.
 */
#include <float.h>
#include <hpvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Node parameters are wired by port number (bindIn / edge), not read by name, so internal
 * nodes leave most of them unused; that is the HPVM convention, not a mistake. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

/* ---- Dataflow graph ------------------------------------------------------------------ */

/* DF: Id(x, y) = max of I over the neighbours selected by B, with clamped coordinates. */
void Dilation(float *I, size_t bytesI, float *B, size_t bytesB, float *Id, size_t bytesId,
              long w, long h) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(2, I, B, 1, Id);

  void *self = __hpvm__getNode();
  long x = __hpvm__getNodeInstanceID_x(self);
  long y = __hpvm__getNodeInstanceID_y(self);

  if (x < w && y < h) {
    float v = -FLT_MAX;
    for (long dy = -1; dy <= 1; ++dy) {
      for (long dx = -1; dx <= 1; ++dx) {
        long yy = y + dy;
        yy = yy < 0 ? 0 : yy;
        yy = yy > h - 1 ? h - 1 : yy;
        long xx = x + dx;
        xx = xx < 0 ? 0 : xx;
        xx = xx > w - 1 ? w - 1 : xx;
        float s = I[yy * w + xx];
        if (B[(dy + 1) * 3 + dx + 1] != 0.0f && s > v) {
          v = s;
        }
      }
    }
    Id[y * w + x] = v;
  }
  __hpvm__return(1, bytesId);
}

/* EF: Ie(x, y) = min of I over the neighbours selected by B, with clamped coordinates. */
void Erosion(float *I, size_t bytesI, float *B, size_t bytesB, float *Ie, size_t bytesIe, long w,
             long h) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(2, I, B, 1, Ie);

  void *self = __hpvm__getNode();
  long x = __hpvm__getNodeInstanceID_x(self);
  long y = __hpvm__getNodeInstanceID_y(self);

  if (x < w && y < h) {
    float v = FLT_MAX;
    for (long dy = -1; dy <= 1; ++dy) {
      for (long dx = -1; dx <= 1; ++dx) {
        long yy = y + dy;
        yy = yy < 0 ? 0 : yy;
        yy = yy > h - 1 ? h - 1 : yy;
        long xx = x + dx;
        xx = xx < 0 ? 0 : xx;
        xx = xx > w - 1 ? w - 1 : xx;
        float s = I[yy * w + xx];
        if (B[(dy + 1) * 3 + dx + 1] != 0.0f && s < v) {
          v = s;
        }
      }
    }
    Ie[y * w + x] = v;
  }
  __hpvm__return(1, bytesIe);
}

/* LC: L = Id + Ie - 2 * I, pixel by pixel. */
void LinearCombination(float *I, size_t bytesI, float *Id, size_t bytesId, float *Ie,
                       size_t bytesIe, float *L, size_t bytesL, long w, long h) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(3, I, Id, Ie, 1, L);

  void *self = __hpvm__getNode();
  long x = __hpvm__getNodeInstanceID_x(self);
  long y = __hpvm__getNodeInstanceID_y(self);

  if (x < w && y < h) {
    long id = y * w + x;
    L[id] = Id[id] + Ie[id] - 2.0f * I[id];
  }
  __hpvm__return(0);
}

void LaplacianEstimate(float *I, size_t bytesI, float *B, size_t bytesB, float *Id,
                       size_t bytesId, float *Ie, size_t bytesIe, float *L, size_t bytesL,
                       long w, long h) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(2, I, B, 3, Id, Ie, L);

  void *df = __hpvm__createNodeND(2, Dilation, w, h);
  void *ef = __hpvm__createNodeND(2, Erosion, w, h);
  void *lc = __hpvm__createNodeND(2, LinearCombination, w, h);

  /* STREAMING: a later change adds a streaming mode (several frames pushed through the graph);
   * the last argument of these bindIn/edge calls (0 = HPVM_NONSTREAMING) is where the
   * per-frame inputs I/bytesI and the outputs would become HPVM_STREAMING. Not now. */

  /* DF(I, bytesI, B, bytesB, Id, bytesId, w, h) */
  __hpvm__bindIn(df, 0, 0, 0);  /* I */
  __hpvm__bindIn(df, 1, 1, 0);  /* bytesI */
  __hpvm__bindIn(df, 2, 2, 0);  /* B */
  __hpvm__bindIn(df, 3, 3, 0);  /* bytesB */
  __hpvm__bindIn(df, 4, 4, 0);  /* Id */
  __hpvm__bindIn(df, 5, 5, 0);  /* bytesId */
  __hpvm__bindIn(df, 10, 6, 0); /* w */
  __hpvm__bindIn(df, 11, 7, 0); /* h */

  /* EF(I, bytesI, B, bytesB, Ie, bytesIe, w, h) */
  __hpvm__bindIn(ef, 0, 0, 0);  /* I */
  __hpvm__bindIn(ef, 1, 1, 0);  /* bytesI */
  __hpvm__bindIn(ef, 2, 2, 0);  /* B */
  __hpvm__bindIn(ef, 3, 3, 0);  /* bytesB */
  __hpvm__bindIn(ef, 6, 4, 0);  /* Ie */
  __hpvm__bindIn(ef, 7, 5, 0);  /* bytesIe */
  __hpvm__bindIn(ef, 10, 6, 0); /* w */
  __hpvm__bindIn(ef, 11, 7, 0); /* h */

  /* LC(I, bytesI, Id, bytesId, Ie, bytesIe, L, bytesL, w, h): bytesId and bytesIe come from
   * the edges below, not from the root. */
  __hpvm__bindIn(lc, 0, 0, 0);  /* I */
  __hpvm__bindIn(lc, 1, 1, 0);  /* bytesI */
  __hpvm__bindIn(lc, 4, 2, 0);  /* Id */
  __hpvm__bindIn(lc, 6, 4, 0);  /* Ie */
  __hpvm__bindIn(lc, 8, 6, 0);  /* L */
  __hpvm__bindIn(lc, 9, 7, 0);  /* bytesL */
  __hpvm__bindIn(lc, 10, 8, 0); /* w */
  __hpvm__bindIn(lc, 11, 9, 0); /* h */

  __hpvm__edge(df, lc, HPVM_EDGE_ONE_TO_ONE, 0, 3, 0); /* bytesId */
  __hpvm__edge(ef, lc, HPVM_EDGE_ONE_TO_ONE, 0, 5, 0); /* bytesIe */
}

/* The root's arguments, packed, in parameter order. */
typedef struct __attribute__((__packed__)) {
  float *I;
  size_t bytesI;
  float *B;
  size_t bytesB;
  float *Id;
  size_t bytesId;
  float *Ie;
  size_t bytesIe;
  float *L;
  size_t bytesL;
  long w;
  long h;
} RootIn;

/* ---- Host ---------------------------------------------------------------------------- */

/* Parses argv[i] as a positive long; returns dflt when absent and -1 when malformed. */
static long arg_long(int argc, char **argv, int i, long dflt) {
  if (argc <= i) {
    return dflt;
  }
  char *end = NULL;
  long v = strtol(argv[i], &end, 10);
  if (argv[i][0] == '\0' || *end != '\0' || v <= 0) {
    return -1;
  }
  return v;
}

static uint32_t lcg_next(uint32_t *state) {
  *state = *state * 1664525u + 1013904223u;
  return *state >> 8;
}

static long clamp_l(long v, long lo, long hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* The same computation, sequentially: dilation, erosion, linear combination. */
static void reference_laplacian(const float *I, const float *B, float *Id, float *Ie, float *L,
                                long w, long h) {
  for (long y = 0; y < h; ++y) {
    for (long x = 0; x < w; ++x) {
      float vmax = -FLT_MAX;
      float vmin = FLT_MAX;
      for (long dy = -1; dy <= 1; ++dy) {
        for (long dx = -1; dx <= 1; ++dx) {
          float s = I[clamp_l(y + dy, 0, h - 1) * w + clamp_l(x + dx, 0, w - 1)];
          if (B[(dy + 1) * 3 + dx + 1] != 0.0f) {
            vmax = s > vmax ? s : vmax;
            vmin = s < vmin ? s : vmin;
          }
        }
      }
      Id[y * w + x] = vmax;
      Ie[y * w + x] = vmin;
    }
  }
  for (long i = 0; i < w * h; ++i) {
    L[i] = Id[i] + Ie[i] - 2.0f * I[i];
  }
}

int main(int argc, char **argv) {
  long w = arg_long(argc, argv, 1, 64);
  long h = arg_long(argc, argv, 2, 64);
  if (w <= 0 || h <= 0 || argc > 3) {
    fprintf(stderr, "usage: %s [W > 0 [H > 0]]\n", argv[0]);
    return 2;
  }

  long count = w * h;
  size_t bytes = (size_t)count * sizeof(float);
  size_t bytesB = 9 * sizeof(float);
  float *I = malloc(bytes);
  float *B = malloc(bytesB);
  float *Id = malloc(bytes);
  float *Ie = malloc(bytes);
  float *L = malloc(bytes);
  float *refId = malloc(bytes);
  float *refIe = malloc(bytes);
  float *refL = malloc(bytes);
  if (!I || !B || !Id || !Ie || !L || !refId || !refIe || !refL) {
    fprintf(stderr, "pipeline: out of memory\n");
    return 2;
  }

  /* A cross-shaped structuring element. */
  static const float cross[9] = {0.0f, 1.0f, 0.0f, 1.0f, 1.0f, 1.0f, 0.0f, 1.0f, 0.0f};
  for (int i = 0; i < 9; ++i) {
    B[i] = cross[i];
  }
  /* A smooth gradient plus noise, integer grey levels 0..255. */
  uint32_t seed = 99u;
  for (long y = 0; y < h; ++y) {
    for (long x = 0; x < w; ++x) {
      uint32_t g = (uint32_t)((x * 3 + y * 5) % 192) + lcg_next(&seed) % 64u;
      I[y * w + x] = (float)g;
      Id[y * w + x] = -1.0f;
      Ie[y * w + x] = -1.0f;
      L[y * w + x] = -1.0f;
    }
  }

  __hpvm__init();
  llvm_hpvm_track_mem(I, bytes);
  llvm_hpvm_track_mem(B, bytesB);
  llvm_hpvm_track_mem(Id, bytes);
  llvm_hpvm_track_mem(Ie, bytes);
  llvm_hpvm_track_mem(L, bytes);

  RootIn args;
  args.I = I;
  args.bytesI = bytes;
  args.B = B;
  args.bytesB = bytesB;
  args.Id = Id;
  args.bytesId = bytes;
  args.Ie = Ie;
  args.bytesIe = bytes;
  args.L = L;
  args.bytesL = bytes;
  args.w = w;
  args.h = h;

  /* STREAMING: a later change adds a streaming mode here: launch with HPVM_STREAMING, then
   * __hpvm__push one RootIn per frame (each with its own I and L buffers), __hpvm__pop each
   * frame's result, and __hpvm__wait at the end of the stream. For now: one frame, one
   * non-streaming launch. */
  void *dfg = __hpvm__launch(0, LaplacianEstimate, (void *)&args);
  __hpvm__wait(dfg);

  llvm_hpvm_request_mem(Id, bytes);
  llvm_hpvm_request_mem(Ie, bytes);
  llvm_hpvm_request_mem(L, bytes);

  reference_laplacian(I, B, refId, refIe, refL, w, h);
  long bad = 0;
  long first_bad = -1;
  for (long i = 0; i < count; ++i) {
    if (Id[i] != refId[i] || Ie[i] != refIe[i] || L[i] != refL[i]) {
      if (first_bad < 0) {
        first_bad = i;
      }
      ++bad;
    }
  }

  llvm_hpvm_untrack_mem(I);
  llvm_hpvm_untrack_mem(B);
  llvm_hpvm_untrack_mem(Id);
  llvm_hpvm_untrack_mem(Ie);
  llvm_hpvm_untrack_mem(L);
  __hpvm__cleanup();

  int ok = bad == 0;
  if (ok) {
    printf("pipeline %ldx%ld: PASS (exact)\n", w, h);
  } else {
    printf("pipeline %ldx%ld: FAIL (%ld pixels differ; first at (%ld, %ld): L got %g, "
           "expected %g)\n",
           w, h, bad, first_bad % w, first_bad / w, (double)L[first_bad],
           (double)refL[first_bad]);
  }

  free(I);
  free(B);
  free(Id);
  free(Ie);
  free(L);
  free(refId);
  free(refIe);
  free(refL);
  return ok ? 0 : 1;
}
