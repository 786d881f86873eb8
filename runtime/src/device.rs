//! Devices: where leaf nodes run. The engine interprets the graph on the host and hands each
//! leaf grid to a device.
//!
//! The CPU device runs compiled entry points on the worker pool; the GPU ([`Cuda`]) runs the
//! nodes the compiler made kernels of. `HPVM_MGPU_DEVICES` chooses: unset, a GPU if there is
//! one; `cpu`, the CPU only; `cuda`, a GPU or an error.

use crate::ctx::{EntryFn, GridBox, NodeCtx};
use crate::cuda::Cuda;
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

/// The devices of this run: the CPU always (CPU nodes, and GPU nodes without a GPU), a GPU
/// when there is one and `HPVM_MGPU_DEVICES` allows it.
pub struct Devices {
    pub cpu: CpuDevice,
    pub gpu: Option<Cuda>,
    /// GPU nodes run on the CPU because no GPU was found (not because the user chose so).
    pub no_gpu_found: bool,
}

pub fn devices() -> &'static Devices {
    static DEVICES: OnceLock<Devices> = OnceLock::new();
    DEVICES.get_or_init(|| {
        let choice = std::env::var("HPVM_MGPU_DEVICES").unwrap_or_default();
        let choice = parse_choice(&choice).unwrap_or_else(|e| fatal(&format!("HPVM_MGPU_DEVICES={choice}: {e}")));
        let gpu = match choice {
            Choice::Cpu => None,
            Choice::Auto | Choice::Cuda => match Cuda::open() {
                Ok(g) => g,
                Err(e) if choice == Choice::Cuda => fatal(&format!("HPVM_MGPU_DEVICES=cuda: {e}")),
                Err(e) => {
                    eprintln!("hpvm-mgpu: the GPU is unusable ({e}); GPU nodes run on the CPU");
                    None
                }
            },
        };
        if choice == Choice::Cuda && gpu.is_none() {
            fatal("HPVM_MGPU_DEVICES=cuda but no CUDA GPU was found");
        }
        Devices { cpu: CpuDevice::new(0), no_gpu_found: gpu.is_none() && choice == Choice::Auto, gpu }
    })
}

/// The GPU, if this run uses one.
pub fn gpu() -> Option<&'static Cuda> {
    devices().gpu.as_ref()
}

/// Says once, when a program with GPU nodes first runs without a GPU, where they run.
pub fn notice_gpu_nodes_on_cpu() {
    static SAID: std::sync::Once = std::sync::Once::new();
    if devices().no_gpu_found {
        SAID.call_once(|| eprintln!("hpvm-mgpu: no GPU found; GPU nodes run on the CPU"));
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Choice {
    /// A GPU if there is one, else the CPU.
    Auto,
    Cpu,
    Cuda,
}

fn parse_choice(choice: &str) -> Result<Choice, String> {
    match choice.trim() {
        "" => Ok(Choice::Auto),
        "cpu" | "cpu:1" => Ok(Choice::Cpu),
        "cuda" => Ok(Choice::Cuda),
        other => Err(format!("unsupported device choice `{other}` (expected `cpu` or `cuda`)")),
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_choice, Choice};

    #[test]
    fn device_choices() {
        assert_eq!(parse_choice(""), Ok(Choice::Auto));
        assert_eq!(parse_choice("cpu"), Ok(Choice::Cpu));
        assert_eq!(parse_choice("cuda"), Ok(Choice::Cuda));
        assert!(parse_choice("tpu").is_err_and(|e| e.contains("unsupported")));
    }
}
