//! A launch's plan: its partitions and, per partition and buffer, the bytes it reads and
//! writes, computed with ISL from the analysis database (the Mekong thesis's section 3.4,
//! `setPartitionBoundaries` then the ranges of the access maps).
//!
//! Nothing is guessed: whenever the database does not prove the split safe for THIS launch
//! (node not analysed or not partitionable, its assumptions `valid_when` false for these
//! parameters, a block size other than the analysed one, partitions writing the same bytes,
//! a parameter the runtime cannot read), the plan is one partition on device 0 that reads
//! and may write every buffer whole, with the reason kept for the statistics.

use super::kernel::block_shape;
use super::reduce::Reduce;
use super::{LaunchPlan, Outcome, PartPlan};
use crate::args::{int_param, read_u64};
use crate::ctx::GridBox;
use crate::desc::{KernelKind, KindDesc, NodeDesc, ScalarKind};
use crate::devices::Place;
use crate::memory::{AllocError, Buffer, ByteRect, Table};
use crate::module::Module;
use dashdb::{ReadKind, WriteKind};
use isl_glue::{AccessMap, BlockRange, Isl, Rect};
use rayon::prelude::*;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// What a plan is computed from.
pub(crate) struct Launch<'a> {
    pub module: &'a Module,
    pub node: u32,
    pub shape: &'a KernelKind,
    /// The unit's argument buffer (host addresses).
    pub args: &'a [u8],
    pub parent: ([i64; 3], [i64; 3]),
    pub grid: [i64; 3],
    /// The devices in the order partitions take them (a permutation of `0..devices`).
    pub order: &'a [usize],
    /// Partitions per device of a split (`HPVM_MGPU_PARTITIONS`, or more where a device's
    /// memory holds less: see `partitioned::fit_memory`).
    pub per_device: usize,
}

/// One pointer argument of the unit's leaf that points into a tracked buffer.
struct BufArg {
    /// Index into the plan's buffers.
    buffer: usize,
    /// Byte offset of the pointer from the buffer's start.
    offset: u64,
    size: u64,
    param: u32,
}

/// What a launch's pointers bind, found before any planning: the buffers they point into,
/// and the leaf's pointer arguments within them.
pub(crate) struct Bindings {
    /// Start and id of each tracked buffer the unit's pointers point into.
    buffers: Vec<(u64, u64)>,
    /// (offset of the pointer in the unit's arguments, index into `buffers`).
    unit_ptrs: Vec<(usize, usize)>,
    leaf: u32,
    leaf_args: Vec<u8>,
    block: Option<[i64; 3]>,
    args: Vec<BufArg>,
}

/// A launch's plan where no access maps are needed: an untracked pointer (the host runs it),
/// or one device running the whole grid on memory the host never stores into (CUDA's device
/// memory, current on the device or written there first), where the maps would only say
/// which bytes to copy and there are none beyond what the whole buffers need. Otherwise the
/// bindings for [`plan_split`], which does the ISL work.
///
/// The one-device plan holds for any scalar arguments ([`LaunchPlan::scalar_free`]): a kernel
/// launched in a loop with a changing scalar (a time step, a column) plans once. Strict
/// checking still wants the maps' bounds.
pub(crate) fn plan_direct(l: &Launch<'_>, table: &mut Table) -> Result<Outcome, Box<Bindings>> {
    let b = match bindings(l, table) {
        Ok(b) => b,
        Err(reason) => return Ok(Outcome::Host(reason)),
    };
    let whole_is_exact = l.order.len() == 1
        && l.per_device == 1
        && !super::strict()
        && b.buffers.iter().all(|&(start, _)| table.get(start).is_some_and(|x| !x.host_stores));
    if !whole_is_exact {
        return Err(Box::new(b));
    }
    let program = &l.module.program;
    let leaf_desc = &program.nodes[b.leaf as usize];
    let mut outcome = unpartitioned(l, table, &b.buffers, &b.unit_ptrs, &b.args, leaf_desc, None);
    if let Outcome::Devices(plan) = &mut outcome {
        if let Some(kernel) = &program.nodes[l.node as usize].kernel {
            plan.read_only_cache = read_only_cache_legal(&kernel.readonly, &b.args, plan);
        }
        plan.scalar_free = true;
        plan.pointer_slots = b.unit_ptrs.iter().map(|&(offset, _)| offset).collect();
    }
    Ok(outcome)
}

/// The integer parameters (by position) of `leaf` that its maps, their conditions, shapes
/// and block sizes name: the only scalars a plan of it depends on (the planner reads no
/// other: `split`'s values). Conservative: every identifier
/// in those texts that is a parameter's map name counts.
pub(crate) fn named_params(module: &Module, leaf: u32) -> Vec<u32> {
    let desc = &module.program.nodes[leaf as usize];
    let Some(dn) = module.analysis.as_ref().and_then(|db| db.node(&desc.name)) else { return Vec::new() };
    let mut texts: Vec<&str> = Vec::new();
    texts.extend(dn.valid_when.as_deref());
    texts.extend(dn.bounds.iter().map(String::as_str));
    texts.extend(dn.grid.iter().map(String::as_str));
    if let Some(b) = &dn.block {
        texts.extend(b.size.iter().map(String::as_str));
    }
    for a in &dn.args {
        texts.extend(a.params.iter().map(String::as_str));
        texts.extend(a.shape.iter().map(String::as_str));
        texts.extend(a.read_map.as_deref());
        texts.extend(a.write_map.as_deref());
        texts.extend(a.read_valid_when.as_deref());
        texts.extend(a.write_through.as_ref().map(|t| t.map.as_str()));
    }
    let mut names = std::collections::HashSet::new();
    for t in texts {
        names.extend(t.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| !w.is_empty()));
    }
    (0..dn.param_names.len() as u32)
        .filter(|&i| desc.params.get(i as usize).is_some_and(|p| p.kind == ScalarKind::Int))
        .filter(|&i| names.contains(dn.param_names[i as usize].as_str()))
        .collect()
}

/// What a plan of launch `l` depends on beyond its node, grid, parent and the unit's
/// pointers: the leaf's block, the leaf's pointers (bound from the unit's) and the values of
/// the leaf's parameters `named` ([`named_params`]). Launches that agree on all of it get
/// the same plan: scalars the maps never name (a time step used only as a value) do not
/// make a new one.
pub(crate) fn plan_inputs(l: &Launch<'_>, named: &[u32]) -> Vec<i64> {
    let (leaf, leaf_args, block) = leaf_view(l);
    let desc = &l.module.program.nodes[leaf as usize];
    let mut inputs = block.unwrap_or([0; 3]).to_vec();
    for p in desc.params.iter().filter(|p| p.kind == ScalarKind::Pointer) {
        inputs.push(read_u64(&leaf_args, p.offset as usize).unwrap_or(0) as i64);
    }
    for &i in named {
        // A named parameter that is not an integer: the planner says why it cannot split.
        inputs.push(int_param(desc, &leaf_args, i).unwrap_or(i64::MIN));
    }
    inputs
}

/// The unit's leaf as a launch sees it: the leaf, its arguments (allocation outputs zero:
/// only their sizes matter here) and, for a blocks unit, its block.
pub(crate) fn leaf_view(l: &Launch<'_>) -> (u32, Vec<u8>, Option<[i64; 3]>) {
    match l.shape {
        KernelKind::Blocks { leaf, alloc, .. } => {
            let program = &l.module.program;
            let zeros = alloc.map(|a| vec![0u8; program.nodes[a as usize].outputs_size()]).unwrap_or_default();
            let args = l.module.child_args(l.node, *leaf, l.args, &|_| (&zeros[..], 1));
            (*leaf, args.base, Some(l.module.grid(*leaf, Some((l.node, l.args)))))
        }
        KernelKind::Grid => (l.node, l.args.to_vec(), None),
    }
}

/// The buffers a launch's pointers bind, or why the host must run it (a pointer not tracked).
fn bindings(l: &Launch<'_>, table: &mut Table) -> Result<Bindings, String> {
    let program = &l.module.program;
    let unit = &program.nodes[l.node as usize];
    // The unit's pointers become device addresses: each must be in a tracked buffer.
    let mut buffers: Vec<(u64, u64)> = Vec::new();
    let mut unit_ptrs: Vec<(usize, usize)> = Vec::new();
    for p in unit.params.iter().filter(|p| p.kind == ScalarKind::Pointer) {
        let Some(v) = read_u64(l.args, p.offset as usize) else { continue };
        if v == 0 {
            continue;
        }
        let Some(start) = table.containing(v, 0) else {
            return Err(format!("`{}` points to memory the program did not track", p.name));
        };
        let id = table.get(start).expect("found").id;
        let b = buffers.iter().position(|x| x.0 == start).unwrap_or_else(|| {
            buffers.push((start, id));
            buffers.len() - 1
        });
        unit_ptrs.push((p.offset as usize, b));
    }
    let (leaf, leaf_args, block) = leaf_view(l);
    let shared: &[u32] = match l.shape {
        KernelKind::Blocks { shared_params, .. } => shared_params,
        KernelKind::Grid => &[],
    };
    let leaf_desc = &program.nodes[leaf as usize];
    let mut args: Vec<BufArg> = Vec::new();
    for (i, p) in leaf_desc.params.iter().enumerate() {
        if p.kind != ScalarKind::Pointer || shared.contains(&(i as u32)) {
            continue;
        }
        let Some(v) = read_u64(&leaf_args, p.offset as usize) else { continue };
        if v == 0 {
            continue;
        }
        let Some(start) = table.containing(v, 0) else {
            return Err(format!("`{}` points to memory the program did not track", p.name));
        };
        let Some(buffer) = buffers.iter().position(|x| x.0 == start) else {
            return Err(format!("`{}` does not come from the launch's own arguments", p.name));
        };
        let size = table.get(start).expect("found").size;
        args.push(BufArg { buffer, offset: v - start, size, param: i as u32 });
    }
    Ok(Bindings { buffers, unit_ptrs, leaf, leaf_args, block, args })
}

/// The grid dimensions a launch of `blocks` blocks in `parts` partitions is cut along. The
/// user's choice is taken as given. The analysis's is a list of splittable dimensions, best
/// first: the first with a block for every partition, else the one with the most blocks (one
/// of a single block would leave every block in one partition).
pub(crate) fn cut_along(split: &dashdb::Split, blocks: [i64; 3], parts: usize) -> Result<Vec<usize>, String> {
    let dims: Vec<usize> = split.dims.iter().map(|&d| d as usize).filter(|&d| d < 3).collect();
    if split.chosen_by == dashdb::SplitChoice::User {
        return Ok(dims);
    }
    let extent = |d: usize| blocks[d].max(0) as u64;
    if let Some(&d) = dims.iter().find(|&&d| extent(d) >= parts as u64) {
        return Ok(vec![d]);
    }
    // Ties go to the better dimension (the earlier one). A grid of one block gets the best
    // dimension: one whole partition, which the caller reports as too small to cut.
    match dims.iter().copied().rev().max_by_key(|&d| extent(d)) {
        Some(d) => Ok(vec![d]),
        None => Err("no grid dimension to split".into()),
    }
}

/// The plan of a launch [`plan_direct`] left to the access maps: split where the database
/// proves it safe for these arguments, whole on device 0 otherwise.
pub(crate) fn plan_split(l: &Launch<'_>, b: Bindings, table: &mut Table) -> Outcome {
    let Bindings { buffers, unit_ptrs, leaf, leaf_args, block, args } = b;
    let program = &l.module.program;
    let unit = &program.nodes[l.node as usize];
    let leaf_desc = &program.nodes[leaf as usize];
    let mut inspections = Vec::new();
    let split = split(l, leaf_desc, &leaf_args, block, &args, &buffers, table, &mut inspections);
    let mut outcome = match split {
        Ok((parts, mut reductions)) => {
            let t = std::time::Instant::now();
            let needs: Vec<(u64, usize)> =
                parts.iter().flat_map(|p| unit_ptrs.iter().map(|&(_, b)| (buffers[b].0, p.0))).collect();
            table.allocate(&needs).unwrap_or_else(|e| crate::fatal(&allocation_failed(l, unit, table, &e)));
            let parts: Vec<PartPlan> = parts
                .into_iter()
                .map(|(device, bx, reads, writes)| PartPlan {
                    device,
                    bx,
                    args: device_args(l.args, &unit_ptrs, &buffers, device, table),
                    reads,
                    writes,
                })
                .collect();
            // Partitions are whole blocks: a grid of one block along the split dimensions
            // (a flat grid is cut into blocks of `kernel::block_shape`) runs on one
            // device, which the statistics should say rather than leave to be guessed.
            let first = parts.first().map(|p| p.device);
            let one_device = l.order.len() > 1 && parts.iter().all(|p| Some(p.device) == first);
            let why = one_device.then(|| {
                let shape = match block {
                    Some(b) => format!(
                        "its blocks ({})",
                        b[..unit.dims.max(1) as usize].iter().map(|x| x.to_string()).collect::<Vec<_>>().join(" × ")
                    ),
                    None => {
                        let b = block_shape(unit.dims);
                        format!(
                            "blocks of {} instances, the runtime's cut of a flat grid",
                            b[..unit.dims.max(1) as usize]
                                .iter()
                                .map(|x| x.to_string())
                                .collect::<Vec<_>>()
                                .join(" × ")
                        )
                    }
                };
                format!("its grid is too small to cut: partitions are whole {shape}, and the grid fits in one")
            });
            let virtual_grid = parts.first().map(|p| p.bx.dim).filter(|&d| block.is_some() && d != l.grid);
            // Each reduction's devices: the first partition's holds the result.
            let mut devices: Vec<usize> = parts.iter().map(|p| p.device).collect();
            devices.dedup();
            devices.sort_unstable();
            devices.dedup();
            for r in &mut reductions {
                let mut at = |k: usize| {
                    let buf = table.get_mut(buffers[r.buffer].0).expect("tracked");
                    buf.addr(Place::Device(k)).unwrap_or_else(|e| crate::fatal(&e)) + r.start
                };
                let home = parts[0].device;
                r.home = (home, at(home));
                r.others = devices.iter().filter(|&&k| k != home).map(|&k| (k, at(k))).collect();
            }
            reductions.retain(|r| !r.others.is_empty());
            let mut plan = LaunchPlan::new(buffers, parts, why);
            plan.reductions = reductions;
            plan.virtual_grid = virtual_grid;
            plan.alloc_nanos = t.elapsed().as_nanos() as u64;
            Outcome::Devices(plan)
        }
        Err(reason) => unpartitioned(l, table, &buffers, &unit_ptrs, &args, leaf_desc, Some(reason)),
    };
    if let (Outcome::Devices(plan), Some(kernel)) = (&mut outcome, &unit.kernel) {
        plan.read_only_cache = read_only_cache_legal(&kernel.readonly, &args, plan);
    }
    if let Outcome::Devices(plan) = &mut outcome {
        plan.inspections = inspections;
        plan.pointer_slots = unit_ptrs.iter().map(|&(offset, _)| offset).collect();
    }
    outcome
}

/// The index values a plan was made from (an indirect write's inspector): the host's bytes of
/// `runs` of the plan's buffer `buffer` at planning time.
pub(crate) struct Inspection {
    buffer: usize,
    runs: Vec<(u64, u64)>,
    bytes: Vec<u8>,
}

/// Whether a cached plan still holds: the index values it inspected are unchanged. The host is
/// made current on them first (they may have been written on a device since).
pub(crate) fn inspected_unchanged(plan: &Outcome, table: &mut Table) -> bool {
    let Outcome::Devices(lp) = plan else { return true };
    lp.inspections.iter().all(|i| {
        let Some(buf) = table.get_mut(lp.buffers[i.buffer].0) else { return false };
        let mut at = 0;
        i.runs.iter().all(|&(lo, hi)| {
            let now = host_bytes(buf, lo, hi);
            let same = now == &i.bytes[at..at + now.len()];
            at += now.len();
            same
        })
    })
}

/// The host's bytes `lo..hi` of a buffer, made current first.
fn host_bytes(buf: &mut Buffer, lo: u64, hi: u64) -> &[u8] {
    buf.host_current(lo, hi);
    // SAFETY: `lo..hi` lies within the tracked buffer (the runs come from a map clipped to
    // it), which is the program's memory for as long as it is tracked, and no device copy
    // writes it while the table is locked.
    unsafe { std::slice::from_raw_parts((buf.start + lo) as *const u8, (hi - lo) as usize) }
}

/// An indirect write of one partition whose index values are still to be read.
struct Pending {
    /// The written argument and the argument holding the indices.
    written: usize,
    index: usize,
    /// The bytes of the index argument's buffer the partition's instances read indices from.
    at: Vec<ByteRect>,
}

/// Reads a partition's indices of an indirect write and turns them into the byte runs it
/// writes; records what was read in `inspections`.
fn inspect(
    p: &Pending,
    dn: &dashdb::Node,
    args: &[BufArg],
    buffers: &[(u64, u64)],
    table: &mut Table,
    inspections: &mut Vec<Inspection>,
) -> Result<Vec<ByteRect>, String> {
    let (w, x) = (&args[p.written], &args[p.index]);
    let warg = dn.arg(w.param).expect("checked");
    let t = warg.write_through.as_ref().expect("indirect");
    let from = &dn.arg(x.param).expect("checked").name;
    let width = (t.bits / 8) as usize;
    let buf = table.get_mut(buffers[x.buffer].0).expect("tracked");
    let mut offsets: Vec<i128> = Vec::new();
    let mut insp = Inspection { buffer: x.buffer, runs: Vec::new(), bytes: Vec::new() };
    for r in &p.at {
        for (lo, hi) in r.row_runs() {
            let bytes = host_bytes(buf, lo, hi);
            for v in bytes.chunks_exact(width) {
                let mut raw = [0u8; 8];
                raw[..width].copy_from_slice(v);
                let u = u64::from_le_bytes(raw);
                let v = if t.signed && width < 8 {
                    let shift = 64 - t.bits;
                    ((u << shift) as i64 >> shift) as i128
                } else if t.signed {
                    u as i64 as i128
                } else {
                    u as i128
                };
                offsets.push(w.offset as i128 + (v + t.offset as i128) * t.scale as i128);
            }
            insp.bytes.extend_from_slice(bytes);
            insp.runs.push((lo, hi));
        }
    }
    inspections.push(insp);
    offsets.sort_unstable();
    offsets.dedup();
    let es = warg.element_size as i128;
    if let (Some(&first), Some(&last)) = (offsets.first(), offsets.last()) {
        if first < 0 || last + es > w.size as i128 {
            let bad = if first < 0 { first } else { last };
            return Err(format!(
                "an index read from `{from}` places a write of `{}` at element {} of a buffer of {}",
                warg.name,
                (bad - w.offset as i128) / t.scale as i128,
                (w.size - w.offset) / warg.element_size as u64
            ));
        }
    }
    let mut runs: Vec<ByteRect> = Vec::new();
    for o in offsets {
        let (lo, hi) = (o as u64, (o + es) as u64);
        match runs.last_mut() {
            Some(r) if r.end() >= lo => *r = ByteRect::run(r.start, hi.max(r.end())),
            _ => runs.push(ByteRect::run(lo, hi)),
        }
    }
    Ok(runs)
}

/// Whether the kernel variant reading its `in`-only pointers through the read-only data
/// cache may run: no buffer one of them points into is written by the launch (through
/// another pointer, or an alias).
fn read_only_cache_legal(readonly: &[u32], args: &[BufArg], plan: &LaunchPlan) -> bool {
    let written = |b: usize| plan.parts.iter().any(|p| p.writes.iter().any(|(x, _)| *x == b));
    !readonly.is_empty() && args.iter().filter(|a| readonly.contains(&a.param)).all(|a| !written(a.buffer))
}

/// The message for a failed device allocation: the device's words, then which of the node's
/// parameters point into that buffer, so the user can tell which array did not fit.
fn allocation_failed(l: &Launch<'_>, unit: &NodeDesc, table: &Table, e: &AllocError) -> String {
    let names: Vec<String> = unit
        .params
        .iter()
        .filter(|p| p.kind == ScalarKind::Pointer)
        .filter(|p| read_u64(l.args, p.offset as usize).is_some_and(|v| table.containing(v, 0) == Some(e.start)))
        .map(|p| format!("`{}`", p.name))
        .collect();
    let node = if unit.display.is_empty() { &unit.name } else { &unit.display };
    match names.is_empty() {
        true => format!("{} (launching node `{node}`, {})", e.message, unit.loc),
        false => format!("{} ({} of node `{node}`, {})", e.message, names.join(", "), unit.loc),
    }
}

/// The unit's arguments with every tracked pointer moved to device `k`'s allocation.
fn device_args(args: &[u8], ptrs: &[(usize, usize)], buffers: &[(u64, u64)], k: usize, table: &mut Table) -> Vec<u8> {
    let mut out = args.to_vec();
    for &(off, b) in ptrs {
        let v = read_u64(args, off).expect("read when planning");
        let buf = table.get_mut(buffers[b].0).expect("tracked");
        let base = buf.addr(Place::Device(k)).unwrap_or_else(|e| crate::fatal(&e));
        out[off..off + 8].copy_from_slice(&(base + (v - buffers[b].0)).to_le_bytes());
    }
    out
}

/// The safe plan: one partition on device 0, reading every buffer whole and (unless the
/// database proves a buffer only read) maybe writing it whole; `reason` says why the launch
/// is not split, if it could have been.
fn unpartitioned(
    l: &Launch<'_>,
    table: &mut Table,
    buffers: &[(u64, u64)],
    ptrs: &[(usize, usize)],
    args: &[BufArg],
    leaf: &NodeDesc,
    reason: Option<String>,
) -> Outcome {
    let db_node = l.module.analysis.as_ref().and_then(|db| db.node(&leaf.name));
    let mut reads = Vec::new();
    let mut writes = Vec::new();
    for (b, &(start, _)) in buffers.iter().enumerate() {
        let size = table.get(start).expect("tracked").size;
        let whole = ByteRect::run(0, size);
        reads.push((b, whole));
        let only_read = db_node.is_some_and(|n| {
            let mine: Vec<&BufArg> = args.iter().filter(|a| a.buffer == b).collect();
            !mine.is_empty() && mine.iter().all(|a| n.arg(a.param).is_some_and(|x| x.write == WriteKind::None))
        });
        if !only_read {
            writes.push((b, whole));
        }
    }
    let t = std::time::Instant::now();
    let needs: Vec<(u64, usize)> = ptrs.iter().map(|&(_, b)| (buffers[b].0, 0)).collect();
    let unit = l.module.node(l.node);
    table.allocate(&needs).unwrap_or_else(|e| crate::fatal(&allocation_failed(l, unit, table, &e)));
    let args = device_args(l.args, ptrs, buffers, 0, table);
    let part = PartPlan { device: 0, bx: GridBox::whole(l.grid), args, reads, writes };
    let mut plan = LaunchPlan::new(buffers.to_vec(), vec![part], reason);
    plan.alloc_nanos = t.elapsed().as_nanos() as u64;
    Outcome::Devices(plan)
}

/// A partition: its device, its box of the grid, and the bytes it reads and writes per buffer.
pub(crate) type Part = (usize, GridBox, Vec<(usize, ByteRect)>, Vec<(usize, ByteRect)>);
type Parts = Vec<Part>;

/// The partitions and their accesses, or why the launch may not be split.
#[allow(clippy::too_many_arguments)]
fn split(
    l: &Launch<'_>,
    leaf: &NodeDesc,
    leaf_args: &[u8],
    block: Option<[i64; 3]>,
    args: &[BufArg],
    buffers: &[(u64, u64)],
    table: &mut Table,
    inspections: &mut Vec<Inspection>,
) -> Result<(Parts, Vec<Reduce>), String> {
    if super::partitioning_off() {
        return Err("HPVM_MGPU_PARTITION=off".into());
    }
    let module = l.module;
    let db = module.analysis.as_ref().ok_or("the executable has no analysis database")?;
    let dn = db.node(&leaf.name).ok_or_else(|| format!("the analysis did not cover node {}", leaf.shown()))?;
    if !dn.partitionable {
        let why = dn.reasons.first().map_or("the analysis found it not partitionable".to_string(), |r| {
            format!("{}{}", r.message, r.location.as_ref().map(|l| format!(" ({l})")).unwrap_or_default())
        });
        return Err(why);
    }
    let dims = dn.dims as usize;
    if dims == 0 || dn.split.dims.is_empty() {
        return Err("no grid dimension to split".into());
    }
    // The instance box of a partition of blocks, and the blocks of the grid.
    let unit = &module.program.nodes[l.node as usize];
    let (blocks, per_block): ([i64; 3], [i64; 3]) = match (block, &dn.block) {
        (Some(b), Some(analysed)) => {
            // Constant block sizes are built into the maps: they must be this launch's.
            let same = (0..dims).all(|d| {
                analysed.runtime.iter().any(|r| r.dim as usize == d)
                    || analysed.size.get(d).map_or(Some(1), |s| s.trim().parse::<i64>().ok()) == Some(b[d])
            });
            if !same {
                return Err(format!(
                    "its block is {:?} at this launch but the analysis assumed {}",
                    &b[..dims],
                    analysed.size.join(" × ")
                ));
            }
            (l.grid, b)
        }
        (None, None) => {
            if matches!(unit.kind, KindDesc::Leaf { barrier: true, .. }) {
                return Err("its instances use __hpvm__barrier across the grid".into());
            }
            let b = block_shape(unit.dims);
            (std::array::from_fn(|d| (l.grid[d] + b[d] - 1) / b[d]), b)
        }
        _ => return Err("the analysis modelled another launch shape".into()),
    };
    // Parameter values of the maps: grid and parent, then the node's integer parameters.
    let mut values: Vec<(String, i64)> = Vec::new();
    // `gx`...: the unit's grid (blocks of a blocks launch, instances of a grid-shaped leaf).
    for (d, name) in ["gx", "gy", "gz"].iter().enumerate() {
        values.push((name.to_string(), l.grid[d]));
    }
    for (d, (id, n)) in ["px", "py", "pz"].iter().zip(["pnx", "pny", "pnz"]).enumerate() {
        values.push((id.to_string(), l.parent.0[d]));
        values.push((n.to_string(), l.parent.1[d]));
    }
    for (i, name) in dn.param_names.iter().enumerate() {
        if let Some(v) = int_param(leaf, leaf_args, i as u32) {
            values.push((name.clone(), v));
        }
    }
    // A block size known only now: the maps speak of one block, through parameters ranged
    // over the blocks of each partition (`dashdb::RuntimeBlock`).
    let runtime_blocks: Vec<&dashdb::RuntimeBlock> = dn.block.iter().flat_map(|b| &b.runtime).collect();
    for r in &runtime_blocks {
        let d = r.dim as usize;
        if per_block[d] < 1 {
            return Err(format!("its block is empty in dimension {d}"));
        }
        values.push((r.size.clone(), per_block[d]));
        if blocks[d].saturating_mul(per_block[d]) > dashdb::PARAM_LIMIT {
            return Err(format!(
                "its {} instances in dimension {d} exceed what the analysis assumed",
                blocks[d] * per_block[d]
            ));
        }
    }
    let block_ranges = |lo: [u64; 3], hi: [u64; 3]| -> Vec<BlockRange> {
        runtime_blocks
            .iter()
            .map(|r| {
                let d = r.dim as usize;
                BlockRange {
                    id: r.id.clone(),
                    offset: r.offset.clone(),
                    size: per_block[d],
                    lo: lo[d] as i64,
                    hi: hi[d] as i64,
                }
            })
            .collect()
    };
    let value_refs: Vec<(&str, i64)> = values.iter().map(|(n, v)| (n.as_str(), *v)).collect();
    let grid_like = |n: &str| ["gx", "gy", "gz"].contains(&n) || runtime_blocks.iter().any(|r| r.size == n);
    let needed = |names: &[String]| -> Result<Vec<(&str, i64)>, String> {
        names
            .iter()
            .filter(|n| !runtime_blocks.iter().any(|r| &&r.id == n || &&r.offset == n))
            .map(|n| {
                let (name, v) = value_refs
                    .iter()
                    .find(|(m, _)| m == n)
                    .copied()
                    .ok_or_else(|| format!("its maps use `{n}`, which is not an integer parameter"))?;
                // The maps were simplified under these bounds (`dashdb::GRID_LIMIT`).
                let within = if grid_like(name) {
                    (0..dashdb::GRID_LIMIT).contains(&v)
                } else {
                    (-dashdb::PARAM_LIMIT..=dashdb::PARAM_LIMIT).contains(&v)
                };
                if !within {
                    return Err(format!("`{name}` = {v} is beyond the values the analysis assumed"));
                }
                Ok((name, v))
            })
            .collect()
    };
    // A grid-stride loop: the maps give one iteration's accesses, and the iterations go on
    // past the grid, as far as the maps reach (`dashdb::RuntimeBlock::strided`). `reach` counts
    // the blocks whose ids the maps then range over: virtual ones past the grid.
    let mut reach = blocks;
    let fixed_for =
        |names: &[String]| Ok(needed(names)?.into_iter().map(|(n, v)| (n.to_string(), v)).collect::<Vec<_>>());
    // What a grid-stride loop's plan needs of ISL (where it ends, whether its iterations are
    // independent) depends on the launch's values and on which arguments share a buffer, not
    // on the buffers: computed once for the launches a loop alternates between.
    let stride_key = || StrideKey {
        source: db.source.hash.clone(),
        node: dn.name.clone(),
        values: values.clone(),
        blocks,
        per_block,
        sharing: args.iter().map(|a| args.iter().position(|b| b.buffer == a.buffer).unwrap_or(0)).collect(),
    };
    let known = runtime_blocks.iter().any(|r| r.strided).then(|| {
        let key = stride_key();
        let found = STRIDES.lock().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|m| m.get(&key).copied());
        (key, found)
    });
    let stride = match runtime_blocks.iter().find(|r| r.strided) {
        None => None,
        Some(r) => {
            let d = r.dim as usize;
            let end = match known.as_ref().and_then(|(_, f)| *f) {
                Some((end, _)) => end,
                None => {
                    // The block ids of `d` as far as the standing bounds allow.
                    let mut hi = blocks.map(|b| b.max(0) as u64);
                    hi[d] = (dashdb::PARAM_LIMIT / per_block[d]) as u64;
                    iterations_end(dn, args, d, &block_ranges([0; 3], hi), fixed_for)?
                }
            };
            reach[d] = reach[d].max((end + per_block[d] - 1) / per_block[d]);
            Some(Stride { dim: d, id: r.id.clone(), grid_blocks: blocks[d], size: per_block[d], end, reach: reach[d] })
        }
    };
    if let Some(cond) = &dn.valid_when {
        let whole = block_ranges([0; 3], reach.map(|b| b.max(0) as u64));
        let holds =
            assumptions_hold(cond, &value_refs, &whole).map_err(|e| format!("checking its assumptions: {e}"))?;
        if !holds {
            return Err(format!("the analysis's assumptions `{cond}` do not hold for this launch"));
        }
    }
    // Conditions that multiply parameters, with each block id and offset at its largest.
    for text in &dn.bounds {
        let bound = dashdb::Bound::parse(text).map_err(|e| format!("checking its assumptions: {e}"))?;
        let largest = |n: &str| {
            let last = |r: &&dashdb::RuntimeBlock| (reach[r.dim as usize] - 1).max(0);
            match runtime_blocks.iter().find(|r| r.id == n || r.offset == n) {
                Some(r) if r.id == n => Some(last(r)),
                Some(r) => Some(last(r) * per_block[r.dim as usize]),
                None => value_refs.iter().find(|(m, _)| *m == n).map(|(_, v)| *v),
            }
        };
        if bound.holds(&largest) != Some(true) {
            return Err(format!("the analysis's assumption `{text}` does not hold for this launch"));
        }
    }
    // Every pointer the leaf uses must have maps.
    for a in args {
        if dn.arg(a.param).is_none() {
            return Err(format!("the analysis has no maps for `{}`", leaf.params[a.param as usize].name));
        }
    }
    // Array shapes, from expressions over the parameters.
    let mut shapes: HashMap<u32, Vec<i64>> = HashMap::new();
    for a in args {
        let arg = dn.arg(a.param).expect("checked above");
        let fixed = needed(&arg.params)?;
        let shape = arg
            .shape
            .iter()
            .map(|s| extent(s, &fixed).map_err(|e| e.to_string()))
            .collect::<Result<Vec<i64>, String>>()?;
        shapes.insert(a.param, shape);
    }
    // Each read map's own conditions (dashdb's `read_valid_when`): where they fail, or cannot
    // be checked, that argument is read whole.
    let whole_grid = block_ranges([0; 3], reach.map(|b| b.max(0) as u64));
    let read_maps_hold: Vec<bool> = args
        .iter()
        .map(|a| match dn.arg(a.param).and_then(|x| x.read_valid_when.as_deref()) {
            Some(cond) => assumptions_hold(cond, &value_refs, &whole_grid).unwrap_or(false),
            None => true,
        })
        .collect();
    // Iterations that neither write what another reads or writes run one per thread, over
    // the virtual grid of the loop's iterations, cut into contiguous ranges: each device then
    // works on one piece of the data, as it would without the loop. Otherwise the launch's
    // own blocks are cut, each running its rounds of iterations.
    let mut blocks = blocks;
    let mut grid = l.grid;
    let independent = match (&stride, known) {
        (None, _) => false,
        (Some(_), Some((_, Some((_, independent))))) => independent,
        (Some(s), Some((key, None))) => {
            let every = block_ranges([0; 3], reach.map(|b| b.max(0) as u64));
            let independent = independent_iterations(dn, args, &every, &fixed_for, &value_refs);
            let mut memo = STRIDES.lock().unwrap_or_else(|e| e.into_inner());
            let memo = memo.get_or_insert_with(HashMap::new);
            if memo.len() >= KEPT {
                memo.clear();
            }
            memo.insert(key, (s.end, independent));
            independent
        }
        (Some(_), None) => unreachable!("a strided launch has its key"),
    };
    let stride = match stride {
        Some(s) if independent => {
            blocks[s.dim] = s.reach;
            grid[s.dim] = s.reach;
            None
        }
        s => s,
    };
    // Partition k runs on device order[k % devices], with that device's weight: consecutive
    // partitions, which share the most, on the best links.
    let device = |k: usize| l.order[k % l.order.len()];
    let weights: Vec<f64> = (0..l.order.len() * l.per_device).map(|k| super::device_weight(device(k))).collect();
    let split = cut_along(&dn.split, blocks, weights.len())?;
    let parts = partition::weighted(blocks.map(|b| b.max(0) as u64), &split, &weights).map_err(|e| e.to_string())?;
    let node_name = leaf.shown();
    let loc = &unit.loc;
    let ranged: Vec<usize> = runtime_blocks.iter().map(|r| r.dim as usize).collect();
    let computed: Vec<Result<_, String>> = parts
        .par_iter()
        .enumerate()
        .filter(|(_, p)| !p.is_empty())
        .map(|(k, p)| {
            let lo: Vec<i64> = (0..dims).map(|d| p.lo[d] as i64 * per_block[d]).collect();
            let hi: Vec<i64> =
                (0..dims).map(|d| (p.hi[d] as i64 * per_block[d]).min(instances(grid, block, d))).collect();
            let mut reads = Vec::new();
            let mut writes = Vec::new();
            let mut pending = Vec::new();
            // Per reduction argument, the hull of the bytes the partition updates.
            let mut reduced: Vec<(usize, (u64, u64))> = Vec::new();
            for (ai, a) in args.iter().enumerate() {
                let arg = dn.arg(a.param).expect("checked above");
                if arg.pointer_level != 1 {
                    return Err(format!("`{}` is reached through {} pointers", arg.name, arg.pointer_level));
                }
                let ranges = block_ranges(p.lo, p.hi);
                let ctx = Ctx {
                    arg,
                    a,
                    lo: &lo,
                    hi: &hi,
                    blocks: &ranges,
                    ranged: &ranged,
                    stride: stride.as_ref(),
                    node: node_name,
                    loc,
                };
                let fixed = needed(&arg.params)?;
                let shape = &shapes[&a.param];
                let whole = || vec![ByteRect::run(0, a.size)];
                // Reads too fragmented to list cheaply are read whole (more copying, still
                // right); such writes cannot be over-approximated, so the launch runs whole.
                let too_fragmented = || format!("`{}`: the elements it writes are too fragmented to plan", arg.name);
                let r = match (arg.read, &arg.read_map) {
                    (ReadKind::None, _) => vec![],
                    // Where the read's own conditions fail, its map names other elements
                    // than it reads.
                    (_, Some(_)) if !read_maps_hold[ai] => whole(),
                    // A bound of data-dependent or conditional reads may reach past the
                    // buffer where no read does (Polly bounds an `int` index by its type):
                    // clipped without a word.
                    (kind, Some(m)) => {
                        let what = if kind == ReadKind::Exact { "reads" } else { "" };
                        ctx.rects(m, &fixed, shape, what, true)?.unwrap_or_else(whole)
                    }
                    (_, None) => whole(),
                };
                let (w, may) = match (arg.write, &arg.write_map) {
                    (WriteKind::None, _) => (vec![], false),
                    (WriteKind::Exact, Some(m)) => {
                        (ctx.rects(m, &fixed, shape, "writes", false)?.ok_or_else(too_fragmented)?, false)
                    }
                    (WriteKind::May, Some(m)) => {
                        (ctx.rects(m, &fixed, shape, "may write", false)?.ok_or_else(too_fragmented)?, true)
                    }
                    (WriteKind::Indirect, _) => {
                        // Where the indices are; their values are read after this pass.
                        let t = arg.write_through.as_ref().ok_or("an indirect write without its indices")?;
                        let index = args.iter().position(|x| x.param == t.arg).ok_or_else(|| {
                            format!("`{}` takes its indices from memory the program did not track", arg.name)
                        })?;
                        let xa = dn.arg(t.arg).expect("checked above");
                        let ictx = Ctx { arg: xa, a: &args[index], ..ctx };
                        let at = ictx
                            .rects(&t.map, &fixed, &shapes[&t.arg], "reads indices", false)?
                            .ok_or_else(|| format!("`{}`: its indices are too fragmented to read", arg.name))?;
                        pending.push(Pending { written: ai, index, at });
                        (vec![], false)
                    }
                    (WriteKind::Reduce, map) => {
                        // Its elements; the home partition reads and writes them, below.
                        let hull = match map {
                            Some(m) => {
                                let rects =
                                    ctx.rects(m, &fixed, shape, "updates", false)?.ok_or_else(too_fragmented)?;
                                let lo = rects.iter().map(|r| r.start).min();
                                lo.map(|lo| (lo, rects.iter().map(ByteRect::end).max().unwrap_or(lo)))
                            }
                            None => Some((0, a.size)),
                        };
                        reduced.extend(hull.map(|h| (ai, h)));
                        (vec![], false)
                    }
                    (kind, _) => return Err(format!("`{}`: its writes are {kind}", arg.name)),
                };
                reads.extend(r.into_iter().map(|x| (a.buffer, x)));
                if may {
                    // A may-write region: current first, so elements left alone stay right.
                    reads.extend(w.iter().map(|x| (a.buffer, *x)));
                }
                writes.extend(w.into_iter().map(|x| (a.buffer, x)));
            }
            let bx = GridBox {
                lo: std::array::from_fn(|d| p.lo[d] as i64),
                hi: std::array::from_fn(|d| p.hi[d] as i64),
                dim: grid,
            };
            // Partitions of a grid-shaped leaf count blocks: back to instances.
            let bx = if block.is_none() {
                GridBox {
                    lo: std::array::from_fn(|d| bx.lo[d] * per_block[d]),
                    hi: std::array::from_fn(|d| (bx.hi[d] * per_block[d]).min(l.grid[d])),
                    dim: l.grid,
                }
            } else {
                bx
            };
            Ok((device(k), bx, reads, writes, pending, reduced))
        })
        .collect();
    let computed: Vec<_> = computed.into_iter().collect::<Result<_, _>>()?;
    let reductions = reductions(dn, args, computed.iter().flat_map(|c| &c.5))?;
    let mut parts: Parts = Vec::with_capacity(computed.len());
    // Each indirect write's runs, by partition: the indices must send the parts apart.
    let mut found: Vec<(usize, Vec<PartRun>)> = Vec::new();
    for (k, (device, bx, mut reads, mut writes, pending, _)) in computed.into_iter().enumerate() {
        for p in &pending {
            let runs = inspect(p, dn, args, buffers, table, inspections)?;
            let mine = match found.iter_mut().find(|(w, _)| *w == p.written) {
                Some(f) => &mut f.1,
                None => {
                    found.push((p.written, Vec::new()));
                    &mut found.last_mut().expect("pushed").1
                }
            };
            mine.extend(runs.iter().map(|r| (r.start, r.end(), k)));
            let b = args[p.written].buffer;
            if !dn.arg(args[p.written].param).and_then(|a| a.write_through.as_ref()).is_some_and(|t| t.every) {
                // Some instances may leave their element alone: current first (`WriteKind::May`).
                reads.extend(runs.iter().map(|r| (b, *r)));
            }
            writes.extend(runs.into_iter().map(|r| (b, r)));
        }
        parts.push((device, bx, reads, writes));
    }
    for (w, runs) in found {
        if let Some((a, b, lo, _)) = first_overlap(runs) {
            let arg = dn.arg(args[w].param).expect("checked");
            let from = arg.write_through.as_ref().and_then(|t| dn.arg(t.arg)).map_or("?", |x| x.name.as_str());
            return Err(format!(
                "the indices read from `{from}` at this launch make partitions {a} and {b} write the same \
                 element of `{}` (byte {lo})",
                arg.name
            ));
        }
    }
    // The home partition updates the buffer's own bytes: current first, the only holder after.
    if let Some(home) = parts.first_mut() {
        for r in &reductions {
            let bytes = ByteRect::run(r.start, r.start + r.bytes());
            home.2.push((r.buffer, bytes));
            home.3.push((r.buffer, bytes));
        }
    }
    disjoint_writes(&parts, buffers.len())?;
    super::hulls::take_whole(&mut parts, buffers.len());
    Ok((parts, reductions))
}

/// The launch's reductions (dashdb's `WriteKind::Reduce`) from each partition's hull of the
/// bytes it updates, `(argument, (start, end))`: per argument, whole elements of its type
/// covering every partition's, within the buffer. Devices and addresses are the plan's to fill
/// in. An error where a split would be wrong: another argument pointing into the same buffer.
fn reductions<'a>(
    dn: &dashdb::Node,
    args: &[BufArg],
    hulls: impl Iterator<Item = &'a (usize, (u64, u64))>,
) -> Result<Vec<Reduce>, String> {
    let mut spans: Vec<(usize, u64, u64)> = Vec::new();
    for &(ai, (lo, hi)) in hulls {
        match spans.iter_mut().find(|s| s.0 == ai) {
            Some(s) => (s.1, s.2) = (s.1.min(lo), s.2.max(hi)),
            None => spans.push((ai, lo, hi)),
        }
    }
    let mut out = Vec::with_capacity(spans.len());
    for (ai, lo, hi) in spans {
        let a = &args[ai];
        let arg = dn.arg(a.param).expect("checked by split");
        let how = arg.reduction.ok_or_else(|| format!("`{}`: a reduction without its operation", arg.name))?;
        if args.iter().any(|b| b.buffer == a.buffer && b.param != a.param) {
            return Err(format!("`{}` is reduced into, and another argument points into the same buffer", arg.name));
        }
        let (start, elements) = element_span(lo, hi, a.offset, u64::from(how.element.size()), a.size);
        if elements > 0 {
            out.push(Reduce { buffer: a.buffer, start, elements, how, home: (0, 0), others: Vec::new() });
        }
    }
    Ok(out)
}

/// The whole elements (of `size` bytes, the first at byte `offset` of a buffer of `len`
/// bytes, and every `size` bytes from there either way) that cover bytes `lo..hi`, within
/// the buffer: the first element's byte and the count.
fn element_span(lo: u64, hi: u64, offset: u64, size: u64, len: u64) -> (u64, u64) {
    let phase = offset % size;
    let start = phase + lo.saturating_sub(phase) / size * size;
    let end =
        (phase + hi.saturating_sub(phase).div_ceil(size) * size).min(phase + len.saturating_sub(phase) / size * size);
    (start, end.saturating_sub(start) / size)
}

/// The value of an array extent: `*` (unknown, outermost) is 0; a number or a parameter
/// name directly; anything else through ISL.
fn extent(text: &str, fixed: &[(&str, i64)]) -> Result<i64, isl_glue::Error> {
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

/// Whether the parameter condition `cond` holds for `values` and every block of `blocks`,
/// remembered per values (which determine the blocks).
fn assumptions_hold(cond: &str, values: &[(&str, i64)], blocks: &[BlockRange]) -> Result<bool, isl_glue::Error> {
    let key: FixedKey = (cond.to_string(), values.iter().map(|(n, v)| (n.to_string(), *v)).collect());
    if let Some(&b) = KNOWN.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::new).get(&key) {
        return Ok(b);
    }
    let holds = match super::closed::holds(cond, values, blocks) {
        Some(h) => h,
        None => ISL.with(|isl| {
            if blocks.is_empty() {
                isl.params_hold(cond, values)
            } else {
                isl.params_hold_for_blocks(cond, values, blocks)
            }
        }),
    }?;
    let mut known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    let known = known.get_or_insert_with(HashMap::new);
    if known.len() >= KEPT {
        known.clear();
    }
    known.insert(key, holds);
    Ok(holds)
}

/// Instances of the grid in dimension `d` (threads for a blocks launch).
fn instances(grid: [i64; 3], block: Option<[i64; 3]>, d: usize) -> i64 {
    match block {
        Some(b) => grid[d] * b[d],
        None => grid[d],
    }
}

/// Two partitions writing the same byte would leave it to whichever ran last: refuse.
fn disjoint_writes(parts: &Parts, buffers: usize) -> Result<(), String> {
    for b in 0..buffers {
        let mut runs: Vec<PartRun> = Vec::new();
        for (k, p) in parts.iter().enumerate() {
            for (_, r) in p.3.iter().filter(|(x, _)| *x == b) {
                runs.extend(r.row_runs().map(|(lo, hi)| (lo, hi, k)));
            }
        }
        if let Some((a, b, lo, hi)) = first_overlap(runs) {
            return Err(format!("partitions {a} and {b} would write the same bytes of a buffer (bytes {lo}..{hi})"));
        }
    }
    Ok(())
}

/// A byte run `start..end` written by partition `k`: `(start, end, k)`.
pub(crate) type PartRun = (u64, u64, usize);

/// Two partitions' byte runs that overlap: the partitions and the bytes shared.
pub(crate) fn first_overlap(mut runs: Vec<PartRun>) -> Option<(usize, usize, u64, u64)> {
    runs.sort_unstable();
    // A sweep with the furthest end so far and its partition: a run starting before it
    // overlaps that partition's run (two other partitions overlapping each other would have
    // been caught when the later of them started). Comparing neighbours only would miss a
    // long run of one partition covering a short one that follows another.
    let mut reach: Option<(u64, usize)> = None;
    for (lo, hi, k) in runs {
        if let Some((end, owner)) = reach {
            if lo < end && owner != k {
                return Some((owner, k, lo, end.min(hi)));
            }
        }
        if reach.is_none_or(|(end, _)| hi > end) {
            reach = Some((hi, k));
        }
    }
    None
}

struct Ctx<'a> {
    arg: &'a dashdb::Arg,
    a: &'a BufArg,
    lo: &'a [i64],
    hi: &'a [i64],
    blocks: &'a [BlockRange],
    /// The instance dimension of each of `blocks`.
    ranged: &'a [usize],
    stride: Option<&'a Stride>,
    node: &'a str,
    loc: &'a str,
}

/// A launch's grid-stride loop (`dashdb::RuntimeBlock::strided`): the maps give one
/// iteration's accesses, and block `b` runs the iterations of the virtual blocks
/// `b + k × grid_blocks`, as far as the iterations go.
struct Stride {
    dim: usize,
    /// The map parameter of the block id in that dimension.
    id: String,
    /// Blocks of the launch in that dimension, and threads per block.
    grid_blocks: i64,
    size: i64,
    /// One past the last iteration any map reaches.
    end: i64,
    /// Virtual blocks that cover every iteration.
    reach: i64,
}

/// The most rounds of a grid-stride loop a partition is planned over (each costs ISL work for
/// every map); beyond, its accesses are too fragmented to plan and the launch runs whole.
const MAX_STRIDE_ROUNDS: i64 = 4096;

/// The values of the parameters a map names, by their names.
type FixedFor<'a> = dyn Fn(&[String]) -> Result<Vec<(String, i64)>, String> + 'a;

/// Whether a grid-stride loop's iterations may run in any order, one per thread: no
/// iteration writes an element another one writes or reads (per argument; an argument that
/// shares its buffer with another, or whose reads the maps do not bound, is not decided and
/// counts as dependent), with the block ids ranged by `ranges` over every iteration.
fn independent_iterations(
    dn: &dashdb::Node,
    args: &[BufArg],
    ranges: &[BlockRange],
    fixed_for: &FixedFor<'_>,
    values: &[(&str, i64)],
) -> bool {
    let over =
        |map: &str, fixed: &[(String, i64)]| with_fixed_map(map, fixed, ranges, |m| m.copy()?.over_blocks(ranges));
    for (ai, a) in args.iter().enumerate() {
        let Some(arg) = dn.arg(a.param) else { return false };
        let written = match (arg.write, &arg.write_map) {
            (WriteKind::None, _) => continue,
            (WriteKind::Exact | WriteKind::May | WriteKind::Reduce, Some(m)) => m,
            // Updates no map gives may come from iterations past every map's end, which the
            // virtual grid of iterations would leave out: the launch's own blocks run their
            // loops as written instead.
            _ => return false,
        };
        if args.iter().enumerate().any(|(bi, b)| bi != ai && b.buffer == a.buffer) {
            return false;
        }
        // Combining updates commute: any iteration may make them, in any order.
        if arg.write == WriteKind::Reduce {
            continue;
        }
        let read = match (arg.read, &arg.read_map) {
            (ReadKind::None, _) => None,
            (_, Some(m)) => Some(m),
            (_, None) => return false,
        };
        if let (Some(_), Some(cond)) = (read, &arg.read_valid_when) {
            if !assumptions_hold(cond, values, ranges).unwrap_or(false) {
                return false;
            }
        }
        let Ok(fixed) = fixed_for(&arg.params) else { return false };
        let apart = || -> Result<bool, isl_glue::Error> {
            let w = over(written, &fixed)?;
            if !w.meets_only_itself(&w)? {
                return Ok(false);
            }
            match read {
                None => Ok(true),
                Some(r) => w.meets_only_itself(&over(r, &fixed)?),
            }
        };
        if !apart().unwrap_or(false) {
            return false;
        }
    }
    true
}

/// One past the last iteration of a grid-stride loop in dimension `d` that any map reaches,
/// with every other parameter fixed and the block ids ranged by `ranges` (those of `d` as far
/// as the standing bounds allow); an error where a map does not end (nothing bounds the
/// loop). Iterations past it access nothing the maps give: the loop itself may go on (an
/// access with no map, such as a reduction at data-dependent elements, which
/// [`independent_iterations`] therefore refuses), but no partition's rectangles change.
fn iterations_end(
    dn: &dashdb::Node,
    args: &[BufArg],
    d: usize,
    ranges: &[BlockRange],
    fixed_for: impl Fn(&[String]) -> Result<Vec<(String, i64)>, String>,
) -> Result<i64, String> {
    let mut end = 0;
    for a in args {
        let Some(arg) = dn.arg(a.param) else { continue };
        let fixed = fixed_for(&arg.params)?;
        let maps = arg.read_map.iter().chain(arg.write_map.iter()).chain(arg.write_through.iter().map(|t| &t.map));
        for m in maps {
            let e = with_fixed_map(m, &fixed, ranges, |m| m.copy()?.over_blocks(ranges)?.domain_end(d))
                .map_err(|e| format!("`{}`: where its grid-stride loop ends: {e}", arg.name))?;
            end = end.max(e.unwrap_or(0));
        }
    }
    Ok(end)
}

impl Ctx<'_> {
    /// The bytes of the buffer the map reaches from the partition's instances, clipped to the
    /// buffer (an access outside it is reported as `what`, unless `what` is empty); `None`
    /// when they are too fragmented to list cheaply (`isl_glue::STEP_BUDGET`).
    fn rects(
        &self,
        map: &str,
        fixed: &[(&str, i64)],
        shape: &[i64],
        what: &str,
        superset: bool,
    ) -> Result<Option<Vec<ByteRect>>, String> {
        let (rects, hull) = match self.reached(map, fixed, shape, superset) {
            Ok(r) => r,
            Err(isl_glue::Error::TooComplex) => return Ok(None),
            // A read the maps do not bound (`reads at most x[o0] : o0 >= 0`): read whole.
            Err(isl_glue::Error::Unbounded(_)) if superset => return Ok(None),
            Err(e) => return Err(format!("`{}`: {e}", self.arg.name)),
        };
        // A superset may reach past the buffer where no access does: clipped silently.
        let what = if hull { "" } else { what };
        let es = self.arg.element_size as i64;
        let (base, size) = (self.a.offset as i64, self.a.size as i64);
        let mut out = Vec::with_capacity(rects.len());
        for r in rects.iter() {
            let first = base + (r.first_row * r.row_len + r.first_col) * es;
            let last = base + ((r.first_row + r.rows - 1) * r.row_len + r.first_col + r.cols) * es;
            if first < 0 || last > size {
                if !what.is_empty() {
                    super::report_outside(
                        self.node,
                        self.loc,
                        &self.arg.name,
                        what,
                        (first - base) / es,
                        (last - base) / es,
                        (size - base) / es,
                    );
                }
                // Clipped row by row: no copy reaches past the allocation.
                for row in 0..r.rows {
                    let s = base + ((r.first_row + row) * r.row_len + r.first_col) * es;
                    let (lo, hi) = (s.max(0), (s + r.cols * es).min(size));
                    if lo < hi {
                        out.push(ByteRect::run(lo as u64, hi as u64));
                    }
                }
                continue;
            }
            out.push(ByteRect {
                start: first as u64,
                rows: r.rows as u64,
                row_bytes: (r.cols * es) as u64,
                pitch: (r.row_len * es) as u64,
            });
        }
        Ok(Some(out))
    }
}

impl Ctx<'_> {
    /// [`element_rects`] of the partition's instances; under a grid-stride loop, of every
    /// iteration they run: their blocks shifted by the grid, round after round.
    fn reached(
        &self,
        map: &str,
        fixed: &[(&str, i64)],
        shape: &[i64],
        superset: bool,
    ) -> Result<Reached, isl_glue::Error> {
        let plain =
            || match super::closed::rects(map, fixed, self.lo, self.hi, self.blocks, self.ranged, shape, superset) {
                Some(r) => Ok(r),
                None => element_rects(map, fixed, self.lo, self.hi, self.blocks, shape, superset),
            };
        let Some(s) = self.stride else { return plain() };
        let d = s.dim;
        if !self.blocks.iter().any(|b| b.id == s.id) {
            return plain();
        }
        let span = s.grid_blocks * s.size;
        let (mut lo, mut hi) = (self.lo.to_vec(), self.hi.to_vec());
        let rounds = if self.lo[d] == 0 && self.hi[d] >= span {
            // Every block of the grid's width: every iteration, in one round.
            (lo[d], hi[d]) = (0, s.reach * s.size);
            1
        } else if s.end > self.lo[d] {
            (s.end - self.lo[d] + span - 1) / span
        } else {
            0
        };
        if rounds > MAX_STRIDE_ROUNDS {
            return Err(isl_glue::Error::TooComplex);
        }
        if rounds == 0 {
            return Ok((Arc::new(vec![]), false));
        }
        // The block ids range over every virtual block; the rounds pick the partition's.
        let blocks: Vec<BlockRange> = self
            .blocks
            .iter()
            .map(|b| if b.id == s.id { BlockRange { lo: 0, hi: s.reach, ..b.clone() } } else { b.clone() })
            .collect();
        element_rects_in_rounds(map, fixed, &lo, &hi, &blocks, shape, superset, (d, span, rounds))
    }
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
type Rounds = (usize, i64, i64);

/// [`element_rects`] with the instances in rounds: one pass of ISL, rows apart per round.
/// Round `k`'s rows sit `k × ROUND_ROWS` rows of the array's outer dimension apart, then
/// come back to their own place.
#[allow(clippy::too_many_arguments)]
fn element_rects_in_rounds(
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
const ROUND_ROWS: i64 = 1 << 36;

/// What decides a grid-stride loop's plan beyond its partitions (see `split`).
#[derive(Clone, PartialEq, Eq, Hash)]
struct StrideKey {
    /// The database's source (a node's name is unique within one, not within a program).
    source: String,
    node: String,
    values: Vec<(String, i64)>,
    blocks: [i64; 3],
    per_block: [i64; 3],
    /// Per argument, the first argument on the same buffer.
    sharing: Vec<usize>,
}

/// Per [`StrideKey`]: where the loop's iterations end, and whether they are independent.
static STRIDES: Mutex<Option<HashMap<StrideKey, (i64, bool)>>> = Mutex::new(None);

/// Entries kept in each cache below before it starts over.
const KEPT: usize = 1 << 14;

static RECTS: Mutex<Option<HashMap<RectKey, Reached>>> = Mutex::new(None);

/// Parameter conditions (`valid_when`) already decided, by text and values.
static KNOWN: Mutex<Option<HashMap<FixedKey, bool>>> = Mutex::new(None);

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
    super::closed::forget();
    if parsed {
        PARSED_GENERATION.fetch_add(1, Ordering::Relaxed);
    }
}

/// Parses the maps of every node the database proves partitionable on every worker of the
/// planning pool, in the background: parsing is the costliest ISL step of a plan, and each worker
/// needs its own copy (ISL contexts are single-threaded). Called when a module is loaded.
pub(crate) fn prefetch(db: &dashdb::Database) {
    let texts: Vec<String> = db
        .nodes
        .iter()
        .filter(|n| n.partitionable)
        .flat_map(|n| n.args.iter().flat_map(|a| a.read_map.iter().chain(a.write_map.iter()).cloned()))
        .collect();
    if texts.is_empty() {
        return;
    }
    let texts = Arc::new(texts);
    super::planner().spawn_broadcast(move |_| {
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
fn element_rects(
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
    if let Some(r) = RECTS.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::new).get(&key) {
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
    let cache = cache.get_or_insert_with(HashMap::new);
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
type FixedKey = (String, Vec<(String, i64)>);

thread_local! {
    /// This thread's ISL context (contexts are single-threaded); plans are computed on the
    /// planning pool, whose threads live as long as the program, so one per worker.
    static ISL: &'static Isl = Box::leak(Box::new(Isl::new()));
    /// Maps parsed, by text: parsing is the costliest step, and every partition of a launch
    /// (and every launch of the node) needs the same maps.
    static PARSED: RefCell<(u64, HashMap<String, AccessMap<'static>>)> = RefCell::new((0, HashMap::new()));
    /// Maps with their parameters fixed, by text and values.
    static FIXED: RefCell<(u64, HashMap<FixedKey, AccessMap<'static>>)> = RefCell::new((0, HashMap::new()));
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
                *cache = (generation, HashMap::new());
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
fn with_fixed_map<R>(
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
            *cache = (generation, HashMap::new());
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A reduction's bytes are whole elements on the argument's grid, within the buffer.
    #[test]
    fn reduction_spans_are_whole_elements_in_the_buffer() {
        // 4-byte elements from byte 8 of 64: bytes 9..13 lie in elements 2 and 3.
        assert_eq!(element_span(9, 13, 8, 4, 64), (8, 2));
        assert_eq!(element_span(0, 64, 8, 4, 64), (0, 16));
        // An argument 2 bytes in: elements at 2, 6, ...; the last whole one ends at 62.
        assert_eq!(element_span(0, 64, 2, 4, 64), (2, 15));
        assert_eq!(element_span(0, 64, 10, 8, 64), (2, 7));
        assert_eq!(element_span(40, 40, 0, 8, 64), (40, 0));
    }

    fn part(writes: &[(u64, u64)]) -> Part {
        let bx = GridBox { lo: [0; 3], hi: [1; 3], dim: [1; 3] };
        (0, bx, vec![], writes.iter().map(|&(lo, hi)| (0, ByteRect::run(lo, hi))).collect())
    }

    #[test]
    fn a_launch_is_cut_along_a_dimension_with_blocks_for_its_partitions() {
        let by = |chosen_by, dims: &[u32]| dashdb::Split { dims: dims.to_vec(), chosen_by };
        let analysis = |dims: &[u32]| by(dashdb::SplitChoice::Analysis, dims);
        // A 1-D grid of a kernel analysed in three dimensions, z best by stride: cut x.
        assert_eq!(cut_along(&analysis(&[2, 1, 0]), [8192, 1, 1], 4).unwrap(), vec![0]);
        // The best dimension while it has a block for every partition.
        assert_eq!(cut_along(&analysis(&[1, 0]), [64, 4, 1], 4).unwrap(), vec![1]);
        assert_eq!(cut_along(&analysis(&[1, 0]), [64, 3, 1], 4).unwrap(), vec![0]);
        // Too few blocks everywhere: the most, ties to the better dimension.
        assert_eq!(cut_along(&analysis(&[1, 0]), [2, 3, 1], 8).unwrap(), vec![1]);
        assert_eq!(cut_along(&analysis(&[1, 0]), [3, 3, 1], 8).unwrap(), vec![1]);
        // One block: the best dimension (one whole partition, too small to cut).
        assert_eq!(cut_along(&analysis(&[2, 1, 0]), [1, 1, 1], 2).unwrap(), vec![2]);
        assert!(cut_along(&analysis(&[]), [4, 1, 1], 2).is_err());
        // The user's dimensions are taken as given, together.
        let user = by(dashdb::SplitChoice::User, &[2, 0]);
        assert_eq!(cut_along(&user, [8, 1, 1], 4).unwrap(), vec![2, 0]);
    }

    #[test]
    fn overlapping_writes_of_two_partitions_are_found() {
        // A long run of partition 0 covers a run of partition 1 that follows a short one of 0.
        let parts = vec![part(&[(0, 100), (10, 20)]), part(&[(50, 60)])];
        assert!(disjoint_writes(&parts, 1).unwrap_err().contains("partitions 0 and 1"));
        let parts = vec![part(&[(0, 10), (20, 30)]), part(&[(10, 20), (30, 40)])];
        disjoint_writes(&parts, 1).unwrap();
        // Runs of one partition may overlap each other.
        let parts = vec![part(&[(0, 10), (5, 15)]), part(&[(15, 20)])];
        disjoint_writes(&parts, 1).unwrap();
        let parts = vec![part(&[(0, 10)]), part(&[(9, 12)])];
        assert!(disjoint_writes(&parts, 1).is_err());
    }
}
