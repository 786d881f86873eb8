//! Pruning the analysis's copy of a module to what one node's code reaches: analysing a
//! single node (`Options::only`, the runtime's `hpvm-mgpu specialize`) should cost that node's
//! code, not the program's. A Thrust program's module holds hundreds of template instances;
//! inlining them all for one kernel took seconds.
//!
//! Invariants:
//! - every function the roots reach (through calls, function pointers, and constants and
//!   global variables' initializers that name functions) keeps its body; every other
//!   function becomes a declaration, which no kept code calls;
//! - this changes the analysis's copy of the module only.

use inkwell::module::Module;
use inkwell::values::{AsValueRef, FunctionValue};
use llvm_sys::comdat::LLVMSetComdat;
use llvm_sys::core::{
    LLVMGetFirstBasicBlock, LLVMGetFirstInstruction, LLVMGetInitializer, LLVMGetNextBasicBlock, LLVMGetNextInstruction,
    LLVMGetNumOperands, LLVMGetOperand, LLVMGlobalClearMetadata, LLVMIsAConstant, LLVMIsAFunction,
    LLVMIsAGlobalVariable, LLVMSetLinkage, LLVMSetPersonalityFn,
};
use llvm_sys::prelude::LLVMValueRef;
use std::collections::HashSet;

/// Makes every function of `m` that `roots` do not reach a declaration (see the module's
/// doc); returns how many.
pub fn prune(m: &Module<'_>, roots: &[FunctionValue<'_>]) -> usize {
    let mut kept: HashSet<LLVMValueRef> = HashSet::new();
    let mut seen: HashSet<LLVMValueRef> = HashSet::new();
    let mut stack: Vec<LLVMValueRef> = roots.iter().map(|f| f.as_value_ref()).collect();
    while let Some(f) = stack.pop() {
        if !kept.insert(f) {
            continue;
        }
        // SAFETY: `f` is a function of `m`, alive for the walk; blocks, instructions and
        // operands are read only.
        unsafe {
            let mut bb = LLVMGetFirstBasicBlock(f);
            while !bb.is_null() {
                let mut inst = LLVMGetFirstInstruction(bb);
                while !inst.is_null() {
                    for i in 0..LLVMGetNumOperands(inst).max(0) as u32 {
                        reach(LLVMGetOperand(inst, i), &mut stack, &mut seen);
                    }
                    inst = LLVMGetNextInstruction(inst);
                }
                bb = LLVMGetNextBasicBlock(bb);
            }
        }
    }
    let mut pruned = 0;
    for f in m.get_functions() {
        if f.count_basic_blocks() == 0 || kept.contains(&f.as_value_ref()) {
            continue;
        }
        for bb in f.get_basic_blocks() {
            // SAFETY: no kept code refers to `f`'s blocks; they go with their instructions.
            unsafe { bb.delete() }.ok();
        }
        // SAFETY: `f` belongs to `m`; a declaration has external linkage, no comdat, no
        // personality and no attachments (its `!dbg` subprogram).
        unsafe {
            LLVMGlobalClearMetadata(f.as_value_ref());
            LLVMSetLinkage(f.as_value_ref(), llvm_sys::LLVMLinkage::LLVMExternalLinkage);
            LLVMSetComdat(f.as_value_ref(), std::ptr::null_mut());
            LLVMSetPersonalityFn(f.as_value_ref(), std::ptr::null_mut());
        }
        pruned += 1;
    }
    pruned
}

/// Adds the functions `v` names to `stack`: itself, or those its constant operands or (for a
/// global variable) its initializer name.
///
/// # Safety
/// `v` is null or a value of a live module.
unsafe fn reach(v: LLVMValueRef, stack: &mut Vec<LLVMValueRef>, seen: &mut HashSet<LLVMValueRef>) {
    let mut work = vec![v];
    while let Some(v) = work.pop() {
        if v.is_null() || !seen.insert(v) {
            continue;
        }
        // SAFETY: as the caller's.
        unsafe {
            if !LLVMIsAFunction(v).is_null() {
                stack.push(v);
            } else if !LLVMIsAGlobalVariable(v).is_null() {
                work.push(LLVMGetInitializer(v));
            } else if !LLVMIsAConstant(v).is_null() {
                for i in 0..LLVMGetNumOperands(v).max(0) as u32 {
                    work.push(LLVMGetOperand(v, i));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inkwell::context::Context;

    /// The root keeps its body and its callee's, also one named only in a global's
    /// initializer it loads; an unrelated function becomes a declaration; the module verifies.
    #[test]
    fn keeps_what_the_root_reaches() {
        let ctx = Context::create();
        let ir = r#"
            @table = internal constant [1 x ptr] [ptr @through_table]
            define internal i32 @through_table() { ret i32 1 }
            define internal i32 @callee() { ret i32 2 }
            define i32 @unrelated() { ret i32 3 }
            define i32 @root() {
              %f = load ptr, ptr @table
              %a = call i32 %f()
              %b = call i32 @callee()
              %c = add i32 %a, %b
              ret i32 %c
            }
        "#;
        let buf = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "t");
        let m = ctx.create_module_from_ir(buf).expect("parses");
        let root = m.get_function("root").unwrap();
        assert_eq!(prune(&m, &[root]), 1);
        for (name, body) in [("root", true), ("callee", true), ("through_table", true), ("unrelated", false)] {
            assert_eq!(m.get_function(name).unwrap().count_basic_blocks() > 0, body, "{name}");
        }
        m.verify().expect("the pruned module verifies");
    }
}
