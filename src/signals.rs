//! A build stopped by a signal (Ctrl-C, `make` interrupted or killed by a timeout) leaves
//! nothing behind: the handlers remove the run's temporary directories and half-written
//! outputs ([`hpvm_core::scratch::pending`]), then let the signal end the process as it
//! would have (the same status, so `make` and shells see an interrupt).
//!
//! A handler may only call what is async-signal-safe: it reads the list's atomics, and
//! `fork`s an `rm -rf` per path, which it waits for. The compiler's forked child (`isolate`)
//! inherits the handlers but removes nothing: the paths are its parent's, which first kills
//! it, so that nothing writes into the directories as they go.

use std::sync::atomic::{AtomicI32, Ordering};

/// The process whose paths the handlers remove.
static OWNER: AtomicI32 = AtomicI32::new(0);

/// The compiler's forked child while it runs (`isolate`), else 0.
static CHILD: AtomicI32 = AtomicI32::new(0);

/// The forked child `pid` runs (until [`child_ended`]): a signal kills it first.
pub fn child_started(pid: libc::pid_t) {
    CHILD.store(pid, Ordering::Relaxed);
}

/// The forked child was waited for.
pub fn child_ended() {
    CHILD.store(0, Ordering::Relaxed);
}

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Installs the handlers (once, at the start of the command). A signal the caller ignores
/// (`nohup`'s SIGHUP) stays ignored.
pub fn clean_up_on_signals() {
    // SAFETY: getpid and sigaction with a handler that is async-signal-safe.
    unsafe {
        OWNER.store(libc::getpid(), Ordering::Relaxed);
        // The tools run in process groups of their own (`hpvm_core::scratch::run_tool`), which a
        // terminal set to stop background writers (`stty tostop`) would stop at their first
        // diagnostic: ignored here, as the tools inherit it, their writes go through.
        libc::signal(libc::SIGTTOU, libc::SIG_IGN);
        for sig in SIGNALS {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN {
                continue;
            }
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut act.sa_mask);
            // One cleanup: a second signal during it waits until the default takes over.
            for s in SIGNALS {
                libc::sigaddset(&mut act.sa_mask, s);
            }
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
    }
}

/// Kills the process group `group`, whose leader is this process's child, reaps the leader,
/// and waits (at most a second) until the group's other processes are gone too. Only
/// async-signal-safe calls.
unsafe fn stop_group(group: libc::pid_t) {
    libc::kill(-group, libc::SIGKILL);
    // Should the child not lead a group (it died before taking one), itself.
    libc::kill(group, libc::SIGKILL);
    let mut status = 0;
    libc::waitpid(group, &mut status, 0);
    // The leader's own children, killed with it, are reaped by whoever inherits them; a
    // zombie still counts as a member, hence the bound.
    let pause = libc::timespec { tv_sec: 0, tv_nsec: 5_000_000 };
    for _ in 0..200 {
        if libc::kill(-group, 0) != 0 {
            break;
        }
        libc::nanosleep(&pause, std::ptr::null_mut());
    }
}

extern "C" fn on_signal(sig: libc::c_int) {
    // SAFETY: only async-signal-safe calls (getpid, kill, nanosleep, fork, execv, _exit,
    // waitpid, signal, raise); the paths are NUL-terminated and never freed.
    unsafe {
        if libc::getpid() == OWNER.load(Ordering::Relaxed) {
            // First whatever could write into the paths: the forked child with the tools it
            // started (its group), and this process's tools with theirs (the clang driver's
            // linker writes the output's temporary file).
            let child = CHILD.load(Ordering::Relaxed);
            if child > 0 {
                stop_group(child);
            }
            for group in hpvm_core::scratch::tool_groups() {
                stop_group(group);
            }
            for path in hpvm_core::scratch::pending() {
                let pid = libc::fork();
                if pid == 0 {
                    let argv = [c"rm".as_ptr(), c"-rf".as_ptr(), c"--".as_ptr(), path, std::ptr::null()];
                    libc::execv(c"/bin/rm".as_ptr(), argv.as_ptr());
                    libc::_exit(127);
                }
                if pid > 0 {
                    let mut status = 0;
                    libc::waitpid(pid, &mut status, 0);
                }
            }
        }
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
}
