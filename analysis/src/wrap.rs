//! Loop wrapping (the Mekong thesis's section 3.2): a leaf's body runs once per instance, so
//! on its own it has no loops over the instances and Polly would see one instance with
//! unknown ids. The wrapper calls the leaf inside a loop nest over every instance, with each
//! id query resolved to a loop counter, so that Polly's statement domains range over the
//! instances and the access relations become functions of them.
//!
//! Levels are those a GPU launch gives (see `hpvm_core::plan`): a leaf that is the thread
//! block of an internal node loops over blocks (outer) and threads (inner), and its global
//! coordinate is `block × block size + thread`; any other leaf loops over its own instances.
//! Loop headers are named `hpvm.instance.<b|t><d>` so the Polly shim can say which statement
//! dimension is which loop.
//!
//! A block size known only at the launch makes `block × block size` a product of two unknowns,
//! which no polyhedral model holds. Such a dimension gets no block loop: the wrapper describes
//! ONE block, whose id, size and first coordinate (`block × block size`, the mekong-cuda
//! "block offset") are the parameters `bid<d>`, `bs<d>` and `boff<d>`; the thread loop runs to
//! `bs<d>`, and [`crate::offsets`] turns each product of the id and the size into the offset.
//! The global coordinate is then `boff<d> + thread`, affine; the runtime, which knows the size,
//! ties the three together and ranges them over a partition's blocks (`dashdb::RuntimeBlock`).

use hpvm_core::expr::Expr;
use hpvm_core::graph::{Graph, NodeId};
use hpvm_core::handles::{resolve_queries, Levels};
use inkwell::builder::Builder;
use inkwell::module::{Linkage, Module};
use inkwell::values::{BasicMetadataValueEnum, FunctionValue, IntValue};

/// How a node's instances become global coordinates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Coords {
    /// The leaf's own instance ids (`gx`, `gy`, `gz`: its instance counts).
    Instances,
    /// `block × block size + thread`: the leaf's instances are the threads of one block, its
    /// parent's instances the blocks (`gx`...: the number of blocks). Per dimension the block
    /// size, `None` where it is known only at the launch (see the module docs).
    Blocks { block: Vec<Option<i64>> },
}

/// A wrapper function built for one leaf.
pub struct Wrapper<'ctx> {
    pub function: FunctionValue<'ctx>,
    pub coords: Coords,
    /// The number of global coordinates (`I[x]`, `I[x, y]`...).
    pub dims: usize,
    /// Wrapper parameter names, in order: the leaf's parameters (sanitized and unique), then
    /// the grid parameters.
    pub params: Vec<String>,
    /// The leaf's integer parameters narrower than 64 bits, by wrapper name, with their
    /// width: the wrapper takes each as `i64` and truncates it for the call (see [`wrap`]).
    pub narrowed: Vec<(String, u32)>,
    /// Loop header names of the wrapper loops, outermost first, with what each one is:
    /// `(level, dim)`, level 1 for blocks, 0 for threads or instances.
    pub loops: Vec<(String, usize, usize)>,
    /// What each query of the leaf becomes.
    levels: Levels<'ctx>,
}

/// Names the analysis gives the grid: instance or block counts, then the parent's ids and
/// counts (a leaf that is not a thread block may read its parent's position).
pub const GRID_PARAMS: [&str; 3] = ["gx", "gy", "gz"];
const PARENT_IDS: [&str; 3] = ["px", "py", "pz"];
const PARENT_COUNTS: [&str; 3] = ["pnx", "pny", "pnz"];
pub const COORD_NAMES: [&str; 3] = ["x", "y", "z"];
/// Parameters of one block, per dimension, for block sizes known only at the launch: the
/// block size, the block id and their product, the block offset.
pub const BLOCK_SIZES: [&str; 3] = ["bsx", "bsy", "bsz"];
pub const BLOCK_IDS: [&str; 3] = ["bidx", "bidy", "bidz"];
pub const BLOCK_OFFSETS: [&str; 3] = ["boffx", "boffy", "boffz"];

/// A C identifier turned into one ISL accepts as a parameter, distinct from `taken`.
fn isl_name(name: &str, index: usize, taken: &[String]) -> String {
    let mut s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s = format!("arg{index}");
    }
    // ISL keywords, and names the analysis gives to grid parameters and coordinates.
    const RESERVED: [&str; 20] = [
        "gx", "gy", "gz", "px", "py", "pz", "pnx", "pny", "pnz", "x", "y", "z", "and", "or", "not", "exists", "mod",
        "floor", "ceil", "min",
    ];
    let block_param = |s: &str| BLOCK_SIZES.contains(&s) || BLOCK_IDS.contains(&s) || BLOCK_OFFSETS.contains(&s);
    // Polly names the parameters it makes of values without a name (a product of two
    // scalars, a loaded invariant) `p_<n>`: a kernel parameter of that name (the fields of a
    // struct `p` passed by value are `p_0`, `p_1`...) would be taken for one of them, and the
    // runtime would give it the field's value. Seen in HeCBench dpid: a write map whose `p_7`
    // stood for `blockIdx.y * p.oWidth`.
    let pollys = |s: &str| s.strip_prefix("p_").is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
    while RESERVED.contains(&s.as_str())
        || block_param(&s)
        || pollys(&s)
        || s == "max"
        || s == "I"
        || taken.contains(&s)
    {
        s.push('_');
    }
    s
}

/// Builds the wrapper of `leaf` in `m` and resolves its node queries. `Err` says, for the
/// user, why the leaf's instances cannot be given affine coordinates.
pub fn wrap<'ctx>(
    m: &Module<'ctx>,
    b: &Builder<'ctx>,
    graph: &Graph,
    leaf: NodeId,
    blocks_of: Option<NodeId>,
) -> Result<Wrapper<'ctx>, String> {
    let ctx = m.get_context();
    let i64t = ctx.i64_type();
    let node = &graph.nodes[leaf];
    let lf = m.get_function(&node.name).ok_or_else(|| format!("no function {} in the module", node.name))?;

    let coords = match blocks_of {
        Some(_) => {
            let block = node
                .counts
                .iter()
                .map(|c| match c {
                    Expr::Const(v) if *v > 0 => Some(*v),
                    _ => None,
                })
                .collect();
            Coords::Blocks { block }
        }
        None => Coords::Instances,
    };
    let dims = match blocks_of {
        Some(p) => (node.dims as usize).max(graph.nodes[p].dims as usize),
        None => node.dims as usize,
    };

    let mut params: Vec<String> = Vec::new();
    for (i, p) in node.params.iter().enumerate() {
        let name = isl_name(&p.name, i, &params);
        params.push(name);
    }
    // An `int w` parameter reaches Polly as `sext i32 %w` wherever it scales an index, and
    // Polly delinearizes only by sizes that are plain parameters: `(h - 1) * w` of two
    // extended `int`s becomes an opaque product and the array stays one-dimensional. So the
    // wrapper takes every narrow integer parameter as `i64`, the value the runtime reads
    // (sign-extended, `runtime::desc`), and truncates it for the leaf; the widening turns
    // `sext (trunc w)` back into `w` (`crate::widen`).
    let mut narrowed: Vec<(String, u32)> = Vec::new();
    let mut types: Vec<inkwell::types::BasicMetadataTypeEnum> = Vec::new();
    for (i, p) in lf.get_params().iter().enumerate() {
        match p.get_type() {
            inkwell::types::BasicTypeEnum::IntType(t) if (8..64).contains(&t.get_bit_width()) => {
                narrowed.push((params[i].clone(), t.get_bit_width()));
                types.push(i64t.into());
            }
            t => types.push(t.into()),
        }
    }
    let grid_names: Vec<&str> = GRID_PARAMS
        .iter()
        .chain(&PARENT_IDS)
        .chain(&PARENT_COUNTS)
        .chain(&BLOCK_SIZES)
        .chain(&BLOCK_IDS)
        .chain(&BLOCK_OFFSETS)
        .copied()
        .collect();
    for n in &grid_names {
        params.push(n.to_string());
        types.push(i64t.into());
    }
    let name = format!("hpvm.analysis.{}", node.name);
    let f = m.add_function(&name, ctx.void_type().fn_type(&types, false), Some(Linkage::External));
    for (i, p) in f.get_param_iter().enumerate() {
        p.set_name(&params[i]);
    }
    let n_leaf = lf.count_params() as usize;
    let grid_param = |k: usize| f.get_nth_param((n_leaf + k) as u32).expect("grid parameter").into_int_value();
    let gx: Vec<IntValue> = (0..3).map(grid_param).collect();
    let pid: Vec<IntValue> = (3..6).map(grid_param).collect();
    let pcount: Vec<IntValue> = (6..9).map(grid_param).collect();
    let block_size: Vec<IntValue> = (9..12).map(grid_param).collect();
    let block_id: Vec<IntValue> = (12..15).map(grid_param).collect();

    // The loop nest: blocks (outer) then threads, z outermost within each.
    let one = i64t.const_int(1, false);
    let zero = i64t.const_zero();
    let mut bounds: Vec<(String, usize, usize, IntValue)> = Vec::new();
    match (&coords, blocks_of) {
        (Coords::Blocks { block }, Some(p)) => {
            // A dimension whose block size is known only at the launch has no block loop: the
            // wrapper is one block of it.
            for d in (0..graph.nodes[p].dims as usize).rev() {
                if block.get(d).is_none_or(|b| b.is_some()) {
                    bounds.push((format!("hpvm.instance.b{d}"), 1, d, gx[d]));
                }
            }
            for d in (0..block.len()).rev() {
                let n = block[d].map_or(block_size[d], |b| i64t.const_int(b as u64, false));
                bounds.push((format!("hpvm.instance.t{d}"), 0, d, n));
            }
        }
        _ => {
            for d in (0..dims).rev() {
                bounds.push((format!("hpvm.instance.t{d}"), 0, d, gx[d]));
            }
        }
    }

    let entry = ctx.append_basic_block(f, "entry");
    b.position_at_end(entry);
    let mut args: Vec<BasicMetadataValueEnum> = Vec::new();
    for (i, p) in lf.get_params().iter().enumerate() {
        let wide = f.get_nth_param(i as u32).expect("leaf parameter");
        args.push(match p.get_type() {
            inkwell::types::BasicTypeEnum::IntType(t) if wide.get_type() != p.get_type() => {
                e(b.build_int_truncate(wide.into_int_value(), t, &format!("{}.narrow", params[i])))?.into()
            }
            _ => wide.into(),
        });
    }
    let mut open: Vec<(
        inkwell::basic_block::BasicBlock,
        inkwell::basic_block::BasicBlock,
        inkwell::values::PhiValue,
        IntValue,
    )> = Vec::new();
    let mut ivs: Vec<(usize, usize, IntValue)> = Vec::new();
    for (tag, level, d, n) in &bounds {
        let pre = b.get_insert_block().expect("positioned");
        let header = ctx.append_basic_block(f, tag);
        let exit = ctx.append_basic_block(f, &format!("{tag}.exit"));
        let any = e(b.build_int_compare(inkwell::IntPredicate::SGT, *n, zero, "any"))?;
        e(b.build_conditional_branch(any, header, exit))?;
        b.position_at_end(header);
        let phi = e(b.build_phi(i64t, &format!("iv.{}{d}", if *level == 1 { 'b' } else { 't' })))?;
        phi.add_incoming(&[(&zero, pre)]);
        ivs.push((*level, *d, phi.as_basic_value().into_int_value()));
        open.push((header, exit, phi, *n));
    }

    // Level values: loops where there are loops, parameters above them.
    let iv = |level: usize, d: usize| ivs.iter().find(|(l, dd, _)| *l == level && *dd == d).map(|t| t.2);
    let levels = match &coords {
        Coords::Blocks { block } => Levels {
            id: vec![
                std::array::from_fn(|d| iv(0, d).unwrap_or(zero)),
                std::array::from_fn(|d| match block.get(d) {
                    Some(None) => block_id[d],
                    _ => iv(1, d).unwrap_or(zero),
                }),
                [pid[0], pid[1], pid[2]],
            ],
            count: vec![
                std::array::from_fn(|d| match block.get(d) {
                    Some(Some(v)) => i64t.const_int(*v as u64, false),
                    Some(None) => block_size[d],
                    None => one,
                }),
                std::array::from_fn(|d| {
                    if d < graph.nodes[blocks_of.expect("blocks")].dims as usize {
                        gx[d]
                    } else {
                        one
                    }
                }),
                [pcount[0], pcount[1], pcount[2]],
            ],
        },
        Coords::Instances => Levels {
            id: vec![std::array::from_fn(|d| iv(0, d).unwrap_or(zero)), [pid[0], pid[1], pid[2]]],
            count: vec![std::array::from_fn(|d| if d < dims { gx[d] } else { one }), [pcount[0], pcount[1], pcount[2]]],
        },
    };
    e(b.build_call(lf, &args, ""))?;
    for (header, exit, phi, n) in open.into_iter().rev() {
        let latch = b.get_insert_block().expect("positioned");
        let iv = phi.as_basic_value().into_int_value();
        let next = e(b.build_int_nsw_add(iv, one, "iv.next"))?;
        let more = e(b.build_int_compare(inkwell::IntPredicate::SLT, next, n, "more"))?;
        e(b.build_conditional_branch(more, header, exit))?;
        phi.add_incoming(&[(&next, latch)]);
        b.position_at_end(exit);
    }
    e(b.build_return(None))?;
    let loops = bounds.iter().map(|(tag, level, d, _)| (tag.clone(), *level, *d)).collect();
    Ok(Wrapper { function: f, coords, dims, params, narrowed, loops, levels })
}

impl<'ctx> Wrapper<'ctx> {
    /// The exclusive upper bound of the instance loop counter named `counter` (`iv.t0`...), as
    /// an ISL expression: a number or a parameter.
    pub fn counter_bound(&self, counter: &str) -> Option<String> {
        let (level, d) = match counter.strip_prefix("iv.")?.as_bytes() {
            [b't', d] => (0, (d - b'0') as usize),
            [b'b', d] => (1, (d - b'0') as usize),
            _ => return None,
        };
        if d > 2 {
            return None;
        }
        match (&self.coords, level) {
            (Coords::Blocks { block }, 0) => {
                Some(block.get(d).copied()?.map_or(BLOCK_SIZES[d].to_string(), |b| b.to_string()))
            }
            _ => Some(GRID_PARAMS[d].to_string()),
        }
    }

    /// The counters of the loops over a thread block's threads (`iv.t0`...) in `f`, this
    /// wrapper or a copy of it, for a leaf that is a thread block (none for a leaf over its own
    /// instances, whose counters are global coordinates).
    pub fn thread_counters(&self, f: FunctionValue<'_>) -> Vec<llvm_sys::prelude::LLVMValueRef> {
        use inkwell::values::AsValueRef;
        if !matches!(self.coords, Coords::Blocks { .. }) {
            return Vec::new();
        }
        let mut out = Vec::new();
        for bb in f.get_basic_blocks() {
            for i in bb.get_instructions() {
                let named = i.get_name().is_some_and(|n| matches!(n.to_bytes(), b"iv.t0" | b"iv.t1" | b"iv.t2"));
                if named && i.get_opcode() == inkwell::values::InstructionOpcode::Phi {
                    out.push(i.as_value_ref());
                }
            }
        }
        out
    }

    /// Builds `values` into the wrapper: each integer parameter named there becomes that
    /// constant (for `hpvm-mgpu specialize`). A run-time block size may be fixed too (then
    /// `block id × size` is affine in the id); the block ids and offsets stay parameters: they
    /// range over a partition's blocks. Called once every query is resolved, so no later use
    /// refers to the parameter again.
    pub fn fix(&self, values: &[(String, i64)]) {
        let ranged = |n: &str| BLOCK_IDS.contains(&n) || BLOCK_OFFSETS.contains(&n);
        for (i, name) in self.params.iter().enumerate() {
            let Some((_, v)) = values.iter().find(|(n, _)| n == name && !ranged(n)) else { continue };
            let Some(inkwell::values::BasicValueEnum::IntValue(p)) = self.function.get_nth_param(i as u32) else {
                continue;
            };
            let c = p.get_type().const_int(*v as u64, true);
            p.replace_all_uses_with(c);
        }
    }

    /// The grid dimensions whose block size is known only at the launch.
    pub fn runtime_blocks(&self) -> Vec<usize> {
        match &self.coords {
            Coords::Blocks { block } => (0..block.len()).filter(|&d| block[d].is_none()).collect(),
            Coords::Instances => vec![],
        }
    }

    /// Turns `block id × block size` into the block offset in the dimensions whose block size
    /// is known only at the launch (see [`crate::offsets`]); after the leaf is inlined and its
    /// values are in registers.
    pub fn rewrite_block_offsets(&self) {
        let param = |name: &str| {
            let i = self.params.iter().position(|p| p == name).expect("block parameter");
            self.function.get_nth_param(i as u32).expect("block parameter").into_int_value()
        };
        let dims: Vec<crate::offsets::BlockParams> = self
            .runtime_blocks()
            .into_iter()
            .map(|d| crate::offsets::BlockParams {
                id: param(BLOCK_IDS[d]),
                size: param(BLOCK_SIZES[d]),
                offset: param(BLOCK_OFFSETS[d]),
            })
            .collect();
        if !dims.is_empty() {
            crate::offsets::rewrite(self.function, &dims);
        }
    }

    /// Resolves the node queries, once the leaf is inlined into the wrapper.
    pub fn resolve(&self, b: &Builder<'ctx>) -> Result<(), String> {
        resolve_queries(b, self.function, &self.levels)
    }
}

fn e<T>(r: Result<T, inkwell::builder::BuilderError>) -> Result<T, String> {
    r.map_err(|e| e.to_string())
}
