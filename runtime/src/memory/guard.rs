//! Host stores that race a kernel, stopped at the store: while a launch has made a device's
//! copy of managed memory newer than the host's (the kernel that writes it has not been
//! waited for), the host's pages holding those bytes are read-only. A store into them faults,
//! and the fault hook ([`crate::crash::set_fault_hook`]) tells three cases apart:
//! - the program's own code stored into the stale bytes ([`crate::crash::programs_store`]):
//!   the race [`super::Buffer::raced`] would find at the next look, found at the store, so
//!   the message names the store's file:line from the executable's line tables;
//! - a store into the same page outside those bytes (another allocation, bytes no kernel
//!   wrote), or by the runtime itself: the page is made writable again and the store goes on;
//! - a fault in a page not guarded: left to the crash handler (retried once first, since the
//!   page may have been released between the fault and the look).
//!
//! Invariants:
//! - the guard only names the line; it is never the only check. Bytes it stops guarding (a
//!   page made writable by a neighbour's store, more runs than [`RUNS_PER_BUFFER`], no slot
//!   left) are still checked after the fact by the host-write watch or the kept copies;
//! - guarded bytes are stale: whatever makes the host current on bytes, or the host their
//!   holder, resyncs the buffer's guard ([`Guarded::sync`]) or clears it ([`Guarded::clear`])
//!   first; copies into the host's pages run with the guard cleared (a driver's thread
//!   writing them would fault, and nothing could tell its store from the program's);
//! - the hook takes no lock and allocates nothing until it has found a race: the guarded runs
//!   are a fixed table of atomics ([`SLOTS`]), each published whole (`LIVE`) after its fields.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use super::watch::PAGE;

/// Guarded runs, over all buffers; a run finding no free slot is not guarded.
const SLOTS: usize = 256;

/// A buffer with more stale runs than this is not guarded (a scatter's thousands of runs
/// would cost a system call each per launch).
pub(crate) const RUNS_PER_BUFFER: usize = 16;

const FREE: u8 = 0;
const FILLING: u8 = 1;
const LIVE: u8 = 2;

/// One guarded run: the stale bytes `run`, the pages `pages` made read-only for them, and
/// what the message says of them.
struct Slot {
    state: AtomicU8,
    pages: [AtomicU64; 2],
    run: [AtomicU64; 2],
    buffer: AtomicU64,
    size: AtomicU64,
    /// The device holding the bytes newer, plus one (0: unknown).
    holder: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)] // each element of the table is its own
const EMPTY: Slot = Slot {
    state: AtomicU8::new(FREE),
    pages: [AtomicU64::new(0), AtomicU64::new(0)],
    run: [AtomicU64::new(0), AtomicU64::new(0)],
    buffer: AtomicU64::new(0),
    size: AtomicU64::new(0),
    holder: AtomicU64::new(0),
};

static TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];

/// A stale run of a buffer, as [`Guarded::sync`] takes it: offsets, and the device holding
/// it newer where known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StaleRun {
    pub start: u64,
    pub end: u64,
    pub holder: Option<usize>,
}

/// A buffer's guarded runs (offsets) and their slots.
#[derive(Default)]
pub(crate) struct Guarded {
    runs: Vec<StaleRun>,
    slots: Vec<usize>,
}

fn protect(lo: u64, hi: u64, prot: i32) -> bool {
    // SAFETY: whole pages of a tracked buffer, which the program keeps allocated while it is
    // tracked (the guard is cleared before the buffer is released); only their protection
    // changes.
    unsafe { libc::mprotect(lo as *mut libc::c_void, (hi - lo) as usize, prot) == 0 }
}

impl Guarded {
    /// Guards exactly `runs` of the buffer at `start` (`size` bytes): nothing to do where they
    /// are the runs guarded already, which is a loop's steady state.
    pub(crate) fn sync(&mut self, start: u64, size: u64, runs: Vec<StaleRun>) {
        let runs = if runs.len() > RUNS_PER_BUFFER { Vec::new() } else { runs };
        if runs == self.runs {
            return;
        }
        self.clear();
        if !runs.is_empty() {
            crate::crash::set_fault_hook(on_fault);
        }
        for r in &runs {
            let (a, b) = (start + r.start, start + r.end);
            let pages = (a & !(PAGE - 1), (b + PAGE - 1) & !(PAGE - 1));
            let Some(k) = TABLE
                .iter()
                .position(|s| s.state.compare_exchange(FREE, FILLING, Ordering::Acquire, Ordering::Relaxed).is_ok())
            else {
                break;
            };
            let s = &TABLE[k];
            s.pages[0].store(pages.0, Ordering::Relaxed);
            s.pages[1].store(pages.1, Ordering::Relaxed);
            s.run[0].store(a, Ordering::Relaxed);
            s.run[1].store(b, Ordering::Relaxed);
            s.buffer.store(start, Ordering::Relaxed);
            s.size.store(size, Ordering::Relaxed);
            s.holder.store(r.holder.map_or(0, |d| d as u64 + 1), Ordering::Relaxed);
            s.state.store(LIVE, Ordering::Release);
            if !protect(pages.0, pages.1, libc::PROT_READ) {
                s.state.store(FREE, Ordering::Release);
                continue;
            }
            self.slots.push(k);
        }
        self.runs = runs;
    }

    /// Makes every guarded page writable again and frees the slots.
    pub(crate) fn clear(&mut self) {
        for k in self.slots.drain(..) {
            let s = &TABLE[k];
            protect(
                s.pages[0].load(Ordering::Relaxed),
                s.pages[1].load(Ordering::Relaxed),
                libc::PROT_READ | libc::PROT_WRITE,
            );
            s.state.store(FREE, Ordering::Release);
        }
        self.runs.clear();
    }
}

thread_local! {
    /// The last fault address no guarded page explained (see [`on_fault`]).
    static MISSED: Cell<u64> = const { Cell::new(u64::MAX) };
}

/// The fault hook (see the module docs). Returns whether the fault was the guard's.
fn on_fault(addr: u64, site: Option<crate::crash::Site>) -> bool {
    let mut ours = false;
    for s in &TABLE {
        if s.state.load(Ordering::Acquire) != LIVE {
            continue;
        }
        if !(s.pages[0].load(Ordering::Relaxed)..s.pages[1].load(Ordering::Relaxed)).contains(&addr) {
            continue;
        }
        ours = true;
        let run = s.run[0].load(Ordering::Relaxed)..s.run[1].load(Ordering::Relaxed);
        if run.contains(&addr) && crate::crash::programs_store() {
            raced_at(s, addr, run, site);
        }
    }
    if ours {
        protect(addr & !(PAGE - 1), (addr & !(PAGE - 1)) + PAGE, libc::PROT_READ | libc::PROT_WRITE);
        MISSED.with(|m| m.set(u64::MAX));
        return true;
    }
    // A page released between the fault and this look is writable now: retry once; a second
    // fault at the same address is not the guard's.
    MISSED.with(|m| {
        let again = m.get() == addr;
        m.set(if again { u64::MAX } else { addr });
        !again
    })
}

/// Ends the run: the program stored at `addr`, inside the stale run `run` of slot `s`.
fn raced_at(s: &Slot, addr: u64, run: std::ops::Range<u64>, site: Option<crate::crash::Site>) -> ! {
    let buffer = s.buffer.load(Ordering::Relaxed);
    let holder = match s.holder.load(Ordering::Relaxed) {
        0 => "a device".to_string(),
        d => crate::devices::devices().get(d as usize - 1).name().to_string(),
    };
    let line = site.and_then(crate::crash::source_line);
    let store = match &line {
        Some(l) => format!("the host's store at {l}"),
        None => "a store of the host's (no line is known for it)".to_string(),
    };
    crate::fatal(&format!(
        "{store} wrote byte {} of the buffer at {buffer:#x} ({} bytes) while {holder} held a newer copy of its bytes \
         {}..{}: {}",
        addr - buffer,
        s.size.load(Ordering::Relaxed),
        run.start - buffer,
        run.end - buffer,
        super::RACE_ADVICE
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(start: u64) -> usize {
        TABLE
            .iter()
            .filter(|s| s.state.load(Ordering::Acquire) == LIVE && s.buffer.load(Ordering::Relaxed) == start)
            .count()
    }

    /// Guarded runs take slots and pages, a sync to the same runs changes nothing, and a
    /// clear gives both back. A store beside a run, in a guarded page, goes on (the hook
    /// makes the page writable); a fault no guarded page explains is retried once, then left
    /// to the crash handler.
    #[test]
    fn runs_are_guarded_and_stores_beside_them_go_on() {
        let mapping = super::super::watch::tests::Mapping::new(3);
        let (start, len) = (mapping.at(0) as u64, 3 * PAGE as usize);
        let mut g = Guarded::default();
        let runs = vec![StaleRun { start: 100, end: PAGE + 8, holder: Some(1) }];
        g.sync(start, len as u64, runs.clone());
        assert_eq!(live(start), 1);
        g.sync(start, len as u64, runs);
        assert_eq!(live(start), 1);
        // Byte PAGE + 8 is in the run's second page, just past the run. (A store into the run
        // from this thread, which is not the runtime's, would end the test process.)
        assert!(on_fault(start + PAGE + 8, None));
        // SAFETY: the page the hook made writable, of our mapping.
        unsafe { *((start + PAGE + 8) as *mut u8) = 7 };
        // Not guarded: retried once, then not the guard's.
        let elsewhere = start + 2 * PAGE + 1;
        assert!(on_fault(elsewhere, None));
        assert!(!on_fault(elsewhere, None));
        // More runs than a buffer may guard: none is.
        let many: Vec<StaleRun> =
            (0..=RUNS_PER_BUFFER as u64).map(|k| StaleRun { start: 2 * k, end: 2 * k + 1, holder: None }).collect();
        g.sync(start, len as u64, many);
        assert_eq!(live(start), 0);
        g.sync(start, len as u64, vec![StaleRun { start: 0, end: 1, holder: None }]);
        g.clear();
        assert_eq!(live(start), 0);
        // SAFETY: every page is writable again (the mapping is unmapped on drop).
        unsafe { *(start as *mut u8) = 1 };
    }
}
