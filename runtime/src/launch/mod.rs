//! Launches: a graph run on its own thread (`__hpvm__launch` returns at once, `__hpvm__wait`
//! joins), or a streaming pipeline with one thread per child of the root. The graph itself is
//! interpreted by [`engine`], which hands launch units to [`crate::partitioned`].
//!
//! The modules of the program are loaded here ([`load`]): each is kept for the run with its
//! plan cache ([`Loaded`]), by the address of its description.

pub mod engine;

use crate::args::{Args, SendPtr};
use crate::ctx::{EntryFn, NodeCtx};
use crate::desc::{KindDesc, LaunchDesc};
use crate::devices::{devices, notice_gpu_nodes_on_cpu, Place};
use crate::hash::FxHashMap;
use crate::module::Module;
use crate::partitioned::{self, Forget, Launches};
use crate::sink::{self, Event};
use crate::{fatal, pool, scratch};
use engine::Engine;
use std::ffi::{c_char, c_void, CStr};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

extern "C" {
    #[link_name = "malloc"]
    fn libc_malloc(size: usize) -> *mut c_void;
}

/// A module as launches use it: the program, and the plans of its partitioned launches.
pub struct Loaded {
    pub module: Module,
    pub plans: Launches,
}

/// Modules by the address of their description: parsed on first launch, kept for the run.
fn registry() -> &'static Mutex<FxHashMap<usize, &'static Loaded>> {
    static REGISTRY: OnceLock<Mutex<FxHashMap<usize, &'static Loaded>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// The module whose description is the NUL-terminated JSON at `desc`, loaded on first use
/// (a bad description ends the program).
///
/// # Safety
/// `desc` (and `ptx` unless null) must point to NUL-terminated strings and `entries` to
/// `n_entries` entry points, all living as long as the program (constants of the executable).
pub unsafe fn load(
    desc: *const c_char,
    entries: *const EntryFn,
    n_entries: u32,
    ptx: *const c_char,
) -> &'static Loaded {
    thread_local! {
        /// The module this thread launched from last: a loop of launches finds it without the
        /// registry's lock (modules are never unloaded, so the entry stays right).
        static LAST: std::cell::Cell<Option<(usize, &'static Loaded)>> = const { std::cell::Cell::new(None) };
    }
    if let Some((d, m)) = LAST.with(|l| l.get()) {
        if d == desc as usize {
            return m;
        }
    }
    let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&m) = reg.get(&(desc as usize)) {
        LAST.with(|l| l.set(Some((desc as usize, m))));
        return m;
    }
    let json = unsafe { CStr::from_ptr(desc) }.to_string_lossy();
    let entries = unsafe { std::slice::from_raw_parts(entries, n_entries as usize) }.to_vec();
    let ptx = (!ptx.is_null()).then(|| unsafe { CStr::from_ptr(ptx) });
    let mut module = Module::load(&json, entries, ptx).unwrap_or_else(|e| fatal(&e));
    module.analysis_input = ANALYSIS_INPUTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(d, _)| *d == desc as usize)
        .map(|(_, input)| *input);
    if let Some(db) = &module.analysis {
        partitioned::prefetch(db);
    }
    // Kept for the whole run: launches, streams and planning in the background refer to it.
    let loaded: &'static Loaded = Box::leak(Box::new(Loaded { module, plans: Launches::default() }));
    reg.insert(desc as usize, loaded);
    loaded
}

/// Modules named by the executable's constructors ([`register`]), not loaded yet.
/// (description, entries, entry count, PTX, machine code), as addresses.
type Registration = (usize, usize, u32, usize, usize);
static REGISTERED: Mutex<Vec<Registration>> = Mutex::new(Vec::new());

/// Remembers a module of the program, to be loaded when the session opens
/// ([`load_registered`]). Called before `main`: it reads nothing and opens nothing, so that
/// settings the program makes before its session still apply.
///
/// # Safety
/// As [`load`]'s.
pub unsafe fn register(
    desc: *const c_char,
    entries: *const EntryFn,
    n_entries: u32,
    ptx: *const c_char,
    sass: *const u8,
) {
    let mut r = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
    r.push((desc as usize, entries as usize, n_entries, ptx as usize, sass as usize));
}

/// Analysis inputs by module description ([`register_analysis_input`]).
static ANALYSIS_INPUTS: Mutex<Vec<(usize, crate::module::AnalysisInput)>> = Mutex::new(Vec::new());

/// Remembers the analysis input of the module described by `desc` (called before `main`,
/// after the module's [`register`]).
pub fn register_analysis_input(desc: *const c_char, input: crate::module::AnalysisInput) {
    ANALYSIS_INPUTS.lock().unwrap_or_else(|e| e.into_inner()).push((desc as usize, input));
}

/// Loads the registered modules and compiles their kernels on every GPU (in parallel, one
/// thread per GPU), so that a program's first launch does not pay for either. A kernel that
/// fails to compile here fails again at its launch, which reports it with the node's name.
pub fn load_registered() {
    let pending = std::mem::take(&mut *REGISTERED.lock().unwrap_or_else(|e| e.into_inner()));
    let mut ptx = Vec::new();
    for (desc, entries, n, p, sass) in pending {
        // SAFETY: registered by the executable's constructors with its own constants.
        let m = unsafe { load(desc as *const c_char, entries as *const EntryFn, n, p as *const c_char) };
        if let Some(p) = m.module.ptx {
            // SAFETY: as above; the build wrote the blob with `sass::pack`.
            crate::devices::cuda::machine_code(p, unsafe { crate::sass::Images::read(sass as *const u8) });
            ptx.push(p);
        }
    }
    crate::devices::cuda::register_modules(&ptx);
    let gpus = &devices().gpus;
    if ptx.is_empty() || gpus.is_empty() {
        return;
    }
    // On the GPUs open so far; the others load them when they open (`devices::opening`).
    std::thread::scope(|s| {
        for g in gpus.iter().filter(|g| g.is_open()) {
            let ptx = &ptx;
            s.spawn(move || {
                for p in ptx {
                    let _ = g.load_module(p);
                }
            });
        }
    });
}

/// Every module loaded so far, for the statistics report.
pub fn loaded() -> Vec<&'static Loaded> {
    registry().lock().unwrap_or_else(|e| e.into_inner()).values().copied().collect()
}

/// Items in flight between two pipeline stages.
const STREAM_DEPTH: usize = 4;

/// How a launch runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    /// HPVM's `__hpvm__launch`: the graph runs on its own thread, `__hpvm__wait` joins it.
    Graph,
    /// A streaming pipeline (`__hpvm__push`/`__hpvm__pop`).
    Streaming,
    /// A CUDA kernel launch, whose launcher waits at once: the graph runs on the calling
    /// thread before `start` returns, and its GPU work may still be in flight then, as a
    /// CUDA launch's is ([`crate::devices::inflight`]).
    Cuda,
}

thread_local! {
    /// Whether this thread is inside a CUDA kernel's launcher ([`as_cuda_launch`]).
    static IN_CUDA_LAUNCH: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` (a CUDA kernel's launcher, which launches its graph and waits at once) so that
/// its launch runs as [`Mode::Cuda`].
pub fn as_cuda_launch<R>(f: impl FnOnce() -> R) -> R {
    IN_CUDA_LAUNCH.with(|l| l.set(true));
    let r = f();
    IN_CUDA_LAUNCH.with(|l| l.set(false));
    r
}

/// Whether the calling thread is inside [`as_cuda_launch`].
pub fn in_cuda_launch() -> bool {
    IN_CUDA_LAUNCH.with(|l| l.get())
}

/// What `__hpvm__launch` returns.
pub struct Launch {
    module: &'static Loaded,
    launch: u32,
    thread: Option<JoinHandle<()>>,
    stream: Option<Stream>,
}

struct Stream {
    input: Option<SyncSender<Arc<Vec<u8>>>>,
    output: Receiver<Vec<u8>>,
    stages: Vec<JoinHandle<()>>,
    /// Under ranks: no stage threads; each item runs through the whole graph when pushed.
    serial: Option<Serial>,
}

/// A stream under ranks: each pushed item runs through root `root` at once, in program order
/// on every rank, its output record (if the root binds any) sent to the stream's `output`.
struct Serial {
    module: &'static Loaded,
    root: u32,
    outputs: Option<Sender<Vec<u8>>>,
}

/// The instance context of a root: one instance, no parent.
const ROOT_CTX: NodeCtx = NodeCtx { id: [0; 3], dim: [1; 3], parent: std::ptr::null() };

fn engine(loaded: &'static Loaded, asynchronous: bool) -> Engine {
    if loaded.module.ptx.is_some() && !devices().on_gpus() {
        notice_gpu_nodes_on_cpu();
    }
    Engine {
        module: &loaded.module,
        plans: &loaded.plans,
        place: Place::Host,
        asynchronous,
        host_current: false,
        cooperative: crate::devices::cooperative(),
    }
}

impl Launch {
    fn desc(&self) -> &LaunchDesc {
        &self.module.module.program.launches[self.launch as usize]
    }

    /// Copies the root's arguments out of the user's struct into a packed buffer.
    ///
    /// # Safety
    /// `user` points to the launch's argument struct.
    pub(crate) unsafe fn root_args(module: &Module, launch: u32, user: *const u8) -> crate::args::ArgBytes {
        let l = &module.program.launches[launch as usize];
        let root = &module.program.nodes[l.root as usize];
        let mut buf = crate::args::ArgBytes::from_elem(0, root.args_size());
        for (p, &off) in root.params.iter().zip(&l.arg_offsets) {
            let src = unsafe { std::slice::from_raw_parts(user.add(off as usize), p.size as usize) };
            buf[p.offset as usize..(p.offset + p.size) as usize].copy_from_slice(src);
        }
        buf
    }

    /// Replays a CUDA launch ([`partitioned::replay`]) where its record allows; whether it
    /// did.
    ///
    /// # Safety
    /// `user` points to the launch's argument struct.
    pub unsafe fn replay(module: &'static Loaded, launch: u32, user: *const u8) -> bool {
        if module.module.cuda_unit(launch).is_none()
            || !partitioned::replay::may_record()
            || crate::devices::cooperative()
        {
            return false;
        }
        // SAFETY: the caller's argument struct, of this launch's launcher.
        unsafe { partitioned::replay::try_launch(&module.module, &module.plans, launch, user) }
    }

    /// Starts a launch.
    ///
    /// # Safety
    /// `user` points to the launch's argument struct and stays valid until `wait` returns.
    pub unsafe fn start(module: &'static Loaded, launch: u32, mode: Mode, user: *mut u8) -> Box<Launch> {
        if launch as usize >= module.module.program.launches.len() {
            fatal(&format!("launch {launch} is not in the program description"));
        }
        sink::record(Event::GraphLaunch);
        let ranks = crate::ranks::spans_ranks();
        if ranks {
            // This launch's own arguments count: ranks that would launch it differently
            // stop before any of its copies (which would not match) are tried.
            if mode != Mode::Streaming {
                note_root_args(&module.module, launch, &unsafe { Self::root_args(&module.module, launch, user) });
            }
            crate::ranks::agree(&format!("launching {}", module.module.program.launches[launch as usize].loc));
        }
        if mode == Mode::Streaming {
            let stream = Stream::start(module, launch);
            return Box::new(Launch { module, launch, thread: None, stream: Some(stream) });
        }
        let args = unsafe { Self::root_args(&module.module, launch, user) };
        let user = SendPtr(user);
        let loaded = module;
        let cooperative = crate::devices::cooperative();
        let run = move || {
            let user = user;
            let m = &loaded.module;
            let l = &m.program.launches[launch as usize];
            let root = &m.program.nodes[l.root as usize];
            let mut out = vec![0u8; root.outputs_size()];
            let out_ptr = SendPtr(if out.is_empty() { std::ptr::null_mut() } else { out.as_mut_ptr() });
            let go = || {
                let e = engine(loaded, mode == Mode::Cuda);
                let grid = m.grid(l.root, None);
                e.run(l.root, &Args::uniform(args), &ROOT_CTX, grid, out_ptr)
            };
            // The pool's thread runs it as the caller would: cooperative where the caller's is.
            let go = || if cooperative { crate::devices::as_cooperative_launch(go) } else { go() };
            // A CUDA launch on GPUs (or dry-run devices) only enqueues work, and its graph is
            // one root over one grid of blocks, which the engine runs inline: it stays on the
            // caller's thread, since handing it to the pool and back costs two thread
            // wake-ups, more than the rest of a short launch.
            let devs = devices();
            if mode == Mode::Cuda && (devs.on_gpus() || devs.sims.first().is_some_and(|d| d.is_dry())) {
                go()
            } else {
                pool::pool().install(go)
            }
            // The root's outputs go to the trailing struct of the user's arguments.
            for (o, &off) in root.outputs.iter().zip(&l.out_offsets) {
                // SAFETY: the user's struct outlives the launch (HPVM's contract).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        out[o.offset as usize..].as_ptr(),
                        user.0.add((l.out_base + off) as usize),
                        o.size as usize,
                    )
                };
            }
        };
        // Under ranks a graph runs to its end before the launch returns, so that every rank
        // makes its runtime calls in program order (the host's code between a launch and
        // its wait may not touch what the graph uses anyway).
        if mode == Mode::Cuda || ranks {
            run();
            return Box::new(Launch { module, launch, thread: None, stream: None });
        }
        let thread = std::thread::Builder::new()
            .name("hpvm-launch".into())
            .spawn(run)
            .unwrap_or_else(|e| fatal(&format!("cannot start a launch thread: {e}")));
        Box::new(Launch { module, launch, thread: Some(thread), stream: None })
    }

    /// `__hpvm__wait`: for a streaming launch, ends the stream and drains it.
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                fatal("a launch failed");
            }
        }
        if let Some(mut s) = self.stream.take() {
            s.input = None;
            s.serial = None;
            for t in s.stages.drain(..) {
                if t.join().is_err() {
                    fatal("a pipeline stage failed");
                }
            }
        }
    }

    /// `__hpvm__push`: one set of root arguments into the stream.
    ///
    /// # Safety
    /// `user` points to an argument struct of this launch's layout.
    pub unsafe fn push(&self, user: *const u8) {
        let Some(s) = &self.stream else {
            fatal(&format!("__hpvm__push on the non-streaming launch at {}", self.desc().loc))
        };
        let args = unsafe { Self::root_args(&self.module.module, self.launch, user) };
        sink::record(Event::StreamItem);
        if let Some(serial) = &s.serial {
            note_root_args(&self.module.module, self.launch, &args);
            crate::ranks::agree(&format!("pushing into {}", self.desc().loc));
            let record = run_root_item(serial.module, serial.root, &args);
            if let Some(tx) = &serial.outputs {
                // The receiver lives in this same stream.
                let _ = tx.send(record);
            }
            return;
        }
        if let Some(tx) = &s.input {
            if tx.send(Arc::new(args.to_vec())).is_err() {
                fatal("the pipeline stopped accepting input");
            }
        }
    }

    /// `__hpvm__pop`: the root's outputs for the next item, as the user's output struct in
    /// memory from `malloc` (the caller may `free` it); null once the stream has ended.
    pub fn pop(&self) -> *mut u8 {
        let Some(s) = &self.stream else {
            fatal(&format!("__hpvm__pop on the non-streaming launch at {}", self.desc().loc))
        };
        let Ok(record) = s.output.recv() else { return std::ptr::null_mut() };
        let l = self.desc();
        let root = &self.module.module.program.nodes[l.root as usize];
        // SAFETY: malloc of at least one byte; null checked.
        let user = unsafe { libc_malloc((l.out_size as usize).max(1)) } as *mut u8;
        if user.is_null() {
            fatal("__hpvm__pop: out of memory");
        }
        for (o, &off) in root.outputs.iter().zip(&l.out_offsets) {
            // SAFETY: `user` has `out_size` bytes and the compiler put every field inside.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    record[o.offset as usize..].as_ptr(),
                    user.add(off as usize),
                    o.size as usize,
                )
            };
        }
        user
    }
}

impl Stream {
    /// One stage per child of the root (or one for a leaf root), joined by channels along the
    /// root's edges; every stage gets each item's root arguments for its bound inputs.
    fn start(module: &'static Loaded, launch: u32) -> Stream {
        let root = module.module.program.launches[launch as usize].root;
        if crate::ranks::spans_ranks() {
            let (tx, rx) = channel::<Vec<u8>>();
            // As the collector below: a root without bound outputs has nothing to pop.
            let outputs = match &module.module.program.nodes[root as usize].kind {
                KindDesc::Internal { bind_out, .. } => !bind_out.is_empty(),
                KindDesc::Leaf { .. } => true,
            };
            let serial = Some(Serial { module, root, outputs: outputs.then_some(tx) });
            return Stream { input: None, output: rx, stages: Vec::new(), serial };
        }
        let (input_tx, input_rx) = sync_channel::<Arc<Vec<u8>>>(STREAM_DEPTH);
        // Unbounded, so a program may push every item before popping any.
        let (output_tx, output_rx) = channel::<Vec<u8>>();
        let mut stages = Vec::new();
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name)
                .spawn(f)
                .unwrap_or_else(|e| fatal(&format!("cannot start a pipeline stage: {e}")))
        };

        let KindDesc::Internal { children, edges, bind_out, .. } =
            module.module.program.nodes[root as usize].kind.clone()
        else {
            // A leaf root: one stage running it per item.
            let m = module;
            stages.push(spawn(
                "hpvm-stage".into(),
                Box::new(move || {
                    for args in input_rx {
                        let out = run_root_item(m, root, &args);
                        if output_tx.send(out).is_err() {
                            break;
                        }
                    }
                }),
            ));
            return Stream { input: Some(input_tx), output: output_rx, stages, serial: None };
        };

        // Channels: root arguments to each stage; each edge's source records to its destination;
        // each child with bound outputs to the collector.
        type Records = Arc<(Vec<u8>, i64)>;
        let mut args_tx = Vec::new();
        let mut args_rx = Vec::new();
        for _ in &children {
            let (tx, rx) = sync_channel::<Arc<Vec<u8>>>(STREAM_DEPTH);
            args_tx.push(tx);
            args_rx.push(Some(rx));
        }
        let mut edge_tx: Vec<Option<SyncSender<Records>>> = Vec::new();
        let mut edge_rx: Vec<Option<Receiver<Records>>> = Vec::new();
        for _ in &edges {
            let (tx, rx) = sync_channel::<Records>(STREAM_DEPTH);
            edge_tx.push(Some(tx));
            edge_rx.push(Some(rx));
        }
        let bound: Vec<u32> = children.iter().copied().filter(|c| bind_out.iter().any(|b| b.child == *c)).collect();
        let mut collect_tx = Vec::new();
        let mut collect_rx = Vec::new();
        for _ in &bound {
            let (tx, rx) = sync_channel::<Records>(STREAM_DEPTH);
            collect_tx.push(Some(tx));
            collect_rx.push(rx);
        }

        // Distributor: each pushed item to every stage.
        stages.push(spawn(
            "hpvm-stream-in".into(),
            Box::new(move || {
                for item in input_rx {
                    for tx in &args_tx {
                        if tx.send(item.clone()).is_err() {
                            return;
                        }
                    }
                }
            }),
        ));

        for (k, &c) in children.iter().enumerate() {
            let m = module;
            let rx_args = args_rx[k].take().expect("one receiver per stage");
            let ins: Vec<(usize, Receiver<Records>)> = edges
                .iter()
                .enumerate()
                .filter(|(_, e)| e.dst == c)
                .map(|(i, _)| (i, edge_rx[i].take().expect("one receiver per edge")))
                .collect();
            let outs: Vec<SyncSender<Records>> = edges
                .iter()
                .enumerate()
                .filter(|(_, e)| e.src == c)
                .map(|(i, _)| edge_tx[i].take().expect("one sender per edge"))
                .collect();
            let collect =
                bound.iter().position(|&b| b == c).map(|i| collect_tx[i].take().expect("one sender per bound child"));
            let edges = edges.clone();
            stages.push(spawn(
                format!("hpvm-stage-{k}"),
                Box::new(move || {
                    let e = engine(m, false);
                    for args in rx_args {
                        let mut received = Vec::new();
                        for (i, rx) in &ins {
                            let Ok(r) = rx.recv() else { return };
                            received.push((*i, r));
                        }
                        let grid = m.module.grid(c, Some((root, &args)));
                        let records = {
                            let child_args = m.module.child_args(root, c, &args, &|edge| {
                                let i = edges.iter().position(|x| x == edge).expect("edge of this root");
                                let r = &received.iter().find(|(j, _)| *j == i).expect("input received").1;
                                (&r.0[..], r.1)
                            });
                            let scope = scratch::Scope::default();
                            pool::pool().install(|| e.run_child(c, &child_args, &ROOT_CTX, grid, &scope))
                        };
                        let records = Arc::new((records, grid.iter().product::<i64>()));
                        for tx in &outs {
                            if tx.send(records.clone()).is_err() {
                                return;
                            }
                        }
                        if let Some(tx) = &collect {
                            if tx.send(records).is_err() {
                                return;
                            }
                        }
                    }
                }),
            ));
        }

        // Collector: assembles the root's output record per item.
        let m = module;
        stages.push(spawn(
            "hpvm-stream-out".into(),
            Box::new(move || {
                let size = m.module.program.nodes[root as usize].outputs_size();
                loop {
                    let mut got = Vec::new();
                    for rx in &collect_rx {
                        let Ok(r) = rx.recv() else { return };
                        got.push(r);
                    }
                    if bound.is_empty() {
                        // Nothing bound: the stream has no outputs to pop.
                        return;
                    }
                    let mut out = vec![0u8; size];
                    let ptr = SendPtr(if out.is_empty() { std::ptr::null_mut() } else { out.as_mut_ptr() });
                    m.module.bind_outputs(root, ptr, &|c| {
                        bound.iter().position(|&b| b == c).map(|i| (&got[i].0[..], got[i].1))
                    });
                    if output_tx.send(out).is_err() {
                        return;
                    }
                }
            }),
        ));
        Stream { input: Some(input_tx), output: output_rx, stages, serial: None }
    }
}

/// Under ranks: folds a root's arguments as every rank sees them
/// ([`crate::memory::rank_stable_args`]) into the hash the ranks compare
/// ([`crate::ranks::agree`]).
fn note_root_args(m: &Module, launch: u32, args: &[u8]) {
    let root = &m.program.nodes[m.program.launches[launch as usize].root as usize];
    let mut key = crate::memory::rank_stable_args(&root.params, args);
    key.extend(launch.to_le_bytes());
    crate::ranks::note_launch(&key);
}

/// Runs a root over one item's arguments and returns its output record.
fn run_root_item(m: &'static Loaded, root: u32, args: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; m.module.program.nodes[root as usize].outputs_size()];
    let ptr = SendPtr(if out.is_empty() { std::ptr::null_mut() } else { out.as_mut_ptr() });
    pool::pool().install(|| {
        let e = engine(m, false);
        let grid = m.module.grid(root, None);
        e.run(root, &Args::uniform(args.to_vec()), &ROOT_CTX, grid, ptr)
    });
    out
}

/// Benchmarks only: one launch of unit `node` (a child of a root) with the argument buffer
/// `args` over `grid`, as the engine would make it. False when it ran on the host.
#[doc(hidden)]
pub fn bench_launch(loaded: &'static Loaded, node: u32, args: Vec<u8>, grid: [i64; 3]) -> bool {
    let e = Engine {
        module: &loaded.module,
        plans: &loaded.plans,
        place: Place::Host,
        asynchronous: false,
        host_current: false,
        cooperative: false,
    };
    let Some(shape) = &loaded.module.node(node).shape else { return false };
    let parent = SendPtr(&ROOT_CTX as *const NodeCtx as *mut NodeCtx);
    let outs = SendPtr(std::ptr::null_mut());
    let unit =
        partitioned::Unit { module: e.module, plans: e.plans, node, shape, parent, grid, outs, asynchronous: false };
    let run_box = |place: Place, bx, args: &Args| Engine { place, ..e }.run_box(node, args, parent, grid, bx, outs);
    partitioned::run_unit(&unit, &Args::uniform(args), &run_box)
}

/// Benchmarks only: forgets what the runtime has computed, so the next launch misses.
#[doc(hidden)]
pub fn bench_forget(loaded: &Loaded, what: Forget) {
    partitioned::bench_forget(&loaded.plans, what);
}
