//! Static resolution of node handles in leaf code whose callees are all inlined.
//!
//! Leaf code asks for instance ids and counts through node handles: `__hpvm__getNode()` is
//! the leaf itself (level 0), `__hpvm__getParentNode(h)` is one level above `h`. Code that
//! gives the levels concrete values (a GPU kernel's special registers, the analysis's
//! instance loops) replaces every query by the value of its level, so that nothing of the
//! HPVM API is left. A handle whose level cannot be told statically (it went through memory
//! or a phi) is an error, never a guess.

use inkwell::builder::Builder;
use inkwell::values::{AsValueRef, BasicValue, FunctionValue, InstructionOpcode, InstructionValue, IntValue};
use std::collections::HashMap;

/// The value of each query at the levels a caller knows: `id[level][dim]` and
/// `count[level][dim]` (level 0 is the leaf, dims are x, y, z). Levels above the last are
/// single instances: id 0, count 1.
pub struct Levels<'ctx> {
    pub id: Vec<[IntValue<'ctx>; 3]>,
    pub count: Vec<[IntValue<'ctx>; 3]>,
}

/// What of its place `f` asks (an instance query, in words), when it asks anything: only a
/// function inlined into a leaf's code can be told.
pub fn asks_where(f: FunctionValue<'_>) -> Option<String> {
    f.get_basic_block_iter().flat_map(|bb| bb.get_instructions()).find_map(|inst| {
        let callee = inkwell::values::CallSiteValue::try_from(inst).ok()?.get_called_fn_value()?;
        let name = callee.get_name().to_string_lossy().into_owned();
        let asks = name == "__hpvm__getNode"
            || name == "__hpvm__getParentNode"
            || name.starts_with("__hpvm__getNodeInstanceID_")
            || name.starts_with("__hpvm__getNumNodeInstances_");
        asks.then(|| "where it runs (a thread or block index or count)".to_string())
    })
}

/// Replaces, in `f`, every instance query by its level's value from `levels` and removes the
/// node handles. Other calls are left as they are. Errors say why a handle could not be
/// resolved, in words for the user.
pub fn resolve_queries<'ctx>(b: &Builder<'ctx>, f: FunctionValue<'ctx>, levels: &Levels<'ctx>) -> Result<(), String> {
    let Some(i64t) = levels.id.first().map(|l| l[0].get_type()) else {
        return Err("no levels to resolve node handles to".into());
    };
    let mut level: HashMap<usize, usize> = HashMap::new();
    let mut handles: Vec<InstructionValue> = Vec::new();
    let mut replace: Vec<(InstructionValue, inkwell::values::BasicValueEnum)> = Vec::new();
    let insts: Vec<InstructionValue> = f.get_basic_block_iter().flat_map(|bb| bb.get_instructions()).collect();
    for inst in insts {
        if inst.get_opcode() != InstructionOpcode::Call {
            continue;
        }
        let Some(callee) = inkwell::values::CallSiteValue::try_from(inst).ok().and_then(|c| c.get_called_fn_value())
        else {
            continue;
        };
        let name = callee.get_name().to_string_lossy().into_owned();
        let handle_level = |level: &HashMap<usize, usize>| -> Result<usize, String> {
            let h = inst.get_operand(0).and_then(|o| o.value()).ok_or("a query without a node handle")?;
            level.get(&(h.as_value_ref() as usize)).copied().ok_or_else(|| {
                "a node handle reaches a query through memory or control flow, so its level is unknown".to_string()
            })
        };
        match name.as_str() {
            "__hpvm__getNode" => {
                level.insert(inst.as_value_ref() as usize, 0);
                handles.push(inst);
            }
            "__hpvm__getParentNode" => {
                let l = handle_level(&level)?;
                level.insert(inst.as_value_ref() as usize, l + 1);
                handles.push(inst);
            }
            q if q.starts_with("__hpvm__getNodeInstanceID_") || q.starts_with("__hpvm__getNumNodeInstances_") => {
                let l = handle_level(&level)?;
                let d = match q.as_bytes()[q.len() - 1] {
                    b'x' => 0,
                    b'y' => 1,
                    _ => 2,
                };
                let v = if q.contains("InstanceID") {
                    levels.id.get(l).map_or(i64t.const_zero(), |ids| ids[d])
                } else {
                    levels.count.get(l).map_or(i64t.const_int(1, false), |counts| counts[d])
                };
                b.position_before(&inst);
                let v = match callee.get_type().get_return_type() {
                    Some(inkwell::types::BasicTypeEnum::IntType(t))
                        if t.get_bit_width() < v.get_type().get_bit_width() =>
                    {
                        b.build_int_truncate(v, t, "narrow").map_err(|e| e.to_string())?
                    }
                    _ => v,
                };
                replace.push((inst, v.as_basic_value_enum()));
            }
            _ => {}
        }
    }
    for (inst, v) in replace {
        // Through the C API: `v` may be an argument or a constant, which inkwell's
        // instruction-to-instruction replacement does not take.
        // SAFETY: both values belong to this module; every use is replaced before the erase.
        unsafe { llvm_sys::core::LLVMReplaceAllUsesWith(inst.as_value_ref(), v.as_value_ref()) };
        inst.erase_from_basic_block();
    }
    for h in handles.into_iter().rev() {
        if h.get_first_use().is_some() {
            return Err("a node handle is used other than by queries (stored or passed on)".into());
        }
        h.erase_from_basic_block();
    }
    Ok(())
}
