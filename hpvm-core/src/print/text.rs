//! The text dump of `hpvm-mgpu inspect`: launches, then every node depth first.
//! Stable across runs (creation order everywhere), so tests snapshot it.

use crate::graph::*;
use crate::loc;
use crate::verify::grid_text;
use std::fmt::Write;

pub fn to_text(g: &Graph) -> String {
    let mut s = String::new();
    let _ = write_graph(&mut s, g);
    s
}

fn write_graph(s: &mut String, g: &Graph) -> std::fmt::Result {
    writeln!(s, "graph of {}", g.source)?;
    for l in &g.launches {
        writeln!(s)?;
        writeln!(
            s,
            "launch of {} at {}{} in {}{}",
            g.nodes[l.root].display,
            loc::show(&l.loc),
            l.called_at.as_ref().map(|at| format!(" (through a helper called at {at})")).unwrap_or_default(),
            l.host_function,
            if l.streaming { " (streaming)" } else { "" }
        )?;
        match &l.args {
            Some(a) => writeln!(
                s,
                "  argument struct {} {{ {} }}{}",
                a.name,
                types(&a.fields),
                if a.packed { " (packed)" } else { "" }
            )?,
            None => writeln!(s, "  argument struct: type not visible in the host code")?,
        }
        for u in &l.uses {
            writeln!(s, "  {} at {}", u.what, loc::show(&u.loc))?;
        }
    }
    for root in g.roots() {
        for id in g.preorder(root) {
            writeln!(s)?;
            write_node(s, g, id)?;
        }
    }
    Ok(())
}

fn write_node(s: &mut String, g: &Graph, id: NodeId) -> std::fmt::Result {
    let n = &g.nodes[id];
    writeln!(s, "node {} ({}, hint {}, {})", n.display, n.kind_name(), n.hint, grid_text(n))?;
    writeln!(s, "  defined at {}", loc::show(&n.def_loc))?;
    if let Some(p) = n.parent {
        writeln!(s, "  created by {} at {}", g.nodes[p].display, loc::show(&n.create_loc))?;
    }
    if n.params.is_empty() {
        writeln!(s, "  inputs: none")?;
    } else {
        writeln!(s, "  inputs:")?;
        for (i, p) in n.params.iter().enumerate() {
            write!(s, "    {i} {}: {}", p.name, p.ty)?;
            match (p.access.read, p.access.write) {
                (true, true) => write!(s, ", in-out")?,
                (true, false) => write!(s, ", in")?,
                (false, true) => write!(s, ", out")?,
                (false, false) => {}
            }
            if let Some(sz) = p.size_param {
                write!(s, ", bytes in #{sz}")?;
            }
            writeln!(s)?;
        }
    }
    if n.outputs.is_empty() {
        writeln!(s, "  outputs: none")?;
    } else {
        let outs: Vec<String> = n.outputs.iter().map(|t| t.as_ref().map_or("?".to_string(), |t| t.0.clone())).collect();
        writeln!(s, "  outputs: ({})", outs.join(", "))?;
    }
    match &n.kind {
        NodeKind::Leaf(leaf) => {
            if !leaf.queries.is_empty() {
                let uses: Vec<String> = leaf
                    .queries
                    .iter()
                    .map(|(q, k)| if *k == 1 { q.to_string() } else { format!("{q} x{k}") })
                    .collect();
                writeln!(s, "  uses: {}", uses.join(", "))?;
            }
            if !leaf.aux_functions.is_empty() {
                writeln!(s, "  calls functions: {}", leaf.aux_functions.join(", "))?;
            }
            if !leaf.external_calls.is_empty() {
                writeln!(s, "  calls external: {}", leaf.external_calls.join(", "))?;
            }
        }
        NodeKind::Internal(int) => {
            let names: Vec<&str> = int.children.iter().map(|&c| g.nodes[c].display.as_str()).collect();
            writeln!(s, "  children: {}", names.join(", "))?;
            for b in &int.bind_in {
                writeln!(
                    s,
                    "  bind in:  {}.{} -> {}{}",
                    n.display,
                    port(n, b.parent_port),
                    port_of(g, b.child, b.child_port),
                    stream(b.streaming)
                )?;
            }
            for &e in &int.edges {
                let e = &g.edges[e];
                writeln!(
                    s,
                    "  edge:     {}.out{} -> {} ({}){}",
                    g.nodes[e.src].display,
                    e.src_port,
                    port_of(g, e.dst, e.dst_port),
                    e.replication,
                    stream(e.streaming)
                )?;
            }
            for b in &int.bind_out {
                writeln!(
                    s,
                    "  bind out: {}.out{} -> {}.out{}{}",
                    g.nodes[b.child].display,
                    b.child_port,
                    n.display,
                    b.parent_port,
                    stream(b.streaming)
                )?;
            }
        }
    }
    Ok(())
}

fn port(n: &Node, p: u32) -> String {
    match n.params.get(p as usize) {
        Some(param) => format!("{p} ({})", param.name),
        None => p.to_string(),
    }
}

fn port_of(g: &Graph, id: NodeId, p: u32) -> String {
    format!("{}.{}", g.nodes[id].display, port(&g.nodes[id], p))
}

fn stream(s: bool) -> &'static str {
    if s {
        " streaming"
    } else {
        ""
    }
}

fn types(tys: &[Ty]) -> String {
    tys.iter().map(|t| t.0.as_str()).collect::<Vec<_>>().join(", ")
}
