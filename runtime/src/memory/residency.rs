//! Sparse device copies: on a device that supports them ([`Device::granule`]), a buffer's copy
//! is an address range of the buffer's full size, reserved once, of which only the granules
//! the device's partitions read or write are backed by memory. Kernels keep their addressing;
//! each device holds in memory what it works on, so the devices together hold problems that
//! no one of them could.
//!
//! Invariants (kept under the table's lock):
//! - a device holds a byte (in the coherence map) only where it backs the byte's granule:
//!   granules are backed before the copies into them are planned, and given back only after
//!   the device stopped holding anything in them;
//! - giving a granule back loses nothing: the bytes only that device holds are first copied
//!   to a peer that backs them already, else to the host;
//! - a device never backs more than its limit (`HPVM_MGPU_DEVICE_MEMORY`): a launch that needs
//!   more on one device, once every granule it does not use is given back, stops the program
//!   with a message naming the buffer, the bytes, the device and its limit.
//!
//! Granules the launch at hand does not use are given back least recently used first.
//! Simulated devices (`cpu:N`) reserve inaccessible pages and open them granule by granule;
//! GPUs use the driver's virtual memory management (`cuMemAddressReserve`, `cuMemCreate`,
//! `cuMemMap`, `cuMemSetAccess`), one physical allocation per granule.

use super::{Buffer, Table};
use crate::devices::{devices, Device, Place};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Whether this run's devices keep sparse copies (`HPVM_MGPU_SPARSE`): by default simulated
/// devices do, and GPUs when a memory limit is set (`HPVM_MGPU_DEVICE_MEMORY`; otherwise they
/// allocate whole copies, as measured so far); `on` asks for them, `off` refuses them.
pub fn sparse() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        let asked = match std::env::var("HPVM_MGPU_SPARSE").unwrap_or_default().trim() {
            "" => None,
            "on" => Some(true),
            "off" => Some(false),
            other => crate::fatal(&format!("HPVM_MGPU_SPARSE={other}: expected `on` or `off`")),
        };
        let devs = devices();
        let limited = std::env::var("HPVM_MGPU_DEVICE_MEMORY").is_ok_and(|v| !v.trim().is_empty());
        // Asked only where the answer matters: a GPU's granule needs its context, and GPUs
        // after the first open only when wanted (`devices::opening`).
        let able = || devs.count() > 0 && (0..devs.count()).all(|k| devs.get(k).granule().is_some());
        match asked {
            Some(false) => false,
            Some(true) if devs.count() > 0 && !able() => crate::fatal(&format!(
                "HPVM_MGPU_SPARSE=on: the devices of this run ({}) cannot keep sparse copies",
                devs.describe()
            )),
            Some(true) => devs.count() > 0,
            None => (!devs.on_gpus() || limited) && able(),
        }
    })
}

/// `HPVM_MGPU_DEVICE_MEMORY=SIZE` (`64M`, `2G`, `512K`, bytes): what each device may back.
pub fn limit() -> Option<u64> {
    static LIMIT: OnceLock<Option<u64>> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        let v = std::env::var("HPVM_MGPU_DEVICE_MEMORY").ok()?;
        if v.trim().is_empty() {
            return None;
        }
        let bytes = crate::devices::parse_size(&v).unwrap_or_else(|| {
            crate::fatal(&format!("HPVM_MGPU_DEVICE_MEMORY={v}: expected a size such as 64M or 2G"))
        });
        if devices().count() > 0 && !sparse() {
            crate::fatal(&format!(
                "HPVM_MGPU_DEVICE_MEMORY={v}: the devices of this run ({}) keep whole copies of buffers \
                 (HPVM_MGPU_SPARSE=off, or no virtual memory management): a limit needs sparse copies",
                devices().describe()
            ));
        }
        Some(bytes)
    })
}

/// One device's memory, for the statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceMemory {
    /// Bytes backed now, and at most.
    pub backed: u64,
    pub peak: u64,
    /// The most bytes one launch (or one round of it) needed backed at once.
    pub peak_launch: u64,
    pub granules_mapped: u64,
    pub granules_unmapped: u64,
    /// Of those given back, the ones evicted to make room (the rest went with their buffer).
    pub granules_evicted: u64,
    /// Time in the device's map calls (backing granules), ns.
    pub map_nanos: u64,
    /// Bytes only this device held, copied before their granules went back: to the host, or
    /// to a peer that backed them already.
    pub evicted_to_host: u64,
    pub evicted_to_peers: u64,
}

static LEDGER: Mutex<Vec<DeviceMemory>> = Mutex::new(Vec::new());

/// Taken after the table's lock, never before it.
fn ledger() -> MutexGuard<'static, Vec<DeviceMemory>> {
    let mut l = LEDGER.lock().unwrap_or_else(|e| e.into_inner());
    let n = devices().count();
    if l.len() < n {
        l.resize(n, DeviceMemory::default());
    }
    l
}

/// Each device's memory (empty without sparse copies).
pub fn report() -> Vec<DeviceMemory> {
    if !sparse() {
        return Vec::new();
    }
    ledger().clone()
}

/// A range of a buffer's bytes a launch's partition on `device` reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Need {
    /// The buffer's start (its key in the table).
    pub buffer: u64,
    pub device: usize,
    pub lo: u64,
    pub hi: u64,
}

/// What an eviction gave back and where the bytes only its device held went.
#[derive(Default)]
struct Evicted {
    granules: u64,
    to_host: u64,
    to_peers: u64,
}

/// The mark of a granule a launch needs and no device backs yet (see [`Table::make_resident`]).
const PENDING: u64 = u64::MAX;

/// Whether one launch's `needs` (run together) fit every device's limit, counting each
/// granule once: what [`Table::make_resident`] can make resident, evicting all else.
pub fn fits(needs: &[Need]) -> bool {
    let Some(limit) = limit() else { return true };
    let devs = devices();
    let mut granules: std::collections::HashMap<usize, std::collections::HashSet<(u64, u64)>> = Default::default();
    for n in needs.iter().filter(|n| n.lo < n.hi) {
        let Some(g) = devs.get(n.device).granule() else { continue };
        let set = granules.entry(n.device).or_default();
        set.extend((n.lo / g..n.hi.div_ceil(g)).map(|i| (n.buffer, i)));
    }
    granules.iter().all(|(&k, set)| set.len() as u64 * devs.get(k).granule().unwrap_or(0) <= limit)
}

/// Why [`Table::make_resident`] failed.
#[derive(Debug)]
pub enum Shortage {
    /// The device refused (a reservation or a mapping failed), in its words.
    Failed(String),
    /// The launch needs more on a device than its limit, evicting everything else.
    TooBig {
        device: usize,
        limit: u64,
        granule: u64,
        /// (buffer start, bytes it needs backed, its size), the largest need first.
        buffers: Vec<(u64, u64, u64)>,
    },
}

impl Shortage {
    /// The message for the user; `name` gives a buffer's name in the program (by its start),
    /// where the caller knows it.
    pub fn describe(&self, name: &dyn Fn(u64) -> Option<String>) -> String {
        let (device, limit, granule, buffers) = match self {
            Shortage::Failed(why) => return why.clone(),
            Shortage::TooBig { device, limit, granule, buffers } => (*device, *limit, *granule, buffers),
        };
        let total: u64 = buffers.iter().map(|b| b.1).sum();
        let list: Vec<String> = buffers
            .iter()
            .map(|&(s, b, size)| match name(s) {
                Some(n) => format!("{} of {n} ({} in all)", human(b), human(size)),
                None => format!("{} of the {} buffer at {s:#x}", human(b), human(size)),
            })
            .collect();
        format!(
            "its partition on {} needs {} of device memory ({}; backed in granules of {}), more than the device's {} \
             (HPVM_MGPU_DEVICE_MEMORY)",
            devices().get(device).name(),
            human(total),
            list.join(", "),
            human(granule),
            human(limit)
        )
    }
}

/// A device's granules of one buffer: the last use of each (a tick of [`Table::tick`]), 0
/// where the granule is not backed.
#[derive(Clone, Debug, Default)]
pub(crate) struct Backing {
    pub(crate) used: Vec<u64>,
}

impl Backing {
    pub(crate) fn new(size: u64, granule: u64) -> Backing {
        Backing { used: vec![0; size.div_ceil(granule) as usize] }
    }

    /// Maximal runs of consecutive granules satisfying `f`, as granule ranges.
    fn runs(&self, f: impl Fn(u64) -> bool) -> Vec<(usize, usize)> {
        let mut out: Vec<(usize, usize)> = Vec::new();
        for (g, &u) in self.used.iter().enumerate() {
            if !f(u) {
                continue;
            }
            match out.last_mut() {
                Some(last) if last.1 == g => last.1 = g + 1,
                _ => out.push((g, g + 1)),
            }
        }
        out
    }
}

impl Buffer {
    /// Gives device `k`'s granules `g0..g1` back (the device must hold nothing in them);
    /// returns how many were backed.
    fn unmap_granules(&mut self, k: usize, g0: usize, g1: usize, granule: u64) -> u64 {
        let base = self.allocs[k].expect("reserved");
        devices()
            .get(k)
            .unmap(base + g0 as u64 * granule, (g1 - g0) as u64 * granule)
            .unwrap_or_else(|e| crate::fatal(&format!("giving device memory back: {e}")));
        let used = &mut self.backing[k].used[g0..g1];
        let n = used.iter().filter(|&&u| u != 0).count() as u64;
        used.fill(0);
        n
    }

    /// Evicts device `k`'s granules `g0..g1`: what only it holds there goes to the host
    /// first, then it holds nothing there, then the memory goes back. Returns the granules
    /// given back and the bytes copied to the host.
    fn evict(&mut self, k: usize, g0: usize, g1: usize, granule: u64) -> Evicted {
        let (lo, hi) = ((g0 as u64 * granule).min(self.size), (g1 as u64 * granule).min(self.size));
        let only = crate::memory::coherence::Holders::device(k);
        let sole: Vec<(u64, u64)> =
            self.coherence.query(lo, hi).filter(|s| s.holders == only).map(|s| (s.start, s.end)).collect();
        let mut out = Evicted::default();
        for (a, b) in sole {
            // A peer that backs these bytes already takes them (a peer copy, and no memory
            // of its own spent); else the host.
            match self.backer_beside(k, a, b, granule) {
                Some(peer) => {
                    let before = self.coherence.clone();
                    let base = self.allocs[peer].expect("backed");
                    let mut copies = Vec::new();
                    self.plan_run(Place::Device(peer), a, b, &before, base, &mut copies, true);
                    super::execute(&copies).unwrap_or_else(|e| crate::fatal(&format!("saving evicted bytes: {e}")));
                    out.to_peers += b - a;
                }
                None => {
                    self.host_current(a, b);
                    out.to_host += b - a;
                }
            }
        }
        self.coherence.drop_holder(lo, hi, Place::Device(k));
        out.granules = self.unmap_granules(k, g0, g1, granule);
        out
    }

    /// A device other than `k` whose backing covers every granule of `a..b`.
    fn backer_beside(&self, k: usize, a: u64, b: u64, granule: u64) -> Option<usize> {
        let (g0, g1) = ((a / granule) as usize, b.div_ceil(granule) as usize);
        (0..self.backing.len()).find(|&p| {
            p != k
                && devices().get(p).granule() == Some(granule)
                && self.backing[p].used.get(g0..g1).is_some_and(|u| u.iter().all(|&t| t != 0 && t != PENDING))
        })
    }

    /// Gives every backed granule back (the buffer is being freed: nothing to keep).
    pub(crate) fn unmap_all(&mut self) {
        if self.backing.is_empty() {
            return;
        }
        let mut l = ledger();
        for k in 0..self.backing.len() {
            let Some(granule) = devices().get(k).granule() else { continue };
            for (g0, g1) in self.backing[k].runs(|u| u != 0) {
                let n = self.unmap_granules(k, g0, g1, granule);
                l[k].backed -= n * granule;
                l[k].granules_unmapped += n;
            }
        }
    }
}

impl Table {
    /// Makes every device back the granules of `needs` before a launch's copies are planned,
    /// giving back (least recently used first) granules that no need of this launch touches
    /// where a device's limit would be passed. The error names what does not fit.
    pub fn make_resident(&mut self, needs: &[Need]) -> Result<(), Shortage> {
        if !sparse() || needs.is_empty() {
            return Ok(());
        }
        self.tick += 1;
        let tick = self.tick;
        let mut devices_used: Vec<usize> = needs.iter().map(|n| n.device).collect();
        devices_used.sort_unstable();
        devices_used.dedup();
        for k in devices_used {
            if let Err(e) = self.back_on(k, needs, tick) {
                // Nothing half-made stays: what was to be mapped is not marked as backed.
                for buf in self.buffers.values_mut() {
                    if let Some(b) = buf.backing.get_mut(k) {
                        b.used.iter_mut().filter(|u| **u == PENDING).for_each(|u| *u = 0);
                    }
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// [`Table::make_resident`] on device `k`: on an error, granules of `needs` may be left
    /// marked [`PENDING`] (the caller clears them).
    fn back_on(&mut self, k: usize, needs: &[Need], tick: u64) -> Result<(), Shortage> {
        let devs = devices();
        let dev: &dyn Device = devs.get(k);
        let granule = dev.granule().expect("sparse");
        // Mark what this launch uses; count what must be backed anew, per buffer.
        let mut missing: Vec<(u64, usize, usize)> = Vec::new();
        let mut new_bytes = 0;
        for n in needs.iter().filter(|n| n.device == k && n.lo < n.hi) {
            let buf = self.buffers.get_mut(&n.buffer).expect("tracked");
            buf.addr(Place::Device(k)).map_err(Shortage::Failed)?;
            let (g0, g1) = ((n.lo / granule) as usize, n.hi.min(buf.size).div_ceil(granule) as usize);
            for g in g0..g1 {
                let u = &mut buf.backing[k].used[g];
                if *u == 0 {
                    // Marked as wanted (never evicted: later than every tick) until mapped.
                    *u = PENDING;
                    missing.push((n.buffer, g, g + 1));
                    new_bytes += granule;
                } else if *u != PENDING {
                    *u = tick;
                }
            }
        }
        let need = needs
            .iter()
            .filter(|n| n.device == k)
            .flat_map(|n| (n.lo / granule..n.hi.div_ceil(granule)).map(move |g| (n.buffer, g)))
            .collect::<std::collections::HashSet<_>>()
            .len() as u64
            * granule;
        {
            let l = &mut ledger()[k];
            l.peak_launch = l.peak_launch.max(need);
        }
        if missing.is_empty() {
            return Ok(());
        }
        if let Some(limit) = limit() {
            let backed = ledger()[k].backed;
            if backed + new_bytes > limit {
                self.evict_for(k, backed + new_bytes - limit, tick, granule);
            }
            let backed = ledger()[k].backed;
            if backed + new_bytes > limit {
                return Err(self.too_big(k, needs, granule, limit));
            }
        }
        missing.sort_unstable();
        let mut l = ledger();
        let mut i = 0;
        while i < missing.len() {
            let (start, g0, mut g1) = missing[i];
            i += 1;
            while i < missing.len() && missing[i].0 == start && missing[i].1 == g1 {
                g1 = missing[i].2;
                i += 1;
            }
            let buf = self.buffers.get_mut(&start).expect("tracked");
            let base = buf.allocs[k].expect("reserved");
            let t = std::time::Instant::now();
            dev.map(base + g0 as u64 * granule, (g1 - g0) as u64 * granule).map_err(Shortage::Failed)?;
            l[k].map_nanos += t.elapsed().as_nanos() as u64;
            buf.backing[k].used[g0..g1].fill(tick);
            let m = &mut l[k];
            m.backed += (g1 - g0) as u64 * granule;
            m.peak = m.peak.max(m.backed);
            m.granules_mapped += (g1 - g0) as u64;
        }
        Ok(())
    }

    /// Evicts at least `bytes` of device `k`'s granules last used before `tick`, least
    /// recently used first (ties: buffer, then granule order, so runs are deterministic).
    /// Buffers go by the order they were tracked, never by address: under ranks every rank
    /// evicts alike, and addresses differ between processes.
    fn evict_for(&mut self, k: usize, bytes: u64, tick: u64, granule: u64) {
        // GPU work in flight may still read what goes (another GPU's copy from it).
        crate::devices::inflight::drain();
        let mut candidates: Vec<(u64, u64, usize, u64)> = Vec::new();
        for (&start, buf) in &self.buffers {
            if let Some(b) = buf.backing.get(k) {
                candidates.extend(
                    b.used.iter().enumerate().filter(|(_, &u)| u != 0 && u < tick).map(|(g, &u)| (u, buf.id, g, start)),
                );
            }
        }
        candidates.sort_unstable();
        let take = (bytes.div_ceil(granule) as usize).min(candidates.len());
        let mut chosen: Vec<(u64, usize, u64)> = candidates[..take].iter().map(|&(_, id, g, s)| (id, g, s)).collect();
        chosen.sort_unstable();
        let mut i = 0;
        while i < chosen.len() {
            let (id, g0, start) = chosen[i];
            let mut g1 = g0 + 1;
            i += 1;
            while i < chosen.len() && chosen[i] == (id, g1, start) {
                g1 += 1;
                i += 1;
            }
            let e = self.buffers.get_mut(&start).expect("tracked").evict(k, g0, g1, granule);
            let l = &mut ledger()[k];
            l.backed -= e.granules * granule;
            l.granules_unmapped += e.granules;
            l.granules_evicted += e.granules;
            l.evicted_to_host += e.to_host;
            l.evicted_to_peers += e.to_peers;
        }
    }

    /// Why a launch's needs on device `k` do not fit its limit.
    fn too_big(&self, k: usize, needs: &[Need], granule: u64, limit: u64) -> Shortage {
        // Each granule once, however many rows of a rectangle fall into it.
        let granules: std::collections::BTreeSet<(u64, u64)> = needs
            .iter()
            .filter(|n| n.device == k && n.lo < n.hi)
            .flat_map(|n| (n.lo / granule..n.hi.div_ceil(granule)).map(move |g| (n.buffer, g)))
            .collect();
        let mut buffers: Vec<(u64, u64, u64)> = Vec::new();
        for (buffer, _) in granules {
            match buffers.iter_mut().find(|(s, _, _)| *s == buffer) {
                Some(e) => e.1 += granule,
                None => buffers.push((buffer, granule, self.buffers[&buffer].size)),
            }
        }
        buffers.sort_by_key(|&(_, b, _)| std::cmp::Reverse(b));
        Shortage::TooBig { device: k, limit, granule, buffers }
    }
}

/// `52 bytes`, `64 KiB`, `1.50 MiB`, `2 GiB`.
fn human(bytes: u64) -> String {
    let units = [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")];
    for (shift, unit) in units {
        if bytes >= 1 << shift {
            let v = bytes as f64 / (1u64 << shift) as f64;
            return if bytes.is_multiple_of(1 << shift) { format!("{v:.0} {unit}") } else { format!("{v:.2} {unit}") };
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes() {
        assert_eq!(human(52), "52 bytes");
        assert_eq!(human(64 << 10), "64 KiB");
        assert_eq!(human(3 << 19), "1.50 MiB");
        assert_eq!(human(2 << 30), "2 GiB");
    }

    #[test]
    fn runs_of_granules() {
        let b = Backing { used: vec![0, 3, 4, 0, 0, 1, 0, 2] };
        assert_eq!(b.runs(|u| u != 0), vec![(1, 3), (5, 6), (7, 8)]);
        assert_eq!(b.runs(|u| u == 0), vec![(0, 1), (3, 5), (6, 7)]);
    }
}
