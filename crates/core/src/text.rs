//! Text as the engine measures and compares it: characters (code points), not bytes; names folded for comparison;
//! edit distances between near-miss spellings. Depends on nothing else in the engine.

/// Characters as `chars()` counts them; a text no longer in bytes than the limit is within it in characters.
pub fn char_count(text: &str) -> usize {
    if text.is_ascii() {
        text.len()
    } else {
        text.chars().count()
    }
}

/// The byte offset of the `n`th character (or the end).
pub fn byte_at(text: &str, n: usize) -> usize {
    if n >= text.len() {
        return text.len();
    }
    text.char_indices().nth(n).map_or(text.len(), |(i, _)| i)
}

/// A name for comparison: lowercase, without separators (`Web-Search` and `web_search` fold alike).
pub fn fold(name: &str) -> String {
    name.chars().filter(|c| !matches!(c, '_' | '-' | ' ' | '.')).flat_map(char::to_lowercase).collect()
}

/// Edit distance over chars, counting a swap of two neighbours as one edit (optimal string alignment): `qeury` is
/// one edit from `query`, as a typist would see it.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut d: Vec<usize> = (0..(a.len() + 1) * width).map(|k| if k < width { k } else if k % width == 0 { k / width } else { 0 }).collect();
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * width + j] + 1).min(d[i * width + j - 1] + 1).min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = best;
        }
    }
    d[a.len() * width + b.len()]
}

/// The most characters of a name, key or value that a message quotes.
pub const QUOTED_CHARS: usize = 100;
/// The most items of a list (tools, properties, allowed values) that a message names.
pub const LISTED_ITEMS: usize = 20;

/// `text` in double quotes, escaped (a quote or a line break in it cannot end the quote), as a message quotes a
/// name, key or pattern it was sent: at most `QUOTED_CHARS` characters, and what is left out counted
/// (`"aaa…" (399900 more characters)`), so that a long name cannot make a long message.
pub fn quote(text: &str) -> String {
    let cut = byte_at(text, QUOTED_CHARS);
    if cut == text.len() {
        return format!("{text:?}");
    }
    format!("{:?} ({} more characters)", format!("{}…", &text[..cut]), char_count(&text[cut..]))
}

/// Items joined with ", ", at most `LISTED_ITEMS` of them, then how many more there are.
pub fn list<I: IntoIterator<Item = S>, S: AsRef<str>>(items: I) -> String {
    let mut shown = Vec::new();
    let mut more = 0usize;
    for item in items {
        if shown.len() < LISTED_ITEMS {
            shown.push(item.as_ref().to_string());
        } else {
            more += 1;
        }
    }
    let mut text = shown.join(", ");
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text
}
