//! The contract every call ends in: one `ToolResult`, whatever happened.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::judge::Rollback;
use crate::redact::Redactions;
use crate::repair::Repair;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    UnknownTool,
    InvalidArguments,
    PermissionDenied,
    ApprovalDenied,
    RateLimited,
    Timeout,
    IdleTimeout,
    Cancelled,
    NotExecuted,
    HandlerError,
    Duplicate,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::UnknownTool => "unknown_tool",
            ErrorKind::InvalidArguments => "invalid_arguments",
            ErrorKind::PermissionDenied => "permission_denied",
            ErrorKind::ApprovalDenied => "approval_denied",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::Timeout => "timeout",
            ErrorKind::IdleTimeout => "idle_timeout",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::NotExecuted => "not_executed",
            ErrorKind::HandlerError => "handler_error",
            ErrorKind::Duplicate => "duplicate",
        }
    }
}

/// One station's verdict on a call, in the order the call met them. Crosses as `"station:outcome"`: one short
/// string per station keeps the trace record cheap to carry on every result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StationMark {
    pub station: &'static str,
    pub outcome: &'static str,
    /// When the station decided (for trace timings).
    pub at: Instant,
}

impl Serialize for StationMark {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{}:{}", self.station, self.outcome))
    }
}

/// What the program (not the model) may want to know about a call.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original_chars: Option<usize>,
    /// Where the whole output (or a binary result) was saved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact_path: Option<String>,
    /// How many secrets each redaction rule removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redactions: Option<Redactions>,
    /// What a binary result was: its size and sniffed type (the data itself is in the artifact).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binary: Option<Binary>,
    /// Images the result carries, for the provider formats that take images in tool results.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
    /// What the permission station decided (`allowed`, `approved`, `accepted`, `denied`) and the rule, mode or
    /// answer that decided it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission: Option<PermissionNote>,
    /// What the repair station changed in the call before it ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repairs: Vec<Repair>,
    /// The result matched its tool's `rollbackWhen`, but the session had reached its limit of consecutive
    /// rollbacks, so `rollback` was not set.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub rollback_suppressed: bool,
    /// The output is the JSON text of `structured` (not a summary of it, as for `{stdout, stderr}`).
    #[serde(skip)]
    pub output_is_structured: bool,
    /// Every failed attempt before the last, when the call was retried.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attempt_errors: Vec<AttemptError>,
    /// This result is a copy of an identical call's that ran at the same time (single flight).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub shared_flight: bool,
    /// How many times this exact query ran before in the session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeats: Option<u64>,
    /// The earlier result of the same query in this session, given again (dedup policy `reuse`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reused: bool,
    pub stages: Vec<StationMark>,
    /// Milliseconds since the Unix epoch when the call entered the pipeline.
    pub started_at: f64,
    /// Milliseconds the call waited in the scheduler before its handler started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queued_ms: Option<f64>,
    /// With tracing on: when each stage was decided, in ms since the turn began (parallel to `stages`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timings: Option<Vec<f64>>,
    /// With tracing on: when each attempt's handler started, in ms since the turn began.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub starts: Option<Vec<f64>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Binary {
    pub bytes: usize,
    pub media_type: &'static str,
    #[serde(skip)]
    pub extension: &'static str,
}

/// An image as providers take it: base64 data and its media type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Image {
    pub media_type: String,
    pub data: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PermissionNote {
    pub decision: &'static str,
    pub by: String,
}

/// A failed attempt that was retried.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptError {
    pub attempt: u32,
    pub error_kind: ErrorKind,
    pub error: String,
    /// The backoff chosen before the next attempt.
    pub retry_in_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    pub call_id: String,
    pub name: String,
    pub success: bool,
    /// What the model reads: the output on success, the error text on failure.
    pub output: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<ErrorKind>,
    pub retryable: bool,
    /// How long to wait before trying again, when the failure said so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    pub latency_ms: f64,
    pub attempts: u32,
    pub cached: bool,
    pub truncated: bool,
    /// A success the tool's `rollbackWhen` judged useless: the orchestrator may undo the step and try another way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback: Option<Rollback>,
    pub metadata: Metadata,
}

impl ToolResult {
    pub fn success(call_id: String, name: String, output: String) -> Self {
        ToolResult {
            call_id,
            name,
            success: true,
            output,
            error: None,
            error_kind: None,
            retryable: false,
            retry_after_ms: None,
            latency_ms: 0.0,
            attempts: 0,
            cached: false,
            truncated: false,
            rollback: None,
            metadata: Metadata::default(),
        }
    }

    pub fn failure(call_id: String, name: String, kind: ErrorKind, error: String, retryable: bool) -> Self {
        ToolResult {
            call_id,
            name,
            success: false,
            output: failure_output(kind, &error),
            error: Some(error),
            error_kind: Some(kind),
            retryable,
            retry_after_ms: None,
            latency_ms: 0.0,
            attempts: 0,
            cached: false,
            truncated: false,
            rollback: None,
            metadata: Metadata::default(),
        }
    }
}

/// The text a model reads for a failed call; `forLlm` in JS builds the same string.
pub fn failure_output(kind: ErrorKind, error: &str) -> String {
    format!("Error ({}): {}", kind.as_str(), error)
}
