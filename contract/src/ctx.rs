//! The records shared with compiled leaf code. Their layouts are part of the ABI between
//! `transform` (which emits code reading them) and this crate: change both or neither.

/// One instance of a node, as the HPVM query intrinsics see it: `getNodeInstanceID_*` reads
/// `id`, `getNumNodeInstances_*` reads `dim`, `getParentNode` follows `parent`. Unused
/// dimensions have `id` 0 and `dim` 1.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NodeCtx {
    pub id: [i64; 3],
    pub dim: [i64; 3],
    pub parent: *const NodeCtx,
}

/// The part of a leaf's grid one call of its entry point runs: instances `lo..hi` (half
/// open) per dimension, of a grid of `dim` instances.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridBox {
    pub lo: [i64; 3],
    pub hi: [i64; 3],
    pub dim: [i64; 3],
}

/// A compiled leaf node: runs the instances of `bx` with the argument buffer `args`, the
/// parent instance `parent`, and writes instance `i`'s outputs (linear index, x fastest) at
/// `outs + i * record size` (`outs` may be null when the node has no outputs).
pub type EntryFn = unsafe extern "C" fn(args: *const u8, parent: *const NodeCtx, bx: *const GridBox, outs: *mut u8);

impl GridBox {
    pub fn whole(dim: [i64; 3]) -> GridBox {
        GridBox { lo: [0; 3], hi: dim, dim }
    }

    /// The box holding only the instance with linear index `lin`.
    pub fn single(dim: [i64; 3], lin: i64) -> GridBox {
        let id = unlinearize(lin, dim);
        GridBox { lo: id, hi: [id[0] + 1, id[1] + 1, id[2] + 1], dim }
    }

    pub fn len(&self) -> i64 {
        (0..3).map(|d| (self.hi[d] - self.lo[d]).max(0)).product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Splits the grid into at most about `pieces` boxes (see [`GridBox::split_box`]).
    pub fn split(dim: [i64; 3], pieces: usize) -> Vec<GridBox> {
        GridBox::whole(dim).split_box(pieces)
    }

    /// Splits the box into at most about `pieces` boxes along its outermost dimension with
    /// more than one instance (then the next), keeping boxes contiguous in memory order.
    pub fn split_box(&self, pieces: usize) -> Vec<GridBox> {
        let whole = *self;
        if whole.is_empty() {
            return vec![];
        }
        let pieces = pieces.max(1) as i64;
        let ext = |d: usize| whole.hi[d] - whole.lo[d];
        let Some(d) = (0..3).rev().find(|&d| ext(d) > 1) else { return vec![whole] };
        // Outer dimension too short to feed everyone: split the one inside it as well.
        if ext(d) < pieces && d > 0 && ext(d - 1) > 1 {
            let per_row = (pieces + ext(d) - 1) / ext(d);
            let mut out = Vec::new();
            for row in whole.lo[d]..whole.hi[d] {
                let mut outer = whole;
                outer.lo[d] = row;
                outer.hi[d] = row + 1;
                out.extend(split_range(outer, d - 1, per_row));
            }
            return out;
        }
        split_range(whole, d, pieces)
    }

    /// The linear indices (x fastest, in the whole grid) of the box's instances.
    pub fn linear_indices(&self) -> impl Iterator<Item = i64> + '_ {
        let b = *self;
        (b.lo[2]..b.hi[2]).flat_map(move |z| {
            (b.lo[1]..b.hi[1]).flat_map(move |y| (b.lo[0]..b.hi[0]).map(move |x| (z * b.dim[1] + y) * b.dim[0] + x))
        })
    }
}

fn split_range(b: GridBox, d: usize, pieces: i64) -> Vec<GridBox> {
    let n = b.hi[d] - b.lo[d];
    let pieces = pieces.min(n).max(1);
    (0..pieces)
        .map(|k| {
            let mut piece = b;
            piece.lo[d] = b.lo[d] + n * k / pieces;
            piece.hi[d] = b.lo[d] + n * (k + 1) / pieces;
            piece
        })
        .collect()
}

pub fn unlinearize(lin: i64, dim: [i64; 3]) -> [i64; 3] {
    [lin % dim[0], (lin / dim[0]) % dim[1], lin / (dim[0] * dim[1])]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every instance of the grid is in exactly one box.
    fn covers_exactly(dim: [i64; 3], boxes: &[GridBox]) {
        let total: i64 = dim.iter().product();
        let mut seen = vec![0u8; total as usize];
        for b in boxes {
            for z in b.lo[2]..b.hi[2] {
                for y in b.lo[1]..b.hi[1] {
                    for x in b.lo[0]..b.hi[0] {
                        seen[((z * dim[1] + y) * dim[0] + x) as usize] += 1;
                    }
                }
            }
        }
        assert!(seen.iter().all(|&s| s == 1), "{dim:?} split into {boxes:?}");
    }

    #[test]
    fn splits_cover_every_instance_once() {
        // Deterministic sweep of shapes and piece counts, small enough to enumerate.
        for x in [1, 2, 3, 7, 16] {
            for y in [1, 2, 5, 16] {
                for z in [1, 3] {
                    for pieces in [1, 2, 3, 8, 64] {
                        let dim = [x, y, z];
                        let boxes = GridBox::split(dim, pieces);
                        covers_exactly(dim, &boxes);
                        assert!(boxes.iter().all(|b| !b.is_empty()));
                    }
                }
            }
        }
        assert!(GridBox::split([0, 4, 1], 4).is_empty());
    }

    #[test]
    fn sub_boxes_split_within_themselves() {
        let dim = [7, 5, 3];
        let part = GridBox { lo: [1, 2, 0], hi: [6, 4, 3], dim };
        for pieces in [1, 2, 3, 8, 64] {
            let boxes = part.split_box(pieces);
            let mut lins: Vec<i64> = boxes.iter().flat_map(|b| b.linear_indices().collect::<Vec<_>>()).collect();
            lins.sort();
            let mut expected: Vec<i64> = part.linear_indices().collect();
            expected.sort();
            assert_eq!(lins, expected);
            assert_eq!(expected.len() as i64, part.len());
        }
    }

    #[test]
    fn single_instance_boxes() {
        let dim = [4, 3, 2];
        for lin in 0..24 {
            let b = GridBox::single(dim, lin);
            assert_eq!(b.len(), 1);
            assert_eq!((b.lo[2] * 3 + b.lo[1]) * 4 + b.lo[0], lin);
        }
    }
}
