//! Reductions through atomics, split (dashdb's `WriteKind::Reduce`): an argument the kernel
//! only updates with combining atomics (`atomicAdd` into a sum, a histogram, a counter).
//!
//! One device, the home (the first partition's), updates the buffer itself: it is made current
//! on the reduction's bytes first, as for a read, and is their only holder afterwards, as for a
//! write. Every other device with a partition updates its own copy's bytes of the reduction,
//! set to the operation's identity first ([`start`]); after the partitions, each such copy is
//! brought to the home device (a scratch buffer there) and combined into the home's bytes
//! ([`finish`]). The updates of all devices are then in the home's bytes, each once: integer
//! results are the one-device results, bit for bit; float sums are rounded in another order,
//! as two runs on one GPU are.
//!
//! Invariants:
//! - the reduction's bytes are whole elements of the argument's type, and no other argument
//!   of the launch points into its buffer (`split::split` refuses the split otherwise);
//! - on GPUs, a device's identity fill follows its copies on its stream and precedes its
//!   kernels, and a copy that reads those bytes from it is waited for first (`gpu::war_waits`);
//!   the home's stream waits for each other device's kernels, then copies and combines, all
//!   in stream order, so a later launch's scratch use follows this one's;
//! - under ranks, each rank fills its own devices' copies; a partial result on another rank's
//!   device than the home's crosses as any copy between ranks does (`memory::crossing`: a send
//!   on its rank, a receive into the home's scratch on the home's), and only the home's rank
//!   combines. Every rank walks the same reductions in the same order, so sends meet their
//!   receives.
//!
//! Merged writes (dashdb's `WriteKind::Merged`: a node writing where the analysis cannot
//! tell, whose blocks cannot talk within a launch) take the same path with another start and
//! combination ([`Combine::Changed`]): every device is made current on the buffer's bytes
//! first (the plan reads them in every partition), the home keeps a copy of its bytes before
//! the kernels (the twin, [`start`]), and after them takes from each other device's copy the
//! bytes that differ from the twin ([`finish`]). A block's writes are then in the home's bytes
//! whichever device ran it; bytes two devices both changed differently were raced for by two
//! blocks, as on one GPU, and the later device's value stands.

use crate::devices::{devices, Copy, Place};
use std::sync::Mutex;

/// How a device's copy is combined into the home's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Combine {
    /// Each element with the operation of the atomics (`dashdb::WriteKind::Reduce`): the
    /// other devices start from the identity.
    Op(dashdb::Reduction),
    /// Each byte that differs from the twin (`dashdb::WriteKind::Merged`): every device starts
    /// from the buffer's bytes; elements are bytes.
    Changed,
}

/// One reduction of a launch plan.
#[derive(Clone, Debug)]
pub(crate) struct Reduce {
    /// The plan's buffer it updates.
    pub buffer: usize,
    /// Its bytes within the buffer: `start..start + elements × size`.
    pub start: u64,
    pub elements: u64,
    pub how: Combine,
    /// The home device and the address of the reduction's first byte there.
    pub home: (usize, u64),
    /// Every other device with a partition, and the address of the first byte of its copy.
    pub others: Vec<(usize, u64)>,
}

impl Reduce {
    pub fn bytes(&self) -> u64 {
        match self.how {
            Combine::Op(how) => self.elements * u64::from(how.element.size()),
            Combine::Changed => self.elements,
        }
    }
}

/// Sets every other device's bytes of each reduction to the identity, and takes the twin of
/// each merged buffer on its home (enqueued on the device's stream; done on return on
/// simulated devices).
pub(crate) fn start(reductions: &[Reduce]) -> Result<(), String> {
    let devs = devices();
    for (slot, r) in reductions.iter().enumerate() {
        match r.how {
            Combine::Op(how) => {
                for &(k, addr) in r.others.iter().filter(|(k, _)| devs.is_local(*k)) {
                    devs.get(k).fill_identity(addr, how, r.elements)?;
                }
            }
            Combine::Changed if devs.is_local(r.home.0) && !r.others.is_empty() => {
                let (home, src) = r.home;
                let twin = twin(home, slot, r.bytes())?;
                let c = Copy {
                    src: Place::Device(home),
                    src_addr: src,
                    dst: Place::Device(home),
                    dst_addr: twin,
                    rows: 1,
                    row_bytes: r.bytes(),
                    pitch: r.bytes(),
                };
                devs.get(home).copy(&c)?;
            }
            Combine::Changed => {}
        }
    }
    Ok(())
}

/// Combines every other device's bytes of each reduction into the home's, on the home's
/// stream, after the other device's kernels (on GPUs, ordered by an event; across ranks, by
/// the exchange, which reads a device's bytes only once its work is done).
pub(crate) fn finish(reductions: &[Reduce]) -> Result<(), String> {
    let devs = devices();
    for (slot, r) in reductions.iter().enumerate().filter(|(_, r)| !r.others.is_empty()) {
        let (home, dst) = r.home;
        let home_here = devs.is_local(home);
        // A merged buffer comes over in pieces, so that the scratch stays small beside it (the
        // home's stream orders each piece's merge before the next piece's copy); a
        // reduction's elements at once.
        let piece = match r.how {
            Combine::Changed => r.bytes().min(merge_piece()),
            Combine::Op(_) => r.bytes(),
        };
        // Another rank's home: a stand-in address (the copy's receiving end is that rank's).
        let scratch = scratch(home, piece)?;
        for &(k, src) in &r.others {
            let here = devs.is_local(k);
            if !home_here && !here {
                continue;
            }
            if home_here && here && devs.on_gpus() {
                let done = devs.gpu(k).join_point()?;
                devs.gpu(home).wait_for(done)?;
            }
            let mut at = 0;
            while at < r.bytes() {
                let len = piece.min(r.bytes() - at);
                let c = Copy {
                    src: Place::Device(k),
                    src_addr: src + at,
                    dst: Place::Device(home),
                    dst_addr: scratch,
                    rows: 1,
                    row_bytes: len,
                    pitch: len,
                };
                if home_here && here {
                    devs.get(home).copy(&c)?;
                } else {
                    // This rank's end of a copy between ranks: done when this returns.
                    crate::memory::execute(&[c])?;
                }
                if home_here {
                    match r.how {
                        Combine::Op(how) => devs.get(home).combine(dst, scratch, how, r.elements)?,
                        Combine::Changed => {
                            let twin = twin(home, slot, r.bytes())?;
                            devs.get(home).merge_changed(dst + at, scratch, twin + at, len)?
                        }
                    }
                }
                at += len;
            }
        }
    }
    Ok(())
}

/// The most of a merged buffer brought to the home at once (`HPVM_MGPU_MERGE_PIECE=BYTES`,
/// default 64 MiB).
fn merge_piece() -> u64 {
    static PIECE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PIECE.get_or_init(|| match std::env::var("HPVM_MGPU_MERGE_PIECE") {
        Err(_) => 64 << 20,
        Ok(v) => v.trim().parse::<u64>().ok().filter(|&n| n >= 1).unwrap_or_else(|| {
            crate::fatal(&format!("HPVM_MGPU_MERGE_PIECE={v}: expected a number of bytes, at least 1"))
        }),
    })
}

/// What a scratch or a twin of `bytes` takes: room to grow for small ones (a histogram whose
/// size changes a little needs no new allocation), exactly `bytes` for large ones.
fn room(bytes: u64) -> u64 {
    if bytes > 64 << 20 {
        bytes.next_multiple_of(4096)
    } else {
        bytes.next_power_of_two().max(4096)
    }
}

/// Device memory the reductions keep between launches, by device and use: (device, use,
/// address, bytes). One use is the scratch partial results are brought into ([`SCRATCH`]);
/// the others are merged buffers' twins, by their place in their launch's reductions.
static KEPT: Mutex<Vec<(usize, usize, u64, u64)>> = Mutex::new(Vec::new());

/// The use of [`KEPT`] that is a device's scratch.
const SCRATCH: usize = usize::MAX;

/// Device `k`'s memory for `use_` of at least `bytes`: grown (the device's work finished
/// first, which may still read the old one) only when a larger one is wanted.
fn kept(k: usize, use_: usize, bytes: u64) -> Result<u64, String> {
    let mut all = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(at) = all.iter().position(|&(d, u, _, _)| d == k && u == use_) {
        let (_, _, addr, size) = all[at];
        if size >= bytes {
            return Ok(addr);
        }
        let dev = devices().get(k);
        dev.synchronize()?;
        dev.free(addr)?;
        all.swap_remove(at);
    }
    let size = room(bytes);
    let addr = devices().get(k).alloc(size as usize)?;
    all.push((k, use_, addr, size));
    Ok(addr)
}

/// Device `k`'s twin of the merged buffer at `slot` of its launch's reductions.
fn twin(k: usize, slot: usize, bytes: u64) -> Result<u64, String> {
    kept(k, slot, bytes)
}

/// Device `k`'s scratch buffer, of at least `bytes`.
fn scratch(k: usize, bytes: u64) -> Result<u64, String> {
    kept(k, SCRATCH, bytes)
}
