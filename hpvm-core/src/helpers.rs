//! Launch helpers: host functions that receive the root of a launch as a parameter
//! (`static void run(void *root, ...) { ... __hpvm__launch(0, root, args); ... }`), directly or
//! through further helpers. Each is inlined into its callers before the graph is built, so
//! every launch site names its root; a root that still is not a node function afterwards (it
//! truly varies at run time, or the helper is recursive) keeps the builder's error.

use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::module::Module;
use inkwell::values::{AsValueRef, CallSiteValue, FunctionValue, InstructionOpcode};
use std::collections::{BTreeSet, HashMap};

/// Marks every launch helper of `module` to be inlined (`alwaysinline`, and no `noinline` or
/// `optnone`, which clang puts on everything at `-O0`); true when there is one.
pub fn mark_launch_helpers(module: &Module<'_>) -> bool {
    // Every call with a known callee: (caller, call, callee).
    let mut calls = Vec::new();
    for caller in module.get_functions() {
        for inst in caller.get_basic_block_iter().flat_map(|bb| bb.get_instructions()) {
            if inst.get_opcode() != InstructionOpcode::Call {
                continue;
            }
            if let Some(callee) = CallSiteValue::try_from(inst).ok().and_then(|c| c.get_called_fn_value()) {
                calls.push((caller, inst, callee));
            }
        }
    }
    // The parameters of each helper that carry a root to a launch.
    let mut roots: HashMap<FunctionValue<'_>, BTreeSet<u32>> = HashMap::new();
    loop {
        let mut changed = false;
        for &(caller, inst, callee) in &calls {
            let carried: Vec<u32> = if callee.get_name().to_bytes() == b"__hpvm__launch" {
                vec![1]
            } else {
                roots.get(&callee).map(|s| s.iter().copied().collect()).unwrap_or_default()
            };
            for i in carried {
                let Some(arg) = inst.get_operand(i).and_then(|o| o.value()) else { continue };
                let param = caller.get_param_iter().position(|p| p.as_value_ref() == arg.as_value_ref());
                if let Some(j) = param {
                    changed |= roots.entry(caller).or_default().insert(j as u32);
                }
            }
        }
        if !changed {
            break;
        }
    }
    let kind = |name: &str| Attribute::get_named_enum_kind_id(name);
    for f in roots.keys() {
        f.remove_enum_attribute(AttributeLoc::Function, kind("noinline"));
        f.remove_enum_attribute(AttributeLoc::Function, kind("optnone"));
        f.add_attribute(AttributeLoc::Function, module.get_context().create_enum_attribute(kind("alwaysinline"), 0));
    }
    !roots.is_empty()
}
