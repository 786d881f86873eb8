//! The split dimensions, best first (the Mekong thesis's rule for the order): a partitionable
//! node's instances write disjoint elements, so any dimension may be cut; the best is the one
//! whose step moves the accesses furthest in memory, so that each device's part of every
//! buffer is as few contiguous pieces as possible. For row-major `out[y][x]` written by
//! `I[x, y]`, a step in `y` moves a whole row and a step in `x` one element: `y` comes first,
//! and each device owns a band of whole rows.
//!
//! Which one a launch is cut along is chosen at the launch, from its grid: a 1-D grid of a
//! kernel analysed in three dimensions has one block along `y` and `z`, and cutting those
//! would leave every block on one device.

use dashdb::Node;
use isl_glue::Isl;

/// How far out (in array dimensions from the innermost) a step in dimension `d` moves
/// `map`'s accesses: 0 when it moves none.
fn reach(isl: &Isl, map: &str, dimensionality: u32, d: usize) -> u32 {
    match isl.map(map).and_then(|m| m.outermost_moved(d)) {
        Ok(Some(k)) => dimensionality - k as u32,
        _ => 0,
    }
}

/// Every dimension of a partitionable node, best to split first: the one whose step reaches
/// furthest in the written arrays, then in the read ones; on a tie the outermost (highest).
pub fn order(isl: &Isl, node: &Node) -> Vec<u32> {
    let score = |d: usize| {
        let mut w = 0;
        let mut r = 0;
        for a in &node.args {
            if let Some(m) = &a.write_map {
                w = w.max(reach(isl, m, a.dimensionality, d));
            }
            if let Some(m) = &a.read_map {
                r = r.max(reach(isl, m, a.dimensionality, d));
            }
        }
        (w, r, d)
    };
    let mut scored: Vec<(u32, u32, usize)> = (0..node.dims as usize).map(score).collect();
    scored.sort_by(|a, b| b.cmp(a));
    scored.into_iter().map(|(_, _, d)| d as u32).collect()
}
