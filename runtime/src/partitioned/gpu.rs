//! A partitioned launch on GPUs: the copies and kernels of every device enqueued on its own
//! stream, ordered across devices by events only where one depends on another, then waited for.
//!
//! Order on device `j`'s stream: its copies from the host, its copies from other GPUs (peer
//! copies, which `j` executes), then its partitions' kernels. What orders devices:
//! - a copy from GPU `i` reads what `i` held before the launch: the previous launch ended with
//!   every stream synchronized, so nothing is still writing it;
//! - GPU `i`'s kernels must not overwrite what another GPU is still copying from `i` (a
//!   partition's over-approximated reads can include what another partition writes, and a
//!   buffer updated in place is read by its neighbours): where a copy from `i` reads bytes
//!   that one of `i`'s partitions writes (same buffer, overlapping byte hulls), `i`'s stream
//!   waits for the copying GPU's copies, by an event. Nothing else waits, so a halo copied
//!   out of one buffer overlaps the kernel writing another (ping-pong stencils);
//! - a synchronous launch returns after every stream it used is synchronized, so the host may
//!   read or change any buffer afterwards (copies from page-locked memory are asynchronous);
//!   an asynchronous one (a CUDA program's, which moves no host memory) returns with its work
//!   in flight, and whatever touches device data from the host waits for it first
//!   ([`crate::devices::inflight`]), which also orders the next launch after it on every GPU.

use super::kernel::{self, GpuPart, Prepared, MARK_COPIES, MARK_HOST_COPIES, MARK_START};
use super::plan::{LaunchPlan, PartPlan, Source};
use super::policy::Probe;
use crate::args::SendPtr;
use crate::ctx::NodeCtx;
use crate::desc::KernelDesc;
use crate::devices::inflight::{DeviceList, Slots};
use crate::devices::{devices, Copy, Device, Place};
use crate::memory;
use crate::module::Module;
use crate::sink::Stopwatch;
use std::ffi::CStr;
use std::sync::atomic::Ordering;

/// What one launch runs: its plan, each part's arguments for this launch
/// ([`LaunchPlan::part_args`]), and the copies the plan needs in the present coherence state
/// with what each reads.
pub(super) struct Launch<'a> {
    pub lp: &'a LaunchPlan,
    pub part_args: &'a [crate::args::ArgBytes],
    pub copies: &'a [Copy],
    pub sources: &'a [Source],
    /// Where the split policy wants this launch's times, if it is timed for it.
    pub probe: Option<Probe>,
}

/// Runs one launch of unit `n` on the GPUs: its copies, then every partition. With `asynchronous` (a CUDA program's launch), and
/// unless it copies host memory or its outputs go to the host, it returns once everything is
/// enqueued, leaving the launch in flight ([`inflight`]); otherwise it waits for it.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    m: &Module,
    n: u32,
    launch: Launch<'_>,
    kernel: &KernelDesc,
    name: &str,
    prepared: &Prepared,
    ptx: &'static CStr,
    parent: SendPtr<NodeCtx>,
    grid: [i64; 3],
    outs: SendPtr<u8>,
    asynchronous: bool,
) -> Result<Option<super::recorded::Launch>, String> {
    let Launch { lp, part_args, copies, sources, probe } = launch;
    let sampled = probe.is_some();
    let st = &m.stats[n as usize];
    let devs = devices();
    // Under ranks, only this process's GPUs: the others' parts and copies are their ranks'
    // (copies that cross ranks are done when `memory::enqueue` returns).
    let mut used: DeviceList =
        lp.parts.iter().map(|p: &PartPlan| p.device).chain(copies.iter().map(Copy::executor)).collect();
    used.retain(|k| devs.is_local(*k));
    used.sort_unstable();
    used.dedup();
    let touches_host = copies.iter().any(|c| c.src == Place::Host || c.dst == Place::Host);
    let slots = if asynchronous && !touches_host && !kernel::must_wait(m, n, kernel) {
        // Marks are events: a launch that copies nothing and is not timed records none, and
        // takes no slots, so it never forces a drain for want of them.
        let mut need = DeviceList::from_elem(0, devs.count());
        if !copies.is_empty() || crate::sink::timing() || sampled {
            for &k in &used {
                need[k] = kernel::slots_needed(lp.parts.iter().filter(|p| p.device == k && !p.bx.is_empty()).count());
            }
        }
        Slots::take(&used, &need)?
    } else {
        Slots::synchronous()
    };
    let base = &slots.base;
    super::policy::log_line!("gpu run: slots taken");

    let t0 = Stopwatch::start();
    // A launch that copies nothing (a loop's steady state on one GPU) records no copy marks:
    // each mark is an event record, a few microseconds of a launch that may take ten. An
    // untimed launch that copies records only the marks that order GPUs (after the copies of
    // a GPU another waits for): a split stencil's step on two H200s spent 92 µs of host time
    // on its copies, six event records of them, while its GPUs spent 125 µs on its kernels
    // (8192 x 8192), and the host set the pace.
    let marked = !copies.is_empty() && timed(sampled);
    if !copies.is_empty() {
        if marked {
            for &k in &used {
                devs.gpu(k).mark(base[k] + MARK_START)?;
            }
        }
        let (from_host, from_gpus): (Vec<Copy>, Vec<Copy>) = copies.iter().partition(|c| c.src == Place::Host);
        // Copies that read what their source GPU's partitions write: (source GPU, copying GPU).
        let mut waits = war_waits(lp, copies, sources);
        waits.sort_unstable();
        waits.dedup();
        memory::enqueue(&from_host)?;
        if marked {
            for &k in &used {
                devs.gpu(k).mark(base[k] + MARK_HOST_COPIES)?;
            }
        }
        memory::enqueue(&from_gpus)?;
        let mut copied = vec![None; devs.count()];
        for &k in &used {
            if marked || waits.iter().any(|&(_, reader)| reader == k) {
                copied[k] = Some(devs.gpu(k).mark(base[k] + MARK_COPIES)?);
            }
        }
        // Sources wait for their readers' copies before their own kernels (see the module doc).
        for (src, reader) in waits {
            if let (Some(event), true) = (copied[reader], devs.is_local(src)) {
                devs.gpu(src).wait_for(event)?;
            }
        }
    }
    for c in copies {
        st.count_bytes(c);
    }
    st.nanos_copies.fetch_add(t0.nanos(), Ordering::Relaxed);

    // Reductions: the other devices' private copies start from the identity, after their
    // copies, before their kernels (and after any copy out of them: `war_waits`).
    super::reduce::start(&lp.reductions)?;
    let t1 = Stopwatch::start();
    let parts: smallvec::SmallVec<[GpuPart<'_>; 4]> = lp
        .parts
        .iter()
        .zip(part_args)
        .filter(|(p, _)| devs.is_local(p.device))
        .map(|(p, a)| GpuPart { device: p.device, args: a, bx: p.bx })
        .collect();
    let wait = !slots.asynchronous();
    super::policy::log_line!("gpu run: copies enqueued");
    let capture = super::replay::may_record();
    let launched =
        kernel::run(m, n, kernel, name, prepared, ptx, &parts, parent, grid, outs, base, wait, sampled, capture);
    super::policy::log_line!("gpu run: kernels enqueued");
    let launched = launched.and_then(|l| super::reduce::finish(&lp.reductions).map(|()| l));
    let launched = match launched {
        Ok(l) => l,
        Err(e) => {
            // Nothing may still run on buffers the caller may free.
            for &k in &used {
                let _ = Device::synchronize(devs.gpu(k));
            }
            return Err(e);
        }
    };
    // An untimed launch has nothing to read once it ends: it leaves nothing behind (a loop of
    // short launches between two synchronizations kept one closure per launch, 90 000 of them
    // and 27 MB in `launches.cu 65536 30000`, and paid for fresh heap pages on every launch).
    if slots.asynchronous() && !launched.timed() && probe.is_none() {
        slots.leave(&used, None);
        st.nanos_kernels.fetch_add(t1.nanos(), Ordering::Relaxed);
        return Ok(launched.replay);
    }
    let stats = m.stats.clone();
    let base = base.clone();
    // Devices that only copied are waited for too.
    let used_all = used.clone();
    let waited = !slots.asynchronous();
    let finish = move || -> Result<(), String> {
        let times = kernel::times(&launched, &base, marked)?;
        let st = &stats[n as usize];
        // The launch's GPU-timeline breakdown: the slowest device in each phase.
        let max = |f: fn(&(f32, f32, f32)) -> f32| times.spans.iter().map(f).fold(0f32, f32::max);
        let nanos = |ms: f32| (ms as f64 * 1e6) as u64;
        if let Some(probe) = probe {
            let ns = |ms: f32| ms as f64 * 1e6;
            probe.finish(ns(max(|s| s.2)), ns(max(|s| s.0 + s.1)), ns(max(|s| s.0 + s.1 + s.2)), waited);
        }
        st.gpu_nanos_host_copies.fetch_add(nanos(max(|s| s.0)), Ordering::Relaxed);
        st.gpu_nanos_peer_copies.fetch_add(nanos(max(|s| s.1)), Ordering::Relaxed);
        st.gpu_nanos_kernels.fetch_add(nanos(max(|s| s.2)), Ordering::Relaxed);
        st.kernel_ms.lock().unwrap_or_else(|e| e.into_inner()).extend(times.kernels);
        Ok(())
    };
    if slots.asynchronous() {
        slots.leave(&used_all, Some(Box::new(finish)));
    } else {
        for &k in &used_all {
            devs.gpu(k).synchronize()?;
        }
        finish()?;
    }
    st.nanos_kernels.fetch_add(t1.nanos(), Ordering::Relaxed);
    Ok(None)
}

/// Whether a launch's GPU times are read ([`kernel::run`] decides alike): the statistics,
/// a benchmark's repeats, or the split policy's sample.
fn timed(sampled: bool) -> bool {
    crate::sink::timing() || kernel::bench_repeat().is_some() || sampled
}

/// The pairs (source GPU, copying GPU) where a copy reads bytes that a partition on its
/// source GPU writes in this launch: the source's kernels must wait for that copy.
fn war_waits(lp: &LaunchPlan, copies: &[Copy], sources: &[Source]) -> Vec<(usize, usize)> {
    copies
        .iter()
        .zip(sources)
        .filter_map(|(c, s)| {
            let Place::Device(i) = c.src else { return None };
            let overwritten = lp
                .parts
                .iter()
                .filter(|p| p.device == i)
                .any(|p| p.writes.iter().any(|&(b, w)| b == s.buffer && w.start < s.end && s.start < w.end()))
                // A reduction's identity fill overwrites the device's copy too.
                || lp.reductions.iter().any(|r| {
                    r.buffer == s.buffer
                        && r.others.iter().any(|&(k, _)| k == i)
                        && r.start < s.end
                        && s.start < r.start + r.bytes()
                });
            overwritten.then_some((i, c.executor()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctx::GridBox;
    use crate::memory::ByteRect;

    fn part(device: usize, writes: Vec<(usize, ByteRect)>) -> PartPlan {
        PartPlan { device, bx: GridBox::whole([1, 1, 1]), args: Vec::new(), reads: Vec::new(), writes }
    }

    fn peer(src: usize, dst: usize) -> Copy {
        Copy {
            src: Place::Device(src),
            src_addr: 0,
            dst: Place::Device(dst),
            dst_addr: 0,
            rows: 1,
            row_bytes: 8,
            pitch: 8,
        }
    }

    /// A ping-pong stencil: each GPU copies its neighbour's halo of buffer 0 and writes its
    /// half of buffer 1, so no kernel waits; updated in place (writes of buffer 0 overlapping
    /// the halo), the source's kernel waits for the copy.
    #[test]
    fn kernels_wait_only_for_copies_of_what_they_overwrite() {
        let halves = |b| vec![part(0, vec![(b, ByteRect::run(0, 100))]), part(1, vec![(b, ByteRect::run(100, 200))])];
        let copies = [peer(0, 1), peer(1, 0)];
        let halo = [Source { buffer: 0, start: 96, end: 100 }, Source { buffer: 0, start: 100, end: 104 }];
        let ping_pong = LaunchPlan::new(vec![(1, 1), (2, 2)], halves(1), None);
        assert!(war_waits(&ping_pong, &copies, &halo).is_empty());
        let in_place = LaunchPlan::new(vec![(1, 1), (2, 2)], halves(0), None);
        assert_eq!(war_waits(&in_place, &copies, &halo), vec![(0, 1), (1, 0)]);
        // Bytes next to the writes, not in them: no wait.
        let beside = [Source { buffer: 0, start: 100, end: 104 }];
        assert!(war_waits(&in_place, &copies[..1], &beside).is_empty());
        // Host copies never wait.
        let from_host = Copy { src: Place::Host, ..peer(0, 1) };
        assert!(war_waits(&in_place, &[from_host], &halo[..1]).is_empty());
    }
}
