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
//! - Atomic updates become a load and a store of the same element (what they access), each
//!   recorded ([`Atomic`]) with how it combines: an argument updated only by combining atomics
//!   whose old values go unused is a reduction, which devices can run on private copies and
//!   combine after; any other atomic (an exchange, a compare-and-swap) keeps the node whole
//!   and its writes from being merged.
//! - The two ways of an `if`/`else` that both store to the same element store once, after
//!   they meet ([`merge_twin_stores`]): what differs between the ways was the stored value,
//!   which is poison now, so the element is written whatever the (data-dependent) condition,
//!   an exact write where each way alone would be a may-write.
//!
//! Nothing that computes an address or a guard of an access is changed.

use inkwell::values::{AsValueRef, FunctionValue};
use llvm_sys::core::*;
use llvm_sys::prelude::*;
use llvm_sys::LLVMOpcode;

/// What cropping found that the classification needs.
#[derive(Debug, Default)]
pub struct Cropped {
    /// Atomic updates, in the function's order.
    pub atomics: Vec<Atomic>,
    /// Parameters (not shared memory) that plain loads or stores access: an argument among
    /// them is no reduction, whatever its atomics.
    pub plain: Vec<u32>,
    /// The cropped function fails LLVM's verifier (a bug of the cropping): its node must
    /// not be analysed.
    pub broken: bool,
    /// Loads were split on clamps ([`split_selected_addresses`]).
    pub split: bool,
    /// Thread tests loosened where they guard only reads ([`crate::loosen`]).
    pub loosened: usize,
    /// Where the blocks of a launch may talk to each other through memory (`file:line`): a
    /// volatile or atomic load or store outside shared memory, a fence, inline assembly. Atomics are in
    /// [`Self::atomics`]. A node with none can have its writes merged
    /// (`dashdb::WriteKind::Merged`).
    pub communicates: Vec<String>,
}

/// One atomic update found by [`crop`].
#[derive(Debug)]
pub struct Atomic {
    /// The wrapper parameter the address is based on, if known.
    pub base: Option<u32>,
    pub location: String,
    /// How it combines with the other updates, or why it does not (for people: "an atomic
    /// exchange", "its old value is used").
    pub combines: Result<dashdb::Reduction, &'static str>,
}

/// Crops `f` in place. `shared` are the indices of `f`'s parameters that point to shared
/// (per-block scratch) memory; `split_clamps` unfolds clamped addresses into branches.
pub fn crop(f: FunctionValue<'_>, shared: &[u32], split_clamps: bool) -> Cropped {
    let f = f.as_value_ref();
    let mut out = Cropped::default();
    // SAFETY: every instruction touched belongs to `f`, which the caller owns; uses are
    // replaced before anything is erased.
    unsafe {
        see_through_aggregates(f);
        // Compare-and-swap loops that are atomic updates are recorded as those updates.
        crate::cas::to_rmw(f);
        let builder = LLVMCreateBuilderInContext(LLVMGetTypeContext(LLVMTypeOf(f)));
        let mut sinks: Vec<(LLVMTypeRef, LLVMValueRef)> = Vec::new();
        for inst in instructions(f) {
            let op = LLVMGetInstructionOpcode(inst);
            if communicates(f, inst, op, shared) {
                out.communicates.push(location(inst));
            }
            match op {
                LLVMOpcode::LLVMStore => {
                    let ptr = LLVMGetOperand(inst, 1);
                    match base_param(f, ptr) {
                        Some(p) if shared.contains(&p) => LLVMInstructionEraseFromParent(inst),
                        Some(p) => {
                            out.plain.push(p);
                            let v = LLVMGetOperand(inst, 0);
                            LLVMSetOperand(inst, 0, LLVMGetPoison(LLVMTypeOf(v)));
                        }
                        None => {}
                    }
                }
                LLVMOpcode::LLVMLoad => {
                    let ptr = LLVMGetOperand(inst, 0);
                    if let Some(p) = base_param(f, ptr).filter(|p| !shared.contains(p)) {
                        out.plain.push(p);
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
                    let combines = unused(inst).and_then(|()| rmw_reduction(LLVMGetAtomicRMWBinOp(inst), ty));
                    out.atomics.push(Atomic { base: base_param(f, ptr), location: location(inst), combines });
                    load_and_store(builder, inst, ptr, ty);
                }
                LLVMOpcode::LLVMAtomicCmpXchg => {
                    // `atomicCAS`, and the loops built on it (an `atomicAdd` on `double` for old
                    // GPUs, a `float` maximum): what it writes depends on the value it finds,
                    // so its blocks talk through the element. Recorded, it keeps the node
                    // whole; unrecorded, its writes were merged across devices and each
                    // device's updates of an element lost the others' (HeCBench scatter).
                    let ptr = LLVMGetOperand(inst, 0);
                    let expected = LLVMGetOperand(inst, 1);
                    let ty = LLVMTypeOf(expected);
                    out.atomics.push(Atomic {
                        base: base_param(f, ptr),
                        location: location(inst),
                        combines: Err("a compare-and-swap writes what the value it finds decides"),
                    });
                    LLVMPositionBuilderBefore(builder, inst);
                    let old = LLVMBuildLoad2(builder, ty, ptr, c"atomic.old".as_ptr());
                    LLVMBuildStore(builder, LLVMGetPoison(ty), ptr);
                    // The pair it returns: the value found, and whether it was the one
                    // expected (data-dependent, as the loop around it is).
                    let swapped =
                        LLVMBuildICmp(builder, llvm_sys::LLVMIntPredicate::LLVMIntEQ, old, expected, c"".as_ptr());
                    let pair = LLVMBuildInsertValue(builder, LLVMGetPoison(LLVMTypeOf(inst)), old, 0, c"".as_ptr());
                    let pair = LLVMBuildInsertValue(builder, pair, swapped, 1, c"".as_ptr());
                    LLVMReplaceAllUsesWith(inst, pair);
                    LLVMInstructionEraseFromParent(inst);
                }
                LLVMOpcode::LLVMCall => {
                    let name = callee_name(inst);
                    // hint, attributes, return, barrier: declarations and ordering, no addresses.
                    if name.starts_with("__hpvm__") && !name.starts_with("__hpvm__atomic_") {
                        LLVMInstructionEraseFromParent(inst);
                    } else if let Some(op) = name.strip_prefix("__hpvm__atomic_") {
                        let ptr = LLVMGetOperand(inst, 0);
                        // The value operand's type is the element's (cmpxchg: the last one).
                        let n = LLVMGetNumArgOperands(inst);
                        let ty = LLVMTypeOf(LLVMGetOperand(inst, n - 1));
                        let combines = unused(inst).and_then(|()| hpvm_reduction(op));
                        out.atomics.push(Atomic { base: base_param(f, ptr), location: location(inst), combines });
                        load_and_store(builder, inst, ptr, ty);
                    } else if TIMERS.contains(&name.as_str()) {
                        // A clock read (`clock()`, `clock64()`, `%globaltimer`) addresses
                        // nothing, but as a call with effects Polly refuses it, and a kernel
                        // that spins on the clock (`while (clock() - start < n)`) before
                        // writing its own element ran whole. A call that touches no memory
                        // stands in for it, made after LLVM's passes have run (nothing merges
                        // or hoists it): its value stays unknown, so a loop or an address
                        // that depends on it stays data-dependent.
                        let stand_in = timer_stand_in(f, LLVMTypeOf(inst));
                        LLVMPositionBuilderBefore(builder, inst);
                        let ty = LLVMGlobalGetValueType(stand_in);
                        let call = LLVMBuildCall2(builder, ty, stand_in, std::ptr::null_mut(), 0, c"".as_ptr());
                        LLVMReplaceAllUsesWith(inst, call);
                        LLVMInstructionEraseFromParent(inst);
                    } else if let Some(arg) = floating_stand_in(inst, &name) {
                        // A math call that a guard still needs (`s > 0 ? x / s : 0` after
                        // `s = sqrtf(...)`): Polly refuses calls that may set errno, and would
                        // dismiss the node. Its value is a float, which no affine expression
                        // can use, so its argument stands in for it: the guard stays just as
                        // non-affine (data-dependent), without the call.
                        LLVMReplaceAllUsesWith(inst, arg);
                        LLVMInstructionEraseFromParent(inst);
                    }
                }
                _ => {}
            }
        }
        LLVMDisposeBuilder(builder);
        let settle = || loop {
            let dead = delete_dead(f, shared);
            let twins = merge_twin_stores(f);
            let folded = fold_empty_diamonds(f);
            if !dead && !twins && !folded {
                break;
            }
        };
        settle();
        if split_clamps && split_selected_addresses(f, shared) {
            out.split = true;
            settle();
        }
        // Cropping rewrites control flow; a function it broke must not reach Polly.
        out.broken = llvm_sys::analysis::LLVMVerifyFunction(
            f,
            llvm_sys::analysis::LLVMVerifierFailureAction::LLVMReturnStatusAction,
        ) != 0;
    }
    out
}

/// Whether `inst` may carry values between blocks within a launch: a volatile or atomic load or
/// store outside shared memory (a flag another block spins on), a fence (`__threadfence`), inline
/// assembly (what it does is not seen).
///
/// # Safety
/// `inst` must be a live instruction of `f`.
unsafe fn communicates(f: LLVMValueRef, inst: LLVMValueRef, op: LLVMOpcode, shared: &[u32]) -> bool {
    match op {
        // Volatile, and atomic (`cuda::atomic_ref`'s loads and stores, `__nv_atomic_load_n`):
        // a flag one block sets and another reads.
        LLVMOpcode::LLVMLoad | LLVMOpcode::LLVMStore
            if LLVMGetVolatile(inst) != 0
                || LLVMGetOrdering(inst) != llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingNotAtomic =>
        {
            let ptr = LLVMGetOperand(inst, u32::from(op == LLVMOpcode::LLVMStore));
            !base_param(f, ptr).is_some_and(|p| shared.contains(&p))
        }
        LLVMOpcode::LLVMFence => true,
        LLVMOpcode::LLVMCall => !LLVMIsAInlineAsm(LLVMGetCalledValue(inst)).is_null(),
        _ => false,
    }
}

/// Values taken out of aggregates they were just put into become the values themselves.
/// Thrust wraps every pointer in layers of structs (`device_ptr`, `normal_iterator`,
/// `device_reference`), and after SROA an address reaches its store through chains of
/// `insertvalue` into `poison` and `extractvalue`, which neither Polly nor
/// [`hpvm_core::pointer_param`] follows: every Thrust `fill`, `transform` and `for_each`
/// kernel wrote "through a pointer the analysis cannot trace". An `extractvalue` is replaced
/// only where the element it names was inserted whole (nested extractions' indices composed,
/// insertions elsewhere in the aggregate passed over).
unsafe fn see_through_aggregates(f: LLVMValueRef) {
    let indices = |v: LLVMValueRef| -> Vec<u32> {
        let n = LLVMGetNumIndices(v) as usize;
        let p = LLVMGetIndices(v);
        if n == 0 || p.is_null() {
            return Vec::new();
        }
        std::slice::from_raw_parts(p, n).to_vec()
    };
    let is = |v: LLVMValueRef, op: LLVMOpcode| !LLVMIsAInstruction(v).is_null() && LLVMGetInstructionOpcode(v) == op;
    for e in instructions(f) {
        if !is(e, LLVMOpcode::LLVMExtractValue) {
            continue;
        }
        let mut agg = LLVMGetOperand(e, 0);
        let mut path = indices(e);
        let found = loop {
            if is(agg, LLVMOpcode::LLVMExtractValue) {
                let mut outer = indices(agg);
                outer.extend(&path);
                path = outer;
                agg = LLVMGetOperand(agg, 0);
            } else if is(agg, LLVMOpcode::LLVMInsertValue) {
                let at = indices(agg);
                if at == path {
                    break Some(LLVMGetOperand(agg, 1));
                } else if path.starts_with(&at) {
                    path.drain(..at.len());
                    agg = LLVMGetOperand(agg, 1);
                } else if at.starts_with(&path) {
                    // Part of the aggregate extracted was inserted: no one value.
                    break None;
                } else {
                    agg = LLVMGetOperand(agg, 0);
                }
            } else {
                break None;
            }
        };
        if let Some(v) = found.filter(|&v| LLVMTypeOf(v) == LLVMTypeOf(e)) {
            LLVMReplaceAllUsesWith(e, v);
            LLVMInstructionEraseFromParent(e);
        }
    }
}

/// The most selects one load's address may be split on: each doubles its copies.
const MAX_SPLIT_SELECTS: usize = 6;

/// Clamped indices (`yy < 0 ? 0 : yy`) are selects inside addresses, which Polly can only
/// over-approximate (and, multiplied by a row length, cannot delinearize at all). A load
/// whose address goes through a select on an affine comparison becomes a branch on that
/// comparison with one load per way, each at an address without the select: the maps are
/// then exact pieces under affine conditions, which is what ISL's piecewise maps express.
/// Only buffer loads (reads) are split; a select on a loaded value is left alone (the read
/// stays over-approximated). True if anything changed.
unsafe fn split_selected_addresses(f: LLVMValueRef, shared: &[u32]) -> bool {
    let mut changed = false;
    // A clamp written as a helper with early returns is one phi of three ways: paired up
    // into nested two-way choices first.
    let mut pairs_left = 256;
    while pairs_left > 0 {
        let Some(phi) = instructions(f).into_iter().find_map(|i| {
            if !is_buffer_load(f, i, shared) {
                return None;
            }
            slice_through_phis(LLVMGetOperand(i, 0)).into_iter().find(|&v| parting_ways(v).is_some())
        }) else {
            break;
        };
        pair_ways(phi);
        changed = true;
        pairs_left -= 1;
    }
    // At -O0 a `?:` is a diamond of empty blocks and a phi: the same choice as a select.
    while let Some(phi) = instructions(f).into_iter().find_map(|i| {
        if !is_buffer_load(f, i, shared) {
            return None;
        }
        slice_through_phis(LLVMGetOperand(i, 0)).into_iter().find(|&v| diamond_choice(v).is_some())
    }) {
        let (head, cond, if_true, if_false, ways) = diamond_choice(phi).expect("found above");
        let builder = LLVMCreateBuilderInContext(LLVMGetTypeContext(LLVMTypeOf(f)));
        // The ways' arithmetic moves before the branch, so both values reach the merge.
        LLVMPositionBuilderBefore(builder, LLVMGetBasicBlockTerminator(head));
        for bb in ways {
            loop {
                let i = LLVMGetFirstInstruction(bb);
                if i == LLVMGetBasicBlockTerminator(bb) {
                    break;
                }
                LLVMInstructionRemoveFromParent(i);
                LLVMInsertIntoBuilder(builder, i);
            }
        }
        let mut at = LLVMGetFirstInstruction(LLVMGetInstructionParent(phi));
        while LLVMGetInstructionOpcode(at) == LLVMOpcode::LLVMPHI {
            at = LLVMGetNextInstruction(at);
        }
        LLVMPositionBuilderBefore(builder, at);
        let select = LLVMBuildSelect(builder, cond, if_true, if_false, c"hpvm.choice".as_ptr());
        LLVMReplaceAllUsesWith(phi, select);
        LLVMInstructionEraseFromParent(phi);
        LLVMDisposeBuilder(builder);
        // The diamond now decides nothing: fold it, so an enclosing `?:` is a diamond too.
        while fold_empty_diamonds(f) {}
        changed = true;
    }
    // `MIN(MAX(v, 0), h - 1)` as a macro computes `MAX(v, 0)` twice, as two diamonds: now two
    // equal selects, which would be split on separately (ways that choose differently for
    // the same value, and twice the copies).
    if changed {
        merge_equal_choices(f);
    }
    let mut given_up: std::collections::HashSet<LLVMValueRef> = std::collections::HashSet::new();
    // Each split replaces one load by two; bound the work whatever the code looks like.
    let mut splits_left = 1024;
    while splits_left > 0 {
        let Some((load, select, dependent)) = instructions(f).into_iter().find_map(|i| {
            if !is_buffer_load(f, i, shared) || given_up.contains(&i) {
                return None;
            }
            let slice = address_slice(LLVMGetOperand(i, 0));
            let selects: Vec<LLVMValueRef> =
                slice.iter().copied().filter(|&v| LLVMGetInstructionOpcode(v) == LLVMOpcode::LLVMSelect).collect();
            if selects.is_empty() {
                return None;
            }
            // The last select of the slice (its order is def before use) that decides on an
            // affine comparison: of nested selects (`v < lo ? lo : v > hi ? hi : v`) the
            // outermost, so a way never combines choices the code cannot make together (both
            // `v < lo` and `v > hi`: feasible only when `hi < lo`, where Polly's in-bounds
            // assumption on that way is false and it dismisses the whole node). Too many
            // selects, or none usable: leave the load as it is.
            let usable = selects.iter().rev().copied().find(|&s| affine_comparison(LLVMGetOperand(s, 0)));
            match usable {
                Some(s) if selects.len() <= MAX_SPLIT_SELECTS => {
                    let dependent = slice.iter().copied().filter(|&v| depends_on(v, s, &slice)).collect::<Vec<_>>();
                    Some((i, s, dependent))
                }
                _ => {
                    given_up.insert(i);
                    None
                }
            }
        }) else {
            break;
        };
        split_load(f, load, select, &dependent);
        changed = true;
        splits_left -= 1;
    }
    changed
}

/// Merges equal arithmetic, comparisons and selects within each block: the later one's uses
/// go to the earlier one, which dominates it. Only what [`hoistable`] admits (no memory, no
/// traps), so merging never changes what the function does.
unsafe fn merge_equal_choices(f: LLVMValueRef) {
    let mut bb = LLVMGetFirstBasicBlock(f);
    while !bb.is_null() {
        let mut seen: Vec<LLVMValueRef> = Vec::new();
        let mut i = LLVMGetFirstInstruction(bb);
        while !i.is_null() {
            let next = LLVMGetNextInstruction(i);
            if hoistable(i) && LLVMGetInstructionOpcode(i) != LLVMOpcode::LLVMGetElementPtr {
                match seen.iter().copied().find(|&e| same_operation(e, i)) {
                    Some(e) => {
                        LLVMReplaceAllUsesWith(i, e);
                        LLVMInstructionEraseFromParent(i);
                    }
                    None => seen.push(i),
                }
            }
            i = next;
        }
        bb = LLVMGetNextBasicBlock(bb);
    }
}

/// Whether two instructions compute the same value: same opcode, type, comparison
/// predicate, wrap flags and operands.
unsafe fn same_operation(a: LLVMValueRef, b: LLVMValueRef) -> bool {
    LLVMGetNumOperands(a) == LLVMGetNumOperands(b)
        && (0..LLVMGetNumOperands(a)).all(|k| LLVMGetOperand(a, k as u32) == LLVMGetOperand(b, k as u32))
        && same_kind(a, b)
}

/// Whether two instructions apply the same operation (operands aside): opcode, type,
/// comparison predicate, wrap and exactness flags, a GEP's element type and `inbounds`.
unsafe fn same_kind(a: LLVMValueRef, b: LLVMValueRef) -> bool {
    let op = LLVMGetInstructionOpcode(a);
    if op != LLVMGetInstructionOpcode(b) || LLVMTypeOf(a) != LLVMTypeOf(b) {
        return false;
    }
    match op {
        LLVMOpcode::LLVMICmp => LLVMGetICmpPredicate(a) == LLVMGetICmpPredicate(b),
        LLVMOpcode::LLVMAdd
        | LLVMOpcode::LLVMSub
        | LLVMOpcode::LLVMMul
        | LLVMOpcode::LLVMShl
        | LLVMOpcode::LLVMTrunc => LLVMGetNSW(a) == LLVMGetNSW(b) && LLVMGetNUW(a) == LLVMGetNUW(b),
        LLVMOpcode::LLVMLShr | LLVMOpcode::LLVMAShr | LLVMOpcode::LLVMUDiv | LLVMOpcode::LLVMSDiv => {
            LLVMGetExact(a) == LLVMGetExact(b)
        }
        LLVMOpcode::LLVMZExt => LLVMGetNNeg(a) == LLVMGetNNeg(b),
        LLVMOpcode::LLVMGetElementPtr => {
            LLVMGetGEPSourceElementType(a) == LLVMGetGEPSourceElementType(b) && LLVMIsInBounds(a) == LLVMIsInBounds(b)
        }
        _ => true,
    }
}

/// The blocks that branch to `bb`.
pub(crate) unsafe fn predecessors(bb: LLVMBasicBlockRef) -> Vec<LLVMBasicBlockRef> {
    let mut out = Vec::new();
    let mut u = LLVMGetFirstUse(LLVMBasicBlockAsValue(bb));
    while !u.is_null() {
        let user = LLVMGetUser(u);
        if !LLVMIsAInstruction(user).is_null() {
            let from = LLVMGetInstructionParent(user);
            if !out.contains(&from) {
                out.push(from);
            }
        }
        u = LLVMGetNextUse(u);
    }
    out
}

/// The block an unconditional branch ends `bb` with goes to.
unsafe fn only_successor(bb: LLVMBasicBlockRef) -> Option<LLVMBasicBlockRef> {
    let term = LLVMGetBasicBlockTerminator(bb);
    (!term.is_null() && LLVMGetInstructionOpcode(term) == LLVMOpcode::LLVMBr && LLVMIsConditional(term) == 0)
        .then(|| LLVMGetSuccessor(term, 0))
}

/// Whether `a` (computed in block `ta` or before it) and `b` (in `tb` or before) are the same
/// address: the same value, or the same pure arithmetic and GEPs of the same values, each
/// way computing its own copy.
unsafe fn same_address(
    a: LLVMValueRef,
    b: LLVMValueRef,
    ta: LLVMBasicBlockRef,
    tb: LLVMBasicBlockRef,
    depth: u32,
) -> bool {
    use LLVMOpcode::*;
    if a == b {
        return true;
    }
    if depth == 0 || LLVMIsAInstruction(a).is_null() || LLVMIsAInstruction(b).is_null() {
        return false;
    }
    if LLVMGetInstructionParent(a) != ta || LLVMGetInstructionParent(b) != tb {
        return false;
    }
    let pure = matches!(
        LLVMGetInstructionOpcode(a),
        LLVMAdd | LLVMSub | LLVMMul | LLVMShl | LLVMAnd | LLVMOr | LLVMTrunc | LLVMZExt | LLVMSExt | LLVMGetElementPtr
    );
    pure && same_kind(a, b)
        && LLVMGetNumOperands(a) == LLVMGetNumOperands(b)
        && (0..LLVMGetNumOperands(a))
            .all(|k| same_address(LLVMGetOperand(a, k as u32), LLVMGetOperand(b, k as u32), ta, tb, depth - 1))
}

/// `v`, computed in block `from` or before it, computed again at the builder's position:
/// what `from` computed is cloned, what comes before `from` is used as it is.
unsafe fn recompute(builder: LLVMBuilderRef, v: LLVMValueRef, from: LLVMBasicBlockRef) -> LLVMValueRef {
    if LLVMIsAInstruction(v).is_null() || LLVMGetInstructionParent(v) != from {
        return v;
    }
    let copy = LLVMInstructionClone(v);
    for k in 0..LLVMGetNumOperands(v) {
        let op = recompute(builder, LLVMGetOperand(v, k as u32), from);
        LLVMSetOperand(copy, k as u32, op);
    }
    LLVMInsertIntoBuilder(builder, copy);
    copy
}

/// Stores of poison to the same address on both ways of a diamond (`if (c) a[i] = x; else
/// a[i] = y;`, after cropping) become one store where the ways meet. The ways must be single
/// blocks entered only from the branch, and the meeting block entered only from them, so
/// everything the branch block sees is seen there too. True if any merged.
unsafe fn merge_twin_stores(f: LLVMValueRef) -> bool {
    let mut changed = false;
    let builder = LLVMCreateBuilderInContext(LLVMGetTypeContext(LLVMTypeOf(f)));
    let mut bb = LLVMGetFirstBasicBlock(f);
    while !bb.is_null() {
        let term = LLVMGetBasicBlockTerminator(bb);
        bb = LLVMGetNextBasicBlock(bb);
        if term.is_null() || LLVMGetInstructionOpcode(term) != LLVMOpcode::LLVMBr || LLVMIsConditional(term) == 0 {
            continue;
        }
        let (t, e) = (LLVMGetSuccessor(term, 0), LLVMGetSuccessor(term, 1));
        let head = LLVMGetInstructionParent(term);
        let (Some(jt), Some(je)) = (only_successor(t), only_successor(e)) else { continue };
        if t == e
            || jt != je
            || predecessors(t) != [head]
            || predecessors(e) != [head]
            || has_phi(t)
            || has_phi(e)
            || !matches!(predecessors(jt).as_slice(), [x, y] if (*x == t && *y == e) || (*x == e && *y == t))
        {
            continue;
        }
        let stores = |b: LLVMBasicBlockRef| -> Vec<LLVMValueRef> {
            let mut out = Vec::new();
            let mut i = LLVMGetFirstInstruction(b);
            while !i.is_null() {
                if LLVMGetInstructionOpcode(i) == LLVMOpcode::LLVMStore
                    && LLVMIsPoison(LLVMGetOperand(i, 0)) != 0
                    && LLVMGetVolatile(i) == 0
                    && LLVMGetOrdering(i) == llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingNotAtomic
                {
                    out.push(i);
                }
                i = LLVMGetNextInstruction(i);
            }
            out
        };
        let mut others = stores(e);
        for st in stores(t) {
            let twin = others.iter().position(|&se| {
                LLVMTypeOf(LLVMGetOperand(se, 0)) == LLVMTypeOf(LLVMGetOperand(st, 0))
                    && same_address(LLVMGetOperand(st, 1), LLVMGetOperand(se, 1), t, e, 32)
            });
            let Some(k) = twin else { continue };
            let se = others.remove(k);
            let mut at = LLVMGetFirstInstruction(jt);
            while LLVMGetInstructionOpcode(at) == LLVMOpcode::LLVMPHI {
                at = LLVMGetNextInstruction(at);
            }
            LLVMPositionBuilderBefore(builder, at);
            let ptr = recompute(builder, LLVMGetOperand(st, 1), t);
            let merged = LLVMBuildStore(builder, LLVMGetOperand(st, 0), ptr);
            LLVMSetAlignment(merged, LLVMGetAlignment(st).min(LLVMGetAlignment(se)));
            // The debug location says which line writes: the first way's.
            llvm_sys::debuginfo::LLVMInstructionSetDebugLoc(
                merged,
                llvm_sys::debuginfo::LLVMInstructionGetDebugLoc(st),
            );
            LLVMInstructionEraseFromParent(st);
            LLVMInstructionEraseFromParent(se);
            changed = true;
        }
    }
    LLVMDisposeBuilder(builder);
    changed
}

/// Whether `i` loads from a buffer (a pointer parameter that is not shared memory).
unsafe fn is_buffer_load(f: LLVMValueRef, i: LLVMValueRef, shared: &[u32]) -> bool {
    LLVMGetInstructionOpcode(i) == LLVMOpcode::LLVMLoad
        && matches!(base_param(f, LLVMGetOperand(i, 0)), Some(p) if !shared.contains(&p))
}

/// The instructions an address is computed from by arithmetic, casts, comparisons, selects
/// and GEPs (not through phis, loads or calls), each after those it uses.
unsafe fn address_slice(addr: LLVMValueRef) -> Vec<LLVMValueRef> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    // Iterative post-order: (value, operands pushed).
    let mut stack = vec![(addr, false)];
    while let Some((v, expanded)) = stack.pop() {
        if !sliceable(v) {
            continue;
        }
        if expanded {
            out.push(v);
            continue;
        }
        if !seen.insert(v) {
            continue;
        }
        stack.push((v, true));
        for k in 0..LLVMGetNumOperands(v) {
            stack.push((LLVMGetOperand(v, k as u32), false));
        }
    }
    out
}

/// Whether [`address_slice`] follows `v`: an instruction it may clone. Copies run where the
/// load is, after the guards: divisions may be cloned too.
unsafe fn sliceable(v: LLVMValueRef) -> bool {
    use LLVMOpcode::*;
    !LLVMIsAInstruction(v).is_null()
        && (hoistable(v) || matches!(LLVMGetInstructionOpcode(v), LLVMSDiv | LLVMUDiv | LLVMSRem | LLVMURem))
}

/// The phis an address is computed from, through the operations [`address_slice`] follows.
unsafe fn slice_through_phis(addr: LLVMValueRef) -> Vec<LLVMValueRef> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![addr];
    while let Some(v) = stack.pop() {
        if LLVMIsAInstruction(v).is_null() || !seen.insert(v) {
            continue;
        }
        if LLVMGetInstructionOpcode(v) == LLVMOpcode::LLVMPHI {
            out.push(v);
        }
        // (Asking `sliceable` of each value, not slicing from each: that was quadratic in the
        // slice, minutes on HeCBench's segsort.)
        if sliceable(v) || LLVMGetInstructionOpcode(v) == LLVMOpcode::LLVMPHI {
            (0..LLVMGetNumOperands(v)).for_each(|k| stack.push(LLVMGetOperand(v, k as u32)));
        }
    }
    out
}

/// A phi that chooses between two values by one conditional branch, each way a straight
/// run of blocks (one predecessor each) holding only arithmetic: `(block, condition, value if
/// true, value if false, the ways' blocks)`, with the branch's block first. At -O0 every `?:` and inlined `min`/`max` is
/// such a diamond (or a triangle, when one way is the branch itself).
unsafe fn diamond_choice(
    phi: LLVMValueRef,
) -> Option<(LLVMBasicBlockRef, LLVMValueRef, LLVMValueRef, LLVMValueRef, Vec<LLVMBasicBlockRef>)> {
    if LLVMGetInstructionOpcode(phi) != LLVMOpcode::LLVMPHI || LLVMCountIncoming(phi) != 2 {
        return None;
    }
    let merge = LLVMGetInstructionParent(phi);
    let mut ways = Vec::new();
    for k in 0..2 {
        let (head, index, path) = way_to(LLVMGetIncomingBlock(phi, k), merge)?;
        ways.push((head, index, path, LLVMGetIncomingValue(phi, k)));
    }
    let (h0, i0, p0, v0) = ways.swap_remove(0);
    let (h1, i1, p1, v1) = ways.swap_remove(0);
    if h0 != h1 || i0 == i1 {
        return None;
    }
    let term = LLVMGetBasicBlockTerminator(h0);
    let (vt, ve) = if i0 == 0 { (v0, v1) } else { (v1, v0) };
    Some((h0, LLVMGetCondition(term), vt, ve, p0.into_iter().chain(p1).collect()))
}

/// Of a phi with more than two incoming ways, two that part at one conditional branch:
/// `(the branch's block, the block entering the phi on its true way, on its false way, the
/// ways' straight blocks)`.
unsafe fn parting_ways(
    phi: LLVMValueRef,
) -> Option<(LLVMBasicBlockRef, LLVMBasicBlockRef, LLVMBasicBlockRef, Vec<LLVMBasicBlockRef>)> {
    if LLVMGetInstructionOpcode(phi) != LLVMOpcode::LLVMPHI || LLVMCountIncoming(phi) <= 2 {
        return None;
    }
    let merge = LLVMGetInstructionParent(phi);
    let ways: Vec<_> = (0..LLVMCountIncoming(phi))
        .map(|k| (LLVMGetIncomingBlock(phi, k), way_to(LLVMGetIncomingBlock(phi, k), merge)))
        .collect();
    for (a, (ba, wa)) in ways.iter().enumerate() {
        for (bb, wb) in &ways[a + 1..] {
            let (Some((ha, ia, pa)), Some((hb, ib, pb))) = (wa, wb) else { continue };
            if ha == hb && ia != ib && ba != bb {
                let (t, e) = if *ia == 0 { (*ba, *bb) } else { (*bb, *ba) };
                return Some((*ha, t, e, pa.iter().chain(pb).copied().collect()));
            }
        }
    }
    None
}

/// Makes the two ways [`parting_ways`] finds for `phi` one: their arithmetic moves to the
/// branch's block, which chooses each phi's value of its merge block by a select on the
/// branch's condition and goes straight to the merge. The same choices, one way fewer.
unsafe fn pair_ways(phi: LLVMValueRef) {
    let (head, t, e, path) = parting_ways(phi).expect("checked by the caller");
    let merge = LLVMGetInstructionParent(phi);
    let term = LLVMGetBasicBlockTerminator(head);
    let cond = LLVMGetCondition(term);
    let builder = LLVMCreateBuilderInContext(LLVMGetTypeContext(LLVMTypeOf(phi)));
    LLVMPositionBuilderBefore(builder, term);
    for &bb in &path {
        loop {
            let i = LLVMGetFirstInstruction(bb);
            if i == LLVMGetBasicBlockTerminator(bb) {
                break;
            }
            LLVMInstructionRemoveFromParent(i);
            LLVMInsertIntoBuilder(builder, i);
        }
    }
    let mut phis = Vec::new();
    let mut p = LLVMGetFirstInstruction(merge);
    while !p.is_null() && LLVMGetInstructionOpcode(p) == LLVMOpcode::LLVMPHI {
        phis.push(p);
        p = LLVMGetNextInstruction(p);
    }
    let from = |p: LLVMValueRef, bb: LLVMBasicBlockRef| {
        (0..LLVMCountIncoming(p)).find(|&k| LLVMGetIncomingBlock(p, k) == bb).map(|k| LLVMGetIncomingValue(p, k))
    };
    let chosen: Vec<LLVMValueRef> = phis
        .iter()
        .map(|&p| {
            let (vt, ve) = (from(p, t).expect("a phi names every way"), from(p, e).expect("a phi names every way"));
            LLVMBuildSelect(builder, cond, vt, ve, c"hpvm.choice".as_ptr())
        })
        .collect();
    LLVMBuildBr(builder, merge);
    LLVMInstructionEraseFromParent(term);
    for (&p, &sel) in phis.iter().zip(&chosen) {
        LLVMPositionBuilderBefore(builder, p);
        let mut values = Vec::new();
        let mut blocks = Vec::new();
        for k in 0..LLVMCountIncoming(p) {
            let bb = LLVMGetIncomingBlock(p, k);
            if bb != t && bb != e {
                values.push(LLVMGetIncomingValue(p, k));
                blocks.push(bb);
            }
        }
        values.push(sel);
        blocks.push(head);
        let q = LLVMBuildPhi(builder, LLVMTypeOf(p), c"hpvm.ways".as_ptr());
        LLVMAddIncoming(q, values.as_mut_ptr(), blocks.as_mut_ptr(), values.len() as u32);
        LLVMReplaceAllUsesWith(p, q);
        LLVMInstructionEraseFromParent(p);
    }
    // The ways' blocks are left with nothing but their branch, and nothing enters them.
    for bb in path {
        if bb != head {
            LLVMDeleteBasicBlock(bb);
        }
    }
    LLVMDisposeBuilder(builder);
}

/// From the block `from` that enters `child`, back to the conditional branch that decides
/// the way: `(its block, which successor, the straight blocks on the way, nearest first)`.
unsafe fn way_to(
    mut from: LLVMBasicBlockRef,
    mut child: LLVMBasicBlockRef,
) -> Option<(LLVMBasicBlockRef, u32, Vec<LLVMBasicBlockRef>)> {
    let mut path = Vec::new();
    for _ in 0..16 {
        let term = LLVMGetBasicBlockTerminator(from);
        if term.is_null() || LLVMGetInstructionOpcode(term) != LLVMOpcode::LLVMBr {
            return None;
        }
        // A branch on a constant (`at + d >= 0 && true`, a helper's test that inlining
        // decided) goes one way only: it is a straight block on that way.
        if let Some(taken) = constant_branch(term) {
            if LLVMGetSuccessor(term, taken) != child {
                return None;
            }
        } else if LLVMIsConditional(term) != 0 {
            let index = (0..2).find(|&i| LLVMGetSuccessor(term, i) == child)?;
            if LLVMGetSuccessor(term, 0) == LLVMGetSuccessor(term, 1) {
                return None;
            }
            path.reverse();
            return Some((from, index, path));
        }
        // A straight block: one way in, nothing but arithmetic that may run early.
        let mut i = LLVMGetFirstInstruction(from);
        while i != term {
            if !hoistable(i) {
                return None;
            }
            i = LLVMGetNextInstruction(i);
        }
        // One way in: a single branch reaches it (what else names a block is no way in, nor
        // is the way a branch on a constant never takes).
        let preds: Vec<LLVMValueRef> = uses_of(LLVMBasicBlockAsValue(from))
            .into_iter()
            .filter(|&u| !LLVMIsATerminatorInst(u).is_null())
            .filter(|&u| constant_branch(u).is_none_or(|taken| LLVMGetSuccessor(u, taken) == from))
            .collect();
        let [pred] = preds[..] else { return None };
        path.push(from);
        child = from;
        from = LLVMGetInstructionParent(pred);
    }
    None
}

/// The successor a conditional branch on a constant always takes.
unsafe fn constant_branch(term: LLVMValueRef) -> Option<u32> {
    if LLVMIsABranchInst(term).is_null() || LLVMIsConditional(term) == 0 {
        return None;
    }
    let c = LLVMGetCondition(term);
    (!LLVMIsAConstantInt(c).is_null()).then(|| if LLVMConstIntGetZExtValue(c) != 0 { 0 } else { 1 })
}

/// Arithmetic that cannot trap or touch memory, so it may be computed before the branch
/// that guarded it.
pub(crate) unsafe fn hoistable(i: LLVMValueRef) -> bool {
    use LLVMOpcode::*;
    matches!(
        LLVMGetInstructionOpcode(i),
        LLVMAdd
            | LLVMSub
            | LLVMMul
            | LLVMShl
            | LLVMLShr
            | LLVMAShr
            | LLVMAnd
            | LLVMOr
            | LLVMXor
            | LLVMTrunc
            | LLVMZExt
            | LLVMSExt
            | LLVMICmp
            | LLVMSelect
            | LLVMGetElementPtr
            | LLVMFreeze
    )
}

/// Whether `v` is `s` or uses it through instructions of `slice`.
unsafe fn depends_on(v: LLVMValueRef, s: LLVMValueRef, slice: &[LLVMValueRef]) -> bool {
    if v == s {
        return true;
    }
    (0..LLVMGetNumOperands(v)).any(|k| {
        let op = LLVMGetOperand(v, k as u32);
        slice.contains(&op) && depends_on(op, s, slice)
    })
}

/// An integer comparison computed without loads or selects (so of instance counters, loop
/// counters and parameters, as far as this can tell; Polly judges affinity itself).
unsafe fn affine_comparison(c: LLVMValueRef) -> bool {
    if LLVMIsAICmpInst(c).is_null() {
        return false;
    }
    let mut stack = vec![c];
    let mut seen = std::collections::HashSet::new();
    while let Some(v) = stack.pop() {
        if LLVMIsAInstruction(v).is_null() || !seen.insert(v) {
            continue;
        }
        match LLVMGetInstructionOpcode(v) {
            // A choice inside the condition (`MIN(MAX(v, 0), h - 1)`: `max < h - 1`) is not
            // affine; splitting on that inner select first makes it so.
            LLVMOpcode::LLVMLoad | LLVMOpcode::LLVMCall => return false,
            LLVMOpcode::LLVMSelect if v != c => return false,
            LLVMOpcode::LLVMPHI => continue,
            _ => (0..LLVMGetNumOperands(v)).for_each(|k| stack.push(LLVMGetOperand(v, k as u32))),
        }
    }
    true
}

/// Replaces `load` by `select`'s condition branching to two copies of it, each computing
/// its address (`dependent`, the slice instructions that use the select, in order) with the
/// select replaced by one of its values. The load's block is split before the load: the
/// load and what follows move to a new block, which both ways enter.
unsafe fn split_load(f: LLVMValueRef, load: LLVMValueRef, select: LLVMValueRef, dependent: &[LLVMValueRef]) {
    let ctx = LLVMGetTypeContext(LLVMTypeOf(f));
    let builder = LLVMCreateBuilderInContext(ctx);
    let block = LLVMGetInstructionParent(load);
    let next = LLVMGetNextBasicBlock(block);
    let tail = if next.is_null() {
        LLVMAppendBasicBlockInContext(ctx, f, c"hpvm.clamp.join".as_ptr())
    } else {
        LLVMInsertBasicBlockInContext(ctx, next, c"hpvm.clamp.join".as_ptr())
    };
    // The terminator moves to `tail`: its successors' phis must name `tail`, which replacing
    // the block's uses does (LLVM updates successor phis with them); branches into `block`
    // are then pointed back at it.
    let entries: Vec<(LLVMValueRef, u32)> = uses_of(LLVMBasicBlockAsValue(block))
        .into_iter()
        .filter(|&u| !LLVMIsATerminatorInst(u).is_null())
        .flat_map(|t| {
            (0..LLVMGetNumSuccessors(t)).filter(move |&i| LLVMGetSuccessor(t, i) == block).map(move |i| (t, i))
        })
        .collect();
    LLVMReplaceAllUsesWith(LLVMBasicBlockAsValue(block), LLVMBasicBlockAsValue(tail));
    for (t, i) in entries {
        LLVMSetSuccessor(t, i, block);
    }
    LLVMPositionBuilderAtEnd(builder, tail);
    let mut i = load;
    while !i.is_null() {
        let after = LLVMGetNextInstruction(i);
        LLVMInstructionRemoveFromParent(i);
        LLVMInsertIntoBuilder(builder, i);
        i = after;
    }
    let ways = [LLVMGetOperand(select, 1), LLVMGetOperand(select, 2)];
    let names = [c"hpvm.clamp.then", c"hpvm.clamp.else"];
    let mut blocks = [std::ptr::null_mut(); 2];
    let stores: Vec<LLVMValueRef> = uses_of(load)
        .into_iter()
        .filter(|&st| LLVMGetInstructionOpcode(st) == LLVMOpcode::LLVMStore && LLVMGetOperand(st, 0) == load)
        .collect();
    for (w, value) in ways.into_iter().enumerate() {
        let bb = LLVMInsertBasicBlockInContext(ctx, tail, names[w].as_ptr());
        blocks[w] = bb;
        LLVMPositionBuilderAtEnd(builder, bb);
        let mut map: Vec<(LLVMValueRef, LLVMValueRef)> = vec![(select, value)];
        for &d in dependent.iter().filter(|&&d| d != select) {
            let c = LLVMInstructionClone(d);
            for k in 0..LLVMGetNumOperands(c) {
                let op = LLVMGetOperand(c, k as u32);
                if let Some(&(_, new)) = map.iter().find(|(old, _)| *old == op) {
                    LLVMSetOperand(c, k as u32, new);
                }
            }
            LLVMInsertIntoBuilder(builder, c);
            map.push((d, c));
        }
        let c = LLVMInstructionClone(load);
        let addr = LLVMGetOperand(load, 0);
        if let Some(&(_, new)) = map.iter().find(|(old, _)| *old == addr) {
            LLVMSetOperand(c, 0, new);
        }
        LLVMInsertIntoBuilder(builder, c);
        // The load's value only feeds its sink (stored values are poison by now).
        for &st in &stores {
            let copy = LLVMBuildStore(builder, c, LLVMGetOperand(st, 1));
            LLVMSetAlignment(copy, LLVMGetAlignment(st));
        }
        LLVMBuildBr(builder, tail);
    }
    LLVMPositionBuilderAtEnd(builder, block);
    LLVMBuildCondBr(builder, LLVMGetOperand(select, 0), blocks[0], blocks[1]);
    for st in stores {
        LLVMInstructionEraseFromParent(st);
    }
    LLVMReplaceAllUsesWith(load, LLVMGetPoison(LLVMTypeOf(load)));
    LLVMInstructionEraseFromParent(load);
    LLVMDisposeBuilder(builder);
}

pub(crate) unsafe fn uses_of(v: LLVMValueRef) -> Vec<LLVMValueRef> {
    let mut out = Vec::new();
    let mut u = LLVMGetFirstUse(v);
    while !u.is_null() {
        out.push(LLVMGetUser(u));
        u = LLVMGetNextUse(u);
    }
    out
}

/// `Ok` when nothing uses `inst`'s value (an atomic's old value).
unsafe fn unused(inst: LLVMValueRef) -> Result<(), &'static str> {
    if LLVMGetFirstUse(inst).is_null() {
        Ok(())
    } else {
        Err("its old value is used")
    }
}

/// How an `atomicrmw` of `op` on values of type `ty` combines.
unsafe fn rmw_reduction(op: llvm_sys::LLVMAtomicRMWBinOp, ty: LLVMTypeRef) -> Result<dashdb::Reduction, &'static str> {
    use dashdb::{ReduceOp, ReduceType};
    use llvm_sys::LLVMAtomicRMWBinOp::*;
    use llvm_sys::LLVMTypeKind::*;
    let (int, float) = match LLVMGetTypeKind(ty) {
        LLVMIntegerTypeKind => (Some(LLVMGetIntTypeWidth(ty)), None),
        LLVMFloatTypeKind => (None, Some(ReduceType::F32)),
        LLVMDoubleTypeKind => (None, Some(ReduceType::F64)),
        _ => (None, None),
    };
    let signed = |w: u32| match w {
        32 => Ok(ReduceType::I32),
        64 => Ok(ReduceType::I64),
        _ => Err("it updates integers of another width than 32 or 64 bits"),
    };
    let unsigned = |w: u32| signed(w).map(|t| if t == ReduceType::I32 { ReduceType::U32 } else { ReduceType::U64 });
    let (op, element) = match (op, int, float) {
        (LLVMAtomicRMWBinOpAdd | LLVMAtomicRMWBinOpSub, Some(w), _) => (ReduceOp::Add, signed(w)?),
        (LLVMAtomicRMWBinOpFAdd | LLVMAtomicRMWBinOpFSub, _, Some(t)) => (ReduceOp::Add, t),
        (LLVMAtomicRMWBinOpMin, Some(w), _) => (ReduceOp::Min, signed(w)?),
        (LLVMAtomicRMWBinOpMax, Some(w), _) => (ReduceOp::Max, signed(w)?),
        (LLVMAtomicRMWBinOpUMin, Some(w), _) => (ReduceOp::Min, unsigned(w)?),
        (LLVMAtomicRMWBinOpUMax, Some(w), _) => (ReduceOp::Max, unsigned(w)?),
        (LLVMAtomicRMWBinOpAnd, Some(w), _) => (ReduceOp::And, unsigned(w)?),
        (LLVMAtomicRMWBinOpOr, Some(w), _) => (ReduceOp::Or, unsigned(w)?),
        (LLVMAtomicRMWBinOpXor, Some(w), _) => (ReduceOp::Xor, unsigned(w)?),
        (LLVMAtomicRMWBinOpXchg, _, _) => return Err("an atomic exchange does not combine"),
        (LLVMAtomicRMWBinOpUIncWrap | LLVMAtomicRMWBinOpUDecWrap, _, _) => {
            return Err("a wrapping increment (`atomicInc`, `atomicDec`) does not combine")
        }
        _ => return Err("this atomic operation does not combine"),
    };
    Ok(dashdb::Reduction { op, element })
}

/// How HPVM-C's `__hpvm__atomic_OP` (on `int`) combines.
fn hpvm_reduction(op: &str) -> Result<dashdb::Reduction, &'static str> {
    use dashdb::{ReduceOp, ReduceType};
    let (op, element) = match op {
        "add" | "sub" => (ReduceOp::Add, ReduceType::I32),
        "min" => (ReduceOp::Min, ReduceType::I32),
        "max" => (ReduceOp::Max, ReduceType::I32),
        "umin" => (ReduceOp::Min, ReduceType::U32),
        "umax" => (ReduceOp::Max, ReduceType::U32),
        "and" => (ReduceOp::And, ReduceType::U32),
        "or" => (ReduceOp::Or, ReduceType::U32),
        "xor" => (ReduceOp::Xor, ReduceType::U32),
        "xchg" => return Err("an atomic exchange does not combine"),
        "cmpxchg" => return Err("an atomic compare-and-swap does not combine"),
        _ => return Err("a wrapping increment or decrement does not combine"),
    };
    Ok(dashdb::Reduction { op, element })
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
    match hpvm_core::loc::of_instruction(inst) {
        Some(l) if l.line > 0 => format!("{}:{}", l.file, l.line),
        _ => "?".into(),
    }
}

/// The parameter of `f` a pointer is computed from (see [`hpvm_core::pointer_param`]).
unsafe fn base_param(f: LLVMValueRef, ptr: LLVMValueRef) -> Option<u32> {
    hpvm_core::pointer_param(f, ptr)
}

/// Calls without effects the cropping may delete when their value is unused.
pub(crate) fn is_pure_call(name: &str) -> bool {
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
    MATH.contains(&name)
        || hpvm_core::libm::is_pure(name)
        || hpvm_core::markers::is_pure_libdevice(name)
        || (name.starts_with("llvm.") && !name.starts_with("llvm.mem"))
}

/// Calls that read a clock: LLVM's cycle counter (CUDA's `clock()` and `clock64()`) and the
/// runtime's `%globaltimer`.
const TIMERS: [&str; 3] = ["llvm.readcyclecounter", "llvm.readsteadycounter", "hpvm_rt_globaltimer"];

/// The declaration that stands in for a clock read of type `ty` in `f`'s module: no
/// arguments, no memory touched (`memory(none)`), so Polly takes it as an unknown value.
unsafe fn timer_stand_in(f: LLVMValueRef, ty: LLVMTypeRef) -> LLVMValueRef {
    let m = LLVMGetGlobalParent(f);
    let ctx = LLVMGetTypeContext(ty);
    let name = format!("hpvm.analysis.clock.i{}\0", LLVMGetIntTypeWidth(ty));
    let existing = LLVMGetNamedFunction(m, name.as_ptr() as *const _);
    if !existing.is_null() {
        return existing;
    }
    let fn_ty = LLVMFunctionType(ty, std::ptr::null_mut(), 0, 0);
    let d = LLVMAddFunction(m, name.as_ptr() as *const _, fn_ty);
    for (attr, value) in [("memory", 0u64), ("nounwind", 0)] {
        let kind = LLVMGetEnumAttributeKindForName(attr.as_ptr() as *const _, attr.len());
        LLVMAddAttributeAtIndex(d, llvm_sys::LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(ctx, kind, value));
    }
    d
}

/// For a call to a pure math function returning a floating-point value: an argument of the
/// same type, to stand in for the call's value.
unsafe fn floating_stand_in(call: LLVMValueRef, name: &str) -> Option<LLVMValueRef> {
    use llvm_sys::LLVMTypeKind::*;
    let ty = LLVMTypeOf(call);
    let floating =
        matches!(LLVMGetTypeKind(ty), LLVMHalfTypeKind | LLVMBFloatTypeKind | LLVMFloatTypeKind | LLVMDoubleTypeKind);
    if !floating || !is_pure_call(name) {
        return None;
    }
    (0..LLVMGetNumArgOperands(call)).map(|k| LLVMGetOperand(call, k)).find(|&a| LLVMTypeOf(a) == ty)
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

#[cfg(test)]
mod tests {
    use super::*;
    use inkwell::context::Context;
    use inkwell::values::AnyValue;

    /// `@f` of `ir` after [`see_through_aggregates`], as text.
    fn seen_through(ir: &str) -> String {
        let ctx = Context::create();
        let buf = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "t");
        let m = ctx.create_module_from_ir(buf).unwrap();
        let f = m.get_function("f").unwrap();
        // SAFETY: `f` belongs to the live module `m`.
        unsafe { see_through_aggregates(f.as_value_ref()) };
        assert!(m.verify().is_ok(), "{}", m.print_to_string());
        f.print_to_string().to_string()
    }

    /// [`crop`] of `@f` of `ir` (no shared parameters), and the function after it, as text.
    fn cropped(ir: &str) -> (Cropped, String) {
        let ctx = Context::create();
        let buf = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "t");
        let m = ctx.create_module_from_ir(buf).unwrap();
        let f = m.get_function("f").unwrap();
        let c = crop(f, &[], false);
        assert!(!c.broken && m.verify().is_ok(), "{}", m.print_to_string());
        (c, f.print_to_string().to_string())
    }

    /// A compare-and-swap that is no loop of an update (a slot claimed: `atomicCAS(&owner[k],
    /// -1, me)`, whose old value says who won) is an atomic that does not combine, so its
    /// node's writes are never merged; it becomes a load and a store of its element, its pair
    /// the value found and whether it was the one expected.
    #[test]
    fn a_compare_and_swap_is_an_atomic_that_does_not_combine() {
        let (c, text) = cropped(
            "define void @f(ptr %owner, ptr %won, i64 %k, i32 %me) {
               %p = getelementptr i32, ptr %owner, i64 %k
               %pair = cmpxchg ptr %p, i32 -1, i32 %me seq_cst seq_cst
               %ok = extractvalue { i32, i1 } %pair, 1
               %w = getelementptr i8, ptr %won, i64 %k
               %flag = zext i1 %ok to i8
               store i8 %flag, ptr %w
               ret void
             }",
        );
        assert_eq!(c.atomics.len(), 1, "{text}");
        assert!(c.atomics[0].combines.is_err(), "{text}");
        assert!(!text.contains("cmpxchg") && text.contains("atomic.old"), "{text}");
    }

    /// Atomic loads and stores outside shared memory (a flag one block publishes and another
    /// reads) are ways for blocks to talk; plain ones are not.
    #[test]
    fn atomic_loads_and_stores_communicate() {
        let (c, _) = cropped(
            "define void @f(ptr %flag, ptr %out) {
               %seen = load atomic i32, ptr %flag acquire, align 4
               store i32 %seen, ptr %out
               ret void
             }",
        );
        assert_eq!(c.communicates.len(), 1);
        let (c, _) = cropped(
            "define void @f(ptr %flag, ptr %out) {
               %seen = load i32, ptr %flag
               store i32 %seen, ptr %out
               ret void
             }",
        );
        assert!(c.communicates.is_empty());
    }

    #[test]
    fn a_pointer_wrapped_in_structs_is_stored_through_as_itself() {
        // Thrust's shape: the address put into nested structs and taken out layer by layer.
        let text = seen_through(
            "%inner = type { ptr }
             %outer = type { %inner, i32 }
             define void @f(ptr %out, i64 %i) {
               %p = getelementptr float, ptr %out, i64 %i
               %a = insertvalue %outer poison, ptr %p, 0, 0
               %b = insertvalue %outer %a, i32 7, 1
               %c = extractvalue %outer %b, 0
               %d = extractvalue %inner %c, 0
               store float 1.0, ptr %d
               ret void
             }",
        );
        assert!(text.contains("store float 1.000000e+00, ptr %p"), "{text}");
    }

    #[test]
    fn an_element_not_inserted_whole_is_left_alone() {
        // `%c` takes the inner struct, into which only its pointer was put: no one value.
        let text = seen_through(
            "%inner = type { ptr, i32 }
             %outer = type { %inner }
             define %inner @f(ptr %p) {
               %a = insertvalue %outer poison, ptr %p, 0, 0
               %c = extractvalue %outer %a, 0
               ret %inner %c
             }",
        );
        assert!(text.contains("%c = extractvalue %outer %a, 0"), "{text}");
    }
}
