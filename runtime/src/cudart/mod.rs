//! The CUDA runtime API, for CUDA programs: the program sees ONE GPU whatever the machine
//! has, and its device memory is virtual buffers ([`crate::memory`]), split and copied among
//! the real devices by the runtime.
//!
//! Device memory lives on the host: `cudaMalloc` returns host memory the runtime tracks as
//! a virtual buffer, so a pointer into it is valid for arithmetic and as a kernel argument
//! (the runtime maps it to each device's copy), and the devices hold what their partitions
//! touch. Every API call keeps the coherence maps exact: a copy or memset into device memory
//! makes the host its only holder ([`memory::host_overwrites`]), a copy out of it first
//! makes the host current on exactly those bytes ([`memory::request`]). So a program's host
//! writes never need guessing (`HPVM_MGPU_HOST_WRITES=none` holds for CUDA programs).
//!
//! Ordering: a kernel launch returns once its copies and kernels are enqueued on the GPUs
//! (as CUDA's does), and every other call first waits for the work in flight
//! ([`inflight::drain`]) and returns with its own work done, so all work runs in program
//! order, which satisfies every stream's ordering. An event records the host's clock once all
//! work before it has finished, so the time between two events is that of all the work
//! between them, on however many GPUs it ran.
//!
//! Errors are CUDA's codes (values of `cudaError_t` in CUDA 12.4's `driver_types.h`); each
//! failing call also becomes the calling thread's last error (`cudaGetLastError`). What is
//! not implemented here is not defined, so a program using it fails at link time naming it.
//!
//! Device properties describe the one device the program sees ([`DeviceLimits`]: the GPUs
//! combined, or the host's cores as a nominal GPU).
//!
//! Kernels ([`launch`]): `<<<…>>>` and `cudaLaunchKernel` run the kernel's graph through the
//! launcher the compiler registered under its stub, as one HPVM launch, left in flight on
//! the GPUs (finished on return on simulated devices).
//! `__device__`/`__constant__` variables are their host shadow variables, tracked as buffers
//! from the first launch that uses them, so `cudaMemcpyToSymbol` is a copy into device memory.
//! A program that never calls `__hpvm__init` gets the runtime's session at its first launch,
//! closed at exit (statistics included).

// CUDA's names.
#![allow(non_snake_case)]
// C entry points: their pointer arguments are valid as CUDA's API documents (the C caller's
// contract, checked for null here); no Rust code calls them.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

pub mod config;
pub mod fault;
mod graphs;
mod launch;
mod libdevice;
mod pools;
mod printf;
mod textures;

use crate::abi::guard;
use crate::devices::stamps::Stamp;
use crate::devices::{devices, inflight, DeviceLimits};
use crate::memory;
use crate::stats;
use std::alloc::Layout;
use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::{Mutex, MutexGuard};

/// `cudaError_t`.
pub type Error = c_int;

pub const SUCCESS: Error = 0;
pub const INVALID_VALUE: Error = 1;
pub const MEMORY_ALLOCATION: Error = 2;
pub const INITIALIZATION_ERROR: Error = 3;
pub const INVALID_DEVICE_POINTER: Error = 17;
pub const INVALID_PITCH_VALUE: Error = 12;
pub const INVALID_MEMCPY_DIRECTION: Error = 21;
pub const INVALID_DEVICE: Error = 101;
pub const INVALID_RESOURCE_HANDLE: Error = 400;
pub const INVALID_CONFIGURATION: Error = 9;
pub const INVALID_SYMBOL: Error = 13;
pub const INVALID_DEVICE_FUNCTION: Error = 98;
pub const MISSING_CONFIGURATION: Error = 52;
pub const UNSUPPORTED_LIMIT: Error = 215;
pub const HOST_MEMORY_ALREADY_REGISTERED: Error = 712;
pub const HOST_MEMORY_NOT_REGISTERED: Error = 713;
pub const COOPERATIVE_LAUNCH_TOO_LARGE: Error = 720;

/// `cudaMemcpyKind`.
const HOST_TO_HOST: c_int = 0;
const HOST_TO_DEVICE: c_int = 1;
const DEVICE_TO_HOST: c_int = 2;
const DEVICE_TO_DEVICE: c_int = 3;
const DEFAULT: c_int = 4;

/// Device allocations are aligned as `cudaMalloc`'s are (at least 256 bytes).
const ALIGN: usize = 256;

/// The special streams that need no creating: the legacy default stream (0, also
/// `cudaStreamLegacy`) and the per-thread default stream.
const BUILTIN_STREAMS: [usize; 3] = [0, 1, 2];

thread_local! {
    static LAST: Cell<Error> = const { Cell::new(SUCCESS) };
}

/// An API call that uses the device: the runtime's session opens at the first (as CUDA's
/// context does), so that opening the GPUs is not charged to the program's first launch.
fn api<R: fault::Failed>(what: &str, f: impl FnOnce() -> R) -> R {
    guard(what, || {
        fault::shield(|| {
            launch::begin_session();
            f()
        })
    })
}

/// Whether copies into device memory go to every device at once (`HPVM_MGPU_CUDA_COPIES`:
/// `eager`, the default, as CUDA's `cudaMemcpy` completes its transfer before it returns) or
/// wait until a launch needs them (`lazy`: each device then receives only what its
/// partitions read).
fn eager_copies() -> bool {
    static EAGER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *EAGER.get_or_init(|| match std::env::var("HPVM_MGPU_CUDA_COPIES").unwrap_or_default().trim() {
        "" | "eager" => true,
        "lazy" => false,
        other => crate::fatal(&format!("HPVM_MGPU_CUDA_COPIES={other}: expected `eager` or `lazy`")),
    })
}

/// Returns `e`, making it the thread's last error when it is one.
fn ret(e: Error) -> Error {
    if e != SUCCESS {
        LAST.with(|l| l.set(e));
    }
    e
}

/// A kernel launch ([`launch`]) given to a stream that captures: recorded into its graph
/// ([`graphs::record_kernel`]), as the calls here record theirs; `None` where `stream` does
/// not capture, and the launch runs. Asked here rather than in [`launch`]: a graph's launch
/// runs its kernels through [`launch`], which so stays below [`graphs`].
///
/// # Safety
/// `args` holds a pointer to each of the kernel's arguments.
unsafe fn capture_launch(
    stream: *mut c_void,
    func: *const c_void,
    grid: launch::Dim3,
    block: launch::Dim3,
    args: *mut *mut c_void,
    shmem: usize,
    cooperative: bool,
) -> Option<Error> {
    let graph = graphs::capture_of(stream)?;
    if cooperative {
        // A graph's kernel nodes are not cooperative here: refused, as a call CUDA's stream
        // capture does not take.
        return Some(ret(INVALID_VALUE));
    }
    // SAFETY: as this function's contract says.
    Some(unsafe { graphs::record_kernel(graph, func, grid, block, args, shmem) })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `cudaMalloc`, `cudaMallocManaged`: tracked.
    Device,
    /// `cudaMallocManaged` too; the host may touch it after a synchronization.
    Managed,
    /// `cudaMallocHost`, `cudaHostAlloc`: plain host memory.
    PageLocked,
}

/// What a created stream was made with, for the calls that ask.
#[derive(Clone, Copy, Default)]
struct Stream {
    flags: c_uint,
    priority: c_int,
    /// Its lane on the GPUs ([`crate::devices::cuda::Lane::Program`]): streams take the
    /// lanes in turn.
    lane: u8,
}

#[derive(Default)]
struct State {
    /// Allocations by address: layout and kind.
    allocations: HashMap<usize, (Layout, Kind)>,
    /// The same addresses in the order they were allocated: what every rank visits alike
    /// (a map's order differs from process to process, and under ranks a managed buffer
    /// made current on the host may be sent between them).
    order: Vec<usize>,
    /// Streams by address (made by `cudaStreamCreate`): their flags and priority.
    streams: HashMap<usize, Stream>,
    /// Events by address: the point of the devices' work each was last recorded at.
    events: HashMap<usize, Stamp>,
    /// How many of the allocations are managed: every blocking call makes them current, and
    /// with none it need not look through the allocations.
    managed: usize,
}

fn state() -> MutexGuard<'static, State> {
    static STATE: std::sync::OnceLock<Mutex<State>> = std::sync::OnceLock::new();
    STATE.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner())
}

/// The memory behind an allocation of `layout`: managed and page-locked memory take whole
/// pages of their own, as CUDA's do, so that guarding managed bytes while a kernel writes them
/// (`memory::guard`) makes no other allocation's page read-only, and mapping page-locked
/// memory into the GPUs (`devices::in_place`) never meets a page mapped already.
fn backing(layout: Layout, kind: Kind) -> Layout {
    const PAGE: usize = 4096;
    match kind {
        Kind::Managed | Kind::PageLocked => {
            Layout::from_size_align(layout.size().next_multiple_of(PAGE), PAGE).unwrap_or(layout)
        }
        Kind::Device => layout,
    }
}

fn allocate(out: *mut *mut c_void, size: usize, kind: Kind) -> Error {
    if out.is_null() {
        return INVALID_VALUE;
    }
    if size == 0 {
        // SAFETY: `out` is the caller's pointer slot (checked non-null).
        unsafe { *out = std::ptr::null_mut() };
        return SUCCESS;
    }
    let Ok(layout) = Layout::from_size_align(size, ALIGN) else { return MEMORY_ALLOCATION };
    // SAFETY: a layout of non-zero size.
    let p = unsafe { std::alloc::alloc(backing(layout, kind)) };
    if p.is_null() {
        return MEMORY_ALLOCATION;
    }
    match kind {
        Kind::Device => {
            if memory::track_on_device(p as usize, size).is_err() {
                // SAFETY: allocated above with this layout, never handed out.
                unsafe { std::alloc::dealloc(p, layout) };
                return MEMORY_ALLOCATION;
            }
        }
        Kind::Managed => memory::track_managed(p as usize, size),
        // Kernels given it read and write it in place where the devices can reach it (CUDA's
        // zero-copy); elsewhere they run on the host.
        Kind::PageLocked => {
            crate::devices::in_place::map(p, backing(layout, kind).size());
        }
    }
    let mut st = state();
    st.allocations.insert(p as usize, (layout, kind));
    st.order.push(p as usize);
    st.managed += usize::from(kind == Kind::Managed);
    drop(st);
    // SAFETY: as above.
    unsafe { *out = p as *mut c_void };
    SUCCESS
}

fn release(ptr: *mut c_void, kinds: &[Kind]) -> Error {
    if ptr.is_null() {
        return SUCCESS;
    }
    let mut st = state();
    let Some(&(layout, kind)) = st.allocations.get(&(ptr as usize)).filter(|(_, k)| kinds.contains(k)) else {
        return INVALID_VALUE;
    };
    st.allocations.remove(&(ptr as usize));
    st.managed -= usize::from(kind == Kind::Managed);
    if let Some(at) = st.order.iter().rposition(|&p| p == ptr as usize) {
        st.order.remove(at);
    }
    drop(st);
    if kind == Kind::PageLocked {
        crate::devices::in_place::unmap(ptr as *mut u8);
    } else {
        memory::discard(ptr as usize);
    }
    // SAFETY: allocated by `allocate` with this layout; removed from the table, so freed once.
    unsafe { std::alloc::dealloc(ptr as *mut u8, backing(layout, kind)) };
    SUCCESS
}

/// Copies `n` bytes, keeping the coherence maps exact: the source made current on the host
/// first where it is device memory, the destination's device copies made stale.
fn copy(dst: *mut c_void, src: *const c_void, n: usize, kind: c_int) -> Error {
    copy_2d(dst, n, src, n, n, 1, kind, Via::Direct)
}

/// How [`copy_2d`] may move the bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    /// Through the host's copy of the device memory (a symbol's shadow, which launchers read).
    HostCopy,
    /// A plain copy between the program's memory and device memory skips the host's copy,
    /// and has completed when the call returns (`cudaMemcpy`).
    Direct,
    /// [`Via::Direct`], but a small copy into device memory (the driver has read the
    /// program's bytes when the call returns), or any copy from or into page-locked memory
    /// (read or written when the stream gets there), may still be in flight when the call
    /// returns, ordered before what the GPUs do next, as `cudaMemcpyAsync` leaves it.
    DirectAsync,
}

/// Writes `n` bytes of the program's at `src` into a tracked global's host copy (a kernel's
/// large by-value parameter, `launch::hpvm_rt_cuda_blob`), as `cudaMemcpyToSymbol` does.
pub(super) fn write_symbol(dst: *mut c_void, src: *const c_void, n: usize) {
    let e = copy_to_symbol(dst, src, n, HOST_TO_HOST);
    if e != SUCCESS {
        crate::fatal(&format!("passing a kernel's by-value parameter of {n} bytes: CUDA error {e}"));
    }
}

/// A copy into a device variable's shadow (`cudaMemcpyToSymbol`): through the host's copy,
/// which stays current, since launchers read the values kernels load from `__constant__`
/// variables there (`hpvm-core`'s `cuda::hoist`).
fn copy_to_symbol(dst: *mut c_void, src: *const c_void, n: usize, kind: c_int) -> Error {
    copy_2d(dst, n, src, n, n, 1, kind, Via::HostCopy)
}

/// The bytes a 2-D region of `height` rows of `width` bytes, `pitch` apart, spans.
fn span(pitch: usize, width: usize, height: usize) -> Option<usize> {
    pitch.checked_mul(height - 1)?.checked_add(width)
}

/// Copies `height` rows of `width` bytes, `spitch` apart at the source and `dpitch` at the
/// destination, as [`copy`] does a run: only the rows' bytes are requested or made stale, not
/// the padding between them, by the route `via` allows.
#[allow(clippy::too_many_arguments)]
fn copy_2d(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: c_int,
    via: Via,
) -> Error {
    if width == 0 || height == 0 {
        return SUCCESS;
    }
    if dst.is_null() || src.is_null() {
        return INVALID_VALUE;
    }
    if width > dpitch || width > spitch {
        return INVALID_PITCH_VALUE;
    }
    let (Some(dspan), Some(sspan)) = (span(dpitch, width, height), span(spitch, width, height)) else {
        return INVALID_VALUE;
    };
    let (src_dev, dst_dev) =
        (memory::tracked(src as usize, sspan).is_some(), memory::tracked(dst as usize, dspan).is_some());
    let valid = match kind {
        HOST_TO_HOST | DEFAULT => true,
        HOST_TO_DEVICE => dst_dev,
        DEVICE_TO_HOST => src_dev,
        DEVICE_TO_DEVICE => src_dev && dst_dev,
        _ => return INVALID_MEMCPY_DIRECTION,
    };
    if !valid {
        return INVALID_VALUE;
    }
    // A plain copy between the program's memory and device memory goes straight between the
    // program's bytes and the devices, as CUDA's does, where the memory manager can take it.
    if via != Via::HostCopy && height == 1 && src_dev != dst_dev {
        let direct = if dst_dev {
            let in_flight = via == Via::DirectAsync;
            eager_copies() && memory::copy_from_program(dst as usize, width, src as *const u8, in_flight)
        } else {
            memory::copy_to_program(src as usize, width, dst as *mut u8, via == Via::DirectAsync)
        };
        if direct {
            return SUCCESS;
        }
    }
    for r in 0..height {
        let (s, d) = (src as usize + r * spitch, dst as usize + r * dpitch);
        if src_dev {
            memory::request(s, width);
        }
        if dst_dev {
            memory::host_overwrites(d, width);
        }
        // SAFETY: the program's pointers to rows of `width` bytes (device memory is host
        // memory here); rows may overlap within one buffer.
        unsafe { std::ptr::copy(s as *const u8, d as *mut u8, width) };
    }
    if dst_dev && eager_copies() {
        for r in 0..height {
            memory::push_to_devices(dst as usize + r * dpitch, width);
        }
    }
    SUCCESS
}

/// Writes `v` to the caller's `slot`: `INVALID_VALUE` (made the last error) for a null one.
fn put<T>(slot: *mut T, v: T) -> Error {
    if slot.is_null() {
        return ret(INVALID_VALUE);
    }
    // SAFETY: the caller's slot for a `T`, checked non-null.
    unsafe { slot.write(v) };
    SUCCESS
}

fn stream_ok(stream: *mut c_void) -> bool {
    BUILTIN_STREAMS.contains(&(stream as usize)) || state().streams.contains_key(&(stream as usize))
}

/// A valid stream's program lane (`Some(None)` for the main stream): a stream the program
/// made, while it has made another too, has one, so that kernels of its streams run beside
/// one another (`partitioned::gpu`). A program that gives all its work to one stream of its
/// own keeps it on the main stream, where launches are held and replayed. `None`: not a
/// stream.
fn program_lane(stream: *mut c_void) -> Option<Option<u8>> {
    if BUILTIN_STREAMS.contains(&(stream as usize)) {
        return Some(None);
    }
    let st = state();
    let s = st.streams.get(&(stream as usize))?;
    Some((st.streams.len() >= 2 && lanes_on()).then_some(s.lane))
}

/// `HPVM_MGPU_STREAMS=lanes` (the default, checked on an H100 by
/// `scripts/device/streams.sh`): the program's streams run beside one another
/// ([`program_lane`]); `one`: all of them in program order on each GPU's one stream.
fn lanes_on() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| match std::env::var("HPVM_MGPU_STREAMS").unwrap_or_default().trim() {
        "" | "lanes" => true,
        "one" => false,
        other => crate::fatal(&format!("HPVM_MGPU_STREAMS={other}: expected `lanes` or `one`")),
    })
}

/// Makes the host current on managed memory, which the program may read after a
/// synchronization: any call that waits for the device's work (a synchronization, an event's,
/// a blocking copy: after `kernel<<<...>>>(out); cudaMemcpy(...)` the kernel has finished,
/// and programs read managed `out` then, as CUDA lets them).
fn synchronize_managed() {
    for (p, size) in launch::managed_symbols() {
        memory::request(p, size);
    }
    let st = state();
    if st.managed == 0 {
        return;
    }
    let managed: Vec<(usize, usize)> = st
        .order
        .iter()
        .filter_map(|p| st.allocations.get(p).filter(|(_, k)| *k == Kind::Managed).map(|(l, _)| (*p, l.size())))
        .collect();
    drop(st);
    for (p, size) in managed {
        memory::request(p, size);
    }
}

#[no_mangle]
pub extern "C" fn cudaMalloc(ptr: *mut *mut c_void, size: usize) -> Error {
    api("cudaMalloc", || {
        stats::install();
        ret(allocate(ptr, size, Kind::Device))
    })
}

#[no_mangle]
pub extern "C" fn cudaMallocManaged(ptr: *mut *mut c_void, size: usize, _flags: c_uint) -> Error {
    api("cudaMallocManaged", || {
        stats::install();
        ret(allocate(ptr, size, Kind::Managed))
    })
}

#[no_mangle]
pub extern "C" fn cudaMallocHost(ptr: *mut *mut c_void, size: usize) -> Error {
    api("cudaMallocHost", || ret(allocate(ptr, size, Kind::PageLocked)))
}

/// `cudaHostAllocMapped`.
const HOST_ALLOC_MAPPED: c_uint = 2;

/// Page-locked memory, mapped as CUDA maps it under unified addressing whatever the flags:
/// kernels given it (or the pointer `cudaHostGetDevicePointer` gives, the same) read and write
/// it in place (`devices::in_place`), so a kernel may spin on a flag the host sets, or the
/// host poll one a kernel raises. Where the devices cannot reach host memory (ranks),
/// mapped memory (`cudaHostAllocMapped`) is tracked as managed memory is instead, the host
/// made current on it at each synchronization, and kernels given other page-locked memory
/// run on the host: slower, never wrong.
#[no_mangle]
pub extern "C" fn cudaHostAlloc(ptr: *mut *mut c_void, size: usize, flags: c_uint) -> Error {
    api("cudaHostAlloc", || {
        let tracked = flags & HOST_ALLOC_MAPPED != 0 && !crate::devices::in_place::possible();
        ret(allocate(ptr, size, if tracked { Kind::Managed } else { Kind::PageLocked }))
    })
}

/// The device address of mapped host memory: the same address (one address space, as CUDA's
/// unified addressing gives), for memory `cudaHostAlloc` or `cudaMallocHost` made (or a
/// range `cudaHostRegister` registered); `cudaErrorInvalidValue` for other memory.
#[no_mangle]
pub extern "C" fn cudaHostGetDevicePointer(out: *mut *mut c_void, host: *mut c_void, flags: c_uint) -> Error {
    api("cudaHostGetDevicePointer", || {
        if flags != 0 {
            return ret(INVALID_VALUE);
        }
        let at = host as usize;
        let allocated = state().allocations.iter().any(|(&base, &(layout, kind))| {
            matches!(kind, Kind::PageLocked | Kind::Managed) && (base..base + layout.size()).contains(&at)
        });
        if allocated || config::registered(at) {
            put(out, host)
        } else {
            ret(INVALID_VALUE)
        }
    })
}

/// `cudaPointerAttributes` (CUDA 11 and later).
#[repr(C)]
pub struct PointerAttributes {
    kind: c_int,
    device: c_int,
    device_pointer: *mut c_void,
    host_pointer: *mut c_void,
}

/// What `ptr` points into, as CUDA tells it: device memory (no host address), managed or
/// page-locked memory (the same address on both sides), or memory CUDA does not know
/// (`cudaMemoryTypeUnregistered`, no error since CUDA 11). Pointers into an allocation's
/// middle are its too.
#[no_mangle]
pub extern "C" fn cudaPointerGetAttributes(attributes: *mut PointerAttributes, ptr: *const c_void) -> Error {
    guard("cudaPointerGetAttributes", || {
        if attributes.is_null() {
            return ret(INVALID_VALUE);
        }
        let at = ptr as usize;
        let kind = state()
            .allocations
            .iter()
            .find(|(&base, (layout, _))| (base..base + layout.size()).contains(&at))
            .map(|(_, &(_, kind))| kind);
        let p = ptr as *mut c_void;
        let null = std::ptr::null_mut();
        let a = match kind {
            Some(Kind::Device) => PointerAttributes { kind: 2, device: 0, device_pointer: p, host_pointer: null },
            Some(Kind::Managed) => PointerAttributes { kind: 3, device: 0, device_pointer: p, host_pointer: p },
            Some(Kind::PageLocked) => PointerAttributes { kind: 1, device: 0, device_pointer: p, host_pointer: p },
            None => PointerAttributes { kind: 0, device: -2, device_pointer: null, host_pointer: null },
        };
        put(attributes, a)
    })
}

#[no_mangle]
pub extern "C" fn cudaFree(ptr: *mut c_void) -> Error {
    api("cudaFree", || ret(release(ptr, &[Kind::Device, Kind::Managed])))
}

#[no_mangle]
pub extern "C" fn cudaFreeHost(ptr: *mut c_void) -> Error {
    api("cudaFreeHost", || ret(release(ptr, &[Kind::PageLocked, Kind::Managed])))
}

#[no_mangle]
pub extern "C" fn cudaMemcpy(dst: *mut c_void, src: *const c_void, n: usize, kind: c_int) -> Error {
    api("cudaMemcpy", || blocking(copy(dst, src, n, kind)))
}

/// The end of a blocking call: its error, or success with managed memory made current on
/// the host ([`synchronize_managed`]).
fn blocking(e: Error) -> Error {
    if e == SUCCESS {
        synchronize_managed();
    }
    ret(e)
}

#[no_mangle]
pub extern "C" fn cudaMemcpyAsync(
    dst: *mut c_void,
    src: *const c_void,
    n: usize,
    kind: c_int,
    stream: *mut c_void,
) -> Error {
    api("cudaMemcpyAsync", || {
        let Some(lane) = program_lane(stream) else {
            return ret(INVALID_RESOURCE_HANDLE);
        };
        match graphs::capture_of(stream) {
            Some(graph) => graphs::record_copy(graph, dst, src, n, kind),
            None => ret(inflight::on_program_lane(lane, || copy_2d(dst, n, src, n, n, 1, kind, Via::DirectAsync))),
        }
    })
}

/// A copy between two devices' memory: the program sees one device, so both must be it (a
/// device-to-device copy), else `cudaErrorInvalidDevice`, as CUDA answers for a device that
/// does not exist.
#[no_mangle]
pub extern "C" fn cudaMemcpyPeer(
    dst: *mut c_void,
    dst_device: c_int,
    src: *const c_void,
    src_device: c_int,
    n: usize,
) -> Error {
    cudaMemcpyPeerAsync(dst, dst_device, src, src_device, n, std::ptr::null_mut())
}

#[no_mangle]
pub extern "C" fn cudaMemcpyPeerAsync(
    dst: *mut c_void,
    dst_device: c_int,
    src: *const c_void,
    src_device: c_int,
    n: usize,
    stream: *mut c_void,
) -> Error {
    api("cudaMemcpyPeer", || {
        if dst_device != 0 || src_device != 0 {
            return ret(INVALID_DEVICE);
        }
        if !stream_ok(stream) {
            return ret(INVALID_RESOURCE_HANDLE);
        }
        ret(copy(dst, src, n, DEVICE_TO_DEVICE))
    })
}

/// `__constant__` and `__device__` variables: the host's shadow variable is the data. A copy
/// is checked as CUDA checks it before a byte moves: the address must be a registered symbol
/// (`INVALID_SYMBOL`) and `offset + n` within it (`INVALID_VALUE`).
fn symbol_range(symbol: *const c_void, offset: usize, n: usize) -> Result<usize, Error> {
    let size = launch::symbol_size(symbol).ok_or(INVALID_SYMBOL)?;
    match offset.checked_add(n) {
        Some(end) if end <= size => Ok(symbol as usize + offset),
        _ => Err(INVALID_VALUE),
    }
}

#[no_mangle]
pub extern "C" fn cudaMemcpyToSymbol(
    symbol: *const c_void,
    src: *const c_void,
    n: usize,
    offset: usize,
    kind: c_int,
) -> Error {
    api("cudaMemcpyToSymbol", || {
        blocking(match kind {
            HOST_TO_DEVICE | DEVICE_TO_DEVICE | DEFAULT => match symbol_range(symbol, offset, n) {
                Ok(at) => {
                    let kind = if kind == DEVICE_TO_DEVICE { DEVICE_TO_HOST } else { HOST_TO_HOST };
                    copy_to_symbol(at as *mut c_void, src, n, kind)
                }
                Err(e) => e,
            },
            _ => INVALID_MEMCPY_DIRECTION,
        })
    })
}

#[no_mangle]
pub extern "C" fn cudaMemcpyFromSymbol(
    dst: *mut c_void,
    symbol: *const c_void,
    n: usize,
    offset: usize,
    kind: c_int,
) -> Error {
    api("cudaMemcpyFromSymbol", || {
        blocking(match kind {
            DEVICE_TO_HOST | DEVICE_TO_DEVICE | DEFAULT => match symbol_range(symbol, offset, n) {
                Ok(at) => {
                    let kind = if kind == DEVICE_TO_DEVICE { HOST_TO_DEVICE } else { HOST_TO_HOST };
                    copy(dst, at as *const c_void, n, kind)
                }
                Err(e) => e,
            },
            _ => INVALID_MEMCPY_DIRECTION,
        })
    })
}

/// A symbol's device address: its shadow, tracked from here on as a launch would track it,
/// so that the program may copy to and from it as device memory.
#[no_mangle]
pub extern "C" fn cudaGetSymbolAddress(out: *mut *mut c_void, symbol: *const c_void) -> Error {
    api("cudaGetSymbolAddress", || match launch::symbol_size(symbol) {
        Some(bytes) => put(out, launch::hpvm_rt_cuda_symbol(symbol as *mut c_void, bytes as u64)),
        None => ret(INVALID_SYMBOL),
    })
}

#[no_mangle]
pub extern "C" fn cudaGetSymbolSize(out: *mut usize, symbol: *const c_void) -> Error {
    api("cudaGetSymbolSize", || match launch::symbol_size(symbol) {
        Some(bytes) => put(out, bytes),
        None => ret(INVALID_SYMBOL),
    })
}

fn set(ptr: *mut c_void, value: c_int, n: usize) -> Error {
    set_2d(ptr, n, value, n, 1)
}

/// Sets `height` rows of `width` bytes, `pitch` apart, to `value`.
fn set_2d(ptr: *mut c_void, pitch: usize, value: c_int, width: usize, height: usize) -> Error {
    if width == 0 || height == 0 {
        return SUCCESS;
    }
    if width > pitch {
        return INVALID_PITCH_VALUE;
    }
    let Some(n) = span(pitch, width, height) else { return INVALID_VALUE };
    if ptr.is_null() || memory::tracked(ptr as usize, n).is_none() {
        return INVALID_VALUE;
    }
    // Contiguous bytes are set on the devices, as CUDA does, where the memory manager can:
    // the next launch then copies nothing in (a program's timed loop after a `cudaMemset`).
    let contiguous = height == 1 || width == pitch;
    if contiguous && eager_copies() && memory::fill_on_devices(ptr as usize, n, value as u8) {
        return SUCCESS;
    }
    for r in 0..height {
        let row = ptr as usize + r * pitch;
        memory::host_overwrites(row, width);
        // SAFETY: a row of a tracked buffer (checked above), host memory.
        unsafe { std::ptr::write_bytes(row as *mut u8, value as u8, width) };
    }
    SUCCESS
}

#[no_mangle]
pub extern "C" fn cudaMemset(ptr: *mut c_void, value: c_int, n: usize) -> Error {
    api("cudaMemset", || ret(set(ptr, value, n)))
}

#[no_mangle]
pub extern "C" fn cudaMemsetAsync(ptr: *mut c_void, value: c_int, n: usize, stream: *mut c_void) -> Error {
    api("cudaMemsetAsync", || {
        let Some(lane) = program_lane(stream) else {
            return ret(INVALID_RESOURCE_HANDLE);
        };
        match graphs::capture_of(stream) {
            Some(graph) => graphs::record_set(graph, ptr, value, n),
            None => ret(inflight::on_program_lane(lane, || set(ptr, value, n))),
        }
    })
}

/// Rows of `width` bytes at a pitch that keeps each row 512-byte aligned (CUDA's texture
/// alignment), which the program must use to address them.
#[no_mangle]
pub extern "C" fn cudaMallocPitch(ptr: *mut *mut c_void, pitch: *mut usize, width: usize, height: usize) -> Error {
    api("cudaMallocPitch", || {
        stats::install();
        if pitch.is_null() {
            return ret(INVALID_VALUE);
        }
        let p = width.div_ceil(512).max(1) * 512;
        let Some(bytes) = p.checked_mul(height) else { return ret(MEMORY_ALLOCATION) };
        match ret(allocate(ptr, bytes, Kind::Device)) {
            SUCCESS => put(pitch, p),
            e => e,
        }
    })
}

#[no_mangle]
pub extern "C" fn cudaMemcpy2D(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: c_int,
) -> Error {
    api("cudaMemcpy2D", || blocking(copy_2d(dst, dpitch, src, spitch, width, height, kind, Via::Direct)))
}

#[no_mangle]
#[allow(clippy::too_many_arguments)] // CUDA's signature
pub extern "C" fn cudaMemcpy2DAsync(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: c_int,
    stream: *mut c_void,
) -> Error {
    api("cudaMemcpy2DAsync", || {
        ret(if stream_ok(stream) {
            copy_2d(dst, dpitch, src, spitch, width, height, kind, Via::Direct)
        } else {
            INVALID_RESOURCE_HANDLE
        })
    })
}

/// A 3-D allocation: `extent.depth` slices of `extent.height` rows of `extent.width` bytes,
/// each row at the pitch `cudaMallocPitch` gives (CUDA's `cudaMalloc3D`).
#[no_mangle]
pub extern "C" fn cudaMalloc3D(out: *mut graphs::PitchedPtr, extent: textures::Extent) -> Error {
    api("cudaMalloc3D", || {
        stats::install();
        if out.is_null() {
            return ret(INVALID_VALUE);
        }
        let pitch = extent.width.div_ceil(512).max(1) * 512;
        let rows = extent.height.max(1).checked_mul(extent.depth.max(1));
        let Some(bytes) = rows.and_then(|r| r.checked_mul(pitch)) else { return ret(MEMORY_ALLOCATION) };
        let mut p: *mut c_void = std::ptr::null_mut();
        match ret(allocate(&mut p, bytes, Kind::Device)) {
            SUCCESS => {
                let made = graphs::PitchedPtr { ptr: p, pitch, xsize: extent.width, ysize: extent.height };
                // SAFETY: the caller's out-pointer, checked non-null.
                unsafe { out.write(made) };
                SUCCESS
            }
            e => e,
        }
    })
}

/// `cudaMemset3D`: every row of every slice of `extent` in the pitched allocation, as
/// `cudaMemset2D` sets a slice's rows.
#[no_mangle]
pub extern "C" fn cudaMemset3D(p: graphs::PitchedPtr, value: c_int, extent: textures::Extent) -> Error {
    api("cudaMemset3D", || {
        if extent.depth == 0 {
            return SUCCESS;
        }
        // The slices one after the other: one 2-D set of `height * depth` rows where the
        // slices are as tall as the allocation's, else a set per slice.
        let slice = p.pitch.saturating_mul(p.ysize);
        if extent.height == p.ysize {
            return ret(set_2d(p.ptr, p.pitch, value, extent.width, extent.height * extent.depth));
        }
        for z in 0..extent.depth {
            let at = (p.ptr as usize).wrapping_add(z * slice) as *mut c_void;
            let e = set_2d(at, p.pitch, value, extent.width, extent.height);
            if e != SUCCESS {
                return ret(e);
            }
        }
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cudaMemset3DAsync(
    p: graphs::PitchedPtr,
    value: c_int,
    extent: textures::Extent,
    stream: *mut c_void,
) -> Error {
    if !stream_ok(stream) {
        return ret(INVALID_RESOURCE_HANDLE);
    }
    // Set now, in order; a graph being captured would not hold it, so that is refused.
    if graphs::capture_of(stream).is_some() {
        return ret(graphs::CAPTURE_UNSUPPORTED);
    }
    cudaMemset3D(p, value, extent)
}

#[no_mangle]
pub extern "C" fn cudaMemset2D(ptr: *mut c_void, pitch: usize, value: c_int, width: usize, height: usize) -> Error {
    api("cudaMemset2D", || ret(set_2d(ptr, pitch, value, width, height)))
}

#[no_mangle]
pub extern "C" fn cudaDeviceSynchronize() -> Error {
    api("cudaDeviceSynchronize", || {
        inflight::drain();
        synchronize_managed();
        SUCCESS
    })
}

/// `cudaDeviceSynchronize` under its name before CUDA 4 (deprecated, still common).
#[no_mangle]
pub extern "C" fn cudaThreadSynchronize() -> Error {
    cudaDeviceSynchronize()
}

/// `cudaDeviceReset` under its name before CUDA 4.
#[no_mangle]
pub extern "C" fn cudaThreadExit() -> Error {
    cudaDeviceReset()
}

/// Frees every allocation, stream and event, as CUDA's reset destroys the context.
#[no_mangle]
pub extern "C" fn cudaDeviceReset() -> Error {
    guard("cudaDeviceReset", || {
        let st = state();
        let all: Vec<(usize, Kind)> = st.order.iter().map(|p| (*p, st.allocations[p].1)).collect();
        drop(st);
        for (p, k) in all {
            release(p as *mut c_void, &[k]);
        }
        let mut st = state();
        for (s, _) in st.streams.drain() {
            // SAFETY: made by `cudaStreamCreate`, in the table until now.
            drop(unsafe { Box::from_raw(s as *mut u8) });
        }
        for (e, _) in st.events.drain() {
            // SAFETY: made by `cudaEventCreate`, in the table until now.
            drop(unsafe { Box::from_raw(e as *mut u8) });
        }
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cudaGetDeviceCount(count: *mut c_int) -> Error {
    guard("cudaGetDeviceCount", || put(count, 1))
}

#[no_mangle]
pub extern "C" fn cudaSetDevice(device: c_int) -> Error {
    api("cudaSetDevice", || ret(if device == 0 { SUCCESS } else { INVALID_DEVICE }))
}

#[no_mangle]
pub extern "C" fn cudaGetDevice(device: *mut c_int) -> Error {
    guard("cudaGetDevice", || put(device, 0))
}

#[no_mangle]
pub extern "C" fn cudaGetLastError() -> Error {
    // An unusable context's error is sticky: reading it does not clear it.
    if fault::asserted() {
        return fault::ASSERT;
    }
    LAST.with(|l| l.replace(SUCCESS))
}

#[no_mangle]
pub extern "C" fn cudaPeekAtLastError() -> Error {
    if fault::asserted() {
        return fault::ASSERT;
    }
    LAST.with(|l| l.get())
}

/// The name and description of each code this runtime returns.
const MESSAGES: [(Error, &CStr, &CStr); 15] = [
    (INVALID_CONFIGURATION, c"cudaErrorInvalidConfiguration", c"invalid configuration argument"),
    (INVALID_DEVICE_FUNCTION, c"cudaErrorInvalidDeviceFunction", c"invalid device function"),
    (MISSING_CONFIGURATION, c"cudaErrorMissingConfiguration", c"__global__ function call is not configured"),
    (SUCCESS, c"cudaSuccess", c"no error"),
    (INVALID_VALUE, c"cudaErrorInvalidValue", c"invalid argument"),
    (INVALID_SYMBOL, c"cudaErrorInvalidSymbol", c"invalid device symbol"),
    (MEMORY_ALLOCATION, c"cudaErrorMemoryAllocation", c"out of memory"),
    (INITIALIZATION_ERROR, c"cudaErrorInitializationError", c"initialization error"),
    (INVALID_PITCH_VALUE, c"cudaErrorInvalidPitchValue", c"invalid pitch argument"),
    (INVALID_DEVICE_POINTER, c"cudaErrorInvalidDevicePointer", c"invalid device pointer"),
    (INVALID_MEMCPY_DIRECTION, c"cudaErrorInvalidMemcpyDirection", c"invalid copy direction for memcpy"),
    (INVALID_DEVICE, c"cudaErrorInvalidDevice", c"invalid device ordinal"),
    (INVALID_RESOURCE_HANDLE, c"cudaErrorInvalidResourceHandle", c"invalid resource handle"),
    (COOPERATIVE_LAUNCH_TOO_LARGE, c"cudaErrorCooperativeLaunchTooLarge", c"too many blocks in cooperative launch"),
    (fault::ASSERT, c"cudaErrorAssert", c"device-side assert triggered"),
];

#[no_mangle]
pub extern "C" fn cudaGetErrorString(e: Error) -> *const c_char {
    MESSAGES.iter().find(|m| m.0 == e).map_or(c"unrecognized error code", |m| m.2).as_ptr()
}

#[no_mangle]
pub extern "C" fn cudaGetErrorName(e: Error) -> *const c_char {
    MESSAGES.iter().find(|m| m.0 == e).map_or(c"unrecognized error code", |m| m.1).as_ptr()
}

/// A new opaque handle for a stream or an event: a one-byte allocation, so handles are
/// distinct non-null addresses that no special stream value can equal.
fn new_handle() -> usize {
    Box::into_raw(Box::new(0u8)) as usize
}

#[no_mangle]
pub extern "C" fn cudaStreamCreate(stream: *mut *mut c_void) -> Error {
    cudaStreamCreateWithFlags(stream, 0)
}

/// A table of handles in the state: streams or events.
type Handles<T> = fn(&mut State) -> &mut HashMap<usize, T>;

/// Makes a handle in `table`, holding `value`, and writes it to the caller's `slot`.
fn create<T>(slot: *mut *mut c_void, table: Handles<T>, value: T) -> Error {
    if slot.is_null() {
        return ret(INVALID_VALUE);
    }
    let h = new_handle();
    table(&mut state()).insert(h, value);
    put(slot, h as *mut c_void)
}

/// Removes `handle` from `table` and frees it; `INVALID_RESOURCE_HANDLE` where it is not there.
fn destroy<T>(handle: *mut c_void, table: Handles<T>) -> Error {
    if table(&mut state()).remove(&(handle as usize)).is_none() {
        return ret(INVALID_RESOURCE_HANDLE);
    }
    // SAFETY: made by `new_handle`, just removed from its table.
    drop(unsafe { Box::from_raw(handle as *mut u8) });
    SUCCESS
}

/// `cudaStreamDefault` and `cudaStreamNonBlocking`.
const STREAM_FLAGS: c_uint = 0x1;

/// Stream priorities as an H100 has them: 0 (the default, the lowest) to -5 (the highest).
/// A stream of a priority above the lowest takes a lane of its own priority on GPUs (see
/// [`lane_for`]); on simulated devices work runs in program order whatever its priority.
const PRIORITIES: (c_int, c_int) = (0, -5);

/// The program lane a new stream of `priority` takes. Streams of the default priority go
/// round the lanes that no other priority holds; each other priority holds a lane of its own,
/// taken from the top at its first stream, whose driver streams are made with it (a lane some
/// default stream already took then runs at that priority too: priorities order nothing,
/// they only favour).
fn lane_for(priority: c_int) -> u8 {
    use crate::devices::cuda::{set_lane_priority, PROGRAM_LANES};
    static HELD: std::sync::Mutex<Vec<(c_int, u8)>> = std::sync::Mutex::new(Vec::new());
    static NEXT_LANE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    if priority != PRIORITIES.0 {
        if let Some(&(_, lane)) = held.iter().find(|(p, _)| *p == priority) {
            return lane;
        }
        let lane = (PROGRAM_LANES - 1 - held.len()) as u8;
        held.push((priority, lane));
        set_lane_priority(lane, priority);
        return lane;
    }
    let free = PROGRAM_LANES - held.len();
    (NEXT_LANE.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % free) as u8
}

#[no_mangle]
pub extern "C" fn cudaStreamCreateWithFlags(stream: *mut *mut c_void, flags: c_uint) -> Error {
    cudaStreamCreateWithPriority(stream, flags, 0)
}

/// A priority outside the range is clamped to it, as CUDA does.
#[no_mangle]
pub extern "C" fn cudaStreamCreateWithPriority(stream: *mut *mut c_void, flags: c_uint, priority: c_int) -> Error {
    api("cudaStreamCreate", || {
        if flags & !STREAM_FLAGS != 0 {
            return ret(INVALID_VALUE);
        }
        let priority = priority.clamp(PRIORITIES.1, PRIORITIES.0);
        create(stream, |st| &mut st.streams, Stream { flags, priority, lane: lane_for(priority) })
    })
}

#[no_mangle]
pub extern "C" fn cudaDeviceGetStreamPriorityRange(least: *mut c_int, greatest: *mut c_int) -> Error {
    api("cudaDeviceGetStreamPriorityRange", || {
        // Either may be null: the caller asks for one end only.
        if !least.is_null() {
            put(least, PRIORITIES.0);
        }
        if !greatest.is_null() {
            put(greatest, PRIORITIES.1);
        }
        SUCCESS
    })
}

/// A stream's creation settings; the built-in streams have the defaults.
fn stream_info(stream: *mut c_void) -> Option<Stream> {
    if BUILTIN_STREAMS.contains(&(stream as usize)) {
        return Some(Stream::default());
    }
    state().streams.get(&(stream as usize)).copied()
}

#[no_mangle]
pub extern "C" fn cudaStreamGetPriority(stream: *mut c_void, priority: *mut c_int) -> Error {
    guard("cudaStreamGetPriority", || match (stream_info(stream), priority.is_null()) {
        (_, true) => ret(INVALID_VALUE),
        (Some(s), false) => put(priority, s.priority),
        (None, false) => ret(INVALID_RESOURCE_HANDLE),
    })
}

#[no_mangle]
pub extern "C" fn cudaStreamGetFlags(stream: *mut c_void, flags: *mut c_uint) -> Error {
    guard("cudaStreamGetFlags", || match (stream_info(stream), flags.is_null()) {
        (_, true) => ret(INVALID_VALUE),
        (Some(s), false) => put(flags, s.flags),
        (None, false) => ret(INVALID_RESOURCE_HANDLE),
    })
}

/// `cudaStreamAttrID`: the L2 access policy window (1) and the synchronization policy (3),
/// hints about caching and waiting that change no result.
const STREAM_ATTRIBUTES: [c_int; 2] = [1, 3];

#[no_mangle]
pub extern "C" fn cudaStreamSetAttribute(stream: *mut c_void, attr: c_int, value: *const c_void) -> Error {
    guard("cudaStreamSetAttribute", || {
        if value.is_null() || !STREAM_ATTRIBUTES.contains(&attr) {
            return ret(INVALID_VALUE);
        }
        ret(if stream_ok(stream) { SUCCESS } else { INVALID_RESOURCE_HANDLE })
    })
}

/// `cudaStreamCopyAttributes`: there is nothing to copy (attributes are hints).
#[no_mangle]
pub extern "C" fn cudaStreamCopyAttributes(dst: *mut c_void, src: *mut c_void) -> Error {
    guard("cudaStreamCopyAttributes", || {
        ret(if stream_ok(dst) && stream_ok(src) { SUCCESS } else { INVALID_RESOURCE_HANDLE })
    })
}

#[no_mangle]
pub extern "C" fn cudaStreamDestroy(stream: *mut c_void) -> Error {
    guard("cudaStreamDestroy", || destroy(stream, |st| &mut st.streams))
}

/// Runs `f(data)` once the stream's work before it is done: all work is done when the runtime
/// drains, so it runs now, on the caller's thread.
#[no_mangle]
pub extern "C" fn cudaLaunchHostFunc(
    stream: *mut c_void,
    f: Option<extern "C" fn(*mut c_void)>,
    data: *mut c_void,
) -> Error {
    api("cudaLaunchHostFunc", || {
        let Some(f) = f else { return ret(INVALID_VALUE) };
        if !stream_ok(stream) {
            return ret(INVALID_RESOURCE_HANDLE);
        }
        if let Some(graph) = graphs::capture_of(stream) {
            return graphs::record_host(graph, f, data);
        }
        inflight::drain();
        synchronize_managed();
        f(data);
        SUCCESS
    })
}

/// [`cudaLaunchHostFunc`] with CUDA's older callback, told the stream and its status.
#[no_mangle]
pub extern "C" fn cudaStreamAddCallback(
    stream: *mut c_void,
    f: Option<extern "C" fn(*mut c_void, Error, *mut c_void)>,
    data: *mut c_void,
    flags: c_uint,
) -> Error {
    api("cudaStreamAddCallback", || {
        let Some(f) = f else { return ret(INVALID_VALUE) };
        if flags != 0 {
            return ret(INVALID_VALUE);
        }
        if !stream_ok(stream) {
            return ret(INVALID_RESOURCE_HANDLE);
        }
        inflight::drain();
        synchronize_managed();
        f(stream, SUCCESS, data);
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cudaStreamSynchronize(stream: *mut c_void) -> Error {
    api("cudaStreamSynchronize", || {
        if !stream_ok(stream) {
            return ret(INVALID_RESOURCE_HANDLE);
        }
        inflight::drain();
        synchronize_managed();
        SUCCESS
    })
}

/// `cudaErrorNotReady`: not an error (the thread's last error stays as it was).
const NOT_READY: Error = 600;

/// Idle once the work given before is done, which it asks the GPUs without waiting, as CUDA
/// does: a program polls it while the host works.
#[no_mangle]
pub extern "C" fn cudaStreamQuery(stream: *mut c_void) -> Error {
    guard("cudaStreamQuery", || {
        fault::shield(|| {
            if !stream_ok(stream) {
                return ret(INVALID_RESOURCE_HANDLE);
            }
            match inflight::finished() {
                Ok(false) => return NOT_READY,
                Ok(true) => {}
                Err(e) => crate::fatal(&format!("a kernel launched earlier failed: {e}")),
            }
            inflight::drain();
            // Idle: the host may touch managed memory now, as after a synchronization.
            blocking(SUCCESS)
        })
    })
}

/// Work runs in program order (see the module's doc), so whatever `event` marks has been
/// issued before anything `stream` is given next: the wait is already kept.
#[no_mangle]
pub extern "C" fn cudaStreamWaitEvent(stream: *mut c_void, event: *mut c_void, _flags: c_uint) -> Error {
    guard("cudaStreamWaitEvent", || {
        if !stream_ok(stream) || !state().events.contains_key(&(event as usize)) {
            return ret(INVALID_RESOURCE_HANDLE);
        }
        // An event of a capture joins the waiting stream to it.
        graphs::join(stream, event);
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cudaEventCreate(event: *mut *mut c_void) -> Error {
    cudaEventCreateWithFlags(event, 0)
}

/// `cudaEventBlockingSync`, `cudaEventDisableTiming` and `cudaEventInterprocess`.
const EVENT_FLAGS: c_uint = 0x7;
const EVENT_DISABLE_TIMING: c_uint = 0x2;

#[no_mangle]
pub extern "C" fn cudaEventCreateWithFlags(event: *mut *mut c_void, flags: c_uint) -> Error {
    api("cudaEventCreate", || {
        if flags & !EVENT_FLAGS != 0 {
            return ret(INVALID_VALUE);
        }
        create(event, |st| &mut st.events, Stamp::new(flags & EVENT_DISABLE_TIMING == 0))
    })
}

#[no_mangle]
pub extern "C" fn cudaEventDestroy(event: *mut c_void) -> Error {
    guard("cudaEventDestroy", || destroy(event, |st| &mut st.events))
}

/// `f` on the event's stamp, under the table's lock (the driver calls it makes do not wait);
/// `None` where `event` is not an event.
fn with_event<R>(event: *mut c_void, f: impl FnOnce(&mut Stamp) -> R) -> Option<R> {
    state().events.get_mut(&(event as usize)).map(f)
}

/// Ends the program where the work an event waits for failed, as a drain does (CUDA reports
/// a kernel's fault at the next call that waits).
fn or_fatal<T>(r: Result<T, String>) -> T {
    r.unwrap_or_else(|e| crate::fatal(&format!("a kernel launched earlier failed: {e}")))
}

/// Marks the present end of the work given so far, without waiting for it
/// ([`crate::devices::stamps`]).
#[no_mangle]
pub extern "C" fn cudaEventRecord(event: *mut c_void, stream: *mut c_void) -> Error {
    api("cudaEventRecord", || {
        if !stream_ok(stream) {
            return ret(INVALID_RESOURCE_HANDLE);
        }
        if let Some(graph) = graphs::capture_of(stream) {
            // Recorded into the capture: a stream that waits for it joins.
            if !state().events.contains_key(&(event as usize)) {
                return ret(INVALID_RESOURCE_HANDLE);
            }
            graphs::record_event(graph, event);
            return SUCCESS;
        }
        let Some(r) = with_event(event, Stamp::record) else { return ret(INVALID_RESOURCE_HANDLE) };
        or_fatal(r);
        SUCCESS
    })
}

/// `cudaEventRecordDefault` (0) and `cudaEventRecordExternal` (1, for graphs; as the default
/// outside them).
#[no_mangle]
pub extern "C" fn cudaEventRecordWithFlags(event: *mut c_void, stream: *mut c_void, flags: c_uint) -> Error {
    if flags > 1 {
        return guard("cudaEventRecordWithFlags", || ret(INVALID_VALUE));
    }
    cudaEventRecord(event, stream)
}

/// Waits for the work before the event. Where a launch in flight may wait on the host
/// ([`crate::devices::in_place::pending`]), only for that work; otherwise for all of it (a
/// drain), after which the host may touch managed memory, as after a synchronization.
#[no_mangle]
pub extern "C" fn cudaEventSynchronize(event: *mut c_void) -> Error {
    api("cudaEventSynchronize", || {
        let Some(waiter) = with_event(event, |s| s.waiter()) else { return ret(INVALID_RESOURCE_HANDLE) };
        if crate::devices::in_place::pending() {
            or_fatal(waiter.wait());
            return SUCCESS;
        }
        inflight::drain();
        blocking(SUCCESS)
    })
}

/// Whether the work before the event is done, asked of the GPUs without waiting for it; once
/// it is, as [`cudaEventSynchronize`].
#[no_mangle]
pub extern "C" fn cudaEventQuery(event: *mut c_void) -> Error {
    api("cudaEventQuery", || {
        let Some(reached) = with_event(event, |s| s.reached()) else { return ret(INVALID_RESOURCE_HANDLE) };
        if !or_fatal(reached) {
            return NOT_READY;
        }
        if crate::devices::in_place::pending() {
            return SUCCESS;
        }
        inflight::drain();
        blocking(SUCCESS)
    })
}

/// Milliseconds from `start` to `end`, both recorded ([`Stamp::elapsed`]); `cudaErrorNotReady`
/// while `end` is not reached.
#[no_mangle]
pub extern "C" fn cudaEventElapsedTime(ms: *mut f32, start: *mut c_void, end: *mut c_void) -> Error {
    guard("cudaEventElapsedTime", || {
        if ms.is_null() {
            return ret(INVALID_VALUE);
        }
        let r = {
            let st = state();
            let (Some(a), Some(b)) = (st.events.get(&(start as usize)), st.events.get(&(end as usize))) else {
                return ret(INVALID_RESOURCE_HANDLE);
            };
            if a.timing() && b.timing() {
                Some(a.elapsed(b))
            } else {
                None
            }
        };
        match r.map(or_fatal) {
            None => ret(INVALID_RESOURCE_HANDLE),
            Some(None) => NOT_READY,
            Some(Some(t)) => put(ms, t),
        }
    })
}

/// Bytes of `struct cudaDeviceProp` in CUDA 12.4's `driver_types.h`, and the offsets of the
/// fields filled in (`tests/inputs/cudart.c` reads them back through NVIDIA's header).
const DEVICE_PROP_SIZE: usize = 1032;
mod prop {
    pub const NAME: usize = 0;
    pub const TOTAL_GLOBAL_MEM: usize = 288;
    pub const SHARED_MEM_PER_BLOCK: usize = 296;
    pub const REGS_PER_BLOCK: usize = 304;
    pub const WARP_SIZE: usize = 308;
    pub const MEM_PITCH: usize = 312;
    pub const MAX_THREADS_PER_BLOCK: usize = 320;
    pub const MAX_THREADS_DIM: usize = 324;
    pub const MAX_GRID_SIZE: usize = 336;
    pub const CLOCK_RATE: usize = 348;
    pub const TOTAL_CONST_MEM: usize = 352;
    pub const MAJOR: usize = 360;
    pub const MINOR: usize = 364;
    pub const TEXTURE_ALIGNMENT: usize = 368;
    pub const MULTI_PROCESSOR_COUNT: usize = 388;
    pub const CAN_MAP_HOST_MEMORY: usize = 400;
    pub const CONCURRENT_KERNELS: usize = 576;
    pub const ASYNC_ENGINE_COUNT: usize = 600;
    pub const UNIFIED_ADDRESSING: usize = 604;
    pub const MEMORY_CLOCK_RATE: usize = 608;
    pub const MEMORY_BUS_WIDTH: usize = 612;
    pub const L2_CACHE_SIZE: usize = 616;
    pub const MAX_THREADS_PER_MULTIPROCESSOR: usize = 624;
    pub const SHARED_MEM_PER_MULTIPROCESSOR: usize = 640;
    pub const REGS_PER_MULTIPROCESSOR: usize = 648;
    pub const MANAGED_MEMORY: usize = 652;
    pub const COOPERATIVE_LAUNCH: usize = 688;
    pub const SHARED_MEM_PER_BLOCK_OPTIN: usize = 696;
}

/// `struct cudaDeviceProp` for `d`, as bytes; fields not filled in are zero.
fn device_prop(d: &DeviceLimits) -> [u8; DEVICE_PROP_SIZE] {
    let mut b = [0u8; DEVICE_PROP_SIZE];
    let mut put_bytes = |at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
    let name = d.name.as_bytes();
    put_bytes(prop::NAME, &name[..name.len().min(255)]);
    let int = |v: u32| (v.min(i32::MAX as u32) as i32).to_ne_bytes();
    let size = |v: u64| (v as usize).to_ne_bytes();
    put_bytes(prop::TOTAL_GLOBAL_MEM, &size(d.total_memory));
    put_bytes(prop::SHARED_MEM_PER_BLOCK, &size(d.shared_per_block));
    put_bytes(prop::REGS_PER_BLOCK, &int(d.registers_per_block));
    put_bytes(prop::WARP_SIZE, &int(d.warp_size));
    put_bytes(prop::MEM_PITCH, &size(i32::MAX as u64));
    put_bytes(prop::MAX_THREADS_PER_BLOCK, &int(d.max_threads_per_block));
    for i in 0..3 {
        put_bytes(prop::MAX_THREADS_DIM + 4 * i, &int(d.max_block[i]));
        put_bytes(prop::MAX_GRID_SIZE + 4 * i, &int(d.max_grid[i]));
    }
    put_bytes(prop::CLOCK_RATE, &int(d.clock_khz));
    put_bytes(prop::TOTAL_CONST_MEM, &size(d.constant_memory));
    put_bytes(prop::MAJOR, &int(d.capability.0));
    put_bytes(prop::MINOR, &int(d.capability.1));
    put_bytes(prop::TEXTURE_ALIGNMENT, &size(512));
    put_bytes(prop::MULTI_PROCESSOR_COUNT, &int(d.multiprocessors));
    put_bytes(prop::CAN_MAP_HOST_MEMORY, &int(1));
    put_bytes(prop::CONCURRENT_KERNELS, &int(1));
    put_bytes(prop::ASYNC_ENGINE_COUNT, &int(2));
    put_bytes(prop::UNIFIED_ADDRESSING, &int(1));
    put_bytes(prop::MEMORY_CLOCK_RATE, &int(d.memory_clock_khz));
    put_bytes(prop::MEMORY_BUS_WIDTH, &int(d.memory_bus_bits));
    put_bytes(prop::L2_CACHE_SIZE, &int(d.l2_bytes));
    put_bytes(prop::MAX_THREADS_PER_MULTIPROCESSOR, &int(d.max_threads_per_multiprocessor));
    put_bytes(prop::SHARED_MEM_PER_MULTIPROCESSOR, &size(d.shared_per_multiprocessor));
    put_bytes(prop::REGS_PER_MULTIPROCESSOR, &int(d.registers_per_multiprocessor));
    put_bytes(prop::MANAGED_MEMORY, &int(1));
    put_bytes(prop::COOPERATIVE_LAUNCH, &int(1));
    put_bytes(prop::SHARED_MEM_PER_BLOCK_OPTIN, &size(d.shared_per_block_optin));
    b
}

/// The properties of the one device, or the error code for a device ordinal other than 0 or
/// devices that cannot say.
fn limits_of(device: c_int) -> Result<DeviceLimits, Error> {
    if device != 0 {
        return Err(INVALID_DEVICE);
    }
    devices().limits().map_err(|e| {
        eprintln!("hpvm-mgpu: reading the device properties: {e}");
        INITIALIZATION_ERROR
    })
}

/// CUDA 12's name for `cudaGetDeviceProperties` (its header renames calls to it).
#[no_mangle]
pub extern "C" fn cudaGetDeviceProperties_v2(out: *mut c_void, device: c_int) -> Error {
    api("cudaGetDeviceProperties", || {
        if out.is_null() {
            return ret(INVALID_VALUE);
        }
        match limits_of(device) {
            Ok(d) => put(out as *mut [u8; DEVICE_PROP_SIZE], device_prop(&d)),
            Err(e) => ret(e),
        }
    })
}

#[no_mangle]
pub extern "C" fn cudaGetDeviceProperties(out: *mut c_void, device: c_int) -> Error {
    cudaGetDeviceProperties_v2(out, device)
}

/// `cudaDeviceGetAttribute` for the attributes `cudaDeviceProp` has (`cudaDeviceAttr`
/// values, which are the driver's `CUdevice_attribute`); others are `INVALID_VALUE`.
#[no_mangle]
pub extern "C" fn cudaDeviceGetAttribute(value: *mut c_int, attribute: c_int, device: c_int) -> Error {
    api("cudaDeviceGetAttribute", || {
        let d = match limits_of(device) {
            Ok(d) => d,
            Err(e) => return ret(e),
        };
        let v: u64 = match attribute {
            1 => d.max_threads_per_block as u64,
            2..=4 => d.max_block[(attribute - 2) as usize] as u64,
            5..=7 => d.max_grid[(attribute - 5) as usize] as u64,
            8 => d.shared_per_block,
            9 => d.constant_memory,
            10 => d.warp_size as u64,
            // As `cudaDeviceProp`'s `memPitch` and `textureAlignment`.
            11 => i32::MAX as u64,
            12 => d.registers_per_block as u64,
            13 => d.clock_khz as u64,
            14 => 512,
            // Copies overlap kernels (`deviceOverlap`), there is no watchdog, the device is
            // not integrated with the host, and host memory can be mapped.
            15 | 19 => 1,
            17 | 18 => 0,
            16 => d.multiprocessors as u64,
            // cudaComputeModeDefault: the one device is shared, as `cudaDeviceProp` says (CUDA's
            // samples ask before they choose a device).
            20 => 0,
            // Concurrent kernels and two copy engines, as `cudaDeviceProp` says; no ECC, TCC
            // or PCI location to report (the device is several, or none).
            31 => 1,
            32..=35 | 50 => 0,
            40 => 2,
            36 => d.memory_clock_khz as u64,
            37 => d.memory_bus_bits as u64,
            38 => d.l2_bytes as u64,
            39 => d.max_threads_per_multiprocessor as u64,
            // Unified addressing and managed memory, as `cudaDeviceProp` says.
            41 | 83 => 1,
            75 => d.capability.0 as u64,
            76 => d.capability.1 as u64,
            // Stream priorities (`cudaDeviceGetStreamPriorityRange`), caching of globals and
            // locals in L1.
            78..=80 => 1,
            81 => d.shared_per_multiprocessor,
            82 => d.registers_per_multiprocessor as u64,
            // One board, one group.
            84 | 85 => 0,
            // Managed memory the host may touch only after a synchronization (as on a GPU
            // without concurrent managed access), registered host memory, memory pools.
            86 | 88 | 89 | 91 | 100 | 101 => 0,
            90 | 99 | 115 => 1,
            // Cooperative launches run on one device (`cudaLaunchCooperativeKernel`); there is
            // no launch over several devices' grids at once.
            95 => 1,
            96 => 0,
            97 => d.shared_per_block_optin,
            106 => (d.max_threads_per_multiprocessor / 64).max(1) as u64,
            // No persisting L2 lines or access-policy windows (the hint is taken and ignored).
            108 | 109 => 0,
            _ => return ret(INVALID_VALUE),
        };
        put(value, v.min(i32::MAX as u64) as c_int)
    })
}
