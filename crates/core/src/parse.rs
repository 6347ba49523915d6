//! Station 2: the arguments as sent → one JSON object.

use serde_json::{Map, Value};

use crate::calls::{type_name, RawArgs};
use crate::repair;
use crate::result::Repair;

/// The arguments as one object, and, when the text was not valid JSON but could be mended, what was mended and
/// the parser's error (which stands if the mended call still fails validation).
#[derive(Debug, Default)]
pub struct Parsed {
    pub args: Value,
    pub mended: Vec<Repair>,
    pub parser_error: Option<String>,
}

/// `mend`: try to repair argument text that is not valid JSON (the repair station's JSON rules).
pub fn parse(raw: RawArgs, mend: bool) -> Result<Parsed, String> {
    let parsed = match raw {
        RawArgs::Missing => Parsed { args: Value::Object(Map::new()), ..Parsed::default() },
        RawArgs::Text(text) if text.trim().is_empty() => Parsed { args: Value::Object(Map::new()), ..Parsed::default() },
        RawArgs::Text(text) => match serde_json::from_str(&text) {
            Ok(args) => Parsed { args, ..Parsed::default() },
            Err(e) => {
                let error = format!("The arguments are not valid JSON ({e}). Send the arguments as one JSON object, e.g. {{\"key\": \"value\"}}.");
                match repair::repair_json(&text).filter(|(v, _)| mend && v.is_object()) {
                    Some((args, mended)) => Parsed { args, mended, parser_error: Some(error) },
                    None => return Err(error),
                }
            }
        },
        RawArgs::Parsed(args) => Parsed { args, ..Parsed::default() },
    };
    if !parsed.args.is_object() {
        return Err(format!(
            "The arguments must be a JSON object with the tool's parameters as keys, but they are {}.",
            type_name(&parsed.args)
        ));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_means_no_arguments() {
        assert_eq!(parse(RawArgs::Text("  ".into()), true).unwrap().args, serde_json::json!({}));
        assert_eq!(parse(RawArgs::Missing, true).unwrap().args, serde_json::json!({}));
    }

    #[test]
    fn malformed_json_names_the_position() {
        let err = parse(RawArgs::Text("{\"q\": x}".into()), true).unwrap_err();
        assert!(err.contains("line 1 column 7"), "{err}");
        let mended = parse(RawArgs::Text("{\"q\": \"x\",}".into()), true).unwrap();
        assert_eq!(mended.args, serde_json::json!({"q": "x"}));
        assert!(mended.parser_error.unwrap().contains("line 1 column 11"), "kept in case the mended call still fails");
        assert!(parse(RawArgs::Text("{\"q\": \"x\",}".into()), false).is_err(), "not mended when repair is off");
    }

    #[test]
    fn a_non_object_is_refused() {
        let err = parse(RawArgs::Text("[1,2]".into()), true).unwrap_err();
        assert!(err.contains("they are an array"), "{err}");
        assert!(parse(RawArgs::Parsed(serde_json::json!("x")), true).is_err());
    }
}
