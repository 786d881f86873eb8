//! The memory tracker: the host buffers the program tracks (`llvm_hpvm_track_mem`) and, when a
//! GPU is used, where their current copy is.
//!
//! Each tracked buffer may have a device copy. `host_valid`/`device_valid` say which copies
//! are current; a kernel that reads a buffer makes the device copy current first (copying the
//! whole buffer), a kernel that writes it leaves the device copy the only current one; the
//! host gets it back when it asks (`llvm_hpvm_request_mem`) or a CPU node uses it. Buffers a
//! kernel only writes are still copied to the device first when the device copy is stale:
//! until the access analysis proves a node writes every element, the elements it leaves alone
//! must keep their values.

use crate::cuda::Cuda;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

pub static BYTES_TO_DEVICE: AtomicU64 = AtomicU64::new(0);
pub static BYTES_TO_HOST: AtomicU64 = AtomicU64::new(0);
pub static BYTES_REQUESTED: AtomicU64 = AtomicU64::new(0);

struct Buffer {
    size: usize,
    device: Option<u64>,
    /// Page-locked for the GPU's copies.
    pinned: bool,
    host_valid: bool,
    device_valid: bool,
}

/// Tracked buffers by start address.
static TRACKED: Mutex<BTreeMap<usize, Buffer>> = Mutex::new(BTreeMap::new());

fn table() -> std::sync::MutexGuard<'static, BTreeMap<usize, Buffer>> {
    TRACKED.lock().unwrap_or_else(|e| e.into_inner())
}

/// The tracked buffer holding `[ptr, ptr + bytes)`: its start.
fn containing(t: &BTreeMap<usize, Buffer>, ptr: usize, bytes: usize) -> Option<usize> {
    let (&start, buf) = t.range(..=ptr).next_back()?;
    (ptr + bytes <= start + buf.size).then_some(start)
}

pub fn track(ptr: usize, bytes: usize) {
    let mut t = table();
    // Re-tracking a buffer forgets its device copy: the host's is the current one.
    if let Some(old) =
        t.insert(ptr, Buffer { size: bytes, device: None, pinned: false, host_valid: true, device_valid: false })
    {
        release(ptr, &old);
    }
}

pub fn untrack(ptr: usize) {
    make_host_current(ptr, 0);
    if let Some(buf) = table().remove(&ptr) {
        release(ptr, &buf);
    }
}

/// Frees a buffer's device copy and unlocks its pages.
fn release(start: usize, buf: &Buffer) {
    let Some(gpu) = crate::device::gpu() else { return };
    if let Some(d) = buf.device {
        if let Err(e) = gpu.free(d) {
            crate::fatal(&format!("freeing a buffer on the GPU: {e}"));
        }
    }
    if buf.pinned {
        gpu.unpin(start as *mut u8);
    }
}

/// Buffers at least this large are page-locked when they first go to the GPU.
const PIN_AT_LEAST: usize = 1 << 20;

/// `llvm_hpvm_request_mem`: the host copy of `[ptr, ptr + bytes)` becomes current.
pub fn request(ptr: usize, bytes: usize) {
    BYTES_REQUESTED.fetch_add(bytes as u64, Ordering::Relaxed);
    make_host_current(ptr, bytes);
}

/// Copies the buffer holding `ptr` back to the host if the device has the only current copy.
fn make_host_current(ptr: usize, bytes: usize) {
    let mut t = table();
    let Some(start) = containing(&t, ptr, bytes) else { return };
    let buf = t.get_mut(&start).expect("found above");
    if buf.host_valid {
        return;
    }
    let (Some(d), Some(gpu)) = (buf.device, crate::device::gpu()) else { return };
    // SAFETY: the program tracked `size` bytes at `start` and keeps them alive while tracked.
    let host = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, buf.size) };
    if let Err(e) = gpu.to_host(host, d) {
        crate::fatal(&format!("copying a buffer back from the GPU: {e}"));
    }
    BYTES_TO_HOST.fetch_add(buf.size as u64, Ordering::Relaxed);
    buf.host_valid = true;
}

/// Before a CPU node touches `[ptr, ptr + bytes)`: the host copy is made current, and if the
/// node writes it the device copy becomes stale. Untracked memory is the host's alone.
pub fn host_access(ptr: usize, bytes: usize, write: bool) {
    make_host_current(ptr, bytes);
    if write {
        let mut t = table();
        if let Some(start) = containing(&t, ptr, bytes) {
            t.get_mut(&start).expect("found above").device_valid = false;
        }
    }
}

/// The start of the tracked buffer holding `[ptr, ptr + bytes)`.
pub fn buffer_start(ptr: usize, bytes: usize) -> Option<usize> {
    containing(&table(), ptr, bytes)
}

/// Whether `[ptr, ptr + bytes)` lies in a tracked buffer (so a kernel may use it).
pub fn is_tracked(ptr: usize, bytes: usize) -> bool {
    containing(&table(), ptr, bytes).is_some()
}

/// The device address of `ptr` for a kernel that reads and/or writes `[ptr, ptr + bytes)`;
/// `None` if the memory is not tracked.
pub fn device_access(gpu: &Cuda, ptr: usize, bytes: usize, write: bool) -> Result<Option<u64>, String> {
    let mut t = table();
    let Some(start) = containing(&t, ptr, bytes) else { return Ok(None) };
    let buf = t.get_mut(&start).expect("found above");
    let d = match buf.device {
        Some(d) => d,
        None => {
            let d = gpu.alloc(buf.size)?;
            buf.device = Some(d);
            if buf.size >= PIN_AT_LEAST {
                buf.pinned = gpu.pin(start as *mut u8, buf.size);
            }
            d
        }
    };
    if !buf.device_valid {
        // SAFETY: see `make_host_current`.
        let host = unsafe { std::slice::from_raw_parts(start as *const u8, buf.size) };
        gpu.to_device(d, host)?;
        BYTES_TO_DEVICE.fetch_add(buf.size as u64, Ordering::Relaxed);
        buf.device_valid = true;
    }
    if write {
        buf.host_valid = false;
    }
    Ok(Some(d + (ptr - start) as u64))
}

/// At cleanup: device copies are freed, host copies made current.
pub fn forget_all() {
    let starts: Vec<usize> = table().keys().copied().collect();
    for s in starts {
        untrack(s);
    }
}
