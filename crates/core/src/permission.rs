//! Station 5: may this call run in this context? Kept apart from validation: "not allowed" never reads as "invalid".
//!
//! The decision, in this order, with the first match deciding:
//! 1. the context's lists and risk ceiling (`allowedTools`, `deniedTools`, `maxRisk`): a tool outside them is not
//!    even visible to the context, and is answered as a tool that does not exist (lookup's);
//! 2. `deny` rules (the executor's and the context's): deny always wins. A rule without argument patterns hides its
//!    tools as the lists do, and without a reason they are answered as tools that do not exist too; with a reason,
//!    a call is refused with it, before its arguments are read;
//! 3. `ask` rules (and `needsApproval` tools): the approval callback decides, unless the mode is `acceptAll`;
//! 4. `allow` rules;
//! 5. the mode, when no rule matched: `default` asks for tools above `read`, `acceptAll` allows, `readOnly` allows
//!    only `read` tools, `denyAll` refuses. With no mode set anywhere, such a call runs: permissions are opt-in.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use crate::json;
use crate::budget::BudgetOptions;
use crate::fields::Fields;
use crate::keys::SEP;
use crate::ops::Op;
use crate::tool::{Risk, ToolInfo};
use crate::result::ErrorKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Mode {
    Default,
    AcceptAll,
    ReadOnly,
    DenyAll,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Deny,
    Ask,
    Allow,
}

impl Action {
    fn as_str(self) -> &'static str {
        match self {
            Action::Deny => "deny",
            Action::Ask => "ask",
            Action::Allow => "allow",
        }
    }
}

/// A rule as declared: a tool name pattern, or `{ tool, args?, reason? }` where `args` maps argument names to
/// patterns (`*` matches any run of characters).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum DeclaredRule {
    Tool(String),
    Full {
        tool: String,
        #[serde(default)]
        args: HashMap<String, String>,
        #[serde(default)]
        reason: Option<String>,
    },
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DeclaredPermissions {
    #[serde(default)]
    mode: Option<Mode>,
    #[serde(default)]
    deny: Vec<DeclaredRule>,
    #[serde(default)]
    ask: Vec<DeclaredRule>,
    #[serde(default)]
    allow: Vec<DeclaredRule>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub action: Action,
    pub tool: String,
    /// Argument name → pattern, sorted by name (so that the rule's text is stable).
    pub args: Vec<(String, String)>,
    pub reason: Option<String>,
    /// `executor` or `context`.
    pub source: &'static str,
}

impl Rule {
    /// The rule as the result and the trace name it: `deny shell(command: rm *)`.
    pub fn describe(&self) -> String {
        let args = if self.args.is_empty() {
            String::new()
        } else {
            format!("({})", self.args.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", "))
        };
        format!("{} {}{args}", self.action.as_str(), self.tool)
    }

    fn matches(&self, tool: &str, args: Option<&Value>) -> bool {
        if !glob(&self.tool, tool) {
            return false;
        }
        self.args.iter().all(|(name, pattern)| {
            let value = args.and_then(|a| a.get(name));
            let text = match value {
                Some(Value::String(s)) => s.clone(),
                Some(v @ (Value::Number(_) | Value::Bool(_))) => v.to_string(),
                _ => return false,
            };
            // Runs of whitespace count as one space, so `rm  -rf` and ` rm -rf` meet `rm *` like `rm -rf` does.
            glob(pattern, &text.split_whitespace().collect::<Vec<_>>().join(" "))
        })
    }
}

/// Rules and a mode, from executor options or an execution context.
#[derive(Debug, Clone, Default)]
pub struct Permissions {
    pub mode: Option<Mode>,
    /// Deny rules first, then ask, then allow: the order they are looked at.
    pub rules: Vec<Rule>,
}

impl Permissions {
    pub fn parse(value: &Value, source: &'static str) -> Result<Self, String> {
        let declared: DeclaredPermissions = serde_json::from_value(value.clone()).map_err(|e| {
            format!("permissions must be {{ mode?, deny?, ask?, allow? }} with rules like 'shell' or {{ tool: 'shell', args: {{ command: 'rm *' }} }} ({e})")
        })?;
        let mut rules = Vec::new();
        for (action, list) in [(Action::Deny, declared.deny), (Action::Ask, declared.ask), (Action::Allow, declared.allow)] {
            for rule in list {
                let (tool, args, reason) = match rule {
                    DeclaredRule::Tool(tool) => (tool, HashMap::new(), None),
                    DeclaredRule::Full { tool, args, reason } => (tool, args, reason),
                };
                if tool.is_empty() {
                    return Err("permissions: a rule needs a tool name or pattern".into());
                }
                let mut args: Vec<(String, String)> = args.into_iter().collect();
                args.sort();
                rules.push(Rule { action, tool, args, reason, source });
            }
        }
        Ok(Permissions { mode: declared.mode, rules })
    }
}

/// The parts of an execution context the permission station reads, with the executor's permissions under it.
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
    /// Tools above this risk are not visible to the context.
    #[serde(default)]
    pub max_risk: Option<Risk>,
    /// The context's `permissions` as sent; `from_json` parses them into `own`.
    #[serde(default)]
    pub permissions: Option<Value>,
    /// The context's own rules and mode (parsed from `permissions`).
    #[serde(skip)]
    pub own: Permissions,
    /// The executor's rules and mode.
    #[serde(skip)]
    pub executor: Arc<Permissions>,
    /// The context's plain fields (`sessionId`, `userId`, `tenantId`, …) that keys are made of.
    #[serde(default)]
    pub fields: Fields,
    /// The context's budget: limits on this holder's calls, on top of the executor's and each tool's.
    #[serde(default)]
    pub budget: Option<BudgetOptions>,
}

/// What decided a call no rule, mode or declaration had anything to say about.
pub const NOTHING_APPLIES: &str = "no rule or mode applies";

/// What the permission station decided about a call.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Runs; how it was decided (`allowed`, `approved`, or the rule / mode), for the trace.
    Allow { how: &'static str, by: String },
    Deny { kind: ErrorKind, error: String, by: String },
    /// The approval callback decides; the rule that asked.
    Ask { by: String, reason: Option<String> },
}

impl Policy {
    pub fn from_json(json: &str) -> Result<Self, String> {
        if json.is_empty() {
            return Ok(Policy::default());
        }
        let (mut policy, _): (Policy, _) = json::from_str_mended(json).map_err(|e| format!("invalid execution context: {e}"))?;
        if let Some(value) = policy.permissions.take() {
            policy.own = Permissions::parse(&value, "context").map_err(|e| format!("context.{e}"))?;
        }
        if let Some(budget) = &policy.budget {
            budget.check("context.")?;
        }
        Ok(policy)
    }

    /// The context's mode, else the executor's; None when neither sets one.
    fn mode(&self) -> Option<Mode> {
        self.own.mode.or(self.executor.mode)
    }

    /// Rules in the order they are looked at: every deny (executor's, then context's), then every ask, then allow.
    fn rules(&self) -> impl Iterator<Item = &Rule> {
        [Action::Deny, Action::Ask, Action::Allow].into_iter().flat_map(move |action| {
            self.executor.rules.iter().chain(&self.own.rules).filter(move |r| r.action == action)
        })
    }

    /// Whether the context may use this tool at all: what listings, suggestions and definitions may name. A deny
    /// rule with no argument patterns hides its tools too.
    pub fn visible(&self, tool: &impl ToolInfo) -> bool {
        self.hidden_by(tool).is_none()
    }

    /// Whether the context may not even know the tool is there: hidden, and by nothing that gives a reason (a deny
    /// rule with a reason is the application speaking to the model, and is refused with it).
    pub fn conceals(&self, tool: &impl ToolInfo) -> bool {
        matches!(self.hidden_by(tool), Some((_, None)))
    }

    /// What hides the tool, and the reason a deny rule that does gives.
    fn hidden_by(&self, tool: &impl ToolInfo) -> Option<(String, Option<&str>)> {
        let name = tool.name();
        if self.allowed_tools.as_ref().is_some_and(|list| !matches_any(list, name)) {
            return Some(("the context's allowedTools".into(), None));
        }
        if matches_any(&self.denied_tools, name) {
            return Some(("the context's deniedTools".into(), None));
        }
        if let Some(max) = self.max_risk.filter(|max| tool.risk() > *max) {
            return Some((format!("the context's maxRisk ({}; the tool's risk is {})", max.as_str(), tool.risk().as_str()), None));
        }
        let rule = self.rules().find(|r| r.action == Action::Deny && r.args.is_empty() && r.matches(name, None))?;
        Some((format!("the rule {} ({} permissions)", rule.describe(), rule.source), rule.reason.as_deref()))
    }

    /// The decision for a call; `args` are its validated arguments, `remembered` whether the session approved
    /// this rule for this tool before.
    pub fn decide(&self, tool: &impl ToolInfo, args: &Value, remembered: impl Fn(&str) -> bool) -> Decision {
        let name = tool.name();
        let denied = |by: String, reason: Option<&str>| {
            let why = reason.map_or(String::new(), |r| format!(" ({r})"));
            Decision::Deny {
                kind: ErrorKind::PermissionDenied,
                error: format!(
                    "Tool \"{name}\" is not allowed here: {by}{why}. Do not call it again this way; continue with what you \
                     may do, or tell the user what you could not do."
                ),
                by,
            }
        };
        if let Some((by, reason)) = self.hidden_by(tool) {
            return denied(format!("refused by {by}"), reason);
        }
        let mode = self.mode();
        if let Some(rule) = self.rules().find(|r| r.matches(name, Some(args))) {
            let by = format!("{} ({} permissions)", rule.describe(), rule.source);
            return match rule.action {
                Action::Deny => denied(format!("refused by the rule {by}"), rule.reason.as_deref()),
                Action::Ask if mode == Some(Mode::AcceptAll) => Decision::Allow { how: "accepted", by: format!("{by}, accepted by the mode acceptAll") },
                Action::Ask => self.ask(tool, by, rule.reason.clone(), &remembered),
                Action::Allow => Decision::Allow { how: "allowed", by },
            };
        }
        if tool.needs_approval() && mode != Some(Mode::AcceptAll) {
            return self.ask(tool, "needsApproval (the tool's declaration)".into(), None, &remembered);
        }
        match mode {
            None => Decision::Allow { how: "allowed", by: NOTHING_APPLIES.into() },
            Some(Mode::AcceptAll) => Decision::Allow { how: "allowed", by: "the mode acceptAll".into() },
            Some(Mode::DenyAll) => denied("refused by the mode denyAll (only tools a rule allows may run)".into(), None),
            Some(Mode::ReadOnly) if tool.risk() > Risk::Read => {
                denied(format!("refused by the mode readOnly (the tool's risk is {})", tool.risk().as_str()), None)
            }
            Some(Mode::ReadOnly) => Decision::Allow { how: "allowed", by: "the mode readOnly (a read tool)".into() },
            Some(Mode::Default) if tool.risk() > Risk::Read => {
                self.ask(tool, format!("the mode default (the tool's risk is {})", tool.risk().as_str()), None, &remembered)
            }
            Some(Mode::Default) => Decision::Allow { how: "allowed", by: "the mode default (a read tool)".into() },
        }
    }

    /// An ask the context or the session already answered is not asked again.
    fn ask(&self, tool: &impl ToolInfo, by: String, reason: Option<String>, remembered: &impl Fn(&str) -> bool) -> Decision {
        if matches_any(&self.approved_tools, tool.name()) {
            return Decision::Allow { how: "approved", by: format!("{by}, approved by the context's approvedTools") };
        }
        if remembered(&by) {
            return Decision::Allow { how: "approved", by: format!("{by}, approved earlier in this session") };
        }
        Decision::Ask { by, reason }
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

/// Whether a session approved a rule before, asked of a store shared between processes (this process keeps the
/// approvals it saw itself).
pub fn remembered_op<'a>(session: &'a str, tool: &str, by: &str) -> Op<'a> {
    Op::Remembered { session: session.into(), field: remembered_field(tool, by).into() }
}

/// An approval given "for this session", for the other processes to see.
pub fn remember_op<'a>(session: &'a str, tool: &str, by: &str, ttl_ms: u64) -> Op<'a> {
    Op::Remember { session: session.into(), field: remembered_field(tool, by).into(), ttl_ms }
}

/// A remembered approval's field in its session: the tool and the rule that asked.
fn remembered_field(tool: &str, by: &str) -> String {
    format!("{tool}{SEP}{by}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    #[test]
    fn argument_patterns_see_through_spacing() {
        let p = Permissions::parse(&json!({ "deny": [{ "tool": "shell", "args": { "command": "rm *" } }] }), "executor").unwrap();
        let rule = &p.rules[0];
        assert_eq!(rule.describe(), "deny shell(command: rm *)");
        for command in ["rm -rf /", "  rm   -rf /", "rm\t-rf /"] {
            assert!(rule.matches("shell", Some(&json!({ "command": command }))), "{command}");
        }
        assert!(!rule.matches("shell", Some(&json!({ "command": "ls" }))));
        assert!(!rule.matches("shell", Some(&json!({}))), "a rule on an argument the call lacks does not match");
    }

    #[test]
    fn declarations_are_checked() {
        assert!(Permissions::parse(&json!({ "mode": "yolo" }), "executor").is_err());
        assert!(Permissions::parse(&json!({ "deny": [{ "args": {} }] }), "executor").is_err());
        assert!(Permissions::parse(&json!({ "deny": [""] }), "executor").is_err());
        assert!(Permissions::parse(&json!({ "allow": ["*"], "mode": "denyAll" }), "executor").is_ok());
    }
}
