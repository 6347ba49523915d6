//! Station 1: find the tool a call names, or say which names exist (only those the context may use).

use std::sync::Arc;

use crate::permission::Policy;
use crate::registry::{Registry, Tool};

pub fn lookup(registry: &Registry, policy: &Policy, name: &str) -> Result<Arc<Tool>, String> {
    if let Some(tool) = registry.get(name) {
        return Ok(tool.clone());
    }
    let visible: Vec<&str> = registry.iter().filter(|t| policy.visible(t)).map(|t| t.spec.name.as_str()).collect();
    let called = if name.is_empty() { "The call names no tool.".to_string() } else { format!("There is no tool named \"{name}\".") };
    if visible.is_empty() {
        return Err(format!("{called} No tools are available here; answer without calling a tool."));
    }
    let hint = match closest(name, &visible) {
        Some(best) => format!(" Did you mean \"{best}\"?"),
        None => String::new(),
    };
    Err(format!("{called}{hint} Available tools: {}. Call one of these by its exact name.", visible.join(", ")))
}

/// The one name a model most plausibly meant: same letters ignoring case and separators, or a close spelling.
pub fn closest<'a>(name: &str, candidates: &[&'a str]) -> Option<&'a str> {
    if name.is_empty() {
        return None;
    }
    let wanted = fold(name);
    if let Some(same) = candidates.iter().find(|c| fold(c) == wanted) {
        return Some(same);
    }
    let limit = (wanted.chars().count() / 3).clamp(1, 3);
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let d = edit_distance(&wanted, &fold(c));
        if d <= limit && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

fn fold(name: &str) -> String {
    name.chars().filter(|c| !matches!(c, '_' | '-' | ' ' | '.')).flat_map(char::to_lowercase).collect()
}

/// Levenshtein distance over chars.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_by_separators_case_and_spelling() {
        let names = ["web_search", "read_file", "write_file"];
        assert_eq!(closest("web-search", &names), Some("web_search"));
        assert_eq!(closest("WebSearch", &names), Some("web_search"));
        assert_eq!(closest("read_fiel", &names), Some("read_file"));
        assert_eq!(closest("deploy", &names), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
