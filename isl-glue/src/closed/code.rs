//! A closed form compiled for evaluation: its expression trees as one straight-line program.
//!
//! A launch evaluates a closed form once per partition and access, and the trees ISL builds
//! repeat themselves: a box's bounds appear again in its non-emptiness, a piece's affine parts
//! in every bound. Compiled, each distinct subexpression is one step, computed once, in 64-bit
//! arithmetic over a flat array instead of a recursive walk in 128-bit.
//!
//! Invariants:
//! - Slots are the parameters first (in [`super::Params`] order), then the constants, then
//!   the steps; a step's operands are earlier slots, so one pass in order computes them all.
//! - A slot is `None` where its value is undefined (an overflow of 64 bits, a division by
//!   zero). Undefinedness spreads to what uses it, except where the tree's own evaluation
//!   would not have looked: `and` after a false operand, `or` after a true one, the branch a
//!   selection does not take. So a compiled form answers exactly what the tree answers, and
//!   an undefined answer is an error the caller resolves by asking ISL.

use super::{Expr, Op};
use std::collections::HashMap;

/// A step: `op` over slots `a`, `b` (and `c`, a selection's other branch). n-ary operations
/// are folded left into binary steps, which keeps the trees' order of evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Step {
    op: Op,
    a: u32,
    b: u32,
    c: u32,
}

/// A compiled closed form: slots for its parameters, constants and steps, and the outputs the
/// caller asked for when compiling ([`Builder::add`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Code {
    params: usize,
    consts: Vec<i64>,
    steps: Vec<Step>,
}

/// Compiles expressions into one [`Code`], sharing their common parts.
pub(super) struct Builder {
    params: usize,
    consts: Vec<i64>,
    const_slot: HashMap<i64, u32>,
    steps: Vec<Step>,
    step_slot: HashMap<Step, u32>,
}

impl Builder {
    /// A builder for expressions over `params` parameters. Constants get their slots after
    /// the parameters, steps after the constants: both are renumbered by [`Builder::finish`].
    pub(super) fn new(params: usize) -> Builder {
        Builder { params, consts: Vec::new(), const_slot: HashMap::new(), steps: Vec::new(), step_slot: HashMap::new() }
    }

    /// The slot of `e`'s value (in the builder's own numbering: [`Reference`]); `None` for a
    /// constant beyond 64 bits (the caller has no closed form then).
    pub(super) fn add(&mut self, e: &Expr) -> Option<Reference> {
        Some(match e {
            Expr::Int(i) => {
                let v = i64::try_from(*i).ok()?;
                let next = self.consts.len() as u32;
                let k = *self.const_slot.entry(v).or_insert(next);
                if k == next {
                    self.consts.push(v);
                }
                Reference::Const(k)
            }
            Expr::Param(p) => {
                debug_assert!(*p < self.params);
                Reference::Param(*p as u32)
            }
            Expr::Op(op, args) => {
                let args: Vec<Reference> = args.iter().map(|x| self.add(x)).collect::<Option<_>>()?;
                match (op, args.as_slice()) {
                    (Op::Neg, [a]) => self.step(*op, *a, *a, *a),
                    (Op::Select, [c, a, b]) => self.step(*op, *c, *a, *b),
                    (Op::And | Op::Or | Op::Max | Op::Min, [first, rest @ ..]) => {
                        // One operand: `and`/`or` still make it a boolean, min/max keep it.
                        let mut acc = *first;
                        if rest.is_empty() && matches!(op, Op::And | Op::Or) {
                            acc = self.step(*op, acc, acc, acc);
                        }
                        for x in rest {
                            acc = self.step(*op, acc, *x, *x);
                        }
                        acc
                    }
                    (_, [a, b]) => self.step(*op, *a, *b, *b),
                    _ => return None,
                }
            }
        })
    }

    fn step(&mut self, op: Op, a: Reference, b: Reference, c: Reference) -> Reference {
        let s = Step { op, a: a.encode(), b: b.encode(), c: c.encode() };
        let next = self.steps.len() as u32;
        let k = *self.step_slot.entry(s).or_insert(next);
        if k == next {
            self.steps.push(s);
        }
        Reference::Step(k)
    }

    /// The code; [`Reference::slot`] gives each reference its slot in it.
    pub(super) fn finish(self) -> Code {
        let (params, consts) = (self.params as u32, self.consts.len() as u32);
        let slot = |x: u32| Reference::decode(x).slot(params, consts);
        let steps = self.steps.iter().map(|s| Step { op: s.op, a: slot(s.a), b: slot(s.b), c: slot(s.c) }).collect();
        Code { params: self.params, consts: self.consts, steps }
    }
}

/// A value while compiling: parameters, constants and steps are numbered apart until
/// [`Builder::finish`] lays them out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reference {
    Param(u32),
    Const(u32),
    Step(u32),
}

impl Reference {
    /// The slot in a code of `params` parameters and `consts` constants.
    pub(super) fn slot(self, params: u32, consts: u32) -> u32 {
        match self {
            Reference::Param(p) => p,
            Reference::Const(k) => params + k,
            Reference::Step(s) => params + consts + s,
        }
    }

    // Two tag bits above the number: steps keep their operands in one word each.
    fn encode(self) -> u32 {
        match self {
            Reference::Param(p) => p,
            Reference::Const(k) => (1 << 30) | k,
            Reference::Step(s) => (2 << 30) | s,
        }
    }

    fn decode(x: u32) -> Reference {
        let n = x & ((1 << 30) - 1);
        match x >> 30 {
            0 => Reference::Param(n),
            1 => Reference::Const(n),
            _ => Reference::Step(n),
        }
    }
}

impl Code {
    pub(super) fn params(&self) -> u32 {
        self.params as u32
    }

    pub(super) fn consts(&self) -> u32 {
        self.consts.len() as u32
    }

    /// Every slot's value for parameter `values` (in [`super::Params`] order), into `slots`
    /// (cleared first).
    pub(super) fn run(&self, values: &[i64], slots: &mut Vec<Option<i64>>) {
        debug_assert_eq!(values.len(), self.params);
        slots.clear();
        slots.reserve(self.params + self.consts.len() + self.steps.len());
        slots.extend(values.iter().map(|&v| Some(v)));
        slots.extend(self.consts.iter().map(|&v| Some(v)));
        for s in &self.steps {
            let v = |i: u32| slots[i as usize];
            let (a, b) = (v(s.a), v(s.b));
            let both = |f: fn(i64, i64) -> Option<i64>| f(a?, b?);
            let value = match s.op {
                Op::And => match a {
                    None => None,
                    Some(0) => Some(0),
                    Some(_) => b.map(|b| i64::from(b != 0)),
                },
                Op::Or => match a {
                    None => None,
                    Some(x) if x != 0 => Some(1),
                    Some(_) => b.map(|b| i64::from(b != 0)),
                },
                Op::Select => match a {
                    None => None,
                    Some(x) if x != 0 => b,
                    Some(_) => v(s.c),
                },
                Op::Max => both(|x, y| Some(x.max(y))),
                Op::Min => both(|x, y| Some(x.min(y))),
                Op::Neg => a.and_then(i64::checked_neg),
                Op::Add => both(i64::checked_add),
                Op::Sub => both(i64::checked_sub),
                Op::Mul => both(i64::checked_mul),
                Op::Div | Op::FloorDiv => both(|n, d| {
                    let q = n.checked_div(d)?;
                    // Truncation rounded a negative quotient up.
                    Some(if n % d != 0 && ((n < 0) != (d < 0)) { q - 1 } else { q })
                }),
                Op::Rem => both(|n, d| n.checked_rem_euclid(d)),
                Op::Eq => both(|x, y| Some(i64::from(x == y))),
                Op::Le => both(|x, y| Some(i64::from(x <= y))),
                Op::Lt => both(|x, y| Some(i64::from(x < y))),
                Op::Ge => both(|x, y| Some(i64::from(x >= y))),
                Op::Gt => both(|x, y| Some(i64::from(x > y))),
            };
            slots.push(value);
        }
    }

    #[cfg(test)]
    pub(super) fn steps(&self) -> usize {
        self.steps.len()
    }
}
