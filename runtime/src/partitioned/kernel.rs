//! Launching a unit's GPU kernel over its partitions, each on its GPU: allocation nodes
//! measured for shared memory, the launch shaped, outputs copied back. Arguments arrive
//! with device addresses already (the partitioned launch made the device current on what the
//! partition reads, `crate::partitioned`). Whenever something would make the kernel's result
//! differ from the CPU's (per-instance arguments that differ, a block too large, a grid the
//! GPU cannot launch), [`prepare`] says no before anything moves, and the node runs on the host.

use crate::args::SendPtr;
use crate::ctx::{GridBox, NodeCtx};
use crate::desc::{KernelDesc, KernelKind, KindDesc};
use crate::devices::inflight::DeviceList;
use crate::devices::params::Params;
use crate::devices::{devices, Device};
use crate::module::Module;
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
    m: &Module,
    n: u32,
    kernel: &KernelDesc,
    base: &[u8],
    parent: SendPtr<NodeCtx>,
    grid: [i64; 3],
) -> Option<Prepared> {
    let node = m.node(n);
    match &kernel.kind {
        KernelKind::Blocks { leaf, alloc, .. } => {
            let (alloc_records, shared) = match alloc {
                Some(a) => {
                    let a_grid = m.grid(*a, Some((n, base)));
                    let a_args =
                        m.child_args(n, *a, base, &|_| unreachable!("allocation nodes have no incoming edges"));
                    let a_node = m.node(*a);
                    let mut records = vec![0u8; a_node.outputs_size()];
                    let ptr = SendPtr(if records.is_empty() { std::ptr::null_mut() } else { records.as_mut_ptr() });
                    let KindDesc::Leaf { entry, .. } = a_node.kind else { return None };
                    let f = m.entries[entry as usize];
                    let ((), bytes) = scratch::measure(|| {
                        // SAFETY: the allocation node's entry over its single instance.
                        unsafe { f(a_args.base.as_ptr(), parent.get(), &GridBox::single(a_grid, 0), ptr.get()) }
                    });
                    (records, bytes)
                }
                None => (Vec::new(), 0),
            };
            let block = m.grid(*leaf, Some((n, base)));
            if block.iter().product::<i64>() > MAX_BLOCK || m.fed_one_to_one(*leaf) {
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

impl Prepared {
    /// Blocks of the kernel `name` one GPU runs at once, as this launch shapes them; none
    /// where the driver cannot say.
    pub(crate) fn wave(&self, ptx: &'static CStr, name: &str) -> Option<u64> {
        let threads = self.block.iter().product::<i64>() as u32;
        devices().gpus.first()?.wave(ptx, name, threads, self.shared as u32).ok()
    }
}

/// What a dry-run device takes for a wave: the blocks an H100 (132 SMs of 2048 threads, at
/// most 32 blocks each) runs at once, registers and shared memory aside. Dry devices stand in
/// for GPUs, so the policy counts a launch's waves as a GPU's: with one block per wave (a
/// computing device's per thread), a first launch of 128 blocks counted as many waves, and
/// its split was planned ahead where a GPU would run it whole (waking the planning thread
/// cost PolyBench's atax a quarter of its runtime work on `dry:4`).
pub(crate) fn stand_in_wave(m: &Module, n: u32, kind: &KernelKind, base: &[u8]) -> u64 {
    const SMS: u64 = 132;
    let block = match kind {
        KernelKind::Blocks { leaf, .. } => m.grid(*leaf, Some((n, base))),
        KernelKind::Grid => block_shape(m.node(n).dims),
    };
    let threads = block.iter().map(|&t| t.max(1) as u64).product::<u64>();
    SMS * (2048 / threads).clamp(1, 32)
}

/// Blocks of a unit's grid: the grid itself for a blocks unit, a grid-shaped leaf's
/// instances cut into blocks of [`block_shape`].
pub(crate) fn blocks_of(kind: &KernelKind, dims: u32, grid: [i64; 3]) -> u64 {
    let blocks: [i64; 3] = match kind {
        KernelKind::Blocks { .. } => grid,
        KernelKind::Grid => {
            let b = block_shape(dims);
            std::array::from_fn(|d| (grid[d] + b[d] - 1) / b[d])
        }
    };
    blocks.iter().map(|&b| b.max(0) as u64).product()
}

/// One partition of a launch on a GPU: the device, the unit's arguments with that device's
/// addresses, and the part of the grid it runs.
pub(crate) struct GpuPart<'a> {
    pub device: usize,
    pub args: &'a [u8],
    pub bx: GridBox,
}

/// Mark slots of a device's stream during a launch (see [`crate::devices::cuda::Cuda::mark`]): the launch's start,
/// after its copies from the host, after its copies from other GPUs; its kernels' marks follow.
pub(crate) const MARK_START: usize = 0;
pub(crate) const MARK_HOST_COPIES: usize = 1;
pub(crate) const MARK_COPIES: usize = 2;
const MARK_KERNELS: usize = 3;

/// GPU-timeline times of one launch, in milliseconds: each kernel's, and per device the
/// spans from [`MARK_START`] to the copies' marks and to its last kernel.
pub(crate) struct GpuTimes {
    pub kernels: Vec<f32>,
    /// Per device used: (host copies, copies from other GPUs, kernels).
    pub spans: Vec<(f32, f32, f32)>,
}

/// What [`run`] enqueued: the GPUs it used and how many kernels on each (by GPU index), and
/// in benchmarks the kernels' warm times.
pub(crate) struct Launched {
    pub used: DeviceList,
    counts: DeviceList,
    bench: Option<Vec<f32>>,
    /// The kernels were enqueued between marks ([`crate::sink::gpu_timing`]).
    timed: bool,
    /// The launch as a replay would make it again, where it was asked for
    /// ([`super::replay`]).
    pub replay: Option<super::recorded::Launch>,
}

impl Launched {
    /// Whether its kernels were enqueued between marks, so that [`times`] has times to read.
    pub(crate) fn timed(&self) -> bool {
        self.timed || self.bench.is_some()
    }
}

/// Whether a launch of unit `n` must be waited for before it returns: its output records go
/// to the host, or a benchmark times its kernels.
pub(crate) fn must_wait(m: &Module, n: u32, kernel: &KernelDesc) -> bool {
    bench_repeat().is_some() || matches!(kernel.kind, KernelKind::Grid) && m.node(n).outputs_size() > 0
}

/// A unit's kernel as a launch runs it: unit `n` of `m`, its kernel `name` (the unit's, or its
/// read-only-cache variant) in `ptx`, checked launchable (`prepared`), under the parent
/// context `parent`, over `grid`, its output records going to `outs`.
#[derive(Clone, Copy)]
pub(crate) struct Target<'a> {
    pub m: &'a Module,
    pub n: u32,
    pub kernel: &'a KernelDesc,
    pub name: &'a str,
    pub prepared: &'a Prepared,
    pub ptx: &'static CStr,
    pub parent: SendPtr<NodeCtx>,
    pub grid: [i64; 3],
    pub outs: SendPtr<u8>,
}

/// How [`run`] enqueues a launch: `wait` for it (required when [`must_wait`]), time it for
/// the split policy (`sampled`), let a repeated sequence be captured as a CUDA graph
/// (`capture`), let it be held back (`may_hold`).
#[derive(Clone, Copy, Default)]
pub(crate) struct How {
    pub wait: bool,
    pub sampled: bool,
    pub capture: bool,
    pub may_hold: bool,
}

/// Enqueues the kernel of `target` for
/// each part on its GPU's stream (after whatever that stream holds: the part's copies), its
/// marks from slot `base[k]` on GPU `k`. With `wait` (required when [`must_wait`]), waits
/// for every part; output records come back to `outs`, each instance's from the GPU that
/// ran it. `after_part(i)` runs once part `i` of `parts` is enqueued (a launch that records
/// where each part ends on its stream). `may_hold`: an asynchronous launch on one GPU may be
/// held back ([`crate::devices::held`]).
pub(crate) fn run(
    after_part: &mut dyn FnMut(usize) -> Result<(), String>,
    target: &Target<'_>,
    parts: &[GpuPart<'_>],
    base: &[usize],
    how: How,
) -> Result<Launched, String> {
    let Target { m, n, kernel, name, prepared, ptx, parent, grid, outs } = *target;
    let How { wait, sampled, capture, may_hold } = how;
    let devs = devices();
    let node = m.node(n);
    // SAFETY: the parent context outlives this call (it is the caller's).
    let (pid, pdim) = unsafe { parent.get().as_ref() }.map_or(([0; 3], [1; 3]), |p| (p.id, p.dim));
    let record = match &kernel.kind {
        KernelKind::Blocks { .. } => 0,
        KernelKind::Grid => node.outputs_size(),
    };
    let leaf_desc = match &kernel.kind {
        KernelKind::Blocks { leaf, .. } => m.node(*leaf),
        KernelKind::Grid => node,
    };
    let total: i64 = grid.iter().product();
    let mut used: DeviceList = parts.iter().filter(|p| !p.bx.is_empty()).map(|p| p.device).collect();
    used.sort_unstable();
    used.dedup();
    // Each GPU's output records for the whole grid (only its parts' instances get written).
    let mut device_outs: smallvec::SmallVec<[Option<u64>; 8]> = smallvec::smallvec![None; devs.count()];
    if record > 0 {
        for &k in &used {
            device_outs[k] = Some(devs.gpu(k).alloc(total as usize * record)?);
        }
    }
    let mut launched_per_device = DeviceList::from_elem(0, devs.count());
    let single = used.len() == 1;
    let mut kernels = Vec::new();
    let timed = crate::sink::timing() || bench_repeat().is_some() || sampled;
    let mut launched = Ok(());
    let mut replay = None;
    for (i, p) in parts.iter().enumerate().filter(|(_, p)| !p.bx.is_empty()) {
        let gpu = devs.gpu(p.device);
        let leaf_args = match &kernel.kind {
            KernelKind::Blocks { leaf, .. } => {
                m.child_args(n, *leaf, p.args, &|_| (&prepared.alloc_records[..], 1)).base
            }
            KernelKind::Grid => crate::args::ArgBytes::from_slice(p.args),
        };
        let bx = p.bx;
        let extent: [i64; 3] = std::array::from_fn(|d| bx.hi[d] - bx.lo[d]);
        let blocks = match &kernel.kind {
            KernelKind::Blocks { .. } => extent,
            KernelKind::Grid => std::array::from_fn(|d| (extent[d] + prepared.block[d] - 1) / prepared.block[d]),
        };
        let mut params = Params::with_capacity(leaf_desc.params.len() + 13);
        for q in &leaf_desc.params {
            params.push(&leaf_args[q.offset as usize..(q.offset + q.size) as usize]);
        }
        // The kernel's own parameters (`contract::kernel`): the partition's offset (blocks, or
        // instances of a grid-shaped leaf), the full grid, the parent of the grid; then the
        // output records.
        let [l0, l1, l2] = bx.lo;
        let [g0, g1, g2] = grid;
        let outs = device_outs[p.device].unwrap_or(0) as i64;
        let words: [i64; contract::kernel::EXTRA] =
            [l0, l1, l2, g0, g1, g2, pid[0], pid[1], pid[2], pdim[0], pdim[1], pdim[2], outs];
        params.push_words(&words);
        let slot = base[p.device] + MARK_KERNELS + 2 * launched_per_device[p.device];
        if capture && parts.len() == 1 && !wait && !timed {
            replay = Some(super::recorded::Launch {
                device: p.device,
                name: name.to_string(),
                grid: blocks.map(|b| b as u32),
                block: prepared.block.map(|b| b as u32),
                shared: prepared.shared as u32,
                bytes: params.bytes().to_vec(),
                starts: params.starts().to_vec(),
            });
        }
        let mut launch = || {
            gpu.launch(
                ptx,
                name,
                blocks.map(|b| b as u32),
                prepared.block.map(|b| b as u32),
                prepared.shared as u32,
                &mut params,
                timed.then_some(slot),
                // Left in flight, untimed, on one GPU: it may wait on the host for the launches
                // after it. A split launch's parts go at once: each GPU's half would otherwise
                // wait for the next call that touches that GPU.
                !wait && !timed && single && may_hold,
            )
        };
        // Benchmarks only: time the kernel as nvcc-side harnesses do, warm (3 unrecorded runs,
        // then `repeat` recorded ones, each waited for). Kernels that update memory in place
        // then compute something else than the program asked: never set this outside a
        // benchmark.
        if let Some(repeat) = bench_repeat() {
            let timed = (|| {
                let mut once = || -> Result<f32, String> {
                    launch()?;
                    Device::synchronize(gpu)?;
                    gpu.between(slot, slot + 1)
                };
                for _ in 0..3 {
                    once()?;
                }
                let mut sorted = (0..repeat).map(|_| once()).collect::<Result<Vec<f32>, String>>()?;
                sorted.sort_by(f32::total_cmp);
                Ok(sorted[sorted.len() / 2])
            })();
            match timed {
                Ok(ms) => kernels.push(ms),
                Err(err) => {
                    launched = Err(err);
                    break;
                }
            }
        } else if let Err(err) = launch().and_then(|()| after_part(i)) {
            launched = Err(err);
            break;
        }
        launched_per_device[p.device] += 1;
    }
    if !wait {
        launched?;
        return Ok(Launched { used, counts: launched_per_device, bench: None, timed, replay });
    }
    // Every GPU is waited for, even after a failed launch, so nothing still runs on buffers
    // the caller may free.
    let mut waited = Ok(());
    for &k in &used {
        let w = Device::synchronize(devs.gpu(k));
        if waited.is_ok() {
            waited = w;
        }
    }
    launched?;
    waited?;
    if record > 0 {
        let bytes = total as usize * record;
        if let [k] = used[..] {
            // SAFETY: the caller's output records, one per instance of the grid.
            devs.gpu(k)
                .to_host(unsafe { std::slice::from_raw_parts_mut(outs.get(), bytes) }, device_outs[k].unwrap_or(0))?;
        } else {
            let mut staged = vec![0u8; bytes];
            for &k in &used {
                devs.gpu(k).to_host(&mut staged, device_outs[k].unwrap_or(0))?;
                for p in parts.iter().filter(|p| p.device == k) {
                    for lin in p.bx.linear_indices() {
                        let at = lin as usize * record;
                        // SAFETY: as above; `lin` is an instance of the grid.
                        unsafe { std::ptr::copy_nonoverlapping(staged.as_ptr().add(at), outs.get().add(at), record) };
                    }
                }
            }
        }
    }
    for (k, d) in device_outs.iter().enumerate() {
        if let Some(d) = d {
            devs.gpu(k).free(*d)?;
        }
    }
    let bench = bench_repeat().is_some().then_some(kernels);
    Ok(Launched { used, counts: launched_per_device, bench, timed, replay: None })
}

/// The GPU-timeline times of a launch [`run`] enqueued with marks from `base`, once its GPUs
/// have been waited for; `copies_marked`: the copy marks were recorded (else it copied
/// nothing, and its span starts at its first kernel).
pub(crate) fn times(l: &Launched, base: &[usize], copies_marked: bool) -> Result<GpuTimes, String> {
    let devs = devices();
    let mut kernels = l.bench.clone().unwrap_or_default();
    let mut spans = Vec::with_capacity(l.used.len());
    if !l.timed {
        return Ok(GpuTimes { kernels, spans });
    }
    for &k in &l.used {
        let (gpu, at) = (devs.gpu(k), base[k]);
        let count = l.counts[k];
        if l.bench.is_none() {
            for i in 0..count {
                kernels.push(gpu.between(at + MARK_KERNELS + 2 * i, at + MARK_KERNELS + 2 * i + 1)?);
            }
        }
        let last = at + MARK_KERNELS + 2 * count.max(1) - 1;
        spans.push(match (copies_marked, count) {
            (true, _) => (
                gpu.between(at + MARK_START, at + MARK_HOST_COPIES)?,
                gpu.between(at + MARK_HOST_COPIES, at + MARK_COPIES)?,
                gpu.between(at + MARK_COPIES, last)?,
            ),
            (false, 0) => (0.0, 0.0, 0.0),
            (false, _) => (0.0, 0.0, gpu.between(at + MARK_KERNELS, last)?),
        });
    }
    Ok(GpuTimes { kernels, spans })
}

/// Mark slots a launch of `parts` kernels on a GPU uses (see [`MARK_START`]).
pub(crate) fn slots_needed(parts: usize) -> usize {
    MARK_KERNELS + 2 * parts.max(1)
}

/// `HPVM_MGPU_BENCH_REPEAT=N`: time every kernel over N warm runs (benchmarks only).
pub(crate) fn bench_repeat() -> Option<usize> {
    static REPEAT: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *REPEAT.get_or_init(|| {
        let v = std::env::var("HPVM_MGPU_BENCH_REPEAT").ok()?;
        match v.trim() {
            "" | "0" => None,
            t => match t.parse::<usize>() {
                Ok(n) if n <= 1000 => Some(n),
                _ => crate::fatal(&format!("HPVM_MGPU_BENCH_REPEAT={v}: expected a number of runs from 0 to 1000")),
            },
        }
    })
}
