//! A store shared between processes (Redis, through the application's own client): what the engine asks of it and
//! what it answers. The engine never waits on it inline: a call that needs the store is suspended on a ticket, the
//! host runs the ticket's operations (each one script on one hash slot) and answers, and the call resumes. Every
//! ticket has a deadline; a store that does not answer in time counts as unavailable, and each station then fails
//! open or closed as configured. The operations and their replies are `ops`'; what each station asks and what each
//! answer means is the station's.

pub use crate::ops::Reply;

/// An operation as it goes out to the host.
pub type Op = crate::ops::Op<'static>;

use std::time::Duration;

use serde::Deserialize;

use crate::result::{ErrorKind, ToolResult};
use crate::timer::seconds;

include!("generated/shared.rs");

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SharedStoreOptions {
    /// How long one ticket may take before the store counts as unavailable for it.
    pub timeout_ms: u64,
    #[serde(default)]
    pub on_error: OnError,
}

/// How long a waiter looks again for the result of a call that another process runs: from a short first look,
/// doubling, to at most this; never past the moment the other's lease ends.
pub const FIRST_POLL: Duration = Duration::from_millis(5);
pub const MAX_POLL: Duration = Duration::from_millis(250);

/// How long past its own limits a leader's lease lasts: the leader settles (and releases it) well within this.
pub const LEASE_MARGIN_MS: u64 = 1_000;

/// How long a retry hint tells a model to wait when a rate limit failed closed because the store is down.
pub const UNAVAILABLE_RETRY: Duration = Duration::from_secs(1);

/// Store operations answered late (after their ticket's deadline) are still cleaned up, for this many tickets.
pub const LATE_TICKETS: usize = 10_000;

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

    #[test]
    fn polls_double_within_bounds_and_stop_at_the_lease_end() {
        assert_eq!(next_poll(Duration::ZERO, None), FIRST_POLL);
        assert_eq!(next_poll(Duration::from_millis(40), None), Duration::from_millis(80));
        assert_eq!(next_poll(Duration::from_secs(1), None), MAX_POLL);
        assert_eq!(next_poll(Duration::from_millis(100), Some(20.0)), Duration::from_millis(21));
        assert_eq!(next_poll(Duration::from_millis(100), Some(1e300)), Duration::from_millis(200), "a huge lease left does not overflow");
    }
}
