//! The device half: each `__global__` kernel becomes the graph of a GPU launch.
//!
//! For a kernel `K(params)` using static `__shared__` variables `s…`, dynamic (`extern`)
//! shared memory and `__device__`/`__constant__` variables `v…`:
//!
//! ```text
//! K.root(front…, bx, by, bz, shared sizes…, gx, gy, gz)     CPU: a 3-D grid of blocks
//!   K.blocks(front…, bx, by, bz, shared sizes…)             GPU: one instance per block
//!     K.alloc(shared sizes…)                                 0-D: __hpvm__malloc per block
//!     K(front…, s0, bytes, …, dyn, bytes)                    the leaf: bx × by × bz threads
//! front = the kernel's parameters, each pointer followed by its extent, then (v, bytes)…
//! ```
//!
//! The leaf keeps the kernel's symbol and its body (with every `__device__` function inlined);
//! special registers become instance ids and counts of the leaf (threads) and its parent
//! (blocks), `__syncthreads` becomes `__hpvm__barrier`, libdevice's `__nv_*` math becomes libm
//! where libm has it. Variables in the GPU's address spaces become the leaf's parameters
//! (shared memory from the allocation node, device variables bound by the launcher to the
//! host's shadow variables); read-only data without a shadow moves to ordinary memory.

use super::consts;
use crate::{Error, Result};
use hpvm_core::markers::{PRINTF, RUNTIME_NV, WARP_PREFIX};
use hpvm_core::Val;
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::types::{AsTypeRef, BasicMetadataTypeEnum, BasicTypeEnum};
use inkwell::values::{AsValueRef, BasicMetadataValueEnum, BasicValueEnum, FunctionValue, GlobalValue};
use inkwell::AddressSpace;
use llvm_sys::core::*;
use llvm_sys::debuginfo::*;
use llvm_sys::prelude::*;

/// What the host side needs to launch one converted kernel.
pub(super) struct Kernel {
    /// The kernel's symbol, which the leaf keeps.
    pub symbol: String,
    pub root: String,
    /// The kernel's parameters, in order.
    pub params: Vec<Param>,
    /// `__device__`/`__constant__` variables: the host shadow's name and its size in bytes.
    pub symbols: Vec<(String, u64)>,
    /// Sizes of the static `__shared__` variables, in bytes.
    pub shared: Vec<u64>,
    /// Whether the kernel uses dynamic (`extern __shared__`) memory, sized by the launch.
    pub dynamic_shared: bool,
    /// Leaf parameters (among [`buffer_params`]) the kernel provably never writes through:
    /// the graph declares them inputs only ([`read_only`]).
    pub read_only: Vec<usize>,
    /// Leaf parameters the kernel never reads (by index): the padding of a struct passed by
    /// value (clang lays Thrust's functors out with explicit padding bytes), pointers the
    /// code never uses. The launcher passes zero there, not the caller's bytes, so that
    /// launches that differ only in padding look alike (the plan caches' keys, the ranks'
    /// agreement), and a pointer no buffer holds binds nothing.
    pub unused: Vec<usize>,
}

/// A kernel parameter, as the graph takes it: its scalars, one node parameter each (a
/// pointer followed by its extent). A struct or array passed by value is taken apart into the
/// scalars it holds and put together again at the top of the leaf.
pub(super) struct Param {
    /// The parameter's type; for one passed by value (`byval`), the type of the value.
    pub ty: LLVMTypeRef,
    pub by_value: bool,
    /// The scalars: the path of field and element indices to each, and its type.
    pub scalars: Vec<(Vec<u32>, LLVMTypeRef)>,
    /// Not an argument of the launch but a value the kernel loads from a `__constant__`
    /// variable (its host shadow's name) at a byte offset, read there at the launch
    /// ([`super::hoist`]). Such parameters follow the kernel's own.
    pub from_symbol: Option<(String, u64)>,
    /// A value too large to pass as scalars (an array of thousands of elements, as CUDA 12.1's
    /// 32 KiB parameters allow): one buffer parameter holding its bytes (and its extent),
    /// which the launcher fills ([`super::launchers`]) and the leaf copies into its own copy.
    pub blob: bool,
}

impl Param {
    /// Node parameters this parameter takes: each scalar, pointers with their extents.
    fn width(&self) -> usize {
        if self.blob {
            return 2;
        }
        self.scalars.iter().map(|&(_, t)| if unsafe { is_pointer(t) } { 2 } else { 1 }).sum()
    }
}

/// A value passed by value with more scalars than this goes as one buffer of its bytes
/// ([`Param::blob`]), not as that many node parameters; so does one holding an array of more
/// than 256 elements. Below, scalars: the kernel then indexes a local copy, which the
/// analysis need not map (a buffer indexed by `i % 20` and `(i / 20) % 30` took it over 20 s).
const BLOB_ABOVE: usize = 1024;

/// Whether a value of type `ty` holds a pointer anywhere (then it cannot go as bytes: the
/// runtime must see each pointer to give the device its copy's address).
unsafe fn holds_pointer(ty: LLVMTypeRef) -> bool {
    use llvm_sys::LLVMTypeKind::*;
    match LLVMGetTypeKind(ty) {
        LLVMPointerTypeKind => true,
        LLVMStructTypeKind => {
            (0..LLVMCountStructElementTypes(ty)).any(|i| holds_pointer(LLVMStructGetTypeAtIndex(ty, i)))
        }
        LLVMArrayTypeKind | LLVMVectorTypeKind => holds_pointer(LLVMGetElementType(ty)),
        _ => false,
    }
}

/// The scalars of a value of type `ty` (int, float or pointer), with their index paths;
/// `None` if it holds anything else (vectors, or an empty aggregate).
fn scalars_of(ty: LLVMTypeRef) -> Option<Vec<(Vec<u32>, LLVMTypeRef)>> {
    use llvm_sys::LLVMTypeKind::*;
    let kind = unsafe { LLVMGetTypeKind(ty) };
    let inner = |i: u32, t: LLVMTypeRef| -> Option<Vec<(Vec<u32>, LLVMTypeRef)>> {
        Some(
            scalars_of(t)?
                .into_iter()
                .map(|(mut path, t)| {
                    path.insert(0, i);
                    (path, t)
                })
                .collect(),
        )
    };
    match kind {
        LLVMIntegerTypeKind | LLVMFloatTypeKind | LLVMDoubleTypeKind | LLVMHalfTypeKind | LLVMPointerTypeKind => {
            Some(vec![(Vec::new(), ty)])
        }
        LLVMStructTypeKind => {
            let n = unsafe { LLVMCountStructElementTypes(ty) };
            let mut out = Vec::new();
            for i in 0..n {
                out.extend(inner(i, unsafe { LLVMStructGetTypeAtIndex(ty, i) })?);
            }
            (!out.is_empty()).then_some(out)
        }
        LLVMArrayTypeKind => {
            let n = unsafe { LLVMGetArrayLength2(ty) } as u32;
            let elem = unsafe { LLVMGetElementType(ty) };
            let mut out = Vec::new();
            for i in 0..n.min(256) {
                out.extend(inner(i, elem)?);
            }
            (n <= 256 && !out.is_empty()).then_some(out)
        }
        _ => None,
    }
}

/// Reads the device halves of one or more sources (NVPTX IR as text, with the sources' names
/// for messages) into one module: their kernels, and the module without their NVPTX
/// annotations (which would make the GPU backend take every leaf for a kernel of its own).
/// Several halves are linked as one program's device code is (relocatable device code): a
/// kernel may call a `__device__` function or use a `__device__` variable another defines.
/// A kernel or variable local to its source (`static`) whose name an earlier source has too
/// is renamed apart (a `.rdcN` suffix, N the source's index); the renames, per source, are
/// returned for its host half, whose stubs and shadows must follow.
pub(super) fn read<'ctx>(ctx: &'ctx Context, halves: &[(&str, &str)]) -> Result<Read<'ctx>> {
    let mut linked: Option<Module<'ctx>> = None;
    let mut kernels = Vec::new();
    let mut renames = Vec::new();
    // Every source's names local to it so far (`static` kernels and variables), which the
    // host registers by name.
    let mut local: Vec<String> = Vec::new();
    for (i, &(source, text)) in halves.iter().enumerate() {
        let parse = |text: &str| {
            let buf = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(text.as_bytes(), "device");
            ctx.create_module_from_ir(buf)
                .map_err(|e| Error::BadIr { file: source.to_string(), message: e.to_string() })
        };
        let annotated = parse(text)?;
        let mut these = kernels_of(&annotated);
        drop(annotated);
        let kept: String =
            text.lines().filter(|l| !l.starts_with("!nvvm.annotations = ")).flat_map(|l| [l, "\n"]).collect();
        let module = parse(&kept)?;
        let mut renamed = Vec::new();
        if halves.len() > 1 {
            for (name, is_kernel) in local_symbols(&module, &these) {
                if !local.contains(&name) {
                    local.push(name);
                    continue;
                }
                let new = format!("{name}.rdc{i}");
                let global = match is_kernel {
                    true => module.get_function(&name).expect("a kernel of the module").as_global_value(),
                    false => module.get_global(&name).expect("a variable of the module"),
                };
                global.set_name(&new);
                // Out of the comdat named after it (clang puts a `static` kernel in one), which
                // the link would otherwise fold into the earlier source's, dropping this one.
                unsafe { llvm_sys::comdat::LLVMSetComdat(global.as_value_ref(), std::ptr::null_mut()) };
                if let Some(k) = these.iter_mut().find(|k| **k == name) {
                    *k = new.clone();
                }
                renamed.push(Rename { from: name, to: new, kernel: is_kernel });
            }
        }
        renames.push(renamed);
        for k in these {
            if !kernels.contains(&k) {
                kernels.push(k);
            }
        }
        match &linked {
            None => linked = Some(module),
            Some(all) => all.link_in_module(module).map_err(|e| {
                Error::Cuda(format!("{source}: error: linking its device code with the other files': {e}"))
            })?,
        }
    }
    let module = linked.ok_or_else(|| Error::Cuda("no CUDA source to read".into()))?;
    Ok(Read { module, kernels, renames })
}

/// What [`read`] made of device halves.
pub(super) struct Read<'ctx> {
    pub module: Module<'ctx>,
    pub kernels: Vec<String>,
    /// Per source, the names of its own that were renamed apart from an earlier source's.
    pub renames: Vec<Vec<Rename>>,
}

/// A kernel or variable local to its source, renamed apart from another source's of the same
/// name ([`read`]).
pub(super) struct Rename {
    pub from: String,
    pub to: String,
    pub kernel: bool,
}

/// The module's kernels (of `kernels`) and GPU variables local to its source: those the host
/// registers by name. clang gives a `static` kernel (or one in an anonymous namespace) an
/// external symbol in a comdat, so the link would keep one of two such kernels for both;
/// its name says it is local (`_ZL`, `_GLOBAL__N_`). Other local functions may share names
/// across sources: the link renames them, and each source's calls keep to its own.
fn local_symbols(m: &Module<'_>, kernels: &[String]) -> Vec<(String, bool)> {
    let local = |l: Linkage| matches!(l, Linkage::Internal | Linkage::Private);
    let functions = kernels.iter().filter(|k| {
        m.get_function(k).is_some_and(|f| {
            f.count_basic_blocks() > 0 && (local(f.get_linkage()) || k.starts_with("_ZL") || k.contains("_GLOBAL__N_"))
        })
    });
    let variables = m.get_globals().filter(|g| {
        let space = unsafe { LLVMGetPointerAddressSpace(LLVMTypeOf(g.as_value_ref())) };
        matches!(space, 1 | 4) && !g.is_declaration() && local(g.get_linkage())
    });
    let variables = variables.map(|g| (g.get_name().to_string_lossy().into_owned(), false));
    functions.map(|k| (k.clone(), true)).chain(variables).collect()
}

/// The functions `nvvm.annotations` marks as kernels.
fn kernels_of(m: &Module<'_>) -> Vec<String> {
    let name = c"nvvm.annotations";
    let mut out = Vec::new();
    unsafe {
        let n = LLVMGetNamedMetadataNumOperands(m.as_mut_ptr(), name.as_ptr());
        let mut nodes = vec![std::ptr::null_mut(); n as usize];
        LLVMGetNamedMetadataOperands(m.as_mut_ptr(), name.as_ptr(), nodes.as_mut_ptr());
        for node in nodes {
            let k = LLVMGetMDNodeNumOperands(node);
            if k < 2 {
                continue;
            }
            let mut ops = vec![std::ptr::null_mut(); k as usize];
            LLVMGetMDNodeOperands(node, ops.as_mut_ptr());
            let mut len = 0;
            let s = LLVMGetMDString(ops[1], &mut len);
            let is_kernel = !s.is_null() && std::slice::from_raw_parts(s as *const u8, len as usize) == b"kernel";
            if is_kernel && !ops[0].is_null() && !LLVMIsAFunction(ops[0]).is_null() {
                let f = Val(ops[0]).name();
                if !out.contains(&f) {
                    out.push(f);
                }
            }
        }
    }
    out
}

/// How a kernel reaches a variable of a GPU address space.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Var {
    /// Static `__shared__`: one per block, from the allocation node.
    Shared,
    /// `extern __shared__`: the launch's dynamic shared memory.
    Dynamic,
    /// `__device__`/`__constant__` with a host shadow: a buffer the launcher binds.
    Symbol,
}

fn cuda_err(at: Option<hpvm_core::loc::SrcLoc>, what: String) -> Error {
    Error::Cuda(format!("{}: error: {what}", hpvm_core::loc::show(&at)))
}

/// Rewrites the device half (retargeted to the host) into graph nodes, one graph per kernel
/// named by `kernels`; `host` is the host half, whose shadow variables device variables bind to.
pub(super) fn convert<'ctx>(dev: &Module<'ctx>, kernels: &[String], host: &Module<'ctx>) -> Result<Vec<Kernel>> {
    let ctx = dev.get_context();
    dev.set_triple(&host.get_triple());
    dev.set_data_layout(&host.get_data_layout());
    for name in ["llvm.used", "llvm.compiler.used", "llvm.global.annotations"] {
        if let Some(g) = dev.get_global(name) {
            unsafe { g.delete() };
        }
    }
    let kind = Attribute::get_named_enum_kind_id;
    for f in dev.get_functions() {
        for a in ["target-cpu", "target-features"] {
            f.remove_string_attribute(AttributeLoc::Function, a);
        }
        if f.count_basic_blocks() > 0 {
            f.set_linkage(Linkage::Internal);
            f.remove_enum_attribute(AttributeLoc::Function, kind("noinline"));
            f.remove_enum_attribute(AttributeLoc::Function, kind("optnone"));
            f.add_attribute(AttributeLoc::Function, ctx.create_enum_attribute(kind("alwaysinline"), 0));
        }
    }
    super::asm::reserve_shared(dev)?;
    unsigned_scoped_min_max(dev);
    let mut out = Vec::new();
    let mut leaves = Vec::new();
    for symbol in kernels {
        let Some(k) = dev.get_function(symbol) else { continue };
        let (kernel, leaf) = leaf_of(dev, host, k, symbol)?;
        leaves.push(leaf);
        out.push(kernel);
    }
    let tm = hpvm_core::toolchain::host_machine().map_err(Error::Llvm)?;
    let run = |passes: &str| {
        dev.run_passes(passes, &tm, inkwell::passes::PassBuilderOptions::create())
            .map_err(|e| Error::Llvm(e.to_string()))
    };
    // The software texture fetch has no callers until the leaves' `tex.*` statements become
    // its calls (`resolve`): it must outlive the inliner's removal of unused functions.
    let fetch = super::asm::texture_fetch(dev);
    if let Some(f) = fetch {
        f.set_linkage(Linkage::External);
    }
    run("always-inline")?;
    let mut asm_counter = 0;
    let mut kept_with_vars = Vec::new();
    for Leaf { function: leaf, vars, handles } in &leaves {
        resolve(dev, *leaf, *handles, &mut asm_counter, &mut kept_with_vars)?;
        for (g, param) in vars {
            unsafe { consts::replace_in_function(leaf.as_value_ref(), g.as_value_ref(), param.as_value_ref()) }
                .map_err(|(inst, why)| {
                    cuda_err(Val(inst).loc(), format!("`{}` {why}", Val(g.as_value_ref()).name()))
                })?;
        }
    }
    // The originals of recursive functions remade to take their variables: no call is left.
    for k in &kept_with_vars {
        // SAFETY: a function of `dev`, bodiless since its remake.
        unsafe {
            if Val(k.from).users().is_empty() {
                LLVMDeleteFunction(k.from);
            } else {
                LLVMSetLinkage(k.from, llvm_sys::LLVMLinkage::LLVMExternalLinkage);
            }
        }
    }
    if let Some(f) = fetch {
        f.set_linkage(Linkage::Internal);
        if !Val(f.as_value_ref()).users().is_empty() {
            run("always-inline")?;
        }
    }
    // Device functions the leaves reach only through pointers (a function handed to a
    // template: `cg::reduce(warp, v, op)`) were not inlined: their libdevice math becomes
    // libm's too.
    let mut called_through_pointers: Vec<FunctionValue<'ctx>> = Vec::new();
    for Leaf { function: leaf, .. } in &leaves {
        for f in reachable(*leaf).into_iter().skip(1) {
            if !leaves.iter().any(|l| l.function == f) && !called_through_pointers.contains(&f) {
                called_through_pointers.push(f);
            }
        }
    }
    for f in called_through_pointers {
        retarget_math(dev, f);
    }
    // Parameters out of their stack slots (clang's unoptimized code keeps each in one), so
    // that what the kernel does with each pointer shows in its uses.
    run("function(sroa)")?;
    // A kernel's copy of a large by-value parameter it only reads is the launcher's buffer.
    for (kernel, Leaf { function: leaf, .. }) in out.iter().zip(&leaves) {
        let params: Vec<Val> = Val(leaf.as_value_ref()).params();
        let mut at = 0;
        for p in &kernel.params {
            if p.blob {
                // SAFETY: the leaf and its parameter, live in `dev`.
                unsafe { forward_blob_copies(params[at]) };
            }
            at += p.width();
        }
    }
    for Leaf { function: leaf, vars, .. } in &leaves {
        let shared: Vec<LLVMValueRef> = vars
            .iter()
            .filter(|(g, _)| unsafe { LLVMGetPointerAddressSpace(LLVMTypeOf(g.as_value_ref())) } == SHARED_SPACE)
            .map(|(_, p)| p.as_value_ref())
            .collect();
        // SAFETY: the leaf and its parameters, live in `dev`.
        unsafe { shared_indices_wrap(leaf.as_value_ref(), &shared) };
    }
    for (kernel, Leaf { function: leaf, vars, .. }) in out.iter_mut().zip(&mut leaves) {
        let front = kernel.params.iter().map(Param::width).sum();
        *leaf = super::hoist::constant_loads(dev, *leaf, vars, front, &mut kernel.params)?;
    }
    for (kernel, Leaf { function: leaf, .. }) in out.iter_mut().zip(&leaves) {
        let params: Vec<Val> = Val(leaf.as_value_ref()).params();
        kernel.read_only = buffer_params(kernel).into_iter().filter(|&i| read_only(params[i])).collect();
        kernel.unused = (0..params.len()).filter(|&i| params[i].users().is_empty()).collect();
        declare_accesses(dev, kernel, *leaf);
    }
    for (kernel, Leaf { function: leaf, vars, .. }) in out.iter().zip(&leaves) {
        mark_constant_banks(&ctx, kernel, *leaf, vars);
    }
    run("globaldce")?;
    move_read_only_data(dev, host)?;
    for (kernel, leaf) in out.iter().zip(&leaves) {
        graph_around(dev, kernel, leaf.function);
    }
    Ok(out)
}

/// Every `__device__`/`__constant__` variable of the device half that has a host shadow: the
/// shadow's name and its size in bytes. The runtime registers them at start-up, so that
/// `cudaMemcpyToSymbol` knows a symbol (and its extent) before any kernel uses it.
pub(super) fn symbols(dev: &Module<'_>, host: &Module<'_>) -> Vec<(String, u64, bool)> {
    let data = inkwell::targets::TargetData::create(&dev.get_data_layout().as_str().to_string_lossy());
    let managed = managed_names(host);
    dev.get_globals()
        .filter(|g| {
            let space = unsafe { LLVMGetPointerAddressSpace(LLVMTypeOf(g.as_value_ref())) };
            matches!(space, 1 | 4) && !g.is_declaration()
        })
        .filter_map(|g| {
            let name = g.get_name().to_string_lossy().into_owned();
            host.get_global(&name)?;
            let bytes = unsafe {
                llvm_sys::target::LLVMABISizeOfType(data.as_mut_ptr(), LLVMGlobalGetValueType(g.as_value_ref()))
            };
            let is_managed = managed.contains(&name);
            Some((name, bytes, is_managed))
        })
        .collect()
}

/// The variables the program declared `__managed__` (the force-included `nvcc_macros.h`
/// annotates them `hpvm.managed`), by the names of their host shadows.
fn managed_names(host: &Module<'_>) -> Vec<String> {
    let Some(table) = host.get_global("llvm.global.annotations") else { return Vec::new() };
    let Some(init) = table.get_initializer() else { return Vec::new() };
    let mut out = Vec::new();
    // SAFETY: reads of the constant array clang makes: {ptr var, ptr text, ptr file, i32, ptr}.
    unsafe {
        let entries = init.as_value_ref();
        for i in 0..LLVMGetNumOperands(entries) {
            let entry = LLVMGetOperand(entries, i as u32);
            if LLVMGetNumOperands(entry) < 2 {
                continue;
            }
            let var = LLVMGetOperand(entry, 0);
            let text = LLVMGetOperand(entry, 1);
            let text = if LLVMIsAGlobalVariable(text).is_null() { text } else { LLVMGetInitializer(text) };
            if text.is_null() || LLVMIsAConstantDataSequential(text).is_null() {
                continue;
            }
            let mut len = 0;
            let bytes = LLVMGetAsString(text, &mut len);
            let s = std::slice::from_raw_parts(bytes as *const u8, len);
            if s.strip_suffix(&[0]).unwrap_or(s) == b"hpvm.managed" && !LLVMIsAGlobalVariable(var).is_null() {
                out.push(Val(var).name());
            }
        }
    }
    out
}

/// A leaf being made from a kernel.
struct Leaf<'ctx> {
    function: FunctionValue<'ctx>,
    /// Which parameter stands for which GPU variable.
    vars: Vec<(GlobalValue<'ctx>, BasicValueEnum<'ctx>)>,
    /// `__hpvm__getNode()` and its parent, made at the top.
    handles: (BasicValueEnum<'ctx>, BasicValueEnum<'ctx>),
}

/// Builds the leaf of kernel `k` (renamed `<symbol>.cuda`, to be inlined into it).
fn leaf_of<'ctx>(
    dev: &Module<'ctx>,
    host: &Module<'ctx>,
    k: FunctionValue<'ctx>,
    symbol: &str,
) -> Result<(Kernel, Leaf<'ctx>)> {
    let ctx = dev.get_context();
    let at = Val(k.as_value_ref()).function_loc();
    let shown = hpvm_core::names::display_name(symbol);
    let i64t = ctx.i64_type();
    let ptr = ctx.ptr_type(AddressSpace::default());
    // Parameters: scalars and pointers as they are; structs and arrays by value in pieces.
    let mut params = Vec::new();
    let mut types: Vec<BasicMetadataTypeEnum> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let byval = Attribute::get_named_enum_kind_id("byval");
    for (i, p) in k.get_param_iter().enumerate() {
        let by_value = k.get_enum_attribute(AttributeLoc::Param(i as u32), byval);
        let ty = match by_value {
            Some(a) => a.get_type_value().as_type_ref(),
            None => unsafe { LLVMTypeOf(p.as_value_ref()) },
        };
        let scalars = scalars_of(ty).filter(|s| by_value.is_none() || s.len() <= BLOB_ABOVE);
        if scalars.is_none() && by_value.is_some() && !unsafe { holds_pointer(ty) } {
            let name = Val(p.as_value_ref()).name();
            let name = if name.is_empty() { format!("arg{i}") } else { name };
            types.push(ptr.into());
            types.push(i64t.into());
            names.push(name.clone());
            names.push(format!("bytes_{name}"));
            params.push(Param { ty, by_value: true, scalars: Vec::new(), from_symbol: None, blob: true });
            continue;
        }
        let Some(scalars) = scalars_of(ty) else {
            return Err(cuda_err(
                at,
                format!(
                    "kernel `{shown}`: parameter {} holds a vector, an empty type or an array of more than 256 elements, which the CUDA frontend does not take yet",
                    i + 1
                ),
            ));
        };
        let name = Val(p.as_value_ref()).name();
        let name = if name.is_empty() { format!("arg{i}") } else { name };
        for (path, t) in &scalars {
            let piece = path.iter().fold(name.clone(), |n, i| format!("{n}.{i}"));
            types.push(unsafe { BasicTypeEnum::new(*t) }.into());
            if unsafe { is_pointer(*t) } {
                types.push(i64t.into());
                names.push(format!("bytes_{piece}"));
                names.insert(names.len() - 1, piece);
            } else {
                names.push(piece);
            }
        }
        params.push(Param { ty, by_value: by_value.is_some(), scalars, from_symbol: None, blob: false });
    }
    // The GPU variables the kernel reaches, in the order it first reaches them.
    const BUILTIN_VARS: [&str; 5] = ["threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize"];
    let mut vars: Vec<(GlobalValue<'ctx>, Var)> = Vec::new();
    for f in reachable(k) {
        for inst in Val(f.as_value_ref()).instructions() {
            for i in 0..inst.num_operands() {
                for g in globals_in(inst.operand(i).0) {
                    let g = unsafe { GlobalValue::new(g) };
                    if vars.iter().any(|(v, _)| *v == g) {
                        continue;
                    }
                    let space = unsafe { LLVMGetPointerAddressSpace(LLVMTypeOf(g.as_value_ref())) };
                    let name = g.get_name().to_string_lossy().into_owned();
                    let var = match space {
                        0 => continue,
                        // clang's empty builtin structs (`threadIdx`...), reached only as the
                        // `this` of their conversions (`dim3(threadIdx)`, as cooperative groups'
                        // `thread_rank` takes it), which read nothing of them.
                        _ if BUILTIN_VARS.contains(&name.as_str()) && g.is_declaration() => continue,
                        3 if g.is_declaration() => Var::Dynamic,
                        3 => Var::Shared,
                        1 | 4 if host.get_global(&name).is_some() => Var::Symbol,
                        1 | 4 if g.is_constant() => continue,
                        // A variable of the device half alone (a `static __device__` table of a
                        // header that host code never names, as cuRAND's
                        // `precalc_xorwow_matrix`): a shadow of its own, which the kernel's
                        // launcher binds and which takes its initial value below.
                        1 | 4 if !g.is_declaration() => {
                            add_shadow(host, g);
                            Var::Symbol
                        }
                        _ => {
                            return Err(cuda_err(
                                inst.loc(),
                                format!("kernel `{shown}` uses `{name}`, a GPU variable the host program cannot reach"),
                            ))
                        }
                    };
                    vars.push((g, var));
                }
            }
        }
    }
    let data = inkwell::targets::TargetData::create(&dev.get_data_layout().as_str().to_string_lossy());
    let bytes = |g: &GlobalValue| unsafe {
        llvm_sys::target::LLVMABISizeOfType(data.as_mut_ptr(), LLVMGlobalGetValueType(g.as_value_ref()))
    };
    let mut kernel = Kernel {
        symbol: symbol.to_string(),
        root: format!("{symbol}.root"),
        params,
        symbols: Vec::new(),
        shared: Vec::new(),
        dynamic_shared: false,
        read_only: Vec::new(),
        unused: Vec::new(),
    };
    for want in [Var::Symbol, Var::Shared, Var::Dynamic] {
        for (g, var) in vars.iter().filter(|(_, v)| *v == want) {
            let name = Val(g.as_value_ref()).name();
            match var {
                Var::Symbol => kernel.symbols.push((name.clone(), bytes(g))),
                Var::Shared => kernel.shared.push(bytes(g)),
                Var::Dynamic if kernel.dynamic_shared => continue,
                Var::Dynamic => kernel.dynamic_shared = true,
            }
            let short = match var {
                Var::Symbol => name,
                Var::Shared => format!("shared{}", kernel.shared.len() - 1),
                Var::Dynamic => "dynamic_shared".into(),
            };
            types.push(ptr.into());
            types.push(i64t.into());
            names.push(short.clone());
            names.push(format!("bytes_{short}"));
        }
    }
    k.as_global_value().set_name(&format!("{symbol}.cuda"));
    let leaf = dev.add_function(symbol, ctx.void_type().fn_type(&types, false), None);
    for (p, n) in leaf.get_param_iter().zip(&names) {
        p.set_name(n);
    }
    // The kernel's debug info moves to the leaf, so that the node is found at the kernel.
    let sp = unsafe { LLVMGetSubprogram(k.as_value_ref()) };
    unsafe {
        LLVMSetSubprogram(leaf.as_value_ref(), sp);
        LLVMSetSubprogram(k.as_value_ref(), std::ptr::null_mut());
    }
    let b = ctx.create_builder();
    b.position_at_end(ctx.append_basic_block(leaf, "entry"));
    let hpvm = Hpvm::declare(dev);
    let values: Vec<BasicValueEnum> = leaf.get_param_iter().collect();
    let buffers: Vec<BasicMetadataValueEnum> = buffer_params(&kernel).iter().map(|&i| values[i].into()).collect();
    hpvm.hint_and_attributes(&b, 2, &buffers, &[]);
    let me = b.build_call(hpvm.get_node, &[], "self").map_err(llvm)?.try_as_basic_value().basic().expect("ptr");
    let parent =
        b.build_call(hpvm.get_parent, &[me.into()], "blocks").map_err(llvm)?.try_as_basic_value().basic().expect("ptr");
    let mut at = 0;
    let mut args: Vec<BasicMetadataValueEnum> = Vec::new();
    for (j, param) in kernel.params.iter().enumerate() {
        if param.blob && read_only(Val(k.get_nth_param(j as u32).expect("a parameter").as_value_ref())) {
            // Read only: the kernel reads the buffer itself (a copy per thread would cost
            // each thread the whole value in local memory).
            args.push(values[at].into());
            at += 2;
            continue;
        }
        if param.blob {
            // Written by the kernel: each thread's own copy, from the bytes in the buffer.
            let ty = unsafe { BasicTypeEnum::new(param.ty) };
            let copy = b.build_alloca(ty, "byval").map_err(llvm)?;
            let size = inkwell::types::BasicType::size_of(&ty).expect("a sized aggregate");
            b.build_memcpy(copy, 1, values[at].into_pointer_value(), 1, size).map_err(llvm)?;
            args.push(copy.into());
            at += 2;
            continue;
        }
        if !param.by_value {
            args.push(values[at].into());
            at += param.width();
            continue;
        }
        // The value put together again, in the leaf's own copy (which `byval` promises).
        let ty = unsafe { BasicTypeEnum::new(param.ty) };
        let copy = b.build_alloca(ty, "byval").map_err(llvm)?;
        for (path, t) in &param.scalars {
            let zero = ctx.i32_type().const_zero();
            let mut indices = vec![zero];
            indices.extend(path.iter().map(|&i| ctx.i32_type().const_int(i as u64, false)));
            let slot = unsafe { b.build_in_bounds_gep(ty, copy, &indices, "") }.map_err(llvm)?;
            b.build_store(slot, values[at]).map_err(llvm)?;
            at += if unsafe { is_pointer(*t) } { 2 } else { 1 };
        }
        args.push(copy.into());
    }
    let call = b.build_call(k, &args, "").map_err(|e| Error::Llvm(e.to_string()))?;
    if !sp.is_null() {
        unsafe {
            let line = LLVMDISubprogramGetLine(sp);
            let loc = LLVMDIBuilderCreateDebugLocation(
                LLVMGetTypeContext(LLVMTypeOf(leaf.as_value_ref())),
                line,
                0,
                sp,
                std::ptr::null_mut(),
            );
            LLVMInstructionSetDebugLoc(call.as_value_ref(), loc);
        }
    }
    hpvm.ret(&b, &[]);
    b.build_return(None).map_err(|e| Error::Llvm(e.to_string()))?;
    // Which parameter stands for which variable (every dynamic one for the one region).
    let mut var_params = Vec::new();
    let mut next = at + 2 * kernel.symbols.len();
    let first_symbol = at;
    let (mut si, mut sh) = (0, 0);
    let dyn_param = kernel.dynamic_shared.then(|| values[at + 2 * (kernel.symbols.len() + kernel.shared.len())]);
    for (g, var) in &vars {
        let p = match var {
            Var::Symbol => {
                si += 1;
                values[first_symbol + 2 * (si - 1)]
            }
            Var::Shared => {
                sh += 1;
                let p = values[next];
                next += 2;
                p
            }
            Var::Dynamic => dyn_param.expect("counted"),
        };
        var_params.push((*g, p));
    }
    debug_assert_eq!(sh, kernel.shared.len());
    Ok((kernel, Leaf { function: leaf, vars: var_params, handles: (me, parent) }))
}

/// Indices, among a leaf's (and its parents' leading) parameters, of the buffers: the kernel's
/// pointers and the device variables.
pub(super) fn buffer_params(k: &Kernel) -> Vec<usize> {
    let mut out = Vec::new();
    let mut at = 0;
    for p in &k.params {
        if p.blob {
            out.push(at);
            at += 2;
            continue;
        }
        for &(_, ty) in &p.scalars {
            if unsafe { is_pointer(ty) } {
                out.push(at);
                at += 2;
            } else {
                at += 1;
            }
        }
    }
    out.extend((0..k.symbols.len()).map(|i| at + 2 * i));
    out
}

/// The number of leading parameters the leaf shares with its parents (kernel parameters with
/// extents, then device variables with sizes).
pub(super) fn front_len(k: &Kernel) -> usize {
    k.params.iter().map(Param::width).sum::<usize>() + 2 * k.symbols.len()
}

pub(super) unsafe fn is_pointer(ty: LLVMTypeRef) -> bool {
    LLVMGetTypeKind(ty) == llvm_sys::LLVMTypeKind::LLVMPointerTypeKind
}

/// libdevice's math calls of `f` retargeted to libm's (as [`resolve`] does in a leaf).
fn retarget_math<'ctx>(dev: &Module<'ctx>, f: FunctionValue<'ctx>) {
    for inst in Val(f.as_value_ref()).instructions() {
        if unsafe { LLVMIsACallInst(inst.0).is_null() } {
            continue;
        }
        let callee = unsafe { LLVMGetCalledValue(inst.0) };
        if unsafe { LLVMIsAFunction(callee).is_null() } {
            continue;
        }
        let name = Val(callee).name();
        if let Some(libm) = hpvm_core::libm::of_libdevice(&name) {
            retarget(dev, inst.0, callee, libm);
        }
    }
}

/// Whether the defined function `f` computes from its values alone: scalar parameters and
/// result, memory touched only in its own stack slots, and calls only to functions of the
/// same kind (itself, when recursive) or to LLVM's debug and lifetime markers.
fn computes_only(f: LLVMValueRef) -> bool {
    let scalar = |t: LLVMTypeRef| unsafe {
        matches!(
            LLVMGetTypeKind(t),
            llvm_sys::LLVMTypeKind::LLVMIntegerTypeKind
                | llvm_sys::LLVMTypeKind::LLVMFloatTypeKind
                | llvm_sys::LLVMTypeKind::LLVMDoubleTypeKind
                | llvm_sys::LLVMTypeKind::LLVMHalfTypeKind
                | llvm_sys::LLVMTypeKind::LLVMVoidTypeKind
        )
    };
    let local = |p: Val| unsafe { !LLVMIsAAllocaInst(p.0).is_null() };
    let mut seen = vec![f];
    let mut at = 0;
    while at < seen.len() {
        let g = Val(seen[at]);
        at += 1;
        if !scalar(g.return_type()) || g.params().iter().any(|p| !scalar(p.ty())) {
            return false;
        }
        for inst in g.instructions() {
            use llvm_sys::LLVMOpcode::*;
            match inst.opcode() {
                Some(LLVMLoad) if local(inst.operand(0)) => {}
                Some(LLVMStore) if local(inst.operand(1)) => {}
                Some(LLVMCall) => {
                    let callee = unsafe { LLVMGetCalledValue(inst.0) };
                    if unsafe { LLVMIsAFunction(callee).is_null() } {
                        return false;
                    }
                    let name = Val(callee).name();
                    if name.starts_with("llvm.dbg.") || name.starts_with("llvm.lifetime.") {
                        continue;
                    }
                    if unsafe { LLVMIsDeclaration(callee) } != 0 {
                        return false;
                    }
                    if !seen.contains(&callee) {
                        seen.push(callee);
                    }
                }
                Some(
                    LLVMLoad | LLVMStore | LLVMAtomicRMW | LLVMAtomicCmpXchg | LLVMFence | LLVMInvoke | LLVMCallBr
                    | LLVMVAArg,
                ) => return false,
                _ => {}
            }
        }
    }
    true
}

/// The defined functions a recursive device function `f` reaches (itself first), where both
/// backends can call them as they are: they ask nothing of the instance that runs them (no
/// thread or block index, barrier, warp function or shared variable) and call only each
/// other, LLVM's target-independent intrinsics, libdevice's math, printf and assert. Else
/// what they do that a call cannot, in the user's terms.
fn keepable(f: LLVMValueRef) -> std::result::Result<(Vec<LLVMValueRef>, Vec<LLVMValueRef>), String> {
    let mut seen = vec![f];
    let mut vars: Vec<LLVMValueRef> = Vec::new();
    let mut at = 0;
    while at < seen.len() {
        let g = Val(seen[at]);
        let shown = hpvm_core::names::display_name(&g.name());
        at += 1;
        for inst in g.instructions() {
            for i in 0..inst.num_operands() {
                for v in globals_in(inst.operand(i).0) {
                    let space = unsafe { LLVMGetPointerAddressSpace(LLVMTypeOf(v)) };
                    let constant = unsafe { LLVMIsAGlobalVariable(v).is_null() || LLVMIsGlobalConstant(v) != 0 };
                    if space == SHARED_SPACE {
                        return Err(format!("`{}` uses the shared variable `{}`", shown, Val(v).name()));
                    }
                    // A `__device__`, `__managed__` or `__constant__` variable: the leaf has it
                    // as a parameter, which the call passes on ([`with_variables`]).
                    if space != 0 && !constant && !vars.contains(&v) {
                        vars.push(v);
                    }
                }
            }
            if unsafe { LLVMIsACallInst(inst.0).is_null() } {
                continue;
            }
            let callee = unsafe { LLVMGetCalledValue(inst.0) };
            if unsafe { !LLVMIsAInlineAsm(callee).is_null() } {
                return Err(format!("`{}` holds inline assembly", shown));
            }
            if unsafe { LLVMIsAFunction(callee).is_null() } {
                return Err(format!("`{}` calls through a pointer", shown));
            }
            let name = Val(callee).name();
            // Device printf, as an earlier call of the same function retargeted it.
            if name == PRINTF {
                continue;
            }
            if unsafe { LLVMIsDeclaration(callee) } == 0 {
                if !seen.contains(&callee) {
                    seen.push(callee);
                }
                continue;
            }
            let plain_llvm = name.starts_with("llvm.") && !name.starts_with("llvm.nvvm.");
            let taken = plain_llvm
                || matches!(name.as_str(), "vprintf" | "__assertfail")
                || RUNTIME_NV.contains(&name.as_str())
                || hpvm_core::libm::of_libdevice(&name).is_some();
            if !taken {
                let what = special_register(&name).map_or_else(
                    || format!("calls `{}`", name.strip_prefix("__nv_").unwrap_or(&name)),
                    |_| "reads its thread's or block's index".to_string(),
                );
                return Err(format!("`{}` {what}", shown));
            }
        }
    }
    Ok((seen, vars))
}

/// A recursive function kept as a call (`from`, now bodiless) remade as `to`, which takes
/// the GPU variables its code names (`vars`) as parameters after its own: a call cannot reach
/// the leaf's parameters that stand for them.
pub(super) struct KeptWithVars {
    from: LLVMValueRef,
    to: LLVMValueRef,
    vars: Vec<LLVMValueRef>,
}

/// Remakes each of `functions` (a recursive function and what it calls, [`keepable`]) to take
/// `vars` as trailing parameters: their bodies move over, name the parameters instead of the
/// variables, and call each other's remade versions, passing them on.
///
/// # Safety
/// `functions` are defined functions and `vars` globals of `dev`.
unsafe fn with_variables(
    dev: &Module<'_>,
    leaf: LLVMValueRef,
    functions: &[LLVMValueRef],
    vars: &[LLVMValueRef],
    out: &mut Vec<KeptWithVars>,
) {
    let m = dev.as_mut_ptr();
    let ctx = LLVMGetModuleContext(m);
    let generic = LLVMPointerTypeInContext(ctx, 0);
    let first = out.len();
    for &f in functions {
        let ty = LLVMGlobalGetValueType(f);
        let mut params = vec![std::ptr::null_mut(); LLVMCountParamTypes(ty) as usize];
        LLVMGetParamTypes(ty, params.as_mut_ptr());
        let own = params.len();
        params.extend(std::iter::repeat_n(generic, vars.len()));
        let new_ty =
            LLVMFunctionType(LLVMGetReturnType(ty), params.as_mut_ptr(), params.len() as u32, LLVMIsFunctionVarArg(ty));
        let name = std::ffi::CString::new(format!("{}.vars", Val(f).name())).expect("a symbol's name");
        let to = LLVMAddFunction(m, name.as_ptr(), new_ty);
        LLVMSetLinkage(to, llvm_sys::LLVMLinkage::LLVMInternalLinkage);
        LLVMSetSubprogram(to, LLVMGetSubprogram(f));
        LLVMSetSubprogram(f, std::ptr::null_mut());
        while !LLVMGetFirstBasicBlock(f).is_null() {
            let bb = LLVMGetFirstBasicBlock(f);
            LLVMRemoveBasicBlockFromParent(bb);
            LLVMAppendExistingBasicBlock(to, bb);
        }
        for i in 0..own {
            LLVMReplaceAllUsesWith(LLVMGetParam(f, i as u32), LLVMGetParam(to, i as u32));
        }
        out.push(KeptWithVars { from: f, to, vars: vars.to_vec() });
    }
    for k in first..out.len() {
        let to = out[k].to;
        let own = LLVMCountParams(to) as usize - vars.len();
        for (j, &g) in vars.iter().enumerate() {
            // Names a variable through a constant expression at most, which is rebuilt.
            let _ = consts::replace_in_function(to, g, LLVMGetParam(to, (own + j) as u32));
        }
        for call in Val(to).instructions().into_iter().filter(|i| !LLVMIsACallInst(i.0).is_null()) {
            let callee = LLVMGetCalledValue(call.0);
            if let Some(other) = out[first..].iter().find(|o| o.from == callee) {
                let passed: Vec<LLVMValueRef> = (0..vars.len()).map(|j| LLVMGetParam(to, (own + j) as u32)).collect();
                let v = call_passing(call.0, other.to, &passed);
                replace_call(call.0, v);
            }
        }
    }
    // Calls from elsewhere (other leaves, another recursive function that calls these) pass
    // the variables themselves; the leaf being resolved meets its own calls in turn.
    for k in &out[first..] {
        for user in Val(k.from).users() {
            if !LLVMIsACallInst(user.0).is_null()
                && LLVMGetCalledValue(user.0) == k.from
                && LLVMGetBasicBlockParent(LLVMGetInstructionParent(user.0)) != leaf
            {
                let v = call_with_variables(user.0, k);
                replace_call(user.0, v);
            }
        }
    }
}

/// A call of `to`'s original, remade as a call of `to` that passes the variables themselves
/// (the leaf's parameters once the leaf's variables are replaced).
///
/// # Safety
/// `call` is a call instruction of `to.from`.
unsafe fn call_with_variables(call: LLVMValueRef, to: &KeptWithVars) -> LLVMValueRef {
    let generic = LLVMPointerTypeInContext(LLVMGetTypeContext(LLVMTypeOf(call)), 0);
    let passed: Vec<LLVMValueRef> = to.vars.iter().map(|&g| LLVMConstAddrSpaceCast(g, generic)).collect();
    call_passing(call, to.to, &passed)
}

/// A call of `f` before `call`, with `call`'s arguments and then `extra`.
///
/// # Safety
/// `call` is a call instruction; `f` takes its arguments and then `extra`.
unsafe fn call_passing(call: LLVMValueRef, f: LLVMValueRef, extra: &[LLVMValueRef]) -> LLVMValueRef {
    let n = LLVMGetNumArgOperands(call);
    let mut args: Vec<LLVMValueRef> = (0..n).map(|i| LLVMGetOperand(call, i)).collect();
    args.extend_from_slice(extra);
    let b = LLVMCreateBuilderInContext(LLVMGetTypeContext(LLVMTypeOf(call)));
    LLVMPositionBuilderBefore(b, call);
    let v = LLVMBuildCall2(b, LLVMGlobalGetValueType(f), f, args.as_mut_ptr(), args.len() as u32, c"".as_ptr());
    LLVMInstructionSetDebugLoc(v, LLVMInstructionGetDebugLoc(call));
    LLVMDisposeBuilder(b);
    v
}

/// Replaces the call instruction `call` by `v` and erases it.
///
/// # Safety
/// Both are instructions of one function; `v` is placed before `call`.
unsafe fn replace_call(call: LLVMValueRef, v: LLVMValueRef) {
    if LLVMGetTypeKind(LLVMTypeOf(call)) != llvm_sys::LLVMTypeKind::LLVMVoidTypeKind {
        LLVMReplaceAllUsesWith(call, v);
    }
    LLVMInstructionEraseFromParent(call);
}

/// `k` and every defined function it calls, directly or not.
fn reachable(k: FunctionValue<'_>) -> Vec<FunctionValue<'_>> {
    let mut seen = vec![k];
    let mut at = 0;
    while at < seen.len() {
        for inst in Val(seen[at].as_value_ref()).instructions() {
            // Called, or named as a value (a device function handed to a template, as
            // `cg::reduce(warp, v, op)` takes `op`, and called through that pointer).
            for i in 0..inst.num_operands() {
                let v = inst.operand(i).0;
                if unsafe { LLVMIsAFunction(v).is_null() || LLVMIsDeclaration(v) != 0 } {
                    continue;
                }
                let f = unsafe { FunctionValue::new(v) }.expect("a function");
                if !seen.contains(&f) {
                    seen.push(f);
                }
            }
        }
        at += 1;
    }
    seen
}

/// The global variables a constant is or is an expression over.
fn globals_in(c: LLVMValueRef) -> Vec<LLVMValueRef> {
    unsafe {
        if !LLVMIsAGlobalVariable(c).is_null() {
            return vec![c];
        }
        if LLVMIsAConstantExpr(c).is_null() {
            return Vec::new();
        }
        (0..LLVMGetNumOperands(c) as u32).flat_map(|i| globals_in(LLVMGetOperand(c, i))).collect()
    }
}

/// What a special register is in the graph: (the leaf's or its parent's, count or id, dimension).
fn special_register(name: &str) -> Option<(bool, bool, usize)> {
    let rest = name.strip_prefix("llvm.nvvm.read.ptx.sreg.")?;
    let (reg, d) = rest.split_once('.')?;
    let dim = ["x", "y", "z"].iter().position(|&x| x == d)?;
    let (parent, count) = match reg {
        "tid" => (false, false),
        "ntid" => (false, true),
        "ctaid" => (true, false),
        "nctaid" => (true, true),
        _ => return None,
    };
    Some((parent, count, dim))
}

/// Replaces what only a GPU has in the inlined leaf by graph queries and host functions.
fn resolve<'ctx>(
    dev: &Module<'ctx>,
    leaf: FunctionValue<'ctx>,
    (me, parent): (BasicValueEnum<'ctx>, BasicValueEnum<'ctx>),
    asm_counter: &mut usize,
    kept_with_vars: &mut Vec<KeptWithVars>,
) -> Result<()> {
    let ctx = dev.get_context();
    let hpvm = Hpvm::declare(dev);
    let b = ctx.create_builder();
    let shown = hpvm_core::names::display_name(&leaf.get_name().to_string_lossy());
    for inst in Val(leaf.as_value_ref()).instructions() {
        if unsafe { LLVMIsACallInst(inst.0).is_null() } {
            continue;
        }
        let callee = unsafe { LLVMGetCalledValue(inst.0) };
        if unsafe { !LLVMIsAInlineAsm(callee).is_null() } {
            // The thread's linear index in its block: x fastest, as warps are formed.
            let lane = |b: &inkwell::builder::Builder<'ctx>| -> Result<inkwell::values::IntValue<'ctx>> {
                let q = |f: FunctionValue<'ctx>| -> Result<inkwell::values::IntValue<'ctx>> {
                    let v = b.build_call(f, &[me.into()], "").map_err(llvm)?;
                    Ok(v.try_as_basic_value().basic().expect("i64").into_int_value())
                };
                let (x, y, z) = (q(hpvm.id[0])?, q(hpvm.id[1])?, q(hpvm.id[2])?);
                let (nx, ny) = (q(hpvm.count[0])?, q(hpvm.count[1])?);
                let zy = b.build_int_add(b.build_int_mul(z, ny, "").map_err(llvm)?, y, "").map_err(llvm)?;
                let linear = b.build_int_add(b.build_int_mul(zy, nx, "").map_err(llvm)?, x, "").map_err(llvm)?;
                b.build_int_truncate(linear, ctx.i32_type(), "tid").map_err(llvm)
            };
            super::asm::lower(dev, &b, inst.0, &lane, asm_counter)?;
            continue;
        }
        if unsafe { LLVMIsAFunction(callee).is_null() } {
            continue;
        }
        let name = Val(callee).name();
        let here = unsafe { inkwell::values::InstructionValue::new(inst.0) };
        b.position_before(&here);
        let replacement: Option<LLVMValueRef> = if let Some((up, count, d)) = special_register(&name) {
            let f = if count { hpvm.count[d] } else { hpvm.id[d] };
            let node = if up { parent } else { me };
            let v = b.build_call(f, &[node.into()], "").map_err(llvm)?.try_as_basic_value().basic().expect("i64");
            let reg = name.trim_start_matches("llvm.nvvm.read.ptx.sreg.");
            Some(b.build_int_truncate(v.into_int_value(), ctx.i32_type(), reg).map_err(llvm)?.as_value_ref())
        } else if name == "llvm.nvvm.read.ptx.sreg.clock64" {
            Some(super::asm::clock(dev, &b)?.as_value_ref())
        } else if name == "llvm.nvvm.read.ptx.sreg.clock" {
            let c = super::asm::clock(dev, &b)?;
            Some(b.build_int_truncate(c, ctx.i32_type(), "clock").map_err(llvm)?.as_value_ref())
        } else if name == "llvm.nvvm.barrier0"
            || (name == "llvm.nvvm.barrier.sync"
                && Val(inst.0).call_args().first().and_then(|&a| through_slots(a)) == Some(0))
        {
            // `bar.sync 0`, as `__syncthreads` is (the other barriers are named, and not taken).
            Some(b.build_call(hpvm.barrier, &[], "").map_err(llvm)?.as_value_ref())
        } else if name.starts_with("llvm.nvvm.membar.") {
            // `__threadfence_block` (`membar.cta`) orders memory for the threads of a block,
            // which run on one CPU thread as fibers: a single-thread fence. It marks
            // warp-synchronous code (`transform::warp::uses_warps`), and gives the GPU its
            // `membar.cta` back; `__threadfence` and `_system` stay system-wide.
            let block = i32::from(name == "llvm.nvvm.membar.cta");
            Some(unsafe {
                LLVMBuildFence(
                    b.as_mut_ptr(),
                    llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingSequentiallyConsistent,
                    block,
                    c"".as_ptr(),
                )
            })
        } else if name.starts_with("llvm.nvvm.ldg.global.") || name.starts_with("llvm.nvvm.ldu.global.") {
            // `__ldg` (and `ldu`): a load through the read-only (uniform) cache, and nothing
            // else: a plain load of its type and alignment. The GPU backend gives pointers it
            // proves read-only `ld.global.nc` itself.
            let args = Val(inst.0).call_args();
            let align = args.get(1).and_then(|a| a.const_u64()).unwrap_or(1).max(1) as u32;
            Some(unsafe {
                let load = llvm_sys::core::LLVMBuildLoad2(b.as_mut_ptr(), LLVMTypeOf(inst.0), args[0].0, c"".as_ptr());
                llvm_sys::core::LLVMSetAlignment(load, align);
                load
            })
        } else if let Some(v) = double_halves(&b, &name, inst)? {
            Some(v)
        } else if let Some(op) = scoped_atomic(&name) {
            // `atomicAdd_system`, `atomicCAS_block`...: the atomic at the scope of the whole
            // device, which contains the block's and, in a run no other agent touches during a
            // kernel (the runtime's contract), serves the system's.
            let args = Val(inst.0).call_args();
            let seq = llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingSequentiallyConsistent;
            Some(unsafe {
                match op {
                    Some(op) => llvm_sys::core::LLVMBuildAtomicRMW(b.as_mut_ptr(), op, args[0].0, args[1].0, seq, 0),
                    None => {
                        let pair = llvm_sys::core::LLVMBuildAtomicCmpXchg(
                            b.as_mut_ptr(),
                            args[0].0,
                            args[1].0,
                            args[2].0,
                            seq,
                            seq,
                            0,
                        );
                        llvm_sys::core::LLVMBuildExtractValue(b.as_mut_ptr(), pair, 0, c"".as_ptr())
                    }
                }
            })
        } else if let Some(libm) = hpvm_core::libm::of_libdevice(&name) {
            retarget(dev, inst.0, callee, libm);
            None
        } else if RUNTIME_NV.contains(&name.as_str()) {
            None
        } else if let Some((call, decl, sync)) = synced_shuffle(dev, &b, &name, inst)? {
            retarget_to_warp(dev, call, decl, warp_function(&sync).expect("a shuffle"));
            Some(call)
        } else if let Some(rest) = warp_function(&name) {
            retarget_to_warp(dev, inst.0, callee, rest);
            None
        } else if name == "vprintf" {
            retarget_printf(dev, inst.0, callee);
            None
        } else if name.starts_with("llvm.nvvm.") || name.starts_with("__nv_") {
            let what = match name.as_str() {
                n if n.starts_with("llvm.nvvm.shfl") || n.contains("vote") || n.contains("match") => {
                    format!("a warp function (`{n}`)")
                }
                n => format!("the device builtin `{}`", n.strip_prefix("__nv_").unwrap_or(n)),
            };
            return Err(cuda_err(
                inst.loc(),
                format!("kernel `{shown}` uses {what}, which the CUDA frontend does not take yet"),
            ));
        } else if unsafe { LLVMIsDeclaration(callee) } == 0 && computes_only(callee) {
            // A recursive function of values alone (cooperative groups' `constexpr log2`,
            // which clang calls at run time without optimization): a call both backends
            // make, marked as touching no memory so the analysis sees through it.
            let none = ctx.create_enum_attribute(Attribute::get_named_enum_kind_id("memory"), 0).as_mut_ptr();
            unsafe {
                LLVMAddAttributeAtIndex(callee, llvm_sys::LLVMAttributeFunctionIndex, none);
                LLVMAddCallSiteAttribute(inst.0, llvm_sys::LLVMAttributeFunctionIndex, none);
            }
            None
        } else if unsafe { LLVMIsDeclaration(callee) } == 0 {
            // A recursive function that touches memory (a divide and conquer over the thread's
            // own arrays, a tree walk): a call both backends make, where it asks nothing of
            // where it runs (no instance, block or shared variable). The analysis cannot see
            // into it, so the kernel runs whole, every buffer it is given possibly read and
            // written.
            let kept = keepable(callee).map_err(|why| {
                cuda_err(
                    inst.loc(),
                    format!(
                        "kernel `{shown}` calls `{}` recursively, and {why}: the CUDA frontend does not take that in a function it cannot inline",
                        hpvm_core::names::display_name(&name)
                    ),
                )
            })?;
            let (functions, vars) = kept;
            for &f in &functions {
                for call in Val(f).instructions().into_iter().filter(|i| unsafe { !LLVMIsACallInst(i.0).is_null() }) {
                    let target = unsafe { LLVMGetCalledValue(call.0) };
                    if unsafe { !LLVMIsAFunction(target).is_null() } && Val(target).name() == "vprintf" {
                        retarget_printf(dev, call.0, target);
                    }
                }
            }
            // Functions remade for an earlier call take their variables already.
            let functions: Vec<LLVMValueRef> =
                functions.into_iter().filter(|f| !kept_with_vars.iter().any(|k| k.to == *f)).collect();
            if vars.is_empty() || !functions.contains(&callee) {
                None
            } else {
                // SAFETY: functions and variables of `dev`; `inst` a call of `callee`.
                unsafe {
                    with_variables(dev, leaf.as_value_ref(), &functions, &vars, kept_with_vars);
                    let to = kept_with_vars.iter().find(|k| k.from == callee).expect("just made");
                    Some(call_with_variables(inst.0, to))
                }
            }
        } else {
            // Another call of a function made to take its variables (above), or none.
            kept_with_vars.iter().find(|k| k.from == callee).map(|to| unsafe { call_with_variables(inst.0, to) })
        };
        if let Some(v) = replacement {
            unsafe {
                if LLVMGetTypeKind(LLVMTypeOf(inst.0)) != llvm_sys::LLVMTypeKind::LLVMVoidTypeKind {
                    LLVMReplaceAllUsesWith(inst.0, v);
                }
                if !LLVMIsAInstruction(v).is_null() {
                    LLVMInstructionSetDebugLoc(v, LLVMInstructionGetDebugLoc(inst.0));
                }
                LLVMInstructionEraseFromParent(inst.0);
            }
        }
    }
    Ok(())
}

/// `__double2hiint`, `__double2loint` and `__hiloint2double`: the halves of a double's bits,
/// and a double from two halves, as plain bit operations both backends take; `None` for any
/// other call.
fn double_halves<'ctx>(b: &inkwell::builder::Builder<'ctx>, name: &str, inst: Val) -> Result<Option<LLVMValueRef>> {
    let ctx = b.get_insert_block().expect("positioned").get_context();
    let (i32t, i64t, f64t) = (ctx.i32_type(), ctx.i64_type(), ctx.f64_type());
    let arg = |i: usize| inst.call_args()[i].0;
    let v = match name {
        "__nv_double2hiint" | "__nv_double2loint" => {
            // SAFETY: the call's first argument is a double.
            let d = unsafe { inkwell::values::FloatValue::new(arg(0)) };
            let bits = b.build_bit_cast(d, i64t, "bits").map_err(llvm)?.into_int_value();
            let half = if name == "__nv_double2hiint" {
                b.build_right_shift(bits, i64t.const_int(32, false), false, "hi").map_err(llvm)?
            } else {
                bits
            };
            b.build_int_truncate(half, i32t, "half").map_err(llvm)?.as_value_ref()
        }
        "__nv_hiloint2double" => {
            // SAFETY: the call's arguments are two 32-bit integers.
            let (hi, lo) = unsafe { (inkwell::values::IntValue::new(arg(0)), inkwell::values::IntValue::new(arg(1))) };
            let hi = b.build_int_z_extend(hi, i64t, "").map_err(llvm)?;
            let hi = b.build_left_shift(hi, i64t.const_int(32, false), "").map_err(llvm)?;
            let lo = b.build_int_z_extend(lo, i64t, "").map_err(llvm)?;
            let bits = b.build_or(hi, lo, "bits").map_err(llvm)?;
            b.build_bit_cast(bits, f64t, "double").map_err(llvm)?.as_value_ref()
        }
        _ => return Ok(None),
    };
    Ok(Some(v))
}

/// The operation of a scoped atomic intrinsic (`llvm.nvvm.atomic.<op>.gen.<i|f>.<cta|sys>.*`,
/// what `atomicAdd_block` and `atomicAdd_system` become): `Some(op)` for a read-modify-write,
/// `None` for compare-and-swap. Minimum and maximum are not taken: their intrinsics do not say
/// whether they compare signed or unsigned.
fn scoped_atomic(name: &str) -> Option<Option<llvm_sys::LLVMAtomicRMWBinOp>> {
    use llvm_sys::LLVMAtomicRMWBinOp as Op;
    let rest = name.strip_prefix("llvm.nvvm.atomic.")?;
    // `atomicInc`/`atomicDec` (device scope already): wrapping increment and decrement.
    if rest.starts_with("load.inc.32.") {
        return Some(Some(Op::LLVMAtomicRMWBinOpUIncWrap));
    }
    if rest.starts_with("load.dec.32.") {
        return Some(Some(Op::LLVMAtomicRMWBinOpUDecWrap));
    }
    let (op, rest) = rest.split_once(".gen.")?;
    let (kind, rest) = rest.split_once('.')?;
    if !(rest.starts_with("cta.") || rest.starts_with("sys.")) {
        return None;
    }
    Some(Some(match (op, kind) {
        ("add", "i") => Op::LLVMAtomicRMWBinOpAdd,
        ("add", "f") => Op::LLVMAtomicRMWBinOpFAdd,
        ("exch", "i") => Op::LLVMAtomicRMWBinOpXchg,
        ("and", "i") => Op::LLVMAtomicRMWBinOpAnd,
        ("or", "i") => Op::LLVMAtomicRMWBinOpOr,
        ("xor", "i") => Op::LLVMAtomicRMWBinOpXor,
        // Signed: the unsigned operations never get here ([`unsigned_scoped_min_max`]).
        ("max", "i") => Op::LLVMAtomicRMWBinOpMax,
        ("min", "i") => Op::LLVMAtomicRMWBinOpMin,
        ("inc", "i") => Op::LLVMAtomicRMWBinOpUIncWrap,
        ("dec", "i") => Op::LLVMAtomicRMWBinOpUDecWrap,
        ("cas", "i") => return Some(None),
        _ => return None,
    }))
}

/// Unsigned `atomicMax_system`, `atomicMin_block`... as unsigned atomics. clang gives the
/// signed and unsigned builtins the same intrinsic (`llvm.nvvm.atomic.max.gen.i.sys`), which
/// NVPTX selects as a signed `atom.max.s32`: only the wrapper that clang's headers call for
/// unsigned operands (`__uAtomicMax_system`, `__ullAtomicMin_block`...) still tells them
/// apart, so its intrinsic becomes an unsigned `atomicrmw`, before the wrappers are inlined.
fn unsigned_scoped_min_max(dev: &Module<'_>) {
    use llvm_sys::LLVMAtomicRMWBinOp::{LLVMAtomicRMWBinOpUMax, LLVMAtomicRMWBinOpUMin};
    let b = dev.get_context().create_builder();
    for f in dev.get_functions() {
        let name = f.get_name().to_string_lossy();
        // `atomicMax_system(unsigned int *, unsigned int)` is `_ZL16atomicMax_systemPjj`: an
        // unsigned int, long or long long (`j`, `m`, `y`) pointer first.
        let unsigned = |op: &str| {
            ["_system", "_block"].iter().any(|scope| {
                let whole = format!("{op}{scope}");
                name.contains(&format!("__u{whole}"))
                    || name.contains(&format!("__ull{whole}"))
                    || name
                        .split_once(&whole)
                        .is_some_and(|(_, rest)| ["Pj", "Pm", "Py"].iter().any(|t| rest.starts_with(t)))
            })
        };
        let op = if unsigned("AtomicMax") || unsigned("atomicMax") {
            LLVMAtomicRMWBinOpUMax
        } else if unsigned("AtomicMin") || unsigned("atomicMin") {
            LLVMAtomicRMWBinOpUMin
        } else {
            continue;
        };
        for inst in Val(f.as_value_ref()).instructions() {
            let Some(callee) = inst.called_function() else { continue };
            let callee = callee.name();
            if !(callee.starts_with("llvm.nvvm.atomic.max.gen.i.") || callee.starts_with("llvm.nvvm.atomic.min.gen.i."))
            {
                continue;
            }
            let args = inst.call_args();
            let seq = llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingSequentiallyConsistent;
            b.position_before(&unsafe { inkwell::values::InstructionValue::new(inst.0) });
            // SAFETY: the intrinsic's pointer and value operands; the call is replaced and erased.
            unsafe {
                let rmw = llvm_sys::core::LLVMBuildAtomicRMW(b.as_mut_ptr(), op, args[0].0, args[1].0, seq, 0);
                LLVMInstructionSetDebugLoc(rmw, LLVMInstructionGetDebugLoc(inst.0));
                LLVMReplaceAllUsesWith(inst.0, rmw);
                LLVMInstructionEraseFromParent(inst.0);
            }
        }
    }
}

/// The constant `v` is, through the stack slots unoptimized code keeps values in (an inlined
/// `__barrier_sync(0)` from cooperative groups passes its 0 through one).
fn through_slots(mut v: Val) -> Option<u64> {
    for _ in 0..8 {
        if let Some(c) = v.const_u64() {
            return Some(c);
        }
        v = v.slot_value()?;
    }
    None
}

fn llvm(e: inkwell::builder::BuilderError) -> Error {
    Error::Llvm(e.to_string())
}

/// Makes the call `inst` of `callee` call `name` (declared with the same type) instead.
fn retarget(dev: &Module<'_>, inst: LLVMValueRef, callee: LLVMValueRef, name: &str) {
    let ty = unsafe { inkwell::types::FunctionType::new(LLVMGlobalGetValueType(callee)) };
    let f = dev.get_function(name).unwrap_or_else(|| dev.add_function(name, ty, None));
    unsafe { LLVMSetOperand(inst, LLVMGetNumOperands(inst) as u32 - 1, f.as_value_ref()) };
}

/// The name under `llvm.nvvm.` of a warp-level operation (`__shfl_down_sync`, `__ballot_sync`,
/// `__activemask`, `__syncwarp`, the lane id...) or a block barrier that also counts
/// (`__syncthreads_and`, `_or`, `_count`: `barrier0.and`...).
fn warp_function(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("llvm.nvvm.")?;
    let warp = ["shfl.sync.", "vote.", "match.", "redux.sync.", "activemask", "bar.warp.sync", "barrier0."]
        .iter()
        .any(|p| rest.starts_with(p))
        || rest == "read.ptx.sreg.laneid"
        || rest == "fns"
        || rest == "read.ptx.sreg.warpsize"
        || rest.starts_with("isspacep.");
    warp.then_some(rest)
}

/// A shuffle of CUDA before 9 (`__shfl_down(v, d)`: `llvm.nvvm.shfl.down.f32`), which PTX
/// no longer has for Volta and later, as the synchronizing shuffle of the whole warp
/// (`__shfl_down_sync(0xffffffff, v, d)`), built before `inst`: that call, the intrinsic it
/// calls and its name; `None` for other calls. Code written for warps that run in lockstep meant all of
/// the warp's lanes that are running, which is what a full mask names.
fn synced_shuffle(
    dev: &Module<'_>,
    b: &inkwell::builder::Builder<'_>,
    name: &str,
    inst: Val,
) -> Result<Option<(LLVMValueRef, LLVMValueRef, String)>> {
    let Some(rest) = name.strip_prefix("llvm.nvvm.shfl.") else { return Ok(None) };
    if rest.starts_with("sync.") {
        return Ok(None);
    }
    let sync = format!("llvm.nvvm.shfl.sync.{rest}");
    let Some(decl) = inkwell::intrinsics::Intrinsic::find(&sync).and_then(|i| i.get_declaration(dev, &[])) else {
        return Ok(None);
    };
    let ctx = dev.get_context();
    let mut args: Vec<inkwell::values::BasicMetadataValueEnum> = vec![ctx.i32_type().const_all_ones().into()];
    for a in inst.call_args() {
        // SAFETY: the call's operands are first-class values.
        args.push(unsafe { BasicValueEnum::new(a.0) }.into());
    }
    b.position_before(&unsafe { inkwell::values::InstructionValue::new(inst.0) });
    let call = b.build_call(decl, &args, "shfl").map_err(llvm)?;
    let call = call.try_as_basic_value().basic().expect("a value").as_value_ref();
    unsafe { LLVMInstructionSetDebugLoc(call, LLVMInstructionGetDebugLoc(inst.0)) };
    Ok(Some((call, decl.as_value_ref(), sync)))
}

/// Makes the call `inst` of a warp operation call `hpvm.warp.<rest>` instead: a function whose
/// body here stops the program (no CPU device runs warps), and which the GPU backend gives
/// the intrinsic's body back (`transform/src/gpu.rs`). Never inlined on the way, so that the
/// GPU backend finds it.
fn retarget_to_warp(dev: &Module<'_>, inst: LLVMValueRef, callee: LLVMValueRef, rest: &str) {
    let name = format!("{WARP_PREFIX}{rest}");
    let f = dev.get_function(&name).unwrap_or_else(|| {
        let ctx = dev.get_context();
        let ty = unsafe { inkwell::types::FunctionType::new(LLVMGlobalGetValueType(callee)) };
        let f = dev.add_function(&name, ty, Some(Linkage::Internal));
        let kind = Attribute::get_named_enum_kind_id("noinline");
        f.add_attribute(AttributeLoc::Function, ctx.create_enum_attribute(kind, 0));
        let stop = dev
            .get_function("hpvm_rt_warp_unsupported")
            .unwrap_or_else(|| dev.add_function("hpvm_rt_warp_unsupported", ctx.void_type().fn_type(&[], false), None));
        let b = ctx.create_builder();
        b.position_at_end(ctx.append_basic_block(f, "entry"));
        b.build_call(stop, &[], "").expect("call");
        match ty.get_return_type() {
            Some(t) => b.build_return(Some(&t.const_zero())).expect("ret"),
            None => b.build_return(None).expect("ret"),
        };
        f
    });
    unsafe { LLVMSetOperand(inst, LLVMGetNumOperands(inst) as u32 - 1, f.as_value_ref()) };
    if rest.starts_with("redux.sync.") {
        // clang 19's `__reduce_*_sync(mask, value)` (`__clang_cuda_intrinsics.h`) passes
        // `(mask, value)` to `__nvvm_redux_sync_*`, whose intrinsic takes `(value, mask)`
        // (PTX's `redux.sync.op d, a, membermask`): the GPU would reduce the masks over the
        // lanes the values name. A program written for nvcc never calls the builtin itself,
        // so the operands are put in the intrinsic's order here.
        // SAFETY: a call of the two-operand intrinsic (its callee is the last operand).
        unsafe {
            let (a, b) = (LLVMGetOperand(inst, 0), LLVMGetOperand(inst, 1));
            LLVMSetOperand(inst, 0, b);
            LLVMSetOperand(inst, 1, a);
        }
    }
}

fn retarget_printf(dev: &Module<'_>, inst: LLVMValueRef, callee: LLVMValueRef) {
    let f = dev.get_function(PRINTF).unwrap_or_else(|| {
        let ctx = dev.get_context();
        let ty = unsafe { inkwell::types::FunctionType::new(LLVMGlobalGetValueType(callee)) };
        let f = dev.add_function(PRINTF, ty, Some(Linkage::Internal));
        let kind = Attribute::get_named_enum_kind_id("noinline");
        f.add_attribute(AttributeLoc::Function, ctx.create_enum_attribute(kind, 0));
        let cpu = dev
            .get_function("hpvm_rt_device_printf")
            .unwrap_or_else(|| dev.add_function("hpvm_rt_device_printf", ty, None));
        let b = ctx.create_builder();
        b.position_at_end(ctx.append_basic_block(f, "entry"));
        let args: Vec<BasicMetadataValueEnum> = f.get_param_iter().map(Into::into).collect();
        let r = b.build_call(cpu, &args, "").expect("call").try_as_basic_value().basic();
        match r {
            Some(v) => b.build_return(Some(&v)).expect("ret"),
            None => b.build_return(None).expect("ret"),
        };
        f
    });
    unsafe { LLVMSetOperand(inst, LLVMGetNumOperands(inst) as u32 - 1, f.as_value_ref()) };
}

/// The suffix of a device variable's initial value that names device functions or variables,
/// waiting for the link to become its host shadow's ([`initialize_shadows`]).
const SHADOW_INIT: &str = ".hpvm.shadow.init";

/// Whether the constant `c` refers to a global value (a function's or a variable's address).
fn names_globals(c: LLVMValueRef, depth: u32) -> bool {
    // SAFETY: queries of a live constant.
    unsafe {
        if !LLVMIsAGlobalValue(c).is_null() {
            return true;
        }
        if depth > 32 || LLVMIsAConstant(c).is_null() {
            return false;
        }
        (0..LLVMGetNumOperands(c).max(0) as u32).any(|i| names_globals(LLVMGetOperand(c, i), depth + 1))
    }
}

/// A host shadow for the device variable `g`, which the host half lacks: the same name, type
/// and initial value, private to the program. A value that names device functions or
/// variables is given after the link ([`move_read_only_data`], [`initialize_shadows`]), so
/// `g` must outlive the dead-code pass that would drop it, unused, before then.
fn add_shadow<'ctx>(host: &Module<'ctx>, g: GlobalValue<'ctx>) {
    let name = g.get_name().to_string_lossy().into_owned();
    // SAFETY: `g` is a global variable; its value type belongs to the shared context.
    let ty = unsafe { BasicTypeEnum::new(LLVMGlobalGetValueType(g.as_value_ref())) };
    let shadow = host.add_global(ty, None, &name);
    shadow.set_linkage(Linkage::Internal);
    shadow.set_alignment(g.get_alignment().max(16));
    match g.get_initializer() {
        Some(init) if !names_globals(init.as_value_ref(), 0) && unsafe { LLVMIsUndef(init.as_value_ref()) } == 0 => {
            shadow.set_initializer(&init)
        }
        Some(_) => {
            shadow.set_initializer(&ty.const_zero());
            g.set_linkage(Linkage::External);
        }
        None => shadow.set_initializer(&ty.const_zero()),
    }
}

/// After the device half is linked into the host's: each shadow whose device variable's value
/// names device functions or variables gets that value, now the host module's.
pub(super) fn initialize_shadows(host: &Module<'_>) {
    let pending: Vec<GlobalValue> =
        host.get_globals().filter(|g| g.get_name().to_string_lossy().ends_with(SHADOW_INIT)).collect();
    for g in pending {
        let full = g.get_name().to_string_lossy().into_owned();
        let name = &full[..full.len() - SHADOW_INIT.len()];
        if let (Some(shadow), Some(init)) = (host.get_global(name), g.get_initializer()) {
            // SAFETY: a constant and a type of the module's context.
            if let Some(v) = unsafe { retype(init.as_value_ref(), LLVMGlobalGetValueType(shadow.as_value_ref())) } {
                shadow.set_initializer(&unsafe { BasicValueEnum::new(v) });
            }
        }
        // SAFETY: nothing uses it (it was kept only for its value).
        unsafe { g.delete() };
    }
}

/// The GPU's address space of `__shared__` memory.
const SHARED_SPACE: u32 = 3;

/// Unsigned 32-bit indices into shared memory wrap as the GPU's shared addresses do.
///
/// A GPU addresses shared memory with 32 bits, so an unsigned index past 2^31 wraps around to
/// an element before the pointer: HeCBench's merge reads `BS[~Ax]` for `BS[-Ax - 1]`, which
/// nvcc's 32-bit shared addressing makes right. Widened to 64 bits as C++ widens an unsigned
/// index (`zext`), it would land gigabytes past the block's memory on a simulated device, and
/// on a GPU through a 64-bit generic pointer. Every such index of an address derived from
/// `shared` (the leaf's shared-memory parameters) is widened with its sign instead: the same
/// address modulo 2^32 for every index, so identical wherever the access is valid.
///
/// # Safety
/// `f` is a function of a live module and `shared` values of it.
unsafe fn shared_indices_wrap(f: LLVMValueRef, shared: &[LLVMValueRef]) {
    if shared.is_empty() {
        return;
    }
    let b = LLVMCreateBuilderInContext(LLVMGetTypeContext(LLVMTypeOf(f)));
    let mut bb = LLVMGetFirstBasicBlock(f);
    while !bb.is_null() {
        let mut inst = LLVMGetFirstInstruction(bb);
        while !inst.is_null() {
            if !LLVMIsAGetElementPtrInst(inst).is_null() && Val(LLVMGetOperand(inst, 0)).derives_from(shared) {
                for k in 1..LLVMGetNumOperands(inst).max(0) as u32 {
                    let index = LLVMGetOperand(inst, k);
                    let unsigned32 = !LLVMIsAZExtInst(index).is_null()
                        && LLVMGetIntTypeWidth(LLVMTypeOf(LLVMGetOperand(index, 0))) == 32;
                    if unsigned32 {
                        LLVMPositionBuilderBefore(b, inst);
                        let signed = LLVMBuildSExt(b, LLVMGetOperand(index, 0), LLVMTypeOf(index), c"wrapped".as_ptr());
                        LLVMSetOperand(inst, k, signed);
                    }
                }
            }
            inst = LLVMGetNextInstruction(inst);
        }
        bb = LLVMGetNextBasicBlock(bb);
    }
    LLVMDisposeBuilder(b);
}

/// The constant `c` as a value of type `to` where the two types differ only in their structs'
/// names (the same fields, recursively); `None` where they differ otherwise. Every value of
/// `c` is kept: a shadow initialized to less would read zero where the GPU read the value.
///
/// # Safety
/// `c` is a constant and `to` a type of the same context.
unsafe fn retype(c: LLVMValueRef, to: LLVMTypeRef) -> Option<LLVMValueRef> {
    use llvm_sys::LLVMTypeKind as K;
    let from = LLVMTypeOf(c);
    if from == to {
        return Some(c);
    }
    if LLVMIsNull(c) != 0 {
        return Some(LLVMConstNull(to));
    }
    if LLVMIsUndef(c) != 0 {
        return Some(LLVMGetUndef(to));
    }
    match (LLVMGetTypeKind(from), LLVMGetTypeKind(to)) {
        (K::LLVMStructTypeKind, K::LLVMStructTypeKind) => {
            let n = LLVMCountStructElementTypes(to);
            if LLVMCountStructElementTypes(from) != n || LLVMIsPackedStruct(from) != LLVMIsPackedStruct(to) {
                return None;
            }
            let mut fields = (0..n)
                .map(|i| retype(LLVMGetAggregateElement(c, i), LLVMStructGetTypeAtIndex(to, i)))
                .collect::<Option<Vec<_>>>()?;
            Some(match LLVMGetStructName(to).is_null() {
                true => {
                    LLVMConstStructInContext(LLVMGetTypeContext(to), fields.as_mut_ptr(), n, LLVMIsPackedStruct(to))
                }
                false => LLVMConstNamedStruct(to, fields.as_mut_ptr(), n),
            })
        }
        (K::LLVMArrayTypeKind, K::LLVMArrayTypeKind) => {
            let n = LLVMGetArrayLength2(to);
            if LLVMGetArrayLength2(from) != n {
                return None;
            }
            let element = LLVMGetElementType(to);
            let mut items =
                (0..n).map(|i| retype(LLVMGetAggregateElement(c, i as u32), element)).collect::<Option<Vec<_>>>()?;
            Some(LLVMConstArray2(element, items.as_mut_ptr(), n))
        }
        _ => None,
    }
}

/// Read-only data in GPU address spaces that no host shadow stands for (tables of constants):
/// moved to ordinary memory, where both backends read it as any constant. Device variables
/// with a shadow give the shadow their initial value and go.
fn move_read_only_data<'ctx>(dev: &Module<'ctx>, host: &Module<'ctx>) -> Result<()> {
    let globals: Vec<GlobalValue> = dev.get_globals().collect();
    for g in globals {
        let space = unsafe { LLVMGetPointerAddressSpace(LLVMTypeOf(g.as_value_ref())) };
        if space == 0 {
            continue;
        }
        let name = g.get_name().to_string_lossy().into_owned();
        let uses: Vec<LLVMValueRef> = Val(g.as_value_ref()).users().into_iter().map(|v| v.0).collect();
        if let (Some(shadow), Some(init)) = (host.get_global(&name), g.get_initializer()) {
            // The two halves name their struct types apart (`%struct.float3` and
            // `%struct.float3.0` in one context): the value is rebuilt in the shadow's type.
            let retyped = unsafe { retype(init.as_value_ref(), LLVMGlobalGetValueType(shadow.as_value_ref())) }
                .map(|v| unsafe { BasicValueEnum::new(v) });
            if retyped.is_none() && !uses.is_empty() {
                // Never a shadow left at zero where the GPU would read the value.
                return Err(cuda_err(
                    None,
                    format!("`{name}`: its initial value does not fit the host's copy of the variable"),
                ));
            }
            if let Some(init) = retyped.filter(|i| unsafe { LLVMIsUndef(i.as_value_ref()) } == 0) {
                if names_globals(init.as_value_ref(), 0) {
                    // The value names device functions or variables (a table of function
                    // pointers), which are this module's until it is linked into the host's:
                    // kept under another name, it becomes the shadow's value after the link
                    // ([`initialize_shadows`]).
                    // Visible: the link drops what nothing uses unless others may.
                    if uses.is_empty() {
                        g.set_name(&format!("{name}{SHADOW_INIT}"));
                        g.set_linkage(Linkage::External);
                        continue;
                    }
                } else {
                    shadow.set_initializer(&init);
                }
            }
        }
        if uses.is_empty() {
            unsafe { g.delete() };
            continue;
        }
        if !g.is_constant() || g.is_declaration() {
            return Err(cuda_err(None, format!("`{name}`: a GPU variable used outside any kernel")));
        }
        let value_type = unsafe { BasicTypeEnum::new(LLVMGlobalGetValueType(g.as_value_ref())) };
        let moved = dev.add_global(value_type, None, &format!("{name}.host"));
        moved.set_initializer(&g.get_initializer().expect("defined"));
        moved.set_constant(true);
        moved.set_linkage(Linkage::Internal);
        moved.set_alignment(g.get_alignment());
        for u in uses {
            let generic = unsafe {
                !LLVMIsAConstantExpr(u).is_null()
                    && LLVMGetConstOpcode(u) == llvm_sys::LLVMOpcode::LLVMAddrSpaceCast
                    && LLVMGetPointerAddressSpace(LLVMTypeOf(u)) == 0
            };
            if !generic {
                return Err(cuda_err(None, format!("`{name}` is used in its own address space")));
            }
            unsafe { LLVMReplaceAllUsesWith(u, moved.as_value_ref()) };
        }
        unsafe { g.delete() };
    }
    Ok(())
}

/// Whether the kernel never writes through pointer `p` (a leaf parameter, after inlining):
/// every use of it, followed through address arithmetic, is a load or a copy's source.
/// Anything else counts as a write (a store or an atomic through it, the pointer itself
/// stored or turned into an integer, a call that takes it): the claim must be a proof, since
/// the runtime neither copies a read-only buffer back nor keeps it coherent with writes, and
/// reads it through the non-coherent cache. `const` and `__restrict__` are not trusted.
/// Where the leaf copies the buffer of a large by-value parameter (`blob`, which nothing
/// writes during a launch) whole into a local it then only reads (clang's copy of a kernel's
/// by-value parameter), the local's uses read the buffer instead and the copy goes: a copy per
/// thread would cost each thread the whole value, and the analysis cannot see into it.
unsafe fn forward_blob_copies(blob: Val) {
    use llvm_sys::LLVMOpcode as Op;
    let from_blob = |v: Val| {
        v == blob
            || (v.opcode() == Some(Op::LLVMGetElementPtr)
                && v.operand(0) == blob
                && (1..v.num_operands()).all(|i| v.operand(i).const_i64() == Some(0)))
    };
    let mut sources = vec![blob];
    sources.extend(blob.users().into_iter().filter(|&u| from_blob(u) && u != blob));
    for src in sources {
        for copy in src.users() {
            let name = copy.called_function().map(|f| f.name()).unwrap_or_default();
            if !name.starts_with("llvm.memcpy") || copy.call_args().get(1) != Some(&src) {
                continue;
            }
            let local = copy.call_args()[0];
            if !local.is_alloca() || !only_read_after(local, copy) {
                continue;
            }
            // Lifetime markers belong to the local alone.
            for u in local.users() {
                if u.called_function().is_some_and(|f| f.name().starts_with("llvm.lifetime")) {
                    LLVMInstructionEraseFromParent(u.0);
                }
            }
            LLVMInstructionEraseFromParent(copy.0);
            LLVMReplaceAllUsesWith(local.0, blob.0);
        }
    }
}

/// Whether the local `slot` is written only by `copy` (every other use reads it, through
/// address arithmetic or lifetime markers).
fn only_read_after(slot: Val, copy: Val) -> bool {
    use llvm_sys::LLVMOpcode as Op;
    let mut todo = vec![slot];
    while let Some(v) = todo.pop() {
        for u in v.users() {
            if u == copy {
                continue;
            }
            match u.opcode() {
                Some(Op::LLVMLoad) => {}
                Some(Op::LLVMGetElementPtr) if u.operand(0) == v => todo.push(u),
                Some(Op::LLVMCall) if u.called_function().is_some_and(|f| f.name().starts_with("llvm.lifetime")) => {}
                _ => return false,
            }
        }
    }
    true
}

/// Marks the leaf's parameters that stand for `__constant__` variables the kernel only reads
/// ([`hpvm_core::markers::CONSTANT_PARAM`]), so that the GPU backend may read them through
/// the constant bank, as nvcc's code does: a warp's loads of one element are then one
/// broadcast, and the compiler takes them as operands.
fn mark_constant_banks<'ctx>(
    ctx: &inkwell::context::ContextRef<'ctx>,
    kernel: &Kernel,
    leaf: FunctionValue<'ctx>,
    vars: &[(GlobalValue<'ctx>, BasicValueEnum<'ctx>)],
) {
    for (g, p) in vars {
        // SAFETY: a live global of the device half.
        let space = unsafe { LLVMGetPointerAddressSpace(LLVMTypeOf(g.as_value_ref())) };
        if space != super::hoist::CONSTANT_SPACE {
            continue;
        }
        let name = Val(g.as_value_ref()).name();
        let Some(&(_, bytes)) = kernel.symbols.iter().find(|(n, _)| *n == name) else { continue };
        let Some(i) = leaf.get_param_iter().position(|q| q.as_value_ref() == p.as_value_ref()) else { continue };
        if kernel.read_only.contains(&i) {
            let value = format!("{bytes} {name}");
            let attr = ctx.create_string_attribute(hpvm_core::markers::CONSTANT_PARAM, &value);
            leaf.add_attribute(AttributeLoc::Param(i as u32), attr);
        }
    }
}

fn read_only(p: Val) -> bool {
    use llvm_sys::LLVMOpcode as Op;
    let mut seen = vec![p];
    let mut todo = vec![p];
    while let Some(v) = todo.pop() {
        for u in v.users() {
            let derived = match u.opcode() {
                Some(Op::LLVMLoad) => false,
                Some(Op::LLVMStore) => return false,
                Some(
                    Op::LLVMGetElementPtr | Op::LLVMBitCast | Op::LLVMAddrSpaceCast | Op::LLVMPHI | Op::LLVMSelect,
                ) => true,
                Some(Op::LLVMICmp) => false,
                Some(Op::LLVMCall) => {
                    let callee = u.called_function().map(|f| f.name()).unwrap_or_default();
                    let args = u.call_args();
                    let fine = match callee.as_str() {
                        "__hpvm__attributes" => true,
                        c if c.starts_with("llvm.memcpy") || c.starts_with("llvm.memmove") => args.first() != Some(&v),
                        c if c.starts_with("llvm.lifetime")
                            || c.starts_with("llvm.dbg")
                            || c.starts_with("llvm.prefetch") =>
                        {
                            true
                        }
                        _ => false,
                    };
                    if !fine {
                        return false;
                    }
                    false
                }
                _ => return false,
            };
            if derived && !seen.contains(&u) {
                seen.push(u);
                todo.push(u);
            }
        }
    }
    true
}

/// Replaces the leaf's `__hpvm__attributes` (made when every buffer was taken as written)
/// with one that declares [`Kernel::read_only`]'s buffers inputs only.
fn declare_accesses<'ctx>(dev: &Module<'ctx>, k: &Kernel, leaf: FunctionValue<'ctx>) {
    if k.read_only.is_empty() {
        return;
    }
    let hpvm = Hpvm::declare(dev);
    let Some(old) = leaf.get_first_basic_block().and_then(|bb| {
        bb.get_instructions()
            .find(|i| Val(i.as_value_ref()).called_function().is_some_and(|f| f.name() == "__hpvm__attributes"))
    }) else {
        return;
    };
    let params: Vec<BasicValueEnum> = leaf.get_param_iter().collect();
    let buffers = buffer_params(k);
    let values: Vec<BasicMetadataValueEnum> = buffers.iter().map(|&i| params[i].into()).collect();
    let read_only: Vec<usize> =
        buffers.iter().enumerate().filter(|(_, p)| k.read_only.contains(p)).map(|(i, _)| i).collect();
    let b = dev.get_context().create_builder();
    b.position_before(&old);
    hpvm.attributes(&b, &values, &read_only);
    old.erase_from_basic_block();
}

/// The allocation node (if the kernel has shared memory), the node of blocks and the root.
fn graph_around<'ctx>(dev: &Module<'ctx>, k: &Kernel, leaf: FunctionValue<'ctx>) {
    let ctx = dev.get_context();
    let hpvm = Hpvm::declare(dev);
    let i64t = ctx.i64_type();
    let i32t = ctx.i32_type();
    let b = ctx.create_builder();
    let leaf_types: Vec<BasicMetadataTypeEnum> = leaf.get_type().get_param_types();
    let front = front_len(k);
    let n_shared = k.shared.len() + k.dynamic_shared as usize;
    let buffers = buffer_params(k);
    let read_only: Vec<usize> =
        buffers.iter().enumerate().filter(|(_, p)| k.read_only.contains(p)).map(|(i, _)| i).collect();
    let c = |v: u64| i32t.const_int(v, false);
    // K.alloc(sizes…): one allocation per size, returned as (pointer, size) pairs.
    let alloc = (n_shared > 0).then(|| {
        let f = dev.add_function(
            &format!("{}.alloc", k.symbol),
            ctx.void_type().fn_type(&vec![i64t.into(); n_shared], false),
            None,
        );
        for (i, p) in f.get_param_iter().enumerate() {
            p.set_name(&format!("bytes_{}", shared_name(k, i)));
        }
        b.position_at_end(ctx.append_basic_block(f, "entry"));
        hpvm.hint_and_attributes(&b, 2, &[], &[]);
        let mut outs: Vec<BasicMetadataValueEnum> = Vec::new();
        for p in f.get_param_iter() {
            let m = b.build_call(hpvm.malloc, &[p.into()], "shared").expect("call");
            outs.push(m.try_as_basic_value().basic().expect("ptr").into());
            outs.push(p.into());
        }
        hpvm.ret(&b, &outs);
        b.build_return(None).expect("ret");
        f
    });
    // K.blocks(front…, bx, by, bz, sizes…)
    let mut block_types: Vec<BasicMetadataTypeEnum> = leaf_types[..front].to_vec();
    block_types.extend(std::iter::repeat_n(BasicMetadataTypeEnum::from(i64t), 3 + n_shared));
    let blocks = dev.add_function(&format!("{}.blocks", k.symbol), ctx.void_type().fn_type(&block_types, false), None);
    let mut names: Vec<String> = leaf.get_param_iter().take(front).map(|p| Val(p.as_value_ref()).name()).collect();
    names.extend(["bx", "by", "bz"].map(String::from));
    names.extend((0..n_shared).map(|i| format!("bytes_{}", shared_name(k, i))));
    for (p, n) in blocks.get_param_iter().zip(&names) {
        p.set_name(n);
    }
    b.position_at_end(ctx.append_basic_block(blocks, "entry"));
    let ps: Vec<BasicValueEnum> = blocks.get_param_iter().collect();
    let bufs: Vec<BasicMetadataValueEnum> = buffers.iter().map(|&i| ps[i].into()).collect();
    hpvm.hint_and_attributes(&b, 2, &bufs, &read_only);
    let node = hpvm.create_node(&b, leaf, &ps[front..front + 3], "threads");
    for i in 0..front {
        hpvm.bind_in(&b, node, i, i);
    }
    if let Some(alloc) = alloc {
        let a = hpvm.create_node(&b, alloc, &[], "alloc");
        for j in 0..n_shared {
            hpvm.bind_in(&b, a, front + 3 + j, j);
            for half in 0..2 {
                let args = [
                    a.into(),
                    node.into(),
                    c(0).into(),
                    c(2 * j as u64 + half).into(),
                    c((front + 2 * j) as u64 + half).into(),
                    c(0).into(),
                ];
                b.build_call(hpvm.edge, &args, "").expect("call");
            }
        }
    }
    b.build_return(None).expect("ret");
    // K.root(front…, bx, by, bz, sizes…, gx, gy, gz)
    let mut root_types = block_types.clone();
    root_types.extend([BasicMetadataTypeEnum::from(i64t); 3]);
    let root = dev.add_function(&k.root, ctx.void_type().fn_type(&root_types, false), None);
    names.extend(["gx", "gy", "gz"].map(String::from));
    for (p, n) in root.get_param_iter().zip(&names) {
        p.set_name(n);
    }
    b.position_at_end(ctx.append_basic_block(root, "entry"));
    let ps: Vec<BasicValueEnum> = root.get_param_iter().collect();
    let bufs: Vec<BasicMetadataValueEnum> = buffers.iter().map(|&i| ps[i].into()).collect();
    hpvm.hint_and_attributes(&b, 1, &bufs, &read_only);
    let g = block_types.len();
    let node = hpvm.create_node(&b, blocks, &ps[g..g + 3], "blocks");
    for i in 0..g {
        hpvm.bind_in(&b, node, i, i);
    }
    b.build_return(None).expect("ret");
}

/// The name of the `i`th shared allocation of `k` (static ones, then the dynamic one).
fn shared_name(k: &Kernel, i: usize) -> String {
    if i < k.shared.len() {
        format!("shared{i}")
    } else {
        "dynamic_shared".into()
    }
}

/// The HPVM-C functions the rewritten device half calls, declared as `hpvm.h` declares them.
pub(super) struct Hpvm<'ctx> {
    hint: FunctionValue<'ctx>,
    attributes: FunctionValue<'ctx>,
    ret: FunctionValue<'ctx>,
    create: FunctionValue<'ctx>,
    bind_in: FunctionValue<'ctx>,
    edge: FunctionValue<'ctx>,
    malloc: FunctionValue<'ctx>,
    get_node: FunctionValue<'ctx>,
    get_parent: FunctionValue<'ctx>,
    barrier: FunctionValue<'ctx>,
    pub(super) id: [FunctionValue<'ctx>; 3],
    pub(super) count: [FunctionValue<'ctx>; 3],
    pub launch: FunctionValue<'ctx>,
    pub wait: FunctionValue<'ctx>,
}

impl<'ctx> Hpvm<'ctx> {
    pub(super) fn declare(m: &Module<'ctx>) -> Hpvm<'ctx> {
        let ctx = m.get_context();
        let (void, i32t, i64t) = (ctx.void_type(), ctx.i32_type(), ctx.i64_type());
        let ptr = ctx.ptr_type(AddressSpace::default());
        let f = |name: &str, ty: inkwell::types::FunctionType<'ctx>| {
            m.get_function(name).unwrap_or_else(|| m.add_function(name, ty, None))
        };
        let query = |d: &str, what: &str| f(&format!("__hpvm__{what}_{d}"), i64t.fn_type(&[ptr.into()], false));
        Hpvm {
            hint: f("__hpvm__hint", void.fn_type(&[i32t.into()], false)),
            attributes: f("__hpvm__attributes", void.fn_type(&[i32t.into()], true)),
            ret: f("__hpvm__return", void.fn_type(&[i32t.into()], true)),
            create: f("__hpvm__createNodeND", ptr.fn_type(&[i32t.into()], true)),
            bind_in: f("__hpvm__bindIn", void.fn_type(&[ptr.into(), i32t.into(), i32t.into(), i32t.into()], false)),
            edge: f(
                "__hpvm__edge",
                ptr.fn_type(&[ptr.into(), ptr.into(), i32t.into(), i32t.into(), i32t.into(), i32t.into()], false),
            ),
            malloc: f("__hpvm__malloc", ptr.fn_type(&[i64t.into()], false)),
            get_node: f("__hpvm__getNode", ptr.fn_type(&[], false)),
            get_parent: f("__hpvm__getParentNode", ptr.fn_type(&[ptr.into()], false)),
            barrier: f("__hpvm__barrier", void.fn_type(&[], false)),
            id: ["x", "y", "z"].map(|d| query(d, "getNodeInstanceID")),
            count: ["x", "y", "z"].map(|d| query(d, "getNumNodeInstances")),
            launch: f("__hpvm__launch", ptr.fn_type(&[i32t.into()], true)),
            wait: f("__hpvm__wait", void.fn_type(&[ptr.into()], false)),
        }
    }

    /// `__hpvm__hint(target)` and `__hpvm__attributes` naming `buffers` as inputs and, but for
    /// the ones at `read_only` (indices into `buffers`), as outputs.
    fn hint_and_attributes(
        &self,
        b: &inkwell::builder::Builder<'ctx>,
        target: u64,
        buffers: &[BasicMetadataValueEnum<'ctx>],
        read_only: &[usize],
    ) {
        let i32t = self.hint.get_type().get_context().i32_type();
        b.build_call(self.hint, &[i32t.const_int(target, false).into()], "").expect("call");
        self.attributes(b, buffers, read_only);
    }

    /// `__hpvm__attributes(n_in, ins..., n_out, outs...)`: every buffer an input, the ones not
    /// at `read_only` outputs too.
    fn attributes(
        &self,
        b: &inkwell::builder::Builder<'ctx>,
        buffers: &[BasicMetadataValueEnum<'ctx>],
        read_only: &[usize],
    ) {
        let i32t = self.hint.get_type().get_context().i32_type();
        let outs: Vec<BasicMetadataValueEnum> =
            buffers.iter().enumerate().filter(|(i, _)| !read_only.contains(i)).map(|(_, v)| *v).collect();
        let args: Vec<BasicMetadataValueEnum> = std::iter::once(i32t.const_int(buffers.len() as u64, false).into())
            .chain(buffers.iter().copied())
            .chain(std::iter::once(i32t.const_int(outs.len() as u64, false).into()))
            .chain(outs)
            .collect();
        b.build_call(self.attributes, &args, "").expect("call");
    }

    fn ret(&self, b: &inkwell::builder::Builder<'ctx>, values: &[BasicMetadataValueEnum<'ctx>]) {
        let i32t = self.hint.get_type().get_context().i32_type();
        let args: Vec<BasicMetadataValueEnum> =
            std::iter::once(i32t.const_int(values.len() as u64, false).into()).chain(values.iter().copied()).collect();
        b.build_call(self.ret, &args, "").expect("call");
    }

    /// `__hpvm__createNodeND(counts.len(), f, counts...)`: the child's handle.
    fn create_node(
        &self,
        b: &inkwell::builder::Builder<'ctx>,
        f: FunctionValue<'ctx>,
        counts: &[BasicValueEnum<'ctx>],
        name: &str,
    ) -> BasicValueEnum<'ctx> {
        let i32t = self.hint.get_type().get_context().i32_type();
        let mut args: Vec<BasicMetadataValueEnum> =
            vec![i32t.const_int(counts.len() as u64, false).into(), f.as_global_value().as_pointer_value().into()];
        args.extend(counts.iter().map(|&v| BasicMetadataValueEnum::from(v)));
        b.build_call(self.create, &args, name).expect("call").try_as_basic_value().basic().expect("a handle")
    }

    fn bind_in(&self, b: &inkwell::builder::Builder<'ctx>, node: BasicValueEnum<'ctx>, from: usize, to: usize) {
        let i32t = self.hint.get_type().get_context().i32_type();
        let c = |v: usize| i32t.const_int(v as u64, false).into();
        b.build_call(self.bind_in, &[node.into(), c(from), c(to), c(0)], "").expect("call");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value of one half's struct type becomes the same value in the other half's
    /// (`%struct.float3` and `%struct.float3.0`), nested structs and arrays included; types
    /// that differ otherwise give none.
    #[test]
    fn initial_values_are_rebuilt_in_the_shadows_struct_types() {
        let ctx = Context::create();
        let f32t = ctx.f32_type();
        let (host, dev) = (ctx.opaque_struct_type("struct.float3"), ctx.opaque_struct_type("struct.float3.0"));
        host.set_body(&[f32t.into(), f32t.into(), f32t.into()], false);
        dev.set_body(&[f32t.into(), f32t.into(), f32t.into()], false);
        let value = dev.const_named_struct(&[
            f32t.const_float(1.0).into(),
            f32t.const_float(2.0).into(),
            f32t.const_float(3.0).into(),
        ]);
        let array = dev.const_array(&[value, dev.const_zero()]);
        // SAFETY: constants and types of one live context.
        unsafe {
            let v = retype(value.as_value_ref(), host.as_type_ref()).expect("same fields");
            assert_eq!(LLVMTypeOf(v), host.as_type_ref());
            let field = LLVMGetAggregateElement(v, 2);
            assert_eq!(LLVMConstRealGetDouble(field, &mut 0), 3.0);
            let a = retype(array.as_value_ref(), host.array_type(2).as_type_ref()).expect("same elements");
            assert_eq!(LLVMTypeOf(a), host.array_type(2).as_type_ref());
            assert_eq!(LLVMIsNull(LLVMGetAggregateElement(a, 1)), 1);
            let pair = ctx.struct_type(&[f32t.into(), f32t.into()], false);
            assert!(retype(value.as_value_ref(), pair.as_type_ref()).is_none());
            assert!(retype(array.as_value_ref(), host.array_type(3).as_type_ref()).is_none());
        }
    }

    #[test]
    fn special_registers_are_ids_and_counts_of_two_levels() {
        assert_eq!(special_register("llvm.nvvm.read.ptx.sreg.tid.x"), Some((false, false, 0)));
        assert_eq!(special_register("llvm.nvvm.read.ptx.sreg.ntid.y"), Some((false, true, 1)));
        assert_eq!(special_register("llvm.nvvm.read.ptx.sreg.ctaid.z"), Some((true, false, 2)));
        assert_eq!(special_register("llvm.nvvm.read.ptx.sreg.nctaid.x"), Some((true, true, 0)));
        assert_eq!(special_register("llvm.nvvm.read.ptx.sreg.laneid"), None);
        assert_eq!(special_register("llvm.nvvm.read.ptx.sreg.warpsize"), None);
    }
}
