//! Loosening the thread tests that guard only reads. A tiled kernel stages its tile's halo in
//! shared memory, one thread per edge:
//! `if (threadIdx.x == 0 && x > 0) tile[ty][0] = in[y * w + x - 1];`. After cropping
//! ([`crate::crop`]) such a branch only reads. Each of these tests splits the domains of
//! everything after it by thread, and four halo sides with a border test took Polly past its
//! limit of disjuncts: it dismissed the whole kernel ("Low complexity assumption"), which then
//! ran whole.
//!
//! Which threads of a block read an element does not matter to the partitioning, only which
//! elements the block reads. So such a test, `thread == c`, is made to hold for every thread,
//! and under it the thread's counter is replaced by `c`: every thread reads what thread `c`
//! reads, and the block reads exactly what it did. Where a value under the test depends on the
//! thread through something other than arithmetic (a value merged from two ways), it stays
//! each thread's own: the block then reads a superset, and its loads are marked so.
//!
//! Invariants:
//! - only a branch whose guarded way reads and does nothing else (no buffer store, no
//!   atomic, no call but debug and lifetime markers) before it meets the other way, which goes
//!   straight to where they meet, is loosened, and only where that way is entered from the
//!   branch alone: no access is lost and no write is added;
//! - the arithmetic outside the way that its values use is copied into it with the counter
//!   replaced, never changed in place (other uses keep it);
//! - loads whose addresses may still vary by thread are marked `hpvm.loosened`, so their reads
//!   are reported as over-approximated (never exact, never checked against the buffer's end);
//! - it is tried only where Polly dismissed the node with its tests as written (`lib.rs`).

use crate::crop::{hoistable, predecessors};
use llvm_sys::core::*;
use llvm_sys::prelude::*;
use llvm_sys::LLVMIntPredicate;
use llvm_sys::LLVMOpcode;
use std::collections::{HashMap, HashSet};

/// Most blocks a loosened way may span (a halo load is one or two).
const MOST_BLOCKS: usize = 64;

/// Loosens `f`'s tests of the thread counters `threads` (the instance loops' phis) against
/// constants where they guard only reads; the number loosened.
///
/// # Safety
/// `f` is a function of a live module, every value of `threads` one of its instructions.
pub unsafe fn thread_tests(f: LLVMValueRef, threads: &[LLVMValueRef]) -> usize {
    if threads.is_empty() {
        return 0;
    }
    let ctx = LLVMGetTypeContext(LLVMTypeOf(f));
    let kind = LLVMGetMDKindIDInContext(ctx, c"hpvm.loosened".as_ptr(), "hpvm.loosened".len() as u32);
    let mark = LLVMMetadataAsValue(ctx, LLVMMDNodeInContext2(ctx, std::ptr::null_mut(), 0));
    let builder = LLVMCreateBuilderInContext(ctx);
    let mut loosened = 0;
    let mut bb = LLVMGetFirstBasicBlock(f);
    while !bb.is_null() {
        let term = LLVMGetBasicBlockTerminator(bb);
        let here = bb;
        bb = LLVMGetNextBasicBlock(bb);
        if term.is_null() || LLVMGetInstructionOpcode(term) != LLVMOpcode::LLVMBr || LLVMIsConditional(term) == 0 {
            continue;
        }
        let Some(test) = thread_test(LLVMGetCondition(term), threads) else { continue };
        // The way taken where the thread is the one tested, and the other.
        let (guarded, other) = if test.equal {
            (LLVMGetSuccessor(term, 0), LLVMGetSuccessor(term, 1))
        } else {
            (LLVMGetSuccessor(term, 1), LLVMGetSuccessor(term, 0))
        };
        let Some(way) = reads_only_until(guarded, other) else { continue };
        if !entered_only_from(&way, guarded, here) {
            continue;
        }
        let at = LLVMGetFirstInstruction(guarded);
        if at.is_null() || LLVMGetInstructionOpcode(at) == LLVMOpcode::LLVMPHI {
            continue;
        }
        let one = LLVMConstInt(LLVMTypeOf(test.counter), test.value as u64, 1);
        let mut s =
            Substitution { counter: test.counter, one, memo: HashMap::new(), depends: HashMap::new(), opaque: false };
        let mut rewrites = Vec::new();
        let mut ok = true;
        for &b in &way.blocks {
            let mut i = LLVMGetFirstInstruction(b);
            while !i.is_null() && ok {
                for k in 0..LLVMGetNumOperands(i) as u32 {
                    let op = LLVMGetOperand(i, k);
                    let outside =
                        !LLVMIsAInstruction(op).is_null() && !way.blocks.contains(&LLVMGetInstructionParent(op));
                    if (op == test.counter || outside) && s.depends(op) {
                        rewrites.push((i, k, op));
                    }
                }
                i = LLVMGetNextInstruction(i);
            }
        }
        // Copies first (they may fail: a load or call between the counter and an address),
        // then the operands, so that nothing changes where the way cannot be rewritten.
        let mut replaced = Vec::with_capacity(rewrites.len());
        for &(i, k, op) in &rewrites {
            match s.value(builder, at, op) {
                Some(v) => replaced.push((i, k, v)),
                None => {
                    ok = false;
                    break;
                }
            }
        }
        if !ok {
            continue;
        }
        for (i, k, v) in replaced {
            LLVMSetOperand(i, k, v);
        }
        LLVMSetCondition(term, LLVMConstInt(LLVMInt1TypeInContext(ctx), u64::from(test.equal), 0));
        if s.opaque {
            for &load in &way.loads {
                LLVMSetMetadata(load, kind, mark);
            }
        }
        loosened += 1;
    }
    LLVMDisposeBuilder(builder);
    loosened
}

/// A test of a thread counter against a constant.
struct Test {
    counter: LLVMValueRef,
    value: i64,
    /// `==` (else `!=`).
    equal: bool,
}

/// `c` is `counter == value` or `counter != value`, `counter` one of `threads` (through
/// extensions and truncations).
unsafe fn thread_test(c: LLVMValueRef, threads: &[LLVMValueRef]) -> Option<Test> {
    if LLVMIsAICmpInst(c).is_null() {
        return None;
    }
    let equal = match LLVMGetICmpPredicate(c) {
        LLVMIntPredicate::LLVMIntEQ => true,
        LLVMIntPredicate::LLVMIntNE => false,
        _ => return None,
    };
    let (a, b) = (LLVMGetOperand(c, 0), LLVMGetOperand(c, 1));
    let (counter, constant) = match (strip_casts(a), strip_casts(b)) {
        (x, _) if threads.contains(&x) && !LLVMIsAConstantInt(b).is_null() => (x, b),
        (_, y) if threads.contains(&y) && !LLVMIsAConstantInt(a).is_null() => (y, a),
        _ => return None,
    };
    let value = LLVMConstIntGetSExtValue(constant);
    // A truncated counter equals the constant where the counter does: block sizes are far
    // below any width it is truncated to, and they are never negative.
    (value >= 0).then_some(Test { counter, value, equal })
}

/// Replacing the thread counter by one value in copies of what depends on it.
struct Substitution {
    counter: LLVMValueRef,
    one: LLVMValueRef,
    memo: HashMap<LLVMValueRef, LLVMValueRef>,
    depends: HashMap<LLVMValueRef, bool>,
    /// A value depending on the thread through a phi was met, and left as it is.
    opaque: bool,
}

impl Substitution {
    /// Whether `v` depends on the counter through arithmetic (a phi that depends on it counts
    /// as not, and is noted as [`Substitution::opaque`]).
    unsafe fn depends(&mut self, v: LLVMValueRef) -> bool {
        if v == self.counter {
            return true;
        }
        if LLVMIsAInstruction(v).is_null() {
            return false;
        }
        if let Some(&d) = self.depends.get(&v) {
            return d;
        }
        self.depends.insert(v, false);
        let through = (0..LLVMGetNumOperands(v) as u32).any(|k| self.depends(LLVMGetOperand(v, k)));
        // A phi is not copied: where it depends on the counter it stays each thread's own.
        let d = if LLVMGetInstructionOpcode(v) == LLVMOpcode::LLVMPHI {
            self.opaque |= through;
            false
        } else {
            through
        };
        self.depends.insert(v, d);
        d
    }

    /// `v` with the counter replaced, copies of arithmetic inserted before `at`; `None` where
    /// something other than arithmetic stands between (a load, a call).
    unsafe fn value(&mut self, builder: LLVMBuilderRef, at: LLVMValueRef, v: LLVMValueRef) -> Option<LLVMValueRef> {
        if v == self.counter {
            return Some(self.one);
        }
        if !self.depends(v) {
            return Some(v);
        }
        if let Some(&c) = self.memo.get(&v) {
            return Some(c);
        }
        // Arithmetic that cannot trap or touch memory: a copy computes the same.
        if !hoistable(v) {
            return None;
        }
        let ops: Vec<LLVMValueRef> = (0..LLVMGetNumOperands(v) as u32)
            .map(|k| self.value(builder, at, LLVMGetOperand(v, k)))
            .collect::<Option<_>>()?;
        let copy = LLVMInstructionClone(v);
        LLVMPositionBuilderBefore(builder, at);
        LLVMInsertIntoBuilder(builder, copy);
        for (k, op) in ops.into_iter().enumerate() {
            LLVMSetOperand(copy, k as u32, op);
        }
        self.memo.insert(v, copy);
        Some(copy)
    }
}

unsafe fn strip_casts(mut v: LLVMValueRef) -> LLVMValueRef {
    while !LLVMIsAInstruction(v).is_null()
        && matches!(LLVMGetInstructionOpcode(v), LLVMOpcode::LLVMTrunc | LLVMOpcode::LLVMZExt | LLVMOpcode::LLVMSExt)
    {
        v = LLVMGetOperand(v, 0);
    }
    v
}

/// The blocks of a way and its loads.
struct Way {
    blocks: HashSet<LLVMBasicBlockRef>,
    loads: Vec<LLVMValueRef>,
}

/// Whether every block of `way` is entered only from blocks of it, but `entry`, entered only
/// from `from`.
unsafe fn entered_only_from(way: &Way, entry: LLVMBasicBlockRef, from: LLVMBasicBlockRef) -> bool {
    way.blocks
        .iter()
        .all(|&b| predecessors(b).into_iter().all(|p| if b == entry { p == from } else { way.blocks.contains(&p) }))
}

/// The loads of the blocks reached from `start` before `join`, if they only read: every way
/// from `start` meets `join`, and nothing on them stores (but into the cropping's sinks),
/// updates atomically or calls anything but debug and lifetime markers.
unsafe fn reads_only_until(start: LLVMBasicBlockRef, join: LLVMBasicBlockRef) -> Option<Way> {
    if start == join {
        return None;
    }
    let mut seen: HashSet<LLVMBasicBlockRef> = HashSet::new();
    let mut work = vec![start];
    let mut loads = Vec::new();
    while let Some(bb) = work.pop() {
        if bb == join || !seen.insert(bb) {
            continue;
        }
        if seen.len() > MOST_BLOCKS {
            return None;
        }
        let mut i = LLVMGetFirstInstruction(bb);
        while !i.is_null() {
            match LLVMGetInstructionOpcode(i) {
                LLVMOpcode::LLVMLoad => loads.push(i),
                LLVMOpcode::LLVMStore if is_sink(LLVMGetOperand(i, 1)) => {}
                LLVMOpcode::LLVMStore
                | LLVMOpcode::LLVMAtomicRMW
                | LLVMOpcode::LLVMAtomicCmpXchg
                | LLVMOpcode::LLVMFence
                | LLVMOpcode::LLVMRet
                | LLVMOpcode::LLVMUnreachable
                | LLVMOpcode::LLVMSwitch
                | LLVMOpcode::LLVMIndirectBr
                | LLVMOpcode::LLVMInvoke => return None,
                LLVMOpcode::LLVMCall if !is_marker(i) => return None,
                _ => {}
            }
            i = LLVMGetNextInstruction(i);
        }
        let term = LLVMGetBasicBlockTerminator(bb);
        if term.is_null() {
            return None;
        }
        for k in 0..LLVMGetNumSuccessors(term) {
            work.push(LLVMGetSuccessor(term, k));
        }
    }
    Some(Way { blocks: seen, loads })
}

/// A local the cropping stores loaded values into so that Polly keeps their loads.
unsafe fn is_sink(ptr: LLVMValueRef) -> bool {
    if LLVMIsAAllocaInst(ptr).is_null() {
        return false;
    }
    let mut len = 0;
    let name = LLVMGetValueName2(ptr, &mut len);
    std::slice::from_raw_parts(name as *const u8, len).starts_with(b"hpvm.sink")
}

/// A call that neither reads nor writes memory the program sees.
unsafe fn is_marker(call: LLVMValueRef) -> bool {
    let callee = LLVMGetCalledValue(call);
    if callee.is_null() || LLVMIsAFunction(callee).is_null() {
        return false;
    }
    let mut len = 0;
    let name = std::slice::from_raw_parts(LLVMGetValueName2(callee, &mut len) as *const u8, len);
    name.starts_with(b"llvm.dbg.") || name.starts_with(b"llvm.lifetime.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use inkwell::context::Context;
    use inkwell::values::{AnyValue, AsValueRef};

    /// Loosens `@f` of `ir` (thread counter `%iv.t0`) and returns how many tests it loosened
    /// and the function's text afterwards.
    fn loosened(ir: &str) -> (usize, String) {
        let ctx = Context::create();
        let buf = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "t");
        let m = ctx.create_module_from_ir(buf).unwrap();
        let f = m.get_function("f").unwrap();
        let counter = f
            .get_basic_blocks()
            .iter()
            .flat_map(|b| b.get_instructions())
            .find(|i| i.get_name().is_some_and(|n| n.to_bytes() == b"iv.t0"))
            .unwrap();
        // SAFETY: `f` and the counter belong to the live module `m`.
        let n = unsafe { thread_tests(f.as_value_ref(), &[counter.as_value_ref()]) };
        assert!(m.verify().is_ok(), "{}", m.print_to_string());
        (n, f.print_to_string().to_string())
    }

    /// A loop over 16 threads from `boffx`; thread `TEST` (`%t` is `%iv.t0` as i32) runs
    /// `GUARDED` before the paths meet at `join`.
    fn halo(test: &str, guarded: &str) -> String {
        format!(
            "define void @f(ptr %in, ptr %out, i64 %boffx, i64 %n) {{
             entry:
               %hpvm.sink = alloca float
               br label %loop
             loop:
               %iv.t0 = phi i64 [ 0, %entry ], [ %next, %join ]
               %t = trunc i64 %iv.t0 to i32
               %x = add nsw i64 %boffx, %iv.t0
               %c = {test}
               br i1 %c, label %guarded, label %join
             guarded:
               {guarded}
               br label %join
             join:
               %p = getelementptr float, ptr %out, i64 %x
               store float 0.0, ptr %p
               %next = add nuw nsw i64 %iv.t0, 1
               %more = icmp ne i64 %next, 16
               br i1 %more, label %loop, label %exit
             exit:
               ret void
             }}"
        )
    }

    const HALO_LOAD: &str = "%xm = add nsw i64 %x, -1
               %q = getelementptr float, ptr %in, i64 %xm
               %v = load float, ptr %q
               store float %v, ptr %hpvm.sink";

    #[test]
    fn a_thread_test_guarding_a_read_holds_for_every_thread_which_reads_what_that_thread_did() {
        let (n, text) = loosened(&halo("icmp eq i32 %t, 0", HALO_LOAD));
        assert_eq!(n, 1, "{text}");
        assert!(text.contains("br i1 true, label %guarded, label %join"), "{text}");
        // The address is thread 0's: a copy of `x` with the counter replaced; `x` itself (the
        // write's index) is left as it was.
        assert!(text.contains("add nsw i64 %boffx, 0"), "{text}");
        assert!(text.contains("%x = add nsw i64 %boffx, %iv.t0"), "{text}");
        // Exact: no mark of an over-approximation.
        assert!(!text.contains("hpvm.loosened"), "{text}");
    }

    #[test]
    fn a_not_equal_test_loosens_towards_its_false_way() {
        let ir = halo("icmp ne i32 %t, 3", HALO_LOAD)
            .replace("br i1 %c, label %guarded, label %join", "br i1 %c, label %join, label %guarded");
        let (n, text) = loosened(&ir);
        assert_eq!(n, 1, "{text}");
        assert!(text.contains("br i1 false, label %join, label %guarded"), "{text}");
        assert!(text.contains("add nsw i64 %boffx, 3"), "{text}");
    }

    #[test]
    fn ways_that_write_or_call_and_other_tests_stay_as_they_are() {
        for (test, guarded) in [
            // A store into a buffer: a write, which must stay exact.
            ("icmp eq i32 %t, 0", "%q = getelementptr float, ptr %out, i64 0\n store float 1.0, ptr %q"),
            // A call that may do anything.
            ("icmp eq i32 %t, 0", "call void @g()"),
            // Not an equality with a constant.
            ("icmp ult i32 %t, 4", HALO_LOAD),
            ("icmp eq i64 %x, %n", HALO_LOAD),
        ] {
            let ir = format!("declare void @g()\n{}", halo(test, guarded));
            let (n, text) = loosened(&ir);
            assert_eq!(n, 0, "{test} / {guarded}: {text}");
            assert!(text.contains("br i1 %c, label %guarded, label %join"), "{text}");
        }
    }

    #[test]
    fn an_address_through_a_merged_value_keeps_each_threads_own_and_is_marked() {
        // `%x2` merges two ways that depend on the thread: it is not copied, so each thread
        // reads at its own; the read is a superset of the block's, marked as such.
        let ir = halo(
            "icmp eq i32 %t, 0",
            "%q = getelementptr float, ptr %in, i64 %x2
               %v = load float, ptr %q
               store float %v, ptr %hpvm.sink",
        )
        .replace(
            "%c = icmp eq i32 %t, 0",
            "%odd = and i64 %iv.t0, 1
               %isodd = icmp ne i64 %odd, 0
               br i1 %isodd, label %a, label %b
             a:
               br label %m
             b:
               br label %m
             m:
               %x2 = phi i64 [ %x, %a ], [ %boffx, %b ]
               %c = icmp eq i32 %t, 0",
        );
        let (n, text) = loosened(&ir);
        assert_eq!(n, 1, "{text}");
        assert!(text.contains("!hpvm.loosened"), "{text}");
    }
}
