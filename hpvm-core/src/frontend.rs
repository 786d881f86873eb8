//! From a source file to an LLVM module ready for graph building.
//!
//! C and C++ go through clang-19 (`-O0` with debug info and value names, optnone off), then
//! `sroa,early-cse` in process so that handles and ports are SSA values. `.ll`/`.bc` files
//! are read as they are and get the same two passes. The HPVM-C header is embedded in this
//! crate and put on the include path, so `#include <hpvm.h>` needs no flag.

use crate::scratch::ScratchDir;
use crate::{Error, Result};
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{CodeModel, InitializationConfig, RelocMode, Target, TargetMachine};
use inkwell::OptimizationLevel;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The HPVM-C header, as shipped in `include/hpvm.h`.
pub const HPVM_H: &str = include_str!("../../include/hpvm.h");

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

/// The clang used for C and C++: `$HPVM_MGPU_CLANG`, else `clang-19` on the PATH, else
/// Debian's install location.
pub fn clang() -> PathBuf {
    if let Some(p) = std::env::var_os("HPVM_MGPU_CLANG") {
        return PathBuf::from(p);
    }
    let debian = Path::new("/usr/lib/llvm-19/bin/clang");
    let on_path = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join("clang-19").is_file()));
    if !on_path && debian.is_file() {
        debian.to_path_buf()
    } else {
        PathBuf::from("clang-19")
    }
}

/// Compiles a C/C++ file to bitcode in `out`. clang's own diagnostics go straight to stderr.
pub fn compile_source(src: &Path, lang: Language, opts: &ClangOptions, out: &Path) -> Result<()> {
    let scratch = ScratchDir::new("include").map_err(|e| Error::io("temporary directory", e))?;
    std::fs::write(scratch.path().join("hpvm.h"), HPVM_H).map_err(|e| Error::io("temporary hpvm.h", e))?;
    let clang = clang();
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
    if let Some(cuda) = crate::toolchain::cuda_path().filter(|p| p.join("include/cuda_runtime.h").is_file()) {
        cmd.arg("-isystem").arg(cuda.join("include"));
    }
    add_ir_flags(&mut cmd, opts);
    cmd.arg("-c").arg(src).arg("-o").arg(out);
    run_clang(cmd, &clang, src, opts)
}

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

/// Runs a clang command compiling `src` (its own diagnostics go straight to stderr).
pub(crate) fn run_clang(mut cmd: Command, clang: &Path, src: &Path, opts: &ClangOptions) -> Result<()> {
    if opts.verbose {
        eprintln!("+ {cmd:?}");
    }
    tracing::debug!(?cmd, "compiling to LLVM IR");
    let status = cmd.status().map_err(|e| Error::ToolMissing { tool: clang.display().to_string(), source: e })?;
    if !status.success() {
        return Err(Error::CompileFailed { file: src.display().to_string() });
    }
    Ok(())
}

/// Reads an IR file (text or bitcode) into `ctx`.
pub fn read_ir<'ctx>(ctx: &'ctx Context, path: &Path) -> Result<Module<'ctx>> {
    let buf = inkwell::memory_buffer::MemoryBuffer::create_from_file(path)
        .map_err(|e| Error::BadIr { file: path.display().to_string(), message: e.to_string() })?;
    let module = ctx
        .create_module_from_ir(buf)
        .map_err(|e| Error::BadIr { file: path.display().to_string(), message: e.to_string() })?;
    module.verify().map_err(|e| Error::BadIr { file: path.display().to_string(), message: e.to_string() })?;
    Ok(module)
}

/// A target machine for the host, which the new pass manager wants even for IR-level passes.
pub fn host_machine() -> Result<TargetMachine> {
    Target::initialize_native(&InitializationConfig::default()).map_err(|e| Error::Llvm(e.to_string()))?;
    let triple = TargetMachine::get_default_triple();
    let target = Target::from_triple(&triple).map_err(|e| Error::Llvm(e.to_string()))?;
    target
        .create_target_machine(&triple, "generic", "", OptimizationLevel::None, RelocMode::PIC, CodeModel::Default)
        .ok_or_else(|| Error::Llvm(format!("no target machine for {}", triple.as_str().to_string_lossy())))
}

/// Promotes stack slots to SSA values so that the builder sees handles and ports directly,
/// and inlines launch helpers so that every launch names its root ([`crate::helpers`]).
pub fn prepare(module: &Module<'_>) -> Result<()> {
    let tm = host_machine()?;
    let run = |passes: &str| {
        module.run_passes(passes, &tm, PassBuilderOptions::create()).map_err(|e| Error::Llvm(e.to_string()))
    };
    run("function(sroa,early-cse)")?;
    if crate::helpers::mark_launch_helpers(module) {
        run("always-inline,globaldce,function(sroa,early-cse)")?;
    }
    Ok(())
}

/// Loads any supported input into `ctx`, compiled (if source) and prepared.
pub fn load<'ctx>(ctx: &'ctx Context, path: &Path, opts: &ClangOptions) -> Result<Module<'ctx>> {
    if !path.exists() {
        return Err(Error::MissingInput(path.display().to_string()));
    }
    let module = match InputKind::detect(path, opts.language)? {
        InputKind::Ir => read_ir(ctx, path)?,
        InputKind::Source(Language::Cuda) => {
            let module = crate::cuda::load(ctx, path, opts)?;
            prepare(&module)?;
            return Ok(module);
        }
        InputKind::Source(lang) => {
            let scratch = ScratchDir::new("ir").map_err(|e| Error::io("temporary directory", e))?;
            let bc = scratch.path().join("input.bc");
            compile_source(path, lang, opts, &bc)?;
            read_ir(ctx, &bc)?
        }
    };
    prepare(&module)?;
    Ok(module)
}
