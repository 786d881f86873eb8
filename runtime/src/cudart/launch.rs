//! Kernel launches: `<<<grid, block, shmem, stream>>>` (clang pushes the configuration, the
//! kernel's stub pops it and calls `cudaLaunchKernel`) and direct `cudaLaunchKernel` calls.
//!
//! The compiler registers, per kernel, a launcher under the address of the kernel's stub
//! (`hpvm_rt_cuda_register`, from a constructor); `cudaLaunchKernel` checks the
//! configuration as CUDA does and calls it. The launcher packs the kernel's graph arguments,
//! asking here for each pointer's extent (`hpvm_rt_cuda_extent`) and for each device
//! variable's buffer (`hpvm_rt_cuda_symbol`), then launches (on GPUs, without waiting).
//!
//! A kernel's occupancy ([`occupancy`]) is found here too: a cooperative launch is sized by
//! it, and `cudaOccupancyMaxActiveBlocksPerMultiprocessor` ([`super::config`]) reports it.

use super::{ret, Error, INVALID_CONFIGURATION, INVALID_DEVICE_FUNCTION, INVALID_RESOURCE_HANDLE};
use super::{INVALID_VALUE, MISSING_CONFIGURATION, SUCCESS};
use crate::abi::guard;
use crate::hash::FxHashMap;
use crate::memory;
use std::cell::RefCell;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::{Mutex, Once};

/// `i32 launcher(void **args, gx, gy, gz, bx, by, bz, shmem)`, made by the compiler.
type Launcher = unsafe extern "C" fn(*mut *mut c_void, i64, i64, i64, i64, i64, i64, i64) -> c_int;

/// Launchers by the address of their kernel's stub.
static KERNELS: Mutex<Option<FxHashMap<usize, Launcher>>> = Mutex::new(None);

/// CUDA's `dim3`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dim3 {
    pub x: c_uint,
    pub y: c_uint,
    pub z: c_uint,
}

impl Dim3 {
    /// From the two registers a `dim3` argument travels in on x86-64 (`{x, y}` and `z`).
    fn from_regs(xy: u64, z: c_uint) -> Dim3 {
        Dim3 { x: xy as u32, y: (xy >> 32) as u32, z }
    }
}

struct Configuration {
    grid: Dim3,
    block: Dim3,
    shmem: usize,
    stream: *mut c_void,
}

thread_local! {
    /// `<<<…>>>` configurations pushed and not yet popped by a stub (a kernel launched from
    /// inside a launch's argument list pushes its own on top).
    static CONFIGURATIONS: RefCell<Vec<Configuration>> = const { RefCell::new(Vec::new()) };
}

/// Registers the launcher of the kernel whose stub is at `stub`.
///
/// # Safety
/// `launcher` is a launcher made by the compiler for that kernel.
#[no_mangle]
pub unsafe extern "C" fn hpvm_rt_cuda_register(stub: *const c_void, launcher: Launcher) {
    guard("kernel registration", || {
        KERNELS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(FxHashMap::default)
            .insert(stub as usize, launcher);
    })
}

/// The program's `__device__`/`__constant__` variables: each host shadow's address and size,
/// registered at start-up by every module's constructor.
static SYMBOLS: Mutex<std::collections::BTreeMap<usize, usize>> = Mutex::new(std::collections::BTreeMap::new());

/// Registers a device variable's host shadow of `bytes` bytes at `shadow`.
#[no_mangle]
pub extern "C" fn hpvm_rt_cuda_register_symbol(shadow: *const c_void, bytes: u64) {
    guard("symbol registration", || {
        SYMBOLS.lock().unwrap_or_else(|e| e.into_inner()).insert(shadow as usize, bytes as usize);
    })
}

/// The shadows of `__managed__` variables (address, bytes): tracked as managed memory from
/// their first launch on, and made current on the host at every synchronization, as
/// `cudaMallocManaged` memory is.
static MANAGED: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

/// Registers a `__managed__` variable's host shadow: a device variable the host reads and
/// writes directly.
#[no_mangle]
pub extern "C" fn hpvm_rt_cuda_register_managed(shadow: *const c_void, bytes: u64) {
    hpvm_rt_cuda_register_symbol(shadow, bytes);
    guard("symbol registration", || {
        MANAGED.lock().unwrap_or_else(|e| e.into_inner()).push((shadow as usize, bytes as usize));
    })
}

/// The `__managed__` variables a launch has used so far (their shadows tracked): those the
/// host must see current at a synchronization.
pub(super) fn managed_symbols() -> Vec<(usize, usize)> {
    let all = MANAGED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    all.into_iter().filter(|&(p, n)| memory::tracked(p, n).is_some()).collect()
}

/// Whether `func` is a kernel's stub (what `cudaLaunchKernel` and `cudaFuncSet*` take).
/// Per kernel stub: its graph's root node (by name) and its static shared memory in bytes
/// ([`hpvm_rt_cuda_register_root`]).
static ROOTS: Mutex<Option<FxHashMap<usize, (String, u64)>>> = Mutex::new(None);

/// Names the root node of the kernel whose stub is `stub` and the bytes of its static
/// `__shared__` variables, which the compiled kernel takes as dynamic shared memory: the
/// occupancy a GPU's driver finds for it (`cudaOccupancyMaxActiveBlocksPerMultiprocessor`).
///
/// # Safety
/// `name` is a NUL-terminated constant of the executable.
#[no_mangle]
pub unsafe extern "C" fn hpvm_rt_cuda_register_root(stub: *const c_void, name: *const std::ffi::c_char, shared: u64) {
    if name.is_null() {
        return;
    }
    let name = unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy().into_owned();
    ROOTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(Default::default)
        .insert(stub as usize, (name, shared));
}

/// The compiled GPU kernel of the kernel whose stub is `func`: its module's PTX, the kernel's
/// name there, and its static shared memory; `None` before its module is loaded or where it
/// has no GPU kernel.
pub(super) fn gpu_kernel_of(func: *const c_void) -> Option<(&'static std::ffi::CStr, String, u64)> {
    let (root, shared) = ROOTS.lock().unwrap_or_else(|e| e.into_inner()).as_ref()?.get(&(func as usize))?.clone();
    crate::launch::loaded().into_iter().find_map(|m| {
        let module = &m.module;
        let l = module.program.launches.iter().position(|l| module.node(l.root).name == root)?;
        let (_, unit) = module.cuda_unit(l as u32)?;
        let kernel = module.node(unit).kernel.as_ref()?;
        Some((module.ptx?, kernel.name.clone(), shared))
    })
}

pub(super) fn is_kernel(func: *const c_void) -> bool {
    let kernels = KERNELS.lock().unwrap_or_else(|e| e.into_inner());
    !func.is_null() && kernels.as_ref().is_some_and(|k| k.contains_key(&(func as usize)))
}

/// Blocks of `block` threads with `shared` bytes of shared memory that fit on one
/// multiprocessor at once, by its threads, its shared memory and its block slots (registers
/// left out: the assembler's choice). 0 where one block does not fit.
fn blocks_per_multiprocessor(l: &crate::devices::DeviceLimits, block: u32, shared: u64) -> u32 {
    /// Blocks resident on one multiprocessor at most (sm_80 and later: 32).
    const MOST: u32 = 32;
    if block == 0 || block > l.max_threads_per_block || shared > l.shared_per_block_optin {
        return 0;
    }
    let warp = l.warp_size.max(1);
    let threads = block.div_ceil(warp) * warp;
    let by_threads = l.max_threads_per_multiprocessor / threads;
    let by_shared = l.shared_per_multiprocessor.checked_div(shared).map_or(MOST, |b| b.min(u64::from(MOST)) as u32);
    by_threads.min(by_shared).min(MOST)
}

/// On GPUs, the first GPU (where a cooperative launch runs), the compiled kernel of `func`
/// (its module's PTX and name) and the dynamic shared memory it takes with `dynamic` more (its
/// static `__shared__` variables too); `None` elsewhere, or before its module is known.
fn first_gpu_kernel(
    func: *const c_void,
    dynamic: u64,
) -> Option<(&'static crate::devices::cuda::Cuda, &'static std::ffi::CStr, String, u32)> {
    let devs = crate::devices::devices();
    if !devs.on_gpus() {
        return None;
    }
    let (ptx, kernel, shared) = gpu_kernel_of(func)?;
    let gpu = devs.gpus.get(*devs.order.first()?)?;
    Some((gpu, ptx, kernel, u32::try_from(shared.checked_add(dynamic)?).ok()?))
}

/// On GPUs, what the driver finds for the compiled kernel on the first GPU (registers,
/// shared memory and threads: a cooperative launch sized from it fits that GPU); `None`
/// elsewhere, or where the driver cannot say.
fn gpu_blocks_per_multiprocessor(func: *const c_void, block: u32, dynamic: u64) -> Option<u32> {
    let (gpu, ptx, kernel, shared) = first_gpu_kernel(func, dynamic)?;
    gpu.blocks_per_multiprocessor(ptx, &kernel, block, shared).ok()
}

/// On GPUs, blocks of kernel `func` the GPU a cooperative launch runs on (the first) holds at
/// once, as its driver finds for the compiled kernel; `None` elsewhere, or where it cannot say.
fn gpu_wave(func: *const c_void, block: u32, dynamic: u64) -> Option<u64> {
    let (gpu, ptx, kernel, shared) = first_gpu_kernel(func, dynamic)?;
    gpu.wave(ptx, &kernel, block, shared).ok()
}

/// Blocks of kernel `func` one multiprocessor of the device the program sees holds at once,
/// as `cudaOccupancyMaxActiveBlocksPerMultiprocessor` ([`super::config`]) tells it; `None`
/// without devices.
pub(super) fn occupancy(func: *const c_void, block: u32, dynamic: u64) -> Option<u32> {
    gpu_blocks_per_multiprocessor(func, block, dynamic)
        .or_else(|| crate::devices::devices().limits().ok().map(|l| blocks_per_multiprocessor(&l, block, dynamic)))
}

/// The size of the device variable whose shadow is at `symbol`; `None` where no variable
/// starts there (CUDA wants the symbol itself, its offset given apart).
pub(super) fn symbol_size(symbol: *const c_void) -> Option<usize> {
    SYMBOLS.lock().unwrap_or_else(|e| e.into_inner()).get(&(symbol as usize)).copied()
}

/// The bytes from `ptr` to the end of the buffer holding it; 0 for null or memory the
/// runtime does not know (such a launch then runs on the host, which reaches all memory).
#[no_mangle]
pub extern "C" fn hpvm_rt_cuda_extent(ptr: *const c_void) -> u64 {
    guard("a kernel launch", || match memory::tracked(ptr as usize, 0) {
        Some((start, size)) if !ptr.is_null() => (start + size - ptr as usize) as u64,
        _ => 0,
    })
}

/// A `__device__`/`__constant__` variable's host shadow as a buffer: tracked from its first
/// launch on (the host's copy, which `cudaMemcpyToSymbol` wrote, is then current).
#[no_mangle]
pub extern "C" fn hpvm_rt_cuda_symbol(ptr: *mut c_void, bytes: u64) -> *mut c_void {
    guard("a kernel launch", || {
        if memory::tracked(ptr as usize, bytes as usize).is_none() {
            let managed = MANAGED.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|&(p, _)| p == ptr as usize);
            if managed {
                memory::track_managed(ptr as usize, bytes as usize);
            } else {
                memory::track_device(ptr as usize, bytes as usize);
            }
        }
        ptr
    })
}

/// As [`hpvm_rt_cuda_symbol`], for a variable whose values the launcher reads at the launch
/// (what a kernel loads from a `__constant__` variable at fixed places): its host copy made
/// current first.
#[no_mangle]
pub extern "C" fn hpvm_rt_cuda_symbol_current(ptr: *mut c_void, bytes: u64) -> *mut c_void {
    let at = hpvm_rt_cuda_symbol(ptr, bytes);
    guard("a kernel launch", || memory::host_reads(ptr as usize, bytes as usize));
    at
}

/// A kernel parameter passed by value that is too large for scalars (CUDA 12.1's 32 KiB
/// parameters): its `bytes` at `src` (the caller's argument) put in `buffer`, the kernel's
/// own global for it, which the kernel reads as a buffer. The host's copy of `buffer` is
/// always current (kernels only read it); where it holds these bytes already (a loop's
/// launches with the same value) nothing is done, else they are written as
/// `cudaMemcpyToSymbol` writes a symbol, after the launches that read the old ones.
///
/// # Safety
/// `buffer` is the launcher's global of `bytes` bytes; `src` the caller's `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn hpvm_rt_cuda_blob(buffer: *mut c_void, src: *const c_void, bytes: u64) -> *mut c_void {
    let at = hpvm_rt_cuda_symbol(buffer, bytes);
    // SAFETY: as the caller promises.
    let (now, new) = unsafe {
        (
            std::slice::from_raw_parts(buffer as *const u8, bytes as usize),
            std::slice::from_raw_parts(src as *const u8, bytes as usize),
        )
    };
    if now != new {
        guard("a kernel launch", || super::write_symbol(buffer, src, bytes as usize));
    }
    at
}

#[no_mangle]
pub extern "C" fn __cudaPushCallConfiguration(
    grid_xy: u64,
    grid_z: c_uint,
    block_xy: u64,
    block_z: c_uint,
    shmem: usize,
    stream: *mut c_void,
) -> c_uint {
    guard("<<<...>>>", || {
        let c = Configuration {
            grid: Dim3::from_regs(grid_xy, grid_z),
            block: Dim3::from_regs(block_xy, block_z),
            shmem,
            stream,
        };
        CONFIGURATIONS.with(|s| s.borrow_mut().push(c));
        0
    })
}

/// # Safety
/// The slots are the stub's, valid for writing.
#[no_mangle]
pub unsafe extern "C" fn __cudaPopCallConfiguration(
    grid: *mut Dim3,
    block: *mut Dim3,
    shmem: *mut usize,
    stream: *mut *mut c_void,
) -> Error {
    guard("<<<...>>>", || {
        let Some(c) = CONFIGURATIONS.with(|s| s.borrow_mut().pop()) else { return ret(MISSING_CONFIGURATION) };
        if grid.is_null() || block.is_null() || shmem.is_null() || stream.is_null() {
            return ret(INVALID_VALUE);
        }
        // SAFETY: the caller's slots, checked non-null.
        unsafe {
            grid.write(c.grid);
            block.write(c.block);
            shmem.write(c.shmem);
            stream.write(c.stream);
        }
        SUCCESS
    })
}

/// What CUDA refuses before a launch starts: empty dimensions, more than 1024 threads per
/// block (64 along z), more than 65535 blocks along y or z.
pub fn check_configuration(grid: Dim3, block: Dim3) -> Result<(), Error> {
    let threads = block.x as u64 * block.y as u64 * block.z as u64;
    let empty = [grid.x, grid.y, grid.z, block.x, block.y, block.z].contains(&0);
    if empty || threads > 1024 || block.z > 64 || grid.y > 65535 || grid.z > 65535 || grid.x > i32::MAX as u32 {
        return Err(INVALID_CONFIGURATION);
    }
    Ok(())
}

/// # Safety
/// `args` holds a pointer to each of the kernel's arguments, as CUDA's API says.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cudaLaunchKernel(
    func: *const c_void,
    grid_xy: u64,
    grid_z: c_uint,
    block_xy: u64,
    block_z: c_uint,
    args: *mut *mut c_void,
    shmem: usize,
    stream: *mut c_void,
) -> Error {
    // SAFETY: as this function's contract says.
    unsafe { launch_kernel(func, grid_xy, grid_z, block_xy, block_z, args, shmem, stream, false) }
}

/// A cooperative launch: its blocks may wait for one another at the grid's barrier
/// (cooperative groups' `this_grid().sync()`), so all of them must run at once. It runs whole,
/// on one device (`crate::devices::as_cooperative_launch`): on a GPU through the driver's
/// cooperative launch; on simulated devices every block on a thread of its own. A grid larger
/// than that device holds at once (on a GPU, as its driver finds for the compiled kernel; on
/// simulated devices, the occupancy the program is told times the multiprocessors) is refused
/// here, with CUDA's `cudaErrorCooperativeLaunchTooLarge`, before anything runs.
///
/// # Safety
/// `args` holds a pointer to each of the kernel's arguments, as CUDA's API says.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cudaLaunchCooperativeKernel(
    func: *const c_void,
    grid_xy: u64,
    grid_z: c_uint,
    block_xy: u64,
    block_z: c_uint,
    args: *mut *mut c_void,
    shmem: usize,
    stream: *mut c_void,
) -> Error {
    let (grid, block) = (Dim3::from_regs(grid_xy, grid_z), Dim3::from_regs(block_xy, block_z));
    let blocks = grid.x as u64 * grid.y as u64 * grid.z as u64;
    let threads = block.x.saturating_mul(block.y).saturating_mul(block.z);
    if let (Ok(l), true) = (crate::devices::devices().limits(), threads <= 1024 && is_kernel(func)) {
        // On GPUs what the one GPU it runs on holds; elsewhere what the program was told it may
        // launch (`cudaOccupancyMaxActiveBlocksPerMultiprocessor` times the multiprocessors).
        let at_once = gpu_wave(func, threads, shmem as u64)
            .unwrap_or_else(|| occupancy(func, threads, shmem as u64).unwrap_or(0) as u64 * l.multiprocessors as u64);
        if blocks > at_once {
            return ret(super::COOPERATIVE_LAUNCH_TOO_LARGE);
        }
    }
    crate::devices::as_cooperative_launch(|| {
        // SAFETY: as this function's contract says.
        unsafe { launch_kernel(func, grid_xy, grid_z, block_xy, block_z, args, shmem, stream, true) }
    })
}

/// [`cudaLaunchKernel`], cooperative or not.
///
/// # Safety
/// `args` holds a pointer to each of the kernel's arguments, as CUDA's API says.
#[allow(clippy::too_many_arguments)]
unsafe fn launch_kernel(
    func: *const c_void,
    grid_xy: u64,
    grid_z: c_uint,
    block_xy: u64,
    block_z: c_uint,
    args: *mut *mut c_void,
    shmem: usize,
    stream: *mut c_void,
    cooperative: bool,
) -> Error {
    let name = if cooperative { "cudaLaunchCooperativeKernel" } else { "cudaLaunchKernel" };
    let launcher = guard(name, || {
        let (grid, block) = (Dim3::from_regs(grid_xy, grid_z), Dim3::from_regs(block_xy, block_z));
        let kernels = KERNELS.lock().unwrap_or_else(|e| e.into_inner());
        let Some(&launcher) = kernels.as_ref().and_then(|k| k.get(&(func as usize))) else {
            return Err(INVALID_DEVICE_FUNCTION);
        };
        check_configuration(grid, block)?;
        let Some(lane) = super::program_lane(stream) else {
            return Err(INVALID_RESOURCE_HANDLE);
        };
        if args.is_null() {
            return Err(INVALID_VALUE);
        }
        Ok((launcher, grid, block, lane))
    });
    let (launcher, g, b, lane) = match launcher {
        Ok(l) => l,
        Err(e) => return ret(e),
    };
    begin_session();
    let _first = crate::stats::FirstLaunch::start();
    if shmem as u64 > max_dynamic_shared() {
        return ret(INVALID_VALUE);
    }
    // SAFETY: the caller's argument array, as this function's contract says.
    if let Some(e) = unsafe { super::capture_launch(stream, func, g, b, args, shmem, cooperative) } {
        return e;
    }
    let dim = |v: c_uint| v as i64;
    // SAFETY: the compiler's launcher for this kernel, with the caller's argument array. Not
    // inside `guard`: the launch reports the user's errors itself and ends the process.
    let e = crate::devices::inflight::on_program_lane(lane, || {
        crate::launch::as_cuda_launch(|| unsafe {
            launcher(args, dim(g.x), dim(g.y), dim(g.z), dim(b.x), dim(b.y), dim(b.z), shmem as i64)
        })
    });
    ret(e)
}

/// The most dynamic shared memory a block may ask for: the device's opt-in limit (CUDA
/// refuses a launch beyond it with `cudaErrorInvalidValue`, before running anything). Read
/// once: under ranks the limits are gathered, and every rank launches the same kernels.
fn max_dynamic_shared() -> u64 {
    static MAX: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| crate::devices::devices().limits().map_or(u64::MAX, |l| l.shared_per_block_optin))
}

/// Opens the runtime's session for a program that did not (a CUDA program has no
/// `__hpvm__init`), and closes it at exit.
pub(super) fn begin_session() {
    static BEGUN: Once = Once::new();
    BEGUN.call_once(|| {
        if !crate::abi::session_open() {
            crate::abi::__hpvm__init();
            extern "C" {
                fn atexit(f: extern "C" fn()) -> c_int;
            }
            // After the devices opened: handlers run in reverse order, so this one runs
            // before the CUDA driver's own.
            // SAFETY: registers a plain function.
            unsafe { atexit(end_session) };
        }
    });
}

extern "C" fn end_session() {
    if crate::abi::session_open() && !crate::FAILED.load(std::sync::atomic::Ordering::SeqCst) {
        crate::abi::cleanup_at_exit();
    }
}

/// The CPU body of CUDA's warp operations that the CPU does not run (shuffles, votes,
/// matches, reductions, `__syncwarp` and `__activemask` run: `crate::warp`, `crate::fiber`;
/// votes without a mask, CUDA 8's, do not): the compiler gives them their GPU instructions in
/// GPU kernels; anywhere else the program stops, naming why, rather than compute something
/// else.
#[no_mangle]
pub extern "C" fn hpvm_rt_warp_unsupported() {
    crate::fatal(
        "a kernel uses a warp function that only GPUs run (one simulated devices do not, such as a vote \
         without a mask); this launch ran on the host or on simulated devices (run it on GPUs: \
         HPVM_MGPU_DEVICES=cuda)",
    )
}

/// `%globaltimer` on the CPU: nanoseconds of the host's real-time clock, as the GPU's timer
/// counts them (its origin is the driver's; programs take differences).
#[no_mangle]
pub extern "C" fn hpvm_rt_globaltimer() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// `trap` on the CPU (`__trap()`, and the checks of CUDA's headers: cooperative groups' grid
/// `sync()` outside a cooperative launch traps): the kernel stops there, and the run with it,
/// naming the line (`at`), where on a GPU the launch fails and its context is lost.
///
/// # Safety
/// `at` is the NUL-terminated text the compiler made.
#[no_mangle]
pub unsafe extern "C" fn hpvm_rt_trap(at: *const std::ffi::c_char) {
    let at = if at.is_null() { "a kernel".into() } else { std::ffi::CStr::from_ptr(at).to_string_lossy() };
    crate::fatal(&format!(
        "{at}: the kernel trapped (`__trap()`, or a check of CUDA's headers: a grid's `sync()` needs a \
         cooperative launch, cudaLaunchCooperativeKernel); on a GPU the launch fails with cudaErrorLaunchFailure"
    ))
}

/// The CPU body of an inline PTX statement that has no CPU equivalent: the GPU runs it as
/// written; here the program stops, naming it and its line (`where`), rather than go on
/// without its effect.
///
/// # Safety
/// `what` is the NUL-terminated text the compiler made.
#[no_mangle]
pub unsafe extern "C" fn hpvm_rt_asm_unsupported(what: *const std::ffi::c_char) {
    let what = if what.is_null() { "inline PTX".into() } else { std::ffi::CStr::from_ptr(what).to_string_lossy() };
    crate::fatal(&format!(
        "{what} runs only on GPUs; this launch ran on the host or on simulated devices \
         (run it on GPUs: HPVM_MGPU_DEVICES=cuda)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dim3_arrives_in_two_registers() {
        assert_eq!(Dim3::from_regs(7 | (5 << 32), 3), Dim3 { x: 7, y: 5, z: 3 });
    }

    #[test]
    fn configurations_cuda_refuses_are_refused() {
        let d = |x, y, z| Dim3 { x, y, z };
        assert!(check_configuration(d(1, 1, 1), d(1024, 1, 1)).is_ok());
        assert!(check_configuration(d(1 << 20, 65535, 65535), d(32, 32, 1)).is_ok());
        assert_eq!(check_configuration(d(1, 1, 1), d(1025, 1, 1)), Err(INVALID_CONFIGURATION));
        assert_eq!(check_configuration(d(1, 1, 1), d(32, 33, 1)), Err(INVALID_CONFIGURATION));
        assert_eq!(check_configuration(d(1, 1, 1), d(1, 1, 65)), Err(INVALID_CONFIGURATION));
        assert_eq!(check_configuration(d(0, 1, 1), d(1, 1, 1)), Err(INVALID_CONFIGURATION));
        assert_eq!(check_configuration(d(1, 65536, 1), d(1, 1, 1)), Err(INVALID_CONFIGURATION));
    }
}
