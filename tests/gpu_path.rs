//! The runtime's GPU path (contexts, held launches, CUDA graphs, parameter buffers) run on a
//! stand-in driver (`scripts/fake-cuda`), so that it is exercised on machines without a GPU.
//! Kernels do not run there, so nothing here checks results (the GPU runs of
//! `scripts/device/` do); what is checked is what reaches the driver: every launch exactly
//! once, graphs made only for sequences that repeat, and no per-launch context switch.

mod common;

use common::*;
use std::collections::HashMap;

/// The stand-in driver, built once per test binary into `target/fake-cuda`.
fn fake_driver() -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = root().join("target/fake-cuda");
            let out = std::process::Command::new(root().join("scripts/fake-cuda/build"))
                .arg(&dir)
                .env("CC", "/usr/lib/llvm-19/bin/clang")
                .output()
                .expect("run scripts/fake-cuda/build");
            assert!(out.status.success(), "{}", stderr(&out));
            dir
        })
        .clone()
}

/// Runs `exe args` on the stand-in GPUs: its exit status, the driver's call counts, and what
/// it printed (standard error, then standard output).
fn run_on_fake(exe: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> (bool, HashMap<String, u64>, String) {
    let lib = fake_driver();
    let mut all =
        vec![("LD_LIBRARY_PATH", lib.to_str().unwrap()), ("FAKECUDA_COUNT", "1"), ("HPVM_MGPU_PARTITION", "auto")];
    all.extend_from_slice(env);
    let out = run_program(exe, args, &all);
    let err = format!("{}{}", stderr(&out), stdout(&out));
    let counts = err
        .lines()
        .filter_map(|l| l.strip_prefix("fakecuda "))
        .filter_map(|l| {
            let (n, what) = l.trim().split_once(' ')?;
            Some((what.to_string(), n.parse().ok()?))
        })
        .collect();
    (out.status.success(), counts, err)
}

/// A time-stepping loop of three kernels (3 x 200 launches): every launch reaches the driver
/// once, directly or in a graph; with graphs, the held sequences are cut at a whole number of
/// the loop's period, so one graph serves the whole loop; without, no graph call is made.
#[test]
fn every_launch_reaches_the_driver_once_and_one_graph_serves_a_loop() {
    let exe = cached_build("bench/cuda/launches.cu", &["-O2"]);
    let count = |c: &HashMap<String, u64>, k: &str| c.get(k).copied().unwrap_or(0);
    let (ok, c, err) = run_on_fake(&exe, &["4096", "200"], &[("HPVM_MGPU_DEVICES", "cuda:1")]);
    assert!(ok, "{err}");
    assert_eq!(count(&c, "kernels run"), 600, "{err}");
    assert_eq!(count(&c, "cuGraphCreate"), 1, "{err}");
    assert!(count(&c, "cuGraphLaunch") >= 15, "{err}");
    // The context is made current once, not per launch.
    assert!(count(&c, "cuCtxSetCurrent") <= 2, "{err}");

    let (ok, c, err) =
        run_on_fake(&exe, &["4096", "200"], &[("HPVM_MGPU_DEVICES", "cuda:1"), ("HPVM_MGPU_GRAPHS", "off")]);
    assert!(ok, "{err}");
    assert_eq!(count(&c, "kernels run"), 600, "{err}");
    assert_eq!(count(&c, "cuLaunchKernel"), 600, "{err}");
    assert_eq!(count(&c, "cuGraphCreate") + count(&c, "cuGraphLaunch"), 0, "{err}");
}

/// Launches whose caches hit and which change nothing are replayed without the graph
/// (`partitioned::replay`); a copy between launches moves the memory table's epoch, and the
/// launches after it take the full path again (a replay would miss the new input). Counted
/// from the policy log, which names every replay.
#[test]
fn launches_replay_until_memory_changes() {
    let count = |log: &str, what: &str| log.lines().filter(|l| l.ends_with(what)).count();
    let replay = cached_build("tests/inputs/cuda/replay.cu", &["-O2"]);
    let env = [("HPVM_MGPU_DEVICES", "cuda:1"), ("HPVM_MGPU_POLICY_LOG", "1")];
    let (ok, c, err) = run_on_fake(&replay, &["4096", "100"], &env);
    assert!(ok, "{err}");
    assert_eq!(c.get("kernels run"), Some(&200), "{err}");
    let (replayed, full) = (count(&err, " replayed"), count(&err, " launch starts"));
    assert_eq!(replayed + full, 200, "{err}");
    // Two kernels; each is recorded at its second launch; each of the nine copies inside the
    // loop makes both next launches take the full path.
    assert_eq!(full, 2 + 2 + 9 * 2, "{err}");

    let (ok, _, err) = run_on_fake(&replay, &["4096", "100"], &[env[0], env[1], ("HPVM_MGPU_REPLAY", "off")]);
    assert!(ok, "{err}");
    assert_eq!((count(&err, " replayed"), count(&err, " launch starts")), (0, 200), "{err}");

    let launches = cached_build("bench/cuda/launches.cu", &["-O2"]);
    let (ok, _, err) = run_on_fake(&launches, &["4096", "200"], &env);
    assert!(ok, "{err}");
    assert_eq!(count(&err, " replayed"), 600 - 6, "{err}");

    // On two GPUs, launches the split policy keeps whole without looking (a grid under one
    // wave) replay too; every launch still reaches the driver once.
    let two = [("HPVM_MGPU_DEVICES", "cuda:2"), ("HPVM_MGPU_POLICY_LOG", "1"), ("FAKECUDA_GPUS", "2")];
    let (ok, c, err) = run_on_fake(&launches, &["4096", "200"], &two);
    assert!(ok, "{err}");
    assert_eq!(c.get("kernels run"), Some(&600), "{err}");
    assert!(count(&err, " replayed") >= 500, "{err}");
    // Where the policy splits whatever it measures, nothing replays.
    let always = [two[0], two[1], two[2], ("HPVM_MGPU_PARTITION", "always")];
    let (ok, _, err) = run_on_fake(&launches, &["4096", "200"], &always);
    assert!(ok, "{err}");
    assert_eq!(count(&err, " replayed"), 0, "{err}");
}

/// A replay reads the launch's arguments where the launcher put them (`partitioned::replay`):
/// a kernel whose two buffers are swapped after every launch replays from its two records,
/// scalars that change every launch replay, and so does a grid that changes (the same
/// arguments otherwise): a whole launch's plan holds for any grid, and the replay sets the
/// grid its kernel sees. The GPU run's output against nvcc's build is checked on GPUs
/// (`bench/results/`); here, what replays.
#[test]
fn replays_tell_swapped_buffers_scalars_and_grids_apart() {
    let exe = cached_build("tests/inputs/cuda/replay_args.cu", &["-O2"]);
    let env = [("HPVM_MGPU_DEVICES", "cuda:1"), ("HPVM_MGPU_POLICY_LOG", "1")];
    let (ok, c, err) = run_on_fake(&exe, &["4096", "200"], &env);
    assert!(ok, "{err}");
    assert_eq!(c.get("kernels run"), Some(&600), "{err}");
    let count = |what: &str| err.lines().filter(|l| l.ends_with(what)).count();
    // Each kernel's first launches (until the swapped buffers' two records are made and
    // memory stops changing) take the full path; the rest replay.
    assert_eq!((count("relax.blocks replayed"), count("relax.blocks launch starts")), (196, 4), "{err}");
    assert_eq!((count("shift.blocks replayed"), count("shift.blocks launch starts")), (196, 4), "{err}");
    // `head` cycles through four grids: each is replayed from the one record.
    assert_eq!((count("head.blocks replayed"), count("head.blocks launch starts")), (196, 4), "{err}");
}

/// The statistics name a CUDA program's first launch and the time the GPUs' properties took
/// to ask: asked on a thread of their own from the session's start, so the first launch need
/// not (on an H200 they took 0.96-1.5 ms, the whole first launch 0.14-0.16 ms since). On the
/// stand-in driver both are tiny but counted; on simulated devices no GPU is asked.
#[test]
fn first_launch_and_gpu_properties_are_in_the_statistics() {
    let exe = cached_build("bench/cuda/launches.cu", &["-O2"]);
    let dir = TempDir::new("first_launch_stats");
    let stats = dir.0.join("stats.json");
    let env = [("HPVM_MGPU_DEVICES", "cuda:1"), ("HPVM_MGPU_STATS", stats.to_str().unwrap())];
    let (ok, c, err) = run_on_fake(&exe, &["4096", "20"], &env);
    assert!(ok, "{err}");
    assert_eq!(c.get("kernels run"), Some(&60), "{err}");
    let read = |p: &std::path::Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    let s = read(&stats);
    assert!(s["ms_first_launch"].as_f64().unwrap() > 0.0, "{s}");
    assert!(s["ms_gpu_limits"].as_f64().unwrap() > 0.0, "{s}");
    // The properties are asked once: two device queries by `find`, the rest by the limits.
    assert!(c.get("cuDeviceGetAttribute").copied().unwrap_or(0) <= 25, "{err}");

    let sim = dir.0.join("sim.json");
    let out = run_program(
        &exe,
        &["4096", "20"],
        &[("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_STATS", sim.to_str().unwrap())],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let s = read(&sim);
    assert!(s["ms_first_launch"].as_f64().unwrap() > 0.0, "{s}");
    assert_eq!(s["ms_gpu_limits"].as_f64(), Some(0.0), "{s}");
}

/// On GPUs a kernel's occupancy is the driver's for the compiled kernel (the stand-in driver
/// answers 2048 / threads, whatever the shared memory), so that a cooperative launch sized
/// from it fits the GPU; on simulated devices it comes from the devices' limits, where 48 KiB
/// of shared memory per block leaves fewer blocks. A cooperative launch reaches the driver's
/// cooperative entry point.
#[test]
fn occupancy_on_gpus_is_the_drivers_and_cooperative_launches_reach_it() {
    let exe = cached_build("tests/inputs/cuda/occupancy.cu", &["-O2"]);
    let (ok, c, err) = run_on_fake(&exe, &[], &[("HPVM_MGPU_DEVICES", "cuda:1")]);
    assert!(ok, "{err}");
    assert!(c.get("cuOccupancyMaxActiveBlocksPerMultiprocessor").copied().unwrap_or(0) >= 2, "{err}");
    let out = run_program(&exe, &[], &[("HPVM_MGPU_DEVICES", "cpu:1")]);
    let text = stdout(&out);
    assert!(out.status.success() && text.starts_with("occupancy ") && !text.starts_with("occupancy 16 "), "{text}");

    let exe = cached_build("tests/cuda/grid_sync.cu", &["-O2"]);
    let (_, c, err) = run_on_fake(&exe, &["1000"], &[("HPVM_MGPU_DEVICES", "cuda:1")]);
    assert_eq!(c.get("cuLaunchCooperativeKernel"), Some(&1), "{err}");
}

/// At the process's exit device memory is freed, not copied back (nothing can read it any
/// more): of three buffers the program never frees, the driver copies to the host only the
/// one the program copies back itself, and the managed one, which host code could still read.
#[test]
fn device_memory_is_not_copied_back_at_exit() {
    let exe = cached_build("tests/inputs/cuda/unfreed.cu", &["-O2"]);
    let (ok, c, err) = run_on_fake(&exe, &[], &[("HPVM_MGPU_DEVICES", "cuda:1")]);
    assert!(ok, "{err}");
    assert_eq!(c.get("cuMemcpyDtoHAsync_v2").copied().unwrap_or(0), 2, "{err}");
}

/// Sequences that change between synchronizations (`tests/cuda/sequences.cu`: kernels, grids
/// and lengths drawn at random, between repeats of a fixed loop body): every launch reaches
/// the driver once; the GPU's one chain runs the sequences no graph of their own runs, its
/// nodes past a shorter sequence's end disabled, so that few graphs are ever made; without
/// graphs, none.
#[test]
fn one_chain_runs_sequences_that_change() {
    let exe = cached_build("tests/cuda/sequences.cu", &["-O2"]);
    let count = |c: &HashMap<String, u64>, k: &str| c.get(k).copied().unwrap_or(0);
    let (_, c, err) = run_on_fake(&exe, &["4096", "60"], &[("HPVM_MGPU_DEVICES", "cuda:1")]);
    // Kernels do not run on the stand-in driver, so the program's own check fails; what
    // reached the driver is what is checked.
    let launches: u64 = err
        .lines()
        .find_map(|l| l.split_once(" launches, ")?.0.parse().ok())
        .unwrap_or_else(|| panic!("no launch count printed: {err}"));
    assert_eq!(count(&c, "kernels run"), launches, "{err}");
    assert!(count(&c, "cuGraphCreate") <= 4, "{err}");
    assert!(count(&c, "cuGraphNodeSetEnabled") > 0, "{err}");
    assert!(count(&c, "cuGraphLaunch") > 60, "{err}");
    assert!(count(&c, "cuLaunchKernel") < launches / 10, "{err}");

    let (_, c, err) =
        run_on_fake(&exe, &["4096", "60"], &[("HPVM_MGPU_DEVICES", "cuda:1"), ("HPVM_MGPU_GRAPHS", "off")]);
    assert_eq!(count(&c, "kernels run"), launches, "{err}");
    assert_eq!(count(&c, "cuLaunchKernel"), launches, "{err}");
    assert_eq!(count(&c, "cuGraphCreate") + count(&c, "cuGraphLaunch"), 0, "{err}");
}

/// `__constant__` arrays on GPUs: the runtime places an array's GPU copy in the module's
/// constant bank (found with `cuModuleGetGlobal`, not allocated), and its kernel's launches
/// run the variant that reads it there; an array whose copy was allocated before (its address
/// passed as a pointer first) stays where it is, and its kernel reads it through its parameter.
#[test]
fn constant_arrays_are_read_from_the_constant_bank_where_their_copy_is_there() {
    let exe = cached_build("tests/inputs/cuda/constants.cu", &["-O2"]);
    let (ok, c, err) = run_on_fake(&exe, &[], &[("HPVM_MGPU_DEVICES", "cuda:1"), ("HPVM_MGPU_STATS", "1")]);
    assert!(ok, "{err}");
    let line = |node: &str| err.lines().find(|l| l.trim_start().starts_with(node)).unwrap_or_default().to_string();
    assert!(line("read_a.blocks").contains("(3 through the read-only cache)"), "{err}");
    assert!(!line("read_b.blocks").contains("through the read-only cache"), "{err}");
    // `out` and `kB` are allocated; `kA` lives in the module.
    assert_eq!(c.get("cuMemAlloc_v2"), Some(&2), "{err}");
    assert_eq!(c.get("cuModuleGetGlobal_v2"), Some(&1), "{err}");
}

/// A kernel whose device-side `assert` fails on a GPU (the stand-in driver's second launch,
/// `FAKECUDA_ASSERT_AT`): the synchronization that meets it returns `cudaErrorAssert`, as do
/// every call after it and `cudaGetLastError` each time, and the program, which checks that,
/// ends as it chooses (here with success), not with the runtime's error.
#[test]
fn a_failed_device_assert_is_cudas_sticky_error() {
    let exe = cached_build("tests/inputs/cuda/device_assert.cu", &["-O2"]);
    let (ok, c, err) = run_on_fake(&exe, &[], &[("HPVM_MGPU_DEVICES", "cuda:1"), ("FAKECUDA_ASSERT_AT", "2")]);
    assert!(ok, "{err}");
    assert!(err.contains("assert seen: device-side assert triggered\nPASS"), "{err}");
    assert_eq!(c.get("kernels run"), Some(&2), "{err}");
}

/// A kernel spinning on a latch in page-locked host memory (`tests/inputs/cuda/latch.cu`,
/// NVIDIA's UnifiedMemoryPerf's pattern) goes to the GPU with the latch's host address, at
/// once, not to the host (which would spin before the program could set the latch); the work
/// queued behind it (copies from and to page-locked memory, launches copying managed memory
/// to the GPU, more than the staging slots hold) waits on the stream, never on the host: the
/// stand-in driver's latch kernel (`FAKECUDA_LATCH`) reports any wait for the GPU before the
/// host sets the latch as the deadlock it would be. Events recorded behind it are not reached,
/// and asking says so without waiting.
#[test]
fn a_kernel_spinning_on_page_locked_memory_never_waits_for_the_host() {
    let exe = cached_build("tests/inputs/cuda/latch.cu", &["-O2"]);
    for (args, stats) in [(["1048576", "40"], "0"), (["8388608", "4"], "0"), (["8388608", "4"], "1")] {
        let env = [("HPVM_MGPU_DEVICES", "cuda:1"), ("FAKECUDA_LATCH", "spin"), ("HPVM_MGPU_STATS", stats)];
        // Kernels do not run on the stand-in driver: the program's own check fails.
        let (_, c, err) = run_on_fake(&exe, &args, &env);
        assert!(!err.contains("deadlock"), "{args:?}: {err}");
        assert!(!err.contains("reported done"), "{args:?}: {err}");
        assert!(err.contains("checksum"), "{args:?}: {err}");
        let steps: u64 = args[1].parse().unwrap();
        assert_eq!(c.get("kernels run"), Some(&(steps + 1)), "{args:?}: {err}");
        assert!(c.get("cuMemHostGetDevicePointer_v2").is_some_and(|&n| n >= 3), "{args:?}: {err}");
        if stats == "1" {
            let spin = err.lines().find(|l| l.trim_start().starts_with("spin.blocks")).unwrap_or_default();
            assert!(spin.contains("GPU: 1 kernels"), "{err}");
            assert!(!err.contains("ran on the host"), "{err}");
        }
    }
}

/// Page-locked memory a kernel reads in place (`tests/cuda/memory_kinds.cu`'s zero-copy
/// kernel) is not read through the read-only data cache, since the host may write it while
/// the kernel runs; the same kernel given device memory is.
#[test]
fn memory_reached_in_place_is_not_read_through_the_read_only_cache() {
    let exe = cached_build("tests/cuda/memory_kinds.cu", &["-O2"]);
    let (_, _, err) = run_on_fake(&exe, &["1024", "1"], &[("HPVM_MGPU_DEVICES", "cuda:1"), ("HPVM_MGPU_STATS", "1")]);
    let line = |node: &str| err.lines().find(|l| l.trim_start().starts_with(node)).unwrap_or_default().to_string();
    assert!(line("combine_mapped.blocks").contains("GPU: 1 kernels"), "{err}");
    assert!(!line("combine_mapped.blocks").contains("read-only cache"), "{err}");
    assert!(line("combine.blocks").contains("through the read-only cache"), "{err}");
}

/// Kernels that call the device heap (`malloc`, `free`: `tests/cuda/device_heap.cu`) are GPU
/// kernels, the PTX calling the driver's heap as nvcc's does, not host code: every one of them
/// reaches the GPU, whole (pointers from a GPU's heap are that GPU's).
#[test]
fn kernels_calling_the_device_heap_run_on_the_gpu() {
    let exe = cached_build("tests/cuda/device_heap.cu", &["-O2"]);
    let (_, c, err) = run_on_fake(&exe, &[], &[("HPVM_MGPU_DEVICES", "cuda:1"), ("HPVM_MGPU_STATS", "1")]);
    assert_eq!(c.get("kernels run"), Some(&4), "{err}");
    for node in ["make.blocks", "use.blocks", "release.blocks", "scratch.blocks"] {
        let line = err.lines().find(|l| l.trim_start().starts_with(node)).unwrap_or_default();
        assert!(line.contains("GPU: 1 kernels"), "{node}: {err}");
    }
    assert!(!err.contains("ran on the host"), "{err}");
    assert!(err.contains("1 loaded from the build's machine code"), "{err}");
}

/// Kernels and copies of a program's streams (`tests/cuda/concurrent_streams.cu`, two of
/// them) go to a driver stream each beside the GPU's main one, where they may run at once, as
/// CUDA runs them (the default, and `HPVM_MGPU_STREAMS=lanes`); `HPVM_MGPU_STREAMS=one` keeps
/// everything on the main stream.
#[test]
fn a_programs_streams_get_driver_streams_of_their_own() {
    let exe = cached_build("tests/cuda/concurrent_streams.cu", &["-O2"]);
    let streams = |mode: &str| {
        let (_, c, err) =
            run_on_fake(&exe, &["64", "2", "1"], &[("HPVM_MGPU_DEVICES", "cuda:1"), ("HPVM_MGPU_STREAMS", mode)]);
        assert!(err.contains("checksum"), "{err}");
        // The main stream, and one per lane (made with the lane's priority).
        let made =
            c.get("cuStreamCreate").copied().unwrap_or(0) + c.get("cuStreamCreateWithPriority").copied().unwrap_or(0);
        (Some(made), c.get("cuStreamWaitEvent").copied().unwrap_or(0), err)
    };
    for mode in ["lanes", ""] {
        let (lanes, waits, err) = streams(mode);
        assert_eq!(lanes, Some(3), "{mode}: {err}");
        assert!(waits > 0, "{mode}: {err}");
    }
    let (one, _, err) = streams("one");
    assert_eq!(one, Some(1), "{err}");
}

/// A buffer cleared between kernels (`cudaMemset`, as iterative solvers clear a residual) is
/// cleared on the GPU's stream and left in flight, as CUDA's memsets of device memory are:
/// fifty rounds wait for the GPU no more often than ten.
#[test]
fn memsets_of_device_memory_do_not_wait_for_the_gpu() {
    let exe = cached_build("tests/inputs/cuda/memset_loop.cu", &["-O2"]);
    let waits = |rounds: &str| {
        let (_, c, err) = run_on_fake(&exe, &[rounds], &[("HPVM_MGPU_DEVICES", "cuda:1")]);
        assert!(err.contains("sum"), "{err}");
        let fills = c.get("cuMemsetD8Async").copied().unwrap_or(0);
        assert!(fills > rounds.parse::<u64>().unwrap(), "{err}");
        c.get("cuStreamSynchronize").copied().unwrap_or(0)
    };
    assert_eq!(waits("50"), waits("10"));
}

/// Kernels of a program's streams that write different parts of one buffer, each through a
/// pointer into it (`tests/inputs/cuda/stream_parts.cu`, as simpleStreams and simpleHyperQ
/// launch), run beside one another: a launch on a stream that meets another stream's work on
/// its buffers is planned with its maps, and so is that work, once (it was left with whole
/// buffers), so what each leaves in flight is the bytes it writes. A kernel that then reads
/// the whole buffer waits for every stream that wrote it (the stand-in driver's trace).
#[test]
fn kernels_of_streams_writing_parts_of_one_buffer_run_beside_one_another() {
    let exe = cached_build("tests/inputs/cuda/stream_parts.cu", &["-O2"]);
    let env = [("HPVM_MGPU_DEVICES", "cuda:1"), ("FAKECUDA_TRACE", "1"), ("HPVM_MGPU_POLICY_LOG", "1")];
    let (ok, _, err) = run_on_fake(&exe, &["4096"], &env);
    assert!(err.contains("sum"), "{err}");
    // The first fill met nothing; the three others and the sum met the fills before them.
    assert_eq!(err.matches("on a stream: planned with its maps").count(), 4, "{err}");
    let _ = ok; // kernels do not run on the stand-in driver: the sum is wrong there
    let trace: Vec<&str> = err.lines().filter_map(|l| l.strip_prefix("fakecuda: ")).collect();
    let launches: Vec<usize> =
        trace.iter().enumerate().filter(|(_, l)| l.starts_with("launch of")).map(|(i, _)| i).collect();
    assert_eq!(launches.len(), 5, "{err}");
    let waits = |from: usize, to: usize| trace[from..to].iter().filter(|l| l.contains(" waits for event ")).count();
    // The four fills: no stream waits for another.
    assert_eq!(waits(launches[0], launches[3]), 0, "{err}");
    // The sum (on the first fill's stream) waits for the three other streams.
    assert_eq!(waits(launches[3], launches[4]), 3, "{err}");
    let streams: std::collections::HashSet<&str> =
        launches[..4].iter().map(|&i| trace[i].rsplit(' ').next().unwrap()).collect();
    assert_eq!(streams.len(), 4, "{err}");
}

/// Streams that each copy their own arrays, through pointers into them, as StreamPriorities
/// does (`tests/inputs/cuda/stream_own.cu`): no launch meets another stream's work on its
/// buffers, so none waits for another stream and none asks its maps (ISL) what it touches.
/// Its first launch on an H100 spent 3.7 ms on that, where the kernels took 0.6 ms. The
/// high-priority stream's lane is a driver stream of its priority.
#[test]
fn streams_on_buffers_of_their_own_ask_no_maps() {
    let exe = cached_build("tests/inputs/cuda/stream_own.cu", &["-O2"]);
    let env = [("HPVM_MGPU_DEVICES", "cuda:1"), ("FAKECUDA_TRACE", "1"), ("HPVM_MGPU_POLICY_LOG", "1")];
    let (_, _, err) = run_on_fake(&exe, &["8192"], &env);
    let trace: Vec<&str> = err.lines().filter_map(|l| l.strip_prefix("fakecuda: ")).collect();
    let launches: Vec<usize> =
        trace.iter().enumerate().filter(|(_, l)| l.starts_with("launch of")).map(|(i, _)| i).collect();
    assert_eq!(launches.len(), 4, "{err}");
    let streams: std::collections::HashSet<&str> =
        launches.iter().map(|&i| trace[i].rsplit(' ').next().unwrap()).collect();
    assert_eq!(streams.len(), 2, "{err}");
    assert!(!trace[launches[0]..].iter().any(|l| l.contains(" waits for event ")), "{err}");
    assert!(!err.contains("planned with its maps"), "{err}");
    // The high-priority stream's driver stream has its priority; the other lane the lowest.
    let made = |p: &str| trace.iter().filter(|l| l.contains(&format!("made with priority {p}"))).count();
    assert!(made("-5") >= 1 && made("0") >= 1, "{err}");
}

/// Launches on a program's streams through pointers into one buffer, each with its own
/// pointer and seed (`tests/inputs/cuda/stream_parts.cu`): neither the pointer's remaining
/// bytes nor the seed is named by the maps' conditions, so they make no launch a new question
/// for ISL and no closed form, even made at the launch (`HPVM_MGPU_CLOSED_FORMS=now`): the
/// first launch on each stream paid milliseconds of ISL for them (StreamPriorities on an
/// H100: 21 ms of kernels against nvcc's 0.6). Forms made in the background or at the launch
/// plan alike.
#[test]
fn launches_on_streams_with_new_pointers_ask_isl_nothing_new() {
    let exe = cached_build("tests/inputs/cuda/stream_parts.cu", &["-O2"]);
    let dir = std::env::temp_dir().join(format!("hpvm-stream-forms-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut traces = Vec::new();
    for mode in ["now", "background"] {
        let stats = dir.join(format!("{mode}.json"));
        let env = [
            ("HPVM_MGPU_DEVICES", "cuda:1"),
            ("HPVM_MGPU_CLOSED_FORMS", mode),
            ("HPVM_MGPU_STATS", stats.to_str().unwrap()),
            ("FAKECUDA_TRACE", "1"),
        ];
        let (_, _, err) = run_on_fake(&exe, &["4096"], &env);
        let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        assert_eq!(s["closed_forms"].as_u64(), Some(0), "{mode}: {err}");
        let trace: Vec<String> = err.lines().filter(|l| l.starts_with("fakecuda: ")).map(String::from).collect();
        assert!(trace.iter().any(|l| l.contains("launch of")), "{mode}: {err}");
        traces.push(trace);
    }
    assert_eq!(traces[0], traces[1], "the driver saw other work with forms made in the background");
    let (ok, _, err) =
        run_on_fake(&exe, &["64"], &[("HPVM_MGPU_DEVICES", "cuda:1"), ("HPVM_MGPU_CLOSED_FORMS", "later")]);
    assert!(!ok && err.contains("HPVM_MGPU_CLOSED_FORMS=later: expected `background` or `now`"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
