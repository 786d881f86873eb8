//! `isl-glue`: the one place that talks to ISL (through `isl-rs`).
//!
//! The analysis stores access relations as ISL text (maps from a node's global instance
//! coordinates to array elements, over parameters such as grid sizes and scalar arguments).
//! The runtime needs concrete answers from them: with the parameters fixed and the domain
//! cut to one device's partition (the Mekong thesis's `setPartitionBoundaries`), which
//! elements does that partition read or write, as contiguous runs of linear offsets (what a
//! 1-D copy moves) or rectangles (what a 2-D copy moves).
//!
//! Invariants:
//! - ISL objects never leave this crate; callers exchange text and plain numbers. (Polly links
//!   its own ISL: two copies live in one process, so only text may cross.)
//! - An [`Isl`] context belongs to one thread (ISL contexts are not thread safe); every object
//!   made from it borrows it.
//! - [`ElementSet::runs`] and [`ElementSet::rectangles`] are exact: every element of the set is
//!   covered, nothing else, runs are sorted, disjoint and maximal (adjacent runs merged).

mod closed;
mod intervals;

pub use closed::{ClosedBox, ClosedCond, Params};
pub use intervals::{box_rects, Rect, Run, STEP_BUDGET};

use isl_rs as isl;
use isl_rs::DimType;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("ISL could not parse `{text}`: {message}")]
    Parse { text: String, message: String },
    #[error("ISL: {0}")]
    Isl(String),
    #[error("unknown parameter `{0}`")]
    UnknownParam(String),
    #[error("the element set is unbounded (are all parameters fixed?): {0}")]
    Unbounded(String),
    #[error("{0}")]
    Shape(String),
    /// The set has too many pieces to list as intervals cheaply (see
    /// [`intervals::STEP_BUDGET`]).
    #[error("the element set is too fragmented to list its intervals")]
    TooComplex,
}

impl From<isl::LibISLError> for Error {
    fn from(e: isl::LibISLError) -> Self {
        Error::Isl(e.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The ISL operations a heuristic may spend before giving up (a fraction of a second; the
/// maps of ordinary kernels need a few thousand).
const HEURISTIC_OPERATIONS: u64 = 500_000;
/// `isl_options_set_on_error` values.
const ISL_ON_ERROR_WARN: i32 = 0;
const ISL_ON_ERROR_CONTINUE: i32 = 1;

/// An ISL context (one per thread).
pub struct Isl {
    /// Sets parsed, by text ([`Isl::set`]): a plan parses the same small sets again and again
    /// (the blocks a map ranges over, its conditions), and ISL's parser took a third of a
    /// node's first plan. Declared before `ctx`, so dropped before it.
    parsed_sets: std::cell::RefCell<std::collections::HashMap<String, isl::Set>>,
    ctx: isl::Context,
}

/// Sets an [`Isl`] keeps parsed before it starts over.
const PARSED_SETS: usize = 256;

impl Default for Isl {
    fn default() -> Self {
        Isl { parsed_sets: Default::default(), ctx: isl::Context::alloc() }
    }
}

/// The blocks a map with a run-time block size is evaluated over, in one grid dimension
/// (`dashdb::RuntimeBlock`): the map speaks of one block through the parameters `id` and
/// `offset`, which range over the blocks `lo..hi` with `offset = size × id`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BlockRange {
    pub id: String,
    pub offset: String,
    pub size: i64,
    pub lo: i64,
    pub hi: i64,
}

/// `[id, offset, ...] -> { : offset = size * id and lo <= id < hi and ... }`, the text a
/// block range set reads as (tests check [`Isl::block_ranges`] against it).
#[cfg(test)]
fn block_ranges_text(blocks: &[BlockRange]) -> String {
    let names: Vec<&str> = blocks.iter().flat_map(|b| [b.id.as_str(), b.offset.as_str()]).collect();
    let cons: Vec<String> = blocks
        .iter()
        .map(|b| {
            format!(
                "{off} = {size} * {id} and {lo} <= {id} < {hi}",
                off = b.offset,
                size = b.size,
                id = b.id,
                lo = b.lo,
                hi = b.hi
            )
        })
        .collect();
    format!("[{}] -> {{ : {} }}", names.join(", "), cons.join(" and "))
}

/// [`Isl::block_ranges`] with each range's bounds the parameters [`block_param`] (its size
/// stays a number: the closed form of a block size in a parameter would not be affine).
fn param_block_ranges_text(blocks: &[BlockRange]) -> String {
    let mut names: Vec<String> = Vec::new();
    let mut cons: Vec<String> = Vec::new();
    for (k, b) in blocks.iter().enumerate() {
        let (lo, hi) = (block_param(k, false), block_param(k, true));
        // Block ids are never negative: a form that knows so is exact where an index
        // divides by a row length (`A[k * n + x]` with `0 <= x < n` is row `k`, no other).
        cons.push(format!("{} = {} * {id} and 0 <= {lo} <= {id} < {hi}", b.offset, b.size, id = b.id));
        names.extend([b.id.clone(), b.offset.clone(), lo, hi]);
    }
    format!("[{}] -> {{ : {} }}", names.join(", "), if cons.is_empty() { "true".into() } else { cons.join(" and ") })
}

/// What a parameter of [`box_param`] or [`block_param`] bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    Box { dim: usize, upper: bool },
    Blocks { range: usize, upper: bool },
}

/// What `name` bounds, if it is a parameter of [`box_param`] or [`block_param`] (read back
/// without formatting every candidate: closed forms look their parameters up per launch).
pub fn bound_param(name: &str) -> Option<Bound> {
    let rest = name.strip_prefix("hpvm_")?;
    let (blocks, rest) = match rest.strip_prefix('b') {
        Some(r) if r.starts_with("lo") || r.starts_with("hi") => (true, r),
        _ => (false, rest),
    };
    let (upper, digits) = match (rest.strip_prefix("lo"), rest.strip_prefix("hi")) {
        (Some(d), _) => (false, d),
        (_, Some(d)) => (true, d),
        _ => return None,
    };
    let k: usize = digits.parse().ok()?;
    Some(if blocks { Bound::Blocks { range: k, upper } } else { Bound::Box { dim: k, upper } })
}

/// The parameter bounding the blocks of range `k` of [`AccessMap::closed_box`] from below
/// (inclusive) or above (exclusive).
pub fn block_param(k: usize, upper: bool) -> String {
    format!("hpvm_b{}{k}", if upper { "hi" } else { "lo" })
}

/// An access relation: instances -> array elements.
pub struct AccessMap<'i> {
    isl: &'i Isl,
    map: isl::Map,
}

/// Words of ISL's expression syntax that are not parameters.
const ISL_WORDS: [&str; 8] = ["floor", "ceil", "min", "max", "mod", "and", "or", "not"];

/// The identifiers of an expression in ISL's syntax, in order (`16gx` is 16 times `gx`).
fn identifiers(expr: &str) -> impl Iterator<Item = &str> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map(|w| w.trim_start_matches(|c: char| c.is_ascii_digit()))
        .filter(|w| !w.is_empty())
}

/// A set of array elements (or of instances).
pub struct ElementSet<'i> {
    isl: &'i Isl,
    set: isl::Set,
}

impl Isl {
    pub fn new() -> Isl {
        Isl::default()
    }

    pub fn map(&self, text: &str) -> Result<AccessMap<'_>> {
        let map = isl::Map::read_from_str(&self.ctx, text)
            .map_err(|e| Error::Parse { text: text.to_string(), message: e.to_string() })?;
        Ok(AccessMap { isl: self, map })
    }

    pub fn set(&self, text: &str) -> Result<ElementSet<'_>> {
        Ok(ElementSet { isl: self, set: self.parsed_set(text)? })
    }

    /// The set `text` describes, parsed once per context (a copy of what was parsed).
    fn parsed_set(&self, text: &str) -> Result<isl::Set> {
        if let Some(s) = self.parsed_sets.borrow().get(text) {
            return Ok(s.copy()?);
        }
        let set = isl::Set::read_from_str(&self.ctx, text)
            .map_err(|e| Error::Parse { text: text.to_string(), message: e.to_string() })?;
        let mut parsed = self.parsed_sets.borrow_mut();
        if parsed.len() >= PARSED_SETS {
            parsed.clear();
        }
        parsed.insert(text.to_string(), set.copy()?);
        Ok(set)
    }

    /// The value of the integer expression `expr` (ISL syntax, where `/` is exact: `N`, `floor(w / 16) * 16`, `k - 1`)
    /// with its parameters fixed to `values` (names it does not use are ignored).
    pub fn value_of(&self, expr: &str, values: &[(&str, i64)]) -> Result<i64> {
        let names: Vec<&str> = values.iter().map(|(n, _)| *n).collect();
        // A name without a value would be a syntax error to ISL, which prints it: asked here.
        if let Some(unknown) = identifiers(expr).find(|id| !names.contains(id) && !ISL_WORDS.contains(id)) {
            return Err(Error::UnknownParam(unknown.to_string()));
        }
        let text = format!("[{}] -> {{ [v] : v = {expr} }}", names.join(", "));
        let set = self.set(&text)?.fix_params(values)?;
        let (lo, hi) = bounds(&set, 0)?;
        if lo != hi {
            return Err(Error::Shape(format!("`{expr}` has no single value under {values:?}")));
        }
        Ok(lo)
    }

    /// Whether the parameter set `text` (`[N] -> { : N >= 1 }`) holds for `values`, which
    /// must give every parameter it names (an unfixed one would make the answer "for some
    /// value", not "for these").
    pub fn params_hold(&self, text: &str, values: &[(&str, i64)]) -> Result<bool> {
        let set = self.set(text)?;
        let names = set.params()?;
        if let Some(missing) = names.iter().find(|m| !values.iter().any(|(n, _)| n == m)) {
            return Err(Error::UnknownParam(missing.clone()));
        }
        let used: Vec<(&str, i64)> = values.iter().copied().filter(|(n, _)| names.iter().any(|m| m == n)).collect();
        Ok(!set.fix_params(&used)?.is_empty()?)
    }

    /// Whether the parameter set `text` holds for `values` and for EVERY block of `blocks`
    /// (the parameters of a run-time block size, see [`BlockRange`]); `values` must give every
    /// other parameter it names.
    pub fn params_hold_for_blocks(&self, text: &str, values: &[(&str, i64)], blocks: &[BlockRange]) -> Result<bool> {
        let set = self.set(text)?;
        let names = set.params()?;
        let is_block = |m: &String| blocks.iter().any(|b| &b.id == m || &b.offset == m);
        if let Some(missing) = names.iter().find(|m| !is_block(m) && !values.iter().any(|(n, _)| n == m)) {
            return Err(Error::UnknownParam(missing.clone()));
        }
        let used: Vec<(&str, i64)> = values.iter().copied().filter(|(n, _)| names.iter().any(|m| m == n)).collect();
        let launch = ElementSet { isl: self, set: self.block_ranges(blocks)? }.fix_params(&used)?;
        let fixed = set.fix_params(&used)?;
        launch.subtract(fixed)?.is_empty()
    }

    /// The closed form of [`Isl::params_hold_for_blocks`] (of [`Isl::params_hold`] without
    /// blocks): the condition `text`, with the parameters of `fixed` it names fixed, for
    /// every block of each range of `blocks`, whose bounds are the parameters
    /// [`block_param`].
    pub fn closed_cond(&self, text: &str, fixed: &[(&str, i64)], blocks: &[BlockRange]) -> Result<ClosedCond> {
        self.bounded(|| {
            let set = self.set(text)?;
            let own = set.params()?;
            let fixed: Vec<(&str, i64)> = fixed.iter().copied().filter(|(n, _)| own.iter().any(|m| m == n)).collect();
            let set = set.fix_params(&fixed)?;
            if blocks.is_empty() {
                return closed::closed_cond(&set.set);
            }
            let range = self.set(&param_block_ranges_text(blocks))?;
            let names: Vec<String> = blocks.iter().flat_map(|b| [b.id.clone(), b.offset.clone()]).collect();
            // Every block of the ranges: no block in them where the condition fails.
            let holds = set.for_all_params(&names, Some(range))?;
            closed::closed_cond(&holds.set)
        })
    }

    /// `f` with ISL's operations bounded ([`HEURISTIC_OPERATIONS`]): past the bound ISL fails,
    /// quietly, and so does `f`.
    fn bounded<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.within(HEURISTIC_OPERATIONS, f).0
    }

    /// `f` with at most `operations` of ISL's operations (0: no bound), and whether it
    /// passed them: past the bound every ISL call fails, quietly, so `f` fails too, and its
    /// caller knows why. Nests: an inner bound restores the outer one (its count starting
    /// over, so an outer bound is per inner call at worst).
    pub fn within<T>(&self, operations: u64, f: impl FnOnce() -> T) -> (T, bool) {
        let on_error = isl::Options::get_on_error(&self.ctx).unwrap_or(ISL_ON_ERROR_WARN);
        let outer = self.ctx.get_max_operations();
        let _ = isl::Options::set_on_error(&self.ctx, ISL_ON_ERROR_CONTINUE);
        self.ctx.reset_operations();
        self.ctx.set_max_operations(operations);
        let out = f();
        // Whether the bound was passed: a call past it fails with ISL's quota error, which the
        // bindings clear as they report it, so one more call tells (and at the edge of the
        // bound counts as past it). The smallest that counts an operation: every allocation
        // does, and a value is one. Parsing a small set instead took 30-40% of a plan made
        // from closed forms (a Gaussian elimination's row on 8 devices: 8 parses a launch).
        let passed = operations > 0
            && isl::Val::int_from_si(&self.ctx, 0).err().is_some_and(|e| e.to_string().starts_with("[Quota]"));
        self.ctx.set_max_operations(outer);
        self.ctx.reset_operations();
        self.ctx.reset_error();
        let _ = isl::Options::set_on_error(&self.ctx, on_error);
        (out, passed)
    }

    /// The blocks of each range: `[id, offset, ...] -> { : offset = size * id and lo <= id < hi
    /// and ... }`, built without the parser (each launch's partitions are new bounds).
    fn block_ranges(&self, blocks: &[BlockRange]) -> Result<isl::Set> {
        let mut space = isl::Space::params_alloc(&self.ctx, 2 * blocks.len() as u32)?;
        for (k, b) in blocks.iter().enumerate() {
            space = space.set_dim_name(DimType::Param, 2 * k as u32, &b.id)?;
            space = space.set_dim_name(DimType::Param, 2 * k as u32 + 1, &b.offset)?;
        }
        let mut set = isl::Set::universe(space)?;
        let val = |v: i64| isl::Val::int_from_si(&self.ctx, v);
        for (k, b) in blocks.iter().enumerate() {
            let (id, offset) = (2 * k as u32, 2 * k as u32 + 1);
            set = set.lower_bound_val(DimType::Param, id, val(b.lo)?)?.upper_bound_val(
                DimType::Param,
                id,
                val(b.hi - 1)?,
            )?;
            let at = isl::LocalSpace::from_space(set.get_space()?)?;
            let c = isl::Constraint::alloc_equality(at)?
                .set_coefficient_si(DimType::Param, offset as i32, 1)?
                .set_coefficient_val(DimType::Param, id as i32, val(-b.size)?)?;
            set = set.add_constraint(c)?;
        }
        Ok(set)
    }

    /// The parameter constraint `[p...] -> { : p0 = v0 and ... }`, built without the parser:
    /// a launch's values are new text each time, and parsing them was a tenth of a plan's ISL
    /// work.
    fn param_values(&self, values: &[(&str, i64)]) -> Result<isl::Set> {
        let mut space = isl::Space::params_alloc(&self.ctx, values.len() as u32)?;
        for (i, (name, _)) in values.iter().enumerate() {
            space = space.set_dim_name(DimType::Param, i as u32, name)?;
        }
        let mut set = isl::Set::universe(space)?;
        for (i, (_, v)) in values.iter().enumerate() {
            set = set.fix_val(DimType::Param, i as u32, isl::Val::int_from_si(&self.ctx, *v)?)?;
        }
        Ok(set)
    }
}

impl<'i> AccessMap<'i> {
    /// Fixes parameters to values (others stay symbolic). Naming a parameter the map does not
    /// have is an error: it would silently change nothing.
    pub fn fix_params(self, values: &[(&str, i64)]) -> Result<AccessMap<'i>> {
        for (name, _) in values {
            if self.map.find_dim_by_name(DimType::Param, name)? < 0 {
                return Err(Error::UnknownParam(name.to_string()));
            }
        }
        let params = self.isl.param_values(values)?;
        Ok(AccessMap { isl: self.isl, map: self.map.intersect_params(params)? })
    }

    /// The accesses of every block of `blocks` together: the map's block parameters ranged over
    /// them and projected out (see [`BlockRange`]). Exact: each instance lies in exactly one
    /// block, whose parameter values the map then uses.
    pub fn over_blocks(self, blocks: &[BlockRange]) -> Result<AccessMap<'i>> {
        if blocks.is_empty() {
            return Ok(self);
        }
        let range = self.isl.block_ranges(blocks)?;
        let mut map = self.map.intersect_params(range)?;
        for name in blocks.iter().flat_map(|b| [&b.id, &b.offset]) {
            let pos = map.find_dim_by_name(DimType::Param, name)?;
            if pos >= 0 {
                map = map.project_out(DimType::Param, pos as u32, 1)?;
            }
        }
        Ok(AccessMap { isl: self.isl, map: map.coalesce()? })
    }

    /// Restricts the instances to the half-open box `lo..hi` (one bound per instance dimension):
    /// one device's partition of the grid.
    pub fn restrict_to_box(self, lo: &[i64], hi: &[i64]) -> Result<AccessMap<'i>> {
        let dims = self.map.dim(DimType::In)? as usize;
        if lo.len() != dims || hi.len() != dims {
            return Err(Error::Shape(format!("a box of {} dimensions for instances of {dims}", lo.len())));
        }
        let mut domain = isl::Set::universe(self.map.copy()?.domain()?.get_space()?)?;
        for d in 0..dims {
            let (l, h) = (to_i32(lo[d])?, to_i32(hi[d] - 1)?);
            domain = domain.lower_bound_si(DimType::Set, d as u32, l)?.upper_bound_si(DimType::Set, d as u32, h)?;
        }
        Ok(AccessMap { isl: self.isl, map: self.map.intersect_domain(domain)? })
    }

    /// The instances of `rounds` rounds of a grid-stride loop in dimension `d`, each with its
    /// round: round `k` is the box `lo..hi` moved `k × span` along `d`, and the map becomes
    /// `{ I[...] -> [k, elements...] }`, so that one range holds every round's elements apart
    /// (each round's own rows, without existential variables to enumerate).
    pub fn in_rounds(self, d: usize, lo: &[i64], hi: &[i64], span: i64, rounds: i64) -> Result<AccessMap<'i>> {
        let dims = self.map.dim(DimType::In)? as usize;
        if lo.len() != dims || hi.len() != dims || d >= dims {
            return Err(Error::Shape(format!("rounds of a box of {} dimensions for instances of {dims}", lo.len())));
        }
        let space = self.map.copy()?.domain()?.get_space()?;
        let name = space.get_tuple_name(DimType::Set).map(|n| n.to_string()).unwrap_or_default();
        let vars: Vec<String> = (0..dims).map(|j| format!("i{j}")).collect();
        let cons: Vec<String> = (0..dims)
            .map(|j| {
                if j == d {
                    format!("{} + {span}k <= i{j} < {} + {span}k", lo[j], hi[j])
                } else {
                    format!("{} <= i{j} < {}", lo[j], hi[j])
                }
            })
            .collect();
        let text = format!("{{ {name}[{}] -> [k] : 0 <= k < {rounds} and {} }}", vars.join(", "), cons.join(" and "));
        let rounds = isl::Map::read_from_str(&self.isl.ctx, &text)
            .map_err(|e| Error::Parse { text: text.clone(), message: e.to_string() })?;
        Ok(AccessMap { isl: self.isl, map: rounds.flat_range_product(self.map)?.coalesce()? })
    }

    /// Restricts the instances to a box whose bounds are the parameters `lo0 <= x0 < hi0`, ...
    /// (named by [`box_param`]) in the dimensions `boxed`: one range computed this way serves
    /// every partition, each fixing the bounds with [`ElementSet::fix_params`].
    pub fn restrict_to_param_box(self, boxed: &[usize]) -> Result<AccessMap<'i>> {
        let dims = self.map.dim(DimType::In)? as usize;
        if let Some(d) = boxed.iter().find(|&&d| d >= dims) {
            return Err(Error::Shape(format!("a box in dimension {d} of instances of {dims}")));
        }
        let names: Vec<String> = boxed.iter().flat_map(|&d| [box_param(d, false), box_param(d, true)]).collect();
        let vars: Vec<String> = (0..dims).map(|d| format!("i{d}")).collect();
        // Instances are never at negative coordinates (see `param_block_ranges_text`).
        let cons: Vec<String> =
            boxed.iter().map(|&d| format!("0 <= {} <= i{d} < {}", box_param(d, false), box_param(d, true))).collect();
        let text = format!(
            "[{}] -> {{ [{}] : {} }}",
            names.join(", "),
            vars.join(", "),
            if cons.is_empty() { "true".to_string() } else { cons.join(" and ") }
        );
        let domain = self.isl.parsed_set(&text)?;
        let space = self.map.copy()?.domain()?.get_space()?;
        let name = space.get_tuple_name(DimType::Set).ok().map(|n| n.to_string());
        let domain = match name {
            Some(n) if !n.is_empty() => domain.set_tuple_name(&n)?,
            _ => domain,
        };
        Ok(AccessMap { isl: self.isl, map: self.map.intersect_domain(domain)? })
    }

    /// The closed form of the elements this map reaches from a box of instances, with the
    /// parameters of `fixed` it names fixed: the box's bounds in the dimensions `boxed` ([`box_param`])
    /// and, for each range of `blocks`, the bounds of its blocks ([`block_param`]; the
    /// ranges' own `lo` and `hi` are not used) are parameters, with the map's others, so one
    /// computation serves every partition and every value of the scalars. A dimension whose
    /// blocks are ranged needs no box: its instances are those blocks'. ISL's work is bounded
    /// (a map it cannot summarise in time has no closed form). The form holds where the box
    /// and the blocks start at 0 or later, as instances and block ids do; elsewhere it may be
    /// wrong, and its callers ask ISL instead.
    pub fn closed_box(&self, fixed: &[(&str, i64)], blocks: &[BlockRange], boxed: &[usize]) -> Result<ClosedBox> {
        self.isl.bounded(|| {
            let own = self.params()?;
            let fixed: Vec<(&str, i64)> = fixed.iter().copied().filter(|(n, _)| own.iter().any(|m| m == n)).collect();
            let mut map = self.copy()?.fix_params(&fixed)?.map;
            if !blocks.is_empty() {
                let text = param_block_ranges_text(blocks);
                let range = isl::Set::read_from_str(&self.isl.ctx, &text)
                    .map_err(|e| Error::Parse { text: text.clone(), message: e.to_string() })?;
                map = map.intersect_params(range)?;
                for name in blocks.iter().flat_map(|b| [&b.id, &b.offset]) {
                    let pos = map.find_dim_by_name(DimType::Param, name)?;
                    if pos >= 0 {
                        map = map.project_out(DimType::Param, pos as u32, 1)?;
                    }
                }
            }
            let boxed = AccessMap { isl: self.isl, map }.restrict_to_param_box(boxed)?;
            closed::closed_box(&boxed.map.range()?.coalesce()?)
        })
    }

    /// Whether the elements this map relates to each instance are related by `other` to that
    /// instance alone (no two distinct instances meet at an element): with `other` the same
    /// write map, no element is written twice; with a read map, no instance reads what another
    /// writes.
    pub fn meets_only_itself(&self, other: &AccessMap<'_>) -> Result<bool> {
        let pairs = self.map.copy()?.apply_range(other.map.copy()?.reverse()?)?;
        let same = isl::Map::identity(pairs.get_space()?)?;
        Ok(pairs.subtract(same)?.is_empty()?)
    }

    /// One past the largest value of instance dimension `d` the map relates to an element,
    /// `None` when it relates none; [`Error::Unbounded`] when there is no largest (parameters
    /// must be fixed). A grid-stride loop's iterations end there (`dashdb::RuntimeBlock`).
    pub fn domain_end(&self, d: usize) -> Result<Option<i64>> {
        let domain = ElementSet { isl: self.isl, set: self.map.copy()?.domain()? };
        if domain.is_empty()? {
            return Ok(None);
        }
        let max = domain.set.copy()?.dim_max_val(d as i32)?;
        Ok(Some(int(max, &domain)? + 1))
    }

    /// The elements accessed.
    pub fn range(self) -> Result<ElementSet<'i>> {
        Ok(ElementSet { isl: self.isl, set: self.map.range()?.coalesce()? })
    }

    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.map.is_empty()?)
    }

    pub fn to_text(&self) -> Result<String> {
        Ok(self.map.to_str()?.to_string())
    }

    pub fn copy(&self) -> Result<AccessMap<'i>> {
        Ok(AccessMap { isl: self.isl, map: self.map.copy()? })
    }

    /// Keeps the pairs whose input is in `domain`.
    pub fn intersect_domain(self, domain: ElementSet<'i>) -> Result<AccessMap<'i>> {
        Ok(AccessMap { isl: self.isl, map: self.map.intersect_domain(domain.set)? })
    }

    /// Keeps the pairs whose parameters are in `context` (a parameter set).
    pub fn intersect_params(self, context: ElementSet<'i>) -> Result<AccessMap<'i>> {
        Ok(AccessMap { isl: self.isl, map: self.map.intersect_params(context.set)? })
    }

    /// `{ f(i) -> a : i -> a in self }`: the same accesses seen from the inputs `f` maps to.
    pub fn apply_domain(self, f: AccessMap<'i>) -> Result<AccessMap<'i>> {
        Ok(AccessMap { isl: self.isl, map: self.map.apply_domain(f.map)?.coalesce()? })
    }

    pub fn union(self, other: AccessMap<'i>) -> Result<AccessMap<'i>> {
        Ok(AccessMap { isl: self.isl, map: self.map.union(other.map)?.coalesce()? })
    }

    /// The map without the parameters it does not constrain.
    pub fn drop_unused_params(self) -> Result<AccessMap<'i>> {
        Ok(AccessMap { isl: self.isl, map: self.map.drop_unused_params()? })
    }

    /// `{ i -> f(a) : i -> a in self }`: the same accesses with their elements renamed by `f`.
    pub fn apply_range(self, f: AccessMap<'i>) -> Result<AccessMap<'i>> {
        Ok(AccessMap { isl: self.isl, map: self.map.apply_range(f.map)?.coalesce()? })
    }

    /// Keeps the pairs whose output is in `range`.
    pub fn intersect_range(self, range: ElementSet<'i>) -> Result<AccessMap<'i>> {
        Ok(AccessMap { isl: self.isl, map: self.map.intersect_range(range.set)? })
    }

    /// The parameter values for which the map has some pair.
    pub fn params_set(self) -> Result<ElementSet<'i>> {
        Ok(ElementSet { isl: self.isl, set: self.map.params()?.coalesce()? })
    }

    /// Simplifies the constraints under what is known of the parameters.
    pub fn gist_params(self, context: ElementSet<'i>) -> Result<AccessMap<'i>> {
        Ok(AccessMap { isl: self.isl, map: self.map.gist_params(context.set)?.coalesce()? })
    }

    /// Names the input tuple and its dimensions, and the output tuple.
    pub fn named(self, input: &str, dims: &[&str], output: &str) -> Result<AccessMap<'i>> {
        let mut map = self.map.set_tuple_name(DimType::In, input)?.set_tuple_name(DimType::Out, output)?;
        for (d, name) in dims.iter().enumerate() {
            map = map.set_dim_name(DimType::In, d as u32, name)?;
        }
        Ok(AccessMap { isl: self.isl, map })
    }

    /// The parameter names, in the map's order.
    pub fn params(&self) -> Result<Vec<String>> {
        let n = self.map.dim(DimType::Param)?;
        (0..n).map(|d| Ok(self.map.get_dim_name(DimType::Param, d as u32)?.to_string())).collect()
    }

    /// Forgets what the map says about parameter `name`: the result holds every pair that
    /// some value of it gives (an over-approximation when the map depends on it).
    pub fn project_out_param(self, name: &str) -> Result<AccessMap<'i>> {
        let pos = self.map.find_dim_by_name(DimType::Param, name)?;
        if pos < 0 {
            return Ok(self);
        }
        let map = self.map.project_out(DimType::Param, pos as u32, 1)?.coalesce()?;
        Ok(AccessMap { isl: self.isl, map })
    }

    /// Whether the parameter `name` matters to the map.
    pub fn involves_param(&self, name: &str) -> Result<bool> {
        let pos = self.map.find_dim_by_name(DimType::Param, name)?;
        Ok(pos >= 0 && self.map.involves_dims(DimType::Param, pos as u32, 1)?)
    }

    /// Whether distinct inputs never reach the same output (for every parameter value).
    pub fn is_injective(&self) -> Result<bool> {
        Ok(self.map.is_injective()?)
    }

    /// The parameter values for which two distinct inputs reach the same output: where the
    /// map is not injective (a write map: where instances would write the same element).
    pub fn collisions(&self) -> Result<ElementSet<'i>> {
        let shared = self.map.copy()?.apply_range(self.map.copy()?.reverse()?)?;
        let same = isl::Map::identity(shared.get_space()?)?;
        Ok(ElementSet { isl: self.isl, set: shared.subtract(same)?.params()?.coalesce()? })
    }

    /// Whether every input reaches at most one output (for every parameter value).
    pub fn is_single_valued(&self) -> Result<bool> {
        Ok(self.map.is_single_valued()?)
    }

    /// Whether the range is bounded in every dimension for fixed parameters (no dimension can
    /// grow without limit): false for Polly's over-approximation of a data-dependent index.
    pub fn has_bounded_range(&self) -> Result<bool> {
        Ok(self.map.copy()?.range()?.is_bounded()?)
    }

    pub fn is_equal(&self, other: &AccessMap<'_>) -> Result<bool> {
        Ok(self.map.is_equal(&other.map)?)
    }

    pub fn input_dims(&self) -> Result<usize> {
        Ok(self.map.dim(DimType::In)? as usize)
    }

    pub fn output_dims(&self) -> Result<usize> {
        Ok(self.map.dim(DimType::Out)? as usize)
    }

    /// The strides of a one-dimensional (linearized) index: the magnitudes above 1 of the
    /// coefficients that the index's defining equalities give the instance dimensions,
    /// parameters and local variables. `float A[150][120][128]` indexed as
    /// `A[15360 z + 128 y + x]` gives `[128, 15360]`. Empty for a map of several outputs.
    pub fn index_strides(&self) -> Result<Vec<i64>> {
        let mut strides = Vec::new();
        if self.output_dims()? != 1 {
            return Ok(strides);
        }
        let list = self.map.get_basic_map_list()?;
        for b in 0..list.size()? {
            let piece = list.get_at(b)?;
            let constraints = piece.get_constraint_list()?;
            for c in 0..constraints.size()? {
                let c = constraints.get_at(c)?;
                let out = c.get_coefficient_val(DimType::Out, 0)?.get_num_si()?;
                if out == 0 || !c.is_equality()? {
                    continue;
                }
                for kind in [DimType::In, DimType::Param, DimType::Div] {
                    for d in 0..piece.dim(kind)? {
                        let v = c.get_coefficient_val(kind, d)?.get_num_si()?;
                        if v % out == 0 && (v / out).abs() > 1 {
                            strides.push((v / out).abs());
                        }
                    }
                }
            }
        }
        strides.sort_unstable();
        strides.dedup();
        Ok(strides)
    }

    /// The same accesses with the one-dimensional index seen as coordinates of an array whose
    /// inner extents are `inner` (outermost first; the outermost extent stays unbounded):
    /// index `i` becomes `[o0, .., ok]` with `i = sum oj * stride j` and every inner `oj` in
    /// `0..extent`. Exact for any extents, since that correspondence is a bijection of the
    /// integers; it makes strided pieces into boxes when the extents match the code's strides.
    pub fn delinearize(self, inner: &[i64]) -> Result<AccessMap<'i>> {
        let name = self.map.get_tuple_name(DimType::Out)?.to_string();
        let k = inner.len();
        let vars: Vec<String> = (0..=k).map(|d| format!("o{d}")).collect();
        let mut stride = 1i64;
        let mut terms = Vec::new();
        let mut bounds = Vec::new();
        for d in (0..=k).rev() {
            terms.push(format!("{stride}{}", vars[d]));
            if d > 0 {
                bounds.push(format!("0 <= {} < {}", vars[d], inner[d - 1]));
                stride = stride.checked_mul(inner[d - 1]).ok_or_else(|| Error::Shape("extents overflow".into()))?;
            }
        }
        let text = format!(
            "{{ {name}[i] -> {name}[{}] : i = {}{}{} }}",
            vars.join(", "),
            terms.join(" + "),
            if bounds.is_empty() { "" } else { " and " },
            bounds.join(" and ")
        );
        let f = isl::Map::read_from_str(&self.isl.ctx, &text)
            .map_err(|e| Error::Parse { text: text.clone(), message: e.to_string() })?;
        let map = self.map.apply_range(f)?.detect_equalities()?.remove_redundancies()?.coalesce()?;
        Ok(AccessMap { isl: self.isl, map })
    }

    /// How many local (existentially quantified) variables the map's pieces hold in all.
    pub fn local_vars(&self) -> Result<usize> {
        let list = self.map.get_basic_map_list()?;
        let mut n = 0;
        for b in 0..list.size()? {
            n += list.get_at(b)?.dim(DimType::Div)? as usize;
        }
        Ok(n)
    }

    /// The outermost output dimension that changes when input dimension `d` steps by one
    /// (between two inputs of the domain), `None` when none does. The split heuristic: the
    /// further out that dimension, the larger the stride a step in `d` makes.
    pub fn outermost_moved(&self, d: usize) -> Result<Option<usize>> {
        let n = self.input_dims()?;
        let out = self.output_dims()?;
        let vars: Vec<String> = (0..n).map(|i| format!("i{i}")).collect();
        let stepped: Vec<String> =
            vars.iter().enumerate().map(|(i, v)| if i == d { format!("{v} + 1") } else { v.clone() }).collect();
        let shift = format!("{{ [{}] -> [{}] }}", vars.join(", "), stepped.join(", "));
        let shift = isl::Map::read_from_str(&self.isl.ctx, &shift)
            .map_err(|e| Error::Parse { text: shift.clone(), message: e.to_string() })?;
        let anon =
            |m: isl::Map| -> Result<isl::Map> { Ok(m.reset_tuple_id(DimType::In)?.reset_tuple_id(DimType::Out)?) };
        let m = anon(self.map.copy()?)?;
        // A heuristic, so it may give up: on maps with many integer divisions (PolyBench's
        // 3-D convolution, `A[(i - 1) * (NK * NJ) + (j - 1) * NK + (k - 1)]` over 8 pieces)
        // the subtraction below ran for hours. Past a budget of operations ISL fails, and so
        // does this: the caller then ranks the dimension as moving nothing.
        self.isl.bounded(|| {
            // { a -> a' : exists i: i -> a and i + e_d -> a' }. Over a map of many pieces
            // (a kernel writing 200 rows of one array, HeCBench s3d), pairs of pieces are their
            // square: then only steps within each piece are asked (a heuristic may look at
            // less), which took a second where the pairs took ten.
            let pieces = m.n_basic_map()?;
            let deltas = if pieces > 8 {
                let list = m.get_basic_map_list()?;
                let mut all: Option<isl::Set> = None;
                for b in 0..list.size()? {
                    let one = isl::Map::from_basic_map(list.get_at(b)?)?;
                    let d = one.copy()?.reverse()?.apply_range(shift.copy()?.apply_range(one)?)?.deltas()?;
                    all = Some(match all {
                        Some(a) => a.union(d)?,
                        None => d,
                    });
                }
                match all {
                    Some(a) => a,
                    None => return Ok(None),
                }
            } else {
                m.copy()?.reverse()?.apply_range(shift.apply_range(m)?)?.deltas()?
            };
            // A step moves output `k` when some delta has `k` nonzero: at least 1 or at most -1
            // (integers). Asked as two half-spaces, not as the deltas minus those with `k`
            // zero: a subtraction first makes every integer division explicit, which took 70%
            // of analysing `in[(i / 20) % 30]` (3.8 s) and over 20 s with two such terms.
            for k in 0..out {
                let moved = |up: bool| -> Result<bool> {
                    let half = if up {
                        deltas.copy()?.lower_bound_si(DimType::Set, k as u32, 1)?
                    } else {
                        deltas.copy()?.upper_bound_si(DimType::Set, k as u32, -1)?
                    };
                    Ok(!half.is_empty()?)
                };
                if moved(true)? || moved(false)? {
                    return Ok(Some(k));
                }
            }
            Ok(None)
        })
    }
}

/// The parameter bounding instance dimension `d` of a box from below (inclusive) or above
/// (exclusive) in [`AccessMap::restrict_to_param_box`].
pub fn box_param(d: usize, upper: bool) -> String {
    format!("hpvm_{}{d}", if upper { "hi" } else { "lo" })
}

fn to_i32(v: i64) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::Shape(format!("{v} does not fit ISL's 32-bit bound")))
}

impl<'i> ElementSet<'i> {
    fn wrap(&self, set: isl::Set) -> ElementSet<'i> {
        ElementSet { isl: self.isl, set }
    }

    pub fn copy(&self) -> Result<ElementSet<'i>> {
        Ok(self.wrap(self.set.copy()?))
    }

    pub fn union(self, other: ElementSet<'i>) -> Result<ElementSet<'i>> {
        let isl = self.isl;
        Ok(ElementSet { isl, set: self.set.union(other.set)?.coalesce()? })
    }

    pub fn intersect(self, other: ElementSet<'i>) -> Result<ElementSet<'i>> {
        let isl = self.isl;
        Ok(ElementSet { isl, set: self.set.intersect(other.set)?.coalesce()? })
    }

    pub fn subtract(self, other: ElementSet<'i>) -> Result<ElementSet<'i>> {
        let isl = self.isl;
        Ok(ElementSet { isl, set: self.set.subtract(other.set)?.coalesce()? })
    }

    /// Keeps the elements whose parameters are in `context` (a parameter set).
    pub fn intersect_params(self, context: ElementSet<'i>) -> Result<ElementSet<'i>> {
        let isl = self.isl;
        Ok(ElementSet { isl, set: self.set.intersect_params(context.set.params()?)?.coalesce()? })
    }

    /// The parameter values for which the set has some element.
    pub fn params_of(self) -> Result<ElementSet<'i>> {
        let isl = self.isl;
        Ok(ElementSet { isl, set: self.set.params()?.coalesce()? })
    }

    /// The set without the parameters it does not constrain.
    pub fn drop_unused_params(self) -> Result<ElementSet<'i>> {
        let isl = self.isl;
        Ok(ElementSet { isl, set: self.set.drop_unused_params()? })
    }

    /// The values of the other parameters for which the set holds whatever values the
    /// parameters `names` take within `range` (a parameter set; all values without one):
    /// `not exists names in range: not set`. Stricter than forgetting them, as a condition
    /// must be where nobody can give their values.
    pub fn for_all_params(self, names: &[String], range: Option<ElementSet<'i>>) -> Result<ElementSet<'i>> {
        let isl = self.isl;
        let mut bad = self.set.complement()?;
        if let Some(r) = range {
            bad = bad.intersect_params(r.set.params()?)?;
        }
        for n in names {
            let pos = bad.find_dim_by_name(DimType::Param, n)?;
            if pos >= 0 {
                bad = bad.project_out(DimType::Param, pos as u32, 1)?;
            }
        }
        Ok(ElementSet { isl, set: bad.coalesce()?.complement()?.coalesce()? })
    }

    /// The set with the parameters `names` forgotten: every value of the others that some
    /// values of them give.
    pub fn project_out_params(self, names: &[String]) -> Result<ElementSet<'i>> {
        let isl = self.isl;
        let mut set = self.set;
        for n in names {
            let pos = set.find_dim_by_name(DimType::Param, n)?;
            if pos >= 0 {
                set = set.project_out(DimType::Param, pos as u32, 1)?;
            }
        }
        Ok(ElementSet { isl, set: set.coalesce()? })
    }

    /// Everything (of the same space) not in the set.
    pub fn complement(self) -> Result<ElementSet<'i>> {
        let isl = self.isl;
        Ok(ElementSet { isl, set: self.set.complement()?.coalesce()? })
    }

    /// The set with its local (existential) variables dropped with the constraints that
    /// involve them: a superset, simpler to state.
    pub fn remove_divs(self) -> Result<ElementSet<'i>> {
        let isl = self.isl;
        Ok(ElementSet { isl, set: self.set.remove_divs()?.coalesce()? })
    }

    pub fn fix_params(self, values: &[(&str, i64)]) -> Result<ElementSet<'i>> {
        let params = self.isl.param_values(values)?;
        let isl = self.isl;
        Ok(ElementSet { isl, set: self.set.intersect_params(params)? })
    }

    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.set.is_empty()?)
    }

    pub fn is_subset(&self, other: &ElementSet<'_>) -> Result<bool> {
        Ok(self.set.is_subset(&other.set)?)
    }

    pub fn is_equal(&self, other: &ElementSet<'_>) -> Result<bool> {
        Ok(self.set.is_equal(&other.set)?)
    }

    pub fn dims(&self) -> Result<usize> {
        Ok(self.set.dim(DimType::Set)? as usize)
    }

    pub fn to_text(&self) -> Result<String> {
        Ok(self.set.to_str()?.to_string())
    }

    /// How many local (existentially quantified) variables the set's pieces hold in all: 0
    /// for a union of plain polyhedra, which list fastest.
    pub fn local_vars(&self) -> Result<usize> {
        let list = self.set.get_basic_set_list()?;
        let mut n = 0;
        for b in 0..list.size()? {
            n += list.get_at(b)?.dim(DimType::Div)? as usize;
        }
        Ok(n)
    }

    /// Simplifies the constraints under what `context` (a parameter set) already says.
    pub fn gist_params(self, context: ElementSet<'i>) -> Result<ElementSet<'i>> {
        let isl = self.isl;
        Ok(ElementSet { isl, set: self.set.gist_params(context.set)?.coalesce()? })
    }

    /// The parameter names, in the set's order.
    pub fn params(&self) -> Result<Vec<String>> {
        let n = self.set.dim(DimType::Param)?;
        (0..n).map(|d| Ok(self.set.get_dim_name(DimType::Param, d as u32)?.to_string())).collect()
    }

    /// Whether the set has no constraints at all (as written, after coalescing).
    pub fn is_universe(&self) -> Result<bool> {
        Ok(self.set.plain_is_universe()?)
    }

    /// Whether the element with coordinates `point` is in the set (all parameters fixed).
    pub fn contains(&self, point: &[i64]) -> Result<bool> {
        let mut s = self.set.copy()?;
        for (d, &v) in point.iter().enumerate() {
            s = s.fix_si(DimType::Set, d as u32, to_i32(v)?)?;
        }
        Ok(!s.is_empty()?)
    }

    /// The set as maximal contiguous runs of linear offsets into an array of `shape`
    /// (row-major, one extent per set dimension; the outermost extent is not needed).
    pub fn runs(&self, shape: &[i64]) -> Result<Vec<Run>> {
        Ok(intervals::runs_of(&self.rectangles(shape)?))
    }

    /// The set as rectangles of the array seen as rows of its innermost extent.
    pub fn rectangles(&self, shape: &[i64]) -> Result<Vec<Rect>> {
        intervals::rectangles(self, shape)
    }
}

/// The integer value of `v`, which must be a constant (the set bounded, parameters fixed).
fn int(v: isl::Val, what: &ElementSet<'_>) -> Result<i64> {
    if !v.is_int()? {
        return Err(Error::Unbounded(what.to_text().unwrap_or_default()));
    }
    Ok(v.get_num_si()?)
}

/// Bounds of set dimension `d`: inclusive min and max.
fn bounds(s: &ElementSet<'_>, d: usize) -> Result<(i64, i64)> {
    let min = int(s.set.copy()?.dim_min_val(d as i32)?, s)?;
    let max = int(s.set.copy()?.dim_max_val(d as i32)?, s)?;
    Ok((min, max))
}

/// The disjoint convex pieces of a set.
fn pieces<'i>(s: &ElementSet<'i>) -> Result<Vec<ElementSet<'i>>> {
    let disjoint = s.set.copy()?.make_disjoint()?;
    let list = disjoint.get_basic_set_list()?;
    let n = list.size()?;
    (0..n).map(|i| Ok(s.wrap(list.get_at(i)?.to_set()?))).collect()
}

/// The set with dimension `d` fixed to `v`.
fn fix(s: &ElementSet<'_>, d: usize, v: i64) -> Result<isl::Set> {
    Ok(s.set.copy()?.fix_si(DimType::Set, d as u32, to_i32(v)?)?)
}

/// Whether a convex set is exactly the box of its bounds.
fn is_box(s: &ElementSet<'_>, b: &[(i64, i64)]) -> Result<bool> {
    let mut boxed = isl::Set::universe(s.set.get_space()?)?;
    for (d, &(lo, hi)) in b.iter().enumerate() {
        boxed = boxed.lower_bound_si(DimType::Set, d as u32, to_i32(lo)?)?.upper_bound_si(
            DimType::Set,
            d as u32,
            to_i32(hi)?,
        )?;
    }
    // Under the same parameter values as the set (they are fixed by constraints).
    let boxed = boxed.intersect_params(s.set.copy()?.params()?)?;
    Ok(boxed.is_subset(&s.set)?)
}

#[cfg(test)]
mod tests;
