//! `analysis`: polyhedral access analysis of leaf nodes.
//!
//! Its job: for every leaf node that runs as a grid, the read and write access relations of
//! each pointer argument as ISL maps from global instance coordinates to array elements,
//! classified (exact write, over-approximated read, may-write, data-dependent), with the grid
//! dimensions to split. Invariant it keeps: a write it cannot prove exact makes the node
//! unpartitionable, never a guessed map.
//!
//! Built so far: [`polly`], the in-process bridge to Polly's ScopInfo (a C++ shim, Polly has
//! no C API). Still to come: wrapping leaf bodies in loops over their instances, cropping what
//! Polly need not see, mapping Polly's parameters back to the node's, classification, split
//! dimensions.

pub mod polly;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Polly: {0}")]
    Polly(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
