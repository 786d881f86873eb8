//! The launch cache (the Mekong thesis's section 3.4.4, generalized): plans by launch key.
//!
//! The key holds everything a plan depends on: the node, its grid, its parent instance (maps
//! may use the parent's position), the unit's pointers (buffer bindings) and, unless the plan
//! holds for any scalars (one device running the whole grid), the leaf's block, pointers and
//! the scalars its maps name ([`super::bindings::plan_inputs`]): a scalar used only as a value
//! (a time step) does not make a new plan. A plan also names the buffers it was made for;
//! one tracked anew since is a miss.

use super::plan::Outcome;
use crate::desc::{NodeDesc, ScalarKind};
use crate::hash::FxHashMap;
use crate::memory::Table;
use std::sync::{Arc, Mutex};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub node: u32,
    pub grid: [i64; 3],
    pub parent: ([i64; 3], [i64; 3]),
    /// Devices the launch was given ([`super::policy`]): the first this many of the order.
    pub devices: u8,
    pub args: crate::args::ArgBytes,
}

impl Key {
    /// The key with every argument byte but the pointers' zeroed: where a plan that holds
    /// for any scalars ([`super::LaunchPlan::scalar_free`]) is kept.
    pub fn pointers_only(&self, unit: &NodeDesc) -> Key {
        let mut args = crate::args::ArgBytes::from_elem(0, self.args.len());
        for p in unit.params.iter().filter(|p| p.kind == ScalarKind::Pointer) {
            let (lo, hi) = (p.offset as usize, (p.offset + p.size) as usize);
            if hi <= args.len() {
                args[lo..hi].copy_from_slice(&self.args[lo..hi]);
            }
        }
        Key { node: self.node, grid: self.grid, parent: self.parent, devices: self.devices, args }
    }

    /// The key as bytes with its arguments as every rank sees them
    /// ([`crate::memory::rank_stable_args`]): what every rank of a run over ranks must launch
    /// alike ([`crate::ranks::note_launch`]).
    pub fn without_pointers(&self, unit: &NodeDesc) -> Vec<u8> {
        let mut out = crate::memory::rank_stable_args(&unit.params, &self.args);
        out.extend(self.node.to_le_bytes());
        for v in self.grid.iter().chain(&self.parent.0).chain(&self.parent.1) {
            out.extend(v.to_le_bytes());
        }
        out.push(self.devices);
        out
    }

    /// [`Key::pointers_only`] followed by `inputs` ([`super::bindings::plan_inputs`]): where
    /// any other plan is kept.
    pub fn with_inputs(&self, unit: &NodeDesc, inputs: &[i64]) -> Key {
        let mut key = self.pointers_only(unit);
        key.args.extend(inputs.iter().flat_map(|v| v.to_le_bytes()));
        key
    }
}

/// Plans kept per module before the cache starts over (a program launching with ever new
/// scalars should not grow without bound).
const MAX_PLANS: usize = 4096;

/// A leaf's named parameters, and the [`super::respecialized::generation`] they were found at.
type Named = (u64, Arc<Vec<u32>>);

#[derive(Default)]
pub struct Launches {
    plans: Mutex<FxHashMap<Key, Arc<Outcome>>>,
    /// Per leaf, the parameters its maps name ([`super::bindings::named_params`]), found when
    /// [`super::respecialized::generation`] was the number kept.
    named: Mutex<FxHashMap<u32, Named>>,
    /// Per node, what its launches measured for the split policy.
    pub(crate) policy: super::policy::Records,
    /// Per node and device count, its split planned ahead ([`super::ahead`]).
    pub(crate) ahead: super::ahead::Ahead,
    /// Per unit, its last launch that may be replayed ([`super::replay`]).
    pub(crate) replays: super::recorded::Replays,
    /// Per unit, how long its last split plan took to make ([`Launches::plans_quickly`]).
    split_nanos: Mutex<FxHashMap<u32, u64>>,
    /// Per unit (by node), its last launches' keys and plans ([`Launches::recent`]).
    recent: Mutex<Vec<[Option<Recent>; RECENT]>>,
}

/// Launches remembered per unit: a loop's launches of one kernel alternate between a few
/// argument lists at most (a stencil's two buffers, swapped).
const RECENT: usize = 2;

/// A launch's key and plan, and the [`super::respecialized::generation`] it was planned at
/// (the keys the cache holds depend on it).
struct Recent {
    key: Key,
    generation: u64,
    plan: Arc<Outcome>,
}

/// A split plan made in less than this (from closed forms, no ISL) is made on the launching
/// thread the next time: handing it to the planning pool and waking the pool's threads cost
/// more than planning a Gaussian elimination's rows (26 of 96 us at 8 devices).
const QUICK_PLAN_NANOS: u64 = 250_000;

impl Launches {
    /// Whether unit `n`'s last split plan was made in microseconds: the next is made on the
    /// launching thread.
    pub(crate) fn plans_quickly(&self, n: u32) -> bool {
        self.split_nanos.lock().unwrap_or_else(|e| e.into_inner()).get(&n).is_some_and(|&ns| ns < QUICK_PLAN_NANOS)
    }

    /// Unit `n`'s split plan took `nanos` to make.
    pub(crate) fn planned_in(&self, n: u32, nanos: u64) {
        self.split_nanos.lock().unwrap_or_else(|e| e.into_inner()).insert(n, nanos);
    }

    /// The parameters leaf `leaf`'s maps name, found once, and again after a node's maps were
    /// made for a launch's values where the build's failed (then they name every integer).
    pub(crate) fn named(&self, leaf: u32, find: impl FnOnce() -> Vec<u32>) -> Arc<Vec<u32>> {
        let generation = super::respecialized::generation();
        let mut named = self.named.lock().unwrap_or_else(|e| e.into_inner());
        match named.get(&leaf) {
            Some((found_at, params)) if *found_at == generation => params.clone(),
            _ => {
                let params = Arc::new(find());
                named.insert(leaf, (generation, params.clone()));
                params
            }
        }
    }

    pub(crate) fn get(&self, key: &Key, table: &Table) -> Option<Arc<Outcome>> {
        let plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        let p = plans.get(key)?;
        match &**p {
            Outcome::Devices(lp) if lp.current(table) => Some(p.clone()),
            // Host outcomes depend on what is tracked now: recomputed (cheaply) every time.
            _ => None,
        }
    }

    /// The plan of a recent launch with `key`, itself: a launch like one of the last needs
    /// none of the cache's keys (building them interprets the leaf's arguments, and hashing
    /// them was a fifth of a cache hit). The same checks as [`Launches::get`]'s.
    pub(crate) fn recent(&self, key: &Key, table: &Table) -> Option<Arc<Outcome>> {
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        let generation = super::respecialized::generation();
        let r =
            recent.get(key.node as usize)?.iter().flatten().find(|r| r.generation == generation && r.key == *key)?;
        match &*r.plan {
            Outcome::Devices(lp) if lp.current(table) => Some(r.plan.clone()),
            _ => None,
        }
    }

    /// `plan` is the plan of a launch with `key` (kept by [`Launches::recent`], first).
    pub(crate) fn remember(&self, key: &Key, plan: &Arc<Outcome>) {
        if !matches!(&**plan, Outcome::Devices(lp) if !lp.provisional) {
            return;
        }
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        let n = key.node as usize;
        if recent.len() <= n {
            recent.resize_with(n + 1, Default::default);
        }
        let slots = &mut recent[n];
        let generation = super::respecialized::generation();
        let fresh = |r: &Recent| r.generation == generation && r.key == *key;
        match slots.iter().position(|r| r.as_ref().is_some_and(fresh)) {
            // Already the first, with this plan: nothing to copy (a loop's steady state).
            Some(0) if slots[0].as_ref().is_some_and(|r| Arc::ptr_eq(&r.plan, plan)) => {}
            at => {
                let i = at.unwrap_or(RECENT - 1);
                slots[i] = Some(Recent { key: key.clone(), generation, plan: plan.clone() });
                slots[..=i].rotate_right(1);
            }
        }
    }

    pub(crate) fn clear(&self) {
        self.plans.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.recent.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    pub(crate) fn insert(&self, key: Key, plan: Arc<Outcome>) {
        let mut plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        if plans.len() >= MAX_PLANS {
            plans.clear();
        }
        plans.insert(key, plan);
    }
}
