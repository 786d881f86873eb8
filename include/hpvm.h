/*
 * hpvm.h -- the HPVM-C API, as accepted by hpvm-mgpu.
 *
 * The names and signatures are those of HPVM's own header, so a program written for HPVM
 * compiles unchanged, from C and from C++. `hpvm-mgpu` adds this directory to the include
 * path itself: `#include <hpvm.h>` needs no flag.
 *
 * The model, in short. A program describes a hierarchical dataflow graph (DFG):
 *   - a *node* is a C function; a *leaf* node holds computation, an *internal* node holds a
 *     graph of child nodes built with __hpvm__createNodeND / __hpvm__edge / __hpvm__bindIn /
 *     __hpvm__bindOut and nothing else;
 *   - a node runs as a grid of 0 to 3 dimensions of *dynamic instances*, which must be
 *     independent of each other (except through __hpvm__barrier and atomics);
 *   - a node's inputs are its parameters; each pointer parameter is followed by a `size_t`
 *     parameter holding the size of the pointed-to buffer in bytes (the runtime needs the
 *     extent of every buffer);
 *   - a node's outputs are the values given to __hpvm__return (leaf) or bound with
 *     __hpvm__bindOut (internal), in port order.
 * The host launches a *root* node with __hpvm__launch and a packed struct holding the root's
 * arguments in parameter order (followed, when the root has outputs, by a struct receiving them).
 *
 * None of these functions exist at run time: hpvm-mgpu replaces every call.
 */
#ifndef HPVM_MGPU_HPVM_H
#define HPVM_MGPU_HPVM_H

#ifdef __cplusplus
#include <cstddef>
#else
#include <stddef.h>
#endif

/* ---- Targets ---------------------------------------------------------------------------- */

#ifdef __cplusplus
namespace hpvm {
#endif

/* Where a node should run (its hint). `None` means "no preference" and runs on the CPU. */
enum Target {
  None,
  CPU_TARGET,
  GPU_TARGET,
  CUDNN_TARGET,
  TENSOR_TARGET,
  CPU_OR_GPU_TARGET,
  NUM_TARGETS
};

#ifdef __cplusplus
} /* namespace hpvm */
#endif

/* `DEVICE` names the accelerator target; define it before including this header to change it. */
#ifndef DEVICE
#define DEVICE GPU_TARGET
#endif

/* Values of the replication argument of __hpvm__edge. */
#define HPVM_EDGE_ALL_TO_ALL 0
#define HPVM_EDGE_ONE_TO_ONE 1
/* Values of the streaming arguments of __hpvm__edge, __hpvm__bindIn/Out and __hpvm__launch. */
#define HPVM_NONSTREAMING 0
#define HPVM_STREAMING 1

#ifndef __cplusplus
#define noexcept
#endif

#ifdef __cplusplus
extern "C" {
/* Target hint of the enclosing node function; call it first. */
void __hpvm__hint(hpvm::Target) noexcept;
#else
void __hpvm__hint(enum Target) noexcept;
#endif

/* ---- Graph construction (internal nodes only) ------------------------------------------- */

/* __hpvm__createNodeND(dims, function, count_x[, count_y[, count_z]]): create a child node
 * running `function` as a grid of `dims` (0 to 3) dimensions; the counts are `size_t` and may
 * be expressions of the enclosing node's parameters. Returns the node's handle. */
void *__hpvm__createNodeND(unsigned, ...) noexcept;

/* __hpvm__return(n, v1, ..., vn): the n outputs of a leaf node, in port order. */
void __hpvm__return(unsigned, ...) noexcept;

/* __hpvm__attributes(n_in, in1, ..., n_out, out1, ...): which pointer parameters the node
 * reads and which it writes. A pointer may appear in both lists (in-out). The memory tracker
 * copies only inputs to a device and only outputs back. */
void __hpvm__attributes(unsigned, ...) noexcept;

/* Start and stop the HPVM runtime; call them once, around every launch, in the host code. */
void __hpvm__init(void) noexcept;
void __hpvm__cleanup(void) noexcept;

/* __hpvm__bindIn(child, parent_port, child_port, streaming): input `parent_port` of the
 * enclosing node feeds input `child_port` of `child`. */
void __hpvm__bindIn(void *, unsigned, unsigned, unsigned) noexcept;
/* __hpvm__bindOut(child, child_port, parent_port, streaming): output `child_port` of `child`
 * becomes output `parent_port` of the enclosing node. */
void __hpvm__bindOut(void *, unsigned, unsigned, unsigned) noexcept;
/* __hpvm__edge(src, dst, replication, src_port, dst_port, streaming): output `src_port` of
 * `src` feeds input `dst_port` of `dst`. Replication HPVM_EDGE_ONE_TO_ONE connects instance i
 * of src with instance i of dst (both nodes must have the same grid); HPVM_EDGE_ALL_TO_ALL
 * makes every instance of dst wait for all instances of src. Returns the edge's handle. */
void *__hpvm__edge(void *, void *, unsigned, unsigned, unsigned, unsigned) noexcept;

/* ---- Host side: launching graphs -------------------------------------------------------- */

/* Streaming graphs: push one set of root arguments / pop one set of root outputs. */
void __hpvm__push(void *, void *) noexcept;
void *__hpvm__pop(void *) noexcept;
/* __hpvm__launch(streaming, root_function, args): start the graph of `root_function` with
 * the packed argument struct `args`; returns the graph's handle. */
void *__hpvm__launch(unsigned, ...) noexcept;
/* Wait until a launched graph has finished (for a streaming graph: until its stream ended). */
void __hpvm__wait(void *) noexcept;

/* ---- Inside leaf nodes ------------------------------------------------------------------ */

/* Handle of the current node, and of the parent of a node. */
void *__hpvm__getNode(void) noexcept;
void *__hpvm__getParentNode(void *) noexcept;
/* Wait for all instances of the current node within one instance of its parent. */
void __hpvm__barrier(void) noexcept;
/* Allocate n bytes; in an allocation node, one allocation per parent instance (GPU: shared
 * memory). */
void *__hpvm__malloc(long) noexcept;
/* Index of the current instance of a node, and the number of instances, per dimension. */
long __hpvm__getNodeInstanceID_x(void *) noexcept;
long __hpvm__getNodeInstanceID_y(void *) noexcept;
long __hpvm__getNodeInstanceID_z(void *) noexcept;
long __hpvm__getNumNodeInstances_x(void *) noexcept;
long __hpvm__getNumNodeInstances_y(void *) noexcept;
long __hpvm__getNumNodeInstances_z(void *) noexcept;

/* Atomic read-modify-write on an int; each returns the old value. */
int __hpvm__atomic_cmpxchg(int *, int, int) noexcept;
int __hpvm__atomic_add(int *, int) noexcept;
int __hpvm__atomic_sub(int *, int) noexcept;
int __hpvm__atomic_xchg(int *, int) noexcept;
int __hpvm__atomic_inc(int *) noexcept;
int __hpvm__atomic_dec(int *) noexcept;
int __hpvm__atomic_min(int *, int) noexcept;
int __hpvm__atomic_max(int *, int) noexcept;
int __hpvm__atomic_umax(int *, int) noexcept;
int __hpvm__atomic_umin(int *, int) noexcept;
int __hpvm__atomic_and(int *, int) noexcept;
int __hpvm__atomic_or(int *, int) noexcept;
int __hpvm__atomic_xor(int *, int) noexcept;

/* Single-precision math, mapped to the target's fast forms. */
float __hpvm__floor(float) noexcept;
float __hpvm__rsqrt(float) noexcept;
float __hpvm__sqrt(float) noexcept;
float __hpvm__sin(float) noexcept;
float __hpvm__cos(float) noexcept;

/* ---- Memory tracker (host code) --------------------------------------------------------- */

/* Track the buffer [ptr, ptr + bytes): from now on the runtime knows where its current copy is. */
void llvm_hpvm_track_mem(void *, size_t) noexcept;
/* Stop tracking a buffer (after making the host copy current). */
void llvm_hpvm_untrack_mem(void *) noexcept;
/* Make the host copy of a tracked buffer current before the host reads it. */
void llvm_hpvm_request_mem(void *, size_t) noexcept;

#ifdef __cplusplus
} /* extern "C" */
#endif

#ifndef __cplusplus
#undef noexcept
#endif

#endif /* HPVM_MGPU_HPVM_H */
