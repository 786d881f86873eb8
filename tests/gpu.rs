//! The GPU backend without a GPU (what CI can check): every example's GPU nodes compile to
//! PTX kernels of the expected shape, executables fall back to the CPU with a notice, and
//! nodes that cannot be kernels say why at build time and still run correctly.
//! (On a lent GPU, scripts/device/examples.sh runs them for real.)

mod common;
use common::*;

/// Builds `example` with --emit-ptx into `dir`; returns the PTX text.
fn ptx_of(dir: &TempDir, example: &str) -> String {
    let exe = dir.path_str(example.trim_end_matches(".c"));
    let out = hpvm_mgpu(&["build", "-O2", "--emit-ptx", &format!("examples/{example}"), "-o", &exe]);
    assert!(out.status.success(), "{example}: {}", stderr(&out));
    std::fs::read_to_string(dir.join(&format!("{}.ptx", example.trim_end_matches(".c")))).expect("PTX written")
}

#[test]
fn every_example_has_its_kernels() {
    let dir = TempDir::new("ptx");
    let expect: [(&str, &[&str]); 6] = [
        ("vecadd.c", &["VecAdd"]),
        ("matmul.c", &["MatMulBlocks"]),
        ("stencil2d.c", &["StencilBlocks"]),
        ("nbody.c", &["UpdateVelocity", "UpdatePosition"]),
        ("sgemm_tiled.c", &["SgemmBlock"]),
        ("pipeline.c", &["Dilation", "Erosion", "LinearCombination"]),
    ];
    for (example, kernels) in expect {
        let ptx = ptx_of(&dir, example);
        assert!(ptx.contains(".target sm_80"), "{example}: default architecture");
        for k in kernels {
            assert!(ptx.contains(&format!(".entry hpvm_kernel_{k}(")), "{example}: no kernel for {k}");
            // The read-only-cache variant reads its input buffers with ld.global.nc.
            assert!(ptx.contains(&format!(".entry hpvm_kernel_{k}_nc(")), "{example}: no read-only variant for {k}");
            // Launches from block 0 get kernels that add no offset to their block or thread
            // ids: fewer instructions than the partitions' kernels, same parameters.
            for nc in ["", "_nc"] {
                let body = |suffix: &str| {
                    let at = ptx
                        .find(&format!(".entry hpvm_kernel_{k}{nc}{suffix}("))
                        .unwrap_or_else(|| panic!("{example}: no kernel {k}{nc}{suffix}"));
                    let rest = &ptx[at + 1..];
                    &rest[..rest.find(".entry").unwrap_or(rest.len())]
                };
                let adds = |suffix: &str| body(suffix).matches("add.s").count();
                let params = |suffix: &str| body(suffix).matches(".param ").count();
                assert!(adds("_whole") < adds(""), "{example}: {k}{nc}_whole adds as many: {}", body("_whole"));
                assert_eq!(params("_whole"), params(""), "{example}: {k}{nc}_whole");
            }
        }
        assert!(ptx.contains("ld.global.nc"), "{example}: no read-only-cache loads");
        // No host code and no unresolved HPVM call reaches the GPU.
        assert!(!ptx.contains("__hpvm__") && !ptx.contains("main"), "{example}: host code in the PTX");
    }
    let sgemm = ptx_of(&dir, "sgemm_tiled.c");
    assert!(sgemm.contains(".extern .shared") && sgemm.contains("bar.sync"), "tiles in shared memory, barriers");
    assert!(sgemm.contains("ld.shared.v4.f32"), "aligned tile reads are vectorized");
}

#[test]
fn gpu_architecture_flag() {
    let dir = TempDir::new("arch");
    let exe = dir.path_str("v");
    let out = hpvm_mgpu(&["build", "--gpu-arch", "sm_90a", "--emit-ptx", "examples/vecadd.c", "-o", &exe]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(std::fs::read_to_string(dir.join("vecadd.ptx")).unwrap().contains(".target sm_90a"));
    let out = hpvm_mgpu(&["build", "--gpu-arch", "sm_99", "examples/vecadd.c", "-o", &exe]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("unknown GPU architecture `sm_99`"), "{}", stderr(&out));
    std::fs::remove_file(dir.join("vecadd.ptx")).unwrap();
    let out = hpvm_mgpu(&["build", "--no-gpu", "--emit-ptx", "examples/vecadd.c", "-o", &exe]);
    assert!(out.status.success());
    assert!(!dir.join("vecadd.ptx").exists(), "--no-gpu still compiled kernels");
}

#[test]
fn without_a_gpu_kernels_run_on_the_cpu() {
    if std::path::Path::new("/dev/nvidia0").exists() {
        return; // this check is about machines without a GPU
    }
    let dir = TempDir::new("nogpu");
    let exe = dir.join("vecadd");
    assert!(hpvm_mgpu(&["build", "examples/vecadd.c", "-o", exe.to_str().unwrap()]).status.success());
    let run = run_program(&exe, &["1000"], &[]);
    assert!(run.status.success() && stdout(&run).contains("PASS"));
    assert_eq!(stderr(&run).matches("no GPU found; GPU nodes run on the CPU").count(), 1, "{}", stderr(&run));
    let run = run_program(&exe, &["1000"], &[("HPVM_MGPU_DEVICES", "cpu")]);
    assert!(run.status.success() && stderr(&run).is_empty(), "{}", stderr(&run));
    let run = run_program(&exe, &["1000"], &[("HPVM_MGPU_DEVICES", "cuda")]);
    assert_eq!(run.status.code(), Some(1));
    assert!(stderr(&run).contains("no CUDA GPU"), "{}", stderr(&run));
}

#[test]
fn nodes_that_cannot_be_kernels_say_why_and_run_on_the_cpu() {
    let dir = TempDir::new("fallback");
    let exe = dir.join("fallback");
    let out = hpvm_mgpu(&["build", "tests/inputs/gpu-fallback.c", "-o", exe.to_str().unwrap()]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("tests/inputs/gpu-fallback.c:8: note: node `Chatty` runs on the CPU: it calls `printf`"),
        "{err}"
    );
    assert!(
        err.contains("tests/inputs/gpu-fallback.c:19: note: node `Synced` runs on the CPU: it uses __hpvm__barrier"),
        "{err}"
    );
    let run = run_program(&exe, &[], &[("HPVM_MGPU_DEVICES", "cpu")]);
    assert!(stdout(&run).contains("gpu-fallback: PASS"), "{}{}", stdout(&run), stderr(&run));
}

/// libm in a GPU leaf: exact intrinsics where LLVM has them, libdevice (from the toolchain
/// cache `scripts/bootstrap` fills) for the rest, so the node is a kernel and its PTX calls
/// nothing outside itself. Without libdevice the node runs on the CPU and the note says why.
#[test]
fn math_functions_compile_for_the_gpu_with_libdevice() {
    let dir = TempDir::new("math");
    let exe = dir.join("mathfns");
    let out = hpvm_mgpu(&["build", "-O2", "--emit-ptx", "tests/programs/mathfns.c", "-o", exe.to_str().unwrap()]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("runs on the CPU"), "the math leaf fell back (is the toolchain bootstrapped?):\n{err}");
    let ptx = std::fs::read_to_string(dir.join("mathfns.ptx")).expect("PTX written");
    assert!(ptx.contains(".entry hpvm_kernel_Math("), "no kernel for Math");
    assert!(!ptx.contains(".extern"), "the kernel calls something undefined:\n{ptx}");
    // libdevice's expf (and powf, tanhf) scale the hardware's base-2 exponential.
    assert!(ptx.contains("ex2.approx"), "no libdevice code in the PTX");

    let out = hpvm_mgpu_env(
        &["build", "-O2", "tests/programs/mathfns.c", "-o", exe.to_str().unwrap()],
        &[("HPVM_MGPU_CUDA_PATH", "/nonexistent-cuda")],
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("tests/programs/mathfns.c:25: note: node `Math` runs on the CPU: it calls `expf`, but the GPU's math library is not available: /nonexistent-cuda/nvvm/libdevice/libdevice.10.bc is missing"),
        "{err}"
    );
    let run = run_program(&exe, &["300"], &[("HPVM_MGPU_DEVICES", "cpu")]);
    assert!(stdout(&run).contains("PASS"), "{}{}", stdout(&run), stderr(&run));
}
