//! `analysis`: polyhedral access analysis of leaf nodes.
//!
//! For every leaf node that runs as a grid, the read and write access relation of each
//! pointer argument, as ISL maps from the node's global instance coordinates to array
//! elements, over the grid sizes and the node's scalar arguments; each access classified;
//! the grid dimension to split chosen. The result is a [`dashdb::Database`].
//!
//! The pipeline per leaf ([`analyze_program`]): [`wrap`] the leaf in loops over its instances
//! and resolve its id queries to the loop counters, inline everything, [`crop`] what does not
//! address memory, prepare the IR for Polly, run Polly's ScopInfo ([`polly`]) and turn its
//! statements' relations into the node's maps ([`maps`]), then pick split dimensions
//! ([`split`]).
//!
//! Invariants:
//! - A write the analysis cannot prove exact (a may-write, a data-dependent index, code
//!   Polly could not model) makes the node not partitionable, with a reason and a location;
//!   never a guessed map. Reads may be over-approximated (copying too much is only slower).
//! - A map holds only where the node's `valid_when` holds (Polly's assumptions).
//! - The module given is never changed: the analysis works on a clone.

pub mod bounds;
pub mod cas;
pub mod crop;
pub mod guards;
pub mod loosen;
pub mod maps;
pub mod offsets;
pub mod polly;
pub mod products;
pub mod prune;
pub mod register_only;
pub mod report;
pub mod split;
pub mod stride;
pub mod widen;
pub mod wrap;

use dashdb::{Arg, Database, Node, ReadKind, Reason, Reduction, Split, SplitChoice, WriteKind};
use hpvm_core::graph::{Graph, NodeId};
use hpvm_core::loc::SrcLoc;
use hpvm_core::plan::{plan, shared_params, Shape};
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Polly: {0}")]
    Polly(String),
    #[error("LLVM: {0}")]
    Llvm(String),
    /// A bad `--split` request.
    #[error("{0}")]
    Usage(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What the user asks of the analysis.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `--split node=y`: the grid dimensions to split a node along, instead of the analysis's
    /// choice.
    pub split: Vec<(String, Vec<u32>)>,
    /// Nodes (by symbol) not to analyse: the analysis crashed on them before (an abort
    /// inside Polly or ISL, survived by the command). They run whole, saying so.
    pub skip: Vec<String>,
    /// Nodes (by symbol) Polly analyses carefully ([`polly::analyze`]'s `careful`), since it
    /// aborted on them before: HeCBench pathfinder and grep (`position or range out of
    /// bounds` on a value of a loop used after it, once its exits were unified).
    pub careful: Vec<String>,
    /// Only this node (by symbol) is analysed; the database holds it alone.
    pub only: Option<String>,
    /// Nodes (by symbol) whose analysis did not finish in its time before: they run whole,
    /// saying so.
    pub slow: Vec<String>,
    /// Nodes an earlier attempt analysed before it stalled or crashed on another
    /// ([`PROGRESS_DONE`]): taken as they are, not analysed again.
    pub done: Vec<dashdb::Node>,
    /// The file's analysis ran out of time: nodes not in `done` run whole, saying so.
    pub out_of_time: bool,
    /// Values built into the maps (`hpvm-mgpu specialize`, for one launch): each named map
    /// parameter (a node parameter by its map name, or a grid parameter `gx`, `px`, `pnx`...)
    /// becomes that constant before Polly sees the code. The maps then hold for launches
    /// with exactly these values.
    pub fixed: Vec<(String, i64)>,
}

fn loc_text(loc: &Option<SrcLoc>) -> String {
    loc.as_ref().map_or("?".into(), |l| format!("{}:{}", l.file, l.line))
}

fn reason(message: impl Into<String>, location: &str) -> Reason {
    Reason { message: message.into(), location: (location != "?").then(|| location.to_string()) }
}

/// Where the analysis says which node it works on (`set_progress`): the command runs the
/// analysis in a child process and names that node if Polly or ISL abort there.
static PROGRESS: std::sync::Mutex<Option<Progress>> = std::sync::Mutex::new(None);

/// What hears the analysis's progress.
pub type Progress = Box<dyn FnMut(&str) + Send>;

/// What the progress line before each node starts with: then the node's symbol, a tab, and
/// `node `NAME` (FILE:LINE)` for people.
pub const PROGRESS_NODE: &str = "analysing ";

/// What the analysis says after each node, followed by the node's database entry as JSON:
/// a caller whose analysis is stopped (a stall) or dies on a later node keeps these
/// ([`Options::done`]) rather than analysing them again.
pub const PROGRESS_DONE: &str = "analysed ";

/// Makes `f` hear, before each node, what [`PROGRESS_NODE`] says.
pub fn set_progress(f: Progress) {
    *PROGRESS.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
}

fn progress(doing: &str) {
    if let Some(f) = PROGRESS.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        f(doing);
    }
}

/// Analyses every leaf node of `graph` (read from `module`). The database's source record is
/// `source`; `generator` names the tool.
pub fn analyze_program(
    module: &Module<'_>,
    graph: &Graph,
    source: dashdb::Source,
    generator: &str,
    opts: &Options,
) -> Result<Database> {
    for (name, _) in &opts.split {
        if !graph
            .nodes
            .iter()
            .any(|(_, n)| hpvm_core::names::names(name, &n.name) && n.leaf().is_some_and(|l| !l.is_allocation))
        {
            return Err(Error::Usage(format!("--split {name}=...: there is no leaf node `{name}`")));
        }
    }
    let mut db = Database::new(source, generator);
    let (kernels, _) = plan(graph);
    let blocks_of = |leaf: NodeId| {
        kernels.iter().find_map(|k| match k.shape {
            Shape::Blocks { leaf: l, alloc, .. } if l == leaf => Some((k.node, alloc)),
            _ => None,
        })
    };
    let leaves: Vec<NodeId> = graph
        .nodes
        .iter()
        .filter(|(_, n)| n.leaf().is_some_and(|l| !l.is_allocation))
        .filter(|(_, n)| opts.only.as_ref().is_none_or(|only| *only == n.name))
        .map(|(id, _)| id)
        .collect();
    if let (Some(only), true) = (&opts.only, leaves.is_empty()) {
        return Err(Error::Usage(format!("there is no leaf node `{only}`")));
    }

    let m = module.clone();
    // One node: only its code is inlined and prepared.
    if opts.only.is_some() {
        let roots: Vec<_> = leaves.iter().filter_map(|&l| m.get_function(&graph.nodes[l].name)).collect();
        prune::prune(&m, &roots);
    }
    // Tests: preparing the whole file's code stalling (`analysis-stall-prepare`); one node's
    // alone does not.
    if opts.only.is_none()
        && std::env::var("HPVM_MGPU_INJECT_CRASH").is_ok_and(|v| v.split(',').any(|v| v == "analysis-stall-prepare"))
    {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
    // Warp operations and inline PTX that moves no memory are no accesses (`register_only`).
    register_only::declare_memory_free(&m);
    register_only::declare_pure_math(&m);
    let ctx = m.get_context();
    let b = ctx.create_builder();
    let mut wrappers = Vec::new();
    for &leaf in &leaves {
        let shape = blocks_of(leaf);
        let w = wrap::wrap(&m, &b, graph, leaf, shape.map(|s| s.0));
        wrappers.push((leaf, shape, w));
    }
    // Everything the wrappers call is inlined into them (node functions and their helpers).
    let wrapper_fns: Vec<_> = wrappers.iter().filter_map(|(_, _, w)| w.as_ref().ok().map(|w| w.function)).collect();
    for f in m.get_functions() {
        if f.count_basic_blocks() > 0 && !wrapper_fns.contains(&f) {
            for attr in ["noinline", "optnone"] {
                f.remove_enum_attribute(
                    inkwell::attributes::AttributeLoc::Function,
                    inkwell::attributes::Attribute::get_named_enum_kind_id(attr),
                );
            }
            let kind = inkwell::attributes::Attribute::get_named_enum_kind_id("alwaysinline");
            f.add_attribute(inkwell::attributes::AttributeLoc::Function, ctx.create_enum_attribute(kind, 0));
        }
    }
    let tm = host_machine()?;
    let run =
        |passes: &str| m.run_passes(passes, &tm, PassBuilderOptions::create()).map_err(|e| Error::Llvm(e.to_string()));
    run("always-inline")?;
    let mut failed: Vec<(NodeId, String)> = Vec::new();
    for (leaf, _, w) in &wrappers {
        match w {
            Ok(w) => {
                if let Err(why) = w.resolve(&b) {
                    failed.push((*leaf, why));
                }
            }
            Err(why) => failed.push((*leaf, why.clone())),
        }
    }
    // One launch's values, once every query reads the wrapper's parameters.
    if !opts.fixed.is_empty() {
        for w in wrappers.iter().filter_map(|(_, _, w)| w.as_ref().ok()) {
            w.fix(&opts.fixed);
        }
    }
    // Polly's preparation while the values are still used (LLVM deletes unused loads, and
    // loops left without effects). Cropping comes after and keeps every load.
    run("function(sroa,early-cse,loop-simplify,loop-rotate,indvars,instsimplify,lcssa)")?;
    let mut strided: Vec<(NodeId, stride::Strided)> = Vec::new();
    for (leaf, _, w) in &wrappers {
        if let (Ok(w), false) = (w, failed.iter().any(|(l, _)| l == leaf)) {
            w.rewrite_block_offsets();
            let thread_loops: Vec<(usize, String)> =
                w.loops.iter().filter(|(_, level, _)| *level == 0).map(|(name, _, d)| (*d, name.clone())).collect();
            let dims: Vec<stride::DimNames<'_>> = w
                .runtime_blocks()
                .into_iter()
                .filter_map(|d| {
                    let thread_loop = thread_loops.iter().find(|(x, _)| *x == d)?;
                    Some(stride::DimNames {
                        dim: d,
                        offset: wrap::BLOCK_OFFSETS[d],
                        id: wrap::BLOCK_IDS[d],
                        size: wrap::BLOCK_SIZES[d],
                        grid: wrap::GRID_PARAMS[d],
                        thread_loop: &thread_loop.1,
                    })
                })
                .collect();
            if !dims.is_empty() {
                let name = w.function.get_name().to_string_lossy().into_owned();
                strided.push((*leaf, stride::rewrite(&m, &name, &dims)));
            }
        }
    }
    // Unfolding clamps into branches makes their reads exact, but can make a node's domains
    // too complex for Polly, which then dismisses the whole node: such a node is analysed
    // again, from this copy, without unfolding.
    let plain = m.clone();
    // And a node Polly dismissed for the complexity of its thread tests is analysed again,
    // from this copy, with the tests that guard only reads loosened (`loosen`).
    let loose = m.clone();
    let crop_and_widen =
        |f: inkwell::values::FunctionValue<'_>, w: &wrap::Wrapper<'_>, shared: &[u32], split: bool, threads: bool| {
            // Cropping first: the clamps it unfolds compare and index with narrowed values too.
            let mut c = crop::crop(f, shared, split);
            if threads {
                let counters = w.thread_counters(f);
                // SAFETY: `f` belongs to a live module; the counters are its instructions.
                c.loosened = unsafe { loosen::thread_tests(inkwell::values::AsValueRef::as_value_ref(&f), &counters) };
            }
            let narrow = widen::widen(f, &|counter| w.counter_bound(counter), &w.narrowed);
            (c, narrow)
        };
    let mut cropped = Vec::new();
    for (leaf, shape, w) in &wrappers {
        // Nodes taken from an earlier attempt, or not analysed for want of time, need none.
        let name = &graph.nodes[*leaf].name;
        if opts.out_of_time || opts.done.iter().any(|n| &n.name == name) {
            continue;
        }
        if let (Ok(w), false) = (w, failed.iter().any(|(l, _)| l == leaf)) {
            let shared = shape.map_or(vec![], |(p, alloc)| shared_params(graph, p, *leaf, alloc));
            let (c, narrow) = crop_and_widen(w.function, w, &shared, true, false);
            cropped.push((*leaf, c, narrow));
        }
    }
    // For whoever works on the analysis; `{pid}` in the name tells the runtime's `hpvm-mgpu
    // specialize` processes apart.
    if let Some(path) = std::env::var_os("HPVM_MGPU_DUMP_ANALYSIS_IR") {
        let path = path.to_string_lossy().replace("{pid}", &std::process::id().to_string());
        m.print_to_file(&path).map_err(|e| Error::Llvm(e.to_string()))?;
    }

    let isl = isl_glue::Isl::new();
    let mut said = 0;
    let mut say_done = |db: &Database| {
        for n in &db.nodes[said..] {
            progress(&format!("{PROGRESS_DONE}{}", serde_json::to_string(n).expect("a node serializes")));
        }
        said = db.nodes.len();
    };
    for (leaf, shape, w) in &wrappers {
        say_done(&db);
        let node = &graph.nodes[*leaf];
        if let Some(done) = opts.done.iter().find(|n| n.name == node.name) {
            db.nodes.push(done.clone());
            continue;
        }
        progress(&format!("{PROGRESS_NODE}{}\tnode `{}` ({})", node.name, node.display, loc_text(&node.def_loc)));
        let mut entry = Node {
            name: node.name.clone(),
            display: (node.display != node.name).then(|| node.display.clone()),
            location: loc_text(&node.def_loc),
            hint: node.hint.to_string(),
            dims: node.dims,
            grid: node.counts.iter().map(|c| c.to_string()).collect(),
            param_names: node.params.iter().map(|p| p.name.clone()).collect(),
            block: None,
            valid_when: None,
            bounds: vec![],
            products: vec![],
            partitionable: false,
            specializable: false,
            merged_because: Vec::new(),
            mergeable: false,
            merge_fallback: false,
            reasons: vec![],
            split: Split { dims: vec![], chosen_by: SplitChoice::Analysis },
            args: vec![],
        };
        let shared = shape.map_or(vec![], |(p, alloc)| shared_params(graph, p, *leaf, alloc));
        if opts.skip.contains(&node.name) || opts.slow.contains(&node.name) || opts.out_of_time {
            entry.reasons.push(reason(
                if opts.skip.contains(&node.name) {
                    "the polyhedral analysis crashed on this node (an abort inside Polly or ISL, a bug of hpvm-mgpu)"
                } else if opts.slow.contains(&node.name) {
                    "the polyhedral analysis of this node did not finish in its time (HPVM_MGPU_ANALYSIS_SECONDS \
                     sets the limit)"
                } else {
                    "the analysis of this file ran out of time before this node (HPVM_MGPU_ANALYSIS_SECONDS sets \
                     the limit)"
                },
                &entry.location,
            ));
            entry.args = unknown_args(graph, *leaf, &shared);
            db.nodes.push(entry);
            continue;
        }
        let w = match (w, failed.iter().find(|(l, _)| l == leaf)) {
            (Ok(w), None) => w,
            (_, Some((_, why))) | (Err(why), None) => {
                entry.reasons.push(reason(why.clone(), &entry.location));
                entry.args = unknown_args(graph, *leaf, &shared);
                db.nodes.push(entry);
                continue;
            }
        };
        entry.param_names = w.params[..node.params.len()].to_vec();
        let stride_of = strided.iter().find(|(l, _)| l == leaf).map(|(_, s)| s);
        if let (wrap::Coords::Blocks { .. }, Some((p, _))) = (&w.coords, shape) {
            let size: Vec<String> = node.counts.iter().map(|c| c.to_string()).collect();
            let runtime = w
                .runtime_blocks()
                .into_iter()
                .map(|d| dashdb::RuntimeBlock {
                    dim: d as u32,
                    size: wrap::BLOCK_SIZES[d].into(),
                    id: wrap::BLOCK_IDS[d].into(),
                    offset: wrap::BLOCK_OFFSETS[d].into(),
                    strided: stride_of.is_some_and(|s| s.dims.contains(&(d as u32))),
                })
                .collect();
            entry.dims = w.dims as u32;
            let parent = &graph.nodes[*p];
            entry.grid = (0..w.dims)
                .map(|d| {
                    let blocks = parent.counts.get(d).map_or("1".into(), |c| c.to_string());
                    match size.get(d).map_or("1", |s| s.as_str()) {
                        b if b.parse::<i64>().is_ok() => format!("({blocks}) * {b}"),
                        b => format!("({blocks}) * ({b})"),
                    }
                })
                .collect();
            entry.block = Some(dashdb::Block { size, runtime });
        }
        let (_, crop, narrow) = &cropped.iter().find(|(l, _, _)| l == leaf).expect("cropped");
        let name = w.function.get_name().to_string_lossy().into_owned();
        // A function the cropping broke never reaches Polly (checked by LLVM's verifier).
        let careful = opts.careful.contains(&node.name);
        // Tests: the analysis of one node stalling (`analysis-stall-node:NAME`, by its name as
        // written; with others, comma-separated).
        if std::env::var("HPVM_MGPU_INJECT_CRASH").is_ok_and(|v| {
            v.split(',').any(|v| v.strip_prefix("analysis-stall-node:").is_some_and(|n| node.display.starts_with(n)))
        }) {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
        // Tests: Polly aborting on a node's prepared loops (the command retries it carefully).
        if !careful && std::env::var("HPVM_MGPU_INJECT_CRASH").is_ok_and(|v| v == "polly-prepared") {
            std::process::abort();
        }
        let mut scops = if crop.broken {
            Err(Error::Llvm("broken by cropping".into()))
        } else {
            polly::analyze(&m, &name, careful)
        };
        let mut crop = crop;
        let mut narrow = narrow;
        let fallback;
        let dismissed = scops.as_ref().map_or(true, |s| s.unmodeled.iter().any(|u| u.kind == "write"));
        if crop.split && (crop.broken || dismissed) {
            if let Some(f) = plain.get_function(&name) {
                fallback = crop_and_widen(f, w, &shared, false, false);
                (crop, narrow) = (&fallback.0, &fallback.1);
                scops = polly::analyze(&plain, &name, careful);
            }
        }
        let loosened;
        let dismissed = scops.as_ref().map_or(true, |s| s.unmodeled.iter().any(|u| u.kind == "write"));
        if dismissed && !crop.broken {
            if let Some(f) = loose.get_function(&name) {
                let again = crop_and_widen(f, w, &shared, false, true);
                if again.0.loosened > 0 && !again.0.broken {
                    let s = polly::analyze(&loose, &name, careful);
                    if s.as_ref().is_ok_and(|s| !s.unmodeled.iter().any(|u| u.kind == "write")) {
                        loosened = again;
                        (crop, narrow) = (&loosened.0, &loosened.1);
                        scops = s;
                    }
                }
            }
        }
        if crop.broken {
            entry.reasons.push(reason(
                "internal error: cropping the node for the analysis broke its code (please report it)",
                &entry.location,
            ));
            entry.args = unknown_args(graph, *leaf, &shared);
            db.nodes.push(entry);
            continue;
        }
        let scops = match scops {
            Ok(mut s) => {
                bounds::settle(&isl, &mut s);
                narrow_contexts(&isl, &mut s, &w.narrowed);
                // A block's id and offset are ranged over the blocks at a launch, not given
                // one value: no product of theirs can be.
                let given: Vec<String> = w
                    .params
                    .iter()
                    .filter(|p| !wrap::BLOCK_IDS.contains(&p.as_str()) && !wrap::BLOCK_OFFSETS.contains(&p.as_str()))
                    .cloned()
                    .collect();
                s.products = products::name(&isl, &mut s, &given);
                // Where ISL fails, the texts stay as they are: correct, only longer.
                let _ = products::drop_unused(&isl, &mut s);
                s
            }
            Err(e) => {
                entry.reasons.push(reason(format!("the polyhedral analysis failed: {e}"), &entry.location));
                entry.args = unknown_args(graph, *leaf, &shared);
                db.nodes.push(entry);
                continue;
            }
        };
        // Indirect writes (argument, where its indices come from), resolved once
        // every argument is known.
        let mut indirect: Vec<(u32, maps::Through)> = Vec::new();
        let mut read_in_bounds: Vec<(u32, Vec<String>)> = Vec::new();
        // Parameter sets where distinct instances write distinct elements, for write maps
        // that are one-to-one only for some launches (rows `row`, `row_size + row`: while the
        // grid has at most `row_size` rows).
        let mut distinct_writes: Vec<String> = Vec::new();
        for (i, p) in node.params.iter().enumerate() {
            if !p.ty.is_pointer() || shared.contains(&(i as u32)) {
                continue;
            }
            let shown = hpvm_core::names::param_name(&p.name);
            let acc = maps::accesses_of(&isl, &scops, w, &w.params[i], shown, &narrow.wrapping);
            // Updated only through combining atomics: a reduction, whatever the maps say of the
            // atomics' loads and stores (they stand for the updates).
            match reduction_of(crop, i as u32, &w.params[i]) {
                Ok(Some(r)) => {
                    let bounded = acc
                        .write_map
                        .as_deref()
                        .is_some_and(|m| isl.map(m).and_then(|m| m.has_bounded_range()).unwrap_or(false));
                    let mut arg = arg_record(&w.params[i], i as u32, &acc, &isl);
                    arg.read = ReadKind::None;
                    arg.read_map = None;
                    arg.write = WriteKind::Reduce;
                    if !bounded || matches!(acc.write, WriteKind::Unanalysable) {
                        arg.write_map = None;
                    }
                    arg.reduction = Some(r);
                    entry.args.push(arg);
                    continue;
                }
                Ok(None) => {}
                Err((why, loc)) => entry.reasons.push(reason(why, &loc)),
            }
            // Whether no element of a write map is written by two instances. With a run-time
            // block size the maps describe one block, whose size is unknown here: whether two
            // blocks write the same element is decided per launch by the runtime, which refuses
            // to split a launch whose partitions' writes overlap.
            let per_block = !w.runtime_blocks().is_empty();
            let once_each = |m: &str| per_block || isl.map(m).and_then(|m| m.is_injective()).unwrap_or(false);
            // A may-write region stays partitionable under the same rule: each part's region is
            // then its own, made current before the part runs (dashdb's `WriteKind::May`).
            // Its elements must be bounded too: a may-write anywhere leaves nothing to split by.
            let bounded = |m: &str| isl.map(m).and_then(|m| m.has_bounded_range()).unwrap_or(false);
            let disjoint_may =
                acc.write == WriteKind::May && acc.write_map.as_deref().is_some_and(|m| once_each(m) && bounded(m));
            for (msg, loc) in &acc.notes {
                if matches!(acc.write, WriteKind::May | WriteKind::Unanalysable) && msg.contains("written") {
                    if disjoint_may && msg.contains("may or may not be written") {
                        continue;
                    }
                    entry.reasons.push(reason(msg.clone(), loc));
                }
            }
            if acc.write == WriteKind::May && acc.write_map.is_some() && !disjoint_may {
                let unbounded = acc.write_map.as_deref().is_some_and(|m| !bounded(m));
                let why = if unbounded {
                    "may be written at elements the analysis cannot bound (no partition's part could be told)"
                } else {
                    "may be written by several instances at the same element"
                };
                entry.reasons.push(reason(format!("`{shown}` {why}"), &entry.location));
            }
            entry.args.push(arg_record(&w.params[i], i as u32, &acc, &isl));
            read_in_bounds.push((i as u32, acc.read_in_bounds.clone()));
            if let Some(t) = acc.through {
                indirect.push((i as u32, t));
            }
            if let (WriteKind::Exact, Some(map)) = (acc.write, &acc.write_map) {
                if !once_each(map) {
                    if let Some(ok) = distinct_where(&isl, map) {
                        distinct_writes.push(ok);
                        continue;
                    }
                    entry.reasons.push(reason(
                        format!("several instances write the same element of `{shown}`"),
                        &entry.location,
                    ));
                }
            }
        }
        resolve_throughs(&isl, &mut entry, &indirect, &w.params, node);
        for a in crop.atomics.iter().filter(|a| a.base.is_none()) {
            entry.reasons.push(reason("an atomic update through a pointer the analysis cannot trace", &a.location));
        }
        let mut untraced_write = crop.atomics.iter().any(|a| a.base.is_none());
        let mut opaque_call = false;
        for u in scops.unmodeled.iter().filter(|u| !w.params.contains(&u.base) && !u.base.starts_with("hpvm.sink")) {
            let what = match u.kind.as_str() {
                "call" => "a call the analysis cannot see into",
                "write" => "a write through a pointer the analysis cannot trace",
                _ => continue,
            };
            untraced_write |= u.kind == "write";
            opaque_call |= u.kind == "call";
            entry.reasons.push(reason(what, &u.location));
        }
        // A write through a pointer the analysis lost track of (loaded back from memory, say
        // from a struct the kernel received by value) may land in any buffer: none is proven
        // only read, so the runtime's whole-node plan keeps every one it may write current.
        // A call that touches memory (a recursive device function, a function reached through
        // a pointer) may read and write any buffer the kernel can reach, alike.
        if untraced_write || opaque_call {
            for a in entry.args.iter_mut().filter(|a| a.write == WriteKind::None) {
                a.write = WriteKind::Unanalysable;
            }
        }
        if opaque_call {
            for a in entry.args.iter_mut().filter(|a| a.read == ReadKind::None) {
                a.read = ReadKind::DataDependent;
            }
        }
        entry.products = scops
            .products
            .iter()
            .map(|(name, factors)| dashdb::Product { name: name.clone(), factors: factors.clone() })
            .collect();
        let known = map_param_names(&entry);
        entry.valid_when = valid_context(&isl, &scops, &narrow.conditions, &distinct_writes, &known);
        // Maps that hold for no launch the runtime can check: whole, said plainly (an ISL
        // `false` would read as a failed check at every launch).
        let never = entry
            .valid_when
            .as_deref()
            .is_some_and(|v| v.trim() == "false" || isl.set(v).and_then(|s| s.is_empty()).unwrap_or(false));
        if never {
            entry.reasons.push(reason(dashdb::MAPS_NEVER_HOLD, &entry.location));
        }
        entry.bounds = narrow.bounds.clone();
        for (i, conds) in &read_in_bounds {
            let valid = entry.valid_when.clone();
            let arg = entry.args.iter_mut().find(|a| a.index == *i).expect("recorded above");
            if arg.read_map.is_some() {
                arg.read_valid_when = read_context(&isl, &scops, conds, valid.as_deref(), &known);
            }
        }
        if node.dims == 0 && entry.block.is_none() {
            entry.reasons.push(reason("it runs as a single instance: there is nothing to split", &entry.location));
        }
        // Maps that depend on where a pointer points (CUB tests an input's alignment to pick
        // vector loads): no launch can give that value, which differs between devices' copies.
        let pointers: Vec<&String> = node
            .params
            .iter()
            .zip(&entry.param_names)
            .filter(|(p, _)| p.ty.is_pointer())
            .map(|(_, name)| name)
            .collect();
        for a in &entry.args {
            if let Some(p) = a.params.iter().find(|p| pointers.contains(p)) {
                entry.reasons.push(reason(
                    format!(
                        "where it accesses `{}` depends on the address `{p}` holds (its alignment, say)",
                        source_name(node, a.index)
                    ),
                    &entry.location,
                ));
            }
        }
        // Whatever the notes said: a write the analysis could not bound keeps the node whole,
        // with a reason (the database's own rule, `dashdb::validate`).
        if entry.reasons.is_empty() {
            for a in &entry.args {
                let may_with_map = a.write == WriteKind::May && a.write_map.is_some();
                let fine =
                    matches!(a.write, WriteKind::None | WriteKind::Exact | WriteKind::Indirect | WriteKind::Reduce);
                if !fine && !may_with_map {
                    entry.reasons.push(reason(
                        format!(
                            "`{}` is written where the analysis cannot tell which elements",
                            source_name(node, a.index)
                        ),
                        &entry.location,
                    ));
                }
            }
        }
        // A grid-stride loop left as written is why its accesses were beyond the model: say
        // what kept it so.
        if !entry.reasons.is_empty() {
            for (_, why, loc) in stride_of.map_or(&[][..], |s| &s.refused[..]) {
                entry.reasons.push(reason(format!("its grid-stride loop cannot be split by iterations: {why}"), loc));
            }
        }
        entry.reasons.dedup();
        let specializable = !entry.reasons.is_empty()
            && opts.fixed.is_empty()
            && entry.block.is_some()
            && entry.reasons.iter().all(|r| wants_values(&r.message));
        // Exact maps from the launch's values come first; failing those, writes the analysis
        // cannot describe are merged at run time where the blocks cannot talk.
        entry.mergeable = blocks_cannot_talk(crop);
        if !entry.reasons.is_empty() && !specializable {
            merge_writes(&mut entry, crop);
        }
        entry.partitionable = entry.reasons.is_empty();
        entry.specializable = specializable && !entry.partitionable;
        entry.merge_fallback = entry.specializable
            && entry.mergeable
            && only_unplaced_writes(&entry.reasons)
            && entry.clone().merge_unplaced_writes();
        if entry.partitionable {
            entry.split = match opts.split.iter().find(|(n, _)| hpvm_core::names::names(n, &node.name)) {
                Some((_, dims)) => {
                    if let Some(d) = dims.iter().find(|&&d| d >= entry.dims) {
                        return Err(Error::Usage(format!(
                            "--split {}: the node has {} dimension(s), there is no dimension {d}",
                            node.display, entry.dims
                        )));
                    }
                    Split { dims: dims.clone(), chosen_by: SplitChoice::User }
                }
                None => Split { dims: split::order(&isl, &entry), chosen_by: SplitChoice::Analysis },
            };
        }
        db.nodes.push(entry);
    }
    Ok(db)
}

/// Makes the node's indescribable writes [`WriteKind::Merged`] (each device a whole copy, the
/// changed bytes merged after the launch) where that is all that keeps it whole: every reason
/// is of writes the analysis cannot place (a data-dependent or non-affine index, a write it
/// cannot tie to a thread, an unbounded may-write), and the blocks of a launch cannot talk
/// through memory ([`blocks_cannot_talk`]), so that what a block writes no other block of the
/// launch reads unless they race. The reasons move to `merged_because`.
fn merge_writes(entry: &mut Node, crop: &crop::Cropped) {
    if !only_unplaced_writes(&entry.reasons) {
        return;
    }
    // Say why the writes were not merged where that alone kept the node whole.
    if let Some(at) = crop.communicates.first() {
        entry.reasons.push(reason(
            "its blocks may talk through memory within a launch (a volatile or atomic load or store outside shared memory, a fence \
             or inline assembly), so that its writes cannot be merged across devices",
            at,
        ));
        return;
    }
    if let Some(a) = crop.atomics.iter().find(|a| a.combines.is_err()) {
        entry.reasons.push(reason(
            "it uses the old value of an atomic update, through which its blocks may talk, so that its writes \
             cannot be merged across devices",
            &a.location,
        ));
        return;
    }
    entry.merge_unplaced_writes();
}

/// Whether every reason not to split is of writes the analysis cannot place (a data-dependent
/// or non-affine index, a write it cannot tie to a thread, an unbounded may-write), which a
/// merge after the launch takes care of, or of maps that hold for no launch (then every
/// write is merged and every read whole: `dashdb::Node::merge_unplaced_writes`).
fn only_unplaced_writes(reasons: &[dashdb::Reason]) -> bool {
    const MERGEABLE: [&str; 9] = [
        "is written at a data-dependent index",
        "is written at an index that is not affine",
        "is written at an index, or under a condition, that is not affine",
        "is written at an index read from memory at a place that is not affine",
        "is written where the analysis cannot follow the write",
        "may or may not be written",
        "may be written at elements the analysis cannot bound",
        "is written where the analysis cannot tell which elements",
        "arithmetic that may wrap around",
    ];
    let mergeable = |r: &dashdb::Reason| {
        MERGEABLE.iter().any(|m| r.message.contains(m))
            || r.message.starts_with("its grid-stride loop cannot be split by iterations")
            || (r.message.contains("is written at indices read from")
                && r.message.contains("which the node also writes"))
            || r.message.starts_with(dashdb::MAPS_NEVER_HOLD)
    };
    !reasons.is_empty() && reasons.iter().all(mergeable)
}

/// Whether the blocks of a launch cannot talk through memory (dashdb's `Node::mergeable`): no
/// volatile or atomic load or store outside shared memory, fence or inline assembly, and every atomic combines
/// (its old value unused, so nothing comes back to the block that made it).
fn blocks_cannot_talk(crop: &crop::Cropped) -> bool {
    crop.communicates.is_empty() && crop.atomics.iter().all(|a| a.combines.is_ok())
}

/// Whether a reason not to split may go away with the launch's values built in (see
/// `dashdb::Node::specializable`): indices and conditions that multiply or divide run-time
/// values, narrow arithmetic whose range depends on them, assumptions on derived values, and
/// writes Polly could not model for the same causes. Data-dependent indices, atomics, calls
/// and untraceable pointers stay what they are whatever the values.
fn wants_values(message: &str) -> bool {
    const VALUE_BOUND: [&str; 7] = [
        "not affine",
        "may or may not be written",
        "cannot bound",
        "cannot follow the write",
        "may wrap around",
        "values the code derives",
        "several instances write the same element",
    ];
    const NEVER: [&str; 3] = ["data-dependent", "atomic", "grid-stride loop cannot be split"];
    VALUE_BOUND.iter().any(|p| message.contains(p)) && !NEVER.iter().any(|p| message.contains(p))
}

/// Records where each indirect write's indices come from, or makes the write unanalysable
/// (with a reason) when the runtime could not read them: the index argument is written by the
/// node too, or its maps see it in another shape than the index map.
/// How messages name the node's parameter `index`: as the source does ([`hpvm_core::names::param_name`]).
fn source_name(node: &hpvm_core::graph::Node, index: u32) -> String {
    node.params.get(index as usize).map_or("?".to_string(), |p| hpvm_core::names::param_name(&p.name).to_string())
}

fn resolve_throughs(
    isl: &isl_glue::Isl,
    entry: &mut Node,
    indirect: &[(u32, maps::Through)],
    params: &[String],
    node: &hpvm_core::graph::Node,
) {
    for (i, t) in indirect {
        let from = params.iter().position(|p| *p == t.arg).and_then(|k| entry.arg(k as u32)).map(|a| (a.index, a));
        let written = entry.args.iter().find(|a| a.index == *i).map_or("?".to_string(), |a| source_name(node, a.index));
        let why = match from {
            None => {
                Some(format!("`{written}` is written at indices read through a pointer the analysis cannot follow"))
            }
            Some((_, a)) if a.write != WriteKind::None => Some(format!(
                "`{written}` is written at indices read from `{}`, which the node also writes",
                source_name(node, a.index)
            )),
            Some((_, a)) if a.dimensionality != 1 && seen_as(isl, &t.map, &a.shape).is_none() => Some(format!(
                "`{written}` is written at indices read from `{}`, which is seen as an array of {} dimensions \
                 whose inner extents are not constants",
                source_name(node, a.index),
                a.dimensionality
            )),
            Some(_) => None,
        };
        let index = from.map(|(k, _)| k);
        let shape = from.map(|(_, a)| a.shape.clone()).unwrap_or_default();
        let arg = entry.args.iter_mut().find(|a| a.index == *i).expect("recorded above");
        match (why, index) {
            (None, Some(k)) => {
                arg.write_through = Some(dashdb::Through {
                    arg: k,
                    map: seen_as(isl, &t.map, &shape).unwrap_or_else(|| t.map.clone()),
                    bits: t.bits,
                    signed: t.signed,
                    scale: t.scale,
                    offset: t.offset,
                    every: t.every,
                })
            }
            (why, _) => {
                arg.write = WriteKind::Unanalysable;
                let why = why.unwrap_or_default();
                entry.reasons.push(reason(why, &t.location));
            }
        }
    }
}

/// An indirect write's index map (one-dimensional, as the load addresses the indices) in the
/// shape the index argument's other maps see it (`shape`, delinearized by the analysis), so
/// that the runtime lists its elements as it lists theirs: the map unchanged for a
/// one-dimensional shape, `None` where an inner extent is not a constant.
fn seen_as(isl: &isl_glue::Isl, map: &str, shape: &[String]) -> Option<String> {
    let m = isl.map(map).ok()?;
    if shape.len() <= 1 {
        return Some(map.to_string());
    }
    if m.output_dims().ok()? != 1 {
        return None;
    }
    let inner: Vec<i64> =
        shape[1..].iter().map(|e| e.trim().parse::<i64>().ok().filter(|&x| x > 0)).collect::<Option<_>>()?;
    m.delinearize(&inner).ok()?.to_text().ok()
}

/// The parameter set (text) where write map `map` sends distinct instances to distinct
/// elements, when that includes launches of two instances or more along some dimension
/// (within the standing bounds); `None` when it does not, or ISL cannot say.
fn distinct_where(isl: &isl_glue::Isl, map: &str) -> Option<String> {
    let m = isl.map(map).ok()?;
    let ok = m.collisions().ok()?.complement().ok()?.drop_unused_params().ok()?;
    let names = ok.params().ok()?;
    // ... and writes something.
    let writes = m.copy().ok()?.params_set().ok()?;
    let mut useful = ok.copy().ok()?.intersect(isl.set(&standing_bounds(&names)).ok()?).ok()?.intersect(writes).ok()?;
    // A launch that splits has two instances along its split dimension at least.
    let grid: Vec<&str> = wrap::GRID_PARAMS.iter().copied().filter(|g| names.iter().any(|n| n == g)).collect();
    if !grid.is_empty() {
        let wide = grid.iter().map(|g| format!("{g} >= 2")).collect::<Vec<_>>().join(" or ");
        useful = useful.intersect(isl.set(&format!("[{}] -> {{ : {wide} }}", grid.join(", "))).ok()?).ok()?;
    }
    if useful.is_empty().ok()? {
        return None;
    }
    ok.to_text().ok()
}

/// Adds to each SCoP's context the range of the type of each narrow parameter, which the
/// wrapper takes as `i64` (`wrap::Wrapper::narrowed`): the runtime reads the value
/// sign-extended, so conditions that only fail outside that range never reach `valid_when`.
fn narrow_contexts(isl: &isl_glue::Isl, scops: &mut polly::Scops, narrowed: &[(String, u32)]) {
    for ctx in &mut scops.contexts {
        let Ok(mut set) = isl.set(ctx) else { continue };
        let names = set.params().unwrap_or_default();
        for (name, bits) in narrowed.iter().filter(|(n, _)| names.contains(n)) {
            let half = 1i128 << (bits - 1);
            if let Ok(range) = isl.set(&format!("[{name}] -> {{ : -{half} <= {name} < {half} }}")) {
                let Ok(s) = set.intersect(range) else { return };
                set = s;
            }
        }
        if let Ok(text) = set.to_text() {
            *ctx = text;
        }
    }
}

/// Polly's assumptions and the conditions of `narrow` (see [`widen`]) as one parameter set;
/// `None` when there are none.
fn valid_context(
    isl: &isl_glue::Isl,
    scops: &polly::Scops,
    narrow: &[(Vec<String>, String)],
    extra: &[String],
    known: &[String],
) -> Option<String> {
    let mut valid: Option<isl_glue::ElementSet> = None;
    for e in extra {
        let Ok(s) = isl.set(e) else { return Some("false".into()) };
        valid = Some(match valid {
            Some(v) => v.intersect(s).ok()?,
            None => s,
        });
    }
    if !narrow.is_empty() {
        let mut names: Vec<&str> = narrow.iter().flat_map(|(n, _)| n.iter().map(String::as_str)).collect();
        names.sort();
        names.dedup();
        let cons: Vec<&str> = narrow.iter().map(|(_, c)| c.as_str()).collect();
        let Ok(s) = isl.set(&format!("[{}] -> {{ : {} }}", names.join(", "), cons.join(" and "))) else {
            return Some("false".into());
        };
        valid = Some(s);
    }
    for (i, assumed) in scops.assumed.iter().enumerate() {
        let Ok(mut s) = isl.set(assumed) else { return Some("false".into()) };
        if let Some(inv) = scops.invalid.get(i).and_then(|t| isl.set(t).ok()) {
            s = match s.subtract(inv) {
                Ok(s) => s,
                Err(_) => return Some("false".into()),
            };
        }
        if let Some(ctx) = scops.contexts.get(i).and_then(|t| isl.set(t).ok()) {
            s = s.gist_params(ctx).ok()?;
        }
        valid = Some(match valid {
            Some(v) => v.intersect(s).ok()?,
            None => s,
        });
    }
    // A write's subscripts must name the elements it writes; a read's are its own affair
    // (`read_context`).
    let writes = scops.accesses.iter().filter(|a| a.kind != polly::AccessKind::Read);
    for inb in writes.filter_map(|a| a.in_bounds.as_deref()) {
        let Ok(s) = isl.set(inb) else { return Some("false".into()) };
        let s = within_context(isl, scops, s)?;
        valid = Some(match valid {
            Some(v) => v.intersect(s).ok()?,
            None => s,
        });
    }
    let v = only_known_params(isl, scops, valid?.drop_unused_params().ok()?, known)?;
    // Polly's no-overflow assumptions only bite near 2^63; under the bounds the runtime
    // anyway requires of map parameters (dashdb's `valid_when`) most of them vanish.
    let names = v.params().ok()?;
    if names.is_empty() {
        return v.is_empty().ok().and_then(|e| e.then(|| "false".to_string()));
    }
    let standing = isl.set(&standing_bounds(&names)).ok()?;
    if standing.is_subset(&v).unwrap_or(false) {
        return None;
    }
    v.gist_params(standing).ok()?.drop_unused_params().ok()?.to_text().ok()
}

/// The names the runtime gives values to when it checks a node's conditions: the grid's and
/// the parent's, the node's scalar parameters (by their names in the maps) and, for a block
/// size known only at the launch, its size, block id and offset.
fn map_param_names(entry: &Node) -> Vec<String> {
    let mut names: Vec<String> =
        ["gx", "gy", "gz", "px", "py", "pz", "pnx", "pny", "pnz"].iter().map(|s| s.to_string()).collect();
    names.extend(entry.param_names.iter().cloned());
    for r in entry.block.iter().flat_map(|b| &b.runtime) {
        names.extend([r.size.clone(), r.id.clone(), r.offset.clone()]);
    }
    names.extend(entry.products.iter().map(|p| p.name.clone()));
    names
}

/// A condition `s` over parameters the runtime knows: one that names others (Polly's own,
/// `p_0` for an expression it could not keep affine, such as a product of two scalars or the
/// grid-stride step `blockDim.x * gridDim.x`) must then hold whatever values they take, since
/// nobody can give them at a launch: within the ranges of their types (the SCoP's context)
/// and the standing bounds every map parameter is held to (dashdb's `PARAM_LIMIT`). That
/// bound is assumed, not checked, for these values, as the simplification under the standing
/// bounds assumed it before (a value the code derives from launch sizes and scalars stays far
/// below 2^40; the products the 32-bit arithmetic forms are checked below 2^31 through the
/// node's `bounds`). Over the whole 64-bit range, a stride's product left no launch valid.
/// `None` where ISL cannot say.
fn only_known_params<'i>(
    isl: &'i isl_glue::Isl,
    scops: &polly::Scops,
    s: isl_glue::ElementSet<'i>,
    known: &[String],
) -> Option<isl_glue::ElementSet<'i>> {
    let unknown: Vec<String> = s.params().ok()?.into_iter().filter(|p| !known.contains(p)).collect();
    if unknown.is_empty() {
        return Some(s);
    }
    // Their ranges alone: the context's constraints on the others stay out of the result.
    let limit = dashdb::PARAM_LIMIT;
    let bounds: Vec<String> = unknown.iter().map(|p| format!("-{limit} <= {p} <= {limit}")).collect();
    let mut range = isl.set(&format!("[{}] -> {{ : {} }}", unknown.join(", "), bounds.join(" and "))).ok()?;
    if let [ctx] = scops.contexts.as_slice() {
        let ctx = isl.set(ctx).ok()?;
        let others: Vec<String> = ctx.params().ok()?.into_iter().filter(|p| !unknown.contains(p)).collect();
        range = range.intersect(ctx.project_out_params(&others).ok()?).ok()?;
    }
    s.for_all_params(&unknown, Some(range)).ok()?.drop_unused_params().ok()
}

/// An access condition `s` simplified, as Polly simplifies its assumptions: within the
/// SCoP's parameter context (the ranges of the parameters' types) and the parameters for
/// which some statement runs (elsewhere nothing is accessed, so any answer is right).
fn within_context<'i>(
    isl: &'i isl_glue::Isl,
    scops: &polly::Scops,
    s: isl_glue::ElementSet<'i>,
) -> Option<isl_glue::ElementSet<'i>> {
    let [ctx] = scops.contexts.as_slice() else { return Some(s) };
    let mut runs: Option<isl_glue::ElementSet> = None;
    for st in &scops.statements {
        let p = isl.set(&st.domain).ok()?.params_of().ok()?;
        runs = Some(match runs {
            Some(r) => r.union(p).ok()?,
            None => p,
        });
    }
    let mut known = isl.set(ctx).ok()?;
    if let Some(r) = runs {
        known = known.intersect(r).ok()?;
    }
    s.gist_params(known).ok()
}

/// Where a read map holds beyond the node's `valid` (its reads' in-bounds conditions
/// `conds`), as dashdb's `read_valid_when`; `None` when it holds wherever `valid` does (and
/// within the standing bounds). `false` when ISL cannot say: the runtime then reads the
/// whole array.
fn read_context(
    isl: &isl_glue::Isl,
    scops: &polly::Scops,
    conds: &[String],
    valid: Option<&str>,
    known: &[String],
) -> Option<String> {
    let mut all: Option<isl_glue::ElementSet> = None;
    for c in conds {
        let Some(s) = isl.set(c).ok().and_then(|s| within_context(isl, scops, s)) else {
            return Some("{ : false }".into());
        };
        all = match all {
            Some(a) => Some(a.intersect(s).ok()?),
            None => Some(s),
        };
    }
    let all = only_known_params(isl, scops, all?.drop_unused_params().ok()?, known)?;
    let names = all.params().ok()?;
    if names.is_empty() {
        return all.is_empty().ok().and_then(|e| e.then(|| "{ : false }".to_string()));
    }
    let mut known = isl.set(&standing_bounds(&names)).ok()?;
    if let Some(v) = valid.and_then(|v| isl.set(v).ok()) {
        known = known.intersect(v).ok()?;
    }
    if known.is_subset(&all).unwrap_or(false) {
        return None;
    }
    all.gist_params(known).ok()?.drop_unused_params().ok()?.to_text().ok()
}

/// The bounds the runtime requires of map parameters (dashdb's `GRID_LIMIT`, `PARAM_LIMIT`),
/// as a parameter set over `names`.
fn standing_bounds(names: &[String]) -> String {
    let bounds: Vec<String> = names
        .iter()
        .map(|p| {
            let p = p.as_str();
            if wrap::GRID_PARAMS.contains(&p) {
                format!("0 <= {p} < {}", dashdb::GRID_LIMIT)
            } else if wrap::BLOCK_SIZES.contains(&p) {
                format!("1 <= {p} < {}", dashdb::GRID_LIMIT)
            } else if wrap::BLOCK_IDS.contains(&p) || wrap::BLOCK_OFFSETS.contains(&p) {
                format!("0 <= {p} <= {}", dashdb::PARAM_LIMIT)
            } else {
                format!("-{lim} <= {p} <= {lim}", lim = dashdb::PARAM_LIMIT)
            }
        })
        .collect();
    format!("[{}] -> {{ : {} }}", names.join(", "), bounds.join(" and "))
}

fn arg_record(name: &str, index: u32, acc: &maps::ArgAccesses, isl: &isl_glue::Isl) -> Arg {
    let mut params: Vec<String> = Vec::new();
    let through = acc.through.as_ref().map(|t| &t.map);
    for map in [acc.read_map.as_ref(), acc.write_map.as_ref(), through].into_iter().flatten() {
        if let Ok(m) = isl.map(map) {
            for p in m.params().unwrap_or_default() {
                if !params.contains(&p) {
                    params.push(p);
                }
            }
        }
    }
    let (fundamental, level) = match acc.element_type.as_deref() {
        Some("ptr") => ("ptr".to_string(), 2),
        Some(t) => (t.to_string(), 1),
        None => ("unknown".to_string(), 1),
    };
    Arg {
        name: name.to_string(),
        index,
        llvm_type: "ptr".into(),
        size_bits: 64,
        element_size: acc.element_size.max(1),
        fundamental_type: fundamental,
        dimensionality: acc.shape.len() as u32,
        shape: acc.shape.clone(),
        pointer_level: level,
        read_map: acc.read_map.clone(),
        write_map: acc.write_map.clone(),
        params,
        read: acc.read,
        write: acc.write,
        write_through: None,
        reduction: None,
        read_valid_when: None,
    }
}

/// How argument `i` (called `shown`) combines its updates when it is a reduction: every
/// access to it is an atomic update of one combining operation whose old value goes unused
/// (`dashdb::WriteKind::Reduce`). `Ok(None)` where it has no atomic update; `Err` gives why
/// its atomic updates keep the node whole, and where.
fn reduction_of(crop: &crop::Cropped, i: u32, shown: &str) -> std::result::Result<Option<Reduction>, (String, String)> {
    let mut atomics = crop.atomics.iter().filter(|a| a.base == Some(i));
    let Some(first) = atomics.next() else { return Ok(None) };
    let why = |what: String, at: &str| {
        Err((
            format!(
                "`{shown}` is updated atomically and {what}: the updates of different devices could not be \
                 combined"
            ),
            at.to_string(),
        ))
    };
    let r = match first.combines {
        Ok(r) => r,
        Err(e) => return why(e.to_string(), &first.location),
    };
    for a in atomics {
        match a.combines {
            Ok(x) if x == r => {}
            Ok(x) => return why(format!("by another operation ({x}, beside {r})"), &a.location),
            Err(e) => return why(e.to_string(), &a.location),
        }
    }
    if crop.plain.contains(&i) {
        return why("also read or written plainly".to_string(), &first.location);
    }
    Ok(Some(r))
}

/// Pointer arguments of a node the analysis could not look at: read entirely, written in
/// unknown ways.
fn unknown_args(graph: &Graph, leaf: NodeId, shared: &[u32]) -> Vec<Arg> {
    let acc = maps::ArgAccesses {
        read: dashdb::ReadKind::DataDependent,
        write: WriteKind::Unanalysable,
        ..Default::default()
    };
    let isl = isl_glue::Isl::new();
    graph.nodes[leaf]
        .params
        .iter()
        .enumerate()
        .filter(|(i, p)| p.ty.is_pointer() && !shared.contains(&(*i as u32)))
        .map(|(i, p)| {
            let mut a = arg_record(&p.name, i as u32, &acc, &isl);
            if !p.access.write {
                a.write = WriteKind::None;
            }
            if !p.access.read {
                a.read = dashdb::ReadKind::None;
            }
            a
        })
        .collect()
}

fn host_machine() -> Result<inkwell::targets::TargetMachine> {
    use inkwell::targets::{Target, TargetMachine};
    Target::initialize_native(&Default::default()).map_err(Error::Llvm)?;
    let triple = TargetMachine::get_default_triple();
    Target::from_triple(&triple)
        .map_err(|e| Error::Llvm(e.to_string()))?
        .create_target_machine(
            &triple,
            "generic",
            "",
            inkwell::OptimizationLevel::None,
            Default::default(),
            Default::default(),
        )
        .ok_or_else(|| Error::Llvm("no target machine for the host".into()))
}

/// Checks that every ISL text of a database parses (maps as maps, conditions as sets): a
/// database given to `build --db` is refused here, naming the node and the argument, rather
/// than at the first launch that needs it.
pub fn check_maps(db: &Database) -> std::result::Result<(), String> {
    let isl = isl_glue::Isl::new();
    for n in &db.nodes {
        let bad = |what: &str, e: isl_glue::Error| format!("node `{}` ({}): {what}: {e}", n.shown(), n.location);
        if let Some(c) = &n.valid_when {
            isl.set(c).map_err(|e| bad("its condition `valid_when`", e))?;
        }
        for a in &n.args {
            let maps = [("read map", a.read_map.as_ref()), ("write map", a.write_map.as_ref())];
            for (what, text) in maps.into_iter().filter_map(|(w, t)| Some((w, t?))) {
                isl.map(text).map_err(|e| bad(&format!("the {what} of `{}`", a.name), e))?;
            }
            if let Some(t) = &a.write_through {
                isl.map(&t.map).map_err(|e| bad(&format!("the index map of `{}`", a.name), e))?;
            }
            if let Some(c) = &a.read_valid_when {
                isl.set(c).map_err(|e| bad(&format!("the read condition of `{}`", a.name), e))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::wants_values;

    /// Reasons that values may lift, and those they never do, as the analysis words them.
    #[test]
    fn reasons_that_want_values() {
        for yes in [
            "`out` is written at an index that is not affine (it multiplies run-time values, as a grid-stride loop's \
             step does)",
            "`out` may or may not be written (under a condition the analysis cannot express)",
            "`x` is written at an index computed in 32-bit `unsigned` arithmetic that may wrap around",
            "`c` is written where the analysis cannot follow the write (it cannot be tied to the thread that runs it)",
        ] {
            assert!(wants_values(yes), "{yes}");
        }
        for no in [
            "`C` is written at a data-dependent index",
            "`X` is updated atomically and its old value is used: the updates of different devices could not be \
             combined",
            "a call the analysis cannot see into",
            "its grid-stride loop cannot be split by iterations: not affine",
        ] {
            assert!(!wants_values(no), "{no}");
        }
    }
}
