//! Calls that set preferences or ask about the platform, which real programs make and whose
//! answers change no result: cache and shared-memory configuration (the runtime and the
//! driver choose), function attributes, versions, the profiler, free memory, and peers (the
//! program sees one device, so it has no peer). Each checks its arguments as CUDA does, so a
//! program's error paths behave the same.

use super::launch::{is_kernel, occupancy};
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

/// `contract::DEVICE_CODE_ARCH`, as the C API takes it.
pub const DEVICE_CODE_ARCH: c_int = contract::DEVICE_CODE_ARCH;

/// `struct cudaFuncAttributes` (CUDA 12.4's `driver_types.h`, field for field).
#[repr(C)]
pub struct FuncAttributes {
    pub shared_size_bytes: usize,
    pub const_size_bytes: usize,
    pub local_size_bytes: usize,
    pub max_threads_per_block: c_int,
    pub num_regs: c_int,
    pub ptx_version: c_int,
    pub binary_version: c_int,
    pub cache_mode_ca: c_int,
    pub max_dynamic_shared_size_bytes: c_int,
    pub preferred_shmem_carveout: c_int,
    pub cluster_dim_must_be_set: c_int,
    pub required_cluster_width: c_int,
    pub required_cluster_height: c_int,
    pub required_cluster_depth: c_int,
    pub cluster_scheduling_policy_preference: c_int,
    pub non_portable_cluster_size_allowed: c_int,
    pub reserved: [c_int; 16],
}

/// A kernel's attributes, as the device the program sees (the combined one) would give them:
/// its block limit, the dynamic shared memory it may ask for, and the architecture its code
/// was compiled for. The program sees one kernel on every device; what it asks here only
/// chooses launch shapes, which the runtime then runs as given.
#[no_mangle]
pub extern "C" fn cudaFuncGetAttributes(attr: *mut FuncAttributes, func: *const c_void) -> Error {
    api("cudaFuncGetAttributes", || {
        function_then(func, || match devices().limits() {
            Ok(l) => put(
                attr,
                FuncAttributes {
                    shared_size_bytes: 0,
                    const_size_bytes: 0,
                    local_size_bytes: 0,
                    max_threads_per_block: l.max_threads_per_block as c_int,
                    // Registers are the GPU assembler's choice; the whole file is the most
                    // a block of the largest size may use.
                    num_regs: (l.registers_per_block / l.max_threads_per_block.max(1)).min(255) as c_int,
                    ptx_version: DEVICE_CODE_ARCH,
                    binary_version: DEVICE_CODE_ARCH,
                    cache_mode_ca: 0,
                    max_dynamic_shared_size_bytes: l.shared_per_block.min(c_int::MAX as u64) as c_int,
                    preferred_shmem_carveout: -1,
                    cluster_dim_must_be_set: 0,
                    required_cluster_width: 0,
                    required_cluster_height: 0,
                    required_cluster_depth: 0,
                    cluster_scheduling_policy_preference: 0,
                    non_portable_cluster_size_allowed: 0,
                    reserved: [0; 16],
                },
            ),
            Err(_) => ret(INVALID_DEVICE),
        })
    })
}

/// Occupancy ([`occupancy`]: on GPUs the driver's for the compiled kernel, elsewhere by the
/// device's limits); flags 0 (default) or 1 (caching override), which change nothing here.
#[no_mangle]
pub extern "C" fn cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    blocks: *mut c_int,
    func: *const c_void,
    block_size: c_int,
    dynamic_shared: usize,
    flags: c_uint,
) -> Error {
    api("cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", || {
        function_then(func, || {
            if block_size <= 0 || flags > 1 {
                return ret(INVALID_VALUE);
            }
            match occupancy(func, block_size as u32, dynamic_shared as u64) {
                Some(n) => put(blocks, n as c_int),
                None => ret(INVALID_DEVICE),
            }
        })
    })
}

#[no_mangle]
pub extern "C" fn cudaOccupancyMaxActiveBlocksPerMultiprocessor(
    blocks: *mut c_int,
    func: *const c_void,
    block_size: c_int,
    dynamic_shared: usize,
) -> Error {
    cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, func, block_size, dynamic_shared, 0)
}

/// Persisting L2 lines are a hint this runtime does not take (`cudaDevAttrMaxPersistingL2CacheSize`
/// is 0): there are none to reset.
#[no_mangle]
pub extern "C" fn cudaCtxResetPersistingL2Cache() -> Error {
    api("cudaCtxResetPersistingL2Cache", || SUCCESS)
}

/// The flags a device starts with: automatic scheduling, mapped host memory allowed (the
/// default since CUDA 4 on 64-bit hosts).
const DEVICE_FLAGS: c_uint = 0x08;

#[no_mangle]
pub extern "C" fn cudaGetDeviceFlags(flags: *mut c_uint) -> Error {
    api("cudaGetDeviceFlags", || put(flags, DEVICE_FLAGS))
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

/// The program sees one device, which is no peer of itself: CUDA answers 0 for a device
/// paired with itself (a success, which NVIDIA's p2pBandwidthLatencyTest relies on) and
/// `cudaErrorInvalidDevice` for a device that does not exist.
#[no_mangle]
pub extern "C" fn cudaDeviceCanAccessPeer(can: *mut c_int, device: c_int, peer: c_int) -> Error {
    api("cudaDeviceCanAccessPeer", || {
        if can.is_null() {
            return ret(INVALID_VALUE);
        }
        put(can, 0);
        ret(if device == 0 && peer == 0 { SUCCESS } else { INVALID_DEVICE })
    })
}

/// As [`cudaDeviceCanAccessPeer`]: no pair of devices the program sees is a pair of peers.
#[no_mangle]
pub extern "C" fn cudaDeviceGetP2PAttribute(value: *mut c_int, attr: c_int, src: c_int, dst: c_int) -> Error {
    api("cudaDeviceGetP2PAttribute", || {
        if value.is_null() || !(1..=4).contains(&attr) {
            return ret(INVALID_VALUE);
        }
        let _ = (src, dst);
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

/// As enabling: the one device the program sees has no peer.
#[no_mangle]
pub extern "C" fn cudaDeviceDisablePeerAccess(peer: c_int) -> Error {
    api("cudaDeviceDisablePeerAccess", || {
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
            // GPUs take it as CUDA's would (a recursive kernel's stack); simulated devices
            // have no such limits, and keep the value to report it.
            let gpus = &crate::devices::devices().gpus;
            let kept = if gpus.is_empty() { Ok(value) } else { crate::devices::cuda::set_limit(gpus, l, value) };
            match kept {
                Ok(v) => {
                    LIMITS.lock().unwrap_or_else(|e| e.into_inner())[l] = v;
                    SUCCESS
                }
                Err(why) => {
                    eprintln!("hpvm-mgpu: cudaDeviceSetLimit({l}, {value}): {why}");
                    ret(super::UNSUPPORTED_LIMIT)
                }
            }
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

/// Which streams may use managed memory (`cudaMemAttachGlobal`, `Host` or `Single`): every
/// stream here is the device's one stream in program order, and the runtime keeps managed
/// memory coherent itself, so attaching changes nothing (its arguments are checked as CUDA
/// checks them; length 0 is the whole allocation).
#[no_mangle]
pub extern "C" fn cudaStreamAttachMemAsync(
    stream: *mut c_void,
    ptr: *mut c_void,
    length: usize,
    flags: std::ffi::c_uint,
) -> Error {
    api("cudaStreamAttachMemAsync", || {
        if !super::stream_ok(stream) {
            ret(super::INVALID_RESOURCE_HANDLE)
        } else if !managed(ptr, length.max(1)) || ![1, 2, 4].contains(&flags) {
            ret(INVALID_VALUE)
        } else {
            SUCCESS
        }
    })
}

/// CUDA's `cudaMemLocation`: a kind (1 a device, 2 the host, 3 and 4 a host NUMA node) and
/// the device's or node's number.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct MemLocation {
    kind: c_int,
    id: c_int,
}

impl MemLocation {
    /// As the first API's device argument: the device's number, or -1 for the CPU.
    fn device(self) -> Option<c_int> {
        match self.kind {
            1 => Some(self.id),
            2..=4 => Some(-1),
            _ => None,
        }
    }
}

/// `cudaMemAdvise` with the location as a `cudaMemLocation` (CUDA 12.2; the C++ overload of
/// `cudaMemAdvise` with a location calls it).
#[no_mangle]
pub extern "C" fn cudaMemAdvise_v2(ptr: *const c_void, count: usize, advice: c_int, location: MemLocation) -> Error {
    match location.device() {
        Some(device) => cudaMemAdvise(ptr, count, advice, device),
        None => api("cudaMemAdvise_v2", || ret(INVALID_VALUE)),
    }
}

/// `cudaMemPrefetchAsync` with the location as a `cudaMemLocation` (CUDA 12.2; the C++
/// overload of `cudaMemPrefetchAsync` with a location calls it). Flags must be 0.
#[no_mangle]
pub extern "C" fn cudaMemPrefetchAsync_v2(
    ptr: *const c_void,
    count: usize,
    location: MemLocation,
    flags: std::ffi::c_uint,
    stream: *mut c_void,
) -> Error {
    match location.device() {
        Some(device) if flags == 0 => cudaMemPrefetchAsync(ptr, count, device, stream),
        _ => api("cudaMemPrefetchAsync_v2", || ret(INVALID_VALUE)),
    }
}

/// Host memory the program page-locks: copies from it are the runtime's to make fast, so
/// registering records the range (CUDA's errors for a range registered twice, or one never
/// registered, kept) and maps it into the devices, as CUDA does, where they can reach it in
/// place (`devices::in_place`). Start and length.
static REGISTERED: std::sync::Mutex<Vec<(usize, usize)>> = std::sync::Mutex::new(Vec::new());

/// Whether `at` lies in a registered range.
pub(super) fn registered(at: usize) -> bool {
    REGISTERED.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|&(p, n)| (p..p + n).contains(&at))
}

#[no_mangle]
pub extern "C" fn cudaHostRegister(ptr: *mut c_void, size: usize, _flags: c_uint) -> Error {
    api("cudaHostRegister", || {
        if ptr.is_null() || size == 0 {
            return ret(INVALID_VALUE);
        }
        let mut r = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
        if r.iter().any(|&(p, _)| p == ptr as usize) {
            return ret(super::HOST_MEMORY_ALREADY_REGISTERED);
        }
        r.push((ptr as usize, size));
        // Kernels given it read and write it in place where every device can reach it (it
        // may share pages with memory registered before; then they run on the host).
        crate::devices::in_place::map(ptr as *mut u8, size);
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cudaHostUnregister(ptr: *mut c_void) -> Error {
    api("cudaHostUnregister", || {
        let mut r = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
        match r.iter().position(|&(p, _)| p == ptr as usize) {
            Some(i) => {
                r.swap_remove(i);
                crate::devices::in_place::unmap(ptr as *mut u8);
                SUCCESS
            }
            None => ret(super::HOST_MEMORY_NOT_REGISTERED),
        }
    })
}
