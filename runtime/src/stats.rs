//! Statistics, reported at `__hpvm__cleanup`: `HPVM_MGPU_STATS=1` prints them to stderr,
//! `HPVM_MGPU_STATS=FILE.json` writes them as JSON (schema: [`Report`]).
//!
//! Per node: runs, instances, wall time; for launch units, launches on the devices, how many
//! were split and over how many devices, plan and copy-plan cache hits and misses, time in
//! interval computation, copy planning, copies and partitions (the Mekong thesis's runtime
//! breakdown, its section 4), and bytes moved. Globally: bytes per (source, destination).
//!
//! The layers below report global events through [`crate::sink`], whose [`Sink`] this module
//! installs ([`install`]); per-node counters are read from each loaded module's records.

use crate::devices::{devices, MAX_DEVICES};
use crate::launch;
use crate::sink::{self, Event, Sink};
use serde::Serialize;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Time `__hpvm__init` spent opening the devices (a GPU's context, peer access).
pub static DEVICE_SETUP_NANOS: AtomicU64 = AtomicU64::new(0);
static SESSION_START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
/// GPU modules loaded from the build's machine code and from PTX (the driver's JIT), and
/// the time loading took, summed over GPUs ([`module_loaded`]).
static MODULES_SASS: AtomicU64 = AtomicU64::new(0);
static MODULES_JIT: AtomicU64 = AtomicU64::new(0);
static MODULE_LOAD_NANOS: AtomicU64 = AtomicU64::new(0);
/// GPU contexts opened, and the time opening them took, on whichever thread opened them.
static GPUS_OPENED: AtomicU64 = AtomicU64::new(0);
static GPU_OPEN_NANOS: AtomicU64 = AtomicU64::new(0);
/// Time launches waited for GPUs still opening.
static GPU_WAIT_NANOS: AtomicU64 = AtomicU64::new(0);
/// Time asking the driver for the GPUs' properties (`devices::Devices::limits`), on
/// whichever thread asked, summed over GPUs.
static GPU_LIMITS_NANOS: AtomicU64 = AtomicU64::new(0);
/// The host's time in a CUDA program's first kernel launch, from the API's entry to its
/// return (0 until it returns).
static FIRST_LAUNCH_NANOS: AtomicU64 = AtomicU64::new(0);

/// Times the program's first kernel launch while alive ([`FIRST_LAUNCH_NANOS`]); later
/// launches pay one relaxed load.
pub struct FirstLaunch(Option<std::time::Instant>);

impl FirstLaunch {
    pub fn start() -> FirstLaunch {
        static STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        let first = !STARTED.load(Ordering::Relaxed) && !STARTED.swap(true, Ordering::Relaxed);
        FirstLaunch(first.then(std::time::Instant::now))
    }
}

impl Drop for FirstLaunch {
    fn drop(&mut self) {
        if let Some(t) = self.0 {
            FIRST_LAUNCH_NANOS.store(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }
}

/// A GPU loaded a module, from machine code (`sass`) or by compiling its PTX, in `nanos`.
fn module_loaded(sass: bool, nanos: u64) {
    (if sass { &MODULES_SASS } else { &MODULES_JIT }).fetch_add(1, Ordering::Relaxed);
    MODULE_LOAD_NANOS.fetch_add(nanos, Ordering::Relaxed);
}

/// Marks `__hpvm__init`: the report's session time runs from here.
pub fn session_started() {
    SESSION_START.get_or_init(std::time::Instant::now);
}

/// The global counters, filled by the events the layers below report.
struct Counters {
    launches: AtomicU64,
    stream_items: AtomicU64,
    /// Bytes copied from place `i` to place `j` (0 the host, `1 + k` device `k`).
    bytes: [[AtomicU64; MAX_DEVICES + 1]; MAX_DEVICES + 1],
    bytes_requested: AtomicU64,
    nanos_to_host: AtomicU64,
    bytes_pinned: AtomicU64,
    nanos_pinning: AtomicU64,
    host_write_scans: AtomicU64,
    bytes_host_written: AtomicU64,
    nanos_host_write_scans: AtomicU64,
    bytes_watched: AtomicU64,
    nanos_watch_start: AtomicU64,
    rank_exchanges: AtomicU64,
    bytes_sent_to_ranks: AtomicU64,
    bytes_received_from_ranks: AtomicU64,
    nanos_rank_exchanges: AtomicU64,
    rank_agreements: AtomicU64,
    nanos_rank_agreements: AtomicU64,
}

static COUNTERS: Counters = Counters {
    launches: AtomicU64::new(0),
    stream_items: AtomicU64::new(0),
    bytes: [const { [const { AtomicU64::new(0) }; MAX_DEVICES + 1] }; MAX_DEVICES + 1],
    bytes_requested: AtomicU64::new(0),
    nanos_to_host: AtomicU64::new(0),
    bytes_pinned: AtomicU64::new(0),
    nanos_pinning: AtomicU64::new(0),
    host_write_scans: AtomicU64::new(0),
    bytes_host_written: AtomicU64::new(0),
    nanos_host_write_scans: AtomicU64::new(0),
    bytes_watched: AtomicU64::new(0),
    nanos_watch_start: AtomicU64::new(0),
    rank_exchanges: AtomicU64::new(0),
    bytes_sent_to_ranks: AtomicU64::new(0),
    bytes_received_from_ranks: AtomicU64::new(0),
    nanos_rank_exchanges: AtomicU64::new(0),
    rank_agreements: AtomicU64::new(0),
    nanos_rank_agreements: AtomicU64::new(0),
};

impl Sink for Counters {
    fn record(&self, event: Event) {
        let add = |a: &AtomicU64, n: u64| {
            a.fetch_add(n, Ordering::Relaxed);
        };
        match event {
            Event::GraphLaunch => add(&self.launches, 1),
            Event::StreamItem => add(&self.stream_items, 1),
            Event::Copied { from, to, bytes } => add(&self.bytes[from][to], bytes),
            Event::Requested { bytes } => add(&self.bytes_requested, bytes),
            Event::ToHost { nanos } => add(&self.nanos_to_host, nanos),
            Event::PageLocked { bytes, nanos } => {
                add(&self.bytes_pinned, bytes);
                add(&self.nanos_pinning, nanos);
            }
            Event::HostWritesScanned { bytes, nanos } => {
                add(&self.host_write_scans, 1);
                add(&self.bytes_host_written, bytes);
                add(&self.nanos_host_write_scans, nanos);
            }
            Event::WatchStarted { bytes, nanos } => {
                add(&self.bytes_watched, bytes);
                add(&self.nanos_watch_start, nanos);
            }
            Event::ModuleLoaded { sass, nanos } => module_loaded(sass, nanos),
            Event::GpuOpened { nanos } => {
                GPUS_OPENED.fetch_add(1, Ordering::Relaxed);
                GPU_OPEN_NANOS.fetch_add(nanos, Ordering::Relaxed);
            }
            Event::WaitedForGpus { nanos } => {
                GPU_WAIT_NANOS.fetch_add(nanos, Ordering::Relaxed);
            }
            Event::GpuPropertiesAsked { nanos } => {
                GPU_LIMITS_NANOS.fetch_add(nanos, Ordering::Relaxed);
            }
            Event::CrossedRanks { sent, received, nanos } => {
                add(&self.rank_exchanges, 1);
                add(&self.bytes_sent_to_ranks, sent);
                add(&self.bytes_received_from_ranks, received);
                add(&self.nanos_rank_exchanges, nanos);
            }
            Event::RanksAgreed { nanos } => {
                add(&self.rank_agreements, 1);
                add(&self.nanos_rank_agreements, nanos);
            }
        }
    }
}

/// Makes the statistics the receiver of the runtime's events (idempotent).
pub fn install() {
    sink::install(&COUNTERS);
}

/// Where the report goes.
enum Destination {
    Print,
    Json(String),
}

/// `HPVM_MGPU_STATS`: `1` (or `yes`, `on`, `true`, `stderr`) prints the report; a path ending
/// in `.json` writes it there. Anything else is refused: a word meant as "on" must not become
/// a file, nor a typo a file beside the user's.
fn destination() -> Option<Result<Destination, String>> {
    let v = std::env::var("HPVM_MGPU_STATS").ok()?;
    Some(match v.trim() {
        "" | "0" | "no" | "off" | "false" => return None,
        "1" | "yes" | "on" | "true" | "stderr" => Ok(Destination::Print),
        path if path.ends_with(".json") => Ok(Destination::Json(path.to_string())),
        other => Err(format!(
            "HPVM_MGPU_STATS={other}: expected 1 (print the statistics) or a file name ending in .json; nothing written"
        )),
    })
}

/// Whether `path` may be (over)written with a report: it does not exist, or it holds one (a
/// JSON object with the report's `launches` and `nodes`). A file of the user's is never
/// replaced.
fn writable_report(path: &str) -> Result<(), String> {
    let text = match std::fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot read {path}: {e}")),
    };
    let report = serde_json::from_slice::<serde_json::Value>(&text)
        .ok()
        .filter(|v| v.get("launches").is_some() && v.get("nodes").is_some());
    match report {
        Some(_) => Ok(()),
        None => Err(format!("{path} exists and is not a statistics file; refusing to overwrite it")),
    }
}

/// Emits the report where `HPVM_MGPU_STATS` says, if anywhere.
pub fn emit() {
    match destination() {
        None => {}
        Some(Err(why)) => eprintln!("hpvm-mgpu: {why}"),
        Some(Ok(Destination::Print)) => eprint!("{}", report()),
        Some(Ok(Destination::Json(path))) => {
            // Under ranks, rank 0 writes PATH and rank R PATH.rankR.
            let path = match crate::ranks::world() {
                Some(w) if w.rank > 0 => format!("{path}.rank{}", w.rank),
                _ => path,
            };
            if let Err(why) = writable_report(&path) {
                eprintln!("hpvm-mgpu: cannot write the statistics: {why}");
                return;
            }
            let json = serde_json::to_string_pretty(&collect()).expect("the report serializes");
            if let Err(e) = std::fs::write(&path, json + "\n") {
                eprintln!("hpvm-mgpu: cannot write the statistics to {path}: {e}");
            }
        }
    }
}

#[derive(Serialize)]
pub struct Report {
    pub launches: u64,
    pub stream_items: u64,
    pub devices: String,
    pub device_count: usize,
    /// On GPUs, the cost of copying from GPU i to GPU j (the driver's link rank, 0 the best;
    /// 1000 without peer access), and the order partitions take the devices in.
    pub link_cost: Vec<Vec<u32>>,
    pub device_order: Vec<usize>,
    pub worker_threads: usize,
    pub nodes: Vec<NodeReport>,
    /// Every (source, destination) pair that moved bytes.
    pub bytes: Vec<Transfer>,
    pub bytes_requested_by_host: u64,
    /// Time copying buffers back to the host (requests, host nodes, cleanup).
    pub ms_to_host: f64,
    /// From `__hpvm__init` to the report (at `__hpvm__cleanup`): the program's share that
    /// the runtime serves, the devices' setup included.
    pub ms_session: f64,
    /// Of that, opening the devices (their modules loaded).
    pub ms_device_setup: f64,
    /// ISL's work making closed forms of access maps and conditions (once per map and block
    /// shape; launches then evaluate them without ISL), and how many it made.
    pub ms_closed_forms: f64,
    pub closed_forms: u64,
    /// GPU modules loaded from the build's machine code, and compiled from PTX by the
    /// driver (a GPU of an architecture the build did not assemble for), and the time
    /// loading them took, summed over the GPUs (which load in parallel).
    pub gpu_modules_from_sass: u64,
    pub gpu_modules_jit_compiled: u64,
    pub ms_gpu_module_loading: f64,
    /// GPUs whose contexts opened, of `device_count` (the first with the run; the others when
    /// first used or in the background, `HPVM_MGPU_OPEN`), and the time opening took.
    pub gpus_opened: u64,
    pub ms_gpu_opening: f64,
    /// The time launches waited for GPUs opening in the background (on the launching thread).
    pub ms_waiting_for_gpus: f64,
    /// The time asking the driver for the GPUs' properties took (in the background, from the
    /// session's start), and the host's time in a CUDA program's first kernel launch.
    pub ms_gpu_limits: f64,
    pub ms_first_launch: f64,
    /// Held launch sequences submitted as CUDA graphs (replays), and graphs made, over the
    /// GPUs (`HPVM_MGPU_GRAPHS`).
    pub gpu_graph_replays: u64,
    pub gpu_graphs_built: u64,
    /// Page-locking the program's buffers for the GPUs: bytes, and the time it took (on the
    /// thread doing it; launches overlap it with their allocations).
    pub bytes_page_locked: u64,
    pub ms_page_locking: f64,
    /// How host writes to tracked buffers between launches are found (`HPVM_MGPU_HOST_WRITES`):
    /// "watched", "assumed" (every byte the host holds), or "none" (the program's promise).
    pub host_writes: String,
    /// Watching: the buffers' bytes watched, and the time starting to watch them; looks at
    /// watched buffers, the bytes they found written, and their time.
    pub bytes_watched: u64,
    pub ms_watch_start: f64,
    pub host_write_scans: u64,
    pub bytes_host_written: u64,
    pub ms_host_write_scans: f64,
    /// With sparse copies (`memory::residency`), per device: the limit
    /// (`HPVM_MGPU_DEVICE_MEMORY`), the granule, the bytes backed at most, granules mapped
    /// and given back, and the bytes only that device held, copied to the host on eviction.
    pub device_memory: Vec<DeviceMemoryReport>,
    /// Under ranks (`mpirun`): this process's rank, and what crossed to and from other ranks.
    pub ranks: Option<RanksReport>,
}

/// This rank's share of a run over ranks ([`crate::ranks`]).
#[derive(Serialize)]
pub struct RanksReport {
    pub rank: usize,
    pub ranks: usize,
    /// Exchanges of bytes whose copies crossed ranks; the bytes this rank sent and received;
    /// the time in them (packing, and waiting for the other ranks, included).
    pub exchanges: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub ms_exchanging: f64,
    /// Comparisons of the ranks' launch hashes (one per graph launch), and their time.
    pub agreements: u64,
    pub ms_agreeing: f64,
}

#[derive(Serialize)]
pub struct DeviceMemoryReport {
    pub device: String,
    pub limit_bytes: Option<u64>,
    pub granule_bytes: u64,
    pub peak_backed_bytes: u64,
    /// The most bytes one launch (or round of one) needed backed at once.
    pub peak_launch_bytes: u64,
    pub granules_mapped: u64,
    pub granules_unmapped: u64,
    pub granules_evicted: u64,
    pub bytes_evicted_to_host: u64,
    pub bytes_evicted_to_peers: u64,
    /// Mean time backing one granule (the device's map call), in microseconds.
    pub us_per_granule_mapped: f64,
}

#[derive(Serialize)]
pub struct NodeReport {
    pub node: String,
    pub runs: u64,
    pub instances: u64,
    pub ms: f64,
    pub gpu_kernels_ms: Vec<f32>,
    /// GPU launches that read `in`-only buffers through the read-only data cache.
    pub gpu_read_only_cache_launches: u64,
    /// Launches as a unit on the devices; of those, split over more than one device.
    pub unit_launches: u64,
    pub partitioned_launches: u64,
    pub max_devices: u64,
    pub plan_cache: Hits,
    pub copy_plan_cache: Hits,
    pub ms_intervals: f64,
    /// Plan misses that made a plan over several devices at the launch; the first one's time
    /// (ISL's work, where no plan ahead did it) and the median of the others' (new scalar
    /// values: closed forms), in microseconds (0 without such misses).
    pub split_plan_misses: u64,
    pub us_first_split_plan_miss: f64,
    pub us_split_plan_miss_median: f64,
    pub ms_allocation: f64,
    pub ms_copy_planning: f64,
    /// Splits planned ahead in the background (ISL's work off the launch path), their time,
    /// and the launches that ran whole meanwhile.
    pub plans_ahead: u64,
    pub ms_plan_ahead: f64,
    pub whole_while_planning: u64,
    /// Launches on the program's streams planned with their maps (ISL) because other
    /// streams' work in flight shared their buffers; the others on streams took whole buffers.
    pub lane_exact_plans: u64,
    /// Mean runtime work of a launch whose plan and copy plan were both cached (lookups and
    /// coherence updates, before any copy), in microseconds; 0 without such launches.
    pub us_per_hit_launch: f64,
    pub ms_copies: f64,
    pub ms_partitions: f64,
    /// On GPUs (CUDA events; per launch the slowest device): copies from the host, copies
    /// between GPUs, kernels.
    pub gpu_ms_host_copies: f64,
    pub gpu_ms_peer_copies: f64,
    pub gpu_ms_kernels: f64,
    pub bytes_host_to_device: u64,
    pub bytes_device_to_device: u64,
    pub bytes_device_to_host: u64,
    /// The analysis's verdict, when the executable has a database entry for the node.
    pub analysis: Option<String>,
    pub unpartitioned_because: Option<String>,
    pub on_host_because: Option<String>,
    /// Launches the split policy ran on one device though the analysis allowed a split
    /// (`HPVM_MGPU_PARTITION=auto`), and the latest reason.
    pub split_declined: u64,
    pub split_declined_because: Option<String>,
    /// Most rounds one launch ran in to fit the devices' memory (0: never in rounds).
    pub max_memory_rounds: u64,
}

#[derive(Serialize)]
pub struct Hits {
    pub hits: u64,
    pub misses: u64,
}

#[derive(Serialize)]
pub struct Transfer {
    pub from: String,
    pub to: String,
    pub bytes: u64,
}

/// The median of `ns`, in microseconds; 0 when empty.
fn median_us(ns: &[u64]) -> f64 {
    if ns.is_empty() {
        return 0.0;
    }
    let mut v = ns.to_vec();
    v.sort_unstable();
    let mid = v.len() / 2;
    let m = if v.len() % 2 == 1 { v[mid] as f64 } else { (v[mid - 1] + v[mid]) as f64 / 2.0 };
    m / 1e3
}

fn place_name(i: usize) -> String {
    if i == 0 {
        "host".into()
    } else {
        format!("device{}", i - 1)
    }
}

pub fn collect() -> Report {
    let devs = devices();
    let c = &COUNTERS;
    let ms = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 / 1e6;
    let mut nodes = Vec::new();
    let mut modules = launch::loaded();
    modules.sort_by(|a, b| a.module.program.source.cmp(&b.module.program.source));
    for m in modules.iter().map(|l| &l.module) {
        // Replays count only on their unit (`NodeStats::replays`): each was a run of its root.
        let mut root_replays = vec![0u64; m.stats.len()];
        for (root, n) in (0..m.program.launches.len() as u32).filter_map(|l| m.cuda_unit(l)) {
            root_replays[root as usize] += m.stats[n as usize].replays.load(Ordering::Relaxed);
        }
        for ((node, st), root_replays) in m.program.nodes.iter().zip(m.stats.iter()).zip(root_replays) {
            let replays = st.replays.load(Ordering::Relaxed);
            let runs = st.runs.load(Ordering::Relaxed) + replays + root_replays;
            if runs == 0 {
                continue;
            }
            // A blocks launch is analysed under its leaf's name.
            let analysed = match &node.shape {
                Some(crate::desc::KernelKind::Blocks { leaf, .. }) => &m.program.nodes[*leaf as usize].name,
                _ => &node.name,
            };
            let analysis = m.analysis.as_ref().and_then(|db| db.node(analysed)).map(|n| {
                let dims: Vec<&str> = n.split.dims.iter().map(|&d| ["x", "y", "z"][d as usize]).collect();
                match n.split.chosen_by {
                    _ if n.specializable => {
                        "not partitionable for all values; analysed again with each launch's values".to_string()
                    }
                    _ if !n.partitionable || dims.is_empty() => "not partitionable".to_string(),
                    dashdb::SplitChoice::Analysis => format!("partitionable along {}", dims.join(" or ")),
                    dashdb::SplitChoice::User => format!("partitionable, split along {}", dims.join(" and ")),
                }
            });
            let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
            let misses = st.split_miss_nanos.lock().unwrap_or_else(|e| e.into_inner()).clone();
            nodes.push(NodeReport {
                node: node.shown().to_string(),
                runs,
                instances: load(&st.instances) + load(&st.replayed_instances) + root_replays,
                ms: ms(&st.nanos),
                gpu_kernels_ms: st.kernel_ms.lock().unwrap_or_else(|e| e.into_inner()).clone(),
                gpu_read_only_cache_launches: load(&st.read_only_cache_launches),
                unit_launches: load(&st.unit_launches) + replays,
                partitioned_launches: load(&st.partitioned),
                max_devices: load(&st.max_devices),
                plan_cache: Hits { hits: load(&st.plan_hits) + replays, misses: load(&st.plan_misses) },
                copy_plan_cache: Hits { hits: load(&st.copy_hits) + replays, misses: load(&st.copy_misses) },
                ms_intervals: ms(&st.nanos_intervals),
                split_plan_misses: misses.len() as u64,
                us_first_split_plan_miss: misses.first().map_or(0.0, |&ns| ns as f64 / 1e3),
                us_split_plan_miss_median: median_us(misses.get(1..).unwrap_or_default()),
                ms_allocation: ms(&st.nanos_alloc),
                ms_copy_planning: ms(&st.nanos_copy_plan),
                plans_ahead: load(&st.plans_ahead),
                ms_plan_ahead: ms(&st.nanos_plan_ahead),
                whole_while_planning: load(&st.whole_while_planning),
                lane_exact_plans: load(&st.lane_exact_plans),
                us_per_hit_launch: match load(&st.hit_launches) {
                    0 => 0.0,
                    k => load(&st.nanos_hit_work) as f64 / 1e3 / k as f64,
                },
                ms_copies: ms(&st.nanos_copies),
                ms_partitions: ms(&st.nanos_kernels),
                gpu_ms_host_copies: ms(&st.gpu_nanos_host_copies),
                gpu_ms_peer_copies: ms(&st.gpu_nanos_peer_copies),
                gpu_ms_kernels: ms(&st.gpu_nanos_kernels),
                bytes_host_to_device: load(&st.bytes_h2d),
                bytes_device_to_device: load(&st.bytes_d2d),
                bytes_device_to_host: load(&st.bytes_d2h),
                analysis,
                unpartitioned_because: st.unpartitioned_reason.lock().unwrap_or_else(|e| e.into_inner()).clone(),
                on_host_because: st.host_reason.lock().unwrap_or_else(|e| e.into_inner()).clone(),
                split_declined: load(&st.declined),
                split_declined_because: st.declined_reason.lock().unwrap_or_else(|e| e.into_inner()).clone(),
                max_memory_rounds: load(&st.max_rounds),
            });
        }
    }
    let mut bytes = Vec::new();
    for (i, row) in c.bytes.iter().enumerate() {
        for (j, b) in row.iter().enumerate() {
            let b = b.load(Ordering::Relaxed);
            if b > 0 {
                bytes.push(Transfer { from: place_name(i), to: place_name(j), bytes: b });
            }
        }
    }
    let graphs = devs.local_gpus().map(|k| devs.gpu(k).graph_counts()).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    Report {
        launches: c.launches.load(Ordering::Relaxed),
        stream_items: c.stream_items.load(Ordering::Relaxed),
        devices: devs.describe(),
        link_cost: devs.link_cost.clone(),
        device_order: devs.order.clone(),
        device_count: devs.count(),
        worker_threads: crate::pool::pool().current_num_threads(),
        nodes,
        bytes,
        bytes_requested_by_host: c.bytes_requested.load(Ordering::Relaxed),
        ms_to_host: ms(&c.nanos_to_host),
        ms_session: SESSION_START.get().map_or(0.0, |t| t.elapsed().as_secs_f64() * 1e3),
        ms_device_setup: DEVICE_SETUP_NANOS.load(Ordering::Relaxed) as f64 / 1e6,
        ms_closed_forms: crate::partitioned::closed_form_nanos() as f64 / 1e6,
        closed_forms: crate::partitioned::closed_forms_made(),
        gpu_modules_from_sass: MODULES_SASS.load(Ordering::Relaxed),
        gpu_modules_jit_compiled: MODULES_JIT.load(Ordering::Relaxed),
        ms_gpu_module_loading: MODULE_LOAD_NANOS.load(Ordering::Relaxed) as f64 / 1e6,
        gpus_opened: GPUS_OPENED.load(Ordering::Relaxed),
        ms_gpu_opening: GPU_OPEN_NANOS.load(Ordering::Relaxed) as f64 / 1e6,
        ms_waiting_for_gpus: GPU_WAIT_NANOS.load(Ordering::Relaxed) as f64 / 1e6,
        ms_gpu_limits: GPU_LIMITS_NANOS.load(Ordering::Relaxed) as f64 / 1e6,
        ms_first_launch: FIRST_LAUNCH_NANOS.load(Ordering::Relaxed) as f64 / 1e6,
        gpu_graph_replays: graphs.0,
        gpu_graphs_built: graphs.1,
        bytes_page_locked: c.bytes_pinned.load(Ordering::Relaxed),
        ms_page_locking: ms(&c.nanos_pinning),
        host_writes: crate::memory::host_writes_described(),
        bytes_watched: c.bytes_watched.load(Ordering::Relaxed),
        ms_watch_start: ms(&c.nanos_watch_start),
        host_write_scans: c.host_write_scans.load(Ordering::Relaxed),
        bytes_host_written: c.bytes_host_written.load(Ordering::Relaxed),
        ms_host_write_scans: ms(&c.nanos_host_write_scans),
        device_memory: crate::memory::residency::report()
            .into_iter()
            .enumerate()
            .map(|(k, m)| DeviceMemoryReport {
                device: devs.get(k).name().to_string(),
                limit_bytes: crate::memory::residency::limit(),
                granule_bytes: devs.get(k).granule().unwrap_or(0),
                peak_backed_bytes: m.peak,
                peak_launch_bytes: m.peak_launch,
                granules_mapped: m.granules_mapped,
                granules_unmapped: m.granules_unmapped,
                granules_evicted: m.granules_evicted,
                bytes_evicted_to_host: m.evicted_to_host,
                bytes_evicted_to_peers: m.evicted_to_peers,
                us_per_granule_mapped: match m.granules_mapped {
                    0 => 0.0,
                    g => m.map_nanos as f64 / 1e3 / g as f64,
                },
            })
            .collect(),
        ranks: crate::ranks::world().map(|w| RanksReport {
            rank: w.rank,
            ranks: w.size,
            exchanges: c.rank_exchanges.load(Ordering::Relaxed),
            bytes_sent: c.bytes_sent_to_ranks.load(Ordering::Relaxed),
            bytes_received: c.bytes_received_from_ranks.load(Ordering::Relaxed),
            ms_exchanging: ms(&c.nanos_rank_exchanges),
            agreements: c.rank_agreements.load(Ordering::Relaxed),
            ms_agreeing: ms(&c.nanos_rank_agreements),
        }),
    }
}

pub fn report() -> String {
    let r = collect();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "hpvm-mgpu stats: {} launches, {} stream items, devices: {} ({} worker threads)",
        r.launches, r.stream_items, r.devices, r.worker_threads
    );
    if let Some(k) = &r.ranks {
        let _ = writeln!(
            s,
            "  rank {} of {}: {} exchanges with other ranks, {} bytes sent, {} received, {:.3} ms; {} launch-hash \
             comparisons, {:.3} ms",
            k.rank, k.ranks, k.exchanges, k.bytes_sent, k.bytes_received, k.ms_exchanging, k.agreements, k.ms_agreeing
        );
    }
    let _ = writeln!(s, "  {:<28} {:>10} {:>14} {:>12}", "node", "runs", "instances", "time ms");
    for n in &r.nodes {
        let _ = write!(s, "  {:<28} {:>10} {:>14} {:>12.3}", n.node, n.runs, n.instances, n.ms);
        let mut kms = n.gpu_kernels_ms.clone();
        if !kms.is_empty() {
            kms.sort_by(f32::total_cmp);
            let total: f32 = kms.iter().sum();
            let _ =
                write!(s, "   GPU: {} kernels, median {:.4} ms, total {:.4} ms", kms.len(), kms[kms.len() / 2], total);
            if n.gpu_read_only_cache_launches > 0 {
                let _ = write!(s, " ({} through the read-only cache)", n.gpu_read_only_cache_launches);
            }
        }
        if let Some(a) = &n.analysis {
            let _ = write!(s, "   analysis: {a}");
        }
        let _ = writeln!(s);
        if n.unit_launches > 0 {
            let _ = writeln!(
                s,
                "    on devices: {} launches, {} partitioned (up to {} devices); plans {} hits / {} misses, copy plans {} hits / {} misses; a cache-hit launch {:.2} µs of runtime work",
                n.unit_launches,
                n.partitioned_launches,
                n.max_devices,
                n.plan_cache.hits,
                n.plan_cache.misses,
                n.copy_plan_cache.hits,
                n.copy_plan_cache.misses,
                n.us_per_hit_launch
            );
            let _ = writeln!(
                s,
                "    time ms: intervals {:.3}, allocation {:.3}, copy planning {:.3}, copies {:.3}, partitions {:.3}; bytes host->device {}, device->device {}, device->host {}",
                n.ms_intervals,
                n.ms_allocation,
                n.ms_copy_planning,
                n.ms_copies,
                n.ms_partitions,
                n.bytes_host_to_device,
                n.bytes_device_to_device,
                n.bytes_device_to_host
            );
            if n.split_plan_misses > 0 {
                let _ = writeln!(
                    s,
                    "    split plans made at a launch: {} (the first {:.1} µs, the others' median {:.1} µs)",
                    n.split_plan_misses, n.us_first_split_plan_miss, n.us_split_plan_miss_median
                );
            }
        }
        if n.gpu_ms_kernels > 0.0 {
            let _ = writeln!(
                s,
                "    on the GPUs, ms: copies from the host {:.3}, copies between GPUs {:.3}, kernels {:.3}",
                n.gpu_ms_host_copies, n.gpu_ms_peer_copies, n.gpu_ms_kernels
            );
        }
        if n.plans_ahead > 0 || n.whole_while_planning > 0 {
            let _ = writeln!(
                s,
                "    planned ahead: {} splits in {:.3} ms off the launch path; {} launches ran whole meanwhile",
                n.plans_ahead, n.ms_plan_ahead, n.whole_while_planning
            );
        }
        if n.lane_exact_plans > 0 {
            let _ = writeln!(
                s,
                "    on streams: {} launches planned with their maps (other streams' work in flight shared their buffers)",
                n.lane_exact_plans
            );
        }
        if n.max_memory_rounds > 1 {
            let _ =
                writeln!(s, "    ran in up to {} rounds of partitions to fit the devices' memory", n.max_memory_rounds);
        }
        if let Some(why) = &n.unpartitioned_because {
            let _ = writeln!(s, "    not split: {why}");
        }
        if let Some(why) = &n.split_declined_because {
            let _ = writeln!(s, "    not split by the policy: {} launches (latest: {why})", n.split_declined);
        }
        if let Some(why) = &n.on_host_because {
            let _ = writeln!(s, "    ran on the host: {why}");
        }
    }
    let moved: Vec<String> = r.bytes.iter().map(|t| format!("{}->{} {}", t.from, t.to, t.bytes)).collect();
    let _ = writeln!(
        s,
        "  bytes moved: {}; requested by the host {}; copying back to the host {:.3} ms",
        if moved.is_empty() { "none".to_string() } else { moved.join(", ") },
        r.bytes_requested_by_host,
        r.ms_to_host
    );
    let _ = writeln!(s, "  session {:.3} ms (opening the devices {:.3} ms)", r.ms_session, r.ms_device_setup);
    if r.closed_forms > 0 {
        let _ = writeln!(
            s,
            "  closed forms of access maps and conditions: {} made by ISL in {:.3} ms",
            r.closed_forms, r.ms_closed_forms
        );
    }
    if r.gpus_opened > 0 {
        let _ = writeln!(
            s,
            "  GPU contexts: {} of {} opened, {:.3} ms in all (those after the first open when first wanted); launches \
             waited {:.3} ms for them",
            r.gpus_opened, r.device_count, r.ms_gpu_opening, r.ms_waiting_for_gpus
        );
    }
    if r.ms_first_launch > 0.0 {
        let limits = if r.ms_gpu_limits > 0.0 {
            format!("; asking the GPUs' properties {:.3} ms (from the start, beside the program)", r.ms_gpu_limits)
        } else {
            String::new()
        };
        let _ = writeln!(s, "  first kernel launch: {:.3} ms on the host{limits}", r.ms_first_launch);
    }
    if r.gpu_modules_from_sass + r.gpu_modules_jit_compiled > 0 {
        let _ = writeln!(
            s,
            "  GPU modules: {} loaded from the build's machine code, {} compiled from PTX; {:.3} ms",
            r.gpu_modules_from_sass, r.gpu_modules_jit_compiled, r.ms_gpu_module_loading
        );
    }
    if r.gpu_graph_replays > 0 {
        let _ = writeln!(
            s,
            "  launch sequences replayed as CUDA graphs: {} ({} graphs made)",
            r.gpu_graph_replays, r.gpu_graphs_built
        );
    }
    let _ = write!(s, "  host writes between launches: {}", r.host_writes);
    if r.bytes_watched > 0 {
        let _ = write!(
            s,
            "; {} bytes watched ({:.3} ms to start), {} looks found {} bytes written in {:.3} ms",
            r.bytes_watched, r.ms_watch_start, r.host_write_scans, r.bytes_host_written, r.ms_host_write_scans
        );
    }
    let _ = writeln!(s);
    if r.bytes_page_locked > 0 {
        let _ = writeln!(s, "  page-locked {} bytes in {:.3} ms", r.bytes_page_locked, r.ms_page_locking);
    }
    for m in &r.device_memory {
        let limit = m.limit_bytes.map_or("no limit".to_string(), |l| format!("limit {l}"));
        let _ = writeln!(
            s,
            "  {} memory: peak {} bytes backed ({limit}, granules of {}; one launch at most {}); granules mapped {}, \
             given back {} ({} evicted); evicted bytes copied to the host {}, to peers {}; {:.2} µs per granule mapped",
            m.device,
            m.peak_backed_bytes,
            m.granule_bytes,
            m.peak_launch_bytes,
            m.granules_mapped,
            m.granules_unmapped,
            m.granules_evicted,
            m.bytes_evicted_to_host,
            m.bytes_evicted_to_peers,
            m.us_per_granule_mapped
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::median_us;

    #[test]
    fn medians_of_plan_misses() {
        assert_eq!(median_us(&[]), 0.0);
        assert_eq!(median_us(&[5_000]), 5.0);
        assert_eq!(median_us(&[9_000, 1_000, 5_000]), 5.0);
        assert_eq!(median_us(&[4_000, 1_000, 2_000, 3_000]), 2.5);
    }
}
