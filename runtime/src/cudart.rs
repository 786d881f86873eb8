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
//! Ordering: every call returns with its work done (streams and asynchronous copies are
//! orderings the runtime already satisfies by finishing each call), so an event records the
//! host's clock at the moment all work before it has finished, and the time between two
//! events is that of all the work between them, on however many GPUs it ran.
//!
//! Errors are CUDA's codes (values of `cudaError_t` in CUDA 12.4's `driver_types.h`); each
//! failing call also becomes the calling thread's last error (`cudaGetLastError`). What is
//! not implemented here is not defined, so a program using it fails at link time naming it.
//!
//! Not yet: kernel launches (`<<<...>>>`, `cudaLaunchKernel`), device properties, symbols of
//! `__constant__` data beyond host copies (`cudaMemcpyToSymbol` copies into the host's shadow
//! variable, which is what kernels will read once they are compiled from CUDA sources).

// CUDA's names.
#![allow(non_snake_case)]
// C entry points: their pointer arguments are valid as CUDA's API documents (the C caller's
// contract, checked for null here); no Rust code calls them.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use crate::abi::guard;
use crate::memory;
use crate::stats;
use std::alloc::Layout;
use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

/// `cudaError_t`.
pub type Error = c_int;

pub const SUCCESS: Error = 0;
pub const INVALID_VALUE: Error = 1;
pub const MEMORY_ALLOCATION: Error = 2;
pub const INVALID_DEVICE_POINTER: Error = 17;
pub const INVALID_MEMCPY_DIRECTION: Error = 21;
pub const INVALID_DEVICE: Error = 101;
pub const INVALID_RESOURCE_HANDLE: Error = 400;

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

/// Returns `e`, making it the thread's last error when it is one.
fn ret(e: Error) -> Error {
    if e != SUCCESS {
        LAST.with(|l| l.set(e));
    }
    e
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

#[derive(Default)]
struct State {
    /// Allocations by address: layout and kind.
    allocations: HashMap<usize, (Layout, Kind)>,
    streams: HashSet<usize>,
    /// Events by address: when last recorded.
    events: HashMap<usize, Option<Instant>>,
}

fn state() -> MutexGuard<'static, State> {
    static STATE: std::sync::OnceLock<Mutex<State>> = std::sync::OnceLock::new();
    STATE.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner())
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
    let p = unsafe { std::alloc::alloc(layout) };
    if p.is_null() {
        return MEMORY_ALLOCATION;
    }
    if kind != Kind::PageLocked {
        memory::track(p as usize, size);
    }
    state().allocations.insert(p as usize, (layout, kind));
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
    drop(st);
    if kind != Kind::PageLocked {
        memory::discard(ptr as usize);
    }
    // SAFETY: allocated by `allocate` with this layout; removed from the table, so freed once.
    unsafe { std::alloc::dealloc(ptr as *mut u8, layout) };
    SUCCESS
}

/// Copies `n` bytes, keeping the coherence maps exact: the source made current on the host
/// first where it is device memory, the destination's device copies made stale.
fn copy(dst: *mut c_void, src: *const c_void, n: usize, kind: c_int) -> Error {
    if n == 0 {
        return SUCCESS;
    }
    if dst.is_null() || src.is_null() {
        return INVALID_VALUE;
    }
    let on_device = |p: usize| memory::tracked(p, n).is_some();
    let (src_dev, dst_dev) = (on_device(src as usize), on_device(dst as usize));
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
    if src_dev {
        memory::request(src as usize, n);
    }
    if dst_dev {
        memory::host_overwrites(dst as usize, n);
    }
    // SAFETY: the program's pointers to `n` bytes each (device memory is host memory here);
    // they may overlap within one buffer.
    unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, n) };
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
    BUILTIN_STREAMS.contains(&(stream as usize)) || state().streams.contains(&(stream as usize))
}

/// Makes the host current on managed memory, which the program may read after a
/// synchronization.
fn synchronize_managed() {
    let managed: Vec<(usize, usize)> = state()
        .allocations
        .iter()
        .filter(|(_, (_, k))| *k == Kind::Managed)
        .map(|(&p, (l, _))| (p, l.size()))
        .collect();
    for (p, size) in managed {
        memory::request(p, size);
    }
}

#[no_mangle]
pub extern "C" fn cudaMalloc(ptr: *mut *mut c_void, size: usize) -> Error {
    guard("cudaMalloc", || {
        stats::install();
        ret(allocate(ptr, size, Kind::Device))
    })
}

#[no_mangle]
pub extern "C" fn cudaMallocManaged(ptr: *mut *mut c_void, size: usize, _flags: c_uint) -> Error {
    guard("cudaMallocManaged", || {
        stats::install();
        ret(allocate(ptr, size, Kind::Managed))
    })
}

#[no_mangle]
pub extern "C" fn cudaMallocHost(ptr: *mut *mut c_void, size: usize) -> Error {
    guard("cudaMallocHost", || ret(allocate(ptr, size, Kind::PageLocked)))
}

#[no_mangle]
pub extern "C" fn cudaHostAlloc(ptr: *mut *mut c_void, size: usize, _flags: c_uint) -> Error {
    guard("cudaHostAlloc", || ret(allocate(ptr, size, Kind::PageLocked)))
}

#[no_mangle]
pub extern "C" fn cudaFree(ptr: *mut c_void) -> Error {
    guard("cudaFree", || ret(release(ptr, &[Kind::Device, Kind::Managed])))
}

#[no_mangle]
pub extern "C" fn cudaFreeHost(ptr: *mut c_void) -> Error {
    guard("cudaFreeHost", || ret(release(ptr, &[Kind::PageLocked])))
}

#[no_mangle]
pub extern "C" fn cudaMemcpy(dst: *mut c_void, src: *const c_void, n: usize, kind: c_int) -> Error {
    guard("cudaMemcpy", || ret(copy(dst, src, n, kind)))
}

#[no_mangle]
pub extern "C" fn cudaMemcpyAsync(
    dst: *mut c_void,
    src: *const c_void,
    n: usize,
    kind: c_int,
    stream: *mut c_void,
) -> Error {
    guard("cudaMemcpyAsync", || ret(if stream_ok(stream) { copy(dst, src, n, kind) } else { INVALID_RESOURCE_HANDLE }))
}

/// `__constant__` and `__device__` variables: the host's shadow variable is the data.
#[no_mangle]
pub extern "C" fn cudaMemcpyToSymbol(
    symbol: *const c_void,
    src: *const c_void,
    n: usize,
    offset: usize,
    kind: c_int,
) -> Error {
    guard("cudaMemcpyToSymbol", || {
        ret(match kind {
            HOST_TO_DEVICE | DEVICE_TO_DEVICE | DEFAULT if !symbol.is_null() => {
                let kind = if kind == DEVICE_TO_DEVICE { DEVICE_TO_HOST } else { HOST_TO_HOST };
                copy((symbol as usize + offset) as *mut c_void, src, n, kind)
            }
            HOST_TO_DEVICE | DEVICE_TO_DEVICE | DEFAULT => INVALID_VALUE,
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
    guard("cudaMemcpyFromSymbol", || {
        ret(match kind {
            DEVICE_TO_HOST | DEVICE_TO_DEVICE | DEFAULT if !symbol.is_null() => {
                let kind = if kind == DEVICE_TO_DEVICE { HOST_TO_DEVICE } else { HOST_TO_HOST };
                copy(dst, (symbol as usize + offset) as *const c_void, n, kind)
            }
            DEVICE_TO_HOST | DEVICE_TO_DEVICE | DEFAULT => INVALID_VALUE,
            _ => INVALID_MEMCPY_DIRECTION,
        })
    })
}

fn set(ptr: *mut c_void, value: c_int, n: usize) -> Error {
    if n == 0 {
        return SUCCESS;
    }
    if ptr.is_null() || memory::tracked(ptr as usize, n).is_none() {
        return INVALID_VALUE;
    }
    memory::host_overwrites(ptr as usize, n);
    // SAFETY: `n` bytes of a tracked buffer (checked above), host memory.
    unsafe { std::ptr::write_bytes(ptr as *mut u8, value as u8, n) };
    SUCCESS
}

#[no_mangle]
pub extern "C" fn cudaMemset(ptr: *mut c_void, value: c_int, n: usize) -> Error {
    guard("cudaMemset", || ret(set(ptr, value, n)))
}

#[no_mangle]
pub extern "C" fn cudaMemsetAsync(ptr: *mut c_void, value: c_int, n: usize, stream: *mut c_void) -> Error {
    guard("cudaMemsetAsync", || ret(if stream_ok(stream) { set(ptr, value, n) } else { INVALID_RESOURCE_HANDLE }))
}

#[no_mangle]
pub extern "C" fn cudaDeviceSynchronize() -> Error {
    guard("cudaDeviceSynchronize", || {
        synchronize_managed();
        SUCCESS
    })
}

/// Frees every allocation, stream and event, as CUDA's reset destroys the context.
#[no_mangle]
pub extern "C" fn cudaDeviceReset() -> Error {
    guard("cudaDeviceReset", || {
        let all: Vec<(usize, Kind)> = state().allocations.iter().map(|(&p, &(_, k))| (p, k)).collect();
        for (p, k) in all {
            release(p as *mut c_void, &[k]);
        }
        let mut st = state();
        for s in st.streams.drain() {
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
    guard("cudaSetDevice", || ret(if device == 0 { SUCCESS } else { INVALID_DEVICE }))
}

#[no_mangle]
pub extern "C" fn cudaGetDevice(device: *mut c_int) -> Error {
    guard("cudaGetDevice", || put(device, 0))
}

#[no_mangle]
pub extern "C" fn cudaGetLastError() -> Error {
    LAST.with(|l| l.replace(SUCCESS))
}

#[no_mangle]
pub extern "C" fn cudaPeekAtLastError() -> Error {
    LAST.with(|l| l.get())
}

/// The name and description of each code this runtime returns.
const MESSAGES: [(Error, &CStr, &CStr); 7] = [
    (SUCCESS, c"cudaSuccess", c"no error"),
    (INVALID_VALUE, c"cudaErrorInvalidValue", c"invalid argument"),
    (MEMORY_ALLOCATION, c"cudaErrorMemoryAllocation", c"out of memory"),
    (INVALID_DEVICE_POINTER, c"cudaErrorInvalidDevicePointer", c"invalid device pointer"),
    (INVALID_MEMCPY_DIRECTION, c"cudaErrorInvalidMemcpyDirection", c"invalid copy direction for memcpy"),
    (INVALID_DEVICE, c"cudaErrorInvalidDevice", c"invalid device ordinal"),
    (INVALID_RESOURCE_HANDLE, c"cudaErrorInvalidResourceHandle", c"invalid resource handle"),
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

#[no_mangle]
pub extern "C" fn cudaStreamCreateWithFlags(stream: *mut *mut c_void, _flags: c_uint) -> Error {
    guard("cudaStreamCreate", || {
        if stream.is_null() {
            return ret(INVALID_VALUE);
        }
        let h = new_handle();
        state().streams.insert(h);
        put(stream, h as *mut c_void)
    })
}

#[no_mangle]
pub extern "C" fn cudaStreamDestroy(stream: *mut c_void) -> Error {
    guard("cudaStreamDestroy", || {
        if !state().streams.remove(&(stream as usize)) {
            return ret(INVALID_RESOURCE_HANDLE);
        }
        // SAFETY: made by `new_handle`, just removed from the table.
        drop(unsafe { Box::from_raw(stream as *mut u8) });
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cudaStreamSynchronize(stream: *mut c_void) -> Error {
    guard("cudaStreamSynchronize", || {
        if !stream_ok(stream) {
            return ret(INVALID_RESOURCE_HANDLE);
        }
        synchronize_managed();
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cudaStreamQuery(stream: *mut c_void) -> Error {
    guard("cudaStreamQuery", || ret(if stream_ok(stream) { SUCCESS } else { INVALID_RESOURCE_HANDLE }))
}

#[no_mangle]
pub extern "C" fn cudaEventCreate(event: *mut *mut c_void) -> Error {
    cudaEventCreateWithFlags(event, 0)
}

#[no_mangle]
pub extern "C" fn cudaEventCreateWithFlags(event: *mut *mut c_void, _flags: c_uint) -> Error {
    guard("cudaEventCreate", || {
        if event.is_null() {
            return ret(INVALID_VALUE);
        }
        let h = new_handle();
        state().events.insert(h, None);
        put(event, h as *mut c_void)
    })
}

#[no_mangle]
pub extern "C" fn cudaEventDestroy(event: *mut c_void) -> Error {
    guard("cudaEventDestroy", || {
        if state().events.remove(&(event as usize)).is_none() {
            return ret(INVALID_RESOURCE_HANDLE);
        }
        // SAFETY: made by `new_handle`, just removed from the table.
        drop(unsafe { Box::from_raw(event as *mut u8) });
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cudaEventRecord(event: *mut c_void, stream: *mut c_void) -> Error {
    guard("cudaEventRecord", || {
        if !stream_ok(stream) {
            return ret(INVALID_RESOURCE_HANDLE);
        }
        match state().events.get_mut(&(event as usize)) {
            Some(at) => {
                *at = Some(Instant::now());
                SUCCESS
            }
            None => ret(INVALID_RESOURCE_HANDLE),
        }
    })
}

#[no_mangle]
pub extern "C" fn cudaEventSynchronize(event: *mut c_void) -> Error {
    guard("cudaEventSynchronize", || {
        ret(if state().events.contains_key(&(event as usize)) { SUCCESS } else { INVALID_RESOURCE_HANDLE })
    })
}

#[no_mangle]
pub extern "C" fn cudaEventQuery(event: *mut c_void) -> Error {
    cudaEventSynchronize(event)
}

/// Milliseconds from `start` to `end`, both recorded.
#[no_mangle]
pub extern "C" fn cudaEventElapsedTime(ms: *mut f32, start: *mut c_void, end: *mut c_void) -> Error {
    guard("cudaEventElapsedTime", || {
        if ms.is_null() {
            return ret(INVALID_VALUE);
        }
        let st = state();
        let (Some(Some(a)), Some(Some(b))) = (st.events.get(&(start as usize)), st.events.get(&(end as usize))) else {
            return ret(INVALID_RESOURCE_HANDLE);
        };
        let d = if b >= a { b.duration_since(*a).as_secs_f64() } else { -a.duration_since(*b).as_secs_f64() };
        put(ms, (d * 1e3) as f32)
    })
}
