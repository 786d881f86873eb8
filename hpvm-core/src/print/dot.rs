//! Graphviz output of `hpvm-mgpu inspect --dot`: internal nodes are clusters, leaves are
//! boxes, edges are solid arrows labelled with their ports, bindings are dashed.

use crate::graph::*;
use crate::verify::grid_text;
use std::fmt::Write;

pub fn to_dot(g: &Graph) -> String {
    let mut s = String::new();
    let _ = write_dot(&mut s, g);
    s
}

/// Graphviz IDs: `n<index>`; an internal node is drawn as `cluster_n<index>` with an invisible
/// anchor point `n<index>` inside for edges to attach to.
fn id(n: NodeId) -> String {
    format!("n{}", n.index())
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn write_dot(s: &mut String, g: &Graph) -> std::fmt::Result {
    writeln!(s, "digraph hpvm {{")?;
    writeln!(s, "  compound=true;")?;
    writeln!(s, "  node [shape=box, fontname=\"monospace\"];")?;
    writeln!(s, "  label=\"{}\";", escape(&g.source))?;
    for (i, l) in g.launches.iter().enumerate() {
        writeln!(
            s,
            "  host{i} [shape=ellipse, label=\"{}: launch{}\"];",
            escape(&l.host_function),
            if l.streaming { " (streaming)" } else { "" }
        )?;
        let root = &g.nodes[l.root];
        let lhead = if root.is_leaf() { String::new() } else { format!(", lhead=cluster_{}", id(l.root)) };
        writeln!(s, "  host{i} -> {}[style=bold{lhead}];", id(l.root))?;
    }
    for root in g.roots() {
        write_node(s, g, root, 1)?;
    }
    writeln!(s, "}}")
}

fn label(n: &Node) -> String {
    // `\n` is Graphviz's line break, so it is added after escaping.
    format!("{}\\n{}", escape(&n.display), escape(&format!("{}, hint {}, {}", n.kind_name(), n.hint, grid_text(n))))
}

fn write_node(s: &mut String, g: &Graph, nid: NodeId, depth: usize) -> std::fmt::Result {
    let n = &g.nodes[nid];
    let pad = "  ".repeat(depth);
    match &n.kind {
        NodeKind::Leaf(_) => writeln!(s, "{pad}{} [label=\"{}\"];", id(nid), label(n)),
        NodeKind::Internal(int) => {
            writeln!(s, "{pad}subgraph cluster_{} {{", id(nid))?;
            writeln!(s, "{pad}  label=\"{}\";", label(n))?;
            writeln!(s, "{pad}  {} [shape=point, style=invis];", id(nid))?;
            for &c in &int.children {
                write_node(s, g, c, depth + 1)?;
            }
            for b in &int.bind_in {
                writeln!(
                    s,
                    "{pad}  {} -> {} [style=dashed, label=\"in {} -> {}\"{}];",
                    id(nid),
                    id(b.child),
                    b.parent_port,
                    b.child_port,
                    head(g, b.child)
                )?;
            }
            for &e in &int.edges {
                let e = &g.edges[e];
                writeln!(
                    s,
                    "{pad}  {} -> {} [label=\"{} -> {} ({})\"{}{}];",
                    id(e.src),
                    id(e.dst),
                    e.src_port,
                    e.dst_port,
                    e.replication,
                    tail(g, e.src),
                    head(g, e.dst)
                )?;
            }
            for b in &int.bind_out {
                writeln!(
                    s,
                    "{pad}  {} -> {} [style=dashed, label=\"out {} -> {}\"{}];",
                    id(b.child),
                    id(nid),
                    b.child_port,
                    b.parent_port,
                    tail(g, b.child)
                )?;
            }
            writeln!(s, "{pad}}}")
        }
    }
}

fn head(g: &Graph, n: NodeId) -> String {
    if g.nodes[n].is_leaf() {
        String::new()
    } else {
        format!(", lhead=cluster_{}", id(n))
    }
}

fn tail(g: &Graph, n: NodeId) -> String {
    if g.nodes[n].is_leaf() {
        String::new()
    } else {
        format!(", ltail=cluster_{}", id(n))
    }
}
