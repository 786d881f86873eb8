//! Virtual buffers: the host buffers the program tracks (`llvm_hpvm_track_mem`), one lazily
//! made allocation per device, and a coherence map saying who holds the current copy of each
//! byte interval ([`coherence`]).
//!
//! Rules (the Mekong thesis's "last writer" model, generalized to intervals and made lazy):
//! - nothing moves before someone needs it: a device receives exactly the intervals it is
//!   about to read and does not hold, each from one current holder (another device first,
//!   else the host);
//! - after a write, the writer is the only holder of what it wrote;
//! - the host receives exactly what it asks for (`llvm_hpvm_request_mem`) or what a host node
//!   touches, and only the intervals it lacks.
//!
//! One table, under one lock: a launch decides and applies its copies and coherence updates
//! while holding it, so no one sees a half-updated map. Sources are chosen in the state before
//! the launch's copies, so the copies of one launch never depend on each other.

pub mod coherence;
mod crossing;
#[cfg(test)]
pub(crate) mod fakes;
mod guard;
pub mod residency;
mod segments;
pub mod watch;

use crate::crash;
use crate::devices::inflight;
use crate::devices::staging::STAGE_AT_LEAST;
use crate::devices::{devices, in_place, pinning, Copy, Device, Devices, Place};
use crate::sink::{self, Event};
use coherence::{Coherence, Holders};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Page-locks `[start, start + size)` for every GPU; false where the driver refuses.
fn pin(start: u64, size: u64) -> bool {
    let t = std::time::Instant::now();
    // This process's first GPU (page-locking is the driver's, for all of them).
    let pinned = devices().gpus.first().is_some_and(|g| g.pin_host(start as *mut u8, size as usize));
    let nanos = t.elapsed().as_nanos() as u64;
    sink::record(Event::PageLocked { bytes: if pinned { size } else { 0 }, nanos });
    pinned
}

/// Buffers at least this large are page-locked when they first go to a GPU.
const PIN_AT_LEAST: u64 = 1 << 20;

/// What the runtime assumes of the program's stores into tracked memory between launches
/// (`HPVM_MGPU_HOST_WRITES`). HPVM's contract lets the host write a tracked buffer between
/// graph launches; the runtime must then send the devices what changed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum HostWrites {
    /// `any` (the default): the host may write; the pages it wrote are found ([`watch`]),
    /// and where that is impossible every byte it holds counts as written.
    Watched,
    /// `all`: every byte the host holds counts as written at every graph launch (HPVM's own
    /// runtime; for comparisons).
    Assumed,
    /// `none`: the program's promise that it never writes (outside host nodes, which the
    /// runtime sees): device copies of what the host also holds are reused across launches.
    None,
}

pub(crate) fn host_writes() -> HostWrites {
    static MODE: std::sync::OnceLock<HostWrites> = std::sync::OnceLock::new();
    *MODE.get_or_init(|| match std::env::var("HPVM_MGPU_HOST_WRITES").unwrap_or_default().trim() {
        "" | "any" => HostWrites::Watched,
        "all" => HostWrites::Assumed,
        "none" => HostWrites::None,
        other => crate::fatal(&format!("HPVM_MGPU_HOST_WRITES={other}: expected `any`, `all` or `none`")),
    })
}

/// Whether the host's pages that a kernel not yet waited for makes stale are guarded
/// (`HPVM_MGPU_RACE_GUARD`, `on` by default): a racing store then stops at its line
/// ([`guard`]); `off` leaves races to the checks after the fact, which name only the bytes.
pub(crate) fn race_guard() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| match std::env::var("HPVM_MGPU_RACE_GUARD").unwrap_or_default().trim() {
        "" | "on" => true,
        "off" => false,
        other => crate::fatal(&format!("HPVM_MGPU_RACE_GUARD={other}: expected `on` or `off`")),
    })
}

/// How host writes are found, for the statistics.
pub fn host_writes_described() -> String {
    match (host_writes(), watch::watcher()) {
        (HostWrites::None, _) => "none (HPVM_MGPU_HOST_WRITES=none)".into(),
        (HostWrites::Assumed, _) => "assumed at every launch (HPVM_MGPU_HOST_WRITES=all)".into(),
        (HostWrites::Watched, Ok(_)) => "watched (userfaultfd write-protection, pagemap scan)".into(),
        (HostWrites::Watched, Err(why)) => format!("assumed at every launch: cannot watch them ({why})"),
    }
}

/// Says once, the first time it costs a resend, that host writes are assumed rather than
/// seen, and why.
fn say_unwatched(why: &str) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        eprintln!(
            "hpvm-mgpu: note: cannot see which tracked memory the host writes ({why}); every byte it holds is sent \
             to the devices again after it may have written it (HPVM_MGPU_HOST_WRITES=none promises it does not)"
        )
    });
}

/// Counts the moments the program's host code may have written tracked memory since the
/// runtime last looked: each `__hpvm__launch` and `__hpvm__push` hands the graph whatever the
/// host wrote before it (while a graph runs, a host write to what it uses would be a race).
static HOST_EPOCH: AtomicU64 = AtomicU64::new(1);

/// The host hands data to a graph (`__hpvm__launch`, `__hpvm__push`): what it holds may have
/// changed.
pub fn host_resumes() {
    HOST_EPOCH.fetch_add(1, Ordering::Relaxed);
}

/// What a race message tells the program to do (see [`Buffer::raced`]).
const RACE_ADVICE: &str = "a kernel that writes them had not been waited for, so the host's write and the kernel's \
     race, and one would be lost. Managed memory here is as on a GPU without concurrent managed access \
     (cudaDevAttrConcurrentManagedAccess is 0): wait for the kernel (cudaDeviceSynchronize, cudaStreamSynchronize, \
     an event) before the host touches memory it writes";

/// Reads the memory settings (ending the program on a bad one).
pub fn check_settings() {
    pinning();
    host_writes();
    race_guard();
}

pub struct Buffer {
    /// Distinct for every `llvm_hpvm_track_mem`, so caches notice a buffer tracked anew.
    pub id: u64,
    pub start: u64,
    pub size: u64,
    pub coherence: Coherence,
    /// Each device's allocation, made on first need.
    allocs: Vec<Option<u64>>,
    pinned: bool,
    /// The [`HOST_EPOCH`] whose host writes the coherence map accounts for.
    host_epoch: u64,
    /// Whether the host's code may store into the buffer directly. Not so for CUDA's device
    /// memory, which the host changes only through API calls that say which bytes
    /// ([`host_overwrites`]): launches then never resend it.
    pub host_stores: bool,
    /// Whether a host store racing a kernel is refused (CUDA's managed memory, which the
    /// host may touch only after waiting for the kernels that write it; see [`Buffer::raced`])
    /// rather than lost to the kernel's copy (HPVM-C's rule: the host's copy counts only
    /// where it holds the data).
    races_refused: bool,
    /// Absolute runs the runtime itself wrote into the host's pages since the last scan,
    /// some of which the watch may report as the program's: no race is claimed there.
    runtime_wrote: Vec<(u64, u64)>,
    /// Where races are refused but the host's writes are not watched (a kernel older than
    /// 6.7, `HPVM_MGPU_HOST_WRITES=all`): the host's bytes where a device holds them newer,
    /// as they were when the launch that made them so was planned, as (offset, bytes). Where
    /// they are watched, only such bytes in pages partly stale (the watch sees pages). A
    /// later look that finds the host's bytes changed there found a race ([`Buffer::raced`]).
    kept: Vec<(u64, Vec<u8>)>,
    /// Where races are refused: the host's pages holding bytes a device holds newer, made
    /// read-only so that a racing store stops at its line ([`guard`]).
    guard: guard::Guarded,
    /// Whether the host's stores into it are watched ([`watch`]).
    watch: Watch,
    /// While watched: the host's bytes in its partial pages ([`watch::edges`]) at the last
    /// look, to compare with.
    edge_bytes: Vec<u8>,
    /// With sparse copies ([`residency`]): which granules of each device's reservation are
    /// backed (empty for a device without a reservation).
    backing: Vec<residency::Backing>,
    /// A `__constant__` variable's buffer whose GPU copies are to be its GPU module's
    /// `.const` variable ([`Table::place_in_bank`]): the module's PTX and the variable's name.
    bank: Option<(&'static std::ffi::CStr, String)>,
    /// Per device: its copy is that variable (the module's memory, never freed here).
    in_bank: Vec<bool>,
}

/// A buffer's place in [`watch`]ing host writes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Watch {
    /// Not yet: its first use on a device starts it.
    NotYet,
    Watched,
    /// The kernel refused the memory, or the mechanism is missing: writes are assumed.
    Refused,
}

/// Consecutive rows of a rectangle that lack the same pieces from the same sources
/// ([`Buffer::plan_current`]): one strided copy per piece.
struct RowGroup {
    first: u64,
    rows: u64,
    /// The pieces, in the planner's flat list.
    pieces: std::ops::Range<usize>,
}

/// A rectangle of a buffer's bytes: `rows` rows of `row_bytes`, `pitch` apart, from `start`
/// (an offset into the buffer). A contiguous run is one row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ByteRect {
    pub start: u64,
    pub rows: u64,
    pub row_bytes: u64,
    pub pitch: u64,
}

impl ByteRect {
    pub fn run(start: u64, end: u64) -> ByteRect {
        ByteRect { start, rows: 1, row_bytes: end - start, pitch: end - start }
    }

    pub fn is_contiguous(&self) -> bool {
        self.rows <= 1 || self.row_bytes == self.pitch
    }

    /// One past the last byte.
    pub fn end(&self) -> u64 {
        if self.rows == 0 {
            self.start
        } else {
            self.start + (self.rows - 1) * self.pitch + self.row_bytes
        }
    }

    /// The byte runs of the rectangle, in order.
    pub fn row_runs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let whole = self.is_contiguous();
        let rows = if whole { self.rows.min(1) } else { self.rows };
        (0..rows).map(move |r| {
            let s = self.start + r * self.pitch;
            (s, if whole { self.end() } else { s + self.row_bytes })
        })
    }
}

#[derive(Default)]
pub struct Table {
    buffers: BTreeMap<u64, Buffer>,
    next_id: u64,
    /// Counts the launches that made granules resident ([`residency`]): their order is the
    /// order of last use.
    tick: u64,
}

static TABLE: Mutex<Table> = Mutex::new(Table { buffers: BTreeMap::new(), next_id: 0, tick: 0 });

/// Counts the holds of the table's lock that may have changed it ([`table`]): where it has
/// not moved, no buffer was tracked, freed, copied or made current anywhere since, and a
/// launch that found the table in some state finds it in that state again
/// ([`crate::partitioned::replay`]).
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// The table, locked, for reading and changing it (the [`epoch`] moves).
pub fn table() -> MutexGuard<'static, Table> {
    let t = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    EPOCH.fetch_add(1, Ordering::AcqRel);
    t
}

/// The table, locked, for reading only: the [`epoch`] stays.
pub fn table_read() -> ReadTable {
    ReadTable(TABLE.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The table locked by [`table_read`]: no `DerefMut`, so nothing changes it.
pub struct ReadTable(MutexGuard<'static, Table>);

impl std::ops::Deref for ReadTable {
    type Target = Table;
    fn deref(&self) -> &Table {
        &self.0
    }
}

/// See [`EPOCH`].
pub fn epoch() -> u64 {
    EPOCH.load(Ordering::Acquire)
}

/// Takes back the [`epoch`]'s move of the hold `held` (from [`table`]), which changed nothing
/// in the table: nobody else moved it meanwhile, since each move is made holding the lock.
pub fn unchanged(held: &MutexGuard<'static, Table>) {
    let _ = held;
    EPOCH.fetch_sub(1, Ordering::AcqRel);
}

impl Table {
    /// The start of the tracked buffer holding `[ptr, ptr + bytes)`.
    pub fn containing(&self, ptr: u64, bytes: u64) -> Option<u64> {
        let (&start, buf) = self.buffers.range(..=ptr).next_back()?;
        (ptr.checked_add(bytes)? <= start + buf.size).then_some(start)
    }

    pub fn get(&self, start: u64) -> Option<&Buffer> {
        self.buffers.get(&start)
    }

    pub fn get_mut(&mut self, start: u64) -> Option<&mut Buffer> {
        self.buffers.get_mut(&start)
    }

    /// A table of buffers `(start, size)` with allocations on `devices` devices at made-up
    /// addresses (nothing may touch their memory), for tests of planning.
    #[cfg(test)]
    pub(crate) fn with_fake_buffers(buffers: &[(u64, u64)], devices: usize) -> Table {
        let mut t = Table::default();
        for &(start, size) in buffers {
            t.track(start, size, true);
            let buf = t.buffers.get_mut(&start).expect("tracked");
            buf.allocs = (0..devices).map(|k| Some(0x1000_0000 * (k as u64 + 1) + start)).collect();
        }
        t
    }

    fn track(&mut self, ptr: u64, bytes: u64, host_stores: bool) {
        self.next_id += 1;
        let buf = Buffer {
            id: self.next_id,
            start: ptr,
            size: bytes,
            coherence: Coherence::new(bytes, Holders::HOST),
            allocs: Vec::new(),
            pinned: false,
            host_epoch: HOST_EPOCH.load(Ordering::Relaxed),
            host_stores,
            races_refused: false,
            runtime_wrote: Vec::new(),
            kept: Vec::new(),
            guard: Default::default(),
            watch: Watch::NotYet,
            edge_bytes: Vec::new(),
            backing: Vec::new(),
            bank: None,
            in_bank: Vec::new(),
        };
        // Re-tracking a buffer forgets its device copies: the host's is the current one.
        if let Some(old) = self.buffers.insert(ptr, buf) {
            // No GPU may still be copying from them.
            inflight::drain();
            old.release();
        }
        crash::note_region(crash::Region { start: ptr, size: bytes, buffer: ptr, device: None });
    }
}

impl Table {
    /// Devices `open` back `[lo, hi)` of the buffer at `start` for a copy into it from the
    /// host (`cudaMemcpy`): reserved and mapped there with sparse copies, allocated whole
    /// otherwise. Ends the program where they cannot.
    fn back_for_copy_in(&mut self, start: u64, open: &[usize], lo: u64, hi: u64) {
        if residency::sparse() {
            let needs: Vec<residency::Need> =
                open.iter().map(|&device| residency::Need { buffer: start, device, lo, hi }).collect();
            self.make_resident(&needs)
                .unwrap_or_else(|e| crate::fatal(&format!("a copy into device memory: {}", e.describe(&|_| None))));
        }
        let needs: Vec<(u64, usize)> = open.iter().map(|&k| (start, k)).collect();
        if let Err(e) = self.allocate(&needs) {
            crate::fatal(&format!(
                "a copy into device memory needs {} bytes on every device: {}",
                self.buffers[&e.start].size, e.message
            ));
        }
    }

    /// Means the GPU copies of the buffer at `start` (a `__constant__` variable's) to be the
    /// variable `name` of the GPU module `ptx`, where kernels read it through the constant
    /// bank. Only before any device holds a copy (an allocation made already stays), and only
    /// where copies are whole allocations of this process (not sparse, not across ranks).
    pub fn place_in_bank(&mut self, start: u64, ptx: &'static std::ffi::CStr, name: &str) {
        let Some(buf) = self.buffers.get_mut(&start) else { return };
        if buf.bank.is_some()
            || buf.allocs.iter().any(Option::is_some)
            || residency::sparse()
            || crate::ranks::spans_ranks()
        {
            return;
        }
        buf.bank = Some((ptx, name.to_string()));
    }

    /// Makes every allocation in `needs` (buffer start, device) that does not exist yet, and
    /// page-locks the buffers that will be. On GPUs the costs are large (about 30 ms per GB
    /// page-locked, and an allocation of gigabytes takes a good part of a second) and
    /// independent: each device allocates on its own thread while one more page-locks, so a
    /// launch's first use of its buffers costs the slowest of them, not their sum.
    pub fn allocate(&mut self, needs: &[(u64, usize)]) -> Result<(), AllocError> {
        let devs = devices();
        let mut per_device: Vec<Vec<(u64, u64)>> = vec![Vec::new(); devs.count()];
        let mut pins: Vec<(u64, u64)> = Vec::new();
        for &(start, k) in needs {
            let buf = self.buffers.get_mut(&start).expect("tracked");
            if buf.allocs.get(k).copied().flatten().is_some()
                || per_device[k].iter().any(|&(s, _)| s == start)
                || buf.bank_copy(k).is_some()
            {
                continue;
            }
            per_device[k].push((start, buf.size));
            if devs.on_gpus()
                && buf.size >= PIN_AT_LEAST
                && !buf.pinned
                && pinning()
                && !pins.iter().any(|&(s, _)| s == start)
            {
                pins.push((start, buf.size));
            }
        }
        let jobs = per_device.iter().filter(|v| !v.is_empty()).count() + usize::from(!pins.is_empty());
        let alloc_on = |k: usize, list: &[(u64, u64)]| -> Vec<Result<u64, String>> {
            list.iter().map(|&(start, size)| Buffer::alloc_on(start, size, k)).collect()
        };
        let pin_all =
            |list: &[(u64, u64)]| -> Vec<bool> { list.iter().map(|&(start, size)| pin(start, size)).collect() };
        // Simulated and dry-run devices allocate host memory, cheaply: threads would cost more
        // than they save (a program's first copies spawned one per device and buffer).
        let (made, pinned): (Vec<Vec<Result<u64, String>>>, Vec<bool>) = if jobs <= 1 || !devs.on_gpus() {
            (per_device.iter().enumerate().map(|(k, v)| alloc_on(k, v)).collect(), pin_all(&pins))
        } else {
            std::thread::scope(|s| {
                let failed =
                    |e: std::io::Error| -> ! { crate::fatal(&format!("cannot start an allocating thread: {e}")) };
                let pinner = (!pins.is_empty()).then(|| {
                    std::thread::Builder::new()
                        .name("hpvm-pin".into())
                        .spawn_scoped(s, || pin_all(&pins))
                        .unwrap_or_else(|e| failed(e))
                });
                let allocators: Vec<_> = per_device
                    .iter()
                    .enumerate()
                    .map(|(k, v)| {
                        (!v.is_empty()).then(|| {
                            std::thread::Builder::new()
                                .name(format!("hpvm-alloc-{k}"))
                                .spawn_scoped(s, move || alloc_on(k, v))
                                .unwrap_or_else(|e| failed(e))
                        })
                    })
                    .collect();
                let lost = || -> ! { crate::fatal("an allocating thread failed") };
                let made = allocators
                    .into_iter()
                    .map(|h| h.map(|h| h.join().unwrap_or_else(|_| lost())).unwrap_or_default())
                    .collect();
                (made, pinner.map(|p| p.join().unwrap_or_else(|_| lost())).unwrap_or_default())
            })
        };
        // Record everything made before reporting a failure, so that it is freed with the
        // buffer.
        let mut first_error = None;
        for (k, results) in made.into_iter().enumerate() {
            for (&(start, _), r) in per_device[k].iter().zip(results) {
                match r {
                    Ok(a) => self.buffers.get_mut(&start).expect("tracked").set_alloc(k, a),
                    Err(message) => {
                        first_error.get_or_insert(AllocError { start, message });
                    }
                }
            }
        }
        for (&(start, _), p) in pins.iter().zip(pinned) {
            self.buffers.get_mut(&start).expect("tracked").pinned = p;
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// A device allocation that failed: the buffer (by its host start address, which the caller
/// turns into the names the program gave it) and the device's own words.
#[derive(Debug)]
pub struct AllocError {
    pub start: u64,
    pub message: String,
}

impl Buffer {
    /// The buffer's address at `place`: the host's own, or device `k`'s allocation (made now
    /// if this is its first need; [`Table::allocate`] makes a launch's allocations at once).
    pub fn addr(&mut self, place: Place) -> Result<u64, String> {
        let Place::Device(k) = place else { return Ok(self.start) };
        if let Some(a) = self.allocs.get(k).copied().flatten() {
            return Ok(a);
        }
        if let Some(a) = self.bank_copy(k) {
            return Ok(a);
        }
        let a = Buffer::alloc_on(self.start, self.size, k)?;
        self.set_alloc(k, a);
        let devs = devices();
        if devs.on_gpus() && self.size >= PIN_AT_LEAST && !self.pinned && pinning() {
            self.pinned = pin(self.start, self.size);
        }
        Ok(a)
    }

    /// Places device `k`'s copy in the constant bank's variable the buffer is meant for
    /// ([`Table::place_in_bank`]), where `k` is a GPU whose module has it, large enough:
    /// its address. `None` leaves the copy to an allocation of the runtime's.
    fn bank_copy(&mut self, k: usize) -> Option<u64> {
        let (ptx, name) = self.bank.as_ref()?;
        let devs = devices();
        if !devs.on_gpus() || !devs.is_local(k) || residency::sparse() {
            return None;
        }
        let (at, size) = devs.gpu(k).bank_variable(ptx, name).ok()?;
        if (size as u64) < self.size {
            return None;
        }
        self.set_alloc(k, at);
        if self.in_bank.len() <= k {
            self.in_bank.resize(k + 1, false);
        }
        self.in_bank[k] = true;
        Some(at)
    }

    /// Whether device `k`'s copy is the variable `name` of the GPU module `ptx`.
    pub fn copy_in_bank(&self, k: usize, ptx: &std::ffi::CStr, name: &str) -> bool {
        self.in_bank.get(k).copied().unwrap_or(false)
            && self.bank.as_ref().is_some_and(|(p, n)| p.as_ptr() == ptx.as_ptr() && n == name)
    }

    fn set_alloc(&mut self, k: usize, a: u64) {
        if self.allocs.len() <= k {
            self.allocs.resize(k + 1, None);
        }
        self.allocs[k] = Some(a);
        if let Some(granule) = residency::sparse().then(|| devices().get(k).granule()).flatten() {
            if self.backing.len() <= k {
                self.backing.resize(k + 1, residency::Backing::default());
            }
            self.backing[k] = residency::Backing::new(self.size, granule);
        }
        // A simulated device's copy is the program's memory to its leaves.
        if !devices().on_gpus() {
            crash::note_region(crash::Region { start: a, size: self.size, buffer: self.start, device: Some(k) });
        }
    }

    /// Allocates device `k`'s copy of the buffer at `start` (`size` bytes): with sparse
    /// copies, a reservation backed by nothing yet ([`residency`]). Whole copies and simulated
    /// devices' reservations have slack past their end ([`crate::devices::SLACK`]), so a
    /// kernel that reads a little past a buffer, as a GPU tolerates within a `cudaMalloc`
    /// allocation, reads there on every device alike.
    fn alloc_on(start: u64, size: u64, k: usize) -> Result<u64, String> {
        let device = devices().get(k);
        let made = match device.granule().filter(|_| residency::sparse()) {
            Some(g) => device.reserve(size.max(1).div_ceil(g) * g),
            None => device.alloc((size + crate::devices::SLACK) as usize),
        };
        made.map_err(|e| {
            format!(
                "cannot allocate the buffer at {start:#x} ({size} bytes, {:.1} MiB) on {}: {e}",
                size as f64 / (1 << 20) as f64,
                device.name()
            )
        })
    }

    /// Plans the copies that make `place` current on `rect`, choosing each source among the
    /// holders in `before`; records `place` as a holder where `record` (a caller about to
    /// make `place` the only holder of all of `rect` need not). Copies go to `out`.
    pub fn plan_current(
        &mut self,
        place: Place,
        rect: &ByteRect,
        before: &Coherence,
        out: &mut Vec<Copy>,
        record: bool,
    ) {
        let dst_base = self.addr(place).unwrap_or_else(|e| crate::fatal(&e));
        if rect.is_contiguous() {
            self.plan_run(place, rect.start, rect.end(), before, dst_base, out, record);
            return;
        }
        // Row by row, and consecutive rows that lack the same columns from the same sources
        // (a halo column, a tile, the block of a transpose another device wrote) are one
        // strided copy per piece. Where one segment of each map spans a stretch of rows (held
        // there already, a loop's steady state; or missing from one source, a first launch),
        // the stretch is one step: a column of a tall matrix costs the segments it crosses,
        // not its rows (a Gaussian elimination's column at every launch).
        let size = self.coherence.size();
        let (pitch, width) = (rect.pitch, rect.row_bytes);
        // The rows, from the first, whose run ends at or before byte `end`.
        let rows_ending_by = |end: u64| match end.checked_sub(rect.start + width) {
            // Rows `pitch` 0 apart are one row, repeated.
            Some(d) => d.checked_div(pitch).map_or(rect.rows, |q| (q + 1).min(rect.rows)),
            None => 0,
        };
        // Pieces of a row (offsets in the row, source), flat; groups of equal rows.
        let mut pieces: Vec<(u64, u64, Place)> = Vec::new();
        let mut groups: Vec<RowGroup> = Vec::new();
        let (mut now, mut then) = (self.coherence.cursor(), before.cursor());
        let mut r = 0;
        while r < rect.rows {
            let lo = rect.start + r * pitch;
            if lo >= size {
                break;
            }
            let hi = (lo + width).min(size);
            let mark = pieces.len();
            let mut step = 1;
            let s = now.segment_at(lo);
            let t = if s.end >= hi && !s.holders.has(place) { Some(then.segment_at(lo)) } else { None };
            match t {
                None if s.end >= hi => step = rows_ending_by(s.end).max(r + 1) - r,
                Some(t) if t.end >= hi => {
                    step = rows_ending_by(s.end.min(t.end)).max(r + 1) - r;
                    pieces.push((0, hi - lo, source_for(t.holders, place)));
                }
                _ => {
                    for m in now.query(lo, hi).filter(|s| !s.holders.has(place)) {
                        for b in then.query(m.start, m.end) {
                            pieces.push((b.start - lo, b.end - lo, source_for(b.holders, place)));
                        }
                    }
                }
            }
            match groups.last_mut() {
                Some(g) if pieces[g.pieces.clone()] == pieces[mark..] => {
                    g.rows += step;
                    pieces.truncate(mark);
                }
                _ => groups.push(RowGroup { first: r, rows: step, pieces: mark..pieces.len() }),
            }
            r += step;
        }
        for g in &groups {
            let row_start = rect.start + g.first * pitch;
            for &(lo, hi, src) in &pieces[g.pieces.clone()] {
                let src_base = self.addr(src).unwrap_or_else(|e| crate::fatal(&e));
                out.push(Copy {
                    src,
                    src_addr: src_base + row_start + lo,
                    dst: place,
                    dst_addr: dst_base + row_start + lo,
                    rows: g.rows,
                    row_bytes: hi - lo,
                    pitch,
                });
            }
        }
        // `place` holds now what it lacked: the pieces copied (elsewhere it held the rows).
        if record {
            let runs = groups.iter().flat_map(|g| {
                let pieces = &pieces[g.pieces.clone()];
                (g.first..g.first + g.rows).flat_map(move |row| {
                    let row_start = rect.start + row * pitch;
                    pieces.iter().map(move |&(lo, hi, _)| (row_start + lo, row_start + hi))
                })
            });
            self.coherence.add_runs(runs, place);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn plan_run(
        &mut self,
        place: Place,
        lo: u64,
        hi: u64,
        before: &Coherence,
        dst_base: u64,
        out: &mut Vec<Copy>,
        record: bool,
    ) {
        let missing = self.coherence.missing(lo, hi, place);
        for m in &missing {
            for b in before.query(m.start, m.end) {
                let src = source_for(b.holders, place);
                let src_base = self.addr(src).unwrap_or_else(|e| crate::fatal(&e));
                let n = b.end - b.start;
                out.push(Copy {
                    src,
                    src_addr: src_base + b.start,
                    dst: place,
                    dst_addr: dst_base + b.start,
                    rows: 1,
                    row_bytes: n,
                    pitch: n,
                });
            }
        }
        // Where nothing was missing the map stays as it is (a pivot row every device read at
        // the launch before).
        if record && !missing.is_empty() {
            self.coherence.add(lo, hi, place);
        }
    }

    /// The runs of the partial pages ([`watch::edges`]) whose bytes differ from the last
    /// look's (all of them the first time), and keeps the present bytes for the next.
    fn changed_edges(&mut self) -> Vec<(u64, u64)> {
        let mut changed = Vec::new();
        let mut at = 0;
        let first = self.edge_bytes.is_empty();
        for (a, b) in watch::edges(self.start, self.size) {
            // SAFETY: bytes of the tracked buffer, which the program keeps allocated while it
            // is tracked; no launch is writing them (the table is locked).
            let now = unsafe { std::slice::from_raw_parts((self.start + a) as *const u8, (b - a) as usize) };
            if first {
                self.edge_bytes.extend_from_slice(now);
                changed.push((a, b));
            } else {
                let then = &mut self.edge_bytes[at..at + now.len()];
                if then != now {
                    then.copy_from_slice(now);
                    changed.push((a, b));
                }
            }
            at += now.len();
        }
        changed
    }

    /// Before a launch uses the buffer: if the host may have written it since the graph last
    /// did (a new [`HOST_EPOCH`]), the host's copy of what it holds and wrote is the current
    /// one ([`Coherence::host_wins`]). What it wrote is watched ([`watch`]) where possible;
    /// elsewhere, and with `HPVM_MGPU_HOST_WRITES=all`, all it holds counts as written.
    pub(crate) fn account_host_writes(&mut self) {
        self.compare_kept();
        let now = HOST_EPOCH.load(Ordering::Relaxed);
        if self.host_epoch != now && self.host_stores {
            self.absorb_host_writes();
        }
        self.host_epoch = now;
        self.guard_sync();
    }

    /// The host's copy wins where it wrote (see [`Buffer::account_host_writes`]).
    fn absorb_host_writes(&mut self) {
        if !self.host_stores {
            return;
        }
        match host_writes() {
            HostWrites::None => {}
            HostWrites::Assumed => self.coherence.host_wins(),
            HostWrites::Watched => {
                // Where the host wrote: `Some(runs)`, or `None` for everything it holds.
                let seen = match (self.watch, watch::watcher()) {
                    (Watch::Watched, Ok(w)) => {
                        let t = std::time::Instant::now();
                        let mut seen = w.written(self.start, self.size);
                        if !seen.complete {
                            self.watch = Watch::Refused;
                        }
                        seen.runs.extend(self.changed_edges());
                        seen.runs.sort_unstable();
                        let bytes = seen.runs.iter().map(|(a, b)| b - a).sum();
                        sink::record(Event::HostWritesScanned { bytes, nanos: t.elapsed().as_nanos() as u64 });
                        Some(seen.runs)
                    }
                    (Watch::NotYet, Ok(w)) if devices().count() > 0 => {
                        // The first look: all the host holds is its own so far (it was written
                        // before anyone watched); from now on, what it writes is seen.
                        let t = std::time::Instant::now();
                        self.watch = if w.watch(self.start, self.size) { Watch::Watched } else { Watch::Refused };
                        self.changed_edges();
                        sink::record(Event::WatchStarted { bytes: self.size, nanos: t.elapsed().as_nanos() as u64 });
                        None
                    }
                    (_, watcher) => {
                        if self.coherence.holders_beside_host() {
                            say_unwatched(match (watcher, self.watch) {
                                (Err(why), _) => why,
                                _ => "the kernel refused to watch a buffer's memory",
                            });
                        }
                        None
                    }
                };
                match agreed(seen) {
                    Some(runs) => {
                        if self.races_refused {
                            self.refuse_races(&runs);
                        }
                        self.coherence.host_wins_in(runs)
                    }
                    None => self.coherence.host_wins(),
                }
                self.runtime_wrote.clear();
            }
        }
    }

    /// Stops the run where the host wrote (`runs`, from the watch) bytes that a device holds
    /// newer, except in pages the runtime wrote itself since the last scan (a copy back to
    /// the host that ended inside a page leaves it marked written: a race claimed there could
    /// be the runtime's own write).
    fn refuse_races(&self, runs: &[(u64, u64)]) {
        let page = |a: u64| a & !(watch::PAGE - 1);
        let runtime_wrote = |s: &coherence::Segment| {
            let (a, b) = (page(self.start + s.start), page(self.start + s.end - 1) + watch::PAGE);
            self.runtime_wrote.iter().any(|&(x, y)| x < b && a < y)
        };
        // The watch sees pages: a written page all of whose bytes are stale is a race; one
        // only partly stale may have been written beside them, and its stale bytes are
        // compared with the copy kept of them instead ([`Buffer::keep_stale`]).
        let whole = self.wholly_stale_pages();
        let in_whole = self.coherence.stale_for_host(runs).into_iter().flat_map(|s| {
            whole.iter().filter(move |&&(a, b)| a < s.end && s.start < b).map(move |&(a, b)| coherence::Segment {
                start: a.max(s.start),
                end: b.min(s.end),
                holders: s.holders,
            })
        });
        if let Some(stale) = in_whole.into_iter().find(|s| !runtime_wrote(s)) {
            self.raced(stale);
        }
    }

    /// The offsets of the host's pages all of whose bytes a device holds newer.
    fn wholly_stale_pages(&self) -> Vec<(u64, u64)> {
        let (down, up) = (|a: u64| a & !(watch::PAGE - 1), |a: u64| (a + watch::PAGE - 1) & !(watch::PAGE - 1));
        self.stale_runs()
            .into_iter()
            .map(|(a, b)| (up(self.start + a) - self.start, down(self.start + b).saturating_sub(self.start)))
            .filter(|(a, b)| a < b)
            .collect()
    }

    /// The pieces of the stale runs that lie in pages only partly stale: where the watch's
    /// "written" does not say whether the stale bytes were.
    fn partly_stale_pieces(&self) -> Vec<(u64, u64)> {
        let (down, up) = (|a: u64| a & !(watch::PAGE - 1), |a: u64| (a + watch::PAGE - 1) & !(watch::PAGE - 1));
        let mut pieces = Vec::new();
        for (a, b) in self.stale_runs() {
            let (lo, hi) = (
                up(self.start + a).min(self.start + b) - self.start,
                down(self.start + b).max(self.start + a) - self.start,
            );
            if lo >= hi {
                pieces.push((a, b));
                continue;
            }
            if a < lo {
                pieces.push((a, lo));
            }
            if hi < b {
                pieces.push((hi, b));
            }
        }
        pieces
    }

    /// The host wrote bytes of the buffer that a device holds newer (`stale`): it wrote them
    /// while a kernel that writes them had not been waited for. CUDA's managed memory on a GPU
    /// without concurrent managed access (which is what the runtime reports) forbids that; on
    /// one with it, the two writes race. Either way one of them would be lost silently, so the
    /// run stops here, saying where.
    fn raced(&self, stale: coherence::Segment) -> ! {
        let holder = match stale.holders.source() {
            Some(Place::Device(k)) => devices().get(k).name().to_string(),
            _ => "a device".to_string(),
        };
        crate::fatal(&format!(
            "the host wrote bytes {}..{} of the buffer at {:#x} ({} bytes) while {holder} held a newer copy of them: \
             {RACE_ADVICE}",
            stale.start, stale.end, self.start, self.size
        ))
    }

    /// Guards the host's bytes that a device holds newer ([`guard`]) where races are refused:
    /// after anything that may change which they are.
    fn guard_sync(&mut self) {
        if !self.races_refused || host_writes() == HostWrites::None || devices().count() == 0 || !race_guard() {
            self.guard.clear();
            return;
        }
        let mut runs: Vec<guard::StaleRun> = Vec::new();
        for s in self.coherence.segments().filter(|s| !s.holders.has(Place::Host)) {
            let full = runs.len() > guard::RUNS_PER_BUFFER;
            match runs.last_mut() {
                Some(l) if l.end == s.start => l.end = s.end,
                _ if full => break,
                _ => {
                    let holder = match s.holders.source() {
                        Some(Place::Device(k)) => Some(k),
                        _ => None,
                    };
                    runs.push(guard::StaleRun { start: s.start, end: s.end, holder })
                }
            }
        }
        self.guard.sync(self.start, self.size, runs);
    }

    /// Whether races are found by comparing the host's bytes with [`Buffer::kept`] copies:
    /// where they are refused and the watch does not see the host's writes. Not under
    /// `HPVM_MGPU_HOST_WRITES=none`, the program's promise that the host writes nothing.
    fn races_compared(&self) -> bool {
        self.races_refused
            && match host_writes() {
                HostWrites::None => false,
                HostWrites::Assumed => true,
                HostWrites::Watched => self.watch != Watch::Watched,
            }
    }

    /// The byte runs (offsets) where a device holds a newer copy than the host.
    fn stale_runs(&self) -> Vec<(u64, u64)> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for s in self.coherence.segments().filter(|s| !s.holders.has(Place::Host)) {
            match runs.last_mut() {
                Some(l) if l.1 == s.start => l.1 = s.end,
                _ => runs.push((s.start, s.end)),
            }
        }
        runs
    }

    /// After a launch's plan moved the coherence map on: guards the host's bytes wherever a
    /// device now holds them newer ([`guard`]), and keeps a copy of them ([`Buffer::kept`];
    /// under the watch, of those in pages partly stale). Runs kept already were
    /// compared with the host's bytes just before ([`Buffer::account_host_writes`]), so they
    /// are not copied again.
    pub(crate) fn keep_stale(&mut self) {
        self.guard_sync();
        let pieces = if self.races_compared() {
            self.stale_runs()
        } else if self.races_refused && host_writes() == HostWrites::Watched {
            // Watched: only where pages are partly stale (see [`Buffer::refuse_races`]).
            self.partly_stale_pieces()
        } else {
            self.kept.clear();
            return;
        };
        let old = std::mem::take(&mut self.kept);
        for (a, b) in pieces {
            if let Some(k) = old.iter().position(|(o, bytes)| *o == a && bytes.len() as u64 == b - a) {
                self.kept.push((a, old[k].1.clone()));
                continue;
            }
            // SAFETY: bytes of the tracked buffer, which the program keeps allocated while it
            // is tracked; the table is locked, and no device writes the host's copy.
            let now = unsafe { std::slice::from_raw_parts((self.start + a) as *const u8, (b - a) as usize) };
            self.kept.push((a, now.to_vec()));
        }
    }

    /// Compares the host's bytes with the copies [`Buffer::keep_stale`] kept, where a device
    /// still holds them newer: a difference is a host write that raced the kernel, which
    /// stops the run ([`Buffer::raced`]). Then keeps only what is still stale.
    fn compare_kept(&mut self) {
        if self.kept.is_empty() {
            return;
        }
        let stale = self.stale_runs();
        let mut still = Vec::new();
        for (o, bytes) in std::mem::take(&mut self.kept) {
            let end = o + bytes.len() as u64;
            for &(a, b) in stale.iter().filter(|&&(a, b)| a < end && o < b) {
                let (a, b) = (a.max(o), b.min(end));
                let then = &bytes[(a - o) as usize..(b - o) as usize];
                // SAFETY: as in `keep_stale`.
                let now = unsafe { std::slice::from_raw_parts((self.start + a) as *const u8, (b - a) as usize) };
                if let Some(i) = then.iter().zip(now).position(|(x, y)| x != y) {
                    let at = a + i as u64;
                    let holders = self.coherence.query(at, at + 1).next().expect("inside the buffer").holders;
                    self.raced(coherence::Segment { start: a, end: b, holders });
                }
                still.push((a, then.to_vec()));
            }
        }
        self.kept = still;
    }

    /// Makes the host current on `lo..hi` now.
    pub(crate) fn host_current(&mut self, lo: u64, hi: u64) {
        if self.coherence.missing(lo, hi, Place::Host).is_empty() {
            return;
        }
        self.compare_kept();
        // The copies below write the host's pages, some of them guarded.
        self.guard.clear();
        let t = std::time::Instant::now();
        // The copies below write the host's pages, which the watch would take for the
        // program's writes: what the program wrote is taken first, then they are protected
        // again.
        let watched = self.watch == Watch::Watched && self.host_stores && host_writes() == HostWrites::Watched;
        // Under ranks every rank absorbs here alike (it agrees with the others, whatever its
        // own watch's state).
        if watched || (self.host_stores && host_writes() == HostWrites::Watched && crate::ranks::spans_ranks()) {
            self.absorb_host_writes();
        }
        let before = self.coherence.clone();
        let mut copies = Vec::new();
        self.plan_run(Place::Host, lo, hi, &before, self.start, &mut copies, true);
        execute(&copies).unwrap_or_else(|e| crate::fatal(&format!("copying a buffer back to the host: {e}")));
        // Only a watched buffer is scanned (and the list emptied) again.
        if self.races_refused && watched {
            self.runtime_wrote
                .extend(copies.iter().map(|c| (c.dst_addr, c.dst_addr + (c.rows - 1) * c.pitch + c.row_bytes)));
        }
        if watched {
            if let Ok(w) = watch::watcher() {
                for c in &copies {
                    if !w.rearm(c.dst_addr, c.bytes()) {
                        self.watch = Watch::Refused;
                    }
                }
            }
            // The partial pages' bytes to compare the next look with are those just copied
            // in: else a program store of the value they held before the copy (a flag reset
            // to `false` after a kernel set it) matched the old copy and went unseen, and the
            // device's stale value stayed current (tests/cuda/managed_flags.cu).
            if !copies.is_empty() && !self.edge_bytes.is_empty() {
                self.changed_edges();
            }
        }
        self.guard_sync();
        sink::record(Event::ToHost { nanos: t.elapsed().as_nanos() as u64 });
    }

    /// Frees the device copies and unlocks the pages.
    fn release(mut self) {
        self.guard.clear();
        crash::forget_buffer(self.start);
        if self.allocs.iter().all(Option::is_none) && !self.pinned {
            return;
        }
        self.unmap_all();
        let devs = devices();
        for (k, a) in self.allocs.iter().enumerate() {
            if self.in_bank.get(k).copied().unwrap_or(false) {
                continue;
            }
            if let Some(a) = a {
                // As `alloc_on` decided: a reservation, or a whole allocation.
                let sparse = residency::sparse() && devs.get(k).granule().is_some();
                let freed = if sparse { devs.get(k).unreserve(*a) } else { devs.get(k).free(*a) };
                if let Err(e) = freed {
                    crate::fatal(&format!("freeing a buffer on {}: {e}", devs.get(k).name()));
                }
            }
        }
        if self.pinned {
            if let Some(g) = devs.gpus.first() {
                g.unpin_host(self.start as *mut u8);
            }
        }
    }
}

/// The holder among `h` that `dst` copies from ([`Holders::source`]). Under ranks, a device
/// of `dst`'s own rank comes first, then the host (every rank has it), and only then another
/// rank's device: bytes cross the network only when no one nearer holds them. Every rank
/// chooses alike (it depends on the devices' ranks only).
fn source_for(h: Holders, dst: Place) -> Place {
    let devs = devices();
    if let (Place::Device(e), true) = (dst, devs.spans_ranks()) {
        let rank = devs.owner(e);
        let near = (0..devs.count()).find(|&k| devs.owner(k) == rank && h.has(Place::Device(k)));
        if let Some(k) = near {
            return Place::Device(k);
        }
        if h.has(Place::Host) {
            return Place::Host;
        }
    }
    h.source().expect("every byte has a holder")
}

/// Under ranks, where the host wrote a buffer as every rank sees it: each rank's watch is its
/// own (the pages it reports depend on where its allocator put the buffer, and a rank's
/// kernel may refuse to watch), so the ranks compare what they saw, by two independent
/// 64-bit hashes, and where any differs every byte the host holds counts as written, on
/// every rank alike. `None`: everything the host holds.
fn agreed(seen: Option<Vec<(u64, u64)>>) -> Option<Vec<(u64, u64)>> {
    let Some(w) = crate::ranks::world().filter(|w| w.size > 1) else { return seen };
    let hash = |seed: u64, prime: u64| {
        let mut h = seed;
        for &(a, b) in seen.iter().flatten() {
            for v in [a, b] {
                h = (h ^ v).wrapping_mul(prime);
            }
        }
        h
    };
    let (h1, h2) = match &seen {
        Some(_) => (hash(0xcbf2_9ce4_8422_2325, 0x100_0000_01b3), hash(0x9e37_79b9_7f4a_7c15, 0xff51_afd7_ed55_8ccd)),
        None => (u64::MAX, u64::MAX),
    };
    let same = |all: Vec<u64>, mine: u64| all.iter().all(|&x| x == mine & crate::ranks::VALUE_BITS);
    // Both gathers always run, so that every rank makes the same calls.
    let first = same(w.allgather(crate::ranks::Step::HostWrites, h1), h1);
    let second = same(w.allgather(crate::ranks::Step::HostWrites, h2), h2);
    seen.filter(|_| first && second)
}

/// Runs copies (each on its device's stream), waits for them, and counts their bytes.
pub fn execute(copies: &[Copy]) -> Result<(), String> {
    let used = enqueue(copies)?;
    let devs: &Devices = devices();
    for k in 0..devs.count() {
        if used & (1 << k) != 0 {
            devs.get(k).synchronize()?;
        }
    }
    Ok(())
}

/// Enqueues copies, each on its device's stream, and counts their bytes; returns the set of
/// devices that got some (bit `k` for device `k`). The caller synchronizes them. Under ranks,
/// this rank does its part of each copy ([`crossing`]); what crosses ranks has arrived when
/// this returns.
pub fn enqueue(copies: &[Copy]) -> Result<u128, String> {
    let devs: &Devices = devices();
    if !devs.spans_ranks() {
        return enqueue_here(copies);
    }
    let (mut here, mut crossing) = (Vec::new(), Vec::new());
    for (i, c) in copies.iter().enumerate() {
        match crossing::part(devs, c) {
            crossing::Part::Local => here.push(*c),
            crossing::Part::LocalThenShare => {
                here.push(*c);
                crossing.push((i, *c));
            }
            crossing::Part::None => {}
            crossing::Part::Send { .. } | crossing::Part::Receive { .. } => crossing.push((i, *c)),
        }
    }
    let used = enqueue_here(&here)?;
    if !crossing.is_empty() {
        // What goes on to other ranks must have arrived here first.
        for k in (0..devs.count()).filter(|k| used & 1 << k != 0) {
            devs.get(k).synchronize()?;
        }
        crossing::exchange(&crossing)?;
    }
    Ok(used)
}

/// [`enqueue`] of copies between this process's own places.
fn enqueue_here(copies: &[Copy]) -> Result<u128, String> {
    let devs: &Devices = devices();
    let used = copies.iter().fold(0u128, |u, c| u | 1 << c.executor());
    let run = |k: usize| -> Result<(), String> {
        for c in copies.iter().filter(|c| c.executor() == k) {
            devs.get(k).copy(c).map_err(|e| format!("{}: {e}", devs.get(k).name()))?;
            sink::record(Event::Copied { from: c.src.index(), to: c.dst.index(), bytes: c.bytes() });
        }
        Ok(())
    };
    let devices: Vec<usize> = (0..devs.count()).filter(|k| used & 1 << k != 0).collect();
    // A staged host copy keeps its thread busy until its last slot is filled (or drained):
    // with several GPUs receiving them, each gets its own thread so their DMAs overlap.
    let staged = |c: &Copy| {
        (c.src == Place::Host || c.dst == Place::Host)
            && c.bytes() >= STAGE_AT_LEAST
            && !pinning()
            && !in_place::host_side(c)
    };
    if devices.len() < 2 || !devs.on_gpus() || !copies.iter().any(staged) {
        return devices.into_iter().try_for_each(run).map(|()| used);
    }
    std::thread::scope(|s| {
        let threads: Vec<_> = devices
            .iter()
            .map(|&k| {
                std::thread::Builder::new()
                    .name(format!("hpvm-copy-{k}"))
                    .spawn_scoped(s, move || run(k))
                    .unwrap_or_else(|e| crate::fatal(&format!("cannot start a copying thread: {e}")))
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|_| crate::fatal("a copying thread failed")))
            .collect::<Result<Vec<()>, String>>()
    })?;
    Ok(used)
}

/// Tracks a buffer the host's code may store into between launches (HPVM-C's
/// `llvm_hpvm_track_mem`).
pub fn track(ptr: usize, bytes: usize) {
    table().track(ptr as u64, bytes as u64, true);
    large_buffer(bytes);
}

/// Tracks CUDA managed (or mapped) memory: the host stores into it too, but only after it
/// has waited for the kernels that write it; a store that races one stops the run
/// ([`Buffer::raced`]) instead of being lost.
pub fn track_managed(ptr: usize, bytes: usize) {
    let mut t = table();
    t.track(ptr as u64, bytes as u64, true);
    t.buffers.get_mut(&(ptr as u64)).expect("tracked above").races_refused = true;
    drop(t);
    large_buffer(bytes);
}

/// Counts a buffer the program allocated: once its buffers come to
/// [`crate::devices::opening::open_at`] bytes in all (a setting; by default never), its other
/// GPUs start opening ([`crate::devices::opening`]).
fn large_buffer(bytes: usize) {
    static ALLOCATED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let total = ALLOCATED.fetch_add(bytes as u64, std::sync::atomic::Ordering::Relaxed) + bytes as u64;
    if total >= crate::devices::opening::open_at() {
        crate::devices::opening::want_all();
    }
}

/// Tracks a buffer the host changes only through calls that report each change
/// ([`host_overwrites`]): `__device__` variables, whose host copy holds their initial value.
pub fn track_device(ptr: usize, bytes: usize) {
    table().track(ptr as u64, bytes as u64, false);
}

/// Tracks CUDA device memory (`cudaMalloc`): as with CUDA, it lives on the GPU from the
/// start, so device 0 is made its holder (whatever it contains is what CUDA's would: that
/// GPU's fresh memory), and the host copy becomes current only where the host asks. A launch
/// that writes memory nobody wrote before then moves nothing. Without devices, and under a
/// device memory limit (`residency`), the host holds it. Fails (nothing tracked) when device 0
/// cannot hold it.
pub fn track_on_device(ptr: usize, bytes: usize) -> Result<(), String> {
    let mut t = table();
    let start = ptr as u64;
    t.track(start, bytes as u64, false);
    // Under a memory limit nothing is backed before a launch needs it: the host holds it.
    if devices().count() == 0 || bytes == 0 || residency::limit().is_some() {
        return Ok(());
    }
    let mut made = if residency::sparse() {
        let need = residency::Need { buffer: start, device: 0, lo: 0, hi: bytes as u64 };
        t.make_resident(&[need]).map_err(|e| e.describe(&|_| None))
    } else {
        t.allocate(&[(start, 0)]).map_err(|e| e.message)
    };
    // Under ranks only device 0's rank really allocates: every rank answers as it does.
    if let Some(w) = crate::ranks::world().filter(|w| w.size > 1) {
        let owner = devices().owner(0);
        if w.allgather(crate::ranks::Step::Allocation, u64::from(made.is_ok()))[owner] == 0 && made.is_ok() {
            made = Err(format!("{} (rank {owner}) could not allocate it", devices().get(0).name()));
        }
    }
    if let Err(e) = made {
        if let Some(buf) = t.buffers.remove(&start) {
            buf.release();
        }
        return Err(e);
    }
    let buf = t.buffers.get_mut(&start).expect("tracked above");
    buf.coherence = Coherence::new(buf.size, Holders::device(0));
    drop(t);
    large_buffer(bytes);
    Ok(())
}

pub fn untrack(ptr: usize) {
    inflight::drain();
    let mut t = table();
    if let Some(buf) = t.buffers.get_mut(&(ptr as u64)) {
        let size = buf.size;
        buf.host_current(0, size);
    }
    if let Some(buf) = t.buffers.remove(&(ptr as u64)) {
        buf.release();
    }
}

/// `llvm_hpvm_request_mem`: the host copy of `[ptr, ptr + bytes)` becomes current.
pub fn request(ptr: usize, bytes: usize) {
    sink::record(Event::Requested { bytes: bytes as u64 });
    host_access(ptr, bytes, false);
}

/// Before the host touches `[ptr, ptr + bytes)` (a host node, a request): the host copy is
/// made current there, and if the host writes it, the devices' copies of it become stale.
/// Untracked memory is the host's alone. `bytes` 0 means the rest of the buffer.
pub fn host_access(ptr: usize, bytes: usize, write: bool) {
    inflight::drain();
    let mut t = table();
    let (ptr, bytes) = (ptr as u64, bytes as u64);
    let Some(start) = t.containing(ptr, bytes) else { return };
    let buf = t.buffers.get_mut(&start).expect("found above");
    let lo = ptr - start;
    let hi = if bytes == 0 { buf.size } else { lo + bytes };
    buf.host_current(lo, hi);
    if write {
        buf.coherence.set_only(lo, hi, Place::Host);
        buf.guard_sync();
    }
}

/// Makes the host's copy of `[ptr, ptr + bytes)` current for the runtime to read (a launcher
/// reading the values a kernel loads from a `__constant__` variable): nothing is waited for
/// where the host holds it already, which is the rule (`cudaMemcpyToSymbol` keeps it so).
pub fn host_reads(ptr: usize, bytes: usize) {
    {
        let t = table();
        let Some(start) = t.containing(ptr as u64, bytes as u64) else { return };
        let buf = t.get(start).expect("found above");
        let lo = ptr as u64 - start;
        if buf.coherence.missing(lo, lo + bytes as u64, Place::Host).is_empty() {
            return;
        }
    }
    host_access(ptr, bytes, false);
}

/// Before the host runs a leaf that may reach any tracked buffer (one that keeps pointers in
/// memory, [`crate::desc::NodeDesc::indirect`]): every buffer's host copy made current, and
/// the host the only holder of all of it, since the leaf may write anywhere. In the order the
/// buffers were tracked, as every rank must copy alike.
pub fn host_access_all() {
    inflight::drain();
    let mut t = table();
    let mut ids: Vec<(u64, u64)> = t.buffers.values().map(|b| (b.id, b.start)).collect();
    ids.sort_unstable();
    for (_, start) in ids {
        let buf = t.buffers.get_mut(&start).expect("listed above");
        let size = buf.size;
        buf.host_current(0, size);
        buf.coherence.set_only(0, size, Place::Host);
        buf.guard_sync();
    }
}

impl Table {
    /// Before device `k` runs a leaf that may reach any tracked buffer through the pointers
    /// it keeps in memory (a translated leaf, [`crate::devices::addresses`]): every buffer current on `k`,
    /// and `k` the only holder of all of it after, since the leaf may write anywhere. In the
    /// order the buffers were tracked. Returns `k`'s address table. `Err`, before any copy,
    /// where `k` cannot hold every buffer.
    pub fn all_current_on(&mut self, k: usize) -> Result<crate::devices::addresses::Addresses, String> {
        let mut ids: Vec<(u64, u64)> = self.buffers.values().map(|b| (b.id, b.start)).collect();
        ids.sort_unstable();
        if residency::sparse() {
            let needs: Vec<residency::Need> = ids
                .iter()
                .map(|&(_, start)| residency::Need { buffer: start, device: k, lo: 0, hi: self.buffers[&start].size })
                .collect();
            self.make_resident(&needs).map_err(|e| e.describe(&|_| None))?;
        }
        let needs: Vec<(u64, usize)> = ids.iter().map(|&(_, start)| (start, k)).collect();
        self.allocate(&needs).map_err(|e| e.message)?;
        let mut copies = Vec::new();
        let mut ranges = Vec::new();
        for &(_, start) in &ids {
            let buf = self.buffers.get_mut(&start).expect("listed above");
            buf.account_host_writes();
            let before = buf.coherence.clone();
            let base = buf.addr(Place::Device(k))?;
            buf.plan_run(Place::Device(k), 0, buf.size, &before, base, &mut copies, false);
            ranges.push((start, buf.size, base));
        }
        if !copies.is_empty() {
            // Their sources may still be being written by launches in flight. Where nothing
            // moves (a loop's later launches), the launch follows the device's own work in
            // its stream, and no other device's work is waited for.
            inflight::drain();
            execute(&copies)?;
        }
        for &(_, start) in &ids {
            let buf = self.buffers.get_mut(&start).expect("listed above");
            let size = buf.size;
            buf.coherence.set_only(0, size, Place::Device(k));
        }
        Ok(crate::devices::addresses::Addresses::new(ranges))
    }
}

/// The host overwrites every byte of `[ptr, ptr + bytes)` now (a copy into device memory
/// through the CUDA API, a memset): the devices' copies of it become stale, and nothing is
/// copied back first. Untracked memory is the host's alone.
pub fn host_overwrites(ptr: usize, bytes: usize) {
    inflight::drain();
    let mut t = table();
    let (ptr, bytes) = (ptr as u64, bytes as u64);
    let Some(start) = t.containing(ptr, bytes) else { return };
    let buf = t.buffers.get_mut(&start).expect("found above");
    let lo = ptr - start;
    buf.coherence.set_only(lo, lo + bytes, Place::Host);
    buf.guard_sync();
}

/// Every device receives `[ptr, ptr + bytes)` now, from its current holders (CUDA's
/// `cudaMemcpy` into device memory, which completes its transfer before returning): a launch
/// then finds it in place. Untracked memory, and a run without devices, are left alone; so
/// is every copy under a device memory limit (`residency`): devices then back only what
/// launches need, and receive it then.
pub fn push_to_devices(ptr: usize, bytes: usize) {
    let n = devices().count();
    // Under a memory limit devices back only what launches need: the copy stays lazy.
    if n == 0 || bytes == 0 || residency::limit().is_some() {
        return;
    }
    inflight::drain();
    // GPUs not open yet receive it when a launch first needs it there.
    let devs = devices();
    let open: Vec<usize> = (0..n).filter(|&k| devs.is_open(k)).collect();
    let mut t = table();
    let (ptr, bytes) = (ptr as u64, bytes as u64);
    let Some(start) = t.containing(ptr, bytes) else { return };
    let (lo, hi) = (ptr - start, ptr - start + bytes);
    t.back_for_copy_in(start, &open, lo, hi);
    let buf = t.buffers.get_mut(&start).expect("found above");
    let before = buf.coherence.clone();
    let mut copies = Vec::new();
    for &k in &open {
        let base = buf.addr(Place::Device(k)).unwrap_or_else(|e| crate::fatal(&e));
        buf.plan_run(Place::Device(k), lo, hi, &before, base, &mut copies, true);
    }
    execute(&copies).unwrap_or_else(|e| crate::fatal(&format!("copying into device memory: {e}")));
}

/// CUDA's `cudaMemcpy` from the program's memory at `src` into device memory
/// `[ptr, ptr + bytes)`, as CUDA does it: the bytes go straight to the open devices, which
/// become the only holders of that range; the host's copy of it is not written (its pages
/// are not even touched: a fresh `cudaMalloc` of a GiB costs no host memory). False, and
/// nothing done, where the caller must go through the host's copy (see [`write_on_devices`]).
///
/// `in_flight` (`cudaMemcpyAsync`): on GPUs, a copy the driver takes straight from the
/// program's bytes (under [`STAGE_AT_LEAST`]) is left in flight, ordered after the work in
/// flight and before what follows, as CUDA's returns once the driver has read the bytes
/// (HeCBench streamCreateCopyDestroy spent half its time waiting for 16 KB copies).
pub fn copy_from_program(ptr: usize, bytes: usize, src: *const u8, in_flight: bool) -> bool {
    // From page-locked memory the DMA reads the program's bytes when the stream gets there,
    // as CUDA's does: the program may not change them before it synchronizes.
    let direct = (bytes as u64) < STAGE_AT_LEAST || in_place::holds(src as u64, bytes as u64);
    let in_flight = in_flight && devices().on_gpus() && direct;
    write_on_devices(ptr, bytes, "copying into device memory", in_flight, |targets| {
        let copies: Vec<Copy> = targets
            .iter()
            .map(|&(k, dst_addr)| Copy {
                src: Place::Host,
                src_addr: src as u64,
                dst: Place::Device(k),
                dst_addr,
                rows: 1,
                row_bytes: bytes as u64,
                pitch: bytes as u64,
            })
            .collect();
        enqueue(&copies).map(|_| ())
    })
}

/// CUDA's `cudaMemset` of tracked memory `[ptr, ptr + bytes)` to `byte`, done where CUDA does
/// it: on every open device, which become its only holders (the host's copy is not written).
/// On GPUs it is left in flight, as CUDA's memsets of device memory return before they are
/// done (even `cudaMemset`'s): a loop that clears a buffer between kernels waited for the
/// GPU at every clear. False, and nothing done, where the caller must go through the host's
/// copy.
pub fn fill_on_devices(ptr: usize, bytes: usize, byte: u8) -> bool {
    write_on_devices(ptr, bytes, "setting device memory", devices().on_gpus(), |targets| {
        let devs = devices();
        targets.iter().try_for_each(|&(k, addr)| devs.get(k).fill(addr, byte, bytes as u64))
    })
}

/// Writes tracked memory `[ptr, ptr + bytes)` on every open device, as CUDA's copies and
/// fills into device memory do: `write` enqueues on each device at the address of the range
/// in its copy (backed first), and the devices become the range's only holders. It has
/// completed on return, unless `in_flight`: then it is left in flight on the GPUs, after
/// everything there ([`inflight::Slots::take`]). False, and nothing done, where the caller
/// must go through the host's copy: no open device, a memory limit (devices back only what
/// launches need), ranks, a buffer the host stores into directly (managed memory, HPVM-C
/// buffers), or untracked memory. GPUs not open yet get the range when a launch first needs
/// it there.
fn write_on_devices(
    ptr: usize,
    bytes: usize,
    what: &str,
    in_flight: bool,
    write: impl FnOnce(&[(usize, u64)]) -> Result<(), String>,
) -> bool {
    let devs = devices();
    let n = devs.count();
    if n == 0 || bytes == 0 || residency::limit().is_some() || devs.spans_ranks() {
        return false;
    }
    if !in_flight {
        inflight::drain();
    }
    let open: Vec<usize> = (0..n).filter(|&k| devs.is_open(k)).collect();
    if open.is_empty() {
        return false;
    }
    let fail = |e: String| -> ! { crate::fatal(&format!("{what}: {e}")) };
    // The table before the state in flight, as a launch takes them.
    let mut t = table();
    let (ptr, bytes) = (ptr as u64, bytes as u64);
    let Some(start) = t.containing(ptr, bytes).filter(|s| !t.buffers[s].host_stores) else { return false };
    let (lo, hi) = (ptr - start, ptr - start + bytes);
    t.back_for_copy_in(start, &open, lo, hi);
    let buf = t.buffers.get_mut(&start).expect("found above");
    let targets: Vec<(usize, u64)> =
        open.iter().map(|&k| (k, buf.addr(Place::Device(k)).unwrap_or_else(|e| crate::fatal(&e)) + lo)).collect();
    // In flight on one GPU, given one of the program's streams: on its lane, after only what
    // overwriting these bytes conflicts with.
    let span = inflight::Span { buffer: buf.id, start: lo, end: hi };
    let lane = match (in_flight, &open[..]) {
        (true, &[k]) => {
            let fp = inflight::Footprint { writes: vec![span], ..Default::default() };
            inflight::Slots::take_on_lane(k, &fp).unwrap_or_else(|e| fail(e))
        }
        _ => None,
    };
    if let Some((slots, s)) = lane {
        crate::devices::cuda::on_lane(s.lane, || write(&targets)).unwrap_or_else(|e| fail(e));
        slots.leave_on_lane(s, &[inflight::Access::Wrote(span)], None).unwrap_or_else(|e| fail(e));
    } else {
        // In flight: after whatever the GPUs still do (it may read the bytes overwritten here).
        let slots = in_flight
            .then(|| inflight::Slots::take(&open, &inflight::DeviceList::from_elem(0, n)).unwrap_or_else(|e| fail(e)));
        write(&targets).unwrap_or_else(|e| fail(e));
        match slots {
            Some(slots) => slots.leave(&open, None),
            None => {
                for &k in &open {
                    devs.get(k).synchronize().unwrap_or_else(|e| fail(e));
                }
            }
        }
    }
    buf.coherence.set_only(lo, hi, Place::Device(open[0]));
    for &k in &open[1..] {
        buf.coherence.add(lo, hi, Place::Device(k));
    }
    true
}

/// CUDA's `cudaMemcpy` from device memory `[ptr, ptr + bytes)` into the program's memory at
/// `dst`, as CUDA does it: each part comes from one of its current holders straight into
/// `dst` (from the host's copy only where the host holds it), and who holds what does not
/// change. False, and nothing done, where the caller must go through the host's copy: ranks,
/// a buffer the host stores into directly, or untracked memory.
///
/// `in_flight` (`cudaMemcpyAsync`): on GPUs, a copy into page-locked memory
/// ([`in_place`]) of bytes only devices hold is left in flight after the work there, as
/// CUDA's returns at once; the program reads `dst` only after it synchronizes (a kernel
/// spinning on a latch the host sets later may still hold the stream). Where the host's copy
/// holds some of them, the copy waits for the work in flight first, as before: its host part
/// is a `memcpy` now, which must land after whatever the streams still write into `dst`.
pub fn copy_to_program(ptr: usize, bytes: usize, dst: *mut u8, in_flight: bool) -> bool {
    if bytes == 0 || devices().spans_ranks() {
        return false;
    }
    let in_flight = in_flight
        && devices().on_gpus()
        && in_place::holds(dst as u64, bytes as u64)
        && !host_holds_any(ptr as u64, bytes as u64);
    if !in_flight {
        inflight::drain();
    }
    let mut t = table();
    let (ptr, bytes) = (ptr as u64, bytes as u64);
    let Some(start) = t.containing(ptr, bytes).filter(|s| !t.buffers[s].host_stores) else { return false };
    sink::record(Event::Requested { bytes });
    let clock = std::time::Instant::now();
    let buf = t.buffers.get_mut(&start).expect("found above");
    let (lo, hi) = (ptr - start, ptr - start + bytes);
    let parts: Vec<coherence::Segment> = buf.coherence.query(lo, hi).collect();
    let mut copies = Vec::new();
    for part in parts {
        let at = dst as u64 + (part.start - lo);
        let n = part.end - part.start;
        if part.holders.has(Place::Host) {
            // SAFETY: `n` bytes of the tracked buffer's host copy, which is current there, into
            // the program's destination of `bytes` bytes (CUDA's contract: it does not overlap
            // device memory).
            unsafe { std::ptr::copy_nonoverlapping((start + part.start) as *const u8, at as *mut u8, n as usize) };
            continue;
        }
        let src = source_for(part.holders, Place::Host);
        let base = buf.addr(src).unwrap_or_else(|e| crate::fatal(&e));
        copies.push(Copy {
            src,
            src_addr: base + part.start,
            dst: Place::Host,
            dst_addr: at,
            rows: 1,
            row_bytes: n,
            pitch: n,
        });
    }
    let fail = |e: String| -> ! { crate::fatal(&format!("copying device memory to the host: {e}")) };
    if in_flight && !copies.is_empty() {
        let n = devices().count();
        let used: Vec<usize> = (0..n).filter(|&k| copies.iter().any(|c| c.src == Place::Device(k))).collect();
        // From one GPU, given one of the program's streams: on its lane, after only what
        // writes these bytes.
        let span = inflight::Span { buffer: buf.id, start: lo, end: hi };
        let lane = match &used[..] {
            &[k] => {
                let fp = inflight::Footprint { uses: vec![span], ..Default::default() };
                inflight::Slots::take_on_lane(k, &fp).unwrap_or_else(|e| fail(e))
            }
            _ => None,
        };
        if let Some((slots, s)) = lane {
            crate::devices::cuda::on_lane(s.lane, || enqueue(&copies)).unwrap_or_else(|e| fail(e));
            slots.leave_on_lane(s, &[inflight::Access::Used(span)], None).unwrap_or_else(|e| fail(e));
        } else {
            // After whatever the GPUs still do (it may write the bytes copied here).
            let slots =
                inflight::Slots::take(&used, &inflight::DeviceList::from_elem(0, n)).unwrap_or_else(|e| fail(e));
            enqueue(&copies).unwrap_or_else(|e| fail(e));
            slots.leave(&used, None);
        }
    } else {
        execute(&copies).unwrap_or_else(|e| fail(e));
    }
    sink::record(Event::ToHost { nanos: clock.elapsed().as_nanos() as u64 });
    true
}

/// Whether the host's copy holds (is current for) any byte of tracked memory
/// `[ptr, ptr + bytes)`; false for untracked memory.
fn host_holds_any(ptr: u64, bytes: u64) -> bool {
    let t = table_read();
    let Some(start) = t.0.containing(ptr, bytes) else { return false };
    let (lo, hi) = (ptr - start, ptr - start + bytes);
    let held = t.0.buffers[&start].coherence.query(lo, hi).any(|part| part.holders.has(Place::Host));
    held
}

/// The tracked buffer holding `[ptr, ptr + bytes)`: its start and size.
pub fn tracked(ptr: usize, bytes: usize) -> Option<(usize, usize)> {
    thread_local! {
        /// Buffers this thread found lately, with the [`epoch`] they were found at: the set of
        /// tracked buffers changes only under [`table`], which moves the epoch, so a buffer
        /// found at the present epoch is still there (a CUDA launcher asks for each pointer
        /// argument's buffer at every launch).
        static FOUND: std::cell::Cell<[(u64, usize, usize); 4]> = const { std::cell::Cell::new([(u64::MAX, 0, 0); 4]) };
    }
    let now = epoch();
    let found = FOUND.with(|f| f.get());
    let end = ptr.checked_add(bytes)?;
    if let Some(&(_, s, n)) = found.iter().find(|&&(e, s, n)| e == now && s <= ptr && end <= s + n) {
        return Some((s, n));
    }
    let t = table_read();
    let start = t.containing(ptr as u64, bytes as u64)?;
    let hit = (start as usize, t.buffers[&start].size as usize);
    // The epoch read under the lock: no change is under way.
    let now = epoch();
    FOUND.with(|f| {
        let mut v = f.get();
        v.rotate_right(1);
        v[0] = (now, hit.0, hit.1);
        f.set(v);
    });
    Some(hit)
}

/// A launch's argument bytes as every process of a run over ranks sees them (what the ranks
/// compare, [`crate::ranks::note_launch`]): integers and floats kept, except that a 64-bit
/// integer holding an address into a tracked buffer (Thrust and CUB pass pointers so)
/// becomes the buffer's size and the offset, since addresses differ between processes; other
/// values (pointers, structs that may hold pointers or padding) zeroed.
pub fn rank_stable_args(params: &[crate::desc::ValueDesc], args: &[u8]) -> Vec<u8> {
    use crate::desc::ScalarKind;
    let mut out = args.to_vec();
    for p in params {
        let Some(bytes) = out.get_mut(p.offset as usize..(p.offset + p.size) as usize) else { continue };
        match p.kind {
            ScalarKind::Int if bytes.len() == 8 => {
                let v = u64::from_le_bytes((&*bytes).try_into().expect("8 bytes"));
                if let Some((start, size)) = tracked(v as usize, 0) {
                    let stable = (size as u64).rotate_left(32) ^ (v - start as u64);
                    bytes.copy_from_slice(&stable.to_le_bytes());
                }
            }
            ScalarKind::Int | ScalarKind::Float => {}
            _ => bytes.fill(0),
        }
    }
    out
}

/// Stops tracking the buffer that starts at `ptr` without making the host current: its
/// contents are dead (the program frees it). False when no buffer starts there.
pub fn discard(ptr: usize) -> bool {
    inflight::drain();
    let removed = table().buffers.remove(&(ptr as u64));
    removed.map(Buffer::release).is_some()
}

/// At cleanup: host copies made current, device copies freed. At the process's exit
/// (`at_exit`), memory the host's code neither stores into nor reads (CUDA's device memory,
/// `host_stores` false: only API calls read it, and none comes after the exit) is freed
/// without being copied back, as NVIDIA's runtime leaves it to the driver's teardown: a
/// program that never frees its buffers paid a copy of all of them at its end.
pub fn forget_all(at_exit: bool) {
    inflight::drain();
    // In the order they were tracked, not by address: under ranks every rank must copy them
    // back in the same order, and addresses differ between processes.
    let mut starts: Vec<(u64, u64, bool)> = table().buffers.values().map(|b| (b.id, b.start, b.host_stores)).collect();
    starts.sort_unstable();
    for (_, s, host_stores) in starts {
        if at_exit && !host_stores {
            discard(s as usize);
        } else {
            untrack(s as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fakes::{buffer, device_base, Memories, HOST};
    use super::*;
    use crate::testing::numbers;

    /// The watch sees pages: of the bytes a device holds newer, those in pages wholly stale
    /// are a race wherever a page is written; those in pages only partly stale are the ones
    /// compared byte by byte. Together they are exactly the stale bytes.
    #[test]
    fn stale_bytes_split_into_whole_pages_and_pieces_of_pages() {
        let page = watch::PAGE;
        let mut buf = buffer(3 * page + 100, 2);
        assert_eq!(HOST % page, 0);
        buf.coherence.set_only(100, 2 * page + 808, Place::Device(0));
        buf.coherence.set_only(3 * page + 10, 3 * page + 20, Place::Device(1));
        assert_eq!(buf.wholly_stale_pages(), vec![(page, 2 * page)]);
        assert_eq!(
            buf.partly_stale_pieces(),
            vec![(100, page), (2 * page, 2 * page + 808), (3 * page + 10, 3 * page + 20)]
        );
        // A run of whole pages has no pieces; a run inside one page has no whole page.
        let mut buf = buffer(4 * page, 1);
        buf.coherence.set_only(page, 3 * page, Place::Device(0));
        assert_eq!(buf.wholly_stale_pages(), vec![(page, 3 * page)]);
        assert!(buf.partly_stale_pieces().is_empty());
        let mut buf = buffer(4 * page, 1);
        buf.coherence.set_only(page + 1, page + 2, Place::Device(0));
        assert!(buf.wholly_stale_pages().is_empty());
        assert_eq!(buf.partly_stale_pieces(), vec![(page + 1, page + 2)]);
    }

    /// The property the partitioned launch rests on: after the planned copies, a place that
    /// reads a rectangle holds the latest value of every byte of it, whoever wrote it last;
    /// copies never leave the buffer. Random launches of reads then writes on random
    /// rectangles, checked against the values each byte was last given.
    #[test]
    fn planned_copies_bring_the_latest_values() {
        let mut next = numbers(7);
        for round in 0..60 {
            let (rows, row_len) = (1 + next(12), 1 + next(16));
            let size = rows * row_len;
            let devices = 1 + next(4) as usize;
            let mut buf = buffer(size, devices);
            let mut latest: Vec<u32> = (0..size as u32).collect();
            let mut mem = Memories { host: latest.clone(), devices: vec![vec![u32::MAX; size as usize]; devices] };
            let mut version = size as u32;
            for _ in 0..40 {
                let place = if next(5) == 0 { Place::Host } else { Place::Device(next(devices as u64) as usize) };
                let r0 = next(rows);
                let c0 = next(row_len);
                let rect = ByteRect {
                    start: r0 * row_len + c0,
                    rows: 1 + next(rows - r0),
                    row_bytes: 1 + next(row_len - c0),
                    pitch: row_len,
                };
                let before = buf.coherence.clone();
                let mut copies = Vec::new();
                buf.plan_current(place, &rect, &before, &mut copies, true);
                for c in &copies {
                    let (lo, hi) = (c.dst_addr, c.dst_addr + (c.rows - 1) * c.pitch + c.row_bytes);
                    let base = if c.dst == Place::Host { HOST } else { device_base(c.executor()) };
                    assert!(lo >= base && hi <= base + size, "round {round}: a copy past the buffer: {c:?}");
                }
                mem.run(&copies);
                for (lo, hi) in rect.row_runs() {
                    for b in lo..hi {
                        assert_eq!(
                            mem.place(place)[b as usize],
                            latest[b as usize],
                            "round {round}: byte {b} at {place:?}"
                        );
                    }
                }
                // Then the place writes part of what it read (a launch's exact writes).
                if next(2) == 0 {
                    for (lo, hi) in rect.row_runs().take(1 + next(rect.rows) as usize) {
                        for b in lo..hi {
                            version += 1;
                            latest[b as usize] = version;
                            mem.place(place)[b as usize] = version;
                        }
                        buf.coherence.set_only(lo, hi, place);
                    }
                }
            }
        }
    }

    /// A transpose's read after a launch split by rows: the rows the other device wrote are
    /// one strided copy, not one copy per row.
    #[test]
    fn equal_consecutive_rows_are_one_strided_copy() {
        let (rows, row_len) = (8u64, 64u64);
        let mut buf = buffer(rows * row_len, 2);
        buf.coherence.set_only(0, 4 * row_len, Place::Device(0));
        buf.coherence.set_only(4 * row_len, 8 * row_len, Place::Device(1));
        let before = buf.coherence.clone();
        let mut copies = Vec::new();
        let left_half = ByteRect { start: 0, rows, row_bytes: row_len / 2, pitch: row_len };
        buf.plan_current(Place::Device(0), &left_half, &before, &mut copies, true);
        assert_eq!(copies.len(), 1, "{copies:?}");
        let c = copies[0];
        assert_eq!((c.src, c.rows, c.row_bytes, c.pitch), (Place::Device(1), 4, row_len / 2, row_len));
        assert_eq!(c.src_addr, device_base(1) + 4 * row_len);
        assert_eq!(c.dst_addr, device_base(0) + 4 * row_len);
    }

    /// A strided read of what one holder holds whole (a first launch: the host has it all) is
    /// one strided copy, planned without going row by row.
    #[test]
    fn a_strided_read_from_one_holder_is_one_copy() {
        let mut buf = buffer(512 * 100, 2);
        let before = buf.coherence.clone();
        let mut copies = Vec::new();
        let column = ByteRect { start: 64, rows: 99, row_bytes: 32, pitch: 512 };
        buf.plan_current(Place::Device(1), &column, &before, &mut copies, true);
        assert_eq!(copies.len(), 1, "{copies:?}");
        let c = copies[0];
        assert_eq!((c.src, c.src_addr, c.rows, c.row_bytes, c.pitch), (Place::Host, HOST + 64, 99, 32, 512));
        assert_eq!(c.dst_addr, device_base(1) + 64);
        // Now held: nothing more to copy.
        let before = buf.coherence.clone();
        let mut again = Vec::new();
        buf.plan_current(Place::Device(1), &column, &before, &mut again, true);
        assert!(again.is_empty(), "{again:?}");
    }

    #[test]
    fn rectangles_as_runs() {
        let r = ByteRect { start: 10, rows: 3, row_bytes: 4, pitch: 16 };
        assert_eq!(r.row_runs().collect::<Vec<_>>(), vec![(10, 14), (26, 30), (42, 46)]);
        assert_eq!(r.end(), 46);
        let whole = ByteRect { start: 0, rows: 4, row_bytes: 16, pitch: 16 };
        assert_eq!(whole.row_runs().collect::<Vec<_>>(), vec![(0, 64)]);
        assert_eq!(ByteRect::run(5, 9).row_runs().collect::<Vec<_>>(), vec![(5, 9)]);
    }
}
