//! Nodes analysed again with one launch's values built in: where the build's maps are not
//! exact only because an index multiplies or divides by run-time values (`j * cols`,
//! `i % width`, `blockIdx.y * gridDim.x`), the same analysis with those values as constants
//! often proves them exact (`dashdb::Node::specializable`). The executable carries the module
//! as the analysis read it and the compiler's path (`transform::host::AnalysisInput`); the
//! runtime runs `hpvm-mgpu specialize NODE NAME=VALUE...` in a process of its own and keeps
//! the node it prints, per node and values.
//!
//! Invariants:
//! - a specialized node is used only for launches whose map values (grid, parent, every
//!   integer parameter: [`super::split`]'s `values`) are exactly those it was made with, and
//!   only if its database validates and it has the original's parameters and dimensions;
//! - anything else (no compiler, a crash, a timeout, maps still not exact) leaves the node
//!   whole, as the build's database says, with the reason kept for the statistics;
//! - `wait` makes a launch's outcome independent of timing (simulated devices, tests, ranks);
//!   `background` runs the node whole until its maps arrive (GPUs: a program should not wait
//!   for the compiler).

use crate::module::{AnalysisInput, Module};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::Mutex;

/// `HPVM_MGPU_SPECIALIZE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Off,
    /// At the launch that needs it, which waits.
    Wait,
    /// On a thread of its own; launches meanwhile run whole.
    Background,
}

pub(crate) fn mode() -> Mode {
    static MODE: std::sync::OnceLock<Mode> = std::sync::OnceLock::new();
    *MODE.get_or_init(|| match std::env::var("HPVM_MGPU_SPECIALIZE").unwrap_or_default().trim() {
        // Every rank must decide alike; a child process beside MPI is avoided.
        "" if crate::ranks::spans_ranks() => Mode::Off,
        // Dry-run devices stand in for GPUs (as for planning ahead): what they measure is a
        // GPU run's runtime work, which does not wait for the compiler.
        "" if crate::devices::devices().on_gpus()
            || crate::devices::devices().sims.first().is_some_and(|d| d.is_dry()) =>
        {
            Mode::Background
        }
        "" => Mode::Wait,
        "off" | "0" => Mode::Off,
        "wait" => Mode::Wait,
        "background" => Mode::Background,
        other => crate::fatal(&format!("HPVM_MGPU_SPECIALIZE={other}: expected `off`, `wait` or `background`")),
    })
}

/// Different values a node is specialized for before it is left whole: a scalar that changes
/// at every launch (a time step in a map) would run the compiler at every launch.
const MAX_PER_NODE: usize = 8;

/// What [`for_launch`] found.
pub(crate) enum Found {
    /// Maps that hold for these values.
    Ready(&'static dashdb::Node),
    /// Being made: the launch runs whole and its plan is not kept.
    Pending,
    /// None to be had, and why.
    No(String),
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    source: String,
    node: String,
    values: Vec<(String, i64)>,
    /// Whether the arrays' extents are built in too ([`for_launch`]).
    extents: bool,
}

enum State {
    Pending,
    Ready(&'static dashdb::Node),
    No(String),
}

#[derive(Default)]
struct Specials {
    by_values: HashMap<Key, State>,
    /// Per (source, node, extents built in): values tried, and why no more will be. Apart for
    /// the two ways, so that maps made with the extents failing do not stop those without.
    tried: HashMap<(String, String, bool), (usize, Option<String>)>,
}

static SPECIALS: Mutex<Option<Specials>> = Mutex::new(None);

fn with<T>(f: impl FnOnce(&mut Specials) -> T) -> T {
    f(SPECIALS.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(Specials::default))
}

/// The node `dn` of `module` specialized for `values` (see the module's doc). `extents`: the
/// arrays' extents are built in too ([`to_build_in`]), as for a node whose build maps' conditions
/// failed, where those extents are often what the conditions are about (HeCBench mixbench's
/// `g_data[*][gx][bsx]` holds only while `boffx = 0`).
pub(crate) fn for_launch(module: &Module, dn: &dashdb::Node, values: &[(String, i64)], extents: bool) -> Found {
    let mode = mode();
    if mode == Mode::Off {
        return Found::No("HPVM_MGPU_SPECIALIZE=off".into());
    }
    let Some(input) = module.analysis_input else {
        return Found::No("the executable carries no analysis input".into());
    };
    let source = module.analysis.as_ref().map_or_else(String::new, |db| db.source.hash.clone());
    let key = Key { source: source.clone(), node: dn.name.clone(), values: values.to_vec(), extents };
    let started = with(|s| {
        match s.by_values.get(&key) {
            Some(State::Ready(n)) => return Err(Found::Ready(n)),
            Some(State::Pending) => return Err(Found::Pending),
            Some(State::No(why)) => return Err(Found::No(why.clone())),
            None => {}
        }
        let tried = s.tried.entry((source.clone(), dn.name.clone(), extents)).or_default();
        if let Some(why) = &tried.1 {
            return Err(Found::No(why.clone()));
        }
        if tried.0 >= MAX_PER_NODE {
            return Err(Found::No(format!("its maps were made for {MAX_PER_NODE} sets of values already")));
        }
        tried.0 += 1;
        s.by_values.insert(key.clone(), State::Pending);
        Ok(())
    });
    if let Err(found) = started {
        return found;
    }
    let original = dn.clone();
    let kept = key.clone();
    let job = move || {
        let made = make(input, &original, &key.values, extents);
        with(|s| {
            let state = match made {
                Ok(n) => State::Ready(Box::leak(Box::new(n))),
                Err(why) => {
                    // Values that did not make the maps exact rarely differ from others that
                    // would: the node is not tried again.
                    s.tried.entry((key.source.clone(), key.node.clone(), key.extents)).or_default().1 =
                        Some(why.clone());
                    State::No(why)
                }
            };
            s.by_values.insert(key, state);
        })
    };
    match mode {
        Mode::Background => {
            if std::thread::Builder::new().name("hpvm-specialize".into()).spawn(job).is_err() {
                let why = "no thread to make its maps on".to_string();
                with(|s| s.by_values.insert(kept, State::No(why.clone())));
                return Found::No(why);
            }
            Found::Pending
        }
        _ => {
            job();
            with(|s| match s.by_values.get(&kept) {
                Some(State::Ready(n)) => Found::Ready(n),
                Some(State::No(why)) => Found::No(why.clone()),
                _ => Found::Pending,
            })
        }
    }
}

/// How long the compiler may take (`HPVM_MGPU_SPECIALIZE_SECONDS`, default 60).
fn patience() -> std::time::Duration {
    let secs = std::env::var("HPVM_MGPU_SPECIALIZE_SECONDS").ok().and_then(|v| v.trim().parse::<u64>().ok());
    std::time::Duration::from_secs(secs.filter(|&s| s > 0).unwrap_or(60))
}

/// The values to build in: all but the parameters the build's maps already use as array
/// extents (`[*][width]`). Polly delinearizes by parameters; with such an extent a constant it
/// splits the index by the constant's factors instead (HeCBench zoom's `[*][8][16][16][16]`
/// for rows of 256), and those maps cost the planner a second per launch.
fn to_build_in(original: &dashdb::Node, values: &[(String, i64)]) -> Vec<(String, i64)> {
    let extents: std::collections::HashSet<&str> =
        original.args.iter().flat_map(|a| &a.shape).flat_map(|e| super::bindings::identifiers(e)).collect();
    values.iter().filter(|(n, _)| !extents.contains(n.as_str())).cloned().collect()
}

/// The node `original` specialized for `values`: from the cache of earlier runs
/// ([`cached`]) or from the compiler, where its maps are exact and it matches the original.
fn make(
    input: AnalysisInput,
    original: &dashdb::Node,
    values: &[(String, i64)],
    extents: bool,
) -> Result<dashdb::Node, String> {
    let values = &if extents { values.to_vec() } else { to_build_in(original, values) }[..];
    let (built_by, identity) = input.compiler();
    let compiler = std::env::var_os("HPVM_MGPU_COMPILER").map_or(built_by, std::path::PathBuf::from);
    let file = cached(input, &compiler, &identity, &original.name, values);
    let json = match file.as_ref().and_then(|f| std::fs::read_to_string(f).ok()) {
        Some(json) => json,
        None => {
            let json = compile(input, &compiler, &original.name, values)?;
            if let Some(f) = &file {
                keep(f, &json);
            }
            json
        }
    };
    let db =
        dashdb::Database::from_json(&json).map_err(|e| format!("the compiler's maps are not a valid database: {e}"))?;
    let node = db.nodes.into_iter().find(|n| n.name == original.name).ok_or("the compiler gave no maps for it")?;
    // The same node: parameters, dimensions and block. Whether a grid-stride loop is taken
    // by iterations may differ: with the grid built in, its step is a constant that Polly
    // models as written.
    let shape = |n: &dashdb::Node| {
        let b = n.block.as_ref().map(|b| {
            (
                b.size.clone(),
                b.runtime.iter().map(|r| (r.dim, r.size.clone(), r.id.clone(), r.offset.clone())).collect::<Vec<_>>(),
            )
        });
        (n.param_names.clone(), n.dims, b)
    };
    if shape(&node) != shape(original) {
        return Err("the compiler's maps describe another node".into());
    }
    if !node.partitionable {
        let why = node.reasons.first().map_or(String::new(), |r| r.message.clone());
        return Err(format!("with this launch's values built in, still: {why}"));
    }
    Ok(node)
}

/// Where the compiler's answer for these inputs is kept between runs (a program's second run
/// pays nothing): `HPVM_MGPU_SPECIALIZE_CACHE` (a folder, or `off`), by default
/// `$XDG_CACHE_HOME/hpvm-mgpu/specialized` or `~/.cache/...`. The file is named by a hash of
/// the analysis input, the compiler (the one that built the program, by the identity the build
/// recorded, which holds where that compiler is absent; another, `HPVM_MGPU_COMPILER`, by its
/// path, size and time), the node and the values; what it holds is checked as the compiler's
/// output is. `None`: no cache.
fn cached(
    input: AnalysisInput,
    compiler: &std::path::Path,
    identity: &str,
    node: &str,
    values: &[(String, i64)],
) -> Option<std::path::PathBuf> {
    let dir = match std::env::var_os("HPVM_MGPU_SPECIALIZE_CACHE") {
        Some(v) if v == "off" => return None,
        Some(v) if !v.is_empty() => std::path::PathBuf::from(v),
        _ => match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
            Some(x) => std::path::PathBuf::from(x).join("hpvm-mgpu/specialized"),
            None => std::path::PathBuf::from(std::env::var_os("HOME")?).join(".cache/hpvm-mgpu/specialized"),
        },
    };
    let who = if std::env::var_os("HPVM_MGPU_COMPILER").is_some() || identity.is_empty() {
        let meta = std::fs::metadata(compiler).ok()?;
        let modified = meta.modified().ok()?.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos();
        format!("{}\n{}-{modified}", compiler.display(), meta.len())
    } else {
        format!("{}\n{identity}", compiler.display())
    };
    let mut key = format!("{}\n{who}\n{node}\n", input_hash(input));
    for (n, v) in values {
        key.push_str(&format!("{n}={v}\n"));
    }
    let name = dashdb::source_hash(key.as_bytes()).replace(':', "-");
    Some(dir.join(format!("{name}.json")))
}

/// The hash of a module's analysis input, computed once per input.
fn input_hash(input: AnalysisInput) -> String {
    static HASHES: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::new());
    let at = input.bitcode.as_ptr() as usize;
    let mut hashes = HASHES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, h)) = hashes.iter().find(|(a, _)| *a == at) {
        return h.clone();
    }
    let h = dashdb::source_hash(input.bitcode);
    hashes.push((at, h.clone()));
    h
}

/// Keeps `json` at `file`, whole or not at all (written beside it, then renamed); a cache
/// that cannot be written is no error.
fn keep(file: &std::path::Path, json: &str) {
    let Some(dir) = file.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = dir.join(format!(".{}.{}", std::process::id(), file.file_name().unwrap_or_default().to_string_lossy()));
    if std::fs::write(&tmp, json).is_ok() && std::fs::rename(&tmp, file).is_ok() {
        return;
    }
    let _ = std::fs::remove_file(&tmp);
}

/// The compilers making maps now, by process id: killed when the program ends (a
/// background one would otherwise go on for up to its patience after the program is gone,
/// and its maps would serve no launch).
static RUNNING: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// One entry of [`RUNNING`], removed when dropped.
struct Running(u32);

impl Running {
    fn new(pid: u32) -> Running {
        static AT_EXIT: std::sync::Once = std::sync::Once::new();
        extern "C" fn kill_running() {
            for &pid in RUNNING.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                // SAFETY: signals a child this process started and has not waited for.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            }
        }
        // SAFETY: registers a plain function.
        AT_EXIT.call_once(|| unsafe {
            libc::atexit(kill_running);
        });
        RUNNING.lock().unwrap_or_else(|e| e.into_inner()).push(pid);
        Running(pid)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.lock().unwrap_or_else(|e| e.into_inner()).retain(|&p| p != self.0);
    }
}

/// Runs `compiler specialize NODE NAME=VALUE...` on `input`; what it printed.
fn compile(
    input: AnalysisInput,
    compiler: &std::path::Path,
    node: &str,
    values: &[(String, i64)],
) -> Result<String, String> {
    let mut child = std::process::Command::new(compiler)
        .arg("specialize")
        .arg(node)
        .args(values.iter().map(|(n, v)| format!("{n}={v}")))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("the compiler `{}` could not run: {e}", compiler.display()))?;
    let _running = Running::new(child.id());
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut out = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut out);
            }
            out
        })
    };
    let stdout = reader(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = reader(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input.bitcode);
    }
    let deadline = std::time::Instant::now() + patience();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() < deadline => std::thread::sleep(std::time::Duration::from_millis(2)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("the compiler took over {} s to make its maps", patience().as_secs()));
            }
            Err(e) => return Err(format!("waiting for the compiler: {e}")),
        }
    };
    let out = stdout.join().unwrap_or_default();
    let err = stderr.join().unwrap_or_default();
    if !status.success() {
        let said = String::from_utf8_lossy(&err);
        let first = said.lines().find(|l| !l.trim().is_empty()).unwrap_or("no message");
        return Err(format!("the compiler failed to make its maps ({status}: {first})"));
    }
    String::from_utf8(out).map_err(|_| "the compiler's output is not text".to_string())
}

#[cfg(test)]
mod tests {
    use super::to_build_in;

    /// The build's `matmul` node names `N` as an array extent: every value but `N` is built in.
    #[test]
    fn extents_stay_parameters() {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/snapshots/matmul.dashdb.json"))
                .expect("the snapshot");
        let db = dashdb::Database::from_json(&text).expect("a valid database");
        let node = &db.nodes[0];
        let values: Vec<(String, i64)> =
            [("gx", 4), ("N", 64), ("bytesA", 16384)].iter().map(|(n, v)| (n.to_string(), *v)).collect();
        let kept: Vec<String> = to_build_in(node, &values).into_iter().map(|(n, _)| n).collect();
        assert_eq!(kept, ["gx", "bytesA"]);
    }
}
