//! A crash inside a leaf, named: when a leaf's own code faults on the CPU (an out-of-bounds
//! read past a buffer, a division by zero), the process still dies of the same signal, but
//! first says which node was running (its name and file:line), the faulting address, and the
//! nearest tracked buffer (its size, and how far past its end or before its start the address
//! is), and flushes the program's buffered output, which would otherwise be lost.
//!
//! How: every leaf call marks its thread with the node it runs ([`Running`]), and the memory
//! layer lists the address ranges of tracked buffers and of their simulated devices' copies
//! ([`note_region`]). A handler for SIGSEGV, SIGBUS and SIGFPE, installed at `__hpvm__init`
//! ([`install`]), reads both, writes one line to stderr, and puts the previous handler back;
//! returning re-executes the faulting instruction, which faults again into that handler
//! (by default: death by the signal, a core dump where enabled).
//!
//! Then the faulting line: the handler runs `addr2line` (binutils) in a child process on this
//! executable's line tables, for the instruction that faulted and the lines it was inlined
//! into; without `addr2line` the node's line is all there is.
//!
//! The memory layer also guards pages (`memory::guard`): a SIGSEGV goes first to the hook it
//! sets ([`set_fault_hook`]), which either takes the fault (the store is retried, or the run
//! stops naming the store's line) or leaves it to the rest of this handler. To tell the
//! program's stores from the runtime's, the runtime's C entry points mark their thread
//! ([`InRuntime`]); [`programs_store`] reads that mark, the leaf mark and the thread's name.
//!
//! Invariants (what a signal handler may do):
//! - no allocation and no lock it could wait for: the message is formatted into a buffer on
//!   the handler's stack, the region list is read only if its lock is free at once (it is
//!   held for microseconds, never by a leaf), and the node is a pointer the leaf's own thread
//!   wrote;
//! - a fault outside a leaf (the runtime's, or the program's host code) is left to the
//!   previous handler untouched.

use crate::desc::NodeDesc;
use std::cell::Cell;
use std::sync::Mutex;

thread_local! {
    /// The leaf this thread runs now (null when none).
    static RUNNING: Cell<*const NodeDesc> = const { Cell::new(std::ptr::null()) };
}

thread_local! {
    /// How deep the calling thread is inside the runtime's C entry points.
    static IN_RUNTIME: Cell<u32> = const { Cell::new(0) };
}

/// Marks the calling thread as running the runtime's code (a C entry point) until dropped:
/// a store it makes is never the program's ([`programs_store`]).
pub struct InRuntime(());

impl InRuntime {
    pub fn enter() -> InRuntime {
        IN_RUNTIME.with(|d| d.set(d.get() + 1));
        InRuntime(())
    }
}

impl Drop for InRuntime {
    fn drop(&mut self) {
        IN_RUNTIME.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Whether the calling thread, interrupted by a fault, was running the program's own host
/// code: not inside a runtime entry point ([`InRuntime`]), not running a leaf, and not one
/// of the runtime's threads (all named `hpvm-...`). Async-signal-safe.
pub fn programs_store() -> bool {
    if IN_RUNTIME.with(|d| d.get()) > 0 || !RUNNING.with(|r| r.get()).is_null() {
        return false;
    }
    let mut name = [0u8; 17];
    // SAFETY: PR_GET_NAME writes at most 16 bytes and a NUL into the buffer.
    let named = unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) } == 0;
    !(named && name.starts_with(b"hpvm-"))
}

/// Where a fault happened: the faulting instruction, and the return address a leaf function
/// of a library (`memset`, `memcpy`) would return to (the word at the stack pointer on
/// x86-64, the link register on AArch64; a guess, checked against the executable's code).
#[derive(Clone, Copy, Debug)]
pub struct Site {
    pub pc: u64,
    pub return_guess: u64,
}

/// A hook that sees every SIGSEGV first: given the faulting address and where it happened, it
/// returns true where it took the fault (the instruction is then retried) and false to leave
/// it to the crash handler. It must be async-signal-safe until it decides to end the run.
pub type FaultHook = fn(addr: u64, site: Option<Site>) -> bool;

static FAULT_HOOK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Sets the fault hook (one per process; the memory layer's page guard) and installs the
/// handler if it is not yet.
pub fn set_fault_hook(hook: FaultHook) {
    FAULT_HOOK.store(hook as usize, std::sync::atomic::Ordering::Release);
    install();
}

/// Marks the calling thread as running a leaf of `node` until dropped (the mark before is
/// restored: a simulated device's thread runs leaves of several nodes in turn).
pub struct Running(*const NodeDesc);

impl Running {
    pub fn enter(node: &NodeDesc) -> Running {
        Running(RUNNING.with(|r| r.replace(node)))
    }
}

/// The node noted as running on this thread (null for none), to put back with [`set_running`]
/// where a guard cannot drop (`crate::fiber`'s ended instances).
pub fn running() -> *const NodeDesc {
    RUNNING.with(|r| r.get())
}

pub fn set_running(node: *const NodeDesc) {
    RUNNING.with(|r| r.set(node));
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.with(|r| r.set(self.0));
    }
}

/// An address range the program's leaves may touch: a tracked buffer on the host or its copy
/// on a simulated device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub start: u64,
    pub size: u64,
    /// The buffer's host address (its name for the program).
    pub buffer: u64,
    /// Where: `None` the host, `Some(k)` device `k`'s copy.
    pub device: Option<usize>,
}

static REGIONS: Mutex<Vec<Region>> = Mutex::new(Vec::new());

/// Adds a region (see [`Region`]).
pub fn note_region(r: Region) {
    REGIONS.lock().unwrap_or_else(|e| e.into_inner()).push(r);
}

/// Forgets the regions of the buffer whose host address is `buffer`.
pub fn forget_buffer(buffer: u64) {
    REGIONS.lock().unwrap_or_else(|e| e.into_inner()).retain(|r| r.buffer != buffer);
}

/// The region nearest to `addr`, and the address's offset from its start (negative before
/// it, at least its size past its end).
fn nearest(regions: &[Region], addr: u64) -> Option<(Region, i128)> {
    let distance = |r: &Region| {
        let offset = addr as i128 - r.start as i128;
        if offset < 0 {
            -offset
        } else {
            (offset - r.size as i128 + 1).max(0)
        }
    };
    regions.iter().min_by_key(|r| distance(r)).map(|r| (*r, addr as i128 - r.start as i128))
}

/// A fixed buffer that `write!` fills without allocating; what does not fit is dropped.
struct Line {
    buf: [u8; 1024],
    len: usize,
}

impl std::fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let room = self.buf.len() - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// The line the handler writes: the node (`name`, `loc`), the signal and address, the
/// nearest buffer and the address's offset in it.
fn describe(
    out: &mut impl std::fmt::Write,
    name: &str,
    loc: &str,
    signal: i32,
    addr: u64,
    near: Option<(Region, i128)>,
) {
    let what = match signal {
        libc::SIGSEGV => "SIGSEGV (an access to memory it may not touch)",
        libc::SIGBUS => "SIGBUS (an access the memory cannot serve)",
        libc::SIGFPE => "SIGFPE (an arithmetic fault, such as an integer division by zero)",
        _ => "a signal",
    };
    let _ = write!(out, "hpvm-mgpu: node {name} ({loc}) crashed with {what} at address {addr:#x}");
    if signal != libc::SIGFPE {
        match near {
            Some((r, offset)) => {
                let _ = write!(out, ": byte {offset} of the tracked buffer {:#x} ", r.buffer);
                let _ = match r.device {
                    None => write!(out, "(on the host"),
                    Some(k) => write!(out, "(device {k}'s copy"),
                };
                let _ = write!(out, ", {} bytes)", r.size);
                let _ = if offset < 0 {
                    write!(out, ", before its start")
                } else if offset >= r.size as i128 {
                    write!(out, ", past its end")
                } else {
                    Ok(())
                };
            }
            None => {
                let _ = write!(out, " (no tracked buffer is known)");
            }
        }
    }
    let _ = writeln!(out);
}

const SIGNALS: [i32; 3] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE];

/// The handlers in place before [`install`], by position in [`SIGNALS`].
static mut PREVIOUS: [std::mem::MaybeUninit<libc::sigaction>; 3] = [std::mem::MaybeUninit::uninit(); 3];

extern "C" fn on_signal(signal: i32, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let hook = FAULT_HOOK.load(std::sync::atomic::Ordering::Acquire);
    if signal == libc::SIGSEGV && hook != 0 {
        // SAFETY: only `set_fault_hook` stores here, and it stores a `FaultHook`; the kernel
        // passes the signal's information.
        let (hook, addr) = unsafe { (std::mem::transmute::<usize, FaultHook>(hook), (*info).si_addr() as u64) };
        if hook(addr, fault_site(_ctx)) {
            return;
        }
    }
    let node = RUNNING.with(|r| r.get());
    let slot = SIGNALS.iter().position(|&s| s == signal);
    if !node.is_null() {
        // SAFETY: the kernel passes the signal's information; the node pointer was set by
        // this thread's running leaf, whose description lives as long as the module.
        let (addr, node) = unsafe { ((*info).si_addr() as u64, &*node) };
        let near = REGIONS.try_lock().ok().and_then(|r| nearest(&r, addr));
        let mut line = Line { buf: [0; 1024], len: 0 };
        describe(&mut line, node.shown(), &node.loc, signal, addr, near);
        // SAFETY: writing bytes of our buffer to stderr; flushing the C library's streams
        // (the program's `printf`s) so the output it buffered is not lost with the process.
        unsafe {
            libc::write(2, line.buf.as_ptr() as *const libc::c_void, line.len);
            libc::fflush(std::ptr::null_mut());
        }
        if let Some(pc) = faulting_pc(_ctx) {
            name_the_line(pc);
        }
    }
    // Back to the handler before ours; returning makes the instruction fault into it.
    if let Some(i) = slot {
        // SAFETY: `PREVIOUS[i]` was filled by `install` before this handler was installed.
        unsafe {
            let previous = (*std::ptr::addr_of!(PREVIOUS))[i].as_ptr();
            libc::sigaction(signal, previous, std::ptr::null_mut());
        }
    }
}

/// The instruction that faulted, from the signal's context.
fn faulting_pc(ctx: *mut libc::c_void) -> Option<u64> {
    if ctx.is_null() {
        return None;
    }
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    // SAFETY: the kernel passes a `ucontext_t` to an SA_SIGINFO handler.
    return Some(unsafe { (*(ctx as *const libc::ucontext_t)).uc_mcontext.gregs[libc::REG_RIP as usize] as u64 });
    #[cfg(all(target_os = "linux", target_arch = "aarch64"))]
    // SAFETY: as above.
    return Some(unsafe { (*(ctx as *const libc::ucontext_t)).uc_mcontext.pc });
    #[allow(unreachable_code)]
    None
}

/// Where the fault happened, from the signal's context (see [`Site`]).
fn fault_site(ctx: *mut libc::c_void) -> Option<Site> {
    let pc = faulting_pc(ctx)?;
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    // SAFETY: the kernel passes a `ucontext_t`; the stack pointer of the interrupted thread
    // points into its own stack, which is mapped.
    let return_guess = unsafe {
        let sp = (*(ctx as *const libc::ucontext_t)).uc_mcontext.gregs[libc::REG_RSP as usize] as *const u64;
        sp.read_unaligned()
    };
    #[cfg(all(target_os = "linux", target_arch = "aarch64"))]
    // SAFETY: as above.
    let return_guess = unsafe { (*(ctx as *const libc::ucontext_t)).uc_mcontext.regs[30] };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let return_guess = 0;
    Some(Site { pc, return_guess })
}

/// What naming the faulting line takes, found at [`install`] (a signal handler may not look
/// it up): `addr2line` (binutils), this executable, and where it is loaded.
struct Symbolizer {
    tool: std::ffi::CString,
    exe: std::ffi::CString,
    base: u64,
}

static SYMBOLIZER: std::sync::OnceLock<Option<Symbolizer>> = std::sync::OnceLock::new();

fn symbolizer() -> Option<Symbolizer> {
    let tool = std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| std::path::Path::new(d).join("addr2line"))
        .find(|p| p.is_file())?;
    let exe = std::fs::read_link("/proc/self/exe").ok()?;
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: the address of a function of this executable (the runtime links statically).
    if unsafe { libc::dladdr(install as *const libc::c_void, &mut info) } == 0 {
        return None;
    }
    Some(Symbolizer {
        tool: std::ffi::CString::new(tool.to_str()?).ok()?,
        exe: std::ffi::CString::new(exe.to_str()?).ok()?,
        base: info.dli_fbase as u64,
    })
}

/// Writes the source line of the instruction at `pc` (and the lines it was inlined into) to
/// stderr, through `addr2line` in a child process: `fork`, `execv`, `pipe`, `read` and
/// `waitpid` are what a signal handler may call, and reading the executable's line tables here
/// would not be. Where LLVM gave the instruction no line (line 0: an instruction merged from
/// several lines), the nearest instruction before it that has one is named, and said to be.
fn name_the_line(pc: u64) {
    let mut out = [0u8; 4096];
    let Some((shown, nearest)) = find_line(pc, &mut out) else { return };
    let header: &[u8] = if nearest {
        b"hpvm-mgpu: the faulting instruction has no line of its own; the nearest instruction before it is at \
          (innermost first):\n"
    } else {
        b"hpvm-mgpu: the faulting instruction is at (innermost first):\n"
    };
    // SAFETY: writing bytes of our buffers to stderr.
    unsafe {
        libc::write(2, header.as_ptr() as *const libc::c_void, header.len());
        libc::write(2, out.as_ptr() as *const libc::c_void, shown);
    }
}

/// `addr2line`'s answer for the instruction at `pc` into `out` (its length), and whether it
/// is the nearest instruction before `pc` that has a line rather than `pc`'s own; `None`
/// where there is no answer. Async-signal-safe (see [`name_the_line`]).
fn find_line(pc: u64, out: &mut [u8]) -> Option<(usize, bool)> {
    let Some(Some(s)) = SYMBOLIZER.get() else { return None };
    let mut found = None;
    for back in [0u64, 1, 2, 4, 8, 16, 32, 64, 128] {
        let n = addr2line(s, pc.wrapping_sub(back), out);
        if n == 0 {
            break;
        }
        if has_line(&out[..n]) {
            found = Some((n, back > 0));
            break;
        }
    }
    // No instruction near it has a line either: its own answer, as it is.
    let (shown, nearest) = found.unwrap_or_else(|| (addr2line(s, pc, out), false));
    (shown > 0).then_some((shown, nearest))
}

/// Where the instruction at `site` is in the source, as `file:line (in function)`, from the
/// innermost frame of `addr2line`'s answer. An instruction of a shared library (the C
/// library's `memset`) is named with the line of the program's code that called it, where
/// the return address says so. `None` where nothing is known. It allocates: a handler calls
/// it only to end the run.
pub fn source_line(site: Site) -> Option<String> {
    let base = SYMBOLIZER.get()?.as_ref()?.base;
    let object = |addr: u64| {
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: dladdr only reads the loader's tables for the address.
        (unsafe { libc::dladdr(addr as *const libc::c_void, &mut info) } != 0).then_some(info)
    };
    let Some(outside) = object(site.pc).filter(|o| o.dli_fbase as u64 != base) else {
        return program_line(site.pc);
    };
    let name = |p: *const libc::c_char| {
        // SAFETY: a string of the loader's, when not null.
        (!p.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned())
    };
    let library = name(outside.dli_fname).map(|f| f.rsplit('/').next().unwrap_or_default().to_string());
    let through = match (name(outside.dli_sname), library) {
        (Some(f), Some(l)) => format!("{f} in {l}"),
        (None, Some(l)) => format!("code of {l}"),
        _ => "a shared library's code".to_string(),
    };
    let caller = object(site.return_guess).filter(|o| o.dli_fbase as u64 == base);
    Some(match caller.and_then(|_| program_line(site.return_guess.wrapping_sub(1))) {
        Some(line) => format!("{line} (through {through})"),
        None => through,
    })
}

/// [`source_line`] for an instruction of the executable.
fn program_line(pc: u64) -> Option<String> {
    let mut out = [0u8; 4096];
    let (n, _) = find_line(pc, &mut out).filter(|&(n, _)| has_line(&out[..n]))?;
    let first = out[..n].split(|&b| b == b'\n').next()?;
    let first = String::from_utf8_lossy(first);
    let first = first.split(" (discriminator").next().unwrap_or_default().trim();
    // A path under the working directory is named from there, as the user would write it.
    let here = std::env::current_dir().ok().map(|d| format!("{}/", d.display()));
    let shorter =
        |at: &'_ str| -> String { here.as_deref().and_then(|h| at.strip_prefix(h)).unwrap_or(at).to_string() };
    Some(match first.rsplit_once(" at ") {
        Some((function, at)) => format!("{} (in {function})", shorter(at)),
        None => shorter(first),
    })
}

/// Whether `addr2line`'s answer names a line: its first (innermost) line does not end in
/// `:?` or `:0` (before a `(discriminator N)`).
fn has_line(answer: &[u8]) -> bool {
    let first = answer.split(|&b| b == b'\n').next().unwrap_or_default();
    let first = match first.windows(2).position(|w| w == b" (") {
        Some(at) => &first[..at],
        None => first,
    };
    !(first.is_empty() || first.ends_with(b":?") || first.ends_with(b":0"))
}

/// `addr2line`'s answer for `addr` (inline frames, demangled) into `out`; its length, 0
/// where it could not run.
fn addr2line(s: &Symbolizer, addr: u64, out: &mut [u8]) -> usize {
    let mut hex = Line { buf: [0; 1024], len: 0 };
    // The address as the executable's line tables number it (position-independent: from
    // its base), ending in NUL for execv.
    let _ = std::fmt::Write::write_fmt(&mut hex, format_args!("{:#x}\0", addr.wrapping_sub(s.base)));
    let args: [*const libc::c_char; 8] = [
        s.tool.as_ptr(),
        c"-e".as_ptr(),
        s.exe.as_ptr(),
        c"-i".as_ptr(),
        c"-p".as_ptr(),
        c"-C".as_ptr(),
        hex.buf.as_ptr() as *const libc::c_char,
        std::ptr::null(),
    ];
    let mut fds = [0i32; 2];
    // SAFETY: async-signal-safe calls only; the child writes its answer into the pipe and
    // exits; the parent reads it into `out`.
    unsafe {
        if libc::pipe(fds.as_mut_ptr()) != 0 {
            return 0;
        }
        let child = libc::fork();
        if child == 0 {
            libc::dup2(fds[1], 1);
            libc::close(fds[0]);
            libc::execv(s.tool.as_ptr(), args.as_ptr());
            libc::_exit(127);
        }
        libc::close(fds[1]);
        let mut len = 0;
        if child > 0 {
            while len < out.len() {
                let n = libc::read(fds[0], out[len..].as_mut_ptr() as *mut libc::c_void, out.len() - len);
                if n <= 0 {
                    break;
                }
                len += n as usize;
            }
            let mut status = 0;
            libc::waitpid(child, &mut status, 0);
        }
        libc::close(fds[0]);
        len
    }
}

/// Installs the handler (once per process).
pub fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        SYMBOLIZER.get_or_init(symbolizer);
        for (i, &signal) in SIGNALS.iter().enumerate() {
            // SAFETY: a zeroed sigaction is valid; the handler has the SA_SIGINFO signature;
            // `PREVIOUS` is written once, here, before the handler that reads it exists.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut action.sa_mask);
                let previous = (*std::ptr::addr_of_mut!(PREVIOUS))[i].as_mut_ptr();
                libc::sigaction(signal, &action, previous);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(start: u64, size: u64, device: Option<usize>) -> Region {
        Region { start, size, buffer: 0x1000, device }
    }

    #[test]
    fn the_nearest_region_and_the_offset_in_it() {
        let rs = [region(0x1000, 0x100, None), region(0x9000, 0x100, Some(1))];
        assert_eq!(nearest(&rs, 0x1050), Some((rs[0], 0x50)));
        assert_eq!(nearest(&rs, 0x1100), Some((rs[0], 0x100)));
        assert_eq!(nearest(&rs, 0x8ff0), Some((rs[1], -16)));
        assert_eq!(nearest(&[], 0x10), None);
    }

    fn line(signal: i32, addr: u64, near: Option<(Region, i128)>) -> String {
        let mut line = Line { buf: [0; 1024], len: 0 };
        describe(&mut line, "Demosaic", "camera.c:41", signal, addr, near);
        String::from_utf8(line.buf[..line.len].to_vec()).unwrap()
    }

    #[test]
    fn answers_without_a_line_are_told_apart() {
        assert!(has_line(b"k at /src/a.cu:12\n (inlined by) main at /src/a.cu:30\n"));
        assert!(has_line(b"k at /src/a.cu:12 (discriminator 2)\n"));
        assert!(!has_line(b"k at /src/a.cu:0\n (inlined by) main at /src/a.cu:30\n"));
        assert!(!has_line(b"k at /src/a.cu:?\n"));
        assert!(!has_line(b"?? ??:0\n"));
        assert!(!has_line(b""));
    }

    #[test]
    fn the_message_names_node_place_and_distance() {
        assert_eq!(
            line(libc::SIGSEGV, 0x1140, Some((region(0x1000, 0x100, None), 0x140))),
            "hpvm-mgpu: node Demosaic (camera.c:41) crashed with SIGSEGV (an access to memory it may not touch) \
             at address 0x1140: byte 320 of the tracked buffer 0x1000 (on the host, 256 bytes), past its end\n"
        );
        assert_eq!(
            line(libc::SIGSEGV, 0x8ff0, Some((region(0x9000, 0x100, Some(1)), -16))),
            "hpvm-mgpu: node Demosaic (camera.c:41) crashed with SIGSEGV (an access to memory it may not touch) \
             at address 0x8ff0: byte -16 of the tracked buffer 0x1000 (device 1's copy, 256 bytes), before its start\n"
        );
        assert!(line(libc::SIGFPE, 0x401000, None).ends_with("division by zero) at address 0x401000\n"));
    }
}
