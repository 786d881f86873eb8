//! A private temporary directory, removed when dropped, so no run leaves files behind.
//!
//! A run stopped by a signal (Ctrl-C, `make` killed) drops nothing, so every live directory,
//! and every other path a run must not leave behind ([`remove_on_signal`]), is also listed
//! where a signal handler can read it without locks or allocation ([`pending`]): the command's
//! handler removes them before the process dies.
//!
//! External tools (clang, the linker, ptxas) run through [`run_tool`]: each in a process
//! group of its own, listed ([`tool_groups`]) so the handler can stop the whole group (the
//! clang driver's linker too) before it removes the paths, which a tool that outlived the
//! run would otherwise write again.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, Ordering};

/// Paths to remove if a signal ends the run: NUL-terminated, leaked (a handler may be reading
/// one while the owner drops it), null where free.
static PENDING: [AtomicPtr<u8>; 64] = [const { AtomicPtr::new(std::ptr::null_mut()) }; 64];

/// Lists `path` for removal should a signal end the run, until the guard is dropped. Beyond
/// the list's 64 slots a path is not listed (a run never holds that many).
pub fn remove_on_signal(path: &Path) -> SignalGuard {
    use std::os::unix::ffi::OsStrExt;
    let mut bytes = path.as_os_str().as_bytes().to_vec();
    bytes.push(0);
    let text = Box::leak(bytes.into_boxed_slice()).as_mut_ptr();
    let slot = PENDING
        .iter()
        .position(|p| p.compare_exchange(std::ptr::null_mut(), text, Ordering::AcqRel, Ordering::Relaxed).is_ok());
    SignalGuard { slot }
}

/// A path's place in the list of [`remove_on_signal`]; dropping it takes the path off.
pub struct SignalGuard {
    slot: Option<usize>,
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            PENDING[i].store(std::ptr::null_mut(), Ordering::Release);
        }
    }
}

/// The paths listed for removal, as C strings: reads atomics only, so a signal handler may
/// call it.
pub fn pending() -> impl Iterator<Item = *const std::ffi::c_char> {
    PENDING.iter().map(|p| p.load(Ordering::Acquire) as *const std::ffi::c_char).filter(|p| !p.is_null())
}

/// Process groups of the tools running now ([`run_tool`]), 0 where free.
static TOOLS: [AtomicI32; 16] = [const { AtomicI32::new(0) }; 16];

/// Whether [`run_tool`] gives each tool a group of its own (see [`tools_join_this_group`]).
static OWN_GROUPS: AtomicBool = AtomicBool::new(true);

/// Tools started from now on stay in this process's group. For a child process that is
/// itself the leader of a group its parent stops as a whole (the compiler's forked child):
/// its tools then go with it.
pub fn tools_join_this_group() {
    OWN_GROUPS.store(false, Ordering::Relaxed);
}

/// Runs `cmd` to its end and collects its output, as [`std::process::Command::output`] does,
/// with the tool in a process group of its own that a signal handler can find and stop.
pub fn run_tool(cmd: &mut std::process::Command) -> std::io::Result<std::process::Output> {
    cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    supervised(cmd, std::process::Child::wait_with_output)
}

/// [`run_tool`] for a tool whose output goes where this process's goes, as
/// [`std::process::Command::status`] runs it.
pub fn run_tool_inheriting(cmd: &mut std::process::Command) -> std::io::Result<std::process::ExitStatus> {
    supervised(cmd, |mut child| child.wait())
}

fn supervised<T>(
    cmd: &mut std::process::Command,
    wait: impl FnOnce(std::process::Child) -> std::io::Result<T>,
) -> std::io::Result<T> {
    use std::os::unix::process::CommandExt;
    let own = OWN_GROUPS.load(Ordering::Relaxed);
    if own {
        cmd.process_group(0);
    }
    let child = cmd.spawn()?;
    // The child's pid names its group (process_group(0)).
    let group = child.id() as i32;
    let slot = own
        .then(|| TOOLS.iter().position(|t| t.compare_exchange(0, group, Ordering::AcqRel, Ordering::Relaxed).is_ok()))
        .flatten();
    let result = wait(child);
    if let Some(i) = slot {
        TOOLS[i].store(0, Ordering::Release);
    }
    result
}

/// The process groups of the tools running now: reads atomics only, so a signal handler may
/// call it.
pub fn tool_groups() -> impl Iterator<Item = i32> {
    TOOLS.iter().map(|t| t.load(Ordering::Acquire)).filter(|&g| g > 0)
}

pub struct ScratchDir {
    path: PathBuf,
    _listed: SignalGuard,
}

impl ScratchDir {
    pub fn new(tag: &str) -> std::io::Result<ScratchDir> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let base = std::env::temp_dir();
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("hpvm-mgpu-{tag}-{}-{nanos:x}-{n}", std::process::id()));
            // create_dir (not _all) fails if it exists, so two processes never share one.
            match std::fs::create_dir(&path) {
                Ok(()) => {
                    let listed = remove_on_signal(&path);
                    return Ok(ScratchDir { path, _listed: listed });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
