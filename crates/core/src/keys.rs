//! Keys of what the stations remember, from the model's arguments: canonical JSON (key order and number spelling
//! do not matter) joined with a separator no tool name holds and JSON text escapes.

use serde_json::{Map, Value};

/// Separates the parts of a key; never appears in a tool name and is escaped in JSON text.
pub const SEP: char = '\u{1}';

/// `tool SEP canonical-args SEP scope`: what a cache entry or a dedup query is known by.
pub fn of_call(tool: &str, args: &Value, scope: Option<&str>) -> String {
    format!("{tool}{SEP}{}{SEP}{}", canonical(args), scope.unwrap_or(""))
}

/// JSON with sorted keys and numbers in one spelling: `{"b":1.0,"a":1e2}` and `{"a":100,"b":1}` are the same.
pub fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(k).expect("a string serializes"));
                out.push(':');
                write_canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => out.push_str(&format!("{}", f as i64)),
            Some(f) => out.push_str(&format!("{f:?}")),
            None => out.push_str(&n.to_string()),
        },
        other => out.push_str(&other.to_string()),
    }
}

/// Only the named arguments (all when `names` is empty), for keys that ignore the rest.
pub fn select(args: &Value, names: &[String]) -> Value {
    match args {
        Value::Object(map) if !names.is_empty() => {
            Value::Object(names.iter().filter_map(|n| map.get(n).map(|v| (n.clone(), v.clone()))).collect::<Map<_, _>>())
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn select_keeps_only_the_named_arguments() {
        let args = json!({"query": "x", "page": 2});
        assert_eq!(select(&args, &["query".into()]), json!({"query": "x"}));
        assert_eq!(select(&args, &[]), args);
    }
}
