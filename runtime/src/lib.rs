//! `runtime`: the library linked into every executable `hpvm-mgpu build` produces.
//!
//! The compiler leaves three things in an executable: compiled leaf nodes (entry points over
//! boxes of instances, [`ctx::EntryFn`]), a JSON description of each module's graphs
//! ([`desc::Program`]), and host code calling the C ABI in [`abi`] (`__hpvm__init`,
//! `hpvm_rt_launch`, `__hpvm__wait`, the memory tracker...). At a launch the runtime parses
//! the description once ([`module`]), then interprets internal nodes and runs leaves on a
//! thread pool ([`launch::engine`]); streaming launches become pipelines ([`launch`]).
//!
//! Where things live: [`launch`] (launches, the graph interpreter, GPU kernel launches),
//! [`partitioned`] (launches split across devices: access intervals, plan caches),
//! [`memory`] (virtual buffers and their coherence maps), [`devices`] (the host, simulated,
//! dry-run and CUDA devices), [`stats`], and [`abi`], the C functions over all of them.
//!
//! Invariants:
//! - A description is checked on load ([`desc::Program::parse`]): afterwards every node, port
//!   and offset index in it is in range, so the engine indexes without further checks.
//! - Instances of a node write disjoint output records; the engine hands each its own.
//! - Nothing unwinds into C: errors in the user's program end the process with a message
//!   naming the node ([`fatal`]), runtime bugs abort.
//! - The library never links LLVM.

pub mod abi;
pub mod ctx;
pub mod desc;
pub mod devices;
pub mod fiber;
pub mod launch;
pub mod memory;
pub mod module;
pub mod partitioned;
pub mod pool;
pub mod scratch;
pub mod stats;
#[cfg(test)]
mod testing;
pub mod trace;

/// Ends the program with an error about the user's program (a bad instance count, a barrier
/// over too many instances...). The runtime's C functions have no error return.
pub fn fatal(msg: &str) -> ! {
    eprintln!("hpvm-mgpu runtime: error: {msg}");
    std::process::exit(1)
}
