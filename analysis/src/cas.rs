//! Compare-and-swap loops that are atomic updates: `atomicAdd` on `double` for GPUs before
//! sm_60, a 64-bit sum or maximum, written as programs write them,
//!
//! ```c
//! old = *p;
//! do { assumed = old; old = atomicCAS(p, assumed, assumed + v); } while (assumed != old);
//! ```
//!
//! A loop that retries until its compare-and-swap finds the value it assumed, and then leaves,
//! updates the element exactly as one `atomicrmw` of its operation with `v` does. Before the
//! cropping, each such loop of the analysis's copy becomes that `atomicrmw` ([`to_rmw`]), so
//! that the cropping records it as the reduction it is (`crate::crop`): devices update private
//! copies set to the operation's identity, and the runtime combines them. The first read of
//! the element (`old = *p`) goes with the loop: it is only a guess the loop corrects, and left
//! in place it would make the argument one the kernel reads.
//!
//! Invariants (a loop that fails any stays a compare-and-swap, which keeps its node whole):
//! - the loop is one block: a phi of the value assumed (the first guess from outside, the
//!   value found from the block itself), the update, the compare-and-swap, and a branch that
//!   goes round again exactly when the value found is not the one assumed;
//! - the value found is used by nothing else, nor is the update;
//! - the update is an integer `add`, an `fadd` of the element's bits as a float of its width,
//!   or a signed or unsigned `min` or `max` (LLVM's intrinsics, libdevice's `__nv_min` and
//!   kin, or a `select` on a compare of the two), of the value assumed and a value from
//!   outside the loop. A `?:` that stays branches (`v > a ? v : a` without optimization) makes
//!   the loop several blocks, and is not taken;
//! - the analysis's copy only: the program runs its loop as written.

use llvm_sys::core::*;
use llvm_sys::debuginfo::{LLVMInstructionGetDebugLoc, LLVMInstructionSetDebugLoc};
use llvm_sys::prelude::*;
use llvm_sys::{LLVMAtomicRMWBinOp, LLVMIntPredicate, LLVMOpcode};

/// Rewrites every compare-and-swap loop of `f` that is an atomic update into that update
/// (see the module's doc); returns how many.
///
/// # Safety
/// `f` is a function of a live module the caller owns.
pub unsafe fn to_rmw(f: LLVMValueRef) -> usize {
    let mut casts = Vec::new();
    let mut bb = LLVMGetFirstBasicBlock(f);
    while !bb.is_null() {
        let mut i = LLVMGetFirstInstruction(bb);
        while !i.is_null() {
            if LLVMGetInstructionOpcode(i) == LLVMOpcode::LLVMAtomicCmpXchg {
                casts.push(i);
            }
            i = LLVMGetNextInstruction(i);
        }
        bb = LLVMGetNextBasicBlock(bb);
    }
    casts.into_iter().filter(|&c| rewrite(c)).count()
}

/// The users of `v`.
unsafe fn users(v: LLVMValueRef) -> Vec<LLVMValueRef> {
    let mut out = Vec::new();
    let mut u = LLVMGetFirstUse(v);
    while !u.is_null() {
        out.push(LLVMGetUser(u));
        u = LLVMGetNextUse(u);
    }
    out
}

fn is(v: LLVMValueRef, op: LLVMOpcode) -> bool {
    // SAFETY: `v` is a live value; non-instructions are told apart first.
    unsafe { !LLVMIsAInstruction(v).is_null() && LLVMGetInstructionOpcode(v) == op }
}

/// The name of the function `call` calls directly, or "".
unsafe fn callee(call: LLVMValueRef) -> String {
    let c = LLVMGetCalledValue(call);
    if c.is_null() || LLVMIsAFunction(c).is_null() {
        return String::new();
    }
    let mut len = 0;
    let p = LLVMGetValueName2(c, &mut len);
    String::from_utf8_lossy(std::slice::from_raw_parts(p as *const u8, len)).into_owned()
}

/// `v` without the reinterpretations between an integer and a float of its width (`bitcast`,
/// libdevice's `__int_as_float` and kin), and those it went through.
unsafe fn through_bits(mut v: LLVMValueRef, chain: &mut Vec<LLVMValueRef>) -> LLVMValueRef {
    const BITS: [&str; 4] =
        ["__nv_int_as_float", "__nv_float_as_int", "__nv_longlong_as_double", "__nv_double_as_longlong"];
    loop {
        let cast = is(v, LLVMOpcode::LLVMBitCast) || is(v, LLVMOpcode::LLVMCall) && BITS.contains(&callee(v).as_str());
        if !cast {
            return v;
        }
        let next = LLVMGetOperand(v, 0);
        chain.push(v);
        v = next;
    }
}

/// The operation `update` applies to `assumed` and its other operand, that operand, and the
/// instructions it is made of: an integer add, a float add of `assumed`'s bits, or an integer
/// minimum or maximum.
unsafe fn operation(
    update: LLVMValueRef,
    assumed: LLVMValueRef,
) -> Option<(LLVMAtomicRMWBinOp, LLVMValueRef, Vec<LLVMValueRef>)> {
    use LLVMAtomicRMWBinOp::*;
    let mut chain = Vec::new();
    let core = through_bits(update, &mut chain);
    chain.push(core);
    let other = |a: LLVMValueRef, b: LLVMValueRef, chain: &mut Vec<LLVMValueRef>| {
        let mut ca = Vec::new();
        let mut cb = Vec::new();
        if through_bits(a, &mut ca) == assumed {
            chain.extend(ca);
            Some(b)
        } else if through_bits(b, &mut cb) == assumed {
            chain.extend(cb);
            Some(a)
        } else {
            None
        }
    };
    let (op, v) = if is(core, LLVMOpcode::LLVMAdd) || is(core, LLVMOpcode::LLVMFAdd) {
        let float = is(core, LLVMOpcode::LLVMFAdd);
        let v = other(LLVMGetOperand(core, 0), LLVMGetOperand(core, 1), &mut chain)?;
        (if float { LLVMAtomicRMWBinOpFAdd } else { LLVMAtomicRMWBinOpAdd }, v)
    } else if is(core, LLVMOpcode::LLVMCall) {
        let name = callee(core);
        // LLVM's intrinsics, and libdevice's functions for CUDA's `min` and `max` overloads.
        let op = match name.as_str() {
            n if n.starts_with("llvm.smin.") => LLVMAtomicRMWBinOpMin,
            n if n.starts_with("llvm.smax.") => LLVMAtomicRMWBinOpMax,
            n if n.starts_with("llvm.umin.") => LLVMAtomicRMWBinOpUMin,
            n if n.starts_with("llvm.umax.") => LLVMAtomicRMWBinOpUMax,
            "__nv_min" | "__nv_llmin" => LLVMAtomicRMWBinOpMin,
            "__nv_max" | "__nv_llmax" => LLVMAtomicRMWBinOpMax,
            "__nv_umin" | "__nv_ullmin" => LLVMAtomicRMWBinOpUMin,
            "__nv_umax" | "__nv_ullmax" => LLVMAtomicRMWBinOpUMax,
            _ => return None,
        };
        if LLVMGetNumArgOperands(core) != 2 {
            return None;
        }
        (op, other(LLVMGetOperand(core, 0), LLVMGetOperand(core, 1), &mut chain)?)
    } else if is(core, LLVMOpcode::LLVMSelect) {
        // `select (icmp P a, b), a, b`: the smaller (P less-than) or the larger.
        let cmp = LLVMGetOperand(core, 0);
        let (t, e) = (LLVMGetOperand(core, 1), LLVMGetOperand(core, 2));
        if !is(cmp, LLVMOpcode::LLVMICmp) || LLVMGetOperand(cmp, 0) != t || LLVMGetOperand(cmp, 1) != e {
            return None;
        }
        if users(cmp).len() != 1 {
            return None;
        }
        use LLVMIntPredicate::*;
        let op = match LLVMGetICmpPredicate(cmp) {
            LLVMIntSLT | LLVMIntSLE => LLVMAtomicRMWBinOpMin,
            LLVMIntSGT | LLVMIntSGE => LLVMAtomicRMWBinOpMax,
            LLVMIntULT | LLVMIntULE => LLVMAtomicRMWBinOpUMin,
            LLVMIntUGT | LLVMIntUGE => LLVMAtomicRMWBinOpUMax,
            _ => return None,
        };
        chain.push(cmp);
        let v = if t == assumed {
            e
        } else if e == assumed {
            t
        } else {
            return None;
        };
        (op, v)
    } else {
        return None;
    };
    // A float add needs the float itself; the integer operations the element's own type.
    let float = op == LLVMAtomicRMWBinOpFAdd;
    let ty = LLVMTypeOf(v);
    let kind = LLVMGetTypeKind(ty);
    let fits = if float {
        matches!(kind, llvm_sys::LLVMTypeKind::LLVMFloatTypeKind | llvm_sys::LLVMTypeKind::LLVMDoubleTypeKind)
            && float_bits(ty) == LLVMGetIntTypeWidth(LLVMTypeOf(assumed)) as u64
    } else {
        ty == LLVMTypeOf(assumed)
    };
    fits.then_some((op, v, chain))
}

/// The width of a float type, 0 for any other.
unsafe fn float_bits(ty: LLVMTypeRef) -> u64 {
    match LLVMGetTypeKind(ty) {
        llvm_sys::LLVMTypeKind::LLVMFloatTypeKind => 32,
        llvm_sys::LLVMTypeKind::LLVMDoubleTypeKind => 64,
        _ => 0,
    }
}

/// Rewrites the loop of the compare-and-swap `cas` where it is an atomic update.
unsafe fn rewrite(cas: LLVMValueRef) -> bool {
    let block = LLVMGetInstructionParent(cas);
    let (ptr, assumed, update) = (LLVMGetOperand(cas, 0), LLVMGetOperand(cas, 1), LLVMGetOperand(cas, 2));
    // The value assumed: a phi of this block, of the first guess and the value found.
    if !is(assumed, LLVMOpcode::LLVMPHI)
        || LLVMGetInstructionParent(assumed) != block
        || LLVMCountIncoming(assumed) != 2
    {
        return false;
    }
    // What the compare-and-swap gives: the value found, and whether it swapped.
    let (mut found, mut swapped) = (None, None);
    for u in users(cas) {
        if !is(u, LLVMOpcode::LLVMExtractValue) || LLVMGetNumIndices(u) != 1 {
            return false;
        }
        match *LLVMGetIndices(u) {
            0 if found.is_none() => found = Some(u),
            1 if swapped.is_none() => swapped = Some(u),
            _ => return false,
        }
    }
    let Some(found) = found else { return false };
    let (mut first, mut from_found) = (None, false);
    for k in 0..LLVMCountIncoming(assumed) {
        let (v, b) = (LLVMGetIncomingValue(assumed, k), LLVMGetIncomingBlock(assumed, k));
        if v == found && b == block {
            from_found = true;
        } else if b != block {
            first = Some(v);
        }
    }
    let Some(first) = first else { return false };
    if !from_found {
        return false;
    }
    // The branch: round again exactly when the value found is not the one assumed.
    let term = LLVMGetBasicBlockTerminator(block);
    if !is(term, LLVMOpcode::LLVMBr) || LLVMIsConditional(term) == 0 {
        return false;
    }
    let cond = LLVMGetCondition(term);
    let (s0, s1) = (LLVMGetSuccessor(term, 0), LLVMGetSuccessor(term, 1));
    // Which successor the loop leaves by once the swap was made.
    let exit_when_true = if Some(cond) == swapped {
        true
    } else if is(cond, LLVMOpcode::LLVMICmp)
        && ((LLVMGetOperand(cond, 0) == assumed && LLVMGetOperand(cond, 1) == found)
            || (LLVMGetOperand(cond, 0) == found && LLVMGetOperand(cond, 1) == assumed))
    {
        match LLVMGetICmpPredicate(cond) {
            LLVMIntPredicate::LLVMIntEQ => true,
            LLVMIntPredicate::LLVMIntNE => false,
            _ => return false,
        }
    } else {
        return false;
    };
    let (leave, again) = if exit_when_true { (s0, s1) } else { (s1, s0) };
    if again != block || leave == block {
        return false;
    }
    // Nothing else sees the value found, whether it swapped, or the update.
    let found_users = users(found);
    if !found_users.iter().all(|&u| u == assumed || u == cond) {
        return false;
    }
    if let Some(s) = swapped {
        if !users(s).iter().all(|&u| u == cond) {
            return false;
        }
    }
    if users(cond).len() != 1 {
        return false;
    }
    let Some((op, value, mut chain)) = operation(update, assumed) else { return false };
    let mut seen = Vec::new();
    chain.retain(|c| {
        if seen.contains(c) {
            false
        } else {
            seen.push(*c);
            true
        }
    });
    // The other operand comes from outside the loop.
    if !LLVMIsAInstruction(value).is_null() && LLVMGetInstructionParent(value) == block {
        return false;
    }
    // Every instruction of the update is used within it, or by the compare-and-swap.
    for &c in &chain {
        if LLVMIsAInstruction(c).is_null() || LLVMGetInstructionParent(c) != block {
            return false;
        }
        if !users(c).iter().all(|u| *u == cas || chain.contains(u)) {
            return false;
        }
    }
    if !users(assumed).iter().all(|u| *u == cond || *u == cas || chain.contains(u)) {
        return false;
    }
    // The loop becomes the update, once.
    let builder = LLVMCreateBuilderInContext(LLVMGetTypeContext(LLVMTypeOf(cas)));
    LLVMPositionBuilderBefore(builder, cas);
    let rmw = LLVMBuildAtomicRMW(
        builder,
        op,
        ptr,
        value,
        llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingSequentiallyConsistent,
        0,
    );
    LLVMInstructionSetDebugLoc(rmw, LLVMInstructionGetDebugLoc(cas));
    LLVMDisposeBuilder(builder);
    let leave_now =
        LLVMConstInt(LLVMInt1TypeInContext(LLVMGetTypeContext(LLVMTypeOf(cond))), u64::from(exit_when_true), 0);
    LLVMSetCondition(term, leave_now);
    // The first guess, its loop-carried value and the update die with the loop.
    LLVMReplaceAllUsesWith(found, assumed);
    LLVMInstructionEraseFromParent(cond);
    if let Some(s) = swapped {
        LLVMInstructionEraseFromParent(s);
    }
    LLVMInstructionEraseFromParent(found);
    LLVMInstructionEraseFromParent(cas);
    for &c in chain.iter() {
        LLVMReplaceAllUsesWith(c, LLVMGetPoison(LLVMTypeOf(c)));
    }
    for &c in chain.iter() {
        LLVMInstructionEraseFromParent(c);
    }
    LLVMReplaceAllUsesWith(assumed, LLVMGetPoison(LLVMTypeOf(assumed)));
    LLVMInstructionEraseFromParent(assumed);
    // A first read of the element that was only the guess goes too.
    if is(first, LLVMOpcode::LLVMLoad) && LLVMGetFirstUse(first).is_null() && LLVMGetOperand(first, 0) == ptr {
        LLVMInstructionEraseFromParent(first);
    }
    true
}

#[cfg(test)]
mod tests {
    use inkwell::context::Context;
    use inkwell::values::{AnyValue, AsValueRef};

    /// `@f` of `ir` after [`super::to_rmw`]: how many loops it rewrote, and the function.
    fn rewritten(ir: &str) -> (usize, String) {
        let ctx = Context::create();
        let buf = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "t");
        let m = ctx.create_module_from_ir(buf).unwrap();
        let f = m.get_function("f").unwrap();
        // SAFETY: `f` belongs to the live module `m`.
        let n = unsafe { super::to_rmw(f.as_value_ref()) };
        assert!(m.verify().is_ok(), "{}", m.print_to_string());
        (n, f.print_to_string().to_string())
    }

    /// A 64-bit sum's loop, with its first guess read from the element.
    const SUM: &str = "define i64 @f(ptr %p, i64 %v) {
       entry:
         %first = load i64, ptr %p
         br label %loop
       loop:
         %assumed = phi i64 [ %first, %entry ], [ %found, %loop ]
         %new = add nsw i64 %assumed, %v
         %pair = cmpxchg ptr %p, i64 %assumed, i64 %new seq_cst seq_cst
         %found = extractvalue { i64, i1 } %pair, 0
         %again = icmp ne i64 %assumed, %found
         br i1 %again, label %loop, label %done
       done:
         ret i64 RESULT
       }";

    #[test]
    fn a_sum_through_compare_and_swap_is_an_atomic_add() {
        let (n, text) = rewritten(&SUM.replace("RESULT", "0"));
        assert_eq!(n, 1, "{text}");
        assert!(text.contains("atomicrmw add ptr %p, i64 %v seq_cst"), "{text}");
        assert!(!text.contains("cmpxchg") && !text.contains("load i64"), "{text}");
    }

    /// The value found, used after the loop (the old value a caller wants), is not an update's.
    #[test]
    fn a_loop_whose_found_value_escapes_stays() {
        let (n, text) = rewritten(&SUM.replace("RESULT", "%found"));
        assert_eq!(n, 0, "{text}");
        assert!(text.contains("cmpxchg"), "{text}");
    }

    /// An update that is not the operation with a value from outside (a product with the value
    /// assumed itself, a subtraction) stays a compare-and-swap.
    #[test]
    fn other_updates_stay() {
        for update in ["mul nsw i64 %assumed, %v", "sub i64 %v, %assumed", "add i64 %assumed, %assumed"] {
            let (n, text) = rewritten(&SUM.replace("add nsw i64 %assumed, %v", update).replace("RESULT", "0"));
            assert_eq!(n, 0, "{update}: {text}");
        }
    }

    /// A float sum through the element's bits, and a maximum through libdevice.
    #[test]
    fn float_sums_and_maxima_through_compare_and_swap() {
        let float = SUM
            .replace(
                "%new = add nsw i64 %assumed, %v",
                "%f = bitcast i64 %assumed to double\n %s = fadd double %f, %d\n %new = bitcast double %s to i64",
            )
            .replace("i64 %v)", "double %d)")
            .replace("RESULT", "0");
        let (n, text) = rewritten(&float);
        assert_eq!(n, 1, "{text}");
        assert!(text.contains("atomicrmw fadd ptr %p, double %d seq_cst"), "{text}");
        let max = format!(
            "declare i64 @__nv_llmax(i64, i64)\n{}",
            SUM.replace("add nsw i64 %assumed, %v", "call i64 @__nv_llmax(i64 %v, i64 %assumed)")
                .replace("RESULT", "0")
        );
        let (n, text) = rewritten(&max);
        assert_eq!(n, 1, "{text}");
        assert!(text.contains("atomicrmw max ptr %p, i64 %v seq_cst"), "{text}");
    }
}
