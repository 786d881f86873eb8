//! Kernel launches held back on a GPU and submitted together, as a CUDA graph where the
//! same sequence came before (`HPVM_MGPU_GRAPHS`, on by default).
//!
//! A CUDA program cannot observe a launch before it next synchronizes, copies, records or
//! queries anything: until then a launch may wait on the host. The runtime holds a GPU's
//! asynchronous, untimed launches ([`Held::hold`]) and submits them ([`Held::flush`]) when
//! [`HOLD_MAX`] are held or before anything else touches the GPU. Held sequences run as CUDA
//! graphs ([`Held::submit`]): each GPU has one chain of [`HOLD_MAX`] kernel nodes, made the
//! first time a program launches that many without synchronizing (or repeats a sequence),
//! that runs any sequence: its nodes are given the sequence's kernels, grids and parameters
//! where they differ, and the nodes past the sequence's end are disabled. A sequence that
//! comes back while the chain holds other kernels gets a graph of its own, replayed with only
//! the changed parameters set. NVIDIA's runtime pays its full launch cost per kernel; a
//! graph replay costs a fraction of it (H200: 3.5-4.7 µs per `cuLaunchKernel`; per kernel of a
//! graph of 30, 0.95 µs with every node's parameters set, 2.0-2.5 µs with every node's kernel
//! changed too: `launch_probe`). Making a graph costs the most the first times in a process
//! (360-530 µs for the first chain of 32), which is why one chain serves every sequence.
//!
//! Holding pays only where sequences are long enough to become graphs. A program that
//! synchronizes after every launch or two (PolyBench's lu, per-row eliminations) would pay the
//! hold and the flush on every launch and never replay: after [`SHORT_INTERVALS`] intervals in
//! a row between the program's synchronizations with fewer than [`GRAPH_MIN`] launches, its
//! launches go to the driver at once, as with graphs off, until an interval is long again
//! ([`Held::counts_launch`], [`Held::sync_point`]; launches are counted whether held or not).
//! (Building a graph off the launch path, on a worker thread, was tried and measured slower
//! on an H200: the build then contends with the launches for the driver, and the sequence
//! after it waits for the build anyway. So was loading the modules on a worker thread as a
//! GPU opens: no first launch got cheaper.)
//!
//! Invariants (what keeps it exact):
//! - held launches are flushed before any other call on their GPU: [`super::cuda::Cuda`]
//!   flushes whenever it makes its context current, which every other operation does
//!   first; so the stream's order is the program's, and every wait (`synchronize`, the
//!   in-flight drain) sees them;
//! - a held launch was validated: the first launch of each kernel with its block and shared
//!   memory goes to the driver directly, so launch errors that depend on them (resources per
//!   block) are reported at the launch, as CUDA does; grids are checked before any launch
//!   (`cudart::launch::check_configuration`);
//! - only launches the runtime leaves in flight are held (asynchronous, untimed, on one GPU):
//!   a launch whose outputs or copies the host needs at once is submitted at once, and so are
//!   a split launch's parts (each GPU's part would wait for the next call touching that GPU);
//! - a wait for several GPUs submits every GPU's held launches before it waits for any
//!   (`inflight::drain`);
//! - a graph's kernels run in a chain, each after the one before, as on the stream; a
//!   disabled node runs nothing and keeps the chain's order;
//! - a node runs exactly the launch it was last set to: a node whose setting failed is
//!   marked unknown and set again before it next runs, and a graph whose setting failed is
//!   not launched (its launches go to the driver one by one, which reports the error).

use super::params::Params;
use crate::hash::{FxHashMap, FxHashSet};
use cudarc::driver::sys;
use std::ffi::c_void;

/// Most launches held on one GPU before they are submitted: a graph of 32 short kernels keeps
/// the GPU busy while the host prepares the next 32, and the first waits for at most 32.
pub(super) const HOLD_MAX: usize = 32;

/// Fewest held launches worth a graph (below, launching each costs less than a replay).
const GRAPH_MIN: usize = 4;

/// Intervals in a row between synchronizations shorter than [`GRAPH_MIN`] launches after
/// which launches are no longer held (see the module's doc).
const SHORT_INTERVALS: u32 = 3;

/// The longest period of repeating launches [`Held::flush_full`] cuts sequences at.
const PERIOD_MAX: usize = 8;

/// Graphs kept per GPU (each holds device resources); beyond, all are destroyed.
const GRAPHS_KEPT: usize = 16;

/// Sequences remembered per GPU as seen once; beyond, forgotten.
const SEEN_KEPT: usize = 64;

/// `HPVM_MGPU_GRAPHS`: `on` (default) holds launches and replays repeated sequences as
/// graphs; `off` submits every launch at once, as NVIDIA's runtime does.
pub fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| match std::env::var("HPVM_MGPU_GRAPHS").unwrap_or_default().trim() {
        "" | "on" | "1" => true,
        "off" | "0" => false,
        other => crate::fatal(&format!("HPVM_MGPU_GRAPHS={other}: expected `on` or `off`")),
    })
}

/// One launch: what `cuLaunchKernel` takes.
pub(super) struct Launch {
    pub f: sys::CUfunction,
    /// The kernel's name, for messages (an index into [`Held::names`]).
    pub name: usize,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared: u32,
    pub params: Params,
}

/// What makes two launches the same node of a graph: all but the parameters' values.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Shape {
    f: usize,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
}

impl Shape {
    fn of(l: &Launch) -> Shape {
        Shape { f: l.f as usize, grid: l.grid, block: l.block, shared: l.shared }
    }
}

/// An instantiated chain of kernel nodes: what each node launches now and the parameters it
/// was last given. A sequence's own graph runs that sequence; the GPU's chain
/// ([`Held::chain`]) runs any sequence of up to [`HOLD_MAX`] kernels, its nodes given other
/// kernels and grids as needed (`cuGraphExecKernelNodeSetParams` may change a node's
/// function) and those past the sequence's end disabled (`cuGraphNodeSetEnabled`).
struct Graph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
    nodes: Vec<sys::CUgraphNode>,
    /// What each node launches; `None` where setting it failed (so it is unknown).
    shapes: Vec<Option<Shape>>,
    params: Vec<Vec<u8>>,
    /// The graph runs its first `len` nodes; the rest are disabled.
    len: usize,
}

fn node_params(l: &Shape, ptrs: &mut [*mut c_void]) -> sys::CUDA_KERNEL_NODE_PARAMS {
    sys::CUDA_KERNEL_NODE_PARAMS {
        func: l.f as sys::CUfunction,
        gridDimX: l.grid[0],
        gridDimY: l.grid[1],
        gridDimZ: l.grid[2],
        blockDimX: l.block[0],
        blockDimY: l.block[1],
        blockDimZ: l.block[2],
        sharedMemBytes: l.shared,
        kernelParams: ptrs.as_mut_ptr(),
        extra: std::ptr::null_mut(),
        kern: std::ptr::null_mut(),
        // The current context: the caller's GPU's.
        ctx: std::ptr::null_mut(),
    }
}

impl Graph {
    /// Builds and instantiates the chain of `launches` (context current), with `nodes` nodes
    /// (at least as many as `launches`; the extra ones copy the last launch and are disabled).
    fn build(launches: &mut [Launch], nodes: usize) -> Result<Graph, sys::CUresult> {
        let mut graph = std::ptr::null_mut();
        // SAFETY: an out-pointer; flags must be 0.
        unsafe { sys::cuGraphCreate(&mut graph, 0) }.result().map_err(|e| e.0)?;
        let count = nodes.max(launches.len());
        let mut g = Graph {
            graph,
            exec: std::ptr::null_mut(),
            nodes: Vec::new(),
            shapes: Vec::new(),
            params: Vec::new(),
            len: count,
        };
        let last = launches.len() - 1;
        for i in 0..count {
            let l = &mut launches[i.min(last)];
            let mut node = std::ptr::null_mut();
            let deps: &[sys::CUgraphNode] = g.nodes.last().map(std::slice::from_ref).unwrap_or(&[]);
            let shape = Shape::of(l);
            l.params
                .with_pointers(|ptrs| {
                    let p = node_params(&shape, ptrs);
                    // SAFETY: a graph of this context; the dependency is a node of it; the
                    // parameter pointers are valid for the call (the driver copies the values).
                    unsafe { sys::cuGraphAddKernelNode_v2(&mut node, graph, deps.as_ptr(), deps.len(), &p) }.result()
                })
                .map_err(|e| e.0)?;
            g.nodes.push(node);
            g.shapes.push(Some(shape));
            g.params.push(l.params.bytes().to_vec());
        }
        // SAFETY: a complete graph; flags 0.
        unsafe { sys::cuGraphInstantiateWithFlags(&mut g.exec, graph, 0) }.result().map_err(|e| e.0)?;
        Ok(g)
    }

    /// Whether the graph's first nodes launch `shape` now: running it then sets parameters
    /// only (and enables or disables nodes at the end), no node's kernel or grid.
    fn fits(&self, shape: &[Shape]) -> bool {
        shape.len() <= self.nodes.len() && self.shapes.iter().zip(shape).all(|(a, b)| a.as_ref() == Some(b))
    }

    /// Submits the first `launches.len()` nodes on `stream`, each set to its launch where it
    /// differs (context current). On an error nothing of it was launched.
    fn run(&mut self, launches: &mut [Launch], stream: sys::CUstream) -> Result<(), sys::CUresult> {
        if launches.len() > self.nodes.len() {
            return Err(sys::CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        for (i, l) in launches.iter_mut().enumerate() {
            let shape = Shape::of(l);
            if self.shapes[i].as_ref() != Some(&shape) || self.params[i] != l.params.bytes() {
                let (exec, node) = (self.exec, self.nodes[i]);
                self.shapes[i] = None;
                l.params
                    .with_pointers(|ptrs| {
                        let p = node_params(&shape, ptrs);
                        // SAFETY: a kernel node of this executable graph; its new function is
                        // of the same context (the caller's GPU's).
                        unsafe { sys::cuGraphExecKernelNodeSetParams_v2(exec, node, &p) }.result()
                    })
                    .map_err(|e| e.0)?;
                self.shapes[i] = Some(shape);
                self.params[i].clear();
                self.params[i].extend_from_slice(l.params.bytes());
            }
        }
        let n = launches.len();
        // Nodes past the sequence's end are disabled, and enabled again when a longer one
        // comes: a disabled node is an empty node, so the chain's order holds.
        for i in (n..self.len).chain(self.len..n) {
            // SAFETY: a kernel node of this executable graph.
            unsafe { sys::cuGraphNodeSetEnabled(self.exec, self.nodes[i], u32::from(i < n)) }
                .result()
                .map_err(|e| e.0)?;
        }
        self.len = n;
        // SAFETY: an instantiated graph of this context; the stream is its GPU's.
        unsafe { sys::cuGraphLaunch(self.exec, stream) }.result().map_err(|e| e.0)
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: handles made by `build`, used by nothing else. A failure leaks them.
        unsafe {
            if !self.exec.is_null() {
                let _ = sys::cuGraphExecDestroy(self.exec);
            }
            let _ = sys::cuGraphDestroy(self.graph);
        }
    }
}

/// One GPU's held launches and its graphs.
#[derive(Default)]
pub(super) struct Held {
    launches: Vec<Launch>,
    /// Kernels with the block and shared memory they launched with directly at least once.
    validated: FxHashSet<(usize, [u32; 3], u32)>,
    /// Kernel names, for messages.
    names: Vec<String>,
    seen: FxHashSet<Vec<Shape>>,
    graphs: FxHashMap<Vec<Shape>, Graph>,
    /// The chain of [`HOLD_MAX`] nodes that runs sequences with no graph of their own, made
    /// at the first full hold (see [`Held::submit`]); `chain_failed` once the driver refused it.
    chain: Option<Graph>,
    chain_failed: bool,
    /// Replays and graphs made (statistics).
    pub replays: u64,
    pub built: u64,
    /// Launches counted since the last synchronization point: the sequence holding makes.
    since: u32,
    /// Intervals in a row between synchronization points shorter than [`GRAPH_MIN`].
    short: u32,
}

// SAFETY: the handles are the driver's and used only with the GPU's context current, under
// the `Mutex` its `Cuda` keeps this in.
unsafe impl Send for Held {}

impl Held {
    /// Whether a launch of `f` with `block` and `shared` may be held: one went to the
    /// driver directly before (see the module's invariants).
    pub fn may_hold(&self, f: sys::CUfunction, block: [u32; 3], shared: u32) -> bool {
        self.validated.contains(&(f as usize, block, shared))
    }

    /// Records that a launch of `f` with `block` and `shared` went to the driver.
    pub fn validated(&mut self, f: sys::CUfunction, block: [u32; 3], shared: u32) {
        self.validated.insert((f as usize, block, shared));
    }

    /// The index of `name` among the kernel names (few: one per kernel launched).
    pub fn name(&mut self, name: &str) -> usize {
        match self.names.iter().position(|n| n == name) {
            Some(i) => i,
            None => {
                self.names.push(name.to_string());
                self.names.len() - 1
            }
        }
    }

    /// Counts a launch that could be held; whether it is to be held (see the module's doc:
    /// not while the program synchronizes after every launch or two).
    pub fn counts_launch(&mut self) -> bool {
        self.since = self.since.saturating_add(1);
        self.short < SHORT_INTERVALS
    }

    /// Something other than a launch binds the GPU (a synchronization, copy, event or query:
    /// where held launches are flushed): the interval since the last one ends.
    pub fn sync_point(&mut self) {
        if self.since == 0 {
            return;
        }
        self.short = if (self.since as usize) < GRAPH_MIN { self.short.saturating_add(1) } else { 0 };
        self.since = 0;
    }

    /// Holds `l`; whether [`HOLD_MAX`] are now held (the caller then flushes).
    pub fn hold(&mut self, l: Launch) -> bool {
        self.launches.push(l);
        self.launches.len() >= HOLD_MAX
    }

    pub fn is_empty(&self) -> bool {
        self.launches.is_empty()
    }

    /// Submits every held launch on `stream`, in order (its context current). `label` names
    /// the GPU in messages.
    pub fn flush(&mut self, stream: sys::CUstream, label: &dyn Fn() -> String) -> Result<(), String> {
        if self.launches.is_empty() {
            return Ok(());
        }
        let mut launches = std::mem::take(&mut self.launches);
        let done = self.submit(&mut launches, false, stream, label);
        launches.clear();
        // The vector's room is kept for the next sequence.
        self.launches = launches;
        done
    }

    /// Submits the held launches once [`HOLD_MAX`] are held (context current): a whole
    /// number of the program's period where its launches repeat one (at most [`PERIOD_MAX`]
    /// kernels), the rest held on. A loop of three kernels held 32 at a time made three
    /// different sequences (starting with each kernel in turn), each seen once and then made
    /// a graph; cut at 30, every sequence is the same one.
    pub fn flush_full(&mut self, stream: sys::CUstream, label: &dyn Fn() -> String) -> Result<(), String> {
        let k = aligned(&self.launches);
        let mut launches = std::mem::take(&mut self.launches);
        let done = self.submit(&mut launches[..k], true, stream, label);
        launches.drain(..k);
        self.launches = launches;
        done
    }

    /// Submits `launches` (context current): replayed as their sequence's graph, or run by
    /// the GPU's chain, or launched one by one. `full`: they were held until [`HOLD_MAX`]
    /// were (a program launching that many without synchronizing, which is when the chain is
    /// made).
    ///
    /// - A sequence with a graph of its own replays it.
    /// - Otherwise the chain runs it if it exists (or `full` makes it now), unless the
    ///   sequence was seen before and the chain's nodes launch other kernels or grids: then
    ///   the sequence gets a graph of its own, so that a program alternating between two
    ///   sequences does not set every node's kernel at every replay (H200: 2.0-2.5 µs per
    ///   kernel then, against 0.95 with only parameters set and 3.5-4.7 per `cuLaunchKernel`:
    ///   `launch_probe`).
    /// - A sequence seen once, with no chain, is launched kernel by kernel and remembered.
    ///
    /// Making a graph costs most the first times in a process (H200: 360-530 µs for the
    /// first chain of 32, 200-350 for the next, 65-140 once many were made), so one chain
    /// that serves every sequence saves making the others.
    fn submit(
        &mut self,
        launches: &mut [Launch],
        full: bool,
        stream: sys::CUstream,
        label: &dyn Fn() -> String,
    ) -> Result<(), String> {
        if launches.len() >= GRAPH_MIN {
            let shape: Vec<Shape> = launches.iter().map(Shape::of).collect();
            let seen = self.seen.contains(&shape);
            if let Some(g) = self.graphs.get_mut(&shape) {
                match g.run(launches, stream) {
                    Ok(()) => {
                        self.replays += 1;
                        return Ok(());
                    }
                    // Nothing of it ran (parameters are set before the launch): forget the
                    // graph and launch one by one, which reports the failing kernel.
                    Err(_) => {
                        self.graphs.remove(&shape);
                    }
                }
            } else if seen && self.chain.as_ref().is_some_and(|c| !c.fits(&shape)) {
                if let Ok(mut g) = Graph::build(launches, launches.len()) {
                    if g.run(launches, stream).is_ok() {
                        if self.graphs.len() >= GRAPHS_KEPT {
                            self.graphs.clear();
                        }
                        self.graphs.insert(shape, g);
                        self.built += 1;
                        self.replays += 1;
                        return Ok(());
                    }
                }
                // A sequence the driver will not make a graph of runs kernel by kernel.
                self.seen.remove(&shape);
            } else {
                if !seen {
                    if self.seen.len() >= SEEN_KEPT {
                        self.seen.clear();
                    }
                    self.seen.insert(shape);
                }
                if self.chain.is_none() && (full || seen) && !self.chain_failed {
                    match Graph::build(launches, HOLD_MAX) {
                        Ok(g) => {
                            self.chain = Some(g);
                            self.built += 1;
                        }
                        Err(_) => self.chain_failed = true,
                    }
                }
                if let Some(c) = &mut self.chain {
                    if c.run(launches, stream).is_ok() {
                        self.replays += 1;
                        return Ok(());
                    }
                    // The driver refused a node's kernel or disabling a node: nothing of this
                    // sequence ran; it runs kernel by kernel, and so do later ones.
                    self.chain = None;
                    self.chain_failed = true;
                }
            }
        }
        for l in launches.iter_mut() {
            launch(l, stream).map_err(|e| format!("launching {} on {}: {e}", self.names[l.name], label()))?;
        }
        Ok(())
    }
}

/// How many of `launches` to submit now: the most that are a whole number of their period,
/// the shortest `p <= PERIOD_MAX` with launch `i` shaped as launch `i - p` throughout; all of
/// them where they repeat no such period.
fn aligned(launches: &[Launch]) -> usize {
    let n = launches.len();
    let same = |i: usize, j: usize| Shape::of(&launches[i]) == Shape::of(&launches[j]);
    (1..=PERIOD_MAX.min(n / 2)).find(|&p| (p..n).all(|i| same(i, i - p))).map_or(n, |p| n - n % p)
}

/// `cuLaunchKernel` of `l` on `stream` (its context current).
/// [`launch`] through the driver's cooperative launch (`cuLaunchCooperativeKernel`): every
/// block resident at once, or the launch refused
/// (`CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE`).
pub(super) fn launch_cooperative(l: &mut Launch, stream: sys::CUstream) -> Result<(), cudarc::driver::DriverError> {
    let (f, grid, block, shared) = (l.f, l.grid, l.block, l.shared);
    l.params.with_pointers(|ptrs| {
        // SAFETY: one pointer per kernel parameter, each to bytes of the parameter's size.
        unsafe {
            sys::cuLaunchCooperativeKernel(
                f,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                shared,
                stream,
                ptrs.as_mut_ptr(),
            )
        }
        .result()
    })
}

pub(super) fn launch(l: &mut Launch, stream: sys::CUstream) -> Result<(), cudarc::driver::DriverError> {
    let (f, grid, block, shared) = (l.f, l.grid, l.block, l.shared);
    l.params.with_pointers(|ptrs| {
        // SAFETY: one pointer per kernel parameter, each to bytes of the parameter's size.
        unsafe {
            cudarc::driver::result::launch_kernel(
                f,
                (grid[0], grid[1], grid[2]),
                (block[0], block[1], block[2]),
                shared,
                stream,
                ptrs,
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// lu's loop (a launch, a synchronization) stops holding after a few such intervals; an
    /// interval long enough for a graph, counted while its launches go to the driver at once,
    /// starts holding again.
    #[test]
    fn launches_are_held_only_while_intervals_are_long_enough_for_graphs() {
        let mut h = Held::default();
        for i in 0..SHORT_INTERVALS {
            assert!(h.counts_launch(), "interval {i} is held");
            h.sync_point();
        }
        assert!(!h.counts_launch());
        h.sync_point();
        // Synchronizations with no launch between them end no interval.
        h.sync_point();
        h.sync_point();
        for _ in 0..GRAPH_MIN {
            assert!(!h.counts_launch());
        }
        h.sync_point();
        assert!(h.counts_launch(), "held again after a long interval");
        h.sync_point();
        // One short interval after a long one does not stop holding.
        assert!(h.counts_launch());
    }
}
