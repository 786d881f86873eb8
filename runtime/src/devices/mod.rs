//! Devices: where partitions run and where copies of buffers live.
//!
//! The host always runs the graph's interpreter and the nodes that are not launch units
//! ([`host`]). Launch units (GPU-shaped nodes) run on the devices of the run:
//! - `cuda`: the machine's GPUs ([`cuda`]), each a device (`CUDA_VISIBLE_DEVICES` applies);
//! - `cpu:N`: N simulated devices ([`sim`]), each with its OWN memory (a partition reading the
//!   host's copy by mistake reads poison, so such bugs fail tests) and its share of the cores;
//! - `cpu` (and no GPU found): none; units run on the host like every other node.
//!
//! Every device implements [`Device`]: allocations, copies (host to device, device to host,
//! device to device, 2-D strided) ordered on the device's stream, and a way to wait for them.
//! The simulated device runs its stream synchronously, which is one valid ordering; the CUDA
//! device implements the same operations with the driver's streams and events.
//!
//! `HPVM_MGPU_DEVICES` chooses (`cpu`, `cpu:N`, `cuda` (every GPU), `cuda:N` (the first N);
//! unset: every GPU if there is one).
//! `dry:N` (benchmarks only) gives N dry-run devices: the runtime plans and caches as for
//! `cpu:N` but allocates, copies and runs nothing, so what is timed is its own work.
//!
//! Under ranks ([`crate::ranks`]) the run's devices are every rank's, rank-major
//! ([`Devices::owner`]); another rank's device is a stand-in here ([`SimDevice::remote`]):
//! plans name it, nothing of it runs here, and only [`Devices::is_local`] devices are
//! touched.

pub mod addresses;
pub(crate) mod combine;
pub mod cuda;
pub(crate) mod held;
pub mod host;
pub mod in_place;
pub mod inflight;
mod limits;
pub mod opening;
pub mod params;
pub mod sim;
pub mod staging;
pub mod stamps;
pub mod topology;

use crate::fatal;
use cuda::{Cuda, Gpus};
pub use limits::DeviceLimits;
use sim::SimDevice;
use std::sync::OnceLock;

/// Most devices a run can have (the coherence maps' holder sets are 128-bit, bit 0 the host).
pub const MAX_DEVICES: usize = 127;

/// The bytes a device's copy of a buffer has past the buffer's end, at least (whole copies;
/// simulated devices' reservations, where it is read-only zero pages that cost no memory):
/// more than `cudaMalloc` rounds an allocation up to (512 bytes), and a row of most 2-D
/// grids. A kernel reading a little past a buffer, as a GPU tolerates, reads there on every
/// device alike. (GPUs' sparse reservations have none yet.)
pub const SLACK: u64 = 64 << 10;

/// Who holds or receives data: the host or device `k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Place {
    Host,
    Device(usize),
}

impl Place {
    /// Row of the byte-count tables in the statistics: 0 the host, `1 + k` device `k`.
    pub fn index(self) -> usize {
        match self {
            Place::Host => 0,
            Place::Device(k) => 1 + k,
        }
    }
}

/// One copy of a rectangle of bytes: `rows` rows of `row_bytes` bytes, consecutive rows
/// `pitch` bytes apart at both ends (a contiguous run is one row). Addresses are the host's
/// (for [`Place::Host`]) or the device's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Copy {
    pub src: Place,
    pub src_addr: u64,
    pub dst: Place,
    pub dst_addr: u64,
    pub rows: u64,
    pub row_bytes: u64,
    pub pitch: u64,
}

impl Copy {
    pub fn bytes(&self) -> u64 {
        self.rows * self.row_bytes
    }

    /// The device whose stream carries the copy: the receiving device, or the sending one
    /// when the host receives.
    pub fn executor(&self) -> usize {
        match (self.dst, self.src) {
            (Place::Device(k), _) | (Place::Host, Place::Device(k)) => k,
            (Place::Host, Place::Host) => unreachable!("host-to-host copies are never planned"),
        }
    }
}

/// What the memory manager and the partitioned launch need of a device.
pub trait Device: Send + Sync {
    fn name(&self) -> &str;
    /// A new allocation of `bytes` on the device; its address.
    fn alloc(&self, bytes: usize) -> Result<u64, String>;
    /// Frees an address `alloc` returned, once.
    fn free(&self, addr: u64) -> Result<(), String>;
    /// Page-locks host memory for faster copies; false when not done (copies still work).
    fn pin_host(&self, _host: *mut u8, _bytes: usize) -> bool {
        false
    }
    fn unpin_host(&self, _host: *mut u8) {}
    /// Sparse copies ([`crate::memory::residency`]): the size of the granules the device backs
    /// reserved addresses with, or `None` where its copies are whole allocations.
    fn granule(&self) -> Option<u64> {
        None
    }
    /// Reserves `bytes` (a multiple of the granule) of addresses, backed by nothing yet.
    fn reserve(&self, _bytes: u64) -> Result<u64, String> {
        Err(format!("{}: no sparse copies", self.name()))
    }
    /// Backs `[addr, addr + bytes)` (granules of one reservation) with memory.
    fn map(&self, _addr: u64, _bytes: u64) -> Result<(), String> {
        Err(format!("{}: no sparse copies", self.name()))
    }
    /// Gives the memory behind `[addr, addr + bytes)` back; the addresses stay reserved.
    fn unmap(&self, _addr: u64, _bytes: u64) -> Result<(), String> {
        Err(format!("{}: no sparse copies", self.name()))
    }
    /// Frees a reservation [`Device::reserve`] made (its granules given back first).
    fn unreserve(&self, _addr: u64) -> Result<(), String> {
        Err(format!("{}: no sparse copies", self.name()))
    }
    /// Enqueues `c` on this device's stream (this device is `c.executor()`), after everything
    /// enqueued there before. The source must stay unchanged until [`Device::synchronize`].
    fn copy(&self, c: &Copy) -> Result<(), String>;
    /// Waits for everything enqueued on the device.
    fn synchronize(&self) -> Result<(), String>;
    /// Enqueues setting `bytes` bytes of device memory at `addr` to `byte` (CUDA's
    /// `cudaMemset`, done where the data lives); an error where the device cannot.
    fn fill(&self, _addr: u64, _byte: u8, _bytes: u64) -> Result<(), String> {
        Err(format!("{}: no fills", self.name()))
    }
    /// Enqueues setting the `elements` elements at `addr` to a reduction's identity
    /// ([`dashdb::Reduction::identity`]).
    fn fill_identity(&self, _addr: u64, _how: dashdb::Reduction, _elements: u64) -> Result<(), String> {
        Err(format!("{}: no reductions", self.name()))
    }
    /// Enqueues `dst[i] = dst[i] op src[i]` for the `elements` elements of `how`'s type at
    /// `dst` and `src`, both in this device's memory: one device's partial result of a
    /// reduction combined into another's.
    fn combine(&self, _dst: u64, _src: u64, _how: dashdb::Reduction, _elements: u64) -> Result<(), String> {
        Err(format!("{}: no reductions", self.name()))
    }
    /// Enqueues `dst[i] = src[i]` for each of the `bytes` bytes where `src[i] != twin[i]`, all
    /// three in this device's memory: another device's copy of a merged buffer
    /// (`dashdb::WriteKind::Merged`), whose changes against the twin (the buffer as it was
    /// before the launch) are taken into this device's.
    fn merge_changed(&self, _dst: u64, _src: u64, _twin: u64, _bytes: u64) -> Result<(), String> {
        Err(format!("{}: no merged writes", self.name()))
    }
}

/// The devices of this run.
#[derive(Default)]
pub struct Devices {
    /// This process's GPUs, when this run uses them (device `k` is `gpus[k - gpu_base]`;
    /// see [`Devices::gpu`]).
    pub gpus: Vec<Cuda>,
    /// Under ranks on GPUs: the index in the run of this rank's first GPU (else 0).
    pub gpu_base: usize,
    /// Under ranks on GPUs: stand-ins for the devices of the run, used for other ranks' GPUs.
    pub proxies: Vec<SimDevice>,
    /// Pairs (i, j) of GPUs where i reads j's memory directly.
    pub peer: Vec<(usize, usize)>,
    /// Simulated devices (`cpu:N`).
    pub sims: Vec<SimDevice>,
    /// The cost of copying between devices `i` and `j` ([`topology`]; empty but on GPUs).
    pub link_cost: Vec<Vec<u32>>,
    /// The devices in the order a split launch's partitions take them ([`topology`]).
    pub order: Vec<usize>,
    /// GPU nodes run on the host because no GPU was found (not because the user chose so).
    pub no_gpu_found: bool,
    /// Under ranks ([`crate::ranks`]): the rank holding each device (empty in a run of one
    /// process, where every device is this process's).
    pub owner: Vec<usize>,
    /// This process's rank (0 in a run of one process).
    pub rank: usize,
}

impl Devices {
    /// The number of devices holding copies of buffers (indices of [`Place::Device`]).
    pub fn count(&self) -> usize {
        if self.gpus.is_empty() {
            self.sims.len()
        } else if !self.owner.is_empty() {
            self.owner.len()
        } else {
            self.gpus.len()
        }
    }

    /// The rank holding device `k` (this one in a run of one process).
    pub fn owner(&self, k: usize) -> usize {
        self.owner.get(k).copied().unwrap_or(self.rank)
    }

    /// Whether this process holds device `k` (runs its partitions, has its memory).
    pub fn is_local(&self, k: usize) -> bool {
        self.owner(k) == self.rank
    }

    /// Whether some devices are other ranks' ([`crate::ranks`]): `owner` is filled only in a
    /// run of several ranks.
    pub fn spans_ranks(&self) -> bool {
        !self.owner.is_empty()
    }

    /// How many devices of [`Devices::order`], from its start, are open: a launch splits over
    /// those only ([`opening`]). Simulated devices, and other ranks' devices, are always open.
    pub fn ready(&self) -> usize {
        if self.gpus.is_empty() || self.spans_ranks() {
            return self.order.len();
        }
        self.order.iter().take_while(|&&k| self.gpu(k).is_open()).count()
    }

    /// Whether device `k` is open ([`Devices::ready`]).
    pub fn is_open(&self, k: usize) -> bool {
        self.gpus.is_empty() || !self.is_local(k) || self.gpu(k).is_open()
    }

    /// Whether the devices are GPUs.
    pub fn on_gpus(&self) -> bool {
        !self.gpus.is_empty()
    }

    /// Device `k` (`k < count()`): under ranks, another rank's is a stand-in.
    pub fn get(&self, k: usize) -> &dyn Device {
        if self.gpus.is_empty() {
            &self.sims[k]
        } else if self.is_local(k) {
            self.gpu(k)
        } else {
            &self.proxies[k]
        }
    }

    /// GPU `k` of the run, which must be this process's (`is_local(k)`, on a GPU run).
    pub fn gpu(&self, k: usize) -> &Cuda {
        &self.gpus[k - self.gpu_base]
    }

    /// The run's indices of this process's GPUs.
    pub fn local_gpus(&self) -> std::ops::Range<usize> {
        self.gpu_base..self.gpu_base + self.gpus.len()
    }

    /// A description for messages and statistics.
    pub fn describe(&self) -> String {
        if self.spans_ranks() {
            let kind = match (self.gpus.first(), self.sims.first()) {
                (Some(g), _) => format!("GPUs ({})", g.name),
                (None, Some(s)) if s.is_dry() => "dry-run devices (nothing runs)".into(),
                _ => "simulated CPU devices".into(),
            };
            let ranks = self.owner.iter().max().map_or(1, |r| r + 1);
            let mine: Vec<String> = (0..self.count()).filter(|&k| self.is_local(k)).map(|k| k.to_string()).collect();
            return format!(
                "{} {kind} over {ranks} ranks (rank {} holds device{} {}){}",
                self.count(),
                self.rank,
                if mine.len() == 1 { "" } else { "s" },
                mine.join(", "),
                self.describe_order()
            );
        }
        if let Some(g) = self.gpus.first() {
            let n = self.gpus.len();
            let pairs = n * (n - 1);
            let peer = match self.peer.len() {
                _ if n == 1 => String::new(),
                p if p == pairs => ", peer access between all".to_string(),
                0 => ", no peer access (copies between GPUs go through the host)".to_string(),
                p => format!(", peer access for {p} of {pairs} ordered pairs"),
            };
            return format!("{n} GPU{} ({}{peer}){}", if n == 1 { "" } else { "s" }, g.name, self.describe_order());
        }
        let order = self.describe_order();
        match self.sims.len() {
            0 => "the host only".to_string(),
            n if self.sims[0].is_dry() => format!("{n} dry-run devices (nothing runs){order}"),
            n => format!(
                "{n} simulated CPU device{} ({} worker thread{} each){order}",
                if n == 1 { "" } else { "s" },
                self.sims[0].threads(),
                if self.sims[0].threads() == 1 { "" } else { "s" }
            ),
        }
    }

    /// The one device a CUDA program sees: the GPUs combined, or the host's cores. Under
    /// ranks, every rank's devices: memory and multiprocessors are the sums over the ranks
    /// (so every rank sees the same device, and every rank must ask, as it does when all run
    /// the same program).
    pub fn limits(&self) -> Result<DeviceLimits, String> {
        let Some(w) = crate::ranks::world().filter(|w| w.size > 1) else { return self.local_limits() };
        // Gathered once: threads of one rank asking at once must not pair up their gathers
        // differently on different ranks.
        static OVER_RANKS: OnceLock<Result<DeviceLimits, String>> = OnceLock::new();
        OVER_RANKS.get_or_init(|| self.limits_over(w)).clone()
    }

    /// [`Devices::limits`] under ranks.
    fn limits_over(&self, w: &crate::ranks::World) -> Result<DeviceLimits, String> {
        let mine = self.local_limits();
        let (memory, processors) = mine.as_ref().map_or((0, 0), |l| (l.total_memory, u64::from(l.multiprocessors)));
        let memory: u64 = w.allgather(crate::ranks::Step::Limits, memory).iter().sum();
        let processors: u64 = w.allgather(crate::ranks::Step::Limits, processors).iter().sum();
        let mut l = mine?;
        l.total_memory = memory;
        l.multiprocessors = processors.min(u64::from(u32::MAX)) as u32;
        Ok(l)
    }

    /// [`Devices::limits`] of this process's devices.
    fn local_limits(&self) -> Result<DeviceLimits, String> {
        if !self.gpus.is_empty() {
            let each = self.gpus.iter().map(Cuda::limits).collect::<Result<Vec<_>, _>>()?;
            return Ok(DeviceLimits::combine(&each));
        }
        let threads = match self.sims.iter().find(|s| !s.is_remote()) {
            Some(s) => s.threads() * self.sims.iter().filter(|s| !s.is_remote()).count(),
            None => crate::pool::pool().current_num_threads(),
        };
        Ok(DeviceLimits::host(threads))
    }

    /// ", partitions on devices 0, 2, 1, 3", where that is not their own order.
    fn describe_order(&self) -> String {
        if self.order.iter().enumerate().all(|(k, &d)| k == d) {
            return String::new();
        }
        let list: Vec<String> = self.order.iter().map(|d| d.to_string()).collect();
        format!(", partitions on devices {} in turn", list.join(", "))
    }
}

/// The thread asking the GPUs' properties ahead ([`ask_limits_ahead`]), until joined.
static LIMITS_AHEAD: std::sync::Mutex<Option<std::thread::JoinHandle<()>>> = std::sync::Mutex::new(None);

/// Asks the driver for every GPU's properties on a thread of its own, so that the program's
/// first launch, which needs them, finds them asked: on an H200 the 24 attribute queries took
/// 0.96-1.5 ms, and a CUDA program's first launch took 1.0-1.45 ms against nvcc's build's
/// 0.16 (0.14-0.16 since). No context is needed for them. Under ranks the gathered limits are still
/// gathered at first use, by the thread that uses them.
pub fn ask_limits_ahead() {
    if devices().gpus.is_empty() {
        return;
    }
    let spawned = std::thread::Builder::new().name("hpvm-mgpu-limits".into()).spawn(|| {
        for g in &devices().gpus {
            let _ = g.limits();
        }
    });
    if let Ok(h) = spawned {
        *LIMITS_AHEAD.lock().unwrap_or_else(|e| e.into_inner()) = Some(h);
    }
}

/// Waits for [`ask_limits_ahead`]'s thread: the driver's exit handlers must not run under it.
pub fn limits_asked() {
    let h = LIMITS_AHEAD.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(h) = h {
        let _ = h.join();
    }
}

pub fn devices() -> &'static Devices {
    static DEVICES: OnceLock<Devices> = OnceLock::new();
    DEVICES.get_or_init(|| {
        // Opening the devices starts a session (HPVM-C's `__hpvm__init`, a CUDA program's
        // first call): from here a crash in a leaf is named.
        crate::crash::install();
        let text = std::env::var("HPVM_MGPU_DEVICES").unwrap_or_default();
        let choice = parse_choice(&text).unwrap_or_else(|e| fatal(&format!("HPVM_MGPU_DEVICES={text}: {e}")));
        let none = Devices::default;
        let on = |g: Gpus| Devices { gpus: g.gpus, peer: g.peer, link_cost: g.link_cost, ..none() };
        let ranks = crate::ranks::world().filter(|w| w.size > 1);
        let all = opening::mode() == opening::Mode::Start;
        let mut devs = match choice {
            _ if ranks.is_some() => across_ranks(choice, ranks.expect("some"), &text),
            Choice::Cpu => none(),
            Choice::Sim(n) => {
                let threads = (crate::pool::pool().current_num_threads() / n).max(1);
                Devices { sims: (0..n).map(|k| SimDevice::new(k, threads)).collect(), ..none() }
            }
            Choice::Dry(n) => Devices { sims: (0..n).map(SimDevice::dry).collect(), ..none() },
            Choice::Auto => match cuda::open(None, all) {
                Ok(Some(g)) => on(g),
                Ok(None) => Devices { no_gpu_found: true, ..none() },
                Err(e) => {
                    eprintln!("hpvm-mgpu: the GPU is unusable ({e}); GPU nodes run on the CPU");
                    Devices { no_gpu_found: true, ..none() }
                }
            },
            Choice::Cuda(n) => match cuda::open(n, all) {
                Ok(Some(g)) => on(g),
                Ok(None) => fatal(&format!("HPVM_MGPU_DEVICES={text} but no CUDA GPU was found")),
                Err(e) => fatal(&format!("HPVM_MGPU_DEVICES={text}: {e}")),
            },
        };
        devs.order = match std::env::var("HPVM_MGPU_ORDER") {
            Ok(v) if !v.trim().is_empty() && devs.count() > 0 => {
                topology::parse_order(&v, devs.count()).unwrap_or_else(|e| fatal(&format!("HPVM_MGPU_ORDER={v}: {e}")))
            }
            _ if devs.link_cost.len() == devs.count() => topology::chain_order(&devs.link_cost),
            _ => (0..devs.count()).collect(),
        };
        // The first GPU of the order takes every launch that runs whole: it opens with the
        // run, as device 0 did (memory from `cudaMalloc` starts there).
        if let Some(&first) = devs.order.first().filter(|_| devs.on_gpus() && !devs.spans_ranks()) {
            if let Err(e) = cuda::open_in(&devs.gpus, first - devs.gpu_base) {
                fatal(&format!("opening {}: {e}", devs.gpus[first - devs.gpu_base].label()));
            }
        }
        devs
    })
}

/// The devices of a run over ranks: each rank opens its own (`HPVM_MGPU_DEVICES` applies per
/// rank, as does `CUDA_VISIBLE_DEVICES`), and the ranks' lists, gathered, make one list,
/// rank-major. Every rank must choose the same kind of device. Another rank's device is a
/// stand-in here ([`SimDevice::remote`]) with that device's granule, so that every rank plans
/// sparse copies alike.
fn across_ranks(choice: Choice, w: &crate::ranks::World, text: &str) -> Devices {
    const KINDS: [&str; 4] = ["the host only (cpu)", "simulated devices (cpu:N)", "dry-run devices (dry:N)", "GPUs"];
    let gpus = match choice {
        // Every rank opens all its GPUs now: each launch must split alike on every rank.
        Choice::Cuda(n) => match cuda::open(n, true) {
            Ok(Some(g)) => Some(g),
            Ok(None) => fatal(&format!("HPVM_MGPU_DEVICES={text} but rank {} found no CUDA GPU", w.rank)),
            Err(e) => fatal(&format!("HPVM_MGPU_DEVICES={text}: {e}")),
        },
        // A GPU if this rank has one, else the host.
        Choice::Auto => cuda::open(None, true).ok().flatten(),
        _ => None,
    };
    let (kind, mine) = match (choice, &gpus) {
        (_, Some(g)) => (3u64, g.gpus.len()),
        (Choice::Sim(n), _) => (1, n),
        (Choice::Dry(n), _) => (2, n),
        _ => (0, 0),
    };
    let all = w.allgather(crate::ranks::Step::Devices, kind << 32 | mine as u64);
    let kinds: Vec<u64> = all.iter().map(|v| v >> 32).collect();
    if let Some(r) = (0..w.size).find(|&r| kinds[r] != kinds[0]) {
        fatal(&format!(
            "HPVM_MGPU_DEVICES={text}: under mpirun every rank needs the same kind of devices; rank 0 has {}, rank {r} {}",
            KINDS[kinds[0] as usize], KINDS[kinds[r] as usize]
        ));
    }
    let counts: Vec<usize> = all.iter().map(|v| (v & 0xffff_ffff) as usize).collect();
    let total: usize = counts.iter().sum();
    if total > MAX_DEVICES {
        fatal(&format!(
            "HPVM_MGPU_DEVICES={text}: the ranks have {total} devices together; a run has at most {MAX_DEVICES}"
        ));
    }
    let owner: Vec<usize> = counts.iter().enumerate().flat_map(|(r, &n)| std::iter::repeat_n(r, n)).collect();
    let base: usize = counts[..w.rank].iter().sum();
    let none = Devices { gpu_base: base, owner: owner.clone(), rank: w.rank, ..Devices::default() };
    if let Some(mut g) = gpus {
        // Each rank's granule (0: none), for its GPUs' stand-ins on the other ranks (a rank's
        // GPUs share one: every NVIDIA GPU so far reports 2 MiB).
        let granule = g.gpus.first().and_then(|c| c.granule()).unwrap_or(0);
        let granules = w.allgather(crate::ranks::Step::Granule, granule);
        for c in &mut g.gpus {
            c.index += base;
        }
        let peer = g.peer.iter().map(|&(i, j)| (i + base, j + base)).collect();
        let proxies = (0..total)
            .map(|k| SimDevice::remote(k, owner[k], "GPU ", Some(granules[owner[k]]).filter(|&g| g > 0)))
            .collect();
        return Devices { gpus: g.gpus, peer, proxies, ..none };
    }
    // Each rank's granule (`HPVM_MGPU_GRANULE` is read per rank), for its stand-ins here.
    let granules = w.allgather(crate::ranks::Step::Granule, if kinds[0] == 1 { sim::sim_granule() } else { 0 });
    let threads = (crate::pool::pool().current_num_threads() / mine.max(1)).max(1);
    let dry = kinds[0] == 2;
    let sims = (0..total)
        .map(|k| match (owner[k] == w.rank, dry) {
            (true, true) => SimDevice::dry(k),
            (true, false) => SimDevice::new(k, threads),
            (false, true) => SimDevice::remote(k, owner[k], "dry", None),
            (false, false) => SimDevice::remote(k, owner[k], "sim", Some(granules[owner[k]])),
        })
        .collect();
    Devices { sims, ..none }
}

/// `HPVM_MGPU_PIN=on`: the program's buffers of 1 MiB or more are page-locked on their first
/// trip to a GPU and copied directly. Off (the default), host copies go through the GPUs'
/// staging slots ([`staging`]): locking costs more than it saves unless a buffer crosses many
/// times, and the program's pages stay as the system made them.
pub fn pinning() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| match std::env::var("HPVM_MGPU_PIN").unwrap_or_default().trim() {
        "on" => true,
        "" | "off" => false,
        other => fatal(&format!("HPVM_MGPU_PIN={other}: expected `on` or `off`")),
    })
}

/// `64M` → 64 MiB; `K`, `M`, `G`, `T` (powers of 1024), optionally followed by `B` or `iB`;
/// plain digits are bytes.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let t = t.strip_suffix("iB").or_else(|| t.strip_suffix('B')).unwrap_or(t);
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => (&t[..i], &t[i..]),
        None => (t, ""),
    };
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return None,
    };
    digits.parse::<u64>().ok()?.checked_mul(1 << shift).filter(|&b| b > 0)
}

/// Says once, when a program with GPU nodes first runs without a GPU, where they run.
pub fn notice_gpu_nodes_on_cpu() {
    static SAID: std::sync::Once = std::sync::Once::new();
    if devices().no_gpu_found {
        SAID.call_once(|| eprintln!("hpvm-mgpu: no GPU found; GPU nodes run on the CPU"));
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Choice {
    /// A GPU if there is one, else the host.
    Auto,
    /// The host only.
    Cpu,
    /// N simulated devices.
    Sim(usize),
    /// N dry-run devices.
    Dry(usize),
    /// The first N GPUs (every one when `None`).
    Cuda(Option<usize>),
}

fn parse_choice(choice: &str) -> Result<Choice, String> {
    let count = |n: &str, what: &str| -> Result<usize, String> {
        match n.trim().parse::<usize>() {
            Ok(k) if (1..=MAX_DEVICES).contains(&k) => Ok(k),
            _ => Err(format!("the number of {what} must be between 1 and {MAX_DEVICES}, not `{n}`")),
        }
    };
    match choice.trim() {
        "" => Ok(Choice::Auto),
        "cpu" => Ok(Choice::Cpu),
        "cuda" => Ok(Choice::Cuda(None)),
        other => match other.split_once(':') {
            Some(("cpu", n)) => Ok(Choice::Sim(count(n, "simulated devices")?)),
            Some(("dry", n)) => Ok(Choice::Dry(count(n, "dry-run devices")?)),
            Some(("cuda", n)) => Ok(Choice::Cuda(Some(count(n, "GPUs")?))),
            _ => Err(format!("unsupported device choice `{other}` (expected `cpu`, `cpu:N`, `cuda` or `cuda:N`)")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_choice, parse_size, Choice};

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64M"), Some(64 << 20));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size(" 512KiB "), Some(512 << 10));
        assert_eq!(parse_size("6MB"), Some(6 << 20));
        assert_eq!(parse_size("4096"), Some(4096));
        for bad in ["", "0", "M", "12X", "-1G", "1.5G", "99999999999T"] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
    }

    #[test]
    fn device_choices() {
        assert_eq!(parse_choice(""), Ok(Choice::Auto));
        assert_eq!(parse_choice("cpu"), Ok(Choice::Cpu));
        assert_eq!(parse_choice("cpu:1"), Ok(Choice::Sim(1)));
        assert_eq!(parse_choice("cpu:8"), Ok(Choice::Sim(8)));
        assert_eq!(parse_choice("dry:16"), Ok(Choice::Dry(16)));
        assert_eq!(parse_choice("cuda"), Ok(Choice::Cuda(None)));
        assert_eq!(parse_choice("cuda:2"), Ok(Choice::Cuda(Some(2))));
        assert!(parse_choice("tpu").is_err_and(|e| e.contains("unsupported")));
        for bad in ["cpu:0", "cpu:128", "cpu:x", "cpu:", "cuda:0", "cuda:999999999999"] {
            assert!(parse_choice(bad).is_err_and(|e| e.contains("between 1 and")), "{bad}");
        }
    }
}

thread_local! {
    /// Whether this thread is making a cooperative launch ([`as_cooperative_launch`]).
    static COOPERATIVE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` (a CUDA launch) as a cooperative launch (`cudaLaunchCooperativeKernel`): its
/// blocks may wait for one another at the grid's barrier (cooperative groups'
/// `this_grid().sync()`), so all of them run at once, on one device, never split, held,
/// replayed or made part of a graph. Here, at the devices, because a GPU runs it through the
/// driver's cooperative launch; the layers above read it too.
pub fn as_cooperative_launch<R>(f: impl FnOnce() -> R) -> R {
    COOPERATIVE.with(|c| c.set(true));
    let r = f();
    COOPERATIVE.with(|c| c.set(false));
    r
}

/// Whether the calling thread is inside [`as_cooperative_launch`].
pub fn cooperative() -> bool {
    COOPERATIVE.with(|c| c.get())
}
