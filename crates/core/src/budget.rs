//! Station 8, first: budgets. An agent stuck in a loop is stopped by the runtime, not by the bill: a call past a
//! budget is refused before it runs (`budget_exceeded`), saying which budget and how much of it was used. Budgets
//! are declared on the executor (all calls), a tool (its calls) or the context (all calls of this holder), and
//! count calls that run (a cache hit or a refused call costs nothing):
//! - per turn: calls of one `execute`, counted in the turn;
//! - per holder (the values of the context fields `by` names; the session by default), kept in the store: calls,
//!   calls per fixed time window, and cost, where each tool declares what a call costs.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::fields::Fields;
use crate::ops::{Op, Reply, Text, Word, MAX_WAIT};
use crate::timer::seconds;
#[cfg(test)]
use crate::timer::window_of;
use crate::result::{BudgetNote, ErrorKind, ToolResult};
use crate::text::{clip, QUOTED_CHARS};

/// A budget, on the executor, a tool or the context: calls per turn, calls and cost per holder (the values of the
/// context fields `by` names; the session by default), calls per time window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BudgetOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_calls_per_turn: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_calls: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_calls_per_window: Option<WindowBudget>,
    /// The most the holder's calls may cost together (each tool declares what a call costs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
    /// The context fields whose values name whose budget it is (a name or a list of names); `sessionId` when not
    /// said.
    #[serde(default = "session_only", deserialize_with = "one_or_many")]
    pub by: Vec<String>,
}

fn session_only() -> Vec<String> {
    vec!["sessionId".to_string()]
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(deserializer)? {
        OneOrMany::One(field) => vec![field],
        OneOrMany::Many(fields) => fields,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WindowBudget {
    pub calls: u64,
    pub window_ms: u64,
}

impl BudgetOptions {
    /// `what`: where it was declared, for the message.
    pub fn check(&self, what: &str) -> Result<(), String> {
        let nothing = self.max_calls_per_turn.is_none() && self.max_calls.is_none() && self.max_calls_per_window.is_none() && self.max_cost.is_none();
        if nothing {
            return Err(format!("{what}budget needs at least one of maxCallsPerTurn, maxCalls, maxCallsPerWindow: {{ calls, windowMs }} or maxCost"));
        }
        let counts = [("maxCallsPerTurn", self.max_calls_per_turn), ("maxCalls", self.max_calls)];
        let window = self.max_calls_per_window.map_or([None, None], |w| [Some(w.calls), Some(w.window_ms)]);
        for (name, value) in counts.into_iter().chain([("maxCallsPerWindow.calls", window[0]), ("maxCallsPerWindow.windowMs", window[1])]) {
            if value == Some(0) {
                return Err(format!("{what}budget.{name} must be a positive number"));
            }
        }
        if self.max_cost.is_some_and(|c| !(c >= 0.0 && c.is_finite())) {
            return Err(format!("{what}budget.maxCost must be a finite number of at least 0"));
        }
        if self.by.is_empty() || self.by.iter().any(String::is_empty) {
            return Err(format!("{what}budget.by must name one or more context fields, such as 'sessionId' or ['tenantId', 'userId']"));
        }
        Ok(())
    }
}

/// A budget limit a call adds to in the store: its place among the call's limits, its key, what the call adds, the
/// limit, and its window.
#[derive(Debug, Clone, PartialEq)]
pub struct Spending {
    pub at: usize,
    pub key: String,
    pub amount: f64,
    pub limit: f64,
    pub window: Option<Duration>,
}

impl Spending {
    /// What the budget asks the store: to add the call's amount unless that passes the limit (a counter without a
    /// window lasts `ttl_ms` after its last spending).
    pub fn op(&self, ttl_ms: u64) -> Op<'_> {
        let window_ms = self.window.map(|w| w.as_millis().min(u128::from(u64::MAX)) as u64);
        Op::Spend { key: self.key.as_str().into(), amount: self.amount, limit: self.limit, ttl_ms, window_ms }
    }
}

/// What a call that never ran spent, given back in the window it was spent in.
pub fn unspend<'a>(key: impl Into<Text<'a>>, amount: f64, window: u64) -> Op<'a> {
    Op::Unspend { key: key.into(), amount, window }
}

/// A spending as the counter answered: made (in its window), refused (what was used, and when a window starts
/// over), or failed.
#[derive(Debug, Clone, PartialEq)]
pub enum Spent {
    Made(u64),
    Over(f64, Option<Duration>),
    Failed(String),
}

impl Spent {
    pub fn of(reply: &Reply, windowed: bool) -> Spent {
        match (&reply.error, reply.spent) {
            (Some(e), _) => Spent::Failed(e.clone()),
            (None, Some(Word::Ok)) => Spent::Made(reply.window.unwrap_or(0)),
            (None, Some(Word::Over)) => {
                let resets = windowed.then(|| reply.exact_wait.unwrap_or_else(|| seconds(reply.wait_ms.unwrap_or(0.0).max(0.0) / 1000.0).min(MAX_WAIT)));
                Spent::Over(reply.used.filter(|u| u.is_finite()).unwrap_or(0.0), resets)
            }
            (None, _) => Spent::Failed("the store's answer to a budget spending could not be read".into()),
        }
    }
}

/// Keys are made of names and context values joined by a character neither holds.
pub const SEP: char = '\u{1}';

/// Where a budget was declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Executor,
    Tool,
    Context,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Executor => "executor",
            Source::Tool => "tool",
            Source::Context => "context",
        }
    }
}

/// Which of a budget's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    CallsPerTurn,
    Calls,
    CallsPerWindow,
    Cost,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::CallsPerTurn => "maxCallsPerTurn",
            Kind::Calls => "maxCalls",
            Kind::CallsPerWindow => "maxCallsPerWindow",
            Kind::Cost => "maxCost",
        }
    }
}

/// What one call of a tool costs against cost budgets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cost {
    Fixed(f64),
    /// The host computes it from the call's arguments (the tool's cost function).
    Host,
}

impl Cost {
    pub fn parse(value: Option<&Value>) -> Result<Self, String> {
        match value {
            None => Ok(Cost::Fixed(0.0)),
            Some(Value::String(s)) if s == "host" => Ok(Cost::Host),
            Some(v) => match v.as_f64() {
                Some(n) if n >= 0.0 && n.is_finite() => Ok(Cost::Fixed(n)),
                _ => Err("cost must be a number of at least 0, or a function of the arguments that returns one".into()),
            },
        }
    }
}

/// One limit a tool's calls are held to, as declared: what counts under it (a call, or its cost), against what limit,
/// and for whom (the `by` fields of the context). Worked out when the tool is registered; a call's key in the store
/// is then written from the context's values (`key_into`), with nothing allocated on the way.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    pub kind: Kind,
    pub source: Source,
    /// What counts: the kind (with its window) and the scope (`*` or the tool's name). A per-turn limit's counter in
    /// the turn is this alone.
    pub prefix: String,
    pub by: Vec<String>,
    /// What a call adds: one call, or the tool's fixed cost.
    pub amount: f64,
    pub limit: f64,
    pub window: Option<Duration>,
    /// Only calls of this tool count (a tool's budget).
    pub tool_only: bool,
}

impl Limit {
    pub fn per_turn(&self) -> bool {
        self.kind == Kind::CallsPerTurn
    }

    /// Writes its key in the store for a context's `fields` into `key`: the prefix, then each `by` field and its
    /// value ("" when the context has none). A value is the caller's text and may hold the separator, so its
    /// length comes first: two holders meet only when every value is the same.
    pub fn key_into(&self, fields: &Fields, key: &mut String) {
        use std::fmt::Write;
        key.clear();
        key.push_str(&self.prefix);
        for field in &self.by {
            let value = fields.get(field).map_or("", String::as_str);
            let _ = write!(key, "{SEP}{field}={}:{value}", value.len());
        }
    }

    /// What a call adds to it: one call, or the call's cost (`cost`, when its tool's function said; else the tool's
    /// fixed cost).
    pub fn amount(&self, cost: Option<f64>) -> f64 {
        match (self.kind, cost) {
            (Kind::Cost, Some(cost)) => cost,
            _ => self.amount,
        }
    }
}

/// Whether any of `budgets` has a cost limit (then a tool whose cost the host computes asks for it).
pub fn counts_cost<'a>(budgets: impl IntoIterator<Item = Option<&'a BudgetOptions>>) -> bool {
    budgets.into_iter().flatten().any(|b| b.max_cost.is_some())
}

/// Every limit a call of `tool` is held to, from the executor's, the tool's and the context's budgets, the per-turn
/// ones first; `cost`: what a call of the tool costs when it says a fixed amount. Two budgets counting the same thing
/// for the same holders (the executor's and the context's, both by session) share one limit, the lower one.
pub fn limits(budgets: [(Source, Option<&BudgetOptions>); 3], tool: &str, cost: f64) -> Vec<Limit> {
    let mut limits: Vec<Limit> = Vec::new();
    for (source, budget) in budgets {
        let Some(budget) = budget else { continue };
        let tool_only = source == Source::Tool;
        let scope = if tool_only { tool } else { "*" };
        let mut add = |kind: Kind, what: &str, amount: f64, limit: f64, window: Option<Duration>| {
            let by = if kind == Kind::CallsPerTurn { Vec::new() } else { budget.by.clone() };
            let prefix = if kind == Kind::CallsPerTurn { scope.to_string() } else { format!("{what}{SEP}{scope}") };
            match limits.iter_mut().find(|l| l.kind == kind && l.prefix == prefix && l.by == by) {
                Some(same) if limit < same.limit => (same.limit, same.source) = (limit, source),
                Some(_) => {}
                None => limits.push(Limit { kind, source, prefix, by, amount, limit, window, tool_only }),
            }
        };
        if let Some(n) = budget.max_calls_per_turn {
            add(Kind::CallsPerTurn, "", 1.0, n as f64, None);
        }
        if let Some(n) = budget.max_calls {
            add(Kind::Calls, "calls", 1.0, n as f64, None);
        }
        if let Some(w) = budget.max_calls_per_window {
            add(Kind::CallsPerWindow, &format!("window{}", w.window_ms), 1.0, w.calls as f64, Some(Duration::from_millis(w.window_ms)));
        }
        if let Some(max) = budget.max_cost {
            add(Kind::Cost, "cost", cost, max, None);
        }
    }
    limits.sort_by_key(|limit| !limit.per_turn());
    limits
}

/// A budget counter's key read back (see `Limit::key_into`): what it counts (`calls`, `cost`, `window<ms>`), its
/// scope (a tool, or `*`), and each holder field with its value. None for a key not written so.
pub fn read_key(key: &str) -> Option<(&str, &str, Vec<(&str, &str)>)> {
    let (what, rest) = key.split_once(SEP)?;
    let (scope, mut rest) = rest.split_once(SEP).unwrap_or((rest, ""));
    let mut holder = Vec::new();
    while !rest.is_empty() {
        let (field, after) = rest.split_once('=')?;
        let (len, after) = after.split_once(':')?;
        let value = after.get(..len.parse::<usize>().ok()?)?;
        holder.push((field, value));
        rest = after[value.len()..].strip_prefix(SEP).unwrap_or(&after[value.len()..]);
    }
    Some((what, scope, holder))
}

/// Whose budget it is: each of its `by` fields and the context's value ("" when the context has none).
pub fn holder(by: &[String], fields: &Fields) -> Vec<(String, String)> {
    by.iter().map(|f| (f.clone(), fields.get(f).cloned().unwrap_or_default())).collect()
}

/// What a call of a tool costs when it says a fixed amount (0 when its function says, or it says nothing).
pub fn fixed_cost(cost: Cost) -> f64 {
    match cost {
        Cost::Fixed(cost) => cost,
        Cost::Host => 0.0,
    }
}

/// Whether adding `amount` to `used` passes `limit` (a hair of slack, so that fractional costs that add up to the
/// limit exactly still fit).
pub fn passes(used: f64, amount: f64, limit: f64) -> bool {
    used + amount > limit + 1e-9
}

/// Why a limit refused a call: it would add `amount` to what was `used`, in the budget of `by` (see `holder`);
/// `resets_in` for a window.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub amount: f64,
    pub used: f64,
    pub resets_in: Option<Duration>,
    pub by: Vec<(String, String)>,
}

/// A call not run because `line` refused it.
pub fn exceeded(call_id: String, tool: &str, line: &Limit, refusal: Refusal) -> ToolResult {
    let Refusal { amount, used, resets_in, by } = refusal;
    let whose = match line.source {
        Source::Executor => "the executor's",
        Source::Tool => "this tool's",
        Source::Context => "the context's",
    };
    let what = if line.tool_only { format!("\"{tool}\"") } else { "tools".to_string() };
    let holder = holder_text(&by);
    let limit = line.limit;
    let error = match line.kind {
        Kind::CallsPerTurn => format!(
            "Tool \"{tool}\" was not run: {whose} budget of {limit} calls per turn is used up ({used} ran in this turn). \
             Do not call {what} again in this turn; answer with what you have."
        ),
        Kind::Calls => format!(
            "Tool \"{tool}\" was not run: the call budget of {holder} ({whose} maxCalls) is used up: {used} of {limit} calls. \
             Do not call {what} again in this session; answer with what you have, or tell the user the budget ran out."
        ),
        Kind::CallsPerWindow => {
            let window = line.window.unwrap_or_default().as_millis().div_ceil(1000);
            let again = resets_in.unwrap_or_default().as_millis().div_ceil(1000).max(1);
            format!(
                "Tool \"{tool}\" was not run: the budget of {holder} ({whose} maxCallsPerWindow) is used up: {used} of {limit} \
                 calls in the current {window} s window, which starts over in {again} s. Do not call {what} again before then; \
                 answer with what you have meanwhile."
            )
        }
        Kind::Cost => format!(
            "Tool \"{tool}\" was not run: this call costs {cost}, and {used} of the cost budget of {holder} ({whose} maxCost: \
             {limit}) is spent, so it would pass it. Do not call {what} again in this session unless a call that costs less fits; \
             answer with what you have, or tell the user the budget ran out.",
            cost = amount,
        ),
    };
    let mut result = ToolResult::failure(call_id, tool.to_string(), ErrorKind::BudgetExceeded, error, false);
    result.retry_after_ms = resets_in.map(|d| d.as_millis().min(u128::from(u64::MAX)) as u64);
    result.metadata.budget = Some(Box::new(BudgetNote {
        budget: line.kind.as_str(),
        source: line.source.as_str(),
        limit,
        used,
        cost: (line.kind == Kind::Cost).then_some(amount),
        by: by.into_iter().collect::<BTreeMap<_, _>>(),
        resets_in_ms: result.retry_after_ms,
    }));
    result
}

/// Who the budget is for, as a model reads it: `session "s1"`, `userId "u7", tenantId "acme"`.
fn holder_text(by: &[(String, String)]) -> String {
    let one = |(field, value): &(String, String)| match (field.as_str(), value.is_empty()) {
        (_, true) => format!("the calls without a {field} (they share one budget)"),
        ("sessionId", false) => format!("session \"{}\"", clip(value, QUOTED_CHARS)),
        (_, false) => format!("{field} \"{}\"", clip(value, QUOTED_CHARS)),
    };
    by.iter().map(one).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_key_reads_back_as_written_whatever_its_values_hold() {
        let limit = Limit { kind: Kind::Calls, source: Source::Context, prefix: format!("calls{SEP}*"), by: vec!["userId".into(), "password".into()], amount: 1.0, limit: 5.0, window: None, tool_only: false };
        let mut fields = Fields::default();
        fields.insert("userId".into(), format!("a{SEP}b=3:c"));
        fields.insert("password".into(), "open sesame 42".into());
        let mut key = String::new();
        limit.key_into(&fields, &mut key);
        assert_eq!(read_key(&key), Some(("calls", "*", vec![("userId", format!("a{SEP}b=3:c").as_str()), ("password", "open sesame 42")])));
        assert_eq!(read_key(&format!("calls{SEP}*{SEP}userId=9:ab")), None, "a length past the key");
    }

    fn budget(json: serde_json::Value) -> BudgetOptions {
        serde_json::from_value(json).unwrap()
    }

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn key(limit: &Limit, fields: &Fields) -> String {
        let mut key = String::new();
        limit.key_into(fields, &mut key);
        key
    }

    #[test]
    fn limits_come_from_every_budget_and_shared_counters_take_the_lower_limit() {
        let executor = budget(serde_json::json!({"maxCallsPerTurn": 20, "maxCalls": 100}));
        let tool = BudgetOptions { max_calls: Some(5), max_calls_per_window: Some(WindowBudget { calls: 3, window_ms: 60_000 }), ..budget(serde_json::json!({})) };
        let context = budget(serde_json::json!({"maxCalls": 50, "maxCost": 10, "by": ["tenantId", "userId"]}));
        let context_by_session = budget(serde_json::json!({"maxCalls": 40}));
        let f = fields(&[("sessionId", "s1"), ("tenantId", "acme")]);
        let limits = limits([(Source::Executor, Some(&executor)), (Source::Tool, Some(&tool)), (Source::Context, Some(&context))], "search", 2.5);
        let summary: Vec<(Kind, Source, f64, f64)> = limits.iter().map(|l| (l.kind, l.source, l.amount, l.limit)).collect();
        assert_eq!(summary, [
            (Kind::CallsPerTurn, Source::Executor, 1.0, 20.0),
            (Kind::Calls, Source::Executor, 1.0, 100.0),
            (Kind::Calls, Source::Tool, 1.0, 5.0),
            (Kind::CallsPerWindow, Source::Tool, 1.0, 3.0),
            (Kind::Calls, Source::Context, 1.0, 50.0),
            (Kind::Cost, Source::Context, 2.5, 10.0),
        ]);
        assert_eq!(holder(&context.by, &f), [("tenantId".to_string(), "acme".to_string()), ("userId".to_string(), String::new())]);
        assert_eq!(key(&limits[5], &f), "cost\u{1}*\u{1}tenantId=4:acme\u{1}userId=0:");
        assert_ne!(key(&limits[1], &f), key(&limits[2], &f), "all calls and this tool's calls count apart");
        let shared = super::limits([(Source::Executor, Some(&executor)), (Source::Tool, None), (Source::Context, Some(&context_by_session))], "search", 0.0);
        let calls: Vec<_> = shared.iter().filter(|l| l.kind == Kind::Calls).collect();
        assert_eq!(calls.len(), 1, "both count the session's calls");
        assert_eq!((calls[0].limit, calls[0].source), (40.0, Source::Context));
        assert_ne!(key(&limits[1], &fields(&[("sessionId", "s2")])), key(&limits[1], &f), "another session, another counter");
    }

    #[test]
    fn holders_whose_values_hold_the_separator_never_share_a_key() {
        let context = budget(serde_json::json!({"maxCalls": 5, "by": ["tenantId", "userId"]}));
        let limits = limits([(Source::Executor, None), (Source::Tool, None), (Source::Context, Some(&context))], "search", 0.0);
        let one = fields(&[("tenantId", "a\u{1}userId=b"), ("userId", "c")]);
        let other = fields(&[("tenantId", "a"), ("userId", "b\u{1}userId=c")]);
        assert_ne!(key(&limits[0], &one), key(&limits[0], &other));
        let digits = fields(&[("tenantId", "1:a"), ("userId", "")]);
        assert_ne!(key(&limits[0], &digits), key(&limits[0], &fields(&[("tenantId", "1"), ("userId", "a")])));
    }

    #[test]
    fn a_refusal_names_the_budget_the_holder_and_what_was_used() {
        let budget = budget(serde_json::json!({"maxCalls": 100, "maxCost": 10, "maxCallsPerWindow": {"calls": 5, "windowMs": 60_000}}));
        let all = limits([(Source::Executor, Some(&budget)), (Source::Tool, None), (Source::Context, None)], "search", 4.0);
        let s1 = holder(&budget.by, &fields(&[("sessionId", "s1")]));
        let r = exceeded("c".into(), "search", &all[0], Refusal { amount: 1.0, used: 100.0, resets_in: None, by: s1.clone() });
        assert_eq!((r.error_kind, r.retryable, r.retry_after_ms), (Some(ErrorKind::BudgetExceeded), false, None));
        assert!(r.output.starts_with("Error (budget_exceeded): Tool \"search\" was not run: the call budget of session \"s1\" (the executor's maxCalls) is used up: 100 of 100 calls."), "{}", r.output);
        let note = r.metadata.budget.as_ref().unwrap();
        assert_eq!((note.budget, note.source, note.limit, note.used), ("maxCalls", "executor", 100.0, 100.0));
        let window = exceeded("c".into(), "search", &all[1], Refusal { amount: 1.0, used: 5.0, resets_in: Some(Duration::from_millis(12_300)), by: s1.clone() });
        assert!(window.output.contains("5 of 5 calls in the current 60 s window, which starts over in 13 s"), "{}", window.output);
        assert_eq!(window.retry_after_ms, Some(12_300));
        let cost = exceeded("c".into(), "search", &all[2], Refusal { amount: 4.0, used: 7.5, resets_in: None, by: s1 });
        assert!(cost.output.contains("this call costs 4, and 7.5 of the cost budget of session \"s1\" (the executor's maxCost: 10) is spent"), "{}", cost.output);
        let none = holder(&budget.by, &Fields::default());
        assert!(exceeded("c".into(), "search", &all[0], Refusal { amount: 1.0, used: 100.0, resets_in: None, by: none }).output.contains("the calls without a sessionId (they share one budget)"));
    }

    #[test]
    fn windows_are_fixed_and_cost_adds_up_exactly() {
        assert_eq!(window_of(125_000, Duration::from_secs(60)), (2, Duration::from_secs(55)));
        assert!(!passes(0.1 + 0.2, 0.7, 1.0), "0.1 + 0.2 + 0.7 fits a budget of 1");
        assert!(passes(100.0, 1.0, 100.0));
        assert_eq!(Cost::parse(Some(&serde_json::json!(2.5))), Ok(Cost::Fixed(2.5)));
        assert_eq!(Cost::parse(Some(&serde_json::json!("host"))), Ok(Cost::Host));
        assert!(Cost::parse(Some(&serde_json::json!(-1))).is_err());
    }
}
