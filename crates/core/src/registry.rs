//! Registered tools: names checked, schemas compiled once, definitions for each provider.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jsonschema::{PatternOptions, Validator};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::breaker::BreakerConfig;
use crate::budget::{self, Cost, Limit, Source};
use crate::checks;
use crate::judge;
use crate::schema_cost;

use crate::dedup::{Dedup, Mode};
use crate::options::{EngineOptions, ToolSpec};
use crate::tool::{Risk, ToolInfo};
use crate::validate::Schemas;
use crate::retry::RetryPolicy;
use crate::ratelimit::RateLimit;

/// The longest name every provider accepts (OpenAI's limit is the tightest).
const MAX_NAME_LEN: usize = 64;

pub struct Tool {
    pub spec: ToolSpec,
    pub schema: Value,
    pub validator: Validator,
    /// The handler's structured return value is checked against it (`outputSchema`).
    pub output_validator: Option<Validator>,
    pub timeout_ms: u64,
    pub max_output_chars: usize,
    pub retry: RetryPolicy,
    /// Set for idempotent tools unless they turned the cache off.
    pub cache: Option<CacheRule>,
    pub dedup: Dedup,
    pub rate_limit: Option<RateLimit>,
    /// Alias → property, for the repair station.
    pub aliases: Map<String, Value>,
    /// `rollbackWhen`, for the judge station (empty: results are not judged).
    pub judge: Vec<judge::Rule>,
    pub risk: Risk,
    /// Built-in business checks (`pathWithin`, `urlHosts`).
    pub checks: Vec<checks::Check>,
    /// Its circuit breaker (its own, else the executor's), when on.
    pub breaker: Option<BreakerConfig>,
    /// What one call costs against cost budgets.
    pub cost: Cost,
    /// The limits of its own budget and the executor's (a context's budget adds its own per turn).
    pub limits: Vec<Limit>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CacheRule {
    pub ttl: Duration,
    /// A context field whose value splits the cache (per user or tenant).
    pub scope: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DeclaredCache {
    #[serde(default)]
    ttl_ms: Option<u64>,
    #[serde(default)]
    scope: Option<String>,
}

fn cache_rule(spec: &ToolSpec, options: &EngineOptions) -> Result<Option<CacheRule>, String> {
    let declared = match &spec.cache {
        Some(Value::Bool(false)) => return Ok(None),
        Some(Value::Bool(true)) if spec.idempotent => DeclaredCache { ttl_ms: None, scope: None },
        Some(value) => {
            const FORMS: &str = "cache must be true, false or { ttlMs?, scope? }";
            if !spec.idempotent {
                return Err("cache is only for idempotent tools: add idempotent: true (same arguments, same result)".into());
            }
            if !value.is_object() {
                return Err(FORMS.into());
            }
            serde_json::from_value::<DeclaredCache>(value.clone()).map_err(|e| format!("{FORMS} ({e})"))?
        }
        None if spec.idempotent => DeclaredCache { ttl_ms: None, scope: None },
        None => return Ok(None),
    };
    let ttl_ms = declared.ttl_ms.unwrap_or(options.cache.ttl_ms);
    if ttl_ms == 0 {
        return Ok(None);
    }
    Ok(Some(CacheRule { ttl: Duration::from_millis(ttl_ms), scope: declared.scope }))
}

/// A tool's breaker: its own (`true`, `false`, or settings that override the executor's field by field), else the
/// executor's.
fn breaker(own: Option<&Value>, executor: Option<&Value>) -> Result<Option<BreakerConfig>, String> {
    let declared = match (own, executor) {
        (None, None) => return Ok(None),
        (None, Some(executor)) => executor.clone(),
        (Some(Value::Bool(true)), Some(executor @ Value::Object(_))) => executor.clone(),
        (Some(Value::Object(own)), Some(Value::Object(executor))) => {
            let mut merged = executor.clone();
            merged.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
            Value::Object(merged)
        }
        (Some(own), _) => own.clone(),
    };
    BreakerConfig::parse(&declared)
}

#[derive(Default)]
pub struct Registry {
    tools: HashMap<String, Arc<Tool>>,
    /// Registration order, so that listings and definitions are stable.
    order: Vec<String>,
}

pub fn check_name(name: &str) -> Result<(), String> {
    let valid_chars = name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if name.is_empty() || name.len() > MAX_NAME_LEN || !valid_chars {
        return Err(format!(
            "invalid tool name \"{name}\": use 1 to {MAX_NAME_LEN} characters from a-z, A-Z, 0-9, '_' and '-' \
             (the names OpenAI, Anthropic and the AI SDK all accept)"
        ));
    }
    Ok(())
}

/// The schema as providers need it: an object schema that says `type: "object"` (added when only implied).
fn object_schema(name: &str, schema: Option<Value>) -> Result<Value, String> {
    let mut schema = schema.unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    let Value::Object(map) = &mut schema else {
        return Err(format!("tool \"{name}\": parameters must be a JSON Schema object"));
    };
    match map.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        None if map.contains_key("properties") => {
            map.insert("type".into(), json!("object"));
        }
        _ => {
            return Err(format!(
                "tool \"{name}\": parameters must be a JSON Schema of an object ({{ type: 'object', properties: {{…}} }}), \
                 since every provider sends tool arguments as one object"
            ))
        }
    }
    Ok(schema)
}

/// `field`: what the schema is, for the error.
fn compile(name: &str, field: &str, schema: &Value) -> Result<Validator, String> {
    jsonschema::options()
        // Patterns run on model output: a linear-time engine, so no pattern can backtrack catastrophically.
        .with_pattern_options(PatternOptions::regex())
        .build(schema)
        .map_err(|e| format!("tool \"{name}\": {field} is not a valid JSON Schema: {e}"))
        .and_then(|validator| match schema_cost::check(schema) {
            Ok(()) => Ok(validator),
            Err(why) => Err(format!("tool \"{name}\": {field} cannot be used: {why}")),
        })
}

/// Every alias must name a declared top-level property, and must not be one itself.
fn check_aliases(aliases: Map<String, Value>, schema: &Value) -> Result<Map<String, Value>, String> {
    let properties = schema.get("properties").and_then(Value::as_object);
    let declared = |name: &str| properties.is_some_and(|p| p.contains_key(name));
    for (alias, target) in &aliases {
        match target.as_str() {
            Some(t) if declared(t) && !declared(alias) => {}
            Some(t) if declared(alias) => return Err(format!("aliases: \"{alias}\" is a property itself, so it cannot stand for \"{t}\"")),
            _ => return Err(format!("aliases: \"{alias}\" must map to the name of a declared property (got {target})")),
        }
    }
    Ok(aliases)
}

impl Schemas for Tool {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn arguments(&self) -> &Validator {
        &self.validator
    }

    fn output(&self) -> Option<&Validator> {
        self.output_validator.as_ref()
    }
}

impl ToolInfo for Tool {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn risk(&self) -> Risk {
        self.risk
    }

    fn read_only(&self) -> bool {
        self.spec.read_only
    }

    fn idempotent(&self) -> bool {
        self.spec.idempotent
    }

    fn needs_approval(&self) -> bool {
        self.spec.needs_approval
    }

    fn timeout_ms(&self) -> u64 {
        self.timeout_ms
    }
}

impl Registry {
    pub fn register(&mut self, mut spec: ToolSpec, options: &EngineOptions) -> Result<(), String> {
        check_name(&spec.name)?;
        if self.tools.contains_key(&spec.name) && !spec.replace {
            return Err(format!(
                "a tool named \"{}\" is already registered: pick another name, unregister it first, or pass replace: true",
                spec.name
            ));
        }
        let schema = object_schema(&spec.name, spec.parameters.take())?;
        // The lenient copy is needed only to compile the validator from.
        let validation = spec.validation_schema.take();
        let validator = compile(&spec.name, "parameters", validation.as_ref().unwrap_or(&schema))?;
        let checked_output = spec.output_schema.as_ref().filter(|_| !spec.output_check);
        let output_validator = checked_output.map(|o| compile(&spec.name, "outputSchema", o)).transpose()?;
        let named = |e: String| format!("tool \"{}\": {e}", spec.name);
        let retry = match &spec.retry {
            Some(overrides) => options.retry.overridden(overrides).map_err(named)?,
            None => options.retry.clone(),
        };
        let cache = cache_rule(&spec, options).map_err(named)?;
        let default_mode = Mode::parse(&options.dedup.policy)?;
        let dedup = Dedup::declared(spec.dedup.as_ref(), default_mode).map_err(named)?;
        let rate_limit = spec.rate_limit.as_ref().map(RateLimit::parse).transpose().map_err(named)?;
        let aliases = check_aliases(spec.aliases.take().unwrap_or_default(), &schema).map_err(named)?;
        let judge = spec.rollback_when.as_ref().map(judge::rules).transpose().map_err(named)?.unwrap_or_default();
        let checks = checks::declared(spec.path_within.as_ref(), spec.url_hosts.as_ref()).map_err(named)?;
        let risk = spec.risk.unwrap_or(if spec.read_only { Risk::Read } else { Risk::Write });
        let breaker = breaker(spec.breaker.as_ref(), options.breaker.as_ref()).map_err(named)?;
        if let Some(budget) = &spec.budget {
            budget.check("").map_err(named)?;
        }
        let cost = Cost::parse(spec.cost.as_ref()).map_err(named)?;
        let budgets = [(Source::Executor, options.budget.as_ref()), (Source::Tool, spec.budget.as_ref()), (Source::Context, None)];
        let limits = budget::limits(budgets, &spec.name, budget::fixed_cost(cost));
        let tool = Tool {
            limits,
            breaker,
            cost,
            checks,
            risk,
            aliases,
            judge,
            cache,
            dedup,
            rate_limit,
            timeout_ms: options.timeout_for(&spec),
            max_output_chars: spec.max_output_chars.unwrap_or(options.max_output_chars),
            retry,
            schema,
            validator,
            output_validator,
            spec,
        };
        let name = tool.spec.name.clone();
        if self.tools.insert(name.clone(), Arc::new(tool)).is_none() {
            self.order.push(name);
        }
        Ok(())
    }

    pub fn unregister(&mut self, name: &str) -> bool {
        let removed = self.tools.remove(name).is_some();
        if removed {
            self.order.retain(|n| n != name);
        }
        removed
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Tool>> {
        self.tools.get(name)
    }

    /// Tools in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Tool>> {
        self.order.iter().filter_map(|n| self.tools.get(n))
    }

    pub fn list(&self, visible: impl Fn(&Tool) -> bool) -> Value {
        let items = self
            .iter()
            .filter(|t| visible(t))
            .map(|t| {
                let mut item = json!({
                    "name": t.spec.name,
                    "description": t.spec.description,
                    "parameters": t.schema,
                    "readOnly": t.spec.read_only,
                    "idempotent": t.spec.idempotent,
                    "needsApproval": t.spec.needs_approval,
                    "risk": t.risk.as_str(),
                    "untrusted": t.spec.untrusted,
                    "timeoutMs": t.timeout_ms,
                    "maxOutputChars": t.max_output_chars,
                    "retry": t.retry,
                });
                if let Some(ms) = t.spec.idle_timeout_ms {
                    item["idleTimeoutMs"] = json!(ms);
                }
                if let Some(n) = t.spec.max_concurrency {
                    item["maxConcurrency"] = json!(n);
                }
                if let Some(schema) = &t.spec.output_schema {
                    item["outputSchema"] = schema.clone();
                }
                if let Some(origin) = &t.spec.origin {
                    item["origin"] = Value::Object(origin.clone());
                }
                if let Some(breaker) = &t.breaker {
                    item["breaker"] = json!(breaker);
                }
                if let Some(budget) = &t.spec.budget {
                    item["budget"] = json!(budget);
                }
                match t.cost {
                    Cost::Fixed(cost) if cost > 0.0 => item["cost"] = json!(cost),
                    Cost::Host => item["cost"] = json!("function"),
                    Cost::Fixed(_) => {}
                }
                item
            })
            .collect();
        Value::Array(items)
    }
}
