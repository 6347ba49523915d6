//! Station 12: no flood into the model's context. Limits count characters, and no cut splits one.

use crate::result::{failure_output, ToolResult};

pub fn shape(result: &mut ToolResult, max_output_chars: usize, max_error_chars: usize) {
    if result.success {
        let total = result.output.chars().count();
        if total > max_output_chars {
            let head = &result.output[..byte_at(&result.output, max_output_chars)];
            result.output = format!(
                "{head}\n… [output truncated: showing the first {max_output_chars} of {total} characters; \
                 ask for a narrower result to see the rest]"
            );
            result.truncated = true;
            result.metadata.original_chars = Some(total);
        }
    } else if let (Some(error), Some(kind)) = (&result.error, result.error_kind) {
        let total = error.chars().count();
        if total > max_error_chars {
            let cut = head_and_tail(error, total, max_error_chars);
            result.output = failure_output(kind, &cut);
            result.error = Some(cut);
            result.truncated = true;
            result.metadata.original_chars = Some(total);
        }
    }
}

/// A failure's text keeps its beginning (what failed) and its end (usually the cause).
fn head_and_tail(text: &str, total: usize, keep: usize) -> String {
    let head_chars = keep / 2;
    let tail_chars = keep - head_chars;
    let head = &text[..byte_at(text, head_chars)];
    let tail = &text[byte_at(text, total - tail_chars)..];
    format!("{head}\n… [{} characters omitted] …\n{tail}", total - keep)
}

/// The byte offset of the `n`th character (or the end).
fn byte_at(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::ErrorKind;

    #[test]
    fn success_keeps_the_head_and_says_how_much_there_was() {
        let mut r = ToolResult::success("c".into(), "t".into(), "é".repeat(50));
        shape(&mut r, 10, 100);
        assert!(r.truncated);
        assert!(r.output.starts_with(&"é".repeat(10)), "cut between characters, not inside one");
        assert!(r.output.contains("first 10 of 50 characters"));
        assert_eq!(r.metadata.original_chars, Some(50));
    }

    #[test]
    fn failure_keeps_head_and_tail() {
        let text = format!("START{}END", "x".repeat(100));
        let mut r = ToolResult::failure("c".into(), "t".into(), ErrorKind::HandlerError, text, false);
        shape(&mut r, 1000, 20);
        let error = r.error.clone().unwrap();
        assert!(error.starts_with("STARTxxxxx\n… [88 characters omitted] …\nxxxxxxxEND"), "{error}");
        assert!(r.output.ends_with("END"));
        assert!(r.truncated);
    }

    #[test]
    fn short_text_is_untouched() {
        let mut r = ToolResult::success("c".into(), "t".into(), "short".into());
        shape(&mut r, 5, 5);
        assert_eq!(r.output, "short");
        assert!(!r.truncated);
    }
}
