//! Where the layers below the statistics report what they did: a small interface, so that
//! copying bytes or page-locking a buffer never needs the statistics module (which sits
//! near the top of the crate and reads every layer).
//!
//! The statistics ([`crate::stats`]) install their [`Sink`] when the program starts
//! (`__hpvm__init`); until one is installed, events are dropped (a benchmark driving the
//! planner directly counts nothing). Per-node counters are not events: they live in the
//! node's own record ([`crate::module::NodeStats`]), which its layer owns.

use std::sync::OnceLock;

/// Something the runtime did that the statistics count. Places are numbered as the
/// statistics' tables are: 0 the host, `1 + k` device `k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A graph launch (`__hpvm__launch`).
    GraphLaunch,
    /// One item pushed into a streaming launch.
    StreamItem,
    /// `bytes` copied from place `from` to place `to`.
    Copied { from: usize, to: usize, bytes: u64 },
    /// The host asked for `bytes` with `llvm_hpvm_request_mem`.
    Requested { bytes: u64 },
    /// Time making the host current (copies back from the devices, waited for).
    ToHost { nanos: u64 },
    /// An attempt to page-lock a buffer: the bytes locked (0 where the driver refused) and
    /// the time it took.
    PageLocked { bytes: u64, nanos: u64 },
    /// A look at a watched buffer for host writes (`memory::watch`): the bytes found written
    /// (whole pages, and the partial ones at its ends) and the time it took.
    HostWritesScanned { bytes: u64, nanos: u64 },
    /// Under ranks: one exchange of the bytes whose copies cross ranks, `sent` and `received`
    /// by this rank, taking `nanos` (packing and waiting included).
    CrossedRanks { sent: u64, received: u64, nanos: u64 },
    /// Under ranks: one comparison of the ranks' launch hashes at a graph launch, taking
    /// `nanos` (the wait for the slowest rank included).
    RanksAgreed { nanos: u64 },
    /// Watching a buffer of `bytes` began (registration and protection), taking `nanos`.
    WatchStarted { bytes: u64, nanos: u64 },
    /// A GPU loaded a module, from the build's machine code (`sass`) or by compiling its PTX,
    /// taking `nanos`.
    ModuleLoaded { sass: bool, nanos: u64 },
    /// A GPU's context opened (its peer access enabled), taking `nanos`: with the run, when
    /// first used, or in the background ([`crate::devices::opening`]).
    GpuOpened { nanos: u64 },
    /// A launch waited `nanos` for GPUs still opening ([`crate::devices::opening`]).
    WaitedForGpus { nanos: u64 },
    /// A GPU's properties were asked of the driver, taking `nanos`
    /// ([`crate::devices::ask_limits_ahead`]).
    GpuPropertiesAsked { nanos: u64 },
}

/// A receiver of events. Called from any thread, often on hot paths: keep it to atomics.
pub trait Sink: Sync {
    fn record(&self, event: Event);
}

static SINK: OnceLock<&'static dyn Sink> = OnceLock::new();

/// Installs the process's sink; the first one installed stays.
pub fn install(sink: &'static dyn Sink) {
    SINK.get_or_init(|| sink);
}

/// Reports `event` to the installed sink, if any.
#[inline]
pub fn record(event: Event) {
    if let Some(s) = SINK.get() {
        s.record(event);
    }
}

/// Whether anyone reads times (the statistics, when `HPVM_MGPU_STATS` asks for them). Else a
/// launch reads no clock and records no CUDA timing events: each costs the host time that
/// short launches cannot hide.
pub fn timing() -> bool {
    static TIMING: OnceLock<bool> = OnceLock::new();
    *TIMING.get_or_init(|| std::env::var("HPVM_MGPU_STATS").is_ok_and(|v| !matches!(v.trim(), "" | "0")))
}

/// The start of a phase the statistics time: reads the clock only when they do ([`timing`]).
#[derive(Clone, Copy)]
pub struct Stopwatch(Option<std::time::Instant>);

impl Stopwatch {
    pub fn start() -> Stopwatch {
        Stopwatch(timing().then(std::time::Instant::now))
    }

    /// Nanoseconds since the start; 0 when nothing is timed.
    pub fn nanos(&self) -> u64 {
        self.0.map_or(0, |t| t.elapsed().as_nanos() as u64)
    }
}
