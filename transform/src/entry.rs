//! Leaf nodes as entry points over boxes of instances.
//!
//! For leaf `f` the entry point `hpvm.entry.f(args, parent, box, outs)` is, in C terms:
//!
//! ```text
//! NodeCtx ctx = { .dim = box->dim, .parent = parent };
//! current_node = &ctx;
//! load f's parameters from args (packed, unaligned);
//! for z in box->lo[2]..box->hi[2], y ..., x ...:
//!     ctx.id = {x, y, z};
//!     current_out = outs + linear(x, y, z) * record_size;
//!     f(params...);
//! ```
//!
//! and `__hpvm__return(n, v...)` in `f` stores `v...` into `*current_out`. At -O1 and above
//! `f` and the query functions inline into the loop and the context lives in registers.

use crate::describe::{calls_of, function, return_values};
use crate::intrinsics::{make_inline, tls_pointer, CTX_DIM, CTX_ID, CTX_PARENT, CURRENT_NODE, CURRENT_OUT};
use crate::{Error, Result};
use contract::desc::{KindDesc, Program};
use hpvm_core::graph::Graph;
use inkwell::builder::Builder;
use inkwell::context::ContextRef;
use inkwell::module::{Linkage, Module};
use inkwell::values::{BasicMetadataValueEnum, BasicValue, FunctionValue, InstructionValue, IntValue, PointerValue};
use inkwell::{AddressSpace, IntPredicate};

/// Byte offsets in `GridBox { lo: [i64; 3], hi: [i64; 3], dim: [i64; 3] }`.
const BOX_LO: u64 = 0;
const BOX_HI: u64 = 24;
const BOX_DIM: u64 = 48;
const CTX_SIZE: u32 = 56;

/// Builds the entry point of every leaf, in description order (entry index order).
pub fn build_all<'ctx>(module: &Module<'ctx>, graph: &Graph, program: &Program) -> Result<Vec<FunctionValue<'ctx>>> {
    let mut entries = Vec::new();
    for (desc, (_, node)) in program.nodes.iter().zip(graph.nodes.iter()) {
        let KindDesc::Leaf { entry, .. } = desc.kind else { continue };
        debug_assert_eq!(entry as usize, entries.len());
        let f = function(module, &node.name)?;
        rewrite_returns(module, f, desc)?;
        entries.push(build_entry(module, f, desc)?);
    }
    Ok(entries)
}

fn gep<'ctx>(
    b: &Builder<'ctx>,
    ctx: &ContextRef<'ctx>,
    base: PointerValue<'ctx>,
    offset: u64,
    name: &str,
) -> Result<PointerValue<'ctx>> {
    // SAFETY (LLVM): byte offsets inside records the runtime allocated with this layout.
    Ok(unsafe { b.build_in_bounds_gep(ctx.i8_type(), base, &[ctx.i64_type().const_int(offset, false)], name)? })
}

/// `__hpvm__return(n, v...)` -> stores of `v...` into the current output record.
fn rewrite_returns(module: &Module<'_>, f: FunctionValue<'_>, desc: &contract::desc::NodeDesc) -> Result<()> {
    let ctx = module.get_context();
    let b = ctx.create_builder();
    let ptr = ctx.ptr_type(AddressSpace::default());
    for call in calls_of(f, "__hpvm__return") {
        b.position_before(&call);
        let vals = return_values(call);
        if !vals.is_empty() {
            let out = tls_pointer(module, CURRENT_OUT);
            let slot = b.build_load(ptr, out.as_pointer_value(), "out")?.into_pointer_value();
            for (v, o) in vals.iter().zip(&desc.outputs) {
                let at = gep(&b, &ctx, slot, o.offset as u64, "out.field")?;
                let st = b.build_store(at, *v)?;
                st.set_alignment(1).map_err(|e| Error::Llvm(e.to_string()))?;
            }
        }
        erase(call)?;
    }
    Ok(())
}

fn erase(inst: InstructionValue<'_>) -> Result<()> {
    if inst.get_first_use().is_some() {
        return Err(Error::Internal("erasing a value that is still used".into()));
    }
    inst.erase_from_basic_block();
    Ok(())
}

/// Emits `for (iv = lo; iv < hi; ++iv) body(iv)` at the builder's position; leaves the builder
/// after the loop.
fn counted_loop<'ctx>(
    b: &Builder<'ctx>,
    ctx: &ContextRef<'ctx>,
    f: FunctionValue<'ctx>,
    lo: IntValue<'ctx>,
    hi: IntValue<'ctx>,
    name: &str,
    body: &mut dyn FnMut(IntValue<'ctx>) -> Result<()>,
) -> Result<()> {
    let pre = b.get_insert_block().ok_or_else(|| Error::Internal("builder not positioned".into()))?;
    let head = ctx.append_basic_block(f, &format!("{name}.head"));
    let body_bb = ctx.append_basic_block(f, &format!("{name}.body"));
    let exit = ctx.append_basic_block(f, &format!("{name}.exit"));
    b.build_unconditional_branch(head)?;
    b.position_at_end(head);
    let iv = b.build_phi(ctx.i64_type(), name)?;
    iv.add_incoming(&[(&lo, pre)]);
    let ivv = iv.as_basic_value().into_int_value();
    let more = b.build_int_compare(IntPredicate::SLT, ivv, hi, &format!("{name}.more"))?;
    b.build_conditional_branch(more, body_bb, exit)?;
    b.position_at_end(body_bb);
    body(ivv)?;
    let next = b.build_int_add(ivv, ctx.i64_type().const_int(1, false), &format!("{name}.next"))?;
    let latch = b.get_insert_block().ok_or_else(|| Error::Internal("builder not positioned".into()))?;
    b.build_unconditional_branch(head)?;
    iv.add_incoming(&[(&next, latch)]);
    b.position_at_end(exit);
    Ok(())
}

fn build_entry<'ctx>(
    module: &Module<'ctx>,
    f: FunctionValue<'ctx>,
    desc: &contract::desc::NodeDesc,
) -> Result<FunctionValue<'ctx>> {
    let ctx = module.get_context();
    let b = ctx.create_builder();
    let i64t = ctx.i64_type();
    let ptr = ctx.ptr_type(AddressSpace::default());
    let ty = ctx.void_type().fn_type(&[ptr.into(), ptr.into(), ptr.into(), ptr.into()], false);
    let entry = module.add_function(&format!("hpvm.entry.{}", desc.name), ty, Some(Linkage::Internal));
    let param = |i: u32| entry.get_nth_param(i).expect("entry has 4 parameters").into_pointer_value();
    let (args, parent, bx, outs) = (param(0), param(1), param(2), param(3));
    b.position_at_end(ctx.append_basic_block(entry, "entry"));

    let node_ctx = b.build_array_alloca(ctx.i8_type(), ctx.i32_type().const_int(CTX_SIZE as u64, false), "ctx")?;
    node_ctx.as_instruction().map(|i| i.set_alignment(8));
    let load_i64 = |base: PointerValue<'ctx>, off: u64, name: &str| -> Result<IntValue<'ctx>> {
        Ok(b.build_load(i64t, gep(&b, &ctx, base, off, name)?, name)?.into_int_value())
    };
    let mut dim = Vec::new();
    let mut lo = Vec::new();
    let mut hi = Vec::new();
    for d in 0..3u64 {
        let v = load_i64(bx, BOX_DIM + 8 * d, "dim")?;
        b.build_store(gep(&b, &ctx, node_ctx, CTX_DIM + 8 * d, "ctx.dim")?, v)?;
        dim.push(v);
        lo.push(load_i64(bx, BOX_LO + 8 * d, "lo")?);
        hi.push(load_i64(bx, BOX_HI + 8 * d, "hi")?);
    }
    b.build_store(gep(&b, &ctx, node_ctx, CTX_PARENT, "ctx.parent")?, parent)?;
    let current = tls_pointer(module, CURRENT_NODE).as_pointer_value();
    let saved = b.build_load(ptr, current, "saved")?;
    b.build_store(current, node_ctx)?;

    let mut params: Vec<BasicMetadataValueEnum> = Vec::new();
    for (ty, p) in f.get_params().iter().map(|v| v.get_type()).zip(&desc.params) {
        let v = b.build_load(ty, gep(&b, &ctx, args, p.offset as u64, &p.name)?, &p.name)?;
        v.as_instruction_value().map(|i| i.set_alignment(1)).transpose().map_err(|e| Error::Llvm(e.to_string()))?;
        params.push(v.into());
    }
    let record = desc.outputs_size() as u64;
    let out_tls = (record > 0).then(|| tls_pointer(module, CURRENT_OUT).as_pointer_value());

    let mut ids = [i64t.const_zero(); 3];
    let innermost = |ids: [IntValue<'ctx>; 3]| -> Result<()> {
        for (d, id) in ids.iter().enumerate() {
            b.build_store(gep(&b, &ctx, node_ctx, CTX_ID + 8 * d as u64, "ctx.id")?, *id)?;
        }
        if let Some(out_tls) = out_tls {
            let zy = b.build_int_add(b.build_int_mul(ids[2], dim[1], "z.dy")?, ids[1], "zy")?;
            let lin = b.build_int_add(b.build_int_mul(zy, dim[0], "zy.dx")?, ids[0], "lin")?;
            let off = b.build_int_mul(lin, i64t.const_int(record, false), "out.off")?;
            let slot = unsafe { b.build_in_bounds_gep(ctx.i8_type(), outs, &[off], "out.slot")? };
            b.build_store(out_tls, slot)?;
        }
        b.build_call(f, &params, "")?;
        Ok(())
    };
    counted_loop(&b, &ctx, entry, lo[2], hi[2], "z", &mut |z| {
        ids[2] = z;
        counted_loop(&b, &ctx, entry, lo[1], hi[1], "y", &mut |y| {
            ids[1] = y;
            counted_loop(&b, &ctx, entry, lo[0], hi[0], "x", &mut |x| {
                ids[0] = x;
                innermost(ids)
            })
        })
    })?;
    b.build_store(current, saved)?;
    b.build_return(None)?;

    // The entry point is now the leaf's only caller: let it inline.
    if f.as_global_value().as_pointer_value().get_first_use().is_some_and(|u| u.get_next_use().is_none()) {
        make_inline(&ctx, f);
    }
    Ok(entry)
}
