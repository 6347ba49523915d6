//! The task that runs one command: reads its output, keeps its limits, stops it, and reports to the hub.

use super::*;

/// Where a command's output and calls go: to the call that waits on it, or (once backgrounded) to its job.
pub(super) enum Mode {
    Foreground { total_at: Instant },
    Job { id: u32, until: Instant },
}

pub(super) async fn read_some(pipe: &mut Option<impl tokio::io::AsyncRead + Unpin>, buf: &mut [u8]) -> std::io::Result<usize> {
    use tokio::io::AsyncReadExt;
    match pipe {
        Some(p) => p.read(buf).await,
        None => std::future::pending().await,
    }
}

/// Spawns the command, reads it, keeps its limits and stops it; reports to the hub when it is over.
pub(super) async fn watch(hub: Arc<Hub>, run: u32, launch: Launch, control: Arc<Control>, wake: Wake) {
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
        stdout_omitted_bytes: 0,
        stdout_dropped_bytes: 0,
        stderr_omitted_bytes: 0,
        stderr_dropped_bytes: 0,
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
            lock(&streams).count(&mut r);
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
                streams.count(&mut r);
                Finished { stdout: streams.out.render(r.stdout_artifact.as_deref()), stderr: streams.err.render(r.stderr_artifact.as_deref()), report: r }
            })
            .await;
            hub.finish(run, shown.ok(), &wake);
        }
    }
}

/// A stream with bytes left out of its result is saved whole (as far as it was kept) as an artifact.
pub(super) fn save_whole(capture: &mut Capture, tool: &str, stream: &str, save: &Save) -> Option<String> {
    if capture.omitted() == 0 || capture.spill.is_none() {
        return None;
    }
    let whole = capture.whole();
    capture.spill = None;
    let saved = save(&format!("{tool}-{stream}"), whole);
    if saved.is_none() {
        // Not saved (past the artifacts' limits, a write that failed): the spilled middle is kept nowhere.
        capture.spilled = 0;
    }
    saved
}

/// What the call is answered with when its command moves to the background: the output so far.
pub(super) fn snapshot(streams: &Arc<Mutex<Streams>>, mut report: CommandReport, started: Instant) -> Finished {
    let streams = lock(streams);
    report.duration_ms = millis(started.elapsed());
    streams.count(&mut report);
    Finished { stdout: streams.out.render(None), stderr: streams.err.render(None), report }
}

/// The latest complete line a stream wrote, redacted, then cut short; at most every `PROGRESS_EVERY`.
pub(super) fn report_progress(hub: &Hub, run: u32, lines: &mut Lines, chunk: &[u8], last: &mut Option<Instant>, wake: &Wake, redact: &Redact) {
    let now = Instant::now();
    let want = !last.is_some_and(|at| now.duration_since(at) < PROGRESS_EVERY);
    let Some(line) = lines.push(chunk, want) else { return };
    *last = Some(now);
    hub.progress(run, redact(line.trim()).chars().take(PROGRESS_CHARS).collect(), wake);
}
