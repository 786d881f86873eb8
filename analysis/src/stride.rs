//! Grid-stride loops: `for (i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i +=
//! blockDim.x * gridDim.x)`, the most common way CUDA kernels are written.
//!
//! The step multiplies two run-time values (the block size and the grid), which no polyhedral
//! model holds. But when the loop's body tells instances apart only through `i`, iteration j
//! of any instance does what the first iteration of instance j would do, and runs exactly when
//! `j < n`. So before Polly sees the wrapper, the loop is cut to its first iteration (the shim,
//! `shim/grid_stride.cpp`, which also checks every condition this needs); the maps then give
//! the accesses of iteration `I[x]`, and the dimension is marked
//! (`dashdb::RuntimeBlock::strided`): instance x runs the iterations x + k × (the launch's
//! instances in that dimension), k >= 0, and the runtime ranges the maps over those.
//!
//! Invariant: a loop is rewritten only when all of these hold, else it is left as written (and
//! its accesses stay beyond the model, so the node does not split):
//! - its counter starts at the global coordinate (`block offset + thread`) of a dimension
//!   whose block size is known only at the launch, and steps by `block size × grid`;
//! - its only exit is its test, `i < bound` (or `<=`) with a bound the loop does not change,
//!   and it is entered under the same test on the first value (a `for` loop);
//! - it is not inside another loop; a kernel may have several (HeCBench mask's one on each way
//!   of a test every thread takes alike), all in one dimension, all rewritten or none;
//! - nothing outside them writes memory other than the instance's own variables, and nothing
//!   outside them reads or branches on the instance's position in that dimension; inside, the
//!   position is used only through the counters; no barrier.
//!
//! Iteration `j` of two loops is one iteration of the maps: both loops' accesses at `j`.
//! Running a partition's blocks over their rounds keeps each thread's order; the runtime runs
//! iterations one per thread only where no iteration's writes meet another's accesses.
//!
//! `HPVM_MGPU_DEBUG_STRIDE=1` prints the candidate counters and why a test did not match.

use inkwell::module::Module;
use std::ffi::{c_char, CStr, CString};

extern "C" {
    fn hpvm_grid_stride(
        module: llvm_sys::prelude::LLVMModuleRef,
        function: *const c_char,
        spec: *const c_char,
    ) -> *mut c_char;
    fn hpvm_grid_stride_free(text: *mut c_char);
}

/// The wrapper's names for one dimension whose block size is known only at the launch.
pub struct DimNames<'a> {
    pub dim: usize,
    pub offset: &'a str,
    pub id: &'a str,
    pub size: &'a str,
    pub grid: &'a str,
    /// The header block of the wrapper's thread loop in this dimension.
    pub thread_loop: &'a str,
}

/// What [`rewrite`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Strided {
    /// The dimension whose grid-stride loops were cut to one iteration.
    pub dims: Vec<u32>,
    /// Grid-stride loops left as written: dimension, why, `file:line`.
    pub refused: Vec<(u32, String, String)>,
}

/// Cuts the grid-stride loop of `function` (a wrapper) to its first iteration where that is
/// exact (see the module docs).
pub fn rewrite(module: &Module<'_>, function: &str, dims: &[DimNames<'_>]) -> Strided {
    let spec: String = dims
        .iter()
        .map(|d| format!("{}\t{}\t{}\t{}\t{}\t{}\n", d.dim, d.offset, d.id, d.size, d.grid, d.thread_loop))
        .collect();
    let (Ok(name), Ok(spec)) = (CString::new(function), CString::new(spec)) else {
        return Strided::default();
    };
    // SAFETY: the module is alive for the call; the shim returns malloc'ed text we free.
    let text = unsafe {
        let p = hpvm_grid_stride(module.as_mut_ptr(), name.as_ptr(), spec.as_ptr());
        if p.is_null() {
            return Strided::default();
        }
        let s = CStr::from_ptr(p).to_string_lossy().into_owned();
        hpvm_grid_stride_free(p);
        s
    };
    parse(&text)
}

fn parse(text: &str) -> Strided {
    let mut s = Strided::default();
    for line in text.lines() {
        match line.split('\t').collect::<Vec<_>>().as_slice() {
            ["strided", d] => s.dims.extend(d.parse::<u32>().ok()),
            ["refused", d, why, loc] => {
                if let Ok(d) = d.parse() {
                    s.refused.push((d, why.to_string(), loc.to_string()));
                }
            }
            _ => {}
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shims_answer_is_read() {
        let s = parse("strided\t0\nrefused\t1\tthe kernel writes memory outside the loop\tk.cu:9\n");
        assert_eq!(s.dims, vec![0]);
        assert_eq!(s.refused, vec![(1, "the kernel writes memory outside the loop".into(), "k.cu:9".into())]);
    }
}
