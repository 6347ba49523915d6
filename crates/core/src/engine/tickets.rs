//! The tickets of a store shared between processes: the operations of a call's plan go out in one ticket the host
//! runs (see `shared`), the replies come back whole or in part, each ticket has a deadline, and what a ticket took
//! for a call that no longer waits on it (a token, a lease, a count) goes back when it is answered.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustc_hash::FxHashMap;

use crate::bounded::Bounded;
use crate::breaker::{self, Outcome};
use crate::budget::{self, Spent};
use crate::cache::{self, Found, Lease};
use crate::dedup;
use crate::ops::{self, Op, Reply};
use crate::ratelimit::{self, Token};
use crate::registry::Tool;
use crate::result::ToolResult;
use crate::shared::{self, SharedStoreOptions};
use crate::timer::after;

use super::asking::{Plan, Replies};
use super::call::{At, Slot};
use super::counters::StoreStats;
use super::wire::{Step, StoreTicket};
use super::{Alarm, Engine};

pub(super) struct Shared {
    pub(super) options: SharedStoreOptions,
    /// Tickets not answered yet: what waits on each, and its deadline.
    waits: FxHashMap<u32, (Wait, Instant)>,
    /// The replies of tickets answered in part so far (None: that operation's node has not answered yet).
    partial: FxHashMap<u32, Vec<Option<Reply>>>,
    /// Tickets past their deadline, with the operations still out: a late answer still gives back what they took (a
    /// token, a lease). Those answered in time were their call's.
    late: Bounded<u32, (Wait, Vec<bool>)>,
    /// Late answers that came while their call still ran: what they took goes back (or not) when it settles.
    held_answers: FxHashMap<u32, (Wait, Vec<Reply>)>,
    outbox: Vec<StoreTicket>,
    effects: Vec<Op<'static>>,
    /// This engine's name on the leases it takes (unique across processes and restarts).
    owner: String,
    /// Flights holding the lease of their cache key, by flight id.
    pub(super) leases: FxHashMap<u32, String>,
    pub(super) stats: StoreStats,
}

/// Why a ticket was sent, and where its answer goes.
#[derive(Clone)]
pub(super) enum Wait {
    /// Operations no call waits on (a put, a refund), how many: only their failures are counted.
    Effects(usize),
    /// `attempt`: the call's attempts when it was sent; `unused`: what its call did not use, decided when the
    /// call settles.
    Call { at: At, tool: Arc<Tool>, plan: Plan, attempt: u32, unused: Unused },
    /// Whether this session approved the rule before, for the call about to be asked: the rule and its reason.
    Remembered { at: At, by: String, reason: Option<String> },
    /// How an attempt of this tool ended, told to its breaker: the reply says the phase now.
    Breaker(String),
}

impl Wait {
    /// How many operations its ticket carries.
    fn ops(&self) -> usize {
        match self {
            Wait::Effects(n) => *n,
            Wait::Call { plan, .. } => plan.len(),
            Wait::Remembered { .. } | Wait::Breaker(_) => 1,
        }
    }
}

/// What a ticket took that goes back once its call has settled: the query it counted (the call never ran), and
/// the spendings, the breaker trial and the tokens it took (the attempt they were for never started).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Unused {
    count: bool,
    attempt: bool,
}

impl Shared {
    pub(super) fn new(options: SharedStoreOptions) -> Self {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        Shared {
            options,
            waits: FxHashMap::default(),
            partial: FxHashMap::default(),
            late: Bounded::new(shared::LATE_TICKETS),
            held_answers: FxHashMap::default(),
            outbox: Vec::new(),
            effects: Vec::new(),
            owner: format!("{}-{nanos:x}-{:x}", std::process::id(), fastrand::u64(..)),
            leases: FxHashMap::default(),
            stats: StoreStats::default(),
        }
    }

    pub(super) fn owner_of(&self, flight: u32) -> String {
        format!("{}:{flight}", self.owner)
    }

    /// An operation no call waits on, sent in the step's ticket of effects.
    pub(super) fn queue(&mut self, op: Op<'_>) {
        self.effects.push(op.for_host());
    }

    /// Tickets out, and late answers kept until their call settles: a gauge that must come back to 0.
    pub(super) fn pending(&self) -> usize {
        self.waits.len() + self.held_answers.len()
    }
}

impl Engine {
    pub(super) fn shared_mut(&mut self) -> &mut Shared {
        self.shared.as_mut().expect("a shared store")
    }

    /// Sends a call's plan; the call waits on its ticket.
    pub(super) fn send_call(&mut self, at: At, ops: Vec<Op<'static>>, plan: Plan, now: Instant) {
        let slot = self.slot(at);
        let (tool, attempt) = (slot.tool().clone(), slot.attempts);
        let ticket = self.send(ops, Wait::Call { at, tool, plan, attempt, unused: Unused::default() }, now);
        self.slot_mut(at).pending = Some(ticket);
    }

    /// Queues operations, as the host is told them (`Op::for_host`), under a new ticket with its deadline.
    pub(super) fn send(&mut self, ops: Vec<Op<'static>>, wait: Wait, now: Instant) -> u32 {
        let ticket = self.take_ticket();
        let shared = self.shared_mut();
        let due = after(now, Duration::from_millis(shared.options.timeout_ms));
        shared.stats.operations += ops.len() as u64;
        shared.waits.insert(ticket, (wait, due));
        shared.outbox.push(StoreTicket { ticket, ops });
        self.deadlines.arm(due, Alarm::Store(ticket));
        ticket
    }

    /// Moves what the store must do into the step: each call's ticket, and one ticket of effects.
    pub(super) fn flush_store(&mut self, now: Instant, step: &mut Step) {
        let Some(shared) = self.shared.as_mut() else { return };
        if !shared.effects.is_empty() {
            let ops = std::mem::take(&mut shared.effects);
            let n = ops.len();
            self.send(ops, Wait::Effects(n), now);
        }
        step.store.append(&mut self.shared_mut().outbox);
    }

    /// The store answered a ticket, whole or in part (`replies_json`: an entry per operation, `null` for one not
    /// answered yet). The call resumes once every operation is answered, or at the ticket's deadline with those that
    /// were. A ticket already past its deadline, or whose call ended meanwhile, only gives back what it took.
    pub fn answer_store(&mut self, ticket: u32, replies_json: &str, now: Instant) -> Step {
        let mut step = Step::default();
        let Some(shared) = self.shared.as_mut() else { return step };
        if let Some((wait, _)) = shared.waits.get(&ticket) {
            let mut replies = ops::read_answer(replies_json, wait.ops());
            if let Some(before) = shared.partial.remove(&ticket) {
                for (reply, earlier) in replies.iter_mut().zip(before) {
                    *reply = earlier.or(reply.take());
                }
            }
            if replies.iter().all(Option::is_some) {
                let (wait, due) = shared.waits.remove(&ticket).expect("looked up above");
                self.deadlines.disarm(due, Alarm::Store(ticket));
                self.answered(ticket, wait, replies.into_iter().flatten().collect(), now, &mut step);
            } else {
                shared.partial.insert(ticket, replies);
            }
        } else if let Some((wait, out)) = shared.late.peek_mut(&ticket) {
            // Only what was still out: each operation gives back once, and those answered in time were their call's.
            let mut arrived = Vec::new();
            for (place, reply) in ops::read_answer(replies_json, out.len()).into_iter().enumerate() {
                if let Some(reply) = reply.filter(|_| std::mem::take(&mut out[place])) {
                    arrived.push((place, reply));
                }
            }
            let ops = out.len();
            let wait = if out.contains(&true) { wait.clone() } else { shared.late.pop(&ticket).expect("peeked above").0 };
            let live = match &wait {
                Wait::Call { at, .. } => self.open_slot(*at).is_some_and(|slot| !slot.sealed() && slot.unanswered.contains(&ticket)),
                _ => false,
            };
            let shared = self.shared_mut();
            // An empty reply stands for an operation not arrived yet, or answered in time: nothing to give back.
            let (_, held) = shared.held_answers.entry(ticket).or_insert_with(|| (wait, vec![Reply::default(); ops]));
            for (place, reply) in arrived {
                held[place] = reply;
            }
            if !live {
                let (wait, replies) = shared.held_answers.remove(&ticket).expect("held above");
                self.give_back(&wait, &replies, now);
            }
        }
        self.drain(now, &mut step);
        step
    }

    /// A ticket's deadline passed: every operation not answered yet counts as failed, and a late answer is still
    /// cleaned up.
    pub(super) fn store_timed_out(&mut self, ticket: u32, now: Instant, step: &mut Step) {
        let Some(shared) = self.shared.as_mut() else { return };
        let Some((wait, _)) = shared.waits.remove(&ticket) else { return };
        shared.stats.timeouts += 1;
        let why = format!("no answer within {} ms", shared.options.timeout_ms);
        let replies = shared.partial.remove(&ticket).unwrap_or_else(|| vec![None; wait.ops()]);
        shared.late.push(ticket, (wait.clone(), replies.iter().map(Option::is_none).collect()));
        if let Wait::Call { at, .. } = &wait {
            // Its call settles later: then it says whether what this ticket took goes back.
            if let Some(slot) = self.turns.get_mut(&at.turn).map(|turn| &mut turn.slots[at.index]) {
                if slot.pending == Some(ticket) && !slot.sealed() {
                    slot.unanswered.push(ticket);
                }
            }
        }
        let replies = replies.into_iter().map(|reply| reply.unwrap_or_else(|| Reply::failed(&why))).collect();
        self.answered(ticket, wait, replies, now, step);
    }

    fn answered(&mut self, ticket: u32, wait: Wait, replies: Vec<Reply>, now: Instant, step: &mut Step) {
        self.shared_mut().stats.errors += replies.iter().filter(|r| r.error.is_some()).count() as u64;
        let waits_on = |engine: &Self, at: At| engine.open_slot(at).is_some_and(|slot| !slot.sealed() && slot.pending == Some(ticket));
        match wait {
            Wait::Effects(_) => {}
            Wait::Call { at, plan, .. } if waits_on(self, at) => {
                self.resume_on(at, plan, Replies::Ticket(replies.into_iter()), now, step);
            }
            // Answered meanwhile (by an identical call's flight, by its turn's end): `settle` said what goes back.
            wait @ Wait::Call { .. } => self.give_back(&wait, &replies, now),
            Wait::Remembered { at, by, reason } => {
                if waits_on(self, at) {
                    self.remembered_answer(at, by, reason, &replies[0], now, step);
                }
            }
            Wait::Breaker(name) => {
                // A tool registered again without a breaker meanwhile has no view to update.
                if self.registry.get(&name).is_some_and(|tool| tool.breaker.is_some()) {
                    let _ = self.breaker_said(&name, &replies[0], now, step);
                }
            }
        }
    }

    /// What a ticket its call no longer waits on took: a lease is released (nobody uses it), and for a call that
    /// ended without running, its tokens go back and the query it counted is taken back. What each reply took is
    /// its station's to say.
    fn give_back(&mut self, wait: &Wait, replies: &[Reply], now: Instant) {
        let Wait::Call { tool, plan, unused, .. } = wait else { return };
        let mut replies = replies.iter();
        let mut reply = || replies.next().expect("a reply per operation");
        let mut back = Vec::new();
        if let Some(count) = &plan.count {
            if let (true, Some(key), true) = (unused.count, &count.key, dedup::holds_count(count.mode, reply())) {
                back.push(dedup::uncount(count.session.clone(), key.clone()));
            }
        }
        if let Some(lookup) = &plan.lookup {
            let flight = lookup.flight.expect("a shared store's lookup is a flight's");
            if Found::of(reply()).1 == Lease::Taken {
                if self.flights.get(&lookup.key) == Some(&flight) {
                    // The flight went on under another call (the lease is the flight's, not the call's): it holds it.
                    self.shared_mut().leases.insert(flight, lookup.key.clone());
                } else {
                    back.push(cache::release(lookup.key.clone(), self.lease_owner(flight)));
                }
            }
        }
        for spending in &plan.spends {
            if let (true, Spent::Made(made_in)) = (unused.attempt, Spent::of(reply(), spending.window.is_some())) {
                back.push(budget::unspend(spending.key.clone(), spending.amount, made_in));
            }
        }
        if plan.breaker {
            // A trial place a late answer gave goes back even when the call ran: it ran without it, and its outcome
            // is not counted against it, so the place would stay taken until the breaker's key expired.
            let name = &tool.spec.name;
            if let (Some(trial), Some(config)) = (breaker::trial_given(reply()), self.registry.get(name).and_then(|t| t.breaker)) {
                let op = breaker::record_op(name, &config, trial, Outcome::Untested).expect("a trial is recorded");
                self.send(vec![op.for_host()], Wait::Breaker(name.clone()), now);
            }
        }
        for want in plan.takes.iter().flatten() {
            if Token::of(reply()).taken() && unused.attempt {
                back.push(ratelimit::refund(want.key.clone(), want.bucket));
            }
        }
        for op in back {
            self.effect(op, now);
        }
    }

    /// A call settles while tickets of its own are out (or timed out, and may still be answered): whether it ran
    /// decides what they give back when they are answered. One answered by an identical call's flight, or from the
    /// cache, used its query, not its tokens.
    pub(super) fn settled_while_asking(&mut self, slot: &mut Slot, result: &ToolResult, now: Instant) {
        let Some(shared) = self.shared.as_mut() else { return };
        let never_ran = slot.attempts == 0 && !result.cached && !result.metadata.shared_flight;
        let mut answered = Vec::new();
        for ticket in slot.pending.iter().chain(&slot.unanswered) {
            // A ticket past its deadline may be both in `late` (operations still out) and held (those that came).
            let held = shared.held_answers.get_mut(ticket).map(|(wait, _)| wait);
            if held.is_some() {
                answered.push(*ticket);
            }
            let waits = [shared.waits.get_mut(ticket).map(|(wait, _)| wait), held, shared.late.peek_mut(ticket).map(|(wait, _)| wait)];
            for wait in waits.into_iter().flatten() {
                if let Wait::Call { attempt, unused, .. } = wait {
                    *unused = Unused { count: never_ran, attempt: slot.attempts == *attempt };
                }
            }
        }
        slot.unanswered.clear();
        // A store ticket it waited on is no longer its to wait on: its answer goes by the flags just set.
        if slot.pending.is_some_and(|t| shared.waits.contains_key(&t)) {
            slot.pending = None;
        }
        for ticket in answered {
            let (wait, replies) = self.shared_mut().held_answers.remove(&ticket).expect("held above");
            self.give_back(&wait, &replies, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use crate::ops::Op;
    use crate::options::{EngineOptions, ToolSpec, TurnOptions};
    use crate::permission::Policy;
    use crate::result::ErrorKind;

    use super::super::{Engine, Step};
    use super::StoreTicket;

    /// An engine on a shared store that waits 50 ms for an answer, with a tool that asks for a count and a token.
    fn engine() -> Engine {
        let mut engine = Engine::new(EngineOptions::from_json(r#"{"store": {"timeoutMs": 50}}"#).unwrap()).unwrap();
        engine.register(ToolSpec::from_json(r#"{"name": "api", "readOnly": true, "rateLimit": "5/s", "dedup": "note"}"#).unwrap()).unwrap();
        engine
    }

    /// Begins a turn of one call in a session: its turn, and the one ticket it sends.
    fn begin(engine: &mut Engine, now: Instant) -> (u32, u32, Vec<Op<'static>>) {
        let policy = Policy { fields: [("sessionId".to_string(), "s".to_string())].into_iter().collect(), ..Policy::default() };
        let mut step = engine.begin(r#"[{"name": "api"}]"#, &policy, &TurnOptions::default(), None, now).unwrap();
        assert_eq!(step.store.len(), 1, "one ticket for the call");
        let StoreTicket { ticket, ops } = step.store.remove(0);
        (step.turn.unwrap(), ticket, ops)
    }

    /// Each ticket's operations, by the name they cross under.
    fn names(step: &Step) -> Vec<Vec<String>> {
        let name = |op: &Op| serde_json::to_value(op).unwrap()["op"].as_str().unwrap().to_string();
        step.store.iter().map(|t| t.ops.iter().map(name).collect()).collect()
    }

    fn pending(engine: &Engine) -> u64 {
        engine.store_stats().unwrap()["pending"].as_u64().unwrap()
    }

    #[test]
    fn a_ticket_answered_in_parts_resumes_its_call_once_every_operation_is_in() {
        let (mut engine, now) = (engine(), Instant::now());
        let (_, ticket, ops) = begin(&mut engine, now);
        assert!(matches!(ops[..], [Op::Count { .. }, Op::Take { .. }]), "{ops:?}");
        let step = engine.answer_store(ticket, r#"[{"earlier": 0}, null]"#, now);
        assert!(step.start.is_empty(), "the token has not come yet");
        assert_eq!(pending(&engine), 1);
        let step = engine.answer_store(ticket, r#"[null, {"take": "now"}]"#, now);
        assert_eq!(step.start.len(), 1, "every reply is in: it runs");
        assert_eq!(pending(&engine), 0);
        let again = engine.answer_store(ticket, r#"[{"earlier": 0}, {"take": "now"}]"#, now);
        assert!(again.start.is_empty() && again.store.is_empty(), "an answer to a ticket no longer out changes nothing");
    }

    #[test]
    fn a_late_answer_gives_back_once_what_its_call_did_not_use() {
        let (mut engine, now) = (engine(), Instant::now());
        let (turn, ticket, _) = begin(&mut engine, now);
        let step = engine.expire(now + Duration::from_millis(50));
        assert_eq!(step.done, [turn], "the rate limit fails closed: the call is answered without running");
        assert_eq!(engine.take_results(turn).unwrap()[0].error_kind, Some(ErrorKind::RateLimited));
        // The count came late, the token later still: each goes back as it comes, once.
        let uncount = engine.answer_store(ticket, r#"[{"earlier": 0}, null]"#, now);
        assert_eq!(names(&uncount), [["uncount"]]);
        let refund = engine.answer_store(ticket, r#"[{"earlier": 0}, {"take": "now"}]"#, now);
        assert_eq!(names(&refund), [["refund"]], "the count went back already");
        assert!(engine.answer_store(ticket, r#"[{"earlier": 0}, {"take": "now"}]"#, now).store.is_empty());
        let stats = engine.store_stats().unwrap();
        assert_eq!((stats["timeouts"].as_u64(), stats["errors"].as_u64(), stats["pending"].as_u64()), (Some(1), Some(2), Some(2)));
        for StoreTicket { ticket, .. } in uncount.store.iter().chain(&refund.store) {
            engine.answer_store(*ticket, "[{}]", now);
        }
        assert_eq!(pending(&engine), 0, "the give-backs were answered");
    }

    #[test]
    fn an_answer_that_cannot_be_read_fails_every_operation_it_was_for() {
        let (mut engine, now) = (engine(), Instant::now());
        let (turn, ticket, _) = begin(&mut engine, now);
        let step = engine.answer_store(ticket, "not json", now);
        assert_eq!(step.done, [turn]);
        let result = &engine.take_results(turn).unwrap()[0];
        assert_eq!(result.error_kind, Some(ErrorKind::RateLimited));
        assert!(result.metadata.store_error.as_deref().is_some_and(|e| e.contains("could not be read")), "{:?}", result.metadata.store_error);
        assert_eq!(engine.store_stats().unwrap()["errors"], 2);
    }
}
