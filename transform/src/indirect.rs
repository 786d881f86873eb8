//! Leaves that keep pointers in memory: a pointer loaded from memory and used, or a pointer
//! (or its address as an integer) stored into memory.
//!
//! Such a pointer holds an address of the program's address space: what `cudaMalloc`
//! returned, or what the leaf computed from its arguments. A device's copy of a buffer lives
//! at another address, so a leaf run on a device with its arguments translated would follow
//! a host address (stale data, or a fault on a GPU), or leave a device address in memory
//! where the program and the other devices expect the program's. The runtime therefore runs
//! such a leaf on the host's copies, every tracked buffer made current there first and the
//! host their only holder after ([`contract::desc::NodeDesc::indirect`]): slower, never
//! wrong.
//!
//! The test is syntactic and conservative. Locals (allocas) are the leaf's own: pointers kept
//! there hold what the leaf computed from its arguments, unless a block copy filled them
//! from memory.

use hpvm_core::loc;
use hpvm_core::Val;
use inkwell::values::AsValueRef;
use llvm_sys::core::*;
use llvm_sys::prelude::LLVMValueRef;
use llvm_sys::LLVMOpcode as Op;
use llvm_sys::LLVMTypeKind;
use std::collections::HashSet;

/// Why `f` (or a function it calls) keeps pointers in memory, at which line; `None` when it
/// does not.
pub fn pointers_in_memory(f: Val) -> Option<String> {
    let mut seen = vec![f];
    let mut todo = vec![f];
    while let Some(f) = todo.pop() {
        for inst in f.instructions() {
            if let Some(why) = why(inst) {
                // The software texture fetch (`frontend/src/cuda/textures.h`) reads the
                // texture's description and texels through addresses kept in memory.
                let why = if inst.comes_from("hpvm_textures.h") { "it fetches from a texture object" } else { why };
                return Some(format!("{why} ({})", loc::show(&inst.loc().or_else(|| f.function_loc()))));
            }
            if let Some(callee) = inst.called_function().filter(|c| !c.is_declaration()) {
                if !seen.contains(&callee) {
                    seen.push(callee);
                    todo.push(callee);
                }
            }
        }
    }
    None
}

/// [`pointers_in_memory`] of the leaf named `leaf` as the GPU sees it, every callee inlined
/// and its locals promoted to values: a helper reading the leaf's own variables through a
/// pointer (a lambda capturing by reference reads them through its closure) keeps no pointer
/// in memory once inlined. `None` where that leaves no reason. Run on a copy of the module.
pub fn pointers_in_memory_inlined(module: &inkwell::module::Module<'_>, leaf: &str) -> Option<String> {
    let first = pointers_in_memory(Val(module.get_function(leaf)?.as_value_ref()))?;
    let copy = module.clone();
    let Some(f) = copy.get_function(leaf) else { return Some(first) };
    let ctx = copy.get_context();
    let kind = inkwell::attributes::Attribute::get_named_enum_kind_id;
    let mut todo = vec![Val(f.as_value_ref())];
    let mut seen = todo.clone();
    while let Some(g) = todo.pop() {
        for inst in g.instructions() {
            let Some(callee) = inst.called_function().filter(|c| !c.is_declaration()) else { continue };
            if seen.contains(&callee) {
                continue;
            }
            seen.push(callee);
            todo.push(callee);
            // SAFETY: a function of the copy, which this owns.
            let callee = unsafe { inkwell::values::FunctionValue::new(callee.0) }.expect("a function");
            use inkwell::attributes::AttributeLoc;
            callee.remove_enum_attribute(AttributeLoc::Function, kind("noinline"));
            callee.remove_enum_attribute(AttributeLoc::Function, kind("optnone"));
            callee.add_attribute(AttributeLoc::Function, ctx.create_enum_attribute(kind("alwaysinline"), 0));
        }
    }
    f.remove_enum_attribute(inkwell::attributes::AttributeLoc::Function, kind("optnone"));
    let machine = hpvm_core::toolchain::host_machine().ok()?;
    let options = inkwell::passes::PassBuilderOptions::create();
    if copy
        .run_passes(
            "always-inline,function(sroa,early-cse,instcombine<no-verify-fixpoint>,simplifycfg,sroa)",
            &machine,
            options,
        )
        .is_err()
    {
        return Some(first);
    }
    let inlined = copy.get_function(leaf)?;
    pointers_in_memory(Val(inlined.as_value_ref()))
}

fn why(inst: Val) -> Option<&'static str> {
    match inst.opcode()? {
        Op::LLVMLoad if is_pointer(inst.ty()) && !filled_locally(inst.operand(0)) => {
            Some("it uses a pointer loaded from memory")
        }
        Op::LLVMStore if !is_local(inst.operand(1), 0) => {
            let value = inst.operand(0);
            if is_pointer(value.ty()) {
                Some("it stores a pointer into memory")
            } else if from_pointer(value) {
                Some("it stores a pointer's address into memory")
            } else {
                None
            }
        }
        Op::LLVMAtomicRMW | Op::LLVMAtomicCmpXchg if !is_local(inst.operand(0), 0) => {
            let values = 1..inst.num_operands();
            values.into_iter().any(|i| from_pointer(inst.operand(i))).then_some("it stores a pointer into memory")
        }
        Op::LLVMIntToPtr if loaded(inst.operand(0)) => Some("it uses a pointer loaded from memory as an integer"),
        _ => None,
    }
}

fn is_pointer(ty: llvm_sys::prelude::LLVMTypeRef) -> bool {
    match unsafe { LLVMGetTypeKind(ty) } {
        LLVMTypeKind::LLVMPointerTypeKind => true,
        LLVMTypeKind::LLVMVectorTypeKind => is_pointer(unsafe { LLVMGetElementType(ty) }),
        _ => false,
    }
}

/// Whether the address `v` is within the leaf's locals (every object it may be based on is an
/// alloca).
fn is_local(v: Val, depth: u32) -> bool {
    if depth > 16 {
        return false;
    }
    match v.opcode() {
        Some(Op::LLVMAlloca) => true,
        Some(Op::LLVMGetElementPtr | Op::LLVMBitCast | Op::LLVMAddrSpaceCast) => is_local(v.operand(0), depth + 1),
        Some(Op::LLVMSelect) => is_local(v.operand(1), depth + 1) && is_local(v.operand(2), depth + 1),
        Some(Op::LLVMPHI) => (0..v.num_operands()).all(|i| is_local(v.operand(i), depth + 1)),
        _ => false,
    }
}

/// Whether a load from `address` reads what the leaf itself put there: a local that no block
/// copy (`memcpy`/`memmove`, which may bring pointers from memory) writes.
fn filled_locally(address: Val) -> bool {
    if !is_local(address, 0) {
        return false;
    }
    let mut base = address;
    while matches!(base.opcode(), Some(Op::LLVMGetElementPtr | Op::LLVMBitCast | Op::LLVMAddrSpaceCast)) {
        base = base.operand(0);
    }
    if base.opcode() != Some(Op::LLVMAlloca) {
        // A select or phi of locals: their fills are not followed.
        return false;
    }
    let mut todo = vec![base];
    let mut seen = vec![base];
    while let Some(v) = todo.pop() {
        for u in v.users() {
            match u.opcode() {
                Some(
                    Op::LLVMGetElementPtr | Op::LLVMBitCast | Op::LLVMAddrSpaceCast | Op::LLVMPHI | Op::LLVMSelect,
                ) if !seen.contains(&u) => {
                    seen.push(u);
                    todo.push(u);
                }
                Some(Op::LLVMCall) => {
                    let callee = u.called_function().map(|f| f.name()).unwrap_or_default();
                    if callee.starts_with("llvm.memcpy") || callee.starts_with("llvm.memmove") {
                        return false;
                    }
                }
                _ => {}
            }
        }
    }
    true
}

/// Whether the integer `v` is computed from a pointer's address.
fn from_pointer(v: Val) -> bool {
    integer_source(v, &mut HashSet::new(), &|v| v.opcode() == Some(Op::LLVMPtrToInt))
}

/// Whether the integer `v` is computed from a value loaded from memory other than the leaf's
/// locals.
fn loaded(v: Val) -> bool {
    integer_source(v, &mut HashSet::new(), &|v| v.opcode() == Some(Op::LLVMLoad) && !filled_locally(v.operand(0)))
}

/// Whether integer arithmetic computes `v` from a value that `source` accepts (each value
/// visited once: loops' phis).
fn integer_source(v: Val, seen: &mut HashSet<usize>, source: &dyn Fn(Val) -> bool) -> bool {
    if !seen.insert(v.0 as usize) {
        return false;
    }
    if source(v) {
        return true;
    }
    let operands = match v.opcode() {
        Some(
            Op::LLVMAdd
            | Op::LLVMSub
            | Op::LLVMMul
            | Op::LLVMAnd
            | Op::LLVMOr
            | Op::LLVMXor
            | Op::LLVMShl
            | Op::LLVMLShr
            | Op::LLVMZExt
            | Op::LLVMSExt
            | Op::LLVMTrunc
            | Op::LLVMBitCast,
        ) => 0..2.min(v.num_operands()),
        Some(Op::LLVMSelect) => 1..3,
        Some(Op::LLVMPHI) => 0..v.num_operands(),
        _ => 0..0,
    };
    operands.into_iter().any(|i| integer_source(v.operand(i), seen, source))
}

/// The runtime's translations of an address of the program's address space into the running
/// device's copy of the same byte, and back (`hpvm_runtime::devices::addresses`). Each is the
/// identity on an address no buffer holds, and safe on an address already translated.
pub use contract::symbols::{TO_DEVICE, TO_PROGRAM};

/// Makes a leaf that keeps pointers in memory ([`pointers_in_memory`]) run on any device:
/// memory holds the program's addresses, values in registers the device's. So every pointer
/// loaded from memory (or made from an integer) is translated to the device's address
/// ([`TO_DEVICE`]), and every pointer stored into memory (or turned into an integer) back to
/// the program's ([`TO_PROGRAM`]). `leaf` and every function it calls are rewritten.
///
/// `Err` names what it cannot translate (a vector or aggregate of pointers moved as one
/// value); the leaf then keeps running on the host's copies.
pub fn translate(leaf: Val) -> Result<(), String> {
    let mut functions = vec![leaf];
    let mut todo = vec![leaf];
    while let Some(f) = todo.pop() {
        for inst in f.instructions() {
            if let Some(callee) = inst.called_function().filter(|c| !c.is_declaration()) {
                if !functions.contains(&callee) {
                    functions.push(callee);
                    todo.push(callee);
                }
            }
        }
    }
    // Everything checked before anything changes: a leaf is rewritten whole or not at all.
    let mut sites = Vec::new();
    for &f in &functions {
        for inst in f.instructions() {
            if let Some(site) = site(inst).map_err(|why| format!("{why} ({})", loc::show(&inst.loc())))? {
                sites.push((inst, site));
            }
        }
    }
    if sites.is_empty() {
        return Ok(());
    }
    // SAFETY (all LLVM calls below): `leaf` is a function of a live module; every value is
    // an instruction of it or a function it calls, rewritten through LLVM's own API.
    unsafe {
        let module = LLVMGetGlobalParent(leaf.0);
        let ctx = LLVMGetModuleContext(module);
        let i64t = LLVMInt64TypeInContext(ctx);
        let mut params = [i64t];
        let fn_ty = LLVMFunctionType(i64t, params.as_mut_ptr(), 1, 0);
        let declare = |name: &str| {
            let c = std::ffi::CString::new(name).expect("no NUL");
            let f = LLVMGetNamedFunction(module, c.as_ptr());
            if f.is_null() {
                LLVMAddFunction(module, c.as_ptr(), fn_ty)
            } else {
                f
            }
        };
        let (to_device, to_program) = (declare(TO_DEVICE), declare(TO_PROGRAM));
        let b = LLVMCreateBuilderInContext(ctx);
        // `v` (a pointer or an i64) through `f`, built at the builder's position.
        let through = |v: LLVMValueRef, f: LLVMValueRef| -> LLVMValueRef {
            let ty = LLVMTypeOf(v);
            let as_int = if LLVMGetTypeKind(ty) == LLVMTypeKind::LLVMPointerTypeKind {
                LLVMBuildPtrToInt(b, v, i64t, c"addr".as_ptr())
            } else {
                v
            };
            let mut args = [as_int];
            let r = LLVMBuildCall2(b, fn_ty, f, args.as_mut_ptr(), 1, c"addr.moved".as_ptr());
            if LLVMGetTypeKind(ty) == LLVMTypeKind::LLVMPointerTypeKind {
                LLVMBuildIntToPtr(b, r, ty, c"addr.ptr".as_ptr())
            } else {
                r
            }
        };
        // The result of `inst` through `f`: every earlier use of it sees the moved value.
        let result_through = |inst: LLVMValueRef, f: LLVMValueRef| {
            let users = Val(inst).users();
            LLVMPositionBuilderBefore(b, LLVMGetNextInstruction(inst));
            let moved = through(inst, f);
            for u in users {
                for k in 0..LLVMGetNumOperands(u.0) as u32 {
                    if LLVMGetOperand(u.0, k) == inst {
                        LLVMSetOperand(u.0, k, moved);
                    }
                }
            }
        };
        for (inst, site) in sites {
            let i = inst.0;
            match site {
                Site::Result => result_through(i, to_device),
                Site::IntResult => result_through(i, to_program),
                Site::Operand(k) => {
                    LLVMPositionBuilderBefore(b, i);
                    LLVMSetOperand(i, k, through(LLVMGetOperand(i, k), to_device));
                }
                Site::Stored(k) => {
                    LLVMPositionBuilderBefore(b, i);
                    LLVMSetOperand(i, k, through(LLVMGetOperand(i, k), to_program));
                }
                Site::Exchange { values } => {
                    LLVMPositionBuilderBefore(b, i);
                    for k in values {
                        LLVMSetOperand(i, k, through(LLVMGetOperand(i, k), to_program));
                    }
                    if inst.opcode() == Some(Op::LLVMAtomicRMW) {
                        result_through(i, to_device);
                    } else {
                        // A compare-exchange's old value, where the program reads it.
                        for u in Val(i).users() {
                            if *LLVMGetIndices(u.0) == 0 {
                                result_through(u.0, to_device);
                            }
                        }
                    }
                }
            }
        }
        LLVMDisposeBuilder(b);
    }
    Ok(())
}

/// Where an instruction of a translated leaf meets the program's addresses.
enum Site {
    /// Its result, a pointer read from memory or made from an integer's value, to the device's.
    Result,
    /// Its result, a pointer's address as an integer, to the program's.
    IntResult,
    /// Operand `k`, an integer becoming a pointer, to the device's.
    Operand(u32),
    /// Operand `k`, a pointer stored into memory, to the program's.
    Stored(u32),
    /// An atomic exchange of pointers: the `values` to the program's, the old value read
    /// back to the device's.
    Exchange { values: Vec<u32> },
}

fn site(inst: Val) -> Result<Option<Site>, &'static str> {
    let ty = inst.ty();
    if block_copies_local_pointers(inst) {
        return Err("it copies a local holding pointers into memory as one block");
    }
    Ok(match inst.opcode() {
        Some(Op::LLVMLoad) => match kind_of(ty) {
            Moved::Address => (!filled_locally(inst.operand(0))).then_some(Site::Result),
            Moved::Within => return Err("it loads several pointers as one value"),
            Moved::No => None,
        },
        Some(Op::LLVMStore) => match kind_of(inst.operand(0).ty()) {
            Moved::Address => (!is_local(inst.operand(1), 0)).then_some(Site::Stored(0)),
            Moved::Within => return Err("it stores several pointers as one value"),
            Moved::No => None,
        },
        Some(Op::LLVMPtrToInt) if matches!(kind_of(inst.operand(0).ty()), Moved::Address) => {
            if int_bits(ty) != 64 {
                return Err("it keeps a pointer's address in an integer narrower than 64 bits");
            }
            Some(Site::IntResult)
        }
        Some(Op::LLVMIntToPtr) if matches!(kind_of(ty), Moved::Address) => {
            if int_bits(inst.operand(0).ty()) != 64 {
                return Err("it makes a pointer from an integer narrower than 64 bits");
            }
            Some(Site::Operand(0))
        }
        Some(Op::LLVMAtomicRMW) => match kind_of(inst.operand(1).ty()) {
            Moved::Address => Some(Site::Exchange { values: vec![1] }),
            _ => None,
        },
        Some(Op::LLVMAtomicCmpXchg) => match kind_of(inst.operand(1).ty()) {
            Moved::Address => {
                let only_extracts = inst.users().iter().all(|u| u.opcode() == Some(Op::LLVMExtractValue));
                if !only_extracts {
                    return Err("it compares and exchanges pointers as one value");
                }
                Some(Site::Exchange { values: vec![1, 2] })
            }
            _ => None,
        },
        _ => None,
    })
}

/// Whether `inst` is a block copy (`memcpy`/`memmove`) into memory from a local whose type
/// holds pointers: the leaf's locals hold the device's addresses (stores into them are not
/// translated), which the copy would leave in memory where the program's belong.
fn block_copies_local_pointers(inst: Val) -> bool {
    if inst.opcode() != Some(Op::LLVMCall) {
        return false;
    }
    let callee = inst.called_function().map(|f| f.name()).unwrap_or_default();
    if !callee.starts_with("llvm.memcpy") && !callee.starts_with("llvm.memmove") {
        return false;
    }
    let (dst, src) = (inst.operand(0), inst.operand(1));
    if is_local(dst, 0) || !is_local(src, 0) {
        return false;
    }
    let mut base = src;
    while matches!(base.opcode(), Some(Op::LLVMGetElementPtr | Op::LLVMBitCast | Op::LLVMAddrSpaceCast)) {
        base = base.operand(0);
    }
    // A local of unknown shape (a phi or select of locals) counts as holding pointers.
    base.opcode() != Some(Op::LLVMAlloca) || !matches!(kind_of(base.allocated_type()), Moved::No)
}

/// How a value of type `ty` carries addresses of the program's buffers.
enum Moved {
    /// It is one (a generic or global pointer).
    Address,
    /// It holds several, or one within a vector or aggregate.
    Within,
    No,
}

fn kind_of(ty: llvm_sys::prelude::LLVMTypeRef) -> Moved {
    use LLVMTypeKind::*;
    // SAFETY: type queries on a live type.
    unsafe {
        match LLVMGetTypeKind(ty) {
            // Shared, constant and local memory are each device's own: their pointers are
            // never the program's buffers.
            LLVMPointerTypeKind => match LLVMGetPointerAddressSpace(ty) {
                0 | 1 => Moved::Address,
                _ => Moved::No,
            },
            LLVMVectorTypeKind | LLVMArrayTypeKind => match kind_of(LLVMGetElementType(ty)) {
                Moved::No => Moved::No,
                _ => Moved::Within,
            },
            LLVMStructTypeKind => {
                let n = LLVMCountStructElementTypes(ty);
                let has = (0..n).any(|i| !matches!(kind_of(LLVMStructGetTypeAtIndex(ty, i)), Moved::No));
                if has {
                    Moved::Within
                } else {
                    Moved::No
                }
            }
            _ => Moved::No,
        }
    }
}

fn int_bits(ty: llvm_sys::prelude::LLVMTypeRef) -> u32 {
    // SAFETY: a type query on a live type.
    unsafe {
        if LLVMGetTypeKind(ty) == LLVMTypeKind::LLVMIntegerTypeKind {
            LLVMGetIntTypeWidth(ty)
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inkwell::context::Context;
    use inkwell::memory_buffer::MemoryBuffer;
    use inkwell::values::{AnyValue, AsValueRef};

    fn translated(ir: &str) -> Result<String, String> {
        let ctx = Context::create();
        let buf = MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "leaf");
        let m = ctx.create_module_from_ir(buf).expect("valid IR");
        let f = m.get_function("leaf").expect("a leaf");
        translate(Val(f.as_value_ref()))?;
        m.verify().map_err(|e| e.to_string())?;
        Ok(m.get_function("leaf").unwrap().print_to_string().to_string())
    }

    #[test]
    fn memory_holds_the_programs_addresses_registers_the_devices() {
        let got = translated(
            r#"
define void @leaf(ptr %table, ptr %out, ptr %slot) {
  %local = alloca ptr
  store ptr %out, ptr %local
  %again = load ptr, ptr %local
  %p = load ptr, ptr %table
  %v = load float, ptr %p
  store float %v, ptr %again
  store ptr %out, ptr %slot
  %i = ptrtoint ptr %out to i64
  %q = inttoptr i64 %i to ptr
  store float %v, ptr %q
  ret void
}"#,
        )
        .unwrap();
        let expected = r#"
define void @leaf(ptr %table, ptr %out, ptr %slot) {
  %local = alloca ptr, align 8
  store ptr %out, ptr %local, align 8
  %again = load ptr, ptr %local, align 8
  %p = load ptr, ptr %table, align 8
  %addr = ptrtoint ptr %p to i64
  %addr.moved = call i64 @hpvm_rt_to_device_address(i64 %addr)
  %addr.ptr = inttoptr i64 %addr.moved to ptr
  %v = load float, ptr %addr.ptr, align 4
  store float %v, ptr %again, align 4
  %addr1 = ptrtoint ptr %out to i64
  %addr.moved2 = call i64 @hpvm_rt_to_program_address(i64 %addr1)
  %addr.ptr3 = inttoptr i64 %addr.moved2 to ptr
  store ptr %addr.ptr3, ptr %slot, align 8
  %i = ptrtoint ptr %out to i64
  %addr.moved4 = call i64 @hpvm_rt_to_program_address(i64 %i)
  %addr.moved5 = call i64 @hpvm_rt_to_device_address(i64 %addr.moved4)
  %q = inttoptr i64 %addr.moved5 to ptr
  store float %v, ptr %q, align 4
  ret void
}
"#;
        assert_eq!(got, expected.trim_start(), "got:\n{got}");
    }

    #[test]
    fn locals_of_pointers_copied_into_memory_are_refused() {
        let why = translated(
            r#"
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
define void @leaf(ptr %table, ptr %out) {
  %pair = alloca { ptr, ptr }
  store ptr %out, ptr %pair
  call void @llvm.memcpy.p0.p0.i64(ptr %table, ptr %pair, i64 16, i1 false)
  ret void
}"#,
        )
        .unwrap_err();
        assert!(why.starts_with("it copies a local holding pointers into memory"), "{why}");
        // A local of plain data may be copied.
        translated(
            r#"
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
define void @leaf(ptr %table, ptr %out) {
  %pair = alloca { i64, float }
  %p = load ptr, ptr %table
  call void @llvm.memcpy.p0.p0.i64(ptr %p, ptr %pair, i64 16, i1 false)
  ret void
}"#,
        )
        .unwrap();
    }

    #[test]
    fn pointers_moved_together_are_refused() {
        let why = translated(
            r#"
define void @leaf(ptr %table, ptr %out) {
  %pair = load { ptr, i32 }, ptr %table
  store { ptr, i32 } %pair, ptr %out
  ret void
}"#,
        )
        .unwrap_err();
        assert!(why.starts_with("it loads several pointers as one value"), "{why}");
    }
}
