//! Partitioned launches: a launch unit (a GPU-shaped node: an internal node launched as blocks
//! of its leaf, or a leaf over a grid cut into blocks) runs as one sub-grid per device. One
//! GPU is the case of one device: its kernels run through here too, with the same memory model.
//!
//! Per launch:
//! 1. the plan ([`access`]): partitions and each one's read and write bytes per buffer,
//!    cached per launch key (node, grid, parent instance, argument bytes, which include the
//!    buffer bindings and every scalar) in [`cache::Launches`];
//! 2. the copies that make every partition's device current on what it reads, cached per
//!    coherence state of the buffers in [`LaunchPlan::copies`] (with the state after the
//!    launch, so a hit computes nothing);
//! 3. the copies, then the partitions, concurrently, each on its device;
//! 4. the coherence maps take the state after the launch: each writer the only holder of
//!    what it wrote.
//!
//! Invariants:
//! - the table of buffers is locked from step 1 to step 4, so coherence decisions and their
//!   use are atomic with respect to other launches and to the host's accesses;
//! - while it holds that lock, a worker of the main pool never waits inside rayon (a rayon
//!   wait runs other jobs of its pool on the same thread, and one of them may want the lock:
//!   a deadlock, seen with streaming pipelines). Plans are computed on the [`planner`] pool
//!   and partitions run on their devices' pools, each reached from a plain thread that the
//!   worker joins.
//!
//! This layer knows the program ([`Module`]), the memory and the devices, and nothing of how
//! the graph around a unit is interpreted: the engine hands a launch over as a [`Unit`] and
//! says how to run a box of its grid on a simulated device ([`RunBox`]).

pub(crate) mod access;
pub(crate) mod cache;
mod closed;
mod gpu;
pub(crate) mod hulls;
pub(crate) mod kernel;
pub(crate) mod policy;
pub(crate) mod reduce;

pub use cache::Launches;

use crate::args::{Args, SendPtr};
use crate::ctx::{GridBox, NodeCtx};
use crate::desc::KernelKind;
use crate::devices::{devices, Copy, Place};
use crate::memory::coherence::Coherence;
use crate::memory::{self, ByteRect, Table};
use crate::module::Module;
use crate::sink::Stopwatch;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A computed plan, or why the launch runs on the host instead of the devices.
// Plans live behind an `Arc` in the cache, one allocation each: boxing the large variant
// would only add a second.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Outcome {
    Host(String),
    Devices(LaunchPlan),
}

pub(crate) struct LaunchPlan {
    /// The tracked buffers the launch touches: start and id (the plan is stale if either
    /// changed).
    pub buffers: Vec<(u64, u64)>,
    pub parts: Vec<PartPlan>,
    /// Why the launch is not split, when it is not.
    pub unpartitioned: Option<String>,
    /// Copy plans by the coherence states they start from, most recent first.
    copies: Mutex<Vec<CachedCopies>>,
    /// Time spent making device allocations while planning (first use of a buffer).
    pub alloc_nanos: u64,
    /// The GPU kernel may read its `in`-only buffers through the read-only data cache.
    pub read_only_cache: bool,
    /// The index values an indirect write's partitions were computed from: the plan holds
    /// only while they are unchanged.
    pub inspections: Vec<access::Inspection>,
    /// The offsets of the unit's bound pointers in its arguments: a launch the plan is
    /// reused for runs with its own arguments, these slots taken from the plan's
    /// ([`LaunchPlan::part_args`]).
    pub pointer_slots: Vec<usize>,
    /// The plan holds for any scalar arguments (one device running the whole grid): it is
    /// cached under the unit's pointers alone ([`cache::Key::pointers_only`]).
    pub scalar_free: bool,
    /// Where a device's memory holds less than its partitions need together (sparse copies
    /// under a limit, [`memory::residency`]): the partitions in rounds, each round at most
    /// one partition per device, run one after another, each with its own copy plans.
    /// Empty: all partitions at once.
    pub rounds: Vec<LaunchPlan>,
    /// The grid the kernels see, when it is not the launch's: a grid-stride loop whose
    /// iterations run one per thread over the virtual grid of its iterations
    /// (`access::split`).
    pub virtual_grid: Option<[i64; 3]>,
    /// Arguments updated only by combining atomics, split: every device but the home one
    /// updates a private copy, combined after the partitions ([`reduce`]).
    pub reductions: Vec<reduce::Reduce>,
}

#[derive(Clone)]
pub(crate) struct PartPlan {
    pub device: usize,
    /// The part of the unit's grid it runs.
    pub bx: GridBox,
    /// The unit's arguments with device addresses.
    pub args: Vec<u8>,
    /// (buffer index, bytes) it reads, may-write regions included.
    pub reads: Vec<(usize, ByteRect)>,
    pub writes: Vec<(usize, ByteRect)>,
}

/// A cached copy plan and the coherence states of the plan's buffers it starts from.
struct CachedCopies {
    /// Replaced, on every match, by the states the match found: equal to them, and sharing
    /// their segments, so the next match in a loop's steady state compares pointers
    /// ([`Coherence`]'s equality) instead of maps.
    before: Vec<Coherence>,
    plan: Arc<CopyPlan>,
}

struct CopyPlan {
    copies: Vec<Copy>,
    /// What each copy reads: (buffer index, byte range within the buffer).
    sources: Vec<Source>,
    /// Each buffer's state after the launch; `None` where it equals the state before (the
    /// launch neither copies into it nor writes it, or rewrites what its writers held): the
    /// map is left as found, sharing its segments with whatever else matched them.
    after: Vec<Option<Coherence>>,
}

/// The bytes a copy reads: `start..end` of buffer `buffer` (an index into the plan's buffers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Source {
    pub buffer: usize,
    pub start: u64,
    pub end: u64,
}

/// Copy plans kept per launch plan: enough for the states a loop cycles through.
const COPY_PLANS_KEPT: usize = 4;

impl LaunchPlan {
    pub fn new(buffers: Vec<(u64, u64)>, parts: Vec<PartPlan>, unpartitioned: Option<String>) -> LaunchPlan {
        LaunchPlan {
            buffers,
            parts,
            unpartitioned,
            copies: Mutex::new(Vec::new()),
            alloc_nanos: 0,
            read_only_cache: false,
            inspections: Vec::new(),
            pointer_slots: Vec::new(),
            scalar_free: false,
            rounds: Vec::new(),
            virtual_grid: None,
            reductions: Vec::new(),
        }
    }

    /// The partitions grouped in rounds: round `r` holds each device's `r`-th partition.
    fn round_groups(&self) -> Vec<Vec<PartPlan>> {
        let mut rounds: Vec<Vec<PartPlan>> = Vec::new();
        let mut seen: Vec<usize> = Vec::new();
        for p in &self.parts {
            if seen.len() <= p.device {
                seen.resize(p.device + 1, 0);
            }
            let r = seen[p.device];
            seen[p.device] += 1;
            if rounds.len() <= r {
                rounds.resize(r + 1, Vec::new());
            }
            rounds[r].push(p.clone());
        }
        rounds
    }

    /// Whether every round of the plan (or the whole plan, run at once) fits the devices'
    /// memory limits.
    fn fits_memory(&self, in_rounds: bool) -> bool {
        if !in_rounds {
            return memory::residency::fits(&self.residency_needs());
        }
        self.round_groups().into_iter().all(|parts| {
            let r = LaunchPlan::new(self.buffers.clone(), parts, None);
            memory::residency::fits(&r.residency_needs())
        })
    }

    /// Splits the plan into rounds where a device has more than one partition.
    fn make_rounds(&mut self) {
        let groups = self.round_groups();
        if groups.len() < 2 {
            return;
        }
        self.rounds = groups
            .into_iter()
            .map(|parts| {
                let mut r = LaunchPlan::new(self.buffers.clone(), parts, self.unpartitioned.clone());
                r.read_only_cache = self.read_only_cache;
                r
            })
            .collect();
    }

    /// Part `p`'s arguments for a launch with the unit's arguments `launch` (host
    /// addresses): the launch's scalars (which may differ from those the plan was made
    /// with, where the plan does not depend on them) with the plan's device pointers.
    fn part_args<'a>(&self, p: &'a PartPlan, launch: &[u8]) -> std::borrow::Cow<'a, [u8]> {
        if launch.len() != p.args.len() {
            return std::borrow::Cow::Borrowed(&p.args[..]);
        }
        let mut args = launch.to_vec();
        for &o in &self.pointer_slots {
            args[o..o + 8].copy_from_slice(&p.args[o..o + 8]);
        }
        if args == p.args {
            std::borrow::Cow::Borrowed(&p.args[..])
        } else {
            std::borrow::Cow::Owned(args)
        }
    }

    /// The byte ranges each partition's device must back ([`memory::residency`]): the rows
    /// of what it reads and writes.
    fn residency_needs(&self) -> Vec<memory::residency::Need> {
        let mut needs = Vec::new();
        for p in &self.parts {
            for &(b, rect) in p.reads.iter().chain(&p.writes) {
                let buffer = self.buffers[b].0;
                needs.extend(rect.row_runs().map(|(lo, hi)| memory::residency::Need {
                    buffer,
                    device: p.device,
                    lo,
                    hi,
                }));
            }
        }
        // Every other device's private copy of a reduction's bytes.
        for r in &self.reductions {
            let buffer = self.buffers[r.buffer].0;
            needs.extend(r.others.iter().map(|&(device, _)| memory::residency::Need {
                buffer,
                device,
                lo: r.start,
                hi: r.start + r.bytes(),
            }));
        }
        needs
    }

    /// Whether the buffers are still the ones planned for.
    fn current(&self, table: &Table) -> bool {
        self.buffers.iter().all(|&(start, id)| table.get(start).is_some_and(|b| b.id == id))
    }

    /// Takes into the coherence maps what the host wrote into the plan's buffers since it
    /// last handed them to a graph (`memory::watch`): before the copies are planned, and
    /// timed as the statistics' host-write scans, not as copy planning.
    fn account_host_writes(&self, table: &mut Table) {
        for &(s, _) in &self.buffers {
            table.get_mut(s).expect("current").account_host_writes();
        }
    }

    /// The copies this launch needs in the present state (the host's writes accounted for
    /// first: [`LaunchPlan::account_host_writes`]), with what each reads; moves the
    /// coherence maps to the state after the launch. Returns the copy plan and whether it
    /// came from the cache.
    fn copies(&self, table: &mut Table) -> (Arc<CopyPlan>, bool) {
        let mut cached = self.copies.lock().unwrap_or_else(|e| e.into_inner());
        let hit = cached.iter().position(|c| {
            self.buffers.iter().zip(&c.before).all(|(&(s, _), st)| table.get(s).is_some_and(|b| &b.coherence == st))
        });
        if let Some(i) = hit {
            let mut entry = cached.remove(i);
            for ((&(s, _), before), after) in self.buffers.iter().zip(&mut entry.before).zip(&entry.plan.after) {
                let map = &mut table.get_mut(s).expect("current").coherence;
                before.clone_from(map);
                if let Some(after) = after {
                    map.clone_from(after);
                }
            }
            let plan = entry.plan.clone();
            cached.insert(0, entry);
            return (plan, true);
        }
        let before: Vec<Coherence> =
            self.buffers.iter().map(|&(s, _)| table.get(s).expect("current").coherence.clone()).collect();
        // Each part's writes per buffer, merged: a scatter's thousands of small runs are then
        // one pass over the map each (one pass per run made planning quadratic: Parboil spmv).
        let writes: Vec<Vec<Vec<(u64, u64)>>> =
            self.parts.iter().map(|p| (0..self.buffers.len()).map(|b| merged_writes(p, b)).collect()).collect();
        let mut copies = Vec::new();
        let mut sources = Vec::new();
        for (p, written) in self.parts.iter().zip(&writes) {
            for &(b, rect) in &p.reads {
                let buf = table.get_mut(self.buffers[b].0).expect("current");
                let first = copies.len();
                // What the part also writes, its writer becomes the only holder of below:
                // recording it as a reader first changes nothing but costs a pass over the map
                // per row (Parboil lbm's padding between rows it writes: 9000 rows each).
                let record = !covers(&written[b], rect.start, rect.end());
                buf.plan_current(Place::Device(p.device), &rect, &before[b], &mut copies, record);
                let base = buf.addr(Place::Device(p.device)).unwrap_or_else(|e| crate::fatal(&e));
                sources.extend(copies[first..].iter().map(|c| {
                    let start = c.dst_addr - base;
                    Source { buffer: b, start, end: start + (c.rows - 1) * c.pitch + c.row_bytes }
                }));
            }
        }
        for (p, written) in self.parts.iter().zip(writes) {
            for (b, runs) in written.into_iter().enumerate() {
                if !runs.is_empty() {
                    let buf = table.get_mut(self.buffers[b].0).expect("current");
                    buf.coherence.set_only_runs(runs, Place::Device(p.device));
                }
            }
        }
        let after = self.buffers.iter().zip(&before).map(|(&(s, _), then)| {
            let now = &table.get(s).expect("current").coherence;
            (now != then).then(|| now.clone())
        });
        let plan = Arc::new(CopyPlan { copies, sources, after: after.collect() });
        cached.insert(0, CachedCopies { before, plan: plan.clone() });
        cached.truncate(COPY_PLANS_KEPT);
        (plan, false)
    }
}

/// Reads the settings of partitioned launches (ending the program on a bad one).
pub fn check_settings() {
    partitioning_off();
    strict();
    partitions_per_device();
    device_weight(0);
    kernel::bench_repeat();
    crate::devices::held::enabled();
    crate::devices::opening::open_at();
}

/// `HPVM_MGPU_PARTITIONS=K`: each device gets K partitions of a split launch (default 1).
pub(crate) fn partitions_per_device() -> usize {
    static K: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *K.get_or_init(|| {
        let Ok(v) = std::env::var("HPVM_MGPU_PARTITIONS") else { return 1 };
        match v.trim().parse::<usize>() {
            Ok(k) if (1..=64).contains(&k) => k,
            _ => {
                crate::fatal(&format!("HPVM_MGPU_PARTITIONS={v}: expected a number of partitions per device, 1 to 64"))
            }
        }
    })
}

/// `HPVM_MGPU_WEIGHTS=w0,w1,...`: device `k` gets a share of a split launch proportional to
/// `wk` (default: equal shares). One weight per device, non-negative, not all zero.
pub(crate) fn device_weight(k: usize) -> f64 {
    static W: std::sync::OnceLock<Vec<f64>> = std::sync::OnceLock::new();
    let w = W.get_or_init(|| {
        let Ok(v) = std::env::var("HPVM_MGPU_WEIGHTS") else { return Vec::new() };
        let n = devices().count();
        let parsed: Option<Vec<f64>> = v.split(',').map(|x| x.trim().parse::<f64>().ok()).collect();
        match parsed {
            Some(w) if w.len() == n && w.iter().all(|x| x.is_finite() && *x >= 0.0) && w.iter().any(|x| *x > 0.0) => w,
            _ => crate::fatal(&format!(
                "HPVM_MGPU_WEIGHTS={v}: expected {n} comma-separated non-negative weights, one per device, not all zero"
            )),
        }
    });
    w.get(k).copied().unwrap_or(1.0)
}

/// `HPVM_MGPU_PARTITION=off`: every unit runs whole on device 0.
pub(crate) fn partitioning_off() -> bool {
    policy::mode() == policy::Mode::Off
}

/// `HPVM_MGPU_CHECK=strict`: an access outside a buffer is an error, not a warning.
pub(crate) fn strict() -> bool {
    static STRICT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *STRICT.get_or_init(|| match std::env::var("HPVM_MGPU_CHECK").unwrap_or_default().trim() {
        "" | "warn" => false,
        "strict" => true,
        other => crate::fatal(&format!("HPVM_MGPU_CHECK={other}: expected `warn` or `strict`")),
    })
}

/// Reports, once per node and buffer, that a launch's accesses reach outside the buffer.
pub(crate) fn report_outside(node: &str, loc: &str, arg: &str, what: &str, first: i64, end: i64, len: i64) {
    static SAID: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
    let outside = if first < 0 {
        format!("elements {first}..{} before its start", end.min(0))
    } else {
        format!("elements {}..{end} past its end", first.max(len))
    };
    let msg = format!("node {node} ({loc}) {what} {outside}: `{arg}` has {len} elements from where it points");
    if strict() {
        crate::fatal(&format!("{msg} (HPVM_MGPU_CHECK=strict)"));
    }
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if !said.iter().any(|(n, a)| n == node && a == arg) {
        said.push((node.to_string(), arg.to_string()));
        eprintln!(
            "hpvm-mgpu: warning: {msg}; copies are clipped to the buffer (HPVM_MGPU_CHECK=strict makes this an error)"
        );
    }
}

/// One launch of a launch unit, as the engine hands it over.
pub struct Unit<'a> {
    pub module: &'a Module,
    /// The module's plan cache.
    pub plans: &'a Launches,
    pub node: u32,
    pub shape: &'a KernelKind,
    pub parent: SendPtr<NodeCtx>,
    pub grid: [i64; 3],
    /// Output records, one per instance of `grid` (null when the node has none).
    pub outs: SendPtr<u8>,
    /// The launch may return with its GPU work in flight (a CUDA program's kernel launch,
    /// [`crate::devices::inflight`]).
    pub asynchronous: bool,
}

/// Runs a box of a unit's grid where a place's memory is addressed (a simulated device's,
/// whose pool the call runs on), with the unit's arguments for that place: the engine's
/// interpretation of the unit, which this layer does not know.
pub type RunBox<'a> = dyn Fn(Place, GridBox, &Args) + Sync + 'a;

/// Runs the unit on the devices; false when it must run on the host instead (no devices, or
/// a reason the plan gives, such as an untracked pointer).
pub fn run_unit(u: &Unit<'_>, args: &Args, run_box: &RunBox<'_>) -> bool {
    let Unit { module, plans, node: n, shape, parent, grid, outs, .. } = *u;
    let devs = devices();
    if devs.count() == 0 {
        return false;
    }
    let total: i64 = grid.iter().product();
    let st = &module.stats[n as usize];
    let leaf = match shape {
        KernelKind::Blocks { leaf, .. } => *leaf,
        KernelKind::Grid => n,
    };
    if let Some(why) = &module.node(leaf).indirect {
        // Its pointers in memory hold the program's addresses, which only the host's copies
        // are at (see `transform::indirect`).
        memory::host_access_all();
        st.note_host(&format!("{why}: the program's addresses hold only on the host"));
        return false;
    }
    let Some(base) = args.uniform_over(total) else {
        st.note_host("its instances get different arguments through one-to-one edges");
        return false;
    };
    // On a GPU, a unit runs as its compiled kernel, if it has one that can launch; that is
    // decided before anything moves.
    let gpu_launch = match (devs.on_gpus(), &module.node(n).kernel, module.ptx) {
        (false, _, _) => None,
        (true, Some(kernel), Some(ptx)) => match kernel::prepare(module, n, kernel, &base, parent, grid) {
            Some(prepared) => Some((kernel, ptx, prepared)),
            None => {
                st.note_host(
                    "its launch does not fit the GPU (block size, grid, or arguments that differ per instance)",
                );
                return false;
            }
        },
        (true, _, _) => {
            st.note_host("it has no GPU kernel (the build said why)");
            return false;
        }
    };
    // SAFETY: the parent context outlives this call (it is the caller's).
    let (pid, pdim) = unsafe { parent.get().as_ref() }.map_or(([0; 3], [1; 3]), |p| (p.id, p.dim));

    // How many devices this launch gets (see `policy`).
    let blocks = kernel::blocks_of(shape, module.node(n).dims, grid);
    let (devices_given, mut probe) = decide(u, blocks, gpu_launch.as_ref().map(|(k, ptx, p)| (&k.name, *ptx, p)));
    let order = &devs.order[..devices_given];
    let key = cache::Key { node: n, grid, parent: (pid, pdim), devices: devices_given as u8, args: base };
    if crate::ranks::spans_ranks() {
        crate::ranks::note_launch(&key.without_pointers(module.node(n)));
    }

    let mut table = memory::table();
    let t0 = Stopwatch::start();
    // The policy's clock on a split's planning (the statistics' may be off).
    // ISL's one-time work on closed forms is not what later launches pay: left out.
    let planning = (devices_given > 1 && policy::mode() == policy::Mode::Auto)
        .then(|| (std::time::Instant::now(), closed_form_nanos()));
    let per_device = partitions_per_device();
    let launch =
        access::Launch { module, node: n, shape, args: &key.args, parent: key.parent, grid, order, per_device };
    // A plan for any scalars first (one device), then one for these map inputs.
    let general = key.pointers_only(module.node(n));
    let specific_key = || {
        let leaf = match shape {
            KernelKind::Blocks { leaf, .. } => *leaf,
            KernelKind::Grid => n,
        };
        let named = plans.named(leaf, || access::named_params(module, leaf));
        key.with_inputs(module.node(n), &access::plan_inputs(&launch, &named))
    };
    // The key for these map inputs, when looked up: made once (it interprets the leaf's
    // arguments), kept for the insertion on a miss.
    let mut specific: Option<cache::Key> = None;
    let cached = match plans.get(&general, &table) {
        Some(p) if matches!(&*p, Outcome::Devices(lp) if lp.scalar_free) => Some(p),
        _ => plans.get(specific.insert(specific_key()), &table),
    }
    .filter(|p| access::inspected_unchanged(p, &mut table));
    let plan_hit = cached.is_some();
    let plan = match cached {
        Some(p) => {
            st.plan_hits.fetch_add(1, Ordering::Relaxed);
            p
        }
        None => {
            let table = &mut *table;
            // Plans needing no maps are made here; the maps' ISL work runs on the planner
            // pool, reached from a plain thread (see the module's invariants).
            let make = |launch: &access::Launch<'_>, table: &mut Table| match access::plan_direct(launch, table) {
                Ok(outcome) => outcome,
                // A thread of no pool (the program's own) waits for the planner without
                // running other jobs: no thread of its own is needed (starting one cost more
                // than a plan from closed forms).
                Err(bindings) if rayon::current_thread_index().is_none() => {
                    planner().install(|| access::plan_split(launch, *bindings, table))
                }
                Err(bindings) => std::thread::scope(|s| {
                    std::thread::Builder::new()
                        .name("hpvm-plan".into())
                        .spawn_scoped(s, || planner().install(|| access::plan_split(launch, *bindings, table)))
                        .unwrap_or_else(|err| crate::fatal(&format!("cannot start a planning thread: {err}")))
                        .join()
                        .unwrap_or_else(|_| crate::fatal("planning a partitioned launch failed"))
                }),
            };
            let p = Arc::new(fit_memory(make(&launch, table), &launch, table, &make));
            st.plan_misses.fetch_add(1, Ordering::Relaxed);
            let alloc = match &*p {
                Outcome::Devices(lp) => lp.alloc_nanos,
                Outcome::Host(_) => 0,
            };
            st.nanos_alloc.fetch_add(alloc, Ordering::Relaxed);
            st.nanos_intervals.fetch_add(t0.nanos().saturating_sub(alloc), Ordering::Relaxed);
            // What a split plan's reductions cost to combine, for the policy (a timed launch
            // sees only its kernels).
            if let Outcome::Devices(lp) = &*p {
                if used_devices(lp) > 1 && policy::mode() == policy::Mode::Auto {
                    let bytes: u64 = lp.reductions.iter().map(reduce::Reduce::bytes).sum();
                    plans.policy.of(n).lock().unwrap_or_else(|e| e.into_inner()).reduce_bytes = bytes;
                }
            }
            let scalar_free = matches!(&*p, Outcome::Devices(lp) if lp.scalar_free);
            let at = if scalar_free { general.clone() } else { specific.take().unwrap_or_else(specific_key) };
            plans.insert(at, p.clone());
            p
        }
    };
    let lp = match &*plan {
        Outcome::Host(reason) => {
            st.note_host(reason);
            return false;
        }
        Outcome::Devices(lp) => lp,
    };
    if let Some(reason) = &lp.unpartitioned {
        st.note_unpartitioned(reason);
    }
    if !lp.rounds.is_empty() {
        let gpu = gpu_launch.as_ref().map(|(k, ptx, p)| (*k, *ptx, p));
        run_rounds(u, lp, &key.args, &mut table, run_box, gpu);
        drop(table);
        pass_outputs_through(module, n, shape, &args.for_instance(0), total, outs);
        st.unit_launches.fetch_add(1, Ordering::Relaxed);
        st.partitioned.fetch_add(u64::from(used_devices(lp) > 1), Ordering::Relaxed);
        st.max_devices.fetch_max(used_devices(lp) as u64, Ordering::Relaxed);
        st.max_rounds.fetch_max(lp.rounds.len() as u64, Ordering::Relaxed);
        return true;
    }
    let part_args: Vec<std::borrow::Cow<'_, [u8]>> = lp.parts.iter().map(|p| lp.part_args(p, &key.args)).collect();

    // Sparse copies: every partition's device backs what it reads and writes before the
    // copies into it are planned.
    if memory::residency::sparse() {
        let needs = lp.residency_needs();
        if let Err(e) = table.make_resident(&needs) {
            short_of_memory(module, n, shape, &key.args, &table, &e);
        }
    }
    lp.account_host_writes(&mut table);
    let t1 = Stopwatch::start();
    let (copy_plan, hit) = lp.copies(&mut table);
    let (copies, sources) = (&copy_plan.copies, &copy_plan.sources);
    st.nanos_copy_plan.fetch_add(t1.nanos(), Ordering::Relaxed);
    if hit { &st.copy_hits } else { &st.copy_misses }.fetch_add(1, Ordering::Relaxed);
    if plan_hit && hit {
        st.hit_launches.fetch_add(1, Ordering::Relaxed);
        st.nanos_hit_work.fetch_add(t0.nanos(), Ordering::Relaxed);
    }
    // What planning the split cost this launch, for the policy: a node whose launches keep
    // missing the caches (a scalar that changes every launch) pays it every time.
    if let Some((t, closed_before)) = planning {
        let ns = t.elapsed().as_nanos().saturating_sub(u128::from(closed_form_nanos() - closed_before)) as f64;
        plans.policy.of(n).lock().unwrap_or_else(|e| e.into_inner()).record_plan(ns);
    }

    match &gpu_launch {
        Some((kernel, ptx, prepared)) => {
            let node = module.node(n);
            let name = match (&kernel.nc_name, lp.read_only_cache) {
                (Some(nc), true) => {
                    st.read_only_cache_launches.fetch_add(1, Ordering::Relaxed);
                    nc
                }
                _ => &kernel.name,
            };
            if let Some(p) = &mut probe {
                p.used = used_devices(lp);
                // Its overhead is the launch's, not the planning's.
                p.started = std::time::Instant::now();
            }
            let launch = gpu::Launch { lp, part_args: &part_args, copies, sources, probe: probe.take() };
            let kernel_grid = lp.virtual_grid.unwrap_or(grid);
            gpu::run(module, n, launch, kernel, name, prepared, ptx, parent, kernel_grid, outs, u.asynchronous)
                .unwrap_or_else(|err| {
                    crate::fatal(&format!("node {} ({}) on the GPUs: {err}", node.shown(), node.loc))
                });
            share_outputs(module, n, shape, lp, grid, outs);
        }
        None => {
            let t2 = Stopwatch::start();
            let started = probe.as_mut().map(|p| {
                p.started = std::time::Instant::now();
                p.started
            });
            memory::execute(copies).unwrap_or_else(|err| {
                crate::fatal(&format!(
                    "node {} ({}): copying its inputs: {err}",
                    module.node(n).shown(),
                    module.node(n).loc
                ))
            });
            for c in copies {
                st.count_bytes(c);
            }
            st.nanos_copies.fetch_add(t2.nanos(), Ordering::Relaxed);
            let copied = started.map(|t| t.elapsed().as_nanos() as f64);
            let t3 = Stopwatch::start();
            let reduced = |what: &str, r: Result<(), String>| {
                r.unwrap_or_else(|err| {
                    crate::fatal(&format!(
                        "node {} ({}): {what} its reductions: {err}",
                        module.node(n).shown(),
                        module.node(n).loc
                    ))
                })
            };
            reduced("starting", reduce::start(&lp.reductions));
            let slowest = run_parts(lp, &part_args, run_box, probe.is_some());
            reduced("combining", reduce::finish(&lp.reductions));
            share_outputs(module, n, shape, lp, grid, outs);
            st.nanos_kernels.fetch_add(t3.nanos(), Ordering::Relaxed);
            if let (Some(mut p), Some(copy_ns)) = (probe.take(), copied) {
                p.used = used_devices(lp);
                p.finish(slowest, copy_ns, copy_ns + slowest, true);
            }
        }
    }
    drop(table);
    pass_outputs_through(module, n, shape, &args.for_instance(0), total, outs);

    st.unit_launches.fetch_add(1, Ordering::Relaxed);
    let used = used_devices(lp) as u64;
    if used > 1 {
        st.partitioned.fetch_add(1, Ordering::Relaxed);
    }
    st.max_devices.fetch_max(used, Ordering::Relaxed);
    true
}

/// "node NAME (FILE:LINE)" for messages about unit `n`: where the unit has no location of its
/// own (a CUDA kernel's generated grid of blocks), its leaf's (the kernel's).
fn unit_named(module: &Module, n: u32, shape: &KernelKind) -> String {
    let unit = module.node(n);
    let loc = match shape {
        KernelKind::Blocks { leaf, .. } if unit.loc.starts_with('<') => &module.node(*leaf).loc,
        _ => &unit.loc,
    };
    format!("node {} ({loc})", unit.shown())
}

/// Ends the program: a launch of unit `n` (arguments `args`, host addresses) could not make
/// its partitions' memory resident. Buffers are named by the unit's pointer parameters into
/// them.
fn short_of_memory(
    module: &Module,
    n: u32,
    shape: &KernelKind,
    args: &[u8],
    table: &Table,
    e: &memory::residency::Shortage,
) -> ! {
    let unit = module.node(n);
    let name = |start: u64| -> Option<String> {
        let names: Vec<String> = unit
            .params
            .iter()
            .filter(|p| p.kind == crate::desc::ScalarKind::Pointer)
            .filter(|p| {
                let at = p.offset as usize;
                let v = args.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
                v.is_some_and(|v| table.containing(v, 0) == Some(start))
            })
            .map(|p| format!("`{}`", p.name))
            .collect();
        (!names.is_empty()).then(|| names.join(" and "))
    };
    crate::fatal(&format!("{}: {}", unit_named(module, n, shape), e.describe(&name)))
}

/// Most partitions per device a launch is cut into to fit the devices' memory.
const MOST_PARTITIONS_PER_DEVICE: usize = 1024;

/// A plan whose partitions fit the devices' memory limits (sparse copies): where they do not
/// all fit at once, the launch is planned again with twice the partitions per device, run in
/// rounds ([`LaunchPlan::rounds`]), until each round fits or the grid cannot be cut finer
/// (then the launch fails in `make_resident`, naming what does not fit).
fn fit_memory(
    first: Outcome,
    launch: &access::Launch<'_>,
    table: &mut Table,
    make: &dyn Fn(&access::Launch<'_>, &mut Table) -> Outcome,
) -> Outcome {
    if memory::residency::limit().is_none() {
        return first;
    }
    let split = |o: &Outcome| matches!(o, Outcome::Devices(lp) if lp.unpartitioned.is_none());
    // All partitions at once where they fit (`HPVM_MGPU_PARTITIONS=3` included).
    if matches!(&first, Outcome::Devices(lp) if lp.fits_memory(false)) || !split(&first) {
        return first;
    }
    // Rounds would run a device's partitions apart, each round's copies planned alone: a
    // reduction's private copies must outlive them all. Not done: such a launch takes its
    // memory at once, or fails naming what does not fit.
    if matches!(&first, Outcome::Devices(lp) if !lp.reductions.is_empty()) {
        return first;
    }
    let mut best = first;
    let mut per_device = launch.per_device;
    loop {
        let Outcome::Devices(lp) = &best else { return best };
        if lp.fits_memory(true) || per_device >= MOST_PARTITIONS_PER_DEVICE {
            break;
        }
        let parts = lp.parts.len();
        per_device *= 2;
        let finer = make(&access::Launch { per_device, ..*launch }, table);
        // A grid too small to cut finer gives no more partitions: stop there.
        if !split(&finer) || matches!(&finer, Outcome::Devices(f) if f.parts.len() <= parts) {
            break;
        }
        best = finer;
    }
    if let Outcome::Devices(lp) = &mut best {
        lp.make_rounds();
    }
    best
}

/// A launch whose partitions run in rounds (see [`LaunchPlan::rounds`]): each round makes its
/// granules resident (evicting what earlier rounds left), copies what it reads, and runs its
/// partitions (on GPUs: its kernels, waited for), before the next.
fn run_rounds(
    u: &Unit<'_>,
    lp: &LaunchPlan,
    args: &[u8],
    table: &mut Table,
    run_box: &RunBox<'_>,
    gpu: Option<(&crate::desc::KernelDesc, &'static std::ffi::CStr, &kernel::Prepared)>,
) {
    let (module, n) = (u.module, u.node);
    let st = &module.stats[n as usize];
    let node = module.node(n);
    for r in &lp.rounds {
        if let Err(e) = table.make_resident(&r.residency_needs()) {
            short_of_memory(module, n, u.shape, args, table, &e);
        }
        r.account_host_writes(table);
        let t1 = Stopwatch::start();
        let (copy_plan, hit) = r.copies(table);
        st.nanos_copy_plan.fetch_add(t1.nanos(), Ordering::Relaxed);
        if hit { &st.copy_hits } else { &st.copy_misses }.fetch_add(1, Ordering::Relaxed);
        let part_args: Vec<std::borrow::Cow<'_, [u8]>> = r.parts.iter().map(|p| lp.part_args(p, args)).collect();
        if let Some((kernel, ptx, prepared)) = gpu {
            let (copies, sources) = (&copy_plan.copies, &copy_plan.sources);
            let launch = gpu::Launch { lp: r, part_args: &part_args, copies, sources, probe: None };
            let kernel_grid = lp.virtual_grid.unwrap_or(u.grid);
            gpu::run(module, n, launch, kernel, &kernel.name, prepared, ptx, u.parent, kernel_grid, u.outs, false)
                .unwrap_or_else(|err| {
                    crate::fatal(&format!("node {} ({}) on the GPUs: {err}", node.shown(), node.loc))
                });
            share_outputs(module, n, u.shape, r, u.grid, u.outs);
            continue;
        }
        let t2 = Stopwatch::start();
        memory::execute(&copy_plan.copies).unwrap_or_else(|err| {
            crate::fatal(&format!("node {} ({}): copying its inputs: {err}", node.shown(), node.loc))
        });
        for c in &copy_plan.copies {
            st.count_bytes(c);
        }
        st.nanos_copies.fetch_add(t2.nanos(), Ordering::Relaxed);
        let t3 = Stopwatch::start();
        run_parts(r, &part_args, run_box, false);
        share_outputs(module, n, u.shape, r, u.grid, u.outs);
        st.nanos_kernels.fetch_add(t3.nanos(), Ordering::Relaxed);
    }
}

/// The byte runs part `p` writes in buffer `b`, sorted and merged.
fn merged_writes(p: &PartPlan, b: usize) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = p.writes.iter().filter(|(x, _)| *x == b).flat_map(|(_, r)| r.row_runs()).collect();
    runs.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(runs.len());
    for (lo, hi) in runs {
        match merged.last_mut() {
            Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
            _ => merged.push((lo, hi)),
        }
    }
    merged
}

/// Whether one run of `runs` (sorted, merged) holds all of `start..end`.
fn covers(runs: &[(u64, u64)], start: u64, end: u64) -> bool {
    let i = runs.partition_point(|&(_, hi)| hi <= start);
    runs.get(i).is_some_and(|&(lo, hi)| lo <= start && end <= hi)
}

/// The devices a plan's partitions run on.
fn used_devices(lp: &LaunchPlan) -> usize {
    let mut seen = 0u128;
    for p in lp.parts.iter().filter(|p| !p.bx.is_empty()) {
        seen |= 1 << p.device;
    }
    seen.count_ones() as usize
}

/// Whether the leaf unit `u` launches runs a grid-stride loop (`dashdb::RuntimeBlock::strided`).
fn runs_grid_stride_loop(u: &Unit<'_>) -> bool {
    let leaf = match &u.module.node(u.node).kind {
        crate::desc::KindDesc::Internal { .. } => {
            match u.module.program.nodes[u.node as usize].kernel.as_ref().map(|k| &k.kind) {
                Some(crate::desc::KernelKind::Blocks { leaf, .. }) => *leaf,
                _ => return false,
            }
        }
        _ => u.node,
    };
    let name = &u.module.node(leaf).name;
    let db = u.module.analysis.as_ref().and_then(|db| db.node(name));
    db.is_some_and(|n| n.block.iter().flat_map(|b| &b.runtime).any(|r| r.strided))
}

/// How many devices (the first of the order) a launch of unit `u` over `blocks` blocks
/// gets, by the split policy ([`policy`]); the statistics learn why it got one where it could
/// have had more. With the probe that measures the launch for the policy, where it does.
/// `gpu`: the kernel's name, module and launch shape, on GPUs.
fn decide(
    u: &Unit<'_>,
    blocks: u64,
    gpu: Option<(&String, &'static std::ffi::CStr, &kernel::Prepared)>,
) -> (usize, Option<policy::Probe>) {
    let devs = devices();
    let all = devs.order.len();
    match policy::mode() {
        // Whole on device 0: planned as one device's launch (`access::plan_direct`), not
        // through the split planner, which would only find the setting and run it whole.
        policy::Mode::Off => return (1, None),
        _ if all <= 1 => return (1, None),
        policy::Mode::Always => return (all, None),
        policy::Mode::Auto => {}
    }
    let nodes = u.module.stats.len();
    let st = &u.module.stats[u.node as usize];
    if gpu.is_some() && u.plans.policy.take_settled(u.node, nodes, blocks) {
        st.note_declined_again();
        return (1, None);
    }
    let record = u.plans.policy.of(u.node);
    // A node timed once and not measured yet: this launch's decision needs that measure, which
    // comes when the program next waits, and a loop of launches may not wait before its end
    // (every launch of gridstride.cu's loop ran whole, unmeasured). Waiting for it here, once
    // per node, costs the host the time of a kernel the GPU is running anyway.
    if gpu.is_some() {
        let unmeasured = {
            let m = record.lock().unwrap_or_else(|e| e.into_inner());
            m.probing && m.ns_per_block.is_none()
        };
        if unmeasured {
            crate::devices::inflight::drain();
        }
    }
    let mut m = record.lock().unwrap_or_else(|e| e.into_inner());
    if m.wave.is_none() {
        m.wave = match gpu {
            Some((name, ptx, prepared)) => prepared.wave(ptx, name),
            None => devs.sims.first().map(|s| s.threads() as u64),
        };
    }
    let strided = *m.strided.get_or_insert_with(|| runs_grid_stride_loop(u));
    let situation = policy::Situation { devices: all, blocks, wave: m.wave, gpus: gpu.is_some(), strided };
    let decision = policy::decide(&situation, &m, &policy::OVERHEADS);
    if policy::logging() {
        eprintln!(
            "hpvm-mgpu policy: {} launch {}: {} blocks, wave {:?}, ns/block {:?}, copies {:?}, overhead(2) {:.0} ns, \
             planning {:?} ns, before {:?}: {:?}",
            u.module.node(u.node).shown(),
            m.launches,
            blocks,
            m.wave,
            m.ns_per_block,
            &m.copy_ns[..3],
            policy::OVERHEADS.get(2, gpu.is_some()),
            m.plan_ns,
            m.decided.get(&blocks),
            decision
        );
    }
    let (given, chosen) = match &decision {
        // Only open devices take partitions. Where the policy wants more than are open, the
        // others start opening (`devices::opening`) and later launches get them; the choice
        // is remembered only where it was taken.
        policy::Decision::Split(k) => {
            use crate::devices::opening;
            let mut ready = devs.ready().max(1);
            if *k > ready {
                if m.ns_per_block.is_some() {
                    // Only a measured kernel: a first launch's split is a guess, and a short
                    // program would end waiting for GPUs it never used.
                    opening::want_all();
                }
                let kernel = m.ns_per_block.map_or(0.0, |p| p * blocks as f64);
                if opening::worth_waiting(kernel) && opening::wait() {
                    ready = devs.ready().max(1);
                }
            }
            ((*k).min(ready), *k <= ready)
        }
        policy::Decision::Whole(why) => {
            st.note_declined(why.kind(), || why.to_string());
            (1, true)
        }
    };
    let before = m.last_devices;
    m.last_devices = given;
    if chosen {
        m.decided(blocks, given);
    }
    m.launches += 1;
    // On simulated devices every launch is measured (a clock read); on GPUs a sample, with
    // events.
    let measure = gpu.is_none() || policy::sample_gpu(&m, &decision);
    if measure && gpu.is_some() {
        m.probing = true;
    }
    if gpu.is_some() && !measure {
        let skip = policy::Records::settles(&decision, m.launches);
        if skip > 0 {
            u.plans.policy.settle(u.node, nodes, blocks, skip);
            // Counted in now where the next sample is due by the count.
            if matches!(decision, policy::Decision::Whole(policy::Why::TooShort { .. })) {
                m.launches += skip;
            }
        }
    }
    drop(m);
    let probe = measure.then(|| policy::Probe {
        record,
        devices: given,
        before,
        used: given,
        blocks,
        started: std::time::Instant::now(),
        gpus: gpu.is_some(),
    });
    (given, probe)
}

/// The outputs of a blocks unit, each one of its inputs (`KernelKind::Blocks::outputs`), for
/// every instance: a kernel writes none, and a partition run on a simulated device binds its
/// own copies' addresses, where the host's are meant.
fn pass_outputs_through(m: &Module, n: u32, shape: &KernelKind, base: &[u8], total: i64, outs: SendPtr<u8>) {
    let KernelKind::Blocks { outputs, .. } = shape else { return };
    let node = m.node(n);
    let size = node.outputs_size();
    if outputs.is_empty() || outs.get().is_null() || size == 0 {
        return;
    }
    for &(out, input) in outputs {
        let (to, from) = (&node.outputs[out as usize], &node.params[input as usize]);
        let value = &base[from.offset as usize..(from.offset + from.size) as usize];
        for i in 0..total.max(0) as usize {
            // SAFETY: `outs` holds `total` output records of `node`, `size` bytes each; the
            // description was checked when loaded (ports in range, same sizes).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    value.as_ptr(),
                    outs.get().add(i * size + to.offset as usize),
                    value.len(),
                )
            };
        }
    }
}

/// Under ranks: the output records a leaf's instances wrote on other ranks' devices reach
/// this rank too (the graph's edges and bindings read them on every rank), each partition's
/// from the rank that ran it.
fn share_outputs(m: &Module, n: u32, shape: &KernelKind, lp: &LaunchPlan, grid: [i64; 3], outs: SendPtr<u8>) {
    let size = m.node(n).outputs_size();
    let Some(w) = crate::ranks::world().filter(|w| w.size > 1) else { return };
    if !matches!(shape, KernelKind::Grid) || size == 0 || outs.get().is_null() {
        return;
    }
    let devs = devices();
    if devs.sims.first().is_some_and(|d| d.is_dry()) {
        return;
    }
    let total = grid.iter().product::<i64>().max(0) as usize;
    // SAFETY: `outs` holds one record of `size` bytes per instance of the grid.
    let records = unsafe { std::slice::from_raw_parts_mut(outs.get(), total * size) };
    for p in lp.parts.iter().filter(|p| !p.bx.is_empty()) {
        let mut packed: Vec<u8> = Vec::with_capacity(p.bx.len() as usize * size);
        let owner = devs.owner(p.device);
        if owner == w.rank {
            for i in p.bx.linear_indices() {
                packed.extend_from_slice(&records[i as usize * size..(i as usize + 1) * size]);
            }
        } else {
            packed.resize(p.bx.len() as usize * size, 0);
        }
        w.bcast(&mut packed, owner);
        if owner != w.rank {
            for (i, rec) in p.bx.linear_indices().zip(packed.chunks(size)) {
                records[i as usize * size..(i as usize + 1) * size].copy_from_slice(rec);
            }
        }
    }
}

/// Every partition on its simulated device, concurrently; returns when all have finished,
/// with (when `timed`) the slowest partition's time in ns.
fn run_parts(lp: &LaunchPlan, part_args: &[std::borrow::Cow<'_, [u8]>], run_box: &RunBox<'_>, timed: bool) -> f64 {
    let sims = &devices().sims;
    if sims.first().is_some_and(|d| d.is_dry()) {
        return 0.0;
    }
    let slowest = AtomicU64::new(0);
    let run = |(p, a): (&PartPlan, &std::borrow::Cow<'_, [u8]>)| {
        // Another rank's device: that rank runs it.
        if sims[p.device].is_remote() {
            return;
        }
        let args = Args::uniform(a.to_vec());
        let t = timed.then(std::time::Instant::now);
        sims[p.device].install(|| run_box(Place::Device(p.device), p.bx, &args));
        if let Some(t) = t {
            slowest.fetch_max(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    };
    // Plain threads (see the module's invariants), joined at the end of the scope.
    std::thread::scope(|s| {
        for p in lp.parts.iter().zip(part_args) {
            let run = &run;
            std::thread::Builder::new()
                .name(format!("hpvm-part-{}", p.0.device))
                .spawn_scoped(s, move || run(p))
                .unwrap_or_else(|err| crate::fatal(&format!("cannot start a partition's thread: {err}")));
        }
    });
    slowest.load(Ordering::Relaxed) as f64
}

/// The pool plans are computed on (ISL work, in parallel over partitions): separate from the
/// main pool, so that no main-pool worker waits in rayon while it holds the buffer table.
/// No larger than the machine's cores, nor than a launch's partitions, whatever the main
/// pool's size: each of its threads keeps its own ISL context and parses every map of the
/// program once (`access::prefetch`), so a pool of thousands (`HPVM_MGPU_THREADS=4096`)
/// spent a minute on that alone.
/// ISL's nanoseconds making closed forms (see [`closed`]), for the statistics.
pub(crate) fn closed_form_nanos() -> u64 {
    closed::NANOS.load(Ordering::Relaxed)
}

/// Closed forms made (or found impossible), for the statistics.
pub(crate) fn closed_forms_made() -> u64 {
    closed::MADE.load(Ordering::Relaxed)
}

pub(crate) fn planner() -> &'static rayon::ThreadPool {
    static PLANNER: std::sync::OnceLock<rayon::ThreadPool> = std::sync::OnceLock::new();
    PLANNER.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        // Plans are computed in parallel over a launch's partitions only: more threads than
        // partitions would each parse every map (`access::prefetch`) for nothing (on a GPU
        // machine of 32 cores, 30 of 32 threads on two GPUs).
        let partitions = (devices().count() * partitions_per_device()).max(1);
        rayon::ThreadPoolBuilder::new()
            .num_threads(crate::pool::pool().current_num_threads().min(cores).min(partitions))
            .thread_name(|i| format!("hpvm-plan-{i}"))
            .build()
            .unwrap_or_else(|e| crate::fatal(&format!("cannot start the planning pool: {e}")))
    })
}

/// What [`bench_forget`] forgets.
#[doc(hidden)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Forget {
    /// The module's launch plans.
    Plans,
    /// Plans and every access interval (kept: the maps parsed from the database).
    Intervals,
    /// Everything: the next launch starts from the database's text.
    All,
}

/// Benchmarks only: forgets what the runtime has computed, so the next launch misses.
#[doc(hidden)]
pub fn bench_forget(plans: &Launches, what: Forget) {
    plans.clear();
    if what != Forget::Plans {
        access::forget_intervals(what == Forget::All);
    }
}

/// Parses the database's maps on every worker, in the background (see [`access::prefetch`]).
pub(crate) fn prefetch(db: &dashdb::Database) {
    if devices().count() > 1 {
        access::prefetch(db);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::numbers;

    /// A partition: its device, and the (buffer, bytes) it reads and writes.
    type Part = (usize, Vec<(usize, ByteRect)>, Vec<(usize, ByteRect)>);

    fn rect(next: &mut impl FnMut(u64) -> u64, size: u64) -> ByteRect {
        let start = next(size);
        ByteRect::run(start, start + 1 + next(size - start))
    }

    /// The copy-plan cache gives what planning from scratch gives: the same copies and the same
    /// coherence maps after the launch, whatever state the buffers are in (loops, launches in
    /// another order, the host reading back, states reached by different paths). Random
    /// launches drawn from a few plans, each run with its cached plan on one table and with a
    /// fresh copy of it (empty cache) on a twin table; the maps must agree after every launch.
    #[test]
    fn cached_copy_plans_agree_with_planning_anew() {
        const BUFFERS: [(u64, u64); 2] = [(0x1000, 64), (0x2000, 48)];
        let mut next = numbers(11);
        let mut hits = 0;
        for round in 0..40 {
            let devices = 1 + next(3) as usize;
            let plans: Vec<Vec<Part>> = (0..1 + next(3))
                .map(|_| {
                    (0..devices)
                        .map(|k| {
                            let b = next(2) as usize;
                            let reads = (0..next(3)).map(|_| (b, rect(&mut next, BUFFERS[b].1))).collect();
                            let w = next(2) as usize;
                            let writes = (0..next(2)).map(|_| (w, rect(&mut next, BUFFERS[w].1))).collect();
                            (k, reads, writes)
                        })
                        .collect()
                })
                .collect();
            let make = |i: usize| {
                let parts = plans[i]
                    .iter()
                    .map(|(k, reads, writes)| PartPlan {
                        device: *k,
                        bx: GridBox::whole([1, 1, 1]),
                        args: Vec::new(),
                        reads: reads.clone(),
                        writes: writes.clone(),
                    })
                    .collect();
                LaunchPlan::new(BUFFERS.iter().map(|&(s, _)| (s, 0)).collect(), parts, None)
            };
            let cached: Vec<LaunchPlan> = (0..plans.len()).map(make).collect();
            let mut table = Table::with_fake_buffers(&BUFFERS, devices);
            let mut twin = Table::with_fake_buffers(&BUFFERS, devices);
            for launch in 0..30 {
                if next(5) == 0 {
                    // The host reads a buffer back (as `llvm_hpvm_request_mem` does).
                    let (s, size) = BUFFERS[next(2) as usize];
                    for t in [&mut table, &mut twin] {
                        t.get_mut(s).unwrap().coherence.add(0, size, Place::Host);
                    }
                    continue;
                }
                let i = next(plans.len() as u64) as usize;
                let (plan, hit) = cached[i].copies(&mut table);
                let (fresh, _) = make(i).copies(&mut twin);
                hits += hit as usize;
                assert_eq!(plan.copies, fresh.copies, "round {round} launch {launch}: copies of plan {i}");
                assert_eq!(plan.sources, fresh.sources, "round {round} launch {launch}: sources of plan {i}");
                for &(s, _) in &BUFFERS {
                    assert_eq!(
                        table.get(s).unwrap().coherence,
                        twin.get(s).unwrap().coherence,
                        "round {round} launch {launch}: the map of buffer {s:#x} after plan {i} (cached: {hit})"
                    );
                }
            }
        }
        assert!(hits > 200, "{hits} launches hit the cache: too few to test it");
    }
}
