//! `libhpvm_mpi.so`: the MPI transport of a run over ranks (`mpirun -n R ./app`), a plugin the
//! runtime loads at run time only under `mpirun`, so that an executable run as one process
//! needs no MPI library at all.
//!
//! It wraps the `mpi` crate (rsmpi, over the system's OpenMPI) in a handful of C functions;
//! the runtime (`runtime/src/ranks.rs`) declares the same [`Op`] and signatures and checks
//! [`hpvm_mpi_abi`] before using any other.
//!
//! Invariants:
//! - every function but [`hpvm_mpi_abi`] and [`hpvm_mpi_init`] runs between a successful
//!   [`hpvm_mpi_init`] and [`hpvm_mpi_finalize`];
//! - the collectives ([`hpvm_mpi_allgather_u64`], [`hpvm_mpi_bcast`], [`hpvm_mpi_barrier`])
//!   are called by every rank in the same order (the runtime's control replication makes them
//!   so); [`hpvm_mpi_exchange`] pairs a rank's sends with the receiving rank's receives by
//!   tag and, within a tag, by order.
//! - nothing here unwinds into C: a panic aborts the whole run with `MPI_Abort`.

use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Threading;
use std::sync::Mutex;

/// The ABI version the runtime expects: bump it with any change to the functions below.
pub const ABI: u32 = 1;

/// One point-to-point message of an exchange: `len` bytes at `ptr`, to (`send` 1) or from
/// (`send` 0) rank `peer`, tagged `tag`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Op {
    pub peer: i32,
    pub tag: i32,
    pub send: i32,
    pub ptr: *mut u8,
    pub len: u64,
}

/// MPI counts are C ints: longer messages go as consecutive pieces of this size, which the
/// receiver, posting the same pieces in the same order, matches one by one.
const PIECE: u64 = 1 << 30;

/// The universe of this process while MPI is initialized (dropping it finalizes MPI).
static UNIVERSE: Mutex<Option<Universe>> = Mutex::new(None);

fn world() -> SimpleCommunicator {
    let u = UNIVERSE.lock().unwrap_or_else(|e| e.into_inner());
    match &*u {
        Some(u) => u.world(),
        None => {
            eprintln!("hpvm-mgpu: an MPI call before MPI_Init or after MPI_Finalize");
            std::process::abort()
        }
    }
}

/// Runs `f`, ending every rank if it panics (an unwinding panic must not cross into C).
fn guarded<R>(f: impl FnOnce() -> R) -> R {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            eprintln!("hpvm-mgpu: the MPI transport failed; stopping every rank");
            world().abort(70)
        }
    }
}

/// The ABI version of this plugin ([`ABI`]).
#[no_mangle]
pub extern "C" fn hpvm_mpi_abi() -> u32 {
    ABI
}

/// Initializes MPI (threads may call it, one at a time); writes this rank and the number of
/// ranks. Returns 0; -1 when MPI was initialized already or refused to start; -2 when it
/// cannot take calls from several threads one at a time (`MPI_THREAD_SERIALIZED`).
///
/// # Safety
/// `rank` and `size` point to writable `i32`s.
#[no_mangle]
pub unsafe extern "C" fn hpvm_mpi_init(rank: *mut i32, size: *mut i32) -> i32 {
    guarded(|| {
        // Serialized suffices: the runtime calls MPI from one thread at a time (launches run
        // in order under ranks), but not always the main thread.
        let Some((universe, provided)) = mpi::initialize_with_threading(Threading::Serialized) else { return -1 };
        if matches!(provided, Threading::Single | Threading::Funneled) {
            // Calls come from several threads (one at a time): this MPI cannot take them.
            return -2;
        }
        let w = universe.world();
        unsafe {
            *rank = w.rank();
            *size = w.size();
        }
        *UNIVERSE.lock().unwrap_or_else(|e| e.into_inner()) = Some(universe);
        0
    })
}

/// Every rank's `mine`, in rank order, into `all` (as many `u64`s as ranks).
///
/// # Safety
/// `all` points to one writable `u64` per rank.
#[no_mangle]
pub unsafe extern "C" fn hpvm_mpi_allgather_u64(mine: u64, all: *mut u64) {
    guarded(|| {
        let w = world();
        let out = unsafe { std::slice::from_raw_parts_mut(all, w.size() as usize) };
        w.all_gather_into(&mine, out);
    })
}

/// Rank `root`'s `len` bytes at `ptr` into every rank's `ptr`.
///
/// # Safety
/// `ptr` points to `len` bytes, readable on the root and writable elsewhere.
#[no_mangle]
pub unsafe extern "C" fn hpvm_mpi_bcast(ptr: *mut u8, len: u64, root: i32) {
    guarded(|| {
        let w = world();
        let mut at = 0;
        while at < len {
            let n = (len - at).min(PIECE);
            let buf = unsafe { std::slice::from_raw_parts_mut(ptr.add(at as usize), n as usize) };
            w.process_at_rank(root).broadcast_into(buf);
            at += n;
        }
    })
}

/// Posts every message of `ops` at once and returns when all have completed.
///
/// # Safety
/// Each op's `ptr` points to `len` bytes, readable (send) or writable (receive), which no one
/// else touches until this returns.
#[no_mangle]
pub unsafe extern "C" fn hpvm_mpi_exchange(ops: *const Op, n: usize) {
    if n == 0 {
        return;
    }
    guarded(|| {
        let w = world();
        let ops = unsafe { std::slice::from_raw_parts(ops, n) };
        let pieces: usize = ops.iter().map(|o| o.len.div_ceil(PIECE).max(1) as usize).sum();
        mpi::request::multiple_scope(pieces, |scope, coll| {
            for o in ops {
                let mut at = 0;
                loop {
                    let len = (o.len - at).min(PIECE) as usize;
                    let p = w.process_at_rank(o.peer);
                    // SAFETY: the caller keeps these bytes for us until the waits below.
                    if o.send != 0 {
                        let buf: &[u8] = unsafe { std::slice::from_raw_parts(o.ptr.add(at as usize), len) };
                        coll.add(p.immediate_send_with_tag(scope, buf, o.tag));
                    } else {
                        let buf: &mut [u8] = unsafe { std::slice::from_raw_parts_mut(o.ptr.add(at as usize), len) };
                        coll.add(p.immediate_receive_into_with_tag(scope, buf, o.tag));
                    }
                    at += len as u64;
                    if at >= o.len {
                        break;
                    }
                }
            }
            let mut done = Vec::with_capacity(pieces);
            coll.wait_all(&mut done);
        });
    })
}

/// Waits until every rank has called it.
#[no_mangle]
pub extern "C" fn hpvm_mpi_barrier() {
    guarded(|| world().barrier())
}

/// Ends every rank of the run with `code` (`MPI_Abort`).
#[no_mangle]
pub extern "C" fn hpvm_mpi_abort(code: i32) -> ! {
    world().abort(code)
}

/// Finalizes MPI; later calls do nothing.
#[no_mangle]
pub extern "C" fn hpvm_mpi_finalize() {
    let universe = UNIVERSE.lock().unwrap_or_else(|e| e.into_inner()).take();
    drop(universe);
}
