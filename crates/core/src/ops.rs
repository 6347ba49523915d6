//! What the stations that remember ask a store, and what it answers: one operation per question. Each station
//! builds its own operations and reads its own replies; the memory store answers them in this process (`store`), a
//! shared store through the host, each operation one script of the server (the Lua of `toolgate/redis`, named after
//! the station and the operation: `Take` is `ratelimit.take`). An operation crosses to the host as a tagged object;
//! a reply comes back with the fields its operation sets.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde_json::value::RawValue;

/// A key, session or field of an operation: borrowed from the call while the memory store answers it at once, owned
/// once it goes out in a ticket.
pub type Text<'a> = Cow<'a, str>;

include!("generated/ops.rs");

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

/// The longest wait a shared store's answer may say (longer is its garbage).
pub const MAX_WAIT: Duration = Duration::from_secs(7 * 24 * 3600);

/// The longest time a shared store is told (a TTL, a lease): about 31,700 years, far inside what Redis and a JSON
/// number hold exactly.
pub const MAX_STORE_MS: u64 = 1_000_000_000_000_000;

/// A time as a shared store is told it: at least a millisecond (Redis refuses an expiry of 0), at most
/// `MAX_STORE_MS`.
fn store_ms(ms: u64) -> u64 {
    ms.clamp(1, MAX_STORE_MS)
}

fn own(text: Text<'_>) -> Text<'static> {
    Cow::Owned(text.into_owned())
}

impl Op<'_> {
    /// The operation as a shared store is told it: its own, to go out in a ticket, with its times in the range the
    /// store takes. The stations say them as they are, which the memory store answers to.
    pub fn for_host(self) -> Op<'static> {
        match self {
            Op::Count { session, key, ttl_ms, refuse, reuse, rollbacks } => {
                Op::Count { session: own(session), key: key.map(own), ttl_ms: store_ms(ttl_ms), refuse, reuse, rollbacks }
            }
            Op::Remembered { session, field } => Op::Remembered { session: own(session), field: own(field) },
            Op::Lookup { key, owner, lease_ms } => Op::Lookup { key: own(key), owner: owner.map(own), lease_ms: lease_ms.map(store_ms) },
            Op::Take { key, capacity, refill_per_sec, max_wait_ms } => Op::Take { key: own(key), capacity, refill_per_sec, max_wait_ms },
            Op::Refund { key, capacity, refill_per_sec } => Op::Refund { key: own(key), capacity, refill_per_sec },
            Op::Put { key, value, ttl_ms, owner } => Op::Put { key: own(key), value, ttl_ms: store_ms(ttl_ms), owner: owner.map(own) },
            Op::Release { key, owner } => Op::Release { key: own(key), owner: own(owner) },
            Op::Uncount { session, key } => Op::Uncount { session: own(session), key: own(key) },
            Op::Keep { session, key, value, ttl_ms } => Op::Keep { session: own(session), key: own(key), value, ttl_ms: store_ms(ttl_ms) },
            Op::Remember { session, field, ttl_ms } => Op::Remember { session: own(session), field: own(field), ttl_ms: store_ms(ttl_ms) },
            Op::Rollbacks { session, flagged, ttl_ms } => Op::Rollbacks { session: own(session), flagged, ttl_ms: store_ms(ttl_ms) },
            Op::Spend { key, amount, limit, ttl_ms, window_ms } => {
                Op::Spend { key: own(key), amount, limit, ttl_ms: store_ms(ttl_ms), window_ms: window_ms.map(store_ms) }
            }
            Op::Unspend { key, amount, window } => Op::Unspend { key: own(key), amount, window },
            Op::BreakerAdmit { key, half_open_calls, trial_wait_ms, ttl_ms } => {
                Op::BreakerAdmit { key: own(key), half_open_calls, trial_wait_ms, ttl_ms: store_ms(ttl_ms) }
            }
            Op::BreakerRecord { key, admission, generation, outcome, failure_rate, min_calls, window_ms, open_ms, half_open_calls, ttl_ms } => {
                let ttl_ms = store_ms(ttl_ms);
                Op::BreakerRecord { key: own(key), admission, generation, outcome, failure_rate, min_calls, window_ms, open_ms, half_open_calls, ttl_ms }
            }
        }
    }
}

/// A wait as a reply says it, in ms.
pub fn wait_ms(wait: Duration) -> f64 {
    wait.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use crate::ratelimit::Token;

    #[test]
    fn ops_cross_as_tagged_objects_with_camel_case_fields() {
        let op = Op::Take { key: "t\u{1}".into(), capacity: 10.0, refill_per_sec: 0.5, max_wait_ms: 0.0 };
        assert_eq!(serde_json::to_value(&op).unwrap(), json!({"op": "take", "key": "t\u{1}", "capacity": 10.0, "refillPerSec": 0.5, "maxWaitMs": 0.0}));
        let op = Op::Count { session: "s".into(), key: None, ttl_ms: 5, refuse: false, reuse: true, rollbacks: true };
        assert_eq!(serde_json::to_value(&op).unwrap(), json!({"op": "count", "session": "s", "key": null, "ttlMs": 5, "refuse": false, "reuse": true, "rollbacks": true}));
    }

    #[test]
    fn a_shared_store_is_told_times_from_a_millisecond_up_to_its_longest() {
        let count = Op::Count { session: "s".into(), key: None, ttl_ms: 0, refuse: false, reuse: false, rollbacks: false };
        assert!(matches!(count.for_host(), Op::Count { ttl_ms: 1, .. }));
        let spend = Op::Spend { key: "k".into(), amount: 1.0, limit: 2.0, ttl_ms: u64::MAX, window_ms: Some(0) };
        assert!(matches!(spend.for_host(), Op::Spend { ttl_ms: MAX_STORE_MS, window_ms: Some(1), .. }));
        let lookup = Op::Lookup { key: "k".into(), owner: Some("o".into()), lease_ms: Some(0) };
        assert!(matches!(lookup.for_host(), Op::Lookup { lease_ms: Some(1), .. }));
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
    fn a_reply_that_is_not_an_object_fails_its_operation() {
        // serde would read a short array into a struct whose fields may be absent: garbage, not an answer.
        for garbage in ["[[]]", "[[null, 3]]", "[[null, null, null, null, true]]", "[7]", r#"["now"]"#] {
            let replies = read_answer(garbage, 1);
            let error = replies[0].as_ref().and_then(|r| r.error.as_deref()).unwrap_or_default();
            assert!(error.contains("could not be read"), "{garbage}: {replies:?}");
        }
    }

    #[test]
    fn each_reply_of_an_answer_is_read_alone_and_null_is_not_answered_yet() {
        let replies = read_answer(r#"[null, {"take": 7}, {"take": "now"}, null]"#, 4);
        assert!(replies[0].is_none() && replies[3].is_none(), "answered later");
        assert!(replies[1].as_ref().unwrap().error.as_deref().unwrap().contains("could not be read"), "its own operation fails");
        assert_eq!(Token::of(replies[2].as_ref().unwrap()), Token::Now, "the others stand");
    }
}
