//! Copies between the program's (pageable) host memory and a GPU through page-locked staging
//! slots, the host side moved by many threads at once.
//!
//! Why: a DMA engine reads and writes only page-locked memory. Locking the program's buffers
//! costs about 35 ms per GB on the machines we measured (more with several GPUs), serialized
//! in the driver; the driver's own path for pageable memory is one thread and ran at 6 to
//! 8 GB/s there. Copying into a few locked slots with the worker pool ran at about 40 GB/s
//! with 16 threads, and the slot's DMA (55 GB/s) overlaps the next slot's fill, so a buffer
//! that crosses once costs about a third of what locking it did, and nothing of the program's
//! memory changes state.
//!
//! Invariants:
//! - a slot is written by the host only after the DMA that last used it completed (its event);
//! - host to device: the program's bytes are read before [`Slots::host_to_device`] returns;
//!   the device has them once the stream reaches the copies (the stream's order, as for any
//!   copy);
//! - device to host: [`Slots::device_to_host`] returns after the program's bytes are written,
//!   so it waits for everything enqueued on the stream before it.

use super::Copy;
use cudarc::driver::{result, sys};
use rayon::prelude::*;
use std::ffi::c_void;

/// Bytes of one slot. Small, because making a slot is the expensive part for a small
/// program: on the H200 machines fresh page-locked memory cost about 0.6 ms per MB (three
/// 32 MiB slots took about 60 ms per GPU), while an 8 MiB slot's DMA (0.15 ms) is still long
/// next to the per-slot overheads (an event wait, a pool dispatch: microseconds).
pub const SLOT_BYTES: usize = 8 << 20;
/// Slots per GPU: one being filled or drained while the others' DMAs run.
const SLOTS: usize = 3;
/// Host copies smaller than this go through the driver's own path: one memcpy of the driver
/// costs less than a round through the pool.
pub const STAGE_AT_LEAST: u64 = 256 << 10;
/// Pieces of a slot's host-side copy handed to the worker pool: 16 per slot, since memcpy
/// bandwidth grew up to 16 threads there (10 GB/s on one, 21 on 4, 41 on 16).
const PIECE_BYTES: usize = 512 << 10;

/// One GPU's staging slots, made on first use.
pub struct Slots {
    slots: Vec<Slot>,
    next: usize,
}

struct Slot {
    host: *mut u8,
    done: sys::CUevent,
    /// The event was recorded since the slot was last waited for.
    in_flight: bool,
}

// SAFETY: the slots' memory and events are used under the GPU's lock of them, with its
// context current.
unsafe impl Send for Slots {}

impl Slots {
    pub fn new() -> Result<Slots, String> {
        let mut slots = Vec::with_capacity(SLOTS);
        for _ in 0..SLOTS {
            // SAFETY: plain page-locked allocation, PORTABLE so any GPU's context may use it.
            let host = unsafe { result::malloc_host(SLOT_BYTES, sys::CU_MEMHOSTALLOC_PORTABLE) }
                .map_err(|e| format!("cuMemHostAlloc of a {} MiB staging slot: {e}", SLOT_BYTES >> 20))?;
            let done = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
                .map_err(|e| format!("cuEventCreate: {e}"))?;
            slots.push(Slot { host: host as *mut u8, done, in_flight: false });
        }
        Ok(Slots { slots, next: 0 })
    }

    /// The next slot, once its last DMA has completed.
    fn take(&mut self) -> Result<usize, String> {
        let i = self.next;
        self.next = (self.next + 1) % self.slots.len();
        self.wait(i)?;
        Ok(i)
    }

    fn wait(&mut self, i: usize) -> Result<(), String> {
        let s = &mut self.slots[i];
        if s.in_flight {
            // SAFETY: an event of the current context, recorded.
            unsafe { result::event::synchronize(s.done) }.map_err(|e| format!("waiting for a staging slot: {e}"))?;
            s.in_flight = false;
        }
        Ok(())
    }

    fn record(&mut self, i: usize, stream: sys::CUstream) -> Result<(), String> {
        // SAFETY: the slot's event, on the GPU's stream.
        unsafe { result::event::record(self.slots[i].done, stream) }.map_err(|e| format!("cuEventRecord: {e}"))?;
        self.slots[i].in_flight = true;
        Ok(())
    }
}

/// A part of a copy that fits one slot: rows `first..first + rows` of the rectangle, bytes
/// `lo..hi` of each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Chunk {
    first: u64,
    rows: u64,
    lo: u64,
    hi: u64,
}

impl Chunk {
    fn bytes(&self) -> usize {
        (self.rows * (self.hi - self.lo)) as usize
    }
}

/// The copy cut into chunks of at most `slot` bytes, in order: whole rows where a row fits
/// (a contiguous copy is one long row), else pieces of one row.
fn chunks(c: &Copy, slot: u64) -> Vec<Chunk> {
    let (rows, row) = if c.rows <= 1 || c.row_bytes == c.pitch { (1, c.bytes()) } else { (c.rows, c.row_bytes) };
    let mut out = Vec::new();
    if row <= slot {
        let per = (slot / row.max(1)).max(1);
        let mut first = 0;
        while first < rows {
            let n = per.min(rows - first);
            out.push(Chunk { first, rows: n, lo: 0, hi: row });
            first += n;
        }
    } else {
        for r in 0..rows {
            let mut lo = 0;
            while lo < row {
                let hi = (lo + slot).min(row);
                out.push(Chunk { first: r, rows: 1, lo, hi });
                lo = hi;
            }
        }
    }
    out
}

/// The pitch between rows of the copy's host side (a flat copy is one row).
fn host_pitch(c: &Copy) -> u64 {
    if c.rows <= 1 || c.row_bytes == c.pitch {
        c.bytes()
    } else {
        c.pitch
    }
}

/// Copies the chunk's rows between the program's memory at `host` (rows `pitch` apart) and
/// the packed slot, on the worker pool.
///
/// # Safety
/// `host` covers the chunk's rows at `pitch`, `slot` covers `chunk.bytes()`, and neither is
/// written by anyone else meanwhile.
unsafe fn move_rows(host: u64, pitch: u64, chunk: Chunk, slot: *mut u8, into_slot: bool) {
    let row = (chunk.hi - chunk.lo) as usize;
    let host = host as usize + (chunk.first * pitch + chunk.lo) as usize;
    let slot = slot as usize;
    // Pieces of one long row, or whole rows (batched for the pool by `min_len`).
    let (pieces, min_len): (Vec<(usize, usize, usize)>, usize) = if chunk.rows == 1 {
        ((0..row).step_by(PIECE_BYTES).map(|o| (host + o, slot + o, PIECE_BYTES.min(row - o))).collect(), 1)
    } else {
        let rows = (0..chunk.rows as usize).map(|r| (host + r * pitch as usize, slot + r * row, row)).collect();
        (rows, (PIECE_BYTES / row.max(1)).max(1))
    };
    let each = |&(h, s, n): &(usize, usize, usize)| {
        let (src, dst) = if into_slot { (h, s) } else { (s, h) };
        // SAFETY: the caller's ranges; pieces are disjoint.
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, n) };
    };
    if chunk.bytes() < 2 * PIECE_BYTES {
        pieces.iter().for_each(each);
    } else {
        crate::pool::pool().install(|| pieces.par_iter().with_min_len(min_len).for_each(each));
    }
}

/// The DMA of one chunk between a slot and the GPU, enqueued on `stream`.
///
/// # Safety
/// The slot is page-locked and covers the chunk; `device` covers its rows at `pitch`.
unsafe fn dma(
    slot: *mut u8,
    device: u64,
    pitch: u64,
    chunk: Chunk,
    to_device: bool,
    s: sys::CUstream,
) -> Result<(), String> {
    let row = chunk.hi - chunk.lo;
    let dev = device + chunk.first * pitch + chunk.lo;
    let host = sys::CUmemorytype::CU_MEMORYTYPE_HOST;
    let gpu = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE;
    let r = if chunk.rows == 1 {
        if to_device {
            sys::cuMemcpyHtoDAsync_v2(dev, slot as *const c_void, row as usize, s)
        } else {
            sys::cuMemcpyDtoHAsync_v2(slot as *mut c_void, dev, row as usize, s)
        }
    } else {
        let (src_type, dst_type) = if to_device { (host, gpu) } else { (gpu, host) };
        let d = sys::CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: src_type,
            srcHost: if to_device { slot as *const c_void } else { std::ptr::null() },
            srcDevice: if to_device { 0 } else { dev },
            srcArray: std::ptr::null_mut(),
            srcPitch: if to_device { row as usize } else { pitch as usize },
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: dst_type,
            dstHost: if to_device { std::ptr::null_mut() } else { slot as *mut c_void },
            dstDevice: if to_device { dev } else { 0 },
            dstArray: std::ptr::null_mut(),
            dstPitch: if to_device { pitch as usize } else { row as usize },
            WidthInBytes: row as usize,
            Height: chunk.rows as usize,
        };
        sys::cuMemcpy2DAsync_v2(&d, s)
    };
    r.result().map_err(|e| {
        format!("{} through a staging slot: {e}", if to_device { "host to device" } else { "device to host" })
    })
}

impl Slots {
    /// Enqueues host-to-device copy `c` on `stream` through the slots (see the module doc),
    /// with the GPU's context current.
    pub(super) fn host_to_device(&mut self, c: &Copy, stream: sys::CUstream) -> Result<(), String> {
        let pitch = host_pitch(c);
        for chunk in chunks(c, SLOT_BYTES as u64) {
            let i = self.take()?;
            let slot = self.slots[i].host;
            // SAFETY: the copy's host rows are the program's tracked memory; the slot is free.
            unsafe {
                move_rows(c.src_addr, pitch, chunk, slot, true);
                dma(slot, c.dst_addr, pitch, chunk, true, stream)?;
            }
            self.record(i, stream)?;
        }
        Ok(())
    }

    /// Copies device-to-host `c` through the slots, after what is enqueued on `stream`, and
    /// returns once the program's memory holds it: the DMA of one chunk runs while the
    /// previous one is copied out. The GPU's context is current.
    pub(super) fn device_to_host(&mut self, c: &Copy, stream: sys::CUstream) -> Result<(), String> {
        let pitch = host_pitch(c);
        let mut pending: Option<(usize, Chunk)> = None;
        let drain = |slots: &mut Slots, (i, chunk): (usize, Chunk)| -> Result<(), String> {
            slots.wait(i)?;
            // SAFETY: the DMA into the slot completed; the host rows are the program's.
            unsafe { move_rows(c.dst_addr, pitch, chunk, slots.slots[i].host, false) };
            Ok(())
        };
        for chunk in chunks(c, SLOT_BYTES as u64) {
            let i = self.take()?;
            // SAFETY: the slot is free and covers the chunk; the device rows are allocated.
            unsafe { dma(self.slots[i].host, c.src_addr, pitch, chunk, false, stream)? };
            self.record(i, stream)?;
            if let Some(p) = pending.replace((i, chunk)) {
                drain(self, p)?;
            }
        }
        if let Some(p) = pending {
            drain(self, p)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::Place;

    fn copy(rows: u64, row_bytes: u64, pitch: u64) -> Copy {
        Copy { src: Place::Host, src_addr: 0, dst: Place::Device(0), dst_addr: 0, rows, row_bytes, pitch }
    }

    /// Every byte of the copy is in exactly one chunk, each chunk fits the slot, and chunks
    /// come in the copy's order.
    fn check_cover(c: &Copy, slot: u64) {
        let cs = chunks(c, slot);
        let pitch = host_pitch(c);
        let mut bytes = Vec::new();
        for ch in &cs {
            assert!(ch.bytes() as u64 <= slot && ch.bytes() > 0, "{ch:?} of {c:?}");
            for r in ch.first..ch.first + ch.rows {
                bytes.push((r * pitch + ch.lo, r * pitch + ch.hi));
            }
        }
        let mut want = Vec::new();
        let (rows, row) = if c.rows <= 1 || c.row_bytes == c.pitch { (1, c.bytes()) } else { (c.rows, c.row_bytes) };
        for r in 0..rows {
            want.push((r * pitch, r * pitch + row));
        }
        // Merge each row's pieces, in order.
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (lo, hi) in bytes {
            match merged.last_mut() {
                Some(last) if last.1 == lo && lo % pitch.max(1) != 0 => last.1 = hi,
                _ => merged.push((lo, hi)),
            }
        }
        assert_eq!(merged, want, "{c:?} in slots of {slot}");
    }

    #[test]
    fn chunks_cover_every_copy_shape_once() {
        for &slot in &[1u64, 7, 64, 100, 4096] {
            for &(rows, row, pitch) in
                &[(1, 1, 1), (1, 1000, 1000), (5, 10, 10), (5, 10, 16), (7, 33, 100), (3, 500, 512), (64, 64, 128)]
            {
                check_cover(&copy(rows, row, pitch), slot);
            }
        }
    }

    #[test]
    fn whole_rows_per_chunk_where_they_fit() {
        let cs = chunks(&copy(10, 30, 64), 100);
        assert_eq!(cs.iter().map(|c| c.rows).collect::<Vec<_>>(), vec![3, 3, 3, 1]);
        assert!(cs.iter().all(|c| c.lo == 0 && c.hi == 30));
    }

    /// The host side of a chunk, into the slot and back, through the pool's pieces.
    #[test]
    fn rows_move_into_the_slot_packed_and_back() {
        let (rows, row, pitch) = (40u64, 3000u64, 4096u64);
        let host: Vec<u8> = (0..rows * pitch).map(|i| (i * 7 % 251) as u8).collect();
        let chunk = Chunk { first: 2, rows: 30, lo: 100, hi: 100 + row - 200 };
        let mut slot = vec![0u8; chunk.bytes()];
        // SAFETY: both buffers cover the chunk.
        unsafe { move_rows(host.as_ptr() as u64, pitch, chunk, slot.as_mut_ptr(), true) };
        let w = (chunk.hi - chunk.lo) as usize;
        for r in 0..chunk.rows as usize {
            let h = (chunk.first as usize + r) * pitch as usize + chunk.lo as usize;
            assert_eq!(&slot[r * w..(r + 1) * w], &host[h..h + w]);
        }
        let mut back = vec![0u8; host.len()];
        // SAFETY: as above.
        unsafe { move_rows(back.as_mut_ptr() as u64, pitch, chunk, slot.as_mut_ptr(), false) };
        for r in 0..chunk.rows as usize {
            let h = (chunk.first as usize + r) * pitch as usize + chunk.lo as usize;
            assert_eq!(&back[h..h + w], &host[h..h + w]);
        }
        // One long row larger than a piece goes in pieces.
        let long: Vec<u8> = (0..5 * PIECE_BYTES + 13).map(|i| (i % 253) as u8).collect();
        let chunk = Chunk { first: 0, rows: 1, lo: 0, hi: long.len() as u64 };
        let mut slot = vec![0u8; long.len()];
        // SAFETY: as above.
        unsafe { move_rows(long.as_ptr() as u64, long.len() as u64, chunk, slot.as_mut_ptr(), true) };
        assert_eq!(slot, long);
    }
}
