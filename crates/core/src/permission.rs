//! Station 5: may this call run in this context? Kept apart from validation: "not allowed" never reads as "invalid".

use std::collections::HashMap;

use serde::Deserialize;

use crate::registry::Tool;
use crate::result::ErrorKind;

/// The parts of an execution context the permission station reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// When present, only these tools (names or `*` globs) may run.
    #[serde(default)]
    pub allowed_tools: Option<Vec<String>>,
    #[serde(default)]
    pub denied_tools: Vec<String>,
    /// Tools that need approval and are approved for this execution.
    #[serde(default)]
    pub approved_tools: Vec<String>,
    /// The context's plain fields (`sessionId`, `userId`, `tenantId`, …) that keys are made of.
    #[serde(default)]
    pub fields: HashMap<String, String>,
}

impl Policy {
    pub fn from_json(json: &str) -> Result<Self, String> {
        if json.is_empty() {
            return Ok(Policy::default());
        }
        serde_json::from_str(json).map_err(|e| format!("invalid execution context: {e}"))
    }

    /// Whether the context may use this tool at all: what listings and suggestions may name.
    pub fn visible(&self, tool: &Tool) -> bool {
        let name = tool.spec.name.as_str();
        let allowed = self.allowed_tools.as_ref().is_none_or(|list| matches_any(list, name));
        allowed && !matches_any(&self.denied_tools, name)
    }

    pub fn permit(&self, tool: &Tool) -> Result<&'static str, (ErrorKind, String)> {
        let name = tool.spec.name.as_str();
        if !self.visible(tool) {
            return Err((
                ErrorKind::PermissionDenied,
                format!(
                    "Tool \"{name}\" is not allowed in this context. Do not call it again; \
                     continue with the tools you may use, or tell the user what you could not do."
                ),
            ));
        }
        if tool.spec.needs_approval {
            if matches_any(&self.approved_tools, name) {
                return Ok("approved");
            }
            return Err((
                ErrorKind::ApprovalDenied,
                format!(
                    "Tool \"{name}\" is not allowed without approval, and this call was not approved. \
                     Do not retry it unchanged; ask the user to approve it."
                ),
            ));
        }
        Ok("allowed")
    }
}

fn matches_any(patterns: &[String], name: &str) -> bool {
    patterns.iter().any(|p| glob(p, name))
}

/// `*` matches any run of characters; everything else matches itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else { return false };
    let tail: Vec<&str> = parts.collect();
    let Some((last, middle)) = tail.split_last() else { return rest.is_empty() };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn glob_matches_stars_anywhere() {
        assert!(glob("read_file", "read_file"));
        assert!(!glob("read_file", "read_files"));
        assert!(glob("mcp__*", "mcp__github__search"));
        assert!(glob("*_file", "write_file"));
        assert!(glob("a*b*c", "a_x_b_y_c"));
        assert!(!glob("a*b*c", "a_x_c_y_b"));
        assert!(glob("*", "anything"));
        assert!(!glob("ab*ba", "aba"));
    }
}
