//! Property tests: every invariant of the crate docs, over an exhaustive sweep of small grids
//! and a seeded random sample of larger ones (deterministic, so a failure reproduces).

use super::*;

/// A small deterministic generator (64-bit LCG), so the sample is the same on every run.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

/// Disjoint and covering, by counting each block (grids small enough to enumerate), and
/// unsplit dimensions whole.
fn check_cover(blocks: [u64; 3], split: &[usize], parts: &[Part]) {
    let total: u64 = blocks.iter().product();
    let mut seen = vec![0u8; total as usize];
    for p in parts {
        for d in 0..3 {
            assert!(p.lo[d] <= p.hi[d] && p.hi[d] <= blocks[d], "{p:?} in {blocks:?}");
            if !split.contains(&d) && !p.is_empty() {
                assert_eq!((p.lo[d], p.hi[d]), (0, blocks[d]), "unsplit dimension {d} cut: {p:?}");
            }
        }
        for z in p.lo[2]..p.hi[2] {
            for y in p.lo[1]..p.hi[1] {
                for x in p.lo[0]..p.hi[0] {
                    seen[((z * blocks[1] + y) * blocks[0] + x) as usize] += 1;
                }
            }
        }
    }
    assert!(seen.iter().all(|&s| s == 1), "{blocks:?} split {split:?} into {parts:?}");
}

/// Equal weights: along every split dimension, boxes of one slab differ by at most one block.
fn check_balance(split: &[usize], parts: &[Part]) {
    if let [d] = split {
        let ext: Vec<u64> = parts.iter().map(|p| p.extent(*d)).collect();
        let (min, max) = (ext.iter().min().unwrap(), ext.iter().max().unwrap());
        assert!(max - min <= 1, "1-D extents {ext:?}");
        return;
    }
    for &d in split {
        // Boxes sharing their position in the other split dimensions form a slab along d.
        let mut groups: std::collections::BTreeMap<Vec<(u64, u64)>, Vec<u64>> = Default::default();
        for p in parts {
            let key: Vec<(u64, u64)> = split.iter().filter(|&&e| e < d).map(|&e| (p.lo[e], p.hi[e])).collect();
            groups.entry(key).or_default().push(p.extent(d));
        }
        for ext in groups.values() {
            let (min, max) = (ext.iter().min().unwrap(), ext.iter().max().unwrap());
            assert!(max - min <= 1, "extents along {d}: {ext:?} of {parts:?}");
        }
    }
}

const SPLITS: [&[usize]; 7] = [&[0], &[1], &[2], &[1, 0], &[0, 1], &[2, 1], &[2, 1, 0]];

#[test]
fn small_grids_exhaustively() {
    for x in 0..6 {
        for y in 0..5 {
            for z in [0, 1, 3] {
                for split in SPLITS {
                    for n in 1..=9 {
                        let blocks = [x, y, z];
                        let parts = even(blocks, split, n).unwrap();
                        assert_eq!(parts.len(), n);
                        check_cover(blocks, split, &parts);
                        check_balance(split, &parts);
                    }
                }
            }
        }
    }
}

#[test]
fn random_grids() {
    let mut rng = Lcg(42);
    for _ in 0..2000 {
        let blocks = [1 + rng.below(40), 1 + rng.below(40), 1 + rng.below(4)];
        let split = SPLITS[rng.below(SPLITS.len() as u64) as usize];
        let n = 1 + rng.below(17) as usize;
        let parts = even(blocks, split, n).unwrap();
        check_cover(blocks, split, &parts);
        check_balance(split, &parts);
        let weights: Vec<f64> = (0..n).map(|_| rng.below(5) as f64).collect();
        if weights.iter().sum::<f64>() > 0.0 {
            let parts = weighted(blocks, split, &weights).unwrap();
            check_cover(blocks, split, &parts);
            for (p, w) in parts.iter().zip(&weights) {
                if *w == 0.0 {
                    assert!(p.is_empty(), "zero weight got {p:?}");
                }
            }
        }
    }
}

#[test]
fn weighted_1d_shares_within_one_block() {
    let mut rng = Lcg(7);
    for _ in 0..1000 {
        let len = 1 + rng.below(500);
        let n = 1 + rng.below(8) as usize;
        let weights: Vec<f64> = (0..n).map(|_| 1.0 + rng.below(9) as f64).collect();
        let total: f64 = weights.iter().sum();
        let parts = weighted([len, 1, 1], &[0], &weights).unwrap();
        for (p, w) in parts.iter().zip(&weights) {
            let share = len as f64 * w / total;
            assert!((p.extent(0) as f64 - share).abs() <= 1.0, "{len} by {weights:?}: {parts:?}");
        }
    }
}

#[test]
fn grids_smaller_than_the_partition_count_leave_empty_boxes() {
    let parts = even([3, 1, 1], &[0], 8).unwrap();
    assert_eq!(parts.iter().filter(|p| !p.is_empty()).count(), 3);
    assert_eq!(parts.iter().map(Part::len).sum::<u64>(), 3);
}

#[test]
fn two_dimensional_factorization_follows_the_figure() {
    // 4 partitions of a square: 2 x 2 cuts less than 4 x 1.
    let parts = even([64, 64, 1], &[1, 0], 4).unwrap();
    assert!(parts.iter().all(|p| p.extent(0) == 32 && p.extent(1) == 32), "{parts:?}");
    // A tall grid is cut along its long dimension only.
    let parts = even([4, 1024, 1], &[1, 0], 4).unwrap();
    assert!(parts.iter().all(|p| p.extent(0) == 4 && p.extent(1) == 256), "{parts:?}");
}

#[test]
fn rejects_bad_requests() {
    assert_eq!(even([4, 4, 1], &[0, 0], 2), Err(Error::BadSplit(vec![0, 0])));
    assert_eq!(even([4, 4, 1], &[3], 2), Err(Error::BadSplit(vec![3])));
    assert_eq!(even([4, 4, 1], &[0], 0), Err(Error::NoPartitions));
    assert!(matches!(weighted([4, 1, 1], &[0], &[0.0, 0.0]), Err(Error::BadWeights(_))));
    assert!(matches!(weighted([4, 1, 1], &[0], &[1.0, f64::NAN]), Err(Error::BadWeights(_))));
}

#[test]
fn no_split_dimension_gives_one_whole_box() {
    let parts = even([5, 3, 1], &[], 3).unwrap();
    assert_eq!(parts[0], Part::whole([5, 3, 1]));
    assert!(parts[1..].iter().all(Part::is_empty));
}
