//! `hpvm-core`: the HPVM dataflow graph (DFG) of a program.
//!
//! A program written against `include/hpvm.h` describes, through calls of the HPVM-C API,
//! a hierarchy of dataflow graphs: leaf nodes compute, internal nodes hold child graphs,
//! edges and bindings connect ports, and host code launches root nodes. This crate reads
//! that description from LLVM IR (the `frontend` crate makes it from sources) into a
//! [`Graph`] ([`build`]) and checks it ([`verify`]).
//!
//! Invariants:
//! - A [`Graph`] returned by [`graph_of_module`] has passed [`verify::verify`]: every port is in
//!   range, the two ends of every edge and binding have the same type, every child input is
//!   fed exactly once, every internal node's outputs are bound exactly once, one-to-one edges
//!   join equal grids, grids have at most 3 dimensions with one count each, every count is an
//!   expression of the parent's parameters, node functions form a tree (each created once, no
//!   recursion) and launches name roots. Backends may rely on all of it.
//! - Nodes, edges are addressed by typed handles ([`NodeId`], [`EdgeId`]) into arenas.
//! - The graph refers to LLVM by name only and can outlive the LLVM context.
//! - Every diagnostic carries the user's `file:line:column` when the IR has debug info.

pub mod build;
pub mod ctors;
pub mod diag;
pub mod entity;
pub mod expr;
pub mod graph;
pub mod handles;
pub mod helpers;
pub mod intrinsics;
mod ir;
pub mod libm;
pub mod loc;
pub mod markers;
pub mod names;
pub mod plan;
pub mod print;
pub mod scratch;
pub mod toolchain;
pub mod verify;

pub use diag::{Diagnostic, Rule};
pub use graph::{EdgeId, Graph, Node, NodeId};
/// A value of a module being read, for the passes after the frontend (`transform`'s scans).
pub use ir::Val;
// The analysis and the access tracer must agree on which buffer an access is into.
pub use ir::pointer_param;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}: no HPVM dataflow graph: the program never calls __hpvm__launch")]
    NotHpvm(String),
    #[error("{} error{} in the dataflow graph", .0.len(), if .0.len() == 1 { "" } else { "s" })]
    Invalid(Vec<Diagnostic>),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Builds and verifies the graph of a prepared module (the `frontend` crate prepares them).
pub fn graph_of_module(module: &inkwell::module::Module<'_>, source: &str) -> Result<Graph> {
    let (graph, mut diags) = build::build(module, source);
    diags.extend(verify::verify(&graph));
    if !diags.is_empty() {
        diag::sort(&mut diags);
        return Err(Error::Invalid(diags));
    }
    if graph.launches.is_empty() {
        return Err(Error::NotHpvm(source.to_string()));
    }
    Ok(graph)
}
