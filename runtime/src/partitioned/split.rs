//! A launch's split plan: its partitions and, per partition and buffer, the bytes it reads
//! and writes, from the analysis database's access maps (the Mekong thesis's section 3.4,
//! `setPartitionBoundaries` then the ranges of the access maps): through their closed forms
//! ([`super::closed`]) where a scalar they name changes between launches, else through ISL
//! ([`super::memo`]).
//!
//! Nothing is guessed: whenever the database does not prove the split safe for THIS launch
//! (node not analysed or not partitionable, its assumptions `valid_when` false for these
//! parameters, a block size other than the analysed one, partitions writing the same bytes,
//! a parameter the runtime cannot read), the plan is one partition on device 0 that reads
//! and may write every buffer whole, with the reason kept for the statistics.

use super::bindings::{allocation_failed, device_args, read_only_cache_legal, unpartitioned, Bindings, BufArg, Launch};
use super::hulls::{first_overlap, writes_meet, Part, PartRun};
use super::kernel::block_shape;
use super::memo::{
    element_rects, element_rects_in_rounds, extent, with_fixed_map, with_isl, KnownKey, Reached, StrideKey, KEPT,
    KNOWN, STRIDES,
};
use super::plan::{host_bytes, Inspection, LaunchPlan, Outcome, PartPlan};
use super::reduce::{Combine, Reduce};
use crate::args::int_param;
use crate::ctx::GridBox;
use crate::desc::{KindDesc, NodeDesc};
use crate::devices::Place;
use crate::hash::FxHashMap;
use crate::memory::{ByteRect, Table};
use dashdb::{ReadKind, WriteKind};
use isl_glue::BlockRange;
use rayon::prelude::*;
use std::sync::{Arc, Mutex};

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
    let Bindings { buffers, unit_ptrs, leaf, leaf_args, block, args, opaque, in_place, passed_on: pointers_passed_on } =
        b;
    let program = &l.module.program;
    let unit = &program.nodes[l.node as usize];
    let leaf_desc = &program.nodes[leaf as usize];
    let mut inspections = Vec::new();
    let mut pending = false;
    // Pointers passed on as they are: no read-only cache (see `bindings::plan_direct`).
    let passed_on = opaque.is_some();
    let split = match opaque {
        Some(why) => Err(why),
        None => split(
            l,
            leaf_desc,
            &leaf_args,
            block,
            &args,
            &buffers,
            Some(&mut *table),
            &mut inspections,
            &mut pending,
            None,
        ),
    };
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
    if let (Outcome::Devices(plan), Some(kernel), false) = (&mut outcome, &unit.kernel, passed_on) {
        plan.read_only_cache = read_only_cache_legal(kernel, &args, plan, table, l.module.ptx);
    }
    if let Outcome::Devices(plan) = &mut outcome {
        plan.inspections = inspections;
        plan.pointer_slots = unit_ptrs.iter().map(|&(offset, _)| offset).collect();
        plan.provisional = pending;
        plan.in_place = in_place;
        plan.passed_on = pointers_passed_on;
    }
    outcome
}

/// ISL's part of [`plan_split`] for a launch, done ahead of the launch that wants it
/// ([`super::ahead`]): the rectangles, closed forms and grid-stride ends land in the memo
/// caches, and nothing else is kept. Indirect writes' indices are left to the launch, which
/// reads them from the buffer as it is then.
pub(crate) fn warm(l: &Launch<'_>, b: &Bindings) {
    let leaf = &l.module.program.nodes[b.leaf as usize];
    let _ = split(l, leaf, &b.leaf_args, b.block, &b.args, &b.buffers, None, &mut Vec::new(), &mut false, None);
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

type Parts = Vec<Part>;

/// What maps made for one launch (`special`) build in: [`map_values`] and the block sizes
/// known only at the launch.
fn special_values(
    l: &Launch<'_>,
    dn: &dashdb::Node,
    leaf: &NodeDesc,
    leaf_args: &[u8],
    block: Option<[i64; 3]>,
) -> Vec<(String, i64)> {
    let mut values = map_values(l, dn, leaf, leaf_args);
    if let (Some(b), Some(analysed)) = (block, &dn.block) {
        values.extend(analysed.runtime.iter().filter_map(|r| Some((r.size.clone(), *b.get(r.dim as usize)?))));
    }
    values
}

/// The values of a launch's map parameters: the grid and the parent, then the node's integer
/// parameters by their map names.
fn map_values(l: &Launch<'_>, dn: &dashdb::Node, leaf: &NodeDesc, leaf_args: &[u8]) -> Vec<(String, i64)> {
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
    values
}

/// The values of the node's products of parameters ([`dashdb::Product`]: `blockDim.x *
/// gridDim.x` as one map parameter), from `values`, which hold every factor's.
fn push_products(dn: &dashdb::Node, values: &mut Vec<(String, i64)>) -> Result<(), String> {
    for p in &dn.products {
        let mut v: i64 = 1;
        for f in &p.factors {
            let x = values
                .iter()
                .find(|(n, _)| n == f)
                .map(|&(_, x)| x)
                .ok_or_else(|| format!("its maps use `{f}`, which is not an integer parameter"))?;
            v = v
                .checked_mul(x)
                .ok_or_else(|| format!("the product `{}` overflows at this launch", p.factors.join(" * ")))?;
        }
        values.push((p.name.clone(), v));
    }
    Ok(())
}

/// The partitions and their accesses, or why the launch may not be split. Without the table
/// (planning ahead) indirect writes are left out. `over`: the node's maps made for this
/// launch's values, where the build's failed their conditions (`respecialize` below); `None`
/// from every caller but itself.
#[allow(clippy::too_many_arguments)]
fn split(
    l: &Launch<'_>,
    leaf: &NodeDesc,
    leaf_args: &[u8],
    block: Option<[i64; 3]>,
    args: &[BufArg],
    buffers: &[(u64, u64)],
    mut table: Option<&mut Table>,
    inspections: &mut Vec<Inspection>,
    pending: &mut bool,
    over: Option<&'static dashdb::Node>,
) -> Result<(Parts, Vec<Reduce>), String> {
    if super::settings::partitioning_off() {
        return Err("HPVM_MGPU_PARTITION=off".into());
    }
    let module = l.module;
    // The build said why when it made none (the analysis did not finish in its time, or
    // failed): its warning names the file.
    let db = module.analysis.as_ref().ok_or_else(|| {
        format!(
            "the build made no access analysis of {} (its warning there said why: the analysis did not finish \
             in its time, or failed)",
            module.program.source
        )
    })?;
    let built = db.node(&leaf.name).ok_or_else(|| format!("the analysis did not cover node {}", leaf.shown()))?;
    // The build's maps failing their conditions at this launch: made again for its values, with
    // the arrays' extents built in too.
    let respecialize =
        |why: String, table: Option<&mut Table>, inspections: &mut Vec<Inspection>, pending: &mut bool| {
            // Once: from the build's maps, or from a specializable node's maps made without
            // the extents (HeCBench zoom's, whose conditions on the block ids then fail).
            if over.is_some() {
                return Err(format!("with this launch's values built in, still: {why}"));
            }
            if !built.may_respecialize() && !built.specializable {
                return Err(why);
            }
            match super::special::for_launch(module, built, &special_values(l, built, leaf, leaf_args, block), true) {
                super::special::Found::Ready(n) => {
                    // Its plans now depend on every integer (where none are made, nothing
                    // changes: a plan that runs whole depends on what the build's maps name).
                    super::respecialized::mark(module, built);
                    split(l, leaf, leaf_args, block, args, buffers, table, inspections, pending, Some(n))
                }
                super::special::Found::Pending => {
                    *pending = true;
                    Err(format!("{why}; its maps for this launch's values are being made"))
                }
                super::special::Found::No(no) => Err(format!("{why} ({no})")),
            }
        };
    let dn = over.unwrap_or(built);
    let first_reason = |dn: &dashdb::Node| {
        dn.reasons.first().map_or("the analysis found it not partitionable".to_string(), |r| {
            format!("{}{}", r.message, r.location.as_ref().map(|l| format!(" ({l})")).unwrap_or_default())
        })
    };
    // Maps not exact for want of this launch's values: made again with them built in.
    let dn = match (dn.partitionable, dn.specializable) {
        (false, true) => {
            match super::special::for_launch(module, dn, &special_values(l, dn, leaf, leaf_args, block), false) {
                super::special::Found::Ready(n) => n,
                super::special::Found::Pending => {
                    *pending = true;
                    return Err(format!("{}; its maps for this launch's values are being made", first_reason(dn)));
                }
                super::special::Found::No(why) => match merged_fallback(dn) {
                    Some(n) => n,
                    None => return Err(format!("{} ({why})", first_reason(dn))),
                },
            }
        }
        _ => dn,
    };
    if !dn.partitionable {
        return Err(first_reason(dn));
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
    let mut values = map_values(l, dn, leaf, leaf_args);
    // A block size known only now: the maps speak of one block, through parameters ranged
    // over the blocks of each partition (`dashdb::RuntimeBlock`).
    let runtime_blocks: Vec<&dashdb::RuntimeBlock> = dn.block.iter().flat_map(|b| &b.runtime).collect();
    // The analysis took the grid's parameters within this bound (its context: no index wraps).
    if let Some(d) = (0..3).find(|&d| blocks[d] > dashdb::PARAM_LIMIT) {
        return Err(format!("its {} blocks in dimension {d} exceed what the analysis assumed", blocks[d]));
    }
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
    push_products(dn, &mut values)?;
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
    // independent) depends on the values its maps and their conditions name and on which
    // arguments share a buffer, not on the buffers (nor on a pointer's remaining bytes, which
    // change with every pointer into a buffer): computed once for the launches a loop
    // alternates between, and for the parts of a buffer launches on streams take.
    let stride_key = || StrideKey {
        source: db.source.hash.clone(),
        node: dn.name.clone(),
        values: {
            let conds = dn.args.iter().filter_map(|a| a.read_valid_when.as_deref());
            let named: Vec<&str> = dn
                .args
                .iter()
                .flat_map(|a| a.params.iter().map(String::as_str))
                .chain(conds.flat_map(params_of).flatten())
                .collect();
            values.iter().filter(|(n, _)| named.contains(&n.as_str())).cloned().collect()
        },
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
            let why = format!(
                "the analysis's maps hold only where `{}`, which this launch does not meet ({})",
                super::reasons::in_user_terms(cond, matches!(l.shape, crate::desc::KernelKind::Blocks { .. })),
                unit.loc
            );
            return respecialize(why, table, inspections, pending);
        }
    }
    // Conditions that multiply parameters, with each block id and offset at its largest.
    for text in &dn.bounds {
        let bound = parsed_bound(text).map_err(|e| format!("checking its assumptions: {e}"))?;
        let largest = |n: &str| {
            let last = |r: &&dashdb::RuntimeBlock| (reach[r.dim as usize] - 1).max(0);
            match runtime_blocks.iter().find(|r| r.id == n || r.offset == n) {
                Some(r) if r.id == n => Some(last(r)),
                Some(r) => Some(last(r) * per_block[r.dim as usize]),
                None => value_refs.iter().find(|(m, _)| *m == n).map(|(_, v)| *v),
            }
        };
        if bound.holds(&largest) != Some(true) {
            let why = format!(
                "the analysis's maps hold only where `{}`, which this launch does not meet ({})",
                super::reasons::in_user_terms(text, matches!(l.shape, crate::desc::KernelKind::Blocks { .. })),
                unit.loc
            );
            return respecialize(why, table, inspections, pending);
        }
    }
    // Every pointer the leaf uses must have maps.
    for a in args {
        if dn.arg(a.param).is_none() {
            return Err(format!("the analysis has no maps for `{}`", leaf.params[a.param as usize].name));
        }
    }
    // Array shapes, from expressions over the parameters: over all of them, since a shape
    // names its row pitch (`Img[*][Lx]`) even where no map of the argument does (a read the
    // analysis could not bound, HeCBench asmooth's).
    let mut shapes: FxHashMap<u32, Vec<i64>> = FxHashMap::default();
    for a in args {
        let arg = dn.arg(a.param).expect("checked above");
        let shape = arg
            .shape
            .iter()
            .map(|s| extent(s, &value_refs).map_err(|e| e.to_string()))
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
            let memo = memo.get_or_insert_with(FxHashMap::default);
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
    // Partition k runs on device order[k / per_device], with that device's weight: a
    // device's partitions are neighbours, which share the most, and the devices' shares meet
    // in the order of the best links. A device's partitions at the edges of its share are the
    // only ones its neighbours need, and run first (`gpu::boundary_first`).
    let device = |k: usize| l.order[(k / l.per_device.max(1)).min(l.order.len() - 1)];
    let weights: Vec<f64> =
        (0..l.order.len() * l.per_device).map(|k| super::settings::device_weight(device(k))).collect();
    let split = cut_along(&dn.split, blocks, weights.len())?;
    let parts = partition::weighted(blocks.map(|b| b.max(0) as u64), &split, &weights).map_err(|e| e.to_string())?;
    let node_name = leaf.shown();
    let loc = &unit.loc;
    let ranged: Vec<usize> = runtime_blocks.iter().map(|r| r.dim as usize).collect();
    let operations = super::settings::isl_operations();
    let forms = super::closed::Launch::default();
    // Each argument's fixed values, the same for every partition.
    let fixed_of: Vec<Result<Vec<(&str, i64)>, String>> =
        args.iter().map(|a| needed(&dn.arg(a.param).expect("checked above").params)).collect();
    let plan_part = |(k, p): (usize, &partition::Part)| {
        // The partition's ISL work is bounded (`HPVM_MGPU_ISL_OPERATIONS`): past the bound
        // every ISL call fails, the partition's plan with it, and the launch runs whole.
        let (planned, passed) = with_isl(|isl| {
            isl.within(operations, || {
                let lo: Vec<i64> = (0..dims).map(|d| p.lo[d] as i64 * per_block[d]).collect();
                let hi: Vec<i64> =
                    (0..dims).map(|d| (p.hi[d] as i64 * per_block[d]).min(instances(grid, block, d))).collect();
                let mut reads = Vec::new();
                let mut writes = Vec::new();
                let mut pending = Vec::new();
                // Per reduction argument, the hull of the bytes the partition updates.
                let mut reduced: Vec<(usize, (u64, u64))> = Vec::new();
                let ranges = block_ranges(p.lo, p.hi);
                for (ai, a) in args.iter().enumerate() {
                    let arg = dn.arg(a.param).expect("checked above");
                    if arg.pointer_level != 1 {
                        return Err(format!("`{}` is reached through {} pointers", arg.name, arg.pointer_level));
                    }
                    let ctx = Ctx {
                        arg,
                        a,
                        lo: &lo,
                        hi: &hi,
                        blocks: &ranges,
                        ranged: &ranged,
                        stride: stride.as_ref(),
                        forms: &forms,
                        node: node_name,
                        loc,
                    };
                    let fixed = fixed_of[ai].clone()?;
                    let shape = &shapes[&a.param];
                    let whole = || vec![ByteRect::run(0, a.size)];
                    // Reads too fragmented to list cheaply are read whole (more copying, still
                    // right); such writes cannot be over-approximated, so the launch runs whole.
                    let too_fragmented =
                        || format!("`{}`: the elements it writes are too fragmented to plan", arg.name);
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
                            // A may-write is a superset of what is written (Thrust's `for_each` over
                            // whole tiles, whose last one the items end inside): past the buffer it
                            // is clipped without a word, as a superset of reads is.
                            (ctx.rects(m, &fixed, shape, "", false)?.ok_or_else(too_fragmented)?, true)
                        }
                        (WriteKind::Indirect, _) => {
                            // Where the indices are; their values are read after this pass.
                            let t = arg.write_through.as_ref().ok_or("an indirect write without its indices")?;
                            let index = args.iter().position(|x| x.param == t.arg).ok_or_else(|| {
                                format!("`{}` takes its indices from memory the program did not track", arg.name)
                            })?;
                            let xa = dn.arg(t.arg).expect("checked above");
                            let ictx = Ctx { arg: xa, a: &args[index], ..ctx };
                            // Under a condition (`every` false) the map is a superset of the
                            // places read, which may reach past the buffer (a partial last tile):
                            // clipped without a word, as a superset of reads is.
                            let what = if t.every { "reads indices" } else { "" };
                            let at = ictx
                                .rects(&t.map, &fixed, &shapes[&t.arg], what, false)?
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
                        (WriteKind::Merged, _) => {
                            // Every byte of its buffer: each partition is made current on them
                            // (below), the home holds them after.
                            reduced.push((ai, (0, a.size)));
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
        });
        match planned {
            // Whatever came of it: a call past the bound failed, and nothing of the
            // partition's plan is trusted after that.
            _ if passed => Err(format!(
                "planning its split passed the bound of {operations} ISL operations per partition \
                   (HPVM_MGPU_ISL_OPERATIONS)"
            )),
            planned => planned,
        }
    };
    // On the planning pool, the partitions are planned in parallel. On the launching thread
    // (a plan its node made in microseconds before, from closed forms:
    // [`super::Launches::plans_quickly`]),
    // one after another: waking the pool's threads costs more than such a plan.
    let computed: Vec<Result<_, String>> = if rayon::current_thread_index().is_some() {
        parts.par_iter().enumerate().filter(|(_, p)| !p.is_empty()).map(plan_part).collect()
    } else {
        parts.iter().enumerate().filter(|(_, p)| !p.is_empty()).map(plan_part).collect()
    };
    let computed: Vec<_> = computed.into_iter().collect::<Result<_, _>>()?;
    let mut reductions = reductions(dn, args, computed.iter().flat_map(|c| &c.5))?;
    let mut parts: Parts = Vec::with_capacity(computed.len());
    // Each indirect write's runs, by partition: the indices must send the parts apart.
    let mut found: Vec<(usize, Vec<PartRun>)> = Vec::new();
    for (k, (device, bx, mut reads, mut writes, pending, _)) in computed.into_iter().enumerate() {
        for p in &pending {
            // Planning ahead ([`warm`]): the indices are read at the launch.
            let Some(table) = table.as_deref_mut() else { continue };
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
    // Indices that scatter a write into many pieces (a permutation's): merged instead, where
    // the blocks cannot talk. Element-sized pieces cost a copy each, and coherence maps of as
    // many pieces, where a merge costs a pass over the buffer.
    let fragmented: Vec<usize> = found
        .iter()
        .filter(|(_, runs)| dn.mergeable && !super::settings::merging_off() && runs.len() > FRAGMENTED_RUNS)
        .map(|(w, _)| args[*w].buffer)
        .collect();
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
    for b in fragmented {
        merge_buffer(&mut parts, &mut reductions, args, b);
    }
    merge_overlaps(&mut parts, &mut reductions, dn, args, buffers.len())?;
    // The home partition updates the buffer's own bytes: current first, the only holder after.
    // A merged buffer's other partitions start from its bytes too.
    for (k, part) in parts.iter_mut().enumerate() {
        for r in reductions.iter().filter(|r| k == 0 || r.how == Combine::Changed) {
            let bytes = ByteRect::run(r.start, r.start + r.bytes());
            part.2.push((r.buffer, bytes));
            if k == 0 {
                part.3.push((r.buffer, bytes));
            }
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
        if arg.write == WriteKind::Merged {
            if super::settings::merging_off() {
                return Err(format!("`{}`: its writes are merged, and HPVM_MGPU_MERGE=off", arg.name));
            }
            if args.iter().any(|b| b.buffer == a.buffer && b.param != a.param) {
                return Err(format!(
                    "`{}` is written where the analysis cannot tell, and another argument points into the same buffer",
                    arg.name
                ));
            }
            if hi > lo {
                out.push(Reduce {
                    buffer: a.buffer,
                    start: lo,
                    elements: hi - lo,
                    how: Combine::Changed,
                    home: (0, 0),
                    others: Vec::new(),
                });
            }
            continue;
        }
        let how = arg.reduction.ok_or_else(|| format!("`{}`: a reduction without its operation", arg.name))?;
        if args.iter().any(|b| b.buffer == a.buffer && b.param != a.param) {
            return Err(format!("`{}` is reduced into, and another argument points into the same buffer", arg.name));
        }
        let (start, elements) = element_span(lo, hi, a.offset, u64::from(how.element.size()), a.size);
        if elements > 0 {
            out.push(Reduce {
                buffer: a.buffer,
                start,
                elements,
                how: Combine::Op(how),
                home: (0, 0),
                others: Vec::new(),
            });
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

/// `text` parsed ([`dashdb::Bound::parse`]), once per text: a launch checks its node's
/// bounds every time its plan is made.
fn parsed_bound(text: &str) -> Result<Arc<dashdb::Bound>, String> {
    static PARSED: Mutex<Option<FxHashMap<String, Arc<dashdb::Bound>>>> = Mutex::new(None);
    if let Some(b) = PARSED.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(FxHashMap::default).get(text) {
        return Ok(b.clone());
    }
    let b = Arc::new(dashdb::Bound::parse(text)?);
    let mut parsed = PARSED.lock().unwrap_or_else(|e| e.into_inner());
    let parsed = parsed.get_or_insert_with(FxHashMap::default);
    if parsed.len() >= KEPT {
        parsed.clear();
    }
    parsed.insert(text.to_string(), b.clone());
    Ok(b)
}

/// Whether the parameter condition `cond` holds for `values` and every block of `blocks`,
/// remembered per the values it names and the blocks.
fn assumptions_hold(cond: &str, values: &[(&str, i64)], blocks: &[BlockRange]) -> Result<bool, isl_glue::Error> {
    // Only the values it names: a launch's others (a pointer's bytes, a scalar no map reads)
    // change from launch to launch without changing the answer, and would make each a miss
    // (ISL again) or, to the closed forms, parameters that vary.
    let values = &named_in(cond, values);
    // Its closed form first: found without building a key, where the launch is like the last.
    if let Some(h) = super::closed::holds(cond, values, blocks) {
        return h;
    }
    let key: KnownKey = (cond.to_string(), values.iter().map(|(n, v)| (n.to_string(), *v)).collect(), blocks.to_vec());
    if let Some(&b) = KNOWN.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(FxHashMap::default).get(&key) {
        return Ok(b);
    }
    let holds = with_isl(|isl| {
        if blocks.is_empty() {
            isl.params_hold(cond, values)
        } else {
            isl.params_hold_for_blocks(cond, values, blocks)
        }
    })?;
    let mut known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    let known = known.get_or_insert_with(FxHashMap::default);
    if known.len() >= KEPT {
        known.clear();
    }
    known.insert(key, holds);
    Ok(holds)
}

/// The values of `values` that the ISL text `text` names among its parameters (`[p, q] ->
/// ...`); all of them where it declares none.
fn named_in<'a>(text: &str, values: &[(&'a str, i64)]) -> Vec<(&'a str, i64)> {
    match params_of(text) {
        Some(names) => values.iter().filter(|(n, _)| names.contains(n)).copied().collect(),
        None => values.to_vec(),
    }
}

/// The parameters the ISL text `text` declares (`[p, q] -> ...`), if it declares any.
fn params_of(text: &str) -> Option<Vec<&str>> {
    let (names, _) = text.trim_start().strip_prefix('[')?.split_once(']')?;
    Some(names.split(',').map(str::trim).filter(|n| !n.is_empty()).collect())
}

/// Instances of the grid in dimension `d` (threads for a blocks launch).
fn instances(grid: [i64; 3], block: Option<[i64; 3]>, d: usize) -> i64 {
    match block {
        Some(b) => grid[d] * b[d],
        None => grid[d],
    }
}

/// A node the launch's values could not make exact, with its unplaced writes merged instead
/// (`dashdb::Node::merge_fallback`): made once per node, kept for the run. Cut along x first.
fn merged_fallback(dn: &dashdb::Node) -> Option<&'static dashdb::Node> {
    static MADE: std::sync::Mutex<Option<FxHashMap<String, &'static dashdb::Node>>> = std::sync::Mutex::new(None);
    if !dn.merge_fallback || super::settings::merging_off() {
        return None;
    }
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    let made = made.get_or_insert_with(FxHashMap::default);
    if let Some(&n) = made.get(&dn.name) {
        return Some(n);
    }
    let mut n = dn.clone();
    n.merge_unplaced_writes();
    n.partitionable = true;
    n.specializable = false;
    n.merge_fallback = false;
    n.split = dashdb::Split { dims: (0..dn.dims.min(3)).collect(), chosen_by: dashdb::SplitChoice::Analysis };
    let n: &'static dashdb::Node = Box::leak(Box::new(n));
    made.insert(dn.name.clone(), n);
    Some(n)
}

/// Buffers whose parts' writes overlap at this launch (a flag any thread may set, a
/// may-write the maps bound only loosely) merged instead (a [`Combine::Changed`] reduction),
/// where the node's blocks cannot talk (`dashdb::Node::mergeable`) and one argument writes the
/// buffer, by maps. Other overlaps are left to [`disjoint_writes`], which refuses the split.
fn merge_overlaps(
    parts: &mut Parts,
    reductions: &mut Vec<Reduce>,
    dn: &dashdb::Node,
    args: &[BufArg],
    buffers: usize,
) -> Result<(), String> {
    if !dn.mergeable || super::settings::merging_off() {
        return Ok(());
    }
    for b in 0..buffers {
        let meet = writes_meet(parts, b).unwrap_or_else(|| first_overlap(write_runs(parts, b)).is_some());
        if !meet || reductions.iter().any(|r| r.buffer == b) {
            continue;
        }
        let by_maps = args
            .iter()
            .filter(|a| a.buffer == b)
            .all(|a| dn.arg(a.param).is_some_and(|x| matches!(x.write, WriteKind::Exact | WriteKind::May)));
        if by_maps {
            merge_buffer(parts, reductions, args, b);
        }
    }
    Ok(())
}

/// Pieces of an indirect write's indices beyond which it is merged instead (see [`split`]).
const FRAGMENTED_RUNS: usize = 4096;

/// Buffer `b` merged after the launch ([`Combine::Changed`]) instead of written by pieces:
/// the partitions' writes of it dropped (the home writes it whole, below in [`split`]). Only
/// where one argument points into it, and no reduction takes it already.
fn merge_buffer(parts: &mut Parts, reductions: &mut Vec<Reduce>, args: &[BufArg], b: usize) {
    let mut owners = args.iter().filter(|a| a.buffer == b);
    let (Some(a), None) = (owners.next(), owners.next()) else { return };
    if a.size == 0 || reductions.iter().any(|r| r.buffer == b) {
        return;
    }
    for p in parts.iter_mut() {
        p.3.retain(|(x, _)| *x != b);
    }
    reductions.push(Reduce {
        buffer: b,
        start: 0,
        elements: a.size,
        how: Combine::Changed,
        home: (0, 0),
        others: Vec::new(),
    });
}

/// Two partitions writing the same byte would leave it to whichever ran last: refuse.
fn disjoint_writes(parts: &Parts, buffers: usize) -> Result<(), String> {
    for b in 0..buffers {
        if writes_meet(parts, b) == Some(false) {
            continue;
        }
        if let Some((a, b, lo, hi)) = first_overlap(write_runs(parts, b)) {
            return Err(format!("partitions {a} and {b} would write the same bytes of a buffer (bytes {lo}..{hi})"));
        }
    }
    Ok(())
}

/// The byte runs every partition writes of buffer `b`, row by row.
fn write_runs(parts: &Parts, b: usize) -> Vec<PartRun> {
    let mut runs: Vec<PartRun> = Vec::new();
    for (k, p) in parts.iter().enumerate() {
        for (_, r) in p.3.iter().filter(|(x, _)| *x == b) {
            runs.extend(r.row_runs().map(|(lo, hi)| (lo, hi, k)));
        }
    }
    runs
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
    /// The launch's closed forms, shared by its partitions.
    forms: &'a super::closed::Launch,
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
                    super::settings::report_outside(
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
        let plain = || {
            let closed = self
                .forms
                .get(map, || super::closed::ready(map, fixed, self.blocks, self.ranged, self.lo.len()))
                .and_then(|r| super::closed::rects(&r, self.lo, self.hi, self.blocks, shape, superset));
            match closed {
                Some(r) => Ok(r),
                None => element_rects(map, fixed, self.lo, self.hi, self.blocks, shape, superset),
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A condition's values are those it declares, in the launch's order; one declaring none
    /// keeps them all (ISL then names what is missing).
    #[test]
    fn conditions_see_only_the_values_they_name() {
        let values = [("n", 4), ("bytes_x", 512), ("boffx", 0), ("seed", 7)];
        assert_eq!(named_in("[boffx, n] -> { : boffx <= n }", &values), vec![("n", 4), ("boffx", 0)]);
        assert_eq!(named_in("  [ n ] -> { : n > 0 }", &values), vec![("n", 4)]);
        assert_eq!(named_in("{ : }", &values), values.to_vec());
    }

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
