//! `dashdb`: the analysis database (Mekong's "dashdb") as versioned JSON.
//!
//! `hpvm-mgpu analyze` writes one database per program (`app.dashdb.json`): what the polyhedral
//! analysis learned about every leaf node. `hpvm-mgpu build` embeds it in the executable, and at
//! run time the runtime cuts a launch's grid into one partition per device and evaluates each
//! argument's read and write maps on a partition to know which elements that device reads
//! (they must be current there before the launch) and writes (it becomes their only current
//! holder afterwards). `hpvm-mgpu db show` prints it for people ([`show`]).
//!
//! The schema (every field is documented on its type in [`schema`]), after the Mekong thesis's
//! table 1:
//! - [`Database`]: `schema_version`, the [`Source`] it was made from (`path`, `hash`), the
//!   `generator` that wrote it, and its `nodes`.
//! - [`Node`]: `name`, `location` (`file:line`), `hint`, `dims`, `grid` (instance counts as
//!   expression text), `partitionable` and the [`Reason`]s when it is not, the [`Split`]
//!   dimensions and who chose them, and the pointer arguments `args`.
//! - [`Arg`]: `name`, parameter `index`, `llvm_type`, `size_bits`, `element_size` (bytes),
//!   `fundamental_type`, `dimensionality` and `shape`, `pointer_level`, `read_map` and
//!   `write_map` (ISL text), the ISL parameter names `params`, the classification of its
//!   accesses [`ReadKind`] / [`WriteKind`], and for a write at indices read from another
//!   argument, where they come from ([`Through`]); for an argument updated only by combining
//!   atomics, how they combine ([`Reduction`]).
//!
//! Maps are ISL text such as `[N] -> { I[x, y] -> A[y, x - 1] : 0 < x < N - 1 }`; this crate
//! stores them and never parses ISL (that is `isl-glue`'s job), so it only checks their shape
//! loosely.
//!
//! Invariants:
//! - A [`Database`] returned by [`Database::from_json`] or [`Database::load`] has the current
//!   [`SCHEMA_VERSION`], has passed [`Database::validate`] (see there for the rules), and, when
//!   `load` was given the source bytes, was made from exactly that source ([`source_hash`]).
//!   Consumers may rely on all of it; a database that breaks a rule is refused, never repaired,
//!   because a wrong map silently produces wrong results on several devices.
//! - [`Database::save`] writes only databases that pass [`Database::validate`], atomically: a
//!   reader sees the old file or the new one, never a part, and a failed save leaves nothing.
//! - [`Database::to_json`] is deterministic: same database, same bytes (fields in declaration
//!   order, nodes and arguments in the order given).
//!
//! Versioning: bump [`SCHEMA_VERSION`] on any change of meaning (a field added, removed,
//! renamed or reinterpreted, an enum value added). Old databases are then refused with a
//! message asking to re-run `hpvm-mgpu analyze`; there is no migration, since re-running the
//! analysis is cheap and always right. Unknown fields are refused too, so a newer writer
//! cannot be misread by an older reader that happens to share the version.

mod bound;
mod hash;
pub mod schema;
mod show;
mod store;
#[cfg(test)]
mod testdata;
mod validate;

pub use bound::Bound;
pub use hash::source_hash;
pub use schema::{
    Arg, Block, Database, Node, Product, ReadKind, Reason, ReduceOp, ReduceType, Reduction, RuntimeBlock, Source,
    Split, SplitChoice, Through, WriteKind, MAPS_NEVER_HOLD,
};
pub use show::show;

/// The version of the JSON schema this crate reads and writes.
pub const SCHEMA_VERSION: u32 = 9;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    /// `path` is `<text>` when the JSON did not come from a file.
    #[error("{path}: not a valid analysis database: {message}")]
    Json { path: String, message: String },
    #[error(
        "{path}: analysis database has schema version {found}, but this hpvm-mgpu reads version \
         {expected}; re-run `hpvm-mgpu analyze` to regenerate it"
    )]
    Version { path: String, found: u32, expected: u32 },
    #[error(
        "{database}: analysis database was made from {source_path} with hash {recorded}, but the \
         source now has hash {actual}; re-run `hpvm-mgpu analyze` on it"
    )]
    SourceChanged { database: String, source_path: String, recorded: String, actual: String },
    #[error("invalid analysis database: {0}")]
    Invalid(String),
    #[error("no node `{name}` in the analysis database (known: {})", known_list(.known))]
    UnknownNode { name: String, known: Vec<String> },
}

fn known_list(known: &[String]) -> String {
    if known.is_empty() {
        "none".to_string()
    } else {
        known.join(", ")
    }
}

/// Map parameters are only meaningful within these bounds: `valid_when` is simplified under
/// them, so whoever fixes a map's parameters must check them too (and run the node
/// unpartitioned outside). Grid parameters (`gx`, `gy`, `gz`): `0 <= g < GRID_LIMIT`;
/// a [`RuntimeBlock`]'s size: `1 <= size < GRID_LIMIT`, its id and offset:
/// `0 <= v <= PARAM_LIMIT`; any other parameter `p`: `-PARAM_LIMIT <= p <= PARAM_LIMIT`.
pub const GRID_LIMIT: i64 = 1 << 31;
/// See [`GRID_LIMIT`].
pub const PARAM_LIMIT: i64 = 1 << 40;

pub type Result<T, E = Error> = std::result::Result<T, E>;
