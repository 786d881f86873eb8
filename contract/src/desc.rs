//! The program description: what the compiler tells the runtime about a module's graphs.
//!
//! `hpvm-mgpu build` serializes one [`Program`] per compiled module as JSON into the
//! executable, next to a table of leaf-node entry points. The runtime parses it once per
//! module (cached) and interprets internal nodes from it; leaves run compiled code.
//!
//! Byte layouts are fixed by the compiler and only read here: a node's *argument buffer*
//! holds its parameters packed in order (`ValueDesc::offset`), its *output record* holds its
//! outputs packed in order. A leaf entry point loads its parameters from an argument buffer
//! and stores each instance's outputs into its record.

use serde::{Deserialize, Serialize};

/// Bumped whenever the JSON changes meaning; the runtime refuses other versions.
pub const VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Program {
    pub version: u32,
    /// The source file, for messages.
    pub source: String,
    pub nodes: Vec<NodeDesc>,
    pub launches: Vec<LaunchDesc>,
    /// The analysis database of the source (dashdb JSON), when the build ran the analysis.
    #[serde(default)]
    pub analysis: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeDesc {
    /// The node function's symbol (what the analysis database and entry points key on).
    pub name: String,
    /// The name people read (demangled); empty in descriptions that predate it.
    #[serde(default)]
    pub display: String,
    /// `file:line` of the definition, for messages.
    pub loc: String,
    pub dims: u32,
    /// Instance count per dimension, over the parent's parameters.
    pub counts: Vec<ExprDesc>,
    pub params: Vec<ValueDesc>,
    pub outputs: Vec<ValueDesc>,
    pub kind: KindDesc,
    /// The node's GPU kernel, when it has one.
    #[serde(default)]
    pub kernel: Option<KernelDesc>,
    /// The node as a launch unit (how a GPU would run it; present whether or not a kernel
    /// was compiled): what the runtime partitions across devices.
    #[serde(default)]
    pub shape: Option<KernelKind>,
    /// Why a leaf cannot be split: it keeps pointers in memory (`transform::indirect`), which
    /// hold the program's addresses; with the user's file:line. `None` for other nodes.
    #[serde(default)]
    pub indirect: Option<String>,
    /// Such a leaf's code translates the addresses it loads and stores
    /// (`transform::indirect::translate`): it runs whole on one device, every buffer current
    /// there, with that device's address table. Without it, it runs on the host's copies.
    #[serde(default)]
    pub translated: bool,
}

/// A GPU kernel compiled for a node (its code is in the module's PTX).
///
/// Parameters, in order: the leaf's parameters (as in its argument buffer), then the
/// [`crate::kernel`] parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelDesc {
    pub name: String,
    pub kind: KernelKind,
    /// The same kernel reading the `readonly` parameters through the read-only data cache;
    /// legal only when no other parameter writes the buffers they point into.
    #[serde(default)]
    pub nc_name: Option<String>,
    /// The kernel and its read-only-cache variant for launches from block 0: the offset
    /// parameters are there but unread (a partition's launch runs the others).
    #[serde(default)]
    pub whole_name: Option<String>,
    #[serde(default)]
    pub nc_whole_name: Option<String>,
    #[serde(default)]
    pub readonly: Vec<u32>,
    /// Parameters (among `readonly`) the read-only-cache variants read from the GPU module's
    /// `.const` variable named beside each, not through the parameter: those variants run
    /// only where the parameter's device copy is that variable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bank: Vec<(u32, String)>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum KernelKind {
    /// An internal node run as one launch: its instances are thread blocks and the instances
    /// of its leaf child `leaf` are the threads of each block. An allocation child `alloc`
    /// gets shared memory: the leaf's parameters in `shared_params` receive offsets into it.
    /// Each output of the internal node is one of its inputs, passed through: `(output port,
    /// input port)` in `outputs` (the leaf returns that parameter unchanged).
    Blocks {
        leaf: u32,
        alloc: Option<u32>,
        shared_params: Vec<u32>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        outputs: Vec<(u32, u32)>,
    },
    /// A leaf whose grid is cut into blocks of the runtime's choosing (padding masked).
    Grid,
}

impl NodeDesc {
    /// The name for messages: the demangled name, else the symbol.
    pub fn shown(&self) -> &str {
        if self.display.is_empty() {
            &self.name
        } else {
            &self.display
        }
    }

    pub fn is_leaf(&self) -> bool {
        matches!(self.kind, KindDesc::Leaf { .. })
    }

    /// Size in bytes of the argument buffer.
    pub fn args_size(&self) -> usize {
        self.params.iter().map(|p| p.offset as usize + p.size as usize).max().unwrap_or(0)
    }
    /// Size in bytes of one output record.
    pub fn outputs_size(&self) -> usize {
        self.outputs.iter().map(|p| p.offset as usize + p.size as usize).max().unwrap_or(0)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum KindDesc {
    Leaf {
        /// Index into the module's entry-point table.
        entry: u32,
        /// Uses `__hpvm__barrier`: the instances of one parent instance run concurrently.
        barrier: bool,
        /// Only allocates: run once per parent instance, with scratch memory scoped to it.
        allocation: bool,
    },
    Internal {
        /// Node indices, in creation order.
        children: Vec<u32>,
        edges: Vec<EdgeDesc>,
        bind_in: Vec<BindDesc>,
        bind_out: Vec<BindDesc>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScalarKind {
    /// Two's complement integer, read sign-extended.
    Int,
    Float,
    Pointer,
    /// Anything else (vectors, structs): moved as bytes only.
    Other,
}

/// One parameter or output: where it sits in its buffer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValueDesc {
    pub name: String,
    pub offset: u32,
    pub size: u32,
    pub kind: ScalarKind,
    /// Pointer read / written by the node (`__hpvm__attributes`).
    #[serde(default)]
    pub read: bool,
    #[serde(default)]
    pub write: bool,
    /// Pointer: index of the parameter holding its size in bytes.
    #[serde(default)]
    pub size_param: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EdgeDesc {
    pub src: u32,
    pub dst: u32,
    pub one_to_one: bool,
    pub src_port: u32,
    pub dst_port: u32,
    pub streaming: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BindDesc {
    pub child: u32,
    pub parent_port: u32,
    pub child_port: u32,
    pub streaming: bool,
}

/// A `__hpvm__launch` site: which root, and how the user's argument struct is laid out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaunchDesc {
    pub root: u32,
    pub loc: String,
    /// Offset of each root parameter in the user's struct.
    pub arg_offsets: Vec<u32>,
    /// Offset of the trailing output struct in the user's struct.
    pub out_base: u32,
    /// Offset of each root output in the output struct.
    pub out_offsets: Vec<u32>,
    /// Size of the trailing output struct (what `__hpvm__pop` returns).
    pub out_size: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExprDesc {
    Const(i64),
    Param(u32),
    Bin(BinOp, Box<ExprDesc>, Box<ExprDesc>),
}

/// The integer operations of count expressions: the compiler's (`hpvm_core::expr`) and the
/// description's are these, so that both evaluate alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Shl,
    Shr,
    And,
    Or,
    Xor,
}

impl BinOp {
    /// `a op b` as C computes it on `i64`; `None` on overflow, division by zero or a shift
    /// out of range.
    pub fn apply(self, a: i64, b: i64) -> Option<i64> {
        match self {
            BinOp::Add => a.checked_add(b),
            BinOp::Sub => a.checked_sub(b),
            BinOp::Mul => a.checked_mul(b),
            BinOp::Div => a.checked_div(b),
            BinOp::Rem => a.checked_rem(b),
            BinOp::Shl => u32::try_from(b).ok().and_then(|b| a.checked_shl(b)),
            BinOp::Shr => u32::try_from(b).ok().and_then(|b| a.checked_shr(b)),
            BinOp::And => Some(a & b),
            BinOp::Or => Some(a | b),
            BinOp::Xor => Some(a ^ b),
        }
    }

    /// C's spelling.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::And => "&",
            BinOp::Or => "|",
            BinOp::Xor => "^",
        }
    }

    /// C's precedence, higher binds tighter (to print only the parentheses needed).
    pub fn precedence(self) -> u8 {
        match self {
            BinOp::Mul | BinOp::Div | BinOp::Rem => 5,
            BinOp::Add | BinOp::Sub => 4,
            BinOp::Shl | BinOp::Shr => 3,
            BinOp::And => 2,
            BinOp::Xor => 1,
            BinOp::Or => 0,
        }
    }
}

impl ExprDesc {
    /// Whether parameter `i` appears in the expression.
    pub fn uses(&self, i: u32) -> bool {
        match self {
            ExprDesc::Const(_) => false,
            ExprDesc::Param(p) => *p == i,
            ExprDesc::Bin(_, a, b) => a.uses(i) || b.uses(i),
        }
    }

    /// Evaluates with `param(i)` giving parameter `i`'s integer value. `None` on overflow,
    /// division by zero or a missing parameter.
    pub fn eval(&self, param: &dyn Fn(u32) -> Option<i64>) -> Option<i64> {
        match self {
            ExprDesc::Const(c) => Some(*c),
            ExprDesc::Param(i) => param(*i),
            ExprDesc::Bin(op, a, b) => {
                let (a, b) = (a.eval(param)?, b.eval(param)?);
                op.apply(a, b)
            }
        }
    }
}

impl Program {
    /// Parses and checks a description; every index it holds is in range afterwards.
    pub fn parse(json: &str) -> Result<Program, String> {
        let p: Program = serde_json::from_str(json).map_err(|e| format!("malformed program description: {e}"))?;
        if p.version != VERSION {
            return Err(format!(
                "program description version {} but this runtime reads version {VERSION}; rebuild the program",
                p.version
            ));
        }
        p.check()?;
        Ok(p)
    }

    fn check(&self) -> Result<(), String> {
        let n = self.nodes.len() as u32;
        let node_ok = |i: u32| if i < n { Ok(()) } else { Err(format!("node index {i} out of range")) };
        for node in &self.nodes {
            if node.dims > 3 || node.counts.len() != node.dims as usize {
                return Err(format!("node {}: bad grid", node.shown()));
            }
            if let KindDesc::Internal { children, edges, bind_in, bind_out } = &node.kind {
                for &c in children {
                    node_ok(c)?;
                }
                for e in edges {
                    node_ok(e.src)?;
                    node_ok(e.dst)?;
                    let (s, d) = (&self.nodes[e.src as usize], &self.nodes[e.dst as usize]);
                    if e.src_port as usize >= s.outputs.len() || e.dst_port as usize >= d.params.len() {
                        return Err(format!("node {}: edge port out of range", node.shown()));
                    }
                }
                for b in bind_in {
                    node_ok(b.child)?;
                    if b.parent_port as usize >= node.params.len()
                        || b.child_port as usize >= self.nodes[b.child as usize].params.len()
                    {
                        return Err(format!("node {}: input binding out of range", node.shown()));
                    }
                }
                for b in bind_out {
                    node_ok(b.child)?;
                    if b.parent_port as usize >= node.outputs.len()
                        || b.child_port as usize >= self.nodes[b.child as usize].outputs.len()
                    {
                        return Err(format!("node {}: output binding out of range", node.shown()));
                    }
                }
            }
            for kind in node.shape.iter().chain(node.kernel.iter().map(|k| &k.kind)) {
                match kind {
                    KernelKind::Blocks { leaf, alloc, outputs, .. } => {
                        let KindDesc::Internal { children, .. } = &node.kind else {
                            return Err(format!("node {}: a blocks launch of a leaf", node.shown()));
                        };
                        for &(out, input) in outputs {
                            let (o, i) = (node.outputs.get(out as usize), node.params.get(input as usize));
                            if o.zip(i).is_none_or(|(o, i)| o.size != i.size) {
                                return Err(format!("node {}: an output passed through from no input", node.shown()));
                            }
                        }
                        if !children.contains(leaf) || alloc.is_some_and(|a| !children.contains(&a)) {
                            return Err(format!(
                                "node {}: a blocks launch of nodes that are not its children",
                                node.shown()
                            ));
                        }
                        if !self.nodes[*leaf as usize].is_leaf() {
                            return Err(format!("node {}: a blocks launch of an internal node", node.shown()));
                        }
                    }
                    KernelKind::Grid => {
                        if !node.is_leaf() {
                            return Err(format!("node {}: a grid launch of an internal node", node.shown()));
                        }
                    }
                }
            }
        }
        for l in &self.launches {
            node_ok(l.root)?;
            let root = &self.nodes[l.root as usize];
            if l.arg_offsets.len() != root.params.len() || l.out_offsets.len() != root.outputs.len() {
                return Err(format!("launch at {}: argument layout does not match {}", l.loc, root.shown()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_evaluate_over_parameters() {
        let e = ExprDesc::Bin(BinOp::Div, Box::new(ExprDesc::Param(1)), Box::new(ExprDesc::Const(16)));
        let params = [7i64, 64];
        assert_eq!(e.eval(&|i| params.get(i as usize).copied()), Some(4));
        let zero = ExprDesc::Bin(BinOp::Rem, Box::new(ExprDesc::Const(1)), Box::new(ExprDesc::Const(0)));
        assert_eq!(zero.eval(&|_| None), None);
    }

    #[test]
    fn refuses_other_versions_and_bad_indices() {
        let mut p = Program { version: VERSION, source: "x.c".into(), nodes: vec![], launches: vec![], analysis: None };
        assert!(Program::parse(&serde_json::to_string(&p).unwrap()).is_ok());
        p.version = VERSION + 1;
        assert!(Program::parse(&serde_json::to_string(&p).unwrap()).unwrap_err().contains("version"));
        p.version = VERSION;
        p.launches.push(LaunchDesc {
            root: 3,
            loc: "x.c:1".into(),
            arg_offsets: vec![],
            out_base: 0,
            out_offsets: vec![],
            out_size: 0,
        });
        assert!(Program::parse(&serde_json::to_string(&p).unwrap()).unwrap_err().contains("out of range"));
    }
}
