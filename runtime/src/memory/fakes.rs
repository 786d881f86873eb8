//! Fakes for tests of planning: a buffer whose device allocations are made-up addresses,
//! and byte-by-byte models of the memories copies move data between.

use super::coherence::{Coherence, Holders};
use super::Buffer;
use crate::devices::{Copy, Place};

/// A buffer whose allocations exist already (fake addresses: nothing touches memory).
pub(crate) fn buffer(size: u64, devices: usize) -> Buffer {
    Buffer {
        id: 1,
        start: HOST,
        size,
        coherence: Coherence::new(size, Holders::HOST),
        allocs: (0..devices).map(|k| Some(device_base(k))).collect(),
        pinned: false,
        host_epoch: 0,
        host_stores: true,
        races_refused: false,
        runtime_wrote: Vec::new(),
        kept: Vec::new(),
        guard: Default::default(),
        watch: super::Watch::NotYet,
        edge_bytes: Vec::new(),
        backing: Vec::new(),
        bank: None,
        in_bank: Vec::new(),
    }
}

pub(crate) const HOST: u64 = 0x1000;
pub(crate) fn device_base(k: usize) -> u64 {
    0x100_0000 * (k as u64 + 1)
}

/// Simulated memories: what each place holds of the buffer, byte by byte.
pub(crate) struct Memories {
    pub host: Vec<u32>,
    pub devices: Vec<Vec<u32>>,
}

impl Memories {
    fn at(&mut self, addr: u64) -> &mut u32 {
        if addr >= 0x100_0000 {
            let k = (addr / 0x100_0000 - 1) as usize;
            &mut self.devices[k][(addr - device_base(k)) as usize]
        } else {
            &mut self.host[(addr - HOST) as usize]
        }
    }

    pub fn run(&mut self, copies: &[Copy]) {
        for c in copies {
            assert_ne!(c.src, c.dst, "a copy within one place: {c:?}");
            for r in 0..c.rows {
                for b in 0..c.row_bytes {
                    let v = *self.at(c.src_addr + r * c.pitch + b);
                    *self.at(c.dst_addr + r * c.pitch + b) = v;
                }
            }
        }
    }

    pub fn place(&mut self, p: Place) -> &mut Vec<u32> {
        match p {
            Place::Host => &mut self.host,
            Place::Device(k) => &mut self.devices[k],
        }
    }
}
