//! Devices: where leaf nodes run. The engine interprets the graph on the host and hands each
//! leaf grid to a device.
//!
//! The CPU device runs compiled entry points on the worker pool. `HPVM_MGPU_DEVICES` chooses
//! the devices (`cpu`, the default); later devices (CUDA GPUs, several simulated CPU devices
//! for partitioned runs) implement the same trait.

use crate::ctx::{EntryFn, GridBox, NodeCtx};
use crate::desc::NodeDesc;
use crate::exec::{Args, SendPtr};
use crate::{fatal, fiber, pool, scratch};
use rayon::prelude::*;
use std::sync::{Arc, Barrier, OnceLock};

/// Most instances a barrier can synchronize (a GPU's block limit).
pub const MAX_BARRIER_INSTANCES: i64 = 1024;

/// One run of a leaf's grid for one parent instance.
pub struct LeafJob<'a> {
    pub node: &'a NodeDesc,
    pub entry: EntryFn,
    pub args: &'a Args<'a>,
    pub parent: SendPtr<NodeCtx>,
    pub grid: [i64; 3],
    /// Output records, one per instance (null when the node has no outputs).
    pub outs: SendPtr<u8>,
    /// The instances use `__hpvm__barrier`.
    pub barrier: bool,
    /// An allocation node: run on the calling thread (its memory is scoped to it).
    pub allocation: bool,
}

pub trait Device: Send + Sync {
    fn name(&self) -> &str;
    /// Runs every instance of `job.grid`; returns when all have finished.
    fn run_leaf(&self, job: &LeafJob<'_>);
}

/// The host's cores, through the worker pool.
pub struct CpuDevice {
    name: String,
}

impl CpuDevice {
    pub fn new(index: usize) -> CpuDevice {
        CpuDevice { name: format!("cpu{index}") }
    }
}

impl Device for CpuDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn run_leaf(&self, job: &LeafJob<'_>) {
        let (grid, args) = (job.grid, job.args);
        let total: i64 = grid.iter().product();
        let (f, parent, outs) = (job.entry, job.parent, job.outs);
        let call = |args: &[u8], bx: &GridBox| {
            // SAFETY: the entry point reads `args` (laid out for this node), the parent chain
            // (alive for the call) and writes only its instances' output records.
            unsafe { f(args.as_ptr(), parent.get(), bx, outs.get()) }
        };
        if job.allocation {
            for lin in 0..total {
                call(&args.for_instance(lin), &GridBox::single(grid, lin));
            }
        } else if job.barrier && total > 1 {
            if total > MAX_BARRIER_INSTANCES {
                fatal(&format!(
                    "node {} ({}) uses __hpvm__barrier with {total} instances per parent instance; at most {MAX_BARRIER_INSTANCES} are supported",
                    job.node.name, job.node.loc
                ));
            }
            let instance = |lin: usize| call(&args.for_instance(lin as i64), &GridBox::single(grid, lin as i64));
            if fiber::supported() {
                fiber::run(total as usize, &instance);
            } else {
                run_on_threads(total as usize, &instance, &job.node.name);
            }
        } else if args.patches.is_empty() {
            // Enough boxes to balance the pool, each a contiguous part of the grid.
            let boxes = GridBox::split(grid, pool::pool().current_num_threads() * 4);
            if boxes.len() == 1 {
                call(&args.base, &boxes[0]);
            } else {
                boxes.par_iter().for_each(|b| call(&args.base, b));
            }
        } else {
            (0..total).into_par_iter().for_each(|lin| call(&args.for_instance(lin), &GridBox::single(grid, lin)));
        }
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

/// The devices of this run, from `HPVM_MGPU_DEVICES`.
pub fn devices() -> &'static [Box<dyn Device>] {
    static DEVICES: OnceLock<Vec<Box<dyn Device>>> = OnceLock::new();
    DEVICES.get_or_init(|| {
        let choice = std::env::var("HPVM_MGPU_DEVICES").unwrap_or_else(|_| "cpu".into());
        match parse_devices(&choice) {
            Ok(d) => d,
            Err(e) => fatal(&format!("HPVM_MGPU_DEVICES={choice}: {e}")),
        }
    })
}

fn parse_devices(choice: &str) -> Result<Vec<Box<dyn Device>>, String> {
    match choice.trim() {
        "" | "cpu" | "cpu:1" => Ok(vec![Box::new(CpuDevice::new(0))]),
        other => Err(format!("unsupported device choice `{other}`: this runtime has the CPU device only (`cpu`)")),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn device_choices() {
        assert_eq!(super::parse_devices("cpu").unwrap()[0].name(), "cpu0");
        assert!(super::parse_devices("tpu").is_err_and(|e| e.contains("unsupported")));
    }
}
