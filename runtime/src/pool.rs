//! The worker pool every launch runs on. `HPVM_MGPU_THREADS=N` sets its size (default: one
//! per core).

use std::sync::OnceLock;

pub fn pool() -> &'static rayon::ThreadPool {
    static POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let mut b = rayon::ThreadPoolBuilder::new().thread_name(|i| format!("hpvm-worker-{i}"));
        if let Some(n) = threads_from_env() {
            b = b.num_threads(n);
        }
        b.build().unwrap_or_else(|e| crate::fatal(&format!("cannot start the worker pool: {e}")))
    })
}

/// The most worker threads the environment may ask for: beyond any machine's cores. Idle
/// rayon workers spin (yielding) before they sleep, so a pool of thousands on a few cores
/// spends its time in the scheduler: 4096 threads took 20 s for a trivial program on two
/// cores, 256 took 0.2 s.
pub const MAX_THREADS: usize = 256;

fn threads_from_env() -> Option<usize> {
    let v = std::env::var("HPVM_MGPU_THREADS").ok()?;
    match v.trim().parse::<u64>() {
        Ok(n) if n > MAX_THREADS as u64 => {
            crate::fatal(&format!("HPVM_MGPU_THREADS={v}: at most {MAX_THREADS} worker threads"))
        }
        Ok(n) if n > 0 => Some(n as usize),
        _ => crate::fatal(&format!("HPVM_MGPU_THREADS={v}: expected a positive number of threads")),
    }
}
