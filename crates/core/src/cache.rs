//! Station 7: idempotent tools answer from the cache, keyed by the tool and the canonical JSON of the validated
//! arguments (key order and number spelling do not matter), optionally scoped by a context field.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::keys::{self, canonical, SEP};
use crate::ops::{Op, Reply, Text, Word};
use crate::result::{Image, Redactions, Rollback, ToolResult};

/// The result cache of idempotent tools: bounded by entries and bytes, least recently used out first.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CacheOptions {
    pub max_entries: usize,
    pub max_bytes: usize,
    /// How long a result stays fresh when its tool says nothing.
    pub ttl_ms: u64,
}

impl Default for CacheOptions {
    fn default() -> Self {
        CacheOptions { max_entries: 1_000, max_bytes: 32 * 1024 * 1024, ttl_ms: 60_000 }
    }
}


/// The part of a successful result worth keeping: what the model read and what the program gets with it. Kept as
/// text (a store may be shared between processes): the rest of the fields as one JSON line, then the output as it
/// is. Outputs are most of an entry, and escaping them into JSON and back cost more than the rest of a cache hit.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Kept {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<Value>,
    #[serde(default)]
    pub truncated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_chars: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redactions: Option<Redactions>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<Rollback>,
}

impl Kept {
    pub fn of(result: &ToolResult) -> String {
        let kept = Kept {
            structured: result.metadata.structured.clone(),
            stderr: result.metadata.stderr.clone(),
            exit_code: result.metadata.exit_code.clone(),
            truncated: result.truncated,
            original_chars: result.metadata.original_chars,
            artifact_path: result.metadata.artifact_path.clone(),
            redactions: result.metadata.redactions.clone(),
            images: result.metadata.images.clone(),
            rollback: result.rollback.clone(),
        };
        // JSON text holds no raw newline, so the first one ends it.
        let mut text = serde_json::to_string(&kept).expect("kept fields serialize");
        text.reserve(1 + result.output.len());
        text.push('\n');
        text.push_str(&result.output);
        text
    }

    /// The kept output as a fresh successful result for another call.
    pub fn revive(text: &str, call_id: String, name: String) -> Option<ToolResult> {
        let (fields, output) = text.split_once('\n')?;
        let kept: Kept = serde_json::from_str(fields).ok()?;
        let mut result = ToolResult::success(call_id, name, output.to_string());
        result.truncated = kept.truncated;
        result.metadata.structured = kept.structured;
        result.metadata.stderr = kept.stderr;
        result.metadata.exit_code = kept.exit_code;
        result.metadata.original_chars = kept.original_chars;
        result.metadata.artifact_path = kept.artifact_path;
        result.metadata.redactions = kept.redactions;
        result.metadata.images = kept.images;
        result.rollback = kept.rollback;
        Some(result)
    }
}

/// `tool SEP canonical-args SEP scope`: the prefix up to the args is what `invalidate(tool, args)` removes.
pub fn key(tool: &str, args: &Value, scope: Option<&str>) -> String {
    keys::of_call(tool, args, scope)
}

pub fn tool_prefix(tool: &str) -> String {
    format!("{tool}{SEP}")
}

pub fn args_prefix(tool: &str, args: &Value) -> String {
    format!("{tool}{SEP}{}{SEP}", canonical(args))
}

/// What the cache asks the store of a call: its entry, and on a miss (with `lease`: the flight's owner and how long
/// it may take) the lease to fill it, so that across processes one call runs and the others wait for its result.
pub fn lookup<'a>(key: impl Into<Text<'a>>, lease: Option<(String, u64)>) -> Op<'a> {
    let (owner, lease_ms) = lease.map_or((None, None), |(owner, ms)| (Some(owner.into()), Some(ms)));
    Op::Lookup { key: key.into(), owner, lease_ms }
}

/// A flight's result kept for identical calls; with the owner of its lease, which it lets go.
pub fn put<'a>(key: impl Into<Text<'a>>, value: Arc<str>, ttl: Duration, owner: Option<String>) -> Op<'a> {
    let ttl_ms = ttl.as_millis().min(u128::from(u64::MAX)) as u64;
    Op::Put { key: key.into(), value, ttl_ms, owner: owner.map(Into::into) }
}

/// A flight that ended without a result to keep lets its lease go.
pub fn release<'a>(key: impl Into<Text<'a>>, owner: String) -> Op<'a> {
    Op::Release { key: key.into(), owner: owner.into() }
}

/// What a lookup found.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    Hit(Arc<str>),
    Miss,
    Failed(String),
}

/// The lease a lookup asked for: taken (this call's flight fills the entry), held by another process (for about
/// this many ms more, when it said), or none.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Lease {
    Taken,
    Held(Option<f64>),
    None,
}

impl Found {
    pub fn of(reply: &Reply) -> (Found, Lease) {
        let lease = match reply.lease {
            Some(Word::Taken) => Lease::Taken,
            Some(Word::Held) => Lease::Held(reply.lease_left_ms),
            _ => Lease::None,
        };
        let found = match (&reply.error, &reply.value) {
            (Some(e), _) => Found::Failed(e.clone()),
            (None, Some(text)) => Found::Hit(text.clone()),
            (None, None) => Found::Miss,
        };
        (found, lease)
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_and_number_spelling_do_not_matter() {
        let a: Value = serde_json::from_str(r#"{"b": 1.0, "a": [1e2, {"y": 2, "x": 0.5}]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a": [100, {"x": 0.5, "y": 2}], "b": 1}"#).unwrap();
        assert_eq!(canonical(&a), canonical(&b));
        assert_eq!(canonical(&a), r#"{"a":[100,{"x":0.5,"y":2}],"b":1}"#);
        assert_ne!(canonical(&json!({"a": "1"})), canonical(&json!({"a": 1})), "a string is not a number");
    }

    #[test]
    fn keys_are_scoped_and_prefixes_nest() {
        let args = json!({"q": "x"});
        let k = key("search", &args, Some("tenant-a"));
        assert!(k.starts_with(&args_prefix("search", &args)) && k.starts_with(&tool_prefix("search")));
        assert_ne!(k, key("search", &args, Some("tenant-b")));
        assert!(!key("searchx", &args, None).starts_with(&tool_prefix("search")));
    }

    #[test]
    fn a_kept_result_revives_whole_whatever_its_output_holds() {
        let mut result = ToolResult::success("c1".into(), "read".into(), "line one\n{\"json\": true}\n\u{1}\"quoted\" ☕\n".into());
        result.truncated = true;
        result.metadata.structured = Some(json!({"a": "b\nc"}));
        result.metadata.artifact_path = Some("/tmp/x".into());
        let revived = Kept::revive(&Kept::of(&result), "c2".into(), "read".into()).unwrap();
        assert_eq!((revived.call_id.as_str(), revived.output.as_str()), ("c2", result.output.as_str()));
        assert!(revived.truncated);
        assert_eq!(revived.metadata.structured, result.metadata.structured);
        assert_eq!(revived.metadata.artifact_path, result.metadata.artifact_path);
        assert!(Kept::revive("not kept", "c3".into(), "read".into()).is_none());
    }

}
