//! Stations 6 and 7, dedup and cache, and single flight: work a call need not do, because it ran before or runs now.
//! What the stations ask the store and how their replies are read is theirs (`dedup`, `cache`); here is what the
//! engine does with each answer, and the flights identical calls share, in this process and, through the leases of
//! a shared store, across processes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cache::{self, Found, Kept, Lease};
use crate::dedup::{self, Counted, Mode, Verdict};
use crate::ops::Reply;
use crate::registry::Tool;
use crate::result::ToolResult;
use crate::shared;

use super::asking::{Asked, CountPlan, LookupPlan, Plan, Resumed};
use super::call::{At, DedupMark, Slot};
use super::counters::counters_of;
use super::wire::Step;
use super::{mark, Engine};

/// What a call's dedup and cache ask a shared store, asked in one ticket when the call is handed out.
pub(super) struct Deferred {
    pub(super) count: Option<CountPlan>,
    pub(super) cache_key: Option<String>,
}

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

impl Engine {
    /// Stations 6 and 7 for a call that may run. The memory store is asked at once, so that a repeat within one
    /// turn is seen as it arrives: false when the call is answered here (its slot holds its result); one that
    /// joined an identical call in flight stays runnable and waits for it. A shared store is asked when the call
    /// is handed out, in one ticket with all it needs then (its tokens too).
    pub(super) fn avoid(&mut self, at: At, now: Instant, step: &mut Step) -> bool {
        let (count, cache_key) = self.questions(at);
        if count.is_none() && cache_key.is_none() {
            return true;
        }
        if self.shared.is_some() {
            self.slot_mut(at).deferred = Some(Deferred { count, cache_key });
            return true;
        }
        let mut plan = Plan::new(Asked::Arriving);
        plan.count = count;
        plan.lookup = cache_key.map(|key| LookupPlan { key, flight: None });
        self.ask(at, plan, now, step)
    }

    /// What dedup counts for the call (in a session) and the cache entry it looks for.
    fn questions(&self, at: At) -> (Option<CountPlan>, Option<String>) {
        let turn = self.turn(at);
        let tool = turn.slots[at.index].tool();
        let name = tool.spec.name.as_str();
        let args = turn.args.get(&at.index).unwrap_or(&Value::Null);
        let fields = &turn.policy.fields;
        let counted = tool.dedup.mode != Mode::Off;
        // Only a shared store knows of rollbacks other processes counted in the session.
        let rollbacks = self.shared.is_some() && !tool.judge.is_empty();
        let session = (counted || rollbacks).then(|| fields.get("sessionId")).flatten();
        let count = session.map(|session| {
            let key = counted.then(|| tool.dedup.query_key(name, args));
            CountPlan { session: session.clone(), key, mode: tool.dedup.mode, rollbacks }
        });
        let cache_key = tool.cache.as_ref().map(|rule| {
            let scope = rule.scope.as_ref().map(|field| fields.get(field).map_or("", String::as_str));
            cache::key(name, args, scope)
        });
        (count, cache_key)
    }

    /// A handed-out call asks the shared store what it deferred: its count, and its cache entry (or the lease to
    /// fill it), with its tokens when it is the one to run. An identical call of this process already in flight is
    /// joined here, without asking the store for the entry.
    pub(super) fn ask_deferred(&mut self, at: At, deferred: Deferred, now: Instant, step: &mut Step) {
        let tool = self.tool_of(at);
        let name = tool.spec.name.as_str();
        self.take_place(name);
        let mut plan = Plan::new(Asked::HandedOut);
        plan.count = deferred.count;
        let leads = match deferred.cache_key {
            Some(key) => match self.join_or_lead(key, name, at) {
                role @ FlightRole::Joined(..) => {
                    role.assign(self.slot_mut(at));
                    false
                }
                FlightRole::Leads(key, flight) => {
                    // Marked a hit or a miss once the store says which.
                    plan.lookup = Some(LookupPlan { key: key.clone(), flight: Some(flight) });
                    self.slot_mut(at).fills = Some((key, flight));
                    true
                }
            },
            None => true,
        };
        // Its tokens come in the same ticket only when nothing in it can answer the call instead (a cache hit, a
        // refused or reused repeat): a call that does not run takes no token, even for a moment. Otherwise they
        // come once it is known to run.
        let counts_key = plan.count.as_ref().is_some_and(|c| c.key.is_some());
        let may_answer = plan.lookup.is_some() || (counts_key && matches!(tool.dedup.mode, Mode::Refuse | Mode::Reuse));
        // A call held to budgets or a breaker asks for its tokens with them, once it is known to run (`run_now`).
        let guarded = tool.breaker.is_some() || tool.spec.budget.is_some() || self.options.budget.is_some() || self.turn(at).policy.budget.is_some();
        if leads && !may_answer && !guarded {
            plan.takes = Some(self.wants(at, now));
        }
        // Joined an identical call of this process with nothing to count: it waits for that call.
        if plan.count.is_none() && !leads {
            return;
        }
        self.ask(at, plan, now, step);
    }

    /// Joins the flight identical calls may join, or opens one the call will run.
    pub(super) fn join_or_lead(&mut self, key: String, tool: &str, at: At) -> FlightRole {
        if let Some(&id) = self.flights.get(&key) {
            self.flight_waiters.entry(id).or_default().push(at);
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

    /// The store's count of the call's query in its session: dedup decides whether it runs.
    pub(super) fn counted(&mut self, at: At, slot: &mut Slot, count: &CountPlan, reply: &Reply) -> Resumed {
        match Counted::of(reply) {
            Err(e) => {
                let on_error = self.on_error();
                let (fail, station) = match count.key {
                    Some(_) => {
                        slot.marks.push(mark("dedup", "unavailable"));
                        (on_error.dedup, "dedup")
                    }
                    None => (on_error.sessions, "session"),
                };
                self.store_failed(slot, fail, station, &e)
            }
            Ok(counted) => {
                if let (true, Some(n)) = (count.rollbacks, counted.rollbacks) {
                    // The session's count as the store has it: later turns may have run in other processes.
                    *self.rollbacks.get_or_insert_mut(count.session.clone(), || 0) = n;
                }
                match &count.key {
                    Some(key) => self.repeated(at, slot, &count.session, key, counted).map_or(Resumed::Run, Resumed::Answered),
                    None => Resumed::Run,
                }
            }
        }
    }

    /// Dedup's verdict on a query counted before in the session: a refusal, the earlier result reused, or None (the
    /// call goes on, marked as a repeat or a first). A result is boxed where it is made: it is large to move.
    fn repeated(&mut self, at: At, slot: &mut Slot, session: &str, key: &str, counted: Counted) -> Option<Box<ToolResult>> {
        let tool = slot.tool().clone();
        let name = tool.spec.name.as_str();
        let earlier = counted.earlier;
        let verdict = dedup::verdict(tool.dedup.mode, earlier);
        if verdict != Verdict::First {
            counters_of(&mut self.counters, name).duplicates += 1;
        }
        match verdict {
            Verdict::First => slot.marks.push(mark("dedup", "first")),
            Verdict::Refused => {
                slot.marks.push(mark("dedup", "refused"));
                let mut result = Box::new(dedup::refused(slot.id.clone(), name, earlier));
                result.metadata.repeats = Some(earlier);
                return Some(result);
            }
            Verdict::Reuse => {
                if let Some(mut result) = counted.reused.and_then(|text| Kept::revive(&text, slot.id.clone(), name.to_string())).map(Box::new) {
                    slot.marks.push(mark("dedup", "reused"));
                    result.metadata.repeats = Some(earlier);
                    result.metadata.reused = true;
                    self.hand_over(&result, at);
                    return Some(result);
                }
                slot.marks.push(mark("dedup", "repeat"));
            }
            Verdict::Repeat => slot.marks.push(mark("dedup", "repeat")),
        }
        slot.dedup = Some(DedupMark { session: session.to_string(), key: key.to_string(), earlier });
        None
    }

    /// The store's answer to the call's cache lookup: a hit answers it; a miss leaves it to run, to wait for the
    /// process that holds the lease, or (memory) to join or open this process's flight.
    pub(super) fn looked_up(&mut self, at: At, slot: &mut Slot, lookup: &LookupPlan, reply: &Reply, polled: bool, resumed: &mut Resumed) {
        let (found, lease) = Found::of(reply);
        if let (Lease::Taken, Some(flight)) = (lease, lookup.flight) {
            self.shared_mut().leases.insert(flight, lookup.key.clone());
        }
        if !resumed.runs() {
            return;
        }
        let tool = slot.tool().clone();
        let name = tool.spec.name.as_str();
        *resumed = match found {
            Found::Failed(e) => {
                slot.marks.push(mark("cache", "unavailable"));
                if !polled {
                    counters_of(&mut self.counters, name).cache_misses += 1;
                }
                let fail = self.on_error().cache;
                self.store_failed(slot, fail, "cache", &e)
            }
            Found::Hit(text) => match self.cache_hit(at, slot, &text) {
                Some(result) => Resumed::Answered(result),
                None => Resumed::Run,
            },
            Found::Miss => {
                let held = matches!(lease, Lease::Held(_));
                if !polled {
                    counters_of(&mut self.counters, name).cache_misses += 1;
                    if lookup.flight.is_some() {
                        slot.marks.push(mark("cache", "miss"));
                    }
                } else if !held {
                    slot.marks.push(mark("cache", "took_over"));
                }
                match lease {
                    Lease::Held(left) => {
                        if !polled {
                            slot.marks.push(mark("cache", "waits_elsewhere"));
                        }
                        Resumed::Held(left)
                    }
                    _ => Resumed::Run,
                }
            }
        };
        // A call that joins runs in its turn's schedule like any call, but when handed out it waits for the flight.
        if let (true, None) = (resumed.runs(), lookup.flight) {
            self.join_or_lead(lookup.key.clone(), name, at).assign(slot);
        }
    }

    /// A cached entry as this call's result, counted as a hit; None when it cannot be read (then it is a miss).
    fn cache_hit(&mut self, at: At, slot: &mut Slot, text: &str) -> Option<Box<ToolResult>> {
        let name = slot.tool().spec.name.clone();
        let counters = counters_of(&mut self.counters, &name);
        let Some(mut result) = Kept::revive(text, slot.id.clone(), name).map(Box::new) else {
            counters.cache_misses += 1;
            return None;
        };
        counters.cache_hits += 1;
        slot.marks.push(mark("cache", "hit"));
        result.cached = true;
        self.hand_over(&result, at);
        Some(result)
    }

    /// A call its turn's schedule hands out. One that joined an identical call in flight waits for it, holding
    /// its tool place; if that flight has ended meanwhile, it answers from the cache, or joins or opens the
    /// flight that is current now.
    pub(super) fn launch(&mut self, at: At, now: Instant, step: &mut Step) {
        let slot = self.slot_mut(at);
        slot.scheduled = true;
        let name = slot.tool().spec.name.clone();
        if slot.pending.is_some() {
            // Still waiting on the host: it holds its place in the schedule and under maxConcurrency.
            self.take_place(&name);
            return;
        }
        if let Some(deferred) = slot.deferred.take() {
            return self.ask_deferred(at, deferred, now, step);
        }
        // Joined at arrival, which only the memory store's calls do (a shared store's join as they are handed out).
        if let Some((key, id)) = slot.joined.take() {
            if self.flight_waiters.get(&id).is_some_and(|w| w.contains(&at)) {
                self.slot_mut(at).joined = Some((key, id));
                self.take_place(&name);
                return;
            }
            let entry = self.store.answer(cache::lookup(key.as_str(), None), now);
            let hit = match Found::of(&entry).0 {
                Found::Hit(text) => Kept::revive(&text, self.slot(at).id.clone(), name.clone()),
                _ => None,
            };
            if let Some(mut result) = hit {
                result.cached = true;
                self.slot_mut(at).marks.push(mark("cache", "hit"));
                self.hand_over(&result, at);
                return self.settle(at, Box::new(result), now, step);
            }
            let role = self.join_or_lead(key, &name, at);
            let waits = matches!(role, FlightRole::Joined(..));
            role.assign(self.slot_mut(at));
            if waits {
                self.take_place(&name);
                return;
            }
        }
        self.run_now(at, now, step);
    }

    /// A flight ended. What its handler answered goes to every identical call waiting for it (one its schedule
    /// has not handed out yet leaves the schedule). A flight that answered nothing others can use (refused,
    /// timed out, ended with its own turn) is taken over by the first waiting call its schedule has handed out;
    /// the others wait on it, or look again when their schedule hands them out.
    pub(super) fn hand_on_flight(&mut self, (key, id): (String, u32), mut waiters: Vec<At>, result: &ToolResult, answered: bool, now: Instant, step: &mut Step) {
        let handed_out = |engine: &Self, at: At| engine.open_slot(at).is_some_and(|slot| slot.scheduled);
        if answered {
            for at in waiters {
                let was_handed_out = handed_out(self, at);
                let turn = self.turn_mut(at);
                if !was_handed_out {
                    turn.schedule.remove(at.index);
                }
                let slot = &mut turn.slots[at.index];
                let name = slot.tool().spec.name.clone();
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
                self.hand_over(&copy, at);
                self.settle(at, Box::new(copy), now, step);
            }
        } else if let Some(pos) = waiters.iter().position(|&w| handed_out(self, w) && self.slot(w).pending.is_none()) {
            // (One still waiting on its own ticket, its count, goes on waiting: it looks for the flight once answered.)
            let at = waiters.remove(pos);
            let slot = self.slot_mut(at);
            let name = slot.tool().spec.name.clone();
            slot.joined = None;
            slot.fills = Some((key.clone(), id));
            slot.marks.push(mark("cache", "took_over"));
            self.flight_waiters.insert(id, waiters);
            self.flights.entry(key.clone()).or_insert(id);
            if self.shared.is_some() {
                // Another process may hold the lease (or have answered) by now: it asks first, in its place.
                self.look_again(at, key, id, now, step);
            } else {
                self.release_place(&name); // taken again when it starts
                self.run_now(at, now, step);
            }
        }
    }

    /// A call waiting for an identical call of another process looks again: the entry, or the lease if that
    /// process let it go. It stops waiting after its own time limit.
    pub(super) fn poll_due(&mut self, at: At, now: Instant, step: &mut Step) {
        let Some(slot) = self.open_slot(at) else { return };
        let (Some((since, _, _)), None) = (slot.polling, &slot.result) else { return };
        let tool = slot.tool().clone();
        let fills = slot.fills.clone();
        let waited = now.saturating_duration_since(since);
        // As long as a lease of its own would last: by then the other's (taken earlier) has ended, unless that
        // process holds the tool to longer limits.
        let limit_ms = waiter_limit_ms(&tool, self.waits_ms(at, now));
        if waited >= Duration::from_millis(limit_ms) {
            let slot = self.slot_mut(at);
            slot.polling = None;
            slot.marks.push(mark("cache", "waited_too_long"));
            let result = shared::waited_too_long(slot.id.clone(), &tool.spec.name, limit_ms);
            return self.settle_waiting(at, Box::new(result), now, step);
        }
        let Some((key, flight)) = fills else { return };
        self.look_again(at, key, flight, now, step);
    }

    /// A flight's leader asks for the entry, or the lease, again: it keeps the place it holds while it waits.
    fn look_again(&mut self, at: At, key: String, flight: u32, now: Instant, step: &mut Step) {
        let mut plan = Plan::new(Asked::HandedOut);
        plan.lookup = Some(LookupPlan { key, flight: Some(flight) });
        self.ask(at, plan, now, step);
    }

    /// How long in all a call may wait for its tokens, in ms.
    pub(super) fn waits_ms(&self, at: At, now: Instant) -> u64 {
        self.wants(at, now).iter().map(|want| want.max_wait.as_millis()).sum::<u128>().min(u128::from(u64::MAX)) as u64
    }

    /// A flight's name on the shared store's lease of its key (unique across processes and restarts).
    pub(super) fn lease_owner(&self, flight: u32) -> String {
        self.shared.as_ref().expect("leases are a shared store's").owner_of(flight)
    }

    /// A leader about to wait `backoff` before its next attempt keeps its lease that long, and that attempt's.
    pub(super) fn renew_lease(&mut self, at: At, backoff: Duration, now: Instant) {
        let Some(shared) = self.shared.as_ref() else { return };
        let slot = self.slot(at);
        let Some((key, flight)) = slot.fills.clone().filter(|(_, id)| shared.leases.contains_key(id)) else { return };
        let lease = lease_ms(slot.tool(), self.waits_ms(at, now)).saturating_add(backoff.as_millis() as u64);
        let owner = self.lease_owner(flight);
        self.effect(cache::lookup(key, Some((owner, lease))), now);
    }

    /// A flight's result kept for identical calls; with a shared store, the flight's lease goes with it.
    pub(super) fn keep_result(&mut self, key: String, kept: Arc<str>, ttl: Duration, flight: u32, now: Instant) {
        let owner = self.shared.as_mut().and_then(|shared| shared.leases.remove(&flight)).map(|_| self.lease_owner(flight));
        self.effect(cache::put(key, kept, ttl, owner), now);
    }

    /// A query's result kept in its session for `reuse`.
    pub(super) fn keep_reused(&mut self, session: &str, key: &str, kept: Arc<str>, now: Instant) {
        let op = dedup::keep(session, key, kept, self.options.dedup.session_ttl_ms);
        self.effect(op, now);
    }

    /// A flight that ended without being handed on lets its lease go (one handed to a waiter keeps it).
    pub(super) fn release_lease(&mut self, key: &str, flight: u32, now: Instant) {
        let still_flying = self.flights.get(key) == Some(&flight);
        let Some(shared) = self.shared.as_mut() else { return };
        if still_flying || shared.leases.remove(&flight).is_none() {
            return;
        }
        let owner = self.lease_owner(flight);
        self.effect(cache::release(key.to_string(), owner), now);
    }
}

/// How long a leader's lease lasts for one attempt: its rate-limit waits, its time limit and a margin. A retry
/// renews it for its backoff and its own attempt.
pub(super) fn lease_ms(tool: &Tool, waits_ms: u64) -> u64 {
    tool.timeout_ms.saturating_add(waits_ms).saturating_add(shared::LEASE_MARGIN_MS)
}

/// How long a call waits for an identical call another process runs: as long as that call may take with all its
/// retries (its processes hold the tool to the same limits).
fn waiter_limit_ms(tool: &Tool, waits_ms: u64) -> u64 {
    let retries = if tool.retry.max_retries > 0 { tool.retry.max_elapsed_ms } else { 0 };
    lease_ms(tool, waits_ms).saturating_add(retries)
}
