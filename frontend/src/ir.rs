//! LLVM IR files, and the two passes every module gets before the graph builder reads it.

use crate::{Error, Result};
use hpvm_core::toolchain;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use std::path::Path;

/// Reads an IR file (text or bitcode) into `ctx`.
pub fn read_ir<'ctx>(ctx: &'ctx Context, path: &Path) -> Result<Module<'ctx>> {
    let buf = inkwell::memory_buffer::MemoryBuffer::create_from_file(path)
        .map_err(|e| Error::BadIr { file: path.display().to_string(), message: e.to_string() })?;
    let module = ctx
        .create_module_from_ir(buf)
        .map_err(|e| Error::BadIr { file: path.display().to_string(), message: e.to_string() })?;
    module.verify().map_err(|e| Error::BadIr { file: path.display().to_string(), message: e.to_string() })?;
    Ok(module)
}

/// Promotes stack slots to SSA values so that the builder sees handles and ports directly,
/// and inlines launch helpers so that every launch names its root ([`hpvm_core::helpers`]).
pub fn prepare(module: &Module<'_>) -> Result<()> {
    let tm = toolchain::host_machine().map_err(Error::Llvm)?;
    let run = |passes: &str| {
        module.run_passes(passes, &tm, PassBuilderOptions::create()).map_err(|e| Error::Llvm(e.to_string()))
    };
    run("function(sroa,early-cse)")?;
    if hpvm_core::helpers::mark_launch_helpers(module) {
        run("always-inline,globaldce,function(sroa,early-cse)")?;
    }
    Ok(())
}
