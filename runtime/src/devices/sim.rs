//! A simulated device (`HPVM_MGPU_DEVICES=cpu:N`): its own memory and its own worker pool,
//! running the CPU-compiled code of the partitions given to it.
//!
//! Its memory is separate from the host's and from every other device's: allocations up to
//! [`POISON_UP_TO`] are filled with `0xFF` bytes (NaN as floats, -1 as integers), so a
//! partition that reads something no copy brought shows up as a wrong result; larger ones
//! (benchmark sizes) are zeroed lazily by the system instead of touched up front. Its stream runs synchronously: each
//! copy is done when [`Device::copy`] returns.
//!
//! Sparse copies ([`crate::memory::residency`]) are reservations of inaccessible pages
//! (`mmap` with `PROT_NONE`), made accessible granule by granule ([`SIM_GRANULE`]) and given
//! back to the system when unmapped: a partition touching a granule its device does not back
//! faults, so a plan that misses an access fails loudly instead of reading stale memory.

use super::{Copy, Device};
use std::alloc::Layout;
use std::collections::HashMap;
use std::sync::Mutex;

/// Allocations are aligned as a GPU's are (at least 256 bytes).
const ALIGN: usize = 256;

/// Allocations up to this size are poisoned.
pub const POISON_UP_TO: usize = 64 << 20;

/// The granule of sparse copies: smaller than a GPU's (2 MiB), so that the buffers of tests
/// span many. `HPVM_MGPU_GRANULE=SIZE` (a power of two, at least a page) sets another.
pub const SIM_GRANULE: u64 = 64 << 10;

/// The bytes a reservation of `bytes` spans: whole pages, then the read-only slack.
fn reserved_span(bytes: u64) -> u64 {
    bytes.max(1).div_ceil(4096) * 4096 + super::SLACK
}

pub(crate) fn sim_granule() -> u64 {
    static G: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *G.get_or_init(|| {
        let Ok(v) = std::env::var("HPVM_MGPU_GRANULE") else { return SIM_GRANULE };
        let page = 4096;
        match super::parse_size(&v) {
            Some(g) if g.is_power_of_two() && g >= page => g,
            _ => crate::fatal(&format!("HPVM_MGPU_GRANULE={v}: expected a power of two of at least {page} bytes")),
        }
    })
}

pub struct SimDevice {
    name: String,
    /// The device's workers; none for another rank's device, which runs nothing here.
    pool: Option<rayon::ThreadPool>,
    threads: usize,
    allocations: Mutex<HashMap<u64, Layout>>,
    /// Sparse copies: each reservation's size.
    reservations: Mutex<HashMap<u64, u64>>,
    /// A dry-run device (`dry:N`): allocations are addresses only, copies and partitions are
    /// skipped. What is left is the runtime's own work, which benchmarks measure.
    dry: bool,
    /// Another rank's device (`mpirun`, [`crate::ranks`]): this process plans for it as
    /// that rank does, with made-up addresses and its granule, and runs nothing on it.
    remote: bool,
    /// A remote device's granule (its own rank's); local devices have [`sim_granule`].
    granule: Option<u64>,
    next_fake: std::sync::atomic::AtomicU64,
}

impl SimDevice {
    /// A dry-run device (see [`SimDevice::is_dry`]).
    pub fn dry(index: usize) -> SimDevice {
        let mut d = SimDevice::new(index, 1);
        d.name = format!("dry{index}");
        d.dry = true;
        d
    }

    /// Whether the device only pretends: nothing it is given runs, and its results are garbage.
    pub fn is_dry(&self) -> bool {
        self.dry
    }

    /// Device `index` of the run, which rank `rank` holds (see [`SimDevice::is_remote`]),
    /// named `what` (`sim`, `dry` (then dry, as that rank's are), `GPU `).
    /// `granule`: the sparse copies' granule of the device on its own rank, which this
    /// rank's plans must count in alike.
    pub fn remote(index: usize, rank: usize, what: &str, granule: Option<u64>) -> SimDevice {
        SimDevice {
            name: format!("{what}{index} (rank {rank})"),
            pool: None,
            threads: 1,
            allocations: Mutex::default(),
            reservations: Mutex::default(),
            dry: what == "dry",
            remote: true,
            granule,
            next_fake: std::sync::atomic::AtomicU64::new((0x7000 + index as u64) << 36),
        }
    }

    /// Whether another rank holds the device: nothing of its runs here, and its addresses
    /// are made up (a plan names them; only its rank uses them).
    pub fn is_remote(&self) -> bool {
        self.remote
    }

    /// Allocates nothing: a made-up address range (dry-run and remote devices).
    fn fake(&self, bytes: u64) -> u64 {
        let size = bytes.max(1).next_multiple_of(ALIGN as u64);
        self.next_fake.fetch_add(size, std::sync::atomic::Ordering::Relaxed)
    }

    pub fn new(index: usize, threads: usize) -> SimDevice {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(move |i| format!("hpvm-sim{index}-{i}"))
            .build()
            .unwrap_or_else(|e| crate::fatal(&format!("cannot start the pool of simulated device {index}: {e}")));
        SimDevice {
            name: format!("sim{index}"),
            pool: Some(pool),
            threads,
            allocations: Mutex::default(),
            reservations: Mutex::default(),
            dry: false,
            remote: false,
            granule: None,
            // Far from any real address, distinct per device.
            next_fake: std::sync::atomic::AtomicU64::new((0x7000 + index as u64) << 36),
        }
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `f` on the device's workers.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(p) => p.install(f),
            None => unreachable!("{} is another rank's: nothing of it runs here", self.name),
        }
    }
}

impl Device for SimDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn alloc(&self, bytes: usize) -> Result<u64, String> {
        if self.dry || self.remote {
            return Ok(self.fake(bytes as u64));
        }
        let layout = Layout::from_size_align(bytes.max(1), ALIGN).map_err(|e| e.to_string())?;
        let poison = layout.size() <= POISON_UP_TO;
        // SAFETY: a layout of non-zero size.
        let p = unsafe {
            if poison {
                std::alloc::alloc(layout)
            } else {
                std::alloc::alloc_zeroed(layout)
            }
        };
        if p.is_null() {
            return Err(format!("{}: out of memory allocating {bytes} bytes", self.name));
        }
        if poison {
            // SAFETY: `p` has `layout.size()` bytes.
            unsafe { std::ptr::write_bytes(p, 0xFF, layout.size()) };
        }
        self.allocations.lock().unwrap_or_else(|e| e.into_inner()).insert(p as u64, layout);
        Ok(p as u64)
    }

    fn free(&self, addr: u64) -> Result<(), String> {
        if self.dry || self.remote {
            return Ok(());
        }
        let layout = self.allocations.lock().unwrap_or_else(|e| e.into_inner()).remove(&addr);
        let layout = layout.ok_or_else(|| format!("{}: freeing {addr:#x}, which it did not allocate", self.name))?;
        // SAFETY: allocated by `alloc` with this layout, freed once (removed from the table).
        unsafe { std::alloc::dealloc(addr as *mut u8, layout) };
        Ok(())
    }

    fn granule(&self) -> Option<u64> {
        if self.remote {
            return self.granule;
        }
        (!self.dry).then(sim_granule)
    }

    fn reserve(&self, bytes: u64) -> Result<u64, String> {
        if self.remote {
            return Ok(self.fake(bytes));
        }
        // Followed by [`super::SLACK`] bytes of read-only zero pages, which no copy backs.
        let total = reserved_span(bytes);
        // SAFETY: a new private anonymous mapping; nothing else refers to it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                total as usize,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            let why = std::io::Error::last_os_error();
            return Err(format!("{}: out of memory reserving {bytes} bytes ({why})", self.name));
        }
        let slack = (p as u64 + total - super::SLACK) as *mut libc::c_void;
        // SAFETY: the tail of the mapping just made.
        if unsafe { libc::mprotect(slack, super::SLACK as usize, libc::PROT_READ) } != 0 {
            let why = std::io::Error::last_os_error();
            // SAFETY: the mapping just made, referred to by nothing else.
            unsafe { libc::munmap(p, total as usize) };
            return Err(format!("{}: cannot reserve {bytes} bytes ({why})", self.name));
        }
        self.reservations.lock().unwrap_or_else(|e| e.into_inner()).insert(p as u64, bytes.max(1));
        Ok(p as u64)
    }

    fn map(&self, addr: u64, bytes: u64) -> Result<(), String> {
        if self.remote {
            return Ok(());
        }
        let poison = {
            let r = self.reservations.lock().unwrap_or_else(|e| e.into_inner());
            let (_, &size) = r
                .iter()
                .find(|(&a, &size)| a <= addr && addr + bytes <= a + size)
                .ok_or_else(|| format!("{}: mapping {addr:#x}, outside its reservations", self.name))?;
            size as usize <= POISON_UP_TO
        };
        // SAFETY: pages of a reservation of this device's (checked above).
        if unsafe { libc::mprotect(addr as *mut libc::c_void, bytes as usize, libc::PROT_READ | libc::PROT_WRITE) } != 0
        {
            return Err(format!("{}: cannot map {bytes} bytes: {}", self.name, std::io::Error::last_os_error()));
        }
        if poison {
            // SAFETY: just made writable.
            unsafe { std::ptr::write_bytes(addr as *mut u8, 0xFF, bytes as usize) };
        }
        Ok(())
    }

    fn unmap(&self, addr: u64, bytes: u64) -> Result<(), String> {
        if self.remote {
            return Ok(());
        }
        // SAFETY: pages of a reservation of this device's, which no partition is using (the
        // memory manager unmaps only what no launch in progress touches).
        let failed = unsafe {
            libc::madvise(addr as *mut libc::c_void, bytes as usize, libc::MADV_DONTNEED) != 0
                || libc::mprotect(addr as *mut libc::c_void, bytes as usize, libc::PROT_NONE) != 0
        };
        if failed {
            return Err(format!("{}: cannot unmap {bytes} bytes: {}", self.name, std::io::Error::last_os_error()));
        }
        Ok(())
    }

    fn unreserve(&self, addr: u64) -> Result<(), String> {
        if self.remote {
            return Ok(());
        }
        let size = self.reservations.lock().unwrap_or_else(|e| e.into_inner()).remove(&addr);
        let size = size.ok_or_else(|| format!("{}: freeing {addr:#x}, which it did not reserve", self.name))?;
        // SAFETY: a reservation of this device's and its slack, unmapped once (removed from
        // the table).
        if unsafe { libc::munmap(addr as *mut libc::c_void, reserved_span(size) as usize) } != 0 {
            return Err(format!("{}: cannot free a reservation: {}", self.name, std::io::Error::last_os_error()));
        }
        Ok(())
    }

    fn copy(&self, c: &Copy) -> Result<(), String> {
        if self.dry {
            return Ok(());
        }
        if self.remote {
            // The memory manager sends and receives what crosses ranks instead.
            return Err(format!("{}: a copy on another rank's device", self.name));
        }
        for r in 0..c.rows {
            // SAFETY: the memory manager plans copies inside allocations of the buffer's size
            // (device side) and inside the tracked buffer (host side); source and destination
            // are different memories.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (c.src_addr + r * c.pitch) as *const u8,
                    (c.dst_addr + r * c.pitch) as *mut u8,
                    c.row_bytes as usize,
                )
            };
        }
        Ok(())
    }

    fn synchronize(&self) -> Result<(), String> {
        Ok(())
    }

    fn fill(&self, addr: u64, byte: u8, bytes: u64) -> Result<(), String> {
        if self.dry {
            return Ok(());
        }
        if self.remote {
            return Err(format!("{}: a fill on another rank's device", self.name));
        }
        // SAFETY: the memory manager hands a range inside this device's copy of a buffer.
        unsafe { std::ptr::write_bytes(addr as *mut u8, byte, bytes as usize) };
        Ok(())
    }

    fn fill_identity(&self, addr: u64, how: dashdb::Reduction, elements: u64) -> Result<(), String> {
        if self.dry {
            return Ok(());
        }
        if self.remote {
            return Err(format!("{}: a reduction on another rank's device", self.name));
        }
        let one = how.identity();
        // SAFETY: a reduction's elements inside this device's copy of a buffer (whole elements,
        // `partitioned::reduce`).
        let bytes = unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, (elements as usize) * one.len()) };
        for e in bytes.chunks_exact_mut(one.len()) {
            e.copy_from_slice(&one);
        }
        Ok(())
    }

    fn combine(&self, dst: u64, src: u64, how: dashdb::Reduction, elements: u64) -> Result<(), String> {
        if self.dry {
            return Ok(());
        }
        if self.remote {
            return Err(format!("{}: a reduction on another rank's device", self.name));
        }
        let bytes = elements as usize * how.element.size() as usize;
        // SAFETY: two ranges of this device's memory the reduction owns during the launch
        // (the result's elements and a scratch copy of another device's), not overlapping.
        let (d, s) = unsafe {
            (std::slice::from_raw_parts_mut(dst as *mut u8, bytes), std::slice::from_raw_parts(src as *const u8, bytes))
        };
        combine_bytes(d, s, how);
        Ok(())
    }

    fn merge_changed(&self, dst: u64, src: u64, twin: u64, bytes: u64) -> Result<(), String> {
        if self.dry {
            return Ok(());
        }
        if self.remote {
            return Err(format!("{}: merged writes on another rank's device", self.name));
        }
        let n = bytes as usize;
        // SAFETY: three ranges of this device's memory the merge owns during the launch (the
        // buffer's bytes, a scratch copy of another device's, the twin), not overlapping.
        let (d, s, t) = unsafe {
            (
                std::slice::from_raw_parts_mut(dst as *mut u8, n),
                std::slice::from_raw_parts(src as *const u8, n),
                std::slice::from_raw_parts(twin as *const u8, n),
            )
        };
        merge_changed_bytes(d, s, t);
        Ok(())
    }
}

/// `dst[i] = src[i]` wherever `src[i] != twin[i]`: another device's changes taken in.
pub(crate) fn merge_changed_bytes(dst: &mut [u8], src: &[u8], twin: &[u8]) {
    // Words first (the common case is few changes), the bytes of a differing word one by one.
    const W: usize = 8;
    let whole = dst.len() / W * W;
    for ((d, s), t) in dst[..whole].chunks_exact_mut(W).zip(src[..whole].chunks_exact(W)).zip(twin.chunks_exact(W)) {
        if s != t {
            for i in 0..W {
                if s[i] != t[i] {
                    d[i] = s[i];
                }
            }
        }
    }
    for i in whole..dst.len() {
        if src[i] != twin[i] {
            dst[i] = src[i];
        }
    }
}

/// `dst[i] = dst[i] op src[i]` over little-endian elements of `how`'s type.
pub(crate) fn combine_bytes(dst: &mut [u8], src: &[u8], how: dashdb::Reduction) {
    use dashdb::{ReduceOp as O, ReduceType as T};
    macro_rules! each {
        ($t:ty, $f:expr) => {{
            let n = std::mem::size_of::<$t>();
            for (d, s) in dst.chunks_exact_mut(n).zip(src.chunks_exact(n)) {
                let a = <$t>::from_le_bytes(d.try_into().expect("whole elements"));
                let b = <$t>::from_le_bytes(s.try_into().expect("whole elements"));
                let f: fn($t, $t) -> $t = $f;
                d.copy_from_slice(&f(a, b).to_le_bytes());
            }
        }};
    }
    match (how.op, how.element) {
        (O::Add, T::I32 | T::U32) => each!(u32, |a, b| a.wrapping_add(b)),
        (O::Add, T::I64 | T::U64) => each!(u64, |a, b| a.wrapping_add(b)),
        (O::Add, T::F32) => each!(f32, |a, b| a + b),
        (O::Add, T::F64) => each!(f64, |a, b| a + b),
        (O::Min, T::I32) => each!(i32, |a, b| a.min(b)),
        (O::Min, T::U32) => each!(u32, |a, b| a.min(b)),
        (O::Min, T::I64) => each!(i64, |a, b| a.min(b)),
        (O::Min, T::U64) => each!(u64, |a, b| a.min(b)),
        (O::Max, T::I32) => each!(i32, |a, b| a.max(b)),
        (O::Max, T::U32) => each!(u32, |a, b| a.max(b)),
        (O::Max, T::I64) => each!(i64, |a, b| a.max(b)),
        (O::Max, T::U64) => each!(u64, |a, b| a.max(b)),
        (O::And, T::I32 | T::U32) => each!(u32, |a, b| a & b),
        (O::And, _) => each!(u64, |a, b| a & b),
        (O::Or, T::I32 | T::U32) => each!(u32, |a, b| a | b),
        (O::Or, _) => each!(u64, |a, b| a | b),
        (O::Xor, T::I32 | T::U32) => each!(u32, |a, b| a ^ b),
        (O::Xor, _) => each!(u64, |a, b| a ^ b),
        (O::Min | O::Max, T::F32 | T::F64) => unreachable!("no float min or max reduction (dashdb refuses it)"),
    }
}

impl Drop for SimDevice {
    fn drop(&mut self) {
        for (addr, layout) in self.allocations.get_mut().unwrap_or_else(|e| e.into_inner()).drain() {
            // SAFETY: still allocated (never freed: it is in the table).
            unsafe { std::alloc::dealloc(addr as *mut u8, layout) };
        }
        for (addr, size) in self.reservations.get_mut().unwrap_or_else(|e| e.into_inner()).drain() {
            // SAFETY: still reserved (it is in the table), with its slack.
            unsafe { libc::munmap(addr as *mut libc::c_void, reserved_span(size) as usize) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Merging takes exactly the bytes another device changed against the twin, whatever
    /// their place in a word and the buffer's length: random buffers, each byte changed by
    /// the home, by the other device, by both alike, or by neither; the result is what one
    /// copy changed by both would hold.
    #[test]
    fn merged_bytes_are_the_changed_ones() {
        let mut next = crate::testing::numbers(5);
        for len in [0usize, 1, 7, 8, 9, 63, 64, 257] {
            let twin: Vec<u8> = (0..len).map(|_| next(256) as u8).collect();
            let (mut home, mut other, mut want) = (twin.clone(), twin.clone(), twin.clone());
            for i in 0..len {
                let v = twin[i].wrapping_add(1 + next(255) as u8);
                match next(4) {
                    0 => (home[i], want[i]) = (v, v),
                    1 => (other[i], want[i]) = (v, v),
                    2 => (home[i], other[i], want[i]) = (v, v, v),
                    _ => {}
                }
            }
            merge_changed_bytes(&mut home, &other, &twin);
            assert_eq!(home, want, "{len} bytes");
        }
    }

    /// A partial result combined into another gives what one copy updated by both would
    /// hold: identities change nothing, signed and unsigned compare apart, sums wrap.
    #[test]
    fn partial_results_combine_as_their_operation() {
        use dashdb::{ReduceOp, ReduceType, Reduction};
        let how = |op, element| Reduction { op, element };
        let words = |v: &[u32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let mut d = words(&[5, 0xFFFF_FFFF, 7]);
        combine_bytes(&mut d, &words(&[u32::MAX, 2, 0]), how(ReduceOp::Add, ReduceType::U32));
        assert_eq!(d, words(&[4, 1, 7]));
        let mut d = words(&[5, (-3i32) as u32]);
        combine_bytes(&mut d, &words(&[(-1i32) as u32, 4]), how(ReduceOp::Min, ReduceType::I32));
        assert_eq!(d, words(&[(-1i32) as u32, (-3i32) as u32]));
        let mut d = words(&[5, (-3i32) as u32]);
        combine_bytes(&mut d, &words(&[(-1i32) as u32, 4]), how(ReduceOp::Min, ReduceType::U32));
        assert_eq!(d, words(&[5, 4]));
        for (op, element) in
            [(ReduceOp::Max, ReduceType::I64), (ReduceOp::And, ReduceType::U64), (ReduceOp::Add, ReduceType::F64)]
        {
            let r = how(op, element);
            let before: Vec<u8> = [-2.5f64, 3.0].iter().flat_map(|x| x.to_le_bytes()).collect();
            let mut d = before.clone();
            combine_bytes(&mut d, &[r.identity(), r.identity()].concat(), r);
            assert_eq!(d, before, "{r}");
        }
        let mut d = 1.5f32.to_le_bytes().to_vec();
        combine_bytes(&mut d, &2.25f32.to_le_bytes(), how(ReduceOp::Add, ReduceType::F32));
        assert_eq!(d, 3.75f32.to_le_bytes());
    }
    use crate::devices::Place;

    #[test]
    fn memory_is_its_own_and_poisoned() {
        let d = SimDevice::new(0, 1);
        let a = d.alloc(64).unwrap();
        assert_eq!(a % ALIGN as u64, 0);
        // SAFETY: 64 bytes just allocated.
        let bytes = unsafe { std::slice::from_raw_parts(a as *const u8, 64) };
        assert!(bytes.iter().all(|&b| b == 0xFF));
        let host: Vec<u8> = (0..64).collect();
        // Rows 1 and 2 of an 4 x 16 array, columns 4..12.
        let c = Copy {
            src: Place::Host,
            src_addr: host.as_ptr() as u64 + 16 + 4,
            dst: Place::Device(0),
            dst_addr: a + 16 + 4,
            rows: 2,
            row_bytes: 8,
            pitch: 16,
        };
        d.copy(&c).unwrap();
        let bytes = unsafe { std::slice::from_raw_parts(a as *const u8, 64) };
        for (i, &b) in bytes.iter().enumerate() {
            let (row, col) = (i / 16, i % 16);
            let copied = (1..3).contains(&row) && (4..12).contains(&col);
            assert_eq!(b, if copied { i as u8 } else { 0xFF }, "byte {i}");
        }
        d.free(a).unwrap();
        assert!(d.free(a).is_err());
    }

    /// A reservation is backed granule by granule: mapped granules are poisoned, what is
    /// written stays until unmapped, and an unmapped granule can be mapped again.
    #[test]
    fn reservations_are_backed_by_granule() {
        let d = SimDevice::new(0, 1);
        let g = d.granule().unwrap();
        let a = d.reserve(4 * g).unwrap();
        d.map(a + g, 2 * g).unwrap();
        // SAFETY: granules 1 and 2, just mapped.
        let bytes = unsafe { std::slice::from_raw_parts_mut((a + g) as *mut u8, 2 * g as usize) };
        assert!(bytes.iter().all(|&b| b == 0xFF));
        bytes[0] = 7;
        d.unmap(a + 2 * g, g).unwrap();
        assert_eq!(bytes[0], 7);
        d.map(a + 2 * g, g).unwrap();
        assert!(d.map(a + 4 * g, g).is_err(), "outside the reservation");
        // Past the end: read-only zeros, the slack a GPU's allocation would have.
        // SAFETY: the slack page after the reservation, readable.
        assert_eq!(unsafe { ((a + 4 * g) as *const u8).read() }, 0);
        d.unmap(a, 4 * g).unwrap();
        d.unreserve(a).unwrap();
        assert!(d.unreserve(a).is_err());
    }
}
