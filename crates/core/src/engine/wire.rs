//! What crosses between the engine and its host: the step it answers with, the handlers it starts, the requests
//! only the host can answer, and the host's answers.


use serde::ser::SerializeTuple;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use crate::breaker::Transition;
use crate::result::ErrorKind;
use crate::ops::Op;
use crate::json;


/// A handler to start: `[run, turn, callId, toolName, args, attempt]` on the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct Start {
    pub run: u32,
    pub turn: u32,
    pub call_id: String,
    pub name: String,
    pub args: Value,
    pub attempt: u32,
    /// The call's place in its turn.
    pub index: usize,
}

impl Serialize for Start {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut t = s.serialize_tuple(7)?;
        t.serialize_element(&self.run)?;
        t.serialize_element(&self.turn)?;
        t.serialize_element(&self.call_id)?;
        t.serialize_element(&self.name)?;
        t.serialize_element(&self.args)?;
        t.serialize_element(&self.attempt)?;
        t.serialize_element(&self.index)?;
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
    /// Runs whose handlers must be aborted, and why (`timeout`, `idle_timeout` or `cancelled`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub abort: Vec<(u32, ErrorKind)>,
    /// Turns whose results are all in: call `finish`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub done: Vec<u32>,
    /// Work only the host can do before a call may run: its `check` function, or its approval callback. Each is
    /// answered with `Engine::answer(ticket, …)`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub host: Vec<HostRequest>,
    /// Settlements that came after their run's deadline had passed (the host's event loop was blocked, so the
    /// deadline could not fire in time): the run timed out, and this is a late settlement. `[run, endedBy,
    /// outcome ('resolved' | 'rejected'), ms past the deadline]` on the wire.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub late: Vec<(u32, ErrorKind, &'static str, f64)>,
    /// Operations for the shared store, by ticket: `[ticket, [op, …]]`, each answered with `Engine::answer_store`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub store: Vec<(u32, Vec<Op<'static>>)>,
    /// Circuit breakers that changed phase, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub breaker: Vec<Transition>,
    /// Runs whose commands ended: the host settles each that is still open with the outcome `command`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<u32>,
    /// `[run, line]`: the latest line a running command wrote, at a bounded rate, for `onProgress`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub progress: Vec<(u32, String)>,
    /// Milliseconds until the host should call `expire` by its own timer (see `Engine::host_timer`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake: Option<f64>,
}

/// `[ticket, kind, turn, callId, toolName, args, rule, reason, index]` on the wire; kind is `validate`, `check` or
/// `approve`; index is the call's place in its turn.
#[derive(Debug, Clone, PartialEq)]
pub struct HostRequest {
    pub ticket: u32,
    pub kind: HostKind,
    pub turn: u32,
    pub call_id: String,
    pub name: String,
    pub args: Value,
    /// For an approval: the rule that asked, and its reason.
    pub rule: Option<String>,
    pub reason: Option<String>,
    pub index: usize,
}

/// What a call waits on the host for, in the order a call meets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HostKind {
    /// The schema's own validation (a Standard Schema's refinements, transforms, defaults).
    Validate,
    /// The tool's check of the arguments.
    Check,
    /// What the call costs, from the tool's cost function (asked only when a cost budget applies).
    Cost,
    Approve,
}

impl Serialize for HostRequest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut t = s.serialize_tuple(9)?;
        t.serialize_element(&self.ticket)?;
        t.serialize_element(match self.kind {
            HostKind::Validate => "validate",
            HostKind::Check => "check",
            HostKind::Cost => "cost",
            HostKind::Approve => "approve",
        })?;
        t.serialize_element(&self.turn)?;
        t.serialize_element(&self.call_id)?;
        t.serialize_element(&self.name)?;
        t.serialize_element(&self.args)?;
        t.serialize_element(&self.rule)?;
        t.serialize_element(&self.reason)?;
        t.serialize_element(&self.index)?;
        t.end()
    }
}

/// What the host answers to a request, as JSON: `{ issues? }` for a validation, `{ problem? }` for a check,
/// `{ cost }` for a cost, `{ decision: 'approve' | 'deny', reason?, arguments?, issues?, cost?, remember?: 'session' }`
/// for an approval (issues: what the schema's own validation found in the edited arguments; cost: theirs), `{ error }`
/// when the function threw.
/// Issues are `[JSON pointer, message]` pairs.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostAnswer {
    #[serde(default)]
    pub(super) issues: Option<Vec<(String, String)>>,
    #[serde(default)]
    pub(super) problem: Option<String>,
    #[serde(default)]
    pub(super) decision: Option<String>,
    #[serde(default)]
    pub(super) reason: Option<String>,
    #[serde(default)]
    pub(super) arguments: Option<Value>,
    #[serde(default)]
    pub(super) remember: Option<String>,
    #[serde(default)]
    pub(super) error: Option<String>,
    #[serde(default)]
    pub(super) cost: Option<f64>,
    /// Why the tool's cost function failed on arguments edited at approval (it matters only under a cost budget).
    #[serde(default)]
    pub(super) cost_error: Option<String>,
    /// Set by the engine when no answer came in time.
    #[serde(skip)]
    pub(super) timed_out: Option<String>,
}

impl HostAnswer {
    pub fn from_json(json: &str) -> Result<Self, String> {
        json::from_str_mended(json).map(|(answer, _)| answer).map_err(|e| format!("answer: not a host answer: {e}"))
    }
}

impl Step {
    pub fn is_empty(&self) -> bool {
        // Destructured in full so that a new field must be placed here and in `absorb`.
        let Step { turn, start, abort, done, host, late, store, breaker, commands, progress, wake } = self;
        turn.is_none()
            && start.is_empty()
            && abort.is_empty()
            && done.is_empty()
            && host.is_empty()
            && late.is_empty()
            && store.is_empty()
            && breaker.is_empty()
            && commands.is_empty()
            && progress.is_empty()
            && wake.is_none()
    }

    pub fn absorb(&mut self, other: Step) {
        let Step { turn, start, abort, done, host, late, store, breaker, commands, progress, wake } = other;
        self.turn = self.turn.or(turn);
        self.wake = match (self.wake, wake) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.start.extend(start);
        self.abort.extend(abort);
        self.done.extend(done);
        self.host.extend(host);
        self.late.extend(late);
        self.store.extend(store);
        self.breaker.extend(breaker);
        self.commands.extend(commands);
        self.progress.extend(progress);
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
