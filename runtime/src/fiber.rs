//! Barriers on one thread: each instance of a parent instance runs as a fiber (a stack of its
//! own); `__hpvm__barrier` switches back to a scheduler that resumes every instance in turn.
//! Round `r` runs each instance from its barrier `r - 1` to its barrier `r`, which is exactly
//! the barrier's meaning, at the cost of a function call per switch instead of a thread
//! wake-up. Blocks still run in parallel: each pool thread schedules its own fibers.
//!
//! Stacks and switches come from `corosensei` (guard pages, x86-64, AArch64, RISC-V and more);
//! where it has no support [`supported`] is false and the engine uses one thread per instance.
//!
//! Compiled code keeps its instance context in thread-local variables; the `__hpvm__barrier`
//! body the compiler emits saves them before the runtime call and restores them after, so
//! fibers sharing a thread never see each other's context.

/// Whether this target has fibers.
pub const fn supported() -> bool {
    cfg!(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64"))
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64"))]
mod imp {
    use corosensei::stack::DefaultStack;
    use corosensei::{Coroutine, CoroutineResult, Yielder};
    use std::cell::{Cell, RefCell};

    const STACK_SIZE: usize = 256 * 1024;
    /// Stacks kept per thread for the next parent instance.
    const POOL_MAX: usize = 1024;

    type Fiber = Coroutine<(), (), (), DefaultStack>;

    thread_local! {
        static STACKS: RefCell<Vec<DefaultStack>> = const { RefCell::new(Vec::new()) };
        /// The running fiber's way back to the scheduler (null outside fibers).
        static YIELDER: Cell<*const Yielder<(), ()>> = const { Cell::new(std::ptr::null()) };
    }

    /// Runs `task(0..n)` as fibers of this thread, switching at every barrier.
    pub fn run(n: usize, task: &(dyn Fn(usize) + Sync)) {
        let mut stacks = STACKS.with(|s| std::mem::take(&mut *s.borrow_mut()));
        // SAFETY: the fibers' closures outlive this call only as dead values: every fiber
        // has returned (or the process has aborted) before `run` returns.
        let task: &'static (dyn Fn(usize) + Sync) = unsafe { std::mem::transmute(task) };
        let mut fibers: Vec<Option<Fiber>> = (0..n)
            .map(|i| {
                let stack = stacks
                    .pop()
                    .map_or_else(|| DefaultStack::new(STACK_SIZE), Ok)
                    .unwrap_or_else(|e| crate::fatal(&format!("cannot allocate a stack for a barrier instance: {e}")));
                Some(Coroutine::with_stack(stack, move |y: &Yielder<(), ()>, ()| {
                    YIELDER.with(|c| c.set(y));
                    task(i)
                }))
            })
            .collect();
        let outer = YIELDER.with(|c| c.get());
        let mut live = n;
        while live > 0 {
            for slot in fibers.iter_mut() {
                let Some(fiber) = slot else { continue };
                let resumed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fiber.resume(())));
                match resumed {
                    Ok(CoroutineResult::Yield(())) => {}
                    Ok(CoroutineResult::Return(())) => {
                        live -= 1;
                        let done = slot.take().expect("a live fiber");
                        if stacks.len() < POOL_MAX {
                            stacks.push(done.into_stack());
                        }
                    }
                    Err(_) => {
                        eprintln!("hpvm-mgpu runtime: internal error in a barrier instance");
                        std::process::abort();
                    }
                }
            }
        }
        YIELDER.with(|c| c.set(outer));
        STACKS.with(|s| *s.borrow_mut() = stacks);
    }

    /// In a fiber: back to the scheduler until every instance reached the barrier. Returns
    /// false outside fibers.
    pub fn barrier() -> bool {
        let y = YIELDER.with(|c| c.get());
        if y.is_null() {
            return false;
        }
        // SAFETY: set by this fiber's body on this thread; the yielder lives on the fiber's
        // stack, which is suspended here, not freed.
        unsafe { (*y).suspend(()) };
        // Other fibers ran meanwhile and set their own: this one's is current again.
        YIELDER.with(|c| c.set(y));
        true
    }
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64"))]
pub use imp::{barrier, run};

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64")))]
pub fn run(_n: usize, _task: &(dyn Fn(usize) + Sync)) {
    unreachable!("fibers are not supported on this target")
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64")))]
pub fn barrier() -> bool {
    false
}

#[cfg(all(test, any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64")))]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    #[test]
    fn every_instance_reaches_each_barrier_before_any_passes_it() {
        let n = 64;
        let log = Mutex::new(Vec::new());
        let arrived = AtomicUsize::new(0);
        super::run(n, &|i| {
            for round in 0..3 {
                log.lock().unwrap().push((round, i));
                arrived.fetch_add(1, Ordering::SeqCst);
                super::barrier();
                // Everyone arrived at this round's barrier before anyone continued.
                assert!(arrived.load(Ordering::SeqCst) >= (round + 1) * n);
            }
        });
        let log = log.into_inner().unwrap();
        assert_eq!(log.len(), 3 * n);
        // Rounds never interleave.
        assert!(log.windows(2).all(|w| w[0].0 <= w[1].0));
        assert!(!super::barrier(), "no fibers outside run");
    }

    #[test]
    fn deep_stacks_and_floating_point_state_survive_switches() {
        fn depth(k: u32) -> f64 {
            let pad = [k as f64; 64];
            if k == 0 {
                super::barrier();
                pad[3]
            } else {
                depth(k - 1) + pad[7] * 0.5
            }
        }
        let sums = Mutex::new(Vec::new());
        super::run(8, &|i| {
            // Computed before taking the lock: the barrier inside switches fibers.
            let v = depth(100 + i as u32);
            sums.lock().unwrap().push((i, v));
        });
        let mut s = sums.into_inner().unwrap();
        s.sort_by_key(|p| p.0);
        for (i, v) in s {
            let k = 100 + i as u32;
            let want: f64 = (1..=k).map(|j| j as f64 * 0.5).sum();
            assert_eq!(v, want);
        }
    }
}
