//! Intake: tool calls in any provider's shape, read into one form.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::json;

/// The arguments exactly as the model sent them, before the parse station.
#[derive(Debug, Clone, PartialEq)]
pub enum RawArgs {
    /// A JSON string (OpenAI Responses and Chat Completions).
    Text(String),
    /// An already-parsed value (Anthropic `input`, AI SDK `input`).
    Parsed(Value),
    /// No arguments field at all.
    Missing,
    /// Arguments that were sent but cannot be read (nested past the limit), and why.
    Unreadable(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct IncomingCall {
    pub id: String,
    pub name: String,
    pub args: RawArgs,
    /// Why the call could not even be read (not an object, or a value JS could not serialize).
    pub unreadable: Option<String>,
    /// Halves of UTF-16 surrogate pairs in the arguments, read as U+FFFD.
    pub lone_surrogates: usize,
}

/// The marker the JS layer puts in place of a call it could not serialize.
pub const UNSERIALIZABLE_KEY: &str = "__toolgateUnserializable";

pub fn read_calls(json: &str) -> Result<Vec<IncomingCall>, String> {
    let items: Vec<&RawValue> = serde_json::from_str(json).map_err(|e| match serde_json::from_str::<Value>(json) {
        Ok(_) => "calls must be an array of tool calls".to_string(),
        Err(_) => format!("calls must be a JSON array: {e}"),
    })?;
    Ok(items.into_iter().map(read_call).collect())
}

/// The fields a call may carry in any provider's shape, read without building the whole object: this runs for
/// every call, and a generic JSON value costs a map and a string per key.
#[derive(Deserialize, Default)]
struct WireCall<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    call_id: Option<&'a RawValue>,
    #[serde(rename = "toolCallId", default, borrow, deserialize_with = "present")]
    tool_call_id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    name: Option<&'a RawValue>,
    #[serde(rename = "toolName", default, borrow, deserialize_with = "present")]
    tool_name: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    arguments: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    input: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    args: Option<&'a RawValue>,
    /// Chat Completions nests name and arguments here; the call's own fields come first.
    #[serde(default, borrow, deserialize_with = "present")]
    function: Option<&'a RawValue>,
    #[serde(rename = "__toolgateUnserializable", default, borrow, deserialize_with = "present")]
    unserializable: Option<&'a RawValue>,
}

/// A field that is there, even as `null`: `"arguments": null` means no arguments, not "look at the next field".
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

fn read_call(item: &RawValue) -> IncomingCall {
    let unreadable = |why: String| IncomingCall { id: new_call_id(), name: String::new(), args: RawArgs::Missing, unreadable: Some(why), lone_surrogates: 0 };
    if !item.get().starts_with('{') {
        let value: Value = json::from_str_mended(item.get()).map_or(Value::Null, |(v, _)| v);
        return unreadable(format!("a tool call must be an object, got {}", type_name(&value)));
    }
    // Half a surrogate pair in a field's name refuses the whole object to serde_json: read as U+FFFD, as in values.
    match wire_call(item.get()) {
        Ok(call) => from_wire(call),
        Err(e) => match json::mend_lone_surrogates(item.get()) {
            Some((mended, _)) => wire_call(&mended).map_or_else(|e| unreadable(format!("a tool call could not be read ({e})")), from_wire),
            None => unreadable(format!("a tool call could not be read ({e})")),
        },
    }
}

/// A call's own fields and those of its `function` object (Chat Completions), both read.
fn wire_call(text: &str) -> Result<(WireCall<'_>, WireCall<'_>), serde_json::Error> {
    let call: WireCall = serde_json::from_str(text)?;
    let function = match call.function.filter(|f| f.get().starts_with('{')) {
        Some(f) => serde_json::from_str(f.get())?,
        None => WireCall::default(),
    };
    Ok((call, function))
}

fn from_wire((call, function): (WireCall<'_>, WireCall<'_>)) -> IncomingCall {
    let id = own_or_nested([call.call_id, call.tool_call_id, call.id], [function.call_id, function.tool_call_id, function.id]).into_iter().find_map(non_empty_string).unwrap_or_else(new_call_id);
    let name = own_or_nested([call.name, call.tool_name, None], [function.name, function.tool_name, None]).into_iter().find_map(non_empty_string).unwrap_or_default();
    let unreadable_why = call.unserializable.or(function.unserializable).map(|v| match json::from_str_mended::<Value>(v.get()) {
        Ok((Value::String(s), _)) => s,
        _ => v.get().to_string(),
    });
    let sent = own_or_nested([call.arguments, call.input, call.args], [function.arguments, function.input, function.args]).into_iter().flatten().next();
    let (args, lone_surrogates) = match sent.map(|raw| json::from_str_mended::<Value>(raw.get())) {
        None | Some(Ok((Value::Null, _))) => (RawArgs::Missing, 0),
        Some(Ok((Value::String(s), n))) => (RawArgs::Text(s), n),
        Some(Ok((other, n))) => (RawArgs::Parsed(other), n),
        Some(Err(e)) if json::too_deep(&e) => (RawArgs::Unreadable(too_deep()), 0),
        Some(Err(e)) => (RawArgs::Unreadable(format!("The arguments could not be read ({e}). Send them as one JSON object.")), 0),
    };
    IncomingCall { id, name, args, unreadable: unreadable_why, lone_surrogates }
}

/// Why arguments nested past the limit are refused, in the model's terms.
pub fn too_deep() -> String {
    format!("The arguments nest arrays and objects more than {} levels deep, too deep to read. Send them as one JSON object nested less deeply.", json::MAX_DEPTH)
}

fn own_or_nested<'a>(own: [Option<&'a RawValue>; 3], nested: [Option<&'a RawValue>; 3]) -> [Option<&'a RawValue>; 3] {
    [own[0].or(nested[0]), own[1].or(nested[1]), own[2].or(nested[2])]
}

fn non_empty_string(raw: Option<&RawValue>) -> Option<String> {
    let raw = raw.filter(|r| r.get().starts_with('"'))?;
    json::from_str_mended::<String>(raw.get()).ok().map(|(s, _)| s).filter(|s| !s.is_empty())
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
    fn a_null_field_is_there_and_says_nothing() {
        let a = one(r#"{"id":"c1","name":"inc","arguments":null,"input":{"n":1}}"#);
        assert_eq!(a.args, RawArgs::Missing, "null arguments are no arguments; input is not read instead");
        let n = one(r#"{"id":"c2","name":null,"function":{"name":"inc","arguments":"{}"}}"#);
        assert_eq!(n.name, "", "the call's own null name stands over the nested one");
        let u = one(r#"{"id":"c3","name":"inc","__toolgateUnserializable":null}"#);
        assert_eq!(u.unreadable.as_deref(), Some("null"));
        let i = one(r#"{"call_id":null,"id":"c4","name":"inc"}"#);
        assert_eq!(i.id, "c4", "a null id field is passed over for the next one");
    }

    #[test]
    fn arguments_with_half_a_surrogate_pair_are_read_not_lost() {
        let object = one(r#"{"name":"s","input":{"q":"Zo\ud83d"}}"#);
        assert_eq!((object.args, object.lone_surrogates), (RawArgs::Parsed(serde_json::json!({"q": "Zo\u{fffd}"})), 1));
        let text = one(r#"{"name":"s","arguments":"{\"q\":\"Zo\ud83d\"}"}"#);
        assert_eq!((text.args, text.lone_surrogates), (RawArgs::Text("{\"q\":\"Zo\u{fffd}\"}".into()), 1));
        assert_eq!(one(r#"{"name":"s\udc00"}"#).name, "s\u{fffd}", "a name is read the same way");
    }

    #[test]
    fn half_a_surrogate_pair_in_a_field_name_costs_the_call_nothing() {
        let own = one(r#"{"id":"c1","name":"s","input":{"q":1},"x\ud83d":1}"#);
        assert_eq!((own.id.as_str(), own.name.as_str(), own.unreadable.is_none()), ("c1", "s", true));
        let nested = one(r#"{"id":"c2","function":{"name":"s","arguments":"{}","y\udc00":2}}"#);
        assert_eq!((nested.name.as_str(), nested.args), ("s", RawArgs::Text("{}".into())));
    }

    #[test]
    fn arguments_nested_past_the_limit_are_unreadable_not_missing() {
        let deep = format!(r#"{{"name":"s","input":{}1{}}}"#, r#"{"d":"#.repeat(200), "}".repeat(200));
        assert_eq!(one(&deep).args, RawArgs::Unreadable(too_deep()));
    }

    #[test]
    fn rejects_a_non_array() {
        assert!(read_calls("{}").unwrap_err().contains("array"));
    }
}
