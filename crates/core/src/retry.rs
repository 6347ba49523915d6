//! Station 10: which failures are worth another attempt, and how long to wait before it.

use std::time::Duration;

use crate::options::RetryPolicy;
use crate::registry::Tool;
use crate::result::{ErrorKind, ToolResult};
use crate::timer::seconds;

/// Error codes of a connection that failed on the way, not of a request that was refused (Node's and undici's).
const TRANSIENT_CODES: &[&str] = &[
    "ECONNRESET",
    "ETIMEDOUT",
    "EAI_AGAIN",
    "ECONNREFUSED",
    "ECONNABORTED",
    "EPIPE",
    "ENETUNREACH",
    "ENETDOWN",
    "EHOSTUNREACH",
    "ESOCKETTIMEDOUT",
    "UND_ERR_SOCKET",
    "UND_ERR_CONNECT_TIMEOUT",
    "UND_ERR_HEADERS_TIMEOUT",
    "UND_ERR_BODY_TIMEOUT",
];

/// A thrown error is transient when it says so, or carries a network error code or an HTTP 429/5xx status.
/// An explicit `retryable: false` wins over everything else.
pub fn transient(declared: Option<bool>, codes: &[&str], status: Option<u64>) -> bool {
    if let Some(declared) = declared {
        return declared;
    }
    codes.iter().any(|c| TRANSIENT_CODES.contains(c)) || status.is_some_and(|s| s == 429 || (500..=599).contains(&s))
}

/// Timeouts are retried only where running the call again cannot do harm twice.
pub fn timeout_retryable(tool: &Tool) -> bool {
    tool.spec.read_only || tool.spec.idempotent
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

/// The wait before attempt `attempts_so_far + 1`: full jitter over the exponential step, but never less than a
/// `retryAfterMs` the failure asked for.
pub fn delay(policy: &RetryPolicy, attempts_so_far: u32, retry_after_ms: Option<u64>) -> Duration {
    let step = policy.initial_delay_ms as f64 * policy.backoff_factor.powi(attempts_so_far.saturating_sub(1) as i32);
    let ceiling = step.min(policy.max_delay_ms as f64);
    let jittered = fastrand::f64() * ceiling;
    let ms = retry_after_ms.map_or(jittered, |hint| jittered.max(hint as f64));
    seconds(ms / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_is_declared_or_read_off_codes_and_statuses() {
        assert!(transient(None, &["ECONNRESET"], None));
        assert!(transient(None, &[], Some(429)));
        assert!(transient(None, &[], Some(503)));
        assert!(!transient(None, &[], Some(404)));
        assert!(!transient(None, &["ENOENT"], None));
        assert!(transient(Some(true), &[], None));
        assert!(!transient(Some(false), &["ECONNRESET"], Some(503)), "an explicit false wins");
    }

    #[test]
    fn delays_grow_exponentially_under_full_jitter_and_honour_hints() {
        let policy = RetryPolicy { max_retries: 5, initial_delay_ms: 100, backoff_factor: 2.0, max_delay_ms: 300, max_elapsed_ms: 10_000, on_timeout: false };
        for _ in 0..200 {
            assert!(delay(&policy, 1, None) < Duration::from_millis(100));
            assert!(delay(&policy, 2, None) < Duration::from_millis(200));
            assert!(delay(&policy, 5, None) < Duration::from_millis(300), "capped at maxDelayMs");
            assert!(delay(&policy, 1, Some(250)) >= Duration::from_millis(250));
        }
    }
}
