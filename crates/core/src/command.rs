//! Command tools: subprocesses the engine spawns, reads and stops. Each runs in a session of its own, so that a stop
//! reaches whatever it started, in whatever process group of the session; stdout and stderr are read here into bounded captures
//! (head and tail kept, the middle spilled to a file up to a cap); its time limits are kept here too, where each
//! chunk of output is seen, so that output never has to cross to JS to count as progress.
//!
//! Processes run in real time: these limits read the system clock, never a test's manual one.

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

/// A command moved to the background: its output keeps being read, and the job tools read it.
struct Job {
    id: u32,
    tool: String,
    command: String,
    started: Instant,
    control: Arc<Control>,
    streams: Arc<Mutex<Streams>>,
    end: Mutex<Option<(Instant, CommandReport)>>,
}

impl Job {
    fn running(&self) -> bool {
        lock(&self.end).is_none()
    }

    fn state(&self) -> &'static str {
        if self.running() {
            "running"
        } else {
            "ended"
        }
    }
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

    pub fn kill_job(&self, id: u32) -> Result<bool, String> {
        let job = self.job(id)?;
        let running = job.running();
        if running {
            job.control.request_stop(CommandEnd::Cancelled);
        }
        Ok(running)
    }

    fn job(&self, id: u32) -> Result<Arc<Job>, String> {
        let mut state = lock(&self.state);
        forget_old_jobs(&mut state, Instant::now());
        state.jobs.get(&id).cloned().ok_or_else(|| format!("there is no job {id} (ended jobs are forgotten {} minutes after they end)", JOB_KEPT.as_secs() / 60))
    }

    /// A job's state as JSON: running or how it ended, for how long, how much it wrote.
    pub fn job_status(&self, id: u32) -> Result<Value, String> {
        let job = self.job(id)?;
        let (out, err) = {
            let streams = lock(&job.streams);
            (streams.out.total, streams.err.total)
        };
        let end = lock(&job.end).clone();
        let mut status = json!({
            "jobId": job.id,
            "tool": job.tool,
            "command": job.command,
            // From the end read above, so that the status never says both.
            "state": if end.is_some() { "ended" } else { "running" },
            "stdoutBytes": out,
            "stderrBytes": err,
        });
        match end {
            Some((at, report)) => {
                status["durationMs"] = json!(millis(at.duration_since(job.started)));
                status["endedBy"] = json!(report.ended_by);
                if let Some(code) = report.exit_code {
                    status["exitCode"] = json!(code);
                }
                if let Some(signal) = report.signal {
                    status["signal"] = json!(signal);
                }
                if report.still_running {
                    status["stillRunning"] = json!(true);
                }
            }
            None => status["runningMs"] = json!(millis(job.started.elapsed())),
        }
        Ok(status)
    }

    /// A page of what a job wrote to a stream, from byte `offset`: the text and where to read on.
    pub fn job_output(&self, id: u32, stream: &str, offset: u64, limit: usize) -> Result<Value, String> {
        let job = self.job(id)?;
        let (page, total) = {
            let mut streams = lock(&job.streams);
            let capture = match stream {
                "stdout" => &mut streams.out,
                "stderr" => &mut streams.err,
                other => return Err(format!("stream must be \"stdout\" or \"stderr\"; got \"{other}\"")),
            };
            (capture.read(offset, limit), capture.total)
        };
        let mut answer = json!({
            "jobId": id,
            "stream": stream,
            "state": job.state(),
            "from": page.from,
            "to": page.to,
            "totalBytes": total,
            "text": clean(&page.bytes),
        });
        if page.skipped > 0 {
            answer["skippedBytes"] = json!(page.skipped);
        }
        if page.to < total {
            answer["nextOffset"] = json!(page.to);
        }
        Ok(answer)
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

    /// Takes the command of `run` on as a job, when there is room for one; its id.
    fn adopt(&self, run: u32, tool: &str, command: String, started: Instant, control: &Arc<Control>, streams: &Arc<Mutex<Streams>>) -> Option<u32> {
        let mut state = lock(&self.state);
        forget_old_jobs(&mut state, Instant::now());
        if state.closed || state.jobs.len() >= MAX_JOBS {
            return None;
        }
        state.next_job += 1;
        let id = state.next_job;
        let job = Job { id, tool: tool.to_string(), command, started, control: control.clone(), streams: streams.clone(), end: Mutex::new(None) };
        state.jobs.insert(id, Arc::new(job));
        state.running.remove(&run);
        Some(id)
    }

    fn job_ended(&self, id: u32, report: CommandReport) {
        let job = lock(&self.state).jobs.get(&id).cloned();
        if let Some(job) = job {
            *lock(&job.end) = Some((Instant::now(), report));
        }
    }
}

/// Ended jobs are forgotten some minutes after they end, and first when room is needed.
fn forget_old_jobs(state: &mut HubState, now: Instant) {
    let ended = |job: &Job| lock(&job.end).as_ref().map(|(at, _)| *at);
    state.jobs.retain(|_, job| ended(job).is_none_or(|at| now.duration_since(at) < JOB_KEPT));
    if state.jobs.len() >= MAX_JOBS {
        if let Some(oldest) = state.jobs.iter().filter_map(|(id, job)| ended(job).map(|at| (at, *id))).min().map(|(_, id)| id) {
            state.jobs.remove(&oldest);
        }
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

/// One stream's output: the first half of the capture, the last half, and the bytes after the first half in a
/// file up to its cap. Memory stays at the capture's size whatever the command writes.
struct Capture {
    head: Vec<u8>,
    head_max: usize,
    tail: VecDeque<u8>,
    tail_max: usize,
    total: u64,
    spill: Option<Spill>,
    spill_max: u64,
    /// The spill file could not be written: the middle is lost, and the result says only how much.
    spill_failed: bool,
}

struct Spill {
    file: File,
    path: PathBuf,
    len: u64,
}

impl Drop for Spill {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

struct Page {
    bytes: Vec<u8>,
    from: u64,
    to: u64,
    skipped: u64,
}

impl Capture {
    fn new(bytes: usize, spill_max: u64) -> Self {
        let head_max = bytes / 2;
        Capture { head: Vec::new(), head_max, tail: VecDeque::new(), tail_max: bytes - head_max, total: 0, spill: None, spill_max, spill_failed: false }
    }

    fn push(&mut self, mut chunk: &[u8]) {
        self.total += chunk.len() as u64;
        if self.head.len() < self.head_max {
            let n = chunk.len().min(self.head_max - self.head.len());
            self.head.extend_from_slice(&chunk[..n]);
            chunk = &chunk[n..];
        }
        if chunk.is_empty() {
            return;
        }
        // Everything past the head goes to the spill (once a byte is about to leave the tail) and to the tail.
        if self.tail.len() + chunk.len() > self.tail_max && self.spill.is_none() && !self.spill_failed && self.spill_max > 0 {
            match open_spill() {
                Ok(spill) => {
                    self.spill = Some(spill);
                    let kept: Vec<u8> = self.tail.iter().copied().collect();
                    self.write_spill(&kept);
                }
                Err(_) => self.spill_failed = true,
            }
        }
        self.write_spill(chunk);
        if chunk.len() >= self.tail_max {
            self.tail.clear();
            self.tail.extend(&chunk[chunk.len() - self.tail_max..]);
        } else {
            let overflow = (self.tail.len() + chunk.len()).saturating_sub(self.tail_max);
            self.tail.drain(..overflow);
            self.tail.extend(chunk);
        }
    }

    fn write_spill(&mut self, bytes: &[u8]) {
        let Some(spill) = self.spill.as_mut() else { return };
        let room = self.spill_max.saturating_sub(spill.len) as usize;
        let n = bytes.len().min(room);
        if n == 0 {
            return;
        }
        // A blocking write from the reading task: it lands in the page cache, and the cap bounds it.
        if spill.file.write_all(&bytes[..n]).is_err() {
            self.spill = None;
            self.spill_failed = true;
            return;
        }
        spill.len += n as u64;
    }

    /// Where the tail starts in the stream.
    fn tail_from(&self) -> u64 {
        self.total - self.tail.len() as u64
    }

    fn omitted(&self) -> u64 {
        self.tail_from() - self.head.len() as u64
    }

    /// What the result shows: the whole output, or its head and tail around a line saying what was left out.
    fn render(&self, artifact: Option<&str>) -> String {
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        let omitted = self.omitted();
        if omitted == 0 {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return clean(&all);
        }
        let whole = match artifact {
            Some(path) => format!("; the whole output is saved in the artifact {path}"),
            None => String::new(),
        };
        format!("{}\n[… {omitted} bytes left out here{whole} …]\n{}", clean(cut_end(&self.head)), clean(cut_start(&tail)))
    }

    /// The stream as far as it was kept (head, spill, tail), with a line where bytes were not kept.
    fn whole(&mut self) -> Vec<u8> {
        let mut all = self.head.clone();
        let spilled_to = self.head.len() as u64 + self.spill.as_ref().map_or(0, |s| s.len);
        if let Some(spill) = self.spill.as_mut() {
            if spill.file.seek(SeekFrom::Start(0)).is_ok() {
                let _ = (&spill.file).take(spill.len).read_to_end(&mut all);
            }
        }
        let tail_from = self.tail_from();
        if spilled_to < tail_from {
            all.extend_from_slice(format!("\n[… {} bytes not kept here …]\n", tail_from - spilled_to).as_bytes());
        }
        let skip = spilled_to.saturating_sub(tail_from) as usize;
        all.extend(self.tail.iter().skip(skip));
        all
    }

    /// Up to `limit` bytes from `offset`; bytes kept nowhere are skipped over, and the page says how many.
    fn read(&mut self, offset: u64, limit: usize) -> Page {
        let offset = offset.min(self.total);
        let head_len = self.head.len() as u64;
        let spilled_to = head_len + self.spill.as_ref().map_or(0, |s| s.len);
        let tail_from = self.tail_from();
        let (from, skipped) = if offset < spilled_to || offset >= tail_from { (offset, 0) } else { (tail_from, tail_from - offset) };
        let mut bytes = Vec::new();
        if from < head_len {
            let end = (from as usize + limit).min(self.head.len());
            bytes.extend_from_slice(&self.head[from as usize..end]);
        } else if from < spilled_to && from < tail_from {
            if let Some(spill) = self.spill.as_mut() {
                let n = (spilled_to - from).min(limit as u64);
                if spill.file.seek(SeekFrom::Start(from - head_len)).is_ok() {
                    let _ = (&spill.file).take(n).read_to_end(&mut bytes);
                }
            }
        } else {
            let at = (from - tail_from) as usize;
            bytes.extend(self.tail.iter().skip(at).take(limit));
        }
        let to = from + bytes.len() as u64;
        Page { bytes, from, to, skipped }
    }
}

fn open_spill() -> std::io::Result<Spill> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut tries = 0;
    loop {
        let path = std::env::temp_dir().join(format!("toolgate-output-{}-{:016x}", std::process::id(), fastrand::u64(..)));
        match options.open(&path) {
            Ok(file) => return Ok(Spill { file, path, len: 0 }),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 10 => tries += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Output as text: invalid UTF-8 and NUL bytes become U+FFFD.
fn clean(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    if text.contains('\0') {
        text.replace('\0', "\u{FFFD}")
    } else {
        text.into_owned()
    }
}

/// The head without a character cut off at its end.
fn cut_end(bytes: &[u8]) -> &[u8] {
    match std::str::from_utf8(bytes) {
        Err(e) if e.error_len().is_none() => &bytes[..e.valid_up_to()],
        _ => bytes,
    }
}

/// The tail without the continuation bytes of a character cut off at its start.
fn cut_start(bytes: &[u8]) -> &[u8] {
    let skip = bytes.iter().take(3).take_while(|b| (**b & 0xC0) == 0x80).count();
    &bytes[skip..]
}

struct Streams {
    out: Capture,
    err: Capture,
}

impl Streams {
    fn new(capture_bytes: usize, spill_bytes: u64) -> Self {
        Streams { out: Capture::new(capture_bytes, spill_bytes), err: Capture::new(capture_bytes, spill_bytes) }
    }
}

#[derive(Clone, Copy)]
enum Signal {
    Term,
    Kill,
}

impl Signal {
    fn name(self) -> &'static str {
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
fn signal_session(sid: i32, signal: Signal) {
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
fn signal_session(_sid: i32, _signal: Signal) {}

/// Whether any process of the session still runs. An exited process nobody has reaped yet (a zombie: its parent
/// died and the system's init does not reap) runs no more and does not count.
#[cfg(unix)]
fn session_alive(sid: i32) -> bool {
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
fn session_alive(_sid: i32) -> bool {
    false
}

/// The process group of each process of session `sid` in any state but zombie or dead, read from /proc; None when
/// /proc cannot be read.
#[cfg(target_os = "linux")]
fn session_groups(sid: i32) -> Option<Vec<i32>> {
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

fn signal_name(signal: i32) -> String {
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

fn millis(d: Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(unix)]
fn spawn(inv: &Invocation) -> std::io::Result<tokio::process::Child> {
    use std::process::Stdio;
    let mut command = match (&inv.argv, &inv.shell) {
        (_, Some(shell)) => {
            let mut c = tokio::process::Command::new("/bin/sh");
            c.arg("-c").arg(shell);
            c
        }
        (Some(argv), _) => {
            let mut c = tokio::process::Command::new(&argv[0]);
            c.args(&argv[1..]);
            c
        }
        _ => unreachable!("Invocation::from_json requires argv or shell"),
    };
    command.env_clear().envs(&inv.env);
    if let Some(cwd) = &inv.cwd {
        command.current_dir(cwd);
    }
    command.stdin(if inv.stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: setsid is async-signal-safe, and nothing else runs between fork and exec. A session of its own
    // holds everything the command starts (only setsid leaves it), whatever process groups it makes, and keeps the
    // terminal's signals (Ctrl-C to the server) from reaching it unasked.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.spawn()
}

#[cfg(not(unix))]
fn spawn(_inv: &Invocation) -> std::io::Result<tokio::process::Child> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "command tools run only on Unix"))
}

/// The stop under way: why, the last signal sent, and when SIGKILL follows SIGTERM.
struct Stopping {
    why: CommandEnd,
    sent: Signal,
    kill_at: Option<Instant>,
}

impl Stopping {
    fn begin(sid: i32, why: CommandEnd, grace: Duration, now: Instant) -> Self {
        signal_session(sid, Signal::Term);
        Stopping { why, sent: Signal::Term, kill_at: Some(crate::timer::after(now, grace)) }
    }

    fn escalate(&mut self, sid: i32) {
        signal_session(sid, Signal::Kill);
        self.sent = Signal::Kill;
        self.kill_at = None;
    }
}

/// Where a command's output and calls go: to the call that waits on it, or (once backgrounded) to its job.
enum Mode {
    Foreground { total_at: Instant },
    Job { id: u32, until: Instant },
}

async fn read_some(pipe: &mut Option<impl tokio::io::AsyncRead + Unpin>, buf: &mut [u8]) -> std::io::Result<usize> {
    use tokio::io::AsyncReadExt;
    match pipe {
        Some(p) => p.read(buf).await,
        None => std::future::pending().await,
    }
}

/// Spawns the command, reads it, keeps its limits and stops it; reports to the hub when it is over.
async fn watch(hub: Arc<Hub>, run: u32, launch: Launch, control: Arc<Control>, wake: Wake) {
    let started = Instant::now();
    let Launch { tool, invocation, limits, timeout_ms, idle_timeout_ms, save, redact } = launch;
    let report = |ended_by, pid| CommandReport {
        ended_by,
        pid,
        exit_code: None,
        signal: None,
        stopped_with: None,
        leftovers_stopped: false,
        still_running: false,
        limit_ms: None,
        job_id: None,
        duration_ms: 0.0,
        stdout_bytes: 0,
        stderr_bytes: 0,
        stdout_artifact: None,
        stderr_artifact: None,
        spawn_error: None,
    };
    let mut child = match spawn(&invocation) {
        Ok(child) => child,
        Err(e) => {
            let what = invocation.argv.as_ref().and_then(|a| a.first()).map_or("/bin/sh".to_string(), |p| format!("\"{p}\""));
            let cwd = invocation.cwd.as_deref().map(|c| format!(" in \"{c}\"")).unwrap_or_default();
            let mut r = report(CommandEnd::SpawnFailed, None);
            r.spawn_error = Some(format!("{what} could not be started{cwd}: {e}"));
            r.duration_ms = millis(started.elapsed());
            hub.finish(run, Some(Finished { stdout: String::new(), stderr: String::new(), report: r }), &wake);
            return;
        }
    };
    let pid = child.id();
    let sid = pid.map_or(0, |id| id as i32);
    control.sid.store(sid, Ordering::Release);
    if let (Some(text), Some(mut stdin)) = (invocation.stdin.clone(), child.stdin.take()) {
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            // A command that exits without reading all of it closes the pipe: that is its business.
            let _ = stdin.write_all(text.as_bytes()).await;
        });
    }
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    let streams = Arc::new(Mutex::new(Streams::new(limits.capture_bytes, limits.spill_bytes)));
    let grace = Duration::from_millis(limits.kill_grace_ms);
    let idle = idle_timeout_ms.map(Duration::from_millis);
    let mut mode = Mode::Foreground { total_at: crate::timer::after(started, Duration::from_millis(timeout_ms)) };
    let mut last_output = started;
    let mut last_progress: Option<Instant> = None;
    let (mut lines_out, mut lines_err) = (Lines::default(), Lines::default());
    let mut exit: Option<std::process::ExitStatus> = None;
    let mut stopping: Option<Stopping> = None;
    let mut leftovers = false;
    let mut drain_until: Option<Instant> = None;
    let (mut buf_out, mut buf_err) = (vec![0u8; CHUNK], vec![0u8; CHUNK]);
    loop {
        let now = Instant::now();
        if exit.is_some() && out.is_none() && err.is_none() {
            break;
        }
        if exit.is_some() && drain_until.is_some_and(|at| now >= at) {
            break; // what holds the output open left the session: it is not ours to wait for
        }
        // The next moment something is due: a limit, SIGKILL after the grace, or a look at the session.
        let mut due: Option<Instant> = None;
        let mut at = |t: Instant| due = Some(due.map_or(t, |d: Instant| d.min(t)));
        match (&stopping, &mode) {
            (Some(s), _) => {
                if let Some(k) = s.kill_at {
                    at(k);
                }
            }
            (None, Mode::Foreground { total_at }) => {
                at(*total_at);
                if let Some(idle) = idle {
                    at(crate::timer::after(last_output, idle));
                }
            }
            (None, Mode::Job { until, .. }) => at(*until),
        }
        if exit.is_some() {
            at(drain_until.unwrap_or(now + POLL));
        }
        let sleep = async {
            match due {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            read = read_some(&mut out, &mut buf_out) => match read {
                Ok(n) if n > 0 => {
                    lock(&streams).out.push(&buf_out[..n]);
                    last_output = Instant::now();
                    if let Mode::Foreground { .. } = mode {
                        report_progress(&hub, run, &mut lines_out, &buf_out[..n], &mut last_progress, &wake, &redact);
                    }
                }
                _ => out = None,
            },
            read = read_some(&mut err, &mut buf_err) => match read {
                Ok(n) if n > 0 => {
                    lock(&streams).err.push(&buf_err[..n]);
                    last_output = Instant::now();
                    if let Mode::Foreground { .. } = mode {
                        report_progress(&hub, run, &mut lines_err, &buf_err[..n], &mut last_progress, &wake, &redact);
                    }
                }
                _ => err = None,
            },
            status = child.wait(), if exit.is_none() => {
                exit = Some(status.unwrap_or_else(|_| std::process::ExitStatus::default()));
                // What it started and left behind in its session is stopped: nothing of a finished command runs on.
                if stopping.is_none() && session_alive(sid) {
                    leftovers = true;
                    stopping = Some(Stopping::begin(sid, CommandEnd::Exit, grace, Instant::now()));
                }
            },
            _ = control.stop.notified() => {
                if stopping.is_none() {
                    let why = control.stop_reason().unwrap_or(CommandEnd::Cancelled);
                    stopping = Some(Stopping::begin(sid, why, grace, Instant::now()));
                }
            },
            _ = sleep => {
                let now = Instant::now();
                if let Some(s) = stopping.as_mut() {
                    if s.kill_at.is_some_and(|k| now >= k) {
                        s.escalate(sid);
                    }
                } else {
                    match mode {
                        Mode::Foreground { total_at } if now >= total_at => {
                            let adopted = (limits.on_timeout == OnTimeout::Background)
                                .then(|| hub.adopt(run, &tool, invocation.display(), started, &control, &streams))
                                .flatten();
                            match adopted {
                                Some(id) => {
                                    let mut r = report(CommandEnd::Background, pid);
                                    r.job_id = Some(id);
                                    r.limit_ms = Some(timeout_ms);
                                    let finished = snapshot(&streams, r, started);
                                    hub.finish(run, Some(finished), &wake);
                                    mode = Mode::Job { id, until: crate::timer::after(started, Duration::from_millis(limits.job_timeout_ms)) };
                                }
                                None => stopping = Some(Stopping::begin(sid, CommandEnd::Timeout, grace, now)),
                            }
                        }
                        Mode::Foreground { .. } if idle.is_some_and(|idle| now >= crate::timer::after(last_output, idle)) => {
                            stopping = Some(Stopping::begin(sid, CommandEnd::IdleTimeout, grace, now));
                        }
                        Mode::Job { until, .. } if now >= until => {
                            stopping = Some(Stopping::begin(sid, CommandEnd::Timeout, grace, now));
                        }
                        _ => {}
                    }
                }
                if exit.is_some() && drain_until.is_none() && !session_alive(sid) {
                    drain_until = Some(now + DRAIN);
                }
            },
        }
    }
    // The process is reaped and its output closed; what the stop began is seen through to the end.
    let still_running = match stopping.as_mut() {
        Some(s) => !session_gone(sid, s).await,
        None => false,
    };
    let duration = started.elapsed();
    let mut r = report(stopping.as_ref().map_or(CommandEnd::Exit, |s| s.why), pid);
    if let Some(status) = exit {
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            r.exit_code = status.code();
            r.signal = status.signal().map(signal_name);
        }
        #[cfg(not(unix))]
        {
            r.exit_code = status.code();
        }
    }
    r.stopped_with = stopping.as_ref().map(|s| s.sent.name());
    r.leftovers_stopped = leftovers;
    r.still_running = still_running || drain_until.is_some() && (out.is_some() || err.is_some());
    r.limit_ms = match r.ended_by {
        CommandEnd::Timeout => Some(match mode {
            Mode::Job { .. } => limits.job_timeout_ms,
            Mode::Foreground { .. } => timeout_ms,
        }),
        CommandEnd::IdleTimeout => idle_timeout_ms,
        _ => None,
    };
    match mode {
        Mode::Job { id, .. } => {
            r.duration_ms = millis(duration);
            let streams = lock(&streams);
            r.stdout_bytes = streams.out.total;
            r.stderr_bytes = streams.err.total;
            drop(streams);
            hub.job_ended(id, r);
        }
        Mode::Foreground { .. } => {
            if control.stop_reason() == Some(CommandEnd::Cancelled) {
                // Its call was answered already (cancelled): nobody reads a report.
                hub.finish(run, None, &wake);
                return;
            }
            let streams = match Arc::try_unwrap(streams) {
                Ok(alone) => alone.into_inner().unwrap_or_else(|p| p.into_inner()),
                Err(shared) => std::mem::replace(&mut *lock(&shared), Streams::new(2, 0)),
            };
            r.duration_ms = millis(duration);
            // Reading the spill back and saving it are file work: off the runtime's workers.
            let shown = tokio::task::spawn_blocking(move || {
                let mut streams = streams;
                r.stdout_artifact = save_whole(&mut streams.out, &tool, "stdout", &save);
                r.stderr_artifact = save_whole(&mut streams.err, &tool, "stderr", &save);
                r.stdout_bytes = streams.out.total;
                r.stderr_bytes = streams.err.total;
                Finished { stdout: streams.out.render(r.stdout_artifact.as_deref()), stderr: streams.err.render(r.stderr_artifact.as_deref()), report: r }
            })
            .await;
            hub.finish(run, shown.ok(), &wake);
        }
    }
}

/// A stream with bytes left out of its result is saved whole (as far as it was kept) as an artifact.
fn save_whole(capture: &mut Capture, tool: &str, stream: &str, save: &Save) -> Option<String> {
    if capture.omitted() == 0 || capture.spill.is_none() {
        return None;
    }
    let whole = capture.whole();
    capture.spill = None;
    save(&format!("{tool}-{stream}"), whole)
}

/// What the call is answered with when its command moves to the background: the output so far.
fn snapshot(streams: &Arc<Mutex<Streams>>, mut report: CommandReport, started: Instant) -> Finished {
    let streams = lock(streams);
    report.duration_ms = millis(started.elapsed());
    report.stdout_bytes = streams.out.total;
    report.stderr_bytes = streams.err.total;
    Finished { stdout: streams.out.render(None), stderr: streams.err.render(None), report }
}

/// The latest complete line a stream wrote, redacted, then cut short; at most every `PROGRESS_EVERY`.
fn report_progress(hub: &Hub, run: u32, lines: &mut Lines, chunk: &[u8], last: &mut Option<Instant>, wake: &Wake, redact: &Redact) {
    let now = Instant::now();
    let want = !last.is_some_and(|at| now.duration_since(at) < PROGRESS_EVERY);
    let Some(line) = lines.push(chunk, want) else { return };
    *last = Some(now);
    hub.progress(run, redact(line.trim()).chars().take(PROGRESS_CHARS).collect(), wake);
}

/// What a stream has written since its last line end: the start of a line still being written, so that a line
/// written in several chunks is reported whole, never a piece of it (which could hold a piece of a secret).
#[derive(Default)]
struct Lines {
    partial: Vec<u8>,
    /// The line being written grew past `LINE_MAX` and its start was let go: it is not reported.
    overflowed: bool,
}

/// The longest line a progress report is read from, in bytes.
const LINE_MAX: usize = 8 * 1024;

impl Lines {
    /// Takes in a chunk; with `want`, answers the latest complete line that is not blank.
    fn push(&mut self, chunk: &[u8], want: bool) -> Option<String> {
        let is_end = |b: &u8| matches!(b, b'\n' | b'\r');
        let Some(end) = chunk.iter().rposition(is_end) else {
            self.keep(chunk);
            return None;
        };
        let complete = &chunk[..end];
        let latest = want
            .then(|| {
                complete.rsplit(is_end).find_map(|segment| {
                    // The chunk's first segment finishes the line kept from before.
                    let line = if segment.as_ptr() != complete.as_ptr() {
                        clean(segment)
                    } else if self.overflowed {
                        return None;
                    } else {
                        clean(&[self.partial.as_slice(), segment].concat())
                    };
                    (!line.trim().is_empty()).then_some(line)
                })
            })
            .flatten();
        self.partial.clear();
        self.overflowed = false;
        self.keep(&chunk[end + 1..]);
        latest
    }

    fn keep(&mut self, bytes: &[u8]) {
        if self.overflowed {
            return;
        }
        if self.partial.len() + bytes.len() > LINE_MAX {
            self.partial.clear();
            self.overflowed = true;
        } else {
            self.partial.extend_from_slice(bytes);
        }
    }
}

/// Waits for the session to be gone: SIGKILL when the grace ends, then a bounded wait in which SIGKILL reaches
/// whatever was forked since. False when something of it still runs after all that.
async fn session_gone(sid: i32, stopping: &mut Stopping) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_keeps_head_and_tail_and_spills_the_middle() {
        let mut c = Capture::new(8, 1 << 20);
        for chunk in [b"abcd".as_slice(), b"efgh", b"ijkl", b"mnop"] {
            c.push(chunk);
        }
        assert_eq!(c.total, 16);
        assert_eq!(c.head, b"abcd");
        assert_eq!(c.tail.iter().copied().collect::<Vec<_>>(), b"mnop");
        assert_eq!(c.omitted(), 8);
        assert_eq!(c.whole(), b"abcdefghijklmnop");
        let page = c.read(6, 4);
        assert_eq!((page.bytes.as_slice(), page.from, page.to), (b"ghij".as_slice(), 6, 10));
        assert!(c.render(Some("/a")).contains("8 bytes left out here; the whole output is saved in the artifact /a"));
    }

    #[test]
    fn past_the_spill_cap_the_gap_is_named_and_paging_skips_it() {
        let mut c = Capture::new(4, 3);
        c.push(b"0123456789");
        assert_eq!(String::from_utf8(c.whole()).unwrap(), "01234\n[… 3 bytes not kept here …]\n89");
        let page = c.read(6, 10);
        assert_eq!((page.from, page.skipped, page.bytes.as_slice()), (8, 2, b"89".as_slice()));
    }

    #[test]
    fn output_is_clean_text_whatever_the_bytes() {
        assert_eq!(clean(b"a\0b\xffc"), "a\u{FFFD}b\u{FFFD}c");
        assert_eq!(cut_end("aé".as_bytes().split_at(2).0), b"a");
        assert_eq!(cut_start(&"é".as_bytes()[1..]), b"");
    }

    #[test]
    fn progress_lines_are_whole_lines_however_the_chunks_fall() {
        let mut lines = Lines::default();
        assert_eq!(lines.push(b"building", true), None, "a line not ended yet");
        assert_eq!(lines.push(b" step 1\nstep 2 of", true).as_deref(), Some("building step 1"));
        assert_eq!(lines.push(b" 3\r\n\r\n", true).as_deref(), Some("step 2 of 3"), "blank lines are passed over");
        assert_eq!(lines.push(b"a\nb\nc", false), None, "not wanted now: only kept");
        assert_eq!(lines.push(b"d\n", true).as_deref(), Some("cd"));
        let mut long = Lines::default();
        long.push(&vec![b'x'; LINE_MAX + 1], true);
        assert_eq!(long.push(b"secret-tail\nnext\n", true).as_deref(), Some("next"));
        assert_eq!(long.push(b"only-the-end-of-an-overlong-one\n", true).as_deref(), Some("only-the-end-of-an-overlong-one"), "a line begun after it is whole");
        let mut cut = Lines::default();
        cut.push(&vec![b'y'; LINE_MAX + 1], true);
        assert_eq!(cut.push(b"its-end\n", true), None, "the end of a line whose start was let go is not reported");
    }

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
