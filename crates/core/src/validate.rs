//! Station 4: the arguments against the tool's JSON Schema, every problem with its path, worded for a model.
//!
//! Messages are rebuilt from the error kind rather than taken from the validator's text, which quotes the
//! offending value and could echo a secret the model put in an argument.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{ValidationError, Validator};
use serde_json::Value;

use crate::text::{clip, list, output_mismatch, problem, quote, worded, Problems, LISTED_ITEMS, QUOTED_CHARS, VALUE};

/// `redact`: what the message quotes of the model's own text (keys, the paths they make) is redacted whole before it
/// is cut, so that no cut leaves part of a secret.
pub fn validate(tool: &impl Schemas, args: &Value, redact: &dyn Fn(&str) -> String) -> Result<(), String> {
    let validator = tool.arguments();
    if validator.is_valid(args) {
        return Ok(());
    }
    let what = format!("The arguments do not match the parameters of \"{}\"", tool.name());
    Err(worded(&what, problems(validator, args, ARGUMENTS, redact), ARGUMENTS_ADVICE))
}

/// What the station reads of a tool: its name and its compiled schemas.
pub trait Schemas {
    fn name(&self) -> &str;
    fn arguments(&self) -> &Validator;
    /// The return value's schema, when the engine checks it (`outputSchema`).
    fn output(&self) -> Option<&Validator>;
}

/// What the schema's own validation found (a Standard Schema's refinements): each issue's path, a JSON pointer, and
/// message, worded as the engine words its own.
pub fn issues(name: &str, issues: &[(String, String)], redact: &dyn Fn(&str) -> String) -> String {
    let listed = Problems::of(issues.iter(), |(path, message)| located(path, ARGUMENTS, &clip(&redact(message), MESSAGE_CHARS), redact));
    worded(&format!("The arguments do not match the parameters of \"{name}\""), listed, ARGUMENTS_ADVICE)
}

/// A handler's return value against the tool's `outputSchema`: the tool's fault, not the call's.
pub fn output(tool: &impl Schemas, value: &Value, redact: &dyn Fn(&str) -> String) -> Result<(), String> {
    match tool.output() {
        Some(validator) if !validator.is_valid(value) => Err(output_mismatch(tool.name(), problems(validator, value, VALUE, redact))),
        _ => Ok(()),
    }
}

const ARGUMENTS_ADVICE: &str = "Fix these and call the tool again.";
/// How a problem at the root of the arguments is placed.
const ARGUMENTS: &str = "(arguments)";
/// The longest message of a schema library's issue the model reads.
const MESSAGE_CHARS: usize = 300;

fn problems(validator: &Validator, value: &Value, root: &str, redact: &dyn Fn(&str) -> String) -> Problems {
    Problems::of(validator.iter_errors(value), |e| located(&e.instance_path().to_string(), root, &describe(&e, redact), redact))
}

/// One listed problem. The path is made of the model's keys: redacted whole, then a long one is cut.
fn located(path: &str, root: &str, what: &str, redact: &dyn Fn(&str) -> String) -> String {
    problem(&clip(&redact(path), QUOTED_CHARS), root, what)
}

fn describe(error: &ValidationError<'_>, redact: &dyn Fn(&str) -> String) -> String {
    let instance = error.instance();
    match error.kind() {
        ValidationErrorKind::Type { kind } => {
            let expected = match kind {
                TypeKind::Single(t) => t.to_string(),
                TypeKind::Multiple(set) => set.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" or "),
            };
            format!("must be {}, got {}", with_article(&expected), json_type(instance))
        }
        ValidationErrorKind::Required { property } => format!("missing required property {property}"),
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            format!("unexpected {} {}: remove {}", plural("property", unexpected.len()), quoted(unexpected, redact), them(unexpected.len()))
        }
        ValidationErrorKind::UnevaluatedProperties { unexpected } => {
            format!("unexpected {} {}: remove {}", plural("property", unexpected.len()), quoted(unexpected, redact), them(unexpected.len()))
        }
        ValidationErrorKind::Enum { options } => format!("must be one of {}", list_values(options)),
        ValidationErrorKind::Constant { expected_value } => format!("must be exactly {}", clip(&expected_value.to_string(), QUOTED_CHARS)),
        ValidationErrorKind::Minimum { limit } => format!("must be at least {limit}"),
        ValidationErrorKind::Maximum { limit } => format!("must be at most {limit}"),
        ValidationErrorKind::ExclusiveMinimum { limit } => format!("must be greater than {limit}"),
        ValidationErrorKind::ExclusiveMaximum { limit } => format!("must be less than {limit}"),
        ValidationErrorKind::MultipleOf { multiple_of } => format!("must be a multiple of {multiple_of}"),
        ValidationErrorKind::MinLength { limit } => format!("must be at least {limit} {} long", plural("character", *limit as usize)),
        ValidationErrorKind::MaxLength { limit } => format!("must be at most {limit} {} long", plural("character", *limit as usize)),
        ValidationErrorKind::MinItems { limit } => format!("must have at least {limit} {}", plural("item", *limit as usize)),
        ValidationErrorKind::MaxItems { limit } => format!("must have at most {limit} {}", plural("item", *limit as usize)),
        ValidationErrorKind::MinProperties { limit } => format!("must have at least {limit} {}", plural("property", *limit as usize)),
        ValidationErrorKind::MaxProperties { limit } => format!("must have at most {limit} {}", plural("property", *limit as usize)),
        ValidationErrorKind::UniqueItems => "items must be unique".into(),
        ValidationErrorKind::Pattern { pattern } => format!("must match the pattern {}", clip(pattern, QUOTED_CHARS)),
        ValidationErrorKind::Format { format } => format!("must be a valid {format}"),
        ValidationErrorKind::AnyOf { .. } | ValidationErrorKind::OneOfNotValid { .. } => {
            "does not match any of the allowed forms of this value".into()
        }
        ValidationErrorKind::OneOfMultipleValid { .. } => "matches more than one of the allowed forms; make it match exactly one".into(),
        ValidationErrorKind::Not { .. } => "is a value that is not allowed here".into(),
        ValidationErrorKind::FalseSchema => "is not allowed here".into(),
        ValidationErrorKind::Contains => "must contain at least one item of the required form".into(),
        ValidationErrorKind::PropertyNames { error } => format!("has a property name that is not allowed (the name {})", describe(error, redact)),
        _ => clip(&error.masked().to_string(), QUOTED_CHARS).into_owned(),
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn with_article(type_names: &str) -> String {
    type_names
        .split(" or ")
        .map(|t| match t {
            "null" => "null".to_string(),
            t if t.starts_with(['a', 'e', 'i', 'o', 'u']) => format!("an {t}"),
            t => format!("a {t}"),
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

fn plural(word: &str, n: usize) -> String {
    match (n, word) {
        (1, w) => w.to_string(),
        (_, "property") => "properties".into(),
        (_, w) => format!("{w}s"),
    }
}

fn them(n: usize) -> &'static str {
    if n == 1 { "it" } else { "them" }
}

/// The model's own keys, each quoted and cut short, and at most `LISTED_ITEMS` of them.
fn quoted(names: &[String], redact: &dyn Fn(&str) -> String) -> String {
    list(names.iter().map(|n| quote(&redact(n))), LISTED_ITEMS)
}

fn list_values(options: &Value) -> String {
    match options {
        Value::Array(items) => list(items.iter().map(|v| clip(&v.to_string(), QUOTED_CHARS).into_owned()), LISTED_ITEMS),
        other => clip(&other.to_string(), QUOTED_CHARS).into_owned(),
    }
}
