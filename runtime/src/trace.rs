//! Access traces, the oracle of the analysis's tests: an executable built with
//! `hpvm-mgpu build --trace-accesses` reports every buffer access of every leaf instance
//! here, and with `HPVM_MGPU_TRACE=FILE` they are written to FILE, one line each:
//!
//! ```text
//! NODE <tab> id x,y,z <tab> parent id x,y,z <tab> counts x,y,z <tab> parent counts x,y,z
//!      <tab> scalar parameters (by position; 0 for non-integers) <tab> PARAM <tab> OFFSET
//!      <tab> BYTES <tab> r|w|rw <tab> VALUE
//! ```
//!
//! VALUE is the integer an integer read got (sign-extended to 64 bits), `-` for any other
//! access.
//!
//! OFFSET is in bytes from the pointer parameter PARAM (-1: a pointer the instrumentation
//! could not trace back to a parameter). Lines of different threads interleave, but each
//! carries its instance. The file is complete after `__hpvm__cleanup`.

use std::cell::RefCell;
use std::ffi::{c_char, CStr};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::{Mutex, OnceLock};

fn sink() -> &'static Mutex<Option<BufWriter<File>>> {
    static SINK: OnceLock<Mutex<Option<BufWriter<File>>>> = OnceLock::new();
    SINK.get_or_init(|| {
        let file = std::env::var_os("HPVM_MGPU_TRACE").map(|p| {
            File::create(&p).unwrap_or_else(|e| {
                crate::fatal(&format!("HPVM_MGPU_TRACE={}: {e}", std::path::Path::new(&p).display()))
            })
        });
        Mutex::new(file.map(BufWriter::new))
    })
}

thread_local! {
    /// The instance part of this thread's current lines.
    static INSTANCE: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Starts the lines of one instance of node `name`: `ids` holds id, parent id, counts and
/// parent counts (3 each), `scalars` the node's parameters as integers.
pub fn instance(name: &CStr, ids: &[i64; 12], scalars: &[i64]) {
    let join = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    INSTANCE.with(|i| {
        *i.borrow_mut() = format!(
            "{}\t{}\t{}\t{}\t{}\t{}",
            name.to_string_lossy(),
            join(&ids[0..3]),
            join(&ids[3..6]),
            join(&ids[6..9]),
            join(&ids[9..12]),
            join(scalars)
        )
    });
}

/// One access of the current instance.
pub fn access(param: i32, offset: i64, bytes: u32, kind: u32, value: Option<i64>) {
    let kind = match kind {
        0 => "r",
        1 => "w",
        _ => "rw",
    };
    let mut sink = sink().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(out) = sink.as_mut() {
        INSTANCE.with(|i| {
            let value = value.map_or("-".to_string(), |v| v.to_string());
            let _ = writeln!(out, "{}\t{param}\t{offset}\t{bytes}\t{kind}\t{value}", i.borrow());
        });
    }
}

/// Writes out what is buffered.
pub fn flush() {
    if let Some(out) = sink().lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        if let Err(e) = out.flush() {
            crate::fatal(&format!("HPVM_MGPU_TRACE: {e}"));
        }
    }
}

/// # Safety
/// `name` is a NUL-terminated string, `ids` 12 integers, `scalars` `n` integers.
pub unsafe fn instance_raw(name: *const c_char, ids: *const i64, scalars: *const i64, n: u32) {
    let name = unsafe { CStr::from_ptr(name) };
    let ids: &[i64; 12] = unsafe { &*(ids as *const [i64; 12]) };
    let scalars = if n == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(scalars, n as usize) } };
    instance(name, ids, scalars);
}
