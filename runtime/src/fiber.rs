//! Barriers and warps on one thread: each instance of a parent instance (a CUDA block's
//! threads) runs as a fiber (a stack of its own); `__hpvm__barrier` and CUDA's warp operations
//! switch back to a scheduler that resumes every instance in turn, at the cost of a function
//! call per switch instead of a thread wake-up. Blocks still run in parallel: each pool thread
//! schedules its own fibers.
//!
//! The barrier counts: an instance waits until every instance still running has arrived
//! (CUDA counts a thread that has returned as arrived), and the last to arrive releases them.
//! A warp operation ([`exchange`]) waits until every lane of its mask still running in its
//! warp (32 consecutive instances, x fastest, as CUDA numbers a block's threads) has given its
//! value to the same operation. Operations are counted per lane and mask: lanes of a subset
//! of the warp may run operations of their own between two of the whole warp's (cooperative
//! groups' tiles wider than a warp reduce their warps' sums in a tile of two or four lanes),
//! and every lane a mask names runs the same sequence of that mask's operations. Values go to
//! slots by the operation's parity within its mask, since no lane can be two of a mask's
//! operations ahead of another lane of that mask. A pass of the scheduler in which no
//! instance arrives, exchanges or returns is a deadlock, and stops the program with a message.
//!
//! Stacks and switches come from `corosensei` (guard pages, x86-64, AArch64, RISC-V and more);
//! where it has no support [`supported`] is false and the engine uses one thread per instance.
//!
//! Compiled code keeps its instance context in thread-local variables; the bodies the compiler
//! emits for `__hpvm__barrier` and the warp operations save them before the runtime call and
//! restore them after, so fibers sharing a thread never see each other's context.

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
        /// The scheduler of the fibers running on this thread (null outside [`run`]).
        static SCHED: Cell<*const Sched> = const { Cell::new(std::ptr::null()) };
    }

    /// What the fibers of one [`run`] share: who runs, who has returned, the block's barrier
    /// and its warps' exchange slots. One thread touches it, so cells suffice.
    struct Sched {
        n: usize,
        /// The instance running now.
        current: Cell<usize>,
        /// Instances that have returned (CUDA counts an exited thread as arrived).
        done: RefCell<Vec<bool>>,
        /// Instances that ended by PTX's `exit`: never resumed, their stacks discarded.
        exited: RefCell<Vec<bool>>,
        live: Cell<usize>,
        /// A counting barrier: arrivals at the current generation, and the generation.
        arrived: Cell<usize>,
        generation: Cell<u64>,
        /// `__syncthreads_count`'s tally: true predicates given at each generation, and
        /// the total, both by the generation's parity (no instance is two generations ahead).
        tally: [Cell<u64>; 2],
        total: [Cell<u64>; 2],
        /// How many arrived at each generation, by parity.
        arrivals: [Cell<u64>; 2],
        /// Per instance, its warp operations by mask: how many it has entered, and the values
        /// it gave, by the operation's parity (an instance is never two of a mask's
        /// operations ahead of another lane of that mask).
        lanes: RefCell<Vec<Vec<MaskOps>>>,
        /// Counts every arrival, warp operation and return: a pass of the scheduler that
        /// changes it not is a deadlock.
        progress: Cell<u64>,
        /// Per instance, what it is suspended in ([`active_mask`] asks who may still come).
        waits: RefCell<Vec<Wait>>,
        /// Per instance, its `__activemask` calls by site: how many it has made.
        visits: RefCell<Vec<Vec<(u64, u64)>>>,
        /// The groups `__activemask` formed and not yet read by all their lanes: warp, site,
        /// visit, the lanes, and how many have yet to read it.
        groups: RefCell<Vec<Group>>,
    }

    /// An `__activemask` group: warp, site, visit, its lanes, and how many have yet to read it.
    type Group = (usize, u64, u64, u32, u32);

    /// What a suspended instance waits for.
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Wait {
        /// Nothing: it runs, or is ready to.
        Not,
        /// The block's barrier of this generation.
        Barrier(u64),
        /// The `g`-th warp operation of `mask`.
        Exchange(u32, u64),
        /// `__activemask` at a site, on its n-th visit there.
        Active(u64, u64),
        /// A spin on a flag: it comes back whenever it is resumed.
        Spin,
        /// The meeting point of a branch's lanes at this site ([`converge`]).
        Converge(u64),
    }

    /// One lane's warp operations under one mask.
    #[derive(Clone, Copy)]
    struct MaskOps {
        mask: u32,
        entered: u64,
        values: [u64; 2],
    }

    /// The operations of `mask` among a lane's (none entered if it never used the mask).
    fn ops_of(lane: &[MaskOps], mask: u32) -> MaskOps {
        lane.iter().find(|o| o.mask == mask).copied().unwrap_or(MaskOps { mask, entered: 0, values: [0; 2] })
    }

    impl Sched {
        fn release_if_all_arrived(&self) {
            if self.arrived.get() > 0 && self.arrived.get() >= self.live.get() {
                let g = self.generation.get();
                let (now, next) = ((g & 1) as usize, ((g + 1) & 1) as usize);
                self.total[now].set(self.tally[now].get());
                self.arrivals[now].set(self.arrived.get() as u64);
                self.tally[next].set(0);
                self.arrived.set(0);
                self.generation.set(g + 1);
            }
        }
    }

    fn suspend() {
        let y = YIELDER.with(|c| c.get());
        // SAFETY: set by this fiber's body on this thread; the yielder lives on the fiber's
        // stack, which is suspended here, not freed.
        unsafe { (*y).suspend(()) };
        // Other fibers ran meanwhile and set their own: this one's is current again.
        YIELDER.with(|c| c.set(y));
    }

    fn sched<'a>() -> Option<&'a Sched> {
        let p = SCHED.with(|c| c.get());
        // SAFETY: set by `run` to its own frame's scheduler for as long as its fibers run,
        // and fibers run only inside `run`.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// Runs `task(0..n)` as fibers of this thread, switching at every barrier and warp
    /// operation.
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
        let sched = Sched {
            n,
            current: Cell::new(0),
            done: RefCell::new(vec![false; n]),
            exited: RefCell::new(vec![false; n]),
            live: Cell::new(n),
            arrived: Cell::new(0),
            generation: Cell::new(0),
            tally: [Cell::new(0), Cell::new(0)],
            total: [Cell::new(0), Cell::new(0)],
            arrivals: [Cell::new(0), Cell::new(0)],
            lanes: RefCell::new(vec![Vec::new(); n]),
            progress: Cell::new(0),
            waits: RefCell::new(vec![Wait::Not; n]),
            visits: RefCell::new(vec![Vec::new(); n]),
            groups: RefCell::new(Vec::new()),
        };
        let outer = YIELDER.with(|c| c.get());
        let outer_sched = SCHED.with(|c| c.replace(&sched));
        let running = crate::crash::running();
        while sched.live.get() > 0 {
            let before = sched.progress.get();
            for (i, slot) in fibers.iter_mut().enumerate() {
                let Some(fiber) = slot else { continue };
                if sched.exited.borrow()[i] {
                    continue;
                }
                sched.current.set(i);
                let resumed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fiber.resume(())));
                match resumed {
                    Ok(CoroutineResult::Yield(())) => {}
                    Ok(CoroutineResult::Return(())) => {
                        sched.done.borrow_mut()[i] = true;
                        sched.live.set(sched.live.get() - 1);
                        sched.progress.set(sched.progress.get() + 1);
                        sched.release_if_all_arrived();
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
            if sched.live.get() > 0 && sched.progress.get() == before {
                crate::fatal(
                    "the threads of a block wait for each other forever: a warp operation (__shfl_*_sync, \
                     __ballot_sync, __syncwarp...) names lanes that never reach it, or threads of one block \
                     wait at different __syncthreads",
                );
            }
        }
        // Instances that ended by `exit` are suspended for good: their stacks are discarded
        // without unwinding (compiled code has no unwind tables; nothing on them needs dropping
        // but the crash report's note of the running node, which is put back here).
        for (i, slot) in fibers.iter_mut().enumerate() {
            if let Some(mut fiber) = slot.take().filter(|_| sched.exited.borrow()[i]) {
                // SAFETY: the fiber is suspended inside `exit_instance` and never resumed; its
                // frames are compiled leaf code and the runtime's calls into it, which own
                // nothing that must be dropped.
                unsafe { fiber.force_reset() };
                if stacks.len() < POOL_MAX {
                    stacks.push(fiber.into_stack());
                }
            }
        }
        crate::crash::set_running(running);
        SCHED.with(|c| c.set(outer_sched));
        YIELDER.with(|c| c.set(outer));
        STACKS.with(|s| *s.borrow_mut() = stacks);
    }

    /// PTX's `exit` in a fiber: the instance ends here (it counts as returned for the barrier
    /// and its warp) and never resumes. Returns false outside fibers.
    pub fn exit_instance() -> bool {
        let Some(s) = sched() else { return false };
        let t = s.current.get();
        s.exited.borrow_mut()[t] = true;
        s.done.borrow_mut()[t] = true;
        s.live.set(s.live.get() - 1);
        s.progress.set(s.progress.get() + 1);
        s.release_if_all_arrived();
        loop {
            suspend();
        }
    }

    /// In a fiber: lets the other instances of the block run once, as a GPU runs the other
    /// warps while one spins on a flag. Counts as progress: a spin loop the program never
    /// ends waits forever, as it would on a GPU. Outside fibers, a spin-loop hint.
    pub fn spin() {
        match sched() {
            Some(s) => {
                s.progress.set(s.progress.get() + 1);
                s.waits.borrow_mut()[s.current.get()] = Wait::Spin;
                suspend();
                s.waits.borrow_mut()[s.current.get()] = Wait::Not;
            }
            None => std::hint::spin_loop(),
        }
    }

    /// In a fiber: back to the scheduler until every instance still running reached the
    /// barrier. Returns false outside fibers.
    pub fn barrier() -> bool {
        counting_barrier(false).is_some()
    }

    /// A barrier that also counts the instances whose `pred` holds (`__syncthreads_count`;
    /// `_and` and `_or` compare the count): how many did, and how many arrived in all
    /// (returned instances not counted). Outside fibers the instance is alone.
    pub fn count_barrier(pred: bool) -> (u64, u64) {
        match counting_barrier(pred) {
            Some(counts) => counts,
            None => (u64::from(pred), 1),
        }
    }

    fn counting_barrier(pred: bool) -> Option<(u64, u64)> {
        let s = sched()?;
        let generation = s.generation.get();
        let parity = (generation & 1) as usize;
        s.tally[parity].set(s.tally[parity].get() + u64::from(pred));
        s.arrived.set(s.arrived.get() + 1);
        s.progress.set(s.progress.get() + 1);
        s.release_if_all_arrived();
        s.waits.borrow_mut()[s.current.get()] = Wait::Barrier(generation);
        while s.generation.get() == generation {
            suspend();
        }
        s.waits.borrow_mut()[s.current.get()] = Wait::Not;
        Some((s.total[parity].get(), s.arrivals[parity].get()))
    }

    /// The running instance's lane in its warp (0 outside fibers).
    pub fn exchange_lane() -> u32 {
        sched().map_or(0, |s| (s.current.get() % 32) as u32)
    }

    /// A warp operation of the running instance: gives `value`, waits until every lane of
    /// `mask` still running in its warp gave theirs to the same operation, and returns its
    /// lane, the values of its warp's lanes (by lane) and the lanes that took part (its own
    /// always). Outside fibers the instance is a warp of one lane, 0.
    pub fn exchange(value: u64, mask: u32) -> (u32, [u64; 32], u32) {
        let mut values = [0u64; 32];
        let Some(s) = sched() else {
            values[0] = value;
            return (0, values, 1);
        };
        let t = s.current.get();
        let (warp, lane) = (t / 32, (t % 32) as u32);
        let g = {
            let mut lanes = s.lanes.borrow_mut();
            let mine = &mut lanes[t];
            let at = match mine.iter().position(|o| o.mask == mask) {
                Some(at) => at,
                None => {
                    mine.push(MaskOps { mask, entered: 0, values: [0; 2] });
                    mine.len() - 1
                }
            };
            let ops = &mut mine[at];
            let g = ops.entered;
            ops.values[(g & 1) as usize] = value;
            ops.entered = g + 1;
            g
        };
        s.progress.set(s.progress.get() + 1);
        let first = warp * 32;
        let last = (first + 32).min(s.n);
        loop {
            let done = s.done.borrow();
            let lanes = s.lanes.borrow();
            let mut members = 1u32 << lane;
            let mut ready = true;
            for m in first..last {
                let bit = 1u32 << (m - first);
                if mask & bit == 0 {
                    continue;
                }
                // A lane that gave its value to this operation takes part even if it has
                // returned since; one that returned before it does not.
                let theirs = ops_of(&lanes[m], mask);
                if !done[m] || theirs.entered > g {
                    members |= bit;
                    ready &= theirs.entered > g;
                    values[m - first] = theirs.values[(g & 1) as usize];
                }
            }
            if ready {
                values[lane as usize] = value;
                s.waits.borrow_mut()[t] = Wait::Not;
                break (lane, values, members);
            }
            drop((done, lanes));
            s.waits.borrow_mut()[t] = Wait::Exchange(mask, g);
            suspend();
        }
    }

    /// Whether instance `m`, suspended, still waits (and so cannot reach an `__activemask`
    /// before the instances that wait for it move).
    fn blocked(s: &Sched, m: usize) -> bool {
        match s.waits.borrow()[m] {
            Wait::Not => false,
            Wait::Barrier(g) => s.generation.get() == g,
            Wait::Exchange(mask, g) => {
                let (first, last) = (m / 32 * 32, (m / 32 * 32 + 32).min(s.n));
                let (done, lanes) = (s.done.borrow(), s.lanes.borrow());
                (first..last)
                    .any(|o| mask & (1 << (o - first)) != 0 && ops_of(&lanes[o], mask).entered <= g && !done[o])
            }
            // Its group is formed once none of its warp may still come: until then it waits.
            Wait::Active(site, k) => !s
                .groups
                .borrow()
                .iter()
                .any(|&(w, gs, gk, lanes, _)| w == m / 32 && gs == site && gk == k && lanes & (1 << (m % 32)) != 0),
            Wait::Spin => true,
            Wait::Converge(_) => true,
        }
    }

    /// A branch's meeting point in a warp-synchronous leaf (`transform::reconverge`): the
    /// running lane waits until every other lane of its warp still running waits too (at a
    /// meeting point, a barrier, a warp operation or `__activemask`; a lane between two of
    /// its steps in lockstep runs first); then the lanes at the meeting point earliest in the
    /// program (`site`, a reverse postorder) go on together, as a GPU's warp goes on from a
    /// branch converged, and the others wait on. Outside fibers the lane is alone.
    pub fn converge(site: u64) {
        let Some(s) = sched() else { return };
        let t = s.current.get();
        let (first, last) = ((t / 32) * 32, ((t / 32) * 32 + 32).min(s.n));
        s.progress.set(s.progress.get() + 1);
        s.waits.borrow_mut()[t] = Wait::Converge(site);
        loop {
            // Released by the lane that found its warp settled.
            if s.waits.borrow()[t] == Wait::Not {
                return;
            }
            let settled = (first..last).filter(|&m| m != t && !s.done.borrow()[m]).all(|m| {
                // A spin here is a step in lockstep, which must be made before the warp meets.
                !matches!(s.waits.borrow()[m], Wait::Not | Wait::Spin) && blocked(s, m)
            });
            let earliest = (first..last)
                .filter(|&m| !s.done.borrow()[m])
                .filter_map(|m| match s.waits.borrow()[m] {
                    Wait::Converge(at) => Some(at),
                    _ => None,
                })
                .min();
            if settled && earliest == Some(site) {
                let mut waits = s.waits.borrow_mut();
                for m in first..last {
                    if waits[m] == Wait::Converge(site) {
                        waits[m] = Wait::Not;
                    }
                }
                s.progress.set(s.progress.get() + 1);
                return;
            }
            suspend();
        }
    }

    /// `__activemask` at call site `site`: the lanes of the running instance's warp that reach
    /// this site together, as a warp's converged lanes execute it. It waits until every other
    /// lane of its warp has either come here on the same visit, or waits elsewhere (a barrier,
    /// another warp operation, a spin), or has returned; those here form the group, the same
    /// mask for all of them. Outside fibers the instance is alone: lane 0.
    pub fn active_mask(site: u64) -> u32 {
        let Some(s) = sched() else { return 1 };
        let t = s.current.get();
        let (warp, lane) = (t / 32, t % 32);
        let k = {
            let mut visits = s.visits.borrow_mut();
            let mine = &mut visits[t];
            match mine.iter_mut().find(|(site_, _)| *site_ == site) {
                Some((_, n)) => {
                    *n += 1;
                    *n
                }
                None => {
                    mine.push((site, 0));
                    0
                }
            }
        };
        s.progress.set(s.progress.get() + 1);
        loop {
            let formed = s
                .groups
                .borrow()
                .iter()
                .position(|&(w, gs, gk, lanes, _)| w == warp && gs == site && gk == k && lanes & (1 << lane) != 0);
            if let Some(at) = formed {
                let mut groups = s.groups.borrow_mut();
                let lanes = groups[at].3;
                groups[at].4 -= 1;
                if groups[at].4 == 0 {
                    groups.swap_remove(at);
                }
                s.waits.borrow_mut()[t] = Wait::Not;
                return lanes;
            }
            let (first, last) = (warp * 32, (warp * 32 + 32).min(s.n));
            let mut lanes = 1u32 << lane;
            let mut settled = true;
            for m in (first..last).filter(|&m| m != t) {
                if s.done.borrow()[m] {
                    continue;
                }
                let here =
                    s.waits.borrow()[m] == Wait::Active(site, k)
                        && !s.groups.borrow().iter().any(|&(w, gs, gk, g, _)| {
                            w == warp && gs == site && gk == k && g & (1 << (m - first)) != 0
                        });
                if here {
                    lanes |= 1 << (m - first);
                } else if !blocked(s, m) {
                    settled = false;
                }
            }
            // Lanes waiting at other `__activemask` sites count as settled, but of all the
            // sites lanes wait at, the least advanced goes first (fewest calls made, then
            // the site earlier in the program): lanes that took a branch reach its site
            // before the others reach the one after the branch, where a warp reconverges.
            let calls = |m: usize| s.visits.borrow()[m].iter().map(|&(_, n)| n + 1).sum::<u64>();
            let mine = (calls(t), site);
            let earlier = (first..last).filter(|&m| m != t && !s.done.borrow()[m]).any(|m| match s.waits.borrow()[m] {
                Wait::Active(other, _) if blocked(s, m) => (calls(m), other) < mine,
                _ => false,
            });
            if settled && !earlier {
                s.progress.set(s.progress.get() + 1);
                // Read by this lane now, by the others as they resume.
                let others = lanes.count_ones() - 1;
                if others > 0 {
                    s.groups.borrow_mut().push((warp, site, k, lanes, others));
                }
                s.waits.borrow_mut()[t] = Wait::Not;
                return lanes;
            }
            s.waits.borrow_mut()[t] = Wait::Active(site, k);
            suspend();
        }
    }
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64"))]
pub use imp::{active_mask, converge, count_barrier, exchange, exchange_lane, exit_instance, spin};

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

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64")))]
pub fn active_mask(_site: u64) -> u32 {
    1
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64")))]
pub fn converge(_site: u64) {}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64")))]
pub fn spin() {
    std::hint::spin_loop()
}

/// Without fibers every instance is a warp of one lane (warp operations of leaves with
/// several instances per parent stop before they get here: see `crate::warp`).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64")))]
pub fn exit_instance() -> bool {
    false
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64")))]
pub fn count_barrier(pred: bool) -> (u64, u64) {
    (u64::from(pred), 1)
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64")))]
pub fn exchange_lane() -> u32 {
    0
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64")))]
pub fn exchange(value: u64, _mask: u32) -> (u32, [u64; 32], u32) {
    let mut values = [0u64; 32];
    values[0] = value;
    (0, values, 1)
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

    /// Instances that end by `exit` between barriers count as arrived at the later ones, and
    /// the others finish; their stacks come back to the pool.
    #[test]
    fn instances_ended_by_exit_leave_the_others_running() {
        let finished = AtomicUsize::new(0);
        for _ in 0..3 {
            super::run(40, &|i| {
                super::barrier();
                if i % 3 == 0 {
                    super::exit_instance();
                    unreachable!("an instance that exited came back");
                }
                super::barrier();
                super::barrier();
                finished.fetch_add(1, Ordering::SeqCst);
            });
        }
        assert_eq!(finished.load(Ordering::SeqCst), 3 * (40 - 14));
        assert!(!super::exit_instance(), "no fibers outside run");
    }

    /// Lanes 0 and 1 of each warp exchange among themselves between two exchanges of the
    /// whole warp (cooperative groups' wide tiles), and every exchange sees its own mask's
    /// values, whichever lane the scheduler resumes first.
    #[test]
    fn lanes_of_a_subset_run_operations_of_their_own() {
        let got = Mutex::new(vec![(0u64, 0u64, 0u64); 64]);
        super::run(64, &|i| {
            let (lane, all, _) = super::exchange(100 + i as u64, u32::MAX);
            let mut pair = 0;
            if lane < 2 {
                for round in 0..3u64 {
                    let (_, v, members) = super::exchange(1000 * round + i as u64, 0b11);
                    assert_eq!(members, 0b11);
                    pair += v[0] + v[1];
                }
            }
            let (_, after, _) = super::exchange(200 + i as u64, u32::MAX);
            got.lock().unwrap()[i] = (all[31 - lane as usize], pair, after[(lane as usize + 1) % 32]);
        });
        for (i, &(before, pair, after)) in got.into_inner().unwrap().iter().enumerate() {
            let (lane, base) = (i % 32, (i - i % 32) as u64);
            assert_eq!(before, 100 + base + 31 - lane as u64, "lane {i}");
            let want_pair = if lane < 2 { (0..3).map(|r| 2 * 1000 * r + 2 * base + 1).sum() } else { 0 };
            assert_eq!(pair, want_pair, "lane {i}");
            assert_eq!(after, 200 + base + ((lane + 1) % 32) as u64, "lane {i}");
        }
    }

    /// `__activemask` in a branch some lanes take: those lanes, for each of them; in a loop,
    /// each visit's group apart; lanes that returned are not named.
    #[test]
    fn the_active_mask_names_the_lanes_that_reach_it_together() {
        let got = Mutex::new(vec![(0u32, 0u32); 40]);
        super::run(40, &|i| {
            let lane = i % 32;
            if i >= 38 {
                return;
            }
            let branch = if lane % 3 == 0 { super::active_mask(7) } else { 0 };
            let mut looped = 0;
            for _ in 0..3 {
                looped = super::active_mask(8);
            }
            got.lock().unwrap()[i] = (branch, looped);
        });
        let got = got.into_inner().unwrap();
        let thirds = (0..32).filter(|l| l % 3 == 0).fold(0u32, |m, l| m | 1 << l);
        for (i, &(branch, looped)) in got.iter().enumerate().take(38) {
            let lane = i % 32;
            let (want_branch, want_loop) = if i < 32 { (thirds, u32::MAX) } else { (thirds & 0x3f, 0x3f) };
            assert_eq!(branch, if lane % 3 == 0 { want_branch } else { 0 }, "lane {i}");
            assert_eq!(looped, want_loop, "lane {i}");
        }
    }

    /// A thread spinning on a flag another thread of its block sets lets that thread run.
    #[test]
    fn a_spinning_instance_lets_the_others_run() {
        let flag = AtomicUsize::new(0);
        super::run(8, &|i| {
            if i == 0 {
                while flag.load(Ordering::Acquire) < 7 {
                    super::spin();
                }
            } else {
                flag.fetch_add(1, Ordering::Release);
            }
        });
        assert_eq!(flag.load(Ordering::SeqCst), 7);
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
