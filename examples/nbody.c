/*
 * nbody.c -- gravitational N-body simulation, Euler steps, the two kernels of figure 27 of the
 * Mekong thesis: every body's velocity is updated from the positions and masses of ALL bodies
 * (with Plummer softening), then every body's position from its own velocity. Bodies are
 * stored as a structure of arrays of floats: pos_x, pos_y, pos_z, mass, vel_x, vel_y, vel_z.
 *
 * Per body i, with eps2 the squared softening length and G = 1:
 *     a_i   = sum_j  mass_j * (p_j - p_i) / (|p_j - p_i|^2 + eps2)^(3/2)     (j == i adds 0)
 *     v_i  += a_i * dt
 *     p_i  += v_i * dt         (after ALL velocities are updated)
 *
 * Dataflow graph (one launch per time step):
 *
 *   NBodyStep            internal, 0-D, CPU_TARGET
 *     UpdateVelocity     leaf, 1-D grid of n instances, DEVICE; reads all positions and
 *                        masses, writes vel[i]; outputs (bytes_vel_x, bytes_vel_y, bytes_vel_z)
 *     UpdatePosition     leaf, 1-D grid of n instances, DEVICE; reads vel[i], updates pos[i]
 *
 *   Edges: UpdateVelocity output 0/1/2 -> UpdatePosition input 7/9/11 (bytes_vel_x/y/z),
 *          HPVM_EDGE_ALL_TO_ALL: every position instance waits for every velocity instance
 *          (the global synchronisation between the two kernels). Those three size parameters
 *          get their values from the edges; all other inputs are bound from the root.
 *
 *   Root parameters: (float *pos_x, size_t bytes_pos_x, float *pos_y, size_t bytes_pos_y,
 *                     float *pos_z, size_t bytes_pos_z, float *mass, size_t bytes_mass,
 *                     float *vel_x, size_t bytes_vel_x, float *vel_y, size_t bytes_vel_y,
 *                     float *vel_z, size_t bytes_vel_z, float dt, float eps2, long n)
 *
 * Usage: nbody [N [STEPS]]   (defaults 512 bodies, 4 steps)
 * Exit status: 0 PASS, 1 FAIL, 2 bad arguments or out of memory.
 */
#include <hpvm.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Node parameters are wired by port number (bindIn / edge), not read by name, so internal
 * nodes leave most of them unused; that is the HPVM convention, not a mistake. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

/* Tolerance of the check, on every position and velocity component:
 *     |got - ref| <= ABS_TOL + REL_TOL * |ref|
 * The device computes the same operations in the same order, but its square root and
 * division may be the fast (approximate) forms and it may fuse multiply-adds; the absolute
 * part covers velocity components near zero, where sums over all bodies cancel. */
#define REL_TOL 1e-3
#define ABS_TOL 1e-5

/* Time step and squared softening length. */
#define DT 0.01f
#define EPS2 0.0025f

/* ---- Dataflow graph ------------------------------------------------------------------ */

void UpdateVelocity(float *pos_x, size_t bytes_pos_x, float *pos_y, size_t bytes_pos_y,
                    float *pos_z, size_t bytes_pos_z, float *mass, size_t bytes_mass,
                    float *vel_x, size_t bytes_vel_x, float *vel_y, size_t bytes_vel_y,
                    float *vel_z, size_t bytes_vel_z, float dt, float eps2, long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(7, pos_x, pos_y, pos_z, mass, vel_x, vel_y, vel_z, 3, vel_x, vel_y, vel_z);

  void *self = __hpvm__getNode();
  long i = __hpvm__getNodeInstanceID_x(self);

  if (i < n) {
    float xi = pos_x[i];
    float yi = pos_y[i];
    float zi = pos_z[i];
    float acc_x = 0.0f;
    float acc_y = 0.0f;
    float acc_z = 0.0f;
    for (long j = 0; j < n; ++j) {
      float diff_x = pos_x[j] - xi;
      float diff_y = pos_y[j] - yi;
      float diff_z = pos_z[j] - zi;
      float dist2 = diff_x * diff_x;
      dist2 += diff_y * diff_y;
      dist2 += diff_z * diff_z;
      dist2 += eps2;
      float inv = 1.0f / __hpvm__sqrt(dist2);
      float s = mass[j] * inv;
      s *= inv;
      s *= inv;
      acc_x += s * diff_x;
      acc_y += s * diff_y;
      acc_z += s * diff_z;
    }
    vel_x[i] += acc_x * dt;
    vel_y[i] += acc_y * dt;
    vel_z[i] += acc_z * dt;
  }
  __hpvm__return(3, bytes_vel_x, bytes_vel_y, bytes_vel_z);
}

void UpdatePosition(float *pos_x, size_t bytes_pos_x, float *pos_y, size_t bytes_pos_y,
                    float *pos_z, size_t bytes_pos_z, float *vel_x, size_t bytes_vel_x,
                    float *vel_y, size_t bytes_vel_y, float *vel_z, size_t bytes_vel_z,
                    float dt, long n) {
  __hpvm__hint(DEVICE);
  __hpvm__attributes(6, pos_x, pos_y, pos_z, vel_x, vel_y, vel_z, 3, pos_x, pos_y, pos_z);

  void *self = __hpvm__getNode();
  long i = __hpvm__getNodeInstanceID_x(self);

  if (i < n) {
    pos_x[i] += vel_x[i] * dt;
    pos_y[i] += vel_y[i] * dt;
    pos_z[i] += vel_z[i] * dt;
  }
  __hpvm__return(0);
}

void NBodyStep(float *pos_x, size_t bytes_pos_x, float *pos_y, size_t bytes_pos_y,
               float *pos_z, size_t bytes_pos_z, float *mass, size_t bytes_mass,
               float *vel_x, size_t bytes_vel_x, float *vel_y, size_t bytes_vel_y,
               float *vel_z, size_t bytes_vel_z, float dt, float eps2, long n) {
  __hpvm__hint(CPU_TARGET);
  __hpvm__attributes(7, pos_x, pos_y, pos_z, mass, vel_x, vel_y, vel_z, 6, pos_x, pos_y, pos_z,
                     vel_x, vel_y, vel_z);

  void *vel = __hpvm__createNodeND(1, UpdateVelocity, n);
  void *pos = __hpvm__createNodeND(1, UpdatePosition, n);

  /* UpdateVelocity has the root's parameter list: ports 0..16 map to 0..16. */
  __hpvm__bindIn(vel, 0, 0, 0);   /* pos_x */
  __hpvm__bindIn(vel, 1, 1, 0);   /* bytes_pos_x */
  __hpvm__bindIn(vel, 2, 2, 0);   /* pos_y */
  __hpvm__bindIn(vel, 3, 3, 0);   /* bytes_pos_y */
  __hpvm__bindIn(vel, 4, 4, 0);   /* pos_z */
  __hpvm__bindIn(vel, 5, 5, 0);   /* bytes_pos_z */
  __hpvm__bindIn(vel, 6, 6, 0);   /* mass */
  __hpvm__bindIn(vel, 7, 7, 0);   /* bytes_mass */
  __hpvm__bindIn(vel, 8, 8, 0);   /* vel_x */
  __hpvm__bindIn(vel, 9, 9, 0);   /* bytes_vel_x */
  __hpvm__bindIn(vel, 10, 10, 0); /* vel_y */
  __hpvm__bindIn(vel, 11, 11, 0); /* bytes_vel_y */
  __hpvm__bindIn(vel, 12, 12, 0); /* vel_z */
  __hpvm__bindIn(vel, 13, 13, 0); /* bytes_vel_z */
  __hpvm__bindIn(vel, 14, 14, 0); /* dt */
  __hpvm__bindIn(vel, 15, 15, 0); /* eps2 */
  __hpvm__bindIn(vel, 16, 16, 0); /* n */

  /* UpdatePosition: everything but the velocity sizes comes from the root. */
  __hpvm__bindIn(pos, 0, 0, 0);   /* pos_x */
  __hpvm__bindIn(pos, 1, 1, 0);   /* bytes_pos_x */
  __hpvm__bindIn(pos, 2, 2, 0);   /* pos_y */
  __hpvm__bindIn(pos, 3, 3, 0);   /* bytes_pos_y */
  __hpvm__bindIn(pos, 4, 4, 0);   /* pos_z */
  __hpvm__bindIn(pos, 5, 5, 0);   /* bytes_pos_z */
  __hpvm__bindIn(pos, 8, 6, 0);   /* vel_x */
  __hpvm__bindIn(pos, 10, 8, 0);  /* vel_y */
  __hpvm__bindIn(pos, 12, 10, 0); /* vel_z */
  __hpvm__bindIn(pos, 14, 12, 0); /* dt */
  __hpvm__bindIn(pos, 16, 13, 0); /* n */

  /* The velocity sizes flow along all-to-all edges: positions wait for all velocities. */
  __hpvm__edge(vel, pos, HPVM_EDGE_ALL_TO_ALL, 0, 7, 0);  /* bytes_vel_x */
  __hpvm__edge(vel, pos, HPVM_EDGE_ALL_TO_ALL, 1, 9, 0);  /* bytes_vel_y */
  __hpvm__edge(vel, pos, HPVM_EDGE_ALL_TO_ALL, 2, 11, 0); /* bytes_vel_z */
}

/* The root's arguments, packed, in parameter order. */
typedef struct __attribute__((__packed__)) {
  float *pos_x;
  size_t bytes_pos_x;
  float *pos_y;
  size_t bytes_pos_y;
  float *pos_z;
  size_t bytes_pos_z;
  float *mass;
  size_t bytes_mass;
  float *vel_x;
  size_t bytes_vel_x;
  float *vel_y;
  size_t bytes_vel_y;
  float *vel_z;
  size_t bytes_vel_z;
  float dt;
  float eps2;
  long n;
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

/* A value in [lo, hi). */
static float lcg_float(uint32_t *state, float lo, float hi) {
  return lo + (hi - lo) * ((float)(lcg_next(state) % 65536u) / 65536.0f);
}

static double abs_d(double v) { return v < 0.0 ? -v : v; }

/* One time step, the same operations in the same order per body as the two leaf nodes. */
static void reference_step(float *pos_x, float *pos_y, float *pos_z, const float *mass,
                           float *vel_x, float *vel_y, float *vel_z, float dt, float eps2,
                           long n) {
  for (long i = 0; i < n; ++i) {
    float xi = pos_x[i];
    float yi = pos_y[i];
    float zi = pos_z[i];
    float acc_x = 0.0f;
    float acc_y = 0.0f;
    float acc_z = 0.0f;
    for (long j = 0; j < n; ++j) {
      float diff_x = pos_x[j] - xi;
      float diff_y = pos_y[j] - yi;
      float diff_z = pos_z[j] - zi;
      float dist2 = diff_x * diff_x;
      dist2 += diff_y * diff_y;
      dist2 += diff_z * diff_z;
      dist2 += eps2;
      float inv = 1.0f / sqrtf(dist2);
      float s = mass[j] * inv;
      s *= inv;
      s *= inv;
      acc_x += s * diff_x;
      acc_y += s * diff_y;
      acc_z += s * diff_z;
    }
    vel_x[i] += acc_x * dt;
    vel_y[i] += acc_y * dt;
    vel_z[i] += acc_z * dt;
  }
  for (long i = 0; i < n; ++i) {
    pos_x[i] += vel_x[i] * dt;
    pos_y[i] += vel_y[i] * dt;
    pos_z[i] += vel_z[i] * dt;
  }
}

/* Compares one array; updates the worst errors and returns the number of elements out of
 * tolerance (NaN included). */
static long compare(const float *got, const float *ref, long n, double *max_abs,
                    double *max_rel) {
  long bad = 0;
  for (long i = 0; i < n; ++i) {
    double err = abs_d((double)got[i] - (double)ref[i]);
    double scale = abs_d((double)ref[i]);
    if (!(err <= ABS_TOL + REL_TOL * scale)) {
      ++bad;
    }
    if (err > *max_abs) {
      *max_abs = err;
    }
    if (scale > 0.0 && err / scale > *max_rel) {
      *max_rel = err / scale;
    }
  }
  return bad;
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
  long n = arg_long(argc, argv, 1, 512);
  long steps = arg_long(argc, argv, 2, 4);
  if (n <= 0 || steps <= 0 || argc > 3) {
    fprintf(stderr, "usage: %s [N > 0 [STEPS > 0]]\n", argv[0]);
    return 2;
  }

  size_t bytes = (size_t)n * sizeof(float);
  /* Device-side arrays 0..6, then the reference copies 7..13. */
  float *arr[14];
  for (int a = 0; a < 14; ++a) {
    arr[a] = malloc(bytes);
    if (!arr[a]) {
      fprintf(stderr, "nbody: out of memory\n");
      return 2;
    }
  }
  float *pos_x = arr[0], *pos_y = arr[1], *pos_z = arr[2], *mass = arr[3];
  float *vel_x = arr[4], *vel_y = arr[5], *vel_z = arr[6];

  /* Bodies in the cube [-1, 1)^3, masses in [0.5, 1.5) / n, small initial velocities. */
  uint32_t seed = 31337u;
  for (long i = 0; i < n; ++i) {
    pos_x[i] = lcg_float(&seed, -1.0f, 1.0f);
    pos_y[i] = lcg_float(&seed, -1.0f, 1.0f);
    pos_z[i] = lcg_float(&seed, -1.0f, 1.0f);
    mass[i] = lcg_float(&seed, 0.5f, 1.5f) / (float)n;
    vel_x[i] = lcg_float(&seed, -0.1f, 0.1f);
    vel_y[i] = lcg_float(&seed, -0.1f, 0.1f);
    vel_z[i] = lcg_float(&seed, -0.1f, 0.1f);
  }
  for (int a = 0; a < 7; ++a) {
    for (long i = 0; i < n; ++i) {
      arr[7 + a][i] = arr[a][i];
    }
  }

  __hpvm__init();
  for (int a = 0; a < 7; ++a) {
    llvm_hpvm_track_mem(arr[a], bytes);
  }

  RootIn args;
  args.pos_x = pos_x;
  args.bytes_pos_x = bytes;
  args.pos_y = pos_y;
  args.bytes_pos_y = bytes;
  args.pos_z = pos_z;
  args.bytes_pos_z = bytes;
  args.mass = mass;
  args.bytes_mass = bytes;
  args.vel_x = vel_x;
  args.bytes_vel_x = bytes;
  args.vel_y = vel_y;
  args.bytes_vel_y = bytes;
  args.vel_z = vel_z;
  args.bytes_vel_z = bytes;
  args.dt = DT;
  args.eps2 = EPS2;
  args.n = n;

  for (long step = 0; step < steps; ++step) {
    void *dfg = __hpvm__launch(0, NBodyStep, (void *)&args);
    __hpvm__wait(dfg);
  }

  unsigned long long sum = FNV_SEED;
  for (int a = 0; a < 7; ++a) {
    llvm_hpvm_request_mem(arr[a], bytes);
    sum = fnv1a(sum, arr[a], bytes);
  }
  printf("checksum %016llx\n", sum);
  if (getenv("HPVM_EXAMPLE_SKIP_CHECK") != NULL) {
    /* For benchmarks: at their sizes the sequential reference would take minutes. */
    __hpvm__cleanup();
    printf("%s: reference check skipped (HPVM_EXAMPLE_SKIP_CHECK)\n", argv[0]);
    return 0;
  }

  for (long step = 0; step < steps; ++step) {
    reference_step(arr[7], arr[8], arr[9], arr[10], arr[11], arr[12], arr[13], DT, EPS2, n);
  }

  double max_abs = 0.0;
  double max_rel = 0.0;
  long bad = 0;
  for (int a = 0; a < 7; ++a) {
    bad += compare(arr[a], arr[7 + a], n, &max_abs, &max_rel);
  }

  for (int a = 0; a < 7; ++a) {
    llvm_hpvm_untrack_mem(arr[a]);
  }
  __hpvm__cleanup();

  int ok = bad == 0;
  printf("nbody n=%ld, %ld steps: %s (max abs err %.3g, max rel err %.3g, tolerance "
         "%.1g + %.1g*|ref|, %ld bad)\n",
         n, steps, ok ? "PASS" : "FAIL", max_abs, max_rel, ABS_TOL, REL_TOL, bad);

  for (int a = 0; a < 14; ++a) {
    free(arr[a]);
  }
  return ok ? 0 : 1;
}
