//! When a run's GPUs after the first open: when the run shows it will want them, on a thread
//! of their own, while the program goes on with the GPUs already open.
//!
//! A GPU's context costs about 100 ms to open, and the driver opens one at a time: on two
//! H200s, two contexts took 185-210 ms whether opened one after the other or on two threads
//! (`bench/probes/open_probe.c`). Opening every GPU before the program's first call made
//! every short program 0.13-0.15 s slower on two GPUs than on one. So a run opens one GPU
//! (device 0, and the first of [`super::Devices::order`] if that is another), and the others
//! only once splitting has shown it would pay for them: the launches the split policy would
//! have split over GPUs not open yet run over the open ones, and what they would have saved
//! split is counted ([`forgo`]), each valued by the node's measured kernel (those before the
//! first measurement once it comes); once that comes to what opening the
//! closed GPUs costs ([`OPEN_PRICE`] each), they open. Buying once renting has cost as much
//! bounds what a run can lose to its other GPUs: a program that never splits never opens
//! them, and one that does pays for the opening at most once what splitting already proved
//! worth. The rule it replaces opened them once the program's buffers came to 512 MiB: on two
//! H200s (wall, medians of 3, `bench/results/2026-11-26-h200x2-never-slower.json`) that made
//! programs that never split 0.1-0.3 s slower than on one GPU (HeCBench nw 8192: 2.74 s
//! against 2.44; tests/cuda/copies.cu 1.06 against 0.92), while opening only when wanted kept
//! them at the one-GPU time. `HPVM_MGPU_OPEN_AT=SIZE` brings that rule back for a run whose
//! few long launches need every GPU from the start (matmul 8192 x 5: kernel 378 ms opened
//! early, 572 opened when wanted, 606 on one GPU).
//!
//! Work on the open GPUs goes on while another opens: on two H200s no step of GPU 0's work
//! waited over 1.2 ms while GPU 1 opened (`open_probe background`). The host's launches do
//! wait on the driver meanwhile: the thesis's stencil (100 launches of 70 µs over 64 MiB
//! buffers) took 18-22 ms of kernel_ms with GPU 1 opening beside it, against 7.6 on one GPU
//! and 8.7-9.0 with both opened first. Copies go to the open GPUs only. A launch the policy
//! would split over GPUs still opening waits for them ([`wait`]) only while the open GPUs
//! have that long a wait's worth of work queued ([`worth_waiting`]); otherwise it runs over
//! the open ones, and later launches get the others once open
//! ([`super::Devices::ready`]). The host runs ahead of the GPUs, so without the wait every
//! launch of a loop would be decided (whole) before the first of them ran; with the open GPUs
//! idle during it, short loops were slower than on one GPU.
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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The bytes of buffers a program allocates, in all, that open its other GPUs whether or not
/// splitting has paid for them yet (`HPVM_MGPU_OPEN_AT=SIZE`; by default never: see the
/// module's doc). Counted in all, 512 MiB beat 64 MiB and a per-buffer count on every program
/// tried on two H200s (kernel_ms, `bench/results/2026-11-26-h200x2-reductions.json`).
pub fn open_at() -> u64 {
    static AT: OnceLock<u64> = OnceLock::new();
    *AT.get_or_init(|| {
        let Ok(v) = std::env::var("HPVM_MGPU_OPEN_AT") else { return u64::MAX };
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

/// About what opening one more GPU takes, with the program's modules loaded on it: on two
/// H200s the context alone took 103-142 ms (`bench/probes/open_probe.c`), the whole opening in
/// a program 238-255 ms (`ms_gpu_opening`, `bench/results/2026-11-26-h200x2-tiled.json`). Launches
/// that would wait for it are weighed against this ([`worth_waiting`]): with 130 ms assumed, a
/// launch of the tiled stencil waited 127 ms for GPU 1 with GPU 0 idle.
const OPEN_EACH: Duration = Duration::from_millis(260);

/// What opening one more GPU costs a run in all, which the savings it forgoes must reach
/// first ([`pays`]): the opening, the driver holding the open GPU's launches meanwhile, and
/// the context's teardown at exit. On two H200s the tiled stencil (`bench/cuda/tiled.cu
/// 16384 500`) ran 0.38 s longer in wall on two GPUs than on one once GPU 1 opened, its
/// kernels 67 ms shorter: about 450 ms for the opening, against the 130 ms then assumed.
const OPEN_PRICE: Duration = Duration::from_millis(450);

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

/// What the launches that wanted GPUs not open yet would have saved on them, ns, in all
/// ([`forgo`]).
static FORGONE_NS: AtomicU64 = AtomicU64::new(0);

/// A launch the split policy would have split over GPUs not open yet ran over the open ones;
/// split it was predicted to save `saved_ns`. Counted, and once the savings come to what
/// opening the closed GPUs costs, they start opening ([`want_all`]; see the module's doc).
pub fn forgo(saved_ns: f64) {
    // NaN and nothing saved count for nothing.
    if ASKED.load(Ordering::Relaxed) || saved_ns.is_nan() || saved_ns <= 0.0 {
        return;
    }
    let forgone = FORGONE_NS.fetch_add(saved_ns as u64, Ordering::Relaxed).saturating_add(saved_ns as u64);
    let devs = devices();
    let closed = devs.order.iter().filter(|&&k| devs.is_local(k) && devs.on_gpus() && !devs.gpu(k).is_open()).count();
    if pays(forgone, closed) {
        want_all();
    }
}

/// Whether `forgone_ns` of savings pay for opening `closed` GPUs.
fn pays(forgone_ns: u64, closed: usize) -> bool {
    closed > 0 && u128::from(forgone_ns) >= OPEN_PRICE.as_nanos() * closed as u128
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_gpus_open_once_forgone_savings_pay_for_them() {
        let each = OPEN_PRICE.as_nanos() as u64;
        assert!(!pays(0, 1));
        assert!(!pays(each - 1, 1));
        assert!(pays(each, 1));
        // Each closed GPU costs its own opening.
        assert!(!pays(2 * each, 3));
        assert!(pays(3 * each, 3));
        // Nothing closed: nothing to open, whatever was forgone.
        assert!(!pays(u64::MAX, 0));
    }
}
