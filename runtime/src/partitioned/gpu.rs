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

use super::kernel::{self, GpuPart, Target, MARK_COPIES, MARK_HOST_COPIES, MARK_START};
use super::plan::{LaunchPlan, PartPlan, Source};
use super::policy::Probe;
use crate::devices::cuda::Lane;
use crate::devices::in_place;
use crate::devices::inflight::{self, Access, DeviceList, Footprint, Slots, Span, Stream};
use crate::devices::{devices, Copy, Device, Place};
use crate::memory;
use crate::sink::Stopwatch;
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
    /// The program lane of the stream the program launched it on ([`inflight::program_lane`]),
    /// where its unit may run there (it keeps no pointers in memory).
    pub lane: Option<u8>,
    /// On a program lane, a plan of whole buffers made without the maps: how to say exactly
    /// what the launch touched, should another stream's work ask ([`inflight::Refine`]).
    pub refine: Option<inflight::Refine>,
}

/// Runs one launch of unit `n` on the GPUs: its copies, then every partition. With `asynchronous` (a CUDA program's launch), and
/// unless it copies host memory or its outputs go to the host, it returns once everything is
/// enqueued, leaving the launch in flight ([`inflight`]); otherwise it waits for it.
pub(super) fn run(
    target: &Target<'_>,
    launch: Launch<'_>,
    asynchronous: bool,
) -> Result<Option<super::recorded::Launch>, String> {
    let Target { m, n, kernel, .. } = *target;
    let Launch { lp, part_args, copies, sources, probe, lane, refine } = launch;
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
    // A launch that may wait on the host (it reaches page-locked memory in place), and any
    // launch behind one (`in_place::pending`), leaves its copies from the host on the
    // streams too: draining first, or waiting for the launch, could wait forever.
    let only_to_devices = !copies.iter().any(|c| c.dst == Place::Host) && (lp.in_place || in_place::pending());
    let in_flight = asynchronous && (!touches_host || only_to_devices) && !kernel::must_wait(m, n, kernel);
    // The order the partitions are enqueued in, as indices into the plan's.
    let order = boundary_first(lp, &|k| devs.is_local(k));
    let precise = in_flight && lp.reductions.is_empty() && several_on_a_gpu(lp) && !devs.spans_ranks() && precise_on();
    // A launch on one of the program's streams runs on that stream's lane of its GPU, after
    // only the work in flight it conflicts with (kernels of other streams run beside it), where
    // its plan says all it touches: whole on one GPU, nothing to copy, no pointer passed on,
    // untimed. Anything else goes to the main stream, after all the work in flight.
    let lane = lane.filter(|_| {
        in_flight
            && !precise
            && copies.is_empty()
            && !timed(sampled)
            && lp.reductions.is_empty()
            && !lp.in_place
            && lp.passed_on.is_empty()
            && !devs.spans_ranks()
            && used.len() == 1
            && lp.parts.iter().filter(|p| !p.bx.is_empty()).count() == 1
    });
    if let Some(i) = lane {
        return run_on_lane(target, lp, part_args, used[0], i, refine);
    }
    let mut slots = if in_flight {
        // Marks are events: a launch that copies nothing and is not timed records none, and
        // takes no slots, so it never forces a drain for want of them.
        let mut need = DeviceList::from_elem(0, devs.count());
        if !copies.is_empty() || crate::sink::timing() || sampled || precise {
            for &k in &used {
                let parts = lp.parts.iter().filter(|p| p.device == k && !p.bx.is_empty()).count();
                need[k] = kernel::slots_needed(parts) + if precise { parts + 1 } else { 0 };
            }
        }
        if precise {
            Slots::take_precise(&need)?
        } else {
            Slots::take(&used, &need)?
        }
    } else {
        Slots::synchronous()
    };
    let base = slots.base.clone();
    // Where a precise launch records its points: after the marks' slots of each GPU.
    let point_slot = |k: usize, i: usize| {
        let parts = lp.parts.iter().filter(|p| p.device == k && !p.bx.is_empty()).count();
        base[k] + kernel::slots_needed(parts) + i
    };
    super::policy::log_line!("gpu run: slots taken");

    let t0 = Stopwatch::start();
    // A launch that copies nothing (a loop's steady state on one GPU) records no copy marks:
    // each mark is an event record, a few microseconds of a launch that may take ten. An
    // untimed launch that copies records only the marks that order GPUs (after the copies of
    // a GPU another waits for): a split stencil's step on two H200s spent 92 µs of host time
    // on its copies, six event records of them, while its GPUs spent 125 µs on its kernels
    // (8192 x 8192), and the host set the pace.
    let marked = !copies.is_empty() && timed(sampled);
    if marked {
        for &k in &used {
            devs.gpu(k).mark(base[k] + MARK_START)?;
        }
    }
    if precise {
        // Every copy is from another GPU (none touches the host), on its GPU's side stream,
        // after only what it conflicts with; then each GPU's kernels after what theirs do.
        if marked {
            for &k in &used {
                devs.gpu(k).mark(base[k] + MARK_HOST_COPIES)?;
            }
        }
        copy_beside(lp, copies, sources, &used, &mut slots, &point_slot)?;
        for &k in &used {
            slots.follow(Stream::main(k), &kernels_footprint(lp, k))?;
            if marked {
                devs.gpu(k).mark(base[k] + MARK_COPIES)?;
            }
        }
    } else if !copies.is_empty() {
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
    let parts: smallvec::SmallVec<[GpuPart<'_>; 4]> = order
        .iter()
        .map(|&i| GpuPart { device: lp.parts[i].device, args: &part_args[i], bx: lp.parts[i].bx })
        .collect();
    let wait = !slots.asynchronous();
    super::policy::log_line!("gpu run: copies enqueued");
    // A launch reaching host memory in place goes to its GPU at once, never held nor replayed
    // from a record: the host may watch it without synchronizing (`devices::in_place`).
    let capture = super::replay::may_record() && !lp.in_place;
    let mut done_on = DeviceList::from_elem(0, devs.count());
    let mut after_part = |i: usize| -> Result<(), String> {
        if !precise {
            return Ok(());
        }
        let p = &lp.parts[order[i]];
        done_on[p.device] += 1;
        let point = devs.gpu(p.device).point(Lane::Main, point_slot(p.device, done_on[p.device]))?;
        let main = Stream::main(p.device);
        for &(b, w) in &p.reads {
            slots.record(main, point, Access::Used(span_of(lp, b, w.start, w.end())));
        }
        for &(b, w) in &p.writes {
            slots.record(main, point, Access::Wrote(span_of(lp, b, w.start, w.end())));
        }
        Ok(())
    };
    let how = kernel::How { wait, sampled, capture, may_hold: !lp.in_place };
    let launched = kernel::run(&mut after_part, target, &parts, &base, how);
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
    if slots.asynchronous() && lp.in_place {
        in_place::note_pending();
    }
    if slots.asynchronous() && !launched.timed() && probe.is_none() {
        if precise {
            slots.leave_precise(&used, None);
        } else {
            slots.leave(&used, None);
        }
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
        if precise {
            slots.leave_precise(&used_all, Some(Box::new(finish)));
        } else {
            slots.leave(&used_all, Some(Box::new(finish)));
        }
    } else {
        for &k in &used_all {
            devs.gpu(k).synchronize()?;
        }
        finish()?;
    }
    st.nanos_kernels.fetch_add(t1.nanos(), Ordering::Relaxed);
    Ok(None)
}

/// `HPVM_MGPU_PRECISE=off`: launches left in flight order GPUs after one another's whole
/// work, never after the parts they depend on ([`crate::devices::inflight`]).
fn precise_on() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| match std::env::var("HPVM_MGPU_PRECISE").unwrap_or_default().trim() {
        "" | "on" | "1" => true,
        "off" | "0" => false,
        other => crate::fatal(&format!("HPVM_MGPU_PRECISE={other}: expected `on` or `off`")),
    })
}

/// Whether some GPU runs more than one partition of the launch: then its partitions at the
/// edges of its share end before the others, and what its neighbours need of them can move
/// while the others run, where the GPUs follow one another's parts ([`footprint`]).
fn several_on_a_gpu(lp: &LaunchPlan) -> bool {
    let mut seen = DeviceList::new();
    for p in lp.parts.iter().filter(|p| !p.bx.is_empty()) {
        if seen.contains(&p.device) {
            return true;
        }
        seen.push(p.device);
    }
    false
}

/// The order of the plan's local partitions to enqueue: on each GPU, those next to another
/// GPU's partitions (in the plan's order, which is the split's) first, so that what the
/// neighbours copy of them at the next launch is ready while the GPU runs the rest.
fn boundary_first(lp: &LaunchPlan, local: &dyn Fn(usize) -> bool) -> smallvec::SmallVec<[usize; 8]> {
    let parts = &lp.parts;
    let live: smallvec::SmallVec<[usize; 8]> = (0..parts.len()).filter(|&i| !parts[i].bx.is_empty()).collect();
    let at_edge = |j: usize| {
        let d = parts[live[j]].device;
        (j > 0 && parts[live[j - 1]].device != d) || (j + 1 < live.len() && parts[live[j + 1]].device != d)
    };
    let mut order: smallvec::SmallVec<[(bool, usize); 8]> = (0..live.len()).map(|j| (!at_edge(j), live[j])).collect();
    order.sort_by_key(|&(inner, i)| (inner, i));
    let mut all: smallvec::SmallVec<[usize; 8]> = order.into_iter().map(|(_, i)| i).collect();
    all.extend((0..parts.len()).filter(|&i| parts[i].bx.is_empty()));
    all.retain(|i| local(parts[*i].device));
    all
}

/// Bytes `start..end` of the plan's buffer `b`, named by the buffer's id.
fn span_of(lp: &LaunchPlan, b: usize, start: u64, end: u64) -> Span {
    Span { buffer: lp.buffers[b].1, start, end }
}

/// Enqueues a precise launch's copies (all from other GPUs) on each copying GPU's side
/// stream, each stream after only what its copies conflict with, and records them.
fn copy_beside(
    lp: &LaunchPlan,
    copies: &[Copy],
    sources: &[Source],
    used: &[usize],
    slots: &mut Slots,
    point_slot: &dyn Fn(usize, usize) -> usize,
) -> Result<(), String> {
    let devs = devices();
    for &k in used {
        let mine: smallvec::SmallVec<[(&Copy, Span); 4]> = copies
            .iter()
            .zip(sources)
            .filter(|(c, _)| c.executor() == k)
            .map(|(c, s)| (c, span_of(lp, s.buffer, s.start, s.end)))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let from = |c: &Copy| match c.src {
            Place::Device(d) => Ok(d),
            Place::Host => Err("a copy from the host in a launch ordered by what it touches".to_string()),
        };
        let mut fp = Footprint::default();
        for &(c, span) in &mine {
            fp.reads.push((from(c)?, span));
            fp.writes.push(span);
        }
        let side = Stream::side(k);
        slots.follow(side, &fp)?;
        let gpu = devs.gpu(k);
        for &(c, _) in &mine {
            gpu.copy_beside(c).map_err(|e| format!("{}: {e}", gpu.label()))?;
            crate::sink::record(crate::sink::Event::Copied {
                from: c.src.index(),
                to: c.dst.index(),
                bytes: c.bytes(),
            });
        }
        let point = gpu.point(Lane::Side, point_slot(k, 0))?;
        for &(c, span) in &mine {
            slots.record(side, point, Access::Read { from: from(c)?, span });
            slots.record(side, point, Access::Wrote(span));
        }
    }
    Ok(())
}

/// [`run`] for a launch on program lane `i` of GPU `k` (see there): it follows what it
/// conflicts with, runs unheld and unrecorded for replays, and leaves what it reads and
/// writes in the ledger for later work to follow.
fn run_on_lane(
    target: &Target<'_>,
    lp: &LaunchPlan,
    part_args: &[crate::args::ArgBytes],
    k: usize,
    i: u8,
    refine: Option<inflight::Refine>,
) -> Result<Option<super::recorded::Launch>, String> {
    let devs = devices();
    let st = &target.m.stats[target.n as usize];
    let Some((slots, stream)) =
        crate::devices::inflight::on_program_lane(Some(i), || Slots::take_on_lane(k, &kernels_footprint(lp, k)))?
    else {
        unreachable!("a program lane was given")
    };
    let t1 = Stopwatch::start();
    let (at, p) = lp.parts.iter().enumerate().find(|(_, p)| !p.bx.is_empty()).expect("one part");
    let parts = [GpuPart { device: k, args: &part_args[at], bx: p.bx }];
    let base = slots.base.clone();
    let launched = crate::devices::cuda::on_lane(Lane::Program(i), || {
        kernel::run(&mut |_| Ok(()), target, &parts, &base, kernel::How::default())
    });
    if let Err(e) = launched {
        let _ = Device::synchronize(devs.gpu(k));
        return Err(e);
    }
    slots.leave_on_lane(stream, &lane_accesses(lp, k), refine)?;
    st.nanos_kernels.fetch_add(t1.nanos(), Ordering::Relaxed);
    Ok(None)
}

/// What GPU `k`'s partitions of a launch read and write of its memory, as entries of work in
/// flight.
pub(super) fn lane_accesses(lp: &LaunchPlan, k: usize) -> Vec<Access> {
    let mut accesses = Vec::new();
    for p in lp.parts.iter().filter(|p| p.device == k && !p.bx.is_empty()) {
        accesses.extend(p.reads.iter().map(|&(b, w)| Access::Used(span_of(lp, b, w.start, w.end()))));
        accesses.extend(p.writes.iter().map(|&(b, w)| Access::Wrote(span_of(lp, b, w.start, w.end()))));
    }
    accesses
}

/// What GPU `k`'s partitions of a launch read and write of its memory.
pub(super) fn kernels_footprint(lp: &LaunchPlan, k: usize) -> Footprint {
    let mut fp = Footprint::default();
    for p in lp.parts.iter().filter(|p| p.device == k && !p.bx.is_empty()) {
        fp.uses.extend(p.reads.iter().map(|&(b, w)| span_of(lp, b, w.start, w.end())));
        fp.writes.extend(p.writes.iter().map(|&(b, w)| span_of(lp, b, w.start, w.end())));
    }
    fp
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

    /// Two partitions per GPU over three GPUs, in the split's order: each GPU first runs its
    /// partitions next to another GPU's, then the rest; partitions of other processes' GPUs
    /// are left out.
    #[test]
    fn partitions_next_to_another_gpu_go_first() {
        let plan =
            |devices: &[usize]| LaunchPlan::new(vec![], devices.iter().map(|&d| part(d, vec![])).collect(), None);
        let all = |_: usize| true;
        assert_eq!(boundary_first(&plan(&[0, 0, 1, 1]), &all).to_vec(), vec![1, 2, 0, 3]);
        assert_eq!(boundary_first(&plan(&[0, 0, 0, 1, 1, 1, 2, 2, 2]), &all).to_vec(), vec![2, 3, 5, 6, 0, 1, 4, 7, 8]);
        assert_eq!(boundary_first(&plan(&[0, 1]), &all).to_vec(), vec![0, 1]);
        assert_eq!(boundary_first(&plan(&[0, 0, 1, 1]), &|k| k == 1).to_vec(), vec![2, 3]);
        assert!(several_on_a_gpu(&plan(&[0, 0, 1, 1])));
        assert!(!several_on_a_gpu(&plan(&[0, 1, 2])));
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
