//! A launch's plan: its partitions, each one's device, box of the grid, arguments and the
//! bytes it reads and writes per buffer, and the copy plans cached with it. The types every
//! other part of the folder builds, caches or runs; they depend on none of them but the
//! reductions' ([`super::reduce`]).
//!
//! Invariants:
//! - a plan is made for one launch key (`cache::Key`) and holds while its buffers are the same
//!   allocations and, for an indirect write's plan, while the index values it inspected are
//!   unchanged ([`inspected_unchanged`]);
//! - partitions' writes are disjoint (or identical reductions' private copies): every byte a
//!   launch writes has one writer, which becomes its only holder after the launch.

use super::reduce::Reduce;
use crate::ctx::GridBox;
use crate::devices::{Copy, Place};
use crate::memory::coherence::Coherence;
use crate::memory::{self, Buffer, ByteRect, Table};
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
    pub inspections: Vec<Inspection>,
    /// The offsets of the unit's bound pointers in its arguments: a launch the plan is
    /// reused for runs with its own arguments, these slots taken from the plan's
    /// ([`LaunchPlan::part_args`]).
    pub pointer_slots: Vec<usize>,
    /// The plan holds for any scalar arguments (one device running the whole grid): it is
    /// cached under the unit's pointers alone ([`cache::Key::pointers_only`]).
    pub scalar_free: bool,
    /// Made while the node's maps for this launch's values were being made
    /// ([`super::special`]): whole, and not cached, so a later launch splits once they are.
    pub provisional: bool,
    /// Where a device's memory holds less than its partitions need together (sparse copies
    /// under a limit, [`memory::residency`]): the partitions in rounds, each round at most
    /// one partition per device, run one after another, each with its own copy plans.
    /// Empty: all partitions at once.
    pub rounds: Vec<LaunchPlan>,
    /// The grid the kernels see, when it is not the launch's: a grid-stride loop whose
    /// iterations run one per thread over the virtual grid of its iterations
    /// (`split::split`).
    pub virtual_grid: Option<[i64; 3]>,
    /// Arguments updated only by combining atomics, split: every device but the home one
    /// updates a private copy, combined after the partitions ([`reduce`]).
    pub reductions: Vec<Reduce>,
    /// A pointer reaches page-locked host memory in place (`devices::in_place`): the launch
    /// runs whole and goes to its GPU at once, never held nor recorded for replay.
    pub in_place: bool,
    /// The pointers the launch passes on as they are (no tracked buffer under them), and
    /// whether each was page-locked memory reached in place: the plan holds only while each
    /// still is what it was (memory freed and allocated again at the same address, a
    /// `cudaFreeHost` then a `cudaMalloc`, must not run on a plan that passes its address on).
    pub passed_on: Vec<(u64, bool)>,
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

impl CopyPlan {
    /// Whether the launch copies nothing and leaves every buffer's state as it found it.
    pub(crate) fn changes_nothing(&self) -> bool {
        self.copies.is_empty() && self.after.iter().all(Option::is_none)
    }
}

pub(crate) struct CopyPlan {
    pub copies: Vec<Copy>,
    /// What each copy reads: (buffer index, byte range within the buffer).
    pub sources: Vec<Source>,
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
            in_place: false,
            passed_on: Vec::new(),
            provisional: false,
        }
    }

    /// The partitions grouped in rounds: round `r` holds each device's `r`-th partition.
    pub(crate) fn round_groups(&self) -> Vec<Vec<PartPlan>> {
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
    pub(crate) fn fits_memory(&self, in_rounds: bool) -> bool {
        if !in_rounds {
            return memory::residency::fits(&self.residency_needs());
        }
        self.round_groups().into_iter().all(|parts| {
            let r = LaunchPlan::new(self.buffers.clone(), parts, None);
            memory::residency::fits(&r.residency_needs())
        })
    }

    /// Splits the plan into rounds where a device has more than one partition.
    pub(crate) fn make_rounds(&mut self) {
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
    pub(crate) fn part_args(&self, p: &PartPlan, launch: &[u8]) -> crate::args::ArgBytes {
        if launch.len() != p.args.len() {
            return crate::args::ArgBytes::from_slice(&p.args);
        }
        let mut args = crate::args::ArgBytes::from_slice(launch);
        for &o in &self.pointer_slots {
            args[o..o + 8].copy_from_slice(&p.args[o..o + 8]);
        }
        args
    }

    /// The byte ranges each partition's device must back ([`memory::residency`]): the rows
    /// of what it reads and writes.
    pub(crate) fn residency_needs(&self) -> Vec<memory::residency::Need> {
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
    pub(crate) fn current(&self, table: &Table) -> bool {
        self.buffers.iter().all(|&(start, id)| table.get(start).is_some_and(|b| b.id == id))
            && self.passed_on.iter().all(|&(v, in_place)| {
                table.containing(v, 0).is_none() && crate::devices::in_place::contains(v) == in_place
            })
    }

    /// Takes into the coherence maps what the host wrote into the plan's buffers since it
    /// last handed them to a graph (`memory::watch`): before the copies are planned, and
    /// timed as the statistics' host-write scans, not as copy planning.
    pub(crate) fn account_host_writes(&self, table: &mut Table) {
        for &(s, _) in &self.buffers {
            table.get_mut(s).expect("current").account_host_writes();
        }
    }

    /// The copies this launch needs in the present state (the host's writes accounted for
    /// first: [`LaunchPlan::account_host_writes`]), with what each reads; moves the
    /// coherence maps to the state after the launch. Returns the copy plan and whether it
    /// came from the cache.
    pub(crate) fn copies(&self, table: &mut Table) -> (Arc<CopyPlan>, bool) {
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
            self.keep_stale(table);
            return (plan, true);
        }
        let before: Vec<Coherence> =
            self.buffers.iter().map(|&(s, _)| table.get(s).expect("current").coherence.clone()).collect();
        // Each part's writes per buffer, merged: a scatter's thousands of small runs are then
        // one pass over the map each (one pass per run made planning quadratic: Parboil spmv).
        let writes: Vec<Vec<Written>> =
            self.parts.iter().map(|p| (0..self.buffers.len()).map(|b| Written::of(p, b)).collect()).collect();
        let mut copies = Vec::new();
        let mut sources = Vec::new();
        for (p, written) in self.parts.iter().zip(&writes) {
            for &(b, rect) in &p.reads {
                let buf = table.get_mut(self.buffers[b].0).expect("current");
                let first = copies.len();
                // What the part also writes, its writer becomes the only holder of below:
                // recording it as a reader first changes nothing but costs a pass over the map
                // per row (Parboil lbm's padding between rows it writes: 9000 rows each).
                let record = !written[b].covers(rect.start, rect.end());
                buf.plan_current(Place::Device(p.device), &rect, &before[b], &mut copies, record);
                let base = buf.addr(Place::Device(p.device)).unwrap_or_else(|e| crate::fatal(&e));
                sources.extend(copies[first..].iter().map(|c| {
                    let start = c.dst_addr - base;
                    Source { buffer: b, start, end: start + (c.rows - 1) * c.pitch + c.row_bytes }
                }));
            }
        }
        for (p, written) in self.parts.iter().zip(writes) {
            for (b, w) in written.into_iter().enumerate() {
                let at = Place::Device(p.device);
                match w {
                    Written::Nothing => {}
                    Written::Rect(rect) => {
                        table.get_mut(self.buffers[b].0).expect("current").coherence.set_only_runs(rect.row_runs(), at)
                    }
                    Written::Runs(runs) => {
                        table.get_mut(self.buffers[b].0).expect("current").coherence.set_only_runs(runs, at)
                    }
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
        self.keep_stale(table);
        (plan, false)
    }

    /// Where races with the host are found by comparing bytes (`memory::Buffer::keep_stale`):
    /// what the host holds where the launch made a device's copy newer.
    fn keep_stale(&self, table: &mut Table) {
        for &(s, _) in &self.buffers {
            table.get_mut(s).expect("current").keep_stale();
        }
    }
}

/// The byte runs part `p` writes in buffer `b`, sorted and merged.
pub(crate) fn merged_writes(p: &PartPlan, b: usize) -> Vec<(u64, u64)> {
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

/// What a part writes in one buffer: nothing, one rectangle (most kernels), or the merged
/// runs of several.
pub(crate) enum Written {
    Nothing,
    Rect(memory::ByteRect),
    Runs(Vec<(u64, u64)>),
}

impl Written {
    /// What part `p` writes in buffer `b`: its rectangle where it writes one (its runs are
    /// then never collected, sorted and merged: a band of thousands of rows).
    pub(crate) fn of(p: &PartPlan, b: usize) -> Written {
        let mut rects = p.writes.iter().filter(|(x, r)| *x == b && r.rows > 0 && r.row_bytes > 0);
        match (rects.next(), rects.next()) {
            (None, _) => Written::Nothing,
            // Rows that overlap (pitch 0: one row, repeated) are merged as runs are.
            (Some(&(_, r)), None) if r.is_contiguous() || r.pitch >= r.row_bytes => Written::Rect(r),
            _ => Written::Runs(merged_writes(p, b)),
        }
    }

    /// Whether one run of what is written holds all of `start..end`.
    pub(crate) fn covers(&self, start: u64, end: u64) -> bool {
        match self {
            Written::Nothing => false,
            Written::Rect(r) if r.is_contiguous() => r.start <= start && end <= r.end(),
            Written::Rect(r) => {
                let row = start.checked_sub(r.start).map(|d| d / r.pitch).filter(|&k| k < r.rows);
                row.is_some_and(|k| {
                    let lo = r.start + k * r.pitch;
                    start >= lo && end <= lo + r.row_bytes
                })
            }
            Written::Runs(runs) => covers(runs, start, end),
        }
    }
}

/// Whether one run of `runs` (sorted, merged) holds all of `start..end`.
pub(crate) fn covers(runs: &[(u64, u64)], start: u64, end: u64) -> bool {
    let i = runs.partition_point(|&(_, hi)| hi <= start);
    runs.get(i).is_some_and(|&(lo, hi)| lo <= start && end <= hi)
}

/// The devices a plan's partitions run on.
pub(crate) fn used_devices(lp: &LaunchPlan) -> usize {
    let mut seen = 0u128;
    for p in lp.parts.iter().filter(|p| !p.bx.is_empty()) {
        seen |= 1 << p.device;
    }
    seen.count_ones() as usize
}

/// The index values a plan was made from (an indirect write's inspector): the host's bytes of
/// `runs` of the plan's buffer `buffer` at planning time.
pub(crate) struct Inspection {
    pub buffer: usize,
    pub runs: Vec<(u64, u64)>,
    pub bytes: Vec<u8>,
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
pub(crate) fn host_bytes(buf: &mut Buffer, lo: u64, hi: u64) -> &[u8] {
    buf.host_current(lo, hi);
    // SAFETY: `lo..hi` lies within the tracked buffer (the runs come from a map clipped to
    // it), which is the program's memory for as long as it is tracked, and no device copy
    // writes it while the table is locked.
    unsafe { std::slice::from_raw_parts((buf.start + lo) as *const u8, (hi - lo) as usize) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctx::GridBox;
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
