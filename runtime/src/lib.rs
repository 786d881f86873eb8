//! `runtime`: the library linked into every executable `hpvm-mgpu build` produces.
//!
//! Its job (not built yet): devices (CUDA through the driver API, simulated CPU devices),
//! virtual buffers with per-interval coherence, partitioned launches with cached access
//! intervals and copy plans, and the memory tracker's C ABI. It never links LLVM.
