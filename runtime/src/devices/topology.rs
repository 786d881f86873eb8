//! Which device runs which partition. A split launch cuts its grid into consecutive pieces,
//! and neighbouring pieces exchange the most (a stencil's halos), so neighbours should sit on
//! the fastest links. The order of the devices along the cut is the one that makes the chain
//! of links between consecutive devices cheapest.
//!
//! Link costs come from the driver (`cuDeviceGetP2PAttribute`'s performance rank, 0 the best,
//! and whether peer access works at all); all equal (NVSwitch, one pair) keeps the devices in
//! their own order. `HPVM_MGPU_ORDER=3,1,0,2` sets the order by hand.
//!
//! Invariant: an order is a permutation of `0..n`; partition `k` of a launch runs on device
//! `order[k % n]`.

/// Cost of a link without peer access: copies go through the host at a tenth of the speed.
pub const NO_PEER: u32 = 1000;

/// Orders of up to this many devices are searched exhaustively (9! = 362880 chains).
const EXHAUSTIVE: usize = 9;

/// The device order whose chain of consecutive links costs least; `cost[i][j]` is the cost
/// of copying between devices `i` and `j` (taken both ways: the larger counts). Among equally
/// cheap orders, the first in lexicographic order, so uniform links keep `0, 1, ..., n - 1`.
pub fn chain_order(cost: &[Vec<u32>]) -> Vec<usize> {
    let n = cost.len();
    let link = |a: usize, b: usize| u64::from(cost[a][b].max(cost[b][a]));
    let total = |order: &[usize]| order.windows(2).map(|w| link(w[0], w[1])).sum::<u64>();
    if n <= EXHAUSTIVE {
        let mut order: Vec<usize> = (0..n).collect();
        let (mut best, mut best_cost) = (order.clone(), total(&order));
        while next_permutation(&mut order) {
            let c = total(&order);
            if c < best_cost {
                (best, best_cost) = (order.clone(), c);
            }
        }
        return best;
    }
    // Greedy: from device 0, always the cheapest unvisited neighbour (lowest index on ties).
    let mut order = vec![0];
    let mut left: Vec<usize> = (1..n).collect();
    while !left.is_empty() {
        let at = *order.last().expect("not empty");
        let i = (0..left.len()).min_by_key(|&i| (link(at, left[i]), left[i])).expect("not empty");
        order.push(left.remove(i));
    }
    order
}

/// The next permutation in lexicographic order; false (and `v` sorted) after the last.
fn next_permutation(v: &mut [usize]) -> bool {
    let Some(i) = (1..v.len()).rev().find(|&i| v[i - 1] < v[i]) else {
        v.reverse();
        return false;
    };
    let j = (i..v.len()).rev().find(|&j| v[j] > v[i - 1]).expect("v[i] qualifies");
    v.swap(i - 1, j);
    v[i..].reverse();
    true
}

/// `HPVM_MGPU_ORDER`'s value for `n` devices: a permutation of `0..n`, comma-separated.
pub fn parse_order(text: &str, n: usize) -> Result<Vec<usize>, String> {
    let order: Vec<usize> = text
        .split(',')
        .map(|s| s.trim().parse::<usize>().map_err(|_| format!("`{}` is not a device number", s.trim())))
        .collect::<Result<_, _>>()?;
    let mut seen = vec![false; n];
    for &d in &order {
        if d >= n || std::mem::replace(&mut seen[d], true) {
            break;
        }
    }
    if order.len() != n || seen.iter().any(|s| !s) {
        return Err(format!("expected each device number 0 to {} once (a permutation of the {n} devices)", n - 1));
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uniform(n: usize, c: u32) -> Vec<Vec<u32>> {
        vec![vec![c; n]; n]
    }

    #[test]
    fn uniform_links_keep_the_devices_in_order() {
        for n in [1, 2, 3, 8, 12] {
            assert_eq!(chain_order(&uniform(n, 0)), (0..n).collect::<Vec<_>>());
        }
    }

    /// Two islands of fast links ({0, 2} and {1, 3}), slow between them: each island's
    /// devices next to each other, crossing once.
    #[test]
    fn neighbours_share_the_fast_links() {
        let mut cost = uniform(4, NO_PEER);
        for (a, b) in [(0, 2), (1, 3)] {
            cost[a][b] = 0;
            cost[b][a] = 0;
        }
        assert_eq!(chain_order(&cost), vec![0, 2, 1, 3]);
    }

    /// A ring 0-1-2-...-7-0 of fast links, numbered out of order: the chain follows it.
    #[test]
    fn the_chain_follows_a_ring() {
        let ring = [0, 5, 2, 7, 1, 4, 6, 3];
        let mut cost = uniform(8, 3);
        for w in 0..8 {
            let (a, b) = (ring[w], ring[(w + 1) % 8]);
            cost[a][b] = 1;
            cost[b][a] = 1;
        }
        let order = chain_order(&cost);
        for w in order.windows(2) {
            assert_eq!(cost[w[0]][w[1]], 1, "{order:?} crosses a slow link");
        }
    }

    /// Beyond the exhaustive search, the greedy chain still takes the fast links it can.
    #[test]
    fn many_devices_are_chained_greedily() {
        let n = 12;
        let mut cost = uniform(n, 5);
        for k in 0..n {
            let (a, b) = (k, (k + 7) % n); // 7 is coprime with 12: one cycle through all
            cost[a][b] = 1;
            cost[b][a] = 1;
        }
        let order = chain_order(&cost);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..n).collect::<Vec<_>>());
        assert!(order.windows(2).all(|w| cost[w[0]][w[1]] == 1), "{order:?}");
    }

    #[test]
    fn permutations_are_enumerated_once_each() {
        let mut v = vec![0, 1, 2, 3];
        let mut count = 1;
        while next_permutation(&mut v) {
            count += 1;
        }
        assert_eq!(count, 24);
        assert_eq!(v, vec![0, 1, 2, 3]);
    }

    #[test]
    fn orders_by_hand_must_be_permutations() {
        assert_eq!(parse_order("2, 0,1", 3), Ok(vec![2, 0, 1]));
        for bad in ["0,1", "0,1,1", "0,1,3", "a,1,2", "0,1,2,3"] {
            assert!(parse_order(bad, 3).is_err(), "{bad}");
        }
    }
}
