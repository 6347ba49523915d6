//! Station 3: a call that is almost right, made right from the schema, deterministically and visibly. Nothing is
//! guessed: JSON text is mended only where its intent is plain (fences, trailing commas, quotes, Python literals, a
//! cut-off end); a key goes to a property only when exactly one property is that close; a value changes type only
//! where it fails its declared type; and the repaired call must pass validation, or the original error stands.

use serde::Deserialize;
use serde_json::{Map, Number, Value};

use crate::result::Repair;
use crate::text::{edit_distance_within, fold};


/// Which repairs an executor makes; `repair: false` turns them all off.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RepairOptions {
    /// Malformed argument JSON.
    pub json: bool,
    /// Aliases and near-miss keys.
    pub keys: bool,
    /// Values of the wrong type, coerced to the declared one.
    pub types: bool,
    /// Arguments put one level down, under a key the schema does not have or in an echo of the whole call.
    pub wrappers: bool,
    /// An unknown tool name that matches exactly one usable tool ignoring case and separators.
    pub tool_names: bool,
    /// The model's result says in one line what was adjusted, so that it can learn within the session.
    pub note: bool,
}

impl Default for RepairOptions {
    fn default() -> Self {
        RepairOptions { json: true, keys: true, types: true, wrappers: true, tool_names: false, note: true }
    }
}

impl RepairOptions {
    pub fn off() -> Self {
        RepairOptions { json: false, keys: false, types: false, wrappers: false, tool_names: false, note: false }
    }
}

/// The line a result carries when its call was repaired.
pub fn note(repairs: &[Repair]) -> String {
    let shown: Vec<String> = repairs.iter().take(6).map(describe).collect();
    let more = if repairs.len() > 6 { format!("; and {} more", repairs.len() - 6) } else { String::new() };
    format!("\n[arguments adjusted before running: {}{more}]", shown.join("; "))
}

fn describe(r: &Repair) -> String {
    let short = |v: &Value| {
        let text = v.to_string();
        if text.chars().count() > 40 {
            format!("{}…", text.chars().take(40).collect::<String>())
        } else {
            text
        }
    };
    match r.rule.as_str() {
        "json-text-around" => "text around the JSON object dropped".into(),
        "json-double-encoded" => match r.before.as_u64() {
            Some(2) => "the arguments were a JSON string of a JSON string of the object: decoded twice".into(),
            _ => "the arguments were a JSON string of the object: decoded".into(),
        },
        "wrapper-key" => format!("arguments taken out of the wrapper key {}", short(&r.before)),
        "call-echo" => "arguments taken out of the echoed call (its name and arguments)".into(),
        "tool-name" => format!("tool {} → {}", short(&r.before), short(&r.after)),
        rule if rule.starts_with("json-") => format!("{} in the JSON", rule.trim_start_matches("json-").replace('-', " ")),
        "alias" | "key-case" | "key-underscore" | "key-typo" => format!("key {} → {}", short(&r.before), short(&r.after)),
        "null-omitted" => format!("{} null omitted", r.path),
        "lone-surrogate" => match r.before.as_u64() {
            Some(1) => "a lone surrogate (half of a UTF-16 pair) read as U+FFFD".into(),
            _ => format!("{} lone surrogates (halves of UTF-16 pairs) read as U+FFFD", r.before),
        },
        _ => format!("{} {} → {}", r.path, short(&r.before), short(&r.after)),
    }
}

// ── JSON text ───────────────────────────────────────────────────────────────────────────────────────────────────

/// Mends argument text that is not valid JSON but whose intent is plain; None when it is not (the parser's error
/// stands). Text cut off at the end is closed only where no value was cut: a member left without its value (or
/// with its key cut) goes, but a string value cut in the middle is not made up. Returns the value and one repair per kind of fix.
pub fn repair_json(text: &str) -> Option<(Value, Vec<Repair>)> {
    let mut fixes: Vec<&'static str> = Vec::new();
    let mut body = text.trim();
    if let Some(inner) = strip_fence(body) {
        fixes.push("json-code-fence");
        body = inner;
    }
    let mended = Mender::new(body).run(&mut fixes)?;
    let value: Value = serde_json::from_str(&mended).ok()?;
    let repairs = fixes.into_iter().map(|rule| Repair::new("", Value::Null, Value::Null, rule)).collect();
    Some((value, repairs))
}

/// Argument text that is not valid JSON, mended into the one object it plainly holds: the whole text mended, or
/// else the one complete object within words around it (a label, prose, tags) mended. None when neither reads as
/// an object.
pub fn mend_arguments(text: &str) -> Option<(Value, Vec<Repair>)> {
    if let Some(mended) = repair_json(text).filter(|(v, _)| v.is_object()) {
        return Some(mended);
    }
    let inner = the_one_object(text)?;
    let (value, mut repairs) = repair_json(inner).filter(|(v, _)| v.is_object())?;
    repairs.insert(0, Repair::new("", Value::Null, Value::Null, "json-text-around"));
    Some((value, repairs))
}

/// The one complete object in text that has words around it (`Arguments: {…}`, `<tool_call>{…}</tool_call>`,
/// `{…}\nLet me know…`). None when there is none, more than one, one left open (it was cut: what was the rest?),
/// a bracket outside it left open or that nothing opened (`[{…},`, `{…}}`: what was lost?), JSON around it rather
/// than words (`"key": {…}`, `{…}, "more"`: a member or an item of something larger), nothing around it, or
/// nesting past the parser's limit. One pass: strings and comments inside the object are skipped, words outside it
/// are read only for brackets.
fn the_one_object(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let (mut depth, mut start, mut found) = (0usize, 0usize, None);
    // Square brackets open in the words outside (`[TOOL_CALLS]`).
    let mut outside = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' if depth == 0 => {
                if found.is_some() {
                    return None;
                }
                start = i;
                depth = 1;
            }
            b'[' if depth == 0 => outside += 1,
            b']' if depth == 0 => outside = outside.checked_sub(1)?,
            b'}' if depth == 0 => return None,
            _ if depth == 0 => {}
            b'{' | b'[' => {
                depth += 1;
                if depth > crate::json::MAX_DEPTH {
                    return None;
                }
            }
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    found = Some(&text[start..=i]);
                }
            }
            quote @ (b'"' | b'\'') => {
                i += 1;
                while bytes.get(i)? != &quote {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                // To the end of the line (the next character that ends one).
                i = text[i..].char_indices().find(|(_, c)| is_line_end(*c)).map_or(bytes.len(), |(at, _)| i + at);
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2 + bytes[i + 2..].windows(2).position(|w| w == b"*/")? + 1;
            }
            _ => {}
        }
        i += 1;
    }
    let object = found.filter(|object| depth == 0 && outside == 0 && object.len() < text.trim().len())?;
    let at = object.as_ptr() as usize - text.as_ptr() as usize;
    let (before, after) = (text[..at].trim_end(), text[at + object.len()..].trim_start());
    // A label ends with a colon too (`Arguments:`); a member's quoted key does not make one.
    let member = before.strip_suffix(':').is_some_and(|key| key.trim_end().ends_with(['"', '\'']));
    let structure = before.ends_with(',') || member || after.starts_with([',', ':']);
    (!structure).then_some(object)
}

/// Arguments sent as a JSON string whose content is the object (`"{\"q\": 1}"`), once or twice over; `content` is
/// that string's content. The object, a repair that says how many times it was decoded, and how many halves of
/// surrogate pairs the decoded text held (read as U+FFFD, as in arguments sent once); None when decoding does not
/// end in an object.
pub fn decode_string(content: &str) -> Option<(Value, Repair, usize)> {
    let mut text = std::borrow::Cow::Borrowed(content);
    let mut replaced = 0;
    for levels in 1..=2u64 {
        let (value, n) = crate::json::from_str_mended::<Value>(&text).ok()?;
        replaced += n;
        match value {
            Value::Object(map) => return Some((Value::Object(map), Repair::new("", Value::from(levels), Value::Null, "json-double-encoded"), replaced)),
            Value::String(inner) => text = std::borrow::Cow::Owned(inner),
            _ => return None,
        }
    }
    None
}

/// The text inside a Markdown code fence (```json … ```), when the whole text is one.
fn strip_fence(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("```")?;
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
    Some(rest.strip_suffix("```").unwrap_or(rest).trim())
}

/// How reading a string ended.
enum Read {
    Closed,
    /// The text ended inside it.
    Ended,
}

/// One pass over lenient JSON, writing strict JSON.
struct Mender<'a> {
    chars: std::iter::Peekable<std::str::CharIndices<'a>>,
    out: String,
    /// Open containers: '{' or '['.
    stack: Vec<char>,
    /// In an object, where a key (or its closing brace) comes next.
    want_key: bool,
}

impl<'a> Mender<'a> {
    fn new(text: &'a str) -> Self {
        Mender { chars: text.char_indices().peekable(), out: String::with_capacity(text.len() + 8), stack: Vec::new(), want_key: false }
    }

    fn fix(fixes: &mut Vec<&'static str>, rule: &'static str) {
        if !fixes.contains(&rule) {
            fixes.push(rule);
        }
    }

    fn run(mut self, fixes: &mut Vec<&'static str>) -> Option<String> {
        let mut seen_value = false;
        while let Some((_, c)) = self.chars.next() {
            match c {
                // Whitespace JSON does not know (a line or paragraph separator) as a space.
                c if c.is_whitespace() => self.out.push(if matches!(c, ' ' | '\t' | '\n' | '\r') { c } else { ' ' }),
                '{' | '[' => {
                    if self.stack.is_empty() && seen_value {
                        return None; // two values glued together
                    }
                    seen_value = true;
                    self.stack.push(c);
                    self.out.push(c);
                    self.want_key = c == '{';
                }
                '}' | ']' => {
                    let open = if c == '}' { '{' } else { '[' };
                    if self.stack.pop() != Some(open) {
                        return None;
                    }
                    self.drop_trailing_comma(fixes);
                    self.out.push(c);
                    self.want_key = false;
                }
                ',' => {
                    self.out.push(',');
                    self.want_key = self.stack.last() == Some(&'{');
                }
                ':' => {
                    self.out.push(':');
                    self.want_key = false;
                }
                '"' | '\'' => {
                    if c == '\'' {
                        Self::fix(fixes, "json-single-quotes");
                    }
                    match self.string(c, fixes)? {
                        Read::Closed => {}
                        // Cut inside a key, the member goes; cut inside a value, what was the rest of it?
                        Read::Ended if self.want_key => {
                            Self::fix(fixes, "json-truncated");
                            return self.close();
                        }
                        Read::Ended => return None,
                    }
                    seen_value = true;
                }
                c if c.is_ascii_alphabetic() || c == '_' || c == '$' => {
                    let word = self.word(c);
                    let key = self.want_key && self.next_is_colon();
                    match word.as_str() {
                        _ if key => {
                            Self::fix(fixes, "json-unquoted-keys");
                            self.out.push_str(&Value::String(word).to_string());
                        }
                        "true" | "false" | "null" => self.out.push_str(&word),
                        "True" | "False" | "None" => {
                            Self::fix(fixes, "json-python-literals");
                            self.out.push_str(match word.as_str() {
                                "True" => "true",
                                "False" => "false",
                                _ => "null",
                            });
                        }
                        _ => return None, // a bare word: what did it mean?
                    }
                    seen_value = true;
                }
                c if c.is_ascii_digit() || c == '-' || c == '.' || c == '+' => {
                    self.out.push(c);
                    while let Some(&(_, d)) = self.chars.peek() {
                        if !(d.is_ascii_alphanumeric() || matches!(d, '.' | '-' | '+')) {
                            break;
                        }
                        self.out.push(d);
                        self.chars.next();
                    }
                    seen_value = true;
                }
                '/' => {
                    self.skip_comment()?;
                    Self::fix(fixes, "json-comments");
                }
                _ => return None,
            }
        }
        if !self.stack.is_empty() {
            Self::fix(fixes, "json-truncated");
        }
        self.close()
    }

    /// Copies a string (from either quote) as a JSON string. None when an escape cannot be read (`\u` not
    /// followed by a character, a lone surrogate): what was meant is unknown.
    fn string(&mut self, quote: char, fixes: &mut Vec<&'static str>) -> Option<Read> {
        let mut content = String::new();
        loop {
            let Some((_, c)) = self.chars.next() else {
                self.out.push_str(&Value::String(content).to_string());
                return Some(Read::Ended);
            };
            match c {
                '\\' => match self.chars.next() {
                    Some((_, '\'')) => content.push('\''),
                    Some((_, 'u')) => content.push(self.unicode_escape()?),
                    Some((_, e)) => {
                        // Re-read the escape the JSON way; an invalid one (`\d` in a pattern) is kept literally.
                        match serde_json::from_str::<String>(&format!("\"\\{e}\"")) {
                            Ok(s) => content.push_str(&s),
                            Err(_) => {
                                content.push('\\');
                                content.push(e);
                            }
                        }
                    }
                    None => {
                        self.out.push_str(&Value::String(content).to_string());
                        return Some(Read::Ended);
                    }
                },
                c if c == quote => break,
                '\n' if quote == '"' => {
                    Self::fix(fixes, "json-control-characters");
                    content.push('\n');
                }
                c => content.push(c),
            }
        }
        self.out.push_str(&Value::String(content).to_string());
        Some(Read::Closed)
    }

    /// The character of a `\uXXXX` escape (and of a following low surrogate's, for a pair).
    fn unicode_escape(&mut self) -> Option<char> {
        let hex = |chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>| {
            let digits: String = (0..4).filter_map(|_| chars.next().map(|(_, h)| h)).collect();
            (digits.len() == 4).then(|| u32::from_str_radix(&digits, 16).ok()).flatten()
        };
        let first = hex(&mut self.chars)?;
        if !(0xD800..0xDC00).contains(&first) {
            return char::from_u32(first);
        }
        let (Some((_, '\\')), Some((_, 'u'))) = (self.chars.next(), self.chars.next()) else { return None };
        let low = hex(&mut self.chars).filter(|l| (0xDC00..0xE000).contains(l))?;
        char::from_u32(0x10000 + ((first - 0xD800) << 10) + (low - 0xDC00))
    }

    /// Past a `//` comment (to the end of its line) or a `/* */` one, the slash read. None for a lone slash or a
    /// block comment never closed (what came after it?).
    fn skip_comment(&mut self) -> Option<()> {
        match self.chars.next()? {
            (_, '/') => {
                for (_, c) in self.chars.by_ref() {
                    if is_line_end(c) {
                        self.out.push('\n');
                        return Some(());
                    }
                }
                // It ran to the end of the text: inside an object, the rest was commented out, not cut off.
                self.stack.is_empty().then_some(())
            }
            (_, '*') => {
                let mut star = false;
                for (_, c) in self.chars.by_ref() {
                    if star && c == '/' {
                        self.out.push(' ');
                        return Some(());
                    }
                    star = c == '*';
                }
                None
            }
            _ => None,
        }
    }

    fn word(&mut self, first: char) -> String {
        let mut word = String::from(first);
        while let Some(&(_, c)) = self.chars.peek() {
            if !(c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == '-') {
                break;
            }
            word.push(c);
            self.chars.next();
        }
        word
    }

    fn next_is_colon(&mut self) -> bool {
        let rest: String = self.chars.clone().map(|(_, c)| c).take_while(|c| c.is_whitespace() || *c == ':').collect();
        rest.contains(':')
    }

    /// A comma right before a closing bracket goes.
    fn drop_trailing_comma(&mut self, fixes: &mut Vec<&'static str>) {
        let trimmed = self.out.trim_end();
        if trimmed.ends_with(',') {
            let cut = trimmed.len() - 1;
            self.out.truncate(cut);
            Self::fix(fixes, "json-trailing-commas");
        }
    }

    /// The text ended: a member left without its value goes, then every open object is closed. Not when a list
    /// was cut (items may be missing) or the text ends in a number (`3` may have been `30`).
    fn close(mut self) -> Option<String> {
        if self.stack.contains(&'[') {
            return None;
        }
        loop {
            let trimmed = self.out.trim_end();
            if trimmed.ends_with(',') {
                let cut = trimmed.len() - 1;
                self.out.truncate(cut);
            } else if let Some(before) = trimmed.strip_suffix(':') {
                // `"key":` with no value: the member goes (its key is the last JSON string before the colon).
                let start = last_string_start(before)?;
                self.out.truncate(start);
            } else {
                break;
            }
        }
        let trimmed = self.out.trim_end();
        if trimmed.ends_with(|c: char| c.is_ascii_digit() || c == '.') {
            return None;
        }
        // An object cut right after a key (`{"a": 1, "b"`): the key goes too.
        if self.stack.last() == Some(&'{') && self.want_key && trimmed.ends_with('"') && !trimmed.ends_with("{\"") {
            if let Some(start) = last_string_start(trimmed) {
                let before = self.out[..start].trim_end();
                if before.ends_with(',') || before.ends_with('{') {
                    let cut = if before.ends_with(',') { before.len() - 1 } else { before.len() };
                    self.out.truncate(cut);
                }
            }
        }
        while let Some(open) = self.stack.pop() {
            self.out.push(if open == '{' { '}' } else { ']' });
        }
        Some(self.out)
    }
}

/// Whether a character ends a `//` comment (as JavaScript reads one).
fn is_line_end(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}')
}

/// Where the JSON string that ends `text` starts (its opening quote).
fn last_string_start(text: &str) -> Option<usize> {
    let body = text.strip_suffix('"')?;
    let bytes = body.as_bytes();
    let mut i = bytes.len();
    while i > 0 {
        i -= 1;
        if bytes[i] == b'"' {
            let backslashes = bytes[..i].iter().rev().take_while(|&&b| b == b'\\').count();
            if backslashes % 2 == 0 {
                return Some(i);
            }
        }
    }
    None
}

// ── Wrappers ────────────────────────────────────────────────────────────────────────────────────────────────────

/// Keys models put good arguments under, one level down.
const WRAPPER_KEYS: [&str; 5] = ["arguments", "args", "input", "parameters", "params"];

/// The one reading of arguments that fail validation that does validate: their keys and types repaired where they
/// are, or the arguments taken out of a wrapper (and then repaired). `names`: the tool's name and the name it was
/// called by. None when no reading validates, or both do (which was meant?).
pub fn reread(schema: &Value, args: &Value, aliases: &Map<String, Value>, names: [&str; 2], options: &RepairOptions, valid: impl Fn(&Value) -> bool) -> Option<(Value, Vec<Repair>)> {
    let repaired = |mut args: Value, mut repairs: Vec<Repair>| {
        repairs.extend(repair_args(schema, &mut args, aliases, options));
        (!repairs.is_empty() && valid(&args)).then_some((args, repairs))
    };
    let in_place = repaired(args.clone(), Vec::new());
    let unwrapped = unwrap(schema, args, aliases, names).filter(|_| options.wrappers).and_then(|(inner, how)| repaired(inner, how));
    match (in_place, unwrapped) {
        (Some(reading), None) | (None, Some(reading)) => Some(reading),
        _ => None,
    }
}

/// The arguments inside a wrapper: an object whose one key is a wrapper key or the tool's name
/// (`{"arguments": {…}}`, `{"search": {…}}`), or the whole call echoed (`{"name": "search", "arguments": …}`), the
/// inside an object or a JSON string of one. A key the schema has (a property or an alias) is never a wrapper.
fn unwrap(schema: &Value, args: &Value, aliases: &Map<String, Value>, names: [&str; 2]) -> Option<(Value, Vec<Repair>)> {
    let map = args.as_object()?;
    let free = |key: &str| !declares(schema, schema, key, 0) && !aliases.contains_key(key);
    let wrapper = |key: &str| WRAPPER_KEYS.contains(&key) && free(key);
    let (key, inside, rule) = match map.len() {
        1 => {
            let (key, inside) = map.iter().next().expect("one key");
            (wrapper(key) || (names.contains(&key.as_str()) && free(key))).then_some((key, inside, "wrapper-key"))?
        }
        2 => {
            let echoed = map.get("name").and_then(Value::as_str).is_some_and(|n| names.contains(&n)) && free("name");
            let (key, inside) = map.iter().find(|(k, _)| k.as_str() != "name").expect("two keys");
            (echoed && wrapper(key)).then_some((key, inside, "call-echo"))?
        }
        _ => return None,
    };
    let mut inside = match inside {
        Value::Object(inside) => inside.clone(),
        Value::String(text) => match serde_json::from_str::<Value>(text).ok()? {
            Value::Object(inside) => inside,
            _ => return None,
        },
        _ => return None,
    };
    let before = if rule == "call-echo" { map["name"].clone() } else { Value::String(key.clone()) };
    let mut repairs = vec![Repair::new("", before, Value::Null, rule)];
    // The tool's own name inside the envelope is part of the slip, not an argument: it goes with the envelope, even
    // where the schema would let an extra property through to the handler.
    let echoes: Vec<String> = inside
        .iter()
        .filter(|(k, v)| NAME_KEYS.contains(&k.as_str()) && v.as_str().is_some_and(|n| names.contains(&n)) && free(k))
        .map(|(k, _)| k.clone())
        .collect();
    for echo in echoes {
        let name = inside.shift_remove(&echo).expect("listed");
        repairs.push(Repair::new(&format!("/{}", echo.replace('~', "~0").replace('/', "~1")), name, Value::Null, "name-echo"));
    }
    Some((Value::Object(inside), repairs))
}

/// Keys under which a model echoes the tool's name inside an envelope.
const NAME_KEYS: [&str; 5] = ["name", "tool", "toolName", "tool_name", "function"];

/// Whether `schema` (followed through `$ref`, and into `allOf`, `anyOf`, `oneOf`, `if`/`then`/`else` and
/// `dependentSchemas`) may hold `key`: as a property, or a key a `patternProperties` pattern matches (or one that
/// cannot be read, to be safe).
fn declares(root: &Value, schema: &Value, key: &str, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return true;
    }
    let schema = resolve_ref(root, schema);
    if schema.get("properties").and_then(Value::as_object).is_some_and(|p| p.contains_key(key)) {
        return true;
    }
    let patterns = schema.get("patternProperties").and_then(Value::as_object).into_iter().flat_map(|p| p.keys());
    if patterns.into_iter().any(|pattern| regex::Regex::new(pattern).map_or(true, |re| re.is_match(key))) {
        return true;
    }
    let lists = ["allOf", "anyOf", "oneOf"].into_iter().filter_map(|k| schema.get(k).and_then(Value::as_array)).flatten();
    let single = ["if", "then", "else"].into_iter().filter_map(|k| schema.get(k));
    let dependent = schema.get("dependentSchemas").and_then(Value::as_object).into_iter().flat_map(|d| d.values());
    lists.chain(single).chain(dependent).any(|sub| declares(root, sub, key, depth + 1))
}

/// A schema with a local `$ref` followed (a few hops at most, so that a cycle cannot loop).
fn resolve_ref<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    let mut schema = schema;
    for _ in 0..8 {
        let Some(reference) = schema.get("$ref").and_then(Value::as_str) else { break };
        let Some(target) = reference.strip_prefix('#').and_then(|pointer| root.pointer(pointer)) else { break };
        schema = target;
    }
    schema
}

// ── Keys and types ─────────────────────────────────────────────────────────────────────────────────────────────

/// Repairs keys and types of `args` against `schema` in place; returns what changed. `aliases` maps a top-level
/// alias to its property.
pub fn repair_args(schema: &Value, args: &mut Value, aliases: &Map<String, Value>, options: &RepairOptions) -> Vec<Repair> {
    let mut repairs = Vec::new();
    let mut walk = Walk { root: schema, options, repairs: &mut repairs };
    walk.value(schema, args, "", Some(aliases), 0);
    repairs
}

struct Walk<'a, 'r> {
    root: &'a Value,
    options: &'a RepairOptions,
    repairs: &'r mut Vec<Repair>,
}

/// Nesting deeper than this is left alone (and a `$ref` cycle cannot loop).
const MAX_DEPTH: usize = 32;

impl<'a> Walk<'a, '_> {
    /// A schema with a local `$ref` followed.
    fn resolve(&self, schema: &'a Value) -> &'a Value {
        resolve_ref(self.root, schema)
    }

    fn value(&mut self, schema: &'a Value, value: &mut Value, path: &str, aliases: Option<&Map<String, Value>>, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        let schema = self.resolve(schema);
        if self.options.types {
            self.coerce(schema, value, path);
        }
        match value {
            Value::Object(map) => {
                let Some(Value::Object(properties)) = schema.get("properties") else { return };
                if self.options.keys {
                    self.keys(properties, map, path, aliases);
                }
                let required = required(schema);
                let keys: Vec<String> = map.keys().cloned().collect();
                for key in keys {
                    let Some(property) = properties.get(&key) else { continue };
                    let child = format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"));
                    if self.options.types && map[&key].is_null() && !required.contains(&key.as_str()) && !allows_null(self.resolve(property)) {
                        map.remove(&key);
                        self.repairs.push(Repair::new(&child, Value::Null, Value::Null, "null-omitted"));
                        continue;
                    }
                    self.value(property, map.get_mut(&key).expect("listed"), &child, None, depth + 1);
                }
            }
            Value::Array(items) => {
                let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) else { return };
                for (i, item) in items.iter_mut().enumerate() {
                    self.value(item_schema, item, &format!("{path}/{i}"), None, depth + 1);
                }
            }
            _ => {}
        }
    }

    /// Keys the schema does not know, mapped to the one property they plainly meant.
    fn keys(&mut self, properties: &Map<String, Value>, map: &mut Map<String, Value>, path: &str, aliases: Option<&Map<String, Value>>) {
        let unknown: Vec<String> = map.keys().filter(|k| !properties.contains_key(*k)).cloned().collect();
        let absent = |p: &str| properties.contains_key(p) && !map.contains_key(p);
        let targets: Vec<(String, String, &'static str)> = unknown
            .into_iter()
            .filter_map(|key| {
                let alias = aliases.and_then(|a| a.get(&key)).and_then(Value::as_str).filter(|p| absent(p));
                let target = match alias {
                    Some(p) => Some((p.to_string(), "alias")),
                    None => closest_property(&key, properties.keys().filter(|p| absent(p)).map(String::as_str)),
                };
                target.map(|(property, rule)| (key, property, rule))
            })
            .collect();
        for (key, property, rule) in &targets {
            // Two keys that both mean the same property: which value was meant? Neither is moved.
            if targets.iter().filter(|(_, p, _)| p == property).count() > 1 {
                continue;
            }
            let (key, property) = (key.clone(), property.clone());
            let value = map.remove(&key).expect("listed");
            map.insert(property.clone(), value);
            self.repairs.push(Repair::new(path, Value::String(key), Value::String(property), rule));
        }
    }

    /// A value of the wrong type, as the declared type, when it converts without doubt.
    fn coerce(&mut self, schema: &Value, value: &mut Value, path: &str) {
        let types = declared_types(schema);
        if let Some(fixed) = enum_case(schema, value) {
            self.record(path, value, fixed, "enum-case");
            return;
        }
        if types.is_empty() || types.iter().any(|t| has_type(value, t)) {
            return;
        }
        for t in &types {
            let (fixed, rule) = match (t.as_str(), &*value) {
                ("integer", Value::String(s)) => (integer_from(s), "string-to-integer"),
                ("integer", Value::Number(n)) => (n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15).map(|f| Value::from(f as i64)), "number-to-integer"),
                ("number", Value::String(s)) => (number_from(s), "string-to-number"),
                ("boolean", Value::String(s)) => (boolean_from(s), "string-to-boolean"),
                ("string", Value::Number(n)) => (Some(Value::String(n.to_string())), "number-to-string"),
                ("array", Value::String(s)) if s.trim_start().starts_with('[') => (json_of(s, Value::is_array), "json-string"),
                ("object", Value::String(s)) if s.trim_start().starts_with('{') => (json_of(s, Value::is_object), "json-string"),
                ("array", v) if !v.is_array() && !v.is_object() && !v.is_null() => (Some(Value::Array(vec![v.clone()])), "scalar-to-array"),
                _ => (None, ""),
            };
            if let Some(fixed) = fixed {
                self.record(path, value, fixed, rule);
                return;
            }
        }
    }

    fn record(&mut self, path: &str, value: &mut Value, fixed: Value, rule: &str) {
        let before = std::mem::replace(value, fixed);
        self.repairs.push(Repair::new(path, before, value.clone(), rule));
    }
}

/// The one property a key plainly meant: the same ignoring case and separators, the key with a leading underscore,
/// or a small edit away when exactly one property is that close. None when two are equally plausible.
fn closest_property<'p>(key: &str, candidates: impl Iterator<Item = &'p str> + Clone) -> Option<(String, &'static str)> {
    let only = |matches: Vec<&str>| match matches.as_slice() {
        [one] => Some(one.to_string()),
        _ => None,
    };
    let folded = fold(key);
    let same: Vec<&str> = candidates.clone().filter(|p| fold(p) == folded).collect();
    if !same.is_empty() {
        let property = only(same)?; // two properties the same but for case or separators: no guess
        let rule = if property.trim_start_matches('_') == key { "key-underscore" } else { "key-case" };
        return Some((property, rule));
    }
    let folded: Vec<char> = folded.chars().collect();
    let limit = if folded.len() <= 6 { 1 } else { 2 };
    let near: Vec<(usize, &str)> = candidates.filter_map(|p| edit_distance_within(&folded, &fold(p).chars().collect::<Vec<_>>(), limit).map(|d| (d, p))).collect();
    let best = near.iter().map(|(d, _)| *d).min()?;
    only(near.into_iter().filter(|(d, _)| *d == best).map(|(_, p)| p).collect()).map(|p| (p, "key-typo"))
}

fn required(schema: &Value) -> Vec<&str> {
    schema.get("required").and_then(Value::as_array).map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
}

fn declared_types(schema: &Value) -> Vec<String> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).map(String::from).collect(),
        _ => Vec::new(),
    }
}

fn allows_null(schema: &Value) -> bool {
    let types = declared_types(schema);
    let enum_null = schema.get("enum").and_then(Value::as_array).is_some_and(|e| e.contains(&Value::Null));
    types.iter().any(|t| t == "null") || enum_null || (types.is_empty() && schema.get("enum").is_none())
}

fn has_type(value: &Value, t: &str) -> bool {
    match t {
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.as_f64().is_some_and(|f| f.fract() == 0.0),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "null" => value.is_null(),
        _ => true,
    }
}

/// A string that is not one of the enum's values, but is exactly one of them ignoring case.
fn enum_case(schema: &Value, value: &Value) -> Option<Value> {
    let options = schema.get("enum")?.as_array()?;
    let s = value.as_str()?;
    if options.iter().any(|o| o.as_str() == Some(s)) {
        return None;
    }
    let lower = s.trim().to_lowercase();
    let matches: Vec<&Value> = options.iter().filter(|o| o.as_str().is_some_and(|o| o.to_lowercase() == lower)).collect();
    match matches.as_slice() {
        [only] => Some((*only).clone()),
        _ => None,
    }
}

fn number_from(s: &str) -> Option<Value> {
    let t = s.trim();
    let plain = !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E'));
    if !plain {
        return None;
    }
    // Whole numbers stay exact: one that does not fit in 64 bits is not converted rather than rounded.
    if !t.contains(['.', 'e', 'E']) {
        let t = t.strip_prefix('+').unwrap_or(t);
        return t.parse::<i64>().map(Value::from).or_else(|_| t.parse::<u64>().map(Value::from)).ok();
    }
    let f: f64 = t.parse().ok().filter(|f: &f64| f.is_finite())?;
    Number::from_f64(f).map(Value::Number)
}

fn integer_from(s: &str) -> Option<Value> {
    match number_from(s)? {
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(Value::Number(n)),
        Value::Number(n) => n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15).map(|f| Value::from(f as i64)),
        _ => None,
    }
}

fn boolean_from(s: &str) -> Option<Value> {
    match s.trim().to_lowercase().as_str() {
        "true" => Some(Value::Bool(true)),
        "false" => Some(Value::Bool(false)),
        _ => None,
    }
}

fn json_of(s: &str, is_kind: fn(&Value) -> bool) -> Option<Value> {
    serde_json::from_str::<Value>(s).ok().filter(is_kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mend(text: &str) -> Option<(Value, Vec<String>)> {
        repair_json(text).map(|(v, r)| (v, r.into_iter().map(|r| r.rule).collect()))
    }

    #[test]
    fn mends_json_whose_intent_is_plain() {
        let cases = [
            ("```json\n{\"q\": \"x\"}\n```", json!({"q": "x"}), "json-code-fence"),
            ("{\"q\": \"x\", \"n\": [1, 2,],}", json!({"q": "x", "n": [1, 2]}), "json-trailing-commas"),
            ("{'q': 'it\\'s \"x\"'}", json!({"q": "it's \"x\""}), "json-single-quotes"),
            ("{q: \"x\", max_results: 5}", json!({"q": "x", "max_results": 5}), "json-unquoted-keys"),
            ("{\"a\": True, \"b\": None, \"c\": False}", json!({"a": true, "b": null, "c": false}), "json-python-literals"),
            ("{\"q\": \"rust\", \"safe\": true", json!({"q": "rust", "safe": true}), "json-truncated"),
            ("{\"q\": \"\\ud83d\\ude00 rust\", \"safe\": true", json!({"q": "😀 rust", "safe": true}), "json-truncated"),
            ("{\"q\": \"rust\", \"n\":", json!({"q": "rust"}), "json-truncated"),
            ("{\"q\": \"rust\", \"n\"", json!({"q": "rust"}), "json-truncated"),
            ("{\"a\": {\"b\": \"c\"", json!({"a": {"b": "c"}}), "json-truncated"),
        ];
        for (text, want, rule) in cases {
            let (value, rules) = mend(text).unwrap_or_else(|| panic!("{text} not mended"));
            assert_eq!(value, want, "{text}");
            assert!(rules.contains(&rule.to_string()), "{text}: {rules:?}");
        }
    }

    #[test]
    fn leaves_what_it_cannot_read() {
        let cut = ["{\"q\": \"ru", "{\"days\": 3", "{\"ids\": [1, 2", "{\"ids\": [\"a\", \"b\"", "{\"p\": \"a\", \"\\ud83d\": 1}"];
        for text in ["{\"q\": rust}", "q=rust", "{\"a\": 1}{\"b\": 2}", "{\"a\": 1]]", "{\"a\" 1}"].into_iter().chain(cut) {
            assert_eq!(repair_json(text), None, "{text}");
        }
    }

    fn fix(schema: Value, mut args: Value) -> (Value, Vec<String>) {
        let repairs = repair_args(&schema, &mut args, &Map::new(), &RepairOptions::default());
        (args, repairs.into_iter().map(|r| r.rule).collect())
    }

    #[test]
    fn keys_go_to_the_one_property_they_meant() {
        let schema = json!({"type": "object", "properties": {"max_results": {"type": "integer"}, "_from": {"type": "string"}, "query": {"type": "string"}}});
        assert_eq!(fix(schema.clone(), json!({"maxResults": 3})).0, json!({"max_results": 3}));
        assert_eq!(fix(schema.clone(), json!({"from": "a"})).0, json!({"_from": "a"}));
        assert_eq!(fix(schema.clone(), json!({"qeury": "a"})).0, json!({"query": "a"}));
        // Not when the property is already there.
        assert_eq!(fix(schema, json!({"qeury": "a", "query": "b"})).1, Vec::<String>::new());
        let two = json!({"type": "object", "properties": {"start_date": {}, "end_date": {}, "lime": {}, "limit": {}}});
        assert_eq!(fix(two.clone(), json!({"date": "x"})).1, Vec::<String>::new(), "two equally close: no guess");
        assert_eq!(fix(two, json!({"limi": 1})).1, Vec::<String>::new(), "lime and limit are both one edit away");
    }

    #[test]
    fn many_long_unknown_keys_cost_a_bounded_search() {
        let properties: Map<String, Value> = (0..50).map(|i| (format!("property_{i}"), json!({"type": "string"}))).collect();
        let schema = json!({"type": "object", "properties": properties, "required": ["property_0"]});
        let long: Map<String, Value> = (0..200).map(|i| (format!("k{i}_{}", "y".repeat(1_000)), json!(1))).collect();
        let cells = crate::text::tests::cells_of(|| assert_eq!(fix(schema.clone(), Value::Object(long)).1, Vec::<String>::new()));
        assert_eq!(cells, 0, "keys far longer than every property are told apart by length");
        let close: Map<String, Value> = (0..200).map(|i| (format!("propertx_{i}"), json!("v"))).collect();
        let cells = crate::text::tests::cells_of(|| {
            fix(schema, Value::Object(close));
        });
        assert!(cells <= 200 * 50 * 12 * 5, "{cells} cells: only the band around the diagonal");
    }

    #[test]
    fn aliases_and_nested_keys() {
        let schema = json!({"type": "object", "properties": {"query": {"type": "string"}, "filter": {"type": "object", "properties": {"date_range": {"type": "string"}}}}});
        let aliases = json!({"q": "query"});
        let mut args = json!({"q": "x", "filter": {"dateRange": "2024"}});
        let repairs = repair_args(&schema, &mut args, aliases.as_object().unwrap(), &RepairOptions::default());
        assert_eq!(args, json!({"query": "x", "filter": {"date_range": "2024"}}));
        assert_eq!(repairs[0], Repair::new("", json!("q"), json!("query"), "alias"));
        assert_eq!(repairs[1], Repair::new("/filter", json!("dateRange"), json!("date_range"), "key-case"));
    }

    #[test]
    fn values_take_their_declared_type_when_they_convert_without_doubt() {
        let schema = json!({"type": "object", "required": ["n"], "properties": {
            "n": {"type": "integer"}, "x": {"type": "number"}, "b": {"type": "boolean"}, "s": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "integer"}}, "o": {"type": "object"}, "unit": {"enum": ["celsius", "fahrenheit"]},
            "opt": {"type": "string"}}});
        let (args, rules) = fix(schema.clone(), json!({"n": "3.0", "x": "1e2", "b": "TRUE", "s": 42, "tags": "7", "o": "{\"a\":1}", "unit": "Celsius", "opt": null}));
        assert_eq!(args, json!({"n": 3, "x": 100.0, "b": true, "s": "42", "tags": [7], "o": {"a": 1}, "unit": "celsius"}));
        assert_eq!(rules.len(), 9, "the tag is wrapped, then its item converted: {rules:?}");
        for refused in [json!({"n": "3.5"}), json!({"n": "five"}), json!({"b": "maybe"}), json!({"unit": "kelvin"}), json!({"n": null})] {
            let (after, rules) = fix(schema.clone(), refused.clone());
            assert_eq!((after, rules), (refused, vec![]), "no doubtful conversion");
        }
    }

    #[test]
    fn two_keys_for_one_property_are_not_guessed_between() {
        let schema = json!({"type": "object", "additionalProperties": false, "properties": {"query": {"type": "string"}}});
        let args = json!({"Query": "drop everything", "query_": "harmless"});
        assert_eq!(fix(schema, args.clone()), (args, vec![]));
    }

    #[test]
    fn whole_numbers_stay_exact_or_are_not_converted() {
        assert_eq!(number_from("12345678901234567891"), Some(json!(12345678901234567891u64)));
        assert_eq!(number_from("99999999999999999999"), None, "too large for 64 bits: not rounded");
        assert_eq!(number_from("-42"), Some(json!(-42)));
        assert_eq!(number_from("2.5e1"), Some(json!(25.0)));
    }

    fn rules(repairs: &[Repair]) -> Vec<&str> {
        repairs.iter().map(|r| r.rule.as_str()).collect()
    }

    #[test]
    fn the_one_object_is_taken_out_of_words_around_it() {
        let cases = [
            ("Arguments: {\"q\": \"x\"}", json!({"q": "x"})),
            ("{\"q\": \"x\"}\nLet me know if you need more details.", json!({"q": "x"})),
            ("<tool_call>\n{\"q\": \"a } b\", \"n\": [1, {\"m\": 2}]}\n</tool_call>", json!({"q": "a } b", "n": [1, {"m": 2}]})),
            ("<arguments>{'q': 'it\\'s {x}'}</arguments>", json!({"q": "it's {x}"})),
            ("Sure! ```json\n{\"q\": \"x\", // the query\n}\n``` Done.", json!({"q": "x"})),
            ("[TOOL_CALLS] {\"q\": \"x\"}", json!({"q": "x"})),
        ];
        for (text, want) in cases {
            let (value, repairs) = mend_arguments(text).unwrap_or_else(|| panic!("{text} not mended"));
            assert_eq!(value, want, "{text}");
            assert_eq!(rules(&repairs)[0], "json-text-around", "{text}");
        }
        let refused = [
            "Use {\"q\": \"x\"} or {\"q\": \"y\"}",                // two objects: which one?
            "Arguments: {\"q\": \"x\", \"n\": {\"m\": 1}",          // cut off: what was the rest?
            "Arguments: {\"q\": \"x\"} and then {\"q\"",              // a second one left open
            "Arguments: {\"q\": x}",                                   // the one object cannot be read
            "Arguments: none",
            "Arguments: {\"q\": \"x\" /* never closed }",
            "{\"q\": \"x\"}}",                                         // a closing brace nothing opened
            "{\"q\": \"x\"}]",
            "[{\"q\": \"x\"},",                                        // a list cut off: more items?
            "[{\"q\": \"x\"}, \"and y\",]",                            // one item of a list
            "\"limit\": 5, \"filter\": {\"q\": \"x\"}",                 // a member of an object whose braces are gone
            "\"name\": \"fetch\", \"arguments\": {\"q\": \"x\"}",
        ];
        for text in refused {
            assert_eq!(mend_arguments(text), None, "{text}");
        }
        let deep = format!("Here: {}{}", "{\"a\": ".repeat(200), "}".repeat(200));
        assert_eq!(the_one_object(&deep), None, "nesting past the parser's limit");
        assert_eq!(the_one_object("{\"q\": x}"), None, "no words around it: not a new reading");
    }

    #[test]
    fn comments_in_the_json_are_dropped() {
        let (value, repairs) = mend_arguments("{\n  // what to look for\n  \"q\": \"http://x\", /* at most */ \"n\": 3\n}").unwrap();
        assert_eq!(value, json!({"q": "http://x", "n": 3}));
        assert_eq!(rules(&repairs), ["json-comments"]);
        assert_eq!(repair_json("{\"q\": 1 / 2}"), None, "a lone slash is no comment");
        for end in ["\r", "\r\n", "\u{2028}", "\u{2029}"] {
            let text = format!("{{\"q\": \"x\", // the term{end}  \"n\": 3{end}}}");
            assert_eq!(mend_arguments(&text).map(|(v, _)| v), Some(json!({"q": "x", "n": 3})), "{text:?}");
        }
        // A comment that runs to the end commented the rest out: nothing was cut, what it hid is unknown.
        assert_eq!(mend_arguments("{\"q\": \"x\", // the term, \"n\": 3}"), None);
        assert_eq!(mend_arguments("{\"q\": \"x\"} // done").map(|(v, _)| v), Some(json!({"q": "x"})), "after the object: harmless");
    }

    #[test]
    fn a_json_string_holding_the_object_is_decoded_once_or_twice() {
        let once = decode_string("{\"q\": \"x\"}").unwrap();
        assert_eq!(decode_string("{\"q\": \"Zo\\ud83d\"}").map(|(v, _, n)| (v, n)), Some((json!({"q": "Zo\u{fffd}"}), 1)), "half an emoji");
        assert_eq!((once.0, once.1.before), (json!({"q": "x"}), json!(1)));
        let twice = decode_string("\"{\\\"q\\\": \\\"x\\\"}\"").unwrap();
        assert_eq!((twice.0, twice.1.before), (json!({"q": "x"}), json!(2)));
        let thrice = serde_json::to_string(&serde_json::to_string("{\"q\": 1}").unwrap()).unwrap();
        assert_eq!(decode_string(&thrice), None, "three levels: not certain any more");
        for content in ["[1, 2]", "plain words", "\"text\"", "{\"q\": "] {
            assert_eq!(decode_string(content), None, "{content}");
        }
    }

    fn reread_of(args: Value, options: &RepairOptions) -> Option<(Value, Vec<String>)> {
        let schema = json!({"type": "object", "additionalProperties": false, "required": ["query"],
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}});
        let validator = jsonschema::validator_for(&schema).unwrap();
        let aliases = json!({"q": "query"});
        reread(&schema, &args, aliases.as_object().unwrap(), ["search", "Search"], options, |v| validator.is_valid(v))
            .map(|(v, r)| (v, r.into_iter().map(|r| r.rule).collect()))
    }

    #[test]
    fn arguments_come_out_of_one_wrapper() {
        let on = RepairOptions::default();
        let inside = json!({"query": "x", "limit": 2});
        for key in WRAPPER_KEYS.into_iter().chain(["search", "Search"]) {
            assert_eq!(reread_of(json!({key: inside}), &on), Some((inside.clone(), vec!["wrapper-key".into()])), "{key}");
        }
        let echoed = Some((inside.clone(), vec!["call-echo".to_string()]));
        assert_eq!(reread_of(json!({"name": "search", "arguments": inside}), &on), echoed);
        assert_eq!(reread_of(json!({"name": "search", "parameters": inside.to_string()}), &on), echoed, "the inside as a JSON string");
        // The inside is repaired like any arguments, and must validate.
        assert_eq!(reread_of(json!({"input": {"q": "x", "limit": "2"}}), &on).unwrap().1, ["wrapper-key", "alias", "string-to-integer"]);
        assert_eq!(reread_of(json!({"input": {"limit": 2}}), &on), None, "the inside fails the schema");
        assert_eq!(reread_of(json!({"input": {"query": "x"}, "limit": 2}), &on), None, "a key beside the wrapper");
        assert_eq!(reread_of(json!({"name": "fetch", "arguments": inside}), &on), None, "another tool's call");
        assert_eq!(reread_of(json!({"payload": inside}), &on), None, "not a wrapper key");
        assert_eq!(reread_of(json!({"arguments": [inside]}), &on), None);
        assert_eq!(reread_of(json!({"arguments": "{\"query\": "}), &on), None, "a cut-off inside");
        assert_eq!(reread_of(json!({"arguments": inside}), &RepairOptions { wrappers: false, ..on.clone() }), None);
    }

    #[test]
    fn the_tool_name_echoed_inside_a_removed_envelope_never_reaches_the_handler() {
        // Extra properties allowed: the schema alone would let the echo through.
        let schema = json!({"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}});
        let validator = jsonschema::validator_for(&schema).unwrap();
        let read = |args: Value| reread(&schema, &args, &Map::new(), ["search", "Search"], &RepairOptions::default(), |v| validator.is_valid(v));
        let (args, repairs) = read(json!({"arguments": {"name": "search", "query": "x"}})).unwrap();
        assert_eq!(args, json!({"query": "x"}));
        assert_eq!(repairs.iter().map(|r| (r.path.as_str(), r.rule.as_str())).collect::<Vec<_>>(), [("", "wrapper-key"), ("/name", "name-echo")]);
        let (args, _) = read(json!({"name": "search", "arguments": {"tool": "Search", "query": "x"}})).unwrap();
        assert_eq!(args, json!({"query": "x"}), "under the name it was called by too");
        let (args, _) = read(json!({"arguments": {"name": "someone else", "query": "x"}})).unwrap();
        assert_eq!(args, json!({"name": "someone else", "query": "x"}), "a name that is not the tool's is an argument");
        // A key the schema declares is an argument, whatever it holds.
        let declared = json!({"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}, "name": {"type": "string"}}});
        let validator = jsonschema::validator_for(&declared).unwrap();
        let (args, _) = reread(&declared, &json!({"arguments": {"name": "search", "query": "x"}}), &Map::new(), ["search", "search"], &RepairOptions::default(), |v| validator.is_valid(v)).unwrap();
        assert_eq!(args, json!({"name": "search", "query": "x"}));
    }

    #[test]
    fn a_key_the_schema_declares_anywhere_is_never_a_wrapper() {
        let inside = json!({"query": "x"});
        let schemas = [
            json!({"type": "object", "$ref": "#/$defs/A", "$defs": {"A": {"required": ["query"], "properties": {"input": {"type": "object"}, "query": {"type": "string"}}}}}),
            json!({"type": "object", "allOf": [{"required": ["query"], "properties": {"query": {"type": "string"}}}, {"properties": {"input": {"type": "object"}}}]}),
            json!({"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}, "patternProperties": {"^inp": {"type": "object"}}}),
            json!({"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}, "patternProperties": {"(?<=x)": {}}}),
        ];
        for schema in schemas {
            let validator = jsonschema::validator_for(&schema).unwrap();
            let args = json!({"input": inside});
            assert!(!validator.is_valid(&args), "{schema}");
            assert_eq!(reread(&schema, &args, &Map::new(), ["t", "t"], &RepairOptions::default(), |v| validator.is_valid(v)), None, "{schema}");
        }
    }

    #[test]
    fn a_key_the_schema_has_is_never_a_wrapper() {
        let schema = json!({"type": "object", "required": ["input", "mode"], "properties": {"input": {"type": "object"}, "mode": {"type": "string"}}});
        let validator = jsonschema::validator_for(&schema).unwrap();
        let args = json!({"input": {"mode": "fast", "input": {}}});
        assert_eq!(reread(&schema, &args, &Map::new(), ["t", "t"], &RepairOptions::default(), |v| validator.is_valid(v)), None);
        let aliased = json!({"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}});
        let validator = jsonschema::validator_for(&aliased).unwrap();
        let aliases = json!({"input": "query"});
        let args = json!({"input": {"query": "x"}});
        assert_eq!(reread(&aliased, &args, aliases.as_object().unwrap(), ["t", "t"], &RepairOptions::default(), |v| validator.is_valid(v)), None, "an alias");
    }

    #[test]
    fn two_readings_that_both_validate_are_not_guessed_between() {
        // `args` is a near miss of the property `arg` and a wrapper key: both readings validate.
        let schema = json!({"type": "object", "properties": {"arg": {"type": "object"}, "query": {"type": "string"}}, "additionalProperties": false});
        let validator = jsonschema::validator_for(&schema).unwrap();
        let args = json!({"args": {"query": "x"}});
        assert_eq!(reread(&schema, &args, &Map::new(), ["t", "t"], &RepairOptions::default(), |v| validator.is_valid(v)), None);
    }

    #[test]
    fn a_value_of_the_right_type_is_never_touched() {
        let schema = json!({"type": "object", "properties": {"zip": {"type": "string"}, "n": {"type": ["integer", "string"]}}});
        assert_eq!(fix(schema, json!({"zip": "02139", "n": "5"})).1, Vec::<String>::new());
    }
}
