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
use crate::text::{clip, QUOTED_CHARS};
use crate::timer::after;
use crate::{checks, keys, lookup, parse, validate};

use super::{Engine, Alarm, mark};
use super::wire::{Step, HostRequest, HostKind, HostAnswer};
use super::call::Slot;

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

    /// The rest of admission for a call whose arguments are valid, from the step after `passed` on: the schema's
    /// own validation and the tool's own check (in the host), then the permission station, which may ask the host
    /// for approval. False when the call is refused (the slot holds its result); a call waiting on the host stays
    /// runnable.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn gate(&mut self, passed: Option<HostKind>, turn_id: u32, index: usize, slot: &mut Slot, tool: &Tool, args: &Value, policy: &Policy, now: Instant) -> bool {
        let budgets = [self.options.budget.as_ref(), tool.spec.budget.as_ref(), policy.budget.as_ref()];
        let costed = tool.cost == Cost::Host && budget::counts_cost(budgets);
        for (kind, wanted) in [(HostKind::Validate, tool.spec.schema_check), (HostKind::Check, tool.spec.check), (HostKind::Cost, costed)] {
            if wanted && passed.is_none_or(|p| p < kind) {
                self.ask_host(kind, turn_id, index, slot, tool, args, None, now);
                return true;
            }
        }
        self.permit(turn_id, index, slot, tool, args, policy, now)
    }

    /// Station 5 for one call. False when refused (the slot holds its result).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn permit(&mut self, turn_id: u32, index: usize, slot: &mut Slot, tool: &Tool, args: &Value, policy: &Policy, now: Instant) -> bool {
        let session = policy.fields.get("sessionId").map_or("", String::as_str);
        let remembered = |by: &str| self.remembered.contains(&remembered_key(session, &tool.spec.name, by));
        match policy.decide(tool, args, remembered) {
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
                // Another process may have been given this approval for the session: the store knows.
                if let (Some(_), false) = (&self.shared, session.is_empty()) {
                    let session = session.to_string();
                    slot.pending = Some(self.ask_remembered(turn_id, index, &session, &tool.spec.name, by, reason, now));
                } else {
                    self.ask_host(HostKind::Approve, turn_id, index, slot, tool, args, Some((by, reason)), now);
                }
                true
            }
        }
    }

    /// The call waits until the host answers (or its time to answer passes).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ask_host(&mut self, kind: HostKind, turn_id: u32, index: usize, slot: &mut Slot, tool: &Tool, args: &Value, rule: Option<(String, Option<String>)>, now: Instant) {
        let ticket = self.take_ticket();
        let limit = match kind {
            HostKind::Validate | HostKind::Check | HostKind::Cost => self.options.check_timeout_ms,
            HostKind::Approve => self.options.approval_timeout_ms,
        };
        let at = after(now, Duration::from_millis(limit));
        self.deadlines.arm(at, Alarm::Host(ticket));
        self.tickets.insert(ticket, (turn_id, index, kind, at));
        tracing::debug!(turn = turn_id, call = %self.shaper.redact_text(&slot.id), ticket, kind = ?kind, "waiting on the host");
        slot.pending = Some(ticket);
        let (rule, reason) = rule.map_or((None, None), |(by, reason)| (Some(by), reason));
        self.outbox.push(HostRequest { ticket, kind, turn: turn_id, call_id: slot.id.clone(), name: tool.spec.name.clone(), args: args.clone(), rule, reason, index });
    }

    /// A fresh ticket, for a request to the host or to the shared store.
    pub(super) fn take_ticket(&mut self) -> u32 {
        let ticket = self.next_ticket;
        self.next_ticket = self.next_ticket.wrapping_add(1).max(1);
        ticket
    }

    /// The host did not answer in time: a check that cannot run fails the call; an approval not given is a denial.
    pub(super) fn host_timed_out(&mut self, ticket: u32, now: Instant, step: &mut Step) {
        let Some((turn_id, index, kind, _)) = self.tickets.remove(&ticket) else { return };
        let (limit, what) = match kind {
            HostKind::Validate => (self.options.check_timeout_ms, "validation"),
            HostKind::Check => (self.options.check_timeout_ms, "check"),
            HostKind::Cost => (self.options.check_timeout_ms, "cost"),
            HostKind::Approve => (self.options.approval_timeout_ms, "approval"),
        };
        let answer = HostAnswer { timed_out: Some(format!("no {what} came within {limit} ms")), ..HostAnswer::default() };
        self.resolve(turn_id, index, ticket, kind, answer, now, step);
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn resolve(&mut self, turn_id: u32, index: usize, ticket: u32, kind: HostKind, mut answer: HostAnswer, now: Instant, step: &mut Step) {
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        let session = turn.policy.fields.get("sessionId").cloned();
        let slot = &mut turn.slots[index];
        // An answer for a call already answered (or for another request of it) changes nothing.
        if slot.result.is_some() || slot.pending != Some(ticket) {
            return;
        }
        slot.pending = None;
        // What the host says goes to the model and the trace: it is redacted like a handler's error.
        for text in [&mut answer.problem, &mut answer.error, &mut answer.reason].into_iter().flatten() {
            *text = self.shaper.redact_text(text);
        }
        let tool = slot.tool.clone().expect("a call waiting on the host has a tool");
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
                        let mut slot = std::mem::replace(slot, Slot::new(String::new()));
                        let args = turn.args.get(&index).cloned().unwrap_or(Value::Null);
                        let policy = turn.policy.clone();
                        let allowed = self.gate(Some(kind), turn_id, index, &mut slot, &tool, &args, &policy, now);
                        let waiting = slot.pending.is_some();
                        let result = slot.result.take();
                        self.turns.get_mut(&turn_id).expect("a live turn").slots[index] = slot;
                        match (allowed, waiting) {
                            (true, false) => return self.proceed(turn_id, index, now, step),
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
                                turn.args.insert(index, edited);
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
                        self.share_remembered(&session, &name, &asked_by);
                    }
                }
                refused
            }
        };
        match refused {
            Some(result) => self.settle_waiting(turn_id, index, result, now, step),
            None => self.proceed(turn_id, index, now, step),
        }
    }

    /// A call the host let through goes on: dedup and cache, then, once its schedule has handed it out, the run.
    pub(super) fn proceed(&mut self, turn_id: u32, index: usize, now: Instant, step: &mut Step) {
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        let mut slot = std::mem::replace(&mut turn.slots[index], Slot::new(String::new()));
        let tool = slot.tool.clone().expect("a call waiting on the host has a tool");
        let args = turn.args.get(&index).cloned().unwrap_or(Value::Null);
        let fields = turn.policy.fields.clone();
        let runs = self.avoid(turn_id, index, &mut slot, &tool, &args, &fields, now);
        let handed_out = slot.scheduled;
        let answered = slot.result.take();
        self.turns.get_mut(&turn_id).expect("a live turn").slots[index] = slot;
        if let (false, Some(result)) = (runs, answered) {
            return self.settle_waiting(turn_id, index, result, now, step);
        }
        if handed_out {
            self.release_place(&tool.spec.name); // held while it waited; taken again as it launches
            self.launch(turn_id, index, now, step);
        }
    }
}
