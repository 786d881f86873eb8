//! Nodes whose maps failed their conditions at a launch and were made again for its values
//! with the arrays' extents built in (`split`'s `respecialize`, [`super::special`]). From then
//! on a plan of a partitionable one depends on every integer parameter, as a specializable
//! node's always does ([`super::bindings::named_params`]); what was derived from the old set
//! (`cache::Launches::named`) is derived again when [`generation`] moves.
//!
//! Below the planner's other files: `bindings`, `cache`, `special` and `split` all ask it.

use crate::module::Module;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// (source hash, node name) of each such node.
static RESPECIALIZED: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

/// Bumped whenever a node joins [`RESPECIALIZED`].
static GENERATION: AtomicU64 = AtomicU64::new(0);

fn key(module: &Module, dn: &dashdb::Node) -> (String, String) {
    (module.analysis.as_ref().map_or_else(String::new, |db| db.source.hash.clone()), dn.name.clone())
}

/// Records that `dn`'s maps were made again for a launch's values.
pub(crate) fn mark(module: &Module, dn: &dashdb::Node) {
    let key = key(module, dn);
    let mut set = RESPECIALIZED.lock().unwrap_or_else(|e| e.into_inner());
    if !set.contains(&key) {
        set.push(key);
        GENERATION.fetch_add(1, Ordering::Release);
    }
}

/// Whether [`mark`] recorded `dn`.
pub(crate) fn marked(module: &Module, dn: &dashdb::Node) -> bool {
    GENERATION.load(Ordering::Acquire) > 0
        && RESPECIALIZED.lock().unwrap_or_else(|e| e.into_inner()).contains(&key(module, dn))
}

/// How many nodes [`mark`] added.
pub(crate) fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}
