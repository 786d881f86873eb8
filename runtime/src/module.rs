//! A compiled module as the runtime holds it: its parsed description, its leaf entry points,
//! and what is derived once (child order, statistics slots).

use crate::ctx::EntryFn;
use crate::desc::{KindDesc, Program};
use crate::fatal;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

pub struct Module {
    pub program: Program,
    pub entries: Vec<EntryFn>,
    /// The module's GPU kernels as NUL-terminated PTX (a constant of the executable), if any.
    pub ptx: Option<&'static std::ffi::CStr>,
    /// Per node: its children in an order where every edge goes forward (internal nodes only).
    pub order: Vec<Vec<u32>>,
    pub stats: Vec<NodeStats>,
    /// The analysis database the build embedded (validated, of this schema version).
    pub analysis: Option<dashdb::Database>,
    /// Plans of partitioned launches by launch key.
    pub launches: crate::partitioned::cache::Launches,
}

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
    pub nanos_copy_plan: AtomicU64,
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
}

impl NodeStats {
    pub fn note_unpartitioned(&self, reason: &str) {
        let mut r = self.unpartitioned_reason.lock().unwrap_or_else(|e| e.into_inner());
        if r.is_none() {
            *r = Some(reason.to_string());
        }
    }

    pub fn note_host(&self, reason: &str) {
        let mut r = self.host_reason.lock().unwrap_or_else(|e| e.into_inner());
        if r.is_none() {
            *r = Some(reason.to_string());
        }
    }

    pub fn count_bytes(&self, c: &crate::devices::Copy) {
        use crate::devices::Place;
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
    fn new(program: Program, entries: Vec<EntryFn>, ptx: Option<&'static std::ffi::CStr>) -> Result<Module, String> {
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
        let stats = program.nodes.iter().map(|_| NodeStats::default()).collect();
        let analysis =
            match &program.analysis {
                Some(json) => Some(dashdb::Database::from_json(json).map_err(|e| {
                    format!("{}: the analysis database built into this executable: {e}", program.source)
                })?),
                None => None,
            };
        Ok(Module { program, entries, ptx, order, stats, analysis, launches: Default::default() })
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

/// Modules by the address of their description: parsed on first launch, kept for the run.
fn registry() -> &'static Mutex<HashMap<usize, Arc<Module>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<usize, Arc<Module>>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// The module whose description is the NUL-terminated JSON at `desc`.
///
/// # Safety
/// `desc` (and `ptx` unless null) must point to NUL-terminated strings and `entries` to
/// `n_entries` entry points, all living as long as the program (constants of the executable).
pub unsafe fn get(
    desc: *const std::ffi::c_char,
    entries: *const EntryFn,
    n_entries: u32,
    ptx: *const std::ffi::c_char,
) -> Arc<Module> {
    let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(m) = reg.get(&(desc as usize)) {
        return m.clone();
    }
    let json = unsafe { std::ffi::CStr::from_ptr(desc) }.to_string_lossy();
    let entries = unsafe { std::slice::from_raw_parts(entries, n_entries as usize) }.to_vec();
    let ptx = (!ptx.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(ptx) });
    let module = Program::parse(&json).and_then(|p| Module::new(p, entries, ptx)).unwrap_or_else(|e| fatal(&e));
    if let Some(db) = &module.analysis {
        crate::partitioned::prefetch(db);
    }
    let module = Arc::new(module);
    reg.insert(desc as usize, module.clone());
    module
}

/// Every module loaded so far, for the statistics report.
pub fn loaded() -> Vec<Arc<Module>> {
    registry().lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect()
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
