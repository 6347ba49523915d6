//! Time and failure through the engine: retries with backoff, idle timeouts, turn deadlines, stopOnError and
//! per-tool concurrency, with scripted handlers and a hand-moved clock.

mod common;

use common::*;
use serde_json::json;
use toolgate_core::{ErrorKind, Outcome, Policy, ToolResult, TurnOptions};

fn thrown(fields: serde_json::Value) -> Behaviour {
    Behaviour::Return(Outcome::Thrown(fields.to_string()))
}

fn transient() -> Behaviour {
    thrown(json!({"name": "Error", "message": "socket hang up", "code": "ECONNRESET"}))
}

/// Moves the clock in small steps until the turn is done (or a minute of fake time has passed).
fn run_out(h: &mut Host, turn: u32) -> Vec<ToolResult> {
    for _ in 0..600 {
        if h.done.contains(&turn) {
            break;
        }
        h.advance_clock(100);
    }
    h.results(turn)
}

fn retrying(max_retries: u32) -> serde_json::Value {
    json!({"maxRetries": max_retries, "initialDelayMs": 100, "maxDelayMs": 1000})
}

#[test]
fn a_transient_failure_is_retried_until_it_succeeds() {
    let mut h = Host::new(json!({}));
    h.tool_script(json!({"name": "flaky", "retry": retrying(3)}), vec![transient(), transient(), text("ok")]);
    let turn = h.begin(json!([{"name": "flaky"}]), Policy::default());
    let r = &run_out(&mut h, turn)[0];
    assert!(r.success, "{:?}", r.error);
    assert_eq!(r.attempts, 3);
    assert_eq!(r.metadata.attempt_errors.len(), 2);
    assert!(r.metadata.attempt_errors[0].error.contains("socket hang up"));
    let starts = h.log.iter().filter(|(e, _)| *e == "start").count();
    assert_eq!(starts, 3);
    assert_eq!(h.engine.counters(h.now)["tools"]["flaky"]["retries"], 2);
}

#[test]
fn retries_stop_at_the_limit_and_the_last_failure_stands() {
    let mut h = Host::new(json!({}));
    h.tool(json!({"name": "down", "retry": retrying(2)}), thrown(json!({"name": "HTTPError", "message": "503", "status": 503})));
    let turn = h.begin(json!([{"name": "down"}]), Policy::default());
    let r = &run_out(&mut h, turn)[0];
    assert_eq!((r.attempts, r.error_kind), (3, Some(ErrorKind::HandlerError)));
    assert!(r.retryable);
    assert_eq!(r.metadata.attempt_errors.iter().map(|e| e.attempt).collect::<Vec<_>>(), [1, 2]);
}

#[test]
fn what_is_not_transient_is_never_retried() {
    let mut h = Host::new(json!({}));
    h.tool(json!({"name": "bug", "retry": retrying(3)}), thrown(json!({"name": "TypeError", "message": "x is undefined"})));
    h.tool(json!({"name": "no", "retry": retrying(3)}), thrown(json!({"name": "Error", "message": "nope", "status": 503, "retryable": false})));
    h.tool(json!({"name": "search", "retry": retrying(3), "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}), text("x"));
    let turn = h.begin(json!([{"name": "bug"}, {"name": "no"}, {"name": "search", "input": {"q": [1]}}, {"name": "nope"}]), Policy::default());
    let results = run_out(&mut h, turn);
    assert!(results.iter().all(|r| r.attempts <= 1 && r.metadata.attempt_errors.is_empty()));
    assert_eq!(h.log.iter().filter(|(e, _)| *e == "start").count(), 2);
}

#[test]
fn a_retry_after_hint_is_waited_for() {
    let mut h = Host::new(json!({}));
    let limited = thrown(json!({"name": "RateLimit", "message": "slow down", "status": 429, "retryAfterMs": 5000}));
    h.tool_script(json!({"name": "api", "retry": retrying(1)}), vec![limited, text("ok")]);
    let turn = h.begin(json!([{"name": "api"}]), Policy::default());
    h.advance_clock(4900);
    assert_eq!(h.log.iter().filter(|(e, _)| *e == "start").count(), 1, "not before the hint");
    h.advance_clock(200);
    assert!(run_out(&mut h, turn)[0].success);
}

#[test]
fn a_timeout_is_not_retried_unless_the_tool_opts_in() {
    let mut h = Host::new(json!({}));
    h.tool_script(json!({"name": "read", "readOnly": true, "timeoutMs": 50, "retry": retrying(2)}), vec![Behaviour::Hang, text("ok")]);
    let turn = h.begin(json!([{"name": "read"}]), Policy::default());
    let r = &run_out(&mut h, turn)[0];
    assert_eq!((r.error_kind, r.attempts), (Some(ErrorKind::Timeout), 1), "answered at its limit, as timeoutMs says");
    assert!(r.retryable, "the model may still call it again");
}

#[test]
fn opted_in_timeouts_are_retried_only_for_reads_and_idempotent_tools() {
    let mut h = Host::new(json!({}));
    let mut retry = retrying(1);
    retry["onTimeout"] = json!(true);
    h.tool_script(json!({"name": "read", "readOnly": true, "timeoutMs": 50, "retry": retry}), vec![Behaviour::Hang, text("ok")]);
    h.tool(json!({"name": "write", "timeoutMs": 50, "retry": retry}), Behaviour::Hang);
    h.tool_script(json!({"name": "put", "idempotent": true, "timeoutMs": 50, "retry": retry}), vec![Behaviour::Hang, text("ok")]);
    let turn = h.begin(json!([{"name": "read"}, {"name": "write"}, {"name": "put"}]), Policy::default());
    let results = run_out(&mut h, turn);
    assert!(results[0].success && results[0].attempts == 2);
    assert_eq!((results[1].error_kind, results[1].attempts), (Some(ErrorKind::Timeout), 1));
    assert!(results[2].success && results[2].attempts == 2);
}

#[test]
fn the_retry_budget_bounds_the_whole_call() {
    let mut h = Host::new(json!({}));
    let policy = json!({"maxRetries": 5, "initialDelayMs": 1000, "maxDelayMs": 1000, "maxElapsedMs": 100});
    h.tool(json!({"name": "flaky", "retry": policy}), transient());
    let turn = h.begin(json!([{"name": "flaky"}]), Policy::default());
    let r = &run_out(&mut h, turn)[0];
    assert!(r.attempts < 6, "a backoff that would end past maxElapsedMs is not taken");
}

#[test]
fn idle_timeout_fires_without_progress_and_progress_never_extends_the_total() {
    let mut h = Host::new(json!({}));
    h.tool(json!({"name": "slow", "readOnly": true, "idleTimeoutMs": 100, "timeoutMs": 250, "retry": {"maxRetries": 0}}), Behaviour::Hang);
    let turn = h.begin(json!([{"name": "slow"}, {"name": "slow"}]), Policy::default());
    let chatty = *h.running.keys().min().unwrap();
    for _ in 0..4 {
        h.now += std::time::Duration::from_millis(60);
        assert!(h.engine.progress(chatty, h.now));
        let step = h.engine.expire(h.now);
        h.apply(step);
    }
    let results = run_out(&mut h, turn);
    let kinds: Vec<_> = results.iter().map(|r| r.error_kind).collect();
    assert_eq!(kinds, [Some(ErrorKind::Timeout), Some(ErrorKind::IdleTimeout)], "progress kept the first alive until its total limit");
    assert!(results[1].error.as_deref().unwrap().contains("no progress for 100 ms"));
    assert!(!h.engine.progress(chatty, h.now), "progress after the end is refused");
    assert_eq!(h.engine.counters(h.now)["total"]["idleTimeouts"], 1);
}

#[test]
fn a_turn_deadline_stops_running_calls_and_skips_the_rest() {
    let mut h = Host::new(json!({}));
    h.tool(json!({"name": "w", "timeoutMs": 10_000, "retry": {"maxRetries": 0}}), Behaviour::Hang);
    let options = TurnOptions { deadline_ms: Some(300), ..TurnOptions::default() };
    let turn = h.begin_with(json!([{"name": "w"}, {"name": "w"}]), Policy::default(), options);
    h.advance_clock(299);
    assert!(!h.done.contains(&turn));
    h.advance_clock(1);
    let results = h.results(turn);
    assert_eq!(results[0].error_kind, Some(ErrorKind::Timeout));
    assert!(results[0].error.as_deref().unwrap().contains("turn's deadline of 300 ms"));
    assert_eq!(results[1].error_kind, Some(ErrorKind::NotExecuted));
    assert!(results[1].error.as_deref().unwrap().contains("passed before it started"));
    assert_eq!(h.log.iter().filter(|(e, _)| *e == "start").count(), 1);
    assert!(h.engine.deadlines().is_empty());
}

#[test]
fn no_retry_is_planned_past_the_turn_deadline() {
    let mut h = Host::new(json!({}));
    let policy = json!({"maxRetries": 3, "initialDelayMs": 10_000, "maxDelayMs": 10_000});
    h.tool_script(json!({"name": "flaky", "retry": policy}), vec![transient()]);
    let options = TurnOptions { deadline_ms: Some(200), ..TurnOptions::default() };
    let turn = h.begin_with(json!([{"name": "flaky"}]), Policy::default(), options);
    let results = run_out(&mut h, turn);
    assert!(results[0].attempts >= 1 && results[0].error_kind == Some(ErrorKind::HandlerError));
}

#[test]
fn stop_on_error_skips_what_follows_a_failed_write_only() {
    let mut h = Host::new(json!({}));
    h.tool(json!({"name": "read", "readOnly": true}), thrown(json!({"message": "read failed"})));
    h.tool(json!({"name": "write", "retry": {"maxRetries": 0}}), thrown(json!({"message": "disk full"})));
    h.tool(json!({"name": "ok"}), text("fine"));
    let options = TurnOptions { stop_on_error: true, ..TurnOptions::default() };
    let turn = h.begin_with(
        json!([{"name": "read"}, {"name": "ok"}, {"id": "w1", "name": "write"}, {"name": "ok"}, {"name": "read"}]),
        Policy::default(),
        options.clone(),
    );
    let results = h.results(turn);
    assert!(results[1].success, "a failed read does not stop the turn");
    assert_eq!(results[2].error_kind, Some(ErrorKind::HandlerError));
    for r in &results[3..] {
        assert_eq!(r.error_kind, Some(ErrorKind::NotExecuted));
        assert!(r.error.as_deref().unwrap().contains("call w1 (\"write\") before it failed"));
    }

    let turn = h.begin_with(json!([{"id": "w2", "name": "write", "input": []}, {"name": "ok"}]), Policy::default(), options);
    let results = h.results(turn);
    assert_eq!(results[0].error_kind, Some(ErrorKind::InvalidArguments));
    assert_eq!(results[1].error_kind, Some(ErrorKind::NotExecuted), "a refused write stops the turn too");
}

#[test]
fn without_stop_on_error_nothing_cascades() {
    let mut h = Host::new(json!({}));
    h.tool(json!({"name": "write", "retry": {"maxRetries": 0}}), thrown(json!({"message": "disk full"})));
    h.tool(json!({"name": "ok"}), text("fine"));
    let results = h.run(json!([{"name": "write"}, {"name": "ok"}]));
    assert!(results[1].success);
}

#[test]
fn a_tool_max_concurrency_holds_across_turns() {
    let mut h = Host::new(json!({"concurrency": 8}));
    h.tool(json!({"name": "browser", "readOnly": true, "maxConcurrency": 1}), Behaviour::Hang);
    h.tool(json!({"name": "other", "readOnly": true}), Behaviour::Hang);
    let a = h.begin(json!([{"name": "browser"}, {"name": "browser"}, {"name": "other"}]), Policy::default());
    let b = h.begin(json!([{"name": "browser"}]), Policy::default());
    assert_eq!(h.engine.running(), 2, "one browser and the other tool");
    // Finish the running browser: exactly one waiting browser call (the earlier turn's) takes its place.
    let run = *h.running.iter().find(|(_, n)| *n == "browser").unwrap().0;
    h.running.remove(&run);
    let step = h.engine.complete(run, Outcome::Text("page".into()), h.now);
    h.apply(step);
    assert_eq!(h.running.values().filter(|n| *n == "browser").count(), 1);
    assert!(!h.done.contains(&a) && !h.done.contains(&b));
}

#[test]
fn a_call_started_in_the_same_expiry_as_its_turn_deadline_is_never_started() {
    let mut h = Host::new(json!({}));
    h.tool(json!({"name": "a", "timeoutMs": 100, "retry": {"maxRetries": 0}}), Behaviour::Hang);
    h.tool(json!({"name": "b"}), Behaviour::Hang);
    let options = TurnOptions { deadline_ms: Some(100), ..TurnOptions::default() };
    let turn = h.begin_with(json!([{"name": "a"}, {"name": "b"}]), Policy::default(), options);
    h.advance_clock(100); // a's limit and the turn's deadline at once: a's end would start b
    let results = h.results(turn);
    assert_eq!(results[1].error_kind, Some(ErrorKind::NotExecuted));
    assert_eq!(results[1].attempts, 0);
    assert_eq!(h.log.iter().filter(|(e, _)| *e == "start").count(), 1, "b was never handed to the host");
}

#[test]
fn a_value_still_crossing_is_neither_timed_out_nor_cancelled() {
    let mut h = Host::new(json!({}));
    h.tool(json!({"name": "big", "timeoutMs": 100}), Behaviour::Hang);
    let turn = h.begin(json!([{"name": "big"}]), Policy::default());
    let run = *h.running.keys().next().unwrap();
    // The handler returned; its value crosses in slices, and meanwhile the limit passes and the turn is cancelled.
    assert!(h.engine.hold(run));
    h.advance_clock(500);
    let step = h.engine.cancel(turn, "aborted by the caller", &[], h.now);
    assert!(step.abort.is_empty() && step.done.is_empty(), "nothing to stop: the handler has returned");
    let step = h.engine.complete(run, Outcome::Text("the value".into()), h.now);
    h.apply(step);
    let results = h.results(turn);
    assert_eq!(results[0].output, "the value");
    assert!(!h.engine.hold(run), "a run already over is not held");
}

#[test]
fn a_settlement_past_its_deadline_is_a_timeout_and_a_late_settlement() {
    // The host's loop was blocked (a handler computed for 300 ms): no deadline could fire until it settled.
    let mut h = Host::new(json!({}));
    h.tool(json!({"name": "cpu", "timeoutMs": 100}), Behaviour::Hang);
    h.tool(json!({"name": "quiet", "readOnly": true, "timeoutMs": 1000, "idleTimeoutMs": 50}), Behaviour::Hang);
    h.tool(json!({"name": "quick", "readOnly": true, "timeoutMs": 1000}), Behaviour::Hang);
    let step = h.engine.begin(&json!([{"name": "cpu"}, {"name": "quiet"}, {"name": "quick"}]).to_string(), &Policy::default(), &TurnOptions::default(), None, h.now).unwrap();
    let turn = step.turn.unwrap();
    let runs: Vec<u32> = step.start.iter().map(|s| s.run).collect();
    assert_eq!(runs.len(), 1, "cpu changes state: it runs alone first");
    let blocked = h.now + std::time::Duration::from_millis(300);
    let step = h.engine.complete(runs[0], Outcome::Text("done".into()), blocked);
    assert_eq!(step.late.len(), 1);
    assert_eq!((step.late[0].run, step.late[0].ended_by, step.late[0].outcome), (runs[0], ErrorKind::Timeout, "resolved"));
    assert!((step.late[0].after_ms - 200.0).abs() < 1.0, "{} ms past the deadline", step.late[0].after_ms);
    let reads: Vec<u32> = step.start.iter().map(|s| s.run).collect();
    assert_eq!(reads.len(), 2);
    let later = blocked + std::time::Duration::from_millis(80);
    let step = h.engine.complete(reads[0], Outcome::Thrown(json!({"message": "x"}).to_string()), later);
    assert_eq!((step.late[0].ended_by, step.late[0].outcome), (ErrorKind::IdleTimeout, "rejected"), "the idle limit passed first");
    let step = h.engine.complete(reads[1], Outcome::Text("in time".into()), later);
    h.apply(step);
    let results = h.results(turn);
    assert_eq!(results.iter().map(|r| r.error_kind).collect::<Vec<_>>(), [Some(ErrorKind::Timeout), Some(ErrorKind::IdleTimeout), None]);
    let counters = &h.engine.counters(h.now)["total"];
    assert_eq!((counters["lateSettlements"].as_u64(), counters["timeouts"].as_u64(), counters["idleTimeouts"].as_u64()), (Some(2), Some(1), Some(1)));
}

#[test]
fn the_hosts_timer_is_told_of_a_sooner_deadline_once_and_anew_after_each_expiry() {
    let mut h = Host::new(json!({}));
    h.tool(json!({"name": "slow", "timeoutMs": 500, "retry": {"maxRetries": 0}}), Behaviour::Hang);
    h.tool(json!({"name": "quick", "timeoutMs": 100, "retry": {"maxRetries": 0}}), Behaviour::Hang);
    assert_eq!(h.engine.host_timer(h.now), None, "nothing armed, nothing to wake for");
    h.begin(json!([{"name": "slow"}]), Policy::default());
    assert_eq!(h.engine.host_timer(h.now), Some(500.0));
    assert_eq!(h.engine.host_timer(h.now), None, "the timer armed for it stands");
    h.begin(json!([{"name": "slow"}]), Policy::default());
    assert_eq!(h.engine.host_timer(h.now), None, "a later deadline is found when the timer fires");
    h.now += std::time::Duration::from_micros(10_500);
    h.begin(json!([{"name": "quick"}]), Policy::default());
    assert_eq!(h.engine.host_timer(h.now), Some(100.0), "a sooner one is told at once");
    h.now += std::time::Duration::from_micros(50_250);
    let step = h.engine.expire(h.now);
    assert!(step.done.is_empty());
    assert_eq!(h.engine.host_timer(h.now), None, "a wake-up before the timer fires leaves it standing");
    h.now += std::time::Duration::from_micros(49_750);
    let step = h.engine.expire(h.now);
    assert_eq!(step.done.len(), 1, "the quick call timed out");
    assert_eq!(h.engine.host_timer(h.now), Some(390.0), "once it fired the next deadline is told anew, rounded up");
}

#[test]
fn a_host_timer_that_fires_before_its_deadline_is_told_the_deadline_again() {
    let mut h = Host::new(json!({}));
    h.tool(json!({"name": "hang", "timeoutMs": 30, "retry": {"maxRetries": 0}}), Behaviour::Hang);
    h.begin(json!([{"name": "hang"}]), Policy::default());
    assert_eq!(h.engine.host_timer(h.now), Some(30.0));
    // Node's timer ran on a loop clock read a moment before it was set: it fires at 29.6 ms.
    h.now += std::time::Duration::from_micros(29_600);
    h.engine.host_timer_fired();
    assert!(h.engine.expire(h.now).done.is_empty());
    assert_eq!(h.engine.host_timer(h.now), Some(1.0), "a timer for what is left of the deadline");
}

#[test]
fn a_deadline_further_than_a_host_timer_holds_is_told_in_parts() {
    let mut h = Host::new(json!({"maxTimeoutMs": 40 * 86_400_000u64}));
    h.tool(json!({"name": "long", "timeoutMs": 30 * 86_400_000u64, "retry": {"maxRetries": 0}}), Behaviour::Hang);
    h.begin(json!([{"name": "long"}]), Policy::default());
    let longest = f64::from((1u32 << 31) - 1);
    assert_eq!(h.engine.host_timer(h.now), Some(longest), "as long as a Node timer holds");
    h.now += std::time::Duration::from_millis(longest as u64);
    assert!(h.engine.expire(h.now).done.is_empty());
    assert_eq!(h.engine.host_timer(h.now), Some(30.0 * 86_400_000.0 - longest), "then the rest");
}
