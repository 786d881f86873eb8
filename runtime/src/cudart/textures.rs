//! CUDA arrays and texture objects.
//!
//! A CUDA array is device memory the runtime allocates as any other (a tracked buffer), its
//! texels in rows of `width` elements with no padding, slices of `height` rows; the program
//! holds an opaque handle and reaches the texels only through the array calls and textures.
//!
//! A texture object is the program address of a small tracked buffer holding its
//! description ([`Texture`], the layout of `struct __hpvm_mgpu_texture` in
//! `frontend/src/cuda/textures.h`): where its texels are (the array's or the program's
//! linear memory, as a program address), their format, and how to sample them. Kernels fetch
//! in software (`textures.h`, the same code on GPUs and on simulated devices); they read the
//! description and the texels through addresses kept in memory, so such a kernel runs whole
//! on one device with every buffer current there, its addresses translated
//! (`transform/src/indirect.rs`). Texels are never cached apart from their buffer, so a copy
//! into an array or into a texture's linear memory is seen by the next launch.
//!
//! A surface object is the same description over an array, which kernels read and write
//! through CUDA's surface functions (`textures.h` declares them: clang's headers have none).
//!
//! Mipmapped arrays are not made here (their calls are not defined, so a program using them
//! fails at link time naming them); a cube map is an array of six square layers (per cube),
//! which kernels fetch by direction (`textures.h`); kernels that gather or query a texture fail
//! to build, naming the line.

use super::{allocate, copy, copy_2d, put, ret, Error, Kind, Via, INVALID_VALUE, SUCCESS};
use super::{api, release};
use crate::memory;
use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::{Mutex, MutexGuard};

/// `cudaErrorInvalidChannelDescriptor`.
const INVALID_CHANNEL_DESCRIPTOR: Error = 20;

/// `cudaChannelFormatDesc`: bits per channel (x, y, z, w) and `cudaChannelFormatKind`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChannelFormatDesc {
    x: c_int,
    y: c_int,
    z: c_int,
    w: c_int,
    f: c_int,
}

impl ChannelFormatDesc {
    /// Channels and bytes per channel, where the format is one textures read: 1, 2 or 4
    /// channels of one size, 1, 2 or 4 bytes (2 or 4 for floats), signed, unsigned or float.
    fn shape(&self) -> Option<(usize, usize)> {
        let bits = [self.x, self.y, self.z, self.w];
        let channels = bits.iter().take_while(|&&b| b != 0).count();
        let size = self.x;
        let ok = matches!(channels, 1 | 2 | 4)
            && bits[..channels].iter().all(|&b| b == size)
            && bits[channels..].iter().all(|&b| b == 0)
            && match self.f {
                0 | 1 => matches!(size, 8 | 16 | 32),
                2 => matches!(size, 16 | 32),
                _ => false,
            };
        ok.then_some((channels, size as usize / 8))
    }

    fn element(&self) -> Option<usize> {
        self.shape().map(|(c, b)| c * b)
    }
}

/// `cudaExtent`: an array's size in elements; also a 3-D copy's (`cudaMemcpy3D`,
/// [`super::graphs`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Extent {
    pub(super) width: usize,
    pub(super) height: usize,
    pub(super) depth: usize,
}

/// A CUDA array: its format, size in elements (height and depth 0 where absent, as made)
/// and its texels' buffer.
#[derive(Clone, Copy, Debug)]
pub(super) struct Array {
    desc: ChannelFormatDesc,
    extent: Extent,
    flags: c_uint,
    pub data: usize,
}

impl Array {
    /// Bytes per element.
    pub fn element(&self) -> usize {
        self.desc.element().unwrap_or(1)
    }

    /// Bytes from a row to the next.
    pub fn pitch(&self) -> usize {
        self.extent.width * self.element()
    }

    /// Rows per slice.
    pub fn rows(&self) -> usize {
        self.extent.height.max(1)
    }

    /// 2-D slices (1 for 1-D and 2-D arrays).
    pub fn slices(&self) -> usize {
        self.extent.depth.max(1)
    }

    fn bytes(&self) -> usize {
        self.pitch() * self.rows() * self.slices()
    }
}

/// `cudaResourceDesc` (CUDA 12.4's `driver_types.h`): the resource type and the widest of its
/// union's members (`pitch2D`: pointer, format, width, height, pitch).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ResourceDesc {
    kind: c_int,
    ptr: *mut c_void,
    desc: ChannelFormatDesc,
    size: usize,
    height: usize,
    pitch: usize,
}

/// `cudaTextureDesc`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TextureDesc {
    address: [c_int; 3],
    filter: c_int,
    read: c_int,
    srgb: c_int,
    border: [f32; 4],
    normalized: c_int,
    max_anisotropy: c_uint,
    mipmap_filter: c_int,
    mipmap_bias: f32,
    min_mipmap: f32,
    max_mipmap: f32,
    no_trilinear: c_int,
    seamless_cubemap: c_int,
}

/// A texture's description as the device's fetch reads it (`struct __hpvm_mgpu_texture`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Texture {
    data: u64,
    pitch: u64,
    slice: u64,
    size: [c_int; 3],
    channels: c_int,
    bytes: c_int,
    kind: c_int,
    address: [c_int; 3],
    filter: c_int,
    normalized_read: c_int,
    normalized_coords: c_int,
    linear: c_int,
    border: [f32; 4],
}

/// What the texture calls keep: arrays by handle, and each texture's descriptions as the
/// program gave them (for the calls that ask them back).
#[derive(Default)]
struct Textures {
    arrays: HashMap<usize, Array>,
    objects: HashMap<u64, (ResourceDesc, TextureDesc)>,
}

// SAFETY: the pointers kept are the program's device addresses, used as numbers.
unsafe impl Send for Textures {}

fn textures() -> MutexGuard<'static, Textures> {
    static T: std::sync::OnceLock<Mutex<Textures>> = std::sync::OnceLock::new();
    T.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner())
}

/// The array a handle names.
pub(super) fn array(handle: *const c_void) -> Option<Array> {
    textures().arrays.get(&(handle as usize)).copied()
}

#[no_mangle]
pub extern "C" fn cudaCreateChannelDesc(x: c_int, y: c_int, z: c_int, w: c_int, f: c_int) -> ChannelFormatDesc {
    ChannelFormatDesc { x, y, z, w, f }
}

#[no_mangle]
pub extern "C" fn cudaMallocArray(
    out: *mut *mut c_void,
    desc: *const ChannelFormatDesc,
    width: usize,
    height: usize,
    flags: c_uint,
) -> Error {
    api("cudaMallocArray", || make_array(out, desc, Extent { width, height, depth: 0 }, flags))
}

#[no_mangle]
pub extern "C" fn cudaMalloc3DArray(
    out: *mut *mut c_void,
    desc: *const ChannelFormatDesc,
    extent: Extent,
    flags: c_uint,
) -> Error {
    api("cudaMalloc3DArray", || make_array(out, desc, extent, flags))
}

/// `cudaArrayLayered`: `depth` counts layers of 1-D (height 0) or 2-D arrays.
const LAYERED: c_uint = 1;
/// `cudaArraySurfaceLoadStore`: surfaces may be made over the array.
const SURFACE_LOAD_STORE: c_uint = 2;
/// `cudaArrayCubemap`: six square layers, the faces +x, -x, +y, -y, +z, -z (with
/// `cudaArrayLayered`, six per cube).
const CUBEMAP: c_uint = 4;

/// An array of `extent` elements of `desc`'s format: 1-D, 2-D, 3-D or layered, for textures
/// and surfaces, and cube maps (six square layers per cube). Texture gathers are refused
/// (`cudaErrorInvalidValue`): kernels cannot use them.
fn make_array(out: *mut *mut c_void, desc: *const ChannelFormatDesc, extent: Extent, flags: c_uint) -> Error {
    // SAFETY: the caller's format, checked non-null.
    let Some(&desc) = (unsafe { desc.as_ref() }) else { return ret(INVALID_VALUE) };
    let layered = flags & LAYERED != 0 && extent.depth > 0;
    let cube = flags & CUBEMAP == 0
        || (extent.width == extent.height
            && extent.depth > 0
            && extent.depth.is_multiple_of(6)
            && (layered || extent.depth == 6));
    let shape = extent.width > 0 && (extent.height > 0 || extent.depth == 0 || layered);
    if out.is_null() || !shape || !cube || flags & !(LAYERED | SURFACE_LOAD_STORE | CUBEMAP) != 0 {
        return ret(INVALID_VALUE);
    }
    if desc.shape().is_none() {
        return ret(INVALID_CHANNEL_DESCRIPTOR);
    }
    let mut array = Array { desc, extent, flags, data: 0 };
    let Some(bytes) = array.pitch().checked_mul(array.rows()).and_then(|b| b.checked_mul(extent.depth.max(1))) else {
        return ret(super::MEMORY_ALLOCATION);
    };
    debug_assert_eq!(bytes, array.bytes());
    let mut data = std::ptr::null_mut();
    match allocate(&mut data, bytes, Kind::Device) {
        SUCCESS => {}
        e => return ret(e),
    }
    array.data = data as usize;
    // The handle: an address of its own, which no other call takes for device memory.
    let handle = Box::into_raw(Box::new(0u8)) as usize;
    textures().arrays.insert(handle, array);
    // SAFETY: the caller's slot, checked non-null.
    unsafe { *out = handle as *mut c_void };
    SUCCESS
}

#[no_mangle]
pub extern "C" fn cudaFreeArray(handle: *mut c_void) -> Error {
    api("cudaFreeArray", || {
        if handle.is_null() {
            return SUCCESS;
        }
        let Some(array) = textures().arrays.remove(&(handle as usize)) else { return ret(INVALID_VALUE) };
        super::inflight::drain();
        // SAFETY: made by `Box::into_raw` in `make_array`, removed from the table: freed once.
        drop(unsafe { Box::from_raw(handle as *mut u8) });
        ret(release(array.data as *mut c_void, &[Kind::Device]))
    })
}

#[no_mangle]
pub extern "C" fn cudaArrayGetInfo(
    desc: *mut ChannelFormatDesc,
    extent: *mut Extent,
    flags: *mut c_uint,
    handle: *mut c_void,
) -> Error {
    api("cudaArrayGetInfo", || {
        let Some(a) = array(handle) else { return ret(INVALID_VALUE) };
        for e in [
            (!desc.is_null()).then(|| put(desc, a.desc)),
            (!extent.is_null()).then(|| put(extent, a.extent)),
            (!flags.is_null()).then(|| put(flags, a.flags)),
        ]
        .into_iter()
        .flatten()
        {
            if e != SUCCESS {
                return e;
            }
        }
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cudaGetChannelDesc(desc: *mut ChannelFormatDesc, handle: *const c_void) -> Error {
    api("cudaGetChannelDesc", || match array(handle) {
        Some(a) => put(desc, a.desc),
        None => ret(INVALID_VALUE),
    })
}

/// The address of byte `x` of row `y` of an array, where a region of `width` bytes and
/// `height` rows from there lies inside it.
fn region(handle: *const c_void, x: usize, y: usize, width: usize, height: usize) -> Result<(Array, usize), Error> {
    let a = array(handle).ok_or(INVALID_VALUE)?;
    let rows = a.rows() * a.extent.depth.max(1);
    let fits = x.checked_add(width).is_some_and(|e| e <= a.pitch()) && y.checked_add(height).is_some_and(|e| e <= rows);
    if !fits {
        return Err(INVALID_VALUE);
    }
    Ok((a, a.data + y * a.pitch() + x))
}

/// `count` bytes from byte `x` of row `y` on, row after row (the deprecated 1-D calls).
fn run(handle: *const c_void, x: usize, y: usize, count: usize) -> Result<usize, Error> {
    let a = array(handle).ok_or(INVALID_VALUE)?;
    let start = y.checked_mul(a.pitch()).and_then(|s| s.checked_add(x)).ok_or(INVALID_VALUE)?;
    if x >= a.pitch() && count > 0 || start.checked_add(count).is_none_or(|e| e > a.bytes()) {
        return Err(INVALID_VALUE);
    }
    Ok(a.data + start)
}

#[no_mangle]
pub extern "C" fn cudaMemcpyToArray(
    dst: *mut c_void,
    x: usize,
    y: usize,
    src: *const c_void,
    count: usize,
    kind: c_int,
) -> Error {
    api("cudaMemcpyToArray", || match run(dst, x, y, count) {
        Ok(at) => ret(copy(at as *mut c_void, src, count, to_device(kind))),
        Err(e) => ret(e),
    })
}

#[no_mangle]
pub extern "C" fn cudaMemcpyToArrayAsync(
    dst: *mut c_void,
    x: usize,
    y: usize,
    src: *const c_void,
    count: usize,
    kind: c_int,
    _stream: *mut c_void,
) -> Error {
    cudaMemcpyToArray(dst, x, y, src, count, kind)
}

#[no_mangle]
pub extern "C" fn cudaMemcpyFromArray(
    dst: *mut c_void,
    src: *const c_void,
    x: usize,
    y: usize,
    count: usize,
    kind: c_int,
) -> Error {
    api("cudaMemcpyFromArray", || match run(src, x, y, count) {
        Ok(at) => ret(copy(dst, at as *const c_void, count, from_device(kind))),
        Err(e) => ret(e),
    })
}

#[no_mangle]
#[allow(clippy::too_many_arguments)] // CUDA's signature
pub extern "C" fn cudaMemcpy2DToArray(
    dst: *mut c_void,
    x: usize,
    y: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: c_int,
) -> Error {
    api("cudaMemcpy2DToArray", || match region(dst, x, y, width, height) {
        Ok((a, at)) => {
            ret(copy_2d(at as *mut c_void, a.pitch(), src, spitch, width, height, to_device(kind), Via::Direct))
        }
        Err(e) => ret(e),
    })
}

#[no_mangle]
#[allow(clippy::too_many_arguments)] // CUDA's signature
pub extern "C" fn cudaMemcpy2DToArrayAsync(
    dst: *mut c_void,
    x: usize,
    y: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: c_int,
    _stream: *mut c_void,
) -> Error {
    cudaMemcpy2DToArray(dst, x, y, src, spitch, width, height, kind)
}

#[no_mangle]
#[allow(clippy::too_many_arguments)] // CUDA's signature
pub extern "C" fn cudaMemcpy2DFromArray(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    x: usize,
    y: usize,
    width: usize,
    height: usize,
    kind: c_int,
) -> Error {
    api("cudaMemcpy2DFromArray", || match region(src, x, y, width, height) {
        Ok((a, at)) => {
            ret(copy_2d(dst, dpitch, at as *const c_void, a.pitch(), width, height, from_device(kind), Via::Direct))
        }
        Err(e) => ret(e),
    })
}

/// A copy's kind with its array side device memory: `cudaMemcpyDefault` and the kinds that
/// name a device destination keep theirs; a host-to-host kind is wrong for an array.
fn to_device(kind: c_int) -> c_int {
    match kind {
        super::HOST_TO_HOST => -1,
        super::DEVICE_TO_HOST => -1,
        k => k,
    }
}

fn from_device(kind: c_int) -> c_int {
    match kind {
        super::HOST_TO_HOST | super::HOST_TO_DEVICE => -1,
        k => k,
    }
}

/// `cudaResourceType`.
const RESOURCE_ARRAY: c_int = 0;
const RESOURCE_LINEAR: c_int = 2;
const RESOURCE_PITCH_2D: c_int = 3;

#[no_mangle]
pub extern "C" fn cudaCreateTextureObject(
    out: *mut u64,
    resource: *const ResourceDesc,
    texture: *const TextureDesc,
    _view: *const c_void,
) -> Error {
    api("cudaCreateTextureObject", || {
        // SAFETY: the caller's descriptions, checked non-null.
        let (Some(&r), Some(&t)) = (unsafe { resource.as_ref() }, unsafe { texture.as_ref() }) else {
            return ret(INVALID_VALUE);
        };
        if out.is_null() {
            return ret(INVALID_VALUE);
        }
        make_object(out, r, t)
    })
}

/// A texture's or surface's description in device memory, its address the object.
fn make_object(out: *mut u64, r: ResourceDesc, t: TextureDesc) -> Error {
    let described = match describe(&r, &t) {
        Ok(d) => d,
        Err(e) => return ret(e),
    };
    let size = std::mem::size_of::<Texture>();
    let mut at = std::ptr::null_mut();
    match allocate(&mut at, size, Kind::Device) {
        SUCCESS => {}
        e => return ret(e),
    }
    let e = copy(at, (&described as *const Texture).cast(), size, super::HOST_TO_DEVICE);
    if e != SUCCESS {
        release(at, &[Kind::Device]);
        return ret(e);
    }
    textures().objects.insert(at as u64, (r, t));
    put(out, at as u64)
}

/// The device's description of a texture over resource `r` sampled as `t` says.
fn describe(r: &ResourceDesc, t: &TextureDesc) -> Result<Texture, Error> {
    let (data, desc, size, pitch, slice, linear) = match r.kind {
        RESOURCE_ARRAY => {
            let a = array(r.ptr).ok_or(INVALID_VALUE)?;
            let e = a.extent;
            let size = [e.width, e.height.max(1), e.depth.max(1)];
            (a.data, a.desc, size, a.pitch(), a.pitch() * a.rows(), false)
        }
        RESOURCE_LINEAR => {
            let element = r.desc.element().ok_or(INVALID_CHANNEL_DESCRIPTOR)?;
            (r.ptr as usize, r.desc, [r.size / element, 1, 1], r.size, r.size, true)
        }
        RESOURCE_PITCH_2D => {
            let element = r.desc.element().ok_or(INVALID_CHANNEL_DESCRIPTOR)?;
            if r.pitch < r.size * element || r.height == 0 {
                return Err(INVALID_VALUE);
            }
            (r.ptr as usize, r.desc, [r.size, r.height, 1], r.pitch, r.pitch * r.height, false)
        }
        _ => return Err(INVALID_VALUE),
    };
    let (channels, bytes) = desc.shape().ok_or(INVALID_CHANNEL_DESCRIPTOR)?;
    if size.iter().any(|&s| s == 0 || s > c_int::MAX as usize) {
        return Err(INVALID_VALUE);
    }
    // The texels must be device memory the runtime tracks: the kernel reads them there.
    let span = (size[2] - 1) * slice + (size[1] - 1) * pitch + size[0] * channels * bytes;
    if memory::tracked(data, span).is_none() {
        return Err(INVALID_VALUE);
    }
    if t.address.iter().any(|&m| !(0..=3).contains(&m)) || !(0..=1).contains(&t.filter) || !(0..=1).contains(&t.read) {
        return Err(INVALID_VALUE);
    }
    Ok(Texture {
        data: data as u64,
        pitch: pitch as u64,
        slice: slice as u64,
        size: size.map(|s| s as c_int),
        channels: channels as c_int,
        bytes: bytes as c_int,
        kind: desc.f,
        address: t.address,
        filter: t.filter,
        // Only 8- and 16-bit integers read as normalized floats; other formats read their
        // elements whatever the mode says (and integer elements are never filtered: the
        // device's fetch samples the nearest texel for them).
        normalized_read: (t.read == 1 && desc.f != 2 && bytes < 4) as c_int,
        normalized_coords: (t.normalized != 0) as c_int,
        linear: linear as c_int,
        border: t.border,
    })
}

/// A surface over an array: its description as a texture's, point-sampled.
#[no_mangle]
pub extern "C" fn cudaCreateSurfaceObject(out: *mut u64, resource: *const ResourceDesc) -> Error {
    api("cudaCreateSurfaceObject", || {
        // SAFETY: the caller's description, checked non-null.
        let Some(&r) = (unsafe { resource.as_ref() }) else { return ret(INVALID_VALUE) };
        if out.is_null() || r.kind != RESOURCE_ARRAY {
            return ret(INVALID_VALUE);
        }
        // SAFETY: all-zero is a valid `cudaTextureDesc` (wrap addressing, point sampling).
        let t: TextureDesc = unsafe { std::mem::zeroed() };
        make_object(out, r, t)
    })
}

#[no_mangle]
pub extern "C" fn cudaDestroySurfaceObject(object: u64) -> Error {
    api("cudaDestroySurfaceObject", || destroy(object))
}

#[no_mangle]
pub extern "C" fn cudaGetSurfaceObjectResourceDesc(out: *mut ResourceDesc, object: u64) -> Error {
    cudaGetTextureObjectResourceDesc(out, object)
}

#[no_mangle]
pub extern "C" fn cudaDestroyTextureObject(object: u64) -> Error {
    api("cudaDestroyTextureObject", || destroy(object))
}

/// Frees a texture's or surface's description, once the work in flight no longer reads it.
fn destroy(object: u64) -> Error {
    if object == 0 {
        return SUCCESS;
    }
    if textures().objects.remove(&object).is_none() {
        return ret(INVALID_VALUE);
    }
    super::inflight::drain();
    ret(release(object as *mut c_void, &[Kind::Device]))
}

#[no_mangle]
pub extern "C" fn cudaGetTextureObjectResourceDesc(out: *mut ResourceDesc, object: u64) -> Error {
    api("cudaGetTextureObjectResourceDesc", || match textures().objects.get(&object) {
        Some(&(r, _)) => put(out, r),
        None => ret(INVALID_VALUE),
    })
}

#[no_mangle]
pub extern "C" fn cudaGetTextureObjectTextureDesc(out: *mut TextureDesc, object: u64) -> Error {
    api("cudaGetTextureObjectTextureDesc", || match textures().objects.get(&object) {
        Some(&(_, t)) => put(out, t),
        None => ret(INVALID_VALUE),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layouts the device's fetch and CUDA's headers have.
    #[test]
    fn layouts_are_those_of_the_c_structs() {
        assert_eq!(std::mem::size_of::<ChannelFormatDesc>(), 20);
        assert_eq!(std::mem::size_of::<ResourceDesc>(), 64);
        assert_eq!(std::mem::size_of::<TextureDesc>(), 72);
        assert_eq!(std::mem::size_of::<Texture>(), 96);
        assert_eq!(std::mem::offset_of!(Texture, border), 76);
    }

    #[test]
    fn formats_textures_read_are_known() {
        let d = |x, y, z, w, f| ChannelFormatDesc { x, y, z, w, f };
        assert_eq!(d(32, 0, 0, 0, 2).shape(), Some((1, 4)));
        assert_eq!(d(8, 8, 8, 8, 1).shape(), Some((4, 1)));
        assert_eq!(d(16, 16, 0, 0, 2).shape(), Some((2, 2)));
        assert_eq!(d(8, 8, 8, 0, 1).shape(), None, "three channels");
        assert_eq!(d(8, 16, 0, 0, 1).shape(), None, "mixed sizes");
        assert_eq!(d(8, 0, 0, 0, 2).shape(), None, "8-bit floats");
        assert_eq!(d(0, 0, 0, 0, 0).shape(), None);
    }
}
