//! Planning ahead: a node's first split is planned in the background while its launch runs
//! whole.
//!
//! A node's first split plans ask ISL for the rectangles its maps reach (milliseconds: the
//! first two splits of a CUDA stencil took 18.6 ms on two H200s, a tiled Jacobi's 50-launch
//! loop 26 ms), and a GPU launch paid that on the program's thread before its kernel was
//! even enqueued. Under the policy (`HPVM_MGPU_PARTITION=auto`) on GPUs, a launch whose split
//! plan is not cached and whose node has not been planned ahead instead runs whole on one
//! device, and ISL's part of the split is done on a thread of its own. Launches of the node
//! over as many devices run whole until that is done, then plan their splits from what it
//! left in the memo caches. Outputs never depend on it: a whole launch is bit-identical to a
//! split one.
//!
//! Invariants:
//! - the background does only ISL's work ([`super::split::warm`]: rectangles, closed forms,
//!   grid-stride ends, all plain data in the memo caches), never a plan: plans are made at a
//!   launch, from the buffer table it holds (indirect writes' indices are the buffer's bytes
//!   then), and cached as before;
//! - a node has at most one plan ahead in flight per device count;
//! - a plan made at a launch after the background's that still took long (ISL asked again, for
//!   new scalar values) sends that node's next miss to the background again, so the launch
//!   path pays ISL at most once between two plans ahead.
//!
//! `HPVM_MGPU_PLAN_AHEAD=on|off` chooses; the default is on with GPUs, off on simulated devices
//! (whose tests count splits launch by launch) and under strict checking (whose errors belong
//! to the launch).

use super::bindings::{Bindings, Launch};
use crate::desc::KernelKind;
use crate::hash::FxHashMap;
use crate::module::Module;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};

/// An inline plan that took longer than this asked ISL again: the next miss goes ahead.
pub(crate) const SLOW_PLAN_NS: u64 = 1_000_000;

/// Per node and device count, where its planning ahead stands.
#[derive(Default)]
pub(crate) struct Ahead {
    states: Mutex<FxHashMap<(u32, u8), State>>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    /// In flight on the background thread.
    Planning,
    /// Done: misses plan at the launch.
    Done,
}

/// `HPVM_MGPU_PLAN_AHEAD`.
pub(crate) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| match std::env::var("HPVM_MGPU_PLAN_AHEAD").unwrap_or_default().trim() {
        "" => crate::devices::devices().on_gpus() && !super::settings::strict(),
        "on" | "1" | "yes" => true,
        "off" | "0" | "no" => false,
        other => crate::fatal(&format!("HPVM_MGPU_PLAN_AHEAD={other}: expected `on` or `off`")),
    })
}

/// What a launch whose split plan missed the caches does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Miss {
    /// Plan at the launch.
    Plan,
    /// Start planning ahead ([`start`]) and run whole.
    Start,
    /// Run whole: the split is being planned ahead.
    Wait,
}

impl Ahead {
    /// A split of `node` over `devices` missed the plan caches: plan it now, or run whole while
    /// it is planned ahead (the caller starts that on [`Miss::Start`], once per node and
    /// device count until it is done).
    pub fn on_miss(&self, node: u32, devices: u8) -> Miss {
        let mut states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        match states.get(&(node, devices)) {
            Some(State::Done) => Miss::Plan,
            Some(State::Planning) => Miss::Wait,
            None => {
                states.insert((node, devices), State::Planning);
                Miss::Start
            }
        }
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
    pub bindings: Bindings,
}

/// The thread plans ahead run on, one job after another: a pool of its own, so that the
/// planning pool stays free for the plans launches make meanwhile (a launch running whole
/// may need one: on simulated devices it waited 4.7 ms for the planning pool when a plan
/// ahead shared it). Its ISL context and parsed maps are its own, as each planning thread's.
fn pool() -> &'static rayon::ThreadPool {
    static POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .thread_name(|_| "hpvm-plan-ahead".into())
            .build()
            .unwrap_or_else(|e| crate::fatal(&format!("cannot start the planning-ahead thread: {e}")))
    })
}

/// Queues `job`'s ISL work; the node's state becomes [`State::Done`] when it is finished.
pub(crate) fn start(job: Job) {
    pool().spawn(move || {
        let t = std::time::Instant::now();
        let Job { module, ahead, node, shape, args, parent, grid, order, per_device, bindings } = job;
        let launch = Launch { module, node, shape, args: &args, parent, grid, order: &order, per_device };
        super::split::warm(&launch, &bindings);
        let st = &module.stats[node as usize];
        st.plans_ahead.fetch_add(1, Ordering::Relaxed);
        st.nanos_plan_ahead.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        ahead.done(node, order.len() as u8);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_miss_starts_one_plan_ahead_and_runs_whole_until_it_is_done() {
        let a = Ahead::default();
        assert_eq!(a.on_miss(3, 2), Miss::Start);
        assert_eq!(a.on_miss(3, 2), Miss::Wait, "one plan ahead in flight per node and device count");
        // Another device count is another plan.
        assert_eq!(a.on_miss(3, 4), Miss::Start);
        a.done(3, 2);
        assert_eq!(a.on_miss(3, 2), Miss::Plan);
        assert_eq!(a.on_miss(3, 4), Miss::Wait);
        // A fast plan at the launch keeps planning there; a slow one sends the next miss ahead.
        a.planned(3, 2, SLOW_PLAN_NS / 2);
        assert_eq!(a.on_miss(3, 2), Miss::Plan);
        a.planned(3, 2, SLOW_PLAN_NS * 2);
        assert_eq!(a.on_miss(3, 2), Miss::Start);
    }
}
