//! Station 8's rate limit and station 9, invoke: the schedule hands calls out, each takes its tokens and runs under its
//! deadlines, and a failed attempt retries after its backoff (station 10).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::ops::Reply;
use crate::ratelimit::{self, Token, Want};
use crate::result::{AttemptError, ToolResult};
use crate::timer::after;
use crate::{invoke, retry};

use super::asking::{Asked, Plan, Resumed};
use super::call::{At, Reserved, Run, Slot};
use super::counters::counters_of;
use super::wire::{Abort, Start, Step};
use super::{mark, millis, Alarm, Engine};

impl Engine {
    /// The buckets the call's tokens come from, with the wait it may make for each (never past its turn's end).
    pub(super) fn wants(&self, at: At, now: Instant) -> Vec<Want> {
        let turn = self.turn(at);
        let tool = turn.slots[at.index].tool();
        if self.rate_limit.is_none() && tool.rate_limit.is_none() {
            return Vec::new();
        }
        let latest = turn.deadline.map(|(end, _)| end);
        ratelimit::wants(self.rate_limit.as_ref(), &tool.spec.name, tool.rate_limit.as_ref(), &turn.policy.fields, latest, now)
    }

    /// The store's answer to one of the call's token takes: the wait before the token is the call's (zero: now),
    /// or None when it took none (refused: the call is answered `rate_limited`, or the store failed).
    pub(super) fn token_taken(&mut self, slot: &mut Slot, want: &Want, reply: &Reply, resumed: &mut Resumed) -> Option<Duration> {
        let name = slot.tool().spec.name.clone();
        match Token::of(reply) {
            Token::Now => return Some(Duration::ZERO),
            Token::After(wait) => return Some(wait),
            Token::Refused(wait) if resumed.runs() => {
                counters_of(&mut self.counters, &name).rate_limited += 1;
                slot.marks.push(mark("rate_limit", "refused"));
                *resumed = Resumed::Answered(Box::new(ratelimit::refused(slot.id.clone(), &name, want.whole, wait)));
            }
            Token::Failed(e) if resumed.runs() => {
                slot.store_error = Some(e.clone());
                if self.on_error().rate_limit == crate::shared::Fail::Closed {
                    counters_of(&mut self.counters, &name).rate_limited += 1;
                    slot.marks.push(mark("rate_limit", "unavailable"));
                    *resumed = Resumed::Answered(Box::new(crate::shared::no_token(slot.id.clone(), &name, &e)));
                }
            }
            _ => {}
        }
        None
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
            let tool = slots[index].tool();
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
            self.launch(At { turn: turn_id, index }, now, step);
        }
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        if turn.open == 0 && !turn.accepting && !turn.done_reported {
            turn.done_reported = true;
            step.done.push(turn_id);
            self.held_back.remove(&turn_id);
        }
    }

    /// Station 8, then invoke: budgets (on the first attempt), the breaker and the tokens are asked of the store,
    /// and the call starts now, waits for a reserved token, or is answered (`budget_exceeded`, `unavailable`,
    /// `rate_limited`). A call they refuse takes no token; one under none of them starts at once.
    pub(super) fn run_now(&mut self, at: At, now: Instant, step: &mut Step) {
        let spends = if self.slot(at).attempts == 0 {
            match self.spend_per_turn(at) {
                Ok(spends) => spends,
                Err(refused) => return self.settle(at, refused, now, step),
            }
        } else {
            Vec::new()
        };
        let asks_breaker = match self.breaker_first(at, now) {
            Ok(asks) => asks,
            Err(refused) => return self.settle(at, refused, now, step),
        };
        let takes = self.wants(at, now);
        if spends.is_empty() && !asks_breaker && takes.is_empty() {
            return self.start_run(at, now, step);
        }
        if self.shared.is_some() {
            let tool = self.tool_of(at);
            self.take_place(&tool.spec.name); // held while it waits on its ticket
        }
        let mut plan = Plan::new(Asked::Running);
        plan.spends = spends;
        plan.breaker = asks_breaker;
        plan.takes = Some(takes);
        self.ask(at, plan, now, step);
    }

    /// The call reserved a token due at `at`; it keeps its places (schedule and tool) while it waits.
    pub(super) fn wait_for_token(&mut self, at: At, due: Instant, reserved: Reserved) {
        let slot = self.slot_mut(at);
        slot.marks.push(mark("rate_limit", "waited"));
        slot.rate_wait = Some((due, reserved));
        let name = slot.tool().spec.name.clone();
        self.take_place(&name);
        self.deadlines.arm(due, Alarm::RateWait(at.turn, at.index));
    }

    pub(super) fn token_due(&mut self, at: At, now: Instant, step: &mut Step) {
        let Some(turn) = self.turns.get_mut(&at.turn) else { return };
        let slot = &mut turn.slots[at.index];
        if slot.rate_wait.take().is_none() {
            return;
        }
        let name = slot.tool().spec.name.clone();
        self.release_place(&name); // taken again by start_run
        self.start_run(at, now, step);
    }

    /// Hands out one attempt of a call: a fresh run id (and so a fresh signal in the host) and its deadlines.
    pub(super) fn start_run(&mut self, at: At, now: Instant, step: &mut Step) {
        let tool = self.tool_of(at);
        self.take_place(&tool.spec.name);
        let turn = self.turns.live_mut(at.turn);
        let slot = &mut turn.slots[at.index];
        let run = self.next_run;
        self.next_run = self.next_run.wrapping_add(1).max(1);
        let (total, idle_ms) = Self::run_limits(&tool);
        let total_at = after(now, total);
        self.deadlines.arm(total_at, Alarm::Total(run));
        let idle = idle_ms.map(|ms| (after(now, Duration::from_millis(ms)), ms));
        if let Some((due, _)) = idle {
            self.deadlines.arm(due, Alarm::Idle(run));
        }
        self.runs.insert(run, Run { at, total_at, idle, verdict: None });
        slot.scheduled = true;
        slot.first_started.get_or_insert(now);
        slot.started = Some(now);
        slot.starts.push(now);
        slot.run = Some(run);
        slot.attempts += 1;
        step.start.push(Start {
            run,
            turn: at.turn,
            call_id: slot.id.clone(),
            name: tool.spec.name.clone(),
            args: turn.args.get(&at.index).cloned().unwrap_or(Value::Null),
            attempt: slot.attempts,
            index: at.index,
        });
    }

    /// Forgets a run and its deadlines; returns where it belonged.
    pub(super) fn end_run(&mut self, run: u32) -> Option<Run> {
        let r = self.runs.remove(&run).or_else(|| self.held.remove(&run))?;
        self.deadlines.disarm(r.total_at, Alarm::Total(run));
        if let Some((due, _)) = r.idle {
            self.deadlines.disarm(due, Alarm::Idle(run));
        }
        if let Some(name) = self.open_slot(r.at).and_then(|slot| slot.tool.as_ref()).map(|t| t.spec.name.clone()) {
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
        let Some(turn) = self.turns.get_mut(&r.at.turn) else { return };
        let slot = &mut turn.slots[r.at.index];
        let tool = slot.tool().clone();
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
        step.abort.push(Abort { run, kind });
        self.attempt_ended(r.at, Box::new(result), now, step);
    }

    /// One attempt failed or succeeded: retry it after a backoff when the retry station allows, else settle.
    pub(super) fn attempt_ended(&mut self, at: At, result: Box<ToolResult>, now: Instant, step: &mut Step) {
        self.attempt_outcome(at, &result, true, now, step);
        let jitter = self.jitter.f64();
        let Some(turn) = self.turns.get_mut(&at.turn) else { return };
        let deadline = turn.deadline;
        let slot = &mut turn.slots[at.index];
        let tool = slot.tool().clone();
        if !result.success && retry::eligible(&result, slot.attempts, &tool.retry) {
            let wait = retry::delay(&tool.retry, slot.attempts, result.retry_after_ms, jitter);
            let due = after(now, wait);
            let first = slot.first_started.unwrap_or(now);
            let within_budget = due.saturating_duration_since(first) <= Duration::from_millis(tool.retry.max_elapsed_ms);
            let before_deadline = deadline.is_none_or(|(end, _)| due < end);
            if within_budget && before_deadline {
                slot.attempt_errors.push(AttemptError {
                    attempt: slot.attempts,
                    error_kind: result.error_kind.expect("a failure has a kind"),
                    error: result.error.clone().unwrap_or_default(),
                    retry_in_ms: millis(wait),
                });
                slot.marks.push(mark("retry", "scheduled"));
                self.watch.met(at);
                slot.backoff = Some(Box::new((due, *result)));
                slot.run = None;
                self.renew_lease(at, wait, now);
                // The call keeps its place under the tool's maxConcurrency while it waits to retry.
                self.take_place(&tool.spec.name);
                self.deadlines.arm(due, Alarm::Retry(at.turn, at.index));
                return;
            }
        }
        self.settle(at, result, now, step);
    }

    pub(super) fn retry_now(&mut self, at: At, now: Instant, step: &mut Step) {
        let Some(turn) = self.turns.get_mut(&at.turn) else { return };
        let slot = &mut turn.slots[at.index];
        if slot.backoff.take().is_none() || slot.sealed() {
            return;
        }
        let name = slot.tool().spec.name.clone();
        counters_of(&mut self.counters, &name).retries += 1;
        self.release_place(&name); // taken again by start_run
        // Every attempt reaches the upstream, so every attempt takes a rate-limit token.
        self.run_now(at, now, step);
    }
}
