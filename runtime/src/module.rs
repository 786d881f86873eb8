//! A compiled module as the runtime holds it: its parsed description, its leaf entry points,
//! its analysis database, what is derived once (child order, statistics slots), and the
//! evaluation of its graphs' data flow that every layer above needs: instance counts, a
//! child's arguments from its parent's and its sources' outputs, a node's bound outputs.
//!
//! Invariant: a [`Module`] exists only for a description that parsed and checked
//! ([`Program::parse`]) and whose internal nodes' edges are acyclic, so node, port and entry
//! indices taken from it are in range.

use crate::args::{int_param, Args, Patch, SendPtr};
use crate::ctx::EntryFn;
use crate::desc::{EdgeDesc, KindDesc, NodeDesc, Program};
use crate::devices::{Copy, Place};
use crate::fatal;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

pub struct Module {
    pub program: Program,
    pub entries: Vec<EntryFn>,
    /// The module's GPU kernels as NUL-terminated PTX (a constant of the executable), if any.
    pub ptx: Option<&'static std::ffi::CStr>,
    /// Per node: its children in an order where every edge goes forward (internal nodes only).
    pub order: Vec<Vec<u32>>,
    /// Per node, how its parent fills its arguments ([`Inputs`]): found once, since every
    /// launch of a CUDA kernel asks (three times, and a launch-bound loop launches millions).
    inputs: Vec<Inputs>,
    /// Per launch, [`Module::cuda_unit`].
    cuda_units: Vec<Option<(u32, u32)>>,
    /// Shared with launches left in flight, which add their GPU times once finished.
    pub stats: std::sync::Arc<[NodeStats]>,
    /// The analysis database the build embedded (validated, of this schema version).
    pub analysis: Option<dashdb::Database>,
    /// Where a node of the database is `specializable`: the analysis's input and the compiler
    /// (`partitioned::special`).
    pub analysis_input: Option<AnalysisInput>,
}

/// The module as the analysis read it (LLVM bitcode) and the compiler that built it:
/// constants of the executable (`transform::host::AnalysisInput`).
#[derive(Clone, Copy, Debug)]
pub struct AnalysisInput {
    pub bitcode: &'static [u8],
    /// The compiler's path, a newline, and what identifies that build of it.
    pub compiler: &'static std::ffi::CStr,
}

impl AnalysisInput {
    /// The compiler's path and its identity.
    pub fn compiler(&self) -> (std::path::PathBuf, String) {
        let text = self.compiler.to_string_lossy();
        let (path, id) = text.split_once('\n').unwrap_or((&text, ""));
        (std::path::PathBuf::from(path), id.to_string())
    }
}

/// How a node's parent fills the node's argument buffer: the bytes bound from the parent's
/// arguments, and whether edges from siblings feed it too (all of them, or one instance each).
#[derive(Default)]
struct Inputs {
    /// (offset in the parent's arguments, offset in the node's, bytes), in `bind_in` order.
    bound: Vec<(usize, usize, usize)>,
    edges: bool,
    one_to_one: bool,
}

/// How many split plan misses a node keeps the time of ([`NodeStats::split_miss_nanos`]).
pub const SPLIT_MISSES_KEPT: usize = 4096;

#[derive(Default)]
pub struct NodeStats {
    /// Runs of the node's whole grid (once per parent instance).
    pub runs: AtomicU64,
    pub instances: AtomicU64,
    /// Wall time summed over runs (concurrent runs add up).
    pub nanos: AtomicU64,
    /// Time of each GPU kernel run of the node, in milliseconds (CUDA events).
    pub kernel_ms: Mutex<Vec<f32>>,
    /// GPU launches that used the read-only-cache variant of the kernel.
    pub read_only_cache_launches: AtomicU64,
    /// Runs as a launch unit on the devices, and how many of them were split across more
    /// than one device (over at most `max_devices`).
    pub unit_launches: AtomicU64,
    /// Launches of this unit replayed (`partitioned::replay`) and their instances: each is
    /// also a run and a unit launch that hit both plan caches, and a run of its root, counted
    /// so in the report. Two counters, so that a replay adds to no others.
    pub replays: AtomicU64,
    pub replayed_instances: AtomicU64,
    pub partitioned: AtomicU64,
    pub max_devices: AtomicU64,
    pub plan_hits: AtomicU64,
    pub plan_misses: AtomicU64,
    pub copy_hits: AtomicU64,
    pub copy_misses: AtomicU64,
    /// Time computing plans (intervals, with ISL), planning copies, copying, and running
    /// the partitions.
    pub nanos_intervals: AtomicU64,
    /// Time making device allocations (a buffer's first use on a device).
    pub nanos_alloc: AtomicU64,
    /// Each plan miss that made a plan over several devices at the launch (ISL's work, or
    /// its closed forms for new scalar values), ns, the first [`SPLIT_MISSES_KEPT`]: a median
    /// per node is what issue 40's "a plan miss costs microseconds" is checked by.
    pub split_miss_nanos: Mutex<Vec<u64>>,
    pub nanos_copy_plan: AtomicU64,
    /// Splits planned ahead in the background (`partitioned::ahead`), their time, and the
    /// launches that ran whole meanwhile.
    pub plans_ahead: AtomicU64,
    pub nanos_plan_ahead: AtomicU64,
    pub whole_while_planning: AtomicU64,
    /// Launches on a program's streams planned with their maps, rather than whole, because
    /// other streams' work in flight shared their buffers (`partitioned::lanes`).
    pub lane_exact_plans: AtomicU64,
    /// Launches whose plan and copy plan both came from the caches, and the runtime's work
    /// on them (lookups, coherence updates), from the plan lookup to the first copy.
    pub hit_launches: AtomicU64,
    pub nanos_hit_work: AtomicU64,
    pub nanos_copies: AtomicU64,
    pub nanos_kernels: AtomicU64,
    /// On GPUs, the same phases on the devices' timelines (CUDA events), per launch the
    /// slowest device's: copies from the host, copies between GPUs, kernels.
    pub gpu_nanos_host_copies: AtomicU64,
    pub gpu_nanos_peer_copies: AtomicU64,
    pub gpu_nanos_kernels: AtomicU64,
    /// Bytes its launches moved: host to device, device to device, device to host.
    pub bytes_h2d: AtomicU64,
    pub bytes_d2d: AtomicU64,
    pub bytes_d2h: AtomicU64,
    /// Why it ran unsplit or on the host (the first reason seen of each).
    pub unpartitioned_reason: Mutex<Option<String>>,
    pub host_reason: Mutex<Option<String>>,
    /// Launches the split policy ran whole though they could have split, and why (the
    /// latest reason: measurements change).
    pub declined: AtomicU64,
    pub declined_reason: Mutex<Option<String>>,
    /// The kind of the last reason noted (`note_declined`).
    pub declined_kind: AtomicU8,
    /// Most rounds a launch ran in to fit the devices' memory (`partitioned::fit_memory`).
    pub max_rounds: AtomicU64,
}

impl NodeStats {
    pub fn note_unpartitioned(&self, reason: &str) {
        let mut r = self.unpartitioned_reason.lock().unwrap_or_else(|e| e.into_inner());
        if r.is_none() {
            *r = Some(reason.to_string());
        }
    }

    /// A launch that could have split ran whole, for a reason of kind `kind` (a small number
    /// per kind of reason). The text is made only when the kind changes and on one declined
    /// launch in 64: it formats measured times, and a launch-bound loop declines every launch.
    pub fn note_declined(&self, kind: u8, reason: impl FnOnce() -> String) {
        let k = self.declined.fetch_add(1, Ordering::Relaxed);
        let last = self.declined_kind.swap(kind, Ordering::Relaxed);
        if k.is_multiple_of(64) || last != kind {
            *self.declined_reason.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason());
        }
    }

    /// Another launch declined for the reason noted last ([`NodeStats::note_declined`]).
    pub fn note_declined_again(&self) {
        self.declined.fetch_add(1, Ordering::Relaxed);
    }

    pub fn note_host(&self, reason: &str) {
        let mut r = self.host_reason.lock().unwrap_or_else(|e| e.into_inner());
        if r.is_none() {
            *r = Some(reason.to_string());
        }
    }

    pub fn count_bytes(&self, c: &Copy) {
        let slot = match (c.src, c.dst) {
            (Place::Host, _) => &self.bytes_h2d,
            (_, Place::Host) => &self.bytes_d2h,
            _ => &self.bytes_d2d,
        };
        slot.fetch_add(c.bytes(), Ordering::Relaxed);
    }

    pub fn record(&self, instances: u64, nanos: u64) {
        self.runs.fetch_add(1, Ordering::Relaxed);
        self.instances.fetch_add(instances, Ordering::Relaxed);
        self.nanos.fetch_add(nanos, Ordering::Relaxed);
    }
}

impl Module {
    /// The module of a parsed description and its entry points (`entries[i]` is leaf entry
    /// `i`); an error names the node whose graph cannot run.
    pub fn new(
        program: Program,
        entries: Vec<EntryFn>,
        ptx: Option<&'static std::ffi::CStr>,
    ) -> Result<Module, String> {
        let mut order = Vec::with_capacity(program.nodes.len());
        for node in &program.nodes {
            order.push(match &node.kind {
                KindDesc::Internal { children, edges, .. } => {
                    topological(children, edges.iter().map(|e| (e.src, e.dst))).ok_or_else(|| {
                        format!("node {} ({}): its child nodes' edges form a cycle", node.shown(), node.loc)
                    })?
                }
                KindDesc::Leaf { entry, .. } => {
                    if *entry as usize >= entries.len() {
                        return Err(format!("node {}: entry point {entry} missing", node.shown()));
                    }
                    Vec::new()
                }
            });
        }
        let mut inputs: Vec<Inputs> = program.nodes.iter().map(|_| Inputs::default()).collect();
        for node in &program.nodes {
            let KindDesc::Internal { edges, bind_in, .. } = &node.kind else { continue };
            for b in bind_in {
                let (from, to) = (
                    &node.params[b.parent_port as usize],
                    &program.nodes[b.child as usize].params[b.child_port as usize],
                );
                inputs[b.child as usize].bound.push((from.offset as usize, to.offset as usize, to.size as usize));
            }
            for e in edges {
                inputs[e.dst as usize].edges = true;
                inputs[e.dst as usize].one_to_one |= e.one_to_one;
            }
        }
        let cuda_units = program
            .launches
            .iter()
            .map(|l| {
                let root = &program.nodes[l.root as usize];
                let KindDesc::Internal { children, .. } = &root.kind else { return None };
                let one = root.counts.iter().all(|c| matches!(c, crate::desc::ExprDesc::Const(1)));
                let &[unit] = &children[..] else { return None };
                let blocks = matches!(program.nodes[unit as usize].shape, Some(crate::desc::KernelKind::Blocks { .. }));
                (one && blocks && root.outputs_size() == 0).then_some((l.root, unit))
            })
            .collect();
        let stats = program.nodes.iter().map(|_| NodeStats::default()).collect();
        let analysis =
            match &program.analysis {
                Some(json) => Some(dashdb::Database::from_json(json).map_err(|e| {
                    format!("{}: the analysis database built into this executable: {e}", program.source)
                })?),
                None => None,
            };
        Ok(Module { program, entries, ptx, order, inputs, cuda_units, stats, analysis, analysis_input: None })
    }

    /// Parses the description `json` and makes its module.
    pub fn load(json: &str, entries: Vec<EntryFn>, ptx: Option<&'static std::ffi::CStr>) -> Result<Module, String> {
        Program::parse(json).and_then(|p| Module::new(p, entries, ptx))
    }

    pub fn node(&self, n: u32) -> &NodeDesc {
        &self.program.nodes[n as usize]
    }

    /// The grid of node `c`, from its count expressions over its parent's arguments
    /// (`parent`: the parent node and one instance's argument buffer; `None` for a root).
    /// A count that is negative or cannot be evaluated ends the program with the node's name.
    pub fn grid(&self, c: u32, parent: Option<(u32, &[u8])>) -> [i64; 3] {
        let node = self.node(c);
        let mut dim = [1i64; 3];
        for (d, e) in node.counts.iter().enumerate() {
            let v = match parent {
                Some((p, args)) => e.eval(&|i| int_param(self.node(p), args, i)),
                None => e.eval(&|_| None),
            };
            match v {
                Some(v) if v >= 0 => dim[d] = v,
                Some(v) => fatal(&format!(
                    "node {} ({}): instance count {v} in dimension {d} is negative",
                    node.name, node.loc
                )),
                None => fatal(&format!(
                    "node {} ({}): cannot evaluate its instance count in dimension {d} (overflow or division by zero)",
                    node.name, node.loc
                )),
            }
        }
        dim
    }

    /// The arguments of child `c` of internal node `n`: bound inputs from the parent's
    /// arguments `args`, the others from the output records of edge sources (`source`).
    pub fn child_args<'r>(
        &self,
        n: u32,
        c: u32,
        args: &[u8],
        source: &dyn Fn(&EdgeDesc) -> (&'r [u8], i64),
    ) -> Args<'r> {
        let node = self.node(n);
        let child = self.node(c);
        let KindDesc::Internal { edges, .. } = &node.kind else { unreachable!("only internal nodes have children") };
        let inputs = &self.inputs[c as usize];
        let mut base = crate::args::ArgBytes::from_elem(0, child.args_size());
        for &(from, to, size) in &inputs.bound {
            base[to..to + size].copy_from_slice(&args[from..from + size]);
        }
        let mut patches = Vec::new();
        let edges: &[EdgeDesc] = if inputs.edges { edges } else { &[] };
        for e in edges.iter().filter(|e| e.dst == c) {
            let src = self.node(e.src);
            let (outs, total) = source(e);
            let (from, to) = (&src.outputs[e.src_port as usize], &child.params[e.dst_port as usize]);
            if e.one_to_one {
                patches.push(Patch {
                    dst_offset: to.offset as usize,
                    size: to.size as usize,
                    src: outs,
                    src_offset: from.offset as usize,
                    stride: src.outputs_size(),
                });
            } else if total > 0 {
                let at = (total as usize - 1) * src.outputs_size() + from.offset as usize;
                base[to.offset as usize..(to.offset + to.size) as usize]
                    .copy_from_slice(&outs[at..at + to.size as usize]);
            }
        }
        Args { base, patches }
    }

    /// How node `c`'s parent fills its arguments from its own: (offset in the parent's
    /// arguments, offset in `c`'s, bytes), for the parameters bound from the parent.
    pub fn bound(&self, c: u32) -> &[(usize, usize, usize)] {
        &self.inputs[c as usize].bound
    }

    /// Whether no edge from a sibling feeds node `c` (its arguments all come from its
    /// parent's).
    pub fn has_no_edges_in(&self, c: u32) -> bool {
        !self.inputs[c as usize].edges
    }

    /// The root and launch unit of launch `l` where it is a CUDA kernel's shape: a root of
    /// one instance, without outputs, whose only child is a launch unit of blocks.
    pub fn cuda_unit(&self, l: u32) -> Option<(u32, u32)> {
        self.cuda_units.get(l as usize).copied().flatten()
    }

    /// Whether node `c` takes an argument per instance from a one-to-one edge (its
    /// arguments from [`Module::child_args`] then have patches).
    pub fn fed_one_to_one(&self, c: u32) -> bool {
        self.inputs[c as usize].one_to_one
    }

    /// Writes the outputs of internal node `n` (one instance) at `out` from its children's
    /// output records (`result` of a child: records and instance count, if it ran).
    pub fn bind_outputs<'r>(&self, n: u32, out: SendPtr<u8>, result: &dyn Fn(u32) -> Option<(&'r [u8], i64)>) {
        let node = self.node(n);
        let KindDesc::Internal { bind_out, .. } = &node.kind else { unreachable!("only internal nodes bind outputs") };
        if out.0.is_null() {
            return;
        }
        for b in bind_out {
            let child = self.node(b.child);
            let Some((outs, total)) = result(b.child) else { continue };
            if total == 0 {
                continue;
            }
            let (from, to) = (&child.outputs[b.child_port as usize], &node.outputs[b.parent_port as usize]);
            let at = (total as usize - 1) * child.outputs_size() + from.offset as usize;
            // SAFETY: `out` is one output record of `node`, `outputs_size()` bytes long.
            unsafe {
                std::ptr::copy_nonoverlapping(outs[at..].as_ptr(), out.0.add(to.offset as usize), to.size as usize)
            };
        }
    }
}

/// Kahn's algorithm, keeping creation order among nodes that are ready together.
fn topological(children: &[u32], edges: impl Iterator<Item = (u32, u32)>) -> Option<Vec<u32>> {
    let edges: Vec<(u32, u32)> = edges.collect();
    let mut indegree: HashMap<u32, usize> = children.iter().map(|&c| (c, 0)).collect();
    for &(_, d) in &edges {
        *indegree.entry(d).or_default() += 1;
    }
    let mut done = Vec::with_capacity(children.len());
    while done.len() < children.len() {
        let next = children.iter().copied().find(|c| indegree[c] == 0 && !done.contains(c))?;
        done.push(next);
        for &(s, d) in &edges {
            if s == next {
                *indegree.get_mut(&d).unwrap() -= 1;
            }
        }
    }
    Some(done)
}

#[cfg(test)]
mod tests {
    use super::topological;

    #[test]
    fn orders_children_along_edges() {
        assert_eq!(topological(&[1, 2, 3], [(3, 1), (2, 3)].into_iter()), Some(vec![2, 3, 1]));
        assert_eq!(topological(&[1, 2], std::iter::empty()), Some(vec![1, 2]));
        assert_eq!(topological(&[1, 2], [(1, 2), (2, 1)].into_iter()), None);
    }
}
