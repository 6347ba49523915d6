//! One executor: the registry, the turns in flight and their deadlines. The host drives it through plain
//! synchronous calls (`begin`, `complete`, `progress`, `expire`, `cancel`, `finish`); each answers with a `Step`
//! that says which handlers to start, which to abort and which turns are done. Stations are called here in
//! pipeline order.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::ser::SerializeTuple;
use serde::{Deserialize, Serialize, Serializer};
use rustc_hash::FxHashMap;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::bounded::Bounded;
use crate::artifacts;
use crate::budget::{self, Cost};
use crate::breaker::{Admission, Phase, Transition};
use crate::cache::{self, Kept};
use crate::calls::{read_calls, IncomingCall};
use crate::dedup::{self, Mode};
use crate::normalize::{self, normalize, Outcome};
use crate::fields::Fields;
use crate::options::{EngineOptions, ToolSpec, TurnOptions};
use crate::permission::{self, Decision, Permissions, Policy};
use crate::ratelimit::{self, RateLimit};
use crate::definitions::{self, DefinitionFormat};
use crate::registry::{Registry, Tool};
use crate::repair;
use crate::result::{failure_output, AttemptError, ErrorKind, PermissionNote, Redactions, Repair, Rollback, StageTable, StationMark, ToolResult};
use crate::scheduler::Schedule;
use crate::shape::Shaper;
use crate::shared::{CountPlan, Op};
use crate::store::{Bucket, MemoryLimits, MemoryStore, Store, Take};
use crate::text::{char_count, clip, QUOTED_CHARS};
use crate::timer::{after, Deadlines};
use crate::judge;
use crate::metrics::CallMetrics;
use crate::panic::{self, contained};
use crate::{checks, fence, invoke, json, keys, lookup, parse, retry, shape, validate};

mod commands;
mod guards;
mod remote;
pub use commands::CommandTask;
use remote::Shared;

/// A handler to start: `[run, turn, callId, toolName, args, attempt]` on the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct Start {
    pub run: u32,
    pub turn: u32,
    pub call_id: String,
    pub name: String,
    pub args: Value,
    pub attempt: u32,
    /// The call's place in its turn.
    pub index: usize,
}

impl Serialize for Start {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut t = s.serialize_tuple(7)?;
        t.serialize_element(&self.run)?;
        t.serialize_element(&self.turn)?;
        t.serialize_element(&self.call_id)?;
        t.serialize_element(&self.name)?;
        t.serialize_element(&self.args)?;
        t.serialize_element(&self.attempt)?;
        t.serialize_element(&self.index)?;
        t.end()
    }
}

#[derive(Debug, Default, Serialize, PartialEq)]
pub struct Step {
    /// Set by `begin`: the id of the turn it opened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// Handlers to start now.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub start: Vec<Start>,
    /// Runs whose handlers must be aborted, and why (`timeout`, `idle_timeout` or `cancelled`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub abort: Vec<(u32, ErrorKind)>,
    /// Turns whose results are all in: call `finish`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub done: Vec<u32>,
    /// Work only the host can do before a call may run: its `check` function, or its approval callback. Each is
    /// answered with `Engine::answer(ticket, …)`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub host: Vec<HostRequest>,
    /// Settlements that came after their run's deadline had passed (the host's event loop was blocked, so the
    /// deadline could not fire in time): the run timed out, and this is a late settlement. `[run, endedBy,
    /// outcome ('resolved' | 'rejected'), ms past the deadline]` on the wire.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub late: Vec<(u32, ErrorKind, &'static str, f64)>,
    /// Operations for the shared store, by ticket: `[ticket, [op, …]]`, each answered with `Engine::answer_store`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub store: Vec<(u32, Vec<Op>)>,
    /// Circuit breakers that changed phase, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub breaker: Vec<Transition>,
    /// Runs whose commands ended: the host settles each that is still open with the outcome `command`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<u32>,
    /// `[run, line]`: the latest line a running command wrote, at a bounded rate, for `onProgress`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub progress: Vec<(u32, String)>,
    /// Milliseconds until the host should call `expire` by its own timer (see `Engine::host_timer`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wake: Option<f64>,
}

/// `[ticket, kind, turn, callId, toolName, args, rule, reason, index]` on the wire; kind is `validate`, `check` or
/// `approve`; index is the call's place in its turn.
#[derive(Debug, Clone, PartialEq)]
pub struct HostRequest {
    pub ticket: u32,
    pub kind: HostKind,
    pub turn: u32,
    pub call_id: String,
    pub name: String,
    pub args: Value,
    /// For an approval: the rule that asked, and its reason.
    pub rule: Option<String>,
    pub reason: Option<String>,
    pub index: usize,
}

/// What a call waits on the host for, in the order a call meets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HostKind {
    /// The schema's own validation (a Standard Schema's refinements, transforms, defaults).
    Validate,
    /// The tool's check of the arguments.
    Check,
    /// What the call costs, from the tool's cost function (asked only when a cost budget applies).
    Cost,
    Approve,
}

impl Serialize for HostRequest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut t = s.serialize_tuple(9)?;
        t.serialize_element(&self.ticket)?;
        t.serialize_element(match self.kind {
            HostKind::Validate => "validate",
            HostKind::Check => "check",
            HostKind::Cost => "cost",
            HostKind::Approve => "approve",
        })?;
        t.serialize_element(&self.turn)?;
        t.serialize_element(&self.call_id)?;
        t.serialize_element(&self.name)?;
        t.serialize_element(&self.args)?;
        t.serialize_element(&self.rule)?;
        t.serialize_element(&self.reason)?;
        t.serialize_element(&self.index)?;
        t.end()
    }
}

/// What the host answers to a request, as JSON: `{ issues? }` for a validation, `{ problem? }` for a check,
/// `{ cost }` for a cost, `{ decision: 'approve' | 'deny', reason?, arguments?, issues?, cost?, remember?: 'session' }`
/// for an approval (issues: what the schema's own validation found in the edited arguments; cost: theirs), `{ error }`
/// when the function threw.
/// Issues are `[JSON pointer, message]` pairs.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostAnswer {
    #[serde(default)]
    issues: Option<Vec<(String, String)>>,
    #[serde(default)]
    problem: Option<String>,
    #[serde(default)]
    decision: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
    #[serde(default)]
    remember: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    cost: Option<f64>,
    /// Why the tool's cost function failed on arguments edited at approval (it matters only under a cost budget).
    #[serde(default)]
    cost_error: Option<String>,
    /// Set by the engine when no answer came in time.
    #[serde(skip)]
    timed_out: Option<String>,
}

impl HostAnswer {
    pub fn from_json(json: &str) -> Result<Self, String> {
        json::from_str_mended(json).map(|(answer, _)| answer).map_err(|e| format!("answer: not a host answer: {e}"))
    }
}

impl Step {
    pub fn is_empty(&self) -> bool {
        // Destructured in full so that a new field must be placed here and in `absorb`.
        let Step { turn, start, abort, done, host, late, store, breaker, commands, progress, wake } = self;
        turn.is_none()
            && start.is_empty()
            && abort.is_empty()
            && done.is_empty()
            && host.is_empty()
            && late.is_empty()
            && store.is_empty()
            && breaker.is_empty()
            && commands.is_empty()
            && progress.is_empty()
            && wake.is_none()
    }

    pub fn absorb(&mut self, other: Step) {
        let Step { turn, start, abort, done, host, late, store, breaker, commands, progress, wake } = other;
        self.turn = self.turn.or(turn);
        self.wake = match (self.wake, wake) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.start.extend(start);
        self.abort.extend(abort);
        self.done.extend(done);
        self.host.extend(host);
        self.late.extend(late);
        self.store.extend(store);
        self.breaker.extend(breaker);
        self.commands.extend(commands);
        self.progress.extend(progress);
    }

    /// The wire form: empty string when there is nothing to do, so the host can skip parsing.
    pub fn to_wire(&self) -> String {
        if self.is_empty() {
            String::new()
        } else {
            serde_json::to_string(self).expect("a step serializes")
        }
    }
}

/// Everything the watcher can wake the engine for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Alarm {
    /// A run's total time limit.
    Total(u32),
    /// A run's idle limit (no progress reported).
    Idle(u32),
    /// The end of a call's backoff: (turn, call index).
    Retry(u32, usize),
    /// The token a call reserved is due: (turn, call index).
    RateWait(u32, usize),
    /// A turn's own deadline.
    Turn(u32),
    /// How long the host may take to answer a request (a check, an approval).
    Host(u32),
    /// How long the shared store may take to answer a ticket.
    Store(u32),
    /// The next look of a call waiting for an identical call another process runs: (turn, call index).
    Poll(u32, usize),
}

/// Held boxed: a slot is moved whole (out of its turn and back) while the call is admitted and gated.
struct Slot {
    id: String,
    tool: Option<Arc<Tool>>,
    marks: Vec<StationMark>,
    /// The call holds a place in its turn's schedule (from its first start until its result).
    scheduled: bool,
    first_started: Option<Instant>,
    started: Option<Instant>,
    run: Option<u32>,
    attempts: u32,
    attempt_errors: Vec<AttemptError>,
    /// Waiting to retry until then; the failure stands if the retry never comes.
    /// Boxed, as every rarely set part of a slot: slots are moved whole while a turn begins.
    backoff: Option<Box<(Instant, ToolResult)>>,
    /// Waiting until then for the rate-limit token it reserved, and the buckets it reserved from.
    rate_wait: Option<(Instant, Reserved)>,
    /// The flight this call runs: its cache key and flight id (identical calls wait on it).
    fills: Option<(String, u32)>,
    /// The flight of an identical call whose result this call will share: its cache key and flight id.
    joined: Option<(String, u32)>,
    /// Answered because its turn ended (cancelled, deadline): nothing another turn may share.
    ended_early: bool,
    /// The session and query key this call counted under, and how often the query ran before.
    dedup: Option<DedupMark>,
    /// What the repair station changed in the call.
    repairs: Vec<Repair>,
    /// The request the call waits on before it may run (its check or its approval), by ticket.
    pending: Option<u32>,
    /// What the permission station decided and what decided it.
    permission: Option<(&'static str, String)>,
    /// When each attempt's handler started.
    starts: Vec<Instant>,
    /// With a shared store: what dedup and cache will ask of it when the call is handed out.
    deferred: Option<Deferred>,
    /// Waiting for an identical call another process runs: since when, the last wait between looks, and when
    /// the next look is due.
    polling: Option<(Instant, Duration, Instant)>,
    /// Why the shared store failed this call, which went on without it.
    store_error: Option<String>,
    /// Store tickets of its own it no longer waits on (timed out, or its turn ended): their answers may still come.
    unanswered: Vec<u32>,
    /// What the call spent of its budgets as it was about to run, given back if it never does.
    spent: Spent,
    /// What the breaker let the attempt under way do, until its outcome is counted.
    admission: Option<Admission>,
    /// What the call costs, when the tool's cost function said.
    cost: Option<f64>,
    result: Option<Box<ToolResult>>,
}

/// Which of the budget limits a call is held to it added to (a bit per limit, in the order of `limits_of`), and
/// the window each windowed one was added to in.
#[derive(Default)]
struct Spent {
    made: u16,
    windows: Vec<(u8, u64)>,
}

impl Spent {
    fn mark(&mut self, line: usize, window: u64) {
        self.made |= 1 << line;
        if window != 0 {
            self.windows.push((line as u8, window));
        }
    }
}

/// What a call's dedup and cache need from a shared store, asked in one ticket when the call is handed out.
struct Deferred {
    count: Option<CountPlan>,
    cache_key: Option<String>,
}

impl Slot {
    fn new(id: String) -> Box<Self> {
        Box::new(Slot {
            id,
            tool: None,
            marks: Vec::with_capacity(8),
            scheduled: false,
            first_started: None,
            started: None,
            run: None,
            attempts: 0,
            attempt_errors: Vec::new(),
            backoff: None,
            rate_wait: None,
            fills: None,
            joined: None,
            ended_early: false,
            dedup: None,
            repairs: Vec::new(),
            pending: None,
            permission: None,
            starts: Vec::new(),
            deferred: None,
            polling: None,
            store_error: None,
            unanswered: Vec::new(),
            spent: Spent::default(),
            admission: None,
            cost: None,
            result: None,
        })
    }
}

/// The buckets (key and shape) a call took or reserved a token from, to give it back if the call never runs.
type Reserved = Vec<(String, Bucket)>;

struct DedupMark {
    session: String,
    key: String,
    earlier: u64,
}

impl DedupMark {
    /// A repeated query's result says how often it ran before; under `note`, so does the text the model reads.
    fn annotate(&self, result: &mut ToolResult, mode: Mode) {
        if self.earlier == 0 {
            return;
        }
        result.metadata.repeats = Some(self.earlier);
        if mode == Mode::Note && result.success {
            result.output.push_str(&dedup::note(self.earlier));
        }
    }
}

struct Turn {
    /// Boxed: a slot is large, and the turn's vector grows and its slots are taken out by value.
    #[allow(clippy::vec_box)]
    slots: Vec<Box<Slot>>,
    /// Validated arguments of calls that will run (kept for their retries).
    args: FxHashMap<usize, Value>,
    schedule: Schedule,
    open: usize,
    begun: Instant,
    begun_epoch_ms: f64,
    deadline: Option<(Instant, u64)>,
    stop_on_error: bool,
    /// The context's policy (its plain fields key rate limits, caches and sessions).
    policy: Policy,
    /// Who may read back the artifacts its calls save (see `artifacts::owner`).
    owner: Option<Arc<str>>,
    done_reported: bool,
    /// Calls that ran in this turn, by budget scope (`*`, or a tool's name), for per-turn budgets.
    calls_run: FxHashMap<String, u64>,
}

struct Run {
    turn: u32,
    index: usize,
    total_at: Instant,
    /// The idle deadline and the idle limit it was armed with.
    idle: Option<(Instant, u64)>,
    verdict: Option<String>,
}

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
    fn add(&mut self, o: &ToolCounters) {
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

pub struct Engine {
    options: EngineOptions,
    registry: Registry,
    turns: FxHashMap<u32, Turn>,
    runs: FxHashMap<u32, Run>,
    /// Runs whose handlers returned while their value is still crossing from the host (see `hold`).
    held: FxHashMap<u32, Run>,
    deadlines: Deadlines<Alarm>,
    /// Running handlers per tool, for tools with their own `maxConcurrency`.
    tool_running: FxHashMap<String, usize>,
    /// Turns with a call held back by a tool's `maxConcurrency`: advanced when such a tool frees a place.
    held_back: BTreeSet<u32>,
    counters: BTreeMap<String, ToolCounters>,
    /// How calls ended, per tool; calls to unknown tools count in the total only.
    metrics: BTreeMap<String, CallMetrics>,
    unknown_tool_metrics: CallMetrics,
    store: Box<dyn Store>,
    /// The flight identical calls may join, by cache key (an invalidated flight is no longer listed).
    flights: HashMap<String, u32>,
    /// The calls waiting on each flight, by flight id, until the flight's call settles.
    flight_waiters: FxHashMap<u32, Vec<(u32, usize)>>,
    next_flight: u32,
    rate_limit: Option<RateLimit>,
    shaper: Arc<Shaper>,
    /// Consecutive rollback flags per session (`sessionId`; "" without one).
    rollbacks: Bounded<String, u32>,
    /// The executor's permission rules and mode, under every context's.
    permissions: Arc<Permissions>,
    /// Requests the host has not answered: ticket → (turn, call index, kind, answer deadline).
    tickets: FxHashMap<u32, (u32, usize, HostKind, Instant)>,
    next_ticket: u32,
    /// Requests made since the last step went out.
    outbox: Vec<HostRequest>,
    /// Approvals given "for this session": session, tool and the rule that asked.
    remembered: Bounded<String, ()>,
    /// Turns to advance before the current entry point returns (a worklist, so nothing recurses per call).
    dirty: BTreeSet<u32>,
    /// The stage sequences the host knows by id (see `results_to_wire`).
    stage_table: StageTable,
    /// A tool place was freed: turns held back by `maxConcurrency` get another look.
    places_freed: bool,
    /// The store shared between processes, when there is one: the tickets it has not answered, and what goes out.
    shared: Option<Shared>,
    /// With a shared store: each breaker's phase as the store last said, and until when it is open.
    breaker_views: FxHashMap<String, (Phase, Instant)>,
    /// Where a budget counter's key is written before the memory store looks it up.
    key: String,
    /// The processes of command tools, and background jobs.
    commands: Arc<crate::command::Hub>,
    next_turn: u32,
    next_run: u32,
    /// The deadline the host's own timer was last told to fire at (see `host_timer`).
    host_timer: Option<Instant>,
}

fn mark(station: &'static str, outcome: &'static str) -> StationMark {
    StationMark { station, outcome, at: Instant::now() }
}

/// Texts at least this long (256 Ki UTF-16 units, so at least 256 KiB of UTF-8) cross from the host in slices.
const SENT_MAX_BYTES: usize = 256 * 1024;

/// The longest wait a host timer takes (Node's: 2^31 - 1 ms; longer fires after 1 ms).
const HOST_TIMER_MAX: Duration = Duration::from_millis((1 << 31) - 1);

/// Milliseconds to the microsecond: finer is noise, and a short decimal is parsed several times faster by V8 than
/// the 17 digits of an arbitrary double.
fn millis(d: Duration) -> f64 {
    d.as_micros() as f64 / 1000.0
}

impl Engine {
    /// Fails when a part of the options cannot be built (a redaction pattern that does not compile).
    pub fn new(options: EngineOptions) -> Result<Self, String> {
        let limits = MemoryLimits {
            max_entries: options.cache.max_entries,
            max_bytes: options.cache.max_bytes,
            max_namespaces: options.dedup.max_sessions,
            max_counters_per_namespace: options.dedup.max_queries_per_session,
        };
        Self::with_store(options, Box::new(MemoryStore::new(limits)))
    }

    /// An engine whose cache, buckets and counters live in `store` (shared across processes, for instance).
    pub fn with_store(options: EngineOptions, store: Box<dyn Store>) -> Result<Self, String> {
        let rate_limit = options.rate_limit.as_ref().map(RateLimit::parse).transpose()?;
        let shaper = Shaper::new(&options.redact, options.artifacts.clone(), options.preview_chars, options.max_error_chars)?;
        let permissions = options.permissions.as_ref().map(|p| Permissions::parse(p, "executor")).transpose()?.unwrap_or_default();
        Ok(Engine {
            rollbacks: Bounded::new(options.dedup.max_sessions),
            permissions: Arc::new(permissions),
            tickets: FxHashMap::default(),
            next_ticket: 1,
            outbox: Vec::new(),
            remembered: Bounded::new(REMEMBERED_APPROVALS),
            shaper: Arc::new(shaper),
            store,
            flights: HashMap::new(),
            flight_waiters: FxHashMap::default(),
            next_flight: 1,
            rate_limit,
            dirty: BTreeSet::new(),
            stage_table: StageTable::default(),
            places_freed: false,
            shared: options.store.clone().map(Shared::new),
            breaker_views: FxHashMap::default(),
            key: String::new(),
            commands: Arc::default(),
            options,
            registry: Registry::default(),
            turns: FxHashMap::default(),
            runs: FxHashMap::default(),
            held: FxHashMap::default(),
            deadlines: Deadlines::default(),
            tool_running: FxHashMap::default(),
            held_back: BTreeSet::new(),
            counters: BTreeMap::new(),
            metrics: BTreeMap::new(),
            unknown_tool_metrics: CallMetrics::default(),
            next_turn: 1,
            next_run: 1,
            host_timer: None,
        })
    }

    /// The deadline set, for the host to run its watcher (`Deadlines::watch`).
    pub fn deadlines(&self) -> &Deadlines<Alarm> {
        &self.deadlines
    }

    pub fn register(&mut self, spec: ToolSpec) -> Result<(), String> {
        self.registry.register(spec, &self.options)
    }

    pub fn unregister(&mut self, name: &str) -> bool {
        // A tool registered again under this name starts with a closed breaker, under its own settings.
        if self.store.peek_breaker(name).is_some() {
            *self.store.breaker(name) = crate::breaker::BreakerState::default();
        }
        self.breaker_views.remove(name);
        self.registry.unregister(name)
    }

    pub fn list(&self, policy: &Policy) -> Value {
        let policy = self.under(policy);
        self.registry.list(|t| policy.visible(t))
    }

    pub fn definitions(&self, format: DefinitionFormat, policy: &Policy) -> Result<Value, String> {
        self.definitions_leaving_out(format, policy, &mut Vec::new())
    }

    /// As the host reads them: `{ definitions, leftOut }`, leftOut naming each mounted tool the format cannot take,
    /// with why, for the host to warn about.
    pub fn definitions_to_wire(&self, format: DefinitionFormat, policy: &Policy) -> Result<String, String> {
        let mut left_out = Vec::new();
        let definitions = self.definitions_leaving_out(format, policy, &mut left_out)?;
        Ok(serde_json::json!({ "definitions": definitions, "leftOut": left_out }).to_string())
    }

    fn definitions_leaving_out(&self, format: DefinitionFormat, policy: &Policy, left_out: &mut Vec<(String, String)>) -> Result<Value, String> {
        let policy = self.under(policy);
        definitions::definitions(self.registry.iter().filter(|t| policy.visible(*t)).map(|t| &**t), format, left_out)
    }

    /// A context's policy with the executor's permissions under it.
    fn under(&self, policy: &Policy) -> Policy {
        let mut policy = policy.clone();
        policy.executor = self.permissions.clone();
        policy
    }

    /// Reads a turn's calls, answers every call that cannot run, and starts the first handlers. A turn begun
    /// `cancelled` (its signal had already fired) starts nothing: calls that could run are cancelled unstarted.
    pub fn begin(
        &mut self,
        calls_json: &str,
        policy: &Policy,
        options: &TurnOptions,
        cancelled: Option<&str>,
        now: Instant,
    ) -> Result<Step, String> {
        let calls = read_calls(calls_json)?;
        let policy = self.under(policy);
        let turn_id = self.next_turn;
        let _span = tracing::debug_span!("toolgate.begin", turn = turn_id, calls = calls.len()).entered();
        self.next_turn = self.next_turn.wrapping_add(1).max(1);
        // Whole milliseconds, as Date.now() gives them.
        let begun_epoch_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_millis() as f64);
        let mut slots = Vec::with_capacity(calls.len());
        let mut args = FxHashMap::default();
        let mut runnable = Vec::new();
        // With stopOnError, a state-changing call refused here stops every call after it.
        let mut stopped_by: Option<(String, String)> = None;
        for (index, mut call) in calls.into_iter().enumerate() {
            // Stations 1–7 on what the model sent: a bug there costs this call alone.
            let admitted = contained(|| {
                let (mut slot, mut valid_args) = self.admit(&mut call, &policy);
                if let (Some(_), Some((id, name)), Some(t)) = (&valid_args, &stopped_by, &slot.tool) {
                    slot.marks.push(mark("invoke", "not_executed"));
                    slot.result = Some(Box::new(invoke::not_executed(slot.id.clone(), &t.spec.name, &stopped_after(&self.shaper, id, name))));
                    valid_args = None;
                } else if let (Some(args), Some(tool)) = (&valid_args, slot.tool.clone()) {
                    let runs = self.gate(None, turn_id, index, &mut slot, &tool, args, &policy, now)
                        && (slot.pending.is_some() || self.avoid(turn_id, index, &mut slot, &tool, args, &policy.fields, now));
                    if !runs {
                        valid_args = None;
                    }
                }
                (slot, valid_args)
            });
            let (slot, valid_args) = admitted.unwrap_or_else(|bug| {
                let mut slot = Slot::new(call.id.clone());
                slot.marks.push(mark("lookup", "internal_error"));
                let error = panic::internal_error("checking this call, so it was not run", &bug);
                slot.result = Some(Box::new(ToolResult::failure(call.id.clone(), call.name.clone(), ErrorKind::HandlerError, error, false)));
                (slot, None)
            });
            let tool = slot.tool.clone();
            if let Some(value) = valid_args {
                runnable.push((index, tool.as_ref().is_some_and(|t| t.spec.read_only)));
                args.insert(index, value);
            }
            if options.stop_on_error && stopped_by.is_none() && slot.result.as_ref().is_some_and(|r| !r.success) {
                if let Some(t) = tool.filter(|t| !t.spec.read_only) {
                    stopped_by = Some((slot.id.clone(), t.spec.name.clone()));
                }
            }
            slots.push(slot);
        }
        let open = runnable.len();
        let deadline = options.deadline_ms.map(|ms| (after(now, Duration::from_millis(ms)), ms));
        let mut turn = Turn {
            slots,
            args,
            schedule: Schedule::new(runnable, self.options.concurrency),
            open,
            begun: now,
            begun_epoch_ms,
            deadline,
            stop_on_error: options.stop_on_error,
            owner: artifacts::owner(&policy.fields).map(Arc::from),
            policy: policy.clone(),
            done_reported: false,
            calls_run: FxHashMap::default(),
        };
        let sealing = Sealing { note: self.options.repair.note, trace: self.options.trace, begun: now, begun_epoch_ms, shaper: &self.shaper };
        for slot in turn.slots.iter_mut() {
            if let Some(mut result) = slot.result.take() {
                // A cache hit answered here says it repeats a query, as one answered later does in `settle`.
                if let (Some(repeat), Some(tool), true) = (&slot.dedup, &slot.tool, result.cached) {
                    repeat.annotate(&mut result, tool.dedup.mode);
                }
                sealing.seal(&mut result, slot, 0.0);
                tracing::debug!(turn = turn_id, call = %self.shaper.redact_text(&slot.id), tool = %result.name, outcome = result.error_kind.map_or("ok", ErrorKind::as_str), "call answered without running");
                tally(&mut self.metrics, &mut self.unknown_tool_metrics, &result, slot.tool.is_some());
                slot.result = Some(result);
            }
        }
        self.turns.insert(turn_id, turn);
        if let Some((at, _)) = deadline.filter(|_| open > 0) {
            self.deadlines.arm(at, Alarm::Turn(turn_id));
        }
        let mut step = match cancelled {
            Some(reason) => self.cancel(turn_id, reason, &[], now),
            None => Step::default(),
        };
        step.turn = Some(turn_id);
        self.dirty.insert(turn_id);
        self.drain(now, &mut step);
        Ok(step)
    }

    /// Stations 1–5 for one call: lookup, parse, validate, permission. Returns the slot, and the validated
    /// arguments when the call may run (otherwise the slot already holds its result).
    fn admit(&self, call: &mut IncomingCall, policy: &Policy) -> (Box<Slot>, Option<Value>) {
        #[cfg(test)]
        if call.name == tests::PANICS {
            panic!("a bug on purpose");
        }
        let mut slot = Slot::new(call.id.clone());
        // What a refusal quotes of the model's text (a name, keys) is redacted whole before it is cut; what that
        // found is counted on the refusal.
        let found = RefCell::new(Redactions::new());
        let redact = |text: &str| self.shaper.redact_counting(text, &mut found.borrow_mut());
        let refuse = |slot: &mut Slot, station: &'static str, name: &str, kind: ErrorKind, error: String| {
            slot.marks.push(mark(station, kind.as_str()));
            let mut result = ToolResult::failure(slot.id.clone(), name.to_string(), kind, error, false);
            let found = found.take();
            if !found.is_empty() {
                result.metadata.redactions = Some(found);
            }
            slot.result = Some(Box::new(result));
        };
        if let Some(why) = call.unreadable.take() {
            let error = format!("The tool call could not be read: {why}.");
            refuse(&mut slot, "lookup", &call.name, ErrorKind::InvalidArguments, error);
            return (slot, None);
        }
        let repair = &self.options.repair;
        let (visible, conceals) = (|t: &Tool| policy.visible(t), |t: &Tool| policy.conceals(t));
        let sight = lookup::Sight { visible: &visible, conceals: &conceals };
        let tool = match lookup::lookup(&self.registry, &sight, &call.name, redact) {
            Ok(tool) => {
                slot.marks.push(mark("lookup", "found"));
                tool
            }
            Err(error) => match repair.tool_names.then(|| lookup::correct(&self.registry, &sight, &call.name)).flatten() {
                Some(tool) => {
                    slot.marks.push(mark("lookup", "corrected"));
                    slot.repairs.push(Repair::named_tool(&call.name, &tool.spec.name));
                    tool
                }
                None => {
                    // A tool the context may not know of is answered as a name that does not exist; the audit
                    // keeps what hid it.
                    if let Some(Decision::Deny { by, .. }) = self.registry.get(&call.name).map(|t| policy.decide(t, &Value::Null, |_| false)) {
                        slot.permission = Some(("denied", by));
                    }
                    // The name is the model's, not a tool's: cut short and redacted, like the error that quotes it.
                    let shown = clip(&self.shaper.redact_text(&call.name), QUOTED_CHARS).into_owned();
                    refuse(&mut slot, "lookup", &shown, ErrorKind::UnknownTool, error);
                    return (slot, None);
                }
            },
        };
        let name = tool.spec.name.clone();
        slot.tool = Some(tool.clone());
        // A tool this context may not use (hidden by a deny rule that says why) is refused before its arguments
        // are read: validating them would only teach the model the parameters of a tool it cannot call.
        if !policy.visible(&tool) {
            if let Decision::Deny { kind, error, by } = policy.decide(&tool, &Value::Null, |_| false) {
                slot.permission = Some(("denied", by));
                refuse(&mut slot, "permission", &name, kind, error);
            }
            return (slot, None);
        }
        let raw = std::mem::replace(&mut call.args, crate::calls::RawArgs::Missing);
        let parsed = match parse::parse(raw, call.lone_surrogates, repair.json) {
            Ok(parsed) => parsed,
            Err(error) => {
                let error = format!("Tool \"{name}\": {error}");
                refuse(&mut slot, "parse", &name, ErrorKind::InvalidArguments, error);
                return (slot, None);
            }
        };
        slot.marks.push(mark("parse", if parsed.mended.is_empty() { "ok" } else { "mended" }));
        let mut args = parsed.args;
        let mut repairs = parsed.mended;
        // Keys, types and wrappers are repaired only in a call that fails validation, and kept only if it then passes.
        if !tool.validator.is_valid(&args) {
            let names = [name.as_str(), call.name.as_str()];
            if let Some((fixed, more)) = repair::reread(&tool.schema, &args, &tool.aliases, names, repair, |v| tool.validator.is_valid(v)) {
                slot.marks.push(mark("repair", "applied"));
                repairs.extend(more);
                args = fixed;
            } else {
                // A repair that still fails: the original error stands (the parser's, for mended text).
                match (parsed.parser_error, validate::validate(&*tool, &args, &redact)) {
                    (Some(error), _) => refuse(&mut slot, "parse", &name, ErrorKind::InvalidArguments, format!("Tool \"{name}\": {error}")),
                    (None, Err(error)) => refuse(&mut slot, "validate", &name, ErrorKind::InvalidArguments, error),
                    // The validator's two answers disagree: still refused, not run.
                    (None, Ok(())) => refuse(&mut slot, "validate", &name, ErrorKind::InvalidArguments, format!("Tool \"{name}\": the arguments do not match its parameters.")),
                }
                return (slot, None);
            }
        }
        slot.repairs.extend(repairs.into_iter().map(|r| r.redacted(|v| self.shaper.redact_value(v))));
        slot.marks.push(mark("validate", "ok"));
        // Business checks a schema cannot express run before permission: a path or a host out of bounds is an
        // invalid argument, whoever may call the tool.
        if !tool.checks.is_empty() {
            if let Err(problem) = checks::run(&tool.checks, &args) {
                let error = format!("Tool \"{name}\": {problem}. Change the arguments to stay within what the tool allows.");
                refuse(&mut slot, "check", &name, ErrorKind::InvalidArguments, error);
                return (slot, None);
            }
            slot.marks.push(mark("check", "ok"));
        }
        (slot, Some(args))
    }

    /// The rest of admission for a call whose arguments are valid, from the step after `passed` on: the schema's
    /// own validation and the tool's own check (in the host), then the permission station, which may ask the host
    /// for approval. False when the call is refused (the slot holds its result); a call waiting on the host stays
    /// runnable.
    #[allow(clippy::too_many_arguments)]
    fn gate(&mut self, passed: Option<HostKind>, turn_id: u32, index: usize, slot: &mut Slot, tool: &Tool, args: &Value, policy: &Policy, now: Instant) -> bool {
        let budgets = [self.options.budget.as_ref(), tool.spec.budget.as_ref(), policy.budget.as_ref()];
        let costed = tool.cost == Cost::Host && budget::counts_cost(budgets);
        for (kind, wanted) in [(HostKind::Validate, tool.spec.schema_check), (HostKind::Check, tool.spec.check), (HostKind::Cost, costed)] {
            if wanted && passed.is_none_or(|p| p < kind) {
                self.ask_host(kind, turn_id, index, slot, tool, args, None, now);
                return true;
            }
        }
        self.permit(turn_id, index, slot, tool, args, policy, now)
    }

    /// Station 5 for one call. False when refused (the slot holds its result).
    #[allow(clippy::too_many_arguments)]
    fn permit(&mut self, turn_id: u32, index: usize, slot: &mut Slot, tool: &Tool, args: &Value, policy: &Policy, now: Instant) -> bool {
        let session = policy.fields.get("sessionId").map_or("", String::as_str);
        let remembered = |by: &str| self.remembered.contains(&remembered_key(session, &tool.spec.name, by));
        match policy.decide(tool, args, remembered) {
            Decision::Allow { how, by } => {
                slot.marks.push(mark("permission", how));
                // Said only when a rule, a mode or an answer decided: every other result would carry the same words.
                if by != permission::NOTHING_APPLIES {
                    slot.permission = Some((how, by));
                }
                true
            }
            Decision::Deny { kind, error, by } => {
                slot.marks.push(mark("permission", kind.as_str()));
                slot.permission = Some(("denied", by));
                slot.result = Some(Box::new(ToolResult::failure(slot.id.clone(), tool.spec.name.clone(), kind, error, false)));
                false
            }
            Decision::Ask { by, reason } => {
                slot.marks.push(mark("permission", "asked"));
                slot.permission = Some(("asked", by.clone()));
                // Another process may have been given this approval for the session: the store knows.
                if let (Some(_), false) = (&self.shared, session.is_empty()) {
                    let session = session.to_string();
                    slot.pending = Some(self.ask_remembered(turn_id, index, &session, &tool.spec.name, by, reason, now));
                } else {
                    self.ask_host(HostKind::Approve, turn_id, index, slot, tool, args, Some((by, reason)), now);
                }
                true
            }
        }
    }

    /// The call waits until the host answers (or its time to answer passes).
    #[allow(clippy::too_many_arguments)]
    fn ask_host(&mut self, kind: HostKind, turn_id: u32, index: usize, slot: &mut Slot, tool: &Tool, args: &Value, rule: Option<(String, Option<String>)>, now: Instant) {
        let ticket = self.take_ticket();
        let limit = match kind {
            HostKind::Validate | HostKind::Check | HostKind::Cost => self.options.check_timeout_ms,
            HostKind::Approve => self.options.approval_timeout_ms,
        };
        let at = after(now, Duration::from_millis(limit));
        self.deadlines.arm(at, Alarm::Host(ticket));
        self.tickets.insert(ticket, (turn_id, index, kind, at));
        tracing::debug!(turn = turn_id, call = %self.shaper.redact_text(&slot.id), ticket, kind = ?kind, "waiting on the host");
        slot.pending = Some(ticket);
        let (rule, reason) = rule.map_or((None, None), |(by, reason)| (Some(by), reason));
        self.outbox.push(HostRequest { ticket, kind, turn: turn_id, call_id: slot.id.clone(), name: tool.spec.name.clone(), args: args.clone(), rule, reason, index });
    }

    /// A fresh ticket, for a request to the host or to the shared store.
    fn take_ticket(&mut self) -> u32 {
        let ticket = self.next_ticket;
        self.next_ticket = self.next_ticket.wrapping_add(1).max(1);
        ticket
    }

    /// The host answered a request (a check or an approval). An answer that comes too late, or for a call whose
    /// turn ended, changes nothing.
    pub fn answer(&mut self, ticket: u32, answer: HostAnswer, now: Instant) -> Step {
        let mut step = Step::default();
        if let Some((turn_id, index, kind, at)) = self.tickets.remove(&ticket) {
            self.deadlines.disarm(at, Alarm::Host(ticket));
            self.resolve(turn_id, index, ticket, kind, answer, now, &mut step);
        }
        self.drain(now, &mut step);
        step
    }

    /// The host did not answer in time: a check that cannot run fails the call; an approval not given is a denial.
    fn host_timed_out(&mut self, ticket: u32, now: Instant, step: &mut Step) {
        let Some((turn_id, index, kind, _)) = self.tickets.remove(&ticket) else { return };
        let (limit, what) = match kind {
            HostKind::Validate => (self.options.check_timeout_ms, "validation"),
            HostKind::Check => (self.options.check_timeout_ms, "check"),
            HostKind::Cost => (self.options.check_timeout_ms, "cost"),
            HostKind::Approve => (self.options.approval_timeout_ms, "approval"),
        };
        let answer = HostAnswer { timed_out: Some(format!("no {what} came within {limit} ms")), ..HostAnswer::default() };
        self.resolve(turn_id, index, ticket, kind, answer, now, step);
    }

    #[allow(clippy::too_many_arguments)]
    fn resolve(&mut self, turn_id: u32, index: usize, ticket: u32, kind: HostKind, mut answer: HostAnswer, now: Instant, step: &mut Step) {
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        let session = turn.policy.fields.get("sessionId").cloned();
        let slot = &mut turn.slots[index];
        // An answer for a call already answered (or for another request of it) changes nothing.
        if slot.result.is_some() || slot.pending != Some(ticket) {
            return;
        }
        slot.pending = None;
        // What the host says goes to the model and the trace: it is redacted like a handler's error.
        for text in [&mut answer.problem, &mut answer.error, &mut answer.reason].into_iter().flatten() {
            *text = self.shaper.redact_text(text);
        }
        let tool = slot.tool.clone().expect("a call waiting on the host has a tool");
        let name = tool.spec.name.clone();
        let id = slot.id.clone();
        let refuse = |kind: ErrorKind, error: String| Box::new(ToolResult::failure(id.clone(), name.clone(), kind, error, false));
        let refused = match kind {
            HostKind::Validate | HostKind::Check | HostKind::Cost => {
                let redact = |text: &str| self.shaper.redact_text(text);
                let (station, failed) = match kind {
                    HostKind::Validate => ("schema", "its schema's own validation failed"),
                    HostKind::Check => ("check", "its argument check failed"),
                    _ => ("cost", "its cost could not be computed"),
                };
                let problem = match (kind, answer.issues, answer.problem) {
                    (HostKind::Validate, Some(issues), _) => Some(validate::issues(&name, &issues, &redact)),
                    (HostKind::Check, _, Some(problem)) => Some(format!("Tool \"{name}\": {problem}. Change the arguments and call it again.")),
                    _ => None,
                };
                let cost = answer.cost.filter(|c| *c >= 0.0 && c.is_finite());
                let failure = match (kind, answer.error.or(answer.timed_out)) {
                    (_, Some(failure)) => Some(failure),
                    (HostKind::Cost, None) if cost.is_none() => Some(format!("it gave {}, not a number of at least 0", answer.cost.map_or("nothing".into(), |c| c.to_string()))),
                    _ => None,
                };
                match (failure, problem) {
                    (Some(failure), _) => {
                        slot.marks.push(mark(station, "failed"));
                        Some(refuse(ErrorKind::HandlerError, format!("Tool \"{name}\" was not run: {failed} ({failure}).")))
                    }
                    (None, Some(problem)) => {
                        slot.marks.push(mark(station, "refused"));
                        Some(refuse(ErrorKind::InvalidArguments, problem))
                    }
                    (None, None) => {
                        slot.marks.push(mark(station, "ok"));
                        slot.cost = cost.or(slot.cost);
                        let mut slot = std::mem::replace(slot, Slot::new(String::new()));
                        let args = turn.args.get(&index).cloned().unwrap_or(Value::Null);
                        let policy = turn.policy.clone();
                        let allowed = self.gate(Some(kind), turn_id, index, &mut slot, &tool, &args, &policy, now);
                        let waiting = slot.pending.is_some();
                        let result = slot.result.take();
                        self.turns.get_mut(&turn_id).expect("a live turn").slots[index] = slot;
                        match (allowed, waiting) {
                            (true, false) => return self.proceed(turn_id, index, now, step),
                            (true, true) => return,
                            (false, _) => result,
                        }
                    }
                }
            }
            HostKind::Approve => {
                let asked_by = slot.permission.as_ref().map_or(String::new(), |(_, by)| by.clone());
                let denial = match (answer.error, answer.timed_out, answer.decision.as_deref()) {
                    (Some(error), _, _) => Some(format!("the approval callback failed ({error})")),
                    (None, Some(timeout), _) => Some(timeout),
                    (None, None, Some("approve")) => None,
                    (None, None, _) => Some(answer.reason.clone().map_or("it was declined".into(), |r| format!("declined: {r}"))),
                };
                let refused = match denial {
                    Some(why) => {
                        slot.marks.push(mark("approval", "denied"));
                        slot.permission = Some(("denied", format!("{asked_by}; {why}")));
                        Some(refuse(
                            ErrorKind::ApprovalDenied,
                            format!("Tool \"{name}\" needs approval, and this call was not approved: {why}. Do not retry it unchanged; ask the user, or do something else."),
                        ))
                    }
                    None => match answer.arguments {
                        // Edited arguments meet everything the model's did: the schema (and its own validation, which
                        // the host ran on them), the checks, the deny rules.
                        Some(edited) => match edited_problem(&tool, &edited, answer.issues.as_deref(), &turn.policy, &self.shaper) {
                            // Priced only under a cost budget (the model's arguments were): there, no price, no call.
                            None if slot.cost.is_some() && answer.cost_error.is_some() => {
                                slot.marks.push(mark("approval", "edited_invalid"));
                                let why = answer.cost_error.as_deref().unwrap_or_default();
                                Some(refuse(
                                    ErrorKind::HandlerError,
                                    format!("The arguments as edited at approval were not run: their cost could not be computed ({why})."),
                                ))
                            }
                            None => {
                                slot.marks.push(mark("approval", "edited"));
                                turn.args.insert(index, edited);
                                // A cost computed for the model's arguments is the edited ones' now.
                                if slot.cost.is_some() {
                                    slot.cost = answer.cost.filter(|c| *c >= 0.0 && c.is_finite()).or(slot.cost);
                                }
                                None
                            }
                            Some((kind, error)) => {
                                slot.marks.push(mark("approval", "edited_invalid"));
                                Some(refuse(kind, format!("The arguments as edited at approval were refused, so the call was not run. {error}")))
                            }
                        },
                        None => {
                            slot.marks.push(mark("approval", "approved"));
                            None
                        }
                    },
                };
                if refused.is_none() {
                    // Remembered only for a session the context names: without one, "this session" would be everyone.
                    let session = session.filter(|_| answer.remember.as_deref() == Some("session"));
                    let how = if session.is_some() { "approved for this session" } else { "approved" };
                    slot.permission = Some(("approved", format!("{asked_by}; {how} by the approval callback")));
                    if let Some(session) = session {
                        self.remembered.push(remembered_key(&session, &name, &asked_by), ());
                        self.share_remembered(&session, &name, &asked_by);
                    }
                }
                refused
            }
        };
        match refused {
            Some(result) => self.settle_waiting(turn_id, index, result, now, step),
            None => self.proceed(turn_id, index, now, step),
        }
    }

    /// A call the host let through goes on: dedup and cache, then, once its schedule has handed it out, the run.
    fn proceed(&mut self, turn_id: u32, index: usize, now: Instant, step: &mut Step) {
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        let mut slot = std::mem::replace(&mut turn.slots[index], Slot::new(String::new()));
        let tool = slot.tool.clone().expect("a call waiting on the host has a tool");
        let args = turn.args.get(&index).cloned().unwrap_or(Value::Null);
        let fields = turn.policy.fields.clone();
        let runs = self.avoid(turn_id, index, &mut slot, &tool, &args, &fields, now);
        let handed_out = slot.scheduled;
        let answered = slot.result.take();
        self.turns.get_mut(&turn_id).expect("a live turn").slots[index] = slot;
        if let (false, Some(result)) = (runs, answered) {
            return self.settle_waiting(turn_id, index, result, now, step);
        }
        if handed_out {
            self.release_place(&tool.spec.name); // held while it waited; taken again as it launches
            self.launch(turn_id, index, now, step);
        }
    }

    /// A call answered while it waited on the host: out of its schedule (or its place freed), then settled.
    fn settle_waiting(&mut self, turn_id: u32, index: usize, result: Box<ToolResult>, now: Instant, step: &mut Step) {
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        let slot = &turn.slots[index];
        if slot.scheduled {
            let name = slot.tool.as_ref().expect("a call waiting on the host has a tool").spec.name.clone();
            self.release_place(&name);
        } else {
            turn.schedule.remove(index);
        }
        self.settle(turn_id, index, result, now, step);
    }

    /// Stations 6 and 7, dedup and cache: work a call need not do. False when the call is answered here (the slot
    /// holds its result); a call that joined an identical call in flight stays runnable and waits for it.
    #[allow(clippy::too_many_arguments)]
    fn avoid(&mut self, turn_id: u32, index: usize, slot: &mut Slot, tool: &Tool, args: &Value, fields: &Fields, now: Instant) -> bool {
        if self.shared.is_some() {
            return self.defer(slot, tool, args, fields);
        }
        let name = tool.spec.name.as_str();
        if let (Some(session), true) = (fields.get("sessionId"), tool.dedup.mode != Mode::Off) {
            let key = tool.dedup.query_key(name, args);
            let ttl = Duration::from_millis(self.options.dedup.session_ttl_ms);
            // Counted on arrival, so that a repeat within one turn is seen; a call that never runs gives it back.
            let earlier = self.store.increment(session, &key, ttl, now) - 1;
            let mode = tool.dedup.mode;
            if earlier > 0 && mode == Mode::Refuse {
                self.store.decrement(session, &key);
            }
            let reused = (earlier > 0 && mode == Mode::Reuse).then(|| self.store.get(&reuse_key(session, &key), now)).flatten();
            if let Some(result) = self.repeated(slot, tool, session, &key, earlier, reused.as_deref(), fields) {
                slot.result = Some(Box::new(result));
                return false;
            }
        }
        let Some(rule) = &tool.cache else { return true };
        let scope = rule.scope.as_ref().map(|field| fields.get(field).map_or("", String::as_str));
        let key = cache::key(name, args, scope);
        match self.store.get(&key, now) {
            Some(text) => {
                if let Some(result) = self.cache_hit(slot, name, &text, fields) {
                    slot.result = Some(Box::new(result));
                    return false;
                }
            }
            None => counters_of(&mut self.counters, name).cache_misses += 1,
        }
        // A call that joins runs in its turn's schedule like any call, but when handed out it waits for the flight.
        self.join_or_lead(key, name, turn_id, index).assign(slot);
        true
    }

    /// Joins the flight identical calls may join, or opens one the call will run.
    fn join_or_lead(&mut self, key: String, tool: &str, turn_id: u32, index: usize) -> FlightRole {
        if let Some(&id) = self.flights.get(&key) {
            self.flight_waiters.entry(id).or_default().push((turn_id, index));
            counters_of(&mut self.counters, tool).shared_flights += 1;
            FlightRole::Joined(key, id)
        } else {
            let id = self.next_flight;
            self.next_flight = self.next_flight.wrapping_add(1).max(1);
            self.flights.insert(key.clone(), id);
            self.flight_waiters.insert(id, Vec::new());
            FlightRole::Leads(key, id)
        }
    }

    /// The buckets a call's tokens come from: the executor's and the tool's, each keyed by its split field, with
    /// the wait the call may make for it (never past its turn's deadline), and whether it is the executor's.
    fn limits_of(&self, turn_id: u32, index: usize, now: Instant) -> Vec<(String, Bucket, Duration, bool)> {
        let turn = self.turns.get(&turn_id).expect("a live turn");
        let tool = turn.slots[index].tool.as_ref().expect("a scheduled call has a tool");
        let latest = turn.deadline.map(|(at, _)| at);
        [(self.rate_limit.as_ref(), true), (tool.rate_limit.as_ref(), false)]
            .into_iter()
            .filter_map(|(limit, whole)| {
                let limit = limit?;
                let split = limit.key.as_ref().map_or("", |field| turn.policy.fields.get(field).map_or("", String::as_str));
                let key = if whole { format!("*{}{split}", keys::SEP) } else { format!("{}{}{split}", tool.spec.name, keys::SEP) };
                let max_wait = latest.map_or(limit.max_wait, |end| limit.max_wait.min(end.saturating_duration_since(now)));
                Some((key, limit.bucket, max_wait, whole))
            })
            .collect()
    }

    /// Station 8 for a call the scheduler hands out: a token from the executor's bucket and the tool's, now or
    /// after a wait the call may make; else a `rate_limited` result.
    fn take_tokens(&mut self, turn_id: u32, index: usize, now: Instant) -> Result<Option<(Instant, Reserved)>, Box<ToolResult>> {
        let mut ready_at = now;
        let mut taken = Vec::new();
        for (bucket_key, bucket, max_wait, whole) in self.limits_of(turn_id, index, now) {
            match self.store.take_token(&bucket_key, bucket, max_wait, now) {
                Take::Now => taken.push((bucket_key, bucket)),
                Take::After(wait) => {
                    ready_at = ready_at.max(after(now, wait));
                    taken.push((bucket_key, bucket));
                }
                Take::Refused(wait) => {
                    // The call does not run: a token the other bucket gave it goes back.
                    for (key, bucket) in taken {
                        self.store.refund_token(&key, bucket);
                    }
                    let slot = &self.turns[&turn_id].slots[index];
                    let name = slot.tool.as_ref().expect("a scheduled call has a tool").spec.name.clone();
                    counters_of(&mut self.counters, &name).rate_limited += 1;
                    return Err(Box::new(ratelimit::refused(slot.id.clone(), &name, whole, wait)));
                }
            }
        }
        Ok((ready_at > now).then_some((ready_at, taken)))
    }

    /// Advances every turn marked dirty, and the turns held back by a tool's `maxConcurrency` once a place has
    /// been freed, until nothing changes. Every entry point ends here, so settling a call never recurses.
    fn drain(&mut self, now: Instant, step: &mut Step) {
        loop {
            while let Some(turn_id) = self.dirty.pop_first() {
                self.advance(turn_id, now, step);
            }
            if !std::mem::take(&mut self.places_freed) || self.held_back.is_empty() {
                break;
            }
            self.dirty.extend(std::mem::take(&mut self.held_back));
        }
        // Requests for calls answered meanwhile (their turn was cancelled, say) are not sent.
        let tickets = &self.tickets;
        step.host.extend(self.outbox.drain(..).filter(|r| tickets.contains_key(&r.ticket)));
        self.flush_store(now, step);
        self.stop_abandoned_commands(step);
    }

    /// Starts what the turn's schedule allows and reports the turn done when nothing is left open.
    fn advance(&mut self, turn_id: u32, now: Instant, step: &mut Step) {
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        let tool_running = &self.tool_running;
        let slots = &turn.slots;
        let mut held_back = false;
        // Places taken in this round, so that the next candidate of the same tool sees them.
        let mut admitted: HashMap<&str, usize> = HashMap::new();
        let ready = turn.schedule.ready(|index| {
            let tool = slots[index].tool.as_ref().expect("a scheduled call has a tool");
            let Some(cap) = tool.spec.max_concurrency else { return true };
            let name = tool.spec.name.as_str();
            let taken = admitted.entry(name).or_default();
            if tool_running.get(name).copied().unwrap_or(0) + *taken >= cap {
                held_back = true;
                return false;
            }
            *taken += 1;
            true
        });
        if held_back {
            self.held_back.insert(turn_id);
        }
        for index in ready {
            self.launch(turn_id, index, now, step);
        }
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        if turn.open == 0 && !turn.done_reported {
            turn.done_reported = true;
            step.done.push(turn_id);
            self.held_back.remove(&turn_id);
        }
    }

    /// A call its turn's schedule hands out. One that joined an identical call in flight waits for it, holding
    /// its tool place; if that flight has ended meanwhile, it answers from the cache, or joins or opens the
    /// flight that is current now.
    fn launch(&mut self, turn_id: u32, index: usize, now: Instant, step: &mut Step) {
        let slot = &mut self.turns.get_mut(&turn_id).expect("a live turn").slots[index];
        slot.scheduled = true;
        let name = slot.tool.as_ref().expect("a scheduled call has a tool").spec.name.clone();
        if slot.pending.is_some() {
            // Still waiting on the host: it holds its place in the schedule and under maxConcurrency.
            self.take_place(&name);
            return;
        }
        if let Some(deferred) = slot.deferred.take() {
            return self.ask_deferred(turn_id, index, deferred, now);
        }
        if let Some((key, id)) = slot.joined.take() {
            if self.flight_waiters.get(&id).is_some_and(|w| w.contains(&(turn_id, index))) {
                slot.joined = Some((key, id));
                self.take_place(&name);
                return;
            }
            let hit = self.store.get(&key, now).and_then(|text| Kept::revive(&text, slot.id.clone(), name.clone()));
            if let Some(mut result) = hit {
                result.cached = true;
                slot.marks.push(mark("cache", "hit"));
                let turn = self.turns.get(&turn_id).expect("a live turn");
                self.hand_over(&result, &turn.policy.fields);
                self.settle(turn_id, index, Box::new(result), now, step);
                return;
            }
            let role = self.join_or_lead(key, &name, turn_id, index);
            let slot = &mut self.turns.get_mut(&turn_id).expect("a live turn").slots[index];
            if matches!(role, FlightRole::Joined(..)) {
                role.assign(slot);
                self.take_place(&name);
                return;
            }
            role.assign(slot);
        }
        self.run_now(turn_id, index, now, step);
    }

    /// Station 8, then invoke: budgets (on the first attempt) and the breaker, then start now, wait for a reserved
    /// token, or answer `rate_limited`. A call they refuse takes no token.
    fn run_now(&mut self, turn_id: u32, index: usize, now: Instant, step: &mut Step) {
        let first = self.turns[&turn_id].slots[index].attempts == 0;
        let spends = if first {
            match self.spend_budgets(turn_id, index, now) {
                Ok(spends) => spends,
                Err(refused) => return self.settle(turn_id, index, refused, now, step),
            }
        } else {
            Vec::new()
        };
        let ask_breaker = match self.admit_attempt(turn_id, index, now, step) {
            Ok(admitted) => matches!(admitted, guards::Admitted::AskStore),
            Err(refused) => return self.settle(turn_id, index, refused, now, step),
        };
        if self.shared.is_some() {
            return self.ask_tokens(turn_id, index, spends, ask_breaker, now, step);
        }
        match self.take_tokens(turn_id, index, now) {
            Ok(None) => self.start_run(turn_id, index, now, step),
            Ok(Some((at, reserved))) => self.wait_for_token(turn_id, index, at, reserved),
            Err(refused) => {
                self.turns.get_mut(&turn_id).expect("a live turn").slots[index].marks.push(mark("rate_limit", "refused"));
                self.settle(turn_id, index, refused, now, step);
            }
        }
    }

    /// The call reserved a token due at `at`; it keeps its places (schedule and tool) while it waits.
    fn wait_for_token(&mut self, turn_id: u32, index: usize, at: Instant, reserved: Reserved) {
        let slot = &mut self.turns.get_mut(&turn_id).expect("a live turn").slots[index];
        slot.marks.push(mark("rate_limit", "waited"));
        slot.rate_wait = Some((at, reserved));
        let name = slot.tool.as_ref().expect("a scheduled call has a tool").spec.name.clone();
        self.take_place(&name);
        self.deadlines.arm(at, Alarm::RateWait(turn_id, index));
    }

    fn token_due(&mut self, turn_id: u32, index: usize, now: Instant, step: &mut Step) {
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        let slot = &mut turn.slots[index];
        if slot.rate_wait.take().is_none() {
            return;
        }
        let name = slot.tool.as_ref().expect("a waiting call has a tool").spec.name.clone();
        self.release_place(&name); // taken again by start_run
        self.start_run(turn_id, index, now, step);
    }

    /// Hands out one attempt of a call: a fresh run id (and so a fresh signal in the host) and its deadlines.
    fn start_run(&mut self, turn_id: u32, index: usize, now: Instant, step: &mut Step) {
        let tool = self.turns.get(&turn_id).expect("a live turn").slots[index].tool.clone().expect("a scheduled call has a tool");
        self.take_place(&tool.spec.name);
        let turn = self.turns.get_mut(&turn_id).expect("a live turn");
        let slot = &mut turn.slots[index];
        let run = self.next_run;
        self.next_run = self.next_run.wrapping_add(1).max(1);
        let (total, idle_ms) = Self::run_limits(&tool);
        let total_at = after(now, total);
        self.deadlines.arm(total_at, Alarm::Total(run));
        let idle = idle_ms.map(|ms| (after(now, Duration::from_millis(ms)), ms));
        if let Some((at, _)) = idle {
            self.deadlines.arm(at, Alarm::Idle(run));
        }
        self.runs.insert(run, Run { turn: turn_id, index, total_at, idle, verdict: None });
        slot.scheduled = true;
        slot.first_started.get_or_insert(now);
        slot.started = Some(now);
        slot.starts.push(now);
        slot.run = Some(run);
        slot.attempts += 1;
        step.start.push(Start {
            run,
            turn: turn_id,
            call_id: slot.id.clone(),
            name: tool.spec.name.clone(),
            args: turn.args.get(&index).cloned().unwrap_or(Value::Null),
            attempt: slot.attempts,
            index,
        });
    }

    /// Forgets a run and its deadlines; returns where it belonged.
    fn end_run(&mut self, run: u32) -> Option<Run> {
        let r = self.runs.remove(&run).or_else(|| self.held.remove(&run))?;
        self.deadlines.disarm(r.total_at, Alarm::Total(run));
        if let Some((at, _)) = r.idle {
            self.deadlines.disarm(at, Alarm::Idle(run));
        }
        if let Some(name) = self.turns.get(&r.turn).and_then(|t| t.slots[r.index].tool.as_ref()).map(|t| t.spec.name.clone()) {
            self.release_place(&name);
        }
        Some(r)
    }

    /// A tool's running count, as `maxConcurrency` sees it, goes up by one; its name is copied only the first time.
    fn take_place(&mut self, tool: &str) {
        match self.tool_running.get_mut(tool) {
            Some(n) => *n += 1,
            None => {
                self.tool_running.insert(tool.to_owned(), 1);
            }
        }
    }

    /// A tool's running count, as `maxConcurrency` sees it, goes down by one.
    fn release_place(&mut self, tool: &str) {
        let n = self.tool_running.get_mut(tool).expect("a place was taken");
        debug_assert!(*n > 0, "a place released twice");
        *n = n.saturating_sub(1);
        self.places_freed = true;
    }

    /// A handler settled: normalize and shape, then retry or settle. A run that already timed out or was
    /// cancelled is a late settlement: nothing changes.
    pub fn complete(&mut self, run: u32, mut outcome: Outcome, now: Instant) -> Step {
        if outcome == Outcome::CommandEnded {
            outcome = self.command_outcome(run).unwrap_or(outcome);
        }
        if let Some(step) = self.overdue(run, matches!(outcome, Outcome::Thrown(_)), now) {
            return step;
        }
        match self.begin_shaping(run) {
            Some(shaping) => self.shaped(shaping.run(outcome), now),
            None => Step::default(),
        }
    }

    /// A settlement at `now`, past one of its run's deadlines: the run times out as it would have had the deadline
    /// fired (the host's event loop was blocked, by this handler or another), and the settlement is a late one.
    /// None when the run is within its limits (or already over). `rejected`: the handler threw.
    pub fn overdue(&mut self, run: u32, rejected: bool, now: Instant) -> Option<Step> {
        let r = self.runs.get(&run)?;
        let (alarm, at) = match r.idle {
            Some((idle_at, _)) if idle_at <= now && idle_at < r.total_at => (Alarm::Idle(run), idle_at),
            _ if r.total_at <= now => (Alarm::Total(run), r.total_at),
            _ => return None,
        };
        let mut step = Step::default();
        let tool = self.turns.get(&r.turn).and_then(|t| t.slots[r.index].tool.as_ref()).map(|t| t.spec.name.clone());
        self.time_out(run, alarm, now, &mut step);
        if let Some(tool) = tool {
            self.note_late_settlement(&tool);
        }
        let outcome = if rejected { "rejected" } else { "resolved" };
        let kind = if matches!(alarm, Alarm::Idle(_)) { ErrorKind::IdleTimeout } else { ErrorKind::Timeout };
        step.late.push((run, kind, outcome, millis(now.saturating_duration_since(at))));
        self.drain(now, &mut step);
        Some(step)
    }

    /// The first half of `complete` for a large settlement: the run ends here (its deadlines no longer apply,
    /// the handler has answered) and the work of normalize and shape is handed out, for the host to do on
    /// another thread and return through `shaped`. None for a late settlement.
    pub fn begin_shaping(&mut self, run: u32) -> Option<Shaping> {
        let Run { turn, index, verdict, .. } = self.end_run(run)?;
        let turn_ref = self.turns.get(&turn)?;
        let slot = &turn_ref.slots[index];
        Some(Shaping {
            turn,
            index,
            call_id: slot.id.clone(),
            tool: slot.tool.clone().expect("a run has a tool"),
            verdict,
            shaper: self.shaper.clone(),
            readers: self.registry.get(ARTIFACT_READER).is_some(),
            owner: turn_ref.owner.clone(),
        })
    }

    /// A settlement normalized and shaped: the call retries or settles.
    pub fn shaped(&mut self, shaped: Shaped, now: Instant) -> Step {
        let mut step = Step::default();
        let Shaped { turn: turn_id, index, result, marks } = shaped;
        let Some(turn) = self.turns.get_mut(&turn_id) else { return step };
        let slot = &mut turn.slots[index];
        slot.marks.extend(marks);
        if slot.ended_early {
            // Its turn ended while it was shaped: the answer stands, there is no retry.
            self.settle(turn_id, index, result, now, &mut step);
        } else {
            self.attempt_ended(turn_id, index, result, now, &mut step);
        }
        self.drain(now, &mut step);
        step
    }

    /// Arguments as a trace may show them: secrets redacted, size capped.
    pub fn snapshot(&self, args: &mut Value) {
        self.shaper.redact_value(args);
        *args = shape::cut_value(args, SNAPSHOT_CHARS);
    }

    /// A handler's progress report (JSON) as its listeners may see it: it reaches the user or a client's model, so
    /// it is redacted as outputs are and cut as a trace cuts arguments. None when it is so already.
    pub fn shape_progress(&self, info_json: &str) -> Option<String> {
        let Ok((mut info, _)) = json::from_str_mended::<Value>(info_json) else { return Some("\"(progress nested too deeply to show)\"".into()) };
        let redacted = !self.shaper.redact_value(&mut info).is_empty();
        (redacted || char_count(info_json) > SNAPSHOT_CHARS).then(|| shape::cut_value(&info, SNAPSHOT_CHARS).to_string())
    }

    /// Each value of a JSON array of arguments as a trace shows them (`snapshot`), as a JSON array; a value nested
    /// too deeply to read says so in its place.
    pub fn snapshots(&self, json_array: &str) -> Result<String, String> {
        let items: Vec<&RawValue> = serde_json::from_str(json_array).map_err(|e| format!("snapshots: not a JSON array: {e}"))?;
        let values: Vec<Value> = items
            .into_iter()
            .map(|item| match json::from_str_mended::<Value>(item.get()) {
                Ok((mut args, _)) => {
                    self.snapshot(&mut args);
                    args
                }
                Err(_) => Value::String("(arguments nested too deeply to show)".into()),
            })
            .collect();
        Ok(Value::Array(values).to_string())
    }

    /// Removes artifacts past their TTL; returns how many.
    pub fn sweep_artifacts(&self) -> usize {
        self.shaper.artifacts.sweep()
    }

    /// The time on a clock the host moves (a test's manual clock): artifacts age on it from now on.
    pub fn set_clock(&self, now: SystemTime) {
        self.shaper.artifacts.set_clock(now);
    }

    /// Removes every artifact (closing the executor).
    pub fn remove_artifacts(&self) {
        self.shaper.artifacts.remove_all()
    }

    /// Reads an artifact for a call in `policy`'s context: only one its tenant, user and session may read.
    pub fn read_artifact(&self, path: &str, offset: usize, limit: Option<usize>, policy: &Policy) -> Result<String, String> {
        self.shaper.artifacts.read(path, offset, limit, artifacts::owner(&policy.fields).as_deref())
    }

    pub fn search_artifact(&self, path: &str, pattern: &str, policy: &Policy) -> Result<String, String> {
        self.shaper.artifacts.search(path, pattern, artifacts::owner(&policy.fields).as_deref())
    }

    /// A result carrying an artifact, handed to a call other than the one that saved it: that call's context may
    /// read the artifact too.
    fn hand_over(&self, result: &ToolResult, fields: &Fields) {
        if let Some(path) = &result.metadata.artifact_path {
            self.shaper.artifacts.grant(path, artifacts::owner(fields).as_deref());
        }
    }

    /// The handler of `run` has returned and the host is still handing its value over (a large one crosses in
    /// slices): its time limits no longer apply, and its turn's end no longer stops it. False when the run is
    /// already over.
    pub fn hold(&mut self, run: u32) -> bool {
        let Some(mut r) = self.runs.remove(&run) else { return false };
        self.deadlines.disarm(r.total_at, Alarm::Total(run));
        if let Some((at, _)) = r.idle.take() {
            self.deadlines.disarm(at, Alarm::Idle(run));
        }
        self.held.insert(run, r);
        true
    }

    /// The host's `rollbackWhen` function judged the value `run` returned useless, for `reason`; the judge station
    /// takes it when the settlement comes.
    pub fn judged(&mut self, run: u32, reason: String) {
        if let Some(r) = self.runs.get_mut(&run) {
            r.verdict = Some(reason);
        }
    }

    /// The handler of `run` showed it is alive: its idle deadline starts over. False when the run is over.
    pub fn progress(&mut self, run: u32, now: Instant) -> bool {
        let Some(r) = self.runs.get_mut(&run) else { return false };
        if let Some((at, ms)) = r.idle {
            let next = after(now, Duration::from_millis(ms));
            self.deadlines.disarm(at, Alarm::Idle(run));
            self.deadlines.arm(next, Alarm::Idle(run));
            r.idle = Some((next, ms));
        }
        true
    }

    /// When the host should call `expire` by a timer of its own, in ms from `now` (rounded up: a timer that fires
    /// early finds nothing due), when the earliest deadline is sooner than the one its timer was last told of. The
    /// host's timer fires on its own event loop on time, where a wake from the watcher's thread waits its turn there;
    /// the watcher still wakes the host for whatever the timer misses.
    pub fn host_timer(&mut self, now: Instant) -> Option<f64> {
        let next = self.deadlines.next()?;
        if self.host_timer.is_some_and(|armed| armed <= next) {
            return None;
        }
        // A deadline further away than a Node timer holds gets a timer for as long as one holds, told anew then.
        let wait = next.saturating_duration_since(now).min(HOST_TIMER_MAX);
        self.host_timer = Some(now + wait);
        Some(wait.as_micros().div_ceil(1000) as f64)
    }

    /// The host's own timer fired: whatever it found due, it is gone, and the next deadline is told anew. It may
    /// fire a little before the deadline it was set for (Node's timers run on a loop clock read a moment before
    /// they are set), which `expire` alone would take for a wake-up before the timer.
    pub fn host_timer_fired(&mut self) {
        self.host_timer = None;
    }

    /// Everything whose deadline has passed: runs time out, backoffs end in a new attempt, turns reach their end.
    pub fn expire(&mut self, now: Instant) -> Step {
        // Once the host's timer has fired the next deadline is told anew; one still to fire stands.
        if self.host_timer.is_some_and(|at| at <= now) {
            self.host_timer = None;
        }
        let mut step = Step::default();
        for alarm in self.deadlines.pop_expired(now) {
            match alarm {
                Alarm::Total(run) | Alarm::Idle(run) => self.time_out(run, alarm, now, &mut step),
                Alarm::Retry(turn_id, index) => self.retry_now(turn_id, index, now, &mut step),
                Alarm::RateWait(turn_id, index) => self.token_due(turn_id, index, now, &mut step),
                Alarm::Turn(turn_id) => self.end_turn_early(turn_id, now, &[], &mut step, TurnEnd::Deadline),
                Alarm::Host(ticket) => self.host_timed_out(ticket, now, &mut step),
                Alarm::Store(ticket) => self.store_timed_out(ticket, now, &mut step),
                Alarm::Poll(turn_id, index) => self.poll_due(turn_id, index, now, &mut step),
            }
        }
        self.drain(now, &mut step);
        // A command's end and its lines come with the wake-up its task sends, so they are looked for only here.
        self.command_news(&mut step);
        step
    }

    fn time_out(&mut self, run: u32, alarm: Alarm, now: Instant, step: &mut Step) {
        let Some(r) = self.end_run(run) else { return };
        let Some(turn) = self.turns.get_mut(&r.turn) else { return };
        let slot = &mut turn.slots[r.index];
        let tool = slot.tool.clone().expect("a run has a tool");
        let counters = counters_of(&mut self.counters, &tool.spec.name);
        let result = match (alarm, r.idle) {
            (Alarm::Idle(_), Some((_, idle_ms))) => {
                counters.idle_timeouts += 1;
                invoke::idle_timed_out(slot.id.clone(), &tool, idle_ms)
            }
            _ => {
                counters.timeouts += 1;
                invoke::timed_out(slot.id.clone(), &tool)
            }
        };
        let kind = result.error_kind.expect("a timeout is a failure");
        slot.marks.push(mark("invoke", kind.as_str()));
        step.abort.push((run, kind));
        self.attempt_ended(r.turn, r.index, Box::new(result), now, step);
    }

    /// One attempt failed or succeeded: retry it after a backoff when the retry station allows, else settle.
    fn attempt_ended(&mut self, turn_id: u32, index: usize, result: Box<ToolResult>, now: Instant, step: &mut Step) {
        self.attempt_outcome(turn_id, index, &result, true, now, step);
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        let deadline = turn.deadline;
        let slot = &mut turn.slots[index];
        let tool = slot.tool.clone().expect("an attempted call has a tool");
        if !result.success && retry::eligible(&result, slot.attempts, &tool.retry) {
            let wait = retry::delay(&tool.retry, slot.attempts, result.retry_after_ms);
            let at = after(now, wait);
            let first = slot.first_started.unwrap_or(now);
            let within_budget = at.saturating_duration_since(first) <= Duration::from_millis(tool.retry.max_elapsed_ms);
            let before_deadline = deadline.is_none_or(|(end, _)| at < end);
            if within_budget && before_deadline {
                slot.attempt_errors.push(AttemptError {
                    attempt: slot.attempts,
                    error_kind: result.error_kind.expect("a failure has a kind"),
                    error: result.error.clone().unwrap_or_default(),
                    retry_in_ms: millis(wait),
                });
                slot.marks.push(mark("retry", "scheduled"));
                slot.backoff = Some(Box::new((at, *result)));
                slot.run = None;
                self.renew_lease(turn_id, index, wait, now);
                // The call keeps its place under the tool's maxConcurrency while it waits to retry.
                self.take_place(&tool.spec.name);
                self.deadlines.arm(at, Alarm::Retry(turn_id, index));
                return;
            }
        }
        self.settle(turn_id, index, result, now, step);
    }

    fn retry_now(&mut self, turn_id: u32, index: usize, now: Instant, step: &mut Step) {
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        let slot = &mut turn.slots[index];
        if slot.backoff.take().is_none() || slot.result.is_some() {
            return;
        }
        let name = slot.tool.as_ref().expect("a retried call has a tool").spec.name.clone();
        counters_of(&mut self.counters, &name).retries += 1;
        self.release_place(&name); // taken again by start_run
        // Every attempt reaches the upstream, so every attempt takes a rate-limit token.
        self.run_now(turn_id, index, now, step);
    }

    /// Cancels a turn: running handlers are aborted, calls not started get results saying why. `unstarted` are
    /// runs handed out in a step whose handlers the host had not started yet when the cancellation came.
    pub fn cancel(&mut self, turn_id: u32, reason: &str, unstarted: &[u32], now: Instant) -> Step {
        self.cancel_turns(&[turn_id], reason, unstarted, now)
    }

    /// Cancels every open turn in one step (closing the executor): a flight one of them hands to another is
    /// never started only to be aborted.
    pub fn cancel_all(&mut self, reason: &str, unstarted: &[u32], now: Instant) -> Step {
        let mut turns: Vec<u32> = self.turns.keys().copied().collect();
        turns.sort_unstable();
        self.cancel_turns(&turns, reason, unstarted, now)
    }

    fn cancel_turns(&mut self, turns: &[u32], reason: &str, unstarted: &[u32], now: Instant) -> Step {
        let mut step = Step::default();
        for &turn_id in turns {
            self.end_turn_early(turn_id, now, unstarted, &mut step, TurnEnd::Cancelled(reason));
        }
        self.drain(now, &mut step);
        step
    }

    /// A turn ends before its calls do (cancelled, or its deadline passed): every call still open is answered.
    /// `unstarted`: runs handed out that the host had not started yet (starts still in `step` count too).
    fn end_turn_early(&mut self, turn_id: u32, now: Instant, unstarted: &[u32], step: &mut Step, why: TurnEnd<'_>) {
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        if turn.open == 0 {
            return;
        }
        if let Some((at, _)) = turn.deadline {
            self.deadlines.disarm(at, Alarm::Turn(turn_id));
        }
        let mut unstarted = unstarted.to_vec();
        step.start.retain(|start| {
            let ours = start.turn == turn_id;
            if ours {
                unstarted.push(start.run);
            }
            !ours
        });
        let waiting = turn.schedule.take_waiting();
        let deadline_ms = turn.deadline.map_or(0, |(_, ms)| ms);
        let not_started = format!("the turn's deadline of {deadline_ms} ms passed before it started");
        let mut answers: Vec<(usize, ToolResult)> = Vec::new();
        let mut ended_runs = Vec::new();
        let mut places = Vec::new();
        let mut refunds = Vec::new();
        let mut unstarted_waits = Vec::new();
        for (index, slot) in turn.slots.iter_mut().enumerate() {
            if slot.result.is_some() {
                continue;
            }
            slot.ended_early = true;
            let name = slot.tool.as_ref().expect("an admitted call has a tool").spec.name.clone();
            if let Some(ticket) = slot.pending.take() {
                match self.tickets.remove(&ticket) {
                    Some((_, _, _, at)) => self.deadlines.disarm(at, Alarm::Host(ticket)),
                    None => slot.unanswered.push(ticket),
                }
                // Handed out and holding its place; one not handed out is among the schedule's waiting calls.
                if slot.scheduled {
                    places.push(name);
                    unstarted_waits.push(index);
                }
            } else if let Some((at, reserved)) = slot.rate_wait.take() {
                self.deadlines.disarm(at, Alarm::RateWait(turn_id, index));
                refunds.extend(reserved);
                places.push(name);
                unstarted_waits.push(index);
            } else if slot.joined.is_some() && slot.scheduled {
                // Handed out and waiting for a flight, holding its place; `settle` takes it off the flight.
                places.push(name);
                unstarted_waits.push(index);
            } else if let Some((_, _, at)) = slot.polling.take() {
                // Waiting for an identical call another process runs, holding its place.
                self.deadlines.disarm(at, Alarm::Poll(turn_id, index));
                places.push(name);
                unstarted_waits.push(index);
            } else if let Some(waiting) = slot.backoff.take() {
                let (at, failure) = *waiting;
                // Waiting to retry: the last failure stands, so it is no longer one of the attempts before the last.
                self.deadlines.disarm(at, Alarm::Retry(turn_id, index));
                slot.attempt_errors.pop();
                places.push(name);
                answers.push((index, failure));
            } else if let Some(run) = slot.run.filter(|r| self.runs.contains_key(r)) {
                ended_runs.push((index, run, !unstarted.contains(&run)));
            }
        }
        for name in places {
            self.release_place(&name);
        }
        for (key, bucket) in refunds {
            self.refund(key, bucket);
        }
        for (index, run, was_running) in ended_runs {
            self.end_run(run);
            let turn = self.turns.get_mut(&turn_id).expect("a live turn");
            let slot = &mut turn.slots[index];
            let tool = slot.tool.clone().expect("a run has a tool");
            if !was_running {
                // Handed out but never started by the host: this attempt did not happen.
                slot.attempts -= 1;
                slot.started = None;
                if slot.attempts == 0 {
                    slot.first_started = None;
                }
            }
            let result = match why {
                TurnEnd::Cancelled(reason) => invoke::cancelled(slot.id.clone(), &tool, was_running, reason),
                TurnEnd::Deadline if was_running => invoke::turn_deadline_hit(slot.id.clone(), &tool, deadline_ms),
                TurnEnd::Deadline => invoke::not_executed(slot.id.clone(), &tool.spec.name, &not_started),
            };
            let kind = result.error_kind.expect("an early end is a failure");
            if was_running {
                step.abort.push((run, kind));
            }
            if kind == ErrorKind::Timeout {
                counters_of(&mut self.counters, &tool.spec.name).timeouts += 1;
            }
            slot.marks.push(mark("invoke", kind.as_str()));
            answers.push((index, result));
        }
        let turn = self.turns.get_mut(&turn_id).expect("a live turn");
        for index in waiting.into_iter().chain(unstarted_waits) {
            let slot = &mut turn.slots[index];
            let tool = slot.tool.clone().expect("a scheduled call has a tool");
            let result = match why {
                TurnEnd::Cancelled(reason) => invoke::cancelled(slot.id.clone(), &tool, false, reason),
                TurnEnd::Deadline => invoke::not_executed(slot.id.clone(), &tool.spec.name, &not_started),
            };
            slot.marks.push(mark("invoke", "not_started"));
            answers.push((index, result));
        }
        for (index, result) in answers {
            self.settle(turn_id, index, Box::new(result), now, step);
        }
    }

    /// A call's final result. Its flight (if it ran one) is handed on, its turn is marked to advance.
    fn settle(&mut self, turn_id: u32, index: usize, mut result: Box<ToolResult>, now: Instant, step: &mut Step) {
        // An attempt the breaker let through that ends here never reached its handler (or was stopped with its turn).
        self.attempt_outcome(turn_id, index, &result, false, now, step);
        if self.turns.get(&turn_id).is_some_and(|t| t.slots[index].attempts == 0) {
            self.unspend_budgets(turn_id, index);
        }
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        let slot = &mut turn.slots[index];
        if slot.pending.is_some() || !slot.unanswered.is_empty() {
            let mut asking = std::mem::replace(slot, Slot::new(String::new()));
            self.settled_while_asking(&mut asking, &result);
            self.turns.get_mut(&turn_id).expect("a live turn").slots[index] = asking;
        }
        let slot = &mut self.turns.get_mut(&turn_id).expect("a live turn").slots[index];
        let fills = slot.fills.take();
        // A call that joined a flight and ends without it (its turn ended, a policy skipped it) leaves the flight.
        if let Some((_, id)) = slot.joined.take() {
            if let Some(waiters) = self.flight_waiters.get_mut(&id) {
                waiters.retain(|w| *w != (turn_id, index));
            }
        }
        let tool = slot.tool.clone();
        let mode = tool.as_ref().map_or(Mode::Off, |t| t.dedup.mode);
        // What a handler answered (not a refusal, a timeout or a cancellation) is what others may share or reuse.
        let answered = !slot.ended_early
            && (result.success || (result.error_kind == Some(ErrorKind::HandlerError) && slot.attempts > 0));
        // A flight invalidated while it ran is no longer the one its key names: its result is not kept.
        let current = fills.as_ref().is_some_and(|(key, id)| self.flights.get(key) == Some(id));
        if current {
            self.flights.remove(&fills.as_ref().expect("current").0);
        }
        // A result that came from the store already (a hit, a reused answer) is not kept again; nor, in a store shared
        // with other processes, one whose output was saved to this machine's artifact folder.
        let local_only = self.shared.is_some() && result.metadata.artifact_path.is_some();
        if result.success && !result.cached && !result.metadata.reused && !local_only {
            // Kept before the dedup note is added: the note belongs to this call, not to the query's answer.
            let reuse = slot.dedup.as_ref().filter(|_| mode == Mode::Reuse).map(|d| (d.session.clone(), d.key.clone()));
            let kept = (current || reuse.is_some()).then(|| Kept::of(&result));
            if let (true, Some((key, id)), Some(rule), Some(kept)) = (current, &fills, tool.as_ref().and_then(|t| t.cache.as_ref()), &kept) {
                self.keep_result(key.clone(), kept, rule.ttl, *id, now);
            }
            if let (Some((session, key)), Some(kept)) = (reuse, &kept) {
                self.keep_reused(&session, &key, kept, now);
            }
        }
        let flight = fills.map(|(key, id)| {
            let waiters = self.flight_waiters.remove(&id).unwrap_or_default();
            (key, id, waiters, result.clone())
        });
        let slot = &self.turns.get(&turn_id).expect("a live turn").slots[index];
        if let Some(repeat) = &slot.dedup {
            repeat.annotate(&mut result, mode);
            // Refused a token, skipped, cancelled before it started: the query did not run after all.
            if slot.attempts == 0 && !result.cached && !result.metadata.shared_flight {
                let (session, key) = (repeat.session.clone(), repeat.key.clone());
                self.uncount(session, key);
            }
        }
        if let Some((key, id, waiters, clean)) = flight {
            self.hand_on_flight(key.clone(), id, waiters, &clean, answered, now, step);
            self.release_lease(&key, id);
        }
        if let Some(why) = self.turns.get_mut(&turn_id).and_then(|t| t.slots[index].store_error.take()) {
            self.note_store(&mut result, why);
        }
        self.count_rollback(turn_id, index, &mut result);
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        let sealing = Sealing { note: self.options.repair.note, trace: self.options.trace, begun: turn.begun, begun_epoch_ms: turn.begun_epoch_ms, shaper: &self.shaper };
        let slot = &mut turn.slots[index];
        let ran_ms = slot.first_started.map_or(0.0, |s| millis(now.saturating_duration_since(s)));
        result.attempts = slot.attempts;
        result.metadata.attempt_errors = std::mem::take(&mut slot.attempt_errors);
        if let Some(first) = slot.first_started {
            result.metadata.queued_ms = Some(millis(first.saturating_duration_since(turn.begun)));
        }
        if slot.scheduled {
            turn.schedule.finished();
        }
        sealing.seal(&mut result, slot, ran_ms);
        let stops_turn = turn.stop_on_error && !result.success && slot.tool.as_ref().is_some_and(|t| !t.spec.read_only);
        // Worded only when the turn stops: most results stop nothing.
        let why = stops_turn.then(|| stopped_after(&self.shaper, &slot.id, &result.name));
        tracing::debug!(
            turn = turn_id,
            call = %self.shaper.redact_text(&slot.id),
            tool = %result.name,
            outcome = result.error_kind.map_or("ok", ErrorKind::as_str),
            attempts = result.attempts,
            latency_ms = result.latency_ms,
            stages = ?result.metadata.stages.iter().map(|m| format!("{}:{}", m.station, m.outcome)).collect::<Vec<_>>(),
            "call settled"
        );
        tally(&mut self.metrics, &mut self.unknown_tool_metrics, &result, true);
        slot.result = Some(result);
        turn.args.remove(&index);
        turn.open -= 1;
        if let Some(why) = why {
            for skipped in turn.schedule.take_waiting() {
                let slot = &mut self.turns.get_mut(&turn_id).expect("a live turn").slots[skipped];
                // One waiting on the host is answered now: its request no longer counts.
                if let Some(ticket) = slot.pending.take() {
                    if let Some((_, _, _, at)) = self.tickets.remove(&ticket) {
                        self.deadlines.disarm(at, Alarm::Host(ticket));
                    }
                }
                let name = slot.tool.as_ref().map_or(String::new(), |t| t.spec.name.clone());
                slot.marks.push(mark("invoke", "not_executed"));
                let result = invoke::not_executed(slot.id.clone(), &name, &why);
                self.settle(turn_id, skipped, Box::new(result), now, step);
            }
        }
        let Some(turn) = self.turns.get_mut(&turn_id) else { return };
        if turn.open == 0 {
            if let Some((at, _)) = turn.deadline {
                self.deadlines.disarm(at, Alarm::Turn(turn_id));
            }
        }
        self.dirty.insert(turn_id);
    }

    /// A judged tool's success: a flag counts toward the session's consecutive rollbacks, and past the limit it is
    /// no longer raised; a result not flagged ends the run of flags.
    fn count_rollback(&mut self, turn_id: u32, index: usize, result: &mut ToolResult) {
        let Some(turn) = self.turns.get(&turn_id) else { return };
        let judged = turn.slots[index].tool.as_ref().is_some_and(|t| !t.judge.is_empty());
        if !judged || !result.success {
            return;
        }
        let session = turn.policy.fields.get("sessionId").cloned().unwrap_or_default();
        let count = self.rollbacks.get_or_insert_mut(session.clone(), || 0);
        let flagged = result.rollback.is_some();
        let before = *count;
        if flagged {
            *count += 1;
            if *count > self.options.max_consecutive_rollbacks {
                result.rollback = None;
                result.metadata.rollback_suppressed = true;
            }
        } else {
            *count = 0;
        }
        // Only a change goes to a shared store: most results of a judged tool are not flagged.
        if flagged || before > 0 {
            self.share_rollbacks(&session, flagged);
        }
    }

    /// A flight ended. What its handler answered goes to every identical call waiting for it (one its schedule
    /// has not handed out yet leaves the schedule). A flight that answered nothing others can use (refused,
    /// timed out, ended with its own turn) is taken over by the first waiting call its schedule has handed out;
    /// the others wait on it, or look again when their schedule hands them out.
    #[allow(clippy::too_many_arguments)]
    fn hand_on_flight(&mut self, key: String, id: u32, mut waiters: Vec<(u32, usize)>, result: &ToolResult, answered: bool, now: Instant, step: &mut Step) {
        let handed_out = |engine: &Self, (t, i): (u32, usize)| engine.turns.get(&t).is_some_and(|turn| turn.slots[i].scheduled);
        if answered {
            for (t, i) in waiters {
                let was_handed_out = handed_out(self, (t, i));
                let turn = self.turns.get_mut(&t).expect("a waiter's turn is live");
                if !was_handed_out {
                    turn.schedule.remove(i);
                }
                let slot = &mut turn.slots[i];
                let name = slot.tool.as_ref().expect("a waiter has a tool").spec.name.clone();
                let mut copy = result.clone();
                copy.call_id = slot.id.clone();
                copy.metadata.sent = None; // this call's handler sent nothing
                copy.metadata.shared_flight = true;
                copy.metadata.attempt_errors.clear();
                slot.joined = None;
                slot.marks.push(mark("invoke", "shared"));
                if was_handed_out {
                    self.release_place(&name);
                }
                let turn = self.turns.get(&t).expect("a waiter's turn is live");
                self.hand_over(&copy, &turn.policy.fields);
                self.settle(t, i, Box::new(copy), now, step);
            }
        } else if let Some(pos) = waiters.iter().position(|&w| handed_out(self, w) && self.turns[&w.0].slots[w.1].pending.is_none()) {
            // (One still waiting on its own ticket, its count, goes on waiting: it looks for the flight once answered.)
            let (t, i) = waiters.remove(pos);
            let slot = &mut self.turns.get_mut(&t).expect("a waiter's turn is live").slots[i];
            let name = slot.tool.as_ref().expect("a waiter has a tool").spec.name.clone();
            slot.joined = None;
            slot.fills = Some((key.clone(), id));
            slot.marks.push(mark("cache", "took_over"));
            self.flight_waiters.insert(id, waiters);
            self.flights.entry(key.clone()).or_insert(id);
            if self.shared.is_some() {
                // Another process may hold the lease (or have answered) by now: it asks first, in its place.
                self.look_again(t, i, key, id, now);
            } else {
                self.release_place(&name); // taken again when it starts
                self.run_now(t, i, now, step);
            }
        }
    }

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
            if let Some(phase) = self.breaker_phase(name, now) {
                entry["breaker"] = phase.as_str().into();
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

    /// The prefix of the cache keys of `tool` (only those for the arguments in `args_json`, when given).
    pub fn cache_prefix(&self, tool: &str, args_json: Option<&str>) -> Result<String, String> {
        Ok(match args_json {
            Some(json) => {
                let (args, _) = json::from_str_mended::<Value>(json).map_err(|e| format!("invalidate: args must be JSON: {e}"))?;
                cache::args_prefix(tool, &args)
            }
            None => cache::tool_prefix(tool),
        })
    }

    /// Forgets cached results of `tool` (only those for the arguments in `args_json`, when given); returns how many.
    /// A shared store forgets its own by the same prefix (`cache_prefix`).
    pub fn invalidate(&mut self, tool: &str, args_json: Option<&str>) -> Result<usize, String> {
        let prefix = self.cache_prefix(tool, args_json)?;
        // Flights already running may have read what changed: later calls start afresh, and they keep nothing.
        self.flights.retain(|key, _| !key.starts_with(&prefix));
        Ok(self.store.invalidate_prefix(&prefix))
    }

    pub fn clear_cache(&mut self) {
        self.flights.clear();
        self.store.clear();
    }

    /// The turn's results in input order, as JSON; the turn is forgotten.
    pub fn finish(&mut self, turn_id: u32) -> Result<Vec<String>, String> {
        let results = self.take_boxed(turn_id)?;
        Ok(crate::result::results_to_wire(results, &mut self.stage_table))
    }

    pub fn take_results(&mut self, turn_id: u32) -> Result<Vec<ToolResult>, String> {
        Ok(self.take_boxed(turn_id)?.into_iter().map(|r| *r).collect())
    }

    /// The finished turn's results as its slots hold them: a result is large, and unboxing copies it.
    #[allow(clippy::vec_box)]
    fn take_boxed(&mut self, turn_id: u32) -> Result<Vec<Box<ToolResult>>, String> {
        match self.turns.get(&turn_id) {
            None => return Err(format!("no turn {turn_id}")),
            Some(turn) if turn.open > 0 => return Err(format!("turn {turn_id} still has {} open calls", turn.open)),
            Some(_) => {}
        }
        let turn = self.turns.remove(&turn_id).expect("checked above");
        self.held_back.remove(&turn_id);
        Ok(turn.slots.into_iter().map(|s| s.result.expect("a finished turn has every result")).collect())
    }

    /// How many handlers are running across all turns.
    pub fn running(&self) -> usize {
        self.runs.len()
    }
}

/// Approvals given "for this session" kept at most, across sessions (the least recently used go first).
const REMEMBERED_APPROVALS: usize = 10_000;
/// The name of the tool that reads artifacts back: when registered, a spilled output says to use it.
const ARTIFACT_READER: &str = "read_artifact";
/// How much of a call's arguments a trace shows.
const SNAPSHOT_CHARS: usize = 2_000;

/// A handler's settlement on its way through normalize and shape (stations 11 and 12), which may be done on
/// another thread: it holds everything it needs.
pub struct Shaping {
    turn: u32,
    index: usize,
    call_id: String,
    tool: Arc<Tool>,
    /// The host's judgement of the value (a `rollbackWhen` function), when it made one.
    verdict: Option<String>,
    shaper: Arc<Shaper>,
    readers: bool,
    owner: Option<Arc<str>>,
}

/// A settlement shaped, for `Engine::shaped`.
pub struct Shaped {
    turn: u32,
    index: usize,
    result: Box<ToolResult>,
    marks: Vec<StationMark>,
}

impl Shaping {
    /// Stations 11–13 on what the handler returned: a bug there costs this call alone, which then says so.
    pub fn run(self, outcome: Outcome) -> Shaped {
        self.read_and_shape(|| Ok(outcome))
    }

    /// `run` on a value that crossed as bytes, in slices: joined and read here, on the thread that shapes it, since
    /// copying and checking megabytes of UTF-8 must not hold the host's thread. A kind the engine does not know is
    /// a bug, answered as one in this call's result.
    pub fn run_bytes(self, kind: &str, slices: Vec<Vec<u8>>) -> Shaped {
        self.read_and_shape(|| Outcome::from_slices(kind, slices))
    }

    fn read_and_shape(self, read: impl FnOnce() -> Result<Outcome, String>) -> Shaped {
        let _span = tracing::debug_span!("toolgate.shape", turn = self.turn, call = %self.shaper.redact_text(&self.call_id)).entered();
        let (turn, index, call_id, tool) = (self.turn, self.index, self.call_id.clone(), self.tool.clone());
        let shaped = contained(|| read().map(|outcome| self.shape(outcome))).and_then(|read| read);
        shaped.unwrap_or_else(|bug| {
            let error = panic::internal_error("reading what the tool returned (it ran; its result is lost)", &bug);
            let result = Box::new(ToolResult::failure(call_id, tool.spec.name.clone(), ErrorKind::HandlerError, error, false));
            Shaped { turn, index, result, marks: vec![mark("invoke", "returned"), mark("normalize", "internal_error")] }
        })
    }

    fn shape(self, mut outcome: Outcome) -> Shaped {
        #[cfg(test)]
        if matches!(&outcome, Outcome::Text(text) if text == tests::PANICS) {
            panic!("a bug on purpose");
        }
        let name = self.tool.spec.name.clone();
        let bytes = match &mut outcome {
            Outcome::Binary(bytes) => Some(std::mem::take(bytes)),
            _ => None,
        };
        // Kept only when short enough that no cut can change it: the copy is cheap, a crossing back is not. Texts
        // of SENT_MAX_BYTES or more crossed in slices, and the host keeps no copy of those.
        let sent = match &outcome {
            Outcome::Text(text) | Outcome::Json(text) if text.len() <= self.tool.max_output_chars && text.len() < SENT_MAX_BYTES => Some(text.clone()),
            _ => None,
        };
        let redact = |text: &str| self.shaper.redact_text(text);
        // What an output schema describes: a returned value, text or nothing; not bytes, images or JSON too deep to
        // hold as a structure.
        let checked = match &outcome {
            Outcome::Json(_) => Some(None),
            Outcome::Text(text) => Some(Some(Value::String(text.clone()))),
            Outcome::Nothing => Some(Some(Value::Null)),
            _ => None,
        };
        // Boxed once here: the result passes through several stations by value before its slot holds it.
        let mut result = Box::new(match &bytes {
            Some(bytes) => normalize::binary(self.call_id.clone(), name, bytes),
            None => normalize(self.call_id.clone(), name, outcome),
        });
        // A return value that breaks the tool's outputSchema is the tool's fault: a handler error, never retried.
        let value = match checked.filter(|_| result.success && self.tool.output_validator.is_some()) {
            Some(None) => result.metadata.structured.clone().filter(|_| result.metadata.images.is_empty()),
            Some(value) => value,
            None => None,
        };
        if let Some(value) = value {
            if let Err(error) = validate::output(&*self.tool, &value, &redact) {
                *result = ToolResult::failure(self.call_id.clone(), self.tool.spec.name.clone(), ErrorKind::HandlerError, error, false);
            }
        }
        let (invoked, normalized) = match (result.success, result.metadata.structured.is_some()) {
            (false, _) => ("failed", "error"),
            (true, true) => ("returned", "structured"),
            (true, false) => ("returned", "text"),
        };
        let call = shape::Call {
            tool_name: &self.tool.spec.name,
            call_id: &self.call_id,
            max_output_chars: self.tool.max_output_chars,
            readers: self.readers,
            owner: self.owner.as_deref(),
            untrusted: self.tool.spec.untrusted,
        };
        // Judged on the whole output, before shape cuts it (a prefix or an empty list may not survive the cut).
        let reason = (!self.tool.judge.is_empty() && result.success).then(|| self.verdict.or_else(|| judge::judge(&self.tool.judge, &result)));
        let shaped = self.shaper.shape(&mut result, &call, bytes.as_deref());
        let mut marks = vec![mark("invoke", invoked), mark("normalize", normalized), mark("shape", shaped)];
        if let Some(reason) = reason {
            marks.push(mark("judge", if reason.is_some() { "rollback" } else { "ok" }));
            result.rollback = reason.map(|reason| Rollback { reason: self.shaper.redact_text(&reason) });
        }
        if self.tool.spec.untrusted && result.success {
            result.output = fence::fence(&self.tool.spec.name, &result.output);
        }
        result.metadata.sent = sent;
        Shaped { turn: self.turn, index: self.index, result, marks }
    }
}

/// What a cache miss does about identical calls: run the flight, or wait on one already running.
enum FlightRole {
    Leads(String, u32),
    Joined(String, u32),
}

impl FlightRole {
    fn assign(self, slot: &mut Slot) {
        match self {
            FlightRole::Leads(key, id) => {
                slot.marks.push(mark("cache", "miss"));
                slot.fills = Some((key, id));
            }
            FlightRole::Joined(key, id) => {
                slot.marks.push(mark("cache", "joined"));
                slot.joined = Some((key, id));
            }
        }
    }
}

#[derive(Clone, Copy)]
enum TurnEnd<'a> {
    Cancelled(&'a str),
    Deadline,
}

/// Why arguments edited at approval cannot run: the schema, the tool's checks or a deny rule refuses them.
fn edited_problem(tool: &Tool, edited: &Value, issues: Option<&[(String, String)]>, policy: &Policy, shaper: &Shaper) -> Option<(ErrorKind, String)> {
    let redact = |text: &str| shaper.redact_text(text);
    if let Err(error) = validate::validate(tool, edited, &redact) {
        return Some((ErrorKind::InvalidArguments, error));
    }
    if let Some(issues) = issues {
        return Some((ErrorKind::InvalidArguments, validate::issues(&tool.spec.name, issues, &redact)));
    }
    if let Err(problem) = checks::run(&tool.checks, edited) {
        return Some((ErrorKind::InvalidArguments, format!("Tool \"{}\": {problem}.", tool.spec.name)));
    }
    match policy.decide(tool, edited, |_| true) {
        Decision::Deny { kind, error, .. } => Some((kind, error)),
        _ => None,
    }
}

/// How an approval given "for this session" is remembered.
/// A tool's counters; its name is copied only the first time.
fn counters_of<'a>(counters: &'a mut BTreeMap<String, ToolCounters>, tool: &str) -> &'a mut ToolCounters {
    if !counters.contains_key(tool) {
        counters.insert(tool.to_owned(), ToolCounters::default());
    }
    counters.get_mut(tool).expect("inserted above")
}

fn remembered_key(session: &str, tool: &str, asked_by: &str) -> String {
    format!("{session}{sep}{tool}{sep}{asked_by}", sep = keys::SEP)
}

/// Where a session keeps a query's last result for `reuse`: apart from the cache, in the session's own keys.
fn reuse_key(session: &str, query_key: &str) -> String {
    format!("\u{2}{session}{}{query_key}", keys::SEP)
}

/// A call id is the model's own text: redacted and cut short where an error quotes it.
fn stopped_after(shaper: &Shaper, call_id: &str, tool_name: &str) -> String {
    let call_id = clip(&shaper.redact_text(call_id), QUOTED_CHARS).into_owned();
    format!("call {call_id} (\"{tool_name}\") before it failed, and this turn stops at the first failed call that changes state")
}

/// A call's result is in: it counts toward its tool's metrics, or the total's only for a name that is no tool.
/// (Fields, not `&mut Engine`: it is called while a turn of the engine is borrowed.)
fn tally(metrics: &mut BTreeMap<String, CallMetrics>, unknown: &mut CallMetrics, result: &ToolResult, known: bool) {
    if !known {
        return unknown.record(result);
    }
    match metrics.get_mut(&result.name) {
        Some(m) => m.record(result),
        None => metrics.entry(result.name.clone()).or_default().record(result),
    }
}

/// One entry of `counters()`: the counters and the call metrics side by side.
fn tool_stats(counters: &ToolCounters, calls: &CallMetrics, in_flight: usize) -> Value {
    let mut entry = serde_json::to_value(counters).expect("counters serialize");
    let calls = serde_json::to_value(calls).expect("metrics serialize");
    if let (Value::Object(entry), Value::Object(calls)) = (&mut entry, calls) {
        entry.extend(calls);
        entry.insert("inFlight".into(), in_flight.into());
    }
    entry
}

/// What every result of a turn is sealed with.
struct Sealing<'a> {
    note: bool,
    trace: bool,
    begun: Instant,
    begun_epoch_ms: f64,
    shaper: &'a Shaper,
}

impl Sealing<'_> {
    /// Final touches every result gets: its trace marks (with their times when tracing), timing, the permission
    /// decision, and what the repair station changed (by default also said in one line the model reads, so that
    /// it can learn within the session). A failure's text is then held to what any error text is held to.
    fn seal(&self, result: &mut ToolResult, slot: &mut Slot, ran_ms: f64) {
        self.touch(result, slot, ran_ms);
        if !result.success {
            self.shaper.shape_failure(result);
        }
    }

    fn touch(&self, result: &mut ToolResult, slot: &mut Slot, ran_ms: f64) {
        result.latency_ms = ran_ms;
        result.metadata.started_at = self.begun_epoch_ms;
        if self.trace {
            let since = |at: &Instant| millis(at.saturating_duration_since(self.begun));
            result.metadata.timings = Some(slot.marks.iter().map(|m| since(&m.at)).collect());
            result.metadata.starts = Some(slot.starts.iter().map(since).collect());
        }
        result.metadata.stages = std::mem::take(&mut slot.marks);
        if let Some((decision, by)) = slot.permission.take() {
            result.metadata.permission = Some(PermissionNote { decision, by });
        }
        let repairs = std::mem::take(&mut slot.repairs);
        if repairs.is_empty() {
            return;
        }
        if self.note {
            let line = repair::note(&repairs);
            match (result.error.as_mut(), result.error_kind) {
                (Some(error), Some(kind)) => {
                    error.push_str(&line);
                    result.output = failure_output(kind, error);
                }
                _ => result.output.push_str(&line),
            }
        }
        result.metadata.repairs = repairs;
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.deadlines.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call to a tool of this name, or a handler returning this text, makes the engine panic (tests only).
    pub(super) const PANICS: &str = "__panics_on_purpose__";

    #[test]
    fn a_panic_on_one_call_answers_that_call_and_spares_the_rest() {
        let mut engine = Engine::new(EngineOptions::default()).unwrap();
        let spec = |name: &str| ToolSpec::from_json(&format!(r#"{{"name":"{name}","readOnly":true}}"#)).unwrap();
        engine.register(spec("echo")).unwrap();
        let calls = format!(r#"[{{"id":"a","name":"{PANICS}"}},{{"id":"b","name":"echo"}},{{"id":"c","name":"echo"}}]"#);
        let now = Instant::now();
        let step = engine.begin(&calls, &Policy::default(), &TurnOptions::default(), None, now).unwrap();
        let turn = step.turn.unwrap();
        assert_eq!(step.start.len(), 2, "the other calls run");
        engine.complete(step.start[0].run, Outcome::Text(PANICS.into()), now);
        let step = engine.complete(step.start[1].run, Outcome::Text("fine".into()), now);
        assert_eq!(step.done, vec![turn]);
        let results = engine.take_results(turn).unwrap();
        let kinds: Vec<_> = results.iter().map(|r| r.error_kind).collect();
        assert_eq!(kinds, [Some(ErrorKind::HandlerError), Some(ErrorKind::HandlerError), None]);
        assert_eq!(results[0].call_id, "a");
        let checking = results[0].error.as_deref().unwrap();
        assert!(checking.contains("checking this call, so it was not run") && checking.contains("a bug on purpose"), "{checking}");
        assert!(results[1].error.as_deref().unwrap().contains("it ran; its result is lost"));
        assert_eq!(results[2].output, "fine");
    }

    #[test]
    fn a_value_in_slices_is_joined_and_read_where_it_is_shaped_and_a_kind_unknown_is_a_bug() {
        let mut engine = Engine::new(EngineOptions::default()).unwrap();
        engine.register(ToolSpec::from_json(r#"{"name":"echo","readOnly":true}"#).unwrap()).unwrap();
        let now = Instant::now();
        let step = engine.begin(r#"[{"id":"a","name":"echo"},{"id":"b","name":"echo"}]"#, &Policy::default(), &TurnOptions::default(), None, now).unwrap();
        let turn = step.turn.unwrap();
        // "é" and "😀" cut across slices: only the joined bytes are UTF-8.
        let text = "caf\u{e9} \u{1f600}".as_bytes();
        let slices = vec![text[..4].to_vec(), text[4..8].to_vec(), text[8..].to_vec()];
        let shaped = engine.begin_shaping(step.start[0].run).unwrap().run_bytes("text", slices);
        engine.shaped(shaped, now);
        let shaped = engine.begin_shaping(step.start[1].run).unwrap().run_bytes("no such kind", vec![b"x".to_vec()]);
        assert_eq!(engine.shaped(shaped, now).done, vec![turn]);
        let results = engine.take_results(turn).unwrap();
        assert_eq!(results[0].output, "caf\u{e9} \u{1f600}");
        let error = results[1].error.as_deref().unwrap();
        assert!(error.contains("This is a bug in toolgate") && error.contains("unknown outcome kind"), "{error}");
    }
}
