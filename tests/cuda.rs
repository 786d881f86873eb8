//! CUDA sources (`.cu`): kernels become graph nodes named after them, run split on simulated
//! devices with results identical to one device (`tests/partitioned.rs` runs
//! `tests/cuda/kernels.cu` through the full differential test), and what the frontend does not
//! take yet is a build error at the user's line, never a different program.

mod common;

use common::*;

#[test]
fn kernels_are_nodes_named_after_them_at_their_lines() {
    let out = hpvm_mgpu(&["inspect", "tests/cuda/kernels.cu"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    for (kernel, line) in [("scale<float>", 32), ("stencil2d", 37), ("tiled_matmul", 52), ("reverse_block", 68)] {
        let leaf =
            format!("node {kernel} (leaf, hint GPU, 3-D [bx, by, bz])\n  defined at tests/cuda/kernels.cu:{line}\n");
        assert!(text.contains(&leaf), "no `{leaf}` in:\n{text}");
        assert!(text.contains(&format!("node {kernel}.blocks (internal, hint GPU, 3-D [gx, gy, gz])")), "{text}");
    }
    // Shared memory comes from an allocation node, sized by the launch where it is dynamic.
    assert!(text.contains("node tiled_matmul.alloc (allocation, hint GPU, 0-D)"), "{text}");
    assert!(text.contains("edge:     tiled_matmul.alloc.out2 -> tiled_matmul.9 (shared1) (all-to-all)"), "{text}");
    assert!(text.contains("5 dynamic_shared: ptr, bytes in #6"), "{text}");
    // A __constant__ variable is a buffer argument (which the kernel only reads).
    assert!(text.contains("4 offsets: ptr, in, bytes in #5"), "{text}");
}

/// A pointer is declared read-only (`in`, which lets the runtime skip coherence work and
/// read it through the non-coherent cache) only where the kernel provably never writes
/// through it; `const` is not trusted.
#[test]
fn pointers_the_kernel_only_reads_are_inputs_only() {
    let out = hpvm_mgpu(&["inspect", "tests/inputs/cuda/readonly.cu"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    let params = |node: &str| -> Vec<String> {
        let at = text.find(&format!("node {node} (leaf")).unwrap_or_else(|| panic!("no leaf {node} in {text}"));
        text[at..]
            .lines()
            .skip(1)
            .take_while(|l| !l.starts_with("node "))
            .filter(|l| l.contains(": ptr,"))
            .map(|l| l.trim().to_string())
            .collect()
    };
    for (node, want) in [
        ("copy", ["0 src: ptr, in,", "2 dst: ptr, in-out,"]),
        ("pick", ["0 a: ptr, in-out,", "2 b: ptr, in-out,"]),
        ("count", ["0 keys: ptr, in,", "2 bins: ptr, in-out,"]),
        ("through_a_function", ["0 a: ptr, in-out,", "2 b: ptr, in,"]),
        ("stores_the_pointer", ["0 a: ptr, in-out,", "2 slot: ptr, in-out,"]),
    ] {
        let got = params(node);
        for (g, w) in got.iter().zip(want) {
            assert!(g.starts_with(w), "{node}: `{g}`, want `{w}…`");
        }
        assert_eq!(got.len(), 2, "{node}: {got:?}");
    }
    assert_eq!(params("casts_const_away").len(), 1);
    assert!(params("casts_const_away")[0].starts_with("0 a: ptr, in-out,"), "{text}");
}

#[test]
fn the_analysis_proves_kernels_and_names_what_stops_it_at_the_users_line() {
    let out = hpvm_mgpu(&["analyze", "tests/cuda/kernels.cu"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    for kernel in ["scale<float>", "stencil2d", "tiled_matmul", "reverse_block", "softplus"] {
        assert!(text.contains(&format!("node {kernel} (tests/cuda/kernels.cu:")), "{text}");
        let line = text.lines().find(|l| l.starts_with(&format!("node {kernel} "))).unwrap();
        assert!(line.contains("partitionable, splittable along"), "{line}");
    }
    // atomicAdd is inlined from clang's headers: a reduction, split.
    let line = text.lines().find(|l| l.starts_with("node histogram ")).unwrap();
    assert!(line.contains("partitionable, splittable along"), "{line}");
    assert!(text.contains("updates atomically (add on i32; each device a private copy) anywhere in bins[*]"), "{text}");
}

/// The README's main example: at -O0 and -O2, on one and three simulated devices, PASS with
/// one checksum.
#[test]
fn the_cuda_example_passes_everywhere_with_one_result() {
    let dir = TempDir::new("cuda-example");
    let mut sums = Vec::new();
    for opt in ["-O0", "-O2"] {
        let exe = dir.join(&format!("matmul{opt}"));
        let out = hpvm_mgpu(&["build", opt, "examples/cuda/matmul.cu", "-o", exe.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
        for devices in ["cpu:1", "cpu:3"] {
            let run = run_program(&exe, &["100"], &[("HPVM_MGPU_DEVICES", devices)]);
            let text = stdout(&run);
            assert!(run.status.success() && text.contains("PASS"), "{opt} {devices}: {text}{}", stderr(&run));
            sums.push(checksum(&text).expect("a checksum"));
        }
    }
    assert!(sums.iter().all(|s| *s == sums[0]), "{sums:?}");
}

/// A class with out-of-line constructors builds for the GPU with nothing of the host in its
/// code (no note of a kernel falling back, no `ptxas` failure), and runs.
#[test]
fn classes_with_constructors_keep_host_code_out_of_the_gpus() {
    let dir = TempDir::new("cuda-classes");
    let exe = dir.join("app");
    let out = hpvm_mgpu(&["build", "tests/inputs/cuda/classes.cu", "-o", exe.to_str().unwrap()]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("note:"), "{err}");
    let run = run_program(&exe, &[], &[("HPVM_MGPU_DEVICES", "cpu:2")]);
    assert!(run.status.success() && stdout(&run).contains("PASS"), "{}{}", stdout(&run), stderr(&run));
}

/// What the frontend does not take fails the build with the user's file:line, exit 1, and
/// no executable.
#[test]
fn unsupported_cuda_is_a_build_error_at_the_users_line() {
    let dir = TempDir::new("cuda-unsupported");
    let (src, want) = (
        "tests/inputs/cuda/recursion.cu",
        "tests/inputs/cuda/recursion.cu:6:35: error: kernel `fills` calls `fill` recursively, and `fill` reads its thread's or block's index",
    );
    let exe = dir.join("app");
    let out = hpvm_mgpu(&["build", src, "-o", exe.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{src}:\n{err}");
    assert!(err.contains(want), "{src}: expected `{want}` in:\n{err}");
    assert!(!err.contains("panicked") && !err.contains("hpvm-mgpu: error:"), "{err}");
    assert!(!exe.exists());
}

/// Inline PTX with no CPU equivalent (`%smid`) builds, runs as written on GPUs, and on
/// simulated devices stops the program naming the statement and the user's line: never a
/// silent wrong value.
#[test]
fn inline_ptx_without_a_cpu_equivalent_stops_at_its_line() {
    let dir = TempDir::new("cuda-smid");
    let exe = dir.join("app");
    let out = hpvm_mgpu(&["build", "tests/inputs/cuda/smid.cu", "-o", exe.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = run_program(&exe, &[], &[("HPVM_MGPU_DEVICES", "cpu:1")]);
    assert_eq!(run.status.code(), Some(1));
    let err = stderr(&run);
    assert!(err.contains("tests/inputs/cuda/smid.cu:7:3: inline PTX `mov.u32 $0, %smid"), "{err}");
    assert!(err.contains("runs only on GPUs"), "{err}");
}

/// A grid's barrier outside a cooperative launch traps (CUDA's header checks it): on
/// simulated devices the run stops naming the line and what a grid's barrier needs.
#[test]
fn a_grid_barrier_outside_a_cooperative_launch_stops_at_its_line() {
    let dir = TempDir::new("cuda-grid-plain");
    let exe = build_cu(&dir, "tests/inputs/cuda/grid_sync_plain.cu");
    let run = run_program(&exe, &[], &[("HPVM_MGPU_DEVICES", "cpu:2")]);
    let err = stderr(&run);
    assert_eq!(run.status.code(), Some(1), "{err}");
    assert!(err.contains("the kernel trapped") && err.contains("cudaLaunchCooperativeKernel"), "{err}");
    assert!(stdout(&run).is_empty(), "{}", stdout(&run));
}

/// Texture statements the software fetch does not take (a gather) fail the build
/// at the user's line: a GPU's texture unit would read the runtime's texture objects, which
/// are descriptions in memory, as its own.
#[test]
fn texture_gathers_fail_to_build_at_their_line() {
    let dir = TempDir::new("cuda-gather");
    let src = dir.join("gather.cu");
    std::fs::write(
        &src,
        "#include <cuda_runtime.h>\n\
         __global__ void g(cudaTextureObject_t t, float4 *out) {\n\
         \x20 out[0] = tex2Dgather<float4>(t, 0.5f, 0.5f, 0);\n\
         }\n\
         int main() { g<<<1, 1>>>(0, nullptr); return 0; }\n",
    )
    .unwrap();
    let exe = dir.join("gather");
    let out = hpvm_mgpu(&["build", src.to_str().unwrap(), "-o", exe.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("gather.cu:3:")
            && err.contains("is not supported: textures are fetched and surfaces accessed in software"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(!exe.exists());
}

/// nvcc's spelling of the architecture and `-x cuda` (nvcc's `-x cu`) for a file named
/// otherwise.
#[test]
fn nvcc_flags_and_language_override() {
    let dir = TempDir::new("cuda-flags");
    let renamed = dir.join("kernels.cpp");
    std::fs::copy(root().join("tests/cuda/kernels.cu"), &renamed).unwrap();
    let exe = dir.join("kernels");
    for lang in ["cuda", "cu"] {
        let out =
            hpvm_mgpu(&["build", "-arch=sm_90", "-x", lang, renamed.to_str().unwrap(), "-o", exe.to_str().unwrap()]);
        assert!(out.status.success(), "-x {lang}: {}", stderr(&out));
        let run = run_program(&exe, &["100"], &[("HPVM_MGPU_DEVICES", "cpu:2")]);
        assert!(run.status.success() && stdout(&run).contains("PASS"), "{}{}", stdout(&run), stderr(&run));
    }
}

/// nvcc's `--fmad=false`: kernels keep multiplications and additions apart (each rounded),
/// where by default `a * b + c` is one fused multiply-add, as nvcc and clang's CUDA make it,
/// and an unfused product is a plain `mul.f32`, as in nvcc's PTX. Small loops unroll as far
/// as nvcc unrolls them (32 loads per trip of `columns`, where LLVM's NVPTX defaults gave 8).
/// `-c -dc` (relocatable device code, `-c` said twice) writes an object.
#[test]
fn fmad_false_keeps_multiplications_and_additions_apart() {
    let dir = TempDir::new("cuda-fmad");
    let exe = dir.join("fmad");
    let ptx = dir.join("fmad.ptx");
    for (flags, fused) in [(&[][..], true), (&["--fmad=false"][..], false), (&["-fmad", "false"][..], false)] {
        let mut args = vec!["build", "-O2", "--emit-ptx"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["tests/inputs/cuda/fmad.cu", "-o", exe.to_str().unwrap()]);
        let out = hpvm_mgpu(&args);
        assert!(out.status.success(), "{flags:?}: {}", stderr(&out));
        let text = std::fs::read_to_string(&ptx).unwrap();
        assert_eq!(text.contains("fma.rn.f32"), fused, "{flags:?}: {text}");
        assert_eq!(text.contains("mul.rn.f32"), !fused, "{flags:?}: {text}");
        assert_eq!(text.contains("mul.f32"), fused, "{flags:?}: {text}");
        let columns: Vec<&str> =
            text.split(".entry ").skip(1).filter(|k| k.lines().next().is_some_and(|l| l.contains("columns"))).collect();
        // Plain and read-only-cache kernels, each with and without the partition's offset.
        assert_eq!(columns.len(), 4, "{text}");
        for k in columns {
            assert!(k.matches("ld.global").count() >= 32, "{flags:?}: {k}");
        }
    }
    let obj = dir.join("fmad.o");
    let out = hpvm_mgpu(&["build", "-c", "-dc", "tests/inputs/cuda/fmad.cu", "-o", obj.to_str().unwrap()]);
    assert!(out.status.success() && obj.is_file(), "{}", stderr(&out));
}

/// Warp functions compile for the GPU (the PTX shuffles and votes) and run on simulated
/// devices too, the block's threads as fibers, `__activemask` included (the lanes that reach it
/// together: a converged warp's are all of them).
#[test]
fn warp_functions_run_on_gpus_and_simulated_devices() {
    let dir = TempDir::new("cuda-warp");
    let exe = dir.join("warp");
    let out = hpvm_mgpu(&[
        "build",
        "--gpu-arch",
        "sm_90",
        "--emit-ptx",
        "tests/inputs/cuda/warp.cu",
        "-o",
        exe.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ptx = std::fs::read_to_string(dir.join("warp.ptx")).unwrap();
    assert!(ptx.contains("shfl.sync.down") && ptx.contains("vote.sync.ballot"), "{ptx}");
    for devices in ["cpu:1", "cpu:2"] {
        let run = run_program(&exe, &[], &[("HPVM_MGPU_DEVICES", devices)]);
        assert!(run.status.success() && stdout(&run).contains("PASS"), "{devices}: {}{}", stdout(&run), stderr(&run));
    }
    let active = dir.join("active.cu");
    std::fs::write(
        &active,
        "#include <cstdio>\n__global__ void k(unsigned *m) { m[threadIdx.x] = __activemask(); }\n\
         int main() {\n  unsigned *m;\n  cudaMallocManaged(&m, 64 * sizeof(unsigned), 1);\n  k<<<1, 64>>>(m);\n  \
         cudaDeviceSynchronize();\n  printf(\"%u\\n\", m[0]);\n}\n",
    )
    .unwrap();
    let exe = dir.join("active");
    let out = hpvm_mgpu(&["build", active.to_str().unwrap(), "-o", exe.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Converged lanes: the whole warp.
    let run = run_program(&exe, &[], &[("HPVM_MGPU_DEVICES", "cpu:2")]);
    assert!(run.status.success(), "{}{}", stdout(&run), stderr(&run));
    assert_eq!(stdout(&run).trim(), "4294967295");
}

/// `cudaMalloc` memory lives on the GPU from the start, as CUDA's does: a launch writing memory
/// that no copy has written moves nothing from the host, on one device (whose plan takes whole
/// buffers without consulting the maps) as on several; results identical.
#[test]
fn fresh_device_memory_is_never_uploaded() {
    let dir = TempDir::new("cuda-fresh");
    let exe = build_cu(&dir, "bench/cuda/stencil2d.cu");
    let mut sums = Vec::new();
    for devices in ["cpu:1", "cpu:2", "cpu:3"] {
        let (out, report) = run_with_stats(&dir, &exe, &["96", "5"], devices);
        sums.push(checksum(&out).expect("a checksum"));
        let node = node_report(&report, "jacobi.blocks");
        assert_eq!(node["unit_launches"], 5, "{devices}: {node}");
        assert_eq!(node["bytes_host_to_device"], 0, "{devices}: {node}");
        assert!(node["unpartitioned_because"].is_null(), "{devices}: {node}");
    }
    assert!(sums.iter().all(|s| s == &sums[0]), "{sums:?}");
}

/// Builds one `.cu` file into `dir`.
fn build_cu(dir: &TempDir, src: &str) -> std::path::PathBuf {
    let exe = dir.join(std::path::Path::new(src).file_stem().unwrap().to_str().unwrap());
    let out = hpvm_mgpu(&["build", src, "-o", exe.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    exe
}

/// Runs `exe` on `devices` with its statistics as JSON; it must succeed and not print FAIL.
/// Returns what it printed and the statistics.
fn run_with_stats(dir: &TempDir, exe: &std::path::Path, args: &[&str], devices: &str) -> (String, serde_json::Value) {
    let stats = dir.join(&format!("stats-{devices}.json"));
    let env = [("HPVM_MGPU_DEVICES", devices), ("HPVM_MGPU_STATS", stats.to_str().unwrap())];
    let run = run_program(exe, args, &env);
    assert!(run.status.success() && !stdout(&run).contains("FAIL"), "{devices}: {}{}", stdout(&run), stderr(&run));
    (stdout(&run), serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap())
}

/// A node's record in the statistics.
fn node_report(report: &serde_json::Value, name: &str) -> serde_json::Value {
    report["nodes"].as_array().unwrap().iter().find(|n| n["node"] == name).unwrap().clone()
}

/// A kernel launched in a loop with a scalar its maps never name (a step used as a value)
/// plans once on every device count; one whose scalar moves its reads plans per value. Both
/// give the host's results, identical across device counts.
#[test]
fn scalars_the_maps_do_not_name_reuse_the_plan() {
    let dir = TempDir::new("cuda-steps");
    let exe = build_cu(&dir, "tests/cuda/steps.cu");
    let mut sums = Vec::new();
    for devices in ["cpu:1", "cpu:2", "cpu:3"] {
        let (out, report) = run_with_stats(&dir, &exe, &["3000", "12"], devices);
        assert!(out.contains("PASS"), "{devices}: {out}");
        sums.push(checksum(&out).expect("a checksum"));
        let advance = node_report(&report, "advance.blocks");
        assert_eq!(advance["plan_cache"]["misses"], 1, "{devices}: {advance}");
        assert_eq!(advance["plan_cache"]["hits"], 11, "{devices}: {advance}");
        let shifted = node_report(&report, "shifted.blocks");
        let expected_misses = if devices == "cpu:1" { 1 } else { 12 };
        assert_eq!(shifted["plan_cache"]["misses"], expected_misses, "{devices}: {shifted}");
        if devices != "cpu:1" {
            assert_eq!(advance["partitioned_launches"], 12, "{devices}: {advance}");
            assert_eq!(shifted["partitioned_launches"], 12, "{devices}: {shifted}");
        }
    }
    assert!(sums.iter().all(|s| s == &sums[0]), "{sums:?}");
}

/// A 2-D kernel launched over the whole image, one band of rows (one block along `y`, the
/// best dimension by stride) and one column of blocks (one along `x`): every launch is cut,
/// each along a dimension that has blocks, with the host's results on every device count.
#[test]
fn each_launch_is_cut_along_a_dimension_with_blocks() {
    let dir = TempDir::new("cuda-dims");
    let exe = build_cu(&dir, "tests/cuda/dims.cu");
    let mut sums = Vec::new();
    for devices in ["cpu:1", "cpu:2", "cpu:4"] {
        let (out, report) = run_with_stats(&dir, &exe, &["1000", "64"], devices);
        sums.push(checksum(&out).expect("a checksum"));
        let paint = node_report(&report, "paint.blocks");
        assert_eq!(paint["runs"], 3, "{devices}: {paint}");
        if devices != "cpu:1" {
            assert_eq!(paint["partitioned_launches"], 3, "{devices}: {paint}");
        }
    }
    assert!(sums.iter().all(|s| s == &sums[0]), "{sums:?}");
}

/// Kernels defined in two `.cu` files of one program (a template instantiated in both, and a
/// `static` kernel of the same name in each) link, and each file launches its own.
#[test]
fn kernels_defined_in_two_files_link_and_stay_apart() {
    let dir = TempDir::new("cuda-two-files");
    let src = "tests/inputs/cuda/two_files";
    for opt in ["-O0", "-O2"] {
        let exe = dir.join(&format!("two{opt}"));
        let (a, main) = (format!("{src}/a.cu"), format!("{src}/main.cu"));
        let out = hpvm_mgpu(&["build", opt, &a, &main, "-o", exe.to_str().unwrap()]);
        assert!(out.status.success(), "{opt}: {}", stderr(&out));
        for devices in ["cpu:1", "cpu:3"] {
            let run = run_program(&exe, &[], &[("HPVM_MGPU_DEVICES", devices)]);
            assert!(
                run.status.success() && stdout(&run).contains("PASS"),
                "{opt} {devices}: {}{}",
                stdout(&run),
                stderr(&run)
            );
        }
    }
}

/// Relocatable device code (nvcc's `-dc`, `-rdc=true`): a kernel calls a `__device__`
/// function and reads a `__device__` variable (written by `cudaMemcpyToSymbol`) of another
/// file, and each file keeps its own `static` kernel and variable of a shared name. Objects
/// compiled apart and one command over both sources give the same program; its kernels have
/// GPU code (they do not fall back to the CPU for want of the other file's function).
#[test]
fn relocatable_device_code_links_across_files() {
    let dir = TempDir::new("cuda-rdc");
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let (main, ops) = ("tests/inputs/cuda/rdc/main.cu", "tests/inputs/cuda/rdc/ops.cu");
    for (src, obj) in [(main, "main.o"), (ops, "ops.o")] {
        let out = hpvm_mgpu(&["build", "-O2", "-dc", src, "-o", &path(obj)]);
        assert!(out.status.success(), "{src}: {}", stderr(&out));
    }
    let apart = hpvm_mgpu(&["build", "-O2", "--emit-ptx", &path("main.o"), &path("ops.o"), "-o", &path("apart")]);
    assert!(apart.status.success(), "{}", stderr(&apart));
    assert!(!stderr(&apart).contains("runs on the CPU"), "{}", stderr(&apart));
    let ptx = std::fs::read_to_string(dir.join("main.ptx")).unwrap();
    assert!(ptx.contains("_Z5applyPfi_blocks(") && ptx.contains("_ZL4bumpPfi_blocks("), "{ptx}");
    let once = hpvm_mgpu(&["build", "-O0", "-rdc=true", main, ops, "-o", &path("once")]);
    assert!(once.status.success(), "{}", stderr(&once));
    let mut sums = Vec::new();
    for exe in ["apart", "once"] {
        for devices in ["cpu:1", "cpu:3"] {
            let run = run_program(&dir.join(exe), &["10007"], &[("HPVM_MGPU_DEVICES", devices)]);
            let text = stdout(&run);
            assert!(run.status.success() && text.contains("PASS"), "{exe} {devices}: {text}{}", stderr(&run));
            sums.push(checksum(&text).expect("a checksum"));
        }
    }
    assert!(sums.windows(2).all(|w| w[0] == w[1]), "{sums:?}");

    // `static` kernels of one name in two files stay apart under -rdc too.
    let src = "tests/inputs/cuda/two_files";
    let (a, main) = (format!("{src}/a.cu"), format!("{src}/main.cu"));
    let out = hpvm_mgpu(&["build", "-O2", "-rdc=true", &a, &main, "-o", &path("two")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = run_program(&dir.join("two"), &[], &[("HPVM_MGPU_DEVICES", "cpu:2")]);
    assert!(run.status.success() && stdout(&run).contains("PASS"), "{}{}", stdout(&run), stderr(&run));
}

/// A syntax error in a `.cu` file is clang's message at the user's file:line, exit 1, no
/// executable and no panic.
#[test]
fn a_cuda_syntax_error_is_reported_at_its_line() {
    let dir = TempDir::new("cuda-syntax");
    let exe = dir.join("app");
    let out = hpvm_mgpu(&["build", "tests/inputs/cuda/syntax.cu", "-o", exe.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("tests/inputs/cuda/syntax.cu:4:29: error: expected ';'"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!exe.exists());
}

/// The thesis's three programs as plain CUDA: the analysis report and the database as
/// `db show` prints it, snapshotted (every kernel proven, split along the dimension of its
/// outputs' rows).
#[test]
fn reports_and_databases_of_the_cuda_benchmark_programs() {
    let dir = TempDir::new("cuda-analyze");
    for stem in ["matmul", "stencil", "nbody"] {
        let db = dir.join(&format!("{stem}.dashdb.json"));
        let src = format!("bench/programs/{stem}.cu");
        let o = hpvm_mgpu(&["analyze", &src, "-o", db.to_str().unwrap()]);
        assert!(o.status.success(), "{src}: {}", stderr(&o));
        check_snapshot(&format!("analyze-cuda-{stem}.txt"), &stdout(&o));
        let o = hpvm_mgpu(&["db", "show", db.to_str().unwrap()]);
        assert!(o.status.success(), "{src}: {}", stderr(&o));
        check_snapshot(&format!("db-show-cuda-{stem}.txt"), &stdout(&o));
    }
}

/// A `.cu` file's `sqrtf` is clang's CUDA `sqrtf` (libdevice's, approximate: what the same
/// file built by clang computes); an HPVM-C program's is C's, correctly rounded.
#[test]
fn cuda_sqrtf_follows_clang_and_c_sqrtf_follows_c() {
    let dir = TempDir::new("cuda-sqrt");
    for (src, stem, want, not) in [
        ("bench/programs/nbody.cu", "nbody_cu", "sqrt.approx.f32", "sqrt.rn.f32"),
        ("examples/nbody.c", "nbody_c", "sqrt.rn.f32", "sqrt.approx.f32"),
    ] {
        let exe = dir.join(stem);
        let out = hpvm_mgpu(&["build", "-O2", "--emit-ptx", src, "-o", exe.to_str().unwrap()]);
        assert!(out.status.success(), "{src}: {}", stderr(&out));
        // Written beside the executable, named after the source.
        let ptx = std::fs::read_to_string(dir.join("nbody.ptx")).unwrap();
        assert!(ptx.contains(want) && !ptx.contains(not), "{src}: expected {want}, not {not}");
    }
}

/// nvcc's `-use_fast_math` (HeCBench aidw's `powf` kernel ran 5.8 times longer than nvcc's
/// build on an H200 while the flag was dropped): the GPU code computes `powf`, `expf`, `logf`
/// and `sinf` with their fast intrinsics, divides approximately and flushes denormals, as
/// nvcc's does; without the flag it keeps libdevice's precise functions and `div.rn`.
/// Simulated devices compute both builds exactly: the same output.
#[test]
fn use_fast_math_gives_the_gpu_the_fast_intrinsics() {
    let dir = TempDir::new("fast-math");
    let mut printed = Vec::new();
    for (stem, flags) in [("fast", &["-use_fast_math"][..]), ("precise", &[][..])] {
        let exe = dir.join(stem);
        let mut args = vec!["build", "-O2", "--emit-ptx", "-arch=sm_90"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["tests/inputs/cuda/fast_math.cu", "-o", exe.to_str().unwrap()]);
        let out = hpvm_mgpu(&args);
        assert!(out.status.success(), "{flags:?}: {}", stderr(&out));
        let ptx = std::fs::read_to_string(dir.join("fast_math.ptx")).unwrap();
        let fast = ["div.approx.ftz.f32", "lg2.approx.ftz.f32", "sin.approx.ftz.f32"];
        if flags.is_empty() {
            assert!(ptx.contains("div.rn.f32") && !ptx.contains("div.approx"), "{ptx}");
            assert!(!ptx.contains("sin.approx"), "{ptx}");
        } else {
            assert!(fast.iter().all(|f| ptx.contains(f)) && !ptx.contains("div.rn.f32"), "{ptx}");
        }
        let run = run_program(&exe, &["1000"], &[("HPVM_MGPU_DEVICES", "cpu:2")]);
        assert!(run.status.success() && stdout(&run).contains("PASS"), "{}{}", stdout(&run), stderr(&run));
        printed.push(stdout(&run));
    }
    assert_eq!(printed[0], printed[1]);
}

/// A thread's local array indexed by loop counters lives in registers on the GPU, as nvcc
/// keeps it, however long the loop's body (HeCBench fft ran at a third of nvcc's speed with its
/// `double2 data[8]` in local memory); a loop the user keeps rolled keeps it in local memory.
/// Both compute the same.
#[test]
fn local_arrays_indexed_by_loop_counters_live_in_registers() {
    let dir = TempDir::new("local-arrays");
    let exe = dir.join("local_arrays");
    let out = hpvm_mgpu(&["build", "-O2", "--emit-ptx", "tests/cuda/local_arrays.cu", "-o", exe.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ptx = std::fs::read_to_string(dir.join("local_arrays.ptx")).unwrap();
    let kernels: Vec<&str> = ptx.split(".entry ").skip(1).collect();
    let local = |name: &str| -> Vec<bool> {
        kernels
            .iter()
            .filter(|k| k.lines().next().is_some_and(|l| l.contains(name)))
            .map(|k| k.contains("__local_depot"))
            .collect()
    };
    // Each kernel four times: plain and read-only-cache, with and without the offset.
    assert_eq!(local("twiddle"), [false; 4], "{ptx}");
    assert_eq!(local("rolled"), [true; 4], "{ptx}");
    let out = run_program(&exe, &["1000"], &[("HPVM_MGPU_DEVICES", "cpu:2")]);
    assert!(out.status.success() && stdout(&out).starts_with("PASS"), "{}{}", stdout(&out), stderr(&out));
}

/// The math library's squares and sine-cosine pairs as nvcc compiles them: `powf(x, 2.0f)` is
/// a multiplication (libdevice's whole `pow` made HeCBench pso's kernel 2.5 times slower than
/// nvcc's), other exponents keep `pow`, and `cos(a)`, `sin(a)` reduce the angle once: one call of
/// libdevice's slow reduction path where there were two.
#[test]
fn squares_and_sine_cosine_pairs_compile_as_nvcc_compiles_them() {
    let dir = TempDir::new("math-calls");
    let exe = dir.join("math_calls");
    let out = hpvm_mgpu(&["build", "-O2", "--emit-ptx", "tests/cuda/math_calls.cu", "-o", exe.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ptx = std::fs::read_to_string(dir.join("math_calls.ptx")).unwrap();
    let body = |name: &str| -> &str {
        let at = ptx.find(&format!(".entry hpvm_kernel_{name}")).unwrap_or_else(|| panic!("{name}: {ptx}"));
        let rest = &ptx[at + 1..];
        &rest[..[".entry", ".func"].iter().filter_map(|m| rest.find(m)).min().unwrap_or(rest.len())]
    };
    let lines = |name: &str| body(name).lines().count();
    assert!(lines("_Z7squaresPKfPfi") < 80, "{}", body("_Z7squaresPKfPfi"));
    assert!(lines("_Z5cubesPKfPfi") > 2 * lines("_Z7squaresPKfPfi"), "{}", body("_Z5cubesPKfPfi"));
    assert_eq!(body("_Z6rotatePKdP7double2i").matches("call.uni").count(), 1, "{}", body("_Z6rotatePKdP7double2i"));
}

/// `printf` in device code prints on simulated devices as on a GPU: every conversion, with
/// the arguments clang packs (floats as doubles), between the host's own lines.
#[test]
fn device_printf_prints_on_every_device() {
    let dir = TempDir::new("printf");
    let exe = dir.path_str("printf");
    let out = hpvm_mgpu(&["build", "-O2", "tests/inputs/cuda/printf.cu", "-o", &exe]);
    assert!(out.status.success(), "{}", stderr(&out));
    for devices in ["cpu:1", "cpu:3"] {
        let run = run_program(std::path::Path::new(&exe), &[], &[("HPVM_MGPU_DEVICES", devices)]);
        assert!(run.status.success(), "{}", stderr(&run));
        let text = stdout(&run);
        let mut lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.first(), Some(&"before"), "{text}");
        assert_eq!(lines.last(), Some(&"after"), "{text}");
        lines.sort_unstable();
        assert_eq!(
            lines,
            [
                "after",
                "before",
                "block 0",
                "block 1",
                "block 2",
                "n=256 x0=0.000 x1=5.000000e-01 big=1024000000000 hex=0xff char=q str=device ptr-null=0 |   42|7   |",
            ],
            "{devices}: {text}"
        );
    }
}

/// The preference and query calls programs make around their kernels (cache and shared
/// memory configuration, function attributes, versions, free memory, peers, asynchronous
/// symbol copies) answer as CUDA does and leave the results alone (the program checks each).
#[test]
fn configuration_and_query_calls_answer_as_cuda_does() {
    let dir = TempDir::new("config");
    let exe = dir.path_str("config");
    let out = hpvm_mgpu(&["build", "-O2", "tests/inputs/cuda/config.cu", "-o", &exe]);
    assert!(out.status.success(), "{}", stderr(&out));
    for devices in ["cpu:1", "cpu:3"] {
        let run = run_program(std::path::Path::new(&exe), &[], &[("HPVM_MGPU_DEVICES", devices)]);
        assert!(run.status.success() && stdout(&run).contains("PASS"), "{devices}: {}{}", stdout(&run), stderr(&run));
    }
}

/// `k<< <grid, block>> >(...)`, which nvcc takes, builds and runs; the program's quoted
/// includes, `__FILE__`, `__LINE__` and messages stay the user's own.
#[test]
fn launches_spelled_with_spaces_build_as_nvcc_takes_them() {
    let dir = TempDir::new("spaced");
    let exe = dir.path_str("spaced");
    let out = hpvm_mgpu(&["build", "-O2", "tests/inputs/cuda/spaced_launch.cu", "-o", &exe]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = run_program(std::path::Path::new(&exe), &[], &[("HPVM_MGPU_DEVICES", "cpu:2")]);
    let text = stdout(&run);
    assert!(run.status.success() && text.contains("PASS"), "{text}{}", stderr(&run));
    assert!(text.contains("line 23 of tests/inputs/cuda/spaced_launch.cu"), "{text}");
    // An error in such a file names the user's file and line.
    let bad = dir.join("bad.cu");
    std::fs::write(&bad, "__global__ void k(int *a) {}\nint main() {\n  k<< <1, 1>> >(0);\n  undeclared();\n}\n")
        .unwrap();
    let out = hpvm_mgpu(&["build", bad.to_str().unwrap(), "-o", &dir.path_str("bad")]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains(&format!("{}:4:3: error", bad.display())), "{}", stderr(&out));
}

/// `register` in C++17, which gcc (nvcc's host compiler) only warns about, builds with a
/// warning in both halves of a `.cu` file.
#[test]
fn register_in_cxx17_is_a_warning_as_with_gcc() {
    let dir = TempDir::new("register");
    let exe = dir.path_str("register");
    let out = hpvm_mgpu(&["build", "-std=c++17", "tests/inputs/cuda/register.cu", "-o", &exe]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("warning: ISO C++17 does not allow 'register'"), "{}", stderr(&out));
    let run = run_program(std::path::Path::new(&exe), &[], &[("HPVM_MGPU_DEVICES", "cpu:1")]);
    assert_eq!(stdout(&run), "31\n", "{}", stderr(&run));
}

/// Atomics at block and system scope (clang's scoped intrinsics) and the wrapping counters
/// (`atomicInc`/`atomicDec`) are atomics: every thread's operation lands, on every device
/// count; a double's halves (`__double2hiint`...) are its bits.
#[test]
fn block_and_system_scoped_atomics_run() {
    let dir = TempDir::new("scoped-atomics");
    for src in ["tests/inputs/cuda/scoped_atomics.cu", "tests/inputs/cuda/double_halves.cu"] {
        let exe = dir.path_str("program");
        let out = hpvm_mgpu(&["build", "-O2", src, "-o", &exe]);
        assert!(out.status.success(), "{src}: {}", stderr(&out));
        for devices in ["cpu:1", "cpu:3"] {
            let run = run_program(std::path::Path::new(&exe), &[], &[("HPVM_MGPU_DEVICES", devices)]);
            let text = stdout(&run);
            assert!(run.status.success() && text.contains("PASS"), "{src} on {devices}: {text}{}", stderr(&run));
        }
    }
    // On GPUs the wrapping counters are PTX's own `atom.inc`/`atom.dec`, as nvcc's, not
    // compare-and-swap loops (dear under contention: NVIDIA's simpleAtomicIntrinsics).
    let exe = dir.path_str("halves");
    let out = hpvm_mgpu(&["build", "-O2", "--emit-ptx", "tests/inputs/cuda/double_halves.cu", "-o", &exe]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ptx = std::fs::read_to_string(dir.join("double_halves.ptx")).unwrap();
    assert!(ptx.contains("atom.inc.u32") && ptx.contains("atom.dec.u32"), "{ptx}");
    assert!(!ptx.contains("atom.global.cas") && !ptx.contains("atom.cas"), "{ptx}");
}

/// Constructors and destructors of every kind run, in order (a prioritized one, a C++ static
/// object, a destructor attribute), whichever linker the build uses.
#[test]
fn constructors_and_destructors_run() {
    let dir = TempDir::new("ctors");
    let exe = dir.path_str("ctors");
    let out = hpvm_mgpu(&["build", "-O2", "tests/inputs/cuda/ctors.cu", "-o", &exe]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = run_program(std::path::Path::new(&exe), &[], &[("HPVM_MGPU_DEVICES", "cpu:2")]);
    let text = stdout(&run);
    assert!(run.status.success(), "{text}{}", stderr(&run));
    assert!(text.contains("constructors 1 2 of 2, kernel 31"), "{text}");
    assert!(text.contains("static destructor ran") && text.contains("destructor attribute ran"), "{text}");
}

/// An option neither nvcc's nor ours is refused naming the word the user wrote (nvc++'s
/// `-stdpar=gpu`, which clap alone read as `-s`), exit status 1, nothing written; `-U` is
/// taken, as nvcc takes it.
#[test]
fn unknown_options_are_named_as_written() {
    let dir = TempDir::new("options");
    let exe = dir.path_str("x");
    for flag in ["-stdpar=gpu", "--bogus"] {
        let out = hpvm_mgpu(&["build", flag, "tests/inputs/cuda/config.cu", "-o", &exe]);
        assert_eq!(out.status.code(), Some(1), "{flag}: {}", stderr(&out));
        assert!(stderr(&out).contains(&format!("unknown option `{flag}`")), "{flag}: {}", stderr(&out));
        assert!(!std::path::Path::new(&exe).exists());
    }
    let out = hpvm_mgpu(&["build", "-O1", "-U", "NDEBUG", "-UFOO", "tests/inputs/cuda/config.cu", "-o", &exe]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Host code with OpenMP, as nvcc's `-Xcompiler -fopenmp` builds it (LLVM's libomp): the
/// host threads prepare and reduce around a kernel, on every device count. Without the flag
/// the link fails at the user's line, as with nvcc.
#[test]
fn host_openmp_builds_with_nvccs_flag() {
    let dir = TempDir::new("openmp");
    let exe = dir.path_str("openmp");
    let out = hpvm_mgpu(&["build", "-O2", "-Xcompiler", "-Wall,-fopenmp", "tests/inputs/cuda/openmp.cu", "-o", &exe]);
    assert!(out.status.success(), "{}", stderr(&out));
    for devices in ["cpu:1", "cpu:3"] {
        let env = [("HPVM_MGPU_DEVICES", devices), ("OMP_NUM_THREADS", "2")];
        let run = run_program(std::path::Path::new(&exe), &[], &env);
        assert!(
            run.status.success() && stdout(&run).starts_with("PASS"),
            "{devices}: {}{}",
            stdout(&run),
            stderr(&run)
        );
    }
    let plain = dir.path_str("plain");
    let out = hpvm_mgpu(&["build", "-O2", "tests/inputs/cuda/openmp.cu", "-o", &plain]);
    assert!(!out.status.success(), "linked without -fopenmp");
    assert!(
        stderr(&out).contains("tests/inputs/cuda/openmp.cu:24: undefined reference to `omp_get_num_threads'"),
        "{}",
        stderr(&out)
    );
}

/// `assert` in device code and CUDA's min/max overloads in host and `__host__ __device__`
/// code build as with nvcc; a failing device assertion stops the program naming its line.
#[test]
fn device_assert_and_host_minmax_work_as_with_nvcc() {
    let dir = TempDir::new("assert-minmax");
    let exe = dir.path_str("assert_minmax");
    let out = hpvm_mgpu(&["build", "-O2", "tests/inputs/cuda/assert_minmax.cu", "-o", &exe]);
    assert!(out.status.success(), "{}", stderr(&out));
    let exe = std::path::Path::new(&exe);
    for devices in ["cpu:1", "cpu:3"] {
        let run = run_program(exe, &[], &[("HPVM_MGPU_DEVICES", devices)]);
        assert!(
            run.status.success() && stdout(&run).starts_with("PASS"),
            "{devices}: {}{}",
            stdout(&run),
            stderr(&run)
        );
        let failing = run_program(exe, &["1234"], &[("HPVM_MGPU_DEVICES", devices)]);
        assert_eq!(failing.status.code(), Some(1), "{devices}: {}", stderr(&failing));
        assert!(
            stderr(&failing).contains("tests/inputs/cuda/assert_minmax.cu:18: void gather(const float *, float *, int, int): device-side assertion `i != fail_at` failed"),
            "{devices}: {}",
            stderr(&failing)
        );
    }
}

/// The build assembles the kernels' PTX into each asked architecture's machine code (ptxas
/// from the CUDA folder) and embeds it beside the PTX; without ptxas it says so and the
/// executable carries the PTX alone, running the same.
#[test]
fn the_build_embeds_machine_code_per_architecture() {
    let dir = TempDir::new("sass");
    let exe = dir.path_str("startup");
    let out = hpvm_mgpu(&["build", "--gpu-arch", "sm_70", "--gpu-arch", "sm_90", "bench/cuda/startup.cu", "-o", &exe]);
    assert!(out.status.success(), "{}", stderr(&out));
    let bytes = std::fs::read(&exe).unwrap();
    // The blob: the magic and a count of images (the runtime's own copy of the magic is
    // followed by other bytes).
    let counts: Vec<u32> = bytes
        .windows(12)
        .filter(|w| &w[..8] == b"HPVMSASS")
        .map(|w| u32::from_le_bytes(w[8..12].try_into().unwrap()))
        .collect();
    assert!(counts.contains(&2), "no blob of two architectures: {counts:?}");
    // A CUDA folder without ptxas: a note, and the PTX alone.
    let bare = dir.join("cuda");
    let cuda = hpvm_core::toolchain::cuda_path().expect("a CUDA folder");
    std::fs::create_dir_all(bare.join("bin")).unwrap();
    std::os::unix::fs::symlink(cuda.join("include"), bare.join("include")).unwrap();
    std::os::unix::fs::symlink(cuda.join("nvvm"), bare.join("nvvm")).unwrap();
    std::fs::copy(cuda.join("version.txt"), bare.join("version.txt")).unwrap();
    let plain = dir.path_str("plain");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hpvm-mgpu"))
        .args(["build", "bench/cuda/startup.cu", "-o", &plain])
        .env("HPVM_MGPU_CUDA_PATH", &bare)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("note: GPU machine code: no ptxas in the CUDA folder"), "{}", stderr(&out));
    let plain_bytes = std::fs::read(&plain).unwrap();
    assert!(!plain_bytes.windows(12).any(|w| &w[..8] == b"HPVMSASS" && w[8..12] == 2u32.to_le_bytes()));
    let run = run_program(std::path::Path::new(&plain), &[], &[("HPVM_MGPU_DEVICES", "cpu:2")]);
    assert!(run.status.success() && stdout(&run).contains("PASS"), "{}{}", stdout(&run), stderr(&run));
}

/// `__threadfence*` in a kernel: the kernel stays on the GPU (a `membar` in its PTX, where
/// the IR fence made LLVM 19's NVPTX abort and the kernel fall back to the CPU), and runs
/// right on simulated devices.
#[test]
fn memory_fences_keep_kernels_on_the_gpu() {
    let dir = TempDir::new("fence");
    let exe = dir.path_str("fence");
    let out = hpvm_mgpu(&["build", "-O2", "--emit-ptx", "tests/inputs/cuda/fence.cu", "-o", &exe]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("runs on the CPU"), "{}", stderr(&out));
    let ptx = std::fs::read_to_string(dir.join("fence.ptx")).unwrap();
    assert!(ptx.contains("membar.sys"), "{ptx}");
    for devices in ["cpu:1", "cpu:3"] {
        let run = run_program(std::path::Path::new(&exe), &[], &[("HPVM_MGPU_DEVICES", devices)]);
        assert!(
            run.status.success() && stdout(&run).starts_with("PASS"),
            "{devices}: {}{}",
            stdout(&run),
            stderr(&run)
        );
    }
}

/// A program calling a CUDA library the toolchain does not provide (cuBLAS, cuRAND's host
/// API...) fails at build with one message naming the library and the user's line: at the
/// include where the header is missing, at the call where only the library is.
#[test]
fn cuda_libraries_are_refused_by_name() {
    let dir = TempDir::new("cuda-libraries");
    let blas = dir.join("blas.cu");
    std::fs::write(
        &blas,
        "#include <cstdio>\n#include <cublas_v2.h>\nint main() { cublasHandle_t h; cublasCreate(&h); }\n",
    )
    .unwrap();
    let out = hpvm_mgpu(&["build", blas.to_str().unwrap(), "-o", dir.join("blas").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("blas.cu:2: error: `cublas_v2.h` is the header of cuBLAS"), "{}", stderr(&out));
    assert!(!dir.join("blas").exists());
    let rand = dir.join("rand.cu");
    std::fs::write(
        &rand,
        "#include <curand.h>\nint main() {\n  curandGenerator_t g;\n  curandCreateGenerator(&g, CURAND_RNG_PSEUDO_DEFAULT);\n}\n",
    )
    .unwrap();
    let out = hpvm_mgpu(&["build", rand.to_str().unwrap(), "-o", dir.join("rand").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("rand.cu:4: error: `curandCreateGenerator` is cuRAND's host API, a CUDA library"),
        "{}",
        stderr(&out)
    );
}

/// The host updating managed memory that a kernel it has not waited for updates too is
/// refused, never an update lost silently; the host writing other managed memory meanwhile,
/// or waiting by polling `cudaStreamQuery`, runs right on every device count.
#[test]
fn host_writes_racing_a_kernel_stop_the_run() {
    let dir = TempDir::new("cuda-managed-race");
    let exe = build_cu(&dir, "tests/inputs/cuda/managed_race.cu");
    for devices in ["cpu:1", "cpu:3"] {
        let (out, report) = run_with_stats(&dir, &exe, &["apart", "1000"], devices);
        assert_eq!(out.trim(), "250 250 250 250 | 1000 1000 1000 1000", "{devices}");
        let (out, _) = run_with_stats(&dir, &exe, &["polled", "1000"], devices);
        assert_eq!(out.trim(), "1250 1250 1250 1250 | 0 0 0 0", "{devices}");
        // The race is seen by the host-write watch (Linux 6.7 and later) and, where the host's
        // writes are not watched (older kernels, or every write assumed), by comparing the
        // host's bytes with a copy kept at the launch.
        let watched = report["host_writes"].as_str().unwrap().starts_with("watched");
        let unwatched: &[(&str, &str)] = &[("HPVM_MGPU_DEVICES", devices), ("HPVM_MGPU_HOST_WRITES", "all")];
        for mode in ["apart", "polled"] {
            let run = run_program(&exe, &[mode, "1000"], unwatched);
            assert!(run.status.success(), "{devices} {mode}, writes assumed: {}", stderr(&run));
            let want = if mode == "apart" { "250 250 250 250 | 1000" } else { "1250 1250 1250 1250 | 0" };
            assert!(stdout(&run).starts_with(want), "{devices} {mode}, writes assumed: {}", stdout(&run));
        }
        let watched_env: &[(&str, &str)] = &[("HPVM_MGPU_DEVICES", devices)];
        for env in if watched { vec![watched_env, unwatched] } else { vec![unwatched] } {
            let run = run_program(&exe, &["race", "1000"], env);
            let err = stderr(&run);
            assert!(!run.status.success(), "{env:?}: {}{err}", stdout(&run));
            // Stopped at the store: the guard names its line whether or not the host's writes
            // are watched.
            assert!(
                err.contains("the host's store at tests/inputs/cuda/managed_race.cu:30 wrote byte 0 of the buffer")
                    && err.contains("newer copy of its bytes 0..16")
                    && err.contains("race"),
                "{env:?}: {err}"
            );
            assert!(stdout(&run).is_empty(), "{env:?}: printed a result: {}", stdout(&run));
        }
    }
}

/// A store racing a kernel into a large managed buffer stops at the store's line, from the
/// main thread, from a thread of the program's and through the C library's `memset` (named by
/// the program's line that called it); stores beside the kernel's bytes (in pages
/// next to them, and in the page they share) go on, and the result is right. With the guard
/// off, the checks after the fact still refuse the race, naming the bytes.
#[test]
fn racing_stores_stop_at_their_line_and_stores_beside_them_go_on() {
    let dir = TempDir::new("cuda-managed-race-pages");
    let exe = build_cu(&dir, "tests/inputs/cuda/managed_race_pages.cu");
    // The kernel's 3i over the first n/2 + 7 elements, the host's 5 over the rest.
    let (n, half) = (1u64 << 20, (1u64 << 19) + 7);
    let want = ((0..half).map(|i| 3 * i).sum::<u64>() + 5 * (n - half)).to_string();
    for devices in ["cpu:1", "cpu:4"] {
        for writes in ["any", "all"] {
            for guard in ["on", "off"] {
                let env: &[(&str, &str)] = &[
                    ("HPVM_MGPU_DEVICES", devices),
                    ("HPVM_MGPU_HOST_WRITES", writes),
                    ("HPVM_MGPU_RACE_GUARD", guard),
                ];
                let run = run_program(&exe, &["apart"], env);
                assert!(run.status.success(), "{env:?}: {}", stderr(&run));
                assert_eq!(stdout(&run).trim(), format!("{want}\nPASS"), "{env:?}");
                for (mode, line) in [("race", 33), ("thread", 21), ("memset", 40)] {
                    let run = run_program(&exe, &[mode], env);
                    let err = stderr(&run);
                    assert!(!run.status.success(), "{env:?} {mode}: {}{err}", stdout(&run));
                    assert!(stdout(&run).is_empty(), "{env:?} {mode}: printed a result: {}", stdout(&run));
                    let named = if guard == "on" {
                        let through = if mode == "memset" { " (through " } else { " wrote byte" };
                        format!("the host's store at tests/inputs/cuda/managed_race_pages.cu:{line}{through}")
                    } else {
                        "the host wrote bytes ".to_string()
                    };
                    assert!(err.contains(&named) && err.contains("race"), "{env:?} {mode}: {err}");
                }
            }
        }
    }
}

/// What a kernel loads from a `__constant__` struct at fixed places (its buffers' pointers,
/// its size) is a launch argument to the analysis: the maps are exact and the launch splits.
/// A pointer picked from a constant array by a computed index is not: that kernel runs whole
/// on one device and says why.
#[test]
fn pointers_in_constant_memory_split_like_arguments() {
    let out = hpvm_mgpu(&["analyze", "tests/tricky/const_struct_pointers.cu"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    let node = text.split("node twice_plus_one").nth(1).expect("the kernel's node");
    assert!(node.trim_start().contains("partitionable"), "{text}");
    assert!(node.contains("writes exactly") && !node.contains("pointer loaded from memory"), "{text}");
    // Named by the source's fields (`arrays.out`, as the maps spell names).
    assert!(node.contains("-> arrays_out[x]") && node.contains("-> arrays_in[x]"), "{text}");
    let dir = TempDir::new("cuda-constant-args");
    let exe = build_cu(&dir, "tests/tricky/constant_args.cu");
    let stats = dir.join("stats.json");
    let env = [
        ("HPVM_MGPU_DEVICES", "cpu:4"),
        ("HPVM_MGPU_PARTITION", "always"),
        ("HPVM_MGPU_STATS", stats.to_str().unwrap()),
    ];
    let run = run_program(&exe, &["5000"], &env);
    assert!(run.status.success() && stdout(&run).contains("PASS"), "{}{}", stdout(&run), stderr(&run));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let node = |name: &str| report["nodes"].as_array().unwrap().iter().find(|n| n["node"] == name).unwrap().clone();
    // Six launches of `scale_step`: five of the program's, one of the graph's launched twice.
    for (name, launches) in [("scale_step.blocks", 6), ("add_fixed.blocks", 1)] {
        let n = node(name);
        assert_eq!(n["partitioned_launches"], launches, "{name}: {n}");
        assert_eq!(n["max_devices"], 4, "{name}: {n}");
    }
    let chosen = node("add_chosen.blocks");
    assert_eq!(chosen["partitioned_launches"], 0);
    assert!(
        chosen["unpartitioned_because"].as_str().unwrap().contains("it uses a pointer loaded from memory"),
        "{chosen}"
    );
}

/// Reasons name a kernel's parameters as the source does, never by the names clang gives the
/// pieces of a struct passed by value (`out.0`).
#[test]
fn reasons_name_struct_parameters_as_the_source_does() {
    let out = hpvm_mgpu(&["analyze", "tests/inputs/cuda/struct_param.cu"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    // A reason to stay whole, or (its blocks cannot talk) why its writes are merged.
    let reasons: Vec<&str> = text.lines().filter(|l| l.contains("is written")).collect();
    assert!(
        reasons
            .iter()
            .any(|l| l.contains("`out` is written at a data-dependent index (tests/inputs/cuda/struct_param.cu:10)")),
        "{text}"
    );
    assert!(reasons.iter().all(|l| !l.contains("`out.")), "{text}");
}

/// A pointer argument the kernel never reads (a keys-only instantiation's values, `nullptr +
/// offset` as CUB passes them) binds no buffer: the launch runs split as a kernel, not on the
/// host for want of a tracked buffer, with the host's results on every device count. One the
/// analysis cannot prove unread, and that points to no memory, runs whole on a device.
#[test]
fn pointers_a_kernel_never_reads_bind_nothing() {
    let dir = TempDir::new("cuda-unused-pointer");
    let exe = build_cu(&dir, "tests/inputs/cuda/unused_pointer.cu");
    let mut sums = Vec::new();
    for devices in ["cpu:1", "cpu:3"] {
        let stats = dir.join(&format!("stats-{devices}.json"));
        let env = [
            ("HPVM_MGPU_DEVICES", devices),
            ("HPVM_MGPU_PARTITION", "always"),
            ("HPVM_MGPU_STATS", stats.to_str().unwrap()),
        ];
        let run = run_program(&exe, &["10000"], &env);
        let out = stdout(&run);
        assert!(run.status.success() && out.contains("PASS"), "{devices}: {out}{}", stderr(&run));
        sums.push(checksum(&out).expect("a checksum"));
        let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        let keys_only = node_report(&report, "scale<false>.blocks");
        assert!(keys_only["on_host_because"].is_null(), "{devices}: {keys_only}");
        if devices != "cpu:1" {
            assert_eq!(keys_only["partitioned_launches"], 1, "{devices}: {keys_only}");
        }
        // A pointer to no memory that the leaf may read: whole on a device, and said so.
        let maybe = node_report(&report, "maybe.blocks");
        assert!(maybe["on_host_because"].is_null(), "{devices}: {maybe}");
        assert_eq!(maybe["unit_launches"], 1, "{devices}: {maybe}");
        if devices != "cpu:1" {
            let why = maybe["unpartitioned_because"].as_str().unwrap_or_default();
            assert!(why.contains("`values`") && why.contains("no memory"), "{devices}: {maybe}");
        }
    }
    assert!(sums.iter().all(|s| s == &sums[0]), "{sums:?}");
}

/// Page-locked host memory (`cudaMallocHost`, `cudaHostAlloc`, `cudaHostRegister`) given to
/// kernels is read and written in place, as CUDA maps it (`devices::in_place`): the launches
/// run whole on a device, never on the host, and say why; a flag a kernel raises is seen by
/// the host polling without synchronizing. Where no device runs kernels (`cpu`), the host
/// runs them, with the same results.
#[test]
fn page_locked_memory_is_reached_in_place() {
    let dir = TempDir::new("cuda-zero-copy");
    let exe = build_cu(&dir, "tests/cuda/zero_copy.cu");
    let mut sums = Vec::new();
    for devices in ["cpu", "cpu:1", "cpu:3"] {
        let stats = dir.join(&format!("stats-{devices}.json"));
        let env = [
            ("HPVM_MGPU_DEVICES", devices),
            ("HPVM_MGPU_PARTITION", "always"),
            ("HPVM_MGPU_STATS", stats.to_str().unwrap()),
        ];
        let run = run_program(&exe, &["3000", "2"], &env);
        let out = stdout(&run);
        assert!(run.status.success() && out.contains("PASS"), "{devices}: {out}{}", stderr(&run));
        sums.push(checksum(&out).expect("a checksum"));
        if devices == "cpu" {
            continue;
        }
        let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        for (node, launches) in [("raise_flag.blocks", 1), ("squares.blocks", 4), ("count_odd.blocks", 2)] {
            let r = node_report(&report, node);
            assert!(r["on_host_because"].is_null(), "{devices}: {r}");
            assert_eq!(r["unit_launches"], launches, "{devices}: {r}");
            assert_eq!(r["partitioned_launches"], 0, "{devices}: {r}");
            if devices != "cpu:1" {
                let why = r["unpartitioned_because"].as_str().unwrap_or_default();
                assert!(why.contains("page-locked host memory") && why.contains("in place"), "{devices}: {r}");
            }
        }
    }
    assert!(sums.iter().all(|s| s == &sums[0]), "{sums:?}");
}

/// A kernel's parameter read with volatile loads (a flag the host or another block sets while
/// the kernel spins: `tests/inputs/cuda/latch.cu`'s `spin`) is never read through the
/// read-only data cache, which need not see such stores: its kernel gets no `_nc` variant,
/// while a kernel of the same program whose read-only parameters are read plainly does.
#[test]
fn volatile_reads_never_go_through_the_read_only_cache() {
    let dir = TempDir::new("volatile-nc");
    let exe = dir.join("latch");
    let out = hpvm_mgpu(&["build", "-O2", "--emit-ptx", "tests/inputs/cuda/latch.cu", "-o", exe.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ptx = std::fs::read_to_string(dir.join("latch.ptx")).unwrap();
    assert!(ptx.contains("ld.volatile.global"), "{ptx}");
    assert!(!ptx.contains("spinPVj_blocks_nc"), "the spinning kernel has a read-only-cache variant");
    assert!(ptx.contains("ld.global.nc"), "the stepping kernel lost its read-only-cache variant");
}
