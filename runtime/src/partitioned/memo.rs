//! What ISL computed, remembered: the maps each planning thread parsed and fixed, the
//! rectangles maps reach from boxes of instances, decided parameter conditions, grid-stride
//! loops' ends; and the planning pool whose threads own the ISL contexts.
//!
//! Invariants:
//! - ISL objects stay on the thread that made them (ISL contexts are single-threaded): parsed
//!   and fixed maps are per thread; what crosses threads is plain data (rectangles, booleans);
//! - every cache is bounded ([`KEPT`] entries) and starts over when full;
//! - [`forget_intervals`] empties them all (benchmarks of cold plans).

use super::settings::partitions_per_device;
use crate::devices::devices;
use crate::hash::FxHashMap;
use isl_glue::{AccessMap, BlockRange, Isl, Rect};
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The pool plans are computed on (ISL work, in parallel over partitions): separate from the
/// main pool, so that no main-pool worker waits in rayon while it holds the buffer table.
/// No larger than the machine's cores, nor than a launch's partitions, whatever the main
/// pool's size: each of its threads keeps its own ISL context and parses every map of the
/// program once ([`prefetch`]), so a pool of thousands (`HPVM_MGPU_THREADS=4096`)
/// spent a minute on that alone.
pub(crate) fn planner() -> &'static rayon::ThreadPool {
    static PLANNER: std::sync::OnceLock<rayon::ThreadPool> = std::sync::OnceLock::new();
    PLANNER.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        // Plans are computed in parallel over a launch's partitions only: more threads than
        // partitions would each parse every map ([`prefetch`]) for nothing (on a GPU
        // machine of 32 cores, 30 of 32 threads on two GPUs).
        let partitions = (devices().count() * partitions_per_device()).max(1);
        rayon::ThreadPoolBuilder::new()
            .num_threads(crate::pool::pool().current_num_threads().min(cores).min(partitions))
            .thread_name(|i| format!("hpvm-plan-{i}"))
            .start_handler(|_| lower_priority())
            .build()
            .unwrap_or_else(|e| crate::fatal(&format!("cannot start the planning pool: {e}")))
    })
}

/// Lowers the calling thread's scheduling priority (nice 10): plans made ahead are background
/// work, and on a machine with few cores they took the program's own threads' time (PolyBench's
/// jacobi2D on 8 dry-run devices and 2 cores: 1.44x its one-device wall). A plan the launching
/// thread waits for loses nothing: that thread waits meanwhile.
pub(crate) fn lower_priority() {
    // SAFETY: plain system calls on the calling thread; failure leaves the priority as it was.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 10);
    }
}

/// The value of an array extent: `*` (unknown, outermost) is 0; a number or a parameter
/// name directly; anything else through ISL.
pub(crate) fn extent(text: &str, fixed: &[(&str, i64)]) -> Result<i64, isl_glue::Error> {
    let text = text.trim();
    if text == "*" {
        return Ok(0);
    }
    if let Ok(v) = text.parse::<i64>() {
        return Ok(v);
    }
    if let Some((_, v)) = fixed.iter().find(|(n, _)| *n == text) {
        return Ok(*v);
    }
    ISL.with(|isl| isl.value_of(text, fixed))
}

/// Rectangles a map reaches, and whether they are a superset (see [`element_rects`]).
pub(crate) type Reached = (Arc<Vec<Rect>>, bool);

/// What the elements a map reaches from a box of instances depend on: nothing else, so
/// launches that differ only in their buffers (a stencil's two directions) share them.
#[derive(Clone, PartialEq, Eq, Hash)]
struct RectKey {
    map: String,
    fixed: Vec<(String, i64)>,
    lo: Vec<i64>,
    hi: Vec<i64>,
    blocks: Vec<BlockRange>,
    shape: Vec<i64>,
    superset: bool,
    rounds: Option<Rounds>,
}

/// Rounds of a grid-stride loop (see [`isl_glue::AccessMap::in_rounds`]): the dimension, the
/// instances one round moves the box by, and how many rounds.
pub(crate) type Rounds = (usize, i64, i64);

/// [`element_rects`] with the instances in rounds: one pass of ISL, rows apart per round.
/// Round `k`'s rows sit `k × ROUND_ROWS` rows of the array's outer dimension apart, then
/// come back to their own place.
#[allow(clippy::too_many_arguments)]
pub(crate) fn element_rects_in_rounds(
    map: &str,
    fixed: &[(&str, i64)],
    lo: &[i64],
    hi: &[i64],
    blocks: &[BlockRange],
    shape: &[i64],
    superset: bool,
    rounds: Rounds,
) -> Result<Reached, isl_glue::Error> {
    let (rects, hull) = element_rects_with(map, fixed, lo, hi, blocks, shape, superset, Some(rounds))?;
    // A round's rows, in the shape with the round in front: `k × unit + row`.
    let inner: i64 = shape.iter().skip(1).take(shape.len().saturating_sub(2)).product();
    let unit = if shape.len() >= 2 { ROUND_ROWS * inner.max(1) } else { 1 };
    let back = rects
        .iter()
        .map(|r| {
            let k = (r.first_row + unit / 2).div_euclid(unit);
            let row = if shape.len() >= 2 { r.first_row - k * unit } else { 0 };
            Rect { first_row: row, ..*r }
        })
        .collect();
    Ok((Arc::new(back), hull))
}

/// How far apart rounds' rows are in [`element_rects_in_rounds`]: more than twice the rows of
/// any array a map reaches.
pub(crate) const ROUND_ROWS: i64 = 1 << 36;

/// What decides a grid-stride loop's plan beyond its partitions (see `split`).
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct StrideKey {
    /// The database's source (a node's name is unique within one, not within a program).
    pub source: String,
    pub node: String,
    pub values: Vec<(String, i64)>,
    pub blocks: [i64; 3],
    pub per_block: [i64; 3],
    /// Per argument, the first argument on the same buffer.
    pub sharing: Vec<usize>,
}

/// Per [`StrideKey`]: where the loop's iterations end, and whether they are independent.
pub(crate) static STRIDES: Mutex<Option<FxHashMap<StrideKey, (i64, bool)>>> = Mutex::new(None);

/// Entries kept in each cache below before it starts over.
pub(crate) const KEPT: usize = 1 << 14;

static RECTS: Mutex<Option<FxHashMap<RectKey, Reached>>> = Mutex::new(None);

/// Parameter conditions (`valid_when`) already decided, by text and values.
pub(crate) static KNOWN: Mutex<Option<FxHashMap<KnownKey, bool>>> = Mutex::new(None);

/// A parameter condition's text, the values it names, and the blocks it must hold for.
pub(crate) type KnownKey = (String, Vec<(String, i64)>, Vec<BlockRange>);

/// Bumped to make every thread drop its maps with fixed parameters, and its parsed maps.
static FIXED_GENERATION: AtomicU64 = AtomicU64::new(0);
static PARSED_GENERATION: AtomicU64 = AtomicU64::new(0);

/// Forgets every interval and map with fixed parameters, and with `parsed` the parsed maps
/// too (benchmarks of cold plans).
pub(crate) fn forget_intervals(parsed: bool) {
    *RECTS.lock().unwrap_or_else(|e| e.into_inner()) = None;
    *KNOWN.lock().unwrap_or_else(|e| e.into_inner()) = None;
    *STRIDES.lock().unwrap_or_else(|e| e.into_inner()) = None;
    FIXED_GENERATION.fetch_add(1, Ordering::Relaxed);
    if parsed {
        PARSED_GENERATION.fetch_add(1, Ordering::Relaxed);
    }
}

/// Parses the maps of every node the database proves partitionable on every worker of the
/// planning pool, in the background: parsing is the costliest ISL step of a plan, and each worker
/// needs its own copy (ISL contexts are single-threaded). Called when a module is loaded.
/// Where no core is free for it, maps are parsed when a plan first needs them.
pub(crate) fn prefetch(db: &dashdb::Database) {
    let texts: Vec<String> = db
        .nodes
        .iter()
        .filter(|n| n.partitionable)
        .flat_map(|n| n.args.iter().flat_map(|a| a.read_map.iter().chain(a.write_map.iter()).cloned()))
        .collect();
    // In the background only where cores would otherwise idle beside the program's own
    // thread: on two cores the parsing ran beside the program and slowed it (PolyBench adi,
    // which never splits, took 1.5x on dry:4 what it took on dry:1).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if texts.is_empty() || cores <= planner().current_num_threads() + 1 {
        return;
    }
    let texts = Arc::new(texts);
    planner().spawn_broadcast(move |_| {
        for t in texts.iter() {
            // A map that does not parse is reported when a launch needs it.
            let _ = with_parsed_map(t, |_| Ok(()));
        }
    });
}

/// The elements `map` reaches from the instances `lo..hi`, as rectangles of `shape`. With
/// `superset` (reads, which may be over-approximated), strides and other conditions on
/// existential variables are dropped first: `row % 2 == 0 && col % 2 == 1` reads make sets
/// of many strided pieces whose exact rows take ISL a long time, while their superset is a
/// few boxes, and copying whole runs is as cheap as copying every other element. The flag
/// returned says whether the rectangles are such a superset.
pub(crate) fn element_rects(
    map: &str,
    fixed: &[(&str, i64)],
    lo: &[i64],
    hi: &[i64],
    blocks: &[BlockRange],
    shape: &[i64],
    superset: bool,
) -> Result<Reached, isl_glue::Error> {
    element_rects_with(map, fixed, lo, hi, blocks, shape, superset, None)
}

#[allow(clippy::too_many_arguments)]
fn element_rects_with(
    map: &str,
    fixed: &[(&str, i64)],
    lo: &[i64],
    hi: &[i64],
    blocks: &[BlockRange],
    shape: &[i64],
    superset: bool,
    rounds: Option<Rounds>,
) -> Result<Reached, isl_glue::Error> {
    let fixed: Vec<(String, i64)> = fixed.iter().map(|(n, v)| (n.to_string(), *v)).collect();
    let key = RectKey {
        map: map.to_string(),
        fixed,
        lo: lo.to_vec(),
        hi: hi.to_vec(),
        blocks: blocks.to_vec(),
        shape: shape.to_vec(),
        superset,
        rounds,
    };
    if let Some(r) = RECTS.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(FxHashMap::default).get(&key) {
        return Ok(r.clone());
    }
    let rects = with_fixed_map(&key.map, &key.fixed, blocks, |m| {
        let over = m.copy()?.over_blocks(blocks)?;
        let (range, shape) = match rounds {
            None => (over.restrict_to_box(lo, hi)?.range()?, shape.to_vec()),
            Some((d, span, n)) => {
                // The round in front, and the outer extent wide enough to keep rounds apart.
                let mut wide = vec![n];
                wide.extend(
                    shape.iter().enumerate().map(|(i, &e)| if i == 0 && shape.len() >= 2 { ROUND_ROWS } else { e }),
                );
                (over.in_rounds(d, lo, hi, span, n)?.range()?, wide)
            }
        };
        let hull = superset && range.local_vars()? > 0;
        let range = if hull { range.remove_divs()? } else { range };
        Ok((Arc::new(range.rectangles(&shape)?), hull))
    })?;
    let mut cache = RECTS.lock().unwrap_or_else(|e| e.into_inner());
    let cache = cache.get_or_insert_with(FxHashMap::default);
    if cache.len() >= KEPT {
        cache.clear();
    }
    cache.insert(key, rects.clone());
    Ok(rects)
}

/// `f` with this thread's ISL context.
pub(crate) fn with_isl<R>(f: impl FnOnce(&Isl) -> R) -> R {
    ISL.with(|isl| f(isl))
}

/// A map's text and the values its parameters are fixed to.
pub(crate) type FixedKey = (String, Vec<(String, i64)>);

thread_local! {
    /// This thread's ISL context (contexts are single-threaded); plans are computed on the
    /// planning pool, whose threads live as long as the program, so one per worker.
    static ISL: &'static Isl = Box::leak(Box::new(Isl::new()));
    /// Maps parsed, by text: parsing is the costliest step, and every partition of a launch
    /// (and every launch of the node) needs the same maps.
    static PARSED: RefCell<(u64, FxHashMap<String, AccessMap<'static>>)> = RefCell::new((0, FxHashMap::default()));
    /// Maps with their parameters fixed, by text and values.
    static FIXED: RefCell<(u64, FxHashMap<FixedKey, AccessMap<'static>>)> = RefCell::new((0, FxHashMap::default()));
}

pub(crate) fn with_parsed_map<R>(
    map: &str,
    f: impl FnOnce(&AccessMap<'static>) -> Result<R, isl_glue::Error>,
) -> Result<R, isl_glue::Error> {
    ISL.with(|isl| {
        PARSED.with(|cache| {
            let mut cache = cache.borrow_mut();
            let generation = PARSED_GENERATION.load(Ordering::Relaxed);
            if cache.0 != generation {
                *cache = (generation, FxHashMap::default());
            }
            let cache = &mut cache.1;
            if !cache.contains_key(map) {
                let m = isl.map(map)?;
                if cache.len() >= 256 {
                    cache.clear();
                }
                cache.insert(map.to_string(), m);
            }
            f(&cache[map])
        })
    })
}

/// `f` of `map` with its parameters fixed to `fixed`, but for the block parameters of
/// `blocks`, which the caller ranges over blocks.
pub(crate) fn with_fixed_map<R>(
    map: &str,
    fixed: &[(String, i64)],
    blocks: &[BlockRange],
    f: impl FnOnce(&AccessMap<'static>) -> Result<R, isl_glue::Error>,
) -> Result<R, isl_glue::Error> {
    FIXED.with(|cache| {
        let key = (map.to_string(), fixed.to_vec());
        let mut cache = cache.borrow_mut();
        let generation = FIXED_GENERATION.load(Ordering::Relaxed) + PARSED_GENERATION.load(Ordering::Relaxed);
        if cache.0 != generation {
            *cache = (generation, FxHashMap::default());
        }
        let cache = &mut cache.1;
        if !cache.contains_key(&key) {
            let values: Vec<(&str, i64)> = fixed.iter().map(|(n, v)| (n.as_str(), *v)).collect();
            let m = with_parsed_map(map, |m| {
                // Every parameter fixed: a free one would stand for all its values, which
                // over-approximates a write map.
                let ranged = |p: &String| blocks.iter().any(|b| &b.id == p || &b.offset == p);
                if let Some(free) = m.params()?.into_iter().find(|p| !ranged(p) && !fixed.iter().any(|(n, _)| n == p)) {
                    return Err(isl_glue::Error::UnknownParam(free));
                }
                m.copy()?.fix_params(&values)
            })?;
            if cache.len() >= 64 {
                cache.clear();
            }
            cache.insert(key.clone(), m);
        }
        f(&cache[&key])
    })
}
