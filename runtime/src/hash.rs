//! A fast hash for the runtime's caches on the launch path (plan keys, decisions by grid
//! size): the multiply-rotate hash rustc uses (FxHash), eight bytes at a time. std's SipHash
//! resists crafted keys, which these are not (they come from the program's own launches),
//! and hashing a plan key with it was a tenth of a cache-hit launch's work on 8 devices.

use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` keyed through [`Fx`].
pub type FxHashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<Fx>>;

/// A `HashSet` hashed through [`Fx`].
pub type FxHashSet<K> = std::collections::HashSet<K, BuildHasherDefault<Fx>>;

#[derive(Default, Clone, Copy)]
pub struct Fx(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl Fx {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for Fx {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("eight bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            // The length keeps `[1]` and `[1, 0]` apart.
            self.add(u64::from_le_bytes(last) ^ ((rest.len() as u64) << 56));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash};

    fn hash<T: Hash>(v: T) -> u64 {
        BuildHasherDefault::<Fx>::default().hash_one(v)
    }

    /// Keys differing in one byte, or only in length, hash apart.
    #[test]
    fn near_keys_hash_apart() {
        let base: Vec<u8> = (0..37).collect();
        let mut seen = std::collections::HashSet::new();
        assert!(seen.insert(hash(&base)));
        for i in 0..base.len() {
            let mut k = base.clone();
            k[i] ^= 1;
            assert!(seen.insert(hash(&k)), "byte {i}");
        }
        assert_ne!(hash([1u8].as_slice()), hash([1u8, 0].as_slice()));
        let mut m: FxHashMap<Vec<u8>, usize> = FxHashMap::default();
        m.insert(base.clone(), 1);
        assert_eq!(m.get(&base), Some(&1));
    }
}
