/* Force-included into both halves of every CUDA source by hpvm-mgpu (frontend/src/cuda/),
 * after clang's CUDA headers: nvcc defines __NVCC__, and programs test it to mark their
 * functions __host__ __device__ (HeCBench's xsbench defines __host__ and __device__ empty
 * without it; gpp, lr and ssim choose their qualifiers by it). NVIDIA's own headers test it to
 * tell nvcc from other compilers: their tests are read first, here, so that they still see
 * clang, and __NVCC__ is defined after them. nvcc's __CUDACC__ is 1, clang's wrapper leaves
 * it empty: `#if __CUDACC__` (HeCBench ssim) wants a value. */
#if defined(__cplusplus) && !defined(__NVCC__)
#include <cuda/std/__cccl/compiler.h>
#include <nv/target>
#include <cooperative_groups/details/info.h>
#define __NVCC__ 1
#undef __CUDACC__
#define __CUDACC__ 1
#endif
/* __managed__ variables: clang 19 takes the `managed` attribute for HIP only and ignores it
 * for CUDA, leaving a host variable that device code may not name. Here one is a __device__
 * variable marked for the runtime, which keeps its host shadow current as managed memory: the
 * host reads and writes it directly, as CUDA's unified memory lets it (frontend/src/cuda/
 * device.rs `symbols`, runtime/src/cudart/launch.rs `hpvm_rt_cuda_register_managed`). */
#if defined(__cplusplus) && !defined(HPVM_MGPU_MANAGED)
#define HPVM_MGPU_MANAGED
#undef __managed__
#define __managed__ __device__ __attribute__((annotate("hpvm.managed")))
#endif
