//! Executor and tool settings as they arrive (JSON), checked once, with the defaults filled in.

use serde::Deserialize;
use serde_json::Value;

pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
pub const MAX_TIMEOUT_MS: u64 = 600_000;
pub const DEFAULT_CONCURRENCY: usize = 8;
pub const DEFAULT_MAX_OUTPUT_CHARS: usize = 30_000;
pub const DEFAULT_MAX_ERROR_CHARS: usize = 10_000;

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

impl Default for EngineOptions {
    fn default() -> Self {
        serde_json::from_str("{}").expect("defaults deserialize")
    }
}

impl EngineOptions {
    pub fn from_json(json: &str) -> Result<Self, String> {
        let options: EngineOptions =
            serde_json::from_str(json).map_err(|e| format!("invalid ToolExecutor options: {e}"))?;
        options.check()?;
        Ok(options)
    }

    fn check(&self) -> Result<(), String> {
        positive("defaultTimeoutMs", self.default_timeout_ms as usize)?;
        positive("maxTimeoutMs", self.max_timeout_ms as usize)?;
        positive("concurrency", self.concurrency)?;
        positive("maxOutputChars", self.max_output_chars)?;
        positive("maxErrorChars", self.max_error_chars)?;
        Ok(())
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
    #[serde(default)]
    pub max_output_chars: Option<usize>,
    /// Refused unless the execution context approves the tool by name.
    #[serde(default)]
    pub needs_approval: bool,
    /// Replace a tool already registered under this name instead of refusing.
    #[serde(default)]
    pub replace: bool,
}

impl ToolSpec {
    pub fn from_json(json: &str) -> Result<Self, String> {
        let spec: ToolSpec = serde_json::from_str(json).map_err(|e| format!("invalid tool spec: {e}"))?;
        if let Some(t) = spec.timeout_ms {
            positive("timeoutMs", t as usize).map_err(|e| format!("tool \"{}\": {e}", spec.name))?;
        }
        if let Some(n) = spec.max_output_chars {
            positive("maxOutputChars", n).map_err(|e| format!("tool \"{}\": {e}", spec.name))?;
        }
        Ok(spec)
    }
}
