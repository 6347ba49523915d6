//! Stations 1 to 5 for one call: lookup, parse, repair, validate, the checks, and permission, with what only the host
//! can answer (a schema's own validation, a check function, a cost, an approval).

use std::cell::RefCell;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::budget::{self, Cost};
use crate::calls::IncomingCall;
use crate::permission::{self, Decision, Policy};
use crate::registry::Tool;
use crate::repair;
use crate::result::{ErrorKind, Redactions, Repair, ToolResult};
use crate::shape::Shaper;
use crate::text::{char_count, clip, QUOTED_CHARS};
use crate::timer::after;
use crate::ops::Reply;
use crate::panic::{self, contained};
use crate::shared::{self, Fail};
use crate::{checks, invoke, keys, lookup, parse, validate};

use super::call::{At, Slot};
use super::tickets::Wait;
use super::wire::{HostAnswer, HostKind, HostRequest, Step};
use super::{mark, Alarm, Engine};

/// Why arguments edited at approval cannot run: the schema, the tool's checks or a deny rule refuses them.
pub(super) fn edited_problem(tool: &Tool, edited: &Value, issues: Option<&[(String, String)]>, policy: &Policy, shaper: &Shaper) -> Option<(ErrorKind, String)> {
    let redact = |text: &str| shaper.redact_text(text);
    if let Err(error) = validate::validate(tool, edited, &redact) {
        return Some((ErrorKind::InvalidArguments, error));
    }
    if let Some(issues) = issues {
        return Some((ErrorKind::InvalidArguments, validate::issues(&tool.spec.name, issues, &redact)));
    }
    if let Err(problem) = checks::run(&tool.checks, edited) {
        return Some((ErrorKind::InvalidArguments, format!("Tool \"{}\": {problem}.", tool.spec.name)));
    }
    match policy.decide(tool, edited, |_| true) {
        Decision::Deny { kind, error, .. } => Some((kind, error)),
        _ => None,
    }
}

pub(super) fn remembered_key(session: &str, tool: &str, asked_by: &str) -> String {
    format!("{session}{sep}{tool}{sep}{asked_by}", sep = keys::SEP)
}

/// A call id is the model's own text: redacted and cut short where an error quotes it.
pub(super) fn stopped_after(shaper: &Shaper, call_id: &str, tool_name: &str) -> String {
    let call_id = clip(&shaper.redact_text(call_id), QUOTED_CHARS).into_owned();
    format!("call {call_id} (\"{tool_name}\") before it failed, and this turn stops at the first failed call that changes state")
}

impl Engine {
    /// Stations 1–5 for one call: lookup, parse, validate, permission. Returns the slot, and the validated
    /// arguments when the call may run (otherwise the slot already holds its result).
    pub(super) fn admit(&self, call: &mut IncomingCall, policy: &Policy) -> (Box<Slot>, Option<Value>) {
        #[cfg(test)]
        if call.name == super::tests::PANICS {
            panic!("a bug on purpose");
        }
        let mut slot = Slot::new(call.id.clone());
        // What a refusal quotes of the model's text (a name, keys) is redacted whole before it is cut; what that
        // found is counted on the refusal.
        let found = RefCell::new(Redactions::new());
        let redact = |text: &str| self.shaper.redact_counting(text, &mut found.borrow_mut());
        let refuse = |slot: &mut Slot, station: &'static str, name: &str, kind: ErrorKind, error: String| {
            slot.marks.push(mark(station, kind.as_str()));
            let mut result = ToolResult::failure(slot.id.clone(), name.to_string(), kind, error, false);
            let found = found.take();
            if !found.is_empty() {
                result.metadata.redactions = Some(found);
            }
            slot.result = Some(Box::new(result));
        };
        if let Some(why) = call.unreadable.take() {
            let error = format!("The tool call could not be read: {why}.");
            refuse(&mut slot, "lookup", &call.name, ErrorKind::InvalidArguments, error);
            return (slot, None);
        }
        let repair = &self.options.repair;
        let (visible, conceals) = (|t: &Tool| policy.visible(t), |t: &Tool| policy.conceals(t));
        let sight = lookup::Sight { visible: &visible, conceals: &conceals };
        let tool = match lookup::lookup(&self.registry, &sight, &call.name, redact) {
            Ok(tool) => {
                slot.marks.push(mark("lookup", "found"));
                tool
            }
            Err(error) => match repair.tool_names.then(|| lookup::correct(&self.registry, &sight, &call.name)).flatten() {
                Some(tool) => {
                    slot.marks.push(mark("lookup", "corrected"));
                    slot.repairs.push(Repair::named_tool(&call.name, &tool.spec.name));
                    tool
                }
                None => {
                    // A tool the context may not know of is answered as a name that does not exist; the audit
                    // keeps what hid it.
                    if let Some(Decision::Deny { by, .. }) = self.registry.get(&call.name).map(|t| policy.decide(t, &Value::Null, |_| false)) {
                        slot.permission = Some(("denied", by));
                    }
                    // The name is the model's, not a tool's: cut short and redacted, like the error that quotes it.
                    let shown = clip(&self.shaper.redact_text(&call.name), QUOTED_CHARS).into_owned();
                    refuse(&mut slot, "lookup", &shown, ErrorKind::UnknownTool, error);
                    return (slot, None);
                }
            },
        };
        let name = tool.spec.name.clone();
        slot.tool = Some(tool.clone());
        // A tool this context may not use (hidden by a deny rule that says why) is refused before its arguments
        // are read: validating them would only teach the model the parameters of a tool it cannot call.
        if !policy.visible(&tool) {
            if let Decision::Deny { kind, error, by } = policy.decide(&tool, &Value::Null, |_| false) {
                slot.permission = Some(("denied", by));
                refuse(&mut slot, "permission", &name, kind, error);
            }
            return (slot, None);
        }
        let raw = std::mem::replace(&mut call.args, crate::calls::RawArgs::Missing);
        if call.cut {
            // Whatever repair could make of half the arguments is not what the model meant: it is told what arrived.
            let arrived = match &raw {
                crate::calls::RawArgs::Text(text) => text.clone(),
                crate::calls::RawArgs::Parsed(value) => value.to_string(),
                _ => String::new(),
            };
            let error = format!("Tool \"{name}\": the stream ended inside this call's arguments, so it was not run. Send the whole call again. What arrived of them ({} characters): {arrived}", char_count(&arrived));
            refuse(&mut slot, "parse", &name, ErrorKind::InvalidArguments, error);
            return (slot, None);
        }
        let parsed = match parse::parse(raw, call.lone_surrogates, repair.json) {
            Ok(parsed) => parsed,
            Err(error) => {
                let error = format!("Tool \"{name}\": {error}");
                refuse(&mut slot, "parse", &name, ErrorKind::InvalidArguments, error);
                return (slot, None);
            }
        };
        slot.marks.push(mark("parse", if parsed.mended.is_empty() { "ok" } else { "mended" }));
        let mut args = parsed.args;
        let mut repairs = parsed.mended;
        // Keys, types and wrappers are repaired only in a call that fails validation, and kept only if it then passes.
        if !tool.validator.is_valid(&args) {
            let names = [name.as_str(), call.name.as_str()];
            if let Some((fixed, more)) = repair::reread(&tool.schema, &args, &tool.aliases, names, repair, |v| tool.validator.is_valid(v)) {
                slot.marks.push(mark("repair", "applied"));
                repairs.extend(more);
                args = fixed;
            } else {
                // A repair that still fails: the original error stands (the parser's, for mended text).
                match (parsed.parser_error, validate::validate(&*tool, &args, &redact)) {
                    (Some(error), _) => refuse(&mut slot, "parse", &name, ErrorKind::InvalidArguments, format!("Tool \"{name}\": {error}")),
                    (None, Err(error)) => refuse(&mut slot, "validate", &name, ErrorKind::InvalidArguments, error),
                    // The validator's two answers disagree: still refused, not run.
                    (None, Ok(())) => refuse(&mut slot, "validate", &name, ErrorKind::InvalidArguments, format!("Tool \"{name}\": the arguments do not match its parameters.")),
                }
                return (slot, None);
            }
        }
        slot.repairs.extend(repairs.into_iter().map(|r| r.redacted(|v| self.shaper.redact_value(v))));
        slot.marks.push(mark("validate", "ok"));
        // Business checks a schema cannot express run before permission: a path or a host out of bounds is an
        // invalid argument, whoever may call the tool.
        if !tool.checks.is_empty() {
            if let Err(problem) = checks::run(&tool.checks, &args) {
                let error = format!("Tool \"{name}\": {problem}. Change the arguments to stay within what the tool allows.");
                refuse(&mut slot, "check", &name, ErrorKind::InvalidArguments, error);
                return (slot, None);
            }
            slot.marks.push(mark("check", "ok"));
        }
        (slot, Some(args))
    }

    /// Admits calls into a turn, in order, at the places from `first` on: each gets its slot, and those that may run
    /// their arguments. Returns each runnable call's place and whether it is read-only, for the turn's schedule. With
    /// stopOnError, a state-changing call refused here stops every call after it.
    pub(super) fn admit_calls(&mut self, turn_id: u32, first: usize, calls: Vec<IncomingCall>, now: Instant, step: &mut Step) -> Vec<(usize, bool)> {
        let mut runnable = Vec::new();
        let mut stopped_by = self.turns.live(turn_id).stopped_by.clone();
        for (index, mut call) in (first..).zip(calls) {
            let at = At { turn: turn_id, index };
            // Stations 1–7 on what the model sent: a bug there costs this call alone.
            let runs = contained(|| self.admit_call(at, &mut call, stopped_by.as_ref(), now, step)).unwrap_or_else(|bug| {
                let mut slot = Slot::new(call.id.clone());
                slot.marks.push(mark("lookup", "internal_error"));
                let error = panic::internal_error("checking this call, so it was not run", &bug);
                slot.result = Some(Box::new(ToolResult::failure(call.id.clone(), call.name.clone(), ErrorKind::HandlerError, error, false)));
                self.place(at, slot);
                false
            });
            let turn = self.turn_mut(at);
            let slot = &turn.slots[index];
            if runs {
                runnable.push((index, slot.tool().spec.read_only));
            } else {
                turn.args.remove(&index);
            }
            let refused = slot.result.as_ref().is_some_and(|r| !r.success);
            if let (true, None, true, Some(tool)) = (turn.stop_on_error, &stopped_by, refused, &slot.tool) {
                if !tool.spec.read_only {
                    stopped_by = Some((slot.id.clone(), tool.spec.name.clone()));
                }
            }
        }
        self.turns.live_mut(turn_id).stopped_by = stopped_by;
        runnable
    }

    /// One call of a turn being begun: stations 1 to 5, then, for a call that may run, what the host checks,
    /// permission, dedup and cache. True when it may run (it may still wait on the host or for another call).
    fn admit_call(&mut self, at: At, call: &mut IncomingCall, stopped_by: Option<&(String, String)>, now: Instant, step: &mut Step) -> bool {
        let (mut slot, args) = self.admit(call, &self.turn(at).policy);
        let Some(args) = args else {
            self.place(at, slot);
            return false;
        };
        if let Some((id, name)) = stopped_by {
            slot.marks.push(mark("invoke", "not_executed"));
            let why = stopped_after(&self.shaper, id, name);
            slot.result = Some(Box::new(invoke::not_executed(slot.id.clone(), &slot.tool().spec.name, &why)));
            self.place(at, slot);
            return false;
        }
        self.place(at, slot);
        self.turn_mut(at).args.insert(at.index, args);
        self.gate(at, None, now) && (self.slot(at).pending.is_some() || self.avoid(at, now, step))
    }

    /// The call's slot, at its place in the turn (replacing what a bug left there).
    fn place(&mut self, at: At, slot: Box<Slot>) {
        self.watch.met(at);
        let slots = &mut self.turn_mut(at).slots;
        match slots.get_mut(at.index) {
            Some(left) => *left = slot,
            None => slots.push(slot),
        }
    }

    /// The rest of admission for a call whose arguments are valid, from the step after `passed` on: the schema's
    /// own validation and the tool's own check (in the host), then the permission station, which may ask the host
    /// for approval. False when the call is refused (the slot holds its result); a call waiting on the host stays
    /// runnable.
    pub(super) fn gate(&mut self, at: At, passed: Option<HostKind>, now: Instant) -> bool {
        let tool = self.tool_of(at);
        let budgets = [self.options.budget.as_ref(), tool.spec.budget.as_ref(), self.turn(at).policy.budget.as_ref()];
        let costed = tool.cost == Cost::Host && budget::counts_cost(budgets);
        for (kind, wanted) in [(HostKind::Validate, tool.spec.schema_check), (HostKind::Check, tool.spec.check), (HostKind::Cost, costed)] {
            if wanted && passed.is_none_or(|p| p < kind) {
                self.ask_host(at, kind, None, now);
                return true;
            }
        }
        self.permit(at, &tool, now)
    }

    /// Station 5 for one call. False when refused (the slot holds its result).
    fn permit(&mut self, at: At, tool: &Tool, now: Instant) -> bool {
        let turn = self.turn(at);
        let session = turn.policy.fields.get("sessionId").map_or("", String::as_str);
        let remembered = |by: &str| self.remembered.contains(&remembered_key(session, &tool.spec.name, by));
        let args = turn.args.get(&at.index).unwrap_or(&Value::Null);
        let decision = turn.policy.decide(tool, args, remembered);
        // Another process may have been given an approval for the session: a shared store knows.
        let session = (!session.is_empty() && self.shared.is_some()).then(|| session.to_string());
        let slot = self.slot_mut(at);
        match decision {
            Decision::Allow { how, by } => {
                slot.marks.push(mark("permission", how));
                // Said only when a rule, a mode or an answer decided: every other result would carry the same words.
                if by != permission::NOTHING_APPLIES {
                    slot.permission = Some((how, by));
                }
                true
            }
            Decision::Deny { kind, error, by } => {
                slot.marks.push(mark("permission", kind.as_str()));
                slot.permission = Some(("denied", by));
                slot.result = Some(Box::new(ToolResult::failure(slot.id.clone(), tool.spec.name.clone(), kind, error, false)));
                false
            }
            Decision::Ask { by, reason } => {
                slot.marks.push(mark("permission", "asked"));
                slot.permission = Some(("asked", by.clone()));
                match session {
                    Some(session) => {
                        let op = permission::remembered_op(&session, &tool.spec.name, &by);
                        let ticket = self.send(vec![op.for_host()], Wait::Remembered { at, by, reason }, now);
                        self.slot_mut(at).pending = Some(ticket);
                    }
                    None => self.ask_host(at, HostKind::Approve, Some((by, reason)), now),
                }
                true
            }
        }
    }

    /// The call waits until the host answers (or its time to answer passes).
    fn ask_host(&mut self, at: At, kind: HostKind, rule: Option<(String, Option<String>)>, now: Instant) {
        let ticket = self.take_ticket();
        let limit = match kind {
            HostKind::Validate | HostKind::Check | HostKind::Cost => self.options.check_timeout_ms,
            HostKind::Approve => self.options.approval_timeout_ms,
        };
        let due = after(now, Duration::from_millis(limit));
        self.deadlines.arm(due, Alarm::Host(ticket));
        self.tickets.insert(ticket, (at, kind, due));
        let turn = self.turns.live_mut(at.turn);
        let slot = &mut turn.slots[at.index];
        tracing::debug!(turn = at.turn, call = %self.shaper.redact_text(&slot.id), ticket, kind = ?kind, "waiting on the host");
        slot.pending = Some(ticket);
        let (rule, reason) = rule.map_or((None, None), |(by, reason)| (Some(by), reason));
        let args = turn.args.get(&at.index).cloned().unwrap_or(Value::Null);
        let request = HostRequest { ticket, kind, turn: at.turn, call_id: slot.id.clone(), name: slot.tool().spec.name.clone(), args, rule, reason, index: at.index };
        self.outbox.push(request);
    }

    /// A fresh ticket, for a request to the host or to the shared store.
    pub(super) fn take_ticket(&mut self) -> u32 {
        let ticket = self.next_ticket;
        self.next_ticket = self.next_ticket.wrapping_add(1).max(1);
        ticket
    }

    /// The host did not answer in time: a check that cannot run fails the call; an approval not given is a denial.
    pub(super) fn host_timed_out(&mut self, ticket: u32, now: Instant, step: &mut Step) {
        let Some((at, kind, _)) = self.tickets.remove(&ticket) else { return };
        let (limit, what) = match kind {
            HostKind::Validate => (self.options.check_timeout_ms, "validation"),
            HostKind::Check => (self.options.check_timeout_ms, "check"),
            HostKind::Cost => (self.options.check_timeout_ms, "cost"),
            HostKind::Approve => (self.options.approval_timeout_ms, "approval"),
        };
        let answer = HostAnswer { timed_out: Some(format!("no {what} came within {limit} ms")), ..HostAnswer::default() };
        self.resolve(at, ticket, kind, answer, now, step);
    }

    /// The host's answer to a call's request: the call is refused, asks its next question, or goes on.
    pub(super) fn resolve(&mut self, at: At, ticket: u32, kind: HostKind, mut answer: HostAnswer, now: Instant, step: &mut Step) {
        let Some(turn) = self.turns.get_mut(&at.turn) else { return };
        let session = turn.policy.fields.get("sessionId").cloned();
        let slot = &mut turn.slots[at.index];
        self.watch.met(at);
        // An answer for a call already answered (or for another request of it) changes nothing.
        if slot.sealed() || slot.pending != Some(ticket) {
            return;
        }
        slot.pending = None;
        // What the host says goes to the model and the trace: it is redacted like a handler's error.
        for text in [&mut answer.problem, &mut answer.error, &mut answer.reason].into_iter().flatten() {
            *text = self.shaper.redact_text(text);
        }
        let tool = slot.tool().clone();
        let name = tool.spec.name.clone();
        let id = slot.id.clone();
        let refuse = |kind: ErrorKind, error: String| Box::new(ToolResult::failure(id.clone(), name.clone(), kind, error, false));
        let refused = match kind {
            HostKind::Validate | HostKind::Check | HostKind::Cost => {
                let redact = |text: &str| self.shaper.redact_text(text);
                let (station, failed) = match kind {
                    HostKind::Validate => ("schema", "its schema's own validation failed"),
                    HostKind::Check => ("check", "its argument check failed"),
                    _ => ("cost", "its cost could not be computed"),
                };
                let problem = match (kind, answer.issues, answer.problem) {
                    (HostKind::Validate, Some(issues), _) => Some(validate::issues(&name, &issues, &redact)),
                    (HostKind::Check, _, Some(problem)) => Some(format!("Tool \"{name}\": {problem}. Change the arguments and call it again.")),
                    _ => None,
                };
                let cost = answer.cost.filter(|c| *c >= 0.0 && c.is_finite());
                let failure = match (kind, answer.error.or(answer.timed_out)) {
                    (_, Some(failure)) => Some(failure),
                    (HostKind::Cost, None) if cost.is_none() => Some(format!("it gave {}, not a number of at least 0", answer.cost.map_or("nothing".into(), |c| c.to_string()))),
                    _ => None,
                };
                match (failure, problem) {
                    (Some(failure), _) => {
                        slot.marks.push(mark(station, "failed"));
                        Some(refuse(ErrorKind::HandlerError, format!("Tool \"{name}\" was not run: {failed} ({failure}).")))
                    }
                    (None, Some(problem)) => {
                        slot.marks.push(mark(station, "refused"));
                        Some(refuse(ErrorKind::InvalidArguments, problem))
                    }
                    (None, None) => {
                        slot.marks.push(mark(station, "ok"));
                        slot.cost = cost.or(slot.cost);
                        let allowed = self.gate(at, Some(kind), now);
                        let slot = self.slot_mut(at);
                        let waiting = slot.pending.is_some();
                        let result = slot.result.take();
                        match (allowed, waiting) {
                            (true, false) => return self.proceed(at, now, step),
                            (true, true) => return,
                            (false, _) => result,
                        }
                    }
                }
            }
            HostKind::Approve => {
                let asked_by = slot.permission.as_ref().map_or(String::new(), |(_, by)| by.clone());
                let denial = match (answer.error, answer.timed_out, answer.decision.as_deref()) {
                    (Some(error), _, _) => Some(format!("the approval callback failed ({error})")),
                    (None, Some(timeout), _) => Some(timeout),
                    (None, None, Some("approve")) => None,
                    (None, None, _) => Some(answer.reason.clone().map_or("it was declined".into(), |r| format!("declined: {r}"))),
                };
                let refused = match denial {
                    Some(why) => {
                        slot.marks.push(mark("approval", "denied"));
                        slot.permission = Some(("denied", format!("{asked_by}; {why}")));
                        Some(refuse(
                            ErrorKind::ApprovalDenied,
                            format!("Tool \"{name}\" needs approval, and this call was not approved: {why}. Do not retry it unchanged; ask the user, or do something else."),
                        ))
                    }
                    None => match answer.arguments {
                        // Edited arguments meet everything the model's did: the schema (and its own validation, which
                        // the host ran on them), the checks, the deny rules.
                        Some(edited) => match edited_problem(&tool, &edited, answer.issues.as_deref(), &turn.policy, &self.shaper) {
                            // Priced only under a cost budget (the model's arguments were): there, no price, no call.
                            None if slot.cost.is_some() && answer.cost_error.is_some() => {
                                slot.marks.push(mark("approval", "edited_invalid"));
                                let why = answer.cost_error.as_deref().unwrap_or_default();
                                Some(refuse(
                                    ErrorKind::HandlerError,
                                    format!("The arguments as edited at approval were not run: their cost could not be computed ({why})."),
                                ))
                            }
                            None => {
                                slot.marks.push(mark("approval", "edited"));
                                turn.args.insert(at.index, edited);
                                // A cost computed for the model's arguments is the edited ones' now.
                                if slot.cost.is_some() {
                                    slot.cost = answer.cost.filter(|c| *c >= 0.0 && c.is_finite()).or(slot.cost);
                                }
                                None
                            }
                            Some((kind, error)) => {
                                slot.marks.push(mark("approval", "edited_invalid"));
                                Some(refuse(kind, format!("The arguments as edited at approval were refused, so the call was not run. {error}")))
                            }
                        },
                        None => {
                            slot.marks.push(mark("approval", "approved"));
                            None
                        }
                    },
                };
                if refused.is_none() {
                    // Remembered only for a session the context names: without one, "this session" would be everyone.
                    let session = session.filter(|_| answer.remember.as_deref() == Some("session"));
                    let how = if session.is_some() { "approved for this session" } else { "approved" };
                    slot.permission = Some(("approved", format!("{asked_by}; {how} by the approval callback")));
                    if let Some(session) = session {
                        self.remembered.push(remembered_key(&session, &name, &asked_by), ());
                        if self.shared.is_some() {
                            self.effect(permission::remember_op(&session, &name, &asked_by, self.options.dedup.session_ttl_ms), now);
                        }
                    }
                }
                refused
            }
        };
        match refused {
            Some(result) => self.settle_waiting(at, result, now, step),
            None => self.proceed(at, now, step),
        }
    }

    /// A call the host let through goes on: dedup and cache, then, once its schedule has handed it out, the run.
    pub(super) fn proceed(&mut self, at: At, now: Instant, step: &mut Step) {
        if !self.turns.contains_key(&at.turn) {
            return;
        }
        let runs = self.avoid(at, now, step);
        let slot = self.slot_mut(at);
        let handed_out = slot.scheduled;
        if let (false, Some(result)) = (runs, slot.result.take()) {
            return self.settle_waiting(at, result, now, step);
        }
        if handed_out {
            let name = slot.tool().spec.name.clone();
            self.release_place(&name); // held while it waited; taken again as it launches
            self.launch(at, now, step);
        }
    }

    /// Whether the session approved the rule before, as the shared store said: approved, or the approval callback
    /// is asked (as it is when the store failed, unless sessions fail closed).
    pub(super) fn remembered_answer(&mut self, at: At, by: String, reason: Option<String>, reply: &Reply, now: Instant, step: &mut Step) {
        let on_error = self.on_error();
        self.watch.met(at);
        let turn = self.turn_mut(at);
        let session = turn.policy.fields.get("sessionId").cloned().unwrap_or_default();
        let slot = &mut turn.slots[at.index];
        slot.pending = None;
        let name = slot.tool().spec.name.clone();
        match (&reply.error, reply.remembered) {
            (None, Some(true)) => {
                slot.marks.push(mark("approval", "remembered"));
                slot.permission = Some(("approved", format!("{by}; approved earlier in this session")));
                self.remembered.push(remembered_key(&session, &name, &by), ());
                self.proceed(at, now, step);
            }
            (Some(e), _) if on_error.sessions == Fail::Closed => {
                slot.store_error = Some(e.clone());
                let result = shared::unavailable(slot.id.clone(), &name, "session", e);
                self.settle_waiting(at, Box::new(result), now, step);
            }
            (error, _) => {
                slot.store_error = error.clone();
                self.ask_host(at, HostKind::Approve, Some((by, reason)), now);
            }
        }
    }
}
