//! Where the tools and libraries outside LLVM live.
//!
//! The CUDA folder (headers for CUDA sources, libdevice for GPU math) is assembled by
//! `scripts/cuda-toolchain` (run by `scripts/bootstrap`) from NVIDIA's pinned wheels, under
//! the toolchain cache: `$HPVM_MGPU_CACHE`, else `$XDG_CACHE_HOME/hpvm-mgpu`, else
//! `~/.cache/hpvm-mgpu`. `HPVM_MGPU_CUDA_PATH` names another folder of the same layout (a
//! CUDA toolkit's root works too).

use std::path::PathBuf;

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
