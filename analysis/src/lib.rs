//! `analysis`: polyhedral access analysis of leaf nodes.
//!
//! Its job (not built yet): for every leaf node that runs as a grid, find with Polly (in
//! process, through a small C++ shim) the read and write access relations of each pointer
//! argument as ISL maps from global instance coordinates to array elements; classify every
//! access (exact write, over-approximated read, may-write, data-dependent); choose the grid
//! dimensions to split. Invariant it will keep: a write it cannot prove exact makes the node
//! unpartitionable, never a guessed map.
