//! The contract every call ends in: one `ToolResult`, whatever happened.

use std::borrow::BorrowMut;
use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use rustc_hash::FxHashMap;
use serde_json::{Map, Value};

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
    /// The tool is not being called for now (its circuit breaker is open), or a dependency the call needs (the
    /// shared store) is down and its station fails closed.
    Unavailable,
    /// A budget (calls per turn, per session or window, cost) would be passed.
    BudgetExceeded,
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
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::BudgetExceeded => "budget_exceeded",
        }
    }
}

/// What a successful result with nothing in it reads as.
pub const NO_OUTPUT: &str = "(no output)";

/// Counts of redactions per rule name, e.g. `{"github-token": 2}`.
pub type Redactions = BTreeMap<String, u64>;

/// What the orchestrator reads on a result its tool's `rollbackWhen` flagged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rollback {
    pub reason: String,
}

/// What a repair changed: where (a JSON pointer into the arguments; empty for the whole text or the tool name),
/// what was there, what is there now, and the rule that did it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Repair {
    pub path: String,
    pub before: Value,
    pub after: Value,
    pub rule: String,
}

impl Repair {
    pub fn new(path: &str, before: Value, after: Value, rule: &str) -> Self {
        Repair { path: path.to_string(), before, after, rule: rule.to_string() }
    }

    /// This repair as the model and the trace may see it: `before` and `after` redacted as the argument they are
    /// (so a value under a key such as `password` is never echoed).
    pub fn redacted(mut self, redact: impl Fn(&mut Value) -> Redactions) -> Self {
        let key = self.path.rsplit('/').next().unwrap_or("").replace("~1", "/").replace("~0", "~");
        for value in [&mut self.before, &mut self.after] {
            if value.is_null() {
                continue;
            }
            let mut wrapped = Value::Object(Map::from_iter([(key.clone(), value.take())]));
            redact(&mut wrapped);
            *value = wrapped.as_object_mut().and_then(|m| m.remove(&key)).unwrap_or(Value::Null);
        }
        self
    }

    /// An unknown tool name taken as the one usable tool it matches ignoring case and separators.
    pub fn named_tool(called: &str, tool: &str) -> Self {
        Self::new("", Value::String(called.into()), Value::String(tool.into()), "tool-name")
    }

    /// Halves of UTF-16 surrogate pairs (half an emoji) in the arguments, read as U+FFFD: `before` counts them.
    pub fn lone_surrogates(count: usize) -> Self {
        Self::new("", Value::from(count), Value::String("\u{fffd}".into()), "lone-surrogate")
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
        // Joined on the stack: the formatting machinery, or an allocation per mark, costs more than the rest of
        // a result's serialization. Station and outcome names are short identifiers.
        let mut buf = [0u8; 64];
        let (station, outcome) = (self.station.as_bytes(), self.outcome.as_bytes());
        let len = station.len() + 1 + outcome.len();
        if len > buf.len() {
            return s.collect_str(&format_args!("{}:{}", self.station, self.outcome));
        }
        buf[..station.len()].copy_from_slice(station);
        buf[station.len()] = b':';
        buf[station.len() + 1..len].copy_from_slice(outcome);
        s.serialize_str(std::str::from_utf8(&buf[..len]).expect("joined from two strs and an ASCII colon"))
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
    /// `unavailable` when the shared store failed this call (it went on without it, or was not run), with why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store_error: Option<String>,
    /// The budget that refused the call, and how much of it was used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<Box<BudgetNote>>,
    /// How a command tool's process ended (see `CommandReport`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<Box<CommandReport>>,
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
    /// The text this call's own handler settled with, when it was short enough to be the output unchanged: the
    /// host still holds that text, so an output equal to it need not cross back.
    #[serde(skip)]
    pub sent: Option<String>,
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

/// Which budget refused a call: its limit (`maxCalls`, …), where it was declared, how much of it was used, and
/// whose it is (each `by` field and its value).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetNote {
    pub budget: &'static str,
    pub source: &'static str,
    pub limit: f64,
    pub used: f64,
    /// What the refused call would have cost (a cost budget).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    pub by: BTreeMap<String, String>,
    /// When a window's budget starts over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resets_in_ms: Option<u64>,
}

/// How a command tool's process ended, what stopped it, and whether anything of it is left.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandReport {
    pub ended_by: CommandEnd,
    /// The id of the process the tool started, which is also its process group's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The exit code of the process the tool started, when it exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it (`SIGTERM`, …), when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// The last signal the engine sent its process group to stop it (`SIGTERM`, then `SIGKILL` after the grace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_with: Option<&'static str>,
    /// It exited leaving processes of its group running, and those were stopped.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub leftovers_stopped: bool,
    /// Something it started still runs: a process that left its session, or one no signal could end. Never set
    /// for a command whose processes all stayed in its group.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub still_running: bool,
    /// The limit that ended it (`timeout` and `idle_timeout`), in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_ms: Option<u64>,
    /// Moved to the background (`background`): the job that now holds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<u32>,
    pub duration_ms: f64,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// Bytes of each stream left out of the result (between its start and its end), and of those the ones kept
    /// nowhere (past what the artifact could hold).
    #[serde(skip_serializing_if = "is_zero")]
    pub stdout_omitted_bytes: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub stdout_dropped_bytes: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub stderr_omitted_bytes: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub stderr_dropped_bytes: u64,
    /// Where each stream was saved whole, when too much of it was written to keep in the result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_artifact: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_artifact: Option<String>,
    /// Why it could not be started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawn_error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandEnd {
    Exit,
    Timeout,
    IdleTimeout,
    Cancelled,
    Background,
    SpawnFailed,
}

/// What a command tool's run gives the normalize station: the captured output, its report, and how the tool
/// reads an exit code.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandOutput {
    pub stdout: String,
    pub stderr: String,
    pub report: CommandReport,
    pub fail_on_exit_code: bool,
    /// A timeout may be tried again (the tool's retry policy on timeouts).
    pub timeout_retryable: bool,
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

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The text a model reads for a failed call; `forLlm` in JS builds the same string.
pub fn failure_output(kind: ErrorKind, error: &str) -> String {
    format!("Error ({}): {}", kind.as_str(), error)
}

include!("generated/result.rs");

impl ToolResult {
    /// True when the result carries only the fields most results have, so it can cross as a plain array.
    fn is_plain(&self) -> bool {
        // Destructured in full so that a new field must be placed here: on the plain path or off it.
        let ToolResult { call_id: _, name: _, success, output: _, error, error_kind, retryable: _, retry_after_ms, latency_ms: _, attempts: _, cached: _, truncated: _, rollback, metadata } = self;
        let Metadata {
            stderr,
            exit_code,
            structured: _,
            error_name,
            error_code,
            stack,
            original_chars,
            artifact_path,
            redactions: _,
            binary,
            images,
            permission,
            repairs,
            rollback_suppressed,
            output_is_structured: _,
            attempt_errors,
            shared_flight,
            repeats,
            reused,
            store,
            store_error,
            budget,
            command,
            stages: _,
            started_at: _,
            queued_ms: _,
            timings: _,
            starts: _,
            sent: _,
        } = metadata;
        *success
            && error.is_none()
            && error_kind.is_none()
            && retry_after_ms.is_none()
            && rollback.is_none()
            && stderr.is_none()
            && exit_code.is_none()
            && error_name.is_none()
            && error_code.is_none()
            && stack.is_none()
            && original_chars.is_none()
            && artifact_path.is_none()
            && binary.is_none()
            && images.is_empty()
            && permission.is_none()
            && repairs.is_empty()
            && !rollback_suppressed
            && attempt_errors.is_empty()
            && !shared_flight
            && repeats.is_none()
            && !reused
            && store.is_none()
            && store_error.is_none()
            && budget.is_none()
            && command.is_none()
    }
}

/// The sequences of stage marks the host has been sent, by id. Most calls pass the same stations with the same
/// outcomes, so a result names its sequence by number and the host copies it from its table: seven short strings
/// per result cost V8 more to parse than the rest of the result.
#[derive(Debug, Default)]
pub struct StageTable {
    ids: FxHashMap<Vec<(&'static str, &'static str)>, u32>,
}

/// Past this many sequences (a workload of unusual paths), new ones cross in full.
const MAX_STAGE_SEQUENCES: usize = 4096;
/// A sequence longer than this (many retries) crosses in full.
const MAX_STAGES_BY_ID: usize = 32;

#[derive(Serialize)]
#[serde(untagged)]
enum Stages<'a> {
    Known(u32),
    Inline(&'a [StationMark]),
}

impl StageTable {
    /// The id of `marks`, and whether it is new to the host (to be sent in the table's part of the wire). Looked
    /// up without allocating: this runs for every result.
    fn id_of(&mut self, marks: &[StationMark]) -> Option<(u32, bool)> {
        let mut key = [("", ""); MAX_STAGES_BY_ID];
        if marks.len() > key.len() {
            return None;
        }
        for (slot, m) in key.iter_mut().zip(marks) {
            *slot = (m.station, m.outcome);
        }
        let key = &key[..marks.len()];
        if let Some(&id) = self.ids.get(key) {
            return Some((id, false));
        }
        if self.ids.len() >= MAX_STAGE_SEQUENCES {
            return None;
        }
        let id = self.ids.len() as u32;
        self.ids.insert(key.to_vec(), id);
        Some((id, true))
    }
}

/// A turn's results as the JS layer reads them: the first string is a JSON array whose first entry lists the stage
/// sequences new to the host's table (in id order) and whose other entries are the results, one each; the rest of
/// the strings are the outputs of its plain successes, in order, but for those whose output is the text their
/// handler sent (flag `AS_SENT`), which the host still holds. A plain success's entry is a `ResultRow` (declared in
/// wire.json: an array of its other values, absent ones as null), because V8 parses arrays of values several
/// times faster than objects with keys, and its output crosses as a string of its own, neither escaped into JSON nor
/// scanned out of it. Any other result is its whole object.
pub fn results_to_wire<R: BorrowMut<ToolResult>>(results: Vec<R>, table: &mut StageTable) -> Vec<String> {
    let mut rows = Vec::with_capacity(results.len() * 128);
    let mut fresh: Vec<Vec<StationMark>> = Vec::new();
    let mut wire = vec![String::new()];
    for mut r in results {
        let r = r.borrow_mut();
        rows.push(b',');
        if !r.is_plain() {
            serde_json::to_writer(&mut rows, &r).expect("a result serializes");
            continue;
        }
        let m = &r.metadata;
        let as_sent = m.sent.as_deref() == Some(r.output.as_str());
        let flags = [
            (r.success, result_flag::SUCCESS),
            (r.retryable, result_flag::RETRYABLE),
            (r.cached, result_flag::CACHED),
            (r.truncated, result_flag::TRUNCATED),
            (m.structured.is_some(), result_flag::STRUCTURED),
            (as_sent, result_flag::AS_SENT),
        ]
        .iter()
        .fold(0, |acc, &(on, bit)| if on { acc | bit } else { acc });
        let stages = match table.id_of(&m.stages) {
            Some((id, new)) => {
                if new {
                    fresh.push(m.stages.clone());
                }
                Stages::Known(id)
            }
            None => Stages::Inline(&m.stages),
        };
        let row = ResultRow {
            call_id: &r.call_id,
            name: &r.name,
            flags,
            latency_ms: r.latency_ms,
            attempts: r.attempts,
            stages,
            started_at: m.started_at,
            queued_ms: m.queued_ms,
            structured: &m.structured,
            redactions: &m.redactions,
            timings: &m.timings,
            starts: &m.starts,
        };
        serde_json::to_writer(&mut rows, &row).expect("a result serializes");
        if !as_sent {
            wire.push(std::mem::take(&mut r.output));
        }
    }
    let mut head = serde_json::to_vec(&fresh).expect("stage marks serialize");
    head.insert(0, b'[');
    head.extend_from_slice(&rows);
    head.push(b']');
    wire[0] = String::from_utf8(head).expect("serde_json writes UTF-8");
    wire
}

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

#[cfg(test)]
mod tests {
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

    use super::*;
    use super::result_flag::*;

    fn plain() -> ToolResult {
        let mut r = ToolResult::success("c1".into(), "inc".into(), "2".into());
        r.latency_ms = 0.5;
        r.attempts = 1;
        r.metadata.structured = Some(serde_json::json!(2));
        r.metadata.started_at = 1.0e12;
        r.metadata.queued_ms = Some(0.0);
        r.metadata.stages = vec![StationMark { station: "lookup", outcome: "found", at: Instant::now() }];
        r
    }

    #[test]
    fn a_plain_success_crosses_as_an_array_of_its_values_and_its_output_apart() {
        let wire = results_to_wire(vec![plain()], &mut StageTable::default());
        let rows: Value = serde_json::from_str(&wire[0]).unwrap();
        assert_eq!(rows, serde_json::json!([[["lookup:found"]], ["c1", "inc", SUCCESS | STRUCTURED, 0.5, 1, 0, 1.0e12, 0.0, 2, null, null, null]]));
        assert_eq!(wire[1..], ["2".to_string()]);
    }

    #[test]
    fn an_output_equal_to_what_the_handler_sent_does_not_cross_back() {
        let mut unchanged = plain();
        unchanged.metadata.sent = Some("2".into());
        let mut redacted = plain();
        redacted.metadata.sent = Some("a secret".into());
        let wire = results_to_wire(vec![unchanged, redacted], &mut StageTable::default());
        let rows: Value = serde_json::from_str(&wire[0]).unwrap();
        assert_eq!(rows[1][2], SUCCESS | STRUCTURED | AS_SENT);
        assert_eq!(rows[2][2], SUCCESS | STRUCTURED);
        assert_eq!(wire[1..], ["2".to_string()], "only the changed output crosses");
    }

    #[test]
    fn a_stage_sequence_crosses_once_then_by_its_id() {
        let mut table = StageTable::default();
        let mut other = plain();
        other.metadata.stages.push(StationMark { station: "cache", outcome: "hit", at: Instant::now() });
        let first: Value = serde_json::from_str(&results_to_wire(vec![plain(), other.clone(), plain()], &mut table)[0]).unwrap();
        assert_eq!(first[0], serde_json::json!([["lookup:found"], ["lookup:found", "cache:hit"]]));
        assert_eq!([&first[1][5], &first[2][5], &first[3][5]], [0, 1, 0]);
        let later: Value = serde_json::from_str(&results_to_wire(vec![other], &mut table)[0]).unwrap();
        assert_eq!(later[0], serde_json::json!([]));
        assert_eq!(later[1][5], 1);
        let mut long = plain();
        long.metadata.stages = (0..MAX_STAGES_BY_ID + 1).map(|_| StationMark { station: "retry", outcome: "scheduled", at: Instant::now() }).collect();
        let inline: Value = serde_json::from_str(&results_to_wire(vec![long], &mut table)[0]).unwrap();
        assert_eq!(inline[0], serde_json::json!([]), "a sequence too long for the table is not entered");
        assert_eq!(inline[1][5].as_array().map(Vec::len), Some(MAX_STAGES_BY_ID + 1));
    }

    #[test]
    fn every_other_result_crosses_as_its_whole_object() {
        let mut failure = ToolResult::failure("c2".into(), "inc".into(), ErrorKind::Timeout, "too slow".into(), true);
        failure.metadata.started_at = 1.0;
        let mut spilled = plain();
        spilled.metadata.artifact_path = Some("/tmp/a".into());
        let results = vec![failure, spilled];
        let wire = results_to_wire(results.clone(), &mut StageTable::default());
        assert_eq!(wire.len(), 1, "no output crosses apart");
        let rows: Vec<Value> = serde_json::from_str(&wire[0]).unwrap();
        assert_eq!(rows[0], serde_json::json!([]), "no stage sequence is new");
        for (crossed, result) in rows[1..].iter().zip(&results) {
            assert_eq!(crossed, &serde_json::to_value(result).unwrap());
        }
    }
}
