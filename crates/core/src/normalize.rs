//! Station 11: whatever a handler returned or threw, folded into the contract.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::result::{ErrorKind, ToolResult};
use crate::retry;

/// How much of stderr the model sees next to stdout; all of it stays in metadata.
const STDERR_SUMMARY_CHARS: usize = 500;
pub const NO_OUTPUT: &str = "(no output)";

/// A handler's settlement as the JS layer describes it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// It returned a string.
    Text(String),
    /// It returned an object, array, number or boolean, as JSON text.
    Json(String),
    /// It returned `undefined` or `null`.
    Nothing,
    /// It threw or rejected; the JSON describes what (see `Thrown`).
    Thrown(String),
    /// It returned something JSON cannot hold; the text says what.
    Unrepresentable(String),
}

impl Outcome {
    pub fn from_parts(kind: &str, payload: String) -> Result<Self, String> {
        Ok(match kind {
            "text" => Outcome::Text(payload),
            "json" => Outcome::Json(payload),
            "none" => Outcome::Nothing,
            "thrown" => Outcome::Thrown(payload),
            "unrepresentable" => Outcome::Unrepresentable(payload),
            other => return Err(format!("unknown outcome kind \"{other}\"")),
        })
    }
}

/// What the JS layer reads off a thrown value: an Error's fields, or a description of a non-Error.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Thrown {
    name: Option<String>,
    message: Option<String>,
    stack: Option<String>,
    code: Option<Value>,
    /// `err.retryable` when it is a boolean.
    retryable: Option<bool>,
    /// `err.status`, `err.statusCode` or `err.response.status` (read as a float: any number must not sink the rest).
    status: Option<f64>,
    /// `err.cause.code` (fetch wraps the socket error there).
    cause_code: Option<String>,
    retry_after_ms: Option<f64>,
    /// Set when the thrown value was not an Error: its text form.
    non_error: Option<String>,
}

pub fn normalize(call_id: String, name: String, outcome: Outcome) -> ToolResult {
    match outcome {
        Outcome::Text(text) => ToolResult::success(call_id, name, text),
        Outcome::Nothing => ToolResult::success(call_id, name, NO_OUTPUT.into()),
        Outcome::Json(json) => match serde_json::from_str::<Value>(&json) {
            Ok(Value::Object(obj)) if is_stdio(&obj) => from_stdio(call_id, name, obj),
            Ok(value) => {
                let mut result = ToolResult::success(call_id, name, json);
                result.metadata.structured = Some(value);
                result
            }
            Err(e) => handler_failure(call_id, name.clone(), format!("Tool \"{name}\" returned a value that is not valid JSON ({e})."), false),
        },
        Outcome::Unrepresentable(why) => handler_failure(
            call_id,
            name.clone(),
            format!("Tool \"{name}\" returned a value that cannot be passed on as text or JSON: {why}."),
            false,
        ),
        Outcome::Thrown(json) => {
            let thrown: Thrown = serde_json::from_str(&json).unwrap_or_else(|_| Thrown { non_error: Some(json), ..Thrown::default() });
            let what = match (&thrown.non_error, &thrown.name, &thrown.message) {
                (Some(repr), _, _) => format!("it threw a non-Error value: {repr}"),
                (None, Some(n), Some(m)) if !m.is_empty() => format!("{n}: {m}"),
                (None, Some(n), _) => format!("{n} (no message)"),
                (None, None, Some(m)) => m.clone(),
                (None, None, None) => "it threw without saying why".into(),
            };
            let code = thrown.code.as_ref().and_then(Value::as_str);
            let codes: Vec<&str> = code.into_iter().chain(thrown.cause_code.as_deref()).collect();
            let status = thrown.status.filter(|s| s.fract() == 0.0 && (0.0..1000.0).contains(s)).map(|s| s as u64);
            let retryable = retry::transient(thrown.retryable, &codes, status);
            let mut result = handler_failure(call_id, name.clone(), format!("Tool \"{name}\" failed: {what}"), retryable);
            // A day is more than any backoff budget; a larger hint only says "not soon".
            result.retry_after_ms = thrown.retry_after_ms.filter(|ms| *ms >= 0.0).map(|ms| ms.min(86_400_000.0) as u64);
            result.metadata.error_name = thrown.name;
            result.metadata.stack = thrown.stack;
            result.metadata.error_code = thrown.code;
            result
        }
    }
}

fn handler_failure(call_id: String, name: String, error: String, retryable: bool) -> ToolResult {
    ToolResult::failure(call_id, name, ErrorKind::HandlerError, error, retryable)
}

/// `{stdout, stderr}` as process runners return it: at least one of the two a string, neither anything else.
fn is_stdio(obj: &Map<String, Value>) -> bool {
    let field = |k| obj.get(k);
    let text_or_absent = |v: Option<&Value>| matches!(v, None | Some(Value::String(_)) | Some(Value::Null));
    let some_text = matches!(field("stdout"), Some(Value::String(_))) || matches!(field("stderr"), Some(Value::String(_)));
    some_text && text_or_absent(field("stdout")) && text_or_absent(field("stderr"))
}

fn from_stdio(call_id: String, name: String, obj: Map<String, Value>) -> ToolResult {
    let text = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let (stdout, stderr) = (text("stdout"), text("stderr"));
    let exit_code = obj.get("exitCode").or_else(|| obj.get("code")).filter(|c| !c.is_null()).cloned();
    let mut output = if stdout.is_empty() { NO_OUTPUT.to_string() } else { stdout.trim_end_matches(['\n', '\r']).to_string() };
    if let Some(code) = exit_code.as_ref().filter(|c| c.as_i64() != Some(0)) {
        output.push_str(&format!("\n[exit code {code}]"));
    }
    if !stderr.trim().is_empty() {
        output.push_str(&format!("\n[stderr] {}", summarize(&stderr)));
    }
    let mut result = ToolResult::success(call_id, name, output);
    result.metadata.exit_code = exit_code;
    if !stderr.is_empty() {
        result.metadata.stderr = Some(stderr);
    }
    result.metadata.structured = Some(Value::Object(obj));
    result
}

fn summarize(stderr: &str) -> String {
    let trimmed = stderr.trim();
    let lines = trimmed.lines().count();
    let chars = trimmed.chars().count();
    if chars <= STDERR_SUMMARY_CHARS {
        return trimmed.to_string();
    }
    let head: String = trimmed.chars().take(STDERR_SUMMARY_CHARS).collect();
    format!("{head}… ({lines} lines, {chars} characters in all)")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(outcome: Outcome) -> ToolResult {
        normalize("c1".into(), "t".into(), outcome)
    }

    #[test]
    fn strings_pass_and_nothing_is_said_explicitly() {
        assert_eq!(run(Outcome::Text("hi".into())).output, "hi");
        let none = run(Outcome::Nothing);
        assert!(none.success);
        assert_eq!(none.output, NO_OUTPUT);
    }

    #[test]
    fn structures_become_json_text_and_metadata() {
        let r = run(Outcome::Json(r#"{"b":1,"a":[true]}"#.into()));
        assert_eq!(r.output, r#"{"b":1,"a":[true]}"#);
        assert_eq!(r.metadata.structured.unwrap().to_string(), r#"{"b":1,"a":[true]}"#, "key order kept");
    }

    #[test]
    fn stdio_gives_stdout_and_a_stderr_summary_without_failing() {
        let r = run(Outcome::Json(r#"{"stdout":"","stderr":"warning: x","exitCode":0}"#.into()));
        assert!(r.success, "stderr alone is not failure");
        assert_eq!(r.output, "(no output)\n[stderr] warning: x");
        assert_eq!(r.metadata.stderr.as_deref(), Some("warning: x"));
        let long = "e".repeat(2000);
        let r = run(Outcome::Json(format!(r#"{{"stdout":"ok\n","stderr":"{long}","exitCode":2}}"#)));
        assert!(r.output.starts_with("ok\n[exit code 2]\n[stderr] eeee"));
        assert!(r.output.ends_with("(1 lines, 2000 characters in all)"));
        assert_eq!(r.metadata.stderr.unwrap().len(), 2000);
    }

    #[test]
    fn thrown_errors_keep_name_and_message_but_not_the_stack_in_output() {
        let r = run(Outcome::Thrown(r#"{"name":"TypeError","message":"x is undefined","stack":"TypeError: x\n at f"}"#.into()));
        assert_eq!(r.error_kind, Some(ErrorKind::HandlerError));
        assert_eq!(r.error.as_deref(), Some("Tool \"t\" failed: TypeError: x is undefined"));
        assert!(!r.output.contains(" at f"));
        assert_eq!(r.metadata.stack.as_deref(), Some("TypeError: x\n at f"));
        let r = run(Outcome::Thrown(r#"{"nonError":"\"plain string\""}"#.into()));
        assert!(r.error.unwrap().contains("non-Error value: \"plain string\""));
    }
}
