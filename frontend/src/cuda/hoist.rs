//! Values a kernel loads from `__constant__` memory at fixed places become its parameters.
//!
//! A kernel that reads its buffers through pointers kept in a `__constant__` struct
//! (`arrays.out[i] = 2 * arrays.in[i]`) hides them from the analysis: a pointer loaded from
//! memory could point anywhere, so the kernel runs whole on one device. But device code cannot
//! write constant memory: during a launch, what the kernel loads there is what the host's
//! shadow of the variable held when the kernel was launched (`cudaMemcpyToSymbol` is ordered
//! with launches). So each scalar the leaf loads from a constant variable at a constant offset
//! (a pointer, an integer, a float) becomes a parameter of the leaf, which the launcher reads
//! from the shadow at the launch ([`super::device::Param::from_symbol`]). A pointer so hoisted
//! is a buffer argument like any other: the analysis maps its accesses and the kernel splits
//! where they are proven.
//!
//! Invariants:
//! - only loads from `__constant__` variables (the GPU's constant space, which device code
//!   never writes), at offsets known at compile time, of one scalar, neither volatile nor
//!   atomic; any other use of the variable keeps its buffer parameter, as before;
//! - hoisted parameters follow the kernel's own in the leaf's front (each pointer with its
//!   extent), before the device variables: [`super::device::buffer_params`] and
//!   [`super::device::front_len`] count them as kernel parameters.

use super::device::{is_pointer, Param};
use crate::{Error, Result};
use hpvm_core::Val;
use inkwell::module::Module;
use inkwell::values::{AsValueRef, BasicValueEnum, FunctionValue, GlobalValue};
use llvm_sys::core::*;
use llvm_sys::debuginfo::*;
use llvm_sys::prelude::*;
use llvm_sys::target::{LLVMABISizeOfType, LLVMOffsetOfElement, LLVMTargetDataRef};
use llvm_sys::{LLVMAtomicOrdering, LLVMOpcode, LLVMTypeKind};

/// The GPU's constant address space.
pub(super) const CONSTANT_SPACE: u32 = 4;

/// More than this many values hoisted from one kernel's constants: the rest stay loads.
const MOST: usize = 32;

/// One value hoisted: where it was loaded from and the loads it replaces.
struct Hoisted {
    /// Index in the leaf's variables.
    var: usize,
    offset: u64,
    ty: LLVMTypeRef,
    loads: Vec<LLVMValueRef>,
}

/// The constant byte offset of the address `v` from `base`, through getelementptrs with
/// constant indices; `None` where it is not one.
unsafe fn offset_from(td: LLVMTargetDataRef, v: LLVMValueRef, base: LLVMValueRef) -> Option<u64> {
    if v == base {
        return Some(0);
    }
    let val = Val(v);
    if val.opcode() != Some(LLVMOpcode::LLVMGetElementPtr) && LLVMIsAConstantExpr(v).is_null() {
        return None;
    }
    if !LLVMIsAConstantExpr(v).is_null() && LLVMGetConstOpcode(v) != LLVMOpcode::LLVMGetElementPtr {
        return None;
    }
    let mut ty = LLVMGetGEPSourceElementType(v);
    let below = offset_from(td, LLVMGetOperand(v, 0), base)?;
    let mut offset = below as i128;
    for i in 1..LLVMGetNumOperands(v) as u32 {
        let index = Val(LLVMGetOperand(v, i)).const_i64()? as i128;
        if i == 1 {
            offset += index * LLVMABISizeOfType(td, ty) as i128;
            continue;
        }
        match LLVMGetTypeKind(ty) {
            LLVMTypeKind::LLVMStructTypeKind => {
                offset += LLVMOffsetOfElement(td, ty, index as u32) as i128;
                ty = LLVMStructGetTypeAtIndex(ty, index as u32);
            }
            LLVMTypeKind::LLVMArrayTypeKind => {
                ty = LLVMGetElementType(ty);
                offset += index * LLVMABISizeOfType(td, ty) as i128;
            }
            _ => return None,
        }
    }
    u64::try_from(offset).ok()
}

/// Whether a load of type `ty` may be hoisted: one scalar (a pointer in the generic space, an
/// integer of at most 64 bits, a float or a double).
unsafe fn scalar(ty: LLVMTypeRef) -> bool {
    match LLVMGetTypeKind(ty) {
        LLVMTypeKind::LLVMPointerTypeKind => LLVMGetPointerAddressSpace(ty) == 0,
        LLVMTypeKind::LLVMIntegerTypeKind => LLVMGetIntTypeWidth(ty) <= 64,
        LLVMTypeKind::LLVMFloatTypeKind | LLVMTypeKind::LLVMDoubleTypeKind => true,
        _ => false,
    }
}

/// Every load of the leaf from constant variable `var` (its parameter `param`) at a constant
/// offset, grouped by offset and type into `out`.
unsafe fn find_loads(td: LLVMTargetDataRef, var: usize, param: LLVMValueRef, out: &mut Vec<Hoisted>) {
    let mut work = vec![param];
    let mut seen = Vec::new();
    while let Some(v) = work.pop() {
        if seen.contains(&v) {
            continue;
        }
        seen.push(v);
        for user in Val(v).users() {
            match user.opcode() {
                Some(LLVMOpcode::LLVMGetElementPtr) => work.push(user.0),
                Some(LLVMOpcode::LLVMLoad) if LLVMGetOperand(user.0, 0) == v => {
                    let ty = LLVMTypeOf(user.0);
                    if LLVMGetVolatile(user.0) != 0
                        || LLVMGetOrdering(user.0) != LLVMAtomicOrdering::LLVMAtomicOrderingNotAtomic
                        || !scalar(ty)
                    {
                        continue;
                    }
                    let Some(offset) = offset_from(td, v, param) else { continue };
                    match out.iter().position(|h| h.var == var && h.offset == offset && h.ty == ty) {
                        Some(k) => out[k].loads.push(user.0),
                        None if out.len() < MOST => out.push(Hoisted { var, offset, ty, loads: vec![user.0] }),
                        None => {}
                    }
                }
                _ => {}
            }
        }
    }
}

/// Operand `i` of a metadata node, as metadata (null where it is missing).
unsafe fn md_operand(ctx: LLVMContextRef, md: LLVMMetadataRef, i: usize) -> LLVMMetadataRef {
    let node = LLVMMetadataAsValue(ctx, md);
    let n = LLVMGetMDNodeNumOperands(node) as usize;
    if i >= n {
        return std::ptr::null_mut();
    }
    let mut ops = vec![std::ptr::null_mut(); n];
    LLVMGetMDNodeOperands(node, ops.as_mut_ptr());
    if ops[i].is_null() {
        return std::ptr::null_mut();
    }
    LLVMValueAsMetadata(ops[i])
}

/// The source's name of the place `offset` bytes into the variable `g` (`arrays.out`,
/// `bufs[1]`), from its debug information; `None` where there is none.
unsafe fn source_name(ctx: LLVMContextRef, g: LLVMValueRef, offset: u64) -> Option<String> {
    let dbg = LLVMGetMDKindIDInContext(ctx, c"dbg".as_ptr(), 3);
    let mut count = 0;
    let entries = LLVMGlobalCopyAllMetadata(g, &mut count);
    let mut expr = std::ptr::null_mut();
    for i in 0..count as u32 {
        if LLVMValueMetadataEntriesGetKind(entries, i) == dbg {
            expr = LLVMValueMetadataEntriesGetMetadata(entries, i);
        }
    }
    if !entries.is_null() {
        LLVMDisposeValueMetadataEntries(entries);
    }
    if expr.is_null() {
        return None;
    }
    let var = LLVMDIGlobalVariableExpressionGetVariable(expr);
    if var.is_null() {
        return None;
    }
    let name_md = md_operand(ctx, var, 1);
    if name_md.is_null() {
        return None;
    }
    let mut len = 0;
    let name = LLVMGetMDString(LLVMMetadataAsValue(ctx, name_md), &mut len);
    if name.is_null() {
        return None;
    }
    let len = len as usize;
    let mut out = String::from_utf8_lossy(std::slice::from_raw_parts(name as *const u8, len)).into_owned();
    // DIVariable's operands: scope, name, file, type.
    let mut ty = md_operand(ctx, var, 3);
    let mut bits = offset * 8;
    // At most a few levels: structs in structs, arrays of structs.
    for _ in 0..16 {
        if ty.is_null() {
            break;
        }
        // DIDerivedType and DICompositeType: operand 3 is the base (or element) type, and a
        // composite's operand 4 its elements.
        const TYPEDEF: u16 = 0x16;
        const CONST: u16 = 0x26;
        const VOLATILE: u16 = 0x35;
        const STRUCT: u16 = 0x13;
        const CLASS: u16 = 0x02;
        const UNION: u16 = 0x17;
        const ARRAY: u16 = 0x01;
        const MEMBER: u16 = 0x0d;
        match LLVMGetDINodeTag(ty) {
            TYPEDEF | CONST | VOLATILE => ty = md_operand(ctx, ty, 3),
            STRUCT | CLASS | UNION => {
                let elements = md_operand(ctx, ty, 4);
                if elements.is_null() {
                    break;
                }
                let node = LLVMMetadataAsValue(ctx, elements);
                let n = LLVMGetMDNodeNumOperands(node) as usize;
                let mut ops = vec![std::ptr::null_mut(); n];
                LLVMGetMDNodeOperands(node, ops.as_mut_ptr());
                // Only data members are types with offsets (a class's elements also name its
                // methods).
                let member = ops.iter().filter(|o| !o.is_null()).map(|&o| LLVMValueAsMetadata(o)).find(|&m| {
                    LLVMGetDINodeTag(m) == MEMBER && {
                        let (at, size) = (LLVMDITypeGetOffsetInBits(m), LLVMDITypeGetSizeInBits(m));
                        at <= bits && bits < at + size.max(1)
                    }
                });
                let Some(m) = member else { break };
                let mut len = 0;
                let name = LLVMDITypeGetName(m, &mut len);
                if name.is_null() || len == 0 {
                    break;
                }
                out.push('.');
                out.push_str(&String::from_utf8_lossy(std::slice::from_raw_parts(name as *const u8, len)));
                bits -= LLVMDITypeGetOffsetInBits(m);
                ty = md_operand(ctx, m, 3);
            }
            ARRAY => {
                let mut element = md_operand(ctx, ty, 3);
                while !element.is_null() && [TYPEDEF, CONST, VOLATILE].contains(&LLVMGetDINodeTag(element)) {
                    element = md_operand(ctx, element, 3);
                }
                let size = if element.is_null() { 0 } else { LLVMDITypeGetSizeInBits(element) };
                if size == 0 {
                    break;
                }
                out.push_str(&format!("[{}]", bits / size));
                bits %= size;
                ty = element;
            }
            _ => break,
        }
    }
    (bits == 0).then_some(out)
}

/// Hoists the leaf's loads from constant variables into new parameters (see the module
/// docs): rebuilds the leaf with them after the kernel's parameters (`front` of them), and
/// adds a [`Param`] per value to `params`. `vars` are the leaf's variables and parameters,
/// updated to the new leaf's; `shadow` names a variable's host shadow. Returns the new leaf.
pub(super) fn constant_loads<'ctx>(
    dev: &Module<'ctx>,
    leaf: FunctionValue<'ctx>,
    vars: &mut [(GlobalValue<'ctx>, BasicValueEnum<'ctx>)],
    front: usize,
    params: &mut Vec<Param>,
) -> Result<FunctionValue<'ctx>> {
    let data = inkwell::targets::TargetData::create(&dev.get_data_layout().as_str().to_string_lossy());
    let td = data.as_mut_ptr();
    let mut hoisted = Vec::new();
    for (i, (g, p)) in vars.iter().enumerate() {
        // SAFETY: values of `dev`, alive.
        unsafe {
            if LLVMGetPointerAddressSpace(LLVMTypeOf(g.as_value_ref())) == CONSTANT_SPACE {
                find_loads(td, i, p.as_value_ref(), &mut hoisted);
            }
        }
    }
    if hoisted.is_empty() {
        return Ok(leaf);
    }
    // SAFETY: the leaf and its values live in `dev`; the old leaf is deleted only once its
    // blocks have moved and its parameters have no uses left.
    unsafe {
        let ctx = LLVMGetModuleContext(dev.as_mut_ptr());
        let i64t = LLVMInt64TypeInContext(ctx);
        let old = leaf.as_value_ref();
        let old_params: Vec<LLVMValueRef> = Val(old).params().into_iter().map(|v| v.0).collect();
        let mut types: Vec<LLVMTypeRef> = old_params.iter().map(|&p| LLVMTypeOf(p)).collect();
        let mut names: Vec<String> = old_params.iter().map(|&p| Val(p).name()).collect();
        let mut added = Vec::new();
        let mut names_added = Vec::new();
        for h in &hoisted {
            let g = vars[h.var].0;
            let symbol = Val(g.as_value_ref()).name();
            let name = source_name(ctx, g.as_value_ref(), h.offset).unwrap_or_else(|| {
                let whole = h.offset == 0 && LLVMGlobalGetValueType(g.as_value_ref()) == h.ty;
                if whole {
                    symbol
                } else {
                    format!("{symbol}+{}", h.offset)
                }
            });
            added.push(h.ty);
            names_added.push(name.clone());
            if is_pointer(h.ty) {
                added.push(i64t);
                names_added.push(format!("bytes_{name}"));
            }
            params.push(Param {
                ty: h.ty,
                by_value: false,
                scalars: vec![(Vec::new(), h.ty)],
                from_symbol: Some((Val(g.as_value_ref()).name(), h.offset)),
                blob: false,
            });
        }
        let width = added.len();
        types.splice(front..front, added);
        names.splice(front..front, names_added);
        let symbol = leaf.get_name().to_string_lossy().into_owned();
        leaf.as_global_value().set_name(&format!("{symbol}.unhoisted"));
        let fn_ty = LLVMFunctionType(LLVMVoidTypeInContext(ctx), types.as_mut_ptr(), types.len() as u32, 0);
        let name = std::ffi::CString::new(symbol).map_err(|e| Error::Llvm(e.to_string()))?;
        let new = LLVMAddFunction(dev.as_mut_ptr(), name.as_ptr(), fn_ty);
        LLVMSetLinkage(new, LLVMGetLinkage(old));
        LLVMSetSubprogram(new, LLVMGetSubprogram(old));
        LLVMSetSubprogram(old, std::ptr::null_mut());
        let new_params: Vec<LLVMValueRef> = Val(new).params().into_iter().map(|v| v.0).collect();
        for (p, n) in new_params.iter().zip(&names) {
            LLVMSetValueName2(*p, n.as_ptr() as *const _, n.len());
        }
        while let Some(bb) = std::ptr::NonNull::new(LLVMGetFirstBasicBlock(old)) {
            LLVMRemoveBasicBlockFromParent(bb.as_ptr());
            LLVMAppendExistingBasicBlock(new, bb.as_ptr());
        }
        let moved = |i: usize| if i < front { i } else { i + width };
        for (i, &p) in old_params.iter().enumerate() {
            LLVMReplaceAllUsesWith(p, new_params[moved(i)]);
        }
        let mut at = front;
        for h in &hoisted {
            for &load in &h.loads {
                LLVMReplaceAllUsesWith(load, new_params[at]);
                LLVMInstructionEraseFromParent(load);
            }
            at += if is_pointer(h.ty) { 2 } else { 1 };
        }
        for (_, p) in vars.iter_mut() {
            let i = old_params.iter().position(|&q| q == p.as_value_ref()).expect("a parameter of the leaf");
            *p = BasicValueEnum::new(new_params[moved(i)]);
        }
        LLVMDeleteFunction(old);
        Ok(FunctionValue::new(new).expect("a function"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inkwell::context::Context;
    use inkwell::memory_buffer::MemoryBuffer;

    /// Offsets through struct fields, array elements and a first index, as the host's layout
    /// gives them; a variable index or a load through another pointer is no constant place.
    #[test]
    fn constant_places_are_offsets_through_getelementptrs() {
        let ir = r#"
            target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
            %S = type { ptr, ptr, i32, [4 x double] }
            define void @f(ptr %s, i64 %k) {
              %out = getelementptr inbounds %S, ptr %s, i32 0, i32 1
              %n = getelementptr inbounds %S, ptr %s, i64 0, i32 2
              %d2 = getelementptr inbounds %S, ptr %s, i64 0, i32 3, i64 2
              %next = getelementptr inbounds %S, ptr %s, i64 1
              %bytes = getelementptr inbounds i8, ptr %next, i64 4
              %var = getelementptr inbounds %S, ptr %s, i64 0, i32 3, i64 %k
              %p = load ptr, ptr %s
              %through = getelementptr inbounds i8, ptr %p, i64 8
              ret void
            }
        "#;
        let ctx = Context::create();
        let m = ctx.create_module_from_ir(MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "t")).unwrap();
        let f = m.get_function("f").unwrap();
        let data = inkwell::targets::TargetData::create(&m.get_data_layout().as_str().to_string_lossy());
        let s = f.get_nth_param(0).unwrap().as_value_ref();
        let at = |name: &str| {
            let inst = Val(f.as_value_ref()).instructions().into_iter().find(|i| i.name() == name).unwrap();
            // SAFETY: values of the module parsed above.
            unsafe { offset_from(data.as_mut_ptr(), inst.0, s) }
        };
        assert_eq!(at("out"), Some(8));
        assert_eq!(at("n"), Some(16));
        assert_eq!(at("d2"), Some(24 + 16));
        assert_eq!(at("next"), Some(56));
        assert_eq!(at("bytes"), Some(60));
        assert_eq!(at("var"), None);
        assert_eq!(at("through"), None);
    }
}
