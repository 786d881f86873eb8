//! `hpvm-mgpu build`: every example built and run on the CPU, the driver's flags, and what
//! happens on errors (location, exit status, no leftovers, outputs never half written).

mod common;
use common::*;

#[test]
fn every_example_passes_at_o0_and_o2_with_1_and_4_threads() {
    let dir = TempDir::new("examples");
    for e in examples() {
        let stem = e.trim_end_matches(".c");
        let mut sums = Vec::new();
        for opt in ["-O0", "-O2"] {
            let exe = dir.join(&format!("{stem}{opt}"));
            let out = hpvm_mgpu(&["build", opt, &format!("examples/{e}"), "-o", exe.to_str().unwrap()]);
            assert!(out.status.success(), "build {opt} examples/{e}:\n{}", stderr(&out));
            for threads in ["1", "4"] {
                let run = run_program(&exe, &[], &[("HPVM_MGPU_THREADS", threads)]);
                let text = stdout(&run);
                assert!(
                    run.status.success() && text.contains("PASS"),
                    "{e} {opt} with {threads} threads:\n{text}{}",
                    stderr(&run)
                );
                sums.push((opt, threads, checksum(&text).unwrap_or_else(|| panic!("{e} prints no checksum"))));
            }
        }
        // Deterministic references: bit-identical results whatever the threads and -O level.
        assert!(sums.iter().all(|s| s.2 == sums[0].2), "{e}: results differ: {sums:?}");
    }
}

#[test]
fn pipeline_streams_frames() {
    let dir = TempDir::new("stream");
    let exe = dir.join("pipeline");
    let out = hpvm_mgpu(&["build", "-O2", "examples/pipeline.c", "-o", exe.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    for threads in ["1", "3"] {
        let run = run_program(&exe, &["--stream", "6", "40", "24"], &[("HPVM_MGPU_THREADS", threads)]);
        assert!(run.status.success(), "{}{}", stdout(&run), stderr(&run));
        assert!(stdout(&run).contains("6 frames streamed: PASS"), "{}", stdout(&run));
    }
}

#[test]
fn stats_report_names_every_node() {
    let dir = TempDir::new("stats");
    let exe = dir.join("matmul");
    assert!(hpvm_mgpu(&["build", "examples/matmul.c", "-o", exe.to_str().unwrap()]).status.success());
    let run = run_program(&exe, &["32"], &[("HPVM_MGPU_STATS", "1")]);
    let err = stderr(&run);
    assert!(run.status.success());
    assert!(err.contains("hpvm-mgpu stats: 1 launches"), "{err}");
    // 32 / 16 = 2 x 2 blocks of 16 x 16 threads.
    assert!(
        err.lines().any(|l| l.trim_start().starts_with("MatMulThread") && l.contains(" 4 ") && l.contains("1024")),
        "{err}"
    );
    assert!(err.contains("bytes moved"), "{err}");
}

#[test]
fn objects_then_link_and_several_sources() {
    let dir = TempDir::new("objects");
    let obj = dir.path_str("vecadd.o");
    let out = hpvm_mgpu(&["build", "-c", "-O1", "examples/vecadd.c", "-o", &obj]);
    assert!(out.status.success(), "{}", stderr(&out));
    let exe = dir.path_str("vecadd");
    let out = hpvm_mgpu(&["build", &obj, "-o", &exe]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&run_program(std::path::Path::new(&exe), &["1000"], &[])).contains("PASS"));

    // An HPVM file and a plain C file, with -I, -D, -L and -l reaching the tools.
    let exe = dir.path_str("multi");
    let out = hpvm_mgpu(&[
        "build",
        "-O2",
        "-I",
        "tests/inputs/multi",
        "-DFACTOR=3",
        "tests/inputs/multi/main.c",
        "tests/inputs/multi/helper.c",
        "-L",
        "/usr/lib",
        "-lm",
        "-o",
        &exe,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = run_program(std::path::Path::new(&exe), &[], &[]);
    assert!(stdout(&run).contains("multi: PASS"), "{}{}", stdout(&run), stderr(&run));
}

#[test]
fn emit_llvm_shows_the_lowered_program() {
    let dir = TempDir::new("emit");
    let ll = dir.path_str("vecadd.ll");
    let out = hpvm_mgpu(&["build", "--emit-llvm", "examples/vecadd.c", "-o", &ll]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ir = std::fs::read_to_string(&ll).unwrap();
    assert!(ir.contains("@hpvm_rt_launch("), "launch not lowered");
    assert!(ir.contains("hpvm.entry.VecAdd"), "no entry point for the leaf");
    assert!(!ir.contains("@VecAddRoot("), "internal node function left in the module");
    assert!(!ir.contains("call ptr (i32, ...) @__hpvm__launch"), "HPVM launch left in the module");
}

#[test]
fn verbose_shows_each_tool_invocation() {
    let dir = TempDir::new("verbose");
    let out = hpvm_mgpu(&["build", "-v", "-O2", "examples/vecadd.c", "-o", &dir.path_str("v")]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("clang") && err.contains("-emit-llvm"), "{err}");
    assert!(err.contains("default<O2>"), "{err}");
    assert!(err.contains("libhpvm_runtime"), "{err}");
}

/// Runs a failing build with its own TMPDIR and an existing output file; checks the exit
/// status, the message, that the output is untouched and nothing is left behind.
fn failing_build(input: &str, expect: &[&str]) {
    let dir = TempDir::new("fail");
    let tmp = TempDir::new("fail-tmp");
    let out_path = dir.join("app");
    std::fs::write(&out_path, "precious").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hpvm-mgpu"))
        .args(["build", input, "-o", out_path.to_str().unwrap()])
        .current_dir(root())
        .env("TMPDIR", &tmp.0)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{input}: {err}");
    for e in expect {
        assert!(err.contains(e), "{input}: expected {e:?} in:\n{err}");
    }
    assert_eq!(std::fs::read_to_string(&out_path).unwrap(), "precious", "{input}: output overwritten");
    let left: Vec<_> = std::fs::read_dir(&tmp.0).unwrap().collect();
    assert!(left.is_empty(), "{input}: temporary files left: {left:?}");
    let beside: Vec<_> = std::fs::read_dir(&dir.0).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(beside.len(), 1, "{input}: files left beside the output: {beside:?}");
}

/// A build stopped by a signal (a timeout's or an interrupted `make`'s SIGTERM) at any point
/// leaves nothing in the temporary directory and nothing beside the output, which it does
/// not touch, and ends by that signal, as `make` expects. `None`: the signal comes as the
/// link begins (its directory appears beside the output), when the linker, a grandchild,
/// writes files of its own there.
#[test]
fn a_build_stopped_by_a_signal_leaves_nothing_behind() {
    use std::os::unix::process::ExitStatusExt;
    let mut stopped = 0;
    for delay_ms in [Some(150), Some(500), Some(900), Some(1400), None] {
        let dir = TempDir::new("signal");
        let tmp = TempDir::new("signal-tmp");
        let out_path = dir.join("app");
        std::fs::write(&out_path, "precious").unwrap();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hpvm-mgpu"))
            .args(["build", "-O2", "tests/cuda/constant_bank.cu", "-o", out_path.to_str().unwrap()])
            .current_dir(root())
            .env("TMPDIR", &tmp.0)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        match delay_ms {
            Some(ms) => std::thread::sleep(std::time::Duration::from_millis(ms)),
            None => {
                let began = std::time::Instant::now();
                while std::fs::read_dir(&dir.0).unwrap().count() < 2 && began.elapsed().as_secs() < 120 {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                // The linker under way.
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        // SAFETY: our child, not yet waited for.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let status = child.wait().unwrap();
        if status.success() {
            assert!(delay_ms.is_some(), "the build finished before the signal reached its link");
            continue;
        }
        stopped += 1;
        assert_eq!(status.signal(), Some(libc::SIGTERM), "after {delay_ms:?} ms: {status:?}");
        assert_eq!(std::fs::read_to_string(&out_path).unwrap(), "precious", "after {delay_ms:?} ms");
        // Its compilers' children, which the signal did not reach, may still be finishing.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let left: Vec<_> = std::fs::read_dir(&tmp.0).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(left.is_empty(), "after {delay_ms:?} ms: temporary files left: {left:?}");
        let beside: Vec<_> = std::fs::read_dir(&dir.0).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(beside.len(), 1, "after {delay_ms:?} ms: files left beside the output: {beside:?}");
    }
    assert!(stopped > 0, "every build finished before its signal");
}

#[test]
fn compile_error_gives_location_and_keeps_output() {
    failing_build("tests/inputs/syntax-error.c", &["tests/inputs/syntax-error.c:4:23: error:", "compilation failed"]);
}

#[test]
fn link_error_gives_location_and_keeps_output() {
    // Whichever linker links (LLVM's where installed), the message reads as GNU ld's.
    failing_build(
        "tests/inputs/link-error.c",
        &["tests/inputs/link-error.c:8: undefined reference to `missing_function'", "linking"],
    );
}

#[test]
fn verifier_error_gives_location_and_keeps_output() {
    failing_build("tests/bad/recursion.c", &["tests/bad/recursion.c:11:16: error: recursion"]);
}

#[test]
fn build_without_inputs_or_with_missing_file() {
    let out = hpvm_mgpu(&["build", "tests/inputs/none.c", "-o", "/dev/null"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("tests/inputs/none.c: no such file"), "{}", stderr(&out));
    let out = hpvm_mgpu(&["build"]);
    assert_ne!(out.status.code(), Some(0));
}

/// As with clang, each `-x` applies to the inputs after it.
#[test]
fn x_applies_to_the_inputs_after_it() {
    let dir = TempDir::new("x-positional");
    let cxx = dir.join("main.txt");
    std::fs::write(
        &cxx,
        "extern \"C\" int helper(void);\n#include <cstdio>\nint main() { std::printf(\"%d\\n\", helper() + 1); }\n",
    )
    .unwrap();
    let c = dir.join("helper.txt");
    // `int class` is C, and not C++.
    std::fs::write(&c, "int helper(void) { int class = 41; return class; }\n").unwrap();
    let exe = dir.join("mixed");
    let (cxx, c, exe) = (cxx.to_str().unwrap(), c.to_str().unwrap(), exe.to_str().unwrap());
    let out = hpvm_mgpu(&["build", "--no-gpu", "-x", "c++", cxx, "-x", "c", c, "-o", exe]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&run_program(std::path::Path::new(exe), &[], &[])), "42\n");
    // One `-x c++` for both: the C file is not C++.
    let out = hpvm_mgpu(&["build", "--no-gpu", "-x", "c++", cxx, c, "-o", exe]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}

/// As gcc does, an output that is one of the inputs is refused, and the input is untouched.
#[test]
fn an_output_that_is_an_input_is_refused() {
    let dir = TempDir::new("output-is-input");
    let src = dir.join("vecadd.c");
    std::fs::copy("examples/vecadd.c", &src).unwrap();
    let before = std::fs::read(&src).unwrap();
    for args in [vec!["--no-gpu", "-o"], vec!["-c", "-o"], vec!["--emit-llvm", "-o"]] {
        let mut argv = vec!["build", src.to_str().unwrap()];
        argv.extend(args);
        argv.push(src.to_str().unwrap());
        let out = hpvm_mgpu(&argv);
        assert_eq!(out.status.code(), Some(1), "{argv:?}");
        assert!(stderr(&out).contains("is also an input"), "{}", stderr(&out));
        assert_eq!(std::fs::read(&src).unwrap(), before, "{argv:?} changed the source");
    }
}

/// `-o /dev/null` (configure scripts, Makefiles' probes) and `-o` a pipe are written into, as
/// gcc and nvcc write them. Renaming a complete file over them, as regular outputs are
/// replaced, would swap a root user's /dev/null for our output (every later reader of
/// /dev/null then read it). A pipe needs no privileges, so it stands in for the device.
#[test]
fn an_output_that_is_a_device_or_pipe_is_written_into() {
    use std::os::unix::fs::FileTypeExt;
    let dir = TempDir::new("output-is-pipe");
    let fifo = dir.join("out.fifo");
    for args in [vec!["build", "-c", "examples/vecadd.c"], vec!["analyze", "examples/vecadd.c"]] {
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap().len())
        };
        let mut argv = args.clone();
        argv.extend(["-o", fifo.to_str().unwrap()]);
        let out = hpvm_mgpu(&argv);
        assert!(out.status.success(), "{argv:?}: {}", stderr(&out));
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo(), "{argv:?} replaced the pipe");
        assert!(reader.join().unwrap() > 0, "{argv:?} wrote nothing into the pipe");
        std::fs::remove_file(&fifo).unwrap();
    }
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.starts_with(".out.fifo.tmp-"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[test]
fn runtime_errors_name_the_node() {
    // The count `n - 10` is only known at run time, where it is negative: the runtime stops
    // with the node's name and location instead of running a nonsense grid.
    let dir = TempDir::new("rt-error");
    let exe = dir.path_str("neg");
    let out = hpvm_mgpu(&["build", "tests/inputs/negative-count.c", "-o", &exe]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = run_program(std::path::Path::new(&exe), &[], &[]);
    assert_eq!(run.status.code(), Some(1));
    assert!(stderr(&run).contains("node Leaf (tests/inputs/negative-count.c:"), "{}", stderr(&run));
    assert!(stderr(&run).contains("instance count -4"), "{}", stderr(&run));
}

/// A crash inside the compiler (an abort of Polly, ISL or LLVM; injected here) never takes
/// the tool down: in the analysis, the program still builds, its nodes whole, with a warning
/// naming the file; anywhere else, an error naming the file, exit status 1, no output and no
/// temporary files left behind.
#[test]
fn a_crash_inside_the_compiler_is_survived_and_named() {
    let dir = TempDir::new("crash");
    let exe = dir.path_str("vecadd");
    let out =
        hpvm_mgpu_env(&["build", "-O1", "examples/vecadd.c", "-o", &exe], &[("HPVM_MGPU_INJECT_CRASH", "analysis")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("examples/vecadd.c: warning: the access analysis crashed (SIGABRT"),
        "{}",
        stderr(&out)
    );
    let run = run_program(std::path::Path::new(&exe), &["100"], &[("HPVM_MGPU_DEVICES", "cpu:2")]);
    assert!(run.status.success() && stdout(&run).contains("PASS"), "{}", stderr(&run));

    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let exe = dir.path_str("never");
    let out = hpvm_mgpu_env(
        &["build", "-O1", "examples/vecadd.c", "-o", &exe],
        &[("HPVM_MGPU_INJECT_CRASH", "compile"), ("TMPDIR", tmp.to_str().unwrap())],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("examples/vecadd.c: error: hpvm-mgpu crashed on this file (SIGABRT"),
        "{}",
        stderr(&out)
    );
    assert!(!exists(&exe));
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0, "temporary files were left behind");

    let out = hpvm_mgpu_env(&["analyze", "examples/vecadd.c"], &[("HPVM_MGPU_INJECT_CRASH", "analysis")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("hpvm-mgpu crashed on this file"), "{}", stderr(&out));
}

/// Polly aborting on a node's prepared loops (as Polly 19's affinator does on HeCBench's
/// pathfinder and grep; injected here) costs nothing: the node is analysed again with its
/// loops as written, silently, and splits; `analyze` does the same.
#[test]
fn a_node_polly_aborted_on_is_analysed_again_carefully() {
    let dir = TempDir::new("careful");
    let exe = dir.path_str("vecadd");
    let env = [("HPVM_MGPU_INJECT_CRASH", "polly-prepared")];
    let out = hpvm_mgpu_env(&["build", "-O1", "examples/vecadd.c", "-o", &exe], &env);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("crashed"), "{}", stderr(&out));
    let run = run_program(
        std::path::Path::new(&exe),
        &["1000"],
        &[("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_STATS", "1"), ("HPVM_MGPU_PARTITION", "always")],
    );
    assert!(run.status.success() && stdout(&run).contains("PASS"), "{}", stderr(&run));
    assert!(stderr(&run).contains("partitioned (up to 2 devices)"), "{}", stderr(&run));
    let db = dir.path_str("vecadd.json");
    let out = hpvm_mgpu_env(&["analyze", "examples/vecadd.c", "-o", &db], &env);
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = hpvm_mgpu(&["db", "show", &db]);
    assert!(stdout(&shown).contains("partitionable"), "{}", stdout(&shown));
    assert!(!stdout(&shown).contains("not partitionable"), "{}", stdout(&shown));
}

/// An analysis that stops making progress is stopped after `HPVM_MGPU_ANALYSIS_SECONDS`: the
/// program builds, its nodes whole, with a warning saying so; `analyze` says so and fails.
#[test]
fn an_analysis_that_stalls_is_stopped_and_the_build_goes_on() {
    let dir = TempDir::new("stall");
    let exe = dir.path_str("vecadd");
    let env = [("HPVM_MGPU_INJECT_CRASH", "analysis-stall"), ("HPVM_MGPU_ANALYSIS_SECONDS", "1")];
    let started = std::time::Instant::now();
    let out = hpvm_mgpu_env(&["build", "-O1", "examples/vecadd.c", "-o", &exe], &env);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "the stall was not stopped");
    assert!(
        stderr(&out).contains("examples/vecadd.c: warning: the access analysis did not finish in 1 s"),
        "{}",
        stderr(&out)
    );
    // Its nodes say why they run whole, naming the file, not the database.
    let stats = dir.path_str("stats.json");
    let run = run_program(
        std::path::Path::new(&exe),
        &["100"],
        &[("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_STATS", &stats), ("HPVM_MGPU_PARTITION", "always")],
    );
    assert!(run.status.success() && stdout(&run).contains("PASS"), "{}", stderr(&run));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let launched: Vec<&serde_json::Value> =
        report["nodes"].as_array().unwrap().iter().filter(|n| n["unit_launches"].as_u64() > Some(0)).collect();
    assert!(!launched.is_empty(), "{report}");
    for n in launched {
        let why = n["unpartitioned_because"].as_str().unwrap_or_default();
        assert!(why.starts_with("the build made no access analysis of examples/vecadd.c"), "{n}");
    }
    let out = hpvm_mgpu_env(&["analyze", "examples/vecadd.c"], &env);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("the access analysis did not finish in 1 s"), "{}", stderr(&out));
}

/// A stall on one node of a file costs that node alone: the nodes analysed before it are
/// kept (not analysed again), the ones after it are analysed, and it runs whole, named.
#[test]
fn an_analysis_that_stalls_on_one_node_keeps_the_others() {
    let dir = TempDir::new("stall-node");
    let exe = dir.path_str("kernels");
    let env = [("HPVM_MGPU_INJECT_CRASH", "analysis-stall-node:tiled_matmul"), ("HPVM_MGPU_ANALYSIS_SECONDS", "2")];
    let out = hpvm_mgpu_env(&["build", "tests/cuda/kernels.cu", "-o", &exe], &env);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning: the access analysis of node `tiled_matmul`") && err.contains("did not finish in 2 s"),
        "{err}"
    );
    let stats = dir.path_str("stats.json");
    let run = run_program(
        std::path::Path::new(&exe),
        &["1000"],
        &[("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_STATS", &stats), ("HPVM_MGPU_PARTITION", "always")],
    );
    assert!(run.status.success(), "{}", stderr(&run));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let analysis = |name: &str| {
        let node =
            report["nodes"].as_array().unwrap().iter().find(|n| n["node"] == name).unwrap_or_else(|| panic!("{name}"));
        node["analysis"].as_str().unwrap_or_default().to_string()
    };
    // Before the stalled node and after it: analysed, and split.
    for name in ["stencil2d.blocks", "reverse_block.blocks", "softplus.blocks"] {
        assert!(analysis(name).starts_with("partitionable"), "{name}: {}", analysis(name));
    }
    let why =
        report["nodes"].as_array().unwrap().iter().find(|n| n["node"] == "tiled_matmul.blocks").unwrap().to_string();
    assert!(why.contains("did not finish in its time"), "{why}");
}

/// A stall while the whole file's code is prepared, before any node (HeCBench's sortKV and
/// merkle), costs no node: the nodes are analysed one by one, each child preparing only its
/// own code, and split; one whose own analysis stalls runs whole, named. `analyze` does the
/// same and reports every node.
#[test]
fn an_analysis_that_stalls_preparing_the_file_goes_node_by_node() {
    let dir = TempDir::new("stall-prepare");
    let exe = dir.path_str("kernels");
    let env = [
        ("HPVM_MGPU_INJECT_CRASH", "analysis-stall-prepare,analysis-stall-node:tiled_matmul"),
        ("HPVM_MGPU_ANALYSIS_SECONDS", "10"),
    ];
    let out = hpvm_mgpu_env(&["build", "tests/cuda/kernels.cu", "-o", &exe], &env);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("while preparing the file's code; its nodes are analysed one by one"), "{err}");
    assert!(err.contains("warning: the access analysis of `tiled_matmul` did not finish in 10 s"), "{err}");
    let stats = dir.path_str("stats.json");
    let run = run_program(
        std::path::Path::new(&exe),
        &["1000"],
        &[("HPVM_MGPU_DEVICES", "cpu:2"), ("HPVM_MGPU_STATS", &stats), ("HPVM_MGPU_PARTITION", "always")],
    );
    assert!(run.status.success() && stdout(&run).contains("PASS"), "{}", stderr(&run));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let node = |name: &str| {
        report["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["node"] == name)
            .unwrap_or_else(|| panic!("{name}"))
            .clone()
    };
    for name in ["stencil2d.blocks", "reverse_block.blocks", "histogram.blocks", "softplus.blocks"] {
        let n = node(name);
        assert!(n["analysis"].as_str().unwrap_or_default().starts_with("partitionable"), "{n}");
        assert_eq!(n["max_devices"], 2, "{n}");
    }
    let slow = node("tiled_matmul.blocks");
    assert!(
        slow["unpartitioned_because"].as_str().unwrap_or_default().contains("did not finish in its time"),
        "{slow}"
    );
    let out = hpvm_mgpu_env(&["analyze", "tests/cuda/kernels.cu"], &env);
    let (err, report) = (stderr(&out), stdout(&out));
    assert!(out.status.success(), "{err}");
    assert!(err.contains("while preparing the file's code; its nodes are analysed one by one"), "{err}");
    assert!(report.contains("node stencil2d (tests/cuda/kernels.cu:37): partitionable"), "{report}");
    assert!(report.contains("node tiled_matmul (tests/cuda/kernels.cu:52): not partitionable"), "{report}");
    assert!(report.contains("did not finish in its time"), "{report}");
}

/// Host files build as nvcc's host compiler builds them: old-style C (implicit declarations,
/// implicit int) with warnings, C given a C++ `-std`, and C++ including CUDA's headers
/// without an `-I`.
#[test]
fn host_files_build_as_nvcc_builds_them() {
    let dir = TempDir::new("host-files");
    let exe = dir.path_str("old");
    let out = hpvm_mgpu(&["build", "tests/inputs/host/old_style.c", "-o", &exe]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("warning: call to undeclared function 'helper'"), "{}", stderr(&out));
    let run = run_program(std::path::Path::new(&exe), &[], &[]);
    assert_eq!(stdout(&run), "6\n");
    // A Makefile's C++ dialect reaching a `.c` file: a warning, and C, as gcc does.
    let out = hpvm_mgpu(&["build", "-std=c++17", "tests/inputs/host/old_style.c", "-o", &exe]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("warning: -std=c++17 is for C++; compiled as C"), "{}", stderr(&out));
    let exe = dir.path_str("host");
    let out = hpvm_mgpu(&["build", "tests/inputs/host/cuda_host.cpp", "-o", &exe]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = run_program(std::path::Path::new(&exe), &[], &[("HPVM_MGPU_DEVICES", "cpu:2")]);
    assert!(run.status.success(), "{}", stderr(&run));
    assert_eq!(stdout(&run), "devices 1\n");
}
