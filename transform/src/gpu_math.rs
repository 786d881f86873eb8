//! The GPU math library's calls simplified as NVIDIA's compiler simplifies them.
//!
//! clang's CUDA headers turn `powf`, `sinf` and `cosf` into calls of libdevice (`__nv_powf`...)
//! before any optimization sees them, so LLVM's library-call simplifier never recognizes them;
//! nvcc's does. Two cases cost HeCBench programs most:
//!
//! - `powf(x, 2.0f)`, the common way to write a square, runs libdevice's whole `pow` (a
//!   logarithm and an exponential, with special cases) instead of one multiplication: pso's
//!   kernel ran at 40% of nvcc's speed. `x * x` is the correctly rounded square, which is what
//!   `pow` approximates; `pow(x, 1)` is `x`. Other exponents change the rounding and stay.
//! - `sin(a)` and `cos(a)` of the same angle (a complex exponential, FFT's twiddles) reduce the
//!   angle twice; libdevice's `sincos` does it once and returns the same two values.
//!
//! The module must have been cleaned by SROA and early CSE first, so that the same angle is the
//! same SSA value.

use inkwell::module::Module;
use inkwell::values::AsValueRef;
use llvm_sys::core::*;
use llvm_sys::prelude::*;
use llvm_sys::LLVMOpcode;
use std::collections::HashMap;
use std::ffi::CStr;

/// Simplifies the math calls of every function of `gpu`; returns how many calls it replaced.
pub fn simplify(gpu: &Module<'_>) -> usize {
    let mut done = 0;
    for f in gpu.get_functions() {
        // SAFETY: the functions and instructions of a live module, changed in place.
        unsafe {
            done += squares(f.as_value_ref());
            done += sin_cos_pairs(gpu, f.as_value_ref());
        }
    }
    done
}

/// The calls of `f`, with their callees' names.
unsafe fn calls(f: LLVMValueRef) -> Vec<(LLVMValueRef, String)> {
    let mut out = Vec::new();
    let mut bb = LLVMGetFirstBasicBlock(f);
    while !bb.is_null() {
        let mut inst = LLVMGetFirstInstruction(bb);
        while !inst.is_null() {
            if LLVMGetInstructionOpcode(inst) == LLVMOpcode::LLVMCall {
                let callee = LLVMGetCalledValue(inst);
                if !LLVMIsAFunction(callee).is_null() {
                    let mut len = 0;
                    let name = LLVMGetValueName2(callee, &mut len);
                    let name = CStr::from_ptr(name).to_string_lossy().into_owned();
                    if name.starts_with("__nv_") {
                        out.push((inst, name));
                    }
                }
            }
            inst = LLVMGetNextInstruction(inst);
        }
        bb = LLVMGetNextBasicBlock(bb);
    }
    out
}

/// `pow(x, 2)` as `x * x` and `pow(x, 1)` as `x`.
unsafe fn squares(f: LLVMValueRef) -> usize {
    let mut done = 0;
    for (call, name) in calls(f) {
        if name != "__nv_powf" && name != "__nv_pow" {
            continue;
        }
        let (x, y) = (LLVMGetOperand(call, 0), LLVMGetOperand(call, 1));
        if LLVMIsAConstantFP(y).is_null() {
            continue;
        }
        let mut lost = 0;
        let e = LLVMConstRealGetDouble(y, &mut lost);
        let with = if e == 2.0 {
            let b = LLVMCreateBuilderInContext(LLVMGetTypeContext(LLVMTypeOf(call)));
            LLVMPositionBuilderBefore(b, call);
            let square = LLVMBuildFMul(b, x, x, c"square".as_ptr());
            LLVMDisposeBuilder(b);
            LLVMSetFastMathFlags(square, contraction(call));
            square
        } else if e == 1.0 {
            x
        } else {
            continue;
        };
        LLVMReplaceAllUsesWith(call, with);
        LLVMInstructionEraseFromParent(call);
        done += 1;
    }
    done
}

/// The fast-math flags a square written as `x * x` would have had: the call's own, and
/// contraction into a fused multiply-add where the expression around it allows that (clang's
/// CUDA default, `-ffp-contract=fast`, marks every operation; nvcc fuses the square into the
/// addition that uses it).
unsafe fn contraction(call: LLVMValueRef) -> llvm_sys::LLVMFastMathFlags {
    let mut flags =
        if LLVMCanValueUseFastMathFlags(call) != 0 { LLVMGetFastMathFlags(call) } else { llvm_sys::LLVMFastMathNone };
    let mut u = LLVMGetFirstUse(call);
    while !u.is_null() {
        let user = LLVMGetUser(u);
        if LLVMCanValueUseFastMathFlags(user) != 0 {
            flags |= LLVMGetFastMathFlags(user) & llvm_sys::LLVMFastMathAllowContract;
        }
        u = LLVMGetNextUse(u);
    }
    flags
}

/// `sin(a)` and `cos(a)` in one block as one `sincos(a)`.
unsafe fn sin_cos_pairs(gpu: &Module<'_>, f: LLVMValueRef) -> usize {
    let mut done = 0;
    // (block, angle, single precision) -> (sin call, cos call)
    let mut pairs: HashMap<(LLVMBasicBlockRef, LLVMValueRef, bool), [Option<LLVMValueRef>; 2]> = HashMap::new();
    let mut order = Vec::new();
    for (call, name) in calls(f) {
        let (which, single) = match name.as_str() {
            "__nv_sinf" => (0, true),
            "__nv_cosf" => (1, true),
            "__nv_sin" => (0, false),
            "__nv_cos" => (1, false),
            _ => continue,
        };
        let key = (LLVMGetInstructionParent(call), LLVMGetOperand(call, 0), single);
        let slot = pairs.entry(key).or_insert_with(|| {
            order.push(key);
            [None, None]
        });
        // The first of each kind only: a second `sin(a)` is left to CSE.
        slot[which].get_or_insert(call);
    }
    for key in order {
        let [Some(sin), Some(cos)] = pairs[&key] else { continue };
        let (block, angle, single) = key;
        let ctx = LLVMGetTypeContext(LLVMTypeOf(sin));
        let ty = LLVMTypeOf(sin);
        let name = if single { "__nv_sincosf" } else { "__nv_sincos" };
        let Some(sincos) = gpu.get_function(name) else { continue };
        let sincos = sincos.as_value_ref();
        // The two results' slots, at the top of the function (SROA makes them registers once
        // `sincos` is inlined).
        let b = LLVMCreateBuilderInContext(ctx);
        let entry = LLVMGetEntryBasicBlock(f);
        let first = LLVMGetFirstInstruction(entry);
        LLVMPositionBuilderBefore(b, first);
        let s_slot = LLVMBuildAlloca(b, ty, c"sin".as_ptr());
        let c_slot = LLVMBuildAlloca(b, ty, c"cos".as_ptr());
        // Before whichever call comes first in the block: the angle is defined there.
        let mut at = LLVMGetFirstInstruction(block);
        while at != sin && at != cos {
            at = LLVMGetNextInstruction(at);
        }
        LLVMPositionBuilderBefore(b, at);
        let fn_ty = LLVMGlobalGetValueType(sincos);
        let mut args = [angle, s_slot, c_slot];
        LLVMBuildCall2(b, fn_ty, sincos, args.as_mut_ptr(), 3, c"".as_ptr());
        let s = LLVMBuildLoad2(b, ty, s_slot, c"s".as_ptr());
        let c = LLVMBuildLoad2(b, ty, c_slot, c"c".as_ptr());
        LLVMDisposeBuilder(b);
        LLVMReplaceAllUsesWith(sin, s);
        LLVMReplaceAllUsesWith(cos, c);
        LLVMInstructionEraseFromParent(sin);
        LLVMInstructionEraseFromParent(cos);
        done += 2;
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use inkwell::context::Context;
    use inkwell::memory_buffer::MemoryBuffer;

    const IR: &str = r#"
declare float @__nv_powf(float, float)
declare double @__nv_sin(double)
declare double @__nv_cos(double)
declare void @__nv_sincos(double, ptr, ptr)

define float @squares(float %x) {
  %a = call float @__nv_powf(float %x, float 2.0)
  %b = call float @__nv_powf(float %x, float 1.0)
  %c = call float @__nv_powf(float %x, float 3.0)
  %s = fadd contract float %a, %b
  %t = fadd float %s, %c
  ret float %t
}

define double @turn(double %a, double %b) {
  %c = call double @__nv_cos(double %a)
  %s = call double @__nv_sin(double %a)
  %other = call double @__nv_sin(double %b)
  %x = fadd double %c, %s
  %y = fadd double %x, %other
  ret double %y
}
"#;

    #[test]
    fn squares_multiply_and_sine_cosine_pairs_share_one_reduction() {
        let ctx = Context::create();
        let buf = MemoryBuffer::create_from_memory_range_copy(IR.as_bytes(), "math");
        let m = ctx.create_module_from_ir(buf).expect("valid IR");
        assert_eq!(simplify(&m), 4, "two powers, one pair");
        m.verify().expect("still valid IR");
        let text = m.print_to_string().to_string();
        let squares = &text[text.find("@squares(").unwrap()..text.find("@turn(").unwrap()];
        // x * x takes the contraction of the addition using it; x^1 is x; x^3 stays pow.
        assert!(squares.contains("fmul contract float %x, %x"), "{squares}");
        assert_eq!(squares.matches("call float @__nv_powf").count(), 1, "{squares}");
        assert!(squares.contains("float 3.0") || squares.contains("3.000000e+00"), "{squares}");
        let turn = &text[text.find("@turn(").unwrap()..];
        assert_eq!(turn.matches("call void @__nv_sincos(double %a").count(), 1, "{turn}");
        assert!(!turn.contains("@__nv_cos(double %a)"), "{turn}");
        // Another angle keeps its own call.
        assert!(turn.contains("call double @__nv_sin(double %b)"), "{turn}");
    }
}
