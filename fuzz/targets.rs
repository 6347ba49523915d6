//! What each fuzz target checks, one function per parser-like station. `cargo fuzz run <target>` (nightly) calls
//! them with generated inputs; `crates/core/tests/fuzz_replay.rs` calls them on stable with the committed corpus
//! and every crash found, so `npm test` keeps them. Each asserts what must hold for any input, not only that
//! nothing panics.

use std::sync::LazyLock;

use serde_json::{json, Value};
use toolgate_core::calls::{read_calls, RawArgs};
use toolgate_core::normalize::{normalize, Outcome};
use toolgate_core::redact::{RedactOptions, Redactor};
use toolgate_core::registry::{Registry, Tool};
use toolgate_core::repair::{decode_string, mend_arguments, repair_args, repair_json, reread, RepairOptions};
use toolgate_core::result::Redactions;
use toolgate_core::{fence, json, parse, shape, text, validate, EngineOptions, ToolSpec};

/// What a target takes: the fuzzer's bytes.
pub type Target = fn(&[u8]);

/// Every target by name, for the replay test.
#[allow(dead_code)] // the fuzz binaries use one each
pub const ALL: &[(&str, Target)] = &[
    ("intake", intake),
    ("json_repair", json_repair),
    ("key_type_repair", key_type_repair),
    ("validate", validate),
    ("redact", redact),
    ("shape_cut", shape_cut),
    ("normalize", normalize_outcome),
    ("fence", fence),
];

/// The input as text, as the host would send it (JS strings cross as UTF-8).
fn text_of(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

/// Schemas of the kinds real tools declare: required keys, enums, nested objects, arrays, a `$ref`, patterns.
static SCHEMAS: LazyLock<Vec<Value>> = LazyLock::new(|| {
    vec![
        json!({"type": "object", "properties": {"query": {"type": "string", "minLength": 1}, "max_results": {"type": "integer", "minimum": 1, "maximum": 50}}, "required": ["query"], "additionalProperties": false}),
        json!({"type": "object", "properties": {"unit": {"enum": ["celsius", "fahrenheit"]}, "days": {"type": "array", "items": {"type": "integer"}}, "flag": {"type": "boolean"}}}),
        json!({"type": "object", "properties": {"filter": {"type": "object", "properties": {"field": {"type": "string"}, "value": {"type": ["string", "number", "null"]}}, "required": ["field"]}}, "required": ["filter"]}),
        json!({"type": "object", "$defs": {"node": {"type": "object", "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}, "properties": {"root": {"$ref": "#/$defs/node"}}}),
        json!({"type": "object", "properties": {"path": {"type": "string", "pattern": "^[a-z/._-]+$"}, "mode": {"const": "read"}, "size": {"type": "number", "exclusiveMinimum": 0}}, "required": ["path"]}),
    ]
});

/// One registered tool per schema, compiled as the engine compiles them.
static TOOLS: LazyLock<Registry> = LazyLock::new(|| {
    let options = EngineOptions::default();
    let mut registry = Registry::default();
    for (i, schema) in SCHEMAS.iter().enumerate() {
        let spec = json!({"name": format!("tool_{i}"), "parameters": schema, "aliases": if i == 0 { json!({"q": "query"}) } else { json!({}) }});
        registry.register(ToolSpec::from_json(&spec.to_string()).expect("a spec"), &options).expect("the schemas compile");
    }
    registry
});

/// The tool a byte picks.
fn tool(pick: u8) -> &'static Tool {
    TOOLS.get(&format!("tool_{}", pick as usize % SCHEMAS.len())).expect("registered")
}

/// Call intake and the parse station: every element of an array is one call, read or refused, never lost; what
/// parses is an object.
pub fn intake(data: &[u8]) {
    let text = text_of(data);
    let Ok(calls) = read_calls(&text) else { return };
    if let Ok(Value::Array(items)) = serde_json::from_str::<Value>(&text) {
        assert_eq!(calls.len(), items.len(), "one call per element");
    }
    for call in calls {
        let sent = !matches!(call.args, RawArgs::Missing);
        match parse::parse(call.args, call.lone_surrogates, true) {
            Ok(parsed) => assert!(parsed.args.is_object()),
            Err(error) => assert!(sent && !error.is_empty(), "only arguments that were sent can be refused"),
        }
    }
}

/// JSON repair: what it mends is valid JSON; valid JSON is read as it is, never changed. Argument text mended, or
/// decoded from a JSON string, is one object, and says how.
pub fn json_repair(data: &[u8]) {
    let text = text_of(data);
    let valid = serde_json::from_str::<Value>(&text).ok();
    if let Some((value, repairs)) = repair_json(&text) {
        assert!(serde_json::from_str::<Value>(&value.to_string()).is_ok());
        if let Some(valid) = valid {
            if repairs.is_empty() {
                assert_eq!(value, valid, "valid JSON with nothing to mend is read as it is");
            }
        }
    }
    if let Some((value, repairs)) = mend_arguments(&text) {
        assert!(value.is_object());
        let around = repairs.iter().any(|r| r.rule == "json-text-around");
        assert!(!around || !text.trim().starts_with('{') || !text.trim().ends_with('}'), "words around the object, or no such repair");
    }
    if let Some((value, decoded, _)) = decode_string(&text) {
        assert!(value.is_object() && matches!(decoded.before.as_u64(), Some(1 | 2)));
    }
    if let Some((mended, replaced)) = json::mend_lone_surrogates(&text) {
        assert!(replaced > 0 && mended.len() >= text.len());
    }
}

/// Key and type repair: a call that changed says what changed, and one that did not says nothing.
pub fn key_type_repair(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else { return };
    let Ok(mut args) = serde_json::from_slice::<Value>(rest) else { return };
    let tool = tool(pick);
    let before = args.clone();
    let repairs = repair_args(&tool.schema, &mut args, &tool.aliases, &RepairOptions::default());
    assert_eq!(repairs.is_empty(), args == before, "a repair is recorded exactly when the arguments changed");
    // The one reading that validates, found for arguments that do not: it validates, and says what changed.
    if !tool.validator.is_valid(&before) {
        let names = [tool.spec.name.as_str(); 2];
        if let Some((reread, repairs)) = reread(&tool.schema, &before, &tool.aliases, names, &RepairOptions::default(), |v| tool.validator.is_valid(v)) {
            assert!(tool.validator.is_valid(&reread) && !repairs.is_empty() && reread != before);
        }
    }
}

/// Validation: valid arguments pass, invalid ones get a message a model can read, bounded whatever they hold.
pub fn validate(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else { return };
    let Ok(args) = serde_json::from_slice::<Value>(rest) else { return };
    let tool = tool(pick);
    match validate::validate(tool, &args, &|text| text.to_string()) {
        Ok(()) => assert!(tool.validator.is_valid(&args)),
        Err(message) => {
            assert!(!tool.validator.is_valid(&args));
            assert!(message.starts_with("The arguments do not match the parameters of"));
            // Twelve problems at most, each quoting what it quotes cut short.
            assert!(text::char_count(&message) < 16 * 1024, "{} characters", text::char_count(&message));
        }
    }
}

static REDACTOR: LazyLock<Redactor> = LazyLock::new(|| {
    let options: RedactOptions = serde_json::from_value(json!({"emails": true, "patterns": ["TICKET-[0-9]{6}"], "literals": ["Project Bluebird"]})).expect("options");
    Redactor::new(&options).expect("the rules compile")
});

/// Redaction: its output is never longer by more than its markers, carries no literal it was told to hide, and a
/// JSON value's every string and key is redacted alike.
pub fn redact(data: &[u8]) {
    let text = text_of(data);
    let mut counts = Redactions::new();
    let out = REDACTOR.redact(&text, &mut counts);
    let markers: u64 = counts.values().sum();
    assert_eq!(matches!(out, std::borrow::Cow::Borrowed(_)), markers == 0);
    assert!(!out.contains("Project Bluebird"));
    if let Ok(mut value) = serde_json::from_str::<Value>(&text) {
        REDACTOR.redact_value(&mut value, &mut Redactions::new());
        assert!(!value.to_string().contains("Project Bluebird"));
    }
}

/// Structural cuts: the preview of any JSON is valid JSON within its budget (or one line saying what was too
/// large); a text cut keeps whole characters and says how much more there was.
pub fn shape_cut(data: &[u8]) {
    let Some((&budget, rest)) = data.split_first() else { return };
    let budget = 16 + budget as usize * 8;
    if let Ok(value) = serde_json::from_slice::<Value>(rest) {
        let cut = shape::cut_value(&value, budget);
        let shown = cut.to_string();
        assert!(serde_json::from_str::<Value>(&shown).is_ok());
        assert!(text::char_count(&shown) <= budget || matches!(&cut, Value::String(s) if s.ends_with("too large to preview")), "{shown}");
    }
    let text = text_of(rest);
    let quoted = text::quote(&text);
    assert!(text::char_count(&quoted) <= text::QUOTED_CHARS + 40, "a quote is bounded");
    let clipped = text::clip(&text, budget);
    assert!(text::char_count(&clipped) <= budget + 1);
}

/// Normalize: whatever a handler settles with becomes exactly one result, a success or a failure with its kind.
pub fn normalize_outcome(data: &[u8]) {
    let Some((&kind, rest)) = data.split_first() else { return };
    let payload = text_of(rest);
    let outcome = match kind % 6 {
        0 => Outcome::Text(payload),
        1 => Outcome::Json(payload),
        2 => Outcome::Thrown(payload),
        3 => Outcome::Unrepresentable(payload),
        4 => Outcome::Binary(rest.to_vec()),
        _ => Outcome::Nothing,
    };
    let result = normalize("call".into(), "tool".into(), outcome);
    assert_eq!(result.success, result.error_kind.is_none());
    assert_eq!(result.success, result.error.is_none());
    if !result.success {
        assert!(result.output.starts_with("Error ("));
    }
}

/// The untrusted fence: whatever a page holds, the fenced text closes once, with its own id, and no imitation of
/// the tag is left in the body, however it was disguised (fencing the body again changes nothing in it).
pub fn fence(data: &[u8]) {
    let page = text_of(data);
    let body = fenced_body(&fence::fence("web", &page));
    assert_eq!(fenced_body(&fence::fence("web", &body)), body, "nothing is left to neutralize");
}

/// The body of a fenced text, checked to close with the id it opened with.
fn fenced_body(fenced: &str) -> String {
    let (head, rest) = fenced.split_once('\n').expect("a first line");
    let id = head.rsplit_once("id=\"").and_then(|(_, id)| id.strip_suffix("\">")).expect("an id");
    let closing = format!("\n</untrusted-data id=\"{id}\">");
    assert!(rest.ends_with(&closing), "closed with its own id");
    let start = rest.find('\n').expect("the notice line") + 1;
    rest[start..rest.len() - closing.len()].to_string()
}
