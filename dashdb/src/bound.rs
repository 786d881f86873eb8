//! Bounds: parameter conditions that multiply parameters, which ISL sets cannot state.
//!
//! Index arithmetic in 32-bit unsigned integers (`unsigned y, w; out[y * w + x]`, the common
//! CUDA style) wraps around by the rules of C, so its widening to 64 bits (which the maps
//! need) is exact only while no intermediate value reaches 2^32. The largest value is a
//! polynomial of the parameters (`(boffy + bsy - 1) * w + boffx + bsx - 1`), and the
//! analysis records `polynomial < 2^32` as a [`Bound`] of the node (dashdb's
//! `Node::bounds`), checked by the runtime at each launch.
//!
//! Text form: `EXPR < NUMBER`, where `EXPR` is made of non-negative integers, parameter names,
//! `+`, `-`, `*` and parentheses.
//!
//! Invariant: [`Bound::holds`] is `true` only when every subexpression, evaluated exactly
//! (in 128 bits, saturating), is non-negative and the whole is below the limit. The analysis
//! writes polynomials that are upper bounds of the value they speak of only when their terms
//! are non-negative; a negative term (a parameter below zero, an empty block) makes the bound
//! fail rather than hold by accident.

use std::fmt;

/// One bound, `expr < limit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bound {
    expr: Expr,
    limit: i128,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Expr {
    Num(i128),
    Name(String),
    Add(Box<Expr>, Box<Expr>),
    Sub(Box<Expr>, Box<Expr>),
    Mul(Box<Expr>, Box<Expr>),
}

impl Bound {
    /// Parses the text form (see the module docs).
    pub fn parse(text: &str) -> Result<Bound, String> {
        let (lhs, rhs) = text.split_once('<').ok_or_else(|| format!("bound `{text}` has no `<`"))?;
        let limit = rhs.trim().parse::<i128>().map_err(|_| format!("bound `{text}`: its limit is not a number"))?;
        let tokens = tokens(lhs).ok_or_else(|| format!("bound `{text}`: unexpected character"))?;
        let mut p = Parser { tokens: &tokens, at: 0 };
        let expr = p.sum().ok_or_else(|| format!("bound `{text}` does not parse"))?;
        if p.at != tokens.len() {
            return Err(format!("bound `{text}` does not parse"));
        }
        Ok(Bound { expr, limit })
    }

    /// The parameter names it uses, sorted, each once.
    pub fn names(&self) -> Vec<&str> {
        fn walk<'e>(e: &'e Expr, out: &mut Vec<&'e str>) {
            match e {
                Expr::Num(_) => {}
                Expr::Name(n) => out.push(n),
                Expr::Add(a, b) | Expr::Sub(a, b) | Expr::Mul(a, b) => {
                    walk(a, out);
                    walk(b, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.expr, &mut out);
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Whether `other` holds wherever this one does: its expression is a summand of this one's
    /// (a sum of non-negative terms is at least each of them) and its limit is no smaller.
    pub fn implies(&self, other: &Bound) -> bool {
        fn summand(whole: &Expr, part: &Expr) -> bool {
            whole == part || matches!(whole, Expr::Add(a, b) if summand(a, part) || summand(b, part))
        }
        other.limit >= self.limit && summand(&self.expr, &other.expr)
    }

    /// Whether it holds with each name at `value(name)`; `None` when a name has no value. A
    /// name that varies (a block offset over a launch's blocks) must be given its largest value:
    /// the polynomials the analysis writes grow with each of their non-negative terms.
    pub fn holds(&self, value: &dyn Fn(&str) -> Option<i64>) -> Option<bool> {
        // `None`: a name without a value; `Some(None)`: a negative subexpression.
        fn eval(e: &Expr, value: &dyn Fn(&str) -> Option<i64>) -> Option<Option<i128>> {
            let v = match e {
                Expr::Num(n) => *n,
                Expr::Name(n) => i128::from(value(n)?),
                Expr::Add(a, b) | Expr::Sub(a, b) | Expr::Mul(a, b) => {
                    let (Some(x), Some(y)) = (eval(a, value)?, eval(b, value)?) else { return Some(None) };
                    match e {
                        Expr::Add(..) => x.saturating_add(y),
                        Expr::Sub(..) => x.saturating_sub(y),
                        _ => x.saturating_mul(y),
                    }
                }
            };
            Some((v >= 0).then_some(v))
        }
        Some(eval(&self.expr, value)?.is_some_and(|v| v < self.limit))
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} < {}", self.expr, self.limit)
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Parenthesized where the grammar needs it to read back the same tree: sums under
        // products, and sums on the right of a sum or difference.
        let grouped = |e: &Expr, f: &mut fmt::Formatter<'_>| match e {
            Expr::Add(..) | Expr::Sub(..) => write!(f, "({e})"),
            _ => write!(f, "{e}"),
        };
        match self {
            Expr::Num(n) => write!(f, "{n}"),
            Expr::Name(n) => write!(f, "{n}"),
            Expr::Add(a, b) => {
                write!(f, "{a} + ")?;
                grouped(b, f)
            }
            Expr::Sub(a, b) => {
                write!(f, "{a} - ")?;
                grouped(b, f)
            }
            Expr::Mul(a, b) => {
                grouped(a, f)?;
                write!(f, " * ")?;
                grouped(b, f)
            }
        }
    }
}

#[derive(Debug, PartialEq)]
enum Token {
    Num(i128),
    Name(String),
    Op(char),
}

fn tokens(text: &str) -> Option<Vec<Token>> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c.is_ascii_digit() {
            let mut s = String::new();
            while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                s.push(d);
                chars.next();
            }
            out.push(Token::Num(s.parse().ok()?));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let mut s = String::new();
            while let Some(&d) = chars.peek().filter(|d| d.is_ascii_alphanumeric() || **d == '_') {
                s.push(d);
                chars.next();
            }
            out.push(Token::Name(s));
        } else if "+-*()".contains(c) {
            out.push(Token::Op(c));
            chars.next();
        } else {
            return None;
        }
    }
    Some(out)
}

struct Parser<'t> {
    tokens: &'t [Token],
    at: usize,
}

impl Parser<'_> {
    fn op(&mut self, c: char) -> bool {
        let hit = self.tokens.get(self.at) == Some(&Token::Op(c));
        self.at += usize::from(hit);
        hit
    }

    fn sum(&mut self) -> Option<Expr> {
        let mut e = self.product()?;
        loop {
            if self.op('+') {
                e = Expr::Add(Box::new(e), Box::new(self.product()?));
            } else if self.op('-') {
                e = Expr::Sub(Box::new(e), Box::new(self.product()?));
            } else {
                return Some(e);
            }
        }
    }

    fn product(&mut self) -> Option<Expr> {
        let mut e = self.atom()?;
        while self.op('*') {
            e = Expr::Mul(Box::new(e), Box::new(self.atom()?));
        }
        Some(e)
    }

    fn atom(&mut self) -> Option<Expr> {
        if self.op('(') {
            let e = self.sum()?;
            return self.op(')').then_some(e);
        }
        let e = match self.tokens.get(self.at)? {
            Token::Num(n) => Expr::Num(*n),
            Token::Name(n) => Expr::Name(n.clone()),
            Token::Op(_) => return None,
        };
        self.at += 1;
        Some(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at<'a>(values: &'a [(&'a str, i64)]) -> impl Fn(&str) -> Option<i64> + 'a {
        move |n| values.iter().find(|(m, _)| *m == n).map(|(_, v)| *v)
    }

    #[test]
    fn a_polynomial_of_parameters_is_evaluated_exactly() {
        let b = Bound::parse("(boffy + (bsy - 1)) * w + (boffx + (bsx - 1)) < 4294967296").unwrap();
        assert_eq!(b.names(), ["boffx", "boffy", "bsx", "bsy", "w"]);
        // 65535 * 65536 + 65535 = 2^32 - 1: the largest that fits.
        let fits = [("boffy", 65520), ("bsy", 16), ("w", 65536), ("boffx", 65504), ("bsx", 32)];
        assert_eq!(b.holds(&at(&fits)), Some(true));
        let over = [("boffy", 65520), ("bsy", 17), ("w", 65536), ("boffx", 65504), ("bsx", 32)];
        assert_eq!(b.holds(&at(&over)), Some(false));
        assert_eq!(b.holds(&at(&fits[..4])), None, "a name without a value");
    }

    #[test]
    fn a_negative_term_makes_it_fail() {
        let b = Bound::parse("y * w < 100").unwrap();
        assert_eq!(b.holds(&at(&[("y", -3), ("w", 5)])), Some(false));
        assert_eq!(b.holds(&at(&[("y", 3), ("w", -5)])), Some(false));
        let b = Bound::parse("(bs - 1) * w < 100").unwrap();
        assert_eq!(b.holds(&at(&[("bs", 0), ("w", 5)])), Some(false), "an empty block");
        assert_eq!(b.holds(&at(&[("bs", 1), ("w", 5)])), Some(true));
    }

    #[test]
    fn huge_values_saturate_instead_of_wrapping() {
        let b = Bound::parse("a * b * c * d < 4294967296").unwrap();
        let v = 1i64 << 40;
        assert_eq!(b.holds(&at(&[("a", v), ("b", v), ("c", v), ("d", v)])), Some(false));
    }

    #[test]
    fn a_sum_implies_the_bounds_of_its_summands_only() {
        let whole = Bound::parse("(a + 1) * w + (b + c) < 4294967296").unwrap();
        for part in ["(a + 1) * w < 4294967296", "b + c < 4294967296", "c < 4294967296", "b < 4294967297"] {
            assert!(whole.implies(&Bound::parse(part).unwrap()), "{part}");
        }
        // A factor is not bounded by the product (the other factor may be 0), nor a term
        // by a difference, nor anything by a larger limit.
        for part in ["a + 1 < 4294967296", "w < 4294967296", "b < 4294967295"] {
            assert!(!whole.implies(&Bound::parse(part).unwrap()), "{part}");
        }
        let diff = Bound::parse("a - b < 10").unwrap();
        assert!(!diff.implies(&Bound::parse("a < 10").unwrap()));
    }

    #[test]
    fn text_round_trips() {
        for t in
            ["(a + 1) * (b - (c - 2)) + 3 < 7", "a - (b + c) < 1", "x * y * z < 4294967296", "a < 0", "a + (b - 1) < 2"]
        {
            let b = Bound::parse(t).unwrap();
            assert_eq!(b.to_string(), t);
            assert_eq!(Bound::parse(&b.to_string()).unwrap(), b);
        }
    }

    #[test]
    fn malformed_text_is_refused() {
        for t in ["a + b", "a + < 3", "(a < 3", "a ? b < 3", "a < b", "a b < 3", "< 3"] {
            assert!(Bound::parse(t).is_err(), "{t}");
        }
    }
}
