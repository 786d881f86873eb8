//! Helpers shared by the end-to-end tests: run the command from the repository root (so
//! paths in messages are the relative ones users see), compare with text snapshots.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `hpvm-mgpu` with `args` from the repository root.
pub fn hpvm_mgpu(args: &[&str]) -> Output {
    hpvm_mgpu_env(args, &[])
}

/// Runs `hpvm-mgpu` with `args` and the environment variables `env` from the repository root.
pub fn hpvm_mgpu_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hpvm-mgpu"))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root())
        .env_remove("RUST_LOG")
        .output()
        .expect("cannot start hpvm-mgpu")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Compares `actual` with `tests/snapshots/<name>`; with `UPDATE_SNAPSHOTS=1` rewrites it.
pub fn check_snapshot(name: &str, actual: &str) {
    let path = root().join("tests/snapshots").join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("missing snapshot {}; run with UPDATE_SNAPSHOTS=1 to create it", path.display()));
    if expected != actual {
        let diff: Vec<String> = expected
            .lines()
            .zip(actual.lines())
            .enumerate()
            .filter(|(_, (e, a))| e != a)
            .take(5)
            .map(|(i, (e, a))| format!("line {}:\n  expected: {e}\n  actual:   {a}", i + 1))
            .collect();
        panic!(
            "snapshot {} differs ({} vs {} lines); first differences:\n{}\n(run with UPDATE_SNAPSHOTS=1 to accept)",
            path.display(),
            expected.lines().count(),
            actual.lines().count(),
            diff.join("\n")
        );
    }
}

/// The example programs, by file name.
pub fn examples() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root().join("examples"))
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            (p.extension()? == "c").then(|| p.file_name().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    v.sort();
    v
}

pub fn exists(p: &str) -> bool {
    Path::new(&root().join(p)).exists()
}

/// A fresh directory under the system's temporary directory, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "hpvm-mgpu-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    pub fn path_str(&self, name: &str) -> String {
        self.join(name).to_string_lossy().into_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs a built program with extra environment variables. Launches split whenever the
/// analysis allows (`HPVM_MGPU_PARTITION=always`) unless `env` says otherwise: the tests' small
/// grids would mostly run whole under the split policy, and what they test is the split.
pub fn run_program(exe: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(exe);
    cmd.args(args).env_remove("HPVM_MGPU_THREADS").env_remove("HPVM_MGPU_STATS");
    cmd.env("HPVM_MGPU_PARTITION", "always");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap_or_else(|e| panic!("cannot run {}: {e}", exe.display()))
}

/// The `checksum XXXX` line an example prints.
pub fn checksum(out: &str) -> Option<String> {
    out.lines().find_map(|l| l.strip_prefix("checksum ").map(str::to_string))
}

/// Programs and the argument lists to run each with. The last size of each is large enough
/// that every partitionable node has more blocks than the devices of the statistics check.
pub const PROGRAMS: [(&str, &[&[&str]]); 109] = [
    ("examples/histogram.c", &[&["5", "3"], &["1000", "13"]]),
    ("examples/matmul.c", &[&["16"], &["48"], &["144"]]),
    ("examples/nbody.c", &[&["100", "2"], &["3000", "2"]]),
    ("examples/pipeline.c", &[&["5", "3"], &["--stream", "4", "64", "48"], &["37", "23"], &["200", "90"]]),
    ("examples/sgemm_tiled.c", &[&["16", "16", "16"], &["32", "48", "16"], &["160", "48", "32"]]),
    ("examples/stencil2d.c", &[&["16", "16", "2"], &["48", "32", "3"], &["64", "160", "4"]]),
    ("examples/vecadd.c", &[&["7"], &["1001"], &["5000"]]),
    ("bench/programs/exchange.c", &[&["16", "1"], &["48", "4"], &["160", "3"]]),
    ("tests/programs/mesh.c", &[&["9"], &["1000"], &["5003"]]),
    ("tests/programs/transpose.c", &[&["3", "5"], &["40", "24"], &["130", "70"]]),
    ("tests/programs/mixed.c", &[&["7", "3"], &["3000", "10"]]),
    ("tests/programs/oob.c", &[&["10"], &["3000"]]),
    ("tests/programs/helpers.c", &[&["3"], &["1000"]]),
    ("tests/programs/volume.c", &[&["3", "2", "1"], &["20", "12", "9"], &["17", "5", "40"]]),
    ("tests/programs/heat3d.c", &[&["3", "3", "3", "4", "4", "4", "1"], &["20", "13", "17", "4", "3", "2", "3"]]),
    ("tests/programs/threshold.c", &[&["3"], &["1001"], &["5000"]]),
    ("tests/programs/mathfns.c", &[&["3"], &["1001"], &["5000"]]),
    ("tests/programs/hostwrites.c", &[&["2", "2"], &["1001", "4"], &["5000", "3"]]),
    ("tests/programs/sparsewrites.c", &[&["8192", "2", "store"], &["20000", "3", "read"], &["30000", "3", "none"]]),
    ("tests/programs/jds.c", &[&["5", "2", "2"], &["300", "16", "3"], &["2000", "64", "3"]]),
    (
        "tests/programs/blur.c",
        &[&["5", "3", "2", "2", "1"], &["61", "37", "8", "4", "2"], &["130", "70", "16", "5", "3"]],
    ),
    ("tests/programs/rownorm.cc", &[&["3", "1"], &["1000", "37"], &["300", "513"]]),
    ("tests/programs/gridstride.c", &[&["7", "2", "2"], &["1000", "32", "5"], &["5003", "64", "3"]]),
    ("tests/programs/conv.c", &[&["2", "3", "1"], &["61", "37", "2"], &["130", "70", "3"]]),
    ("tests/programs/radius.c", &[&["2", "3", "1", "4"], &["53", "31", "2", "16"], &["130", "70", "5", "64"]]),
    ("tests/programs/jacobi1d.c", &[&["5", "7", "1"], &["200", "16", "3"], &["1003", "50", "5"]]),
    ("tests/programs/chain.c", &[&["1", "1", "1"], &["777", "1000", "2"], &["5000", "48", "3"]]),
    ("tests/programs/unsigned.c", &[&["2", "1", "1", "1"], &["45", "29", "8", "4"], &["130", "270", "16", "5", "300"]]),
    ("tests/programs/rowptr.c", &[&["1", "1"], &["37", "23"], &["90", "1000"]]),
    ("tests/programs/planes.c", &[&["1", "1"], &["29", "17", "11"], &["40", "900"]]),
    ("tests/programs/lattice.c", &[&["1"], &["4"]]),
    ("tests/programs/escape.c", &[&["1", "1", "1"], &["37", "23", "16"], &["90", "900", "64"]]),
    (
        "tests/programs/boxblur.c",
        &[&["1", "1", "1", "1", "1"], &["53", "29", "8", "4", "2"], &["130", "70", "16", "5", "3"]],
    ),
    (
        "tests/programs/gemm_nt.c",
        &[&["8", "4", "3", "8", "4"], &["48", "40", "24", "8", "4"], &["96", "120", "16", "16", "8"]],
    ),
    ("tests/cuda/kernels.cu", &[&["16"], &["1000"], &["3001"]]),
    ("tests/cuda/structs.cu", &[&["1"], &["100"], &["3000"]]),
    ("tests/cuda/large_params.cu", &[&["1"], &["100"], &["3001"]]),
    ("tests/cuda/dims.cu", &[&["1", "2"], &["100", "9"], &["1000", "64"]]),
    // Tricky programs (`tests/tricky/`): pointers kept in memory, inline PTX, symbols, limits.
    ("tests/tricky/const_struct_pointers.cu", &[&["1"], &["100"], &["4096"]]),
    ("tests/tricky/constant_args.cu", &[&["1"], &["100"], &["5000"]]),
    ("tests/tricky/pointer_array.cu", &[&["1", "1"], &["3", "5"], &["64", "300"]]),
    ("tests/tricky/linked_list.cu", &[&["1"], &["1000"]]),
    ("tests/tricky/pointer_ints.cu", &[&["1"], &["130"], &["1000"]]),
    ("tests/tricky/function_table.cu", &[&["1"], &["129"], &["1000"]]),
    ("tests/tricky/inline_ptx.cu", &[&["1"], &["100"], &["1024"]]),
    ("tests/tricky/half.cu", &[&["1"], &["100"], &["2048"]]),
    ("tests/tricky/symbols.cu", &[&[]]),
    ("tests/tricky/limits.cu", &[&[]]),
    ("tests/tricky/past_end.cu", &[&["1"], &["1000"], &["65536"]]),
    ("tests/tricky/intrinsics.cu", &[&["1"], &["100"], &["1000"]]),
    ("tests/cuda/streams.cu", &[&["8"], &["1000"], &["3001"]]),
    // Launches held back and replayed as graphs on GPUs: events, errors, managed memory,
    // streams and grids that change inside a sequence.
    ("tests/cuda/graphs.cu", &[&["3", "2"], &["1000", "40"]]),
    // cudaMemcpy straight between the program's memory and the devices, in pieces.
    ("tests/cuda/copies.cu", &[&["8", "1"], &["1000", "3"], &["5003", "4"]]),
    // cudaMemcpyAsync from a host buffer reused at once, into what kernels just read.
    ("tests/cuda/async_copies.cu", &[&["1", "1"], &["777", "3"], &["4096", "6"]]),
    ("tests/cuda/recursion.cu", &[&["1", "1"], &["1000", "12"], &["5000", "7"]]),
    ("tests/cuda/malloc3d.cu", &[&["1", "1", "1"], &["37", "19", "5"], &["300", "64", "9"]]),
    ("tests/cuda/managed_vars.cu", &[&["1", "1"], &["64", "5"], &["4096", "9"]]),
    ("tests/cuda/managed_flags.cu", &[&["1", "1"], &["100", "7"], &["5000", "20"]]),
    // `__constant__` arrays read at indices that change, rewritten between launches (on GPUs
    // through the constant bank).
    ("tests/cuda/constant_bank.cu", &[&["1", "1"], &["300", "4"], &["5000", "9"]]),
    // Grid-stride loops: split by iterations where their bodies allow it, whole where not.
    ("tests/cuda/stride.cu", &[&["64", "1"], &["1000", "2"], &["20011", "3"]]),
    // Reductions through atomics: private copies per device, combined after the launch.
    ("tests/cuda/reduce.cu", &[&["1", "1"], &["1000", "2"], &["20011", "3"]]),
    // A scalar the maps name that changes every launch (a pivot row): plans from closed forms.
    ("tests/cuda/eliminate.cu", &[&["1"], &["9"], &["70"]]),
    // Thrust's algorithms (CUB's kernels, from the toolchain's CCCL headers), run whole.
    ("tests/cuda/thrust.cu", &[&["1"], &["1000"], &["70001"]]),
    // Warp shuffles and votes: on simulated devices the block's threads run as fibers.
    ("tests/cuda/warps.cu", &[&["1"], &["300"], &["10000"]]),
    // Tiles staged in shared memory with their halos, one thread per side.
    ("tests/cuda/tiled.cu", &[&["3", "1"], &["37", "2"], &["150", "3"]]),
    // CUB's BlockReduce (warp shuffles as inline PTX, `redux.sync`), one result per block.
    ("tests/cuda/blockreduce.cu", &[&["1", "1"], &["7", "300"], &["100", "1000"]]),
    // A struct by value whose fields' names are Polly's own for the values it makes parameters.
    ("tests/cuda/struct_fields.cu", &[&["1", "1"], &["100", "60"], &["301", "77"]]),
    // `threadIdx` taken whole, and a device function called through a pointer.
    ("tests/cuda/through.cu", &[&["1"], &["300"], &["2001"]]),
    // Cooperative groups: `this_thread_block()`'s reserved shared memory, tiles of 64 and 128
    // threads (their syncs spin on flags, their reductions run in tiles of two lanes).
    ("tests/cuda/groups.cu", &[&["1"], &["37"]]),
    // Stream-ordered allocation, pools, priorities, pointer attributes.
    ("tests/cuda/pools.cu", &[&["1"], &["1000"]]),
    // Scoped atomic minima and maxima, signed and unsigned.
    ("tests/cuda/scoped.cu", &[&["1"], &["40"]]),
    // Shuffles without a mask (CUDA before 9).
    ("tests/cuda/legacy.cu", &[&["32"], &["4096"]]),
    // cuRAND's device API (its header's device-only tables).
    ("tests/cuda/rng.cu", &[&["1"], &["4096"]]),
    // Warp-synchronous steps through `volatile` shared memory (lanes in lockstep).
    ("tests/cuda/lockstep.cu", &[&["1"], &["9"]]),
    // The same between tile syncs without `volatile` (NVIDIA's dxtc), float3 and int.
    ("tests/cuda/tiles.cu", &[&["1"], &["7"]]),
    // The same ordered by `__threadfence_block()` (HeCBench fpdc), lanes leaving a loop early.
    ("tests/cuda/fenced.cu", &[&["1"], &["37"]]),
    // Reads bounded by nothing but a shape of a pitch no map names (HeCBench asmooth), exact
    // writes.
    ("tests/cuda/pitched_reads.cu", &[&["1", "1"], &["45", "37"]]),
    // CUDA arrays and texture objects: every kind of resource, sampling and read mode.
    ("tests/cuda/textures.cu", &[&["2", "2"], &["37", "23"], &["130", "41"]]),
    // Device variables of struct types with initial values (they read zero before).
    ("tests/cuda/initialized.cu", &[&["1"], &["1000"]]),
    // Zero-copy mapped host memory, page-locked and registered memory in kernels.
    ("tests/cuda/mapped.cu", &[&["1", "1"], &["1000", "3"]]),
    ("tests/cuda/zero_copy.cu", &[&["1", "1"], &["5000", "3"]]),
    ("tests/cuda/device_heap.cu", &[&["1", "1"], &["3000", "7"]]),
    // Every kind of memory one kernel is given, one after another (NVIDIA's UnifiedMemoryPerf).
    ("tests/cuda/memory_kinds.cu", &[&["1000", "1"], &["65536", "2"]]),
    // Page-locked memory freed, device memory allocated at its address, the same kernel on each.
    ("tests/cuda/reused_addresses.cu", &[&["1000", "3"], &["4096", "6"]]),
    // `__shared__` objects whose constructors nvcc does not run (clang refuses them).
    ("tests/cuda/shared_objects.cu", &[&["1"], &["1000"]]),
    // Atomic updates written as compare-and-swap loops into elements many blocks update
    // (HeCBench scatter): their writes were merged across devices, losing updates.
    ("tests/cuda/cas_loops.cu", &[&["1", "1"], &["1000", "7"], &["20000", "3"]]),
    // Floats to bfloat16 through inline PTX `cvt.rn.bf16.f32` (HeCBench attention-paged).
    ("tests/cuda/bf16_convert.cu", &[&["16"], &["1000"]]),
    // libcu++'s `cuda::barrier` in shared memory (NVIDIA's simpleAWBarrier).
    ("tests/cuda/barrier.cu", &[&["1"], &["1000"]]),
    // Rows as long as the grid has threads (`q * blockDim.x * gridDim.x + tid`, HeCBench s3d).
    ("tests/cuda/soa_rows.cu", &[&["1", "0"], &["13", "2"]]),
    // Kernels that wait on the clock before writing their own elements (NVIDIA's
    // simpleHyperQ), and one whose index depends on the clock.
    ("tests/cuda/clocked.cu", &[&["37", "0"], &["1000", "200"]]),
    // Kernels and copies of many streams at once, joined by events (program lanes on GPUs).
    ("tests/cuda/concurrent_streams.cu", &[&["64", "2", "1"], &["4096", "8", "9"]]),
    // Unsigned indices into shared memory that wrap (HeCBench merge's `BS[~Ax]`).
    ("tests/cuda/wrap.cu", &[&["1"], &["7"]]),
    // CUDA graphs: stream capture and graphs built node by node.
    ("tests/cuda/capture.cu", &[&["1"], &["1000"]]),
    // `__activemask` and `coalesced_threads()`, in divergent and converged code.
    ("tests/cuda/active.cu", &[&["37"], &["5000"]]),
    // The README's main example.
    ("examples/cuda/matmul.cu", &[&["1"], &["40"], &["129"]]),
    // bfloat16 arithmetic (cuda_bf16.h's inline PTX `fma.rn.bf16`), bit for bit.
    ("tests/cuda/bf16.cu", &[&["2"], &["1000"], &["10000"]]),
    // CUB's scan of 64-bit values and run-length encoding: 128-bit tile states between blocks.
    ("tests/cuda/scan64.cu", &[&["1"], &["1000"], &["30001"]]),
    // Indices that multiply or divide by run-time values: maps made for each launch's values.
    ("tests/cuda/values.cu", &[&["1", "1", "1", "1"], &["64", "40", "3", "4"], &["301", "77", "5", "3"]]),
    ("tests/cuda/math.cu", &[&["1", "1"], &["300", "4"], &["1001", "6"]]),
    ("tests/cuda/scatter.cu", &[&["1", "1", "1"], &["777", "1", "2"], &["10007", "3", "2"]]),
    // Writes no analysis can place, merged byte by byte after a split.
    ("tests/cuda/merged.cu", &[&["1", "1"], &["1000", "2"], &["20011", "3"]]),
    ("tests/cuda/local_copies.cu", &[&["1", "1"], &["7", "2"], &["40", "3"]]),
    // Local arrays indexed by loop counters, in loops unrolled for the GPU and kept rolled.
    ("tests/cuda/local_arrays.cu", &[&["1"], &["1000"]]),
    // Squares and sine-cosine pairs of the math library, simplified for the GPU.
    ("tests/cuda/math_calls.cu", &[&["1"], &["1000"]]),
    // A cooperative launch: blocks meeting at the grid's barrier, whole on one device.
    ("tests/cuda/grid_sync.cu", &[&["1"], &["1000"], &["30001"]]),
    // Launch sequences that change between synchronizations (kernels, grids, lengths): on a
    // GPU, graphs whose nodes change kernels and are disabled past a sequence's end.
    ("tests/cuda/sequences.cu", &[&["64", "3"], &["777", "6"]]),
    ("bench/programs/matmul.cu", &[&["1"], &["37"], &["100"]]),
    ("bench/programs/stencil.cu", &[&["3", "1"], &["37", "3"], &["130", "4"]]),
    ("bench/programs/nbody.cu", &[&["1", "1"], &["100", "2"], &["1100", "2"]]),
];

/// `hpvm-mgpu build FLAGS SRC`, built once per compiler: the executable is kept under
/// `target/test-builds/`, keyed by the compiler (its modification time and size), the flags,
/// and the bytes of the source, of the headers beside it and of `include/`. The differential,
/// rank and oracle suites build the same programs; each test binary used to build them again,
/// and the builds were most of the suites' time.
pub fn cached_build(src: &str, flags: &[&str]) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    flags.hash(&mut h);
    let source = root().join(src);
    std::fs::read(&source).unwrap_or_else(|e| panic!("{src}: {e}")).hash(&mut h);
    let headers = |dir: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "h" || x == "cuh" || x == "hpp"))
            .collect();
        v.sort();
        v
    };
    for header in headers(source.parent().unwrap()).iter().chain(&headers(&root().join("include"))) {
        header.hash(&mut h);
        std::fs::read(header).unwrap_or_default().hash(&mut h);
    }
    let stem = Path::new(src).file_stem().unwrap().to_string_lossy().into_owned();
    let dir = build_cache();
    let exe = dir.join(format!("{stem}-{:016x}", h.finish()));
    if exe.is_file() {
        return exe;
    }
    // Built under a name of its own and renamed: test binaries run one after another, but the
    // tests inside one run in parallel and may want the same program.
    let tmp = dir.join(format!(".{stem}-{}-{:?}", std::process::id(), std::thread::current().id()));
    let mut args: Vec<&str> = vec!["build"];
    args.extend_from_slice(flags);
    let tmp_str = tmp.to_string_lossy().into_owned();
    args.extend_from_slice(&[src, "-o", &tmp_str]);
    let out = hpvm_mgpu(&args);
    assert!(out.status.success(), "build {src} {flags:?}:\n{}", stderr(&out));
    std::fs::rename(&tmp, &exe).unwrap();
    exe
}

/// The folder of one compiler's builds: `target/test-builds/P-C`, where P names the compiler's
/// path (debug and release suites may run at once) and C its size and modification time. A
/// compiler rebuilt makes every older build of that path stale, and those are removed here:
/// kept, they filled a CI machine's disk (55 GB after a few weeks of commits).
fn build_cache() -> PathBuf {
    use std::hash::{Hash, Hasher};
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let compiler = PathBuf::from(env!("CARGO_BIN_EXE_hpvm-mgpu"));
        let meta = compiler.metadata().expect("the compiler is built");
        let mut path = std::collections::hash_map::DefaultHasher::new();
        compiler.hash(&mut path);
        let mut version = std::collections::hash_map::DefaultHasher::new();
        (meta.len(), meta.modified().ok()).hash(&mut version);
        let prefix = format!("{:08x}-", path.finish() as u32);
        let name = format!("{prefix}{:016x}", version.finish());
        let root = root().join("target/test-builds");
        for entry in std::fs::read_dir(&root).into_iter().flatten().flatten() {
            let stale = entry.file_name().to_str().is_some_and(|n| {
                // Older layouts kept every build flat in `test-builds/` itself.
                !entry.path().is_dir() || (n.starts_with(&prefix) && n != name)
            });
            if stale {
                let p = entry.path();
                let _ = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
            }
        }
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
    .clone()
}
