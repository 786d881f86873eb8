//! The consistency rules every loaded or saved database satisfies.

use crate::hash::is_well_formed;
use crate::schema::{Arg, Database, Node, ReadKind, WriteKind};
use crate::{Error, Result, SCHEMA_VERSION};
use std::collections::HashSet;

impl Database {
    /// Checks the rules below and reports every broken one (as [`Error::Invalid`]):
    /// - the schema version is [`SCHEMA_VERSION`] and the source hash has the form
    ///   [`source_hash`](crate::source_hash) produces;
    /// - node names are non-empty and unique;
    /// - a node has at most 3 dimensions and one grid count per dimension;
    /// - split dimensions are each `< dims` and not repeated;
    /// - a node that is not partitionable has at least one reason and no split dimensions; a
    ///   partitionable one has no reason and only exact writes (or none): a may-write or an
    ///   unanalysable write cannot be partitioned;
    /// - arguments: indices unique within the node, `shape` has `dimensionality` entries,
    ///   `element_size`, `size_bits` and `pointer_level` are positive, `params` are unique;
    /// - each of a node's `bounds` parses as a [`Bound`](crate::Bound);
    /// - a product has a name no parameter of the node has, unique, and at least two factors,
    ///   none of them a product;
    /// - a map given is not blank and contains `->` (the crate does not parse ISL further);
    /// - `read` / `write` of `none` has no map; `read` of `exact` or `over-approximated` and
    ///   `write` of `exact` have one (they are what the runtime evaluates).
    pub fn validate(&self) -> Result<()> {
        let mut problems = Vec::new();
        if self.schema_version != SCHEMA_VERSION {
            problems.push(format!(
                "schema version {} where this hpvm-mgpu writes version {SCHEMA_VERSION}",
                self.schema_version
            ));
        }
        if !is_well_formed(&self.source.hash) {
            problems.push(format!("source hash `{}` is not `fnv1a64:` and 16 lowercase hex digits", self.source.hash));
        }
        let mut names = HashSet::new();
        for node in &self.nodes {
            if node.name.is_empty() {
                problems.push("a node has an empty name".to_string());
            } else if !names.insert(node.name.as_str()) {
                problems.push(format!("node `{}` appears more than once", node.name));
            }
            check_node(node, &mut problems);
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::Invalid(problems.join("; ")))
        }
    }
}

fn check_node(node: &Node, problems: &mut Vec<String>) {
    let mut bad = |m: String| problems.push(format!("node `{}`: {m}", node.name));
    if node.dims > 3 {
        bad(format!("{} dimensions (at most 3)", node.dims));
    }
    if node.grid.len() != node.dims as usize {
        bad(format!("{} dimensions but {} grid counts", node.dims, node.grid.len()));
    }
    if let Some(b) = &node.block {
        if b.size.len() > 3 || b.size.iter().any(|s| s.trim() == "0") {
            bad("a block has more than 3 dimensions or an empty one".to_string());
        }
        let mut last = None;
        for r in &b.runtime {
            if r.dim as usize >= b.size.len() || last.is_some_and(|l| r.dim <= l) {
                bad(format!("run-time block dimension {} out of range or out of order", r.dim));
            }
            last = Some(r.dim);
        }
    }
    for b in &node.bounds {
        if let Err(e) = crate::Bound::parse(b) {
            bad(e);
        }
    }
    let mut products = HashSet::new();
    for p in &node.products {
        if p.name.is_empty() || node.param_names.contains(&p.name) || !products.insert(p.name.as_str()) {
            bad(format!("product `{}` has no name of its own", p.name));
        }
        if p.factors.len() < 2 || p.factors.iter().any(|f| node.products.iter().any(|q| &q.name == f)) {
            bad(format!("product `{}` has factors {:?} (at least two, none a product)", p.name, p.factors));
        }
    }
    let mut seen = HashSet::new();
    for &d in &node.split.dims {
        if d >= node.dims {
            bad(format!("split dimension {d} out of range (the node has {} dimensions)", node.dims));
        }
        if !seen.insert(d) {
            bad(format!("split dimension {d} repeated"));
        }
    }
    if node.partitionable {
        if !node.reasons.is_empty() {
            bad(format!("partitionable but has {} reason(s) not to be", node.reasons.len()));
        }
        if node.specializable {
            bad("partitionable but also marked specializable".to_string());
        }
        if node.merge_fallback {
            bad("partitionable but also given a merge fallback".to_string());
        }
        for arg in &node.args {
            let may_with_map = arg.write == WriteKind::May && arg.write_map.is_some();
            if !matches!(
                arg.write,
                WriteKind::None | WriteKind::Exact | WriteKind::Indirect | WriteKind::Reduce | WriteKind::Merged
            ) && !may_with_map
            {
                bad(format!("partitionable but argument `{}` has a {} write", arg.name, arg.write));
            }
        }
    } else {
        if node.reasons.is_empty() {
            bad("not partitionable but gives no reason".to_string());
        }
        if !node.split.dims.is_empty() {
            bad("not partitionable but has split dimensions".to_string());
        }
    }
    let mut indices = HashSet::new();
    for arg in &node.args {
        if !indices.insert(arg.index) {
            bad(format!("two arguments with parameter index {}", arg.index));
        }
        if let Some(t) = &arg.write_through {
            match node.arg(t.arg) {
                Some(x) if x.index == arg.index || x.write != WriteKind::None => bad(format!(
                    "argument `{}` is written at indices read from `{}`, which the node writes",
                    arg.name, x.name
                )),
                Some(_) => {}
                None => bad(format!("argument `{}` reads its indices from unknown parameter {}", arg.name, t.arg)),
            }
        }
        for m in check_arg(arg) {
            bad(format!("argument `{}` (parameter {}): {m}", arg.name, arg.index));
        }
    }
}

fn check_arg(arg: &Arg) -> Vec<String> {
    let mut problems = Vec::new();
    if arg.shape.len() != arg.dimensionality as usize {
        problems.push(format!("dimensionality {} but {} shape entries", arg.dimensionality, arg.shape.len()));
    }
    if arg.element_size == 0 {
        problems.push("element size 0".to_string());
    }
    if arg.size_bits == 0 {
        problems.push("size 0 bits".to_string());
    }
    if arg.pointer_level == 0 {
        problems.push("pointer level 0 (only pointer arguments are recorded)".to_string());
    }
    let mut params = HashSet::new();
    for p in &arg.params {
        if !params.insert(p.as_str()) {
            problems.push(format!("parameter `{p}` repeated"));
        }
    }
    for (what, map) in [("read", &arg.read_map), ("write", &arg.write_map)] {
        if let Some(map) = map {
            if map.trim().is_empty() || !map.contains("->") {
                problems.push(format!("{what} map `{map}` is not an ISL map"));
            }
        }
    }
    if let Some(when) = &arg.read_valid_when {
        if arg.read_map.is_none() || !when.contains('{') {
            problems.push(format!("`read_valid_when` `{when}` without a read map, or not an ISL set"));
        }
    }
    match (arg.read, &arg.read_map) {
        (ReadKind::None, Some(_)) => problems.push("read map given but read is none".to_string()),
        (ReadKind::Exact | ReadKind::OverApproximated, None) => {
            problems.push(format!("read is {} but no read map", arg.read))
        }
        _ => {}
    }
    match (arg.write, &arg.write_map) {
        (WriteKind::None, Some(_)) => problems.push("write map given but write is none".to_string()),
        (WriteKind::Exact, None) => problems.push("write is exact but no write map".to_string()),
        (WriteKind::Indirect, Some(_)) => problems.push("write map given but write is indirect".to_string()),
        (WriteKind::Merged, Some(_)) => problems.push("write map given but write is merged".to_string()),
        _ => {}
    }
    match (&arg.reduction, arg.write) {
        (None, WriteKind::Reduce) => problems.push("write is reduce but gives no `reduction`".to_string()),
        (Some(_), w) if w != WriteKind::Reduce => problems.push(format!("`reduction` given but write is {w}")),
        (Some(r), _) if !r.is_valid() => problems.push(format!("no reduction is {r}")),
        _ => {}
    }
    match (&arg.write_through, arg.write) {
        (None, WriteKind::Indirect) => problems.push("write is indirect but gives no `write_through`".to_string()),
        (Some(_), w) if w != WriteKind::Indirect => problems.push(format!("`write_through` given but write is {w}")),
        (Some(t), _) => {
            if t.map.trim().is_empty() || !t.map.contains("->") {
                problems.push(format!("index map `{}` is not an ISL map", t.map));
            }
            if ![8, 16, 32, 64].contains(&t.bits) || t.scale == 0 {
                problems.push(format!("indices of {} bits scaled by {}", t.bits, t.scale));
            }
        }
        _ => {}
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::sample;

    /// The sample broken by `mutate` fails validation with a message containing `expect`.
    fn fails(expect: &str, mutate: impl FnOnce(&mut Database)) {
        let mut db = sample();
        mutate(&mut db);
        match db.validate() {
            Err(Error::Invalid(m)) => assert!(m.contains(expect), "expected `{expect}` in: {m}"),
            other => panic!("expected Invalid containing `{expect}`, got {other:?}"),
        }
    }

    #[test]
    fn sample_is_valid() {
        sample().validate().unwrap();
    }

    #[test]
    fn database_rules() {
        fails("schema version 99", |db| db.schema_version = 99);
        fails("source hash `abc`", |db| db.source.hash = "abc".into());
    }

    #[test]
    fn node_names_unique() {
        fails("node `matmul` appears more than once", |db| db.nodes[1].name = "matmul".into());
        fails("empty name", |db| db.nodes[1].name.clear());
    }

    #[test]
    fn dims_and_grid() {
        fails("4 dimensions (at most 3)", |db| {
            db.nodes[0].dims = 4;
            db.nodes[0].grid = vec!["1".into(); 4];
        });
        fails("2 dimensions but 1 grid counts", |db| {
            db.nodes[0].grid.pop();
        });
    }

    #[test]
    fn bounds_parse() {
        fails("bound `w * < 3` does not parse", |db| db.nodes[0].bounds = vec!["w * < 3".into()]);
        let mut db = sample();
        db.nodes[0].bounds = vec!["(y + 1) * w < 4294967296".into()];
        db.validate().unwrap();
    }

    #[test]
    fn products_are_named_apart_and_multiply_parameters() {
        let product = |name: &str, factors: &[&str]| crate::Product {
            name: name.into(),
            factors: factors.iter().map(|f| f.to_string()).collect(),
        };
        let mut db = sample();
        db.nodes[0].products = vec![product("prod_bsx_gx", &["bsx", "gx"])];
        db.validate().unwrap();
        fails("product `prod_bsx_gx` has no name of its own", |db| {
            db.nodes[0].products = vec![product("prod_bsx_gx", &["bsx", "gx"]); 2]
        });
        fails("product `x` has factors [\"gx\"]", |db| db.nodes[0].products = vec![product("x", &["gx"])]);
        fails("product `b` has factors [\"a\", \"gx\"]", |db| {
            db.nodes[0].products = vec![product("a", &["bsx", "gx"]), product("b", &["a", "gx"])]
        });
    }

    #[test]
    fn split_dims_in_range_and_distinct() {
        fails("split dimension 2 out of range", |db| db.nodes[0].split.dims = vec![2]);
        fails("split dimension 1 repeated", |db| db.nodes[0].split.dims = vec![1, 0, 1]);
    }

    #[test]
    fn reasons_match_partitionability() {
        fails("not partitionable but gives no reason", |db| db.nodes[1].reasons.clear());
        fails("partitionable but has 1 reason(s)", |db| {
            let reason = db.nodes[1].reasons[0].clone();
            db.nodes[0].reasons.push(reason);
        });
        fails("not partitionable but has split dimensions", |db| db.nodes[1].split.dims = vec![0]);
        fails("partitionable but also marked specializable", |db| db.nodes[0].specializable = true);
        fails("partitionable but argument `C` has a may write", |db| {
            db.nodes[0].args[2].write = WriteKind::May;
            db.nodes[0].args[2].write_map = None;
        });
        fails("partitionable but argument `C` has a unanalysable write", |db| {
            db.nodes[0].args[2].write = WriteKind::Unanalysable
        });
    }

    #[test]
    fn arg_shape_and_sizes() {
        fails("argument `A` (parameter 0): dimensionality 3 but 2 shape entries", |db| {
            db.nodes[0].args[0].dimensionality = 3
        });
        fails("argument `B` (parameter 2): element size 0", |db| db.nodes[0].args[1].element_size = 0);
        fails("argument `B` (parameter 2): size 0 bits", |db| db.nodes[0].args[1].size_bits = 0);
        fails("argument `B` (parameter 2): pointer level 0", |db| db.nodes[0].args[1].pointer_level = 0);
        fails("parameter `N` repeated", |db| db.nodes[0].args[1].params.push("N".into()));
    }

    #[test]
    fn maps_look_like_maps() {
        fails("read map `` is not an ISL map", |db| db.nodes[0].args[0].read_map = Some(String::new()));
        fails("write map `{ C[0] }` is not an ISL map", |db| db.nodes[0].args[2].write_map = Some("{ C[0] }".into()));
    }

    #[test]
    fn maps_match_classification() {
        fails("write is exact but no write map", |db| db.nodes[0].args[2].write_map = None);
        fails("read is exact but no read map", |db| db.nodes[0].args[0].read_map = None);
        fails("read is over-approximated but no read map", |db| {
            db.nodes[0].args[0].read = ReadKind::OverApproximated;
            db.nodes[0].args[0].read_map = None;
        });
        fails("read map given but read is none", |db| db.nodes[0].args[2].read_map = Some("{ I[x] -> C[x] }".into()));
        fails("write map given but write is none", |db| {
            db.nodes[0].args[0].write_map = Some("{ I[x] -> A[x] }".into())
        });
    }

    #[test]
    fn indirect_writes_say_where_their_indices_come_from() {
        let through = |arg| crate::Through {
            arg,
            map: "{ I[x, y] -> A[y, x] }".into(),
            bits: 32,
            signed: true,
            scale: 4,
            offset: 0,
            every: true,
        };
        let mut db = sample();
        db.nodes[0].args[2].write = WriteKind::Indirect;
        db.nodes[0].args[2].write_map = None;
        db.nodes[0].args[2].write_through = Some(through(0));
        db.validate().unwrap();
        fails("write is indirect but gives no `write_through`", |db| {
            db.nodes[0].args[2].write = WriteKind::Indirect;
            db.nodes[0].args[2].write_map = None;
        });
        fails("`write_through` given but write is exact", |db| db.nodes[0].args[2].write_through = Some(through(0)));
        fails("reads its indices from unknown parameter 7", |db| {
            db.nodes[0].args[2].write = WriteKind::Indirect;
            db.nodes[0].args[2].write_map = None;
            db.nodes[0].args[2].write_through = Some(through(7));
        });
        fails("indices read from `C`, which the node writes", |db| {
            db.nodes[0].args[2].write = WriteKind::Indirect;
            db.nodes[0].args[2].write_map = None;
            db.nodes[0].args[2].write_through = Some(through(4));
        });
    }

    #[test]
    fn arg_indices_unique() {
        fails("two arguments with parameter index 0", |db| db.nodes[0].args[1].index = 0);
    }

    #[test]
    fn reports_every_problem() {
        let mut db = sample();
        db.nodes[0].args[1].element_size = 0;
        db.nodes[1].reasons.clear();
        let Err(Error::Invalid(m)) = db.validate() else { panic!("valid") };
        assert!(m.contains("element size 0") && m.contains("gives no reason"), "{m}");
    }
}
