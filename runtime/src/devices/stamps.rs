//! The points of the devices' work that a program's CUDA events mark, without waiting for it.
//!
//! `cudaEventRecord` returns at once in CUDA, and the event is reached once the work given
//! before it is done: programs poll it (`cudaEventQuery`) while the host works, time kernels
//! with it, and record one between a kernel spinning on a latch in page-locked memory and the
//! host's store to the latch (NVIDIA's UnifiedMemoryPerf). So a stamp on GPUs is a driver
//! event per GPU, not the host's clock after a drain.
//!
//! Invariants:
//! - a stamp holds, for every GPU of this process open when it was recorded (the first GPU
//!   opened for it where none was), a driver event recorded at the end of the GPU's main
//!   stream and of each of its other streams with work in flight (side, program lanes:
//!   [`super::inflight::lanes_of`]), after the launches held there were
//!   submitted: the stamp is reached once every one of them is, whichever stream the program
//!   recorded it on, which is never earlier than CUDA's;
//! - its driver events are its own: made at its first recording, recorded again when the
//!   program records the event again, destroyed with it;
//! - simulated devices run work when they are given it: there a stamp is the host's clock.
//!
//! The time between two stamps is the longest, over the GPUs both were recorded on, of the
//! GPU's time between them (from the last of its streams to reach the first stamp to the last
//! to reach the second) (its clock runs while it idles, so host work between the two, such
//! as a kernel run on the host, counts), and at least the host's time between the records
//! where nothing was in flight at the first (it was reached when recorded).

use super::cuda::{Lane, Mark};
use super::devices;
use std::time::Instant;

/// A recorded point of the devices' work.
pub struct Stamp {
    /// The host's clock when recorded.
    host: Instant,
    /// Whether nothing was in flight when recorded: reached at once.
    idle: bool,
    /// Per GPU (device number) and stream, its driver event.
    marks: Vec<(usize, Lane, Mark)>,
    /// Whether elapsed times may be asked for (`cudaEventDisableTiming` not given).
    timing: bool,
    /// Whether it was ever recorded.
    recorded: bool,
}

impl Stamp {
    /// A stamp never recorded: reached (CUDA's events are, until their first recording).
    pub fn new(timing: bool) -> Stamp {
        Stamp { host: Instant::now(), idle: true, marks: Vec::new(), timing, recorded: false }
    }

    /// Records the stamp at the present end of every open GPU's work (see the module's
    /// invariants).
    pub fn record(&mut self) -> Result<(), String> {
        let devs = devices();
        self.idle = !super::inflight::any();
        if devs.on_gpus() {
            let mut gpus: smallvec::SmallVec<[usize; 8]> =
                devs.local_gpus().filter(|&k| devs.gpu(k).is_open()).collect();
            if gpus.is_empty() {
                gpus.extend(devs.local_gpus().next());
            }
            let mut marks = Vec::with_capacity(gpus.len() + 1);
            for k in gpus {
                let gpu = devs.gpu(k);
                for lane in super::inflight::lanes_of(k) {
                    let old = self.take(k, lane);
                    marks.push((k, lane, gpu.record_event(lane, old, self.timing)?));
                }
            }
            // Events of GPUs or streams this recording did not reach.
            self.release();
            self.marks = marks;
        }
        self.host = Instant::now();
        self.recorded = true;
        Ok(())
    }

    /// Removes this stamp's event of GPU `k`'s stream `lane`, to be recorded again.
    fn take(&mut self, k: usize, lane: Lane) -> Option<Mark> {
        let at = self.marks.iter().position(|&(g, l, _)| g == k && l == lane)?;
        Some(self.marks.swap_remove(at).2)
    }

    fn release(&mut self) {
        let devs = devices();
        for (k, _, m) in self.marks.drain(..) {
            devs.gpu(k).destroy_event(m);
        }
    }

    /// Whether the work before the stamp is done (an error where it failed).
    pub fn reached(&self) -> Result<bool, String> {
        let devs = devices();
        for &(k, _, m) in &self.marks {
            if !devs.gpu(k).reached(m)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// What waits until the stamp is reached, without the stamp (so that the program's
    /// table of events is not held meanwhile).
    pub fn waiter(&self) -> Waiter {
        Waiter(self.marks.iter().map(|&(k, _, m)| (k, m)).collect())
    }

    /// Whether elapsed times may be asked of it: recorded, and made for timing.
    pub fn timing(&self) -> bool {
        self.timing && self.recorded
    }

    /// Milliseconds from this stamp to `end` (see the module's doc); `None` where `end` is
    /// not reached yet.
    pub fn elapsed(&self, end: &Stamp) -> Result<Option<f32>, String> {
        let devs = devices();
        let host = end.host.saturating_duration_since(self.host).as_secs_f32() * 1e3;
        let mut gpu: Option<f32> = None;
        let mut gpus: smallvec::SmallVec<[usize; 8]> = end.marks.iter().map(|&(k, _, _)| k).collect();
        gpus.dedup();
        for k in gpus {
            // From the last of the start's streams to reach it to the last of the end's: the
            // least, over the start's events, of the most, over the end's.
            let mut from_last: Option<f32> = None;
            for &(_, _, a) in self.marks.iter().filter(|&&(g, _, _)| g == k) {
                let mut to_last: Option<f32> = None;
                for &(_, _, b) in end.marks.iter().filter(|&&(g, _, _)| g == k) {
                    match devs.gpu(k).elapsed(a, b)? {
                        Some(t) => to_last = Some(to_last.map_or(t, |m| m.max(t))),
                        None => return Ok(None),
                    }
                }
                if let Some(t) = to_last {
                    from_last = Some(from_last.map_or(t, |m| m.min(t)));
                }
            }
            if let Some(t) = from_last {
                gpu = Some(gpu.map_or(t, |m| m.max(t)));
            }
        }
        Ok(Some(match gpu {
            None => host,
            Some(t) if self.idle => t.max(host),
            Some(t) => t,
        }))
    }
}

/// The driver events of a stamp ([`Stamp::waiter`]).
pub struct Waiter(smallvec::SmallVec<[(usize, Mark); 4]>);

impl Waiter {
    /// Waits until every GPU reached its event.
    pub fn wait(&self) -> Result<(), String> {
        let devs = devices();
        self.0.iter().try_for_each(|&(k, m)| devs.gpu(k).wait_until(m))
    }
}

impl Drop for Stamp {
    fn drop(&mut self) {
        if !self.marks.is_empty() {
            self.release();
        }
    }
}
