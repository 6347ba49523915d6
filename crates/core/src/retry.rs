//! Station 10: which failures are worth another attempt, and how long to wait before it.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::result::{ErrorKind, ToolResult};
use crate::timer::seconds;

/// Exponential backoff with full jitter: attempt n waits a random time in [0, min(maxDelayMs, initialDelayMs ×
/// backoffFactor^(n-1))), or at least a failure's `retryAfterMs`; no attempt starts later than `maxElapsedMs`
/// after the first one started.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RetryPolicy {
    pub max_retries: u32,
    pub initial_delay_ms: u64,
    pub backoff_factor: f64,
    pub max_delay_ms: u64,
    pub max_elapsed_ms: u64,
    /// Whether a timeout or idle timeout of a read-only or idempotent tool is retried. Off by default: whoever sets
    /// `timeoutMs` expects an answer by then, and a retried call may take attempts × the limit, plus backoff.
    pub on_timeout: bool,
}

impl Default for RetryPolicy {
    /// LangChain's defaults: 2 retries, doubling from 1 s, capped at 60 s.
    fn default() -> Self {
        RetryPolicy { max_retries: 2, initial_delay_ms: 1_000, backoff_factor: 2.0, max_delay_ms: 60_000, max_elapsed_ms: 120_000, on_timeout: false }
    }
}

impl RetryPolicy {
    /// This policy with the fields `overrides` (a JSON object) names replaced.
    pub fn overridden(&self, overrides: &Value) -> Result<Self, String> {
        let mut merged = serde_json::to_value(self).expect("a policy serializes");
        let (Value::Object(base), Value::Object(changes)) = (&mut merged, overrides) else {
            return Err("retry must be an object like { maxRetries: 2, initialDelayMs: 1000 } or false".into());
        };
        base.extend(changes.iter().map(|(k, v)| (k.clone(), v.clone())));
        let policy: RetryPolicy = serde_json::from_value(merged).map_err(|e| format!("invalid retry policy: {e}"))?;
        policy.check()?;
        Ok(policy)
    }

    pub(crate) fn check(&self) -> Result<(), String> {
        if !(self.backoff_factor >= 1.0 && self.backoff_factor.is_finite()) {
            return Err("retry.backoffFactor must be a number of at least 1".into());
        }
        Ok(())
    }
}

/// Whether this failed attempt may be retried at all: never for a refusal, only for what the failure says is
/// transient (a timeout only when the policy says so), and only while the policy has attempts left.
pub fn eligible(result: &ToolResult, attempts_so_far: u32, policy: &RetryPolicy) -> bool {
    let kind_retries = match result.error_kind {
        Some(ErrorKind::HandlerError) => true,
        Some(ErrorKind::Timeout | ErrorKind::IdleTimeout) => policy.on_timeout,
        _ => false,
    };
    kind_retries && result.retryable && attempts_so_far <= policy.max_retries
}

/// The wait before attempt `attempts_so_far + 1`: full jitter (`jitter`, a draw in [0, 1)) over the exponential
/// step, but never less than a `retryAfterMs` the failure asked for.
pub fn delay(policy: &RetryPolicy, attempts_so_far: u32, retry_after_ms: Option<u64>, jitter: f64) -> Duration {
    let step = policy.initial_delay_ms as f64 * policy.backoff_factor.powi(attempts_so_far.saturating_sub(1) as i32);
    let ceiling = step.min(policy.max_delay_ms as f64);
    let jittered = jitter * ceiling;
    let ms = retry_after_ms.map_or(jittered, |hint| jittered.max(hint as f64));
    seconds(ms / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_exponentially_under_full_jitter_and_honour_hints() {
        let policy = RetryPolicy { max_retries: 5, initial_delay_ms: 100, backoff_factor: 2.0, max_delay_ms: 300, max_elapsed_ms: 10_000, on_timeout: false };
        for _ in 0..200 {
            assert!(delay(&policy, 1, None, fastrand::f64()) < Duration::from_millis(100));
            assert!(delay(&policy, 2, None, fastrand::f64()) < Duration::from_millis(200));
            assert!(delay(&policy, 5, None, fastrand::f64()) < Duration::from_millis(300), "capped at maxDelayMs");
            assert!(delay(&policy, 1, Some(250), fastrand::f64()) >= Duration::from_millis(250));
        }
    }
}
