//! Station 6: the same query again in one session is counted, and per policy noted, refused or answered from the
//! earlier result. A query is the tool plus its key arguments (all of them unless the tool names some).

use serde::Deserialize;
use serde_json::Value;

use crate::keys;
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
