//! Running a graph on the CPU: internal nodes are interpreted from the description, leaves
//! run their compiled entry points over boxes of instances on the thread pool.
//!
//! Semantics (HPVM's, made precise where HPVM leaves a choice):
//! - the instances of a node are independent and run in parallel, except that the instances
//!   of a leaf using `__hpvm__barrier` within one parent instance run concurrently, one
//!   thread each, so that the barrier can hold them all;
//! - the children of an internal node instance run in an order where every edge goes forward;
//! - a one-to-one edge gives instance `i` of its destination the output of instance `i` of
//!   its source; an all-to-all edge, and a `bindOut` from a grid, give the output of the
//!   source's last instance (linear order), which is the only one when the source is 0-D;
//! - an allocation node runs once per parent instance, on the parent instance's thread, and
//!   its memory lives until that parent instance's child graph has finished.

use crate::args::{int_param, read_u64, Args, SendPtr};
use crate::ctx::{unlinearize, GridBox, NodeCtx};
use crate::desc::{KindDesc, NodeDesc, ScalarKind};
use crate::devices::host::{run_leaf, LeafJob};
use crate::devices::{devices, Place};
use crate::module::Module;
use crate::partitioned::{self, Launches, Unit};
use crate::sink::Stopwatch;
use crate::{memory, scratch};
use rayon::prelude::*;

#[derive(Clone, Copy)]
pub struct Engine {
    pub module: &'static Module,
    /// The module's plan cache for partitioned launches.
    pub plans: &'static Launches,
    /// Whose memory the pointers in arguments address: the host's, or (inside a partition)
    /// a device's. Only the host engine dispatches launch units and keeps buffers coherent.
    pub place: Place,
    /// Launch units may return with their GPU work in flight (a CUDA program's launch).
    pub asynchronous: bool,
    /// Every tracked buffer is current on the host and held there alone for the rest of this
    /// run (a unit whose leaf keeps pointers in memory, [`crate::desc::NodeDesc::indirect`],
    /// made it so once): its leaves need not do it again, block after block.
    pub host_current: bool,
    /// A cooperative launch ([`crate::devices::as_cooperative_launch`]): every instance of an
    /// internal node runs at once, on a thread of its own, so that its blocks can wait for
    /// one another at the grid's barrier ([`grid_workspace`]).
    pub cooperative: bool,
}

/// The grid's barrier of the cooperative launch running on simulated devices or the host:
/// the address of a driver-style workspace (`{size, barrier}`, two words), which cooperative
/// groups' `this_grid()` reads from the environment registers 1 and 2 (`hpvm_rt_envreg`).
/// One cooperative launch runs at a time here ([`COOPERATIVE_RUN`]).
static GRID_WORKSPACE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Held while a cooperative launch's blocks run on the CPU.
static COOPERATIVE_RUN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `%envreg<n>` on the CPU: registers 1 and 2 hold the running cooperative launch's grid
/// workspace (its high and low words: CUDA's `load_env_reg64<1, 2>`), as the driver sets them
/// on a GPU; 0 elsewhere, as there outside a cooperative launch (`this_grid().is_valid()` is
/// then false).
#[no_mangle]
pub extern "C" fn hpvm_rt_envreg(n: u32) -> u32 {
    let ws = GRID_WORKSPACE.load(std::sync::atomic::Ordering::Acquire);
    match n {
        1 => (ws >> 32) as u32,
        2 => ws as u32,
        _ => 0,
    }
}

impl Engine {
    fn node(&self, n: u32) -> &'static NodeDesc {
        &self.module.program.nodes[n as usize]
    }

    /// Runs node `n` over `grid` with parent instance `parent`; instance `i`'s outputs go to
    /// `outs + i * outputs_size`.
    pub fn run(&self, n: u32, args: &Args, parent: *const NodeCtx, grid: [i64; 3], outs: SendPtr<u8>) {
        let start = Stopwatch::start();
        let node = self.node(n);
        let total: i64 = grid.iter().product();
        let parent = SendPtr(parent as *mut NodeCtx);
        if self.place == Place::Host {
            if let Some(shape) = &node.shape {
                let unit = Unit {
                    module: self.module,
                    plans: self.plans,
                    node: n,
                    shape,
                    parent,
                    grid,
                    outs,
                    asynchronous: self.asynchronous,
                };
                // The box's grid is the launch's, or the virtual grid a plan runs a grid-stride
                // loop over (`partitioned::LaunchPlan::virtual_grid`).
                let run_box = |place: Place, bx: GridBox, args: &Args| {
                    Engine { place, ..*self }.run_box(n, args, parent, bx.dim, bx, outs)
                };
                if partitioned::run_unit(&unit, args, &run_box) {
                    self.module.stats[n as usize].record(total as u64, start.nanos());
                    return;
                }
                let leaf = match shape {
                    crate::desc::KernelKind::Blocks { leaf, .. } => *leaf,
                    crate::desc::KernelKind::Grid => n,
                };
                if self.module.node(leaf).indirect.is_some() {
                    // `run_unit` made every buffer the host's for it.
                    let engine = Engine { host_current: true, ..*self };
                    engine.run_box(n, args, parent, grid, GridBox::whole(grid), outs);
                    self.module.stats[n as usize].record(total as u64, start.nanos());
                    return;
                }
            }
            if node.is_leaf() && devices().count() > 0 && !self.host_current {
                if node.indirect.is_some() {
                    // It may reach any buffer through the pointers it keeps in memory.
                    memory::host_access_all();
                } else {
                    // A device may hold the current copy of what this host leaf touches.
                    for p in node.params.iter().filter(|p| p.kind == ScalarKind::Pointer) {
                        let Some(ptr) = read_u64(&args.base, p.offset as usize) else { continue };
                        let bytes =
                            p.size_param.and_then(|i| int_param(node, &args.base, i)).unwrap_or(0).max(0) as usize;
                        memory::host_access(ptr as usize, bytes, p.write || !p.read);
                    }
                }
            }
        }
        self.run_box(n, args, parent, grid, GridBox::whole(grid), outs);
        self.module.stats[n as usize].record(total as u64, start.nanos());
    }

    /// Runs the instances `bx` of node `n`'s grid `grid` where this engine is (no dispatch to
    /// devices): a leaf's entry point, or an internal node's child graphs.
    pub fn run_box(
        &self,
        n: u32,
        args: &Args,
        parent: SendPtr<NodeCtx>,
        grid: [i64; 3],
        bx: GridBox,
        outs: SendPtr<u8>,
    ) {
        let node = self.node(n);
        let out_size = node.outputs_size();
        match &node.kind {
            KindDesc::Leaf { entry, barrier, allocation } => run_leaf(&LeafJob {
                node,
                entry: self.module.entries[*entry as usize],
                args,
                parent,
                grid,
                bx,
                outs,
                barrier: *barrier,
                allocation: *allocation,
            }),
            KindDesc::Internal { .. } => {
                let instance = |lin: i64| {
                    let ctx = NodeCtx { id: unlinearize(lin, grid), dim: grid, parent: parent.get() };
                    let slot = SendPtr(if out_size == 0 {
                        std::ptr::null_mut()
                    } else {
                        unsafe { outs.get().add(lin as usize * out_size) }
                    });
                    self.run_children(n, &args.for_instance(lin), &ctx, slot);
                };
                if self.cooperative && node.shape.is_some() {
                    // The grid of blocks of a cooperative launch (however few): its barrier
                    // needs a workspace, and every block at once.
                    run_together(bx.linear_indices().collect(), &instance, &node.name);
                } else if bx.len() == 1 {
                    instance(bx.linear_indices().next().expect("one instance"));
                } else if self.place == Place::Host && crate::ranks::spans_ranks() {
                    // Under ranks, the launch units inside run in the same order on every
                    // rank: one instance after the other.
                    bx.linear_indices().for_each(instance);
                } else {
                    let lins: Vec<i64> = bx.linear_indices().collect();
                    lins.into_par_iter().for_each(instance);
                }
            }
        }
    }

    /// Runs the child graph of one instance of internal node `n`; writes its outputs at `out`.
    fn run_children(&self, n: u32, args: &[u8], ctx: &NodeCtx, out: SendPtr<u8>) {
        let scope = scratch::Scope::default();
        // Output records of the children that have run, with their instance counts.
        let mut results: Vec<(u32, Vec<u8>, i64)> = Vec::new();
        for &c in &self.module.order[n as usize] {
            let grid = self.module.grid(c, Some((n, args)));
            let child_args = self.module.child_args(n, c, args, &|e| {
                let r = results.iter().find(|r| r.0 == e.src).expect("edges go forward in the child order");
                (&r.1[..], r.2)
            });
            let outs = self.run_child(c, &child_args, ctx, grid, &scope);
            drop(child_args);
            results.push((c, outs, grid.iter().product()));
        }
        self.module.bind_outputs(n, out, &|c| results.iter().find(|r| r.0 == c).map(|r| (&r.1[..], r.2)));
    }

    /// Runs child `c` over `grid` and returns its output records. Allocation nodes allocate
    /// into `scope`.
    pub fn run_child(&self, c: u32, args: &Args, ctx: &NodeCtx, grid: [i64; 3], scope: &scratch::Scope) -> Vec<u8> {
        let child = self.node(c);
        let total: i64 = grid.iter().product();
        let mut outs = vec![0u8; total.max(0) as usize * child.outputs_size()];
        let outs_ptr = SendPtr(if outs.is_empty() { std::ptr::null_mut() } else { outs.as_mut_ptr() });
        if matches!(child.kind, KindDesc::Leaf { allocation: true, .. }) {
            scope.enter(|| self.run(c, args, ctx, grid, outs_ptr));
        } else {
            self.run(c, args, ctx, grid, outs_ptr);
        }
        outs
    }
}

/// The instances `lins` of a cooperative launch's grid, each on a thread of its own and all at
/// once, with a fresh grid workspace for their barrier ([`GRID_WORKSPACE`]).
fn run_together(lins: Vec<i64>, instance: &(dyn Fn(i64) + Sync), name: &str) {
    let _one = COOPERATIVE_RUN.lock().unwrap_or_else(|e| e.into_inner());
    // {size, barrier}: the barrier counts arrivals from zero.
    let workspace: Box<[u32; 2]> = Box::new([8, 0]);
    let ws = workspace.as_ptr() as u64;
    GRID_WORKSPACE.store(ws, std::sync::atomic::Ordering::Release);
    std::thread::scope(|s| {
        for &lin in &lins {
            std::thread::Builder::new()
                .name(format!("hpvm-block-{lin}"))
                .spawn_scoped(s, move || instance(lin))
                .unwrap_or_else(|e| {
                    crate::fatal(&format!("node {name}: cannot start a cooperative block's thread: {e}"))
                });
        }
    });
    GRID_WORKSPACE.store(0, std::sync::atomic::Ordering::Release);
    drop(workspace);
}
