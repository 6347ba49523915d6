//! Station 1: find the tool a call names, or say which names exist (only those the context may use).

use std::sync::Arc;

use crate::registry::{Registry, Tool};
use crate::text::{edit_distance_within, fold, list, quote};

/// The most tool names an unknown-tool error lists (the provider was sent the whole list with the definitions).
const LISTED_TOOLS: usize = 50;

/// What the context may see of the registry: the tools it may use, and those it may not even know of (the
/// permission station says which).
pub struct Sight<'a> {
    pub visible: &'a dyn Fn(&Tool) -> bool,
    pub conceals: &'a dyn Fn(&Tool) -> bool,
}

/// `redact`: the called name as the error may quote it (redacted whole before it is cut). A tool the context may
/// not know of is not found: a refusal that named it would tell the model it exists.
pub fn lookup(registry: &Registry, sight: &Sight<'_>, name: &str, redact: impl Fn(&str) -> String) -> Result<Arc<Tool>, String> {
    match registry.get(name) {
        Some(tool) if !(sight.conceals)(tool) => Ok(tool.clone()),
        _ => Err(unknown(registry, sight, name, redact)),
    }
}

/// The error for a name no tool this context may use has.
fn unknown(registry: &Registry, sight: &Sight<'_>, name: &str, redact: impl Fn(&str) -> String) -> String {
    let visible: Vec<&str> = registry.iter().filter(|t| (sight.visible)(t)).map(|t| t.spec.name.as_str()).collect();
    let called = if name.is_empty() { "The call names no tool.".to_string() } else { format!("There is no tool named {}.", quote(&redact(name))) };
    if visible.is_empty() {
        return format!("{called} No tools are available here; answer without calling a tool.");
    }
    let hint = match closest(name, &visible) {
        Some(best) => format!(" Did you mean \"{best}\"?"),
        None => String::new(),
    };
    format!("{called}{hint} Available tools: {}. Call one of these by its exact name.", list(&visible, LISTED_TOOLS))
}

/// The one tool this context may use whose name is the called name ignoring case and separators
/// (`web-search`, `WebSearch` → `web_search`); None when there is none or more than one.
pub fn correct(registry: &Registry, sight: &Sight<'_>, name: &str) -> Option<Arc<Tool>> {
    let wanted = fold(name);
    let mut matches = registry.iter().filter(|t| (sight.visible)(t) && fold(&t.spec.name) == wanted);
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
    let wanted: Vec<char> = wanted.chars().collect();
    let limit = (wanted.len() / 3).clamp(1, 3);
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let Some(d) = edit_distance_within(&wanted, &fold(c).chars().collect::<Vec<_>>(), limit) else { continue };
        if best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_of_any_length_costs_a_bounded_search() {
        let names: Vec<String> = (0..500).map(|i| format!("tool_number_{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let long = "x".repeat(1_000);
        let cells = crate::text::tests::cells_of(|| assert_eq!(closest(&long, &names), None));
        assert_eq!(cells, 0, "a name too long to be a near miss is told apart by its length");
        let near = crate::text::tests::cells_of(|| assert_eq!(closest("tool_numbr_77", &names), Some("tool_number_77")));
        assert!(near <= 500 * 12 * 7, "{near} cells: only the band around the diagonal");
    }

    #[test]
    fn suggests_by_separators_case_and_spelling() {
        let names = ["web_search", "read_file", "write_file"];
        assert_eq!(closest("web-search", &names), Some("web_search"));
        assert_eq!(closest("WebSearch", &names), Some("web_search"));
        assert_eq!(closest("read_fiel", &names), Some("read_file"));
        assert_eq!(closest("deploy", &names), None);
    }
}
