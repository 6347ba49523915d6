//! Intake: tool calls in any provider's shape, read into one form.

use serde_json::{Map, Value};

/// The arguments exactly as the model sent them, before the parse station.
#[derive(Debug, Clone, PartialEq)]
pub enum RawArgs {
    /// A JSON string (OpenAI Responses and Chat Completions).
    Text(String),
    /// An already-parsed value (Anthropic `input`, AI SDK `input`).
    Parsed(Value),
    /// No arguments field at all.
    Missing,
}

#[derive(Debug, Clone, PartialEq)]
pub struct IncomingCall {
    pub id: String,
    pub name: String,
    pub args: RawArgs,
    /// Why the call could not even be read (not an object, or a value JS could not serialize).
    pub unreadable: Option<String>,
}

/// The marker the JS layer puts in place of a call it could not serialize.
pub const UNSERIALIZABLE_KEY: &str = "__toolgateUnserializable";

pub fn read_calls(json: &str) -> Result<Vec<IncomingCall>, String> {
    let value: Value = serde_json::from_str(json).map_err(|e| format!("calls must be a JSON array: {e}"))?;
    let Value::Array(items) = value else {
        return Err("calls must be an array of tool calls".into());
    };
    Ok(items.into_iter().map(read_call).collect())
}

fn read_call(item: Value) -> IncomingCall {
    let Value::Object(mut obj) = item else {
        return IncomingCall {
            id: new_call_id(),
            name: String::new(),
            args: RawArgs::Missing,
            unreadable: Some(format!("a tool call must be an object, got {}", type_name(&item))),
        };
    };
    // Chat Completions nests name and arguments under `function`.
    if let Some(Value::Object(function)) = obj.remove("function") {
        for (k, v) in function {
            obj.entry(k).or_insert(v);
        }
    }
    let id = take_string(&mut obj, &["call_id", "toolCallId", "id"]).unwrap_or_else(new_call_id);
    let name = take_string(&mut obj, &["name", "toolName"]).unwrap_or_default();
    let unreadable = obj.remove(UNSERIALIZABLE_KEY).map(|v| match v {
        Value::String(s) => s,
        other => other.to_string(),
    });
    let args = ["arguments", "input", "args"]
        .iter()
        .find_map(|k| obj.remove(*k))
        .map_or(RawArgs::Missing, |v| match v {
            Value::String(s) => RawArgs::Text(s),
            Value::Null => RawArgs::Missing,
            other => RawArgs::Parsed(other),
        });
    IncomingCall { id, name, args, unreadable }
}

fn take_string(obj: &mut Map<String, Value>, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| match obj.get(*k) {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        _ => None,
    })
}

pub fn new_call_id() -> String {
    let suffix: String = std::iter::repeat_with(fastrand::alphanumeric).take(16).collect();
    format!("call_{suffix}")
}

pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(json: &str) -> IncomingCall {
        read_calls(&format!("[{json}]")).unwrap().remove(0)
    }

    #[test]
    fn reads_every_provider_shape() {
        let a = one(r#"{"type":"tool_use","id":"toolu_1","name":"search","input":{"q":"x"}}"#);
        assert_eq!((a.id.as_str(), a.name.as_str()), ("toolu_1", "search"));
        assert_eq!(a.args, RawArgs::Parsed(serde_json::json!({"q": "x"})));

        let r = one(r#"{"type":"function_call","id":"fc_1","call_id":"call_9","name":"search","arguments":"{\"q\":1}"}"#);
        assert_eq!(r.id, "call_9", "Responses pairs outputs by call_id, not id");
        assert_eq!(r.args, RawArgs::Text("{\"q\":1}".into()));

        let c = one(r#"{"id":"call_2","type":"function","function":{"name":"search","arguments":""}}"#);
        assert_eq!((c.id.as_str(), c.name.as_str()), ("call_2", "search"));
        assert_eq!(c.args, RawArgs::Text(String::new()));

        let s = one(r#"{"type":"tool-call","toolCallId":"t3","toolName":"search","input":{}}"#);
        assert_eq!((s.id.as_str(), s.name.as_str()), ("t3", "search"));

        let g = one(r#"{"name":"search"}"#);
        assert!(g.id.starts_with("call_") && g.id.len() == 21);
        assert_eq!(g.args, RawArgs::Missing);
    }

    #[test]
    fn a_non_object_call_is_unreadable_not_fatal() {
        let calls = read_calls(r#"[3, {"name":"a"}]"#).unwrap();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].unreadable.as_deref(), Some("a tool call must be an object, got a number"));
        assert!(calls[1].unreadable.is_none());
    }

    #[test]
    fn rejects_a_non_array() {
        assert!(read_calls("{}").unwrap_err().contains("array"));
    }
}
