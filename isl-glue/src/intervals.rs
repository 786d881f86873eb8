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

/// Steps (rows visited, elements tested) one [`rectangles`] call may take before it gives up
/// with [`Error::TooComplex`]: a set of isolated elements or many strided pieces over a large
/// array would otherwise take minutes, and the caller has a safe answer (copy more).
pub const STEP_BUDGET: u64 = 1 << 17;

/// Counts the steps of one computation against [`STEP_BUDGET`].
struct Budget(std::cell::Cell<u64>);

impl Budget {
    fn step(&self, n: u64) -> Result<()> {
        let left = self.0.get();
        if left < n {
            return Err(Error::TooComplex);
        }
        self.0.set(left - n);
        Ok(())
    }
}

pub(crate) fn rectangles(set: &ElementSet<'_>, shape: &[i64]) -> Result<Vec<Rect>> {
    let budget = Budget(std::cell::Cell::new(STEP_BUDGET));
    let n = set.dims()?;
    if shape.len() != n || n == 0 {
        return Err(Error::Shape(format!("a shape of {} extents for a set of {n} dimensions", shape.len())));
    }
    let row_len = shape[n - 1];
    let mut out = Vec::new();
    if set.is_empty()? {
        return Ok(out);
    }
    if let Some(rows) = native_rows(set, shape)? {
        return Ok(merge_rows(rows));
    }
    for piece in pieces(set)? {
        if piece.is_empty()? {
            continue;
        }
        rect_piece(&piece, shape, 0, 0, row_len, &mut out, &budget)?;
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
    budget: &Budget,
) -> Result<()> {
    let n = shape.len();
    if n == 1 {
        for (lo, hi) in row_intervals(piece, 0, budget)? {
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
        // Every row costs a step: charged at once, so a piece of more rows than the budget
        // holds fails before its first (each step is an ISL computation: a million rows of a
        // strided view took 30 s to exhaust the budget one by one).
        budget.step((r1 - r0 + 1).max(0) as u64)?;
        for r in r0..=r1 {
            let row = piece.wrap(fix(piece, n - 2, r)?);
            for (lo, hi) in row_intervals(&row, n - 1, budget)? {
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
    budget.step((hi - lo + 1).max(0) as u64)?;
    for v in lo..=hi {
        let sub = piece.wrap(fix(piece, d, v)?);
        if !sub.is_empty()? {
            rect_piece(&sub, shape, d + 1, outer * shape[d] + v, row_len, out, budget)?;
        }
    }
    Ok(())
}

/// Inclusive intervals of dimension `d` in a set whose other dimensions are fixed.
fn row_intervals(row: &ElementSet<'_>, d: usize, budget: &Budget) -> Result<Vec<(i64, i64)>> {
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
            budget.step((hi - lo + 1) as u64)?;
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

/// The rectangles of the box `bounds` (inclusive, one pair per dimension) of an array of
/// `shape`, as [`rectangles`] gives them for a set that is this box. [`Error::TooComplex`]
/// where it would take more rectangles than [`STEP_BUDGET`].
pub fn box_rects(bounds: &[(i64, i64)], shape: &[i64]) -> Result<Vec<Rect>> {
    let n = shape.len();
    if bounds.len() != n || n == 0 {
        return Err(Error::Shape(format!("a shape of {n} extents for a box of {} dimensions", bounds.len())));
    }
    if bounds.iter().any(|&(lo, hi)| lo > hi) {
        return Ok(Vec::new());
    }
    let row_len = shape[n - 1];
    let (c0, c1) = bounds[n - 1];
    if n == 1 {
        return Ok(vec![Rect { first_row: 0, rows: 1, first_col: c0, cols: c1 - c0 + 1, row_len }]);
    }
    // One rectangle per value of the dimensions before the last two.
    let outer = &bounds[..n - 2];
    let count = outer.iter().try_fold(1u64, |acc, &(lo, hi)| acc.checked_mul((hi - lo + 1) as u64));
    if count.is_none_or(|c| c > STEP_BUDGET) {
        return Err(Error::TooComplex);
    }
    let (r0, r1) = bounds[n - 2];
    let mut out = Vec::new();
    let mut at: Vec<i64> = outer.iter().map(|&(lo, _)| lo).collect();
    loop {
        let linear = at.iter().zip(shape).fold(0, |acc, (&v, &extent)| acc * extent + v);
        out.push(Rect {
            first_row: linear * shape[n - 2] + r0,
            rows: r1 - r0 + 1,
            first_col: c0,
            cols: c1 - c0 + 1,
            row_len,
        });
        // The next value of the outer dimensions, innermost fastest.
        let Some(d) = (0..at.len()).rev().find(|&d| at[d] < outer[d].1) else { break };
        at[d] += 1;
        for (x, &(lo, _)) in at.iter_mut().zip(outer).skip(d + 1) {
            *x = lo;
        }
    }
    Ok(merge_rows(out))
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

/// One constraint of a convex piece: `coef · x + constant >= 0` (`= 0` for an equality).
struct Linear {
    coef: Vec<i64>,
    constant: i64,
    equality: bool,
}

/// The set row by row, by integer arithmetic on the constraints of its convex pieces, when
/// every piece is plain (no existential variables, parameters fixed): one rectangle of one
/// row per row of each piece. `None` when some piece is not plain (then ISL answers per row).
///
/// Exact: for fixed outer coordinates, a convex piece without existentials is exactly the
/// innermost interval its constraints bound, and a row is empty exactly when that interval is
/// empty or a constraint without the innermost dimension fails.
fn native_rows(set: &ElementSet<'_>, shape: &[i64]) -> Result<Option<Vec<Rect>>> {
    use isl_rs::DimType;
    let n = shape.len();
    let params = set.set.dim(DimType::Param)? as u32;
    // Parameters fixed by equalities are eliminated exactly; any left free make it unbounded.
    // Pieces may overlap (no `make_disjoint`, which is costly): rows are merged below.
    let plain = set.set.copy()?.project_out(DimType::Param, 0, params)?;
    let list = plain.get_basic_set_list()?;
    // Each plain piece: its constraints and its bounding box.
    type Piece = (Vec<Linear>, Vec<(i64, i64)>);
    let mut pieces: Vec<Piece> = Vec::new();
    for i in 0..list.size()? {
        let piece = list.get_at(i)?;
        if piece.dim(DimType::Div)? > 0 {
            return Ok(None);
        }
        let as_set = ElementSet { isl: set.isl, set: piece.copy()?.to_set()? };
        if as_set.is_empty()? {
            continue;
        }
        let b: Vec<(i64, i64)> = (0..n).map(|d| bounds(&as_set, d)).collect::<Result<_>>()?;
        let constraints = piece.get_constraint_list()?;
        let mut lin = Vec::new();
        for c in 0..constraints.size()? {
            let c = constraints.get_at(c)?;
            let coef = (0..n)
                .map(|d| c.get_coefficient_val(DimType::Set, d as i32).and_then(|v| v.get_num_si()))
                .collect::<std::result::Result<Vec<i64>, _>>()?;
            lin.push(Linear { coef, constant: c.get_constant_val()?.get_num_si()?, equality: c.is_equality()? });
        }
        pieces.push((lin, b));
    }
    let mut out = Vec::new();
    let row_len = shape[n - 1];
    for (lin, b) in &pieces {
        // Every outer coordinate of the piece's bounding box, innermost interval each.
        let outer = &b[..n - 1];
        let count: i64 = outer.iter().map(|(lo, hi)| hi - lo + 1).product();
        if count > 1 << 26 {
            return Ok(None);
        }
        let mut x: Vec<i64> = outer.iter().map(|r| r.0).collect();
        x.push(0);
        for _ in 0..count {
            if let Some((lo, hi)) = inner_interval(lin, &x, b[n - 1]) {
                let row = (0..n - 1).fold(0i64, |acc, d| acc * if d == 0 { 1 } else { shape[d] } + x[d]);
                let row = if n == 1 { 0 } else { row };
                out.push(Rect { first_row: row, rows: 1, first_col: lo, cols: hi - lo + 1, row_len });
            }
            // Next outer coordinate (innermost outer dimension fastest).
            for d in (0..n - 1).rev() {
                x[d] += 1;
                if x[d] <= outer[d].1 {
                    break;
                }
                x[d] = outer[d].0;
            }
        }
    }
    // Pieces may overlap: merge the intervals of each row, so rectangles are disjoint.
    out.sort();
    let mut rows: Vec<Rect> = Vec::with_capacity(out.len());
    for r in out {
        match rows.last_mut() {
            Some(l) if l.first_row == r.first_row && r.first_col <= l.first_col + l.cols => {
                l.cols = l.cols.max(r.first_col + r.cols - l.first_col)
            }
            _ => rows.push(r),
        }
    }
    Ok(Some(rows))
}

/// The innermost interval of a plain piece at outer coordinates `x` (its last entry is
/// ignored), within `bound`; `None` when empty.
fn inner_interval(lin: &[Linear], x: &[i64], bound: (i64, i64)) -> Option<(i64, i64)> {
    let n = x.len();
    let (mut lo, mut hi) = bound;
    for c in lin {
        let rest: i64 = c.constant + (0..n - 1).map(|d| c.coef[d] * x[d]).sum::<i64>();
        let a = c.coef[n - 1];
        if a == 0 {
            if rest < 0 || (c.equality && rest != 0) {
                return None;
            }
            continue;
        }
        // a·v + rest >= 0 (or = 0).
        if c.equality {
            if rest % a != 0 {
                return None;
            }
            let v = -rest / a;
            lo = lo.max(v);
            hi = hi.min(v);
        } else if a > 0 {
            lo = lo.max(div_ceil(-rest, a));
        } else {
            hi = hi.min(div_floor(rest, -a));
        }
    }
    (lo <= hi).then_some((lo, hi))
}

fn div_floor(a: i64, b: i64) -> i64 {
    let q = a / b;
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

fn div_ceil(a: i64, b: i64) -> i64 {
    -div_floor(-a, b)
}
