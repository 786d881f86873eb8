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
