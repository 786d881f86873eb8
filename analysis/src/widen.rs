//! Narrow index arithmetic, widened (issue: `int` indices over 64-bit sizes and ids). Code
//! written with `int` indices computes `int i = (z * ny + y) * nx + x` in 32 bits and
//! sign-extends the result for the address; the extension of a whole expression hides its
//! structure from ScalarEvolution, so Polly can neither delinearize nor often model it.
//!
//! This pass moves each extension down through the arithmetic, where that is exact:
//! - through `add`, `sub` and `mul` carrying `nsw` (for `sext`) or `nuw` (for `zext`): C says
//!   such an operation never overflows in a run with defined behaviour, so extending its result
//!   equals operating on the extended operands;
//! - into signed and equality comparisons of narrow values: `icmp slt i32 a, b` becomes
//!   `icmp slt i64 (sext a), (sext b)`, since sign extension keeps signed order and equality,
//!   so the conditions of the code (bounds checks, boundary tests) are modelled in 64 bits,
//!   without the wrap-around cases that would multiply the pieces of Polly's domains;
//! - through a truncation of an extension back to the narrow type: `ext(trunc(ext' x))` is
//!   `ext(x)` (a `long` clamp helper whose result is cast back to `int`);
//! - onto the value under a truncation, `ext(trunc v)` → `v`: always where the truncation
//!   carries `nsw` (`nuw` for `zext`), which makes a value that does not fit poison; else
//!   where `v` is one of the wrapper's instance loop counters (below 2^31,
//!   `dashdb::GRID_LIMIT`, so any truncation to 32 bits or more keeps it) or one of its
//!   parameters, for which the identity holds only while the value fits the narrow type:
//!   that condition is returned, and becomes part of the node's `valid_when`, which the
//!   runtime checks at every launch (and runs the node unpartitioned where it fails).

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

/// Widens the extensions of `f` (see the module docs); `bound` gives, by the name of an
/// instance loop counter, its exclusive upper bound as an ISL expression (a number or a
/// parameter). Returns the conditions under which the result equals the original: (the
/// parameter names they use, an ISL constraint).
pub fn widen(f: FunctionValue<'_>, bound: &dyn Fn(&str) -> Option<String>) -> Vec<(Vec<String>, String)> {
    let mut conditions: Vec<(Vec<String>, String)> = Vec::new();
    // SAFETY: `f` belongs to a live module; an instruction is erased only after all its uses
    // are replaced, and the worklist never holds an erased one (each is taken once).
    unsafe {
        let f = f.as_value_ref();
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
            if !matches!(pred, LLVMIntEQ | LLVMIntNE | LLVMIntSLT | LLVMIntSLE | LLVMIntSGT | LLVMIntSGE) {
                continue;
            }
            LLVMPositionBuilderBefore(builder, cmp);
            let a = LLVMBuildSExt(builder, LLVMGetOperand(cmp, 0), i64t, c"wide".as_ptr());
            let b = LLVMBuildSExt(builder, LLVMGetOperand(cmp, 1), i64t, c"wide".as_ptr());
            for v in [a, b] {
                if !LLVMIsAInstruction(v).is_null() && LLVMGetInstructionOpcode(v) == LLVMOpcode::LLVMSExt {
                    work.push(v);
                }
            }
            let wide = LLVMBuildICmp(builder, pred, a, b, c"wide".as_ptr());
            LLVMReplaceAllUsesWith(cmp, wide);
            LLVMInstructionEraseFromParent(cmp);
        }
        while let Some(ext) = work.pop() {
            let signed = LLVMGetInstructionOpcode(ext) == LLVMOpcode::LLVMSExt;
            let wide = LLVMTypeOf(ext);
            let x = LLVMGetOperand(ext, 0);
            if LLVMIsAInstruction(x).is_null() {
                continue;
            }
            let replacement = match LLVMGetInstructionOpcode(x) {
                op @ (LLVMOpcode::LLVMAdd | LLVMOpcode::LLVMSub | LLVMOpcode::LLVMMul)
                    if (signed && LLVMGetNSW(x) != 0) || (!signed && LLVMGetNUW(x) != 0) =>
                {
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
                        let e = if signed {
                            LLVMBuildSExt(builder, n, wide, c"wide".as_ptr())
                        } else {
                            LLVMBuildZExt(builder, n, wide, c"wide".as_ptr())
                        };
                        if !LLVMIsAInstruction(e).is_null() {
                            work.push(e);
                        }
                        e
                    } else if flagged || (is_instance_counter(v) && bits >= 32) {
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
                        let Some(max) = max_of(v, bound, &mut names) else { continue };
                        let limit = if signed { 1i128 << (bits - 1) } else { 1i128 << bits };
                        names.sort();
                        names.dedup();
                        conditions.push((names, format!("{max} < {limit}")));
                        v
                    }
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
    conditions
}
