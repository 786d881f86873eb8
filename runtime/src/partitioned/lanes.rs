//! Launches on a program's streams (CUDA streams other than the default one, each a lane of
//! its GPU): what they leave in flight decides which kernels of other streams may run beside
//! them, so it is as exact as it needs to be, and no more.
//!
//! A launch on one GPU is planned whole, for any scalars, without its maps
//! ([`super::bindings::plan_direct`]): its footprint is then its buffers, whole. That costs
//! nothing where no other stream's work in flight touches those buffers, the common case
//! (StreamPriorities' two streams copy their own arrays; its first launch spent 3.7 ms of ISL
//! on an exact footprint no other work needed). Where the launch meets such work, the maps
//! are asked (ISL) for what it touches exactly, and so, once, for each whole-buffer launch of
//! another stream it meets ([`inflight::Refine`]): kernels of streams that write different
//! parts of one buffer (simpleHyperQ's 64) still run beside one another.
//!
//! Invariants:
//! - an entry in flight is whole buffers or what the launch's plan with maps says it touches
//!   (the plan a launch on a lane always had before): never less than the kernel touches;
//! - a refinement whose plan binds other buffers than the whole one did (the memory changed
//!   meanwhile) leaves the whole buffers.

use super::bindings::{self, Launch};
use super::cache::{Key, Launches};
use super::gpu;
use super::memo::planner;
use super::plan::{LaunchPlan, Outcome};
use super::split;
use crate::desc::KernelKind;
use crate::devices::inflight::{self, Access, LaneConflicts, Refine, Slots};
use crate::memory::Table;
use std::sync::Arc;

/// The plan launch `p` on a program lane runs with, where not the whole one it got (`whole`):
/// its plan with maps, where other streams' work in flight shares its buffers. With it, for a
/// launch that keeps the whole plan, how to refine what it leaves in flight later.
pub(super) fn footing(p: Place, whole: &LaunchPlan, table: &mut Table) -> (Option<Arc<Outcome>>, Option<Refine>) {
    let on_lane = inflight::program_lane().is_some() && crate::devices::devices().on_gpus();
    if !on_lane || !whole.scalar_free || p.order.len() != 1 {
        return (None, None);
    }
    let k = p.order[0];
    let st = &p.module.stats[p.node as usize];
    match Slots::lane_conflicts(k, &gpu::kernels_footprint(whole, k)) {
        LaneConflicts::None => (None, Some(refiner(p, whole))),
        LaneConflicts::Some { refinable, exact_helps } => {
            for (id, refine) in refinable {
                if let Some(exact) = refine.downcast_ref::<Whole>().and_then(|w| w.exact(table)) {
                    Slots::refine(id, &exact);
                }
            }
            // Behind work that said nothing of what it touches, this launch waits for all of
            // it whatever it touches.
            if !exact_helps {
                return (None, Some(refiner(p, whole)));
            }
            st.lane_exact_plans.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            super::policy::log_line!(
                "{} on a stream: planned with its maps (other streams' work in flight shares its buffers)",
                p.module.node(p.node).shown()
            );
            // Where the maps send the launch to the host (a pointer they cannot place), the
            // whole buffers stay: the devices still run it.
            match with_maps(&p, table) {
                Some(exact) if matches!(&*exact, Outcome::Devices(_)) => (Some(exact), None),
                _ => (None, Some(refiner(p, whole))),
            }
        }
    }
}

/// A launch, owned: the refinement of its entries runs at a later launch.
pub(super) struct Place {
    pub module: &'static crate::module::Module,
    pub plans: &'static Launches,
    pub node: u32,
    pub shape: &'static KernelKind,
    pub key: Key,
    pub grid: [i64; 3],
    /// Its device (one).
    pub order: Vec<usize>,
}

/// A launch left in flight with whole buffers ([`inflight::Refine`]): the buffers it bound.
struct Whole {
    place: Place,
    ids: Vec<u64>,
}

impl Whole {
    /// Its entries from its plan with maps, where that binds the buffers the whole plan
    /// bound (else the memory changed meanwhile, and the whole buffers stay).
    fn exact(&self, table: &mut Table) -> Option<Vec<Access>> {
        let exact = with_maps(&self.place, table)?;
        let Outcome::Devices(lp) = &*exact else { return None };
        let same = lp.buffers.iter().all(|&(_, id)| self.ids.contains(&id));
        same.then(|| gpu::lane_accesses(lp, self.place.order[0]))
    }
}

fn refiner(place: Place, whole: &LaunchPlan) -> Refine {
    Arc::new(Whole { place, ids: whole.buffers.iter().map(|&(_, id)| id).collect() })
}

/// The launch's plan with its maps (ISL), from the plan cache or made and cached there under
/// its map inputs; `None` where its pointers bind nothing the table tracks any more.
fn with_maps(p: &Place, table: &mut Table) -> Option<Arc<Outcome>> {
    let launch = Launch {
        module: p.module,
        node: p.node,
        shape: p.shape,
        args: &p.key.args,
        parent: p.key.parent,
        grid: p.grid,
        order: &p.order,
        per_device: 1,
    };
    let leaf = match p.shape {
        KernelKind::Blocks { leaf, .. } => *leaf,
        KernelKind::Grid => p.node,
    };
    let named = p.plans.named(leaf, || bindings::named_params(p.module, leaf));
    let at = p.key.with_inputs(p.module.node(p.node), &bindings::plan_inputs(&launch, &named));
    if let Some(plan) = p.plans.get(&at, table).filter(|plan| super::plan::inspected_unchanged(plan, table)) {
        return Some(plan);
    }
    let b = bindings::bindings(&launch, table).ok()?;
    // ISL's work runs on the planning pool, whose threads own the parsed maps; a thread of a
    // pool waits for it on a plain thread (see the folder's invariants).
    let outcome = if rayon::current_thread_index().is_none() {
        planner().install(|| split::plan_split(&launch, b, table))
    } else {
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("hpvm-plan".into())
                .spawn_scoped(s, || planner().install(|| split::plan_split(&launch, b, table)))
                .ok()?
                .join()
                .ok()
        })?
    };
    let plan = Arc::new(outcome);
    if !matches!(&*plan, Outcome::Devices(lp) if lp.provisional) {
        p.plans.insert(at, plan.clone());
    }
    Some(plan)
}
