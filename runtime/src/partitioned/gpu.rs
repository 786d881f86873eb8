//! A partitioned launch on GPUs: the copies and kernels of every device enqueued on its own
//! stream, ordered across devices by events only where one depends on another, then waited for.
//!
//! Order on device `j`'s stream: its copies from the host, its copies from other GPUs (peer
//! copies, which `j` executes), then its partitions' kernels. What orders devices:
//! - a copy from GPU `i` reads what `i` held before the launch: the previous launch ended with
//!   every stream synchronized, so nothing is still writing it;
//! - GPU `i`'s kernels must not overwrite what another GPU is still copying from `i` (a
//!   partition's over-approximated reads can include what another partition writes): `i`'s
//!   stream waits for the copies of each GPU that copies from it, by an event, and for nothing
//!   else, so independent copies and kernels overlap;
//! - the launch returns after every stream it used is synchronized, so the host may read or
//!   change any buffer afterwards (copies from page-locked memory are asynchronous).

use super::{LaunchPlan, PartPlan};
use crate::ctx::NodeCtx;
use crate::desc::KernelDesc;
use crate::devices::{devices, Copy, Device, Place};
use crate::launch::engine::{Engine, SendPtr};
use crate::launch::kernel::{self, GpuPart, Prepared, MARK_COPIES, MARK_HOST_COPIES, MARK_START};
use crate::memory;
use crate::module::NodeStats;
use std::ffi::CStr;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Runs one launch of unit `n` on the GPUs: `copies` (the plan's, for the present coherence
/// state) then every partition of `lp`. Returns each kernel's time in milliseconds.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    e: &Engine<'_>,
    n: u32,
    st: &NodeStats,
    lp: &LaunchPlan,
    copies: &[Copy],
    kernel: &KernelDesc,
    name: &str,
    prepared: &Prepared,
    ptx: &'static CStr,
    parent: SendPtr<NodeCtx>,
    grid: [i64; 3],
    outs: SendPtr<u8>,
) -> Result<Vec<f32>, String> {
    let gpus = &devices().gpus;
    let mut used: Vec<usize> =
        lp.parts.iter().map(|p: &PartPlan| p.device).chain(copies.iter().map(Copy::executor)).collect();
    used.sort_unstable();
    used.dedup();

    let t0 = Instant::now();
    for &k in &used {
        gpus[k].mark(MARK_START)?;
    }
    let (from_host, from_gpus): (Vec<Copy>, Vec<Copy>) = copies.iter().partition(|c| c.src == Place::Host);
    memory::enqueue(&from_host)?;
    for &k in &used {
        gpus[k].mark(MARK_HOST_COPIES)?;
    }
    memory::enqueue(&from_gpus)?;
    let mut copied = vec![None; gpus.len()];
    for &k in &used {
        copied[k] = Some(gpus[k].mark(MARK_COPIES)?);
    }
    // Sources wait for their readers' copies before their own kernels (see the module doc).
    let mut waits: Vec<(usize, usize)> = from_gpus
        .iter()
        .filter_map(|c| match c.src {
            Place::Device(i) => Some((i, c.executor())),
            Place::Host => None,
        })
        .collect();
    waits.sort_unstable();
    waits.dedup();
    for (src, reader) in waits {
        if let Some(event) = copied[reader] {
            gpus[src].wait_for(event)?;
        }
    }
    for c in copies {
        st.count_bytes(c);
    }
    st.nanos_copies.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);

    let t1 = Instant::now();
    let parts: Vec<GpuPart<'_>> =
        lp.parts.iter().map(|p| GpuPart { device: p.device, args: &p.args, bx: p.bx }).collect();
    let launched = kernel::run(e, n, kernel, name, prepared, ptx, &parts, parent, grid, outs);
    // Devices that only copied are waited for too.
    for &k in &used {
        gpus[k].synchronize()?;
    }
    let times = launched?;
    st.nanos_kernels.fetch_add(t1.elapsed().as_nanos() as u64, Ordering::Relaxed);
    // The launch's GPU-timeline breakdown: the slowest device in each phase.
    let max = |f: fn(&(f32, f32, f32)) -> f32| times.spans.iter().map(f).fold(0f32, f32::max);
    let nanos = |ms: f32| (ms as f64 * 1e6) as u64;
    st.gpu_nanos_host_copies.fetch_add(nanos(max(|s| s.0)), Ordering::Relaxed);
    st.gpu_nanos_peer_copies.fetch_add(nanos(max(|s| s.1)), Ordering::Relaxed);
    st.gpu_nanos_kernels.fetch_add(nanos(max(|s| s.2)), Ordering::Relaxed);
    Ok(times.kernels)
}
