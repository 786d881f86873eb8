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
