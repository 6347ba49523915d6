//! Station 12: what a handler returned passes three gates before a model reads it. No secrets (redaction of
//! every text the call hands on), no flood (an output over its limit is saved whole to an artifact and the model
//! gets a preview; a failure keeps head and tail; JSON is cut structurally and stays valid), and no confusion
//! between data and instructions (untrusted tools' output is fenced: fence.rs). Limits count characters, and no cut splits
//! one: cuts fall on grapheme cluster boundaries, so an accent or an emoji sequence stays whole.

use std::borrow::Cow;

use serde_json::{Map, Value};
use unicode_segmentation::GraphemeCursor;

use crate::artifacts::{ArtifactOptions, Artifacts, Origin};
use crate::redact::{RedactOptions, Redactor};
use crate::result::{failure_output, Redactions, ToolResult};
use crate::text::{byte_at, char_count};

/// The shaping every call of one executor gets: compiled once, shared with the threads that shape large outputs.
pub struct Shaper {
    redactor: Redactor,
    pub artifacts: Artifacts,
    preview_chars: usize,
    max_error_chars: usize,
}

/// What shaping needs to know about the call whose result it shapes.
pub struct Call<'a> {
    pub tool_name: &'a str,
    pub call_id: &'a str,
    pub max_output_chars: usize,
    /// The artifact reading tools are registered: the model can page through a spilled output itself.
    pub readers: bool,
    /// Who may read back what the call saves (see `artifacts::owner`).
    pub owner: Option<&'a str>,
    /// The tool reads the outside world: what is read back of its artifacts is fenced too.
    pub untrusted: bool,
}

impl Call<'_> {
    fn origin(&self) -> Origin<'_> {
        Origin { owner: self.owner, untrusted: self.untrusted.then_some(self.tool_name) }
    }
}

impl Shaper {
    pub fn new(redact: &RedactOptions, artifacts: ArtifactOptions, preview_chars: usize, max_error_chars: usize) -> Result<Self, String> {
        let redactor = Redactor::new(redact).map_err(|e| format!("redact: {e}"))?;
        Ok(Shaper { artifacts: Artifacts::new(artifacts, redactor.clone()), redactor, preview_chars, max_error_chars })
    }

    /// Shapes a result in place; `binary` is the data of a binary result (saved, never shown). Returns the
    /// station's outcome for the trace.
    pub fn shape(&self, result: &mut ToolResult, call: &Call<'_>, binary: Option<&[u8]>) -> &'static str {
        self.redact(result);
        if let Some(bytes) = binary {
            self.save_binary(result, call, bytes);
            "binary"
        } else if result.success {
            self.limit_output(result, call)
        } else {
            self.limit_error(result)
        }
    }

    /// A text from the host (a check's problem, an approver's reason) as the model may read it.
    pub fn redact_text(&self, text: &str) -> String {
        self.redact_counting(text, &mut Redactions::new())
    }

    /// The same, adding what it found to `counts`.
    pub fn redact_counting(&self, text: &str, counts: &mut Redactions) -> String {
        self.redactor.redact(text, counts).into_owned()
    }

    /// Redacts a JSON value (an argument snapshot for a trace, for instance); returns the counts per rule.
    pub fn redact_value(&self, value: &mut Value) -> Redactions {
        let mut counts = Redactions::new();
        self.redactor.redact_value(value, &mut counts);
        counts
    }

    /// Every text the result hands on. What the model reads is counted; copies kept for the program (stderr,
    /// the structure, the stack) are redacted too and only raise a rule's count when they held more.
    fn redact(&self, result: &mut ToolResult) {
        if self.redactor.is_empty() {
            return;
        }
        let r = &self.redactor;
        let mut counts = Redactions::new();
        let mut copies = Vec::new();
        let meta = &mut result.metadata;
        match (result.error.as_mut(), result.error_kind, meta.structured.as_mut()) {
            // A failure's output is built from its error: redacted once, through the error.
            (Some(error), Some(kind), _) => {
                if redact_in_place(r, error, &mut counts) {
                    result.output = failure_output(kind, error);
                }
            }
            // When the output is the structure's JSON, the structure is redacted (its strings, and the values under
            // keys such as `password`) and the output written again from it.
            (_, _, Some(structured)) if meta.output_is_structured => {
                r.redact_value(structured, &mut counts);
                if !counts.is_empty() {
                    result.output = serde_json::to_string(structured).expect("JSON serializes");
                }
            }
            _ => {
                redact_in_place(r, &mut result.output, &mut counts);
            }
        }
        if let (Some(structured), false) = (meta.structured.as_mut(), meta.output_is_structured) {
            copies.push(self.redact_value(structured));
        }
        for text in [meta.stderr.as_mut(), meta.stack.as_mut(), meta.error_name.as_mut()].into_iter().flatten() {
            let mut found = Redactions::new();
            redact_in_place(r, text, &mut found);
            copies.push(found);
        }
        if let Some(code) = meta.error_code.as_mut() {
            copies.push(self.redact_value(code));
        }
        for (rule, n) in copies.into_iter().flatten() {
            let count = counts.entry(rule).or_default();
            *count = (*count).max(n);
        }
        if !counts.is_empty() {
            meta.redactions = Some(counts);
        }
    }

    /// Over the limit, a successful output is saved whole and the model gets what it needs to read on.
    fn limit_output(&self, result: &mut ToolResult, call: &Call<'_>) -> &'static str {
        let total = char_count(&result.output);
        if total <= call.max_output_chars {
            return "ok";
        }
        result.truncated = true;
        result.metadata.original_chars = Some(total);
        let structured = result.metadata.output_is_structured;
        let stem = format!("{}-{}", call.tool_name, call.call_id);
        let saved = self.artifacts.save(&stem, if structured { "json" } else { "txt" }, result.output.as_bytes(), call.origin());
        let path = match saved {
            Ok(path) => path.to_string_lossy().into_owned(),
            Err(why) => {
                let keep = cut_at(&result.output, call.max_output_chars);
                result.output.truncate(keep);
                result.output.push_str(&format!(
                    "\n… [output truncated: the first {} of {total} characters are shown; the rest could not be saved ({why}): \
                     ask for a narrower result]",
                    call.max_output_chars
                ));
                return "truncated";
            }
        };
        let how = if call.readers {
            "page through it with read_artifact (path, offset, limit) or find text in it with search_artifact (path, pattern)"
        } else {
            "read parts of that file with a file tool, or ask for a narrower result"
        };
        let preview = self.preview_chars.min(call.max_output_chars);
        result.output = match result.metadata.structured.as_ref().filter(|_| structured) {
            Some(value) => {
                let cut = cut_value(value, preview);
                let text = serde_json::to_string(&cut).expect("JSON serializes");
                result.metadata.structured = Some(cut);
                format!(
                    "[Output too long for the context: {total} characters of JSON. The whole output is saved in {path}; {how}. \
                     Below, the same JSON cut to about {preview} characters: long texts and lists end in markers saying what was left out.]\n{text}"
                )
            }
            None => {
                let head = &result.output[..cut_at(&result.output, preview)];
                let rest = total - char_count(head);
                format!(
                    "[Output too long for the context: {total} characters. The whole output is saved in {path}; {how}. \
                     The first {} characters follow.]\n{head}\n… [{rest} more characters in the file]",
                    total - rest
                )
            }
        };
        result.metadata.artifact_path = Some(path);
        "spilled"
    }

    /// A failure the engine wrote itself (a refusal, a timeout, a cancellation), which echoes what the model, the
    /// host or the caller sent (a name, keys, a reason): redacted and held to `maxErrorChars`, as a handler's is.
    pub fn shape_failure(&self, result: &mut ToolResult) {
        let (Some(error), Some(kind)) = (result.error.as_mut(), result.error_kind) else { return };
        let mut counts = Redactions::new();
        if redact_in_place(&self.redactor, error, &mut counts) {
            result.output = failure_output(kind, error);
            add_redactions(result, counts);
        }
        self.limit_error(result);
    }

    fn limit_error(&self, result: &mut ToolResult) -> &'static str {
        let (Some(error), Some(kind)) = (&result.error, result.error_kind) else { return "ok" };
        let total = char_count(error);
        if total <= self.max_error_chars {
            return "ok";
        }
        let cut = head_and_tail(error, total, self.max_error_chars);
        result.output = failure_output(kind, &cut);
        result.error = Some(cut);
        result.truncated = true;
        // A text cut before (to another limit) keeps the length it first had.
        result.metadata.original_chars.get_or_insert(total);
        "truncated"
    }

    /// Bytes that are UTF-8 text are redacted before they are saved; other bytes are saved as they are (a cut into
    /// an image or an archive would break it, and a model never reads them).
    fn save_binary(&self, result: &mut ToolResult, call: &Call<'_>, bytes: &[u8]) {
        let mut counts = Redactions::new();
        let redacted = match std::str::from_utf8(bytes) {
            Ok(text) if !self.redactor.is_empty() => match self.redactor.redact(text, &mut counts) {
                Cow::Owned(clean) => Some(clean.into_bytes()),
                Cow::Borrowed(_) => None,
            },
            _ => None,
        };
        let bytes = redacted.as_deref().unwrap_or(bytes);
        add_redactions(result, counts);
        let Some(info) = result.metadata.binary.as_mut() else { return };
        info.bytes = bytes.len();
        let what = format!("binary data: {} bytes, {}", bytes.len(), info.media_type);
        let stem = format!("{}-{}", call.tool_name, call.call_id);
        result.output = match self.artifacts.save(&stem, info.extension, bytes, call.origin()) {
            Ok(path) => {
                let path = path.to_string_lossy().into_owned();
                let shown = format!("({what}; not shown as text, saved to {path})");
                result.metadata.artifact_path = Some(path);
                shown
            }
            Err(why) => format!("({what}; not shown as text, and not saved: {why})"),
        };
    }
}

/// Counts of a redaction pass added to the result's.
fn add_redactions(result: &mut ToolResult, counts: Redactions) {
    if counts.is_empty() {
        return;
    }
    let known = result.metadata.redactions.get_or_insert_with(Redactions::new);
    for (rule, n) in counts {
        *known.entry(rule).or_default() += n;
    }
}

/// Redacts `text` where it is; true when anything changed.
fn redact_in_place(redactor: &Redactor, text: &mut String, counts: &mut Redactions) -> bool {
    match redactor.redact(text, counts) {
        Cow::Borrowed(_) => false,
        Cow::Owned(clean) => {
            *text = clean;
            true
        }
    }
}


/// The byte offset of a cut that keeps at most `n` characters and does not split a grapheme cluster.
fn cut_at(text: &str, n: usize) -> usize {
    let at = byte_at(text, n);
    let mut cursor = GraphemeCursor::new(at, text.len(), true);
    match cursor.is_boundary(text, 0) {
        Ok(true) | Err(_) => at,
        Ok(false) => cursor.prev_boundary(text, 0).ok().flatten().unwrap_or(0),
    }
}

/// Where a tail of at most `n` characters starts without splitting a grapheme cluster.
fn tail_from(text: &str, total: usize, n: usize) -> usize {
    let at = byte_at(text, total.saturating_sub(n));
    let mut cursor = GraphemeCursor::new(at, text.len(), true);
    match cursor.is_boundary(text, 0) {
        Ok(true) | Err(_) => at,
        Ok(false) => cursor.next_boundary(text, 0).ok().flatten().unwrap_or(text.len()),
    }
}

/// A failure's text keeps its beginning (what failed) and its end (usually the cause), in at most `keep`
/// characters, the note of what was left out between them included. A limit too small for that note keeps the
/// beginning alone.
fn head_and_tail(text: &str, total: usize, keep: usize) -> String {
    let omitted_note = |n: usize| format!("\n… [{n} characters omitted] …\n");
    // What is left out is less than the whole, so its note is no longer than the whole's.
    let note_chars = char_count(&omitted_note(total));
    if keep < note_chars + 2 {
        return format!("{}…", &text[..cut_at(text, keep.saturating_sub(1))]);
    }
    let room = keep - note_chars;
    let head = &text[..cut_at(text, room / 2)];
    let tail = &text[tail_from(text, total, room - room / 2)..];
    format!("{head}{}{tail}", omitted_note(total - char_count(head) - char_count(tail)))
}

/// How much of each part of a structure a cut keeps.
#[derive(Clone, Copy)]
struct Keep {
    chars: usize,
    /// Items of an array.
    items: usize,
    /// Entries of an object: cut last, since an object's keys say what it holds.
    keys: usize,
    depth: usize,
}

/// The structure cut until its JSON text fits in about `budget` characters: long strings end in
/// "… [n more characters]", long arrays in "… n more items", large objects in a `"…": "n more keys"` entry,
/// deep nesting in a summary. The result is valid JSON whatever was cut.
pub fn cut_value(value: &Value, budget: usize) -> Value {
    let mut keep = Keep { chars: budget, items: budget.div_ceil(2), keys: budget.div_ceil(4), depth: 32 };
    loop {
        let cut = keep_within(value, keep, 0);
        let size = char_count(&serde_json::to_string(&cut).expect("JSON serializes"));
        if size <= budget {
            return cut;
        }
        // Shrink in proportion to the excess, and always by something: texts and lists first, then objects'
        // entries, then depth.
        let scale = |n: usize, floor: usize| (n * budget / size).min(n * 3 / 4).max(floor);
        let next = if keep.chars > 16 || keep.items > 1 {
            Keep { chars: scale(keep.chars, 16), items: scale(keep.items, 1), ..keep }
        } else if keep.keys > 1 {
            Keep { keys: scale(keep.keys, 1), ..keep }
        } else {
            Keep { depth: keep.depth / 2, ..keep }
        };
        if keep.depth == 0 {
            return Value::String(format!("… {} characters of JSON, too large to preview", char_count(&value.to_string())));
        }
        keep = next;
    }
}

fn keep_within(value: &Value, keep: Keep, depth: usize) -> Value {
    match value {
        Value::String(s) => {
            let total = char_count(s);
            if total <= keep.chars {
                return value.clone();
            }
            let head = &s[..cut_at(s, keep.chars)];
            Value::String(format!("{head}… [{} more characters]", total - char_count(head)))
        }
        Value::Array(items) if depth >= keep.depth && !items.is_empty() => Value::String(format!("… a list of {} items", items.len())),
        Value::Object(map) if depth >= keep.depth && !map.is_empty() => Value::String(format!("… an object with {} keys", map.len())),
        Value::Array(items) => {
            let mut out: Vec<Value> = items.iter().take(keep.items).map(|v| keep_within(v, keep, depth + 1)).collect();
            if items.len() > keep.items {
                out.push(Value::String(format!("… {} more items", items.len() - keep.items)));
            }
            Value::Array(out)
        }
        Value::Object(map) => {
            let mut out: Map<String, Value> = map.iter().take(keep.keys).map(|(k, v)| (k.clone(), keep_within(v, keep, depth + 1))).collect();
            if map.len() > keep.keys {
                out.insert("…".into(), Value::String(format!("{} more keys", map.len() - keep.keys)));
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::ErrorKind;

    fn shaper(max_error_chars: usize) -> Shaper {
        let dir = std::env::temp_dir().join(format!("toolgate-shape-{:08x}", fastrand::u32(..)));
        let artifacts = ArtifactOptions { dir: Some(dir.to_string_lossy().into()), ..ArtifactOptions::default() };
        Shaper::new(&RedactOptions::default(), artifacts, 20, max_error_chars).unwrap()
    }

    fn call(max_output_chars: usize) -> Call<'static> {
        Call { tool_name: "t", call_id: "c1", max_output_chars, readers: false, owner: None, untrusted: false }
    }

    #[test]
    fn a_long_output_is_saved_whole_and_previewed() {
        let s = shaper(100);
        let text = format!("{}{}", "é".repeat(30), "x".repeat(50));
        let mut r = ToolResult::success("c1".into(), "t".into(), text.clone());
        assert_eq!(s.shape(&mut r, &call(40), None), "spilled");
        assert!(r.truncated);
        assert_eq!(r.metadata.original_chars, Some(80));
        let path = r.metadata.artifact_path.clone().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        assert!(r.output.contains(&format!("saved in {path}")), "{}", r.output);
        assert!(r.output.contains(&format!("{}\n… [60 more characters in the file]", "é".repeat(20))), "{}", r.output);
        s.artifacts.remove_all();
    }

    #[test]
    fn no_cut_splits_a_grapheme_cluster() {
        // "e" + a combining acute accent, and a family emoji joined by zero-width joiners.
        let family = "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}";
        let text = format!("abe\u{301}{family}z");
        assert_eq!(&text[..cut_at(&text, 3)], "ab", "the accent stays with its letter");
        assert_eq!(&text[..cut_at(&text, 6)], "abe\u{301}");
        assert_eq!(&text[..cut_at(&text, 9)], format!("abe\u{301}{family}"));
        assert_eq!(&text[tail_from(&text, text.chars().count(), 3)..], "z");
    }

    #[test]
    fn a_failure_keeps_head_and_tail() {
        let s = shaper(60);
        let text = format!("START{}END", "x".repeat(100));
        let mut r = ToolResult::failure("c".into(), "t".into(), ErrorKind::HandlerError, text.clone(), false);
        assert_eq!(s.shape(&mut r, &call(1000), None), "truncated");
        assert_eq!(r.error.clone().unwrap(), "STARTxxxxxxxxxx\n… [78 characters omitted] …\nxxxxxxxxxxxxEND");
        assert!(r.output.starts_with("Error (handler_error): START") && r.output.ends_with("END"));
        assert!(r.truncated);
        // The limit holds exactly, the note included, whatever the limit and the length.
        for limit in 1..=120 {
            for length in [limit + 1, 999, 12_345] {
                let mut r = ToolResult::failure("c".into(), "t".into(), ErrorKind::HandlerError, "é".repeat(length), false);
                shaper(limit).shape(&mut r, &call(1000), None);
                assert!(char_count(r.error.as_deref().unwrap()) <= limit, "limit {limit}, length {length}: {:?}", r.error);
            }
        }
    }

    #[test]
    fn structures_are_cut_into_valid_json_with_markers() {
        let value = serde_json::json!({
            "query": "q",
            "results": (0..1000).map(|i| serde_json::json!({"id": i, "text": "long ".repeat(100)})).collect::<Vec<_>>(),
        });
        let cut = cut_value(&value, 2000);
        let text = serde_json::to_string(&cut).unwrap();
        assert!(text.chars().count() <= 2000, "{}", text.len());
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back["query"], "q");
        let results = back["results"].as_array().unwrap();
        assert!(results.last().unwrap().as_str().unwrap().ends_with("more items"), "{text}");
        assert!(results[0]["text"].as_str().unwrap().contains("more characters]"), "{text}");
    }

    #[test]
    fn a_cut_structure_has_an_answer_even_when_nothing_fits() {
        let deep = (0..200).fold(serde_json::json!(1), |v, _| serde_json::json!({ "k": v }));
        let text = serde_json::to_string(&cut_value(&deep, 40)).unwrap();
        assert!(text.chars().count() <= 40 || text.starts_with('"'), "{text}");
        serde_json::from_str::<Value>(&text).unwrap();
    }

    #[test]
    fn short_text_is_untouched() {
        let s = shaper(5);
        let mut r = ToolResult::success("c".into(), "t".into(), "short".into());
        assert_eq!(s.shape(&mut r, &call(5), None), "ok");
        assert_eq!(r.output, "short");
        assert!(!r.truncated);
    }
}
