//! Ranks: one run over several processes (`mpirun -n R ./app`), by control replication.
//!
//! Every rank runs the same host program and makes the same runtime calls in the same order,
//! so every rank computes the same plans, copy plans and coherence maps without exchanging
//! them. The devices of all ranks form one list, rank-major ([`crate::devices`]); a rank runs
//! only the partitions on its own devices and sends or receives exactly the bytes whose copies
//! cross ranks ([`crate::memory`]); whatever the host receives, every rank's host receives.
//!
//! MPI comes from a plugin, `libhpvm_mpi.so` (the `mpi-ranks` crate, over the `mpi` crate and
//! the system's OpenMPI), loaded with `dlopen` only when the process was started by `mpirun`
//! (or `HPVM_MGPU_RANKS=mpi`): a run of one process needs no MPI library.
//!
//! Invariants:
//! - every call into MPI holds [`World`]'s lock, so MPI sees one thread at a time
//!   (`MPI_THREAD_SERIALIZED`);
//! - the collectives are reached by every rank in the same order: the runtime runs launches
//!   one at a time, in program order, under ranks ([`spans_ranks`]), and iterates buffers
//!   in the order they were tracked, never by address (addresses differ between processes);
//! - divergence is caught: each rank folds every launch unit's key into a running hash
//!   ([`note_launch`]), and the ranks compare hashes at every graph launch ([`agree`]);
//! - a fatal error on any rank ends every rank (`MPI_Abort`), never leaving one waiting.

use crate::fatal;
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// The plugin's ABI version this runtime speaks (`mpi-ranks`'s `ABI`).
const ABI: u32 = 1;

/// One message of [`World::exchange`] (`mpi-ranks`'s `Op`, field for field).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Op {
    pub peer: i32,
    pub tag: i32,
    pub send: i32,
    pub ptr: *mut u8,
    pub len: u64,
}

struct Api {
    allgather_u64: unsafe extern "C" fn(u64, *mut u64),
    bcast: unsafe extern "C" fn(*mut u8, u64, i32),
    exchange: unsafe extern "C" fn(*const Op, usize),
    barrier: unsafe extern "C" fn(),
    abort: unsafe extern "C" fn(i32) -> !,
    finalize: unsafe extern "C" fn(),
}

/// The ranks of this run.
pub struct World {
    pub rank: usize,
    pub size: usize,
    api: Api,
    lock: Mutex<()>,
}

/// Whether this process should join ranks: `HPVM_MGPU_RANKS` = `mpi` (yes), `off` (no), or
/// unset (yes when a launcher of MPI processes started it).
fn wanted() -> bool {
    match std::env::var("HPVM_MGPU_RANKS").unwrap_or_default().trim() {
        "mpi" => true,
        "off" => false,
        "" => under_launcher(),
        other => fatal(&format!("HPVM_MGPU_RANKS={other}: expected `mpi` or `off`")),
    }
}

/// Whether a launcher of MPI processes (`mpirun`, `srun`...) started this process.
fn under_launcher() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"].iter().any(|v| std::env::var_os(v).is_some())
}

/// The ranks of this run, joined on the first call (the session's start: `__hpvm__init`, a
/// CUDA program's first call); `None` for a run of one process.
pub fn world() -> Option<&'static World> {
    static WORLD: OnceLock<Option<World>> = OnceLock::new();
    WORLD.get_or_init(|| wanted().then(join)).as_ref()
}

/// Whether this run spans several ranks (then launches run one at a time, in program order).
pub fn spans_ranks() -> bool {
    world().is_some_and(|w| w.size > 1)
}

/// `HPVM_MGPU_MPI_PLUGIN`, else `libhpvm_mpi.so` by the dynamic loader's search (the
/// executable's run path names the directory of the runtime it was linked with, then the
/// executable's own directory).
fn plugin_name() -> String {
    std::env::var("HPVM_MGPU_MPI_PLUGIN").unwrap_or_else(|_| "libhpvm_mpi.so".into())
}

fn dl_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string owned by the loader.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown error".into()
    } else {
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

fn join() -> World {
    let name = plugin_name();
    let c = CString::new(name.clone()).unwrap_or_else(|_| fatal("HPVM_MGPU_MPI_PLUGIN contains a NUL byte"));
    // RTLD_GLOBAL: OpenMPI's own components, which it loads in turn, resolve symbols of
    // libmpi through the global scope.
    // SAFETY: a NUL-terminated path; the library's initializers are Rust's and OpenMPI's.
    let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if handle.is_null() {
        let why = if under_launcher() { "started by mpirun" } else { "HPVM_MGPU_RANKS=mpi asks for ranks" };
        fatal(&format!(
            "{why}, but the MPI plugin `{name}` cannot be loaded ({}); set HPVM_MGPU_MPI_PLUGIN to its \
             path (it is built as target/release/libhpvm_mpi.so), or HPVM_MGPU_RANKS=off to run each process alone",
            dl_error()
        ));
    }
    let sym = |s: &str| -> *mut c_void {
        let c = CString::new(s).expect("no NUL");
        // SAFETY: a valid handle and a NUL-terminated name.
        let p = unsafe { libc::dlsym(handle, c.as_ptr() as *const c_char) };
        if p.is_null() {
            fatal(&format!("the MPI plugin `{name}` lacks `{s}`: rebuild it with this runtime"));
        }
        p
    };
    // SAFETY: each symbol is the plugin's function of exactly this signature (its ABI version
    // is checked first).
    unsafe {
        let abi: unsafe extern "C" fn() -> u32 = std::mem::transmute(sym("hpvm_mpi_abi"));
        if abi() != ABI {
            fatal(&format!("the MPI plugin `{name}` speaks ABI {}, this runtime {ABI}: rebuild them together", abi()));
        }
        let init: unsafe extern "C" fn(*mut i32, *mut i32) -> i32 = std::mem::transmute(sym("hpvm_mpi_init"));
        let api = Api {
            allgather_u64: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(u64, *mut u64)>(sym(
                "hpvm_mpi_allgather_u64",
            )),
            bcast: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut u8, u64, i32)>(sym("hpvm_mpi_bcast")),
            exchange: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*const Op, usize)>(sym(
                "hpvm_mpi_exchange",
            )),
            barrier: std::mem::transmute::<*mut c_void, unsafe extern "C" fn()>(sym("hpvm_mpi_barrier")),
            abort: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(i32) -> !>(sym("hpvm_mpi_abort")),
            finalize: std::mem::transmute::<*mut c_void, unsafe extern "C" fn()>(sym("hpvm_mpi_finalize")),
        };
        // The rank the launcher gave, for the program, before MPI's threads start (changing
        // the environment while other threads read it is a race).
        let launcher = ["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"]
            .iter()
            .find_map(|v| std::env::var(v).ok())
            .unwrap_or_else(|| "0".into());
        std::env::set_var("HPVM_MGPU_RANK", &launcher);
        let (mut rank, mut size) = (0i32, 0i32);
        match init(&mut rank, &mut size) {
            0 if size >= 1 && (0..size).contains(&rank) => {}
            -2 => fatal("this MPI cannot take calls from several threads one at a time (MPI_THREAD_SERIALIZED)"),
            _ => fatal("MPI did not start (MPI_Init_thread failed, or MPI was started already)"),
        }
        let (rank, size) = (rank as usize, size as usize);
        if launcher != rank.to_string() {
            eprintln!(
                "hpvm-mgpu: note: the launcher said rank {launcher}, MPI says {rank}; HPVM_MGPU_RANK is {launcher}"
            );
        }
        crate::set_abort(format!("rank {rank} of {size}"), abort_all);
        // MPI must be finalized before the process exits, or the launcher reports a failure.
        libc::atexit(finalize_at_exit);
        // mpirun ends the other ranks with SIGTERM when one fails: they say so.
        let _ = TERMINATED.set(
            format!(
                "hpvm-mgpu runtime: rank {rank} of {size} stopped: mpirun ended the run because another rank failed (its \
                 message above or below names it)\n"
            )
            .into_bytes(),
        );
        libc::signal(libc::SIGTERM, on_sigterm as *const () as libc::sighandler_t);
        World { rank, size, api, lock: Mutex::new(()) }
    }
}

/// What this rank says when mpirun ends it ([`on_sigterm`]), made before any signal comes.
static TERMINATED: OnceLock<Vec<u8>> = OnceLock::new();

extern "C" fn on_sigterm(_: libc::c_int) {
    // Only async-signal-safe calls: write(2) and _exit(2).
    if let Some(m) = TERMINATED.get() {
        // SAFETY: a buffer that lives for the process.
        unsafe { libc::write(2, m.as_ptr() as *const c_void, m.len()) };
    }
    // SAFETY: ends the process at once, as the signal would have.
    unsafe { libc::_exit(128 + libc::SIGTERM) };
}

/// `crate::fatal` under ranks: every rank stops, not only this one.
fn abort_all(code: i32) -> ! {
    match world() {
        // SAFETY: MPI is initialized (this is installed after a successful join). The lock is
        // not taken: the failing thread may hold it.
        Some(w) => unsafe { (w.api.abort)(code) },
        None => std::process::exit(code),
    }
}

extern "C" fn finalize_at_exit() {
    if let Some(w) = world() {
        // A rank that ends while another still launches has diverged: both say so.
        if w.size > 1 && !crate::FAILED.load(Ordering::SeqCst) {
            let hashes = w.allgather(Step::End, LAUNCHES.load(Ordering::Relaxed));
            if hashes.iter().any(|&h| h != hashes[0]) {
                let counts = w.allgather(Step::Failure, LAUNCH_COUNT.load(Ordering::Relaxed));
                let counts: Vec<String> =
                    counts.iter().enumerate().map(|(r, c)| format!("rank {r} after {c}")).collect();
                diverged(
                    w,
                    &format!("by the end of the program: they launched different kernels ({})", counts.join(", ")),
                );
            }
        }
        let _held = w.lock.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: MPI is initialized; finalizing twice does nothing in the plugin.
        unsafe { (w.api.finalize)() };
    }
}

/// Where in the run a rank gathers from every rank: each gather carries its step in its top
/// byte, so that ranks that diverged (one gathering at a kernel launch, another at the end of
/// the program or before a copy) see it at once, instead of pairing unrelated values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Step {
    Launch = 1,
    Failure,
    HostWrites,
    Limits,
    Devices,
    Granule,
    Allocation,
    End,
}

impl Step {
    const ALL: [Step; 8] = [
        Step::Launch,
        Step::Failure,
        Step::HostWrites,
        Step::Limits,
        Step::Devices,
        Step::Granule,
        Step::Allocation,
        Step::End,
    ];

    fn describe(code: u64) -> &'static str {
        match Step::ALL.iter().find(|s| **s as u64 == code) {
            Some(Step::Launch) => "was at a kernel or graph launch",
            Some(Step::Failure) => "was reporting a divergence",
            Some(Step::HostWrites) => "was comparing host writes",
            Some(Step::Limits) => "was reading the device limits",
            Some(Step::Devices) => "was opening devices",
            Some(Step::Granule) => "was opening devices",
            Some(Step::Allocation) => "was allocating device memory",
            Some(Step::End) => "was at the end of the program",
            None => "was elsewhere",
        }
    }
}

/// The bits of a gathered value below its step.
pub const VALUE_BITS: u64 = (1 << 56) - 1;

impl World {
    /// Every rank's `mine` (at most [`VALUE_BITS`]; higher bits are dropped), in rank order,
    /// gathered at `step`. Ranks at different steps have diverged: every rank stops, saying
    /// where each was.
    pub fn allgather(&self, step: Step, mine: u64) -> Vec<u64> {
        let all = self.allgather_raw(((step as u64) << 56) | (mine & VALUE_BITS));
        if all.iter().any(|v| v >> 56 != step as u64) {
            let here: Vec<String> =
                all.iter().enumerate().map(|(r, v)| format!("rank {r} {}", Step::describe(v >> 56))).collect();
            diverged(self, &format!(": {}", here.join(", ")));
        }
        all.into_iter().map(|v| v & VALUE_BITS).collect()
    }

    fn allgather_raw(&self, mine: u64) -> Vec<u64> {
        let mut all = vec![0u64; self.size];
        let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: one u64 per rank.
        unsafe { (self.api.allgather_u64)(mine, all.as_mut_ptr()) };
        all
    }

    /// Rank `root`'s bytes into every rank's `buf`.
    pub fn bcast(&self, buf: &mut [u8], root: usize) {
        let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: `buf` is ours for the call.
        unsafe { (self.api.bcast)(buf.as_mut_ptr(), buf.len() as u64, root as i32) };
    }

    /// Posts every message of `ops` and waits for all of them.
    ///
    /// # Safety
    /// Each op's bytes stay valid (and unread, for a receive) until this returns.
    pub unsafe fn exchange(&self, ops: &[Op]) {
        if ops.is_empty() {
            return;
        }
        let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        unsafe { (self.api.exchange)(ops.as_ptr(), ops.len()) };
    }

    pub fn barrier(&self) {
        let _held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: MPI is initialized.
        unsafe { (self.api.barrier)() };
    }
}

/// The running hash of the launch units this rank has started (FNV-1a over their keys).
static LAUNCHES: AtomicU64 = AtomicU64::new(0xcbf2_9ce4_8422_2325);
/// How many launch units this rank has started.
static LAUNCH_COUNT: AtomicU64 = AtomicU64::new(0);

/// Folds a launch unit's key (its node, grid, and argument bytes other than addresses, which
/// differ between processes) into this rank's running hash.
pub fn note_launch(key: &[u8]) {
    if !spans_ranks() {
        return;
    }
    let mut h = LAUNCHES.load(Ordering::Relaxed);
    for &b in key {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    LAUNCHES.store(h, Ordering::Relaxed);
    LAUNCH_COUNT.fetch_add(1, Ordering::Relaxed);
}

/// At a graph launch: the ranks compare their running hashes; if any rank has launched
/// something else, every rank stops with the same message.
pub fn agree(what: &str) {
    let Some(w) = world().filter(|w| w.size > 1) else { return };
    let t = std::time::Instant::now();
    let hashes = w.allgather(Step::Launch, LAUNCHES.load(Ordering::Relaxed));
    crate::sink::record(crate::sink::Event::RanksAgreed { nanos: t.elapsed().as_nanos() as u64 });
    if hashes.iter().all(|&h| h == hashes[0]) {
        return;
    }
    // Every rank saw the same hashes, so every rank gathers the counts here.
    let counts = w.allgather(Step::Failure, LAUNCH_COUNT.load(Ordering::Relaxed));
    let apart: Vec<String> = (1..w.size)
        .filter(|&r| hashes[r] != hashes[0])
        .map(|r| format!("rank {r} (after {} launches; rank 0 after {})", counts[r], counts[0]))
        .collect();
    diverged(w, &format!("before {what}: {} launched other kernels, grids or arguments than rank 0", apart.join(", ")));
}

/// Every rank stops, saying how the ranks diverged. Every rank reaches this with the same
/// gathered values: each says it and exits, without MPI_Abort's noise (and `mpirun` ends any
/// rank still waiting). One write, so that the ranks' lines do not interleave.
fn diverged(w: &World, how: &str) -> ! {
    let msg = format!(
        "hpvm-mgpu runtime: error (rank {} of {}, after {} launches): the ranks diverged {how}. Under mpirun every \
         rank must run the same host program on the same data (README, \"Many machines\")\n",
        w.rank,
        w.size,
        LAUNCH_COUNT.load(Ordering::Relaxed),
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), msg.as_bytes());
    crate::FAILED.store(true, Ordering::SeqCst);
    // SAFETY: flushing C's streams, then ending the process at once: this may run inside an
    // `atexit` handler, where `exit` must not be called again.
    unsafe {
        libc::fflush(std::ptr::null_mut());
        libc::_exit(1)
    }
}
