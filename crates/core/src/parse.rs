//! Station 2: the arguments as sent → one JSON object.

use serde_json::{Map, Value};

use crate::calls::{type_name, RawArgs};

pub fn parse(raw: RawArgs) -> Result<Value, String> {
    let value = match raw {
        RawArgs::Missing => return Ok(Value::Object(Map::new())),
        RawArgs::Text(text) if text.trim().is_empty() => return Ok(Value::Object(Map::new())),
        RawArgs::Text(text) => serde_json::from_str(&text).map_err(|e| {
            format!("The arguments are not valid JSON ({e}). Send the arguments as one JSON object, e.g. {{\"key\": \"value\"}}.")
        })?,
        RawArgs::Parsed(value) => value,
    };
    if !value.is_object() {
        return Err(format!(
            "The arguments must be a JSON object with the tool's parameters as keys, but they are {}.",
            type_name(&value)
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_means_no_arguments() {
        assert_eq!(parse(RawArgs::Text("  ".into())).unwrap(), serde_json::json!({}));
        assert_eq!(parse(RawArgs::Missing).unwrap(), serde_json::json!({}));
    }

    #[test]
    fn malformed_json_names_the_position() {
        let err = parse(RawArgs::Text("{\"q\": \"x\",}".into())).unwrap_err();
        assert!(err.contains("line 1 column 11"), "{err}");
    }

    #[test]
    fn a_non_object_is_refused() {
        let err = parse(RawArgs::Text("[1,2]".into())).unwrap_err();
        assert!(err.contains("they are an array"), "{err}");
        assert!(parse(RawArgs::Parsed(serde_json::json!("x"))).is_err());
    }
}
