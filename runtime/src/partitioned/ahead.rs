//! Planning ahead: ISL's part of a node's first split is done in the background, while its
//! launches run whole.
//!
//! A node's first split plans ask ISL for the rectangles its maps reach (milliseconds: the
//! first two splits of a CUDA stencil took 18.6 ms on two H200s, a tiled Jacobi's 50-launch
//! loop 26 ms), and a GPU launch paid that on the program's thread before its kernel was even
//! enqueued, with the GPUs idle. Under the policy (`HPVM_MGPU_PARTITION=auto`) on GPUs, that
//! work is started as soon as a split becomes likely: at a node's first launch of a grid of a
//! wave or more, or when the policy wants more GPUs than are open. A launch that wants a split
//! whose planning ahead is still in flight runs whole, unless the whole launches queued since
//! it started already keep the GPUs busy for longer than it is expected to take: then the
//! launch waits for it, which costs the GPUs nothing, and splits. Outputs never depend on
//! any of this: a whole launch is bit-identical to a split one.
//!
//! Invariants:
//! - the background does only ISL's work ([`super::split::warm`]: rectangles, closed forms,
//!   grid-stride ends, all plain data in the memo caches), never a plan: plans are made at a
//!   launch, from the buffer table it holds (indirect writes' indices are the buffer's bytes
//!   then), and cached as before;
//! - a node has at most one plan ahead in flight per device count, and every one started
//!   finishes (a panic inside it counts as finished), so a launch waiting for it returns;
//! - a plan made at a launch after the background's that still took long (ISL asked again,
//!   for new scalar values) sends that node's next miss to the background again, so the
//!   launch path pays ISL at most once between two plans ahead.
//!
//! `HPVM_MGPU_PLAN_AHEAD=on|off` chooses; the default is on with GPUs and dry-run devices (which
//! stand in for them), off on simulated devices that compute
//! (whose tests count splits launch by launch) and under strict checking (whose errors belong
//! to the launch).

use super::bindings::{Bindings, Launch};
use crate::desc::KernelKind;
use crate::hash::FxHashMap;
use crate::module::Module;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Instant;

/// An inline plan that took longer than this asked ISL again: the next miss goes ahead.
pub(crate) const SLOW_PLAN_NS: u64 = 1_000_000;

/// What a plan ahead is expected to take before any finished (two H200s: 20 to 50 ms for a
/// stencil's first split).
const FIRST_EXPECTED_NS: u64 = 30_000_000;

/// Per node and device count, where its planning ahead stands.
#[derive(Default)]
pub(crate) struct Ahead {
    states: Mutex<FxHashMap<(u32, u8), State>>,
    finished: Condvar,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum State {
    /// In flight since `since`; `queued_ns`: the predicted kernel time of the whole launches
    /// that ran meanwhile (work the GPUs have queued while it plans).
    Planning { since: Instant, queued_ns: f64 },
    /// Done: misses plan at the launch.
    Done,
}

/// `HPVM_MGPU_PLAN_AHEAD`.
pub(crate) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| match std::env::var("HPVM_MGPU_PLAN_AHEAD").unwrap_or_default().trim() {
        "" => {
            // Dry-run devices stand in for GPUs: the runtime's work they measure is a GPU
            // run's (HeCBench mask's six one-launch kernels, each with maps made for its
            // values, took 8-12 ms of ISL apiece on `dry:4` inline, 0.01 s against 0.06-0.09).
            let devs = crate::devices::devices();
            (devs.on_gpus() || devs.sims.first().is_some_and(|d| d.is_dry())) && !super::settings::strict()
        }
        "on" | "1" | "yes" => true,
        "off" | "0" | "no" => false,
        other => crate::fatal(&format!("HPVM_MGPU_PLAN_AHEAD={other}: expected `on` or `off`")),
    })
}

/// What plans ahead took, on average (ns): the expectation a waiting launch is weighed by.
static EXPECTED_NS: AtomicU64 = AtomicU64::new(FIRST_EXPECTED_NS);

fn expected_ns() -> f64 {
    EXPECTED_NS.load(Ordering::Relaxed) as f64
}

/// A node's first launch, run whole to be measured, starts planning its split ahead only where
/// it is predicted to take at least this long (ns). Waking the planning thread costs the
/// launching thread 6-20 us on a 2-core machine (a futex wake of a thread whose core sleeps),
/// which a short kernel does not hide: it made PolyBench's one-launch programs a fifth slower
/// on `dry:4` than on `dry:1`, for plans no later launch used. A node that turns out long at
/// its next launch plans then ([`Ahead::on_miss`]).
pub(crate) const SPECULATE_MIN_NS: f64 = 250_000.0;

/// What a launch whose split plan missed the caches does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Miss {
    /// Plan at the launch (after waiting for the plan ahead, if it was in flight).
    Plan,
    /// Start planning ahead ([`start`]) and run whole.
    Start,
    /// Run whole: the split is being planned ahead.
    Whole,
}

impl Ahead {
    /// A split of `node` over `devices` missed the plan caches; the launch would take
    /// `whole_ns` whole. Plan it now, or run whole while it is planned ahead (the caller starts
    /// that on [`Miss::Start`]). Where the whole launches queued since the plan ahead started
    /// cover what it is still expected to take, this waits for it and says [`Miss::Plan`];
    /// so too, with none started, where the launch was `measured` to lose more whole than its
    /// plan is expected to take (a node whose first launch was too short to plan ahead for,
    /// see [`SPECULATE_MIN_NS`], and turned out long: matmul's second of five launches).
    pub fn on_miss(&self, node: u32, devices: u8, whole_ns: f64, measured: bool) -> Miss {
        let mut states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        match states.get_mut(&(node, devices)) {
            Some(State::Done) => Miss::Plan,
            Some(State::Planning { since, queued_ns }) => {
                *queued_ns += whole_ns;
                let left = expected_ns() - since.elapsed().as_nanos() as f64;
                if *queued_ns < left {
                    return Miss::Whole;
                }
                while matches!(states.get(&(node, devices)), Some(State::Planning { .. })) {
                    states = self.finished.wait(states).unwrap_or_else(|e| e.into_inner());
                }
                Miss::Plan
            }
            None if measured && whole_ns * (1.0 - 1.0 / f64::from(devices.max(1))) > expected_ns() => Miss::Plan,
            None => {
                states.insert((node, devices), State::Planning { since: Instant::now(), queued_ns: whole_ns });
                Miss::Start
            }
        }
    }

    /// Whether planning `node` over `devices` ahead should start now, before any launch wants
    /// the split (none started or done yet); if so it counts as started.
    pub fn speculate(&self, node: u32, devices: u8) -> bool {
        let mut states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        if states.contains_key(&(node, devices)) {
            return false;
        }
        states.insert((node, devices), State::Planning { since: Instant::now(), queued_ns: 0.0 });
        true
    }

    /// A plan of `node` over `devices` made at a launch took `ns`: a slow one sends the next
    /// miss ahead again.
    pub fn planned(&self, node: u32, devices: u8, ns: u64) {
        if ns > SLOW_PLAN_NS {
            self.states.lock().unwrap_or_else(|e| e.into_inner()).remove(&(node, devices));
        }
    }

    fn done(&self, node: u32, devices: u8) {
        self.states.lock().unwrap_or_else(|e| e.into_inner()).insert((node, devices), State::Done);
        self.finished.notify_all();
    }
}

/// A launch's planning inputs, owned by the background job.
pub(crate) struct Job {
    pub module: &'static Module,
    pub ahead: &'static Ahead,
    pub node: u32,
    pub shape: &'static KernelKind,
    pub args: Vec<u8>,
    pub parent: ([i64; 3], [i64; 3]),
    pub grid: [i64; 3],
    pub order: Vec<usize>,
    pub per_device: usize,
    /// The launch's bindings where it made them; else made here, off the launch path (a
    /// speculation at a first launch, which runs whole: making them there cost that launch
    /// as much again as its own plan).
    pub bindings: Option<Bindings>,
}

type Work = Box<dyn FnOnce() + Send>;

/// The background thread: one job after another, each computed on the planning pool (in
/// parallel over its partitions, with the maps its threads parsed when the module loaded),
/// which the thread waits for without running anything else.
/// Starts the planning thread now, if it has not started (else the first plan ahead does).
pub(crate) fn start_thread() {
    queue();
}

fn queue() -> &'static Mutex<Sender<Work>> {
    static QUEUE: OnceLock<Mutex<Sender<Work>>> = OnceLock::new();
    QUEUE.get_or_init(|| {
        let (tx, rx) = channel::<Work>();
        std::thread::Builder::new()
            .name("hpvm-plan-ahead".into())
            .spawn(move || {
                for work in rx {
                    work();
                }
            })
            .unwrap_or_else(|e| crate::fatal(&format!("cannot start the planning-ahead thread: {e}")));
        Mutex::new(tx)
    })
}

/// Queues `job`'s ISL work; its node's state becomes [`State::Done`] when it has finished.
pub(crate) fn start(job: Job) {
    let work = move || {
        let t = Instant::now();
        let Job { module, ahead, node, shape, args, parent, grid, order, per_device, bindings } = job;
        let launch = Launch { module, node, shape, args: &args, parent, grid, order: &order, per_device };
        // The table only while the bindings are made: a launch that holds it may wait for
        // what this job computes next (`memo`), never for this.
        let bindings = bindings.or_else(|| super::bindings::bindings(&launch, &mut crate::memory::table()).ok());
        // A panic is ISL's or ours, and the launch that made the plan at last reports it;
        // those waiting for this one must not wait forever.
        if let Some(bindings) = bindings {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                super::memo::planner().install(|| super::split::warm(&launch, &bindings))
            }));
        }
        let ns = t.elapsed().as_nanos() as u64;
        let st = &module.stats[node as usize];
        st.plans_ahead.fetch_add(1, Ordering::Relaxed);
        st.nanos_plan_ahead.fetch_add(ns, Ordering::Relaxed);
        let old = EXPECTED_NS.load(Ordering::Relaxed);
        EXPECTED_NS.store((old + ns) / 2, Ordering::Relaxed);
        ahead.done(node, order.len() as u8);
    };
    // The thread lives as long as the process: the send cannot fail.
    let _ = queue().lock().unwrap_or_else(|e| e.into_inner()).send(Box::new(work));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_miss_starts_one_plan_ahead_and_runs_whole_until_it_is_done() {
        let a = Ahead::default();
        // Launches far shorter than a plan ahead run whole while it is in flight.
        assert_eq!(a.on_miss(3, 2, 1_000.0, true), Miss::Start);
        assert_eq!(a.on_miss(3, 2, 1_000.0, true), Miss::Whole, "one plan ahead in flight per node and device count");
        // Another device count is another plan.
        assert_eq!(a.on_miss(3, 4, 1_000.0, true), Miss::Start);
        a.done(3, 2);
        assert_eq!(a.on_miss(3, 2, 1_000.0, true), Miss::Plan);
        assert_eq!(a.on_miss(3, 4, 1_000.0, true), Miss::Whole);
        // A fast plan at the launch keeps planning there; a slow one sends the next miss ahead.
        a.planned(3, 2, SLOW_PLAN_NS / 2);
        assert_eq!(a.on_miss(3, 2, 1_000.0, true), Miss::Plan);
        a.planned(3, 2, SLOW_PLAN_NS * 2);
        assert_eq!(a.on_miss(3, 2, 1_000.0, true), Miss::Start);
        // Speculation starts once, and not where a plan ahead is in flight or done.
        assert!(a.speculate(5, 2));
        assert!(!a.speculate(5, 2));
        assert!(!a.speculate(3, 4));
    }

    #[test]
    fn a_long_measured_launch_with_no_plan_ahead_plans_at_once() {
        let a = Ahead::default();
        // Measured at ten times a plan's expected time: running it whole would lose more.
        let long = expected_ns() * 10.0;
        assert_eq!(a.on_miss(9, 2, long, true), Miss::Plan);
        // The same time, but a floor for a launch not measured yet: planned ahead.
        assert_eq!(a.on_miss(9, 2, long, false), Miss::Start);
        assert_eq!(a.on_miss(9, 4, long / 20.0, true), Miss::Start);
    }

    #[test]
    fn a_launch_waits_for_the_plan_ahead_once_queued_work_covers_it() {
        let a: &'static Ahead = Box::leak(Box::default());
        assert!(a.speculate(7, 2));
        // Queued whole launches longer than any plan: this one waits, and plans once it is done.
        let waiter = std::thread::spawn(move || a.on_miss(7, 2, 1e12, true));
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!waiter.is_finished(), "it returned before the plan ahead finished");
        a.done(7, 2);
        assert_eq!(waiter.join().unwrap(), Miss::Plan);
    }
}
