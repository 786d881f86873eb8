//! Constructors: functions an executable runs before `main` (`llvm.global_ctors`), with which
//! compiled code registers itself with the runtime.

use inkwell::module::{Linkage, Module};
use inkwell::values::{AsValueRef, FunctionValue, StructValue};
use inkwell::AddressSpace;

/// Appends `f` to the module's `llvm.global_ctors`, keeping the constructors already there.
pub fn add_constructor<'ctx>(m: &Module<'ctx>, f: FunctionValue<'ctx>) {
    let ctx = m.get_context();
    let ptr = ctx.ptr_type(AddressSpace::default());
    let entry_ty = ctx.struct_type(&[ctx.i32_type().into(), ptr.into(), ptr.into()], false);
    let mut entries = Vec::new();
    if let Some(old) = m.get_global("llvm.global_ctors") {
        if let Some(init) = old.get_initializer() {
            let array = init.into_array_value();
            for i in 0..array.get_type().len() {
                // SAFETY: operand `i` of a constant array of `n` constant structs.
                entries.push(unsafe { StructValue::new(llvm_sys::core::LLVMGetOperand(array.as_value_ref(), i)) });
            }
        }
        // SAFETY: the global is replaced below and nothing else refers to it.
        unsafe { old.delete() };
    }
    entries.push(entry_ty.const_named_struct(&[
        ctx.i32_type().const_int(65535, false).into(),
        f.as_global_value().as_pointer_value().into(),
        ptr.const_null().into(),
    ]));
    let array = entry_ty.const_array(&entries);
    let g = m.add_global(array.get_type(), None, "llvm.global_ctors");
    g.set_linkage(Linkage::Appending);
    g.set_initializer(&array);
}

/// Moves the module's constructors and destructors (`llvm.global_ctors`/`llvm.global_dtors`)
/// into `.init_array`/`.fini_array` entries of their own, as the object's last step.
///
/// Why: a target machine made through LLVM's C API emits them into the legacy `.ctors` and
/// `.dtors` sections (`TargetOptions::UseInitArray` is false there, and the C API cannot set
/// it). GNU ld folds those into `.init_array`; LLVM's linker ignores them, and a program it
/// links starts without its constructors (no kernel registered: "invalid device function").
/// An entry keeps its priority as the section's suffix, which both linkers sort by. An
/// entry's COMDAT key is dropped: C++ guards every initializer a COMDAT may repeat.
pub fn to_init_arrays(m: &Module<'_>) {
    for (list, section) in [("llvm.global_ctors", ".init_array"), ("llvm.global_dtors", ".fini_array")] {
        let Some(old) = m.get_global(list) else { continue };
        let mut entries = Vec::new();
        if let Some(init) = old.get_initializer() {
            if init.is_array_value() {
                let array = init.into_array_value();
                for i in 0..array.get_type().len() {
                    // SAFETY: operand `i` of a constant array of `n` constant structs.
                    let entry = unsafe { llvm_sys::core::LLVMGetOperand(array.as_value_ref(), i) };
                    // SAFETY: operands 0 and 1 of a `{ i32, ptr, ptr }` constant.
                    let (priority, function) =
                        unsafe { (llvm_sys::core::LLVMGetOperand(entry, 0), llvm_sys::core::LLVMGetOperand(entry, 1)) };
                    // SAFETY: a constant integer.
                    let priority = unsafe { llvm_sys::core::LLVMConstIntGetZExtValue(priority) };
                    entries.push((priority, function));
                }
            }
        }
        // SAFETY: nothing refers to the list (LLVM reads it by name only).
        unsafe { old.delete() };
        let ctx = m.get_context();
        let ptr = ctx.ptr_type(AddressSpace::default());
        for (i, (priority, function)) in entries.into_iter().enumerate() {
            // SAFETY: a null function entry is LLVM's "none"; anything else is a pointer constant.
            if unsafe { llvm_sys::core::LLVMIsNull(function) } != 0 {
                continue;
            }
            let g = m.add_global(ptr, None, &format!("__hpvm{section}.{i}"));
            g.set_linkage(Linkage::Private);
            g.set_constant(true);
            // SAFETY: `function` is a pointer constant of this module.
            g.set_initializer(&unsafe { inkwell::values::PointerValue::new(function) });
            g.set_section(Some(&if priority >= 65535 {
                section.to_string()
            } else {
                format!("{section}.{priority:05}")
            }));
            g.set_alignment(8);
        }
    }
}
