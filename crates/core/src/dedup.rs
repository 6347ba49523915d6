//! Station 6: the same query again in one session is counted, and per policy noted, refused or answered from the
//! earlier result. A query is the tool plus its key arguments (all of them unless the tool names some).

use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use crate::keys;
use crate::ops::{Op, Reply, Text};
use crate::result::{ErrorKind, ToolResult};

/// What a session remembers of the queries it ran.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct DedupOptions {
    /// The policy of tools that declare none: `off`, `note`, `refuse` or `reuse`.
    pub policy: String,
    /// A session is forgotten after this long without a call.
    pub session_ttl_ms: u64,
    pub max_sessions: usize,
    pub max_queries_per_session: usize,
}

impl Default for DedupOptions {
    fn default() -> Self {
        DedupOptions { policy: "note".into(), session_ttl_ms: 3_600_000, max_sessions: 10_000, max_queries_per_session: 1_000 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Off,
    Note,
    Refuse,
    Reuse,
}

impl Mode {
    pub fn parse(name: &str) -> Result<Self, String> {
        match name {
            "off" => Ok(Mode::Off),
            "note" => Ok(Mode::Note),
            "refuse" => Ok(Mode::Refuse),
            "reuse" => Ok(Mode::Reuse),
            other => Err(format!("unknown dedup policy \"{other}\": use 'off', 'note', 'refuse' or 'reuse'")),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Dedup {
    pub mode: Mode,
    /// The arguments that make the query; empty means all.
    pub keys: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Declared {
    #[serde(default)]
    policy: Option<String>,
    #[serde(default)]
    keys: Vec<String>,
}

impl Dedup {
    pub fn declared(value: Option<&Value>, default_mode: Mode) -> Result<Self, String> {
        let Some(value) = value else { return Ok(Dedup { mode: default_mode, keys: vec![] }) };
        if let Value::String(policy) = value {
            return Ok(Dedup { mode: Mode::parse(policy)?, keys: vec![] });
        }
        let d: Declared = serde_json::from_value(value.clone()).map_err(|e| format!("invalid dedup: {e}"))?;
        let mode = d.policy.as_deref().map_or(Ok(default_mode), Mode::parse)?;
        Ok(Dedup { mode, keys: d.keys })
    }

    pub fn query_key(&self, tool: &str, args: &Value) -> String {
        keys::of_call(tool, &keys::select(args, &self.keys), None)
    }
}

/// What dedup asks the store of a call in a session: to count its query (`key`, under dedup) and read what the
/// session kept for it, and (`rollbacks`, for a judged tool) the session's consecutive rollbacks. A refused repeat's
/// count is taken back by the store itself.
pub fn count<'a>(session: &'a str, key: Option<&'a str>, mode: Mode, rollbacks: bool, ttl_ms: u64) -> Op<'a> {
    let counted = key.is_some();
    Op::Count {
        session: session.into(),
        key: key.map(Into::into),
        ttl_ms,
        refuse: counted && mode == Mode::Refuse,
        reuse: counted && mode == Mode::Reuse,
        rollbacks,
    }
}

/// A query counted on arrival that never ran after all.
pub fn uncount<'a>(session: impl Into<Text<'a>>, key: impl Into<Text<'a>>) -> Op<'a> {
    Op::Uncount { session: session.into(), key: key.into() }
}

/// A query's result kept in its session, for `reuse`.
pub fn keep<'a>(session: &'a str, key: &'a str, value: Arc<str>, ttl_ms: u64) -> Op<'a> {
    Op::Keep { session: session.into(), key: key.into(), value, ttl_ms }
}

/// What the store said to a count: how often the session ran the query before, what it kept of its last result
/// (asked under `reuse`), and the session's consecutive rollbacks (when asked). Err: the store failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Counted {
    pub earlier: u64,
    pub reused: Option<Arc<str>>,
    pub rollbacks: Option<u32>,
}

impl Counted {
    pub fn of(reply: &Reply) -> Result<Counted, String> {
        match &reply.error {
            Some(e) => Err(e.clone()),
            None => Ok(Counted { earlier: reply.earlier.unwrap_or(0), reused: reply.reused.clone(), rollbacks: reply.rollbacks }),
        }
    }
}

/// Whether a count's reply left a count in the store that a call which never runs takes back: the store counted the
/// query, and not as a repeat it refused (that one the store took back itself).
pub fn holds_count(mode: Mode, reply: &Reply) -> bool {
    reply.error.is_none() && reply.earlier.is_some_and(|earlier| mode != Mode::Refuse || earlier == 0)
}

/// What dedup decides for a query that ran `earlier` times before in the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    First,
    /// It runs again, as a repeat (`note` says so in its output).
    Repeat,
    Refused,
    /// Answered from the result the session kept, when one can be read (else it runs as a repeat).
    Reuse,
}

pub fn verdict(mode: Mode, earlier: u64) -> Verdict {
    match (earlier, mode) {
        (0, _) => Verdict::First,
        (_, Mode::Refuse) => Verdict::Refused,
        (_, Mode::Reuse) => Verdict::Reuse,
        _ => Verdict::Repeat,
    }
}

fn times(n: u64) -> String {
    if n == 1 { "once".into() } else { format!("{n} times") }
}

/// The line a repeated query's result ends with under `note`.
pub fn note(earlier: u64) -> String {
    format!("\n[note] This exact query already ran {} in this session.", times(earlier))
}

pub fn refused(call_id: String, tool: &str, earlier: u64) -> ToolResult {
    let error = format!(
        "Tool \"{tool}\" was not run: this exact query already ran {} in this session. Use the earlier result, \
         or change the query if you need something different.",
        times(earlier)
    );
    ToolResult::failure(call_id, tool.to_string(), ErrorKind::Duplicate, error, false)
}
