//! What the engine counts per tool, for `stats()`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use crate::keys::SEP;
use crate::{budget, ratelimit};
use crate::result::ToolResult;
use crate::metrics::CallMetrics;

use super::Engine;

/// Per-tool counts of work retried, stopped, avoided or refused.
#[derive(Debug, Default, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCounters {
    pub retries: u64,
    pub timeouts: u64,
    pub idle_timeouts: u64,
    pub late_settlements: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub shared_flights: u64,
    pub duplicates: u64,
    pub rate_limited: u64,
    /// Times the tool's breaker opened (seen by this process), and calls it answered `unavailable`.
    pub breaker_opened: u64,
    pub breaker_refused: u64,
    pub budget_exceeded: u64,
}

impl ToolCounters {
    pub(super) fn add(&mut self, o: &ToolCounters) {
        self.retries += o.retries;
        self.timeouts += o.timeouts;
        self.idle_timeouts += o.idle_timeouts;
        self.late_settlements += o.late_settlements;
        self.cache_hits += o.cache_hits;
        self.cache_misses += o.cache_misses;
        self.shared_flights += o.shared_flights;
        self.duplicates += o.duplicates;
        self.rate_limited += o.rate_limited;
        self.breaker_opened += o.breaker_opened;
        self.breaker_refused += o.breaker_refused;
        self.budget_exceeded += o.budget_exceeded;
    }
}

/// How an approval given "for this session" is remembered.
/// A tool's counters; its name is copied only the first time.
pub(super) fn counters_of<'a>(counters: &'a mut BTreeMap<String, ToolCounters>, tool: &str) -> &'a mut ToolCounters {
    if !counters.contains_key(tool) {
        counters.insert(tool.to_owned(), ToolCounters::default());
    }
    counters.get_mut(tool).expect("inserted above")
}

/// A call's result is in: it counts toward its tool's metrics, or the total's only for a name that is no tool.
/// (Fields, not `&mut Engine`: it is called while a turn of the engine is borrowed.)
pub(super) fn tally(metrics: &mut BTreeMap<String, CallMetrics>, unknown: &mut CallMetrics, result: &ToolResult, known: bool) {
    if !known {
        return unknown.record(result);
    }
    match metrics.get_mut(&result.name) {
        Some(m) => m.record(result),
        None => metrics.entry(result.name.clone()).or_default().record(result),
    }
}

/// One entry of `counters()`: the counters and the call metrics side by side.
pub(super) fn tool_stats(counters: &ToolCounters, calls: &CallMetrics, in_flight: usize) -> Value {
    let mut entry = serde_json::to_value(counters).expect("counters serialize");
    let calls = serde_json::to_value(calls).expect("metrics serialize");
    if let (Value::Object(entry), Value::Object(calls)) = (&mut entry, calls) {
        entry.extend(calls);
        entry.insert("inFlight".into(), in_flight.into());
    }
    entry
}

impl Engine {
    /// A handler that timed out or was cancelled settled anyway: counted per tool.
    pub fn note_late_settlement(&mut self, tool: &str) {
        counters_of(&mut self.counters, tool).late_settlements += 1;
    }

    /// Per tool and in total: calls, successes, failures by kind, handler latency percentiles, handlers in flight,
    /// and the counters of retries, timeouts, late settlements, cache, flights, duplicates and rate limits.
    pub fn counters(&self, now: Instant) -> Value {
        let mut total = ToolCounters::default();
        let mut total_calls = self.unknown_tool_metrics.clone();
        let mut tools = serde_json::Map::new();
        let names: BTreeSet<&String> = self.counters.keys().chain(self.metrics.keys()).collect();
        for name in names {
            let counters = self.counters.get(name).copied().unwrap_or_default();
            let calls = self.metrics.get(name).cloned().unwrap_or_default();
            total.add(&counters);
            total_calls.merge(&calls);
            let in_flight = self.tool_running.get(name.as_str()).copied().unwrap_or(0);
            let mut entry = tool_stats(&counters, &calls, in_flight);
            if let Some(view) = self.breaker_view(name, now) {
                entry["breaker"] = view.state.as_str().into();
            }
            tools.insert(name.clone(), entry);
        }
        let in_flight = self.runs.len() + self.held.len();
        let mut stats = serde_json::json!({ "total": tool_stats(&total, &total_calls, in_flight), "tools": tools });
        if let Some(store) = self.store_stats() {
            stats["store"] = store;
        }
        stats
    }
}

impl Engine {
    /// What the gate holds now, for a page that shows its health: each tool's breaker (with the memory store, its
    /// window's counts or its wait; with a shared store, as this process last heard it), and the memory store's
    /// cache, sessions, buckets and budget counters, at most `limit` of each list (a shared store keeps its own).
    /// Keys hold what the calls held (holders, argument values): they are redacted as a trace's values are.
    pub fn inspect(&self, now: Instant, limit: usize) -> Value {
        let mut breakers = serde_json::Map::new();
        for tool in self.registry.iter() {
            if let Some(view) = self.breaker_view(&tool.spec.name, now) {
                breakers.insert(tool.spec.name.clone(), serde_json::to_value(view).expect("a view serializes"));
            }
        }
        let mut view = serde_json::json!({ "store": if self.shared.is_some() { "shared" } else { "memory" }, "breakers": breakers });
        if self.shared.is_none() {
            let mut memory = self.store.view(now, limit);
            for bucket in &mut memory.buckets {
                bucket.key = self.bucket_shown(&bucket.key);
            }
            for budget in &mut memory.budgets {
                budget.key = match budget::read_key(&budget.key) {
                    Some((what, scope, holder)) => format!("{what} · {scope}{}", self.holder_shown(&holder)),
                    None => self.shaper.redact_text(&budget.key.replace(SEP, " · ")),
                };
            }
            view["memory"] = serde_json::to_value(memory).expect("a view serializes");
        }
        view
    }
}

impl Engine {
    /// A bucket's key as `inspect()` shows it: the tool (`*`: the executor's bucket) and the context field it is split
    /// by with its value.
    fn bucket_shown(&self, key: &str) -> String {
        let (scope, value) = ratelimit::read_key(key);
        let limit = if scope == "*" { self.rate_limit.as_ref() } else { self.registry.get(scope).and_then(|tool| tool.rate_limit.as_ref()) };
        match limit.and_then(|limit| limit.key.as_deref()) {
            Some(field) => format!("{scope}{}", self.holder_shown(&[(field, value)])),
            None => scope.to_string(),
        }
    }

    /// Holder fields as ` · field=value`, their values redacted as a trace redacts a context's fields: a
    /// secret-named field's (`password`, `apiKey`) whole, the others by the rules.
    fn holder_shown(&self, holder: &[(&str, &str)]) -> String {
        let mut shown = Value::Object(holder.iter().map(|(field, value)| (field.to_string(), Value::from(*value))).collect());
        self.shaper.redact_value(&mut shown);
        let Value::Object(shown) = shown else { unreachable!("an object stays an object") };
        shown.iter().map(|(field, value)| format!(" · {field}={}", value.as_str().unwrap_or_default())).collect()
    }
}

/// What the shared store did, for `stats()`.
#[derive(Debug, Default, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct StoreStats {
    /// Operations sent to the store.
    pub(super) operations: u64,
    /// Operations that failed, timed out included.
    pub(super) errors: u64,
    /// Tickets the store did not answer within `timeoutMs`.
    pub(super) timeouts: u64,
    /// Results the store failed (went on without it, or not run).
    pub(super) unavailable: u64,
}

impl Engine {
    /// A call's result says the store failed it, and why.
    pub(super) fn note_store(&mut self, result: &mut ToolResult, why: String) {
        if let Some(shared) = self.shared.as_mut() {
            shared.stats.unavailable += 1;
        }
        result.metadata.store = Some("unavailable");
        result.metadata.store_error = Some(why);
    }

    /// The store's counters, for `stats()`: absent without a shared store.
    pub(super) fn store_stats(&self) -> Option<Value> {
        self.shared.as_ref().map(|s| {
            let mut stats = serde_json::to_value(s.stats).expect("store stats serialize");
            stats["pending"] = s.pending().into();
            stats
        })
    }
}
