//! The engine's side of a store shared between processes: dedup, cache, single flight, rate limits and sessions
//! ask it through tickets the host answers (see `shared`), and a call resumes where it waited.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustc_hash::FxHashMap;
use serde::Serialize;
use serde_json::Value;

use super::{counters_of, guards, mark, remembered_key, Deferred, Engine, Step};
use crate::bounded::Bounded;
use crate::cache::{self, Kept};
use crate::keys;
use crate::dedup::Mode;
use crate::fields::Fields;
use crate::breaker::{Admission, BreakerConfig, BreakerSaid, Outcome, Phase, Transition};
use crate::ratelimit;
use crate::registry::Tool;
use crate::result::ToolResult;
use crate::budget::Spent;
use crate::ops::{self, Op, Reply};
use crate::ratelimit::Token;
use crate::shared::{self, CountPlan, Fail, LookupPlan, Plan, SharedStoreOptions, Spending, Unused, Wait, MAX_STORE_MS};
use crate::store::Bucket;
use crate::timer::after;
use crate::Alarm;

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
    outbox: Vec<(u32, Vec<Op>)>,
    effects: Vec<Op>,
    /// This engine's name on the leases it takes (unique across processes and restarts).
    owner: String,
    /// Flights holding the lease of their cache key, by flight id.
    leases: FxHashMap<u32, String>,
    stats: StoreStats,
}

#[derive(Debug, Default, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
struct StoreStats {
    /// Operations sent to the store.
    operations: u64,
    /// Operations that failed, timed out included.
    errors: u64,
    /// Tickets the store did not answer within `timeoutMs`.
    timeouts: u64,
    /// Results the store failed (went on without it, or not run).
    unavailable: u64,
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

    fn owner_of(&self, flight: u32) -> String {
        format!("{}:{flight}", self.owner)
    }
}

/// What one call's replies decided: answered here, waiting on another process, or to run.
enum Resumed {
    Answered(Box<ToolResult>),
    Held(Option<f64>),
    Run,
}

impl Engine {
    fn shared(&mut self) -> &mut Shared {
        self.shared.as_mut().expect("a shared store")
    }

    /// Dedup and cache with a shared store: what the call will ask of it, deferred to when it is handed out, so
    /// that one ticket carries everything the call needs (its tokens too). Always runnable.
    pub(super) fn defer(&self, slot: &mut super::Slot, tool: &Tool, args: &Value, fields: &Fields) -> bool {
        let name = tool.spec.name.as_str();
        let count = fields.get("sessionId").and_then(|session| {
            let key = (tool.dedup.mode != Mode::Off).then(|| tool.dedup.query_key(name, args));
            let rollbacks = !tool.judge.is_empty();
            let refuses = tool.dedup.mode == Mode::Refuse;
            (key.is_some() || rollbacks).then(|| CountPlan { session: session.clone(), key, refuses, rollbacks })
        });
        let cache_key = tool.cache.as_ref().map(|rule| {
            let scope = rule.scope.as_ref().map(|field| fields.get(field).map_or("", String::as_str));
            cache::key(name, args, scope)
        });
        if count.is_some() || cache_key.is_some() {
            slot.deferred = Some(Deferred { count, cache_key });
        }
        true
    }

    /// A handed-out call asks the store what it deferred: its count, and its cache entry (or the lease to fill it),
    /// with its tokens when it is the one to run. An identical call of this process already in flight is joined
    /// here, without asking the store for the entry.
    pub(super) fn ask_deferred(&mut self, turn_id: u32, index: usize, deferred: Deferred, now: Instant) {
        let name = self.turns[&turn_id].slots[index].tool.as_ref().expect("a scheduled call has a tool").spec.name.clone();
        self.take_place(&name);
        let mut plan = Plan { count: deferred.count, ..Plan::default() };
        let leads = match deferred.cache_key {
            Some(key) => match self.join_or_lead(key, &name, turn_id, index) {
                role @ super::FlightRole::Joined(..) => {
                    role.assign(&mut self.turns.get_mut(&turn_id).expect("a live turn").slots[index]);
                    false
                }
                super::FlightRole::Leads(key, flight) => {
                    // Marked a hit or a miss once the store says which.
                    plan.lookup = Some(LookupPlan { key: key.clone(), flight });
                    self.turns.get_mut(&turn_id).expect("a live turn").slots[index].fills = Some((key, flight));
                    true
                }
            },
            None => true,
        };
        // Its tokens come in the same ticket only when nothing in it can answer the call instead (a cache hit, a
        // refused or reused repeat): a call that does not run takes no token, even for a moment. Otherwise they
        // come once it is known to run.
        let tool = self.turns[&turn_id].slots[index].tool.clone().expect("a scheduled call has a tool");
        let may_answer = plan.lookup.is_some() || (plan.count.as_ref().is_some_and(|c| c.key.is_some()) && matches!(tool.dedup.mode, Mode::Refuse | Mode::Reuse));
        // A call held to budgets or a breaker asks for its tokens with them, once it is known to run (`run_now`).
        let guarded = tool.breaker.is_some() || tool.spec.budget.is_some() || self.options.budget.is_some() || self.turns[&turn_id].policy.budget.is_some();
        if leads && !may_answer && !guarded {
            plan.takes = Some(self.limits_of(turn_id, index, now));
        }
        // Joined an identical call of this process with nothing to count: it waits for that call.
        if plan.count.is_none() && !leads {
            return;
        }
        self.ask_store(turn_id, index, plan, now);
    }

    /// Station 8 with a shared store: the call's budget spendings, its breaker's admission (when this process does
    /// not know the breaker to be closed) and its tokens in one ticket, or a start at once for a call under none.
    pub(super) fn ask_tokens(&mut self, turn_id: u32, index: usize, spends: Vec<Spending>, ask_breaker: bool, now: Instant, step: &mut Step) {
        let limits = self.limits_of(turn_id, index, now);
        if limits.is_empty() && spends.is_empty() && !ask_breaker {
            return self.start_run(turn_id, index, now, step);
        }
        let name = self.turns[&turn_id].slots[index].tool.as_ref().expect("a scheduled call has a tool").spec.name.clone();
        self.take_place(&name);
        let plan = Plan { takes: Some(limits), spends, breaker: ask_breaker.then_some(name), ..Plan::default() };
        self.ask_store(turn_id, index, plan, now);
    }

    /// Sends a call's ticket; the call waits on it, holding the place it took.
    fn ask_store(&mut self, turn_id: u32, index: usize, plan: Plan, now: Instant) {
        let turn = &self.turns[&turn_id];
        let slot = &turn.slots[index];
        let tool = slot.tool.clone().expect("a call asking the store has a tool");
        let ttl_ms = self.options.dedup.session_ttl_ms;
        // A lookup's lease covers the waits for tokens the call may make once it leads.
        let lease = plan.lookup.as_ref().map(|_| store_ms(lease_ms(&tool, self.waits_ms(turn_id, index, now))));
        let shared = self.shared.as_ref().expect("a shared store");
        let mut ops = Vec::new();
        if let Some(count) = &plan.count {
            let refuse = count.key.is_some() && count.refuses;
            let reuse = count.key.is_some() && tool.dedup.mode == Mode::Reuse;
            ops.push(Op::Count { session: count.session.clone(), key: count.key.clone(), ttl_ms: store_ms(ttl_ms), refuse, reuse, rollbacks: count.rollbacks });
        }
        if let Some(lookup) = &plan.lookup {
            ops.push(Op::Lookup { key: lookup.key.clone(), owner: Some(shared.owner_of(lookup.flight)), lease_ms: lease });
        }
        for Spending { key, amount, limit, window, .. } in &plan.spends {
            let window_ms = window.map(|w| store_ms(w.as_millis() as u64));
            ops.push(Op::Spend { key: key.clone(), amount: *amount, limit: *limit, ttl_ms: store_ms(ttl_ms), window_ms });
        }
        if let (Some(key), Some(config)) = (&plan.breaker, &tool.breaker) {
            let (half_open_calls, ttl_ms) = (config.half_open_calls, breaker_ttl_ms(config));
            ops.push(Op::BreakerAdmit { key: key.clone(), half_open_calls, trial_wait_ms: tool.timeout_ms, ttl_ms });
        }
        for (key, bucket, max_wait, _) in plan.takes.iter().flatten() {
            let max_wait_ms = max_wait.as_secs_f64() * 1000.0;
            ops.push(Op::Take { key: key.clone(), capacity: bucket.capacity, refill_per_sec: bucket.refill_per_sec, max_wait_ms });
        }
        let attempt = self.turns[&turn_id].slots[index].attempts;
        let ticket = self.send(ops, Wait::Call { turn: turn_id, index, plan, attempt, unused: Unused::default() }, now);
        self.turns.get_mut(&turn_id).expect("a live turn").slots[index].pending = Some(ticket);
    }

    /// Queues operations under a new ticket with its deadline.
    fn send(&mut self, ops: Vec<Op>, wait: Wait, now: Instant) -> u32 {
        let ticket = self.take_ticket();
        let shared = self.shared.as_mut().expect("a shared store");
        let at = after(now, Duration::from_millis(shared.options.timeout_ms));
        shared.stats.operations += ops.len() as u64;
        shared.waits.insert(ticket, (wait, at));
        shared.outbox.push((ticket, ops));
        self.deadlines.arm(at, Alarm::Store(ticket));
        ticket
    }

    /// An operation no call waits on (keeping a result, giving back a token): sent with the step.
    pub(super) fn effect(&mut self, op: Op) {
        self.shared().effects.push(op);
    }

    /// Moves what the store must do into the step: each call's ticket, and one ticket of effects.
    pub(super) fn flush_store(&mut self, now: Instant, step: &mut Step) {
        let Some(shared) = self.shared.as_mut() else { return };
        if !shared.effects.is_empty() {
            let ops = std::mem::take(&mut shared.effects);
            let n = ops.len();
            self.send(ops, Wait::Effects(n), now);
        }
        step.store.append(&mut self.shared().outbox);
    }

    /// The store answered a ticket, whole or in part (`replies_json`: an entry per operation, `null` for one not
    /// answered yet). The call resumes once every operation is answered, or at the ticket's deadline with those that
    /// were. A ticket already past its deadline, or whose call ended meanwhile, only gives back what it took.
    pub fn answer_store(&mut self, ticket: u32, replies_json: &str, now: Instant) -> Step {
        let mut step = Step::default();
        let Some(shared) = self.shared.as_mut() else { return step };
        if let Some((wait, _)) = shared.waits.get(&ticket) {
            let mut replies = ops::read_answer(replies_json, ops_of(wait));
            if let Some(before) = shared.partial.remove(&ticket) {
                for (reply, earlier) in replies.iter_mut().zip(before) {
                    *reply = earlier.or(reply.take());
                }
            }
            if replies.iter().all(Option::is_some) {
                let (wait, at) = shared.waits.remove(&ticket).expect("looked up above");
                self.deadlines.disarm(at, Alarm::Store(ticket));
                self.answered(ticket, wait, replies.into_iter().flatten().collect(), now, &mut step);
            } else {
                shared.partial.insert(ticket, replies);
            }
        } else if let Some((wait, out)) = shared.late.peek_mut(&ticket) {
            // Only what was still out: each operation gives back once, and those answered in time were their call's.
            let mut arrived = Vec::new();
            for (at, reply) in ops::read_answer(replies_json, out.len()).into_iter().enumerate() {
                if let Some(reply) = reply.filter(|_| std::mem::take(&mut out[at])) {
                    arrived.push((at, reply));
                }
            }
            let ops = out.len();
            let wait = if out.contains(&true) { wait.clone() } else { shared.late.pop(&ticket).expect("peeked above").0 };
            let live = match &wait {
                Wait::Call { turn, index, .. } => self.turns.get(turn).is_some_and(|t| t.slots[*index].result.is_none() && t.slots[*index].unanswered.contains(&ticket)),
                _ => false,
            };
            let shared = self.shared();
            // An empty reply stands for an operation not arrived yet, or answered in time: nothing to give back.
            let (_, held) = shared.held_answers.entry(ticket).or_insert_with(|| (wait, vec![Reply::default(); ops]));
            for (at, reply) in arrived {
                held[at] = reply;
            }
            if !live {
                let (wait, replies) = shared.held_answers.remove(&ticket).expect("held above");
                self.give_back(&wait, &replies);
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
        let replies = shared.partial.remove(&ticket).unwrap_or_else(|| vec![None; ops_of(&wait)]);
        shared.late.push(ticket, (wait.clone(), replies.iter().map(Option::is_none).collect()));
        if let Wait::Call { turn, index, .. } = &wait {
            if let Some(t) = self.turns.get_mut(turn) {
                // Its call settles later: then it says whether what this ticket took goes back.
                if t.slots[*index].pending == Some(ticket) && t.slots[*index].result.is_none() {
                    t.slots[*index].unanswered.push(ticket);
                }
            }
        }
        let replies = replies.into_iter().map(|reply| reply.unwrap_or_else(|| Reply::failed(&why))).collect();
        self.answered(ticket, wait, replies, now, step);
    }

    fn answered(&mut self, ticket: u32, wait: Wait, replies: Vec<Reply>, now: Instant, step: &mut Step) {
        self.shared().stats.errors += replies.iter().filter(|r| r.error.is_some()).count() as u64;
        match wait {
            Wait::Effects(_) => {}
            Wait::Call { turn, index, plan, attempt, unused } => {
                if self.waits_on(turn, index, ticket) {
                    self.resume(turn, index, plan, replies, now, step);
                } else {
                    // Answered meanwhile (by an identical call's flight, by its turn's end): `settle` said what goes back.
                    self.give_back(&Wait::Call { turn, index, plan, attempt, unused }, &replies);
                }
            }
            Wait::Remembered { turn, index, by, reason } => {
                if self.waits_on(turn, index, ticket) {
                    self.remembered_answer(turn, index, by, reason, &replies[0], now, step);
                }
            }
            Wait::Breaker(name) => {
                // A tool registered again without a breaker meanwhile has no view to update.
                if let Some(tool) = self.registry.get(&name).filter(|tool| tool.breaker.is_some()).cloned() {
                    let _ = self.breaker_said(&tool, &replies[0], now, step);
                }
            }
        }
    }

    /// What the store said of a breaker becomes this process's view of it, and a change of phase is reported. Err:
    /// the store failed, and the view stays as it was.
    fn breaker_said(&mut self, tool: &Tool, reply: &Reply, now: Instant, step: &mut Step) -> Result<BreakerSaid, String> {
        let said = BreakerSaid::of(reply)?;
        let name = tool.spec.name.as_str();
        let until = if said.phase == Phase::Open { after(now, said.open_for) } else { now };
        match self.breaker_views.get_mut(name) {
            Some(view) => *view = (said.phase, until),
            None => {
                self.breaker_views.insert(name.to_string(), (said.phase, until));
            }
        }
        if let Some(from) = said.from {
            self.breaker_changed(Transition { tool: name.to_string(), from, to: said.phase, calls: said.calls, failures: said.failures }, step);
        }
        Ok(said)
    }

    /// How an attempt a shared breaker admitted ended, told to it; its answer updates the view.
    pub(super) fn share_outcome(&mut self, tool: &str, config: &BreakerConfig, admission: Admission, outcome: Outcome, now: Instant) {
        let (admission, generation) = match admission {
            Admission::Counted(_) => ("counted", 0),
            Admission::Trial(generation) => ("trial", generation),
            Admission::Refused(_) => return,
        };
        let op = Op::BreakerRecord {
            key: tool.to_string(),
            admission,
            generation,
            outcome: outcome.as_str(),
            failure_rate: config.failure_rate,
            min_calls: config.min_calls,
            window_ms: config.window_ms,
            open_ms: config.open_ms,
            half_open_calls: config.half_open_calls,
            ttl_ms: breaker_ttl_ms(config),
        };
        self.send(vec![op], Wait::Breaker(tool.to_string()), now);
    }

    fn waits_on(&self, turn: u32, index: usize, ticket: u32) -> bool {
        self.turns.get(&turn).is_some_and(|t| t.slots[index].result.is_none() && t.slots[index].pending == Some(ticket))
    }

    /// What a ticket its call no longer waits on took: a lease is released (nobody uses it), and for a call that
    /// ended without running, its tokens go back and the query it counted is taken back.
    fn give_back(&mut self, wait: &Wait, replies: &[Reply]) {
        let Wait::Call { plan, unused, .. } = wait else { return };
        let mut replies = replies.iter();
        if let Some(count) = &plan.count {
            let reply = replies.next().expect("a reply per operation");
            if let (true, Some(key), None, Some(earlier)) = (unused.count, &count.key, &reply.error, reply.earlier) {
                // A repeat the script refused was taken back by the script itself.
                if !(count.refuses && earlier > 0) {
                    self.effect(Op::Uncount { session: count.session.clone(), key: key.clone() });
                }
            }
        }
        if let Some(lookup) = &plan.lookup {
            let reply = replies.next().expect("a reply per operation");
            if reply.lease.as_deref() == Some("taken") {
                if self.flights.get(&lookup.key) == Some(&lookup.flight) {
                    // The flight went on under another call (the lease is the flight's, not the call's): it holds it.
                    self.shared().leases.insert(lookup.flight, lookup.key.clone());
                } else {
                    let owner = self.shared().owner_of(lookup.flight);
                    self.effect(Op::Release { key: lookup.key.clone(), owner });
                }
            }
        }
        for Spending { key, amount, window, .. } in &plan.spends {
            let reply = replies.next().expect("a reply per operation");
            if let (true, Spent::Made(made_in)) = (unused.attempt, Spent::of(reply, window.is_some())) {
                self.effect(Op::Unspend { key: key.clone(), amount: *amount, window: made_in });
            }
        }
        if let Some(tool) = &plan.breaker {
            let reply = replies.next().expect("a reply per operation");
            // A trial place a late answer gave goes back even when the call ran: it ran without it, and its outcome
            // is not counted against it, so the place would stay taken until the breaker's key expired.
            if let (None, Some("trial"), Some(config)) = (&reply.error, reply.admit.as_deref(), self.registry.get(tool).and_then(|t| t.breaker)) {
                self.share_outcome(tool, &config, Admission::Trial(reply.generation.unwrap_or(0)), Outcome::Untested, Instant::now());
            }
        }
        for ((key, bucket, _, _), reply) in plan.takes.iter().flatten().zip(replies) {
            if unused.attempt && Token::of(reply).taken() {
                self.effect(Op::Refund { key: key.clone(), capacity: bucket.capacity });
            }
        }
    }

    /// A call's ticket answered: dedup, then the cache, then its tokens decide whether it is answered, waits for
    /// another process, or runs.
    fn resume(&mut self, turn_id: u32, index: usize, plan: Plan, replies: Vec<Reply>, now: Instant, step: &mut Step) {
        let on_error = self.shared().options.on_error;
        let turn = self.turns.get_mut(&turn_id).expect("a live turn");
        let fields = turn.policy.fields.clone();
        let mut slot = std::mem::replace(&mut turn.slots[index], super::Slot::new(String::new()));
        slot.pending = None;
        // A look again of a call waiting on another process: its miss was counted and marked the first time.
        let polled = slot.polling.take();
        let tool = slot.tool.clone().expect("a call asking the store has a tool");
        let name = tool.spec.name.clone();
        let mut resumed = Resumed::Run;
        let mut replies_left = replies.iter();
        if let Some(count) = &plan.count {
            let reply = replies_left.next().expect("a reply per operation");
            let station = if count.key.is_some() { "dedup" } else { "session" };
            match &reply.error {
                Some(e) => {
                    let fail = if count.key.is_some() { on_error.dedup } else { on_error.sessions };
                    if count.key.is_some() {
                        slot.marks.push(mark("dedup", "unavailable"));
                    }
                    resumed = self.store_failed(&mut slot, fail, station, e);
                }
                None => {
                    if let (true, Some(n)) = (count.rollbacks, reply.rollbacks) {
                        // The session's count as the store has it: later turns may have run in other processes.
                        *self.rollbacks.get_or_insert_mut(count.session.clone(), || 0) = n;
                    }
                    if let Some(key) = &count.key {
                        let earlier = reply.earlier.unwrap_or(0);
                        if let Some(result) = self.repeated(&mut slot, &tool, &count.session, key, earlier, reply.reused.as_deref(), &fields) {
                            resumed = Resumed::Answered(Box::new(result));
                        }
                    }
                }
            }
        }
        if let Some(lookup) = &plan.lookup {
            let reply = replies_left.next().expect("a reply per operation");
            if reply.lease.as_deref() == Some("taken") {
                let key = lookup.key.clone();
                self.shared().leases.insert(lookup.flight, key);
            }
            if matches!(resumed, Resumed::Run) {
                resumed = match (&reply.error, &reply.value) {
                    (Some(e), _) => {
                        slot.marks.push(mark("cache", "unavailable"));
                        if polled.is_none() {
                            counters_of(&mut self.counters, &name).cache_misses += 1;
                        }
                        self.store_failed(&mut slot, on_error.cache, "cache", e)
                    }
                    (None, Some(text)) => match self.cache_hit(&mut slot, &name, text, &fields) {
                        Some(result) => Resumed::Answered(Box::new(result)),
                        None => Resumed::Run,
                    },
                    (None, None) => {
                        let held = reply.lease.as_deref() == Some("held");
                        if polled.is_none() {
                            counters_of(&mut self.counters, &name).cache_misses += 1;
                            slot.marks.push(mark("cache", "miss"));
                        } else if !held {
                            slot.marks.push(mark("cache", "took_over"));
                        }
                        if held {
                            if polled.is_none() {
                                slot.marks.push(mark("cache", "waits_elsewhere"));
                            }
                            Resumed::Held(reply.lease_left_ms)
                        } else {
                            Resumed::Run
                        }
                    }
                };
            }
        }
        // Budgets and the breaker, for a call that would run: what they take is the slot's, so that `settle` gives
        // it back if the call does not run after all.
        for Spending { at, amount, window, .. } in &plan.spends {
            let reply = replies_left.next().expect("a reply per operation");
            match Spent::of(reply, window.is_some()) {
                Spent::Made(made_in) => slot.spent.mark(*at, made_in),
                Spent::Over(used, resets) if matches!(resumed, Resumed::Run) => {
                    let limit = self.budget_limits(turn_id, &tool)[*at].clone();
                    let by = self.holder(turn_id, &limit);
                    resumed = Resumed::Answered(guards::refuse_budget(&mut self.counters, &mut slot, &limit, *amount, used, resets, by));
                }
                Spent::Failed(e) if matches!(resumed, Resumed::Run) => {
                    slot.marks.push(mark("budget", "unavailable"));
                    resumed = self.store_failed(&mut slot, on_error.budget, "budget", &e);
                }
                _ => {}
            }
        }
        if plan.breaker.is_some() {
            let reply = replies_left.next().expect("a reply per operation");
            match self.breaker_said(&tool, reply, now, step) {
                Ok(BreakerSaid { admission: Admission::Refused(wait), phase, .. }) => {
                    if matches!(resumed, Resumed::Run) {
                        resumed = Resumed::Answered(guards::refuse_attempt(&mut self.counters, &mut slot, phase, wait));
                    }
                }
                Ok(said) => slot.admission = Some(said.admission),
                Err(e) if matches!(resumed, Resumed::Run) => {
                    slot.marks.push(mark("breaker", "unavailable"));
                    resumed = self.store_failed(&mut slot, on_error.breaker, "breaker", &e);
                }
                Err(_) => {}
            }
        }
        let mut ready_at = now;
        let mut reserved = Vec::new();
        // Every token taken is known, so that one the call will not use goes back.
        if let Some(takes) = &plan.takes {
            let tokens: Vec<Token> = replies_left.by_ref().take(takes.len()).map(Token::of).collect();
            for ((key, bucket, _, whole), token) in takes.iter().zip(&tokens) {
                match token {
                    Token::Now => reserved.push((key.clone(), *bucket)),
                    Token::After(wait) => {
                        ready_at = ready_at.max(after(now, *wait));
                        reserved.push((key.clone(), *bucket));
                    }
                    Token::Refused(wait) if matches!(resumed, Resumed::Run) => {
                        counters_of(&mut self.counters, &name).rate_limited += 1;
                        slot.marks.push(mark("rate_limit", "refused"));
                        resumed = Resumed::Answered(Box::new(ratelimit::refused(slot.id.clone(), &name, *whole, *wait)));
                    }
                    Token::Failed(e) if matches!(resumed, Resumed::Run) => match on_error.rate_limit {
                        Fail::Open => slot.store_error = Some(e.clone()),
                        Fail::Closed => {
                            counters_of(&mut self.counters, &name).rate_limited += 1;
                            slot.marks.push(mark("rate_limit", "unavailable"));
                            slot.store_error = Some(e.clone());
                            resumed = Resumed::Answered(Box::new(shared::no_token(slot.id.clone(), &name, e)));
                        }
                    },
                    _ => {}
                }
            }
        }
        // Tokens this call took but will not use go back.
        if !matches!(resumed, Resumed::Run) {
            for (key, bucket) in reserved.drain(..) {
                self.effect(Op::Refund { key, capacity: bucket.capacity });
            }
        }
        let joined = slot.joined.clone();
        self.turns.get_mut(&turn_id).expect("a live turn").slots[index] = slot;
        match resumed {
            Resumed::Answered(result) => self.settle_waiting(turn_id, index, result, now, step),
            Resumed::Run if joined.is_some() => {
                let (key, flight) = joined.expect("joined");
                // Joined an identical call of this process: it keeps waiting for it in its place, or, when that
                // flight ended meanwhile without it, looks up the entry itself.
                if !self.flight_waiters.get(&flight).is_some_and(|w| w.contains(&(turn_id, index))) {
                    self.turns.get_mut(&turn_id).expect("a live turn").slots[index].joined = None;
                    self.release_place(&name);
                    self.ask_deferred(turn_id, index, Deferred { count: None, cache_key: Some(key) }, now);
                }
            }
            Resumed::Run => {
                self.release_place(&name);
                match plan.takes {
                    None => self.run_now(turn_id, index, now, step),
                    Some(_) if ready_at > now => self.wait_for_token(turn_id, index, ready_at, reserved),
                    Some(_) => self.start_run(turn_id, index, now, step),
                }
            }
            Resumed::Held(left) => {
                let slot = &mut self.turns.get_mut(&turn_id).expect("a live turn").slots[index];
                let (since, last, _) = polled.unwrap_or((now, Duration::ZERO, now));
                let wait = shared::next_poll(last, left);
                let at = after(now, wait);
                slot.polling = Some((since, wait, at));
                self.deadlines.arm(at, Alarm::Poll(turn_id, index));
            }
        }
    }

    /// The store failed one of a call's stations: it goes on without the store, or (closed) is not run.
    fn store_failed(&mut self, slot: &mut super::Slot, fail: Fail, station: &str, why: &str) -> Resumed {
        slot.store_error = Some(why.to_string());
        match fail {
            Fail::Open => Resumed::Run,
            Fail::Closed => {
                let name = &slot.tool.as_ref().expect("a call asking the store has a tool").spec.name;
                Resumed::Answered(Box::new(shared::unavailable(slot.id.clone(), name, station, why)))
            }
        }
    }

    /// A call waiting for an identical call of another process looks again: the entry, or the lease if that
    /// process let it go. It stops waiting after its own time limit.
    pub(super) fn poll_due(&mut self, turn_id: u32, index: usize, now: Instant, step: &mut Step) {
        let Some(turn) = self.turns.get(&turn_id) else { return };
        let slot = &turn.slots[index];
        let (Some((since, _, _)), None) = (slot.polling, &slot.result) else { return };
        let tool = slot.tool.clone().expect("a polling call has a tool");
        let fills = slot.fills.clone();
        let waited = now.saturating_duration_since(since);
        // As long as a lease of its own would last: by then the other's (taken earlier) has ended, unless that
        // process holds the tool to longer limits.
        let limit_ms = waiter_limit_ms(&tool, self.waits_ms(turn_id, index, now));
        if waited >= Duration::from_millis(limit_ms) {
            let slot = &mut self.turns.get_mut(&turn_id).expect("a live turn").slots[index];
            slot.polling = None;
            slot.marks.push(mark("cache", "waited_too_long"));
            let result = shared::waited_too_long(slot.id.clone(), &tool.spec.name, limit_ms);
            return self.settle_waiting(turn_id, index, Box::new(result), now, step);
        }
        let Some((key, flight)) = fills else { return };
        self.look_again(turn_id, index, key, flight, now);
    }

    /// A flight's leader asks for the entry, or the lease, again: it keeps the place it holds while it waits.
    pub(super) fn look_again(&mut self, turn_id: u32, index: usize, key: String, flight: u32, now: Instant) {
        self.ask_store(turn_id, index, Plan { lookup: Some(LookupPlan { key, flight }), ..Plan::default() }, now);
    }

    /// How long in all a call may wait for its tokens, in ms.
    fn waits_ms(&self, turn_id: u32, index: usize, now: Instant) -> u64 {
        self.limits_of(turn_id, index, now).iter().map(|(_, _, wait, _)| wait.as_millis()).sum::<u128>().min(u128::from(u64::MAX)) as u64
    }

    /// Dedup's decision on a query counted `earlier` times before in the session: a refusal, the earlier result
    /// reused, or None (the call goes on, marked as a repeat or a first). Shared by the memory and shared stores.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn repeated(&mut self, slot: &mut super::Slot, tool: &Tool, session: &str, key: &str, earlier: u64, reused: Option<&str>, fields: &Fields) -> Option<ToolResult> {
        let name = tool.spec.name.as_str();
        if earlier == 0 {
            slot.marks.push(mark("dedup", "first"));
        } else {
            counters_of(&mut self.counters, name).duplicates += 1;
            match tool.dedup.mode {
                Mode::Refuse => {
                    slot.marks.push(mark("dedup", "refused"));
                    let mut result = crate::dedup::refused(slot.id.clone(), name, earlier);
                    result.metadata.repeats = Some(earlier);
                    return Some(result);
                }
                Mode::Reuse => {
                    if let Some(mut result) = reused.and_then(|text| Kept::revive(text, slot.id.clone(), name.to_string())) {
                        slot.marks.push(mark("dedup", "reused"));
                        result.metadata.repeats = Some(earlier);
                        result.metadata.reused = true;
                        self.hand_over(&result, fields);
                        return Some(result);
                    }
                    slot.marks.push(mark("dedup", "repeat"));
                }
                _ => slot.marks.push(mark("dedup", "repeat")),
            }
        }
        slot.dedup = Some(super::DedupMark { session: session.to_string(), key: key.to_string(), earlier });
        None
    }

    /// A cached entry as this call's result, counted as a hit; None when it cannot be read (then it is a miss).
    pub(super) fn cache_hit(&mut self, slot: &mut super::Slot, name: &str, text: &str, fields: &Fields) -> Option<ToolResult> {
        let counters = counters_of(&mut self.counters, name);
        let Some(mut result) = Kept::revive(text, slot.id.clone(), name.to_string()) else {
            counters.cache_misses += 1;
            return None;
        };
        counters.cache_hits += 1;
        slot.marks.push(mark("cache", "hit"));
        result.cached = true;
        self.hand_over(&result, fields);
        Some(result)
    }

    /// The session may have approved this rule before, in this process or another: asked of the store before the
    /// approval callback is.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ask_remembered(&mut self, turn_id: u32, index: usize, session: &str, tool: &str, by: String, reason: Option<String>, now: Instant) -> u32 {
        let op = Op::Remembered { session: session.to_string(), field: remembered_field(tool, &by) };
        self.send(vec![op], Wait::Remembered { turn: turn_id, index, by, reason }, now)
    }

    #[allow(clippy::too_many_arguments)]
    fn remembered_answer(&mut self, turn_id: u32, index: usize, by: String, reason: Option<String>, reply: &Reply, now: Instant, step: &mut Step) {
        let on_error = self.shared().options.on_error;
        let turn = self.turns.get_mut(&turn_id).expect("a live turn");
        let session = turn.policy.fields.get("sessionId").cloned().unwrap_or_default();
        let slot = &mut turn.slots[index];
        slot.pending = None;
        let tool = slot.tool.clone().expect("a call asking for approval has a tool");
        let args = turn.args.get(&index).cloned().unwrap_or(Value::Null);
        match (&reply.error, reply.remembered) {
            (None, Some(true)) => {
                slot.marks.push(mark("approval", "remembered"));
                slot.permission = Some(("approved", format!("{by}; approved earlier in this session")));
                self.remembered.push(remembered_key(&session, &tool.spec.name, &by), ());
                self.proceed(turn_id, index, now, step);
            }
            (Some(e), _) if on_error.sessions == Fail::Closed => {
                slot.store_error = Some(e.clone());
                let result = shared::unavailable(slot.id.clone(), &tool.spec.name, "session", e);
                self.settle_waiting(turn_id, index, Box::new(result), now, step);
            }
            (error, _) => {
                slot.store_error = error.clone();
                let mut slot = std::mem::replace(slot, super::Slot::new(String::new()));
                self.ask_host(super::HostKind::Approve, turn_id, index, &mut slot, &tool, &args, Some((by, reason)), now);
                self.turns.get_mut(&turn_id).expect("a live turn").slots[index] = slot;
            }
        }
    }

    /// An approval given for the session: other processes see it too.
    pub(super) fn share_remembered(&mut self, session: &str, tool: &str, by: &str) {
        if self.shared.is_some() {
            let ttl_ms = self.options.dedup.session_ttl_ms;
            self.effect(Op::Remember { session: session.to_string(), field: remembered_field(tool, by), ttl_ms: store_ms(ttl_ms) });
        }
    }

    /// A session's consecutive rollback count changed (a flag adds one, a result not flagged ends a run): other
    /// processes see it too.
    pub(super) fn share_rollbacks(&mut self, session: &str, flagged: bool) {
        if self.shared.is_some() && !session.is_empty() {
            let ttl_ms = store_ms(self.options.dedup.session_ttl_ms);
            self.effect(Op::Rollbacks { session: session.to_string(), flagged, ttl_ms });
        }
    }

    /// A leader about to wait `backoff` before its next attempt keeps its lease that long, and that attempt's.
    pub(super) fn renew_lease(&mut self, turn_id: u32, index: usize, backoff: Duration, now: Instant) {
        let Some(shared) = self.shared.as_ref() else { return };
        let slot = &self.turns[&turn_id].slots[index];
        let Some((key, flight)) = slot.fills.clone().filter(|(_, id)| shared.leases.contains_key(id)) else { return };
        let tool = slot.tool.clone().expect("a retried call has a tool");
        let owner = shared.owner_of(flight);
        let lease = lease_ms(&tool, self.waits_ms(turn_id, index, now)).saturating_add(backoff.as_millis() as u64);
        self.effect(Op::Lookup { key, owner: Some(owner), lease_ms: Some(store_ms(lease)) });
    }

    /// A call settles while tickets of its own are out (or timed out, and may still be answered): whether it ran
    /// decides what they give back when they are answered. One answered by an identical call's flight, or from the
    /// cache, used its query, not its tokens.
    pub(super) fn settled_while_asking(&mut self, slot: &mut super::Slot, result: &ToolResult) {
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
            let (wait, replies) = self.shared().held_answers.remove(&ticket).expect("held above");
            self.give_back(&wait, &replies);
        }
    }

    /// A call's result says the store failed it, and why.
    pub(super) fn note_store(&mut self, result: &mut ToolResult, why: String) {
        if let Some(shared) = self.shared.as_mut() {
            shared.stats.unavailable += 1;
        }
        result.metadata.store = Some("unavailable");
        result.metadata.store_error = Some(why);
    }

    /// A budget spending given back: to the shared counter, or the memory store's.
    pub(super) fn unspend(&mut self, key: String, amount: f64, window: u64) {
        if self.shared.is_some() {
            self.effect(Op::Unspend { key, amount, window });
        } else {
            self.store.unspend(&key, amount, window);
        }
    }

    /// A token given back: to the shared bucket, or the memory store's.
    pub(super) fn refund(&mut self, key: String, bucket: Bucket) {
        if self.shared.is_some() {
            self.effect(Op::Refund { key, capacity: bucket.capacity });
        } else {
            self.store.refund_token(&key, bucket);
        }
    }

    /// A query counted on arrival that never ran after all.
    pub(super) fn uncount(&mut self, session: String, key: String) {
        if self.shared.is_some() {
            self.effect(Op::Uncount { session, key });
        } else {
            self.store.decrement(&session, &key);
        }
    }

    /// A flight's result kept for identical calls; with a shared store, the flight's lease goes with it.
    pub(super) fn keep_result(&mut self, key: String, kept: &str, ttl: Duration, flight: u32, now: Instant) {
        match self.shared.as_mut() {
            Some(shared) => {
                let owner = shared.leases.remove(&flight).map(|_| shared.owner_of(flight));
                let ttl_ms = store_ms(ttl.as_millis().min(u128::from(MAX_STORE_MS)) as u64);
                self.effect(Op::Put { key, value: kept.to_string(), ttl_ms, owner });
            }
            None => self.store.put(key, kept.into(), ttl, now),
        }
    }

    /// A query's result kept in its session for `reuse`.
    pub(super) fn keep_reused(&mut self, session: &str, key: &str, kept: &str, now: Instant) {
        let ttl = Duration::from_millis(self.options.dedup.session_ttl_ms);
        if self.shared.is_some() {
            let op = Op::Keep { session: session.to_string(), key: key.to_string(), value: kept.to_string(), ttl_ms: store_ms(self.options.dedup.session_ttl_ms) };
            self.effect(op);
        } else {
            self.store.put(super::reuse_key(session, key), kept.into(), ttl, now);
        }
    }

    /// A flight that ended without being handed on lets its lease go (one handed to a waiter keeps it).
    pub(super) fn release_lease(&mut self, key: &str, flight: u32) {
        let still_flying = self.flights.get(key) == Some(&flight);
        let Some(shared) = self.shared.as_mut() else { return };
        if still_flying || !shared.leases.contains_key(&flight) {
            return;
        }
        shared.leases.remove(&flight);
        let owner = shared.owner_of(flight);
        self.effect(Op::Release { key: key.to_string(), owner });
    }

    /// The store's counters, for `stats()`: absent without a shared store.
    pub(super) fn store_stats(&self) -> Option<Value> {
        self.shared.as_ref().map(|s| {
            let mut stats = serde_json::to_value(s.stats).expect("store stats serialize");
            // Tickets out, and late answers kept until their call settles: a gauge that must come back to 0.
            stats["pending"] = (s.waits.len() + s.held_answers.len()).into();
            stats
        })
    }
}

/// How many operations a ticket carries.
fn ops_of(wait: &Wait) -> usize {
    match wait {
        Wait::Effects(n) => *n,
        Wait::Remembered { .. } => 1,
        Wait::Call { plan, .. } => {
            usize::from(plan.count.is_some()) + usize::from(plan.lookup.is_some()) + plan.spends.len() + usize::from(plan.breaker.is_some()) + plan.takes.as_ref().map_or(0, Vec::len)
        }
        Wait::Breaker(_) => 1,
    }
}

/// How long a leader's lease lasts for one attempt: its rate-limit waits, its time limit and a margin. A retry
/// renews it for its backoff and its own attempt.
fn lease_ms(tool: &Tool, waits_ms: u64) -> u64 {
    tool.timeout_ms.saturating_add(waits_ms).saturating_add(shared::LEASE_MARGIN_MS)
}

/// How long a call waits for an identical call another process runs: as long as that call may take with all its
/// retries (its processes hold the tool to the same limits).
fn waiter_limit_ms(tool: &Tool, waits_ms: u64) -> u64 {
    let retries = if tool.retry.max_retries > 0 { tool.retry.max_elapsed_ms } else { 0 };
    lease_ms(tool, waits_ms).saturating_add(retries)
}

/// A time as the store is told it: at least a millisecond, at most `MAX_STORE_MS`.
fn store_ms(ms: u64) -> u64 {
    ms.clamp(1, MAX_STORE_MS)
}

/// How long a breaker's state outlives its last change: its window and its opening, with a margin. A state that
/// expired is a closed breaker with an empty window.
fn breaker_ttl_ms(config: &BreakerConfig) -> u64 {
    store_ms(config.window_ms.saturating_add(config.open_ms).saturating_add(60_000))
}

/// A remembered approval's field in its session: the tool and the rule that asked.
fn remembered_field(tool: &str, by: &str) -> String {
    format!("{tool}{}{by}", keys::SEP)
}

