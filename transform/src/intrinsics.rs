//! Bodies for the HPVM-C functions leaf code calls, so that after inlining they cost what
//! their meaning costs: a query is a load from the instance context, an atomic is one
//! atomic instruction, a math function is an LLVM intrinsic.
//!
//! The instance context is reached through the thread-local [`CURRENT_NODE`], which each
//! entry point sets to its [`contract::ctx::NodeCtx`]; these offsets must match that struct.

use crate::{Error, Result};
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::context::ContextRef;
use inkwell::intrinsics::Intrinsic;
use inkwell::module::{Linkage, Module};
use inkwell::values::{BasicMetadataValueEnum, FunctionValue, GlobalValue};
use inkwell::{AddressSpace, AtomicOrdering, AtomicRMWBinOp};

/// Thread-local pointer to the running instance's `NodeCtx`.
pub const CURRENT_NODE: &str = "hpvm.current_node";
/// Thread-local pointer to the running instance's output record.
pub const CURRENT_OUT: &str = "hpvm.current_out";

/// Byte offsets in `NodeCtx { id: [i64; 3], dim: [i64; 3], parent: *const NodeCtx }`.
pub const CTX_ID: u64 = 0;
pub const CTX_DIM: u64 = 24;
pub const CTX_PARENT: u64 = 48;

/// The thread-local pointer `name`, created on first use.
pub fn tls_pointer<'ctx>(module: &Module<'ctx>, name: &str) -> GlobalValue<'ctx> {
    if let Some(g) = module.get_global(name) {
        return g;
    }
    let ptr = module.get_context().ptr_type(AddressSpace::default());
    let g = module.add_global(ptr, None, name);
    g.set_thread_local(true);
    g.set_linkage(Linkage::Internal);
    g.set_initializer(&ptr.const_null());
    g
}

/// Marks a function as private to the module and always inlined. Unoptimized code (clang's
/// -O0 host half, which the GPU module copies) marks every function `noinline optnone`;
/// those go, as LLVM's verifier takes neither beside `alwaysinline`.
pub fn make_inline(ctx: &ContextRef<'_>, f: FunctionValue<'_>) {
    f.set_linkage(Linkage::Internal);
    for stops in ["optnone", "noinline"] {
        f.remove_enum_attribute(AttributeLoc::Function, Attribute::get_named_enum_kind_id(stops));
    }
    let kind = Attribute::get_named_enum_kind_id("alwaysinline");
    f.add_attribute(AttributeLoc::Function, ctx.create_enum_attribute(kind, 0));
}

/// The instance context (the thread-local [`CURRENT_NODE`] and [`CURRENT_OUT`]) saved before a
/// runtime call during which other instances run on this thread as fibers (a barrier, a warp
/// operation): they set it to theirs, so ours is put back after the call.
pub struct SavedContext<'ctx> {
    node: inkwell::values::PointerValue<'ctx>,
    out: inkwell::values::PointerValue<'ctx>,
    saved_node: inkwell::values::BasicValueEnum<'ctx>,
    saved_out: inkwell::values::BasicValueEnum<'ctx>,
}

impl<'ctx> SavedContext<'ctx> {
    pub fn save(module: &Module<'ctx>, b: &inkwell::builder::Builder<'ctx>) -> Result<SavedContext<'ctx>> {
        let ptr = module.get_context().ptr_type(AddressSpace::default());
        let node = tls_pointer(module, CURRENT_NODE).as_pointer_value();
        let out = tls_pointer(module, CURRENT_OUT).as_pointer_value();
        let saved_node = b.build_load(ptr, node, "saved.node")?;
        let saved_out = b.build_load(ptr, out, "saved.out")?;
        Ok(SavedContext { node, out, saved_node, saved_out })
    }

    pub fn restore(&self, b: &inkwell::builder::Builder<'ctx>) -> Result<()> {
        b.build_store(self.node, self.saved_node)?;
        b.build_store(self.out, self.saved_out)?;
        Ok(())
    }
}

/// Gives a body to every HPVM-C function the module declares and leaf code may call, for
/// leaves running as CPU entry points.
pub fn define(module: &Module<'_>) -> Result<()> {
    define_context(module)?;
    define_common(module)
}

/// Starts the body of the declared function `name`, private and always inlined; `None` when
/// the module does not use it (or already defines it).
fn begin<'ctx>(module: &Module<'ctx>, b: &inkwell::builder::Builder<'ctx>, name: &str) -> Option<FunctionValue<'ctx>> {
    let ctx = module.get_context();
    let f = module.get_function(name)?;
    if f.count_basic_blocks() > 0 {
        return None;
    }
    // The declaration may carry a declaration-only DISubprogram, which a definition may not.
    // SAFETY: `f` is a function of this module; a null subprogram detaches it.
    unsafe {
        llvm_sys::debuginfo::LLVMSetSubprogram(inkwell::values::AsValueRef::as_value_ref(&f), std::ptr::null_mut())
    };
    let bb = ctx.append_basic_block(f, "entry");
    b.position_at_end(bb);
    make_inline(&ctx, f);
    Some(f)
}

fn arg(f: FunctionValue<'_>, i: u32) -> Result<BasicMetadataValueEnum<'_>> {
    f.get_nth_param(i)
        .map(Into::into)
        .ok_or_else(|| Error::Internal(format!("{} has no parameter {i}", f.get_name().to_string_lossy())))
}

/// Queries, barrier and malloc for CPU entry points: the instance context is reached through
/// thread-local pointers set by the entry point.
fn define_context(module: &Module<'_>) -> Result<()> {
    let ctx = module.get_context();
    let b = ctx.create_builder();
    let i64t = ctx.i64_type();
    let i8t = ctx.i8_type();
    let ptr = ctx.ptr_type(AddressSpace::default());
    let begin = |name: &str| begin(module, &b, name);

    if begin("__hpvm__getNode").is_some() {
        let g = tls_pointer(module, CURRENT_NODE);
        let v = b.build_load(ptr, g.as_pointer_value(), "node")?;
        b.build_return(Some(&v))?;
    }
    if let Some(f) = begin("__hpvm__getParentNode") {
        let h = arg(f, 0)?.into_pointer_value();
        let at = unsafe { b.build_in_bounds_gep(i8t, h, &[i64t.const_int(CTX_PARENT, false)], "parent.addr")? };
        let v = b.build_load(ptr, at, "parent")?;
        b.build_return(Some(&v))?;
    }
    for (prefix, base) in [("__hpvm__getNodeInstanceID_", CTX_ID), ("__hpvm__getNumNodeInstances_", CTX_DIM)] {
        for (d, letter) in ["x", "y", "z"].iter().enumerate() {
            let Some(f) = begin(&format!("{prefix}{letter}")) else { continue };
            let h = arg(f, 0)?.into_pointer_value();
            let at = unsafe { b.build_in_bounds_gep(i8t, h, &[i64t.const_int(base + 8 * d as u64, false)], "field")? };
            let v = b.build_load(i64t, at, "value")?;
            // The C prototype says `long`; narrower declarations (old code) get a truncation.
            let ret = f.get_type().get_return_type();
            let v = match ret {
                Some(inkwell::types::BasicTypeEnum::IntType(t)) if t.get_bit_width() < 64 => {
                    b.build_int_truncate(v.into_int_value(), t, "narrow")?.into()
                }
                _ => v,
            };
            b.build_return(Some(&v))?;
        }
    }

    if begin("__hpvm__barrier").is_some() {
        let rt = module
            .get_function("hpvm_rt_barrier")
            .unwrap_or_else(|| module.add_function("hpvm_rt_barrier", ctx.void_type().fn_type(&[], false), None));
        let saved = SavedContext::save(module, &b)?;
        b.build_call(rt, &[], "")?;
        saved.restore(&b)?;
        b.build_return(None)?;
    }
    if let Some(f) = begin("__hpvm__malloc") {
        let rt = module
            .get_function("hpvm_rt_malloc")
            .unwrap_or_else(|| module.add_function("hpvm_rt_malloc", ptr.fn_type(&[i64t.into()], false), None));
        let n = arg(f, 0)?.into_int_value();
        let n = if n.get_type().get_bit_width() < 64 { b.build_int_s_extend(n, i64t, "bytes")? } else { n };
        let p = b
            .build_call(rt, &[n.into()], "mem")?
            .try_as_basic_value()
            .basic()
            .ok_or_else(|| Error::Internal("hpvm_rt_malloc returns nothing".into()))?;
        b.build_return(Some(&p))?;
    }
    Ok(())
}

/// Atomics, math and annotations: the same on every target.
pub fn define_common(module: &Module<'_>) -> Result<()> {
    let ctx = module.get_context();
    let b = ctx.create_builder();
    let i32t = ctx.i32_type();
    let begin = |name: &str| begin(module, &b, name);

    let rmw = [
        ("add", AtomicRMWBinOp::Add),
        ("sub", AtomicRMWBinOp::Sub),
        ("xchg", AtomicRMWBinOp::Xchg),
        ("min", AtomicRMWBinOp::Min),
        ("max", AtomicRMWBinOp::Max),
        ("umin", AtomicRMWBinOp::UMin),
        ("umax", AtomicRMWBinOp::UMax),
        ("and", AtomicRMWBinOp::And),
        ("or", AtomicRMWBinOp::Or),
        ("xor", AtomicRMWBinOp::Xor),
    ];
    for (name, op) in rmw {
        let Some(f) = begin(&format!("__hpvm__atomic_{name}")) else { continue };
        let p = arg(f, 0)?.into_pointer_value();
        let v = arg(f, 1)?.into_int_value();
        let old = b.build_atomicrmw(op, p, v, AtomicOrdering::SequentiallyConsistent)?;
        b.build_return(Some(&old))?;
    }
    for (name, op) in [("inc", AtomicRMWBinOp::Add), ("dec", AtomicRMWBinOp::Sub)] {
        let Some(f) = begin(&format!("__hpvm__atomic_{name}")) else { continue };
        let p = arg(f, 0)?.into_pointer_value();
        let old = b.build_atomicrmw(op, p, i32t.const_int(1, false), AtomicOrdering::SequentiallyConsistent)?;
        b.build_return(Some(&old))?;
    }
    if let Some(f) = begin("__hpvm__atomic_cmpxchg") {
        let p = arg(f, 0)?.into_pointer_value();
        let (cmp, new) = (arg(f, 1)?.into_int_value(), arg(f, 2)?.into_int_value());
        let pair = b.build_cmpxchg(
            p,
            cmp,
            new,
            AtomicOrdering::SequentiallyConsistent,
            AtomicOrdering::SequentiallyConsistent,
        )?;
        let old = b.build_extract_value(pair, 0, "old")?;
        b.build_return(Some(&old))?;
    }

    let f32t = ctx.f32_type();
    for (name, llvm) in [
        ("floor", "llvm.floor"),
        ("sqrt", "llvm.sqrt"),
        ("sin", "llvm.sin"),
        ("cos", "llvm.cos"),
        ("rsqrt", "llvm.sqrt"),
    ] {
        let Some(f) = begin(&format!("__hpvm__{name}")) else { continue };
        let x = arg(f, 0)?;
        let decl = Intrinsic::find(llvm)
            .and_then(|i| i.get_declaration(module, &[f32t.into()]))
            .ok_or_else(|| Error::Internal(format!("no {llvm} intrinsic")))?;
        let r = b
            .build_call(decl, &[x], name)?
            .try_as_basic_value()
            .basic()
            .ok_or_else(|| Error::Internal(format!("{llvm} returns nothing")))?;
        let r = if name == "rsqrt" {
            b.build_float_div(f32t.const_float(1.0), r.into_float_value(), "rsqrt")?.into()
        } else {
            r
        };
        b.build_return(Some(&r))?;
    }

    // Compile-time annotations: nothing to do at run time.
    for name in ["__hpvm__hint", "__hpvm__attributes"] {
        if begin(name).is_some() {
            b.build_return(None)?;
        }
    }
    Ok(())
}
