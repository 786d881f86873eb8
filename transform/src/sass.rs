//! The GPUs' machine code, assembled at build time as nvcc does: `ptxas` (from the CUDA
//! folder, `hpvm_core::toolchain::ptxas`) turns the module's PTX into a cubin per asked
//! architecture, and the executable carries them beside the PTX ([`contract::sass`]). A GPU of
//! one of those architectures loads its kernels at once; any other has the driver compile the
//! PTX, as before. Without ptxas, or where it fails for an architecture, the build goes on
//! with the PTX alone and says so: the kernels are the same, only start-up pays the JIT.

use contract::sass::{pack, Arch};
use std::path::Path;
use std::process::Command;

/// The machine code of one module.
#[derive(Debug, Default)]
pub struct Assembled {
    /// [`contract::sass::pack`]ed images; `None` when there are none.
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
    // One ptxas per architecture, at once: the build waits for the slowest, not the sum.
    let runs: Vec<Result<(Arch, Vec<u8>), String>> = std::thread::scope(|s| {
        let input = &input;
        let ptxas = &ptxas;
        let handles: Vec<_> = archs.iter().map(|name| s.spawn(move || assemble_one(ptxas, input, name, dir))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("ptxas's thread panicked".into()))).collect()
    });
    let mut images = Vec::new();
    for run in runs {
        match run {
            Ok(image) => images.push(image),
            Err(note) => out.notes.push(note),
        }
    }
    out.archs = images.iter().map(|(a, _)| *a).collect();
    if !images.is_empty() {
        out.blob = Some(pack(&images));
    }
    out
}

/// The cubin of `input` (PTX) for the architecture named `name`, or why there is none.
fn assemble_one(ptxas: &Path, input: &Path, name: &str, dir: &Path) -> Result<(Arch, Vec<u8>), String> {
    let arch = Arch::parse(name).ok_or_else(|| format!("`{name}` is not a GPU architecture ptxas knows"))?;
    let cubin = dir.join(format!("{arch}.cubin"));
    let run = hpvm_core::scratch::run_tool(
        Command::new(ptxas).arg(format!("-arch={arch}")).arg("-O3").arg(input).arg("-o").arg(&cubin),
    );
    match run {
        Ok(r) if r.status.success() => {
            std::fs::read(&cubin).map(|code| (arch, code)).map_err(|e| format!("{arch}: reading ptxas's output: {e}"))
        }
        Ok(r) => {
            let err = String::from_utf8_lossy(&r.stderr);
            let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("no message");
            Err(format!("{arch}: ptxas failed: {first}"))
        }
        Err(e) => Err(format!("running {}: {e}", ptxas.display())),
    }
}
