//! CUDA GPUs through the driver API (`cudarc`, loaded at run time: an executable built here
//! starts on machines without CUDA and falls back to the CPU).
//!
//! Every visible GPU (`CUDA_VISIBLE_DEVICES` applies) is one [`Cuda`] device: its primary
//! context and one non-blocking stream, on which its copies and kernels run in order.
//!
//! A context costs about 100 ms to open, and the driver opens one at a time, so only the
//! first GPU opens with the run; the others open when first used, or in the background
//! ([`super::opening`]) when the run shows it will want them.
//!
//! Invariants:
//! - work is only ever enqueued on a device's own stream; ordering across devices is by events
//!   (`Cuda::mark` / `Cuda::wait_for`), never by the null stream;
//! - every use of a GPU binds it first ([`Cuda::bind`]), which opens it if it is not yet;
//! - peer access is enabled for every pair of open GPUs the hardware allows: whichever of the
//!   two opens second enables it both ways, under one lock ([`open_in`]); a copy between two
//!   GPUs is a peer copy (the driver stages it through host memory for a pair without peer
//!   access, at about a tenth of the speed);
//! - host memory the runtime page-locks is registered PORTABLE, so every context's copies
//!   see it as page-locked;
//! - a copy from pageable host memory returns once the driver has taken the bytes, so the
//!   host may change them afterwards; copies from page-locked memory are truly asynchronous:
//!   the caller synchronizes before the host may touch what they read or write.
//!
//! Every driver call's error is checked and returned with what was being done.

use super::held::{Held, Launch};
use super::params::Params;
use super::staging::{Slots, STAGE_AT_LEAST};
use super::Device;
use crate::devices::addresses::Addresses;
use contract::symbols::FUNCTION_TABLE;
use cudarc::driver::{result, sys};
use std::collections::HashMap;
use std::ffi::{c_void, CStr, CString};
use std::sync::{Mutex, MutexGuard};

/// A program lane's driver stream and its join event (made when first wanted).
type ProgramLane = (sys::CUstream, Option<sys::CUevent>);

pub struct Cuda {
    /// The device's index in this run (`Place::Device(index)`).
    pub index: usize,
    dev: sys::CUdevice,
    /// The context and stream, once opened ([`Cuda::bind`]).
    opened: std::sync::OnceLock<Opened>,
    pub name: String,
    /// Compute capability (major, minor): which of the build's machine code it runs.
    capability: (u32, u32),
    /// Loaded PTX modules by the address of their text, and their kernels by name.
    modules: Mutex<HashMap<usize, sys::CUmodule>>,
    /// Per module (by its PTX's address), its kernels looked up so far: found by name
    /// without allocating, on every launch.
    functions: Mutex<crate::hash::FxHashMap<usize, Vec<(String, sys::CUfunction)>>>,
    /// Events marking points of the stream (see [`Cuda::mark`]), reused: a slot is recorded
    /// again only after the stream was synchronized past its last use.
    marks: Mutex<Vec<sys::CUevent>>,
    /// Page-locked slots for host copies ([`super::staging`]), made on first use.
    staging: Mutex<Option<Slots>>,
    /// Sparse copies ([`crate::memory::residency`]) through the driver's virtual memory
    /// management: the granule (found once; `None` where the GPU lacks it), each address
    /// reservation's size, and the physical allocation behind each mapped granule.
    granule: std::sync::OnceLock<Option<u64>>,
    reservations: Mutex<HashMap<u64, u64>>,
    mapped: Mutex<HashMap<u64, sys::CUmemGenericAllocationHandle>>,
    /// Launches held back, and the graphs of repeated sequences ([`super::held`]).
    held: Mutex<Held>,
    /// The event another GPU's stream waits on to follow this one ([`Cuda::join_point`]).
    join: Mutex<Option<sys::CUevent>>,
    /// Points of the streams in a launch's slots, without timing ([`Cuda::point`]).
    points: Mutex<Vec<sys::CUevent>>,
    /// [`Cuda::join_point`]'s event for the side stream.
    side_join: Mutex<Option<sys::CUevent>>,
    /// The second stream, for copies from other GPUs that run beside the kernels
    /// ([`Lane::Side`]); made at its first use.
    side: Mutex<Option<sys::CUstream>>,
    /// The streams of [`Lane::Program`], each with its [`Cuda::join_point`] event: made at
    /// first use, up to the lane asked for.
    /// Per program lane, its stream and join event, made at the lane's first use (the lanes a
    /// program's streams take are few, and scattered: a priority's is the last).
    programs: Mutex<Vec<Option<ProgramLane>>>,
    /// The address table last written ([`Cuda::write_address_table`]): its module's PTX
    /// address and its words.
    addresses: Mutex<Option<(usize, Vec<u64>)>>,
    /// [`Cuda::limits`], once asked.
    limits: std::sync::OnceLock<Result<super::DeviceLimits, String>>,
}

// SAFETY: CUDA contexts, streams, modules, functions and events may be used from any thread
// once the context is made current there, which `bind` does before every use.
unsafe impl Send for Cuda {}
unsafe impl Sync for Cuda {}

/// The machine code the executable carries per module, by the address of the module's PTX.
static MACHINE_CODE: Mutex<Option<HashMap<usize, crate::sass::Images>>> = Mutex::new(None);

/// The PTX of every GPU module of the program, which a GPU opened later loads as it opens
/// ([`super::opening`]).
static MODULES: Mutex<Vec<&'static CStr>> = Mutex::new(Vec::new());

/// Records the program's GPU modules (by their PTX), as they register.
pub fn register_modules(ptx: &[&'static CStr]) {
    MODULES.lock().unwrap_or_else(|e| e.into_inner()).extend(ptx);
}

/// The program's GPU modules registered so far ([`register_modules`]).
pub fn registered_modules() -> Vec<&'static CStr> {
    MODULES.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Records the build's machine code for the module of `ptx`, which [`Cuda::load_module`]
/// prefers to the PTX on a GPU of one of its architectures.
pub fn machine_code(ptx: &'static CStr, images: crate::sass::Images) {
    if !images.is_empty() {
        let mut all = MACHINE_CODE.lock().unwrap_or_else(|e| e.into_inner());
        all.get_or_insert_with(HashMap::new).insert(ptx.as_ptr() as usize, images);
    }
}

/// The host's addresses of each module's functions of [`FUNCTION_TABLE`], by its PTX.
static FUNCTIONS: Mutex<Option<HashMap<usize, Vec<u64>>>> = Mutex::new(None);

/// Records the host's addresses of the functions the module of `ptx` calls through pointers.
pub fn function_table(ptx: &'static CStr, addresses: Vec<u64>) {
    FUNCTIONS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(ptx.as_ptr() as usize, addresses);
}

/// Writes `words` at the start of the global `name` of the loaded `module`: in the order of
/// `stream` where one is given (pageable memory, which the driver stages before it returns),
/// else at once.
fn write_words(module: sys::CUmodule, name: &str, words: &[u64], stream: Option<sys::CUstream>) -> Result<(), String> {
    let c_name = CString::new(name).map_err(|e| e.to_string())?;
    // SAFETY: `module` is loaded and never unloaded.
    let (at, size) =
        check(&format!("cuModuleGetGlobal({name})"), unsafe { result::module::get_global(module, c_name) })?;
    let bytes = std::mem::size_of_val(words);
    if size < bytes {
        return Err(format!("the GPU module's `{name}` has {size} bytes, not {bytes}"));
    }
    let from = words.as_ptr() as *const c_void;
    // SAFETY: `at` is the module's global, `bytes` within it; `words` outlives the call, and
    // the driver has read pageable memory before an asynchronous copy returns.
    let copied = unsafe {
        match stream {
            Some(s) => sys::cuMemcpyHtoDAsync_v2(at, from, bytes, s),
            None => sys::cuMemcpyHtoD_v2(at, from, bytes),
        }
    };
    check(&format!("copying into `{name}`"), copied.result())
}

fn check<T>(what: &str, r: Result<T, result::DriverError>) -> Result<T, String> {
    r.map_err(|e| failed(what, e))
}

/// A driver call's error, as the runtime's message; noted first where it makes the context
/// unusable (a kernel's failed `assert`, which the CUDA API turns into `cudaErrorAssert`).
fn failed(what: &str, e: result::DriverError) -> String {
    if e.0 == sys::CUresult::CUDA_ERROR_ASSERT {
        ASSERTED.store(true, std::sync::atomic::Ordering::SeqCst);
        crate::FAILED.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    format!("{what}: {e}")
}

/// A GPU reported a failed device-side assertion: its context is unusable from then on.
static ASSERTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether a GPU reported a failed device-side assertion.
pub fn asserted() -> bool {
    ASSERTED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Host ranges page-locked by [`lock_until_drain`]: the page-rounded ranges, start and end.
static LOCKED_UNTIL_DRAIN: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

/// Page-locks the pages holding the source of host-to-device copy `c` (for every GPU), so
/// that its DMA reads them directly, with no staging slot to wait for; false where the driver
/// refuses (pages locked already, by the program or for another copy). Unlocked after the
/// next drain ([`unlock_after_drain`]), once no copy reads them.
fn lock_until_drain(c: &super::Copy) -> bool {
    const PAGE: u64 = 4096;
    let span = c.rows.saturating_sub(1) * c.pitch + c.row_bytes;
    let start = c.src_addr / PAGE * PAGE;
    let end = (c.src_addr + span).next_multiple_of(PAGE);
    let mut held = LOCKED_UNTIL_DRAIN.lock().unwrap_or_else(|e| e.into_inner());
    // A buffer copied again before the drain: its pages are locked already.
    if held.iter().any(|&(s, e)| s <= start && end <= e) {
        return true;
    }
    // SAFETY: the pages of a tracked buffer's host copy, alive until the buffer is discarded,
    // which drains (and so unlocks) first.
    let locked = unsafe {
        sys::cuMemHostRegister_v2(start as *mut c_void, (end - start) as usize, sys::CU_MEMHOSTREGISTER_PORTABLE)
    }
    .result()
    .is_ok();
    if locked {
        held.push((start, end));
    }
    locked
}

/// Unlocks what [`lock_until_drain`] locked: called by a drain, once every GPU is idle.
pub(super) fn unlock_after_drain() {
    let locked = std::mem::take(&mut *LOCKED_UNTIL_DRAIN.lock().unwrap_or_else(|e| e.into_inner()));
    for (start, _) in locked {
        // SAFETY: locked by `lock_until_drain`, and no copy reads it any more (every GPU idle).
        let _ = unsafe { sys::cuMemHostUnregister(start as *mut c_void) };
    }
}

/// An open GPU's primary context and its stream.
#[derive(Clone, Copy)]
pub(super) struct Opened {
    ctx: sys::CUcontext,
    pub(super) stream: sys::CUstream,
}

/// A kernel found on a GPU ([`Cuda::find_kernel`]): its function (as an address) and its name's
/// index among the held launches' names.
#[derive(Clone, Copy)]
pub struct Found {
    f: usize,
    name: usize,
    /// Whether a launch of it went to the driver directly, with the block and shared memory
    /// of every launch of it ([`Cuda::launch_found`]'s caller keeps them).
    validated: bool,
}

/// Makes `ctx` the calling thread's current context, unless it is already: asking is a read
/// of the driver's thread-local state, setting it is not free, and every operation on a GPU
/// makes its context current first (a loop of launches on one GPU set it once per launch).
fn make_current(ctx: sys::CUcontext) -> Result<(), String> {
    let mut now = std::ptr::null_mut();
    // SAFETY: an out-pointer for the current context.
    if unsafe { sys::cuCtxGetCurrent(&mut now) } == sys::CUresult::CUDA_SUCCESS && now == ctx {
        return Ok(());
    }
    // SAFETY: the context lives as long as the process (primary contexts are never released).
    check("cuCtxSetCurrent", unsafe { result::ctx::set_current(ctx) })
}

/// Held while a GPU's context opens and its peer access is enabled: the driver opens one
/// context at a time anyway, and two GPUs opening at once must not both miss the other.
static OPENING: Mutex<()> = Mutex::new(());

/// Opens `all[me]`'s context and stream, if not yet, and enables peer access between it and
/// every GPU of `all` already open, both ways where the hardware allows.
pub(super) fn open_in(all: &[Cuda], me: usize) -> Result<Opened, String> {
    let _one_at_a_time = OPENING.lock().unwrap_or_else(|e| e.into_inner());
    let g = &all[me];
    if let Some(&o) = g.opened.get() {
        return Ok(o);
    }
    let t = std::time::Instant::now();
    // SAFETY: `dev` comes from cuDeviceGet.
    let ctx = check("cuDevicePrimaryCtxRetain", unsafe { result::primary_ctx::retain(g.dev) })?;
    make_current(ctx)?;
    let stream = check("cuStreamCreate", result::stream::create(result::stream::StreamKind::NonBlocking))?;
    for other in all.iter().filter(|o| o.index != g.index) {
        let Some(o) = other.opened.get() else { continue };
        for (from, from_ctx, to, to_ctx) in [(g, ctx, other, o.ctx), (other, o.ctx, g, ctx)] {
            if can_access(from.dev, to.dev)? {
                make_current(from_ctx)?;
                // SAFETY: both contexts are alive; enabling twice reports an error we accept.
                match unsafe { sys::cuCtxEnablePeerAccess(to_ctx, 0) } {
                    sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
                    e => return Err(format!("enabling peer access from {} to {}: {e:?}", from.label(), to.label())),
                }
            }
        }
    }
    make_current(ctx)?;
    // The program's limits, which open GPUs took when it set them: one this GPU refuses
    // (a limit its architecture lacks) is said, and the GPU still opens.
    for (limit, value) in CONTEXT_LIMITS.lock().unwrap_or_else(|e| e.into_inner()).iter().enumerate() {
        if let Some(v) = value {
            if let Err(why) = set_context_limit(limit, *v) {
                eprintln!("hpvm-mgpu: {}: cudaDeviceSetLimit({limit}, {v}) not taken: {why}", g.label());
            }
        }
    }
    let o = Opened { ctx, stream };
    let _ = g.opened.set(o);
    crate::sink::record(crate::sink::Event::GpuOpened { nanos: t.elapsed().as_nanos() as u64 });
    Ok(o)
}

/// The program's `cudaDeviceSetLimit` values (by `cudaLimit`, which is the driver's
/// `CUlimit`): given to every context, those open when it asks and those opened after.
static CONTEXT_LIMITS: Mutex<[Option<usize>; 7]> = Mutex::new([None; 7]);

/// The driver's `CUlimit` numbered `limit` (CUDA's `cudaLimit` has the same numbers).
fn cu_limit(limit: usize) -> Option<sys::CUlimit> {
    use sys::CUlimit::*;
    Some(match limit {
        0 => CU_LIMIT_STACK_SIZE,
        1 => CU_LIMIT_PRINTF_FIFO_SIZE,
        2 => CU_LIMIT_MALLOC_HEAP_SIZE,
        3 => CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH,
        4 => CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT,
        5 => CU_LIMIT_MAX_L2_FETCH_GRANULARITY,
        6 => CU_LIMIT_PERSISTING_L2_CACHE_SIZE,
        _ => return None,
    })
}

/// Sets `limit` in the current context and returns the value the driver keeps (it rounds the
/// stack up, for one).
fn set_context_limit(limit: usize, value: usize) -> Result<usize, String> {
    let l = cu_limit(limit).ok_or_else(|| format!("no limit numbered {limit}"))?;
    // SAFETY: a context is current; `l` is a valid limit.
    check("cuCtxSetLimit", unsafe { sys::cuCtxSetLimit(l, value) }.result())?;
    let mut kept = value;
    // SAFETY: as above, with an out-pointer.
    check("cuCtxGetLimit", unsafe { sys::cuCtxGetLimit(&mut kept, l) }.result())?;
    Ok(kept)
}

/// The program's `cudaDeviceSetLimit(limit, value)` on every GPU: a kernel's stack (deep
/// recursion needs more than the 1 KiB default), the device heap, printf's buffer. Open GPUs
/// take it now, the others when they open. Returns the value the driver keeps, from the
/// first open GPU (`value` if none is open yet).
pub fn set_limit(all: &[Cuda], limit: usize, value: usize) -> Result<usize, String> {
    cu_limit(limit).ok_or_else(|| format!("no limit numbered {limit}"))?;
    let _one_at_a_time = OPENING.lock().unwrap_or_else(|e| e.into_inner());
    CONTEXT_LIMITS.lock().unwrap_or_else(|e| e.into_inner())[limit] = Some(value);
    let mut kept = None;
    for g in all {
        if let Some(o) = g.opened.get() {
            make_current(o.ctx)?;
            let v = set_context_limit(limit, value)?;
            kept.get_or_insert(v);
        }
    }
    Ok(kept.unwrap_or(value))
}

/// Whether GPU `from` can read and write `to`'s memory directly (no context needed).
fn can_access(from: sys::CUdevice, to: sys::CUdevice) -> Result<bool, String> {
    let mut can = 0;
    // SAFETY: both handles come from cuDeviceGet.
    check("cuDeviceCanAccessPeer", unsafe { sys::cuDeviceCanAccessPeer(&mut can, from, to) }.result())?;
    Ok(can != 0)
}

/// The driver's performance rank of the link from GPU `from` to `to` (0 the best).
fn link_rank(from: sys::CUdevice, to: sys::CUdevice) -> Result<u32, String> {
    let mut rank = 0;
    let attr = sys::CUdevice_P2PAttribute::CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK;
    // SAFETY: both handles come from cuDeviceGet and are distinct.
    check("cuDeviceGetP2PAttribute", unsafe { sys::cuDeviceGetP2PAttribute(&mut rank, attr, from, to) }.result())?;
    Ok(rank.max(0) as u32)
}

/// A GPU's streams: the main one, in program order, the side one, where copies from other
/// GPUs run beside the main stream's kernels, and one per program stream that runs kernels
/// beside the others' ([`super::inflight`] orders them all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    Main,
    Side,
    /// The `i`-th stream for a program's streams (`i` < [`PROGRAM_LANES`]).
    Program(u8),
}

/// The most driver streams a GPU gives the program's streams: CUDA's own limit on hardware
/// queues (HyperQ's 32 connections). Program streams beyond share them, which only orders
/// more work, never less.
pub const PROGRAM_LANES: usize = 32;

/// Per program lane, the priority its driver streams are made with: CUDA's, 0 the lowest and
/// the default (`cudaStreamCreateWithPriority` sets it for the lane its stream takes, see
/// `cudart`). A lane's streams are made at its first use on each GPU, with the priority then.
static LANE_PRIORITIES: [std::sync::atomic::AtomicI32; PROGRAM_LANES] =
    [const { std::sync::atomic::AtomicI32::new(0) }; PROGRAM_LANES];

/// Program lane `i`'s streams are made with `priority` from now on.
pub fn set_lane_priority(i: u8, priority: i32) {
    LANE_PRIORITIES[usize::from(i) % PROGRAM_LANES].store(priority, std::sync::atomic::Ordering::Relaxed);
}

thread_local! {
    /// The lane the launches of this thread go to ([`on_lane`]).
    static LAUNCH_LANE: std::cell::Cell<Lane> = const { std::cell::Cell::new(Lane::Main) };
}

/// Runs `f` with its launches ([`Cuda::launch`]), copies ([`Cuda::enqueue_copy`]) and fills
/// on stream `lane` of their GPU instead of the main one, launches never held; the caller
/// ordered that stream ([`super::inflight`]).
pub fn on_lane<R>(lane: Lane, f: impl FnOnce() -> R) -> R {
    let before = LAUNCH_LANE.with(|l| l.replace(lane));
    let r = f();
    LAUNCH_LANE.with(|l| l.set(before));
    r
}

/// A point of a GPU's stream, as recorded by [`Cuda::mark`]; valid until that slot is
/// recorded again.
#[derive(Clone, Copy, Debug)]
pub struct Mark(sys::CUevent);

// SAFETY: an event handle is a name for the driver, usable from any thread of the process
// (the in-flight ledger keeps them under its lock).
unsafe impl Send for Mark {}

/// The GPUs of a run.
pub struct Gpus {
    pub gpus: Vec<Cuda>,
    /// GPUs the driver sees (`CUDA_VISIBLE_DEVICES` applies).
    pub visible: usize,
    /// Pairs (i, j) where i reads j's memory directly (peer access enabled once both are
    /// open).
    pub peer: Vec<(usize, usize)>,
    /// The cost of copying from GPU i to GPU j ([`super::topology`]): the driver's
    /// performance rank of the link where peer access works, else `NO_PEER`.
    pub link_cost: Vec<Vec<u32>>,
}

/// Finds the first `want` GPUs (all visible ones when `None`) and opens the first, or all of
/// them with `all` (runs over ranks, whose ranks must agree on every launch's devices, and
/// `HPVM_MGPU_OPEN=start`). `Ok(None)` when there is no driver or no GPU; `Err` when there is
/// one but it is unusable, or fewer than `want`.
pub fn open(want: Option<usize>, all: bool) -> Result<Option<Gpus>, String> {
    // SAFETY: probing for the driver library has no precondition.
    if !unsafe { sys::is_culib_present() } {
        return Ok(None);
    }
    if result::init().is_err() {
        return Ok(None);
    }
    let visible = check("cuDeviceGetCount", result::device::get_count())? as usize;
    if visible < 1 {
        return Ok(None);
    }
    let n = want.unwrap_or(visible).min(super::MAX_DEVICES);
    if n > visible {
        return Err(format!("asks for {n} GPUs but {visible} {} visible", if visible == 1 { "is" } else { "are" }));
    }
    let gpus = (0..n).map(Cuda::find).collect::<Result<Vec<Cuda>, String>>()?;
    // The links, from the devices' attributes: no context needed.
    let mut peer = Vec::new();
    let mut link_cost = vec![vec![0; n]; n];
    for (a, ga) in gpus.iter().enumerate() {
        for (b, gb) in gpus.iter().enumerate().filter(|&(b, _)| b != a) {
            link_cost[a][b] = if can_access(ga.dev, gb.dev)? {
                peer.push((a, b));
                link_rank(ga.dev, gb.dev)?
            } else {
                super::topology::NO_PEER
            };
        }
    }
    for k in 0..if all { n } else { 1 } {
        open_in(&gpus, k)?;
    }
    Ok(Some(Gpus { gpus, visible, peer, link_cost }))
}

impl Cuda {
    /// GPU `index` as the driver lists it, not opened yet.
    fn find(index: usize) -> Result<Cuda, String> {
        let dev = check("cuDeviceGet", result::device::get(index as i32))?;
        let name = check("cuDeviceGetName", result::device::get_name(dev))?;
        use sys::CUdevice_attribute as A;
        // SAFETY: `dev` comes from cuDeviceGet; attributes are plain integers.
        let attr = |a: A| check("cuDeviceGetAttribute", unsafe { result::device::get_attribute(dev, a) });
        let capability = (
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?.max(0) as u32,
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?.max(0) as u32,
        );
        Ok(Cuda {
            index,
            dev,
            opened: std::sync::OnceLock::new(),
            name,
            capability,
            modules: Mutex::default(),
            functions: Mutex::default(),
            marks: Mutex::default(),
            join: Mutex::default(),
            points: Mutex::default(),
            side: Mutex::default(),
            side_join: Mutex::default(),
            programs: Mutex::default(),
            staging: Mutex::default(),
            granule: std::sync::OnceLock::new(),
            reservations: Mutex::default(),
            mapped: Mutex::default(),
            held: Mutex::default(),
            addresses: Mutex::default(),
            limits: std::sync::OnceLock::new(),
        })
    }

    /// Whether this GPU's context is open.
    pub fn is_open(&self) -> bool {
        self.opened.get().is_some()
    }

    /// Opens this GPU's context now, if it is not open yet (about 100 ms).
    pub fn open(&self) -> Result<(), String> {
        self.opened().map(|_| ())
    }

    /// This GPU's context and stream, opened now if they are not yet (about 100 ms).
    fn opened(&self) -> Result<Opened, String> {
        if let Some(&o) = self.opened.get() {
            return Ok(o);
        }
        // Not open at the run's start, so the run's devices exist: this GPU is one of them.
        let all = &super::devices().gpus;
        let me = all.iter().position(|g| std::ptr::eq(g, self)).ok_or("a GPU outside the run")?;
        open_in(all, me)
    }

    /// The GPU's properties, asked of the driver once: they do not change, and asking is
    /// not free (the clock rates read the GPU's registers). CUB asks for several on every
    /// call (`cudaDeviceGetAttribute`, occupancy): HeCBench's kurtosis, 100 of Thrust's
    /// `transform_reduce`, took 0.41 s asking each time against nvcc's 0.07 s.
    pub fn limits(&self) -> Result<super::DeviceLimits, String> {
        self.limits
            .get_or_init(|| {
                let t = std::time::Instant::now();
                let l = self.ask_limits();
                crate::sink::record(crate::sink::Event::GpuPropertiesAsked { nanos: t.elapsed().as_nanos() as u64 });
                l
            })
            .clone()
    }

    fn ask_limits(&self) -> Result<super::DeviceLimits, String> {
        use sys::CUdevice_attribute as A;
        let get = |a: A| -> Result<u32, String> {
            // SAFETY: `dev` comes from cuDeviceGet; attributes are plain integers.
            let v = check("cuDeviceGetAttribute", unsafe { result::device::get_attribute(self.dev, a) })?;
            Ok(v.max(0) as u32)
        };
        // SAFETY: as above.
        let total = check("cuDeviceTotalMem", unsafe { result::device::total_mem(self.dev) })?;
        Ok(super::DeviceLimits {
            name: self.name.clone(),
            total_memory: total as u64,
            multiprocessors: get(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            capability: (
                get(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                get(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            ),
            shared_per_block: get(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)? as u64,
            shared_per_block_optin: get(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as u64,
            shared_per_multiprocessor: get(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)? as u64,
            constant_memory: get(A::CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY)? as u64,
            registers_per_block: get(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)?,
            registers_per_multiprocessor: get(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)?,
            warp_size: get(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
            max_threads_per_block: get(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_threads_per_multiprocessor: get(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
            max_block: [
                get(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                get(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                get(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ],
            max_grid: [
                get(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                get(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                get(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ],
            clock_khz: get(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?,
            memory_clock_khz: get(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?,
            memory_bus_bits: get(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?,
            l2_bytes: get(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
        })
    }

    /// "GPU k (name)", for messages.
    pub fn label(&self) -> String {
        format!("GPU {} ({})", self.index, self.name)
    }

    /// Makes the context current on this thread (opening it first if needed), after
    /// submitting the launches held on this GPU: every other operation binds first, so none
    /// overtakes them ([`super::held`]). The context and stream, for the caller's use.
    pub(super) fn bind(&self) -> Result<Opened, String> {
        self.bind_at(true)
    }

    /// [`Cuda::bind`]; `sync`: for something other than a launch, which ends the interval
    /// of launches the held sequences are measured by ([`super::held::Held::sync_point`]).
    fn bind_at(&self, sync: bool) -> Result<Opened, String> {
        let o = self.opened()?;
        // SAFETY: the context lives as long as the process.
        make_current(o.ctx)?;
        // Launches are held only where graphs are on: otherwise there is nothing to submit.
        if super::held::enabled() {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            if sync {
                held.sync_point();
            }
            if !held.is_empty() {
                held.flush(o.stream, &|| self.label())?;
            }
        }
        Ok(o)
    }

    /// Graph replays and graphs made on this GPU so far ([`super::held`]).
    pub fn graph_counts(&self) -> (u64, u64) {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        (held.replays, held.built)
    }

    pub fn alloc(&self, bytes: usize) -> Result<u64, String> {
        self.bind()?;
        // SAFETY: plain device allocation.
        unsafe { result::malloc_sync(bytes.max(1)) }.map_err(|e| {
            let (free, total) = result::mem_get_info().unwrap_or((0, 0));
            let mib = |b: usize| b as f64 / (1 << 20) as f64;
            format!("cuMemAlloc: {e} ({:.1} MiB free of {:.1} MiB on {})", mib(free), mib(total), self.label())
        })
    }

    pub fn free(&self, p: u64) -> Result<(), String> {
        self.bind()?;
        // Kernels or copies still reading it must finish first (cuMemFree would wait for the
        // whole device anyway).
        self.synchronize()?;
        // SAFETY: `p` came from `alloc` and is freed once.
        check("cuMemFree", unsafe { result::free_sync(p) })
    }

    /// The properties of this GPU's physical allocations for sparse copies.
    fn vmm_prop(&self) -> sys::CUmemAllocationProp {
        // SAFETY: a plain C struct; zero is "none" for every field left unset.
        let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
        prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = self.dev;
        prop
    }

    /// The granule of the driver's virtual memory management on this GPU (usually 2 MiB), or
    /// `None` where it has none.
    fn vmm_granule(&self) -> Option<u64> {
        *self.granule.get_or_init(|| {
            self.bind().ok()?;
            let a = sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED;
            // SAFETY: a valid device and attribute.
            if unsafe { result::device::get_attribute(self.dev, a) }.ok()? == 0 {
                return None;
            }
            let prop = self.vmm_prop();
            let mut g = 0usize;
            let flag = sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED;
            // SAFETY: `g` and `prop` outlive the call.
            unsafe { sys::cuMemGetAllocationGranularity(&mut g, &prop, flag) }.result().ok()?;
            (g > 0).then_some(g as u64)
        })
    }

    fn vmm_reserve(&self, bytes: u64) -> Result<u64, String> {
        self.bind()?;
        let g = self.vmm_granule().ok_or("no virtual memory management")?;
        let mut p: sys::CUdeviceptr = 0;
        // SAFETY: `p` outlives the call; a fresh reservation anywhere.
        check(
            "cuMemAddressReserve",
            unsafe { sys::cuMemAddressReserve(&mut p, bytes as usize, g as usize, 0, 0) }.result(),
        )?;
        self.reservations.lock().unwrap_or_else(|e| e.into_inner()).insert(p, bytes);
        Ok(p)
    }

    /// Backs `[addr, addr + bytes)` granule by granule (each its own physical allocation, so
    /// any granule can go back alone), readable and writable by this GPU and by every GPU of
    /// the run that reads its memory directly.
    fn vmm_map(&self, addr: u64, bytes: u64) -> Result<(), String> {
        self.bind()?;
        let g = self.vmm_granule().ok_or("no virtual memory management")?;
        let mapped = self.vmm_map_granules(addr, bytes, g);
        let granted = mapped.and_then(|()| self.vmm_grant(addr, bytes));
        if granted.is_err() {
            // Nothing half-mapped stays: the granules this call mapped go back.
            let _ = self.vmm_release(addr, bytes, g);
        }
        granted
    }

    /// Maps a fresh physical allocation under each granule of `[addr, addr + bytes)`; on an
    /// error, the ones mapped so far stay (the caller releases them).
    fn vmm_map_granules(&self, addr: u64, bytes: u64, g: u64) -> Result<(), String> {
        let prop = self.vmm_prop();
        let mut mapped = self.mapped.lock().unwrap_or_else(|e| e.into_inner());
        let mut at = addr;
        while at < addr + bytes {
            let mut h: sys::CUmemGenericAllocationHandle = 0;
            // SAFETY: `h` and `prop` outlive the call.
            unsafe { sys::cuMemCreate(&mut h, g as usize, &prop, 0) }.result().map_err(|e| {
                let (free, total) = result::mem_get_info().unwrap_or((0, 0));
                let mib = |b: usize| b as f64 / (1 << 20) as f64;
                format!("cuMemCreate: {e} ({:.1} MiB free of {:.1} MiB on {})", mib(free), mib(total), self.label())
            })?;
            // SAFETY: a granule of a reservation of ours, not mapped (the memory manager maps
            // each once), and a fresh allocation of the granule's size.
            if let Err(e) = unsafe { sys::cuMemMap(at, g as usize, 0, h, 0) }.result() {
                // SAFETY: made above, mapped nowhere.
                let _ = unsafe { sys::cuMemRelease(h) };
                return Err(format!("cuMemMap on {}: {e}", self.label()));
            }
            mapped.insert(at, h);
            at += g;
        }
        Ok(())
    }

    /// Lets this GPU, and every GPU of the run that reads its memory directly, read and write
    /// `[addr, addr + bytes)` (mapped).
    fn vmm_grant(&self, addr: u64, bytes: u64) -> Result<(), String> {
        let access = |id: sys::CUdevice| sys::CUmemAccessDesc {
            location: sys::CUmemLocation { type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE, id },
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        let devs = super::devices();
        let mut readers: Vec<sys::CUmemAccessDesc> = vec![access(self.dev)];
        readers.extend(devs.peer.iter().filter(|&&(_, j)| j == self.index).map(|&(i, _)| access(devs.gpu(i).dev)));
        // SAFETY: `readers` outlives the call; the range was just mapped.
        let set = unsafe { sys::cuMemSetAccess(addr, bytes as usize, readers.as_ptr(), readers.len()) }.result();
        check("cuMemSetAccess", set)
    }

    fn vmm_unmap(&self, addr: u64, bytes: u64) -> Result<(), String> {
        self.bind()?;
        // Copies and kernels still using it finish first.
        self.synchronize()?;
        let g = self.vmm_granule().ok_or("no virtual memory management")?;
        self.vmm_release(addr, bytes, g)
    }

    /// Unmaps and releases every mapped granule of `[addr, addr + bytes)`, which nothing uses
    /// any more (the memory manager drains other GPUs' work first).
    fn vmm_release(&self, addr: u64, bytes: u64, g: u64) -> Result<(), String> {
        let mut mapped = self.mapped.lock().unwrap_or_else(|e| e.into_inner());
        let mut at = addr;
        while at < addr + bytes {
            if let Some(h) = mapped.remove(&at) {
                // SAFETY: a granule of ours mapped with `h`; unmapped and released once
                // (removed from the table).
                check("cuMemUnmap", unsafe { sys::cuMemUnmap(at, g as usize) }.result())?;
                check("cuMemRelease", unsafe { sys::cuMemRelease(h) }.result())?;
            }
            at += g;
        }
        Ok(())
    }

    fn vmm_unreserve(&self, addr: u64) -> Result<(), String> {
        self.bind()?;
        let size = self.reservations.lock().unwrap_or_else(|e| e.into_inner()).remove(&addr);
        let size = size.ok_or_else(|| format!("{}: freeing {addr:#x}, which it did not reserve", self.label()))?;
        // SAFETY: a reservation of ours whose granules were all unmapped, freed once.
        check("cuMemAddressFree", unsafe { sys::cuMemAddressFree(addr, size as usize) }.result())
    }

    /// Page-locks host memory so copies from and to it run at full DMA speed (no staging
    /// through the driver's bounce buffers), for every GPU's context. False when the driver
    /// refuses (for instance a range sharing pages with one already locked): copies then
    /// still work, slower.
    pub fn pin(&self, host: *mut u8, bytes: usize) -> bool {
        if self.bind().is_err() {
            return false;
        }
        // SAFETY: the range is host memory the program keeps alive while tracked.
        unsafe { sys::cuMemHostRegister_v2(host as *mut c_void, bytes, sys::CU_MEMHOSTREGISTER_PORTABLE) }
            .result()
            .is_ok()
    }

    /// Maps page-locked host memory into every GPU's address space at its host address
    /// ([`super::in_place`]); false where the driver refuses or would give another address
    /// (then nothing stays registered).
    pub fn map_in_place(&self, host: *mut u8, bytes: usize) -> bool {
        if self.bind().is_err() {
            return false;
        }
        let flags = sys::CU_MEMHOSTREGISTER_PORTABLE | sys::CU_MEMHOSTREGISTER_DEVICEMAP;
        // SAFETY: the range is host memory the program keeps alive until `unmap_in_place`.
        if unsafe { sys::cuMemHostRegister_v2(host as *mut c_void, bytes, flags) }.result().is_err() {
            return false;
        }
        let mut at: sys::CUdeviceptr = 0;
        // SAFETY: `host` was registered just above, device-mapped.
        let same = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut at, host as *mut c_void, 0) }.result().is_ok()
            && at == host as u64;
        if !same {
            // SAFETY: registered above and used by nothing yet.
            let _ = unsafe { sys::cuMemHostUnregister(host as *mut c_void) };
        }
        same
    }

    /// Whether `addr` is GPU memory the driver allocated beside the runtime: a kernel's device
    /// heap (`malloc` in a kernel), whose pointers a program may read back and pass to another
    /// kernel. Asked only of pointers no buffer holds.
    pub fn is_device_memory(&self, addr: u64) -> bool {
        let Ok(o) = self.opened() else { return false };
        if make_current(o.ctx).is_err() {
            return false;
        }
        let mut kind: u32 = 0;
        let attribute = sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
        // SAFETY: a 4-byte out-parameter for the memory-type attribute; any address may be asked.
        let asked = unsafe { sys::cuPointerGetAttribute(&mut kind as *mut u32 as *mut c_void, attribute, addr) };
        asked.result().is_ok() && kind == sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32
    }

    /// Unmaps what [`Cuda::map_in_place`] mapped, once every GPU finished with it.
    pub fn unmap_in_place(&self, host: *mut u8) {
        let all = super::devices();
        // A kernel that failed meanwhile is reported here, as a drain reports it: never lost.
        for k in all.local_gpus().filter(|&k| all.gpu(k).is_open()) {
            if let Err(e) = all.gpu(k).synchronize() {
                crate::fatal(&format!("a kernel launched earlier failed: {e}"));
            }
        }
        if self.bind().is_ok() {
            // SAFETY: `host` was mapped by `map_in_place`, and no GPU runs anything any more.
            let _ = unsafe { sys::cuMemHostUnregister(host as *mut c_void) };
        }
    }

    pub fn unpin(&self, host: *mut u8) {
        if self.bind().is_ok() && self.synchronize().is_ok() {
            // SAFETY: `host` was pinned by `pin`, and no copy of this device uses it any more.
            let _ = unsafe { sys::cuMemHostUnregister(host as *mut c_void) };
        }
    }

    /// Copies device memory to the host and waits.
    pub fn to_host(&self, dst: &mut [u8], src: u64) -> Result<(), String> {
        let o = self.bind()?;
        // SAFETY: `src` has at least `dst.len()` bytes; the stream is synchronized before
        // `dst` is returned to the caller.
        unsafe {
            check("cuMemcpyDtoHAsync", result::memcpy_dtoh_async(dst, src, o.stream))?;
        }
        self.synchronize()
    }

    /// The staging slots, made now if this is their first use (context current).
    fn staging(&self) -> Result<MutexGuard<'_, Option<Slots>>, String> {
        let mut g = self.staging.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            *g = Some(Slots::new().map_err(|e| format!("{}: {e}", self.label()))?);
        }
        Ok(g)
    }

    /// Enqueues host-to-device copy `c` through the staging slots ([`super::staging`]).
    fn staged_to_device(&self, c: &super::Copy) -> Result<(), String> {
        let stream = self.bind()?.stream;
        let mut guard = self.staging()?;
        guard.as_mut().expect("made by staging()").host_to_device(c, stream)
    }

    /// Copies device-to-host `c` through the staging slots and returns once the program's
    /// memory holds it.
    fn staged_to_host(&self, c: &super::Copy) -> Result<(), String> {
        let stream = self.bind()?.stream;
        let mut guard = self.staging()?;
        guard.as_mut().expect("made by staging()").device_to_host(c, stream)
    }

    /// Enqueues a copy on this device's stream. `peer` is the other GPU of a device-to-device
    /// copy. Large host copies go through the staging slots unless the program's buffers are
    /// page-locked (`HPVM_MGPU_PIN=on`); a copy back to the host then completes before this
    /// returns.
    fn enqueue_copy(&self, c: &super::Copy, peer: Option<&Cuda>) -> Result<(), String> {
        self.enqueue_copy_on(c, peer, None)
    }

    /// [`Cuda::enqueue_copy`] on `stream` (a device-to-device copy; default: the device's).
    fn enqueue_copy_on(
        &self,
        c: &super::Copy,
        peer: Option<&Cuda>,
        stream: Option<sys::CUstream>,
    ) -> Result<(), String> {
        use super::Place;
        if c.bytes() >= STAGE_AT_LEAST && !super::pinning() && !super::in_place::host_side(c) {
            match (c.src, c.dst) {
                // Behind a kernel that may wait on the host, a staging slot could wait for a
                // DMA queued behind it: the source is page-locked until the next drain.
                (Place::Host, Place::Device(_)) if super::in_place::pending() && lock_until_drain(c) => {}
                (Place::Host, Place::Device(_)) => return self.staged_to_device(c),
                (Place::Device(_), Place::Host) => return self.staged_to_host(c),
                _ => {}
            }
        }
        let me = self.bind()?;
        let flat = c.rows <= 1 || c.row_bytes == c.pitch;
        let total = c.bytes() as usize;
        let s = match stream {
            Some(s) => s,
            None => self.stream_here(&me)?,
        };
        // The source GPU of a device-to-device copy holds data, so it is open.
        let source = || -> Result<(&Cuda, Opened), String> {
            let p = peer.ok_or("a device-to-device copy without its source GPU")?;
            Ok((p, p.opened()?))
        };
        // SAFETY (all arms): the memory manager hands ranges inside a tracked buffer's host
        // copy or a device allocation of it; the source stays unchanged until the stream is
        // synchronized (see the module's invariants).
        unsafe {
            match (c.src, c.dst) {
                (Place::Host, Place::Device(_)) if flat => check(
                    "cuMemcpyHtoDAsync",
                    sys::cuMemcpyHtoDAsync_v2(c.dst_addr, c.src_addr as *const c_void, total, s).result(),
                ),
                (Place::Device(_), Place::Host) if flat => check(
                    "cuMemcpyDtoHAsync",
                    sys::cuMemcpyDtoHAsync_v2(c.dst_addr as *mut c_void, c.src_addr, total, s).result(),
                ),
                (Place::Device(_), Place::Device(_)) if flat => {
                    let (p, po) = source()?;
                    result::memcpy_peer_async(me.ctx, c.dst_addr, po.ctx, c.src_addr, total, s)
                        .map_err(|e| format!("cuMemcpyPeerAsync from {}: {e}", p.label()))
                }
                (Place::Device(_), Place::Device(_)) => {
                    let (p, po) = source()?;
                    let d = peer_rect(c, po.ctx, me.ctx);
                    sys::cuMemcpy3DPeerAsync(&d, s)
                        .result()
                        .map_err(|e| format!("cuMemcpy3DPeerAsync from {}: {e}", p.label()))
                }
                _ => check("cuMemcpy2DAsync", sys::cuMemcpy2DAsync_v2(&rect(c), s).result()),
            }
        }
    }

    /// Enqueues a copy between `rows` rows of `row_bytes` of this GPU's memory at `dev`
    /// (consecutive rows `pitch` apart) and packed host memory at `host` (rows back to back):
    /// down to the host (`to_host`) or up from it. Ranks stage GPU data this way.
    ///
    /// # Safety
    /// `host` holds `rows * row_bytes` bytes, unchanged (or unread) until the stream is
    /// synchronized; the device rectangle is inside one of this GPU's allocations.
    pub unsafe fn copy_packed(
        &self,
        dev: u64,
        pitch: u64,
        rows: u64,
        row_bytes: u64,
        host: *mut u8,
        to_host: bool,
    ) -> Result<(), String> {
        use super::Place;
        let o = self.bind()?;
        let (here, there) = (Place::Device(self.index), Place::Host);
        let c = if to_host {
            super::Copy { src: here, src_addr: dev, dst: there, dst_addr: host as u64, rows, row_bytes, pitch }
        } else {
            super::Copy { src: there, src_addr: host as u64, dst: here, dst_addr: dev, rows, row_bytes, pitch }
        };
        let mut d = rect(&c);
        if to_host {
            d.dstPitch = row_bytes as usize;
        } else {
            d.srcPitch = row_bytes as usize;
        }
        // SAFETY: the caller's contract; the descriptor outlives the call.
        check("cuMemcpy2DAsync", unsafe { sys::cuMemcpy2DAsync_v2(&d, o.stream) }.result())
    }

    /// Records mark `slot` at the present end of the stream (events made on first use).
    pub fn mark(&self, slot: usize) -> Result<Mark, String> {
        let o = self.bind()?;
        let mut marks = self.marks.lock().unwrap_or_else(|e| e.into_inner());
        while marks.len() <= slot {
            marks.push(check("cuEventCreate", result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT))?);
        }
        // SAFETY: an event of this context, recorded on its stream.
        check("cuEventRecord", unsafe { result::event::record(marks[slot], o.stream) })?;
        Ok(Mark(marks[slot]))
    }

    /// Records `event` (a program's event on this GPU, made here at its first recording) at
    /// the present end of stream `lane`, after the launches held here were submitted; `timing`:
    /// whether it will be asked for elapsed times. The side stream is recorded only where it
    /// exists ([`Cuda::has_side`]).
    pub fn record_event(&self, lane: Lane, event: Option<Mark>, timing: bool) -> Result<Mark, String> {
        let stream = self.lane(lane)?;
        let event = match event {
            Some(e) => e.0,
            None => {
                let flags = if timing {
                    sys::CUevent_flags::CU_EVENT_DEFAULT
                } else {
                    sys::CUevent_flags::CU_EVENT_DISABLE_TIMING
                };
                check("cuEventCreate", result::event::create(flags))?
            }
        };
        // SAFETY: an event of this context, recorded on one of its streams.
        check("cuEventRecord", unsafe { result::event::record(event, stream) })?;
        Ok(Mark(event))
    }

    /// Whether this GPU has its side stream (peer copies beside the kernels) yet.
    pub fn has_side(&self) -> bool {
        self.side.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// Whether the work before event `m` (recorded by [`Cuda::record_event`]) is done; an
    /// error where that work failed.
    pub fn reached(&self, m: Mark) -> Result<bool, String> {
        // SAFETY: an event of this context, recorded.
        match unsafe { result::event::query(m.0) } {
            Ok(()) => Ok(true),
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            Err(e) => Err(failed(&format!("waiting for {}", self.label()), e)),
        }
    }

    /// Waits until event `m` is reached.
    pub fn wait_until(&self, m: Mark) -> Result<(), String> {
        // SAFETY: an event of this context, recorded.
        unsafe { result::event::synchronize(m.0) }.map_err(|e| failed(&format!("waiting for {}", self.label()), e))
    }

    /// Milliseconds from event `a` to event `b` of this GPU; `None` where `b` is not reached.
    pub fn elapsed(&self, a: Mark, b: Mark) -> Result<Option<f32>, String> {
        // SAFETY: two timing events of this context, both recorded.
        match unsafe { result::event::elapsed(a.0, b.0) } {
            Ok(ms) => Ok(Some(ms)),
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NOT_READY => Ok(None),
            Err(e) => Err(failed("cuEventElapsedTime", e)),
        }
    }

    /// Destroys an event [`Cuda::record_event`] made (the driver keeps it until reached).
    pub fn destroy_event(&self, m: Mark) {
        // SAFETY: made by `record_event`, no longer named by the program.
        let _ = unsafe { result::event::destroy(m.0) };
    }

    /// Whether every stream of this GPU is idle (its held launches submitted first); an error
    /// where work there failed.
    pub fn idle(&self) -> Result<bool, String> {
        let o = self.bind()?;
        for s in self.streams(&o) {
            // SAFETY: this device's streams.
            match unsafe { sys::cuStreamQuery(s) }.result() {
                Ok(()) => {}
                Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NOT_READY => return Ok(false),
                Err(e) => return Err(failed(&format!("waiting for {}", self.label()), e)),
            }
        }
        Ok(true)
    }

    /// Milliseconds between two marks, both reached (the stream was synchronized since).
    pub fn between(&self, from: usize, to: usize) -> Result<f32, String> {
        let marks = self.marks.lock().unwrap_or_else(|e| e.into_inner());
        let (Some(&a), Some(&b)) = (marks.get(from), marks.get(to)) else {
            return Err(format!("marks {from} and {to} were never recorded"));
        };
        // SAFETY: both events recorded and completed.
        check("cuEventElapsedTime", unsafe { result::event::elapsed(a, b) })
    }

    /// Marks the present end of the stream for another stream to wait on at once
    /// ([`Cuda::wait_for`]): one event, recorded again at the next call (a wait already
    /// enqueued keeps the point it was given).
    pub fn join_point(&self) -> Result<Mark, String> {
        self.join_point_on(Lane::Main)
    }

    /// [`Cuda::join_point`] of the side stream.
    pub fn side_join_point(&self) -> Result<Mark, String> {
        self.join_point_on(Lane::Side)
    }

    /// [`Cuda::join_point`] of stream `lane`.
    pub fn join_point_on(&self, lane: Lane) -> Result<Mark, String> {
        let stream = self.lane(lane)?;
        let make = || check("cuEventCreate", result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING));
        let event = match lane {
            Lane::Main | Lane::Side => {
                let mut join = if lane == Lane::Main { &self.join } else { &self.side_join }
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                match *join {
                    Some(e) => e,
                    None => *join.insert(make()?),
                }
            }
            Lane::Program(i) => {
                let mut programs = self.programs.lock().unwrap_or_else(|e| e.into_inner());
                let join = &mut programs[usize::from(i)].as_mut().expect("the lane's stream was made above").1;
                match *join {
                    Some(e) => e,
                    None => *join.insert(make()?),
                }
            }
        };
        // SAFETY: an event of this context, recorded on one of its streams.
        check("cuEventRecord", unsafe { result::event::record(event, stream) })?;
        Ok(Mark(event))
    }

    /// Work enqueued on this stream from now on starts after `event` (of any GPU) is reached.
    pub fn wait_for(&self, mark: Mark) -> Result<(), String> {
        self.wait_on(Lane::Main, mark)
    }

    /// The stream of `lane`, the side one made at its first use.
    fn lane(&self, lane: Lane) -> Result<sys::CUstream, String> {
        let o = self.bind()?;
        match lane {
            Lane::Main => Ok(o.stream),
            Lane::Side => {
                let mut side = self.side.lock().unwrap_or_else(|e| e.into_inner());
                match *side {
                    Some(s) => Ok(s),
                    None => Ok(*side.insert(check(
                        "cuStreamCreate",
                        result::stream::create(result::stream::StreamKind::NonBlocking),
                    )?)),
                }
            }
            Lane::Program(i) => {
                let mut programs = self.programs.lock().unwrap_or_else(|e| e.into_inner());
                let i = usize::from(i);
                if programs.len() <= i {
                    programs.resize(i + 1, None);
                }
                if let Some((s, _)) = programs[i] {
                    return Ok(s);
                }
                let priority = LANE_PRIORITIES[i % PROGRAM_LANES].load(std::sync::atomic::Ordering::Relaxed);
                let mut s: sys::CUstream = std::ptr::null_mut();
                let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
                // SAFETY: a plain driver call with this context current (`bind` above).
                let made = unsafe { sys::cuStreamCreateWithPriority(&mut s, flags, priority) }.result();
                check("cuStreamCreateWithPriority", made)?;
                programs[i] = Some((s, None));
                Ok(s)
            }
        }
    }

    /// The stream this thread's work goes to ([`on_lane`]): the main one unless a lane was
    /// given.
    fn stream_here(&self, o: &Opened) -> Result<sys::CUstream, String> {
        match LAUNCH_LANE.with(|l| l.get()) {
            Lane::Main => Ok(o.stream),
            lane => self.lane(lane),
        }
    }

    /// This GPU's streams made so far, the main one first.
    fn streams(&self, o: &Opened) -> smallvec::SmallVec<[sys::CUstream; 4]> {
        let mut all = smallvec::SmallVec::new();
        all.push(o.stream);
        all.extend(*self.side.lock().unwrap_or_else(|e| e.into_inner()));
        all.extend(self.programs.lock().unwrap_or_else(|e| e.into_inner()).iter().flatten().map(|&(s, _)| s));
        all
    }

    /// Marks the present end of stream `lane` in slot `slot` for other streams to wait on,
    /// as [`Cuda::join_point`] does, but valid until the slot is recorded again (after a
    /// drain, [`super::inflight`]) rather than until the next call.
    pub fn point(&self, lane: Lane, slot: usize) -> Result<Mark, String> {
        let stream = self.lane(lane)?;
        let mut points = self.points.lock().unwrap_or_else(|e| e.into_inner());
        while points.len() <= slot {
            points.push(check("cuEventCreate", result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))?);
        }
        // SAFETY: an event of this context, recorded on one of its streams.
        check("cuEventRecord", unsafe { result::event::record(points[slot], stream) })?;
        Ok(Mark(points[slot]))
    }

    /// [`Cuda::wait_for`] for stream `lane`.
    pub fn wait_on(&self, lane: Lane, mark: Mark) -> Result<(), String> {
        let stream = self.lane(lane)?;
        // SAFETY: a recorded event; the stream is this device's.
        check("cuStreamWaitEvent", unsafe {
            result::stream::wait_event(stream, mark.0, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT)
        })
    }

    /// Enqueues a copy from another GPU (`c.src`) into this one on the side stream.
    pub fn copy_beside(&self, c: &super::Copy) -> Result<(), String> {
        let super::Place::Device(from) = c.src else { return Err("a copy beside the kernels comes from a GPU".into()) };
        let stream = self.lane(Lane::Side)?;
        self.enqueue_copy_on(c, Some(super::devices().gpu(from)), Some(stream))
    }

    /// The module of `ptx` on this GPU, loaded on first use: the build's machine code for
    /// this GPU's architecture where the executable has it ([`machine_code`]), else the PTX,
    /// which the driver compiles (its JIT cache makes later runs of the program cheaper).
    pub fn load_module(&self, ptx: &'static CStr) -> Result<sys::CUmodule, String> {
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&m) = modules.get(&(ptx.as_ptr() as usize)) {
            return Ok(m);
        }
        // Not a point where the program synchronizes: a launch's, or the load at the opening.
        self.bind_at(false)?;
        let t = std::time::Instant::now();
        let loaded = |sass: bool| {
            crate::sink::record(crate::sink::Event::ModuleLoaded { sass, nanos: t.elapsed().as_nanos() as u64 })
        };
        let sass = MACHINE_CODE
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|all| all.get(&(ptx.as_ptr() as usize)).cloned());
        let picked = sass.and_then(|images| images.pick(self.capability));
        // SAFETY: a cubin the build's ptxas wrote for this architecture, whole.
        let from_sass = picked.and_then(|(arch, code)| {
            match unsafe { result::module::load_data(code.as_ptr() as *const c_void) } {
                Ok(m) => Some(m),
                Err(e) => {
                    eprintln!(
                        "hpvm-mgpu: {}: the build's {arch} machine code did not load ({e}); compiling the PTX instead",
                        self.label()
                    );
                    None
                }
            }
        });
        let m = match from_sass {
            Some(m) => {
                loaded(true);
                m
            }
            None => {
                // SAFETY: NUL-terminated PTX text; the driver compiles it for this GPU.
                let m = check("cuModuleLoadData (compiling the PTX)", unsafe {
                    result::module::load_data(ptx.as_ptr() as *const c_void)
                })?;
                loaded(false);
                m
            }
        };
        let functions = FUNCTIONS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|f| f.get(&(ptx.as_ptr() as usize)).cloned());
        if let Some(addresses) = functions {
            // `m` was just loaded: nothing runs in it yet, so a synchronous copy into its
            // global is seen by every later launch.
            write_words(m, FUNCTION_TABLE, &addresses, None)?;
        }
        modules.insert(ptx.as_ptr() as usize, m);
        Ok(m)
    }

    /// The address and size of the variable `name` of the module of `ptx` on this GPU (a
    /// constant bank's variable, which the runtime makes a buffer's device copy).
    pub fn bank_variable(&self, ptx: &'static CStr, name: &str) -> Result<(u64, usize), String> {
        self.bind()?;
        let module = self.load_module(ptx)?;
        let c_name = CString::new(name).map_err(|e| e.to_string())?;
        // SAFETY: `module` is loaded and never unloaded.
        let (at, size) =
            check(&format!("cuModuleGetGlobal({name})"), unsafe { result::module::get_global(module, c_name) })?;
        Ok((at, size))
    }

    fn function(&self, ptx: &'static CStr, kernel: &str) -> Result<sys::CUfunction, String> {
        let key = ptx.as_ptr() as usize;
        let found = |fs: &crate::hash::FxHashMap<usize, Vec<(String, sys::CUfunction)>>| {
            fs.get(&key).and_then(|v| v.iter().find(|(name, _)| name == kernel)).map(|&(_, f)| f)
        };
        if let Some(f) = found(&self.functions.lock().unwrap_or_else(|e| e.into_inner())) {
            return Ok(f);
        }
        let module = self.load_module(ptx)?;
        let name = CString::new(kernel).map_err(|e| e.to_string())?;
        // SAFETY: `module` is loaded and never unloaded.
        let f =
            check(&format!("cuModuleGetFunction({kernel})"), unsafe { result::module::get_function(module, name) })?;
        self.functions.lock().unwrap_or_else(|e| e.into_inner()).entry(key).or_default().push((kernel.to_string(), f));
        Ok(f)
    }

    /// Writes a translated leaf's address table into the module of `ptx` on this GPU
    /// ([`crate::devices::addresses`]), in stream order before the launch that follows: what
    /// earlier launches hold is submitted first, and they read the table they were given.
    /// The same table as last time is not written again.
    pub fn write_address_table(&self, ptx: &'static CStr, table: &Addresses) -> Result<(), String> {
        use contract::symbols::{
            ADDRESS_TABLE as TABLE, ADDRESS_TABLE_BACK as TABLE_BACK, ADDRESS_TABLE_CAPACITY as TABLE_CAPACITY,
        };
        if table.len() > TABLE_CAPACITY {
            return Err(format!("{} buffers, more than the {TABLE_CAPACITY} a GPU's address table holds", table.len()));
        }
        let words = table.words(TABLE_BACK);
        let mut last = self.addresses.lock().unwrap_or_else(|e| e.into_inner());
        if last.as_ref().is_some_and(|(p, w)| *p == ptx.as_ptr() as usize && *w == words) {
            return Ok(());
        }
        let o = self.bind()?;
        let module = self.load_module(ptx)?;
        write_words(module, TABLE, &words, Some(o.stream))?;
        *last = Some((ptx.as_ptr() as usize, words));
        Ok(())
    }

    /// Blocks of `kernel` (`threads` per block, `shared` bytes of dynamic shared memory) one
    /// multiprocessor of this GPU holds at once, as the driver finds for the compiled kernel
    /// (its registers too).
    pub fn blocks_per_multiprocessor(
        &self,
        ptx: &'static CStr,
        kernel: &str,
        threads: u32,
        shared: u32,
    ) -> Result<u32, String> {
        self.bind()?;
        let f = self.function(ptx, kernel)?;
        // SAFETY: a loaded function; the call only reads its attributes.
        let per_sm = check("cuOccupancyMaxActiveBlocksPerMultiprocessor", unsafe {
            result::occupancy::max_active_block_per_multiprocessor(f, threads as i32, shared as usize)
        })?;
        Ok(per_sm.max(0) as u32)
    }

    /// Blocks of `kernel` (`threads` per block, `shared` bytes of dynamic shared memory) this
    /// GPU runs at once: its occupancy per multiprocessor times its multiprocessors.
    pub fn wave(&self, ptx: &'static CStr, kernel: &str, threads: u32, shared: u32) -> Result<u64, String> {
        let per_sm = self.blocks_per_multiprocessor(ptx, kernel, threads, shared)?;
        // SAFETY: `dev` comes from cuDeviceGet; attributes are plain integers.
        let sms = check("cuDeviceGetAttribute", unsafe {
            result::device::get_attribute(self.dev, sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        })?;
        Ok(per_sm.max(1) as u64 * sms.max(1) as u64)
    }

    /// Enqueues `kernel` on the stream, with `marks` between marks `before` and `before + 1`
    /// (its time on the GPU is [`Cuda::between`] of them once the stream is synchronized).
    /// `params` holds each parameter's bytes; the driver copies them at the call. With
    /// `hold` (an asynchronous, untimed launch), the launch may wait on the host to be
    /// submitted with the ones after it ([`super::held`]); `params` is then taken.
    #[allow(clippy::too_many_arguments)]
    pub fn launch(
        &self,
        ptx: &'static CStr,
        kernel: &str,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        params: &mut Params,
        marks: Option<usize>,
        hold: bool,
    ) -> Result<(), String> {
        // A cooperative launch goes to the driver's cooperative launch, never held.
        let cooperative = super::cooperative();
        let lane = LAUNCH_LANE.with(|l| l.get());
        let hold = hold
            && lane == Lane::Main
            && !cooperative
            && marks.is_none()
            && shared <= 48 * 1024
            && super::held::enabled();
        if hold {
            // Looking the function up needs no context once it was found before.
            let f = self.function(ptx, kernel)?;
            if self.hold(f, |h| h.name(kernel), grid, block, shared, params)? {
                return Ok(());
            }
        }
        self.launch_direct(ptx, kernel, None, grid, block, shared, params, marks, false, cooperative)
    }

    /// Holds a launch of `f` ([`super::held`]) where it may be held (one of it went to the
    /// driver before); whether it did. `name` gives its name's index.
    fn hold(
        &self,
        f: sys::CUfunction,
        name: impl FnOnce(&mut super::held::Held) -> usize,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        params: &mut Params,
    ) -> Result<bool, String> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let holding = held.counts_launch();
        if !holding || !held.may_hold(f, block, shared) {
            return Ok(false);
        }
        let name = name(&mut held);
        if held.hold(Launch { f, name, grid, block, shared, params: std::mem::take(params) }) {
            // Submits them, or a whole number of their period (the rest stays held).
            let o = self.opened()?;
            make_current(o.ctx)?;
            held.flush_full(o.stream, &|| self.label())?;
        }
        Ok(true)
    }

    /// Kernel `kernel` of module `ptx` on this GPU, found once for [`Cuda::launch_found`]
    /// (which a launch replayed many times uses: `partitioned::replay`).
    pub fn find_kernel(&self, ptx: &'static CStr, kernel: &str) -> Result<Found, String> {
        let f = self.function(ptx, kernel)?;
        let name = self.held.lock().unwrap_or_else(|e| e.into_inner()).name(kernel);
        Ok(Found { f: f as usize, name, validated: false })
    }

    /// [`Cuda::launch`] of a kernel [`Cuda::find_kernel`] found, untimed, held where it may be.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_found(
        &self,
        ptx: &'static CStr,
        kernel: &str,
        found: &mut Found,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        params: &mut Params,
    ) -> Result<(), String> {
        let f = found.f as sys::CUfunction;
        let name = found.name;
        if shared <= 48 * 1024 && super::held::enabled() && self.hold(f, |_| name, grid, block, shared, params)? {
            return Ok(());
        }
        let validated = found.validated;
        self.launch_direct(ptx, kernel, Some(f), grid, block, shared, params, None, validated, false)?;
        found.validated = true;
        Ok(())
    }

    /// A launch straight to the driver (`f`: the kernel's function, where known), through its
    /// cooperative launch where `cooperative`.
    #[allow(clippy::too_many_arguments)]
    fn launch_direct(
        &self,
        ptx: &'static CStr,
        kernel: &str,
        f: Option<sys::CUfunction>,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        params: &mut Params,
        marks: Option<usize>,
        validated: bool,
        cooperative: bool,
    ) -> Result<(), String> {
        let o = self.bind_at(false)?;
        let f = match f {
            Some(f) => f,
            None => self.function(ptx, kernel)?,
        };
        if shared > 48 * 1024 {
            // SAFETY: a valid function handle; the attribute only raises a limit.
            check("cuFuncSetAttribute", unsafe {
                result::function::set_function_attribute(
                    f,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    shared as i32,
                )
            })?;
        }
        if let Some(before) = marks {
            self.mark(before)?;
        }
        let stream = self.stream_here(&o)?;
        let mut l = Launch { f, name: 0, grid, block, shared, params: std::mem::take(params) };
        let launched = if cooperative {
            super::held::launch_cooperative(&mut l, stream)
        } else {
            super::held::launch(&mut l, stream)
        };
        *params = l.params;
        // The message is made only on failure: launches are the hot path.
        launched.map_err(|e| format!("launching {kernel} on {}: {e}", self.label()))?;
        if !validated {
            self.held.lock().unwrap_or_else(|e| e.into_inner()).validated(f, block, shared);
        }
        if let Some(before) = marks {
            self.mark(before + 1)?;
        }
        Ok(())
    }
}

impl super::Device for Cuda {
    fn name(&self) -> &str {
        &self.name
    }

    fn alloc(&self, bytes: usize) -> Result<u64, String> {
        Cuda::alloc(self, bytes)
    }

    fn free(&self, addr: u64) -> Result<(), String> {
        Cuda::free(self, addr)
    }

    fn granule(&self) -> Option<u64> {
        self.vmm_granule()
    }

    fn reserve(&self, bytes: u64) -> Result<u64, String> {
        self.vmm_reserve(bytes)
    }

    fn map(&self, addr: u64, bytes: u64) -> Result<(), String> {
        self.vmm_map(addr, bytes)
    }

    fn unmap(&self, addr: u64, bytes: u64) -> Result<(), String> {
        self.vmm_unmap(addr, bytes)
    }

    fn unreserve(&self, addr: u64) -> Result<(), String> {
        self.vmm_unreserve(addr)
    }

    fn pin_host(&self, host: *mut u8, bytes: usize) -> bool {
        self.pin(host, bytes)
    }

    fn unpin_host(&self, host: *mut u8) {
        self.unpin(host)
    }

    fn copy(&self, c: &super::Copy) -> Result<(), String> {
        let peer = match (c.src, c.dst) {
            (super::Place::Device(s), super::Place::Device(_)) => Some(super::devices().gpu(s)),
            _ => None,
        };
        self.enqueue_copy(c, peer)
    }

    fn fill(&self, addr: u64, byte: u8, bytes: u64) -> Result<(), String> {
        let o = self.bind()?;
        let stream = self.stream_here(&o)?;
        // SAFETY: a range of a device allocation of a tracked buffer (the memory manager's),
        // on one of this device's streams.
        check("cuMemsetD8Async", unsafe { sys::cuMemsetD8Async(addr, byte, bytes as usize, stream) }.result())
    }

    fn fill_identity(&self, addr: u64, how: dashdb::Reduction, elements: u64) -> Result<(), String> {
        let o = self.bind()?;
        let one = how.identity();
        let word = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
        let n = elements as usize;
        // SAFETY: whole elements of this GPU's copy of a buffer (`partitioned::reduce`),
        // 4-byte aligned as the atomics updating them are; on this device's stream.
        let r = unsafe {
            match one.len() {
                4 => sys::cuMemsetD32Async(addr, word(&one), n, o.stream),
                _ if one[..4] == one[4..] => sys::cuMemsetD32Async(addr, word(&one[..4]), 2 * n, o.stream),
                // Two 4-byte columns of 8-byte rows: the low halves, then the high ones.
                _ => match sys::cuMemsetD2D32Async(addr, 8, word(&one[..4]), 1, n, o.stream) {
                    sys::CUresult::CUDA_SUCCESS => {
                        sys::cuMemsetD2D32Async(addr + 4, 8, word(&one[4..]), 1, n, o.stream)
                    }
                    e => e,
                },
            }
        };
        check("cuMemsetD32Async (a reduction's identity)", r.result())
    }

    fn combine(&self, dst: u64, src: u64, how: dashdb::Reduction, elements: u64) -> Result<(), String> {
        if elements == 0 {
            return Ok(());
        }
        let blocks = elements.div_ceil(u64::from(super::combine::BLOCK));
        let grid = u32::try_from(blocks)
            .ok()
            .filter(|&g| g <= i32::MAX as u32)
            .ok_or_else(|| format!("combining {elements} elements of a reduction: too many for one launch"))?;
        let mut params = Params::with_capacity(3);
        for v in [dst, src, elements] {
            params.push(&v.to_le_bytes());
        }
        let name = super::combine::kernel_name(how);
        self.launch(
            super::combine::ptx(),
            &name,
            [grid, 1, 1],
            [super::combine::BLOCK, 1, 1],
            0,
            &mut params,
            None,
            false,
        )
    }

    fn merge_changed(&self, dst: u64, src: u64, twin: u64, bytes: u64) -> Result<(), String> {
        if bytes == 0 {
            return Ok(());
        }
        let grid = u32::try_from(bytes.div_ceil(u64::from(super::combine::BLOCK)))
            .ok()
            .filter(|&g| g <= i32::MAX as u32)
            .ok_or_else(|| format!("merging {bytes} bytes of a merged buffer: too many for one launch"))?;
        let mut params = Params::with_capacity(4);
        for v in [dst, src, twin, bytes] {
            params.push(&v.to_le_bytes());
        }
        self.launch(
            super::combine::ptx(),
            super::combine::MERGE,
            [grid, 1, 1],
            [super::combine::BLOCK, 1, 1],
            0,
            &mut params,
            None,
            false,
        )
    }

    fn synchronize(&self) -> Result<(), String> {
        let o = self.bind()?;
        // SAFETY: this device's streams.
        // The message is made only on failure: a synchronization per launch is common.
        for s in self.streams(&o) {
            unsafe { result::stream::synchronize(s) }
                .map_err(|e| failed(&format!("waiting for {}", self.label()), e))?;
        }
        Ok(())
    }
}

/// Where one end of a copy is, as the driver's copy descriptors say it.
fn end_of(place: super::Place, addr: u64) -> (sys::CUmemorytype, *const c_void, sys::CUdeviceptr) {
    match place {
        super::Place::Host => (sys::CUmemorytype::CU_MEMORYTYPE_HOST, addr as *const c_void, 0),
        super::Place::Device(_) => (sys::CUmemorytype::CU_MEMORYTYPE_DEVICE, std::ptr::null(), addr),
    }
}

/// The descriptor of a rectangle copy between the host and a GPU (or within one GPU).
/// Built field by field: the memory-type enums have no zero value, so a zeroed descriptor is
/// not a valid one.
fn rect(c: &super::Copy) -> sys::CUDA_MEMCPY2D {
    let (src_type, src_host, src_device) = end_of(c.src, c.src_addr);
    let (dst_type, dst_host, dst_device) = end_of(c.dst, c.dst_addr);
    sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: src_type,
        srcHost: src_host,
        srcDevice: src_device,
        srcArray: std::ptr::null_mut(),
        srcPitch: c.pitch as usize,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: dst_type,
        dstHost: dst_host as *mut c_void,
        dstDevice: dst_device,
        dstArray: std::ptr::null_mut(),
        dstPitch: c.pitch as usize,
        WidthInBytes: c.row_bytes as usize,
        Height: c.rows as usize,
    }
}

/// The descriptor of a rectangle copy from one GPU's memory (context `src`) to another's.
fn peer_rect(c: &super::Copy, src: sys::CUcontext, dst: sys::CUcontext) -> sys::CUDA_MEMCPY3D_PEER {
    let device = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE;
    sys::CUDA_MEMCPY3D_PEER {
        srcXInBytes: 0,
        srcY: 0,
        srcZ: 0,
        srcLOD: 0,
        srcMemoryType: device,
        srcHost: std::ptr::null(),
        srcDevice: c.src_addr,
        srcArray: std::ptr::null_mut(),
        srcContext: src,
        srcPitch: c.pitch as usize,
        srcHeight: c.rows as usize,
        dstXInBytes: 0,
        dstY: 0,
        dstZ: 0,
        dstLOD: 0,
        dstMemoryType: device,
        dstHost: std::ptr::null_mut(),
        dstDevice: c.dst_addr,
        dstArray: std::ptr::null_mut(),
        dstContext: dst,
        dstPitch: c.pitch as usize,
        dstHeight: c.rows as usize,
        WidthInBytes: c.row_bytes as usize,
        Height: c.rows as usize,
        Depth: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::{Copy, Place};

    /// The descriptors name each end's memory and the rectangle (a zeroed descriptor once
    /// aborted the program: its enums have no zero).
    #[test]
    fn rectangle_descriptors() {
        let c = Copy {
            src: Place::Host,
            src_addr: 0x1000,
            dst: Place::Device(1),
            dst_addr: 0x9000,
            rows: 3,
            row_bytes: 64,
            pitch: 256,
        };
        let d = rect(&c);
        assert_eq!(d.srcMemoryType, sys::CUmemorytype::CU_MEMORYTYPE_HOST);
        assert_eq!(d.srcHost as u64, 0x1000);
        assert_eq!(d.dstMemoryType, sys::CUmemorytype::CU_MEMORYTYPE_DEVICE);
        assert_eq!((d.dstDevice, d.WidthInBytes, d.Height, d.srcPitch, d.dstPitch), (0x9000, 64, 3, 256, 256));
        let back = rect(&Copy { src: Place::Device(0), dst: Place::Host, ..c });
        assert_eq!(back.srcMemoryType, sys::CUmemorytype::CU_MEMORYTYPE_DEVICE);
        assert_eq!((back.srcDevice, back.dstHost as u64), (0x1000, 0x9000));
        let p = peer_rect(&Copy { src: Place::Device(0), ..c }, std::ptr::null_mut(), std::ptr::null_mut());
        assert_eq!((p.srcDevice, p.dstDevice, p.WidthInBytes, p.Height, p.Depth), (0x1000, 0x9000, 64, 3, 1));
        assert_eq!((p.srcPitch, p.dstPitch), (256, 256));
    }
}
