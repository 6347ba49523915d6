//! One executor: the registry, the turns in flight and their deadlines. The host drives it through plain
//! synchronous calls (`begin`, `complete`, `progress`, `expire`, `cancel`, `finish`); each answers with a `Step`
//! that says which handlers to start, which to abort and which turns are done. Stations are called here in
//! pipeline order.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustc_hash::FxHashMap;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::bounded::Bounded;
use crate::artifacts;
use crate::breaker::Phase;
use crate::cache::{self};
use crate::calls::{read_calls, IncomingCall};
use crate::normalize::Outcome;
use crate::options::{EngineOptions, ToolSpec, TurnOptions};
use crate::permission::{Permissions, Policy};
use crate::ratelimit::RateLimit;
use crate::definitions::{self, DefinitionFormat};
use crate::registry::Registry;
use crate::result::{ErrorKind, StageTable, StationMark, ToolResult};
use crate::scheduler::Schedule;
use crate::shape::Shaper;
use crate::store::{MemoryLimits, MemoryStore, Store};
use crate::text::char_count;
use crate::timer::{after, Deadlines};
use crate::metrics::CallMetrics;
use crate::{json, shape};

mod admission;
mod asking;
mod call;
mod cancellation;
mod commands;
mod counters;
mod flights;
mod guards;
mod running;
mod settlement;
mod tickets;
mod wire;
pub use counters::ToolCounters;
pub use settlement::{Shaped, Shaping};
pub use wire::{Abort, HostAnswer, HostKind, HostRequest, Late, LiveMark, Settled, Start, Step};
use call::{At, Run, Slot, Turn, Turns};
use cancellation::TurnEnd;
use counters::tally;
use settlement::Sealing;
use tickets::Shared;

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

pub struct Engine {
    options: EngineOptions,
    registry: Registry,
    turns: Turns,
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
    flight_waiters: FxHashMap<u32, Vec<At>>,
    next_flight: u32,
    rate_limit: Option<RateLimit>,
    shaper: Arc<Shaper>,
    /// Where retry backoffs draw their jitter.
    jitter: fastrand::Rng,
    /// The host watches turns live: each step says which stations calls met (`Step::marks`).
    watch: Watch,
    /// Consecutive rollback flags per session (`sessionId`; "" without one).
    rollbacks: Bounded<String, u32>,
    /// The executor's permission rules and mode, under every context's.
    permissions: Arc<Permissions>,
    /// Requests the host has not answered: ticket → (call, kind, answer deadline).
    tickets: FxHashMap<u32, (At, HostKind, Instant)>,
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
    /// Each breaker's phase as the store last said, and until when it is open.
    breaker_views: FxHashMap<String, (Phase, Instant)>,
    /// The processes of command tools, and background jobs.
    commands: Arc<crate::command::Hub>,
    next_turn: u32,
    next_run: u32,
    /// The deadline the host's own timer was last told to fire at (see `host_timer`).
    host_timer: Option<Instant>,
    /// A buffer budget keys are written into, then shared (one allocation a key).
    key: String,
    /// What stands in a slot's place while it is lifted out of its turn (see `lift`).
    stand_in: Option<Box<call::Slot>>,
}

/// While the host watches turns live, the calls that met a station since it was last told, to tell it of.
#[derive(Default)]
struct Watch {
    on: bool,
    met: Vec<At>,
}

impl Watch {
    /// The call at `at` met a station (or may have): the step reports what it met. A call found through
    /// `slot_mut`, `place` or `put_back` is noted there; a room that reaches a slot otherwise and leaves the call open
    /// notes it itself. A call sealed is reported as it is sealed.
    fn met(&mut self, at: At) {
        if self.on {
            self.met.push(at);
        }
    }
}

pub(super) fn mark(station: &'static str, outcome: &'static str) -> StationMark {
    StationMark { station, outcome, at: Instant::now() }
}

/// The marks a call met since the host was last told, as live marks: times from when its turn began (a streaming
/// turn's call: from when it came).
fn report_marks(turn: u32, index: usize, slot: &mut Slot, begun: Instant, step: &mut Step) {
    let from = slot.arrived.unwrap_or(begun);
    for m in slot.marks.iter().skip(slot.reported) {
        step.marks.push(LiveMark { turn, index: index as u32, mark: format!("{}:{}", m.station, m.outcome), ms: millis(m.at.saturating_duration_since(from)) });
    }
    slot.reported = slot.marks.len();
}

/// A call sealed, as a live mark: `sealed:ok`, `sealed:cached` or `sealed:<error kind>`.
fn report_sealed(turn: u32, index: usize, slot: &Slot, begun: Instant, result: &ToolResult, step: &mut Step) {
    let outcome = match result.error_kind {
        Some(kind) => kind.as_str(),
        None if result.cached => "cached",
        None => "ok",
    };
    let ms = millis(Instant::now().saturating_duration_since(slot.arrived.unwrap_or(begun)));
    step.marks.push(LiveMark { turn, index: index as u32, mark: format!("sealed:{outcome}"), ms });
}

/// The longest wait a host timer takes (Node's: 2^31 - 1 ms; longer fires after 1 ms).
pub(super) const HOST_TIMER_MAX: Duration = Duration::from_millis((1 << 31) - 1);

/// Milliseconds to the microsecond: finer is noise, and a short decimal is parsed several times faster by V8 than
/// the 17 digits of an arbitrary double.
pub(super) fn millis(d: Duration) -> f64 {
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
            jitter: fastrand::Rng::new(),
            watch: Watch::default(),
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
            commands: Arc::default(),
            options,
            registry: Registry::default(),
            turns: Turns::default(),
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
            key: String::new(),
            stand_in: None,
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
        Ok(self.open_turn(calls, policy, options, cancelled, false, now))
    }

    /// Opens a streaming turn: it takes calls as they come (`add`) until it is ended (`end`, a cancel or its
    /// deadline), schedules each as it arrives by the rules of a turn handed over whole, and reports each result
    /// as it is sealed (`Step::settled`). Its deadline counts from now.
    pub fn begin_streaming(&mut self, policy: &Policy, options: &TurnOptions, cancelled: Option<&str>, now: Instant) -> Step {
        self.open_turn(Vec::new(), policy, options, cancelled, true, now)
    }

    fn open_turn(&mut self, calls: Vec<IncomingCall>, policy: &Policy, options: &TurnOptions, cancelled: Option<&str>, streaming: bool, now: Instant) -> Step {
        let policy = self.under(policy);
        let turn_id = self.next_turn;
        let _span = tracing::debug_span!("toolgate.begin", turn = turn_id, calls = calls.len()).entered();
        self.next_turn = self.next_turn.wrapping_add(1).max(1);
        // Whole milliseconds, as Date.now() gives them.
        let begun_epoch_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_millis() as f64);
        let deadline = options.deadline_ms.map(|ms| (after(now, Duration::from_millis(ms)), ms));
        let turn = Turn {
            slots: Vec::with_capacity(calls.len()),
            args: FxHashMap::default(),
            schedule: Schedule::new([], self.options.concurrency),
            open: 0,
            begun: now,
            begun_epoch_ms,
            deadline,
            stop_on_error: options.stop_on_error,
            stopped_by: None,
            halted: None,
            streaming,
            accepting: streaming,
            owner: artifacts::owner(&policy.fields).map(Arc::from),
            policy,
            done_reported: false,
            calls_run: FxHashMap::default(),
        };
        self.turns.insert(turn_id, turn);
        let mut step = Step::default();
        self.admit_into(turn_id, calls, now, &mut step);
        let open = self.turns.live(turn_id).open;
        if let Some((end, _)) = deadline.filter(|_| open > 0 || streaming) {
            self.deadlines.arm(end, Alarm::Turn(turn_id));
        }
        if let Some(reason) = cancelled {
            step.absorb(self.cancel(turn_id, reason, &[], now));
        }
        step.turn = Some(turn_id);
        self.dirty.insert(turn_id);
        self.drain(now, &mut step);
        step
    }

    /// More calls for a streaming turn that still takes them: each is admitted, answered or scheduled after the
    /// calls before it, as if it had come with them.
    pub fn add(&mut self, turn_id: u32, calls_json: &str, now: Instant) -> Result<Step, String> {
        match self.turns.get(&turn_id) {
            Some(turn) if turn.accepting => {}
            Some(_) => return Err(format!("turn {turn_id} takes no more calls: it has ended")),
            None => return Err(format!("no turn {turn_id}")),
        }
        let calls = read_calls(calls_json)?;
        let mut step = Step::default();
        self.admit_into(turn_id, calls, now, &mut step);
        self.dirty.insert(turn_id);
        self.drain(now, &mut step);
        Ok(step)
    }

    /// A streaming turn takes no more calls: it is done when the calls it has are. Ending it again changes nothing.
    pub fn end(&mut self, turn_id: u32, now: Instant) -> Step {
        let mut step = Step::default();
        if self.stop_accepting(turn_id, &mut step) {
            self.dirty.insert(turn_id);
            self.drain(now, &mut step);
        }
        step
    }

    /// Ends a streaming turn's taking of calls, which the step tells the host; true when it was taking them. With
    /// no call open, its deadline has nothing left to end.
    fn stop_accepting(&mut self, turn_id: u32, step: &mut Step) -> bool {
        let Some(turn) = self.turns.get_mut(&turn_id).filter(|t| t.accepting) else { return false };
        turn.accepting = false;
        step.ended.push(turn_id);
        if let (0, Some((end, _))) = (turn.open, turn.deadline) {
            self.deadlines.disarm(end, Alarm::Turn(turn_id));
        }
        true
    }

    /// Calls admitted into an open turn after those it has: each that cannot run is answered and sealed now, the
    /// others join its schedule.
    fn admit_into(&mut self, turn_id: u32, calls: Vec<IncomingCall>, now: Instant, step: &mut Step) {
        let first = self.turns.live(turn_id).slots.len();
        let runnable = self.admit_calls(turn_id, first, calls, now, step);
        let turn = self.turns.live_mut(turn_id);
        if turn.streaming {
            for slot in &mut turn.slots[first..] {
                slot.arrived = Some(now);
            }
        }
        turn.open += runnable.len();
        turn.schedule.extend(runnable.iter().copied());
        let (observed, begun) = (self.watch.on, turn.begun);
        let sealing = Sealing { note: self.options.repair.note, trace: self.options.trace, begun: turn.begun, begun_epoch_ms: turn.begun_epoch_ms, shaper: &self.shaper };
        for (index, slot) in turn.slots.iter_mut().enumerate().skip(first) {
            if let Some(mut result) = slot.result.take() {
                // A cache hit answered here says it repeats a query, as one answered later does in `settle`.
                if let (Some(repeat), Some(tool), true) = (&slot.dedup, &slot.tool, result.cached) {
                    repeat.annotate(&mut result, tool.dedup.mode);
                }
                if observed {
                    report_marks(turn_id, index, slot, begun, step);
                }
                sealing.seal(&mut result, slot, 0.0);
                if observed {
                    report_sealed(turn_id, index, slot, begun, &result, step);
                }
                tracing::debug!(turn = turn_id, call = %self.shaper.redact_text(&slot.id), tool = %result.name, outcome = result.error_kind.map_or("ok", ErrorKind::as_str), "call answered without running");
                tally(&mut self.metrics, &mut self.unknown_tool_metrics, &result, slot.tool.is_some());
                slot.result = Some(result);
                if turn.streaming {
                    step.settled.push(Settled { turn: turn_id, index: index as u32 });
                }
            }
        }
        // Answered after those refused at admission, as when the turn's stop swept its waiting calls.
        if let Some(why) = turn.halted.clone() {
            for (index, _) in runnable {
                if self.turns.live_mut(turn_id).schedule.remove(index) {
                    self.skip(At { turn: turn_id, index }, &why, now, step);
                }
            }
        }
    }

    /// The host answered a request (a check or an approval). An answer that comes too late, or for a call whose
    /// turn ended, changes nothing.
    pub fn answer(&mut self, ticket: u32, answer: HostAnswer, now: Instant) -> Step {
        let mut step = Step::default();
        if let Some((at, kind, due)) = self.tickets.remove(&ticket) {
            self.deadlines.disarm(due, Alarm::Host(ticket));
            self.resolve(at, ticket, kind, answer, now, &mut step);
        }
        self.drain(now, &mut step);
        step
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
        // Only the calls reached since the last step: the open ones may be thousands.
        for at in self.watch.met.drain(..) {
            if let Some(turn) = self.turns.get_mut(&at.turn) {
                let begun = turn.begun;
                if let Some(slot) = turn.slots.get_mut(at.index) {
                    report_marks(at.turn, at.index, slot, begun, step);
                }
            }
        }
        // Requests for calls answered meanwhile (their turn was cancelled, say) are not sent.
        let tickets = &self.tickets;
        step.host.extend(self.outbox.drain(..).filter(|r| tickets.contains_key(&r.ticket)));
        self.flush_store(now, step);
        self.stop_abandoned_commands(step);
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
        let tool = self.open_slot(r.at).and_then(|slot| slot.tool.as_ref()).map(|t| t.spec.name.clone());
        self.time_out(run, alarm, now, &mut step);
        if let Some(tool) = tool {
            self.note_late_settlement(&tool);
        }
        let outcome = if rejected { "rejected" } else { "resolved" };
        let kind = if matches!(alarm, Alarm::Idle(_)) { ErrorKind::IdleTimeout } else { ErrorKind::Timeout };
        step.late.push(Late { run, ended_by: kind, outcome, after_ms: millis(now.saturating_duration_since(at)) });
        self.drain(now, &mut step);
        Some(step)
    }

    /// The first half of `complete` for a large settlement: the run ends here (its deadlines no longer apply,
    /// the handler has answered) and the work of normalize and shape is handed out, for the host to do on
    /// another thread and return through `shaped`. None for a late settlement.
    pub fn begin_shaping(&mut self, run: u32) -> Option<Shaping> {
        let Run { at, verdict, .. } = self.end_run(run)?;
        let turn_ref = self.turns.get(&at.turn)?;
        let slot = &turn_ref.slots[at.index];
        Some(Shaping {
            at,
            call_id: slot.id.clone(),
            tool: slot.tool().clone(),
            verdict,
            shaper: self.shaper.clone(),
            readers: self.registry.get(ARTIFACT_READER).is_some(),
            owner: turn_ref.owner.clone(),
        })
    }

    /// A settlement normalized and shaped: the call retries or settles.
    pub fn shaped(&mut self, shaped: Shaped, now: Instant) -> Step {
        let mut step = Step::default();
        let Shaped { at, result, marks } = shaped;
        let Some(turn) = self.turns.get_mut(&at.turn) else { return step };
        let slot = &mut turn.slots[at.index];
        slot.marks.extend(marks);
        if slot.ended_early {
            // Its turn ended while it was shaped: the answer stands, there is no retry.
            self.settle(at, result, now, &mut step);
        } else {
            self.attempt_ended(at, result, now, &mut step);
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

    /// A JSON value with every secret the executor's rules find redacted, whole (a recorded turn): nothing is cut,
    /// since a replay needs all of it. With `json_texts` (calls, whose arguments may come as JSON text), a string that
    /// holds a JSON object or array is redacted as the value it holds. A value nested too deeply to read is refused.
    pub fn redacted(&self, json: &str, json_texts: bool) -> Result<String, String> {
        let (mut value, _) = json::from_str_mended::<Value>(json).map_err(|e| format!("redacted: not JSON that can be read: {e}"))?;
        if json_texts {
            self.redact_json_texts(&mut value);
        }
        self.shaper.redact_value(&mut value);
        Ok(value.to_string())
    }

    /// Strings that hold a JSON object or array (a call's arguments as JSON text) redacted as the values they hold:
    /// a secret-named key inside them goes whole, as in arguments already parsed.
    fn redact_json_texts(&self, value: &mut Value) {
        let mut stack = vec![value];
        while let Some(value) = stack.pop() {
            match value {
                Value::String(text) if text.trim_start().starts_with(['{', '[']) => {
                    if let Ok((mut inner, _)) = json::from_str_mended::<Value>(text) {
                        if !self.shaper.redact_value(&mut inner).is_empty() {
                            *text = inner.to_string();
                        }
                    }
                }
                Value::Array(items) => stack.extend(items.iter_mut()),
                Value::Object(map) => stack.extend(map.values_mut()),
                _ => {}
            }
        }
    }

    /// Removes artifacts past their TTL; returns how many.
    pub fn sweep_artifacts(&self) -> usize {
        self.shaper.artifacts.sweep()
    }

    /// The time on a clock the host moves (a test's manual clock): artifacts age on it from now on.
    pub fn set_clock(&self, now: SystemTime) {
        self.shaper.artifacts.set_clock(now);
    }

    /// Whether each step reports the stations calls met since the last (`Step::marks`), for a host that watches turns
    /// live. Off, nothing of it is done.
    pub fn observe(&mut self, on: bool) {
        if on && !self.watch.on {
            // What calls met before is not news: only what they meet from now on is reported.
            for turn in self.turns.values_mut() {
                for slot in &mut turn.slots {
                    slot.reported = slot.marks.len();
                }
            }
        }
        self.watch.on = on;
        self.watch.met.clear();
    }

    /// Backoff jitter drawn from a fixed seed: on a clock a test moves, the same turn waits the same every run, and a
    /// replayed recording gives the same results every time.
    pub fn fix_jitter(&mut self, seed: u64) {
        self.jitter = fastrand::Rng::with_seed(seed);
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
                Alarm::Retry(turn, index) => self.retry_now(At { turn, index }, now, &mut step),
                Alarm::RateWait(turn, index) => self.token_due(At { turn, index }, now, &mut step),
                Alarm::Turn(turn_id) => self.end_turn_early(turn_id, now, &[], &mut step, TurnEnd::Deadline),
                Alarm::Host(ticket) => self.host_timed_out(ticket, now, &mut step),
                Alarm::Store(ticket) => self.store_timed_out(ticket, now, &mut step),
                Alarm::Poll(turn, index) => self.poll_due(At { turn, index }, now, &mut step),
            }
        }
        self.drain(now, &mut step);
        // A command's end and its lines come with the wake-up its task sends, so they are looked for only here.
        self.command_news(&mut step);
        step
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

    /// The sealed results of a streaming turn's calls at `indices`, in that order and in the wire form of
    /// `finish`, taken out of the turn: `finish` gives only those not taken.
    pub fn take_settled(&mut self, turn_id: u32, indices: &[u32]) -> Result<Vec<String>, String> {
        let turn = self.turns.get_mut(&turn_id).ok_or_else(|| format!("no turn {turn_id}"))?;
        let mut results = Vec::with_capacity(indices.len());
        for &index in indices {
            let slot = turn.slots.get_mut(index as usize).ok_or_else(|| format!("turn {turn_id} has no call {index}"))?;
            results.push(slot.result.take().ok_or_else(|| format!("call {index} of turn {turn_id} has no result to take"))?);
            slot.taken = true;
        }
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
        // A streaming turn's results taken as they settled are the host's already.
        let streaming = turn.streaming;
        Ok(turn.slots.into_iter().filter_map(|s| if streaming { s.result } else { Some(s.result.expect("a finished turn has every result")) }).collect())
    }

    /// The longest `killGraceMs` of the registered command tools, 0 without any.
    pub fn longest_kill_grace_ms(&self) -> u64 {
        self.registry.iter().filter_map(|t| t.spec.command.as_ref()).map(|c| c.kill_grace_ms).max().unwrap_or(0)
    }

    /// How many handlers are running across all turns.
    pub fn running(&self) -> usize {
        self.runs.len()
    }
}

/// Approvals given "for this session" kept at most, across sessions (the least recently used go first).
pub(super) const REMEMBERED_APPROVALS: usize = 10_000;

/// The name of the tool that reads artifacts back: when registered, a spilled output says to use it.
pub(super) const ARTIFACT_READER: &str = "read_artifact";

/// How much of a call's arguments a trace shows.
pub(super) const SNAPSHOT_CHARS: usize = 2_000;

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
