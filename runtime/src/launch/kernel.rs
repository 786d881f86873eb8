//! Launching a unit's GPU kernel over one partition (the whole grid on one GPU): allocation
//! nodes measured for shared memory, the launch shaped, outputs copied back. Arguments arrive
//! with device addresses already (the partitioned launch made the device current on what the
//! partition reads, `crate::partitioned`). Whenever something would make the kernel's result
//! differ from the CPU's (per-instance arguments that differ, a block too large, a grid the
//! GPU cannot launch), [`prepare`] says no before anything moves, and the node runs on the host.

use crate::ctx::{GridBox, NodeCtx};
use crate::desc::{KernelDesc, KernelKind, KindDesc};
use crate::devices::cuda::Cuda;
use crate::launch::engine::{Args, Engine, SendPtr};
use crate::scratch;
use std::ffi::CStr;

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

/// What a launch of a unit's kernel needs beyond its arguments, checked launchable.
pub(crate) struct Prepared {
    /// Threads per block.
    block: [i64; 3],
    /// Bytes of dynamic shared memory (the allocation node's).
    shared: usize,
    /// The allocation node's output record: offsets into shared memory for the leaf.
    alloc_records: Vec<u8>,
}

/// Whether unit `n` can run as its kernel with the argument buffer `base` (host addresses are
/// fine: only sizes and scalars are read), and how.
pub(crate) fn prepare(
    e: &Engine<'_>,
    n: u32,
    kernel: &KernelDesc,
    base: &[u8],
    parent: SendPtr<NodeCtx>,
    grid: [i64; 3],
) -> Option<Prepared> {
    let node = &e.module.program.nodes[n as usize];
    match &kernel.kind {
        KernelKind::Blocks { leaf, alloc, .. } => {
            let (alloc_records, shared) = match alloc {
                Some(a) => {
                    let a_grid = e.grid(*a, Some((n, base)));
                    let a_args =
                        e.child_args(n, *a, base, &|_| unreachable!("allocation nodes have no incoming edges"));
                    let a_node = &e.module.program.nodes[*a as usize];
                    let mut records = vec![0u8; a_node.outputs_size()];
                    let ptr = SendPtr(if records.is_empty() { std::ptr::null_mut() } else { records.as_mut_ptr() });
                    let KindDesc::Leaf { entry, .. } = a_node.kind else { return None };
                    let f = e.module.entries[entry as usize];
                    let ((), bytes) = scratch::measure(|| {
                        // SAFETY: the allocation node's entry over its single instance.
                        unsafe { f(a_args.base.as_ptr(), parent.get(), &GridBox::single(a_grid, 0), ptr.get()) }
                    });
                    (records, bytes)
                }
                None => (Vec::new(), 0),
            };
            let leaf_args = e.child_args(n, *leaf, base, &|_| (&alloc_records[..], 1));
            let block = e.grid(*leaf, Some((n, base)));
            if block.iter().product::<i64>() > MAX_BLOCK || !leaf_args.patches.is_empty() {
                return None;
            }
            if grid[1] > 65535 || grid[2] > 65535 || grid[0] > i32::MAX as i64 {
                return None;
            }
            Some(Prepared { block, shared, alloc_records })
        }
        KernelKind::Grid => {
            let block = block_shape(node.dims);
            let blocks = [0, 1, 2].map(|d| (grid[d] + block[d] - 1) / block[d]);
            if blocks[1] > 65535 || blocks[2] > 65535 || blocks[0] > i32::MAX as i64 {
                return None;
            }
            Some(Prepared { block, shared: 0, alloc_records: Vec::new() })
        }
    }
}

/// Runs the kernel `name` (the unit's, or its read-only-cache variant) of unit `n` over the
/// parts `boxes` of `grid` (blocks for a blocks launch, instances for a grid-shaped leaf),
/// one launch each, with the unit's arguments `args` (device addresses). Output records come
/// back to `outs` once all have run. Returns each launch's kernel time in milliseconds.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    e: &Engine<'_>,
    n: u32,
    kernel: &KernelDesc,
    name: &str,
    prepared: &Prepared,
    gpu: &Cuda,
    ptx: &'static CStr,
    args: &[u8],
    parent: SendPtr<NodeCtx>,
    grid: [i64; 3],
    boxes: &[GridBox],
    outs: SendPtr<u8>,
) -> Result<Vec<f32>, String> {
    let node = &e.module.program.nodes[n as usize];
    // SAFETY: the parent context outlives this call (it is the caller's).
    let (pid, pdim) = unsafe { parent.get().as_ref() }.map_or(([0; 3], [1; 3]), |p| (p.id, p.dim));
    let (leaf_args, record) = match &kernel.kind {
        KernelKind::Blocks { leaf, .. } => {
            (e.child_args(n, *leaf, args, &|_| (&prepared.alloc_records[..], 1)).base, 0)
        }
        KernelKind::Grid => (args.to_vec(), node.outputs_size()),
    };
    let leaf_desc = match &kernel.kind {
        KernelKind::Blocks { leaf, .. } => &e.module.program.nodes[*leaf as usize],
        KernelKind::Grid => node,
    };
    let total: i64 = grid.iter().product();
    let device_outs = if record > 0 { Some(gpu.alloc(total as usize * record)?) } else { None };
    let mut times = Vec::with_capacity(boxes.len());
    let mut launched = Ok(());
    for bx in boxes.iter().filter(|b| !b.is_empty()) {
        let extent: [i64; 3] = std::array::from_fn(|d| bx.hi[d] - bx.lo[d]);
        let blocks = match &kernel.kind {
            KernelKind::Blocks { .. } => extent,
            KernelKind::Grid => std::array::from_fn(|d| (extent[d] + prepared.block[d] - 1) / prepared.block[d]),
        };
        let mut params: Vec<Vec<u8>> = leaf_desc
            .params
            .iter()
            .map(|p| leaf_args[p.offset as usize..(p.offset + p.size) as usize].to_vec())
            .collect();
        // The partition's offset (blocks, or instances of a grid-shaped leaf), the full grid,
        // the parent of the grid; then the output records.
        for v in bx.lo.iter().chain(&grid).chain(&pid).chain(&pdim) {
            params.push(v.to_le_bytes().to_vec());
        }
        params.push(device_outs.unwrap_or(0).to_le_bytes().to_vec());
        let mut launch = || {
            gpu.launch(
                ptx,
                name,
                blocks.map(|b| b as u32),
                prepared.block.map(|b| b as u32),
                prepared.shared as u32,
                &mut params,
            )
        };
        // Benchmarks only: time the kernel as nvcc-side harnesses do, warm (3 unrecorded runs,
        // then `repeat` recorded ones). Kernels that update memory in place then compute
        // something else than the program asked: never set this outside a benchmark.
        let ms = match bench_repeat() {
            Some(repeat) => (|| {
                for _ in 0..3 {
                    launch()?;
                }
                let mut sorted = (0..repeat).map(|_| launch()).collect::<Result<Vec<f32>, String>>()?;
                sorted.sort_by(f32::total_cmp);
                Ok(sorted[sorted.len() / 2])
            })(),
            None => launch(),
        };
        match ms {
            Ok(ms) => times.push(ms),
            Err(err) => {
                launched = Err(err);
                break;
            }
        }
    }
    if let Some(d) = device_outs {
        if launched.is_ok() {
            let bytes = total as usize * record;
            // SAFETY: the caller's output records, one per instance of the grid.
            gpu.to_host(unsafe { std::slice::from_raw_parts_mut(outs.get(), bytes) }, d)?;
        }
        gpu.free(d)?;
    }
    launched.map(|()| times)
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
