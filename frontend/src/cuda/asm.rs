//! Inline PTX in kernels (`asm("...")`, and CUDA's own headers: half precision is inline PTX
//! underneath).
//!
//! A kernel's code serves two backends, the GPU's and the CPU's (simulated devices, the host),
//! and PTX means something only to the first. Each inline PTX statement becomes one of:
//! - **portable code**, for the forms whose meaning LLVM IR states exactly on both backends:
//!   the lane and warp of a thread, the warp size, conversions between `f16`, `f32` and `f64`
//!   in round-to-nearest, packing two halves into 32 bits and back, `min`/`max`/`neg`/`abs`,
//!   the cycle counter; the NVPTX backend turns these back into the same instructions;
//! - **a call of portable code** for texture fetches (`tex.*`), which run in software on both
//!   backends (`textures.h`, [`texture`]);
//! - **a two-bodied function** `hpvm.asm.<n>` for every other form: the GPU backend gives it
//!   the statement as written (`transform/src/gpu.rs`); its CPU body stops the program naming
//!   the statement and its line (`hpvm_rt_asm_unsupported`), since running a CPU device
//!   without its effect would compute a wrong result silently.
//!
//! The statement, its constraints and whether it has side effects travel with the function as
//! string attributes ([`ASM_TEXT`], [`ASM_CONSTRAINTS`]), which survive the module's cloning.

use crate::{Error, Result};
use hpvm_core::markers::{ASM_CONSTRAINTS, ASM_PREFIX, ASM_TEXT};
use hpvm_core::Val;
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::builder::Builder;
use inkwell::module::{Linkage, Module};
use inkwell::types::AsTypeRef;
use inkwell::types::{AnyType, AnyTypeEnum, BasicTypeEnum};
use inkwell::values::{AsValueRef, BasicMetadataValueEnum, BasicValue, BasicValueEnum, InstructionValue, IntValue};
use llvm_sys::core::*;
use llvm_sys::debuginfo::{LLVMInstructionGetDebugLoc, LLVMInstructionSetDebugLoc};
use llvm_sys::prelude::*;

/// The PTX text of an inline asm value, its constraints and whether it has side effects.
///
/// # Safety
/// `asm` is an inline asm value.
unsafe fn parts(asm: LLVMValueRef) -> (String, String, bool) {
    let mut len = 0usize;
    let text = LLVMGetInlineAsmAsmString(asm, &mut len);
    let text = String::from_utf8_lossy(std::slice::from_raw_parts(text as *const u8, len)).into_owned();
    let mut len = 0usize;
    let cons = LLVMGetInlineAsmConstraintString(asm, &mut len);
    let cons = String::from_utf8_lossy(std::slice::from_raw_parts(cons as *const u8, len)).into_owned();
    (text, cons, LLVMGetInlineAsmHasSideEffects(asm) != 0)
}

/// The statement with braces, comments, line breaks and the final `;` gone and blanks
/// collapsed: `{  cvt.rn.f16.f32 $0, $1;}\n` is `cvt.rn.f16.f32 $0, $1`.
fn normalize(text: &str) -> String {
    let no_comments: String = text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join(" ");
    let body = no_comments.trim().trim_start_matches('{').trim_end_matches('}').trim().trim_end_matches(';').trim();
    body.split_whitespace().collect::<Vec<_>>().join(" ").replace(" ,", ",")
}

/// `atom.OP[.SEM][.SCOPE][.SPACE].TYPE $0, [$1], $2` and `red.OP... [$0], $1` (cooperative
/// groups' barriers between warps: `atom.or.acq_rel.cta.b32`, `red.and.release.cta.b32`): one
/// atomic read-modify-write, sequentially consistent (the strongest of the semantics PTX
/// names, which every scope contains). `Some(Some(old))` for `atom`, `Some(None)` for `red`,
/// `None` for other statements or operand types.
fn atomic<'ctx>(
    dev: &Module<'ctx>,
    b: &Builder<'ctx>,
    stmt: &str,
    params: &[BasicValueEnum<'ctx>],
    ret: AnyTypeEnum<'ctx>,
) -> Result<Option<Option<BasicValueEnum<'ctx>>>> {
    use llvm_sys::LLVMAtomicRMWBinOp::*;
    let ctx = dev.get_context();
    let Some((op, operands)) = stmt.split_once(' ') else { return Ok(None) };
    let mut parts = op.split('.');
    let returns = match parts.next() {
        Some("atom") => true,
        Some("red") => false,
        _ => return Ok(None),
    };
    let (mut rmw, mut ty) = (None, None);
    for p in parts {
        match p {
            "relaxed" | "acquire" | "release" | "acq_rel" | "cta" | "gpu" | "sys" | "cluster" | "global" | "shared" => {
            }
            "add" | "or" | "and" | "xor" | "exch" | "min" | "max" if rmw.is_none() => rmw = Some(p),
            "u32" | "s32" | "b32" | "u64" | "s64" | "b64" | "f32" | "f64" if ty.is_none() => ty = Some(p),
            _ => return Ok(None),
        }
    }
    let (Some(rmw), Some(ty)) = (rmw, ty) else { return Ok(None) };
    let float = ty.starts_with('f');
    let signed = ty.starts_with('s');
    let bin = match (rmw, float) {
        ("add", false) => LLVMAtomicRMWBinOpAdd,
        ("add", true) => LLVMAtomicRMWBinOpFAdd,
        (_, true) => return Ok(None),
        ("or", _) => LLVMAtomicRMWBinOpOr,
        ("and", _) => LLVMAtomicRMWBinOpAnd,
        ("xor", _) => LLVMAtomicRMWBinOpXor,
        ("exch", _) => LLVMAtomicRMWBinOpXchg,
        ("min", _) if signed => LLVMAtomicRMWBinOpMin,
        ("max", _) if signed => LLVMAtomicRMWBinOpMax,
        ("min", _) => LLVMAtomicRMWBinOpUMin,
        _ => LLVMAtomicRMWBinOpUMax,
    };
    let ops = split_operands(operands);
    let index = |o: &str| o.trim().strip_prefix('$').and_then(|n| n.parse::<usize>().ok());
    let address = |o: &str| o.trim().strip_prefix('[').and_then(|a| a.strip_suffix(']')).and_then(index);
    // The result, if any, is the asm's operand 0 and the function's return value; the
    // inputs are the function's parameters, numbered after it.
    let (addr, value) = match (returns, ops.as_slice()) {
        (true, [d, a, v]) if index(d) == Some(0) => (address(a), index(v)),
        (false, [a, v]) => (address(a), index(v)),
        _ => return Ok(None),
    };
    let first = usize::from(returns);
    let param = |k: Option<usize>| k.and_then(|k| k.checked_sub(first)).and_then(|i| params.get(i)).copied();
    let (Some(addr), Some(value)) = (param(addr), param(value)) else { return Ok(None) };
    let bits = if ty.ends_with("64") { 64 } else { 32 };
    let fits = |t: BasicTypeEnum<'ctx>| match t {
        BasicTypeEnum::IntType(i) => !float && i.get_bit_width() == bits,
        BasicTypeEnum::FloatType(f) => float && f == if bits == 64 { ctx.f64_type() } else { ctx.f32_type() },
        _ => false,
    };
    if !fits(value.get_type()) || returns == ret.is_void_type() {
        return Ok(None);
    }
    if returns && BasicTypeEnum::try_from(ret).map_or(true, |t| t != value.get_type()) {
        return Ok(None);
    }
    let ptr = match addr {
        BasicValueEnum::PointerValue(p) => p,
        BasicValueEnum::IntValue(i) => {
            b.build_int_to_ptr(i, ctx.ptr_type(inkwell::AddressSpace::default()), "addr").map_err(llvm)?
        }
        _ => return Ok(None),
    };
    let seq = llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingSequentiallyConsistent;
    // SAFETY: a pointer and a value of the width the statement names, in this builder's block.
    let old = unsafe { LLVMBuildAtomicRMW(b.as_mut_ptr(), bin, ptr.as_value_ref(), value.as_value_ref(), seq, 0) };
    Ok(Some(returns.then(|| unsafe { BasicValueEnum::new(old) })))
}

/// The statement cooperative groups use for the start of a block's reserved shared memory
/// (`details::reserved_shared_ptr`, the scratch of tiles wider than a warp), normalized.
const RESERVED_SHARED: &str = ".reg .u32 start; .reg .u64 extended; mov.u32 start, %reserved_smem_offset_1; \
                               cvt.u64.u32 extended, start; cvta.shared.u64 $0, extended";
/// The bytes of reserved shared memory CUDA promises cooperative groups (its `memory.h`
/// asserts its scratch fits in 288).
const RESERVED_SHARED_BYTES: u32 = 288;

/// Gives the reserved shared memory cooperative groups reach through inline PTX
/// ([`RESERVED_SHARED`]) a `__shared__` variable of its own, `hpvm.reserved_shared`: every
/// `this_thread_block()` names it, and simulated devices have no region outside the
/// program's. The statement becomes the variable's generic address, so each block gets its
/// own copy as of any static `__shared__` variable, on both backends (on a GPU it costs 288
/// bytes of the block's shared memory). Runs before kernels collect the variables they use.
pub(super) fn reserve_shared(dev: &Module<'_>) -> Result<()> {
    let ctx = dev.get_context();
    let b = ctx.create_builder();
    let mut calls = Vec::new();
    for f in dev.get_functions() {
        for inst in Val(f.as_value_ref()).instructions() {
            if !inst.is_call() {
                continue;
            }
            let callee = unsafe { LLVMGetCalledValue(inst.0) };
            if unsafe { !LLVMIsAInlineAsm(callee).is_null() }
                && normalize(&unsafe { parts(callee) }.0) == RESERVED_SHARED
            {
                calls.push(inst);
            }
        }
    }
    if calls.is_empty() {
        return Ok(());
    }
    let ty = ctx.i8_type().array_type(RESERVED_SHARED_BYTES);
    let g = dev.add_global(ty, Some(inkwell::AddressSpace::from(3)), "hpvm.reserved_shared");
    g.set_linkage(Linkage::Internal);
    g.set_alignment(16);
    g.set_initializer(&ty.get_undef());
    for call in calls {
        b.position_before(&unsafe { InstructionValue::new(call.0) });
        let generic = b
            .build_address_space_cast(g.as_pointer_value(), ctx.ptr_type(inkwell::AddressSpace::default()), "reserved")
            .map_err(llvm)?;
        unsafe {
            LLVMReplaceAllUsesWith(call.0, generic.as_value_ref());
            LLVMInstructionEraseFromParent(call.0);
        }
    }
    Ok(())
}

/// Rewrites the inline asm call `call` of the leaf: portable code where the statement has
/// it, else a call of a two-bodied function (see the module's documentation). `lane` gives
/// the thread's linear index in its block, built before `call`.
pub(super) fn lower<'ctx>(
    dev: &Module<'ctx>,
    b: &Builder<'ctx>,
    call: LLVMValueRef,
    lane: &dyn Fn(&Builder<'ctx>) -> Result<IntValue<'ctx>>,
    counter: &mut usize,
) -> Result<()> {
    let asm = unsafe { LLVMGetCalledValue(call) };
    let (text, constraints, side_effects) = unsafe { parts(asm) };
    let here = unsafe { InstructionValue::new(call) };
    b.position_before(&here);
    // What replaces the statement is where it was (a call without a location cannot be
    // inlined into a function with debug information).
    // SAFETY: the builder's own state and the call's location.
    unsafe { LLVMSetCurrentDebugLocation2(b.as_mut_ptr(), LLVMInstructionGetDebugLoc(call)) };
    let args: Vec<BasicValueEnum<'ctx>> =
        Val(call).call_args().into_iter().map(|a| unsafe { BasicValueEnum::new(a.0) }).collect();
    let result_ty = unsafe { AnyTypeEnum::new(LLVMTypeOf(call)) };
    let stmt = normalize(&text);
    let exact = match portable(dev, b, &stmt, &args, result_ty, lane)? {
        Some(v) => Some(v),
        None => match texture(dev, b, &stmt, &args, result_ty)? {
            Some(v) => Some(v),
            None => block(dev, b, &stmt, &args, result_ty, lane)?,
        },
    };
    if let Some(v) = exact {
        unsafe {
            LLVMReplaceAllUsesWith(call, v.as_value_ref());
            LLVMInstructionEraseFromParent(call);
        }
        return Ok(());
    }
    // A texture or surface statement left as written would hand a GPU's texture unit a
    // texture object it never made (the runtime's are descriptions in memory).
    let op = stmt.split(['.', ' ']).next().unwrap_or("");
    if matches!(op, "tex" | "tld4" | "txq" | "suld" | "sust" | "sured" | "suq") {
        return Err(Error::Cuda(format!(
            "{}: error: `{stmt}` is not supported: textures are fetched and surfaces accessed in software (1-D, \
             2-D, 3-D and layered fetches, `tex1Dfetch`, `tex2D`, `tex3D`, `tex2DLayered`..., CUDA's `surf*read` \
             and `surf*write`, cube maps); gathers, texture queries and surface statements in inline PTX are not",
            hpvm_core::loc::show(&Val(call).loc())
        )));
    }
    let name = format!("{ASM_PREFIX}{counter}");
    *counter += 1;
    let fn_ty = unsafe { inkwell::types::FunctionType::new(LLVMGetInlineAsmFunctionType(asm)) };
    let ctx = dev.get_context();
    let f = dev.add_function(&name, fn_ty, Some(Linkage::Internal));
    f.add_attribute(AttributeLoc::Function, ctx.create_string_attribute(ASM_TEXT, &text));
    let marked = if side_effects { format!("{constraints}!") } else { constraints.clone() };
    f.add_attribute(AttributeLoc::Function, ctx.create_string_attribute(ASM_CONSTRAINTS, &marked));
    f.add_attribute(
        AttributeLoc::Function,
        ctx.create_enum_attribute(Attribute::get_named_enum_kind_id("noinline"), 0),
    );
    let fb = ctx.create_builder();
    fb.position_at_end(ctx.append_basic_block(f, "entry"));
    let shown = normalize(&text);
    let params: Vec<BasicValueEnum<'ctx>> = f.get_param_iter().collect();
    let ret_ty = unsafe { AnyTypeEnum::new(LLVMGetReturnType(fn_ty.as_type_ref())) };
    if let Some(v) = half_arithmetic(dev, &fb, &shown, &params, ret_ty)? {
        fb.build_return(Some(&v)).map_err(llvm)?;
    } else if let Some(v) = bf16_arithmetic(dev, &fb, &shown, &params, ret_ty)? {
        fb.build_return(Some(&v)).map_err(llvm)?;
    } else if is_hint(&shown) && ret_ty.is_void_type() {
        // A hint to the GPU's memory system changes no value: nothing to do on the CPU.
        fb.build_return(None).map_err(llvm)?;
    } else if memory_access(dev, &fb, &shown, &params, ret_ty)? {
        // Built: a load or store with a cache operator, which the CPU has not.
    } else if let Some(v) = atomic(dev, &fb, &shown, &params, ret_ty)? {
        match v {
            Some(v) => fb.build_return(Some(&v)).map_err(llvm)?,
            None => fb.build_return(None).map_err(llvm)?,
        };
    } else if let Some(v) = bit_field(&fb, &shown, &params, ret_ty)? {
        fb.build_return(Some(&v)).map_err(llvm)?;
    } else if let Some(v) = byte_sad(&fb, &shown, &params, ret_ty)? {
        fb.build_return(Some(&v)).map_err(llvm)?;
    } else if let (Some(n), true) = (
        shown.strip_prefix("mov.u32 $0, %envreg").and_then(|n| n.parse::<u64>().ok()).filter(|&n| n <= 2),
        ret_ty.is_int_type(),
    ) {
        // The driver's environment registers: cooperative groups' `this_grid()` finds the
        // grid's workspace in registers 1 and 2, which only a cooperative launch has; on the
        // CPU the runtime gives the running cooperative launch's (0 outside one, as on a GPU).
        let i32t = ctx.i32_type();
        let envreg = dev
            .get_function("hpvm_rt_envreg")
            .unwrap_or_else(|| dev.add_function("hpvm_rt_envreg", i32t.fn_type(&[i32t.into()], false), None));
        let v = fb
            .build_call(envreg, &[i32t.const_int(n, false).into()], "envreg")
            .map_err(llvm)?
            .try_as_basic_value()
            .basic()
            .expect("i32");
        if ret_ty.into_int_type() == i32t {
            fb.build_return(Some(&v)).map_err(llvm)?;
        } else {
            stop_body(dev, &fb, call, &shown, fn_ty)?;
        }
    } else if let (Some(half), true) = (globaltimer_half(&shown), ret_ty.is_int_type()) {
        // The GPU's nanosecond timer (programs time their kernels' phases with it): on the CPU
        // the host's (`hpvm_rt_globaltimer`), or its lower or upper 32 bits.
        let (i32t, i64t) = (ctx.i32_type(), ctx.i64_type());
        let timer = dev
            .get_function("hpvm_rt_globaltimer")
            .unwrap_or_else(|| dev.add_function("hpvm_rt_globaltimer", i64t.fn_type(&[], false), None));
        let ns = fb.build_call(timer, &[], "ns").map_err(llvm)?.try_as_basic_value().basic().expect("i64");
        let ns = ns.into_int_value();
        let v = match half {
            Timer::Whole => ns,
            Timer::Low => fb.build_int_truncate(ns, i32t, "lo").map_err(llvm)?,
            Timer::High => {
                let hi = fb.build_right_shift(ns, i64t.const_int(32, false), false, "").map_err(llvm)?;
                fb.build_int_truncate(hi, i32t, "hi").map_err(llvm)?
            }
        };
        if v.get_type() != ret_ty.into_int_type() {
            stop_body(dev, &fb, call, &shown, fn_ty)?;
        } else {
            fb.build_return(Some(&v)).map_err(llvm)?;
        }
    } else if shown == "exit" && ret_ty.is_void_type() {
        // The thread ends here (CUB's radix sort ends its threads early): the runtime stops
        // the instance's fiber, which never comes back.
        let end = dev
            .get_function("hpvm_rt_thread_exit")
            .unwrap_or_else(|| dev.add_function("hpvm_rt_thread_exit", ctx.void_type().fn_type(&[], false), None));
        fb.build_call(end, &[], "").map_err(llvm)?;
        fb.build_unreachable().map_err(llvm)?;
    } else if shown == "trap" && ret_ty.is_void_type() {
        // The kernel stops (`__trap()`, or cooperative groups' checks, such as a grid's
        // `sync()` outside a cooperative launch): on a GPU the launch fails; here the run
        // stops, naming the line.
        let trap = dev.get_function("hpvm_rt_trap").unwrap_or_else(|| {
            let ptr = ctx.ptr_type(inkwell::AddressSpace::default());
            dev.add_function("hpvm_rt_trap", ctx.void_type().fn_type(&[ptr.into()], false), None)
        });
        let at = hpvm_core::loc::show(&Val(call).loc());
        let message = fb.build_global_string_ptr(&at, "trap.where").map_err(llvm)?;
        fb.build_call(trap, &[message.as_pointer_value().into()], "").map_err(llvm)?;
        fb.build_return(None).map_err(llvm)?;
    } else {
        stop_body(dev, &fb, call, &shown, fn_ty)?;
    }
    let call_args: Vec<BasicMetadataValueEnum> = args.iter().map(|&a| a.into()).collect();
    let replacement = b.build_call(f, &call_args, "").map_err(llvm)?;
    unsafe {
        if LLVMGetTypeKind(LLVMTypeOf(call)) != llvm_sys::LLVMTypeKind::LLVMVoidTypeKind {
            LLVMReplaceAllUsesWith(call, replacement.as_value_ref());
        }
        LLVMInstructionSetDebugLoc(replacement.as_value_ref(), LLVMInstructionGetDebugLoc(call));
        LLVMInstructionEraseFromParent(call);
    }
    Ok(())
}

/// CUB's bit-field statements on 32-bit registers, exact as PTX defines them: `bfe.u32 $0,
/// $1, $2, $3` (the `$3` bits of `$1` from bit `$2`, positions and lengths taken mod 256, bits
/// past 31 zero) and `bfi.b32 $0, $1, $2, $3, $4` (`$1`'s low `$4` bits into `$2` at bit
/// `$3`). `None` for any other statement.
fn bit_field<'ctx>(
    b: &Builder<'ctx>,
    stmt: &str,
    params: &[BasicValueEnum<'ctx>],
    ret: AnyTypeEnum<'ctx>,
) -> Result<Option<BasicValueEnum<'ctx>>> {
    let (extract, count) = match stmt {
        "bfe.u32 $0, $1, $2, $3" => (true, 3),
        "bfi.b32 $0, $1, $2, $3, $4" => (false, 4),
        _ => return Ok(None),
    };
    if params.len() != count
        || params.iter().any(|p| !p.is_int_value() || p.into_int_value().get_type().get_bit_width() != 32)
    {
        return Ok(None);
    }
    let AnyTypeEnum::IntType(t) = ret else { return Ok(None) };
    if t.get_bit_width() != 32 {
        return Ok(None);
    }
    let ctx = t.get_context();
    let i64t = ctx.i64_type();
    let wide = |v: BasicValueEnum<'ctx>| b.build_int_z_extend(v.into_int_value(), i64t, "").map_err(llvm);
    let k = |n: u64| i64t.const_int(n, false);
    let byte = |v: BasicValueEnum<'ctx>| -> Result<IntValue<'ctx>> { b.build_and(wide(v)?, k(255), "").map_err(llvm) };
    let (pos, len) = if extract { (byte(params[1])?, byte(params[2])?) } else { (byte(params[2])?, byte(params[3])?) };
    // Lengths and positions past 32 clamp to 32: the shifts below then stay under 64.
    let clamp = |v: IntValue<'ctx>| -> Result<IntValue<'ctx>> {
        let over = b.build_int_compare(inkwell::IntPredicate::UGT, v, k(32), "").map_err(llvm)?;
        Ok(b.build_select(over, k(32), v, "").map_err(llvm)?.into_int_value())
    };
    let (pos, len) = (clamp(pos)?, clamp(len)?);
    let ones = b.build_int_sub(b.build_left_shift(k(1), len, "").map_err(llvm)?, k(1), "mask").map_err(llvm)?;
    let v = if extract {
        let a = wide(params[0])?;
        let shifted = b.build_right_shift(a, pos, false, "").map_err(llvm)?;
        b.build_and(shifted, ones, "").map_err(llvm)?
    } else {
        let (insert, base) = (wide(params[0])?, wide(params[1])?);
        let field = b.build_left_shift(ones, pos, "field").map_err(llvm)?;
        let moved = b.build_and(b.build_left_shift(insert, pos, "").map_err(llvm)?, field, "").map_err(llvm)?;
        let kept = b.build_and(base, b.build_not(field, "").map_err(llvm)?, "").map_err(llvm)?;
        b.build_or(kept, moved, "").map_err(llvm)?
    };
    Ok(Some(b.build_int_truncate(v, t, "").map_err(llvm)?.into()))
}

/// PTX's four-byte sum of absolute differences, `vabsdiff4.u32.u32.u32.add $0, $1, $2, $3`
/// (`__usad4` as NVIDIA's stereoDisparity writes it): the absolute differences of the four
/// unsigned bytes of `$1` and `$2`, summed, plus `$3`, in 32 bits. `None` for any other
/// statement.
fn byte_sad<'ctx>(
    b: &Builder<'ctx>,
    stmt: &str,
    params: &[BasicValueEnum<'ctx>],
    ret: AnyTypeEnum<'ctx>,
) -> Result<Option<BasicValueEnum<'ctx>>> {
    if stmt != "vabsdiff4.u32.u32.u32.add $0, $1, $2, $3"
        || params.len() != 3
        || params.iter().any(|p| !p.is_int_value() || p.into_int_value().get_type().get_bit_width() != 32)
    {
        return Ok(None);
    }
    let AnyTypeEnum::IntType(t) = ret else { return Ok(None) };
    if t.get_bit_width() != 32 {
        return Ok(None);
    }
    let (x, y) = (params[0].into_int_value(), params[1].into_int_value());
    let mut sum = params[2].into_int_value();
    for k in 0..4 {
        let byte = |v: IntValue<'ctx>| -> Result<IntValue<'ctx>> {
            let shifted = b.build_right_shift(v, t.const_int(8 * k, false), false, "").map_err(llvm)?;
            b.build_and(shifted, t.const_int(255, false), "").map_err(llvm)
        };
        let (a, c) = (byte(x)?, byte(y)?);
        let below = b.build_int_compare(inkwell::IntPredicate::ULT, a, c, "").map_err(llvm)?;
        let (hi, lo) = (
            b.build_select(below, c, a, "").map_err(llvm)?.into_int_value(),
            b.build_select(below, a, c, "").map_err(llvm)?.into_int_value(),
        );
        let diff = b.build_int_sub(hi, lo, "").map_err(llvm)?;
        sum = b.build_int_add(sum, diff, "sad").map_err(llvm)?;
    }
    Ok(Some(sum.into()))
}

/// A load or store with a cache operator or the read-only path, as CUB's `ThreadLoad` and
/// `ThreadStore` write them (`ld.global.nc.u64 $0, [$1]`, `ld.cg.v4.u32 {$0, $1, $2, $3},
/// [$4]`, `st.cg.u32 [$0], $1`): on the CPU a plain load or store of the same bytes (the
/// operators choose caches, not values). Builds the body and returns true, or returns false
/// (nothing built) for any other statement or operand types that do not match.
fn memory_access<'ctx>(
    dev: &Module<'ctx>,
    b: &Builder<'ctx>,
    stmt: &str,
    params: &[BasicValueEnum<'ctx>],
    ret: AnyTypeEnum<'ctx>,
) -> Result<bool> {
    let ctx = dev.get_context();
    let Some((op, operands)) = stmt.split_once(' ') else { return Ok(false) };
    let mut parts = op.split('.');
    let load = match parts.next() {
        Some("ld") => true,
        Some("st") => false,
        _ => return Ok(false),
    };
    let (mut lanes, mut elem, mut order) = (1u32, None, None);
    for p in parts {
        match p {
            "global" | "nc" | "ca" | "cg" | "cs" | "cv" | "lu" | "wb" | "wt" | "gpu" | "sys" | "cta" => {}
            // Strong accesses (CUB's decoupled look-back between blocks): one atomic access of
            // the whole vector on the CPU, whose blocks run on threads side by side.
            "relaxed" | "volatile" => order = Some(inkwell::AtomicOrdering::Monotonic),
            "acquire" => order = Some(inkwell::AtomicOrdering::Acquire),
            "release" => order = Some(inkwell::AtomicOrdering::Release),
            "v2" => lanes = 2,
            "v4" => lanes = 4,
            t => {
                let bits = match t {
                    "u16" | "s16" | "b16" => 16,
                    "u32" | "s32" | "b32" | "f32" => 32,
                    "u64" | "s64" | "b64" | "f64" => 64,
                    _ => return Ok(false),
                };
                if elem.replace(bits).is_some() {
                    return Ok(false);
                }
            }
        }
    }
    let Some(bits) = elem else { return Ok(false) };
    let ops = split_operands(operands);
    if ops.len() != 2 {
        return Ok(false);
    }
    let (data, addr) = if load { (ops[0], ops[1]) } else { (ops[1], ops[0]) };
    // `[$k]`: the address operand; `$k` or `{$i, $j...}`: the values.
    let index = |o: &str| o.trim().strip_prefix('$').and_then(|n| n.parse::<usize>().ok());
    let Some(addr) = addr.trim().strip_prefix('[').and_then(|a| a.strip_suffix(']')).and_then(index) else {
        return Ok(false);
    };
    let data = data.trim();
    let values: Vec<usize> = match data.strip_prefix('{').and_then(|d| d.strip_suffix('}')) {
        Some(list) => match list.split(',').map(index).collect::<Option<Vec<_>>>() {
            Some(v) => v,
            None => return Ok(false),
        },
        None => match index(data) {
            Some(v) => vec![v],
            None => return Ok(false),
        },
    };
    if values.len() != lanes as usize {
        return Ok(false);
    }
    // Outputs are the asm's first operands and the function's result; inputs its parameters.
    let outputs = if load { lanes as usize } else { 0 };
    if load && values.iter().enumerate().any(|(i, &v)| v != i) {
        return Ok(false);
    }
    let param = |k: usize| k.checked_sub(outputs).and_then(|i| params.get(i)).copied();
    let Some(addr) = param(addr) else { return Ok(false) };
    let element = match bits {
        16 => ctx.i16_type(),
        32 => ctx.i32_type(),
        _ => ctx.i64_type(),
    };
    let width_of = |t: BasicTypeEnum<'ctx>| match t {
        BasicTypeEnum::IntType(i) => Some(i.get_bit_width()),
        BasicTypeEnum::FloatType(f) => Some(if f == ctx.f64_type() {
            64
        } else if f == ctx.f32_type() {
            32
        } else {
            16
        }),
        _ => None,
    };
    // The types the values have on the asm's side: each its own width, the element's.
    let out_types: Vec<BasicTypeEnum<'ctx>> = match (load, ret) {
        (false, AnyTypeEnum::VoidType(_)) => Vec::new(),
        (true, AnyTypeEnum::StructType(st)) if lanes > 1 => st.get_field_types(),
        (true, t) if lanes == 1 => match BasicTypeEnum::try_from(t) {
            Ok(t) => vec![t],
            Err(_) => return Ok(false),
        },
        _ => return Ok(false),
    };
    if out_types.len() != outputs || out_types.iter().any(|&t| width_of(t) != Some(bits)) {
        return Ok(false);
    }
    let ptr_ty = ctx.ptr_type(inkwell::AddressSpace::default());
    let base = match addr {
        BasicValueEnum::PointerValue(p) => p,
        BasicValueEnum::IntValue(i) => b.build_int_to_ptr(i, ptr_ty, "addr").map_err(llvm)?,
        _ => return Ok(false),
    };
    let at = |i: u32| -> Result<inkwell::values::PointerValue<'ctx>> {
        let off = ctx.i64_type().const_int(u64::from(i * bits / 8), false);
        // SAFETY: within the vector the statement accesses.
        unsafe { b.build_in_bounds_gep(ctx.i8_type(), base, &[off], "elem") }.map_err(llvm)
    };
    let total = lanes * bits;
    if order.is_some() && total == 128 && bits == 64 {
        // 128 bits at once (CUB's tile states, `{status, value}`): the runtime's, under a
        // lock of the address (x86-64 has no 128-bit atomic load or store without cmpxchg16b).
        return strong_128(dev, b, load, base, &values, param, &out_types, ret).map(|()| true);
    }
    if order.is_some() && total > 64 {
        return Ok(false);
    }
    let whole = ctx
        .custom_width_int_type(std::num::NonZeroU32::new(total).expect("non-zero"))
        .map_err(|e| Error::Llvm(e.to_string()))?;
    if load {
        let mut got = Vec::new();
        if let Some(order) = order {
            let inst = b.build_load(whole, base, "strong").map_err(llvm)?;
            let i = inst.as_instruction_value().expect("a load");
            i.set_alignment(total / 8).map_err(|e| Error::Llvm(e.to_string()))?;
            i.set_atomic_ordering(order).map_err(|e| Error::Llvm(e.to_string()))?;
            for (k, &t) in out_types.iter().enumerate() {
                let part = b
                    .build_right_shift(
                        inst.into_int_value(),
                        whole.const_int(u64::from(k as u32 * bits), false),
                        false,
                        "",
                    )
                    .map_err(llvm)?;
                let part: BasicValueEnum = b.build_int_truncate(part, element, "").map_err(llvm)?.into();
                got.push(if t.is_int_type() { part } else { b.build_bit_cast(part, t, "").map_err(llvm)? });
            }
        }
        for (i, &t) in out_types.iter().enumerate().filter(|_| order.is_none()) {
            let v = b.build_load(element, at(i as u32)?, "ld").map_err(llvm)?;
            got.push(if t.is_int_type() { v } else { b.build_bit_cast(v, t, "").map_err(llvm)? });
        }
        match ret {
            AnyTypeEnum::StructType(st) => {
                let mut agg: inkwell::values::AggregateValueEnum = st.get_undef().into();
                for (i, v) in got.into_iter().enumerate() {
                    agg = b.build_insert_value(agg, v, i as u32, "").map_err(llvm)?;
                }
                b.build_return(Some(&agg.as_basic_value_enum())).map_err(llvm)?;
            }
            _ => {
                b.build_return(Some(&got[0])).map_err(llvm)?;
            }
        }
    } else {
        let mut stores = Vec::new();
        for (i, &k) in values.iter().enumerate() {
            let Some(v) = param(k) else { return Ok(false) };
            if width_of(v.get_type()) != Some(bits) {
                return Ok(false);
            }
            stores.push((i, v));
        }
        if let Some(order) = order {
            let mut packed = whole.const_zero();
            for (i, v) in stores {
                let v = if v.is_int_value() { v } else { b.build_bit_cast(v, element, "").map_err(llvm)? };
                let v = b.build_int_z_extend_or_bit_cast(v.into_int_value(), whole, "").map_err(llvm)?;
                let v = b.build_left_shift(v, whole.const_int(u64::from(i as u32 * bits), false), "").map_err(llvm)?;
                packed = b.build_or(packed, v, "").map_err(llvm)?;
            }
            let st = b.build_store(base, packed).map_err(llvm)?;
            st.set_alignment(total / 8).map_err(|e| Error::Llvm(e.to_string()))?;
            st.set_atomic_ordering(order).map_err(|e| Error::Llvm(e.to_string()))?;
        } else {
            for (i, v) in stores {
                let v = if v.is_int_value() { v } else { b.build_bit_cast(v, element, "").map_err(llvm)? };
                b.build_store(at(i as u32)?, v).map_err(llvm)?;
            }
        }
        b.build_return(None).map_err(llvm)?;
    }
    Ok(true)
}

/// The runtime's `fma.rn.bf16` on bf16 bits (`runtime/src/bf16.rs`).
pub const BF16_FMA: &str = "hpvm_rt_bf16_fma";

/// CUDA's bf16 arithmetic (`cuda_bf16.hpp`), exact on the CPU through the runtime's
/// `fma.rn.bf16`: `fma.rn.bf16[x2] $0,X,Y,Z`, `add`, `sub`, `mul` (`.rn` or not), each as the
/// fma PTX defines it (`x × 1 + y`, `y × -1 + x`, `x × y + -0`), and the header's blocks for
/// GPUs before sm_90 that name their constant in a register first (`.reg .b16 c; mov.b16 c,
/// 0x8000U; fma.rn.bf16 $0,$1,$2,c`). Pairs (`x2`) per half. `None` for anything else.
fn bf16_arithmetic<'ctx>(
    dev: &Module<'ctx>,
    b: &Builder<'ctx>,
    stmt: &str,
    args: &[BasicValueEnum<'ctx>],
    result: AnyTypeEnum<'ctx>,
) -> Result<Option<BasicValueEnum<'ctx>>> {
    let statements: Vec<&str> = stmt.split(';').map(str::trim).filter(|s| !s.is_empty()).collect();
    let Some((last, before)) = statements.split_last() else { return Ok(None) };
    let mut registers: Vec<(&str, u64)> = Vec::new();
    for s in before {
        if s.starts_with(".reg ") {
            continue;
        }
        let Some(rest) = s.strip_prefix("mov.b16 ").or_else(|| s.strip_prefix("mov.b32 ")) else { return Ok(None) };
        let Some((name, value)) = rest.split_once(',') else { return Ok(None) };
        let value = value.trim().trim_end_matches(['U', 'u']);
        let Some(v) = value.strip_prefix("0x").and_then(|h| u64::from_str_radix(h, 16).ok()) else { return Ok(None) };
        registers.push((name.trim(), v));
    }
    let Some((op, operands)) = last.split_once(' ') else { return Ok(None) };
    let (op, pair) = match op.strip_suffix(".bf16x2") {
        Some(op) => (op, true),
        None => match op.strip_suffix(".bf16") {
            Some(op) => (op, false),
            None => return Ok(None),
        },
    };
    let ctx = dev.get_context();
    let (i16t, bits) = (ctx.i16_type(), if pair { ctx.i32_type() } else { ctx.i16_type() });
    if result != bits.as_any_type_enum()
        || args.iter().any(|a| !a.is_int_value() || a.into_int_value().get_type() != bits)
    {
        return Ok(None);
    }
    let ops: Vec<&str> = operands.split(',').map(str::trim).collect();
    if ops.first() != Some(&"$0") {
        return Ok(None);
    }
    let operand = |o: &str| -> Option<IntValue<'ctx>> {
        if let Some(k) = o.strip_prefix('$').and_then(|k| k.parse::<usize>().ok()) {
            return args.get(k.checked_sub(1)?).map(|a| a.into_int_value());
        }
        let (_, v) = registers.iter().find(|(n, _)| *n == o)?;
        Some(bits.const_int(*v, false))
    };
    let constant = |half: u64| bits.const_int(if pair { half | half << 16 } else { half }, false);
    let (x, y, z) = match (op, &ops[1..]) {
        ("fma.rn", [x, y, z]) => (operand(x), operand(y), operand(z)),
        ("add" | "add.rn", [x, y]) => (operand(x), Some(constant(0x3f80)), operand(y)),
        ("sub" | "sub.rn", [x, y]) => (operand(y), Some(constant(0xbf80)), operand(x)),
        ("mul" | "mul.rn", [x, y]) => (operand(x), operand(y), Some(constant(0x8000))),
        _ => return Ok(None),
    };
    let (Some(x), Some(y), Some(z)) = (x, y, z) else { return Ok(None) };
    let fma = dev.get_function(BF16_FMA).unwrap_or_else(|| {
        dev.add_function(
            BF16_FMA,
            i16t.fn_type(&[i16t.into(), i16t.into(), i16t.into()], false),
            Some(Linkage::External),
        )
    });
    let half = |v: IntValue<'ctx>, k: u64| -> Result<IntValue<'ctx>> {
        let v =
            if k == 0 { v } else { b.build_right_shift(v, bits.const_int(16 * k, false), false, "").map_err(llvm)? };
        b.build_int_truncate_or_bit_cast(v, i16t, "").map_err(llvm)
    };
    let mut out = bits.const_zero();
    for k in 0..if pair { 2 } else { 1 } {
        let r = b
            .build_call(fma, &[half(x, k)?.into(), half(y, k)?.into(), half(z, k)?.into()], "bf16")
            .map_err(llvm)?
            .try_as_basic_value()
            .basic()
            .expect("i16")
            .into_int_value();
        let r = b.build_int_z_extend_or_bit_cast(r, bits, "").map_err(llvm)?;
        let r = if k == 0 { r } else { b.build_left_shift(r, bits.const_int(16 * k, false), "").map_err(llvm)? };
        out = b.build_or(out, r, "").map_err(llvm)?;
    }
    Ok(Some(out.into()))
}

/// Runtime entry points of 128-bit strong accesses (`runtime/src/abi.rs`).
pub const STRONG_LOAD_128: &str = "hpvm_rt_strong_load128";
pub const STRONG_STORE_128: &str = "hpvm_rt_strong_store128";

/// The body of a strong 128-bit access of two 64-bit lanes at `base`: a call of the runtime's
/// load (into a stack slot, then the asm's two outputs) or store (`values`' parameters).
#[allow(clippy::too_many_arguments)]
fn strong_128<'ctx>(
    dev: &Module<'ctx>,
    b: &Builder<'ctx>,
    load: bool,
    base: inkwell::values::PointerValue<'ctx>,
    values: &[usize],
    param: impl Fn(usize) -> Option<BasicValueEnum<'ctx>>,
    out_types: &[BasicTypeEnum<'ctx>],
    ret: AnyTypeEnum<'ctx>,
) -> Result<()> {
    let ctx = dev.get_context();
    let (i64t, ptr) = (ctx.i64_type(), ctx.ptr_type(inkwell::AddressSpace::default()));
    let declare = |name: &str, ty: inkwell::types::FunctionType<'ctx>| {
        dev.get_function(name).unwrap_or_else(|| dev.add_function(name, ty, Some(Linkage::External)))
    };
    if load {
        let f = declare(STRONG_LOAD_128, ctx.void_type().fn_type(&[ptr.into(), ptr.into()], false));
        let slot = b.build_array_alloca(i64t, i64t.const_int(2, false), "strong").map_err(llvm)?;
        b.build_call(f, &[base.into(), slot.into()], "").map_err(llvm)?;
        let AnyTypeEnum::StructType(st) = ret else { return Err(Error::Llvm("a 128-bit load of no pair".into())) };
        let mut agg: inkwell::values::AggregateValueEnum = st.get_undef().into();
        for (k, &t) in out_types.iter().enumerate() {
            // SAFETY: within the two-word slot.
            let at =
                unsafe { b.build_in_bounds_gep(i64t, slot, &[i64t.const_int(k as u64, false)], "") }.map_err(llvm)?;
            let v = b.build_load(i64t, at, "").map_err(llvm)?;
            let v = if t.is_int_type() { v } else { b.build_bit_cast(v, t, "").map_err(llvm)? };
            agg = b.build_insert_value(agg, v, k as u32, "").map_err(llvm)?;
        }
        b.build_return(Some(&agg.as_basic_value_enum())).map_err(llvm)?;
    } else {
        let f = declare(STRONG_STORE_128, ctx.void_type().fn_type(&[ptr.into(), i64t.into(), i64t.into()], false));
        let mut words: Vec<BasicMetadataValueEnum<'ctx>> = vec![base.into()];
        for &k in values {
            let v = param(k).ok_or_else(|| Error::Llvm("a 128-bit store without its value".into()))?;
            let v = if v.is_int_value() { v } else { b.build_bit_cast(v, i64t, "").map_err(llvm)? };
            words.push(v.into());
        }
        b.build_call(f, &words, "").map_err(llvm)?;
        b.build_return(None).map_err(llvm)?;
    }
    Ok(())
}

/// Whether a statement only hints the GPU's caches (`prefetch`, `prefetchu`, as CUB's
/// transform writes `prefetch.global.L2 [$0]`): it reads and writes nothing.
fn is_hint(stmt: &str) -> bool {
    let op = stmt.split_whitespace().next().unwrap_or("");
    // `nanosleep` (`__nanosleep`, a back-off in spin loops): on the CPU the thread lets its
    // block's others run instead (the CPU lowering adds that, `transform/src/warp.rs`).
    op == "prefetch"
        || op == "prefetchu"
        || op.starts_with("prefetch.")
        || op.starts_with("prefetchu.")
        || op == "nanosleep.u32"
}

/// Which part of the GPU's nanosecond timer a statement reads.
enum Timer {
    Whole,
    Low,
    High,
}

/// `mov.u64 $0, %globaltimer` and its 32-bit halves.
fn globaltimer_half(stmt: &str) -> Option<Timer> {
    match stmt {
        "mov.u64 $0, %globaltimer" => Some(Timer::Whole),
        "mov.u32 $0, %globaltimer_lo" => Some(Timer::Low),
        "mov.u32 $0, %globaltimer_hi" => Some(Timer::High),
        _ => None,
    }
}

/// A CPU body that stops the program, naming the statement and its line.
fn stop_body<'ctx>(
    dev: &Module<'ctx>,
    fb: &Builder<'ctx>,
    call: LLVMValueRef,
    shown: &str,
    fn_ty: inkwell::types::FunctionType<'ctx>,
) -> Result<()> {
    let ctx = dev.get_context();
    let stop = dev.get_function("hpvm_rt_asm_unsupported").unwrap_or_else(|| {
        let ptr = ctx.ptr_type(inkwell::AddressSpace::default());
        dev.add_function("hpvm_rt_asm_unsupported", ctx.void_type().fn_type(&[ptr.into()], false), None)
    });
    let at = hpvm_core::loc::show(&Val(call).loc());
    let message = fb.build_global_string_ptr(&format!("{at}: inline PTX `{shown}`"), "asm.where").map_err(llvm)?;
    fb.build_call(stop, &[message.as_pointer_value().into()], "").map_err(llvm)?;
    match fn_ty.get_return_type().map(zero) {
        Some(v) => fb.build_return(Some(&v)).map_err(llvm)?,
        None => fb.build_return(None).map_err(llvm)?,
    };
    Ok(())
}

fn llvm(e: inkwell::builder::BuilderError) -> Error {
    Error::Llvm(e.to_string())
}

fn zero(t: BasicTypeEnum<'_>) -> BasicValueEnum<'_> {
    match t {
        BasicTypeEnum::IntType(t) => t.const_zero().into(),
        BasicTypeEnum::FloatType(t) => t.const_zero().into(),
        BasicTypeEnum::PointerType(t) => t.const_zero().into(),
        BasicTypeEnum::StructType(t) => t.const_zero().into(),
        BasicTypeEnum::ArrayType(t) => t.const_zero().into(),
        BasicTypeEnum::VectorType(t) => t.const_zero().into(),
        BasicTypeEnum::ScalableVectorType(t) => t.const_zero().into(),
    }
}

/// The statement's exact meaning in LLVM IR, where it has one that both backends keep.
fn portable<'ctx>(
    dev: &Module<'ctx>,
    b: &Builder<'ctx>,
    stmt: &str,
    args: &[BasicValueEnum<'ctx>],
    result: AnyTypeEnum<'ctx>,
    lane: &dyn Fn(&Builder<'ctx>) -> Result<IntValue<'ctx>>,
) -> Result<Option<BasicValueEnum<'ctx>>> {
    let ctx = dev.get_context();
    let (i16t, i32t, f16t, f32t, f64t) =
        (ctx.i16_type(), ctx.i32_type(), ctx.f16_type(), ctx.f32_type(), ctx.f64_type());
    let arg = |i: usize| args.get(i).copied();
    let v: BasicValueEnum = match stmt {
        "mov.u32 $0, %laneid" => b.build_and(lane(b)?, i32t.const_int(31, false), "laneid").map_err(llvm)?.into(),
        "mov.u32 $0, %warpid" => {
            b.build_right_shift(lane(b)?, i32t.const_int(5, false), false, "warpid").map_err(llvm)?.into()
        }
        "mov.u32 $0, WARP_SZ" => i32t.const_int(32, false).into(),
        // The lanes below, at or above this one, as bits.
        "mov.u32 $0, %lanemask_eq"
        | "mov.u32 $0, %lanemask_lt"
        | "mov.u32 $0, %lanemask_le"
        | "mov.u32 $0, %lanemask_gt"
        | "mov.u32 $0, %lanemask_ge" => {
            let l = b.build_and(lane(b)?, i32t.const_int(31, false), "lane").map_err(llvm)?;
            let one = i32t.const_int(1, false);
            let eq = b.build_left_shift(one, l, "eq").map_err(llvm)?;
            let lt = b.build_int_sub(eq, one, "lt").map_err(llvm)?;
            // Two shifted by 31 wraps to zero: all lanes at or below lane 31.
            let le = b
                .build_int_sub(b.build_left_shift(i32t.const_int(2, false), l, "").map_err(llvm)?, one, "le")
                .map_err(llvm)?;
            match &stmt[stmt.len() - 2..] {
                "eq" => eq.into(),
                "lt" => lt.into(),
                "le" => le.into(),
                "gt" => b.build_not(le, "gt").map_err(llvm)?.into(),
                _ => b.build_not(lt, "ge").map_err(llvm)?.into(),
            }
        }
        "mov.u64 $0, %clock64" => clock(dev, b)?.into(),
        "mov.u32 $0, %clock" => b.build_int_truncate(clock(dev, b)?, i32t, "").map_err(llvm)?.into(),
        "cvt.rn.f16.f32 $0, $1" | "cvt.rn.f16.f64 $0, $1" => {
            let Some(x) = arg(0).filter(|a| a.is_float_value()) else { return Ok(None) };
            let h = b.build_float_trunc(x.into_float_value(), f16t, "").map_err(llvm)?;
            b.build_bit_cast(h, i16t, "").map_err(llvm)?
        }
        // Two floats into a pair of halves: the first source the upper half, the second the
        // lower (CUDA's `__floats2half2_rn` on sm_80 and later writes `$0, $2, $1`).
        "cvt.rn.f16x2.f32 $0, $1, $2" | "cvt.rn.f16x2.f32 $0, $2, $1" => {
            let (hi, lo) = if stmt.ends_with("$1, $2") { (arg(0), arg(1)) } else { (arg(1), arg(0)) };
            let (Some(hi), Some(lo)) = (hi, lo) else { return Ok(None) };
            if !hi.is_float_value() || !lo.is_float_value() {
                return Ok(None);
            }
            let half = |x: BasicValueEnum<'ctx>| -> Result<IntValue<'ctx>> {
                let h = b.build_float_trunc(x.into_float_value(), f16t, "").map_err(llvm)?;
                let bits = b.build_bit_cast(h, i16t, "").map_err(llvm)?.into_int_value();
                b.build_int_z_extend(bits, i32t, "").map_err(llvm)
            };
            let (hi, lo) = (half(hi)?, half(lo)?);
            let hi = b.build_left_shift(hi, i32t.const_int(16, false), "").map_err(llvm)?;
            b.build_or(lo, hi, "pack").map_err(llvm)?.into()
        }
        // A float to bfloat16's bits, rounded to nearest even (PTX's `cvt.rn.bf16.f32`: a NaN
        // becomes the canonical 0x7fff); and two of them into a pair, the first the upper half.
        "cvt.rn.bf16.f32 $0, $1" => {
            let Some(x) = arg(0).filter(|a| a.is_float_value()) else { return Ok(None) };
            if x.get_type() != f32t.into() {
                return Ok(None);
            }
            bf16_bits(b, x.into_float_value())?.into()
        }
        "cvt.rn.bf16x2.f32 $0, $1, $2" | "cvt.rn.bf16x2.f32 $0, $2, $1" => {
            let (hi, lo) = if stmt.ends_with("$1, $2") { (arg(0), arg(1)) } else { (arg(1), arg(0)) };
            let (Some(hi), Some(lo)) = (hi, lo) else { return Ok(None) };
            if hi.get_type() != f32t.into() || lo.get_type() != f32t.into() {
                return Ok(None);
            }
            let hi = b.build_int_z_extend(bf16_bits(b, hi.into_float_value())?, i32t, "").map_err(llvm)?;
            let lo = b.build_int_z_extend(bf16_bits(b, lo.into_float_value())?, i32t, "").map_err(llvm)?;
            let hi = b.build_left_shift(hi, i32t.const_int(16, false), "").map_err(llvm)?;
            b.build_or(lo, hi, "pack").map_err(llvm)?.into()
        }
        "cvt.f32.f16 $0, $1" | "cvt.f64.f16 $0, $1" => {
            let Some(x) = arg(0).filter(|a| a.is_int_value()) else { return Ok(None) };
            let to = if stmt.starts_with("cvt.f32") { f32t } else { f64t };
            let h = b.build_bit_cast(x, f16t, "").map_err(llvm)?.into_float_value();
            b.build_float_ext(h, to, "").map_err(llvm)?.into()
        }
        // Two halves into one 32-bit register: the first the low half.
        "mov.b32 $0, {$1,$2}" | "mov.b32 $0, {$1, $2}" | "mov.b32 $0, {$1,$1}" | "mov.b32 $0, {$1, $1}" => {
            let (Some(lo), Some(hi)) = (arg(0), arg(if stmt.ends_with("$1}") { 0 } else { 1 })) else {
                return Ok(None);
            };
            if !lo.is_int_value() || !hi.is_int_value() {
                return Ok(None);
            }
            let lo = b.build_int_z_extend(lo.into_int_value(), i32t, "").map_err(llvm)?;
            let hi = b.build_int_z_extend(hi.into_int_value(), i32t, "").map_err(llvm)?;
            let hi = b.build_left_shift(hi, i32t.const_int(16, false), "").map_err(llvm)?;
            b.build_or(lo, hi, "pack").map_err(llvm)?.into()
        }
        // A bfloat16 (or half) as the upper half of 32 bits, the lower zero: CUDA's
        // bfloat16-to-float before sm_90 (`cuda_bf16.hpp`), exact.
        "mov.b32 $0, {0,$1}" | "mov.b32 $0, {0, $1}" => {
            let Some(x) = arg(0).filter(|a| a.is_int_value() && a.into_int_value().get_type().get_bit_width() == 16)
            else {
                return Ok(None);
            };
            let wide = b.build_int_z_extend(x.into_int_value(), i32t, "").map_err(llvm)?;
            let bits = b.build_left_shift(wide, i32t.const_int(16, false), "").map_err(llvm)?;
            match result {
                AnyTypeEnum::FloatType(t) if t == f32t => b.build_bit_cast(bits, f32t, "").map_err(llvm)?,
                AnyTypeEnum::IntType(t) if t == i32t => bits.into(),
                _ => return Ok(None),
            }
        }
        "mov.b32 {$0,$1}, $2" | "mov.b32 {$0, $1}, $2" => {
            let Some(x) = arg(0).filter(|a| a.is_int_value()) else { return Ok(None) };
            let AnyTypeEnum::StructType(pair) = result else { return Ok(None) };
            let x = x.into_int_value();
            let lo = b.build_int_truncate(x, i16t, "").map_err(llvm)?;
            let hi = b.build_right_shift(x, i32t.const_int(16, false), false, "").map_err(llvm)?;
            let hi = b.build_int_truncate(hi, i16t, "").map_err(llvm)?;
            let agg = b.build_insert_value(pair.get_undef(), lo, 0, "").map_err(llvm)?;
            b.build_insert_value(agg, hi, 1, "").map_err(llvm)?.as_basic_value_enum()
        }
        "min.f32 $0,$1,$2" | "max.f32 $0,$1,$2" | "min.f32 $0, $1, $2" | "max.f32 $0, $1, $2" => {
            // PTX's min/max return the other operand where one is NaN, as minnum/maxnum do.
            let (Some(x), Some(y)) = (arg(0), arg(1)) else { return Ok(None) };
            let name = if stmt.starts_with("min") { "llvm.minnum" } else { "llvm.maxnum" };
            let f = inkwell::intrinsics::Intrinsic::find(name)
                .and_then(|i| i.get_declaration(dev, &[f32t.into()]))
                .ok_or_else(|| Error::Llvm(format!("no {name}")))?;
            b.build_call(f, &[x.into(), y.into()], "").map_err(llvm)?.try_as_basic_value().basic().expect("a value")
        }
        "neg.f16 $0,$1" | "abs.f16 $0,$1" | "neg.f16x2 $0,$1" | "abs.f16x2 $0,$1" => {
            let Some(x) = arg(0).filter(|a| a.is_int_value()) else { return Ok(None) };
            let x = x.into_int_value();
            let ty = x.get_type();
            let sign = if stmt.contains("x2") { 0x8000_8000 } else { 0x8000 };
            let sign = ty.const_int(sign, false);
            if stmt.starts_with("neg") {
                b.build_xor(x, sign, "").map_err(llvm)?.into()
            } else {
                b.build_and(x, b.build_not(sign, "").map_err(llvm)?, "").map_err(llvm)?.into()
            }
        }
        _ => return Ok(None),
    };
    // The statement's declared result must be what was built (a `=h` output is an i16...).
    let fits = unsafe { LLVMTypeOf(v.as_value_ref()) == result.as_type_ref() };
    Ok(fits.then_some(v))
}

/// The name inside the (mangled) name of the software texture fetch that every CUDA source's
/// device half carries (`textures.h`).
const TEX_FETCH: &str = "__hpvm_mgpu_tex_fetch";

/// The software texture fetch of a device half (`textures.h`), by the name inside its
/// mangled one.
pub(super) fn texture_fetch<'ctx>(dev: &Module<'ctx>) -> Option<inkwell::values::FunctionValue<'ctx>> {
    dev.get_functions().find(|f| f.count_basic_blocks() > 0 && f.get_name().to_string_lossy().contains(TEX_FETCH))
}

/// A texture fetch as clang's texture functions write it, `tex[.level|.grad].GEOM.v4.DTYPE.CTYPE
/// {$0, $1, $2, $3}, [$4, {coordinates}]...` (GEOM `1d`, `2d`, `3d`, `a1d`, `a2d`; the
/// layered ones name the layer first): a call of the software fetch (`textures.h`, the same
/// code on both backends) into four words of the stack, which become the statement's four
/// results. Levels and gradients are not read: the runtime makes no mipmapped textures.
/// `None` for any other statement (sparse fetches with their extra predicate).
fn texture<'ctx>(
    dev: &Module<'ctx>,
    b: &Builder<'ctx>,
    stmt: &str,
    args: &[BasicValueEnum<'ctx>],
    result: AnyTypeEnum<'ctx>,
) -> Result<Option<BasicValueEnum<'ctx>>> {
    let op = stmt.split_whitespace().next().unwrap_or("");
    let mut parts: Vec<&str> = op.split('.').collect();
    if parts.first() != Some(&"tex") {
        return Ok(None);
    }
    parts.retain(|p| !matches!(*p, "level" | "grad"));
    let (geometry, dtype, ctype) = match parts[..] {
        [_, g, "v4", d, c] => (g, d, c),
        _ => return Ok(None),
    };
    // Cube maps take a direction (x, y, z); the fetch knows them by dimension code 4.
    let (dims, layered, cube) = match geometry {
        "1d" => (1, false, false),
        "2d" => (2, false, false),
        "3d" => (3, false, false),
        "a1d" => (1, true, false),
        "a2d" => (2, true, false),
        "cube" => (3, false, true),
        "acube" => (3, true, true),
        _ => return Ok(None),
    };
    let AnyTypeEnum::StructType(st) = result else { return Ok(None) };
    let ctx = dev.get_context();
    let (i32t, i64t, f32t) = (ctx.i32_type(), ctx.i64_type(), ctx.f32_type());
    let word = |t: BasicTypeEnum<'ctx>| t == i32t.into() || t == f32t.into();
    if st.count_fields() != 4 || !st.get_field_types().into_iter().all(word) || !matches!(dtype, "f32" | "s32" | "u32")
    {
        return Ok(None);
    }
    let Some(fetch) = texture_fetch(dev) else { return Ok(None) };
    let Some(object) = args.first().filter(|a| a.is_int_value()) else { return Ok(None) };
    let (layer, coords) = match layered {
        true => (args.get(1).copied(), args.get(2..2 + dims)),
        false => (None, args.get(1..1 + dims)),
    };
    let Some(coords) = coords else { return Ok(None) };
    let integer = ctype == "s32";
    if cube && integer {
        return Ok(None);
    }
    let expected: BasicTypeEnum = if integer { i32t.into() } else { f32t.into() };
    if coords.iter().any(|c| c.get_type() != expected) || layer.is_some_and(|l| l.get_type() != i32t.into()) {
        return Ok(None);
    }
    // Integer coordinates beyond the first dimension address texels: their centres.
    let (mut ix, mut xyz) = (i32t.const_zero(), [f32t.const_zero(); 3]);
    for (k, c) in coords.iter().enumerate() {
        if integer && k == 0 {
            ix = c.into_int_value();
        } else if integer {
            let f = b.build_signed_int_to_float(c.into_int_value(), f32t, "").map_err(llvm)?;
            xyz[k] = b.build_float_add(f, f32t.const_float(0.5), "").map_err(llvm)?;
        } else {
            xyz[k] = c.into_float_value();
        }
    }
    let single = integer && dims == 1;
    let object = b.build_int_z_extend_or_bit_cast(object.into_int_value(), i64t, "").map_err(llvm)?;
    // The slot in the entry block, so that it is one slot however often the fetch runs.
    let function =
        b.get_insert_block().and_then(|bb| bb.get_parent()).ok_or(Error::Llvm("a fetch outside a function".into()))?;
    let entry = function.get_first_basic_block().ok_or(Error::Llvm("a function without blocks".into()))?;
    let eb = ctx.create_builder();
    match entry.get_first_instruction() {
        Some(first) => eb.position_before(&first),
        None => eb.position_at_end(entry),
    }
    let slot = eb.build_alloca(i32t.array_type(4), "texels").map_err(llvm)?;
    let call_args: Vec<BasicMetadataValueEnum> = vec![
        object.into(),
        i32t.const_int(if cube { 4 } else { dims } as u64, false).into(),
        i32t.const_int(single as u64, false).into(),
        ix.into(),
        xyz[0].into(),
        xyz[1].into(),
        xyz[2].into(),
        layer.map(|l| l.into_int_value()).unwrap_or(i32t.const_zero()).into(),
        slot.into(),
    ];
    b.build_call(fetch, &call_args, "").map_err(llvm)?;
    let mut agg: inkwell::values::AggregateValueEnum = st.get_undef().into();
    for (k, t) in st.get_field_types().into_iter().enumerate() {
        // SAFETY: within the four-word slot.
        let at = unsafe { b.build_in_bounds_gep(i32t, slot, &[i32t.const_int(k as u64, false)], "") }.map_err(llvm)?;
        let v = b.build_load(t, at, "texel").map_err(llvm)?;
        agg = b.build_insert_value(agg, v, k as u32, "").map_err(llvm)?;
    }
    Ok(Some(agg.as_basic_value_enum()))
}

/// A block of statements over `.f16` registers of its own, as CUDA's `cuda_fp16.hpp` writes
/// its conversions (`{.reg .f16 low; cvt.rn.f16.f32 low, $1; mov.b32 $0, {low,low};}` is
/// `__float2half2_rn`): each statement one [`portable`] has, its registers held as 16-bit
/// integers. `None` where any statement has no portable form.
fn block<'ctx>(
    dev: &Module<'ctx>,
    b: &Builder<'ctx>,
    stmt: &str,
    args: &[BasicValueEnum<'ctx>],
    result: AnyTypeEnum<'ctx>,
    lane: &dyn Fn(&Builder<'ctx>) -> Result<IntValue<'ctx>>,
) -> Result<Option<BasicValueEnum<'ctx>>> {
    let ctx = dev.get_context();
    let i16t = ctx.i16_type();
    let parts: Vec<&str> = stmt.split(';').map(str::trim).filter(|p| !p.is_empty()).collect();
    let Some(regs) = parts.first().and_then(|p| p.strip_prefix(".reg .f16 ")) else { return Ok(None) };
    let regs: Vec<&str> = regs.split(',').map(str::trim).collect();
    // The asm's outputs (`$0`..) come before its inputs (`$n`.. are `args`).
    let outputs: Vec<BasicTypeEnum<'ctx>> = match result {
        AnyTypeEnum::StructType(s) => s.get_field_types(),
        AnyTypeEnum::VoidType(_) => vec![],
        other => match BasicTypeEnum::try_from(other) {
            Ok(t) => vec![t],
            Err(_) => return Ok(None),
        },
    };
    let mut held: std::collections::HashMap<&str, BasicValueEnum<'ctx>> = std::collections::HashMap::new();
    let mut out: Vec<Option<BasicValueEnum<'ctx>>> = vec![None; outputs.len()];
    for p in &parts[1..] {
        let Some((op, rest)) = p.split_once(' ') else { return Ok(None) };
        let operands = split_operands(rest);
        let Some((dest, sources)) = operands.split_first() else { return Ok(None) };
        let dests: Vec<&str> = dest.trim_start_matches('{').trim_end_matches('}').split(',').map(str::trim).collect();
        let braced = dest.starts_with('{');
        // The statement as `portable` knows it: destinations `$0`.., then each distinct source.
        let mut values: Vec<BasicValueEnum<'ctx>> = Vec::new();
        let mut names: Vec<&str> = Vec::new();
        let mut canon_sources = Vec::new();
        for s in sources {
            let items: Vec<&str> = s.trim_start_matches('{').trim_end_matches('}').split(',').map(str::trim).collect();
            let mut canon = Vec::new();
            for item in &items {
                let k = match names.iter().position(|n| n == item) {
                    Some(k) => k,
                    None => {
                        let v = if let Some(n) = item.strip_prefix('$') {
                            let Ok(n) = n.parse::<usize>() else { return Ok(None) };
                            let Some(v) = n.checked_sub(outputs.len()).and_then(|i| args.get(i)) else {
                                return Ok(None);
                            };
                            *v
                        } else {
                            let Some(v) = held.get(item) else { return Ok(None) };
                            *v
                        };
                        names.push(item);
                        values.push(v);
                        names.len() - 1
                    }
                };
                canon.push(format!("${}", k + dests.len()));
            }
            canon_sources.push(if s.starts_with('{') { format!("{{{}}}", canon.join(",")) } else { canon.join(",") });
        }
        let canon_dest: Vec<String> = (0..dests.len()).map(|k| format!("${k}")).collect();
        let canon_dest = if braced { format!("{{{}}}", canon_dest.join(",")) } else { canon_dest.join(",") };
        let canon = format!("{op} {canon_dest}, {}", canon_sources.join(", "));
        // What each destination holds: a register (16 bits) or an output of the asm.
        let dest_ty = |d: &str| -> Option<BasicTypeEnum<'ctx>> {
            if regs.contains(&d) {
                return Some(i16t.into());
            }
            outputs.get(d.strip_prefix('$')?.parse::<usize>().ok()?).copied()
        };
        let Some(tys) = dests.iter().map(|d| dest_ty(d)).collect::<Option<Vec<_>>>() else { return Ok(None) };
        let ty: AnyTypeEnum<'ctx> =
            if braced { ctx.struct_type(&tys, false).as_any_type_enum() } else { tys[0].as_any_type_enum() };
        let Some(v) = portable(dev, b, &canon, &values, ty, lane)? else { return Ok(None) };
        for (k, d) in dests.iter().enumerate() {
            let part =
                if braced { b.build_extract_value(v.into_struct_value(), k as u32, "").map_err(llvm)? } else { v };
            match d.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
                Some(n) if n < out.len() => out[n] = Some(part),
                Some(_) => return Ok(None),
                None => {
                    held.insert(d, part);
                }
            }
        }
    }
    let Some(out) = out.into_iter().collect::<Option<Vec<_>>>() else { return Ok(None) };
    match (result, out.as_slice()) {
        (AnyTypeEnum::StructType(s), _) => {
            let mut agg = s.get_undef();
            for (k, v) in out.iter().enumerate() {
                agg = b.build_insert_value(agg, *v, k as u32, "").map_err(llvm)?.into_struct_value();
            }
            Ok(Some(agg.into()))
        }
        (_, [v]) => Ok(Some(*v)),
        _ => Ok(None),
    }
}

/// The operands of a statement: comma-separated, braces kept whole (`$0, {low,high}`).
fn split_operands(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(text[start..].trim());
    out
}

/// The CPU's exact equivalent of CUDA's half-precision arithmetic (`__hadd`, `__hmul2`,
/// `__hfma`...: `add`/`sub`/`mul`/`fma` on `.f16` and `.f16x2`), which the GPU runs as
/// written. Round-to-nearest, as `.rn` is and as the plain forms are unless the GPU's
/// assembler fuses them.
fn half_arithmetic<'ctx>(
    dev: &Module<'ctx>,
    b: &Builder<'ctx>,
    stmt: &str,
    args: &[BasicValueEnum<'ctx>],
    result: AnyTypeEnum<'ctx>,
) -> Result<Option<BasicValueEnum<'ctx>>> {
    let Some((op, operands)) = stmt.split_once(' ') else { return Ok(None) };
    if let Some(test) = op.strip_prefix("set.") {
        return half_comparison(dev, b, test, operands, args, result);
    }
    let (op, pair) = match op.strip_suffix(".f16x2") {
        Some(op) => (op, true),
        None => match op.strip_suffix(".f16") {
            Some(op) => (op, false),
            None => return Ok(None),
        },
    };
    let arity = match op {
        "add" | "add.rn" | "sub" | "sub.rn" | "mul" | "mul.rn" => 2,
        "fma.rn" => 3,
        _ => return Ok(None),
    };
    let want: String = (0..=arity).map(|i| format!("${i}")).collect::<Vec<_>>().join(",");
    if operands.replace(' ', "") != want || args.len() != arity {
        return Ok(None);
    }
    let ctx = dev.get_context();
    let (bits, ty): (inkwell::types::IntType, BasicTypeEnum) = if pair {
        (ctx.i32_type(), ctx.f16_type().vec_type(2).into())
    } else {
        (ctx.i16_type(), ctx.f16_type().into())
    };
    if args.iter().any(|a| !a.is_int_value() || a.into_int_value().get_type() != bits) {
        return Ok(None);
    }
    let x: Vec<BasicValueEnum> =
        args.iter().map(|&a| b.build_bit_cast(a, ty, "")).collect::<Result<_, _>>().map_err(llvm)?;
    let v: BasicValueEnum = unsafe {
        let bb = b.as_mut_ptr();
        let (x0, x1) = (x[0].as_value_ref(), x[1].as_value_ref());
        let r = match &op[..3] {
            "add" => LLVMBuildFAdd(bb, x0, x1, c"".as_ptr()),
            "sub" => LLVMBuildFSub(bb, x0, x1, c"".as_ptr()),
            "mul" => LLVMBuildFMul(bb, x0, x1, c"".as_ptr()),
            _ => {
                let f = inkwell::intrinsics::Intrinsic::find("llvm.fma")
                    .and_then(|i| i.get_declaration(dev, &[ty]))
                    .ok_or_else(|| Error::Llvm("no llvm.fma".into()))?;
                let call = b.build_call(f, &[x[0].into(), x[1].into(), x[2].into()], "").map_err(llvm)?;
                call.as_value_ref()
            }
        };
        BasicValueEnum::new(r)
    };
    let v = b.build_bit_cast(v, bits, "").map_err(llvm)?;
    let fits = unsafe { LLVMTypeOf(v.as_value_ref()) == result.as_type_ref() };
    Ok(fits.then_some(v))
}

/// PTX's `set.CMP.f16x2.f16x2 $0,$1,$2` (and `.f16.f16`), CUDA's `__hgt2` and kin: per half,
/// 1.0 where the comparison holds and 0.0 where not; the ordered tests are false and the
/// unordered (`equ`, `ltu`...) true where a half is NaN, as LLVM's `fcmp o..`/`u..` are.
fn half_comparison<'ctx>(
    dev: &Module<'ctx>,
    b: &Builder<'ctx>,
    test: &str,
    operands: &str,
    args: &[BasicValueEnum<'ctx>],
    result: AnyTypeEnum<'ctx>,
) -> Result<Option<BasicValueEnum<'ctx>>> {
    use inkwell::FloatPredicate as P;
    let (test, pair) = match (test.strip_suffix(".f16x2.f16x2"), test.strip_suffix(".f16.f16")) {
        (Some(t), _) => (t, true),
        (None, Some(t)) => (t, false),
        _ => return Ok(None),
    };
    let predicate = match test {
        "eq" => P::OEQ,
        "ne" => P::ONE,
        "lt" => P::OLT,
        "le" => P::OLE,
        "gt" => P::OGT,
        "ge" => P::OGE,
        "equ" => P::UEQ,
        "neu" => P::UNE,
        "ltu" => P::ULT,
        "leu" => P::ULE,
        "gtu" => P::UGT,
        "geu" => P::UGE,
        _ => return Ok(None),
    };
    if operands.replace(' ', "") != "$0,$1,$2" || args.len() != 2 {
        return Ok(None);
    }
    let ctx = dev.get_context();
    let h = ctx.f16_type();
    let (bits, ty): (inkwell::types::IntType, BasicTypeEnum) =
        if pair { (ctx.i32_type(), h.vec_type(2).into()) } else { (ctx.i16_type(), h.into()) };
    if args.iter().any(|a| !a.is_int_value() || a.into_int_value().get_type() != bits) {
        return Ok(None);
    }
    let x = b.build_bit_cast(args[0], ty, "").map_err(llvm)?;
    let y = b.build_bit_cast(args[1], ty, "").map_err(llvm)?;
    let v: BasicValueEnum = if pair {
        let (x, y) = (x.into_vector_value(), y.into_vector_value());
        let holds = b.build_float_compare(predicate, x, y, "").map_err(llvm)?;
        let one = inkwell::types::VectorType::const_vector(&[h.const_float(1.0), h.const_float(1.0)]);
        let zero = inkwell::types::VectorType::const_vector(&[h.const_float(0.0), h.const_float(0.0)]);
        b.build_select(holds, one, zero, "").map_err(llvm)?
    } else {
        let holds = b.build_float_compare(predicate, x.into_float_value(), y.into_float_value(), "").map_err(llvm)?;
        b.build_select(holds, h.const_float(1.0), h.const_float(0.0), "").map_err(llvm)?
    };
    let v = b.build_bit_cast(v, bits, "").map_err(llvm)?;
    let fits = unsafe { LLVMTypeOf(v.as_value_ref()) == result.as_type_ref() };
    Ok(fits.then_some(v))
}

/// The bits of `x` rounded to bfloat16, to nearest even, as PTX's `cvt.rn.bf16.f32` gives
/// them: the upper half of the float's bits after adding half an ulp (less one where the kept
/// part is even, so ties go to even); any NaN is 0x7fff. Infinities stay, and finite values
/// past the largest bfloat16 round to infinity, as the addition carries into the exponent.
fn bf16_bits<'ctx>(b: &Builder<'ctx>, x: inkwell::values::FloatValue<'ctx>) -> Result<IntValue<'ctx>> {
    let i32t = x.get_type().get_context().i32_type();
    let i16t = x.get_type().get_context().i16_type();
    let bits = b.build_bit_cast(x, i32t, "").map_err(llvm)?.into_int_value();
    let kept = b.build_right_shift(bits, i32t.const_int(16, false), false, "").map_err(llvm)?;
    let odd = b.build_and(kept, i32t.const_int(1, false), "").map_err(llvm)?;
    let half = b.build_int_add(i32t.const_int(0x7fff, false), odd, "").map_err(llvm)?;
    let sum = b.build_int_add(bits, half, "").map_err(llvm)?;
    let rounded = b.build_right_shift(sum, i32t.const_int(16, false), false, "").map_err(llvm)?;
    let rounded = b.build_int_truncate(rounded, i16t, "").map_err(llvm)?;
    let nan = b.build_float_compare(inkwell::FloatPredicate::UNO, x, x, "").map_err(llvm)?;
    Ok(b.build_select(nan, i16t.const_int(0x7fff, false), rounded, "bf16").map_err(llvm)?.into_int_value())
}

/// The cycle counter: `%clock64` on the GPU (the NVPTX backend's reading of
/// `llvm.readcyclecounter`), the time-stamp counter on the CPU.
pub(super) fn clock<'ctx>(dev: &Module<'ctx>, b: &Builder<'ctx>) -> Result<IntValue<'ctx>> {
    let f = inkwell::intrinsics::Intrinsic::find("llvm.readcyclecounter")
        .and_then(|i| i.get_declaration(dev, &[]))
        .ok_or_else(|| Error::Llvm("no llvm.readcyclecounter".into()))?;
    Ok(b.build_call(f, &[], "clock").map_err(llvm)?.try_as_basic_value().basic().expect("i64").into_int_value())
}

#[cfg(test)]
mod tests {
    use super::{is_hint, normalize, split_operands};

    #[test]
    fn operands_keep_braces_whole() {
        assert_eq!(split_operands("$0, {low,high}"), vec!["$0", "{low,high}"]);
        assert_eq!(split_operands("{low,high},$1"), vec!["{low,high}", "$1"]);
        assert_eq!(split_operands("low, $1"), vec!["low", "$1"]);
        let block = normalize("{.reg .f16 low;\n  cvt.rn.f16.f32 low, $1;\n  mov.b32 $0, {low,low};}\n");
        assert_eq!(block, ".reg .f16 low; cvt.rn.f16.f32 low, $1; mov.b32 $0, {low,low}");
    }

    #[test]
    fn cache_hints_are_known_by_their_opcode() {
        assert!(is_hint("prefetch.global.L2 [$0]"));
        assert!(is_hint("prefetch.global.L2::evict_last [$0]"));
        assert!(is_hint("prefetchu.L1 [$0]"));
        assert!(!is_hint("prefetched.u32 $0, $1"));
        assert!(!is_hint("ld.global.nc.u32 $0, [$1]"));
    }

    #[test]
    fn statements_are_compared_without_braces_blanks_or_comments() {
        assert_eq!(normalize("{  cvt.rn.f16.f32 $0, $1;}\n"), "cvt.rn.f16.f32 $0, $1");
        assert_eq!(normalize("mov.u32 $0, %laneid;"), "mov.u32 $0, %laneid");
        assert_eq!(normalize("{mov.u32 $0, WARP_SZ;\n}"), "mov.u32 $0, WARP_SZ");
        assert_eq!(normalize("{  mov.b32 $0, {$1,$2};}\n"), "mov.b32 $0, {$1,$2}");
        assert_eq!(normalize("{min.f32 $0,$1,$2;\n}"), "min.f32 $0,$1,$2");
        assert_eq!(normalize("{ // a comment\n add.f16 $0, $1, $2; }"), "add.f16 $0, $1, $2");
    }
}
