//! C and C++ sources: one clang-19 run each, to bitcode. The HPVM-C header is embedded in
//! this crate and put on the include path, so `#include <hpvm.h>` needs no flag.

use crate::clang::{add_ir_flags, add_user_flags, run_clang, GCC_FOLDS_MATH, GCC_LENIENT_CXX};
use crate::options::{ClangOptions, Language};
use crate::{Error, Result};
use hpvm_core::scratch::ScratchDir;
use hpvm_core::toolchain;
use std::path::Path;
use std::process::Command;

/// The HPVM-C header, as shipped in `include/hpvm.h`.
pub const HPVM_H: &str = include_str!("../../include/hpvm.h");

/// Compiles a C/C++ file to bitcode in `out`. clang's own diagnostics go straight to stderr.
pub fn compile_source(src: &Path, lang: Language, opts: &ClangOptions, out: &Path) -> Result<()> {
    let scratch = ScratchDir::new("include").map_err(|e| Error::io("temporary directory", e))?;
    std::fs::write(scratch.path().join("hpvm.h"), HPVM_H).map_err(|e| Error::io("temporary hpvm.h", e))?;
    let clang = toolchain::clang();
    let mut cmd = Command::new(&clang);
    cmd.arg("-x").arg(match lang {
        Language::C => "c",
        Language::Cxx => "c++",
        // Two halves, never one file of IR: see `crate::cuda::load`.
        Language::Cuda => return Err(Error::Cuda(format!("{}: CUDA sources are read by cuda::load", src.display()))),
    });
    if lang == Language::C {
        // gcc's leniency, which nvcc's host compiler has: C89's implicit declarations and
        // implicit int, and loose pointer conversions, are warnings, not errors.
        cmd.args([
            "-Wno-error=implicit-function-declaration",
            "-Wno-error=implicit-int",
            "-Wno-error=int-conversion",
            "-Wno-error=incompatible-pointer-types",
            "-Wno-error=return-type",
        ]);
    }
    if lang == Language::Cxx {
        cmd.args(GCC_LENIENT_CXX);
        // A C++ file with no HPVM-C node code: a CUDA program's host file.
        if std::fs::read_to_string(src).is_ok_and(|text| !text.contains("__hpvm__")) {
            cmd.args(GCC_FOLDS_MATH);
        }
    }
    match &opts.std {
        // A Makefile's `-std=c++17` reaches its `.c` files too; gcc, nvcc's host compiler,
        // warns and compiles them as C, and so does this.
        Some(std) if lang == Language::C && std.contains("++") => {
            eprintln!("{}: warning: -std={std} is for C++; compiled as C", src.display());
            add_user_flags(&mut cmd, &ClangOptions { std: None, ..opts.clone() });
        }
        _ => add_user_flags(&mut cmd, opts),
    }
    if opts.openmp {
        cmd.arg("-fopenmp");
    }
    // After the user's -I, so a user's own hpvm.h wins, as with any system header.
    cmd.arg("-isystem").arg(scratch.path());
    // CUDA's headers, as nvcc gives them to its host compiler: a host file of a CUDA program
    // includes `cuda_runtime.h` without saying where it is.
    if let Some(cuda) = toolchain::cuda_path().filter(|p| p.join("include/cuda_runtime.h").is_file()) {
        cmd.arg("-isystem").arg(cuda.join("include"));
    }
    add_ir_flags(&mut cmd, opts);
    cmd.arg("-c").arg(src).arg("-o").arg(out);
    run_clang(cmd, &clang, src, opts)
}
