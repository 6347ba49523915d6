//! Tool parameters in Gemini's schema dialect: the `Schema` message of the Gemini API and Vertex AI, a subset of
//! OpenAPI 3.0 with uppercase types and no `$ref`, `allOf`, maps or tuples.
//!
//! A keyword Gemini has no field for is dropped when it only narrows the values (`multipleOf`, `uniqueItems`, a
//! closed object...): the gate validates every call against the full schema, so the model loses a hint and nothing
//! more. So are the shapes the Gemini API answers 400 to that only narrow (a `required` name with no property, a
//! keyword of another type); an enum of values other than strings goes into the description. A keyword whose loss
//! would describe a different shape (maps, tuples, `not`, conditionals, recursion) is refused, with what to write
//! instead.

use serde_json::{Map, Number, Value};

/// Counted while converting, so that a graph of `$ref`s used many times fails before it costs exponential time.
const MAX_NODES: usize = 10_000;
/// Bytes of JSON the converted schema may take, counted as values are copied: a definition written in place at
/// every `$ref` copies its enums, descriptions and defaults each time, which the node count does not see.
const MAX_BYTES: usize = 1_000_000;
/// Levels of nesting. A `$ref` and an `allOf` part count as one too: they nest the conversion, and a long chain of
/// them must not overflow the stack.
const MAX_DEPTH: usize = 64;

const JSON_TYPES: &[&str] = &["string", "number", "integer", "boolean", "array", "object", "null"];

/// Keywords that belong to one type: a schema of one type keeps only its type's (Gemini refuses the others), and
/// when a type list becomes an `anyOf`, each goes to its type's branch.
const STRING_KEYWORDS: &[&str] = &["minLength", "maxLength", "pattern", "format", "enum"];
const NUMBER_KEYWORDS: &[&str] = &["minimum", "maximum", "format"];
const ARRAY_KEYWORDS: &[&str] = &["items", "minItems", "maxItems"];
const OBJECT_KEYWORDS: &[&str] = &["properties", "required", "minProperties", "maxProperties", "propertyOrdering"];

/// Beside a `$ref` or an `allOf`, the schema's own annotations describe this use of the shared schema, so they win.
const ANNOTATIONS: &[&str] = &["title", "description", "default", "example"];

/// Where a schema keeps the values Gemini's enum cannot list ("one of: 1, 2") until it is finished, then written
/// into whichever description the merged schema has. No keyword is copied under this name.
const NOTE: &str = "(values)";

const MAP: &str = "it has no map type; list the properties, or take an array of { key, value } objects";
const TUPLE: &str = "it has no tuple type; take an object with named properties, or one schema for every item";
const CONDITIONAL: &str = "it has no conditionals; take an anyOf with one branch per case";
const FLATTER: &str = "refer to shared definitions fewer times, or make the schema flatter";

/// A tool's parameters (a JSON Schema of an object, already checked to say type: "object") in Gemini's dialect;
/// None when the tool takes no parameters (Gemini refuses an OBJECT with no properties; the field may be left unset).
pub fn parameters(tool: &str, schema: &serde_json::Value) -> Result<Option<serde_json::Value>, String> {
    let mut converter = Converter { tool, root: schema, nodes: 0, bytes: 0, open: Vec::new() };
    let converted = converter.schema(schema, "", 0)?;
    let has_properties = converted.get("properties").and_then(Value::as_object).is_some_and(|p| !p.is_empty());
    Ok((has_properties || converted.contains_key("anyOf")).then_some(Value::Object(converted)))
}

struct Converter<'a> {
    tool: &'a str,
    /// The tool's whole schema, which local `$ref`s point into.
    root: &'a Value,
    nodes: usize,
    bytes: usize,
    /// Where the schemas being converted sit (JSON pointers), outermost first: a `$ref` to one of them recurses.
    open: Vec<String>,
}

/// What `type` says: the types other than null, and whether null is one.
struct Declared {
    kinds: Vec<&'static str>,
    null: bool,
}

/// The values an `enum` or `const` allows.
struct Choices<'a> {
    keyword: &'static str,
    /// The values other than null.
    values: Vec<&'a Value>,
    null: bool,
}

/// An `anyOf`'s branches, converted, as Gemini can take them.
enum Alternatives {
    /// A branch matches any value, so the `anyOf` narrows nothing.
    Anything,
    /// One branch besides null ones, its values note not yet written: merged into the schema, nullable when null
    /// was a branch.
    One(Map<String, Value>),
    /// Several branches besides null ones, and whether null was a branch.
    Several { branches: Vec<Value>, null: bool },
}

impl Converter<'_> {
    fn schema(&mut self, schema: &Value, path: &str, depth: usize) -> Result<Map<String, Value>, String> {
        let converted = self.part(schema, path, depth)?;
        Ok(noted(self.pruned(converted, path)?))
    }

    /// A schema converted but not finished. One merged into another (a `$ref`'s target, an `allOf` part) is
    /// finished with the whole: which `required` names and keywords stay, and which description takes its values
    /// note, depend on the whole.
    fn part(&mut self, schema: &Value, path: &str, depth: usize) -> Result<Map<String, Value>, String> {
        self.count(1, path)?;
        if depth > MAX_DEPTH {
            return Err(self.too_deep(path));
        }
        match schema {
            Value::Bool(true) => Ok(Map::new()),
            Value::Bool(false) => {
                let reason = "no value matches it; remove it, or say what it may hold";
                Err(self.refuse("false", " as a schema", path, reason))
            }
            Value::Object(map) => {
                self.open.push(path.to_owned());
                let converted = self.object(map, path, depth);
                self.open.pop();
                converted
            }
            other => {
                Err(format!("tool \"{}\": the schema {} is {other}, not an object or a boolean", self.tool, at(path)))
            }
        }
    }

    fn object(&mut self, map: &Map<String, Value>, path: &str, depth: usize) -> Result<Map<String, Value>, String> {
        let declared = map.get("type").map(|t| self.types(t, path)).transpose()?;
        let choices = self.choices(map, path)?;
        let kinds: Vec<&str> = match (&declared, &choices) {
            (Some(declared), Some(choices)) => {
                declared.kinds.iter().copied().filter(|k| choices.values.iter().any(|v| fits(v, k))).collect()
            }
            (Some(declared), None) => declared.kinds.clone(),
            // Values of arrays or objects say nothing of their items or properties, which Gemini needs beside
            // those types: such a schema stays untyped.
            (None, Some(choices)) => shared_type(&choices.values).filter(|t| !matches!(*t, "array" | "object")).into_iter().collect(),
            (None, None) if map.contains_key("properties") => vec!["object"],
            (None, None) if map.contains_key("items") => vec!["array"],
            (None, None) => Vec::new(),
        };
        // A type implied by `properties` or `items` says nothing of null.
        let null = match (&declared, &choices) {
            (Some(declared), Some(choices)) => declared.null && choices.null,
            (Some(declared), None) => declared.null,
            (None, Some(choices)) => choices.null,
            (None, None) => false,
        };
        // A type was given, or values that are all null, and no type but null is left.
        let only_null =
            kinds.is_empty() && (declared.is_some() || choices.as_ref().is_some_and(|c| c.values.is_empty()));
        if only_null && !null {
            let keyword = choices.as_ref().map_or("enum", |c| c.keyword);
            let reason = "none of its values has a type that \"type\" allows; make them agree";
            return Err(self.refuse(keyword, "", path, reason));
        }
        // The values the type lets through: Gemini's enum when they are strings, else a note in the description.
        let listed: Vec<&Value> = choices.as_ref().map_or_else(Vec::new, |c| {
            c.values.iter().copied().filter(|v| declared.is_none() || kinds.iter().any(|k| fits(v, k))).collect()
        });
        // The Gemini API refuses an empty string in an enum ("cannot be empty"): such values go in the note too.
        let strings = !listed.is_empty() && listed.iter().all(|v| v.as_str().is_some_and(|s| !s.is_empty()));
        let note = match &choices {
            Some(choices) if !listed.is_empty() && !strings => Some(note(choices.keyword, &listed, null)),
            _ => None,
        };
        let split = kinds.len() > 1;
        if split {
            if let Some(keyword) = ["anyOf", "oneOf"].into_iter().find(|k| map.contains_key(*k)) {
                let reason = format!(
                    "a type list becomes an anyOf with one branch per type, and this schema has its own {keyword}; \
                     move the types into its branches"
                );
                return Err(self.refuse("type", " as a list", path, &reason));
            }
            if depth >= MAX_DEPTH {
                return Err(self.too_deep(path));
            }
        }
        if map.contains_key("anyOf") && map.contains_key("oneOf") {
            let reason = "Gemini reads oneOf as anyOf and a schema has one anyOf; make them one list of branches";
            return Err(self.refuse("oneOf", " beside anyOf", path, reason));
        }
        // The branches of a type list put one more level between this schema and its subschemas.
        let inner = depth + 1 + usize::from(split);

        let mut own = Map::new();
        let mut one_branch = None;
        let mut null_branch = false;
        for (key, value) in map {
            match key.as_str() {
                "description" | "title" | "format" | "pattern" | "minimum" | "maximum" | "default" | "required"
                | "propertyOrdering" => self.keep(&mut own, key, value.clone(), path)?,
                "minItems" | "maxItems" | "minLength" | "maxLength" | "minProperties" | "maxProperties" => {
                    let count = self.count_text(key, value, path)?;
                    self.keep(&mut own, key, count, path)?;
                }
                "properties" => {
                    let properties = self.properties(value, path, inner)?;
                    self.spend(entry_bytes(key), path)?;
                    own.insert(key.clone(), Value::Object(properties));
                }
                "items" if value.is_array() => return Err(self.refuse("items", " as an array", path, TUPLE)),
                "items" => {
                    let items = self.schema(value, &child(path, "items"), inner)?;
                    self.spend(entry_bytes(key), path)?;
                    own.insert(key.clone(), Value::Object(items));
                }
                // The model picks one branch either way; the gate still checks oneOf's "exactly one".
                "anyOf" | "oneOf" => match self.alternatives(key, value, path, inner)? {
                    Alternatives::Anything => {}
                    Alternatives::One(branch) => one_branch = Some((key.as_str(), branch)),
                    Alternatives::Several { branches, null } => {
                        null_branch = null;
                        self.spend(entry_bytes("anyOf"), path)?;
                        own.insert("anyOf".into(), Value::Array(branches));
                    }
                },
                "enum" | "const" if strings && !own.contains_key("enum") => {
                    let values = listed.iter().map(|value| (*value).clone()).collect();
                    self.keep(&mut own, "enum", Value::Array(values), path)?;
                }
                "enum" | "const" if !own.contains_key(NOTE) => {
                    if let Some(note) = &note {
                        self.keep(&mut own, NOTE, note.as_str().into(), path)?;
                    }
                }
                "examples" => {
                    if let Some(first) = value.as_array().and_then(|examples| examples.first()) {
                        self.keep(&mut own, "example", first.clone(), path)?;
                    }
                }
                "additionalProperties" | "unevaluatedProperties" if !is_boolean_schema(value) => {
                    return Err(self.refuse(key, " as a schema", path, MAP))
                }
                "patternProperties" if has_entries(value) => return Err(self.refuse(key, "", path, MAP)),
                "prefixItems" => return Err(self.refuse(key, "", path, TUPLE)),
                "unevaluatedItems" if !is_boolean_schema(value) => {
                    let reason = "it cannot say what may follow the listed items; give items one schema";
                    return Err(self.refuse(key, " as a schema", path, reason));
                }
                "not" => {
                    let reason =
                        "it has no negation; say what is allowed instead (an enum, or an anyOf of the allowed shapes)";
                    return Err(self.refuse(key, "", path, reason));
                }
                "if" | "then" | "else" => return Err(self.refuse(key, "", path, CONDITIONAL)),
                "dependentSchemas" if has_entries(value) => return Err(self.refuse(key, "", path, CONDITIONAL)),
                "dependencies" if value.as_object().is_some_and(|d| d.values().any(|v| !v.is_array())) => {
                    return Err(self.refuse(key, " with a schema", path, CONDITIONAL))
                }
                "$dynamicRef" | "$recursiveRef" => {
                    return Err(self.refuse(key, "", path, "it has no $ref; write out the schema it stands for"))
                }
                _ => {}
            }
        }

        let mut converted = Map::new();
        match kinds.as_slice() {
            [] if only_null => self.keep(&mut converted, "type", "NULL".into(), path)?,
            // With no type, nullable is needed only where an anyOf's null branch was taken out.
            [] if null_branch => self.keep(&mut converted, "nullable", true.into(), path)?,
            [] => {}
            [kind] => {
                self.keep(&mut converted, "type", kind.to_ascii_uppercase().into(), path)?;
                if null {
                    self.keep(&mut converted, "nullable", true.into(), path)?;
                }
            }
            _ => {
                self.count(kinds.len(), path)?;
                if null {
                    self.keep(&mut converted, "nullable", true.into(), path)?;
                }
                let (outer, branches) = self.split_by_type(own, &kinds, path)?;
                converted.insert("anyOf".into(), Value::Array(branches));
                own = outer;
            }
        }
        converted.extend(own);

        let mut parts = Vec::new();
        if let Some(reference) = map.get("$ref") {
            parts.push(("$ref", self.reference(reference, path, depth + 1)?));
        }
        if let Some(all_of) = map.get("allOf") {
            let Value::Array(all_of) = all_of else {
                return Err(self.invalid("allOf", path, "must be an array of schemas"));
            };
            let at = child(path, "allOf");
            for (i, part) in all_of.iter().enumerate() {
                parts.push(("allOf", self.part(part, &child(&at, &i.to_string()), depth + 1)?));
            }
        }
        parts.extend(one_branch);
        if parts.is_empty() {
            return Ok(converted);
        }
        self.merged(converted, parts, path)
    }

    /// A converted schema without what the Gemini API answers 400 to: keywords of another type than its own,
    /// `required` names that are not among its properties, empty `properties`. An array needs its `items`.
    fn pruned(&self, mut schema: Map<String, Value>, path: &str) -> Result<Map<String, Value>, String> {
        if let Some(kind) = schema.get("type").and_then(Value::as_str).map(str::to_ascii_lowercase) {
            let own = keywords_of(&kind);
            schema.retain(|key, _| own.contains(&key.as_str()) || !is_typed_keyword(key));
            if kind == "array" && !schema.contains_key("items") {
                let what = "is missing: Gemini needs an array's items schema; give it items";
                return Err(self.invalid("items", path, what));
            }
        }
        if schema.get("properties").and_then(Value::as_object).is_some_and(Map::is_empty) {
            schema.shift_remove("properties");
        }
        let required: Vec<Value> = match (schema.get("required"), schema.get("properties")) {
            (Some(Value::Array(names)), Some(Value::Object(properties))) => {
                names.iter().filter(|name| name.as_str().is_some_and(|n| properties.contains_key(n))).cloned().collect()
            }
            _ => Vec::new(),
        };
        if required.is_empty() {
            schema.shift_remove("required");
        } else {
            schema.insert("required".into(), Value::Array(required));
        }
        Ok(schema)
    }

    /// A type list's schema as an outer schema (annotations) and one branch per type with that type's keywords.
    fn split_by_type(
        &mut self,
        schema: Map<String, Value>,
        kinds: &[&str],
        path: &str,
    ) -> Result<(Map<String, Value>, Vec<Value>), String> {
        let mut branches = Vec::with_capacity(kinds.len());
        for kind in kinds {
            let mut branch = Map::new();
            self.keep(&mut branch, "type", kind.to_ascii_uppercase().into(), path)?;
            branches.push(branch);
        }
        let mut outer = Map::new();
        for (key, value) in schema {
            if !is_typed_keyword(&key) {
                outer.insert(key, value);
                continue;
            }
            for (kind, branch) in kinds.iter().zip(&mut branches) {
                if keywords_of(kind).contains(&key.as_str()) {
                    branch.insert(key.clone(), value.clone());
                }
            }
        }
        let branches = branches.into_iter().map(|branch| self.pruned(branch, path).map(Value::Object));
        Ok((outer, branches.collect::<Result<_, _>>()?))
    }

    /// A schema and the parts it must also match (what its `$ref` points to, its `allOf`, an `anyOf`'s one branch)
    /// as one schema.
    fn merged(
        &self,
        mut schema: Map<String, Value>,
        parts: Vec<(&str, Map<String, Value>)>,
        path: &str,
    ) -> Result<Map<String, Value>, String> {
        let own: Vec<&str> = ANNOTATIONS.iter().copied().filter(|k| schema.contains_key(*k)).collect();
        // Null passes the whole only when it passes every part.
        let mut null = admits_null(&schema);
        for (keyword, part) in parts {
            null &= admits_null(&part);
            for (key, value) in part {
                self.merge_keyword(&mut schema, key, value, keyword, path, &own)?;
            }
        }
        if !null {
            schema.shift_remove("nullable");
        }
        let mut ordered = Map::new();
        for key in ["type", "nullable"] {
            if let Some(value) = schema.shift_remove(key) {
                ordered.insert(key.into(), value);
            }
        }
        ordered.extend(schema);
        Ok(ordered)
    }

    fn merge_keyword(
        &self,
        schema: &mut Map<String, Value>,
        key: String,
        value: Value,
        keyword: &str,
        path: &str,
        own: &[&str],
    ) -> Result<(), String> {
        let disagree = |what: String| {
            let reason = match keyword {
                "$ref" => {
                    format!("the keywords beside it disagree with the schema it points to on {what}; make them agree")
                }
                "anyOf" | "oneOf" => format!(
                    "the keywords beside it disagree with its one branch on {what}; make them agree, or move them \
                     into the branch"
                ),
                _ => format!(
                    "its parts disagree on {what}, and Gemini has no allOf; make them agree, or write one schema"
                ),
            };
            self.refuse(keyword, "", path, &reason)
        };
        match (key.as_str(), schema.get_mut(&key), value) {
            (_, None, value) => {
                schema.insert(key, value);
            }
            ("properties", Some(Value::Object(properties)), Value::Object(more)) => {
                for (name, property) in more {
                    match properties.get(&name) {
                        None => {
                            properties.insert(name, property);
                        }
                        Some(existing) if *existing == property => {}
                        Some(_) => return Err(disagree(format!("property \"{name}\""))),
                    }
                }
            }
            ("required", Some(Value::Array(required)), Value::Array(more)) => {
                for name in more {
                    if !required.contains(&name) {
                        required.push(name);
                    }
                }
            }
            // The values only narrow, and the gate checks every list: the first note is hint enough.
            (NOTE, Some(_), _) => {}
            // Of the numbers, both allow the integers.
            ("type", Some(existing), value) if is_number_pair(existing, &value) => *existing = "INTEGER".into(),
            (_, Some(_), _) if own.contains(&key.as_str()) => {}
            (_, Some(existing), value) if *existing == value => {}
            (_, Some(_), _) => return Err(disagree(format!("\"{key}\""))),
        }
        Ok(())
    }

    fn reference(&mut self, reference: &Value, path: &str, depth: usize) -> Result<Map<String, Value>, String> {
        let Value::String(target) = reference else {
            return Err(self.invalid("$ref", path, "must be a string"));
        };
        let how = format!(" to \"{target}\"");
        let Some(fragment) = target.strip_prefix('#') else {
            let reason =
                "only refs into the tool's own schema (#/...) can be inlined; put what it points to under $defs";
            return Err(self.refuse("$ref", &how, path, reason));
        };
        let Some(pointer) = json_pointer(fragment) else {
            let reason = "it is not a JSON pointer (#/...) into the tool's schema, so there is nothing to inline";
            return Err(self.refuse("$ref", &how, path, reason));
        };
        if self.open.contains(&pointer) {
            let reason = "it leads back into itself, and Gemini's schema cannot refer to itself: it has no $ref; \
                          make the recursion a fixed depth";
            return Err(self.refuse("$ref", &how, path, reason));
        }
        let Some(schema) = self.root.pointer(&pointer) else {
            return Err(self.refuse("$ref", &how, path, "it points to nothing in the tool's schema; fix the pointer"));
        };
        self.part(schema, &pointer, depth)
    }

    fn types(&self, value: &Value, path: &str) -> Result<Declared, String> {
        let names = match value {
            Value::Array(names) => names.as_slice(),
            single => std::slice::from_ref(single),
        };
        let mut declared = Declared { kinds: Vec::new(), null: false };
        for name in names {
            match name.as_str().and_then(|n| JSON_TYPES.iter().find(|t| **t == n)) {
                Some(&"null") => declared.null = true,
                Some(kind) if !declared.kinds.contains(kind) => declared.kinds.push(kind),
                Some(_) => {}
                None => {
                    let what = format!("has {name}, which is not a JSON Schema type ({})", JSON_TYPES.join(", "));
                    return Err(self.invalid("type", path, &what));
                }
            }
        }
        if declared.kinds.is_empty() && !declared.null {
            return Err(self.invalid("type", path, "lists no type"));
        }
        // Every integer is a number, so "number" alone says the same.
        if declared.kinds.contains(&"number") {
            declared.kinds.retain(|k| *k != "integer");
        }
        Ok(declared)
    }

    /// `enum` and `const` as one list of values (a `const` must be one of the `enum`'s values).
    fn choices<'m>(&self, map: &'m Map<String, Value>, path: &str) -> Result<Option<Choices<'m>>, String> {
        let listed = match map.get("enum") {
            Some(Value::Array(values)) => Some(values),
            Some(_) => return Err(self.invalid("enum", path, "must be an array")),
            None => None,
        };
        let Some(constant) = map.get("const") else {
            return listed.map(|values| self.choices_of("enum", values, path)).transpose();
        };
        if listed.is_some_and(|values| !values.contains(constant)) {
            let reason = "it is not one of the enum's values, so no value is valid; drop one of them";
            return Err(self.refuse("const", "", path, reason));
        }
        self.choices_of("const", std::slice::from_ref(constant), path).map(Some)
    }

    fn choices_of<'m>(&self, keyword: &'static str, values: &'m [Value], path: &str) -> Result<Choices<'m>, String> {
        if values.is_empty() {
            let reason = "it lists no value, so nothing is valid; list the values allowed";
            return Err(self.refuse(keyword, "", path, reason));
        }
        let (nulls, values): (Vec<&Value>, Vec<&Value>) = values.iter().partition(|value| value.is_null());
        Ok(Choices { keyword, values, null: !nulls.is_empty() })
    }

    fn properties(&mut self, value: &Value, path: &str, depth: usize) -> Result<Map<String, Value>, String> {
        let Value::Object(properties) = value else {
            return Err(self.invalid("properties", path, "must be an object of schemas"));
        };
        let at = child(path, "properties");
        let mut converted = Map::new();
        for (name, schema) in properties {
            let property = self.schema(schema, &child(&at, name), depth)?;
            self.spend(entry_bytes(name), path)?;
            converted.insert(name.clone(), Value::Object(property));
        }
        Ok(converted)
    }

    fn alternatives(&mut self, keyword: &str, value: &Value, path: &str, depth: usize) -> Result<Alternatives, String> {
        let Value::Array(branches) = value else {
            return Err(self.invalid(keyword, path, "must be an array of schemas"));
        };
        let at = child(path, keyword);
        let mut converted = Vec::with_capacity(branches.len());
        for (i, branch) in branches.iter().enumerate() {
            let branch_path = child(&at, &i.to_string());
            let branch = self.part(branch, &branch_path, depth)?;
            converted.push(self.pruned(branch, &branch_path)?);
        }
        if converted.iter().any(Map::is_empty) {
            return Ok(Alternatives::Anything);
        }
        // zod's `.nullable()` of an object or a union: the schema, or null.
        let (nulls, others): (Vec<_>, Vec<_>) =
            converted.into_iter().partition(|branch| branch.get("type").is_some_and(|t| t == "NULL"));
        let (null, others) = if others.is_empty() { (false, nulls) } else { (!nulls.is_empty(), others) };
        match <[Map<String, Value>; 1]>::try_from(others) {
            Ok([mut one]) => {
                if null && !admits_null(&one) {
                    self.keep(&mut one, "nullable", true.into(), path)?;
                }
                Ok(Alternatives::One(one))
            }
            Err(several) => {
                let branches = several.into_iter().map(|branch| Value::Object(noted(branch))).collect();
                Ok(Alternatives::Several { branches, null })
            }
        }
    }

    /// The six counts are int64 in Gemini's protocol, which its JSON writes as strings.
    fn count_text(&self, keyword: &str, value: &Value, path: &str) -> Result<Value, String> {
        let whole = value.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0);
        let text = value.as_u64().map(|n| n.to_string()).or_else(|| whole.map(|f| format!("{f:.0}")));
        text.map(Value::from).ok_or_else(|| self.invalid(keyword, path, "must be a non-negative integer"))
    }

    fn count(&mut self, nodes: usize, path: &str) -> Result<(), String> {
        self.nodes += nodes;
        if self.nodes > MAX_NODES {
            let what = format!("it has more than {MAX_NODES} schema nodes");
            return Err(self.too_large(&what, FLATTER, path));
        }
        Ok(())
    }

    /// Puts a value into a converted schema, its JSON counted against the size bound first.
    fn keep(&mut self, into: &mut Map<String, Value>, key: &str, value: Value, path: &str) -> Result<(), String> {
        self.spend(entry_bytes(key) + json_bytes(&value), path)?;
        into.insert(key.to_owned(), value);
        Ok(())
    }

    fn spend(&mut self, bytes: usize, path: &str) -> Result<(), String> {
        self.bytes = self.bytes.saturating_add(bytes);
        if self.bytes > MAX_BYTES {
            let what = format!("it is over {MAX_BYTES} bytes of JSON");
            let advice = "refer to shared definitions fewer times, or shorten their enums, descriptions and defaults";
            return Err(self.too_large(&what, advice, path));
        }
        Ok(())
    }

    fn refuse(&self, keyword: &str, how: &str, path: &str, reason: &str) -> String {
        format!("tool \"{}\": Gemini cannot take \"{keyword}\"{how} ({}): {reason}", self.tool, at(path))
    }

    fn invalid(&self, keyword: &str, path: &str, what: &str) -> String {
        format!("tool \"{}\": \"{keyword}\" ({}) {what}", self.tool, at(path))
    }

    fn too_deep(&self, path: &str) -> String {
        let what = format!("it nests deeper than {MAX_DEPTH} levels (a $ref or an allOf part counts as one)");
        self.too_large(&what, FLATTER, path)
    }

    fn too_large(&self, what: &str, advice: &str, path: &str) -> String {
        format!(
            "tool \"{}\": the parameters schema is too large for Gemini once its $refs are written in place: {what} \
             ({}); {advice}",
            self.tool,
            at(path)
        )
    }
}

fn keywords_of(json_type: &str) -> &'static [&'static str] {
    match json_type {
        "string" => STRING_KEYWORDS,
        "number" | "integer" => NUMBER_KEYWORDS,
        "array" => ARRAY_KEYWORDS,
        "object" => OBJECT_KEYWORDS,
        _ => &[],
    }
}

fn is_typed_keyword(key: &str) -> bool {
    [STRING_KEYWORDS, NUMBER_KEYWORDS, ARRAY_KEYWORDS, OBJECT_KEYWORDS].iter().any(|keywords| keywords.contains(&key))
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if is_integer(n) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether a value has the JSON type; every integer is a number too.
fn fits(value: &Value, json_type_name: &str) -> bool {
    let own = json_type(value);
    own == json_type_name || (own == "integer" && json_type_name == "number")
}

/// The JSON type the values share (number for integers and fractions), None when they differ or there are none.
fn shared_type(values: &[&Value]) -> Option<&'static str> {
    let mut types = values.iter().map(|value| json_type(value));
    let first = types.next()?;
    types.try_fold(first, |shared, next| match (shared, next) {
        _ if shared == next => Some(shared),
        ("integer" | "number", "integer" | "number") => Some("number"),
        _ => None,
    })
}

/// The values of an `enum` ("one of: 1, 2") or a `const` ("always: 3") as JSON text, null too when it is valid.
fn note(keyword: &str, values: &[&Value], null: bool) -> String {
    let mut texts: Vec<String> = values.iter().map(|value| value.to_string()).collect();
    if null {
        texts.push("null".to_owned());
    }
    let lead = if keyword == "const" { "always" } else { "one of" };
    format!("{lead}: {}", texts.join(", "))
}

/// A schema with its values note written into the description: "<description> (one of: 1, 2)", or "One of: 1, 2"
/// where the note stood when there is no description.
fn noted(schema: Map<String, Value>) -> Map<String, Value> {
    let Some(Value::String(note)) = schema.get(NOTE) else {
        return schema;
    };
    let note = note.clone();
    let described = schema.get("description").is_some_and(Value::is_string);
    let capitalized = || note[..1].to_ascii_uppercase() + &note[1..];
    schema
        .into_iter()
        .filter_map(|(key, value)| match (key.as_str(), value) {
            (NOTE, _) if described => None,
            (NOTE, _) => Some(("description".to_owned(), capitalized().into())),
            ("description", Value::String(description)) => Some((key, format!("{description} ({note})").into())),
            ("description", _) => None,
            (_, value) => Some((key, value)),
        })
        .collect()
}

/// A key's quotes, colon and comma beside its text.
fn entry_bytes(key: &str) -> usize {
    key.len() + 4
}

/// The length of a value's JSON text, counted without writing it out.
fn json_bytes(value: &Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    serde_json::to_writer(&mut counter, value).map_or(usize::MAX, |()| counter.0)
}

/// Whether null passes a converted schema.
fn admits_null(schema: &Map<String, Value>) -> bool {
    if schema.get("nullable") == Some(&Value::Bool(true)) {
        return true;
    }
    match schema.get("type") {
        Some(t) => t == "NULL",
        None => schema
            .get("anyOf")
            .and_then(Value::as_array)
            .is_none_or(|branches| branches.iter().any(|b| b.as_object().is_some_and(admits_null))),
    }
}

fn is_number_pair(a: &Value, b: &Value) -> bool {
    (a == "INTEGER" && b == "NUMBER") || (a == "NUMBER" && b == "INTEGER")
}

fn is_integer(n: &Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
}

/// `true`, `false`, or `{}` (which says the same as `true`).
fn is_boolean_schema(value: &Value) -> bool {
    value.is_boolean() || value.as_object().is_some_and(Map::is_empty)
}

fn has_entries(value: &Value) -> bool {
    value.as_object().is_some_and(|map| !map.is_empty())
}

/// A `$ref`'s fragment as the JSON pointer it spells (percent-decoded), None when it is not one. Only `~0` and `~1`
/// escapes are allowed, so that one place has one spelling and recursion is recognized.
fn json_pointer(fragment: &str) -> Option<String> {
    let bytes = fragment.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).filter(|h| h.iter().all(u8::is_ascii_hexdigit))?;
            decoded.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            i += 3;
        } else {
            decoded.push(bytes[i]);
            i += 1;
        }
    }
    let pointer = String::from_utf8(decoded).ok()?;
    let rooted = pointer.is_empty() || pointer.starts_with('/');
    let escapes = pointer.split('~').skip(1).all(|rest| rest.starts_with(['0', '1']));
    (rooted && escapes).then_some(pointer)
}

fn child(path: &str, token: &str) -> String {
    format!("{path}/{}", token.replace('~', "~0").replace('/', "~1"))
}

fn at(path: &str) -> String {
    if path.is_empty() {
        "at the top".to_owned()
    } else {
        format!("at {path}")
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pretty(value: &Value) -> String {
        serde_json::to_string_pretty(value).expect("JSON serializes")
    }

    /// Compared as text, so that key order counts too.
    fn assert_converts(schema: Value, expected: Value) {
        let converted = parameters("lookup", &schema).expect("converts").expect("has parameters");
        assert_eq!(pretty(&converted), pretty(&expected));
        assert_gemini_takes(&converted, "");
    }

    /// The fields of Gemini's `Schema`, and the shapes its API answers 400 to.
    fn assert_gemini_takes(schema: &Value, path: &str) {
        const FIELDS: &[&str] = &[
            "anyOf",
            "default",
            "description",
            "enum",
            "example",
            "format",
            "items",
            "maxItems",
            "maxLength",
            "maxProperties",
            "maximum",
            "minItems",
            "minLength",
            "minProperties",
            "minimum",
            "nullable",
            "pattern",
            "properties",
            "propertyOrdering",
            "required",
            "title",
            "type",
        ];
        let node = schema.as_object().expect("a schema is an object");
        let kind = node.get("type").and_then(Value::as_str).map(str::to_ascii_lowercase);
        for key in node.keys() {
            assert!(FIELDS.contains(&key.as_str()), "{path}: {key} is no field of Gemini's");
            if let Some(kind) = &kind {
                assert!(!is_typed_keyword(key) || keywords_of(kind).contains(&key.as_str()), "{path}: {key} on {kind}");
            }
        }
        assert!(kind.as_deref() != Some("array") || node.contains_key("items"), "{path}: an array without items");
        assert!(node.get("enum").is_none_or(|e| e.as_array().is_some_and(|e| e.iter().all(Value::is_string))));
        let properties = node.get("properties").map(|p| p.as_object().expect("properties are an object"));
        assert!(properties.is_none_or(|p| !p.is_empty()), "{path}: empty properties");
        for name in node.get("required").and_then(Value::as_array).into_iter().flatten() {
            let name = name.as_str().expect("a required name is a string");
            assert!(properties.is_some_and(|p| p.contains_key(name)), "{path}: required {name} is no property");
        }
        for (name, property) in properties.into_iter().flatten() {
            assert_gemini_takes(property, &child(&child(path, "properties"), name));
        }
        if let Some(items) = node.get("items") {
            assert_gemini_takes(items, &child(path, "items"));
        }
        for (i, branch) in node.get("anyOf").and_then(Value::as_array).into_iter().flatten().enumerate() {
            assert!(branch.as_object().is_some_and(|b| !b.is_empty()), "{path}: an anyOf branch that is {{}}");
            assert_gemini_takes(branch, &child(&child(path, "anyOf"), &i.to_string()));
        }
    }

    /// One property `p` holding `schema`, so that a rule is seen where it usually applies: below the top.
    fn assert_property(schema: Value, expected: Value) {
        assert_converts(
            json!({"type": "object", "properties": {"p": schema}}),
            json!({"type": "OBJECT", "properties": {"p": expected}}),
        );
    }

    fn refusal(schema: Value) -> String {
        parameters("lookup", &schema).expect_err("refused")
    }

    fn assert_refused(schema: Value, keyword: &str, path: &str) -> String {
        let message = refusal(schema);
        assert!(message.starts_with("tool \"lookup\": "), "{message}");
        assert!(message.contains(&format!("\"{keyword}\"")), "{keyword}: {message}");
        assert!(message.contains(&format!("({})", at(path))), "{path}: {message}");
        message
    }

    fn assert_property_refused(schema: Value, keyword: &str) -> String {
        assert_refused(json!({"type": "object", "properties": {"p": schema}}), keyword, "/properties/p")
    }

    #[test]
    fn zod_object_keeps_what_gemini_has_and_drops_the_rest() {
        // z.toJSONSchema(z.object({ name: z.string().min(1), tags: z.array(z.string()).max(5),
        //   age: z.number().int().optional(), kind: z.enum(['a','b']), nick: z.string().nullable() })), zod 4.
        let zod = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "tags": {"maxItems": 5, "type": "array", "items": {"type": "string"}},
                "age": {"type": "integer", "minimum": -9007199254740991_i64, "maximum": 9007199254740991_i64},
                "kind": {"type": "string", "enum": ["a", "b"]},
                "nick": {"type": ["string", "null"]}
            },
            "required": ["name", "tags", "kind", "nick"],
            "additionalProperties": false
        });
        assert_converts(
            zod,
            json!({
                "type": "OBJECT",
                "properties": {
                    "name": {"type": "STRING", "minLength": "1"},
                    "tags": {"type": "ARRAY", "maxItems": "5", "items": {"type": "STRING"}},
                    "age": {"type": "INTEGER", "minimum": -9007199254740991_i64, "maximum": 9007199254740991_i64},
                    "kind": {"type": "STRING", "enum": ["a", "b"]},
                    "nick": {"type": "STRING", "nullable": true}
                },
                "required": ["name", "tags", "kind", "nick"]
            }),
        );
    }

    #[test]
    fn kept_keywords_pass_through() {
        assert_converts(
            json!({
                "type": "object",
                "title": "Search",
                "description": "Find documents",
                "properties": {
                    "q": {"type": "string", "format": "email", "pattern": "^a", "default": "a@b.c"},
                    "n": {"type": "number", "minimum": 0, "maximum": 9.5},
                    "tags": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}
                },
                "required": ["q"],
                "propertyOrdering": ["q", "n", "tags"]
            }),
            json!({
                "type": "OBJECT",
                "title": "Search",
                "description": "Find documents",
                "properties": {
                    "q": {"type": "STRING", "format": "email", "pattern": "^a", "default": "a@b.c"},
                    "n": {"type": "NUMBER", "minimum": 0, "maximum": 9.5},
                    "tags": {"type": "ARRAY", "items": {"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}]}}
                },
                "required": ["q"],
                "propertyOrdering": ["q", "n", "tags"]
            }),
        );
    }

    #[test]
    fn no_parameters_is_none() {
        for schema in [
            json!({"type": "object"}),
            json!({"type": "object", "properties": {}}),
            json!({"$schema": "x", "type": "object", "properties": {}, "required": [], "additionalProperties": false, "description": "d"}),
        ] {
            assert_eq!(parameters("lookup", &schema), Ok(None), "{schema}");
        }
        // A map at the top is not "no parameters".
        assert_refused(
            json!({"type": "object", "additionalProperties": {"type": "string"}}),
            "additionalProperties",
            "",
        );
    }

    #[test]
    fn types_are_uppercase_and_null_becomes_nullable() {
        assert_converts(
            json!({"type": "object", "properties": {
                "s": {"type": "string"}, "i": {"type": "integer"}, "b": {"type": "boolean"},
                "o": {"description": "d", "type": ["object", "null"], "properties": {"x": {"type": "number"}}},
                "n": {"type": "null"}, "l": {"type": ["null"]}
            }}),
            json!({"type": "OBJECT", "properties": {
                "s": {"type": "STRING"}, "i": {"type": "INTEGER"}, "b": {"type": "BOOLEAN"},
                "o": {"type": "OBJECT", "nullable": true, "description": "d", "properties": {"x": {"type": "NUMBER"}}},
                "n": {"type": "NULL"}, "l": {"type": "NULL"}
            }}),
        );
    }

    #[test]
    fn type_list_becomes_one_branch_per_type() {
        assert_property(
            json!({
                "type": ["string", "number", "null"],
                "description": "a code or a count",
                "minLength": 1,
                "minimum": 0,
                "format": "x",
                "default": "a",
                "examples": ["a", 1],
                "items": {"type": "string"}
            }),
            json!({
                "nullable": true,
                "anyOf": [
                    {"type": "STRING", "minLength": "1", "format": "x"},
                    {"type": "NUMBER", "minimum": 0, "format": "x"}
                ],
                "description": "a code or a count",
                "default": "a",
                "example": "a"
            }),
        );
        assert_property(
            json!({
                "type": ["array", "object", "boolean"],
                "items": {"type": "string"},
                "maxItems": 2,
                "properties": {"a": {"type": "string"}},
                "required": ["a"],
                "maxProperties": 1
            }),
            json!({"anyOf": [
                {"type": "ARRAY", "items": {"type": "STRING"}, "maxItems": "2"},
                {"type": "OBJECT", "properties": {"a": {"type": "STRING"}}, "required": ["a"], "maxProperties": "1"},
                {"type": "BOOLEAN"}
            ]}),
        );
        // Every integer is a number.
        assert_property(json!({"type": ["integer", "number"]}), json!({"type": "NUMBER"}));
    }

    #[test]
    fn type_list_beside_its_own_any_of_is_refused() {
        let anyof = json!({"type": ["string", "number"], "anyOf": [{"minLength": 1}, {"minimum": 1}]});
        assert_property_refused(anyof, "type");
        assert_property_refused(json!({"type": ["string", "number"], "oneOf": [{"minLength": 1}]}), "type");
        // One type and null is no anyOf.
        assert_property(
            json!({"type": ["string", "null"], "anyOf": [{"minLength": 1}, {"maxLength": 0}]}),
            json!({"type": "STRING", "nullable": true, "anyOf": [{"minLength": "1"}, {"maxLength": "0"}]}),
        );
    }

    #[test]
    fn type_is_implied_by_what_the_schema_says() {
        assert_converts(
            json!({"properties": {
                "o": {"properties": {"a": {}}},
                "a": {"items": {"type": "string"}},
                "s": {"enum": ["x", "y"]},
                "i": {"enum": [1, 2.0]},
                "n": {"enum": [1, 2.5]},
                "c": {"const": "x"},
                "b": {"enum": [true, false]},
                "h": {"const": {"a": 1}},
                "any": {"enum": ["a", 1]}
            }}),
            json!({"type": "OBJECT", "properties": {
                "o": {"type": "OBJECT", "properties": {"a": {}}},
                "a": {"type": "ARRAY", "items": {"type": "STRING"}},
                "s": {"type": "STRING", "enum": ["x", "y"]},
                "i": {"type": "INTEGER", "description": "One of: 1, 2.0"},
                "n": {"type": "NUMBER", "description": "One of: 1, 2.5"},
                "c": {"type": "STRING", "enum": ["x"]},
                "b": {"type": "BOOLEAN", "description": "One of: true, false"},
                "h": {"description": "Always: {\"a\":1}"},
                // Values of different types imply none.
                "any": {"description": "One of: \"a\", 1"}
            }}),
        );
    }

    #[test]
    fn counts_are_strings() {
        assert_property(
            json!({"type": "array", "minItems": 1, "maxItems": 3.0, "items": {
                "type": "object", "minProperties": 0, "maxProperties": 4,
                "properties": {"s": {"type": "string", "minLength": 2, "maxLength": 10}}
            }}),
            json!({"type": "ARRAY", "minItems": "1", "maxItems": "3", "items": {
                "type": "OBJECT", "minProperties": "0", "maxProperties": "4",
                "properties": {"s": {"type": "STRING", "minLength": "2", "maxLength": "10"}}
            }}),
        );
        let message = assert_property_refused(json!({"type": "string", "minLength": -1}), "minLength");
        assert!(message.contains("non-negative integer"), "{message}");
    }

    #[test]
    fn enum_of_strings_is_kept_and_other_values_go_into_the_description() {
        assert_property(
            json!({"type": "string", "enum": ["a", "b"], "format": "x"}),
            json!({"type": "STRING", "enum": ["a", "b"], "format": "x"}),
        );
        // The Gemini API answers "enum: only allowed for STRING type" to anything else.
        assert_property(
            json!({"type": "integer", "format": "int32", "enum": [1, 2, -3]}),
            json!({"type": "INTEGER", "format": "int32", "description": "One of: 1, 2, -3"}),
        );
        assert_property(
            json!({"type": "number", "description": "a size", "enum": [0.5, 1e3]}),
            json!({"type": "NUMBER", "description": "a size (one of: 0.5, 1000.0)"}),
        );
        // With no description, the note stands where the enum was.
        assert_property(
            json!({"enum": [1, 2], "minimum": 0, "type": "integer"}),
            json!({"type": "INTEGER", "description": "One of: 1, 2", "minimum": 0}),
        );
        assert_property(
            json!({"type": "array", "items": {"type": "integer"}, "enum": [[1], [2, 3]]}),
            json!({"type": "ARRAY", "items": {"type": "INTEGER"}, "description": "One of: [1], [2,3]"}),
        );
        // An empty string, which Gemini's enum refuses, and values of arrays with no type to say their items.
        assert_property(
            json!({"type": "string", "enum": ["", "eq"]}),
            json!({"type": "STRING", "description": "One of: \"\", \"eq\""}),
        );
        assert_property(json!({"const": [1, 2]}), json!({"description": "Always: [1,2]"}));
        assert_property(json!({"enum": [{"a": 1}, {"a": 2}]}), json!({"description": "One of: {\"a\":1}, {\"a\":2}"}));
        // A type list keeps only the types an enum's values have.
        assert_property(
            json!({"type": ["string", "number", "boolean"], "enum": [1, 2]}),
            json!({"type": "NUMBER", "description": "One of: 1, 2"}),
        );
        assert_property(
            json!({"type": ["string", "integer"], "enum": ["a", 1], "description": "d"}),
            json!({"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}], "description": "d (one of: \"a\", 1)"}),
        );
        // Values the type rules out are not listed.
        assert_property(json!({"type": "string", "enum": ["a", 1]}), json!({"type": "STRING", "enum": ["a"]}));
        assert_property(
            json!({"type": "integer", "enum": [1, 2.5, "a"]}),
            json!({"type": "INTEGER", "description": "One of: 1"}),
        );
        // Null is listed where it is valid.
        assert_property(
            json!({"type": ["integer", "null"], "enum": [1, null]}),
            json!({"type": "INTEGER", "nullable": true, "description": "One of: 1, null"}),
        );
        assert_property(json!({"enum": ["a", 1, null]}), json!({"description": "One of: \"a\", 1, null"}));
    }

    #[test]
    fn null_in_an_enum_is_nullable_when_the_type_allows_it() {
        assert_property(json!({"enum": ["a", null]}), json!({"type": "STRING", "nullable": true, "enum": ["a"]}));
        assert_property(
            json!({"type": ["string", "null"], "enum": ["a", null]}),
            json!({"type": "STRING", "nullable": true, "enum": ["a"]}),
        );
        // The type rules null out, so null is not valid.
        assert_property(json!({"type": "string", "enum": ["a", null]}), json!({"type": "STRING", "enum": ["a"]}));
        assert_property(json!({"enum": [null]}), json!({"type": "NULL"}));
        assert_property(json!({"const": null}), json!({"type": "NULL"}));
    }

    #[test]
    fn enum_values_no_type_allows_are_refused() {
        assert_property_refused(json!({"enum": []}), "enum");
        assert_property_refused(json!({"type": "integer", "enum": ["a"]}), "enum");
        assert_property_refused(json!({"type": "string", "enum": [1, null]}), "enum");
        assert_property_refused(json!({"type": "boolean", "const": 1}), "const");
        assert_property_refused(json!({"enum": ["a", "b"], "const": "c"}), "const");
    }

    #[test]
    fn const_is_an_enum_of_one() {
        assert_property(
            json!({"const": 3, "description": "three"}),
            json!({"type": "INTEGER", "description": "three (always: 3)"}),
        );
        assert_property(json!({"const": true}), json!({"type": "BOOLEAN", "description": "Always: true"}));
        assert_property(json!({"type": "string", "const": "x"}), json!({"type": "STRING", "enum": ["x"]}));
        assert_property(json!({"enum": ["a", "b"], "const": "b"}), json!({"type": "STRING", "enum": ["b"]}));
    }

    #[test]
    fn a_definitions_values_join_the_description_where_it_is_used() {
        // A pydantic IntEnum: the definition has the values, the property beside its $ref the description.
        let defs = json!({"Level": {"enum": [1, 2, 3], "title": "Level", "type": "integer"}});
        assert_converts(
            json!({"type": "object", "$defs": defs, "properties": {
                "level": {"$ref": "#/$defs/Level", "description": "how bad"},
                "maybe": {"anyOf": [{"$ref": "#/$defs/Level"}, {"type": "null"}], "description": "if known"}
            }}),
            json!({"type": "OBJECT", "properties": {
                "level": {"type": "INTEGER", "description": "how bad (one of: 1, 2, 3)", "title": "Level"},
                "maybe": {"type": "INTEGER", "nullable": true, "description": "if known (one of: 1, 2, 3)", "title": "Level"}
            }}),
        );
        // Parts with values of their own: the first list is the hint.
        assert_property(
            json!({"allOf": [{"enum": [1, 2]}, {"enum": [2, 3]}]}),
            json!({"type": "INTEGER", "description": "One of: 1, 2"}),
        );
    }

    #[test]
    fn one_of_becomes_any_of() {
        assert_property(
            json!({"oneOf": [{"type": "string"}, {"type": "integer", "minimum": 1}], "description": "d"}),
            json!({"anyOf": [{"type": "STRING"}, {"type": "INTEGER", "minimum": 1}], "description": "d"}),
        );
        assert_property_refused(json!({"anyOf": [{"type": "string"}], "oneOf": [{"type": "integer"}]}), "oneOf");
    }

    #[test]
    fn defs_used_twice_are_inlined_twice() {
        // z.toJSONSchema(z.object({ home: A, work: A })) with A = z.object({ street: z.string() }).meta({ id: 'Address' }).
        let zod = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"home": {"$ref": "#/$defs/Address"}, "work": {"$ref": "#/$defs/Address"}},
            "required": ["home", "work"],
            "additionalProperties": false,
            "$defs": {"Address": {
                "type": "object",
                "properties": {"street": {"type": "string"}},
                "required": ["street"],
                "additionalProperties": false
            }}
        });
        let address = json!({"type": "OBJECT", "properties": {"street": {"type": "STRING"}}, "required": ["street"]});
        assert_converts(
            zod,
            json!({"type": "OBJECT", "properties": {"home": address, "work": address}, "required": ["home", "work"]}),
        );
    }

    #[test]
    fn keywords_beside_a_ref_merge_over_it() {
        let defs = json!({"Address": {
            "title": "Address",
            "description": "A postal address",
            "type": "object",
            "properties": {"street": {"type": "string", "maxLength": 80}}
        }});
        assert_converts(
            json!({"type": "object", "$defs": defs, "properties": {
                "home": {"$ref": "#/$defs/Address", "description": "Where they live", "required": ["street"]}
            }}),
            json!({"type": "OBJECT", "properties": {"home": {
                "type": "OBJECT",
                "description": "Where they live",
                "required": ["street"],
                "title": "Address",
                "properties": {"street": {"type": "STRING", "maxLength": "80"}}
            }}}),
        );
        let message = assert_refused(
            json!({"type": "object", "definitions": {"Code": {"type": "string", "maxLength": 3}}, "properties": {
                "code": {"$ref": "#/definitions/Code", "maxLength": 4}
            }}),
            "$ref",
            "/properties/code",
        );
        assert!(message.contains("\"maxLength\""), "{message}");
    }

    #[test]
    fn local_refs_are_json_pointers() {
        assert_converts(
            json!({"type": "object", "$defs": {"a/b": {"type": "string"}, "c~d": {"type": "integer"}, "e f": {"type": "boolean"}},
            "properties": {
                "slash": {"$ref": "#/$defs/a~1b"},
                "tilde": {"$ref": "#/$defs/c~0d"},
                "space": {"$ref": "#/$defs/e%20f"},
                "sibling": {"$ref": "#/properties/slash"}
            }}),
            json!({"type": "OBJECT", "properties": {
                "slash": {"type": "STRING"}, "tilde": {"type": "INTEGER"}, "space": {"type": "BOOLEAN"}, "sibling": {"type": "STRING"}
            }}),
        );
    }

    #[test]
    fn refs_that_cannot_be_inlined_are_refused() {
        for reference in [
            "https://example.com/address.json",
            "address.json#/$defs/A",
            "#address",
            "#/$defs/Missing",
            "#/$defs/A%zz",
            "#/$defs/~2",
        ] {
            let message = assert_property_refused(json!({"$ref": reference}), "$ref");
            assert!(message.contains(reference), "{message}");
        }
        assert_property_refused(json!({"$dynamicRef": "#node"}), "$dynamicRef");
        assert_property_refused(json!({"$recursiveRef": "#"}), "$recursiveRef");
    }

    #[test]
    fn recursive_refs_are_refused() {
        // z.toJSONSchema of a tree: z.object({ value: z.string(), get children() { return z.array(Node) } }).
        let tree = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"value": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}},
            "required": ["value", "children"],
            "additionalProperties": false
        });
        let message = assert_refused(tree, "$ref", "/properties/children/items");
        assert!(
            message
                .contains("Gemini's schema cannot refer to itself: it has no $ref; make the recursion a fixed depth"),
            "{message}"
        );
        let cycle = json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {
            "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
            "B": {"allOf": [{"$ref": "#/$defs/A"}]}
        }});
        assert_refused(cycle, "$ref", "/$defs/B/allOf/0");
    }

    #[test]
    fn a_graph_of_refs_that_doubles_twenty_times_is_refused_at_the_node_bound() {
        let mut defs = Map::new();
        for level in 0..20 {
            let next = json!({"$ref": format!("#/$defs/d{}", level + 1)});
            defs.insert(format!("d{level}"), json!({"type": "object", "properties": {"a": next, "b": next}}));
        }
        defs.insert("d20".into(), json!({"type": "string"}));
        let schema = json!({"type": "object", "properties": {"root": {"$ref": "#/$defs/d0"}}, "$defs": defs});
        // Refused on the count, after about 10,000 of the 2^20 nodes it stands for.
        let message = refusal(schema);
        assert!(message.starts_with("tool \"lookup\": the parameters schema is too large for Gemini once its $refs are written in place: it has more than 10000 schema nodes (at /$defs/"), "{message}");
    }

    #[test]
    fn nesting_deeper_than_gemini_takes_is_refused() {
        let nested = |levels: usize| {
            (0..levels).fold(json!({"type": "string"}), |inner, _| json!({"type": "array", "items": inner}))
        };
        let mut expected = json!({"type": "STRING"});
        for _ in 0..63 {
            expected = json!({"type": "ARRAY", "items": expected});
        }
        assert_property(nested(63), expected);
        let message = refusal(json!({"type": "object", "properties": {"p": nested(64)}}));
        assert!(
            message
                .contains("too large for Gemini once its $refs are written in place: it nests deeper than 64 levels"),
            "{message}"
        );
        assert!(message.contains("(at /properties/p/items"), "{message}");
        // A chain of refs nests the conversion as deep: refused before it can overflow the stack.
        let mut defs = Map::new();
        for level in 0..1000 {
            defs.insert(format!("d{level}"), json!({"$ref": format!("#/$defs/d{}", level + 1)}));
        }
        defs.insert("d1000".into(), json!({"type": "string"}));
        let chain = json!({"type": "object", "properties": {"p": {"$ref": "#/$defs/d0"}}, "$defs": defs});
        let message = refusal(chain);
        assert!(
            message.contains("nests deeper than 64 levels (a $ref or an allOf part counts as one) (at /$defs/d63)"),
            "{message}"
        );
    }

    #[test]
    fn all_of_merges_into_one_schema() {
        assert_property(
            json!({"description": "a person", "allOf": [
                {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
                {"properties": {"age": {"type": "integer"}, "name": {"type": "string"}}, "required": ["age", "name"], "description": "ignored"},
                {"type": "object", "maxProperties": 2}
            ]}),
            json!({
                "type": "OBJECT",
                "description": "a person",
                "properties": {"name": {"type": "STRING"}, "age": {"type": "INTEGER"}},
                "required": ["name", "age"],
                "maxProperties": "2"
            }),
        );
        // Integers are the numbers that are integers; null passes only when every part lets it.
        assert_property(
            json!({"allOf": [{"type": "number", "minimum": 0}, {"type": "integer"}]}),
            json!({"type": "INTEGER", "minimum": 0}),
        );
        assert_property(json!({"type": ["string", "null"], "allOf": [{"type": "string"}]}), json!({"type": "STRING"}));
        assert_property(
            json!({"type": ["string", "null"], "allOf": [{"maxLength": 3}]}),
            json!({"type": "STRING", "nullable": true, "maxLength": "3"}),
        );
    }

    #[test]
    fn all_of_whose_parts_disagree_is_refused() {
        let bounds = assert_property_refused(json!({"allOf": [{"maximum": 3}, {"maximum": 4}]}), "allOf");
        assert!(bounds.contains("\"maximum\""), "{bounds}");
        let property = assert_property_refused(
            json!({"allOf": [{"properties": {"a": {"type": "string"}}}, {"properties": {"a": {"type": "integer"}}}]}),
            "allOf",
        );
        assert!(property.contains("property \"a\""), "{property}");
        assert_property_refused(json!({"allOf": [{"description": "x"}, {"description": "y"}]}), "allOf");
    }

    #[test]
    fn examples_become_one_example() {
        assert_property(json!({"type": "string", "examples": ["x", "y"]}), json!({"type": "STRING", "example": "x"}));
        assert_property(json!({"type": "string", "examples": []}), json!({"type": "STRING"}));
    }

    #[test]
    fn true_is_any_value_and_false_is_refused() {
        assert_converts(
            json!({"type": "object", "properties": {"a": true, "b": {}, "c": {"type": "array", "items": true}}}),
            json!({"type": "OBJECT", "properties": {"a": {}, "b": {}, "c": {"type": "ARRAY", "items": {}}}}),
        );
        assert_refused(json!({"type": "object", "properties": {"a": false}}), "false", "/properties/a");
        assert_refused(
            json!({"type": "object", "properties": {"a": {"type": "array", "items": false}}}),
            "false",
            "/properties/a/items",
        );
        let any_of = json!({"type": "object", "properties": {"p": {"anyOf": [{"type": "string"}, false]}}});
        assert_refused(any_of, "false", "/properties/p/anyOf/1");
    }

    #[test]
    fn keywords_gemini_has_no_field_for_are_dropped() {
        assert_converts(
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "$id": "https://example.com/t",
                "$anchor": "top",
                "$comment": "c",
                "$vocabulary": {},
                "$defs": {"Unused": {"not": {}}},
                "definitions": {"Unused": {"prefixItems": []}},
                "type": "object",
                "properties": {
                    "tags": {
                        "type": "array",
                        "items": {"type": "string", "contentEncoding": "base64", "contentMediaType": "image/png", "contentSchema": {}},
                        "uniqueItems": true,
                        "contains": {"const": "a"},
                        "minContains": 1,
                        "maxContains": 2,
                        "additionalItems": false,
                        "unevaluatedItems": false
                    },
                    "n": {"type": "number", "multipleOf": 2, "exclusiveMinimum": 0, "exclusiveMaximum": 10, "deprecated": true,
                        "readOnly": true, "writeOnly": false, "x-unit": "cm", "nullable": true, "example": 4},
                    "o": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {},
                        "unevaluatedProperties": true, "propertyNames": {"pattern": "^a"}, "dependentRequired": {"a": []},
                        "dependencies": {"a": ["b"]}, "patternProperties": {}, "dependentSchemas": {}}
                },
                "additionalProperties": false,
                "unevaluatedProperties": false
            }),
            json!({"type": "OBJECT", "properties": {
                "tags": {"type": "ARRAY", "items": {"type": "STRING"}},
                "n": {"type": "NUMBER"},
                "o": {"type": "OBJECT", "properties": {"a": {"type": "STRING"}}}
            }}),
        );
    }

    #[test]
    fn keywords_whose_loss_changes_the_shape_are_refused() {
        let cases = [
            (json!({"type": "object", "additionalProperties": {"type": "string"}}), "additionalProperties"),
            (json!({"type": "object", "unevaluatedProperties": {"type": "string"}}), "unevaluatedProperties"),
            (json!({"type": "object", "patternProperties": {"^x-": {"type": "string"}}}), "patternProperties"),
            (json!({"type": "array", "prefixItems": [{"type": "string"}]}), "prefixItems"),
            (json!({"type": "array", "items": [{"type": "string"}, {"type": "number"}]}), "items"),
            (json!({"type": "array", "unevaluatedItems": {"type": "string"}}), "unevaluatedItems"),
            (json!({"not": {"type": "string"}}), "not"),
            (json!({"if": {"minimum": 0}, "then": {"maximum": 1}}), "if"),
            (json!({"then": {"maximum": 1}}), "then"),
            (json!({"else": {"maximum": 1}}), "else"),
            (json!({"type": "object", "dependentSchemas": {"a": {"required": ["b"]}}}), "dependentSchemas"),
            (json!({"type": "object", "dependencies": {"a": {"required": ["b"]}}}), "dependencies"),
        ];
        for (schema, keyword) in cases {
            assert_property_refused(schema, keyword);
        }
        let message = refusal(
            json!({"type": "object", "properties": {"tags": {"type": "object", "additionalProperties": {"type": "string"}}}}),
        );
        assert_eq!(
            message,
            "tool \"lookup\": Gemini cannot take \"additionalProperties\" as a schema (at /properties/tags): it has no map type; \
             list the properties, or take an array of { key, value } objects"
        );
    }

    #[test]
    fn refusals_point_into_the_tools_schema() {
        let schema = json!({"type": "object", "properties": {"a~b/c": {"type": "array", "items": {"$ref": "#/$defs/Bad"}}},
            "$defs": {"Bad": {"type": "object", "properties": {"m": {"type": "object", "additionalProperties": true, "patternProperties": {"x": {}}}}}}});
        assert_refused(schema, "patternProperties", "/$defs/Bad/properties/m");
        assert_refused(json!({"type": "object", "properties": {"a~b/c": {"not": {}}}}), "not", "/properties/a~0b~1c");
    }

    #[test]
    fn an_output_over_a_million_bytes_is_refused_while_it_is_written() {
        // One 10,000-value enum written in place at each of 200 $refs: some 26 MB of JSON.
        let codes: Vec<String> = (0..10_000).map(|i| format!("value_{i}")).collect();
        let mut properties = Map::new();
        for i in 0..200 {
            properties.insert(format!("p{i}"), json!({"$ref": "#/$defs/Codes"}));
        }
        // Never reached: the count stops the conversion a few copies in.
        properties.insert("last".into(), json!({"not": {}}));
        let message = refusal(json!({"type": "object", "properties": properties, "$defs": {"Codes": {"enum": codes}}}));
        assert_eq!(
            message,
            "tool \"lookup\": the parameters schema is too large for Gemini once its $refs are written in place: it is \
             over 1000000 bytes of JSON (at /$defs/Codes); refer to shared definitions fewer times, or shorten their \
             enums, descriptions and defaults"
        );
    }

    #[test]
    fn copied_values_cost_their_size() {
        let big = "x".repeat(MAX_BYTES);
        let long_name = Map::from_iter([(big.clone(), json!({"type": "string"}))]);
        for schema in [
            json!({"type": "string", "default": big}),
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "default": {"a": big}}),
            json!({"type": "string", "examples": [big, "y"]}),
            json!({"type": "string", "description": big}),
            json!({"type": "object", "properties": long_name}),
            // Written out as "One of: 0, 1, 2, ...": some 1.3 MB.
            json!({"type": "integer", "enum": (0..200_000).collect::<Vec<_>>()}),
        ] {
            let message = refusal(json!({"type": "object", "properties": {"p": schema}}));
            assert!(message.contains("it is over 1000000 bytes of JSON (at /properties/p)"), "{message}");
        }
        let half = "x".repeat(MAX_BYTES / 2);
        assert_property(json!({"type": "string", "default": half}), json!({"type": "STRING", "default": half}));
    }

    #[test]
    fn required_names_without_a_property_are_dropped() {
        // The Gemini API answers "required[0]: property is not defined"; the gate still checks the full list.
        assert_converts(
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b", "a"]}),
            json!({"type": "OBJECT", "properties": {"a": {"type": "STRING"}}, "required": ["a"]}),
        );
        assert_property(
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}),
            json!({"type": "OBJECT", "properties": {"a": {"type": "STRING"}}}),
        );
        assert_property(json!({"type": "object", "required": ["b"]}), json!({"type": "OBJECT"}));
        // Checked against the whole schema, once its parts are merged.
        assert_property(
            json!({"allOf": [{"required": ["a"]}, {"properties": {"a": {"type": "string"}}}]}),
            json!({"type": "OBJECT", "required": ["a"], "properties": {"a": {"type": "STRING"}}}),
        );
    }

    #[test]
    fn empty_properties_are_left_out() {
        // "properties: should be non-empty for OBJECT type". z.object({}) as zod writes it:
        assert_property(
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
            json!({"type": "OBJECT"}),
        );
        assert_property(json!({"properties": {}, "required": []}), json!({"type": "OBJECT"}));
    }

    #[test]
    fn an_array_without_items_is_refused() {
        // The Gemini API answers "items: missing field".
        for schema in [
            json!({"type": "array"}),
            json!({"type": ["array", "null"], "maxItems": 3}),
            json!({"type": ["array", "string"]}),
            json!({"type": "array", "enum": [[1], [2]]}),
        ] {
            assert_eq!(
                refusal(json!({"type": "object", "properties": {"p": schema}})),
                "tool \"lookup\": \"items\" (at /properties/p) is missing: Gemini needs an array's items schema; give \
                 it items"
            );
        }
        // The items may come from a part the array is merged with.
        assert_property(
            json!({"type": "array", "allOf": [{"items": {"type": "string"}}]}),
            json!({"type": "ARRAY", "items": {"type": "STRING"}}),
        );
    }

    #[test]
    fn keywords_of_another_type_are_dropped() {
        // "properties: only allowed for OBJECT type", and so on for each type.
        assert_property(
            json!({"type": "number", "minimum": 0, "minLength": 1, "pattern": "^a", "items": {"type": "string"},
                "required": ["a"]}),
            json!({"type": "NUMBER", "minimum": 0}),
        );
        assert_property(
            json!({"type": "string", "format": "date", "properties": {"a": {"type": "string"}}, "maxItems": 2,
                "maximum": 3}),
            json!({"type": "STRING", "format": "date"}),
        );
        assert_property(
            json!({"type": "boolean", "format": "x", "maxLength": 1, "description": "d"}),
            json!({"type": "BOOLEAN", "description": "d"}),
        );
        assert_property(
            json!({"type": "integer", "allOf": [{"maxLength": 2, "maximum": 9}]}),
            json!({"type": "INTEGER", "maximum": 9}),
        );
        // With no type there is no other type.
        assert_property(json!({"minLength": 1, "minimum": 0}), json!({"minLength": "1", "minimum": 0}));
    }

    #[test]
    fn an_any_of_with_a_branch_that_matches_anything_is_dropped() {
        // Neither branch has the properties its required name is for, so each is {}.
        assert_property(
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}),
            json!({"type": "OBJECT", "properties": {"a": {"type": "STRING"}, "b": {"type": "STRING"}}}),
        );
        assert_property(json!({"anyOf": [{"type": "string"}, true], "description": "d"}), json!({"description": "d"}));
        assert_property(json!({"oneOf": [{}, {"type": "null"}]}), json!({}));
    }

    #[test]
    fn any_of_a_schema_or_null_is_the_schema_nullable() {
        // z.toJSONSchema(z.object({ o: Address.nullable().describe('d') })).
        let address = json!({"type": "object", "properties": {"street": {"type": "string"}}, "required": ["street"],
            "additionalProperties": false});
        let converted = json!({"properties": {"street": {"type": "STRING"}}, "required": ["street"]});
        let mut expected = json!({"type": "OBJECT", "nullable": true, "description": "d"});
        expected.as_object_mut().expect("an object").extend(converted.as_object().expect("an object").clone());
        assert_property(json!({"description": "d", "anyOf": [address, {"type": "null"}]}), expected);
        assert_property(
            json!({"oneOf": [{"type": "null"}, {"type": "string", "maxLength": 3}]}),
            json!({"type": "STRING", "nullable": true, "maxLength": "3"}),
        );
        // A type beside the anyOf that rules null out wins.
        let mut expected = json!({"type": "OBJECT"});
        expected.as_object_mut().expect("an object").extend(converted.as_object().expect("an object").clone());
        assert_property(json!({"type": "object", "anyOf": [address, {"type": "null"}]}), expected);
        // One branch is the branch; several stay, and null makes the schema nullable.
        assert_property(json!({"anyOf": [{"type": "integer"}]}), json!({"type": "INTEGER"}));
        assert_property(
            json!({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}),
            json!({"nullable": true, "anyOf": [{"type": "STRING"}, {"type": "INTEGER"}]}),
        );
        let message = assert_property_refused(
            json!({"type": "string", "maxLength": 3, "anyOf": [{"maxLength": 4}, {"type": "null"}]}),
            "anyOf",
        );
        assert!(message.contains("disagree with its one branch on \"maxLength\""), "{message}");
    }
}
