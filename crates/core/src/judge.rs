//! Station 13: "success, but useless". A tool's `rollbackWhen` rules look at a successful result (an empty list at
//! a JSON pointer, an output that starts with an error prefix or matches a pattern) and flag it for the
//! orchestrator to roll back and try another way. A session's consecutive flags are counted: past the executor's
//! limit the flag is no longer raised, so an agent cannot loop on it forever.

use serde_json::Value;

use crate::ops::Op;
use crate::result::{ToolResult, NO_OUTPUT};

#[derive(Debug)]
pub enum Rule {
    /// The host's predicate (a JS function) judges; its verdict comes with the settlement.
    Host,
    /// Nothing (missing, null, "", [] or {}) at this JSON pointer of the structured result; with "", also an
    /// empty text result.
    EmptyAt(String),
    StartsWith(String),
    Matches(regex::Regex),
}

const FORMS: &str = "rollbackWhen must be a rule or a list of rules: { emptyAt: '/pointer' }, { startsWith: 'text' }, \
                     { matches: 'pattern' }, or a function (value, ctx) => boolean | string";

/// The declared rules, checked at registration.
pub fn rules(declared: &Value) -> Result<Vec<Rule>, String> {
    let list = match declared {
        Value::Array(items) => items.as_slice(),
        Value::Object(_) => std::slice::from_ref(declared),
        _ => return Err(FORMS.into()),
    };
    list.iter().map(rule).collect()
}

fn rule(value: &Value) -> Result<Rule, String> {
    let Some(map) = value.as_object().filter(|m| m.len() == 1) else { return Err(FORMS.into()) };
    let (kind, arg) = map.iter().next().expect("one entry");
    if kind == "host" && arg == &Value::Bool(true) {
        return Ok(Rule::Host);
    }
    let Some(text) = arg.as_str() else { return Err(format!("rollbackWhen.{kind} must be a string")) };
    match kind.as_str() {
        "emptyAt" if text.is_empty() || text.starts_with('/') => Ok(Rule::EmptyAt(text.to_string())),
        "emptyAt" => Err(format!("rollbackWhen.emptyAt must be a JSON pointer such as '/results' (got '{text}')")),
        "startsWith" => Ok(Rule::StartsWith(text.to_string())),
        "matches" => regex::RegexBuilder::new(text)
            .size_limit(1 << 20)
            .build()
            .map(Rule::Matches)
            .map_err(|e| format!("rollbackWhen.matches does not compile: {e}")),
        _ => Err(FORMS.into()),
    }
}

/// Why a successful result should be rolled back, by the first rule that matches it.
pub fn judge(rules: &[Rule], result: &ToolResult) -> Option<String> {
    if !result.success {
        return None;
    }
    rules.iter().find_map(|rule| match rule {
        Rule::Host => None,
        Rule::EmptyAt(pointer) => {
            // A text result has no structure to point into; only "" (the whole result) applies to it.
            let found = match &result.metadata.structured {
                Some(value) => value.pointer(pointer),
                None if pointer.is_empty() => {
                    let empty = result.output.trim().is_empty() || result.output == NO_OUTPUT;
                    return empty.then(|| "nothing in the result".to_string());
                }
                None => return None,
            };
            let empty = match found {
                None | Some(Value::Null) => true,
                Some(Value::String(s)) => s.is_empty(),
                Some(Value::Array(a)) => a.is_empty(),
                Some(Value::Object(o)) => o.is_empty(),
                Some(_) => false,
            };
            let at = if pointer.is_empty() { "the result" } else { pointer.as_str() };
            empty.then(|| format!("nothing at {at}"))
        }
        Rule::StartsWith(prefix) => result.output.starts_with(prefix.as_str()).then(|| format!("the output starts with {prefix:?}")),
        Rule::Matches(pattern) => pattern.is_match(&result.output).then(|| format!("the output matches /{}/", pattern.as_str())),
    })
}

/// A judged result of a session, for the other processes to count: a flag adds one to the session's consecutive
/// rollbacks, a result not flagged ends the run.
pub fn rollbacks_op(session: &str, flagged: bool, ttl_ms: u64) -> Op<'_> {
    Op::Rollbacks { session: session.into(), flagged, ttl_ms }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn structured(value: Value) -> ToolResult {
        let mut r = ToolResult::success("c".into(), "t".into(), value.to_string());
        r.metadata.structured = Some(value);
        r
    }

    #[test]
    fn each_rule_flags_what_it_describes() {
        let rules = rules(&json!([{ "emptyAt": "/organic" }, { "startsWith": "Error:" }, { "matches": "(?i)no results" }])).unwrap();
        assert_eq!(judge(&rules, &structured(json!({ "organic": [] }))), Some("nothing at /organic".into()));
        assert_eq!(judge(&rules, &structured(json!({ "ads": [1] }))), Some("nothing at /organic".into()));
        assert_eq!(judge(&rules, &structured(json!({ "organic": [1] }))), None);
        let text = |s: &str| ToolResult::success("c".into(), "t".into(), s.into());
        assert_eq!(judge(&rules, &text("Error: quota")), Some("the output starts with \"Error:\"".into()));
        assert_eq!(judge(&rules, &text("Sorry, No Results.")), Some("the output matches /(?i)no results/".into()));
        assert_eq!(judge(&rules[1..], &text("fine")), None);
    }

    #[test]
    fn bad_rules_are_refused_with_the_forms() {
        assert!(rules(&json!("empty")).unwrap_err().contains("{ emptyAt: '/pointer' }"));
        assert!(rules(&json!({ "emptyAt": "organic" })).unwrap_err().contains("JSON pointer"));
        assert!(rules(&json!({ "matches": "(" })).unwrap_err().contains("does not compile"));
        assert!(rules(&json!({ "startsWith": "a", "matches": "b" })).is_err(), "one rule per object");
    }
}
