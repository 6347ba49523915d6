//! Executor and tool settings as they arrive (JSON), checked once, with the defaults filled in: what each station
//! declares (its options live with it), gathered.

use serde::Deserialize;
use serde_json::Value;

use crate::artifacts::ArtifactOptions;
use crate::budget::BudgetOptions;
use crate::cache::CacheOptions;
use crate::dedup::DedupOptions;
use crate::json;
use crate::tool::Risk;
use crate::redact::RedactOptions;
use crate::repair::RepairOptions;
use crate::retry::RetryPolicy;

pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
pub const MAX_TIMEOUT_MS: u64 = 600_000;
pub const DEFAULT_CONCURRENCY: usize = 8;
pub const DEFAULT_MAX_OUTPUT_CHARS: usize = 30_000;
pub const DEFAULT_MAX_ERROR_CHARS: usize = 10_000;
pub const DEFAULT_PREVIEW_CHARS: usize = 2_000;

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EngineOptions {
    /// Timeout for a tool that declares none.
    #[serde(default = "default_timeout")]
    pub default_timeout_ms: u64,
    /// No tool may run longer than this, whatever it declares.
    #[serde(default = "max_timeout")]
    pub max_timeout_ms: u64,
    /// How many read-only calls of one turn may run at once.
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    #[serde(default = "default_max_output")]
    pub max_output_chars: usize,
    #[serde(default = "default_max_error")]
    pub max_error_chars: usize,
    /// How much of an output saved to an artifact the model sees.
    #[serde(default = "default_preview")]
    pub preview_chars: usize,
    /// Secret redaction; `false` arrives as `{ builtin: false }`.
    #[serde(default)]
    pub redact: RedactOptions,
    #[serde(default)]
    pub artifacts: ArtifactOptions,
    /// Which near-miss calls are repaired; `false` arrives as every repair off.
    #[serde(default)]
    pub repair: RepairOptions,
    /// Rules and a mode for the permission station: `{ mode?, deny?, ask?, allow? }`.
    #[serde(default)]
    pub permissions: Option<Value>,
    /// How long the approval callback may take before the call counts as denied.
    #[serde(default = "default_approval_timeout")]
    pub approval_timeout_ms: u64,
    /// How long a tool's `check` function may take before the call fails.
    #[serde(default = "default_check_timeout")]
    pub check_timeout_ms: u64,
    /// Results carry stage timings for trace events, audit records and timelines.
    #[serde(default)]
    pub trace: bool,
    /// After this many consecutive rollback flags in a session, results are no longer flagged.
    #[serde(default = "default_max_rollbacks")]
    pub max_consecutive_rollbacks: u32,
    /// Retry policy of a tool that declares none; a tool's own `retry` overrides it field by field.
    #[serde(default)]
    pub retry: RetryPolicy,
    #[serde(default)]
    pub cache: CacheOptions,
    #[serde(default)]
    pub dedup: DedupOptions,
    /// One token bucket all calls share, on top of each tool's own.
    #[serde(default)]
    pub rate_limit: Option<Value>,
    /// A store shared between processes (the host runs its operations); the in-memory store without it.
    #[serde(default)]
    pub store: Option<crate::shared::SharedStoreOptions>,
    /// The circuit breaker of tools that declare none (`true` or its settings); off when absent.
    #[serde(default)]
    pub breaker: Option<Value>,
    /// Limits on all calls together (per turn, per holder, per window, cost).
    #[serde(default)]
    pub budget: Option<BudgetOptions>,
}

fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_MS
}
fn max_timeout() -> u64 {
    MAX_TIMEOUT_MS
}
fn default_concurrency() -> usize {
    DEFAULT_CONCURRENCY
}
fn default_max_output() -> usize {
    DEFAULT_MAX_OUTPUT_CHARS
}
fn default_max_error() -> usize {
    DEFAULT_MAX_ERROR_CHARS
}
fn default_approval_timeout() -> u64 {
    60_000
}
fn default_check_timeout() -> u64 {
    10_000
}
fn default_max_rollbacks() -> u32 {
    3
}
fn default_preview() -> usize {
    DEFAULT_PREVIEW_CHARS
}

impl Default for EngineOptions {
    fn default() -> Self {
        serde_json::from_str("{}").expect("defaults deserialize")
    }
}

impl EngineOptions {
    pub fn from_json(json: &str) -> Result<Self, String> {
        let options: EngineOptions =
            json::from_str_mended(json).map(|(o, _)| o).map_err(|e| format!("invalid ToolExecutor options: {e}"))?;
        options.check()?;
        Ok(options)
    }

    fn check(&self) -> Result<(), String> {
        positive("defaultTimeoutMs", self.default_timeout_ms as usize)?;
        positive("maxTimeoutMs", self.max_timeout_ms as usize)?;
        positive("concurrency", self.concurrency)?;
        positive("maxOutputChars", self.max_output_chars)?;
        positive("maxErrorChars", self.max_error_chars)?;
        positive("previewChars", self.preview_chars)?;
        positive("artifacts.maxBytes", self.artifacts.max_bytes as usize)?;
        positive("artifacts.ttlMs", self.artifacts.ttl_ms as usize)?;
        positive("cache.maxEntries", self.cache.max_entries)?;
        positive("cache.maxBytes", self.cache.max_bytes)?;
        positive("dedup.maxSessions", self.dedup.max_sessions)?;
        positive("dedup.maxQueriesPerSession", self.dedup.max_queries_per_session)?;
        crate::dedup::Mode::parse(&self.dedup.policy)?;
        positive("approvalTimeoutMs", self.approval_timeout_ms as usize)?;
        positive("checkTimeoutMs", self.check_timeout_ms as usize)?;
        if let Some(breaker) = &self.breaker {
            crate::breaker::BreakerConfig::parse(breaker)?;
        }
        if let Some(budget) = &self.budget {
            budget.check("")?;
        }
        self.retry.check()
    }

    /// A tool's total time budget: its own timeout or the default, never above the executor's cap.
    pub fn timeout_for(&self, spec: &ToolSpec) -> u64 {
        spec.timeout_ms.unwrap_or(self.default_timeout_ms).min(self.max_timeout_ms)
    }
}

fn positive(name: &str, value: usize) -> Result<(), String> {
    if value == 0 {
        Err(format!("{name} must be a positive number"))
    } else {
        Ok(())
    }
}

/// A tool as registered, less its handler (which stays in JS).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolSpec {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments object; absent means "no arguments".
    #[serde(default)]
    pub parameters: Option<Value>,
    /// Only reads: may run alongside other read-only calls.
    #[serde(default)]
    pub read_only: bool,
    /// Same arguments, same effect: safe to repeat.
    #[serde(default)]
    pub idempotent: bool,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Longest silence (no `ctx.progress()`) before the call is stopped; the total timeout still caps the call.
    #[serde(default)]
    pub idle_timeout_ms: Option<u64>,
    /// Overrides of the executor's retry policy (`false` arrives as `{ maxRetries: 0 }`).
    #[serde(default)]
    pub retry: Option<Value>,
    /// How many calls of this tool may run at once across the executor (on top of the executor's `concurrency`).
    #[serde(default)]
    pub max_concurrency: Option<usize>,
    /// For idempotent tools: `{ ttlMs?, scope? }` (scope: a context field that splits the cache), or `false`.
    #[serde(default)]
    pub cache: Option<Value>,
    /// `{ policy?, keys? }`: what a repeated query in a session gets, and which arguments make the query.
    #[serde(default)]
    pub dedup: Option<Value>,
    /// `'10/min'`, `{ capacity, refillPerSecond }` or `{ limit, key?, maxWaitMs? }`.
    #[serde(default)]
    pub rate_limit: Option<Value>,
    #[serde(default)]
    pub max_output_chars: Option<usize>,
    /// Other names a model may use for a top-level property: `{ q: "query" }`.
    #[serde(default)]
    pub aliases: Option<serde_json::Map<String, Value>>,
    /// Rules that flag a successful but useless result for rollback.
    #[serde(default)]
    pub rollback_when: Option<Value>,
    /// Reads the outside world (web pages, email, uploads): its output is fenced as data, not instructions.
    #[serde(default)]
    pub untrusted: bool,
    /// Every call asks the approval callback (unless the context approves the tool by name, or the mode is
    /// `acceptAll`).
    #[serde(default)]
    pub needs_approval: bool,
    /// How much the tool can change: `read`, `write`, `destructive` or `admin` (default: `read` for read-only
    /// tools, else `write`).
    #[serde(default)]
    pub risk: Option<Risk>,
    /// The host runs the tool's own check of the arguments before permission.
    #[serde(default)]
    pub check: bool,
    /// The host runs the schema's own validation (a Standard Schema's refinements, transforms, defaults) after
    /// the engine's, before the tool's check.
    #[serde(default)]
    pub schema_check: bool,
    /// With `schema_check`: the JSON Schema the engine validates with, `parameters` less what the host's own
    /// validation judges better (patterns, whose flags JSON Schema drops; a library's fallbacks and coercions).
    #[serde(default)]
    pub validation_schema: Option<Value>,
    /// JSON Schema of the handler's return value: a value that does not match is a handler error.
    #[serde(default)]
    pub output_schema: Option<Value>,
    /// The host validates returned values against the output schema (a Standard Schema's own validation), so the
    /// engine does not.
    #[serde(default)]
    pub output_check: bool,
    /// `{ arg, root }` (or a list): a path argument must resolve inside the root.
    #[serde(default)]
    pub path_within: Option<Value>,
    /// `{ arg, hosts }` (or a list): a URL argument's host must be one of these (`*.example.com` for subdomains).
    #[serde(default)]
    pub url_hosts: Option<Value>,
    /// Replace a tool already registered under this name instead of refusing.
    #[serde(default)]
    pub replace: bool,
    /// Where the tool comes from (a mounted MCP server's name for it, its annotations): shown by `list()`, not
    /// read by any station.
    #[serde(default)]
    pub origin: Option<serde_json::Map<String, Value>>,
    /// The circuit breaker: `true`, its settings, or `false` (off even when the executor sets one).
    #[serde(default)]
    pub breaker: Option<Value>,
    /// Limits on this tool's calls (per turn, per holder, per window, cost).
    #[serde(default)]
    pub budget: Option<BudgetOptions>,
    /// What one call costs against cost budgets: a number, or `"host"` when the host computes it from the arguments.
    #[serde(default)]
    pub cost: Option<Value>,
    /// A command tool: the engine spawns its process (the host says what to run for each call) and stops it.
    #[serde(default)]
    pub command: Option<crate::command::CommandLimits>,
}

impl ToolSpec {
    pub fn from_json(json: &str) -> Result<Self, String> {
        let spec: ToolSpec = json::from_str_mended(json).map(|(s, _)| s).map_err(|e| format!("invalid tool spec: {e}"))?;
        if let Some(t) = spec.timeout_ms {
            positive("timeoutMs", t as usize).map_err(|e| format!("tool \"{}\": {e}", spec.name))?;
        }
        let named = |e: String| format!("tool \"{}\": {e}", spec.name);
        if let Some(n) = spec.max_output_chars {
            positive("maxOutputChars", n).map_err(named)?;
        }
        if let Some(limits) = &spec.command {
            limits.check().map_err(named)?;
        }
        if let Some(t) = spec.idle_timeout_ms {
            positive("idleTimeoutMs", t as usize).map_err(named)?;
        }
        if let Some(n) = spec.max_concurrency {
            positive("maxConcurrency", n).map_err(named)?;
        }
        Ok(spec)
    }
}

/// What one `execute` asks of its turn beyond the calls.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnOptions {
    /// The whole turn's time budget: calls not started by then are not run, running ones are stopped.
    #[serde(default)]
    pub deadline_ms: Option<u64>,
    /// After a state-changing call fails, the calls after it are not run.
    #[serde(default)]
    pub stop_on_error: bool,
}

impl TurnOptions {
    pub fn from_json(json: &str) -> Result<Self, String> {
        if json.is_empty() {
            return Ok(TurnOptions::default());
        }
        let options: TurnOptions = serde_json::from_str(json).map_err(|e| format!("invalid execute options: {e}"))?;
        if options.deadline_ms == Some(0) {
            return Err("deadlineMs must be a positive number".into());
        }
        Ok(options)
    }
}

include!("generated/options.rs");

/// Fails unless `T` reads exactly the keys declared for it (the programmer's and those the JS layer sets).
#[cfg(test)]
fn assert_declared<T: serde::de::DeserializeOwned>(keys: &[&str], host_set: &[&str]) {
    let mut declared: Vec<&str> = keys.iter().chain(host_set).copied().collect();
    declared.sort_unstable();
    assert_eq!(serde_fields::<T>(), declared, "{} reads other keys than crates/core/wire.json declares", std::any::type_name::<T>());
}

/// The fields a struct's `Deserialize` reads, sorted: what serde tells a deserializer that asks for a struct.
#[cfg(test)]
fn serde_fields<T: serde::de::DeserializeOwned>() -> Vec<&'static str> {
    use serde::de::{self, Deserializer, Visitor};
    struct Fields(Vec<&'static str>);
    #[derive(Debug)]
    struct Found;
    impl std::fmt::Display for Found {
        fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("fields found")
        }
    }
    impl std::error::Error for Found {}
    impl de::Error for Found {
        fn custom<M: std::fmt::Display>(_: M) -> Self {
            Found
        }
    }
    impl<'de> Deserializer<'de> for &mut Fields {
        type Error = Found;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Found> {
            Err(Found)
        }
        fn deserialize_struct<V: Visitor<'de>>(self, _: &'static str, fields: &'static [&'static str], _: V) -> Result<V::Value, Found> {
            self.0.extend(fields);
            Err(Found)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit unit_struct
            newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    let mut fields = Fields(Vec::new());
    let _ = T::deserialize(&mut fields);
    fields.0.sort_unstable();
    fields.0
}
