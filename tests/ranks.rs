//! Runs over MPI ranks (`mpirun -n R ./app`, each rank with simulated devices): every example
//! and test program prints, on every rank, what one process prints; ranks that diverge, and a
//! rank that dies, stop the run with a message; a run of one process needs no MPI.
//!
//! Needs OpenMPI's `mpirun` (`scripts/bootstrap` installs it); without it each test says so
//! and passes.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Whether `mpirun` is there; says once when it is not.
fn have_mpirun() -> bool {
    static HAVE: OnceLock<bool> = OnceLock::new();
    *HAVE.get_or_init(|| {
        let ok = Command::new("mpirun").arg("--version").output().is_ok_and(|o| o.status.success());
        if !ok {
            eprintln!("SKIPPED: mpirun not found (scripts/bootstrap installs OpenMPI)");
        }
        ok
    })
}

/// The MPI plugin the executables load under mpirun, built beside the runtime library the
/// tests link with (cargo builds the test targets, not every library's shared object).
fn plugin() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        // Built already and newer than every source it is made of (scripts/test builds it
        // first): not built again from here, where cargo's probe of rustc, beside the other
        // tests' processes, read another process's output as its input on a clean clone.
        if plugin_is_fresh() {
            return;
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = Command::new(cargo).args(["build", "-p", "mpi-ranks"]).current_dir(root()).output().unwrap();
        assert!(out.status.success(), "building the MPI plugin:\n{}", stderr(&out));
    });
}

/// Whether `target/debug/libhpvm_mpi.so` is newer than the sources of the plugin, of the
/// runtime it links and than `Cargo.lock`.
fn plugin_is_fresh() -> bool {
    fn newest(path: &Path) -> std::time::SystemTime {
        let Ok(meta) = std::fs::metadata(path) else { return std::time::SystemTime::UNIX_EPOCH };
        if !meta.is_dir() {
            return meta.modified().unwrap_or(std::time::SystemTime::UNIX_EPOCH);
        }
        std::fs::read_dir(path)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| newest(&e.path()))
            .max()
            .unwrap_or(std::time::SystemTime::UNIX_EPOCH)
    }
    let so = root().join("target/debug/libhpvm_mpi.so");
    let Ok(built) = std::fs::metadata(&so).and_then(|m| m.modified()) else { return false };
    ["mpi-ranks", "runtime/src", "Cargo.lock"].iter().all(|p| newest(&root().join(p)) <= built)
}

fn build(_dir: &TempDir, src: &str) -> PathBuf {
    plugin();
    cached_build(src, &["-O2"])
}

/// The command line of `mpirun` with `ranks` ranks, each with `env`, its output per rank
/// under `out`.
fn mpirun_args(ranks: usize, env: &[(&str, &str)], out: &Path, exe: &Path, args: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = ["mpirun", "--oversubscribe", "-n", &ranks.to_string(), "--output-filename"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.push(out.display().to_string());
    for (k, val) in env {
        v.push("-x".into());
        v.push(format!("{k}={val}"));
    }
    v.push(exe.display().to_string());
    v.extend(args.iter().map(|a| a.to_string()));
    v
}

/// `mpirun` as [`mpirun_args`] says.
fn mpirun(ranks: usize, env: &[(&str, &str)], out: &Path, exe: &Path, args: &[&str]) -> Command {
    let v = mpirun_args(ranks, env, out, exe, args);
    let mut cmd = Command::new(&v[0]);
    cmd.args(&v[1..]);
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1").stdin(Stdio::null());
    cmd
}

/// What a rank printed, but timing lines (`kernel_ms ...`), which no two runs share.
fn comparable(text: &str) -> String {
    text.lines().filter(|l| !l.contains("_ms")).map(|l| format!("{l}\n")).collect()
}

/// Each rank's standard output of a run under `out` (OpenMPI's `--output-filename` layout).
fn rank_outputs(out: &Path, ranks: usize) -> Vec<String> {
    let job = std::fs::read_dir(out).unwrap().next().expect("a job directory").unwrap().path();
    (0..ranks).map(|r| std::fs::read_to_string(job.join(format!("rank.{r}/stdout"))).unwrap_or_default()).collect()
}

/// Runs `exe args` under `ranks` ranks with `env` and checks every rank printed `want`.
fn same_on_every_rank(dir: &TempDir, exe: &Path, args: &[&str], ranks: usize, env: &[(&str, &str)], want: &str) {
    let out = dir.join("ranks-out");
    let _ = std::fs::remove_dir_all(&out);
    let o: Output = mpirun(ranks, env, &out, exe, args).output().unwrap();
    assert!(o.status.success(), "{} {args:?} on {ranks} ranks with {env:?} failed:\n{}", exe.display(), stderr(&o));
    for (r, got) in rank_outputs(&out, ranks).iter().enumerate() {
        assert_eq!(
            comparable(got),
            want,
            "{} {args:?}: rank {r} of {ranks} with {env:?} printed other than one process",
            exe.display()
        );
    }
}

fn one_process(exe: &Path, args: &[&str]) -> String {
    let o = run_program(exe, args, &[("HPVM_MGPU_DEVICES", "cpu:1")]);
    let text = stdout(&o);
    assert!(o.status.success() && text.contains("PASS"), "{} {args:?}:\n{text}{}", exe.display(), stderr(&o));
    comparable(&text)
}

#[test]
fn every_program_on_two_and_three_ranks_prints_what_one_process_prints() {
    if !have_mpirun() {
        return;
    }
    let dir = TempDir::new("ranks");
    let cpu2 = [("HPVM_MGPU_DEVICES", "cpu:2")];
    for (src, sizes) in PROGRAMS {
        let exe = build(&dir, src);
        // The smallest size on 3 ranks (some device of 6 gets no block), the largest on 2: each
        // rank count and each kind of size once per program (an mpirun costs about a second).
        for (args, ranks) in [(sizes[0], 3), (sizes[sizes.len() - 1], 2)] {
            let want = one_process(&exe, args);
            same_on_every_rank(&dir, &exe, args, ranks, &cpu2, &want);
        }
    }
}

/// The runtime's choices that change which copies cross ranks, and when, change nothing.
/// Reductions through atomics split across ranks: each rank's devices update private copies,
/// the partial results of another rank's devices cross to the home device's rank, which
/// combines them; with the home on rank 0 or on rank 1, the results are one process's.
#[test]
fn reductions_combine_across_ranks() {
    if !have_mpirun() {
        return;
    }
    let dir = TempDir::new("ranks-reduce");
    let exe = build(&dir, "tests/cuda/reduce.cu");
    let args = ["20011", "3"];
    let want = one_process(&exe, &args);
    let stats = dir.path_str("stats.json");
    for order in ["0,1,2,3", "3,0,2,1"] {
        let env = [
            ("HPVM_MGPU_DEVICES", "cpu:2"),
            ("HPVM_MGPU_PARTITION", "always"),
            ("HPVM_MGPU_ORDER", order),
            ("HPVM_MGPU_STATS", &stats),
        ];
        same_on_every_rank(&dir, &exe, &args, 2, &env, &want);
        let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        for name in ["histogram.blocks", "sum.blocks", "wide.blocks", "stride_histogram.blocks"] {
            let n = s["nodes"].as_array().unwrap().iter().find(|n| n["node"] == name).unwrap();
            assert!(n["partitioned_launches"].as_u64().unwrap() > 0 && n["max_devices"] == 4, "{order}: {n}");
        }
    }
}

#[test]
fn partitions_weights_and_evictions_across_ranks_change_nothing() {
    if !have_mpirun() {
        return;
    }
    let dir = TempDir::new("ranks-variants");
    let cases: [(&str, &[&str]); 5] = [
        ("examples/stencil2d.c", &["64", "160", "4"]),
        ("examples/pipeline.c", &["--stream", "4", "64", "48"]),
        ("tests/programs/jacobi1d.c", &["1003", "50", "5"]),
        ("tests/programs/transpose.c", &["130", "70"]),
        ("bench/programs/stencil.cu", &["130", "4"]),
    ];
    for (src, args) in cases {
        let exe = build(&dir, src);
        let want = one_process(&exe, args);
        let variants: [&[(&str, &str)]; 3] = [
            &[("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_PARTITIONS", "3")],
            // Device 1 (rank 0's second) gets nothing; the order crosses ranks back and forth.
            &[("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_WEIGHTS", "3,0,1,2"), ("HPVM_MGPU_ORDER", "3,0,2,1")],
            // Eviction under a limit: rounds, and bytes saved to peers or the host.
            &[("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_DEVICE_MEMORY", "48K"), ("HPVM_MGPU_GRANULE", "4K")],
        ];
        for env in variants {
            same_on_every_rank(&dir, &exe, args, 2, env, &want);
        }
    }
    // The limit does evict there (rank 0's statistics): in rounds, to the host and to peers.
    let exe = build(&dir, "tests/programs/transpose.c");
    let stats = dir.path_str("stats.json");
    let env = [
        ("HPVM_MGPU_DEVICES", "cpu:2"),
        ("HPVM_MGPU_DEVICE_MEMORY", "48K"),
        ("HPVM_MGPU_GRANULE", "4K"),
        ("HPVM_MGPU_STATS", &stats),
    ];
    same_on_every_rank(&dir, &exe, &["130", "70"], 2, &env, &one_process(&exe, &["130", "70"]));
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let evicted: u64 =
        s["device_memory"].as_array().unwrap().iter().map(|d| d["granules_evicted"].as_u64().unwrap()).sum();
    assert!(evicted > 0, "nothing evicted: {}", s["device_memory"]);
    assert!(s["nodes"].as_array().unwrap().iter().any(|n| n["max_memory_rounds"].as_u64().unwrap() > 1));
    assert!(s["ranks"]["bytes_received"].as_u64().unwrap() > 0);
}

#[test]
fn ranks_that_launch_differently_stop_with_a_message() {
    if !have_mpirun() {
        return;
    }
    let dir = TempDir::new("ranks-diverge");
    let exe = build(&dir, "examples/vecadd.c");
    // Rank 1 is given another size: its grids differ from rank 0's.
    let out = Command::new("mpirun")
        .args(["--oversubscribe", "-x", "HPVM_MGPU_DEVICES=cpu:2", "-n", "1"])
        .arg(&exe)
        .arg("1000")
        .args([":", "-x", "HPVM_MGPU_DEVICES=cpu:2", "-n", "1"])
        .arg(&exe)
        .arg("2000")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(err.contains("the ranks diverged before launching"), "{err}");
    assert!(err.contains("rank 1 (after 1 launches; rank 0 after 1)"), "{err}");
    assert!(!stdout(&out).contains("PASS"), "a diverged run went on:\n{}", stdout(&out));
}

/// Ranks that run a loop a different number of times stop, each saying so, and nothing hangs:
/// the rank that goes on gathers at a launch while the other gathers at its end.
#[test]
fn ranks_that_loop_differently_stop_with_a_message() {
    if !have_mpirun() {
        return;
    }
    let dir = TempDir::new("ranks-loop");
    let exe = build(&dir, "tests/programs/jacobi1d.c");
    let out = Command::new("timeout")
        .args(["120", "mpirun", "--oversubscribe", "-x", "HPVM_MGPU_DEVICES=cpu:2", "-n", "1"])
        .arg(&exe)
        .args(["200", "16", "3", ":", "-x", "HPVM_MGPU_DEVICES=cpu:2", "-n", "1"])
        .arg(&exe)
        .args(["200", "16", "4"])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_ne!(out.status.code(), Some(124), "the diverged run hung:\n{err}");
    assert!(!out.status.success());
    assert!(err.contains("the ranks diverged"), "{err}");
    assert!(!err.contains("after 18446744"), "a garbage count:\n{err}");
    assert!(!stdout(&out).contains("PASS"), "a diverged run went on:\n{}", stdout(&out));
}

/// Rank `rank`'s process of a run of `exe`, once it has started (by the rank mpirun gives it
/// in its environment).
fn find_rank(exe: &Path, rank: usize) -> Option<u32> {
    let want = format!("OMPI_COMM_WORLD_RANK={rank}");
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
        if !cmd.starts_with(exe.as_os_str().as_encoded_bytes()) {
            continue;
        }
        let Ok(env) = std::fs::read(e.path().join("environ")) else { continue };
        if env.split(|&b| b == 0).any(|v| v == want.as_bytes()) {
            return Some(pid);
        }
    }
    None
}

#[test]
fn a_killed_rank_stops_the_others_with_a_message() {
    if !have_mpirun() {
        return;
    }
    let dir = TempDir::new("ranks-kill");
    // A copy of its own: its ranks are found by their executable's path, and the shared build
    // runs under other tests' mpirun at the same time (whose rank this test must not kill).
    let exe = dir.join("stencil2d-to-kill");
    std::fs::copy(build(&dir, "examples/stencil2d.c"), &exe).unwrap();
    let out = dir.join("kill-out");
    // Long enough to be killed in the middle (minutes alone).
    let child = mpirun(3, &[("HPVM_MGPU_DEVICES", "cpu:2")], &out, &exe, &["1024", "1024", "100000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let victim = loop {
        if let Some(pid) = find_rank(&exe, 1) {
            break pid;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "rank 1 never started");
        std::thread::sleep(Duration::from_millis(50));
    };
    // Inside the iterations, past the start.
    std::thread::sleep(Duration::from_millis(1500));
    let killed = Instant::now();
    assert!(Command::new("kill").args(["-9", &victim.to_string()]).status().unwrap().success());
    let o = child.wait_with_output().unwrap();
    let took = killed.elapsed();
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(took < Duration::from_secs(10), "the other ranks took {took:?} to stop:\n{err}");
    assert!(err.contains("process rank 1"), "mpirun does not name the killed rank:\n{err}");
    for r in [0, 2] {
        assert!(
            err.contains(&format!("rank {r} of 3 stopped: mpirun ended the run because another rank failed")),
            "rank {r} says nothing:\n{err}"
        );
    }
}

#[test]
fn one_process_needs_no_mpi_and_a_missing_plugin_is_named() {
    if !have_mpirun() {
        return;
    }
    let dir = TempDir::new("ranks-plugin");
    let exe = build(&dir, "examples/vecadd.c");
    // Not under mpirun: the plugin is never looked for.
    let o = run_program(&exe, &["100"], &[("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_MPI_PLUGIN", "/nonexistent.so")]);
    assert!(o.status.success() && stdout(&o).contains("PASS"), "{}", stderr(&o));
    // Under mpirun without it: a message saying what to do.
    let out = dir.join("plugin-out");
    let o =
        mpirun(2, &[("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_MPI_PLUGIN", "/nonexistent.so")], &out, &exe, &["100"])
            .output()
            .unwrap();
    assert!(!o.status.success());
    let err: String = (0..2)
        .map(|r| {
            let job = std::fs::read_dir(&out).unwrap().next().unwrap().unwrap().path();
            std::fs::read_to_string(job.join(format!("rank.{r}/stderr"))).unwrap_or_default()
        })
        .collect::<String>()
        + &stderr(&o);
    assert!(err.contains("the MPI plugin `/nonexistent.so` cannot be loaded"), "{err}");
    assert!(err.contains("HPVM_MGPU_RANKS=off"), "{err}");
    // HPVM_MGPU_RANKS=off: each process runs alone, as without mpirun.
    same_on_every_rank(
        &dir,
        &exe,
        &["100"],
        2,
        &[("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_RANKS", "off"), ("HPVM_MGPU_MPI_PLUGIN", "/nonexistent.so")],
        &one_process(&exe, &["100"]),
    );
}

/// Dry-run devices over ranks (what `scripts/bench-ranks` measures): every rank plans for
/// every device and runs, copies and sends nothing, and the run ends.
#[test]
fn dry_run_devices_over_ranks_plan_and_finish() {
    if !have_mpirun() {
        return;
    }
    let dir = TempDir::new("ranks-dry");
    let exe = build(&dir, "examples/stencil2d.c");
    let stats = dir.path_str("stats.json");
    let out = dir.join("dry-out");
    let o = Command::new("timeout")
        .arg("120")
        .args(mpirun_args(
            3,
            &[("HPVM_MGPU_DEVICES", "dry:2"), ("HPVM_MGPU_STATS", &stats)],
            &out,
            &exe,
            &["64", "64", "5"],
        ))
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    // Nothing ran, so the program's own check fails (status 1); what must not happen is a
    // hang (status 124 from `timeout`) or a crash.
    assert_ne!(o.status.code(), Some(124), "the ranks hung:\n{}", stderr(&o));
    for r in 0..3 {
        let path = if r == 0 { stats.clone() } else { format!("{stats}.rank{r}") };
        let s: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("rank {r} wrote no statistics ({e}):\n{}", stderr(&o))),
        )
        .unwrap();
        assert_eq!(s["device_count"], 6);
        assert_eq!(s["ranks"]["rank"], r);
        assert_eq!(s["ranks"]["agreements"], 5);
        assert_eq!(s["ranks"]["bytes_sent"], 0);
    }
}

/// Host writes between launches are watched under ranks too: the ranks agree on what their
/// watches saw, so only what the host wrote is sent to the devices again.
#[test]
fn host_writes_are_watched_and_agreed_across_ranks() {
    if !have_mpirun() {
        return;
    }
    let dir = TempDir::new("ranks-hostwrites");
    // The masses are read at every step and never written: watched, they cross once.
    let exe = build(&dir, "examples/nbody.c");
    let args = ["3000", "5"];
    let want = one_process(&exe, &args);
    let sent = |writes: &str| -> u64 {
        let stats = dir.path_str(&format!("stats-{writes}.json"));
        let env = [("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_HOST_WRITES", writes), ("HPVM_MGPU_STATS", &stats)];
        same_on_every_rank(&dir, &exe, &args, 2, &env, &want);
        let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        if writes == "any" {
            assert!(s["host_writes"].as_str().unwrap().starts_with("watched"), "{}", s["host_writes"]);
            assert!(s["host_write_scans"].as_u64().unwrap() > 0);
        }
        s["bytes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["from"] == "host")
            .map(|b| b["bytes"].as_u64().unwrap())
            .sum()
    };
    let (watched, assumed) = (sent("any"), sent("all"));
    assert!(watched < assumed, "watching sent {watched} bytes from the host, assuming {assumed}");
}

/// A host store racing a kernel into managed memory stops the run under ranks too, naming the
/// store's line, whichever rank's device holds the bytes; with partitions, the same; stores
/// beside the kernel's bytes go on and every rank prints the one-process result.
#[test]
fn racing_stores_stop_every_rank_at_their_line() {
    if !have_mpirun() {
        return;
    }
    let dir = TempDir::new("ranks-managed-race");
    let exe = build(&dir, "tests/inputs/cuda/managed_race_pages.cu");
    let want = one_process(&exe, &["apart"]);
    for partitions in ["1", "3"] {
        let env = [("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_PARTITIONS", partitions)];
        same_on_every_rank(&dir, &exe, &["apart"], 2, &env, &want);
        let out = dir.join("ranks-race");
        let _ = std::fs::remove_dir_all(&out);
        let o = mpirun(2, &env, &out, &exe, &["race"]).output().unwrap();
        let err = stderr(&o);
        assert!(!o.status.success(), "partitions {partitions}: {err}");
        assert!(
            err.contains("the host's store at tests/inputs/cuda/managed_race_pages.cu:33 wrote byte 4000"),
            "partitions {partitions}: {err}"
        );
        assert!(rank_outputs(&out, 2).iter().all(|o| o.is_empty()), "partitions {partitions}: a rank printed a result");
    }
}
