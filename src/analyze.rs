//! `hpvm-mgpu analyze`, and the analysis step of `build`.

use crate::error::{Error, Result};
use hpvm_core::frontend::{self, ClangOptions};
use inkwell::context::Context;
use inkwell::module::Module;
use std::path::Path;

/// What wrote a database.
pub fn generator() -> String {
    format!("hpvm-mgpu {}", env!("CARGO_PKG_VERSION"))
}

/// The source record of `path`.
pub fn source_of(path: &Path) -> Result<dashdb::Source> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path.display().to_string(), e))?;
    Ok(dashdb::Source::new(path.display().to_string(), &bytes))
}

/// Reads, verifies and analyses `path`.
pub fn analyze_file(path: &Path, clang: &ClangOptions, opts: &analysis::Options) -> Result<dashdb::Database> {
    let ctx = Context::create();
    let module = frontend::load(&ctx, path, clang)?;
    let graph = hpvm_core::graph_of_module(&module, &path.display().to_string())?;
    analyze_module(&module, &graph, path, opts)
}

/// Analyses a loaded program; the database records `path`'s bytes as its source.
pub fn analyze_module(
    module: &Module<'_>,
    graph: &hpvm_core::Graph,
    path: &Path,
    opts: &analysis::Options,
) -> Result<dashdb::Database> {
    let source = source_of(path)?;
    Ok(analysis::analyze_program(module, graph, source, &generator(), opts)?)
}
