//! Host code: launches call the runtime with the module's description and entry table, and
//! internal node functions (graph descriptions in code form) leave the module.

use crate::describe::calls_of;
use crate::{Error, Result};
use contract::desc::Program;
use hpvm_core::graph::{Graph, NodeKind};
use inkwell::module::{Linkage, Module};
use inkwell::values::{AsValueRef, BasicMetadataValueEnum, BasicValue, FunctionValue};
use inkwell::AddressSpace;

pub const LAUNCH_FN: &str = "hpvm_rt_launch";
/// Registers the module with the runtime before `main` ([`register`]).
pub const MODULE_FN: &str = "hpvm_rt_module";
/// Registers the host's addresses of the functions GPU code calls through pointers.
pub const FUNCTIONS_FN: &str = "hpvm_rt_gpu_functions";
/// Registers the module's analysis input ([`AnalysisInput`]).
pub const ANALYSIS_INPUT_FN: &str = "hpvm_rt_analysis_input";

/// What the runtime needs to analyse a node again with one launch's values built in
/// (`hpvm-mgpu specialize`): the module as the analysis read it (LLVM bitcode), and the
/// compiler that built the program (an absolute path).
#[derive(Clone, Copy, Debug)]
pub struct AnalysisInput<'a> {
    pub bitcode: &'a [u8],
    /// Its path, a newline, and what identifies it (the runtime's cache key).
    pub compiler: &'a str,
}

/// What the executable carries beside the description and entry points.
#[derive(Clone, Copy, Debug, Default)]
pub struct Carried<'a> {
    /// The kernels' PTX and machine code.
    pub ptx: Option<&'a str>,
    pub sass: Option<&'a [u8]>,
    /// The functions GPU code calls through pointers.
    pub functions: &'a [String],
    pub input: Option<AnalysisInput<'a>>,
}

pub fn rewrite<'ctx>(
    module: &Module<'ctx>,
    graph: &Graph,
    program: &Program,
    entries: &[FunctionValue<'ctx>],
    carried: Carried<'_>,
) -> Result<()> {
    let Carried { ptx, sass, functions, input } = carried;
    let ctx = module.get_context();
    let ptr = ctx.ptr_type(AddressSpace::default());
    let i32t = ctx.i32_type();

    let json = serde_json::to_string(program).map_err(|e| Error::Internal(e.to_string()))?;
    let text = ctx.const_string(json.as_bytes(), true);
    let desc = module.add_global(text.get_type(), None, "hpvm.program");
    desc.set_initializer(&text);
    desc.set_constant(true);
    desc.set_linkage(Linkage::Private);

    let table_ty = ptr.array_type(entries.len() as u32);
    let table = module.add_global(table_ty, None, "hpvm.entries");
    let fn_ptrs: Vec<_> = entries.iter().map(|f| f.as_global_value().as_pointer_value()).collect();
    table.set_initializer(&ptr.const_array(&fn_ptrs));
    table.set_constant(true);
    table.set_linkage(Linkage::Private);

    let ptx = match ptx {
        Some(text) => {
            let text = ctx.const_string(text.as_bytes(), true);
            let g = module.add_global(text.get_type(), None, "hpvm.ptx");
            g.set_initializer(&text);
            g.set_constant(true);
            g.set_linkage(Linkage::Private);
            g.as_pointer_value()
        }
        None => ptr.const_null(),
    };
    let sass = match sass {
        Some(bytes) => {
            let bytes = ctx.const_string(bytes, false);
            let g = module.add_global(bytes.get_type(), None, "hpvm.sass");
            g.set_initializer(&bytes);
            g.set_constant(true);
            g.set_linkage(Linkage::Private);
            // The runtime reads its words in place.
            g.set_alignment(8);
            g.as_pointer_value()
        }
        None => ptr.const_null(),
    };

    let launch_ty =
        ptr.fn_type(&[ptr.into(), ptr.into(), i32t.into(), i32t.into(), i32t.into(), ptr.into(), ptr.into()], false);
    let rt_launch = module.get_function(LAUNCH_FN).unwrap_or_else(|| module.add_function(LAUNCH_FN, launch_ty, None));

    // Launch calls in the order the graph builder met them (module order).
    let calls: Vec<_> = module.get_functions().flat_map(|f| calls_of(f, "__hpvm__launch")).collect();
    if calls.len() != graph.launches.len() {
        return Err(Error::Internal(format!(
            "{} launch calls but {} launches in the graph",
            calls.len(),
            graph.launches.len()
        )));
    }
    let b = ctx.create_builder();
    for (index, call) in calls.into_iter().enumerate() {
        b.position_before(&call);
        let streaming =
            call.get_operand(0).and_then(|o| o.value()).ok_or_else(|| Error::Internal("launch without flag".into()))?;
        let args = call
            .get_operand(2)
            .and_then(|o| o.value())
            .ok_or_else(|| Error::Internal("launch without arguments".into()))?;
        let streaming = b.build_int_z_extend_or_bit_cast(streaming.into_int_value(), i32t, "streaming")?;
        let new_args: [BasicMetadataValueEnum; 7] = [
            desc.as_pointer_value().into(),
            table.as_pointer_value().into(),
            i32t.const_int(entries.len() as u64, false).into(),
            i32t.const_int(index as u64, false).into(),
            streaming.into(),
            args.into(),
            ptx.into(),
        ];
        let new = b.build_call(rt_launch, &new_args, "graph")?;
        let new_inst = new
            .try_as_basic_value()
            .basic()
            .and_then(|v| v.as_instruction_value())
            .ok_or_else(|| Error::Internal("runtime launch returns nothing".into()))?;
        call.replace_all_uses_with(&new_inst);
        call.erase_from_basic_block();
    }

    register(
        module,
        [desc.as_pointer_value(), table.as_pointer_value(), ptx, sass],
        entries.len() as u32,
        functions,
        input,
    )?;

    // Internal node functions only described the graph, which now lives in the description.
    let internal: Vec<FunctionValue> = graph
        .nodes
        .iter()
        .filter(|(_, n)| matches!(n.kind, NodeKind::Internal(_)))
        .filter_map(|(_, n)| module.get_function(&n.name))
        .collect();
    for f in &internal {
        // SAFETY: both values belong to this module's context; uses are replaced before any
        // deletion, so no deleted function is referenced afterwards.
        unsafe { llvm_sys::core::LLVMReplaceAllUsesWith(f.as_value_ref(), ptr.const_null().as_value_ref()) };
    }
    for f in internal {
        unsafe { f.delete() };
    }
    Ok(())
}

/// A constructor that names the module to the runtime before `main` runs, so that the
/// runtime can read its description and compile its kernels for the GPUs when the session
/// opens (`__hpvm__init`, a CUDA program's first API call) rather than inside the program's
/// first launch, which a program often times.
///
/// With it, the host's addresses of the `functions` the GPU code calls through pointers
/// ([`crate::gpu::GpuCode::functions`]), in their order.
fn register<'ctx>(
    module: &Module<'ctx>,
    [desc, table, ptx, sass]: [inkwell::values::PointerValue<'ctx>; 4],
    n_entries: u32,
    functions: &[String],
    input: Option<AnalysisInput<'_>>,
) -> Result<()> {
    let ctx = module.get_context();
    let ptr = ctx.ptr_type(AddressSpace::default());
    let i32t = ctx.i32_type();
    let void = ctx.void_type();
    let rt = module.get_function(MODULE_FN).unwrap_or_else(|| {
        module.add_function(
            MODULE_FN,
            void.fn_type(&[ptr.into(), ptr.into(), i32t.into(), ptr.into(), ptr.into()], false),
            None,
        )
    });
    let ctor = module.add_function("hpvm.register", void.fn_type(&[], false), Some(Linkage::Private));
    let b = ctx.create_builder();
    b.position_at_end(ctx.append_basic_block(ctor, "entry"));
    let n = i32t.const_int(n_entries as u64, false);
    b.build_call(rt, &[desc.into(), table.into(), n.into(), ptx.into(), sass.into()], "")?;
    if !functions.is_empty() {
        let list: Vec<_> = functions
            .iter()
            .map(|name| {
                module.get_function(name).map(|f| f.as_global_value().as_pointer_value()).ok_or_else(|| {
                    Error::Internal(format!(
                        "`{name}`, which GPU code calls through a pointer, is not in the host's code"
                    ))
                })
            })
            .collect::<Result<_>>()?;
        let g = module.add_global(ptr.array_type(list.len() as u32), None, "hpvm.gpu_functions");
        g.set_initializer(&ptr.const_array(&list));
        g.set_constant(true);
        g.set_linkage(Linkage::Private);
        let rt = module.get_function(FUNCTIONS_FN).unwrap_or_else(|| {
            module.add_function(FUNCTIONS_FN, void.fn_type(&[ptr.into(), ptr.into(), i32t.into()], false), None)
        });
        let count = i32t.const_int(list.len() as u64, false);
        b.build_call(rt, &[ptx.into(), g.as_pointer_value().into(), count.into()], "")?;
    }
    if let Some(input) = input {
        let i64t = ctx.i64_type();
        let bytes = ctx.const_string(input.bitcode, false);
        let g = module.add_global(bytes.get_type(), None, "hpvm.analysis_input");
        g.set_initializer(&bytes);
        g.set_constant(true);
        g.set_linkage(Linkage::Private);
        let compiler = ctx.const_string(input.compiler.as_bytes(), true);
        let c = module.add_global(compiler.get_type(), None, "hpvm.compiler");
        c.set_initializer(&compiler);
        c.set_constant(true);
        c.set_linkage(Linkage::Private);
        let rt = module.get_function(ANALYSIS_INPUT_FN).unwrap_or_else(|| {
            module.add_function(
                ANALYSIS_INPUT_FN,
                void.fn_type(&[ptr.into(), ptr.into(), i64t.into(), ptr.into()], false),
                None,
            )
        });
        let len = i64t.const_int(input.bitcode.len() as u64, false);
        b.build_call(rt, &[desc.into(), g.as_pointer_value().into(), len.into(), c.as_pointer_value().into()], "")?;
    }
    b.build_return(None)?;
    hpvm_core::ctors::add_constructor(module, ctor);
    Ok(())
}
