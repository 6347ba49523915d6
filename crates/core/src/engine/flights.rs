//! Stations 6 and 7, dedup and cache, and single flight: work a call need not do, because it ran before or runs now.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cache::{self, Kept};
use crate::dedup::Mode;
use crate::fields::Fields;
use crate::registry::Tool;
use crate::result::ToolResult;
use crate::keys;

use super::{Engine, mark};
use super::wire::Step;
use super::call::Slot;
use super::counters::counters_of;

/// What a cache miss does about identical calls: run the flight, or wait on one already running.
pub(super) enum FlightRole {
    Leads(String, u32),
    Joined(String, u32),
}

impl FlightRole {
    pub(super) fn assign(self, slot: &mut Slot) {
        match self {
            FlightRole::Leads(key, id) => {
                slot.marks.push(mark("cache", "miss"));
                slot.fills = Some((key, id));
            }
            FlightRole::Joined(key, id) => {
                slot.marks.push(mark("cache", "joined"));
                slot.joined = Some((key, id));
            }
        }
    }
}

/// Where a session keeps a query's last result for `reuse`: apart from the cache, in the session's own keys.
pub(super) fn reuse_key(session: &str, query_key: &str) -> String {
    format!("\u{2}{session}{}{query_key}", keys::SEP)
}

impl Engine {
    /// Stations 6 and 7, dedup and cache: work a call need not do. False when the call is answered here (the slot
    /// holds its result); a call that joined an identical call in flight stays runnable and waits for it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn avoid(&mut self, turn_id: u32, index: usize, slot: &mut Slot, tool: &Tool, args: &Value, fields: &Fields, now: Instant) -> bool {
        if self.shared.is_some() {
            return self.defer(slot, tool, args, fields);
        }
        let name = tool.spec.name.as_str();
        if let (Some(session), true) = (fields.get("sessionId"), tool.dedup.mode != Mode::Off) {
            let key = tool.dedup.query_key(name, args);
            let ttl = Duration::from_millis(self.options.dedup.session_ttl_ms);
            // Counted on arrival, so that a repeat within one turn is seen; a call that never runs gives it back.
            let earlier = self.store.increment(session, &key, ttl, now) - 1;
            let mode = tool.dedup.mode;
            if earlier > 0 && mode == Mode::Refuse {
                self.store.decrement(session, &key);
            }
            let reused = (earlier > 0 && mode == Mode::Reuse).then(|| self.store.get(&reuse_key(session, &key), now)).flatten();
            if let Some(result) = self.repeated(slot, tool, session, &key, earlier, reused.as_deref(), fields) {
                slot.result = Some(Box::new(result));
                return false;
            }
        }
        let Some(rule) = &tool.cache else { return true };
        let scope = rule.scope.as_ref().map(|field| fields.get(field).map_or("", String::as_str));
        let key = cache::key(name, args, scope);
        match self.store.get(&key, now) {
            Some(text) => {
                if let Some(result) = self.cache_hit(slot, name, &text, fields) {
                    slot.result = Some(Box::new(result));
                    return false;
                }
            }
            None => counters_of(&mut self.counters, name).cache_misses += 1,
        }
        // A call that joins runs in its turn's schedule like any call, but when handed out it waits for the flight.
        self.join_or_lead(key, name, turn_id, index).assign(slot);
        true
    }

    /// Joins the flight identical calls may join, or opens one the call will run.
    pub(super) fn join_or_lead(&mut self, key: String, tool: &str, turn_id: u32, index: usize) -> FlightRole {
        if let Some(&id) = self.flights.get(&key) {
            self.flight_waiters.entry(id).or_default().push((turn_id, index));
            counters_of(&mut self.counters, tool).shared_flights += 1;
            FlightRole::Joined(key, id)
        } else {
            let id = self.next_flight;
            self.next_flight = self.next_flight.wrapping_add(1).max(1);
            self.flights.insert(key.clone(), id);
            self.flight_waiters.insert(id, Vec::new());
            FlightRole::Leads(key, id)
        }
    }

    /// A call its turn's schedule hands out. One that joined an identical call in flight waits for it, holding
    /// its tool place; if that flight has ended meanwhile, it answers from the cache, or joins or opens the
    /// flight that is current now.
    pub(super) fn launch(&mut self, turn_id: u32, index: usize, now: Instant, step: &mut Step) {
        let slot = &mut self.turns.get_mut(&turn_id).expect("a live turn").slots[index];
        slot.scheduled = true;
        let name = slot.tool.as_ref().expect("a scheduled call has a tool").spec.name.clone();
        if slot.pending.is_some() {
            // Still waiting on the host: it holds its place in the schedule and under maxConcurrency.
            self.take_place(&name);
            return;
        }
        if let Some(deferred) = slot.deferred.take() {
            return self.ask_deferred(turn_id, index, deferred, now);
        }
        if let Some((key, id)) = slot.joined.take() {
            if self.flight_waiters.get(&id).is_some_and(|w| w.contains(&(turn_id, index))) {
                slot.joined = Some((key, id));
                self.take_place(&name);
                return;
            }
            let hit = self.store.get(&key, now).and_then(|text| Kept::revive(&text, slot.id.clone(), name.clone()));
            if let Some(mut result) = hit {
                result.cached = true;
                slot.marks.push(mark("cache", "hit"));
                let turn = self.turns.get(&turn_id).expect("a live turn");
                self.hand_over(&result, &turn.policy.fields);
                self.settle(turn_id, index, Box::new(result), now, step);
                return;
            }
            let role = self.join_or_lead(key, &name, turn_id, index);
            let slot = &mut self.turns.get_mut(&turn_id).expect("a live turn").slots[index];
            if matches!(role, FlightRole::Joined(..)) {
                role.assign(slot);
                self.take_place(&name);
                return;
            }
            role.assign(slot);
        }
        self.run_now(turn_id, index, now, step);
    }

    /// A flight ended. What its handler answered goes to every identical call waiting for it (one its schedule
    /// has not handed out yet leaves the schedule). A flight that answered nothing others can use (refused,
    /// timed out, ended with its own turn) is taken over by the first waiting call its schedule has handed out;
    /// the others wait on it, or look again when their schedule hands them out.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn hand_on_flight(&mut self, key: String, id: u32, mut waiters: Vec<(u32, usize)>, result: &ToolResult, answered: bool, now: Instant, step: &mut Step) {
        let handed_out = |engine: &Self, (t, i): (u32, usize)| engine.turns.get(&t).is_some_and(|turn| turn.slots[i].scheduled);
        if answered {
            for (t, i) in waiters {
                let was_handed_out = handed_out(self, (t, i));
                let turn = self.turns.get_mut(&t).expect("a waiter's turn is live");
                if !was_handed_out {
                    turn.schedule.remove(i);
                }
                let slot = &mut turn.slots[i];
                let name = slot.tool.as_ref().expect("a waiter has a tool").spec.name.clone();
                let mut copy = result.clone();
                copy.call_id = slot.id.clone();
                copy.metadata.sent = None; // this call's handler sent nothing
                copy.metadata.shared_flight = true;
                copy.metadata.attempt_errors.clear();
                slot.joined = None;
                slot.marks.push(mark("invoke", "shared"));
                if was_handed_out {
                    self.release_place(&name);
                }
                let turn = self.turns.get(&t).expect("a waiter's turn is live");
                self.hand_over(&copy, &turn.policy.fields);
                self.settle(t, i, Box::new(copy), now, step);
            }
        } else if let Some(pos) = waiters.iter().position(|&w| handed_out(self, w) && self.turns[&w.0].slots[w.1].pending.is_none()) {
            // (One still waiting on its own ticket, its count, goes on waiting: it looks for the flight once answered.)
            let (t, i) = waiters.remove(pos);
            let slot = &mut self.turns.get_mut(&t).expect("a waiter's turn is live").slots[i];
            let name = slot.tool.as_ref().expect("a waiter has a tool").spec.name.clone();
            slot.joined = None;
            slot.fills = Some((key.clone(), id));
            slot.marks.push(mark("cache", "took_over"));
            self.flight_waiters.insert(id, waiters);
            self.flights.entry(key.clone()).or_insert(id);
            if self.shared.is_some() {
                // Another process may hold the lease (or have answered) by now: it asks first, in its place.
                self.look_again(t, i, key, id, now);
            } else {
                self.release_place(&name); // taken again when it starts
                self.run_now(t, i, now, step);
            }
        }
    }
}
