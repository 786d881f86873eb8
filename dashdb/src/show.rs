//! The readable rendering printed by `hpvm-mgpu db show FILE [--node N]`.

use crate::schema::{Arg, Database, Node, SplitChoice};
use crate::{Error, Result};
use std::fmt::{self, Display, Formatter};

/// The database as text for people: a header (source path and hash, schema version,
/// generator), then every node, or only `node` when given. A name that is not a node is an
/// error listing the known names.
pub fn show(db: &Database, node: Option<&str>) -> Result<String> {
    let nodes: Vec<&Node> = match node {
        None => db.nodes.iter().collect(),
        Some(name) => match db.node(name).or_else(|| db.nodes.iter().find(|n| n.display.as_deref() == Some(name))) {
            Some(n) => vec![n],
            None => {
                return Err(Error::UnknownNode {
                    name: name.to_string(),
                    known: db.nodes.iter().map(|n| n.shown().to_string()).collect(),
                })
            }
        },
    };
    Ok(Show { db, nodes }.to_string())
}

struct Show<'a> {
    db: &'a Database,
    nodes: Vec<&'a Node>,
}

/// The conventional name of grid dimension `d`.
fn dim_name(d: u32) -> String {
    match d {
        0 => "x".into(),
        1 => "y".into(),
        2 => "z".into(),
        _ => format!("#{d}"),
    }
}

impl Display for Show<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let db = self.db;
        writeln!(f, "analysis database of {}", db.source.path)?;
        writeln!(f, "  source hash:    {}", db.source.hash)?;
        writeln!(f, "  schema version: {}", db.schema_version)?;
        writeln!(f, "  generator:      {}", db.generator)?;
        if db.nodes.is_empty() {
            writeln!(f, "\nno nodes")?;
        }
        for node in &self.nodes {
            writeln!(f)?;
            fmt_node(f, node)?;
        }
        Ok(())
    }
}

fn fmt_node(f: &mut Formatter<'_>, node: &Node) -> fmt::Result {
    writeln!(f, "node {} ({})", node.shown(), node.location)?;
    writeln!(f, "  hint: {}", node.hint)?;
    if node.grid.is_empty() {
        writeln!(f, "  grid: one instance")?;
    } else {
        let counts: Vec<String> =
            node.grid.iter().enumerate().map(|(d, c)| format!("{}: {c}", dim_name(d as u32))).collect();
        writeln!(f, "  grid: {} ({} dimension{})", counts.join(", "), node.dims, plural(node.dims))?;
    }
    if let Some(block) = &node.block {
        writeln!(f, "  coordinates: block id × block size + thread id, blocks of {}", block.size.join(" × "))?;
        for r in &block.runtime {
            writeln!(
                f,
                "  block size in {} known at the launch: maps per block ({} = {} × {})",
                dim_name(r.dim),
                r.offset,
                r.id,
                r.size
            )?;
            if r.strided {
                writeln!(
                    f,
                    "  a grid-stride loop in {c}: maps per iteration; instance {c} runs iterations {c} + k × (instances in {c})",
                    c = dim_name(r.dim)
                )?;
            }
        }
    }
    if let Some(when) = &node.valid_when {
        writeln!(f, "  maps hold when: {when}")?;
    }
    for b in &node.bounds {
        writeln!(f, "  maps hold when: {b} (block ids and offsets at their largest)")?;
    }
    for p in &node.products {
        writeln!(f, "  product: {} = {} (given at each launch)", p.name, p.factors.join(" * "))?;
    }
    if node.partitionable {
        writeln!(f, "  partitionable")?;
    } else {
        writeln!(f, "  not partitionable:")?;
        for r in &node.reasons {
            match &r.location {
                Some(loc) => writeln!(f, "    - {} ({loc})", r.message)?,
                None => writeln!(f, "    - {}", r.message)?,
            }
        }
        if node.specializable {
            writeln!(f, "  specializable: analysed again at run time with each launch's values built in")?;
        }
    }
    if node.split.dims.is_empty() {
        writeln!(f, "  split: none")?;
    } else {
        let dims: Vec<String> = node.split.dims.iter().map(|&d| format!("{} (dimension {d})", dim_name(d))).collect();
        match node.split.chosen_by {
            SplitChoice::Analysis => writeln!(
                f,
                "  splittable: {} (best first; each launch takes the first with enough blocks)",
                dims.join(", ")
            )?,
            SplitChoice::User => writeln!(f, "  split: {}, chosen by {}", dims.join(", "), node.split.chosen_by)?,
        }
    }
    if node.args.is_empty() {
        writeln!(f, "  no pointer arguments")?;
    }
    for arg in &node.args {
        fmt_arg(f, arg)?;
    }
    Ok(())
}

fn fmt_arg(f: &mut Formatter<'_>, arg: &Arg) -> fmt::Result {
    writeln!(f, "  argument {} (parameter {})", arg.name, arg.index)?;
    writeln!(f, "    type:    {} ({} bits, pointer level {})", arg.llvm_type, arg.size_bits, arg.pointer_level)?;
    writeln!(f, "    element: {} ({} byte{})", arg.fundamental_type, arg.element_size, plural(arg.element_size))?;
    let shape: String = arg.shape.iter().map(|s| format!("[{s}]")).collect();
    writeln!(f, "    shape:   {shape} ({} dimension{})", arg.dimensionality, plural(arg.dimensionality))?;
    if !arg.params.is_empty() {
        writeln!(f, "    params:  {}", arg.params.join(", "))?;
    }
    fmt_access(f, "read: ", arg.read.as_str(), arg.read_map.as_deref())?;
    if let Some(when) = &arg.read_valid_when {
        writeln!(f, "             holds when: {when} (elsewhere the whole array is read)")?;
    }
    fmt_access(f, "write:", arg.write.as_str(), arg.write_map.as_deref())?;
    if let Some(r) = &arg.reduction {
        let elements = if arg.write_map.is_some() { "the elements above" } else { "any element" };
        writeln!(
            f,
            "             atomic {r} at {elements}: each device updates a private copy, combined after the launch"
        )?;
    }
    if let Some(t) = &arg.write_through {
        writeln!(
            f,
            "             indices: the {}{}-bit values of parameter {} at {} (plus {}, steps of {} bytes{})",
            if t.signed { "signed " } else { "unsigned " },
            t.bits,
            t.arg,
            t.map,
            t.offset,
            t.scale,
            if t.every { "" } else { "; some instances may not write" }
        )?;
    }
    Ok(())
}

fn fmt_access(f: &mut Formatter<'_>, label: &str, kind: &str, map: Option<&str>) -> fmt::Result {
    match map {
        Some(map) => writeln!(f, "    {label}   {kind}\n             {map}"),
        None if kind == "none" => writeln!(f, "    {label}   {kind}"),
        None if kind == "data-dependent" => writeln!(f, "    {label}   {kind} (no map: the whole array)"),
        None if kind == "reduce" => writeln!(f, "    {label}   {kind} (no map: the whole array)"),
        None if kind == "merged" => writeln!(
            f,
            "    {label}   {kind} (no map: each device writes a whole copy; the bytes it changed are merged)"
        ),
        None => writeln!(f, "    {label}   {kind} (no map)"),
    }
}

fn plural(n: u32) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::sample;

    #[test]
    fn shows_every_node() {
        let db = sample();
        let text = show(&db, None).unwrap();
        assert!(text.starts_with("analysis database of examples/matmul.c\n"), "{text}");
        for part in [
            &db.source.hash,
            &format!("schema version: {}", crate::SCHEMA_VERSION),
            "node matmul (examples/matmul.c:12)",
            "grid: x: N, y: N (2 dimensions)",
            "  partitionable\n",
            "splittable: y (dimension 1) (best first",
            "argument C (parameter 4)",
            "shape:   [*][N] (2 dimensions)",
            "element: float (4 bytes)",
            "write:   exact\n             [N] -> { I[x, y] -> C[y, x] : 0 <= x < N and 0 <= y < N }",
            "node histogram",
            "not partitionable:\n    - `bins` is written at an index read from `data` (may-write) (examples/matmul.c:33:5)",
            "read:    data-dependent (no map: the whole array)",
            "write:   may\n",
            "split: none",
        ] {
            assert!(text.contains(part), "no `{part}` in:\n{text}");
        }
    }

    #[test]
    fn shows_one_node() {
        let text = show(&sample(), Some("histogram")).unwrap();
        assert!(text.contains("node histogram"), "{text}");
        assert!(!text.contains("node matmul"), "{text}");
        assert!(text.contains("fnv1a64:"), "{text}");
    }

    #[test]
    fn unknown_node_lists_known_ones() {
        let err = show(&sample(), Some("transpose")).unwrap_err();
        assert!(matches!(&err, Error::UnknownNode { name, known } if name == "transpose" && known.len() == 2));
        assert_eq!(err.to_string(), "no node `transpose` in the analysis database (known: matmul, histogram)");
    }
}
