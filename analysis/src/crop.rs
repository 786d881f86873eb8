//! Cropping (the Mekong thesis's section 5.1): before Polly sees a wrapped leaf, remove what
//! does not decide which elements are accessed, so that what is left is as affine as the
//! addresses themselves.
//!
//! - Values stored to buffers become `poison`: the arithmetic that computed them, the math
//!   calls in it and the branches that only chose between values (clamps, `?:`) die with
//!   them. Loads stay: a load is a read even when its value is no longer used. Each buffer
//!   load's value is stored to a local "sink" (which is no buffer), because Polly drops
//!   statements that only read.
//! - Shared-memory traffic goes: stores into it are deleted, loads from it die when unused.
//!   Which shared elements a block touches is not the partitioning's business.
//! - Barriers and `__hpvm__return` go: they order and publish values, they address nothing.
//! - Atomic updates become a load and a store of the same element (what they access); the
//!   node is recorded as using atomics, which no partitioning can merge.
//!
//! Nothing that computes an address or a guard of an access is changed.

use inkwell::values::{AsValueRef, FunctionValue};
use llvm_sys::core::*;
use llvm_sys::prelude::*;
use llvm_sys::LLVMOpcode;

/// What cropping found that the classification needs.
#[derive(Debug, Default)]
pub struct Cropped {
    /// Atomic updates: the wrapper parameter the address is based on (if known) and the
    /// source location.
    pub atomics: Vec<(Option<u32>, String)>,
}

/// Crops `f` in place. `shared` are the indices of `f`'s parameters that point to shared
/// (per-block scratch) memory.
pub fn crop(f: FunctionValue<'_>, shared: &[u32]) -> Cropped {
    let f = f.as_value_ref();
    let mut out = Cropped::default();
    // SAFETY: every instruction touched belongs to `f`, which the caller owns; uses are
    // replaced before anything is erased.
    unsafe {
        let builder = LLVMCreateBuilderInContext(LLVMGetTypeContext(LLVMTypeOf(f)));
        let mut sinks: Vec<(LLVMTypeRef, LLVMValueRef)> = Vec::new();
        for inst in instructions(f) {
            match LLVMGetInstructionOpcode(inst) {
                LLVMOpcode::LLVMStore => {
                    let ptr = LLVMGetOperand(inst, 1);
                    match base_param(f, ptr) {
                        Some(p) if shared.contains(&p) => LLVMInstructionEraseFromParent(inst),
                        Some(_) => {
                            let v = LLVMGetOperand(inst, 0);
                            LLVMSetOperand(inst, 0, LLVMGetPoison(LLVMTypeOf(v)));
                        }
                        None => {}
                    }
                }
                LLVMOpcode::LLVMLoad => {
                    let ptr = LLVMGetOperand(inst, 0);
                    if base_param(f, ptr).is_some_and(|p| !shared.contains(&p)) {
                        let ty = LLVMTypeOf(inst);
                        let sink = match sinks.iter().find(|(t, _)| *t == ty) {
                            Some(&(_, s)) => s,
                            None => {
                                let entry = LLVMGetEntryBasicBlock(f);
                                LLVMPositionBuilderBefore(builder, LLVMGetFirstInstruction(entry));
                                let s = LLVMBuildAlloca(builder, ty, c"hpvm.sink".as_ptr());
                                sinks.push((ty, s));
                                s
                            }
                        };
                        let next = LLVMGetNextInstruction(inst);
                        LLVMPositionBuilderBefore(builder, next);
                        LLVMBuildStore(builder, inst, sink);
                    }
                }
                LLVMOpcode::LLVMAtomicRMW => {
                    let ptr = LLVMGetOperand(inst, 0);
                    let ty = LLVMTypeOf(LLVMGetOperand(inst, 1));
                    out.atomics.push((base_param(f, ptr), location(inst)));
                    load_and_store(builder, inst, ptr, ty);
                }
                LLVMOpcode::LLVMCall => {
                    let name = callee_name(inst);
                    // hint, attributes, return, barrier: declarations and ordering, no addresses.
                    if name.starts_with("__hpvm__") && !name.starts_with("__hpvm__atomic_") {
                        LLVMInstructionEraseFromParent(inst);
                    } else if name.starts_with("__hpvm__atomic_") {
                        let ptr = LLVMGetOperand(inst, 0);
                        // The value operand's type is the element's (cmpxchg: the last one).
                        let n = LLVMGetNumArgOperands(inst);
                        let ty = LLVMTypeOf(LLVMGetOperand(inst, n - 1));
                        out.atomics.push((base_param(f, ptr), location(inst)));
                        load_and_store(builder, inst, ptr, ty);
                    }
                }
                _ => {}
            }
        }
        LLVMDisposeBuilder(builder);
        loop {
            let dead = delete_dead(f, shared);
            let folded = fold_empty_diamonds(f);
            if !dead && !folded {
                break;
            }
        }
    }
    out
}

/// Replaces the atomic `inst` on `ptr` by a load and a store of poison of type `ty`.
unsafe fn load_and_store(builder: LLVMBuilderRef, inst: LLVMValueRef, ptr: LLVMValueRef, ty: LLVMTypeRef) {
    LLVMPositionBuilderBefore(builder, inst);
    let old = LLVMBuildLoad2(builder, ty, ptr, c"atomic.old".as_ptr());
    LLVMBuildStore(builder, LLVMGetPoison(ty), ptr);
    let ret = LLVMTypeOf(inst);
    if LLVMGetTypeKind(ret) != llvm_sys::LLVMTypeKind::LLVMVoidTypeKind {
        let v = if ret == ty { old } else { LLVMGetPoison(ret) };
        LLVMReplaceAllUsesWith(inst, v);
    }
    LLVMInstructionEraseFromParent(inst);
}

unsafe fn instructions(f: LLVMValueRef) -> Vec<LLVMValueRef> {
    let mut out = Vec::new();
    let mut bb = LLVMGetFirstBasicBlock(f);
    while !bb.is_null() {
        let mut i = LLVMGetFirstInstruction(bb);
        while !i.is_null() {
            out.push(i);
            i = LLVMGetNextInstruction(i);
        }
        bb = LLVMGetNextBasicBlock(bb);
    }
    out
}

unsafe fn callee_name(call: LLVMValueRef) -> String {
    let callee = LLVMGetCalledValue(call);
    if callee.is_null() || LLVMIsAFunction(callee).is_null() {
        return String::new();
    }
    let mut len = 0;
    let p = LLVMGetValueName2(callee, &mut len);
    String::from_utf8_lossy(std::slice::from_raw_parts(p as *const u8, len)).into_owned()
}

/// `file:line` of an instruction, `?` without debug info.
pub(crate) unsafe fn location(inst: LLVMValueRef) -> String {
    let line = LLVMGetDebugLocLine(inst);
    let mut len = 0;
    let file = LLVMGetDebugLocFilename(inst, &mut len);
    if file.is_null() || line == 0 {
        return "?".into();
    }
    let file = String::from_utf8_lossy(std::slice::from_raw_parts(file as *const u8, len as usize));
    format!("{file}:{line}")
}

/// The parameter of `f` a pointer is computed from by GEPs and casts.
unsafe fn base_param(f: LLVMValueRef, mut v: LLVMValueRef) -> Option<u32> {
    loop {
        if !LLVMIsAArgument(v).is_null() {
            return (0..LLVMCountParams(f)).find(|&i| LLVMGetParam(f, i) == v);
        }
        let is_gep = !LLVMIsAGetElementPtrInst(v).is_null()
            || (!LLVMIsAConstantExpr(v).is_null() && LLVMGetConstOpcode(v) == LLVMOpcode::LLVMGetElementPtr);
        let is_cast = !LLVMIsABitCastInst(v).is_null() || !LLVMIsAAddrSpaceCastInst(v).is_null();
        if is_gep || is_cast {
            v = LLVMGetOperand(v, 0);
        } else {
            return None;
        }
    }
}

/// Calls without effects the cropping may delete when their value is unused.
fn is_pure_call(name: &str) -> bool {
    const MATH: [&str; 44] = [
        "sqrtf",
        "sqrt",
        "expf",
        "exp",
        "exp2f",
        "exp2",
        "logf",
        "log",
        "log2f",
        "log2",
        "powf",
        "pow",
        "sinf",
        "sin",
        "cosf",
        "cos",
        "tanf",
        "tan",
        "tanhf",
        "tanh",
        "fabsf",
        "fabs",
        "floorf",
        "floor",
        "ceilf",
        "ceil",
        "fminf",
        "fmaxf",
        "fmin",
        "fmax",
        "fmaf",
        "fma",
        "erff",
        "erf",
        "roundf",
        "round",
        "truncf",
        "trunc",
        "__hpvm__floor",
        "__hpvm__rsqrt",
        "__hpvm__sqrt",
        "__hpvm__sin",
        "__hpvm__cos",
        "rsqrtf",
    ];
    MATH.contains(&name) || (name.starts_with("llvm.") && !name.starts_with("llvm.mem"))
}

/// Deletes the instructions that access no buffer and whose values no access, branch or
/// kept call needs (mark and sweep, so that dead loop-carried values go too); true if any.
unsafe fn delete_dead(f: LLVMValueRef, shared: &[u32]) -> bool {
    use LLVMOpcode::*;
    let insts = instructions(f);
    let removable = |inst: LLVMValueRef| match LLVMGetInstructionOpcode(inst) {
        LLVMAdd | LLVMFAdd | LLVMSub | LLVMFSub | LLVMMul | LLVMFMul | LLVMUDiv | LLVMSDiv | LLVMFDiv | LLVMURem
        | LLVMSRem | LLVMFRem | LLVMShl | LLVMLShr | LLVMAShr | LLVMAnd | LLVMOr | LLVMXor | LLVMFNeg | LLVMTrunc
        | LLVMZExt | LLVMSExt | LLVMFPToUI | LLVMFPToSI | LLVMUIToFP | LLVMSIToFP | LLVMFPTrunc | LLVMFPExt
        | LLVMPtrToInt | LLVMIntToPtr | LLVMBitCast | LLVMAddrSpaceCast | LLVMICmp | LLVMFCmp | LLVMPHI
        | LLVMSelect | LLVMGetElementPtr | LLVMExtractValue | LLVMInsertValue | LLVMExtractElement
        | LLVMInsertElement | LLVMShuffleVector | LLVMFreeze => true,
        // A load from shared memory is no buffer read.
        LLVMLoad => base_param(f, LLVMGetOperand(inst, 0)).is_some_and(|p| shared.contains(&p)),
        LLVMCall => is_pure_call(&callee_name(inst)),
        _ => false,
    };
    let mut live: std::collections::HashSet<LLVMValueRef> = std::collections::HashSet::new();
    let mut work: Vec<LLVMValueRef> = insts.iter().copied().filter(|&i| !removable(i)).collect();
    while let Some(i) = work.pop() {
        if !live.insert(i) {
            continue;
        }
        for k in 0..LLVMGetNumOperands(i) {
            let op = LLVMGetOperand(i, k as u32);
            if !op.is_null() && !LLVMIsAInstruction(op).is_null() && !live.contains(&op) {
                work.push(op);
            }
        }
    }
    let dead: Vec<LLVMValueRef> = insts.into_iter().filter(|i| !live.contains(i)).collect();
    for &i in &dead {
        LLVMReplaceAllUsesWith(i, LLVMGetPoison(LLVMTypeOf(i)));
    }
    for &i in &dead {
        LLVMInstructionEraseFromParent(i);
    }
    !dead.is_empty()
}

/// Where a branch to `bb` really goes: through empty blocks (a lone unconditional branch).
unsafe fn skip_empty(bb: LLVMBasicBlockRef) -> LLVMBasicBlockRef {
    let first = LLVMGetFirstInstruction(bb);
    if first == LLVMGetBasicBlockTerminator(bb)
        && LLVMGetInstructionOpcode(first) == LLVMOpcode::LLVMBr
        && LLVMIsConditional(first) == 0
    {
        LLVMGetSuccessor(first, 0)
    } else {
        bb
    }
}

unsafe fn has_phi(bb: LLVMBasicBlockRef) -> bool {
    let first = LLVMGetFirstInstruction(bb);
    !first.is_null() && LLVMGetInstructionOpcode(first) == LLVMOpcode::LLVMPHI
}

/// A conditional branch whose two ways meet again at once, with nothing done on either and
/// no value chosen (no phi), decides nothing: make it unconditional and drop the empty
/// blocks. True if any changed.
unsafe fn fold_empty_diamonds(f: LLVMValueRef) -> bool {
    let mut changed = false;
    let builder = LLVMCreateBuilderInContext(LLVMGetTypeContext(LLVMTypeOf(f)));
    let mut bb = LLVMGetFirstBasicBlock(f);
    while !bb.is_null() {
        let term = LLVMGetBasicBlockTerminator(bb);
        if !term.is_null() && LLVMGetInstructionOpcode(term) == LLVMOpcode::LLVMBr && LLVMIsConditional(term) != 0 {
            let (t, e) = (LLVMGetSuccessor(term, 0), LLVMGetSuccessor(term, 1));
            let (jt, je) = (skip_empty(t), skip_empty(e));
            if jt == je && jt != bb && !has_phi(jt) && !has_phi(t) && !has_phi(e) {
                LLVMPositionBuilderBefore(builder, term);
                LLVMBuildBr(builder, jt);
                LLVMInstructionEraseFromParent(term);
                changed = true;
            }
        }
        bb = LLVMGetNextBasicBlock(bb);
    }
    LLVMDisposeBuilder(builder);
    // Blocks nothing branches to any more (never the entry block).
    loop {
        let mut removed = false;
        let mut bb = LLVMGetNextBasicBlock(LLVMGetFirstBasicBlock(f));
        while !bb.is_null() {
            let next = LLVMGetNextBasicBlock(bb);
            if LLVMGetFirstUse(LLVMBasicBlockAsValue(bb)).is_null() {
                // Its successors may have phis naming it; those blocks had none (checked
                // above) or the block was never empty-diamond material: only delete empty
                // blocks whose successor has no phi.
                let first = LLVMGetFirstInstruction(bb);
                let term = LLVMGetBasicBlockTerminator(bb);
                if first == term
                    && !term.is_null()
                    && (0..LLVMGetNumSuccessors(term)).all(|i| !has_phi(LLVMGetSuccessor(term, i)))
                {
                    LLVMDeleteBasicBlock(bb);
                    removed = true;
                }
            }
            bb = next;
        }
        if !removed {
            break;
        }
    }
    changed
}
