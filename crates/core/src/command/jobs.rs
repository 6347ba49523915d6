//! Commands moved to the background: the job tools read their state and output, and stop them.

use super::*;

/// A command moved to the background: its output keeps being read, and the job tools read it.
pub(super) struct Job {
    pub(super) id: u32,
    pub(super) tool: String,
    pub(super) command: String,
    pub(super) started: Instant,
    pub(super) control: Arc<Control>,
    pub(super) streams: Arc<Mutex<Streams>>,
    pub(super) end: Mutex<Option<(Instant, CommandReport)>>,
}

impl Job {
    pub(super) fn running(&self) -> bool {
        lock(&self.end).is_none()
    }

    pub(super) fn state(&self) -> &'static str {
        if self.running() {
            "running"
        } else {
            "ended"
        }
    }
}

/// Ended jobs are forgotten some minutes after they end, and first when room is needed.
pub(super) fn forget_old_jobs(state: &mut HubState, now: Instant) {
    let ended = |job: &Job| lock(&job.end).as_ref().map(|(at, _)| *at);
    state.jobs.retain(|_, job| ended(job).is_none_or(|at| now.duration_since(at) < JOB_KEPT));
    if state.jobs.len() >= MAX_JOBS {
        if let Some(oldest) = state.jobs.iter().filter_map(|(id, job)| ended(job).map(|at| (at, *id))).min().map(|(_, id)| id) {
            state.jobs.remove(&oldest);
        }
    }
}

impl Hub {
    pub fn kill_job(&self, id: u32) -> Result<bool, String> {
        let job = self.job(id)?;
        let running = job.running();
        if running {
            job.control.request_stop(CommandEnd::Cancelled);
        }
        Ok(running)
    }

    pub(super) fn job(&self, id: u32) -> Result<Arc<Job>, String> {
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

    /// Takes the command of `run` on as a job, when there is room for one; its id.
    pub(super) fn adopt(&self, run: u32, tool: &str, command: String, started: Instant, control: &Arc<Control>, streams: &Arc<Mutex<Streams>>) -> Option<u32> {
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

    pub(super) fn job_ended(&self, id: u32, report: CommandReport) {
        let job = lock(&self.state).jobs.get(&id).cloned();
        if let Some(job) = job {
            *lock(&job.end) = Some((Instant::now(), report));
        }
    }
}
