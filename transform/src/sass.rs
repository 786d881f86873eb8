//! The GPUs' machine code, assembled at build time as nvcc does: `ptxas` (from the CUDA
//! folder, `hpvm_core::toolchain::ptxas`) turns the module's PTX into a cubin per asked
//! architecture, and the executable carries them beside the PTX ([`hpvm_runtime::sass`]). A GPU of
//! one of those architectures loads its kernels at once; any other has the driver compile the
//! PTX, as before. Without ptxas, or where it fails for an architecture, the build goes on
//! with the PTX alone and says so: the kernels are the same, only start-up pays the JIT.

use hpvm_runtime::sass::{pack, Arch};
use std::path::Path;
use std::process::Command;

/// The machine code of one module.
#[derive(Debug, Default)]
pub struct Assembled {
    /// [`hpvm_runtime::sass::pack`]ed images; `None` when there are none.
    pub blob: Option<Vec<u8>>,
    /// The architectures assembled.
    pub archs: Vec<Arch>,
    /// Why some asked architecture has no machine code.
    pub notes: Vec<String>,
}

/// Assembles `ptx` for each of `archs` (names as `sm_90`) with ptxas, in `dir`.
pub fn assemble(ptx: &str, archs: &[String], dir: &Path) -> Assembled {
    let mut out = Assembled::default();
    if archs.is_empty() {
        return out;
    }
    let Some(ptxas) = hpvm_core::toolchain::ptxas() else {
        out.notes.push(
            "no ptxas in the CUDA folder (run scripts/bootstrap): the driver compiles the kernels when the program \
             starts"
                .into(),
        );
        return out;
    };
    let input = dir.join("kernels.ptx");
    if let Err(e) = std::fs::write(&input, ptx) {
        out.notes.push(format!("writing {}: {e}", input.display()));
        return out;
    }
    let mut images = Vec::new();
    for name in archs {
        let Some(arch) = Arch::parse(name) else {
            out.notes.push(format!("`{name}` is not a GPU architecture ptxas knows"));
            continue;
        };
        let cubin = dir.join(format!("{arch}.cubin"));
        let run =
            Command::new(&ptxas).arg(format!("-arch={arch}")).arg("-O3").arg(&input).arg("-o").arg(&cubin).output();
        match run {
            Ok(r) if r.status.success() => match std::fs::read(&cubin) {
                Ok(code) => images.push((arch, code)),
                Err(e) => out.notes.push(format!("{arch}: reading ptxas's output: {e}")),
            },
            Ok(r) => {
                let err = String::from_utf8_lossy(&r.stderr);
                let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("no message");
                out.notes.push(format!("{arch}: ptxas failed: {first}"));
            }
            Err(e) => out.notes.push(format!("running {}: {e}", ptxas.display())),
        }
    }
    out.archs = images.iter().map(|(a, _)| *a).collect();
    if !images.is_empty() {
        out.blob = Some(pack(&images));
    }
    out
}
