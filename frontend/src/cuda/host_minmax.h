/* Force-included into both halves of every CUDA source by hpvm-mgpu (frontend/src/cuda/):
 * the device half type-checks host functions too.
 * nvcc's headers declare CUDA's min and max overloads (int, unsigned and their mixes, long,
 * long long, float, double) __host__ __device__, so host code and __host__ __device__
 * functions call them; clang's CUDA headers declare them for the device only. These are the
 * same overloads for the host, with CUDA's semantics (mixed signedness compares unsigned;
 * floats as fmaxf/fminf). */
#if defined(__cplusplus) && !defined(HPVM_MGPU_HOST_MINMAX)
#define HPVM_MGPU_HOST_MINMAX
#define HPVM_MGPU_MINMAX(A, B, R)                                                       \
  static inline __host__ R max(A a, B b) { return (R)a > (R)b ? (R)a : (R)b; }         \
  static inline __host__ R min(A a, B b) { return (R)a < (R)b ? (R)a : (R)b; }
HPVM_MGPU_MINMAX(int, int, int)
HPVM_MGPU_MINMAX(unsigned int, unsigned int, unsigned int)
HPVM_MGPU_MINMAX(int, unsigned int, unsigned int)
HPVM_MGPU_MINMAX(unsigned int, int, unsigned int)
HPVM_MGPU_MINMAX(long, long, long)
HPVM_MGPU_MINMAX(unsigned long, unsigned long, unsigned long)
HPVM_MGPU_MINMAX(long, unsigned long, unsigned long)
HPVM_MGPU_MINMAX(unsigned long, long, unsigned long)
HPVM_MGPU_MINMAX(long long, long long, long long)
HPVM_MGPU_MINMAX(unsigned long long, unsigned long long, unsigned long long)
HPVM_MGPU_MINMAX(long long, unsigned long long, unsigned long long)
HPVM_MGPU_MINMAX(unsigned long long, long long, unsigned long long)
#undef HPVM_MGPU_MINMAX
static inline __host__ float max(float a, float b) { return __builtin_fmaxf(a, b); }
static inline __host__ float min(float a, float b) { return __builtin_fminf(a, b); }
static inline __host__ double max(double a, double b) { return __builtin_fmax(a, b); }
static inline __host__ double min(double a, double b) { return __builtin_fmin(a, b); }
static inline __host__ double max(float a, double b) { return __builtin_fmax(a, b); }
static inline __host__ double min(float a, double b) { return __builtin_fmin(a, b); }
static inline __host__ double max(double a, float b) { return __builtin_fmax(a, b); }
static inline __host__ double min(double a, float b) { return __builtin_fmin(a, b); }
#endif
