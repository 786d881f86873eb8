//! `partition`: pure grid partitioning.
//!
//! A launch's grid, counted in blocks (the unit a device runs; a block is never split), is cut
//! into boxes, one per partition, along the node's split dimensions. Partitions are handed to
//! devices by the caller (partition `k` to device `k % devices` when there are more partitions
//! than devices).
//!
//! Invariants (property-tested in `tests`):
//! - the boxes are disjoint and cover the grid exactly; a box may be empty (a grid with fewer
//!   blocks than partitions), never inverted (`lo <= hi` in every dimension);
//! - dimensions that are not split are whole in every box;
//! - with equal weights, a 1-D split gives extents that differ by at most one block, and in a
//!   multi-dimensional split the extents along each split dimension differ by at most one block
//!   among the boxes of one slab;
//! - with weights, the number of blocks of each partition along a 1-D split is within one block
//!   of its weighted share.
//!
//! Multi-dimensional splits factor the number of partitions (the Mekong thesis's figure 7):
//! `n = a × b` with `a` slabs along the first split dimension and `b` boxes in each slab along
//! the second, choosing the factorization that cuts the least (the sum of the lengths of the
//! cuts, which is what halo exchanges move).

/// A half-open box of blocks: `lo[d]..hi[d]` in each of the three dimensions (x, y, z).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Part {
    pub lo: [u64; 3],
    pub hi: [u64; 3],
}

impl Part {
    /// The whole grid.
    pub fn whole(blocks: [u64; 3]) -> Part {
        Part { lo: [0; 3], hi: blocks }
    }

    /// Number of blocks in the box.
    pub fn len(&self) -> u64 {
        (0..3).map(|d| self.hi[d] - self.lo[d]).product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The box's extent in dimension `d`.
    pub fn extent(&self, d: usize) -> u64 {
        self.hi[d] - self.lo[d]
    }
}

/// What went wrong with a request; only the caller's mistakes, never the grid's shape.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("split dimensions {0:?} must be distinct and among 0, 1, 2")]
    BadSplit(Vec<usize>),
    #[error("partition weights must be finite, non-negative and not all zero: {0}")]
    BadWeights(String),
    #[error("a grid must be cut into at least one partition")]
    NoPartitions,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Cuts a grid of `blocks` into `parts` boxes of even size along `split` (outermost cut
/// first; empty `split` gives one whole box followed by empty ones).
pub fn even(blocks: [u64; 3], split: &[usize], parts: usize) -> Result<Vec<Part>> {
    weighted(blocks, split, &vec![1.0; parts])
}

/// Cuts a grid of `blocks` into one box per weight, partition `k` getting a share of the
/// blocks proportional to `weights[k]` (a zero weight gets an empty box).
pub fn weighted(blocks: [u64; 3], split: &[usize], weights: &[f64]) -> Result<Vec<Part>> {
    if weights.is_empty() {
        return Err(Error::NoPartitions);
    }
    let mut seen = [false; 3];
    for &d in split {
        if d >= 3 || seen[d] {
            return Err(Error::BadSplit(split.to_vec()));
        }
        seen[d] = true;
    }
    if weights.iter().any(|w| !w.is_finite() || *w < 0.0) || weights.iter().sum::<f64>() <= 0.0 {
        return Err(Error::BadWeights(format!("{weights:?}")));
    }
    let whole = Part::whole(blocks);
    if split.is_empty() {
        // Nothing to cut along: the first partition with a weight takes everything.
        let first = weights.iter().position(|&w| w > 0.0).expect("a positive weight exists");
        return Ok((0..weights.len()).map(|k| if k == first { whole } else { empty_at(whole) }).collect());
    }
    let mut out = Vec::with_capacity(weights.len());
    cut(whole, split, weights, &mut out);
    Ok(out)
}

/// An empty box at the origin corner of `b`.
fn empty_at(b: Part) -> Part {
    Part { lo: b.lo, hi: b.lo }
}

/// Cuts `b` among `weights` along `dims` (recursively: slabs along `dims[0]`, then each slab
/// along the rest), appending in partition order.
fn cut(b: Part, dims: &[usize], weights: &[f64], out: &mut Vec<Part>) {
    let n = weights.len();
    let d = dims[0];
    if dims.len() == 1 || n == 1 {
        out.extend(cut_1d(b, d, weights));
        return;
    }
    let slabs = slab_count(b, dims, n);
    let per = n / slabs;
    let groups: Vec<f64> = weights.chunks(per).map(|g| g.iter().sum()).collect();
    for (slab, group) in cut_1d(b, d, &groups).into_iter().zip(weights.chunks(per)) {
        if group.iter().sum::<f64>() > 0.0 {
            cut(slab, &dims[1..], group, out);
        } else {
            out.extend(group.iter().map(|_| empty_at(slab)));
        }
    }
}

/// Along one dimension: boundaries at the rounded cumulative weighted shares.
fn cut_1d(b: Part, d: usize, weights: &[f64]) -> Vec<Part> {
    let total = weights.iter().sum::<f64>();
    let len = b.extent(d);
    let mut acc = 0.0;
    let mut lo = b.lo[d];
    let mut out = Vec::with_capacity(weights.len());
    for (k, w) in weights.iter().enumerate() {
        acc += w;
        let hi = if k + 1 == weights.len() {
            b.hi[d]
        } else if total > 0.0 {
            // Rounded, so equal weights give extents differing by at most one block.
            b.lo[d] + ((len as f64) * acc / total).round().min(len as f64) as u64
        } else {
            lo
        };
        let hi = hi.max(lo);
        let mut p = b;
        p.lo[d] = lo;
        p.hi[d] = hi;
        out.push(p);
        lo = hi;
    }
    out
}

/// The number of slabs along `dims[0]` for `n` partitions: the divisor of `n` whose
/// factorization cuts the least (ties: more slabs along the outer dimension).
fn slab_count(b: Part, dims: &[usize], n: usize) -> usize {
    let e0 = b.extent(dims[0]) as f64;
    // The rest is cut among `n / a`; its cut length is approximated by the next dimension.
    let e1 = b.extent(dims[1]) as f64;
    let mut best = (f64::INFINITY, n);
    for a in (1..=n).rev().filter(|a| n.is_multiple_of(*a)) {
        let rest = (n / a) as f64;
        // (a - 1) cuts across the whole of dims[1], (rest - 1) cuts per slab across e0 / a.
        let cost = (a as f64 - 1.0) * e1 + (rest - 1.0) * e0;
        // A factor larger than the extent leaves partitions empty: penalize it.
        let empty = (a as f64 > e0.max(1.0)) as u8 as f64 + (rest > e1.max(1.0)) as u8 as f64;
        let cost = cost + empty * (e0 + e1 + 1.0) * n as f64;
        if cost < best.0 {
            best = (cost, a);
        }
    }
    best.1
}

#[cfg(test)]
mod tests;
