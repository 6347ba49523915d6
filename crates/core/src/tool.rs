//! A tool as the stations read it: its name, what it may change, how it may be repeated, its time limit. The
//! registry's tools answer it; a station asks no more of a tool than this, so that it depends on no registry.

use std::sync::Arc;

use serde::Deserialize;

/// How much a tool can change, in increasing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Risk {
    Read,
    Write,
    Destructive,
    Admin,
}

impl Risk {
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Read => "read",
            Risk::Write => "write",
            Risk::Destructive => "destructive",
            Risk::Admin => "admin",
        }
    }
}

pub trait ToolInfo {
    fn name(&self) -> &str;
    fn risk(&self) -> Risk;
    /// Only reads: may run alongside other read-only calls, and a stop changed nothing.
    fn read_only(&self) -> bool;
    /// Same arguments, same effect: safe to repeat.
    fn idempotent(&self) -> bool;
    /// Every call asks for approval (`needsApproval`).
    fn needs_approval(&self) -> bool;
    /// Its time limit, as the executor caps it.
    fn timeout_ms(&self) -> u64;

    /// A timeout may be retried only where running the call again cannot do harm twice.
    fn timeout_retryable(&self) -> bool {
        self.read_only() || self.idempotent()
    }
}

/// A tool as the registry hands it out, shared.
impl<T: ToolInfo> ToolInfo for Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn risk(&self) -> Risk {
        (**self).risk()
    }

    fn read_only(&self) -> bool {
        (**self).read_only()
    }

    fn idempotent(&self) -> bool {
        (**self).idempotent()
    }

    fn needs_approval(&self) -> bool {
        (**self).needs_approval()
    }

    fn timeout_ms(&self) -> u64 {
        (**self).timeout_ms()
    }
}
