//! `transform`: lowering of a verified dataflow graph to code.
//!
//! [`lower_cpu`] turns a module whose graph `hpvm_core::verify` accepted into one that links
//! against the runtime library:
//! - every leaf node gets an *entry point* running a box of its instances ([`entry`]); its
//!   `__hpvm__return` calls become stores into the instance's output record;
//! - the HPVM intrinsics leaf code calls get bodies: queries read the instance context, atomics
//!   are `atomicrmw`/`cmpxchg`, math maps to LLVM intrinsics ([`intrinsics`]);
//! - `__hpvm__launch` becomes `hpvm_rt_launch` with the module's graph description and entry
//!   table; internal node functions, which only described the graph, are deleted ([`host`]).
//!
//! Invariants: it only runs on verified graphs (so every port, count and type it reads is
//! consistent), it replaces every use of a value before erasing it, and the layouts it
//! writes into the description ([`describe`]) are the ones its entry points read.

pub mod align;
pub mod describe;
pub mod entry;
pub mod gpu;
pub mod gpu_math;
pub mod host;
pub mod indirect;
pub mod intrinsics;
pub mod layout;
pub mod reconverge;
pub mod sass;
pub use hpvm_core::plan;
pub mod trace;
pub mod unroll;
pub mod warp;

use hpvm_core::Graph;
use inkwell::module::Module;
use inkwell::targets::TargetData;
use inkwell::values::AsValueRef;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The module does not hold what the verified graph says (a compiler bug, not a user error).
    #[error("internal error: {0}")]
    Internal(String),
    #[error("LLVM: {0}")]
    Llvm(String),
    /// A bad option (an unknown GPU architecture...).
    #[error("{0}")]
    Usage(String),
}

impl From<inkwell::builder::BuilderError> for Error {
    fn from(e: inkwell::builder::BuilderError) -> Self {
        Error::Llvm(e.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What lowering produced beside the module.
#[derive(Debug, Default)]
pub struct Lowered {
    /// Nodes that wanted the GPU but run on the CPU, with the reason.
    pub fallbacks: Vec<plan::Fallback>,
    /// Number of GPU kernels compiled.
    pub kernels: usize,
    /// The PTX embedded in the module, if any.
    pub ptx: Option<String>,
    /// The machine code embedded beside it, and why an asked architecture has none.
    pub sass: sass::Assembled,
    /// Leaves that keep pointers in memory, why, and whether their addresses are translated
    /// (they run whole on one device) or not (they run on the host's copies) ([`indirect`]).
    pub indirect: Vec<(hpvm_core::graph::NodeId, String, bool)>,
    /// The functions the GPU code calls through pointers ([`gpu::GpuCode::functions`]).
    pub gpu_functions: Vec<String>,
}

/// What [`lower`] does beside the lowering itself.
#[derive(Clone, Debug, Default)]
pub struct LowerOptions<'a> {
    /// GPU architecture of the kernels' PTX (`sm_80`...); `None`: CPU only.
    pub gpu_arch: Option<&'a str>,
    /// Architectures to assemble the PTX for (ptxas), and the folder for its files.
    pub sass: &'a [String],
    pub scratch: Option<&'a std::path::Path>,
    /// The analysis database (JSON) to embed for the runtime.
    pub analysis: Option<&'a str>,
    /// Instrument leaf code to report its buffer accesses ([`trace`]).
    pub trace_accesses: bool,
    /// The semantics of math functions in GPU code (a CUDA source follows clang's).
    pub math: gpu::Math,
    /// What the runtime needs to analyse a node again with a launch's values built in
    /// (`dashdb::Node::specializable`): the analysis's input and the compiler to run.
    pub analysis_input: Option<host::AnalysisInput<'a>>,
}

/// Lowers every node of `graph` to CPU code, GPU-hinted nodes also to PTX kernels, and the
/// host code to runtime calls.
pub fn lower(module: &Module<'_>, graph: &Graph, data: &TargetData, opts: &LowerOptions<'_>) -> Result<Lowered> {
    let gpu_arch = opts.gpu_arch;
    let mut program = describe::describe(module, graph, data)?;
    program.analysis = opts.analysis.map(str::to_string);
    // Before the GPU code is cut out of the module: both run the translated leaf. Not in
    // an access-traced build, the analysis's oracle: its tracer follows each address back to
    // a parameter, which a translation hides, and such a leaf then runs on the host's copies.
    let mut indirect = Vec::new();
    for (id, node) in graph.nodes.iter() {
        let Some(why) = program.nodes[id.index()].indirect.clone() else { continue };
        let f = describe::function(module, &node.name)?;
        let translated = match opts.trace_accesses {
            true => Err("its accesses are traced".to_string()),
            false => indirect::translate(hpvm_core::Val(f.as_value_ref())),
        };
        match translated {
            Ok(()) => {
                program.nodes[id.index()].translated = true;
                indirect.push((id, why, true));
            }
            Err(cannot) => indirect.push((id, format!("{why}, and {cannot}"), false)),
        }
    }
    let mut lowered = Lowered { indirect, ..Lowered::default() };
    if let Some(arch) = gpu_arch {
        // Before the CPU lowering changes the module: kernels start from the original code.
        let (code, fallbacks) = gpu::compile(module, graph, &program, arch, opts.math)?;
        lowered.fallbacks = fallbacks;
        if let Some(code) = code {
            lowered.kernels = code.kernels.len();
            for (node, kernel) in code.kernels {
                program.nodes[node.index()].kernel = Some(kernel);
            }
            if let Some(dir) = opts.scratch {
                lowered.sass = sass::assemble(&code.ptx, opts.sass, dir);
            }
            lowered.ptx = Some(code.ptx);
            lowered.gpu_functions = code.functions;
        }
    }
    if opts.trace_accesses {
        trace::instrument(module, graph, data)?;
    }
    // Before the warp operations get their CPU bodies, which hide them.
    let leaves: Vec<_> = graph
        .nodes
        .iter()
        .filter(|(_, n)| matches!(n.kind, hpvm_core::graph::NodeKind::Leaf(_)))
        .map(|(id, n)| {
            let f = describe::function(module, &n.name)?;
            Ok((id, warp::uses_warps(f), warp::synchronizes_through_memory(f)))
        })
        .collect::<Result<_>>()?;
    intrinsics::define(module)?;
    warp::define(module)?;
    for (id, warp_synchronous, reconverge) in leaves {
        let f = describe::function(module, &graph.nodes[id].name)?;
        warp::lockstep(module, f, warp_synchronous, reconverge, &shared_params(graph, id))?;
    }
    let entries = entry::build_all(module, graph, &program)?;
    host::rewrite(
        module,
        graph,
        &program,
        &entries,
        host::Carried {
            ptx: lowered.ptx.as_deref(),
            sass: lowered.sass.blob.as_deref(),
            functions: &lowered.gpu_functions,
            input: opts.analysis_input,
        },
    )?;
    module.verify().map_err(|e| Error::Internal(format!("lowered module does not verify: {}", e.to_string())))?;
    Ok(lowered)
}

/// The parameters of the leaf `leaf` that its sibling allocation node binds: its block's
/// shared memory (a CUDA kernel's `__shared__` variables, HPVM-C's `__hpvm__malloc` per
/// instance of the parent).
fn shared_params(graph: &Graph, leaf: hpvm_core::graph::NodeId) -> Vec<u32> {
    let Some(parent) = graph.nodes[leaf].parent else { return Vec::new() };
    let Some(siblings) = graph.nodes[parent].internal() else { return Vec::new() };
    let alloc = siblings.children.iter().copied().find(|&c| graph.nodes[c].leaf().is_some_and(|l| l.is_allocation));
    hpvm_core::plan::shared_params(graph, parent, leaf, alloc)
}
