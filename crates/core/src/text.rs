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

/// The edit distance between `a` and `b` (as chars) when it is at most `limit`, else None: a swap of two
/// neighbours counting as one edit (optimal string alignment), so `qeury` is one edit from `query`, as a typist
/// would see it. Only cells within `limit` of the diagonal are computed, and the work stops once every cell of a
/// row exceeds `limit`: a 100,000-character key costs next to nothing against a 10-character name.
pub fn edit_distance_within(a: &[char], b: &[char], limit: usize) -> Option<usize> {
    if a.len().abs_diff(b.len()) > limit {
        return None;
    }
    let far = limit + 1;
    let width = b.len() + 1;
    // Three rows, rotated each step: the one before the previous (for swaps), the previous, and the current (which
    // starts as row 0).
    let mut rows = vec![vec![far; width]; 3];
    for (j, cell) in rows[2].iter_mut().enumerate().take(limit + 1) {
        *cell = j;
    }
    for i in 1..=a.len() {
        let (lo, hi) = (i.saturating_sub(limit).max(1), (i + limit).min(b.len()));
        rows.rotate_left(1);
        let [before, previous, current] = &mut rows[..] else { unreachable!("three rows") };
        // What this row's cells, and the next rows, read of it beyond the band must be `far`, not an old row's.
        current[lo - 1..=(hi + 1).min(b.len())].fill(far);
        current[0] = if i <= limit { i } else { far };
        let mut row_min = current[0];
        for j in lo..=hi {
            #[cfg(test)]
            tests::CELLS.with(|c| c.set(c.get() + 1));
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (previous[j] + 1).min(current[j - 1] + 1).min(previous[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(before[j - 2] + 1);
            }
            current[j] = best.min(far);
            row_min = row_min.min(current[j]);
        }
        if row_min > limit {
            return None;
        }
    }
    let d = rows[2][b.len()];
    (d <= limit).then_some(d)
}

/// The most characters of a name, key or value that a message quotes.
pub const QUOTED_CHARS: usize = 100;
/// The most items of a list (properties, allowed values) that a message names.
pub const LISTED_ITEMS: usize = 20;

/// How many problems one message lists before it says "and N more".
const MAX_LISTED: usize = 12;
/// How a problem at the root of a returned value is placed.
pub const VALUE: &str = "(the value)";

/// One listed problem: where (`root` when the path is empty), then what.
pub fn problem(path: &str, root: &str, what: &str) -> String {
    format!("- {}: {what}", if path.is_empty() { root } else { path })
}

/// Problems found, as a message lists them: the first `MAX_LISTED` worded, the rest only counted, up to
/// `MAX_COUNTED` (a million wrong items are not each worded, nor all counted, to say "and more").
pub struct Problems {
    listed: Vec<String>,
    total: usize,
    more_than: bool,
}

/// How many problems past the listed ones are counted before the count says "more than".
const MAX_COUNTED: usize = 10_000;

impl Problems {
    /// `items` worded by `word`, only as far as the list goes.
    pub fn of<T>(items: impl Iterator<Item = T>, word: impl FnMut(T) -> String) -> Problems {
        let mut items = items.peekable();
        let listed: Vec<String> = items.by_ref().take(MAX_LISTED).map(word).collect();
        let rest = items.by_ref().take(MAX_COUNTED).count();
        let more_than = items.peek().is_some();
        Problems { total: listed.len() + rest, listed, more_than }
    }
}

/// `what (N problems):`, the problems (at most MAX_LISTED), then the advice.
pub fn worded(what: &str, problems: Problems, advice: &str) -> String {
    let Problems { listed, total, more_than } = problems;
    let shown = listed.len();
    let mut text = listed.join("\n");
    let over = if more_than { "more than " } else { "" };
    if total > shown {
        text.push_str(&format!("\n- … and {over}{} more", total - shown));
    }
    let noun = if total == 1 { "problem" } else { "problems" };
    format!("{what} ({over}{total} {noun}):\n{text}\n{advice}")
}

/// A handler's return value that does not match its tool's `outputSchema`: the tool is at fault, not the call.
pub fn output_mismatch(name: &str, problems: Problems) -> String {
    worded(
        &format!("Tool \"{name}\" returned a value that does not match its outputSchema"),
        problems,
        "The tool is at fault, not the call: do not retry it unchanged; tell the user or do something else.",
    )
}

/// `text` cut to at most `max` characters, with "…" where it was cut.
pub fn clip(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    let cut = byte_at(text, max);
    if cut == text.len() {
        return text.into();
    }
    format!("{}…", &text[..cut]).into()
}

/// `text` in double quotes, escaped (a quote or a line break in it cannot end the quote), as a message quotes a
/// name, key or pattern it was sent: at most `QUOTED_CHARS` characters between the quotes, escapes counted, and
/// what is left out counted (`"aaa…" (399900 more characters)`), so that a long name cannot make a long message.
pub fn quote(text: &str) -> String {
    let mut quoted = String::from("\"");
    let mut shown = 0;
    for (at, c) in text.char_indices() {
        let escaped: String = match c {
            '\'' => c.to_string(), // `escape_debug` escapes it; inside double quotes it need not be
            _ => c.escape_debug().collect(),
        };
        let width = escaped.chars().count();
        if shown + width > QUOTED_CHARS {
            quoted.push_str(&format!("…\" ({} more characters)", char_count(&text[at..])));
            return quoted;
        }
        shown += width;
        quoted.push_str(&escaped);
    }
    quoted.push('"');
    quoted
}

/// Items joined with ", ", at most `max` of them, then how many more there are.
pub fn list<I: IntoIterator<Item = S>, S: AsRef<str>>(items: I, max: usize) -> String {
    let mut shown = Vec::new();
    let mut more = 0usize;
    for item in items {
        if shown.len() < max {
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

#[cfg(test)]
pub(crate) mod tests {

    #[test]
    fn problems_past_the_list_are_counted_not_worded_and_counted_only_so_far() {
        let mut worded_count = 0;
        let few = Problems::of(0..15, |i| {
            worded_count += 1;
            format!("- /{i}: wrong")
        });
        assert_eq!(worded_count, 12, "only what is listed is worded");
        assert!(worded("Bad", few, "Fix it.").starts_with("Bad (15 problems):\n- /0: wrong"));
        let text = worded("Bad", Problems::of(0..1_000_000, |i| format!("- /{i}: wrong")), "Fix it.");
        assert!(text.starts_with("Bad (more than 10012 problems):"), "{text}");
        assert!(text.contains("\n- … and more than 10000 more\nFix it."), "{text}");
        let exact = worded("Bad", Problems::of(0..10_012, |i| format!("- /{i}: wrong")), "Fix it.");
        assert!(exact.starts_with("Bad (10012 problems):") && exact.contains("and 10000 more"), "{exact}");
    }

    use super::*;
    use std::cell::Cell;

    thread_local! {
        /// Distance cells computed on this thread, to bound the work a model's input can cause.
        pub(crate) static CELLS: Cell<u64> = const { Cell::new(0) };
    }

    /// `edit_distance_within` on two strings.
    pub(crate) fn within(a: &str, b: &str, limit: usize) -> Option<usize> {
        edit_distance_within(&a.chars().collect::<Vec<_>>(), &b.chars().collect::<Vec<_>>(), limit)
    }

    /// Cells `f` computes.
    pub(crate) fn cells_of(f: impl FnOnce()) -> u64 {
        let before = CELLS.with(Cell::get);
        f();
        CELLS.with(Cell::get) - before
    }

    #[test]
    fn distances_within_the_limit_are_exact_and_beyond_it_none() {
        assert_eq!(within("kitten", "sitting", 3), Some(3));
        assert_eq!(within("kitten", "sitting", 2), None);
        assert_eq!(within("qeury", "query", 1), Some(1), "a swap is one edit");
        assert_eq!(within("query", "query", 0), Some(0));
        assert_eq!(within("", "ab", 2), Some(2));
        assert_eq!(within("abc", "", 2), None);
        assert_eq!(within("read_fiel", "read_file", 3), Some(1));
        assert_eq!(within("aaaaaaab", "baaaaaaa", 2), Some(2));
    }

    /// The whole matrix, for comparison.
    fn full_distance(a: &str, b: &str) -> usize {
        let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
        let mut d = vec![vec![0; b.len() + 1]; a.len() + 1];
        for (i, row) in d.iter_mut().enumerate() {
            row[0] = i;
        }
        for (j, cell) in d[0].iter_mut().enumerate() {
            *cell = j;
        }
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                d[i][j] = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
                }
            }
        }
        d[a.len()][b.len()]
    }

    #[test]
    fn the_band_agrees_with_the_whole_matrix() {
        let mut rng = fastrand::Rng::with_seed(7);
        let word = |rng: &mut fastrand::Rng| (0..rng.usize(0..9)).map(|_| ['a', 'b', 'c', 'é'][rng.usize(0..4)]).collect::<String>();
        for _ in 0..5_000 {
            let (a, b, limit) = (word(&mut rng), word(&mut rng), rng.usize(0..5));
            let full = full_distance(&a, &b);
            assert_eq!(within(&a, &b, limit), (full <= limit).then_some(full), "{a:?} {b:?} within {limit}");
        }
    }

    #[test]
    fn a_long_text_costs_at_most_the_band_around_the_diagonal() {
        let long = "x".repeat(100_000);
        assert_eq!(cells_of(|| assert_eq!(within(&long, "query", 3), None)), 0, "told apart by length");
        let near = format!("{}y", "x".repeat(99_999));
        let cells = cells_of(|| assert_eq!(within(&long, &near, 2), Some(1)));
        assert!(cells <= 100_000 * 5, "{cells} cells for two 100,000-character texts");
        let other = "y".repeat(100_000);
        assert!(cells_of(|| assert_eq!(within(&long, &other, 2), None)) <= 5 * 3, "stops once a row is past the limit");
    }

    #[test]
    fn quotes_and_lists_are_bounded_and_say_what_they_left_out() {
        assert_eq!(quote("web_search"), "\"web_search\"");
        assert_eq!(quote("a\"b\nc"), "\"a\\\"b\\nc\"", "escaped: the quote cannot end early");
        let long = "é".repeat(QUOTED_CHARS + 5);
        assert_eq!(quote(&long), format!("\"{}…\" (5 more characters)", "é".repeat(QUOTED_CHARS)));
        let controls = "\u{1b}".repeat(QUOTED_CHARS);
        assert!(char_count(&quote(&controls)) <= QUOTED_CHARS + 30, "escapes count against the bound: {}", quote(&controls));
        assert_eq!(quote("it's"), "\"it's\"");
        assert_eq!(list(["a", "b", "c"], 2), "a, b and 1 more");
        assert_eq!(list(["a", "b"], 2), "a, b");
        assert_eq!(clip("abcdef", 3), "abc…");
        assert_eq!(clip("abc", 3), "abc");
    }
}
