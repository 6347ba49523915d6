//! A turn that ends before its calls do (cancelled, or past its deadline): every call still open is answered.

use std::time::Instant;


use crate::result::{ErrorKind, ToolResult};
use crate::{invoke, ratelimit};

use super::{Engine, Alarm, mark};
use super::call::At;
use super::wire::{Abort, Step};
use super::counters::counters_of;

#[derive(Clone, Copy)]
pub(super) enum TurnEnd<'a> {
    Cancelled(&'a str),
    Deadline,
}

impl Engine {
    pub(super) fn cancel_turns(&mut self, turns: &[u32], reason: &str, unstarted: &[u32], now: Instant) -> Step {
        let mut step = Step::default();
        for &turn_id in turns {
            self.end_turn_early(turn_id, now, unstarted, &mut step, TurnEnd::Cancelled(reason));
        }
        self.drain(now, &mut step);
        step
    }

    /// A turn ends before its calls do (cancelled, or its deadline passed): every call still open is answered.
    /// `unstarted`: runs handed out that the host had not started yet (starts still in `step` count too).
    /// A streaming turn takes no more calls.
    pub(super) fn end_turn_early(&mut self, turn_id: u32, now: Instant, unstarted: &[u32], step: &mut Step, why: TurnEnd<'_>) {
        if self.stop_accepting(turn_id, step) {
            self.dirty.insert(turn_id);
        }
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        if turn.open == 0 {
            return;
        }
        if let Some((at, _)) = turn.deadline {
            self.deadlines.disarm(at, Alarm::Turn(turn_id));
        }
        let mut unstarted = unstarted.to_vec();
        step.start.retain(|start| {
            let ours = start.turn == turn_id;
            if ours {
                unstarted.push(start.run);
            }
            !ours
        });
        let waiting = turn.schedule.take_waiting();
        let deadline_ms = turn.deadline.map_or(0, |(_, ms)| ms);
        let not_started = format!("the turn's deadline of {deadline_ms} ms passed before it started");
        let mut answers: Vec<(usize, ToolResult)> = Vec::new();
        let mut ended_runs = Vec::new();
        let mut places = Vec::new();
        let mut refunds = Vec::new();
        let mut unstarted_waits = Vec::new();
        for (index, slot) in turn.slots.iter_mut().enumerate() {
            if slot.sealed() {
                continue;
            }
            slot.ended_early = true;
            let name = slot.tool().spec.name.clone();
            if let Some(ticket) = slot.pending.take() {
                match self.tickets.remove(&ticket) {
                    Some((_, _, due)) => self.deadlines.disarm(due, Alarm::Host(ticket)),
                    None => slot.unanswered.push(ticket),
                }
                // Handed out and holding its place; one not handed out is among the schedule's waiting calls.
                if slot.scheduled {
                    places.push(name);
                    unstarted_waits.push(index);
                }
            } else if let Some((at, reserved)) = slot.rate_wait.take() {
                self.deadlines.disarm(at, Alarm::RateWait(turn_id, index));
                refunds.extend(reserved);
                places.push(name);
                unstarted_waits.push(index);
            } else if slot.joined.is_some() && slot.scheduled {
                // Handed out and waiting for a flight, holding its place; `settle` takes it off the flight.
                places.push(name);
                unstarted_waits.push(index);
            } else if let Some((_, _, at)) = slot.polling.take() {
                // Waiting for an identical call another process runs, holding its place.
                self.deadlines.disarm(at, Alarm::Poll(turn_id, index));
                places.push(name);
                unstarted_waits.push(index);
            } else if let Some(waiting) = slot.backoff.take() {
                let (at, failure) = *waiting;
                // Waiting to retry: the last failure stands, so it is no longer one of the attempts before the last.
                self.deadlines.disarm(at, Alarm::Retry(turn_id, index));
                slot.attempt_errors.pop();
                places.push(name);
                answers.push((index, failure));
            } else if let Some(run) = slot.run.filter(|r| self.runs.contains_key(r)) {
                ended_runs.push((index, run, !unstarted.contains(&run)));
            }
        }
        for name in places {
            self.release_place(&name);
        }
        for (key, bucket) in refunds {
            self.effect(ratelimit::refund(key, bucket), now);
        }
        for (index, run, was_running) in ended_runs {
            self.end_run(run);
            let turn = self.turns.live_mut(turn_id);
            let slot = &mut turn.slots[index];
            let tool = slot.tool().clone();
            if !was_running {
                // Handed out but never started by the host: this attempt did not happen.
                slot.attempts -= 1;
                slot.started = None;
                if slot.attempts == 0 {
                    slot.first_started = None;
                }
            }
            let result = match why {
                TurnEnd::Cancelled(reason) => invoke::cancelled(slot.id.clone(), &tool, was_running, reason),
                TurnEnd::Deadline if was_running => invoke::turn_deadline_hit(slot.id.clone(), &tool, deadline_ms),
                TurnEnd::Deadline => invoke::not_executed(slot.id.clone(), &tool.spec.name, &not_started),
            };
            let kind = result.error_kind.expect("an early end is a failure");
            if was_running {
                step.abort.push(Abort { run, kind });
            }
            if kind == ErrorKind::Timeout {
                counters_of(&mut self.counters, &tool.spec.name).timeouts += 1;
            }
            slot.marks.push(mark("invoke", kind.as_str()));
            answers.push((index, result));
        }
        let turn = self.turns.live_mut(turn_id);
        for index in waiting.into_iter().chain(unstarted_waits) {
            let slot = &mut turn.slots[index];
            let tool = slot.tool().clone();
            let result = match why {
                TurnEnd::Cancelled(reason) => invoke::cancelled(slot.id.clone(), &tool, false, reason),
                TurnEnd::Deadline => invoke::not_executed(slot.id.clone(), &tool.spec.name, &not_started),
            };
            slot.marks.push(mark("invoke", "not_started"));
            answers.push((index, result));
        }
        for (index, result) in answers {
            self.settle(At { turn: turn_id, index }, Box::new(result), now, step);
        }
    }
}
