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

use super::access::{first_overlap, Part, PartRun};
use crate::memory::ByteRect;

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
        let mut runs: Vec<PartRun> = Vec::new();
        let mut any = false;
        for (k, p) in parts.iter().enumerate() {
            for (_, r) in p.3.iter().filter(|(x, _)| *x == b) {
                if small_holes(r) {
                    any = true;
                    runs.push((r.start, r.end(), k));
                } else {
                    runs.extend(r.row_runs().map(|(lo, hi)| (lo, hi, k)));
                }
            }
        }
        if any && first_overlap(runs).is_none() {
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
}
