//! Running a node's GPU kernel: its arguments translated to device addresses (making the
//! device copies current), allocation nodes measured for shared memory, the launch shaped,
//! outputs copied back. Whenever something would make the kernel's result differ from the
//! CPU's (untracked memory, per-instance arguments that differ, a block too large), the
//! kernel is not used and the node runs on the CPU.

use crate::ctx::{GridBox, NodeCtx};
use crate::desc::{KernelDesc, KernelKind, NodeDesc, ScalarKind};
use crate::devices::cuda::Cuda;
use crate::launch::engine::{int_param, read_u64, Args, Engine, SendPtr};
use crate::{fatal, scratch};
use std::ffi::CStr;
use std::sync::Mutex;

/// One kernel job at a time: the coherence of a buffer is decided and used under it.
static GPU_LOCK: Mutex<()> = Mutex::new(());

/// Most threads in a block.
const MAX_BLOCK: i64 = 1024;

/// The block shape for a grid-shaped kernel of `dims` dimensions.
pub(crate) fn block_shape(dims: u32) -> [i64; 3] {
    match dims {
        0 | 1 => [256, 1, 1],
        2 => [32, 8, 1],
        _ => [8, 8, 4],
    }
}

impl Engine<'_> {
    /// Runs node `n` as its kernel; false when it must run on the CPU instead.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run_kernel(
        &self,
        n: u32,
        kernel: &KernelDesc,
        gpu: &Cuda,
        ptx: &'static CStr,
        args: &Args,
        parent: SendPtr<NodeCtx>,
        grid: [i64; 3],
        outs: SendPtr<u8>,
    ) -> bool {
        let _one_at_a_time = GPU_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let node = &self.module.program.nodes[n as usize];
        let total: i64 = grid.iter().product();
        if total == 0 {
            return true;
        }
        // SAFETY: the parent context outlives this call (it is the caller's).
        let (pid, pdim) = unsafe { parent.get().as_ref() }.map_or(([0; 3], [1; 3]), |p| (p.id, p.dim));
        // Instances of the node that get different arguments cannot share one launch.
        let Some(base) = uniform_args(args, total) else { return false };
        let result = match &kernel.kind {
            KernelKind::Blocks { leaf, alloc, shared_params } => {
                let leaf_desc = &self.module.program.nodes[*leaf as usize];
                let base = &base;
                // The allocation node's sizes, as offsets into shared memory.
                let (alloc_records, shared) = match alloc {
                    Some(a) => {
                        let a_grid = self.grid(*a, Some((n, base)));
                        let a_args =
                            self.child_args(n, *a, base, &|_| unreachable!("allocation nodes have no incoming edges"));
                        let a_node = &self.module.program.nodes[*a as usize];
                        let mut records = vec![0u8; a_node.outputs_size()];
                        let ptr = SendPtr(if records.is_empty() { std::ptr::null_mut() } else { records.as_mut_ptr() });
                        let crate::desc::KindDesc::Leaf { entry, .. } = a_node.kind else { return false };
                        let f = self.module.entries[entry as usize];
                        let ((), bytes) = scratch::measure(|| {
                            // SAFETY: the allocation node's entry over its single instance.
                            unsafe { f(a_args.base.as_ptr(), parent.get(), &GridBox::single(a_grid, 0), ptr.get()) }
                        });
                        (records, bytes)
                    }
                    None => (Vec::new(), 0),
                };
                let leaf_args = self.child_args(n, *leaf, base, &|_| (&alloc_records[..], 1));
                let block = self.grid(*leaf, Some((n, base)));
                if block.iter().product::<i64>() > MAX_BLOCK || !leaf_args.patches.is_empty() {
                    return false;
                }
                self.launch(
                    gpu,
                    ptx,
                    kernel,
                    leaf_desc,
                    &leaf_args.base,
                    shared_params,
                    grid,
                    block,
                    [grid, pid, pdim],
                    shared,
                    None,
                )
            }
            KernelKind::Grid => {
                let block = block_shape(node.dims);
                let blocks = [0, 1, 2].map(|d| (grid[d] + block[d] - 1) / block[d]);
                if blocks[1] > 65535 || blocks[2] > 65535 || blocks[0] > i32::MAX as i64 {
                    return false;
                }
                let record = node.outputs_size();
                let out = (record > 0).then(|| (outs, total as usize * record));
                self.launch(gpu, ptx, kernel, node, &base, &[], blocks, block, [grid, pid, pdim], 0, out)
            }
        };
        match result {
            Ok(Some(ms)) => {
                self.module.stats[n as usize].kernel_ms.lock().unwrap_or_else(|e| e.into_inner()).push(ms);
                true
            }
            Ok(None) => false,
            Err(e) => fatal(&format!("node {} ({}) on the GPU: {e}", node.name, node.loc)),
        }
    }

    /// Builds the parameters and launches; returns the kernel's time in milliseconds, or
    /// `None` when the node must run on the CPU.
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        gpu: &Cuda,
        ptx: &'static CStr,
        kernel: &KernelDesc,
        leaf: &NodeDesc,
        args: &[u8],
        shared_params: &[u32],
        blocks: [i64; 3],
        block: [i64; 3],
        levels: [[i64; 3]; 3],
        shared: usize,
        outs: Option<(SendPtr<u8>, usize)>,
    ) -> Result<Option<f32>, String> {
        // Every buffer the kernel may touch must be tracked, or the GPU cannot have it.
        let pointers: Vec<(usize, u64, usize, bool)> = leaf
            .params
            .iter()
            .enumerate()
            .filter(|(i, p)| p.kind == ScalarKind::Pointer && !shared_params.contains(&(*i as u32)))
            .filter_map(|(i, p)| {
                let v = read_u64(args, p.offset as usize)?;
                let bytes = p.size_param.and_then(|s| int_param(leaf, args, s)).unwrap_or(0).max(0) as usize;
                Some((i, v, bytes, p.write || !p.read))
            })
            .collect();
        if pointers.iter().any(|&(_, v, bytes, _)| v != 0 && !crate::memory::is_tracked(v as usize, bytes)) {
            return Ok(None);
        }
        let mut params: Vec<Vec<u8>> = Vec::new();
        for (i, p) in leaf.params.iter().enumerate() {
            let bytes = &args[p.offset as usize..(p.offset + p.size) as usize];
            match pointers.iter().find(|x| x.0 == i) {
                Some(&(_, v, size, write)) if v != 0 => {
                    let d =
                        crate::memory::device_access(v as usize, size, write)?.ok_or("buffer untracked meanwhile")?;
                    params.push(d.to_le_bytes().to_vec());
                }
                _ => params.push(bytes.to_vec()),
            }
        }
        // Instance offset 0 (the whole grid), then the three levels' extents and ids.
        params.extend([0i64; 3].iter().map(|v| v.to_le_bytes().to_vec()));
        params.extend(levels.iter().flatten().map(|v| v.to_le_bytes().to_vec()));
        let device_outs = match outs {
            Some((_, bytes)) => Some(gpu.alloc(bytes)?),
            None => None,
        };
        params.push(device_outs.unwrap_or(0).to_le_bytes().to_vec());
        let mut run = || {
            gpu.launch(ptx, &kernel.name, blocks.map(|b| b as u32), block.map(|b| b as u32), shared as u32, &mut params)
        };
        // Benchmarks only: time the kernel as nvcc-side harnesses do, warm (3 unrecorded runs,
        // then `repeat` recorded ones). Kernels that update memory in place then compute
        // something else than the program asked: never set this outside a benchmark.
        let launched = match bench_repeat() {
            Some(repeat) => (|| {
                for _ in 0..3 {
                    run()?;
                }
                let times = (0..repeat).map(|_| run()).collect::<Result<Vec<f32>, String>>()?;
                let mut sorted = times.clone();
                sorted.sort_by(f32::total_cmp);
                Ok(sorted[sorted.len() / 2])
            })(),
            None => run(),
        };
        if let (Some(d), Some((host, bytes))) = (device_outs, outs) {
            if launched.is_ok() {
                // SAFETY: the caller's output records, `bytes` long.
                gpu.to_host(unsafe { std::slice::from_raw_parts_mut(host.get(), bytes) }, d)?;
            }
            gpu.free(d)?;
        }
        launched.map(Some)
    }
}

/// `HPVM_MGPU_BENCH_REPEAT=N`: time every kernel over N warm runs (benchmarks only).
fn bench_repeat() -> Option<usize> {
    static REPEAT: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *REPEAT.get_or_init(|| std::env::var("HPVM_MGPU_BENCH_REPEAT").ok()?.parse().ok().filter(|&n| n > 0))
}

/// The argument buffer shared by all instances, if their one-to-one inputs all agree.
pub(crate) fn uniform_args(args: &Args, total: i64) -> Option<Vec<u8>> {
    if args.patches.is_empty() {
        return Some(args.base.clone());
    }
    let first = args.for_instance(0).into_owned();
    (1..total).all(|i| *args.for_instance(i) == first[..]).then_some(first)
}
