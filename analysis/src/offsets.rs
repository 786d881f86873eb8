//! Block offsets (see [`crate::wrap`]): where a block size is known only at the launch, the
//! wrapper gives the block id and the block size as two parameters, and the usual global
//! index `block id × block size + thread id` is a product of two unknowns. This pass replaces
//! each such product by the block-offset parameter, which stands for exactly that product, so
//! that the index becomes `offset + thread id`, affine.
//!
//! The replacement is exact, never a guess: the operands may pass through truncations (a
//! product of truncated values is the truncated product in wrapping arithmetic, which is what
//! `mul` computes) and through extensions of values at least 32 bits wide, which change
//! nothing for block ids and sizes below 2^31 (`dashdb::GRID_LIMIT`, which the runtime checks
//! before it uses the maps). Any other product involving the id or the size is left alone, and
//! Polly then reports it as non-affine.

use inkwell::values::{AsValueRef, FunctionValue, IntValue};
use llvm_sys::core::*;
use llvm_sys::prelude::*;
use llvm_sys::LLVMOpcode;

/// One grid dimension's block parameters, as arguments of the wrapper function.
#[derive(Clone, Copy)]
pub struct BlockParams<'ctx> {
    pub id: IntValue<'ctx>,
    pub size: IntValue<'ctx>,
    pub offset: IntValue<'ctx>,
}

/// `v` without the casts that do not change a block id or size.
///
/// # Safety
/// `v` must be a live value.
unsafe fn strip(mut v: LLVMValueRef) -> LLVMValueRef {
    loop {
        if LLVMIsAInstruction(v).is_null() {
            return v;
        }
        let inner = match LLVMGetInstructionOpcode(v) {
            LLVMOpcode::LLVMTrunc => LLVMGetOperand(v, 0),
            LLVMOpcode::LLVMSExt | LLVMOpcode::LLVMZExt
                if LLVMGetIntTypeWidth(LLVMTypeOf(LLVMGetOperand(v, 0))) >= 32 =>
            {
                LLVMGetOperand(v, 0)
            }
            _ => return v,
        };
        v = inner;
    }
}

/// Replaces, in `f`, every product of a dimension's block id and block size by its block
/// offset (truncated to the product's width). Returns how many products it replaced.
pub fn rewrite(f: FunctionValue<'_>, dims: &[BlockParams<'_>]) -> usize {
    let f = f.as_value_ref();
    let dims: Vec<[LLVMValueRef; 3]> =
        dims.iter().map(|p| [p.id.as_value_ref(), p.size.as_value_ref(), p.offset.as_value_ref()]).collect();
    let mut replaced = 0;
    // SAFETY: `f` is a function of a live module; instructions are collected before any is
    // erased, and each is erased only after all its uses are replaced.
    unsafe {
        let mut muls = Vec::new();
        let mut bb = LLVMGetFirstBasicBlock(f);
        while !bb.is_null() {
            let mut inst = LLVMGetFirstInstruction(bb);
            while !inst.is_null() {
                if LLVMGetInstructionOpcode(inst) == LLVMOpcode::LLVMMul {
                    muls.push(inst);
                }
                inst = LLVMGetNextInstruction(inst);
            }
            bb = LLVMGetNextBasicBlock(bb);
        }
        let builder = LLVMCreateBuilderInContext(LLVMGetTypeContext(LLVMTypeOf(f)));
        for mul in muls {
            let (a, b) = (strip(LLVMGetOperand(mul, 0)), strip(LLVMGetOperand(mul, 1)));
            let Some(&[_, _, offset]) = dims.iter().find(|p| (a == p[0] && b == p[1]) || (a == p[1] && b == p[0]))
            else {
                continue;
            };
            let ty = LLVMTypeOf(mul);
            if LLVMGetIntTypeWidth(ty) > 64 {
                continue;
            }
            let value: LLVMValueRef = if LLVMGetIntTypeWidth(ty) == LLVMGetIntTypeWidth(LLVMTypeOf(offset)) {
                offset
            } else {
                LLVMPositionBuilderBefore(builder, mul);
                LLVMBuildTrunc(builder, offset, ty, c"boff.narrow".as_ptr())
            };
            LLVMReplaceAllUsesWith(mul, value);
            LLVMInstructionEraseFromParent(mul);
            replaced += 1;
        }
        LLVMDisposeBuilder(builder);
    }
    replaced
}
