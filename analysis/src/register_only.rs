//! Operations that compute on registers only, as the analysis sees them: warp operations
//! (`__shfl_*_sync`, votes, `__reduce_*_sync`...) and inline PTX without memory instructions.
//! The frontend turns each into a function (`hpvm_core::markers::WARP_PREFIX`, `ASM_PREFIX`)
//! whose CPU body there stops the program: inlined into a wrapper, that body is a call Polly
//! cannot see into, and the node ran whole ("a call the analysis cannot see into"), as every
//! kernel using CUB's block reductions did (their warp shuffles are inline PTX, their
//! `cub::Max` on integers `redux.sync`).
//!
//! Such an operation reads and writes no buffer, whatever it computes: its function becomes a
//! declaration that accesses no memory, which Polly takes as it is; its result stays a value
//! the analysis does not know (an address computed from it is data-dependent, never a guess).
//!
//! Math functions are the same kind of operation: libm's (`expf`) and libdevice's that have no
//! libm twin (`__nv_fast_expf` from `__expf`, `__nv_isinff` from `isinf`) stay declarations in
//! the analysis's module, without the attribute that tells Polly they touch no memory, so a
//! kernel whose guard tested `isinf(x)`, or whose value the cropping could not drop, ran whole.
//! [`declare_pure_math`] gives their declarations `memory(none)`.
//!
//! Invariants:
//! - only math functions that take no pointer (`sincosf`, `frexpf` and `modf` store through
//!   one) are declared pure;
//! - only warp operations and inline PTX statements none of whose instructions is a load,
//!   store, atomic, reduction into memory, copy, texture or surface access, prefetch or call
//!   are declared so; any other statement (and any text that does not read as PTX statements)
//!   keeps its body;
//! - this changes the analysis's copy of the module only.

use hpvm_core::markers::{ASM_PREFIX, ASM_TEXT, WARP_PREFIX};
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::module::Module;
use inkwell::values::AsValueRef;

/// Declares the register-only warp and inline PTX functions of `m` as such (see the module's
/// doc); returns how many.
pub fn declare_memory_free(m: &Module<'_>) -> usize {
    let ctx = m.get_context();
    let mut declared = 0;
    for f in m.get_functions() {
        let name = f.get_name().to_bytes();
        if f.count_basic_blocks() == 0 {
            continue;
        }
        if name.starts_with(ASM_PREFIX.as_bytes()) {
            let Some(text) = f.get_string_attribute(AttributeLoc::Function, ASM_TEXT) else { continue };
            if touches_memory(&text.get_string_value().to_string_lossy()) {
                continue;
            }
        } else if !name.starts_with(WARP_PREFIX.as_bytes()) {
            continue;
        }
        // SAFETY: `f` belongs to `m`, which the caller owns; nothing refers to its blocks but
        // their own instructions.
        unsafe { llvm_sys::core::LLVMSetLinkage(f.as_value_ref(), llvm_sys::LLVMLinkage::LLVMExternalLinkage) };
        for bb in f.get_basic_blocks() {
            // SAFETY: as above; the blocks are deleted with their instructions.
            unsafe { bb.delete() }.ok();
        }
        f.remove_enum_attribute(AttributeLoc::Function, Attribute::get_named_enum_kind_id("noinline"));
        // `memory(none)`: the enum attribute `memory` with no location accessed.
        f.add_attribute(
            AttributeLoc::Function,
            ctx.create_enum_attribute(Attribute::get_named_enum_kind_id("memory"), 0),
        );
        for attr in ["nounwind", "willreturn"] {
            f.add_attribute(
                AttributeLoc::Function,
                ctx.create_enum_attribute(Attribute::get_named_enum_kind_id(attr), 0),
            );
        }
        declared += 1;
    }
    declared
}

/// Declares the math functions `m` calls (see the module's doc) as accessing no memory; returns
/// how many.
pub fn declare_pure_math(m: &Module<'_>) -> usize {
    let ctx = m.get_context();
    let mut declared = 0;
    for f in m.get_functions() {
        let name = f.get_name().to_string_lossy();
        // Intrinsics carry their own attributes; a body is code Polly reads for itself.
        if f.count_basic_blocks() > 0 || name.starts_with("llvm.") || !crate::crop::is_pure_call(&name) {
            continue;
        }
        if f.get_type().get_param_types().iter().any(|t| t.is_pointer_type()) {
            continue;
        }
        for (attr, value) in [("memory", 0), ("nounwind", 0), ("willreturn", 0)] {
            f.add_attribute(
                AttributeLoc::Function,
                ctx.create_enum_attribute(Attribute::get_named_enum_kind_id(attr), value),
            );
        }
        declared += 1;
    }
    declared
}

/// Whether the PTX `text` (statements separated by `;`, in braces, with predicates, labels and
/// comments) may access memory.
pub fn touches_memory(text: &str) -> bool {
    const MEMORY: [&str; 21] = [
        "ld",
        "ldu",
        "st",
        "atom",
        "red",
        "cp",
        "prefetch",
        "prefetchu",
        "tex",
        "tld4",
        "txq",
        "suld",
        "sust",
        "sured",
        "suq",
        "mbarrier",
        "wmma",
        "ldmatrix",
        "stmatrix",
        "call",
        "multimem",
    ];
    let no_comments: String = text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join(" ");
    for stmt in no_comments.split(';') {
        let mut words =
            stmt.split_whitespace().map(|w| w.trim_matches(|c| c == '{' || c == '}')).filter(|w| !w.is_empty());
        let mut op = words.next();
        // A predicate guard (`@p`, `@!p`) and a label (`L1:`) come before the operation.
        while let Some(w) = op {
            if w.starts_with('@') || w.ends_with(':') {
                op = words.next();
            } else {
                break;
            }
        }
        let Some(op) = op else { continue };
        // Declarations of registers (`.reg .pred p;`) access nothing.
        if op.starts_with('.') {
            continue;
        }
        let root = op.split('.').next().unwrap_or(op);
        if !root.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || MEMORY.contains(&root) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_only_statements_move_no_memory() {
        for text in [
            "shfl.sync.down.b32 $0, $1, $2, $3, $4;",
            "{ .reg .pred p; shfl.sync.idx.b32 $0|p, $1, $2, $3, $4; @p add.f32 $0, $0, $5; }",
            "mov.u32 $0, %laneid;",
            "vote.ballot.sync.b32 $0, $1, $2;",
            "prmt.b32 $0, $1, $2, $3; // a byte permute",
            "L1: bfe.u32 $0, $1, $2, $3;",
        ] {
            assert!(!touches_memory(text), "{text}");
        }
    }

    #[test]
    fn loads_stores_atomics_and_calls_move_memory() {
        for text in [
            "ld.global.nc.f32 $0, [$1];",
            "{ mov.u32 $0, 1; st.global.cg.u32 [$1], $0; }",
            "@p atom.global.add.u32 $0, [$1], $2;",
            "red.global.add.f32 [$0], $1;",
            "cp.async.ca.shared.global [$0], [$1], 16;",
            "call (retval0), f, (param0);",
            "prefetch.global.L2 [$0];",
            // Not PTX as this reads it: kept.
            "$0 = $1 + $2",
        ] {
            assert!(touches_memory(text), "{text}");
        }
    }
}
