//! CPU bodies for CUDA's warp operations (`hpvm_core::cuda::WARP_PREFIX` functions): each
//! calls the runtime's (`hpvm_rt_warp_*`, `runtime/src/warp.rs`), which exchanges values
//! between the fibers a block's threads run as. Around the call the instance context is saved
//! and restored, as around a barrier: other instances run on this thread meanwhile. A leaf
//! that calls one runs its instances as fibers ([`uses_warps`], the description's `barrier`).
//!
//! Operations without a CPU body here (`__activemask`, `__match_*_sync`, `__reduce_*_sync`)
//! keep the frontend's, which stops the program naming why.

use crate::intrinsics::{tls_pointer, CURRENT_NODE, CURRENT_OUT};
use crate::Result;
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::builder::Builder;
use inkwell::module::Module;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValue, BasicValueEnum, FunctionValue, InstructionOpcode};
use inkwell::AddressSpace;

/// A warp operation the CPU runs, from the name after `llvm.nvvm.`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// `shfl.sync.<mode>.<i32|f32>[p]`: the runtime's mode code, a float, a predicate out.
    Shuffle {
        mode: i32,
        float: bool,
        predicate: bool,
    },
    /// `vote.<all|any|uni|ballot>.sync`.
    Vote {
        mode: i32,
    },
    /// `bar.warp.sync`.
    Sync,
    /// `read.ptx.sreg.laneid`, `read.ptx.sreg.warpsize`.
    Lane,
    WarpSize,
}

fn op(rest: &str) -> Option<Op> {
    if let Some(shfl) = rest.strip_prefix("shfl.sync.") {
        let (mode, ty) = shfl.split_once('.')?;
        let mode = ["up", "down", "bfly", "idx"].iter().position(|&m| m == mode)? as i32;
        let (float, predicate) = match ty {
            "i32" => (false, false),
            "f32" => (true, false),
            "i32p" => (false, true),
            "f32p" => (true, true),
            _ => return None,
        };
        return Some(Op::Shuffle { mode, float, predicate });
    }
    if let Some(vote) = rest.strip_prefix("vote.").and_then(|v| v.strip_suffix(".sync")) {
        let mode = ["all", "any", "uni", "ballot"].iter().position(|&m| m == vote)? as i32;
        return Some(Op::Vote { mode });
    }
    match rest {
        "bar.warp.sync" => Some(Op::Sync),
        "read.ptx.sreg.laneid" => Some(Op::Lane),
        "read.ptx.sreg.warpsize" => Some(Op::WarpSize),
        _ => None,
    }
}

/// The operation a call of `f` is, if the CPU runs it.
fn cpu_op(f: FunctionValue<'_>) -> Option<Op> {
    let name = f.get_name().to_str().ok()?;
    op(name.strip_prefix(hpvm_core::cuda::WARP_PREFIX)?)
}

/// Whether the leaf function `f` calls a warp operation the CPU runs: its instances must then
/// run together, as fibers.
pub fn uses_warps(f: FunctionValue<'_>) -> bool {
    f.get_basic_block_iter().flat_map(|bb| bb.get_instructions()).any(|inst| {
        inst.get_opcode() == InstructionOpcode::Call
            && inkwell::values::CallSiteValue::try_from(inst)
                .ok()
                .and_then(|c| c.get_called_fn_value())
                .is_some_and(|c| cpu_op(c).is_some())
    })
}

/// Gives every warp operation the module has and the CPU runs its CPU body.
pub fn define(module: &Module<'_>) -> Result<()> {
    let ctx = module.get_context();
    let b = ctx.create_builder();
    let ops: Vec<(FunctionValue, Op)> = module.get_functions().filter_map(|f| Some((f, cpu_op(f)?))).collect();
    for (f, op) in ops {
        for bb in f.get_basic_blocks() {
            // SAFETY: the function's own blocks (the frontend's stopping body), replaced below.
            unsafe { bb.delete() }.map_err(|()| crate::Error::Llvm("cannot empty a warp operation".into()))?;
        }
        b.position_at_end(ctx.append_basic_block(f, "entry"));
        let v = body(module, &b, f, op)?;
        match v {
            Some(v) => b.build_return(Some(&v))?,
            None => b.build_return(None)?,
        };
        f.remove_enum_attribute(AttributeLoc::Function, Attribute::get_named_enum_kind_id("noinline"));
        crate::intrinsics::make_inline(&ctx, f);
    }
    Ok(())
}

/// The runtime function `name` of type `ty`, declared once.
fn runtime<'ctx>(module: &Module<'ctx>, name: &str, ty: inkwell::types::FunctionType<'ctx>) -> FunctionValue<'ctx> {
    module.get_function(name).unwrap_or_else(|| module.add_function(name, ty, None))
}

fn body<'ctx>(
    module: &Module<'ctx>,
    b: &Builder<'ctx>,
    f: FunctionValue<'ctx>,
    op: Op,
) -> Result<Option<BasicValueEnum<'ctx>>> {
    let ctx = module.get_context();
    let (i1, i32t, i64t, f32t) = (ctx.bool_type(), ctx.i32_type(), ctx.i64_type(), ctx.f32_type());
    let param = |i: u32| {
        f.get_nth_param(i).ok_or_else(|| crate::Error::Internal(format!("warp operation without operand {i}")))
    };
    if op == Op::WarpSize {
        return Ok(Some(i32t.const_int(32, false).into()));
    }
    // Other fibers run during the call and set the thread-local context to theirs.
    let ptr = ctx.ptr_type(AddressSpace::default());
    let node = tls_pointer(module, CURRENT_NODE).as_pointer_value();
    let out = tls_pointer(module, CURRENT_OUT).as_pointer_value();
    let saved_node = b.build_load(ptr, node, "saved.node")?;
    let saved_out = b.build_load(ptr, out, "saved.out")?;
    let result: Option<BasicValueEnum> = match op {
        Op::Shuffle { mode, float, predicate } => {
            let rt = runtime(
                module,
                "hpvm_rt_warp_shfl",
                i64t.fn_type(&[i32t.into(), i32t.into(), i32t.into(), i32t.into(), i32t.into()], false),
            );
            let value = param(1)?;
            let bits =
                if float { b.build_bit_cast(value, i32t, "bits")?.into_int_value() } else { value.into_int_value() };
            let args = [
                i32t.const_int(mode as u64, false).into(),
                param(0)?.into(),
                bits.into(),
                param(2)?.into(),
                param(3)?.into(),
            ];
            let r = b.build_call(rt, &args, "shfl")?.try_as_basic_value().basic().expect("i64").into_int_value();
            let v = b.build_int_truncate(r, i32t, "value")?;
            let v: BasicValueEnum = if float { b.build_bit_cast(v, f32t, "float")? } else { v.into() };
            if predicate {
                let p = b.build_right_shift(r, i64t.const_int(32, false), false, "p")?;
                let p = b.build_int_truncate(p, i1, "valid")?;
                let Some(BasicTypeEnum::StructType(pair)) = f.get_type().get_return_type() else {
                    return Err(crate::Error::Internal("a predicated shuffle returns a pair".into()));
                };
                let agg = b.build_insert_value(pair.get_undef(), v, 0, "")?;
                Some(b.build_insert_value(agg, p, 1, "")?.as_basic_value_enum())
            } else {
                Some(v)
            }
        }
        Op::Vote { mode } => {
            let rt =
                runtime(module, "hpvm_rt_warp_vote", i32t.fn_type(&[i32t.into(), i32t.into(), i32t.into()], false));
            let pred = b.build_int_z_extend(param(1)?.into_int_value(), i32t, "pred")?;
            let args = [i32t.const_int(mode as u64, false).into(), param(0)?.into(), pred.into()];
            let r = b.build_call(rt, &args, "vote")?.try_as_basic_value().basic().expect("i32").into_int_value();
            let ballot = mode == 3;
            Some(if ballot { r.into() } else { b.build_int_truncate(r, i1, "vote")?.into() })
        }
        Op::Sync => {
            let rt = runtime(module, "hpvm_rt_warp_sync", ctx.void_type().fn_type(&[i32t.into()], false));
            b.build_call(rt, &[param(0)?.into()], "")?;
            None
        }
        Op::Lane => {
            let rt = runtime(module, "hpvm_rt_warp_lane", i32t.fn_type(&[], false));
            Some(b.build_call(rt, &[], "lane")?.try_as_basic_value().basic().expect("i32"))
        }
        Op::WarpSize => unreachable!("returned above"),
    };
    b.build_store(node, saved_node)?;
    b.build_store(out, saved_out)?;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operations_the_cpu_runs_are_known_by_name() {
        assert_eq!(op("shfl.sync.down.i32"), Some(Op::Shuffle { mode: 1, float: false, predicate: false }));
        assert_eq!(op("shfl.sync.idx.f32p"), Some(Op::Shuffle { mode: 3, float: true, predicate: true }));
        assert_eq!(op("shfl.sync.bfly.f32"), Some(Op::Shuffle { mode: 2, float: true, predicate: false }));
        assert_eq!(op("vote.ballot.sync"), Some(Op::Vote { mode: 3 }));
        assert_eq!(op("vote.uni.sync"), Some(Op::Vote { mode: 2 }));
        assert_eq!(op("bar.warp.sync"), Some(Op::Sync));
        assert_eq!(op("activemask"), None);
        assert_eq!(op("match.any.sync.i32"), None);
        assert_eq!(op("shfl.sync.down.i64"), None);
    }
}
