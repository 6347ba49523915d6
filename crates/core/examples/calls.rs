//! What the engine spends per call on the suite's trivial calls and cache hits, with the memory store: the engine
//! driven as the host drives it (begin a turn, complete each run, take the results), without the binding. Run by
//! hand, under callgrind for a count that is the same on every run: `valgrind --tool=callgrind
//! target/release/examples/calls <samples> <kind> <batch>` (kind 0: trivial calls, a schema with one integer, the
//! handler's answer "1"; kind 1: cache hits of a 2,000-character result). A sample is 64,000 calls after as many to
//! warm up: the count for 2 samples less the count for 1, over 64,000, is the engine's per call.

use std::time::Instant;

use serde_json::json;
use toolgate_core::{Engine, EngineOptions, Outcome, Policy, ToolSpec, TurnOptions};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CALLS: usize = 64_000;

fn main() {
    let arg = |at: usize, default: usize| std::env::args().nth(at).map_or(default, |s| s.parse().expect("a number"));
    let (samples, kind, batch) = (arg(1, 1), arg(2, 0), arg(3, 16));
    let mut engine = Engine::new(EngineOptions::from_json(r#"{"concurrency": 16}"#).unwrap()).unwrap();
    let parameters = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let (tool, output) = match kind {
        0 => (json!({"name": "t", "readOnly": true, "parameters": parameters}), "1".to_string()),
        _ => (json!({"name": "t", "readOnly": true, "idempotent": true, "cache": {"ttlMs": 600_000}, "parameters": parameters}), "x".repeat(2_000)),
    };
    engine.register(ToolSpec::from_json(&tool.to_string()).unwrap()).unwrap();
    // Sixteen distinct arguments: after the first turn, every call of kind 1 is a hit.
    let calls = (0..batch).map(|i| json!({"type": "function_call", "call_id": format!("c{i}"), "name": "t", "arguments": format!("{{\"n\":{}}}", i % 16)}));
    let calls = serde_json::to_string(&calls.collect::<Vec<_>>()).unwrap();
    let (policy, options) = (Policy::default(), TurnOptions::default());
    for _ in 0..=samples {
        for _ in 0..CALLS / batch {
            let now = Instant::now();
            let step = engine.begin(&calls, &policy, &options, None, now).unwrap();
            let turn = step.turn.unwrap();
            for start in step.start {
                engine.complete(start.run, Outcome::Text(output.clone()), now);
            }
            assert!(engine.take_results(turn).unwrap().iter().all(|r| r.success));
        }
    }
}
