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
//! flight (their callers drain first and wait at the end), except behind a launch that may
//! wait on the host ([`super::in_place::pending`]): those that only copy to the GPUs are left in
//! flight then, their copies ordered on the streams.
//!
//! A split launch whose GPUs run several partitions each may say what it touches instead
//! ([`Footprint`], [`Slots::follow`]): then a stream waits only for the point of another
//! stream after the last work there that it conflicts with (wrote bytes it reads or
//! overwrites, or read bytes it overwrites), as the ledger of what is in flight records them
//! ([`Slots::record`]). Such a launch copies from other GPUs on each GPU's side stream
//! ([`Lane::Side`]), beside its kernels: a stencil's GPU copies its neighbour's halo as soon as
//! the neighbour's partition at the boundary has run, while both GPUs' interiors still run.
//! Everything else in flight counts as touching everything ([`Access::All`]), and is waited
//! for whole, as above. The ledger's invariants:
//! - a stream's entries are in its order (appended under the lock, as enqueued), so waiting
//!   for one entry's point waits for every earlier entry of that stream;
//! - an entry is dropped only when a later entry of the same stream covers it (every conflict
//!   with it is a conflict with the later one), or at a drain;
//! - `seen[s][t]`: stream `s` already follows stream `t`'s entries up to that number;
//! - the busy bit of a GPU is set while either of its streams has work in flight.

use super::cuda::{Lane, Mark, PROGRAM_LANES};
use super::devices;
use std::cell::Cell;
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
    /// Bit `k`: GPU `k`'s side stream has work not yet waited for.
    side_busy: u128,
    /// Per GPU, bit `i`: its stream of [`Lane::Program`]`(i)` has work not yet waited for.
    program_busy: Vec<u32>,
    /// Per GPU, the first mark slot no launch in flight owns.
    next: Vec<usize>,
    finish: Vec<Finish>,
    /// What the work in flight touches (see the module's doc).
    ledger: Vec<Entry>,
    /// The next entry's number (from 1).
    seq: u64,
    /// `seen[s * LANES * count + t]` (streams by [`Stream::index`]): stream `s` follows
    /// stream `t`'s entries up to this number.
    seen: Vec<u64>,
    /// The entries of `seen` set since the last drain, which a drain puts back to 0: the
    /// table has (34 lanes x GPUs)^2 entries (74 000 on 8 GPUs), and zeroing it all at every
    /// synchronization was a tenth of a launch-and-wait loop's host work on one GPU.
    seen_set: Vec<u32>,
}

static IN_FLIGHT: Mutex<InFlight> = Mutex::new(InFlight {
    busy: 0,
    side_busy: 0,
    program_busy: Vec::new(),
    next: Vec::new(),
    finish: Vec::new(),
    ledger: Vec::new(),
    seq: 1,
    seen: Vec::new(),
    seen_set: Vec::new(),
});

/// Bytes `start..end` of the tracked buffer numbered `buffer` (its id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub buffer: u64,
    pub start: u64,
    pub end: u64,
}

impl Span {
    fn overlaps(&self, o: &Span) -> bool {
        self.buffer == o.buffer && self.start < o.end && o.start < self.end
    }

    fn covers(&self, o: &Span) -> bool {
        self.buffer == o.buffer && self.start <= o.start && o.end <= self.end
    }
}

/// One of a GPU's streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream {
    pub gpu: usize,
    pub lane: Lane,
}

impl Stream {
    pub fn main(gpu: usize) -> Stream {
        Stream { gpu, lane: Lane::Main }
    }

    pub fn side(gpu: usize) -> Stream {
        Stream { gpu, lane: Lane::Side }
    }

    /// Its index in the `seen` table.
    fn index(self) -> usize {
        LANES * self.gpu
            + match self.lane {
                Lane::Main => 0,
                Lane::Side => 1,
                Lane::Program(i) => 2 + usize::from(i),
            }
    }
}

/// Streams per GPU: the main one, the side one and the program lanes.
const LANES: usize = 2 + PROGRAM_LANES;

thread_local! {
    /// The program lane of the launch this thread makes ([`on_program_lane`]).
    static PROGRAM_LANE: Cell<Option<u8>> = const { Cell::new(None) };
}

/// Runs `f`, a launch the program gave stream lane `lane` ([`Lane::Program`]; `None`: the
/// main stream, as every launch used to), for [`program_lane`] to tell.
pub fn on_program_lane<R>(lane: Option<u8>, f: impl FnOnce() -> R) -> R {
    let before = PROGRAM_LANE.with(|l| l.replace(lane));
    let r = f();
    PROGRAM_LANE.with(|l| l.set(before));
    r
}

/// The program lane of the launch this thread is making, if it has one: a launch on one of
/// several streams the program made, which may run beside the others' work.
pub fn program_lane() -> Option<u8> {
    PROGRAM_LANE.with(|l| l.get())
}

/// What work in flight on a stream did that another stream's later work may have to follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Wrote these bytes of its GPU's memory.
    Wrote(Span),
    /// Read these bytes of its GPU's memory (a kernel).
    Used(Span),
    /// Copied these bytes out of GPU `from`'s memory (a peer copy it executed).
    Read { from: usize, span: Span },
    /// Anything: work that said nothing of what it touches.
    All,
}

impl Access {
    /// Whether an entry `e` covers this one: every conflict with this is one with `e`.
    fn covered_by(&self, e: &Access) -> bool {
        match (self, e) {
            (_, Access::All) => true,
            (Access::Wrote(a), Access::Wrote(b)) | (Access::Used(a), Access::Used(b)) => b.covers(a),
            (Access::Read { from: f, span: a }, Access::Read { from: g, span: b }) => f == g && b.covers(a),
            _ => false,
        }
    }
}

struct Entry {
    seq: u64,
    stream: Stream,
    /// The point of the stream after the work; none for [`Access::All`], whose point is
    /// taken when a later launch needs it (the stream's end then).
    point: Option<Mark>,
    access: Access,
    /// Where the work said whole buffers without knowing more (a launch on a program lane
    /// planned without its maps): its launch's number, shared by that launch's entries, and
    /// how to say exactly what it touched ([`Slots::refine`]).
    refine: Option<(u64, Refine)>,
}

/// How to say exactly what a launch left in flight on a program lane with whole buffers
/// touched: its maps (ISL), asked only when another stream's work would otherwise wait for
/// the whole buffers. Opaque here: the layer that launched it knows the memory and the maps
/// (`partitioned::lanes`), and hands the exact entries back ([`Slots::refine`]).
pub type Refine = std::sync::Arc<dyn std::any::Any + Send + Sync>;

/// Numbers of launches whose entries may be refined ([`Entry::refine`]).
static REFINABLE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// What a launch on a program lane planned with whole buffers meets in flight, before it
/// takes its slots ([`Slots::lane_conflicts`]).
pub enum LaneConflicts {
    /// Nothing of another stream: the whole buffers cost no concurrency.
    None,
    /// Work of other streams that said only whole buffers (theirs to refine), and whether any
    /// conflicting work could be made exact at all (not [`Access::All`]).
    Some { refinable: Vec<(u64, Refine)>, exact_helps: bool },
}

/// What a stream is about to do, for [`Slots::follow`]: the bytes it copies from other GPUs
/// (source GPU, bytes), and the bytes of its own GPU's memory it reads and overwrites.
#[derive(Default, Debug)]
pub struct Footprint {
    pub reads: Vec<(usize, Span)>,
    pub uses: Vec<Span>,
    pub writes: Vec<Span>,
}

/// Whether stream `s` doing `fp` must follow entry `a` of another stream `t`.
fn conflicts(a: &Access, t: Stream, s: Stream, fp: &Footprint) -> bool {
    let same_memory = s.gpu == t.gpu;
    let writes = |x: &Span| fp.writes.iter().any(|w| w.overlaps(x));
    match a {
        Access::All => true,
        // Read after write, and on the same GPU's memory write after write.
        Access::Wrote(w) => {
            fp.reads.iter().any(|(from, r)| *from == t.gpu && r.overlaps(w))
                || same_memory && (writes(w) || fp.uses.iter().any(|u| u.overlaps(w)))
        }
        // Write after read.
        Access::Used(u) => same_memory && writes(u),
        Access::Read { from, span } => *from == s.gpu && writes(span),
    }
}

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

/// GPU `k`'s main stream and those of its other streams with work in flight: where a point
/// after all of its work so far is recorded (an idle stream has nothing to wait for).
pub fn lanes_of(k: usize) -> smallvec::SmallVec<[Lane; 4]> {
    let mut lanes = smallvec::smallvec![Lane::Main];
    if !ANY.load(Ordering::Acquire) {
        return lanes;
    }
    let f = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
    if f.side_busy & (1 << k) != 0 {
        lanes.push(Lane::Side);
    }
    let programs = f.program_busy.get(k).copied().unwrap_or(0);
    lanes.extend((0..PROGRAM_LANES as u8).filter(|&i| programs & (1 << i) != 0).map(Lane::Program));
    lanes
}

/// Whether anything is in flight.
pub fn any() -> bool {
    ANY.load(Ordering::Acquire)
}

/// Whether the work in flight is done, without waiting for it: every busy GPU's streams are
/// idle (its held launches submitted first). An error where some of it failed.
pub fn finished() -> Result<bool, String> {
    if !ANY.load(Ordering::Acquire) {
        return Ok(true);
    }
    let devs = devices();
    let f = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
    for k in devs.local_gpus().filter(|&k| f.busy & (1 << k) != 0) {
        if !devs.gpu(k).idle()? {
            return Ok(false);
        }
    }
    Ok(true)
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
    f.side_busy = 0;
    f.program_busy.iter_mut().for_each(|b| *b = 0);
    f.next.iter_mut().for_each(|n| *n = 0);
    f.ledger.clear();
    for at in f.seen_set.drain(..) {
        f.seen[at as usize] = 0;
    }
    let finish = std::mem::take(&mut f.finish);
    ANY.store(false, Ordering::Release);
    if super::in_place::drained() {
        super::cuda::unlock_after_drain();
    }
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
    /// orders their streams after the work in flight (see the module's invariants).
    pub fn take(used: &[usize], need: &[usize]) -> Result<Slots, String> {
        let mut f = lock_for(need)?;
        let used: smallvec::SmallVec<[Stream; 8]> = used.iter().map(|&k| Stream::main(k)).collect();
        f.follow_whole(&used)?;
        Ok(hand_out(f, need))
    }

    /// [`Slots::take`] for a launch that then says what each stream it uses touches, before
    /// enqueueing there ([`Slots::follow`], [`Slots::record`]).
    pub fn take_precise(need: &[usize]) -> Result<Slots, String> {
        Ok(hand_out(lock_for(need)?, need))
    }

    /// [`Slots::take`] for a launch on GPU `k` alone that needs no slots (an untimed launch
    /// that copies nothing: a replay); its `base` is empty.
    pub fn take_none_on(k: usize) -> Result<Slots, String> {
        let devs = devices();
        let mut f = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
        f.size_seen(devs.count());
        f.follow_whole(&[Stream::main(k)])?;
        Ok(Slots { base: DeviceList::new(), held: Some(f) })
    }

    /// Orders stream `s` of a launch taken with [`Slots::take_precise`] after what it
    /// conflicts with of the work in flight, doing `fp` next: for each other stream, after the
    /// point of the last entry it conflicts with.
    pub fn follow(&mut self, s: Stream, fp: &Footprint) -> Result<(), String> {
        let f = self.held.as_mut().expect("a precise launch holds the state in flight");
        let devs = devices();
        let mut waits = smallvec::SmallVec::<[(Mark, Stream, u64); 8]>::new();
        for t in f.streams() {
            if t == s {
                continue;
            }
            let seen = f.seen[f.at(s, t)];
            let hit = f
                .ledger
                .iter()
                .rev()
                .take_while(|e| e.seq > seen)
                .find(|e| e.stream == t && conflicts(&e.access, t, s, fp));
            let Some(e) = hit else { continue };
            match e.point {
                Some(p) => waits.push((p, t, e.seq)),
                None => waits.push((join_point(t)?, t, f.last_seq(t))),
            }
        }
        for (point, t, seq) in waits {
            devs.gpu(s.gpu).wait_on(s.lane, point)?;
            f.saw(s, t, seq);
        }
        Ok(())
    }

    /// Records what stream `s` of a precise launch did last (it is in flight from now on),
    /// with the point of the stream after it.
    pub fn record(&mut self, s: Stream, point: Mark, access: Access) {
        let f = self.held.as_mut().expect("a precise launch holds the state in flight");
        f.record(s, Some(point), access);
    }

    /// Slots for work on GPU `k` alone that the program gave one of its streams
    /// ([`program_lane`]): its lane, ordered after only what `fp` conflicts with of the work in
    /// flight, with one slot for the lane's point after the work ([`Slots::leave_on_lane`]).
    /// `None` where this thread's work has no program lane. Its work goes to the lane through
    /// [`super::cuda::on_lane`].
    pub fn take_on_lane(k: usize, fp: &Footprint) -> Result<Option<(Slots, Stream)>, String> {
        let Some(i) = program_lane() else { return Ok(None) };
        let stream = Stream { gpu: k, lane: Lane::Program(i) };
        let mut need = DeviceList::from_elem(0, devices().count());
        need[k] = 1;
        let mut slots = Slots::take_precise(&need)?;
        slots.follow(stream, fp)?;
        Ok(Some((slots, stream)))
    }

    /// Leaves the work of [`Slots::take_on_lane`] in flight on `s`, having done `accesses`
    /// (and always one entry, so that its lane is busy until a drain: waited for by whatever
    /// follows all the work in flight). `refine`: the accesses are whole buffers, and this
    /// says what the work touched exactly when another stream asks ([`Slots::lane_conflicts`]).
    pub fn leave_on_lane(mut self, s: Stream, accesses: &[Access], refine: Option<Refine>) -> Result<(), String> {
        let point = devices().gpu(s.gpu).point(s.lane, self.base[s.gpu])?;
        self.record(s, point, Access::Used(Span { buffer: u64::MAX, start: 0, end: 0 }));
        let refine = refine.map(|r| (REFINABLE.fetch_add(1, Ordering::Relaxed), r));
        let f = self.held.as_mut().expect("a precise launch holds the state in flight");
        for &a in accesses {
            f.record_refinable(s, Some(point), a, refine.clone());
        }
        self.leave_precise(&[s.gpu], None);
        Ok(())
    }

    /// What work on GPU `k`'s program lane (this thread's, [`program_lane`]) doing `fp` (whole
    /// buffers) would have to follow of other streams' work in flight. Asked before the
    /// launch takes its slots; what is in flight may change before it does, which only
    /// costs concurrency: a later launch that conflicts waits, as ever.
    pub fn lane_conflicts(k: usize, fp: &Footprint) -> LaneConflicts {
        let Some(i) = program_lane() else { return LaneConflicts::None };
        let f = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
        if f.seen.is_empty() {
            return LaneConflicts::None;
        }
        f.conflicts_of(Stream { gpu: k, lane: Lane::Program(i) }, fp)
    }

    /// The entries of refinable launch `id` become `exact` ([`Refine`]), keeping their stream,
    /// point and numbers. Nothing where they left the ledger meanwhile (a drain).
    pub fn refine(id: u64, exact: &[Access]) {
        IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner()).refine(id, exact);
    }

    /// Whether the launch may be left in flight (its slots were taken for that).
    pub fn asynchronous(&self) -> bool {
        self.held.is_some()
    }

    /// Leaves an asynchronous launch in flight on GPUs `used`; `finish`, if any, runs once
    /// they have been waited for. Unless it was taken with [`Slots::take_precise`] (its
    /// entries recorded), it touched anything, as far as later launches know.
    pub fn leave(self, used: &[usize], finish: Option<Finish>) {
        self.leave_as(used, false, finish)
    }

    /// [`Slots::leave`] for a launch taken with [`Slots::take_precise`].
    pub fn leave_precise(self, used: &[usize], finish: Option<Finish>) {
        self.leave_as(used, true, finish)
    }

    fn leave_as(self, used: &[usize], precise: bool, finish: Option<Finish>) {
        let Some(mut f) = self.held else { unreachable!("only asynchronous launches are left in flight") };
        for &k in used {
            f.busy |= 1 << k;
            if !precise {
                f.record(Stream::main(k), None, Access::All);
            }
        }
        f.finish.extend(finish);
        ANY.store(true, Ordering::Release);
    }
}

/// The state in flight, locked, with room for `need` more slots on each GPU (drained first
/// if there is none).
fn lock_for(need: &[usize]) -> Result<MutexGuard<'static, InFlight>, String> {
    let devs = devices();
    let mut f = IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner());
    f.size_seen(devs.count());
    if devs.local_gpus().any(|k| f.next[k] + need[k] > MAX_SLOTS) {
        drain_locked(&mut f)?;
    }
    Ok(f)
}

/// The present end of stream `t`, for another stream to wait on at once.
fn join_point(t: Stream) -> Result<Mark, String> {
    devices().gpu(t.gpu).join_point_on(t.lane)
}

impl InFlight {
    fn gpus(&self) -> usize {
        self.next.len()
    }

    /// Sizes the per-GPU tables for `n` GPUs (the run's device count, fixed for the run).
    fn size_seen(&mut self, n: usize) {
        if self.next.len() < n {
            self.next.resize(n, 0);
            self.program_busy.resize(n, 0);
        }
        if self.seen.len() != LANES * LANES * n * n {
            self.seen = vec![0; LANES * LANES * n * n];
            self.seen_set.clear();
        }
    }

    /// The index of `seen[s][t]`.
    fn at(&self, s: Stream, t: Stream) -> usize {
        s.index() * LANES * self.gpus() + t.index()
    }

    /// The streams with work in flight.
    fn streams(&self) -> impl Iterator<Item = Stream> + '_ {
        devices().local_gpus().flat_map(move |k| {
            let main = (self.busy & (1 << k) != 0).then(|| Stream::main(k));
            let side = (self.side_busy & (1 << k) != 0).then(|| Stream::side(k));
            let programs = self.program_busy.get(k).copied().unwrap_or(0);
            let programs = (0..PROGRAM_LANES as u8)
                .filter(move |&i| programs & (1 << i) != 0)
                .map(move |i| Stream { gpu: k, lane: Lane::Program(i) });
            main.into_iter().chain(side).chain(programs)
        })
    }

    /// Orders every stream of `used` after all the work in flight on the others (what a
    /// launch that says nothing of what it touches needs). Every end is recorded before any
    /// stream waits: an end recorded after its stream's wait for another's would add that
    /// wait's latency to every stream waiting on it. A split stencil's step on two H200s
    /// waited on such a chain, two cross-GPU hops of 10-15 µs each between one kernel and the
    /// next (scripts/device/timeline).
    fn follow_whole(&mut self, used: &[Stream]) -> Result<(), String> {
        let devs = devices();
        let mut ends = smallvec::SmallVec::<[(Stream, Mark, u64); 8]>::new();
        for t in self.streams() {
            let last = self.last_seq(t);
            let followed = |s: &Stream| *s == t || last > 0 && self.seen[self.at(*s, t)] >= last;
            if used.iter().all(followed) {
                continue;
            }
            ends.push((t, join_point(t)?, last));
        }
        for (t, end, last) in ends {
            for &s in used.iter().filter(|&&s| s != t) {
                devs.gpu(s.gpu).wait_on(s.lane, end)?;
                self.saw(s, t, last);
            }
        }
        Ok(())
    }

    /// The number of stream `t`'s last entry (0: none).
    fn last_seq(&self, t: Stream) -> u64 {
        self.ledger.iter().rev().find(|e| e.stream == t).map_or(0, |e| e.seq)
    }

    /// Stream `s` now follows stream `t`'s entries up to `seq`.
    fn saw(&mut self, s: Stream, t: Stream, seq: u64) {
        let at = self.at(s, t);
        if self.seen[at] == 0 && seq > 0 {
            self.seen_set.push(at as u32);
        }
        self.seen[at] = self.seen[at].max(seq);
    }

    fn record(&mut self, stream: Stream, point: Option<Mark>, access: Access) {
        self.record_refinable(stream, point, access, None);
    }

    /// What stream `s` doing `fp` would have to follow of other streams' entries it does not
    /// follow yet ([`Slots::lane_conflicts`]).
    fn conflicts_of(&self, s: Stream, fp: &Footprint) -> LaneConflicts {
        let mut refinable: Vec<(u64, Refine)> = Vec::new();
        let (mut any, mut exact_helps) = (false, false);
        for e in &self.ledger {
            if e.stream == s || e.seq <= self.seen[self.at(s, e.stream)] || !conflicts(&e.access, e.stream, s, fp) {
                continue;
            }
            any = true;
            exact_helps |= e.access != Access::All;
            if let Some((id, r)) = &e.refine {
                if !refinable.iter().any(|(j, _)| j == id) {
                    refinable.push((*id, r.clone()));
                }
            }
        }
        match any {
            false => LaneConflicts::None,
            true => LaneConflicts::Some { refinable, exact_helps },
        }
    }

    /// See [`Slots::refine`].
    fn refine(&mut self, id: u64, exact: &[Access]) {
        let of = |e: &Entry| e.refine.as_ref().is_some_and(|(j, _)| *j == id);
        let Some(first) = self.ledger.iter().find(|e| of(e)) else { return };
        let (seq, stream, point) = (first.seq, first.stream, first.point);
        self.ledger.retain(|e| !of(e));
        // In its place: the entries stay in the order of their numbers.
        let at = self.ledger.iter().position(|e| e.seq > seq).unwrap_or(self.ledger.len());
        self.ledger.splice(at..at, exact.iter().map(|&access| Entry { seq, stream, point, access, refine: None }));
    }

    fn record_refinable(&mut self, stream: Stream, point: Option<Mark>, access: Access, refine: Option<(u64, Refine)>) {
        // An entry that may be refined later covers nothing: once exact, it would no longer
        // cover what it let go.
        let keeps = refine.is_some();
        self.ledger.retain(|e| e.stream != stream || keeps || !e.access.covered_by(&access));
        let seq = self.seq;
        self.seq += 1;
        self.ledger.push(Entry { seq, stream, point, access, refine });
        self.busy |= 1 << stream.gpu;
        match stream.lane {
            Lane::Main => {}
            Lane::Side => self.side_busy |= 1 << stream.gpu,
            Lane::Program(i) => self.program_busy[stream.gpu] |= 1 << i,
        }
    }
}

/// The slots `need` asks for on each GPU, from the first free ones, with the lock held.
fn hand_out(mut f: MutexGuard<'static, InFlight>, need: &[usize]) -> Slots {
    let base = DeviceList::from_slice(&f.next);
    for (k, n) in need.iter().enumerate() {
        f.next[k] += n;
    }
    Slots { base, held: Some(f) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nothing in flight on `gpus` GPUs, every table sized for them.
    fn idle(gpus: usize) -> InFlight {
        InFlight {
            busy: 0,
            side_busy: 0,
            program_busy: vec![0; gpus],
            next: vec![0; gpus],
            finish: Vec::new(),
            ledger: Vec::new(),
            seq: 1,
            seen: vec![0; LANES * LANES * gpus * gpus],
            seen_set: Vec::new(),
        }
    }

    fn span(buffer: u64, start: u64, end: u64) -> Span {
        Span { buffer, start, end }
    }

    /// A two-GPU stencil step: GPU 1's side stream copies GPU 0's edge rows of buffer 7 into
    /// GPU 1; its main stream then reads buffer 7 and writes its half of buffer 8.
    #[test]
    fn a_stream_follows_only_the_work_it_conflicts_with() {
        let (main0, side0, main1, side1) = (Stream::main(0), Stream::side(0), Stream::main(1), Stream::side(1));
        let copy = Footprint { reads: vec![(0, span(7, 96, 100))], uses: vec![], writes: vec![span(7, 96, 100)] };
        // GPU 0's kernel wrote its edge: read after write.
        assert!(conflicts(&Access::Wrote(span(7, 50, 100)), main0, side1, &copy));
        // ... its interior, or another buffer: nothing to follow.
        assert!(!conflicts(&Access::Wrote(span(7, 0, 50)), main0, side1, &copy));
        assert!(!conflicts(&Access::Wrote(span(8, 0, 100)), main0, side1, &copy));
        // GPU 1's kernel still reads the halo's bytes the copy overwrites: write after read.
        assert!(conflicts(&Access::Used(span(7, 90, 200)), main1, side1, &copy));
        // ... on GPU 0's memory, the same bytes are another copy: nothing.
        assert!(!conflicts(&Access::Used(span(7, 90, 200)), main0, side1, &copy));
        let kernel = Footprint { reads: vec![], uses: vec![span(7, 96, 200)], writes: vec![span(8, 100, 200)] };
        // The kernel reads what its side stream copied in: read after write, same memory.
        assert!(conflicts(&Access::Wrote(span(7, 96, 100)), side1, main1, &kernel));
        // ... but not what GPU 0's side stream wrote into GPU 0.
        assert!(!conflicts(&Access::Wrote(span(7, 96, 100)), side0, main1, &kernel));
        // GPU 0 copies bytes of GPU 1 that GPU 1's kernel now overwrites: write after read.
        assert!(conflicts(&Access::Read { from: 1, span: span(8, 100, 104) }, side0, main1, &kernel));
        // ... bytes it leaves alone, or another GPU's: nothing.
        assert!(!conflicts(&Access::Read { from: 1, span: span(8, 200, 204) }, side0, main1, &kernel));
        assert!(!conflicts(&Access::Read { from: 2, span: span(8, 100, 104) }, side0, main1, &kernel));
        // Work that said nothing: always followed.
        assert!(conflicts(&Access::All, main0, main1, &kernel));
    }

    /// A drain forgets what every stream followed, however few entries were set: only those
    /// are put back, not the whole table.
    #[test]
    fn a_drain_forgets_what_streams_followed() {
        let mut f = idle(2);
        let (main0, side1) = (Stream::main(0), Stream::side(1));
        f.saw(main0, side1, 5);
        f.saw(main0, side1, 7);
        f.saw(side1, main0, 3);
        assert_eq!(f.seen[f.at(main0, side1)], 7);
        assert_eq!(f.seen_set.len(), 2, "each entry listed once");
        // No GPU is busy, so the drain waits for none.
        drain_locked(&mut f).expect("nothing to wait for");
        assert!(f.seen.iter().all(|&n| n == 0) && f.seen_set.is_empty());
    }

    /// Every stream of every GPU has its own row of the `seen` table, and a program lane's
    /// work marks that lane busy, beside the GPU.
    #[test]
    fn program_lanes_are_streams_of_their_own() {
        let mut all: Vec<Stream> = Vec::new();
        for gpu in 0..3 {
            all.push(Stream::main(gpu));
            all.push(Stream::side(gpu));
            all.extend((0..PROGRAM_LANES as u8).map(|i| Stream { gpu, lane: Lane::Program(i) }));
        }
        let mut index: Vec<usize> = all.iter().map(|s| s.index()).collect();
        index.sort_unstable();
        assert_eq!(index, (0..3 * LANES).collect::<Vec<_>>());
        let mut f = idle(3);
        f.record(Stream { gpu: 2, lane: Lane::Program(5) }, None, Access::Wrote(span(1, 0, 8)));
        assert_eq!((f.busy, f.side_busy, f.program_busy.clone()), (0b100, 0, vec![0, 0, 1 << 5]));
        // Two kernels of different streams on one GPU: one writing what the other reads must
        // follow it; one touching other bytes need not.
        let (a, b) = (Stream { gpu: 0, lane: Lane::Program(0) }, Stream { gpu: 0, lane: Lane::Program(1) });
        let reader = Footprint { reads: vec![], uses: vec![span(7, 0, 64)], writes: vec![span(8, 0, 64)] };
        assert!(conflicts(&Access::Wrote(span(7, 32, 40)), a, b, &reader));
        assert!(conflicts(&Access::Used(span(8, 0, 8)), a, b, &reader));
        assert!(!conflicts(&Access::Wrote(span(9, 0, 64)), a, b, &reader));
        assert!(!conflicts(&Access::Used(span(7, 0, 64)), a, b, &reader));
        // The entry every lane launch leaves for its lane to count as busy conflicts with nothing.
        assert!(!conflicts(&Access::Used(Span { buffer: u64::MAX, start: 0, end: 0 }), a, b, &reader));
    }

    /// A lane's work left with whole buffers is refined in place, and the conflicts a later
    /// launch meets are those of the refined entries; an entry that may be refined covers
    /// nothing of its stream's older ones, which a refinement would otherwise lose.
    #[test]
    fn whole_entries_are_refined_in_place_and_cover_nothing() {
        let mut f = idle(1);
        let (a, b) = (Stream { gpu: 0, lane: Lane::Program(0) }, Stream { gpu: 0, lane: Lane::Program(1) });
        let refine: Refine = std::sync::Arc::new(());
        f.record(a, None, Access::Wrote(span(7, 0, 8)));
        f.record_refinable(a, None, Access::Wrote(span(7, 0, 64)), Some((5, refine.clone())));
        f.record_refinable(a, None, Access::Used(span(8, 0, 64)), Some((5, refine.clone())));
        f.record(b, None, Access::Used(span(9, 0, 64)));
        assert_eq!(f.ledger.len(), 4, "the whole write covered the older one");
        // b writing bytes 16..24 of buffer 7 meets a's whole write, which may be refined.
        let fp = Footprint { reads: vec![], uses: vec![], writes: vec![span(7, 16, 24)] };
        match f.conflicts_of(b, &fp) {
            LaneConflicts::Some { refinable, exact_helps } => {
                assert!(exact_helps);
                assert_eq!(refinable.iter().map(|(id, _)| *id).collect::<Vec<_>>(), vec![5]);
            }
            LaneConflicts::None => panic!("no conflict found"),
        }
        // Refined: a wrote 0..8 and read 32..40; b's write no longer meets it.
        f.refine(5, &[Access::Wrote(span(7, 0, 8)), Access::Used(span(8, 32, 40))]);
        let seqs: Vec<u64> = f.ledger.iter().map(|e| e.seq).collect();
        assert!(seqs.windows(2).all(|w| w[0] <= w[1]), "{seqs:?}");
        assert_eq!(f.ledger.iter().filter(|e| e.refine.is_some()).count(), 0);
        assert!(matches!(f.conflicts_of(b, &fp), LaneConflicts::None));
        // Writing what a read is reading still meets it; work that said nothing cannot be
        // made exact.
        let over = Footprint { reads: vec![], uses: vec![], writes: vec![span(8, 36, 38)] };
        assert!(matches!(f.conflicts_of(b, &over), LaneConflicts::Some { exact_helps: true, .. }));
        f.record(a, None, Access::All);
        assert!(matches!(f.conflicts_of(b, &fp), LaneConflicts::Some { exact_helps: false, .. }));
        // A refinement after its entries left (a drain) changes nothing.
        f.refine(5, &[Access::All]);
        assert!(f.ledger.iter().all(|e| e.stream != a || e.access == Access::All));
    }

    /// Only an entry that every conflict of an older one also hits may replace it.
    #[test]
    fn an_entry_is_dropped_only_when_a_later_one_covers_it() {
        let w = Access::Wrote(span(7, 10, 20));
        assert!(w.covered_by(&Access::Wrote(span(7, 0, 20))));
        assert!(!w.covered_by(&Access::Wrote(span(7, 11, 20))));
        assert!(!w.covered_by(&Access::Wrote(span(8, 0, 20))));
        assert!(!w.covered_by(&Access::Used(span(7, 0, 20))));
        assert!(w.covered_by(&Access::All));
        let r = Access::Read { from: 1, span: span(7, 10, 20) };
        assert!(r.covered_by(&Access::Read { from: 1, span: span(7, 10, 20) }));
        assert!(!r.covered_by(&Access::Read { from: 2, span: span(7, 10, 20) }));
        assert!(!r.covered_by(&Access::Wrote(span(7, 0, 30))));
        assert!(!Access::All.covered_by(&w));
        // In a ledger: the later write of the same bytes replaces the earlier, a write of
        // other bytes or another stream's does not, and work that said nothing replaces them.
        let mut f = idle(2);
        let (main0, side0) = (Stream::main(0), Stream::side(0));
        f.record(main0, None, Access::Wrote(span(7, 10, 20)));
        f.record(side0, None, Access::Wrote(span(7, 10, 20)));
        f.record(main0, None, Access::Wrote(span(7, 30, 40)));
        f.record(main0, None, Access::Wrote(span(7, 0, 25)));
        let on =
            |f: &InFlight, s: Stream| f.ledger.iter().filter(|e| e.stream == s).map(|e| e.access).collect::<Vec<_>>();
        assert_eq!(on(&f, main0), vec![Access::Wrote(span(7, 30, 40)), Access::Wrote(span(7, 0, 25))]);
        assert_eq!(f.last_seq(main0), 4);
        assert_eq!((f.busy, f.side_busy), (1, 1));
        f.record(main0, None, Access::All);
        assert_eq!(on(&f, main0), vec![Access::All]);
        assert_eq!(on(&f, side0).len(), 1);
    }
}
