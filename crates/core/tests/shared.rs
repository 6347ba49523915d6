//! The engine over a shared store, driven through its tickets with scripted replies: what each call asks, how it
//! resumes, and what it gives back when it will not use what it took.

mod common;

use common::*;
use serde_json::{json, Value};
use toolgate_core::shared::Op;
use toolgate_core::{ErrorKind, Policy};

fn shared_host(on_error: Value) -> Host {
    Host::new(json!({"store": {"timeoutMs": 50, "onError": on_error}}))
}

/// Answers the oldest ticket with `replies` (JSON values); returns its operations.
fn answer(h: &mut Host, replies: Value) -> Vec<Op> {
    let (ticket, ops) = h.store.remove(0);
    let step = h.engine.answer_store(ticket, &replies.to_string(), h.now);
    h.apply(step);
    ops
}

fn op_names(ops: &[Op]) -> Vec<&'static str> {
    ops.iter().map(server::name).collect()
}

#[test]
fn a_call_needing_nothing_shared_never_asks_the_store() {
    let mut h = shared_host(json!({}));
    h.tool(json!({"name": "plain"}), text("p"));
    let results = h.run(json!([{"name": "plain"}, {"name": "missing"}]));
    assert!(results[0].success);
    assert_eq!(results[1].error_kind, Some(ErrorKind::UnknownTool));
    assert!(h.store.is_empty());
}

#[test]
fn one_ticket_carries_a_calls_count_and_lookup_and_a_hit_takes_no_token() {
    let mut h = shared_host(json!({}));
    h.tool(json!({"name": "get", "idempotent": true, "readOnly": true, "rateLimit": "5/s", "dedup": "note"}), text("fresh"));
    let turn = h.begin(json!([{"name": "get"}]), session("s"));
    assert_eq!(h.store.len(), 1, "one ticket for the call");
    let kept = "{\"truncated\":false}\nfrom the store";
    let ops = answer(&mut h, json!([{"earlier": 0}, {"value": kept}]));
    assert_eq!(op_names(&ops), ["count", "lookup"]);
    let r = &h.results(turn)[0];
    assert!(r.cached && r.output == "from the store");
    assert!(h.log.is_empty(), "no handler ran");
    assert!(h.store.is_empty(), "no token was taken, none goes back");
}

#[test]
fn a_limited_call_nothing_can_answer_takes_its_tokens_in_its_one_ticket() {
    let mut h = shared_host(json!({}));
    h.tool(json!({"name": "api", "readOnly": true, "rateLimit": "5/s", "dedup": "note"}), text("ran"));
    let turn = h.begin(json!([{"name": "api"}]), session("s"));
    let ops = answer(&mut h, json!([{"earlier": 0}, {"take": "now"}]));
    assert_eq!(op_names(&ops), ["count", "take"]);
    assert_eq!(h.results(turn)[0].output, "ran");
}

#[test]
fn a_miss_takes_its_tokens_once_it_is_known_to_run() {
    let mut h = shared_host(json!({}));
    h.tool(json!({"name": "get", "idempotent": true, "rateLimit": "5/s"}), text("ran"));
    let turn = h.begin(json!([{"name": "get"}]), Policy::default());
    assert_eq!(op_names(&answer(&mut h, json!([{"value": null, "lease": "taken"}]))), ["lookup"]);
    assert_eq!(op_names(&answer(&mut h, json!([{"take": "now"}]))), ["take"]);
    assert_eq!(h.results(turn)[0].output, "ran");
}

#[test]
fn a_miss_runs_under_the_lease_and_keeps_the_result_with_the_lease_let_go() {
    let mut h = shared_host(json!({}));
    h.tool(json!({"name": "get", "idempotent": true}), text("ran"));
    let turn = h.begin(json!([{"name": "get"}]), Policy::default());
    let ops = answer(&mut h, json!([{"value": null, "lease": "taken"}]));
    let Op::Lookup { owner: Some(owner), lease_ms: Some(lease_ms), .. } = &ops[0] else { panic!("{ops:?}") };
    assert!(*lease_ms > 30_000, "at least the call's own limit");
    assert_eq!(h.results(turn)[0].output, "ran");
    let (_, effects) = h.store.remove(0);
    match &effects[..] {
        [Op::Put { value, owner: Some(put_owner), .. }] => {
            assert!(value.ends_with("\nran"));
            assert_eq!(put_owner, owner, "the put lets the lease go");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_lease_held_elsewhere_is_polled_until_the_entry_appears() {
    let mut h = shared_host(json!({}));
    h.tool(json!({"name": "get", "idempotent": true}), text("ran here"));
    let turn = h.begin(json!([{"name": "get"}]), Policy::default());
    answer(&mut h, json!([{"value": null, "lease": "held", "leaseLeftMs": 1000}]));
    assert!(h.store.is_empty());
    h.advance_clock(5);
    let ops = answer(&mut h, json!([{"value": null, "lease": "held", "leaseLeftMs": 990}]));
    assert_eq!(op_names(&ops), ["lookup"]);
    h.advance_clock(10);
    answer(&mut h, json!([{"value": "{\"truncated\":false}\nran there"}]));
    let r = &h.results(turn)[0];
    assert_eq!((r.output.as_str(), r.cached), ("ran there", true));
    assert!(h.log.is_empty());
}

#[test]
fn a_lease_that_comes_free_is_taken_over_and_the_call_runs_after_its_tokens() {
    let mut h = shared_host(json!({}));
    h.tool(json!({"name": "get", "idempotent": true, "rateLimit": "5/s"}), text("took over"));
    let turn = h.begin(json!([{"name": "get"}]), Policy::default());
    answer(&mut h, json!([{"value": null, "lease": "held", "leaseLeftMs": 3}]));
    assert!(h.store.is_empty(), "a waiter takes no token");
    h.advance_clock(5);
    answer(&mut h, json!([{"value": null, "lease": "taken"}]));
    let ops = answer(&mut h, json!([{"take": "now"}]));
    assert_eq!(op_names(&ops), ["take"]);
    assert_eq!(h.results(turn)[0].output, "took over");
}

#[test]
fn a_store_that_does_not_answer_fails_each_station_as_configured_and_a_late_answer_is_cleaned_up() {
    let mut h = shared_host(json!({}));
    h.tool(json!({"name": "get", "readOnly": true, "idempotent": true}), text("ran anyway"));
    h.tool(json!({"name": "api", "readOnly": true, "rateLimit": "5/s"}), text("never"));
    let turn = h.begin(json!([{"name": "get"}, {"name": "api"}]), Policy::default());
    let late = h.store.clone();
    h.store.clear();
    h.advance_clock(50);
    let results = h.results(turn);
    assert!(results[0].success, "the cache fails open");
    assert_eq!(results[0].metadata.store, Some("unavailable"));
    assert!(results[0].metadata.store_error.as_deref().unwrap().contains("no answer within 50 ms"));
    assert_eq!(results[1].error_kind, Some(ErrorKind::RateLimited), "the rate limit fails closed");
    assert_eq!(results[1].retry_after_ms, Some(1000));
    assert!(results[1].output.starts_with("Error (rate_limited): Tool \"api\" was not run: the shared store"), "{}", results[1].output);
    assert_eq!(h.engine.counters(h.now)["store"]["timeouts"], 2);
    h.store.clear();
    // The lease and the token the store did take, answered late, go back.
    for ((ticket, _), reply) in late.into_iter().zip([json!([{"value": null, "lease": "taken"}]), json!([{"take": "now"}])]) {
        let step = h.engine.answer_store(ticket, &reply.to_string(), h.now);
        h.apply(step);
    }
    let effects: Vec<&'static str> = h.store.iter().flat_map(|(_, ops)| op_names(ops)).collect();
    assert_eq!(effects, ["release", "refund"]);
}

#[test]
fn closed_stations_answer_unavailable_and_a_reply_error_counts() {
    let mut h = shared_host(json!({"cache": "closed", "dedup": "closed"}));
    h.tool(json!({"name": "get", "idempotent": true}), text("never"));
    let turn = h.begin(json!([{"name": "get"}]), session("s"));
    answer(&mut h, json!([{"error": "READONLY"}, {"error": "READONLY"}]));
    let r = &h.results(turn)[0];
    assert_eq!(r.error_kind, Some(ErrorKind::Unavailable));
    assert!(r.retryable);
    assert!(r.error.as_deref().unwrap().contains("READONLY"));
    assert!(h.log.is_empty());
    assert_eq!(h.engine.counters(h.now)["store"]["errors"], 2);
}

#[test]
fn a_call_cancelled_while_it_waits_on_the_store_gives_back_its_count_and_lease() {
    let mut h = shared_host(json!({}));
    h.tool(json!({"name": "get", "idempotent": true, "readOnly": true, "rateLimit": "5/s", "dedup": "note"}), text("never"));
    let turn = h.begin(json!([{"name": "get"}]), session("s"));
    let step = h.engine.cancel(turn, "the user stopped", &[], h.now);
    h.apply(step);
    assert_eq!(h.results(turn)[0].error_kind, Some(ErrorKind::Cancelled));
    answer(&mut h, json!([{"earlier": 0}, {"value": null, "lease": "taken"}]));
    let effects: Vec<&'static str> = h.store.iter().flat_map(|(_, ops)| op_names(ops)).collect();
    assert_eq!(effects, ["uncount", "release"]);
}

#[test]
fn identical_calls_of_one_process_share_one_lookup() {
    let mut h = shared_host(json!({}));
    h.tool(json!({"name": "get", "idempotent": true, "readOnly": true}), text("once"));
    let turn = h.begin(json!([{"id": "a", "name": "get"}, {"id": "b", "name": "get"}]), Policy::default());
    assert_eq!(h.store.len(), 1, "the second call joined the first's flight");
    answer(&mut h, json!([{"value": null, "lease": "taken"}]));
    let results = h.results(turn);
    assert_eq!((results[0].output.as_str(), results[1].output.as_str()), ("once", "once"));
    assert!(results[1].metadata.shared_flight);
    assert_eq!(h.log.iter().filter(|(e, _)| *e == "start").count(), 1);
}

#[test]
fn a_remembered_approval_is_asked_of_the_store_before_the_callback() {
    let mut h = shared_host(json!({}));
    h.answer = None;
    h.tool(json!({"name": "deploy", "needsApproval": true}), text("deployed"));
    let turn = h.begin(json!([{"name": "deploy"}]), session("s"));
    let ops = answer(&mut h, json!([{"remembered": true}]));
    assert_eq!(op_names(&ops), ["remembered"]);
    assert!(h.requests.is_empty(), "the approval callback was not asked");
    // Then dedup (its default policy notes repeats) counts the call in the session.
    assert_eq!(op_names(&answer(&mut h, json!([{"earlier": 0}]))), ["count"]);
    let r = &h.results(turn)[0];
    assert_eq!(r.output, "deployed");
    assert!(r.metadata.permission.as_ref().unwrap().by.contains("approved earlier in this session"));
}


#[test]
fn a_waiter_taking_over_a_failed_flight_asks_for_the_lease_before_it_runs() {
    let mut h = shared_host(json!({}));
    h.tool(json!({"name": "get", "idempotent": true, "readOnly": true}), Behaviour::Hang);
    let first = h.begin(json!([{"id": "a", "name": "get"}]), Policy::default());
    let Op::Lookup { owner: Some(owner), .. } = answer(&mut h, json!([{"value": null, "lease": "taken"}])).remove(0) else { panic!() };
    let second = h.begin(json!([{"id": "b", "name": "get"}]), Policy::default());
    assert!(h.store.is_empty(), "b joined a's flight");
    let step = h.engine.cancel(first, "stopped", &[], h.now);
    h.apply(step);
    assert_eq!(h.results(first)[0].error_kind, Some(ErrorKind::Cancelled));
    // b takes the flight over: it asks for the lease (a's, under the same flight) before its handler starts.
    let starts = h.log.iter().filter(|(e, _)| *e == "start").count();
    let (_, ops) = h.store.iter().find(|(_, ops)| matches!(ops[0], Op::Lookup { .. })).cloned().expect("a lookup for b");
    assert!(matches!(&ops[0], Op::Lookup { owner: Some(o), .. } if *o == owner));
    assert!(!h.store.iter().any(|(_, ops)| ops.iter().any(|op| matches!(op, Op::Release { .. }))), "the lease is handed on, not let go");
    assert_eq!(h.log.iter().filter(|(e, _)| *e == "start").count(), starts);
    let index = h.store.iter().position(|(_, ops)| matches!(ops[0], Op::Lookup { .. })).unwrap();
    let (ticket, _) = h.store.remove(index);
    let step = h.engine.answer_store(ticket, r#"[{"value":"{\"truncated\":false}\nanswered meanwhile"}]"#, h.now);
    h.apply(step);
    assert_eq!(h.results(second)[0].output, "answered meanwhile");
}

#[test]
fn a_waiter_that_takes_the_lease_after_polling_runs_and_is_cancelled_as_a_running_call() {
    let mut h = shared_host(json!({}));
    h.tool(json!({"name": "get", "idempotent": true, "readOnly": true}), Behaviour::Hang);
    let turn = h.begin(json!([{"name": "get"}]), Policy::default());
    answer(&mut h, json!([{"value": null, "lease": "held", "leaseLeftMs": 2}]));
    h.advance_clock(5);
    answer(&mut h, json!([{"value": null, "lease": "taken"}]));
    assert_eq!(h.running.len(), 1, "it runs the handler itself");
    let step = h.engine.cancel(turn, "stopped", &[], h.now);
    assert_eq!(step.abort.len(), 1, "the running handler is aborted");
    h.apply(step);
    let r = &h.results(turn)[0];
    assert_eq!((r.error_kind, r.attempts), (Some(ErrorKind::Cancelled), 1));
    assert_eq!(h.engine.counters(h.now)["tools"]["get"]["cacheMisses"], 1, "a look again is not another miss");
    let stations: Vec<String> = r.metadata.stages.iter().filter(|m| m.station == "cache").map(|m| m.outcome.to_string()).collect();
    assert_eq!(stations, ["miss", "waits_elsewhere", "took_over"]);
}

#[test]
fn a_query_counted_by_a_ticket_that_timed_out_is_taken_back_when_its_call_did_not_run() {
    let mut h = shared_host(json!({}));
    h.tool(json!({"name": "api", "readOnly": true, "rateLimit": "5/s", "dedup": "note"}), text("never"));
    let turn = h.begin(json!([{"name": "api"}]), session("s"));
    let (ticket, _) = h.store.remove(0);
    h.advance_clock(50);
    assert_eq!(h.results(turn)[0].error_kind, Some(ErrorKind::RateLimited), "the limit failed closed: not run");
    h.store.clear();
    let step = h.engine.answer_store(ticket, &json!([{"earlier": 0}, {"take": "now"}]).to_string(), h.now);
    h.apply(step);
    let effects: Vec<&'static str> = h.store.iter().flat_map(|(_, ops)| op_names(ops)).collect();
    assert_eq!(effects, ["uncount", "refund"]);
}

#[test]
fn a_late_answer_for_a_call_that_ran_keeps_its_count_and_token() {
    let mut h = shared_host(json!({"rateLimit": "open"}));
    h.tool(json!({"name": "api", "readOnly": true, "rateLimit": "5/s", "dedup": "note"}), text("ran"));
    let turn = h.begin(json!([{"name": "api"}]), session("s"));
    let (ticket, _) = h.store.remove(0);
    h.advance_clock(50);
    assert!(h.results(turn)[0].success, "the limit failed open: it ran");
    h.store.clear();
    let step = h.engine.answer_store(ticket, &json!([{"earlier": 0}, {"take": "now"}]).to_string(), h.now);
    h.apply(step);
    assert!(h.store.is_empty(), "nothing to give back: {:?}", h.store);
}

#[test]
fn an_entry_too_large_to_share_makes_identical_calls_run_without_waiting() {
    let mut h = shared_host(json!({}));
    h.tool(json!({"name": "get", "idempotent": true}), text("big"));
    let turn = h.begin(json!([{"name": "get"}]), Policy::default());
    answer(&mut h, json!([{"value": ""}]));
    assert_eq!(h.results(turn)[0].output, "big");
    let (_, effects) = h.store.remove(0);
    assert!(matches!(&effects[..], [Op::Put { owner: None, .. }]), "it took no lease: {effects:?}");
}

#[test]
fn a_judged_tool_writes_the_sessions_rollback_count_only_when_it_changes() {
    let mut h = shared_host(json!({}));
    h.tool(json!({"name": "probe", "readOnly": true, "dedup": "off", "rollbackWhen": {"host": true}}), text("[]"));
    let turn = h.begin(json!([{"name": "probe"}]), session("s"));
    answer(&mut h, json!([{"earlier": 0, "rollbacks": 0}]));
    h.results(turn);
    assert!(h.store.is_empty(), "not flagged, and nothing to end: no write");
}

#[test]
fn a_retry_renews_the_leaders_lease_for_its_backoff() {
    let mut h = shared_host(json!({}));
    h.tool_script(json!({"name": "get", "idempotent": true, "retry": {"maxRetries": 1, "initialDelayMs": 5000}}), vec![
        Behaviour::Return(toolgate_core::Outcome::Thrown(json!({"message": "flaky", "retryable": true}).to_string())),
        text("second"),
    ]);
    let turn = h.begin(json!([{"name": "get"}]), Policy::default());
    answer(&mut h, json!([{"value": null, "lease": "taken"}]));
    let (_, renewal) = h.store.remove(0);
    let [Op::Lookup { lease_ms: Some(renewed), .. }] = renewal[..] else { panic!("{renewal:?}") };
    h.advance_clock(5000);
    let r = &h.results(turn)[0];
    assert_eq!(r.output, "second");
    // The backoff (jittered, up to 5 s), then the next attempt's 30 s limit and the margin.
    let backoff = r.metadata.attempt_errors[0].retry_in_ms as u64;
    assert!(renewed >= backoff + 30_000 + 1_000, "renewed for {renewed} ms after a backoff of {backoff} ms");
}

#[test]
fn a_late_lease_of_a_flight_handed_on_stays_with_the_flight() {
    let mut h = shared_host(json!({}));
    h.tool(json!({"name": "get", "idempotent": true, "readOnly": true}), text("second ran"));
    let first = h.begin(json!([{"id": "a", "name": "get"}]), Policy::default());
    let (late, _) = h.store.remove(0);
    let second = h.begin(json!([{"id": "b", "name": "get"}]), Policy::default());
    let step = h.engine.cancel(first, "stopped", &[], h.now);
    h.apply(step);
    h.results(first);
    // b took the flight over and asks for the lease under the flight's name.
    let (ticket, _) = h.store.remove(0);
    // a's lookup answers late: it took the lease, which is the flight's, so b's now.
    let step = h.engine.answer_store(late, &json!([{"value": null, "lease": "taken"}]).to_string(), h.now);
    h.apply(step);
    assert!(h.store.is_empty(), "no release: {:?}", h.store);
    let step = h.engine.answer_store(ticket, &json!([{"value": null, "lease": "taken"}]).to_string(), h.now);
    h.apply(step);
    assert_eq!(h.results(second)[0].output, "second ran");
    let (_, effects) = h.store.remove(0);
    assert!(matches!(&effects[..], [Op::Put { owner: Some(_), .. }]), "b's put lets the lease go: {effects:?}");
}

#[test]
fn a_retrys_token_comes_back_when_that_attempt_never_starts() {
    let mut h = shared_host(json!({}));
    h.tool_script(json!({"name": "api", "readOnly": true, "rateLimit": "5/s", "dedup": "off", "retry": {"maxRetries": 1, "initialDelayMs": 10}}), vec![
        Behaviour::Return(toolgate_core::Outcome::Thrown(json!({"message": "flaky", "retryable": true}).to_string())),
        text("never"),
    ]);
    let turn = h.begin(json!([{"name": "api"}]), Policy::default());
    answer(&mut h, json!([{"take": "now"}]));
    h.advance_clock(10);
    let (retry, ops) = h.store.remove(0);
    assert_eq!(op_names(&ops), ["take"]);
    h.advance_clock(50);
    let r = &h.results(turn)[0];
    assert_eq!((r.error_kind, r.attempts), (Some(ErrorKind::RateLimited), 1), "the retry's take timed out: failed closed");
    h.store.clear();
    let step = h.engine.answer_store(retry, &json!([{"take": "now"}]).to_string(), h.now);
    h.apply(step);
    let effects: Vec<&'static str> = h.store.iter().flat_map(|(_, ops)| op_names(ops)).collect();
    assert_eq!(effects, ["refund"], "the attempt it was for never started");
}

#[test]
fn a_late_count_answered_while_its_call_waits_is_given_back_if_the_call_then_never_runs() {
    let mut h = shared_host(json!({}));
    h.tool(json!({"name": "get", "idempotent": true, "readOnly": true, "dedup": "note"}), Behaviour::Hang);
    let first = h.begin(json!([{"id": "a", "name": "get"}]), session("s"));
    answer(&mut h, json!([{"earlier": 0}, {"value": null, "lease": "taken"}]));
    // b joins a's flight; its own count times out (dedup fails open) and it keeps waiting for the flight.
    let second = h.begin(json!([{"id": "b", "name": "get"}]), session("s"));
    let (late, ops) = h.store.remove(0);
    assert_eq!(op_names(&ops), ["count"]);
    h.advance_clock(50);
    let step = h.engine.answer_store(late, &json!([{"earlier": 1}]).to_string(), h.now);
    h.apply(step);
    assert!(h.store.is_empty(), "decided when b settles");
    let step = h.engine.cancel(second, "stopped", &[], h.now);
    h.apply(step);
    assert_eq!(h.results(second)[0].error_kind, Some(ErrorKind::Cancelled));
    let effects: Vec<&'static str> = h.store.iter().flat_map(|(_, ops)| op_names(ops)).collect();
    assert_eq!(effects, ["uncount"], "b never ran: its count goes back");
    let _ = first;
}

#[test]
fn a_late_count_of_a_call_answered_by_its_flight_is_not_kept_waiting() {
    let mut h = shared_host(json!({}));
    h.tool(json!({"name": "get", "idempotent": true, "readOnly": true, "dedup": "note"}), Behaviour::Hang);
    h.tool(json!({"name": "slow", "readOnly": true, "dedup": "off"}), Behaviour::Hang);
    let first = h.begin(json!([{"id": "a", "name": "get"}]), session("s"));
    answer(&mut h, json!([{"earlier": 0}, {"value": null, "lease": "taken"}]));
    // b joins a's flight and sends its count; c keeps b's turn open.
    let second = h.begin(json!([{"id": "b", "name": "get"}, {"id": "c", "name": "slow"}]), session("s"));
    let (count, _) = h.store.remove(0);
    // a's handler returns while b's count is still out: b gets a's result.
    let run = *h.running.iter().find(|(_, name)| *name == "get").unwrap().0;
    let step = h.engine.complete(run, toolgate_core::Outcome::Text("shared".into()), h.now);
    h.apply(step);
    h.results(first);
    h.store.clear();
    h.advance_clock(50);
    let step = h.engine.answer_store(count, &json!([{"earlier": 1}]).to_string(), h.now);
    h.apply(step);
    assert!(h.store.is_empty(), "b's query did run (in a's flight): its count stays");
    assert_eq!(h.engine.counters(h.now)["store"]["pending"], 0, "nothing kept waiting for a call that has settled");
    let step = h.engine.cancel(second, "stopped", &[], h.now);
    h.apply(step);
    assert!(h.results(second)[0].metadata.shared_flight);
}

/// Answers ticket `ticket` with `replies` (JSON values; null: not answered yet).
fn answer_ticket(h: &mut Host, ticket: u32, replies: Value) {
    let step = h.engine.answer_store(ticket, &replies.to_string(), h.now);
    h.apply(step);
}

/// The ticket whose operations are named `names`, taken from those out.
fn ticket_of(h: &mut Host, names: &[&str]) -> u32 {
    let at = h.store.iter().position(|(_, ops)| op_names(ops) == names).unwrap_or_else(|| panic!("no ticket of {names:?}: {:?}", h.store));
    h.store.remove(at).0
}

#[test]
fn each_operation_stands_as_its_node_answered_and_only_those_left_out_fail_at_the_deadline() {
    let mut h = shared_host(json!({"rateLimit": "open"}));
    h.tool(json!({"name": "get", "idempotent": true, "readOnly": true, "dedup": "note"}), text("never"));
    h.tool(json!({"name": "api", "readOnly": true, "rateLimit": "5/s", "budget": {"maxCalls": 10}, "dedup": "off"}), text("ran"));
    let turn = h.begin(json!([{"id": "a", "name": "get"}, {"id": "b", "name": "api"}]), session("s"));
    let (get, api) = (ticket_of(&mut h, &["count", "lookup"]), ticket_of(&mut h, &["spend", "take"]));
    // The nodes of the cache entry and of the budget answer; those of the session and of the bucket do not.
    answer_ticket(&mut h, get, json!([null, {"value": "{\"truncated\":false}\nfrom the store"}]));
    answer_ticket(&mut h, api, json!([{"spent": "ok", "used": 1, "window": 0}, null]));
    assert!(!h.done.contains(&turn), "each call waits for the rest of its ticket");
    assert!(h.log.is_empty());
    h.advance_clock(50);
    let results = h.results(turn);
    assert_eq!((results[0].output.as_str(), results[0].cached), ("from the store", true), "the entry that came is a hit");
    assert!(results[0].metadata.stages.iter().any(|m| (m.station, m.outcome) == ("dedup", "unavailable")));
    assert_eq!(results[1].output, "ran", "the budget spent: it ran, its rate limit failing open");
    assert_eq!(results[1].metadata.store, Some("unavailable"));
    assert_eq!(h.engine.counters(h.now)["store"]["errors"], 2, "one per operation left out");
    h.store.clear();
    // The rest, late: the count stands (the call was answered), and so does the token (the call ran).
    answer_ticket(&mut h, get, json!([{"earlier": 0}, null]));
    answer_ticket(&mut h, api, json!([null, {"take": "now"}]));
    assert!(h.store.is_empty(), "nothing to give back: {:?}", h.store);
    assert_eq!(h.engine.counters(h.now)["store"]["pending"], 0);
}

/// The operations sent since, each answered at once: what was given back.
fn given_back(h: &mut Host) -> Vec<&'static str> {
    let mut names = Vec::new();
    for (ticket, ops) in std::mem::take(&mut h.store) {
        names.extend(op_names(&ops));
        answer_ticket(h, ticket, Value::Array(ops.iter().map(|_| json!({})).collect()));
    }
    names
}

#[test]
fn what_a_call_that_never_ran_took_goes_back_once_whether_it_came_in_time_or_late() {
    let mut h = shared_host(json!({}));
    h.tool(json!({"name": "api", "readOnly": true, "rateLimit": "5/s", "budget": {"maxCalls": 10, "maxCost": 5}, "cost": 1, "dedup": "off"}), text("never"));
    let turn = h.begin(json!([{"name": "api"}]), session("s"));
    let ticket = ticket_of(&mut h, &["spend", "spend", "take"]);
    answer_ticket(&mut h, ticket, json!([{"spent": "ok", "used": 1, "window": 0}, null, null]));
    h.advance_clock(50);
    assert_eq!(h.results(turn)[0].error_kind, Some(ErrorKind::Unavailable), "its cost budget failed closed");
    assert_eq!(given_back(&mut h), ["unspend"], "the spending that came in time");
    answer_ticket(&mut h, ticket, json!([null, null, {"take": "now"}]));
    answer_ticket(&mut h, ticket, json!([{"spent": "ok", "used": 1, "window": 0}, {"spent": "ok", "used": 1}, {"take": "now"}]));
    assert_eq!(given_back(&mut h), ["refund", "unspend"], "each late operation once; the one that came in time is not given back again");
    assert_eq!(h.engine.counters(h.now)["store"]["pending"], 0);
}

#[test]
fn a_trial_place_a_late_answer_gave_goes_back_untested_in_a_ticket_on_the_hosts_clock() {
    let mut h = shared_host(json!({}));
    let breaker = json!({"minCalls": 1, "openMs": 1000, "halfOpenCalls": 1});
    let down = Behaviour::Return(toolgate_core::Outcome::Thrown(json!({"message": "down"}).to_string()));
    h.tool_script(json!({"name": "api", "retry": {"maxRetries": 0}, "breaker": breaker}), vec![down, text("ok")]);
    let turn = h.begin(json!([{"name": "api"}]), Policy::default());
    answer(&mut h, json!([{"phase": "open", "from": "closed", "calls": 1, "failures": 1, "waitMs": 1000}]));
    h.results(turn);
    h.advance_clock(1000);
    // Open and due as this process knows it: the store is asked, does not answer in time, and the breaker fails open.
    let turn = h.begin(json!([{"name": "api"}]), Policy::default());
    let (late, _) = h.store.remove(0);
    h.advance_clock(50);
    assert!(h.results(turn)[0].success);
    h.store.clear();
    // The host's clock runs an hour ahead of the real one (a test's clock) when the late answer gives a trial place.
    h.now += std::time::Duration::from_secs(3600);
    let step = h.engine.answer_store(late, &json!([{"admit": "trial", "phase": "half_open", "generation": 1, "from": "open"}]).to_string(), h.now);
    h.apply(step);
    let (_, back) = h.store.first().expect("the trial place goes back");
    assert!(matches!(&back[..], [Op::BreakerRecord { admission: "trial", generation: 1, outcome: "untested", .. }]), "{back:?}");
    let timeouts = |h: &Host| h.engine.counters(h.now)["store"]["timeouts"].clone();
    let before = timeouts(&h);
    h.advance_clock(1);
    assert_eq!(timeouts(&h), before, "its deadline is 50 ms of the host's clock away");
}

#[test]
fn a_late_answer_to_a_repeat_the_store_refused_takes_back_no_count() {
    let mut h = shared_host(json!({}));
    h.tool(json!({"name": "api", "readOnly": true, "rateLimit": "5/s", "dedup": "refuse"}), text("never"));
    let turn = h.begin(json!([{"name": "api"}]), session("s"));
    // A refused repeat would answer the call: its count is asked alone, its token after (both go unanswered).
    let (count, ops) = h.store.remove(0);
    assert_eq!(op_names(&ops), ["count"]);
    h.advance_clock(50);
    let (take, ops) = h.store.remove(0);
    assert_eq!(op_names(&ops), ["take"]);
    h.advance_clock(50);
    assert_eq!(h.results(turn)[0].error_kind, Some(ErrorKind::RateLimited), "the limit failed closed: not run");
    h.store.clear();
    // The store counted it as a repeat, refused it and took its count back itself: nothing goes back for it.
    let step = h.engine.answer_store(count, &json!([{"earlier": 1}]).to_string(), h.now);
    h.apply(step);
    assert!(h.store.is_empty(), "{:?}", h.store);
    let step = h.engine.answer_store(take, &json!([{"take": "now"}]).to_string(), h.now);
    h.apply(step);
    let effects: Vec<&'static str> = h.store.iter().flat_map(|(_, ops)| op_names(ops)).collect();
    assert_eq!(effects, ["refund"]);
}
