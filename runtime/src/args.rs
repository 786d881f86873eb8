//! Argument buffers: the bytes a node's instances receive, laid out as the compiled entry
//! point reads them (offsets from [`crate::desc::ValueDesc`]), and the readers of single
//! values in them. Shared by the engine that builds them, the devices that pass them to
//! compiled code and the planner that reads pointers and scalars out of them.

use crate::desc::{NodeDesc, ScalarKind};
use std::borrow::Cow;

/// A raw pointer that may cross threads: the engine hands disjoint parts of one buffer to
/// different instances.
#[derive(Clone, Copy)]
pub struct SendPtr<T>(pub *mut T);
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    /// The pointer. (A method, so closures capture the whole `SendPtr`, not its raw field.)
    pub fn get(self) -> *mut T {
        self.0
    }
}

/// The arguments of a node's instances: one buffer shared by all, plus, for inputs fed by
/// one-to-one edges, the per-instance values to patch in.
/// An argument buffer held inline where it is as small as kernels' usually are: a launch's
/// cache key and the lists beside it allocate nothing (a launch-bound loop launches millions).
pub type ArgBytes = smallvec::SmallVec<[u8; 128]>;

pub struct Args<'a> {
    pub base: ArgBytes,
    pub patches: Vec<Patch<'a>>,
}

/// Input bytes `dst_offset..+size` of instance `i` come from `src[i * stride + src_offset..]`.
pub struct Patch<'a> {
    pub dst_offset: usize,
    pub size: usize,
    pub src: &'a [u8],
    pub src_offset: usize,
    pub stride: usize,
}

impl Args<'_> {
    pub fn uniform(base: impl Into<ArgBytes>) -> Args<'static> {
        Args { base: base.into(), patches: Vec::new() }
    }

    pub fn for_instance(&self, lin: i64) -> Cow<'_, [u8]> {
        if self.patches.is_empty() {
            return Cow::Borrowed(&self.base);
        }
        let mut buf = self.base.to_vec();
        for p in &self.patches {
            let from = lin as usize * p.stride + p.src_offset;
            buf[p.dst_offset..p.dst_offset + p.size].copy_from_slice(&p.src[from..from + p.size]);
        }
        Cow::Owned(buf)
    }

    /// The argument buffer shared by all `total` instances, if their one-to-one inputs all
    /// agree.
    pub fn uniform_over(&self, total: i64) -> Option<ArgBytes> {
        if self.patches.is_empty() {
            return Some(ArgBytes::from_slice(&self.base));
        }
        let first = self.for_instance(0);
        (1..total).all(|i| *self.for_instance(i) == first[..]).then(|| ArgBytes::from_slice(&first))
    }
}

/// The pointer-sized value at `offset` of an argument buffer.
pub fn read_u64(buf: &[u8], offset: usize) -> Option<u64> {
    Some(u64::from_le_bytes(buf.get(offset..offset + 8)?.try_into().ok()?))
}

/// Reads integer parameter `i` of `node` from its argument buffer (sign-extended).
pub fn int_param(node: &NodeDesc, args: &[u8], i: u32) -> Option<i64> {
    let p = node.params.get(i as usize)?;
    if p.kind != ScalarKind::Int {
        return None;
    }
    int_of(args.get(p.offset as usize..(p.offset + p.size) as usize)?)
}

/// The integer of 1, 2, 4 or 8 little-endian bytes, sign-extended.
pub fn int_of(bytes: &[u8]) -> Option<i64> {
    Some(match bytes.len() {
        1 => bytes[0] as i8 as i64,
        2 => i16::from_le_bytes(bytes.try_into().ok()?) as i64,
        4 => i32::from_le_bytes(bytes.try_into().ok()?) as i64,
        8 => i64::from_le_bytes(bytes.try_into().ok()?),
        _ => return None,
    })
}
