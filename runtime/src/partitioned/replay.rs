//! Replays: a CUDA kernel's launch made again without going through the graph, the plan and
//! the copy plan, where nothing they depend on has changed since its last launch.
//!
//! A launch-bound loop (a time step's few short kernels, or a kernel and a synchronization
//! per step) spends its host time in the runtime's work per launch: the graph's arguments,
//! the plan and copy-plan lookups, the coherence state, the launch's parameters. On one GPU,
//! or on several where the split policy keeps the launch whole without looking at it (its
//! settled launches, asked as the full path asks), that work gives the same answer launch
//! after launch, and a replay skips it.
//!
//! A unit's launch is recorded ([`record`]) when it ran whole on one GPU, found its plan and its
//! copy plan in the caches, copied nothing and changed no buffer's coherence state, and its
//! plan holds for any scalars; the record keeps the table's [`memory::epoch`] after it. A unit
//! keeps its last two records (a loop swapping two buffers has two launches). A later launch
//! of the unit is replayed ([`try_launch`]) from a record when:
//! - the epoch has not moved: nothing was tracked, freed, copied or made current since (every
//!   change takes the table through [`memory::table`], which moves it; replays do not);
//! - its arguments are the record's, except scalars the kernel only reads as values
//!   (`free`), and its grid is the record's, both read where the launcher put them;
//! - every buffer the plan touches is device memory (`host_stores` false): the host changes
//!   it only through calls that take the table, never by its own stores.
//!
//! The generic path would then make the same plan, copy nothing, change nothing, and launch
//! the same kernel with the same parameters but the free scalars: the replay does exactly that
//! launch, on the same held/graph path, in flight as the generic launch would be. Where any
//! condition fails, the launch takes the generic path (and may record again).
//!
//! `HPVM_MGPU_REPLAY=off` turns replays off.

use super::cache::Launches;
use super::plan::{CopyPlan, LaunchPlan};
use super::policy;
use super::recorded::{FromUser, Launch, Record, Replays};
use crate::args::{ArgBytes, SendPtr};
use crate::ctx::NodeCtx;
use crate::desc::KernelKind;
use crate::desc::ScalarKind;
use crate::devices::devices;
use crate::devices::inflight::Slots;
use crate::devices::params::Params;
use crate::memory::{self, Table};
use crate::module::Module;
use smallvec::SmallVec;
use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

/// Records kept per unit: two, so that a loop that swaps two buffers between launches
/// (`kernel<<<..>>>(a, b); std::swap(a, b);`) replays both of its launches.
const RECORDS_PER_UNIT: usize = 2;

/// Whether launches are recorded at all: on GPUs, in one process, with nothing timing the
/// launches (statistics, benchmarks), and not turned off.
pub(crate) fn may_record() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let setting = *ON.get_or_init(|| match std::env::var("HPVM_MGPU_REPLAY").unwrap_or_default().trim() {
        "" | "on" | "1" => true,
        "off" | "0" => false,
        other => crate::fatal(&format!("HPVM_MGPU_REPLAY={other}: expected `on` or `off`")),
    });
    let devs = devices();
    setting
        && !crate::devices::cooperative()
        && devs.on_gpus()
        && !crate::ranks::spans_ranks()
        && !crate::sink::timing()
        && super::kernel::bench_repeat().is_none()
        // A launch on a program lane goes to its own stream, after what it conflicts with
        // (`gpu::run`), where a replay goes after everything.
        && crate::devices::inflight::program_lane().is_none()
}

/// Where a launch ran: its unit and how it was launched.
pub(super) struct Site<'a> {
    pub module: &'a Module,
    pub replays: &'a Replays,
    pub node: u32,
    pub shape: &'a KernelKind,
    pub parent: SendPtr<NodeCtx>,
    pub grid: [i64; 3],
    pub asynchronous: bool,
}

/// Records the launch `l` at `u` (arguments `args`), which ran under `table` with plan `lp`
/// and copy plan `copies`, if a later launch may replay it; the epoch it keeps is the table's
/// as this launch leaves it, which this launch did not change.
pub(super) fn record(
    u: &Site<'_>,
    args: &[u8],
    lp: &LaunchPlan,
    copies: &CopyPlan,
    l: Launch,
    table: &MutexGuard<'static, Table>,
) {
    let (m, n) = (u.module, u.node);
    let KernelKind::Blocks { leaf, alloc: None, .. } = u.shape else { return };
    let unit = m.node(n);
    let leaf_desc = m.node(*leaf);
    let replayable = copies.changes_nothing()
        && lp.parts.len() == 1
        && lp.rounds.is_empty()
        && lp.reductions.is_empty()
        && lp.inspections.is_empty()
        && lp.virtual_grid.is_none()
        && lp.scalar_free
        && !lp.provisional
        && u.asynchronous
        && unit.outputs_size() == 0
        && leaf_desc.indirect.is_none()
        && !memory::residency::sparse()
        && !m.fed_one_to_one(*leaf)
        && lp.buffers.iter().all(|&(s, _)| table.get(s).is_some_and(|b| !b.host_stores));
    // SAFETY: the parent context outlives the launch (it is the caller's).
    let parent = unsafe { u.parent.get().as_ref() }.map(|p| (p.id, p.dim));
    if !replayable || parent != Some(([0; 3], [1; 3])) || !m.has_no_edges_in(n) {
        return;
    }
    // The unit's scalars that reach the kernel only as values: no count (the leaf's block
    // shape) reads them, and every leaf parameter they bind is a scalar.
    let mut free = SmallVec::new();
    for (j, p) in unit.params.iter().enumerate() {
        if !matches!(p.kind, ScalarKind::Int | ScalarKind::Float) || leaf_desc.counts.iter().any(|c| c.uses(j as u32)) {
            continue;
        }
        let from = p.offset as usize;
        let bound: SmallVec<[usize; 2]> =
            m.bound(*leaf).iter().filter(|&&(f, _, _)| f == from).map(|&(_, to, _)| to).collect();
        let targets: Option<SmallVec<[(usize, usize); 2]>> = bound
            .iter()
            .map(|&to| {
                let i = leaf_desc.params.iter().position(|q| q.offset as usize == to)?;
                let q = &leaf_desc.params[i];
                (matches!(q.kind, ScalarKind::Int | ScalarKind::Float) && q.size == p.size)
                    .then(|| (l.starts[i], q.size as usize))
            })
            .collect();
        match targets {
            Some(t) if !t.is_empty() => free.extend(t.into_iter().map(|(at, size)| (from, size, at))),
            _ => {}
        }
    }
    memory::unchanged(table);
    let mut args = ArgBytes::from_slice(args);
    for &(o, s, _) in &free {
        args[o..o + s].fill(0);
    }
    let Some(ptx) = m.ptx else { return };
    let Ok(found) = devices().gpu(l.device).find_kernel(ptx, &l.name) else { return };
    let params = Params::copy_of(&l.bytes, &l.starts);
    let grid_words = grid_words(lp, u.grid, &l);
    let record = Record {
        epoch: memory::epoch(),
        grid: u.grid,
        grid_words,
        args,
        free,
        launch: l,
        found,
        params,
        from_user: None,
    };
    let mut replays = u.replays.lock();
    let records = replays.entry(n).or_default();
    // The same arguments recorded again (after a change to memory) replace their record (any
    // grid's, where both hold for any grid); otherwise the oldest record goes.
    let covers = |r: &Record| {
        r.args == record.args && (r.grid == record.grid || (r.grid_words.is_some() && record.grid_words.is_some()))
    };
    records.retain(|r| !covers(r));
    if records.len() == RECORDS_PER_UNIT {
        records.remove(0);
    }
    records.push(record);
}

/// Replays launch `launch` of `module` (its plans `plans`), its launcher's argument struct at
/// `user`, if its unit's record allows (see the module's doc); whether it did. The caller has
/// asked [`may_record`].
///
/// This is the launch path of a launch-bound loop: it reads the arguments where the launcher
/// put them and compares them with the record in place, and launches the record's own
/// parameters with the free scalars written over them, so that it packs, allocates and
/// evaluates nothing but the grid.
///
/// # Safety
/// `user` points to the argument struct of launch `launch`'s launcher.
pub(crate) unsafe fn try_launch(module: &Module, plans: &Launches, launch: u32, user: *const u8) -> bool {
    let Some((root, n)) = module.cuda_unit(launch) else { return false };
    // The table's lock orders a replay with every change to the table, as a launch's is.
    let _table = memory::table_read();
    let mut replays = plans.replays.lock();
    let Some(records) = replays.get_mut(&n) else { return false };
    let epoch = memory::epoch();
    // SAFETY: the launcher's struct (the caller's contract); every offset lies within it.
    let at = |off: u32, len: u32| unsafe { std::slice::from_raw_parts(user.add(off as usize), len as usize) };
    let mut matched = None;
    for (i, rec) in records.iter_mut().enumerate() {
        if rec.epoch != epoch {
            continue;
        }
        if !matches!(&rec.from_user, Some(f) if f.launch == launch) {
            rec.from_user = Some(from_user(module, launch, root, n, &rec.free));
        }
        let from = rec.from_user.as_ref().expect("made above");
        let int = |i: u32| match from.root_params.get(i as usize) {
            Some(&(off, len)) if len > 0 => crate::args::int_of(at(off, len)),
            _ => None,
        };
        if !from.usable || !from.same.iter().all(|&(u, a, len)| *at(u, len) == rec.args[a as usize..(a + len) as usize])
        {
            continue;
        }
        // The unit's grid now; extents its counts do not give stay the record's.
        let mut now = rec.grid;
        let counted = module
            .node(n)
            .counts
            .iter()
            .take(3)
            .enumerate()
            .all(|(d, e)| e.eval(&int).inspect(|&v| now[d] = v).is_some());
        if counted && (now == rec.grid || (rec.grid_words.is_some() && kernel_grid_fits(now))) {
            matched = Some((i, now));
            break;
        }
    }
    let Some((rec, grid_now)) = matched.map(|(i, g)| (&mut records[i], g)) else { return false };
    let from = rec.from_user.as_ref().expect("matched above");
    // On several GPUs, only where the split policy would keep the launch whole without
    // looking at it ([`super::policy`]'s settled launches), and counted as it counts them;
    // asked last, since a yes is used up.
    let devs = devices();
    if devs.order.len() > 1 {
        let blocks = grid_now.iter().map(|&b| b.max(0) as u64).product();
        let settled = match policy::mode() {
            policy::Mode::Off => true,
            policy::Mode::Always => false,
            policy::Mode::Auto => plans.policy.take_settled(n, module.stats.len(), blocks),
        };
        if !settled {
            return false;
        }
        if policy::mode() == policy::Mode::Auto {
            module.stats[n as usize].note_declined_again();
        }
    }
    let Record { launch: l, params, found, grid_words, .. } = rec;
    if params.starts().is_empty() {
        *params = Params::copy_of(&l.bytes, &l.starts);
    }
    for &(u, len, p) in &from.free {
        params.set(p as usize, at(u, len));
    }
    // The kernel's grid is the unit's (checked above: the record's, or any under a plan that
    // holds for any grid), and the grid its code sees is its parameters' copy of it.
    let launch_grid = grid_now.map(|b| b as u32);
    if let Some(words) = grid_words {
        for (d, &at) in words.iter().enumerate() {
            params.set(at, &grid_now[d].to_le_bytes());
        }
    }
    let (k, ptx) = (l.device, module.ptx.expect("a unit that launched on a GPU has PTX"));
    // No marks: the launch is untimed and copies nothing.
    let slots = match Slots::take_none_on(k) {
        Ok(s) => s,
        Err(e) => crate::fatal(&format!("a kernel launched earlier failed: {e}")),
    };
    let node = module.node(n);
    policy::log_line!("{} replayed", node.shown());
    if let Err(err) = devs.gpu(k).launch_found(ptx, &l.name, found, launch_grid, l.block, l.shared, params) {
        crate::fatal(&format!("node {} ({}) on the GPUs: {err}", node.shown(), node.loc));
    }
    if slots.asynchronous() {
        slots.leave(&[k], None);
    } else {
        // Not left in flight (the run is synchronous): waited for, as the generic path does.
        if let Err(err) = crate::devices::Device::synchronize(devs.gpu(k)) {
            crate::fatal(&format!("node {} ({}) on the GPUs: {err}", node.shown(), node.loc));
        }
    }
    let st = &module.stats[n as usize];
    st.replays.fetch_add(1, Ordering::Relaxed);
    st.replayed_instances.fetch_add(grid_now.iter().product::<i64>() as u64, Ordering::Relaxed);
    true
}

/// Whether a blocks kernel may be launched over `grid` (CUDA's limits, as
/// [`super::kernel::prepare`] checks them).
fn kernel_grid_fits(grid: [i64; 3]) -> bool {
    grid.iter().all(|&b| b >= 1) && grid[0] <= i32::MAX as i64 && grid[1] <= 65535 && grid[2] <= 65535
}

/// Where a whole launch's parameters hold the grid its code sees ([`super::kernel::run`]
/// pushes the offset, the grid, the parent's position and extent and the output records
/// after the leaf's parameters): their starts, where the launch ran its unit's whole grid
/// from block 0 under a plan that holds for any grid.
fn grid_words(lp: &LaunchPlan, grid: [i64; 3], l: &Launch) -> Option<[usize; 3]> {
    use contract::kernel::{EXTRA, GRID};
    let part = lp.parts.first()?;
    let whole = part.bx.lo == [0; 3] && part.bx.hi == grid && l.grid.iter().zip(&grid).all(|(&b, &g)| b as i64 == g);
    // A whole-buffer plan (one device's: `bindings::plan_direct`) reads and writes every
    // buffer whole, whatever the grid; nothing else of it depends on the grid.
    if !whole || !lp.scalar_free || l.starts.len() < EXTRA {
        return None;
    }
    let at = l.starts.len() - EXTRA + GRID;
    let words = [l.starts[at], l.starts[at + 1], l.starts[at + 2]];
    let holds = |d: usize| l.bytes.get(words[d]..words[d] + 8).is_some_and(|b| b == grid[d].to_le_bytes());
    (0..3).all(holds).then_some(words)
}

/// Where unit `n`'s arguments (root `root`'s, bound into it) lie in launch `launch`'s
/// argument struct, its free scalars `free` (unit offset, bytes, parameter start) apart.
fn from_user(module: &Module, launch: u32, root: u32, n: u32, free: &[(usize, usize, usize)]) -> FromUser {
    let desc = &module.program.launches[launch as usize];
    let params = &module.node(root).params;
    let root_params = params
        .iter()
        .zip(&desc.arg_offsets)
        .map(|(p, &off)| (off, if p.kind == ScalarKind::Int { p.size } else { 0 }))
        .collect();
    let mut f = FromUser { launch, usable: true, same: SmallVec::new(), free: SmallVec::new(), root_params };
    for &(from, to, size) in module.bound(n) {
        // The root parameter holding bytes `from..from + size` of the root's arguments.
        let Some((p, &off)) = params
            .iter()
            .zip(&desc.arg_offsets)
            .find(|(p, _)| p.offset as usize <= from && from + size <= (p.offset + p.size) as usize)
        else {
            f.usable = false;
            return f;
        };
        let user = off + (from - p.offset as usize) as u32;
        match free.iter().find(|&&(o, s, _)| o < to + size && to < o + s) {
            None => f.same.push((user, to as u32, size as u32)),
            Some(&(o, s, at)) if o == to && s == size => f.free.push((user, size as u32, at as u32)),
            // Part of a free scalar: not read so.
            Some(_) => {
                f.usable = false;
                return f;
            }
        }
    }
    f
}
