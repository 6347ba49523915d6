//! Station 2: the arguments as sent → one JSON object.

use serde_json::{Map, Value};

use crate::calls::{too_deep, type_name, RawArgs};
use crate::json;
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

/// The longest argument text that is not valid JSON which repair reads. Repair is linear but runs on the host's
/// thread, where 10 MB of it would stall everything else; arguments that large are not a slip to mend.
pub const MAX_REPAIR_BYTES: usize = 1 << 20;

/// `lone_surrogates`: halves of surrogate pairs already read as U+FFFD where the call was read. `mend`: try to repair
/// argument text that is not valid JSON (the repair station's JSON rules).
pub fn parse(raw: RawArgs, lone_surrogates: usize, mend: bool) -> Result<Parsed, String> {
    let mut replaced = lone_surrogates;
    let mut parsed = match raw {
        RawArgs::Missing => Parsed { args: Value::Object(Map::new()), ..Parsed::default() },
        RawArgs::Unreadable(why) => return Err(why),
        RawArgs::Text(text) if text.trim().is_empty() => Parsed { args: Value::Object(Map::new()), ..Parsed::default() },
        RawArgs::Text(mut text) => {
            let strict = match serde_json::from_str(&text) {
                Err(e) if json::too_deep(&e) => return Err(too_deep()),
                // Half a surrogate pair is read as U+FFFD first; what is still wrong is the JSON's own.
                Err(e) => match json::mend_lone_surrogates(&text) {
                    Some((mended, n)) => {
                        replaced += n;
                        text = mended;
                        serde_json::from_str(&text).map_err(|_| e)
                    }
                    None => Err(e),
                },
                read => read,
            };
            match strict {
                // A JSON string holding the object: decoded, or the error about a string stands.
                Ok(Value::String(content)) => match mend.then(|| repair::decode_string(&content)).flatten() {
                    Some((args, decoded, halves)) => {
                        replaced += halves;
                        Parsed { args, mended: vec![decoded], parser_error: Some(not_an_object("a string")) }
                    }
                    None => Parsed { args: Value::String(content), ..Parsed::default() },
                },
                Ok(args) => Parsed { args, ..Parsed::default() },
                Err(e) => {
                    let mut error = format!("The arguments are not valid JSON ({e}). Send the arguments as one JSON object, e.g. {{\"key\": \"value\"}}.");
                    let too_large = text.len() > MAX_REPAIR_BYTES;
                    if mend && too_large {
                        error.push_str(&format!(" At {} bytes they are too large to be repaired (at most {MAX_REPAIR_BYTES}): send them as valid JSON.", text.len()));
                    }
                    match (mend && !too_large).then(|| repair::mend_arguments(&text)).flatten() {
                        Some((args, mended)) => Parsed { args, mended, parser_error: Some(error) },
                        None => return Err(error),
                    }
                }
            }
        }
        RawArgs::Parsed(args) => Parsed { args, ..Parsed::default() },
    };
    if replaced > 0 {
        parsed.mended.insert(0, Repair::lone_surrogates(replaced));
    }
    if !parsed.args.is_object() {
        return Err(not_an_object(type_name(&parsed.args)));
    }
    Ok(parsed)
}

fn not_an_object(what: &str) -> String {
    format!("The arguments must be a JSON object with the tool's parameters as keys, but they are {what}.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_means_no_arguments() {
        assert_eq!(parse(RawArgs::Text("  ".into()), 0, true).unwrap().args, serde_json::json!({}));
        assert_eq!(parse(RawArgs::Missing, 0, true).unwrap().args, serde_json::json!({}));
    }

    #[test]
    fn malformed_json_names_the_position() {
        let err = parse(RawArgs::Text("{\"q\": x}".into()), 0, true).unwrap_err();
        assert!(err.contains("line 1 column 7"), "{err}");
        let mended = parse(RawArgs::Text("{\"q\": \"x\",}".into()), 0, true).unwrap();
        assert_eq!(mended.args, serde_json::json!({"q": "x"}));
        assert!(mended.parser_error.unwrap().contains("line 1 column 11"), "kept in case the mended call still fails");
        assert!(parse(RawArgs::Text("{\"q\": \"x\",}".into()), 0, false).is_err(), "not mended when repair is off");
    }

    #[test]
    fn text_too_large_to_repair_is_refused_saying_so() {
        let large = format!("{{\"q\": \"{}\",}}", "x".repeat(MAX_REPAIR_BYTES));
        let err = parse(RawArgs::Text(large), 0, true).unwrap_err();
        assert!(err.contains(&format!("At {} bytes they are too large to be repaired (at most 1048576)", MAX_REPAIR_BYTES + 10)), "{err}");
        let small = format!("{{\"q\": \"{}\",}}", "x".repeat(MAX_REPAIR_BYTES - 100));
        assert!(parse(RawArgs::Text(small), 0, true).is_ok(), "within the bound, mended");
    }

    #[test]
    fn a_non_object_is_refused() {
        let err = parse(RawArgs::Text("[1,2]".into()), 0, true).unwrap_err();
        assert!(err.contains("they are an array"), "{err}");
        assert!(parse(RawArgs::Parsed(serde_json::json!("x")), 0, true).is_err());
    }
}
