//! The registered tools as each provider's tool definitions.

use serde_json::{json, Map, Value};

use crate::gemini_schema;
use crate::registry::Tool;

/// The provider shapes `definitions` can emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefinitionFormat {
    OpenAiResponses,
    OpenAiChat,
    Anthropic,
    AiSdk,
    Gemini,
    Bedrock,
}

impl DefinitionFormat {
    pub const NAMES: &'static str = "'openai-responses', 'openai-chat', 'anthropic', 'ai-sdk', 'gemini' or 'bedrock'";

    pub fn parse(name: &str) -> Result<Self, String> {
        match name {
            "openai-responses" | "openai" => Ok(Self::OpenAiResponses),
            "openai-chat" | "chat-completions" => Ok(Self::OpenAiChat),
            "anthropic" => Ok(Self::Anthropic),
            "ai-sdk" => Ok(Self::AiSdk),
            "gemini" => Ok(Self::Gemini),
            "bedrock" => Ok(Self::Bedrock),
            other => Err(format!("unknown definitions format \"{other}\": use {}", Self::NAMES)),
        }
    }
}

/// The tools' definitions in `format`, in the order given. Fails, naming the tool and what to change, when a
/// tool cannot be sent in that format (Gemini's schema dialect and names are narrower than JSON Schema's), unless
/// the tool comes from a mounted MCP server: its schema is no one's here to change, and one such tool must not keep
/// the others from being sent, so it is left out, and named with the reason in `left_out` (the host warns).
pub fn definitions<'a>(tools: impl Iterator<Item = &'a Tool>, format: DefinitionFormat, left_out: &mut Vec<(String, String)>) -> Result<Value, String> {
    let mut defs = Vec::new();
    for t in tools {
        match definition(t, format) {
            Ok(def) => defs.push(def),
            Err(reason) if mounted(t) => {
                tracing::warn!(tool = %t.spec.name, %reason, "a mounted tool is left out of the definitions");
                left_out.push((t.spec.name.clone(), reason));
            }
            Err(reason) => return Err(reason),
        }
    }
    Ok(Value::Array(defs))
}

/// A tool a mount registered for an MCP server: its origin names the server.
fn mounted(t: &Tool) -> bool {
    t.spec.origin.as_ref().and_then(|origin| origin.get("server")).is_some_and(Value::is_string)
}

fn definition(t: &Tool, format: DefinitionFormat) -> Result<Value, String> {
    let (name, description, schema) = (&t.spec.name, &t.spec.description, &t.schema);
    Ok(match format {
        // Responses treats a missing `strict` as strict mode, which would make optional parameters required.
        DefinitionFormat::OpenAiResponses => json!({"type": "function", "name": name, "description": description, "parameters": schema, "strict": false}),
        DefinitionFormat::OpenAiChat => json!({
            "type": "function",
            "function": {"name": name, "description": description, "parameters": schema}
        }),
        DefinitionFormat::Anthropic => json!({"name": name, "description": description, "input_schema": schema}),
        // Of these formats only the AI SDK's tools carry an output schema.
        DefinitionFormat::AiSdk => {
            let mut def = json!({"type": "function", "name": name, "description": description, "inputSchema": schema});
            if let Some(output) = &t.spec.output_schema {
                def["outputSchema"] = output.clone();
            }
            def
        }
        DefinitionFormat::Gemini => {
            if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                return Err(format!("tool \"{name}\": Gemini takes only function names that start with a letter or '_'; rename the tool"));
            }
            let mut def = Map::new();
            def.insert("name".into(), json!(name));
            with_description(&mut def, description);
            if let Some(parameters) = gemini_schema::parameters(name, schema)? {
                def.insert("parameters".into(), parameters);
            }
            Value::Object(def)
        }
        DefinitionFormat::Bedrock => {
            let mut spec = Map::new();
            spec.insert("name".into(), json!(name));
            with_description(&mut spec, description);
            spec.insert("inputSchema".into(), json!({"json": schema}));
            json!({"toolSpec": spec})
        }
    })
}

/// Gemini and Bedrock take no empty description (Bedrock's must be at least one character): it is left out.
fn with_description(def: &mut Map<String, Value>, description: &str) {
    if !description.is_empty() {
        def.insert("description".into(), json!(description));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{EngineOptions, ToolSpec};
    use crate::registry::Registry;

    fn registry(specs: &[Value]) -> Registry {
        let mut registry = Registry::default();
        for spec in specs {
            registry.register(ToolSpec::from_json(&spec.to_string()).unwrap(), &EngineOptions::default()).unwrap();
        }
        registry
    }

    /// Over 10,000 schema nodes: more than Gemini's dialect takes.
    fn oversized() -> Value {
        let properties: Map<String, Value> = (0..10_001).map(|i| (format!("p{i}"), json!({"type": "string"}))).collect();
        json!({"type": "object", "properties": properties})
    }

    fn names(defs: &Value) -> Vec<&str> {
        defs.as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap()).collect()
    }

    #[test]
    fn a_mounted_tool_gemini_cannot_take_is_left_out_and_the_others_are_sent() {
        let small = json!({"type": "object", "properties": {"q": {"type": "string"}}});
        let tools = registry(&[
            json!({"name": "mine", "parameters": small}),
            json!({"name": "files__big", "parameters": oversized(), "origin": {"server": "files", "name": "big"}}),
            json!({"name": "files__map", "parameters": {"type": "object", "properties": {"env": {"type": "object", "additionalProperties": {"type": "string"}}}}, "origin": {"server": "files", "name": "map"}}),
            json!({"name": "files__read", "parameters": small, "origin": {"server": "files", "name": "read"}}),
        ]);
        let mut left_out = Vec::new();
        let gemini = definitions(tools.iter().map(|t| &**t), DefinitionFormat::Gemini, &mut left_out).unwrap();
        assert_eq!(names(&gemini), ["mine", "files__read"]);
        assert_eq!(left_out.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>(), ["files__big", "files__map"]);
        assert!(left_out[0].1.contains("too large for Gemini"), "{}", left_out[0].1);
        let anthropic = definitions(tools.iter().map(|t| &**t), DefinitionFormat::Anthropic, &mut Vec::new()).unwrap();
        assert_eq!(names(&anthropic), ["mine", "files__big", "files__map", "files__read"], "other formats take them all");
    }

    #[test]
    fn a_tool_of_the_applications_own_that_gemini_cannot_take_still_fails_the_definitions() {
        // An origin without a server (a title of the application's own) is not a mount's.
        let tools = registry(&[json!({"name": "big", "parameters": oversized(), "origin": {"title": "Big"}}), json!({"name": "small"})]);
        let error = definitions(tools.iter().map(|t| &**t), DefinitionFormat::Gemini, &mut Vec::new()).unwrap_err();
        assert!(error.starts_with("tool \"big\": the parameters schema is too large for Gemini"), "{error}");
    }
}
