//! Stream-ordered allocation (`cudaMallocAsync`, `cudaFreeAsync`) and memory pools.
//!
//! Work runs in program order (see the parent module), so an allocation made "in stream
//! order" is one made now: `cudaMallocAsync` is `cudaMalloc` and `cudaFreeAsync` is
//! `cudaFree`, after the stream is checked. Pools are handles whose attributes are kept and
//! reported; every pool allocates as `cudaMalloc` does (the runtime's buffers are virtual,
//! and where their bytes live is its choice, not the pool's).

use super::{allocate, api, guard, put, release, ret, stream_ok, Error, Kind, SUCCESS};
use super::{INVALID_DEVICE, INVALID_RESOURCE_HANDLE, INVALID_VALUE};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// `cudaMemPoolAttr`: the reuse policies (1-3) and the release threshold (4), kept as set;
/// the memory figures (5-8), reported.
const REUSE_POLICIES: std::ops::RangeInclusive<c_int> = 1..=3;
const RELEASE_THRESHOLD: c_int = 4;
const MEMORY_FIGURES: std::ops::RangeInclusive<c_int> = 5..=8;

/// A pool's attributes as set: the reuse policies (ints) and the release threshold.
#[derive(Clone, Copy, Default)]
struct Pool {
    reuse: [c_int; 3],
    release_threshold: u64,
}

/// Pools by handle. The default pool is made at the first call that names it.
static POOLS: Mutex<Option<HashMap<usize, Pool>>> = Mutex::new(None);

/// The device's default pool: a handle no other pool or stream can have.
fn default_pool() -> usize {
    static DEFAULT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *DEFAULT.get_or_init(|| {
        let h = Box::into_raw(Box::new(0u8)) as usize;
        // The policies CUDA's default pool starts with: all three reuse kinds allowed.
        let pool = Pool { reuse: [1, 1, 1], release_threshold: 0 };
        POOLS.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::new).insert(h, pool);
        h
    })
}

/// `f` on the pool `pool`, or `cudaErrorInvalidValue` where it is none.
fn with_pool(pool: *mut c_void, f: impl FnOnce(&mut Pool) -> Error) -> Error {
    default_pool();
    let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
    match pools.get_or_insert_with(HashMap::new).get_mut(&(pool as usize)) {
        Some(p) => f(p),
        None => ret(INVALID_VALUE),
    }
}

/// The most device memory allocated at once, as seen at stream-ordered allocations.
static HIGH: AtomicU64 = AtomicU64::new(0);

/// The bytes of device memory allocated now.
fn device_bytes() -> u64 {
    super::state().allocations.values().filter(|(_, k)| *k == Kind::Device).map(|(l, _)| l.size() as u64).sum()
}

#[no_mangle]
pub extern "C" fn cudaMallocAsync(ptr: *mut *mut c_void, size: usize, stream: *mut c_void) -> Error {
    api("cudaMallocAsync", || {
        if !stream_ok(stream) {
            return ret(INVALID_RESOURCE_HANDLE);
        }
        crate::stats::install();
        let e = allocate(ptr, size, Kind::Device);
        HIGH.fetch_max(device_bytes(), Ordering::Relaxed);
        ret(e)
    })
}

#[no_mangle]
pub extern "C" fn cudaMallocFromPoolAsync(
    ptr: *mut *mut c_void,
    size: usize,
    pool: *mut c_void,
    stream: *mut c_void,
) -> Error {
    api("cudaMallocFromPoolAsync", || {
        if with_pool(pool, |_| SUCCESS) != SUCCESS {
            return ret(INVALID_VALUE);
        }
        cudaMallocAsync(ptr, size, stream)
    })
}

#[no_mangle]
pub extern "C" fn cudaFreeAsync(ptr: *mut c_void, stream: *mut c_void) -> Error {
    api("cudaFreeAsync", || {
        if !stream_ok(stream) {
            return ret(INVALID_RESOURCE_HANDLE);
        }
        ret(release(ptr, &[Kind::Device]))
    })
}

#[no_mangle]
pub extern "C" fn cudaDeviceGetDefaultMemPool(pool: *mut *mut c_void, device: c_int) -> Error {
    guard("cudaDeviceGetDefaultMemPool", || {
        if device != 0 {
            return ret(INVALID_DEVICE);
        }
        put(pool, default_pool() as *mut c_void)
    })
}

/// The current pool is always the default one ([`cudaDeviceSetMemPool`] takes only it).
#[no_mangle]
pub extern "C" fn cudaDeviceGetMemPool(pool: *mut *mut c_void, device: c_int) -> Error {
    cudaDeviceGetDefaultMemPool(pool, device)
}

#[no_mangle]
pub extern "C" fn cudaDeviceSetMemPool(device: c_int, pool: *mut c_void) -> Error {
    guard("cudaDeviceSetMemPool", || {
        if device != 0 {
            return ret(INVALID_DEVICE);
        }
        with_pool(pool, |_| SUCCESS)
    })
}

/// `props` (a `cudaMemPoolProps`) is not read: every pool allocates device memory of the one
/// device the program sees.
#[no_mangle]
pub extern "C" fn cudaMemPoolCreate(pool: *mut *mut c_void, props: *const c_void) -> Error {
    guard("cudaMemPoolCreate", || {
        if pool.is_null() || props.is_null() {
            return ret(INVALID_VALUE);
        }
        default_pool();
        let h = Box::into_raw(Box::new(0u8)) as usize;
        POOLS.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::new).insert(h, Pool::default());
        put(pool, h as *mut c_void)
    })
}

#[no_mangle]
pub extern "C" fn cudaMemPoolDestroy(pool: *mut c_void) -> Error {
    guard("cudaMemPoolDestroy", || {
        if pool as usize == default_pool() {
            return ret(INVALID_VALUE);
        }
        let removed =
            POOLS.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::new).remove(&(pool as usize));
        match removed {
            // SAFETY: made by `cudaMemPoolCreate` as a boxed byte; just removed, freed once.
            Some(_) => drop(unsafe { Box::from_raw(pool as *mut u8) }),
            None => return ret(INVALID_VALUE),
        }
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cudaMemPoolSetAttribute(pool: *mut c_void, attr: c_int, value: *mut c_void) -> Error {
    guard("cudaMemPoolSetAttribute", || {
        if value.is_null() {
            return ret(INVALID_VALUE);
        }
        with_pool(pool, |p| match attr {
            a if REUSE_POLICIES.contains(&a) => {
                // SAFETY: CUDA documents an int for the reuse policies.
                p.reuse[(a - 1) as usize] = unsafe { *(value as *const c_int) };
                SUCCESS
            }
            RELEASE_THRESHOLD => {
                // SAFETY: CUDA documents a cuuint64_t for the threshold.
                p.release_threshold = unsafe { *(value as *const u64) };
                SUCCESS
            }
            _ => ret(INVALID_VALUE),
        })
    })
}

#[no_mangle]
pub extern "C" fn cudaMemPoolGetAttribute(pool: *mut c_void, attr: c_int, value: *mut c_void) -> Error {
    guard("cudaMemPoolGetAttribute", || {
        if value.is_null() {
            return ret(INVALID_VALUE);
        }
        with_pool(pool, |p| match attr {
            a if REUSE_POLICIES.contains(&a) => put(value as *mut c_int, p.reuse[(a - 1) as usize]),
            RELEASE_THRESHOLD => put(value as *mut u64, p.release_threshold),
            // Nothing is held back in a pool (freed memory goes back at once), so reserved
            // and used memory are the same: the device memory allocated now, and the most
            // allocated at once through the pools.
            a if MEMORY_FIGURES.contains(&a) => {
                let now = device_bytes();
                let high = HIGH.fetch_max(now, Ordering::Relaxed).max(now);
                put(value as *mut u64, if a % 2 == 1 { now } else { high })
            }
            _ => ret(INVALID_VALUE),
        })
    })
}

/// `cudaMemAccessDesc`: a location (type 1, a device, and its ordinal) and the access flags
/// (0 none, 1 read, 3 read and write).
#[repr(C)]
pub struct MemAccessDesc {
    location_type: c_int,
    location_id: c_int,
    flags: c_int,
}

/// The one device the program sees reads and writes every pool's memory, and the access it is
/// given cannot be less: a descriptor naming it with read-write access (or none given) is
/// taken, any other device is `cudaErrorInvalidDevice`, any other access
/// `cudaErrorInvalidValue`.
#[no_mangle]
pub extern "C" fn cudaMemPoolSetAccess(pool: *mut c_void, descs: *const MemAccessDesc, count: usize) -> Error {
    guard("cudaMemPoolSetAccess", || {
        if descs.is_null() && count > 0 {
            return ret(INVALID_VALUE);
        }
        with_pool(pool, |_| {
            // SAFETY: `count` descriptors, as the caller says.
            let descs = if count == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(descs, count) } };
            for d in descs {
                if d.location_type != 1 || d.location_id != 0 {
                    return ret(INVALID_DEVICE);
                }
                if d.flags != 3 {
                    return ret(INVALID_VALUE);
                }
            }
            SUCCESS
        })
    })
}

/// Read and write (3) for the one device; `cudaErrorInvalidDevice` for any other location.
#[no_mangle]
pub extern "C" fn cudaMemPoolGetAccess(flags: *mut c_int, pool: *mut c_void, location: *const c_int) -> Error {
    guard("cudaMemPoolGetAccess", || {
        // SAFETY: a `cudaMemLocation` (type, id), checked non-null.
        let at = unsafe { location.as_ref().map(|t| (*t, *location.add(1))) };
        match at {
            None => ret(INVALID_VALUE),
            Some((1, 0)) => with_pool(pool, |_| put(flags, 3)),
            Some(_) => ret(INVALID_DEVICE),
        }
    })
}

/// Nothing is held back in a pool (see [`cudaMemPoolGetAttribute`]): there is nothing to trim.
#[no_mangle]
pub extern "C" fn cudaMemPoolTrimTo(pool: *mut c_void, _keep: usize) -> Error {
    guard("cudaMemPoolTrimTo", || with_pool(pool, |_| SUCCESS))
}
