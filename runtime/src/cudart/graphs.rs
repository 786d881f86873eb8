//! CUDA graphs: stream capture (`cudaStreamBeginCapture` .. `cudaStreamEndCapture`), graphs
//! built node by node (`cudaGraphAddKernelNode`...), instantiation and launch.
//!
//! Work runs in program order (see the parent module), so a graph is its nodes in an order
//! that keeps every dependency, and launching it runs them in that order through the same
//! calls a program makes: `cudaLaunchKernel`, `cudaMemcpyAsync`, `cudaMemsetAsync`,
//! `cudaLaunchHostFunc`. A node owns what it needs after the call that made it returns: a
//! kernel node copies its arguments (their sizes are registered by the compiler for each
//! kernel, `hpvm_rt_cuda_register_params`), so a captured launch runs with the values it was
//! given even when the caller's variables have changed since.
//!
//! Capture follows CUDA's rules where a program can see them: work given to a capturing
//! stream is recorded, not run; an event recorded on it and waited for by another stream
//! joins that stream to the capture, which ends for all of them at `cudaStreamEndCapture` on
//! the stream that began it. The legacy default stream cannot capture.

use super::launch::Dim3;
use super::textures::{Array, Extent};
use super::{api, guard, put, ret, stream_ok, Error, SUCCESS};
use super::{INVALID_DEVICE_FUNCTION, INVALID_VALUE};
use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// `cudaErrorStreamCaptureUnsupported`: capture on the legacy stream.
pub(super) const CAPTURE_UNSUPPORTED: Error = 900;
/// `cudaErrorStreamCaptureUnmatched`: ending a capture on a stream that did not begin one.
const CAPTURE_UNMATCHED: Error = 903;
/// `cudaErrorIllegalState`: beginning a capture on a stream already capturing.
const ILLEGAL_STATE: Error = 401;

/// What a node does when its graph runs.
#[derive(Clone)]
enum Work {
    Kernel {
        func: usize,
        grid: Dim3,
        block: Dim3,
        shmem: usize,
        args: Vec<Vec<u8>>,
    },
    /// Rows of `width` bytes, `height` of them, at the given pitches.
    Copy {
        dst: usize,
        dst_pitch: usize,
        src: usize,
        src_pitch: usize,
        width: usize,
        height: usize,
        kind: c_int,
    },
    /// `height` rows of `width` elements of `element` bytes each set to `value`, `pitch`
    /// bytes apart.
    Set {
        dst: usize,
        pitch: usize,
        value: c_uint,
        element: c_uint,
        width: usize,
        height: usize,
    },
    Host {
        f: extern "C" fn(*mut c_void),
        data: usize,
    },
    Empty,
}

struct Node {
    graph: usize,
    work: Work,
    deps: Vec<usize>,
}

#[derive(Default)]
struct Graphs {
    /// Each graph's nodes, in the order they were added.
    graphs: HashMap<usize, Vec<usize>>,
    nodes: HashMap<usize, Node>,
    /// Each instantiated graph: its nodes and their work, in an order that keeps every
    /// dependency.
    execs: HashMap<usize, Vec<(usize, Work)>>,
    /// Capturing streams and the graph each records into.
    captures: HashMap<usize, usize>,
    /// The stream that began each graph's capture.
    origins: HashMap<usize, usize>,
    /// Events recorded during a capture, and its graph (a stream that waits for one joins).
    captured_events: HashMap<usize, usize>,
    /// Kernels' parameter sizes in bytes, by stub.
    params: HashMap<usize, Vec<usize>>,
    next: usize,
}

impl Graphs {
    /// A new opaque handle: distinct, non-null, and never a valid address of the program's.
    fn handle(&mut self) -> usize {
        self.next += 1;
        0x6_0000_0000_0000 + self.next * 16
    }

    fn add(&mut self, graph: usize, work: Work, deps: Vec<usize>) -> usize {
        let h = self.handle();
        self.nodes.insert(h, Node { graph, work, deps });
        self.graphs.entry(graph).or_default().push(h);
        h
    }

    /// The graph's work in an order that keeps its dependencies: insertion order, each node
    /// moved after those it depends on (dependencies added later may point forward).
    fn ordered(&self, graph: usize) -> Option<Vec<(usize, Work)>> {
        let nodes = self.graphs.get(&graph)?;
        let mut done: Vec<usize> = Vec::with_capacity(nodes.len());
        let mut left: Vec<usize> = nodes.clone();
        while !left.is_empty() {
            let ready = left.iter().position(|n| self.nodes[n].deps.iter().all(|d| done.contains(d)))?;
            done.push(left.remove(ready));
        }
        Some(done.into_iter().map(|n| (n, self.nodes[&n].work.clone())).collect())
    }
}

fn graphs() -> MutexGuard<'static, Graphs> {
    static GRAPHS: std::sync::OnceLock<Mutex<Graphs>> = std::sync::OnceLock::new();
    GRAPHS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner())
}

/// Registers the sizes of a kernel's parameters (the compiler's constructor calls it beside
/// `hpvm_rt_cuda_register`).
///
/// # Safety
/// `sizes` holds `count` sizes.
#[no_mangle]
pub unsafe extern "C" fn hpvm_rt_cuda_register_params(stub: *const c_void, count: i64, sizes: *const i64) {
    let sizes = std::slice::from_raw_parts(sizes, count.max(0) as usize);
    graphs().params.insert(stub as usize, sizes.iter().map(|&s| s as usize).collect());
}

/// How many streams are capturing: launches and copies, which ask [`capture_of`] each time,
/// take no lock while none is.
static CAPTURING: AtomicUsize = AtomicUsize::new(0);

/// Keeps [`CAPTURING`] equal to the number of capturing streams.
fn count_captures(g: &Graphs) {
    CAPTURING.store(g.captures.len(), Ordering::Release);
}

/// The graph `stream` records into, if it is capturing.
pub(super) fn capture_of(stream: *mut c_void) -> Option<usize> {
    if CAPTURING.load(Ordering::Acquire) == 0 {
        return None;
    }
    graphs().captures.get(&(stream as usize)).copied()
}

/// Records a launch into the graph `graph`, copying its arguments.
///
/// # Safety
/// `args` holds a pointer to each of the kernel's arguments.
pub(super) unsafe fn record_kernel(
    graph: usize,
    func: *const c_void,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shmem: usize,
) -> Error {
    let mut g = graphs();
    let Some(sizes) = g.params.get(&(func as usize)).cloned() else { return ret(INVALID_DEVICE_FUNCTION) };
    let args = copy_args(args, &sizes);
    let deps = g.graphs.get(&graph).and_then(|n| n.last().copied()).into_iter().collect();
    g.add(graph, Work::Kernel { func: func as usize, grid, block, shmem, args }, deps);
    SUCCESS
}

/// # Safety
/// `args` holds a pointer to each argument, of the sizes `sizes` gives.
unsafe fn copy_args(args: *mut *mut c_void, sizes: &[usize]) -> Vec<Vec<u8>> {
    sizes.iter().enumerate().map(|(i, &n)| std::slice::from_raw_parts(*args.add(i) as *const u8, n).to_vec()).collect()
}

/// Records a copy, memset or host function given to a capturing stream, after the last
/// node recorded.
fn record(graph: usize, work: Work) -> Error {
    let mut g = graphs();
    let deps = g.graphs.get(&graph).and_then(|n| n.last().copied()).into_iter().collect();
    g.add(graph, work, deps);
    SUCCESS
}

pub(super) fn record_copy(graph: usize, dst: *mut c_void, src: *const c_void, n: usize, kind: c_int) -> Error {
    let work =
        Work::Copy { dst: dst as usize, dst_pitch: n, src: src as usize, src_pitch: n, width: n, height: 1, kind };
    record(graph, work)
}

pub(super) fn record_set(graph: usize, dst: *mut c_void, value: c_int, n: usize) -> Error {
    let work = Work::Set { dst: dst as usize, pitch: n, value: value as c_uint, element: 1, width: n, height: 1 };
    record(graph, work)
}

pub(super) fn record_host(graph: usize, f: extern "C" fn(*mut c_void), data: *mut c_void) -> Error {
    record(graph, Work::Host { f, data: data as usize })
}

/// An event recorded on a capturing stream: a stream that waits for it joins the capture.
pub(super) fn record_event(graph: usize, event: *mut c_void) {
    graphs().captured_events.insert(event as usize, graph);
}

/// A stream waiting for `event`: joins its capture if it was recorded during one. Whether it
/// did.
pub(super) fn join(stream: *mut c_void, event: *mut c_void) -> bool {
    let mut g = graphs();
    match g.captured_events.get(&(event as usize)).copied() {
        Some(graph) if g.origins.contains_key(&graph) => {
            g.captures.insert(stream as usize, graph);
            count_captures(&g);
            true
        }
        _ => false,
    }
}

/// Runs `work` on `stream`, as the program would have.
fn run(work: &Work, stream: *mut c_void) -> Error {
    match work {
        Work::Kernel { func, grid, block, shmem, args } => {
            let mut pointers: Vec<*mut c_void> = args.iter().map(|a| a.as_ptr() as *mut c_void).collect();
            let xy = |d: &Dim3| u64::from(d.x) | u64::from(d.y) << 32;
            // SAFETY: the kernel's arguments, copied when the node was made, in a buffer per
            // argument that outlives the call (the launcher reads them before returning).
            unsafe {
                super::launch::cudaLaunchKernel(
                    *func as *const c_void,
                    xy(grid),
                    grid.z,
                    xy(block),
                    block.z,
                    pointers.as_mut_ptr(),
                    *shmem,
                    stream,
                )
            }
        }
        Work::Copy { dst, dst_pitch, src, src_pitch, width, height, kind } => {
            for row in 0..*height {
                let e = super::cudaMemcpyAsync(
                    (dst + row * dst_pitch) as *mut c_void,
                    (src + row * src_pitch) as *const c_void,
                    *width,
                    *kind,
                    stream,
                );
                if e != SUCCESS {
                    return e;
                }
            }
            SUCCESS
        }
        Work::Set { dst, pitch, value, element, width, height } => {
            let bytes = value.to_le_bytes();
            let row: Vec<u8> = (0..*width).flat_map(|_| bytes[..*element as usize].iter().copied()).collect();
            for r in 0..*height {
                let at = (dst + r * pitch) as *mut c_void;
                let e = if *element == 1 {
                    super::cudaMemsetAsync(at, *value as c_int, *width, stream)
                } else {
                    super::cudaMemcpyAsync(at, row.as_ptr() as *const c_void, row.len(), super::HOST_TO_DEVICE, stream)
                };
                if e != SUCCESS {
                    return e;
                }
            }
            SUCCESS
        }
        Work::Host { f, data } => super::cudaLaunchHostFunc(stream, Some(*f), *data as *mut c_void),
        Work::Empty => SUCCESS,
    }
}

/// `cudaStreamCaptureMode`: global, thread-local, relaxed (all alike here: one thread of
/// work, in program order).
#[no_mangle]
pub extern "C" fn cudaStreamBeginCapture(stream: *mut c_void, mode: c_int) -> Error {
    api("cudaStreamBeginCapture", || {
        if !(0..=2).contains(&mode) {
            return ret(INVALID_VALUE);
        }
        if !stream_ok(stream) {
            return ret(super::INVALID_RESOURCE_HANDLE);
        }
        if stream.is_null() || stream as usize == 1 {
            return ret(CAPTURE_UNSUPPORTED);
        }
        let mut g = graphs();
        if g.captures.contains_key(&(stream as usize)) {
            return ret(ILLEGAL_STATE);
        }
        let graph = g.handle();
        g.graphs.insert(graph, Vec::new());
        g.captures.insert(stream as usize, graph);
        g.origins.insert(graph, stream as usize);
        count_captures(&g);
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cudaStreamEndCapture(stream: *mut c_void, graph: *mut *mut c_void) -> Error {
    api("cudaStreamEndCapture", || {
        if graph.is_null() {
            return ret(INVALID_VALUE);
        }
        let mut g = graphs();
        let Some(&made) = g.captures.get(&(stream as usize)) else { return ret(CAPTURE_UNMATCHED) };
        if g.origins.get(&made) != Some(&(stream as usize)) {
            return ret(CAPTURE_UNMATCHED);
        }
        g.captures.retain(|_, v| *v != made);
        count_captures(&g);
        g.captured_events.retain(|_, v| *v != made);
        g.origins.remove(&made);
        put(graph, made as *mut c_void)
    })
}

/// `cudaStreamCaptureStatus`: none (0) or active (1).
#[no_mangle]
pub extern "C" fn cudaStreamIsCapturing(stream: *mut c_void, status: *mut c_int) -> Error {
    guard("cudaStreamIsCapturing", || {
        if !stream_ok(stream) {
            return ret(super::INVALID_RESOURCE_HANDLE);
        }
        put(status, c_int::from(capture_of(stream).is_some()))
    })
}

#[no_mangle]
pub extern "C" fn cudaGraphCreate(graph: *mut *mut c_void, flags: c_uint) -> Error {
    guard("cudaGraphCreate", || {
        if graph.is_null() || flags != 0 {
            return ret(INVALID_VALUE);
        }
        let mut g = graphs();
        let h = g.handle();
        g.graphs.insert(h, Vec::new());
        put(graph, h as *mut c_void)
    })
}

/// Adds a node made by `work` to `graph` after `deps`, checked as CUDA checks them (the graph
/// exists, each dependency is a node of it).
fn add_node(
    what: &str,
    node: *mut *mut c_void,
    graph: *mut c_void,
    deps: *const *mut c_void,
    n: usize,
    work: impl FnOnce(&mut Graphs) -> Result<Work, Error>,
) -> Error {
    guard(what, || {
        if node.is_null() || (deps.is_null() && n > 0) {
            return ret(INVALID_VALUE);
        }
        let mut g = graphs();
        if !g.graphs.contains_key(&(graph as usize)) {
            return ret(INVALID_VALUE);
        }
        // SAFETY: `n` dependencies, as the caller says.
        let deps: Vec<usize> = if n == 0 {
            Vec::new()
        } else {
            unsafe { std::slice::from_raw_parts(deps, n) }.iter().map(|&d| d as usize).collect()
        };
        if deps.iter().any(|d| g.nodes.get(d).is_none_or(|x| x.graph != graph as usize)) {
            return ret(INVALID_VALUE);
        }
        let work = match work(&mut g) {
            Ok(w) => w,
            Err(e) => return ret(e),
        };
        let h = g.add(graph as usize, work, deps);
        put(node, h as *mut c_void)
    })
}

/// `cudaKernelNodeParams`.
#[repr(C)]
pub struct KernelNodeParams {
    func: *const c_void,
    grid: Dim3,
    block: Dim3,
    shared: c_uint,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
}

/// A kernel node's work: its arguments copied, its configuration checked as a launch's.
fn kernel_work(g: &Graphs, p: *const KernelNodeParams) -> Result<Work, Error> {
    // SAFETY: the caller's parameters, checked non-null.
    let p = unsafe { p.as_ref() }.ok_or(INVALID_VALUE)?;
    let sizes = g.params.get(&(p.func as usize)).ok_or(INVALID_DEVICE_FUNCTION)?;
    // Arguments packed in `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER) are not taken.
    if p.params.is_null() && !sizes.is_empty() || !p.extra.is_null() {
        return Err(INVALID_VALUE);
    }
    super::launch::check_configuration(p.grid, p.block)?;
    // SAFETY: a pointer to each of the kernel's arguments, as CUDA's API says.
    let args = unsafe { copy_args(p.params, sizes) };
    Ok(Work::Kernel { func: p.func as usize, grid: p.grid, block: p.block, shmem: p.shared as usize, args })
}

#[no_mangle]
pub extern "C" fn cudaGraphAddKernelNode(
    node: *mut *mut c_void,
    graph: *mut c_void,
    deps: *const *mut c_void,
    n: usize,
    params: *const KernelNodeParams,
) -> Error {
    add_node("cudaGraphAddKernelNode", node, graph, deps, n, |g| kernel_work(g, params))
}

/// `cudaMemsetParams`.
#[repr(C)]
pub struct MemsetParams {
    dst: *mut c_void,
    pitch: usize,
    value: c_uint,
    element: c_uint,
    width: usize,
    height: usize,
}

#[no_mangle]
pub extern "C" fn cudaGraphAddMemsetNode(
    node: *mut *mut c_void,
    graph: *mut c_void,
    deps: *const *mut c_void,
    n: usize,
    params: *const MemsetParams,
) -> Error {
    add_node("cudaGraphAddMemsetNode", node, graph, deps, n, |_| {
        // SAFETY: the caller's parameters, checked non-null.
        let p = unsafe { params.as_ref() }.ok_or(INVALID_VALUE)?;
        if ![1, 2, 4].contains(&p.element) || p.dst.is_null() || p.height > 1 && p.pitch < p.width * p.element as usize
        {
            return Err(INVALID_VALUE);
        }
        Ok(Work::Set {
            dst: p.dst as usize,
            pitch: p.pitch,
            value: p.value,
            element: p.element,
            width: p.width,
            height: p.height.max(1),
        })
    })
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn cudaGraphAddMemcpyNode1D(
    node: *mut *mut c_void,
    graph: *mut c_void,
    deps: *const *mut c_void,
    n: usize,
    dst: *mut c_void,
    src: *const c_void,
    count: usize,
    kind: c_int,
) -> Error {
    add_node("cudaGraphAddMemcpyNode1D", node, graph, deps, n, |_| {
        Ok(Work::Copy {
            dst: dst as usize,
            dst_pitch: count,
            src: src as usize,
            src_pitch: count,
            width: count,
            height: 1,
            kind,
        })
    })
}

/// `cudaPos`, `cudaPitchedPtr` and `cudaMemcpy3DParms` (`cudaExtent`, which arrays use too, is
/// [`Extent`]).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Pos {
    x: usize,
    y: usize,
    z: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct PitchedPtr {
    pub(super) ptr: *mut c_void,
    pub(super) pitch: usize,
    pub(super) xsize: usize,
    pub(super) ysize: usize,
}

#[repr(C)]
pub struct Memcpy3DParms {
    src_array: *mut c_void,
    src_pos: Pos,
    src_ptr: PitchedPtr,
    dst_array: *mut c_void,
    dst_pos: Pos,
    dst_ptr: PitchedPtr,
    extent: Extent,
    kind: c_int,
}

/// A 3-D copy between linear memory and CUDA arrays, as rows: the extent's width in bytes
/// (in elements where either side is an array, as are that side's `x` position), its height
/// rows at the pointers' pitches (an array's rows have no padding), its depth slices of
/// `ysize` rows (an array's height), from the positions given. Slices are rows too where
/// each slice is `height` rows (slice z starts `ysize` rows after slice z - 1).
fn copy_3d(params: *const Memcpy3DParms) -> Result<Work, Error> {
    // SAFETY: the caller's parameters, checked non-null.
    let p = unsafe { params.as_ref() }.ok_or(INVALID_VALUE)?;
    let array = |a: *mut c_void| (!a.is_null()).then(|| super::textures::array(a).ok_or(INVALID_VALUE)).transpose();
    let (src_array, dst_array) = (array(p.src_array)?, array(p.dst_array)?);
    // An array as a pitched pointer, its element size, and the position in bytes.
    let side = |a: Option<Array>, ptr: &PitchedPtr, pos: &Pos| match a {
        Some(a) => (
            PitchedPtr { ptr: a.data as *mut c_void, pitch: a.pitch(), xsize: a.pitch(), ysize: a.rows() },
            Pos { x: pos.x * a.element(), ..*pos },
            a.element(),
        ),
        None => (*ptr, *pos, 1),
    };
    let (s, src_pos, s_element) = side(src_array, &p.src_ptr, &p.src_pos);
    let (d, dst_pos, d_element) = side(dst_array, &p.dst_ptr, &p.dst_pos);
    if s.ptr.is_null() || d.ptr.is_null() {
        return Err(INVALID_VALUE);
    }
    let element = match (src_array, dst_array) {
        (Some(_), Some(_)) if s_element != d_element => return Err(INVALID_VALUE),
        (Some(_), _) => s_element,
        (_, Some(_)) => d_element,
        (None, None) => 1,
    };
    let e = Extent { width: p.extent.width.checked_mul(element).ok_or(INVALID_VALUE)?, ..p.extent };
    let inside = |a: Option<Array>, q: &PitchedPtr, pos: &Pos| {
        a.is_none()
            || pos.x + e.width <= q.pitch
                && (pos.z * q.ysize + pos.y + (e.depth.max(1) - 1) * q.ysize + e.height.max(1))
                    <= q.ysize * a.map_or(1, |a| a.slices())
    };
    if !inside(src_array, &s, &src_pos) || !inside(dst_array, &d, &dst_pos) {
        return Err(INVALID_VALUE);
    }
    if e.height > 1 && (s.pitch < e.width || d.pitch < e.width) {
        return Err(INVALID_VALUE);
    }
    if e.depth > 1 && (s.ysize != e.height || d.ysize != e.height) {
        return Err(INVALID_VALUE);
    }
    let at = |q: &PitchedPtr, pos: &Pos| q.ptr as usize + (pos.z * q.ysize + pos.y) * q.pitch + pos.x;
    Ok(Work::Copy {
        dst: at(&d, &dst_pos),
        dst_pitch: d.pitch.max(e.width),
        src: at(&s, &src_pos),
        src_pitch: s.pitch.max(e.width),
        width: e.width,
        height: e.height.max(1) * e.depth.max(1),
        kind: p.kind,
    })
}

#[no_mangle]
pub extern "C" fn cudaGraphAddMemcpyNode(
    node: *mut *mut c_void,
    graph: *mut c_void,
    deps: *const *mut c_void,
    n: usize,
    params: *const Memcpy3DParms,
) -> Error {
    add_node("cudaGraphAddMemcpyNode", node, graph, deps, n, |_| copy_3d(params))
}

/// `cudaMemcpy3D` between linear memory and arrays ([`copy_3d`]).
#[no_mangle]
pub extern "C" fn cudaMemcpy3D(params: *const Memcpy3DParms) -> Error {
    cudaMemcpy3DAsync(params, std::ptr::null_mut())
}

#[no_mangle]
pub extern "C" fn cudaMemcpy3DAsync(params: *const Memcpy3DParms, stream: *mut c_void) -> Error {
    api("cudaMemcpy3D", || {
        if !stream_ok(stream) {
            return ret(super::INVALID_RESOURCE_HANDLE);
        }
        match copy_3d(params) {
            Ok(work) => match capture_of(stream) {
                Some(graph) => record(graph, work),
                None => run(&work, stream),
            },
            Err(e) => ret(e),
        }
    })
}

/// `cudaHostNodeParams`.
#[repr(C)]
pub struct HostNodeParams {
    f: Option<extern "C" fn(*mut c_void)>,
    data: *mut c_void,
}

#[no_mangle]
pub extern "C" fn cudaGraphAddHostNode(
    node: *mut *mut c_void,
    graph: *mut c_void,
    deps: *const *mut c_void,
    n: usize,
    params: *const HostNodeParams,
) -> Error {
    add_node("cudaGraphAddHostNode", node, graph, deps, n, |_| {
        // SAFETY: the caller's parameters, checked non-null.
        let p = unsafe { params.as_ref() }.ok_or(INVALID_VALUE)?;
        Ok(Work::Host { f: p.f.ok_or(INVALID_VALUE)?, data: p.data as usize })
    })
}

#[no_mangle]
pub extern "C" fn cudaGraphAddEmptyNode(
    node: *mut *mut c_void,
    graph: *mut c_void,
    deps: *const *mut c_void,
    n: usize,
) -> Error {
    add_node("cudaGraphAddEmptyNode", node, graph, deps, n, |_| Ok(Work::Empty))
}

/// Each `to[i]` depends on `from[i]`.
#[no_mangle]
pub extern "C" fn cudaGraphAddDependencies(
    graph: *mut c_void,
    from: *const *mut c_void,
    to: *const *mut c_void,
    n: usize,
) -> Error {
    guard("cudaGraphAddDependencies", || {
        if n > 0 && (from.is_null() || to.is_null()) {
            return ret(INVALID_VALUE);
        }
        let mut g = graphs();
        for i in 0..n {
            // SAFETY: `n` nodes in each list, as the caller says.
            let (a, b) = unsafe { (*from.add(i) as usize, *to.add(i) as usize) };
            let ours = |h: usize| g.nodes.get(&h).is_some_and(|x| x.graph == graph as usize);
            if !ours(a) || !ours(b) || a == b {
                return ret(INVALID_VALUE);
            }
            g.nodes.get_mut(&b).expect("checked").deps.push(a);
        }
        SUCCESS
    })
}

/// The graph's nodes in the order they were added; with `nodes` null, their count alone.
#[no_mangle]
pub extern "C" fn cudaGraphGetNodes(graph: *mut c_void, nodes: *mut *mut c_void, count: *mut usize) -> Error {
    guard("cudaGraphGetNodes", || {
        if count.is_null() {
            return ret(INVALID_VALUE);
        }
        let g = graphs();
        let Some(list) = g.graphs.get(&(graph as usize)) else { return ret(INVALID_VALUE) };
        if !nodes.is_null() {
            // SAFETY: room for `*count` handles, as the caller says.
            let room = unsafe { *count };
            for (i, &h) in list.iter().take(room).enumerate() {
                unsafe { *nodes.add(i) = h as *mut c_void };
            }
        }
        put(count, list.len())
    })
}

/// A copy of `graph` whose nodes are new handles with the same work and dependencies.
#[no_mangle]
pub extern "C" fn cudaGraphClone(clone: *mut *mut c_void, graph: *mut c_void) -> Error {
    guard("cudaGraphClone", || {
        if clone.is_null() {
            return ret(INVALID_VALUE);
        }
        let mut g = graphs();
        let Some(list) = g.graphs.get(&(graph as usize)).cloned() else { return ret(INVALID_VALUE) };
        let made = g.handle();
        g.graphs.insert(made, Vec::new());
        let mut renamed: HashMap<usize, usize> = HashMap::new();
        for old in list {
            let (work, deps) = (g.nodes[&old].work.clone(), g.nodes[&old].deps.clone());
            let deps = deps.iter().filter_map(|d| renamed.get(d).copied()).collect();
            let new = g.add(made, work, deps);
            renamed.insert(old, new);
        }
        // Dependencies added after their target pointed forward: map them too.
        let pending: Vec<(usize, Vec<usize>)> =
            renamed.iter().map(|(&old, &new)| (new, g.nodes[&old].deps.iter().map(|d| renamed[d]).collect())).collect();
        for (new, deps) in pending {
            g.nodes.get_mut(&new).expect("made above").deps = deps;
        }
        put(clone, made as *mut c_void)
    })
}

#[no_mangle]
pub extern "C" fn cudaGraphDestroy(graph: *mut c_void) -> Error {
    guard("cudaGraphDestroy", || {
        let mut g = graphs();
        match g.graphs.remove(&(graph as usize)) {
            Some(list) => {
                for h in list {
                    g.nodes.remove(&h);
                }
                SUCCESS
            }
            None => ret(INVALID_VALUE),
        }
    })
}

/// CUDA 12's form: `flags` (auto-free, upload, device launch, priority) change nothing here.
#[no_mangle]
pub extern "C" fn cudaGraphInstantiate(exec: *mut *mut c_void, graph: *mut c_void, _flags: u64) -> Error {
    guard("cudaGraphInstantiate", || {
        if exec.is_null() {
            return ret(INVALID_VALUE);
        }
        let mut g = graphs();
        let Some(order) = g.ordered(graph as usize) else { return ret(INVALID_VALUE) };
        let h = g.handle();
        g.execs.insert(h, order);
        put(exec, h as *mut c_void)
    })
}

#[no_mangle]
pub extern "C" fn cudaGraphInstantiateWithFlags(exec: *mut *mut c_void, graph: *mut c_void, flags: u64) -> Error {
    cudaGraphInstantiate(exec, graph, flags)
}

/// Runs an instantiated graph's work on `stream` in order; on a capturing stream, records it
/// into that capture instead.
#[no_mangle]
pub extern "C" fn cudaGraphLaunch(exec: *mut c_void, stream: *mut c_void) -> Error {
    api("cudaGraphLaunch", || {
        if !stream_ok(stream) {
            return ret(super::INVALID_RESOURCE_HANDLE);
        }
        let Some(work) = graphs().execs.get(&(exec as usize)).cloned() else { return ret(INVALID_VALUE) };
        if let Some(graph) = capture_of(stream) {
            for (_, w) in work {
                record(graph, w);
            }
            return SUCCESS;
        }
        for (_, w) in &work {
            let e = run(w, stream);
            if e != SUCCESS {
                return e;
            }
        }
        SUCCESS
    })
}

/// Prepares an instantiated graph's launch on `stream` ahead of it: the graph's work is
/// the runtime's to place at each launch, so there is nothing to move, only handles to check.
#[no_mangle]
pub extern "C" fn cudaGraphUpload(exec: *mut c_void, stream: *mut c_void) -> Error {
    guard("cudaGraphUpload", || {
        if !stream_ok(stream) {
            return ret(super::INVALID_RESOURCE_HANDLE);
        }
        if graphs().execs.contains_key(&(exec as usize)) {
            SUCCESS
        } else {
            ret(INVALID_VALUE)
        }
    })
}

#[no_mangle]
pub extern "C" fn cudaGraphExecDestroy(exec: *mut c_void) -> Error {
    guard("cudaGraphExecDestroy", || {
        if graphs().execs.remove(&(exec as usize)).is_some() {
            SUCCESS
        } else {
            ret(INVALID_VALUE)
        }
    })
}

/// A kernel node's parameters in an instantiated graph: same kernel, new configuration and
/// arguments.
#[no_mangle]
pub extern "C" fn cudaGraphExecKernelNodeSetParams(
    exec: *mut c_void,
    node: *mut c_void,
    params: *const KernelNodeParams,
) -> Error {
    guard("cudaGraphExecKernelNodeSetParams", || {
        let mut g = graphs();
        let work = match kernel_work(&g, params) {
            Ok(w) => w,
            Err(e) => return ret(e),
        };
        let Some(slot) =
            g.execs.get_mut(&(exec as usize)).and_then(|x| x.iter_mut().find(|(h, _)| *h == node as usize))
        else {
            return ret(INVALID_VALUE);
        };
        match (&slot.1, &work) {
            (Work::Kernel { func: a, .. }, Work::Kernel { func: b, .. }) if a == b => {
                slot.1 = work;
                SUCCESS
            }
            _ => ret(INVALID_VALUE),
        }
    })
}

/// The graph node's kernel parameters, set before instantiation.
#[no_mangle]
pub extern "C" fn cudaGraphKernelNodeSetParams(node: *mut c_void, params: *const KernelNodeParams) -> Error {
    guard("cudaGraphKernelNodeSetParams", || {
        let mut g = graphs();
        let work = match kernel_work(&g, params) {
            Ok(w) => w,
            Err(e) => return ret(e),
        };
        match g.nodes.get_mut(&(node as usize)) {
            Some(n) if matches!(n.work, Work::Kernel { .. }) => {
                n.work = work;
                SUCCESS
            }
            _ => ret(INVALID_VALUE),
        }
    })
}

/// `cudaGraphExecUpdateResultInfo`.
#[repr(C)]
pub struct UpdateResultInfo {
    result: c_int,
    error_node: *mut c_void,
    error_from_node: *mut c_void,
}

/// Takes `graph`'s work into `exec` where the two have the same shape (as many nodes, each
/// of the same kind and, for kernels, the same kernel): `cudaGraphExecUpdateSuccess`; else
/// `cudaErrorGraphExecUpdateFailure` with the result saying why (topology changed, 2; node
/// type changed, 3; kernel changed, 4), and `exec` as it was.
#[no_mangle]
pub extern "C" fn cudaGraphExecUpdate(exec: *mut c_void, graph: *mut c_void, info: *mut UpdateResultInfo) -> Error {
    guard("cudaGraphExecUpdate", || {
        let mut g = graphs();
        let (Some(order), Some(old)) = (g.ordered(graph as usize), g.execs.get(&(exec as usize))) else {
            return ret(INVALID_VALUE);
        };
        let result = if order.len() != old.len() {
            2
        } else {
            order
                .iter()
                .zip(old)
                .map(|((_, a), (_, b))| match (a, b) {
                    (Work::Kernel { func: x, .. }, Work::Kernel { func: y, .. }) => {
                        if x == y {
                            0
                        } else {
                            4
                        }
                    }
                    _ if std::mem::discriminant(a) == std::mem::discriminant(b) => 0,
                    _ => 3,
                })
                .max()
                .unwrap_or(0)
        };
        if !info.is_null() {
            // SAFETY: the caller's result slot, checked non-null.
            unsafe {
                info.write(UpdateResultInfo {
                    result,
                    error_node: std::ptr::null_mut(),
                    error_from_node: std::ptr::null_mut(),
                })
            };
        }
        if result != 0 {
            return ret(GRAPH_EXEC_UPDATE_FAILURE);
        }
        g.execs.insert(exec as usize, order);
        SUCCESS
    })
}

/// `cudaErrorGraphExecUpdateFailure`.
const GRAPH_EXEC_UPDATE_FAILURE: Error = 910;
