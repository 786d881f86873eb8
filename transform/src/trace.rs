//! Access instrumentation (`hpvm-mgpu build --trace-accesses`), the oracle of the analysis's
//! tests: every leaf instance reports its ids and integer parameters when it starts, then
//! every load, store and atomic update through its pointer parameters, as a byte offset from
//! the parameter (see the runtime's `trace` module). CPU code only: it runs where the
//! analysis's claims are checked, never in production builds.

use crate::describe::function;
use crate::{Error, Result};
use hpvm_core::graph::Graph;
use inkwell::module::Module;
use inkwell::targets::TargetData;
use inkwell::values::{AsValueRef, BasicValueEnum, FunctionValue, InstructionOpcode, InstructionValue, PointerValue};
use inkwell::AddressSpace;

/// Instruments every compute leaf of `graph` in `module`.
pub fn instrument(module: &Module<'_>, graph: &Graph, data: &TargetData) -> Result<()> {
    let ctx = module.get_context();
    let b = ctx.create_builder();
    let i64t = ctx.i64_type();
    let i32t = ctx.i32_type();
    let ptr = ctx.ptr_type(AddressSpace::default());
    fn decl<'ctx>(module: &Module<'ctx>, name: &str, ty: inkwell::types::FunctionType<'ctx>) -> FunctionValue<'ctx> {
        module.get_function(name).unwrap_or_else(|| module.add_function(name, ty, None))
    }
    let get_node = decl(module, "__hpvm__getNode", ptr.fn_type(&[], false));
    let get_parent = decl(module, "__hpvm__getParentNode", ptr.fn_type(&[ptr.into()], false));
    let query = |q: &str, d: char| decl(module, &format!("__hpvm__{q}_{d}"), i64t.fn_type(&[ptr.into()], false));
    let on_instance = decl(
        module,
        "hpvm_rt_trace_instance",
        ctx.void_type().fn_type(&[ptr.into(), ptr.into(), ptr.into(), i32t.into()], false),
    );
    let on_access = decl(
        module,
        "hpvm_rt_trace_access",
        ctx.void_type().fn_type(&[i32t.into(), i64t.into(), i32t.into(), i32t.into(), i64t.into(), i32t.into()], false),
    );
    inline_helpers(module, graph)?;
    // Shared memory (a block's scratch, fed by its allocation node) is no buffer.
    let (kernels, _) = hpvm_core::plan::plan(graph);
    for (id, node) in graph.nodes.iter() {
        let Some(leaf) = node.leaf() else { continue };
        if leaf.is_allocation {
            continue;
        }
        let shared: Vec<u32> = kernels
            .iter()
            .find_map(|k| match k.shape {
                hpvm_core::plan::Shape::Blocks { leaf, alloc, .. } if leaf == id => {
                    Some(hpvm_core::plan::shared_params(graph, k.node, leaf, alloc))
                }
                _ => None,
            })
            .unwrap_or_default();
        let f = function(module, &node.name)?;
        let accesses = memory_accesses(f);
        let entry = f.get_first_basic_block().expect("a defined node function");
        match entry.get_first_instruction() {
            Some(i) => b.position_before(&i),
            None => b.position_at_end(entry),
        }
        // The instance: ids and counts of the leaf and its parent, then the parameters.
        let ids = b.build_array_alloca(i64t, i64t.const_int(12, false), "trace.ids")?;
        let h = b.build_call(get_node, &[], "h")?.try_as_basic_value().basic().expect("ptr");
        let p = b.build_call(get_parent, &[h.into()], "p")?.try_as_basic_value().basic().expect("ptr");
        let mut k = 0;
        for (q, of) in
            [("getNodeInstanceID", h), ("getNodeInstanceID", p), ("getNumNodeInstances", h), ("getNumNodeInstances", p)]
        {
            for d in ['x', 'y', 'z'] {
                let v = b.build_call(query(q, d), &[of.into()], "q")?.try_as_basic_value().basic().expect("i64");
                let at = unsafe { b.build_in_bounds_gep(i64t, ids, &[i64t.const_int(k, false)], "at")? };
                b.build_store(at, v)?;
                k += 1;
            }
        }
        let n = f.count_params();
        let scalars = b.build_array_alloca(i64t, i64t.const_int(n.max(1) as u64, false), "trace.scalars")?;
        for (i, param) in f.get_param_iter().enumerate() {
            let v = match param {
                BasicValueEnum::IntValue(v) if v.get_type().get_bit_width() < 64 => {
                    b.build_int_s_extend(v, i64t, "wide")?
                }
                BasicValueEnum::IntValue(v) => v,
                _ => i64t.const_zero(),
            };
            let at = unsafe { b.build_in_bounds_gep(i64t, scalars, &[i64t.const_int(i as u64, false)], "at")? };
            b.build_store(at, v)?;
        }
        let name = b.build_global_string_ptr(&node.name, "trace.node")?.as_pointer_value();
        let args = [name.into(), ids.into(), scalars.into(), i32t.const_int(n as u64, false).into()];
        b.build_call(on_instance, &args, "")?;
        // Instances that wait at a barrier run as fibers on one thread: each says again who
        // it is when it resumes.
        for call in crate::describe::calls_of(f, "__hpvm__barrier") {
            if let Some(next) = call.get_next_instruction() {
                b.position_before(&next);
                b.build_call(on_instance, &args, "")?;
            }
        }

        for (inst, address, ty, kind) in accesses {
            if base_param(f, address).is_some_and(|(i, _)| shared.contains(&i)) {
                continue;
            }
            // An integer read is reported after it, with its value (an indirect write's
            // indices are checked against what was read).
            let int_read = match ty {
                inkwell::types::BasicTypeEnum::IntType(t) if kind == 0 && t.get_bit_width() <= 64 => Some(t),
                _ => None,
            };
            match (int_read, inst.get_next_instruction()) {
                (Some(_), Some(next)) => b.position_before(&next),
                _ => b.position_before(&inst),
            }
            let value = match int_read {
                Some(t) if inst.get_next_instruction().is_some() => {
                    // SAFETY: `inst` is a load of an integer type `t`, so its value is one.
                    let v = unsafe { inkwell::values::IntValue::new(inst.as_value_ref()) };
                    let wide = if t.get_bit_width() < 64 { b.build_int_s_extend(v, i64t, "traced")? } else { v };
                    Some(wide)
                }
                _ => None,
            };
            let (param, offset) = match base_param(f, address) {
                Some((i, base)) => {
                    let a = b.build_ptr_to_int(address, i64t, "addr")?;
                    let s = b.build_ptr_to_int(base, i64t, "base")?;
                    (i as i64, b.build_int_sub(a, s, "offset")?)
                }
                None => (-1, i64t.const_zero()),
            };
            let bytes = data.get_store_size(&ty);
            b.build_call(
                on_access,
                &[
                    i32t.const_int(param as u64, true).into(),
                    offset.into(),
                    i32t.const_int(bytes, false).into(),
                    i32t.const_int(kind, false).into(),
                    value.unwrap_or(i64t.const_zero()).into(),
                    i32t.const_int(value.is_some() as u64, false).into(),
                ],
                "",
            )?;
        }
    }
    Ok(())
}

/// Inlines into each compute leaf the functions it calls (and those they call), as the analysis
/// does: an access in a helper, or through a pointer a helper returns (`*step(p, x, -1, w)`),
/// is then the leaf's own, traced to the leaf's parameter. Then promotes local slots: a
/// parameter a C++ lambda captured by reference is no longer read back from its slot.
fn inline_helpers(module: &Module<'_>, graph: &Graph) -> Result<()> {
    use inkwell::attributes::{Attribute, AttributeLoc};
    let nodes: Vec<&str> = graph.nodes.iter().map(|(_, n)| n.name.as_str()).collect();
    let mut work: Vec<FunctionValue<'_>> = graph
        .nodes
        .iter()
        .filter(|(_, n)| n.leaf().is_some_and(|l| !l.is_allocation))
        .filter_map(|(_, n)| module.get_function(&n.name))
        .collect();
    let mut helpers = std::collections::HashSet::new();
    while let Some(f) = work.pop() {
        for inst in f.get_basic_block_iter().flat_map(|bb| bb.get_instructions()) {
            let callee = inkwell::values::CallSiteValue::try_from(inst).ok().and_then(|c| c.get_called_fn_value());
            let Some(callee) = callee.filter(|c| c.count_basic_blocks() > 0) else { continue };
            let name = callee.get_name().to_string_lossy();
            if !nodes.contains(&name.as_ref()) && helpers.insert(callee) {
                work.push(callee);
            }
        }
    }
    let ctx = module.get_context();
    let kind = |name: &str| Attribute::get_named_enum_kind_id(name);
    for f in &helpers {
        // Clang puts both on everything at -O0.
        f.remove_enum_attribute(AttributeLoc::Function, kind("noinline"));
        f.remove_enum_attribute(AttributeLoc::Function, kind("optnone"));
        f.add_attribute(AttributeLoc::Function, ctx.create_enum_attribute(kind("alwaysinline"), 0));
    }
    use inkwell::targets::{Target, TargetMachine};
    Target::initialize_native(&Default::default()).map_err(Error::Llvm)?;
    let triple = TargetMachine::get_default_triple();
    let tm = Target::from_triple(&triple)
        .map_err(|e| Error::Llvm(e.to_string()))?
        .create_target_machine(
            &triple,
            "generic",
            "",
            inkwell::OptimizationLevel::None,
            Default::default(),
            Default::default(),
        )
        .ok_or_else(|| Error::Llvm("no target machine for the host".into()))?;
    module
        .run_passes("always-inline,function(sroa)", &tm, inkwell::passes::PassBuilderOptions::create())
        .map_err(|e| Error::Llvm(e.to_string()))
}

/// Loads, stores and atomic updates of `f`: the instruction, the address, the accessed type
/// and the kind (0 read, 1 write, 2 both).
fn memory_accesses<'ctx>(
    f: FunctionValue<'ctx>,
) -> Vec<(InstructionValue<'ctx>, PointerValue<'ctx>, inkwell::types::BasicTypeEnum<'ctx>, u64)> {
    let mut out = Vec::new();
    for bb in f.get_basic_block_iter() {
        for inst in bb.get_instructions() {
            let operand = |i: u32| inst.get_operand(i).and_then(|o| o.value());
            let access = match inst.get_opcode() {
                InstructionOpcode::Load => operand(0).map(|p| (p.into_pointer_value(), inst_type(inst), 0)),
                InstructionOpcode::Store => {
                    operand(1).zip(operand(0)).map(|(p, v)| (p.into_pointer_value(), v.get_type(), 1))
                }
                InstructionOpcode::AtomicRMW => {
                    operand(0).zip(operand(1)).map(|(p, v)| (p.into_pointer_value(), v.get_type(), 2))
                }
                InstructionOpcode::AtomicCmpXchg => {
                    operand(0).zip(operand(2)).map(|(p, v)| (p.into_pointer_value(), v.get_type(), 2))
                }
                InstructionOpcode::Call => {
                    let callee =
                        inkwell::values::CallSiteValue::try_from(inst).ok().and_then(|c| c.get_called_fn_value());
                    let name = callee.map(|c| c.get_name().to_string_lossy().into_owned()).unwrap_or_default();
                    if name.starts_with("__hpvm__atomic_") {
                        let n = inst.get_num_operands();
                        operand(0)
                            .zip(operand(n.saturating_sub(2)))
                            .map(|(p, v)| (p.into_pointer_value(), v.get_type(), 2))
                    } else {
                        None
                    }
                }
                _ => None,
            };
            if let Some((p, ty, kind)) = access {
                out.push((inst, p, ty, kind));
            }
        }
    }
    out
}

fn inst_type(inst: InstructionValue<'_>) -> inkwell::types::BasicTypeEnum<'_> {
    // SAFETY: a load's type is its value's type, a first-class type.
    unsafe { inkwell::types::BasicTypeEnum::new(llvm_sys::core::LLVMTypeOf(inst.as_value_ref())) }
}

/// The parameter of `f` an address is computed from (and that parameter), through GEPs, casts
/// and choices between pointers into the same parameter ([`hpvm_core::pointer_param`]).
fn base_param<'ctx>(f: FunctionValue<'ctx>, p: PointerValue<'ctx>) -> Option<(u32, PointerValue<'ctx>)> {
    // SAFETY: `p` is a value of `f`, which is live.
    let i = unsafe { hpvm_core::pointer_param(f.as_value_ref(), p.as_value_ref()) }?;
    Some((i, f.get_nth_param(i)?.into_pointer_value()))
}
