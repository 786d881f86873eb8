//! CPU bodies for CUDA's warp operations (`hpvm_core::markers::WARP_PREFIX` functions): each
//! calls the runtime's (`hpvm_rt_warp_*`, `runtime/src/warp.rs`), which exchanges values
//! between the fibers a block's threads run as. Around the call the instance context is saved
//! and restored, as around a barrier: other instances run on this thread meanwhile. A leaf
//! that calls one runs its instances as fibers ([`uses_warps`], the description's `barrier`).
//!
//! `__activemask` calls get a number per call site: the runtime groups the lanes that reach
//! the same site on the same visit, waiting for the lanes of the warp that may still come
//! (`hpvm_runtime::fiber::active_mask`), as converged lanes execute it together.

use crate::intrinsics::SavedContext;
use crate::Result;
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::builder::Builder;
use inkwell::module::Module;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{AsValueRef, BasicValue, BasicValueEnum, FunctionValue, InstructionOpcode};

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
    /// `barrier0.<popc|and|or>`: the runtime's mode code (0, 1, 2).
    BlockVote {
        mode: i32,
    },
    /// `fns`: the position of a mask's n-th set bit from a base (`__fns`), a function of its
    /// operands alone.
    Fns,
    /// `read.ptx.sreg.laneid`, `read.ptx.sreg.warpsize`.
    Lane,
    WarpSize,
    /// `isspacep.<space>` (`__isShared`, `__isGlobal`...): whether a pointer is in `global`
    /// memory (else the block's shared memory, the thread's local memory or the constant
    /// bank). A simulated device has one memory: its blocks' shared memory is ordinary memory,
    /// as is everything else, so only `global` holds. libcu++'s `cuda::barrier` then takes
    /// its atomic path (mbarrier PTX is the GPU's), the same in every one of its calls.
    Space {
        global: bool,
    },
    /// `match.<any|all>.sync.<i32|i64>[p]`.
    Match {
        all: bool,
    },
    /// `redux.sync.<op>`: the runtime's operation code ([`contract::warp::Redux`]).
    Redux {
        op: i32,
    },
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
    if let Some(m) = rest.strip_prefix("match.") {
        let (kind, ty) = m.split_once(".sync.")?;
        let all = match (kind, ty) {
            ("any", "i32" | "i64") => false,
            ("all", "i32p" | "i64p") => true,
            _ => return None,
        };
        return Some(Op::Match { all });
    }
    if let Some(r) = rest.strip_prefix("redux.sync.") {
        let op = contract::warp::Redux::code_of(r)?;
        return Some(Op::Redux { op });
    }
    if let Some(vote) = rest.strip_prefix("barrier0.") {
        let mode = ["popc", "and", "or"].iter().position(|&m| m == vote)? as i32;
        return Some(Op::BlockVote { mode });
    }
    match rest {
        "bar.warp.sync" => Some(Op::Sync),
        "read.ptx.sreg.laneid" => Some(Op::Lane),
        "fns" => Some(Op::Fns),
        "read.ptx.sreg.warpsize" => Some(Op::WarpSize),
        "isspacep.global" => Some(Op::Space { global: true }),
        "isspacep.shared" | "isspacep.shared.cluster" | "isspacep.local" | "isspacep.const" => {
            Some(Op::Space { global: false })
        }
        _ => None,
    }
}

/// The operation a call of `f` is, if the CPU runs it.
fn cpu_op(f: FunctionValue<'_>) -> Option<Op> {
    let name = f.get_name().to_str().ok()?;
    op(name.strip_prefix(hpvm_core::markers::WARP_PREFIX)?)
}

/// Whether `f` stands for `__activemask` (`llvm.nvvm.activemask`).
fn is_activemask(f: FunctionValue<'_>) -> bool {
    f.get_name().to_str().ok().and_then(|n| n.strip_prefix(hpvm_core::markers::WARP_PREFIX)) == Some("activemask")
}

/// Whether `f` is the inline PTX statement `exit`, whose thread then ends: the runtime stops
/// its fiber, so the leaf's instances must run as fibers.
fn is_exit(f: FunctionValue<'_>) -> bool {
    f.get_name().to_bytes().starts_with(hpvm_core::markers::ASM_PREFIX.as_bytes())
        && f.get_string_attribute(AttributeLoc::Function, hpvm_core::markers::ASM_TEXT).is_some_and(|t| {
            t.get_string_value().to_str().is_ok_and(|t| t.trim().trim_end_matches(';').trim() == "exit")
        })
}

/// Whether `f` is an inline PTX strong load (`ld.acquire`, `ld.relaxed`, `ld.volatile`) or
/// `nanosleep`: a thread reading a flag in a loop, which another thread of its block sets
/// (cooperative groups' barriers between warps), or backing off in one. Its instance lets the others run first, so the leaf's
/// instances must run as fibers.
fn is_strong_load(f: FunctionValue<'_>) -> bool {
    f.get_name().to_bytes().starts_with(hpvm_core::markers::ASM_PREFIX.as_bytes())
        && f.get_string_attribute(AttributeLoc::Function, hpvm_core::markers::ASM_TEXT).is_some_and(|t| {
            t.get_string_value().to_str().is_ok_and(|t| {
                let op = t.trim().trim_start_matches('{').split_whitespace().next().unwrap_or("");
                let mut parts = op.split('.');
                // `nanosleep`, the back-off of spin loops, yields as a flag's load does.
                op == "nanosleep.u32"
                    || parts.next() == Some("ld") && parts.any(|p| matches!(p, "acquire" | "relaxed" | "volatile"))
            })
        })
}

/// The statements of `f`, an inline PTX block that shuffles, if the CPU runs them.
fn cpu_ptx(f: FunctionValue<'_>) -> Option<ptx::Block> {
    let name = f.get_name().to_str().ok()?;
    name.strip_prefix(hpvm_core::markers::ASM_PREFIX)?;
    let text = f.get_string_attribute(AttributeLoc::Function, hpvm_core::markers::ASM_TEXT)?;
    ptx::parse(text.get_string_value().to_str().ok()?)
}

/// Whether the leaf function `f` calls a warp operation the CPU runs, accesses memory
/// through `volatile`, or fences (`__threadfence_block` between the steps of a warp's scan
/// in shared memory, as HeCBench fpdc does) ([`lockstep`]): its instances must then run
/// together, as fibers.
pub fn uses_warps(f: FunctionValue<'_>) -> bool {
    f.get_basic_block_iter().flat_map(|bb| bb.get_instructions()).any(|inst| {
        is_volatile(inst)
            || inst.get_opcode() == InstructionOpcode::Fence
            || inst.get_opcode() == InstructionOpcode::Call
                && inkwell::values::CallSiteValue::try_from(inst)
                    .ok()
                    .and_then(|c| c.get_called_fn_value())
                    .is_some_and(|c| {
                        cpu_op(c).is_some_and(|o| !matches!(o, Op::Fns | Op::Space { .. }))
                            || cpu_ptx(c).is_some()
                            || is_exit(c)
                            || is_strong_load(c)
                            || is_activemask(c)
                    })
    })
}

/// Whether the leaf function `f` orders its lanes through memory alone (`volatile`
/// accesses, fences), as warp-synchronous code written before Volta does: its lanes then
/// meet again after every branch ([`lockstep`]'s `reconverge`). Leaves whose lanes talk
/// through warp operations keep in step at those operations.
pub fn synchronizes_through_memory(f: FunctionValue<'_>) -> bool {
    f.get_basic_block_iter()
        .flat_map(|bb| bb.get_instructions())
        .any(|inst| is_volatile(inst) || inst.get_opcode() == InstructionOpcode::Fence)
}

/// A `volatile` load or store.
fn is_volatile(inst: inkwell::values::InstructionValue<'_>) -> bool {
    matches!(inst.get_opcode(), InstructionOpcode::Load | InstructionOpcode::Store)
        && inst.get_volatile().unwrap_or(false)
}

/// Runs the `volatile` accesses of the leaf function `f` in lockstep across its instances,
/// and, where the leaf uses warp operations (`warp_synchronous`), its accesses through the
/// parameters in `shared` (its block's shared memory) too.
///
/// Warp-synchronous code written before Volta reduces through `volatile` shared memory with
/// no sync between its steps (`s[tid] += s[tid + 16]; s[tid] += s[tid + 8]; ...`), counting
/// on a warp's lanes making each access together: every lane reads before any lane writes.
/// Code written for tiles does the same without `volatile` between the tile's syncs
/// (`sums[i] += sums[i ^ 8]; tile.sync(); ...`, NVIDIA's dxtc): a data race in CUDA's memory
/// model, which a GPU's lanes still run as their author expects, all loads of a step before
/// its stores. Fibers run one instance at a time, so each such access first lets every other
/// instance of the block run up to its own next one (`hpvm_rt_spin`): the scheduler's passes
/// then make the n-th accesses of all lanes before any lane's (n+1)-th, as a warp does.
/// With `reconverge` (leaves that order their lanes through memory alone,
/// [`synchronizes_through_memory`]) the lanes meet again after every branch
/// ([`crate::reconverge`]), so lanes that took a branch apart (`if (lane & 1) s[i] = ...`)
/// are back in step for the accesses after it.
/// Leaves without warp operations keep their plain shared accesses free (a tiled kernel's
/// inner loop would pay a fiber switch per load); a race between two `__syncthreads` there
/// still runs lane after lane on simulated devices.
///
/// `__threadfence_block`'s single-thread fences become system-wide again here: they hold
/// while a block's instances share the CPU thread that runs them as fibers, but where a
/// target has no fibers each instance has a thread of its own.
pub fn lockstep(
    module: &Module<'_>,
    f: FunctionValue<'_>,
    warp_synchronous: bool,
    reconverge: bool,
    shared: &[u32],
) -> Result<()> {
    let ctx = module.get_context();
    let b = ctx.create_builder();
    for fence in f
        .get_basic_block_iter()
        .flat_map(|bb| bb.get_instructions())
        .filter(|i| i.get_opcode() == InstructionOpcode::Fence)
    {
        // SAFETY: a fence instruction of this function.
        unsafe { llvm_sys::core::LLVMSetAtomicSingleThread(fence.as_value_ref(), 0) };
    }
    let shared: Vec<_> = match warp_synchronous {
        true => shared.iter().filter_map(|&i| f.get_nth_param(i)).map(|p| p.as_value_ref()).collect(),
        false => Vec::new(),
    };
    let accesses: Vec<_> = f
        .get_basic_block_iter()
        .flat_map(|bb| bb.get_instructions())
        .filter(|&i| is_volatile(i) || !shared.is_empty() && accesses_one_of(i, &shared))
        .collect();
    let any = !accesses.is_empty();
    for inst in accesses {
        b.position_before(&inst);
        let saved = SavedContext::save(module, &b)?;
        b.build_call(runtime(module, "hpvm_rt_spin", ctx.void_type().fn_type(&[], false)), &[], "")?;
        saved.restore(&b)?;
    }
    if any && reconverge {
        // Accesses in lockstep stay in step only where every lane makes them: after a branch
        // some lanes took, the lanes meet again as a warp does.
        crate::reconverge::insert(module, f)?;
    }
    Ok(())
}

/// Whether `inst` is a load or store whose address may come from one of `bases`.
fn accesses_one_of(inst: inkwell::values::InstructionValue<'_>, bases: &[llvm_sys::prelude::LLVMValueRef]) -> bool {
    let address = match inst.get_opcode() {
        InstructionOpcode::Load => 0,
        InstructionOpcode::Store => 1,
        _ => return false,
    };
    // SAFETY: an operand of this module's instruction.
    hpvm_core::Val(unsafe { llvm_sys::core::LLVMGetOperand(inst.as_value_ref(), address) }).derives_from(bases)
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
    // `__activemask`: each call the runtime's, with its site's number.
    let mut site = 0u64;
    for f in module.get_functions().filter(|&f| is_activemask(f)) {
        use inkwell::values::AsValueRef;
        let calls: Vec<_> = hpvm_core::Val(f.as_value_ref())
            .users()
            .into_iter()
            .filter(|u| u.is_call())
            // SAFETY: a call instruction of this module.
            .map(|u| unsafe { inkwell::values::InstructionValue::new(u.0) })
            .collect();
        let i64t = ctx.i64_type();
        let rt = runtime(module, "hpvm_rt_warp_activemask", ctx.i32_type().fn_type(&[i64t.into()], false));
        for call in calls {
            b.position_before(&call);
            let saved = SavedContext::save(module, &b)?;
            site += 1;
            let mask = b.build_call(rt, &[i64t.const_int(site, false).into()], "activemask")?;
            saved.restore(&b)?;
            let mask = mask.try_as_basic_value().basic().expect("i32");
            use inkwell::values::AsValueRef;
            // SAFETY: the call's users take its i32; it is replaced, then erased.
            unsafe { llvm_sys::core::LLVMReplaceAllUsesWith(call.as_value_ref(), mask.as_value_ref()) };
            call.erase_from_basic_block();
        }
    }
    // Strong loads let the block's other instances run first (`hpvm_rt_spin`), then load as
    // the frontend's CPU body does.
    for f in module.get_functions().filter(|&f| is_strong_load(f) && f.count_basic_blocks() > 0) {
        let Some(first) = f.get_first_basic_block().and_then(|bb| bb.get_first_instruction()) else { continue };
        b.position_before(&first);
        let saved = SavedContext::save(module, &b)?;
        b.build_call(runtime(module, "hpvm_rt_spin", ctx.void_type().fn_type(&[], false)), &[], "")?;
        saved.restore(&b)?;
    }
    let blocks: Vec<(FunctionValue, _)> = module.get_functions().filter_map(|f| Some((f, cpu_ptx(f)?))).collect();
    for (f, (regs, stmts)) in blocks {
        // Made apart first: a block whose operands' types do not fit keeps its stopping body.
        let made = module.add_function(&format!("{}.cpu", f.get_name().to_string_lossy()), f.get_type(), None);
        b.position_at_end(ctx.append_basic_block(made, "entry"));
        match ptx_body(module, &b, made, &regs, &stmts)? {
            Some(v) => {
                match v {
                    Some(v) => b.build_return(Some(&v))?,
                    None => b.build_return(None)?,
                };
                for bb in f.get_basic_blocks() {
                    // SAFETY: the function's own blocks, replaced by a call of `made`.
                    unsafe { bb.delete() }
                        .map_err(|()| crate::Error::Llvm("cannot empty an inline PTX block".into()))?;
                }
                b.position_at_end(ctx.append_basic_block(f, "entry"));
                let args: Vec<inkwell::values::BasicMetadataValueEnum> = f.get_param_iter().map(Into::into).collect();
                match b.build_call(made, &args, "")?.try_as_basic_value().basic() {
                    Some(v) => b.build_return(Some(&v))?,
                    None => b.build_return(None)?,
                };
                f.remove_enum_attribute(AttributeLoc::Function, Attribute::get_named_enum_kind_id("noinline"));
                crate::intrinsics::make_inline(&ctx, f);
                crate::intrinsics::make_inline(&ctx, made);
            }
            // SAFETY: made above, called by nothing.
            None => unsafe { made.delete() },
        }
    }
    Ok(())
}

/// The CPU body of an inline PTX block ([`ptx`]) in `f`, positioned at its entry: `Some` of
/// its result (`None` for none), or `None` where an operand's type does not fit.
#[allow(clippy::type_complexity)]
fn ptx_body<'ctx>(
    module: &Module<'ctx>,
    b: &Builder<'ctx>,
    f: FunctionValue<'ctx>,
    regs: &[(String, ptx::Ty)],
    stmts: &[ptx::Stmt],
) -> Result<Option<Option<BasicValueEnum<'ctx>>>> {
    use ptx::{Operand, Stmt, Ty};
    let ctx = module.get_context();
    let (i1, i32t, i64t) = (ctx.bool_type(), ctx.i32_type(), ctx.i64_type());
    let ir = |t: Ty| -> BasicTypeEnum<'ctx> {
        match t {
            Ty::I32 => i32t.into(),
            Ty::F32 => ctx.f32_type().into(),
            Ty::I64 => i64t.into(),
            Ty::F64 => ctx.f64_type().into(),
            Ty::Pred => i1.into(),
        }
    };
    let ret = f.get_type().get_return_type();
    if matches!(ret, Some(BasicTypeEnum::StructType(_))) {
        return Ok(None);
    }
    let types: std::collections::HashMap<&str, BasicTypeEnum> =
        regs.iter().map(|(n, t)| (n.as_str(), ir(*t))).collect();
    let mut env: std::collections::HashMap<String, BasicValueEnum<'ctx>> = std::collections::HashMap::new();
    // Same-width conversions only (PTX's `mov.b32` of a float is its bits).
    let convert = |v: BasicValueEnum<'ctx>, to: BasicTypeEnum<'ctx>| -> Result<Option<BasicValueEnum<'ctx>>> {
        let from = v.get_type();
        if from == to {
            return Ok(Some(v));
        }
        let bits = |t: BasicTypeEnum| match t {
            BasicTypeEnum::IntType(i) => Some(i.get_bit_width()),
            BasicTypeEnum::FloatType(x) if x == ctx.f32_type() => Some(32),
            BasicTypeEnum::FloatType(x) if x == ctx.f64_type() => Some(64),
            _ => None,
        };
        match (bits(from), bits(to)) {
            (Some(a), Some(c)) if a == c && a > 1 => Ok(Some(b.build_bit_cast(v, to, "")?)),
            _ => Ok(None),
        }
    };
    let read =
        |env: &std::collections::HashMap<String, BasicValueEnum<'ctx>>, o: &Operand| -> Option<BasicValueEnum<'ctx>> {
            match o {
                Operand::Arg(0) => env.get("$0").copied(),
                Operand::Arg(n) => f.get_nth_param(n - 1),
                Operand::Reg(r) => env.get(r).copied(),
                Operand::Imm(v) => Some(i32t.const_int(*v, false).into()),
                Operand::Pair(..) => None,
            }
        };
    // A guarded statement's result: the new value where its predicate holds, else the old.
    let guarded = |env: &std::collections::HashMap<String, BasicValueEnum<'ctx>>,
                   guard: &ptx::Guard,
                   k: &str,
                   v: BasicValueEnum<'ctx>|
     -> Result<Option<BasicValueEnum<'ctx>>> {
        let Some((p, negated)) = guard else { return Ok(Some(v)) };
        let (Some(p), Some(old)) = (env.get(p).copied(), env.get(k).copied()) else { return Ok(None) };
        if p.get_type() != i1.into() || old.get_type() != v.get_type() {
            return Ok(None);
        }
        let (yes, no) = if *negated { (old, v) } else { (v, old) };
        Ok(Some(b.build_select(p.into_int_value(), yes, no, "")?))
    };
    // The type an operand is written as: its register's, or the result's for `$0`.
    let ty_of = |o: &Operand| -> Option<BasicTypeEnum<'ctx>> {
        match o {
            Operand::Arg(0) => ret,
            Operand::Reg(r) => types.get(r.as_str()).copied(),
            _ => None,
        }
    };
    let key = |o: &Operand| match o {
        Operand::Arg(0) => Some("$0".to_string()),
        Operand::Reg(r) => Some(r.clone()),
        _ => None,
    };
    // Other fibers run during the shuffles and set the thread-local context to theirs.
    let saved = SavedContext::save(module, b)?;
    let shfl = runtime(
        module,
        "hpvm_rt_warp_shfl",
        i64t.fn_type(&[i32t.into(), i32t.into(), i32t.into(), i32t.into(), i32t.into()], false),
    );
    for st in stmts {
        match st {
            Stmt::Shuffle { mode, dst, pred, src, b: bo, c, mask } => {
                let mut word = Vec::new();
                for o in [mask, src, bo, c] {
                    let Some(v) = read(&env, o) else { return Ok(None) };
                    let Some(v) = convert(v, i32t.into())? else { return Ok(None) };
                    word.push(v);
                }
                let args = [
                    i32t.const_int(*mode as u64, false).into(),
                    word[0].into(),
                    word[1].into(),
                    word[2].into(),
                    word[3].into(),
                ];
                let r = b.build_call(shfl, &args, "shfl")?.try_as_basic_value().basic().expect("i64").into_int_value();
                let v = b.build_int_truncate(r, i32t, "")?;
                let (Some(k), Some(t)) = (key(dst), ty_of(dst)) else { return Ok(None) };
                let Some(v) = convert(v.into(), t)? else { return Ok(None) };
                env.insert(k, v);
                if let Some(p) = pred {
                    let bit = b.build_right_shift(r, i64t.const_int(32, false), false, "")?;
                    env.insert(p.clone(), b.build_int_truncate(bit, i1, "valid")?.into());
                }
            }
            Stmt::Add { ty, guard, dst, x, y } => {
                let t = ir(*ty);
                let (Some(x), Some(y)) = (read(&env, x), read(&env, y)) else { return Ok(None) };
                let (Some(x), Some(y)) = (convert(x, t)?, convert(y, t)?) else { return Ok(None) };
                let sum: BasicValueEnum = match t {
                    BasicTypeEnum::FloatType(_) => {
                        b.build_float_add(x.into_float_value(), y.into_float_value(), "")?.into()
                    }
                    _ => b.build_int_add(x.into_int_value(), y.into_int_value(), "")?.into(),
                };
                let (Some(k), Some(dt)) = (key(dst), ty_of(dst)) else { return Ok(None) };
                let Some(sum) = convert(sum, dt)? else { return Ok(None) };
                let Some(v) = guarded(&env, guard, &k, sum)? else { return Ok(None) };
                env.insert(k, v);
            }
            Stmt::Bits { op, guard, dst, x, y } => {
                let (Some(x), Some(y)) = (read(&env, x), read(&env, y)) else { return Ok(None) };
                let (Some(x), Some(y)) = (convert(x, i32t.into())?, convert(y, i32t.into())?) else { return Ok(None) };
                let (x, y) = (x.into_int_value(), y.into_int_value());
                let v: BasicValueEnum = match op {
                    ptx::Bin::And => b.build_and(x, y, "")?,
                    ptx::Bin::Or => b.build_or(x, y, "")?,
                    ptx::Bin::Xor => b.build_xor(x, y, "")?,
                }
                .into();
                let (Some(k), Some(dt)) = (key(dst), ty_of(dst)) else { return Ok(None) };
                let Some(v) = convert(v, dt)? else { return Ok(None) };
                let Some(v) = guarded(&env, guard, &k, v)? else { return Ok(None) };
                env.insert(k, v);
            }
            Stmt::Not { guard, dst, x } => {
                let Some(x) = read(&env, x) else { return Ok(None) };
                let Some(x) = convert(x, i32t.into())? else { return Ok(None) };
                let v: BasicValueEnum = b.build_not(x.into_int_value(), "")?.into();
                let (Some(k), Some(dt)) = (key(dst), ty_of(dst)) else { return Ok(None) };
                let Some(v) = convert(v, dt)? else { return Ok(None) };
                let Some(v) = guarded(&env, guard, &k, v)? else { return Ok(None) };
                env.insert(k, v);
            }
            Stmt::SetP { pred, dst, x, y } => {
                let (Some(x), Some(y)) = (read(&env, x), read(&env, y)) else { return Ok(None) };
                let (Some(x), Some(y)) = (convert(x, i32t.into())?, convert(y, i32t.into())?) else { return Ok(None) };
                if types.get(dst.as_str()) != Some(&i1.into()) {
                    return Ok(None);
                }
                let v = b.build_int_compare(*pred, x.into_int_value(), y.into_int_value(), "")?;
                env.insert(dst.clone(), v.into());
            }
            Stmt::Ballot { guard, dst, pred, mask } => {
                let (Some(p), Some(m)) = (env.get(pred).copied(), read(&env, mask)) else { return Ok(None) };
                let Some(m) = convert(m, i32t.into())? else { return Ok(None) };
                if p.get_type() != i1.into() {
                    return Ok(None);
                }
                let vote =
                    runtime(module, "hpvm_rt_warp_vote", i32t.fn_type(&[i32t.into(), i32t.into(), i32t.into()], false));
                let p = b.build_int_z_extend(p.into_int_value(), i32t, "")?;
                let args = [i32t.const_int(3, false).into(), m.into(), p.into()];
                let v = b.build_call(vote, &args, "ballot")?.try_as_basic_value().basic().expect("i32");
                let (Some(k), Some(dt)) = (key(dst), ty_of(dst)) else { return Ok(None) };
                let Some(v) = convert(v, dt)? else { return Ok(None) };
                let Some(v) = guarded(&env, guard, &k, v)? else { return Ok(None) };
                env.insert(k, v);
            }
            Stmt::Mov { ty, dst, src } => {
                let t = ir(*ty);
                let v = match src {
                    Operand::Pair(lo, hi) => {
                        let (Some(lo), Some(hi)) = (env.get(lo).copied(), env.get(hi).copied()) else {
                            return Ok(None);
                        };
                        let (Some(lo), Some(hi)) = (convert(lo, i32t.into())?, convert(hi, i32t.into())?) else {
                            return Ok(None);
                        };
                        let lo = b.build_int_z_extend(lo.into_int_value(), i64t, "")?;
                        let hi = b.build_int_z_extend(hi.into_int_value(), i64t, "")?;
                        let hi = b.build_left_shift(hi, i64t.const_int(32, false), "")?;
                        b.build_or(lo, hi, "pair")?.into()
                    }
                    o => {
                        let Some(v) = read(&env, o) else { return Ok(None) };
                        let Some(v) = convert(v, t)? else { return Ok(None) };
                        v
                    }
                };
                match dst {
                    Operand::Pair(lo, hi) => {
                        let Some(w) = convert(v, i64t.into())? else { return Ok(None) };
                        let w = w.into_int_value();
                        let l = b.build_int_truncate(w, i32t, "lo")?;
                        let h = b.build_right_shift(w, i64t.const_int(32, false), false, "")?;
                        let h = b.build_int_truncate(h, i32t, "hi")?;
                        for (name, part) in [(lo, l), (hi, h)] {
                            let Some(t) = types.get(name.as_str()).copied() else { return Ok(None) };
                            let Some(part) = convert(part.into(), t)? else { return Ok(None) };
                            env.insert(name.clone(), part);
                        }
                    }
                    d => {
                        let (Some(k), Some(dt)) = (key(d), ty_of(d)) else { return Ok(None) };
                        let Some(v) = convert(v, dt)? else { return Ok(None) };
                        env.insert(k, v);
                    }
                }
            }
        }
    }
    saved.restore(b)?;
    Ok(match ret {
        Some(_) => env.get("$0").copied().map(Some),
        None => Some(None),
    })
}

/// The runtime function `name` of type `ty`, declared once.
fn runtime<'ctx>(module: &Module<'ctx>, name: &str, ty: inkwell::types::FunctionType<'ctx>) -> FunctionValue<'ctx> {
    module.get_function(name).unwrap_or_else(|| module.add_function(name, ty, None))
}

/// `f`'s pair result: `value`, and the predicate in bit 32 of the runtime's answer `r`.
fn with_predicate<'ctx>(
    b: &Builder<'ctx>,
    f: FunctionValue<'ctx>,
    value: BasicValueEnum<'ctx>,
    r: inkwell::values::IntValue<'ctx>,
) -> Result<BasicValueEnum<'ctx>> {
    let ctx = f.get_type().get_context();
    let p = b.build_right_shift(r, ctx.i64_type().const_int(32, false), false, "p")?;
    let p = b.build_int_truncate(p, ctx.bool_type(), "pred")?;
    let Some(BasicTypeEnum::StructType(pair)) = f.get_type().get_return_type() else {
        return Err(crate::Error::Internal(format!("{} returns no pair", f.get_name().to_string_lossy())));
    };
    let agg = b.build_insert_value(pair.get_undef(), value, 0, "")?;
    Ok(b.build_insert_value(agg, p, 1, "")?.as_basic_value_enum())
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
    if let Op::Space { global } = op {
        return Ok(Some(i1.const_int(u64::from(global), false).into()));
    }
    // Other fibers run during the call and set the thread-local context to theirs.
    let saved = SavedContext::save(module, b)?;
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
            Some(if predicate { with_predicate(b, f, v, r)? } else { v })
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
        Op::BlockVote { mode } => {
            let rt = runtime(module, "hpvm_rt_block_vote", i32t.fn_type(&[i32t.into(), i32t.into()], false));
            let pred = param(0)?.into_int_value();
            let pred =
                if pred.get_type().get_bit_width() == 32 { pred } else { b.build_int_z_extend(pred, i32t, "pred")? };
            let args = [i32t.const_int(mode as u64, false).into(), pred.into()];
            Some(b.build_call(rt, &args, "count")?.try_as_basic_value().basic().expect("i32"))
        }
        Op::Sync => {
            let rt = runtime(module, "hpvm_rt_warp_sync", ctx.void_type().fn_type(&[i32t.into()], false));
            b.build_call(rt, &[param(0)?.into()], "")?;
            None
        }
        Op::Fns => {
            let rt = runtime(module, "hpvm_rt_fns", i32t.fn_type(&[i32t.into(), i32t.into(), i32t.into()], false));
            let args = [param(0)?.into(), param(1)?.into(), param(2)?.into()];
            Some(b.build_call(rt, &args, "fns")?.try_as_basic_value().basic().expect("i32"))
        }
        Op::Lane => {
            let rt = runtime(module, "hpvm_rt_warp_lane", i32t.fn_type(&[], false));
            Some(b.build_call(rt, &[], "lane")?.try_as_basic_value().basic().expect("i32"))
        }
        Op::Match { all } => {
            let rt =
                runtime(module, "hpvm_rt_warp_match", i64t.fn_type(&[i32t.into(), i32t.into(), i64t.into()], false));
            let value = param(1)?.into_int_value();
            let value = if value.get_type().get_bit_width() == 64 {
                value
            } else {
                b.build_int_z_extend(value, i64t, "value")?
            };
            let args = [i32t.const_int(u64::from(all), false).into(), param(0)?.into(), value.into()];
            let r = b.build_call(rt, &args, "match")?.try_as_basic_value().basic().expect("i64").into_int_value();
            let lanes = b.build_int_truncate(r, i32t, "lanes")?;
            Some(if all { with_predicate(b, f, lanes.into(), r)? } else { lanes.into() })
        }
        Op::Redux { op } => {
            let rt =
                runtime(module, "hpvm_rt_warp_redux", i32t.fn_type(&[i32t.into(), i32t.into(), i32t.into()], false));
            // LLVM's operands: the value, then the mask.
            let args = [i32t.const_int(op as u64, false).into(), param(1)?.into(), param(0)?.into()];
            Some(b.build_call(rt, &args, "redux")?.try_as_basic_value().basic().expect("i32"))
        }
        Op::WarpSize | Op::Space { .. } => unreachable!("returned above"),
    };
    saved.restore(b)?;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use inkwell::values::AnyValue;

    #[test]
    fn the_operations_the_cpu_runs_are_known_by_name() {
        assert_eq!(op("shfl.sync.down.i32"), Some(Op::Shuffle { mode: 1, float: false, predicate: false }));
        assert_eq!(op("shfl.sync.idx.f32p"), Some(Op::Shuffle { mode: 3, float: true, predicate: true }));
        assert_eq!(op("shfl.sync.bfly.f32"), Some(Op::Shuffle { mode: 2, float: true, predicate: false }));
        assert_eq!(op("vote.ballot.sync"), Some(Op::Vote { mode: 3 }));
        assert_eq!(op("vote.uni.sync"), Some(Op::Vote { mode: 2 }));
        assert_eq!(op("bar.warp.sync"), Some(Op::Sync));
        assert_eq!(op("barrier0.and"), Some(Op::BlockVote { mode: 1 }));
        assert_eq!(op("activemask"), None);
        assert_eq!(op("match.any.sync.i32"), Some(Op::Match { all: false }));
        assert_eq!(op("match.all.sync.i64p"), Some(Op::Match { all: true }));
        assert_eq!(op("match.all.sync.i32"), None);
        assert_eq!(op("redux.sync.umax"), Some(Op::Redux { op: 4 }));
        assert_eq!(op("redux.sync.xor"), Some(Op::Redux { op: 7 }));
        assert_eq!(op("redux.sync.fadd"), None);
        assert_eq!(op("shfl.sync.down.i64"), None);
        assert_eq!(op("isspacep.shared"), Some(Op::Space { global: false }));
        assert_eq!(op("isspacep.shared.cluster"), Some(Op::Space { global: false }));
        assert_eq!(op("isspacep.global"), Some(Op::Space { global: true }));
        assert_eq!(op("isspacep.texture"), None);
    }

    /// Spins go before `volatile` accesses, and before accesses through shared memory (at
    /// any offset, through a select) only in a leaf that uses warp operations.
    #[test]
    fn lockstep_spins_before_volatile_and_warp_synchronous_shared_accesses() {
        let ir = r#"
define void @leaf(ptr %s, ptr %g, i64 %i, i1 %c) {
  %p = getelementptr float, ptr %s, i64 %i
  %v = load float, ptr %p
  %q = select i1 %c, ptr %p, ptr %s
  store float %v, ptr %q
  store float %v, ptr %g
  %w = load volatile float, ptr %g
  ret void
}
"#;
        let spins = |warp_synchronous: bool| {
            let ctx = inkwell::context::Context::create();
            let buf = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "leaf");
            let m = ctx.create_module_from_ir(buf).expect("valid IR");
            let f = m.get_function("leaf").expect("leaf");
            lockstep(&m, f, warp_synchronous, false, &[0]).expect("lockstep");
            let text = f.print_to_string().to_string();
            let order: Vec<&str> = text
                .lines()
                .filter_map(|l| {
                    let l = l.trim();
                    (l.contains("hpvm_rt_spin")
                        || l.starts_with("store float")
                        || l.contains("= load float")
                        || l.contains("= load volatile"))
                    .then_some(l)
                })
                .collect();
            order.iter().map(|l| if l.contains("hpvm_rt_spin") { "spin" } else { "access" }).collect::<Vec<_>>()
        };
        assert_eq!(spins(false), ["access", "access", "access", "spin", "access"]);
        assert_eq!(spins(true), ["spin", "access", "spin", "access", "access", "spin", "access"]);
    }
}

/// Inline PTX blocks that shuffle (CUB writes its warp reductions and scans so: a
/// `shfl.sync` into a register and a predicate, then a predicated `add`), read as a few
/// statements the CPU runs exactly: `.reg` declarations, `shfl.sync.<mode>.b32`, `add`,
/// `mov` (with `{lo, hi}` pairs of 32-bit halves). Any other statement, and the block keeps
/// the frontend's stopping CPU body.
mod ptx {
    /// A register's type.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Ty {
        I32,
        F32,
        I64,
        F64,
        Pred,
    }

    impl Ty {
        fn of(suffix: &str) -> Option<Ty> {
            Some(match suffix {
                "u32" | "s32" | "b32" => Ty::I32,
                "f32" => Ty::F32,
                "u64" | "s64" | "b64" => Ty::I64,
                "f64" => Ty::F64,
                "pred" => Ty::Pred,
                _ => return None,
            })
        }
    }

    /// An operand: a register, an operand of the asm (`$n`), or a pair of 32-bit halves.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum Operand {
        Reg(String),
        Arg(u32),
        Pair(String, String),
        Imm(u64),
    }

    /// A guard: the predicate register, and whether it is negated (`@!p`).
    pub type Guard = Option<(String, bool)>;

    /// Two-operand integer operations.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Bin {
        And,
        Or,
        Xor,
    }

    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum Stmt {
        Shuffle {
            mode: i32,
            dst: Operand,
            pred: Option<String>,
            src: Operand,
            b: Operand,
            c: Operand,
            mask: Operand,
        },
        Add {
            ty: Ty,
            guard: Guard,
            dst: Operand,
            x: Operand,
            y: Operand,
        },
        Mov {
            ty: Ty,
            dst: Operand,
            src: Operand,
        },
        Bits {
            op: Bin,
            guard: Guard,
            dst: Operand,
            x: Operand,
            y: Operand,
        },
        Not {
            guard: Guard,
            dst: Operand,
            x: Operand,
        },
        /// `setp.<cmp>.<u32|s32> p, x, y`: LLVM's integer predicate.
        SetP {
            pred: inkwell::IntPredicate,
            dst: String,
            x: Operand,
            y: Operand,
        },
        /// `vote.ballot.sync.b32 d, p, mask`.
        Ballot {
            guard: Guard,
            dst: Operand,
            pred: String,
            mask: Operand,
        },
    }

    /// A block's registers (declared by `.reg`) and statements.
    pub type Block = (Vec<(String, Ty)>, Vec<Stmt>);

    /// The block's registers and statements; `None` where any statement is another.
    pub fn parse(text: &str) -> Option<Block> {
        let text = text.trim();
        let text = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')).unwrap_or(text);
        let (mut regs, mut stmts) = (Vec::new(), Vec::new());
        for s in text.split(';').map(|s| s.split_whitespace().collect::<Vec<_>>().join(" ")).filter(|s| !s.is_empty()) {
            if let Some(decl) = s.strip_prefix(".reg .") {
                let (ty, names) = decl.split_once(' ')?;
                let ty = Ty::of(ty)?;
                for n in names.split(',') {
                    regs.push((n.trim().to_string(), ty));
                }
                continue;
            }
            let (guard, s): (Guard, String) = match s.strip_prefix('@') {
                Some(rest) => {
                    let (p, rest) = rest.split_once(' ')?;
                    let (p, negated) = match p.strip_prefix('!') {
                        Some(p) => (p, true),
                        None => (p, false),
                    };
                    (Some((p.to_string(), negated)), rest.to_string())
                }
                None => (None, s),
            };
            let (op, operands) = s.split_once(' ')?;
            let ops = operands_of(operands)?;
            let parts: Vec<&str> = op.split('.').collect();
            match parts.as_slice() {
                ["shfl", "sync", mode, "b32"] if guard.is_none() && ops.len() == 5 => {
                    let mode = ["up", "down", "bfly", "idx"].iter().position(|m| m == mode)? as i32;
                    let (dst, pred) = match ops[0].split_once('|') {
                        Some((d, p)) => (operand(d)?, Some(p.trim().to_string())),
                        None => (operand(&ops[0])?, None),
                    };
                    stmts.push(Stmt::Shuffle {
                        mode,
                        dst,
                        pred,
                        src: operand(&ops[1])?,
                        b: operand(&ops[2])?,
                        c: operand(&ops[3])?,
                        mask: operand(&ops[4])?,
                    });
                }
                ["add", ty] if ops.len() == 3 => stmts.push(Stmt::Add {
                    ty: Ty::of(ty).filter(|&t| t != Ty::Pred)?,
                    guard,
                    dst: operand(&ops[0])?,
                    x: operand(&ops[1])?,
                    y: operand(&ops[2])?,
                }),
                ["mov", ty] if guard.is_none() && ops.len() == 2 => {
                    stmts.push(Stmt::Mov { ty: Ty::of(ty)?, dst: operand(&ops[0])?, src: operand(&ops[1])? })
                }
                [op @ ("and" | "or" | "xor"), "b32"] if ops.len() == 3 => stmts.push(Stmt::Bits {
                    op: match *op {
                        "and" => Bin::And,
                        "or" => Bin::Or,
                        _ => Bin::Xor,
                    },
                    guard,
                    dst: operand(&ops[0])?,
                    x: operand(&ops[1])?,
                    y: operand(&ops[2])?,
                }),
                ["not", "b32"] if ops.len() == 2 => {
                    stmts.push(Stmt::Not { guard, dst: operand(&ops[0])?, x: operand(&ops[1])? })
                }
                ["setp", cmp, ty @ ("u32" | "s32" | "b32")] if guard.is_none() && ops.len() == 3 => {
                    use inkwell::IntPredicate as P;
                    let signed = *ty == "s32";
                    let pred = match *cmp {
                        "eq" => P::EQ,
                        "ne" => P::NE,
                        "lt" if signed => P::SLT,
                        "le" if signed => P::SLE,
                        "gt" if signed => P::SGT,
                        "ge" if signed => P::SGE,
                        "lt" => P::ULT,
                        "le" => P::ULE,
                        "gt" => P::UGT,
                        "ge" => P::UGE,
                        _ => return None,
                    };
                    let Operand::Reg(dst) = operand(&ops[0])? else { return None };
                    stmts.push(Stmt::SetP { pred, dst, x: operand(&ops[1])?, y: operand(&ops[2])? });
                }
                ["vote", "ballot", "sync", "b32"] | ["vote", "sync", "ballot", "b32"] if ops.len() == 3 => {
                    let Operand::Reg(pred) = operand(&ops[1])? else { return None };
                    stmts.push(Stmt::Ballot { guard, dst: operand(&ops[0])?, pred, mask: operand(&ops[2])? });
                }
                _ => return None,
            }
        }
        stmts.iter().any(|s| matches!(s, Stmt::Shuffle { .. } | Stmt::Ballot { .. })).then_some((regs, stmts))
    }

    /// Operands split at commas outside braces.
    fn operands_of(text: &str) -> Option<Vec<String>> {
        let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0);
        for ch in text.chars() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.push(std::mem::take(&mut cur).trim().to_string());
                    continue;
                }
                _ => {}
            }
            cur.push(ch);
        }
        out.push(cur.trim().to_string());
        (depth == 0).then_some(out)
    }

    fn operand(text: &str) -> Option<Operand> {
        let text = text.trim();
        if let Some(pair) = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
            let (lo, hi) = pair.split_once(',')?;
            return Some(Operand::Pair(lo.trim().to_string(), hi.trim().to_string()));
        }
        if let Some(n) = text.strip_prefix('$') {
            return n.parse().ok().map(Operand::Arg);
        }
        if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            return u64::from_str_radix(hex, 16).ok().map(Operand::Imm);
        }
        if text.starts_with(|c: char| c.is_ascii_digit()) {
            return text.parse().ok().map(Operand::Imm);
        }
        let ok = !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        ok.then(|| Operand::Reg(text.to_string()))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn cub_reduction_steps_parse() {
            let step = "{  .reg .u32 r0;  .reg .pred p;  shfl.sync.down.b32 r0|p, $1, $2, $3, $5;  \
                        @p add.u32 r0, r0, $4;  mov.u32 $0, r0;}";
            let (regs, stmts) = parse(step).expect("parses");
            assert_eq!(regs, [("r0".to_string(), Ty::I32), ("p".to_string(), Ty::Pred)]);
            assert_eq!(stmts.len(), 3);
            assert!(matches!(&stmts[0], Stmt::Shuffle { mode: 1, pred: Some(p), .. } if p == "p"));
            let wide = "{ .reg .u32 lo; .reg .u32 hi; .reg .pred p; mov.b64 {lo, hi}, $1; \
                        shfl.sync.down.b32 lo|p, lo, $2, $3, $4; shfl.sync.down.b32 hi|p, hi, $2, $3, $4; \
                        mov.b64 $0, {lo, hi}; @p add.u64 $0, $0, $1; }";
            let (_, stmts) = parse(wide).expect("parses");
            assert_eq!(
                stmts[0],
                Stmt::Mov { ty: Ty::I64, dst: Operand::Pair("lo".into(), "hi".into()), src: Operand::Arg(1) }
            );
            assert!(parse("shfl.sync.down.b32 $0, $1, $2, $3, $4;").is_some());
            // CUB's MatchAny step: a ballot of whether the lane's bits are set.
            let step = ".reg .pred p; and.b32 $0, $1, $2; setp.ne.u32 p, $0, 0; \
                        vote.ballot.sync.b32 $0, p, 0xffffffff; @!p not.b32 $0, $0;";
            let (_, stmts) = parse(step).expect("parses");
            assert_eq!(stmts.len(), 4);
            assert!(matches!(&stmts[3], Stmt::Not { guard: Some((p, true)), .. } if p == "p"));
            // Other statements, or no shuffle at all: not taken.
            assert!(parse("{ .reg .u32 r0; shfl.sync.down.b32 r0, $1, $2, $3, $4; mul.lo.u32 $0, r0, r0; }").is_none());
            assert!(parse("mov.u32 $0, $1;").is_none());
        }
    }
}
