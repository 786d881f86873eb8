//! One address space for leaves that keep pointers in memory
//! (`transform::indirect::translate`): the pointers the program stores hold its own
//! addresses (the host's copies, what `cudaMalloc` returned) on every device.
//!
//! In one process one virtual address maps one physical copy, so the devices' copies of a
//! buffer cannot all sit at the program's address. Such a leaf's code instead translates
//! each pointer it loads from memory into the running device's copy of the same byte, and
//! each pointer it stores back: memory holds the program's addresses everywhere, registers
//! the device's. The translation is a table of every buffer's two ranges ([`Addresses`]):
//! on a GPU, a global of the module the runtime writes before the launch
//! ([`crate::devices::cuda::Cuda::write_global`]); on simulated devices, the table
//! [`activate`]d for the run.
//!
//! Invariants: a range covers its buffer and the byte past its end (a one-past-the-end
//! pointer stays with its buffer); the program's ranges and the devices' never overlap
//! (distinct live allocations of one process, or GPU memory, which the driver keeps apart
//! from host memory), so an address no range holds is its own translation, and translating
//! an address twice is translating it once.

use std::sync::atomic::{AtomicPtr, Ordering};

use std::sync::{Mutex, MutexGuard};

/// `[start, end)` of one place's range and where the same bytes start at the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Range {
    start: u64,
    end: u64,
    to: u64,
}

/// The two ranges of every buffer on one device, sorted for lookups both ways.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Addresses {
    forward: Vec<Range>,
    back: Vec<Range>,
}

impl Addresses {
    /// From `(program start, size, device start)` of each buffer.
    pub fn new(buffers: impl IntoIterator<Item = (u64, u64, u64)>) -> Addresses {
        let mut a = Addresses::default();
        for (start, size, device) in buffers {
            a.forward.push(Range { start, end: start + size + 1, to: device });
            a.back.push(Range { start: device, end: device + size + 1, to: start });
        }
        a.forward.sort_unstable_by_key(|r| r.start);
        a.back.sort_unstable_by_key(|r| r.start);
        a
    }

    pub fn len(&self) -> usize {
        self.forward.len()
    }

    pub fn is_empty(&self) -> bool {
        self.forward.is_empty()
    }

    /// The device's address of the program's address `p`.
    pub fn to_device(&self, p: u64) -> u64 {
        lookup(&self.forward, p)
    }

    /// The program's address of the device's address `p`.
    pub fn to_program(&self, p: u64) -> u64 {
        lookup(&self.back, p)
    }

    /// The table as a GPU module holds it (`contract::symbols::ADDRESS_TABLE`, with `back_at`
    /// its `ADDRESS_TABLE_BACK`): the count, the forward entries, and the entries back from
    /// word `back_at`, three each.
    pub fn words(&self, back_at: usize) -> Vec<u64> {
        let mut w = vec![0u64; back_at + 3 * self.len()];
        w[0] = self.len() as u64;
        for (i, r) in self.forward.iter().enumerate() {
            w[1 + 3 * i..4 + 3 * i].copy_from_slice(&[r.start, r.end, r.to]);
        }
        for (i, r) in self.back.iter().enumerate() {
            w[back_at + 3 * i..back_at + 3 + 3 * i].copy_from_slice(&[r.start, r.end, r.to]);
        }
        w
    }
}

fn lookup(ranges: &[Range], p: u64) -> u64 {
    let i = ranges.partition_point(|r| r.start <= p);
    match i.checked_sub(1).map(|i| ranges[i]) {
        Some(r) if p < r.end => r.to + (p - r.start),
        _ => p,
    }
}

/// The table of the leaf running on a simulated device now; null when none is.
static ACTIVE: AtomicPtr<Addresses> = AtomicPtr::new(std::ptr::null_mut());
/// One translated leaf runs at a time.
static RUNNING: Mutex<()> = Mutex::new(());

/// The table [`activate`]d, for as long as this lives.
pub struct Active {
    table: *mut Addresses,
    _running: MutexGuard<'static, ()>,
}

/// Makes `table` the one the translations of leaf code running on simulated devices use
/// until the result is dropped.
pub fn activate(table: Addresses) -> Active {
    let running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
    let table = Box::into_raw(Box::new(table));
    ACTIVE.store(table, Ordering::Release);
    Active { table, _running: running }
}

impl Drop for Active {
    fn drop(&mut self) {
        ACTIVE.store(std::ptr::null_mut(), Ordering::Release);
        // SAFETY: made by `Box::into_raw` in `activate`, no longer reachable through ACTIVE;
        // the leaf that read it has finished (simulated devices finish a launch on return).
        drop(unsafe { Box::from_raw(self.table) });
    }
}

/// With `to_device`, the program's address `p` where the leaf runs, else the reverse.
pub fn translate(p: u64, to_device: bool) -> u64 {
    let a = ACTIVE.load(Ordering::Acquire);
    if a.is_null() {
        // On the host's copies, or no translated leaf running: the program's addresses.
        return p;
    }
    // SAFETY: live until the `Active` that published it is dropped, after the leaf ran.
    let a = unsafe { &*a };
    if to_device {
        a.to_device(p)
    } else {
        a.to_program(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translations_are_inverse_and_idempotent() {
        let a = Addresses::new([(0x1000, 0x100, 0x9000), (0x2000, 0x10, 0x5000)]);
        for p in [0x1000, 0x1080, 0x1100, 0x2000, 0x2010] {
            let d = a.to_device(p);
            assert_ne!(d, p);
            assert_eq!(a.to_program(d), p);
            // Translated twice is translated once.
            assert_eq!(a.to_device(d), d);
            assert_eq!(a.to_program(p), p);
        }
        assert_eq!(a.to_device(0x1080), 0x9080);
        // One past the end stays with its buffer; further on, and null, are left alone.
        assert_eq!(a.to_device(0x1100), 0x9100);
        assert_eq!(a.to_device(0x1101), 0x1101);
        assert_eq!(a.to_device(0), 0);
        assert_eq!(a.to_device(0xfff), 0xfff);
    }

    #[test]
    fn words_hold_both_directions() {
        let a = Addresses::new([(0x2000, 0x10, 0x5000), (0x1000, 0x100, 0x9000)]);
        let w = a.words(7);
        assert_eq!(w[0], 2);
        assert_eq!(&w[1..7], &[0x1000, 0x1101, 0x9000, 0x2000, 0x2011, 0x5000]);
        assert_eq!(&w[7..13], &[0x5000, 0x5011, 0x2000, 0x9000, 0x9101, 0x1000]);
    }
}
