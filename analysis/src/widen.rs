//! Narrow index arithmetic, widened (issue: `int` indices over 64-bit sizes and ids). Code
//! written with `int` indices computes `int i = (z * ny + y) * nx + x` in 32 bits and
//! sign-extends the result for the address; the extension of a whole expression hides its
//! structure from ScalarEvolution, so Polly can neither delinearize nor often model it.
//!
//! This pass moves each extension down through the arithmetic, where that is exact:
//! - through `add`, `sub` and `mul` carrying `nsw` (for `sext`) or `nuw` (for `zext`): C says
//!   such an operation never overflows in a run with defined behaviour, so extending its result
//!   equals operating on the extended operands;
//! - through unsigned `add` and `mul` without `nuw` (C lets `unsigned` arithmetic wrap): where
//!   the operands are built from non-negative values, the largest value of the operation is a
//!   polynomial of the parameters; the widening is exact while it stays below 2^32, which the
//!   runtime checks at each launch (the node's `bounds`, products ISL cannot state);
//! - into unsigned comparisons, with zero extensions (which keep unsigned order);
//! - into signed and equality comparisons of narrow values: `icmp slt i32 a, b` becomes
//!   `icmp slt i64 (sext a), (sext b)`, since sign extension keeps signed order and equality,
//!   so the conditions of the code (bounds checks, boundary tests) are modelled in 64 bits,
//!   without the wrap-around cases that would multiply the pieces of Polly's domains;
//! - into a value the branches before it choose (`min(a, b)` as the conditional operator
//!   leaves it: a phi), extending each incoming value in its block: exact for any values, and
//!   with the choosing comparison already wide ScalarEvolution sees the minimum itself;
//! - through a truncation of an extension back to the narrow type: `ext(trunc(ext' x))` is
//!   `ext(x)` (a `long` clamp helper whose result is cast back to `int`);
//! - onto the value under a truncation, `ext(trunc v)` → `v`: always where the truncation
//!   carries `nsw` (`nuw` for `zext`), which makes a value that does not fit poison; else
//!   where `v` is one of the wrapper's instance loop counters (below 2^31,
//!   `dashdb::GRID_LIMIT`, so any truncation to 32 bits or more keeps it) or one of its
//!   parameters, for which the identity holds only while the value fits the narrow type:
//!   that condition is returned, and becomes part of the node's `valid_when`, which the
//!   runtime checks at every launch (and runs the node unpartitioned where it fails).

use crate::guards::{self, Fact, Guards};
use inkwell::values::{AsValueRef, FunctionValue};
use llvm_sys::core::*;
use llvm_sys::prelude::*;
use llvm_sys::LLVMOpcode;
use std::ffi::CStr;

/// The name of an LLVM value ("" when it has none).
///
/// # Safety
/// `v` must be a live value.
unsafe fn name_of(v: LLVMValueRef) -> String {
    let mut len = 0usize;
    let p = LLVMGetValueName2(v, &mut len);
    if p.is_null() {
        return String::new();
    }
    CStr::from_ptr(p).to_string_lossy().into_owned()
}

/// `v` extended to `wide` at the builder's place (sign or zero, as `signed`); an extension
/// instruction (not a folded constant) is queued in `work` to be moved down in turn.
///
/// # Safety
/// `builder` must be positioned in a live function and `v` be a value of it.
unsafe fn extend_queued(
    builder: LLVMBuilderRef,
    v: LLVMValueRef,
    wide: LLVMTypeRef,
    signed: bool,
    work: &mut Vec<LLVMValueRef>,
) -> LLVMValueRef {
    let e = if signed {
        LLVMBuildSExt(builder, v, wide, c"wide".as_ptr())
    } else {
        LLVMBuildZExt(builder, v, wide, c"wide".as_ptr())
    };
    if !LLVMIsAInstruction(e).is_null() {
        work.push(e);
    }
    e
}

/// Whether phi `p` is a recurrence: one of its incoming values is computed from it directly
/// (a loop's counter or accumulator), so that widening it would build a second, narrow chain.
///
/// # Safety
/// `p` must be a live phi.
unsafe fn recurrent(p: LLVMValueRef) -> bool {
    (0..LLVMCountIncoming(p)).any(|i| {
        let v = LLVMGetIncomingValue(p, i);
        v == p
            || (!LLVMIsAInstruction(v).is_null()
                && (0..LLVMGetNumOperands(v).max(0) as u32).any(|k| LLVMGetOperand(v, k) == p))
    })
}

/// Whether `v` is one of the wrapper's instance loop counters (`iv.t0`, `iv.b1`, ...; see
/// `crate::wrap`), whose values lie in `0 .. 2^31`.
///
/// # Safety
/// `v` must be a live value.
unsafe fn is_instance_counter(v: LLVMValueRef) -> bool {
    !LLVMIsAPHINode(v).is_null() && {
        let n = name_of(v);
        n.starts_with("iv.t") || n.starts_with("iv.b")
    }
}

/// The largest value `v` can take, as an ISL expression over the wrapper's parameters (with
/// the names it uses), when `v` is a sum of non-negative terms: instance counters (up to
/// `bound(counter) - 1`), block offsets, non-negative constants and their multiples. `None`
/// for anything else.
///
/// # Safety
/// `v` must be a live value.
unsafe fn max_of(v: LLVMValueRef, bound: &dyn Fn(&str) -> Option<String>, names: &mut Vec<String>) -> Option<String> {
    if !LLVMIsAConstantInt(v).is_null() {
        let c = LLVMConstIntGetSExtValue(v);
        return (c >= 0).then(|| c.to_string());
    }
    if !LLVMIsAArgument(v).is_null() {
        let n = name_of(v);
        // Block offsets are products of block ids and sizes: never negative.
        return crate::wrap::BLOCK_OFFSETS.contains(&n.as_str()).then(|| {
            names.push(n.clone());
            n
        });
    }
    if is_instance_counter(v) {
        let b = bound(&name_of(v))?;
        if b.parse::<i64>().is_err() {
            names.push(b.clone());
        }
        return Some(format!("({b} - 1)"));
    }
    if LLVMIsAInstruction(v).is_null() {
        return None;
    }
    match LLVMGetInstructionOpcode(v) {
        LLVMOpcode::LLVMAdd if LLVMGetNSW(v) != 0 || LLVMGetNUW(v) != 0 => {
            let a = max_of(LLVMGetOperand(v, 0), bound, names)?;
            let b = max_of(LLVMGetOperand(v, 1), bound, names)?;
            Some(format!("({a} + {b})"))
        }
        LLVMOpcode::LLVMMul if LLVMGetNSW(v) != 0 || LLVMGetNUW(v) != 0 => {
            let (x, y) = (LLVMGetOperand(v, 0), LLVMGetOperand(v, 1));
            let (c, other) = if !LLVMIsAConstantInt(x).is_null() { (x, y) } else { (y, x) };
            if LLVMIsAConstantInt(c).is_null() || LLVMConstIntGetSExtValue(c) < 0 {
                return None;
            }
            let m = max_of(other, bound, names)?;
            Some(format!("{} * {m}", LLVMConstIntGetSExtValue(c)))
        }
        _ => None,
    }
}

/// `v` as an ISL expression of the wrapper's parameters (named arguments, constants, and
/// their sums, differences and multiples by constants, all without signed overflow), with
/// the parameter names it uses; `None` for anything else.
///
/// # Safety
/// `v` must be a live value.
unsafe fn param_expr(v: LLVMValueRef) -> Option<(String, Vec<String>)> {
    if !LLVMIsAConstantInt(v).is_null() {
        return Some((format!("({})", LLVMConstIntGetSExtValue(v)), vec![]));
    }
    if !LLVMIsAArgument(v).is_null() {
        let n = name_of(v);
        return (!n.is_empty()).then(|| (n.clone(), vec![n]));
    }
    if LLVMIsAInstruction(v).is_null() || LLVMGetNSW(v) == 0 {
        return None;
    }
    let op = LLVMGetInstructionOpcode(v);
    let (a, b) = (LLVMGetOperand(v, 0), LLVMGetOperand(v, 1));
    let mul_const = |c: LLVMValueRef| (!LLVMIsAConstantInt(c).is_null()).then(|| LLVMConstIntGetSExtValue(c));
    let (ea, mut na) = match op {
        LLVMOpcode::LLVMMul => match (mul_const(a), mul_const(b)) {
            (Some(k), _) => return param_expr(b).map(|(e, n)| (format!("({k} * {e})"), n)),
            (_, Some(k)) => return param_expr(a).map(|(e, n)| (format!("({k} * {e})"), n)),
            _ => return None,
        },
        LLVMOpcode::LLVMAdd | LLVMOpcode::LLVMSub => param_expr(a)?,
        _ => return None,
    };
    let (eb, nb) = param_expr(b)?;
    na.extend(nb);
    let sign = if op == LLVMOpcode::LLVMAdd { "+" } else { "-" };
    Some((format!("({ea} {sign} {eb})"), na))
}

/// An upper bound of the unsigned value of `v`, in [`dashdb::Bound`]'s text form, when `v` is
/// built by `add` and `mul` (whatever their wrap flags) from values that are never negative:
/// parameters (a negative value makes the runtime's check fail), block offsets, instance
/// counters (up to `bound(counter) - 1`), non-negative constants, and truncations and zero
/// extensions of such values (a truncation of a non-negative value is at most that value);
/// and by subtracting a constant `c` from such a value `a` where the guards (`facts`) prove
/// `a >= c`, which is then at most `a`. As long as the bound is below `2^bits`, no operation
/// under `v` wrapped around. `None` for anything else.
///
/// # Safety
/// `v` must be a live value.
unsafe fn unsigned_max(v: LLVMValueRef, bound: &dyn Fn(&str) -> Option<String>, facts: &[Fact]) -> Option<String> {
    if !LLVMIsAConstantInt(v).is_null() {
        let c = LLVMConstIntGetSExtValue(v);
        return (c >= 0).then(|| c.to_string());
    }
    if !LLVMIsAArgument(v).is_null() {
        let n = name_of(v);
        return (!n.is_empty()).then_some(n);
    }
    if is_instance_counter(v) {
        return Some(format!("({} - 1)", bound(&name_of(v))?));
    }
    if let Some((start, end)) = counter_end(v) {
        // At most `max(start, end - 1)` (a do-while loop runs once from `start`).
        let end = unsigned_max(end, bound, facts)?;
        return Some(if start == 0 { format!("({end} - 1)") } else { format!("({end} - 1 + {start})") });
    }
    if LLVMIsAInstruction(v).is_null() {
        return None;
    }
    if let Some((a, c)) = difference(v) {
        if unsigned_min(a, facts) >= c {
            return unsigned_max(a, bound, facts);
        }
        // A parameter has one value per launch: where it is below `c`, the bound's
        // subexpression is negative and the runtime's check fails (`dashdb::Bound::holds`).
        return parameter(a, &[]).map(|n| format!("({n} - {c})"));
    }
    if let Some((a, _)) = guarded_difference(v, facts) {
        return unsigned_max(a, bound, facts);
    }
    match LLVMGetInstructionOpcode(v) {
        op @ (LLVMOpcode::LLVMAdd | LLVMOpcode::LLVMMul) => {
            let a = unsigned_max(LLVMGetOperand(v, 0), bound, facts)?;
            let b = unsigned_max(LLVMGetOperand(v, 1), bound, facts)?;
            Some(if op == LLVMOpcode::LLVMAdd { format!("({a} + {b})") } else { format!("{a} * {b}") })
        }
        LLVMOpcode::LLVMTrunc | LLVMOpcode::LLVMZExt => unsigned_max(LLVMGetOperand(v, 0), bound, facts),
        // `(long)(int)id`: an instance counter (below 2^31) truncated to 32 bits or more and
        // sign-extended back is the counter (the widening makes the same step).
        LLVMOpcode::LLVMSExt => {
            let t = LLVMGetOperand(v, 0);
            let counter = (!LLVMIsAInstruction(t).is_null() && LLVMGetInstructionOpcode(t) == LLVMOpcode::LLVMTrunc)
                .then(|| LLVMGetOperand(t, 0))
                .filter(|&c| is_instance_counter(c) && LLVMGetIntTypeWidth(LLVMTypeOf(t)) >= 32)?;
            unsigned_max(counter, bound, facts)
        }
        _ => None,
    }
}

/// A lower bound of the unsigned value of `v`: what the guards say of it, or of the sum,
/// product, truncation or zero extension it is. Exact only while nothing under `v` wraps
/// around, which [`unsigned_max`]'s bound of `v`, checked by the runtime, makes sure of.
///
/// # Safety
/// `v` must be a live value.
unsafe fn unsigned_min(v: LLVMValueRef, facts: &[Fact]) -> i128 {
    let known = guards::known_min(v, facts);
    if !LLVMIsAConstantInt(v).is_null() {
        return (LLVMConstIntGetSExtValue(v) as i128).max(0);
    }
    if LLVMIsAInstruction(v).is_null() {
        return known;
    }
    if let Some((a, c)) = difference(v) {
        // No lower bound but 0 where the difference may wrap around.
        let m = unsigned_min(a, facts);
        return known.max(if m >= c { m - c } else { 0 });
    }
    let operand_min = |k| unsigned_min(LLVMGetOperand(v, k), facts);
    let structural = match LLVMGetInstructionOpcode(v) {
        LLVMOpcode::LLVMAdd => operand_min(0) + operand_min(1),
        LLVMOpcode::LLVMMul => operand_min(0).saturating_mul(operand_min(1)),
        LLVMOpcode::LLVMTrunc | LLVMOpcode::LLVMZExt => operand_min(0),
        _ => 0,
    };
    known.max(structural)
}

/// The name of the wrapper parameter `v` is, directly or as the truncation of a narrowed one
/// back to its width (`crate::wrap`).
///
/// # Safety
/// `v` must be a live value.
unsafe fn parameter(v: LLVMValueRef, narrowed: &[(String, u32)]) -> Option<String> {
    if !LLVMIsAArgument(v).is_null() {
        return Some(name_of(v)).filter(|n| !n.is_empty());
    }
    if LLVMIsAInstruction(v).is_null() || LLVMGetInstructionOpcode(v) != LLVMOpcode::LLVMTrunc {
        return None;
    }
    let (arg, bits) = (LLVMGetOperand(v, 0), LLVMGetIntTypeWidth(LLVMTypeOf(v)));
    (!LLVMIsAArgument(arg).is_null() && narrowed.contains(&(name_of(arg), bits))).then(|| name_of(arg))
}

/// `(a, c)` when `v` subtracts the constant `c > 0` from `a`: `sub a, c`, or `add a, -c` as
/// LLVM writes it.
///
/// # Safety
/// `v` must be a live value.
unsafe fn difference(v: LLVMValueRef) -> Option<(LLVMValueRef, i128)> {
    if LLVMIsAInstruction(v).is_null()
        || !matches!(LLVMGetInstructionOpcode(v), LLVMOpcode::LLVMSub | LLVMOpcode::LLVMAdd)
    {
        return None;
    }
    let (a, b) = (LLVMGetOperand(v, 0), LLVMGetOperand(v, 1));
    if LLVMIsAConstantInt(b).is_null() {
        return None;
    }
    let c = LLVMConstIntGetSExtValue(b) as i128;
    match LLVMGetInstructionOpcode(v) {
        LLVMOpcode::LLVMSub if c > 0 => Some((a, c)),
        LLVMOpcode::LLVMAdd if c < 0 => Some((a, -c)),
        _ => None,
    }
}

/// `(a, b)` when `v` is `a - b` of two variables and the guards (`facts`) prove `a >= b`,
/// so that the unsigned difference does not wrap around: `a` may subtract a constant from
/// what a guard names, `b` add one (`h - 1 - y` under `y < h`, which says `h >= y + 1`).
///
/// # Safety
/// `v` must be a live value.
unsafe fn guarded_difference(v: LLVMValueRef, facts: &[Fact]) -> Option<(LLVMValueRef, LLVMValueRef)> {
    if LLVMIsAInstruction(v).is_null() || LLVMGetInstructionOpcode(v) != LLVMOpcode::LLVMSub {
        return None;
    }
    let (a, b) = (LLVMGetOperand(v, 0), LLVMGetOperand(v, 1));
    if !LLVMIsAConstantInt(b).is_null() || !LLVMIsAConstantInt(a).is_null() {
        return None;
    }
    // a = base_a - less, b = base_b + more: need base_a >= base_b + less + more.
    let (mut base_a, mut less) = (a, 0i128);
    while let Some((x, c)) = difference(base_a) {
        (base_a, less) = (x, less + c);
    }
    let (mut base_b, mut more) = (b, 0i128);
    while !LLVMIsAInstruction(base_b).is_null()
        && LLVMGetInstructionOpcode(base_b) == LLVMOpcode::LLVMAdd
        && (LLVMGetNUW(base_b) != 0)
        && !LLVMIsAConstantInt(LLVMGetOperand(base_b, 1)).is_null()
        && LLVMConstIntGetSExtValue(LLVMGetOperand(base_b, 1)) >= 0
    {
        more += LLVMConstIntGetSExtValue(LLVMGetOperand(base_b, 1)) as i128;
        base_b = LLVMGetOperand(base_b, 0);
    }
    let gap = guards::known_gap(base_a, base_b, facts)?;
    (gap >= less + more).then_some((a, b))
}

/// The start `c` and end `n` of a counting loop `for (i = c; i != n (or i < n, unsigned); ++i)`
/// as IndVars leaves it, when `v` is its counter: a phi of a constant `c >= 0` and `v + 1`
/// (without unsigned wrap), the latch looping back while `v + 1 != n` (or `v + 1 <u n`). Inside
/// the loop `v <= max(c, n - 1)`. `None` for anything else.
///
/// # Safety
/// `v` must be a live value.
unsafe fn counter_end(v: LLVMValueRef) -> Option<(i64, LLVMValueRef)> {
    use llvm_sys::LLVMIntPredicate::*;
    if LLVMIsAPHINode(v).is_null() || LLVMCountIncoming(v) != 2 {
        return None;
    }
    let header = LLVMGetInstructionParent(v);
    let (mut start, mut next, mut latch) = (None, None, None);
    for k in 0..2 {
        let x = LLVMGetIncomingValue(v, k);
        if !LLVMIsAConstantInt(x).is_null() {
            start = Some(LLVMConstIntGetSExtValue(x));
        } else {
            (next, latch) = (Some(x), Some(LLVMGetIncomingBlock(v, k)));
        }
    }
    let (next, latch) = (next?, latch?);
    let one = |c: LLVMValueRef| !LLVMIsAConstantInt(c).is_null() && LLVMConstIntGetSExtValue(c) == 1;
    let steps = start.is_some_and(|c| c >= 0)
        && !LLVMIsAInstruction(next).is_null()
        && LLVMGetInstructionOpcode(next) == LLVMOpcode::LLVMAdd
        && LLVMGetNUW(next) != 0
        && LLVMGetOperand(next, 0) == v
        && one(LLVMGetOperand(next, 1));
    let br = LLVMGetBasicBlockTerminator(latch);
    if !steps || br.is_null() || LLVMIsABranchInst(br).is_null() || LLVMIsConditional(br) == 0 {
        return None;
    }
    let cmp = LLVMGetCondition(br);
    let loops_back = LLVMGetSuccessor(br, 0) == header && LLVMGetSuccessor(br, 1) != header;
    (loops_back
        && !LLVMIsAICmpInst(cmp).is_null()
        && matches!(LLVMGetICmpPredicate(cmp), LLVMIntNE | LLVMIntULT)
        && LLVMGetOperand(cmp, 0) == next)
        .then(|| (start.unwrap_or(0), LLVMGetOperand(cmp, 1)))
}

/// What widening assumed: the conditions under which its result equals the original.
#[derive(Default)]
pub struct Narrowing {
    /// ISL constraints, each with the parameter names it uses.
    pub conditions: Vec<(Vec<String>, String)>,
    /// Conditions that multiply parameters ([`dashdb::Bound`] text), for the node's `bounds`.
    pub bounds: Vec<String>,
    /// `file:line` of each zero extension of 32-bit arithmetic left as it was (a difference,
    /// an operand without a bound): its index may wrap around, which no affine map describes.
    pub wrapping: Vec<String>,
}

/// Widens the extensions of `f` (see the module docs); `bound` gives, by the name of an
/// instance loop counter, its exclusive upper bound as an ISL expression (a number or a
/// parameter). Returns the conditions under which the result equals the original.
pub fn widen(f: FunctionValue<'_>, bound: &dyn Fn(&str) -> Option<String>, narrowed: &[(String, u32)]) -> Narrowing {
    let mut conditions: Vec<(Vec<String>, String)> = Vec::new();
    let mut bounds: Vec<String> = Vec::new();
    let mut wrapping: Vec<String> = Vec::new();
    // SAFETY: `f` belongs to a live module; an instruction is erased only after all its uses
    // are replaced, and the worklist never holds an erased one (each is taken once).
    unsafe {
        let f = f.as_value_ref();
        // Read before the comparisons are rewritten: the facts name their operands.
        let guards = Guards::of(f);
        let mut work: Vec<LLVMValueRef> = Vec::new();
        let mut compares: Vec<LLVMValueRef> = Vec::new();
        let mut bb = LLVMGetFirstBasicBlock(f);
        while !bb.is_null() {
            let mut inst = LLVMGetFirstInstruction(bb);
            while !inst.is_null() {
                match LLVMGetInstructionOpcode(inst) {
                    LLVMOpcode::LLVMSExt | LLVMOpcode::LLVMZExt => work.push(inst),
                    LLVMOpcode::LLVMICmp => compares.push(inst),
                    _ => {}
                }
                inst = LLVMGetNextInstruction(inst);
            }
            bb = LLVMGetNextBasicBlock(bb);
        }
        let builder = LLVMCreateBuilderInContext(LLVMGetTypeContext(LLVMTypeOf(f)));
        let i64t = LLVMInt64TypeInContext(LLVMGetTypeContext(LLVMTypeOf(f)));
        for cmp in compares {
            use llvm_sys::LLVMIntPredicate::*;
            let ty = LLVMTypeOf(LLVMGetOperand(cmp, 0));
            if LLVMGetTypeKind(ty) != llvm_sys::LLVMTypeKind::LLVMIntegerTypeKind || LLVMGetIntTypeWidth(ty) >= 64 {
                continue;
            }
            let pred = LLVMGetICmpPredicate(cmp);
            // Zero extension keeps unsigned order as sign extension keeps signed order.
            let unsigned = matches!(pred, LLVMIntULT | LLVMIntULE | LLVMIntUGT | LLVMIntUGE);
            if !unsigned && !matches!(pred, LLVMIntEQ | LLVMIntNE | LLVMIntSLT | LLVMIntSLE | LLVMIntSGT | LLVMIntSGE) {
                continue;
            }
            LLVMPositionBuilderBefore(builder, cmp);
            let extend = |v| {
                if unsigned {
                    LLVMBuildZExt(builder, v, i64t, c"wide".as_ptr())
                } else {
                    LLVMBuildSExt(builder, v, i64t, c"wide".as_ptr())
                }
            };
            let (a, b) = (extend(LLVMGetOperand(cmp, 0)), extend(LLVMGetOperand(cmp, 1)));
            for v in [a, b] {
                if !LLVMIsAInstruction(v).is_null()
                    && matches!(LLVMGetInstructionOpcode(v), LLVMOpcode::LLVMSExt | LLVMOpcode::LLVMZExt)
                {
                    work.push(v);
                }
            }
            let wide = LLVMBuildICmp(builder, pred, a, b, c"wide".as_ptr());
            LLVMReplaceAllUsesWith(cmp, wide);
            LLVMInstructionEraseFromParent(cmp);
        }
        // Each phi widened, by signedness, and its wide twin.
        let mut phis: Vec<(LLVMValueRef, bool, LLVMValueRef)> = Vec::new();
        while let Some(ext) = work.pop() {
            let signed = LLVMGetInstructionOpcode(ext) == LLVMOpcode::LLVMSExt;
            let wide = LLVMTypeOf(ext);
            let x = LLVMGetOperand(ext, 0);
            if LLVMIsAInstruction(x).is_null() {
                continue;
            }
            let promised = |x| (signed && LLVMGetNSW(x) != 0) || (!signed && LLVMGetNUW(x) != 0);
            // Unsigned arithmetic that C lets wrap (`unsigned y, w; y * w + x`): exact while its
            // largest value fits, a product of parameters the runtime checks (`bounds`).
            // What the guards of the extension's block prove: where `y >= 1`, `y - 1` does
            // not wrap around.
            let facts = guards.at(LLVMGetInstructionParent(ext));
            // For a sign extension (CUDA's `int i = blockIdx.x * blockDim.x + threadIdx.x`:
            // unsigned arithmetic read as `int`), the value must also stay below 2^(bits-1):
            // then it is not negative, and both extensions are the exact wide result.
            let fits = |x| {
                let bits = LLVMGetIntTypeWidth(LLVMTypeOf(x));
                let max = unsigned_max(x, bound, &facts).filter(|_| bits < 64)?;
                Some(format!("{max} < {}", 1u128 << (bits - u32::from(signed))))
            };
            let mut assumed = None;
            let replacement = match LLVMGetInstructionOpcode(x) {
                // `a - c` in `unsigned`: exact where `a >= c`, from the guards, or, for a
                // parameter `a` (`w - 1`), from a condition the runtime checks.
                _ if !signed && !promised(x) && difference(x).is_some() => {
                    let (a, c) = difference(x).expect("matched");
                    let param = parameter(a, narrowed);
                    if let Some(b) = fits(x).filter(|_| unsigned_min(a, &facts) >= c) {
                        // A parameter is below 2^bits by its type: its bound says nothing.
                        if param.is_none() {
                            bounds.push(b);
                        }
                    } else if let Some(name) = param {
                        conditions.push((vec![name.clone()], format!("{name} >= {c}")));
                    } else {
                        wrapping.push(crate::crop::location(ext));
                        continue;
                    }
                    LLVMPositionBuilderBefore(builder, ext);
                    let wide_a = LLVMBuildZExt(builder, a, wide, c"wide".as_ptr());
                    if !LLVMIsAInstruction(wide_a).is_null() && LLVMGetInstructionOpcode(wide_a) == LLVMOpcode::LLVMZExt
                    {
                        work.push(wide_a);
                    }
                    LLVMBuildNUWSub(builder, wide_a, LLVMConstInt(wide, c as u64, 0), c"wide".as_ptr())
                }
                // `a - b` in `unsigned` where the guards prove `a >= b` (a flip, `h - 1 - y`
                // under `y < h`): the guard compared these very 32-bit values, so the
                // difference is exact as it is, and equals that of the extended operands
                // (whose own widening answers for them).
                _ if !signed && !promised(x) && guarded_difference(x, &facts).is_some() => {
                    LLVMPositionBuilderBefore(builder, ext);
                    let (a, b) = (
                        LLVMBuildZExt(builder, LLVMGetOperand(x, 0), wide, c"wide".as_ptr()),
                        LLVMBuildZExt(builder, LLVMGetOperand(x, 1), wide, c"wide".as_ptr()),
                    );
                    for v in [a, b] {
                        if !LLVMIsAInstruction(v).is_null() && LLVMGetInstructionOpcode(v) == LLVMOpcode::LLVMZExt {
                            work.push(v);
                        }
                    }
                    LLVMBuildNUWSub(builder, a, b, c"wide".as_ptr())
                }
                op @ (LLVMOpcode::LLVMAdd | LLVMOpcode::LLVMSub | LLVMOpcode::LLVMMul)
                    if promised(x)
                        || (op != LLVMOpcode::LLVMSub && {
                            assumed = fits(x);
                            assumed.is_some()
                        }) =>
                {
                    // Under a bound the values are not negative: zero-extend, operate unsigned.
                    let signed = signed && assumed.is_none();
                    bounds.extend(assumed.take());
                    LLVMPositionBuilderBefore(builder, ext);
                    let extend = |v: LLVMValueRef| {
                        if signed {
                            LLVMBuildSExt(builder, v, wide, c"wide".as_ptr())
                        } else {
                            LLVMBuildZExt(builder, v, wide, c"wide".as_ptr())
                        }
                    };
                    let (a, b) = (extend(LLVMGetOperand(x, 0)), extend(LLVMGetOperand(x, 1)));
                    for v in [a, b] {
                        if !LLVMIsAInstruction(v).is_null()
                            && matches!(LLVMGetInstructionOpcode(v), LLVMOpcode::LLVMSExt | LLVMOpcode::LLVMZExt)
                        {
                            work.push(v);
                        }
                    }
                    let n = c"wide".as_ptr();
                    match (op, signed) {
                        (LLVMOpcode::LLVMAdd, true) => LLVMBuildNSWAdd(builder, a, b, n),
                        (LLVMOpcode::LLVMSub, true) => LLVMBuildNSWSub(builder, a, b, n),
                        (LLVMOpcode::LLVMMul, true) => LLVMBuildNSWMul(builder, a, b, n),
                        (LLVMOpcode::LLVMAdd, false) => LLVMBuildNUWAdd(builder, a, b, n),
                        (LLVMOpcode::LLVMSub, false) => LLVMBuildNUWSub(builder, a, b, n),
                        _ => LLVMBuildNUWMul(builder, a, b, n),
                    }
                }
                LLVMOpcode::LLVMTrunc => {
                    let v = LLVMGetOperand(x, 0);
                    let bits = LLVMGetIntTypeWidth(LLVMTypeOf(x));
                    if LLVMTypeOf(v) != wide {
                        continue;
                    }
                    // `trunc nsw` (`nuw`) promises the value fits (IndVars widens `int`
                    // counters so and narrows them back with the flag): the extension of
                    // the truncation is the value itself, with no condition to check.
                    let flagged = (signed && LLVMGetNSW(x) != 0) || (!signed && LLVMGetNUW(x) != 0);
                    // `(int)clamp(v, ...)` of a `long` helper, once the clamp is split into
                    // ways: `trunc (sext x)` is `x` itself, so this is `ext x`.
                    let inner = (!LLVMIsAInstruction(v).is_null()
                        && matches!(LLVMGetInstructionOpcode(v), LLVMOpcode::LLVMSExt | LLVMOpcode::LLVMZExt))
                    .then(|| LLVMGetOperand(v, 0))
                    .filter(|&n| LLVMTypeOf(n) == LLVMTypeOf(x));
                    if let Some(n) = inner {
                        LLVMPositionBuilderBefore(builder, ext);
                        extend_queued(builder, n, wide, signed, &mut work)
                    } else if flagged || (is_instance_counter(v) && bits >= 32) {
                        v
                    } else if !LLVMIsAArgument(v).is_null() && narrowed.contains(&(name_of(v), bits)) {
                        // The leaf's own narrow parameter, which the wrapper takes as the
                        // runtime reads it, sign-extended (`crate::wrap`): its sign extension
                        // is that value, its zero extension too where it is not negative.
                        if !signed {
                            conditions.push((vec![name_of(v)], format!("{} >= 0", name_of(v))));
                        }
                        v
                    } else if !LLVMIsAArgument(v).is_null() && (2..=63).contains(&bits) {
                        let name = name_of(v);
                        if name.is_empty() {
                            continue;
                        }
                        let half = 1i128 << (bits - 1);
                        let c = if signed {
                            format!("-{half} <= {name} < {half}")
                        } else {
                            format!("0 <= {name} < {}", half * 2)
                        };
                        conditions.push((vec![name], c));
                        v
                    } else if let Some((expr, mut names)) = param_expr(v) {
                        // An expression of parameters (`h - 1`, the bound of a clamp): kept
                        // while its value fits the narrow type, which the runtime checks.
                        let half = 1i128 << (bits - 1);
                        let c = if signed {
                            format!("-{half} <= {expr} < {half}")
                        } else {
                            format!("0 <= {expr} < {}", half * 2)
                        };
                        names.sort();
                        names.dedup();
                        conditions.push((names, c));
                        v
                    } else {
                        // A sum of non-negative terms (a global coordinate `offset + thread`):
                        // kept while its largest value fits the narrow type.
                        let mut names = Vec::new();
                        let limit = if signed { 1i128 << (bits - 1) } else { 1i128 << bits };
                        if let Some(max) = max_of(v, bound, &mut names) {
                            names.sort();
                            names.dedup();
                            conditions.push((names, format!("{max} < {limit}")));
                        } else {
                            // `int index = (chan * row_size + row) * col_size + col` over
                            // `size_t` sizes: 64-bit arithmetic of non-negative values (its
                            // flags do not matter), truncated to `int`. While its largest value,
                            // a polynomial the runtime checks (`bounds`), fits the narrow type,
                            // no operation under it wrapped and the truncation kept the value.
                            let Some(max) = unsigned_max(v, bound, &facts) else { continue };
                            bounds.push(format!("{max} < {limit}"));
                        }
                        v
                    }
                }
                // A value chosen by the branches before it (`min(tile, n - base)` as the
                // conditional operator leaves it): the extension of each incoming value, at the
                // end of its block, chosen alike. Exact whatever the values; with the
                // comparison that chooses already wide, ScalarEvolution sees the minimum.
                // Not a loop's own recurrence (an incoming value computed from the phi).
                // Phis that feed each other (`a = phi [x, b]`, `b = phi [a, y]`) are each
                // widened once: the second extension of one finds its wide phi.
                LLVMOpcode::LLVMPHI if phis.iter().any(|&(p, s, w)| p == x && s == signed && LLVMTypeOf(w) == wide) => {
                    phis.iter().find(|&&(p, s, w)| p == x && s == signed && LLVMTypeOf(w) == wide).expect("found").2
                }
                LLVMOpcode::LLVMPHI if !recurrent(x) => {
                    LLVMPositionBuilderBefore(builder, x);
                    let phi = LLVMBuildPhi(builder, wide, c"wide".as_ptr());
                    phis.push((x, signed, phi));
                    let n = LLVMCountIncoming(x);
                    let mut values: Vec<LLVMValueRef> = Vec::with_capacity(n as usize);
                    let mut blocks: Vec<LLVMBasicBlockRef> = Vec::with_capacity(n as usize);
                    for i in 0..n {
                        let (v, b) = (LLVMGetIncomingValue(x, i), LLVMGetIncomingBlock(x, i));
                        // One value per block: a `switch` may reach the phi twice from one.
                        let e = match blocks.iter().position(|&o| o == b) {
                            Some(k) => values[k],
                            None => {
                                LLVMPositionBuilderBefore(builder, LLVMGetBasicBlockTerminator(b));
                                extend_queued(builder, v, wide, signed, &mut work)
                            }
                        };
                        values.push(e);
                        blocks.push(b);
                    }
                    LLVMAddIncoming(phi, values.as_mut_ptr(), blocks.as_mut_ptr(), n);
                    phi
                }
                LLVMOpcode::LLVMAdd | LLVMOpcode::LLVMSub | LLVMOpcode::LLVMMul if !signed => {
                    wrapping.push(crate::crop::location(ext));
                    continue;
                }
                _ => continue,
            };
            LLVMReplaceAllUsesWith(ext, replacement);
            LLVMInstructionEraseFromParent(ext);
        }
        LLVMDisposeBuilder(builder);
    }
    conditions.sort();
    conditions.dedup();
    bounds.sort();
    bounds.dedup();
    // A bound of a value is implied by that of a sum it is added into: keep the sums'.
    let parsed: Vec<Option<dashdb::Bound>> = bounds.iter().map(|b| dashdb::Bound::parse(b).ok()).collect();
    let implied = |i: usize| {
        parsed[i].as_ref().is_some_and(|b| {
            parsed.iter().enumerate().any(|(j, o)| j != i && o.as_ref().is_some_and(|o| o.implies(b) && !b.implies(o)))
        })
    };
    let bounds = (0..bounds.len())
        .filter(|&i| !implied(i))
        .map(|i| parsed[i].as_ref().map_or_else(|| bounds[i].clone(), |b| b.to_string()))
        .collect();
    wrapping.sort();
    wrapping.dedup();
    Narrowing { conditions, bounds, wrapping }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inkwell::context::Context;
    use inkwell::values::AnyValue;

    /// Widens `@f` of the IR `body` (counters `iv.t*` bounded by 16) and returns what it
    /// assumed and the function's text afterwards.
    fn widened(ir: &str) -> (Narrowing, String) {
        let ctx = Context::create();
        let buf = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "t");
        let m = ctx.create_module_from_ir(buf).unwrap();
        let f = m.get_function("f").unwrap();
        let n = widen(f, &|c| c.starts_with("iv.t").then(|| "16".to_string()), &[]);
        assert!(m.verify().is_ok(), "{}", m.print_to_string());
        (n, f.print_to_string().to_string())
    }

    /// `out[(unsigned)(boffy + t) * w + EXPR]` in a loop over the instance counter `iv.t0`.
    fn unsigned_index(expr: &str) -> String {
        format!(
            "define void @f(ptr %out, i32 %w, i64 %boffy) {{
             entry:
               br label %loop
             loop:
               %iv.t0 = phi i64 [ 0, %entry ], [ %next, %loop ]
               %y64 = add nsw i64 %boffy, %iv.t0
               %y = trunc i64 %y64 to i32
               %m = mul i32 %y, %w
               {expr}
               %z = zext i32 %i to i64
               %p = getelementptr inbounds float, ptr %out, i64 %z
               store float 0.0, ptr %p
               %next = add nuw nsw i64 %iv.t0, 1
               %c = icmp ne i64 %next, 16
               br i1 %c, label %loop, label %exit
             exit:
               ret void
             }}"
        )
    }

    /// Phis that feed each other around a loop (neither a recurrence of its own) are widened
    /// once each, into wide phis that feed each other: the widening ends.
    #[test]
    fn phis_that_feed_each_other_are_widened_once() {
        let (_, text) = widened(
            "define i64 @f(i32 %x, i32 %y, i32 %z, i1 %c) {
             entry:
               br label %loop
             loop:
               %a = phi i32 [ %x, %entry ], [ %d, %latch ]
               br i1 %c, label %left, label %mid
             left:
               br label %mid
             mid:
               %b = phi i32 [ %a, %loop ], [ %y, %left ]
               br i1 %c, label %right, label %latch
             right:
               br label %latch
             latch:
               %d = phi i32 [ %b, %mid ], [ %z, %right ]
               br i1 %c, label %loop, label %exit
             exit:
               %e = sext i32 %d to i64
               ret i64 %e
             }",
        );
        assert_eq!(text.matches("phi i64").count(), 3, "{text}");
        assert!(!text.contains("sext i32 %d"), "{text}");
    }

    /// `min(tile, n - base)` as the conditional operator leaves it (branches and a phi), then
    /// sign-extended: the extension moves into each incoming value, so the phi is 64-bit and
    /// its values are those the (widened) comparison chose between. A loop's counter is no
    /// such phi.
    #[test]
    fn a_value_chosen_by_branches_is_widened_in_each_branch() {
        let (_, text) = widened(
            "define i64 @f(i32 %n, i32 %base) {
             entry:
               %left = sub nsw i32 %n, %base
               %lt = icmp slt i32 256, %left
               br i1 %lt, label %a, label %b
             a:
               br label %join
             b:
               br label %join
             join:
               %v = phi i32 [ 256, %a ], [ %left, %b ]
               %w = sext i32 %v to i64
               br label %loop
             loop:
               %i = phi i32 [ 0, %join ], [ %inext, %loop ]
               %inext = add nsw i32 %i, 1
               %c = icmp slt i32 %inext, %v
               br i1 %c, label %loop, label %exit
             exit:
               %e = sext i32 %i to i64
               %r = add i64 %w, %e
               ret i64 %r
             }",
        );
        assert!(text.contains("phi i64 [ 256, %a ], [ %wide"), "{text}");
        assert!(!text.contains("sext i32 %v"), "{text}");
        assert!(text.contains("sub nsw i64"), "{text}");
        // The counter's recurrence stays as it was.
        assert!(text.contains("sext i32 %i to i64"), "{text}");
    }

    #[test]
    fn wrapping_unsigned_arithmetic_is_widened_under_a_bound() {
        let (n, text) = widened(&unsigned_index("%i = add i32 %m, 7"));
        assert_eq!(n.bounds, ["(boffy + (16 - 1)) * w + 7 < 4294967296"]);
        // The index is now 64-bit arithmetic on the extended operands.
        assert!(!text.contains("zext i32 %i"), "{text}");
        assert!(text.contains("add nuw i64"), "{text}");
        // The truncated coordinate comes back as the 64-bit one, while it fits.
        assert!(
            n.conditions.iter().any(|(names, c)| names == &["boffy"] && c.contains("4294967296")),
            "{:?}",
            n.conditions
        );
    }

    #[test]
    fn wrapping_arithmetic_read_as_int_is_widened_below_2_to_the_31() {
        // CUDA's `int i = blockIdx.x * blockDim.x + threadIdx.x`: unsigned arithmetic, then a
        // sign extension for the address. While the value stays below 2^31 it is the wide sum.
        let ir = unsigned_index("%i = add i32 %m, 7").replace("%z = zext i32 %i", "%z = sext i32 %i");
        let (n, text) = widened(&ir);
        assert_eq!(n.bounds, ["(boffy + (16 - 1)) * w + 7 < 2147483648"]);
        assert!(!text.contains("sext i32 %i"), "{text}");
        assert!(text.contains("add nuw i64"), "{text}");
    }

    #[test]
    fn a_difference_is_left_alone() {
        // `y * w - 1` wraps below zero for y = 0: no bound can make it exact.
        let (n, text) = widened(&unsigned_index("%i = sub i32 %m, 1"));
        assert!(n.bounds.is_empty(), "{:?}", n.bounds);
        assert!(text.contains("zext i32 %i"), "{text}");
        assert_eq!(n.wrapping.len(), 1);
    }

    /// `out[i]`, with `i` as `BODY` computes it from `y` (a global coordinate) and the
    /// parameters `w`, `h`, under the guard `COND` (branching to the access on `ON`).
    fn guarded(cond: &str, on: bool, body: &str) -> String {
        let (t, e) = if on { ("body", "latch") } else { ("latch", "body") };
        format!(
            "define void @f(ptr %out, i32 %w, i32 %h, i64 %boffy) {{
             entry:
               br label %loop
             loop:
               %iv.t0 = phi i64 [ 0, %entry ], [ %next, %latch ]
               %y64 = add nsw i64 %boffy, %iv.t0
               %y = trunc i64 %y64 to i32
               %g = {cond}
               br i1 %g, label %{t}, label %{e}
             body:
               {body}
               %z = zext i32 %i to i64
               %p = getelementptr inbounds float, ptr %out, i64 %z
               store float 0.0, ptr %p
               br label %latch
             latch:
               %next = add nuw nsw i64 %iv.t0, 1
               %c = icmp ne i64 %next, 16
               br i1 %c, label %loop, label %exit
             exit:
               ret void
             }}"
        )
    }

    /// `out[(y - 1) * w]` under the guard `COND`.
    fn guarded_difference(cond: &str, on: bool) -> String {
        guarded(cond, on, "%ym1 = add i32 %y, -1\n %i = mul i32 %ym1, %w")
    }

    #[test]
    fn a_difference_a_guard_keeps_from_wrapping_is_widened() {
        for (cond, on) in [
            ("icmp ugt i32 %y, 0", true),
            ("icmp ne i32 %y, 0", true),
            ("icmp eq i32 %y, 0", false),
            ("icmp sge i32 %y, 1", true),
            ("icmp ult i32 0, %y", true),
        ] {
            let (n, text) = widened(&guarded_difference(cond, on));
            assert!(n.wrapping.is_empty(), "{cond}: {:?}", n.wrapping);
            // The product's bound, and that of the minuend on its own (the guard's lower
            // bound of `y` holds only while `y` itself does not wrap).
            assert_eq!(n.bounds, ["(boffy + (16 - 1)) * w < 4294967296", "boffy + (16 - 1) < 4294967296"], "{cond}");
            assert!(!text.contains("zext i32 %i") && text.contains("sub nuw i64"), "{cond}: {text}");
        }
    }

    #[test]
    fn a_guard_that_does_not_exclude_zero_proves_nothing() {
        for (cond, on) in [("icmp ugt i32 %y, 0", false), ("icmp uge i32 %y, 0", true), ("icmp slt i32 %y, 5", true)] {
            let (n, text) = widened(&guarded_difference(cond, on));
            assert!(n.bounds.is_empty(), "{cond}: {:?}", n.bounds);
            assert!(text.contains("zext i32 %i"), "{cond}: {text}");
            assert_eq!(n.wrapping.len(), 1, "{cond}");
        }
    }

    /// `out[EXPR]` under the guard `COND`, with `h - 1` and `y + 1` at hand.
    fn guarded_flip(cond: &str, on: bool, expr: &str) -> String {
        guarded(cond, on, &format!("%hm1 = add i32 %h, -1\n %y1 = add nuw i32 %y, 1\n {expr}"))
    }

    #[test]
    fn a_difference_of_variables_a_guard_orders_is_widened() {
        for (cond, on, expr) in [
            ("icmp ult i32 %y, %h", true, "%i = sub i32 %hm1, %y"),
            ("icmp ugt i32 %h, %y", true, "%i = sub i32 %hm1, %y"),
            ("icmp uge i32 %y, %h", false, "%i = sub i32 %hm1, %y"),
            ("icmp ult i32 %y, %h", true, "%i = sub i32 %h, %y1"),
            ("icmp ule i32 %y, %h", true, "%i = sub i32 %h, %y"),
        ] {
            let (n, text) = widened(&guarded_flip(cond, on, expr));
            assert!(n.wrapping.is_empty(), "{cond}, {expr}: {:?}", n.wrapping);
            assert!(!text.contains("zext i32 %i") && text.contains("sub nuw i64"), "{cond}, {expr}: {text}");
        }
    }

    #[test]
    fn a_difference_of_variables_without_an_ordering_guard_is_left_alone() {
        for (cond, on, expr) in [
            // `y <= h` leaves `h - 1 - y` at -1 for y = h.
            ("icmp ule i32 %y, %h", true, "%i = sub i32 %hm1, %y"),
            ("icmp ult i32 %y, %h", false, "%i = sub i32 %hm1, %y"),
            // Signed order says nothing of unsigned values.
            ("icmp slt i32 %y, %h", true, "%i = sub i32 %hm1, %y"),
            // The guard orders `y` below `h`, not the other way round.
            ("icmp ult i32 %y, %h", true, "%i = sub i32 %y, %h"),
        ] {
            let (n, text) = widened(&guarded_flip(cond, on, expr));
            assert_eq!(n.wrapping.len(), 1, "{cond}, {expr}");
            assert!(text.contains("zext i32 %i"), "{cond}, {expr}: {text}");
        }
    }

    #[test]
    fn a_parameter_difference_is_widened_under_a_condition() {
        let ir = "define i1 @f(i32 %a, i32 %w) {
               %wm1 = sub i32 %w, 1
               %c = icmp ult i32 %a, %wm1
               ret i1 %c
             }";
        let (n, text) = widened(ir);
        assert!(n.bounds.is_empty() && n.wrapping.is_empty());
        assert_eq!(n.conditions, [(vec!["w".to_string()], "w >= 1".to_string())]);
        assert!(text.contains("sub nuw i64") && !text.contains("zext i32 %wm1"), "{text}");
    }

    #[test]
    fn a_counting_loop_is_bounded_by_its_end() {
        // for (unsigned k = 3; k < n; ++k) out[row * n + k], row an instance counter.
        let ir = "define void @f(ptr %out, i32 %n) {
             entry:
               br label %rows
             rows:
               %iv.t0 = phi i64 [ 0, %entry ], [ %rnext, %latch ]
               %row = trunc i64 %iv.t0 to i32
               %end = zext i32 %n to i64
               br label %cols
             cols:
               %k = phi i64 [ 3, %rows ], [ %knext, %cols ]
               %k32 = trunc nuw i64 %k to i32
               %m = mul i32 %row, %n
               %i = add i32 %m, %k32
               %z = zext i32 %i to i64
               %p = getelementptr inbounds float, ptr %out, i64 %z
               store float 0.0, ptr %p
               %knext = add nuw nsw i64 %k, 1
               %more = icmp ult i64 %knext, %end
               br i1 %more, label %cols, label %latch
             latch:
               %rnext = add nuw nsw i64 %iv.t0, 1
               %c = icmp ne i64 %rnext, 16
               br i1 %c, label %rows, label %exit
             exit:
               ret void
             }";
        let (n, _) = widened(ir);
        assert_eq!(n.bounds, ["(16 - 1) * n + (n - 1 + 3) < 4294967296"]);
    }

    #[test]
    fn unsigned_comparisons_are_widened_with_zero_extensions() {
        let ir = "define i1 @f(i32 %a, i32 %b) {
               %c = icmp ult i32 %a, %b
               ret i1 %c
             }";
        let (n, text) = widened(ir);
        assert!(n.bounds.is_empty() && n.conditions.is_empty());
        assert!(text.contains("icmp ult i64") && text.contains("zext i32 %a"), "{text}");
    }
}
