//! How the redactor keeps its precision: the checks that tell a candidate secret from ordinary data (a placeholder,
//! a reference to a variable, a word, a number, a path, prose, low entropy) and that the shapes it finds are real.

use std::ops::Range;

/// Whole values that stand for a secret rather than being one (any case).
const PLACEHOLDER_VALUES: &[&str] = &[
    "null",
    "none",
    "nil",
    "undefined",
    "true",
    "false",
    "yes",
    "no",
    "on",
    "off",
    "empty",
    "required",
    "optional",
    "hidden",
    "secret",
    "password",
    "passwd",
    "pass",
    "pwd",
    "token",
    "changeme",
    "test",
    "string",
    "n/a",
    "tbd",
    "todo",
];
/// Words that mark a placeholder anywhere in a value, as written, Capitalized or UPPER: random
/// secrets practically never hold them in one case.
const PLACEHOLDER_WORDS: &[&str] = &[
    "example",
    "Example",
    "EXAMPLE",
    "placeholder",
    "Placeholder",
    "PLACEHOLDER",
    "dummy",
    "Dummy",
    "DUMMY",
    "your",
    "Your",
    "YOUR",
    "sample",
    "Sample",
    "SAMPLE",
    "changeme",
    "Changeme",
    "CHANGEME",
    "redacted",
    "Redacted",
    "REDACTED",
    "replace",
    "Replace",
    "REPLACE",
];

pub(super) fn is_placeholder(value: &str) -> bool {
    let v = value.trim();
    let mut chars = v.chars();
    let Some(first) = chars.next() else { return true };
    let wrapped = |open: &str, close: &str| v.len() > open.len() + close.len() && v.starts_with(open) && v.ends_with(close);
    chars.all(|c| c == first)
        || wrapped("<", ">")
        || wrapped("${", "}")
        || wrapped("{{", "}}")
        || wrapped("[", "]")
        || wrapped("%", "%")
        || v.contains("...")
        || v.contains('…')
        || v.contains("***")
        || has_run(v, 6)
        || PLACEHOLDER_VALUES.iter().any(|p| v.eq_ignore_ascii_case(p))
        || PLACEHOLDER_WORDS.iter().any(|w| v.contains(w))
}

/// Whether some char repeats `n` times in a row (`xxxxxx`, `000000`): random secrets practically never do.
fn has_run(v: &str, n: usize) -> bool {
    let mut run = (None, 0);
    for c in v.chars() {
        run = if run.0 == Some(c) { (run.0, run.1 + 1) } else { (Some(c), 1) };
        if run.1 >= n {
            return true;
        }
    }
    false
}

/// A candidate of a generic rule that could be a secret: long enough, no placeholder, reference, word or
/// number, with at least `bits` of Shannon entropy per char.
pub(super) fn plausible(v: &str, bits: f64) -> bool {
    v.chars().count() >= 6 && !is_placeholder(v) && !is_reference(v) && !is_word(v) && !is_number_like(v) && entropy(v) >= bits
}

/// A name of the value rather than the value: `$VAR`, `%VAR%`, `process.env.API_KEY`, `config.apiKey`,
/// `DB_PASSWORD`.
pub(super) fn is_reference(v: &str) -> bool {
    // Identifier segments, digits only at the end (`Xk9.pQ2z` is no reference).
    let segment = |s: &str| {
        let letters = s.trim_end_matches(|c: char| c.is_ascii_digit());
        !letters.is_empty() && letters.chars().all(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
    };
    let env_name = v.contains('_')
        && v.starts_with(|c: char| c.is_ascii_uppercase())
        && v.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    v.starts_with('$') || v.starts_with('%') || (v.contains('.') && v.split('.').all(segment)) || env_name
}

/// A word or identifier (`required`, `String`, `get_password`): letters, `_` and `-` only, and short.
fn is_word(v: &str) -> bool {
    v.len() < 20 && v.chars().all(|c| c.is_ascii_alphabetic() || c == '_' || c == '-')
}

/// Numbers, dates, times, versions.
fn is_number_like(v: &str) -> bool {
    v.bytes().all(|b| b.is_ascii_digit() || b"._:+-/,".contains(&b))
}

/// A file path, as in `PWD=/home/me`.
pub(super) fn is_path(v: &str) -> bool {
    let b = v.as_bytes();
    ["/", "~/", "./", "../"].iter().any(|p| v.starts_with(p))
        || (b.len() > 2 && b[0].is_ascii_alphabetic() && b[1] == b':' && (b[2] == b'\\' || b[2] == b'/'))
}

/// A sentence of plain words, as in `password: "This field is required."`; a lowercase run of words
/// (`correct horse battery staple`) may be a passphrase.
pub(super) fn is_prose(v: &str) -> bool {
    let words: Vec<&str> = v.split_whitespace().collect();
    let sentence = v.starts_with(|c: char| c.is_ascii_uppercase()) || v.ends_with(['.', '!', '?']);
    let plain = |w: &&str| {
        let w = w.trim_end_matches(['.', ',', '!', '?', ':']);
        is_word(w) || w.bytes().all(|b| b.is_ascii_digit())
    };
    sentence && words.len() >= 3 && words.iter().all(plain)
}

/// Shannon entropy in bits per byte.
fn entropy(v: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in v.bytes() {
        counts[usize::from(b)] += 1;
    }
    let n = v.len() as f64;
    counts.iter().filter(|&&c| c > 0).map(|&c| f64::from(c) / n).map(|p| -p * p.log2()).sum()
}

/// A PEM block with a body of real key material, not `...` or `xxxx`.
pub(super) fn is_real_pem(block: &str) -> bool {
    let body = block.split("-----").nth(2).unwrap_or("");
    let material = body.bytes().filter(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/').count();
    material >= 64 && !body.contains("...") && !body.to_ascii_lowercase().contains("xxxxxx")
}

/// An address, not an asset name such as `logo@2x.png`.
pub(super) fn is_email(v: &str) -> bool {
    let tld = v.rsplit('.').next().unwrap_or("").to_ascii_lowercase();
    !["png", "jpg", "jpeg", "gif", "svg", "webp", "avif", "ico", "bmp", "js", "css", "map"].contains(&tld.as_str())
}

/// 10 to 15 digits, standing alone: not inside a longer number, a version, a path or a word.
pub(super) fn is_phone(text: &str, span: Range<usize>) -> bool {
    let digits = text[span.clone()].bytes().filter(u8::is_ascii_digit).count();
    let before = text[..span.start].bytes().next_back();
    let mut after = text[span.end..].bytes();
    let (next, next2) = (after.next(), after.next());
    let joined_before = before.is_some_and(|b| b.is_ascii_alphanumeric() || b"+._/-".contains(&b));
    let joined_after = next.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        || (next.is_some_and(|b| b"./-".contains(&b)) && next2.is_some_and(|b| b.is_ascii_digit()));
    (10..=15).contains(&digits) && !joined_before && !joined_after
}
