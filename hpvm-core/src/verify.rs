//! The verifier: every rule a graph must follow before a backend may look at it.
//!
//! It works on the [`Graph`] alone (no LLVM), reports every broken rule it finds (not just
//! the first) at the user's source location, and never panics on a malformed graph: all
//! indices it follows are checked first.

use crate::diag::{Diagnostic, Rule};
use crate::graph::*;
use crate::loc::{self, SrcLoc};
use std::collections::BTreeMap;

/// All rule violations in `graph`; empty means the graph is well formed.
pub fn verify(graph: &Graph) -> Vec<Diagnostic> {
    let mut v = Verifier { graph, diags: Vec::new() };
    for (_, node) in graph.nodes.iter() {
        v.grid(node);
        v.params(node);
        match &node.kind {
            NodeKind::Leaf(leaf) => v.returns(node, leaf),
            NodeKind::Internal(internal) => v.internal(node, internal),
        }
    }
    for launch in &graph.launches {
        v.launch(launch);
    }
    v.diags
}

struct Verifier<'g> {
    graph: &'g Graph,
    diags: Vec<Diagnostic>,
}

/// Where to point at a node: where it is created, else where it is defined.
fn node_loc(node: &Node) -> Option<SrcLoc> {
    node.create_loc.clone().or_else(|| node.def_loc.clone())
}

impl Verifier<'_> {
    fn error(&mut self, rule: Rule, loc: Option<SrcLoc>, msg: String) {
        self.diags.push(Diagnostic::new(rule, loc, msg));
    }

    fn grid(&mut self, node: &Node) {
        let name = &node.display;
        if node.dims > 3 {
            self.error(
                Rule::TooManyDims,
                node_loc(node),
                format!("node `{name}` has {} dimensions; HPVM grids have 0 to 3", node.dims),
            );
        } else if node.counts.len() != node.dims as usize {
            self.error(
                Rule::InstanceCountArity,
                node_loc(node),
                format!(
                    "node `{name}` is {}-dimensional but is given {} instance count{}",
                    node.dims,
                    node.counts.len(),
                    if node.counts.len() == 1 { "" } else { "s" }
                ),
            );
        }
        for count in &node.counts {
            if let Some(what) = count.opaque_part() {
                self.error(Rule::InstanceCountExpr, node_loc(node), format!("the instance counts of node `{name}` must be integer expressions of the parent's parameters; this one uses {what}"));
            }
        }
    }

    fn params(&mut self, node: &Node) {
        for (i, p) in node.params.iter().enumerate() {
            if p.ty.is_pointer() && p.size_param.is_none() {
                self.error(Rule::PointerWithoutSize, node.def_loc.clone(), format!("pointer parameter `{}` (#{i}) of node `{}` must be followed by a size_t parameter holding its size in bytes", p.name, node.display));
            }
        }
    }

    fn returns(&mut self, node: &Node, leaf: &Leaf) {
        let Some(first) = leaf.returns.first() else {
            if let Some(fields) = &node.declared_return {
                if !fields.is_empty() {
                    self.error(
                        Rule::ReturnArity,
                        node.def_loc.clone(),
                        format!(
                            "node `{}` returns a struct of {} fields but never calls __hpvm__return",
                            node.display,
                            fields.len()
                        ),
                    );
                }
            }
            return;
        };
        for r in &leaf.returns[1..] {
            if r.types != first.types {
                self.error(
                    Rule::ReturnArity,
                    r.loc.clone(),
                    format!(
                        "this __hpvm__return of node `{}` returns ({}) but the one at {} returns ({})",
                        node.display,
                        list(&r.types),
                        loc::show(&first.loc),
                        list(&first.types)
                    ),
                );
            }
        }
        if let Some(fields) = &node.declared_return {
            for r in &leaf.returns {
                if r.types.len() != fields.len() {
                    self.error(Rule::ReturnArity, r.loc.clone(), format!("__hpvm__return in node `{}` returns {} value{} but the function's return struct has {} field{}", node.display, r.types.len(), plural(r.types.len()), fields.len(), plural(fields.len())));
                }
            }
        }
    }

    fn internal(&mut self, node: &Node, internal: &Internal) {
        let g = self.graph;
        // (child, input port) -> locations of everything feeding it
        let mut feeds: BTreeMap<(NodeId, usize), Vec<Option<SrcLoc>>> = BTreeMap::new();

        for b in &internal.bind_in {
            let child = &g.nodes[b.child];
            let parent_param = node.params.get(b.parent_port as usize);
            let child_param = child.params.get(b.child_port as usize);
            if parent_param.is_none() {
                self.error(
                    Rule::PortOutOfRange,
                    b.loc.clone(),
                    format!(
                        "__hpvm__bindIn: `{}` has {} input{}, so there is no input {} to bind",
                        node.display,
                        node.params.len(),
                        plural(node.params.len()),
                        b.parent_port
                    ),
                );
            }
            if child_param.is_none() {
                self.error(
                    Rule::PortOutOfRange,
                    b.loc.clone(),
                    format!(
                        "__hpvm__bindIn: child `{}` has {} input{}, so there is no input {} to bind to",
                        child.display,
                        child.params.len(),
                        plural(child.params.len()),
                        b.child_port
                    ),
                );
            }
            if let (Some(pp), Some(cp)) = (parent_param, child_param) {
                if pp.ty != cp.ty {
                    self.error(
                        Rule::TypeMismatch,
                        b.loc.clone(),
                        format!(
                            "__hpvm__bindIn: input {} `{}` of `{}` is {} but input {} `{}` of `{}` is {}",
                            b.parent_port, pp.name, node.display, pp.ty, b.child_port, cp.name, child.display, cp.ty
                        ),
                    );
                }
                feeds.entry((b.child, b.child_port as usize)).or_default().push(b.loc.clone());
            }
        }

        for &e in &internal.edges {
            let edge = &g.edges[e];
            let (src, dst) = (&g.nodes[edge.src], &g.nodes[edge.dst]);
            let out = src.outputs.get(edge.src_port as usize);
            let input = dst.params.get(edge.dst_port as usize);
            if out.is_none() {
                self.error(
                    Rule::PortOutOfRange,
                    edge.loc.clone(),
                    format!(
                        "__hpvm__edge: `{}` has {} output{}, so there is no output {}",
                        src.display,
                        src.outputs.len(),
                        plural(src.outputs.len()),
                        edge.src_port
                    ),
                );
            }
            if input.is_none() {
                self.error(
                    Rule::PortOutOfRange,
                    edge.loc.clone(),
                    format!(
                        "__hpvm__edge: `{}` has {} input{}, so there is no input {}",
                        dst.display,
                        dst.params.len(),
                        plural(dst.params.len()),
                        edge.dst_port
                    ),
                );
            }
            if let (Some(Some(out_ty)), Some(p)) = (out, input) {
                if *out_ty != p.ty {
                    self.error(
                        Rule::TypeMismatch,
                        edge.loc.clone(),
                        format!(
                            "__hpvm__edge: output {} of `{}` is {} but input {} `{}` of `{}` is {}",
                            edge.src_port, src.display, out_ty, edge.dst_port, p.name, dst.display, p.ty
                        ),
                    );
                }
            }
            if input.is_some() {
                feeds.entry((edge.dst, edge.dst_port as usize)).or_default().push(edge.loc.clone());
            }
            if edge.replication == Replication::OneToOne && (src.dims != dst.dims || src.counts != dst.counts) {
                self.error(Rule::OneToOneGridMismatch, edge.loc.clone(), format!("one-to-one edge between nodes of different grids: `{}` is {} but `{}` is {}; use an all-to-all edge", src.display, grid_text(src), dst.display, grid_text(dst)));
            }
        }

        for &c in internal.children.iter().filter(|c| !internal.unreadable.contains(c)) {
            let child = &g.nodes[c];
            for (port, p) in child.params.iter().enumerate() {
                match feeds.get(&(c, port)).map(Vec::as_slice) {
                    None | Some([]) => self.error(Rule::InputNeverBound, child.create_loc.clone(), format!("input {port} `{}` of node `{}` is never bound: give it a __hpvm__bindIn or an incoming __hpvm__edge", p.name, child.display)),
                    Some([_]) => {}
                    Some([first, rest @ ..]) => {
                        for l in rest {
                            self.error(Rule::InputBoundTwice, l.clone(), format!("input {port} `{}` of node `{}` is bound twice (first at {})", p.name, child.display, loc::show(first)));
                        }
                    }
                }
            }
        }

        // Outputs: each port of the parent bound exactly once, from an existing child output.
        let mut bound: BTreeMap<u32, Option<SrcLoc>> = BTreeMap::new();
        for b in &internal.bind_out {
            let child = &g.nodes[b.child];
            match child.outputs.get(b.child_port as usize) {
                None => self.error(
                    Rule::PortOutOfRange,
                    b.loc.clone(),
                    format!(
                        "__hpvm__bindOut: child `{}` has {} output{}, so there is no output {}",
                        child.display,
                        child.outputs.len(),
                        plural(child.outputs.len()),
                        b.child_port
                    ),
                ),
                Some(ty) => {
                    if let (Some(ty), Some(fields)) = (ty, &node.declared_return) {
                        match fields.get(b.parent_port as usize) {
                            None => self.error(Rule::PortOutOfRange, b.loc.clone(), format!("__hpvm__bindOut: the return struct of `{}` has {} field{}, so there is no output {}", node.display, fields.len(), plural(fields.len()), b.parent_port)),
                            Some(f) if f != ty => self.error(Rule::TypeMismatch, b.loc.clone(), format!("__hpvm__bindOut: output {} of `{}` is {} but output {} of `{}` is {}", b.child_port, child.display, ty, b.parent_port, node.display, f)),
                            Some(_) => {}
                        }
                    }
                }
            }
            if let Some(first) = bound.insert(b.parent_port, b.loc.clone()) {
                self.error(
                    Rule::OutputBinding,
                    b.loc.clone(),
                    format!(
                        "output {} of `{}` is bound twice (first at {})",
                        b.parent_port,
                        node.display,
                        loc::show(&first)
                    ),
                );
            }
        }
        let n_outputs = node.outputs.len().max(node.declared_return.as_ref().map_or(0, Vec::len));
        for port in 0..n_outputs as u32 {
            if !bound.contains_key(&port) {
                self.error(
                    Rule::OutputBinding,
                    node.def_loc.clone(),
                    format!(
                        "output {port} of internal node `{}` is never bound: give it a __hpvm__bindOut",
                        node.display
                    ),
                );
            }
        }
    }

    fn launch(&mut self, launch: &Launch) {
        let root = &self.graph.nodes[launch.root];
        if let Some(parent) = root.parent {
            self.error(
                Rule::LaunchOfNonRoot,
                launch.loc.clone(),
                format!(
                    "__hpvm__launch of `{}`, which is not a root: it is a child node of `{}` (created at {})",
                    root.display,
                    self.graph.nodes[parent].display,
                    loc::show(&root.create_loc)
                ),
            );
        }
        let Some(args) = &launch.args else { return };
        let params: Vec<&Ty> = root.params.iter().map(|p| &p.ty).collect();
        if !root.outputs.is_empty() && args.fields.len() != params.len() + 1 {
            self.error(
                Rule::LaunchArgs,
                launch.loc.clone(),
                format!(
                    "`{}` has {} output{}, so its argument struct {} needs a last field: a struct receiving them",
                    root.display,
                    root.outputs.len(),
                    plural(root.outputs.len()),
                    args.name
                ),
            );
            return;
        }
        let fits = args.fields.len() >= params.len()
            && args.fields.len() <= params.len() + 1
            && args.fields.iter().zip(&params).all(|(a, p)| a == *p);
        if !fits {
            self.error(
                Rule::LaunchArgs,
                launch.loc.clone(),
                format!("the argument struct {} {{ {} }} of this launch does not match the parameters of `{}` ({}); it must hold them in order (then, optionally, a struct receiving the outputs)", args.name, list(&args.fields), root.display, params.iter().map(|t| t.0.as_str()).collect::<Vec<_>>().join(", ")),
            );
        }
    }
}

fn list(tys: &[Ty]) -> String {
    tys.iter().map(|t| t.0.as_str()).collect::<Vec<_>>().join(", ")
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// `2-D [n / 16, n / 16]`
pub fn grid_text(node: &Node) -> String {
    if node.dims == 0 {
        return "0-D".to_string();
    }
    format!("{}-D [{}]", node.dims, node.counts.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::Expr;

    fn param(name: &str, ty: &str) -> Param {
        Param { name: name.into(), ty: Ty(ty.into()), access: Access::default(), size_param: None }
    }

    fn node(name: &str, parent: Option<NodeId>, params: Vec<Param>, kind: NodeKind) -> Node {
        Node {
            name: name.into(),
            display: name.into(),
            def_loc: None,
            parent,
            create_loc: None,
            hint: Target::None,
            dims: 0,
            counts: vec![],
            params,
            outputs: vec![],
            declared_return: None,
            kind,
        }
    }

    fn rules(g: &Graph) -> Vec<Rule> {
        let mut r: Vec<Rule> = verify(g).into_iter().map(|d| d.rule).collect();
        r.sort();
        r
    }

    /// A root with two 1-D leaf children, `a` (one i64 output) and `b` (one i64 input).
    fn two_leaves() -> (Graph, NodeId, NodeId, NodeId) {
        let mut g = Graph::default();
        let root = g.nodes.push(node("root", None, vec![param("n", "i64")], NodeKind::Internal(Internal::default())));
        let mut a = node("a", Some(root), vec![], NodeKind::Leaf(Leaf::default()));
        a.outputs = vec![Some(Ty("i64".into()))];
        a.dims = 1;
        a.counts = vec![Expr::Param { index: 0, name: "n".into() }];
        let a = g.nodes.push(a);
        let mut b = node("b", Some(root), vec![param("x", "i64")], NodeKind::Leaf(Leaf::default()));
        b.dims = 1;
        b.counts = vec![Expr::Param { index: 0, name: "n".into() }];
        let b = g.nodes.push(b);
        if let NodeKind::Internal(i) = &mut g.nodes[root].kind {
            i.children = vec![a, b];
        }
        (g, root, a, b)
    }

    fn add_edge(g: &mut Graph, root: NodeId, src: NodeId, dst: NodeId, sp: u32, dp: u32, r: Replication) {
        let e = g.edges.push(Edge {
            parent: root,
            src,
            dst,
            replication: r,
            src_port: sp,
            dst_port: dp,
            streaming: false,
            loc: None,
        });
        if let NodeKind::Internal(i) = &mut g.nodes[root].kind {
            i.edges.push(e);
        }
    }

    #[test]
    fn a_well_formed_graph_passes() {
        let (mut g, root, a, b) = two_leaves();
        add_edge(&mut g, root, a, b, 0, 0, Replication::OneToOne);
        assert_eq!(rules(&g), vec![]);
    }

    #[test]
    fn out_of_range_ports_are_reported_not_followed() {
        let (mut g, root, a, b) = two_leaves();
        add_edge(&mut g, root, a, b, 5, 9, Replication::AllToAll);
        // Both ends out of range, and b's only input is then fed by nothing.
        assert_eq!(rules(&g), vec![Rule::PortOutOfRange, Rule::PortOutOfRange, Rule::InputNeverBound]);
    }

    #[test]
    fn one_to_one_needs_equal_grids() {
        let (mut g, root, a, b) = two_leaves();
        g.nodes[b].counts = vec![Expr::Const(4)];
        add_edge(&mut g, root, a, b, 0, 0, Replication::OneToOne);
        assert_eq!(rules(&g), vec![Rule::OneToOneGridMismatch]);
        // The same grids with an all-to-all edge are fine.
        let (mut g, root, a, b) = two_leaves();
        g.nodes[b].counts = vec![Expr::Const(4)];
        add_edge(&mut g, root, a, b, 0, 0, Replication::AllToAll);
        assert_eq!(rules(&g), vec![]);
    }

    #[test]
    fn grid_shape_rules() {
        let (mut g, root, a, b) = two_leaves();
        add_edge(&mut g, root, a, b, 0, 0, Replication::AllToAll);
        g.nodes[a].dims = 4;
        g.nodes[b].dims = 2;
        g.nodes[b].counts.push(Expr::Opaque("a `load` instruction".into()));
        assert_eq!(rules(&g), vec![Rule::TooManyDims, Rule::InstanceCountExpr]);
        g.nodes[b].counts.pop();
        assert_eq!(rules(&g), vec![Rule::TooManyDims, Rule::InstanceCountArity]);
    }

    #[test]
    fn outputs_of_internal_nodes_bound_once() {
        let (mut g, root, a, b) = two_leaves();
        add_edge(&mut g, root, a, b, 0, 0, Replication::AllToAll);
        let bind =
            |child, child_port, parent_port| Binding { child, parent_port, child_port, streaming: false, loc: None };
        g.nodes[root].outputs = vec![Some(Ty("i64".into())), None];
        if let NodeKind::Internal(i) = &mut g.nodes[root].kind {
            i.bind_out = vec![bind(a, 0, 0), bind(a, 0, 0)];
        }
        // Port 0 twice, port 1 never.
        assert_eq!(rules(&g), vec![Rule::OutputBinding, Rule::OutputBinding]);
    }
}
