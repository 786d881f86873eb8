/* Force-included into both halves of every CUDA source by hpvm-mgpu (frontend/src/cuda/):
 * the cache-hinted loads and stores of NVIDIA's sm_32_intrinsics.h (__ldcg, __ldca, __ldcs,
 * __ldlu, __ldcv; __stwb, __stcg, __stcs, __stwt), which clang's CUDA headers keep out
 * together with that header's inline PTX and do not define. A hint changes where a value is
 * cached, never the value: each moves what a plain access moves, for every type NVIDIA's
 * overloads take (scalars and the vector types) and any other. __ldcv ("fetch again") is a
 * volatile read, so that a loop polling memory another thread writes still reads it each
 * time. cuda_fp16.h's and cuda_bf16.h's own overloads for their types win over these
 * templates (an exact non-template match). */
#if defined(__cplusplus) && !defined(HPVM_MGPU_CACHE_HINTS)
#define HPVM_MGPU_CACHE_HINTS
template <typename T> struct __hpvm_mgpu_same { typedef T type; };
#define HPVM_MGPU_LOAD(NAME)                                                                    \
  template <typename T> static __device__ __forceinline__ T NAME(const T *ptr) { return *ptr; }
HPVM_MGPU_LOAD(__ldcg)
HPVM_MGPU_LOAD(__ldca)
HPVM_MGPU_LOAD(__ldcs)
HPVM_MGPU_LOAD(__ldlu)
#undef HPVM_MGPU_LOAD
/* Byte by byte for any type (a volatile struct has no copy constructor); the scalars in one
 * access each. */
template <typename T> static __device__ __forceinline__ T __ldcv(const T *ptr) {
  T value;
  const volatile unsigned char *from = (const volatile unsigned char *)ptr;
  unsigned char *to = (unsigned char *)&value;
  for (unsigned i = 0; i < sizeof(T); ++i) to[i] = from[i];
  return value;
}
#define HPVM_MGPU_LDCV(T)                                                                        \
  static __device__ __forceinline__ T __ldcv(const T *ptr) { return *(const volatile T *)ptr; }
HPVM_MGPU_LDCV(char)
HPVM_MGPU_LDCV(signed char)
HPVM_MGPU_LDCV(unsigned char)
HPVM_MGPU_LDCV(short)
HPVM_MGPU_LDCV(unsigned short)
HPVM_MGPU_LDCV(int)
HPVM_MGPU_LDCV(unsigned int)
HPVM_MGPU_LDCV(long)
HPVM_MGPU_LDCV(unsigned long)
HPVM_MGPU_LDCV(long long)
HPVM_MGPU_LDCV(unsigned long long)
HPVM_MGPU_LDCV(float)
HPVM_MGPU_LDCV(double)
#undef HPVM_MGPU_LDCV
/* The value's type is the pointer's (not deduced from the value), so that a value of another
 * type converts as it does for NVIDIA's overloads. */
#define HPVM_MGPU_STORE(NAME)                                                                   \
  template <typename T>                                                                         \
  static __device__ __forceinline__ void NAME(T *ptr, typename __hpvm_mgpu_same<T>::type value) { \
    *ptr = value;                                                                               \
  }
HPVM_MGPU_STORE(__stwb)
HPVM_MGPU_STORE(__stcg)
HPVM_MGPU_STORE(__stcs)
HPVM_MGPU_STORE(__stwt)
#undef HPVM_MGPU_STORE
#endif
