//! Station 8, before the rate limit: the circuit breaker. A tool whose calls keep failing is not called while it
//! is down: past a failure rate over a window the breaker opens and calls are answered at once (`unavailable`);
//! after `openMs` it lets a few trial calls through (half-open), whose outcomes close it again or reopen it.
//!
//! The state machine here is the memory store's; the shared store runs the same rules in one script per tool (see
//! the Redis store's `breakerAdmit` and `breakerRecord`), on the server's clock.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ops::{Op, Reply, Word};
use crate::timer::seconds;
use crate::result::{ErrorKind, ToolResult};

/// `breaker: true` or `{ failureRate, minCalls, windowMs, openMs, halfOpenCalls }`, each with a default.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct BreakerConfig {
    /// The share of counted calls in the window that failed, from which the breaker opens (0 < rate ≤ 1).
    pub failure_rate: f64,
    /// No verdict on fewer counted calls than this in the window.
    pub min_calls: u32,
    pub window_ms: u64,
    /// How long it stays open before trial calls are let through.
    pub open_ms: u64,
    /// Trial calls let through at once when half-open; this many successes close it.
    pub half_open_calls: u32,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig { failure_rate: 0.5, min_calls: 10, window_ms: 60_000, open_ms: 30_000, half_open_calls: 1 }
    }
}

impl BreakerConfig {
    /// A declared breaker: None when off (`false`, or absent and no default).
    pub fn parse(value: &Value) -> Result<Option<Self>, String> {
        const FORMS: &str = "breaker must be true, false or { failureRate?, minCalls?, windowMs?, openMs?, halfOpenCalls? }";
        let config = match value {
            Value::Bool(false) => return Ok(None),
            Value::Bool(true) => BreakerConfig::default(),
            Value::Object(_) => serde_json::from_value::<BreakerConfig>(value.clone()).map_err(|e| format!("{FORMS} ({e})"))?,
            _ => return Err(FORMS.into()),
        };
        if !(config.failure_rate > 0.0 && config.failure_rate <= 1.0) {
            return Err("breaker.failureRate must be above 0 and at most 1 (0.5: half of the calls failed)".into());
        }
        for (name, value) in [("minCalls", u64::from(config.min_calls)), ("windowMs", config.window_ms), ("openMs", config.open_ms), ("halfOpenCalls", u64::from(config.half_open_calls))] {
            if value == 0 {
                return Err(format!("breaker.{name} must be a positive number"));
            }
        }
        Ok(Some(config))
    }

    /// How long one slice of the window lasts.
    fn slice_ms(&self) -> u64 {
        (self.window_ms / SLICES as u64).max(1)
    }
}

/// A window is counted in this many slices, so that old outcomes leave it a slice at a time.
pub const SLICES: usize = 10;

/// Where a breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Closed,
    Open,
    HalfOpen,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Closed => "closed",
            Phase::Open => "open",
            Phase::HalfOpen => "half_open",
        }
    }

    /// The phase a reply says.
    pub fn of(word: Word) -> Option<Self> {
        match word {
            Word::Closed => Some(Phase::Closed),
            Word::Open => Some(Phase::Open),
            Word::HalfOpen => Some(Phase::HalfOpen),
            _ => None,
        }
    }

    fn word(self) -> Word {
        match self {
            Phase::Closed => Word::Closed,
            Phase::Open => Word::Open,
            Phase::HalfOpen => Word::HalfOpen,
        }
    }
}

/// What the breaker let a call's attempt do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Admission {
    /// Closed: the attempt runs and its outcome counts in the window of this closed phase (its generation, when
    /// known here: a shared store's breaker keeps its own).
    Counted(Option<u64>),
    /// Half-open: one of the trial attempts of this opening (its generation), whose outcome decides.
    Trial(u64),
    /// Open (or every trial taken): not run; the wait until it may be tried again.
    Refused(Duration),
}

/// How an attempt ended, as the breaker counts it: handler errors and timeouts are the backend failing; a call
/// refused before it ran, cancelled or invalid says nothing about the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Failure,
    Untested,
}

impl Outcome {
    pub fn of(result: &ToolResult, ran: bool) -> Self {
        match (ran, result.success, result.error_kind) {
            (false, ..) => Outcome::Untested,
            (true, true, _) => Outcome::Success,
            (true, false, Some(ErrorKind::HandlerError | ErrorKind::Timeout | ErrorKind::IdleTimeout)) => Outcome::Failure,
            _ => Outcome::Untested,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failure => "failure",
            Outcome::Untested => "untested",
        }
    }

    /// An outcome as `record_op` names it; anything else says nothing of the backend.
    pub fn parse(text: &str) -> Self {
        match text {
            "success" => Outcome::Success,
            "failure" => Outcome::Failure,
            _ => Outcome::Untested,
        }
    }
}

/// A change of phase, for the trace and the stats: what it was, what it is, and the counts that decided.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Transition {
    pub tool: String,
    pub from: Phase,
    pub to: Phase,
    /// Counted calls and failures in the window when it opened from closed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calls: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failures: Option<u32>,
}

/// A breaker as `inspect()` shows it: its window's counts while closed, the wait before a trial while open.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BreakerView {
    pub state: Phase,
    pub calls: u32,
    pub failures: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub half_open_in_ms: Option<u64>,
}

/// One tool's breaker in the memory store. Times are ms on the store's clock.
#[derive(Debug, Clone)]
pub struct BreakerState {
    phase: Phase,
    /// Open until then.
    until_ms: u64,
    /// Trial attempts let through and trials that succeeded, in this half-open phase.
    admitted: u32,
    passed: u32,
    /// Counts every opening, so that a trial of an earlier one decides nothing now.
    generation: u64,
    /// Per slice of the window: its number (ms / slice length), successes and failures.
    slices: [(u64, u32, u32); SLICES],
}

impl Default for BreakerState {
    fn default() -> Self {
        BreakerState { phase: Phase::Closed, until_ms: 0, admitted: 0, passed: 0, generation: 0, slices: [(u64::MAX, 0, 0); SLICES] }
    }
}

impl BreakerState {
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The calls and failures counted in the window that ends with `slice`.
    fn window(&self, slice: u64) -> (u32, u32) {
        let (successes, failures) = self
            .slices
            .iter()
            .filter(|(n, ..)| *n <= slice && slice - *n < SLICES as u64)
            .fold((0u32, 0u32), |(s, f), (_, ok, failed)| (s + ok, f + failed));
        (successes + failures, failures)
    }

    /// The breaker as the next call would find it, for a page that shows it: its phase, what its window counts
    /// now, and how long until an opening lets a trial through.
    pub fn view(&self, config: &BreakerConfig, now_ms: u64) -> BreakerView {
        let (calls, failures) = if self.phase == Phase::Closed { self.window(now_ms / config.slice_ms()) } else { (0, 0) };
        let phase = self.phase_at(now_ms);
        let half_open_in_ms = (phase == Phase::Open).then(|| self.until_ms - now_ms);
        BreakerView { state: phase, calls, failures, half_open_in_ms }
    }

    /// The phase as the next call would find it: an opening whose time is up is half-open.
    fn phase_at(&self, now_ms: u64) -> Phase {
        match self.phase {
            Phase::Open if now_ms >= self.until_ms => Phase::HalfOpen,
            phase => phase,
        }
    }

    /// Lets an attempt through or not; `trial_wait` is how long a call refused because every trial is out should
    /// wait (about as long as a trial may take). Open turns half-open here once its time is up. The time is read
    /// only when open: a closed breaker lets a call through without it.
    pub fn admit(&mut self, tool: &str, config: &BreakerConfig, trial_wait: Duration, now_ms: impl FnOnce() -> u64) -> (Admission, Option<Transition>) {
        let mut changed = None;
        if self.phase == Phase::Open {
            let now_ms = now_ms();
            if now_ms < self.until_ms {
                return (Admission::Refused(Duration::from_millis(self.until_ms - now_ms)), None);
            }
            changed = Some(self.enter(tool, Phase::HalfOpen));
        }
        let admission = match self.phase {
            Phase::Closed => Admission::Counted(Some(self.generation)),
            Phase::HalfOpen if self.admitted < config.half_open_calls => {
                self.admitted += 1;
                Admission::Trial(self.generation)
            }
            _ => Admission::Refused(trial_wait),
        };
        (admission, changed)
    }

    /// Counts how an admitted attempt ended; returns the change of phase it caused.
    pub fn record(&mut self, tool: &str, config: &BreakerConfig, admission: Admission, outcome: Outcome, now_ms: u64) -> Option<Transition> {
        match admission {
            Admission::Refused(_) => None,
            Admission::Counted(generation) => {
                if self.phase != Phase::Closed || generation.is_some_and(|g| g != self.generation) || outcome == Outcome::Untested {
                    // An opening restarts the window: what was admitted before it counts for nothing, even once a
                    // later closing has begun a new window.
                    return None;
                }
                let slice = now_ms / config.slice_ms();
                let cell = &mut self.slices[(slice % SLICES as u64) as usize];
                if cell.0 != slice {
                    *cell = (slice, 0, 0);
                }
                match outcome {
                    Outcome::Success => cell.1 += 1,
                    _ => cell.2 += 1,
                }
                // Judged after every counted outcome, a success too: the call that brings the window to minCalls
                // may be a success, and the failures before it have reached the rate all the same.
                let (calls, failures) = self.window(slice);
                if calls < config.min_calls || f64::from(failures) < config.failure_rate * f64::from(calls) {
                    return None;
                }
                self.until_ms = now_ms.saturating_add(config.open_ms);
                let mut transition = self.enter(tool, Phase::Open);
                (transition.calls, transition.failures) = (Some(calls), Some(failures));
                Some(transition)
            }
            Admission::Trial(generation) => {
                if generation != self.generation || self.phase != Phase::HalfOpen {
                    return None; // a trial of an earlier opening
                }
                match outcome {
                    Outcome::Untested => {
                        self.admitted = self.admitted.saturating_sub(1);
                        None
                    }
                    Outcome::Success => {
                        self.passed += 1;
                        (self.passed >= config.half_open_calls).then(|| self.enter(tool, Phase::Closed))
                    }
                    Outcome::Failure => {
                        self.until_ms = now_ms.saturating_add(config.open_ms);
                        Some(self.enter(tool, Phase::Open))
                    }
                }
            }
        }
    }

    /// What this breaker answers to an operation, as the shared store's scripts do: what it let an attempt do (an
    /// admission; None for an outcome told), the phase now and the one it left, and how long it stays open.
    pub fn reply(&self, admission: Option<Admission>, changed: Option<Transition>, now_ms: u64) -> Reply {
        let (admit, generation, wait) = match admission {
            Some(Admission::Counted(generation)) => (Some(Word::Counted), generation, Duration::ZERO),
            Some(Admission::Trial(generation)) => (Some(Word::Trial), Some(generation), Duration::ZERO),
            Some(Admission::Refused(wait)) => (Some(Word::Refused), None, wait),
            None if self.phase == Phase::Open => (None, None, Duration::from_millis(self.until_ms.saturating_sub(now_ms))),
            None => (None, None, Duration::ZERO),
        };
        let (from, calls, failures) = changed.map_or((None, None, None), |t| (Some(t.from.word()), t.calls, t.failures));
        Reply {
            admit,
            generation,
            phase: Some(self.phase.word()),
            wait_ms: Some(crate::ops::wait_ms(wait)),
            exact_wait: Some(wait),
            from,
            calls,
            failures,
            ..Reply::default()
        }
    }

    /// Moves to `phase`: a new generation of trials, and a window that starts empty.
    fn enter(&mut self, tool: &str, phase: Phase) -> Transition {
        let from = self.phase;
        self.phase = phase;
        self.generation += 1;
        self.admitted = 0;
        self.passed = 0;
        self.slices = [(u64::MAX, 0, 0); SLICES];
        Transition { tool: tool.to_string(), from, to: phase, calls: None, failures: None }
    }
}

/// What the breaker asks the store before an attempt: to let it through, counted or as a trial, or refuse it;
/// `trial_wait_ms`: how long a call refused because every trial is out should wait.
pub fn admit_op<'a>(tool: &'a str, config: &BreakerConfig, trial_wait_ms: u64) -> Op<'a> {
    Op::BreakerAdmit { key: tool.into(), half_open_calls: config.half_open_calls, trial_wait_ms, ttl_ms: ttl_ms(config) }
}

/// How an attempt the breaker let through ended, told to the store; None for one it refused (nothing to count).
pub fn record_op<'a>(tool: &'a str, config: &BreakerConfig, admission: Admission, outcome: Outcome) -> Option<Op<'a>> {
    let (admission, generation) = match admission {
        Admission::Counted(generation) => ("counted", generation.unwrap_or(0)),
        Admission::Trial(generation) => ("trial", generation),
        Admission::Refused(_) => return None,
    };
    Some(Op::BreakerRecord {
        key: tool.into(),
        admission,
        generation,
        outcome: outcome.as_str(),
        failure_rate: config.failure_rate,
        min_calls: config.min_calls,
        window_ms: config.window_ms,
        open_ms: config.open_ms,
        half_open_calls: config.half_open_calls,
        ttl_ms: ttl_ms(config),
    })
}

/// How long a breaker's state outlives its last change: its window and its opening, with a margin. A state that
/// expired is a closed breaker with an empty window.
fn ttl_ms(config: &BreakerConfig) -> u64 {
    config.window_ms.saturating_add(config.open_ms).saturating_add(60_000)
}

/// A breaker as the store answered: its phase, how long it stays open, the phase it left when the operation
/// changed it (with the counts that opened it), and what it let an attempt do (a reply to an outcome lets nothing
/// through and reads as counted).
#[derive(Debug, Clone, PartialEq)]
pub struct BreakerSaid {
    pub phase: Phase,
    pub open_for: Duration,
    pub from: Option<Phase>,
    pub calls: Option<u32>,
    pub failures: Option<u32>,
    pub admission: Admission,
}

impl BreakerSaid {
    /// Err: the store failed. A reply no breaker could give (a phase or admission it does not know, a wait past a
    /// century) is garbage found in the store: it reads as a closed breaker, since garbage must never keep a tool
    /// from running (nor be kept as this process's view). What no setting could give, not what this process's
    /// would: another process of the fleet may be configured otherwise.
    pub fn of(reply: &Reply) -> Result<BreakerSaid, String> {
        if let Some(e) = &reply.error {
            return Err(e.clone());
        }
        let closed = BreakerSaid { phase: Phase::Closed, open_for: Duration::ZERO, from: None, calls: None, failures: None, admission: Admission::Counted(None) };
        Ok(Self::read(reply).unwrap_or(closed))
    }

    fn read(reply: &Reply) -> Option<BreakerSaid> {
        const LONGEST_WAIT_MS: f64 = 3_155_760_000_000.0;
        let phase = Phase::of(reply.phase?)?;
        let from = match reply.from {
            Some(from) => Some(Phase::of(from).filter(|from| *from != phase)?),
            None => None,
        };
        let wait = || match reply.exact_wait {
            Some(exact) => Some(exact),
            None => {
                let ms = reply.wait_ms.unwrap_or(0.0);
                (0.0..=LONGEST_WAIT_MS).contains(&ms).then(|| seconds(ms / 1000.0))
            }
        };
        let open_for = if phase == Phase::Open { wait()? } else { Duration::ZERO };
        let admission = match (reply.admit, phase) {
            (None, _) => Admission::Counted(None),
            (Some(Word::Counted), Phase::Closed) => Admission::Counted(reply.generation),
            (Some(Word::Trial), Phase::HalfOpen) => Admission::Trial(reply.generation?),
            (Some(Word::Refused), Phase::Open) => Admission::Refused(open_for),
            (Some(Word::Refused), Phase::HalfOpen) => Admission::Refused(wait()?),
            _ => return None,
        };
        Some(BreakerSaid { phase, open_for, from, calls: reply.calls, failures: reply.failures, admission })
    }
}

/// What a breaker lets an attempt do without being asked: a closed one (a breaker never used is closed) lets it
/// through, counted in its generation. None when it is to be asked: open or half-open, its time or its trial places
/// decide.
pub fn lets_through(state: Option<&BreakerState>) -> Option<Admission> {
    let (phase, generation) = state.map_or((Phase::Closed, 0), |state| (state.phase, state.generation));
    (phase == Phase::Closed).then_some(Admission::Counted(Some(generation)))
}

/// A trial place a reply gave, whatever else it says: it is given back, untested, when no attempt used it.
pub fn trial_given(reply: &Reply) -> Option<Admission> {
    (reply.error.is_none() && reply.admit == Some(Word::Trial)).then(|| Admission::Trial(reply.generation.unwrap_or(0)))
}

/// A call not run because its tool's breaker is open (or every trial of a half-open one is out).
pub fn refused(call_id: String, tool: &str, phase: Phase, wait: Duration) -> ToolResult {
    let seconds = wait.as_millis().div_ceil(1000).max(1);
    let why = match phase {
        Phase::HalfOpen => "it failed repeatedly and is being tried again with a trial call now",
        _ => "too many of its recent calls failed, so it is not being called for a while",
    };
    let error = format!(
        "Tool \"{tool}\" is unavailable: {why}. Do not call it again for about {seconds} s; meanwhile use another \
         tool or go on without it, and tell the user if the task needs it."
    );
    let mut result = ToolResult::failure(call_id, tool.to_string(), ErrorKind::Unavailable, error, true);
    result.retry_after_ms = Some(wait.as_millis().min(u128::from(u64::MAX)) as u64);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TRIAL: Duration = Duration::from_secs(5);

    fn config() -> BreakerConfig {
        BreakerConfig { failure_rate: 0.5, min_calls: 4, window_ms: 10_000, open_ms: 1_000, half_open_calls: 2 }
    }

    /// One attempt admitted and recorded at `at`; the change it caused.
    fn call(state: &mut BreakerState, outcome: Outcome, at: u64) -> Option<Transition> {
        let (admission, _) = state.admit("t", &config(), TRIAL, || at);
        assert!(matches!(admission, Admission::Counted(Some(_))));
        state.record("t", &config(), admission, outcome, at)
    }

    #[test]
    fn attempts_admitted_before_an_opening_never_count_after_it_closes_again() {
        let mut state = BreakerState::default();
        let config = config();
        let (stale, _) = state.admit("t", &config, TRIAL, || 0);
        for at in 1..5 {
            state.record("t", &config, Admission::Counted(Some(0)), Outcome::Failure, at);
        }
        assert_eq!(state.phase, Phase::Open);
        let (trial, _) = state.admit("t", &config, TRIAL, || 2_000);
        state.record("t", &config, trial, Outcome::Success, 2_001);
        let (trial, _) = state.admit("t", &config, TRIAL, || 2_002);
        state.record("t", &config, trial, Outcome::Success, 2_003);
        assert_eq!(state.phase, Phase::Closed);
        for at in 2_004..2_010 {
            assert_eq!(state.record("t", &config, stale, Outcome::Failure, at), None, "a failure of the old window");
        }
        assert_eq!(state.phase, Phase::Closed);
    }

    #[test]
    fn opens_past_the_failure_rate_once_enough_calls_counted() {
        let mut state = BreakerState::default();
        for at in 0..3 {
            assert_eq!(call(&mut state, Outcome::Success, at), None, "fewer than minCalls");
        }
        assert_eq!(call(&mut state, Outcome::Untested, 3), None, "not counted");
        assert_eq!(call(&mut state, Outcome::Failure, 4), None, "1 of 4 failed: below the rate");
        assert_eq!(call(&mut state, Outcome::Failure, 5), None, "2 of 5 failed: below the rate");
        let opened = call(&mut state, Outcome::Failure, 6).expect("3 of 6 failed");
        assert_eq!((opened.from, opened.to, opened.calls, opened.failures), (Phase::Closed, Phase::Open, Some(6), Some(3)));
        assert_eq!(state.admit("t", &config(), TRIAL, || 500).0, Admission::Refused(Duration::from_millis(506)));
    }

    #[test]
    fn a_success_that_completes_min_calls_opens_it_when_the_failures_reached_the_rate() {
        let mut state = BreakerState::default();
        for at in 0..3 {
            assert_eq!(call(&mut state, Outcome::Failure, at), None, "fewer than minCalls");
        }
        assert_eq!(call(&mut state, Outcome::Untested, 3), None, "not counted");
        let opened = call(&mut state, Outcome::Success, 4).expect("3 of 4 failed: the success finds the rate reached");
        assert_eq!((opened.from, opened.to, opened.calls, opened.failures), (Phase::Closed, Phase::Open, Some(4), Some(3)));
        assert_eq!(state.admit("t", &config(), TRIAL, || 500).0, Admission::Refused(Duration::from_millis(504)));
    }

    #[test]
    fn old_outcomes_leave_the_window() {
        let mut state = BreakerState::default();
        for at in 0..3 {
            call(&mut state, Outcome::Failure, at);
        }
        // 11 s later the three failures are out of the 10 s window: one more failure is one of one, below minCalls.
        assert_eq!(call(&mut state, Outcome::Failure, 11_000), None);
        for at in 11_001..11_004 {
            assert_eq!(call(&mut state, Outcome::Success, at), None);
        }
        assert_eq!(call(&mut state, Outcome::Failure, 11_004), None, "2 of 5 failed: below the rate");
        assert!(call(&mut state, Outcome::Failure, 11_005).is_some(), "3 of 6: at the rate");
    }

    #[test]
    fn half_open_trials_close_it_or_a_failed_one_reopens_it() {
        let mut state = BreakerState::default();
        for at in 0..4 {
            call(&mut state, Outcome::Failure, at);
        }
        assert_eq!(state.phase(), Phase::Open);
        let (first, changed) = state.admit("t", &config(), TRIAL, || 1_003);
        assert_eq!((first, changed.map(|t| t.to)), (Admission::Trial(2), Some(Phase::HalfOpen)));
        let (second, _) = state.admit("t", &config(), TRIAL, || 1_004);
        assert_eq!(state.admit("t", &config(), TRIAL, || 1_005).0, Admission::Refused(TRIAL), "both trials out");
        assert_eq!(state.record("t", &config(), first, Outcome::Success, 1_006), None, "one of two trials passed");
        assert_eq!(state.record("t", &config(), second, Outcome::Success, 1_007).map(|t| t.to), Some(Phase::Closed));
        assert_eq!(call(&mut state, Outcome::Failure, 1_008), None, "the window starts empty");
        for at in 1_009..1_012 {
            call(&mut state, Outcome::Failure, at);
        }
        assert_eq!(state.phase(), Phase::Open);
        let (trial, _) = state.admit("t", &config(), TRIAL, || 2_100);
        let (untested, _) = state.admit("t", &config(), TRIAL, || 2_100);
        assert_eq!(state.record("t", &config(), untested, Outcome::Untested, 2_101), None, "its place goes back");
        assert!(matches!(state.admit("t", &config(), TRIAL, || 2_102).0, Admission::Trial(_)));
        let reopened = state.record("t", &config(), trial, Outcome::Failure, 2_103).expect("a failed trial reopens it");
        assert_eq!((reopened.from, reopened.to), (Phase::HalfOpen, Phase::Open));
        assert_eq!(state.admit("t", &config(), TRIAL, || 2_200).0, Admission::Refused(Duration::from_millis(903)));
    }

    #[test]
    fn a_trial_of_an_earlier_opening_decides_nothing() {
        let mut state = BreakerState::default();
        for at in 0..4 {
            call(&mut state, Outcome::Failure, at);
        }
        let (late, _) = state.admit("t", &config(), TRIAL, || 1_003);
        let (other, _) = state.admit("t", &config(), TRIAL, || 1_003);
        state.record("t", &config(), other, Outcome::Failure, 1_004);
        let (fresh, _) = state.admit("t", &config(), TRIAL, || 2_004);
        assert_eq!(state.record("t", &config(), late, Outcome::Success, 2_005), None);
        assert_eq!(state.phase(), Phase::HalfOpen);
        state.record("t", &config(), fresh, Outcome::Success, 2_006);
        assert_eq!(state.phase(), Phase::HalfOpen, "one of the two trials of this opening");
    }

    #[test]
    fn counts_failures_of_the_backend_only() {
        let fail = |kind| ToolResult::failure("c".into(), "t".into(), kind, "x".into(), false);
        assert_eq!(Outcome::of(&fail(ErrorKind::HandlerError), true), Outcome::Failure);
        assert_eq!(Outcome::of(&fail(ErrorKind::Timeout), true), Outcome::Failure);
        assert_eq!(Outcome::of(&fail(ErrorKind::IdleTimeout), true), Outcome::Failure);
        assert_eq!(Outcome::of(&fail(ErrorKind::Cancelled), true), Outcome::Untested);
        assert_eq!(Outcome::of(&fail(ErrorKind::HandlerError), false), Outcome::Untested, "it never ran");
        assert_eq!(Outcome::of(&ToolResult::success("c".into(), "t".into(), "ok".into()), true), Outcome::Success);
    }

    #[test]
    fn reads_its_options_and_refuses_nonsense() {
        assert_eq!(BreakerConfig::parse(&json!(false)), Ok(None));
        assert_eq!(BreakerConfig::parse(&json!(true)), Ok(Some(BreakerConfig::default())));
        let custom = BreakerConfig::parse(&json!({"failureRate": 0.6, "minCalls": 5})).unwrap().unwrap();
        assert_eq!((custom.failure_rate, custom.min_calls, custom.open_ms), (0.6, 5, 30_000));
        for bad in [json!({"failureRate": 0}), json!({"failureRate": 1.5}), json!({"openMs": 0}), json!({"minCall": 3}), json!("on")] {
            assert!(BreakerConfig::parse(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_refusal_says_when_to_try_again() {
        let r = refused("c".into(), "search", Phase::Open, Duration::from_millis(2_500));
        assert_eq!((r.error_kind, r.retryable, r.retry_after_ms), (Some(ErrorKind::Unavailable), true, Some(2_500)));
        assert!(r.output.starts_with("Error (unavailable): Tool \"search\" is unavailable: too many of its recent calls failed"), "{}", r.output);
        assert!(r.output.contains("for about 3 s"), "{}", r.output);
    }
}
