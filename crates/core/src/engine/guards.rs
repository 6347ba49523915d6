//! Station 8's guards before the rate limit: a call's budgets, spent as it is about to run for the first time and
//! given back if it never does, and its tool's circuit breaker, asked before every attempt and told how each one
//! ended. What each asks the store and how a reply reads is the station's (`budget`, `breaker`); the memory store
//! answers at once, a shared one through a ticket, from a local view of each breaker that spares a closed one any
//! round trip.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::breaker::{self, Admission, BreakerSaid, BreakerState, BreakerView, Outcome, Phase, Transition};
use crate::budget::{self, Limit, Refusal, Source, Spending};
use crate::ops::{Op, Reply};
use crate::registry::Tool;
use crate::result::ToolResult;
use crate::timer::after;

use super::asking::Resumed;
use super::call::{At, Slot, Spent};
use super::counters::{counters_of, ToolCounters};
use super::tickets::Wait;
use super::wire::Step;
use super::{mark, Engine};

impl Engine {
    /// The limits a call of `tool` is held to in this turn: the tool's (its own budget's and the executor's, worked
    /// out when it was registered), with the context's budget's when it has one.
    pub(super) fn budget_limits<'a>(&self, turn_id: u32, tool: &'a Tool) -> Cow<'a, [Limit]> {
        match &self.turns[&turn_id].policy.budget {
            None => Cow::Borrowed(&tool.limits),
            Some(context) => {
                let budgets = [(Source::Executor, self.options.budget.as_ref()), (Source::Tool, tool.spec.budget.as_ref()), (Source::Context, Some(context))];
                Cow::Owned(budget::limits(budgets, &tool.spec.name, budget::fixed_cost(tool.cost)))
            }
        }
    }

    /// Budgets for a call about to run for the first time: its per-turn limits, counted in the turn here, then
    /// what the store counts, returned for the call's plan. Err: a per-turn budget refuses the call (nothing is
    /// left spent).
    pub(super) fn spend_per_turn(&mut self, at: At) -> Result<Vec<Spending>, Box<ToolResult>> {
        let turn = self.turn(at);
        let tool = turn.slots[at.index].tool();
        if tool.limits.is_empty() && turn.policy.budget.is_none() {
            return Ok(Vec::new());
        }
        let tool = tool.clone();
        let limits = self.budget_limits(at.turn, &tool);
        let per_turn = limits.iter().take_while(|limit| limit.per_turn()).count();
        let turn = self.turns.live_mut(at.turn);
        let refused = limits[..per_turn].iter().find_map(|limit| {
            let used = turn.calls_run.get(limit.prefix.as_str()).copied().unwrap_or(0) as f64;
            budget::passes(used, limit.amount, limit.limit).then_some((limit, used))
        });
        if let Some((limit, used)) = refused {
            let slot = &mut turn.slots[at.index];
            let refusal = Refusal { amount: limit.amount, used, resets_in: None, by: Vec::new() };
            return Err(refuse_budget(&mut self.counters, slot, limit, refusal));
        }
        for limit in &limits[..per_turn] {
            match turn.calls_run.get_mut(limit.prefix.as_str()) {
                Some(n) => *n += 1,
                None => {
                    turn.calls_run.insert(limit.prefix.clone(), 1);
                }
            }
        }
        let slot = &mut turn.slots[at.index];
        let cost = slot.cost;
        slot.spent = Spent { made: (1 << per_turn) - 1, windows: Vec::new() };
        let key = &mut self.key;
        let spend = |at: usize| {
            let limit = &limits[at];
            limit.key_into(&turn.policy.fields, key);
            Spending { at, key: key.clone(), amount: limit.amount(cost), limit: limit.limit, window: limit.window }
        };
        Ok((per_turn..limits.len()).map(spend).collect())
    }

    /// The store's answer to one of the call's spendings: made (the slot keeps it, to give back if the call never
    /// runs), or a budget that refuses the call.
    pub(super) fn spent(&mut self, at: At, slot: &mut Slot, spending: &Spending, reply: &Reply, resumed: &mut Resumed) {
        match budget::Spent::of(reply, spending.window.is_some()) {
            budget::Spent::Made(window) => slot.spent.mark(spending.at, window),
            budget::Spent::Over(used, resets) if resumed.runs() => {
                let limit = self.budget_limits(at.turn, slot.tool())[spending.at].clone();
                let by = budget::holder(&limit.by, &self.turn(at).policy.fields);
                let refusal = Refusal { amount: spending.amount, used, resets_in: resets, by };
                *resumed = Resumed::Answered(refuse_budget(&mut self.counters, slot, &limit, refusal));
            }
            budget::Spent::Failed(e) if resumed.runs() => {
                slot.marks.push(mark("budget", "unavailable"));
                let fail = self.on_error().budget;
                *resumed = self.store_failed(slot, fail, "budget", &e);
            }
            _ => {}
        }
    }

    /// Gives back what a call that never ran spent of its budgets.
    pub(super) fn unspend_budgets(&mut self, at: At, now: Instant) {
        let Some(turn) = self.turns.get_mut(&at.turn) else { return };
        let slot = &mut turn.slots[at.index];
        let spent = std::mem::take(&mut slot.spent);
        if spent.made == 0 {
            return;
        }
        let (cost, tool) = (slot.cost, slot.tool().clone());
        let limits = self.budget_limits(at.turn, &tool);
        let turn = self.turns.live_mut(at.turn);
        let made = |line: usize| spent.made & (1 << line) != 0;
        let mut back = Vec::new();
        for (line, limit) in limits.iter().enumerate().filter(|(line, _)| made(*line)) {
            if limit.per_turn() {
                if let Some(n) = turn.calls_run.get_mut(limit.prefix.as_str()) {
                    *n = n.saturating_sub(1);
                }
            } else {
                limit.key_into(&turn.policy.fields, &mut self.key);
                let window = spent.windows.iter().find(|(l, _)| usize::from(*l) == line).map_or(0, |(_, w)| *w);
                back.push(budget::unspend(self.key.clone(), limit.amount(cost), window));
            }
        }
        for op in back {
            self.effect(op, now);
        }
    }

    /// The breaker before an attempt: Ok(true) when the store is to be asked. No store is asked of a breaker this
    /// process knows to be closed (the attempt is let through, counted): the memory store's is known here, and it is
    /// asked of any other; a shared store's as it last said, and it is not asked of one known to be open either
    /// (refused).
    pub(super) fn breaker_first(&mut self, at: At, now: Instant) -> Result<bool, Box<ToolResult>> {
        let slot = self.slot(at);
        let tool = slot.tool();
        if tool.breaker.is_none() {
            return Ok(false);
        }
        if self.shared.is_none() {
            let Some(admitted) = breaker::lets_through(self.store.peek_breaker(&tool.spec.name)) else { return Ok(true) };
            self.turns.slot_mut(at).admission = Some(admitted);
            return Ok(false);
        }
        let (admission, phase) = match self.breaker_views.get(&tool.spec.name) {
            Some((Phase::Open, until)) if now < *until => (Admission::Refused(until.saturating_duration_since(now)), Phase::Open),
            Some((Phase::Open | Phase::HalfOpen, _)) => return Ok(true),
            _ => (Admission::Counted(None), Phase::Closed),
        };
        let slot = self.turns.slot_mut(at);
        match admission {
            Admission::Refused(wait) => Err(refuse_attempt(&mut self.counters, slot, phase, wait)),
            admitted => {
                slot.admission = Some(admitted);
                Ok(false)
            }
        }
    }

    /// The store's answer to the breaker's admission: what it let the attempt do, or a refusal.
    pub(super) fn breaker_answered(&mut self, slot: &mut Slot, reply: &Reply, resumed: &mut Resumed, now: Instant, step: &mut Step) {
        let tool = slot.tool().clone();
        match self.breaker_said(&tool.spec.name, reply, now, step) {
            Ok(BreakerSaid { admission: Admission::Refused(wait), phase, .. }) => {
                if resumed.runs() {
                    *resumed = Resumed::Answered(refuse_attempt(&mut self.counters, slot, phase, wait));
                }
            }
            Ok(said) => slot.admission = Some(said.admission),
            Err(e) if resumed.runs() => {
                slot.marks.push(mark("breaker", "unavailable"));
                let fail = self.on_error().breaker;
                *resumed = self.store_failed(slot, fail, "breaker", &e);
            }
            Err(_) => {}
        }
    }

    /// How the attempt the breaker admitted ended; `ran`: whether its handler was started. Called when an attempt
    /// ends and when the call settles (an attempt admitted but never started says nothing of the backend).
    pub(super) fn attempt_outcome(&mut self, at: At, result: &ToolResult, ran: bool, now: Instant, step: &mut Step) {
        let Some(turn) = self.turns.get_mut(&at.turn) else { return };
        let slot = &mut turn.slots[at.index];
        let Some(admission) = slot.admission.take() else { return };
        let tool = slot.tool().clone();
        let config = tool.breaker.expect("an admitted call's tool has a breaker");
        let outcome = Outcome::of(result, ran);
        // A counted attempt that says nothing changes nothing (a shared store is spared the round trip).
        if matches!(admission, Admission::Counted(_)) && outcome == Outcome::Untested {
            return;
        }
        if let Some(op) = breaker::record_op(&tool.spec.name, &config, admission, outcome) {
            self.tell_breaker(&tool.spec.name, op, now, step);
        }
    }

    /// An outcome told to a tool's breaker: its answer updates this process's view of it, at once from the memory
    /// store, when its ticket is answered from a shared one.
    pub(super) fn tell_breaker(&mut self, tool: &str, op: Op, now: Instant, step: &mut Step) {
        if self.shared.is_some() {
            self.send(vec![op.for_host()], Wait::Breaker(tool.to_string()), now);
        } else {
            let reply = self.store.answer(op, now);
            let _ = self.breaker_said(tool, &reply, now, step);
        }
    }

    /// What the store said of a breaker: a shared store's becomes this process's view of it, and a change of phase
    /// is reported. Err: the store failed, and the view stays as it was.
    pub(super) fn breaker_said(&mut self, name: &str, reply: &Reply, now: Instant, step: &mut Step) -> Result<BreakerSaid, String> {
        let said = BreakerSaid::of(reply)?;
        // The memory store is asked every time, and keeps its breakers itself: only a shared store's are viewed.
        if self.shared.is_some() {
            let until = if said.phase == Phase::Open { after(now, said.open_for) } else { now };
            match self.breaker_views.get_mut(name) {
                Some(view) => *view = (said.phase, until),
                None => {
                    self.breaker_views.insert(name.to_string(), (said.phase, until));
                }
            }
        }
        if let Some(from) = said.from {
            self.breaker_changed(Transition { tool: name.to_string(), from, to: said.phase, calls: said.calls, failures: said.failures }, step);
        }
        Ok(said)
    }

    /// A breaker changed phase: the trace hears of it, and an opening is counted.
    fn breaker_changed(&mut self, transition: Transition, step: &mut Step) {
        tracing::debug!(tool = %transition.tool, from = transition.from.as_str(), to = transition.to.as_str(), "circuit breaker");
        if transition.to == Phase::Open {
            counters_of(&mut self.counters, &transition.tool).breaker_opened += 1;
        }
        step.breaker.push(transition);
    }

    /// A tool's breaker as the next call would find it, for `stats()` and `inspect()`: with the memory store, on its
    /// clock, with what its window counts; with a shared store, as this process last heard it. None for a tool
    /// without a breaker.
    pub(super) fn breaker_view(&self, tool: &str, now: Instant) -> Option<BreakerView> {
        let config = self.registry.get(tool)?.breaker?;
        if self.shared.is_none() {
            let now_ms = self.store.clock().ms(now);
            return Some(match self.store.peek_breaker(tool) {
                Some(state) => state.view(&config, now_ms),
                None => BreakerState::default().view(&config, now_ms),
            });
        }
        let (state, half_open_in_ms) = match self.breaker_views.get(tool) {
            None => (Phase::Closed, None),
            // An opening whose time is up lets a trial through at the next call.
            Some((Phase::Open, until)) if now >= *until => (Phase::HalfOpen, None),
            Some((Phase::Open, until)) => (Phase::Open, Some(until.saturating_duration_since(now).as_millis() as u64)),
            Some((phase, _)) => (*phase, None),
        };
        Some(BreakerView { state, calls: 0, failures: 0, half_open_in_ms })
    }
}

/// The result of a call a budget refuses, counted.
fn refuse_budget(counters: &mut BTreeMap<String, ToolCounters>, slot: &mut Slot, line: &Limit, refusal: Refusal) -> Box<ToolResult> {
    let name = slot.tool().spec.name.clone();
    slot.marks.push(mark("budget", "exceeded"));
    counters_of(counters, &name).budget_exceeded += 1;
    Box::new(budget::exceeded(slot.id.clone(), &name, line, refusal))
}

/// The result of an attempt the breaker refuses, counted.
fn refuse_attempt(counters: &mut BTreeMap<String, ToolCounters>, slot: &mut Slot, phase: Phase, wait: Duration) -> Box<ToolResult> {
    let name = slot.tool().spec.name.clone();
    slot.marks.push(mark("breaker", phase.as_str()));
    counters_of(counters, &name).breaker_refused += 1;
    Box::new(breaker::refused(slot.id.clone(), &name, phase, wait))
}
