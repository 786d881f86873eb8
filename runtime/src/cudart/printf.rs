//! Device `printf` on the CPU (simulated devices, the host): clang gives a kernel's
//! `printf(format, ...)` to `vprintf(format, arguments)`, the arguments packed in a struct as
//! C passes variadic ones (`float` as `double`, `char` and `short` as `int`), each at its
//! natural alignment. This reads that struct as the format says and prints through the C
//! library, one conversion at a time, so the program's own `printf`s and these share one
//! stream. A whole call is printed under one lock: lines of concurrent instances never mix.

use std::ffi::{c_char, c_int, CStr};
use std::sync::Mutex;

/// One piece of the format: literal text, or a conversion and the size of its argument.
#[derive(Debug, PartialEq)]
enum Piece<'a> {
    Text(&'a [u8]),
    /// The conversion's text (`%-8.3lf`) and the bytes of its argument: 4 (an `int`), 8 (a
    /// `long`, pointer or `double`); `*` widths and precisions take an `int` each first.
    Conversion {
        spec: &'a [u8],
        stars: usize,
        size: usize,
        float: bool,
        string: bool,
    },
}

fn pieces(fmt: &[u8]) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < fmt.len() {
        let start = i;
        if fmt[i] != b'%' {
            while i < fmt.len() && fmt[i] != b'%' {
                i += 1;
            }
            out.push(Piece::Text(&fmt[start..i]));
            continue;
        }
        if fmt.get(i + 1) == Some(&b'%') {
            out.push(Piece::Text(b"%"));
            i += 2;
            continue;
        }
        i += 1;
        let mut stars = 0;
        while i < fmt.len() && b"-+ #0123456789.*".contains(&fmt[i]) {
            stars += usize::from(fmt[i] == b'*');
            i += 1;
        }
        let mut long = false;
        while i < fmt.len() && b"hlLqjzt".contains(&fmt[i]) {
            long |= matches!(fmt[i], b'l' | b'L' | b'q' | b'j' | b'z' | b't');
            i += 1;
        }
        let Some(&conv) = fmt.get(i) else {
            out.push(Piece::Text(&fmt[start..]));
            break;
        };
        i += 1;
        let (size, float, string) = match conv {
            b'f' | b'F' | b'e' | b'E' | b'g' | b'G' | b'a' | b'A' => (8, true, false),
            b's' => (8, false, true),
            b'p' => (8, false, false),
            b'd' | b'i' | b'u' | b'x' | b'X' | b'o' | b'c' => (if long { 8 } else { 4 }, false, false),
            // Not a conversion C knows: printed as written, taking nothing.
            _ => {
                out.push(Piece::Text(&fmt[start..i]));
                continue;
            }
        };
        out.push(Piece::Conversion { spec: &fmt[start..i], stars, size, float, string });
    }
    out
}

/// Reads argument after argument from the packed struct.
struct Args {
    at: *const u8,
    offset: usize,
}

impl Args {
    /// The next argument of `size` bytes, at its natural alignment.
    ///
    /// # Safety
    /// The struct holds such an argument here (the format matches the call's arguments,
    /// which C's `printf` demands too).
    unsafe fn next(&mut self, size: usize) -> u64 {
        self.offset = self.offset.div_ceil(size) * size;
        let p = self.at.add(self.offset);
        self.offset += size;
        if size == 8 {
            (p as *const u64).read_unaligned()
        } else {
            u64::from((p as *const u32).read_unaligned())
        }
    }
}

static PRINTING: Mutex<()> = Mutex::new(());

/// `vprintf` of device code on the CPU: the number of bytes printed.
///
/// # Safety
/// `fmt` is a NUL-terminated format and `args` the packed arguments it describes.
#[no_mangle]
pub unsafe extern "C" fn hpvm_rt_device_printf(fmt: *const c_char, args: *const u8) -> c_int {
    if fmt.is_null() {
        return -1;
    }
    let fmt = CStr::from_ptr(fmt).to_bytes();
    let mut args = Args { at: args, offset: 0 };
    let _one_call = PRINTING.lock().unwrap_or_else(|e| e.into_inner());
    let mut printed = 0;
    for piece in pieces(fmt) {
        let n = match piece {
            Piece::Text(t) => {
                let text = std::ffi::CString::new(t).unwrap_or_default();
                libc::printf(c"%s".as_ptr(), text.as_ptr())
            }
            Piece::Conversion { spec, stars, size, float, string } => {
                let spec = std::ffi::CString::new(spec).unwrap_or_default();
                let mut star = [0 as c_int; 2];
                for s in star.iter_mut().take(stars.min(2)) {
                    *s = args.next(4) as u32 as c_int;
                }
                let v = args.next(size);
                // A null string prints as glibc prints it.
                let v = if string && v == 0 { c"(null)".as_ptr() as u64 } else { v };
                match (stars.min(2), float) {
                    (0, true) => libc::printf(spec.as_ptr(), f64::from_bits(v)),
                    (1, true) => libc::printf(spec.as_ptr(), star[0], f64::from_bits(v)),
                    (_, true) => libc::printf(spec.as_ptr(), star[0], star[1], f64::from_bits(v)),
                    (0, false) => libc::printf(spec.as_ptr(), v),
                    (1, false) => libc::printf(spec.as_ptr(), star[0], v),
                    (_, false) => libc::printf(spec.as_ptr(), star[0], star[1], v),
                }
            }
        };
        printed += n.max(0);
    }
    printed
}

/// A device `assert` that failed, on the CPU (clang gives `assert` in device code to CUDA's
/// `__assertfail`; on a GPU the driver provides it and the kernel traps). Prints CUDA's line
/// for it and ends the program, as a failed assertion ends a CUDA program's kernel and
/// leaves its context unusable.
///
/// # Safety
/// `message`, `file` and `function` are NUL-terminated strings of the program (or null).
#[no_mangle]
pub unsafe extern "C" fn __assertfail(
    message: *const c_char,
    file: *const c_char,
    line: std::ffi::c_uint,
    function: *const c_char,
    _char_size: usize,
) {
    let text = |p: *const c_char| {
        // SAFETY: the caller's string, or null.
        if p.is_null() {
            String::new()
        } else {
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    let (message, file, function) = (text(message), text(file), text(function));
    // Not between the pieces of a concurrent instance's printf.
    let _printing = PRINTING.lock();
    crate::fatal(&format!("{file}:{line}: {function}: device-side assertion `{message}` failed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_split_into_text_and_sized_conversions() {
        let p = pieces(b"t%d a=%5.2f %s %lld %% %*d%c");
        assert_eq!(p[0], Piece::Text(b"t"));
        assert!(matches!(p[1], Piece::Conversion { size: 4, float: false, .. }));
        assert_eq!(p[2], Piece::Text(b" a="));
        assert!(matches!(p[3], Piece::Conversion { size: 8, float: true, .. }));
        assert!(matches!(p[5], Piece::Conversion { size: 8, string: true, .. }));
        assert!(matches!(p[7], Piece::Conversion { size: 8, float: false, .. }));
        assert_eq!(p[8], Piece::Text(b" "));
        assert_eq!(p[9], Piece::Text(b"%"));
        assert!(matches!(p[11], Piece::Conversion { stars: 1, size: 4, .. }));
        assert!(matches!(p[12], Piece::Conversion { size: 4, .. }));
    }

    #[test]
    fn arguments_are_read_at_their_natural_alignment() {
        // { i32 7, double 1.5, i64 -2 }: the double at offset 8.
        let mut buf = [0u8; 24];
        buf[..4].copy_from_slice(&7i32.to_ne_bytes());
        buf[8..16].copy_from_slice(&1.5f64.to_ne_bytes());
        buf[16..].copy_from_slice(&(-2i64).to_ne_bytes());
        let mut a = Args { at: buf.as_ptr(), offset: 0 };
        unsafe {
            assert_eq!(a.next(4), 7);
            assert_eq!(f64::from_bits(a.next(8)), 1.5);
            assert_eq!(a.next(8) as i64, -2);
        }
    }
}
