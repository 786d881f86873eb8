//! Leaves that keep pointers in memory: a pointer loaded from memory and used, or a pointer
//! (or its address as an integer) stored into memory.
//!
//! Such a pointer holds an address of the program's address space: what `cudaMalloc`
//! returned, or what the leaf computed from its arguments. A device's copy of a buffer lives
//! at another address, so a leaf run on a device with its arguments translated would follow
//! a host address (stale data, or a fault on a GPU), or leave a device address in memory
//! where the program and the other devices expect the program's. The runtime therefore runs
//! such a leaf on the host's copies, every tracked buffer made current there first and the
//! host their only holder after ([`hpvm_runtime::desc::NodeDesc::indirect`]): slower, never
//! wrong.
//!
//! The test is syntactic and conservative. Locals (allocas) are the leaf's own: pointers kept
//! there hold what the leaf computed from its arguments, unless a block copy filled them
//! from memory.

use hpvm_core::loc;
use hpvm_core::Val;
use llvm_sys::core::*;
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
