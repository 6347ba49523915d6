//! Avoided and bounded work through the engine: cache, single flight, session dedup and rate limits.

mod common;

use common::*;
use serde_json::json;
use toolgate_core::{ErrorKind, HostAnswer, Outcome, Policy, TurnOptions};

fn starts(h: &Host) -> usize {
    h.log.iter().filter(|(e, _)| *e == "start").count()
}

#[test]
fn an_idempotent_tool_answers_repeats_from_the_cache_without_running() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({}));
        h.tool(json!({"name": "get", "idempotent": true}), text("value"));
        let first = h.run(json!([{"name": "get", "arguments": "{\"a\":1,\"b\":[2]}"}]));
        let again = h.run(json!([{"name": "get", "arguments": "{\"b\":[2.0],\"a\":1e0}"}]));
        assert_eq!(starts(&h), 1, "the second call was a hit: key order and number spelling do not matter");
        assert!(!first[0].cached && again[0].cached);
        assert_eq!(again[0].output, "value");
        assert!(again[0].metadata.stages.iter().any(|m| m.station == "cache" && m.outcome == "hit"));
        assert_eq!(h.engine.counters(h.now)["tools"]["get"]["cacheHits"], 1);
    });
}

#[test]
fn failures_are_not_cached_and_entries_expire() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({}));
        h.tool_script(json!({"name": "get", "idempotent": true, "cache": {"ttlMs": 100}, "retry": {"maxRetries": 0}}), vec![
            Behaviour::Return(Outcome::Thrown(json!({"message": "flaky"}).to_string())),
            text("ok"),
        ]);
        assert!(!h.run(json!([{"name": "get"}]))[0].success);
        assert!(h.run(json!([{"name": "get"}]))[0].success);
        assert!(h.run(json!([{"name": "get"}]))[0].cached);
        h.now += std::time::Duration::from_millis(101);
        assert!(!h.run(json!([{"name": "get"}]))[0].cached, "expired");
        assert_eq!(starts(&h), 3);
    });
}

#[test]
fn a_scoped_cache_never_answers_one_tenant_with_anothers_result() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({}));
        h.tool(json!({"name": "get", "idempotent": true, "cache": {"scope": "tenantId"}}), text("v"));
        let tenant = |t: &str| Policy { fields: [("tenantId".to_string(), t.to_string())].into_iter().collect(), ..Policy::default() };
        for (policy, cached) in [(tenant("a"), false), (tenant("b"), false), (tenant("a"), true)] {
            let turn = h.begin(json!([{"name": "get"}]), policy);
            assert_eq!(h.results(turn)[0].cached, cached);
        }
    });
}

#[test]
fn identical_calls_in_flight_share_one_execution_across_turns() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({}));
        h.tool(json!({"name": "get", "idempotent": true, "readOnly": true}), Behaviour::Hang);
        let a = h.begin(json!([{"id": "a1", "name": "get"}, {"id": "a2", "name": "get"}]), Policy::default());
        let b = h.begin(json!([{"id": "b1", "name": "get"}]), Policy::default());
        assert_eq!(starts(&h), 1);
        let run = *h.running.keys().next().unwrap();
        h.running.clear();
        let step = h.engine.complete(run, Outcome::Text("shared".into()), h.now);
        h.apply(step);
        let (ra, rb) = (h.results(a), h.results(b));
        let ids: Vec<_> = ra.iter().chain(&rb).map(|r| r.call_id.as_str()).collect();
        assert_eq!(ids, ["a1", "a2", "b1"]);
        assert!(ra.iter().chain(&rb).all(|r| r.output == "shared"));
        assert!(!ra[0].metadata.shared_flight && ra[1].metadata.shared_flight && rb[0].metadata.shared_flight);
        assert_eq!(h.engine.counters(h.now)["total"]["sharedFlights"], 2);
    });
}

#[test]
fn dedup_notes_refuses_or_reuses_a_repeated_query_per_session() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({}));
        h.tool(json!({"name": "note", "parameters": {"type": "object", "properties": {"q": {"type": "string"}, "page": {"type": "integer"}}}}), text("n"));
        h.tool(json!({"name": "refuse", "dedup": "refuse"}), text("r"));
        h.tool(json!({"name": "reuse", "dedup": {"policy": "reuse", "keys": ["q"]}, "parameters": {"type": "object", "properties": {"q": {"type": "string"}, "page": {"type": "integer"}}}}), text("first answer"));
        let run = |h: &mut Host, calls: serde_json::Value, s: &str| {
            let turn = h.begin(calls, session(s));
            h.results(turn).remove(0)
        };
        run(&mut h, json!([{"name": "note", "input": {"q": "x"}}]), "s1");
        let noted = run(&mut h, json!([{"name": "note", "input": {"q": "x"}}]), "s1");
        assert_eq!(noted.output, "n\n[note] This exact query already ran once in this session.");
        assert_eq!(noted.metadata.repeats, Some(1));
        assert!(run(&mut h, json!([{"name": "note", "input": {"q": "x"}}]), "s2").metadata.repeats.is_none(), "sessions are apart");

        run(&mut h, json!([{"name": "refuse"}]), "s1");
        let refused = run(&mut h, json!([{"name": "refuse"}]), "s1");
        assert_eq!(refused.error_kind, Some(ErrorKind::Duplicate));
        assert!(refused.error.unwrap().contains("already ran once in this session"));

        run(&mut h, json!([{"name": "reuse", "input": {"q": "x", "page": 1}}]), "s1");
        let before = starts(&h);
        let reused = run(&mut h, json!([{"name": "reuse", "input": {"q": "x", "page": 2}}]), "s1");
        assert_eq!(starts(&h), before, "answered from the earlier result: only q makes the query");
        assert!(reused.metadata.reused && reused.output == "first answer");
        assert_eq!(h.engine.counters(h.now)["total"]["duplicates"], 3);
    });
}

#[test]
fn a_bucket_admits_no_more_than_its_capacity_and_says_when_to_retry() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({}));
        h.tool(json!({"name": "api", "rateLimit": "3/min"}), text("ok"));
        let results = h.run(json!((0..10).map(|_| json!({"name": "api"})).collect::<Vec<_>>()));
        assert_eq!(starts(&h), 3);
        let limited: Vec<_> = results.iter().filter(|r| r.error_kind == Some(ErrorKind::RateLimited)).collect();
        assert_eq!(limited.len(), 7);
        assert!(limited.iter().all(|r| r.retry_after_ms.is_some_and(|ms| ms > 0) && r.retryable));
        assert!(limited[0].error.as_deref().unwrap().contains("Wait about"));
        assert_eq!(h.engine.counters(h.now)["tools"]["api"]["rateLimited"], 7);
    });
}

#[test]
fn a_call_may_wait_for_a_token_in_arrival_order() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({}));
        h.tool(json!({"name": "api", "readOnly": true, "rateLimit": {"limit": "1/s", "maxWaitMs": 5000}}), text("ok"));
        let turn = h.begin(json!([{"id": "1", "name": "api"}, {"id": "2", "name": "api"}, {"id": "3", "name": "api"}]), Policy::default());
        assert_eq!(starts(&h), 1, "the others wait for their tokens");
        h.advance_clock(1000);
        assert_eq!(starts(&h), 2);
        h.advance_clock(1000);
        let results = h.results(turn);
        assert!(results.iter().all(|r| r.success), "all ran, one per second");
    });
}

#[test]
fn a_wait_never_outlasts_the_turn_deadline_and_keyed_buckets_are_apart() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({}));
        h.tool(json!({"name": "api", "readOnly": true, "rateLimit": {"limit": "1/s", "maxWaitMs": 5000, "key": "userId"}}), text("ok"));
        let options = TurnOptions { deadline_ms: Some(500), ..TurnOptions::default() };
        let user = |u: &str| Policy { fields: [("userId".to_string(), u.to_string())].into_iter().collect(), ..Policy::default() };
        let turn = h.begin_with(json!([{"name": "api"}, {"name": "api"}]), user("u1"), options);
        let results = h.results(turn);
        assert!(results[0].success);
        assert_eq!(results[1].error_kind, Some(ErrorKind::RateLimited), "a 1 s wait would pass the 500 ms deadline");
        let other = h.begin(json!([{"name": "api"}]), user("u2"));
        assert!(h.results(other)[0].success, "another user's bucket is full");
    });
}

#[test]
fn cache_hits_skip_the_rate_limit_and_invalidate_drops_entries() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({"rateLimit": "1/min"}));
        h.tool(json!({"name": "get", "idempotent": true}), text("v"));
        assert!(h.run(json!([{"name": "get", "input": {"k": 1}}]))[0].success);
        assert!(h.run(json!([{"name": "get", "input": {"k": 1}}]))[0].cached, "a hit needs no token");
        assert_eq!(h.invalidate("get", Some(r#"{"k": 1}"#)), 1);
        let r = h.run(json!([{"name": "get", "input": {"k": 1}}]));
        assert_eq!(r[0].error_kind, Some(ErrorKind::RateLimited), "the executor-wide bucket is empty");
        assert_eq!(h.invalidate("get", None), 0);
    });
}

#[test]
fn a_flight_cancelled_with_its_turn_is_taken_over_by_a_waiter_in_another_turn() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({}));
        h.tool(json!({"name": "get", "idempotent": true, "readOnly": true}), Behaviour::Hang);
        let a = h.begin(json!([{"name": "get"}]), Policy::default());
        let b = h.begin(json!([{"name": "get"}]), Policy::default());
        assert_eq!(starts(&h), 1);
        let step = h.engine.cancel(a, "aborted by the caller", &[], h.now);
        h.apply(step);
        assert_eq!(h.results(a)[0].error_kind, Some(ErrorKind::Cancelled));
        assert_eq!(starts(&h), 2, "turn b's call ran itself instead of inheriting a's cancellation");
        let run = *h.running.keys().next().unwrap();
        h.running.clear();
        let step = h.engine.complete(run, Outcome::Text("mine".into()), h.now);
        h.apply(step);
        assert_eq!(h.results(b)[0].output, "mine");
    });
}

#[test]
fn a_flight_skipped_by_stop_on_error_leaves_nothing_to_wait_on() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({}));
        h.tool(json!({"name": "write", "retry": {"maxRetries": 0}}), Behaviour::Return(Outcome::Thrown(json!({"message": "x"}).to_string())));
        h.tool(json!({"name": "get", "idempotent": true}), text("v"));
        let options = TurnOptions { stop_on_error: true, ..TurnOptions::default() };
        let turn = h.begin_with(json!([{"name": "write"}, {"name": "get"}]), Policy::default(), options);
        assert_eq!(h.results(turn)[1].error_kind, Some(ErrorKind::NotExecuted));
        assert!(h.run(json!([{"name": "get"}]))[0].success, "a later identical call runs");
    });
}

#[test]
fn a_refused_call_gives_back_the_executor_token_and_its_dedup_count() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({"rateLimit": "4/min"}));
        h.tool(json!({"name": "scarce", "rateLimit": "1/min", "dedup": "refuse"}), text("s"));
        h.tool(json!({"name": "plenty"}), text("p"));
        let turn = h.begin(json!([{"name": "scarce", "input": {"to": "a"}}, {"name": "scarce", "input": {"to": "b"}}]), session("s1"));
        assert_eq!(h.results(turn)[1].error_kind, Some(ErrorKind::RateLimited));
        let plenty = h.run(json!([{"name": "plenty"}, {"name": "plenty"}, {"name": "plenty"}]));
        assert!(plenty.iter().all(|r| r.success), "only one of the executor's 4 tokens was used");
        let turn = h.begin(json!([{"name": "scarce", "input": {"to": "b"}}]), session("s1"));
        assert_eq!(h.results(turn)[0].error_kind, Some(ErrorKind::RateLimited), "not a duplicate: it never ran");
    });
}

#[test]
fn thousands_of_refused_calls_in_one_turn_settle_without_recursing() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({}));
        h.tool(json!({"name": "api", "rateLimit": "1/hour"}), text("ok"));
        let calls: Vec<_> = (0..20_000).map(|i| json!({"name": "api", "input": {"i": i}})).collect();
        let results = h.run(json!(calls));
        assert_eq!(results.iter().filter(|r| r.error_kind == Some(ErrorKind::RateLimited)).count(), 19_999);
    });
}

#[test]
fn a_call_that_joined_an_ended_flight_joins_the_current_one_instead_of_replacing_it() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({"concurrency": 1}));
        h.tool(json!({"name": "x", "idempotent": true, "readOnly": true}), Behaviour::Hang);
        h.tool(json!({"name": "y"}), Behaviour::Hang);
        let t0 = h.begin(json!([{"name": "x"}]), Policy::default());
        let t1 = h.begin(json!([{"name": "y"}, {"name": "x"}]), Policy::default()); // x joins t0's flight, queued behind y
        let step = h.engine.cancel(t0, "stop", &[], h.now);
        h.apply(step);
        let t2 = h.begin(json!([{"name": "x"}]), Policy::default()); // a new flight
        let t3 = h.begin(json!([{"name": "x"}]), Policy::default()); // joins it
        let y = *h.running.iter().find(|(_, n)| *n == "y").unwrap().0;
        h.running.remove(&y);
        let step = h.engine.complete(y, Outcome::Text("y".into()), h.now);
        h.apply(step);
        let x = *h.running.iter().find(|(_, n)| *n == "x").unwrap().0;
        h.running.remove(&x);
        let step = h.engine.complete(x, Outcome::Text("x".into()), h.now);
        h.apply(step);
        for turn in [t1, t2, t3] {
            assert!(h.results(turn).iter().all(|r| r.success), "turn {turn} answered");
        }
        assert_eq!(h.log.iter().filter(|(e, n)| *e == "start" && n == "x").count(), 2);
    });
}

#[test]
fn an_observing_host_hears_an_approval_a_joined_flight_and_a_retry_as_they_begin() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({}));
        h.answer = None;
        h.tool(json!({"name": "pay", "needsApproval": true, "check": true, "schemaCheck": true,
            "validationSchema": {"type": "object"}}), text("paid"));
        h.tool(json!({"name": "get", "idempotent": true, "readOnly": true}), Behaviour::Hang);
        h.tool_script(json!({"name": "flaky", "readOnly": true, "idempotent": true, "retry": {"maxRetries": 1, "initialDelayMs": 1000}}), vec![
            Behaviour::Return(Outcome::Thrown(json!({"message": "down", "retryable": true}).to_string())),
            text("up"),
        ]);
        h.engine.observe(true);
        let turn = h.begin(json!([{"id": "g1", "name": "get"}, {"id": "g2", "name": "get"}, {"id": "f", "name": "flaky"}, {"id": "p", "name": "pay"}]), Policy::default());
        let heard = |h: &Host, index: u32| h.marks.iter().filter(|m| m.0 == turn && m.1 == index).map(|m| m.2.clone()).collect::<Vec<_>>();
        let answer = |h: &mut Host, json: &str| {
            let request = h.requests.remove(0);
            let step = h.engine.answer(request.ticket, HostAnswer::from_json(json).unwrap(), h.now);
            h.apply(step);
        };
        answer(&mut h, "{}");
        assert!(heard(&h, 3).contains(&"schema:ok".to_string()), "the schema's answer is heard as it comes: {:?}", heard(&h, 3));
        answer(&mut h, "{}");
        assert!(heard(&h, 3).contains(&"permission:asked".to_string()), "the approval is heard as it is asked: {:?}", heard(&h, 3));
        assert!(heard(&h, 1).contains(&"cache:joined".to_string()), "the identical call is heard joining: {:?}", heard(&h, 1));
        assert!(heard(&h, 2).contains(&"retry:scheduled".to_string()), "the retry is heard as it is scheduled: {:?}", heard(&h, 2));
        assert!(!h.marks.iter().any(|m| m.2.starts_with("sealed:")), "nothing is sealed yet: {:?}", h.marks);
        answer(&mut h, r#"{"decision":"approve"}"#);
        assert!(heard(&h, 3).contains(&"approval:approved".to_string()), "the answer is heard: {:?}", heard(&h, 3));
        h.advance_clock(1000);
        let run = h.run_of("get");
        h.running.remove(&run);
        let step = h.engine.complete(run, Outcome::Text("got".into()), h.now);
        h.apply(step);
        let results = h.results(turn);
        for (index, result) in results.iter().enumerate() {
            assert!(result.success, "{result:?}");
            let marks = heard(&h, index as u32);
            let stages: Vec<String> = result.metadata.stages.iter().map(|m| format!("{}:{}", m.station, m.outcome)).collect();
            assert_eq!(marks[..marks.len() - 1], stages[..], "every stage the result shows was heard once, in order");
        }
    });
}

#[test]
fn an_observing_host_hears_each_wait_as_it_begins_and_each_call_as_it_is_sealed() {
    for_each_store(|stores| {
        let mut h = Host::on(stores, json!({}));
        h.tool(json!({"name": "api", "readOnly": true, "rateLimit": {"limit": "1/s", "maxWaitMs": 5000}}), text("ok"));
        let earlier = h.begin(json!([{"id": "1", "name": "api"}, {"id": "0", "name": "api"}]), Policy::default());
        assert!(h.marks.is_empty(), "nothing is reported while the host does not observe");
        h.engine.observe(true);
        let turn = h.begin(json!([{"id": "2", "name": "api"}, {"id": "3", "name": "api"}]), Policy::default());
        let heard = |h: &Host, index: u32| h.marks.iter().filter(|m| m.0 == turn && m.1 == index).map(|m| m.2.clone()).collect::<Vec<_>>();
        assert!(heard(&h, 1).contains(&"rate_limit:waited".to_string()), "the wait is heard as it begins: {:?}", heard(&h, 1));
        assert!(!heard(&h, 1).iter().any(|m| m.starts_with("sealed:")), "and the call is not sealed yet");
        for _ in 0..3 {
            h.advance_clock(1000);
        }
        let results = h.results(turn);
        for (index, result) in results.iter().enumerate() {
            assert!(result.success);
            let marks = heard(&h, index as u32);
            let stages: Vec<String> = result.metadata.stages.iter().map(|m| format!("{}:{}", m.station, m.outcome)).collect();
            assert_eq!(marks.last().map(String::as_str), Some("sealed:ok"));
            assert_eq!(marks[..marks.len() - 1], stages[..], "every stage the result shows was heard once, in order");
        }
        let before: Vec<String> = h.marks.iter().filter(|m| m.0 == earlier && m.1 == 1).map(|m| m.2.clone()).collect();
        assert!(!before.contains(&"lookup:found".to_string()), "what a call met before the host observed is not news: {before:?}");
        assert_eq!(before.last().map(String::as_str), Some("sealed:ok"));
    });
}
