//! Station 8: token buckets per tool (optionally per context field) and for the whole executor.
//!
//! `"N/unit"` means a bucket of N tokens that refills continuously at N per unit: a burst of N at once, then one
//! every unit/N. `{ capacity, refillPerSecond }` says the same thing directly.

use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;

use crate::fields::Fields;
use crate::keys::SEP;
use crate::ops::{wait_ms, Op, Reply, Text, Word, MAX_WAIT};
use crate::result::{ErrorKind, ToolResult};
use crate::timer::seconds;

/// A token bucket: `capacity` tokens, refilled continuously at `refill_per_sec`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    pub capacity: f64,
    pub refill_per_sec: f64,
}

/// A token as the bucket answered: taken now, reserved for after a wait, refused (try after), or failed.
#[derive(Debug, Clone, PartialEq)]
pub enum Token {
    Now,
    After(Duration),
    Refused(Duration),
    Failed(String),
}

impl Token {
    pub fn of(reply: &Reply) -> Token {
        // A wait a shared store says past a week is its garbage, not a wait to tell a model.
        let wait = || reply.exact_wait.unwrap_or_else(|| seconds(reply.wait_ms.unwrap_or(0.0) / 1000.0).min(MAX_WAIT));
        match (&reply.error, reply.take) {
            (Some(e), _) => Token::Failed(e.clone()),
            (None, Some(Word::Now)) => Token::Now,
            (None, Some(Word::After)) => Token::After(wait()),
            (None, Some(Word::Refused)) => Token::Refused(wait()),
            (None, _) => Token::Failed("the store's answer to a token take could not be read".into()),
        }
    }

    /// Whether the bucket gave this call a token (now or reserved), which goes back if the call does not run.
    pub fn taken(&self) -> bool {
        matches!(self, Token::Now | Token::After(_))
    }
}

/// A bucket a call takes a token from: its key, its shape, how long the call may wait for the token, and whether it
/// is the executor's (the bucket all tools share).
#[derive(Debug, Clone, PartialEq)]
pub struct Want {
    pub key: String,
    pub bucket: Bucket,
    pub max_wait: Duration,
    pub whole: bool,
}

/// The buckets a call of `tool` takes its tokens from: the executor's and the tool's own, each keyed by the value of
/// its split field in the context, with the wait the call may make for it (never past `latest`, its turn's end).
pub fn wants(executor: Option<&RateLimit>, tool: &str, own: Option<&RateLimit>, fields: &Fields, latest: Option<Instant>, now: Instant) -> Vec<Want> {
    [(executor, true), (own, false)]
        .into_iter()
        .filter_map(|(limit, whole)| {
            let limit = limit?;
            let split = limit.key.as_ref().map_or("", |field| fields.get(field).map_or("", String::as_str));
            let key = if whole { format!("*{SEP}{split}") } else { format!("{tool}{SEP}{split}") };
            let max_wait = latest.map_or(limit.max_wait, |end| limit.max_wait.min(end.saturating_duration_since(now)));
            Some(Want { key, bucket: limit.bucket, max_wait, whole })
        })
        .collect()
}

/// A bucket's key read back (see `wants`): the tool it is for (`*`: the executor's bucket every call shares), and
/// the value of its split field.
pub fn read_key(key: &str) -> (&str, &str) {
    key.split_once(SEP).unwrap_or((key, ""))
}

/// What the rate limit asks the store: a token from the bucket, now or reserved within the wait the call may make.
pub fn take(want: &Want) -> Op<'_> {
    Op::Take { key: want.key.as_str().into(), capacity: want.bucket.capacity, refill_per_sec: want.bucket.refill_per_sec, max_wait_ms: wait_ms(want.max_wait) }
}

/// A token given back: the call it was taken for does not run after all.
pub fn refund<'a>(key: impl Into<Text<'a>>, bucket: Bucket) -> Op<'a> {
    Op::Refund { key: key.into(), capacity: bucket.capacity, refill_per_sec: bucket.refill_per_sec }
}

/// A rate limit as declared: the bucket, what splits it (a context field, e.g. `userId`), and how long a call may
/// wait for a token before it is refused.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimit {
    pub bucket: Bucket,
    pub key: Option<String>,
    pub max_wait: Duration,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Declared {
    #[serde(default)]
    limit: Option<Value>,
    #[serde(default)]
    capacity: Option<f64>,
    #[serde(default)]
    refill_per_second: Option<f64>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    max_wait_ms: Option<u64>,
}

impl RateLimit {
    /// Reads `'10/min'`, `{ capacity, refillPerSecond }`, or `{ limit, key?, maxWaitMs? }` with either as `limit`.
    pub fn parse(value: &Value) -> Result<Self, String> {
        match value {
            Value::String(text) => Ok(RateLimit { bucket: parse_rate(text)?, key: None, max_wait: Duration::ZERO }),
            Value::Object(_) => {
                let d: Declared = serde_json::from_value(value.clone()).map_err(|e| format!("invalid rateLimit: {e}"))?;
                let bucket = match (&d.limit, d.capacity, d.refill_per_second) {
                    (Some(limit), None, None) => RateLimit::parse(limit)?.bucket,
                    (None, Some(capacity), Some(refill)) => direct(capacity, refill)?,
                    _ => return Err("rateLimit needs either limit ('10/min') or both capacity and refillPerSecond".into()),
                };
                Ok(RateLimit { bucket, key: d.key, max_wait: Duration::from_millis(d.max_wait_ms.unwrap_or(0)) })
            }
            _ => Err("rateLimit must be like '10/min', { capacity, refillPerSecond } or { limit, key, maxWaitMs }".into()),
        }
    }
}

fn direct(capacity: f64, refill_per_sec: f64) -> Result<Bucket, String> {
    if !(capacity >= 1.0 && capacity.is_finite() && refill_per_sec > 0.0 && refill_per_sec.is_finite()) {
        return Err("rateLimit capacity must be at least 1 and refillPerSecond above 0".into());
    }
    Ok(Bucket { capacity, refill_per_sec })
}

fn parse_rate(text: &str) -> Result<Bucket, String> {
    let bad = || format!("invalid rateLimit \"{text}\": write it as N/s, N/min, N/hour or N/day (e.g. '10/min')");
    let (count, unit) = text.split_once('/').ok_or_else(bad)?;
    let count: f64 = count.trim().parse().map_err(|_| bad())?;
    let seconds = match unit.trim() {
        "s" | "sec" | "second" => 1.0,
        "m" | "min" | "minute" => 60.0,
        "h" | "hour" => 3_600.0,
        "d" | "day" => 86_400.0,
        _ => return Err(bad()),
    };
    direct(count, count / seconds).map_err(|_| bad())
}

/// The model's answer when no token came in time.
pub fn refused(call_id: String, tool: &str, whole_executor: bool, retry_after: Duration) -> ToolResult {
    let ms = retry_after.as_millis().max(1) as u64;
    let whose = if whole_executor { "the rate limit all tools share" } else { "this tool's rate limit" };
    let error = format!(
        "Tool \"{tool}\" was not run: {whose} is used up. Wait about {ms} ms before calling it again, \
         or continue with what you already have."
    );
    let mut result = ToolResult::failure(call_id, tool.to_string(), ErrorKind::RateLimited, error, true);
    result.retry_after_ms = Some(ms);
    result
}

#[cfg(test)]
mod tests {
    #[test]
    fn token_replies_read_as_takes() {
        let reply = |v: serde_json::Value| serde_json::from_value::<Reply>(v).unwrap();
        assert_eq!(Token::of(&reply(json!({"take": "after", "waitMs": 250.0}))), Token::After(Duration::from_millis(250)));
        assert_eq!(Token::of(&reply(json!({"take": "refused", "waitMs": 1500}))), Token::Refused(Duration::from_millis(1500)));
        assert!(matches!(Token::of(&reply(json!({"take": "maybe"}))), Token::Failed(_)));
        assert_eq!(Token::of(&reply(json!({"take": "refused", "waitMs": 1e300}))), Token::Refused(MAX_WAIT), "bounded, no panic");
        assert!(matches!(Token::of(&reply(json!({"error": "WRONGPASS"}))), Token::Failed(e) if e == "WRONGPASS"));
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn reads_every_written_form() {
        let per_min = RateLimit::parse(&json!("10/min")).unwrap();
        assert_eq!(per_min.bucket, Bucket { capacity: 10.0, refill_per_sec: 10.0 / 60.0 });
        assert_eq!(RateLimit::parse(&json!("5/s")).unwrap().bucket.refill_per_sec, 5.0);
        assert_eq!(RateLimit::parse(&json!("100/hour")).unwrap().bucket.capacity, 100.0);
        assert_eq!(RateLimit::parse(&json!("1000/day")).unwrap().bucket.refill_per_sec, 1000.0 / 86_400.0);
        let keyed = RateLimit::parse(&json!({"limit": "2/s", "key": "userId", "maxWaitMs": 500})).unwrap();
        assert_eq!((keyed.key.as_deref(), keyed.max_wait), (Some("userId"), Duration::from_millis(500)));
        let direct = RateLimit::parse(&json!({"capacity": 3, "refillPerSecond": 0.5})).unwrap();
        assert_eq!(direct.bucket, Bucket { capacity: 3.0, refill_per_sec: 0.5 });
        for bad in [json!("10/fortnight"), json!("ten/min"), json!("0/min"), json!({"capacity": 3}), json!(5)] {
            assert!(RateLimit::parse(&bad).is_err(), "{bad}");
        }
    }
}
