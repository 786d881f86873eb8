//! Copies that cross ranks ([`crate::ranks`]).
//!
//! Every rank plans the same copies (control replication); each carries out its part of
//! each:
//! - a copy between two of its own places runs as in a run of one process;
//! - a copy from its device to another rank's device is a send, the other rank's part a
//!   receive;
//! - a copy from any device to the host reaches every rank's host: the device's rank copies
//!   it to its host and sends those bytes to every other rank;
//! - a copy from the host to another rank's device is that rank's alone (its host holds the
//!   same bytes), as is a copy between two devices of one other rank.
//!
//! Messages are tagged with the copy's position in the plan, which is the same on every
//! rank, so a send meets its receive whatever else is in flight between the two ranks.

use crate::devices::{devices, Copy, Device, Devices, Place};
use crate::ranks::{self, Op};
use crate::sink::{self, Event};

/// This rank's part of one copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Part {
    /// Runs here, as in one process.
    Local,
    /// Runs here, then its destination (the host) goes to every other rank.
    LocalThenShare,
    /// Its source is here; its bytes go to rank `to`.
    Send { to: usize },
    /// Its destination is here; its bytes come from rank `from`.
    Receive { from: usize },
    /// Neither end is here.
    None,
}

/// This rank's part of copy `c`.
pub(super) fn part(devs: &Devices, c: &Copy) -> Part {
    let local = |p: Place| match p {
        Place::Host => true,
        Place::Device(k) => devs.is_local(k),
    };
    match (c.src, c.dst) {
        (Place::Device(_), Place::Host) if local(c.src) => Part::LocalThenShare,
        (Place::Device(d), Place::Host) => Part::Receive { from: devs.owner(d) },
        (Place::Host, _) if local(c.dst) => Part::Local,
        (Place::Host, _) => Part::None,
        (Place::Device(d), Place::Device(e)) => match (local(c.src), local(c.dst)) {
            (true, true) => Part::Local,
            (true, false) => Part::Send { to: devs.owner(e) },
            (false, true) => Part::Receive { from: devs.owner(d) },
            (false, false) => Part::None,
        },
    }
}

/// A rectangle of bytes in this process: `rows` rows of `row_bytes`, `pitch` apart.
#[derive(Clone, Copy)]
struct Rect {
    addr: u64,
    rows: u64,
    row_bytes: u64,
    pitch: u64,
}

impl Rect {
    fn contiguous(&self) -> bool {
        self.rows <= 1 || self.pitch == self.row_bytes
    }

    fn bytes(&self) -> u64 {
        self.rows * self.row_bytes
    }

    /// The rectangle's bytes, one row after another.
    ///
    /// # Safety
    /// The rectangle is readable memory of this process.
    unsafe fn pack(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.bytes() as usize);
        for r in 0..self.rows {
            let row = unsafe {
                std::slice::from_raw_parts((self.addr + r * self.pitch) as *const u8, self.row_bytes as usize)
            };
            out.extend_from_slice(row);
        }
        out
    }

    /// Writes `packed` (as [`Rect::pack`] makes it) into the rectangle.
    ///
    /// # Safety
    /// The rectangle is writable memory of this process.
    unsafe fn unpack(&self, packed: &[u8]) {
        for (r, row) in packed.chunks(self.row_bytes as usize).enumerate() {
            unsafe {
                std::ptr::copy_nonoverlapping(row.as_ptr(), (self.addr + r as u64 * self.pitch) as *mut u8, row.len())
            };
        }
    }
}

fn src_rect(c: &Copy) -> Rect {
    Rect { addr: c.src_addr, rows: c.rows, row_bytes: c.row_bytes, pitch: c.pitch }
}

fn dst_rect(c: &Copy) -> Rect {
    Rect { addr: c.dst_addr, rows: c.rows, row_bytes: c.row_bytes, pitch: c.pitch }
}

/// The most page-locked host memory kept for staging GPU data that crosses ranks; an exchange
/// staging more goes through pageable memory (the driver's slower path).
const ARENA_MOST: usize = 256 << 20;

/// Page-locked host memory for staging, kept for the run and grown to the largest exchange
/// (up to [`ARENA_MOST`]): page-locking costs about 35 ms per GB once, a copy from pageable
/// memory runs at a tenth of the link's speed every time.
struct Arena {
    buf: Vec<u8>,
    pinned: bool,
}

static ARENA: std::sync::Mutex<Arena> = std::sync::Mutex::new(Arena { buf: Vec::new(), pinned: false });

/// Host memory for one exchange's GPU staging: `bytes` from the arena, or pageable when more
/// than it may hold.
struct Stager {
    arena: Option<std::sync::MutexGuard<'static, Arena>>,
    own: Vec<u8>,
    used: usize,
}

impl Stager {
    fn new(bytes: usize) -> Stager {
        let devs = devices();
        let Some(gpu) = devs.gpus.first().filter(|_| bytes <= ARENA_MOST) else {
            return Stager { arena: None, own: vec![0; bytes], used: 0 };
        };
        let mut a = ARENA.lock().unwrap_or_else(|e| e.into_inner());
        if a.buf.len() < bytes {
            if a.pinned {
                gpu.unpin_host(a.buf.as_mut_ptr());
            }
            let size = bytes.next_power_of_two().clamp(1 << 20, ARENA_MOST);
            a.buf = vec![0; size];
            let at = a.buf.as_mut_ptr();
            a.pinned = gpu.pin_host(at, size);
        }
        Stager { arena: Some(a), own: Vec::new(), used: 0 }
    }

    /// The next `bytes` of staging memory (the total asked for at [`Stager::new`] at most).
    fn take(&mut self, bytes: usize) -> *mut u8 {
        let buf = match &mut self.arena {
            Some(a) => &mut a.buf,
            None => &mut self.own,
        };
        assert!(self.used + bytes <= buf.len(), "staging past what was asked for");
        // SAFETY: inside `buf`, which lives (and does not move) as long as `self`.
        let p = unsafe { buf.as_mut_ptr().add(self.used) };
        self.used += bytes;
        p
    }
}

/// Where the bytes of one end of a copy are in this process: the planned address (host, or a
/// simulated device's memory), or, for a GPU, a packed span of `stage` (rows back to back)
/// that stages them, which `spans` records with the GPU and the rectangle it stands for.
fn staged(
    devs: &Devices,
    end: Place,
    addr: u64,
    r: Rect,
    stage: &mut Stager,
    spans: &mut Vec<(*mut u8, usize, Rect)>,
) -> Rect {
    match end {
        Place::Device(k) if devs.on_gpus() => {
            let at = stage.take(r.bytes() as usize);
            spans.push((at, k, Rect { addr, ..r }));
            Rect { addr: at as u64, rows: r.rows, row_bytes: r.row_bytes, pitch: r.row_bytes }
        }
        _ => r,
    }
}

/// Moves each GPU rectangle of `spans` down into its span (`to_host`) or up from it, and
/// waits for it.
fn move_spans(spans: &[(*mut u8, usize, Rect)], to_host: bool) -> Result<(), String> {
    let devs = devices();
    let mut used: Vec<usize> = Vec::new();
    for &(span, k, r) in spans {
        // SAFETY: the span holds the rectangle's bytes packed and lives (in the exchange's
        // stager) until the wait below; the rectangle is a planned copy's end in GPU `k`'s
        // allocation.
        unsafe { devs.gpu(k).copy_packed(r.addr, r.pitch, r.rows, r.row_bytes, span, to_host)? };
        used.push(k);
    }
    used.sort_unstable();
    used.dedup();
    used.into_iter().try_for_each(|k| devs.gpu(k).synchronize())
}

/// Sends and receives this rank's parts of `copies` that cross ranks (each with its position
/// in the plan); the [`Part::LocalThenShare`] copies must have run already. GPU data goes
/// through host memory: down before the sends, up after the receives, waited for before this
/// returns.
pub(super) fn exchange(copies: &[(usize, Copy)]) -> Result<(), String> {
    let devs = devices();
    let Some(w) = ranks::world() else { return Ok(()) };
    // Dry-run devices have no bytes to send.
    if devs.sims.first().is_some_and(|s| s.is_dry()) || copies.is_empty() {
        return Ok(());
    }
    let t = std::time::Instant::now();
    let on_gpu = |p: Place| devs.on_gpus() && matches!(p, Place::Device(_));
    let staging: u64 = copies
        .iter()
        .map(|(_, c)| match part(devs, c) {
            Part::Send { .. } if on_gpu(c.src) => c.bytes(),
            Part::Receive { .. } if on_gpu(c.dst) => c.bytes(),
            _ => 0,
        })
        .sum();
    let mut stage = Stager::new(staging as usize);
    // Sends from a GPU: its bytes down into packed spans first.
    let mut down = Vec::new();
    let mut sources: Vec<Rect> = Vec::with_capacity(copies.len());
    for (_, c) in copies {
        let r = src_rect(c);
        sources.push(match part(devs, c) {
            Part::Send { .. } => staged(devs, c.src, c.src_addr, r, &mut stage, &mut down),
            _ => r,
        });
    }
    move_spans(&down, true)?;
    // Packed rectangles stay here until the exchange is over; `Some(rect)` marks a receive
    // to unpack afterwards.
    let mut packs: Vec<(Vec<u8>, Option<Rect>)> = Vec::new();
    let mut ops: Vec<(Op, Option<usize>)> = Vec::new();
    let mut up = Vec::new();
    let tag = |i: usize| (i % 32_768) as i32;
    let (mut sent, mut received) = (0u64, 0u64);
    for (&(i, c), &from) in copies.iter().zip(&sources) {
        let mut send = |to: usize, r: Rect, packs: &mut Vec<(Vec<u8>, Option<Rect>)>| {
            let op = Op { peer: to as i32, tag: tag(i), send: 1, ptr: r.addr as *mut u8, len: r.bytes() };
            if r.contiguous() {
                ops.push((op, None));
            } else {
                // SAFETY: a planned copy's source (or its span), in this process's memory.
                packs.push((unsafe { r.pack() }, None));
                ops.push((op, Some(packs.len() - 1)));
            }
            sent += r.bytes();
        };
        match part(devs, &c) {
            Part::LocalThenShare => {
                for to in (0..w.size).filter(|&r| r != w.rank) {
                    send(to, dst_rect(&c), &mut packs);
                }
            }
            Part::Send { to } => send(to, from, &mut packs),
            Part::Receive { from } => {
                let r = staged(devs, c.dst, c.dst_addr, dst_rect(&c), &mut stage, &mut up);
                let op = Op { peer: from as i32, tag: tag(i), send: 0, ptr: r.addr as *mut u8, len: r.bytes() };
                if r.contiguous() {
                    ops.push((op, None));
                } else {
                    packs.push((vec![0; r.bytes() as usize], Some(r)));
                    ops.push((op, Some(packs.len() - 1)));
                }
                received += r.bytes();
                sink::record(Event::Copied { from: c.src.index(), to: c.dst.index(), bytes: c.bytes() });
            }
            Part::Local | Part::None => {}
        }
    }
    let ops: Vec<Op> = ops
        .into_iter()
        .map(|(mut op, at)| {
            if let Some(k) = at {
                op.ptr = packs[k].0.as_mut_ptr();
            }
            op
        })
        .collect();
    // SAFETY: every op names memory of this process (a planned copy's end, a span or a
    // packing vector above) that nothing else touches until the exchange returns.
    unsafe { w.exchange(&ops) };
    for (packed, into) in &packs {
        if let Some(r) = into {
            // SAFETY: a planned copy's destination (or its span), in this process's memory.
            unsafe { r.unpack(packed) };
        }
    }
    // Received GPU data: up from the spans, waited for before they go.
    move_spans(&up, false)?;
    drop(stage);
    sink::record(Event::CrossedRanks { sent, received, nanos: t.elapsed().as_nanos() as u64 });
    Ok(())
}
