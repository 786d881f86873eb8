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
