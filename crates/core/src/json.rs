//! JSON from the host, read without losing what was sent. JS strings may hold half of a UTF-16 surrogate pair (half
//! an emoji cut by a model or a handler); `JSON.stringify` writes it as a `\uD83D` escape, which serde_json refuses.
//! Such an escape is read as U+FFFD, as `String.prototype.toWellFormed` would, and the caller learns how many there
//! were. Nesting deeper than serde_json's limit (128 levels) stays an error, which callers name as such.

use serde::de::DeserializeOwned;

/// How deep serde_json reads nested arrays and objects.
pub const MAX_DEPTH: usize = 128;

/// `text` parsed, with each lone surrogate escape read as U+FFFD; the value and how many escapes were replaced.
pub fn from_str_mended<T: DeserializeOwned>(text: &str) -> Result<(T, usize), serde_json::Error> {
    match serde_json::from_str(text) {
        Ok(value) => Ok((value, 0)),
        Err(error) => match mend_lone_surrogates(text) {
            Some((mended, replaced)) => serde_json::from_str(&mended).map(|value| (value, replaced)),
            None => Err(error),
        },
    }
}

/// Whether parsing failed only because the value nests deeper than `MAX_DEPTH`.
pub fn too_deep(error: &serde_json::Error) -> bool {
    error.to_string().starts_with("recursion limit exceeded")
}

/// The JSON text with every `\u` escape of an unpaired surrogate written as `\ufffd`; None when there is none.
/// Backslashes occur only inside strings in JSON, so escapes are found without tracking quotes: `\\` is skipped
/// whole, so `\\ud83d` (a backslash, then text) is left alone.
pub fn mend_lone_surrogates(text: &str) -> Option<(String, usize)> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut replaced = 0;
    let (mut done, mut i) = (0, 0);
    while let Some(offset) = bytes[i..].iter().position(|&b| b == b'\\') {
        let at = i + offset;
        let Some(unit) = escape_at(bytes, at) else {
            i = (at + 2).min(bytes.len());
            continue;
        };
        let high = (0xD800..0xDC00).contains(&unit);
        let low = (0xDC00..0xE000).contains(&unit);
        if high && escape_at(bytes, at + 6).is_some_and(|next| (0xDC00..0xE000).contains(&next)) {
            i = at + 12; // a whole pair
            continue;
        }
        if high || low {
            let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
            out.push_str(&text[done..at]);
            out.push_str("\\ufffd");
            replaced += 1;
            done = at + 6;
        }
        i = at + 6;
    }
    let mut out = out?;
    out.push_str(&text[done..]);
    Some((out, replaced))
}

/// The UTF-16 unit of a `\uXXXX` escape starting at `at`; None for any other escape (or none).
fn escape_at(bytes: &[u8], at: usize) -> Option<u32> {
    let escape = bytes.get(at..at + 6)?;
    if escape[0] != b'\\' || escape[1] != b'u' {
        return None;
    }
    let hex = std::str::from_utf8(&escape[2..]).ok()?;
    u32::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn a_lone_surrogate_reads_as_the_replacement_character_and_is_counted() {
        let (value, n): (Value, usize) = from_str_mended(r#"{"q":"Zo\ud83d","r":"\ude00!","ok":"\ud83d\ude00"}"#).unwrap();
        assert_eq!(value, serde_json::json!({"q": "Zo\u{fffd}", "r": "\u{fffd}!", "ok": "😀"}));
        assert_eq!(n, 2);
        let (pair, n): (Value, usize) = from_str_mended(r#""\uD83D\uDE00""#).unwrap();
        assert_eq!((pair, n), (Value::String("😀".into()), 0));
    }

    #[test]
    fn escaped_backslashes_and_other_escapes_are_left_alone() {
        assert_eq!(mend_lone_surrogates(r#""\\ud83d \n \u0041 \"""#), None);
        assert_eq!(mend_lone_surrogates(r#""\\\ud83d""#), Some((r#""\\\ufffd""#.to_string(), 1)));
        assert_eq!(mend_lone_surrogates(r#""\ud83d\u0041""#).unwrap().0, r#""\ufffd\u0041""#, "a high one followed by a non-low escape");
        assert_eq!(mend_lone_surrogates(r#""\u12"#), None, "a cut escape is the parser's to refuse");
    }

    #[test]
    fn nesting_past_the_limit_is_told_apart_from_bad_text() {
        let deep = format!("{}1{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        let error = from_str_mended::<Value>(&deep).unwrap_err();
        assert!(too_deep(&error), "{error}");
        assert!(!too_deep(&from_str_mended::<Value>("[1,").unwrap_err()));
        let fits = format!("{}1{}", "[".repeat(MAX_DEPTH - 1), "]".repeat(MAX_DEPTH - 1));
        assert!(from_str_mended::<Value>(&fits).is_ok());
    }
}
