//! Which pages of a tracked buffer the host wrote since the runtime last looked: Linux's
//! asynchronous userfaultfd write-protection (`UFFD_FEATURE_WP_ASYNC`, Linux 6.7) read and
//! re-armed by the pagemap scan (`PAGEMAP_SCAN` on `/proc/self/pagemap`).
//!
//! A watched range is registered for write-protection once and protected; the first write to
//! a protected page, by the program's stores or by the kernel on its behalf (`read()` into the
//! buffer, which `mprotect` would fail with `EFAULT`), takes one fault that the kernel resolves
//! by itself (no handler thread; about 2 µs per page here) and leaves the page marked written.
//! A scan reports the written pages of a range and protects them again, atomically, so a write
//! is seen by exactly one scan. Linux's soft-dirty bits would do the same, but clearing them is
//! process-wide (a scan of one buffer would lose another's writes) and kernels built without
//! `CONFIG_MEM_SOFT_DIRTY` (the machines we run on) do not have them.
//!
//! Invariants:
//! - only pages wholly inside a buffer are watched: a page shared with other data (a small
//!   allocation's neighbours) is protected and scanned by no one (one scan would hide a
//!   write from the other's); the caller compares the buffer's bytes in such pages ([`edges`])
//!   with a copy instead;
//! - a scan that fails (the memory was unmapped and mapped anew, so its pages lost their
//!   protection) reports the whole range written: a false "written" costs a resend, a false
//!   "unwritten" would be a wrong answer.
//!
//! Where the mechanism is missing (an older kernel, no userfaultfd permission), [`watcher`]
//! says why once, and the caller takes every byte the host holds as written (HPVM's rule).

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

pub(crate) const PAGE: u64 = 4096;

// The kernel's ABI (include/uapi/linux/userfaultfd.h and fs.h, Linux 6.7); Debian 12's
// headers predate the scan, so the constants are spelled out here and checked by size.
const UFFD_API: u64 = 0xAA;
const UFFD_FEATURE_WP_UNPOPULATED: u64 = 1 << 13;
const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1 << 0;
const PM_SCAN_WP_MATCHING: u64 = 1 << 0;
const PM_SCAN_CHECK_WPASYNC: u64 = 1 << 1;
const PAGE_IS_WRITTEN: u64 = 1 << 1;

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct UffdioRange {
    start: u64,
    len: u64,
}

#[repr(C)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioWriteprotect {
    range: UffdioRange,
    mode: u64,
}

#[repr(C)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

const _: () = {
    assert!(std::mem::size_of::<UffdioApi>() == 24);
    assert!(std::mem::size_of::<UffdioRegister>() == 32);
    assert!(std::mem::size_of::<UffdioWriteprotect>() == 24);
    assert!(std::mem::size_of::<PmScanArg>() == 96);
    assert!(std::mem::size_of::<PageRegion>() == 24);
};

/// `_IOWR(ty, nr, T)`.
const fn iowr<T>(ty: u8, nr: u8) -> u64 {
    (3 << 30) | ((std::mem::size_of::<T>() as u64) << 16) | ((ty as u64) << 8) | nr as u64
}

const UFFDIO_API: u64 = iowr::<UffdioApi>(0xAA, 0x3F);
const UFFDIO_REGISTER: u64 = iowr::<UffdioRegister>(0xAA, 0x00);
const UFFDIO_WRITEPROTECT: u64 = iowr::<UffdioWriteprotect>(0xAA, 0x06);
const PAGEMAP_SCAN: u64 = iowr::<PmScanArg>(b'f', 16);

/// The process's userfaultfd (write-protection only) and its pagemap.
pub struct Watcher {
    uffd: OwnedFd,
    pagemap: File,
}

/// The pages of `[start, start + size)` a watcher can own: those wholly inside it.
fn interior(start: u64, size: u64) -> Option<(u64, u64)> {
    let lo = start.checked_add(PAGE - 1)? / PAGE * PAGE;
    let hi = (start + size) / PAGE * PAGE;
    (lo < hi).then_some((lo, hi))
}

fn ioctl<T>(fd: i32, request: u64, arg: &mut T) -> std::io::Result<i64> {
    // SAFETY: `arg` is the structure `request` names (checked by size above), valid for the
    // call; the kernel reads and writes only it (and, for a scan, the vector it points to).
    let r = unsafe { libc::ioctl(fd, request as _, arg as *mut T) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r as i64)
    }
}

impl Watcher {
    fn open() -> Result<Watcher, String> {
        // SAFETY: the userfaultfd system call takes flags only.
        let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | libc::O_NONBLOCK) };
        if fd < 0 {
            return Err(format!("userfaultfd: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: a descriptor the call above just opened, owned from here on.
        let uffd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let mut api =
            UffdioApi { api: UFFD_API, features: UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED, ioctls: 0 };
        ioctl(uffd.as_raw_fd(), UFFDIO_API, &mut api)
            .map_err(|e| format!("userfaultfd without asynchronous write-protection (Linux 6.7 has it): {e}"))?;
        let pagemap = File::open("/proc/self/pagemap").map_err(|e| format!("/proc/self/pagemap: {e}"))?;
        let w = Watcher { uffd, pagemap };
        // The scan may be missing even where the feature is not (it came with it, but check).
        let mut probe = [PageRegion::default(); 1];
        w.scan(0, 0, &mut probe, false).map_err(|e| format!("the pagemap scan ioctl: {e}"))?;
        Ok(w)
    }

    /// Starts watching the pages wholly inside `[start, start + size)`: registered, then
    /// protected. False where the kernel refuses the memory (not anonymous, say).
    pub fn watch(&self, start: u64, size: u64) -> bool {
        let Some((lo, hi)) = interior(start, size) else { return true };
        let range = UffdioRange { start: lo, len: hi - lo };
        let mut reg = UffdioRegister { range, mode: UFFDIO_REGISTER_MODE_WP, ioctls: 0 };
        if ioctl(self.uffd.as_raw_fd(), UFFDIO_REGISTER, &mut reg).is_err() {
            return false;
        }
        self.protect(lo, hi)
    }

    /// Protects the watched pages wholly inside `[start, start + size)` again (after the
    /// runtime itself wrote them: its copies back to the host are not the program's writes).
    pub fn rearm(&self, start: u64, size: u64) -> bool {
        match interior(start, size) {
            Some((lo, hi)) => self.protect(lo, hi),
            None => true,
        }
    }

    fn protect(&self, lo: u64, hi: u64) -> bool {
        let mut wp =
            UffdioWriteprotect { range: UffdioRange { start: lo, len: hi - lo }, mode: UFFDIO_WRITEPROTECT_MODE_WP };
        ioctl(self.uffd.as_raw_fd(), UFFDIO_WRITEPROTECT, &mut wp).is_ok()
    }

    /// One scan of `[lo, hi)` (page-aligned) for written pages, protecting them again where
    /// `rearm`; fills `out` and returns how many regions it holds and where the walk ended.
    fn scan(&self, lo: u64, hi: u64, out: &mut [PageRegion], rearm: bool) -> std::io::Result<(usize, u64)> {
        let mut arg = PmScanArg {
            size: std::mem::size_of::<PmScanArg>() as u64,
            flags: if rearm { PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC } else { 0 },
            start: lo,
            end: hi,
            walk_end: 0,
            vec: out.as_mut_ptr() as u64,
            vec_len: out.len() as u64,
            max_pages: 0,
            category_inverted: 0,
            category_mask: PAGE_IS_WRITTEN,
            category_anyof_mask: 0,
            return_mask: PAGE_IS_WRITTEN,
        };
        let n = ioctl(self.pagemap.as_raw_fd(), PAGEMAP_SCAN, &mut arg)?;
        Ok((n as usize, arg.walk_end))
    }

    /// The byte runs (offsets into the buffer at `start`, `size` bytes) of its watched pages
    /// ([`interior`]) the host may have written since the last look, and protects them again.
    /// A failed scan gives the whole buffer.
    pub fn written(&self, start: u64, size: u64) -> Written {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let Some((lo, hi)) = interior(start, size) else {
            return Written { runs, complete: true };
        };
        let mut regions = [PageRegion::default(); 64];
        let mut at = lo;
        while at < hi {
            match self.scan(at, hi, &mut regions, true) {
                Ok((n, walk_end)) => {
                    for r in &regions[..n] {
                        let (a, b) = (r.start - start, r.end - start);
                        // Adjacent regions of separate scans merge.
                        match runs.last_mut() {
                            Some(l) if a <= l.1 => l.1 = l.1.max(b),
                            _ => runs.push((a, b)),
                        }
                    }
                    // A full vector stops the walk early; otherwise it went to `hi`.
                    at = if n == regions.len() && walk_end > at { walk_end } else { hi };
                }
                Err(_) => return Written { runs: vec![(0, size)], complete: false },
            }
        }
        Written { runs, complete: true }
    }
}

/// The byte runs (offsets) of a buffer at `start`, `size` bytes, that no page of it holds
/// whole: the caller compares their contents instead (at most two pages' worth).
pub fn edges(start: u64, size: u64) -> Vec<(u64, u64)> {
    match interior(start, size) {
        None if size > 0 => vec![(0, size)],
        None => Vec::new(),
        Some((lo, hi)) => [(0, lo - start), (hi - start, size)].into_iter().filter(|(a, b)| a < b).collect(),
    }
}

/// What a look at a watched buffer found.
pub struct Written {
    /// Byte runs (offsets into the buffer), sorted and disjoint.
    pub runs: Vec<(u64, u64)>,
    /// False when the scan failed and `runs` is the whole buffer for want of knowing.
    pub complete: bool,
}

/// The process's watcher, or why there is none.
pub fn watcher() -> Result<&'static Watcher, &'static str> {
    static W: OnceLock<Result<Watcher, String>> = OnceLock::new();
    W.get_or_init(Watcher::open).as_ref().map_err(String::as_str)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Page-aligned memory of `pages` pages, its own mapping (the guard's tests use it too).
    pub(in crate::memory) struct Mapping(*mut u8, usize);

    impl Mapping {
        pub(in crate::memory) fn new(pages: usize) -> Mapping {
            let len = pages * PAGE as usize;
            // SAFETY: an anonymous private mapping, unmapped on drop.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(p, libc::MAP_FAILED);
            Mapping(p as *mut u8, len)
        }

        pub(in crate::memory) fn at(&self, offset: usize) -> *mut u8 {
            assert!(offset < self.1);
            // SAFETY: inside the mapping.
            unsafe { self.0.add(offset) }
        }
    }

    impl Drop for Mapping {
        fn drop(&mut self) {
            // SAFETY: the mapping made in `new`.
            unsafe { libc::munmap(self.0 as *mut libc::c_void, self.1) };
        }
    }

    #[test]
    fn interior_pages_are_those_wholly_inside() {
        assert_eq!(edges(4000, 8192), vec![(0, 96), (4192, 8192)]);
        assert_eq!(edges(4096, 8192), vec![]);
        assert_eq!(edges(4000, 100), vec![(0, 100)]);
        assert_eq!(interior(4096, 8192), Some((4096, 12288)));
        assert_eq!(interior(4000, 8192), Some((4096, 8192)));
        assert_eq!(interior(4000, 4200), Some((4096, 8192)));
        assert_eq!(interior(4000, 4100), None);
        assert_eq!(interior(100, 5000), None);
    }

    /// Stores and a `read()` into watched memory are seen once each; the partial pages at the
    /// ends are always reported; pages never written are not. Skipped (with a message) where
    /// the kernel lacks the mechanism: the runtime then assumes every byte written.
    #[test]
    fn stores_and_system_call_writes_are_seen_once() {
        let w = match watcher() {
            Ok(w) => w,
            Err(why) => {
                eprintln!("skipped: no write watching here: {why}");
                return;
            }
        };
        let m = Mapping::new(16);
        // A buffer from the middle of page 1 to the middle of page 13.
        let start = m.at(4096 + 100) as u64;
        let size = 12 * 4096;
        assert!(w.watch(start, size));
        // Offsets into the buffer: of page `p` of the mapping, and of the partial pages at the ends.
        let page = |p: u64| (p * 4096 - 4196, (p + 1) * 4096 - 4196);
        assert_eq!(edges(start, size), vec![(0, page(2).0), (page(13).0, size)]);
        // Nothing was written since the watch began.
        assert_eq!(w.written(start, size).runs, vec![]);
        // SAFETY: inside the mapping.
        unsafe { *m.at(5 * 4096 + 7) = 1 };
        let mut fds = [0i32; 2];
        // SAFETY: a pipe, its ends closed below.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let msg = b"written by the kernel";
        // SAFETY: the pipe's ends; `m.at(9 * 4096)` has room for the message.
        unsafe {
            assert_eq!(libc::write(fds[1], msg.as_ptr() as *const libc::c_void, msg.len()), msg.len() as isize);
            assert_eq!(libc::read(fds[0], m.at(9 * 4096) as *mut libc::c_void, msg.len()), msg.len() as isize);
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        let seen = w.written(start, size);
        assert_eq!(seen.runs, vec![page(5), page(9)]);
        assert!(seen.complete);
        // Seen once: the scan protected them again.
        assert_eq!(w.written(start, size).runs, vec![]);
    }

    /// Memory unmapped and mapped anew loses its protection: the scan fails and reports the
    /// whole buffer, never nothing.
    #[test]
    fn memory_mapped_anew_counts_as_written_whole() {
        let Ok(w) = watcher() else { return };
        let (start, size) = {
            let m = Mapping::new(8);
            let start = m.at(0) as u64;
            assert!(w.watch(start, 8 * 4096));
            (start, 8 * 4096)
        };
        // SAFETY: a fresh mapping at the same address, unmapped below; nothing else uses it.
        let p = unsafe {
            libc::mmap(
                start as *mut libc::c_void,
                size as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        if p != start as *mut libc::c_void {
            eprintln!("skipped: the address was taken again");
            return;
        }
        let seen = w.written(start, size);
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(p, size as usize) };
        assert_eq!(seen.runs, vec![(0, size)]);
    }
}
