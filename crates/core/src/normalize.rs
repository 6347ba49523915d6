//! Station 11: whatever a handler returned or threw, folded into the contract.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::json;
use crate::result::{transient, Binary, CommandEnd, CommandOutput, CommandReport, ErrorKind, Image, ToolResult, NO_OUTPUT};
use crate::text;

/// How much of stderr the model sees next to stdout; all of it stays in metadata.
const STDERR_SUMMARY_CHARS: usize = 500;

include!("generated/normalize.rs");

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
    /// It returned bytes (a Buffer, a typed array): kept out of the model's context.
    Binary(Vec<u8>),
    /// Its return value broke the tool's output schema, as the JS layer found: `[JSON pointer, message]` pairs.
    Mismatch(Vec<(String, String)>),
    /// A command tool's process ended; the host says only that (`command`), the engine holds what it wrote.
    CommandEnded,
    /// A command tool's process ended, with what it wrote and how it ended.
    Command(Box<CommandOutput>),
}

impl Outcome {
    pub fn from_parts(kind: &str, payload: String) -> Result<Self, String> {
        Ok(match kind.parse::<SettlementKind>() {
            Ok(SettlementKind::Text) => Outcome::Text(payload),
            Ok(SettlementKind::Json) => Outcome::Json(payload),
            Ok(SettlementKind::None) => Outcome::Nothing,
            Ok(SettlementKind::Thrown) => Outcome::Thrown(payload),
            Ok(SettlementKind::Unrepresentable) => Outcome::Unrepresentable(payload),
            Ok(SettlementKind::Command) => Outcome::CommandEnded,
            // Read as leniently as everything else from JS: a library's message may quote half a surrogate pair.
            Ok(SettlementKind::Mismatch) => Outcome::Mismatch(json::from_str_mended(&payload).map(|(issues, _)| issues).map_err(|e| format!("a mismatch's issues: {e}"))?),
            Ok(SettlementKind::Binary) => return Err("a binary outcome crosses as bytes, not text".into()),
            Err(()) => return Err(format!("unknown outcome kind \"{kind}\"")),
        })
    }

    /// Settlements packed as the host sends them: for each, a `SettlementHead` in `heads`; in `text`, each kind
    /// followed by its payload, in order.
    pub fn unpack(heads: &[u32], text: &str) -> Result<Vec<(u32, Outcome)>, String> {
        if !heads.len().is_multiple_of(SettlementHead::LEN) {
            return Err(format!("settlements: {} heads, not {} per settlement", heads.len(), SettlementHead::LEN_WORD));
        }
        let mut rest = text;
        let outcomes = heads
            .chunks_exact(SettlementHead::LEN)
            .map(|head| {
                let head = SettlementHead::read(head);
                let kind = take_utf16(&mut rest, head.kind_length)?;
                let payload = take_utf16(&mut rest, head.payload_length)?;
                Ok((head.run, Self::from_parts(kind, payload.to_owned())?))
            })
            .collect::<Result<Vec<_>, String>>()?;
        if !rest.is_empty() {
            return Err(format!("settlements: {} bytes of text past the last settlement", rest.len()));
        }
        Ok(outcomes)
    }

    /// An outcome that crossed as bytes: binary data, or text and JSON as UTF-8 (the cheap way for large values).
    pub fn from_bytes(kind: &str, bytes: Vec<u8>) -> Result<Self, String> {
        if kind.parse() == Ok(SettlementKind::Binary) {
            return Ok(Outcome::Binary(bytes));
        }
        let text = String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        Self::from_parts(kind, text)
    }

    /// `from_bytes` on bytes that crossed in slices, joined (a single slice is taken as it is).
    pub fn from_slices(kind: &str, slices: Vec<Vec<u8>>) -> Result<Self, String> {
        let bytes = if slices.len() == 1 {
            slices.into_iter().next().unwrap_or_default()
        } else {
            // The slices go before the joined bytes are read: megabytes are held twice only while joining.
            let joined = slices.concat();
            drop(slices);
            joined
        };
        Self::from_bytes(kind, bytes)
    }

    /// Bytes the result will not show, to be saved by the shape station.
    pub fn binary(&self) -> Option<&[u8]> {
        match self {
            Outcome::Binary(bytes) => Some(bytes),
            _ => None,
        }
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
        Outcome::Binary(bytes) => binary(call_id, name, &bytes),
        Outcome::Json(json) => match json::from_str_mended::<Value>(&json) {
            Ok((Value::Object(obj), _)) if is_stdio(&obj) => from_stdio(call_id, name, obj),
            Ok((value, replaced)) => match media_parts(&value) {
                Some((text, images)) => {
                    let mut result = ToolResult::success(call_id, name, text);
                    result.metadata.images = images;
                    result
                }
                None => {
                    // The output is the structure's JSON: with half a surrogate pair read as U+FFFD, written again.
                    let output = if replaced > 0 { value.to_string() } else { json };
                    let mut result = ToolResult::success(call_id, name, output);
                    result.metadata.structured = Some(value);
                    result.metadata.output_is_structured = true;
                    result
                }
            },
            // Valid JSON nested too deeply to hold as a structure: the model reads its text all the same.
            Err(e) if json::too_deep(&e) => ToolResult::success(call_id, name, json),
            Err(e) => handler_failure(call_id, name.clone(), format!("Tool \"{name}\" returned a value that is not valid JSON ({e})."), false),
        },
        // The shape station redacts the error whole, then cuts it: nothing here is cut first.
        Outcome::Mismatch(issues) => {
            let problems = text::Problems::of(issues.iter(), |(path, message)| text::problem(path, text::VALUE, message));
            handler_failure(call_id, name.clone(), text::output_mismatch(&name, problems), false)
        }
        Outcome::Unrepresentable(why) => handler_failure(
            call_id,
            name.clone(),
            format!("Tool \"{name}\" returned a value that cannot be passed on as text or JSON: {why}."),
            false,
        ),
        Outcome::Command(output) => from_command(call_id, name, *output),
        Outcome::CommandEnded => handler_failure(call_id, name.clone(), format!("Tool \"{name}\" ended without a report of its command."), false),
        Outcome::Thrown(json) => {
            let thrown: Thrown = json::from_str_mended(&json).map_or_else(|_| Thrown { non_error: Some(json), ..Thrown::default() }, |(t, _)| t);
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
            let retryable = transient(thrown.retryable, &codes, status);
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

/// What the model reads first of a stream cut short: how much it wrote, how much of that the result left out, and
/// where that is kept, if anywhere (the result itself may be cut again, so this comes before the streams).
fn cut_notes(report: &CommandReport) -> String {
    let streams = [
        ("stdout", report.stdout_bytes, report.stdout_omitted_bytes, report.stdout_dropped_bytes, &report.stdout_artifact),
        ("stderr", report.stderr_bytes, report.stderr_omitted_bytes, report.stderr_dropped_bytes, &report.stderr_artifact),
    ];
    let mut notes = String::new();
    for (label, total, omitted, dropped, artifact) in streams.into_iter().filter(|s| s.2 > 0) {
        let rest = match (artifact, dropped) {
            (Some(path), 0) => format!("; the artifact {path} keeps all of it"),
            (Some(path), _) => format!("; the artifact {path} keeps {} of them; {dropped} bytes of its middle were kept nowhere", total - dropped),
            (None, 0) => String::new(),
            (None, _) => format!("; {dropped} bytes of its middle were kept nowhere"),
        };
        notes.push_str(&format!("[{label}: {total} bytes written, {omitted} of them left out of this result{rest}.]\n"));
    }
    notes
}

/// A command's end as the model reads it: `{stdout, stderr, exitCode}` when it exited, else what stopped it, that
/// nothing of it runs on, and what it wrote before.
fn from_command(call_id: String, name: String, output: CommandOutput) -> ToolResult {
    let CommandOutput { stdout, stderr, report, fail_on_exit_code, timeout_retryable } = output;
    let stopped = match (report.stopped_with, report.still_running) {
        (_, true) => " Something it started is still running: it left the command's session, kept moving to new process groups faster than they could be stopped, or ignored SIGKILL.".to_string(),
        (Some(signal), false) => format!(" It was stopped with {signal}; no process of it is still running."),
        (None, false) => String::new(),
    };
    let cut = cut_notes(&report);
    let so_far = |what: &str| {
        let mut text = if cut.is_empty() { String::new() } else { format!("\n{}", cut.trim_end()) };
        for (label, stream) in [("stdout", &stdout), ("stderr", &stderr)] {
            if !stream.trim().is_empty() {
                text.push_str(&format!("\n[{label} {what}]\n{}", stream.trim_end_matches(['\n', '\r'])));
            }
        }
        text
    };
    let limit = report.limit_ms.unwrap_or(0);
    let mut result = match report.ended_by {
        CommandEnd::Exit | CommandEnd::Cancelled => {
            let exit_code = report.exit_code.map(Value::from).or_else(|| report.signal.clone().map(Value::from));
            let mut value = Map::new();
            value.insert("stdout".into(), Value::String(stdout.clone()));
            value.insert("stderr".into(), Value::String(stderr.clone()));
            value.insert("exitCode".into(), exit_code.unwrap_or(Value::Null));
            let failed = fail_on_exit_code && report.exit_code != Some(0);
            if failed {
                let how = match (&report.exit_code, &report.signal) {
                    (Some(code), _) => format!("exited with code {code}"),
                    (None, Some(signal)) => format!("was ended by {signal}"),
                    (None, None) => "ended without an exit code".into(),
                };
                let mut result = handler_failure(call_id, name.clone(), format!("Tool \"{name}\" failed: its command {how}.{stopped}{}", so_far("output")), false);
                result.metadata.exit_code = value.get("exitCode").cloned();
                result.metadata.structured = Some(Value::Object(value));
                result
            } else {
                let mut result = from_stdio(call_id, name, value);
                if !cut.is_empty() {
                    result.output.insert_str(0, &cut);
                }
                if report.leftovers_stopped || report.still_running {
                    result.output.push_str(&format!("\n[it exited leaving processes behind.{stopped}]"));
                }
                result
            }
        }
        CommandEnd::Timeout => {
            let error = format!("Tool \"{name}\" did not finish within its time limit of {limit} ms.{stopped}{}", so_far("before it was stopped"));
            ToolResult::failure(call_id, name, ErrorKind::Timeout, error, timeout_retryable)
        }
        CommandEnd::IdleTimeout => {
            let error = format!("Tool \"{name}\" wrote no output for {limit} ms (its idle limit).{stopped}{}", so_far("before it was stopped"));
            ToolResult::failure(call_id, name, ErrorKind::IdleTimeout, error, timeout_retryable)
        }
        CommandEnd::Background => {
            let id = report.job_id.unwrap_or(0);
            let mut text = format!(
                "The command is still running after {limit} ms, so it was moved to the background as job {id}. \
                 Read what it writes with job_output {{\"jobId\": {id}}}, see whether it ended with job_status, stop it with job_kill."
            );
            text.push_str(&so_far("so far"));
            let mut result = ToolResult::success(call_id, name, text);
            result.metadata.structured = Some(serde_json::json!({ "status": "running", "jobId": id, "stdout": stdout, "stderr": stderr }));
            result
        }
        CommandEnd::SpawnFailed => {
            let why = report.spawn_error.clone().unwrap_or_default();
            handler_failure(call_id, name.clone(), format!("Tool \"{name}\" failed: {why}."), false)
        }
    };
    result.metadata.command = Some(Box::new(report));
    result
}

/// Bytes are described, never shown: their size and sniffed type (the shape station saves them).
pub fn binary(call_id: String, name: String, bytes: &[u8]) -> ToolResult {
    let (media_type, extension) = sniff(bytes);
    let mut result = ToolResult::success(call_id, name, format!("(binary data: {} bytes, {media_type})", bytes.len()));
    result.metadata.binary = Some(Binary { bytes: bytes.len(), media_type, extension });
    result
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

/// An image (`{type: 'image', data, mediaType}`, `mimeType` as MCP spells it) or a list of text and image parts
/// with at least one image: the text for the model, with a line in place of each image, and the images.
fn media_parts(value: &Value) -> Option<(String, Vec<Image>)> {
    let parts = match value {
        Value::Array(parts) => parts.as_slice(),
        Value::Object(_) => std::slice::from_ref(value),
        _ => return None,
    };
    let mut text = Vec::new();
    let mut images = Vec::new();
    for part in parts {
        match part.get("type").and_then(Value::as_str) {
            Some("text") => text.push(part.get("text")?.as_str()?.to_string()),
            Some("image") => {
                let data = part.get("data")?.as_str()?;
                let media_type = ["mediaType", "mimeType", "media_type"].iter().find_map(|k| part.get(*k)).and_then(Value::as_str)?;
                let base64 = data.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'\n' | b'\r'));
                if !media_type.starts_with("image/") || !base64 {
                    return None;
                }
                images.push(Image { media_type: media_type.to_string(), data: data.to_string() });
                let bytes = (data.len() / 4 * 3).saturating_sub(data.bytes().rev().take(2).filter(|b| *b == b'=').count());
                text.push(format!("[image {}: {media_type}, {bytes} bytes]", images.len()));
            }
            _ => return None,
        }
    }
    (!images.is_empty()).then(|| (text.join("\n"), images))
}

/// The media type and a file extension for bytes, from their first bytes.
fn sniff(bytes: &[u8]) -> (&'static str, &'static str) {
    const SIGNATURES: &[(&[u8], &str, &str)] = &[
        (b"\x89PNG\r\n\x1a\n", "image/png", "png"),
        (b"\xff\xd8\xff", "image/jpeg", "jpg"),
        (b"GIF87a", "image/gif", "gif"),
        (b"GIF89a", "image/gif", "gif"),
        (b"%PDF-", "application/pdf", "pdf"),
        (b"PK\x03\x04", "application/zip", "zip"),
        (b"\x1f\x8b", "application/gzip", "gz"),
        (b"\x7fELF", "application/x-elf", "bin"),
        (b"\0asm", "application/wasm", "wasm"),
        (b"ID3", "audio/mpeg", "mp3"),
        (b"OggS", "audio/ogg", "ogg"),
    ];
    if let Some((_, media, ext)) = SIGNATURES.iter().find(|(magic, _, _)| bytes.starts_with(magic)) {
        return (media, ext);
    }
    if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        return ("image/webp", "webp");
    }
    if bytes.len() >= 12 && &bytes[4..8] == b"ftyp" {
        return ("video/mp4", "mp4");
    }
    if !bytes.contains(&0) && std::str::from_utf8(bytes).is_ok() {
        return ("text/plain", "txt");
    }
    ("application/octet-stream", "bin")
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

/// The first `units` UTF-16 code units of `rest`, taken off it.
fn take_utf16<'a>(rest: &mut &'a str, units: u32) -> Result<&'a str, String> {
    let units = units as usize;
    let bytes = rest.as_bytes();
    // Most text is ASCII, a unit per byte; a byte after an ASCII one always starts a character.
    let end = if bytes.len() >= units && bytes[..units].is_ascii() {
        units
    } else {
        let (mut counted, mut end) = (0, 0);
        for c in rest.chars() {
            if counted >= units {
                break;
            }
            counted += c.len_utf16();
            end += c.len_utf8();
        }
        if counted != units {
            return Err(format!("settlements: a piece of {units} UTF-16 units does not fit the text left"));
        }
        end
    };
    let (head, tail) = rest.split_at(end);
    *rest = tail;
    Ok(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(outcome: Outcome) -> ToolResult {
        normalize("c1".into(), "t".into(), outcome)
    }

    #[test]
    fn packed_settlements_split_on_utf16_lengths() {
        // "é" is one UTF-16 unit and two UTF-8 bytes; "🦀" two units and four bytes.
        let text = "text🦀 éjson{\"a\":1}none";
        let heads = [7, 4, 4, 9, 4, 7, 3, 4, 0];
        let outcomes = Outcome::unpack(&heads, text).unwrap();
        let runs: Vec<u32> = outcomes.iter().map(|(run, _)| *run).collect();
        assert_eq!(runs, [7, 9, 3]);
        assert!(matches!(&outcomes[0].1, Outcome::Text(t) if t == "🦀 é"));
        assert!(matches!(&outcomes[1].1, Outcome::Json(t) if t == "{\"a\":1}"));
        assert!(matches!(outcomes[2].1, Outcome::Nothing));
    }

    #[test]
    fn packed_settlements_that_do_not_add_up_are_refused_whole() {
        assert!(Outcome::unpack(&[1, 4], "text").unwrap_err().contains("not three per settlement"));
        assert!(Outcome::unpack(&[1, 4, 9], "textshort").unwrap_err().contains("does not fit"));
        assert!(Outcome::unpack(&[1, 4, 1], "textab").unwrap_err().contains("past the last settlement"));
        // A length that would end inside a surrogate pair's character.
        assert!(Outcome::unpack(&[1, 4, 1], "text🦀").unwrap_err().contains("does not fit"));
        assert!(Outcome::unpack(&[1, 4, 0, 2, 5, 0], "textoddly").unwrap_err().contains("unknown outcome kind"));
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
    fn a_structure_with_half_a_surrogate_pair_or_deep_nesting_is_still_a_success() {
        let r = run(Outcome::Json(r#"{"text":"Zo\ud83d"}"#.into()));
        assert!(r.success, "{:?}", r.error);
        assert_eq!(r.output, "{\"text\":\"Zo\u{fffd}\"}");
        assert_eq!(r.metadata.structured, Some(serde_json::json!({"text": "Zo\u{fffd}"})));
        let deep = format!("{}1{}", "[".repeat(300), "]".repeat(300));
        let r = run(Outcome::Json(deep.clone()));
        assert!(r.success && r.metadata.structured.is_none());
        assert_eq!(r.output, deep, "too deep to hold as a structure: the text is the output");
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
    fn bytes_are_described_never_shown() {
        let png = Outcome::from_bytes("binary", b"\x89PNG\r\n\x1a\n rest".to_vec()).unwrap();
        assert_eq!(png.binary().map(<[u8]>::len), Some(13));
        let r = run(png);
        assert_eq!(r.output, "(binary data: 13 bytes, image/png)");
        assert_eq!(r.metadata.binary.as_ref().map(|b| (b.media_type, b.extension)), Some(("image/png", "png")));
        assert_eq!(run(Outcome::Binary(vec![0, 1, 2])).metadata.binary.unwrap().media_type, "application/octet-stream");
        assert_eq!(run(Outcome::from_bytes("text", "é".as_bytes().to_vec()).unwrap()).output, "é");
    }

    #[test]
    fn images_pass_as_images_with_a_line_for_the_text() {
        let r = run(Outcome::Json(r#"{"type":"image","data":"iVBORw0KGgo=","mediaType":"image/png"}"#.into()));
        assert_eq!(r.output, "[image 1: image/png, 8 bytes]", "the padding is no data");
        assert_eq!(r.metadata.images[0].data, "iVBORw0KGgo=");
        assert!(r.metadata.structured.is_none());
        let r = run(Outcome::Json(r#"[{"type":"text","text":"a chart"},{"type":"image","data":"AAAA","mimeType":"image/gif"}]"#.into()));
        assert_eq!(r.output, "a chart\n[image 1: image/gif, 3 bytes]");
        let not_media = run(Outcome::Json(r#"{"type":"image","data":"not base64!","mediaType":"image/png"}"#.into()));
        assert!(not_media.metadata.images.is_empty() && not_media.metadata.structured.is_some());
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
