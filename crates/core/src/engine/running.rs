//! Station 8's rate limit and station 9, invoke: the schedule hands calls out, each takes its tokens and runs under its
//! deadlines, and a failed attempt retries after its backoff (station 10).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::ratelimit::{self};
use crate::result::{AttemptError, ToolResult};
use crate::store::{Bucket, Take};
use crate::timer::after;
use crate::{invoke, keys, retry};

use super::{Engine, Alarm, mark, millis};
use super::wire::{Start, Step};
use super::call::{Reserved, Run};
use super::counters::counters_of;

impl Engine {
    /// The buckets a call's tokens come from: the executor's and the tool's, each keyed by its split field, with
    /// the wait the call may make for it (never past its turn's deadline), and whether it is the executor's.
    pub(super) fn limits_of(&self, turn_id: u32, index: usize, now: Instant) -> Vec<(String, Bucket, Duration, bool)> {
        let turn = self.turns.get(&turn_id).expect("a live turn");
        let tool = turn.slots[index].tool.as_ref().expect("a scheduled call has a tool");
        let latest = turn.deadline.map(|(at, _)| at);
        [(self.rate_limit.as_ref(), true), (tool.rate_limit.as_ref(), false)]
            .into_iter()
            .filter_map(|(limit, whole)| {
                let limit = limit?;
                let split = limit.key.as_ref().map_or("", |field| turn.policy.fields.get(field).map_or("", String::as_str));
                let key = if whole { format!("*{}{split}", keys::SEP) } else { format!("{}{}{split}", tool.spec.name, keys::SEP) };
                let max_wait = latest.map_or(limit.max_wait, |end| limit.max_wait.min(end.saturating_duration_since(now)));
                Some((key, limit.bucket, max_wait, whole))
            })
            .collect()
    }

    /// Station 8 for a call the scheduler hands out: a token from the executor's bucket and the tool's, now or
    /// after a wait the call may make; else a `rate_limited` result.
    pub(super) fn take_tokens(&mut self, turn_id: u32, index: usize, now: Instant) -> Result<Option<(Instant, Reserved)>, Box<ToolResult>> {
        let mut ready_at = now;
        let mut taken = Vec::new();
        for (bucket_key, bucket, max_wait, whole) in self.limits_of(turn_id, index, now) {
            match self.store.take_token(&bucket_key, bucket, max_wait, now) {
                Take::Now => taken.push((bucket_key, bucket)),
                Take::After(wait) => {
                    ready_at = ready_at.max(after(now, wait));
                    taken.push((bucket_key, bucket));
                }
                Take::Refused(wait) => {
                    // The call does not run: a token the other bucket gave it goes back.
                    for (key, bucket) in taken {
                        self.store.refund_token(&key, bucket);
                    }
                    let slot = &self.turns[&turn_id].slots[index];
                    let name = slot.tool.as_ref().expect("a scheduled call has a tool").spec.name.clone();
                    counters_of(&mut self.counters, &name).rate_limited += 1;
                    return Err(Box::new(ratelimit::refused(slot.id.clone(), &name, whole, wait)));
                }
            }
        }
        Ok((ready_at > now).then_some((ready_at, taken)))
    }

    /// Starts what the turn's schedule allows and reports the turn done when nothing is left open.
    pub(super) fn advance(&mut self, turn_id: u32, now: Instant, step: &mut Step) {
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        let tool_running = &self.tool_running;
        let slots = &turn.slots;
        let mut held_back = false;
        // Places taken in this round, so that the next candidate of the same tool sees them.
        let mut admitted: HashMap<&str, usize> = HashMap::new();
        let ready = turn.schedule.ready(|index| {
            let tool = slots[index].tool.as_ref().expect("a scheduled call has a tool");
            let Some(cap) = tool.spec.max_concurrency else { return true };
            let name = tool.spec.name.as_str();
            let taken = admitted.entry(name).or_default();
            if tool_running.get(name).copied().unwrap_or(0) + *taken >= cap {
                held_back = true;
                return false;
            }
            *taken += 1;
            true
        });
        if held_back {
            self.held_back.insert(turn_id);
        }
        for index in ready {
            self.launch(turn_id, index, now, step);
        }
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        if turn.open == 0 && !turn.done_reported {
            turn.done_reported = true;
            step.done.push(turn_id);
            self.held_back.remove(&turn_id);
        }
    }

    /// Station 8, then invoke: budgets (on the first attempt) and the breaker, then start now, wait for a reserved
    /// token, or answer `rate_limited`. A call they refuse takes no token.
    pub(super) fn run_now(&mut self, turn_id: u32, index: usize, now: Instant, step: &mut Step) {
        let first = self.turns[&turn_id].slots[index].attempts == 0;
        let spends = if first {
            match self.spend_budgets(turn_id, index, now) {
                Ok(spends) => spends,
                Err(refused) => return self.settle(turn_id, index, refused, now, step),
            }
        } else {
            Vec::new()
        };
        let ask_breaker = match self.admit_attempt(turn_id, index, now, step) {
            Ok(admitted) => matches!(admitted, super::guards::Admitted::AskStore),
            Err(refused) => return self.settle(turn_id, index, refused, now, step),
        };
        if self.shared.is_some() {
            return self.ask_tokens(turn_id, index, spends, ask_breaker, now, step);
        }
        match self.take_tokens(turn_id, index, now) {
            Ok(None) => self.start_run(turn_id, index, now, step),
            Ok(Some((at, reserved))) => self.wait_for_token(turn_id, index, at, reserved),
            Err(refused) => {
                self.turns.get_mut(&turn_id).expect("a live turn").slots[index].marks.push(mark("rate_limit", "refused"));
                self.settle(turn_id, index, refused, now, step);
            }
        }
    }

    /// The call reserved a token due at `at`; it keeps its places (schedule and tool) while it waits.
    pub(super) fn wait_for_token(&mut self, turn_id: u32, index: usize, at: Instant, reserved: Reserved) {
        let slot = &mut self.turns.get_mut(&turn_id).expect("a live turn").slots[index];
        slot.marks.push(mark("rate_limit", "waited"));
        slot.rate_wait = Some((at, reserved));
        let name = slot.tool.as_ref().expect("a scheduled call has a tool").spec.name.clone();
        self.take_place(&name);
        self.deadlines.arm(at, Alarm::RateWait(turn_id, index));
    }

    pub(super) fn token_due(&mut self, turn_id: u32, index: usize, now: Instant, step: &mut Step) {
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        let slot = &mut turn.slots[index];
        if slot.rate_wait.take().is_none() {
            return;
        }
        let name = slot.tool.as_ref().expect("a waiting call has a tool").spec.name.clone();
        self.release_place(&name); // taken again by start_run
        self.start_run(turn_id, index, now, step);
    }

    /// Hands out one attempt of a call: a fresh run id (and so a fresh signal in the host) and its deadlines.
    pub(super) fn start_run(&mut self, turn_id: u32, index: usize, now: Instant, step: &mut Step) {
        let tool = self.turns.get(&turn_id).expect("a live turn").slots[index].tool.clone().expect("a scheduled call has a tool");
        self.take_place(&tool.spec.name);
        let turn = self.turns.get_mut(&turn_id).expect("a live turn");
        let slot = &mut turn.slots[index];
        let run = self.next_run;
        self.next_run = self.next_run.wrapping_add(1).max(1);
        let (total, idle_ms) = Self::run_limits(&tool);
        let total_at = after(now, total);
        self.deadlines.arm(total_at, Alarm::Total(run));
        let idle = idle_ms.map(|ms| (after(now, Duration::from_millis(ms)), ms));
        if let Some((at, _)) = idle {
            self.deadlines.arm(at, Alarm::Idle(run));
        }
        self.runs.insert(run, Run { turn: turn_id, index, total_at, idle, verdict: None });
        slot.scheduled = true;
        slot.first_started.get_or_insert(now);
        slot.started = Some(now);
        slot.starts.push(now);
        slot.run = Some(run);
        slot.attempts += 1;
        step.start.push(Start {
            run,
            turn: turn_id,
            call_id: slot.id.clone(),
            name: tool.spec.name.clone(),
            args: turn.args.get(&index).cloned().unwrap_or(Value::Null),
            attempt: slot.attempts,
            index,
        });
    }

    /// Forgets a run and its deadlines; returns where it belonged.
    pub(super) fn end_run(&mut self, run: u32) -> Option<Run> {
        let r = self.runs.remove(&run).or_else(|| self.held.remove(&run))?;
        self.deadlines.disarm(r.total_at, Alarm::Total(run));
        if let Some((at, _)) = r.idle {
            self.deadlines.disarm(at, Alarm::Idle(run));
        }
        if let Some(name) = self.turns.get(&r.turn).and_then(|t| t.slots[r.index].tool.as_ref()).map(|t| t.spec.name.clone()) {
            self.release_place(&name);
        }
        Some(r)
    }

    /// A tool's running count, as `maxConcurrency` sees it, goes up by one; its name is copied only the first time.
    pub(super) fn take_place(&mut self, tool: &str) {
        match self.tool_running.get_mut(tool) {
            Some(n) => *n += 1,
            None => {
                self.tool_running.insert(tool.to_owned(), 1);
            }
        }
    }

    /// A tool's running count, as `maxConcurrency` sees it, goes down by one.
    pub(super) fn release_place(&mut self, tool: &str) {
        let n = self.tool_running.get_mut(tool).expect("a place was taken");
        debug_assert!(*n > 0, "a place released twice");
        *n = n.saturating_sub(1);
        self.places_freed = true;
    }

    pub(super) fn time_out(&mut self, run: u32, alarm: Alarm, now: Instant, step: &mut Step) {
        let Some(r) = self.end_run(run) else { return };
        let Some(turn) = self.turns.get_mut(&r.turn) else { return };
        let slot = &mut turn.slots[r.index];
        let tool = slot.tool.clone().expect("a run has a tool");
        let counters = counters_of(&mut self.counters, &tool.spec.name);
        let result = match (alarm, r.idle) {
            (Alarm::Idle(_), Some((_, idle_ms))) => {
                counters.idle_timeouts += 1;
                invoke::idle_timed_out(slot.id.clone(), &tool, idle_ms)
            }
            _ => {
                counters.timeouts += 1;
                invoke::timed_out(slot.id.clone(), &tool)
            }
        };
        let kind = result.error_kind.expect("a timeout is a failure");
        slot.marks.push(mark("invoke", kind.as_str()));
        step.abort.push((run, kind));
        self.attempt_ended(r.turn, r.index, Box::new(result), now, step);
    }

    /// One attempt failed or succeeded: retry it after a backoff when the retry station allows, else settle.
    pub(super) fn attempt_ended(&mut self, turn_id: u32, index: usize, result: Box<ToolResult>, now: Instant, step: &mut Step) {
        self.attempt_outcome(turn_id, index, &result, true, now, step);
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        let deadline = turn.deadline;
        let slot = &mut turn.slots[index];
        let tool = slot.tool.clone().expect("an attempted call has a tool");
        if !result.success && retry::eligible(&result, slot.attempts, &tool.retry) {
            let wait = retry::delay(&tool.retry, slot.attempts, result.retry_after_ms);
            let at = after(now, wait);
            let first = slot.first_started.unwrap_or(now);
            let within_budget = at.saturating_duration_since(first) <= Duration::from_millis(tool.retry.max_elapsed_ms);
            let before_deadline = deadline.is_none_or(|(end, _)| at < end);
            if within_budget && before_deadline {
                slot.attempt_errors.push(AttemptError {
                    attempt: slot.attempts,
                    error_kind: result.error_kind.expect("a failure has a kind"),
                    error: result.error.clone().unwrap_or_default(),
                    retry_in_ms: millis(wait),
                });
                slot.marks.push(mark("retry", "scheduled"));
                slot.backoff = Some(Box::new((at, *result)));
                slot.run = None;
                self.renew_lease(turn_id, index, wait, now);
                // The call keeps its place under the tool's maxConcurrency while it waits to retry.
                self.take_place(&tool.spec.name);
                self.deadlines.arm(at, Alarm::Retry(turn_id, index));
                return;
            }
        }
        self.settle(turn_id, index, result, now, step);
    }

    pub(super) fn retry_now(&mut self, turn_id: u32, index: usize, now: Instant, step: &mut Step) {
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        let slot = &mut turn.slots[index];
        if slot.backoff.take().is_none() || slot.result.is_some() {
            return;
        }
        let name = slot.tool.as_ref().expect("a retried call has a tool").spec.name.clone();
        counters_of(&mut self.counters, &name).retries += 1;
        self.release_place(&name); // taken again by start_run
        // Every attempt reaches the upstream, so every attempt takes a rate-limit token.
        self.run_now(turn_id, index, now, step);
    }
}
