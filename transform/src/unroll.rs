//! Full unrolling of the counted loops that index a kernel's local arrays.
//!
//! A thread's local array (`double2 data[8]`) lives in registers only when every access to it
//! has a constant index; otherwise it sits in local memory, and a kernel that works on it runs
//! several times slower. NVIDIA's compiler unrolls short counted loops over such arrays whatever
//! their bodies cost. LLVM's unroller weighs the body against its threshold instead, and keeps
//! HeCBench fft's `for (j = 1; j < 8; j++) data[j] = cmplx_mul(data[j], exp_i(..))` rolled once
//! `sin` and `cos` are inlined into it: the kernel ran at a third of nvcc's speed. (AMDGPU's
//! backend raises its unroll threshold for loops over private arrays for the same reason.)
//!
//! So after the first optimization we look for local arrays still indexed by a loop's counter,
//! mark those loops `llvm.loop.unroll.full` as `#pragma unroll` would (the unroller then allows
//! 16K instructions, LLVM's `-pragma-unroll-threshold`) and the caller optimizes again.
//!
//! Only loops whose trip count is a small constant are marked, found by running the counter:
//! a phi that starts at a constant, steps by a constant, and leaves when a comparison with a
//! constant says so. Loops the user marked themselves (`#pragma unroll 1`) keep their mark.

use hpvm_core::Val;
use inkwell::values::{AsValueRef, FunctionValue};
use llvm_sys::core::*;
use llvm_sys::prelude::*;
use llvm_sys::{LLVMIntPredicate, LLVMOpcode};
use std::collections::HashSet;

/// Loops that run more times than this stay as they are: unrolled, their bodies would not fit
/// the unroller's budget anyway, and a local array of that many elements rarely fits registers.
const MAX_TRIPS: u64 = 64;

/// How deep an index expression is followed back to a loop counter.
const MAX_DEPTH: u32 = 8;

/// Marks every loop of `functions` whose counter indexes a local array for full unrolling, and
/// returns how many it marked (none: no second optimization is needed).
pub fn mark_local_array_loops(functions: &[FunctionValue<'_>]) -> usize {
    let mut marked = 0;
    for f in functions {
        let Some(entry) = f.get_first_basic_block() else { continue };
        let mut latches: Vec<LLVMValueRef> = Vec::new();
        for inst in entry.get_instructions() {
            let alloca = Val(inst.as_value_ref());
            if !alloca.is_alloca() {
                continue;
            }
            for index in variable_indices(alloca) {
                let mut seen = HashSet::new();
                counters(index, MAX_DEPTH, &mut seen, &mut latches);
            }
        }
        latches.sort_unstable();
        latches.dedup();
        for latch in latches {
            // SAFETY: `latch` is a live branch of `f`.
            if unsafe { mark_full(latch) } {
                tracing::info!("{}: a loop over a local array unrolled fully", f.get_name().to_string_lossy());
                marked += 1;
            }
        }
    }
    marked
}

/// The non-constant indices of the addresses computed from `alloca` (through GEPs of GEPs).
fn variable_indices(alloca: Val) -> Vec<Val> {
    let mut out = Vec::new();
    let mut work = vec![alloca];
    let mut seen = HashSet::new();
    while let Some(p) = work.pop() {
        if !seen.insert(p) {
            continue;
        }
        for u in p.users() {
            if u.opcode() == Some(LLVMOpcode::LLVMGetElementPtr) && u.operand(0) == p {
                out.extend((1..u.num_operands()).map(|i| u.operand(i)).filter(|i| i.const_i64().is_none()));
                work.push(u);
            }
        }
    }
    out
}

/// Collects the latches of the counted loops whose counters `v` is computed from: through
/// casts, arithmetic, and loads from constant tables (`data[reversed[i]]`).
fn counters(v: Val, depth: u32, seen: &mut HashSet<Val>, latches: &mut Vec<LLVMValueRef>) {
    if depth == 0 || !seen.insert(v) || v.const_i64().is_some() {
        return;
    }
    let Some(op) = v.opcode() else { return };
    use LLVMOpcode::*;
    match op {
        LLVMPHI => {
            // SAFETY: `v` is a phi of a live function.
            if let Some(latch) = unsafe { counted_loop_latch(v) } {
                latches.push(latch);
            }
        }
        LLVMZExt | LLVMSExt | LLVMTrunc | LLVMAdd | LLVMSub | LLVMMul | LLVMShl | LLVMLShr | LLVMAShr | LLVMAnd
        | LLVMOr | LLVMXor | LLVMUDiv | LLVMSDiv | LLVMURem | LLVMSRem | LLVMSelect => {
            for i in 0..v.num_operands() {
                counters(v.operand(i), depth - 1, seen, latches);
            }
        }
        LLVMLoad => {
            let addr = v.operand(0);
            // SAFETY: reading a live instruction's operands.
            let constant_table = addr.opcode() == Some(LLVMGetElementPtr)
                && unsafe {
                    let base = LLVMGetOperand(addr.0, 0);
                    !LLVMIsAGlobalVariable(base).is_null() && LLVMIsGlobalConstant(base) != 0
                };
            if constant_table {
                for i in 1..addr.num_operands() {
                    counters(addr.operand(i), depth - 1, seen, latches);
                }
            }
        }
        _ => {}
    }
}

/// The latch branch of the loop `phi` counts, when it starts at a constant, steps by a constant
/// and leaves after at most [`MAX_TRIPS`] iterations by a comparison with a constant.
///
/// # Safety
/// `phi` is a phi of a live function.
unsafe fn counted_loop_latch(phi: Val) -> Option<LLVMValueRef> {
    if LLVMCountIncoming(phi.0) != 2 {
        return None;
    }
    let header = LLVMGetInstructionParent(phi.0);
    let (mut start, mut step) = (None, None);
    for i in 0..2 {
        let value = Val(LLVMGetIncomingValue(phi.0, i));
        let from = LLVMGetIncomingBlock(phi.0, i);
        if let Some(c) = value.const_i64() {
            start = Some(c);
        } else {
            let delta = match value.opcode()? {
                LLVMOpcode::LLVMAdd if value.operand(0) == phi => value.operand(1).const_i64()?,
                LLVMOpcode::LLVMAdd if value.operand(1) == phi => value.operand(0).const_i64()?,
                LLVMOpcode::LLVMSub if value.operand(0) == phi => value.operand(1).const_i64()?.checked_neg()?,
                _ => return None,
            };
            step = Some((value, delta, from));
        }
    }
    let (start, (next, delta, latch_block)) = (start?, step?);
    let br = LLVMGetBasicBlockTerminator(latch_block);
    let br_val = Val(br);
    if !br_val.is_conditional_branch() {
        return None;
    }
    let cond = LLVMGetCondition(br);
    if LLVMGetInstructionOpcode(cond) != LLVMOpcode::LLVMICmp {
        return None;
    }
    let stays_on_true = LLVMGetSuccessor(br, 0) == header;
    if !stays_on_true && LLVMGetSuccessor(br, 1) != header {
        return None;
    }
    let (lhs, rhs) = (Val(LLVMGetOperand(cond, 0)), Val(LLVMGetOperand(cond, 1)));
    let (tested, bound, swapped) = match (rhs.const_i64(), lhs.const_i64()) {
        (Some(b), _) => (lhs, b, false),
        (None, Some(b)) => (rhs, b, true),
        _ => return None,
    };
    let tests_next = if tested == next {
        true
    } else if tested == phi {
        false
    } else {
        return None;
    };
    let width = LLVMGetIntTypeWidth(LLVMTypeOf(phi.0));
    if width == 0 || width > 64 {
        return None;
    }
    let predicate = LLVMGetICmpPredicate(cond);
    let mut i = start;
    for _ in 0..MAX_TRIPS {
        let after = wrap(i.wrapping_add(delta), width);
        let x = if tests_next { after } else { i };
        let (a, b) = if swapped { (bound, x) } else { (x, bound) };
        if compare(predicate, a, b, width)? != stays_on_true {
            return Some(br);
        }
        i = after;
    }
    None
}

/// `v` truncated to `width` bits and sign-extended back, as the IR's integer of that width holds it.
fn wrap(v: i64, width: u32) -> i64 {
    if width == 64 {
        v
    } else {
        let shift = 64 - width;
        (v << shift) >> shift
    }
}

fn compare(p: LLVMIntPredicate, a: i64, b: i64, width: u32) -> Option<bool> {
    let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
    let (ua, ub) = (a as u64 & mask, b as u64 & mask);
    use LLVMIntPredicate::*;
    Some(match p {
        LLVMIntEQ => ua == ub,
        LLVMIntNE => ua != ub,
        LLVMIntSLT => a < b,
        LLVMIntSLE => a <= b,
        LLVMIntSGT => a > b,
        LLVMIntSGE => a >= b,
        LLVMIntULT => ua < ub,
        LLVMIntULE => ua <= ub,
        LLVMIntUGT => ua > ub,
        LLVMIntUGE => ua >= ub,
    })
}

/// Gives the loop `latch` closes a loop ID that asks for full unrolling, keeping the options it
/// had. Returns false where the loop already says how to unroll it.
///
/// # Safety
/// `latch` is a live branch instruction.
unsafe fn mark_full(latch: LLVMValueRef) -> bool {
    let ctx = LLVMGetTypeContext(LLVMTypeOf(latch));
    let name = "llvm.loop";
    let kind = LLVMGetMDKindIDInContext(ctx, name.as_ptr().cast(), name.len() as u32);
    let old = LLVMGetMetadata(latch, kind);
    let mut options: Vec<LLVMMetadataRef> = Vec::new();
    if !old.is_null() {
        let n = LLVMGetMDNodeNumOperands(old) as usize;
        let mut ops: Vec<LLVMValueRef> = vec![std::ptr::null_mut(); n];
        LLVMGetMDNodeOperands(old, ops.as_mut_ptr());
        // Operand 0 is the ID itself.
        for &op in ops.iter().skip(1) {
            if op.is_null() {
                continue;
            }
            if option_name(op).is_some_and(|s| s.starts_with("llvm.loop.unroll.")) {
                return false;
            }
            options.push(LLVMValueAsMetadata(op));
        }
    }
    let full = "llvm.loop.unroll.full";
    let full = LLVMMDStringInContext2(ctx, full.as_ptr().cast(), full.len());
    options.push(LLVMMDNodeInContext2(ctx, [full].as_mut_ptr(), 1));
    // A loop ID names itself first; a temporary stands for it until the node exists.
    let placeholder = llvm_sys::debuginfo::LLVMTemporaryMDNode(ctx, std::ptr::null_mut(), 0);
    let mut ops = vec![placeholder];
    ops.extend(options);
    let id = LLVMMDNodeInContext2(ctx, ops.as_mut_ptr(), ops.len());
    llvm_sys::debuginfo::LLVMMetadataReplaceAllUsesWith(placeholder, id);
    LLVMSetMetadata(latch, kind, LLVMMetadataAsValue(ctx, id));
    true
}

/// The name of a loop option node (`!{!"llvm.loop.mustprogress"}`).
///
/// # Safety
/// `op` is a metadata value of a live context.
unsafe fn option_name(op: LLVMValueRef) -> Option<String> {
    if LLVMIsAMDNode(op).is_null() || LLVMGetMDNodeNumOperands(op) == 0 {
        return None;
    }
    let mut first: Vec<LLVMValueRef> = vec![std::ptr::null_mut(); LLVMGetMDNodeNumOperands(op) as usize];
    LLVMGetMDNodeOperands(op, first.as_mut_ptr());
    let s = first[0];
    if s.is_null() || LLVMIsAMDString(s).is_null() {
        return None;
    }
    let mut len = 0u32;
    let p = LLVMGetMDString(s, &mut len);
    (!p.is_null())
        .then(|| String::from_utf8_lossy(std::slice::from_raw_parts(p.cast::<u8>(), len as usize)).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use inkwell::context::Context;
    use inkwell::memory_buffer::MemoryBuffer;

    /// A kernel whose loop from `start` while `i < end` (step 1) writes `a[i]` of a local
    /// `[64 x float]`; `extra` is more metadata on the latch.
    fn kernel(start: i32, end: i32, extra: &str) -> String {
        format!(
            r#"define void @k(ptr %out) {{
entry:
  %a = alloca [64 x float], align 4
  br label %loop
loop:
  %i = phi i32 [ {start}, %entry ], [ %next, %loop ]
  %idx = zext i32 %i to i64
  %p = getelementptr inbounds [64 x float], ptr %a, i64 0, i64 %idx
  store float 1.0, ptr %p, align 4
  %next = add nuw nsw i32 %i, 1
  %more = icmp slt i32 %next, {end}
  br i1 %more, label %loop, label %done{extra}
done:
  %q = getelementptr inbounds [64 x float], ptr %a, i64 0, i64 3
  %v = load float, ptr %q, align 4
  store float %v, ptr %out, align 4
  ret void
}}
{}"#,
            if extra.is_empty() { "" } else { "!0 = distinct !{!0, !1}\n!1 = !{!\"llvm.loop.unroll.disable\"}" }
        )
    }

    fn marked(ir: &str) -> (usize, String) {
        let ctx = Context::create();
        let buf = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "k");
        let m = ctx.create_module_from_ir(buf).expect("valid IR");
        let f = m.get_function("k").unwrap();
        let n = mark_local_array_loops(&[f]);
        m.verify().expect("still valid IR");
        (n, m.print_to_string().to_string())
    }

    #[test]
    fn short_counted_loops_over_local_arrays_are_marked_for_full_unrolling() {
        let (n, text) = marked(&kernel(0, 8, ""));
        assert_eq!(n, 1, "{text}");
        assert!(text.contains("llvm.loop.unroll.full"), "{text}");
        // A loop ID names itself first.
        assert!(text.contains("distinct !{") && text.contains("!llvm.loop"), "{text}");
    }

    #[test]
    fn long_loops_and_loops_the_user_marked_stay_as_they_are() {
        assert_eq!(marked(&kernel(0, 1000, "")).0, 0, "over MAX_TRIPS");
        // `i < -5` from 0 leaves after its first trip: counted, one trip, marked.
        assert_eq!(marked(&kernel(0, -5, "")).0, 1);
        assert_eq!(marked(&kernel(0, 8, ", !llvm.loop !0")).0, 0, "#pragma unroll 1");
    }

    #[test]
    fn comparisons_follow_the_integer_width_and_signedness() {
        use LLVMIntPredicate::*;
        assert!(compare(LLVMIntULT, 1, -1, 32).unwrap(), "-1 is the largest unsigned");
        assert!(!compare(LLVMIntSLT, 1, -1, 32).unwrap());
        assert_eq!(wrap(i64::from(u8::MAX) + 1, 8), 0);
        assert_eq!(wrap(127 + 1, 8), -128);
    }
}
