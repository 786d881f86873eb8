//! `hpvm-mgpu analyze`, and the analysis step of `build`.

use crate::error::{Error, Result};
use frontend::ClangOptions;
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

/// [`analyze_file`] in a child process ([`crate::isolate`]): an abort of Polly or ISL is an
/// error naming the file and the node, and the tool goes on to say so.
pub fn analyze_file_isolated(path: &Path, clang: &ClangOptions, opts: &analysis::Options) -> Result<dashdb::Database> {
    let scratch = hpvm_core::scratch::ScratchDir::new("analyze").map_err(|e| Error::io("temporary directory", e))?;
    let patience = Some(crate::isolate::analysis_patience());
    let mut opts = opts.clone();
    let outcome = loop {
        let outcome = crate::isolate::run_with_patience(scratch.path(), "analysis", patience, |ch| {
            ch.progress(&format!("reading {}", path.display()));
            analysis::set_progress(Box::new(ch.writer()));
            Ok(analyze_file(path, clang, &opts)?.to_json().into_bytes())
        })?;
        // A crash on a node: once more with Polly careful on it, as the build does.
        if let crate::isolate::Outcome::Crashed { doing: Some(d), .. } = &outcome {
            if let Some((symbol, _)) = d.strip_prefix(analysis::PROGRESS_NODE).and_then(|d| d.split_once('\t')) {
                if !opts.careful.iter().any(|s| s == symbol) {
                    opts.careful.push(symbol.to_string());
                    continue;
                }
            }
        }
        break outcome;
    };
    match outcome {
        crate::isolate::Outcome::Done(json) => Ok(dashdb::Database::from_json(&String::from_utf8_lossy(&json))?),
        crate::isolate::Outcome::Reported => Err(Error::Reported),
        crate::isolate::Outcome::Crashed { how, doing, stderr, .. } => {
            eprint!("{stderr}");
            Err(Error::Crashed(crate::isolate::crash_message(path, &how, doing.as_deref())))
        }
        crate::isolate::Outcome::Stalled { after, doing, stderr, .. } => {
            eprint!("{stderr}");
            // Before any node: preparing the whole file's code (HeCBench's sortKV and merkle).
            // Each node by itself prepares only its own code, as the build does then.
            if !doing.as_deref().is_some_and(|d| d.starts_with(analysis::PROGRESS_NODE)) && opts.only.is_none() {
                eprintln!(
                    "{}: warning: the access analysis did not finish in {} s while preparing the file's code; its \
                     nodes are analysed one by one",
                    path.display(),
                    after.as_secs_f64().round()
                );
                let ctx = Context::create();
                let module = frontend::load(&ctx, path, clang)?;
                let graph = hpvm_core::graph_of_module(&module, &path.display().to_string())?;
                let budget = 3 * crate::isolate::analysis_patience();
                if let Some(db) = crate::build::node_by_node(&module, &graph, path, scratch.path(), &opts, budget)? {
                    return Ok(db);
                }
            }
            let at = doing.map(|d| format!(", at {d}")).unwrap_or_default();
            Err(Error::Crashed(format!(
                "{}: error: the access analysis did not finish in {} s{at} (HPVM_MGPU_ANALYSIS_SECONDS sets the limit)",
                path.display(),
                after.as_secs_f64().round()
            )))
        }
    }
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

/// `hpvm-mgpu specialize`: node `node` of the analysis input on standard input (bitcode the
/// build embedded, `transform::host`), analysed with `values` built in; the database of that
/// node alone, as JSON. The runtime runs it in a process of its own and trusts only a
/// database that validates.
pub fn specialize(node: &str, values: Vec<(String, i64)>) -> Result<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::io::stdin().read_to_end(&mut bytes).map_err(|e| Error::io("standard input", e))?;
    let ctx = Context::create();
    let buffer = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(&bytes, "analysis input");
    let module = Module::parse_bitcode_from_buffer(&buffer, &ctx)
        .map_err(|e| Error::Usage(format!("standard input is not an analysis input: {e}")))?;
    let graph = hpvm_core::graph_of_module(&module, "<analysis input>")?;
    let opts = analysis::Options { only: Some(node.to_string()), fixed: values, ..Default::default() };
    let source = dashdb::Source::new("<analysis input>".to_string(), &bytes);
    Ok(analysis::analyze_program(&module, &graph, source, &generator(), &opts)?.to_json())
}
