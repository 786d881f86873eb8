//! Instance-count expressions: integer expressions over the parent node's parameters.
//!
//! A child's grid extents are written in the parent node function (`n / 16`); the runtime
//! evaluates them from the parent's actual arguments, so they are kept symbolically.

use std::fmt;

/// The operations, with their meaning on `i64`, are the compiler–runtime contract's: the
/// runtime evaluates the description of these expressions the same way.
pub use contract::desc::BinOp;

/// An integer expression. Casts between integer widths are dropped: counts are sizes and the
/// HPVM-C API takes them as `size_t`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    Const(i64),
    /// The parent's parameter with this index (and name, for printing).
    Param {
        index: usize,
        name: String,
    },
    Bin(BinOp, Box<Expr>, Box<Expr>),
    /// Something that is not an integer expression of the parameters (a load, a call...);
    /// the text says what. The verifier rejects it.
    Opaque(String),
}

impl Expr {
    /// Evaluates with the given parameter values; `None` on an opaque part, a missing
    /// parameter, division by zero or overflow.
    pub fn eval(&self, params: &[i64]) -> Option<i64> {
        match self {
            Expr::Const(c) => Some(*c),
            Expr::Param { index, .. } => params.get(*index).copied(),
            Expr::Opaque(_) => None,
            Expr::Bin(op, a, b) => op.apply(a.eval(params)?, b.eval(params)?),
        }
    }

    /// The first opaque part, if any.
    pub fn opaque_part(&self) -> Option<&str> {
        match self {
            Expr::Opaque(what) => Some(what),
            Expr::Bin(_, a, b) => a.opaque_part().or_else(|| b.opaque_part()),
            _ => None,
        }
    }

    fn fmt_prec(&self, f: &mut fmt::Formatter<'_>, outer: u8) -> fmt::Result {
        match self {
            Expr::Const(c) => write!(f, "{c}"),
            Expr::Param { name, .. } => write!(f, "{name}"),
            Expr::Opaque(what) => write!(f, "<{what}>"),
            Expr::Bin(op, a, b) => {
                let p = op.precedence();
                let paren = p < outer;
                if paren {
                    write!(f, "(")?;
                }
                a.fmt_prec(f, p)?;
                write!(f, " {} ", op.symbol())?;
                // Left-associative: a right operand of equal precedence needs parentheses.
                b.fmt_prec(f, p + 1)?;
                if paren {
                    write!(f, ")")?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_prec(f, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(index: usize, name: &str) -> Box<Expr> {
        Box::new(Expr::Param { index, name: name.into() })
    }
    fn c(v: i64) -> Box<Expr> {
        Box::new(Expr::Const(v))
    }

    #[test]
    fn prints_minimal_parentheses() {
        let e = Expr::Bin(BinOp::Div, Box::new(Expr::Bin(BinOp::Add, p(0, "n"), c(15))), c(16));
        assert_eq!(e.to_string(), "(n + 15) / 16");
        let e = Expr::Bin(BinOp::Sub, p(0, "n"), Box::new(Expr::Bin(BinOp::Sub, p(1, "m"), c(1))));
        assert_eq!(e.to_string(), "n - (m - 1)");
        let e = Expr::Bin(BinOp::Add, p(0, "n"), Box::new(Expr::Bin(BinOp::Mul, p(1, "m"), c(2))));
        assert_eq!(e.to_string(), "n + m * 2");
    }

    #[test]
    fn evaluates_and_refuses_what_it_cannot() {
        let e = Expr::Bin(BinOp::Div, p(1, "n"), c(16));
        assert_eq!(e.eval(&[0, 64]), Some(4));
        assert_eq!(Expr::Bin(BinOp::Div, p(0, "n"), c(0)).eval(&[1]), None);
        assert_eq!(Expr::Bin(BinOp::Add, p(0, "n"), Box::new(Expr::Opaque("load".into()))).eval(&[1]), None);
        assert_eq!(e.eval(&[]), None);
    }
}
