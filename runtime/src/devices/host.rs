//! The host's cores: compiled leaf entry points over boxes of instances, on the worker pool of
//! the calling thread (the main pool for host nodes, a simulated device's own pool for its
//! partitions).

use crate::args::{Args, SendPtr};
use crate::ctx::{EntryFn, GridBox, NodeCtx};
use crate::desc::NodeDesc;
use crate::{crash, fatal, fiber, scratch};
use rayon::prelude::*;
use std::sync::{Arc, Barrier};

/// Most instances a barrier can synchronize (a GPU's block limit).
pub const MAX_BARRIER_INSTANCES: i64 = 1024;

/// One run of a leaf's grid for one parent instance.
pub struct LeafJob<'a> {
    pub node: &'a NodeDesc,
    pub entry: EntryFn,
    pub args: &'a Args<'a>,
    pub parent: SendPtr<NodeCtx>,
    pub grid: [i64; 3],
    /// The instances to run: the whole grid, or one device's partition of it.
    pub bx: GridBox,
    /// Output records, one per instance (null when the node has no outputs).
    pub outs: SendPtr<u8>,
    /// The instances use `__hpvm__barrier`.
    pub barrier: bool,
    /// An allocation node: run on the calling thread (its memory is scoped to it).
    pub allocation: bool,
}

/// Runs the instances of `job.bx` (of the grid `job.grid`); returns when all have finished.
pub fn run_leaf(job: &LeafJob<'_>) {
    let (grid, args, bx) = (job.grid, job.args, job.bx);
    let total = bx.len();
    let (f, parent, outs) = (job.entry, job.parent, job.outs);
    let call = |args: &[u8], bx: &GridBox| {
        // A crash in the leaf's code is reported naming the node (`crash`).
        let _running = crash::Running::enter(job.node);
        // SAFETY: the entry point reads `args` (laid out for this node), the parent chain
        // (alive for the call) and writes only its instances' output records.
        unsafe { f(args.as_ptr(), parent.get(), bx, outs.get()) }
    };
    let lins = || bx.linear_indices();
    if job.allocation {
        for lin in lins() {
            call(&args.for_instance(lin), &GridBox::single(grid, lin));
        }
    } else if job.barrier && total > 1 {
        if total > MAX_BARRIER_INSTANCES {
            fatal(&format!(
                    "node {} ({}) uses __hpvm__barrier with {total} instances per parent instance; at most {MAX_BARRIER_INSTANCES} are supported",
                    job.node.shown(), job.node.loc
                ));
        }
        let lins: Vec<i64> = lins().collect();
        let instance = |i: usize| call(&args.for_instance(lins[i]), &GridBox::single(grid, lins[i]));
        if fiber::supported() {
            fiber::run(total as usize, &instance);
        } else {
            run_on_threads(total as usize, &instance, &job.node.name);
        }
    } else if args.patches.is_empty() {
        // Enough boxes to balance the pool, each a contiguous part of the grid.
        let boxes = bx.split_box(rayon::current_num_threads() * 4);
        if boxes.len() == 1 {
            call(&args.base, &boxes[0]);
        } else {
            boxes.par_iter().for_each(|b| call(&args.base, b));
        }
    } else {
        let lins: Vec<i64> = lins().collect();
        lins.into_par_iter().for_each(|lin| call(&args.for_instance(lin), &GridBox::single(grid, lin)));
    }
}

/// Barriers without fibers: one thread per instance, joined by a `std::sync::Barrier`.
fn run_on_threads(n: usize, task: &(dyn Fn(usize) + Sync), name: &str) {
    let barrier = Arc::new(Barrier::new(n));
    std::thread::scope(|s| {
        for lin in 1..n {
            let barrier = barrier.clone();
            std::thread::Builder::new()
                .stack_size(1 << 20)
                .spawn_scoped(s, move || scratch::with_barrier(barrier, || task(lin)))
                .unwrap_or_else(|e| fatal(&format!("node {name}: cannot start an instance thread: {e}")));
        }
        scratch::with_barrier(barrier.clone(), || task(0));
    });
}
