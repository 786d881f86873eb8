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
    Command::new(env!("CARGO_BIN_EXE_hpvm-mgpu"))
        .args(args)
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
