//! From Polly's statements to a node's access maps: each access relation (statement
//! iterations -> array elements), restricted to its statement's domain, is seen from the
//! node's global instance coordinates (the wrapper loops combined as the GPU does), united
//! per argument and coalesced (the thesis's section 3.4.2), and classified.

use crate::polly::{AccessKind, Scops};
use crate::wrap::{Coords, Wrapper, BLOCK_OFFSETS, COORD_NAMES};
use dashdb::{ReadKind, WriteKind};
use isl_glue::{AccessMap, Isl};

/// What the analysis knows of one argument's accesses.
#[derive(Debug)]
pub struct ArgAccesses {
    pub read: ReadKind,
    pub write: WriteKind,
    pub read_map: Option<String>,
    pub write_map: Option<String>,
    /// Why reads or writes are not exact, for people: (message, location).
    pub notes: Vec<(String, String)>,
    pub element_size: u32,
    pub element_type: Option<String>,
    /// Extents outermost first; the outermost is `*`.
    pub shape: Vec<String>,
    /// For an [`WriteKind::Indirect`] write: where its indices come from.
    pub through: Option<Through>,
    /// The in-bounds conditions of the reads (`bounds.rs`): the read map holds where all do.
    pub read_in_bounds: Vec<String>,
}

/// The indices of an indirect write (`dashdb::Through`), the index argument by name.
#[derive(Clone, Debug)]
pub struct Through {
    /// The wrapper parameter the indices are read from.
    pub arg: String,
    /// From the instance to the elements of `arg` read (one per write): exact.
    pub map: String,
    pub bits: u32,
    pub signed: bool,
    pub scale: u32,
    pub offset: i64,
    pub every: bool,
    /// `file:line` of the write.
    pub location: String,
}

impl Default for ArgAccesses {
    fn default() -> Self {
        ArgAccesses {
            read: ReadKind::None,
            write: WriteKind::None,
            read_map: None,
            write_map: None,
            notes: vec![],
            element_size: 0,
            element_type: None,
            shape: vec!["*".into()],
            through: None,
            read_in_bounds: vec![],
        }
    }
}

fn worse_read(a: ReadKind, b: ReadKind) -> ReadKind {
    let rank = |k| match k {
        ReadKind::None => 0,
        ReadKind::Exact => 1,
        ReadKind::OverApproximated => 2,
        ReadKind::DataDependent => 3,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

fn worse_write(a: WriteKind, b: WriteKind) -> WriteKind {
    let rank = |k| match k {
        WriteKind::None => 0,
        WriteKind::Exact => 1,
        WriteKind::May => 2,
        WriteKind::Indirect => 3,
        // Never the maps' own finding (`reduction_of` decides it over them).
        WriteKind::Reduce => 3,
        // Never the maps' own finding either (`merged_writes` decides it over the node).
        WriteKind::Merged => 3,
        WriteKind::Unanalysable => 4,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

/// `[N] -> { [] -> [(N)] }` → `N`; anything else is returned as it is.
pub(crate) fn size_expr(pw_aff: &str) -> String {
    match (pw_aff.find("[] -> [("), pw_aff.rfind(")] }")) {
        (Some(a), Some(b)) if a + 8 <= b => pw_aff[a + 8..b].trim().to_string(),
        _ => pw_aff.to_string(),
    }
}

/// The map from statement `stmt` (with the loops `loops`) to global coordinates, as text;
/// `None` when the statement is not inside all the wrapper loops in their order.
fn to_instances(stmt: &str, loops: &[String], w: &Wrapper<'_>) -> Option<String> {
    if loops.len() < w.loops.len() || loops.iter().zip(&w.loops).any(|(l, (tag, _, _))| l != tag) {
        return None;
    }
    let vars: Vec<String> = (0..loops.len()).map(|i| format!("i{i}")).collect();
    let var =
        |level: usize, d: usize| w.loops.iter().position(|(_, l, dd)| *l == level && *dd == d).map(|i| vars[i].clone());
    let coords: Vec<String> = (0..w.dims)
        .map(|d| match &w.coords {
            Coords::Instances => var(0, d).unwrap_or_else(|| "0".into()),
            Coords::Blocks { block } if block.get(d).is_some_and(|b| b.is_none()) => match var(0, d) {
                Some(t) => format!("{} + {t}", BLOCK_OFFSETS[d]),
                None => BLOCK_OFFSETS[d].to_string(),
            },
            Coords::Blocks { block } => {
                let b = var(1, d).map(|b| format!("{} * {b}", block.get(d).copied().flatten().unwrap_or(1)));
                let t = var(0, d);
                match (b, t) {
                    (Some(b), Some(t)) => format!("{b} + {t}"),
                    (Some(b), None) => b,
                    (None, Some(t)) => t,
                    (None, None) => "0".into(),
                }
            }
        })
        .collect();
    let offsets: Vec<&str> = w.runtime_blocks().into_iter().map(|d| BLOCK_OFFSETS[d]).collect();
    Some(format!("[{}] -> {{ {stmt}[{}] -> I[{}] }}", offsets.join(", "), vars.join(", "), coords.join(", ")))
}

/// The accesses of the wrapper's pointer parameter `name`; messages call it `shown` (the
/// source's name, which the analysis may have renamed to keep it apart from ISL's words).
/// `wrapping`: where 32-bit unsigned index arithmetic was left narrow (see
/// [`crate::widen::Narrowing`]), for the reason given when such an index is not affine.
pub fn accesses_of(
    isl: &Isl,
    scops: &Scops,
    w: &Wrapper<'_>,
    name: &str,
    shown: &str,
    wrapping: &[String],
) -> ArgAccesses {
    let param = name;
    let mut a = ArgAccesses::default();
    let arrays: Vec<&crate::polly::Array> = scops.arrays.iter().filter(|x| x.base == param).collect();
    for u in scops.unmodeled.iter().filter(|u| u.base == param) {
        use crate::polly::Unmodelable;
        if u.kind == "write" {
            a.write = WriteKind::Unanalysable;
            let why = match u.why {
                Unmodelable::Atomic => format!("`{shown}` is updated atomically"),
                Unmodelable::DataDependent => format!("`{shown}` is written at a data-dependent index"),
                Unmodelable::Shape => format!(
                    "`{shown}` is written at an index, or under a condition, that is not affine in the thread's \
                     coordinates and the kernel's scalars"
                ),
            };
            a.notes.push((why, u.location.clone()));
        } else {
            a.read = ReadKind::DataDependent;
            let why = match u.why {
                Unmodelable::DataDependent => "at a data-dependent index",
                _ => "at an index, or under a condition, that is not affine in the thread's coordinates",
            };
            a.notes.push((format!("reads `{shown}` {why}: the whole array is assumed read"), u.location.clone()));
        }
    }
    if arrays.len() > 1 {
        a.read = ReadKind::DataDependent;
        a.write = WriteKind::Unanalysable;
        a.notes.push((format!("`{shown}` is accessed as arrays of different element types or shapes"), "?".into()));
        return a;
    }
    let Some(array) = arrays.first() else { return a };
    a.element_size = array.element_size;
    a.element_type = Some(array.element_type.clone());
    a.shape = array.sizes.iter().map(|s| s.as_deref().map_or("*".into(), size_expr)).collect();
    let dims: Vec<&str> = COORD_NAMES[..w.dims].to_vec();
    let known = |p: &String| w.params.contains(p) || scops.products.iter().any(|(n, _)| n == p);
    let mut reads: Option<AccessMap> = None;
    let mut writes: Option<AccessMap> = None;
    // United once all are in (`unite`).
    let (mut read_maps, mut write_maps) = (Vec::new(), Vec::new());
    // Once ISL fails to unite, the union so far is incomplete: drop it, assume the worst.
    let (mut read_broken, mut write_broken) = (false, false);
    for acc in scops.accesses.iter().filter(|x| x.relation.contains(&format!("-> {}[", array.name))) {
        let Some(stmt) = scops.statements.iter().find(|s| s.name == acc.statement) else { continue };
        let is_read = acc.kind == AccessKind::Read;
        let map = to_instances(&stmt.name, &stmt.loops, w)
            .ok_or_else(|| "it cannot be tied to the thread that runs it".to_string())
            .and_then(|t| -> Result<AccessMap, String> {
                let e = |e: isl_glue::Error| e.to_string();
                let rel = isl.map(&acc.relation).map_err(e)?;
                let dom = isl.set(&stmt.domain).map_err(e)?;
                let t = isl.map(&t).map_err(e)?;
                let m = rel.intersect_domain(dom).map_err(e)?.apply_domain(t).map_err(e)?;
                m.named("I", &dims, name).map_err(e)
            });
        let mut map = match map {
            Ok(m) => m,
            Err(why) => {
                if is_read {
                    a.read = ReadKind::DataDependent;
                    a.notes.push((
                        format!("reads `{shown}` entirely: the analysis cannot follow this read ({why})"),
                        acc.location.clone(),
                    ));
                } else {
                    a.write = WriteKind::Unanalysable;
                    a.notes.push((
                        format!("`{shown}` is written where the analysis cannot follow the write ({why})"),
                        acc.location.clone(),
                    ));
                }
                continue;
            }
        };
        // Parameters that are not the node's (a value Polly found invariant, e.g. loaded once):
        // the runtime cannot fix them. Reads forget them (over-approximation); writes cannot.
        let foreign: Vec<String> = map.params().unwrap_or_default().into_iter().filter(|p| !known(p)).collect();
        let mut over = false;
        for p in &foreign {
            over |= map.involves_param(p).unwrap_or(true);
            map = match map.copy().and_then(|m| m.project_out_param(p)) {
                Ok(m) => m,
                Err(_) => {
                    over = true;
                    map
                }
            };
        }
        if is_read {
            let kind = if !acc.affine {
                a.notes.push((
                    format!("reads `{shown}` at an index that depends on a loaded value"),
                    acc.location.clone(),
                ));
                ReadKind::DataDependent
            } else if acc.approximate {
                a.notes.push((
                    format!("reads of `{shown}` are over-approximated (a loop that may stop early is taken to run to its end)"),
                    acc.location.clone(),
                ));
                ReadKind::OverApproximated
            } else if acc.loosened {
                a.notes.push((
                    format!(
                        "reads of `{shown}` are over-approximated (every thread of the block is taken to read what \
                         one thread reads under a test of its thread index)"
                    ),
                    acc.location.clone(),
                ));
                ReadKind::OverApproximated
            } else if stmt.region || over {
                a.notes.push((
                    format!("reads of `{shown}` are over-approximated (under a condition or bound the analysis cannot express)"),
                    acc.location.clone(),
                ));
                ReadKind::OverApproximated
            } else {
                ReadKind::Exact
            };
            a.read = worse_read(a.read, kind);
            a.read_in_bounds.extend(acc.in_bounds.iter().cloned());
            read_maps.push(map);
        } else {
            if !acc.affine {
                // The one shape of data-dependent write the runtime can still split: its
                // indices read from another argument (an inspector reads them at the launch).
                let t = match &acc.through {
                    Some(t) => through(isl, scops, w, stmt, t, &dims, &known),
                    None => Err(Later(acc.through_later)),
                };
                let later = matches!(t, Err(Later(true)));
                let t = t.ok().map(|t| Through { location: acc.location.clone(), ..t });
                // A second write through the same indices (the two branches of a full and a
                // partial tile) adds its places: one inspector reads them all.
                let t = match (t, &a.through) {
                    (Some(t), Some(prev)) => same_indices(isl, prev, &t).map(|map| Through {
                        map,
                        every: prev.every && t.every,
                        location: prev.location.clone(),
                        ..t
                    }),
                    (t, _) => t,
                };
                match t {
                    Some(t) => {
                        a.through = Some(t);
                        a.write = worse_write(a.write, WriteKind::Indirect);
                    }
                    _ if acc.data_dependent && later => {
                        // Worded so that `wants_values` takes it: the launch's values may
                        // make the place affine, and the write an indirect one.
                        a.notes.push((
                            format!(
                                "`{shown}` is written at an index read from memory at a place that is not affine \
                                 (it multiplies run-time values)"
                            ),
                            acc.location.clone(),
                        ));
                        a.write = WriteKind::Unanalysable;
                    }
                    _ if acc.data_dependent => {
                        a.notes.push((format!("`{shown}` is written at a data-dependent index"), acc.location.clone()));
                        a.write = WriteKind::Unanalysable;
                    }
                    _ if wrapping.contains(&acc.location) => {
                        a.notes.push((
                            format!(
                                "`{shown}` is written at an index computed in 32-bit `unsigned` arithmetic that may \
                                 wrap around (a subtraction no guard keeps from going below zero, or a value the \
                                 analysis cannot bound); computing it in a 64-bit type (`long`, `size_t`) or in `int` makes it affine"
                            ),
                            acc.location.clone(),
                        ));
                        a.write = WriteKind::Unanalysable;
                    }
                    _ => {
                        a.notes.push((
                            format!(
                                "`{shown}` is written at an index that is not affine (it multiplies run-time values, \
                                 as a grid-stride loop's step does)"
                            ),
                            acc.location.clone(),
                        ));
                        a.write = WriteKind::Unanalysable;
                    }
                }
                continue;
            }
            let kind = if acc.kind == AccessKind::MayWrite || stmt.region || over {
                a.notes.push((
                    format!("`{shown}` may or may not be written (under a condition the analysis cannot express)"),
                    acc.location.clone(),
                ));
                WriteKind::May
            } else {
                WriteKind::Exact
            };
            a.write = worse_write(a.write, kind);
            write_maps.push(map);
        }
    }
    match unite(read_maps) {
        Ok(m) => reads = m,
        Err(()) => read_broken = true,
    }
    match unite(write_maps) {
        Ok(m) => writes = m,
        Err(()) => write_broken = true,
    }
    if read_broken {
        a.read = ReadKind::DataDependent;
        reads = None;
    }
    if write_broken {
        a.write = WriteKind::Unanalysable;
        writes = None;
    }
    // Indirect writes only alone: the runtime lists either the indices or a map, not both.
    if a.through.is_some() && (writes.is_some() || a.write != WriteKind::Indirect) {
        if a.write != WriteKind::Unanalysable {
            let loc = scops.accesses.iter().find(|x| x.through.is_some()).map_or("?".into(), |x| x.location.clone());
            a.notes.push((format!("`{shown}` is written both at indices read from memory and elsewhere"), loc));
        }
        a.write = WriteKind::Unanalysable;
        a.through = None;
    }
    // A linear index over constant extents (`A[15360 z + 128 y + x]`) stays one-dimensional
    // in Polly's model (it delinearizes by parametric sizes only), so each plane of a
    // partition is a strided piece the runtime lists slowly; seen through the extents the
    // strides imply, those pieces are boxes. The change of view is exact whatever it finds.
    if a.shape.len() == 1 {
        if let Some((extents, r, w)) = delinearized(reads.as_ref(), writes.as_ref()) {
            a.shape.extend(extents.iter().map(|e| e.to_string()));
            reads = r;
            writes = w;
        }
    }
    // A data-dependent read whose over-approximation is unbounded says nothing: whole array.
    if let Some(r) = reads {
        let bounded = r.has_bounded_range().unwrap_or(false);
        if a.read == ReadKind::DataDependent && !bounded {
            a.read_map = None;
        } else {
            a.read_map = r.to_text().ok();
            if a.read_map.is_none() {
                a.read = ReadKind::DataDependent;
            }
        }
    }
    if let Some(wm) = writes {
        match a.write {
            WriteKind::Exact | WriteKind::May => a.write_map = wm.to_text().ok(),
            _ => {}
        }
        if a.write == WriteKind::Exact && a.write_map.is_none() {
            a.write = WriteKind::Unanalysable;
        }
    }
    // Never read but listed as read through an unmodeled access: the whole buffer.
    if a.read == ReadKind::Exact && a.read_map.is_none() {
        a.read = ReadKind::DataDependent;
    }
    a
}

/// The inner extents (outermost first) that the strides of a linear index imply, and the
/// maps seen through them; `None` when there are none or the view has no fewer local
/// variables (the pieces would not list faster).
#[allow(clippy::type_complexity)]
fn delinearized<'i>(
    reads: Option<&AccessMap<'i>>,
    writes: Option<&AccessMap<'i>>,
) -> Option<(Vec<i64>, Option<AccessMap<'i>>, Option<AccessMap<'i>>)> {
    let maps = [reads, writes];
    let mut strides = Vec::new();
    for m in maps.iter().flatten() {
        strides.extend(m.index_strides().ok()?);
    }
    strides.sort_unstable();
    // A chain of strides, each a multiple of the one before, from the smallest.
    let mut chain: Vec<i64> = Vec::new();
    for s in strides {
        if s > *chain.last().unwrap_or(&1) && s % chain.last().unwrap_or(&1) == 0 {
            chain.push(s);
        }
    }
    if chain.is_empty() {
        return None;
    }
    let mut extents: Vec<i64> = chain.windows(2).map(|w| w[1] / w[0]).rev().collect();
    extents.push(chain[0]);
    let view = |m: Option<&AccessMap<'i>>| -> Option<Option<AccessMap<'i>>> {
        match m {
            None => Some(None),
            Some(m) => Some(Some(m.copy().ok()?.delinearize(&extents).ok()?)),
        }
    };
    let (r, w) = (view(reads)?, view(writes)?);
    // Writes decide (the runtime must list them exactly); a read-only argument, its reads.
    let before = writes.or(reads)?.local_vars().ok()?;
    let after = w.as_ref().or(r.as_ref())?.local_vars().ok()?;
    (after <= before).then_some((extents, r, w))
}

/// An indirect write's indices seen from the instances: the load's relation restricted to the
/// statement's domain (an element per write: one, or one per iteration of a loop of the
/// instance), exact over the node's own parameters; why not, when it is not.
fn through(
    isl: &Isl,
    scops: &Scops,
    w: &Wrapper<'_>,
    stmt: &crate::polly::Statement,
    t: &crate::polly::Through,
    dims: &[&str],
    known: &dyn Fn(&String) -> bool,
) -> Result<Through, Later> {
    let no = Later(false);
    let array = scops.arrays.iter().find(|x| t.relation.contains(&format!("-> {}[", x.name))).ok_or(no)?;
    if !w.params.contains(&array.base) {
        return Err(no);
    }
    let rel = isl.map(&t.relation).map_err(|_| no)?;
    let dom = isl.set(&stmt.domain).map_err(|_| no)?;
    let inst = isl.map(&to_instances(&stmt.name, &stmt.loops, w).ok_or(no)?).map_err(|_| no)?;
    let m = rel
        .intersect_domain(dom)
        .and_then(|m| m.apply_domain(inst))
        .and_then(|m| m.named("I", dims, &array.base))
        .map_err(|_| no)?;
    // A parameter Polly made of a product of values (`blockIdx.x * tile`) is a constant
    // times a block id once the launch's values are built in.
    if m.params().map_err(|_| no)?.iter().any(|p| !known(p)) {
        return Err(Later(true));
    }
    Ok(Through {
        arg: array.base.clone(),
        map: m.to_text().map_err(|_| no)?,
        bits: t.bits,
        signed: t.signed,
        scale: t.scale,
        offset: t.offset,
        every: !stmt.region,
        location: String::new(),
    })
}

/// The union of two indirect writes' index maps where they read the same argument's indices
/// and use them alike; `None` where they do not, or ISL fails.
fn same_indices(isl: &Isl, a: &Through, b: &Through) -> Option<String> {
    let alike = (&a.arg, a.bits, a.signed, a.scale, a.offset) == (&b.arg, b.bits, b.signed, b.scale, b.offset);
    alike.then(|| isl.map(&a.map).ok()?.union(isl.map(&b.map).ok()?).ok()?.to_text().ok()).flatten()
}

/// Why a data-dependent write has no [`Through`]: `Later(true)` where the place its indices
/// are loaded from multiplies run-time values, which a launch's values may make affine.
#[derive(Clone, Copy, Debug)]
struct Later(bool);

/// `acc ∪ m`; `None` if ISL fails (the caller then assumes the worst).
/// The union of `maps` (`None` for none), united in pairs, then pairs of pairs: a kernel's
/// 200 writes (HeCBench s3d) united one at a time took a minute of simplifying ever longer
/// unions; in a tree, seconds. (United unsimplified and simplified once at the end, the
/// result's text changed from run to run.) `Err` where ISL fails: the union is then
/// incomplete.
fn unite(mut maps: Vec<AccessMap<'_>>) -> Result<Option<AccessMap<'_>>, ()> {
    while maps.len() > 1 {
        let mut next = Vec::with_capacity(maps.len().div_ceil(2));
        let mut it = maps.into_iter();
        while let Some(a) = it.next() {
            next.push(match it.next() {
                Some(b) => a.union(b).map_err(|_| ())?,
                None => a,
            });
        }
        maps = next;
    }
    Ok(maps.pop())
}
