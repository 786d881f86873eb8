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
//! - A launch finds its forms without building their keys where it is like the last launch of
//!   the same text ([`Recent`]): the same names in the same places, the same values where the
//!   form fixed them. That is exactly when the key would be the same.
//! - A form is made on a thread of its own ([`maker`]), unless `HPVM_MGPU_CLOSED_FORMS=now`:
//!   the launch that first wants it asks ISL directly, which for one launch costs a fraction
//!   of the form (a first launch on a program's stream paid 3-7 ms per kernel shape for
//!   forms), and the launches after it evaluate the form once it is there. Either way each
//!   answer is ISL's, so which one a launch took never changes a plan.

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

/// Held while a closed form is made on a launch's thread: the partitions of a launch plan in
/// parallel and want the same ones, which one of them makes while the others wait for it.
static MAKING: Mutex<()> = Mutex::new(());

/// Work for the thread that makes forms ([`maker`]).
type Job = Box<dyn FnOnce() + Send>;

/// Keys of forms given to [`maker`] and not yet made: each is asked for once.
type Queued<K> = Mutex<Option<crate::hash::FxHashSet<K>>>;

static QUEUED_MAPS: Queued<Key> = Mutex::new(None);
static QUEUED_CONDS: Queued<CondKey> = Mutex::new(None);

/// `HPVM_MGPU_CLOSED_FORMS`: `background` (default), forms made on their own thread while
/// launches ask ISL directly; `now`, made by the launch that first wants them (benchmarks of
/// what a form costs, tests that count forms at a given launch).
pub(crate) fn in_background() -> bool {
    static BACKGROUND: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *BACKGROUND.get_or_init(|| match std::env::var("HPVM_MGPU_CLOSED_FORMS").unwrap_or_default().trim() {
        "" | "background" => true,
        "now" => false,
        other => crate::fatal(&format!("HPVM_MGPU_CLOSED_FORMS={other}: expected `background` or `now`")),
    })
}

/// The thread that makes closed forms in the background, at a low priority (as plans made
/// ahead are), with its own ISL context; started at the first form it is given. `None`
/// where it could not start: forms are then made at the launch.
fn maker() -> Option<&'static std::sync::mpsc::Sender<Job>> {
    static MAKER: std::sync::OnceLock<Option<std::sync::mpsc::Sender<Job>>> = std::sync::OnceLock::new();
    MAKER
        .get_or_init(|| {
            let (send, receive) = std::sync::mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("hpvm-closed".into())
                .spawn(move || {
                    super::memo::lower_priority();
                    while let Ok(job) = receive.recv() {
                        job();
                    }
                })
                .ok()
                .map(|_| send)
        })
        .as_ref()
}

/// Nanoseconds ISL spent making closed forms, and how many it made or found impossible (the
/// statistics' planning work).
pub(crate) static NANOS: AtomicU64 = AtomicU64::new(0);
pub(crate) static MADE: AtomicU64 = AtomicU64::new(0);

/// Forgets every closed form (benchmarks of cold plans).
pub(crate) fn forget() {
    *CLOSED.lock().unwrap_or_else(|e| e.into_inner()) = None;
    *CONDS.lock().unwrap_or_else(|e| e.into_inner()) = None;
    *SEEN.lock().unwrap_or_else(|e| e.into_inner()) = None;
    *RECENT_MAPS.lock().unwrap_or_else(|e| e.into_inner()) = None;
    *RECENT_CONDS.lock().unwrap_or_else(|e| e.into_inner()) = None;
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
///
/// In the background ([`in_background`]) a form not yet made is given to [`maker`] (once per
/// key) and this answers `None`, as for a text with no form: the caller asks ISL.
fn cached_or_made<K, T>(
    cache: &'static Cache<K, T>,
    queued: &'static Queued<K>,
    key: &K,
    text: &str,
    make: impl FnOnce() -> Option<T> + Send + 'static,
) -> Option<Arc<T>>
where
    K: std::hash::Hash + Eq + Clone + Send + 'static,
    T: Send + Sync + 'static,
{
    let known =
        || cache.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(FxHashMap::default).get(key).cloned();
    if let Some(c) = known() {
        return c;
    }
    if in_background() {
        if let Some(maker) = maker() {
            let first = queued
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert_with(Default::default)
                .insert(key.clone());
            if first {
                let (key, text) = (key.clone(), text.to_string());
                let job: Job = Box::new(move || {
                    // Bounded as a launch's own ISL work is (`HPVM_MGPU_ISL_OPERATIONS`): past
                    // the bound ISL fails, and the text has no form.
                    let operations = super::settings::isl_operations();
                    let made = made_and_counted(|| super::memo::with_isl(|isl| isl.within(operations, make).0));
                    store(cache, &key, &text, made);
                    if let Some(q) = queued.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                        q.remove(&key);
                    }
                });
                // A maker gone (the program ending) leaves the form unmade: ISL answers.
                let _ = maker.send(job);
            }
            return None;
        }
    }
    let _making = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = known() {
        return c;
    }
    let made = made_and_counted(make);
    store(cache, key, text, made.clone());
    made
}

/// `make`'s form, its time and count in the statistics.
fn made_and_counted<T>(make: impl FnOnce() -> Option<T>) -> Option<Arc<T>> {
    let t = std::time::Instant::now();
    let made = make().map(Arc::new);
    NANOS.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    MADE.fetch_add(1, Ordering::Relaxed);
    made
}

/// Keeps `made` under `key`; a `text` ISL made no form of is remembered as such ([`none`]).
fn store<K: std::hash::Hash + Eq + Clone, T>(cache: &Cache<K, T>, key: &K, text: &str, made: Option<Arc<T>>) {
    let none_made = made.is_none();
    cache.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(FxHashMap::default).insert(key.clone(), made);
    if none_made {
        none(text);
    }
}

/// Where a closed form's parameter takes its value from at a launch: the launch's values (by
/// position in the list the caller passes), or a bound of the partition's box or blocks.
#[derive(Clone, Copy, Debug)]
enum Source {
    At(usize),
    Box { dim: usize, upper: bool },
    Blocks { range: usize, upper: bool },
}

impl Source {
    /// The parameter's value for a partition with the box `lo..hi` and the blocks `blocks`:
    /// `at` gives the launch's values by position.
    fn value(self, at: impl Fn(usize) -> i64, lo: &[i64], hi: &[i64], blocks: &[BlockRange]) -> i64 {
        match self {
            Source::At(i) => at(i),
            Source::Box { dim, upper } => (if upper { hi } else { lo })[dim],
            Source::Blocks { range, upper } => {
                let b = &blocks[range];
                if upper {
                    b.hi
                } else {
                    b.lo
                }
            }
        }
    }
}

/// The closed form last found for a text, with what finding it again needs: the names of the
/// values it was found with (by position), the values it fixed, its ranged blocks and boxed
/// dimensions. A launch that passes the same names in the same places, with the same values
/// where they were fixed, would build the same key ([`stable`] finds nothing new varying):
/// it takes the form and its parameters' sources without building one, which costs a launch
/// more than evaluating the form does.
struct Recent<T> {
    text: String,
    names: Vec<String>,
    fixed: Vec<Option<i64>>,
    blocks: Blocks,
    boxed: Vec<usize>,
    found: Arc<T>,
    sources: Arc<[Source]>,
}

impl<T> Recent<T> {
    fn matches(&self, text: &str, values: &[(&str, i64)], blocks: &[BlockRange], boxed: &[usize]) -> bool {
        self.text == text
            && self.names.len() == values.len()
            && self.boxed == boxed
            && self
                .names
                .iter()
                .zip(&self.fixed)
                .zip(values)
                .all(|((n, f), (m, v))| n == m && f.is_none_or(|f| f == *v))
            && self.blocks.len() == blocks.len()
            && self
                .blocks
                .iter()
                .zip(blocks)
                .all(|((id, off, size), b)| *id == b.id && *off == b.offset && *size == b.size)
    }
}

/// [`Recent`] forms by the address of their text (checked against the text itself).
type Recents<T> = Mutex<Option<FxHashMap<usize, Recent<T>>>>;

static RECENT_MAPS: Recents<ClosedBox> = Mutex::new(None);
static RECENT_CONDS: Recents<ClosedCond> = Mutex::new(None);

fn recent<T>(
    cache: &Recents<T>,
    text: &str,
    values: &[(&str, i64)],
    blocks: &[BlockRange],
    boxed: &[usize],
) -> Option<(Arc<T>, Arc<[Source]>)> {
    let cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    let r = cache.as_ref()?.get(&(text.as_ptr() as usize))?;
    r.matches(text, values, blocks, boxed).then(|| (r.found.clone(), r.sources.clone()))
}

/// Keeps `found` as the [`Recent`] form of `text`, with the values of `fixed` (names of
/// `values`) fixed in it.
#[allow(clippy::too_many_arguments)]
fn keep<T>(
    cache: &Recents<T>,
    text: &str,
    values: &[(&str, i64)],
    fixed: &[(String, i64)],
    blocks: &[BlockRange],
    boxed: &[usize],
    found: &Arc<T>,
    sources: &Arc<[Source]>,
) {
    let r = Recent {
        text: text.to_string(),
        names: values.iter().map(|(n, _)| n.to_string()).collect(),
        fixed: values.iter().map(|(n, v)| fixed.iter().any(|(m, _)| m == n).then_some(*v)).collect(),
        blocks: blocks_of(blocks),
        boxed: boxed.to_vec(),
        found: found.clone(),
        sources: sources.clone(),
    };
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    let cache = cache.get_or_insert_with(FxHashMap::default);
    if cache.len() >= RECENT_KEPT {
        cache.clear();
    }
    cache.insert(text.as_ptr() as usize, r);
}

/// Texts a [`Recents`] keeps before it starts again.
const RECENT_KEPT: usize = 4096;

/// Each parameter's source: a name of `values` (by position), else a box bound of a
/// dimension in `boxed`, else a bound of one of `blocks` ranges; `None` for one with none.
fn sources_of(names: &[String], values: &[(&str, i64)], blocks: usize, boxed: &[usize]) -> Option<Arc<[Source]>> {
    names
        .iter()
        .map(|name| {
            if let Some(i) = values.iter().position(|(n, _)| n == name) {
                return Some(Source::At(i));
            }
            match isl_glue::bound_param(name)? {
                Bound::Box { dim, upper } if boxed.contains(&dim) => Some(Source::Box { dim, upper }),
                Bound::Blocks { range, upper } if range < blocks => Some(Source::Blocks { range, upper }),
                _ => None,
            }
        })
        .collect()
}

/// Whether the parameter condition `cond` holds for `values` and every block of `blocks`,
/// from its closed form; `None` where it has none (the caller asks ISL). A parameter the
/// condition needs and `values` lacks is an error, as ISL's answer would be.
pub(crate) fn holds(
    cond: &str,
    values: &[(&str, i64)],
    blocks: &[BlockRange],
) -> Option<Result<bool, isl_glue::Error>> {
    let (closed, sources) = match recent(&RECENT_CONDS, cond, values, blocks, &[]) {
        Some(found) => found,
        None => {
            let fixed = stable(cond, values)?;
            let key = (cond.to_string(), fixed, blocks_of(blocks));
            let make = {
                let (cond, fixed, blocks) = (key.0.clone(), key.1.clone(), blocks.to_vec());
                move || {
                    let fixed: Vec<(&str, i64)> = fixed.iter().map(|(n, v)| (n.as_str(), *v)).collect();
                    super::memo::with_isl(|isl| isl.closed_cond(&cond, &fixed, &blocks)).ok()
                }
            };
            let closed = cached_or_made(&CONDS, &QUEUED_CONDS, &key, cond, make)?;
            let names = closed.params().names();
            let Some(sources) = sources_of(names, values, blocks.len(), &[]) else {
                // A parameter without a value: ISL's answer would be this error.
                let missing =
                    names.iter().find(|n| sources_of(std::slice::from_ref(n), values, blocks.len(), &[]).is_none());
                return Some(Err(isl_glue::Error::UnknownParam(missing.cloned().unwrap_or_default())));
            };
            keep(&RECENT_CONDS, cond, values, &key.1, blocks, &[], &closed, &sources);
            (closed, sources)
        }
    };
    // Forms hold for block ids from 0 (`isl_glue::AccessMap::closed_box`): else ISL answers.
    if blocks.iter().any(|b| b.lo < 0) {
        return None;
    }
    let values: Vec<i64> = sources.iter().map(|s| s.value(|i| values[i].1, &[], &[], blocks)).collect();
    closed.eval(&values).ok().map(Ok)
}

/// A closed form made ready for one launch's partitions: where each of its parameters takes
/// its value from (a scalar of the launch, a bound of the partition's box or of its blocks),
/// resolved once per launch instead of by name per partition.
pub(crate) struct Ready {
    closed: Arc<ClosedBox>,
    sources: Arc<[Source]>,
    /// The launch's values of the map's other parameters, by position ([`Source::At`]).
    launch: Vec<i64>,
}

/// The closed form of `map` for a launch whose partitions have `dims` instance dimensions and
/// the ranged blocks `blocks` (one per dimension of `ranged`; their bounds are the
/// partitions'), `fixed` giving every other parameter the map names; `None` where it has none
/// (the caller asks ISL).
pub(crate) fn ready(
    map: &str,
    fixed: &[(&str, i64)],
    blocks: &[BlockRange],
    ranged: &[usize],
    dims: usize,
) -> Option<Ready> {
    let boxed: Vec<usize> = (0..dims).filter(|d| !ranged.contains(d)).collect();
    let (closed, sources) = match recent(&RECENT_MAPS, map, fixed, blocks, &boxed) {
        Some(found) => found,
        None => {
            let fixed_now = stable(map, fixed)?;
            let key = Key { map: map.to_string(), fixed: fixed_now, blocks: blocks_of(blocks), boxed };
            let make = {
                let (key, blocks) = (key.clone(), blocks.to_vec());
                move || {
                    let fixed: Vec<(&str, i64)> = key.fixed.iter().map(|(n, v)| (n.as_str(), *v)).collect();
                    super::memo::with_parsed_map(&key.map, |m| m.closed_box(&fixed, &blocks, &key.boxed)).ok()
                }
            };
            let closed = cached_or_made(&CLOSED, &QUEUED_MAPS, &key, map, make)?;
            let sources = sources_of(closed.params().names(), fixed, blocks.len(), &key.boxed)?;
            keep(&RECENT_MAPS, map, fixed, &key.fixed, blocks, &key.boxed, &closed, &sources);
            (closed, sources)
        }
    };
    Some(Ready { closed, sources, launch: fixed.iter().map(|&(_, v)| v).collect() })
}

/// The rectangles the closed form `r` reaches from the instances `lo..hi` (in the dimensions
/// without ranged blocks) and the blocks of `blocks`; `None` where it is only a superset and
/// `superset` is not allowed, or the evaluation failed: the caller asks ISL.
pub(crate) fn rects(
    r: &Ready,
    lo: &[i64],
    hi: &[i64],
    blocks: &[BlockRange],
    shape: &[i64],
    superset: bool,
) -> Option<Reached> {
    let closed = &r.closed;
    if !closed.exact && !superset {
        return None;
    }
    // Forms hold for instances and block ids from 0 (`isl_glue::AccessMap::closed_box`).
    if lo.iter().any(|&v| v < 0) || blocks.iter().any(|b| b.lo < 0) {
        return None;
    }
    let values: Vec<i64> = r.sources.iter().map(|s| s.value(|i| r.launch[i], lo, hi, blocks)).collect();
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

/// The closed forms one launch's partitions use, by map: made ready by the first partition
/// that needs one ([`ready`]), shared by the others. Keyed by the map text's address: every
/// partition reads the same argument's map, and a text met at two addresses is made ready
/// twice, which costs time, never a wrong answer.
#[derive(Default)]
pub(crate) struct Launch {
    forms: Mutex<Vec<(usize, Option<Arc<Ready>>)>>,
}

impl Launch {
    /// The ready closed form of `map`, made by `make` the first time.
    pub(crate) fn get(&self, map: &str, make: impl FnOnce() -> Option<Ready>) -> Option<Arc<Ready>> {
        let at = map.as_ptr() as usize;
        let known =
            |forms: &[(usize, Option<Arc<Ready>>)]| forms.iter().find(|(m, _)| *m == at).map(|(_, r)| r.clone());
        if let Some(r) = known(&self.forms.lock().unwrap_or_else(|e| e.into_inner())) {
            return r;
        }
        // Made outside the lock: the partitions that want other maps need not wait.
        let made = make().map(Arc::new);
        let mut forms = self.forms.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = known(&forms) {
            return r;
        }
        forms.push((at, made.clone()));
        made
    }
}
