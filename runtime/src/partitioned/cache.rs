//! The launch cache (the Mekong thesis's section 3.4.4, generalized): plans by launch key.
//!
//! The key holds everything a plan depends on: the node, its grid, its parent instance (maps
//! may use the parent's position) and the unit's argument bytes (buffer bindings and every
//! scalar). A plan also names the buffers it was made for; one tracked anew since is a miss.

use super::Outcome;
use crate::memory::Table;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub node: u32,
    pub grid: [i64; 3],
    pub parent: ([i64; 3], [i64; 3]),
    pub args: Vec<u8>,
}

/// Plans kept per module before the cache starts over (a program launching with ever new
/// scalars should not grow without bound).
const MAX_PLANS: usize = 4096;

#[derive(Default)]
pub struct Launches {
    plans: Mutex<HashMap<Key, Arc<Outcome>>>,
}

impl Launches {
    pub(crate) fn get(&self, key: &Key, table: &Table) -> Option<Arc<Outcome>> {
        let plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        let p = plans.get(key)?;
        match &**p {
            Outcome::Devices(lp) if lp.current(table) => Some(p.clone()),
            // Host outcomes depend on what is tracked now: recomputed (cheaply) every time.
            _ => None,
        }
    }

    pub(crate) fn clear(&self) {
        self.plans.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    pub(crate) fn insert(&self, key: Key, plan: Arc<Outcome>) {
        let mut plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        if plans.len() >= MAX_PLANS {
            plans.clear();
        }
        plans.insert(key, plan);
    }
}
