//! `runtime`: the library linked into every executable `hpvm-mgpu build` produces.
//!
//! The compiler leaves three things in an executable: compiled leaf nodes (entry points over
//! boxes of instances, [`ctx::EntryFn`]), a JSON description of each module's graphs
//! ([`desc::Program`]), and host code calling the C ABI in [`abi`] (`__hpvm__init`,
//! `hpvm_rt_launch`, `__hpvm__wait`, the memory tracker...). At a launch the runtime loads
//! the module once ([`launch::load`]), then interprets internal nodes and runs leaves on a
//! thread pool ([`launch::engine`]); launch units (GPU-shaped nodes) are split across the
//! devices ([`partitioned`]); streaming launches become pipelines ([`launch`]).
//!
//! # The map of the crate
//!
//! The top-level modules form layers. A module may use modules of its own layer or of lower
//! ones, never of a higher one, and no modules form a circle of imports. Read the crate from
//! the bottom up: each layer makes sense knowing only the layers below it.
//! `runtime/tests/layers.rs` reads this table and every `crate::`/`super::` path in
//! `src/`, and fails on an upward import or a circle, naming the file and line; a new
//! top-level module must get a row here.
//!
//! | layer | modules | what it holds |
//! |---|---|---|
//! | 0 | `ctx`, `desc`, `args`, `sass`, `sink`, `hash`, `bf16`, `testing` | records shared with compiled code (instance contexts, the description and the GPUs' machine code an executable carries: `ctx`, `desc` and `sass` are the `contract` crate's, which the compiler uses too; argument buffers); the interface through which lower layers report events to the statistics; the launch path's fast hash; `bfloat16` arithmetic as PTX rounds it; test helpers. The crate root's [`fatal`] belongs here. |
//! | 1 | `pool`, `fiber`, `warp`, `scratch`, `trace`, `crash`, `ranks` | services of the host: the worker pool, barrier fibers, CUDA's warp operations over them, per-instance scratch memory, access traces, naming the leaf a crash happened in, the other processes of a run under `mpirun` (MPI, loaded at run time) |
//! | 2 | `devices` | open devices (host cores, simulated, dry-run, CUDA), allocate, copy, run a box of instances or a kernel; knows nothing of launches, plans or coherence |
//! | 3 | `memory`, `module` | virtual buffers and their coherence maps, driving devices through the [`devices::Device`] trait; a loaded module: its description, entry points, analysis database, per-node counters, and the evaluation of its graphs' data flow |
//! | 4 | `partitioned` | launch units across devices: plans (access intervals, with ISL), copy plans from the coherence maps, the plan caches, kernels on GPUs; a box of a unit on a simulated device runs through a callback the engine gives |
//! | 5 | `launch` | loaded modules and their plan caches, the graph interpreter (engine), graph launches and streaming pipelines |
//! | 6 | `stats` | the statistics: the sink's receiver, and the report, which reads every layer |
//! | 7 | `abi`, `cudart` | the C functions over all of them: HPVM-C's, and the CUDA runtime API over virtual buffers (the program sees one GPU) |
//!
//! Invariants:
//! - A description is checked on load ([`desc::Program::parse`]): afterwards every node, port
//!   and offset index in it is in range, so the engine indexes without further checks.
//! - Instances of a node write disjoint output records; the engine hands each its own.
//! - Nothing unwinds into C: errors in the user's program end the process with a message
//!   naming the node ([`fatal`]), runtime bugs abort.
//! - The library never links LLVM.

// What the compiler writes and this crate reads lives in the contract crate, once for both.
pub use contract::{ctx, desc, sass};
pub mod abi;
pub mod args;
pub mod bf16;
pub mod crash;
pub mod cudart;
pub mod devices;
pub mod fiber;
pub mod hash;
pub mod launch;
pub mod memory;
pub mod module;
pub mod partitioned;
pub mod pool;
pub mod ranks;
pub mod scratch;
pub mod sink;
pub mod stats;
#[cfg(test)]
mod testing;
pub mod trace;
pub mod warp;

/// Ends the program with an error about the user's program (a bad instance count, a barrier
/// over too many instances...). The runtime's C functions have no error return.
pub fn fatal(msg: &str) -> ! {
    // A GPU's failed `assert` is CUDA's error for the API call under way, not an end.
    cudart::fault::unwind_if_asserted();
    FAILED.store(true, std::sync::atomic::Ordering::SeqCst);
    match ABORT.get() {
        Some((who, abort)) => {
            // One write, so that the ranks' lines do not interleave.
            let line = format!("hpvm-mgpu runtime: error ({who}): {msg}\n");
            let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
            abort(1)
        }
        None => {
            eprintln!("hpvm-mgpu runtime: error: {msg}");
            std::process::exit(1)
        }
    }
}

/// Under ranks ([`ranks`]): who this process is, for messages, and how a fatal error ends
/// every rank of the run rather than leaving the others waiting for this one.
static ABORT: std::sync::OnceLock<(String, fn(i32) -> !)> = std::sync::OnceLock::new();

/// Installs [`ABORT`] (once, when the ranks are joined).
pub(crate) fn set_abort(who: String, abort: fn(i32) -> !) {
    let _ = ABORT.set((who, abort));
}

/// Set by [`fatal`]: exit handlers must not clean up then (the failing thread may hold what
/// they would wait for).
pub static FAILED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
