//! CUDA's warp operations on the CPU: `__shfl_*_sync`, `__ballot_sync`, `__all_sync`,
//! `__any_sync`, `__uni_sync`, `__syncwarp` and the lane id, for the instances of a block that
//! run as fibers ([`crate::fiber`]), exact as PTX defines them.
//!
//! The compiler gives each warp operation a CPU body that calls the runtime's entry point
//! (`abi::hpvm_rt_warp_*`), saving and restoring the instance context around it, and runs the
//! leaves that use them as fibers, as it does leaves that use barriers. Lanes are the block's
//! threads numbered x fastest, 32 to a warp. `__activemask`, `__match_*_sync` and
//! `__reduce_*_sync` have no CPU body yet: a kernel using them stops on the CPU, naming why.

/// `shfl.sync`'s modes, as the compiler numbers them (the order of PTX's `.up`, `.down`,
/// `.bfly`, `.idx`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shuffle {
    Up = 0,
    Down = 1,
    Butterfly = 2,
    Index = 3,
}

impl Shuffle {
    pub fn from_code(code: i32) -> Option<Shuffle> {
        [Shuffle::Up, Shuffle::Down, Shuffle::Butterfly, Shuffle::Index].get(usize::try_from(code).ok()?).copied()
    }
}

/// The lane `lane` reads from in a `shfl.sync` of mode `mode` with operands `b` (delta, lane
/// mask or source lane) and `c` (the clamp in bits 0-4, the segment mask in bits 8-12, as
/// CUDA's headers pack a width), and whether that lane is in range (PTX's predicate); out of
/// range, the lane reads its own value.
pub fn source(mode: Shuffle, lane: u32, b: u32, c: u32) -> (u32, bool) {
    let (b, clamp, segment) = (b & 31, c & 31, (c >> 8) & 31);
    let max_lane = (lane & segment) | (clamp & !segment);
    let min_lane = lane & segment;
    let (j, valid) = match mode {
        Shuffle::Up => {
            let j = lane as i64 - b as i64;
            (j, j >= max_lane as i64)
        }
        Shuffle::Down => {
            let j = (lane + b) as i64;
            (j, j <= max_lane as i64)
        }
        Shuffle::Butterfly => {
            let j = (lane ^ b) as i64;
            (j, j <= max_lane as i64)
        }
        Shuffle::Index => {
            let j = (min_lane | (b & !segment)) as i64;
            (j, j <= max_lane as i64)
        }
    };
    if valid {
        (j as u32, true)
    } else {
        (lane, false)
    }
}

/// The values of the running instance's warp ([`crate::fiber::exchange`]). Instances on
/// threads of their own (targets without fibers) cannot exchange: the program stops.
fn exchange(value: u64, mask: u32) -> (u32, [u64; 32], u32) {
    if !crate::fiber::supported() && crate::scratch::in_thread_group() {
        crate::fatal("warp operations (__shfl_*_sync, __ballot_sync...) run on the CPU only where the runtime has fibers (x86-64, AArch64, RISC-V)");
    }
    crate::fiber::exchange(value, mask)
}

/// `shfl.sync` of the running instance: its lane's `value` in, the source lane's out, and
/// whether the source was in range. A source outside the lanes that took part reads the
/// instance's own value (PTX leaves it undefined).
pub fn shuffle(mode: Shuffle, mask: u32, value: u32, b: u32, c: u32) -> (u32, bool) {
    let (lane, values, members) = exchange(u64::from(value), mask);
    let (j, valid) = source(mode, lane, b, c);
    let v = if members & (1 << j) != 0 { values[j as usize] as u32 } else { value };
    (v, valid)
}

/// `vote.sync`'s modes, as the compiler numbers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vote {
    All = 0,
    Any = 1,
    Uniform = 2,
    Ballot = 3,
}

impl Vote {
    pub fn from_code(code: i32) -> Option<Vote> {
        [Vote::All, Vote::Any, Vote::Uniform, Vote::Ballot].get(usize::try_from(code).ok()?).copied()
    }
}

/// What a vote of the lanes `members` gives, their predicates the bits of `ballot`: 0 or 1,
/// or (`Ballot`) the lanes whose predicate holds.
pub fn tally(mode: Vote, members: u32, ballot: u32) -> u32 {
    let yes = ballot & members;
    match mode {
        Vote::All => u32::from(yes == members),
        Vote::Any => u32::from(yes != 0),
        Vote::Uniform => u32::from(yes == 0 || yes == members),
        Vote::Ballot => yes,
    }
}

/// `vote.sync` of the running instance, its predicate `pred`.
pub fn vote(mode: Vote, mask: u32, pred: bool) -> u32 {
    let (_, values, members) = exchange(u64::from(pred), mask);
    let ballot = (0..32).filter(|&l| members & (1 << l) != 0 && values[l] != 0).fold(0u32, |b, l| b | 1 << l);
    tally(mode, members, ballot)
}

/// `__syncthreads_count`, `_and`, `_or` (`barrier0.popc`, `.and`, `.or`; `mode` 0, 1, 2):
/// a barrier of the block that counts the threads whose `pred` holds.
pub fn block_vote(mode: i32, pred: bool) -> u32 {
    if !crate::fiber::supported() && crate::scratch::in_thread_group() {
        crate::fatal(
            "__syncthreads_count/_and/_or run on the CPU only where the runtime has fibers (x86-64, AArch64, RISC-V)",
        );
    }
    let (yes, arrived) = crate::fiber::count_barrier(pred);
    match mode {
        0 => yes as u32,
        1 => u32::from(yes == arrived),
        _ => u32::from(yes > 0),
    }
}

/// `match.sync` of the running instance (`__match_any_sync`, `__match_all_sync`), its value
/// `value`: the lanes that took part holding the same value; with `all`, those lanes if every
/// one does (and true), else none (and false).
pub fn match_values(all: bool, mask: u32, value: u64) -> (u32, bool) {
    let (_, values, members) = exchange(value, mask);
    let same = (0..32).filter(|&l| members & (1 << l) != 0 && values[l] == value).fold(0u32, |m, l| m | 1 << l);
    match all {
        false => (same, true),
        true if same == members => (members, true),
        true => (0, false),
    }
}

pub use contract::warp::Redux;

/// `op` over the values of the lanes `members`.
fn fold(op: Redux, members: u32, values: &[u64; 32]) -> u32 {
    let lanes = (0..32).filter(|&l| members & (1 << l) != 0).map(|l| values[l] as u32);
    match op {
        Redux::Add => lanes.fold(0u32, u32::wrapping_add),
        Redux::Min => lanes.map(|v| v as i32).min().unwrap_or(i32::MAX) as u32,
        Redux::Max => lanes.map(|v| v as i32).max().unwrap_or(i32::MIN) as u32,
        Redux::UMin => lanes.min().unwrap_or(u32::MAX),
        Redux::UMax => lanes.max().unwrap_or(0),
        Redux::And => lanes.fold(u32::MAX, |a, v| a & v),
        Redux::Or => lanes.fold(0, |a, v| a | v),
        Redux::Xor => lanes.fold(0, |a, v| a ^ v),
    }
}

/// `redux.sync` of the running instance (`__reduce_add_sync`...), its value `value`.
pub fn redux(op: Redux, mask: u32, value: u32) -> u32 {
    let (_, values, members) = exchange(u64::from(value), mask);
    fold(op, members, &values)
}

/// `__syncwarp(mask)`: waits for the lanes of `mask`.
pub fn sync(mask: u32) {
    exchange(0, mask);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CUDA's headers pack a width as `((32 - width) << 8) | clamp`: the clamp 31 for down,
    /// butterfly and index, 0 for up.
    fn c(width: u32, up: bool) -> u32 {
        ((32 - width) << 8) | if up { 0 } else { 31 }
    }

    #[test]
    fn sources_follow_ptx_for_every_lane_width_and_operand() {
        for width in [1u32, 2, 4, 8, 16, 32] {
            for lane in 0..32 {
                let base = lane / width * width;
                for delta in 0..32 {
                    // __shfl_down_sync: lane + delta within the segment, else the lane itself.
                    let want = if (lane % width) + delta < width { (lane + delta, true) } else { (lane, false) };
                    assert_eq!(
                        source(Shuffle::Down, lane, delta, c(width, false)),
                        want,
                        "down w{width} l{lane} d{delta}"
                    );
                    let want = if lane % width >= delta { (lane - delta, true) } else { (lane, false) };
                    assert_eq!(source(Shuffle::Up, lane, delta, c(width, true)), want, "up w{width} l{lane} d{delta}");
                    // __shfl_sync: the segment's lane `delta % width`.
                    assert_eq!(source(Shuffle::Index, lane, delta, c(width, false)), (base + delta % width, true));
                    // __shfl_xor_sync: within the segment for masks below the width.
                    if delta < width {
                        assert_eq!(source(Shuffle::Butterfly, lane, delta, c(width, false)), (lane ^ delta, true));
                    }
                }
            }
        }
    }

    #[test]
    fn reductions_fold_only_the_lanes_that_took_part() {
        let mut values = [0u64; 32];
        for (l, v) in values.iter_mut().enumerate() {
            *v = (l as i32 - 4) as u32 as u64;
        }
        let members = 0b1111_0001; // lanes 0, 4, 5, 6, 7: -4, 0, 1, 2, 3
        assert_eq!(fold(Redux::Add, members, &values), 2);
        assert_eq!(fold(Redux::Min, members, &values) as i32, -4);
        assert_eq!(fold(Redux::Max, members, &values), 3);
        assert_eq!(fold(Redux::UMin, members, &values), 0);
        assert_eq!(fold(Redux::UMax, members, &values), (-4i32) as u32);
        assert_eq!(fold(Redux::And, 0b1100_0000, &values), 2 & 3);
        assert_eq!(fold(Redux::Or, 0b1100_0000, &values), 2 | 3);
        assert_eq!(fold(Redux::Xor, 0b1110_0000, &values), 1 ^ 2 ^ 3);
        for (i, name) in Redux::NAMES.iter().enumerate() {
            assert_eq!(Redux::from_code(i as i32).map(|r| r as usize), Some(i), "{name}");
        }
    }

    #[test]
    fn votes_count_only_the_lanes_that_took_part() {
        let members = 0x0000_ffff;
        assert_eq!(tally(Vote::All, members, 0xffff_ffff), 1);
        assert_eq!(tally(Vote::All, members, 0x0000_fffe), 0);
        assert_eq!(tally(Vote::Any, members, 0xffff_0000), 0);
        assert_eq!(tally(Vote::Any, members, 0x0000_0100), 1);
        assert_eq!(tally(Vote::Uniform, members, 0xffff_0000), 1);
        assert_eq!(tally(Vote::Uniform, members, 0x0000_0001), 0);
        assert_eq!(tally(Vote::Ballot, members, 0x00ff_00ff), 0x0000_00ff);
    }

    /// 64 instances as fibers: two warps. Each lane shuffles down by one, then votes; values
    /// come from the lane's own warp only.
    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64"))]
    fn fibers_exchange_within_their_warp() {
        use std::sync::Mutex;
        let got = Mutex::new(vec![(0u32, false, 0u32); 64]);
        crate::fiber::run(64, &|i| {
            let (v, ok) = shuffle(Shuffle::Down, u32::MAX, 1000 + i as u32, 1, 31);
            let ballot = vote(Vote::Ballot, u32::MAX, i % 3 == 0);
            got.lock().unwrap()[i] = (v, ok, ballot);
        });
        let got = got.into_inner().unwrap();
        for (i, &(v, ok, ballot)) in got.iter().enumerate() {
            let lane = i % 32;
            let want = if lane < 31 { (1000 + i as u32 + 1, true) } else { (1000 + i as u32, false) };
            assert_eq!((v, ok), want, "lane {i}");
            let warp_base = i - lane;
            let want_ballot = (0..32).filter(|l| (warp_base + l) % 3 == 0).fold(0u32, |b, l| b | 1 << l);
            assert_eq!(ballot, want_ballot, "lane {i}");
        }
    }

    /// `__syncthreads_count`: every thread gets the block's count, round after round.
    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64"))]
    fn block_votes_count_the_whole_block() {
        use std::sync::Mutex;
        let got = Mutex::new(Vec::new());
        crate::fiber::run(100, &|i| {
            for round in 0..3 {
                let c = block_vote(0, (i + round) % 4 == 0);
                let all = block_vote(1, i < 1000);
                let any = block_vote(2, i == 99 && round == 1);
                got.lock().unwrap().push((round, c, all, any));
            }
        });
        for (round, c, all, any) in got.into_inner().unwrap() {
            assert_eq!(c, (0..100).filter(|i| (i + round) % 4 == 0).count() as u32);
            assert_eq!((all, any), (1, u32::from(round == 1)));
        }
    }

    /// Lanes that returned early do not hold the others: a partial warp (40 instances) and a
    /// lane that leaves before the shuffle.
    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64"))]
    fn returned_lanes_are_not_waited_for() {
        use std::sync::Mutex;
        let got = Mutex::new(vec![0u32; 40]);
        crate::fiber::run(40, &|i| {
            if i == 5 {
                return;
            }
            let (v, _) = shuffle(Shuffle::Index, u32::MAX, i as u32 * 10, 0, 31);
            got.lock().unwrap()[i] = v;
        });
        let got = got.into_inner().unwrap();
        // Lane 0 of each warp is the source; warp 1 has 8 lanes.
        assert!((0..32).filter(|&i| i != 5).all(|i| got[i] == 0));
        assert!((32..40).all(|i| got[i] == 320));
    }
}
