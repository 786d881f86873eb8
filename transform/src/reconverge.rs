//! Where a warp's lanes meet again after a branch, for warp-synchronous leaves on the CPU.
//!
//! Warp-synchronous code counts on a warp's lanes making each shared-memory access together
//! (`crate::warp::lockstep`). The fibers that run a block's threads keep them together by
//! giving every lane one access per pass of the scheduler; that holds only while every lane
//! makes the same accesses. A branch that some lanes take (`if (lane & 1) s[i] = ...`, a loop
//! some lanes leave early) puts them out of step for good, where a GPU's warp waits for its
//! lanes at the branch's immediate post-dominator and goes on converged. So at each such
//! point the lanes meet again ([`insert`]: a call of `hpvm_rt_converge(site)`): a lane
//! waits there until every other lane of its warp waits too (there, at another meeting point,
//! a barrier, a warp operation) or has returned; then the lanes at the point that comes first
//! in the program's order go on (`hpvm_runtime::fiber::converge`).
//!
//! Invariants: a meeting point is the immediate post-dominator of a block with two or more
//! successors, never the function's virtual exit (lanes that return count as arrived); its
//! site number is the block's place in a reverse postorder from the entry, so a loop's exit
//! comes after every block of the loop; each block gets at most one meeting point, after its
//! PHIs, with the instance context saved around the call.

use crate::intrinsics::SavedContext;
use crate::Result;
use inkwell::basic_block::BasicBlock;
use inkwell::module::Module;
use inkwell::values::{FunctionValue, InstructionOpcode};
use std::collections::HashMap;

/// The control-flow graph of a function: blocks in a reverse postorder from the entry (only
/// those the entry reaches), and each one's successors by that order.
struct Cfg<'ctx> {
    blocks: Vec<BasicBlock<'ctx>>,
    succs: Vec<Vec<usize>>,
}

impl<'ctx> Cfg<'ctx> {
    fn of(f: FunctionValue<'ctx>) -> Option<Cfg<'ctx>> {
        let entry = f.get_first_basic_block()?;
        let successors = |bb: BasicBlock<'ctx>| -> Vec<BasicBlock<'ctx>> {
            let Some(term) = bb.get_terminator() else { return Vec::new() };
            use inkwell::values::AsValueRef;
            // SAFETY: the terminator of one of `f`'s blocks; its successors are blocks of `f`.
            unsafe {
                let t = term.as_value_ref();
                (0..llvm_sys::core::LLVMGetNumSuccessors(t))
                    .map(|i| BasicBlock::new(llvm_sys::core::LLVMGetSuccessor(t, i)).expect("a successor block"))
                    .collect()
            }
        };
        // Postorder by an explicit stack: deep kernels must not overflow the compiler's.
        let mut seen: HashMap<BasicBlock<'ctx>, ()> = HashMap::new();
        let mut post = Vec::new();
        let mut stack = vec![(entry, successors(entry), 0usize)];
        seen.insert(entry, ());
        while let Some((bb, next, at)) = stack.last_mut() {
            if let Some(&s) = next.get(*at) {
                *at += 1;
                if seen.insert(s, ()).is_none() {
                    let ss = successors(s);
                    stack.push((s, ss, 0));
                }
            } else {
                post.push(*bb);
                stack.pop();
            }
        }
        post.reverse();
        let index: HashMap<BasicBlock<'ctx>, usize> = post.iter().enumerate().map(|(i, &b)| (b, i)).collect();
        let succs = post.iter().map(|&b| successors(b).iter().map(|s| index[s]).collect()).collect();
        Some(Cfg { blocks: post, succs })
    }

    /// Each block's immediate post-dominator (`None`: the virtual exit, or no path to an
    /// exit), by Cooper, Harvey and Kennedy's iteration over the reversed graph.
    fn immediate_post_dominators(&self) -> Vec<Option<usize>> {
        let n = self.blocks.len();
        let exit = n;
        // The reversed graph: the exit leads to every block without successors, a block to
        // its predecessors.
        let mut preds = vec![Vec::new(); n];
        for (b, ss) in self.succs.iter().enumerate() {
            for &s in ss {
                preds[s].push(b);
            }
        }
        let rsucc = |v: usize| -> Vec<usize> {
            if v == exit {
                (0..n).filter(|&b| self.succs[b].is_empty()).collect()
            } else {
                preds[v].clone()
            }
        };
        // Its postorder from the exit.
        let mut number = vec![usize::MAX; n + 1];
        let mut order = Vec::new();
        let mut visited = vec![false; n + 1];
        visited[exit] = true;
        let mut stack = vec![(exit, rsucc(exit), 0usize)];
        while let Some((v, next, at)) = stack.last_mut() {
            if let Some(&w) = next.get(*at) {
                *at += 1;
                if !visited[w] {
                    visited[w] = true;
                    let ws = rsucc(w);
                    stack.push((w, ws, 0));
                }
            } else {
                number[*v] = order.len();
                order.push(*v);
                stack.pop();
            }
        }
        // In the reversed graph a block's predecessors are its successors (the exit for a
        // block that has none).
        let rpred = |v: usize| -> Vec<usize> {
            if self.succs[v].is_empty() {
                vec![exit]
            } else {
                self.succs[v].clone()
            }
        };
        let mut idom = vec![usize::MAX; n + 1];
        idom[exit] = exit;
        let intersect = |idom: &[usize], mut a: usize, mut b: usize| {
            while a != b {
                while number[a] < number[b] {
                    a = idom[a];
                }
                while number[b] < number[a] {
                    b = idom[b];
                }
            }
            a
        };
        let mut changed = true;
        while changed {
            changed = false;
            for &v in order.iter().rev().filter(|&&v| v != exit) {
                let mut new = usize::MAX;
                for p in rpred(v) {
                    if idom[p] == usize::MAX {
                        continue;
                    }
                    new = if new == usize::MAX { p } else { intersect(&idom, p, new) };
                }
                if new != usize::MAX && idom[v] != new {
                    idom[v] = new;
                    changed = true;
                }
            }
        }
        (0..n).map(|b| Some(idom[b]).filter(|&d| d != exit && d != usize::MAX)).collect()
    }
}

/// The meeting points of `f`'s branches: the blocks (by reverse postorder) that immediately
/// post-dominate a block with two or more successors.
fn meeting_points(cfg: &Cfg<'_>) -> Vec<usize> {
    let ipdom = cfg.immediate_post_dominators();
    let mut points: Vec<usize> = (0..cfg.blocks.len())
        .filter(|&b| {
            let mut ss = cfg.succs[b].clone();
            ss.sort_unstable();
            ss.dedup();
            ss.len() > 1
        })
        .filter_map(|b| ipdom[b])
        .collect();
    points.sort_unstable();
    points.dedup();
    points
}

/// Makes the lanes of each warp meet again after every branch of the leaf function `f`.
pub fn insert(module: &Module<'_>, f: FunctionValue<'_>) -> Result<()> {
    let Some(cfg) = Cfg::of(f) else { return Ok(()) };
    let ctx = module.get_context();
    let b = ctx.create_builder();
    let i64t = ctx.i64_type();
    let converge = module.get_function("hpvm_rt_converge").unwrap_or_else(|| {
        module.add_function("hpvm_rt_converge", ctx.void_type().fn_type(&[i64t.into()], false), None)
    });
    for site in meeting_points(&cfg) {
        let bb = cfg.blocks[site];
        let Some(first) = bb.get_instructions().find(|i| i.get_opcode() != InstructionOpcode::Phi) else { continue };
        b.position_before(&first);
        let saved = SavedContext::save(module, &b)?;
        b.build_call(converge, &[i64t.const_int(site as u64, false).into()], "")?;
        saved.restore(&b)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use inkwell::context::Context;

    fn cfg_of<'ctx>(ctx: &'ctx Context, ir: &str) -> (Module<'ctx>, Vec<String>, Vec<usize>) {
        let buf = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(ir.as_bytes(), "t");
        let m = ctx.create_module_from_ir(buf).expect("valid IR");
        let f = m.get_function("f").expect("f");
        let cfg = Cfg::of(f).expect("blocks");
        let names = cfg.blocks.iter().map(|b| b.get_name().to_str().unwrap().to_string()).collect();
        let points = meeting_points(&cfg);
        (m, names, points)
    }

    /// An `if` inside a loop meets after the `if`; the loop's exit is the latch's meeting
    /// point, and comes after the loop's blocks.
    #[test]
    fn branches_meet_at_their_post_dominators() {
        let ctx = Context::create();
        let ir = r#"
define void @f(i32 %n, i1 %c) {
entry:
  br label %head
head:
  %i = phi i32 [ 0, %entry ], [ %j, %latch ]
  br i1 %c, label %then, label %latch
then:
  br label %latch
latch:
  %j = add i32 %i, 1
  %more = icmp slt i32 %j, %n
  br i1 %more, label %head, label %done
done:
  ret void
}"#;
        let (_m, names, points) = cfg_of(&ctx, ir);
        let named: Vec<&str> = points.iter().map(|&p| names[p].as_str()).collect();
        assert_eq!(named, ["latch", "done"]);
        assert!(points.windows(2).all(|w| w[0] < w[1]));
    }

    /// Branches whose paths end in different returns have no meeting point (returned lanes
    /// count as arrived); a switch meets where its cases join.
    #[test]
    fn returns_meet_nowhere_and_switches_meet_where_cases_join() {
        let ctx = Context::create();
        let ir = r#"
define void @f(i32 %x, i1 %c) {
entry:
  br i1 %c, label %early, label %sw
early:
  ret void
sw:
  switch i32 %x, label %d [ i32 1, label %a
                            i32 2, label %b ]
a:
  br label %join
b:
  br label %join
d:
  br label %join
join:
  ret void
}"#;
        let (_m, names, points) = cfg_of(&ctx, ir);
        let named: Vec<&str> = points.iter().map(|&p| names[p].as_str()).collect();
        assert_eq!(named, ["join"]);
    }
}
