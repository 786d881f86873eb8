//! Putting a value in place of a global variable inside one function.
//!
//! Device code reaches `__shared__`, `__device__` and `__constant__` variables through
//! constant expressions (`getelementptr ([256 x float], ptr addrspacecast (ptr addrspace(3)
//! @tile to ptr), i64 0, i64 5)`). A leaf receives such a variable as a parameter instead, which
//! is not a constant, so every constant expression over the variable in the leaf becomes
//! instructions computing the same address from the parameter. Other functions keep theirs.

use llvm_sys::core::*;
use llvm_sys::prelude::*;
use llvm_sys::LLVMOpcode;

/// Whether the constant `c` is `g` or an expression over it.
unsafe fn refers(c: LLVMValueRef, g: LLVMValueRef) -> bool {
    if c == g {
        return true;
    }
    if LLVMIsAConstantExpr(c).is_null() {
        return false;
    }
    (0..LLVMGetNumOperands(c) as u32).any(|i| refers(LLVMGetOperand(c, i), g))
}

/// Instructions at the builder's position computing the constant expression `c` with `value`
/// for the generic address of `g` (`addrspacecast g to ptr`).
unsafe fn materialize(
    b: LLVMBuilderRef,
    c: LLVMValueRef,
    g: LLVMValueRef,
    value: LLVMValueRef,
) -> Result<LLVMValueRef, String> {
    if c == g {
        return Err("is used in its own address space".into());
    }
    if !refers(c, g) {
        return Ok(c);
    }
    let ty = LLVMTypeOf(c);
    let operand = |i: u32| materialize(b, LLVMGetOperand(c, i), g, value);
    match LLVMGetConstOpcode(c) {
        LLVMOpcode::LLVMAddrSpaceCast if LLVMGetOperand(c, 0) == g => Ok(value),
        LLVMOpcode::LLVMGetElementPtr => {
            let base = operand(0)?;
            let mut indices = (1..LLVMGetNumOperands(c) as u32).map(operand).collect::<Result<Vec<_>, _>>()?;
            let gep = LLVMBuildGEP2(
                b,
                LLVMGetGEPSourceElementType(c),
                base,
                indices.as_mut_ptr(),
                indices.len() as u32,
                c"".as_ptr(),
            );
            if !LLVMIsAGetElementPtrInst(gep).is_null() {
                LLVMSetIsInBounds(gep, LLVMIsInBounds(c));
            }
            Ok(gep)
        }
        op @ (LLVMOpcode::LLVMBitCast
        | LLVMOpcode::LLVMAddrSpaceCast
        | LLVMOpcode::LLVMPtrToInt
        | LLVMOpcode::LLVMIntToPtr) => Ok(LLVMBuildCast(b, op, operand(0)?, ty, c"".as_ptr())),
        op => Err(format!("is used in a constant expression ({op:?}) the CUDA frontend cannot rewrite")),
    }
}

/// Replaces `g` by `value` (a generic pointer to the same memory) in every instruction of
/// `f`; an error says how `g` is used where that cannot be done.
///
/// # Safety
/// `f` is a defined function and `g` a global of the same live module; `value` is valid in
/// every block of `f` (a parameter).
pub(super) unsafe fn replace_in_function(
    f: LLVMValueRef,
    g: LLVMValueRef,
    value: LLVMValueRef,
) -> Result<(), (LLVMValueRef, String)> {
    let b = LLVMCreateBuilderInContext(LLVMGetTypeContext(LLVMTypeOf(f)));
    let mut result = Ok(());
    let mut bb = LLVMGetFirstBasicBlock(f);
    'blocks: while !bb.is_null() {
        let mut inst = LLVMGetFirstInstruction(bb);
        while !inst.is_null() {
            for i in 0..LLVMGetNumOperands(inst) as u32 {
                let op = LLVMGetOperand(inst, i);
                if !refers(op, g) {
                    continue;
                }
                // A phi's operand is computed at the end of the block it comes from.
                if LLVMIsAPHINode(inst).is_null() {
                    LLVMPositionBuilderBefore(b, inst);
                } else {
                    LLVMPositionBuilderBefore(b, LLVMGetBasicBlockTerminator(LLVMGetIncomingBlock(inst, i)));
                }
                match materialize(b, op, g, value) {
                    Ok(v) => LLVMSetOperand(inst, i, v),
                    Err(e) => {
                        result = Err((inst, e));
                        break 'blocks;
                    }
                }
            }
            inst = LLVMGetNextInstruction(inst);
        }
        bb = LLVMGetNextBasicBlock(bb);
    }
    LLVMDisposeBuilder(b);
    result
}
