//! The runtime's description of a module's graphs ([`contract::desc::Program`]), from the
//! verified graph and the module's types.

use crate::layout::{packed_offsets, scalar_kind, size_of};
use crate::{Error, Result};
use contract::desc::*;
use hpvm_core::expr::Expr;
use hpvm_core::graph::{Graph, NodeKind, Query, Replication};
use hpvm_core::loc;
use inkwell::module::Module;
use inkwell::targets::TargetData;
use inkwell::types::{AnyType, BasicTypeEnum, StructType};
use inkwell::values::{FunctionValue, InstructionOpcode, InstructionValue};

/// Calls of `name` in `f`, in order.
pub fn calls_of<'ctx>(f: FunctionValue<'ctx>, name: &str) -> Vec<InstructionValue<'ctx>> {
    let mut out = Vec::new();
    for bb in f.get_basic_block_iter() {
        for inst in bb.get_instructions() {
            if inst.get_opcode() != InstructionOpcode::Call {
                continue;
            }
            let callee = inkwell::values::CallSiteValue::try_from(inst).ok().and_then(|c| c.get_called_fn_value());
            if callee.is_some_and(|c| c.get_name().to_bytes() == name.as_bytes()) {
                out.push(inst);
            }
        }
    }
    out
}

pub fn function<'ctx>(module: &Module<'ctx>, name: &str) -> Result<FunctionValue<'ctx>> {
    module.get_function(name).ok_or_else(|| Error::Internal(format!("node function {name} not in the module")))
}

/// The value arguments of a `__hpvm__return` call (after its count).
pub fn return_values<'ctx>(call: InstructionValue<'ctx>) -> Vec<inkwell::values::BasicValueEnum<'ctx>> {
    // Operands: count, values..., callee.
    let n = call.get_num_operands().saturating_sub(1);
    (1..n).filter_map(|i| call.get_operand(i).and_then(|o| o.value())).collect()
}

fn values(data: &TargetData, names: Vec<String>, types: &[BasicTypeEnum<'_>]) -> Vec<ValueDesc> {
    let sizes: Vec<u32> = types.iter().map(|t| size_of(data, &t.as_any_type_enum())).collect();
    let offsets = packed_offsets(&sizes);
    names
        .into_iter()
        .zip(types)
        .enumerate()
        .map(|(i, (name, ty))| ValueDesc {
            name,
            offset: offsets[i],
            size: sizes[i],
            kind: scalar_kind(*ty),
            read: false,
            write: false,
            size_param: None,
        })
        .collect()
}

fn expr(e: &Expr) -> Result<ExprDesc> {
    Ok(match e {
        Expr::Const(c) => ExprDesc::Const(*c),
        Expr::Param { index, .. } => ExprDesc::Param(*index as u32),
        Expr::Bin(op, a, b) => ExprDesc::Bin(*op, Box::new(expr(a)?), Box::new(expr(b)?)),
        Expr::Opaque(what) => return Err(Error::Internal(format!("unverified instance count ({what})"))),
    })
}

pub fn describe(module: &Module<'_>, graph: &Graph, data: &TargetData) -> Result<Program> {
    let mut nodes: Vec<NodeDesc> = Vec::with_capacity(graph.nodes.len());
    let mut next_entry = 0u32;
    for (_, node) in graph.nodes.iter() {
        let f = function(module, &node.name)?;
        let types: Vec<BasicTypeEnum> = f.get_params().iter().map(|p| p.get_type()).collect();
        let mut params = values(data, node.params.iter().map(|p| p.name.clone()).collect(), &types);
        for (d, p) in params.iter_mut().zip(&node.params) {
            d.read = p.access.read;
            d.write = p.access.write;
            d.size_param = p.size_param.map(|i| i as u32);
        }
        let (kind, outputs) = match &node.kind {
            NodeKind::Leaf(leaf) => {
                let outputs = match calls_of(f, "__hpvm__return").first() {
                    Some(&call) => {
                        let tys: Vec<BasicTypeEnum> = return_values(call).iter().map(|v| v.get_type()).collect();
                        values(data, (0..tys.len()).map(|i| format!("out{i}")).collect(), &tys)
                    }
                    None => Vec::new(),
                };
                let entry = next_entry;
                next_entry += 1;
                let kind = KindDesc::Leaf {
                    entry,
                    // Warp operations exchange values between a block's threads: they run
                    // together, as barriers make them.
                    barrier: leaf.queries.contains_key(&Query::Barrier) || crate::warp::uses_warps(f),
                    allocation: leaf.is_allocation,
                };
                (kind, outputs)
            }
            // Filled below, once the children's outputs are known.
            NodeKind::Internal(_) => {
                (KindDesc::Internal { children: vec![], edges: vec![], bind_in: vec![], bind_out: vec![] }, vec![])
            }
        };
        let counts = node.counts.iter().map(expr).collect::<Result<_>>()?;
        nodes.push(NodeDesc {
            name: node.name.clone(),
            display: node.display.clone(),
            loc: loc::show(&node.def_loc),
            dims: node.dims,
            counts,
            params,
            outputs,
            kind,
            kernel: None,
            shape: None,
            indirect: match node.kind {
                NodeKind::Leaf(_) => crate::indirect::pointers_in_memory_inlined(module, &node.name),
                NodeKind::Internal(_) => None,
            },
            translated: false,
        });
    }
    // Internal nodes, children before parents, so a bound child's outputs are known.
    let mut post: Vec<_> = graph.roots().flat_map(|r| graph.preorder(r)).collect();
    post.reverse();
    for id in post {
        let NodeKind::Internal(int) = &graph.nodes[id].kind else { continue };
        let i = id.index();
        let mut out_types: Vec<Option<ValueDesc>> = vec![None; graph.nodes[id].outputs.len()];
        for b in &int.bind_out {
            let child = &nodes[b.child.index()].outputs[b.child_port as usize];
            out_types[b.parent_port as usize] = Some(child.clone());
        }
        let mut at = 0;
        let mut outputs = Vec::new();
        for (port, o) in out_types.into_iter().enumerate() {
            let o = o.ok_or_else(|| Error::Internal(format!("output {port} of {} unbound", graph.nodes[id].name)))?;
            outputs.push(ValueDesc { name: format!("out{port}"), offset: at, ..o });
            at += outputs.last().map_or(0, |v| v.size);
        }
        nodes[i].outputs = outputs;
        let bind = |b: &hpvm_core::graph::Binding| BindDesc {
            child: b.child.index() as u32,
            parent_port: b.parent_port,
            child_port: b.child_port,
            streaming: b.streaming,
        };
        nodes[i].kind = KindDesc::Internal {
            children: int.children.iter().map(|c| c.index() as u32).collect(),
            edges: int
                .edges
                .iter()
                .map(|&e| {
                    let e = &graph.edges[e];
                    EdgeDesc {
                        src: e.src.index() as u32,
                        dst: e.dst.index() as u32,
                        one_to_one: e.replication == Replication::OneToOne,
                        src_port: e.src_port,
                        dst_port: e.dst_port,
                        streaming: e.streaming,
                    }
                })
                .collect(),
            bind_in: int.bind_in.iter().map(bind).collect(),
            bind_out: int.bind_out.iter().map(bind).collect(),
        };
    }
    let launches = graph.launches.iter().map(|l| launch(module, graph, data, l, &nodes)).collect::<Result<_>>()?;
    // Launch units: the nodes a GPU would run as one launch, whether or not kernels are
    // compiled (the runtime partitions them on simulated devices too).
    for k in hpvm_core::plan::plan(graph).0 {
        nodes[k.node.index()].shape = Some(match k.shape {
            hpvm_core::plan::Shape::Blocks { leaf, alloc, outputs } => KernelKind::Blocks {
                leaf: leaf.index() as u32,
                alloc: alloc.map(|a| a.index() as u32),
                shared_params: hpvm_core::plan::shared_params(graph, k.node, leaf, alloc),
                outputs,
            },
            hpvm_core::plan::Shape::Grid => KernelKind::Grid,
        });
    }
    Ok(Program { version: VERSION, source: graph.source.clone(), nodes, launches, analysis: None })
}

/// Where the root's arguments and outputs sit in the user's struct: from its type when the
/// host code shows it, else packed, as HPVM defines the struct.
fn launch(
    module: &Module<'_>,
    graph: &Graph,
    data: &TargetData,
    l: &hpvm_core::graph::Launch,
    nodes: &[NodeDesc],
) -> Result<LaunchDesc> {
    let root = &nodes[l.root.index()];
    let n = root.params.len();
    let named: Option<StructType> =
        l.args.as_ref().and_then(|a| module.get_struct_type(a.name.trim_start_matches('%')));
    let (arg_offsets, out_base, out_offsets, out_size) = match named {
        Some(st) => {
            let off = |s: &StructType, i: u32| data.offset_of_element(s, i).map(|o| o as u32);
            let args = (0..n as u32).map(|i| off(&st, i)).collect::<Option<Vec<_>>>();
            let args = args.ok_or_else(|| {
                Error::Internal(format!("argument struct of launch at {} too short", loc::show(&l.loc)))
            })?;
            let (base, outs, size) = match st.get_field_type_at_index(n as u32) {
                Some(BasicTypeEnum::StructType(out)) if !root.outputs.is_empty() => {
                    let outs = (0..root.outputs.len() as u32).map(|i| off(&out, i)).collect::<Option<Vec<_>>>();
                    (off(&st, n as u32).unwrap_or(0), outs.unwrap_or_default(), size_of(data, &out.as_any_type_enum()))
                }
                _ => (0, Vec::new(), 0),
            };
            (args, base, outs, size)
        }
        None => {
            let sizes: Vec<u32> = root.params.iter().map(|v| v.size).collect();
            let base = sizes.iter().sum();
            let out_sizes: Vec<u32> = root.outputs.iter().map(|v| v.size).collect();
            (packed_offsets(&sizes), base, packed_offsets(&out_sizes), out_sizes.iter().sum())
        }
    };
    if out_offsets.len() != root.outputs.len() {
        return Err(Error::Internal(format!(
            "launch at {}: {} has {} outputs but the argument struct has no struct to receive them",
            loc::show(&l.loc),
            graph.nodes[l.root].display,
            root.outputs.len()
        )));
    }
    Ok(LaunchDesc { root: l.root.index() as u32, loc: loc::show(&l.loc), arg_offsets, out_base, out_offsets, out_size })
}
