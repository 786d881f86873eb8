//! The contract between `hpvm-mgpu build` and the runtime linked into what it builds.
//!
//! The compiler (`transform`) writes everything here into an executable: the program
//! description, code that reads the runtime's records and calls its functions, kernels with
//! an agreed parameter layout, tables under agreed symbols, packed machine code. The
//! runtime (`hpvm_runtime`) reads it back when the program runs. Neither side may change a
//! layout, a name or a meaning alone, so each lives here once and both sides use it; the
//! description carries a [`desc::VERSION`] the runtime checks.
//!
//! Invariants:
//! - This crate holds data and the code that defines it (parsing, checking, evaluating,
//!   packing), nothing that needs LLVM, a GPU or a thread pool: the compiler links it
//!   without the runtime's dependencies.
//! - Every `#[repr(C)]` record here is read by compiled code at the offsets its fields have;
//!   `transform` computes those offsets from the same definitions.

pub mod ctx;
pub mod desc;
pub mod kernel;
pub mod sass;
pub mod symbols;
pub mod warp;

/// The architecture device code is compiled for, as CUDA's `ptxVersion` and
/// `binaryVersion` give it (major * 10 + minor): `hpvm-mgpu build` compiles device code for
/// sm_80 (`__CUDA_ARCH__` 800) whatever GPUs it assembles for. CUB picks its tuning on the
/// host from `ptxVersion`, and its kernels picked theirs from `__CUDA_ARCH__`: the two must
/// agree, or a kernel would run with another policy's block size.
pub const DEVICE_CODE_ARCH: i32 = 80;
