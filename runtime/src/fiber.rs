//! Barriers on one thread: each instance of a parent instance runs as a fiber (a stack of its
//! own); `__hpvm__barrier` switches back to a scheduler that resumes every instance in turn.
//! Round `r` runs each instance from its barrier `r - 1` to its barrier `r`, which is exactly
//! the barrier's meaning, at the cost of a function call per switch instead of a thread
//! wake-up. Blocks still run in parallel: each pool thread schedules its own fibers.
//!
//! The switch is a dozen instructions of x86-64 assembly (System V: callee-saved registers,
//! MXCSR and the x87 control word). Elsewhere [`supported`] is false and the engine uses one
//! thread per instance instead.
//!
//! Compiled code keeps its instance context in thread-local variables; the `__hpvm__barrier`
//! body the compiler emits saves them before the runtime call and restores them after, so
//! fibers sharing a thread never see each other's context.

/// Whether this target has fibers.
pub const fn supported() -> bool {
    cfg!(target_arch = "x86_64")
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use std::cell::{Cell, RefCell};
    use std::ffi::c_void;

    const STACK_SIZE: usize = 256 * 1024;
    const GUARD: usize = 4096;
    /// Stacks kept per thread for the next parent instance.
    const POOL_MAX: usize = 1024;

    extern "C" {
        fn mmap(addr: *mut c_void, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut c_void;
        fn munmap(addr: *mut c_void, len: usize) -> i32;
        fn mprotect(addr: *mut c_void, len: usize, prot: i32) -> i32;
        /// Saves the running context's stack pointer in `*save` and resumes the one at `to`.
        fn hpvm_fiber_switch(save: *mut *mut u8, to: *mut u8);
        /// Where a new fiber starts: calls `fiber_main(r12)`.
        fn hpvm_fiber_start();
    }

    std::arch::global_asm!(
        ".pushsection .text.hpvm_fiber,\"ax\",@progbits",
        ".globl hpvm_fiber_switch",
        ".hidden hpvm_fiber_switch",
        "hpvm_fiber_switch:",
        "push rbp",
        "push rbx",
        "push r12",
        "push r13",
        "push r14",
        "push r15",
        "sub rsp, 8",
        "stmxcsr [rsp]",
        "fnstcw [rsp + 4]",
        "mov [rdi], rsp",
        "mov rsp, rsi",
        "ldmxcsr [rsp]",
        "fldcw [rsp + 4]",
        "add rsp, 8",
        "pop r15",
        "pop r14",
        "pop r13",
        "pop r12",
        "pop rbx",
        "pop rbp",
        "ret",
        ".globl hpvm_fiber_start",
        ".hidden hpvm_fiber_start",
        "hpvm_fiber_start:",
        "mov rdi, r12",
        "call {main}",
        "ud2",
        ".popsection",
        main = sym fiber_main,
    );

    const PROT_NONE: i32 = 0;
    const PROT_RW: i32 = 3;
    const MAP_PRIVATE_ANON_NORESERVE: i32 = 0x02 | 0x20 | 0x4000;

    struct Stack {
        base: *mut u8,
    }

    impl Stack {
        fn new() -> Stack {
            // SAFETY: an anonymous private mapping; its lowest page becomes the guard.
            unsafe {
                let p = mmap(std::ptr::null_mut(), STACK_SIZE + GUARD, PROT_RW, MAP_PRIVATE_ANON_NORESERVE, -1, 0);
                if p as isize == -1 {
                    crate::fatal("cannot allocate a stack for a barrier instance");
                }
                mprotect(p, GUARD, PROT_NONE);
                Stack { base: p as *mut u8 }
            }
        }

        fn top(&self) -> *mut u8 {
            // Mappings are page aligned, so the top is 16-byte aligned.
            unsafe { self.base.add(STACK_SIZE + GUARD) }
        }
    }

    impl Drop for Stack {
        fn drop(&mut self) {
            unsafe { munmap(self.base as *mut c_void, STACK_SIZE + GUARD) };
        }
    }

    struct Fiber {
        sp: *mut u8,
        done: bool,
        stack: Stack,
    }

    struct Scheduler<'t> {
        sp: *mut u8,
        fibers: Vec<Fiber>,
        current: usize,
        task: &'t (dyn Fn(usize) + Sync),
    }

    thread_local! {
        static STACKS: RefCell<Vec<Stack>> = const { RefCell::new(Vec::new()) };
        static ACTIVE: Cell<*mut c_void> = const { Cell::new(std::ptr::null_mut()) };
    }

    extern "C" fn fiber_main(sched: *mut c_void) -> ! {
        let sched = sched as *mut Scheduler<'static>;
        // SAFETY: the scheduler outlives its fibers and only the running fiber touches it.
        let (i, task) = unsafe { ((*sched).current, (*sched).task) };
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task(i))).is_err() {
            eprintln!("hpvm-mgpu runtime: internal error in a barrier instance");
            std::process::abort();
        }
        unsafe {
            let s = &mut *sched;
            s.fibers[i].done = true;
            let save = &raw mut s.fibers[i].sp;
            hpvm_fiber_switch(save, s.sp);
        }
        std::process::abort()
    }

    /// Runs `task(0..n)` as fibers of this thread, switching at every barrier.
    pub fn run(n: usize, task: &(dyn Fn(usize) + Sync)) {
        let mut stacks = STACKS.with(|s| std::mem::take(&mut *s.borrow_mut()));
        // Boxed and reached only through this pointer from here on: the fibers use it too.
        let sched: *mut Scheduler = Box::into_raw(Box::new(Scheduler {
            sp: std::ptr::null_mut(),
            fibers: Vec::with_capacity(n),
            current: 0,
            task,
        }));
        let sched_ptr = sched as *mut c_void;
        for _ in 0..n {
            let stack = stacks.pop().unwrap_or_else(Stack::new);
            // The first switch into the fiber pops: MXCSR/FPU word, r15, r14, r13, r12 (the
            // scheduler, for fiber_main), rbx, rbp, then returns into hpvm_fiber_start.
            let sp = unsafe { stack.top().sub(64) } as *mut u64;
            let mut mxcsr_fpcw = 0u64;
            unsafe {
                std::arch::asm!("stmxcsr [{0}]", "fnstcw [{0} + 4]", in(reg) &mut mxcsr_fpcw as *mut u64);
                let frame = [mxcsr_fpcw, 0, 0, 0, sched_ptr as u64, 0, 0, hpvm_fiber_start as *const () as u64];
                std::ptr::copy_nonoverlapping(frame.as_ptr(), sp, frame.len());
            }
            unsafe { (*sched).fibers.push(Fiber { sp: sp as *mut u8, done: false, stack }) };
        }
        let outer = ACTIVE.with(|a| a.replace(sched_ptr));
        loop {
            let mut running = false;
            for i in 0..n {
                // SAFETY: no fiber runs while the scheduler does; `to` is a context saved by a
                // switch (or prepared above) on a live stack.
                unsafe {
                    let s = &mut *sched;
                    if s.fibers[i].done {
                        continue;
                    }
                    running = true;
                    s.current = i;
                    let to = s.fibers[i].sp;
                    hpvm_fiber_switch(&raw mut s.sp, to);
                }
            }
            if !running {
                break;
            }
        }
        ACTIVE.with(|a| a.set(outer));
        // SAFETY: every fiber has finished; nothing refers to the scheduler any more.
        let sched = unsafe { Box::from_raw(sched) };
        stacks.extend(sched.fibers.into_iter().map(|f| f.stack));
        stacks.truncate(POOL_MAX);
        STACKS.with(|s| *s.borrow_mut() = stacks);
    }

    /// In a fiber: back to the scheduler until every instance reached the barrier. Returns
    /// false outside fibers.
    pub fn barrier() -> bool {
        let sched = ACTIVE.with(|a| a.get()) as *mut Scheduler<'static>;
        if sched.is_null() {
            return false;
        }
        // SAFETY: set by `run` on this thread while its fibers run.
        unsafe {
            let s = &mut *sched;
            let save = &raw mut s.fibers[s.current].sp;
            hpvm_fiber_switch(save, s.sp);
        }
        true
    }
}

#[cfg(target_arch = "x86_64")]
pub use imp::{barrier, run};

#[cfg(not(target_arch = "x86_64"))]
pub fn run(_n: usize, _task: &(dyn Fn(usize) + Sync)) {
    unreachable!("fibers are not supported on this target")
}

#[cfg(not(target_arch = "x86_64"))]
pub fn barrier() -> bool {
    false
}

#[cfg(all(test, target_arch = "x86_64"))]
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
