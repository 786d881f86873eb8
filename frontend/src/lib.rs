//! The frontends: from a source file to an LLVM module ready for graph building.
//!
//! C and C++ go through clang-19 ([`c`]); CUDA sources through clang-19 twice, device and
//! host halves apart, their kernels made graph nodes ([`cuda`]); `.ll`/`.bc` files are read
//! as they are ([`ir`]). Every module is then prepared alike ([`ir::prepare`]): `-O0` code
//! with debug info and value names, optnone off, then `sroa,early-cse` in process so that
//! handles and ports are SSA values.
//!
//! Invariants:
//! - A module [`load`] returns verifies, has been prepared, and keeps the user's debug
//!   locations, so every diagnostic after it can name the user's `file:line`.
//! - A CUDA module's node code calls only what `hpvm_core::markers` names for what only a
//!   GPU has; every backend gives those calls their code.
//! - Layering: [`options`] and [`clang`] know nothing of languages; [`c`] and [`cuda`] use
//!   them and not each other; this module alone dispatches on the input's kind.

pub mod c;
pub mod clang;
pub mod cuda;
pub mod ir;
pub mod options;

pub use options::{ClangOptions, InputKind, Language};

use hpvm_core::scratch::ScratchDir;
use hpvm_core::Graph;
use inkwell::context::Context;
use inkwell::module::Module;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}: no such file")]
    MissingInput(String),
    #[error("{0}: unknown kind of input (expected .c, .cpp/.cc/.cxx, .cu, .ll or .bc; or use -x c|c++|cuda)")]
    UnknownInput(String),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("cannot run {tool}: {source} (is clang-19 installed? scripts/bootstrap installs it)")]
    ToolMissing { tool: String, source: std::io::Error },
    #[error("{file}: compilation failed (see the compiler's messages above)")]
    CompileFailed { file: String },
    #[error("{file}: not valid LLVM IR: {message}")]
    BadIr { file: String, message: String },
    #[error("LLVM: {0}")]
    Llvm(String),
    /// A CUDA program using what the CUDA frontend does not take (yet); the message starts
    /// with the user's file:line.
    #[error("{0}")]
    Cuda(String),
    /// The graph the module describes is not a valid one.
    #[error(transparent)]
    Graph(#[from] hpvm_core::Error),
}

impl Error {
    pub(crate) fn io(what: &str, source: std::io::Error) -> Error {
        Error::Io { what: what.to_string(), source }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Loads any supported input into `ctx`, compiled (if source) and prepared.
pub fn load<'ctx>(ctx: &'ctx Context, path: &Path, opts: &ClangOptions) -> Result<Module<'ctx>> {
    if !path.exists() {
        return Err(Error::MissingInput(path.display().to_string()));
    }
    let module = match InputKind::detect(path, opts.language)? {
        InputKind::Ir => ir::read_ir(ctx, path)?,
        InputKind::Source(Language::Cuda) => {
            let module = cuda::load(ctx, path, opts)?;
            ir::prepare(&module)?;
            return Ok(module);
        }
        InputKind::Source(lang) => {
            let scratch = ScratchDir::new("ir").map_err(|e| Error::io("temporary directory", e))?;
            let bc = scratch.path().join("input.bc");
            c::compile_source(path, lang, opts, &bc)?;
            ir::read_ir(ctx, &bc)?
        }
    };
    ir::prepare(&module)?;
    Ok(module)
}

/// Reads, builds and verifies the graph of `path` (any input [`load`] takes).
pub fn load_graph(path: &Path, opts: &ClangOptions) -> Result<Graph> {
    let ctx = Context::create();
    let module = load(&ctx, path, opts)?;
    Ok(hpvm_core::graph_of_module(&module, &path.display().to_string())?)
}
