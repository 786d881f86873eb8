//! What the user asked of a compilation: the language, and the flags of a C compiler driver
//! that reach clang.

use crate::{Error, Result};
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    C,
    Cxx,
    /// CUDA C++: device and host halves compiled apart, kernels made graph nodes ([`crate::cuda`]).
    Cuda,
}

/// What kind of file an input is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    Source(Language),
    /// LLVM IR, textual or bitcode.
    Ir,
}

impl InputKind {
    /// From `-x` if given, else from the extension.
    pub fn detect(path: &Path, forced: Option<Language>) -> Result<InputKind> {
        if let Some(lang) = forced {
            return Ok(InputKind::Source(lang));
        }
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        Ok(match ext {
            "c" => InputKind::Source(Language::C),
            "cc" | "cpp" | "cxx" | "C" | "c++" => InputKind::Source(Language::Cxx),
            "cu" => InputKind::Source(Language::Cuda),
            "ll" | "bc" => InputKind::Ir,
            _ => return Err(Error::UnknownInput(path.display().to_string())),
        })
    }
}

/// The flags of a C compiler driver that reach clang.
#[derive(Clone, Debug, Default)]
pub struct ClangOptions {
    pub include_dirs: Vec<PathBuf>,
    /// `-iquote` directories, searched first for `#include "..."` (the user's own directory
    /// where the compiled file is a respelled copy elsewhere).
    pub quote_dirs: Vec<PathBuf>,
    /// `NAME` or `NAME=VALUE`.
    pub defines: Vec<String>,
    /// Macros undefined (`-U NAME`), after the definitions.
    pub undefines: Vec<String>,
    pub language: Option<Language>,
    /// `-std=` value.
    pub std: Option<String>,
    /// Print each tool invocation.
    pub verbose: bool,
    /// For code generation: the user's `-O` level. clang then emits IR as it would at that
    /// level (with its type-based alias metadata) but runs no passes, so the graph is read
    /// from unoptimized code either way. `None`: reading only (`inspect`).
    pub opt_level: Option<u8>,
    /// For CUDA sources: the GPU architecture device code is compiled for (`__CUDA_ARCH__`);
    /// `None`: [`crate::cuda::DEFAULT_ARCH`].
    pub cuda_arch: Option<String>,
    /// Host code with OpenMP (`-fopenmp`, LLVM's libomp), as nvcc's `-Xcompiler -fopenmp`.
    /// Device code never sees it.
    pub openmp: bool,
    /// CUDA device code without fused multiply-adds (nvcc's `--fmad=false`): clang's
    /// `-ffp-contract=off`, on every device alike.
    pub no_fmad: bool,
    /// nvcc's `-use_fast_math` for CUDA device code: GPU code computes the affected
    /// single-precision functions with their intrinsics, divides approximately and flushes
    /// denormals (`transform::gpu::Math::CudaFast`); simulated devices stay exact.
    pub fast_math: bool,
}
