//! Rectangles with small holes between their rows (a padded array's rows, a stencil's
//! interior without its border columns) taken whole: one run of bytes instead of thousands.
//!
//! Why: a partition that writes 120 of every 128 columns (Parboil lbm's padded planes) leaves
//! the coherence maps one segment per row, and every copy plan, and every comparison of
//! states a copy-plan hit makes, walks them all: hundreds of milliseconds per launch where the
//! kernel takes a fraction of one.
//!
//! Rules (each keeps every device's copy right, see the invariants in `memory::coherence`):
//! - a READ may always be over-approximated: a rectangle whose holes are small is read as its
//!   hull (the holes are copied too, current values, so the device merely holds more);
//! - a WRITE rectangle becomes its hull only when no other partition of the launch writes
//!   within that hull; the holes, which the kernel leaves alone, are then made current on the
//!   device first (read), so that after the launch the device holds the current value of every
//!   byte of the hull, and may be its only holder. This is `dashdb::WriteKind::May`'s rule
//!   applied to the holes.

use crate::ctx::GridBox;
use crate::memory::ByteRect;

/// A partition: its device, its box of the grid, and the bytes it reads and writes per buffer.
pub(crate) type Part = (usize, GridBox, Vec<(usize, ByteRect)>, Vec<(usize, ByteRect)>);

/// A byte run `start..end` written by partition `k`: `(start, end, k)`.
pub(crate) type PartRun = (u64, u64, usize);

/// Two partitions' byte runs that overlap: the partitions and the bytes shared.
pub(crate) fn first_overlap(mut runs: Vec<PartRun>) -> Option<(usize, usize, u64, u64)> {
    runs.sort_unstable();
    // A sweep with the furthest end so far and its partition: a run starting before it
    // overlaps that partition's run (two other partitions overlapping each other would have
    // been caught when the later of them started). Comparing neighbours only would miss a
    // long run of one partition covering a short one that follows another.
    let mut reach: Option<(u64, usize)> = None;
    for (lo, hi, k) in runs {
        if let Some((end, owner)) = reach {
            if lo < end && owner != k {
                return Some((owner, k, lo, end.min(hi)));
            }
        }
        if reach.is_none_or(|(end, _)| hi > end) {
            reach = Some((hi, k));
        }
    }
    None
}

/// Whether rectangles `a` and `b` share a byte, decided without listing their rows; `None`
/// where their pitches differ (their rows then decide). A column of a tall matrix is one
/// rectangle of thousands of rows: listed row by row, checking a Gaussian elimination's
/// partitions for overlapping writes took most of each plan (PolyBench's gramschmidt, half
/// a millisecond a launch on eight devices).
pub(crate) fn rects_meet(a: &ByteRect, b: &ByteRect) -> Option<bool> {
    if a.rows == 0 || b.rows == 0 || a.row_bytes == 0 || b.row_bytes == 0 {
        return Some(false);
    }
    if a.end() <= b.start || b.end() <= a.start {
        return Some(false);
    }
    let one_row = |r: &ByteRect| if r.is_contiguous() { ByteRect::run(r.start, r.end()) } else { *r };
    let (a, b) = (one_row(a), one_row(b));
    // A single row has any pitch; the hulls meet, so two single rows do.
    let p = match (a.rows, b.rows) {
        (1, 1) => return Some(true),
        (1, _) => b.pitch,
        (_, 1) => a.pitch,
        _ if a.pitch == b.pitch => a.pitch,
        _ => return None,
    };
    // Row i of `a` and row j of `b` meet where, with m = i - j and d = b.start - a.start,
    // d - a.row_bytes < m * p < d + b.row_bytes, for some m in (-b.rows, a.rows); the
    // smallest m past the lower bound decides.
    let (p, d) = (i128::from(p), i128::from(b.start) - i128::from(a.start));
    let (wa, wb, ra, rb) = (i128::from(a.row_bytes), i128::from(b.row_bytes), i128::from(a.rows), i128::from(b.rows));
    let m = ((d - wa).div_euclid(p) + 1).max(1 - rb);
    Some(m < ra && m * p < d + wb)
}

/// Whether two partitions write a common byte of buffer `b`, decided rectangle by
/// rectangle ([`rects_meet`]) where they are few; `None` where their rows must decide.
pub(crate) fn writes_meet(parts: &[Part], b: usize) -> Option<bool> {
    let rects: Vec<(usize, ByteRect)> = parts
        .iter()
        .enumerate()
        .flat_map(|(k, p)| p.3.iter().filter(|(x, _)| *x == b).map(move |(_, r)| (k, *r)))
        .collect();
    rects_overlap(&rects)
}

/// Whether rectangles of different partitions (`(partition, rectangle)`) share a byte,
/// decided rectangle by rectangle where they are few; `None` where their rows must decide.
fn rects_overlap(rects: &[(usize, ByteRect)]) -> Option<bool> {
    if rects.len() > 64 {
        return None;
    }
    let mut undecided = false;
    for (i, (k, a)) in rects.iter().enumerate() {
        for (l, c) in &rects[i + 1..] {
            if k == l {
                continue;
            }
            match rects_meet(a, c) {
                Some(true) => return Some(true),
                Some(false) => {}
                None => undecided = true,
            }
        }
    }
    (!undecided).then_some(false)
}

/// Holes of at most this fraction of a row's pitch are taken with the rectangle.
const MAX_HOLE_EIGHTHS: u64 = 1;

/// Whether `r` has holes, all small: its hull costs at most 1/8 more bytes.
fn small_holes(r: &ByteRect) -> bool {
    !r.is_contiguous() && (r.pitch - r.row_bytes) * 8 <= r.pitch * MAX_HOLE_EIGHTHS
}

fn hull(r: &ByteRect) -> ByteRect {
    ByteRect::run(r.start, r.end())
}

/// The bytes between the rows of `r`.
fn holes(r: &ByteRect) -> ByteRect {
    ByteRect { start: r.start + r.row_bytes, rows: r.rows - 1, row_bytes: r.pitch - r.row_bytes, pitch: r.pitch }
}

/// Takes the rectangles of every partition with small holes whole, where that is safe (see
/// the module doc). `parts` already write disjoint bytes.
pub(crate) fn take_whole(parts: &mut [Part], buffers: usize) {
    for b in 0..buffers {
        // Writes: whole only if the hulls stay apart from every other partition's writes.
        let writes = || {
            parts
                .iter()
                .enumerate()
                .flat_map(move |(k, p)| p.3.iter().filter(move |(x, _)| *x == b).map(move |(_, r)| (k, r)))
        };
        if !writes().any(|(_, r)| small_holes(r)) {
            continue;
        }
        let taken: Vec<(usize, ByteRect)> =
            writes().map(|(k, r)| (k, if small_holes(r) { hull(r) } else { *r })).collect();
        let meet = rects_overlap(&taken).unwrap_or_else(|| {
            let runs = taken.iter().flat_map(|(k, r)| r.row_runs().map(move |(lo, hi)| (lo, hi, *k))).collect();
            first_overlap(runs).is_some()
        });
        if !meet {
            for p in parts.iter_mut() {
                let mut holes_read = Vec::new();
                for (x, r) in p.3.iter_mut().filter(|(x, _)| *x == b) {
                    if small_holes(r) {
                        holes_read.push((*x, holes(r)));
                        *r = hull(r);
                    }
                }
                p.2.extend(holes_read);
            }
        }
    }
    for p in parts.iter_mut() {
        for (_, r) in p.2.iter_mut() {
            if small_holes(r) {
                *r = hull(r);
            }
        }
        p.2 = merged(std::mem::take(&mut p.2));
        p.3 = merged(std::mem::take(&mut p.3));
    }
}

/// `rects` with the runs of each buffer that touch or overlap joined; strided rectangles as
/// they are.
fn merged(mut rects: Vec<(usize, ByteRect)>) -> Vec<(usize, ByteRect)> {
    rects.sort_unstable_by_key(|&(b, r)| (b, !r.is_contiguous(), r.start));
    let mut out: Vec<(usize, ByteRect)> = Vec::with_capacity(rects.len());
    for (b, r) in rects {
        match out.last_mut() {
            Some((lb, l)) if *lb == b && l.is_contiguous() && r.is_contiguous() && r.start <= l.end() => {
                *l = ByteRect::run(l.start, l.end().max(r.end()))
            }
            _ => out.push((b, r)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctx::GridBox;
    use crate::devices::Place;
    use crate::memory::fakes::{buffer, Memories};
    use crate::testing::numbers;

    /// A partition writing `rows` rows of 120 floats from row `first` of a 128-float pitch.
    fn padded(first: u64, rows: u64) -> Part {
        let bx = GridBox { lo: [0; 3], hi: [1; 3], dim: [1; 3] };
        let w = ByteRect { start: first * 512, rows, row_bytes: 480, pitch: 512 };
        (0, bx, vec![], vec![(0, w)])
    }

    /// Byte-by-byte model: what each partition reads and writes.
    fn bytes(rects: &[(usize, ByteRect)], size: usize) -> Vec<bool> {
        let mut v = vec![false; size];
        for (_, r) in rects {
            for (lo, hi) in r.row_runs() {
                v[lo as usize..hi as usize].fill(true);
            }
        }
        v
    }

    #[test]
    fn padded_rows_are_written_whole_with_their_holes_read_first() {
        let mut parts = vec![padded(0, 10), padded(10, 10)];
        let before: Vec<Vec<bool>> = parts.iter().map(|p| bytes(&p.3, 20 * 512)).collect();
        take_whole(&mut parts, 1);
        for (k, p) in parts.iter().enumerate() {
            assert_eq!(p.3.len(), 1, "one run: {:?}", p.3);
            assert!(p.3[0].1.is_contiguous());
            let wrote = bytes(&p.3, 20 * 512);
            let read = bytes(&p.2, 20 * 512);
            for i in 0..20 * 512 {
                // Every byte of the hull is either written by the kernel or made current first.
                if wrote[i] {
                    assert!(before[k][i] || read[i], "byte {i} of part {k} neither written nor read");
                }
                // Nothing written before is lost.
                if before[k][i] {
                    assert!(wrote[i]);
                }
            }
        }
    }

    #[test]
    fn hulls_that_would_meet_another_partitions_writes_stay_exact() {
        // Columns split: each partition writes half of every row, whose hulls interleave.
        let bx = GridBox { lo: [0; 3], hi: [1; 3], dim: [1; 3] };
        let left = ByteRect { start: 0, rows: 8, row_bytes: 480, pitch: 512 };
        let right = ByteRect { start: 480, rows: 8, row_bytes: 32, pitch: 512 };
        let mut parts = vec![(0, bx, vec![], vec![(0, left)]), (1, bx, vec![], vec![(0, right)])];
        take_whole(&mut parts, 1);
        assert_eq!(parts[0].3, vec![(0, left)]);
        assert_eq!(parts[1].3, vec![(0, right)]);
        assert!(parts[0].2.is_empty());
    }

    #[test]
    fn large_holes_are_kept_and_reads_are_merged() {
        let bx = GridBox { lo: [0; 3], hi: [1; 3], dim: [1; 3] };
        let sparse = ByteRect { start: 0, rows: 4, row_bytes: 64, pitch: 512 };
        let small = ByteRect { start: 4096, rows: 4, row_bytes: 500, pitch: 512 };
        let next = ByteRect::run(4096 + 3 * 512 + 500, 8192);
        let mut parts = vec![(0, bx, vec![(0, sparse), (0, small), (0, next)], vec![])];
        take_whole(&mut parts, 1);
        assert_eq!(parts[0].2, vec![(0, ByteRect::run(4096, 8192)), (0, sparse)]);
    }

    /// Launches split by bands of rows whose writes leave holes (padded rows), planned as the
    /// runtime plans them (this module widens, then every read is made current, then
    /// every writer becomes the only holder of what it wrote): every holder the map names for
    /// a byte has its latest value, and every partition read the latest values.
    #[test]
    fn widened_writes_keep_every_holder_current() {
        let mut next = numbers(11);
        for round in 0..40 {
            let (rows, pitch) = (4 + next(20), 8 + next(24));
            let size = rows * pitch;
            let devices = 1 + next(4) as usize;
            let mut buf = buffer(size, devices);
            let mut latest: Vec<u32> = (0..size as u32).collect();
            let mut mem = Memories { host: latest.clone(), devices: vec![vec![u32::MAX; size as usize]; devices] };
            let mut version = size as u32;
            for launch in 0..12 {
                // Bands of rows, one per partition; each writes `width` columns from `col` of
                // its band (holes small enough to be widened, or not) and reads its band with
                // a row of halo each side, some other rows, or nothing.
                let width = pitch - next(pitch / 4 + 1);
                let col = next(pitch - width + 1);
                let mut cuts: Vec<u64> = (0..devices - 1).map(|_| next(rows + 1)).collect();
                cuts.extend([0, rows]);
                cuts.sort_unstable();
                let bx = GridBox { lo: [0; 3], hi: [1; 3], dim: [1; 3] };
                let mut parts: Vec<Part> = Vec::new();
                for k in 0..devices {
                    let (a, b) = (cuts[k], cuts[k + 1]);
                    if a == b {
                        continue;
                    }
                    let write = ByteRect { start: a * pitch + col, rows: b - a, row_bytes: width, pitch };
                    // Its band with a halo row each side, some other rows, or nothing.
                    let reads = match next(3) {
                        0 => {
                            let (ra, rb) = (a.saturating_sub(1), (b + 1).min(rows));
                            vec![(0, ByteRect { start: ra * pitch + col, rows: rb - ra, row_bytes: width, pitch })]
                        }
                        1 => {
                            let r0 = next(rows);
                            vec![(
                                0,
                                ByteRect {
                                    start: r0 * pitch,
                                    rows: 1 + next(rows - r0),
                                    row_bytes: 1 + next(pitch),
                                    pitch,
                                },
                            )]
                        }
                        _ => vec![],
                    };
                    parts.push((k, bx, reads, vec![(0, write)]));
                }
                // Sometimes another partition also writes a byte of one band's holes: that band's
                // hull would take it.
                if parts.len() > 1 && width < pitch && next(2) == 0 {
                    let (i, j) = (next(parts.len() as u64) as usize, next(parts.len() as u64) as usize);
                    let band = parts[i].3[0].1;
                    if i != j && band.rows > 1 {
                        let row = band.start / pitch + next(band.rows - 1);
                        let c = (col + width + next(pitch - width)) % pitch;
                        parts[j].3.push((0, ByteRect::run(row * pitch + c, row * pitch + c + 1)));
                    }
                }
                let exact: Vec<Vec<ByteRect>> = parts.iter().map(|p| p.3.iter().map(|w| w.1).collect()).collect();
                let asked: Vec<Vec<ByteRect>> = parts.iter().map(|p| p.2.iter().map(|r| r.1).collect()).collect();
                take_whole(&mut parts, 1);
                let before = buf.coherence.clone();
                let mut copies = Vec::new();
                for p in &parts {
                    for (_, r) in &p.2 {
                        buf.plan_current(Place::Device(p.0), r, &before, &mut copies, true);
                    }
                }
                mem.run(&copies);
                for (p, read) in parts.iter().zip(&asked).flat_map(|(p, rs)| rs.iter().map(move |r| (p, r))) {
                    for (lo, hi) in read.row_runs() {
                        for b in lo..hi {
                            let got = mem.place(Place::Device(p.0))[b as usize];
                            assert_eq!(
                                got, latest[b as usize],
                                "round {round} launch {launch}: byte {b} read by {}",
                                p.0
                            );
                        }
                    }
                }
                // The kernels write exactly their rectangles; the map learns the widened ones.
                for (p, rects) in parts.iter().zip(&exact) {
                    for r in rects {
                        for (lo, hi) in r.row_runs() {
                            for b in lo..hi {
                                version += 1;
                                latest[b as usize] = version;
                                mem.place(Place::Device(p.0))[b as usize] = version;
                            }
                        }
                    }
                    let mut runs: Vec<(u64, u64)> = p.3.iter().flat_map(|(_, r)| r.row_runs()).collect();
                    runs.sort_unstable();
                    runs.dedup();
                    buf.coherence.set_only_runs(runs, Place::Device(p.0));
                }
                for s in buf.coherence.segments() {
                    for h in (0..=devices).map(|i| if i == 0 { Place::Host } else { Place::Device(i - 1) }) {
                        if s.holders.has(h) {
                            for b in s.start..s.end {
                                assert_eq!(
                                    mem.place(h)[b as usize],
                                    latest[b as usize],
                                    "round {round}: byte {b} at {h:?}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    /// Two rectangles meet exactly where their bytes do: against their rows listed, for
    /// random rectangles of equal and of different pitches, single rows and whole runs.
    #[test]
    fn rectangles_meet_where_their_bytes_do() {
        let mut next = numbers(0x5eed_1234);
        let rect = |next: &mut dyn FnMut(u64) -> u64| {
            let pitch = [8, 16, 24][next(3) as usize];
            let row_bytes = 1 + next(pitch);
            ByteRect { start: next(96), rows: next(6), row_bytes, pitch }
        };
        let mut decided = 0;
        for _ in 0..20_000 {
            let (a, b) = (rect(&mut next), rect(&mut next));
            let truth = {
                let (x, y) = (bytes(&[(0, a)], 512), bytes(&[(0, b)], 512));
                x.iter().zip(&y).any(|(p, q)| *p && *q)
            };
            if let Some(meet) = rects_meet(&a, &b) {
                assert_eq!(meet, truth, "{a:?} {b:?}");
                decided += 1;
            }
        }
        assert!(decided > 10_000, "most pairs are decided: {decided}");
        // A column of each of two partitions: apart, or the same column.
        let col = |c: u64, first: u64| ByteRect { start: first * 8192 + c * 4, rows: 1024, row_bytes: 4, pitch: 8192 };
        assert_eq!(rects_meet(&col(5, 0), &col(6, 0)), Some(false));
        assert_eq!(rects_meet(&col(5, 0), &col(5, 1023)), Some(true));
        assert_eq!(rects_meet(&col(5, 0), &col(5, 1024)), Some(false));
    }
}
