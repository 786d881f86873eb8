//! Page-locked host memory the devices read and write in place: CUDA's zero-copy.
//!
//! Under unified addressing every page-locked allocation (`cudaMallocHost`, `cudaHostAlloc`,
//! `cudaHostRegister`) is mapped into every GPU at its host address, and programs rely on it:
//! a kernel spinning on a latch the host sets later (NVIDIA's UnifiedMemoryPerf,
//! p2pBandwidthLatencyTest), a flag a kernel raises while the host polls, results written
//! straight to the host. Such memory is not a virtual buffer: it has no device copies and no
//! coherence map, and a launch given a pointer into it passes that pointer on unchanged
//! (`partitioned::bindings`).
//!
//! Invariants:
//! - a range is registered here only after every device of the run can reach it at its host
//!   address ([`map`]): on GPUs the driver maps it (portable, device-mapped) and says the
//!   device address is the host's; simulated devices are threads of this process; under ranks
//!   nothing is registered (another process cannot reach this one's memory);
//! - ranges are disjoint, and unmapped ([`unmap`]) before their memory is freed, after the
//!   devices finished with it;
//! - a launch that reaches such memory runs whole, on one device, and is submitted at once
//!   (never held): the host may watch its effects without synchronizing.

use super::devices;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::RwLock;

/// Whether a launch in flight reaches page-locked host memory in place: it may wait on the
/// host (a kernel spinning on a latch the program sets later), so until the next drain the
/// launch path waits for nothing it need not ([`pending`]).
static PENDING: AtomicBool = AtomicBool::new(false);

/// Start to length of each mapped range.
static RANGES: RwLock<BTreeMap<usize, usize>> = RwLock::new(BTreeMap::new());

/// How many ranges are mapped: a launch looks only when some are.
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// Whether the run's devices can reach host memory in place at all (GPUs or simulated
/// devices, in one process).
pub fn possible() -> bool {
    let devs = devices();
    !devs.spans_ranks() && (devs.on_gpus() || !devs.sims.is_empty())
}

/// Maps `[host, host + bytes)` into every device of the run at its host address; whether it
/// did (where it did not, kernels given pointers into it run on the host, which can reach it).
pub fn map(host: *mut u8, bytes: usize) -> bool {
    if host.is_null() || bytes == 0 {
        return false;
    }
    if !possible() {
        return false;
    }
    let reached = match devices().gpus.first() {
        Some(gpu) => gpu.map_in_place(host, bytes),
        // Simulated devices run on this process's threads; dry-run devices run nothing.
        None => true,
    };
    if reached {
        RANGES.write().unwrap_or_else(|e| e.into_inner()).insert(host as usize, bytes);
        COUNT.fetch_add(1, Ordering::SeqCst);
    }
    reached
}

/// Unmaps a range [`map`] mapped (after the devices finished with it); false where `host`
/// starts none.
pub fn unmap(host: *mut u8) -> bool {
    let removed = RANGES.write().unwrap_or_else(|e| e.into_inner()).remove(&(host as usize)).is_some();
    if removed {
        COUNT.fetch_sub(1, Ordering::SeqCst);
        if let Some(gpu) = devices().gpus.first() {
            gpu.unmap_in_place(host);
        }
    }
    removed
}

/// Whether address `at` lies in a mapped range.
pub fn contains(at: u64) -> bool {
    holds(at, 1)
}

/// Whether `[at, at + bytes)` lies in one mapped range: page-locked memory, which a GPU's DMA
/// reads and writes directly, so a copy between it and a device needs no staging and may be
/// left in flight (CUDA's `cudaMemcpyAsync` from or to page-locked memory returns at once).
pub fn holds(at: u64, bytes: u64) -> bool {
    if COUNT.load(Ordering::Relaxed) == 0 || bytes == 0 {
        return false;
    }
    let ranges = RANGES.read().unwrap_or_else(|e| e.into_inner());
    let (at, bytes) = (at as usize, bytes as usize);
    ranges.range(..=at).next_back().is_some_and(|(&start, &len)| at - start < len && bytes <= len - (at - start))
}

/// Whether the host side of copy `c` is page-locked memory the program allocated and the
/// devices reach ([`holds`]): the driver's DMA reads or writes it directly, with no staging.
pub fn host_side(c: &super::Copy) -> bool {
    let span = c.rows.saturating_sub(1) * c.pitch + c.row_bytes;
    match (c.src, c.dst) {
        (super::Place::Host, _) => holds(c.src_addr, span),
        (_, super::Place::Host) => holds(c.dst_addr, span),
        _ => false,
    }
}

/// Notes that a launch reaching page-locked host memory in place was left in flight.
pub fn note_pending() {
    PENDING.store(true, Ordering::Release);
}

/// Whether a launch left in flight since the last drain reaches page-locked host memory in
/// place. A CUDA program may then set, only after queueing more work, what that launch waits
/// for: a launch that copies host memory to its GPUs is left in flight too (its copies
/// ordered on the streams, as CUDA orders them), where it would otherwise drain first, and a
/// large copy from the host page-locks its source rather than wait for a staging slot.
pub fn pending() -> bool {
    PENDING.load(Ordering::Acquire)
}

/// Called by a drain, once every GPU is idle: whether a launch reaching memory in place was
/// pending (it is not any more).
pub(super) fn drained() -> bool {
    PENDING.swap(false, Ordering::AcqRel)
}
