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

use crate::ctx::{unlinearize, GridBox, NodeCtx};
use crate::desc::{EdgeDesc, KindDesc, NodeDesc, ScalarKind};
use crate::devices::host::{run_leaf, LeafJob};
use crate::devices::Place;
use crate::module::Module;
use crate::{fatal, scratch};
use rayon::prelude::*;
use std::time::Instant;

/// A raw pointer that may cross threads: the engine hands disjoint parts of one buffer to
/// different instances.
#[derive(Clone, Copy)]
pub struct SendPtr<T>(pub *mut T);
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    /// The pointer. (A method, so closures capture the whole `SendPtr`, not its raw field.)
    pub fn get(self) -> *mut T {
        self.0
    }
}

/// The arguments of a node's instances: one buffer shared by all, plus, for inputs fed by
/// one-to-one edges, the per-instance values to patch in.
pub struct Args<'a> {
    pub base: Vec<u8>,
    pub patches: Vec<Patch<'a>>,
}

/// Input bytes `dst_offset..+size` of instance `i` come from `src[i * stride + src_offset..]`.
pub struct Patch<'a> {
    pub dst_offset: usize,
    pub size: usize,
    pub src: &'a [u8],
    pub src_offset: usize,
    pub stride: usize,
}

impl Args<'_> {
    pub fn uniform(base: Vec<u8>) -> Args<'static> {
        Args { base, patches: Vec::new() }
    }

    pub fn for_instance(&self, lin: i64) -> std::borrow::Cow<'_, [u8]> {
        if self.patches.is_empty() {
            return std::borrow::Cow::Borrowed(&self.base);
        }
        let mut buf = self.base.clone();
        for p in &self.patches {
            let from = lin as usize * p.stride + p.src_offset;
            buf[p.dst_offset..p.dst_offset + p.size].copy_from_slice(&p.src[from..from + p.size]);
        }
        std::borrow::Cow::Owned(buf)
    }
}

/// The pointer-sized value at `offset` of an argument buffer.
pub fn read_u64(buf: &[u8], offset: usize) -> Option<u64> {
    Some(u64::from_le_bytes(buf.get(offset..offset + 8)?.try_into().ok()?))
}

/// Reads integer parameter `i` of `node` from its argument buffer (sign-extended).
pub fn int_param(node: &NodeDesc, args: &[u8], i: u32) -> Option<i64> {
    let p = node.params.get(i as usize)?;
    if p.kind != ScalarKind::Int {
        return None;
    }
    let bytes = args.get(p.offset as usize..(p.offset + p.size) as usize)?;
    Some(match bytes.len() {
        1 => bytes[0] as i8 as i64,
        2 => i16::from_le_bytes(bytes.try_into().ok()?) as i64,
        4 => i32::from_le_bytes(bytes.try_into().ok()?) as i64,
        8 => i64::from_le_bytes(bytes.try_into().ok()?),
        _ => return None,
    })
}

pub struct Engine<'m> {
    pub module: &'m Module,
    /// Whose memory the pointers in arguments address: the host's, or (inside a partition)
    /// a device's. Only the host engine dispatches launch units and keeps buffers coherent.
    pub place: Place,
}

impl Engine<'_> {
    fn node(&self, n: u32) -> &NodeDesc {
        &self.module.program.nodes[n as usize]
    }

    /// The grid of child `c`, from its count expressions over its parent's arguments.
    pub fn grid(&self, c: u32, parent: Option<(u32, &[u8])>) -> [i64; 3] {
        let node = self.node(c);
        let mut dim = [1i64; 3];
        for (d, e) in node.counts.iter().enumerate() {
            let v = match parent {
                Some((p, args)) => e.eval(&|i| int_param(self.node(p), args, i)),
                None => e.eval(&|_| None),
            };
            match v {
                Some(v) if v >= 0 => dim[d] = v,
                Some(v) => fatal(&format!(
                    "node {} ({}): instance count {v} in dimension {d} is negative",
                    node.name, node.loc
                )),
                None => fatal(&format!(
                    "node {} ({}): cannot evaluate its instance count in dimension {d} (overflow or division by zero)",
                    node.name, node.loc
                )),
            }
        }
        dim
    }

    /// Runs node `n` over `grid` with parent instance `parent`; instance `i`'s outputs go to
    /// `outs + i * outputs_size`.
    pub fn run(&self, n: u32, args: &Args, parent: *const NodeCtx, grid: [i64; 3], outs: SendPtr<u8>) {
        let start = Instant::now();
        let node = self.node(n);
        let total: i64 = grid.iter().product();
        let parent = SendPtr(parent as *mut NodeCtx);
        if self.place == Place::Host {
            if let Some(shape) = &node.shape {
                if crate::partitioned::run_unit(self, n, shape, args, parent, grid, outs) {
                    self.module.stats[n as usize].record(total as u64, start.elapsed().as_nanos() as u64);
                    return;
                }
            }
            if node.is_leaf() && crate::devices::devices().count() > 0 {
                // A device may hold the current copy of what this host leaf touches.
                for p in node.params.iter().filter(|p| p.kind == ScalarKind::Pointer) {
                    let Some(ptr) = read_u64(&args.base, p.offset as usize) else { continue };
                    let bytes = p.size_param.and_then(|i| int_param(node, &args.base, i)).unwrap_or(0).max(0) as usize;
                    crate::memory::host_access(ptr as usize, bytes, p.write || !p.read);
                }
            }
        }
        self.run_box(n, args, parent, grid, GridBox::whole(grid), outs);
        self.module.stats[n as usize].record(total as u64, start.elapsed().as_nanos() as u64);
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
                if bx.len() == 1 {
                    instance(bx.linear_indices().next().expect("one instance"));
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
            let grid = self.grid(c, Some((n, args)));
            let child_args = self.child_args(n, c, args, &|e| {
                let r = results.iter().find(|r| r.0 == e.src).expect("edges go forward in the child order");
                (&r.1[..], r.2)
            });
            let outs = self.run_child(c, &child_args, ctx, grid, &scope);
            drop(child_args);
            results.push((c, outs, grid.iter().product()));
        }
        self.bind_outputs(n, out, &|c| results.iter().find(|r| r.0 == c).map(|r| (&r.1[..], r.2)));
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

    /// The arguments of child `c` of internal node `n`: bound inputs from the parent's
    /// arguments `args`, the others from the output records of edge sources (`source`).
    pub fn child_args<'r>(
        &self,
        n: u32,
        c: u32,
        args: &[u8],
        source: &dyn Fn(&EdgeDesc) -> (&'r [u8], i64),
    ) -> Args<'r> {
        let node = self.node(n);
        let child = self.node(c);
        let KindDesc::Internal { edges, bind_in, .. } = &node.kind else {
            unreachable!("only internal nodes have children")
        };
        let mut base = vec![0u8; child.args_size()];
        for b in bind_in.iter().filter(|b| b.child == c) {
            let (from, to) = (&node.params[b.parent_port as usize], &child.params[b.child_port as usize]);
            base[to.offset as usize..(to.offset + to.size) as usize]
                .copy_from_slice(&args[from.offset as usize..(from.offset + from.size) as usize]);
        }
        let mut patches = Vec::new();
        for e in edges.iter().filter(|e| e.dst == c) {
            let src = self.node(e.src);
            let (outs, total) = source(e);
            let (from, to) = (&src.outputs[e.src_port as usize], &child.params[e.dst_port as usize]);
            if e.one_to_one {
                patches.push(Patch {
                    dst_offset: to.offset as usize,
                    size: to.size as usize,
                    src: outs,
                    src_offset: from.offset as usize,
                    stride: src.outputs_size(),
                });
            } else if total > 0 {
                let at = (total as usize - 1) * src.outputs_size() + from.offset as usize;
                base[to.offset as usize..(to.offset + to.size) as usize]
                    .copy_from_slice(&outs[at..at + to.size as usize]);
            }
        }
        Args { base, patches }
    }

    /// Writes the outputs of internal node `n` (one instance) at `out` from its children's
    /// output records (`result` of a child: records and instance count, if it ran).
    pub fn bind_outputs<'r>(&self, n: u32, out: SendPtr<u8>, result: &dyn Fn(u32) -> Option<(&'r [u8], i64)>) {
        let node = self.node(n);
        let KindDesc::Internal { bind_out, .. } = &node.kind else { unreachable!("only internal nodes bind outputs") };
        if out.0.is_null() {
            return;
        }
        for b in bind_out {
            let child = self.node(b.child);
            let Some((outs, total)) = result(b.child) else { continue };
            if total == 0 {
                continue;
            }
            let (from, to) = (&child.outputs[b.child_port as usize], &node.outputs[b.parent_port as usize]);
            let at = (total as usize - 1) * child.outputs_size() + from.offset as usize;
            // SAFETY: `out` is one output record of `node`, `outputs_size()` bytes long.
            unsafe {
                std::ptr::copy_nonoverlapping(outs[at..].as_ptr(), out.0.add(to.offset as usize), to.size as usize)
            };
        }
    }
}
