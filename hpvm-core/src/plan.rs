//! Which nodes become GPU kernels, and why the others stay on the CPU.
//!
//! Two shapes map onto a GPU launch (HPVM's GPU backend's, made explicit):
//! - an internal node hinted for the GPU whose child graph is one GPU leaf, optionally fed by
//!   one allocation node through all-to-all edges: the internal node's instances become
//!   thread blocks, the leaf's instances the threads of a block, the allocation shared memory;
//! - any other leaf hinted for the GPU: its grid becomes threads in blocks the runtime shapes.
//!
//! Anything else runs on the CPU, which is always correct; each such node gets a reason.

use crate::graph::{Graph, NodeId, NodeKind, Query, Replication};

#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    /// `outputs`: the internal node's outputs, each `(output port, input port)`: a kernel
    /// returns nothing per thread, so an output is allowed only where the leaf returns one of
    /// its parameters unchanged, bound from that input of the internal node (HPVM programs
    /// return their size parameters to order the nodes after them).
    Blocks {
        leaf: NodeId,
        alloc: Option<NodeId>,
        outputs: Vec<(u32, u32)>,
    },
    Grid,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    /// The node the kernel runs (the internal node for `Blocks`, the leaf for `Grid`).
    pub node: NodeId,
    pub shape: Shape,
}

/// A GPU-hinted node that stays on the CPU, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Fallback {
    pub node: NodeId,
    pub reason: String,
}

pub fn plan(graph: &Graph) -> (Vec<Kernel>, Vec<Fallback>) {
    let mut kernels = Vec::new();
    let mut fallbacks = Vec::new();
    let mut covered: Vec<NodeId> = Vec::new();
    for (id, node) in graph.nodes.iter() {
        let NodeKind::Internal(int) = &node.kind else { continue };
        if !node.hint.wants_gpu() {
            continue;
        }
        match blocks_shape(graph, id) {
            Ok(shape) => {
                if let Shape::Blocks { leaf, alloc, .. } = &shape {
                    covered.push(*leaf);
                    covered.extend(alloc);
                }
                kernels.push(Kernel { node: id, shape });
            }
            Err(reason) => {
                // Its GPU children may still become kernels of their own below.
                if int.children.iter().all(|&c| !graph.nodes[c].is_leaf()) {
                    fallbacks.push(Fallback { node: id, reason });
                }
            }
        }
    }
    for (id, node) in graph.nodes.iter() {
        let Some(leaf) = node.leaf() else { continue };
        if !node.hint.wants_gpu() || covered.contains(&id) || leaf.is_allocation {
            continue;
        }
        if leaf.queries.contains_key(&Query::Barrier) {
            fallbacks.push(Fallback {
                node: id,
                reason: "it uses __hpvm__barrier but its parent is not a GPU internal node, so its instances are not one thread block".into(),
            });
            continue;
        }
        if leaf.queries.contains_key(&Query::Malloc) {
            fallbacks.push(Fallback { node: id, reason: "it calls __hpvm__malloc outside an allocation node".into() });
            continue;
        }
        kernels.push(Kernel { node: id, shape: Shape::Grid });
    }
    (kernels, fallbacks)
}

/// Whether internal node `p` is one launch of blocks of threads.
fn blocks_shape(graph: &Graph, p: NodeId) -> Result<Shape, String> {
    let int = graph.nodes[p].internal().expect("internal node");
    let mut leaf = None;
    let mut alloc = None;
    for &c in &int.children {
        let child = &graph.nodes[c];
        match child.leaf() {
            Some(l) if l.is_allocation && alloc.is_none() && child.dims == 0 => alloc = Some(c),
            Some(l) if !l.is_allocation && leaf.is_none() => leaf = Some(c),
            _ => return Err("its child graph is not one leaf (plus at most one 0-D allocation node)".into()),
        }
    }
    let leaf = leaf.ok_or("it has no compute leaf")?;
    if !graph.nodes[leaf].hint.wants_gpu() {
        return Err("its leaf is not hinted for the GPU".into());
    }
    let returns = graph.nodes[leaf].leaf().map_or(&[][..], |l| &l.returns[..]);
    let mut outputs = Vec::new();
    for b in &int.bind_out {
        let param = returns.iter().map(|r| r.params.get(b.child_port as usize).copied().flatten()).reduce(|a, b| {
            if a == b {
                a
            } else {
                None
            }
        });
        let input = param.flatten().and_then(|p| {
            int.bind_in.iter().find(|i| i.child == leaf && i.child_port == p && !i.streaming).map(|i| i.parent_port)
        });
        match input {
            Some(i) => outputs.push((b.parent_port, i)),
            None => {
                return Err("its outputs come from per-thread values, which a kernel does not return (only a \
                            parameter the leaf returns unchanged can be bound out)"
                    .into())
            }
        }
    }
    if graph.nodes[leaf].leaf().is_some_and(|l| l.queries.contains_key(&Query::Malloc)) {
        return Err("its leaf calls __hpvm__malloc".into());
    }
    for &e in &int.edges {
        let e = &graph.edges[e];
        if Some(e.src) != alloc || e.dst != leaf || e.replication != Replication::AllToAll {
            return Err("an edge other than allocation -> leaf (all-to-all) joins its children".into());
        }
    }
    if let Some(a) = alloc {
        let al = graph.nodes[a].leaf().expect("allocation leaf");
        if al.queries.keys().any(|q| !matches!(q, Query::Malloc)) {
            return Err("its allocation node queries the graph, so its sizes may differ per block".into());
        }
    }
    Ok(Shape::Blocks { leaf, alloc, outputs })
}

/// Leaf parameters fed by pointer outputs of the allocation node: offsets into shared memory.
pub fn shared_params(graph: &Graph, p: NodeId, leaf: NodeId, alloc: Option<NodeId>) -> Vec<u32> {
    let Some(a) = alloc else { return vec![] };
    let int = graph.nodes[p].internal().expect("internal");
    int.edges
        .iter()
        .map(|&e| &graph.edges[e])
        .filter(|e| e.src == a && e.dst == leaf)
        .filter(|e| graph.output_ty(a, e.src_port).is_some_and(|t| t.is_pointer()))
        .map(|e| e.dst_port)
        .collect()
}
