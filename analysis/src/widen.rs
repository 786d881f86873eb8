//! Narrow index arithmetic, widened (issue: `int` indices over 64-bit sizes and ids). Code
//! written with `int` indices computes `int i = (z * ny + y) * nx + x` in 32 bits and
//! sign-extends the result for the address; the extension of a whole expression hides its
//! structure from ScalarEvolution, so Polly can neither delinearize nor often model it.
//!
//! This pass moves each extension down through the arithmetic, where that is exact:
//! - through `add`, `sub` and `mul` carrying `nsw` (for `sext`) or `nuw` (for `zext`): C says
//!   such an operation never overflows in a run with defined behaviour, so extending its result
//!   equals operating on the extended operands;
//! - onto the value under a truncation, `ext(trunc v)` → `v`, where `v` is one of the wrapper's
//!   instance loop counters (below 2^31, `dashdb::GRID_LIMIT`, so any truncation to 32 bits or
//!   more keeps it) or one of its parameters, for which the identity holds only while the value
//!   fits the narrow type: that condition is returned, and becomes part of the node's
//!   `valid_when`, which the runtime checks at every launch (and runs the node unpartitioned
//!   where it fails).

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

/// Widens the extensions of `f` (see the module docs). Returns the conditions under which the
/// result equals the original: (parameter name, ISL constraint on it).
pub fn widen(f: FunctionValue<'_>) -> Vec<(String, String)> {
    let mut conditions: Vec<(String, String)> = Vec::new();
    // SAFETY: `f` belongs to a live module; an instruction is erased only after all its uses
    // are replaced, and the worklist never holds an erased one (each is taken once).
    unsafe {
        let f = f.as_value_ref();
        let mut work: Vec<LLVMValueRef> = Vec::new();
        let mut bb = LLVMGetFirstBasicBlock(f);
        while !bb.is_null() {
            let mut inst = LLVMGetFirstInstruction(bb);
            while !inst.is_null() {
                if matches!(LLVMGetInstructionOpcode(inst), LLVMOpcode::LLVMSExt | LLVMOpcode::LLVMZExt) {
                    work.push(inst);
                }
                inst = LLVMGetNextInstruction(inst);
            }
            bb = LLVMGetNextBasicBlock(bb);
        }
        let builder = LLVMCreateBuilderInContext(LLVMGetTypeContext(LLVMTypeOf(f)));
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
                    if is_instance_counter(v) && bits >= 32 {
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
                        conditions.push((name, c));
                        v
                    } else {
                        continue;
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
