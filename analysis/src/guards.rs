//! Lower bounds that guards prove. In `if (y > 0) out[x] = in[(y - 1) * w + x];` the branch
//! makes `y >= 1` hold wherever the read runs, so the `unsigned` difference `y - 1` cannot wrap
//! around there and widens exactly (`crate::widen`). Guards between two variables give
//! differences: under `if (y < h)`, `h >= y + 1`, so `h - 1 - y` (a flip) cannot wrap either.
//!
//! Invariants:
//! - a fact is recorded for a block only when that block has exactly one predecessor, whose
//!   terminator is a conditional branch reaching it along one edge only: then the branch's
//!   condition (or its negation) holds on every entry to the block;
//! - [`Guards::at`] follows such blocks upwards (each one's single predecessor, and so on), so
//!   a fact holds in every block it is reported for: the chain is a dominator chain;
//! - facts are read before any instruction is rewritten and name only values that are not
//!   extensions or comparisons (an extension is looked through when the fact is recorded),
//!   which the widening never erases.

use crate::crop::uses_of;
use llvm_sys::core::*;
use llvm_sys::prelude::*;
use llvm_sys::LLVMIntPredicate::{self, *};
use llvm_sys::LLVMOpcode;
use std::collections::HashMap;

/// `value >= over + min`, unsigned (`over` absent: `value >= min`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fact {
    pub value: LLVMValueRef,
    pub over: Option<LLVMValueRef>,
    pub min: i128,
}

/// The facts each block's entry edge proves, and each such block's single predecessor.
pub struct Guards {
    entry: HashMap<LLVMBasicBlockRef, (LLVMBasicBlockRef, Vec<Fact>)>,
}

impl Guards {
    /// Reads the guards of function `f`.
    ///
    /// # Safety
    /// `f` must be a live function with a body.
    pub unsafe fn of(f: LLVMValueRef) -> Guards {
        let mut entry = HashMap::new();
        let mut bb = LLVMGetFirstBasicBlock(f);
        while !bb.is_null() {
            let mut preds: Vec<LLVMValueRef> = uses_of(LLVMBasicBlockAsValue(bb))
                .into_iter()
                .filter(|&u| !LLVMIsATerminatorInst(u).is_null())
                .collect();
            preds.dedup();
            if let [br] = preds[..] {
                if !LLVMIsABranchInst(br).is_null() && LLVMIsConditional(br) != 0 {
                    let (t, e) = (LLVMGetSuccessor(br, 0), LLVMGetSuccessor(br, 1));
                    if t != e {
                        let mut facts = Vec::new();
                        implied(LLVMGetCondition(br), t == bb, &mut facts);
                        entry.insert(bb, (LLVMGetInstructionParent(br), facts));
                    }
                }
            }
            bb = LLVMGetNextBasicBlock(bb);
        }
        Guards { entry }
    }

    /// Every fact that holds on entry to `block`.
    pub fn at(&self, block: LLVMBasicBlockRef) -> Vec<Fact> {
        let mut out = Vec::new();
        let mut cur = block;
        // A chain of single predecessors cannot cycle back in reachable code; the limit keeps
        // unreachable cycles from looping.
        for _ in 0..256 {
            let Some((pred, facts)) = self.entry.get(&cur) else { break };
            out.extend_from_slice(facts);
            cur = *pred;
        }
        out
    }
}

/// The largest lower bound `facts` give `v`, or 0.
pub fn known_min(v: LLVMValueRef, facts: &[Fact]) -> i128 {
    facts.iter().filter(|f| f.value == v && f.over.is_none()).map(|f| f.min).max().unwrap_or(0)
}

/// The largest `k` for which `facts` say `a >= b + k`, if they say any.
pub fn known_gap(a: LLVMValueRef, b: LLVMValueRef, facts: &[Fact]) -> Option<i128> {
    facts.iter().filter(|f| f.value == a && f.over == Some(b)).map(|f| f.min).max()
}

/// The predicate that holds when `p` does not.
fn inverse(p: LLVMIntPredicate) -> LLVMIntPredicate {
    match p {
        LLVMIntEQ => LLVMIntNE,
        LLVMIntNE => LLVMIntEQ,
        LLVMIntUGT => LLVMIntULE,
        LLVMIntULE => LLVMIntUGT,
        LLVMIntUGE => LLVMIntULT,
        LLVMIntULT => LLVMIntUGE,
        LLVMIntSGT => LLVMIntSLE,
        LLVMIntSLE => LLVMIntSGT,
        LLVMIntSGE => LLVMIntSLT,
        LLVMIntSLT => LLVMIntSGE,
    }
}

/// The predicate with its operands swapped (`a < b` is `b > a`).
fn swapped(p: LLVMIntPredicate) -> LLVMIntPredicate {
    match p {
        LLVMIntUGT => LLVMIntULT,
        LLVMIntULT => LLVMIntUGT,
        LLVMIntUGE => LLVMIntULE,
        LLVMIntULE => LLVMIntUGE,
        LLVMIntSGT => LLVMIntSLT,
        LLVMIntSLT => LLVMIntSGT,
        LLVMIntSGE => LLVMIntSLE,
        LLVMIntSLE => LLVMIntSGE,
        p => p,
    }
}

/// Adds to `out` the lower bounds that follow from the `i1` value `cond` being `holds`.
///
/// # Safety
/// `cond` must be a live value.
unsafe fn implied(cond: LLVMValueRef, holds: bool, out: &mut Vec<Fact>) {
    if !LLVMIsAICmpInst(cond).is_null() {
        let (mut a, mut b) = (LLVMGetOperand(cond, 0), LLVMGetOperand(cond, 1));
        let mut p = LLVMGetICmpPredicate(cond);
        if !holds {
            p = inverse(p);
        }
        if !LLVMIsAConstantInt(a).is_null() && LLVMIsAConstantInt(b).is_null() {
            (a, b) = (b, a);
            p = swapped(p);
        }
        if LLVMGetTypeKind(LLVMTypeOf(a)) != llvm_sys::LLVMTypeKind::LLVMIntegerTypeKind {
            return;
        }
        if LLVMIsAConstantInt(b).is_null() {
            // Two variables, in unsigned order: `a < b` says `b >= a + 1`, and so `b >= 1`.
            let (big, small, gap) = match p {
                LLVMIntULT => (b, a, 1),
                LLVMIntULE => (b, a, 0),
                LLVMIntUGT => (a, b, 1),
                LLVMIntUGE => (a, b, 0),
                _ => return,
            };
            if let (Some(big), Some(small)) = (unextended(big), unextended(small)) {
                out.push(Fact { value: big, over: Some(small), min: gap });
            }
            if gap > 0 {
                record(big, gap, true, out);
            }
            return;
        }
        let (u, s) = (LLVMConstIntGetZExtValue(b) as i128, LLVMConstIntGetSExtValue(b) as i128);
        // `a >= min` in unsigned order (a signed bound of at least 0 is one as well).
        let (min, unsigned) = match p {
            LLVMIntUGT => (u + 1, true),
            LLVMIntUGE => (u, true),
            LLVMIntNE if u == 0 => (1, true),
            LLVMIntSGT if s >= -1 => (s + 1, false),
            LLVMIntSGE if s >= 0 => (s, false),
            _ => return,
        };
        if min > 0 {
            record(a, min, unsigned, out);
        }
        return;
    }
    if LLVMIsAInstruction(cond).is_null() {
        return;
    }
    let both = |x: LLVMValueRef, y: LLVMValueRef, out: &mut Vec<Fact>| {
        implied(x, holds, out);
        implied(y, holds, out);
    };
    let is = |v: LLVMValueRef, k: u64| !LLVMIsAConstantInt(v).is_null() && LLVMConstIntGetZExtValue(v) == k;
    match LLVMGetInstructionOpcode(cond) {
        // `a && b` holding, or `a || b` failing, says the same of both.
        LLVMOpcode::LLVMAnd if holds => both(LLVMGetOperand(cond, 0), LLVMGetOperand(cond, 1), out),
        LLVMOpcode::LLVMOr if !holds => both(LLVMGetOperand(cond, 0), LLVMGetOperand(cond, 1), out),
        // The short-circuit forms: `select a, b, false` and `select a, true, b`.
        LLVMOpcode::LLVMSelect => {
            let (c, t, e) = (LLVMGetOperand(cond, 0), LLVMGetOperand(cond, 1), LLVMGetOperand(cond, 2));
            if (holds && is(e, 0)) || (!holds && is(t, 1)) {
                both(c, if holds { t } else { e }, out);
            }
        }
        _ => {}
    }
}

/// Records `a >= min`, looking through extensions: a zero extension keeps the unsigned value;
/// a sign extension keeps a signed bound, and an unsigned one up to half the narrow range (a
/// negative narrow value is at least that, unsigned).
///
/// # Safety
/// `a` must be a live value.
unsafe fn record(mut a: LLVMValueRef, min: i128, unsigned: bool, out: &mut Vec<Fact>) {
    loop {
        if LLVMIsAInstruction(a).is_null() {
            break;
        }
        match LLVMGetInstructionOpcode(a) {
            LLVMOpcode::LLVMZExt => a = LLVMGetOperand(a, 0),
            LLVMOpcode::LLVMSExt => {
                let inner = LLVMGetOperand(a, 0);
                let bits = LLVMGetIntTypeWidth(LLVMTypeOf(inner));
                if unsigned && min > 1i128 << (bits - 1) {
                    return;
                }
                a = inner;
            }
            _ => break,
        }
    }
    // The widening erases comparisons (and extensions, looked through above): a fact must
    // not name one, or a later value at its address could match it.
    if !LLVMIsACmpInst(a).is_null() {
        return;
    }
    out.push(Fact { value: a, over: None, min });
}

/// `a` under its zero extensions (which keep unsigned order), unless it is a comparison or a
/// sign extension, which the widening erases or whose unsigned order differs.
///
/// # Safety
/// `a` must be a live value.
unsafe fn unextended(mut a: LLVMValueRef) -> Option<LLVMValueRef> {
    while !LLVMIsAInstruction(a).is_null() && LLVMGetInstructionOpcode(a) == LLVMOpcode::LLVMZExt {
        a = LLVMGetOperand(a, 0);
    }
    let erased = !LLVMIsACmpInst(a).is_null()
        || (!LLVMIsAInstruction(a).is_null() && LLVMGetInstructionOpcode(a) == LLVMOpcode::LLVMSExt);
    (!erased).then_some(a)
}
