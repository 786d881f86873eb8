//! Partitioned execution on simulated devices (`HPVM_MGPU_DEVICES=cpu:N`): every example and
//! every program of `tests/programs/` and `tests/cuda/` gives output bit-identical to a host run and to an
//! unpartitioned run, on 1 to 8 devices and at sizes that do not divide evenly or give fewer
//! blocks than devices; the statistics show that partitionable nodes really ran split.

mod common;

use common::*;
use std::path::{Path, PathBuf};

/// Device counts of the differential test.
const DEVICES: [usize; 6] = [1, 2, 3, 4, 7, 8];

fn build(_dir: &TempDir, src: &str) -> PathBuf {
    cached_build(src, &["-O2"])
}

/// Runs and returns the checksum line, asserting PASS.
fn run_ok(exe: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let out = run_program(exe, args, env);
    let text = stdout(&out);
    assert!(
        out.status.success() && text.contains("PASS"),
        "{} {args:?} with {env:?}:\n{text}{}",
        exe.display(),
        stderr(&out)
    );
    checksum(&text).unwrap_or_else(|| panic!("{} printed no checksum", exe.display()))
}

/// The statistics of one run, written as JSON.
fn stats(exe: &Path, args: &[&str], devices: &str, dir: &TempDir) -> serde_json::Value {
    let file = dir.path_str("stats.json");
    let _ = std::fs::remove_file(&file);
    run_ok(exe, args, &[("HPVM_MGPU_DEVICES", devices), ("HPVM_MGPU_STATS", &file)]);
    serde_json::from_str(&std::fs::read_to_string(&file).expect("statistics written")).expect("valid JSON")
}

fn node<'a>(s: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    s["nodes"].as_array().unwrap().iter().find(|n| n["node"] == name).unwrap_or_else(|| panic!("no node {name}"))
}

// The differential test in two halves (every other program), which the test harness runs at
// once: nearly every run is one process on one core.
#[test]
fn programs_are_bit_identical_on_simulated_devices() {
    differential(0);
}

#[test]
fn programs_are_bit_identical_on_simulated_devices_second_half() {
    differential(1);
}

/// Every program of `PROGRAMS` at an index of parity `half`: bit-identical on every device
/// count and setting, and split wherever the analysis proved it may be.
fn differential(half: usize) {
    let dir = TempDir::new("partitioned");
    for &(src, sizes) in PROGRAMS.iter().skip(half).step_by(2) {
        let exe = build(&dir, src);
        for args in sizes {
            let host = run_ok(&exe, args, &[("HPVM_MGPU_DEVICES", "cpu")]);
            for n in DEVICES {
                let devices = format!("cpu:{n}");
                let got = run_ok(&exe, args, &[("HPVM_MGPU_DEVICES", &devices)]);
                assert_eq!(got, host, "{src} {args:?} on {devices} differs from the host run");
            }
            let off = run_ok(&exe, args, &[("HPVM_MGPU_DEVICES", "cpu:3"), ("HPVM_MGPU_PARTITION", "off")]);
            assert_eq!(off, host, "{src} {args:?} unpartitioned differs from the host run");
            // The split policy's choices, whatever they are, change nothing.
            let auto = run_ok(&exe, args, &[("HPVM_MGPU_DEVICES", "cpu:3"), ("HPVM_MGPU_PARTITION", "auto")]);
            assert_eq!(auto, host, "{src} {args:?} under the split policy differs from the host run");
            // More partitions than devices.
            let more = run_ok(&exe, args, &[("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_PARTITIONS", "3")]);
            assert_eq!(more, host, "{src} {args:?} with 3 partitions per device differs from the host run");
            // Unequal shares (one device gets none), the devices taken out of their order.
            let weighted = run_ok(
                &exe,
                args,
                &[("HPVM_MGPU_DEVICES", "cpu:3"), ("HPVM_MGPU_WEIGHTS", "3,0,1"), ("HPVM_MGPU_ORDER", "2,0,1")],
            );
            assert_eq!(weighted, host, "{src} {args:?} with weights 3,0,1 and order 2,0,1 differs from the host run");
        }
        // At the largest size, every node the analysis proved partitionable ran split.
        let largest = sizes.last().unwrap();
        let s = stats(&exe, largest, "cpu:3", &dir);
        for n in s["nodes"].as_array().unwrap() {
            if n["unit_launches"].as_u64().unwrap() == 0 {
                continue;
            }
            // A leaf that keeps pointers in memory runs whole on one device (its addresses
            // translated), proven or not, and so does one given page-locked host memory, which
            // it reaches in place as CUDA's kernels do: never on the host's copies where
            // devices exist.
            // (A kernel given page-locked memory in some launches and device memory in others,
            // `reused_addresses.cu`'s, splits in the others.)
            let reason = n["unpartitioned_because"].as_str().unwrap_or_default();
            let in_place = reason.contains("points to page-locked host memory");
            if reason.contains(": it runs whole on one device") || in_place {
                if !in_place {
                    assert_eq!(n["max_devices"], 1, "{src}: {} runs whole", n["node"]);
                    assert_eq!(n["partitioned_launches"], 0, "{src}: {} runs whole", n["node"]);
                }
                assert!(
                    n["on_host_because"].is_null(),
                    "{src}: {} ran on the host: {}",
                    n["node"],
                    n["on_host_because"]
                );
                continue;
            }
            // Maps made at run time for the launch's values (`partitioned::special`) split
            // where they prove the writes, else say why (values.cu asserts they split).
            if n["analysis"].as_str().is_some_and(|a| a.contains("analysed again")) {
                if n["partitioned_launches"].as_u64().unwrap() == 0 {
                    assert!(n["unpartitioned_because"].is_string(), "{src}: no reason for {}", n["node"]);
                }
                continue;
            }
            let proven = n["analysis"].as_str().is_some_and(|a| a.starts_with("partitionable"));
            // An indirect write splits only when this launch's indices send the parts apart
            // (jds.c's `Spread` repeats its keys on purpose).
            // A grid of one block has nothing to cut (Thrust's scan initialises its tile states
            // with one block up to 245760 items).
            let refused = n["unpartitioned_because"].as_str().is_some_and(|r| {
                r.starts_with("the indices read from") || r.starts_with("its grid is too small to cut")
            });
            assert_eq!(
                n["partitioned_launches"].as_u64().unwrap() > 0,
                proven && !refused,
                "{src} {largest:?}: node {} (analysis: {}) partitioned {} times",
                n["node"],
                n["analysis"],
                n["partitioned_launches"]
            );
            if proven && !refused {
                assert!(n["max_devices"].as_u64().unwrap() >= 2);
            } else {
                assert!(n["unpartitioned_because"].is_string(), "{src}: no reason for {}", n["node"]);
            }
        }
        let host = run_ok(&exe, largest, &[("HPVM_MGPU_DEVICES", "cpu")]);
        evicting_changes_nothing(&exe, src, largest, &dir, &host);
    }
}

/// Kernels whose indices multiply or divide by run-time values (`i % width`, `j * cols`,
/// `blockIdx.y * gridDim.x`) split once the runtime has their maps made with a launch's values
/// built in; kept between runs; whole, saying why, where no compiler can make them.
#[test]
fn maps_made_for_a_launchs_values_split_kernels_the_build_could_not() {
    let dir = TempDir::new("partitioned-special");
    let exe = build(&dir, "tests/cuda/values.cu");
    let args = ["64", "40", "3", "4"];
    let host = run_ok(&exe, &args, &[("HPVM_MGPU_DEVICES", "cpu")]);
    let cache = dir.path_str("cache");
    let file = dir.path_str("special.json");
    let run = |env: &[(&str, &str)]| {
        let _ = std::fs::remove_file(&file);
        let mut all =
            vec![("HPVM_MGPU_DEVICES", "cpu:4"), ("HPVM_MGPU_PARTITION", "always"), ("HPVM_MGPU_STATS", &file)];
        all.extend_from_slice(env);
        assert_eq!(run_ok(&exe, &args, &all), host, "values.cu with {env:?}");
        serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&file).expect("statistics")).unwrap()
    };
    let kernels = ["periodic", "layers", "flat"];
    // Made by the compiler, then found in the cache. `strided`'s build maps hold for one
    // block only: made again for the launch's values where they fail.
    for round in ["compiled", "cached"] {
        let s = run(&[("HPVM_MGPU_SPECIALIZE_CACHE", &cache)]);
        for k in kernels {
            let n = node(&s, &format!("{k}.blocks"));
            assert!(n["analysis"].as_str().unwrap().contains("analysed again"), "{k}: {}", n["analysis"]);
        }
        for k in kernels.iter().chain(&["strided"]) {
            let n = node(&s, &format!("{k}.blocks"));
            assert_eq!(n["partitioned_launches"], n["unit_launches"], "{k} ({round}): {}", n["unpartitioned_because"]);
            assert_eq!(n["max_devices"], 4, "{k} ({round})");
        }
        let kept = std::fs::read_dir(&cache).map_or(0, |d| d.count());
        assert_eq!(kept, 4, "one file per kernel and values after the {round} run");
    }
    let s = run(&[("HPVM_MGPU_SPECIALIZE", "off"), ("HPVM_MGPU_SPECIALIZE_CACHE", "off")]);
    let n = node(&s, "strided.blocks");
    assert_eq!(n["partitioned_launches"], 0);
    let because = n["unpartitioned_because"].as_str().unwrap_or_default();
    assert!(because.contains("which this launch does not meet ("), "{because}");
    assert!(because.contains(") (HPVM_MGPU_SPECIALIZE=off)"), "{because}");
    // In the user's terms: CUDA's names, never the analysis's own parameters.
    for internal in ["bidx", "bidy", "bsx", "bsy", "boffx", "boffy", "[gx", " gx ", "->"] {
        assert!(!because.contains(internal), "{internal} in {because}");
    }
    // Without, and without merging: whole, saying why.
    for (env, why) in [
        (("HPVM_MGPU_SPECIALIZE", "off"), "HPVM_MGPU_SPECIALIZE=off"),
        (("HPVM_MGPU_COMPILER", "/nonexistent/hpvm-mgpu"), "could not run"),
    ] {
        let s = run(&[env, ("HPVM_MGPU_SPECIALIZE_CACHE", "off"), ("HPVM_MGPU_MERGE", "off")]);
        for k in kernels {
            let n = node(&s, &format!("{k}.blocks"));
            assert_eq!(n["partitioned_launches"], 0, "{k} with {env:?}");
            let because = n["unpartitioned_because"].as_str().unwrap_or_default();
            assert!(because.contains("not affine") || because.contains("may or may not"), "{k}: {because}");
            assert!(because.contains(why), "{k} with {env:?}: {because}");
        }
    }
    // Without, merging: `periodic` (written at `(i / width) * width + i % width`; its blocks
    // cannot talk) splits with its writes merged (the build's fallback), with the host's
    // output (`run` compares).
    let s = run(&[("HPVM_MGPU_SPECIALIZE", "off"), ("HPVM_MGPU_SPECIALIZE_CACHE", "off")]);
    let n = node(&s, "periodic.blocks");
    assert_eq!(n["partitioned_launches"], n["unit_launches"], "{}", n["unpartitioned_because"]);
}

/// The most of one statistic of the devices' memory, over the devices.
fn most(s: &serde_json::Value, field: &str) -> u64 {
    s["device_memory"].as_array().unwrap().iter().map(|m| m[field].as_u64().unwrap()).max().unwrap_or(0)
}

fn sum(s: &serde_json::Value, field: &str) -> u64 {
    s["device_memory"].as_array().unwrap().iter().map(|m| m[field].as_u64().unwrap()).sum()
}

/// Sparse copies under a memory limit (`HPVM_MGPU_DEVICE_MEMORY`): with the devices limited to
/// what the program's largest launch needs, less than they would back over the whole run,
/// granules are evicted (and what only a device held is saved to the host first), and the
/// output is the host run's.
fn evicting_changes_nothing(exe: &Path, src: &str, args: &[&str], dir: &TempDir, host: &str) {
    let page = [("HPVM_MGPU_GRANULE", "4K")];
    let file = dir.path_str("memory.json");
    let run = |limit: &str| {
        let _ = std::fs::remove_file(&file);
        let env = [
            ("HPVM_MGPU_DEVICES", "cpu:3"),
            ("HPVM_MGPU_STATS", file.as_str()),
            page[0],
            ("HPVM_MGPU_DEVICE_MEMORY", limit),
        ];
        let sum = run_ok(exe, args, &env);
        let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        (sum, s)
    };
    // A limit no program reaches: memory is then backed as under any limit (lazily: CUDA's
    // eager copies into device memory wait for launches), so the peaks are those a limit
    // changes.
    let (roomy, s) = run("1T");
    assert_eq!(roomy, host, "{src} {args:?} with sparse copies differs from the host run");
    let (peak, launch) = (most(&s, "peak_backed_bytes"), most(&s, "peak_launch_bytes"));
    assert!(launch <= peak && launch > 0 || peak == 0, "{src}: peaks {peak} / {launch}");
    if launch == peak {
        // One launch uses all the program's device memory: nothing to evict.
        return;
    }
    let limit = launch.to_string();
    let (limited, s) = run(&limit);
    assert_eq!(limited, host, "{src} {args:?} with {limit} bytes per device differs from the host run");
    assert!(most(&s, "peak_backed_bytes") <= launch, "{src}: {}", s["device_memory"]);
    assert!(sum(&s, "granules_evicted") > 0, "{src}: nothing evicted under {limit} bytes: {}", s["device_memory"]);
}

/// A limit below one buffer: the stencil's launches run in rounds of partitions, each device
/// backing at most its limit, evicting what the last round left (to the host when only it
/// held it); the output is a one-device run's. matmul at 1024 fits 6 MiB per device exactly
/// (a quarter of A and C, all of B) and needs no rounds.
#[test]
fn device_memory_below_one_buffer() {
    let dir = TempDir::new("partitioned-memory");
    for (src, args, limit, rounds) in [
        ("examples/stencil2d.c", ["2048", "2048", "3"], "4M", true),
        ("examples/matmul.c", ["1024", "", ""], "6M", false),
    ] {
        let args: Vec<&str> = args.into_iter().filter(|a| !a.is_empty()).collect();
        let exe = build(&dir, src);
        let one = run_ok(&exe, &args, &[("HPVM_MGPU_DEVICES", "cpu:1")]);
        let file = dir.path_str("limited.json");
        let got = run_ok(
            &exe,
            &args,
            &[("HPVM_MGPU_DEVICES", "cpu:4"), ("HPVM_MGPU_DEVICE_MEMORY", limit), ("HPVM_MGPU_STATS", &file)],
        );
        assert_eq!(got, one, "{src} on cpu:4 with {limit} per device");
        let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let bytes = hpvm_runtime::devices::parse_size(limit).unwrap();
        for m in s["device_memory"].as_array().unwrap() {
            assert!(m["peak_backed_bytes"].as_u64().unwrap() <= bytes, "{src}: {m}");
            assert_eq!(m["limit_bytes"].as_u64(), Some(bytes));
        }
        let most_rounds = s["nodes"].as_array().unwrap().iter().map(|n| n["max_memory_rounds"].as_u64().unwrap()).max();
        assert_eq!(most_rounds.unwrap() > 1, rounds, "{src}: {}", s["nodes"]);
        if rounds {
            assert!(sum(&s, "granules_evicted") > 0 && sum(&s, "bytes_evicted_to_host") > 0, "{}", s["device_memory"]);
        }
    }
}

/// Evicted bytes only one device held go to a peer that backs them already (a stencil's
/// granule at a partition boundary, which the neighbour reads its halo from), else to the
/// host; the output stays a one-device run's.
#[test]
fn evicted_bytes_go_to_a_peer_that_backs_them() {
    let dir = TempDir::new("partitioned-evict-peer");
    let exe = build(&dir, "bench/cuda/stencil2d.cu");
    let one = run_ok_any(&exe, &["200", "6"], &[("HPVM_MGPU_DEVICES", "cpu:1")]);
    let file = dir.path_str("evict.json");
    let env = [
        ("HPVM_MGPU_DEVICES", "cpu:2"),
        ("HPVM_MGPU_GRANULE", "4K"),
        ("HPVM_MGPU_DEVICE_MEMORY", "64K"),
        ("HPVM_MGPU_STATS", file.as_str()),
    ];
    assert_eq!(run_ok_any(&exe, &["200", "6"], &env), one);
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert!(sum(&s, "bytes_evicted_to_peers") > 0 && sum(&s, "bytes_evicted_to_host") > 0, "{}", s["device_memory"]);
    assert!(most(&s, "peak_backed_bytes") <= 64 << 10, "{}", s["device_memory"]);
}

/// Runs and returns the checksum line of a program that prints no PASS (a benchmark).
fn run_ok_any(exe: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let out = run_program(exe, args, env);
    assert!(out.status.success(), "{} {args:?} with {env:?}:\n{}", exe.display(), stderr(&out));
    checksum(&stdout(&out)).unwrap_or_else(|| panic!("{} printed no checksum", exe.display()))
}

/// A launch that cannot fit even one partition per round (a node that runs whole needs all
/// its buffers on one device) fails with the buffer, the bytes, the device and its limit;
/// exit 1, no crash.
#[test]
fn a_launch_larger_than_device_memory_is_refused_by_name() {
    let dir = TempDir::new("partitioned-too-big");
    let exe = build(&dir, "examples/histogram.c");
    let out = run_program(
        &exe,
        &["200000", "13"],
        &[("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_DEVICE_MEMORY", "128K"), ("HPVM_MGPU_PARTITION", "always")],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("needs") && err.contains("of device memory") && err.contains("more than the device's 128 KiB"),
        "{err}"
    );
    assert!(err.contains("examples/histogram.c:") && err.contains("on sim"), "{err}");
    // The buffers by the names the node gives them.
    assert!(err.contains("of `data` (781.25 KiB in all)") && err.contains("of `bins` (52 bytes in all)"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// A proven node whose grid is a single block of the runtime's cut runs on one device, and the
/// statistics say why instead of leaving "0 partitioned" unexplained.
#[test]
fn a_grid_too_small_to_cut_says_so() {
    let dir = TempDir::new("partitioned-small");
    let exe = build(&dir, "examples/vecadd.c");
    let s = stats(&exe, &["7"], "cpu:3", &dir);
    let n = node(&s, "VecAdd");
    assert_eq!(n["partitioned_launches"].as_u64(), Some(0), "{n}");
    let why = n["unpartitioned_because"].as_str().unwrap_or_default();
    assert!(why.contains("too small to cut") && why.contains("256"), "{n}");
    // Two blocks: split, no reason.
    let s = stats(&exe, &["300"], "cpu:3", &dir);
    let n = node(&s, "VecAdd");
    assert!(n["partitioned_launches"].as_u64().unwrap() > 0 && n["unpartitioned_because"].is_null(), "{n}");
}

/// 32-bit unsigned index arithmetic is widened under a bound on the largest index (a product
/// of parameters, dashdb's `bounds`); a launch whose grid could pass 2^32 runs unsplit, and
/// says which bound failed.
#[test]
fn unsigned_indices_split_only_while_they_cannot_wrap() {
    let dir = TempDir::new("partitioned-unsigned");
    let exe = build(&dir, "tests/programs/unsigned.c");
    // 65537 rows of 65535: the largest index, 65536 * 65535 + 65534, fits in 32 bits.
    let s = stats(&exe, &["65535", "3", "8", "4", "65534"], "cpu:3", &dir);
    let n = node(&s, "RowSum");
    assert!(n["partitioned_launches"].as_u64().unwrap() > 0 && n["unpartitioned_because"].is_null(), "{n}");
    // Two rows more and it would not.
    let s = stats(&exe, &["65535", "3", "8", "4", "65536"], "cpu:3", &dir);
    let n = node(&s, "RowSum");
    assert_eq!(n["partitioned_launches"].as_u64(), Some(0), "{n}");
    let why = n["unpartitioned_because"].as_str().unwrap_or_default();
    assert!(
        why.contains("`((instances along x) - 1) * w + (w - 1) < 4294967296`, which this launch does not meet"),
        "{n}"
    );
}

/// A blocks node whose leaf returns its parameters (`__hpvm__return(2, tmp, bytes_tmp)`, bound
/// out to order the next node) is one launch, split across devices, and its outputs are the
/// host's values; a leaf returning a per-thread value keeps the node off the launch shape.
#[test]
fn a_blocks_node_passes_its_returned_parameters_through() {
    let dir = TempDir::new("partitioned-chain");
    let exe = build(&dir, "tests/programs/chain.c");
    let s = stats(&exe, &["5000", "48", "3"], "cpu:3", &dir);
    let n = node(&s, "Scale");
    assert_eq!(n["unit_launches"], 3, "{n}");
    assert_eq!(n["partitioned_launches"], 3, "{n}");
    assert_eq!(node(&s, "Smooth")["partitioned_launches"], 3);
    let src = dir.join("perthread.c");
    let text = std::fs::read_to_string(root().join("tests/programs/chain.c")).unwrap();
    std::fs::write(&src, text.replace("__hpvm__return(2, tmp, bytes_tmp);", "__hpvm__return(2, tmp, (size_t)i);"))
        .unwrap();
    std::fs::copy(root().join("tests/programs/check.h"), dir.join("check.h")).unwrap();
    let exe = build(&dir, src.to_str().unwrap());
    let s = stats(&exe, &["500", "48", "1"], "cpu:3", &dir);
    assert!(node(&s, "Scale")["unit_launches"].is_null() || node(&s, "Scale")["unit_launches"] == 0, "{s}");
}

#[test]
fn stencil_steady_state_is_all_cache_hits() {
    let dir = TempDir::new("steady");
    let exe = build(&dir, "examples/stencil2d.c");
    let iterations = 12;
    let s = stats(&exe, &["64", "64", &iterations.to_string()], "cpu:4", &dir);
    let n = node(&s, "StencilBlocks");
    assert_eq!(n["unit_launches"], iterations);
    assert_eq!(n["partitioned_launches"], iterations);
    // One plan per direction; then the coherence states repeat every two launches after the
    // first two launches (host-only inputs, then the first written buffer).
    assert_eq!(n["plan_cache"]["misses"], 2, "{n}");
    assert!(n["copy_plan_cache"]["misses"].as_u64().unwrap() <= 4, "{n}");
    assert_eq!(
        n["copy_plan_cache"]["hits"].as_u64().unwrap() + n["copy_plan_cache"]["misses"].as_u64().unwrap(),
        iterations
    );
    // Halo rows moved between neighbours, never the whole grid.
    assert!(n["bytes_device_to_device"].as_u64().unwrap() > 0);
    assert!(n["bytes_host_to_device"].as_u64().unwrap() <= 2 * 64 * 64 * 4 + 8 * 64 * 4, "{n}");
}

/// What the host holds is copied again at a launch only where the host wrote it since the
/// last one (the runtime watches), at every launch with `HPVM_MGPU_HOST_WRITES=all` (HPVM's
/// own rule), never with the program's promise `HPVM_MGPU_HOST_WRITES=none`. `threshold`'s
/// buffers are smaller than a page: compared byte by byte, not watched by page.
#[test]
fn host_copies_are_sent_again_only_where_the_host_wrote() {
    let dir = TempDir::new("hostwrites");
    let exe = build(&dir, "tests/programs/threshold.c");
    let n = 1000u64;
    let sent = |promise: &[(&str, &str)]| {
        let file = dir.path_str("stats.json");
        let _ = std::fs::remove_file(&file);
        let mut env = vec![("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_STATS", &file)];
        env.extend_from_slice(promise);
        run_ok(&exe, &[&n.to_string()], &env);
        let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        node(&s, "Keep")["bytes_host_to_device"].as_u64().unwrap()
    };
    // Two launches: `in` (read) and `out` (may-written, so read first) cross at the first;
    // assumed written, `in`, which the host still holds, crosses again at the second.
    assert_eq!(sent(&[]), 2 * n * 4);
    assert_eq!(sent(&[("HPVM_MGPU_HOST_WRITES", "all")]), 3 * n * 4);
    assert_eq!(sent(&[("HPVM_MGPU_HOST_WRITES", "none")]), 2 * n * 4);
}

/// The host writes a little of a large input between launches, with stores and with `read()`
/// (the kernel writing for it), and changes what it asked back: every launch sees it (the
/// result matches the host's reference and the host-only run bit for bit), and what crosses
/// is what it wrote, not the buffers again. Without writes each byte crosses once.
#[test]
fn host_writes_between_launches_are_seen_and_only_they_cross() {
    let dir = TempDir::new("sparsewrites");
    let exe = build(&dir, "tests/programs/sparsewrites.c");
    let (n, steps) = (300_000u64, 5u64);
    let bytes = n * 4;
    for mode in ["none", "store", "read"] {
        let args = [&n.to_string()[..], &steps.to_string(), mode];
        let host = run_ok(&exe, &args, &[("HPVM_MGPU_DEVICES", "cpu")]);
        let sent = |devices: &str, writes: &str| {
            let file = dir.path_str("stats.json");
            let _ = std::fs::remove_file(&file);
            let env = [
                ("HPVM_MGPU_DEVICES", devices),
                ("HPVM_MGPU_STATS", &file[..]),
                ("HPVM_MGPU_HOST_WRITES", writes),
                ("HPVM_MGPU_PARTITION", "always"),
            ];
            assert_eq!(run_ok(&exe, &args, &env), host, "{mode} on {devices}, host writes {writes}");
            let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
            (node(&s, "Step")["bytes_host_to_device"].as_u64().unwrap(), s)
        };
        for devices in ["cpu:1", "cpu:3"] {
            let (watched, s) = sent(devices, "any");
            let (assumed, _) = sent(devices, "all");
            // `in` and `acc` cross once; assumed written, `in` crosses at every launch, and so
            // do the 16 elements of `acc` asked back.
            let asked = if mode == "store" { (steps - 1) * 16 * 4 } else { 0 };
            assert_eq!(assumed, 2 * bytes + (steps - 1) * bytes + asked, "{mode} on {devices}");
            if !s["host_writes"].as_str().unwrap().starts_with("watched") {
                eprintln!("skipped the watched counts: {}", s["host_writes"]);
                continue;
            }
            match mode {
                "none" => assert_eq!(watched, 2 * bytes, "{mode} on {devices}: {s}"),
                // Per step a run of 2048 elements (8 KiB, three pages at most), three
                // scattered elements and 16 asked-back ones: a page each.
                _ => assert!(
                    watched > 2 * bytes && watched <= 2 * bytes + (steps - 1) * 7 * 4096,
                    "{mode} on {devices}: {watched} bytes crossed"
                ),
            }
        }
    }
}

/// The split policy (`HPVM_MGPU_PARTITION=auto`, the default) on simulated devices: a grid
/// of fewer blocks than one device runs at once never splits, and the statistics say why; a
/// launch long enough to pay splits. Outputs are those of the host run either way.
#[test]
fn the_split_policy_splits_what_pays_and_says_why_not() {
    let dir = TempDir::new("policy");
    let exe = build(&dir, "tests/programs/jacobi1d.c");
    let host = run_ok(&exe, &["64", "32", "50"], &[("HPVM_MGPU_DEVICES", "cpu")]);
    let file = dir.path_str("stats.json");
    // Two devices of four threads each; the grid has two blocks.
    let env = [
        ("HPVM_MGPU_DEVICES", "cpu:2"),
        ("HPVM_MGPU_THREADS", "8"),
        ("HPVM_MGPU_PARTITION", "auto"),
        ("HPVM_MGPU_STATS", &file[..]),
    ];
    assert_eq!(run_ok(&exe, &["64", "32", "50"], &env), host);
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let n = node(&s, "Blocks");
    assert_eq!((n["unit_launches"].as_u64(), n["partitioned_launches"].as_u64()), (Some(50), Some(0)), "{n}");
    assert_eq!(n["split_declined"], 50, "{n}");
    assert_eq!(n["split_declined_because"], "2 blocks: under one wave of one device (4 blocks at once)");
    // Always: the same launches split.
    let always = [("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_THREADS", "8"), ("HPVM_MGPU_STATS", &file[..])];
    assert_eq!(run_ok(&exe, &["64", "32", "50"], &always), host);
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(node(&s, "Blocks")["partitioned_launches"], 50);

    // A stencil of milliseconds per launch splits: the first launch by default, the others
    // because the first measured that it pays (a thread start is tens of microseconds). On a
    // loaded machine (two test binaries at once on two cores) the measurement may say it does
    // not: then the launches it kept whole say why.
    let exe = build(&dir, "examples/stencil2d.c");
    let args = ["1024", "1024", "4"];
    let host = run_ok(&exe, &args, &[("HPVM_MGPU_DEVICES", "cpu")]);
    let env = [
        ("HPVM_MGPU_DEVICES", "cpu:2"),
        ("HPVM_MGPU_THREADS", "2"),
        ("HPVM_MGPU_PARTITION", "auto"),
        ("HPVM_MGPU_STATS", &file[..]),
    ];
    assert_eq!(run_ok(&exe, &args, &env), host);
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let n = node(&s, "StencilBlocks");
    let split = n["partitioned_launches"].as_u64().unwrap();
    assert!(split >= 1, "the first launch splits by default: {n}");
    assert_eq!(split + n["split_declined"].as_u64().unwrap(), 4, "{n}");
    if split < 4 {
        assert!(n["split_declined_because"].as_str().is_some_and(|w| !w.is_empty()), "{n}");
    }
}

/// Planning ahead (the default with GPUs, asked for here on simulated devices): the first
/// launch the policy would split runs whole while ISL's part of its plan is done in the
/// background, and later launches split from what that left. Outputs are the host's.
#[test]
fn a_first_split_is_planned_ahead_while_its_launch_runs_whole() {
    let dir = TempDir::new("ahead");
    let exe = build(&dir, "examples/stencil2d.c");
    let args = ["1024", "1024", "24"];
    let host = run_ok(&exe, &args, &[("HPVM_MGPU_DEVICES", "cpu")]);
    let file = dir.path_str("stats.json");
    let env = [
        ("HPVM_MGPU_DEVICES", "cpu:2"),
        ("HPVM_MGPU_THREADS", "2"),
        ("HPVM_MGPU_PARTITION", "auto"),
        ("HPVM_MGPU_PLAN_AHEAD", "on"),
        ("HPVM_MGPU_STATS", &file[..]),
    ];
    assert_eq!(run_ok(&exe, &args, &env), host);
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let n = node(&s, "StencilBlocks");
    let count = |k: &str| n[k].as_u64().unwrap_or_else(|| panic!("{k} in {n}"));
    assert_eq!(count("unit_launches"), 24, "{n}");
    // The first launch ran whole; the plan ahead (milliseconds) finished long before the last
    // of 24 launches of tens of milliseconds each, which the policy then split (or, on a
    // machine too loaded for a split to pay, declined by measure: never left waiting).
    assert!(count("whole_while_planning") >= 1, "{n}");
    assert!(count("plans_ahead") >= 1, "{n}");
    assert!(count("partitioned_launches") + count("split_declined") >= 1, "{n}");
    assert!(count("partitioned_launches") + count("whole_while_planning") <= 24, "{n}");
    // A bad value is refused by name.
    let out = run_program(&exe, &args, &[("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_PLAN_AHEAD", "maybe")]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("HPVM_MGPU_PLAN_AHEAD=maybe: expected `on` or `off`"), "{}", stderr(&out));
}

/// ISL's work for one partition's plan is bounded (`HPVM_MGPU_ISL_OPERATIONS`): past the
/// bound the launch runs whole, with the host's output, and the statistics say why in the
/// setting's terms; the stencil's plan (10 000 to 30 000 operations a partition) splits
/// under the default.
#[test]
fn a_plan_past_its_isl_bound_runs_whole_and_says_why() {
    let dir = TempDir::new("isl_bound");
    let exe = build(&dir, "examples/stencil2d.c");
    let args = ["256", "256", "3"];
    let host = run_ok(&exe, &args, &[("HPVM_MGPU_DEVICES", "cpu")]);
    let run = |ops: Option<&str>| {
        let file = dir.path_str(&format!("stats-{}.json", ops.unwrap_or("default")));
        let mut env =
            vec![("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_PARTITION", "always"), ("HPVM_MGPU_STATS", &file[..])];
        if let Some(ops) = ops {
            env.push(("HPVM_MGPU_ISL_OPERATIONS", ops));
        }
        assert_eq!(run_ok(&exe, &args, &env), host, "{ops:?}");
        let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        node(&s, "StencilBlocks").clone()
    };
    let tight = run(Some("1000"));
    assert_eq!(tight["partitioned_launches"].as_u64(), Some(0), "{tight}");
    let why = tight["unpartitioned_because"].as_str().unwrap_or_default();
    assert!(
        why.contains("passed the bound of 1000 ISL operations") && why.contains("HPVM_MGPU_ISL_OPERATIONS"),
        "{why}"
    );
    for ops in [None, Some("0")] {
        let n = run(ops);
        assert_eq!(n["partitioned_launches"].as_u64(), Some(3), "{ops:?}: {n}");
    }
    let out = run_program(&exe, &args, &[("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_ISL_OPERATIONS", "lots")]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("HPVM_MGPU_ISL_OPERATIONS=lots: expected a number"), "{}", stderr(&out));
}

/// A kernel whose maps name a scalar that changes at every launch (a Gaussian elimination's
/// pivot row) misses the plan cache each time, and its plans after the first come from the
/// maps' closed forms; the statistics count, per node, the split plans made at a launch, with
/// the first one's time (ISL) and the others' median (issue 40's "plan miss").
#[test]
fn split_plans_made_at_launches_are_counted_and_timed() {
    let dir = TempDir::new("plan_misses");
    let exe = build(&dir, "tests/cuda/eliminate.cu");
    let file = dir.path_str("stats.json");
    let one = run_ok(&exe, &["40"], &[("HPVM_MGPU_DEVICES", "cpu:1")]);
    let env = [("HPVM_MGPU_DEVICES", "cpu:4"), ("HPVM_MGPU_PARTITION", "always"), ("HPVM_MGPU_STATS", &file[..])];
    assert_eq!(run_ok(&exe, &["40"], &env), one);
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert!(s["closed_forms"].as_u64().unwrap_or(0) > 0, "no closed form was made: {s}");
    for name in ["multipliers.blocks", "update.blocks"] {
        let n = node(&s, name);
        let misses = n["split_plan_misses"].as_u64().unwrap();
        // Every launch has a new pivot row: each split one made its plan at the launch.
        assert_eq!(Some(misses), n["partitioned_launches"].as_u64(), "{n}");
        assert!(misses >= 30, "{n}");
        assert!(n["us_first_split_plan_miss"].as_f64().unwrap() > 0.0, "{n}");
        assert!(n["us_split_plan_miss_median"].as_f64().unwrap() > 0.0, "{n}");
    }
}

/// A leaf whose own code faults (reading one row past its input, which ends at a page the
/// program made inaccessible): the process dies of SIGSEGV as it would without the runtime,
/// after naming the node, its file:line, the address and the buffer it is past, with what the
/// program printed before flushed. Where the maps allow (on devices), the strict check stops
/// the launch before it runs.
#[test]
fn a_crash_in_a_leaf_is_named() {
    use std::os::unix::process::ExitStatusExt;
    let dir = TempDir::new("segv");
    let exe = build(&dir, "tests/programs/segv.c");
    let out = run_program(&exe, &["64", "64"], &[("HPVM_MGPU_DEVICES", "cpu")]);
    let (text, err) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.signal(), Some(11), "{text}{err}");
    assert!(text.starts_with("segv: 64 rows of 64"), "the program's output was lost: {text:?}");
    // The faulting line itself, where binutils' addr2line is there to read the line tables.
    if std::path::Path::new("/usr/bin/addr2line").exists() {
        assert!(err.contains("the faulting instruction is at"), "{err}");
        assert!(err.contains("tests/programs/segv.c:24"), "{err}");
    }
    assert!(
        err.contains("hpvm-mgpu: node Rows (tests/programs/segv.c:18) crashed with SIGSEGV")
            && err.contains(": byte 16384 of the tracked buffer 0x")
            && err.contains("(on the host, 16384 bytes), past its end"),
        "{err}"
    );
    let strict = run_program(&exe, &["64", "64"], &[("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_CHECK", "strict")]);
    let err = stderr(&strict);
    assert_eq!(strict.status.code(), Some(1), "{err}");
    assert!(
        err.contains("node Rows (tests/programs/segv.c:18) reads elements 4096..4160 past its end")
            && err.contains("(HPVM_MGPU_CHECK=strict)"),
        "{err}"
    );
}

#[test]
fn fallback_is_visible_and_data_crosses_it() {
    let dir = TempDir::new("fallback");
    let exe = build(&dir, "tests/programs/mixed.c");
    let s = stats(&exe, &["3000", "10"], "cpu:4", &dir);
    assert!(node(&s, "Scale")["partitioned_launches"].as_u64().unwrap() > 0);
    let h = node(&s, "Histogram");
    assert_eq!(h["partitioned_launches"], 0);
    assert!(h["unit_launches"].as_u64().unwrap() > 0, "the fallback runs on a device: {h}");
    assert!(h["unpartitioned_because"].as_str().unwrap().contains("mixed.c:"), "{h}");
    // Data went from the split Scale's devices to the device of the fallback.
    let moved = s["bytes"].as_array().unwrap();
    assert!(moved.iter().any(|t| t["from"] != "host" && t["to"] != "host"), "{moved:?}");
}

#[test]
fn accesses_outside_a_buffer_are_reported_once_and_strict_mode_stops() {
    let dir = TempDir::new("oob");
    let exe = build(&dir, "tests/programs/oob.c");
    let out = run_program(&exe, &["1000"], &[("HPVM_MGPU_DEVICES", "cpu:2")]);
    let err = stderr(&out);
    assert!(out.status.success() && stdout(&out).contains("PASS"), "{err}");
    assert_eq!(err.matches("warning").count(), 1, "{err}");
    assert!(err.contains("node Pairs (tests/programs/oob.c:14) reads elements 1000..1001 past its end"), "{err}");
    let out = run_program(&exe, &["1000"], &[("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_CHECK", "strict")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("error: node Pairs"), "{}", stderr(&out));
}

#[test]
fn bad_settings_are_refused_with_a_message() {
    let dir = TempDir::new("settings");
    let exe = build(&dir, "examples/vecadd.c");
    for (var, value, says) in [
        ("HPVM_MGPU_DEVICES", "cpu:0", "between 1 and"),
        ("HPVM_MGPU_DEVICES", "cpu:1000", "between 1 and"),
        ("HPVM_MGPU_DEVICES", "gpu", "unsupported device choice"),
        ("HPVM_MGPU_THREADS", "999999999", "at most"),
        ("HPVM_MGPU_THREADS", "0", "positive"),
        ("HPVM_MGPU_PARTITION", "maybe", "expected `auto`, `always` or `off`"),
        ("HPVM_MGPU_CHECK", "loose", "expected `warn` or `strict`"),
        ("HPVM_MGPU_PARTITIONS", "0", "1 to 64"),
        ("HPVM_MGPU_WEIGHTS", "1,2,3", "one per device"),
        ("HPVM_MGPU_WEIGHTS", "0,0", "not all zero"),
        ("HPVM_MGPU_ORDER", "1,1", "a permutation"),
        ("HPVM_MGPU_ORDER", "0", "a permutation"),
        ("HPVM_MGPU_PIN", "yes", "expected `on` or `off`"),
        ("HPVM_MGPU_HOST_WRITES", "some", "expected `any`, `all` or `none`"),
        ("HPVM_MGPU_BENCH_REPEAT", "-1", "from 0 to 1000"),
        ("HPVM_MGPU_OPEN_AT", "lots", "expected a size"),
    ] {
        let env = [(var, value), ("HPVM_MGPU_DEVICES", if var == "HPVM_MGPU_DEVICES" { value } else { "cpu:2" })];
        let out = run_program(&exe, &["100"], &env);
        assert_eq!(out.status.code(), Some(1), "{var}={value}");
        assert!(stderr(&out).contains(says), "{var}={value}: {}", stderr(&out));
    }
}

/// A device that cannot hold a buffer stops the program with the buffer's size, the device,
/// and the node parameter it is: no crash, no result printed. The simulated devices allocate
/// from the process's memory, capped here by `ulimit -v` (the host's own buffers fit; four
/// devices' copies do not). `scripts/device/oom.sh` does the same on a GPU that another
/// process has filled.
#[test]
fn device_out_of_memory_names_the_buffer() {
    let dir = TempDir::new("oom");
    let exe = build(&dir, "examples/vecadd.c");
    let out = std::process::Command::new("sh")
        .args(["-c", "ulimit -v 2500000 && exec \"$0\" 50000000", exe.to_str().unwrap()])
        .env("HPVM_MGPU_DEVICES", "cpu:4")
        .env("HPVM_MGPU_THREADS", "2")
        .env("MALLOC_ARENA_MAX", "2")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!stdout(&out).contains("PASS") && !stdout(&out).contains("FAIL"), "{}", stdout(&out));
    assert!(err.contains("cannot allocate the buffer") && err.contains("(200000000 bytes, 190.7 MiB) on sim"), "{err}");
    assert!(err.contains("out of memory") && err.contains("of node `VecAdd`, examples/vecadd.c:30)"), "{err}");
}
