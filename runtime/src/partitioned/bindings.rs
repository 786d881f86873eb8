//! What a launch binds before any planning: the tracked buffers its pointers point into and
//! the leaf's pointer arguments within them; the plans that need no access maps (the host's,
//! or one device running the whole grid); and the pieces every plan is made of (device
//! arguments, the safe whole plan).
//!
//! Nothing is guessed: whenever the database does not prove a split safe for THIS launch,
//! the plan is one partition on device 0 that reads and may write every buffer whole
//! ([`unpartitioned`]), with the reason kept for the statistics.

use super::plan::{LaunchPlan, Outcome, PartPlan};
use crate::args::{int_param, read_u64};
use crate::ctx::GridBox;
use crate::desc::{KernelDesc, KernelKind, NodeDesc, ScalarKind};
use crate::devices::{in_place, Place};
use crate::memory::{AllocError, ByteRect, Table};
use crate::module::Module;
use dashdb::{ReadKind, WriteKind};

/// What a plan is computed from.
pub(crate) struct Launch<'a> {
    pub module: &'a Module,
    pub node: u32,
    pub shape: &'a KernelKind,
    /// The unit's argument buffer (host addresses).
    pub args: &'a [u8],
    pub parent: ([i64; 3], [i64; 3]),
    pub grid: [i64; 3],
    /// The devices in the order partitions take them (a permutation of `0..devices`).
    pub order: &'a [usize],
    /// Partitions per device of a split (`HPVM_MGPU_PARTITIONS`, or more where a device's
    /// memory holds less: see `partitioned::fit_memory`).
    pub per_device: usize,
}

/// One pointer argument of the unit's leaf that points into a tracked buffer.
pub(crate) struct BufArg {
    /// Index into the plan's buffers.
    pub buffer: usize,
    /// Byte offset of the pointer from the buffer's start.
    pub offset: u64,
    pub size: u64,
    pub param: u32,
}

/// What a launch's pointers bind, found before any planning: the buffers they point into,
/// and the leaf's pointer arguments within them.
pub(crate) struct Bindings {
    /// Start and id of each tracked buffer the unit's pointers point into.
    pub buffers: Vec<(u64, u64)>,
    /// (offset of the pointer in the unit's arguments, index into `buffers`).
    pub unit_ptrs: Vec<(usize, usize)>,
    pub leaf: u32,
    pub leaf_args: Vec<u8>,
    pub block: Option<[i64; 3]>,
    pub args: Vec<BufArg>,
    /// Why the launch must run whole, where a pointer of the leaf points to no memory of the
    /// process ([`host_mapped`]: a keys-only sort's `nullptr + offset`, an address the
    /// program made up): it is passed on as it is, as nvcc's build would pass it, and the
    /// maps cannot place what the leaf may do through it.
    pub opaque: Option<String>,
    /// A pointer of the leaf points into page-locked host memory the devices reach in place
    /// ([`in_place`]): the launch is submitted at once, never held, since the host may watch
    /// what it does there without synchronizing.
    pub in_place: bool,
    /// The pointers passed on as they are, and whether each reaches memory in place
    /// ([`LaunchPlan::passed_on`]).
    pub passed_on: Vec<(u64, bool)>,
}

/// A launch's plan where no access maps are needed: an untracked pointer (the host runs it),
/// or one device running the whole grid on memory the host never stores into (CUDA's device
/// memory, current on the device or written there first), where the maps would only say
/// which bytes to copy and there are none beyond what the whole buffers need. Otherwise the
/// bindings for [`plan_split`], which does the ISL work.
///
/// The one-device plan holds for any scalar arguments ([`LaunchPlan::scalar_free`]): a kernel
/// launched in a loop with a changing scalar (a time step, a column) plans once. Strict
/// checking still wants the maps' bounds. A launch on a program's stream takes it too: its
/// maps are asked only where another stream's work shares its buffers (`lanes`).
pub(crate) fn plan_direct(l: &Launch<'_>, table: &mut Table) -> Result<Outcome, Box<Bindings>> {
    let b = match bindings(l, table) {
        Ok(b) => b,
        Err(reason) => return Ok(Outcome::Host(reason)),
    };
    place_constants(l, &b, table);
    let whole_is_exact = l.order.len() == 1
        && l.per_device == 1
        && !super::settings::strict()
        && b.buffers.iter().all(|&(start, _)| table.get(start).is_some_and(|x| !x.host_stores));
    if !whole_is_exact {
        return Err(Box::new(b));
    }
    let program = &l.module.program;
    let leaf_desc = &program.nodes[b.leaf as usize];
    let mut outcome = unpartitioned(l, table, &b.buffers, &b.unit_ptrs, &b.args, leaf_desc, None);
    if let Outcome::Devices(plan) = &mut outcome {
        // A pointer passed on as it is (page-locked memory the host may write meanwhile, a
        // device heap's) may point at bytes the launch or the host writes: no read-only cache.
        if let Some(kernel) = program.nodes[l.node as usize].kernel.as_ref().filter(|_| b.opaque.is_none()) {
            plan.read_only_cache = read_only_cache_legal(kernel, &b.args, plan, table, l.module.ptx);
        }
        plan.scalar_free = true;
        plan.in_place = b.in_place;
        plan.passed_on = b.passed_on.clone();
        plan.pointer_slots = b.unit_ptrs.iter().map(|&(offset, _)| offset).collect();
    }
    Ok(outcome)
}

/// The integer parameters (by position) of `leaf` that its maps, their conditions, shapes
/// and block sizes name: the only scalars a plan of it depends on (the planner reads no
/// other: `split`'s values). Conservative: every identifier
/// in those texts that is a parameter's map name counts.
pub(crate) fn named_params(module: &Module, leaf: u32) -> Vec<u32> {
    let desc = &module.program.nodes[leaf as usize];
    let Some(dn) = module.analysis.as_ref().and_then(|db| db.node(&desc.name)) else { return Vec::new() };
    // Maps made for one launch's values (`special`) build every integer parameter in.
    if dn.specializable || super::respecialized::marked(module, dn) {
        return (0..dn.param_names.len() as u32)
            .filter(|&i| desc.params.get(i as usize).is_some_and(|p| p.kind == ScalarKind::Int))
            .collect();
    }
    let mut texts: Vec<&str> = Vec::new();
    texts.extend(dn.valid_when.as_deref());
    texts.extend(dn.bounds.iter().map(String::as_str));
    texts.extend(dn.grid.iter().map(String::as_str));
    texts.extend(dn.products.iter().flat_map(|p| p.factors.iter().map(String::as_str)));
    if let Some(b) = &dn.block {
        texts.extend(b.size.iter().map(String::as_str));
    }
    for a in &dn.args {
        texts.extend(a.params.iter().map(String::as_str));
        texts.extend(a.shape.iter().map(String::as_str));
        texts.extend(a.read_map.as_deref());
        texts.extend(a.write_map.as_deref());
        texts.extend(a.read_valid_when.as_deref());
        texts.extend(a.write_through.as_ref().map(|t| t.map.as_str()));
    }
    let names: std::collections::HashSet<&str> = texts.into_iter().flat_map(identifiers).collect();
    (0..dn.param_names.len() as u32)
        .filter(|&i| desc.params.get(i as usize).is_some_and(|p| p.kind == ScalarKind::Int))
        .filter(|&i| names.contains(dn.param_names[i as usize].as_str()))
        .collect()
}

/// The identifiers of a map, condition or extent text (every name it may use as a parameter).
pub(crate) fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| !w.is_empty())
}

/// What a plan of launch `l` depends on beyond its node, grid, parent and the unit's
/// pointers: the leaf's block, the leaf's pointers (bound from the unit's) and the values of
/// the leaf's parameters `named` ([`named_params`]). Launches that agree on all of it get
/// the same plan: scalars the maps never name (a time step used only as a value) do not
/// make a new one.
pub(crate) fn plan_inputs(l: &Launch<'_>, named: &[u32]) -> Vec<i64> {
    let (leaf, leaf_args, block) = leaf_view(l);
    let desc = &l.module.program.nodes[leaf as usize];
    let mut inputs = block.unwrap_or([0; 3]).to_vec();
    for p in desc.params.iter().filter(|p| p.kind == ScalarKind::Pointer) {
        inputs.push(read_u64(&leaf_args, p.offset as usize).unwrap_or(0) as i64);
    }
    for &i in named {
        // A named parameter that is not an integer: the planner says why it cannot split.
        inputs.push(int_param(desc, &leaf_args, i).unwrap_or(i64::MIN));
    }
    inputs
}

/// The unit's leaf as a launch sees it: the leaf, its arguments (allocation outputs zero:
/// only their sizes matter here) and, for a blocks unit, its block.
pub(crate) fn leaf_view(l: &Launch<'_>) -> (u32, Vec<u8>, Option<[i64; 3]>) {
    match l.shape {
        KernelKind::Blocks { leaf, alloc, .. } => {
            let program = &l.module.program;
            let zeros = alloc.map(|a| vec![0u8; program.nodes[a as usize].outputs_size()]).unwrap_or_default();
            let args = l.module.child_args(l.node, *leaf, l.args, &|_| (&zeros[..], 1));
            (*leaf, args.base.to_vec(), Some(l.module.grid(*leaf, Some((l.node, l.args)))))
        }
        KernelKind::Grid => (l.node, l.args.to_vec(), None),
    }
}

/// The buffers a launch's pointers bind, or why the host must run it (a pointer not tracked).
pub(crate) fn bindings(l: &Launch<'_>, table: &mut Table) -> Result<Bindings, String> {
    let program = &l.module.program;
    let unit = &program.nodes[l.node as usize];
    // The unit's pointers become device addresses: each must be in a tracked buffer.
    let mut buffers: Vec<(u64, u64)> = Vec::new();
    let mut unit_ptrs: Vec<(usize, usize)> = Vec::new();
    for p in unit.params.iter().filter(|p| p.kind == ScalarKind::Pointer) {
        let Some(v) = read_u64(l.args, p.offset as usize) else { continue };
        if v == 0 {
            continue;
        }
        // Untracked: bound by nothing here; the leaf's loop below says whether that is
        // harmless (its parameter is never accessed) or the host must run the launch.
        let Some(start) = table.containing(v, 0) else { continue };
        let id = table.get(start).expect("found").id;
        let b = buffers.iter().position(|x| x.0 == start).unwrap_or_else(|| {
            buffers.push((start, id));
            buffers.len() - 1
        });
        unit_ptrs.push((p.offset as usize, b));
    }
    let (leaf, leaf_args, block) = leaf_view(l);
    let shared: &[u32] = match l.shape {
        KernelKind::Blocks { shared_params, .. } => shared_params,
        KernelKind::Grid => &[],
    };
    let leaf_desc = &program.nodes[leaf as usize];
    // Parameters the analysis proves the leaf never reads or writes through (a keys-only
    // sort's values, which CUB passes as `nullptr + offset`): whatever they hold is passed on
    // unchanged and binds no buffer. The same proof lets a split copy nothing for them.
    let db_node = l.module.analysis.as_ref().and_then(|db| db.node(&leaf_desc.name)).filter(|dn| dn.partitionable);
    let never_accessed = |i: u32| {
        db_node.is_some_and(|dn| {
            dn.args.iter().any(|a| a.index == i && a.read == ReadKind::None && a.write == WriteKind::None)
        })
    };
    let mut args: Vec<BufArg> = Vec::new();
    let mut opaque = None;
    let mut in_place_args = false;
    let mut passed_on = Vec::new();
    for (i, p) in leaf_desc.params.iter().enumerate() {
        if p.kind != ScalarKind::Pointer || shared.contains(&(i as u32)) {
            continue;
        }
        let Some(v) = read_u64(&leaf_args, p.offset as usize) else { continue };
        if v == 0 {
            continue;
        }
        let Some(start) = table.containing(v, 0) else {
            if never_accessed(i as u32) {
                continue;
            }
            // Page-locked host memory the devices reach in place: passed on, as CUDA's
            // zero-copy, to a launch that runs whole and is submitted at once.
            if in_place::contains(v) {
                in_place_args = true;
                passed_on.push((v, true));
                opaque.get_or_insert_with(|| {
                    format!(
                        "`{}` points to page-locked host memory, which kernels read and write in place \
                         (CUDA's zero-copy): the launch runs whole",
                        p.name
                    )
                });
                continue;
            }
            // GPU memory of a kernel's device heap, read back by the program: passed on, to a
            // launch that runs whole on device 0, where kernels that allocate run (they
            // never split). The host could not read it.
            let devs = crate::devices::devices();
            if !devs.spans_ranks() && devs.gpus.first().is_some_and(|g| g.is_device_memory(v)) {
                passed_on.push((v, false));
                opaque.get_or_insert_with(|| {
                    format!(
                        "`{}` points to GPU memory a kernel allocated (its `malloc`): the launch runs whole",
                        p.name
                    )
                });
                continue;
            }
            // Host memory the program did not track: only the host can reach it.
            if host_mapped(v) {
                return Err(format!("`{}` points to memory the program did not track", p.name));
            }
            // No memory at all: a device faults on it as it would in nvcc's build, if the
            // leaf reads it; the host would fault alike, and copy every buffer first.
            passed_on.push((v, false));
            opaque.get_or_insert_with(|| {
                format!("`{}` ({v:#x}) points to no memory of the program: passed on as it is", p.name)
            });
            continue;
        };
        let Some(buffer) = buffers.iter().position(|x| x.0 == start) else {
            return Err(format!("`{}` does not come from the launch's own arguments", p.name));
        };
        let size = table.get(start).expect("found").size;
        args.push(BufArg { buffer, offset: v - start, size, param: i as u32 });
    }
    Ok(Bindings { buffers, unit_ptrs, leaf, leaf_args, block, args, opaque, in_place: in_place_args, passed_on })
}

/// Whether any page of this process is mapped at address `v`: `msync` fails with `ENOMEM`
/// exactly where nothing is. One system call, paid only for a pointer the table does not
/// hold, and once per plan (plans are cached by the pointers' values).
fn host_mapped(v: u64) -> bool {
    // SAFETY: sysconf reads a constant; msync with MS_ASYNC on one page changes nothing and
    // only asks whether the page is mapped.
    unsafe {
        let page = libc::sysconf(libc::_SC_PAGESIZE).max(1) as u64;
        let at = (v / page * page) as usize as *mut libc::c_void;
        libc::msync(at, page as usize, libc::MS_ASYNC) == 0
            || std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOMEM)
    }
}

/// Whether the kernel variant reading its `in`-only pointers through the read-only data
/// cache may run: no buffer one of them points into is written by the launch (through
/// another pointer, or an alias).
/// Those variants read the kernel's `bank` parameters from the GPU module's constant bank
/// instead: only where every partition's device copy of each is that very variable.
pub(crate) fn read_only_cache_legal(
    kernel: &KernelDesc,
    args: &[BufArg],
    plan: &LaunchPlan,
    table: &Table,
    ptx: Option<&std::ffi::CStr>,
) -> bool {
    let written = |b: usize| plan.parts.iter().any(|p| p.writes.iter().any(|(x, _)| *x == b));
    let in_bank = |param: u32, name: &str| {
        args.iter().filter(|a| a.param == param).all(|a| {
            let buf = table.get(plan.buffers[a.buffer].0);
            let ptx = ptx.filter(|_| a.offset == 0);
            buf.zip(ptx).is_some_and(|(buf, ptx)| plan.parts.iter().all(|p| buf.copy_in_bank(p.device, ptx, name)))
        })
    };
    !kernel.readonly.is_empty()
        && args.iter().filter(|a| kernel.readonly.contains(&a.param)).all(|a| !written(a.buffer))
        && kernel.bank.iter().all(|(param, name)| in_bank(*param, name))
}

/// A launch on GPUs of a kernel that may read `__constant__` variables through the constant
/// bank ([`KernelDesc::bank`]): their buffers' GPU copies are placed there, where no device
/// holds one yet.
fn place_constants(l: &Launch<'_>, b: &Bindings, table: &mut Table) {
    let (Some(kernel), Some(ptx)) = (&l.module.program.nodes[l.node as usize].kernel, l.module.ptx) else { return };
    if kernel.bank.is_empty() || !crate::devices::devices().on_gpus() {
        return;
    }
    for (param, name) in &kernel.bank {
        for a in b.args.iter().filter(|a| a.param == *param && a.offset == 0) {
            table.place_in_bank(b.buffers[a.buffer].0, ptx, name);
        }
    }
}

/// The message for a failed device allocation: the device's words, then which of the node's
/// parameters point into that buffer, so the user can tell which array did not fit.
pub(crate) fn allocation_failed(l: &Launch<'_>, unit: &NodeDesc, table: &Table, e: &AllocError) -> String {
    let names: Vec<String> = unit
        .params
        .iter()
        .filter(|p| p.kind == ScalarKind::Pointer)
        .filter(|p| read_u64(l.args, p.offset as usize).is_some_and(|v| table.containing(v, 0) == Some(e.start)))
        .map(|p| format!("`{}`", p.name))
        .collect();
    let node = if unit.display.is_empty() { &unit.name } else { &unit.display };
    match names.is_empty() {
        true => format!("{} (launching node `{node}`, {})", e.message, unit.loc),
        false => format!("{} ({} of node `{node}`, {})", e.message, names.join(", "), unit.loc),
    }
}

/// The unit's arguments with every tracked pointer moved to device `k`'s allocation.
pub(crate) fn device_args(
    args: &[u8],
    ptrs: &[(usize, usize)],
    buffers: &[(u64, u64)],
    k: usize,
    table: &mut Table,
) -> Vec<u8> {
    let mut out = args.to_vec();
    for &(off, b) in ptrs {
        let v = read_u64(args, off).expect("read when planning");
        let buf = table.get_mut(buffers[b].0).expect("tracked");
        let base = buf.addr(Place::Device(k)).unwrap_or_else(|e| crate::fatal(&e));
        out[off..off + 8].copy_from_slice(&(base + (v - buffers[b].0)).to_le_bytes());
    }
    out
}

/// The safe plan: one partition on device 0, reading every buffer whole and (unless the
/// database proves a buffer only read) maybe writing it whole; `reason` says why the launch
/// is not split, if it could have been.
pub(crate) fn unpartitioned(
    l: &Launch<'_>,
    table: &mut Table,
    buffers: &[(u64, u64)],
    ptrs: &[(usize, usize)],
    args: &[BufArg],
    leaf: &NodeDesc,
    reason: Option<String>,
) -> Outcome {
    let db_node = l.module.analysis.as_ref().and_then(|db| db.node(&leaf.name));
    let mut reads = Vec::new();
    let mut writes = Vec::new();
    for (b, &(start, _)) in buffers.iter().enumerate() {
        let size = table.get(start).expect("tracked").size;
        let whole = ByteRect::run(0, size);
        reads.push((b, whole));
        let only_read = db_node.is_some_and(|n| {
            let mine: Vec<&BufArg> = args.iter().filter(|a| a.buffer == b).collect();
            !mine.is_empty() && mine.iter().all(|a| n.arg(a.param).is_some_and(|x| x.write == WriteKind::None))
        });
        if !only_read {
            writes.push((b, whole));
        }
    }
    let t = std::time::Instant::now();
    let needs: Vec<(u64, usize)> = ptrs.iter().map(|&(_, b)| (buffers[b].0, 0)).collect();
    let unit = l.module.node(l.node);
    table.allocate(&needs).unwrap_or_else(|e| crate::fatal(&allocation_failed(l, unit, table, &e)));
    let args = device_args(l.args, ptrs, buffers, 0, table);
    let part = PartPlan { device: 0, bx: GridBox::whole(l.grid), args, reads, writes };
    let mut plan = LaunchPlan::new(buffers.to_vec(), vec![part], reason);
    plan.alloc_nanos = t.elapsed().as_nanos() as u64;
    Outcome::Devices(plan)
}
