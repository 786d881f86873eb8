//! GPU work enqueued and not yet waited for. A CUDA program's kernel launch returns as soon
//! as its copies and kernels are on the GPUs' streams, as CUDA's does, so the host prepares
//! the next launch while the GPUs run this one; everything that lets the host see or change
//! device data waits first ([`drain`]).
//!
//! Invariants:
//! - every GPU with work in flight is in the busy set; [`drain`] synchronizes each of them,
//!   then runs, in launch order, what each launch left to do once finished (reading its
//!   event times into the statistics);
//! - a launch enqueued while others are in flight first makes the stream of every GPU it uses
//!   wait for the work so far of every busy GPU ([`Slots::take`]): it then reads what they
//!   wrote and overwrites nothing they may still be copying, as a synchronous launch would;
//! - a launch in flight owns its mark slots (events) on each GPU until the drain: slots are
//!   handed out upwards and reused only after one, so no event is recorded again before it
//!   was read.
//!
//! Launches that move host memory, or whose outputs the host reads at once, are not left in
//! flight (their callers drain first and wait at the end).

use super::devices;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Devices (or a number per device) of one launch: inline for the machines there are, so
/// that a launch allocates nothing for them.
pub type DeviceList = smallvec::SmallVec<[usize; 8]>;

/// What a launch leaves to do once its work has finished (reading its times).
pub type Finish = Box<dyn FnOnce() -> Result<(), String> + Send>;

struct InFlight {
    /// Bit `k`: GPU `k` has work not yet waited for.
    busy: u128,
    /// Per GPU, the first mark slot no launch in flight owns.
    next: Vec<usize>,
    finish: Vec<Finish>,
}

static IN_FLIGHT: Mutex<InFlight> = Mutex::new(InFlight { busy: 0, next: Vec::new(), finish: Vec::new() });

/// Whether anything is in flight: checked without the lock, since every drain point (any
/// host access to tracked memory) asks.
static ANY: AtomicBool = AtomicBool::new(false);

/// Mark slots per GPU before a launch drains what is in flight first (each slot is an event).
const MAX_SLOTS: usize = 1024;

/// Waits for all GPU work in flight and finishes each launch (statistics). A failure of any
/// of it (a kernel that faulted) ends the program, naming the GPU, since the launch that
/// caused it has returned long ago, as with CUDA's asynchronous errors.
pub fn drain() {
    if !ANY.load(Ordering::Acquire) {
        return;
    }
    let mut f = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(e) = drain_locked(&mut f) {
        crate::fatal(&format!("a kernel launched earlier failed: {e}"));
    }
}

/// Submits every GPU's held launches ([`super::held`]) without waiting for them: before the
/// host does long work of its own (planning a launch with ISL), so that the GPUs run what
/// they were given meanwhile. On two H200s a split stencil's GPU 0 idled 10 ms while the
/// host planned with three launches held. A launch that fails here ends the program, as at
/// a drain.
pub fn submit_held() {
    if !ANY.load(Ordering::Acquire) {
        return;
    }
    let devs = devices();
    let f = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
    for k in devs.local_gpus().filter(|&k| f.busy & (1 << k) != 0) {
        if let Err(e) = devs.gpu(k).bind() {
            crate::fatal(&format!("a kernel launched earlier failed: {e}"));
        }
    }
}

fn drain_locked(f: &mut InFlight) -> Result<(), String> {
    let devs = devices();
    let mut first_err = Ok(());
    // Every GPU's held launches are submitted before any GPU is waited for: waiting for one
    // GPU first would leave another's last kernels unsubmitted meanwhile (matmul 8192 on two
    // H200s took 375 ms instead of 314: its last launch's second half started only after the
    // first half had ended).
    for k in devs.local_gpus() {
        if f.busy & (1 << k) != 0 {
            if let Err(e) = devs.gpu(k).bind() {
                first_err = first_err.and(Err(e));
            }
        }
    }
    for k in devs.local_gpus() {
        if f.busy & (1 << k) != 0 {
            if let Err(e) = super::Device::synchronize(devs.gpu(k)) {
                first_err = first_err.and(Err(e));
            }
        }
    }
    f.busy = 0;
    f.next.iter_mut().for_each(|n| *n = 0);
    let finish = std::mem::take(&mut f.finish);
    ANY.store(false, Ordering::Release);
    first_err?;
    finish.into_iter().try_for_each(|done| done())
}

/// The mark slots of one launch: per GPU, the first slot it may use. An asynchronous
/// launch holds the state of what is in flight from [`Slots::take`] to [`Slots::leave`], so
/// that no drain on another thread hands its slots out again meanwhile.
pub struct Slots {
    pub base: DeviceList,
    held: Option<MutexGuard<'static, InFlight>>,
}

impl Slots {
    /// Synchronous launches: nothing in flight (drained), every GPU from slot 0.
    pub fn synchronous() -> Slots {
        drain();
        Slots { base: DeviceList::from_elem(0, devices().count()), held: None }
    }

    /// Slots for an asynchronous launch on GPUs `used` that needs `need[k]` slots on GPU `k`;
    /// orders its streams after the work in flight (see the module's invariants).
    pub fn take(used: &[usize], need: &[usize]) -> Result<Slots, String> {
        // Indexed by the run's device numbers; only this process's GPUs are ever used.
        let devs = devices();
        let mut f = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
        f.next.resize(devs.count(), 0);
        if devs.local_gpus().any(|k| f.next[k] + need[k] > MAX_SLOTS) {
            drain_locked(&mut f)?;
        }
        let busy = f.busy;
        // Every fence is recorded before any stream waits: a fence recorded after its GPU's
        // wait for another's would add that wait's latency to every GPU waiting on it. A split
        // stencil's step on two H200s waited on such a chain, two cross-GPU hops of 10-15 µs
        // each between one kernel and the next (scripts/device/timeline).
        let mut fences = smallvec::SmallVec::<[(usize, _); 8]>::new();
        for d in devs.local_gpus().filter(|d| busy & (1 << d) != 0) {
            if used.iter().all(|&u| u == d) {
                continue;
            }
            // A join point (an event without timing, the cheapest to wait on), not a slot.
            fences.push((d, devs.gpu(d).join_point()?));
        }
        for (d, fence) in fences {
            for &u in used.iter().filter(|&&u| u != d) {
                devs.gpu(u).wait_for(fence)?;
            }
        }
        let base = DeviceList::from_slice(&f.next);
        for (k, n) in need.iter().enumerate() {
            f.next[k] += n;
        }
        Ok(Slots { base, held: Some(f) })
    }

    /// [`Slots::take`] for a launch on GPU `k` alone that needs no slots (an untimed launch
    /// that copies nothing: a replay); its `base` is empty.
    pub fn take_none_on(k: usize) -> Result<Slots, String> {
        let devs = devices();
        let f = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
        let others = f.busy & !(1u128 << k);
        if others != 0 {
            let mut fences = smallvec::SmallVec::<[_; 8]>::new();
            for d in devs.local_gpus().filter(|d| others & (1 << d) != 0) {
                fences.push(devs.gpu(d).join_point()?);
            }
            for fence in fences {
                devs.gpu(k).wait_for(fence)?;
            }
        }
        Ok(Slots { base: DeviceList::new(), held: Some(f) })
    }

    /// Whether the launch may be left in flight (its slots were taken for that).
    pub fn asynchronous(&self) -> bool {
        self.held.is_some()
    }

    /// Leaves an asynchronous launch in flight on GPUs `used`; `finish`, if any, runs once
    /// they have been waited for.
    pub fn leave(self, used: &[usize], finish: Option<Finish>) {
        let Some(mut f) = self.held else { unreachable!("only asynchronous launches are left in flight") };
        for &k in used {
            f.busy |= 1 << k;
        }
        f.finish.extend(finish);
        ANY.store(true, Ordering::Release);
    }
}
