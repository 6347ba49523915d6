//! Circuit breakers and budgets, with the memory store and over a shared store's tickets.

mod common;

use common::*;
use serde_json::{json, Value};
use toolgate_core::shared::Op;
use toolgate_core::{ErrorKind, HostKind, HostRequest, Outcome, Policy, ToolResult};

fn fails() -> Behaviour {
    Behaviour::Return(Outcome::Thrown(json!({"message": "backend down"}).to_string()))
}

fn calls(name: &str, n: usize) -> Value {
    Value::Array((0..n).map(|i| json!({"id": format!("c{i}"), "name": name, "input": {}})).collect())
}

/// Runs the calls one turn each, in order, and returns their results.
fn one_by_one(h: &mut Host, name: &str, n: usize, policy: &Policy) -> Vec<ToolResult> {
    (0..n)
        .map(|_| {
            let turn = h.begin(calls(name, 1), policy.clone());
            h.results(turn).remove(0)
        })
        .collect()
}

fn kinds(results: &[ToolResult]) -> Vec<Option<ErrorKind>> {
    results.iter().map(|r| r.error_kind).collect()
}

fn breaker_host(stores: Stores) -> Host {
    let mut h = Host::on(stores, json!({"defaultTimeoutMs": 1000}));
    // Calls fail 60% of the time (F F S F S), then two trials: S, then F.
    let script = vec![fails(), fails(), text("ok"), fails(), text("ok"), text("ok"), fails()];
    let breaker = json!({"failureRate": 0.5, "minCalls": 5, "windowMs": 10_000, "openMs": 1_000, "halfOpenCalls": 2});
    let parameters = json!({"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": false});
    h.tool_script(json!({"name": "flaky", "readOnly": true, "retry": {"maxRetries": 0}, "breaker": breaker, "parameters": parameters}), script);
    h
}

#[test]
fn a_breaker_opens_on_failures_refuses_while_open_and_half_opens_after_open_ms() {
    for_each_store(|stores| {
        let mut h = breaker_host(stores);
        let first = one_by_one(&mut h, "flaky", 4, &Policy::default());
        assert_eq!(kinds(&first), [Some(ErrorKind::HandlerError), Some(ErrorKind::HandlerError), None, Some(ErrorKind::HandlerError)]);
        assert_eq!(h.engine.counters(h.now)["tools"]["flaky"]["breaker"], "closed", "3 of 4 failed: fewer than minCalls");
        let fifth = one_by_one(&mut h, "flaky", 1, &Policy::default());
        assert!(fifth[0].success);
        assert_eq!(h.engine.counters(h.now)["tools"]["flaky"]["breaker"], "open", "3 of 5 failed: the fifth, a success, found the rate reached");
        let refused = one_by_one(&mut h, "flaky", 3, &Policy::default());
        assert_eq!(ran(&h, "flaky"), 5, "nothing ran while open");
        for r in &refused {
            assert_eq!((r.error_kind, r.retryable, r.retry_after_ms), (Some(ErrorKind::Unavailable), true, Some(1_000)));
            assert!(r.output.contains("Tool \"flaky\" is unavailable: too many of its recent calls failed"), "{}", r.output);
            assert_eq!(r.metadata.stages.last().map(|m| (m.station, m.outcome)), Some(("breaker", "open")));
        }
        assert_eq!(h.engine.counters(h.now)["tools"]["flaky"]["breakerRefused"], 3);
        assert_eq!(h.engine.counters(h.now)["tools"]["flaky"]["breakerOpened"], 1);
        h.advance_clock(400);
        assert_eq!(one_by_one(&mut h, "flaky", 1, &Policy::default())[0].retry_after_ms, Some(600), "the wait left");
        h.advance_clock(600);
        assert_eq!(h.engine.counters(h.now)["tools"]["flaky"]["breaker"], "half_open");
        // Two trials at once (halfOpenCalls: 2); a third waits about a trial's time limit.
        let turn = h.begin(json!([{"name": "flaky"}, {"name": "flaky"}, {"name": "flaky"}]), Policy::default());
        let trials = h.results(turn);
        assert_eq!(kinds(&trials), [None, Some(ErrorKind::HandlerError), Some(ErrorKind::Unavailable)]);
        assert!(trials[2].output.contains("is being tried again with a trial call now"), "{}", trials[2].output);
        assert_eq!(h.engine.counters(h.now)["tools"]["flaky"]["breaker"], "open", "a failed trial reopens it");
        assert_eq!(h.engine.counters(h.now)["tools"]["flaky"]["breakerOpened"], 2);
    });
}

#[test]
fn successful_trials_close_the_breaker_and_invalid_calls_never_move_it() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({}));
        let breaker = json!({"failureRate": 0.5, "minCalls": 2, "openMs": 1_000, "halfOpenCalls": 2});
        let parameters = json!({"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": false});
        h.tool_script(json!({"name": "api", "retry": {"maxRetries": 0}, "breaker": breaker, "parameters": parameters}), vec![fails(), fails(), text("ok")]);
        // Invalid arguments, refused before they run: the breaker hears nothing of them.
        let invalid: Vec<Value> = (0..20).map(|i| json!({"id": format!("bad{i}"), "name": "api", "input": {"nope": 1}})).collect();
        let refused = h.run(Value::Array(invalid));
        assert!(refused.iter().all(|r| r.error_kind == Some(ErrorKind::InvalidArguments)));
        assert_eq!(h.engine.counters(h.now)["tools"]["api"]["breaker"], "closed");
        one_by_one(&mut h, "api", 2, &Policy::default());
        assert_eq!(h.engine.counters(h.now)["tools"]["api"]["breaker"], "open");
        h.advance_clock(1_000);
        let trials = one_by_one(&mut h, "api", 2, &Policy::default());
        assert!(trials.iter().all(|r| r.success));
        assert_eq!(h.engine.counters(h.now)["tools"]["api"]["breaker"], "closed", "two trials passed");
        let after = one_by_one(&mut h, "api", 3, &Policy::default());
        assert!(after.iter().all(|r| r.success), "closed again");
    });
}

#[test]
fn a_breaker_refusal_takes_no_token_and_a_trial_refused_a_token_gives_its_place_back() {
    for_each_store(|stores| {
        let breaker = json!({"minCalls": 1, "openMs": 1_000, "halfOpenCalls": 1});
        // Two tokens that do not refill: the first call takes one, the trial the other; refusals in between take none.
        let mut h = Host::on(stores, json!({}));
        let rate = json!({"capacity": 2, "refillPerSecond": 0.000_001});
        h.tool_script(json!({"name": "api", "retry": {"maxRetries": 0}, "breaker": breaker, "rateLimit": rate}), vec![fails(), text("ok")]);
        let first = one_by_one(&mut h, "api", 3, &Policy::default());
        assert_eq!(kinds(&first), [Some(ErrorKind::HandlerError), Some(ErrorKind::Unavailable), Some(ErrorKind::Unavailable)]);
        h.advance_clock(1_000);
        assert!(one_by_one(&mut h, "api", 1, &Policy::default())[0].success, "the trial found the second token");
        // One token every 2 s: half-open at 1 s, the trial finds none, does not start, and gives its place back.
        let mut h = Host::on(stores, json!({}));
        let rate = json!({"capacity": 1, "refillPerSecond": 0.5});
        h.tool_script(json!({"name": "api", "retry": {"maxRetries": 0}, "breaker": breaker, "rateLimit": rate}), vec![fails(), text("ok")]);
        one_by_one(&mut h, "api", 1, &Policy::default());
        h.advance_clock(1_000);
        assert_eq!(one_by_one(&mut h, "api", 1, &Policy::default())[0].error_kind, Some(ErrorKind::RateLimited));
        h.advance_clock(1_000);
        assert!(one_by_one(&mut h, "api", 1, &Policy::default())[0].success, "the trial place was free again");
        assert_eq!(h.engine.counters(h.now)["tools"]["api"]["breaker"], "closed");
    });
}

fn budget_host(stores: Stores, budget: Value) -> Host {
    let mut h = Host::on(stores, json!({"budget": budget}));
    h.tool(json!({"name": "search", "readOnly": true}), text("found"));
    h.tool(json!({"name": "summarize", "readOnly": true, "cost": 4}), text("short"));
    h
}

#[test]
fn the_101st_call_of_a_session_with_a_100_call_budget_is_refused_and_the_100_before_ran() {
    for_each_store(|stores| {
        let mut h = budget_host(stores, json!({"maxCalls": 100}));
        let turn = h.begin(calls("search", 60), session("s1"));
        assert!(h.results(turn).iter().all(|r| r.success));
        let turn = h.begin(calls("search", 41), session("s1"));
        let results = h.results(turn);
        assert!(results[..40].iter().all(|r| r.success));
        let last = &results[40];
        assert_eq!((last.error_kind, last.retryable), (Some(ErrorKind::BudgetExceeded), false));
        assert!(last.output.contains("the call budget of session \"s1\" (the executor's maxCalls) is used up: 100 of 100 calls"), "{}", last.output);
        let note = last.metadata.budget.as_ref().unwrap();
        assert_eq!((note.budget, note.source, note.limit, note.used), ("maxCalls", "executor", 100.0, 100.0));
        assert_eq!(note.by.get("sessionId").map(String::as_str), Some("s1"));
        assert_eq!(ran(&h, "search"), 100);
        // Another session has its own budget.
        let other = h.begin(calls("search", 5), session("s2"));
        assert!(h.results(other).iter().all(|r| r.success));
        assert_eq!(h.engine.counters(h.now)["tools"]["search"]["budgetExceeded"], 1);
    });
}

#[test]
fn a_cost_budget_refuses_the_call_that_would_pass_it() {
    for_each_store(|stores| {
        let mut h = budget_host(stores, json!({"maxCost": 10}));
        let results = h.run(json!([{"name": "summarize"}, {"name": "search"}, {"name": "summarize"}, {"name": "summarize"}, {"name": "search"}]));
        assert_eq!(kinds(&results), [None, None, None, Some(ErrorKind::BudgetExceeded), None], "4 + 0 + 4 = 8; 4 more would be 12; a free call fits");
        assert!(results[3].output.contains("this call costs 4, and 8 of the cost budget of the calls without a sessionId (they share one budget) (the executor's maxCost: 10) is spent"), "{}", results[3].output);
        assert_eq!(results[3].metadata.budget.as_ref().unwrap().cost, Some(4.0));
    });
}

#[test]
fn per_turn_tool_and_context_budgets_hold_together() {
    for_each_store(|stores| {
        let mut h = budget_host(stores, json!({"maxCallsPerTurn": 3}));
        h.tool(json!({"name": "fetch", "readOnly": true, "budget": {"maxCalls": 2}}), text("page"));
        let turn = h.begin(json!([{"name": "search"}, {"name": "fetch"}, {"name": "fetch"}, {"name": "search"}]), session("s"));
        let results = h.results(turn);
        assert_eq!(kinds(&results), [None, None, None, Some(ErrorKind::BudgetExceeded)]);
        assert!(results[3].output.contains("the executor's budget of 3 calls per turn is used up (3 ran in this turn)"), "{}", results[3].output);
        let turn = h.begin(json!([{"name": "fetch"}, {"name": "search"}]), session("s"));
        let results = h.results(turn);
        assert_eq!(kinds(&results), [Some(ErrorKind::BudgetExceeded), None], "the tool's own budget of 2, per session");
        assert!(results[0].output.contains("the call budget of session \"s\" (this tool's maxCalls) is used up: 2 of 2 calls. Do not call \"fetch\" again"), "{}", results[0].output);
        // The context's budget, keyed by user: two sessions of one user share it.
        let by_user = |s: &str| {
            let mut p = session(s);
            p.fields.insert("userId".into(), "u1".into());
            p.budget = Some(serde_json::from_value(json!({"maxCalls": 2, "by": "userId"})).unwrap());
            p
        };
        let a = h.begin(json!([{"name": "search"}]), by_user("a"));
        let b = h.begin(json!([{"name": "search"}, {"name": "search"}]), by_user("b"));
        assert!(h.results(a)[0].success);
        let results = h.results(b);
        assert_eq!(kinds(&results), [None, Some(ErrorKind::BudgetExceeded)]);
        assert!(results[1].output.contains("the call budget of userId \"u1\" (the context's maxCalls)"), "{}", results[1].output);
    });
}

#[test]
fn a_window_budget_starts_over_with_the_next_window() {
    for_each_store(|stores| {
        let mut h = budget_host(stores, json!({"maxCallsPerWindow": {"calls": 2, "windowMs": 60_000}}));
        let results = one_by_one(&mut h, "search", 3, &session("s"));
        assert_eq!(kinds(&results), [None, None, Some(ErrorKind::BudgetExceeded)]);
        let wait = results[2].retry_after_ms.expect("when the window starts over");
        assert!(wait > 0 && wait <= 60_000, "{wait}");
        h.advance_clock(wait);
        assert!(one_by_one(&mut h, "search", 1, &session("s"))[0].success, "a new window");
    });
}

#[test]
fn calls_that_never_run_give_their_budget_back_and_running_ones_are_untouched() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({"budget": {"maxCalls": 2}}));
        h.tool(json!({"name": "api", "readOnly": true, "rateLimit": "1/min"}), text("ok"));
        h.tool(json!({"name": "slow", "readOnly": true, "timeoutMs": 100, "retry": {"maxRetries": 0}}), Behaviour::Hang);
        let results = one_by_one(&mut h, "api", 2, &session("s"));
        assert_eq!(kinds(&results), [None, Some(ErrorKind::RateLimited)], "refused a token: it did not run");
        // The budget has one call left, not none: the slow call runs (and its timeout still counts: it ran).
        let turn = h.begin(calls("slow", 1), session("s"));
        h.advance_clock(100);
        assert_eq!(h.results(turn)[0].error_kind, Some(ErrorKind::Timeout));
        assert_eq!(one_by_one(&mut h, "slow", 1, &session("s"))[0].error_kind, Some(ErrorKind::BudgetExceeded));
    });
}

#[test]
fn a_cost_function_is_asked_only_under_a_cost_budget_and_its_failure_fails_the_call() {
    for_each_store(|stores| {
        fn costs(request: &HostRequest) -> String {
            match (request.kind, request.args["pages"].as_f64()) {
                (HostKind::Cost, Some(pages)) => json!({"cost": pages}).to_string(),
                (HostKind::Cost, None) => json!({"error": "pages is missing"}).to_string(),
                _ => no_callback(request),
            }
        }
        let mut h = Host::on(stores, json!({}));
        h.answer = Some(costs);
        h.tool(json!({"name": "print", "readOnly": true, "cost": "host"}), text("printed"));
        let mut asked = Host::on(stores, json!({"budget": {"maxCost": 10}}));
        asked.answer = Some(costs);
        asked.tool(json!({"name": "print", "readOnly": true, "cost": "host"}), text("printed"));
        assert!(h.run(json!([{"name": "print", "input": {}}]))[0].success, "no cost budget: the cost is not asked");
        let results = asked.run(json!([{"name": "print", "input": {"pages": 6}}, {"name": "print", "input": {"pages": 5}}, {"name": "print", "input": {}}]));
        assert_eq!(kinds(&results), [None, Some(ErrorKind::BudgetExceeded), Some(ErrorKind::HandlerError)]);
        assert!(results[2].output.contains("its cost could not be computed (pages is missing)"), "{}", results[2].output);
        assert!(results[0].metadata.stages.iter().any(|m| (m.station, m.outcome) == ("cost", "ok")));
    });
}

// ── Over a shared store ────────────────────────────────────────────────────────────────────────────────────────

fn shared_host(extra: Value) -> Host {
    let mut options = json!({"store": {"timeoutMs": 50}});
    options.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    Host::new(options)
}

/// Answers the oldest ticket with `replies` (JSON values); returns its operations.
fn answer(h: &mut Host, replies: Value) -> Vec<Op> {
    let (ticket, ops) = h.store.remove(0);
    let step = h.engine.answer_store(ticket, &replies.to_string(), h.now);
    h.apply(step);
    ops
}

#[test]
fn a_shared_budget_spends_in_the_calls_ticket_and_a_refused_call_gives_back_what_it_took() {
    let mut h = shared_host(json!({"budget": {"maxCalls": 100, "maxCost": 10}}));
    h.tool(json!({"name": "api", "readOnly": true, "rateLimit": "5/s", "cost": 2, "dedup": "off"}), text("ran"));
    let turn = h.begin(calls("api", 1), session("s"));
    let ops = answer(&mut h, json!([{"spent": "ok", "used": 1, "window": 0}, {"spent": "ok", "used": 2}, {"take": "now"}]));
    assert!(matches!(&ops[0], Op::Spend { amount, limit, window_ms: None, .. } if *amount == 1.0 && *limit == 100.0));
    assert!(matches!(&ops[1], Op::Spend { amount, limit, .. } if *amount == 2.0 && *limit == 10.0));
    assert!(matches!(&ops[2], Op::Take { .. }));
    assert!(h.results(turn)[0].success);
    // The cost budget is used up elsewhere: the call is refused, its call count and token go back.
    let turn = h.begin(calls("api", 1), session("s"));
    answer(&mut h, json!([{"spent": "ok", "used": 2}, {"spent": "over", "used": 9}, {"take": "now"}]));
    let r = &h.results(turn)[0];
    assert_eq!(r.error_kind, Some(ErrorKind::BudgetExceeded));
    assert!(r.output.contains("and 9 of the cost budget of session \"s\" (the executor's maxCost: 10) is spent"), "{}", r.output);
    let (_, back) = h.store.remove(0);
    let names: Vec<&str> = back.iter().map(server::name).collect();
    assert_eq!(names, ["refund", "unspend"], "the token and the call count the refused call took");
}

#[test]
fn a_budget_fails_closed_when_the_store_is_down() {
    let mut h = shared_host(json!({"budget": {"maxCalls": 5}}));
    h.tool(json!({"name": "api", "readOnly": true, "dedup": "off"}), text("ran"));
    let turn = h.begin(calls("api", 1), session("s"));
    answer(&mut h, json!([{"error": "ECONNREFUSED"}]));
    let r = &h.results(turn)[0];
    assert_eq!(r.error_kind, Some(ErrorKind::Unavailable));
    assert!(r.output.contains("the shared store its budget needs is unavailable (ECONNREFUSED)"), "{}", r.output);
    assert!(h.log.is_empty());
}

#[test]
fn a_shared_breaker_costs_no_round_trip_while_closed_and_asks_the_store_once_it_opened() {
    let mut h = shared_host(json!({}));
    let breaker = json!({"minCalls": 2, "openMs": 1_000, "halfOpenCalls": 1});
    h.tool_script(json!({"name": "api", "readOnly": true, "retry": {"maxRetries": 0}, "breaker": breaker}), vec![fails(), text("ok")]);
    let turn = h.begin(calls("api", 1), Policy::default());
    assert_eq!(h.results(turn)[0].error_kind, Some(ErrorKind::HandlerError), "ran at once: no ticket before");
    let ops = answer(&mut h, json!([{"phase": "closed"}]));
    assert!(matches!(&ops[0], Op::BreakerRecord { admission: "counted", outcome: "failure", .. }));
    // Another process's failure opened it: this record's answer says so.
    let turn = h.begin(calls("api", 1), Policy::default());
    h.results(turn);
    answer(&mut h, json!([{"phase": "open", "from": "closed", "waitMs": 1000, "calls": 4, "failures": 3}]));
    assert_eq!(h.engine.counters(h.now)["tools"]["api"]["breaker"], "open");
    assert_eq!(h.engine.counters(h.now)["tools"]["api"]["breakerOpened"], 1);
    let turn = h.begin(calls("api", 1), Policy::default());
    assert_eq!(h.results(turn)[0].error_kind, Some(ErrorKind::Unavailable), "refused here, with no round trip");
    assert!(h.store.is_empty());
    h.advance_clock(1_000);
    let turn = h.begin(calls("api", 1), Policy::default());
    let ops = answer(&mut h, json!([{"admit": "trial", "generation": 7, "phase": "half_open", "from": "open"}]));
    assert!(matches!(&ops[0], Op::BreakerAdmit { half_open_calls: 1, .. }));
    assert!(h.results(turn)[0].success);
    let ops = answer(&mut h, json!([{"phase": "closed", "from": "half_open"}]));
    assert!(matches!(&ops[0], Op::BreakerRecord { admission: "trial", generation: 7, outcome: "success", .. }));
    assert_eq!(h.engine.counters(h.now)["tools"]["api"]["breaker"], "closed");
}

#[test]
fn a_shared_breaker_reply_no_breaker_could_give_never_keeps_the_tool_from_running() {
    let mut h = shared_host(json!({}));
    let breaker = json!({"minCalls": 2, "openMs": 1_000, "halfOpenCalls": 1});
    h.tool(json!({"name": "api", "readOnly": true, "timeoutMs": 5_000, "retry": {"maxRetries": 0}, "breaker": breaker}), text("ok"));
    let turn = h.begin(calls("api", 1), Policy::default());
    assert!(h.results(turn)[0].success);
    // Garbage in the store: an opening past a century, which no setting gives.
    answer(&mut h, json!([{"phase": "open", "from": "closed", "waitMs": 1e15, "calls": 2, "failures": 2}]));
    assert_eq!(h.engine.counters(h.now)["tools"]["api"]["breaker"], "closed", "not kept as this process's view");
    assert_eq!(h.engine.counters(h.now)["tools"]["api"]["breakerOpened"], 0);
    let turn = h.begin(calls("api", 1), Policy::default());
    assert!(h.results(turn)[0].success, "run at once, with no round trip before it");
    let ops = answer(&mut h, json!([{"phase": "open", "from": "closed", "waitMs": 1_000, "calls": 2, "failures": 2}]));
    assert!(matches!(&ops[0], Op::BreakerRecord { admission: "counted", .. }));
    assert_eq!(h.engine.counters(h.now)["tools"]["api"]["breaker"], "open", "a real opening is kept");
    h.advance_clock(1_000);
    // Asked before each call now: answers no breaker gives let the call through, counted.
    for garbage in [
        json!({"admit": "refused", "phase": "open", "waitMs": 1e15, "generation": 1}),
        json!({"admit": "refused", "phase": "half_open", "waitMs": -5, "generation": 1}),
        json!({"admit": "trial", "phase": "closed", "generation": 1}),
        json!({"admit": "refused", "phase": "stuck", "waitMs": 10}),
        json!({"admit": "maybe", "phase": "half_open", "generation": 1}),
    ] {
        let turn = h.begin(calls("api", 1), Policy::default());
        let ops = answer(&mut h, json!([garbage.clone()]));
        assert!(matches!(&ops[0], Op::BreakerAdmit { half_open_calls: 1, .. }), "{ops:?}");
        assert!(h.results(turn)[0].success, "{garbage}");
        // Half-open for the next one (another process's trial is out): it asks again.
        let ops = answer(&mut h, json!([{"phase": "half_open"}]));
        assert!(matches!(&ops[0], Op::BreakerRecord { admission: "counted", outcome: "success", .. }), "{garbage}: {ops:?}");
    }
    // Another process's settings are its own: its week-long opening is an opening here too.
    let turn = h.begin(calls("api", 1), Policy::default());
    answer(&mut h, json!([{"admit": "refused", "phase": "open", "waitMs": 604_800_000.0, "generation": 2}]));
    assert_eq!(h.results(turn)[0].error_kind, Some(ErrorKind::Unavailable));
}

#[test]
fn a_tool_registered_again_is_held_to_its_new_budget() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({}));
        h.tool(json!({"name": "api", "budget": {"maxCalls": 1}}), text("ok"));
        assert_eq!(kinds(&one_by_one(&mut h, "api", 2, &session("s"))), [None, Some(ErrorKind::BudgetExceeded)]);
        h.tool(json!({"name": "api", "replace": true, "budget": {"maxCalls": 3}}), text("ok"));
        assert_eq!(kinds(&one_by_one(&mut h, "api", 3, &session("s"))), [None, None, Some(ErrorKind::BudgetExceeded)], "1 of 3 used before");
    });
}

#[test]
fn inspect_shows_each_breaker_and_what_the_memory_store_holds_with_keys_redacted() {
    for_each_store(|stores| {
        let mut h = breaker_host(stores);
        h.tool(json!({"name": "api", "readOnly": true, "rateLimit": {"limit": "2/min", "key": "userId"}}), text("ok"));
        let user = |id: &str| {
            let mut p = session("s");
            p.fields.insert("userId".into(), id.into());
            p.budget = Some(serde_json::from_value(json!({"maxCalls": 5, "by": "userId"})).unwrap());
            p
        };
        let first = one_by_one(&mut h, "flaky", 4, &Policy::default());
        assert_eq!(first.iter().filter(|r| !r.success).count(), 3);
        let view = h.engine.inspect(h.now, 10);
        match stores {
            Stores::Memory => assert_eq!(view["breakers"]["flaky"], json!({"state": "closed", "calls": 4, "failures": 3}), "its window's counts"),
            Stores::Shared => assert_eq!(view["breakers"]["flaky"], json!({"state": "closed", "calls": 0, "failures": 0}), "as last heard"),
        }
        one_by_one(&mut h, "flaky", 1, &Policy::default());
        h.advance_clock(400);
        assert_eq!(h.engine.inspect(h.now, 10)["breakers"]["flaky"]["state"], "open");
        assert_eq!(h.engine.inspect(h.now, 10)["breakers"]["flaky"]["halfOpenInMs"], 600, "the wait before a trial");
        h.advance_clock(600);
        assert_eq!(h.engine.inspect(h.now, 10)["breakers"]["flaky"], json!({"state": "half_open", "calls": 0, "failures": 0}));
        let secret = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        h.tool(json!({"name": "keyed", "readOnly": true, "rateLimit": {"limit": "2/min", "key": "apiKey"}}), text("ok"));
        let mut keyed = Policy::default();
        keyed.fields.insert("apiKey".into(), "k7Qm29xLp0aZ".into());
        let turn = h.begin(json!([{"name": "keyed"}]), keyed);
        assert!(h.results(turn)[0].success);
        let turn = h.begin(json!([{"name": "api"}]), user(secret));
        assert!(h.results(turn)[0].success);
        let turn = h.begin(json!([{"name": "api"}, {"name": "api"}]), user("bo"));
        assert!(h.results(turn).iter().all(|r| r.success));
        let view = h.engine.inspect(h.now, 1);
        let text = view.to_string();
        assert!(!text.contains(secret), "keys are redacted: {text}");
        assert!(!h.engine.inspect(h.now, 10).to_string().contains("k7Qm29xLp0aZ"), "a secret-named field's value too");
        let mut spaced = Policy::default();
        spaced.fields.insert("apiKey".into(), "open sesame 42".into());
        spaced.budget = Some(serde_json::from_value(json!({"maxCalls": 5, "by": "apiKey"})).unwrap());
        let turn = h.begin(json!([{"name": "keyed"}]), spaced);
        assert!(h.results(turn)[0].success);
        let shown = h.engine.inspect(h.now, 10).to_string();
        assert!(!shown.contains("sesame"), "whole, whatever it holds, as a trace redacts it: {shown}");
        if stores == Stores::Memory {
            assert!(shown.contains("keyed · apiKey=[REDACTED:secret-field]") && shown.contains("calls · * · apiKey=[REDACTED:secret-field]"), "{shown}");
        }
        match stores {
            Stores::Memory => {
                assert_eq!(view["store"], "memory");
                let memory = &view["memory"];
                assert_eq!((memory["bucketCount"].as_u64(), memory["budgetCount"].as_u64()), (Some(3), Some(2)), "{memory}");
                assert_eq!(memory["buckets"].as_array().unwrap().len(), 1, "at most the limit");
                assert_eq!(memory["buckets"][0]["tokens"], 0.0, "the emptiest first: bo's");
                assert_eq!(memory["buckets"][0]["key"], "api · userId=bo", "the tool and the field the bucket is split by");
                assert_eq!(memory["budgets"][0]["used"], 2.0, "the most used first");
                assert!(memory["budgets"][0]["expiresInMs"].as_u64().unwrap() > 0);
            }
            Stores::Shared => {
                assert_eq!(view["store"], "shared");
                assert!(view.get("memory").is_none(), "a shared store keeps its own");
            }
        }
    });
}
