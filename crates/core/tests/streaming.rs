//! A streaming turn: calls added as they arrive, scheduled as a turn handed over whole, each result reported as it
//! is sealed, and the turn done only once it is ended.
mod common;

use common::*;
use serde_json::json;
use toolgate_core::{ErrorKind, Outcome, TurnOptions};

fn reads_and_writes() -> Host {
    let mut h = Host::new(json!({}));
    h.tool(json!({"name": "r", "readOnly": true}), Behaviour::Hang);
    h.tool(json!({"name": "w"}), Behaviour::Hang);
    h
}

#[test]
fn a_read_added_while_reads_run_starts_at_once_and_a_write_waits_for_every_call_before_it() {
    let mut h = reads_and_writes();
    let turn = h.stream(TurnOptions::default());
    h.add(turn, json!([{"id": "r1", "name": "r"}]));
    h.add(turn, json!([{"id": "r2", "name": "r"}]));
    assert_eq!(h.order(), ["start:r", "start:r"], "the second read joins the first");
    h.add(turn, json!([{"id": "w1", "name": "w"}]));
    h.add(turn, json!([{"id": "r3", "name": "r"}]));
    assert_eq!(h.engine.running(), 2, "the write waits for the reads, the read after it for the write");
    h.settle(h.run_of("r"), Outcome::Text("one".into()));
    assert_eq!(h.engine.running(), 1);
    h.settle(h.run_of("r"), Outcome::Text("two".into()));
    assert_eq!(h.order()[4..], ["start:w"]);
    h.settle(h.run_of("w"), Outcome::Text("wrote".into()));
    assert_eq!(h.order()[5..], ["end:w", "start:r"]);
    h.settle(h.run_of("r"), Outcome::Text("three".into()));
    assert!(!h.done.contains(&turn), "a turn not ended is not done, though every call it has is");
    assert_eq!(h.settled, [(turn, 0), (turn, 1), (turn, 2), (turn, 3)], "each result reported once, as it was sealed");
    h.end(turn);
    assert!(h.done.contains(&turn));
    h.end(turn);
    assert_eq!(h.done.iter().filter(|&&t| t == turn).count(), 1, "ending again changes nothing");
}

#[test]
fn results_taken_as_they_settle_are_not_given_again_at_the_end() {
    let mut h = Host::new(json!({}));
    h.tool(json!({"name": "echo", "readOnly": true}), text("hi"));
    let turn = h.stream(TurnOptions::default());
    h.add(turn, json!([{"id": "a", "name": "echo"}, {"id": "b", "name": "nope"}]));
    assert_eq!(h.settled.len(), 2, "a call answered without running is sealed at once, as one that ran");
    let taken = h.engine.take_settled(turn, &[1]).unwrap();
    assert!(taken.concat().contains("unknown_tool"));
    assert!(h.engine.take_settled(turn, &[1]).is_err(), "a result is taken once");
    h.end(turn);
    let rest = h.engine.take_results(turn).unwrap();
    assert_eq!(rest.iter().map(|r| r.call_id.as_str()).collect::<Vec<_>>(), ["a"]);
}

#[test]
fn a_turn_takes_no_call_after_it_ended_or_was_cancelled() {
    let mut h = reads_and_writes();
    let turn = h.stream(TurnOptions::default());
    let step = h.engine.end(turn, h.now);
    assert_eq!(step.ended, [turn], "the host learns the turn takes no more calls before anything else");
    h.apply(step);
    assert!(h.done.contains(&turn), "ended with no call: done at once");
    let refused = h.engine.add(turn, r#"[{"name": "r"}]"#, h.now).unwrap_err();
    assert!(refused.contains("takes no more calls"), "{refused}");

    let turn = h.stream(TurnOptions::default());
    h.add(turn, json!([{"name": "w"}, {"name": "r"}]));
    let step = h.engine.cancel(turn, "stopped", &[], h.now);
    assert_eq!(step.ended, [turn]);
    h.apply(step);
    assert!(h.done.contains(&turn), "cancelled: done without being ended");
    assert!(h.engine.add(turn, r#"[{"name": "r"}]"#, h.now).is_err());
    assert_eq!(h.settled.iter().filter(|(t, _)| *t == turn).count(), 2, "both were reported as settled");
    let results = h.engine.take_results(turn).unwrap();
    assert!(results.iter().all(|r| r.error_kind == Some(ErrorKind::Cancelled)), "{results:?}");
}

#[test]
fn its_deadline_ends_a_turn_never_ended_and_counts_from_its_opening() {
    let mut h = reads_and_writes();
    let options = TurnOptions { deadline_ms: Some(100), ..TurnOptions::default() };
    let idle = h.stream(options.clone());
    h.advance_clock(100);
    assert!(h.done.contains(&idle), "a turn with no call and no end is ended by its deadline");

    let turn = h.stream(options);
    h.advance_clock(60);
    h.add(turn, json!([{"id": "late", "name": "r"}]));
    h.advance_clock(40);
    assert!(h.done.contains(&turn));
    let (_, index) = *h.settled.iter().find(|(t, _)| *t == turn).unwrap();
    let result = h.engine.take_settled(turn, &[index]).unwrap().concat();
    assert!(result.contains("timeout"), "stopped at the turn's deadline, 40 ms after it was added: {result}");
}

#[test]
fn with_stop_on_error_a_failed_write_stops_the_calls_added_after_it() {
    let mut h = reads_and_writes();
    let turn = h.stream(TurnOptions { stop_on_error: true, ..TurnOptions::default() });
    h.add(turn, json!([{"id": "w1", "name": "w"}]));
    h.settle(h.run_of("w"), Outcome::Thrown(json!({"name": "Error", "message": "disk full"}).to_string()));
    h.add(turn, json!([{"id": "r1", "name": "r"}]));
    h.end(turn);
    assert!(h.done.contains(&turn));
    assert_eq!(h.engine.running(), 0, "the read added after the failed write never started");
    let results: Vec<String> = h.settled.iter().map(|&(t, i)| h.engine.take_settled(t, &[i]).unwrap().concat()).collect();
    assert!(results[1].contains("not_executed") && results[1].contains("w1"), "{}", results[1]);
}

#[test]
fn a_cut_call_says_the_stream_ended_inside_its_arguments() {
    let mut h = Host::new(json!({"redact": {"patterns": ["sk-[a-z0-9]{8,}"]}}));
    h.tool(json!({"name": "w"}), text("ran"));
    let results = h.run(json!([{"id": "c1", "name": "w", "arguments": "{\"key\": \"sk-abcdefgh1234\", \"pa", "__toolgateCut": true}]));
    assert_eq!(results[0].error_kind, Some(ErrorKind::InvalidArguments));
    let said = error(&results[0]);
    assert!(said.contains("the stream ended inside this call's arguments"), "{said}");
    assert!(said.contains("\"pa"), "what arrived is quoted: {said}");
    assert!(!said.contains("sk-abcdefgh1234"), "redacted: {said}");
    assert_eq!(ran(&h, "w"), 0, "repair could close its braces; it must not run all the same");
}
