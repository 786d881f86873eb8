//! Calls that set preferences or ask about the platform, which real programs make and whose
//! answers change no result: cache and shared-memory configuration (the runtime and the
//! driver choose), function attributes, versions, the profiler, free memory, and peers (the
//! program sees one device, so it has no peer). Each checks its arguments as CUDA does, so a
//! program's error paths behave the same.

use super::launch::is_kernel;
use super::SUCCESS;
use super::{api, devices, put, ret, state, Error, Kind, INVALID_DEVICE, INVALID_DEVICE_FUNCTION, INVALID_VALUE};
use std::ffi::{c_int, c_uint, c_void};

/// The CUDA version this runtime's API follows (12.4), as `cudaRuntimeGetVersion` encodes it.
const VERSION: c_int = 12040;

/// `cudaFuncCache` values: PreferNone .. PreferEqual.
const CACHE_CONFIGS: std::ops::RangeInclusive<c_int> = 0..=3;

/// `cudaFuncAttribute` values this runtime takes.
const MAX_DYNAMIC_SHARED_MEMORY_SIZE: c_int = 8;
const PREFERRED_SHARED_MEMORY_CARVEOUT: c_int = 9;

fn function_then(func: *const c_void, f: impl FnOnce() -> Error) -> Error {
    if is_kernel(func) {
        f()
    } else {
        ret(INVALID_DEVICE_FUNCTION)
    }
}

#[no_mangle]
pub extern "C" fn cudaFuncSetCacheConfig(func: *const c_void, config: c_int) -> Error {
    api("cudaFuncSetCacheConfig", || {
        function_then(func, || if CACHE_CONFIGS.contains(&config) { SUCCESS } else { ret(INVALID_VALUE) })
    })
}

#[no_mangle]
pub extern "C" fn cudaDeviceSetCacheConfig(config: c_int) -> Error {
    api("cudaDeviceSetCacheConfig", || if CACHE_CONFIGS.contains(&config) { SUCCESS } else { ret(INVALID_VALUE) })
}

#[no_mangle]
pub extern "C" fn cudaDeviceGetCacheConfig(config: *mut c_int) -> Error {
    api("cudaDeviceGetCacheConfig", || put(config, 0))
}

/// `cudaSharedMemConfig`: default, four-byte or eight-byte banks (a hint since Maxwell).
#[no_mangle]
pub extern "C" fn cudaDeviceSetSharedMemConfig(config: c_int) -> Error {
    api("cudaDeviceSetSharedMemConfig", || if (0..=2).contains(&config) { SUCCESS } else { ret(INVALID_VALUE) })
}

#[no_mangle]
pub extern "C" fn cudaFuncSetSharedMemConfig(func: *const c_void, config: c_int) -> Error {
    api("cudaFuncSetSharedMemConfig", || {
        function_then(func, || if (0..=2).contains(&config) { SUCCESS } else { ret(INVALID_VALUE) })
    })
}

/// The maximum dynamic shared memory (launches take up to the device's opt-in limit on their
/// own, so raising it is accepted within that limit) and the carveout preference.
#[no_mangle]
pub extern "C" fn cudaFuncSetAttribute(func: *const c_void, attribute: c_int, value: c_int) -> Error {
    api("cudaFuncSetAttribute", || {
        function_then(func, || match attribute {
            MAX_DYNAMIC_SHARED_MEMORY_SIZE => {
                let optin = devices().limits().map_or(u64::MAX, |l| l.shared_per_block_optin);
                if value < 0 || value as u64 > optin {
                    ret(INVALID_VALUE)
                } else {
                    SUCCESS
                }
            }
            PREFERRED_SHARED_MEMORY_CARVEOUT if (-1..=100).contains(&value) => SUCCESS,
            _ => ret(INVALID_VALUE),
        })
    })
}

#[no_mangle]
pub extern "C" fn cudaSetDeviceFlags(_flags: c_uint) -> Error {
    api("cudaSetDeviceFlags", || SUCCESS)
}

#[no_mangle]
pub extern "C" fn cudaDriverGetVersion(version: *mut c_int) -> Error {
    api("cudaDriverGetVersion", || put(version, VERSION))
}

#[no_mangle]
pub extern "C" fn cudaRuntimeGetVersion(version: *mut c_int) -> Error {
    api("cudaRuntimeGetVersion", || put(version, VERSION))
}

#[no_mangle]
pub extern "C" fn cudaProfilerStart() -> Error {
    SUCCESS
}

#[no_mangle]
pub extern "C" fn cudaProfilerStop() -> Error {
    SUCCESS
}

/// The one device's memory (the devices' combined, as its properties say) and what the
/// program's device allocations leave of it.
#[no_mangle]
pub extern "C" fn cudaMemGetInfo(free: *mut usize, total: *mut usize) -> Error {
    api("cudaMemGetInfo", || {
        if free.is_null() || total.is_null() {
            return ret(INVALID_VALUE);
        }
        let all = match devices().limits() {
            Ok(l) => l.total_memory,
            Err(_) => return ret(super::INITIALIZATION_ERROR),
        };
        let used: u64 = state()
            .allocations
            .values()
            .filter(|(_, kind)| matches!(kind, Kind::Device | Kind::Managed))
            .map(|(layout, _)| layout.size() as u64)
            .sum();
        put(total, all as usize);
        put(free, all.saturating_sub(used) as usize)
    })
}

/// The program sees one device, which is no peer of itself: CUDA answers `cudaErrorInvalidDevice`
/// for a device paired with itself, or for one that does not exist.
#[no_mangle]
pub extern "C" fn cudaDeviceCanAccessPeer(can: *mut c_int, device: c_int, peer: c_int) -> Error {
    api("cudaDeviceCanAccessPeer", || {
        if can.is_null() {
            return ret(INVALID_VALUE);
        }
        put(can, 0);
        let _ = (device, peer);
        ret(INVALID_DEVICE)
    })
}

#[no_mangle]
pub extern "C" fn cudaDeviceEnablePeerAccess(peer: c_int, _flags: c_uint) -> Error {
    api("cudaDeviceEnablePeerAccess", || {
        let _ = peer;
        ret(INVALID_DEVICE)
    })
}

/// As the synchronous copy: every call of this runtime but a launch completes in program
/// order before it returns, which satisfies the stream's order.
#[no_mangle]
pub extern "C" fn cudaMemcpyToSymbolAsync(
    symbol: *const c_void,
    src: *const c_void,
    n: usize,
    offset: usize,
    kind: c_int,
    stream: *mut c_void,
) -> Error {
    if !super::stream_ok(stream) {
        return ret(super::INVALID_RESOURCE_HANDLE);
    }
    super::cudaMemcpyToSymbol(symbol, src, n, offset, kind)
}

#[no_mangle]
pub extern "C" fn cudaMemcpyFromSymbolAsync(
    dst: *mut c_void,
    symbol: *const c_void,
    n: usize,
    offset: usize,
    kind: c_int,
    stream: *mut c_void,
) -> Error {
    if !super::stream_ok(stream) {
        return ret(super::INVALID_RESOURCE_HANDLE);
    }
    super::cudaMemcpyFromSymbol(dst, symbol, n, offset, kind)
}

/// `cudaLimit` values and their defaults on the GPUs this runtime targets: stack per thread,
/// the printf buffer, the device heap, the device runtime's nesting depth and pending launches,
/// the L2 fetch granularity and the persisting L2 size.
const LIMIT_DEFAULTS: [usize; 7] = [1024, 1 << 20, 8 << 20, 2, 2048, 64, 0];

static LIMITS: std::sync::Mutex<[usize; 7]> = std::sync::Mutex::new(LIMIT_DEFAULTS);

#[no_mangle]
pub extern "C" fn cudaDeviceSetLimit(limit: c_int, value: usize) -> Error {
    api("cudaDeviceSetLimit", || match usize::try_from(limit).ok().filter(|&l| l < LIMIT_DEFAULTS.len()) {
        Some(l) => {
            LIMITS.lock().unwrap_or_else(|e| e.into_inner())[l] = value;
            SUCCESS
        }
        None => ret(super::UNSUPPORTED_LIMIT),
    })
}

#[no_mangle]
pub extern "C" fn cudaDeviceGetLimit(value: *mut usize, limit: c_int) -> Error {
    api("cudaDeviceGetLimit", || match usize::try_from(limit).ok().filter(|&l| l < LIMIT_DEFAULTS.len()) {
        Some(l) => put(value, LIMITS.lock().unwrap_or_else(|e| e.into_inner())[l]),
        None => ret(super::UNSUPPORTED_LIMIT),
    })
}

/// The one device matches any request.
#[no_mangle]
pub extern "C" fn cudaChooseDevice(device: *mut c_int, prop: *const c_void) -> Error {
    api("cudaChooseDevice", || if prop.is_null() { ret(INVALID_VALUE) } else { put(device, 0) })
}

/// Whether `[ptr, ptr + count)` lies in one `cudaMallocManaged` allocation.
fn managed(ptr: *const c_void, count: usize) -> bool {
    let (p, st) = (ptr as usize, state());
    st.allocations.iter().any(|(&start, &(layout, kind))| {
        kind == Kind::Managed && p >= start && p.checked_add(count).is_some_and(|end| end <= start + layout.size())
    })
}

/// Where managed memory should live: the runtime places every buffer where launches need it,
/// so hints change nothing (their arguments are checked as CUDA checks them).
#[no_mangle]
pub extern "C" fn cudaMemAdvise(ptr: *const c_void, count: usize, advice: c_int, device: c_int) -> Error {
    api("cudaMemAdvise", || {
        // cudaMemAdviseSetReadMostly .. cudaMemAdviseUnsetAccessedBy; the device or the CPU (-1).
        if count == 0 || !managed(ptr, count) || !(1..=6).contains(&advice) || !(-1..=0).contains(&device) {
            ret(INVALID_VALUE)
        } else {
            SUCCESS
        }
    })
}

#[no_mangle]
pub extern "C" fn cudaMemPrefetchAsync(ptr: *const c_void, count: usize, device: c_int, stream: *mut c_void) -> Error {
    api("cudaMemPrefetchAsync", || {
        if !super::stream_ok(stream) {
            ret(super::INVALID_RESOURCE_HANDLE)
        } else if count == 0 || !managed(ptr, count) || !(-1..=0).contains(&device) {
            ret(INVALID_VALUE)
        } else {
            SUCCESS
        }
    })
}

/// Host memory the program page-locks: copies from it are the runtime's to make fast, so
/// registering only records the range (CUDA's errors for a range registered twice, or one
/// never registered, kept).
static REGISTERED: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

#[no_mangle]
pub extern "C" fn cudaHostRegister(ptr: *mut c_void, size: usize, _flags: c_uint) -> Error {
    api("cudaHostRegister", || {
        if ptr.is_null() || size == 0 {
            return ret(INVALID_VALUE);
        }
        let mut r = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
        if r.contains(&(ptr as usize)) {
            return ret(super::HOST_MEMORY_ALREADY_REGISTERED);
        }
        r.push(ptr as usize);
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cudaHostUnregister(ptr: *mut c_void) -> Error {
    api("cudaHostUnregister", || {
        let mut r = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
        match r.iter().position(|&p| p == ptr as usize) {
            Some(i) => {
                r.swap_remove(i);
                SUCCESS
            }
            None => ret(super::HOST_MEMORY_NOT_REGISTERED),
        }
    })
}
