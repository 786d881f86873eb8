//! The split policy: per launch of a unit, whether to split it and over how many devices,
//! from what earlier launches measured (`HPVM_MGPU_PARTITION=auto`, the default).
//!
//! A split pays when the time it saves on the kernel exceeds what it costs: every further
//! device adds launch overhead (enqueueing, events, waiting for one more device) and the
//! copies a split needs (halos, gathering what another device wrote). It cannot pay at all
//! when the grid is under one wave of one device: each block then runs at once wherever it
//! is, and more devices only add overhead (the time is one block's, however the grid is cut).
//!
//! The model, per node (every unit launch measures into it):
//! - the device time per block of the grid (`ns_per_block`): a whole launch's kernel time
//!   over its blocks, or a split one's slowest device times the devices over the blocks; one
//!   number for both, so a measurement in one mode updates the prediction of the other;
//! - the copy time per launch when run over `n` devices, from launches that ran over `n`
//!   after one that did too (a change of mode moves data once: not the steady state);
//! - the launch overhead over `n` devices, measured for all nodes together ([`Overheads`]);
//!   on GPUs never less than [`GPU_MORE_NS`] per further GPU, the GPUs' side of a split that
//!   the host's clock does not see.
//!
//! - the host's planning per split launch (`plan_ns`), past a node's first few: near nothing
//!   where launches hit the plan caches, a plan and copy plan each time where a scalar the
//!   maps name changes every launch.
//!
//! A launch over `n` devices is predicted to take `ns_per_block × blocks / n + copies(n) +
//! overhead(n) + planning`; it splits over the `n` (at least 2) that minimizes this if that beats the
//! whole launch by [`MARGIN`]. The first launch of a node splits where its grid is at least
//! [`FIRST_SPLIT_WAVES`] waves (the large launches that matter most); a smaller grid runs
//! whole first, so a short kernel never pays for a split's plan and copies to be measured. Its measurement decides the next; on GPUs the first one is not
//! believed (a kernel's first run is cold), so such a node stays whole until a second arrives
//! (measurements arrive when the program next waits for the GPUs).
//!
//! Decisions stick: a launch over as many blocks as an earlier one of the node keeps that
//! one's device count unless another split is predicted faster by [`SWITCH_MARGIN`], or the
//! whole launch is predicted faster at all (a split must pay; the whole launch moves
//! nothing). Each change
//! costs a plan and copy plans of its own (the device count is part of the launch key) and
//! moves data once; without the rule, a node launched with many shapes (Parboil spmv's 374
//! per iteration) flipped keys between split and whole as its per-block estimate drifted,
//! and missed the plan caches every iteration.
//!
//! Outputs never depend on the choice: a split launch is bit-identical to a whole one. Only
//! time and the statistics do.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// `HPVM_MGPU_PARTITION`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `auto` (default): split when it pays.
    Auto,
    /// `always` (or `on`): split whenever the analysis allows (benchmarks, tests).
    Always,
    /// `off`: every unit runs whole on device 0.
    Off,
}

/// `HPVM_MGPU_POLICY_LOG=1`: every decision of the policy on stderr, one line each (node,
/// blocks, what was measured, the decision), for finding why a program splits where it does.
pub(crate) fn logging() -> bool {
    static LOG: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LOG.get_or_init(|| matches!(std::env::var("HPVM_MGPU_POLICY_LOG").as_deref(), Ok("1" | "yes" | "on")))
}

/// A line of the policy log ([`logging`]), stamped with [`log_ms`]; its arguments are
/// evaluated only where the log is on (launches are the hot path).
macro_rules! log_line {
    ($($arg:tt)*) => {
        if $crate::partitioned::policy::logging() {
            eprintln!("hpvm-mgpu policy: {:.3} ms: {}", $crate::partitioned::policy::log_ms(), format_args!($($arg)*));
        }
    };
}
pub(crate) use log_line;

/// Milliseconds since the policy's first log line, the stamp of each (to lay the host's
/// decisions beside a GPU timeline, `scripts/device/timeline`).
pub(crate) fn log_ms() -> f64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_secs_f64() * 1e3
}

pub(crate) fn mode() -> Mode {
    static MODE: std::sync::OnceLock<Mode> = std::sync::OnceLock::new();
    *MODE.get_or_init(|| match std::env::var("HPVM_MGPU_PARTITION").unwrap_or_default().trim() {
        // Under ranks every rank must decide alike, and the policy decides from each rank's
        // own clock: every split launch takes every device instead.
        "" | "auto" if crate::ranks::spans_ranks() => Mode::Always,
        "" | "auto" => Mode::Auto,
        "always" | "on" | "1" => Mode::Always,
        "off" | "0" => Mode::Off,
        other => crate::fatal(&format!("HPVM_MGPU_PARTITION={other}: expected `auto`, `always` or `off`")),
    })
}

/// A split must beat the whole launch's predicted time by this share: measurements are noisy,
/// and a change of mode moves data.
pub(crate) const MARGIN: f64 = 0.1;

/// A launch keeps the device count an earlier launch of its size got unless another count is
/// predicted faster by this share.
pub(crate) const SWITCH_MARGIN: f64 = 0.3;

/// On GPUs, a launch whose kernel is predicted shorter than this runs whole: half of it is less
/// than what a split costs on the GPUs' side (cross-device waits and synchronization, and the
/// copies back its neighbours pay), which the host's measurements arrive too late to show.
/// On two H100s `launches.cu 4194304 300` (16 µs kernels) ran 2.3-3.8x slower split.
pub(crate) const GPU_MIN_SPLIT_NS: f64 = 100_000.0;

/// A node's first launch splits before anything was measured only when its grid is at least
/// this many waves of one device.
pub(crate) const FIRST_SPLIT_WAVES: u64 = 64;

/// The same on simulated devices, whose wave is a block per thread: a few blocks' work, where
/// a GPU's is thousands. At 1024 waves each thread of a device runs a thousand blocks (a
/// stencil's 1024 × 1024 grid on two threads splits at once; PolyBench's 3-D convolution's
/// 256 blocks per launch and atax's 16 are measured first, their first split's ISL work
/// having doubled their runs on `dry:8`).
pub(crate) const SIM_FIRST_SPLIT_WAVES: u64 = 1024;

/// Launch sizes whose last decision a node remembers (beyond, it forgets them all).
const REMEMBERED: usize = 4096;

/// Weight of a new sample in the running averages.
const ALPHA: f64 = 0.3;

fn average(old: Option<f64>, sample: f64) -> f64 {
    match old {
        Some(o) => o + ALPHA * (sample - o),
        None => sample,
    }
}

/// Most devices a split takes (as [`crate::devices::MAX_DEVICES`]).
const MAX: usize = crate::devices::MAX_DEVICES;

/// What earlier launches of one node measured.
#[derive(Clone, Debug)]
pub(crate) struct Measured {
    /// Device time per block of the grid, in nanoseconds.
    pub ns_per_block: Option<f64>,
    /// Per devices used (index), the copy time of a launch in the steady state, ns.
    pub copy_ns: [Option<f64>; MAX + 1],
    /// Bit `k`: `copy_ns[k]` is measured.
    pub copy_known: u128,
    /// The devices the last launch used (0 before the first).
    pub last_devices: usize,
    /// Launches measured, and launches decided.
    pub samples: u64,
    pub launches: u64,
    /// Blocks one device runs at once (its wave), where known: on a GPU from the kernel's
    /// occupancy, found once.
    pub wave: Option<u64>,
    /// Whether the node runs a grid-stride loop ([`Situation::strided`]), found once.
    pub strided: Option<bool>,
    /// Per grid size (blocks), the devices its last launch was given (see the module's doc).
    pub decided: crate::hash::FxHashMap<u64, usize>,
    /// A GPU launch of the node is timed and its measurement has not arrived yet (it comes
    /// when the program next waits): timing more launches meanwhile tells nothing new.
    pub probing: bool,
    /// The bytes of the reductions its last split plan combines per further device
    /// (`partitioned::reduce`): a cost the timed launches do not see (the combine follows the
    /// kernels), estimated instead ([`combine_ns`]).
    pub reduce_bytes: u64,
    /// The host's planning per split launch (its plan and copy plan, a cache hit's or a
    /// miss's), ns, past the node's first [`PLAN_WARM`] split launches, and how many split
    /// launches it had.
    pub plan_ns: Option<f64>,
    pub split_launches: u64,
    /// Launches that wanted GPUs not open yet before the node was measured: what they would
    /// have saved is counted towards opening them once a measurement values it
    /// (`devices::opening::forgo`).
    pub forgone_unvalued: u64,
}

/// A node's first split launches miss the plan caches in any program (each launch key and
/// coherence state is new once): their planning is not what later launches pay, and is not
/// counted ([`Measured::record_plan`]). A stencil alternating between two buffers has two
/// keys; a Gaussian elimination's row changes every launch and misses every time.
pub(crate) const PLAN_WARM: u64 = 4;

impl Default for Measured {
    fn default() -> Measured {
        Measured {
            ns_per_block: None,
            copy_ns: [None; MAX + 1],
            copy_known: 0,
            last_devices: 0,
            samples: 0,
            launches: 0,
            wave: None,
            strided: None,
            decided: crate::hash::FxHashMap::default(),
            probing: false,
            reduce_bytes: 0,
            plan_ns: None,
            split_launches: 0,
            forgone_unvalued: 0,
        }
    }
}

/// One launch's measurement.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sample {
    /// Devices the launch used, and its grid's blocks.
    pub devices: usize,
    pub blocks: u64,
    /// The slowest device's kernel time, ns.
    pub kernel_ns: f64,
    /// Measured on GPUs (by events).
    pub gpus: bool,
}

impl Measured {
    /// Remembers the devices a launch over `blocks` blocks was given.
    pub fn decided(&mut self, blocks: u64, devices: usize) {
        if self.decided.len() >= REMEMBERED && !self.decided.contains_key(&blocks) {
            self.decided.clear();
        }
        self.decided.insert(blocks, devices);
    }

    pub fn record(&mut self, s: Sample) {
        if s.devices == 0 || s.devices > MAX || s.blocks == 0 {
            return;
        }
        if s.gpus && self.samples == 0 {
            // A kernel's first run on a GPU is cold (first use of its module, caches, page
            // tables): on two H100s it measured 3x its steady time, enough to split a 16 µs
            // kernel that then ran slower split. Counted, not believed.
            self.samples += 1;
            return;
        }
        let per_block = s.kernel_ns * s.devices as f64 / s.blocks as f64;
        self.ns_per_block = Some(average(self.ns_per_block, per_block));
        self.samples += 1;
    }

    /// A split launch's planning took `ns` (see [`Measured::plan_ns`]).
    pub fn record_plan(&mut self, ns: f64) {
        self.split_launches += 1;
        if self.split_launches > PLAN_WARM && ns.is_finite() && ns >= 0.0 {
            self.plan_ns = Some(average(self.plan_ns, ns));
        }
    }

    /// A launch's copy time, counted only when the launch before ran over as many devices
    /// (see the module's doc); the caller says how many the one before used.
    pub fn record_copies(&mut self, devices: usize, before: usize, copy_ns: f64) {
        if devices == before && (1..=MAX).contains(&devices) {
            self.copy_ns[devices] = Some(average(self.copy_ns[devices], copy_ns));
            self.copy_known |= 1 << devices;
        }
    }

    /// The copy time predicted over `n` devices: measured, else (for a split) the nearest
    /// measured split's, else the whole launch's, else none.
    fn copies(&self, n: usize) -> f64 {
        if let Some(c) = self.copy_ns[n] {
            return c;
        }
        if n == 1 {
            return 0.0;
        }
        // The measured counts, few, from a mask: a launch asks for every candidate count, and
        // scanning all 127 slots per candidate was half of a cache-hit launch's work on 8
        // dry-run devices.
        let mut measured = self.copy_known & !0b11;
        let mut nearest: Option<(usize, f64)> = None;
        while measured != 0 {
            let k = measured.trailing_zeros() as usize;
            measured &= measured - 1;
            if let Some(c) = self.copy_ns[k] {
                let closer = match nearest {
                    Some((d, _)) => k.abs_diff(n) < d,
                    None => true,
                };
                if closer {
                    nearest = Some((k.abs_diff(n), c));
                }
            }
        }
        // No split measured: at least what the whole launch copies (a split copies its
        // inputs too, and more where partitions share them; taking none made an unmeasured
        // split look cheaper than a whole launch whose copies were measured).
        nearest.map_or(self.copy_ns[1].unwrap_or(0.0), |x| x.1)
    }
}

/// The launch overhead over `n` devices, in ns, for all nodes: measured where the runtime can
/// (simulated devices: partitions' threads started and joined; GPUs: synchronous timed
/// launches, host time beyond the GPU's), else a default per kind of device.
pub(crate) struct Overheads {
    ns: [AtomicU64; MAX + 1],
}

/// Defaults before anything is measured, ns: a GPU launch costs a few microseconds of the host
/// and every further GPU about 15 (enqueue, cross-device events, one more synchronization:
/// Parboil spmv's kernels of 11 µs took 40 µs more per launch split over two H200s at
/// 508bedb); a simulated device's partition starts and joins a thread (about 20 µs here).
const GPU_FIRST_NS: f64 = 5_000.0;
const GPU_MORE_NS: f64 = 15_000.0;
const SIM_EACH_NS: f64 = 20_000.0;

pub(crate) static OVERHEADS: Overheads = Overheads { ns: [const { AtomicU64::new(0) }; MAX + 1] };

impl Overheads {
    pub fn get(&self, n: usize, gpus: bool) -> f64 {
        let bits = self.ns[n.min(MAX)].load(Ordering::Relaxed);
        if bits != 0 {
            let measured = f64::from_bits(bits);
            // The host's clock sees only the host's share of a split over GPUs; what each
            // further GPU adds on the GPUs' side (cross-device event waits, one more
            // synchronization, and the copies back that the node's neighbours pay when they
            // next run whole) it does not. Measured on two H100s at 89fc0be, a 16 µs kernel
            // that the policy split by its host-side measure made `launches.cu 4194304 300`
            // 3.6x slower on two GPUs than on one.
            return if gpus { measured.max(GPU_MORE_NS * n.saturating_sub(1) as f64) } else { measured };
        }
        if gpus {
            GPU_FIRST_NS + GPU_MORE_NS * n.saturating_sub(1) as f64
        } else {
            SIM_EACH_NS * n as f64
        }
    }

    /// A launch over `n` devices spent `ns` beyond its devices' work.
    pub fn record(&self, n: usize, ns: f64) {
        if n == 0 || n > MAX || !ns.is_finite() || ns < 0.0 {
            return;
        }
        let slot = &self.ns[n];
        let old = slot.load(Ordering::Relaxed);
        let now = average((old != 0).then(|| f64::from_bits(old)), ns).max(1.0);
        // A lost race between two launches loses one sample: harmless.
        let _ = slot.compare_exchange(old, now.to_bits(), Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// What the policy knows of a launch before it runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Situation {
    /// Devices available to it.
    pub devices: usize,
    /// Blocks of its grid.
    pub blocks: u64,
    /// Blocks one device runs at once, where known.
    pub wave: Option<u64>,
    pub gpus: bool,
    /// The node runs a grid-stride loop (`dashdb::RuntimeBlock::strided`): its grid is sized
    /// to the machine, not to the work, so waves say nothing of what a split would gain.
    pub strided: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Decision {
    Split(usize),
    Whole(Why),
}

/// Why a launch ran whole though it could have split.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Why {
    UnderOneWave {
        blocks: u64,
        wave: u64,
    },
    /// On GPUs, a kernel shorter than a split's GPU-side cost.
    TooShort {
        kernel_ns: f64,
        floor_ns: f64,
    },
    /// A first launch on GPUs of a grid under `waves` waves: run whole to be measured.
    Unmeasured {
        blocks: u64,
        waves: u64,
    },
    /// The best split over `devices` was predicted to save `saved_ns` of the kernel's
    /// `kernel_ns` and to cost `cost_ns` more in overhead and copies.
    DoesNotPay {
        kernel_ns: f64,
        devices: usize,
        saved_ns: f64,
        cost_ns: f64,
    },
}

impl Why {
    /// A number per kind of reason ([`crate::module::NodeStats::note_declined`]).
    pub fn kind(&self) -> u8 {
        match self {
            Why::UnderOneWave { .. } => 1,
            Why::TooShort { .. } => 2,
            Why::Unmeasured { .. } => 3,
            Why::DoesNotPay { .. } => 4,
        }
    }
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = |ns: f64| {
            if ns >= 1e6 {
                format!("{:.1} ms", ns / 1e6)
            } else {
                format!("{:.0} µs", ns / 1e3)
            }
        };
        match *self {
            Why::UnderOneWave { blocks, wave } => {
                write!(f, "{blocks} blocks: under one wave of one device ({wave} blocks at once)")
            }
            Why::TooShort { kernel_ns, floor_ns } => write!(
                f,
                "kernel {}: under {}, a split over GPUs cannot pay for its cross-device work",
                us(kernel_ns),
                us(floor_ns)
            ),
            Why::Unmeasured { blocks, waves: 0 } => write!(
                f,
                "first launch of {blocks} blocks running a grid-stride loop: run whole to measure the kernel before \
                 a split is paid for"
            ),
            Why::Unmeasured { blocks, waves } => write!(
                f,
                "first launch of {blocks} blocks (under {waves} waves of one device): run whole to measure the \
                 kernel before a split is paid for"
            ),
            Why::DoesNotPay { kernel_ns, devices, saved_ns, cost_ns } => write!(
                f,
                "kernel {}: over {devices} devices it would save {} and cost {} more (overhead and copies)",
                us(kernel_ns),
                us(saved_ns),
                us(cost_ns)
            ),
        }
    }
}

/// The decision for a launch in situation `s` with what the node measured so far.
pub(crate) fn decide(s: &Situation, m: &Measured, overheads: &Overheads) -> Decision {
    if s.devices <= 1 {
        return Decision::Split(s.devices.max(1));
    }
    let useful = match s.wave {
        Some(w) if w > 0 && !s.strided => (s.blocks.div_ceil(w) as usize).clamp(1, s.devices),
        _ => s.devices,
    };
    if useful <= 1 {
        return Decision::Whole(Why::UnderOneWave { blocks: s.blocks, wave: s.wave.unwrap_or(0) });
    }
    let Some(per_block) = m.ns_per_block else {
        // Nothing measured yet. A GPU grid of few waves may hold a kernel of microseconds,
        // which a split would only slow down, and the split's first plan costs interval
        // computation on top: it runs whole once, and its measure decides. A large grid splits
        // at once (its first launch is often most of the run, as matmul's five are).
        // A grid-stride loop's grid tells nothing: its first launch on GPUs is measured.
        if s.gpus && s.strided {
            return Decision::Whole(Why::Unmeasured { blocks: s.blocks, waves: 0 });
        }
        // So on simulated devices too: a split's first plan costs ISL work (a wavefront's
        // staircase of tiles took a second), which a kernel of one small grid never repays.
        if let Some(w) = s.wave.filter(|&w| w > 0) {
            let waves = if s.gpus { FIRST_SPLIT_WAVES } else { SIM_FIRST_SPLIT_WAVES };
            if s.blocks < waves * w {
                return Decision::Whole(Why::Unmeasured { blocks: s.blocks, waves });
            }
        }
        return Decision::Split(useful);
    };
    let kernel = per_block * s.blocks as f64;
    if s.gpus && kernel < GPU_MIN_SPLIT_NS {
        // What a split over GPUs could save is under what its GPU side costs, measured or not
        // (see `GPU_MIN_SPLIT_NS`).
        return Decision::Whole(Why::TooShort { kernel_ns: kernel, floor_ns: GPU_MIN_SPLIT_NS });
    }
    let predict = |n: usize| predicted(s, m, overheads, kernel, n);
    let whole = predict(1);
    let (best, time) =
        (2..=useful).map(|n| (n, predict(n))).min_by(|a, b| a.1.total_cmp(&b.1)).expect("at least two devices");
    // A launch of this size ran before: its device count stays unless clearly beaten.
    let before = m.decided.get(&s.blocks).copied().filter(|&n| (1..=useful).contains(&n));
    let split = match before {
        Some(1) => time < whole * (1.0 - SWITCH_MARGIN),
        Some(n) => {
            let kept = predict(n);
            if whole <= kept {
                // A split predicted slower than the whole launch ends at once: splitting
                // must pay, and the whole launch moves nothing.
                false
            } else if time < kept * (1.0 - SWITCH_MARGIN) {
                // Clearly beaten by another split.
                true
            } else {
                return Decision::Split(n);
            }
        }
        None => time < whole * (1.0 - MARGIN),
    };
    if split {
        Decision::Split(best)
    } else {
        let saved = kernel - kernel / best as f64;
        Decision::Whole(Why::DoesNotPay {
            kernel_ns: kernel,
            devices: best,
            saved_ns: saved,
            cost_ns: time - whole + saved,
        })
    }
}

/// A launch's predicted time over `n` devices, its kernel taking `kernel` ns whole: the
/// kernel's share, the copies, the launch overheads, combining reductions and (for a split)
/// planning.
fn predicted(s: &Situation, m: &Measured, overheads: &Overheads, kernel: f64, n: usize) -> f64 {
    // A split's planning counts where later launches keep paying it (see `PLAN_WARM`); a
    // whole launch plans once for any scalars.
    let planning = if n > 1 { m.plan_ns.unwrap_or(0.0) } else { 0.0 };
    // A split's overhead is never below the whole launch's: measured apart, on devices whose
    // kernels take nothing (dry-run ones) the noise between them alone made splits "pay".
    let own = overheads.get(n, s.gpus);
    let overhead = if n > 1 { own.max(overheads.get(1, s.gpus)) } else { own };
    kernel / n as f64 + m.copies(n) + overhead + combine_ns(m.reduce_bytes, n, s.gpus) + planning
}

/// What a split over `n` devices is predicted to save against the whole launch, ns (0 when
/// the kernel is not measured yet, or the split saves nothing).
pub(crate) fn saving(s: &Situation, m: &Measured, overheads: &Overheads, n: usize) -> f64 {
    let Some(per_block) = m.ns_per_block else { return 0.0 };
    let kernel = per_block * s.blocks as f64;
    (predicted(s, m, overheads, kernel, 1) - predicted(s, m, overheads, kernel, n)).max(0.0)
}

/// What combining a launch's reductions over `n` devices adds, ns: each further device's
/// partial result (`bytes`) is copied to the home device and combined there, in series on the
/// home's stream. On GPUs a peer copy (NVLink, about 100 GB/s: 0.01 ns a byte), the combine
/// kernel's pass over both copies, and about 10 µs of event, copy and launch latencies per
/// device; on simulated devices a copy and a combine by one host thread, about 0.5 ns a byte.
pub(crate) fn combine_ns(bytes: u64, n: usize, gpus: bool) -> f64 {
    if bytes == 0 || n <= 1 {
        return 0.0;
    }
    let (per_byte, per_device) = if gpus { (0.012, 10_000.0) } else { (0.5, 1_000.0) };
    (n - 1) as f64 * (bytes as f64 * per_byte + per_device)
}

/// Per node of a module, what its launches measured.
#[derive(Default)]
pub(crate) struct Records {
    nodes: Mutex<Vec<std::sync::Arc<Mutex<Measured>>>>,
    /// Per node, a settled decision ([`Records::settle`]): the blocks of its launch shape
    /// (bits 20 and up) and how many more of its launches run whole without the policy
    /// (bits 0-19). Made on first use, one slot per node of the module.
    settled: std::sync::OnceLock<Box<[AtomicU64]>>,
}

/// Launches a settled decision covers at most ([`Records::settle`]).
const SETTLED_MOST: u64 = (1 << 20) - 1;

impl Records {
    /// Whether node `node`'s launch of `blocks` blocks runs whole by its settled decision
    /// (one fewer launch left then). A launch-bound loop's launch costs the policy's lock and
    /// model otherwise: on two GPUs that was a microsecond per launch more than on one.
    pub fn take_settled(&self, node: u32, nodes: usize, blocks: u64) -> bool {
        let slots = self.settled.get_or_init(|| (0..nodes).map(|_| AtomicU64::new(0)).collect());
        let Some(slot) = slots.get(node as usize) else { return false };
        let shape = blocks << 20;
        slot.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
            (v & !SETTLED_MOST == shape && v & SETTLED_MOST > 0).then(|| v - 1)
        })
        .is_ok()
    }

    /// Node `node`'s next `launches` launches of `blocks` blocks run whole without the policy
    /// (fewer where `blocks` or `launches` is too large to record: then none).
    pub fn settle(&self, node: u32, nodes: usize, blocks: u64, launches: u64) {
        let slots = self.settled.get_or_init(|| (0..nodes).map(|_| AtomicU64::new(0)).collect());
        if let (Some(slot), true) = (slots.get(node as usize), blocks < 1 << 44) {
            slot.store(blocks << 20 | launches.min(SETTLED_MOST), Ordering::Relaxed);
        }
    }

    /// The launches after this one that need not ask the policy, for a launch decided
    /// `decision` (on GPUs, one that was not timed), `launches` the node's count of launches
    /// so far: a grid under one wave runs whole whatever its kernel takes; a kernel far under
    /// the split floor, or whose best split was predicted to cost over four times what it
    /// saves, runs whole until its next sample ([`sample_gpu`]). The caller counts the skipped
    /// launches of the last two in now ([`Records::counts_skipped`]), so that the sample comes
    /// when it would have.
    ///
    /// On simulated devices every decided launch is measured, and the same launches are
    /// settled: on 2 to 8 dry-run devices asking the policy at every launch of PolyBench's
    /// lu (two kernels per row, each followed by a wait) was most of what a launch cost
    /// beyond one device's (1.7 µs against 1.1).
    pub fn settles(decision: &Decision, launches: u64) -> u64 {
        // The next full decision counts one more launch: that one is sampled.
        let next = launches + 1;
        let until = |every: u64| (every - next % every) % every;
        match decision {
            Decision::Whole(Why::UnderOneWave { .. }) => SETTLED_MOST,
            Decision::Whole(Why::TooShort { kernel_ns, floor_ns }) if *kernel_ns * 4.0 < *floor_ns => {
                until(FAR_UNDER_SAMPLE)
            }
            Decision::Whole(Why::DoesNotPay { saved_ns, cost_ns, .. })
                if *saved_ns * 4.0 < *cost_ns && next >= FIRST_SAMPLED =>
            {
                until(SAMPLE_EVERY)
            }
            _ => 0,
        }
    }

    /// Whether the launches [`Records::settles`] skips for `decision` count towards the
    /// node's launches now (those due back at a sample).
    pub fn counts_skipped(decision: &Decision) -> bool {
        matches!(decision, Decision::Whole(Why::TooShort { .. } | Why::DoesNotPay { .. }))
    }

    pub fn of(&self, node: u32) -> std::sync::Arc<Mutex<Measured>> {
        let mut nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        let i = node as usize;
        if nodes.len() <= i {
            nodes.resize_with(i + 1, Default::default);
        }
        nodes[i].clone()
    }
}

/// A launch measured for the policy: where its measurement goes.
pub(crate) struct Probe {
    pub record: std::sync::Arc<Mutex<Measured>>,
    /// Devices the policy gave the launch, and the launch before it of the node.
    pub devices: usize,
    pub before: usize,
    /// Devices its partitions ran on (fewer where the grid was too small to cut).
    pub used: usize,
    pub blocks: u64,
    /// When the launch's copies began (planning is not the launch's overhead).
    pub started: std::time::Instant,
    /// The launch runs on GPUs.
    pub gpus: bool,
}

impl Probe {
    /// The launch ended: its slowest device's kernel time and copy time, and the longest a
    /// device was busy, ns; `waited`: the host waited for it, so the host time beyond the
    /// devices' is its overhead.
    pub fn finish(self, kernel_ns: f64, copy_ns: f64, busy_ns: f64, waited: bool) {
        let wall = self.started.elapsed().as_nanos() as f64;
        let mut m = self.record.lock().unwrap_or_else(|e| e.into_inner());
        m.record(Sample { devices: self.used, blocks: self.blocks, kernel_ns, gpus: self.gpus });
        m.record_copies(self.devices, self.before, copy_ns);
        drop(m);
        if waited {
            OVERHEADS.record(self.devices, (wall - busy_ns).max(0.0));
        }
    }
}

impl Drop for Probe {
    /// A probe dropped unfinished (a launch that ran another way) lets the node be timed again.
    fn drop(&mut self) {
        self.record.lock().unwrap_or_else(|e| e.into_inner()).probing = false;
    }
}

/// Whether this launch of a node should be timed on GPUs for the policy (the statistics time
/// every launch anyway). Timing costs events and a slot in the in-flight ring, about a
/// microsecond of a launch that may take three, so only where a measurement can change a
/// decision:
/// - never where the decision does not depend on one: a grid under one wave runs whole
///   whatever the kernel takes;
/// - never while an earlier timed launch's measurement is still to come (`Measured::probing`):
///   a program that waits only at its end would otherwise time one launch in 16 for nothing;
/// - the first few launches, then one in 16, so the model follows a node whose launches change;
/// - one in 4096 for a kernel far below [`GPU_MIN_SPLIT_NS`] (a launch-bound loop's), which
///   would have to grow many times over before a split could pay.
///
/// On two H200s, timing one launch in 16 of `launches.cu 65536` (grids under one wave) made
/// its 90 000 launches 18% slower on two GPUs than on one.
/// One launch in this many is timed for a kernel far under the split floor ([`sample_gpu`]).
const FAR_UNDER_SAMPLE: u64 = 4096;

pub(crate) fn sample_gpu(m: &Measured, decision: &Decision) -> bool {
    if m.probing {
        return false;
    }
    match decision {
        Decision::Whole(Why::UnderOneWave { .. }) => false,
        // A timed launch is not held, so it breaks a held sequence's graph replay.
        Decision::Whole(Why::TooShort { kernel_ns, floor_ns }) if *kernel_ns * 4.0 < *floor_ns => {
            m.launches.is_multiple_of(FAR_UNDER_SAMPLE)
        }
        _ => m.launches < FIRST_SAMPLED || m.launches.is_multiple_of(SAMPLE_EVERY),
    }
}

/// The first launches of a node are all timed on GPUs ([`sample_gpu`]).
const FIRST_SAMPLED: u64 = 4;
/// After them, one launch in this many.
const SAMPLE_EVERY: u64 = 16;

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh() -> Overheads {
        Overheads { ns: [const { AtomicU64::new(0) }; MAX + 1] }
    }

    fn measured(kernel_ns: f64, devices: usize, blocks: u64, copies: &[(usize, f64)]) -> Measured {
        let mut m = Measured::default();
        m.record(Sample { devices, blocks, kernel_ns, gpus: false });
        for &(n, c) in copies {
            m.record_copies(n, n, c);
        }
        m
    }

    fn gpus(devices: usize, blocks: u64, wave: Option<u64>) -> Situation {
        Situation { devices, blocks, wave, gpus: true, strided: false }
    }

    /// The first launch splits over every device that gets at least a wave where the grid has
    /// many waves; a smaller one runs whole first, to be measured.
    #[test]
    fn first_launch_splits_over_the_devices_a_wave_fills() {
        let o = fresh();
        let m = Measured::default();
        assert_eq!(decide(&gpus(2, 100_000, Some(132 * 8)), &m, &o), Decision::Split(2));
        // A GPU grid of few waves runs whole first (launches.cu's 16384 blocks, 16 waves).
        let d = decide(&gpus(2, 16384, Some(1056)), &m, &o);
        assert!(matches!(d, Decision::Whole(Why::Unmeasured { blocks: 16384, waves: FIRST_SPLIT_WAVES })), "{d:?}");
        let Decision::Whole(why) = d else { unreachable!() };
        assert!(why.to_string().contains("run whole to measure the kernel"), "{why}");
        let sims = Situation { devices: 8, blocks: 3000, wave: Some(1000), gpus: false, strided: false };
        assert!(matches!(decide(&sims, &m, &o), Decision::Whole(Why::Unmeasured { .. })));
        let sims = Situation { devices: 8, blocks: 64_000, wave: Some(1000), gpus: false, strided: false };
        assert!(matches!(decide(&sims, &m, &o), Decision::Whole(Why::Unmeasured { waves: SIM_FIRST_SPLIT_WAVES, .. })));
        let sims = Situation { devices: 8, blocks: 64_000, wave: Some(8), gpus: false, strided: false };
        assert_eq!(decide(&sims, &m, &o), Decision::Split(8));
        assert_eq!(decide(&gpus(4, 5000, None), &m, &o), Decision::Split(4));
    }

    /// A grid-stride loop's grid is one wave by design: its first launch on GPUs is measured,
    /// and what it measured decides, as for any kernel.
    #[test]
    fn a_grid_stride_loop_is_measured_not_counted_in_waves() {
        let strided = Situation { devices: 2, blocks: 528, wave: Some(1056), gpus: true, strided: true };
        let d = decide(&strided, &Measured::default(), &fresh());
        let Decision::Whole(why) = d else { panic!("{d:?}") };
        assert!(why.to_string().contains("running a grid-stride loop"), "{why}");
        // 200 µs measured whole: worth two GPUs; 20 µs: not.
        let long = measured(200_000.0, 1, 528, &[]);
        assert_eq!(decide(&strided, &long, &fresh()), Decision::Split(2));
        let short = measured(20_000.0, 1, 528, &[]);
        assert!(matches!(decide(&strided, &short, &fresh()), Decision::Whole(Why::TooShort { .. })));
        // The same grid without the loop is under one wave.
        let plain = Situation { strided: false, ..strided };
        assert!(matches!(decide(&plain, &long, &fresh()), Decision::Whole(Why::UnderOneWave { .. })));
    }

    /// The camera pipeline of the issue: 16 blocks, one wave of an H200 holds 132 × 16.
    #[test]
    fn a_grid_under_one_wave_runs_whole() {
        let d = decide(&gpus(2, 16, Some(132 * 16)), &Measured::default(), &fresh());
        let Decision::Whole(why) = d else { panic!("{d:?}") };
        assert_eq!(why.to_string(), "16 blocks: under one wave of one device (2112 blocks at once)");
    }

    /// Parboil spmv's kernels: 11 µs whole; two GPUs save 5.5 µs and cost 15 µs more. On
    /// GPUs that is under the floor; on simulated devices the model says what it costs.
    #[test]
    fn short_kernels_run_whole() {
        let m = measured(5_500.0, 2, 8000, &[(2, 2_000.0)]);
        let d = decide(&gpus(2, 8000, Some(1000)), &m, &fresh());
        let Decision::Whole(why) = d else { panic!("{d:?}") };
        assert_eq!(
            why.to_string(),
            "kernel 11 µs: under 100 µs, a split over GPUs cannot pay for its cross-device work"
        );
        let o = fresh();
        o.record(2, 20_000.0);
        o.record(1, 5_000.0);
        let sims = Situation { devices: 2, blocks: 8000, wave: Some(1000), gpus: false, strided: false };
        let d = decide(&sims, &m, &o);
        let Decision::Whole(why) = d else { panic!("{d:?}") };
        let Why::DoesNotPay { kernel_ns, devices, saved_ns, cost_ns } = why.clone() else { panic!("{why:?}") };
        assert_eq!((kernel_ns, devices, saved_ns), (11_000.0, 2, 5_500.0));
        assert_eq!(cost_ns, 17_000.0);
        assert_eq!(
            why.to_string(),
            "kernel 11 µs: over 2 devices it would save 6 µs and cost 17 µs more (overhead and copies)"
        );
    }

    /// matmul 8192 on two H200s: 300 ms whole, halves split; halos cost 2 ms.
    #[test]
    fn long_kernels_split_over_every_device() {
        let m = measured(300e6, 1, 65536, &[(2, 2e6), (1, 0.0)]);
        assert_eq!(decide(&gpus(2, 65536, Some(2112)), &m, &fresh()), Decision::Split(2));
        assert_eq!(decide(&gpus(8, 65536, Some(2112)), &m, &fresh()), Decision::Split(8));
    }

    /// Where copies grow with the devices, the best count may be fewer than all.
    /// A reduction's combine counts: over a small histogram it changes nothing, over a large
    /// buffer the copies of every device's partial result make the split not pay.
    #[test]
    fn combining_large_reductions_can_make_a_split_not_pay() {
        let o = fresh();
        let mut m = measured(2_000_000.0, 1, 10_000, &[]);
        m.reduce_bytes = 1024;
        assert_eq!(decide(&gpus(2, 10_000, Some(100)), &m, &o), Decision::Split(2));
        // 2 ms of kernel against 256 MiB to bring over and combine per further GPU (3.2 ms).
        m.reduce_bytes = 256 << 20;
        assert!(matches!(decide(&gpus(2, 10_000, Some(100)), &m, &o), Decision::Whole(Why::DoesNotPay { .. })));
        assert_eq!(combine_ns(1 << 20, 1, true), 0.0);
        assert!(combine_ns(1 << 20, 3, false) > combine_ns(1 << 20, 2, false));
    }

    #[test]
    fn copies_can_make_fewer_devices_best() {
        let copies: Vec<(usize, f64)> = (1..=8).map(|n| (n, (n as f64 - 1.0) * 40_000.0)).collect();
        let m = measured(400_000.0, 1, 10_000, &copies);
        let o = fresh();
        // 400/n + 40(n-1) + 5 + 15(n-1) µs: least at n = 3 (133 + 80 + 35 = 248 < 400 × 0.9).
        assert_eq!(decide(&gpus(8, 10_000, None), &m, &o), Decision::Split(3));
    }

    /// Measured overheads replace the defaults; a launch whose copies are large runs whole.
    #[test]
    fn measured_overheads_and_copies_count() {
        let o = fresh();
        let m = measured(200_000.0, 2, 1000, &[(2, 150_000.0), (1, 0.0)]);
        // 400 µs whole; split: 200 + 150 + 20 = 370 µs: not 10% better.
        assert!(matches!(decide(&gpus(2, 1000, None), &m, &o), Decision::Whole(_)));
        o.record(2, 1_000.0);
        o.record(1, 1_000.0);
        let cheap = measured(200_000.0, 2, 1000, &[(2, 10_000.0), (1, 0.0)]);
        assert_eq!(decide(&gpus(2, 1000, None), &cheap, &o), Decision::Split(2));
        // On GPUs a measure never goes below what a further GPU costs the GPUs' side.
        assert_eq!((o.get(2, false), o.get(2, true), o.get(1, true)), (1_000.0, GPU_MORE_NS, 1_000.0));
    }

    /// Copies measured right after a change of mode (data moving once) are not the steady
    /// state and are not counted.
    #[test]
    fn copies_after_a_change_of_mode_are_ignored() {
        let mut m = Measured::default();
        m.record_copies(1, 2, 5e6);
        assert_eq!(m.copy_ns[1], None);
        m.record_copies(1, 1, 100.0);
        assert_eq!(m.copy_ns[1], Some(100.0));
        // Unmeasured splits take the nearest measured split's, else the whole launch's.
        assert_eq!(m.copies(3), 100.0);
        assert_eq!(Measured::default().copies(3), 0.0);
        m.record_copies(2, 2, 300.0);
        m.record_copies(5, 5, 900.0);
        assert_eq!((m.copies(3), m.copies(4), m.copies(8)), (300.0, 900.0, 900.0));
    }

    /// A launch size keeps its device count while the prediction wavers within the switch
    /// margin, and changes it when the prediction is clearly better (spmv's flipping keys).
    #[test]
    fn decisions_stick_within_the_switch_margin() {
        let o = fresh();
        // Whole 405 µs; over 2: 200 + 150 + 20 = 370 µs: a new size runs whole (< 10% better)...
        let mut m = measured(200_000.0, 2, 1000, &[(2, 150_000.0), (1, 0.0)]);
        assert!(matches!(decide(&gpus(2, 1000, None), &m, &o), Decision::Whole(_)));
        // ...but a size that ran split keeps splitting (not 30% worse),
        m.decided(1000, 2);
        assert_eq!(decide(&gpus(2, 1000, None), &m, &o), Decision::Split(2));
        // and one that ran whole stays whole while a split saves under 30%.
        let mut cheap = measured(200_000.0, 2, 1000, &[(2, 70_000.0), (1, 0.0)]);
        cheap.decided(1000, 1);
        // 200 + 70 + 20 = 290 µs against 405: 28% better is not enough.
        assert!(matches!(decide(&gpus(2, 1000, None), &cheap, &o), Decision::Whole(_)));
        let cheaper = {
            let mut m = measured(200_000.0, 2, 1000, &[(2, 10_000.0), (1, 0.0)]);
            m.decided(1000, 1);
            m
        };
        assert_eq!(decide(&gpus(2, 1000, None), &cheaper, &o), Decision::Split(2));
        // A split size whose split became clearly slower runs whole.
        let mut costly = measured(200_000.0, 2, 1000, &[(2, 400_000.0), (1, 0.0)]);
        costly.decided(1000, 2);
        assert!(matches!(decide(&gpus(2, 1000, None), &costly, &o), Decision::Whole(_)));
    }

    /// `launches.cu 4194304 300` on two H100s: 16 µs kernels, whose host-side overhead
    /// measured next to nothing, must not split (they did, 65 of 300 times, and the run was
    /// 3.6x slower than on one GPU).
    #[test]
    fn a_short_kernel_stays_whole_however_cheap_its_host_side_looks() {
        let o = fresh();
        o.record(2, 200.0);
        let mut m = measured(8_000.0, 2, 16384, &[(2, 500.0)]);
        for before in [None, Some(1), Some(2)] {
            m.decided.clear();
            if let Some(n) = before {
                m.decided(16384, n);
            }
            let d = decide(&gpus(2, 16384, Some(1056)), &m, &o);
            assert!(matches!(d, Decision::Whole(_)), "{before:?}: {d:?}");
        }
    }

    /// A node's first GPU measurement (cold) is not believed: the next decides.
    #[test]
    fn a_first_gpu_measurement_is_not_believed() {
        let mut m = Measured::default();
        m.record(Sample { devices: 1, blocks: 16384, kernel_ns: 49_000.0, gpus: true });
        assert_eq!((m.ns_per_block, m.samples), (None, 1));
        let d = decide(&gpus(2, 16384, Some(1056)), &m, &fresh());
        assert!(matches!(d, Decision::Whole(Why::Unmeasured { .. })), "{d:?}");
        m.record(Sample { devices: 1, blocks: 16384, kernel_ns: 16_384.0, gpus: true });
        assert_eq!(m.ns_per_block, Some(1.0));
        let d = decide(&gpus(2, 16384, Some(1056)), &m, &fresh());
        assert!(matches!(d, Decision::Whole(Why::TooShort { .. })), "{d:?}");
    }

    /// GPU launches are timed only where a measurement can change the decision, and a
    /// launch-bound loop's kernels rarely.
    #[test]
    fn gpu_launches_are_timed_where_it_can_matter() {
        let mut m = Measured::default();
        let timed = |m: &Measured, d: &Decision| {
            (0..1024).filter(|&k| sample_gpu(&Measured { launches: k, ..m.clone() }, d)).count()
        };
        let under = Decision::Whole(Why::UnderOneWave { blocks: 256, wave: 1056 });
        assert_eq!(timed(&m, &under), 0);
        let tiny = Decision::Whole(Why::TooShort { kernel_ns: 3_000.0, floor_ns: GPU_MIN_SPLIT_NS });
        assert_eq!(timed(&m, &tiny), 1);
        let later = |k: u64| sample_gpu(&Measured { launches: k, ..m.clone() }, &tiny);
        assert!(later(4096) && !later(4095) && !later(4097));
        let near = Decision::Whole(Why::TooShort { kernel_ns: 60_000.0, floor_ns: GPU_MIN_SPLIT_NS });
        assert_eq!(timed(&m, &near), 4 + 1024 / 16 - 1);
        m.launches = 0;
        assert!(sample_gpu(&m, &Decision::Split(2)));
        // Not while a timed launch's measurement is still to come.
        m.probing = true;
        assert!(!sample_gpu(&m, &Decision::Split(2)));
    }

    /// A settled decision covers its launch shape's next launches, one each, and no other
    /// shape's; a far-too-short kernel's is due back at its next sample.
    #[test]
    fn settled_decisions_cover_their_launches() {
        let r = Records::default();
        assert!(!r.take_settled(1, 3, 100));
        r.settle(1, 3, 100, 2);
        assert!(!r.take_settled(1, 3, 101), "another shape");
        assert!(!r.take_settled(0, 3, 100), "another node");
        assert!(r.take_settled(1, 3, 100) && r.take_settled(1, 3, 100));
        assert!(!r.take_settled(1, 3, 100), "used up");
        assert!(!r.take_settled(7, 3, 100), "a node past the module's");
        let tiny = Decision::Whole(Why::TooShort { kernel_ns: 3_000.0, floor_ns: GPU_MIN_SPLIT_NS });
        // After launch 1 (counted), 4094 are skipped (counted in), and the next decision,
        // counting one more, is launch 4096: sampled.
        let skip = Records::settles(&tiny, 1);
        assert_eq!(skip, 4094);
        let m = Measured { launches: 1 + skip + 1, ..Measured::default() };
        assert!(sample_gpu(&m, &tiny));
        assert_eq!(Records::settles(&tiny, 4095), 0);
        let near = Decision::Whole(Why::TooShort { kernel_ns: 60_000.0, floor_ns: GPU_MIN_SPLIT_NS });
        assert_eq!(Records::settles(&near, 5), 0);
        assert_eq!(Records::settles(&Decision::Split(2), 5), 0);
        assert!(Records::settles(&Decision::Whole(Why::UnderOneWave { blocks: 4, wave: 1056 }), 5) > 1000);
        // A split far from paying is asked again at the next sample; one close to paying, and
        // the first launches, at every launch.
        let far = Decision::Whole(Why::DoesNotPay { kernel_ns: 0.0, devices: 2, saved_ns: 0.0, cost_ns: 40_000.0 });
        assert_eq!(Records::settles(&far, 1), 0);
        let skip = Records::settles(&far, 20);
        assert_eq!(skip, 11);
        assert!(sample_gpu(&Measured { launches: 20 + skip + 1, ..Measured::default() }, &far));
        let close =
            Decision::Whole(Why::DoesNotPay { kernel_ns: 1e6, devices: 2, saved_ns: 20_000.0, cost_ns: 40_000.0 });
        assert_eq!(Records::settles(&close, 20), 0);
        assert!(
            Records::counts_skipped(&far)
                && !Records::counts_skipped(&Decision::Whole(Why::UnderOneWave { blocks: 4, wave: 1056 }))
        );
    }

    /// One device, or none measured: nothing to decide.
    #[test]
    fn one_device_always_runs_its_launch() {
        assert_eq!(decide(&gpus(1, 10, Some(1000)), &Measured::default(), &fresh()), Decision::Split(1));
    }
}
