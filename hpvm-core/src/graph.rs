//! The dataflow graph of a whole program: its nodes, edges, bindings and launch sites.
//!
//! The graph is plain data: LLVM values are referred to by name (functions) or described by
//! text (types), so the graph outlives the LLVM context it was read from, prints stably and
//! can be checked without LLVM. [`crate::verify`] must accept a graph before any backend
//! looks at it; until then port indices may be out of range and types may disagree.

use crate::entity::{Arena, Id};
use crate::expr::Expr;
use crate::loc::SrcLoc;
use std::collections::BTreeMap;
use std::fmt;

pub type NodeId = Id<Node>;
pub type EdgeId = Id<Edge>;

/// Where a node asks to run (`__hpvm__hint`), HPVM's `hpvm::Target`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    None,
    Cpu,
    Gpu,
    Cudnn,
    Tensor,
    CpuOrGpu,
}

impl Target {
    /// From the numeric value of `hpvm::Target` in the header.
    pub fn from_value(v: u64) -> Option<Target> {
        Some(match v {
            0 => Target::None,
            1 => Target::Cpu,
            2 => Target::Gpu,
            3 => Target::Cudnn,
            4 => Target::Tensor,
            5 => Target::CpuOrGpu,
            _ => return None,
        })
    }

    /// Whether the node should become a GPU kernel when a GPU is used.
    pub fn wants_gpu(self) -> bool {
        matches!(self, Target::Gpu | Target::CpuOrGpu)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Target::None => "none",
            Target::Cpu => "CPU",
            Target::Gpu => "GPU",
            Target::Cudnn => "CUDNN",
            Target::Tensor => "TENSOR",
            Target::CpuOrGpu => "CPU_OR_GPU",
        })
    }
}

/// An LLVM type, kept as its IR text (`ptr`, `i64`, `float`, `%struct.RootIn`); two types are
/// equal when their texts are.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ty(pub String);

impl Ty {
    pub fn is_pointer(&self) -> bool {
        self.0 == "ptr" || self.0.starts_with("ptr addrspace")
    }
    /// `size_t` on the 64-bit targets we support.
    pub fn is_size(&self) -> bool {
        self.0 == "i64"
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How a node uses a pointer parameter, from `__hpvm__attributes`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access {
    pub read: bool,
    pub write: bool,
}

/// A parameter of a node function: one input port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub ty: Ty,
    /// For a pointer parameter: declared access (both false if not in `__hpvm__attributes`).
    pub access: Access,
    /// For a pointer parameter: the index of the `size_t` parameter holding its size in bytes
    /// (the one right after it), if there is one.
    pub size_param: Option<usize>,
}

/// The HPVM intrinsics a leaf node may use. Counted per node so backends know what to lower.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Query {
    GetNode,
    GetParentNode,
    InstanceId(Dim),
    NumInstances(Dim),
    Barrier,
    Malloc,
    Atomic(AtomicOp),
    Math(MathFn),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dim {
    X,
    Y,
    Z,
}

impl Dim {
    pub const ALL: [Dim; 3] = [Dim::X, Dim::Y, Dim::Z];
    pub fn letter(self) -> char {
        match self {
            Dim::X => 'x',
            Dim::Y => 'y',
            Dim::Z => 'z',
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AtomicOp {
    Cmpxchg,
    Add,
    Sub,
    Xchg,
    Inc,
    Dec,
    Min,
    Max,
    Umax,
    Umin,
    And,
    Or,
    Xor,
}

impl AtomicOp {
    pub const ALL: [AtomicOp; 13] = [
        AtomicOp::Cmpxchg,
        AtomicOp::Add,
        AtomicOp::Sub,
        AtomicOp::Xchg,
        AtomicOp::Inc,
        AtomicOp::Dec,
        AtomicOp::Min,
        AtomicOp::Max,
        AtomicOp::Umax,
        AtomicOp::Umin,
        AtomicOp::And,
        AtomicOp::Or,
        AtomicOp::Xor,
    ];
    pub fn name(self) -> &'static str {
        match self {
            AtomicOp::Cmpxchg => "cmpxchg",
            AtomicOp::Add => "add",
            AtomicOp::Sub => "sub",
            AtomicOp::Xchg => "xchg",
            AtomicOp::Inc => "inc",
            AtomicOp::Dec => "dec",
            AtomicOp::Min => "min",
            AtomicOp::Max => "max",
            AtomicOp::Umax => "umax",
            AtomicOp::Umin => "umin",
            AtomicOp::And => "and",
            AtomicOp::Or => "or",
            AtomicOp::Xor => "xor",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MathFn {
    Floor,
    Rsqrt,
    Sqrt,
    Sin,
    Cos,
}

impl MathFn {
    pub const ALL: [MathFn; 5] = [MathFn::Floor, MathFn::Rsqrt, MathFn::Sqrt, MathFn::Sin, MathFn::Cos];
    pub fn name(self) -> &'static str {
        match self {
            MathFn::Floor => "floor",
            MathFn::Rsqrt => "rsqrt",
            MathFn::Sqrt => "sqrt",
            MathFn::Sin => "sin",
            MathFn::Cos => "cos",
        }
    }
}

impl fmt::Display for Query {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Query::GetNode => write!(f, "getNode"),
            Query::GetParentNode => write!(f, "getParentNode"),
            Query::InstanceId(d) => write!(f, "getNodeInstanceID_{}", d.letter()),
            Query::NumInstances(d) => write!(f, "getNumNodeInstances_{}", d.letter()),
            Query::Barrier => write!(f, "barrier"),
            Query::Malloc => write!(f, "malloc"),
            Query::Atomic(op) => write!(f, "atomic_{}", op.name()),
            Query::Math(m) => write!(f, "{}", m.name()),
        }
    }
}

/// What a node holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// Computation, run once per instance.
    Leaf(Leaf),
    /// A child graph.
    Internal(Internal),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Leaf {
    /// Uses of HPVM intrinsics, with their count.
    pub queries: BTreeMap<Query, u32>,
    /// Functions defined in the program that this node calls (directly or not).
    pub aux_functions: Vec<String>,
    /// Functions declared but not defined in the program that the node calls (libm...).
    pub external_calls: Vec<String>,
    /// True when the node only allocates (`__hpvm__malloc`) and returns the allocations: an
    /// allocation node, giving each parent instance its own scratch memory.
    pub is_allocation: bool,
    /// Each `__hpvm__return` call: its value types and location.
    pub returns: Vec<ReturnSite>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReturnSite {
    pub types: Vec<Ty>,
    pub loc: Option<SrcLoc>,
    /// Per returned value, the index of the node parameter it is, unchanged (HPVM programs
    /// return their size parameters to order nodes: `__hpvm__return(1, bytes_out)`).
    pub params: Vec<Option<u32>>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Internal {
    /// Child nodes in creation order.
    pub children: Vec<NodeId>,
    /// Edges between children, in creation order.
    pub edges: Vec<EdgeId>,
    pub bind_in: Vec<Binding>,
    pub bind_out: Vec<Binding>,
    /// Children with a binding or incoming edge that could not be read (already reported);
    /// whether their inputs are all fed cannot be judged.
    pub unreadable: Vec<NodeId>,
}

/// `__hpvm__bindIn(child, parent_port, child_port, streaming)` or
/// `__hpvm__bindOut(child, child_port, parent_port, streaming)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    pub child: NodeId,
    pub parent_port: u32,
    pub child_port: u32,
    pub streaming: bool,
    pub loc: Option<SrcLoc>,
}

/// How the instances of an edge's two ends are connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replication {
    /// Every instance of the destination waits for all instances of the source.
    AllToAll,
    /// Instance i of the source feeds instance i of the destination.
    OneToOne,
}

impl fmt::Display for Replication {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Replication::AllToAll => "all-to-all",
            Replication::OneToOne => "one-to-one",
        })
    }
}

/// `__hpvm__edge(src, dst, replication, src_port, dst_port, streaming)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edge {
    pub parent: NodeId,
    pub src: NodeId,
    pub dst: NodeId,
    pub replication: Replication,
    pub src_port: u32,
    pub dst_port: u32,
    pub streaming: bool,
    pub loc: Option<SrcLoc>,
}

/// A dataflow node: one node function and where it sits in the hierarchy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The node function's symbol name, which is also the node's name.
    pub name: String,
    /// The name people read: `name` demangled ([`crate::names::display_name`]).
    pub display: String,
    /// Where the function is defined.
    pub def_loc: Option<SrcLoc>,
    /// The parent node; `None` for a root (launched) node.
    pub parent: Option<NodeId>,
    /// Where the parent creates this node (`__hpvm__createNodeND`); `None` for a root.
    pub create_loc: Option<SrcLoc>,
    pub hint: Target,
    /// Grid dimensions as written (the verifier checks they are at most 3).
    pub dims: u32,
    /// Instance count per dimension, as expressions of the parent's parameters.
    pub counts: Vec<Expr>,
    pub params: Vec<Param>,
    /// Types of the output ports: the values of `__hpvm__return` (leaf), or of the child
    /// outputs bound to each port (internal; `None` for a port nothing is bound to).
    pub outputs: Vec<Option<Ty>>,
    /// The field types of the struct the function is declared to return, if it returns one
    /// (HPVM-C node functions usually return `void`).
    pub declared_return: Option<Vec<Ty>>,
    pub kind: NodeKind,
}

impl Node {
    pub fn is_leaf(&self) -> bool {
        matches!(self.kind, NodeKind::Leaf(_))
    }
    pub fn leaf(&self) -> Option<&Leaf> {
        match &self.kind {
            NodeKind::Leaf(l) => Some(l),
            NodeKind::Internal(_) => None,
        }
    }
    pub fn internal(&self) -> Option<&Internal> {
        match &self.kind {
            NodeKind::Internal(i) => Some(i),
            NodeKind::Leaf(_) => None,
        }
    }
    pub fn kind_name(&self) -> &'static str {
        match &self.kind {
            NodeKind::Leaf(l) if l.is_allocation => "allocation",
            NodeKind::Leaf(_) => "leaf",
            NodeKind::Internal(_) => "internal",
        }
    }
}

/// The argument struct passed to `__hpvm__launch`, when its type could be found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgStruct {
    pub name: String,
    pub fields: Vec<Ty>,
    pub packed: bool,
}

/// A host-code use of a launched graph (`__hpvm__wait`, `__hpvm__push`, `__hpvm__pop`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostUse {
    pub what: HostOp,
    pub loc: Option<SrcLoc>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostOp {
    Wait,
    Push,
    Pop,
}

impl fmt::Display for HostOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HostOp::Wait => "wait",
            HostOp::Push => "push",
            HostOp::Pop => "pop",
        })
    }
}

/// A `__hpvm__launch` call in host code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    pub root: NodeId,
    /// The host function containing the call.
    pub host_function: String,
    pub streaming: bool,
    pub args: Option<ArgStruct>,
    pub loc: Option<SrcLoc>,
    /// When the launch sits in a launch helper that was inlined (`crate::helpers`): where the
    /// helper was called.
    pub called_at: Option<SrcLoc>,
    /// Waits, pushes and pops on this launch's handle, in program order.
    pub uses: Vec<HostUse>,
}

/// A whole program's dataflow graphs.
#[derive(Debug, Default)]
pub struct Graph {
    /// The source file (or IR file) the graph was read from, as the user named it.
    pub source: String,
    pub nodes: Arena<Node>,
    pub edges: Arena<Edge>,
    pub launches: Vec<Launch>,
}

impl Graph {
    /// Root nodes (no parent), in creation order.
    pub fn roots(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes.iter().filter(|(_, n)| n.parent.is_none()).map(|(id, _)| id)
    }

    /// The node and all its descendants, parents before children, children in creation order.
    pub fn preorder(&self, root: NodeId) -> Vec<NodeId> {
        let mut out = Vec::new();
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            out.push(id);
            if let Some(internal) = self.nodes[id].internal() {
                stack.extend(internal.children.iter().rev());
            }
        }
        out
    }

    /// Type of output `port` of `node`, if the port exists and has a type.
    pub fn output_ty(&self, node: NodeId, port: u32) -> Option<&Ty> {
        self.nodes[node].outputs.get(port as usize)?.as_ref()
    }
}
