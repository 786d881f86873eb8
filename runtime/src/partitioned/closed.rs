//! Closed forms of access maps: a partition's elements without ISL on the launch path.
//!
//! ISL computes, once per map and block shape, the elements a map reaches from a box of
//! instances as a function of the box's bounds and the launch's scalars
//! ([`isl_glue::AccessMap::closed_box`]). A launch with new scalar values (a Gaussian
//! elimination's row, a wavefront's diagonal) then evaluates that function in microseconds
//! instead of asking ISL again, which took milliseconds per map.
//!
//! Invariants:
//! - A closed form answers exactly what ISL would (the property test in `isl-glue` checks
//!   it against ISL), or a superset where the caller allows one (reads); otherwise the caller
//!   asks ISL.
//! - A map ISL cannot summarise within its bound of operations is remembered as such, so its
//!   cost is paid once.

use super::memo::Reached;
use crate::hash::FxHashMap;
use isl_glue::{BlockRange, Bound, ClosedBox, ClosedCond, Rect};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Blocks of a closed form: per ranged block, its id and offset parameters and its size.
type Blocks = Vec<(String, String, i64)>;

/// What a closed form of a map depends on: the map, the values of its parameters that stay
/// fixed, its ranged blocks, and which instance dimensions are cut by a box (those without
/// ranged blocks).
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    map: String,
    fixed: Vec<(String, i64)>,
    blocks: Blocks,
    boxed: Vec<usize>,
}

/// Closed forms by key, made on first use; `None` for a text ISL made none of.
type Cache<K, T> = Mutex<Option<FxHashMap<K, Option<Arc<T>>>>>;

/// Closed forms of maps by key.
static CLOSED: Cache<Key, ClosedBox> = Mutex::new(None);

/// Closed forms of parameter conditions, by text, fixed values and ranged blocks.
static CONDS: Cache<CondKey, ClosedCond> = Mutex::new(None);

/// A condition's text, the values fixed in its closed form, and its ranged blocks.
type CondKey = (String, Vec<(String, i64)>, Blocks);

/// Per map or condition text: the values it was first planned with, and the parameters seen
/// with other values since. Only those stay parameters of its closed form; the others are
/// fixed, which keeps ISL's work and the expressions small. Until one varies there is no
/// closed form: a closed form costs ISL more than one partition's elements the direct way
/// (18 ms against 2-14 ms for a Gaussian elimination's maps), and launches with the same
/// values find their plans in the caches. A parameter that varies makes one closed form
/// with it free, which every later launch evaluates.
struct Seen {
    first: Vec<(String, i64)>,
    varying: Vec<String>,
    /// ISL made no closed form of it (too complex, or an operation the evaluator lacks): it
    /// would not with more parameters free either.
    none: bool,
}

static SEEN: Mutex<Option<FxHashMap<String, Seen>>> = Mutex::new(None);

/// Held while a closed form is made: the partitions of a launch plan in parallel and want the
/// same ones, which one of them makes while the others wait for it.
static MAKING: Mutex<()> = Mutex::new(());

/// Nanoseconds ISL spent making closed forms, and how many it made or found impossible (the
/// statistics' planning work).
pub(crate) static NANOS: AtomicU64 = AtomicU64::new(0);
pub(crate) static MADE: AtomicU64 = AtomicU64::new(0);

/// Forgets every closed form (benchmarks of cold plans).
pub(crate) fn forget() {
    *CLOSED.lock().unwrap_or_else(|e| e.into_inner()) = None;
    *CONDS.lock().unwrap_or_else(|e| e.into_inner()) = None;
    *SEEN.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

/// The values of `text`'s closed form to fix (those that never varied); `None` where it
/// has none, or while none has varied.
fn stable(text: &str, values: &[(&str, i64)]) -> Option<Vec<(String, i64)>> {
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    let seen = seen.get_or_insert_with(FxHashMap::default);
    let Some(s) = seen.get_mut(text) else {
        let first: Vec<(String, i64)> = values.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        seen.insert(text.to_string(), Seen { first, varying: Vec::new(), none: false });
        return None;
    };
    if s.none {
        return None;
    }
    for (n, v) in values {
        let differs = s.first.iter().find(|(m, _)| m == n).is_none_or(|(_, w)| w != v);
        if differs && !s.varying.iter().any(|m| m == n) {
            s.varying.push(n.to_string());
        }
    }
    if s.varying.is_empty() {
        return None;
    }
    let fixed = values.iter().filter(|(n, _)| !s.varying.iter().any(|m| m == n)).map(|(n, v)| (n.to_string(), *v));
    Some(fixed.collect())
}

/// ISL made no closed form of `text`.
fn none(text: &str) {
    if let Some(s) = SEEN.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(FxHashMap::default).get_mut(text)
    {
        s.none = true;
    }
}

fn blocks_of(blocks: &[BlockRange]) -> Blocks {
    blocks.iter().map(|b| (b.id.clone(), b.offset.clone(), b.size)).collect()
}

/// The closed form cached under `key` in `cache`, made by `make` (with ISL) where there is
/// none yet: one thread makes it while the others wait ([`MAKING`]), its time and count go to
/// the statistics, and a `text` ISL made none of is remembered as such ([`none`]).
fn cached_or_made<K: std::hash::Hash + Eq + Clone, T>(
    cache: &Cache<K, T>,
    key: &K,
    text: &str,
    make: impl FnOnce() -> Option<T>,
) -> Option<Arc<T>> {
    let known =
        || cache.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(FxHashMap::default).get(key).cloned();
    if let Some(c) = known() {
        return c;
    }
    let _making = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = known() {
        return c;
    }
    let t = std::time::Instant::now();
    let made = make().map(Arc::new);
    NANOS.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    MADE.fetch_add(1, Ordering::Relaxed);
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(FxHashMap::default)
        .insert(key.clone(), made.clone());
    if made.is_none() {
        none(text);
    }
    made
}

/// Whether the parameter condition `cond` holds for `values` and every block of `blocks`,
/// from its closed form; `None` where it has none (the caller asks ISL). A parameter the
/// condition needs and `values` lacks is an error, as ISL's answer would be.
pub(crate) fn holds(
    cond: &str,
    values: &[(&str, i64)],
    blocks: &[BlockRange],
) -> Option<Result<bool, isl_glue::Error>> {
    let fixed = stable(cond, values)?;
    let key = (cond.to_string(), fixed, blocks_of(blocks));
    let closed = cached_or_made(&CONDS, &key, cond, || {
        let fixed: Vec<(&str, i64)> = key.1.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        super::memo::with_isl(|isl| isl.closed_cond(cond, &fixed, blocks)).ok()
    })?;
    let value = |name: &str| -> Option<i64> {
        if let Some(&(_, v)) = values.iter().find(|(n, _)| *n == name) {
            return Some(v);
        }
        match isl_glue::bound_param(name)? {
            Bound::Blocks { range, upper } => blocks.get(range).map(|b| if upper { b.hi } else { b.lo }),
            Bound::Box { .. } => None,
        }
    };
    let values = match closed.params().values(value) {
        Ok(v) => v,
        Err(e) => return Some(Err(e)),
    };
    closed.eval(&values).ok().map(Ok)
}

/// The rectangles `map` reaches from the instances `lo..hi` (in the dimensions without
/// ranged blocks) and the blocks of `blocks` (one per dimension of `ranged`), from its closed
/// form; `None` where it has none, or only a superset and `superset` is not allowed, or the
/// evaluation failed: the caller asks ISL. `fixed` gives every other parameter the map names.
#[allow(clippy::too_many_arguments)]
pub(crate) fn rects(
    map: &str,
    fixed: &[(&str, i64)],
    lo: &[i64],
    hi: &[i64],
    blocks: &[BlockRange],
    ranged: &[usize],
    shape: &[i64],
    superset: bool,
) -> Option<Reached> {
    let fixed_now = stable(map, fixed)?;
    let key = Key {
        map: map.to_string(),
        fixed: fixed_now,
        blocks: blocks_of(blocks),
        boxed: (0..lo.len()).filter(|d| !ranged.contains(d)).collect(),
    };
    let closed = cached_or_made(&CLOSED, &key, map, || {
        let fixed: Vec<(&str, i64)> = key.fixed.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        super::memo::with_parsed_map(map, |m| m.closed_box(&fixed, blocks, &key.boxed)).ok()
    })?;
    if !closed.exact && !superset {
        return None;
    }
    let value = |name: &str| -> Option<i64> {
        if let Some(&(_, v)) = fixed.iter().find(|(n, _)| *n == name) {
            return Some(v);
        }
        match isl_glue::bound_param(name)? {
            Bound::Box { dim, upper } if key.boxed.contains(&dim) => Some(if upper { hi[dim] } else { lo[dim] }),
            Bound::Blocks { range, upper } => blocks.get(range).map(|b| if upper { b.hi } else { b.lo }),
            Bound::Box { .. } => None,
        }
    };
    let values = closed.params().values(value).ok()?;
    let boxes = closed.eval(&values).ok()?;
    let mut out: Vec<Rect> = Vec::new();
    for b in &boxes {
        out.extend(isl_glue::box_rects(b, shape).ok()?);
    }
    if boxes.len() > 1 {
        out.sort();
        out.dedup();
    }
    Some((Arc::new(out), !closed.exact))
}
