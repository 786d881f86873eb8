//! The split dimension (the Mekong thesis's rule): cut the grid along the dimension whose
//! step moves the accesses furthest in memory, so that each device's part of every buffer is
//! as few contiguous pieces as possible. For row-major `out[y][x]` written by `I[x, y]`, a
//! step in `y` moves a whole row and a step in `x` one element: split `y`, and each device
//! owns a band of whole rows.

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

/// The dimension of a partitionable node to split: the one whose step reaches furthest in the
/// written arrays, then in the read ones; on a tie the outermost (highest) dimension.
pub fn choose(isl: &Isl, node: &Node) -> u32 {
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
    (0..node.dims as usize).map(score).max().map_or(0, |(_, _, d)| d as u32)
}
