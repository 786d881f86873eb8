//! Alignment of memory accesses from known trailing zero bits of their addresses.
//!
//! LLVM's load/store vectorizer only merges accesses whose `align` already says they may be
//! merged; it does not prove alignment through address arithmetic (it does so for stack
//! slots only). Shared memory in our kernels is a 16-byte aligned base plus offsets the
//! runtime keeps 16-byte aligned, so tile accesses like `tile[ty * 16 + k]` are provably
//! 16-byte aligned for `k % 4 == 0`; nvcc sees that for its static arrays and loads four floats
//! at once. This pass recovers the same fact after optimization and raises each access's
//! alignment accordingly (never lowers it).

use inkwell::module::Module;
use inkwell::targets::TargetData;
use inkwell::values::{AsValueRef, FunctionValue};
use llvm_sys::core::*;
use llvm_sys::prelude::*;
use llvm_sys::{LLVMOpcode, LLVMTypeKind};

/// Largest alignment worth knowing (a 16-byte vector access).
const MAX_ALIGN: u32 = 16;

/// Raises the alignment of loads and stores in `functions` where the address proves more.
pub fn raise_alignment(module: &Module<'_>, data: &TargetData, functions: &[FunctionValue<'_>]) {
    let _ = module;
    for f in functions {
        for bb in f.get_basic_block_iter() {
            for inst in bb.get_instructions() {
                let v = inst.as_value_ref();
                // SAFETY: reading instructions of a live module.
                unsafe {
                    let ptr = match LLVMGetInstructionOpcode(v) {
                        LLVMOpcode::LLVMLoad => LLVMGetOperand(v, 0),
                        LLVMOpcode::LLVMStore => LLVMGetOperand(v, 1),
                        _ => continue,
                    };
                    let known = pointer_align(data, ptr, 0);
                    if known > LLVMGetAlignment(v) {
                        LLVMSetAlignment(v, known);
                    }
                }
            }
        }
    }
}

/// Alignment known for pointer `p` (1 when nothing is known).
unsafe fn pointer_align(data: &TargetData, p: LLVMValueRef, depth: u32) -> u32 {
    if depth > 16 {
        return 1;
    }
    unsafe {
        if !LLVMIsAGlobalVariable(p).is_null() {
            return LLVMGetAlignment(p).clamp(1, MAX_ALIGN);
        }
        let op = if !LLVMIsAInstruction(p).is_null() {
            LLVMGetInstructionOpcode(p)
        } else if !LLVMIsAConstantExpr(p).is_null() {
            LLVMGetConstOpcode(p)
        } else {
            return 1;
        };
        match op {
            LLVMOpcode::LLVMAddrSpaceCast | LLVMOpcode::LLVMBitCast => {
                pointer_align(data, LLVMGetOperand(p, 0), depth + 1)
            }
            LLVMOpcode::LLVMGetElementPtr => {
                let mut align = pointer_align(data, LLVMGetOperand(p, 0), depth + 1);
                let mut ty = LLVMGetGEPSourceElementType(p);
                let n = LLVMGetNumOperands(p) as u32;
                for i in 1..n {
                    let idx = LLVMGetOperand(p, i);
                    let step = if i == 1 {
                        size_of(data, ty)
                    } else {
                        match LLVMGetTypeKind(ty) {
                            LLVMTypeKind::LLVMArrayTypeKind | LLVMTypeKind::LLVMVectorTypeKind => {
                                ty = LLVMGetElementType(ty);
                                size_of(data, ty)
                            }
                            // A struct field: a constant offset.
                            LLVMTypeKind::LLVMStructTypeKind => {
                                let field = LLVMConstIntGetZExtValue(idx) as u32;
                                let offset = llvm_sys::target::LLVMOffsetOfElement(data_ref(data), ty, field);
                                ty = LLVMStructGetTypeAtIndex(ty, field);
                                align = align.min(pow2_divisor(offset));
                                continue;
                            }
                            _ => return 1,
                        }
                    };
                    let zeros = trailing_zeros(idx, 0) + step.trailing_zeros();
                    align = align.min(1u32.checked_shl(zeros).unwrap_or(MAX_ALIGN).min(MAX_ALIGN));
                }
                align
            }
            _ => 1,
        }
    }
}

fn pow2_divisor(offset: u64) -> u32 {
    if offset == 0 {
        MAX_ALIGN
    } else {
        1u32.checked_shl(offset.trailing_zeros()).unwrap_or(MAX_ALIGN).min(MAX_ALIGN)
    }
}

fn data_ref(data: &TargetData) -> llvm_sys::target::LLVMTargetDataRef {
    data.as_mut_ptr()
}

fn size_of(data: &TargetData, ty: LLVMTypeRef) -> u64 {
    // SAFETY: a sized type of this module.
    unsafe { llvm_sys::target::LLVMABISizeOfType(data_ref(data), ty) }
}

/// Number of low bits of integer `v` known to be zero.
unsafe fn trailing_zeros(v: LLVMValueRef, depth: u32) -> u32 {
    if depth > 16 {
        return 0;
    }
    unsafe {
        if !LLVMIsAConstantInt(v).is_null() {
            let c = LLVMConstIntGetZExtValue(v);
            return if c == 0 { 64 } else { c.trailing_zeros() };
        }
        if LLVMIsAInstruction(v).is_null() {
            return 0;
        }
        let a = || trailing_zeros(LLVMGetOperand(v, 0), depth + 1);
        let b = || trailing_zeros(LLVMGetOperand(v, 1), depth + 1);
        match LLVMGetInstructionOpcode(v) {
            LLVMOpcode::LLVMShl => {
                let shift = LLVMGetOperand(v, 1);
                if LLVMIsAConstantInt(shift).is_null() {
                    a()
                } else {
                    (a() + LLVMConstIntGetZExtValue(shift) as u32).min(64)
                }
            }
            LLVMOpcode::LLVMMul => (a() + b()).min(64),
            // `or` only where its operands share no bits (LLVM marks those `disjoint`; a
            // plain `or` of two values with t and u trailing zeros still has min(t, u)).
            LLVMOpcode::LLVMAdd | LLVMOpcode::LLVMSub | LLVMOpcode::LLVMOr => a().min(b()),
            LLVMOpcode::LLVMAnd => a().max(b()),
            LLVMOpcode::LLVMZExt | LLVMOpcode::LLVMSExt => a(),
            _ => 0,
        }
    }
}
