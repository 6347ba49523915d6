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

/// The one tool this context may use whose name is the called name ignoring case and separators
/// (`web-search`, `WebSearch` → `web_search`); None when there is none or more than one.
pub fn correct(registry: &Registry, policy: &Policy, name: &str) -> Option<Arc<Tool>> {
    let wanted = fold(name);
    let mut matches = registry.iter().filter(|t| policy.visible(t) && fold(&t.spec.name) == wanted);
    let only = matches.next()?;
    matches.next().is_none().then(|| only.clone())
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
        assert_eq!(edit_distance("qeury", "query"), 1, "a swap is one edit");
    }
}
