//! A kernel's parameters, laid out as `cuLaunchKernel` reads them ([`Params`]): what a GPU
//! launch carries, submitted at once ([`super::cuda`]) or held ([`super::held`]).

use std::ffi::c_void;

/// A kernel's parameter values, one after another in one buffer (a launch makes no
/// allocation per parameter): what `cuLaunchKernel` reads through one pointer each.
///
/// Buffers are reused: a dropped `Params` goes back to its thread's pool and the next
/// [`Params::with_capacity`] takes it, so that a loop of launches allocates none.
#[derive(Default)]
pub struct Params {
    bytes: Vec<u8>,
    starts: Vec<usize>,
}

thread_local! {
    /// Dropped parameter buffers, cleared, for the next launch on this thread (as plain
    /// vectors: dropping the pool at the thread's exit must not put them back).
    static POOL: std::cell::RefCell<Vec<(Vec<u8>, Vec<usize>)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Buffers a thread's pool keeps (held launches are at most `held::HOLD_MAX` per GPU).
const POOL_KEPT: usize = 64;

impl Params {
    pub fn with_capacity(params: usize) -> Params {
        let pooled = POOL.try_with(|p| p.borrow_mut().pop()).ok().flatten();
        let mut p = pooled.map_or_else(Params::default, |(bytes, starts)| Params { bytes, starts });
        p.bytes.reserve(params * 8);
        p.starts.reserve(params);
        p
    }

    /// Appends the next parameter's bytes.
    pub fn push(&mut self, value: &[u8]) {
        // Each value starts 8-byte aligned within the buffer, as its type may want.
        self.bytes.resize(self.bytes.len().next_multiple_of(8), 0);
        self.starts.push(self.bytes.len());
        self.bytes.extend_from_slice(value);
    }

    /// Appends 8-byte parameters, one per value.
    pub fn push_words(&mut self, values: &[i64]) {
        self.bytes.resize(self.bytes.len().next_multiple_of(8), 0);
        let at = self.bytes.len();
        self.starts.extend((0..values.len()).map(|i| at + 8 * i));
        self.bytes.extend(values.iter().flat_map(|v| v.to_le_bytes()));
    }

    /// The parameters' bytes, as laid out for the pointers.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Where each parameter starts in [`Params::bytes`].
    pub(crate) fn starts(&self) -> &[usize] {
        &self.starts
    }

    /// Overwrites the parameter bytes at `at` (a parameter's start) with `value`.
    pub(crate) fn set(&mut self, at: usize, value: &[u8]) {
        self.bytes[at..at + value.len()].copy_from_slice(value);
    }

    /// Parameters laid out as `bytes` with `starts` (another's [`Params::bytes`] and
    /// [`Params::starts`]).
    pub(crate) fn copy_of(bytes: &[u8], starts: &[usize]) -> Params {
        let mut p = Params::with_capacity(starts.len());
        p.bytes.extend_from_slice(bytes);
        p.starts.extend_from_slice(starts);
        p
    }

    /// Calls `f` with one pointer per parameter (valid during the call): on the stack for
    /// the parameter counts kernels have, so that a launch allocates nothing for them.
    pub(super) fn with_pointers<R>(&mut self, f: impl FnOnce(&mut [*mut c_void]) -> R) -> R {
        const ON_STACK: usize = 64;
        let base = self.bytes.as_mut_ptr();
        // SAFETY: every start lies within the buffer.
        let at = |i: &usize| unsafe { base.add(*i) } as *mut c_void;
        if self.starts.len() <= ON_STACK {
            let mut ptrs = [std::ptr::null_mut(); ON_STACK];
            for (p, i) in ptrs.iter_mut().zip(&self.starts) {
                *p = at(i);
            }
            f(&mut ptrs[..self.starts.len()])
        } else {
            f(&mut self.starts.iter().map(at).collect::<Vec<_>>())
        }
    }
}

impl Drop for Params {
    fn drop(&mut self) {
        if self.bytes.capacity() == 0 {
            return;
        }
        let (mut bytes, mut starts) = (std::mem::take(&mut self.bytes), std::mem::take(&mut self.starts));
        bytes.clear();
        starts.clear();
        // After the thread's pool is gone (thread exit), the buffers are simply freed.
        let _ = POOL.try_with(|pool| {
            let mut pool = pool.borrow_mut();
            if pool.len() < POOL_KEPT {
                pool.push((bytes, starts));
            }
        });
    }
}
