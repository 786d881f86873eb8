//! GPU kernels through LLVM's NVPTX backend, as gpucc does: a copy of the module keeps the
//! kernels and what they reach, is optimized for the GPU and printed as PTX, which the host
//! executable embeds as a string and the CUDA driver compiles at load time.
//!
//! A kernel is built around the leaf's function: it computes, from the special registers and
//! its extra parameters, the instance ids and counts of up to three levels (the leaf, its
//! parent, the parent's parent), calls the leaf, and everything is inlined. Node handles
//! (`__hpvm__getNode`, `__hpvm__getParentNode`) are then resolved statically to levels and
//! every query to a value; a handle whose level cannot be told (it went through memory or a
//! phi), a call of a function that has no GPU version, or a writable global makes that node
//! stay on the CPU, with the reason. Nothing is guessed.

use crate::describe::{calls_of, function, return_values};
use crate::intrinsics::{define_common, make_inline};
use crate::{Error, Result};
use contract::desc::{KernelDesc, KernelKind, Program};
use contract::kernel;
use hpvm_core::graph::{Graph, NodeId};
use hpvm_core::plan::{plan, shared_params, Fallback, Kernel, Shape};
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::builder::Builder;
use inkwell::context::ContextRef;
use inkwell::module::{Linkage, Module};
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple};
use inkwell::values::{
    AsValueRef, BasicMetadataValueEnum, BasicValue, FunctionValue, InstructionOpcode, InstructionValue, IntValue,
};
use inkwell::{AddressSpace, IntPredicate, OptimizationLevel};

/// LLVM's calling convention for PTX kernels (`ptx_kernel`).
const PTX_KERNEL_CC: u32 = 71;
/// Stands for the current instance's output record in leaf code until kernels are inlined.
const OUT_SLOT: &str = "hpvm.gpu.out_slot";
/// Dynamic shared memory, where allocation nodes' memory lives.
const SHARED: &str = "hpvm_shared";

pub struct GpuCode {
    pub ptx: String,
    /// Kernels compiled, by node.
    pub kernels: Vec<(NodeId, KernelDesc)>,
    /// The functions GPU code may call through pointers, in the order of the module's
    /// function table (`contract::symbols::FUNCTION_TABLE`): the host registers
    /// its addresses of them, in this order.
    pub functions: Vec<String>,
}

/// A kernel built, before its handles are resolved.
struct Built<'ctx> {
    kernel: Kernel,
    f: FunctionValue<'ctx>,
    levels: Levels<'ctx>,
    name: String,
    /// The read-only-cache variant and its name.
    nc: Option<Variant<'ctx>>,
    /// The variants for launches that run from block 0 (offsets known to be 0), plain and
    /// with the read-only cache.
    whole: Variant<'ctx>,
    nc_whole: Option<Variant<'ctx>>,
    readonly: Vec<u32>,
    /// The read-only-cache variants' parameters read from the constant bank instead, with
    /// the bank's variable for each.
    bank: Vec<(u32, String)>,
}

/// Another kernel of a node: its function, levels and name.
type Variant<'ctx> = (FunctionValue<'ctx>, Levels<'ctx>, String);

/// What sets a node's kernels apart: the parameters read through the read-only data cache,
/// and whether the launch runs from block 0 (no partition offset to add).
#[derive(Clone, Copy)]
struct Flavor<'a, 'ctx> {
    readonly: &'a [u32],
    whole: bool,
    /// Leaf parameters whose `__constant__` variable is read from the constant bank's copy.
    bank: &'a [(u32, inkwell::values::GlobalValue<'ctx>)],
}

/// The values a kernel gives to each of the three levels it knows.
struct Levels<'ctx> {
    id: [[IntValue<'ctx>; 3]; 3],
    dim: [[IntValue<'ctx>; 3]; 3],
    out_slot: inkwell::values::PointerValue<'ctx>,
}

/// Whose semantics the math functions of GPU code follow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Math {
    /// C's: `sqrtf` is the correctly rounded square root (`sqrt.rn`), as on the CPU.
    #[default]
    C,
    /// clang's CUDA (a `.cu` file): libdevice's `__nv_sqrtf`, whose precision libdevice
    /// chooses by `__nvvm_reflect("__CUDA_PREC_SQRT")`, which clang leaves unset: an
    /// approximate square root (`sqrt.approx`), what the same file built by clang computes.
    Cuda,
    /// [`Math::Cuda`] under nvcc's `-use_fast_math`: the single-precision functions it
    /// computes with their intrinsics (`powf` as `__powf`, `expf` as `__expf`...), division
    /// approximate (`div.approx`), denormals flushed to zero. GPU code only: simulated devices
    /// and the host compute every one of them exactly, as they compute `__powf` itself.
    CudaFast,
}

impl Math {
    fn cuda(self) -> bool {
        matches!(self, Math::Cuda | Math::CudaFast)
    }
}

/// Under [`Math::CudaFast`], the libdevice function nvcc's `-use_fast_math` computes instead
/// of `nv` (CUDA's table of the functions it affects).
fn fast_version(nv: &str) -> Option<&'static str> {
    Some(match nv {
        "__nv_powf" => "__nv_fast_powf",
        "__nv_expf" => "__nv_fast_expf",
        "__nv_exp10f" => "__nv_fast_exp10f",
        "__nv_logf" => "__nv_fast_logf",
        "__nv_log2f" => "__nv_fast_log2f",
        "__nv_log10f" => "__nv_fast_log10f",
        "__nv_sinf" => "__nv_fast_sinf",
        "__nv_cosf" => "__nv_fast_cosf",
        "__nv_tanf" => "__nv_fast_tanf",
        "__nv_sincosf" => "__nv_fast_sincosf",
        _ => return None,
    })
}

/// Compiles the kernels of `graph` for `arch` (`sm_80`...); nodes that cannot run on the GPU
/// are returned as fallbacks with their reason. `None` when no node wants the GPU.
pub fn compile(
    module: &Module<'_>,
    graph: &Graph,
    program: &Program,
    arch: &str,
    math: Math,
) -> Result<(Option<GpuCode>, Vec<Fallback>)> {
    let (kernels, mut fallbacks) = plan(graph);
    if kernels.is_empty() {
        return Ok((None, fallbacks));
    }
    let gpu = module.clone();
    // Host debug info means nothing on the GPU and would make the PTX a debug build.
    // SAFETY: strips metadata of a module we own.
    unsafe { llvm_sys::debuginfo::LLVMStripModuleDebugInfo(inkwell::module::Module::as_mut_ptr(&gpu)) };
    let ctx = gpu.get_context();
    let b = ctx.create_builder();

    // Leaf returns become stores into a slot the kernel provides.
    let ptr = ctx.ptr_type(AddressSpace::default());
    let slot_fn = gpu.add_function(OUT_SLOT, ptr.fn_type(&[], false), None);
    let mut leaves_done = Vec::new();
    for k in &kernels {
        let leaf = match k.shape {
            Shape::Blocks { leaf, .. } => leaf,
            Shape::Grid => k.node,
        };
        if leaves_done.contains(&leaf) {
            continue;
        }
        leaves_done.push(leaf);
        let f = function(&gpu, &graph.nodes[leaf].name)?;
        let outs = &program.nodes[leaf.index()].outputs;
        for call in calls_of(f, "__hpvm__return") {
            b.position_before(&call);
            let vals = return_values(call);
            if !vals.is_empty() {
                let slot = b
                    .build_call(slot_fn, &[], "out")?
                    .try_as_basic_value()
                    .basic()
                    .expect("returns ptr")
                    .into_pointer_value();
                for (v, o) in vals.iter().zip(outs) {
                    let at = unsafe {
                        b.build_in_bounds_gep(
                            ctx.i8_type(),
                            slot,
                            &[ctx.i64_type().const_int(o.offset as u64, false)],
                            "out.field",
                        )?
                    };
                    b.build_store(at, *v)?.set_alignment(1).map_err(|e| Error::Llvm(e.to_string()))?;
                }
            }
            call.erase_from_basic_block();
        }
    }

    // Kernels, then everything else private so that only what kernels reach survives.
    // Each kernel twice where the leaf has read-only buffers: a variant whose read-only
    // pointers are `noalias readonly`, so loads through them use the read-only data cache
    // (ld.global.nc, HPVM's section 6.2), and a plain one for launches where a read-only
    // buffer is also written through another parameter (which the runtime checks).
    let mut built: Vec<Built> = Vec::new();
    for k in kernels {
        let name = kernel_name(&graph.nodes[k.node].name);
        let leaf = match k.shape {
            Shape::Blocks { leaf, .. } => leaf,
            Shape::Grid => k.node,
        };
        let shared = match k.shape {
            Shape::Blocks { leaf, alloc, .. } => shared_params(graph, k.node, leaf, alloc),
            Shape::Grid => vec![],
        };
        // A translated leaf may write a read-only parameter's buffer through a pointer it
        // loads: no read-only data cache for it.
        let translated = program.nodes[leaf.index()].translated;
        let readonly: Vec<u32> = graph.nodes[leaf]
            .params
            .iter()
            .enumerate()
            .filter(|(i, p)| {
                !translated && p.ty.is_pointer() && p.access.read && !p.access.write && !shared.contains(&(*i as u32))
            })
            .map(|(i, _)| i as u32)
            .collect();
        // A volatile read must see stores made while the kernel runs (a flag the host or
        // another block sets): never through the read-only cache, which need not.
        let leaf_fn = function(&gpu, &graph.nodes[leaf].name)?;
        let readonly: Vec<u32> = match volatile_params(leaf_fn) {
            Some(v) => readonly.into_iter().filter(|i| !v.contains(i)).collect(),
            None => Vec::new(),
        };
        let bank = constant_banks(&gpu, leaf_fn, &readonly);
        let variant = |name: String, readonly: &[u32], whole: bool| -> Result<Variant> {
            let bank = if readonly.is_empty() { &[][..] } else { &bank[..] };
            let (f, levels) = build_kernel(&gpu, &b, graph, program, &k, &name, Flavor { readonly, whole, bank })?;
            Ok((f, levels, name))
        };
        let (f, levels, _) = variant(name.clone(), &[], false)?;
        // The same kernel without the partition's offset: what a launch from block 0 runs, as
        // nvcc's build would (on an H200, fdtd-2d's kernels executed 7-18% more instructions
        // and took 4-5% longer with the offset's adds than nvcc's).
        let whole = variant(format!("{name}_whole"), &[], true)?;
        let (nc, nc_whole) = if readonly.is_empty() {
            (None, None)
        } else {
            (
                Some(variant(format!("{name}_nc"), &readonly, false)?),
                Some(variant(format!("{name}_nc_whole"), &readonly, true)?),
            )
        };
        let bank = bank.iter().map(|(i, g)| (*i, g.get_name().to_string_lossy().into_owned())).collect();
        built.push(Built { kernel: k, f, levels, name, nc, whole, nc_whole, readonly, bank });
    }
    let kernel_fns: Vec<FunctionValue> = built
        .iter()
        .flat_map(|b| [Some(b.f), b.nc.as_ref().map(|n| n.0), Some(b.whole.0), b.nc_whole.as_ref().map(|n| n.0)])
        .flatten()
        .collect();
    for f in gpu.get_functions() {
        if f.count_basic_blocks() > 0 && !kernel_fns.contains(&f) {
            f.set_linkage(Linkage::Internal);
            make_inline(&ctx, f);
        }
    }
    let mut g = gpu.get_first_global();
    while let Some(global) = g {
        let bank = global.get_name().to_bytes().starts_with(hpvm_core::markers::CONSTANT_BANK_PREFIX.as_bytes());
        if global.get_initializer().is_some() {
            global.set_linkage(if bank { Linkage::External } else { Linkage::Internal });
        }
        g = global.get_next_global();
    }
    // Aliases too (clang names a C++ class's complete-object constructor as an alias of its
    // base-object one): an external alias would keep host code alive, which LLVM's global
    // optimizer then gives the alias's name and linkage, and `ptxas` meets its host calls.
    // SAFETY: the aliases of this module, visited in order; setting a linkage keeps the list.
    unsafe {
        let mut a = llvm_sys::core::LLVMGetFirstGlobalAlias(gpu.as_mut_ptr());
        while !a.is_null() {
            llvm_sys::core::LLVMSetLinkage(a, llvm_sys::LLVMLinkage::LLVMInternalLinkage);
            a = llvm_sys::core::LLVMGetNextGlobalAlias(a);
        }
    }
    define_common(&gpu)?;
    define_address_table(&gpu)?;
    let leaves: Vec<FunctionValue> =
        leaves_done.iter().filter_map(|&l| gpu.get_function(&graph.nodes[l].name)).collect();
    let functions = define_function_table(&gpu, &leaves)?;
    // The frontend's two-bodied functions get their GPU bodies: each one call, inlined.
    // CUDA's warp operations: their CPU bodies stop the program; on the GPU, the intrinsic.
    let warps: Vec<FunctionValue> = gpu
        .get_functions()
        .filter(|f| f.get_name().to_bytes().starts_with(hpvm_core::markers::WARP_PREFIX.as_bytes()))
        .collect();
    for f in warps {
        let name = f.get_name().to_string_lossy().into_owned();
        let target = format!("llvm.nvvm.{}", &name[hpvm_core::markers::WARP_PREFIX.len()..]);
        let intr = intrinsic(&gpu, &target, f.get_type());
        give_gpu_body(&b, f, |b, args| Ok(b.build_call(intr, args, "")?))?;
    }
    // Inline PTX without portable code (`hpvm_core::markers::ASM_PREFIX`): the statement as the
    // program wrote it.
    let asms: Vec<FunctionValue> = gpu
        .get_functions()
        .filter(|f| f.get_name().to_bytes().starts_with(hpvm_core::markers::ASM_PREFIX.as_bytes()))
        .collect();
    for f in asms {
        let name = f.get_name().to_string_lossy().into_owned();
        let attr = |key: &str| {
            f.get_string_attribute(AttributeLoc::Function, key)
                .map(|a| a.get_string_value().to_string_lossy().into_owned())
                .ok_or_else(|| Error::Internal(format!("{name} has no `{key}`")))
        };
        let text = attr(hpvm_core::markers::ASM_TEXT)?;
        let constraints = attr(hpvm_core::markers::ASM_CONSTRAINTS)?;
        let (constraints, side_effects) = match constraints.strip_suffix('!') {
            Some(c) => (c.to_string(), true),
            None => (constraints, false),
        };
        let ty = f.get_type();
        let asm = ctx.create_inline_asm(ty, text, constraints, side_effects, false, None, false);
        give_gpu_body(&b, f, |b, args| Ok(b.build_indirect_call(ty, asm, args, "")?))?;
    }
    // Device printf: the GPU's own `vprintf`, which the driver provides.
    if let Some(f) = gpu.get_function(hpvm_core::markers::PRINTF) {
        let vprintf = intrinsic(&gpu, "vprintf", f.get_type());
        give_gpu_body(&b, f, |b, args| Ok(b.build_call(vprintf, args, "")?))?;
    }
    if let Some(f) = gpu.get_function("__hpvm__barrier") {
        if f.count_basic_blocks() == 0 {
            let bb = ctx.append_basic_block(f, "entry");
            b.position_at_end(bb);
            let bar = intrinsic(&gpu, "llvm.nvvm.barrier0", ctx.void_type().fn_type(&[], false));
            b.build_call(bar, &[], "")?;
            b.build_return(None)?;
            make_inline(&ctx, f);
        }
    }

    let tm = nvptx_machine(arch)?;
    gpu.set_triple(&tm.get_triple());
    gpu.set_data_layout(&tm.get_target_data().get_data_layout());
    gpu.run_passes("always-inline,globaldce", &tm, PassBuilderOptions::create())
        .map_err(|e| Error::Llvm(e.to_string()))?;

    // The GPU's math library, for what leaves call of libm that has no exact intrinsic.
    let linked = link_libdevice(&gpu, &tm);
    if let Err(why) = &linked {
        tracing::info!("no GPU math library: {why}");
    }
    let no_math = linked.as_ref().err().map(String::as_str);
    // The functions called through pointers are not inlined anywhere: resolved on their own
    // (they must not ask where they run: only a kernel knows its instance). Kernels that
    // call through pointers need every one of them.
    let mut through_pointers: Result<(), String> = Ok(());
    if let Some(Built { levels, .. }) = built.first() {
        for name in &functions {
            let Some(f) = gpu.get_function(name) else { continue };
            let asks = hpvm_core::handles::asks_where(f);
            let r = match asks {
                Some(q) => Err(format!("`{name}`, which it calls through a pointer, asks {q}")),
                None => resolve(&gpu, &b, f, levels, no_math, math)
                    .map_err(|why| format!("`{name}`, which it calls through a pointer: {why}")),
            };
            if r.is_err() {
                through_pointers = r;
                break;
            }
        }
    }
    let calls_through_pointers = |f: FunctionValue<'_>| {
        gpu.get_global(contract::symbols::FUNCTION_TABLE).is_some_and(|t| uses_in(t.as_value_ref(), f))
    };
    let mut compiled = Vec::new();
    let mut kept: std::collections::HashMap<String, Result<(), String>> = std::collections::HashMap::new();
    for Built { kernel: k, f, levels, name, nc, whole, nc_whole, readonly, bank } in built {
        let others = || nc.iter().chain(std::iter::once(&whole)).chain(nc_whole.iter());
        let resolved = resolve(&gpu, &b, f, &levels, no_math, math)
            .and_then(|()| others().try_for_each(|(f, levels, _)| resolve(&gpu, &b, *f, levels, no_math, math)))
            .and_then(|()| if calls_through_pointers(f) { through_pointers.clone() } else { Ok(()) })
            .and_then(|()| {
                // The functions it calls that were not inlined (recursive ones), once each.
                kept_callees(f).into_iter().try_for_each(|g| {
                    let name = g.get_name().to_string_lossy().into_owned();
                    let r = kept.entry(name.clone()).or_insert_with(|| match hpvm_core::handles::asks_where(g) {
                        Some(q) => Err(format!("`{name}`, which it calls, asks {q}")),
                        None => resolve(&gpu, &b, g, &levels, no_math, math)
                            .map_err(|why| format!("`{name}`, which it calls: {why}")),
                    });
                    r.clone()
                })
            });
        match resolved {
            Ok(()) => {
                let kind = match k.shape {
                    Shape::Blocks { leaf, alloc, ref outputs } => KernelKind::Blocks {
                        leaf: leaf.index() as u32,
                        alloc: alloc.map(|a| a.index() as u32),
                        shared_params: shared_params(graph, k.node, leaf, alloc),
                        outputs: outputs.clone(),
                    },
                    Shape::Grid => KernelKind::Grid,
                };
                compiled.push((
                    k.node,
                    KernelDesc {
                        name,
                        kind,
                        nc_name: nc.map(|n| n.2),
                        whole_name: Some(whole.2),
                        nc_whole_name: nc_whole.map(|n| n.2),
                        readonly,
                        bank,
                    },
                ));
            }
            Err(reason) => {
                // SAFETY: nothing calls a kernel; its body is self-contained after inlining.
                unsafe { f.delete() };
                for (f, _, _) in nc.into_iter().chain(std::iter::once(whole)).chain(nc_whole) {
                    unsafe { f.delete() };
                }
                fallbacks.push(Fallback { node: k.node, reason });
            }
        }
    }
    if compiled.is_empty() {
        return Ok((None, fallbacks));
    }
    // Squares and sine-cosine pairs of the math library as nvcc takes them; the same angle must
    // be one value first.
    if linked.is_ok() {
        gpu.run_passes("function(sroa,early-cse)", &tm, PassBuilderOptions::create())
            .map_err(|e| Error::Llvm(e.to_string()))?;
        crate::gpu_math::simplify(&gpu);
    }
    if math == Math::CudaFast {
        fast_math(&gpu);
    }
    gpu.run_passes("globaldce,default<O3>", &tm, PassBuilderOptions::create())
        .map_err(|e| Error::Llvm(e.to_string()))?;
    let kernels_left: Vec<FunctionValue> = compiled
        .iter()
        .flat_map(|(_, k)| [Some(&k.name), k.nc_name.as_ref(), k.whole_name.as_ref(), k.nc_whole_name.as_ref()])
        .flatten()
        .filter_map(|n| gpu.get_function(n))
        .collect();
    // Local arrays still indexed by a loop's counter: those loops unrolled as nvcc would, and
    // the arrays then promoted to registers by a second optimization.
    if crate::unroll::mark_local_array_loops(&kernels_left) > 0 {
        gpu.run_passes("default<O3>", &tm, PassBuilderOptions::create()).map_err(|e| Error::Llvm(e.to_string()))?;
    }
    wrapping_atomics(&gpu);
    crate::align::raise_alignment(&gpu, &tm.get_target_data(), &kernels_left);
    gpu.verify().map_err(|e| Error::Internal(format!("GPU module does not verify: {}", e.to_string())))?;
    // For compiler developers: the optimized GPU module, as LLVM IR.
    if let Some(path) = std::env::var_os("HPVM_MGPU_DUMP_GPU_IR") {
        gpu.print_to_file(&path).map_err(|e| Error::Llvm(e.to_string()))?;
    }
    let buf = tm.write_to_memory_buffer(&gpu, FileType::Assembly).map_err(|e| Error::Llvm(e.to_string()))?;
    let ptx = String::from_utf8_lossy(buf.as_slice()).trim_end_matches('\0').to_string();
    Ok((Some(GpuCode { ptx, kernels: compiled, functions }), fallbacks))
}

/// The defined functions `k` calls directly, or through them, that are not inlined into it
/// (the CUDA frontend keeps recursive ones as calls), libdevice's aside.
fn kept_callees<'ctx>(k: FunctionValue<'ctx>) -> Vec<FunctionValue<'ctx>> {
    let mut seen: Vec<FunctionValue> = Vec::new();
    let mut todo = vec![k];
    while let Some(f) = todo.pop() {
        for inst in f.get_basic_block_iter().flat_map(|bb| bb.get_instructions()) {
            let callee = inkwell::values::CallSiteValue::try_from(inst).ok().and_then(|c| c.get_called_fn_value());
            let Some(g) = callee.filter(|g| g.count_basic_blocks() > 0 && *g != k) else { continue };
            if !g.get_name().to_bytes().starts_with(b"__nv_") && !seen.contains(&g) {
                seen.push(g);
                todo.push(g);
            }
        }
    }
    seen
}

/// The parameters of leaf `f` that volatile loads read through, in `f` or in the functions
/// it calls; `None` where such a load's pointer has no parameter or local memory under it
/// that the check can see (every parameter then counts). Loads from shared memory and from
/// the stack do not count.
fn volatile_params(f: FunctionValue<'_>) -> Option<Vec<u32>> {
    use llvm_sys::core::*;
    let mut params = Vec::new();
    for g in std::iter::once(f).chain(kept_callees(f)) {
        for inst in g.get_basic_block_iter().flat_map(|bb| bb.get_instructions()) {
            if inst.get_opcode() != InstructionOpcode::Load || !inst.get_volatile().unwrap_or(false) {
                continue;
            }
            // SAFETY (below): values of this module, walked through their operands.
            let mut v = unsafe { LLVMGetOperand(inst.as_value_ref(), 0) };
            loop {
                let ty = unsafe { LLVMTypeOf(v) };
                if unsafe { LLVMGetPointerAddressSpace(ty) } == 3 {
                    break;
                }
                if !unsafe { LLVMIsAGetElementPtrInst(v) }.is_null()
                    || !unsafe { LLVMIsACastInst(v) }.is_null()
                    || !unsafe { LLVMIsAConstantExpr(v) }.is_null()
                        && unsafe { LLVMGetNumOperands(v) } > 0
                        && matches!(
                            unsafe { LLVMGetConstOpcode(v) },
                            llvm_sys::LLVMOpcode::LLVMGetElementPtr | llvm_sys::LLVMOpcode::LLVMAddrSpaceCast
                        )
                {
                    v = unsafe { LLVMGetOperand(v, 0) };
                    continue;
                }
                if !unsafe { LLVMIsAAllocaInst(v) }.is_null() {
                    break;
                }
                if !unsafe { LLVMIsAGlobalVariable(v) }.is_null() {
                    if unsafe { LLVMGetPointerAddressSpace(LLVMTypeOf(v)) } == 3 {
                        break;
                    }
                    return None;
                }
                if !unsafe { LLVMIsAArgument(v) }.is_null() && g == f {
                    let i =
                        (0..f.count_params()).find(|&i| f.get_nth_param(i).is_some_and(|p| p.as_value_ref() == v))?;
                    params.push(i);
                    break;
                }
                return None;
            }
        }
    }
    Some(params)
}

/// Links the LLVM IR text `ir` (the runtime's side of a contract, written here) into the GPU
/// module; `what` names it in errors, which are the compiler's own.
fn link_ir(gpu: &Module<'_>, ir: &str, what: &str) -> Result<()> {
    let buf = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), what);
    let lib = gpu.get_context().create_module_from_ir(buf).map_err(|e| Error::Internal(format!("{what}: {e}")))?;
    lib.set_triple(&gpu.get_triple());
    lib.set_data_layout(&gpu.get_data_layout());
    gpu.link_in_module(lib).map_err(|e| Error::Internal(format!("{what}: {e}")))
}

/// Gives the address translations of translated leaves their GPU bodies: a binary search of
/// the module's address table, which the runtime writes (an address no entry holds is its
/// own translation; `hpvm_runtime::devices::addresses`).
fn define_address_table(gpu: &Module<'_>) -> Result<()> {
    use contract::symbols::{ADDRESS_TABLE as t, ADDRESS_TABLE_BACK as back, ADDRESS_TABLE_WORDS as words};
    use contract::symbols::{TO_DEVICE, TO_PROGRAM};
    if gpu.get_function(TO_DEVICE).is_none() && gpu.get_function(TO_PROGRAM).is_none() {
        return Ok(());
    }
    let ir = format!(
        r#"
@{t} = addrspace(1) externally_initialized global [{words} x i64] zeroinitializer, align 8

define i64 @{TO_DEVICE}(i64 %p) {{
  %r = call i64 @__hpvm_mgpu_lookup(i64 1, i64 %p)
  ret i64 %r
}}

define i64 @{TO_PROGRAM}(i64 %p) {{
  %r = call i64 @__hpvm_mgpu_lookup(i64 {back}, i64 %p)
  ret i64 %r
}}

; The entry among those from word `first` whose [start, end) holds `p`, by binary search of
; the starts; `p` where none does.
define internal i64 @__hpvm_mgpu_lookup(i64 %first, i64 %p) #0 {{
entry:
  %n = load i64, ptr addrspace(1) @{t}, align 8
  br label %loop
loop:
  %lo = phi i64 [ 0, %entry ], [ %lo.next, %step ]
  %hi = phi i64 [ %n, %entry ], [ %hi.next, %step ]
  %more = icmp ult i64 %lo, %hi
  br i1 %more, label %step, label %found
step:
  %sum = add i64 %lo, %hi
  %mid = lshr i64 %sum, 1
  %mid.words = mul i64 %mid, 3
  %mid.at = add i64 %first, %mid.words
  %mid.ptr = getelementptr inbounds i64, ptr addrspace(1) @{t}, i64 %mid.at
  %mid.start = load i64, ptr addrspace(1) %mid.ptr, align 8
  %below = icmp ule i64 %mid.start, %p
  %mid.1 = add i64 %mid, 1
  %lo.next = select i1 %below, i64 %mid.1, i64 %lo
  %hi.next = select i1 %below, i64 %hi, i64 %mid
  br label %loop
found:
  %none = icmp eq i64 %lo, 0
  br i1 %none, label %miss, label %check
check:
  %i = sub i64 %lo, 1
  %i.words = mul i64 %i, 3
  %i.at = add i64 %first, %i.words
  %start.ptr = getelementptr inbounds i64, ptr addrspace(1) @{t}, i64 %i.at
  %start = load i64, ptr addrspace(1) %start.ptr, align 8
  %end.ptr = getelementptr inbounds i64, ptr addrspace(1) %start.ptr, i64 1
  %end = load i64, ptr addrspace(1) %end.ptr, align 8
  %inside = icmp ult i64 %p, %end
  br i1 %inside, label %hit, label %miss
hit:
  %to.ptr = getelementptr inbounds i64, ptr addrspace(1) %start.ptr, i64 2
  %to = load i64, ptr addrspace(1) %to.ptr, align 8
  %offset = sub i64 %p, %start
  %moved = add i64 %to, %offset
  ret i64 %moved
miss:
  ret i64 %p
}}

attributes #0 = {{ alwaysinline }}
"#
    );
    let ctx = gpu.get_context();
    link_ir(gpu, &ir, "address table")?;
    for name in [TO_DEVICE, TO_PROGRAM] {
        if let Some(f) = gpu.get_function(name) {
            f.set_linkage(Linkage::Internal);
            make_inline(&ctx, f);
        }
    }
    Ok(())
}

/// Calls through function pointers: a pointer the program stored holds the host's address
/// of a device function (the CPU build of it: `__device__` variables live on the host), which
/// means nothing on a GPU. Every call through a pointer first looks the pointer up in the
/// module's [`FUNCTION_TABLE`] of host addresses, which the runtime writes as the module
/// loads, and calls the GPU function at the same place of a table of GPU addresses; a pointer
/// not found is called as it is (a GPU's own function address). The functions are those
/// whose address a variable's initial value or the code of `leaves` takes, in module order
/// (returned; empty when nothing is called through a pointer).
///
/// [`FUNCTION_TABLE`]: contract::symbols::FUNCTION_TABLE
fn define_function_table(gpu: &Module<'_>, leaves: &[FunctionValue<'_>]) -> Result<Vec<String>> {
    use contract::symbols::FUNCTION_TABLE;
    use llvm_sys::core::*;
    use llvm_sys::prelude::LLVMValueRef;
    let is_indirect_call = |inst: InstructionValue<'_>| {
        inst.get_opcode() == InstructionOpcode::Call
            && inkwell::values::CallSiteValue::try_from(inst).ok().and_then(|c| c.get_called_fn_value()).is_none()
            // SAFETY: a call instruction's called operand.
            && unsafe { LLVMIsAInlineAsm(LLVMGetCalledValue(inst.as_value_ref())).is_null() }
    };
    let calls: Vec<InstructionValue> = gpu
        .get_functions()
        .flat_map(|f| f.get_basic_block_iter().flat_map(|bb| bb.get_instructions()).collect::<Vec<_>>())
        .filter(|&i| is_indirect_call(i))
        .collect();
    if calls.is_empty() {
        return Ok(Vec::new());
    }
    // The leaves' code, callees included.
    let mut device: Vec<LLVMValueRef> = leaves.iter().map(|f| f.as_value_ref()).collect();
    let mut todo = device.clone();
    while let Some(f) = todo.pop() {
        for inst in hpvm_core::Val(f).instructions() {
            if let Some(callee) = inst.called_function().filter(|c| !c.is_declaration()) {
                if !device.contains(&callee.0) {
                    device.push(callee.0);
                    todo.push(callee.0);
                }
            }
        }
    }
    // Defined functions whose address a variable's value holds, or the leaves' code takes
    // other than to call them (not the host's registrations of its kernels' stubs).
    let takes = |user: LLVMValueRef, f: LLVMValueRef| -> bool {
        // SAFETY (all): queries of live values.
        unsafe {
            if !LLVMIsAInstruction(user).is_null() {
                let callee = !LLVMIsACallInst(user).is_null() && LLVMGetCalledValue(user) == f;
                let in_device = device.contains(&LLVMGetBasicBlockParent(LLVMGetInstructionParent(user)));
                return !callee && in_device;
            }
            // Through constants, up to the variable whose value they are.
            let mut todo = vec![user];
            let mut seen = 0;
            while let Some(c) = todo.pop() {
                seen += 1;
                if seen > 64 {
                    return false;
                }
                if !LLVMIsAGlobalVariable(c).is_null() {
                    let name = hpvm_core::Val(c).name();
                    if !name.starts_with("llvm.") && !name.starts_with("hpvm.") {
                        return true;
                    }
                    continue;
                }
                if !LLVMIsAConstant(c).is_null() {
                    todo.extend(hpvm_core::Val(c).users().iter().map(|u| u.0));
                }
            }
            false
        }
    };
    let taken: Vec<FunctionValue> = gpu
        .get_functions()
        .filter(|f| f.count_basic_blocks() > 0)
        .filter(|f| hpvm_core::Val(f.as_value_ref()).users().iter().any(|u| takes(u.0, f.as_value_ref())))
        .collect();
    if taken.is_empty() {
        return Ok(Vec::new());
    }
    let ctx = gpu.get_context();
    let ptr = ctx.ptr_type(AddressSpace::default());
    let n = taken.len() as u32;
    let gpu_list = gpu.add_global(ptr.array_type(n), None, "__hpvm_mgpu_functions_gpu");
    let addresses: Vec<_> = taken.iter().map(|f| f.as_global_value().as_pointer_value()).collect();
    gpu_list.set_initializer(&ptr.const_array(&addresses));
    gpu_list.set_constant(true);
    let ir = format!(
        r#"
@{FUNCTION_TABLE} = addrspace(1) externally_initialized global [{n} x i64] zeroinitializer, align 8
@__hpvm_mgpu_functions_gpu = external constant [{n} x ptr]

; The GPU function at the place of `p` in the table of host addresses; `p` if none.
define ptr @__hpvm_mgpu_function(ptr %p) #0 {{
entry:
  %key = ptrtoint ptr %p to i64
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %step ]
  %more = icmp ult i64 %i, {n}
  br i1 %more, label %step, label %miss
step:
  %at = getelementptr inbounds [{n} x i64], ptr addrspace(1) @{FUNCTION_TABLE}, i64 0, i64 %i
  %host = load i64, ptr addrspace(1) %at, align 8
  %next = add i64 %i, 1
  %found = icmp eq i64 %host, %key
  br i1 %found, label %hit, label %loop
hit:
  %slot = getelementptr inbounds [{n} x ptr], ptr @__hpvm_mgpu_functions_gpu, i64 0, i64 %i
  %f = load ptr, ptr %slot, align 8
  ret ptr %f
miss:
  ret ptr %p
}}

attributes #0 = {{ alwaysinline }}
"#
    );
    link_ir(gpu, &ir, "function table")?;
    gpu_list.set_linkage(Linkage::Internal);
    let lookup = gpu.get_function("__hpvm_mgpu_function").ok_or(Error::Internal("function table lookup".into()))?;
    make_inline(&ctx, lookup);
    let b = ctx.create_builder();
    for call in calls {
        // SAFETY: `call` is a call instruction of this module; its called operand is its last.
        unsafe {
            let last = LLVMGetNumOperands(call.as_value_ref()) as u32 - 1;
            let callee = LLVMGetOperand(call.as_value_ref(), last);
            b.position_before(&call);
            let target = b.build_call(
                lookup,
                &[BasicMetadataValueEnum::PointerValue(inkwell::values::PointerValue::new(callee))],
                "fn",
            )?;
            let target = target.try_as_basic_value().basic().ok_or(Error::Internal("lookup returns nothing".into()))?;
            LLVMSetOperand(call.as_value_ref(), last, target.as_value_ref());
        }
    }
    Ok(taken.iter().map(|f| f.get_name().to_string_lossy().into_owned()).collect())
}

/// The GPU architectures LLVM 19's NVPTX backend targets.
pub const GPU_ARCHS: [&str; 16] = [
    "sm_35", "sm_50", "sm_52", "sm_53", "sm_60", "sm_61", "sm_62", "sm_70", "sm_72", "sm_75", "sm_80", "sm_86",
    "sm_87", "sm_89", "sm_90", "sm_90a",
];

/// LLVM's options for CUDA kernels as nvcc compiles them, set once per process before any
/// code is generated (LLVM's options are the process's). `fuse`: the program's multiplies and
/// adds may be fused (nvcc's default `--fmad=true`): NVPTX then leaves unfused ones plain
/// (`add.f32`, which ptxas may still fuse, as nvcc's PTX does) instead of `add.rn.f32`, and
/// fuses what clang's CUDA marks contractible. Loops of a few instructions are unrolled
/// about as far as nvcc unrolls them: NVPTX's partial unrolling gets a quarter of O3's
/// threshold, which unrolled HeCBench layout's 4096-trip loop 8 times against nvcc's 32
/// (244 us against 136 on an H200). The unrolling threshold is O3's, so a CPU build at `-O3`
/// of the same process unrolls more too (its results are the same).
pub fn configure_for_cuda(fuse: bool) {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| {
        let mut args = vec![c"hpvm-mgpu".as_ptr(), c"-unroll-threshold-aggressive=1200".as_ptr()];
        if fuse {
            args.push(c"-nvptx-fma-level=1".as_ptr());
        }
        // SAFETY: NUL-terminated strings that live for the program; LLVM copies what it keeps.
        unsafe { llvm_sys::support::LLVMParseCommandLineOptions(args.len() as i32, args.as_ptr(), std::ptr::null()) };
    });
}

pub fn nvptx_machine(arch: &str) -> Result<TargetMachine> {
    if !GPU_ARCHS.contains(&arch) {
        return Err(Error::Usage(format!(
            "unknown GPU architecture `{arch}` (expected one of {})",
            GPU_ARCHS.join(", ")
        )));
    }
    Target::initialize_nvptx(&InitializationConfig::default());
    let triple = TargetTriple::create("nvptx64-nvidia-cuda");
    let target = Target::from_triple(&triple).map_err(|e| Error::Llvm(e.to_string()))?;
    // PTX ISA 7.8 (CUDA 11.8's) whatever the architecture: LLVM's default for an old one
    // (6.0 and below for sm_60) lacks what kernels call on any GPU (`shfl.sync` needs 6.0),
    // and the driver JIT-compiles a newer ISA for an older GPU alike. sm_90a needs 8.0, its
    // default.
    let features = if arch == "sm_90a" { "" } else { "+ptx78" };
    target
        .create_target_machine(
            &triple,
            arch,
            features,
            OptimizationLevel::Aggressive,
            RelocMode::Default,
            CodeModel::Default,
        )
        .ok_or_else(|| Error::Llvm(format!("LLVM's NVPTX backend cannot target `{arch}`")))
}

/// Replaces `f`'s (CPU) body by one call that `call` builds with `f`'s parameters, returning
/// what it returns, and lets it be inlined.
fn give_gpu_body<'ctx>(
    b: &Builder<'ctx>,
    f: FunctionValue<'ctx>,
    call: impl FnOnce(&Builder<'ctx>, &[BasicMetadataValueEnum<'ctx>]) -> Result<inkwell::values::CallSiteValue<'ctx>>,
) -> Result<()> {
    let ctx = f.get_type().get_context();
    for bb in f.get_basic_blocks() {
        // SAFETY: the function's own blocks, replaced by the one made below.
        unsafe { bb.delete() }.map_err(|()| Error::Llvm(format!("cannot empty {}", f.get_name().to_string_lossy())))?;
    }
    b.position_at_end(ctx.append_basic_block(f, "entry"));
    let args: Vec<BasicMetadataValueEnum> = f.get_param_iter().map(Into::into).collect();
    match call(b, &args)?.try_as_basic_value().basic() {
        Some(v) => b.build_return(Some(&v))?,
        None => b.build_return(None)?,
    };
    f.remove_enum_attribute(AttributeLoc::Function, Attribute::get_named_enum_kind_id("noinline"));
    make_inline(&ctx, f);
    Ok(())
}

fn kernel_name(node: &str) -> String {
    let clean: String = node.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    format!("hpvm_kernel_{clean}")
}

fn intrinsic<'ctx>(m: &Module<'ctx>, name: &str, ty: inkwell::types::FunctionType<'ctx>) -> FunctionValue<'ctx> {
    m.get_function(name).unwrap_or_else(|| m.add_function(name, ty, None))
}

fn build_kernel<'ctx>(
    m: &Module<'ctx>,
    b: &Builder<'ctx>,
    graph: &Graph,
    program: &Program,
    k: &Kernel,
    name: &str,
    Flavor { readonly, whole, bank }: Flavor<'_, 'ctx>,
) -> Result<(FunctionValue<'ctx>, Levels<'ctx>)> {
    let ctx = m.get_context();
    let i64t = ctx.i64_type();
    let i32t = ctx.i32_type();
    let ptr = ctx.ptr_type(AddressSpace::default());
    let leaf = match k.shape {
        Shape::Blocks { leaf, .. } => leaf,
        Shape::Grid => k.node,
    };
    let lf = function(m, &graph.nodes[leaf].name)?;
    let mut params: Vec<inkwell::types::BasicMetadataTypeEnum> =
        lf.get_params().iter().map(|p| p.get_type().into()).collect();
    params.extend(std::iter::repeat_n(inkwell::types::BasicMetadataTypeEnum::from(i64t), kernel::OUTS));
    params.push(ptr.into());
    let kf = m.add_function(name, ctx.void_type().fn_type(&params, false), Some(Linkage::External));
    kf.set_call_conventions(PTX_KERNEL_CC);
    for &i in readonly {
        for attr in ["noalias", "readonly"] {
            let kind = inkwell::attributes::Attribute::get_named_enum_kind_id(attr);
            kf.add_attribute(inkwell::attributes::AttributeLoc::Param(i), ctx.create_enum_attribute(kind, 0));
        }
    }
    let entry = ctx.append_basic_block(kf, "entry");
    b.position_at_end(entry);
    let n_leaf = lf.count_params();
    let param = |i: usize| kf.get_nth_param(n_leaf + i as u32).expect("kernel parameter");
    let words = |at: usize| [0, 1, 2].map(|d| param(at + d).into_int_value());
    let off = words(kernel::OFFSET);
    let grid = words(kernel::GRID);
    let pid = words(kernel::PARENT_ID);
    let pdim = words(kernel::PARENT_DIM);
    let outs = param(kernel::OUTS).into_pointer_value();

    let sreg = |reg: &str, d: &str| -> Result<IntValue<'ctx>> {
        let f = intrinsic(m, &format!("llvm.nvvm.read.ptx.sreg.{reg}.{d}"), i32t.fn_type(&[], false));
        let v = b.build_call(f, &[], reg)?.try_as_basic_value().basic().expect("i32").into_int_value();
        Ok(b.build_int_z_extend(v, i64t, reg)?)
    };
    let mut tid = Vec::new();
    let mut ntid = Vec::new();
    let mut ctaid = Vec::new();
    for d in ["x", "y", "z"] {
        tid.push(sreg("tid", d)?);
        ntid.push(sreg("ntid", d)?);
        ctaid.push(sreg("ctaid", d)?);
    }
    let one = i64t.const_int(1, false);
    let zero = i64t.const_zero();
    let record = program.nodes[leaf.index()].outputs_size() as u64;
    let (levels, lin_over) = match k.shape {
        Shape::Blocks { .. } => {
            let mut bid = [zero; 3];
            for d in 0..3 {
                bid[d] = if whole { ctaid[d] } else { b.build_int_add(ctaid[d], off[d], "block")? };
            }
            let levels = [[tid[0], tid[1], tid[2]], bid, pid];
            let dims = [[ntid[0], ntid[1], ntid[2]], grid, pdim];
            ((levels, dims), [ntid[0], ntid[1], ntid[2]])
        }
        Shape::Grid => {
            let mut gid = [zero; 3];
            let mut outside = ctx.bool_type().const_zero();
            for d in 0..3 {
                let base = b.build_int_mul(ctaid[d], ntid[d], "base")?;
                let g = b.build_int_add(base, tid[d], "g")?;
                let g = if whole { g } else { b.build_int_add(g, off[d], "gid")? };
                gid[d] = g;
                let past = b.build_int_compare(IntPredicate::SGE, g, grid[d], "past")?;
                outside = b.build_or(outside, past, "outside")?;
            }
            // Padding threads of the last blocks do nothing.
            let body = ctx.append_basic_block(kf, "body");
            let exit = ctx.append_basic_block(kf, "exit");
            b.build_conditional_branch(outside, exit, body)?;
            b.position_at_end(exit);
            b.build_return(None)?;
            b.position_at_end(body);
            (([gid, pid, [zero; 3]], [grid, pdim, [one; 3]]), grid)
        }
    };
    let (ids, dims) = levels;
    // This instance's output record (only written when the leaf has outputs).
    let lin_ids = ids[0];
    let zy = b.build_int_add(b.build_int_mul(lin_ids[2], lin_over[1], "z.dy")?, lin_ids[1], "zy")?;
    let lin = b.build_int_add(b.build_int_mul(zy, lin_over[0], "zy.dx")?, lin_ids[0], "lin")?;
    let at = b.build_int_mul(lin, i64t.const_int(record, false), "out.off")?;
    let out_slot = match k.shape {
        // A blocks kernel returns no per-thread values (its outputs, if any, are inputs passed
        // through by the runtime): the leaf's record is a private scratch slot.
        Shape::Blocks { .. } if record > 0 => {
            b.build_array_alloca(ctx.i8_type(), i64t.const_int(record, false), "out.slot")?
        }
        _ => unsafe { b.build_in_bounds_gep(ctx.i8_type(), outs, &[at], "out.slot")? },
    };

    // The leaf's arguments; those fed by the allocation node point into shared memory.
    let shared = match k.shape {
        Shape::Blocks { leaf, alloc, .. } => shared_params(graph, k.node, leaf, alloc),
        Shape::Grid => vec![],
    };
    let mut args: Vec<BasicMetadataValueEnum> = Vec::new();
    for i in 0..n_leaf {
        let p = kf.get_nth_param(i).expect("leaf parameter");
        if shared.contains(&i) {
            let base = shared_base(m, b, &ctx)?;
            let offset = b.build_ptr_to_int(p.into_pointer_value(), i64t, "shared.off")?;
            // The runtime hands out 16-byte aligned offsets; saying so lets `align` prove
            // shared-memory accesses aligned, so they vectorize (ld.shared.v4) as nvcc's do.
            let offset = b.build_and(offset, i64t.const_int((-16i64) as u64, true), "shared.off.aligned")?;
            let at = unsafe { b.build_in_bounds_gep(ctx.i8_type(), base, &[offset], "shared")? };
            args.push(at.into());
        } else if let Some((_, g)) = bank.iter().find(|(j, _)| *j == i) {
            // The runtime launches this variant only where the parameter is this very
            // variable's address on the GPU (its device copy lives there), so reading the
            // variable is reading through the parameter.
            args.push(b.build_address_space_cast(g.as_pointer_value(), ptr, "bank")?.into());
        } else {
            args.push(p.into());
        }
    }
    b.build_call(lf, &args, "")?;
    b.build_return(None)?;
    Ok((kf, Levels { id: ids, dim: dims, out_slot }))
}

/// The GPU's constant bank holds this many bytes of a module's variables (ptxas's limit).
const BANK_BYTES: u64 = 64 * 1024;

/// The leaf's read-only parameters that stand for `__constant__` variables
/// ([`hpvm_core::markers::CONSTANT_PARAM`]), each with the module's `.const` variable that
/// holds the device copy, made here once per variable while the bank has room: the
/// read-only-cache variants read them there. The variables are visible, so that the runtime
/// finds each by its name in the loaded module and places the buffer's device copy there.
fn constant_banks<'ctx>(
    m: &Module<'ctx>,
    lf: FunctionValue<'ctx>,
    readonly: &[u32],
) -> Vec<(u32, inkwell::values::GlobalValue<'ctx>)> {
    use hpvm_core::markers::{CONSTANT_BANK_PREFIX, CONSTANT_PARAM};
    let ctx = m.get_context();
    let mut out = Vec::new();
    for &i in readonly {
        let Some(attr) = lf.get_string_attribute(AttributeLoc::Param(i), CONSTANT_PARAM) else { continue };
        let value = attr.get_string_value().to_string_lossy().into_owned();
        let Some((bytes, name)) = value.split_once(' ') else { continue };
        let Ok(bytes) = bytes.parse::<u64>() else { continue };
        let bank_name = format!("{CONSTANT_BANK_PREFIX}{name}");
        let g = match m.get_global(&bank_name) {
            Some(g) => g,
            None => {
                let used: u64 = m
                    .get_globals()
                    .filter(|g| g.get_name().to_bytes().starts_with(CONSTANT_BANK_PREFIX.as_bytes()))
                    .map(|g| g.get_value_type().size_of().and_then(|s| s.get_zero_extended_constant()).unwrap_or(0))
                    .sum();
                if bytes == 0 || used + bytes > BANK_BYTES {
                    continue;
                }
                let ty = ctx.i8_type().array_type(bytes as u32);
                let g = m.add_global(ty, Some(AddressSpace::from(4u16)), &bank_name);
                g.set_initializer(&ty.const_zero());
                g.set_alignment(16);
                g
            }
        };
        out.push((i, g));
    }
    out
}

fn shared_base<'ctx>(
    m: &Module<'ctx>,
    b: &Builder<'ctx>,
    ctx: &ContextRef<'ctx>,
) -> Result<inkwell::values::PointerValue<'ctx>> {
    let g = m.get_global(SHARED).unwrap_or_else(|| {
        let g = m.add_global(ctx.i8_type().array_type(0), Some(AddressSpace::from(3u16)), SHARED);
        g.set_linkage(Linkage::External);
        g.set_alignment(16);
        g
    });
    Ok(b.build_address_space_cast(g.as_pointer_value(), ctx.ptr_type(AddressSpace::default()), "shared.base")?)
}

/// The rest of nvcc's `-use_fast_math` ([`Math::CudaFast`]) for every function of the GPU
/// module: single-precision division approximate (NVPTX's `div.approx` under
/// `unsafe-fp-math`), denormals flushed to zero (the `.ftz` instructions), and libdevice told
/// so: its `__nvvm_reflect("__CUDA_FTZ")` answers 1 (the module's own `nvvm-reflect-ftz`
/// flag, which clang set to 0, cannot be given a second value).
fn fast_math(gpu: &Module<'_>) {
    let ctx = gpu.get_context();
    for f in gpu.get_functions().filter(|f| f.count_basic_blocks() > 0) {
        f.add_attribute(AttributeLoc::Function, ctx.create_string_attribute("unsafe-fp-math", "true"));
        f.add_attribute(
            AttributeLoc::Function,
            ctx.create_string_attribute("denormal-fp-math-f32", "preserve-sign,preserve-sign"),
        );
    }
    let asks_ftz = |call: InstructionValue<'_>| {
        let Some(arg) = call.get_operand(0).and_then(|o| o.value()) else { return false };
        // SAFETY: a call's operand; the global's initializer, where it has one.
        unsafe {
            let g = llvm_sys::core::LLVMIsAGlobalVariable(arg.as_value_ref());
            if g.is_null() {
                return false;
            }
            let init = llvm_sys::core::LLVMGetInitializer(g);
            if init.is_null() || llvm_sys::core::LLVMIsAConstantDataSequential(init).is_null() {
                return false;
            }
            let mut len = 0;
            let text = llvm_sys::core::LLVMGetAsString(init, &mut len);
            std::slice::from_raw_parts(text as *const u8, len).split(|&b| b == 0).next() == Some(b"__CUDA_FTZ")
        }
    };
    let calls: Vec<InstructionValue<'_>> =
        gpu.get_functions().flat_map(|f| calls_of(f, "__nvvm_reflect")).filter(|i| asks_ftz(*i)).collect();
    let one = ctx.i32_type().const_int(1, false);
    for call in calls {
        // SAFETY: a call of this module, every use replaced before the erase.
        unsafe { llvm_sys::core::LLVMReplaceAllUsesWith(call.as_value_ref(), one.as_value_ref()) };
        call.erase_from_basic_block();
    }
}

/// `atomicInc`/`atomicDec` as PTX's `atom.inc`/`atom.dec`, as nvcc emits them: the frontend
/// makes them wrapping `atomicrmw`s (`uinc_wrap`, `udec_wrap`), which the CPU and the analysis
/// take, but which LLVM 19's NVPTX expands into compare-and-swap loops. Under contention such a
/// loop is dear: NVIDIA's simpleAtomicIntrinsics (16384 threads on one counter) took 31 ms on an
/// H200 against nvcc's 1.2 ms. (Through generic addresses where the pointer's space is not
/// known here, as for a kernel's parameters, which NVPTX makes global only later.)
fn wrapping_atomics(gpu: &Module<'_>) {
    use llvm_sys::core::*;
    use llvm_sys::LLVMAtomicRMWBinOp::{LLVMAtomicRMWBinOpUDecWrap, LLVMAtomicRMWBinOpUIncWrap};
    let ctx = gpu.get_context();
    let i32t = ctx.i32_type();
    let b = ctx.create_builder();
    let rmws: Vec<InstructionValue<'_>> = gpu
        .get_functions()
        .flat_map(|f| f.get_basic_block_iter().flat_map(|bb| bb.get_instructions()).collect::<Vec<_>>())
        .filter(|i| i.get_opcode() == InstructionOpcode::AtomicRMW)
        .collect();
    for rmw in rmws {
        // SAFETY (below): an atomicrmw of this module, its operands and type read, replaced
        // by a call with the same result before it is erased.
        let op = unsafe { LLVMGetAtomicRMWBinOp(rmw.as_value_ref()) };
        let what = match op {
            LLVMAtomicRMWBinOpUIncWrap => "inc",
            LLVMAtomicRMWBinOpUDecWrap => "dec",
            _ => continue,
        };
        let (Some(ptr), Some(val)) =
            (rmw.get_operand(0).and_then(|o| o.value()), rmw.get_operand(1).and_then(|o| o.value()))
        else {
            continue;
        };
        if !val.is_int_value() || val.into_int_value().get_type().get_bit_width() != 32 || !ptr.is_pointer_value() {
            continue;
        }
        let ptr = ptr.into_pointer_value();
        let space = unsafe { LLVMGetPointerAddressSpace(LLVMTypeOf(ptr.as_value_ref())) };
        let ty = i32t.fn_type(&[ptr.get_type().into(), i32t.into()], false);
        let f = intrinsic(gpu, &format!("llvm.nvvm.atomic.load.{what}.32.p{space}"), ty);
        b.position_before(&rmw);
        let Ok(call) = b.build_call(f, &[ptr.into(), val.into()], "") else { continue };
        let Some(result) = call.try_as_basic_value().basic() else { continue };
        unsafe { LLVMReplaceAllUsesWith(rmw.as_value_ref(), result.as_value_ref()) };
        rmw.erase_from_basic_block();
    }
}

/// Links libdevice (`hpvm_core::toolchain::libdevice`) into the GPU module, its functions
/// internal so that those no kernel calls are dropped; `Err` says why it is not there.
fn link_libdevice(gpu: &Module<'_>, tm: &TargetMachine) -> Result<(), String> {
    let path = hpvm_core::toolchain::libdevice()?;
    let lib = Module::parse_bitcode_from_path(&path, gpu.get_context())
        .map_err(|e| format!("{}: {}", path.display(), e.to_string()))?;
    // Its own triple (`nvptx64-nvidia-gpulibs`) would make the linker warn on every build.
    lib.set_triple(&tm.get_triple());
    lib.set_data_layout(&tm.get_target_data().get_data_layout());
    gpu.link_in_module(lib).map_err(|e| format!("linking {}: {}", path.display(), e.to_string()))?;
    for f in gpu.get_functions() {
        if f.count_basic_blocks() > 0 && f.get_name().to_bytes().starts_with(b"__nv_") {
            f.set_linkage(Linkage::Internal);
        }
    }
    Ok(())
}

/// The libdevice function standing for a call of `name` (a libm function, or an LLVM math
/// intrinsic that NVPTX cannot select): `__nv_<libm name>`.
fn libdevice_name(name: &str) -> Option<String> {
    // Already libdevice's (CUDA kernels' `min`, `__saturatef`...).
    if name.starts_with("__nv_") {
        return Some(name.to_string());
    }
    if let Some(rest) = name.strip_prefix("llvm.") {
        let (op, ty) = rest.rsplit_once('.')?;
        let suffix = match ty {
            "f32" => "f",
            "f64" => "",
            _ => return None,
        };
        return ["exp", "exp2", "exp10", "log", "log2", "log10", "pow", "sin", "cos", "tan"]
            .contains(&op)
            .then(|| format!("__nv_{op}{suffix}"));
    }
    let plain = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !name.starts_with("__");
    plain.then(|| format!("__nv_{name}"))
}

/// Replaces node handles and queries in an inlined kernel by the kernel's values, and calls
/// the kernel may not make by what the GPU has: exact LLVM intrinsics for some of libm,
/// libdevice for the rest (`no_libdevice`: why it is not linked, if it is not).
fn resolve<'ctx>(
    m: &Module<'ctx>,
    b: &Builder<'ctx>,
    kf: FunctionValue<'ctx>,
    levels: &Levels<'ctx>,
    no_libdevice: Option<&str>,
    math: Math,
) -> Result<(), String> {
    let ctx = m.get_context();
    let handles = hpvm_core::handles::Levels { id: levels.id.to_vec(), count: levels.dim.to_vec() };
    hpvm_core::handles::resolve_queries(b, kf, &handles)?;
    let mut replace: Vec<(InstructionValue, inkwell::values::BasicValueEnum)> = Vec::new();
    let insts: Vec<InstructionValue> = kf.get_basic_block_iter().flat_map(|bb| bb.get_instructions()).collect();
    for inst in insts {
        if inst.get_opcode() == InstructionOpcode::Fence {
            // The CUDA frontend gives `__threadfence*` (`llvm.nvvm.membar.*`) to the CPU as a
            // sequentially consistent fence, which LLVM 19's NVPTX cannot select ("Cannot
            // select: AtomicFence": the kernel fell back to the CPU). Back to the GPU's own
            // barrier: `__threadfence_block`'s single-thread fence to `membar.cta` (a block's
            // threads are the CPU's one thread), any other at the widest scope, at least as
            // strong as what the program asked for.
            // SAFETY: a fence instruction of this function.
            let block = unsafe { llvm_sys::core::LLVMIsAtomicSingleThread(inst.as_value_ref()) } != 0;
            let scope = if block { "llvm.nvvm.membar.cta" } else { "llvm.nvvm.membar.sys" };
            let membar = intrinsic(m, scope, ctx.void_type().fn_type(&[], false));
            b.position_before(&inst);
            b.build_call(membar, &[], "").map_err(|e| e.to_string())?;
            inst.erase_from_basic_block();
            continue;
        }
        if inst.get_opcode() != InstructionOpcode::Call {
            continue;
        }
        let Some(callee) = inkwell::values::CallSiteValue::try_from(inst).ok().and_then(|c| c.get_called_fn_value())
        else {
            // SAFETY: a call instruction's called operand.
            if unsafe {
                !llvm_sys::core::LLVMIsAInlineAsm(llvm_sys::core::LLVMGetCalledValue(inst.as_value_ref())).is_null()
            } {
                // Inline PTX, as the program wrote it.
                continue;
            }
            if m.get_global(contract::symbols::FUNCTION_TABLE).is_some() {
                // Through the function table ([`define_function_table`]).
                continue;
            }
            return Err("it calls a function through a pointer".into());
        };
        let name = callee.get_name().to_string_lossy().into_owned();
        // The same call to another function of the same type.
        let call_instead = |f: FunctionValue<'ctx>| -> Result<inkwell::values::BasicValueEnum<'ctx>, String> {
            b.position_before(&inst);
            let args: Vec<BasicMetadataValueEnum> = (0..inst.get_num_operands() - 1)
                .filter_map(|i| inst.get_operand(i).and_then(|o| o.value()))
                .map(Into::into)
                .collect();
            let call = b.build_call(f, &args, "math").map_err(|e| e.to_string())?;
            call.try_as_basic_value().basic().ok_or_else(|| "a math function returns nothing".to_string())
        };
        // libdevice's version, where it has one of the very same type (its fast one under
        // `-use_fast_math`).
        let in_libdevice = libdevice_name(&name)
            .map(|n| match fast_version(&n) {
                Some(fast) if math == Math::CudaFast => fast.to_string(),
                _ => n,
            })
            .and_then(|n| m.get_function(&n))
            .filter(|f| f.count_basic_blocks() > 0 && f.get_type() == callee.get_type());
        match name.as_str() {
            OUT_SLOT => replace.push((inst, levels.out_slot.as_basic_value_enum())),
            // Device printf and assert, and the device heap (`malloc`, `free`): the driver
            // provides them. A kernel that allocates never splits: its calls are opaque to
            // the analysis, and pointers from one GPU's heap are that GPU's.
            "vprintf" | "__assertfail" | "malloc" | "free" => {}
            n if n.starts_with("llvm.") => {
                if let Some(f) = in_libdevice {
                    replace.push((inst, call_instead(f)?));
                }
            }
            // clang's CUDA takes `sqrtf` from libdevice (see [`Math::Cuda`]); the CUDA
            // frontend's `sqrtf` may have become the intrinsic on the way.
            "sqrtf" | "llvm.sqrt.f32" if math.cuda() => {
                let nv = m.get_function("__nv_sqrtf").filter(|f| f.count_basic_blocks() > 0);
                match nv {
                    Some(f) => replace.push((inst, call_instead(f)?)),
                    None if name == "sqrtf" => {
                        let decl = inkwell::intrinsics::Intrinsic::find("llvm.sqrt")
                            .and_then(|i| i.get_declaration(m, &[ctx.f32_type().into()]))
                            .ok_or("no LLVM intrinsic for a math function")?;
                        replace.push((inst, call_instead(decl)?));
                    }
                    None => {}
                }
            }
            // libdevice's precise function, called as such, under `-use_fast_math`.
            n if math == Math::CudaFast && n.starts_with("__nv_") && fast_version(n).is_some() => {
                if let Some(f) = in_libdevice {
                    replace.push((inst, call_instead(f)?));
                }
            }
            n if callee.count_basic_blocks() == 0 => match (libm_intrinsic(n), in_libdevice) {
                (Some(intr), _) => {
                    let decl = inkwell::intrinsics::Intrinsic::find(intr.0)
                        .and_then(|i| i.get_declaration(m, &[intr.1(&ctx)]))
                        .ok_or("no LLVM intrinsic for a math function")?;
                    replace.push((inst, call_instead(decl)?));
                }
                (None, Some(f)) => replace.push((inst, call_instead(f)?)),
                (None, None) => {
                    return Err(match (libdevice_name(n), no_libdevice) {
                        (Some(_), Some(why)) => {
                            format!("it calls `{n}`, but the GPU's math library is not available: {why}")
                        }
                        _ => format!("it calls `{n}`, which has no GPU version"),
                    })
                }
            },
            // libdevice's own functions, once called (they have bodies).
            n if n.starts_with("__nv_") => {}
            // A recursive function the CUDA frontend kept as a call (cooperative groups'
            // `log2`, a tree walk): PTX calls it, resolved on its own ([`kept_callees`]).
            _ => {}
        }
    }
    for (inst, v) in replace {
        // SAFETY: both values belong to this module; every use is replaced before the erase.
        unsafe { llvm_sys::core::LLVMReplaceAllUsesWith(inst.as_value_ref(), v.as_value_ref()) };
        inst.erase_from_basic_block();
    }
    // Writable globals would be per-GPU copies, not the host's variables. The address and
    // function tables are each GPU's own, by design, and the constant bank's variables are
    // where the runtime puts the buffers' device copies.
    let mut g = m.get_first_global();
    while let Some(global) = g {
        if !global.is_constant()
            && global.get_name().to_bytes() != SHARED.as_bytes()
            && global.get_name().to_bytes() != contract::symbols::ADDRESS_TABLE.as_bytes()
            && global.get_name().to_bytes() != contract::symbols::FUNCTION_TABLE.as_bytes()
            && !global.get_name().to_bytes().starts_with(hpvm_core::markers::CONSTANT_BANK_PREFIX.as_bytes())
            && global.get_first_use().is_some()
            && uses_in(global.as_value_ref(), kf)
        {
            return Err(format!("it uses the global variable `{}`", global.get_name().to_string_lossy()));
        }
        g = global.get_next_global();
    }
    Ok(())
}

/// Whether `v` is used inside `f`.
fn uses_in(v: llvm_sys::prelude::LLVMValueRef, f: FunctionValue<'_>) -> bool {
    unsafe {
        let mut u = llvm_sys::core::LLVMGetFirstUse(v);
        while !u.is_null() {
            let user = llvm_sys::core::LLVMGetUser(u);
            if !llvm_sys::core::LLVMIsAInstruction(user).is_null() {
                let bb = llvm_sys::core::LLVMGetInstructionParent(user);
                if llvm_sys::core::LLVMGetBasicBlockParent(bb) == f.as_value_ref() {
                    return true;
                }
            } else if !llvm_sys::core::LLVMIsAConstantExpr(user).is_null() && uses_in(user, f) {
                return true;
            }
            u = llvm_sys::core::LLVMGetNextUse(u);
        }
    }
    false
}

type TypeFn = for<'c> fn(&ContextRef<'c>) -> inkwell::types::BasicTypeEnum<'c>;

/// libm functions with an LLVM intrinsic NVPTX lowers exactly.
fn libm_intrinsic(name: &str) -> Option<(&'static str, TypeFn)> {
    let f32t: TypeFn = |c| c.f32_type().into();
    let f64t: TypeFn = |c| c.f64_type().into();
    Some(match name {
        "sqrtf" => ("llvm.sqrt", f32t),
        "sqrt" => ("llvm.sqrt", f64t),
        "fabsf" => ("llvm.fabs", f32t),
        "fabs" => ("llvm.fabs", f64t),
        "floorf" => ("llvm.floor", f32t),
        "floor" => ("llvm.floor", f64t),
        "ceilf" => ("llvm.ceil", f32t),
        "ceil" => ("llvm.ceil", f64t),
        "fminf" => ("llvm.minnum", f32t),
        "fmaxf" => ("llvm.maxnum", f32t),
        "fmin" => ("llvm.minnum", f64t),
        "fmax" => ("llvm.maxnum", f64t),
        "fmaf" => ("llvm.fma", f32t),
        "fma" => ("llvm.fma", f64t),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::libdevice_name;

    #[test]
    fn math_calls_map_to_libdevice_names() {
        assert_eq!(libdevice_name("expf").as_deref(), Some("__nv_expf"));
        assert_eq!(libdevice_name("pow").as_deref(), Some("__nv_pow"));
        assert_eq!(libdevice_name("llvm.exp.f32").as_deref(), Some("__nv_expf"));
        assert_eq!(libdevice_name("llvm.log10.f64").as_deref(), Some("__nv_log10"));
        // Intrinsics NVPTX selects itself, other types, and reserved names stay as they are.
        assert_eq!(libdevice_name("llvm.sqrt.f32"), None);
        assert_eq!(libdevice_name("llvm.exp.v4f32"), None);
        assert_eq!(libdevice_name("__hpvm__barrier"), None);
        assert_eq!(libdevice_name("a.b"), None);
    }
}
