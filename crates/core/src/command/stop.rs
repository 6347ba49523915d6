//! Stopping a command: every process of its session, SIGTERM then SIGKILL after the grace, until none runs (or
//! what cannot be reached is reported).

use super::*;

#[derive(Clone, Copy)]
pub(super) enum Signal {
    Term,
    Kill,
}

impl Signal {
    pub(super) fn name(self) -> &'static str {
        match self {
            Signal::Term => "SIGTERM",
            Signal::Kill => "SIGKILL",
        }
    }
}

/// Signals every process of the command's session. The command leads a session of its own, so its id is the
/// session's and its first process group's. What it starts may make groups of its own inside the session (coreutils
/// `timeout`, a shell with job control): on Linux each of those groups is found through /proc and signalled too.
#[cfg(unix)]
pub(super) fn signal_session(sid: i32, signal: Signal) {
    if sid <= 0 {
        return; // never kill(0) or kill(-1): those reach this process's own group, or every process
    }
    let sig = match signal {
        Signal::Term => libc::SIGTERM,
        Signal::Kill => libc::SIGKILL,
    };
    // SAFETY: kill(2) with a negative pid signals a process group; no memory is involved.
    unsafe { libc::kill(-sid, sig) };
    #[cfg(target_os = "linux")]
    {
        let mut groups = session_groups(sid).unwrap_or_default();
        groups.sort_unstable();
        groups.dedup();
        for group in groups.into_iter().filter(|&g| g > 1 && g != sid) {
            // SAFETY: as above; `group` is a process group of the command's session.
            unsafe { libc::kill(-group, sig) };
        }
    }
}

#[cfg(not(unix))]
pub(super) fn signal_session(_sid: i32, _signal: Signal) {}

/// Whether any process of the session still runs. An exited process nobody has reaped yet (a zombie: its parent
/// died and the system's init does not reap) runs no more and does not count.
#[cfg(unix)]
pub(super) fn session_alive(sid: i32) -> bool {
    if sid <= 0 {
        return false;
    }
    #[cfg(target_os = "linux")]
    if let Some(groups) = session_groups(sid) {
        return !groups.is_empty();
    }
    // Only the command's own group can be seen: signal 0 asks whether it exists.
    // SAFETY: signal 0 sends nothing.
    unsafe { libc::kill(-sid, 0) == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH) }
}

#[cfg(not(unix))]
pub(super) fn session_alive(_sid: i32) -> bool {
    false
}

/// The process group of each process of session `sid` in any state but zombie or dead, read from /proc; None when
/// /proc cannot be read.
#[cfg(target_os = "linux")]
pub(super) fn session_groups(sid: i32) -> Option<Vec<i32>> {
    let entries = std::fs::read_dir("/proc").ok()?;
    let member = |name: &str| -> Option<i32> {
        let stat = std::fs::read_to_string(format!("/proc/{name}/stat")).ok()?;
        // "pid (comm) state ppid pgrp session …": comm may hold spaces and parentheses, so read from the last ')'.
        let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
        let state = fields.next()?;
        let pgrp = fields.nth(1)?.parse::<i32>().ok()?;
        let session = fields.next()?.parse::<i32>().ok()?;
        (session == sid && !matches!(state, "Z" | "X" | "x")).then_some(pgrp)
    };
    Some(
        entries
            .flatten()
            .filter_map(|entry| entry.file_name().to_str().filter(|n| n.bytes().all(|b| b.is_ascii_digit())).and_then(member))
            .collect(),
    )
}

pub(super) fn signal_name(signal: i32) -> String {
    #[cfg(unix)]
    {
        let known = [
            (libc::SIGHUP, "SIGHUP"),
            (libc::SIGINT, "SIGINT"),
            (libc::SIGQUIT, "SIGQUIT"),
            (libc::SIGILL, "SIGILL"),
            (libc::SIGABRT, "SIGABRT"),
            (libc::SIGBUS, "SIGBUS"),
            (libc::SIGFPE, "SIGFPE"),
            (libc::SIGKILL, "SIGKILL"),
            (libc::SIGSEGV, "SIGSEGV"),
            (libc::SIGPIPE, "SIGPIPE"),
            (libc::SIGALRM, "SIGALRM"),
            (libc::SIGTERM, "SIGTERM"),
            (libc::SIGUSR1, "SIGUSR1"),
            (libc::SIGUSR2, "SIGUSR2"),
        ];
        if let Some((_, name)) = known.iter().find(|(n, _)| *n == signal) {
            return (*name).to_string();
        }
    }
    format!("signal {signal}")
}

/// The stop under way: why, the last signal sent, and when SIGKILL follows SIGTERM.
pub(super) struct Stopping {
    pub(super) why: CommandEnd,
    pub(super) sent: Signal,
    pub(super) kill_at: Option<Instant>,
}

impl Stopping {
    pub(super) fn begin(sid: i32, why: CommandEnd, grace: Duration, now: Instant) -> Self {
        signal_session(sid, Signal::Term);
        Stopping { why, sent: Signal::Term, kill_at: Some(crate::timer::after(now, grace)) }
    }

    pub(super) fn escalate(&mut self, sid: i32) {
        signal_session(sid, Signal::Kill);
        self.sent = Signal::Kill;
        self.kill_at = None;
    }
}

/// Waits for the session to be gone: SIGKILL when the grace ends, then a bounded wait in which SIGKILL reaches
/// whatever was forked since. False when something of it still runs after all that.
pub(super) async fn session_gone(sid: i32, stopping: &mut Stopping) -> bool {
    let give_up = loop {
        if !session_alive(sid) {
            return true;
        }
        match stopping.kill_at {
            Some(k) if Instant::now() >= k => stopping.escalate(sid),
            None => break Instant::now() + AFTER_KILL,
            Some(_) => {}
        }
        tokio::time::sleep(POLL).await;
    };
    while Instant::now() < give_up {
        tokio::time::sleep(POLL).await;
        if !session_alive(sid) {
            return true;
        }
        signal_session(sid, Signal::Kill);
    }
    false
}
