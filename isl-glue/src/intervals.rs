//! From element sets to what copies move: rectangles (rows x columns of the array seen as
//! rows of its innermost extent) and runs of linear offsets.

use crate::{bounds, fix, is_box, pieces, ElementSet, Error, Result};

/// Elements `start..end` (linear offsets, half open).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Run {
    pub start: i64,
    pub end: i64,
}

/// `rows` rows from `first_row`, columns `first_col..first_col + cols`, of rows `row_len` long.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rect {
    pub first_row: i64,
    pub rows: i64,
    pub first_col: i64,
    pub cols: i64,
    pub row_len: i64,
}

impl Rect {
    pub fn elements(&self) -> i64 {
        self.rows * self.cols
    }
}

pub(crate) fn rectangles(set: &ElementSet<'_>, shape: &[i64]) -> Result<Vec<Rect>> {
    let n = set.dims()?;
    if shape.len() != n || n == 0 {
        return Err(Error::Shape(format!("a shape of {} extents for a set of {n} dimensions", shape.len())));
    }
    let row_len = shape[n - 1];
    let mut out = Vec::new();
    if set.is_empty()? {
        return Ok(out);
    }
    for piece in pieces(set)? {
        if piece.is_empty()? {
            continue;
        }
        rect_piece(&piece, shape, 0, 0, row_len, &mut out)?;
    }
    out.sort();
    Ok(merge_rows(out))
}

/// Rectangles of a convex piece whose dimensions before `d` are fixed; `outer` is the linear
/// index of those fixed dimensions.
fn rect_piece(
    piece: &ElementSet<'_>,
    shape: &[i64],
    d: usize,
    outer: i64,
    row_len: i64,
    out: &mut Vec<Rect>,
) -> Result<()> {
    let n = shape.len();
    if n == 1 {
        for (lo, hi) in row_intervals(piece, 0)? {
            out.push(Rect { first_row: 0, rows: 1, first_col: lo, cols: hi - lo + 1, row_len });
        }
        return Ok(());
    }
    if d == n - 2 {
        // The last two dimensions: one rectangle if the piece is a box in them, else row by row.
        let b: Vec<(i64, i64)> = (0..n).map(|k| bounds(piece, k)).collect::<Result<_>>()?;
        let (r0, r1) = b[n - 2];
        if is_box(piece, &b)? {
            let (c0, c1) = b[n - 1];
            out.push(Rect {
                first_row: outer * shape[n - 2] + r0,
                rows: r1 - r0 + 1,
                first_col: c0,
                cols: c1 - c0 + 1,
                row_len,
            });
            return Ok(());
        }
        for r in r0..=r1 {
            let row = piece.wrap(fix(piece, n - 2, r)?);
            for (lo, hi) in row_intervals(&row, n - 1)? {
                out.push(Rect {
                    first_row: outer * shape[n - 2] + r,
                    rows: 1,
                    first_col: lo,
                    cols: hi - lo + 1,
                    row_len,
                });
            }
        }
        return Ok(());
    }
    let (lo, hi) = bounds(piece, d)?;
    for v in lo..=hi {
        let sub = piece.wrap(fix(piece, d, v)?);
        if !sub.is_empty()? {
            rect_piece(&sub, shape, d + 1, outer * shape[d] + v, row_len, out)?;
        }
    }
    Ok(())
}

/// Inclusive intervals of dimension `d` in a set whose other dimensions are fixed.
fn row_intervals(row: &ElementSet<'_>, d: usize) -> Result<Vec<(i64, i64)>> {
    let mut out = Vec::new();
    if row.is_empty()? {
        return Ok(out);
    }
    for piece in pieces(row)? {
        if piece.is_empty()? {
            continue;
        }
        let (lo, hi) = bounds(&piece, d)?;
        // A convex piece without strides is the whole interval; with strides (`i mod 2 = 0`)
        // it is checked element by element.
        let b: Vec<(i64, i64)> = (0..piece.dims()?).map(|k| bounds(&piece, k)).collect::<Result<_>>()?;
        if is_box(&piece, &b)? {
            out.push((lo, hi));
        } else {
            let mut point: Vec<i64> = b.iter().map(|x| x.0).collect();
            for v in lo..=hi {
                point[d] = v;
                if piece.contains(&point)? {
                    out.push((v, v));
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Merges rectangles of the same columns on consecutive rows (sorted input).
fn merge_rows(rects: Vec<Rect>) -> Vec<Rect> {
    let mut out: Vec<Rect> = Vec::new();
    let mut rects = rects;
    rects.sort_by_key(|r| (r.first_col, r.cols, r.first_row));
    for r in rects {
        match out.last_mut() {
            Some(l) if l.first_col == r.first_col && l.cols == r.cols && l.first_row + l.rows == r.first_row => {
                l.rows += r.rows
            }
            _ => out.push(r),
        }
    }
    out.sort();
    out
}

/// Maximal runs of linear offsets covering the rectangles.
pub(crate) fn runs_of(rects: &[Rect]) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for r in rects {
        if r.first_col == 0 && r.cols == r.row_len {
            runs.push(Run { start: r.first_row * r.row_len, end: (r.first_row + r.rows) * r.row_len });
        } else {
            for row in r.first_row..r.first_row + r.rows {
                let start = row * r.row_len + r.first_col;
                runs.push(Run { start, end: start + r.cols });
            }
        }
    }
    runs.sort();
    let mut merged: Vec<Run> = Vec::new();
    for r in runs {
        match merged.last_mut() {
            Some(l) if r.start <= l.end => l.end = l.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}
