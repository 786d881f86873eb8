//! The C ABI: the functions `include/hpvm.h` declares for host code, and the ones compiled
//! code calls (`hpvm_rt_*`). None may unwind into C: each body runs under [`guard`].

use crate::ctx::EntryFn;
use crate::launch::{self, Launch, Mode};
use crate::{memory, scratch, stats};
use std::ffi::{c_char, c_void};

/// Runs `f`; a panic (a bug in the runtime) ends the process with a message instead of
/// unwinding into C.
pub(crate) fn guard<R>(what: &str, f: impl FnOnce() -> R) -> R {
    let _runtime = crate::crash::InRuntime::enter();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            eprintln!("hpvm-mgpu runtime: internal error in {what}");
            std::process::abort()
        }
    }
}

/// Whether `__hpvm__init` ran and `__hpvm__cleanup` has not since.
static SESSION_OPEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub(crate) fn session_open() -> bool {
    SESSION_OPEN.load(std::sync::atomic::Ordering::SeqCst)
}

#[no_mangle]
pub extern "C" fn __hpvm__init() {
    SESSION_OPEN.store(true, std::sync::atomic::Ordering::SeqCst);
    guard("__hpvm__init", || {
        // Every setting is checked now, so a bad one stops the program before it starts work.
        stats::install();
        stats::session_started();
        crate::pool::pool();
        let t = std::time::Instant::now();
        crate::devices::devices();
        crate::devices::ask_limits_ahead();
        launch::load_registered();
        stats::DEVICE_SETUP_NANOS.fetch_add(t.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
        crate::partitioned::check_settings();
        memory::check_settings();
    })
}

/// Whether the session ends because the process exits (a CUDA program's end,
/// [`cleanup_at_exit`]): nothing reads device memory after that.
static AT_EXIT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// [`__hpvm__cleanup`] as the process exits.
pub(crate) fn cleanup_at_exit() {
    AT_EXIT.store(true, std::sync::atomic::Ordering::SeqCst);
    __hpvm__cleanup();
}

#[no_mangle]
pub extern "C" fn __hpvm__cleanup() {
    SESSION_OPEN.store(false, std::sync::atomic::Ordering::SeqCst);
    guard("__hpvm__cleanup", || {
        // A GPU still opening in the background is waited for: its time counts in the
        // statistics, and the driver is not left making a context.
        crate::devices::opening::finish();
        crate::devices::limits_asked();
        // Buffers first: the copies back to the host count in the statistics.
        memory::forget_all(AT_EXIT.load(std::sync::atomic::Ordering::SeqCst));
        stats::emit();
        scratch::release_global();
        crate::trace::flush();
    })
}

/// Names a module of the program to the runtime; called by a constructor of the executable,
/// before `main`. Nothing is read yet: the session's start ([`__hpvm__init`]) loads it.
///
/// # Safety
/// As [`hpvm_rt_launch`]'s `desc`, `entries` and `ptx`; `sass` is null or the module's
/// machine code for some GPU architectures ([`crate::sass::pack`]).
#[no_mangle]
pub unsafe extern "C" fn hpvm_rt_module(
    desc: *const c_char,
    entries: *const EntryFn,
    n_entries: u32,
    ptx: *const c_char,
    sass: *const u8,
) {
    guard("registering the program's modules", || unsafe { launch::register(desc, entries, n_entries, ptx, sass) })
}

/// Names the analysis input of the module described by `desc`: `len` bytes of LLVM bitcode
/// at `bitcode`, and the compiler that built it (see `partitioned::special`).
///
/// # Safety
/// All three are constants of the executable: `bitcode` holds `len` bytes, `compiler` is
/// NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn hpvm_rt_analysis_input(
    desc: *const c_char,
    bitcode: *const u8,
    len: u64,
    compiler: *const c_char,
) {
    guard("registering the program's analysis input", || {
        if bitcode.is_null() || compiler.is_null() {
            return;
        }
        let input = crate::module::AnalysisInput {
            bitcode: unsafe { std::slice::from_raw_parts(bitcode, len as usize) },
            compiler: unsafe { std::ffi::CStr::from_ptr(compiler) },
        };
        launch::register_analysis_input(desc, input)
    })
}

/// Locks of 128-bit strong accesses, by address: CUB's tile states are read and written two
/// words at once by blocks running side by side (`ld.relaxed.gpu.v2.u64`), which x86-64 does
/// without a lock only with `cmpxchg16b`.
static STRONG_128: [std::sync::Mutex<()>; 64] = [const { std::sync::Mutex::new(()) }; 64];

fn strong_lock(at: *const u64) -> std::sync::MutexGuard<'static, ()> {
    STRONG_128[(at as usize >> 4) % STRONG_128.len()].lock().unwrap_or_else(|e| e.into_inner())
}

/// A strong (relaxed, acquire or volatile) load of 128 bits at `at` into `out[0..2]`.
///
/// # Safety
/// `at` and `out` point to two readable (writable) words, as the asm statement's do.
#[no_mangle]
pub unsafe extern "C" fn hpvm_rt_strong_load128(at: *const u64, out: *mut u64) {
    let _held = strong_lock(at);
    // SAFETY: as the caller's.
    unsafe {
        *out = std::ptr::read_volatile(at);
        *out.add(1) = std::ptr::read_volatile(at.add(1));
    }
}

/// A strong store of the 128 bits `lo`, `hi` at `at`.
///
/// # Safety
/// `at` points to two writable words.
#[no_mangle]
pub unsafe extern "C" fn hpvm_rt_strong_store128(at: *mut u64, lo: u64, hi: u64) {
    let _held = strong_lock(at);
    // SAFETY: as the caller's.
    unsafe {
        std::ptr::write_volatile(at, lo);
        std::ptr::write_volatile(at.add(1), hi);
    }
}

/// `fma.rn.bf16` in CPU code (`crate::bf16`): `a × b + c` rounded once, on bf16 bits.
#[no_mangle]
pub extern "C" fn hpvm_rt_bf16_fma(a: u16, b: u16, c: u16) -> u16 {
    crate::bf16::fma(a, b, c)
}

/// Starts a launch; replaces `__hpvm__launch` in compiled host code.
///
/// # Safety
/// `desc` is the module's NUL-terminated description, `entries` its `n_entries` entry points,
/// `args` the launch's argument struct (alive until the wait), `ptx` the module's kernels
/// (NUL-terminated PTX) or null.
#[no_mangle]
pub unsafe extern "C" fn hpvm_rt_launch(
    desc: *const c_char,
    entries: *const EntryFn,
    n_entries: u32,
    launch: u32,
    streaming: u32,
    args: *mut c_void,
    ptx: *const c_char,
) -> *mut c_void {
    guard("__hpvm__launch", || {
        stats::install();
        memory::host_resumes();
        let m = unsafe { launch::load(desc, entries, n_entries, ptx) };
        let mode = match (streaming != 0, launch::in_cuda_launch()) {
            (true, _) => Mode::Streaming,
            (false, true) => Mode::Cuda,
            (false, false) => Mode::Graph,
        };
        // SAFETY: the launcher's argument struct, as for the launch below.
        if mode == Mode::Cuda && unsafe { Launch::replay(m, launch, args as *const u8) } {
            return replayed();
        }
        Box::into_raw(unsafe { Launch::start(m, launch, mode, args as *mut u8) }) as *mut c_void
    })
}

/// The handle of a replayed launch (`partitioned::replay`), which has nothing left to wait
/// for: not allocated, since a launch-bound loop replays every launch.
fn replayed() -> *mut c_void {
    static REPLAYED: u8 = 0;
    &REPLAYED as *const u8 as *mut c_void
}

/// # Safety
/// `handle` comes from a launch and is waited for once.
#[no_mangle]
pub unsafe extern "C" fn __hpvm__wait(handle: *mut c_void) {
    if handle == replayed() {
        return;
    }
    guard("__hpvm__wait", || {
        if handle.is_null() {
            crate::fatal("__hpvm__wait on a null graph handle");
        }
        unsafe { *Box::from_raw(handle as *mut Launch) }.wait()
    })
}

/// # Safety
/// `handle` comes from a streaming launch not yet waited for; `args` is an argument struct.
#[no_mangle]
pub unsafe extern "C" fn __hpvm__push(handle: *mut c_void, args: *mut c_void) {
    guard("__hpvm__push", || {
        if handle.is_null() {
            crate::fatal("__hpvm__push on a null graph handle");
        }
        memory::host_resumes();
        unsafe { (*(handle as *const Launch)).push(args as *const u8) }
    })
}

/// # Safety
/// `handle` comes from a streaming launch not yet waited for.
#[no_mangle]
pub unsafe extern "C" fn __hpvm__pop(handle: *mut c_void) -> *mut c_void {
    guard("__hpvm__pop", || {
        if handle.is_null() {
            crate::fatal("__hpvm__pop on a null graph handle");
        }
        unsafe { (*(handle as *const Launch)).pop() as *mut c_void }
    })
}

#[no_mangle]
pub extern "C" fn llvm_hpvm_track_mem(ptr: *mut c_void, bytes: usize) {
    guard("llvm_hpvm_track_mem", || {
        stats::install();
        memory::track(ptr as usize, bytes)
    })
}

#[no_mangle]
pub extern "C" fn llvm_hpvm_untrack_mem(ptr: *mut c_void) {
    guard("llvm_hpvm_untrack_mem", || {
        stats::install();
        memory::untrack(ptr as usize)
    })
}

#[no_mangle]
pub extern "C" fn llvm_hpvm_request_mem(ptr: *mut c_void, bytes: usize) {
    guard("llvm_hpvm_request_mem", || {
        stats::install();
        memory::request(ptr as usize, bytes)
    })
}

/// `__hpvm__barrier` in compiled leaf code.
#[no_mangle]
pub extern "C" fn hpvm_rt_barrier() {
    guard("__hpvm__barrier", scratch::barrier)
}

/// `shfl.sync` in compiled CPU leaf code (CUDA's `__shfl_*_sync`; `crate::warp`): `mode`
/// 0 up, 1 down, 2 butterfly, 3 index. The value read in bits 0-31, PTX's predicate (the
/// source lane was in range) in bit 32.
#[no_mangle]
pub extern "C" fn hpvm_rt_warp_shfl(mode: i32, mask: u32, value: u32, b: u32, c: u32) -> u64 {
    guard("a warp shuffle", || {
        let mode =
            crate::warp::Shuffle::from_code(mode).unwrap_or_else(|| crate::fatal(&format!("warp shuffle mode {mode}")));
        let (v, valid) = crate::warp::shuffle(mode, mask, value, b, c);
        u64::from(v) | u64::from(valid) << 32
    })
}

/// `vote.sync` in compiled CPU leaf code (`__all_sync`, `__any_sync`, `__uni_sync`,
/// `__ballot_sync`): `mode` 0 all, 1 any, 2 uniform, 3 ballot.
#[no_mangle]
pub extern "C" fn hpvm_rt_warp_vote(mode: i32, mask: u32, pred: u32) -> u32 {
    guard("a warp vote", || {
        let mode =
            crate::warp::Vote::from_code(mode).unwrap_or_else(|| crate::fatal(&format!("warp vote mode {mode}")));
        crate::warp::vote(mode, mask, pred != 0)
    })
}

/// `match.sync` in compiled CPU leaf code (`__match_any_sync`; with `all`,
/// `__match_all_sync`): the lanes' mask in bits 0-31, the all-predicate in bit 32.
#[no_mangle]
pub extern "C" fn hpvm_rt_warp_match(all: u32, mask: u32, value: u64) -> u64 {
    guard("a warp match", || {
        let (lanes, pred) = crate::warp::match_values(all != 0, mask, value);
        u64::from(lanes) | u64::from(pred) << 32
    })
}

/// `redux.sync` in compiled CPU leaf code (`__reduce_add_sync`...): `op` as
/// [`crate::warp::Redux`] numbers them.
#[no_mangle]
pub extern "C" fn hpvm_rt_warp_redux(op: i32, mask: u32, value: u32) -> u32 {
    guard("a warp reduction", || {
        let op = crate::warp::Redux::from_code(op).unwrap_or_else(|| crate::fatal(&format!("warp reduction {op}")));
        crate::warp::redux(op, mask, value)
    })
}

/// The lane of the running instance in its warp (`%laneid`) in compiled CPU leaf code.
#[no_mangle]
pub extern "C" fn hpvm_rt_warp_lane() -> u32 {
    guard("%laneid", crate::fiber::exchange_lane)
}

/// `__syncthreads_count`, `_and`, `_or` in compiled CPU leaf code (`mode` 0, 1, 2).
#[no_mangle]
pub extern "C" fn hpvm_rt_block_vote(mode: i32, pred: u32) -> u32 {
    guard("__syncthreads_count", || crate::warp::block_vote(mode, pred != 0))
}

/// PTX's `exit` in compiled CPU leaf code: the calling instance ends here ([`crate::fiber`]).
#[no_mangle]
pub extern "C" fn hpvm_rt_thread_exit() {
    crate::fiber::exit_instance();
    crate::fatal(
        "PTX `exit` in an instance that does not run as a fiber (one thread per block, or no fibers on this target)",
    )
}

/// Before a strong load in compiled CPU leaf code (`ld.acquire`, `ld.relaxed`, `ld.volatile`
/// in inline PTX): a thread that reads a flag in a loop waits for another thread to set it
/// (cooperative groups' barriers between warps), and in a fiber that thread runs only when
/// this one lets it ([`crate::fiber::spin`]).
#[no_mangle]
pub extern "C" fn hpvm_rt_spin() {
    crate::fiber::spin();
}

/// A branch's meeting point in compiled warp-synchronous CPU leaf code: the lanes of the
/// calling instance's warp go on together from here ([`crate::fiber::converge`]).
#[no_mangle]
pub extern "C" fn hpvm_rt_converge(site: u64) {
    crate::fiber::converge(site);
}

/// PTX's `fns.b32 d, mask, base, offset` (`__fns`) in compiled CPU leaf code: the position of
/// the `|offset|`-th set bit of `mask` counting from bit `base` upwards (offset > 0) or
/// downwards (offset < 0), `base` itself where offset is 0 and that bit is set; `0xffffffff`
/// where there is none.
#[no_mangle]
pub extern "C" fn hpvm_rt_fns(mask: u32, base: u32, offset: i32) -> u32 {
    if offset == 0 {
        return if base < 32 && mask >> base & 1 == 1 { base } else { u32::MAX };
    }
    let mut left = offset.unsigned_abs();
    let mut pos = i64::from(base);
    let step = if offset > 0 { 1 } else { -1 };
    while (0..32).contains(&pos) {
        if mask >> pos & 1 == 1 {
            left -= 1;
            if left == 0 {
                return pos as u32;
            }
        }
        pos += step;
    }
    u32::MAX
}

/// `__activemask()` in compiled CPU leaf code, at call site `site` (a number the compiler
/// gives each): the lanes that reach it together ([`crate::fiber::active_mask`]).
#[no_mangle]
pub extern "C" fn hpvm_rt_warp_activemask(site: u64) -> u32 {
    guard("__activemask", || crate::fiber::active_mask(site))
}

/// `__syncwarp(mask)` in compiled CPU leaf code.
#[no_mangle]
pub extern "C" fn hpvm_rt_warp_sync(mask: u32) {
    guard("__syncwarp", || crate::warp::sync(mask))
}

/// `__hpvm__malloc` in compiled leaf code.
#[no_mangle]
pub extern "C" fn hpvm_rt_malloc(bytes: i64) -> *mut c_void {
    guard("__hpvm__malloc", || {
        if bytes < 0 {
            crate::fatal(&format!("__hpvm__malloc({bytes}): negative size"));
        }
        scratch::malloc(bytes as usize) as *mut c_void
    })
}

/// Instrumented builds (`--trace-accesses`): one leaf instance starts. See [`crate::trace`].
///
/// # Safety
/// `name` is a NUL-terminated string, `ids` points to 12 integers, `scalars` to `n`.
#[no_mangle]
pub unsafe extern "C" fn hpvm_rt_trace_instance(name: *const c_char, ids: *const i64, scalars: *const i64, n: u32) {
    unsafe { crate::trace::instance_raw(name, ids, scalars, n) }
}

/// Instrumented builds: one access of the current instance (`kind`: 0 read, 1 write, 2 both;
/// `value` the integer read, sign-extended, when `has_value` is 1).
#[no_mangle]
pub extern "C" fn hpvm_rt_trace_access(param: i32, offset: i64, bytes: u32, kind: u32, value: i64, has_value: u32) {
    crate::trace::access(param, offset, bytes, kind, (has_value != 0).then_some(value))
}

/// A translated leaf's pointer loaded from memory: the program's address to the running
/// device's ([`crate::devices::addresses`]). Hot in such leaves: no guard, nothing that fails.
#[no_mangle]
pub extern "C" fn hpvm_rt_to_device_address(p: u64) -> u64 {
    crate::devices::addresses::translate(p, true)
}

/// A translated leaf's pointer stored into memory: the running device's address back to the
/// program's.
#[no_mangle]
pub extern "C" fn hpvm_rt_to_program_address(p: u64) -> u64 {
    crate::devices::addresses::translate(p, false)
}

/// The host's addresses of the `n` device functions that the GPU module of `ptx` calls
/// through pointers, in the build's order ([`contract::symbols::FUNCTION_TABLE`]); called
/// before `main`, after [`hpvm_rt_module`].
///
/// # Safety
/// `ptx` is the module's NUL-terminated PTX, alive for the whole run; `functions` holds `n`
/// function addresses.
#[no_mangle]
pub unsafe extern "C" fn hpvm_rt_gpu_functions(ptx: *const c_char, functions: *const u64, n: u32) {
    guard("registering the functions GPU code calls through pointers", || {
        if ptx.is_null() || functions.is_null() {
            return;
        }
        // SAFETY: as the caller promises.
        let (ptx, list) = unsafe { (std::ffi::CStr::from_ptr(ptx), std::slice::from_raw_parts(functions, n as usize)) };
        crate::devices::cuda::function_table(ptx, list.to_vec());
    })
}

#[cfg(test)]
mod tests {
    use super::hpvm_rt_fns;

    /// PTX's `fns`: the n-th set bit from the base (inclusive), up or down, or none.
    #[test]
    fn fns_finds_the_nth_set_bit_from_the_base() {
        let mask = 0b1011_0100u32; // bits 2, 4, 5, 7
        assert_eq!(hpvm_rt_fns(mask, 0, 1), 2);
        assert_eq!(hpvm_rt_fns(mask, 0, 3), 5);
        assert_eq!(hpvm_rt_fns(mask, 4, 1), 4);
        assert_eq!(hpvm_rt_fns(mask, 4, 2), 5);
        assert_eq!(hpvm_rt_fns(mask, 7, -2), 5);
        assert_eq!(hpvm_rt_fns(mask, 6, -3), 2);
        assert_eq!(hpvm_rt_fns(mask, 0, 5), u32::MAX);
        assert_eq!(hpvm_rt_fns(mask, 5, 0), 5);
        assert_eq!(hpvm_rt_fns(mask, 6, 0), u32::MAX);
        assert_eq!(hpvm_rt_fns(u32::MAX, 31, 1), 31);
        assert_eq!(hpvm_rt_fns(u32::MAX, 31, 2), u32::MAX);
    }
}
