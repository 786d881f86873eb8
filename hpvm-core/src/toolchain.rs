//! The tools the build runs and the machine it runs on: where clang and the libraries outside
//! LLVM live, and LLVM's description of the host.
//!
//! The CUDA folder (headers for CUDA sources, libdevice for GPU math) is assembled by
//! `scripts/cuda-toolchain` (run by `scripts/bootstrap`) from NVIDIA's pinned wheels, under
//! the toolchain cache: `$HPVM_MGPU_CACHE`, else `$XDG_CACHE_HOME/hpvm-mgpu`, else
//! `~/.cache/hpvm-mgpu`. `HPVM_MGPU_CUDA_PATH` names another folder of the same layout (a
//! CUDA toolkit's root works too).

use inkwell::targets::{CodeModel, InitializationConfig, RelocMode, Target, TargetMachine};
use inkwell::OptimizationLevel;
use std::path::{Path, PathBuf};

/// The CUDA version the bootstrap assembles.
pub const CUDA_VERSION: &str = "12.4.131";

/// The CUDA folder in use, where one is: `HPVM_MGPU_CUDA_PATH` if set (even if it does not
/// exist, so a wrong setting is not silently replaced), else the toolchain cache's.
pub fn cuda_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("HPVM_MGPU_CUDA_PATH") {
        return Some(PathBuf::from(p));
    }
    let cache = match std::env::var_os("HPVM_MGPU_CACHE") {
        Some(c) => PathBuf::from(c),
        None => std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?
            .join("hpvm-mgpu"),
    };
    let dir = cache.join(format!("cuda-{CUDA_VERSION}"));
    dir.is_dir().then_some(dir)
}

/// ptxas, the PTX assembler that makes the build's cubins, where the CUDA folder has it.
pub fn ptxas() -> Option<PathBuf> {
    let p = cuda_path()?.join("bin/ptxas");
    p.is_file().then_some(p)
}

/// libdevice, the GPU's math library as LLVM bitcode, or why there is none.
pub fn libdevice() -> Result<PathBuf, String> {
    let Some(root) = cuda_path() else {
        return Err("no CUDA folder: run scripts/bootstrap, or set HPVM_MGPU_CUDA_PATH".into());
    };
    let bc = root.join("nvvm/libdevice/libdevice.10.bc");
    if bc.is_file() {
        Ok(bc)
    } else {
        Err(format!("{} is missing; run scripts/bootstrap, or set HPVM_MGPU_CUDA_PATH", bc.display()))
    }
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

/// A target machine for the host, which the new pass manager wants even for IR-level passes.
pub fn host_machine() -> Result<TargetMachine, String> {
    Target::initialize_native(&InitializationConfig::default()).map_err(|e| e.to_string())?;
    let triple = TargetMachine::get_default_triple();
    let target = Target::from_triple(&triple).map_err(|e| e.to_string())?;
    target
        .create_target_machine(&triple, "generic", "", OptimizationLevel::None, RelocMode::PIC, CodeModel::Default)
        .ok_or_else(|| format!("no target machine for {}", triple.as_str().to_string_lossy()))
}
