//! When a run's GPUs after the first open: when the run shows it will want them, on a thread
//! of their own, while the program goes on with the GPUs already open.
//!
//! A GPU's context costs about 100 ms to open, and the driver opens one at a time: on two
//! H200s, two contexts took 185-210 ms whether opened one after the other or on two threads
//! (`bench/probes/open_probe.c`). Opening every GPU before the program's first call made
//! every short program 0.13-0.15 s slower on two GPUs than on one. So a run opens one GPU
//! (device 0, and the first of [`super::Devices::order`] if that is another); the others
//! open here once one of these happens:
//! - a launch the split policy would split over more devices than are open
//!   ([`crate::partitioned`]);
//! - the program's buffers come to [`open_at`] bytes in all (`HPVM_MGPU_OPEN_AT`, default
//!   [`OPEN_AT_BYTES`]): a program that moves that much is not a short one, and its GPUs are
//!   then open before its first launches.
//!
//! Work on the open GPUs goes on while another opens: on two H200s no step of GPU 0's work
//! waited over 1.2 ms while GPU 1 opened (`open_probe background`). The host's launches do
//! wait on the driver meanwhile: the thesis's stencil (100 launches of 70 µs over 64 MiB
//! buffers) took 18-22 ms of kernel_ms with GPU 1 opening beside it, against 7.6 on one GPU
//! and 8.7-9.0 with both opened first (a known cost: see [`OPEN_AT_BYTES`]). Copies go
//! to the open GPUs only. A launch the policy would split over GPUs still opening waits for
//! them ([`wait`]) only while the open GPUs have that long a wait's worth of work queued
//! ([`worth_waiting`]); otherwise it runs over the open ones, and later launches get the
//! others once open ([`super::Devices::ready`]). The host runs ahead of the GPUs, so without
//! the wait every launch of a loop would be decided (whole) before the first of them ran;
//! with the open GPUs idle during it, short loops were slower than on one GPU.
//!
//! A GPU that an operation needs sooner (a copy, a launch) opens at that use
//! ([`super::cuda::Cuda::bind`]); opening is one at a time under one lock, so a GPU opens once.
//!
//! `HPVM_MGPU_OPEN=start` opens every GPU with the run, as before; runs over ranks always do,
//! since every rank must split each launch alike.
//!
//! The process waits for an opening in progress before it ends ([`finish`], also at exit):
//! the driver's exit handlers must not run while one of its contexts is being made.

use super::devices;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Buffers this large in all start opening the other GPUs. Counted per buffer, 512 MiB made
/// matmul 8192 (three buffers of 256 MiB) open GPU 1 only once its second launch was
/// measured (559 ms against 378 with 64 MiB). Counted in all, on two H200s (kernel_ms,
/// medians of 3, `bench/results/2026-11-26-h200x2-reductions.json`), 512 MiB beat 64 MiB on
/// every program tried, and the single-buffer 64 MiB rule before it: the thesis's stencil
/// 4096 x 100 8.8 ms against 22.0 (7.6 on one GPU), histogram 16777216 x 100 18.4 against
/// 31.0 (17.2), stencil2d 16384 x 100 119 against 136 (97.6; its short loop splits late and
/// pays the data's move), matmul 8192 alike (378 against 377; 606 on one GPU). Opening only
/// when the policy wants a split made matmul 8192 572 ms: its few long launches need GPU 1
/// open before they start.
pub const OPEN_AT_BYTES: u64 = 512 << 20;

/// The bytes of buffers a program allocates, in all, that open its other GPUs
/// (`HPVM_MGPU_OPEN_AT=SIZE`, default [`OPEN_AT_BYTES`]).
pub fn open_at() -> u64 {
    static AT: OnceLock<u64> = OnceLock::new();
    *AT.get_or_init(|| {
        let Ok(v) = std::env::var("HPVM_MGPU_OPEN_AT") else { return OPEN_AT_BYTES };
        super::parse_size(&v)
            .unwrap_or_else(|| crate::fatal(&format!("HPVM_MGPU_OPEN_AT={v}: expected a size such as 256M or 1G")))
    })
}

/// When a run's GPUs open (`HPVM_MGPU_OPEN`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `wanted` (the default): the first with the run, the others when wanted (module doc).
    Wanted,
    /// `start`: all of them with the run.
    Start,
}

pub fn mode() -> Mode {
    static MODE: OnceLock<Mode> = OnceLock::new();
    *MODE.get_or_init(|| match std::env::var("HPVM_MGPU_OPEN").unwrap_or_default().trim() {
        "" | "wanted" => Mode::Wanted,
        "start" => Mode::Start,
        other => crate::fatal(&format!("HPVM_MGPU_OPEN={other}: expected `wanted` or `start`")),
    })
}

/// Set once the other GPUs were asked for: they open once.
static ASKED: AtomicBool = AtomicBool::new(false);

/// The thread opening them, until [`finish`] joins it.
static OPENER: Mutex<Option<JoinHandle<()>>> = Mutex::new(None);

/// When the opener began, and when the GPUs it opens should be open by.
static OPENING: Mutex<Option<(Instant, Instant)>> = Mutex::new(None);

/// Until when the open GPUs are estimated busy with the launches that ran whole on them while
/// the others opened ([`worth_waiting`]).
static BUSY_UNTIL: Mutex<Option<Instant>> = Mutex::new(None);

/// About what the driver takes to open one GPU's context (on two H200s, 103-142 ms:
/// `bench/probes/open_probe.c`).
const OPEN_EACH: Duration = Duration::from_millis(130);

/// Whether a launch the policy would split over GPUs still opening should wait for them
/// ([`wait`]), its kernel predicted to take `kernel_ns` whole. Only while the open GPUs
/// have that long a wait's worth of work queued: the host then waits while they work, and
/// nothing idles. Otherwise the launch runs whole, and adds its kernel to their queue. A short
/// loop thus runs as on one GPU (gridstride.cu's 50 steps of 0.4 ms waited 87 ms for GPU 1, 5x
/// the whole loop), and a long one splits once the others are open.
pub fn worth_waiting(kernel_ns: f64) -> bool {
    let Some((_, ready_at)) = *OPENING.lock().unwrap_or_else(|e| e.into_inner()) else { return false };
    let now = Instant::now();
    let mut busy = BUSY_UNTIL.lock().unwrap_or_else(|e| e.into_inner());
    let until = busy.map_or(now, |b| b.max(now));
    if until >= ready_at {
        return true;
    }
    *busy = Some(until + Duration::from_nanos(kernel_ns.max(0.0) as u64));
    false
}

/// The run will want its other GPUs: opens those not yet open, in the devices' order, on a
/// thread of its own, each with the program's GPU modules. Returns at once; cheap after the
/// first call.
pub fn want_all() {
    if ASKED.load(Ordering::Relaxed) || ASKED.swap(true, Ordering::AcqRel) {
        return;
    }
    let devs = devices();
    let closed: Vec<usize> =
        devs.order.iter().copied().filter(|&k| devs.is_local(k) && devs.on_gpus() && !devs.gpu(k).is_open()).collect();
    if closed.is_empty() {
        return;
    }
    let now = Instant::now();
    *OPENING.lock().unwrap_or_else(|e| e.into_inner()) = Some((now, now + OPEN_EACH * closed.len() as u32));
    let opener = std::thread::Builder::new().name("hpvm-mgpu-open".into()).spawn(move || {
        let devs = devices();
        for k in closed {
            let g = devs.gpu(k);
            match g.open() {
                Ok(()) => {
                    // Its first launches then find the modules loaded.
                    for ptx in super::cuda::registered_modules() {
                        let _ = g.load_module(ptx);
                    }
                }
                Err(e) => {
                    // Launches keep to the GPUs that opened; a use of this one reports the
                    // error where it happens.
                    eprintln!("hpvm-mgpu: warning: {} did not open ({e}); launches run on the others", g.label());
                    return;
                }
            }
        }
    });
    match opener {
        Ok(h) => {
            *OPENER.lock().unwrap_or_else(|e| e.into_inner()) = Some(h);
            at_exit();
        }
        // No thread: the GPUs open when first used.
        Err(e) => eprintln!("hpvm-mgpu: warning: cannot start a thread to open the other GPUs ({e})"),
    }
}

/// Waits for the GPUs being opened, if any (see [`worth_waiting`]); the wait counts in the
/// statistics. True when it waited.
pub fn wait() -> bool {
    if OPENER.lock().unwrap_or_else(|e| e.into_inner()).is_none() {
        return false;
    }
    let t = std::time::Instant::now();
    finish();
    crate::sink::record(crate::sink::Event::WaitedForGpus { nanos: t.elapsed().as_nanos() as u64 });
    true
}

/// Waits for the GPUs being opened, if any.
pub fn finish() {
    let opener = OPENER.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(h) = opener {
        let _ = h.join();
    }
}

/// Makes the process wait for the opener before the driver's exit handlers run: registered
/// after the driver's initialization, so it runs before them.
fn at_exit() {
    extern "C" fn finish_at_exit() {
        finish();
    }
    extern "C" {
        fn atexit(f: extern "C" fn()) -> std::ffi::c_int;
    }
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    // SAFETY: registers a plain function.
    REGISTERED.call_once(|| unsafe {
        atexit(finish_at_exit);
    });
}
