//! Work that may end the process runs in a child process: LLVM's fatal errors (`LLVM ERROR:
//! ...`, which exit), and Polly's and ISL's aborts (which kill). A crash there is the tool's
//! bug, never the user's, and must not take the build down with it nor leave its temporary
//! files behind: the parent outlives it, says which file (and, for the analysis, which node)
//! it was working on, and removes what the child left.
//!
//! The child gets the parent's memory as it was (`fork`; the compiler runs no threads of its
//! own), does the work, and writes its result into a pipe; progress lines before the result
//! say what it was doing when it died. Its temporary directories go under a directory the
//! parent owns (`TMPDIR`), which the parent removes.

use crate::error::{Error, Result};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::Path;

/// How the child ended.
pub enum Outcome {
    /// It finished: the bytes it wrote.
    Done(Vec<u8>),
    /// It reported an error of the user's program itself (already printed).
    Reported,
    /// It died: how, and the last progress line it wrote (what it was doing). `stderr`: what
    /// it wrote there, held back (analysis stage only) for the caller, which may try again.
    /// `heard`: every progress line, in order (what it finished before it died).
    Crashed { how: String, doing: Option<String>, stderr: String, heard: Vec<String> },
    /// It said nothing for `after` (its patience): it was stopped, doing `doing`.
    Stalled { after: std::time::Duration, doing: Option<String>, stderr: String, heard: Vec<String> },
}

/// The stage whose child's standard error is held back until it ends ([`Outcome`]): its
/// callers analyse a crashed node again, carefully, and a retry that succeeds should not
/// leave ISL's abort message behind ("isl_space.c:1625: domains need to match").
const HELD_STAGE: &str = "analysis";

/// How long the analysis may go without progress (each node says when it starts) before
/// it is stopped and the node runs whole: `HPVM_MGPU_ANALYSIS_SECONDS` (default 60). ISL's
/// work on some kernels' maps grows without practical bound (HeCBench's hypterm took
/// minutes), and a build must not look hung.
pub fn analysis_patience() -> std::time::Duration {
    let secs = std::env::var("HPVM_MGPU_ANALYSIS_SECONDS").ok().and_then(|v| v.trim().parse::<u64>().ok());
    std::time::Duration::from_secs(secs.filter(|&s| s > 0).unwrap_or(60))
}

/// The child's exit status after it printed an error of its own.
const REPORTED: i32 = 86;

/// What the child writes into: progress lines, then the result.
pub struct Channel(std::fs::File);

impl Channel {
    /// Says what the child is about to do (the last one is named if it dies).
    pub fn progress(&mut self, doing: &str) {
        let line = doing.replace('\n', " ");
        let _ = writeln!(self.0, "P {line}");
        let _ = self.0.flush();
    }

    /// A function saying progress as [`Channel::progress`] does, for code that cannot hold
    /// the channel (the analysis's hook).
    pub fn writer(&self) -> impl FnMut(&str) + Send + 'static {
        let mut file = self.0.try_clone().ok();
        move |doing: &str| {
            if let Some(f) = file.as_mut() {
                let _ = writeln!(f, "P {}", doing.replace('\n', " "));
                let _ = f.flush();
            }
        }
    }
}

/// The message for a crash of the tool while it worked on `file`.
pub fn crash_message(file: &Path, how: &str, doing: Option<&str>) -> String {
    let at = doing.map(|d| format!(", at {d}")).unwrap_or_default();
    format!(
        "{}: error: hpvm-mgpu crashed on this file ({how}{at}); this is a bug of hpvm-mgpu, not of the program: \
         please report it with the file",
        file.display()
    )
}

/// Runs `work` in a child process with `TMPDIR` set to `tmp`; `work` returns the bytes the
/// parent gets back, or an error it reports itself. `stage` names the work for fault
/// injection: `HPVM_MGPU_INJECT_CRASH=STAGE` makes the child abort first (the tests' way to
/// check that a crash there is survived; stages: `compile`, `analysis`).
pub fn run(tmp: &Path, stage: &str, work: impl FnOnce(&mut Channel) -> Result<Vec<u8>>) -> Result<Outcome> {
    run_with_patience(tmp, stage, None, work)
}

/// [`run`], stopping the child when it writes nothing for `patience`
/// ([`Outcome::Stalled`]). `HPVM_MGPU_INJECT_CRASH=STAGE-stall` makes the child stall.
pub fn run_with_patience(
    tmp: &Path,
    stage: &str,
    patience: Option<std::time::Duration>,
    work: impl FnOnce(&mut Channel) -> Result<Vec<u8>>,
) -> Result<Outcome> {
    run_with_limits(tmp, stage, patience, None, work)
}

/// [`run_with_patience`], also stopping the child at `deadline`, however much it says
/// ([`Outcome::Stalled`], `after` the time it ran).
pub fn run_with_limits(
    tmp: &Path,
    stage: &str,
    patience: Option<std::time::Duration>,
    deadline: Option<std::time::Instant>,
    work: impl FnOnce(&mut Channel) -> Result<Vec<u8>>,
) -> Result<Outcome> {
    let mut fds = [0i32; 2];
    // SAFETY: a fresh pipe into `fds`.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(Error::io("a pipe to the compiler's child", std::io::Error::last_os_error()));
    }
    // Whatever the parent buffered must not be written twice.
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: the compiler runs no threads of its own here, so the child's copy of the
    // process is consistent; it leaves by `_exit`, never returning into the parent's code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(Error::io("starting the compiler's child", std::io::Error::last_os_error()));
    }
    let held = (stage == HELD_STAGE).then(|| tmp.join(format!("stderr-{stage}")));
    if pid > 0 {
        // The child leads a group of its own, which its tools join, so stopping the group
        // stops them too (set on both sides: whichever runs first).
        // SAFETY: our child, not yet waited for.
        unsafe { libc::setpgid(pid, pid) };
        crate::signals::child_started(pid);
    }
    if pid == 0 {
        // SAFETY: makes this process the leader of a new group.
        unsafe { libc::setpgid(0, 0) };
        hpvm_core::scratch::tools_join_this_group();
        // SAFETY: the child's own ends of the pipe.
        unsafe { libc::close(fds[0]) };
        if let Some(path) = &held {
            // Its standard error into a file of the scratch directory (the parent replays it).
            if let Ok(f) = std::fs::File::create(path) {
                // SAFETY: replaces descriptor 2 with a file of ours; `f` may close after.
                unsafe { libc::dup2(f.as_raw_fd(), 2) };
            }
        }
        let mut ch = Channel(unsafe { std::fs::File::from_raw_fd(fds[1]) });
        std::env::set_var("TMPDIR", tmp);
        if std::env::var("HPVM_MGPU_INJECT_CRASH").is_ok_and(|v| v == stage) {
            ch.progress(&format!("an injected crash (HPVM_MGPU_INJECT_CRASH={stage})"));
            // SAFETY: ends the child, as a crash would.
            unsafe { libc::abort() };
        }
        if std::env::var("HPVM_MGPU_INJECT_CRASH").is_ok_and(|v| v == format!("{stage}-stall")) {
            ch.progress(&format!("an injected stall (HPVM_MGPU_INJECT_CRASH={stage}-stall)"));
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(&mut ch)));
        let code = match result {
            Ok(Ok(bytes)) => {
                let ok = ch.0.write_all(b"R\n").and_then(|()| ch.0.write_all(&bytes)).and_then(|()| ch.0.flush());
                if ok.is_ok() {
                    0
                } else {
                    2
                }
            }
            Ok(Err(e)) => {
                crate::cli::report(&e);
                REPORTED
            }
            Err(_) => 101,
        };
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    // SAFETY: the parent's own ends of the pipe.
    unsafe { libc::close(fds[1]) };
    let mut from_child = unsafe { std::fs::File::from_raw_fd(fds[0]) };
    let mut bytes = Vec::new();
    let mut stalled = None;
    let mut buf = [0u8; 8192];
    let mut heard = std::time::Instant::now();
    let began = heard;
    loop {
        let quiet = patience.map(|p| p.saturating_sub(heard.elapsed()));
        let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
        // Which limit this wait runs to: the deadline where it comes first.
        let by_deadline = left.is_some_and(|b| quiet.map_or(true, |a| b <= a));
        let wait = match (quiet, left) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let wait_ms = wait.map_or(-1, |w| w.as_millis().min(i32::MAX as u128) as i32);
        let mut pfd = libc::pollfd { fd: fds[0], events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid descriptor of ours.
        let ready = unsafe { libc::poll(&mut pfd, 1, wait_ms) };
        if ready < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if ready == 0 {
            // SAFETY: our child; killed once, waited for below.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
                libc::kill(pid, libc::SIGKILL);
            }
            stalled = if by_deadline { Some(began.elapsed()) } else { patience };
            break;
        }
        match from_child.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                bytes.extend_from_slice(&buf[..n]);
                heard = std::time::Instant::now();
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let mut status = 0;
    // SAFETY: our child, waited for once.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            crate::signals::child_ended();
            return Err(Error::io("waiting for the compiler's child", std::io::Error::last_os_error()));
        }
    }
    crate::signals::child_ended();
    let stderr = held
        .as_ref()
        .map(|p| {
            let text = std::fs::read(p).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
            let _ = std::fs::remove_file(p);
            text
        })
        .unwrap_or_default();
    let (heard, result) = split(&bytes);
    let doing = heard.last().cloned();
    if let Some(after) = stalled {
        return Ok(Outcome::Stalled { after, doing, stderr, heard });
    }
    let done = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 && result.is_some();
    let reported = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == REPORTED;
    if done || reported {
        // What it said (warnings, the user's errors) is the user's to read; ISL's own
        // complaints inside Polly are not (Polly gives that region up and goes on).
        eprint!("{}", without_isl_diagnostics(&stderr));
    }
    Ok(if done {
        Outcome::Done(result.unwrap_or_default().to_vec())
    } else if reported {
        Outcome::Reported
    } else {
        let how = if libc::WIFSIGNALED(status) {
            signal_name(libc::WTERMSIG(status))
        } else if libc::WEXITSTATUS(status) == 101 {
            "an internal panic".to_string()
        } else {
            // LLVM's fatal errors print `LLVM ERROR: ...` and exit(1).
            format!("a fatal error of LLVM (exit status {})", libc::WEXITSTATUS(status))
        };
        Outcome::Crashed { how, doing, stderr, heard }
    })
}

/// The progress lines and the result (after `R\n`), if the child got that far.
fn split(bytes: &[u8]) -> (Vec<String>, Option<&[u8]>) {
    let mut heard = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at..].starts_with(b"R\n") {
            return (heard, Some(&bytes[at + 2..]));
        }
        let end = bytes[at..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |p| at + p);
        if let Some(line) = bytes[at..end].strip_prefix(b"P ") {
            heard.push(String::from_utf8_lossy(line).into_owned());
        }
        at = end + 1;
    }
    (heard, None)
}

fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGABRT => "SIGABRT, an abort",
        libc::SIGSEGV => "SIGSEGV, an invalid memory access",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGKILL => "SIGKILL (out of memory?)",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

/// `text` without the lines ISL prints about its own inputs when Polly's analysis hits a case
/// it does not handle (`isl_constraint.c:282: input involves unknown divs`): ISL's file and
/// line, not the user's, about a region Polly then leaves unmodelled, which the analysis
/// reports in its own words.
fn without_isl_diagnostics(text: &str) -> String {
    text.split_inclusive('\n')
        .filter(|line| {
            let Some((file, rest)) = line.split_once(':') else { return true };
            let from_isl = file.starts_with("isl_") && file.ends_with(".c");
            let numbered =
                rest.split_once(':').is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            !(from_isl && numbered)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn isl_diagnostics_are_left_out_of_what_the_user_reads() {
        let text = "isl_constraint.c:282: input involves unknown divs\nk.cu:3:1: warning: unused\n\
                    isl_map.c:12: x\nisl_notes.txt:1: kept\n";
        assert_eq!(super::without_isl_diagnostics(text), "k.cu:3:1: warning: unused\nisl_notes.txt:1: kept\n");
    }

    use super::*;

    #[test]
    fn progress_and_result_are_told_apart() {
        let (heard, result) = split(b"P one\nP two (a.c:3)\nR\n{\"x\": 1}\n");
        assert_eq!(heard, ["one", "two (a.c:3)"]);
        assert_eq!(result, Some(&b"{\"x\": 1}\n"[..]));
        let (heard, result) = split(b"P only\n");
        assert_eq!(heard, ["only"]);
        assert_eq!(result, None);
    }

    #[test]
    fn a_child_that_aborts_is_reported_with_what_it_was_doing() {
        let tmp = std::env::temp_dir();
        let out = run(&tmp, "test", |ch| {
            ch.progress("node `k` (k.cu:7)");
            // SAFETY: ends the child.
            unsafe { libc::abort() }
        })
        .unwrap();
        match out {
            Outcome::Crashed { how, doing, .. } => {
                assert!(how.contains("SIGABRT"), "{how}");
                assert_eq!(doing.as_deref(), Some("node `k` (k.cu:7)"));
            }
            _ => panic!("the abort was not seen"),
        }
        let out = run(&tmp, "test", |_| Ok(b"fine".to_vec())).unwrap();
        assert!(matches!(out, Outcome::Done(b) if b == b"fine"));
    }

    /// The analysis stage's standard error comes back with its crash, for the caller to show
    /// or drop (a careful retry that succeeds drops ISL's abort message).
    #[test]
    fn an_analysis_crash_holds_back_what_it_printed() {
        let tmp = std::env::temp_dir().join(format!("hpvm-isolate-held-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let out = run(&tmp, HELD_STAGE, |_| {
            // Straight to descriptor 2, as ISL writes (the test harness captures `eprintln!`).
            let line = b"isl_space.c:1625: domains need to match\n";
            // SAFETY: writes a buffer of ours to descriptor 2.
            unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
            // SAFETY: ends the child.
            unsafe { libc::abort() }
        })
        .unwrap();
        match out {
            Outcome::Crashed { stderr, .. } => assert!(stderr.contains("domains need to match"), "{stderr}"),
            _ => panic!("the abort was not seen"),
        }
        // Nothing is left behind in the scratch directory.
        assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
        std::fs::remove_dir(&tmp).unwrap();
    }

    #[test]
    fn a_child_past_its_deadline_is_stopped_however_much_it_says() {
        let tmp = std::env::temp_dir();
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(400);
        let out = run_with_limits(&tmp, "test", Some(std::time::Duration::from_secs(30)), Some(deadline), |ch| {
            for i in 0..100 {
                ch.progress(&format!("step {i}"));
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Ok(Vec::new())
        })
        .unwrap();
        match out {
            Outcome::Stalled { after, heard, .. } => {
                // Stopped at the deadline (counted from the child's start, a little after it
                // was set), long before the 5 s it would have run.
                assert!(after >= std::time::Duration::from_millis(300), "{after:?}");
                assert!(after < std::time::Duration::from_secs(3), "{after:?}");
                assert!(heard.len() >= 2 && heard[0] == "step 0", "{heard:?}");
            }
            _ => panic!("the deadline was not kept"),
        }
    }

    #[test]
    fn a_child_that_stops_talking_is_stopped() {
        let tmp = std::env::temp_dir();
        let patience = std::time::Duration::from_millis(300);
        let out = run_with_patience(&tmp, "test", Some(patience), |ch| {
            ch.progress("node `slow` (s.cu:3)");
            std::thread::sleep(std::time::Duration::from_secs(30));
            Ok(Vec::new())
        })
        .unwrap();
        match out {
            Outcome::Stalled { after, doing, .. } => {
                assert_eq!(after, patience);
                assert_eq!(doing.as_deref(), Some("node `slow` (s.cu:3)"));
            }
            _ => panic!("the stall was not seen"),
        }
        // Progress keeps a child going past its patience.
        let out = run_with_patience(&tmp, "test", Some(patience), |ch| {
            for i in 0..4 {
                ch.progress(&format!("step {i}"));
                std::thread::sleep(std::time::Duration::from_millis(150));
            }
            Ok(b"done".to_vec())
        })
        .unwrap();
        assert!(matches!(out, Outcome::Done(b) if b == b"done"));
    }
}
