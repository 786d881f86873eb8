//! `transform`: lowering of the verified dataflow graph to code.
//!
//! Its job (not built yet): turn leaf nodes into CPU functions over a box of instances and
//! into NVPTX kernels with block-offset and super-grid arguments, and rewrite host code so
//! `__hpvm__launch`/`wait` and the memory tracker call the runtime. It only ever sees graphs
//! that `hpvm_core::verify` accepted.
