//! What the engine keeps of a call while it is open, of its turn, and of a handler's run; and `At`, the handle by
//! which the engine's rooms find a call.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use serde_json::Value;

use crate::breaker::Admission;
use crate::dedup::{self, Mode};
use crate::permission::Policy;
use crate::registry::Tool;
use crate::result::{AttemptError, Repair, StationMark, ToolResult};
use crate::scheduler::Schedule;
use crate::store::Bucket;

use super::flights::Deferred;
use super::Engine;

/// Where a call is: its turn, and its place in the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct At {
    pub(super) turn: u32,
    pub(super) index: usize,
}

/// Held boxed: a slot is moved whole (out of its turn and back) while the replies of a store are read into it.
pub(super) struct Slot {
    pub(super) id: String,
    pub(super) tool: Option<Arc<Tool>>,
    pub(super) marks: Vec<StationMark>,
    /// The call holds a place in its turn's schedule (from its first start until its result).
    pub(super) scheduled: bool,
    pub(super) first_started: Option<Instant>,
    pub(super) started: Option<Instant>,
    /// When a streaming turn took the call (a whole turn's calls arrive when it begins).
    pub(super) arrived: Option<Instant>,
    pub(super) run: Option<u32>,
    pub(super) attempts: u32,
    pub(super) attempt_errors: Vec<AttemptError>,
    /// How many of `marks` the host has been told of, while it observes turns live.
    pub(super) reported: usize,
    /// A streaming turn's host took its result already (`take_settled`): sealed, though `result` is empty.
    pub(super) taken: bool,
    /// Waiting to retry until then; the failure stands if the retry never comes.
    /// Boxed, as every rarely set part of a slot: slots are moved whole while a turn begins.
    pub(super) backoff: Option<Box<(Instant, ToolResult)>>,
    /// Waiting until then for the rate-limit token it reserved, and the buckets it reserved from.
    pub(super) rate_wait: Option<(Instant, Reserved)>,
    /// The flight this call runs: its cache key and flight id (identical calls wait on it).
    pub(super) fills: Option<(String, u32)>,
    /// The flight of an identical call whose result this call will share: its cache key and flight id.
    pub(super) joined: Option<(String, u32)>,
    /// Answered because its turn ended (cancelled, deadline): nothing another turn may share.
    pub(super) ended_early: bool,
    /// The session and query key this call counted under, and how often the query ran before.
    pub(super) dedup: Option<DedupMark>,
    /// What the repair station changed in the call.
    pub(super) repairs: Vec<Repair>,
    /// The request the call waits on before it may run (its check or its approval), by ticket.
    pub(super) pending: Option<u32>,
    /// What the permission station decided and what decided it.
    pub(super) permission: Option<(&'static str, String)>,
    /// When each attempt's handler started.
    pub(super) starts: Vec<Instant>,
    /// With a shared store: what dedup and cache will ask of it when the call is handed out.
    pub(super) deferred: Option<Deferred>,
    /// Waiting for an identical call another process runs: since when, the last wait between looks, and when
    /// the next look is due.
    pub(super) polling: Option<(Instant, Duration, Instant)>,
    /// Why the shared store failed this call, which went on without it.
    pub(super) store_error: Option<String>,
    /// Store tickets of its own it no longer waits on (timed out, or its turn ended): their answers may still come.
    pub(super) unanswered: Vec<u32>,
    /// What the call spent of its budgets as it was about to run, given back if it never does.
    pub(super) spent: Spent,
    /// What the breaker let the attempt under way do, until its outcome is counted.
    pub(super) admission: Option<Admission>,
    /// What the call costs, when the tool's cost function said.
    pub(super) cost: Option<f64>,
    pub(super) result: Option<Box<ToolResult>>,
}

/// Which of the budget limits a call is held to it added to (a bit per limit, in the order of `limits_of`), and
/// the window each windowed one was added to in.
#[derive(Default)]
pub(super) struct Spent {
    pub(super) made: u16,
    pub(super) windows: Vec<(u8, u64)>,
}

impl Spent {
    pub(super) fn mark(&mut self, line: usize, window: u64) {
        self.made |= 1 << line;
        if window != 0 {
            self.windows.push((line as u8, window));
        }
    }
}

impl Slot {
    /// The call has its result: held, or a streaming turn's host has taken it.
    pub(super) fn sealed(&self) -> bool {
        self.result.is_some() || self.taken
    }

    pub(super) fn new(id: String) -> Box<Self> {
        Box::new(Slot {
            id,
            tool: None,
            marks: Vec::with_capacity(8),
            scheduled: false,
            first_started: None,
            started: None,
            arrived: None,
            run: None,
            attempts: 0,
            attempt_errors: Vec::new(),
            reported: 0,
            taken: false,
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

    /// The call's tool: every call past lookup has one, and only those are scheduled, run or asked about.
    pub(super) fn tool(&self) -> &Arc<Tool> {
        self.tool.as_ref().expect("an admitted call has a tool")
    }
}

/// The buckets (key and shape) a call took or reserved a token from, to give it back if the call never runs.
pub(super) type Reserved = Vec<(String, Bucket)>;

pub(super) struct DedupMark {
    pub(super) session: String,
    pub(super) key: String,
    pub(super) earlier: u64,
}

impl DedupMark {
    /// A repeated query's result says how often it ran before; under `note`, so does the text the model reads.
    pub(super) fn annotate(&self, result: &mut ToolResult, mode: Mode) {
        if self.earlier == 0 {
            return;
        }
        result.metadata.repeats = Some(self.earlier);
        if mode == Mode::Note && result.success {
            result.output.push_str(&dedup::note(self.earlier));
        }
    }
}

pub(super) struct Turn {
    /// Boxed: a slot is large, and the turn's vector grows and its slots are taken out by value.
    #[allow(clippy::vec_box)]
    pub(super) slots: Vec<Box<Slot>>,
    /// Validated arguments of calls that will run (kept for their retries).
    pub(super) args: FxHashMap<usize, Value>,
    pub(super) schedule: Schedule,
    pub(super) open: usize,
    pub(super) begun: Instant,
    pub(super) begun_epoch_ms: f64,
    pub(super) deadline: Option<(Instant, u64)>,
    pub(super) stop_on_error: bool,
    /// With stopOnError: the state-changing call refused at admission (its id and tool), after which no call is
    /// admitted, those a streaming turn takes later too; and why the turn stopped when one failed while running,
    /// after which every call admitted is answered `not_executed` before it starts.
    pub(super) stopped_by: Option<(String, String)>,
    pub(super) halted: Option<String>,
    /// A streaming turn: each result is reported as it is sealed (`Step::settled`), and the turn takes calls
    /// (`accepting`) until it is ended.
    pub(super) streaming: bool,
    pub(super) accepting: bool,
    /// The context's policy (its plain fields key rate limits, caches and sessions).
    pub(super) policy: Policy,
    /// Who may read back the artifacts its calls save (see `artifacts::owner`).
    pub(super) owner: Option<Arc<str>>,
    pub(super) done_reported: bool,
    /// Calls that ran in this turn, by budget scope (`*`, or a tool's name), for per-turn budgets.
    pub(super) calls_run: FxHashMap<String, u64>,
}

pub(super) struct Run {
    pub(super) at: At,
    pub(super) total_at: Instant,
    /// The idle deadline and the idle limit it was armed with.
    pub(super) idle: Option<(Instant, u64)>,
    pub(super) verdict: Option<String>,
}

/// The open turns, by id. A call in one is found by its `At`: the engine's rooms hold a call by `At` only while its
/// turn is open, so finding it is not a question each of them asks.
#[derive(Default)]
pub(super) struct Turns(FxHashMap<u32, Turn>);

impl std::ops::Deref for Turns {
    type Target = FxHashMap<u32, Turn>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Turns {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Turns {
    pub(super) fn live(&self, turn: u32) -> &Turn {
        self.0.get(&turn).expect("a live turn")
    }

    pub(super) fn live_mut(&mut self, turn: u32) -> &mut Turn {
        self.0.get_mut(&turn).expect("a live turn")
    }

    pub(super) fn slot(&self, at: At) -> &Slot {
        &self.live(at.turn).slots[at.index]
    }

    pub(super) fn slot_mut(&mut self, at: At) -> &mut Slot {
        &mut self.live_mut(at.turn).slots[at.index]
    }

    /// The slot, when its turn is still open (an answer from the host or the store may come after the turn ended).
    pub(super) fn open_slot(&self, at: At) -> Option<&Slot> {
        self.0.get(&at.turn).map(|turn| &*turn.slots[at.index])
    }
}

impl Engine {
    pub(super) fn slot(&self, at: At) -> &Slot {
        self.turns.slot(at)
    }

    pub(super) fn slot_mut(&mut self, at: At) -> &mut Slot {
        self.watch.met(at);
        self.turns.slot_mut(at)
    }

    pub(super) fn open_slot(&self, at: At) -> Option<&Slot> {
        self.turns.open_slot(at)
    }

    pub(super) fn turn(&self, at: At) -> &Turn {
        self.turns.live(at.turn)
    }

    pub(super) fn turn_mut(&mut self, at: At) -> &mut Turn {
        self.turns.live_mut(at.turn)
    }

    pub(super) fn tool_of(&self, at: At) -> Arc<Tool> {
        self.slot(at).tool().clone()
    }

    /// Takes a slot out of its turn, to work on it while the engine is borrowed as well; `put_back` returns it. An
    /// empty slot stands in its place meanwhile, the same one each time (a slot is large to make anew per call).
    pub(super) fn lift(&mut self, at: At) -> Box<Slot> {
        let stand_in = self.stand_in.take().unwrap_or_else(|| Slot::new(String::new()));
        std::mem::replace(&mut self.turn_mut(at).slots[at.index], stand_in)
    }

    pub(super) fn put_back(&mut self, at: At, slot: Box<Slot>) {
        self.watch.met(at);
        self.stand_in = Some(std::mem::replace(&mut self.turn_mut(at).slots[at.index], slot));
    }
}
