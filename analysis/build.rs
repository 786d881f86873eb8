//! Builds the C++ shim that reaches Polly (inside libLLVM-19, which llvm-sys links).

fn main() {
    let prefix = std::env::var("LLVM_SYS_191_PREFIX").unwrap_or_else(|_| "/usr/lib/llvm-19".into());
    println!("cargo:rerun-if-changed=shim/polly_shim.cpp");
    println!("cargo:rerun-if-changed=shim/grid_stride.cpp");
    // As in the command's build script: keep isl-rs's ISL from interposing on Polly's.
    println!("cargo:rustc-link-arg=-Wl,--exclude-libs,ALL");
    println!("cargo:rerun-if-env-changed=LLVM_SYS_191_PREFIX");
    cc::Build::new()
        .cpp(true)
        .file("shim/polly_shim.cpp")
        .file("shim/grid_stride.cpp")
        // Polly's headers first: they include each other as "polly/...".
        .include(format!("{prefix}/include/polly"))
        .include(format!("{prefix}/include"))
        .flag("-std=c++17")
        .flag("-fno-rtti")
        .flag("-fno-exceptions")
        .flag_if_supported("-Wno-unused-parameter")
        .compile("hpvm_polly_shim");
}
