//! What checking one value against a schema can cost, known at registration: the most subschemas a validator may
//! evaluate against any one location of a value. Alternatives (`anyOf`, `oneOf`, `allOf`, `if`/`then`/`else`)
//! whose `$ref`s lead to the same subschemas multiply it: a chain of `anyOf: [{$ref: next}, {$ref: next}]` doubles
//! it at each level, and a wrong-typed value makes the validator try every path. A schema whose count passes
//! `MAX_EVALUATIONS` is refused, so that no call's validation (nor repair's reading of the schema) takes
//! exponential time whatever the schema: a mounted server's schemas are untrusted input too.
//!
//! The count is an upper bound, taken for each depth of the value up to the nesting arguments may have: the
//! subschemas that apply to one location, where every alternative adds up. A child of the value is a property
//! (one named key, or any other) or an item (one position, or any later): what applies to it is summed over the
//! subschemas that apply to its parent, for the same key, so that alternatives that descend into different
//! properties (`{and: […]}` or `{or: […]}`) do not add up.

use referencing::{Draft, Registry, Resolver};
use std::rc::Rc;

use rustc_hash::FxHashMap;
use serde_json::Value;

use crate::json::MAX_DEPTH;

/// Subschema evaluations at one location of a value, at most.
/// A call's arguments may hold many places, each checked within this: 2,000 keeps a 1,000-place argument's check
/// near 0.1 s at worst, and is far above what the unions of real tools need.
pub const MAX_EVALUATIONS: u64 = 2_000;
/// Work the count itself may take (entries of the per-key sums), so that registering a huge schema stays quick.
const MAX_CHECK_WORK: u64 = 20_000_000;

/// Keywords whose subschemas apply to the same value as the schema that holds them.
const SAME_ONE: [&str; 4] = ["not", "if", "then", "else"];
const SAME_LISTS: [&str; 3] = ["allOf", "anyOf", "oneOf"];
const SAME_MAPS: [&str; 2] = ["dependentSchemas", "dependencies"];
const REFS: [&str; 3] = ["$ref", "$dynamicRef", "$recursiveRef"];

/// Ok, or what makes the schema too costly to check, worded for the developer who registers it.
pub fn check(schema: &Value) -> Result<(), String> {
    let graph = Graph::of(schema);
    match graph.worst() {
        Verdict::Bounded => Ok(()),
        Verdict::Explodes(node) => {
            let at = &graph.nodes[node];
            Err(format!(
                "checking one value against it could take more than {MAX_EVALUATIONS} evaluations of its subschemas at one \
                 place of the value: the {} at {} lead to more subschemas than that, or to the same ones many times over, \
                 and a value that matches none of them is tried along every path. Merge the alternatives, or make them \
                 differ before they share a $ref",
                at.fan_out(),
                at.location
            ))
        }
        Verdict::Circle(from, to) => Err(format!(
            "its subschemas at {} and {} apply each other to the same value in a circle, which never reaches a part of \
             the value (a validator entering it at one place walks it again from another). Take the circle out",
            graph.nodes[to].location, graph.nodes[from].location
        )),
        Verdict::TooLarge => Err(format!(
            "it is too large to tell what checking a value against it costs ({} subschemas, whose alternatives hold many \
             properties): split the tool, or share its subschemas through fewer alternatives",
            graph.nodes.len()
        )),
    }
}

/// One subschema and where it leads.
#[derive(Default)]
struct Node {
    location: String,
    /// Subschemas applied to the same value (alternatives, `$ref`s): evaluated beside this one.
    same: Vec<usize>,
    /// The keywords `same` came from, for the message.
    keywords: Vec<&'static str>,
    /// `properties`: each for its key (an interned name).
    properties: Vec<(u32, usize)>,
    /// `additionalProperties`: a property `properties` does not name.
    other_properties: Vec<usize>,
    /// `patternProperties`, `unevaluatedProperties`: any property may meet them, whatever else it meets.
    any_property: Vec<usize>,
    property_names: Vec<usize>,
    /// `prefixItems`, `items` as a list: each for its position.
    prefix_items: Vec<usize>,
    /// `items` as one schema, `additionalItems`: a position past the prefix.
    other_items: Vec<usize>,
    /// `contains`, `unevaluatedItems`: any position may meet them.
    any_item: Vec<usize>,
    /// Alternatives (`anyOf`, `oneOf`) that fix one property to different values: the validator tries only those
    /// whose value an object holds (its discriminator), so their children count once, the most of them.
    exclusive: Vec<Vec<usize>>,
    /// `unevaluatedProperties` or `unevaluatedItems`: to learn what the subschemas beside it evaluated, the
    /// validator evaluates them again, so they count twice.
    unevaluated: bool,
}

impl Node {
    /// The one subschema this one applies to its value, when it has no other keyword that leads anywhere.
    fn only_same(&self) -> Option<usize> {
        let leads_elsewhere = !(self.properties.is_empty()
            && self.other_properties.is_empty()
            && self.any_property.is_empty()
            && self.property_names.is_empty()
            && self.prefix_items.is_empty()
            && self.other_items.is_empty()
            && self.any_item.is_empty());
        match (self.same.as_slice(), leads_elsewhere) {
            ([only], false) => Some(*only),
            _ => None,
        }
    }

    fn fan_out(&self) -> String {
        let mut keywords = self.keywords.clone();
        keywords.dedup();
        keywords.join(", ")
    }
}

enum Verdict {
    Bounded,
    /// The root's count passes the bound; the first subschema whose own count did.
    Explodes(usize),
    TooLarge,
    /// Subschemas that apply one another to the same value in a circle of two or more: a validator entering it at
    /// one place evaluates the rest again from the other (`allOf`s and `$ref`s of each other).
    Circle(usize, usize),
}

struct Graph {
    nodes: Vec<Node>,
}

impl Graph {
    /// Every subschema reachable from the root, read without recursion so that a long chain of `$ref`s cannot
    /// exhaust the stack.
    fn of(schema: &Value) -> Graph {
        let draft = Draft::default().detect(schema);
        let base = schema.get("$id").and_then(Value::as_str).unwrap_or("json-schema:///");
        let registry = Registry::new().draft(draft).add(base, draft.create_resource_ref(schema)).and_then(|r| r.prepare());
        let (Ok(registry), Ok(root)) = (registry, referencing::uri::from_str(base)) else {
            // The validator compiled the same schema, so this is not expected: with nothing to follow, a leaf.
            return Graph { nodes: vec![Node { location: "#".into(), ..Node::default() }] };
        };
        Graph { nodes: read(&registry, root, schema, draft) }
    }

    /// Counts depth by depth: what applies to one location of that depth, for each subschema taken as the root.
    fn worst(&self) -> Verdict {
        let (order, rank) = match self.same_order() {
            Ok(order) => order,
            Err((from, to)) => return Verdict::Circle(from, to),
        };
        let n = self.nodes.len();
        let (mut previous, mut current) = (vec![0u64; n], vec![0u64; n]);
        let mut first_over = None;
        let mut work = 0u64;
        for depth in 0..=MAX_DEPTH {
            let mut children: Vec<Rc<Children>> = Vec::new();
            if depth > 0 {
                children.resize_with(n, Rc::default);
            }
            for &node in &order {
                let here = &self.nodes[node];
                let forward = here.same.iter().copied().filter(|&s| rank[s] < rank[node]);
                let times = if here.unevaluated { 2 } else { 1 };
                let count = if depth == 0 {
                    // An edge to itself brings the validator back to the subschema it is evaluating on the same
                    // value, which it answers at once: one evaluation.
                    let cycles = here.same.len() - forward.clone().count();
                    forward.fold(1 + cycles as u64, |count, s| count.saturating_add(current[s].saturating_mul(times)))
                } else {
                    let (mine, count) = match (here.only_same(), times) {
                        // A `$ref` and nothing else (most are): its target's children, shared, and their count.
                        (Some(s), 1) if rank[s] < rank[node] => (children[s].clone(), current[s]),
                        _ => {
                            let mut mine = Children::own(here, &previous);
                            let exclusive = |s: usize| here.exclusive.iter().any(|group| group.contains(&s));
                            for s in forward.filter(|&s| !exclusive(s)) {
                                for _ in 0..times {
                                    work += mine.add(&children[s]);
                                }
                            }
                            for group in &here.exclusive {
                                let mut most = Children::default();
                                for &s in group.iter().filter(|&&s| rank[s] < rank[node]) {
                                    work += most.at_least(&children[s]);
                                }
                                for _ in 0..times {
                                    work += mine.add(&most);
                                }
                            }
                            let count = mine.most();
                            (Rc::new(mine), count)
                        }
                    };
                    children[node] = mine;
                    count
                };
                current[node] = count.min(MAX_EVALUATIONS + 1);
                if current[node] > MAX_EVALUATIONS && first_over.is_none() {
                    first_over = Some(node);
                }
                if work > MAX_CHECK_WORK {
                    return Verdict::TooLarge;
                }
            }
            if current[ROOT] > MAX_EVALUATIONS {
                return Verdict::Explodes(first_over.unwrap_or(ROOT));
            }
            // No subschema applies this deep, nor deeper; or each depth from here on counts as this one did (a
            // depth follows from the one above alone).
            if current[ROOT] == 0 || depth > 1 && current == previous {
                return Verdict::Bounded;
            }
            std::mem::swap(&mut previous, &mut current);
        }
        Verdict::Bounded
    }

    /// The nodes in an order where each comes after the subschemas it applies to the same value, and each node's
    /// place in it; or the two ends of an edge that closes a circle of two or more.
    fn same_order(&self) -> Result<(Vec<usize>, Vec<usize>), (usize, usize)> {
        let n = self.nodes.len();
        let (mut order, mut rank, mut entered) = (Vec::with_capacity(n), vec![usize::MAX; n], vec![false; n]);
        let mut stack: Vec<(usize, usize)> = Vec::new();
        for start in 0..n {
            if entered[start] {
                continue;
            }
            entered[start] = true;
            stack.push((start, 0));
            while let Some(top) = stack.len().checked_sub(1) {
                let (node, next) = stack[top];
                match self.nodes[node].same.get(next) {
                    Some(&s) => {
                        stack[top].1 += 1;
                        if !entered[s] {
                            entered[s] = true;
                            stack.push((s, 0));
                        } else if rank[s] == usize::MAX && s != node {
                            return Err((node, s)); // entered and not finished: on the way here
                        }
                    }
                    None => {
                        rank[node] = order.len();
                        order.push(node);
                        stack.pop();
                    }
                }
            }
        }
        Ok((order, rank))
    }
}

const ROOT: usize = 0;

/// What one child of a value meets, summed over the subschemas that apply to the value: for a property with no key
/// of its own here (`properties`, the base) and the difference a named key makes (`by_key`); the same for items
/// by position; and for property names.
#[derive(Default)]
struct Children {
    properties: i64,
    by_key: FxHashMap<u32, i64>,
    items: i64,
    by_position: FxHashMap<u32, i64>,
    names: i64,
}

impl Children {
    /// What a node's own keywords give its children, from what each subschema met one level up (`previous`).
    fn own(node: &Node, previous: &[u64]) -> Children {
        let sum = |list: &[usize]| list.iter().fold(0, |total, &i| plus(total, previous[i] as i64));
        let (other, any) = (sum(&node.other_properties), sum(&node.any_property));
        let (rest, any_item) = (sum(&node.other_items), sum(&node.any_item));
        Children {
            properties: other + any,
            by_key: node.properties.iter().map(|&(key, i)| (key, plus(previous[i] as i64, -other))).collect(),
            items: rest + any_item,
            by_position: node.prefix_items.iter().enumerate().map(|(at, &i)| (at as u32, plus(previous[i] as i64, -rest))).collect(),
            names: sum(&node.property_names),
        }
    }

    /// Adds what another subschema applied to the same value gives; answers the work it took.
    fn add(&mut self, other: &Children) -> u64 {
        self.properties = plus(self.properties, other.properties);
        self.items = plus(self.items, other.items);
        self.names = plus(self.names, other.names);
        for (&key, &d) in &other.by_key {
            let entry = self.by_key.entry(key).or_default();
            *entry = plus(*entry, d);
        }
        for (&at, &d) in &other.by_position {
            let entry = self.by_position.entry(at).or_default();
            *entry = plus(*entry, d);
        }
        1 + (other.by_key.len() + other.by_position.len()) as u64
    }

    /// Makes each count at least another subschema's (the most of exclusive alternatives); answers the work it took.
    fn at_least(&mut self, other: &Children) -> u64 {
        let value = |base: i64, by: &FxHashMap<u32, i64>, key: &u32| plus(base, by.get(key).copied().unwrap_or(0));
        let widen = |base: &mut i64, by: &mut FxHashMap<u32, i64>, other_base: i64, other_by: &FxHashMap<u32, i64>| {
            let keys: Vec<u32> = by.keys().chain(other_by.keys()).copied().collect();
            let values: Vec<(u32, i64)> = keys.iter().map(|k| (*k, value(*base, by, k).max(value(other_base, other_by, k)))).collect();
            *base = (*base).max(other_base);
            for (key, v) in values {
                by.insert(key, plus(v, -*base));
            }
        };
        widen(&mut self.properties, &mut self.by_key, other.properties, &other.by_key);
        widen(&mut self.items, &mut self.by_position, other.items, &other.by_position);
        self.names = self.names.max(other.names);
        1 + (other.by_key.len() + other.by_position.len()) as u64
    }

    /// The most any one child meets.
    fn most(&self) -> u64 {
        let top = |base: i64, by: &FxHashMap<u32, i64>| plus(base, by.values().copied().max().unwrap_or(0).max(0));
        top(self.properties, &self.by_key).max(top(self.items, &self.by_position)).max(self.names).max(0) as u64
    }
}

/// Sums stay far from overflow: past this, a subschema's count is well over the bound anyway (only the root's sums
/// decide, and they stay below the bound squared).
const SUM_CAP: i64 = 1 << 50;

fn plus(a: i64, b: i64) -> i64 {
    a.saturating_add(b).clamp(-SUM_CAP, SUM_CAP)
}

/// A subschema to read: its value and the resolver its `$ref`s are read with.
struct Pending<'a> {
    index: usize,
    value: &'a Value,
    resolver: Resolver<'a>,
    draft: Draft,
}

/// The graph as it is read: each subschema once, by identity.
struct Reader<'a> {
    nodes: Vec<Node>,
    seen: FxHashMap<*const Value, usize>,
    pending: Vec<Pending<'a>>,
    keys: FxHashMap<&'a str, u32>,
}

impl<'a> Reader<'a> {
    fn node(&mut self, value: &'a Value, resolver: &Resolver<'a>, draft: Draft, location: String) -> usize {
        let Reader { nodes, seen, pending, .. } = self;
        *seen.entry(value as *const Value).or_insert_with(|| {
            let index = nodes.len();
            nodes.push(Node { location, ..Node::default() });
            pending.push(Pending { index, value, resolver: resolver.clone(), draft });
            index
        })
    }

    fn key(&mut self, name: &'a str) -> u32 {
        let next = self.keys.len() as u32;
        *self.keys.entry(name).or_insert(next)
    }
}

/// The subschemas reachable from `schema`, as `registry` resolves their references.
fn read<'r>(registry: &'r Registry<'_>, root: referencing::Uri<String>, schema: &'r Value, draft: Draft) -> Vec<Node> {
    let mut reader = Reader { nodes: Vec::new(), seen: FxHashMap::default(), pending: Vec::new(), keys: FxHashMap::default() };
    reader.node(schema, &registry.resolver(root), draft, "#".into());
    while let Some(Pending { index, value, resolver, draft }) = reader.pending.pop() {
        let Value::Object(map) = value else { continue };
        let draft = draft.detect(value);
        let resolver = resolver.in_subresource(draft.create_resource_ref(value)).unwrap_or(resolver);
        let location = std::mem::take(&mut reader.nodes[index].location);
        let mut node = Node::default();
        let child = |reader: &mut Reader<'r>, value: &'r Value, path: String| reader.node(value, &resolver, draft, format!("{location}/{path}"));
        for (keyword, sub) in map {
            let keyword = keyword.as_str();
            let at = |i: String| format!("{keyword}/{i}");
            match (keyword, sub) {
                (k, Value::Array(list)) if SAME_LISTS.contains(&k) => {
                    let branches: Vec<usize> = list.iter().enumerate().map(|(i, s)| child(&mut reader, s, at(i.to_string()))).collect();
                    node.keywords.extend(std::iter::repeat_n(static_keyword(k), branches.len()));
                    if k != "allOf" {
                        let group = discriminated(list, &resolver).into_iter().map(|i| branches[i]).collect::<Vec<_>>();
                        if !group.is_empty() {
                            node.exclusive.push(group);
                        }
                    }
                    node.same.extend(branches);
                }
                (k, s) if SAME_ONE.contains(&k) => {
                    node.same.push(child(&mut reader, s, k.to_string()));
                    node.keywords.push(static_keyword(k));
                }
                (k, Value::Object(deps)) if SAME_MAPS.contains(&k) => {
                    for (name, s) in deps.iter().filter(|(_, s)| s.is_object() || s.is_boolean()) {
                        node.same.push(child(&mut reader, s, at(escape(name))));
                        node.keywords.push(static_keyword(k));
                    }
                }
                (k, Value::String(reference)) if REFS.contains(&k) => {
                    let resolved = if k == "$recursiveRef" { resolver.lookup_recursive_ref() } else { resolver.lookup(reference) };
                    // A reference that cannot be resolved did not compile; here it leads nowhere.
                    if let Ok(resolved) = resolved {
                        let (target, target_resolver, target_draft) = resolved.into_inner();
                        node.same.push(reader.node(target, &target_resolver, target_draft, reference.clone()));
                        node.keywords.push(static_keyword(k));
                    }
                }
                ("properties", Value::Object(props)) => {
                    for (name, s) in props {
                        let key = reader.key(name);
                        node.properties.push((key, child(&mut reader, s, at(escape(name)))));
                    }
                }
                ("patternProperties", Value::Object(props)) => {
                    for (name, s) in props {
                        node.any_property.push(child(&mut reader, s, at(escape(name))));
                    }
                }
                ("additionalProperties", s) => node.other_properties.push(child(&mut reader, s, keyword.into())),
                ("unevaluatedProperties", s) => {
                    node.unevaluated = true;
                    node.any_property.push(child(&mut reader, s, keyword.into()));
                }
                ("propertyNames", s) => node.property_names.push(child(&mut reader, s, keyword.into())),
                ("prefixItems" | "items", Value::Array(list)) => {
                    for (i, s) in list.iter().enumerate() {
                        node.prefix_items.push(child(&mut reader, s, at(i.to_string())));
                    }
                }
                ("items" | "additionalItems", s) => node.other_items.push(child(&mut reader, s, keyword.into())),
                ("contains" | "unevaluatedItems", s) => {
                    node.unevaluated |= keyword == "unevaluatedItems";
                    node.any_item.push(child(&mut reader, s, keyword.into()));
                }
                _ => {}
            }
        }
        node.location = location;
        reader.nodes[index] = node;
    }
    reader.nodes
}

/// The alternatives a validator tells apart by one property they fix to different strings or integers (`const`,
/// or an `enum` of them), following `$ref`s and `allOf`s a few levels: with three alternatives or more, it tries on
/// an object only those that allow the value it holds. Their places in `branches`; none when they are not told
/// apart.
fn discriminated(branches: &[Value], resolver: &Resolver<'_>) -> Vec<usize> {
    if branches.len() < 3 {
        return Vec::new();
    }
    let pins: Vec<Vec<String>> = branches.iter().map(|b| { let mut keys = Vec::new(); pinned(b, resolver, 0, &mut keys); keys }).collect();
    let mut counts: FxHashMap<&str, usize> = FxHashMap::default();
    for key in pins.iter().flatten() {
        *counts.entry(key).or_default() += 1;
    }
    let Some((key, _)) = counts.into_iter().filter(|(_, n)| *n >= 2).max_by_key(|(key, n)| (*n, std::cmp::Reverse(*key))) else { return Vec::new() };
    pins.iter().enumerate().filter(|(_, keys)| keys.iter().any(|k| k == key)).map(|(i, _)| i).collect()
}

/// Adds to `keys` the properties `schema` fixes to strings or integers.
fn pinned(schema: &Value, resolver: &Resolver<'_>, depth: usize, keys: &mut Vec<String>) {
    if depth > 16 {
        return;
    }
    let fixes = |s: &Value| {
        let plain = |v: &Value| v.is_string() || v.as_i64().is_some();
        s.get("const").is_some_and(plain) || s.get("enum").and_then(Value::as_array).is_some_and(|e| !e.is_empty() && e.iter().all(plain))
    };
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        keys.extend(props.iter().filter(|(_, s)| fixes(s)).map(|(k, _)| k.clone()));
    }
    if let Some(Ok(target)) = schema.get("$ref").and_then(Value::as_str).map(|r| resolver.lookup(r)) {
        let (target, target_resolver, _) = target.into_inner();
        pinned(target, &target_resolver, depth + 1, keys);
    }
    for member in schema.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        pinned(member, resolver, depth + 1, keys);
    }
}

fn static_keyword(keyword: &str) -> &'static str {
    SAME_LISTS.into_iter().chain(SAME_ONE).chain(SAME_MAPS).chain(REFS).find(|k| *k == keyword).unwrap_or("keywords")
}

/// A key as a JSON Pointer segment.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `levels` of `anyOf: [{$ref: next}, {$ref: next}]`, ending in a string, under property `q`.
    pub(crate) fn chain(levels: usize) -> Value {
        let mut defs = serde_json::Map::new();
        for i in 0..levels {
            defs.insert(format!("l{i}"), json!({"anyOf": [{"$ref": format!("#/$defs/l{}", i + 1)}, {"$ref": format!("#/$defs/l{}", i + 1)}]}));
        }
        defs.insert(format!("l{levels}"), json!({"type": "string"}));
        json!({"type": "object", "properties": {"q": {"$ref": "#/$defs/l0"}}, "$defs": defs})
    }

    #[test]
    fn alternatives_that_share_their_refs_are_refused_past_the_bound() {
        assert!(check(&chain(8)).is_ok());
        let refused = check(&chain(20)).unwrap_err();
        assert!(refused.contains("more than 2000 evaluations"), "{refused}");
        assert!(refused.contains("the anyOf at #/$defs/l"), "names the construct and where: {refused}");
        // Forty levels never finish validating; the check answers at once.
        assert!(check(&chain(40)).is_err());
    }

    #[test]
    fn recursive_schemas_that_descend_into_the_value_are_fine() {
        let tree = json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "left": {"$ref": "#"}, "right": {"$ref": "#"}, "children": {"type": "array", "items": {"$ref": "#"}}},
        });
        assert!(check(&tree).is_ok());
        // Alternatives that each descend into a property of their own.
        let filter = json!({
            "$defs": {
                "filter": {"anyOf": [{"$ref": "#/$defs/and"}, {"$ref": "#/$defs/or"}, {"$ref": "#/$defs/not"}, {"$ref": "#/$defs/cmp"}]},
                "and": {"type": "object", "properties": {"and": {"type": "array", "items": {"$ref": "#/$defs/filter"}}}, "additionalProperties": false},
                "or": {"type": "object", "properties": {"or": {"type": "array", "items": {"$ref": "#/$defs/filter"}}}, "additionalProperties": false},
                "not": {"type": "object", "properties": {"not": {"$ref": "#/$defs/filter"}}, "additionalProperties": false},
                "cmp": {"type": "object", "properties": {"field": {"type": "string"}, "value": {}}},
            },
            "type": "object",
            "properties": {"where": {"$ref": "#/$defs/filter"}},
        });
        assert!(check(&filter).is_ok());
        // A tuple whose positions recurse each on their own.
        let pairs = json!({"type": "array", "prefixItems": [{"$ref": "#"}, {"$ref": "#"}], "items": false});
        assert!(check(&pairs).is_ok());
    }

    #[test]
    fn a_child_that_two_keywords_apply_to_multiplies_with_depth() {
        // Each level's child meets the node twice (its property and a pattern): 2^depth.
        let doubling = json!({"type": "object", "properties": {"a": {"$ref": "#"}}, "patternProperties": {"^a$": {"$ref": "#"}}});
        assert!(check(&doubling).is_err());
        let two_alternatives = json!({"anyOf": [{"properties": {"a": {"$ref": "#"}}}, {"properties": {"a": {"$ref": "#"}}}]});
        assert!(check(&two_alternatives).is_err());
    }

    #[test]
    fn unevaluated_keywords_count_the_subschemas_beside_them_twice() {
        // Each level evaluates the levels inside it again to learn what they evaluated: 2^levels.
        let nest = |levels: usize, keyword: &str| {
            let mut schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
            for _ in 0..levels {
                schema = json!({"type": "object", "allOf": [schema], keyword: false});
            }
            schema
        };
        assert!(check(&nest(4, "unevaluatedProperties")).is_ok());
        assert!(check(&nest(16, "unevaluatedProperties")).is_err());
        assert!(check(&nest(16, "unevaluatedItems")).is_err());
        assert!(check(&nest(16, "additionalProperties")).is_ok(), "a keyword that looks only at its own properties");
    }

    #[test]
    fn cycles_on_the_same_value_and_ids_are_followed_without_looping() {
        // A circle of subschemas on the same value means nothing; entered from its other end, a validator walks
        // it again (a ladder of them took 103 s for one value at 20 rungs).
        let circle = check(&json!({"anyOf": [{"$ref": "#"}, {"type": "string"}]})).unwrap_err();
        assert!(circle.contains("apply each other to the same value in a circle"), "{circle}");
        let ladder = |rungs: usize| {
            let mut defs = serde_json::Map::new();
            for i in 0..rungs {
                defs.insert(format!("r{i}"), json!({"allOf": [{"$ref": format!("#/$defs/p{i}")}, {"$ref": format!("#/$defs/q{i}")}]}));
                defs.insert(format!("p{i}"), json!({"allOf": [{"$ref": format!("#/$defs/q{i}")}, {"$ref": format!("#/$defs/r{}", i + 1)}]}));
                defs.insert(format!("q{i}"), json!({"allOf": [{"$ref": format!("#/$defs/p{i}")}]}));
            }
            defs.insert(format!("r{rungs}"), json!({"type": "integer"}));
            json!({"type": "object", "properties": {"v": {"$ref": "#/$defs/r0"}}, "$defs": defs})
        };
        assert!(check(&ladder(20)).is_err());
        let with_ids = |shared: bool| {
            let x = if shared { "#/$defs/x" } else { "#/$defs/y" };
            json!({
                "$id": "https://example.com/root.json",
                "type": "object",
                "properties": {"q": {"$ref": "item.json"}},
                "$defs": {"item": {"$id": "item.json", "anyOf": [{"$ref": "#/$defs/x"}, {"$ref": x}], "$defs": {"x": {"type": "string"}, "y": {"type": "number"}}}},
            })
        };
        assert!(check(&with_ids(true)).is_ok());
        assert!(check(&with_ids(false)).is_ok());
        // References are followed within a resource of its own (`$id`) as the validator follows them.
        let mut chained = chain(20);
        let defs = chained["$defs"].take();
        chained["$defs"] = json!({"inner": {"$id": "https://example.com/inner.json", "$defs": defs, "$ref": "#/$defs/l0"}});
        chained["properties"]["q"] = json!({"$ref": "https://example.com/inner.json"});
        assert!(check(&chained).is_err());
    }

    #[test]
    fn alternatives_told_apart_by_a_property_they_fix_count_once() {
        // A document of typed nodes, each kind with content of nodes (a validator tries only the kind an object says).
        let kinds = ["paragraph", "heading", "blockquote", "bullet_list", "ordered_list", "list_item", "code_block", "text"];
        let mut defs = serde_json::Map::new();
        defs.insert("node".into(), json!({"oneOf": kinds.iter().map(|k| json!({"$ref": format!("#/$defs/{k}")})).collect::<Vec<_>>()}));
        for k in kinds {
            defs.insert(k.into(), json!({"type": "object", "required": ["type"], "additionalProperties": false, "properties": {
                "type": {"const": k}, "attrs": {"type": "object"}, "content": {"type": "array", "items": {"$ref": "#/$defs/node"}}, "text": {"type": "string"}}}));
        }
        assert!(check(&json!({"type": "object", "properties": {"doc": {"$ref": "#/$defs/node"}}, "$defs": defs})).is_ok());
        // The same without what tells them apart: each kind's content multiplies the count level after level.
        for k in kinds {
            defs[k]["properties"]["type"] = json!({"type": "string"});
        }
        assert!(check(&json!({"type": "object", "properties": {"doc": {"$ref": "#/$defs/node"}}, "$defs": defs})).is_err());
    }

    #[test]
    fn a_long_chain_of_refs_does_not_exhaust_the_stack() {
        let mut defs = serde_json::Map::new();
        for i in 0..50_000 {
            defs.insert(format!("d{i}"), json!({"$ref": format!("#/$defs/d{}", i + 1)}));
        }
        defs.insert("d50000".into(), json!({"type": "string"}));
        assert!(check(&json!({"properties": {"q": {"$ref": "#/$defs/d0"}}, "$defs": defs})).is_err(), "50,000 evaluations of one value");
    }
}
