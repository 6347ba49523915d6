//! Stations 11 to 14 and a call's end: normalize, shape and judge a handler's settlement (on any thread), then seal
//! the result, keep what others may reuse, hand a flight on, and mark the turn to advance.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::cache::Kept;
use crate::dedup::{self, Mode};
use crate::normalize::{self, normalize, Outcome};
use crate::registry::Tool;
use crate::repair;
use crate::result::{failure_output, ErrorKind, PermissionNote, Rollback, StationMark, ToolResult};
use crate::shape::Shaper;
use crate::judge;
use crate::panic::{self, contained};
use crate::{fence, invoke, shape, validate};

use super::{Engine, Alarm, mark, millis, report_marks, report_sealed};
use super::wire::{Settled, Step};
use super::call::{At, Slot};
use super::admission::stopped_after;
use super::counters::tally;

/// Texts at least this long (256 Ki UTF-16 units, so at least 256 KiB of UTF-8) cross from the host in slices.
pub(super) const SENT_MAX_BYTES: usize = 256 * 1024;

/// A handler's settlement on its way through normalize and shape (stations 11 and 12), which may be done on
/// another thread: it holds everything it needs.
pub struct Shaping {
    pub(super) at: At,
    pub(super) call_id: String,
    pub(super) tool: Arc<Tool>,
    /// The host's judgement of the value (a `rollbackWhen` function), when it made one.
    pub(super) verdict: Option<String>,
    pub(super) shaper: Arc<Shaper>,
    pub(super) readers: bool,
    pub(super) owner: Option<Arc<str>>,
}

/// A settlement shaped, for `Engine::shaped`.
pub struct Shaped {
    pub(super) at: At,
    pub(super) result: Box<ToolResult>,
    pub(super) marks: Vec<StationMark>,
}

impl Shaping {
    /// Stations 11–13 on what the handler returned: a bug there costs this call alone, which then says so.
    pub fn run(self, outcome: Outcome) -> Shaped {
        self.read_and_shape(|| Ok(outcome))
    }

    /// `run` on a value that crossed as bytes, in slices: joined and read here, on the thread that shapes it, since
    /// copying and checking megabytes of UTF-8 must not hold the host's thread. A kind the engine does not know is
    /// a bug, answered as one in this call's result.
    pub fn run_bytes(self, kind: &str, slices: Vec<Vec<u8>>) -> Shaped {
        self.read_and_shape(|| Outcome::from_slices(kind, slices))
    }

    pub(super) fn read_and_shape(self, read: impl FnOnce() -> Result<Outcome, String>) -> Shaped {
        let _span = tracing::debug_span!("toolgate.shape", turn = self.at.turn, call = %self.shaper.redact_text(&self.call_id)).entered();
        let (at, call_id, tool) = (self.at, self.call_id.clone(), self.tool.clone());
        let shaped = contained(|| read().map(|outcome| self.shape(outcome))).and_then(|read| read);
        shaped.unwrap_or_else(|bug| {
            let error = panic::internal_error("reading what the tool returned (it ran; its result is lost)", &bug);
            let result = Box::new(ToolResult::failure(call_id, tool.spec.name.clone(), ErrorKind::HandlerError, error, false));
            Shaped { at, result, marks: vec![mark("invoke", "returned"), mark("normalize", "internal_error")] }
        })
    }

    pub(super) fn shape(self, mut outcome: Outcome) -> Shaped {
        #[cfg(test)]
        if matches!(&outcome, Outcome::Text(text) if text == super::tests::PANICS) {
            panic!("a bug on purpose");
        }
        let name = self.tool.spec.name.clone();
        let bytes = match &mut outcome {
            Outcome::Binary(bytes) => Some(std::mem::take(bytes)),
            _ => None,
        };
        // Kept only when short enough that no cut can change it: the copy is cheap, a crossing back is not. Texts
        // of SENT_MAX_BYTES or more crossed in slices, and the host keeps no copy of those.
        let sent = match &outcome {
            Outcome::Text(text) | Outcome::Json(text) if text.len() <= self.tool.max_output_chars && text.len() < SENT_MAX_BYTES => Some(text.clone()),
            _ => None,
        };
        let redact = |text: &str| self.shaper.redact_text(text);
        // What an output schema describes: a returned value, text or nothing; not bytes, images or JSON too deep to
        // hold as a structure.
        let checked = match &outcome {
            Outcome::Json(_) => Some(None),
            Outcome::Text(text) => Some(Some(Value::String(text.clone()))),
            Outcome::Nothing => Some(Some(Value::Null)),
            _ => None,
        };
        // Boxed once here: the result passes through several stations by value before its slot holds it.
        let mut result = Box::new(match &bytes {
            Some(bytes) => normalize::binary(self.call_id.clone(), name, bytes),
            None => normalize(self.call_id.clone(), name, outcome),
        });
        // A return value that breaks the tool's outputSchema is the tool's fault: a handler error, never retried.
        let value = match checked.filter(|_| result.success && self.tool.output_validator.is_some()) {
            Some(None) => result.metadata.structured.clone().filter(|_| result.metadata.images.is_empty()),
            Some(value) => value,
            None => None,
        };
        if let Some(value) = value {
            if let Err(error) = validate::output(&*self.tool, &value, &redact) {
                *result = ToolResult::failure(self.call_id.clone(), self.tool.spec.name.clone(), ErrorKind::HandlerError, error, false);
            }
        }
        let (invoked, normalized) = match (result.success, result.metadata.structured.is_some()) {
            (false, _) => ("failed", "error"),
            (true, true) => ("returned", "structured"),
            (true, false) => ("returned", "text"),
        };
        let call = shape::Call {
            tool_name: &self.tool.spec.name,
            call_id: &self.call_id,
            max_output_chars: self.tool.max_output_chars,
            readers: self.readers,
            owner: self.owner.as_deref(),
            untrusted: self.tool.spec.untrusted,
        };
        // Judged on the whole output, before shape cuts it (a prefix or an empty list may not survive the cut).
        let reason = (!self.tool.judge.is_empty() && result.success).then(|| self.verdict.or_else(|| judge::judge(&self.tool.judge, &result)));
        let shaped = self.shaper.shape(&mut result, &call, bytes.as_deref());
        let mut marks = vec![mark("invoke", invoked), mark("normalize", normalized), mark("shape", shaped)];
        if let Some(reason) = reason {
            marks.push(mark("judge", if reason.is_some() { "rollback" } else { "ok" }));
            result.rollback = reason.map(|reason| Rollback { reason: self.shaper.redact_text(&reason) });
        }
        if self.tool.spec.untrusted && result.success {
            result.output = fence::fence(&self.tool.spec.name, &result.output);
        }
        result.metadata.sent = sent;
        Shaped { at: self.at, result, marks }
    }
}

/// What every result of a turn is sealed with.
pub(super) struct Sealing<'a> {
    pub(super) note: bool,
    pub(super) trace: bool,
    pub(super) begun: Instant,
    pub(super) begun_epoch_ms: f64,
    pub(super) shaper: &'a Shaper,
}

impl Sealing<'_> {
    /// Final touches every result gets: its trace marks (with their times when tracing), timing, the permission
    /// decision, and what the repair station changed (by default also said in one line the model reads, so that
    /// it can learn within the session). A failure's text is then held to what any error text is held to.
    pub(super) fn seal(&self, result: &mut ToolResult, slot: &mut Slot, ran_ms: f64) {
        self.touch(result, slot, ran_ms);
        if !result.success {
            self.shaper.shape_failure(result);
        }
    }

    pub(super) fn touch(&self, result: &mut ToolResult, slot: &mut Slot, ran_ms: f64) {
        result.latency_ms = ran_ms;
        // A call of a streaming turn counts from when it was added, one of a whole turn from the turn's start.
        let begun = slot.arrived.unwrap_or(self.begun);
        result.metadata.started_at = (self.begun_epoch_ms + millis(begun.saturating_duration_since(self.begun))).floor();
        if self.trace {
            let since = |at: &Instant| millis(at.saturating_duration_since(begun));
            result.metadata.timings = Some(slot.marks.iter().map(|m| since(&m.at)).collect());
            result.metadata.starts = Some(slot.starts.iter().map(since).collect());
        }
        result.metadata.stages = std::mem::take(&mut slot.marks);
        if let Some((decision, by)) = slot.permission.take() {
            result.metadata.permission = Some(PermissionNote { decision, by });
        }
        let repairs = std::mem::take(&mut slot.repairs);
        if repairs.is_empty() {
            return;
        }
        if self.note {
            let line = repair::note(&repairs);
            match (result.error.as_mut(), result.error_kind) {
                (Some(error), Some(kind)) => {
                    error.push_str(&line);
                    result.output = failure_output(kind, error);
                }
                _ => result.output.push_str(&line),
            }
        }
        result.metadata.repairs = repairs;
    }
}

impl Engine {
    /// A call answered while it waited on the host: out of its schedule (or its place freed), then settled.
    pub(super) fn settle_waiting(&mut self, at: At, result: Box<ToolResult>, now: Instant, step: &mut Step) {
        let Some(turn) = self.turns.get_mut(&at.turn) else { return };
        let slot = &turn.slots[at.index];
        if slot.scheduled {
            let name = slot.tool().spec.name.clone();
            self.release_place(&name);
        } else {
            turn.schedule.remove(at.index);
        }
        self.settle(at, result, now, step);
    }

    /// A call's final result. Its flight (if it ran one) is handed on, its turn is marked to advance.
    pub(super) fn settle(&mut self, at: At, mut result: Box<ToolResult>, now: Instant, step: &mut Step) {
        // An attempt the breaker let through that ends here never reached its handler (or was stopped with its turn).
        self.attempt_outcome(at, &result, false, now, step);
        let Some(slot) = self.open_slot(at) else { return };
        if slot.attempts == 0 {
            self.unspend_budgets(at, now);
        }
        let slot = self.slot(at);
        if slot.pending.is_some() || !slot.unanswered.is_empty() {
            let mut asking = self.lift(at);
            self.settled_while_asking(&mut asking, &result, now);
            self.put_back(at, asking);
        }
        let slot = self.turns.slot_mut(at);
        let fills = slot.fills.take();
        // A call that joined a flight and ends without it (its turn ended, a policy skipped it) leaves the flight.
        if let Some((_, id)) = slot.joined.take() {
            if let Some(waiters) = self.flight_waiters.get_mut(&id) {
                waiters.retain(|w| *w != at);
            }
        }
        let tool = slot.tool.clone();
        let mode = tool.as_ref().map_or(Mode::Off, |t| t.dedup.mode);
        // What a handler answered (not a refusal, a timeout or a cancellation) is what others may share or reuse.
        let answered = !slot.ended_early
            && (result.success || (result.error_kind == Some(ErrorKind::HandlerError) && slot.attempts > 0));
        // A flight invalidated while it ran is no longer the one its key names: its result is not kept.
        let current = fills.as_ref().is_some_and(|(key, id)| self.flights.get(key) == Some(id));
        if current {
            self.flights.remove(&fills.as_ref().expect("current").0);
        }
        // A result that came from the store already (a hit, a reused answer) is not kept again; nor, in a store shared
        // with other processes, one whose output was saved to this machine's artifact folder.
        let local_only = self.shared.is_some() && result.metadata.artifact_path.is_some();
        if result.success && !result.cached && !result.metadata.reused && !local_only {
            // Kept before the dedup note is added: the note belongs to this call, not to the query's answer.
            let reuse = slot.dedup.as_ref().filter(|_| mode == Mode::Reuse).map(|d| (d.session.clone(), d.key.clone()));
            let kept: Option<Arc<str>> = (current || reuse.is_some()).then(|| Kept::of(&result).into());
            if let (true, Some((key, id)), Some(rule), Some(kept)) = (current, &fills, tool.as_ref().and_then(|t| t.cache.as_ref()), &kept) {
                self.keep_result(key.clone(), kept.clone(), rule.ttl, *id, now);
            }
            if let (Some((session, key)), Some(kept)) = (reuse, kept) {
                self.keep_reused(&session, &key, kept, now);
            }
        }
        let flight = fills.map(|(key, id)| {
            let waiters = self.flight_waiters.remove(&id).unwrap_or_default();
            (key, id, waiters, result.clone())
        });
        let slot = self.slot(at);
        if let Some(repeat) = &slot.dedup {
            repeat.annotate(&mut result, mode);
            // Refused a token, skipped, cancelled before it started: the query did not run after all.
            if slot.attempts == 0 && !result.cached && !result.metadata.shared_flight {
                let op = dedup::uncount(repeat.session.clone(), repeat.key.clone());
                self.effect(op, now);
            }
        }
        if let Some((key, id, waiters, clean)) = flight {
            self.hand_on_flight((key.clone(), id), waiters, &clean, answered, now, step);
            self.release_lease(&key, id, now);
        }
        if let Some(why) = self.turns.get_mut(&at.turn).and_then(|t| t.slots[at.index].store_error.take()) {
            self.note_store(&mut result, why);
        }
        self.count_rollback(at, &mut result, now);
        let observed = self.watch.on;
        let Some(turn) = self.turns.get_mut(&at.turn) else { return };
        let sealing = Sealing { note: self.options.repair.note, trace: self.options.trace, begun: turn.begun, begun_epoch_ms: turn.begun_epoch_ms, shaper: &self.shaper };
        let slot = &mut turn.slots[at.index];
        let ran_ms = slot.first_started.map_or(0.0, |s| millis(now.saturating_duration_since(s)));
        result.attempts = slot.attempts;
        result.metadata.attempt_errors = std::mem::take(&mut slot.attempt_errors);
        if let Some(first) = slot.first_started {
            result.metadata.queued_ms = Some(millis(first.saturating_duration_since(slot.arrived.unwrap_or(turn.begun))));
        }
        if slot.scheduled {
            turn.schedule.finished();
        }
        if observed {
            report_marks(at.turn, at.index, slot, turn.begun, step);
        }
        sealing.seal(&mut result, slot, ran_ms);
        if observed {
            report_sealed(at.turn, at.index, slot, turn.begun, &result, step);
        }
        let stops_turn = turn.stop_on_error && !result.success && slot.tool.as_ref().is_some_and(|t| !t.spec.read_only);
        // Worded only when the turn stops: most results stop nothing.
        let why = stops_turn.then(|| stopped_after(&self.shaper, &slot.id, &result.name));
        tracing::debug!(
            turn = at.turn,
            call = %self.shaper.redact_text(&slot.id),
            tool = %result.name,
            outcome = result.error_kind.map_or("ok", ErrorKind::as_str),
            attempts = result.attempts,
            latency_ms = result.latency_ms,
            stages = ?result.metadata.stages.iter().map(|m| format!("{}:{}", m.station, m.outcome)).collect::<Vec<_>>(),
            "call settled"
        );
        tally(&mut self.metrics, &mut self.unknown_tool_metrics, &result, true);
        slot.result = Some(result);
        turn.args.remove(&at.index);
        turn.open -= 1;
        if turn.streaming {
            step.settled.push(Settled { turn: at.turn, index: at.index as u32 });
        }
        if let Some(why) = why {
            // Calls a streaming turn takes later are admitted, then skipped as these are; the first stop stands
            // (a write skipped here fails too).
            turn.halted.get_or_insert_with(|| why.clone());
            for skipped in turn.schedule.take_waiting() {
                self.skip(At { turn: at.turn, index: skipped }, &why, now, step);
            }
        }
        let Some(turn) = self.turns.get_mut(&at.turn) else { return };
        if turn.open == 0 && !turn.accepting {
            if let Some((end, _)) = turn.deadline {
                self.deadlines.disarm(end, Alarm::Turn(at.turn));
            }
        }
        self.dirty.insert(at.turn);
    }

    /// A call admitted but not started, answered `not_executed` because the turn stopped (`why`).
    pub(super) fn skip(&mut self, at: At, why: &str, now: Instant, step: &mut Step) {
        let slot = self.slot_mut(at);
        // One waiting on the host is answered now: its request no longer counts.
        if let Some(ticket) = slot.pending.take() {
            if let Some((_, _, due)) = self.tickets.remove(&ticket) {
                self.deadlines.disarm(due, Alarm::Host(ticket));
            }
        }
        let slot = self.slot_mut(at);
        let name = slot.tool.as_ref().map_or(String::new(), |t| t.spec.name.clone());
        slot.marks.push(mark("invoke", "not_executed"));
        let result = invoke::not_executed(slot.id.clone(), &name, why);
        self.settle(at, Box::new(result), now, step);
    }

    /// A judged tool's success: a flag counts toward the session's consecutive rollbacks, and past the limit it is
    /// no longer raised; a result not flagged ends the run of flags.
    fn count_rollback(&mut self, at: At, result: &mut ToolResult, now: Instant) {
        let Some(turn) = self.turns.get(&at.turn) else { return };
        let judged = turn.slots[at.index].tool.as_ref().is_some_and(|t| !t.judge.is_empty());
        if !judged || !result.success {
            return;
        }
        let session = turn.policy.fields.get("sessionId").cloned().unwrap_or_default();
        let count = self.rollbacks.get_or_insert_mut(session.clone(), || 0);
        let flagged = result.rollback.is_some();
        let before = *count;
        if flagged {
            *count += 1;
            if *count > self.options.max_consecutive_rollbacks {
                result.rollback = None;
                result.metadata.rollback_suppressed = true;
            }
        } else {
            *count = 0;
        }
        // Only a change goes to a shared store, for the other processes: most results of a judged tool are not
        // flagged.
        if (flagged || before > 0) && self.shared.is_some() && !session.is_empty() {
            self.effect(judge::rollbacks_op(&session, flagged, self.options.dedup.session_ttl_ms), now);
        }
    }

    /// A result carrying an artifact, handed to a call other than the one that saved it: that call's context may
    /// read the artifact too.
    pub(super) fn hand_over(&self, result: &ToolResult, at: At) {
        if let Some(path) = &result.metadata.artifact_path {
            self.shaper.artifacts.grant(path, self.turn(at).owner.as_deref());
        }
    }
}
