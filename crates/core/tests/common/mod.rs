//! A fake host: drives the engine as the JS layer does, with scripted handlers and a hand-moved clock.
#![allow(dead_code)] // each test binary uses its own part of it

pub mod server;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use toolgate_core::{Abort, Engine, EngineOptions, HostAnswer, HostKind, HostRequest, Outcome, Policy, Start, Step, ToolResult, ToolSpec, TurnOptions};

/// What a fake handler does when started.
#[derive(Clone)]
pub enum Behaviour {
    Return(Outcome),
    Hang,
}

pub struct Host {
    pub engine: Engine,
    /// Each start takes the next behaviour; the last one repeats.
    pub handlers: HashMap<String, Vec<Behaviour>>,
    pub now: Instant,
    /// Every handler start and end, in order: ("start"|"end"|"abort", tool name).
    pub log: Vec<(&'static str, String)>,
    pub running: HashMap<u32, String>,
    pub done: Vec<u32>,
    /// Calls of streaming turns whose results were sealed, as (turn, index), in the order the steps named them.
    pub settled: Vec<(u32, u32)>,
    /// The live marks the steps reported (`Engine::observe`), as (turn, index, mark).
    pub marks: Vec<(u32, u32, String)>,
    /// How the host answers checks and approvals (JSON); None leaves them unanswered, for a test to answer.
    pub answer: Option<fn(&HostRequest) -> String>,
    /// Requests left unanswered.
    pub requests: Vec<HostRequest>,
    /// Shared-store tickets, for a test to answer.
    pub store: Vec<(u32, Vec<toolgate_core::shared::Op>)>,
    /// The server that answers the shared store's tickets as they go out, when one does (see `Stores`).
    pub server: Option<Rc<RefCell<server::Server>>>,
    /// The server is answering: the tickets that go out meanwhile wait for its loop, so that nothing recurses per
    /// ticket.
    answering: bool,
}

/// Which store the engine keeps what it remembers in: its own memory, or a store shared between processes whose
/// tickets the host's server answers. A scenario run on both holds the two paths to one behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stores {
    Memory,
    Shared,
}

pub const BOTH: [Stores; 2] = [Stores::Memory, Stores::Shared];

/// What the JS layer answers when no approval callback is set, and a check that finds nothing wrong.
pub fn no_callback(request: &HostRequest) -> String {
    match request.kind {
        HostKind::Approve => json!({"decision": "deny", "reason": "no approval callback is set"}).to_string(),
        HostKind::Validate | HostKind::Check | HostKind::Cost => "{}".into(),
    }
}

/// Tests leave no artifact files behind.
impl Drop for Host {
    fn drop(&mut self) {
        self.engine.remove_artifacts();
    }
}

pub fn spec(json: Value) -> ToolSpec {
    ToolSpec::from_json(&json.to_string()).unwrap()
}

impl Host {
    pub fn new(options: Value) -> Self {
        Host {
            engine: Engine::new(EngineOptions::from_json(&options.to_string()).unwrap()).unwrap(),
            handlers: HashMap::new(),
            now: Instant::now(),
            log: vec![],
            running: HashMap::new(),
            done: vec![],
            settled: vec![],
            marks: vec![],
            answer: Some(no_callback),
            requests: vec![],
            store: vec![],
            server: None,
            answering: false,
        }
    }

    /// A host whose engine keeps what it remembers in `stores`; a shared store's server is new.
    pub fn on(stores: Stores, options: Value) -> Self {
        Self::with_server(stores, options, Rc::default())
    }

    /// Another process beside this one: same options, its own engine and tools, the same shared store's server.
    pub fn beside(&self, options: Value) -> Self {
        let server = self.server.clone().expect("a process beside another shares its store");
        Self::with_server(Stores::Shared, options, server)
    }

    fn with_server(stores: Stores, mut options: Value, server: Rc<RefCell<server::Server>>) -> Self {
        if stores == Stores::Memory {
            return Host::new(options);
        }
        // A scenario's own store settings (its onError, say) stand; the wait is the host's unless it says one.
        if options.get("store").is_none() {
            options["store"] = json!({});
        }
        options["store"].as_object_mut().expect("store settings are an object").entry("timeoutMs").or_insert(json!(50));
        let mut host = Host::new(options);
        host.server = Some(server);
        host
    }

    /// Forgets cached results of `tool` (for `args_json` only, when given), in the shared store too: how many the
    /// store that keeps them dropped.
    pub fn invalidate(&mut self, tool: &str, args_json: Option<&str>) -> usize {
        let dropped = self.engine.invalidate(tool, args_json).unwrap();
        match &self.server {
            Some(server) => server.borrow_mut().invalidate(&self.engine.cache_prefix(tool, args_json).unwrap()),
            None => dropped,
        }
    }

    pub fn tool(&mut self, spec_json: Value, behaviour: Behaviour) -> &mut Self {
        self.tool_script(spec_json, vec![behaviour])
    }

    pub fn tool_script(&mut self, spec_json: Value, script: Vec<Behaviour>) -> &mut Self {
        let spec = spec(spec_json);
        self.handlers.insert(spec.name.clone(), script);
        self.engine.register(spec).unwrap();
        self
    }

    pub fn next_behaviour(&mut self, name: &str) -> Behaviour {
        let script = self.handlers.get_mut(name).unwrap();
        if script.len() > 1 {
            script.remove(0)
        } else {
            script[0].clone()
        }
    }

    /// Applies a step; handlers that return settle in start order once the step's starts are all made,
    /// as JS settles them on later microtasks.
    pub fn apply(&mut self, step: Step) {
        self.done.extend(&step.done);
        self.settled.extend(step.settled.iter().map(|s| (s.turn, s.index)));
        self.marks.extend(step.marks.iter().map(|m| (m.turn, m.index, m.mark.clone())));
        self.store.extend(step.store.into_iter().map(|t| (t.ticket, t.ops)));
        for Abort { run, .. } in step.abort {
            if let Some(name) = self.running.remove(&run) {
                self.log.push(("abort", name));
            }
        }
        for request in step.host {
            match self.answer {
                Some(answer) => {
                    let reply = HostAnswer::from_json(&answer(&request)).unwrap();
                    let next = self.engine.answer(request.ticket, reply, self.now);
                    self.apply(next);
                }
                None => self.requests.push(request),
            }
        }
        let starts: Vec<Start> = step.start;
        for s in &starts {
            self.log.push(("start", s.name.clone()));
            self.running.insert(s.run, s.name.clone());
        }
        for s in starts {
            if let Behaviour::Return(outcome) = self.next_behaviour(&s.name) {
                if self.running.remove(&s.run).is_some() {
                    self.log.push(("end", s.name.clone()));
                    let next = self.engine.complete(s.run, outcome, self.now);
                    self.apply(next);
                }
            }
        }
        self.answer_store();
    }

    /// The server answers every ticket out, oldest first, as the store's replies come back after the step.
    fn answer_store(&mut self) {
        let Some(server) = self.server.clone().filter(|_| !self.answering) else { return };
        self.answering = true;
        while !self.store.is_empty() {
            let (ticket, ops) = self.store.remove(0);
            let replies = server.borrow_mut().run(ops, self.now);
            let next = self.engine.answer_store(ticket, &replies, self.now);
            self.apply(next);
        }
        self.answering = false;
    }

    pub fn begin(&mut self, calls: Value, policy: Policy) -> u32 {
        self.begin_with(calls, policy, TurnOptions::default())
    }

    pub fn begin_with(&mut self, calls: Value, policy: Policy, options: TurnOptions) -> u32 {
        let step = self.engine.begin(&calls.to_string(), &policy, &options, None, self.now).unwrap();
        let turn = step.turn.unwrap();
        self.apply(step);
        turn
    }

    /// Opens a streaming turn.
    pub fn stream(&mut self, options: TurnOptions) -> u32 {
        let step = self.engine.begin_streaming(&Policy::default(), &options, None, self.now);
        let turn = step.turn.unwrap();
        self.apply(step);
        turn
    }

    /// Adds calls to a streaming turn.
    pub fn add(&mut self, turn: u32, calls: Value) {
        let step = self.engine.add(turn, &calls.to_string(), self.now).unwrap();
        self.apply(step);
    }

    pub fn end(&mut self, turn: u32) {
        let step = self.engine.end(turn, self.now);
        self.apply(step);
    }

    /// A running handler settles.
    pub fn settle(&mut self, run: u32, outcome: Outcome) {
        let name = self.running.remove(&run).expect("a running handler");
        self.log.push(("end", name));
        let step = self.engine.complete(run, outcome, self.now);
        self.apply(step);
    }

    /// The handler of `name` that started first among those running.
    pub fn run_of(&self, name: &str) -> u32 {
        *self.running.iter().filter(|(_, n)| n.as_str() == name).map(|(run, _)| run).min().expect("a run of that tool")
    }

    /// Handler starts and ends so far, as `start:name` / `end:name`.
    pub fn order(&self) -> Vec<String> {
        self.log.iter().map(|(e, n)| format!("{e}:{n}")).collect()
    }

    pub fn advance_clock(&mut self, ms: u64) {
        self.now += Duration::from_millis(ms);
        let step = self.engine.expire(self.now);
        self.apply(step);
    }

    pub fn results(&mut self, turn: u32) -> Vec<ToolResult> {
        assert!(self.done.contains(&turn), "turn {turn} is not done");
        self.engine.take_results(turn).unwrap()
    }

    pub fn run(&mut self, calls: Value) -> Vec<ToolResult> {
        let turn = self.begin(calls, Policy::default());
        self.results(turn)
    }
}

pub fn text(s: &str) -> Behaviour {
    Behaviour::Return(Outcome::Text(s.into()))
}

pub fn search_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 2},
            "max_results": {"type": "integer", "minimum": 1, "maximum": 50},
            "sort": {"enum": ["relevance", "date"]},
            "filters": {"type": "array", "items": {"type": "object", "properties": {"field": {"type": "string"}}, "required": ["field"]}}
        },
        "required": ["query"],
        "additionalProperties": false
    })
}

pub fn host() -> Host {
    let mut h = Host::new(json!({"defaultTimeoutMs": 1000}));
    h.tool(json!({"name": "search", "readOnly": true, "parameters": search_schema()}), text("found"));
    h.tool(json!({"name": "write_file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}), text("written"));
    h.tool(json!({"name": "deploy", "needsApproval": true}), text("deployed"));
    h.tool(json!({"name": "hang", "readOnly": true, "timeoutMs": 100, "retry": {"maxRetries": 0}}), Behaviour::Hang);
    h.tool(json!({"name": "hang_write", "timeoutMs": 100}), Behaviour::Hang);
    h
}

/// A context in session `id`.
pub fn session(id: &str) -> Policy {
    Policy { fields: [("sessionId".to_string(), id.to_string())].into_iter().collect(), ..Policy::default() }
}

/// How many times the host started a handler of `name`.
pub fn ran(h: &Host, name: &str) -> usize {
    h.log.iter().filter(|(what, tool)| *what == "start" && tool == name).count()
}

pub fn error(r: &ToolResult) -> &str {
    r.error.as_deref().unwrap_or("")
}


/// Runs `scenario` once for each store; a failure's output says on which.
pub fn for_each_store(scenario: impl Fn(Stores)) {
    for stores in BOTH {
        println!("on the {stores:?} store");
        scenario(stores);
    }
}
