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
//! On one GPU, a CUDA launch that found both caches, copied nothing and changed nothing is
//! recorded, and the next launch of it is made again without steps 1-4 while the memory
//! table has not changed since and only its value scalars differ ([`replay`]).
//!
//! Invariants:
//! - the table of buffers is locked from step 1 to step 4, so coherence decisions and their
//!   use are atomic with respect to other launches and to the host's accesses;
//! - while it holds that lock, a worker of the main pool never waits inside rayon (a rayon
//!   wait runs other jobs of its pool on the same thread, and one of them may want the lock:
//!   a deadlock, seen with streaming pipelines). Plans are computed on the [`planner`] pool
//!   and partitions run on their devices' pools, each reached from a plain thread that the
//!   worker joins. A plan its node made in microseconds last time
//!   ([`Launches::plans_quickly`]) is made on the launching thread where that thread belongs
//!   to no pool, its partitions one after another, with no rayon wait at all.
//!
//! This layer knows the program ([`Module`]), the memory and the devices, and nothing of how
//! the graph around a unit is interpreted: the engine hands a launch over as a [`Unit`] and
//! says how to run a box of its grid on a simulated device ([`RunBox`]).

// Each file below names only files listed before it: `runtime/tests/layers.rs` checks that no
// circle runs through the folder, this file included.
mod ahead;
pub(crate) mod bindings;
pub(crate) mod cache;
mod closed;
mod gpu;
pub(crate) mod hulls;
pub(crate) mod kernel;
mod lanes;
pub(crate) mod memo;
pub(crate) mod plan;
pub(crate) mod policy;
mod reasons;
mod recorded;
pub(crate) mod reduce;
pub(crate) mod replay;
mod respecialized;
pub(crate) mod settings;
mod special;
pub(crate) mod split;

pub use cache::Launches;
pub(crate) use memo::planner;
pub(crate) use plan::{used_devices, LaunchPlan, Outcome, PartPlan};
pub(crate) use settings::{device_weight, partitioning_off, partitions_per_device, strict};

use crate::args::{Args, SendPtr};
use crate::ctx::{GridBox, NodeCtx};
use crate::desc::KernelKind;
use crate::devices::{devices, Place};
use crate::memory::{self, Table};
use crate::module::Module;
use crate::sink::Stopwatch;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Reads the settings of partitioned launches (ending the program on a bad one).
pub fn check_settings() {
    partitioning_off();
    strict();
    partitions_per_device();
    settings::isl_operations();
    closed::in_background();
    device_weight(0);
    kernel::bench_repeat();
    crate::devices::held::enabled();
    crate::devices::opening::open_at();
    // The thread that plans splits ahead starts with the session where launches may split:
    // started at a first launch's miss, it cost that launch 0.1 ms (2DConvolution's only
    // launch took 0.23 ms of runtime work on dry:2 against 0.11 on dry:1).
    if ahead::enabled() && devices().count() > 1 && !partitioning_off() {
        ahead::start_thread();
    }
    special::mode();
}

/// One launch of a launch unit, as the engine hands it over.
pub struct Unit {
    /// Loaded for the whole run (planning in the background refers to it).
    pub module: &'static Module,
    /// The module's plan cache.
    pub plans: &'static Launches,
    pub node: u32,
    pub shape: &'static KernelKind,
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
pub fn run_unit(u: &Unit, args: &Args, run_box: &RunBox<'_>) -> bool {
    if devices().count() == 0 {
        return false;
    }
    let leaf = match u.shape {
        KernelKind::Blocks { leaf, .. } => *leaf,
        KernelKind::Grid => u.node,
    };
    let node = u.module.node(leaf);
    let Some(why) = &node.indirect else {
        policy::log_line!("{} launch starts", u.module.node(u.node).shown());
        let ran = on_devices(u, args, run_box, None);
        policy::log_line!("{} launch returns", u.module.node(u.node).shown());
        return ran;
    };
    // Its pointers in memory hold the program's addresses (see `transform::indirect`): a
    // translated leaf runs whole on one device that holds every buffer; under ranks, and
    // where its code could not be translated, on the host's copies, which are at them.
    if node.translated && !crate::ranks::spans_ranks() && on_devices(u, args, run_box, Some(why)) {
        return true;
    }
    memory::host_access_all();
    let st = &u.module.stats[u.node as usize];
    st.note_host(&format!("{why}: the program's addresses hold only on the host"));
    false
}

/// A unit's compiled GPU kernel, its module and its launch shape, where it runs on GPUs.
type GpuKernel = (&'static crate::desc::KernelDesc, &'static std::ffi::CStr, kernel::Prepared);

/// [`run_unit`] on the devices. `indirect`: why the leaf keeps pointers in memory; it then
/// runs whole on one device, every buffer current there and translated by its address table
/// ([`devices::addresses`]), or not at all (false) before anything moved. The steps are the
/// module's: the plan ([`plan_of`]), the copy plan, the copies and partitions
/// ([`run_on_gpus`], [`run_on_sims`], [`run_rounds`]), the counts ([`count_launch`]).
fn on_devices(u: &Unit, args: &Args, run_box: &RunBox<'_>, indirect: Option<&String>) -> bool {
    let Unit { module, plans, node: n, shape, parent, grid, outs, .. } = *u;
    let devs = devices();
    let total: i64 = grid.iter().product();
    let st = &module.stats[n as usize];
    let Some(base) = args.uniform_over(total) else {
        st.note_host("its instances get different arguments through one-to-one edges");
        return false;
    };
    let Ok(gpu_kernel) = gpu_kernel(u, &base) else { return false };
    // SAFETY: the parent context outlives this call (it is the caller's).
    let (pid, pdim) = unsafe { parent.get().as_ref() }.map_or(([0; 3], [1; 3]), |p| (p.id, p.dim));

    // How many devices this launch gets (see `policy`).
    let blocks = kernel::blocks_of(shape, module.node(n).dims, grid);
    let (devices_given, mut probe, likely) = match indirect {
        Some(_) => (1, None, Likely::NONE),
        None => decide(u, &base, blocks, gpu_kernel.as_ref().map(|(k, ptx, p)| (&k.name, *ptx, p))),
    };
    let mut order = &devs.order[..devices_given];
    let mut key = cache::Key { node: n, grid, parent: (pid, pdim), devices: devices_given as u8, args: base };
    if crate::ranks::spans_ranks() {
        crate::ranks::note_launch(&key.without_pointers(module.node(n)));
    }

    // Step 1: the plan.
    let mut table = memory::table();
    let t0 = Stopwatch::start();
    // The policy's clock on a split's planning (the statistics' may be off).
    // ISL's one-time work on closed forms is not what later launches pay: left out.
    let mut planning = (devices_given > 1 && policy::mode() == policy::Mode::Auto)
        .then(|| (std::time::Instant::now(), closed_form_nanos()));
    // A split whose plan would ask ISL runs whole while it is planned ahead (see `ahead`).
    let ahead = (policy::mode() == policy::Mode::Auto && ahead::enabled()).then_some(likely);
    let (mut plan, plan_hit) = match plan_of(u, &key, order, &mut table, &t0, ahead.filter(|_| devices_given > 1)) {
        Some(planned) => planned,
        None => {
            st.whole_while_planning.fetch_add(1, Ordering::Relaxed);
            (order, key.devices, planning) = (&order[..1], 1, None);
            // It runs over one device: what the next launch's copies are measured against
            // (a split after it moves data once, which is not a split's steady state; taken
            // as one, a stencil's first split made every later one look too dear to pay).
            u.plans.policy.of(n).lock().unwrap_or_else(|e| e.into_inner()).last_devices = 1;
            if let Some(p) = &mut probe {
                p.devices = 1;
            }
            plan_of(u, &key, order, &mut table, &t0, None).expect("a whole launch is planned at once")
        }
    };
    if !plan_hit {
        policy::log_line!(
            "{} planned over {} device(s) in {:.3} ms",
            module.node(n).shown(),
            key.devices,
            t0.nanos() as f64 / 1e6
        );
    }
    // A split likely soon is planned ahead once this launch has let the table go: the
    // planning thread's first step takes it, and woken while it is held that thread would
    // only wait, to be woken again at its release (on a 2-core machine each wake cost a
    // PolyBench launch 10-20 us).
    let speculation = match (plan_hit, ahead) {
        (false, Some(Likely { split: Some(k), .. })) if devices_given == 1 => Some(k),
        _ => None,
    };
    // On a program's stream: whole buffers, unless another stream's work in flight shares them.
    let mut refine = None;
    let lane = crate::devices::inflight::program_lane();
    if let (Outcome::Devices(whole), Some(_), None, Some(_)) = (&*plan, &gpu_kernel, indirect, lane) {
        let place = lanes::Place { module, plans, node: n, shape, key: key.clone(), grid, order: order.to_vec() };
        let (exact, r) = lanes::footing(place, whole, &mut table);
        refine = r;
        if let Some(exact) = exact {
            plan = exact;
        }
    }
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
    let _addresses = match indirect {
        None => None,
        Some(why) => match install_addresses(u, lp, order[0], &mut table, gpu_kernel.as_ref().map(|g| g.1), why) {
            Ok(active) => active,
            Err(()) => return false,
        },
    };
    if !lp.rounds.is_empty() {
        let gpu = gpu_kernel.as_ref().map(|(k, ptx, p)| (*k, *ptx, p));
        run_rounds(u, lp, &key.args, &mut table, run_box, gpu);
        drop(table);
        if let Some(k) = speculation {
            speculate(u, &key, k);
        }
        pass_outputs_through(module, n, shape, &args.for_instance(0), total, outs);
        count_launch(u, lp);
        st.max_rounds.fetch_max(lp.rounds.len() as u64, Ordering::Relaxed);
        return true;
    }

    policy::log_line!("{} step 2 (copies) starts", module.node(n).shown());
    // Step 2: the copies that make every partition's device current on what it reads.
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

    policy::log_line!("{} step 3 (run) starts", module.node(n).shown());
    // Step 3: the copies, then the partitions, each on its device.
    let part_args: smallvec::SmallVec<[crate::args::ArgBytes; 2]> =
        lp.parts.iter().map(|p| lp.part_args(p, &key.args)).collect();
    let sampled = probe.is_some();
    let replay = match &gpu_kernel {
        Some(gpu) => run_on_gpus(u, lp, &part_args, &copy_plan, gpu, probe.take(), refine),
        None => {
            run_on_sims(u, lp, &part_args, &copy_plan.copies, run_box, probe.take());
            None
        }
    };
    // Step 4 was the copy plan's: the state after the launch came with it.
    policy::log_line!("{} step 3 (run) returns", module.node(n).shown());
    // A launch that found everything in the caches and changed nothing is what later
    // launches of it may replay ([`replay`]).
    if let Some(l) = replay {
        if plan_hit && hit && !sampled && key.devices == 1 && indirect.is_none() {
            let site = replay::Site {
                module,
                replays: &u.plans.replays,
                node: n,
                shape,
                parent: u.parent,
                grid: u.grid,
                asynchronous: u.asynchronous,
            };
            replay::record(&site, &key.args, lp, &copy_plan, l, &table);
        }
    }
    drop(table);
    if let Some(k) = speculation {
        speculate(u, &key, k);
    }
    pass_outputs_through(module, n, shape, &args.for_instance(0), total, outs);
    count_launch(u, lp);
    true
}

/// Where the unit runs on GPUs, its compiled kernel, module and launch shape (`None` on
/// simulated devices); `Err` where it must run on the host (said in the statistics). Decided
/// before anything moves.
fn gpu_kernel(u: &Unit, base: &[u8]) -> Result<Option<GpuKernel>, ()> {
    let (module, n) = (u.module, u.node);
    let st = &module.stats[n as usize];
    match (devices().on_gpus(), &module.node(n).kernel, module.ptx) {
        (false, _, _) => Ok(None),
        (true, Some(kernel), Some(ptx)) => match kernel::prepare(module, n, kernel, base, u.parent, u.grid) {
            Some(prepared) => Ok(Some((kernel, ptx, prepared))),
            None => {
                st.note_host(
                    "its launch does not fit the GPU (block size, grid, or arguments that differ per instance)",
                );
                Err(())
            }
        },
        (true, _, _) => {
            st.note_host("it has no GPU kernel (the build said why)");
            Err(())
        }
    }
}

/// Partitions per device of a launch over `devices` (`HPVM_MGPU_PARTITIONS`): on GPUs, a
/// launch on one runs as one partition. Several per GPU are for a split's GPUs to run their
/// edges first and exchange them beside the rest (`gpu`); on one GPU they would only cost a
/// kernel launch each, and a plan from ISL where the whole grid needs none
/// (`bindings::plan_direct`). Simulated devices keep them (the tests' way of cutting a
/// launch finer than its devices).
fn partitions_on(devices: usize) -> usize {
    if devices == 1 && crate::devices::devices().on_gpus() {
        1
    } else {
        partitions_per_device()
    }
}

/// A split over `k` devices is likely soon (the policy said so at a launch that missed the
/// caches, a node's first): ISL's part of its plan starts now, in the background
/// ([`ahead`]), unless it has started before.
fn speculate(u: &Unit, key: &cache::Key, k: usize) {
    if k <= 1 || !u.plans.ahead.speculate(u.node, k as u8) {
        return;
    }
    let launch = bindings::Launch {
        module: u.module,
        node: u.node,
        shape: u.shape,
        args: &key.args,
        parent: key.parent,
        grid: u.grid,
        order: &devices().order[..k],
        per_device: partitions_on(k),
    };
    // The bindings too are made on the planning thread, after this launch (it holds the
    // table): a pointer the table does not track leaves nothing to plan there.
    ahead::start(ahead_job(u, &launch, None));
}

/// A translated leaf (its pointers in memory hold the program's addresses, `why`): its device
/// (the plan's, else `first`) is made to hold every buffer, alone after it, and translates by
/// its address table: on a GPU written into the module `ptx`, on a simulated device activated
/// for as long as the value returned lives. `Err` (said in the statistics) where the device
/// cannot hold every buffer: the leaf then runs on the host.
fn install_addresses(
    u: &Unit,
    lp: &LaunchPlan,
    first: usize,
    table: &mut Table,
    ptx: Option<&'static std::ffi::CStr>,
    why: &str,
) -> Result<Option<crate::devices::addresses::Active>, ()> {
    let st = &u.module.stats[u.node as usize];
    let k = lp.parts.first().map_or(first, |p| p.device);
    let installed = table.all_current_on(k).and_then(|a| {
        st.note_unpartitioned(&format!("{why}: it runs whole on one device"));
        match ptx {
            Some(ptx) => devices().gpu(k).write_address_table(ptx, &a).map(|()| None),
            None => Ok(Some(crate::devices::addresses::activate(a))),
        }
    });
    installed.map_err(|e| st.note_host(&format!("{why}: device {k} cannot hold every buffer: {e}")))
}

/// Step 3 on GPUs: the copies and the partitions' kernels, enqueued (and, unless the launch
/// is asynchronous, waited for); `probe` times them for the policy.
fn run_on_gpus(
    u: &Unit,
    lp: &LaunchPlan,
    part_args: &[crate::args::ArgBytes],
    copy_plan: &plan::CopyPlan,
    (kernel, ptx, prepared): &GpuKernel,
    mut probe: Option<policy::Probe>,
    refine: Option<crate::devices::inflight::Refine>,
) -> Option<recorded::Launch> {
    let (module, n) = (u.module, u.node);
    let st = &module.stats[n as usize];
    let node = module.node(n);
    let nc = lp.read_only_cache && kernel.nc_name.is_some();
    if nc {
        st.read_only_cache_launches.fetch_add(1, Ordering::Relaxed);
    }
    // One part from block 0: the kernel that adds no offset to its block ids.
    let from_zero = matches!(&lp.parts[..], [p] if p.bx.lo == [0; 3]);
    let name = match (nc, from_zero) {
        (true, true) => kernel.nc_whole_name.as_ref().or(kernel.nc_name.as_ref()),
        (true, false) => kernel.nc_name.as_ref(),
        (false, true) => kernel.whole_name.as_ref(),
        (false, false) => None,
    }
    .unwrap_or(&kernel.name);
    if let Some(p) = &mut probe {
        p.used = used_devices(lp);
        // Its overhead is the launch's, not the planning's.
        p.started = std::time::Instant::now();
    }
    let leaf = match u.shape {
        KernelKind::Blocks { leaf, .. } => *leaf,
        KernelKind::Grid => n,
    };
    let lane = crate::devices::inflight::program_lane().filter(|_| module.node(leaf).indirect.is_none());
    let launch =
        gpu::Launch { lp, part_args, copies: &copy_plan.copies, sources: &copy_plan.sources, probe, lane, refine };
    let kernel_grid = lp.virtual_grid.unwrap_or(u.grid);
    let replay = gpu::run(
        &kernel::Target {
            m: module,
            n,
            kernel,
            name,
            prepared,
            ptx,
            parent: u.parent,
            grid: kernel_grid,
            outs: u.outs,
        },
        launch,
        u.asynchronous,
    )
    .unwrap_or_else(|err| crate::fatal(&format!("node {} ({}) on the GPUs: {err}", node.shown(), node.loc)));
    share_outputs(module, n, u.shape, lp, u.grid, u.outs);
    replay
}

/// Step 3 on simulated devices: the copies, then the partitions with their reductions, each
/// on its device's pool; `probe` times them for the policy.
fn run_on_sims(
    u: &Unit,
    lp: &LaunchPlan,
    part_args: &[crate::args::ArgBytes],
    copies: &[crate::devices::Copy],
    run_box: &RunBox<'_>,
    mut probe: Option<policy::Probe>,
) {
    let (module, n) = (u.module, u.node);
    let st = &module.stats[n as usize];
    let node = module.node(n);
    let t2 = Stopwatch::start();
    let started = probe.as_mut().map(|p| {
        p.started = std::time::Instant::now();
        p.started
    });
    memory::execute(copies).unwrap_or_else(|err| {
        crate::fatal(&format!("node {} ({}): copying its inputs: {err}", node.shown(), node.loc))
    });
    for c in copies {
        st.count_bytes(c);
    }
    st.nanos_copies.fetch_add(t2.nanos(), Ordering::Relaxed);
    let copied = started.map(|t| t.elapsed().as_nanos() as f64);
    let t3 = Stopwatch::start();
    let reduced = |what: &str, r: Result<(), String>| {
        r.unwrap_or_else(|err| {
            crate::fatal(&format!("node {} ({}): {what} its reductions: {err}", node.shown(), node.loc))
        })
    };
    reduced("starting", reduce::start(&lp.reductions));
    let slowest = run_parts(lp, part_args, run_box, probe.is_some());
    reduced("combining", reduce::finish(&lp.reductions));
    share_outputs(module, n, u.shape, lp, u.grid, u.outs);
    st.nanos_kernels.fetch_add(t3.nanos(), Ordering::Relaxed);
    if let (Some(mut p), Some(copy_ns)) = (probe, copied) {
        p.used = used_devices(lp);
        p.finish(slowest, copy_ns, copy_ns + slowest, true);
    }
}

/// The statistics' counts of a launch that ran on the devices.
fn count_launch(u: &Unit, lp: &LaunchPlan) {
    let st = &u.module.stats[u.node as usize];
    st.unit_launches.fetch_add(1, Ordering::Relaxed);
    let used = used_devices(lp) as u64;
    st.partitioned.fetch_add(u64::from(used > 1), Ordering::Relaxed);
    st.max_devices.fetch_max(used, Ordering::Relaxed);
}

/// Step 1 of a launch (see the module's doc): its plan, from the caches or made, and whether
/// it came from the caches. A plan for any scalars (one device) is looked up first, then one
/// for the launch's map inputs; a miss is made here where it needs no maps, else on the
/// planning pool, and cached. `ahead`: a miss that needs the maps may instead be planned
/// ahead ([`ahead`]), and then there is no plan (`None`): the launch runs whole.
fn plan_of(
    u: &Unit,
    key: &cache::Key,
    order: &[usize],
    table: &mut Table,
    t0: &Stopwatch,
    ahead: Option<Likely>,
) -> Option<(Arc<Outcome>, bool)> {
    let Unit { module, plans, node: n, shape, grid, .. } = *u;
    let st = &module.stats[n as usize];
    let per_device = partitions_on(order.len());
    // A launch like one of the last: its plan, without the keys below.
    if let Some(p) = plans.recent(key, table).filter(|p| plan::inspected_unchanged(p, table)) {
        st.plan_hits.fetch_add(1, Ordering::Relaxed);
        return Some((p, true));
    }
    let launch =
        bindings::Launch { module, node: n, shape, args: &key.args, parent: key.parent, grid, order, per_device };
    // A plan for any scalars first (one device), then one for these map inputs.
    let general = key.pointers_only(module.node(n));
    let specific_key = || {
        let leaf = match shape {
            KernelKind::Blocks { leaf, .. } => *leaf,
            KernelKind::Grid => n,
        };
        let named = plans.named(leaf, || bindings::named_params(module, leaf));
        key.with_inputs(module.node(n), &bindings::plan_inputs(&launch, &named))
    };
    // The key for these map inputs, when looked up: made once (it interprets the leaf's
    // arguments), kept for the insertion on a miss.
    let mut specific: Option<cache::Key> = None;
    let cached = match plans.get(&general, table) {
        Some(p) if matches!(&*p, Outcome::Devices(lp) if lp.scalar_free) => Some(p),
        _ => plans.get(specific.insert(specific_key()), table),
    }
    .filter(|p| plan::inspected_unchanged(p, table));
    let plan_hit = cached.is_some();
    let plan = match cached {
        Some(p) => {
            st.plan_hits.fetch_add(1, Ordering::Relaxed);
            p
        }
        None => {
            // Planning may take milliseconds: the GPUs get what is held for them first.
            crate::devices::inflight::submit_held();
            policy::log_line!("{} plan miss over {} device(s)", module.node(n).shown(), order.len());
            // Plans needing no maps are made here; the maps' ISL work runs on the planner
            // pool, reached from a plain thread (see the module's invariants).
            let split_now = |launch: &bindings::Launch<'_>, bindings: bindings::Bindings, table: &mut Table| {
                // A thread of no pool (the program's own) waits for the planner without
                // running other jobs: no thread of its own is needed (starting one cost more
                // than a plan from closed forms).
                if rayon::current_thread_index().is_none() {
                    // A plan the node made in microseconds last time is made right here. The
                    // time kept is the plan's own, not the wait for the planner: a planner
                    // thread slow to wake (its priority is lowered, and the program's pool
                    // may spin on the cores) made plans of 65 us count as 10 ms, and the
                    // node's next launches waited for the planner too.
                    let timed = |launch: &bindings::Launch<'_>, bindings, table: &mut Table| {
                        let t = std::time::Instant::now();
                        let outcome = split::plan_split(launch, bindings, table);
                        (outcome, t.elapsed().as_nanos() as u64)
                    };
                    let (outcome, nanos) = if plans.plans_quickly(n) {
                        timed(launch, bindings, table)
                    } else {
                        planner().install(|| timed(launch, bindings, table))
                    };
                    plans.planned_in(n, nanos);
                    return outcome;
                }
                std::thread::scope(|s| {
                    std::thread::Builder::new()
                        .name("hpvm-plan".into())
                        .spawn_scoped(s, || planner().install(|| split::plan_split(launch, bindings, table)))
                        .unwrap_or_else(|err| crate::fatal(&format!("cannot start a planning thread: {err}")))
                        .join()
                        .unwrap_or_else(|_| crate::fatal("planning a partitioned launch failed"))
                })
            };
            let make = |launch: &bindings::Launch<'_>, table: &mut Table| match bindings::plan_direct(launch, table) {
                Ok(outcome) => outcome,
                Err(bindings) => split_now(launch, *bindings, table),
            };
            let first = match bindings::plan_direct(&launch, table) {
                Ok(outcome) => outcome,
                Err(bindings) if ahead.is_some() => {
                    let devices = order.len() as u8;
                    match plans.ahead.on_miss(
                        n,
                        devices,
                        ahead.map_or(0.0, |l| l.whole_ns),
                        ahead.is_some_and(|l| l.measured),
                    ) {
                        ahead::Miss::Plan => {
                            let t = std::time::Instant::now();
                            let outcome = split_now(&launch, *bindings, table);
                            plans.ahead.planned(n, devices, t.elapsed().as_nanos() as u64);
                            outcome
                        }
                        ahead::Miss::Start => {
                            ahead::start(ahead_job(u, &launch, Some(*bindings)));
                            return None;
                        }
                        ahead::Miss::Whole => return None,
                    }
                }
                Err(bindings) => split_now(&launch, *bindings, table),
            };
            let p = Arc::new(fit_memory(first, &launch, table, &make));
            st.plan_misses.fetch_add(1, Ordering::Relaxed);
            let alloc = match &*p {
                Outcome::Devices(lp) => lp.alloc_nanos,
                Outcome::Host(_) => 0,
            };
            st.nanos_alloc.fetch_add(alloc, Ordering::Relaxed);
            let planning = t0.nanos().saturating_sub(alloc);
            st.nanos_intervals.fetch_add(planning, Ordering::Relaxed);
            if matches!(&*p, Outcome::Devices(lp) if used_devices(lp) > 1) {
                let mut kept = st.split_miss_nanos.lock().unwrap_or_else(|e| e.into_inner());
                if kept.len() < crate::module::SPLIT_MISSES_KEPT {
                    kept.push(planning);
                }
            }
            // What a split plan's reductions cost to combine, for the policy (a timed launch
            // sees only its kernels).
            if let Outcome::Devices(lp) = &*p {
                if used_devices(lp) > 1 && policy::mode() == policy::Mode::Auto {
                    // A merge reads the copy and the twin and writes the buffer, beside the
                    // twin's own copy: about three times a reduction's combining.
                    let bytes: u64 = lp
                        .reductions
                        .iter()
                        .map(|r| match r.how {
                            reduce::Combine::Changed => 3 * r.bytes(),
                            reduce::Combine::Op(_) => r.bytes(),
                        })
                        .sum();
                    plans.policy.of(n).lock().unwrap_or_else(|e| e.into_inner()).reduce_bytes = bytes;
                }
            }
            let scalar_free = matches!(&*p, Outcome::Devices(lp) if lp.scalar_free);
            let at = if scalar_free { general.clone() } else { specific.take().unwrap_or_else(specific_key) };
            // A whole launch while the node's maps for its values are made is not the plan.
            if !matches!(&*p, Outcome::Devices(lp) if lp.provisional) {
                plans.insert(at, p.clone());
            }
            p
        }
    };
    plans.remember(key, &plan);
    Some((plan, plan_hit))
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
    launch: &bindings::Launch<'_>,
    table: &mut Table,
    make: &dyn Fn(&bindings::Launch<'_>, &mut Table) -> Outcome,
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
        let finer = make(&bindings::Launch { per_device, ..*launch }, table);
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
    u: &Unit,
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
        let part_args: smallvec::SmallVec<[crate::args::ArgBytes; 2]> =
            r.parts.iter().map(|p| lp.part_args(p, args)).collect();
        if let Some((kernel, ptx, prepared)) = gpu {
            let (copies, sources) = (&copy_plan.copies, &copy_plan.sources);
            let launch =
                gpu::Launch { lp: r, part_args: &part_args, copies, sources, probe: None, lane: None, refine: None };
            let kernel_grid = lp.virtual_grid.unwrap_or(u.grid);
            let target = kernel::Target {
                m: module,
                n,
                kernel,
                name: &kernel.name,
                prepared,
                ptx,
                parent: u.parent,
                grid: kernel_grid,
                outs: u.outs,
            };
            gpu::run(&target, launch, false).unwrap_or_else(|err| {
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

/// Whether the leaf unit `u` launches runs a grid-stride loop (`dashdb::RuntimeBlock::strided`).
fn runs_grid_stride_loop(u: &Unit) -> bool {
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
    u: &Unit,
    base: &[u8],
    blocks: u64,
    gpu: Option<(&String, &'static std::ffi::CStr, &kernel::Prepared)>,
) -> (usize, Option<policy::Probe>, Likely) {
    let devs = devices();
    let all = devs.order.len();
    if crate::devices::cooperative() {
        // Its blocks wait for one another: all of them on one device.
        u.module.stats[u.node as usize].note_unpartitioned(
            "it is launched cooperatively (cudaLaunchCooperativeKernel): its blocks wait for one another at the \
             grid's barrier, so all of them run at once on one device",
        );
        return (1, None, Likely::NONE);
    }
    match policy::mode() {
        // Whole on device 0: planned as one device's launch (`bindings::plan_direct`), not
        // through the split planner, which would only find the setting and run it whole.
        policy::Mode::Off => return (1, None, Likely::NONE),
        _ if all <= 1 => return (1, None, Likely::NONE),
        policy::Mode::Always => return (all, None, Likely::NONE),
        policy::Mode::Auto => {}
    }
    let nodes = u.module.stats.len();
    let st = &u.module.stats[u.node as usize];
    if u.plans.policy.take_settled(u.node, nodes, blocks) {
        st.note_declined_again();
        return (1, None, Likely::NONE);
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
            let t = std::time::Instant::now();
            crate::devices::inflight::drain();
            policy::log_line!(
                "{} waited {:.3} ms for its first launch's time",
                u.module.node(u.node).shown(),
                t.elapsed().as_secs_f64() * 1e3
            );
        }
    }
    let mut m = record.lock().unwrap_or_else(|e| e.into_inner());
    if m.wave.is_none() {
        m.wave = match gpu {
            Some((name, ptx, prepared)) => prepared.wave(ptx, name),
            None => devs.sims.first().map(|s| match s.is_dry() {
                true => kernel::stand_in_wave(u.module, u.node, u.shape, base),
                false => s.threads() as u64,
            }),
        };
    }
    let strided = *m.strided.get_or_insert_with(|| runs_grid_stride_loop(u));
    let situation = policy::Situation { devices: all, blocks, wave: m.wave, gpus: gpu.is_some(), strided };
    let decision = policy::decide(&situation, &m, &policy::OVERHEADS);
    policy::log_line!(
        "{} launch {}: {} blocks, wave {:?}, ns/block {:?}, copies {:?}, overhead(2) {:.0} ns, planning {:?} ns, \
         before {:?}: {:?}",
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
    let (given, chosen) = match &decision {
        // Only open devices take partitions. Where the policy wants more than are open, the
        // others start opening (`devices::opening`) and later launches get them; the choice
        // is remembered only where it was taken.
        policy::Decision::Split(k) => {
            use crate::devices::opening;
            let mut ready = devs.ready().max(1);
            if *k > ready {
                // What this split would have saved counts towards opening the others, valued
                // by a measured kernel (a first launch's split is a guess, and a short program
                // would end waiting for GPUs it never used); the launches that wanted them
                // before the first measurement count once it comes. matmul 8192 x 5 on two
                // H200s counted only its last three launches and opened GPU 1 at its last,
                // which then ran whole: 1.13x its one-GPU wall, 0.98x counting all five; a
                // run of three such launches now opens GPU 1 at its last (1.18x), the cost
                // of buying once the rent paid equals the price.
                if m.ns_per_block.is_none() {
                    m.forgone_unvalued += 1;
                } else {
                    let launches = 1 + std::mem::take(&mut m.forgone_unvalued);
                    opening::forgo(policy::saving(&situation, &m, &policy::OVERHEADS, *k) * launches as f64);
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
    // A wave takes a GPU at least a microsecond: the floor for a kernel not measured yet.
    let whole_ns =
        m.ns_per_block.map_or_else(|| blocks as f64 / m.wave.unwrap_or(1).max(1) as f64 * 1e3, |p| p * blocks as f64);
    let likely = Likely {
        whole_ns,
        measured: m.ns_per_block.is_some(),
        split: match &decision {
            policy::Decision::Whole(policy::Why::Unmeasured { .. }) if whole_ns >= ahead::SPECULATE_MIN_NS => Some(all),
            policy::Decision::Split(k) if *k > given => Some(*k),
            _ => None,
        },
    };
    let before = m.last_devices;
    m.last_devices = given;
    if chosen {
        m.decided(blocks, given);
    }
    m.launches += 1;
    // On simulated devices every launch decided here is measured (a clock read); on GPUs a
    // sample, with events. Either way a decision that needs no new measure soon is settled
    // for the launches until its next one (`policy::Records::settles`).
    let measure = gpu.is_none() || policy::sample_gpu(&m, &decision);
    if measure && gpu.is_some() {
        m.probing = true;
    }
    if gpu.is_none() || !measure {
        let skip = policy::Records::settles(&decision, m.launches);
        if skip > 0 {
            u.plans.policy.settle(u.node, nodes, blocks, skip);
            // Counted in now where the next sample is due by the count.
            if policy::Records::counts_skipped(&decision) {
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
    (given, probe, likely)
}

/// The plan ahead of `launch` of unit `u`, whose pointers bind `bindings`.
fn ahead_job(u: &Unit, launch: &bindings::Launch<'_>, bindings: Option<bindings::Bindings>) -> ahead::Job {
    ahead::Job {
        module: u.module,
        ahead: &u.plans.ahead,
        node: u.node,
        shape: u.shape,
        args: launch.args.to_vec(),
        parent: launch.parent,
        grid: launch.grid,
        order: launch.order.to_vec(),
        per_device: launch.per_device,
        bindings,
    }
}

/// What the policy expects of a launch beyond its decision.
#[derive(Clone, Copy)]
struct Likely {
    /// The launch's kernel time whole, predicted (ns).
    whole_ns: f64,
    /// Predicted from a measure of the node (else from a floor per wave).
    measured: bool,
    /// A split over this many devices is likely soon (a first launch, measured before any
    /// split; a split waiting for GPUs to open): its planning may start ahead.
    split: Option<usize>,
}

impl Likely {
    const NONE: Likely = Likely { whole_ns: 0.0, measured: false, split: None };
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
fn run_parts(lp: &LaunchPlan, part_args: &[crate::args::ArgBytes], run_box: &RunBox<'_>, timed: bool) -> f64 {
    let sims = &devices().sims;
    if sims.first().is_some_and(|d| d.is_dry()) {
        return 0.0;
    }
    let slowest = AtomicU64::new(0);
    let run = |(p, a): (&PartPlan, &crate::args::ArgBytes)| {
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

/// ISL's nanoseconds making closed forms (see [`closed`]), for the statistics.
pub(crate) fn closed_form_nanos() -> u64 {
    closed::NANOS.load(Ordering::Relaxed)
}

/// Closed forms made (or found impossible), for the statistics.
pub(crate) fn closed_forms_made() -> u64 {
    closed::MADE.load(Ordering::Relaxed)
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
        memo::forget_intervals(what == Forget::All);
        closed::forget();
    }
}

/// Parses the database's maps on every worker, in the background (see [`memo::prefetch`]).
pub(crate) fn prefetch(db: &dashdb::Database) {
    if devices().count() > 1 {
        memo::prefetch(db);
    }
}
