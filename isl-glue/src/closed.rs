//! Closed forms: what ISL would answer for a launch, computed once with the launch's values
//! as parameters and then evaluated for each launch without ISL (issue 40, "plans parametric
//! in scalars").
//!
//! ISL turns a piecewise quasi-affine function or a parameter set into an expression tree
//! (its AST generator, `isl_ast_build_expr_from_pw_aff` / `_from_set`), valid for every value
//! of the parameters within the build's context. The tree is copied into [`Expr`], plain
//! Rust data, and compiled into one straight-line program per closed form ([`code`]) that
//! any thread evaluates in nanoseconds.
//!
//! Invariants:
//! - An [`Expr`] holds only the operations of quasi-affine functions and their conditions
//!   (no calls, no accesses): a tree with anything else is refused when it is made.
//! - Evaluation is exact integer arithmetic (`i64`); an overflow or a division by zero is an
//!   error, never a wrapped value. The caller then asks ISL, as it would without a closed
//!   form.
//! - A [`ClosedBox`] is a union of boxes holding the element set. With `exact` set it is the
//!   set itself: callers may use it for writes. Without, it is a superset, good only for reads.

mod code;

use crate::{Error, Result};
use code::{Builder, Code};
use isl_rs as isl;
use isl_rs::{ASTExprOpType, ASTExprType};

extern "C" {
    // Not wrapped by isl-rs; libisl (which isl-rs builds and links) has them.
    fn isl_ast_build_from_context(set: usize) -> usize;
    fn isl_ast_build_free(build: usize) -> usize;
    fn isl_ast_build_expr_from_set(build: usize, set: usize) -> usize;
    fn isl_ast_build_expr_from_pw_aff(build: usize, pa: usize) -> usize;
}

/// An operation of a quasi-affine expression or condition (ISL's AST operations, the ones
/// such expressions use). Booleans are 0 and 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Op {
    And,
    Or,
    Max,
    Min,
    Neg,
    Add,
    Sub,
    Mul,
    /// Exact division.
    Div,
    /// Division rounding down (ISL's `fdiv_q`, and `pdiv_q` whose dividend is non-negative).
    FloorDiv,
    /// Remainder of a floor division (`pdiv_r`, `zdiv_r`: ISL compares these against zero).
    Rem,
    Select,
    Eq,
    Le,
    Lt,
    Ge,
    Gt,
}

/// An integer expression over the parameters of its [`Closed`] (by position).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Expr {
    Int(i128),
    Param(usize),
    Op(Op, Vec<Expr>),
}

/// The parameters a closed form's expressions name, in the order they index them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Params(Vec<String>);

impl Params {
    pub fn names(&self) -> &[String] {
        &self.0
    }

    fn index(&mut self, name: &str) -> usize {
        match self.0.iter().position(|n| n == name) {
            Some(i) => i,
            None => {
                self.0.push(name.to_string());
                self.0.len() - 1
            }
        }
    }

    /// The values of the parameters, by name; [`Error::UnknownParam`] for one `value` lacks.
    pub fn values(&self, value: impl Fn(&str) -> Option<i64>) -> Result<Vec<i64>> {
        self.0.iter().map(|n| value(n).ok_or_else(|| Error::UnknownParam(n.clone()))).collect()
    }
}

/// A set of array elements as a function of parameters: a union of boxes, each with where it
/// is empty and otherwise its bounds per dimension (inclusive), compiled ([`code`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClosedBox {
    params: Params,
    code: Code,
    /// Per box, the slots of its non-emptiness and of its bounds per dimension.
    boxes: Vec<(u32, Vec<(u32, u32)>)>,
    /// Whether the set is the union of its boxes for every value of the parameters.
    pub exact: bool,
}

/// A box of a set under construction, as expression trees.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Piece {
    nonempty: Expr,
    bounds: Vec<(Expr, Expr)>,
}

thread_local! {
    /// The slots of this thread's last evaluation, kept for the next (a launch evaluates
    /// closed forms once per partition and access).
    static SLOTS: std::cell::RefCell<Vec<Option<i64>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `f` over the slots of `code` run for `values`.
fn with_run<R>(code: &Code, values: &[i64], f: impl FnOnce(&[Option<i64>]) -> R) -> R {
    SLOTS.with(|s| {
        let mut slots = s.borrow_mut();
        code.run(values, &mut slots);
        f(&slots)
    })
}

impl ClosedBox {
    /// The pieces compiled into one code; too complex where a constant exceeds 64 bits.
    fn compile(params: Params, pieces: &[Piece], exact: bool) -> Result<ClosedBox> {
        let mut b = Builder::new(params.names().len());
        let mut refs = Vec::with_capacity(pieces.len());
        for p in pieces {
            let nonempty = b.add(&p.nonempty).ok_or(Error::TooComplex)?;
            let bounds = p
                .bounds
                .iter()
                .map(|(lo, hi)| Some((b.add(lo)?, b.add(hi)?)))
                .collect::<Option<Vec<_>>>()
                .ok_or(Error::TooComplex)?;
            refs.push((nonempty, bounds));
        }
        let code = b.finish();
        let (np, nc) = (code.params(), code.consts());
        let boxes = refs
            .into_iter()
            .map(|(n, bounds)| {
                (n.slot(np, nc), bounds.into_iter().map(|(lo, hi)| (lo.slot(np, nc), hi.slot(np, nc))).collect())
            })
            .collect();
        Ok(ClosedBox { params, code, boxes, exact })
    }

    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The non-empty boxes for parameter `values` (in [`Params`] order); they may overlap.
    pub fn eval(&self, values: &[i64]) -> Result<Vec<Vec<(i64, i64)>>> {
        with_run(&self.code, values, |slots| {
            let at = |k: u32| slots[k as usize].ok_or_else(overflow);
            let mut out = Vec::with_capacity(self.boxes.len());
            for (nonempty, bounds) in &self.boxes {
                if at(*nonempty)? == 0 {
                    continue;
                }
                out.push(bounds.iter().map(|&(lo, hi)| Ok((at(lo)?, at(hi)?))).collect::<Result<Vec<_>>>()?);
            }
            Ok(out)
        })
    }
}

/// A parameter condition as a function of the parameters, compiled ([`code`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClosedCond {
    params: Params,
    code: Code,
    holds: u32,
}

impl ClosedCond {
    fn compile(params: Params, holds: &Expr) -> Result<ClosedCond> {
        let mut b = Builder::new(params.names().len());
        let r = b.add(holds).ok_or(Error::TooComplex)?;
        let code = b.finish();
        let holds = r.slot(code.params(), code.consts());
        Ok(ClosedCond { params, code, holds })
    }

    pub fn params(&self) -> &Params {
        &self.params
    }

    pub fn eval(&self, values: &[i64]) -> Result<bool> {
        with_run(&self.code, values, |slots| Ok(slots[self.holds as usize].ok_or_else(overflow)? != 0))
    }
}

fn overflow() -> Error {
    Error::Isl("a closed form overflowed 64-bit arithmetic or divided by zero".into())
}

/// ISL's expression tree of `set` (a parameter set), or of `pa`, within `context`.
fn ast(context: isl::Set, what: Either) -> Result<isl::ASTExpr> {
    let mut context = context;
    context.do_not_free_on_drop();
    // SAFETY: each call takes ownership of the objects passed `__isl_take` (the context, the
    // set or function: their wrappers no longer free them) and the build is freed here; a
    // null result is ISL's error, reported as such.
    unsafe {
        let build = isl_ast_build_from_context(context.ptr);
        if build == 0 {
            return Err(Error::Isl("could not start an AST build".into()));
        }
        let expr = match what {
            Either::Set(mut s) => {
                s.do_not_free_on_drop();
                isl_ast_build_expr_from_set(build, s.ptr)
            }
            Either::PwAff(mut p) => {
                p.do_not_free_on_drop();
                isl_ast_build_expr_from_pw_aff(build, p.ptr)
            }
        };
        isl_ast_build_free(build);
        if expr == 0 {
            return Err(Error::Isl("could not build an expression".into()));
        }
        Ok(isl::ASTExpr { ptr: expr, should_free_on_drop: true })
    }
}

enum Either {
    Set(isl::Set),
    PwAff(isl::PwAff),
}

/// [`Expr`] of ISL's tree; parameters are numbered in `params`.
fn from_ast(e: &isl::ASTExpr, params: &mut Params) -> Result<Expr> {
    match e.get_type()? {
        ASTExprType::Int => {
            let v = e.get_val()?;
            if !v.is_int()? {
                return Err(Error::Isl("a closed form with a non-integer constant".into()));
            }
            Ok(Expr::Int(i128::from(v.get_num_si()?)))
        }
        ASTExprType::Id => {
            let id = e.get_id()?;
            Ok(Expr::Param(params.index(id.get_name()?)))
        }
        ASTExprType::Op => {
            let op = match e.get_op_type()? {
                ASTExprOpType::And | ASTExprOpType::AndThen => Op::And,
                ASTExprOpType::Or | ASTExprOpType::OrElse => Op::Or,
                ASTExprOpType::Max => Op::Max,
                ASTExprOpType::Min => Op::Min,
                ASTExprOpType::Minus => Op::Neg,
                ASTExprOpType::Add => Op::Add,
                ASTExprOpType::Sub => Op::Sub,
                ASTExprOpType::Mul => Op::Mul,
                ASTExprOpType::Div => Op::Div,
                ASTExprOpType::FdivQ | ASTExprOpType::PdivQ => Op::FloorDiv,
                ASTExprOpType::PdivR | ASTExprOpType::ZdivR => Op::Rem,
                ASTExprOpType::Cond | ASTExprOpType::Select => Op::Select,
                ASTExprOpType::Eq => Op::Eq,
                ASTExprOpType::Le => Op::Le,
                ASTExprOpType::Lt => Op::Lt,
                ASTExprOpType::Ge => Op::Ge,
                ASTExprOpType::Gt => Op::Gt,
                other => return Err(Error::Isl(format!("a closed form with the operation {other:?}"))),
            };
            let n = e.get_op_n_arg()?;
            let args = (0..n).map(|i| from_ast(&e.get_op_arg(i)?, params)).collect::<Result<Vec<_>>>()?;
            let arity_ok = match op {
                Op::Neg => args.len() == 1,
                Op::Select => args.len() == 3,
                Op::And | Op::Or | Op::Max | Op::Min => !args.is_empty(),
                _ => args.len() == 2,
            };
            if !arity_ok {
                return Err(Error::Isl(format!("a closed form's {op:?} with {} operands", args.len())));
            }
            Ok(Expr::Op(op, args))
        }
        ASTExprType::Error => Err(Error::Isl("an AST expression ISL could not make".into())),
    }
}

/// Pieces of a set past which a closed form is not worth its evaluation.
const MAX_PIECES: usize = 16;

/// The closed form of `set` (elements, over parameters): per convex piece, where it is
/// non-empty and its bounds per dimension; and whether the set is the union of those boxes.
pub(crate) fn closed_box(set: &isl::Set) -> Result<ClosedBox> {
    let mut params = Params::default();
    let dims = set.dim(isl::DimType::Set)? as usize;
    let list = set.get_basic_set_list()?;
    let n = list.size()? as usize;
    if n > MAX_PIECES {
        return Err(Error::TooComplex);
    }
    let mut boxes = Vec::with_capacity(n);
    let mut union: Option<isl::Set> = None;
    let mut all_plain = true;
    for i in 0..n {
        let basic = list.get_at(i as i32)?;
        if let Some(p) = plain_box(&basic, dims, &mut params)? {
            boxes.push(p);
            continue;
        }
        all_plain = false;
        let piece = basic.to_set()?;
        let domain = piece.copy()?.params()?.coalesce()?;
        let universe = isl::Set::universe(domain.get_space()?)?;
        let nonempty = from_ast(&ast(universe, Either::Set(domain.copy()?))?, &mut params)?;
        let mut bounds = Vec::with_capacity(dims);
        for d in 0..dims {
            let lo = piece.copy()?.dim_min(d as i32)?;
            let hi = piece.copy()?.dim_max(d as i32)?;
            let lo = from_ast(&ast(domain.copy()?, Either::PwAff(lo))?, &mut params)?;
            let hi = from_ast(&ast(domain.copy()?, Either::PwAff(hi))?, &mut params)?;
            bounds.push((lo, hi));
        }
        boxes.push(Piece { nonempty, bounds });
        let b = its_box(&piece)?;
        union = Some(match union {
            None => b,
            Some(u) => u.union(b)?,
        });
    }
    // Plain boxes are their pieces: the union of the others' boxes (taken with the whole
    // set, which holds the plain ones) must lie in the set.
    let exact = all_plain
        || match union {
            None => true,
            Some(u) => u.is_subset(set)?,
        };
    ClosedBox::compile(params, &boxes, exact)
}

/// A piece whose every constraint bounds at most one dimension, over the parameters, and which
/// has no local variables: its bounds read off its constraints (a dimension's largest lower
/// bound and smallest upper bound), without ISL's optimisation, and it is its own box. `None`
/// for any other piece.
fn plain_box(piece: &isl::BasicSet, dims: usize, params: &mut Params) -> Result<Option<Piece>> {
    use isl::DimType;
    if piece.dim(DimType::Div)? > 0 {
        return Ok(None);
    }
    let nparams = piece.dim(DimType::Param)? as usize;
    let names: Vec<usize> =
        (0..nparams).map(|p| Ok(params.index(piece.get_dim_name(DimType::Param, p as u32)?))).collect::<Result<_>>()?;
    let int = |v: isl::Val| -> Result<Option<i128>> {
        Ok(if v.is_int()? { Some(i128::from(v.get_num_si()?)) } else { None })
    };
    let mut lower: Vec<Vec<Expr>> = vec![Vec::new(); dims];
    let mut upper: Vec<Vec<Expr>> = vec![Vec::new(); dims];
    let mut conds: Vec<Expr> = Vec::new();
    let list = piece.get_constraint_list()?;
    for i in 0..list.size()? {
        let c = list.get_at(i)?;
        let mut on: Option<(usize, i128)> = None;
        for d in 0..dims {
            let Some(k) = int(c.get_coefficient_val(DimType::Set, d as i32)?)? else { return Ok(None) };
            if k != 0 {
                if on.is_some() {
                    return Ok(None);
                }
                on = Some((d, k));
            }
        }
        // The constraint's part over the parameters: `aff + k × e_d (>= or ==) 0`.
        let Some(constant) = int(c.get_constant_val()?)? else { return Ok(None) };
        let mut terms = vec![Expr::Int(constant)];
        for (p, &name) in names.iter().enumerate() {
            let Some(k) = int(c.get_coefficient_val(DimType::Param, p as i32)?)? else { return Ok(None) };
            if k != 0 {
                terms.push(Expr::Op(Op::Mul, vec![Expr::Int(k), Expr::Param(name)]));
            }
        }
        let aff = terms.into_iter().reduce(|a, b| Expr::Op(Op::Add, vec![a, b])).expect("the constant");
        let eq = c.is_equality()?;
        match on {
            None if eq => conds.push(Expr::Op(Op::Eq, vec![aff, Expr::Int(0)])),
            None => conds.push(Expr::Op(Op::Ge, vec![aff, Expr::Int(0)])),
            Some((d, k)) if eq => {
                // `e_d = -aff / k`, where `k` divides `aff`.
                conds.push(Expr::Op(
                    Op::Eq,
                    vec![Expr::Op(Op::Rem, vec![aff.clone(), Expr::Int(k.abs())]), Expr::Int(0)],
                ));
                let v = Expr::Op(Op::Div, vec![Expr::Op(Op::Neg, vec![aff]), Expr::Int(k)]);
                lower[d].push(v.clone());
                upper[d].push(v);
            }
            // `e_d >= ceil(-aff / k)`, which is `-floor(aff / k)`.
            Some((d, k)) if k > 0 => {
                lower[d].push(Expr::Op(Op::Neg, vec![Expr::Op(Op::FloorDiv, vec![aff, Expr::Int(k)])]))
            }
            // `e_d <= floor(aff / -k)`.
            Some((d, k)) => upper[d].push(Expr::Op(Op::FloorDiv, vec![aff, Expr::Int(-k)])),
        }
    }
    let mut bounds = Vec::with_capacity(dims);
    for (lo, hi) in lower.into_iter().zip(upper) {
        if lo.is_empty() || hi.is_empty() {
            // Unbounded: ISL's answer is an error too.
            return Ok(None);
        }
        let one = |mut v: Vec<Expr>, op: Op| if v.len() == 1 { v.pop().expect("one") } else { Expr::Op(op, v) };
        let (lo, hi) = (one(lo, Op::Max), one(hi, Op::Min));
        conds.push(Expr::Op(Op::Le, vec![lo.clone(), hi.clone()]));
        bounds.push((lo, hi));
    }
    let nonempty = if conds.is_empty() { Expr::Int(1) } else { Expr::Op(Op::And, conds) };
    Ok(Some(Piece { nonempty, bounds }))
}

/// The box of `set`, for every value of the parameters: the intersection over dimensions `d`
/// of the elements with some element of the set at or below them in `d`, and some at or
/// above.
fn its_box(set: &isl::Set) -> Result<isl::Set> {
    let dims = set.dim(isl::DimType::Set)? as usize;
    let name = set.get_tuple_name().map(|n| n.to_string()).unwrap_or_default();
    let a: Vec<String> = (0..dims).map(|d| format!("a{d}")).collect();
    let e: Vec<String> = (0..dims).map(|d| format!("e{d}")).collect();
    let ctx = set.get_ctx();
    let mut boxed = isl::Set::universe(set.get_space()?)?;
    for d in 0..dims {
        for rel in ["<=", ">="] {
            let text = format!("{{ {name}[{}] -> {name}[{}] : a{d} {rel} e{d} }}", a.join(", "), e.join(", "));
            let m =
                isl::Map::read_from_str(&ctx, &text).map_err(|err| Error::Parse { text, message: err.to_string() })?;
            boxed = boxed.intersect(set.copy()?.apply(m)?)?;
        }
    }
    Ok(boxed)
}

/// The closed form of the parameter set `set`.
pub(crate) fn closed_cond(set: &isl::Set) -> Result<ClosedCond> {
    let mut params = Params::default();
    let set = set.copy()?.coalesce()?;
    let universe = isl::Set::universe(set.get_space()?)?;
    let holds = from_ast(&ast(universe, Either::Set(set))?, &mut params)?;
    ClosedCond::compile(params, &holds)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of `e` over `values`, through its compiled code.
    fn value(e: &Expr, values: &[i64]) -> Result<i64> {
        let mut b = Builder::new(values.len());
        let r = b.add(e).ok_or(Error::TooComplex)?;
        let code = b.finish();
        let mut slots = Vec::new();
        code.run(values, &mut slots);
        slots[r.slot(code.params(), code.consts()) as usize].ok_or_else(overflow)
    }

    fn op(op: Op, args: Vec<Expr>) -> Expr {
        Expr::Op(op, args)
    }

    #[test]
    fn floor_division_and_remainder_round_down() {
        let e = |o, a, b| op(o, vec![Expr::Int(a), Expr::Int(b)]);
        assert_eq!(value(&e(Op::FloorDiv, -7, 2), &[]).unwrap(), -4);
        assert_eq!(value(&e(Op::FloorDiv, 7, 2), &[]).unwrap(), 3);
        assert_eq!(value(&e(Op::FloorDiv, 7, -2), &[]).unwrap(), -4);
        assert_eq!(value(&e(Op::FloorDiv, -7, -2), &[]).unwrap(), 3);
        assert_eq!(value(&e(Op::Rem, -7, 2), &[]).unwrap(), 1);
        assert!(value(&e(Op::Mul, i64::MAX as i128, 2), &[]).is_err());
        assert!(value(&e(Op::FloorDiv, 1, 0), &[]).is_err());
        assert!(value(&e(Op::FloorDiv, i64::MIN as i128, -1), &[]).is_err());
        // Beyond 64 bits a constant has no code.
        assert!(value(&Expr::Int(i128::MAX), &[]).is_err());
    }

    /// Undefined values spread only where the tree's evaluation would have looked: `and`
    /// stops at a false operand, `or` at a true one, a selection takes one branch.
    #[test]
    fn undefined_operands_matter_only_where_they_are_used() {
        let bad = op(Op::FloorDiv, vec![Expr::Param(0), Expr::Int(0)]);
        let (zero, one) = (Expr::Int(0), Expr::Int(1));
        assert_eq!(value(&op(Op::And, vec![zero.clone(), bad.clone()]), &[5]).unwrap(), 0);
        assert!(value(&op(Op::And, vec![one.clone(), bad.clone()]), &[5]).is_err());
        assert!(value(&op(Op::And, vec![bad.clone(), zero.clone()]), &[5]).is_err());
        assert_eq!(value(&op(Op::Or, vec![one.clone(), bad.clone()]), &[5]).unwrap(), 1);
        assert!(value(&op(Op::Or, vec![zero.clone(), bad.clone()]), &[5]).is_err());
        assert_eq!(value(&op(Op::Select, vec![one.clone(), Expr::Param(0), bad.clone()]), &[5]).unwrap(), 5);
        assert!(value(&op(Op::Select, vec![zero.clone(), Expr::Param(0), bad.clone()]), &[5]).is_err());
        assert!(value(&op(Op::Max, vec![Expr::Param(0), bad]), &[5]).is_err());
        // One operand: `and` and `or` give a boolean, `min` the value.
        assert_eq!(value(&op(Op::And, vec![Expr::Param(0)]), &[5]).unwrap(), 1);
        assert_eq!(value(&op(Op::Min, vec![Expr::Param(0)]), &[5]).unwrap(), 5);
    }

    /// A subexpression met twice is computed once: a box's bounds and its non-emptiness
    /// share their affine parts.
    #[test]
    fn common_parts_are_one_step() {
        let aff = op(Op::Add, vec![Expr::Param(0), op(Op::Mul, vec![Expr::Int(2), Expr::Param(1)])]);
        let hi = op(Op::Min, vec![aff.clone(), Expr::Param(2)]);
        let nonempty = op(Op::Le, vec![aff.clone(), hi.clone()]);
        let mut b = Builder::new(3);
        for e in [&aff, &hi, &nonempty] {
            b.add(e).unwrap();
        }
        // mul, add, min, le.
        assert_eq!(b.finish().steps(), 4);
        assert_eq!(value(&nonempty, &[1, 2, 9]).unwrap(), 1);
        assert_eq!(value(&hi, &[1, 2, 3]).unwrap(), 3);
    }
}
