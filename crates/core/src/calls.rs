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
    /// The stream the call came in ended inside its arguments: they are what arrived, and the call never runs.
    pub cut: bool,
}

/// The marker the JS layer puts in place of a call it could not serialize.
pub const UNSERIALIZABLE_KEY: &str = "__toolgateUnserializable";

pub fn read_calls(json: &str) -> Result<Vec<IncomingCall>, String> {
    if let Some(calls) = read_objects(json) {
        return Ok(calls);
    }
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
    #[serde(rename = "toolUseId", default, borrow, deserialize_with = "present")]
    tool_use_id: Option<&'a RawValue>,
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
    /// The objects that hold the call's fields in Chat Completions (`function`), Gemini (`functionCall`) and
    /// Bedrock Converse (`toolUse`); the call's own fields come first.
    #[serde(default, borrow, deserialize_with = "present")]
    function: Option<&'a RawValue>,
    #[serde(rename = "functionCall", default, borrow, deserialize_with = "present")]
    function_call: Option<&'a RawValue>,
    #[serde(rename = "toolUse", default, borrow, deserialize_with = "present")]
    tool_use: Option<&'a RawValue>,
    /// MCP `tools/call` params: `_meta.progressToken` names the call when nothing else does.
    #[serde(rename = "_meta", default, borrow, deserialize_with = "present")]
    meta: Option<&'a RawValue>,
    #[serde(rename = "__toolgateUnserializable", default, borrow, deserialize_with = "present")]
    unserializable: Option<&'a RawValue>,
    #[serde(rename = "__toolgateCut", default, borrow, deserialize_with = "present")]
    cut: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct WireMeta<'a> {
    #[serde(rename = "progressToken", default, borrow)]
    progress_token: Option<&'a RawValue>,
}

/// What a call with none of the fields of any shape is told: the shapes read, so the sender can see what it missed.
pub const SHAPES: &str = "it has none of the fields of the shapes toolgate reads. Send one of: Anthropic tool_use { id, name, input }; \
OpenAI Responses function_call { call_id, name, arguments }; Chat Completions { id, function: { name, arguments } }; \
AI SDK tool-call { toolCallId, toolName, input }; Gemini { functionCall: { id?, name, args } }; \
Bedrock Converse { toolUse: { toolUseId, name, input } }; LangChain { id, name, args }; \
MCP tools/call params { name, arguments }; or { id?, name, arguments? }";

/// A field that is there, even as `null`: `"arguments": null` means no arguments, not "look at the next field".
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

fn read_call(item: &RawValue) -> IncomingCall {
    let unreadable = |why: String| IncomingCall { id: new_call_id(), name: String::new(), args: RawArgs::Missing, unreadable: Some(why), lone_surrogates: 0, cut: false };
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

/// Calls that are all objects, read in one pass over the text; None when any is not (or has half a surrogate pair
/// in a field's name), for `read_calls` to read them one at a time and say what is wrong with which.
fn read_objects(json: &str) -> Option<Vec<IncomingCall>> {
    let calls: Vec<ObjectCall> = serde_json::from_str(json).ok()?;
    calls.into_iter().map(|call| with_nest(call.0).map(from_wire)).collect::<Result<Vec<_>, _>>().ok()
}

/// A call's fields, read only from an object (serde would read a struct from an array too, by position).
struct ObjectCall<'a>(WireCall<'a>);

impl<'de> Deserialize<'de> for ObjectCall<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = WireCall<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a tool call object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                WireCall::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(Fields).map(ObjectCall)
    }
}

/// A call's own fields and those of the first object that nests them (`function`, `functionCall`, `toolUse`).
fn wire_call(text: &str) -> Result<(WireCall<'_>, WireCall<'_>), serde_json::Error> {
    with_nest(serde_json::from_str(text)?)
}

fn with_nest(call: WireCall<'_>) -> Result<(WireCall<'_>, WireCall<'_>), serde_json::Error> {
    let nest = [call.function, call.function_call, call.tool_use].into_iter().flatten().find(|f| f.get().starts_with('{'));
    let nested = match nest {
        Some(f) => serde_json::from_str(f.get())?,
        None => WireCall::default(),
    };
    Ok((call, nested))
}

impl WireCall<'_> {
    /// Any field of a known shape, the name aside: a call that has one is a call that lacks a name, not a stray object.
    fn has_call_fields(&self) -> bool {
        [self.call_id, self.tool_call_id, self.tool_use_id, self.id, self.arguments, self.input, self.args, self.function, self.function_call, self.tool_use, self.meta]
            .iter()
            .any(Option::is_some)
    }
}

fn from_wire((call, function): (WireCall<'_>, WireCall<'_>)) -> IncomingCall {
    let ids = own_or_nested([call.call_id, call.tool_call_id, call.tool_use_id, call.id], [function.call_id, function.tool_call_id, function.tool_use_id, function.id]);
    let id = ids.into_iter().find_map(non_empty_string).or_else(|| call.meta.and_then(progress_token)).unwrap_or_else(new_call_id);
    let names = own_or_nested([call.name, call.tool_name], [function.name, function.tool_name]);
    let named = names.iter().any(Option::is_some);
    let name = names.into_iter().find_map(non_empty_string).unwrap_or_default();
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
    let stray = !named && !call.has_call_fields();
    let unreadable = unreadable_why.or_else(|| stray.then(|| SHAPES.to_string()));
    let cut = call.cut.is_some_and(|v| v.get() == "true");
    IncomingCall { id, name, args, unreadable, lone_surrogates, cut }
}

/// MCP's progress token, a string or an integer, as the call's id.
fn progress_token(meta: &RawValue) -> Option<String> {
    // serde reads a struct from an array too, by position.
    if !meta.get().starts_with('{') {
        return None;
    }
    let token = serde_json::from_str::<WireMeta>(meta.get()).ok()?.progress_token?;
    let text = token.get();
    let integer = text.strip_prefix('-').unwrap_or(text).bytes().all(|b| b.is_ascii_digit()) && text != "-";
    if integer {
        Some(text.to_string())
    } else {
        non_empty_string(Some(token))
    }
}

/// Why arguments nested past the limit are refused, in the model's terms.
pub fn too_deep() -> String {
    format!("The arguments nest arrays and objects more than {} levels deep, too deep to read. Send them as one JSON object nested less deeply.", json::MAX_DEPTH)
}

fn own_or_nested<'a, const N: usize>(own: [Option<&'a RawValue>; N], nested: [Option<&'a RawValue>; N]) -> [Option<&'a RawValue>; N] {
    std::array::from_fn(|i| own[i].or(nested[i]))
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
    fn calls_that_are_all_objects_read_in_one_pass_as_one_at_a_time() {
        let shapes = [
            r#"{"type":"function_call","call_id":"c1","name":"search","arguments":"{\"q\":\"\\ud83d\"}"}"#,
            r#"{"id":"call_2","type":"function","function":{"name":"search","arguments":""}}"#,
            r#"{"functionCall":{"id":"fc_7","name":"search","args":{"q":"x"}},"thoughtSignature":"c2ln"}"#,
            r#"{"name":"search","arguments":{"q":"\ud83d"},"_meta":{"progressToken":"p-1"}}"#,
            r#"{"__toolgateUnserializable":"a BigInt","call_id":"c9","name":"s"}"#,
            r#"{"stray":true}"#,
        ];
        let json = format!("[{}]", shapes.join(","));
        // A call with no id is given a random one: those are compared apart.
        let made_ids = |calls: Vec<IncomingCall>| -> Vec<IncomingCall> {
            calls.into_iter().map(|c| IncomingCall { id: if c.id.starts_with("call_") { String::new() } else { c.id.clone() }, ..c }).collect()
        };
        let fast = read_objects(&json).expect("every call is an object");
        let items: Vec<&RawValue> = serde_json::from_str(&json).unwrap();
        let slow: Vec<IncomingCall> = items.into_iter().map(read_call).collect();
        assert_eq!(made_ids(fast.clone()), made_ids(slow));
        assert_eq!(fast[3].lone_surrogates, 1);
        for mixed in [r#"[{"name":"a"},[1]]"#, r#"[{"name":"a"},"x"]"#, r#"[{"na\udc00me":"a"}]"#, r#"[{"name":"a","name":"b"}]"#] {
            assert!(read_objects(mixed).is_none(), "{mixed}: read one at a time");
        }
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

        let gemini = one(r#"{"functionCall":{"id":"fc_7","name":"search","args":{"q":"x"}},"thoughtSignature":"c2ln"}"#);
        assert_eq!((gemini.id.as_str(), gemini.name.as_str()), ("fc_7", "search"));
        assert_eq!(gemini.args, RawArgs::Parsed(serde_json::json!({"q": "x"})));
        let unnamed = one(r#"{"functionCall":{"name":"search","args":{}}}"#);
        assert!(unnamed.id.starts_with("call_"), "Gemini often sends no id: one is made for the result");

        let bedrock = one(r#"{"toolUse":{"toolUseId":"tooluse_1","name":"search","input":{"q":"y"}}}"#);
        assert_eq!((bedrock.id.as_str(), bedrock.name.as_str()), ("tooluse_1", "search"));
        assert_eq!(bedrock.args, RawArgs::Parsed(serde_json::json!({"q": "y"})));

        let langchain = one(r#"{"id":"lc_1","name":"search","args":{"q":"z"},"type":"tool_call"}"#);
        assert_eq!((langchain.id.as_str(), langchain.args), ("lc_1", RawArgs::Parsed(serde_json::json!({"q": "z"}))));
    }

    #[test]
    fn an_mcp_call_is_named_by_its_progress_token() {
        let text = one(r#"{"name":"search","arguments":{"q":1},"_meta":{"progressToken":"p-1"}}"#);
        assert_eq!((text.id.as_str(), text.args), ("p-1", RawArgs::Parsed(serde_json::json!({"q": 1}))));
        assert_eq!(one(r#"{"name":"search","_meta":{"progressToken":42}}"#).id, "42");
        for meta in [r#"{}"#, r#"{"progressToken":""}"#, r#"{"progressToken":{"a":1}}"#, r#"{"progressToken":1.5}"#, r#"[1]"#, r#""x""#] {
            let call = one(&format!(r#"{{"name":"search","_meta":{meta}}}"#));
            assert!(call.id.starts_with("call_") && call.unreadable.is_none(), "{meta}: {call:?}");
        }
        assert_eq!(one(r#"{"id":"own","name":"s","_meta":{"progressToken":"p"}}"#).id, "own", "an id field comes first");
    }

    #[test]
    fn an_object_with_no_field_of_any_shape_says_which_shapes_are_read() {
        for call in [r#"{"text":"hi"}"#, r#"{"tool":"search","params":{}}"#, r#"{}"#] {
            assert_eq!(one(call).unreadable.as_deref(), Some(SHAPES), "{call}");
        }
        assert!(SHAPES.contains("functionCall") && SHAPES.contains("toolUse") && SHAPES.contains("tool_use"));
        // A call in a known shape that lacks a name is a lookup matter: the model is told the tools it can call.
        for call in [r#"{"name":""}"#, r#"{"function":{"arguments":"{}"}}"#, r#"{"id":"x","input":{}}"#, r#"{"functionCall":{"args":{}}}"#, r#"{"args":"{","type":"invalid_tool_call"}"#] {
            let read = one(call);
            assert!(read.unreadable.is_none() && read.name.is_empty(), "{call}: {read:?}");
        }
    }

    #[test]
    fn the_first_nesting_object_is_read_and_a_null_one_passed_over() {
        let both = one(r#"{"functionCall":{"id":"g1","name":"a","args":{"x":1}},"toolUse":{"toolUseId":"b1","name":"b","input":{}}}"#);
        assert_eq!((both.id.as_str(), both.name.as_str()), ("g1", "a"));
        let after_null = one(r#"{"toolUse":null,"functionCall":{"id":"g2","name":"a","args":{}}}"#);
        assert_eq!((after_null.id.as_str(), after_null.name.as_str(), after_null.unreadable), ("g2", "a", None));
        let not_object = one(r#"{"functionCall":"search","toolUse":{"toolUseId":"t","name":"b"}}"#);
        assert_eq!((not_object.id.as_str(), not_object.name.as_str()), ("t", "b"));
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
