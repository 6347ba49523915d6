//! What the stations remember, held to one behaviour whichever store keeps it: the scenarios run on the memory store
//! and on a shared store whose server answers the tickets; then two processes sharing one store, where what one
//! remembers decides for the other.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};
use toolgate_core::{ErrorKind, HostAnswer, Outcome, Policy, ToolResult};

fn one(h: &mut Host, calls: Value, policy: Policy) -> ToolResult {
    let turn = h.begin(calls, policy);
    h.results(turn).remove(0)
}

/// Answers the one approval the host was asked.
fn approve(h: &mut Host, answer: Value) {
    assert_eq!(h.requests.len(), 1, "one approval asked");
    let request = h.requests.remove(0);
    let step = h.engine.answer(request.ticket, HostAnswer::from_json(&answer.to_string()).unwrap(), h.now);
    h.apply(step);
}

/// Ends the one handler running with `output`.
fn finish(h: &mut Host, output: &str) {
    let run = *h.running.keys().next().expect("a handler runs");
    h.running.clear();
    let step = h.engine.complete(run, Outcome::Text(output.into()), h.now);
    h.apply(step);
}

#[test]
fn an_approval_for_the_session_is_asked_once_in_that_session() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({}));
        h.answer = None;
        h.tool(json!({"name": "deploy", "needsApproval": true, "dedup": "off"}), text("deployed"));
        let turn = h.begin(json!([{"name": "deploy"}]), session("s"));
        approve(&mut h, json!({"decision": "approve", "remember": "session"}));
        assert_eq!(h.results(turn)[0].output, "deployed");
        let again = one(&mut h, json!([{"name": "deploy"}]), session("s"));
        assert!(h.requests.is_empty(), "not asked again in the session");
        assert!(again.metadata.permission.as_ref().unwrap().by.contains("approved"), "{:?}", again.metadata.permission);
        let turn = h.begin(json!([{"name": "deploy"}]), session("other"));
        approve(&mut h, json!({"decision": "deny", "reason": "not here"}));
        assert_eq!(h.results(turn)[0].error_kind, Some(ErrorKind::ApprovalDenied), "another session is asked");
        assert_eq!(ran(&h, "deploy"), 2);
    });
}

#[test]
fn flags_past_the_limit_of_consecutive_rollbacks_are_dropped_and_a_useful_result_starts_over() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({"maxConsecutiveRollbacks": 2}));
        h.tool_script(json!({"name": "probe", "readOnly": true, "dedup": "off", "rollbackWhen": {"emptyAt": ""}}), vec![
            text(""),
            text(""),
            text(""),
            text("found"),
            text(""),
        ]);
        let flagged: Vec<(bool, bool)> = (0..5)
            .map(|_| one(&mut h, json!([{"name": "probe"}]), session("s")))
            .map(|r| (r.rollback.is_some(), r.metadata.rollback_suppressed))
            .collect();
        assert_eq!(flagged, [(true, false), (true, false), (false, true), (false, false), (true, false)]);
    });
}

#[test]
fn a_session_counts_a_query_that_never_ran_once_it_runs() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({}));
        h.tool(json!({"name": "send", "dedup": "refuse", "rateLimit": "1/min"}), text("sent"));
        let results = h.run(json!([{"name": "send", "input": {"to": "a"}}, {"name": "send", "input": {"to": "b"}}]));
        assert_eq!(results[1].error_kind, Some(ErrorKind::RateLimited));
        h.advance_clock(60_000);
        let turn = h.begin(json!([{"name": "send", "input": {"to": "b"}}, {"name": "send", "input": {"to": "b"}}]), Policy::default());
        let results = h.results(turn);
        assert!(results[0].success, "b never ran before: not a repeat");
        assert_eq!(results[1].error_kind, Some(ErrorKind::RateLimited), "without a session, nothing is counted");
        let counted = one(&mut h, json!([{"name": "send", "input": {"to": "c"}}]), session("s"));
        assert_eq!(counted.error_kind, Some(ErrorKind::RateLimited));
        h.advance_clock(60_000);
        assert!(one(&mut h, json!([{"name": "send", "input": {"to": "c"}}]), session("s")).success, "refused a token, it was not counted");
        assert_eq!(one(&mut h, json!([{"name": "send", "input": {"to": "c"}}]), session("s")).error_kind, Some(ErrorKind::Duplicate));
    });
}

// ── The memory store's answers are taken as they are ───────────────────────────────────────────────────────────
// A shared store's answers are bounded as they are read (a wait past a week, an opening past a century is its
// garbage); the memory store's are exact, however long the limits make them, and its times are not rounded up to
// the millisecond a shared store is told at least.

const WEEK_MS: u64 = 7 * 24 * 3600 * 1000;

fn failing() -> Behaviour {
    Behaviour::Return(Outcome::Thrown(json!({"message": "down"}).to_string()))
}

#[test]
fn a_budget_window_longer_than_a_week_says_when_it_really_starts_over() {
    let month_ms: u64 = 30 * 24 * 3600 * 1000;
    let mut h = Host::new(json!({"budget": {"maxCallsPerWindow": {"calls": 1, "windowMs": month_ms}}}));
    h.tool(json!({"name": "search", "readOnly": true}), text("ok"));
    assert!(one(&mut h, json!([{"name": "search"}]), session("s")).success);
    let refused = one(&mut h, json!([{"name": "search"}]), session("s"));
    assert_eq!(refused.error_kind, Some(ErrorKind::BudgetExceeded));
    assert!(refused.retry_after_ms.unwrap() > WEEK_MS, "{:?}", refused.retry_after_ms);
}

#[test]
fn a_token_more_than_a_week_away_is_waited_for_and_told_whole() {
    let mut h = Host::new(json!({}));
    h.tool(json!({"name": "api", "rateLimit": {"capacity": 1, "refillPerSecond": 0.000_001}}), text("ok"));
    h.tool(json!({"name": "patient", "readOnly": true, "rateLimit": {"capacity": 1, "refillPerSecond": 0.000_001, "maxWaitMs": 2_000_000_000u64}}), text("ok"));
    assert!(one(&mut h, json!([{"name": "api"}]), Policy::default()).success);
    assert_eq!(one(&mut h, json!([{"name": "api"}]), Policy::default()).retry_after_ms, Some(1_000_000_000), "1e6 s to the next token");
    assert!(one(&mut h, json!([{"name": "patient"}]), Policy::default()).success);
    let turn = h.begin(json!([{"name": "patient"}]), Policy::default());
    h.advance_clock(WEEK_MS + 1);
    assert_eq!(ran(&h, "patient"), 1, "its token, reserved 1e6 s ahead, is not due a week in");
    h.advance_clock(1_000_000_000 - WEEK_MS);
    assert!(h.results(turn)[0].success);
}

#[test]
fn a_breaker_open_for_centuries_stays_open() {
    let mut h = Host::new(json!({}));
    h.tool(json!({"name": "api", "retry": {"maxRetries": 0}, "breaker": {"minCalls": 1, "openMs": 10_000_000_000_000u64}}), failing());
    assert_eq!(one(&mut h, json!([{"name": "api"}]), Policy::default()).error_kind, Some(ErrorKind::HandlerError));
    let stats = h.engine.counters(h.now);
    assert_eq!((&stats["tools"]["api"]["breaker"], &stats["tools"]["api"]["breakerOpened"]), (&json!("open"), &json!(1)));
    assert_eq!(one(&mut h, json!([{"name": "api"}]), Policy::default()).error_kind, Some(ErrorKind::Unavailable));
    assert_eq!(ran(&h, "api"), 1);
}

#[test]
fn a_session_kept_for_0_ms_remembers_nothing() {
    let mut h = Host::new(json!({"dedup": {"sessionTtlMs": 0, "policy": "refuse"}}));
    h.tool(json!({"name": "search", "readOnly": true}), text("ok"));
    let turn = h.begin(json!([{"name": "search", "input": {"q": 1}}, {"name": "search", "input": {"q": 1}}]), session("s"));
    assert!(h.results(turn).iter().all(|r| r.success), "the same query twice, and no repeat");
    let mut h = Host::new(json!({"dedup": {"sessionTtlMs": 0}, "budget": {"maxCalls": 1}}));
    h.tool(json!({"name": "search", "readOnly": true}), text("ok"));
    assert!(one(&mut h, json!([{"name": "search"}]), session("s")).success);
    h.advance_clock(1);
    assert!(one(&mut h, json!([{"name": "search"}]), session("s")).success, "its budget counter lasted 0 ms past its spending");
}

#[test]
fn the_breaker_stats_show_turns_half_open_on_the_stores_clock() {
    let mut h = Host::new(json!({}));
    h.tool(json!({"name": "api", "retry": {"maxRetries": 0}, "breaker": {"minCalls": 1, "openMs": 1000}}), failing());
    one(&mut h, json!([{"name": "api"}]), Policy::default());
    let half_open = |at: std::time::Instant| h.engine.counters(at)["tools"]["api"]["breaker"] == "half_open";
    // The store counts whole milliseconds: within the last one, it has already turned half-open.
    let last_ms: Vec<bool> = (1..1000).map(|us| half_open(h.now + Duration::from_millis(1000) - Duration::from_micros(us))).collect();
    assert!(last_ms.iter().any(|&h| h), "half-open within the last millisecond");
    assert!(!half_open(h.now + Duration::from_millis(998)));
}

// ── Two processes, one store ────────────────────────────────────────────────────────────────────────────────────

/// Two processes on one shared store, each with `tool` registered and answering `output`.
fn two_processes(options: Value, tool: Value, output: &str) -> (Host, Host) {
    let mut a = Host::on(Stores::Shared, options.clone());
    let mut b = a.beside(options);
    a.tool(tool.clone(), text(output));
    b.tool(tool, text(output));
    (a, b)
}

#[test]
fn a_result_one_process_cached_answers_the_other() {
    let (mut a, mut b) = two_processes(json!({}), json!({"name": "get", "idempotent": true}), "value");
    assert!(!a.run(json!([{"name": "get", "input": {"k": 1}}]))[0].cached);
    let r = &b.run(json!([{"name": "get", "input": {"k": 1}}]))[0];
    assert!(r.cached && r.output == "value");
    assert_eq!(ran(&b, "get"), 0);
    assert_eq!(b.invalidate("get", None), 1, "invalidated in the store");
    assert!(!a.run(json!([{"name": "get", "input": {"k": 1}}]))[0].cached);
}

#[test]
fn an_identical_call_waits_for_the_process_that_runs_it_and_shares_its_result() {
    let (mut a, mut b) = two_processes(json!({}), json!({"name": "get", "idempotent": true, "readOnly": true}), "unused");
    a.handlers.insert("get".into(), vec![Behaviour::Hang]);
    let first = a.begin(json!([{"name": "get"}]), Policy::default());
    let second = b.begin(json!([{"name": "get"}]), Policy::default());
    assert_eq!((ran(&a, "get"), ran(&b, "get")), (1, 0), "b waits: a holds the lease");
    finish(&mut a, "computed once");
    b.advance_clock(500);
    let r = &b.results(second)[0];
    assert_eq!(r.output, "computed once");
    assert!(r.cached);
    let cache: Vec<&str> = r.metadata.stages.iter().filter(|m| m.station == "cache").map(|m| m.outcome).collect();
    assert_eq!(cache, ["miss", "waits_elsewhere", "hit"]);
    assert_eq!(ran(&b, "get"), 0);
    assert!(a.results(first)[0].success);
}

#[test]
fn a_rate_limit_holds_across_processes() {
    let (mut a, mut b) = two_processes(json!({}), json!({"name": "api", "rateLimit": "2/min"}), "ok");
    assert!(a.run(json!([{"name": "api"}, {"name": "api"}])).iter().all(|r| r.success));
    let r = &b.run(json!([{"name": "api"}]))[0];
    assert_eq!(r.error_kind, Some(ErrorKind::RateLimited), "a took the bucket's two tokens");
    b.advance_clock(30_000);
    a.now = b.now;
    assert!(b.run(json!([{"name": "api"}]))[0].success, "one refilled");
}

#[test]
fn a_sessions_budget_and_its_repeats_hold_across_processes() {
    let (mut a, mut b) = two_processes(json!({"budget": {"maxCalls": 3}}), json!({"name": "send", "dedup": "refuse"}), "sent");
    assert!(one(&mut a, json!([{"name": "send", "input": {"to": "x"}}]), session("s")).success);
    let r = one(&mut b, json!([{"name": "send", "input": {"to": "x"}}]), session("s"));
    assert_eq!(r.error_kind, Some(ErrorKind::Duplicate), "a ran it in this session");
    assert!(one(&mut b, json!([{"name": "send", "input": {"to": "y"}}]), session("s")).success);
    assert!(one(&mut a, json!([{"name": "send", "input": {"to": "z"}}]), session("s")).success);
    let r = one(&mut b, json!([{"name": "send", "input": {"to": "w"}}]), session("s"));
    assert_eq!(r.error_kind, Some(ErrorKind::BudgetExceeded), "three calls ran in the session, in either process");
}

#[test]
fn a_breaker_one_process_opened_refuses_the_other_once_it_hears() {
    let breaker = json!({"minCalls": 2, "failureRate": 0.5, "openMs": 1_000});
    let tool = json!({"name": "api", "retry": {"maxRetries": 0}, "breaker": breaker});
    let (mut a, mut b) = two_processes(json!({}), tool, "ok");
    a.handlers.insert("api".into(), vec![Behaviour::Return(Outcome::Thrown(json!({"message": "down"}).to_string()))]);
    assert!(a.run(json!([{"name": "api"}, {"name": "api"}])).iter().all(|r| r.error_kind == Some(ErrorKind::HandlerError)));
    assert_eq!(a.engine.counters(a.now)["tools"]["api"]["breaker"], "open");
    assert!(b.run(json!([{"name": "api"}]))[0].success, "b knew it closed: it ran, and its outcome's answer says open");
    assert_eq!(b.engine.counters(b.now)["tools"]["api"]["breaker"], "open");
    assert_eq!(b.run(json!([{"name": "api"}]))[0].error_kind, Some(ErrorKind::Unavailable));
}

#[test]
fn an_approval_for_the_session_in_one_process_holds_in_the_other() {
    let (mut a, mut b) = two_processes(json!({}), json!({"name": "deploy", "needsApproval": true, "dedup": "off"}), "deployed");
    a.answer = None;
    let turn = a.begin(json!([{"name": "deploy"}]), session("s"));
    approve(&mut a, json!({"decision": "approve", "remember": "session"}));
    assert!(a.results(turn)[0].success);
    // b's own callback denies: it is not asked.
    assert!(one(&mut b, json!([{"name": "deploy"}]), session("s")).success);
    assert_eq!(one(&mut b, json!([{"name": "deploy"}]), session("t")).error_kind, Some(ErrorKind::ApprovalDenied));
}

#[test]
fn consecutive_rollbacks_count_across_processes() {
    let tool = json!({"name": "probe", "readOnly": true, "dedup": "off", "rollbackWhen": {"emptyAt": ""}});
    let (mut a, mut b) = two_processes(json!({"maxConsecutiveRollbacks": 2}), tool, "");
    assert!(one(&mut a, json!([{"name": "probe"}]), session("s")).rollback.is_some());
    assert!(one(&mut b, json!([{"name": "probe"}]), session("s")).rollback.is_some());
    let third = one(&mut a, json!([{"name": "probe"}]), session("s"));
    assert!(third.rollback.is_none() && third.metadata.rollback_suppressed, "the third in a row, counted in both");
}
