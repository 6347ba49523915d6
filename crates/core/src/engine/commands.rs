//! Station 9 for command tools: the host says what a call runs, the engine spawns it (see `command`), and what
//! the process wrote comes back as the run's outcome without crossing to JS.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::wire::Progress;
use super::{Engine, Step};
use crate::artifacts::Origin;
use crate::command::{Hub, Invocation, Launch, Redact, Save, Wake};
use crate::normalize::Outcome;
use crate::registry::Tool;
use crate::tool::ToolInfo;
use crate::result::CommandOutput;

/// How long past its own limit and kill grace a command's run may go before the engine answers it without the
/// command (the command reports first unless something went badly wrong).
const BACKSTOP_MS: u64 = 10_000;

pub type CommandTask = Pin<Box<dyn Future<Output = ()> + Send>>;

impl Engine {
    /// The run's total and idle limits as the engine arms them: a command keeps its own (it sees its output), the
    /// engine only a later backstop.
    pub(super) fn run_limits(tool: &Tool) -> (Duration, Option<u64>) {
        match &tool.spec.command {
            Some(limits) => (Duration::from_millis(tool.timeout_ms.saturating_add(limits.kill_grace_ms).saturating_add(BACKSTOP_MS)), None),
            None => (Duration::from_millis(tool.timeout_ms), tool.spec.idle_timeout_ms),
        }
    }

    /// Starts the command of `run` as the host's `command(args)` gave it: the task to run on the host's runtime,
    /// or None when the run is over already. An invocation that cannot run is the tool's error (the host settles
    /// the run with it).
    pub fn spawn_command(&mut self, run: u32, invocation_json: &str, wake: Wake) -> Result<Option<CommandTask>, String> {
        let Some(r) = self.runs.get(&run) else { return Ok(None) };
        let turn = &self.turns[&r.at.turn];
        let tool = turn.slots[r.at.index].tool().clone();
        let Some(limits) = tool.spec.command.clone() else { return Err(format!("tool \"{}\" is not a command tool", tool.spec.name)) };
        let invocation = Invocation::from_json(invocation_json)?;
        let (shaper, owner) = (self.shaper.clone(), turn.owner.clone());
        let redact_with = self.shaper.clone();
        let redact: Redact = Arc::new(move |text| redact_with.redact_text(text));
        let untrusted = tool.spec.untrusted.then(|| tool.spec.name.clone());
        // A stream too long for the result is saved redacted, for the context that ran it, as shaping saves outputs.
        let save: Save = Arc::new(move |stem, bytes| {
            let text = shaper.redact_text(&String::from_utf8_lossy(&bytes));
            let origin = Origin { owner: owner.as_deref(), untrusted: untrusted.as_deref() };
            shaper.artifacts.save(stem, "txt", text.as_bytes(), origin).ok().map(|path| path.display().to_string())
        });
        let launch = Launch {
            tool: tool.spec.name.clone(),
            invocation,
            limits,
            timeout_ms: tool.timeout_ms,
            idle_timeout_ms: tool.spec.idle_timeout_ms,
            save,
            redact,
        };
        self.commands.launch(run, launch, wake).map(Some)
    }

    /// What an ended command hands its run, for the normalize station.
    pub(super) fn command_outcome(&self, run: u32) -> Option<Outcome> {
        let r = self.runs.get(&run)?;
        let tool = self.open_slot(r.at)?.tool.clone()?;
        let finished = self.commands.take_finished(run)?;
        Some(Outcome::Command(Box::new(CommandOutput {
            stdout: finished.stdout,
            stderr: finished.stderr,
            report: finished.report,
            fail_on_exit_code: tool.spec.command.as_ref().is_some_and(|l| l.fail_on_exit_code),
            timeout_retryable: tool.timeout_retryable(),
        })))
    }

    /// Commands of runs aborted in this step stop: their calls were answered without them.
    pub(super) fn stop_abandoned_commands(&self, step: &Step) {
        for abort in &step.abort {
            self.commands.abandon(abort.run);
        }
    }

    /// Commands that ended and the lines they wrote, for the host.
    pub(super) fn command_news(&self, step: &mut Step) {
        let (ended, progress) = self.commands.take_news();
        step.commands.extend(ended);
        step.progress.extend(progress.into_iter().map(|(run, line)| Progress { run, line }));
    }

    /// The commands and jobs, for the job tools, `close()` and the process's exit.
    pub fn commands(&self) -> &Arc<Hub> {
        &self.commands
    }
}
