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
 *     (LC)                 writes L, outputs (bytesL), bound to the root's output 0
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
 * Usage: pipeline [--stream FRAMES] [W [H]]   (defaults 64 64; any positive size)
 *   --stream FRAMES: launch the graph as a stream and push FRAMES different images through
 *   it (each with its own buffers); the three nodes then work on different frames at once.
 *   Every frame's result is popped (the root's output: bytesL) and checked.
 * Exit status: 0 PASS, 1 FAIL, 2 bad arguments or out of memory.
 */
#include <float.h>
#include <hpvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  __hpvm__return(1, bytesL);
}

void LaplacianEstimate(float *I, size_t bytesI, float *B, size_t bytesB, float *Id,
                       size_t bytesId, float *Ie, size_t bytesIe, float *L, size_t bytesL,
                       long w, long h) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(2, I, B, 3, Id, Ie, L);

  void *df = __hpvm__createNodeND(2, Dilation, w, h);
  void *ef = __hpvm__createNodeND(2, Erosion, w, h);
  void *lc = __hpvm__createNodeND(2, LinearCombination, w, h);

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

  /* The root's one output: LC's bytesL (what a streaming run pops per frame). */
  __hpvm__bindOut(lc, 0, 0, 0);
}

/* The root's outputs, in output-port order. */
struct RootOut {
  size_t bytesL;
};

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
  struct RootOut out; /* receives the root's outputs */
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

/* One frame: its buffers and its launch arguments. */
typedef struct {
  float *I, *Id, *Ie, *L;
  RootIn args;
} Frame;

/* A smooth gradient plus noise, integer grey levels 0..255; different per seed. */
static void fill_image(float *I, long w, long h, uint32_t seed) {
  for (long y = 0; y < h; ++y) {
    for (long x = 0; x < w; ++x) {
      uint32_t g = (uint32_t)((x * 3 + y * 5 + seed) % 192) + lcg_next(&seed) % 64u;
      I[y * w + x] = (float)g;
    }
  }
}

/* FNV-1a over the result's bytes: printed so runs can be compared bit for bit. */
static unsigned long long fnv1a(unsigned long long h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; ++i) {
    h = (h ^ p[i]) * 1099511628211ULL;
  }
  return h;
}

#define FNV_SEED 14695981039346656037ULL

int main(int argc, char **argv) {
  long frames = 0; /* 0: one non-streaming launch */
  int first = 1;
  if (argc > 2 && argv[1][0] == '-' && argv[1][1] == '-') {
    frames = arg_long(argc, argv, 2, 0);
    if (frames <= 0 || strcmp(argv[1], "--stream") != 0) {
      fprintf(stderr, "usage: %s [--stream FRAMES > 0] [W > 0 [H > 0]]\n", argv[0]);
      return 2;
    }
    first = 3;
  }
  long w = arg_long(argc, argv, first, 64);
  long h = arg_long(argc, argv, first + 1, 64);
  if (w <= 0 || h <= 0 || argc > first + 2) {
    fprintf(stderr, "usage: %s [--stream FRAMES > 0] [W > 0 [H > 0]]\n", argv[0]);
    return 2;
  }

  long count = w * h;
  long nframes = frames > 0 ? frames : 1;
  size_t bytes = (size_t)count * sizeof(float);
  size_t bytesB = 9 * sizeof(float);
  float *B = malloc(bytesB);
  float *refId = malloc(bytes);
  float *refIe = malloc(bytes);
  float *refL = malloc(bytes);
  Frame *fr = calloc((size_t)nframes, sizeof(Frame));
  if (!B || !refId || !refIe || !refL || !fr) {
    fprintf(stderr, "pipeline: out of memory\n");
    return 2;
  }

  /* A cross-shaped structuring element. */
  static const float cross[9] = {0.0f, 1.0f, 0.0f, 1.0f, 1.0f, 1.0f, 0.0f, 1.0f, 0.0f};
  for (int i = 0; i < 9; ++i) {
    B[i] = cross[i];
  }

  __hpvm__init();
  llvm_hpvm_track_mem(B, bytesB);
  for (long f = 0; f < nframes; ++f) {
    Frame *F = &fr[f];
    F->I = malloc(bytes);
    F->Id = malloc(bytes);
    F->Ie = malloc(bytes);
    F->L = malloc(bytes);
    if (!F->I || !F->Id || !F->Ie || !F->L) {
      fprintf(stderr, "pipeline: out of memory\n");
      return 2;
    }
    fill_image(F->I, w, h, 99u + 7u * (uint32_t)f);
    for (long i = 0; i < count; ++i) {
      F->Id[i] = F->Ie[i] = F->L[i] = -1.0f;
    }
    llvm_hpvm_track_mem(F->I, bytes);
    llvm_hpvm_track_mem(F->Id, bytes);
    llvm_hpvm_track_mem(F->Ie, bytes);
    llvm_hpvm_track_mem(F->L, bytes);
    RootIn *a = &F->args;
    a->I = F->I;
    a->bytesI = bytes;
    a->B = B;
    a->bytesB = bytesB;
    a->Id = F->Id;
    a->bytesId = bytes;
    a->Ie = F->Ie;
    a->bytesIe = bytes;
    a->L = F->L;
    a->bytesL = bytes;
    a->w = w;
    a->h = h;
    a->out.bytesL = 0;
  }

  long wrong_outputs = 0;
  if (frames == 0) {
    void *dfg = __hpvm__launch(0, LaplacianEstimate, (void *)&fr[0].args);
    __hpvm__wait(dfg);
    wrong_outputs += fr[0].args.out.bytesL != bytes;
  } else {
    /* A stream: every frame pushed, then every result popped, then the end of the stream. */
    void *dfg = __hpvm__launch(1, LaplacianEstimate, (void *)&fr[0].args);
    for (long f = 0; f < frames; ++f) {
      __hpvm__push(dfg, (void *)&fr[f].args);
    }
    for (long f = 0; f < frames; ++f) {
      struct RootOut *out = __hpvm__pop(dfg);
      wrong_outputs += out == NULL || out->bytesL != bytes;
      free(out);
    }
    __hpvm__wait(dfg);
  }

  unsigned long long sum = FNV_SEED;
  for (long f = 0; f < nframes; ++f) {
    llvm_hpvm_request_mem(fr[f].L, bytes);
    sum = fnv1a(sum, fr[f].L, bytes);
  }
  printf("checksum %016llx\n", sum);

  long bad = 0;
  long first_bad = -1, bad_frame = -1;
  for (long f = 0; f < nframes; ++f) {
    Frame *F = &fr[f];
    llvm_hpvm_request_mem(F->Id, bytes);
    llvm_hpvm_request_mem(F->Ie, bytes);
    llvm_hpvm_request_mem(F->L, bytes);
    reference_laplacian(F->I, B, refId, refIe, refL, w, h);
    for (long i = 0; i < count; ++i) {
      if (F->Id[i] != refId[i] || F->Ie[i] != refIe[i] || F->L[i] != refL[i]) {
        if (first_bad < 0) {
          first_bad = i;
          bad_frame = f;
        }
        ++bad;
      }
    }
  }

  int ok = bad == 0 && wrong_outputs == 0;
  if (ok) {
    printf("pipeline %ldx%ld, %ld frame%s%s: PASS (exact)\n", w, h, nframes, nframes == 1 ? "" : "s",
           frames > 0 ? " streamed" : "");
  } else if (bad > 0) {
    printf("pipeline %ldx%ld: FAIL (%ld pixels differ; first in frame %ld at (%ld, %ld): L got %g, "
           "expected %g)\n",
           w, h, bad, bad_frame, first_bad % w, first_bad / w, (double)fr[bad_frame].L[first_bad],
           (double)refL[first_bad]);
  } else {
    printf("pipeline %ldx%ld: FAIL (%ld frames returned a wrong output)\n", w, h, wrong_outputs);
  }

  for (long f = 0; f < nframes; ++f) {
    llvm_hpvm_untrack_mem(fr[f].I);
    llvm_hpvm_untrack_mem(fr[f].Id);
    llvm_hpvm_untrack_mem(fr[f].Ie);
    llvm_hpvm_untrack_mem(fr[f].L);
    free(fr[f].I);
    free(fr[f].Id);
    free(fr[f].Ie);
    free(fr[f].L);
  }
  llvm_hpvm_untrack_mem(B);
  __hpvm__cleanup();
  free(fr);
  free(B);
  free(refId);
  free(refIe);
  free(refL);
  return ok ? 0 : 1;
}
