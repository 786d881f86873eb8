//! The command's errors: those of the crates it drives, and its own.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Core(#[from] hpvm_core::Error),
    #[error(transparent)]
    Frontend(#[from] frontend::Error),
    #[error("{0}")]
    Transform(#[from] transform::Error),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("linking {0} failed (see the linker's messages above)")]
    LinkFailed(String),
    #[error("cannot find the runtime library {name}; build the workspace (`cargo build`) or set HPVM_MGPU_RUNTIME to its path")]
    NoRuntime { name: &'static str },
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Analysis(#[from] analysis::Error),
    #[error("{0}")]
    Database(#[from] dashdb::Error),
    #[error("LLVM: {0}")]
    Llvm(String),
    /// The tool itself crashed in a child process ([`crate::isolate`]): the message says
    /// where, and that it is the tool's bug.
    #[error("{0}")]
    Crashed(String),
    /// An error a child process has printed already.
    #[error("")]
    Reported,
}

impl Error {
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io { what: what.into(), source }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
