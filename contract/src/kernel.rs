//! The parameters a node's GPU kernel takes after its leaf's ([`crate::desc::KernelDesc`]),
//! as `i64` words and then one pointer: where the launched part of the grid starts, the
//! whole grid, the position and extent of the grid's parent instance, and the output
//! records (null when the leaf has none). Indices are counted from the first of them.

/// The launched part's first instance (x, y, z): the partition's offset.
pub const OFFSET: usize = 0;
/// The whole grid (x, y, z), which a partition's launch covers part of.
pub const GRID: usize = 3;
/// The parent instance's id (x, y, z).
pub const PARENT_ID: usize = 6;
/// The parent's grid (x, y, z).
pub const PARENT_DIM: usize = 9;
/// The output records' pointer.
pub const OUTS: usize = 12;
/// How many there are: the `i64` words, then the pointer.
pub const EXTRA: usize = 13;

// The pointer comes last, after every word.
const _: () = assert!(OUTS + 1 == EXTRA && PARENT_DIM + 3 == OUTS);
