//! Diagnostics: what is wrong with a program, where, and which rule it breaks.

use crate::loc::{self, SrcLoc};
use std::fmt;

/// The rules a graph must follow. Each diagnostic names one, so tests and users can tell
/// the errors apart without matching on wording.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// The second argument of `__hpvm__createNodeND` (or `__hpvm__launch`) is not a function
    /// defined in the program.
    NotAFunction,
    /// More than 3 grid dimensions.
    TooManyDims,
    /// The number of instance counts differs from the number of dimensions.
    InstanceCountArity,
    /// An instance count that is not an integer expression of the parent's parameters.
    InstanceCountExpr,
    /// A port, dimension or flag argument that is not a constant.
    NonConstant,
    /// A port index outside the argument list or the output struct.
    PortOutOfRange,
    /// The two ends of an edge or binding have different types.
    TypeMismatch,
    /// A one-to-one edge between nodes whose grids differ.
    OneToOneGridMismatch,
    /// An input of a child node fed by two bindings/edges.
    InputBoundTwice,
    /// An input of a child node fed by nothing.
    InputNeverBound,
    /// An output of an internal node bound twice or not at all.
    OutputBinding,
    /// A graph-construction or host intrinsic in a leaf node.
    GraphIntrinsicInLeaf,
    /// Computation (loads, stores, calls, arithmetic not feeding instance counts) in an
    /// internal node.
    ComputationInInternal,
    /// A cycle of node functions creating each other.
    Recursion,
    /// A node function created by two parents (or twice by one).
    NodeReused,
    /// `__hpvm__return` arity or types disagree with the node's return struct or with another
    /// `__hpvm__return`.
    ReturnArity,
    /// `__hpvm__launch` of a function that is a child node somewhere.
    LaunchOfNonRoot,
    /// A launch's argument struct does not match the root's parameters.
    LaunchArgs,
    /// A node handle that does not come from a `__hpvm__createNodeND` of this function.
    UnknownHandle,
    /// `__hpvm__attributes` naming something that is not a pointer parameter, or counts that
    /// disagree with the arguments.
    Attributes,
    /// A pointer parameter not followed by its `size_t` size in bytes.
    PointerWithoutSize,
    /// A node function without a body in this program.
    MissingBody,
    /// A `__hpvm__hint` with an unknown or non-constant target.
    BadHint,
}

impl Rule {
    /// A short stable name, shown in brackets after each message.
    pub fn name(self) -> &'static str {
        match self {
            Rule::NotAFunction => "not-a-function",
            Rule::TooManyDims => "too-many-dims",
            Rule::InstanceCountArity => "instance-count-arity",
            Rule::InstanceCountExpr => "instance-count-expr",
            Rule::NonConstant => "non-constant",
            Rule::PortOutOfRange => "port-out-of-range",
            Rule::TypeMismatch => "type-mismatch",
            Rule::OneToOneGridMismatch => "one-to-one-grid-mismatch",
            Rule::InputBoundTwice => "input-bound-twice",
            Rule::InputNeverBound => "input-never-bound",
            Rule::OutputBinding => "output-binding",
            Rule::GraphIntrinsicInLeaf => "graph-intrinsic-in-leaf",
            Rule::ComputationInInternal => "computation-in-internal-node",
            Rule::Recursion => "recursion",
            Rule::NodeReused => "node-reused",
            Rule::ReturnArity => "return-arity",
            Rule::LaunchOfNonRoot => "launch-of-non-root",
            Rule::LaunchArgs => "launch-args",
            Rule::UnknownHandle => "unknown-handle",
            Rule::Attributes => "attributes",
            Rule::PointerWithoutSize => "pointer-without-size",
            Rule::MissingBody => "missing-body",
            Rule::BadHint => "bad-hint",
        }
    }
}

/// One error in the user's program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub rule: Rule,
    pub loc: Option<SrcLoc>,
    pub message: String,
}

impl Diagnostic {
    pub fn new(rule: Rule, loc: Option<SrcLoc>, message: impl Into<String>) -> Self {
        Diagnostic { rule, loc, message: message.into() }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: error: {} [{}]", loc::show(&self.loc), self.message, self.rule.name())
    }
}

/// Sorts diagnostics by location (those without one last) and drops exact repeats, so the
/// user reads them in source order.
pub fn sort(diags: &mut Vec<Diagnostic>) {
    diags.sort_by(|a, b| match (&a.loc, &b.loc) {
        (Some(x), Some(y)) => x.cmp(y).then(a.rule.cmp(&b.rule)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.rule.cmp(&b.rule),
    });
    diags.dedup();
}
