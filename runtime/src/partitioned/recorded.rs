//! What a launch leaves for the next to replay ([`super::replay`]): the launch as made, and
//! per unit the record of its last replayable launch. Apart from the replay logic so that the
//! GPU path that makes launches ([`super::kernel`]) and the caches that keep records
//! ([`super::cache`]) need nothing of it.

use crate::args::ArgBytes;
use crate::hash::FxHashMap;
use smallvec::SmallVec;
use std::sync::{Mutex, MutexGuard};

/// A launch as the GPU path made it ([`super::kernel::run`]): what a replay submits again.
pub(crate) struct Launch {
    pub device: usize,
    pub name: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared: u32,
    pub bytes: Vec<u8>,
    pub starts: Vec<usize>,
}

/// A unit's last launch that may be replayed (see the module's doc).
pub(crate) struct Record {
    pub epoch: u64,
    pub grid: [i64; 3],
    /// The unit's arguments then (host addresses), the `free` scalars' bytes zeroed.
    pub args: ArgBytes,
    /// Scalars only the kernel reads, as values: (offset in the unit's arguments, bytes,
    /// offset in the kernel's parameters). They may differ from `args`.
    pub free: SmallVec<[(usize, usize, usize); 4]>,
    pub launch: Launch,
    /// The kernel on its GPU.
    pub found: crate::devices::cuda::Found,
}

/// Per module: each unit's record.
#[derive(Default)]
pub(crate) struct Replays(Mutex<FxHashMap<u32, Record>>);

impl Replays {
    pub(crate) fn lock(&self) -> MutexGuard<'_, FxHashMap<u32, Record>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
