//! `hpvm-mgpu build`: sources to an executable (or objects, or IR).
//!
//! Per source file: clang-19 to IR, the graph read and verified, nodes lowered for the CPU
//! and host code rewritten (files without a launch are compiled plainly), the module
//! optimized at the user's `-O` level and emitted as an object. Then one link with the runtime
//! library. Intermediate files live in a scratch directory removed at the end; the output is
//! written under a temporary name and renamed, so an existing file is only ever replaced by a
//! complete new one (a device or pipe, `-o /dev/null`, is written into instead).

use crate::error::{Error, Result};
use crate::isolate;
use frontend::cuda::Halves;
use frontend::{ClangOptions, InputKind, Language};
use hpvm_core::scratch::ScratchDir;
use inkwell::context::Context;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{FileType, TargetMachine};
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Clone)]
pub struct BuildOptions {
    pub inputs: Vec<PathBuf>,
    /// Per input, the language `-x` gave it (`None`: from its extension).
    pub languages: Vec<Option<Language>>,
    pub output: Option<PathBuf>,
    pub opt_level: u8,
    pub clang: ClangOptions,
    pub libs: Vec<String>,
    pub lib_dirs: Vec<PathBuf>,
    pub compile_only: bool,
    pub emit_llvm: bool,
    /// Relocatable device code (`--rdc`): CUDA files become carriers of their halves, which
    /// the link compiles as one ([`crate::rdc`]).
    pub rdc: bool,
    /// GPU architecture of the kernels' PTX (`sm_80`...); `None`: no GPU code.
    pub gpu_arch: Option<String>,
    /// Architectures whose machine code the executable carries beside the PTX (ptxas).
    pub sass: Vec<String>,
    /// Also write the PTX beside the output (`--emit-ptx`).
    pub emit_ptx: bool,
    /// An analysis database to use instead of analysing (`--db`).
    pub db: Option<PathBuf>,
    /// Split dimensions asked for (`--split`).
    pub split: Vec<(String, Vec<u32>)>,
    /// Record buffer accesses at run time (`--trace-accesses`, for the analysis's tests).
    pub trace_accesses: bool,
}

const RUNTIME_LIB: &str = "libhpvm_runtime.a";
/// What the Rust standard library in the runtime needs from the system.
const RUNTIME_NATIVE_LIBS: [&str; 7] = ["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl", "-lc"];

pub fn build(opts: &BuildOptions) -> Result<()> {
    if opts.inputs.is_empty() {
        return Err(Error::Usage("no input files".into()));
    }
    let stops_early = opts.compile_only || opts.emit_llvm;
    if stops_early && opts.output.is_some() && opts.inputs.len() > 1 {
        return Err(Error::Usage("-o with -c or --emit-llvm takes a single input".into()));
    }
    for input in &opts.inputs {
        if !input.exists() {
            return Err(frontend::Error::MissingInput(input.display().to_string()).into());
        }
    }
    let stem_of = |input: &Path| input.file_stem().map_or_else(|| "out".into(), |s| s.to_string_lossy().into_owned());
    let outputs: Vec<PathBuf> = if stops_early {
        let ext = if opts.emit_llvm { "ll" } else { "o" };
        opts.inputs
            .iter()
            .map(|i| opts.output.clone().unwrap_or_else(|| PathBuf::from(format!("{}.{ext}", stem_of(i)))))
            .collect()
    } else {
        vec![opts.output.clone().unwrap_or_else(|| PathBuf::from("a.out"))]
    };
    // As gcc does: never overwrite an input with an output.
    for out in &outputs {
        if let Some(input) = opts.inputs.iter().find(|i| same_file(i, out)) {
            return Err(Error::Usage(format!(
                "the output file `{}` is also an input (`{}`); refusing to overwrite it",
                out.display(),
                input.display()
            )));
        }
    }
    let scratch = ScratchDir::new("build").map_err(|e| Error::io("temporary directory", e))?;
    let mut objects = Vec::new();
    for (i, input) in opts.inputs.iter().enumerate() {
        let ext = input.extension().and_then(|e| e.to_str()).unwrap_or("");
        let language = opts.languages.get(i).copied().flatten();
        if matches!(ext, "o" | "a" | "so") && language.is_none() {
            objects.push(input.clone());
            continue;
        }
        // Checked before any work: an input of no known kind is refused by name, and a
        // CUDA library the toolchain lacks by the include that names it.
        InputKind::detect(input, language)?;
        let cuda_include = hpvm_core::toolchain::cuda_path().map(|p| p.join("include"));
        if let Some(message) = crate::libraries::missing_header(input, cuda_include.as_deref()) {
            eprintln!("{message}");
            return Err(Error::Reported);
        }
        let out =
            if stops_early { outputs[i].clone() } else { scratch.path().join(format!("{i}-{}.o", stem_of(input))) };
        let cuda = matches!(InputKind::detect(input, language)?, InputKind::Source(Language::Cuda));
        if cuda && opts.rdc && !opts.emit_llvm {
            let halves = frontend::cuda::compile_halves(input, &clang_for(opts, language))?;
            let tmp = if stops_early { temp_beside(&out) } else { out.clone() };
            let _listed = stops_early.then(|| hpvm_core::scratch::remove_on_signal(&tmp));
            crate::rdc::write_object(&halves, &tmp, &codegen_machine(opts.opt_level)?)?;
            if stops_early {
                install(&tmp, &out)?;
            }
        } else {
            compile_isolated(input, opts, scratch.path(), &|opts| {
                compile_one(input, language, cuda, opts, &out, stops_early, scratch.path())
            })?;
        }
        objects.push(out);
    }
    if stops_early {
        return Ok(());
    }
    // Relocatable device code: the carriers' sources compiled as one.
    let mut carried = Vec::new();
    objects.retain(|o| match crate::rdc::read_object(o) {
        Some(halves) => {
            carried.push(halves);
            false
        }
        None => true,
    });
    if let Some(first) = carried.first() {
        let out = scratch.path().join("rdc-linked.o");
        let shown = PathBuf::from(&first.source);
        compile_isolated(&shown, opts, scratch.path(), &|opts| compile_carried(&carried, opts, &out, scratch.path()))?;
        objects.push(out);
    }
    link(&objects, &outputs[0], opts)
}

/// Runs `compile` (of `input`, or of the sources it names) in a child process: an abort
/// inside LLVM, Polly or ISL is reported, and what it left in the scratch directory goes with
/// it. Where compiling kernels for the GPU crashes, they are compiled for the CPU instead.
fn compile_isolated(
    input: &Path,
    opts: &BuildOptions,
    scratch: &Path,
    compile: &dyn Fn(&BuildOptions) -> Result<()>,
) -> Result<()> {
    let run = |opts: &BuildOptions| {
        isolate::run(scratch, "compile", |_| {
            compile(opts)?;
            Ok(Vec::new())
        })
    };
    let mut outcome = run(opts)?;
    if let (isolate::Outcome::Crashed { how, .. }, Some(_)) = (&outcome, &opts.gpu_arch) {
        // LLVM's NVPTX backend aborts on some code: the file's kernels then run on the
        // CPU, and the program builds.
        eprintln!(
            "{}: warning: compiling this file's kernels for the GPU crashed ({how}); they run on the CPU. This \
             is a bug of hpvm-mgpu: please report it with the file",
            input.display()
        );
        outcome = run(&BuildOptions { gpu_arch: None, ..opts.clone() })?;
    }
    match outcome {
        isolate::Outcome::Done(_) => Ok(()),
        isolate::Outcome::Reported => Err(Error::Reported),
        isolate::Outcome::Crashed { how, doing, .. } => {
            Err(Error::Crashed(isolate::crash_message(input, &how, doing.as_deref())))
        }
        // The compile stage runs without a limit.
        isolate::Outcome::Stalled { .. } => unreachable!("no patience was given"),
    }
}

/// Whether `a` and `b` name the same file (`b` may not exist yet).
pub(crate) fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// One source (or IR) file (a CUDA source if `cuda`) to an object (or `.ll` with
/// `--emit-llvm`) at `out`.
fn compile_one(
    input: &Path,
    language: Option<Language>,
    cuda: bool,
    opts: &BuildOptions,
    out: &Path,
    user_visible: bool,
    scratch: &Path,
) -> Result<()> {
    let ctx = Context::create();
    tracing::info!("compiling {}", input.display());
    let module = frontend::load(&ctx, input, &clang_for(opts, language))?;
    compile_module(&module, &Origin { input, cuda, files: 1 }, opts, out, user_visible, scratch)
}

/// The clang options of an input in `language` (`None`: from its extension).
fn clang_for(opts: &BuildOptions, language: Option<Language>) -> ClangOptions {
    let mut clang = opts.clang.clone();
    clang.opt_level = Some(opts.opt_level);
    clang.language = language;
    clang
}

/// The sources of relocatable-device-code carriers ([`crate::rdc`]), compiled as one to the
/// object `out`.
fn compile_carried(carried: &[Halves], opts: &BuildOptions, out: &Path, scratch: &Path) -> Result<()> {
    let ctx = Context::create();
    let shown = carried.iter().map(|h| h.source.as_str()).collect::<Vec<_>>().join(", ");
    tracing::info!("compiling the device code of {shown} as one");
    let module = frontend::cuda::load_halves(&ctx, carried)?;
    frontend::ir::prepare(&module)?;
    let origin = Origin { input: Path::new(&carried[0].source), cuda: true, files: carried.len() as u32 };
    compile_module(&module, &origin, opts, out, false, scratch)
}

/// What a module was compiled from: its source (the first, where several were compiled as
/// one), whether CUDA, and how many files.
struct Origin<'a> {
    input: &'a Path,
    cuda: bool,
    files: u32,
}

/// A loaded module (of `origin`) to an object (or `.ll` with `--emit-llvm`) at `out`.
fn compile_module(
    module: &inkwell::module::Module<'_>,
    origin: &Origin<'_>,
    opts: &BuildOptions,
    out: &Path,
    user_visible: bool,
    scratch: &Path,
) -> Result<()> {
    let (input, cuda) = (origin.input, origin.cuda);
    let tm = codegen_machine(opts.opt_level)?;
    let data = tm.get_target_data();
    match hpvm_core::graph_of_module(module, &input.display().to_string()) {
        Ok(graph) => {
            tracing::info!("{}: {} nodes, {} launches", input.display(), graph.nodes.len(), graph.launches.len());
            let db = analysis_of(module, &graph, origin, opts, scratch)?;
            let json = db.as_ref().map(|d| d.to_json());
            // A node that wants its launch's values (`dashdb::Node::specializable`), or whose
            // maps' conditions may fail at a launch (`may_respecialize`), is analysed again at
            // run time, from the module as the analysis read it.
            // Its path, then what tells this compiler from a rebuilt one (size and time): the
            // runtime keeps the maps it makes under that, even where the compiler is absent.
            let compiler = std::env::current_exe().ok().and_then(|p| {
                let meta = std::fs::metadata(&p).ok()?;
                let at = meta.modified().ok()?.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos();
                Some(format!("{}\n{}-{at}", p.display(), meta.len()))
            });
            let bitcode =
                (db.as_ref().is_some_and(|d| d.nodes.iter().any(|n| n.specializable || n.may_respecialize()))
                    && compiler.is_some()
                    && !opts.trace_accesses)
                    .then(|| module.write_bitcode_to_memory());
            let sass_dir = scratch.join(format!("sass-{}", out.file_name().unwrap_or_default().to_string_lossy()));
            std::fs::create_dir_all(&sass_dir).map_err(|e| Error::io(sass_dir.display().to_string(), e))?;
            if cuda && opts.gpu_arch.is_some() {
                transform::gpu::configure_for_cuda(!opts.clang.no_fmad);
            }
            let lowered = transform::lower(
                module,
                &graph,
                &data,
                &transform::LowerOptions {
                    gpu_arch: opts.gpu_arch.as_deref(),
                    sass: &opts.sass,
                    scratch: Some(&sass_dir),
                    analysis: json.as_deref(),
                    trace_accesses: opts.trace_accesses,
                    analysis_input: bitcode
                        .as_ref()
                        .zip(compiler.as_deref())
                        .map(|(b, c)| transform::host::AnalysisInput { bitcode: b.as_slice(), compiler: c }),
                    math: match (cuda, opts.clang.fast_math) {
                        (true, true) => transform::gpu::Math::CudaFast,
                        (true, false) => transform::gpu::Math::Cuda,
                        (false, _) => transform::gpu::Math::C,
                    },
                },
            )?;
            for f in &lowered.fallbacks {
                let node = &graph.nodes[f.node];
                eprintln!(
                    "{}: note: node `{}` runs on the CPU: {}",
                    hpvm_core::loc::show(&node.def_loc),
                    node.display,
                    f.reason
                );
            }
            for (id, why, translated) in &lowered.indirect {
                let runs = if *translated {
                    "runs whole on one device, every buffer current there, not split"
                } else {
                    "runs on the host's copies of the buffers, not split"
                };
                eprintln!(
                    "{}: note: node `{}` {runs}: {why}",
                    hpvm_core::loc::show(&graph.nodes[*id].def_loc),
                    graph.nodes[*id].display,
                );
            }
            for note in &lowered.sass.notes {
                eprintln!("{}: note: GPU machine code: {note}", input.display());
            }
            if let (Some(ptx), true) = (&lowered.ptx, opts.emit_ptx) {
                // Beside the final output, named after the source.
                let dir = opts.output.as_deref().and_then(Path::parent).unwrap_or(Path::new(""));
                let stem = input.file_stem().map_or_else(|| "out".into(), |s| s.to_string_lossy().into_owned());
                let path = dir.join(format!("{stem}.ptx"));
                std::fs::write(&path, ptx).map_err(|e| Error::io(path.display().to_string(), e))?;
            }
            tracing::info!("{}: {} GPU kernels", input.display(), lowered.kernels);
            if cuda {
                // A kernel's graph belongs to its file: a kernel defined in several files (a
                // template instantiated in each, or `static`) has a graph in each, which must
                // neither clash at the link nor merge, since each file's functions keep their
                // own node state. Lowering is done, so nothing looks them up by name again.
                for (_, node) in graph.nodes.iter() {
                    if let Some(f) = module.get_function(&node.name) {
                        f.set_linkage(inkwell::module::Linkage::Internal);
                    }
                }
            }
        }
        Err(hpvm_core::Error::NotHpvm(_)) => tracing::info!("{}: no launch, compiled as plain code", input.display()),
        Err(e) => return Err(e.into()),
    }
    module.set_triple(&tm.get_triple());
    module.set_data_layout(&data.get_data_layout());
    if opts.opt_level > 0 {
        let passes = format!("default<O{}>", opts.opt_level);
        if opts.clang.verbose {
            eprintln!("+ optimize {}: {passes}", input.display());
        }
        module.run_passes(&passes, &tm, PassBuilderOptions::create()).map_err(|e| Error::Llvm(e.to_string()))?;
    }
    // User-visible outputs (-c, --emit-llvm) are replaced only by complete files.
    let tmp = if user_visible { temp_beside(out) } else { out.to_path_buf() };
    let _listed = user_visible.then(|| hpvm_core::scratch::remove_on_signal(&tmp));
    let written = if opts.emit_llvm {
        module.print_to_file(&tmp).map_err(|e| Error::Llvm(e.to_string()))
    } else {
        hpvm_core::ctors::to_init_arrays(module);
        tm.write_to_file(module, FileType::Object, &tmp).map_err(|e| Error::Llvm(e.to_string()))
    };
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if user_visible {
        install(&tmp, out)?;
    }
    Ok(())
}

/// The analysis database of one HPVM source: the one given with `--db` (which must have
/// been made from this very source), or a fresh analysis. An analysis that fails for a
/// reason other than the user's request is a note: every node then runs on one device.
fn analysis_of(
    module: &inkwell::module::Module<'_>,
    graph: &hpvm_core::Graph,
    origin: &Origin<'_>,
    opts: &BuildOptions,
    scratch: &Path,
) -> Result<Option<dashdb::Database>> {
    let input = origin.input;
    if let Some(path) = &opts.db {
        let bytes = std::fs::read(input).map_err(|e| Error::io(input.display().to_string(), e))?;
        let db = dashdb::Database::load(path, Some(&bytes))?;
        analysis::check_maps(&db).map_err(|why| Error::Usage(format!("{}: {why}", path.display())))?;
        return Ok(Some(db));
    }
    // In a child of its own: Polly and ISL abort on some inputs. A node it crashed on is
    // analysed no more (it runs whole) and the others are analysed again; a crash elsewhere
    // leaves every node whole. An empty result: the analysis failed and said why.
    let mut analysis_opts = analysis::Options { split: opts.split.clone(), ..Default::default() };
    // A file's analysis gets three nodes' patience in all: past that, a stall leaves the
    // nodes not analysed yet whole (HeCBench's segsort has dozens of kernels ISL takes tens
    // of seconds each on: its build took over 5 minutes). Files compiled as one (relocatable
    // device code) get each file's.
    let budget = 3 * origin.files.max(1) * isolate::analysis_patience();
    let started = std::time::Instant::now();
    loop {
        let deadline = (!analysis_opts.out_of_time).then(|| started + budget);
        let then = "every node will run on one device";
        let outcome = analysis_child(module, graph, input, scratch, &analysis_opts, deadline, then)?;
        return match outcome {
            isolate::Outcome::Done(json) if json.is_empty() => Ok(None),
            isolate::Outcome::Done(json) => Ok(Some(dashdb::Database::from_json(&String::from_utf8_lossy(&json))?)),
            isolate::Outcome::Reported => Err(Error::Reported),
            isolate::Outcome::Stalled { after, doing, stderr, heard } => {
                eprint!("{stderr}");
                keep_done(&mut analysis_opts, &heard);
                if started.elapsed() >= budget && !analysis_opts.out_of_time {
                    eprintln!(
                        "{}: warning: the access analysis of this file took over {} s; the nodes not analysed yet \
                         run whole, on one device (HPVM_MGPU_ANALYSIS_SECONDS sets the limit per node, three times \
                         it the file's)",
                        input.display(),
                        budget.as_secs()
                    );
                    analysis_opts.out_of_time = true;
                    continue;
                }
                let node = doing.as_deref().and_then(|d| d.strip_prefix(analysis::PROGRESS_NODE)?.split_once('\t'));
                let why = format!(
                    "did not finish in {} s (HPVM_MGPU_ANALYSIS_SECONDS sets the limit)",
                    after.as_secs_f64().round()
                );
                match node {
                    Some((symbol, shown)) if !analysis_opts.slow.iter().any(|s| s == symbol) => {
                        eprintln!(
                            "{}: warning: the access analysis of {shown} {why}; it runs whole, on one device",
                            input.display()
                        );
                        analysis_opts.slow.push(symbol.to_string());
                        continue;
                    }
                    // Before any node: preparing the whole file's code at once (HeCBench's sortKV
                    // and merkle took over a minute there). Each node by itself prepares only its
                    // own code.
                    // (Not when the analysis was asked for one node alone already.)
                    None if analysis_opts.only.is_none() => {
                        eprintln!(
                            "{}: warning: the access analysis {why} while preparing the file's code; its nodes are \
                             analysed one by one",
                            input.display()
                        );
                        node_by_node(module, graph, input, scratch, &analysis_opts, budget)
                    }
                    _ => {
                        let at = doing.map(|d| format!(" (at {d})")).unwrap_or_default();
                        eprintln!(
                            "{}: warning: the access analysis {why}{at}; every node of this file runs whole, on one \
                             device",
                            input.display()
                        );
                        Ok(None)
                    }
                }
            }
            isolate::Outcome::Crashed { how, doing, stderr, heard } => {
                keep_done(&mut analysis_opts, &heard);
                let node = doing.as_deref().and_then(|d| d.strip_prefix(analysis::PROGRESS_NODE)?.split_once('\t'));
                match node {
                    // Once more, with Polly careful on that node (`analysis::Options::careful`);
                    // what the crashed attempt said (ISL's abort) is shown only if that fails too.
                    Some((symbol, _)) if !analysis_opts.careful.iter().any(|s| s == symbol) => {
                        analysis_opts.careful.push(symbol.to_string());
                        continue;
                    }
                    _ => eprint!("{stderr}"),
                }
                match node {
                    Some((symbol, shown)) if !analysis_opts.skip.iter().any(|s| s == symbol) => {
                        eprintln!(
                            "{}: warning: the access analysis crashed ({how}) on {shown}, which runs whole, on one \
                             device. This is a bug of hpvm-mgpu: please report it with the file",
                            input.display()
                        );
                        analysis_opts.skip.push(symbol.to_string());
                        continue;
                    }
                    _ => {
                        let at = doing.map(|d| format!(" at {d}")).unwrap_or_default();
                        eprintln!(
                            "{}: warning: the access analysis crashed ({how}){at}; every node of this file runs \
                             whole, on one device. This is a bug of hpvm-mgpu: please report it with the file",
                            input.display()
                        );
                        Ok(None)
                    }
                }
            }
        };
    }
}

/// The analysis of `module` with `opts` in a child of its own ([`isolate::run_with_limits`]):
/// its database as JSON, or nothing where it failed, having said so and that `then`.
fn analysis_child(
    module: &inkwell::module::Module<'_>,
    graph: &hpvm_core::Graph,
    input: &Path,
    scratch: &Path,
    opts: &analysis::Options,
    deadline: Option<std::time::Instant>,
    then: &str,
) -> Result<isolate::Outcome> {
    isolate::run_with_limits(scratch, "analysis", Some(isolate::analysis_patience()), deadline, |ch| {
        analysis::set_progress(Box::new(ch.writer()));
        match crate::analyze::analyze_module(module, graph, input, opts) {
            Ok(db) => Ok(db.to_json().into_bytes()),
            Err(Error::Analysis(analysis::Error::Usage(m))) => Err(Error::Usage(m)),
            Err(e) => {
                eprintln!("{}: note: the access analysis failed, {then}: {e}", input.display());
                Ok(Vec::new())
            }
        }
    })
}

/// The analysis of a file whose preparation stalled, made node by node: each leaf in a child
/// of its own that prepares only that node's code, within the file's budget counted afresh.
/// A node whose analysis stalls or crashes runs whole, saying so (its entry is made once more
/// with it marked slow or skipped, which analyses nothing); past the budget, the nodes not
/// analysed yet run whole. `None` where no node could be analysed.
pub(crate) fn node_by_node(
    module: &inkwell::module::Module<'_>,
    graph: &hpvm_core::Graph,
    input: &Path,
    scratch: &Path,
    opts: &analysis::Options,
    budget: std::time::Duration,
) -> Result<Option<dashdb::Database>> {
    let leaves: Vec<(String, String)> = graph
        .nodes
        .iter()
        .filter(|(_, n)| n.leaf().is_some_and(|l| !l.is_allocation))
        .map(|(_, n)| (n.name.clone(), n.display.clone()))
        .collect();
    let started = std::time::Instant::now();
    let mut db: Option<dashdb::Database> = None;
    for (symbol, shown) in leaves {
        let mut one = analysis::Options { only: Some(symbol.clone()), done: Vec::new(), ..opts.clone() };
        one.out_of_time = started.elapsed() >= budget;
        let mut tries = 0;
        let node = loop {
            tries += 1;
            let deadline = (!one.out_of_time).then(|| started + budget);
            let then = format!("`{shown}` runs whole");
            let outcome = analysis_child(module, graph, input, scratch, &one, deadline, &then)?;
            let why = match outcome {
                isolate::Outcome::Done(json) if json.is_empty() => break None,
                isolate::Outcome::Done(json) => {
                    break Some(dashdb::Database::from_json(&String::from_utf8_lossy(&json))?)
                }
                isolate::Outcome::Reported => return Err(Error::Reported),
                isolate::Outcome::Stalled { after, .. } if started.elapsed() >= budget => {
                    one.out_of_time = true;
                    format!("ran past the file's time ({} s)", after.as_secs_f64().round())
                }
                isolate::Outcome::Stalled { after, .. } => {
                    one.slow.push(symbol.clone());
                    format!(
                        "did not finish in {} s (HPVM_MGPU_ANALYSIS_SECONDS sets the limit)",
                        after.as_secs_f64().round()
                    )
                }
                isolate::Outcome::Crashed { how, .. } => {
                    one.skip.push(symbol.clone());
                    format!("crashed ({how}); this is a bug of hpvm-mgpu: please report it with the file")
                }
            };
            if tries > 1 {
                break None;
            }
            eprintln!(
                "{}: warning: the access analysis of `{shown}` {why}; it runs whole, on one device",
                input.display()
            );
        };
        match (node, &mut db) {
            (Some(found), Some(all)) => all.nodes.extend(found.nodes),
            (Some(found), None) => db = Some(found),
            (None, _) => {}
        }
    }
    Ok(db)
}

/// Keeps the nodes an analysis that stalled or died finished before ([`analysis::PROGRESS_DONE`]
/// lines of `heard`), so that the next attempt does not analyse them again.
fn keep_done(opts: &mut analysis::Options, heard: &[String]) {
    for line in heard {
        let Some(json) = line.strip_prefix(analysis::PROGRESS_DONE) else { continue };
        if let Ok(node) = serde_json::from_str::<dashdb::Node>(json) {
            if !opts.done.iter().any(|n| n.name == node.name) {
                opts.done.push(node);
            }
        }
    }
}

pub(crate) fn codegen_machine(opt_level: u8) -> Result<TargetMachine> {
    use inkwell::targets::{CodeModel, InitializationConfig, RelocMode, Target};
    use inkwell::OptimizationLevel;
    Target::initialize_native(&InitializationConfig::default()).map_err(Error::Llvm)?;
    let triple = TargetMachine::get_default_triple();
    let target = Target::from_triple(&triple).map_err(|e| Error::Llvm(e.to_string()))?;
    // -O0 still selects and allocates registers as -O1 does: every module's functions are in
    // SSA form before the graph builder reads them (`frontend::ir::prepare`), and -O0's fast
    // register allocator spills every SSA value around every block. The host loops of NVIDIA's
    // fastWalshTransform, built without -O as its CMake does, took 2-3x the time of clang's
    // or gcc's -O0 (nvcc's host compiler at its default). No IR pass is added: what runs is
    // the program as written, and floating point is unchanged (no contraction the IR does
    // not ask for; generic x86-64 has no FMA).
    let level = match opt_level {
        0 | 1 => OptimizationLevel::Less,
        2 => OptimizationLevel::Default,
        _ => OptimizationLevel::Aggressive,
    };
    // Generic x86-64: executables built here run on other machines (the GPU hosts).
    target
        .create_target_machine(&triple, "generic", "", level, RelocMode::PIC, CodeModel::Default)
        .ok_or_else(|| Error::Llvm("no target machine for the host".into()))
}

/// Where an output is made before [`install`] puts it at `out`: `<dir>/.<name>.tmp-<pid>`, in
/// the same directory so the final rename is atomic; for a device or pipe (`-o /dev/null`),
/// which is written into rather than replaced, the temporary directory.
fn temp_beside(out: &Path) -> PathBuf {
    let name = out.file_name().map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    let name = format!(".{name}.tmp-{}", std::process::id());
    if written_into(out) {
        std::env::temp_dir().join(name)
    } else {
        out.with_file_name(name)
    }
}

/// Whether `out` exists and is not a regular file (a device, a pipe): such an output is
/// written into, never renamed over. As root a rename replaces `/dev/null` itself with a
/// regular file, and every later reader of `/dev/null` on the machine reads our output.
fn written_into(out: &Path) -> bool {
    std::fs::metadata(out).is_ok_and(|m| !m.is_file())
}

/// Puts the complete file `tmp` (made at [`temp_beside`]) at `out`, and removes `tmp`.
fn install(tmp: &Path, out: &Path) -> Result<()> {
    let result = if written_into(out) {
        std::fs::File::open(tmp).and_then(|mut from| {
            let mut to = std::fs::OpenOptions::new().write(true).truncate(true).open(out)?;
            std::io::copy(&mut from, &mut to).map(drop)
        })
    } else {
        std::fs::rename(tmp, out)
    };
    let _ = std::fs::remove_file(tmp);
    result.map_err(|e| Error::io(out.display().to_string(), e))
}

/// The runtime library: `$HPVM_MGPU_RUNTIME`, else the newest `libhpvm_runtime.a` beside this
/// executable (installed layout) or in cargo's `deps/` beside it (`cargo run`, tests: cargo
/// leaves older copies around, so the newest wins).
pub fn runtime_library() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("HPVM_MGPU_RUNTIME") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| Error::io("locating hpvm-mgpu", e))?;
    let dir = exe.parent().ok_or(Error::NoRuntime { name: RUNTIME_LIB })?;
    let in_deps =
        std::fs::read_dir(dir.join("deps")).into_iter().flatten().filter_map(|e| e.ok()).map(|e| e.path()).filter(
            |p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("libhpvm_runtime-") && n.ends_with(".a"))
            },
        );
    std::iter::once(dir.join(RUNTIME_LIB))
        .filter(|p| p.is_file())
        .chain(in_deps)
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .ok_or(Error::NoRuntime { name: RUNTIME_LIB })
}

/// Where `libhpvm_mpi.so` is built: beside the runtime library, and (for cargo's `deps/`)
/// the directory above.
fn plugin_dirs(runtime: &Path) -> Vec<PathBuf> {
    let Some(dir) = runtime.parent().and_then(|d| d.canonicalize().ok()) else { return Vec::new() };
    let mut dirs = vec![dir.clone()];
    if dir.file_name().is_some_and(|n| n == "deps") {
        dirs.extend(dir.parent().map(Path::to_path_buf));
    }
    // A comma or a dollar sign would be read as the linker's or loader's syntax.
    dirs.retain(|d| d.to_str().is_some_and(|s| !s.contains([',', '$', ':'])));
    dirs
}

/// The linker's messages as the user reads them: LLVM's linker says
/// `ld.lld: error: undefined symbol: f` and then `>>> referenced by x.c:8 (/abs/x.c:8)` per
/// use; each use becomes `x.c:8: undefined reference to `f'`, as GNU ld (and so nvcc) says
/// it, the path relative to the working directory where it lies below it. Everything else
/// passes unchanged.
fn linker_messages(text: &str) -> String {
    let cwd = std::env::current_dir().ok();
    let mut out = String::new();
    let mut symbol: Option<&str> = None;
    for line in text.lines() {
        if let Some(sym) = line.strip_prefix("ld.lld: error: undefined symbol: ") {
            symbol = Some(sym);
            continue;
        }
        if let (Some(sym), Some(rest)) = (symbol, line.strip_prefix(">>> referenced by ")) {
            // `file:line (/full/file:line)`, or `object.o:(function)` without debug info.
            let at = rest
                .rsplit_once(" (")
                .and_then(|(_, full)| full.strip_suffix(')'))
                .filter(|full| full.contains(':'))
                .unwrap_or(rest);
            let at = cwd
                .as_ref()
                .and_then(|d| Path::new(at).strip_prefix(d).ok())
                .map_or_else(|| at.to_string(), |p| p.display().to_string());
            out.push_str(&format!("{at}: undefined reference to `{sym}'\n"));
            continue;
        }
        if line.starts_with(">>> ") && symbol.is_some() {
            // The object and function of the use above, or "referenced N more times".
            continue;
        }
        symbol = None;
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Whether LLVM's linker is installed beside `clang` (Debian's `lld-19` puts `ld.lld` in
/// `/usr/lib/llvm-19/bin`, where `clang-19` looks for it); without it the system's `ld` links.
fn lld_beside(clang: &Path) -> bool {
    let resolved = if clang.components().count() > 1 {
        clang.to_path_buf()
    } else {
        let Some(paths) = std::env::var_os("PATH") else { return false };
        match std::env::split_paths(&paths).map(|d| d.join(clang)).find(|p| p.is_file()) {
            Some(p) => p,
            None => return false,
        }
    };
    resolved.canonicalize().ok().and_then(|p| p.parent().map(|d| d.join("ld.lld").is_file())).unwrap_or(false)
}

fn link(objects: &[PathBuf], output: &Path, opts: &BuildOptions) -> Result<()> {
    let runtime = runtime_library()?;
    // The linker makes temporary files of its own beside its output, which a signal that
    // stops it leaves behind: it writes into a directory of ours, made where the output goes.
    let stage = temp_beside(output);
    std::fs::create_dir(&stage).map_err(|e| Error::io(stage.display().to_string(), e))?;
    let _listed = hpvm_core::scratch::remove_on_signal(&stage);
    let result = link_into(objects, &stage.join("out"), output, &runtime, opts);
    let _ = std::fs::remove_dir_all(&stage);
    result
}

/// [`link`]'s work, linking into `tmp` and putting the result at `output`.
fn link_into(objects: &[PathBuf], tmp: &Path, output: &Path, runtime: &Path, opts: &BuildOptions) -> Result<()> {
    let clang = hpvm_core::toolchain::clang();
    let mut cmd = Command::new(&clang);
    // As nvcc links, whatever the inputs' languages: through the C++ driver, so libstdc++
    // and libm come with every program (a `.cu` file is C++, and so are objects nvcc made).
    cmd.arg("--driver-mode=g++");
    if lld_beside(&clang) {
        // The runtime library is large (its debug build is near 200 MB); LLVM's linker reads
        // it in a quarter of the time GNU ld takes (0.7 s against 3.1 s per program here).
        cmd.arg("-fuse-ld=lld");
    }
    if opts.clang.openmp {
        // The driver adds LLVM's OpenMP runtime (libomp).
        cmd.arg("-fopenmp");
    }
    cmd.args(objects).arg(runtime);
    for d in &opts.lib_dirs {
        cmd.arg("-L").arg(d);
    }
    for l in &opts.libs {
        cmd.arg(format!("-l{l}"));
    }
    // The runtime's ISL bindings name every ISL function, some of which this ISL lacks; only
    // the sections the program reaches are kept, so unused bindings never need resolving.
    cmd.args(RUNTIME_NATIVE_LIBS).arg("-Wl,--gc-sections").arg("-o").arg(tmp);
    // Under mpirun the runtime loads the MPI plugin (libhpvm_mpi.so) by name: the run path
    // names where it was built beside the runtime library, then the executable's directory.
    for dir in plugin_dirs(runtime) {
        cmd.arg(format!("-Wl,-rpath,{}", dir.display()));
    }
    cmd.arg("-Wl,-rpath,$ORIGIN");
    if opts.clang.verbose {
        eprintln!("+ {cmd:?}");
    }
    let out = hpvm_core::scratch::run_tool(cmd.stdin(std::process::Stdio::null()))
        .map_err(|e| frontend::Error::ToolMissing { tool: clang.display().to_string(), source: e })?;
    {
        use std::io::Write;
        let _ = std::io::stdout().write_all(&out.stdout);
        let messages = linker_messages(&String::from_utf8_lossy(&out.stderr));
        let _ = std::io::stderr().write_all(messages.as_bytes());
        let _ = std::io::stderr().write_all(crate::libraries::explain_undefined(&messages).as_bytes());
    }
    if !out.status.success() {
        return Err(Error::LinkFailed(output.display().to_string()));
    }
    install(tmp, output)
}

#[cfg(test)]
mod tests {
    use super::linker_messages;

    /// The runtime tells programs (CUB's tuning) the architecture the build compiles device
    /// code for: the two must name the same one.
    #[test]
    fn the_runtime_reports_the_architecture_device_code_is_compiled_for() {
        let built: i32 = frontend::cuda::DEFAULT_ARCH.trim_start_matches("sm_").parse().unwrap();
        assert_eq!(contract::DEVICE_CODE_ARCH, built);
    }

    /// LLVM's linker's undefined symbols read as GNU ld's, one line per use; the rest passes.
    #[test]
    fn undefined_symbols_read_as_gnu_ld_says_them() {
        let lld = "ld.lld: error: undefined symbol: missing\n\
                   >>> referenced by a.c:8 (/nowhere/a.c:8)\n\
                   >>>               /tmp/x/0-a.o:(main)\n\
                   >>> referenced by b.c:3 (/nowhere/b.c:3)\n\
                   >>>               /tmp/x/1-b.o:(f)\n\
                   ld.lld: error: undefined symbol: other\n\
                   >>> referenced by c.o:(g)\n\
                   clang-19: error: linker command failed with exit code 1\n";
        assert_eq!(
            linker_messages(lld),
            "/nowhere/a.c:8: undefined reference to `missing'\n\
             /nowhere/b.c:3: undefined reference to `missing'\n\
             c.o:(g): undefined reference to `other'\n\
             clang-19: error: linker command failed with exit code 1\n"
        );
        let gnu = "/usr/bin/ld: a.o: in function `main':\na.c:8: undefined reference to `missing'\n";
        assert_eq!(linker_messages(gnu), gnu);
    }
}
