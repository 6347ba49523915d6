//! Station 1: find the tool a call names, or say which names exist (only those the context may use).

use std::sync::Arc;

use crate::permission::Policy;
use crate::registry::{Registry, Tool};
use crate::text::{edit_distance, fold};

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
