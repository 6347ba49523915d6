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
/// tool cannot be sent in that format (Gemini's schema dialect and names are narrower than JSON Schema's).
pub fn definitions<'a>(tools: impl Iterator<Item = &'a Tool>, format: DefinitionFormat) -> Result<Value, String> {
    tools.map(|t| definition(t, format)).collect::<Result<Vec<_>, _>>().map(Value::Array)
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
