//! Read-only access to LLVM IR through the C API, for the graph builder.
//!
//! [`Val`] wraps a raw `LLVMValueRef`. It is only valid while the module it came from is
//! alive; the builder holds the module for its whole run and never lets a `Val` escape into
//! the [`crate::graph::Graph`] (which keeps names and texts instead).

use crate::loc::SrcLoc;
use llvm_sys::core::*;
use llvm_sys::debuginfo::*;
use llvm_sys::prelude::*;
use llvm_sys::{LLVMOpcode, LLVMTypeKind};
use std::ffi::CStr;

/// A value of the module being read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Val(pub LLVMValueRef);

fn owned_message(ptr: *mut std::ffi::c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: LLVM returns a NUL-terminated string that we own and must dispose.
    let s = unsafe { CStr::from_ptr(ptr) }.to_string_lossy().into_owned();
    unsafe { LLVMDisposeMessage(ptr) };
    s
}

/// The IR text of a type (`ptr`, `i64`, `%struct.RootIn`): named structs by name only.
pub fn type_text(ty: LLVMTypeRef) -> String {
    if is_struct(ty) && !unsafe { LLVMGetStructName(ty) }.is_null() {
        return struct_name(ty);
    }
    // SAFETY: `ty` comes from a live module.
    owned_message(unsafe { LLVMPrintTypeToString(ty) })
}

pub fn is_struct(ty: LLVMTypeRef) -> bool {
    unsafe { LLVMGetTypeKind(ty) == LLVMTypeKind::LLVMStructTypeKind }
}

pub fn is_void(ty: LLVMTypeRef) -> bool {
    unsafe { LLVMGetTypeKind(ty) == LLVMTypeKind::LLVMVoidTypeKind }
}

/// Field types of a struct type.
pub fn struct_fields(ty: LLVMTypeRef) -> Vec<LLVMTypeRef> {
    let n = unsafe { LLVMCountStructElementTypes(ty) };
    (0..n).map(|i| unsafe { LLVMStructGetTypeAtIndex(ty, i) }).collect()
}

pub fn struct_name(ty: LLVMTypeRef) -> String {
    let p = unsafe { LLVMGetStructName(ty) };
    if p.is_null() {
        type_text(ty)
    } else {
        format!("%{}", unsafe { CStr::from_ptr(p) }.to_string_lossy())
    }
}

pub fn is_packed(ty: LLVMTypeRef) -> bool {
    unsafe { LLVMIsPackedStruct(ty) != 0 }
}

impl Val {
    pub fn name(self) -> String {
        let mut len = 0usize;
        // SAFETY: the pointer is valid for `len` bytes while the value lives.
        let p = unsafe { LLVMGetValueName2(self.0, &mut len) };
        if p.is_null() || len == 0 {
            return String::new();
        }
        let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
        String::from_utf8_lossy(bytes).into_owned()
    }

    pub fn ty(self) -> LLVMTypeRef {
        unsafe { LLVMTypeOf(self.0) }
    }

    pub fn as_function(self) -> Option<Val> {
        let f = unsafe { LLVMIsAFunction(self.0) };
        (!f.is_null()).then_some(Val(f))
    }

    pub fn is_argument(self) -> bool {
        unsafe { !LLVMIsAArgument(self.0).is_null() }
    }

    pub fn is_instruction(self) -> bool {
        unsafe { !LLVMIsAInstruction(self.0).is_null() }
    }

    pub fn is_alloca(self) -> bool {
        unsafe { !LLVMIsAAllocaInst(self.0).is_null() }
    }

    /// The value of an integer constant, zero-extended.
    pub fn const_u64(self) -> Option<u64> {
        unsafe {
            if LLVMIsAConstantInt(self.0).is_null() {
                None
            } else {
                Some(LLVMConstIntGetZExtValue(self.0))
            }
        }
    }

    /// The value of an integer constant, sign-extended.
    pub fn const_i64(self) -> Option<i64> {
        unsafe {
            if LLVMIsAConstantInt(self.0).is_null() {
                None
            } else {
                Some(LLVMConstIntGetSExtValue(self.0))
            }
        }
    }

    pub fn opcode(self) -> Option<LLVMOpcode> {
        self.is_instruction().then(|| unsafe { LLVMGetInstructionOpcode(self.0) })
    }

    pub fn operand(self, i: u32) -> Val {
        Val(unsafe { LLVMGetOperand(self.0, i) })
    }

    pub fn num_operands(self) -> u32 {
        unsafe { LLVMGetNumOperands(self.0) as u32 }
    }

    /// Whether this pointer may be computed from one of `bases`: through address arithmetic
    /// (the pointer operand of GEPs, constant expressions included), casts, and every
    /// incoming value of phis and selects.
    pub fn derives_from(self, bases: &[LLVMValueRef]) -> bool {
        let mut seen = std::collections::HashSet::new();
        let mut todo = vec![self.0];
        while let Some(v) = todo.pop() {
            if v.is_null() || !seen.insert(v) {
                continue;
            }
            if bases.contains(&v) {
                return true;
            }
            // SAFETY: values of a live module; only their operands are read.
            unsafe {
                let address = !LLVMIsAGetElementPtrInst(v).is_null()
                    || !LLVMIsACastInst(v).is_null()
                    || !LLVMIsAConstantExpr(v).is_null() && LLVMGetNumOperands(v) > 0;
                if address {
                    todo.push(LLVMGetOperand(v, 0));
                } else if !LLVMIsAPHINode(v).is_null() || !LLVMIsASelectInst(v).is_null() {
                    let first = if LLVMIsASelectInst(v).is_null() { 0 } else { 1 };
                    todo.extend((first..LLVMGetNumOperands(v).max(0) as u32).map(|k| LLVMGetOperand(v, k)));
                }
            }
        }
        false
    }

    /// Instructions that use this value.
    pub fn users(self) -> Vec<Val> {
        let mut out = Vec::new();
        let mut u = unsafe { LLVMGetFirstUse(self.0) };
        while !u.is_null() {
            out.push(Val(unsafe { LLVMGetUser(u) }));
            u = unsafe { LLVMGetNextUse(u) };
        }
        out
    }

    // ---- functions ----

    pub fn is_declaration(self) -> bool {
        unsafe { LLVMIsDeclaration(self.0) != 0 }
    }

    pub fn params(self) -> Vec<Val> {
        let n = unsafe { LLVMCountParams(self.0) };
        (0..n).map(|i| Val(unsafe { LLVMGetParam(self.0, i) })).collect()
    }

    pub fn return_type(self) -> LLVMTypeRef {
        unsafe { LLVMGetReturnType(LLVMGlobalGetValueType(self.0)) }
    }

    /// All instructions of a function, block by block.
    pub fn instructions(self) -> Vec<Val> {
        let mut out = Vec::new();
        let mut bb = unsafe { LLVMGetFirstBasicBlock(self.0) };
        while !bb.is_null() {
            let mut inst = unsafe { LLVMGetFirstInstruction(bb) };
            while !inst.is_null() {
                out.push(Val(inst));
                inst = unsafe { LLVMGetNextInstruction(inst) };
            }
            bb = unsafe { LLVMGetNextBasicBlock(bb) };
        }
        out
    }

    /// Where a function is defined, from its `DISubprogram` (line only).
    pub fn function_loc(self) -> Option<SrcLoc> {
        let sp = unsafe { LLVMGetSubprogram(self.0) };
        if sp.is_null() {
            return None;
        }
        let line = unsafe { LLVMDISubprogramGetLine(sp) };
        Some(SrcLoc { file: scope_file(sp)?, line, column: 0 })
    }

    // ---- instructions ----

    pub fn parent_function(self) -> Val {
        Val(unsafe { LLVMGetBasicBlockParent(LLVMGetInstructionParent(self.0)) })
    }

    /// The location of an instruction, from its `!dbg` attachment.
    ///
    /// Code inlined from the compiler's own headers (CUDA's `atomicAdd`, `expf`...) is reported
    /// where the user's code called it: the first place along the `inlinedAt` chain that is
    /// not a system header.
    pub fn loc(self) -> Option<SrcLoc> {
        let mut dl = unsafe { LLVMInstructionGetDebugLoc(self.0) };
        let mut first = None;
        while !dl.is_null() {
            let line = unsafe { LLVMDILocationGetLine(dl) };
            let column = unsafe { LLVMDILocationGetColumn(dl) };
            let scope = unsafe { LLVMDILocationGetScope(dl) };
            let here = scope_file(scope).map(|file| SrcLoc { file, line, column });
            match here {
                Some(l) if !crate::loc::is_system_header(&l.file) => return Some(l),
                Some(l) if first.is_none() => first = Some(l),
                _ => {}
            }
            dl = unsafe { LLVMDILocationGetInlinedAt(dl) };
        }
        first
    }

    /// Whether the instruction's code comes from a file named `name` (anywhere along its
    /// `inlinedAt` chain).
    pub fn comes_from(self, name: &str) -> bool {
        let mut dl = unsafe { LLVMInstructionGetDebugLoc(self.0) };
        while !dl.is_null() {
            let file = scope_file(unsafe { LLVMDILocationGetScope(dl) });
            if file.is_some_and(|f| std::path::Path::new(&f).file_name().is_some_and(|n| n == name)) {
                return true;
            }
            dl = unsafe { LLVMDILocationGetInlinedAt(dl) };
        }
        false
    }

    /// For an instruction that inlining put here: the call site it was inlined from, in the
    /// function it now belongs to (the outermost `inlinedAt`); `None` if it was not inlined.
    pub fn inlined_at(self) -> Option<SrcLoc> {
        let dl = unsafe { LLVMInstructionGetDebugLoc(self.0) };
        if dl.is_null() {
            return None;
        }
        let mut at = unsafe { LLVMDILocationGetInlinedAt(dl) };
        if at.is_null() {
            return None;
        }
        loop {
            let next = unsafe { LLVMDILocationGetInlinedAt(at) };
            if next.is_null() {
                break;
            }
            at = next;
        }
        let line = unsafe { LLVMDILocationGetLine(at) };
        let column = unsafe { LLVMDILocationGetColumn(at) };
        let scope = unsafe { LLVMDILocationGetScope(at) };
        Some(SrcLoc { file: scope_file(scope)?, line, column })
    }

    /// For a call: the function called directly, if any.
    pub fn called_function(self) -> Option<Val> {
        if unsafe { LLVMIsACallInst(self.0).is_null() } {
            return None;
        }
        Val(unsafe { LLVMGetCalledValue(self.0) }).as_function()
    }

    pub fn is_call(self) -> bool {
        unsafe { !LLVMIsACallInst(self.0).is_null() }
    }

    /// The argument operands of a call.
    pub fn call_args(self) -> Vec<Val> {
        let n = unsafe { LLVMGetNumArgOperands(self.0) };
        (0..n).map(|i| self.operand(i)).collect()
    }

    /// For a load from a local slot (an `alloca`), the value last stored there when that store
    /// is the nearest earlier instruction of the load's block that may write memory: the value
    /// the load reads. At -O0 a parameter whose address is taken (a C++ lambda capturing it by
    /// reference) stays in its slot, and uses of it are such loads.
    pub fn slot_value(self) -> Option<Val> {
        if self.opcode() != Some(LLVMOpcode::LLVMLoad) {
            return None;
        }
        let slot = self.operand(0);
        if !slot.is_alloca() {
            return None;
        }
        let mut i = unsafe { LLVMGetPreviousInstruction(self.0) };
        while !i.is_null() {
            let inst = Val(i);
            match inst.opcode() {
                Some(LLVMOpcode::LLVMStore) => {
                    let to = inst.operand(1);
                    if to == slot {
                        return Some(inst.operand(0));
                    }
                    // Another slot is other memory; anything else might be this one.
                    if !to.is_alloca() {
                        return None;
                    }
                }
                Some(LLVMOpcode::LLVMCall) => {
                    // Only calls that write no memory of the program's.
                    let name = inst.called_function().map(|f| f.name()).unwrap_or_default();
                    if !(name.starts_with("llvm.dbg.") || name.starts_with("__hpvm__")) {
                        return None;
                    }
                }
                Some(LLVMOpcode::LLVMInvoke | LLVMOpcode::LLVMAtomicRMW | LLVMOpcode::LLVMAtomicCmpXchg) => {
                    return None
                }
                _ => {}
            }
            i = unsafe { LLVMGetPreviousInstruction(i) };
        }
        None
    }

    pub fn allocated_type(self) -> LLVMTypeRef {
        unsafe { LLVMGetAllocatedType(self.0) }
    }

    /// The type a GEP with constant indices points to (`&s.field` -> the field's type).
    pub fn gep_result_type(self) -> Option<LLVMTypeRef> {
        let mut ty = self.gep_source_type()?;
        // Operand 0 is the base, operand 1 steps over whole objects; the rest go inside.
        for i in 2..self.num_operands() {
            ty = unsafe {
                match LLVMGetTypeKind(ty) {
                    LLVMTypeKind::LLVMStructTypeKind => {
                        LLVMStructGetTypeAtIndex(ty, self.operand(i).const_u64()? as u32)
                    }
                    LLVMTypeKind::LLVMArrayTypeKind => LLVMGetElementType(ty),
                    _ => return None,
                }
            };
        }
        Some(ty)
    }

    pub fn gep_source_type(self) -> Option<LLVMTypeRef> {
        unsafe {
            if LLVMIsAGetElementPtrInst(self.0).is_null() {
                None
            } else {
                Some(LLVMGetGEPSourceElementType(self.0))
            }
        }
    }

    pub fn is_conditional_branch(self) -> bool {
        self.opcode() == Some(LLVMOpcode::LLVMBr) && unsafe { LLVMIsConditional(self.0) != 0 }
    }
}

fn scope_file(scope: LLVMMetadataRef) -> Option<String> {
    let file = unsafe { LLVMDIScopeGetFile(scope) };
    if file.is_null() {
        return None;
    }
    let mut len = 0u32;
    let p = unsafe { LLVMDIFileGetFilename(file, &mut len) };
    if p.is_null() {
        return None;
    }
    let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, len as usize) };
    Some(String::from_utf8_lossy(bytes).into_owned())
}

/// A short name for an opcode, for messages ("load", "store", "call").
pub fn opcode_name(op: LLVMOpcode) -> String {
    let s = format!("{op:?}");
    s.strip_prefix("LLVM").unwrap_or(&s).to_lowercase()
}

/// The parameter of `f` a pointer is computed from by GEPs and casts, and by choices between
/// such pointers (`up = y > 0 ? row - w : row`: phis and selects whose every way comes from
/// the same parameter).
///
/// # Safety
/// `f` must be a live function and `ptr` a value of it.
pub unsafe fn pointer_param(f: LLVMValueRef, ptr: LLVMValueRef) -> Option<u32> {
    let mut base = None;
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![ptr];
    while let Some(v) = stack.pop() {
        // A pointer loop (`p = p + 1`) comes back to a phi already followed.
        if !seen.insert(v) {
            continue;
        }
        if !LLVMIsAArgument(v).is_null() {
            let p = (0..LLVMCountParams(f)).find(|&i| LLVMGetParam(f, i) == v)?;
            if base.replace(p).is_some_and(|b| b != p) {
                return None;
            }
            continue;
        }
        let is_gep = !LLVMIsAGetElementPtrInst(v).is_null()
            || (!LLVMIsAConstantExpr(v).is_null() && LLVMGetConstOpcode(v) == LLVMOpcode::LLVMGetElementPtr);
        let is_cast = !LLVMIsABitCastInst(v).is_null() || !LLVMIsAAddrSpaceCastInst(v).is_null();
        if is_gep || is_cast {
            stack.push(LLVMGetOperand(v, 0));
        } else if !LLVMIsAPHINode(v).is_null() {
            (0..LLVMCountIncoming(v)).for_each(|k| stack.push(LLVMGetIncomingValue(v, k)));
        } else if !LLVMIsASelectInst(v).is_null() {
            stack.extend([LLVMGetOperand(v, 1), LLVMGetOperand(v, 2)]);
        } else {
            return None;
        }
    }
    base
}
