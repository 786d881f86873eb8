//! The source hash recorded in a database.
//!
//! FNV-1a (64 bit) is not cryptographic; it only has to notice that a source changed since
//! the analysis, and it is small enough to live here instead of adding a dependency. Its
//! output for given bytes never changes (the algorithm is fixed by its published constants),
//! so databases stay comparable across builds and machines; a different algorithm would be a
//! new prefix and a new schema version.

const PREFIX: &str = "fnv1a64:";
const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// The hash of a source file's bytes: `fnv1a64:` and 16 lowercase hex digits.
pub fn source_hash(bytes: &[u8]) -> String {
    let mut h = OFFSET_BASIS;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(PRIME);
    }
    format!("{PREFIX}{h:016x}")
}

/// Whether `hash` has the form [`source_hash`] produces.
pub(crate) fn is_well_formed(hash: &str) -> bool {
    hash.strip_prefix(PREFIX)
        .is_some_and(|hex| hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // The published FNV-1a 64 test vectors.
        assert_eq!(source_hash(b""), "fnv1a64:cbf29ce484222325");
        assert_eq!(source_hash(b"a"), "fnv1a64:af63dc4c8601ec8c");
        assert_eq!(source_hash(b"foobar"), "fnv1a64:85944171f73967e8");
    }

    #[test]
    fn stable_and_sensitive() {
        let src = b"void f(float *A) { A[0] = 1; }\n";
        assert_eq!(source_hash(src), source_hash(src));
        assert_ne!(source_hash(src), source_hash(b"void f(float *A) { A[0] = 2; }\n"));
    }

    #[test]
    fn well_formed() {
        assert!(is_well_formed(&source_hash(b"x")));
        assert!(!is_well_formed("fnv1a64:CBF29CE484222325"));
        assert!(!is_well_formed("fnv1a64:cbf29ce48422232"));
        assert!(!is_well_formed("sha256:cbf29ce484222325"));
    }
}
