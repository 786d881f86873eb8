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
    /// Where the launch's parameters hold its grid, where its plan holds for any grid: the
    /// record then replays launches of other grids too, those words set to theirs
    /// ([`super::replay`]).
    pub grid_words: Option<[usize; 3]>,
    /// The unit's arguments then (host addresses), the `free` scalars' bytes zeroed.
    pub args: ArgBytes,
    /// Scalars only the kernel reads, as values: (offset in the unit's arguments, bytes,
    /// offset in the kernel's parameters). They may differ from `args`.
    pub free: SmallVec<[(usize, usize, usize); 4]>,
    pub launch: Launch,
    /// The kernel on its GPU.
    pub found: crate::devices::cuda::Found,
    /// The launch's parameters as made, each replay's free scalars written over them; empty
    /// once a held launch took them (made again from `launch` then).
    pub params: crate::devices::params::Params,
    /// How a replay reads the unit's arguments from the launcher's struct, made at the first
    /// replay from a launch ([`FromUser`]).
    pub from_user: Option<FromUser>,
}

/// Where the unit's arguments lie in the argument struct of CUDA launch `launch`'s launcher,
/// so that a replay compares them with the record where they are, packing nothing.
pub(crate) struct FromUser {
    pub launch: u32,
    /// False where some argument cannot be read so (a free scalar split over two root
    /// parameters): the unit is then never replayed from this launch.
    pub usable: bool,
    /// Bytes that must be as recorded: (offset in the user's struct, offset in
    /// [`Record::args`], length).
    pub same: SmallVec<[(u32, u32, u32); 8]>,
    /// The free scalars: (offset in the user's struct, length, parameter start).
    pub free: SmallVec<[(u32, u32, u32); 4]>,
    /// Each root parameter's offset in the user's struct and its bytes (0 where it is no
    /// integer), for the unit's grid.
    pub root_params: SmallVec<[(u32, u32); 8]>,
}

/// Per module: each unit's records, oldest first.
#[derive(Default)]
pub(crate) struct Replays(Mutex<FxHashMap<u32, SmallVec<[Record; 2]>>>);

impl Replays {
    pub(crate) fn lock(&self) -> MutexGuard<'_, FxHashMap<u32, SmallVec<[Record; 2]>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
