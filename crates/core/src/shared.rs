//! A store shared between processes (Redis, through the application's own client): what the engine asks of it and
//! what it answers. The engine never waits on it inline: a call that needs the store is suspended on a ticket, the
//! host runs the ticket's operations (each one script on one hash slot) and answers, and the call resumes. Every
//! ticket has a deadline; a store that does not answer in time counts as unavailable, and each station then fails
//! open or closed as configured.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::breaker::{Admission, Phase};
use crate::result::{ErrorKind, ToolResult};
use crate::store::Bucket;
use crate::timer::seconds;

/// What a station does when the shared store fails: go on without it, or not run the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fail {
    Open,
    Closed,
}

/// Per station: cache and dedup only save work, so they fail open; a rate limit protects an upstream, so it fails
/// closed (an outage of the store must not let every process call the upstream unlimited), and so does a budget
/// (it protects the bill); sessions (remembered approvals, rollback counts) fail open to asking again, and a breaker
/// fails open to what this process last knew of it.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct OnError {
    pub cache: Fail,
    pub dedup: Fail,
    pub rate_limit: Fail,
    pub sessions: Fail,
    pub budget: Fail,
    pub breaker: Fail,
}

impl Default for OnError {
    fn default() -> Self {
        OnError { cache: Fail::Open, dedup: Fail::Open, rate_limit: Fail::Closed, sessions: Fail::Open, budget: Fail::Closed, breaker: Fail::Open }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SharedStoreOptions {
    /// How long one ticket may take before the store counts as unavailable for it.
    pub timeout_ms: u64,
    #[serde(default)]
    pub on_error: OnError,
}

/// One operation, as the host's store adapter reads it (`{op: 'take', key, …}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Op {
    /// Counts a query in a session (when `key` is given) and reads what the session keeps for it.
    Count { session: String, key: Option<String>, ttl_ms: u64, refuse: bool, reuse: bool, rollbacks: bool },
    Remembered { session: String, field: String },
    /// A cached entry, or (with an owner) the lease to compute it.
    Lookup { key: String, owner: Option<String>, lease_ms: Option<u64> },
    Take { key: String, capacity: f64, refill_per_sec: f64, max_wait_ms: f64 },
    Refund { key: String, capacity: f64 },
    Put { key: String, value: String, ttl_ms: u64, owner: Option<String> },
    Release { key: String, owner: String },
    Uncount { session: String, key: String },
    Keep { session: String, key: String, value: String, ttl_ms: u64 },
    Remember { session: String, field: String, ttl_ms: u64 },
    /// A judged result: a flag adds one to the session's consecutive rollbacks, no flag ends the run.
    Rollbacks { session: String, flagged: bool, ttl_ms: u64 },
    /// Adds `amount` to a budget counter unless that passes `limit`; a counter with a window starts over with each.
    Spend { key: String, amount: f64, limit: f64, ttl_ms: u64, window_ms: Option<u64> },
    /// Gives back a spending of a call that never ran, in the window it was made in.
    Unspend { key: String, amount: f64, window: u64 },
    /// Lets an attempt through a breaker the process does not know to be closed: counted, a trial, or refused.
    BreakerAdmit { key: String, half_open_calls: u32, trial_wait_ms: u64, ttl_ms: u64 },
    /// How an admitted attempt ended (`admission`: `counted` or `trial`, of `generation`).
    BreakerRecord {
        key: String,
        admission: &'static str,
        generation: u64,
        outcome: &'static str,
        failure_rate: f64,
        min_calls: u32,
        window_ms: u64,
        open_ms: u64,
        half_open_calls: u32,
        ttl_ms: u64,
    },
}

/// One operation's answer; which fields are set depends on the operation.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reply {
    pub error: Option<String>,
    pub earlier: Option<u64>,
    pub reused: Option<String>,
    pub rollbacks: Option<u32>,
    pub remembered: Option<bool>,
    pub value: Option<String>,
    pub lease: Option<String>,
    pub lease_left_ms: Option<f64>,
    pub take: Option<String>,
    /// A token's wait, a breaker's time until it may be tried, a budget window's time until it starts over.
    pub wait_ms: Option<f64>,
    /// A spending: `ok` or `over`, how much was used (after, or before when over), and its window.
    pub spent: Option<String>,
    pub used: Option<f64>,
    pub window: Option<u64>,
    /// A breaker: `counted`, `trial` or `refused`, the generation of a trial, the phase after the operation, and
    /// the phase it left when the operation changed it (with the counts that opened it).
    pub admit: Option<String>,
    pub generation: Option<u64>,
    pub phase: Option<String>,
    pub from: Option<String>,
    pub calls: Option<u32>,
    pub failures: Option<u32>,
}

impl Reply {
    pub fn failed(why: &str) -> Self {
        Reply { error: Some(why.to_string()), ..Reply::default() }
    }
}

/// The host's answer to a ticket, whole or in part: one entry per operation, in order, `null` (None here) for one
/// not answered yet, which a later answer brings (the operations of one ticket may lie on different nodes, and
/// each is answered as its node answers). Each reply is read alone: one that cannot be read fails its operation
/// only. An answer that cannot be read at all, or that has too few entries, fails every operation it leaves out.
pub fn read_answer(json: &str, ops: usize) -> Vec<Option<Reply>> {
    let unreadable = |e: serde_json::Error| Reply::failed(&format!("the store's answer could not be read ({e})"));
    let entries = match serde_json::from_str::<Vec<&RawValue>>(json) {
        Ok(entries) => entries,
        Err(e) => return vec![Some(unreadable(e)); ops],
    };
    (0..ops)
        .map(|at| match entries.get(at) {
            None => Some(Reply::failed("the store gave no answer for this operation")),
            Some(entry) if entry.get() == "null" => None,
            Some(entry) => Some(serde_json::from_str(entry.get()).unwrap_or_else(unreadable)),
        })
        .collect()
}

/// A token as the shared bucket answered: taken now, reserved for after a wait, refused (try after), or failed.
#[derive(Debug, Clone, PartialEq)]
pub enum Token {
    Now,
    After(Duration),
    Refused(Duration),
    Failed(String),
}

impl Token {
    pub fn of(reply: &Reply) -> Token {
        // A wait no bucket could ask (a week) is the store's garbage, not a wait to tell a model.
        let wait = || seconds(reply.wait_ms.unwrap_or(0.0) / 1000.0).min(MAX_WAIT);
        match (&reply.error, reply.take.as_deref()) {
            (Some(e), _) => Token::Failed(e.clone()),
            (None, Some("now")) => Token::Now,
            (None, Some("after")) => Token::After(wait()),
            (None, Some("refused")) => Token::Refused(wait()),
            (None, _) => Token::Failed("the store's answer to a token take could not be read".into()),
        }
    }

    /// Whether the bucket gave this call a token (now or reserved), which goes back if the call does not run.
    pub fn taken(&self) -> bool {
        matches!(self, Token::Now | Token::After(_))
    }
}

/// What a call waiting on the store asked, in the order of its operations: a session count, a cache lookup, its
/// budgets' spendings, its breaker's admission, then one token take per bucket.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub count: Option<CountPlan>,
    pub lookup: Option<LookupPlan>,
    pub spends: Vec<Spending>,
    /// The breaker's admission is asked (its tool's name).
    pub breaker: Option<String>,
    /// The buckets (key, shape, the wait the call may make, whether the executor's own) this ticket takes the
    /// call's tokens from; None when it takes none (tokens come later, or the call will not run itself).
    pub takes: Option<Vec<(String, Bucket, Duration, bool)>>,
}

/// A budget limit a call's ticket adds to: its place among the call's limits, its key, what the call adds, the
/// limit, and its window.
#[derive(Debug, Clone)]
pub struct Spending {
    pub at: usize,
    pub key: String,
    pub amount: f64,
    pub limit: f64,
    pub window: Option<Duration>,
}

#[derive(Debug, Clone)]
pub struct CountPlan {
    pub session: String,
    /// The query counted under dedup; None when only the session's rollback count is read.
    pub key: Option<String>,
    /// The tool refuses repeats: the script takes a refused repeat's count back itself.
    pub refuses: bool,
    pub rollbacks: bool,
}

#[derive(Debug, Clone)]
pub struct LookupPlan {
    pub key: String,
    /// The flight whose lease this lookup takes on a miss.
    pub flight: u32,
}

/// What a ticket took that goes back once its call has settled: the query it counted (the call never ran), and
/// the spendings, the breaker trial and the tokens it took (the attempt they were for never started).
#[derive(Debug, Clone, Copy, Default)]
pub struct Unused {
    pub count: bool,
    pub attempt: bool,
}

/// Why a call waits on the store, and where the answer goes.
#[derive(Debug, Clone)]
pub enum Wait {
    /// Operations no call waits on (a put, a refund), how many: only their failures are counted.
    Effects(usize),
    /// `attempt`: the call's attempts when it was sent; `unused`: what its call did not use, decided when the
    /// call settles.
    Call { turn: u32, index: usize, plan: Plan, attempt: u32, unused: Unused },
    /// Whether this session approved the rule before, for the call about to be asked: the rule and its reason.
    Remembered { turn: u32, index: usize, by: String, reason: Option<String> },
    /// How an attempt of this tool ended, told to its breaker: the reply says the phase now.
    Breaker(String),
}

/// How long a waiter looks again for the result of a call that another process runs: from a short first look,
/// doubling, to at most this; never past the moment the other's lease ends.
pub const FIRST_POLL: Duration = Duration::from_millis(5);
pub const MAX_POLL: Duration = Duration::from_millis(250);

/// How long past its own limits a leader's lease lasts: the leader settles (and releases it) well within this.
pub const LEASE_MARGIN_MS: u64 = 1_000;

/// The longest wait a token take may answer.
pub const MAX_WAIT: Duration = Duration::from_secs(7 * 24 * 3600);

/// How long a retry hint tells a model to wait when a rate limit failed closed because the store is down.
pub const UNAVAILABLE_RETRY: Duration = Duration::from_secs(1);

/// Store operations answered late (after their ticket's deadline) are still cleaned up, for this many tickets.
pub const LATE_TICKETS: usize = 10_000;

/// The longest time a store is told (a TTL, a lease): about 31,700 years, far inside what Redis and a JSON number
/// hold exactly.
pub const MAX_STORE_MS: u64 = 1_000_000_000_000_000;

/// What the next look of a waiter waits: double the last, bounded, and no later than just after the lease ends.
pub fn next_poll(last: Duration, lease_left_ms: Option<f64>) -> Duration {
    let doubled = (last * 2).clamp(FIRST_POLL, MAX_POLL);
    match lease_left_ms {
        Some(ms) if ms >= 0.0 => doubled.min(seconds(ms / 1000.0).saturating_add(Duration::from_millis(1))),
        _ => doubled,
    }
}

/// A call not run because a station that fails closed could not reach the store.
pub fn unavailable(call_id: String, tool: &str, station: &str, why: &str) -> ToolResult {
    let error = format!(
        "Tool \"{tool}\" was not run: the shared store its {station} needs is unavailable ({why}). Try again in a moment."
    );
    try_again_later(call_id, tool, ErrorKind::Unavailable, error)
}

/// A spending as the shared counter answered: made (in its window), refused (what was used, and when a window starts
/// over), or failed.
#[derive(Debug, Clone, PartialEq)]
pub enum Spent {
    Made(u64),
    Over(f64, Option<Duration>),
    Failed(String),
}

impl Spent {
    pub fn of(reply: &Reply, windowed: bool) -> Spent {
        match (&reply.error, reply.spent.as_deref()) {
            (Some(e), _) => Spent::Failed(e.clone()),
            (None, Some("ok")) => Spent::Made(reply.window.unwrap_or(0)),
            (None, Some("over")) => {
                let resets = windowed.then(|| seconds(reply.wait_ms.unwrap_or(0.0).max(0.0) / 1000.0).min(MAX_WAIT));
                Spent::Over(reply.used.filter(|u| u.is_finite()).unwrap_or(0.0), resets)
            }
            (None, _) => Spent::Failed("the store's answer to a budget spending could not be read".into()),
        }
    }
}

/// A shared breaker as the store answered: its phase, how long it stays open, the phase it left when the operation
/// changed it (with the counts that opened it), and what it let an attempt do (a reply to an outcome lets nothing
/// through and reads as counted).
#[derive(Debug, Clone, PartialEq)]
pub struct BreakerSaid {
    pub phase: Phase,
    pub open_for: Duration,
    pub from: Option<Phase>,
    pub calls: Option<u32>,
    pub failures: Option<u32>,
    pub admission: Admission,
}

impl BreakerSaid {
    /// Err: the store failed. A reply no breaker could give (a phase or admission it does not know, a wait past a
    /// century) is garbage found in the store: it reads as a closed breaker, since garbage must never keep a tool
    /// from running (nor be kept as this process's view). What no setting could give, not what this process's
    /// would: another process of the fleet may be configured otherwise.
    pub fn of(reply: &Reply) -> Result<BreakerSaid, String> {
        if let Some(e) = &reply.error {
            return Err(e.clone());
        }
        let closed = BreakerSaid { phase: Phase::Closed, open_for: Duration::ZERO, from: None, calls: None, failures: None, admission: Admission::Counted(None) };
        Ok(Self::read(reply).unwrap_or(closed))
    }

    fn read(reply: &Reply) -> Option<BreakerSaid> {
        const LONGEST_WAIT_MS: f64 = 3_155_760_000_000.0;
        let phase = Phase::parse(reply.phase.as_deref()?)?;
        let from = match reply.from.as_deref() {
            Some(from) => Some(Phase::parse(from).filter(|from| *from != phase)?),
            None => None,
        };
        let wait = || {
            let ms = reply.wait_ms.unwrap_or(0.0);
            (0.0..=LONGEST_WAIT_MS).contains(&ms).then(|| seconds(ms / 1000.0))
        };
        let open_for = if phase == Phase::Open { wait()? } else { Duration::ZERO };
        let admission = match (reply.admit.as_deref(), phase) {
            (None, _) | (Some("counted"), Phase::Closed) => Admission::Counted(None),
            (Some("trial"), Phase::HalfOpen) => Admission::Trial(reply.generation?),
            (Some("refused"), Phase::Open) => Admission::Refused(open_for),
            (Some("refused"), Phase::HalfOpen) => Admission::Refused(wait()?),
            _ => return None,
        };
        Some(BreakerSaid { phase, open_for, from, calls: reply.calls, failures: reply.failures, admission })
    }
}

/// A call not run because the store that keeps its rate limit is down (the limit fails closed): `rate_limited`,
/// as the model should read it, with the store's reason.
pub fn no_token(call_id: String, tool: &str, why: &str) -> ToolResult {
    let ms = UNAVAILABLE_RETRY.as_millis();
    let error = format!(
        "Tool \"{tool}\" was not run: the shared store that keeps its rate limit is unavailable ({why}), so no token \
         could be taken. Wait about {ms} ms before calling it again."
    );
    try_again_later(call_id, tool, ErrorKind::RateLimited, error)
}

fn try_again_later(call_id: String, tool: &str, kind: ErrorKind, error: String) -> ToolResult {
    let mut result = ToolResult::failure(call_id, tool.to_string(), kind, error, true);
    result.retry_after_ms = Some(UNAVAILABLE_RETRY.as_millis() as u64);
    result
}

/// A call whose identical twin ran in another process for longer than this call may wait.
pub fn waited_too_long(call_id: String, tool: &str, waited_ms: u64) -> ToolResult {
    let error = format!(
        "Tool \"{tool}\": the same call is running in another process and gave no result within {waited_ms} ms, \
         so this one was not run. Try again later."
    );
    ToolResult::failure(call_id, tool.to_string(), ErrorKind::Timeout, error, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ops_cross_as_tagged_objects_with_camel_case_fields() {
        let op = Op::Take { key: "t\u{1}".into(), capacity: 10.0, refill_per_sec: 0.5, max_wait_ms: 0.0 };
        assert_eq!(serde_json::to_value(&op).unwrap(), json!({"op": "take", "key": "t\u{1}", "capacity": 10.0, "refillPerSec": 0.5, "maxWaitMs": 0.0}));
        let op = Op::Count { session: "s".into(), key: None, ttl_ms: 5, refuse: false, reuse: true, rollbacks: true };
        assert_eq!(serde_json::to_value(&op).unwrap(), json!({"op": "count", "session": "s", "key": null, "ttlMs": 5, "refuse": false, "reuse": true, "rollbacks": true}));
    }

    #[test]
    fn an_unreadable_or_short_answer_fails_what_it_leaves_unanswered() {
        let failed = |reply: &Option<Reply>, why: &str| reply.as_ref().and_then(|r| r.error.as_deref()).is_some_and(|e| e.contains(why));
        let replies = read_answer("not json", 2);
        assert!(replies.iter().all(|r| failed(r, "could not be read")));
        let replies = read_answer(r#"[{"take":"now"}]"#, 2);
        assert_eq!(Token::of(replies[0].as_ref().unwrap()), Token::Now);
        assert!(failed(&replies[1], "no answer"));
        assert_eq!(read_answer(r#"[{"earlier":1},{"earlier":2},{"earlier":3}]"#, 2).len(), 2);
    }

    #[test]
    fn each_reply_of_an_answer_is_read_alone_and_null_is_not_answered_yet() {
        let replies = read_answer(r#"[null, {"take": 7}, {"take": "now"}, null]"#, 4);
        assert!(replies[0].is_none() && replies[3].is_none(), "answered later");
        assert!(replies[1].as_ref().unwrap().error.as_deref().unwrap().contains("could not be read"), "its own operation fails");
        assert_eq!(Token::of(replies[2].as_ref().unwrap()), Token::Now, "the others stand");
    }

    #[test]
    fn token_replies_read_as_takes() {
        let reply = |v: serde_json::Value| serde_json::from_value::<Reply>(v).unwrap();
        assert_eq!(Token::of(&reply(json!({"take": "after", "waitMs": 250.0}))), Token::After(Duration::from_millis(250)));
        assert_eq!(Token::of(&reply(json!({"take": "refused", "waitMs": 1500}))), Token::Refused(Duration::from_millis(1500)));
        assert!(matches!(Token::of(&reply(json!({"take": "maybe"}))), Token::Failed(_)));
        assert_eq!(Token::of(&reply(json!({"take": "refused", "waitMs": 1e300}))), Token::Refused(MAX_WAIT), "bounded, no panic");
        assert!(matches!(Token::of(&reply(json!({"error": "WRONGPASS"}))), Token::Failed(e) if e == "WRONGPASS"));
    }

    #[test]
    fn polls_double_within_bounds_and_stop_at_the_lease_end() {
        assert_eq!(next_poll(Duration::ZERO, None), FIRST_POLL);
        assert_eq!(next_poll(Duration::from_millis(40), None), Duration::from_millis(80));
        assert_eq!(next_poll(Duration::from_secs(1), None), MAX_POLL);
        assert_eq!(next_poll(Duration::from_millis(100), Some(20.0)), Duration::from_millis(21));
        assert_eq!(next_poll(Duration::from_millis(100), Some(1e300)), Duration::from_millis(200), "a huge lease left does not overflow");
    }
}
