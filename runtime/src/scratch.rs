//! Per-thread context the compiled code reaches through runtime calls: the barrier of the
//! current parent instance, and the scratch-memory scope of allocation nodes.

use std::alloc::Layout;
use std::cell::RefCell;
use std::sync::{Arc, Barrier, Mutex};

thread_local! {
    static BARRIER: RefCell<Option<Arc<Barrier>>> = const { RefCell::new(None) };
    static SCOPE: RefCell<Option<*const Scope>> = const { RefCell::new(None) };
    /// While measuring an allocation node for a GPU kernel: bytes of shared memory so far.
    static MEASURE: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` (an allocation node's CPU entry) with `__hpvm__malloc` handing out offsets into
/// a GPU block's shared memory instead of memory; returns `f`'s result and the bytes needed.
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let old = MEASURE.with(|m| m.replace(Some(0)));
    let r = f();
    let used = MEASURE.with(|m| m.replace(old)).unwrap_or(0);
    (r, used)
}

/// Runs `f` with `barrier` as this thread's `__hpvm__barrier`.
pub fn with_barrier<R>(barrier: Arc<Barrier>, f: impl FnOnce() -> R) -> R {
    let old = BARRIER.with(|b| b.replace(Some(barrier)));
    let r = f();
    BARRIER.with(|b| *b.borrow_mut() = old);
    r
}

/// Whether this thread runs one of several instances joined by a barrier on threads of their
/// own (targets without fibers).
pub fn in_thread_group() -> bool {
    BARRIER.with(|b| b.borrow().is_some())
}

/// `__hpvm__barrier`: waits for the other instances of this parent instance. Outside a
/// barrier run (a single instance) there is nobody to wait for.
pub fn barrier() {
    if crate::fiber::barrier() {
        return;
    }
    if let Some(b) = BARRIER.with(|b| b.borrow().clone()) {
        b.wait();
    }
}

const ALIGN: usize = 64;

/// Allocations made by the allocation nodes of one parent instance; freed with it.
#[derive(Default)]
pub struct Scope {
    blocks: Mutex<Vec<(usize, Layout)>>,
}

impl Scope {
    /// Runs `f` with this scope receiving this thread's `__hpvm__malloc`s.
    pub fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        let old = SCOPE.with(|s| s.replace(Some(self as *const Scope)));
        let r = f();
        SCOPE.with(|s| *s.borrow_mut() = old);
        r
    }

    fn alloc(&self, bytes: usize) -> *mut u8 {
        let layout = Layout::from_size_align(bytes.max(1), ALIGN)
            .unwrap_or_else(|_| crate::fatal("__hpvm__malloc: size too large"));
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        if p.is_null() {
            crate::fatal(&format!("__hpvm__malloc: out of memory allocating {bytes} bytes"));
        }
        self.blocks.lock().unwrap_or_else(|e| e.into_inner()).push((p as usize, layout));
        p
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        for (p, layout) in self.blocks.get_mut().unwrap_or_else(|e| e.into_inner()).drain(..) {
            // SAFETY: allocated in `alloc` with this layout, freed once.
            unsafe { std::alloc::dealloc(p as *mut u8, layout) };
        }
    }
}

/// Memory for `__hpvm__malloc` called outside an allocation node: lives until cleanup.
fn global_scope() -> &'static Mutex<Option<Scope>> {
    static GLOBAL: Mutex<Option<Scope>> = Mutex::new(None);
    &GLOBAL
}

/// `__hpvm__malloc`: zeroed, 64-byte aligned memory owned by the current scope.
pub fn malloc(bytes: usize) -> *mut u8 {
    if let Some(at) = MEASURE.with(|m| m.get()) {
        // Offsets 16-byte aligned, as the kernel's shared memory base is.
        let start = at.div_ceil(16) * 16;
        MEASURE.with(|m| m.set(Some(start + bytes)));
        return start as *mut u8;
    }
    if let Some(scope) = SCOPE.with(|s| *s.borrow()) {
        // SAFETY: the scope outlives `enter`, which is the only place that sets it.
        return unsafe { &*scope }.alloc(bytes);
    }
    let mut g = global_scope().lock().unwrap_or_else(|e| e.into_inner());
    g.get_or_insert_with(Scope::default).alloc(bytes)
}

/// Frees what `malloc` gave outside allocation nodes.
pub fn release_global() {
    global_scope().lock().unwrap_or_else(|e| e.into_inner()).take();
}
