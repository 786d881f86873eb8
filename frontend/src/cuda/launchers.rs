//! The host side of each kernel: a launcher and its registration.
//!
//! clang's host half launches a kernel through its stub, which pops the `<<<…>>>`
//! configuration and calls `cudaLaunchKernel(stub, grid, block, args, shmem, stream)`. The
//! runtime's `cudaLaunchKernel` finds the kernel's launcher by the stub's address, which a
//! constructor registers (`hpvm_rt_cuda_register`), and calls it:
//!
//! ```text
//! i32 __hpvm_cuda_launch.<kernel>(ptr args, i64 gx, i64 gy, i64 gz, i64 bx, i64 by, i64 bz, i64 shmem)
//! ```
//!
//! It packs the root's argument struct (each pointer followed by its extent in the buffer the
//! runtime knows it from, `hpvm_rt_cuda_extent`; each device variable's shadow, tracked by
//! `hpvm_rt_cuda_symbol`), launches the root and waits: an ordinary HPVM launch, which the
//! transform lowers as any other.

use super::device::{front_len, is_pointer, Hpvm, Kernel};
use crate::{Error, Result};
use inkwell::module::{Linkage, Module};
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicMetadataValueEnum, BasicValueEnum, FunctionValue};
use inkwell::AddressSpace;

/// The stub clang made for kernel `symbol` in the host half: the kernel's name with
/// `__device_stub__` before its last component (`_Z4tilePfi` → `_Z19__device_stub__tilePfi`),
/// matched on the demangled names.
pub(super) fn stub_of<'ctx>(host: &Module<'ctx>, symbol: &str) -> Option<FunctionValue<'ctx>> {
    if !symbol.starts_with("_Z") {
        return host.get_function(&format!("__device_stub__{symbol}"));
    }
    let full = |s: &str| cpp_demangle::Symbol::new(s).ok().and_then(|d| d.demangle().ok());
    let kernel = full(symbol)?;
    host.get_functions().find(|f| {
        let name = f.get_name().to_string_lossy();
        name.contains("__device_stub__") && full(&name).is_some_and(|d| d.replacen("__device_stub__", "", 1) == kernel)
    })
}

/// Adds a launcher per kernel and a constructor registering each under its stub, and every
/// device variable's shadow with its size (`hpvm_rt_cuda_register_symbol`: the symbols that
/// `cudaMemcpyToSymbol` accepts).
pub(super) fn add(host: &Module<'_>, kernels: &[Kernel], symbols: &[(String, u64, bool)]) -> Result<()> {
    let ctx = host.get_context();
    let (i32t, i64t) = (ctx.i32_type(), ctx.i64_type());
    let ptr = ctx.ptr_type(AddressSpace::default());
    let hpvm = Hpvm::declare(host);
    let extent = host.add_function("hpvm_rt_cuda_extent", i64t.fn_type(&[ptr.into()], false), None);
    let symbol_fn = host.add_function("hpvm_rt_cuda_symbol", ptr.fn_type(&[ptr.into(), i64t.into()], false), None);
    let blob_fn =
        host.add_function("hpvm_rt_cuda_blob", ptr.fn_type(&[ptr.into(), ptr.into(), i64t.into()], false), None);
    let symbol_current =
        host.add_function("hpvm_rt_cuda_symbol_current", ptr.fn_type(&[ptr.into(), i64t.into()], false), None);
    let register =
        host.add_function("hpvm_rt_cuda_register", ctx.void_type().fn_type(&[ptr.into(), ptr.into()], false), None);
    let b = ctx.create_builder();
    let llvm = |e: inkwell::builder::BuilderError| Error::Llvm(e.to_string());
    let mut registrations = Vec::new();
    let data = inkwell::targets::TargetData::create(&host.get_data_layout().as_str().to_string_lossy());
    for k in kernels {
        let root = host.get_function(&k.root).expect("made by the device half");
        let fields: Vec<BasicTypeEnum> = root
            .get_type()
            .get_param_types()
            .into_iter()
            .map(|t| BasicTypeEnum::try_from(t).expect("node parameters are values"))
            .collect();
        let record = ctx.struct_type(&fields, true);
        let ty = i32t.fn_type(
            &[ptr.into(), i64t.into(), i64t.into(), i64t.into(), i64t.into(), i64t.into(), i64t.into(), i64t.into()],
            false,
        );
        let launcher = host.add_function(&format!("__hpvm_cuda_launch.{}", k.symbol), ty, Some(Linkage::Internal));
        b.position_at_end(ctx.append_basic_block(launcher, "entry"));
        let p: Vec<BasicValueEnum> = launcher.get_param_iter().collect();
        let args = b.build_alloca(record, "args").map_err(llvm)?;
        let mut values: Vec<BasicValueEnum> = Vec::new();
        // The constant variables values are read from, current on the host before they are.
        let mut read_from: Vec<&str> = Vec::new();
        for name in k.params.iter().filter_map(|p| p.from_symbol.as_ref().map(|(n, _)| n.as_str())) {
            if !read_from.contains(&name) {
                read_from.push(name);
                let shadow = host.get_global(name).expect("checked by the device half");
                let bytes = k.symbols.iter().find(|(n, _)| n == name).map_or(0, |&(_, b)| b);
                let args = [shadow.as_pointer_value().into(), i64t.const_int(bytes, false).into()];
                b.build_call(symbol_current, &args, "").map_err(llvm)?;
            }
        }
        for (i, param) in k.params.iter().enumerate() {
            let slot = match &param.from_symbol {
                // A value the kernel loads from constant memory: the shadow's, now.
                Some((name, offset)) => {
                    let shadow = host.get_global(name).expect("checked by the device half").as_pointer_value();
                    unsafe { b.build_gep(ctx.i8_type(), shadow, &[i64t.const_int(*offset, false)], "") }
                        .map_err(llvm)?
                }
                None => {
                    let at =
                        unsafe { b.build_gep(ptr, p[0].into_pointer_value(), &[i64t.const_int(i as u64, false)], "") }
                            .map_err(llvm)?;
                    b.build_load(ptr, at, "").map_err(llvm)?.into_pointer_value()
                }
            };
            let whole = unsafe { BasicTypeEnum::new(param.ty) };
            if param.blob {
                // Its bytes, in a buffer of the kernel's own that the runtime keeps current
                // (`hpvm_rt_cuda_blob`): a global of the value's type, one per parameter.
                let buffer = host.add_global(whole, None, &format!("__hpvm_cuda_blob.{}.{i}", k.symbol));
                buffer.set_linkage(Linkage::Internal);
                buffer.set_initializer(&whole.const_zero());
                buffer.set_alignment(16);
                let bytes = i64t.const_int(data.get_abi_size(&whole), false);
                let args = [buffer.as_pointer_value().into(), slot.into(), bytes.into()];
                let at = b.build_call(blob_fn, &args, "").map_err(llvm)?.try_as_basic_value().basic().expect("ptr");
                values.push(at);
                values.push(bytes.into());
                continue;
            }
            for (path, raw) in &param.scalars {
                let ty = unsafe { BasicTypeEnum::new(*raw) };
                let field = if path.is_empty() {
                    slot
                } else {
                    let mut indices = vec![i32t.const_zero()];
                    indices.extend(path.iter().map(|&j| i32t.const_int(j as u64, false)));
                    unsafe { b.build_in_bounds_gep(whole, slot, &indices, "") }.map_err(llvm)?
                };
                // A scalar the kernel never reads (padding): zero, not the caller's bytes. A
                // pointer it never reads: null, so that the launch binds no buffer for it
                // (CUB's keys-only sorts pass `nullptr + offset` for the values they never
                // touch, which no buffer holds: the launch ran on the host).
                let unused = k.unused.contains(&values.len());
                let v =
                    if unused { ty.const_zero() } else { b.build_load(ty, field, &format!("arg{i}")).map_err(llvm)? };
                values.push(v);
                if unsafe { is_pointer(*raw) } {
                    // A null pointer's extent is 0 (`hpvm_rt_cuda_extent`): no call for it.
                    let bytes = if unused {
                        i64t.const_zero().into()
                    } else {
                        b.build_call(extent, &[v.into()], "").map_err(llvm)?.try_as_basic_value().basic().expect("i64")
                    };
                    values.push(bytes);
                }
            }
        }
        for (name, bytes) in &k.symbols {
            let shadow = host.get_global(name).expect("checked by the device half");
            let size = i64t.const_int(*bytes, false);
            let at = b
                .build_call(symbol_fn, &[shadow.as_pointer_value().into(), size.into()], "")
                .map_err(llvm)?
                .try_as_basic_value()
                .basic()
                .expect("ptr");
            values.push(at);
            values.push(size.into());
        }
        debug_assert_eq!(values.len(), front_len(k));
        values.extend_from_slice(&p[4..7]);
        values.extend(k.shared.iter().map(|&bytes| BasicValueEnum::from(i64t.const_int(bytes, false))));
        if k.dynamic_shared {
            values.push(p[7]);
        }
        values.extend_from_slice(&p[1..4]);
        for (i, v) in values.into_iter().enumerate() {
            let slot = b.build_struct_gep(record, args, i as u32, "").map_err(llvm)?;
            b.build_store(slot, v).map_err(llvm)?;
        }
        let launch_args: [BasicMetadataValueEnum; 3] =
            [i32t.const_zero().into(), root.as_global_value().as_pointer_value().into(), args.into()];
        let graph =
            b.build_call(hpvm.launch, &launch_args, "graph").map_err(llvm)?.try_as_basic_value().basic().expect("ptr");
        b.build_call(hpvm.wait, &[graph.into()], "").map_err(llvm)?;
        b.build_return(Some(&i32t.const_zero())).map_err(llvm)?;
        if let Some(stub) = stub_of(host, &k.symbol) {
            // The bytes of each parameter, for the runtime to copy a launch's arguments
            // (a launch captured into a CUDA graph runs after the caller's values are gone).
            let sizes: Vec<_> = k
                .params
                .iter()
                .filter(|p| p.from_symbol.is_none())
                .map(|p| i64t.const_int(data.get_abi_size(&unsafe { BasicTypeEnum::new(p.ty) }), false))
                .collect();
            let table =
                host.add_global(i64t.array_type(sizes.len() as u32), None, &format!("__hpvm_cuda_params.{}", k.symbol));
            table.set_linkage(Linkage::Private);
            table.set_constant(true);
            table.set_initializer(&i64t.const_array(&sizes));
            let static_shared: u64 = k.shared.iter().sum();
            registrations.push((stub, launcher, table, sizes.len(), k.root.clone(), static_shared));
        }
    }
    let shadows: Vec<_> =
        symbols.iter().filter_map(|(name, bytes, managed)| Some((host.get_global(name)?, *bytes, *managed))).collect();
    if registrations.is_empty() && shadows.is_empty() {
        return Ok(());
    }
    let register_symbol = host.add_function(
        "hpvm_rt_cuda_register_symbol",
        ctx.void_type().fn_type(&[ptr.into(), i64t.into()], false),
        None,
    );
    let ctor = host.add_function("__hpvm_cuda_register", ctx.void_type().fn_type(&[], false), Some(Linkage::Internal));
    b.position_at_end(ctx.append_basic_block(ctor, "entry"));
    let register_params = host.add_function(
        "hpvm_rt_cuda_register_params",
        ctx.void_type().fn_type(&[ptr.into(), i64t.into(), ptr.into()], false),
        None,
    );
    // The kernel's root node and its static shared memory, for the occupancy a GPU's driver
    // finds for the compiled kernel (`cudaOccupancyMaxActiveBlocksPerMultiprocessor`).
    let register_root = host.add_function(
        "hpvm_rt_cuda_register_root",
        ctx.void_type().fn_type(&[ptr.into(), ptr.into(), i64t.into()], false),
        None,
    );
    for (stub, launcher, table, count, root, static_shared) in registrations {
        let stub = stub.as_global_value().as_pointer_value();
        b.build_call(register, &[stub.into(), launcher.as_global_value().as_pointer_value().into()], "")
            .map_err(llvm)?;
        let args = [stub.into(), i64t.const_int(count as u64, false).into(), table.as_pointer_value().into()];
        b.build_call(register_params, &args, "").map_err(llvm)?;
        let name = b.build_global_string_ptr(&root, "root.name").map_err(llvm)?;
        let shared = i64t.const_int(static_shared, false);
        b.build_call(register_root, &[stub.into(), name.as_pointer_value().into(), shared.into()], "").map_err(llvm)?;
    }
    // `__managed__` ones as such: the host reads and writes their shadows directly.
    let register_managed = host.add_function(
        "hpvm_rt_cuda_register_managed",
        ctx.void_type().fn_type(&[ptr.into(), i64t.into()], false),
        None,
    );
    for (shadow, bytes, managed) in shadows {
        let args = [shadow.as_pointer_value().into(), i64t.const_int(bytes, false).into()];
        let f = if managed { register_managed } else { register_symbol };
        b.build_call(f, &args, "").map_err(llvm)?;
    }
    b.build_return(None).map_err(llvm)?;
    hpvm_core::ctors::add_constructor(host, ctor);
    Ok(())
}
