//! Malformed programs: each file in `tests/bad/` breaks one verifier rule, named by an
//! `expect-error: RULE` comment on the line that must be reported. Plus inputs that are not
//! HPVM programs at all.

mod common;
use common::*;

#[test]
fn every_bad_program_is_rejected_at_its_line() {
    let dir = root().join("tests/bad");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .collect();
    files.sort();
    assert!(files.len() >= 15, "only {} bad programs", files.len());
    let mut rules = std::collections::BTreeSet::new();
    for path in files {
        let rel = format!("tests/bad/{}", path.file_name().unwrap().to_string_lossy());
        let text = std::fs::read_to_string(&path).unwrap();
        let (line, rule) = text
            .lines()
            .enumerate()
            .find_map(|(i, l)| Some((i + 1, l.split("expect-error: ").nth(1)?.split_whitespace().next()?.to_string())))
            .unwrap_or_else(|| panic!("{rel} has no expect-error marker"));
        rules.insert(rule.clone());
        let out = hpvm_mgpu(&["inspect", &rel]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{rel}: expected exit code 1\n{err}");
        let want_loc = format!("{rel}:{line}:");
        assert!(
            err.lines().any(|l| l.starts_with(&want_loc) && l.ends_with(&format!("[{rule}]"))),
            "{rel}: expected an error [{rule}] at {want_loc}, got:\n{err}"
        );
        assert!(!err.contains("panicked"), "{rel}: panic\n{err}");
        assert!(stdout(&out).is_empty(), "{rel}: printed a graph despite errors");
    }
    assert!(rules.len() >= 15, "the corpus covers only {} rules: {rules:?}", rules.len());
}

#[test]
fn missing_file() {
    let out = hpvm_mgpu(&["inspect", "tests/inputs/no-such-file.c"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("tests/inputs/no-such-file.c: no such file"), "{}", stderr(&out));
}

#[test]
fn c_file_without_hpvm() {
    let out = hpvm_mgpu(&["inspect", "tests/inputs/plain.c"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("tests/inputs/plain.c: no HPVM dataflow graph"), "{}", stderr(&out));
}

#[test]
fn c_syntax_error_shows_the_compiler_location() {
    let out = hpvm_mgpu(&["inspect", "tests/inputs/syntax-error.c"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains("tests/inputs/syntax-error.c:4:23: error:"), "{err}");
    assert!(err.contains("compilation failed"), "{err}");
}

#[test]
fn unknown_input_kind() {
    let out = hpvm_mgpu(&["inspect", "Cargo.toml"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("unknown kind of input"), "{}", stderr(&out));
}

#[test]
fn invalid_ir_file() {
    let out = hpvm_mgpu(&["inspect", "tests/inputs/broken.ll"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("tests/inputs/broken.ll: not valid LLVM IR"), "{}", stderr(&out));
}

/// In C++ the verifier names a node as the user wrote it (`Leaf`, not `_Z4LeafPfml`), and a
/// parameter a lambda captures by reference (kept in its stack slot at -O0) is still the
/// parameter `__hpvm__attributes` names.
#[test]
fn cxx_attributes_errors_name_the_node_as_written() {
    let dir = TempDir::new("bad-cxx-attributes");
    let text = std::fs::read_to_string(root().join("tests/bad/attributes.c")).unwrap();
    let cxx = text
        .replace(
            "__hpvm__hint(DEVICE);",
            "__hpvm__hint(hpvm::DEVICE);\n  auto at = [&](long k) -> float & { return a[k]; };",
        )
        .replace("a[i] *= 2.0f;", "at(i) *= 2.0f;")
        .replace("__hpvm__hint(CPU_TARGET);", "__hpvm__hint(hpvm::CPU_TARGET);")
        .replace("calloc(n, sizeof(float))", "static_cast<float *>(calloc(n, sizeof(float)))");
    let bad = dir.join("attributes.cc");
    std::fs::write(&bad, &cxx).unwrap();
    let out = hpvm_mgpu(&["inspect", bad.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("__hpvm__attributes in `Leaf` names `n`, which is not a pointer parameter of `Leaf`"),
        "{err}"
    );
    assert_eq!(err.matches("[attributes]").count(), 1, "only the scalar is wrong: {err}");
    // Without the scalar, the lambda's capture of `a` is no error.
    let good = dir.join("good.cc");
    std::fs::write(&good, cxx.replace("__hpvm__attributes(2, a, n, 1, a);", "__hpvm__attributes(1, a, 1, a);"))
        .unwrap();
    let out = hpvm_mgpu(&["inspect", good.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Nothing the user owns is overwritten: `analyze -o` naming its own input is refused, and
/// the input is left as it was.
#[test]
fn analyze_refuses_to_overwrite_its_input() {
    let dir = TempDir::new("analyze-self");
    let src = dir.join("vecadd.c");
    std::fs::copy("examples/vecadd.c", &src).unwrap();
    let before = std::fs::read(&src).unwrap();
    let out = hpvm_mgpu(&["analyze", src.to_str().unwrap(), "-o", src.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("refusing to overwrite"), "{}", stderr(&out));
    assert_eq!(std::fs::read(&src).unwrap(), before);
}

/// A database given to `build --db` whose maps ISL cannot read is refused at the build,
/// naming the node, its line and the argument.
#[test]
fn a_database_with_a_malformed_map_is_refused_at_build() {
    let dir = TempDir::new("bad-map");
    let db = dir.path_str("vecadd.json");
    let out = hpvm_mgpu(&["analyze", "examples/vecadd.c", "-o", &db]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&db).unwrap().replacen("\"read_map\": \"", "\"read_map\": \"garbage {", 1);
    std::fs::write(&db, text).unwrap();
    let exe = dir.path_str("vecadd");
    let out = hpvm_mgpu(&["build", "--db", &db, "examples/vecadd.c", "-o", &exe]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("node `VecAdd` (examples/vecadd.c:30): the read map of `a`"), "{err}");
    assert!(!exists(&exe));
}

/// The statistics go only where they may: a word meant as "on" is not a file name, and a file
/// that is not a statistics report is never replaced.
#[test]
fn statistics_never_overwrite_a_users_file() {
    let dir = TempDir::new("stats-safe");
    let exe = dir.path_str("vecadd");
    let out = hpvm_mgpu(&["build", "-O1", "examples/vecadd.c", "-o", &exe]);
    assert!(out.status.success(), "{}", stderr(&out));
    let exe = std::path::PathBuf::from(exe);
    // `yes` prints the report, and makes no file.
    let run = run_program(&exe, &["100"], &[("HPVM_MGPU_STATS", "yes"), ("HPVM_MGPU_DEVICES", "cpu:2")]);
    assert!(run.status.success());
    assert!(stderr(&run).contains("launches"), "{}", stderr(&run));
    assert!(!exists("yes"));
    // A source file is refused by its name; a JSON file that is not a report, by its content.
    let source = dir.join("keep.c");
    std::fs::write(&source, "int main(void) { return 0; }\n").unwrap();
    let json = dir.join("keep.json");
    std::fs::write(&json, "{\"mine\": true}\n").unwrap();
    for (path, says) in [(&source, "ending in .json"), (&json, "is not a statistics file")] {
        let before = std::fs::read(path).unwrap();
        let run = run_program(&exe, &["100"], &[("HPVM_MGPU_STATS", path.to_str().unwrap())]);
        assert!(stderr(&run).contains(says), "{}", stderr(&run));
        assert_eq!(std::fs::read(path).unwrap(), before, "{} was overwritten", path.display());
    }
    // A report is replaced by the next.
    let report = dir.join("stats.json");
    for _ in 0..2 {
        let run = run_program(&exe, &["100"], &[("HPVM_MGPU_STATS", report.to_str().unwrap())]);
        assert!(run.status.success(), "{}", stderr(&run));
        assert!(!stderr(&run).contains("cannot write"), "{}", stderr(&run));
    }
}

/// The largest worker pool the settings allow runs a program promptly.
#[test]
fn the_largest_worker_pool_runs() {
    let dir = TempDir::new("threads");
    let exe = dir.path_str("vecadd");
    let out = hpvm_mgpu(&["build", "-O1", "examples/vecadd.c", "-o", &exe]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run = run_program(
        std::path::Path::new(&exe),
        &["1000"],
        &[("HPVM_MGPU_THREADS", "256"), ("HPVM_MGPU_DEVICES", "cpu:2")],
    );
    assert!(run.status.success() && stdout(&run).contains("PASS"), "{}", stderr(&run));
}
