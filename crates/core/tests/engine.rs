//! The engine driven as a host drives it, with a fake invoker in place of JS handlers and a hand-moved clock.

mod common;

use common::*;
use serde_json::{json, Value};
use toolgate_core::{Abort, DefinitionFormat, Engine, EngineOptions, ErrorKind, HostAnswer, HostKind, Outcome, Policy, Step, ToolSpec, TurnOptions};

#[test]
fn every_call_gets_one_result_in_input_order() {
    let mut h = host();
    let results = h.run(json!([
        {"type": "tool_use", "id": "a", "name": "search", "input": {"query": "rust"}},
        {"type": "function_call", "call_id": "b", "name": "nope", "arguments": "{}"},
        {"id": "c", "type": "function", "function": {"name": "search", "arguments": "{\"query\": "}},
        {"type": "tool-call", "toolCallId": "d", "toolName": "write_file", "input": {"path": "x"}},
    ]));
    let ids: Vec<_> = results.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c", "d"]);
    let kinds: Vec<_> = results.iter().map(|r| r.error_kind).collect();
    assert_eq!(kinds, [None, Some(ErrorKind::UnknownTool), Some(ErrorKind::InvalidArguments), None]);
    assert_eq!(results[0].output, "found");
    assert_eq!(results[0].attempts, 1);
    assert_eq!(results[1].attempts, 0, "a refused call never reaches invoke");
    let stations: Vec<_> = results[0].metadata.stages.iter().map(|m| m.station).collect();
    assert_eq!(stations, ["lookup", "parse", "validate", "permission", "invoke", "normalize", "shape"]);
    assert_eq!(results[2].metadata.stages.last().unwrap().station, "parse");
}

#[test]
fn schema_errors_are_all_listed_with_paths_and_never_echo_values() {
    let mut h = host();
    let secret = "sk-live-abcdefghijklmnopqrstuvwx";
    let results = h.run(json!([{"name": "search", "arguments": json!({
        "max_results": secret, "sort": "newest", "extra": 1, "filters": [{"field": "a"}, {}]
    }).to_string()}]));
    let e = error(&results[0]);
    assert!(e.contains("(5 problems)"), "{e}");
    assert!(e.contains("- (arguments): missing required property \"query\""), "{e}");
    assert!(e.contains("- /max_results: must be an integer, got a string"), "{e}");
    assert!(e.contains("- /sort: must be one of \"relevance\", \"date\""), "{e}");
    assert!(e.contains("unexpected property \"extra\""), "{e}");
    assert!(e.contains("- /filters/1: missing required property \"field\""), "{e}");
    assert!(!e.contains(secret) && !e.contains("newest"), "values are not echoed: {e}");
    assert!(!results[0].retryable);
}

#[test]
fn ranges_and_lengths_are_worded_from_the_schema() {
    let mut h = host();
    let results = h.run(json!([{"name": "search", "input": {"query": "x", "max_results": 99}}]));
    let e = error(&results[0]);
    assert!(e.contains("- /query: must be at least 2 characters long"), "{e}");
    assert!(e.contains("- /max_results: must be at most 50"), "{e}");
}

#[test]
fn unknown_tools_are_suggested_only_from_what_the_context_may_use() {
    let mut h = host();
    let policy = Policy { denied_tools: vec!["write_*".into()], ..Policy::default() };
    let turn = h.begin(json!([{"name": "Search"}, {"name": "write-file"}]), policy);
    let results = h.results(turn);
    assert!(error(&results[0]).contains("Did you mean \"search\"?"));
    let e = error(&results[1]);
    assert!(!e.contains("write_file"), "a denied tool is never named: {e}");
    assert!(e.contains("Available tools: search, deploy, hang, hang_write."), "{e}");
}

#[test]
fn permission_says_not_allowed_and_approval_is_separate() {
    let mut h = host();
    let policy = Policy { allowed_tools: Some(vec!["search".into(), "deploy".into()]), ..Policy::default() };
    let turn = h.begin(json!([{"name": "write_file", "input": {"path": "a"}}, {"name": "deploy"}, {"name": "no_such_tool"}]), policy);
    let results = h.results(turn);
    // A tool outside the context's lists is answered as a name that does not exist: nothing tells it is there.
    assert_eq!(results[0].error_kind, Some(ErrorKind::UnknownTool));
    assert_eq!(error(&results[0]), error(&results[2]).replace("no_such_tool", "write_file"), "{}", error(&results[0]));
    assert!(!error(&results[0]).contains("invalid"));
    assert_eq!(results[1].error_kind, Some(ErrorKind::ApprovalDenied));
    assert!(h.log.is_empty(), "no handler ran");

    let denied = Policy { denied_tools: vec!["search".into()], ..Policy::default() };
    let turn = h.begin(json!([{"name": "search", "input": {"wrong": 1}}]), denied);
    let results = h.results(turn);
    assert_eq!(results[0].error_kind, Some(ErrorKind::UnknownTool), "refused before its schema could leak");
    assert!(!error(&results[0]).contains("query"));

    let approved = Policy { approved_tools: vec!["deploy".into()], ..Policy::default() };
    let turn = h.begin(json!([{"name": "deploy"}]), approved);
    assert_eq!(h.results(turn)[0].output, "deployed");
}

#[test]
fn reads_run_together_and_a_write_runs_alone_after_them() {
    let mut h = Host::new(json!({}));
    h.tool(json!({"name": "r", "readOnly": true}), Behaviour::Hang);
    h.tool(json!({"name": "w"}), text("ok"));
    let turn = h.begin(json!([{"name": "r"}, {"name": "r"}, {"name": "w"}, {"name": "r"}]), Policy::default());
    let starts: Vec<_> = h.log.iter().filter(|(e, _)| *e == "start").map(|(_, n)| n.as_str()).collect();
    assert_eq!(starts, ["r", "r"], "the write waits for the reads before it");
    let runs: Vec<u32> = h.running.keys().copied().collect();
    for run in runs {
        let step = h.engine.complete(run, Outcome::Text("r".into()), h.now);
        h.running.remove(&run);
        h.apply(step);
    }
    let order: Vec<_> = h.log.iter().map(|(e, n)| format!("{e}:{n}")).collect();
    assert_eq!(order[2..], ["start:w", "end:w", "start:r"], "the read after the write starts only when it ended");
    assert!(!h.done.contains(&turn));
}

#[test]
fn concurrency_caps_running_reads() {
    let mut h = Host::new(json!({"concurrency": 2}));
    h.tool(json!({"name": "r", "readOnly": true}), Behaviour::Hang);
    h.begin(json!([{"name": "r"}, {"name": "r"}, {"name": "r"}]), Policy::default());
    assert_eq!(h.engine.running(), 2);
}

#[test]
fn a_hung_handler_times_out_at_its_deadline_and_a_late_settlement_changes_nothing() {
    let mut h = host();
    let turn = h.begin(json!([{"name": "hang"}, {"name": "search", "input": {"query": "ok"}}]), Policy::default());
    h.advance_clock(99);
    assert!(!h.done.contains(&turn), "not before the deadline");
    let run = *h.running.keys().next().unwrap();
    h.advance_clock(1);
    assert!(h.done.contains(&turn));
    assert_eq!(h.log.last().unwrap(), &("abort", "hang".to_string()), "the handler's signal is aborted");
    assert_eq!(h.engine.counters(h.now)["tools"]["hang"]["timeouts"], 1);
    assert_eq!(h.engine.complete(run, Outcome::Text("late".into()), h.now), Step::default());
    let results = h.results(turn);
    assert_eq!(results[0].error_kind, Some(ErrorKind::Timeout));
    assert!(error(&results[0]).contains("time limit of 100 ms"));
    assert!(error(&results[0]).contains("retry with a narrower request"), "read-only wording");
    assert!(results[0].retryable);
    assert_eq!(results[1].output, "found", "a sibling's result is kept");
    assert!(h.engine.deadlines().is_empty());
}

#[test]
fn a_write_that_times_out_says_its_effect_is_unknown() {
    let mut h = host();
    let turn = h.begin(json!([{"name": "hang_write"}]), Policy::default());
    h.advance_clock(100);
    let results = h.results(turn);
    assert!(error(&results[0]).contains("its effect is unknown"));
    assert!(!results[0].retryable);
}

#[test]
fn cancelling_aborts_running_calls_and_reports_the_unstarted() {
    let mut h = host();
    let turn = h.begin(json!([{"name": "hang"}, {"name": "write_file"}, {"name": "nope"}]), Policy::default());
    let step = h.engine.cancel(turn, "aborted by the caller: user pressed stop", &[], h.now);
    h.apply(step);
    assert_eq!(h.log, [("start", "hang".to_string()), ("abort", "hang".to_string())], "the write never started");
    let results = h.results(turn);
    assert_eq!(results[0].error_kind, Some(ErrorKind::Cancelled));
    assert!(error(&results[0]).contains("stopped while running") && error(&results[0]).contains("user pressed stop"));
    assert_eq!(results[1].error_kind, Some(ErrorKind::Cancelled));
    assert!(error(&results[1]).contains("was not run"));
    assert_eq!(results[2].error_kind, Some(ErrorKind::UnknownTool), "a refused call keeps its own error");
    assert!(h.engine.deadlines().is_empty());
}

#[test]
fn a_run_the_host_had_not_started_is_cancelled_as_not_run() {
    let mut h = Host::new(json!({}));
    h.tool(json!({"name": "r", "readOnly": true}), Behaviour::Hang);
    let step = h.engine.begin(&json!([{"name": "r"}, {"name": "r"}]).to_string(), &Policy::default(), &TurnOptions::default(), None, h.now).unwrap();
    let turn = step.turn.unwrap();
    let (first, second) = (step.start[0].run, step.start[1].run);
    // The first handler aborted the turn before the host reached the second start.
    let step = h.engine.cancel(turn, "aborted by the caller", &[second], h.now);
    assert_eq!(step.abort, vec![Abort { run: first, kind: ErrorKind::Cancelled }]);
    assert_eq!(step.done, vec![turn]);
    h.done.extend(step.done);
    let results = h.results(turn);
    assert!(error(&results[0]).contains("stopped while running"));
    assert_eq!((results[1].attempts, results[1].error_kind), (0, Some(ErrorKind::Cancelled)));
    assert!(error(&results[1]).contains("was not run"));
}

#[test]
fn a_turn_begun_cancelled_runs_nothing() {
    let mut h = host();
    let calls = json!([{"name": "search", "input": {"query": "xy"}}]).to_string();
    let step = h.engine.begin(&calls, &Policy::default(), &TurnOptions::default(), Some("aborted by the caller"), h.now).unwrap();
    assert!(step.start.is_empty());
    let turn = step.turn.unwrap();
    h.apply(step);
    let results = h.results(turn);
    assert!(error(&results[0]).contains("was not run"));
}

#[test]
fn normalize_and_shape_apply_to_handler_output() {
    let mut h = Host::new(json!({"maxOutputChars": 10, "maxErrorChars": 40}));
    h.tool(json!({"name": "big"}), text(&"ü".repeat(25)));
    h.tool(json!({"name": "obj", "maxOutputChars": 100}), Behaviour::Return(Outcome::Json(r#"{"z":1,"a":2}"#.into())));
    h.tool(json!({"name": "bad"}), Behaviour::Return(Outcome::Thrown(json!({"name": "Error", "message": "x".repeat(100)}).to_string())));
    h.tool(json!({"name": "wide", "maxOutputChars": 100}), text(&"ü".repeat(25)));
    let results = h.run(json!([{"name": "big"}, {"name": "obj"}, {"name": "bad"}, {"name": "wide"}]));
    assert!(results[0].truncated && results[0].output.ends_with(&format!("\n{}\n… [15 more characters in the file]", "ü".repeat(10))));
    assert_eq!(results[0].metadata.original_chars, Some(25));
    let saved = results[0].metadata.artifact_path.as_ref().expect("a long output is saved");
    assert_eq!(std::fs::read_to_string(saved).unwrap(), "ü".repeat(25));
    assert_eq!(results[1].metadata.structured, Some(json!({"z": 1, "a": 2})));
    assert!(results[2].truncated && error(&results[2]).contains("characters omitted"));
    assert!(!results[3].truncated, "a tool's own limit wins over the executor's");
}

#[test]
fn registration_refuses_what_cannot_work() {
    let mut e = Engine::new(EngineOptions::default()).unwrap();
    let bad = |e: &mut Engine, v: Value| e.register(spec(v)).unwrap_err();
    assert!(bad(&mut e, json!({"name": "has space"})).contains("invalid tool name"));
    assert!(bad(&mut e, json!({"name": "x".repeat(65)})).contains("1 to 64"));
    assert!(bad(&mut e, json!({"name": "t", "parameters": {"type": "object", "properties": {"a": {"type": "strin"}}}}))
        .contains("not a valid JSON Schema"));
    assert!(bad(&mut e, json!({"name": "t", "parameters": {"type": "string"}})).contains("must be a JSON Schema of an object"));
    e.register(spec(json!({"name": "implied", "parameters": {"properties": {"a": {"type": "string"}}}}))).unwrap();
    assert_eq!(e.list(&Policy::default())[0]["parameters"]["type"], "object", "an implied object type is spelled out");
    assert!(e.unregister("implied"));
    e.register(spec(json!({"name": "t"}))).unwrap();
    assert!(bad(&mut e, json!({"name": "t"})).contains("already registered"));
    e.register(spec(json!({"name": "t", "description": "new", "replace": true}))).unwrap();
    assert_eq!(e.list(&Policy::default())[0]["description"], "new");
    e.register(spec(json!({"name": "t", "untrusted": true, "origin": {"server": "files", "name": "files.read"}, "replace": true}))).unwrap();
    let listed = &e.list(&Policy::default())[0];
    assert_eq!((&listed["untrusted"], &listed["origin"]["name"]), (&json!(true), &json!("files.read")), "list() shows where a tool comes from");
    assert!(ToolSpec::from_json(r#"{"name":"u","origin":"files"}"#).unwrap_err().contains("expected a map"), "an origin is an object");
    assert!(ToolSpec::from_json(r#"{"name":"t","readonly":true}"#).unwrap_err().contains("unknown field"));
    assert!(EngineOptions::from_json(r#"{"concurrency":0}"#).unwrap_err().contains("concurrency"));
    assert!(e.unregister("t") && !e.unregister("t"));
}

#[test]
fn timeouts_are_capped_by_the_executor() {
    let mut e = Engine::new(EngineOptions::from_json(r#"{"defaultTimeoutMs": 500, "maxTimeoutMs": 2000}"#).unwrap()).unwrap();
    e.register(spec(json!({"name": "a"}))).unwrap();
    e.register(spec(json!({"name": "b", "timeoutMs": 999999}))).unwrap();
    let list = e.list(&Policy::default());
    assert_eq!((list[0]["timeoutMs"].as_u64(), list[1]["timeoutMs"].as_u64()), (Some(500), Some(2000)));
}

#[test]
fn definitions_take_each_providers_shape() {
    let mut e = Engine::new(EngineOptions::default()).unwrap();
    e.register(spec(json!({"name": "s", "description": "d", "parameters": search_schema()}))).unwrap();
    let p = Policy::default();
    let one = |f| e.definitions(f, &p).unwrap()[0].clone();
    assert_eq!(
        one(DefinitionFormat::OpenAiResponses),
        json!({"type": "function", "name": "s", "description": "d", "parameters": search_schema(), "strict": false})
    );
    assert_eq!(one(DefinitionFormat::OpenAiChat)["function"]["parameters"], search_schema());
    assert_eq!(one(DefinitionFormat::Anthropic), json!({"name": "s", "description": "d", "input_schema": search_schema()}));
    assert_eq!(one(DefinitionFormat::AiSdk)["inputSchema"], search_schema());
    assert_eq!(one(DefinitionFormat::Bedrock), json!({"toolSpec": {"name": "s", "description": "d", "inputSchema": {"json": search_schema()}}}));
    assert_eq!(one(DefinitionFormat::Gemini)["parameters"]["type"], "OBJECT");
    let hidden = Policy { denied_tools: vec!["s".into()], ..Policy::default() };
    assert_eq!(e.definitions(DefinitionFormat::Anthropic, &hidden).unwrap(), json!([]));
}

#[test]
fn the_schemas_own_validation_comes_after_the_engines_and_before_the_check_and_approval() {
    let mut h = Host::new(json!({}));
    h.answer = None;
    h.tool(json!({"name": "pay", "needsApproval": true, "check": true, "schemaCheck": true,
        "parameters": {"type": "object", "properties": {"to": {"type": "string", "pattern": "^(?!eve)"}}, "required": ["to"]},
        "validationSchema": {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}}),
        Behaviour::Return(Outcome::Text("paid".into())));
    let turn = h.begin(json!([{"id": "a", "name": "pay", "input": {"to": {"x": 1}}}, {"id": "b", "name": "pay", "input": {"to": "eve"}},
        {"id": "c", "name": "pay", "input": {"to": "bob"}}]), Policy::default());
    // The engine refused the first itself, with the validation schema (the pattern is the host's to check).
    let kinds: Vec<_> = h.requests.iter().map(|r| (r.kind, r.call_id.clone(), r.index)).collect();
    assert_eq!(kinds, [(HostKind::Validate, "b".to_string(), 1), (HostKind::Validate, "c".to_string(), 2)]);
    let answer = |h: &mut Host, json: Value| {
        let request = h.requests.remove(0);
        let step = h.engine.answer(request.ticket, HostAnswer::from_json(&json.to_string()).unwrap(), h.now);
        h.apply(step);
    };
    answer(&mut h, json!({"issues": [["/to", "not to eve"], ["", "ghp_abcdefghijklmnopqrstuvwxyz0123456789 is not allowed"]]}));
    answer(&mut h, json!({}));
    assert_eq!(h.requests[0].kind, HostKind::Check, "the tool's check follows the schema's");
    answer(&mut h, json!({}));
    assert_eq!(h.requests[0].kind, HostKind::Approve);
    answer(&mut h, json!({"decision": "approve", "arguments": {"to": "eve"}, "issues": [["/to", "not to eve"]]}));
    let results = h.results(turn);
    assert_eq!(results[0].error_kind, Some(ErrorKind::InvalidArguments));
    assert_eq!(
        error(&results[1]),
        "The arguments do not match the parameters of \"pay\" (2 problems):\n- /to: not to eve\n- (arguments): [REDACTED:github-token] is not allowed\nFix these and call the tool again."
    );
    assert_eq!(results[1].metadata.stages.last().unwrap().station, "schema");
    assert!(error(&results[2]).starts_with("The arguments as edited at approval were refused"), "{}", error(&results[2]));
    assert!(error(&results[2]).contains("- /to: not to eve"));
}

#[test]
fn the_engine_validates_with_the_validation_schema_and_shows_the_parameters() {
    let mut h = host();
    let shown = json!({"type": "object", "properties": {"code": {"type": "string", "pattern": "^(?!0)"}}, "required": ["code"]});
    let output = json!({"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]});
    h.tool(json!({"name": "code", "parameters": shown, "schemaCheck": true,
        "validationSchema": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
        "outputSchema": output, "outputCheck": true}), Behaviour::Return(Outcome::Json(r#"{"n": "x"}"#.into())));
    let results = h.run(json!([{"id": "a", "name": "code", "input": {"code": "012"}}, {"id": "b", "name": "code", "input": {}}]));
    assert!(results[0].success, "the host checks the pattern, and the output: {:?}", results[0].error);
    assert!(error(&results[1]).contains("missing required property \"code\""), "{}", error(&results[1]));
    let listed = h.engine.list(&Policy::default());
    let code = listed.as_array().unwrap().iter().find(|t| t["name"] == "code").unwrap();
    assert_eq!(code["parameters"], shown);
    let mut engine = Engine::new(EngineOptions::default()).unwrap();
    let err = engine.register(spec(json!({"name": "a", "parameters": shown}))).unwrap_err();
    assert!(err.contains("parameters is not a valid JSON Schema"), "{err}");
    let err = engine.register(spec(json!({"name": "b", "outputSchema": shown}))).unwrap_err();
    assert!(err.contains("outputSchema is not a valid JSON Schema"), "{err}");
}

#[test]
fn a_return_value_that_breaks_the_output_schema_is_a_handler_error_that_is_not_retried() {
    let mut h = host();
    let output = json!({"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]});
    h.tool_script(json!({"name": "report", "readOnly": true, "outputSchema": output}), vec![
        Behaviour::Return(Outcome::Json(r#"{"total": "x"}"#.into())),
        Behaviour::Return(Outcome::Mismatch(vec![("/total".into(), "must be even".into())])),
        Behaviour::Return(Outcome::Json(r#"{"total": 2}"#.into())),
    ]);
    let results = h.run(json!([{"id": "a", "name": "report", "input": {}}]));
    assert_eq!(
        error(&results[0]),
        "Tool \"report\" returned a value that does not match its outputSchema (1 problem):\n- /total: must be a number, got a string\n\
         The tool is at fault, not the call: do not retry it unchanged; tell the user or do something else."
    );
    assert_eq!((results[0].error_kind, results[0].retryable, results[0].attempts), (Some(ErrorKind::HandlerError), false, 1));
    let results = h.run(json!([{"id": "b", "name": "report", "input": {}}]));
    assert!(error(&results[0]).contains("(1 problem):\n- /total: must be even\n"), "{}", error(&results[0]));
    let results = h.run(json!([{"id": "c", "name": "report", "input": {}}]));
    assert_eq!(results[0].metadata.structured, Some(json!({"total": 2})));
}

#[test]
fn a_recorded_value_is_redacted_whole_and_never_cut() {
    let e = Engine::new(EngineOptions::from_json(r#"{"redact":{"patterns":[{"name":"internal","pattern":"ACME-[0-9]{6}"}]}}"#).unwrap()).unwrap();
    let long = "x".repeat(100_000);
    let value = json!({ "args": { "password": "hunter2", "note": "ticket ACME-123456" }, "value": long, "key": "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8" });
    let out: Value = serde_json::from_str(&e.redacted(&value.to_string(), false).unwrap()).unwrap();
    assert_eq!(out["args"]["password"], "[REDACTED:secret-field]");
    assert_eq!(out["args"]["note"], "ticket [REDACTED:internal]");
    assert_eq!(out["value"].as_str().unwrap().len(), 100_000, "nothing is cut");
    assert_eq!(out["key"], "[REDACTED:github-token]", "a token in any field is redacted");
    let text_args = json!({ "arguments": "{\"user\": \"ann\", \"password\": \"swordfish\"}", "note": "{not json" });
    let out: Value = serde_json::from_str(&e.redacted(&text_args.to_string(), true).unwrap()).unwrap();
    assert_eq!(out["arguments"], r#"{"user":"ann","password":"[REDACTED:secret-field]"}"#, "arguments as JSON text are redacted as the value they hold");
    assert_eq!(out["note"], "{not json");
    let kept: Value = serde_json::from_str(&e.redacted(&text_args.to_string(), false).unwrap()).unwrap();
    assert!(kept["arguments"].as_str().unwrap().starts_with(r#"{"user": "ann", "#), "without json_texts, JSON text stays text, written as it came");
    assert!(e.redacted("{\"a\":", false).unwrap_err().contains("not JSON"));
}
