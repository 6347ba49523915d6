//! The one path by which the stations that remember ask the store, whichever store it is. A call's questions (a
//! plan: its dedup count, its cache lookup, its budgets' spendings, its breaker's admission, its tokens) become the
//! stations' operations; the memory store answers them at once, in order, and is not asked what no longer decides
//! anything; a shared store answers them all in one ticket (see `tickets`). Either way the call resumes here on the
//! replies, each read by its station's room, and goes on as they decide.

use std::time::Instant;

use crate::breaker;
use crate::budget::Spending;
use crate::cache;
use crate::dedup::{self, Mode};
use crate::ops::{Op, Reply};
use crate::ratelimit::{self, Want};
use crate::registry::Tool;
use crate::result::ToolResult;
use crate::shared::{self, OnError};
use crate::timer::after;

use super::call::{At, Reserved, Slot};
use super::flights::{lease_ms, Deferred};
use super::wire::Step;
use super::{Alarm, Engine};

/// What a call asks the store, in the order of its operations: a session count, a cache lookup, its budgets'
/// spendings, its breaker's admission, then one token take per bucket.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub(super) count: Option<CountPlan>,
    pub(super) lookup: Option<LookupPlan>,
    pub(super) spends: Vec<Spending>,
    /// The breaker's admission is asked.
    pub(super) breaker: bool,
    /// The buckets the call's tokens come from in this plan; None when it takes none (they come later, or the call
    /// will not run itself).
    pub(super) takes: Option<Vec<Want>>,
    pub(super) asked: Asked,
}

/// Where the call stood when it asked, which says how it goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Asked {
    /// Arriving in its turn (dedup and cache, asked of the memory store at once).
    Arriving,
    /// Handed out by its schedule (dedup and cache, deferred to then with a shared store), or looking again for
    /// the result of an identical call another process runs.
    HandedOut,
    /// About to start an attempt (budgets, breaker, tokens).
    Running,
}

impl Plan {
    pub(super) fn new(asked: Asked) -> Self {
        Plan { count: None, lookup: None, spends: Vec::new(), breaker: false, takes: None, asked }
    }

    /// How many operations it asks.
    pub(super) fn len(&self) -> usize {
        usize::from(self.count.is_some())
            + usize::from(self.lookup.is_some())
            + self.spends.len()
            + usize::from(self.breaker)
            + self.takes.as_ref().map_or(0, Vec::len)
    }
}

#[derive(Debug, Clone)]
pub(super) struct CountPlan {
    pub(super) session: String,
    /// The query counted under dedup; None when only the session's rollback count is read.
    pub(super) key: Option<String>,
    pub(super) mode: Mode,
    pub(super) rollbacks: bool,
}

impl CountPlan {
    fn op(&self, ttl_ms: u64) -> Op<'_> {
        dedup::count(&self.session, self.key.as_deref(), self.mode, self.rollbacks, ttl_ms)
    }
}

/// What the breaker of `tool` is asked before an attempt.
fn admit_op(tool: &Tool) -> Option<Op<'_>> {
    tool.breaker.as_ref().map(|config| breaker::admit_op(&tool.spec.name, config, tool.timeout_ms))
}

#[derive(Debug, Clone)]
pub(super) struct LookupPlan {
    pub(super) key: String,
    /// The flight whose lease this lookup takes on a miss: a store shared between processes elects one filler per
    /// key, so the flight is chosen before it asks. The memory store's flights are this process's own, chosen once
    /// the entry is known to be missing (None here).
    pub(super) flight: Option<u32>,
}

/// What a call's replies decided: answered here, waiting on another process, or to run.
pub(super) enum Resumed {
    Answered(Box<ToolResult>),
    Held(Option<f64>),
    Run,
}

impl Resumed {
    pub(super) fn runs(&self) -> bool {
        matches!(self, Resumed::Run)
    }
}

/// A plan's replies as the stations read them: a ticket's, all in; or the memory store's, asked one operation at
/// a time as they are read (each made only if it is asked).
pub(super) enum Replies {
    Ticket(std::vec::IntoIter<Reply>),
    Memory,
}

/// The rest of a resumed call: when its reserved tokens are due, which buckets they came from, and (for a call
/// looking again for another process's result) how it had been waiting.
struct Resumption {
    resumed: Resumed,
    ready_at: Instant,
    reserved: Reserved,
    polled: Option<(Instant, std::time::Duration, Instant)>,
}

impl Engine {
    /// Asks the store what `plan` needs for the call at `at`. The memory store answers now and the call goes on
    /// here; a shared store is sent a ticket, and the call waits on it (in the place its caller took for it). For
    /// a call still arriving, true when it may run (otherwise its slot holds its result).
    pub(super) fn ask(&mut self, at: At, plan: Plan, now: Instant, step: &mut Step) -> bool {
        if self.shared.is_some() {
            let ops = self.ops_of(at, &plan, now);
            self.send_call(at, ops, plan, now);
            return true;
        }
        self.resume_on(at, plan, Replies::Memory, now, step)
    }

    /// An operation no call waits on (a result kept, a token given back): the memory store does it now, a shared
    /// store with the step.
    pub(super) fn effect(&mut self, op: Op, now: Instant) {
        match self.shared.as_mut() {
            Some(shared) => shared.queue(op),
            None => {
                self.store.answer(op, now);
            }
        }
    }

    /// How a station fails when the shared store does (the memory store does not fail).
    pub(super) fn on_error(&self) -> OnError {
        self.shared.as_ref().map_or_else(OnError::default, |s| s.options.on_error)
    }

    /// The operations of a plan, in order, as a shared store's ticket tells them.
    fn ops_of(&self, at: At, plan: &Plan, now: Instant) -> Vec<Op<'static>> {
        let tool = self.slot(at).tool();
        let ttl_ms = self.options.dedup.session_ttl_ms;
        let mut ops = Vec::with_capacity(plan.len());
        ops.extend(plan.count.iter().map(|count| count.op(ttl_ms)));
        if let Some(lookup) = &plan.lookup {
            // A lookup's lease covers the waits for tokens the call may make once it leads.
            let lease = lookup.flight.map(|flight| (self.lease_owner(flight), lease_ms(tool, self.waits_ms(at, now))));
            ops.push(cache::lookup(lookup.key.as_str(), lease));
        }
        ops.extend(plan.spends.iter().map(|spending| spending.op(ttl_ms)));
        ops.extend(plan.breaker.then(|| admit_op(tool)).flatten());
        ops.extend(plan.takes.iter().flatten().map(ratelimit::take));
        ops.into_iter().map(Op::for_host).collect()
    }

    /// The next operation's reply: a ticket's, or the memory store's to `op`, asked now unless the call is answered
    /// already (`decided`): then it is not asked at all, and nothing it would have taken needs giving back.
    fn reply<'p>(&mut self, replies: &mut Replies, decided: bool, op: impl FnOnce() -> Option<Op<'p>>, now: Instant) -> Option<Reply> {
        match replies {
            Replies::Ticket(replies) => replies.next(),
            Replies::Memory if decided => None,
            Replies::Memory => op().map(|op| self.store.answer(op, now)),
        }
    }

    /// A plan's replies are in: each station reads its own, then the call goes on as they decided.
    pub(super) fn resume_on(&mut self, at: At, plan: Plan, replies: Replies, now: Instant, step: &mut Step) -> bool {
        let waited = matches!(replies, Replies::Ticket(_));
        let resumption = self.resume(at, &plan, replies, now, step);
        self.go_on(at, &plan, waited, resumption, now, step)
    }

    /// Dedup, then the cache, then budgets, the breaker and the tokens: the first that answers the call decides,
    /// and what the others took is the slot's, so that it goes back if the call does not run after all.
    fn resume(&mut self, at: At, plan: &Plan, mut replies: Replies, now: Instant, step: &mut Step) -> Resumption {
        let mut slot = self.lift(at);
        slot.pending = None;
        let ttl_ms = self.options.dedup.session_ttl_ms;
        // A look again of a call waiting on another process: its miss was counted and marked the first time.
        let polled = slot.polling.take();
        let mut resumed = Resumed::Run;
        if let Some(count) = &plan.count {
            if let Some(reply) = self.reply(&mut replies, false, || Some(count.op(ttl_ms)), now) {
                resumed = self.counted(at, &mut slot, count, &reply);
            }
        }
        if let Some(lookup) = &plan.lookup {
            // The memory store's flights are this process's own: its lookups take no lease.
            if let Some(reply) = self.reply(&mut replies, !resumed.runs(), || Some(cache::lookup(lookup.key.as_str(), None)), now) {
                self.looked_up(at, &mut slot, lookup, &reply, polled.is_some(), &mut resumed);
            }
        }
        for spending in &plan.spends {
            if let Some(reply) = self.reply(&mut replies, !resumed.runs(), || Some(spending.op(ttl_ms)), now) {
                self.spent(at, &mut slot, spending, &reply, &mut resumed);
            }
        }
        if plan.breaker {
            let tool = slot.tool().clone();
            if let Some(reply) = self.reply(&mut replies, !resumed.runs(), || admit_op(&tool), now) {
                self.breaker_answered(&mut slot, &reply, &mut resumed, now, step);
            }
        }
        let mut ready_at = now;
        let mut reserved = Vec::new();
        for want in plan.takes.iter().flatten() {
            let reply = self.reply(&mut replies, !resumed.runs(), || Some(ratelimit::take(want)), now);
            let taken = reply.and_then(|reply| self.token_taken(&mut slot, want, &reply, &mut resumed));
            if let Some(wait) = taken {
                ready_at = ready_at.max(after(now, wait));
                reserved.push((want.key.clone(), want.bucket));
            }
        }
        // Tokens this call took but will not use go back.
        if !resumed.runs() {
            for (key, bucket) in reserved.drain(..) {
                self.effect(ratelimit::refund(key, bucket), now);
            }
        }
        self.put_back(at, slot);
        Resumption { resumed, ready_at, reserved, polled }
    }

    /// The call goes on as its replies decided. One that waited on a ticket held a place, which it gives up here.
    fn go_on(&mut self, at: At, plan: &Plan, waited: bool, resumption: Resumption, now: Instant, step: &mut Step) -> bool {
        let Resumption { resumed, ready_at, reserved, polled } = resumption;
        match (plan.asked, resumed) {
            (Asked::Arriving, Resumed::Answered(result)) => {
                self.slot_mut(at).result = Some(result);
                return false;
            }
            (Asked::Arriving, _) => {}
            (_, Resumed::Answered(result)) if waited => self.settle_waiting(at, result, now, step),
            (_, Resumed::Answered(result)) => self.settle(at, result, now, step),
            (_, Resumed::Held(left)) => {
                let (since, last, _) = polled.unwrap_or((now, std::time::Duration::ZERO, now));
                let wait = shared::next_poll(last, left);
                let due = after(now, wait);
                self.slot_mut(at).polling = Some((since, wait, due));
                self.deadlines.arm(due, Alarm::Poll(at.turn, at.index));
            }
            (_, Resumed::Run) => match self.slot(at).joined.clone() {
                // Joined an identical call of this process: it keeps waiting for it in its place, or, when that
                // flight ended meanwhile without it, looks up the entry itself.
                Some((key, flight)) => {
                    if !self.flight_waiters.get(&flight).is_some_and(|w| w.contains(&at)) {
                        self.slot_mut(at).joined = None;
                        self.release_place(&self.tool_of(at).spec.name);
                        self.ask_deferred(at, Deferred { count: None, cache_key: Some(key) }, now, step);
                    }
                }
                None => {
                    if waited {
                        self.release_place(&self.tool_of(at).spec.name);
                    }
                    match plan.takes {
                        None => self.run_now(at, now, step),
                        Some(_) if ready_at > now => self.wait_for_token(at, ready_at, reserved),
                        Some(_) => self.start_run(at, now, step),
                    }
                }
            },
        }
        true
    }

    /// The store failed one of a call's stations: it goes on without the store, or (closed) is not run.
    pub(super) fn store_failed(&mut self, slot: &mut Slot, fail: shared::Fail, station: &str, why: &str) -> Resumed {
        slot.store_error = Some(why.to_string());
        match fail {
            shared::Fail::Open => Resumed::Run,
            shared::Fail::Closed => Resumed::Answered(Box::new(shared::unavailable(slot.id.clone(), &slot.tool().spec.name, station, why))),
        }
    }
}
