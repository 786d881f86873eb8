//! Building the [`Graph`] from an LLVM module.
//!
//! The module is expected in the shape `frontend` produces: clang at `-O0` with debug info,
//! then `sroa,early-cse`, so that node handles, ports and instance counts are SSA values
//! (not loads of stack slots). Every `__hpvm__launch` gives a root; the builder walks each
//! root's `__hpvm__createNodeND` calls depth first. It records what it reads, right or wrong:
//! the verifier judges. What cannot even be recorded (a handle of unknown origin, a node
//! function that is not a function) becomes a diagnostic here.

use crate::diag::{Diagnostic, Rule};
use crate::expr::{BinOp, Expr};
use crate::graph::*;
use crate::intrinsics::Intrinsic;
use crate::ir::{self, Val};
use llvm_sys::LLVMOpcode;
use std::collections::{HashMap, HashSet};

/// Builds the graph of every launch in `module`. Returns the graph and the problems found
/// while reading it (the verifier finds the rest).
pub fn build(module: &inkwell::module::Module<'_>, source: &str) -> (Graph, Vec<Diagnostic>) {
    let functions: Vec<Val> =
        module.get_functions().map(|f| Val(inkwell::values::AsValueRef::as_value_ref(&f))).collect();
    let mut b = Builder {
        graph: Graph { source: source.to_string(), ..Graph::default() },
        diags: Vec::new(),
        node_of_fn: HashMap::new(),
        stack: Vec::new(),
    };

    // Host code: every launch, then the waits/pushes/pops on the handles they return.
    let mut launch_calls = Vec::new();
    let mut host_uses = Vec::new();
    for &f in &functions {
        if f.is_declaration() {
            continue;
        }
        for inst in f.instructions() {
            match intrinsic_of(inst) {
                Some(Intrinsic::Launch) => launch_calls.push((f, inst)),
                Some(Intrinsic::Wait) => host_uses.push((HostOp::Wait, inst)),
                Some(Intrinsic::Push) => host_uses.push((HostOp::Push, inst)),
                Some(Intrinsic::Pop) => host_uses.push((HostOp::Pop, inst)),
                _ => {}
            }
        }
    }
    let mut launch_of_call = HashMap::new();
    for (host, call) in launch_calls {
        if let Some(launch) = b.launch(host, call) {
            launch_of_call.insert(call, b.graph.launches.len());
            b.graph.launches.push(launch);
        }
    }
    for (what, call) in host_uses {
        if let Some(&i) = call.call_args().first().and_then(|h| launch_of_call.get(h)) {
            b.graph.launches[i].uses.push(HostUse { what, loc: call.loc() });
        }
    }
    inherit_locations(&mut b.graph);
    (b.graph, b.diags)
}

/// An internal node whose function has no location of its own (one the CUDA frontend made
/// around a kernel) is shown at its first child's: messages name the user's kernel, never an
/// `<unknown location>`.
fn inherit_locations(graph: &mut Graph) {
    let roots: Vec<NodeId> = graph.roots().collect();
    for root in roots {
        let mut order = graph.preorder(root);
        order.reverse();
        for id in order {
            if graph.nodes[id].def_loc.is_some() {
                continue;
            }
            if let NodeKind::Internal(int) = &graph.nodes[id].kind {
                let first = int.children.iter().find_map(|&c| graph.nodes[c].def_loc.clone());
                graph.nodes[id].def_loc = first;
            }
        }
    }
}

fn intrinsic_of(inst: Val) -> Option<Intrinsic> {
    Intrinsic::from_name(&inst.called_function()?.name())
}

fn is_llvm_intrinsic(f: Val) -> bool {
    f.name().starts_with("llvm.")
}

/// Calls the C front end leaves in any function and that mean nothing to the graph.
fn is_annotation(f: Val) -> bool {
    let n = f.name();
    n.starts_with("llvm.dbg.") || n.starts_with("llvm.lifetime.") || n == "llvm.assume"
}

struct Builder {
    graph: Graph,
    diags: Vec<Diagnostic>,
    node_of_fn: HashMap<Val, NodeId>,
    /// Node functions being built, outermost first, to find recursion.
    stack: Vec<Val>,
}

/// How a node handle used in an internal node resolves.
#[derive(Clone, Copy)]
enum Handle {
    Node(NodeId),
    /// The createNode call was already reported; stay quiet about its uses.
    Reported,
}

impl Builder {
    fn diag(&mut self, rule: Rule, loc: Option<crate::loc::SrcLoc>, msg: impl Into<String>) {
        self.diags.push(Diagnostic::new(rule, loc, msg));
    }

    fn launch(&mut self, host: Val, call: Val) -> Option<Launch> {
        let loc = call.loc();
        let args = call.call_args();
        if args.len() != 3 {
            self.diag(
                Rule::LaunchArgs,
                loc.clone(),
                format!(
                    "__hpvm__launch takes 3 arguments (streaming flag, root function, argument struct), not {}",
                    args.len()
                ),
            );
            return None;
        }
        let streaming = match args[0].const_u64() {
            Some(v) => v != 0,
            None => {
                self.diag(Rule::NonConstant, loc.clone(), "the streaming flag of __hpvm__launch must be a constant");
                false
            }
        };
        let Some(root_fn) = args[1].as_function() else {
            let via =
                call.inlined_at().map(|at| format!(" (the launch is in a helper called at {at})")).unwrap_or_default();
            self.diag(
                Rule::NotAFunction,
                loc.clone(),
                format!("the root of __hpvm__launch must be a node function, not `{}`{via}", describe(args[1])),
            );
            return None;
        };
        let root = match self.node_of_fn.get(&root_fn) {
            Some(&id) => id,
            None => self.node(root_fn, None, loc.clone()),
        };
        Some(Launch {
            root,
            host_function: host.name(),
            streaming,
            args: arg_struct(args[2]),
            loc,
            called_at: call.inlined_at(),
            uses: Vec::new(),
        })
    }

    /// Builds the node of `f` and, for an internal node, its whole subgraph.
    fn node(&mut self, f: Val, parent: Option<NodeId>, use_loc: Option<crate::loc::SrcLoc>) -> NodeId {
        let name = f.name();
        let def_loc = f.function_loc();
        let llvm_params = f.params();
        let mut params: Vec<Param> = llvm_params
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let n = p.name();
                Param {
                    name: if n.is_empty() { format!("arg{i}") } else { n },
                    ty: Ty(ir::type_text(p.ty())),
                    access: Access::default(),
                    size_param: None,
                }
            })
            .collect();
        for i in 0..params.len() {
            if params[i].ty.is_pointer() && params.get(i + 1).is_some_and(|p| p.ty.is_size()) {
                params[i].size_param = Some(i + 1);
            }
        }
        let ret = f.return_type();
        let declared_return = if ir::is_void(ret) {
            None
        } else if ir::is_struct(ret) {
            Some(ir::struct_fields(ret).into_iter().map(|t| Ty(ir::type_text(t))).collect())
        } else {
            Some(vec![Ty(ir::type_text(ret))])
        };
        let id = self.graph.nodes.push(Node {
            name: name.clone(),
            display: crate::names::display_name(&name),
            def_loc: def_loc.clone(),
            parent,
            create_loc: None,
            hint: Target::None,
            dims: 0,
            counts: Vec::new(),
            params,
            outputs: Vec::new(),
            declared_return,
            kind: NodeKind::Leaf(Leaf::default()),
        });
        self.node_of_fn.insert(f, id);
        if f.is_declaration() {
            self.diag(
                Rule::MissingBody,
                def_loc.or(use_loc),
                format!("node function `{name}` is declared but not defined in this program"),
            );
            return id;
        }

        let insts = f.instructions();
        let calls: Vec<(Val, Intrinsic)> = insts.iter().filter_map(|&i| Some((i, intrinsic_of(i)?))).collect();
        self.hint_and_attributes(id, f, &llvm_params, &calls);

        self.stack.push(f);
        let kind = if calls.iter().any(|(_, k)| *k == Intrinsic::CreateNode) {
            NodeKind::Internal(self.internal(id, f, &insts, &calls))
        } else {
            NodeKind::Leaf(self.leaf(f, &insts))
        };
        self.stack.pop();

        let outputs = match &kind {
            NodeKind::Leaf(leaf) => {
                leaf.returns.first().map(|r| r.types.iter().cloned().map(Some).collect()).unwrap_or_default()
            }
            NodeKind::Internal(internal) => {
                let n = internal.bind_out.iter().map(|b| b.parent_port as usize + 1).max().unwrap_or(0);
                let mut outs = vec![None; n];
                for b in &internal.bind_out {
                    let slot = &mut outs[b.parent_port as usize];
                    if slot.is_none() {
                        *slot = self.graph.output_ty(b.child, b.child_port).cloned();
                    }
                }
                outs
            }
        };
        let node = &mut self.graph.nodes[id];
        node.outputs = outputs;
        node.kind = kind;
        id
    }

    fn hint_and_attributes(&mut self, id: NodeId, f: Val, llvm_params: &[Val], calls: &[(Val, Intrinsic)]) {
        let name = crate::names::display_name(&f.name()); // for messages
        for &(call, kind) in calls {
            let args = call.call_args();
            match kind {
                Intrinsic::Hint => match args.first().and_then(|a| a.const_u64()).and_then(Target::from_value) {
                    Some(t) => self.graph.nodes[id].hint = t,
                    None => self.diag(
                        Rule::BadHint,
                        call.loc(),
                        format!("__hpvm__hint in `{name}` needs a constant hpvm::Target"),
                    ),
                },
                Intrinsic::Attributes => {
                    // (n_in, in..., n_out, out...)
                    let parse = |args: &[Val]| -> Option<(Vec<Val>, Vec<Val>)> {
                        let n_in = args.first()?.const_u64()? as usize;
                        let ins = args.get(1..1 + n_in)?.to_vec();
                        let n_out = args.get(1 + n_in)?.const_u64()? as usize;
                        let outs = args.get(2 + n_in..2 + n_in + n_out)?.to_vec();
                        (args.len() == 2 + n_in + n_out).then_some((ins, outs))
                    };
                    let Some((ins, outs)) = parse(&args) else {
                        self.diag(Rule::Attributes, call.loc(), format!("__hpvm__attributes in `{name}`: expected (n_in, n_in pointers, n_out, n_out pointers) with constant counts"));
                        continue;
                    };
                    for (list, is_write) in [(ins, false), (outs, true)] {
                        for v in list {
                            // A parameter kept in its slot at -O0 (its address is taken).
                            let v = v.slot_value().filter(|s| s.is_argument()).unwrap_or(v);
                            match llvm_params.iter().position(|p| *p == v) {
                                Some(i) if self.graph.nodes[id].params[i].ty.is_pointer() => {
                                    let access = &mut self.graph.nodes[id].params[i].access;
                                    if is_write {
                                        access.write = true;
                                    } else {
                                        access.read = true;
                                    }
                                }
                                _ => {
                                    let shown = &self.graph.nodes[id].display;
                                    let message = format!("__hpvm__attributes in `{shown}` names `{}`, which is not a pointer parameter of `{shown}`", describe(v));
                                    self.diag(Rule::Attributes, call.loc(), message)
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn internal(&mut self, id: NodeId, f: Val, insts: &[Val], calls: &[(Val, Intrinsic)]) -> Internal {
        let name = crate::names::display_name(&f.name()); // for messages
        let mut internal = Internal::default();
        let mut handles: HashMap<Val, Handle> = HashMap::new();
        let mut count_values: HashSet<Val> = HashSet::new();

        for &(call, kind) in calls {
            let loc = call.loc();
            let args = call.call_args();
            if kind.is_graph_construction() {
                // Arithmetic feeding counts (or, wrongly, ports) is not "computation".
                count_values.extend(args.iter().copied());
            }
            match kind {
                Intrinsic::Hint | Intrinsic::Attributes => {}
                Intrinsic::CreateNode => {
                    let handle = self.create_node(id, f, call, &args);
                    handles.insert(call, handle);
                    if let Handle::Node(child) = handle {
                        internal.children.push(child);
                    }
                }
                Intrinsic::BindIn | Intrinsic::BindOut => {
                    let what = if kind == Intrinsic::BindIn { "__hpvm__bindIn" } else { "__hpvm__bindOut" };
                    let Some(child) = self.resolve(&handles, args.first().copied(), what, &loc) else { continue };
                    let Some([a, b, s]) = self.constants(&args[1..], what, &loc) else {
                        internal.unreadable.push(child);
                        continue;
                    };
                    // bindIn(child, parent_port, child_port); bindOut(child, child_port, parent_port)
                    let (parent_port, child_port) = if kind == Intrinsic::BindIn { (a, b) } else { (b, a) };
                    let binding = Binding { child, parent_port, child_port, streaming: s != 0, loc };
                    if kind == Intrinsic::BindIn {
                        internal.bind_in.push(binding);
                    } else {
                        internal.bind_out.push(binding);
                    }
                }
                Intrinsic::Edge => {
                    let src = self.resolve(&handles, args.first().copied(), "__hpvm__edge", &loc);
                    let dst = self.resolve(&handles, args.get(1).copied(), "__hpvm__edge", &loc);
                    let (Some(src), Some(dst)) = (src, dst) else { continue };
                    let Some([repl, sp, dp, s]) = self.constants(&args[2..], "__hpvm__edge", &loc) else {
                        internal.unreadable.push(dst);
                        continue;
                    };
                    let replication = if repl == 0 { Replication::AllToAll } else { Replication::OneToOne };
                    let edge = self.graph.edges.push(Edge { parent: id, src, dst, replication, src_port: sp, dst_port: dp, streaming: s != 0, loc });
                    internal.edges.push(edge);
                }
                Intrinsic::Return => self.diag(Rule::ComputationInInternal, loc, format!("`{name}` creates child nodes, so it is an internal node; its outputs come from __hpvm__bindOut, not __hpvm__return")),
                other => self.diag(Rule::ComputationInInternal, loc, format!("`{name}` creates child nodes, so it is an internal node, and may only build its graph; it calls {}", api_name(other))),
            }
        }

        // Anything else must be arithmetic feeding instance counts.
        let mut feeds_counts: HashSet<Val> = HashSet::new();
        let mut work: Vec<Val> = count_values.into_iter().collect();
        while let Some(v) = work.pop() {
            if v.is_instruction() && !v.is_call() && v.parent_function() == f && feeds_counts.insert(v) {
                work.extend((0..v.num_operands()).map(|i| v.operand(i)));
            }
        }
        for &inst in insts {
            if feeds_counts.contains(&inst) || intrinsic_of(inst).is_some() {
                continue;
            }
            let op = inst.opcode();
            let allowed = match op {
                Some(LLVMOpcode::LLVMRet) | Some(LLVMOpcode::LLVMUnreachable) => true,
                Some(LLVMOpcode::LLVMBr) => !inst.is_conditional_branch(),
                Some(LLVMOpcode::LLVMCall) => inst.called_function().is_some_and(is_annotation),
                _ => false,
            };
            if !allowed {
                let what = match (op, inst.called_function()) {
                    (Some(LLVMOpcode::LLVMCall), Some(callee)) => format!("a call of `{}`", callee.name()),
                    (Some(LLVMOpcode::LLVMBr), _) => "control flow".to_string(),
                    (Some(op), _) => format!("a `{}` instruction", ir::opcode_name(op)),
                    (None, _) => "an instruction".to_string(),
                };
                self.diag(Rule::ComputationInInternal, inst.loc(), format!("`{name}` creates child nodes, so it is an internal node, and may only build its graph (and compute instance counts); it contains {what}"));
                break;
            }
        }
        internal
    }

    fn create_node(&mut self, id: NodeId, f: Val, call: Val, args: &[Val]) -> Handle {
        let loc = call.loc();
        let name = crate::names::display_name(&f.name()); // for messages
        if args.len() < 2 {
            self.diag(
                Rule::InstanceCountArity,
                loc,
                "__hpvm__createNodeND needs the number of dimensions and a node function",
            );
            return Handle::Reported;
        }
        let Some(dims) = args[0].const_u64() else {
            self.diag(
                Rule::NonConstant,
                loc,
                "the number of dimensions given to __hpvm__createNodeND must be a constant",
            );
            return Handle::Reported;
        };
        let Some(child_fn) = args[1].as_function() else {
            self.diag(
                Rule::NotAFunction,
                loc,
                format!(
                    "__hpvm__createNodeND in `{name}` must name a node function; `{}` is not a function",
                    describe(args[1])
                ),
            );
            return Handle::Reported;
        };
        let child_name = child_fn.name();
        if let Some(pos) = self.stack.iter().position(|&g| g == child_fn) {
            let cycle: Vec<String> = self.stack[pos..]
                .iter()
                .map(|g| g.name())
                .chain([child_name])
                .map(|n| crate::names::display_name(&n))
                .collect();
            self.diag(Rule::Recursion, loc, format!("recursion between node functions: {}", cycle.join(" -> ")));
            return Handle::Reported;
        }
        let child = match self.node_of_fn.get(&child_fn).copied() {
            Some(existing) => {
                match self.graph.nodes[existing].parent {
                    Some(other) => {
                        let other_name = &self.graph.nodes[other].display;
                        let child_name = crate::names::display_name(&child_name);
                        let msg = if other == id {
                            format!("node function `{child_name}` is created twice by `{name}`; each node needs its own function (first at {})", crate::loc::show(&self.graph.nodes[existing].create_loc))
                        } else {
                            format!("node function `{child_name}` is used by two parents: `{other_name}` (at {}) and `{name}`", crate::loc::show(&self.graph.nodes[existing].create_loc))
                        };
                        self.diag(Rule::NodeReused, loc, msg);
                        return Handle::Reported;
                    }
                    // A launched root becomes this node's child; the verifier reports the launch.
                    None => existing,
                }
            }
            None => self.node(child_fn, Some(id), loc.clone()),
        };
        let counts = args[2..].iter().map(|&v| expr_of(v, f)).collect();
        let node = &mut self.graph.nodes[child];
        node.parent = Some(id);
        node.create_loc = loc;
        node.dims = dims as u32;
        node.counts = counts;
        Handle::Node(child)
    }

    fn resolve(
        &mut self,
        handles: &HashMap<Val, Handle>,
        v: Option<Val>,
        what: &str,
        loc: &Option<crate::loc::SrcLoc>,
    ) -> Option<NodeId> {
        match v.and_then(|v| handles.get(&v)) {
            Some(Handle::Node(id)) => Some(*id),
            Some(Handle::Reported) => None,
            None => {
                self.diag(
                    Rule::UnknownHandle,
                    loc.clone(),
                    format!("{what}: the node handle does not come from a __hpvm__createNodeND of this function"),
                );
                None
            }
        }
    }

    fn constants<const N: usize>(
        &mut self,
        args: &[Val],
        what: &str,
        loc: &Option<crate::loc::SrcLoc>,
    ) -> Option<[u32; N]> {
        let mut out = [0u32; N];
        if args.len() != N {
            self.diag(Rule::NonConstant, loc.clone(), format!("{what} takes {} arguments", N + args.len().min(1)));
            return None;
        }
        for (slot, a) in out.iter_mut().zip(args) {
            match a.const_u64().and_then(|v| u32::try_from(v).ok()) {
                Some(v) => *slot = v,
                None => {
                    self.diag(
                        Rule::NonConstant,
                        loc.clone(),
                        format!("the ports and flags given to {what} must be constants"),
                    );
                    return None;
                }
            }
        }
        Some(out)
    }

    fn leaf(&mut self, f: Val, insts: &[Val]) -> Leaf {
        let name = crate::names::display_name(&f.name()); // for messages
        let mut leaf = Leaf::default();
        let mut only_allocates = true;
        // The node body and, transitively, the functions it calls.
        let mut seen: HashSet<Val> = HashSet::from([f]);
        let mut bodies = vec![(f, insts.to_vec())];
        let mut external = Vec::new();
        while let Some((func, body)) = bodies.pop() {
            for inst in body {
                match inst.opcode() {
                    Some(
                        LLVMOpcode::LLVMStore
                        | LLVMOpcode::LLVMLoad
                        | LLVMOpcode::LLVMAtomicRMW
                        | LLVMOpcode::LLVMAtomicCmpXchg,
                    ) => only_allocates = false,
                    Some(LLVMOpcode::LLVMCall) => {}
                    _ => continue,
                }
                let Some(callee) = inst.called_function() else {
                    if inst.is_call() {
                        only_allocates = false;
                    }
                    continue;
                };
                let loc = inst.loc();
                match Intrinsic::from_name(&callee.name()) {
                    Some(Intrinsic::Query(q)) => *leaf.queries.entry(q).or_insert(0) += 1,
                    Some(Intrinsic::Return) if func == f => {
                        let args = inst.call_args();
                        let types = args.iter().skip(1).map(|a| Ty(ir::type_text(a.ty()))).collect::<Vec<_>>();
                        if args.first().and_then(|a| a.const_u64()) != Some(types.len() as u64) {
                            self.diag(
                                Rule::ReturnArity,
                                loc.clone(),
                                format!(
                                    "__hpvm__return in `{name}` announces {} values but passes {}",
                                    args.first()
                                        .and_then(|a| a.const_u64())
                                        .map_or("a non-constant number of".to_string(), |n| n.to_string()),
                                    types.len()
                                ),
                            );
                        }
                        let own = f.params();
                        let params =
                            args.iter().skip(1).map(|a| own.iter().position(|p| p == a).map(|i| i as u32)).collect();
                        leaf.returns.push(ReturnSite { types, loc, params });
                    }
                    Some(Intrinsic::Hint | Intrinsic::Attributes) if func == f => {}
                    Some(k) => {
                        let place = if func == f {
                            format!("leaf node `{name}`")
                        } else {
                            format!("`{}`, called by leaf node `{name}`", crate::names::display_name(&func.name()))
                        };
                        self.diag(
                            Rule::GraphIntrinsicInLeaf,
                            loc,
                            format!(
                                "{} is not allowed in {place}: {}",
                                api_name(k),
                                if k.is_host_only() {
                                    "it belongs in host code"
                                } else {
                                    "only internal nodes build graphs"
                                }
                            ),
                        );
                    }
                    None if is_annotation(callee) => continue,
                    None if is_llvm_intrinsic(callee) => {}
                    None if callee.is_declaration() => {
                        if !external.contains(&callee.name()) {
                            external.push(callee.name());
                        }
                    }
                    None => {
                        if seen.insert(callee) {
                            if self.node_of_fn.contains_key(&callee) {
                                self.diag(Rule::GraphIntrinsicInLeaf, loc.clone(), format!("leaf node `{name}` calls node function `{}` directly; nodes communicate through edges", crate::names::display_name(&callee.name())));
                            }
                            leaf.aux_functions.push(callee.name());
                            bodies.push((callee, callee.instructions()));
                        }
                    }
                }
                if !matches!(
                    Intrinsic::from_name(&callee.name()),
                    Some(Intrinsic::Query(
                        Query::Malloc
                            | Query::GetNode
                            | Query::GetParentNode
                            | Query::NumInstances(_)
                            | Query::InstanceId(_)
                    )) | Some(Intrinsic::Return | Intrinsic::Hint | Intrinsic::Attributes)
                ) {
                    only_allocates = false;
                }
            }
        }
        leaf.aux_functions.sort();
        external.sort();
        leaf.external_calls = external;
        leaf.is_allocation = only_allocates && leaf.queries.contains_key(&Query::Malloc);
        leaf
    }
}

/// An integer expression of `f`'s parameters for `v`, or an opaque part saying why not.
fn expr_of(v: Val, f: Val) -> Expr {
    if let Some(c) = v.const_i64() {
        return Expr::Const(c);
    }
    if v.is_argument() {
        if let Some(index) = f.params().iter().position(|&p| p == v) {
            let name = v.name();
            return Expr::Param { index, name: if name.is_empty() { format!("arg{index}") } else { name } };
        }
    }
    let Some(op) = v.opcode() else { return Expr::Opaque("a value that is not a parameter".into()) };
    let bin = |o| Expr::Bin(o, Box::new(expr_of(v.operand(0), f)), Box::new(expr_of(v.operand(1), f)));
    use LLVMOpcode::*;
    match op {
        LLVMAdd => bin(BinOp::Add),
        LLVMSub => bin(BinOp::Sub),
        LLVMMul => bin(BinOp::Mul),
        LLVMUDiv | LLVMSDiv => bin(BinOp::Div),
        LLVMURem | LLVMSRem => bin(BinOp::Rem),
        LLVMShl => bin(BinOp::Shl),
        LLVMLShr | LLVMAShr => bin(BinOp::Shr),
        LLVMAnd => bin(BinOp::And),
        LLVMOr => bin(BinOp::Or),
        LLVMXor => bin(BinOp::Xor),
        LLVMZExt | LLVMSExt | LLVMTrunc => expr_of(v.operand(0), f),
        LLVMCall => Expr::Opaque(format!(
            "a call of `{}`",
            v.called_function().map_or("a function pointer".into(), |c| c.name())
        )),
        other => Expr::Opaque(format!("a `{}` instruction", ir::opcode_name(other))),
    }
}

/// The struct type behind a launch's argument pointer: the type of the stack slot, or the
/// type the host code indexes the pointer with.
fn arg_struct(ptr: Val) -> Option<ArgStruct> {
    let ty = if ptr.is_alloca() {
        Some(ptr.allocated_type())
    } else if let Some(t) = ptr.gep_result_type().filter(|&t| ir::is_struct(t)) {
        // `&frames[i].args`
        Some(t)
    } else {
        ptr.users().into_iter().filter_map(|u| u.gep_source_type()).find(|&t| ir::is_struct(t))
    }?;
    if !ir::is_struct(ty) {
        return None;
    }
    Some(ArgStruct {
        name: ir::struct_name(ty),
        fields: ir::struct_fields(ty).into_iter().map(|t| Ty(ir::type_text(t))).collect(),
        packed: ir::is_packed(ty),
    })
}

fn describe(v: Val) -> String {
    let n = v.name();
    if !n.is_empty() {
        n
    } else if let Some(c) = v.const_i64() {
        c.to_string()
    } else {
        ir::type_text(v.ty())
    }
}

fn api_name(k: Intrinsic) -> &'static str {
    match k {
        Intrinsic::Hint => "__hpvm__hint",
        Intrinsic::Attributes => "__hpvm__attributes",
        Intrinsic::Return => "__hpvm__return",
        Intrinsic::CreateNode => "__hpvm__createNodeND",
        Intrinsic::BindIn => "__hpvm__bindIn",
        Intrinsic::BindOut => "__hpvm__bindOut",
        Intrinsic::Edge => "__hpvm__edge",
        Intrinsic::Init => "__hpvm__init",
        Intrinsic::Cleanup => "__hpvm__cleanup",
        Intrinsic::Launch => "__hpvm__launch",
        Intrinsic::Wait => "__hpvm__wait",
        Intrinsic::Push => "__hpvm__push",
        Intrinsic::Pop => "__hpvm__pop",
        Intrinsic::TrackMem => "llvm_hpvm_track_mem",
        Intrinsic::UntrackMem => "llvm_hpvm_untrack_mem",
        Intrinsic::RequestMem => "llvm_hpvm_request_mem",
        Intrinsic::Query(_) => "a leaf-node intrinsic",
    }
}
