//! Running clang-19 as the frontends run it: the user's flags, then the flags that make IR the
//! graph builder reads, then clang itself (its diagnostics straight to stderr).

use crate::options::ClangOptions;
use crate::{Error, Result};
use std::path::Path;
use std::process::Command;

/// What gcc (nvcc's host compiler) only warns about in C++ and clang refuses: `register`
/// in C++17 (HeCBench's s3d declares its locals so).
pub(crate) const GCC_LENIENT_CXX: &[&str] = &["-Wno-error=register"];

/// What makes clang's host code as fast as gcc's (nvcc's host compiler) where gcc folds a
/// math call of constants that LLVM cannot: `long double` ones. libstdc++'s
/// `generate_canonical`, behind every `uniform_real_distribution`, calls `logl` of constants
/// for each number it draws: 20 million floats took 2.2 s from clang against 0.18 s from gcc
/// (HeCBench's accuracy: 7.3 s against 1.3 s). Without `errno` to set, the call is pure and
/// leaves the loop; its value is the same libm's. Host code only (the `.cu` files' host half,
/// C++ files without HPVM-C node code), never HPVM-C leaves, whose code the analysis reads; a
/// program that reads `errno` after a math call is C.
pub(crate) const GCC_FOLDS_MATH: &[&str] = &["-fno-math-errno"];

/// The user's `-std`, `-I`, `-D` and `-U`, in that order.
pub(crate) fn add_user_flags(cmd: &mut Command, opts: &ClangOptions) {
    if let Some(std) = &opts.std {
        cmd.arg(format!("-std={std}"));
    }
    for d in &opts.quote_dirs {
        cmd.arg("-iquote").arg(d);
    }
    for d in &opts.include_dirs {
        cmd.arg("-I").arg(d);
    }
    for d in &opts.defines {
        cmd.arg(format!("-D{d}"));
    }
    for u in &opts.undefines {
        cmd.arg(format!("-U{u}"));
    }
}

/// IR the graph builder can read: unoptimized (or with the `-O` level's metadata but no
/// passes), debug info, value names.
pub(crate) fn add_ir_flags(cmd: &mut Command, opts: &ClangOptions) {
    match opts.opt_level {
        Some(level) if level > 0 => cmd.arg(format!("-O{level}")).args(["-Xclang", "-disable-llvm-passes"]),
        _ => cmd.args(["-O0", "-Xclang", "-disable-O0-optnone"]),
    };
    cmd.args(["-g", "-fno-discard-value-names", "-emit-llvm"]);
}

/// [`run_clang`] with clang's diagnostics kept rather than shown: whether it succeeded, and
/// what it said (for a caller that may retry, and then shows them).
pub(crate) fn run_clang_quietly(mut cmd: Command, clang: &Path, opts: &ClangOptions) -> Result<(bool, String)> {
    if opts.verbose {
        eprintln!("+ {cmd:?}");
    }
    tracing::debug!(?cmd, "compiling to LLVM IR");
    let out = hpvm_core::scratch::run_tool(&mut cmd)
        .map_err(|e| Error::ToolMissing { tool: clang.display().to_string(), source: e })?;
    Ok((out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned()))
}

/// Runs a clang command compiling `src` (its own diagnostics go straight to stderr).
pub(crate) fn run_clang(mut cmd: Command, clang: &Path, src: &Path, opts: &ClangOptions) -> Result<()> {
    if opts.verbose {
        eprintln!("+ {cmd:?}");
    }
    tracing::debug!(?cmd, "compiling to LLVM IR");
    let status = hpvm_core::scratch::run_tool_inheriting(&mut cmd)
        .map_err(|e| Error::ToolMissing { tool: clang.display().to_string(), source: e })?;
    if !status.success() {
        return Err(Error::CompileFailed { file: src.display().to_string() });
    }
    Ok(())
}
