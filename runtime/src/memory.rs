//! The memory tracker: which host buffers the program tracks (`llvm_hpvm_track_mem`).
//!
//! With only the CPU device every buffer lives in host memory, so nothing moves; the table
//! still checks what the program asks for and counts it, so the report says what a device
//! run would have to move.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Tracked buffers: start address -> size in bytes.
static TRACKED: Mutex<BTreeMap<usize, usize>> = Mutex::new(BTreeMap::new());

pub static BYTES_TO_DEVICE: AtomicU64 = AtomicU64::new(0);
pub static BYTES_TO_HOST: AtomicU64 = AtomicU64::new(0);
pub static BYTES_REQUESTED: AtomicU64 = AtomicU64::new(0);

pub fn track(ptr: usize, bytes: usize) {
    TRACKED.lock().unwrap_or_else(|e| e.into_inner()).insert(ptr, bytes);
}

pub fn untrack(ptr: usize) {
    TRACKED.lock().unwrap_or_else(|e| e.into_inner()).remove(&ptr);
}

/// Makes the host copy of `[ptr, ptr + bytes)` current. On the CPU device it always is.
pub fn request(_ptr: usize, bytes: usize) {
    BYTES_REQUESTED.fetch_add(bytes as u64, Ordering::Relaxed);
}

pub fn tracked_count() -> usize {
    TRACKED.lock().unwrap_or_else(|e| e.into_inner()).len()
}

pub fn forget_all() {
    TRACKED.lock().unwrap_or_else(|e| e.into_inner()).clear();
}
