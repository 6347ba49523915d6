//! Command tools: subprocesses the engine spawns, reads and stops. Each runs in a session of its own, so that a stop
//! reaches whatever it started, in whatever process group of the session; stdout and stderr are read here into bounded captures
//! (head and tail kept, the middle spilled to a file up to a cap); its time limits are kept here too, where each
//! chunk of output is seen, so that output never has to cross to JS to count as progress.
//!
//! Processes run in real time: these limits read the system clock, never a test's manual one.
//!
//! The rooms: `spawn` starts a process, `watch` is the task that runs it to its end, `capture` holds what it
//! writes, `stop` stops its whole session, `jobs` keeps those moved to the background; this module holds the hub
//! they report to and what the engine sees of them.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::future::Future;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::result::{CommandEnd, CommandReport};

mod capture;
mod jobs;
mod spawn;
mod stop;
mod watch;

use capture::*;
use jobs::*;
use spawn::*;
use stop::*;
use watch::*;

/// How a command tool runs its processes, as registered.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CommandLimits {
    /// Between SIGTERM to the session and SIGKILL.
    pub kill_grace_ms: u64,
    pub on_timeout: OnTimeout,
    /// Bytes kept in memory per stream: half from its start, half from its end.
    pub capture_bytes: usize,
    /// Bytes past the kept start saved to a file per stream, for the artifact and for paging a job's output.
    pub spill_bytes: u64,
    /// A non-zero exit code (or an end by a signal the engine did not send) makes the call a failure.
    pub fail_on_exit_code: bool,
    /// How long a background job may run before it is stopped.
    pub job_timeout_ms: u64,
}

impl Default for CommandLimits {
    fn default() -> Self {
        CommandLimits {
            kill_grace_ms: 2_000,
            on_timeout: OnTimeout::Kill,
            capture_bytes: 256 * 1024,
            spill_bytes: 8 * 1024 * 1024,
            fail_on_exit_code: false,
            job_timeout_ms: 30 * 60_000,
        }
    }
}

impl CommandLimits {
    pub fn check(&self) -> Result<(), String> {
        if self.kill_grace_ms > 600_000 {
            return Err(format!("killGraceMs must be at most 600000 (10 minutes); got {}", self.kill_grace_ms));
        }
        if self.capture_bytes < 2 * 1024 {
            return Err(format!("captureBytes must be at least 2048; got {}", self.capture_bytes));
        }
        if self.job_timeout_ms == 0 {
            return Err("jobTimeoutMs must be at least 1".into());
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum OnTimeout {
    Kill,
    Background,
}

/// What one call runs, as the tool's `command(args)` said (the host completes the environment).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Invocation {
    #[serde(default)]
    pub argv: Option<Vec<String>>,
    #[serde(default)]
    pub shell: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    /// The whole environment of the process: nothing else is inherited.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub stdin: Option<String>,
}

impl Invocation {
    pub fn from_json(json: &str) -> Result<Self, String> {
        let inv: Invocation = serde_json::from_str(json).map_err(|e| format!("command(args) gave an invalid command: {e}"))?;
        match (&inv.argv, &inv.shell) {
            (Some(argv), None) if argv.first().is_some_and(|p| !p.is_empty()) => {}
            (Some(_), None) => return Err("command(args) gave an empty argv: argv[0] names the program".into()),
            (None, Some(_)) => {}
            _ => return Err("command(args) must give either argv (a list of strings) or shell (a command string), not both".into()),
        }
        let nul = |s: &str| s.contains('\0');
        if inv.argv.iter().flatten().any(|a| nul(a)) || inv.shell.as_deref().is_some_and(nul) || inv.env.iter().any(|(k, v)| nul(k) || nul(v) || k.contains('=') || k.is_empty()) {
            return Err("command(args) gave a NUL byte in an argument or the environment, or an empty or '='-holding variable name".into());
        }
        Ok(inv)
    }

    /// The command as a person reads it, for a job's status.
    fn display(&self) -> String {
        match (&self.argv, &self.shell) {
            (_, Some(shell)) => shell.clone(),
            (Some(argv), _) => argv.join(" "),
            _ => String::new(),
        }
    }
}

/// Saves a stream's whole output as an artifact (redacted, for the context that ran it); the path, or None.
pub type Save = Arc<dyn Fn(&str, Vec<u8>) -> Option<String> + Send + Sync>;
/// Wakes the host to take in what the commands report.
pub type Wake = Arc<dyn Fn() + Send + Sync>;
/// Redacts a text as the executor's rules do.
pub type Redact = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// Jobs an executor keeps at once (running, or ended and not yet forgotten).
pub const MAX_JOBS: usize = 16;
/// How long an ended job's record and output stay readable.
const JOB_KEPT: Duration = Duration::from_secs(10 * 60);
/// Lines `onProgress` receives at most per second and command.
const PROGRESS_EVERY: Duration = Duration::from_millis(200);
/// Progress lines waiting for the host at most: a host that does not look loses the oldest.
const MAX_PROGRESS: usize = 1_000;
/// The longest progress line passed on, in characters.
const PROGRESS_CHARS: usize = 200;
/// How often a session being stopped is looked at.
const POLL: Duration = Duration::from_millis(10);
/// After SIGKILL, how long the session may take to be gone before the report says something still runs.
const AFTER_KILL: Duration = Duration::from_secs(2);
/// After the process exits with its session gone, how long its output may stay open (held by a process that left
/// the session) before reading stops.
const DRAIN: Duration = Duration::from_millis(200);
const CHUNK: usize = 64 * 1024;

/// The running commands and the jobs of one engine, shared with the tasks that run them.
#[derive(Default)]
pub struct Hub {
    state: Mutex<HubState>,
}

#[derive(Default)]
struct HubState {
    /// Commands whose calls wait on them, by run.
    running: FxHashMap<u32, Arc<Control>>,
    /// What ended commands report, until their runs take it.
    finished: FxHashMap<u32, Finished>,
    /// Runs whose commands ended since the host last looked.
    ended: Vec<u32>,
    progress: VecDeque<(u32, String)>,
    jobs: BTreeMap<u32, Arc<Job>>,
    next_job: u32,
    closed: bool,
}

/// How the host stops one command: its session, once known, and why it is to stop.
#[derive(Default)]
pub struct Control {
    sid: AtomicI32,
    why: Mutex<Option<CommandEnd>>,
    stop: tokio::sync::Notify,
}

impl Control {
    fn request_stop(&self, why: CommandEnd) {
        lock(&self.why).get_or_insert(why);
        self.stop.notify_one();
    }

    fn stop_reason(&self) -> Option<CommandEnd> {
        *lock(&self.why)
    }
}

/// What a command's task hands its run when the process is over (or moved to the background).
#[derive(Debug)]
pub struct Finished {
    pub stdout: String,
    pub stderr: String,
    pub report: CommandReport,
}

impl HubState {
    /// Every command that may have processes: those calls wait on, and the jobs.
    fn controls(&self) -> impl Iterator<Item = &Arc<Control>> {
        self.running.values().chain(self.jobs.values().map(|j| &j.control))
    }
}

impl Hub {
    /// Runs whose commands ended, and progress lines, since the last look.
    pub fn take_news(&self) -> (Vec<u32>, Vec<(u32, String)>) {
        let mut state = lock(&self.state);
        (std::mem::take(&mut state.ended), state.progress.drain(..).collect())
    }

    pub fn take_finished(&self, run: u32) -> Option<Finished> {
        lock(&self.state).finished.remove(&run)
    }

    /// The run's call no longer waits: its command is stopped (if it still runs) and its report dropped.
    pub fn abandon(&self, run: u32) {
        let mut state = lock(&self.state);
        state.finished.remove(&run);
        if let Some(control) = state.running.get(&run) {
            control.request_stop(CommandEnd::Cancelled);
        }
    }

    /// Commands calls wait on.
    pub fn running(&self) -> usize {
        lock(&self.state).running.len()
    }

    /// Commands whose processes may still run: those calls wait on, and running jobs.
    pub fn alive(&self) -> usize {
        let state = lock(&self.state);
        state.running.len() + state.jobs.values().filter(|j| j.running()).count()
    }

    /// Stops everything and takes no more work (the executor closes).
    pub fn close(&self) {
        let mut state = lock(&self.state);
        state.closed = true;
        for control in state.controls() {
            control.request_stop(CommandEnd::Cancelled);
        }
    }

    /// SIGKILL to every session still known, at once (the process is exiting: nothing will wait for a grace).
    pub fn kill_now(&self) {
        let state = lock(&self.state);
        for control in state.controls() {
            let sid = control.sid.load(Ordering::Acquire);
            if sid > 0 {
                signal_session(sid, Signal::Kill);
            }
        }
    }

    /// Prepares a command for `run`: the task that spawns and watches it, for the host to run on its runtime.
    pub fn launch(self: &Arc<Self>, run: u32, launch: Launch, wake: Wake) -> Result<Pin<Box<dyn Future<Output = ()> + Send>>, String> {
        if cfg!(not(unix)) {
            return Err("command tools run only on Unix (Linux and macOS)".into());
        }
        let control = Arc::new(Control::default());
        {
            let mut state = lock(&self.state);
            if state.closed {
                return Err("the tool executor was closed".into());
            }
            state.running.insert(run, control.clone());
        }
        Ok(Box::pin(watch(self.clone(), run, launch, control, wake)))
    }

    fn finish(&self, run: u32, finished: Option<Finished>, wake: &Wake) {
        {
            let mut state = lock(&self.state);
            state.running.remove(&run);
            if let Some(finished) = finished {
                state.finished.insert(run, finished);
            }
            state.ended.push(run);
        }
        wake();
    }

    fn progress(&self, run: u32, line: String, wake: &Wake) {
        {
            let mut state = lock(&self.state);
            if state.progress.len() >= MAX_PROGRESS {
                state.progress.pop_front();
            }
            state.progress.push_back((run, line));
        }
        wake();
    }

}

/// Everything a command's task needs.
pub struct Launch {
    pub tool: String,
    pub invocation: Invocation,
    pub limits: CommandLimits,
    pub timeout_ms: u64,
    pub idle_timeout_ms: Option<u64>,
    pub save: Save,
    /// Progress lines are redacted before they are cut (a cut could keep part of a secret no rule then finds).
    pub redact: Redact,
}

fn millis(d: Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invocation_needs_one_of_argv_and_shell() {
        assert!(Invocation::from_json(r#"{"argv":["ls"]}"#).is_ok());
        assert!(Invocation::from_json(r#"{"shell":"ls"}"#).is_ok());
        assert!(Invocation::from_json(r#"{"argv":["ls"],"shell":"ls"}"#).is_err());
        assert!(Invocation::from_json(r#"{"argv":[]}"#).is_err());
        assert!(Invocation::from_json(r#"{"argv":["a\u0000b"]}"#).is_err());
        assert!(Invocation::from_json(r#"{"argv":["ls"],"env":{"A=B":"c"}}"#).is_err());
    }
}
