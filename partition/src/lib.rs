//! `partition`: pure grid partitioning.
//!
//! Its job (not built yet): cut a launch's 1-D, 2-D or 3-D grid into one box per device
//! (optionally weighted), so that the boxes are disjoint and cover the grid exactly. No
//! LLVM, no CUDA: plain integer arithmetic, property-tested.
