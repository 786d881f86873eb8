//! The types of the JSON schema. Field order here is the order in the file; changing the
//! meaning of anything here requires bumping [`SCHEMA_VERSION`](crate::SCHEMA_VERSION).
//!
//! Every struct refuses unknown fields: a field this version does not know would be a field
//! whose meaning it would ignore.

use crate::hash::source_hash;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The analysis results of one program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Database {
    /// The schema version the file was written with; loading refuses any other.
    pub schema_version: u32,
    /// The program the analysis read.
    pub source: Source,
    /// What wrote the file, e.g. `hpvm-mgpu 0.1.0`; for people only.
    pub generator: String,
    /// The analysed nodes (leaf nodes), in the order the analysis visited them.
    pub nodes: Vec<Node>,
}

/// The source file a database was made from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// The path as given to `hpvm-mgpu analyze`; for messages.
    pub path: String,
    /// [`source_hash`] of the file's bytes: a database is only used with the source it
    /// describes.
    pub hash: String,
}

/// One node of the dataflow graph and what is known about its accesses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    /// The node function's name (its symbol); unique within a database.
    pub name: String,
    /// The name people read, when it differs from `name` (a demangled C++ symbol).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<String>,
    /// `file:line` of the node function's definition.
    pub location: String,
    /// The node's `__hpvm__hint` target as text (`GPU`, `CPU`, ...).
    pub hint: String,
    /// The number of grid dimensions (0 to 3); dimension 0 is x.
    pub dims: u32,
    /// The instance count of each dimension (`dims` of them), as expression text over the
    /// parent's parameters, e.g. `["N", "M / 2"]`.
    pub grid: Vec<String>,
    /// How instances become the coordinates `I[x, y, z]` of the maps. `None`: the node's own
    /// instance ids. `Some(block)`: the node's instances are the threads of a block and its
    /// parent's instances are the blocks (one GPU launch); then
    /// `I = block id × block size + thread id`, and the maps' `gx`, `gy`, `gz` count blocks,
    /// not instances.
    pub block: Option<Block>,
    /// The parameter values for which the maps hold, as an ISL parameter set (for example
    /// `[N] -> { : N >= 1 }`); `None` when they always do. The analysis's assumptions
    /// (Polly's assumed context, e.g. that a delinearized index stays within its row) live
    /// here: for other values the node must run unpartitioned. It is simplified under the
    /// standing bounds [`GRID_LIMIT`](crate::GRID_LIMIT) and
    /// [`PARAM_LIMIT`](crate::PARAM_LIMIT), which hold in addition.
    pub valid_when: Option<String>,
    /// Conditions that hold in addition to `valid_when` but multiply parameters, which ISL
    /// sets cannot state, in [`Bound`](crate::Bound)'s text form (`EXPR < NUMBER`). They come
    /// from 32-bit unsigned index arithmetic widened to 64 bits, exact only while no value
    /// reaches 2^32. Whoever fixes the parameters checks each with every block id and offset
    /// at its largest value in the launch; where one fails the node runs unpartitioned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bounds: Vec<String>,
    /// Map parameters that are products of others (`blockDim.x * gridDim.x`, the stride of
    /// data laid out one row per thread of the grid), which ISL cannot multiply: whoever fixes
    /// the parameters gives each its factors' product. Empty when the maps name none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub products: Vec<Product>,
    /// Whether the grid may be cut into partitions run on different devices with the results
    /// of a one-device run. When false the node runs unpartitioned on one device.
    pub partitionable: bool,
    /// Why the node is not partitionable; empty exactly when it is.
    pub reasons: Vec<Reason>,
    /// Not partitionable only for want of the values of its launch: each reason is an index
    /// or condition that multiplies or divides by run-time values (a scalar, the grid), which
    /// the analysis may prove exact once those values are constants. The runtime may analyse
    /// the node again with one launch's values built in (`hpvm-mgpu specialize`) and use the
    /// maps that gives for launches with exactly those values. Never true of a partitionable
    /// node.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub specializable: bool,
    /// Why some arguments' writes are [`WriteKind::Merged`] rather than described by maps:
    /// the reasons that would otherwise keep the node whole. Empty when none is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_because: Vec<Reason>,
    /// The node's blocks cannot talk to each other within a launch: no volatile access
    /// outside shared memory, no fence, no inline assembly, and no atomic whose old value is
    /// used. What a block writes no other block of the launch reads, unless they race; so a
    /// buffer whose parts' writes overlap at a launch (a flag any thread may set) may be
    /// merged as [`WriteKind::Merged`] says instead of keeping the launch whole.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mergeable: bool,
    /// Of a [`Self::specializable`] node: every reason is of writes no map places, and the
    /// node is [`Self::mergeable`]. Where one launch's values do not make the maps exact (or
    /// nothing can make them: no compiler, ranks), the launch may still split with those
    /// writes [`WriteKind::Merged`] (each may-write or indescribable write of an argument).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub merge_fallback: bool,
    /// The grid dimensions to cut along when partitioning.
    pub split: Split,
    /// The name each parameter of the node function has in the maps, by position (scalar
    /// parameters become map parameters under these names; C names ISL cannot take are
    /// changed).
    pub param_names: Vec<String>,
    /// The node's pointer arguments (scalars are not listed: they only appear as map
    /// parameters).
    pub args: Vec<Arg>,
}

/// A map parameter whose value is the product of other map parameters ([`Node::products`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Product {
    /// Its name in the maps.
    pub name: String,
    /// The parameters multiplied (at least two; a name may repeat for a power): the node's
    /// parameters by their map names, the grid's and parent's names, or a run-time block's.
    pub factors: Vec<String>,
}

/// The threads of one block, for a node whose instances are the threads of a block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Block {
    /// Threads per block in each dimension (`dims` of them), as expression text over the
    /// parent's parameters, e.g. `["16", "16"]` or `["block"]`.
    pub size: Vec<String>,
    /// The dimensions whose block size is known only at the launch, in increasing order. Where
    /// the size is a constant the maps have it built in (`I = 16 × block id + thread id`);
    /// where it is not, `block id × block size` is not affine and the maps speak of one block
    /// through the parameters named here.
    pub runtime: Vec<RuntimeBlock>,
}

/// The map parameters of one grid dimension whose block size is a run-time value (the
/// mekong-cuda "block offset" model). The maps give the accesses of the instances of ONE
/// block, the one whose id is `id` and whose first instance is `offset`; whoever evaluates
/// them fixes `size` to the launch's block size and ranges `id` over the blocks wanted, with
/// `offset = id × size` (affine once `size` is a number), and `valid_when` must hold for
/// every block of the launch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeBlock {
    /// The grid dimension (0 for x).
    pub dim: u32,
    /// The parameter holding the block size (threads per block) in this dimension.
    pub size: String,
    /// The parameter holding the block id in this dimension.
    pub id: String,
    /// The parameter holding `id × size`, the block's first global coordinate.
    pub offset: String,
    /// The node's instances run a grid-stride loop in this dimension: instance `x` runs the
    /// loop's iterations `x + k × S`, `k >= 0`, `S` the launch's instances in the dimension
    /// (blocks × `size`), and the maps give the accesses of ONE ITERATION, `I[x]` being the
    /// iteration's counter: whoever evaluates them ranges `id` over the virtual blocks
    /// `b + k × blocks` of each block `b` wanted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub strided: bool,
}

/// One reason a node is not partitionable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reason {
    /// What prevents partitioning, for people, e.g. "`bins` is written at a data-dependent
    /// index".
    pub message: String,
    /// `file:line` (or `file:line:column`) of the access at fault, when debug info had it.
    pub location: Option<String>,
}

/// Where a partitionable grid is cut.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Split {
    /// The grid dimensions (each `< dims`, no repeats); empty when the node is not split
    /// (always so for a node that is not partitionable). Chosen by the analysis, they are the
    /// dimensions a launch may be cut along, best first: each launch is cut along the first
    /// with enough blocks for its devices. Chosen by the user, every launch is cut along all
    /// of them (slabs along the first, each cut along the next).
    pub dims: Vec<u32>,
    /// Who chose `dims`.
    pub chosen_by: SplitChoice,
}

/// Who chose the split dimensions of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SplitChoice {
    /// The analysis, which proved every listed dimension splittable and ordered them by the
    /// strides of the accesses (the dimension with the largest stride keeps each device's
    /// part of the buffers contiguous).
    Analysis,
    /// The user, on the command line.
    User,
}

/// One pointer argument of a node: its type, shape and accesses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arg {
    /// The parameter's name in the source (or in the IR without debug info).
    pub name: String,
    /// The parameter's position among the node function's parameters (0-based); unique
    /// within a node.
    pub index: u32,
    /// The LLVM type of the parameter, e.g. `ptr`.
    pub llvm_type: String,
    /// The size of the parameter itself in bits (64 for a pointer).
    pub size_bits: u32,
    /// The size in bytes of one element of the pointed-to array.
    pub element_size: u32,
    /// The element type at the end of all pointer levels, e.g. `float`, `double`, `i32`.
    pub fundamental_type: String,
    /// The number of dimensions of the array the accesses see (after delinearization).
    pub dimensionality: u32,
    /// The extent of each dimension, outermost first (`dimensionality` of them), as
    /// expression text over the map parameters; the outermost may be `*` (unknown extent).
    pub shape: Vec<String>,
    /// How many pointers lead to the elements: `float *` is 1, `double **` is 2.
    pub pointer_level: u32,
    /// The elements each instance reads: an ISL map from the instance (`I[x, y, ...]`) to
    /// array elements, with the parameters `params`. Absent when nothing is read or (for a
    /// data-dependent read) nothing better than the whole array is known.
    pub read_map: Option<String>,
    /// The elements each instance writes, as `read_map`.
    pub write_map: Option<String>,
    /// The ISL parameter names of the maps, in order: the grid sizes and the node's scalar
    /// parameters the maps depend on.
    pub params: Vec<String>,
    /// How exactly `read_map` describes the reads.
    pub read: ReadKind,
    /// How exactly `write_map` describes the writes.
    pub write: WriteKind,
    /// Where the indices of an [`WriteKind::Indirect`] write come from; present exactly then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_through: Option<Through>,
    /// How a [`WriteKind::Reduce`] argument's updates combine; present exactly then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reduction: Option<Reduction>,
    /// The parameter values for which `read_map` holds, as an ISL parameter set (like the
    /// node's `valid_when`, which holds in addition); for other values the whole array is
    /// read. `None` when it holds wherever the node's maps do. A read's subscripts are a
    /// delinearized view of its address, right only while they stay within the array's
    /// inner extents; a read that leaves them costs its own precision, not the node's split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_valid_when: Option<String>,
}

/// A write whose element index is a value the node reads from another of its arguments
/// (`y[perm[i]]`): instance `I` writes element `value + offset` (elements of `scale` bytes,
/// from the argument's pointer) for each `value`, the integer at an element of `map(I)` in
/// argument `arg` (one element, or one per iteration of a loop in the instance). The node never writes `arg`, so the values are fixed during a launch, but
/// they may change between launches: whoever splits a launch reads them at that launch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Through {
    /// The parameter position of the pointer argument holding the indices.
    pub arg: u32,
    /// The elements of `arg` each instance reads its indices from: an ISL map from the
    /// instance (`I[x, ...]`) to elements of `arg` (in `arg`'s shape), exact, with the
    /// parameters of the written argument's `params`.
    pub map: String,
    /// The width of the integers read (8, 16, 32 or 64 bits) and whether they are signed
    /// (sign-extended to 64 bits; otherwise zero-extended).
    pub bits: u32,
    pub signed: bool,
    /// Bytes per index step (the element size of the address arithmetic).
    pub scale: u32,
    /// Added to the value read before scaling.
    pub offset: i64,
    /// Whether every instance of `map`'s domain writes (else some may not: a data-dependent
    /// condition, and the rule of [`WriteKind::May`] applies to the elements found).
    pub every: bool,
}

/// The updates of a [`WriteKind::Reduce`] argument: atomic read-modify-writes of one
/// combining operation on elements of one type. Updates in any order give the same result
/// (floating-point sums up to rounding, as between two runs on one GPU), so the updates of
/// different devices may go to private copies, each starting from the operation's identity,
/// combined into the buffer afterwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reduction {
    pub op: ReduceOp,
    pub element: ReduceType,
}

/// A combining operation ([`Reduction`]): `atomicAdd` and `atomicSub` add (a subtraction adds
/// the negated value), `atomicMin`, `atomicMax`, `atomicAnd`, `atomicOr`, `atomicXor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReduceOp {
    Add,
    Min,
    Max,
    And,
    Or,
    Xor,
}

/// The element type of a [`Reduction`]; min and max compare as this type says (signed or
/// unsigned).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReduceType {
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
}

impl ReduceOp {
    /// The name used in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ReduceOp::Add => "add",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::And => "and",
            ReduceOp::Or => "or",
            ReduceOp::Xor => "xor",
        }
    }
}

impl ReduceType {
    /// The name used in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ReduceType::I32 => "i32",
            ReduceType::U32 => "u32",
            ReduceType::I64 => "i64",
            ReduceType::U64 => "u64",
            ReduceType::F32 => "f32",
            ReduceType::F64 => "f64",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> u32 {
        match self {
            ReduceType::I32 | ReduceType::U32 | ReduceType::F32 => 4,
            ReduceType::I64 | ReduceType::U64 | ReduceType::F64 => 8,
        }
    }
}

impl Reduction {
    /// Whether `op` on `element` is one of the combinations this schema describes: add on
    /// every type, min and max on integers, and, or and xor on unsigned integers.
    pub fn is_valid(self) -> bool {
        use ReduceType::*;
        match self.op {
            ReduceOp::Add => true,
            ReduceOp::Min | ReduceOp::Max => matches!(self.element, I32 | U32 | I64 | U64),
            ReduceOp::And | ReduceOp::Or | ReduceOp::Xor => matches!(self.element, U32 | U64),
        }
    }

    /// The operation's identity as little-endian bytes of one element: `x op identity = x` for
    /// every `x` (for float sums `-0.0`, which keeps a `-0.0` element's sign).
    pub fn identity(self) -> Vec<u8> {
        use ReduceType::*;
        let v: u64 = match (self.op, self.element) {
            (ReduceOp::Add, F32) => 0x8000_0000,
            (ReduceOp::Add, F64) => 0x8000_0000_0000_0000,
            (ReduceOp::Add | ReduceOp::Or | ReduceOp::Xor, _) | (ReduceOp::Max, U32 | U64) => 0,
            (ReduceOp::And, _) | (ReduceOp::Min, U32 | U64) => u64::MAX,
            (ReduceOp::Min, I32) => i32::MAX as u64,
            (ReduceOp::Min, _) => i64::MAX as u64,
            (ReduceOp::Max, I32) => i32::MIN as u32 as u64,
            (ReduceOp::Max, _) => i64::MIN as u64,
        };
        v.to_le_bytes()[..self.element.size() as usize].to_vec()
    }
}

impl fmt::Display for Reduction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on {}", self.op.as_str(), self.element.as_str())
    }
}

/// The classification of an argument's reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadKind {
    /// Never read; `read_map` is absent.
    None,
    /// `read_map` is exactly the elements read.
    Exact,
    /// `read_map` holds every element read and maybe more (e.g. a read under a condition the
    /// analysis could not express); copying it is correct, only maybe wasteful.
    OverApproximated,
    /// The index depends on data read at run time; `read_map`, when present, bounds the
    /// elements read, otherwise the whole array must be assumed read.
    DataDependent,
}

/// The classification of an argument's writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriteKind {
    /// Never written; `write_map` is absent.
    None,
    /// `write_map` is exactly the elements written, every one of them on every run.
    Exact,
    /// Some elements of `write_map` (when present) may or may not be written (a write under a
    /// data-dependent condition). Whoever runs a part of the grid elsewhere MUST first make
    /// that device current on the part's whole may-write region (as if it were read): an
    /// element the run leaves alone then still holds its right value there, and the device can
    /// be made its only current holder afterwards. The node is partitionable only if no
    /// element may be written by two instances (the map is injective), so that the parts'
    /// regions are disjoint; without a map it is not partitionable.
    May,
    /// Written at indices the node reads from another argument ([`Arg::write_through`]);
    /// `write_map` is absent. Whoever runs a part of the grid elsewhere must read the indices
    /// of the part's instances at that launch, and split it only when every index falls
    /// within the buffer and no element is written by two parts.
    Indirect,
    /// Updated only through atomic read-modify-writes that combine ([`Arg::reduction`]), whose
    /// old values the node never uses, and neither read nor written otherwise. `write_map`,
    /// when present, bounds the elements updated (absent: any element of the buffer may be).
    /// Whoever splits a launch gives every device but one a private copy of those elements
    /// holding the operation's identity, and combines the copies into the one device's after
    /// the launch; that device must be current on them first. No other argument of the launch
    /// may point into the same buffer.
    Reduce,
    /// Written where the analysis cannot tell (a data-dependent index, an index beyond affine
    /// arithmetic), by a node whose blocks cannot communicate within a launch (no atomics, no
    /// volatile accesses to memory outside the block, no fences beyond the block), so that a
    /// block's writes are its own unless blocks race. `write_map` is absent. Whoever splits a
    /// launch makes every device current on the whole buffer first; one device, the home,
    /// keeps a copy of it as it was (the twin), and after the launch takes from each other
    /// device's copy every byte that differs from the twin. The home is the only holder after.
    /// No other argument of the launch may point into the same buffer.
    Merged,
    /// The analysis could not describe the writes at all; the node is not partitionable.
    Unanalysable,
}

impl ReadKind {
    /// The name used in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadKind::None => "none",
            ReadKind::Exact => "exact",
            ReadKind::OverApproximated => "over-approximated",
            ReadKind::DataDependent => "data-dependent",
        }
    }
}

impl WriteKind {
    /// The name used in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            WriteKind::None => "none",
            WriteKind::Exact => "exact",
            WriteKind::May => "may",
            WriteKind::Indirect => "indirect",
            WriteKind::Reduce => "reduce",
            WriteKind::Merged => "merged",
            WriteKind::Unanalysable => "unanalysable",
        }
    }
}

impl SplitChoice {
    /// The name used in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            SplitChoice::Analysis => "analysis",
            SplitChoice::User => "user",
        }
    }
}

impl fmt::Display for ReadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for WriteKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for SplitChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Source {
    /// The record of the source at `path` with contents `bytes`.
    pub fn new(path: impl Into<String>, bytes: &[u8]) -> Source {
        Source { path: path.into(), hash: source_hash(bytes) }
    }
}

impl Database {
    /// An empty database of the current schema version for `source`.
    pub fn new(source: Source, generator: impl Into<String>) -> Database {
        Database { schema_version: crate::SCHEMA_VERSION, source, generator: generator.into(), nodes: Vec::new() }
    }

    /// The node called `name`.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name == name)
    }
}

impl Node {
    /// The name to show people: [`Node::display`], else the symbol.
    pub fn shown(&self) -> &str {
        self.display.as_deref().unwrap_or(&self.name)
    }

    /// The argument at parameter position `index`, if it is a listed pointer argument.
    pub fn arg(&self, index: u32) -> Option<&Arg> {
        self.args.iter().find(|a| a.index == index)
    }

    /// Whether the runtime may analyse the node again for a launch's values where the maps'
    /// conditions (`valid_when`, `bounds`) fail at that launch: a partitionable node of CUDA
    /// blocks, whose conditions often come from products of run-time values that the values
    /// make constants (`blockIdx.x * blockDim.x * 4` gives Polly's assumption `boffx = 0`).
    pub fn may_respecialize(&self) -> bool {
        self.partitionable && self.block.is_some() && (self.valid_when.is_some() || !self.bounds.is_empty())
    }

    /// Whether the node's maps hold for no launch: one of its reasons is [`MAPS_NEVER_HOLD`].
    pub fn maps_never_hold(&self) -> bool {
        self.reasons.iter().any(|r| r.message.starts_with(MAPS_NEVER_HOLD))
    }

    /// Makes the writes no map places [`WriteKind::Merged`] and moves the reasons to
    /// `merged_because`, so that the node splits with those writes merged after each launch.
    /// Whoever calls it has checked that the blocks cannot talk ([`Node::mergeable`]) and that
    /// every reason is of such writes or is [`MAPS_NEVER_HOLD`].
    ///
    /// Where the maps hold for no launch, none of them may be used: every argument read is then
    /// read whole, every one written is merged, and reductions combine over the whole buffer,
    /// which no assumption of the analysis is needed for. Returns whether any write is merged.
    pub fn merge_unplaced_writes(&mut self) -> bool {
        let forget = self.maps_never_hold();
        let mut any = false;
        for a in &mut self.args {
            if forget {
                if a.read != ReadKind::None {
                    a.read = ReadKind::DataDependent;
                    a.read_map = None;
                    a.read_valid_when = None;
                }
                if a.write == WriteKind::Reduce {
                    a.write_map = None;
                    continue;
                }
            }
            let unplaced = matches!(a.write, WriteKind::May | WriteKind::Unanalysable);
            if unplaced || (forget && a.write != WriteKind::None) {
                a.write = WriteKind::Merged;
                a.write_map = None;
                a.write_through = None;
                any = true;
            }
        }
        if forget {
            self.valid_when = None;
            self.bounds.clear();
        }
        if any {
            self.merged_because = std::mem::take(&mut self.reasons);
        }
        any
    }
}

/// The reason a node's maps cannot be used at any launch: they hold only under assumptions
/// (Polly's, on values the code derives) that are false or cannot be checked. The node may
/// still split with every write merged ([`Node::merge_unplaced_writes`]).
pub const MAPS_NEVER_HOLD: &str = "the analysis's maps hold only under assumptions on values the code derives \
     (such as a product of two scalars, or a value read from memory) that no launch can check";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_use_kebab_case_names() {
        for (kind, text) in [
            (ReadKind::None, "none"),
            (ReadKind::Exact, "exact"),
            (ReadKind::OverApproximated, "over-approximated"),
            (ReadKind::DataDependent, "data-dependent"),
        ] {
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{text}\""));
            assert_eq!(kind.as_str(), text);
        }
        for (kind, text) in [
            (WriteKind::None, "none"),
            (WriteKind::Exact, "exact"),
            (WriteKind::May, "may"),
            (WriteKind::Indirect, "indirect"),
            (WriteKind::Reduce, "reduce"),
            (WriteKind::Merged, "merged"),
            (WriteKind::Unanalysable, "unanalysable"),
        ] {
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{text}\""));
            assert_eq!(kind.as_str(), text);
        }
        for (kind, text) in [(SplitChoice::Analysis, "analysis"), (SplitChoice::User, "user")] {
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{text}\""));
            assert_eq!(kind.as_str(), text);
        }
    }

    /// Maps that hold for no launch are all dropped by a merge: the reads become whole, every
    /// write merged, and the node splits with no assumption left; otherwise only the unplaced
    /// writes are merged and the exact maps stay.
    #[test]
    fn merging_where_maps_never_hold_keeps_no_map() {
        let mut db = crate::testdata::sample();
        let mut node = db.nodes[0].clone();
        node.partitionable = false;
        node.split.dims.clear();
        node.valid_when = Some("[N] -> { : false }".into());
        node.reasons = vec![Reason { message: MAPS_NEVER_HOLD.into(), location: None }];
        assert!(node.maps_never_hold() && node.merge_unplaced_writes());
        assert!(node.reasons.is_empty() && node.merged_because.len() == 1 && node.valid_when.is_none());
        for a in &node.args {
            assert!(a.read_map.is_none() && a.write_map.is_none(), "{}", a.name);
            let (read, write) = if a.name == "C" {
                (ReadKind::None, WriteKind::Merged)
            } else {
                (ReadKind::DataDependent, WriteKind::None)
            };
            assert_eq!((a.read, a.write), (read, write), "{}", a.name);
        }
        node.partitionable = true;
        node.split.dims = vec![0];
        db.nodes[0] = node;
        db.validate().unwrap();

        let mut histogram = db.nodes[1].clone();
        assert!(!histogram.maps_never_hold() && histogram.merge_unplaced_writes());
        let data = histogram.arg(0).unwrap();
        assert!(data.read == ReadKind::Exact && data.read_map.is_some());
        assert_eq!(histogram.arg(2).unwrap().write, WriteKind::Merged);
    }

    #[test]
    fn identities_leave_every_value_alone() {
        use ReduceOp::*;
        use ReduceType::*;
        let r = |op, element| Reduction { op, element };
        let i32_of = |b: Vec<u8>| i32::from_le_bytes(b.try_into().unwrap());
        assert_eq!(i32_of(r(Min, I32).identity()), i32::MAX);
        assert_eq!(i32_of(r(Max, I32).identity()), i32::MIN);
        assert_eq!(u32::from_le_bytes(r(Min, U32).identity().try_into().unwrap()), u32::MAX);
        assert_eq!(i64::from_le_bytes(r(Max, I64).identity().try_into().unwrap()), i64::MIN);
        assert_eq!(u64::from_le_bytes(r(And, U64).identity().try_into().unwrap()), u64::MAX);
        let f = f32::from_le_bytes(r(Add, F32).identity().try_into().unwrap());
        for x in [0.0f32, -0.0, 1.5, -3.0, f32::INFINITY] {
            assert_eq!((x + f).to_bits(), x.to_bits());
        }
        let d = f64::from_le_bytes(r(Add, F64).identity().try_into().unwrap());
        assert_eq!((-0.0f64 + d).to_bits(), (-0.0f64).to_bits());
        assert!(!r(Min, F32).is_valid() && !r(Or, I32).is_valid() && r(Xor, U64).is_valid());
        assert_eq!(serde_json::to_string(&r(Add, F64)).unwrap(), r#"{"op":"add","element":"f64"}"#);
    }

    #[test]
    fn lookups_by_name_and_index() {
        let db = crate::testdata::sample();
        let matmul = db.node("matmul").unwrap();
        assert_eq!(matmul.arg(4).unwrap().name, "C");
        assert!(matmul.arg(1).is_none());
        assert!(db.node("nope").is_none());
    }
}
