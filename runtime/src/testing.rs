//! Helpers shared by the crate's unit tests.

/// A seeded generator of numbers below `n` (0 for `n` 0): random tests that repeat.
pub(crate) fn numbers(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % n.max(1)
    }
}
