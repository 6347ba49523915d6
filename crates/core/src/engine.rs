//! One executor: the registry, the turns in flight and their deadlines. The host drives it through plain
//! synchronous calls (`begin`, `complete`, `expire`, `cancel`, `finish`); each answers with a `Step` that says
//! which handlers to start, which to abort and which turns are done. Stations are called here in pipeline order.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::ser::SerializeTuple;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::calls::{read_calls, IncomingCall};
use crate::normalize::{normalize, Outcome};
use crate::options::{EngineOptions, ToolSpec};
use crate::permission::Policy;
use crate::registry::{DefinitionFormat, Registry, Tool};
use crate::result::{ErrorKind, StationMark, ToolResult};
use crate::scheduler::Schedule;
use crate::timer::Deadlines;
use crate::{invoke, lookup, parse, shape, validate};

/// A handler to start: `[run, turn, callId, toolName, args]` on the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct Start {
    pub run: u32,
    pub turn: u32,
    pub call_id: String,
    pub name: String,
    pub args: Value,
}

impl Serialize for Start {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut t = s.serialize_tuple(5)?;
        t.serialize_element(&self.run)?;
        t.serialize_element(&self.turn)?;
        t.serialize_element(&self.call_id)?;
        t.serialize_element(&self.name)?;
        t.serialize_element(&self.args)?;
        t.end()
    }
}

#[derive(Debug, Default, Serialize, PartialEq)]
pub struct Step {
    /// Set by `begin`: the id of the turn it opened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// Handlers to start now.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub start: Vec<Start>,
    /// Runs whose handlers must be aborted (they timed out or their turn was cancelled).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub abort: Vec<u32>,
    /// Turns whose results are all in: call `finish`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub done: Vec<u32>,
}

impl Step {
    pub fn is_empty(&self) -> bool {
        self.turn.is_none() && self.start.is_empty() && self.abort.is_empty() && self.done.is_empty()
    }

    /// The wire form: empty string when there is nothing to do, so the host can skip parsing.
    pub fn to_wire(&self) -> String {
        if self.is_empty() {
            String::new()
        } else {
            serde_json::to_string(self).expect("a step serializes")
        }
    }
}

struct Slot {
    id: String,
    tool: Option<Arc<Tool>>,
    marks: Vec<StationMark>,
    started: Option<Instant>,
    run: Option<u32>,
    result: Option<ToolResult>,
}

struct Turn {
    slots: Vec<Slot>,
    /// Validated arguments of calls that will run, taken when they start.
    args: HashMap<usize, Value>,
    schedule: Schedule,
    open: usize,
    begun: Instant,
    begun_epoch_ms: f64,
}

struct Run {
    turn: u32,
    index: usize,
    deadline: Instant,
}

pub struct Engine {
    options: EngineOptions,
    registry: Registry,
    turns: HashMap<u32, Turn>,
    runs: HashMap<u32, Run>,
    deadlines: Deadlines,
    next_turn: u32,
    next_run: u32,
}

fn mark(station: &'static str, outcome: &'static str) -> StationMark {
    StationMark { station, outcome }
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl Engine {
    pub fn new(options: EngineOptions) -> Self {
        Engine {
            options,
            registry: Registry::default(),
            turns: HashMap::new(),
            runs: HashMap::new(),
            deadlines: Deadlines::default(),
            next_turn: 1,
            next_run: 1,
        }
    }

    pub fn options(&self) -> &EngineOptions {
        &self.options
    }

    /// The deadline set, for the host to run its watcher (`Deadlines::watch`).
    pub fn deadlines(&self) -> &Deadlines {
        &self.deadlines
    }

    pub fn register(&mut self, spec: ToolSpec) -> Result<(), String> {
        self.registry.register(spec, &self.options)
    }

    pub fn unregister(&mut self, name: &str) -> bool {
        self.registry.unregister(name)
    }

    pub fn list(&self, policy: &Policy) -> Value {
        self.registry.list(|t| policy.visible(t))
    }

    pub fn definitions(&self, format: DefinitionFormat, policy: &Policy) -> Value {
        self.registry.definitions(format, |t| policy.visible(t))
    }

    /// Reads a turn's calls, answers every call that cannot run, and starts the first handlers. A turn begun
    /// `cancelled` (its signal had already fired) starts nothing: calls that could run are cancelled unstarted.
    pub fn begin(&mut self, calls_json: &str, policy: &Policy, cancelled: Option<&str>, now: Instant) -> Result<Step, String> {
        let calls = read_calls(calls_json)?;
        let turn_id = self.next_turn;
        self.next_turn = self.next_turn.wrapping_add(1).max(1);
        let begun_epoch_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, millis);
        let mut slots = Vec::with_capacity(calls.len());
        let mut args = HashMap::new();
        let mut runnable = Vec::new();
        for (index, call) in calls.into_iter().enumerate() {
            let (slot, valid_args) = self.admit(call, policy);
            if let Some(value) = valid_args {
                let read_only = slot.tool.as_ref().is_some_and(|t| t.spec.read_only);
                runnable.push((index, read_only));
                args.insert(index, value);
            }
            slots.push(slot);
        }
        let open = runnable.len();
        let mut turn = Turn {
            slots,
            args,
            schedule: Schedule::new(runnable, self.options.concurrency),
            open,
            begun: now,
            begun_epoch_ms,
        };
        for slot in turn.slots.iter_mut() {
            if let Some(result) = slot.result.as_mut() {
                seal(result, &mut slot.marks, begun_epoch_ms, 0.0);
            }
        }
        self.turns.insert(turn_id, turn);
        let mut step = match cancelled {
            Some(reason) => self.cancel(turn_id, reason, &[], now),
            None => Step::default(),
        };
        step.turn = Some(turn_id);
        if step.done.is_empty() {
            self.advance(turn_id, now, &mut step);
        }
        Ok(step)
    }

    /// Stations 1–5 for one call: lookup, parse, validate, permission. Returns the slot, and the validated
    /// arguments when the call may run (otherwise the slot already holds its result).
    fn admit(&self, call: IncomingCall, policy: &Policy) -> (Slot, Option<Value>) {
        let mut slot = Slot { id: call.id, tool: None, marks: Vec::with_capacity(8), started: None, run: None, result: None };
        let refuse = |slot: &mut Slot, station: &'static str, name: &str, kind: ErrorKind, error: String| {
            slot.marks.push(mark(station, kind.as_str()));
            slot.result = Some(ToolResult::failure(slot.id.clone(), name.to_string(), kind, error, false));
        };
        if let Some(why) = call.unreadable {
            let error = format!("The tool call could not be read: {why}.");
            refuse(&mut slot, "lookup", &call.name, ErrorKind::InvalidArguments, error);
            return (slot, None);
        }
        let tool = match lookup::lookup(&self.registry, policy, &call.name) {
            Ok(tool) => tool,
            Err(error) => {
                refuse(&mut slot, "lookup", &call.name, ErrorKind::UnknownTool, error);
                return (slot, None);
            }
        };
        slot.marks.push(mark("lookup", "found"));
        let name = tool.spec.name.clone();
        slot.tool = Some(tool.clone());
        // A tool this context may not use is refused before its arguments are read: validating them would
        // only teach the model the parameters of a tool it cannot call.
        if !policy.visible(&tool) {
            let (kind, error) = policy.permit(&tool).expect_err("an invisible tool is never permitted");
            refuse(&mut slot, "permission", &name, kind, error);
            return (slot, None);
        }
        let args = match parse::parse(call.args) {
            Ok(args) => args,
            Err(error) => {
                let error = format!("Tool \"{name}\": {error}");
                refuse(&mut slot, "parse", &name, ErrorKind::InvalidArguments, error);
                return (slot, None);
            }
        };
        slot.marks.push(mark("parse", "ok"));
        if let Err(error) = validate::validate(&tool, &args) {
            refuse(&mut slot, "validate", &name, ErrorKind::InvalidArguments, error);
            return (slot, None);
        }
        slot.marks.push(mark("validate", "ok"));
        match policy.permit(&tool) {
            Ok(how) => slot.marks.push(mark("permission", how)),
            Err((kind, error)) => {
                refuse(&mut slot, "permission", &name, kind, error);
                return (slot, None);
            }
        }
        (slot, Some(args))
    }

    /// Starts what the turn's schedule allows and reports the turn done when nothing is left open.
    fn advance(&mut self, turn_id: u32, now: Instant, step: &mut Step) {
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        for index in turn.schedule.ready() {
            let slot = &mut turn.slots[index];
            let tool = slot.tool.clone().expect("a scheduled call has a tool");
            let run = self.next_run;
            self.next_run = self.next_run.wrapping_add(1).max(1);
            let deadline = now + Duration::from_millis(tool.timeout_ms);
            self.deadlines.arm(deadline, run);
            self.runs.insert(run, Run { turn: turn_id, index, deadline });
            slot.started = Some(now);
            slot.run = Some(run);
            step.start.push(Start {
                run,
                turn: turn_id,
                call_id: slot.id.clone(),
                name: tool.spec.name.clone(),
                args: turn.args.remove(&index).unwrap_or(Value::Null),
            });
        }
        if turn.open == 0 {
            step.done.push(turn_id);
        }
    }

    /// A handler settled. A run that already timed out or was cancelled is a late settlement: nothing changes.
    pub fn complete(&mut self, run: u32, outcome: Outcome, now: Instant) -> Step {
        let mut step = Step::default();
        let Some(Run { turn: turn_id, index, deadline }) = self.runs.remove(&run) else { return step };
        self.deadlines.disarm(deadline, run);
        if let Some(turn) = self.turns.get_mut(&turn_id) {
            let slot = &mut turn.slots[index];
            let tool = slot.tool.clone().expect("a run has a tool");
            let mut result = normalize(slot.id.clone(), tool.spec.name.clone(), outcome);
            let (invoked, normalized) = match (result.success, result.metadata.structured.is_some()) {
                (false, _) => ("failed", "error"),
                (true, true) => ("returned", "structured"),
                (true, false) => ("returned", "text"),
            };
            slot.marks.push(mark("invoke", invoked));
            slot.marks.push(mark("normalize", normalized));
            shape::shape(&mut result, tool.max_output_chars, self.options.max_error_chars);
            slot.marks.push(mark("shape", if result.truncated { "truncated" } else { "ok" }));
            self.settle(turn_id, index, result, now, &mut step);
        }
        step
    }

    /// Times out every run whose deadline has passed.
    pub fn expire(&mut self, now: Instant) -> Step {
        let mut step = Step::default();
        for run in self.deadlines.pop_expired(now) {
            let Some(Run { turn: turn_id, index, .. }) = self.runs.remove(&run) else { continue };
            let Some(turn) = self.turns.get_mut(&turn_id) else { continue };
            let slot = &mut turn.slots[index];
            let tool = slot.tool.clone().expect("a run has a tool");
            slot.marks.push(mark("invoke", ErrorKind::Timeout.as_str()));
            let result = invoke::timed_out(slot.id.clone(), &tool);
            step.abort.push(run);
            self.settle(turn_id, index, result, now, &mut step);
        }
        step
    }

    /// Cancels a turn: running handlers are aborted, calls not started get results saying why. `unstarted` are
    /// runs handed out in a step whose handlers the host had not started yet when the cancellation came.
    pub fn cancel(&mut self, turn_id: u32, reason: &str, unstarted: &[u32], now: Instant) -> Step {
        let mut step = Step::default();
        let Some(turn) = self.turns.get_mut(&turn_id) else { return step };
        if turn.open == 0 {
            return step;
        }
        let waiting = turn.schedule.take_waiting();
        let mut ended = Vec::new();
        for (index, slot) in turn.slots.iter_mut().enumerate() {
            let Some(run) = slot.run.filter(|_| slot.result.is_none()) else { continue };
            if let Some(r) = self.runs.remove(&run) {
                self.deadlines.disarm(r.deadline, run);
                let was_running = !unstarted.contains(&run);
                if was_running {
                    step.abort.push(run);
                    slot.marks.push(mark("invoke", ErrorKind::Cancelled.as_str()));
                } else {
                    turn.schedule.finished();
                    slot.started = None;
                }
                ended.push((index, was_running));
            }
        }
        ended.extend(waiting.into_iter().map(|index| (index, false)));
        let results: Vec<(usize, ToolResult)> = ended
            .into_iter()
            .map(|(index, was_running)| {
                let slot = &mut turn.slots[index];
                let tool = slot.tool.clone().expect("a scheduled call has a tool");
                if !was_running {
                    slot.marks.push(mark("invoke", "not_started"));
                }
                (index, invoke::cancelled(slot.id.clone(), &tool, was_running, reason))
            })
            .collect();
        for (index, result) in results {
            self.settle(turn_id, index, result, now, &mut step);
        }
        step
    }

    fn settle(&mut self, turn_id: u32, index: usize, mut result: ToolResult, now: Instant, step: &mut Step) {
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        let slot = &mut turn.slots[index];
        let ran_ms = slot.started.map_or(0.0, |s| millis(now.saturating_duration_since(s)));
        if let Some(started) = slot.started {
            result.attempts = 1;
            result.metadata.queued_ms = Some(millis(started.saturating_duration_since(turn.begun)));
            turn.schedule.finished();
        }
        seal(&mut result, &mut slot.marks, turn.begun_epoch_ms, ran_ms);
        slot.result = Some(result);
        turn.open -= 1;
        self.advance(turn_id, now, step);
    }

    /// The turn's results in input order, as JSON; the turn is forgotten.
    pub fn finish(&mut self, turn_id: u32) -> Result<String, String> {
        let results = self.take_results(turn_id)?;
        Ok(serde_json::to_string(&results).expect("results serialize"))
    }

    pub fn take_results(&mut self, turn_id: u32) -> Result<Vec<ToolResult>, String> {
        match self.turns.get(&turn_id) {
            None => return Err(format!("no turn {turn_id}")),
            Some(turn) if turn.open > 0 => return Err(format!("turn {turn_id} still has {} open calls", turn.open)),
            Some(_) => {}
        }
        let turn = self.turns.remove(&turn_id).expect("checked above");
        Ok(turn.slots.into_iter().map(|s| s.result.expect("a finished turn has every result")).collect())
    }

    /// How many handlers are running across all turns.
    pub fn running(&self) -> usize {
        self.runs.len()
    }
}

/// Final touches every result gets: its trace marks, timing and outcome.
fn seal(result: &mut ToolResult, marks: &mut Vec<StationMark>, begun_epoch_ms: f64, ran_ms: f64) {
    result.latency_ms = ran_ms;
    result.metadata.started_at = begun_epoch_ms;
    result.metadata.stages = std::mem::take(marks);
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.deadlines.close();
    }
}
