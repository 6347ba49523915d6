//! Station 8's guards before the rate limit: a call's budgets, spent as it is about to run for the first time and
//! given back if it never does, and its tool's circuit breaker, asked before every attempt and told how each one
//! ended. With the memory store both are decided here; with a shared store the store decides (see `remote`), from a
//! local view of each breaker that spares a closed one any round trip.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::{counters_of, mark, Engine, Slot, Spent, Step, ToolCounters};
use crate::breaker::{self, Admission, Outcome, Phase, Transition};
use crate::budget::{self, Limit, Source};
use crate::registry::Tool;
use crate::result::ToolResult;
use crate::shared::Spending;
use crate::store::Spend;

/// What the breaker said to an attempt about to run.
pub(super) enum Admitted {
    /// It may run (the slot holds its admission, when its tool has a breaker).
    Yes,
    /// The shared store decides: the breaker is not closed as far as this process knows.
    AskStore,
}

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

    /// Whose budget `limit` counts in this turn, for a refusal.
    pub(super) fn holder(&self, turn_id: u32, limit: &Limit) -> Vec<(String, String)> {
        budget::holder(&limit.by, &self.turns[&turn_id].policy.fields)
    }

    /// Budgets for a call about to run for the first time: its per-turn limits, counted in the turn, then the
    /// store's, spent here in the memory store (each key written into one buffer: nothing is allocated). With a
    /// shared store, the store's spendings are returned for the call's ticket. Err: the budget that refuses the call
    /// (nothing is left spent).
    pub(super) fn spend_budgets(&mut self, turn_id: u32, index: usize, now: Instant) -> Result<Vec<Spending>, Box<ToolResult>> {
        let turn = &self.turns[&turn_id];
        let tool = turn.slots[index].tool.as_ref().expect("a scheduled call has a tool");
        if tool.limits.is_empty() && turn.policy.budget.is_none() {
            return Ok(Vec::new());
        }
        let tool = tool.clone();
        let limits = self.budget_limits(turn_id, &tool);
        let per_turn = limits.iter().take_while(|limit| limit.per_turn()).count();
        let turn = self.turns.get_mut(&turn_id).expect("a live turn");
        let refused = limits[..per_turn].iter().find_map(|limit| {
            let used = turn.calls_run.get(limit.prefix.as_str()).copied().unwrap_or(0) as f64;
            budget::passes(used, limit.amount, limit.limit).then_some((limit, used))
        });
        if let Some((limit, used)) = refused {
            let slot = &mut turn.slots[index];
            return Err(refuse_budget(&mut self.counters, slot, limit, limit.amount, used, None, Vec::new()));
        }
        for limit in &limits[..per_turn] {
            match turn.calls_run.get_mut(limit.prefix.as_str()) {
                Some(n) => *n += 1,
                None => {
                    turn.calls_run.insert(limit.prefix.clone(), 1);
                }
            }
        }
        let slot = &mut turn.slots[index];
        let cost = slot.cost;
        slot.spent = Spent { made: (1 << per_turn) - 1, windows: Vec::new() };
        if self.shared.is_some() {
            let spend = |at: usize| {
                let limit = &limits[at];
                let mut key = String::new();
                limit.key_into(&turn.policy.fields, &mut key);
                Spending { at, key, amount: limit.amount(cost), limit: limit.limit, window: limit.window }
            };
            return Ok((per_turn..limits.len()).map(spend).collect());
        }
        let ttl = Duration::from_millis(self.options.dedup.session_ttl_ms);
        let mut key = std::mem::take(&mut self.key);
        let mut over = None;
        for (at, limit) in limits.iter().enumerate().skip(per_turn) {
            limit.key_into(&self.turns[&turn_id].policy.fields, &mut key);
            let amount = limit.amount(cost);
            match self.store.spend(&key, amount, limit.limit, limit.window, ttl, now) {
                Spend::Spent { window } => self.turns.get_mut(&turn_id).expect("a live turn").slots[index].spent.mark(at, window),
                Spend::Over { used, resets_in } => {
                    over = Some((limit, amount, used, resets_in));
                    break;
                }
            }
        }
        self.key = key;
        let Some((limit, amount, used, resets_in)) = over else { return Ok(Vec::new()) };
        let by = self.holder(turn_id, limit);
        let slot = &mut self.turns.get_mut(&turn_id).expect("a live turn").slots[index];
        let refused = refuse_budget(&mut self.counters, slot, limit, amount, used, resets_in, by);
        self.unspend_budgets(turn_id, index);
        Err(refused)
    }

    /// Gives back what a call that never ran spent of its budgets.
    pub(super) fn unspend_budgets(&mut self, turn_id: u32, index: usize) {
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        let slot = &mut turn.slots[index];
        let spent = std::mem::take(&mut slot.spent);
        if spent.made == 0 {
            return;
        }
        let (cost, tool) = (slot.cost, slot.tool.clone().expect("a call that spent has a tool"));
        let limits = self.budget_limits(turn_id, &tool);
        let turn = self.turns.get_mut(&turn_id).expect("a live turn");
        let made = |at: usize| spent.made & (1 << at) != 0;
        let mut back = Vec::new();
        for (at, limit) in limits.iter().enumerate().filter(|(at, _)| made(*at)) {
            if limit.per_turn() {
                if let Some(n) = turn.calls_run.get_mut(limit.prefix.as_str()) {
                    *n = n.saturating_sub(1);
                }
            } else {
                let mut key = String::new();
                limit.key_into(&turn.policy.fields, &mut key);
                let window = spent.windows.iter().find(|(line, _)| usize::from(*line) == at).map_or(0, |(_, w)| *w);
                back.push((key, limit.amount(cost), window));
            }
        }
        for (key, amount, window) in back {
            self.unspend(key, amount, window);
        }
    }

    /// The breaker for an attempt about to run: let through (a trial, when half-open), refused, or, with a shared
    /// store and a breaker this process does not know to be closed, for the store to decide.
    pub(super) fn admit_attempt(&mut self, turn_id: u32, index: usize, now: Instant, step: &mut Step) -> Result<Admitted, Box<ToolResult>> {
        let slot = &mut self.turns.get_mut(&turn_id).expect("a live turn").slots[index];
        let tool = slot.tool.as_deref().expect("a scheduled call has a tool");
        let Some(config) = tool.breaker else { return Ok(Admitted::Yes) };
        let name = tool.spec.name.as_str();
        let (admission, phase, changed) = if self.shared.is_some() {
            match self.breaker_views.get(name) {
                Some((Phase::Open, until)) if now < *until => (Admission::Refused(until.saturating_duration_since(now)), Phase::Open, None),
                Some((Phase::Open | Phase::HalfOpen, _)) => return Ok(Admitted::AskStore),
                _ => (Admission::Counted(None), Phase::Closed, None),
            }
        } else {
            let clock = self.store.clock();
            let state = self.store.breaker(name);
            let (admission, changed) = state.admit(name, &config, Duration::from_millis(tool.timeout_ms), || clock.ms(now));
            (admission, state.phase(), changed)
        };
        let refused = match admission {
            Admission::Refused(wait) => Some(refuse_attempt(&mut self.counters, slot, phase, wait)),
            admitted => {
                slot.admission = Some(admitted);
                None
            }
        };
        if let Some(transition) = changed {
            self.breaker_changed(transition, step);
        }
        refused.map_or(Ok(Admitted::Yes), Err)
    }

    /// How the attempt the breaker admitted ended; `ran`: whether its handler was started. Called when an attempt
    /// ends and when the call settles (an attempt admitted but never started says nothing of the backend).
    pub(super) fn attempt_outcome(&mut self, turn_id: u32, index: usize, result: &ToolResult, ran: bool, now: Instant, step: &mut Step) {
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        let slot = &mut turn.slots[index];
        let Some(admission) = slot.admission.take() else { return };
        let tool = slot.tool.as_deref().expect("an admitted call has a tool");
        let config = tool.breaker.expect("an admitted call's tool has a breaker");
        let outcome = Outcome::of(result, ran);
        if self.shared.is_some() {
            // A counted attempt that says nothing needs no round trip; a trial's place goes back in any case.
            if !(matches!(admission, Admission::Counted(_)) && outcome == Outcome::Untested) {
                let name = tool.spec.name.clone();
                self.share_outcome(&name, &config, admission, outcome, now);
            }
            return;
        }
        let now_ms = self.store.clock().ms(now);
        if let Some(transition) = self.store.breaker(&tool.spec.name).record(&tool.spec.name, &config, admission, outcome, now_ms) {
            self.breaker_changed(transition, step);
        }
    }

    /// A breaker changed phase: the trace hears of it, and an opening is counted.
    pub(super) fn breaker_changed(&mut self, transition: Transition, step: &mut Step) {
        tracing::debug!(tool = %transition.tool, from = transition.from.as_str(), to = transition.to.as_str(), "circuit breaker");
        if transition.to == Phase::Open {
            counters_of(&mut self.counters, &transition.tool).breaker_opened += 1;
        }
        step.breaker.push(transition);
    }

    /// Each tool's breaker phase, for the stats: the memory store's, or what the shared store last said.
    pub(super) fn breaker_phase(&self, tool: &str, now: Instant) -> Option<Phase> {
        self.registry.get(tool)?.breaker?;
        if self.shared.is_some() {
            return Some(match self.breaker_views.get(tool) {
                None => Phase::Closed,
                // An opening whose time is up lets a trial through at the next call.
                Some((Phase::Open, until)) if now >= *until => Phase::HalfOpen,
                Some((phase, _)) => *phase,
            });
        }
        Some(match self.store.peek_breaker(tool) {
            None => Phase::Closed,
            Some(state) => state.phase_at(self.store.clock().ms(now)),
        })
    }
}

/// The result of a call a budget refuses (it would add `amount`; `by`: whose budget), counted.
#[allow(clippy::too_many_arguments)]
pub(super) fn refuse_budget(counters: &mut BTreeMap<String, ToolCounters>, slot: &mut Slot, line: &Limit, amount: f64, used: f64, resets_in: Option<Duration>, by: Vec<(String, String)>) -> Box<ToolResult> {
    let name = slot.tool.as_ref().expect("a scheduled call has a tool").spec.name.clone();
    slot.marks.push(mark("budget", "exceeded"));
    counters_of(counters, &name).budget_exceeded += 1;
    Box::new(budget::exceeded(slot.id.clone(), &name, line, amount, used, resets_in, by))
}

/// The result of an attempt the breaker refuses, counted.
pub(super) fn refuse_attempt(counters: &mut BTreeMap<String, ToolCounters>, slot: &mut Slot, phase: Phase, wait: Duration) -> Box<ToolResult> {
    let name = slot.tool.as_ref().expect("a scheduled call has a tool").spec.name.clone();
    slot.marks.push(mark("breaker", phase.as_str()));
    counters_of(counters, &name).breaker_refused += 1;
    Box::new(breaker::refused(slot.id.clone(), &name, phase, wait))
}

