//! The CUDA runtime API over virtual buffers (`runtime/src/cudart.rs`): a program written
//! against NVIDIA's own `cuda_runtime_api.h` (from the toolchain `scripts/bootstrap`
//! assembles) copies in and out of `cudaMalloc`'d memory that an HPVM-C node updates on the
//! devices; every step is checked against a host model, on the host and on 1 to 8 simulated
//! devices, with and without the runtime's resending of what the host holds at each launch.

mod common;

use common::*;

fn cuda_include() -> String {
    let cuda = hpvm_core::toolchain::cuda_path().expect("no CUDA folder: run scripts/bootstrap");
    cuda.join("include").to_string_lossy().into_owned()
}

#[test]
fn device_memory_stays_coherent_through_the_cuda_api() {
    let include = cuda_include();
    let dir = TempDir::new("cudart");
    let exe = dir.join("cudart");
    let out = hpvm_mgpu(&["build", "-O2", "-I", &include, "tests/inputs/cudart.c", "-o", exe.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut sums = Vec::new();
    for devices in ["cpu", "cpu:1", "cpu:3", "cpu:8"] {
        for host_writes in ["any", "none"] {
            let env = [("HPVM_MGPU_DEVICES", devices), ("HPVM_MGPU_HOST_WRITES", host_writes)];
            let run = run_program(&exe, &["1003"], &env);
            let text = stdout(&run);
            assert!(run.status.success() && text.contains("PASS"), "{env:?}:\n{text}{}", stderr(&run));
            sums.push(checksum(&text).expect("a checksum"));
        }
    }
    assert!(sums.iter().all(|s| *s == sums[0]), "results differ across devices: {sums:?}");
}

/// A function of the API the runtime does not define fails the link, naming it and the
/// program's line; no executable is left.
#[test]
fn an_unimplemented_cuda_function_fails_the_link_by_name() {
    let dir = TempDir::new("cudart-unimplemented");
    let exe = dir.join("unimplemented");
    let include = cuda_include();
    let out = hpvm_mgpu(&["build", "-I", &include, "tests/inputs/cudart-unimplemented.c", "-o", exe.to_str().unwrap()]);
    let err = stderr(&out);
    assert!(!out.status.success(), "linked:\n{err}");
    assert!(
        err.contains("tests/inputs/cudart-unimplemented.c:8: undefined reference to `cudaGraphicsMapResources'"),
        "{err}"
    );
    assert!(!exe.exists());
}
