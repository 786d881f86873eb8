//! A device-side `assert` that failed on a GPU. There CUDA's kernel traps, the driver prints
//! the assertion's line, and the context is unusable: the call that meets the fault (a
//! synchronization, a copy) and every runtime call after it return `cudaErrorAssert`, and
//! the program goes on to check that code, as NVIDIA's simpleAssert does. The runtime
//! meets the fault deep inside its own work (waiting for the GPUs, copying back), where
//! errors end the program ([`crate::fatal`]); this module turns that end into the API call's
//! error instead.
//!
//! Invariants:
//! - [`asserted`] holds once a GPU reported an assertion (the CUDA device notes it), and never
//!   cleared: the context stays unusable, and every API call through [`shield`] returns
//!   `cudaErrorAssert` without doing anything;
//! - [`crate::fatal`] unwinds ([`unwind_if_asserted`]) only on a thread inside [`shield`],
//!   whose frame catches it: between the two are only the runtime's Rust frames (the
//!   compiled program's launchers, which are C frames, are outside any shield);
//! - once asserted, the exit handlers do no device work ([`crate::FAILED`]).
//!
//! Other kernel faults (an illegal address) still end the program with the runtime's message
//! naming the GPU: nothing printed them yet, and a program rarely checks for them. A failed
//! `assert` on simulated devices ends the program with CUDA's line for it
//! (`printf::__assertfail`): a CPU thread cannot be made to stop where a GPU thread traps.

use super::{ret, Error};
use std::cell::Cell;

/// `cudaErrorAssert`.
pub const ASSERT: Error = 710;

thread_local! {
    /// How many [`shield`]s this thread is inside.
    static SHIELDS: Cell<u32> = const { Cell::new(0) };
}

/// The unwinding payload that carries the fault to the nearest [`shield`].
struct Asserted;

/// Whether a GPU reported a failed assertion (the devices note it where the driver says so).
pub fn asserted() -> bool {
    crate::devices::cuda::asserted()
}

/// What an API call returns once the context is unusable.
pub(crate) trait Failed {
    fn failed() -> Self;
}

impl Failed for Error {
    fn failed() -> Error {
        ret(ASSERT)
    }
}

/// Runs the API call `f`, which returns `cudaErrorAssert` instead where a GPU reported a
/// failed assertion before it or while it ran.
pub(crate) fn shield<R: Failed>(f: impl FnOnce() -> R) -> R {
    if asserted() {
        return R::failed();
    }
    SHIELDS.with(|s| s.set(s.get() + 1));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    SHIELDS.with(|s| s.set(s.get() - 1));
    match r {
        Ok(r) => r,
        Err(payload) if payload.is::<Asserted>() => R::failed(),
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

/// Called by [`crate::fatal`]: where the error is a GPU's failed assertion and this thread
/// is inside an API call, leaves the runtime's work for that call, which returns
/// `cudaErrorAssert`. Otherwise returns, and the program ends.
pub(crate) fn unwind_if_asserted() {
    if asserted() && SHIELDS.with(Cell::get) > 0 {
        std::panic::resume_unwind(Box::new(Asserted));
    }
}
