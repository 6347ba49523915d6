//! What a closed circuit breaker and a budget check cost per call in the engine, with the memory store. Run by hand:
//! `cargo run --release -p toolgate-core --example guards [samples] [contender] [batch]`. Turns of 1 and of 16 calls
//! through engines that differ only in their guards, interleaved sample by sample; the engine is driven as the host
//! drives it (begin, complete each run, take the results), so the figures are the engine's own CPU time per call,
//! without the binding. A contender's number (and a batch) runs it alone, for a profiler or callgrind.

use std::time::Instant;

use serde_json::json;
use toolgate_core::{Engine, EngineOptions, Outcome, Policy, ToolSpec, TurnOptions};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Calls per sample, in turns of 1 and of 16.
const CALLS: usize = 64_000;
const BATCHES: [usize; 2] = [1, 16];

fn engine(options: serde_json::Value, tool: serde_json::Value) -> Engine {
    let mut engine = Engine::new(EngineOptions::from_json(&options.to_string()).unwrap()).unwrap();
    engine.register(ToolSpec::from_json(&tool.to_string()).unwrap()).unwrap();
    engine
}

/// CPU time of this thread, in ns: what the engine spent, whatever else the machine did meanwhile.
#[cfg(unix)]
fn thread_ns() -> u128 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and a pointer to a timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u128 * 1_000_000_000 + t.tv_nsec as u128
}

/// Elsewhere, wall time since the first call.
#[cfg(not(unix))]
fn thread_ns() -> u128 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos()
}

/// Runs `CALLS` calls in turns of `calls`; CPU ns per call.
fn per_call(engine: &mut Engine, calls: &(usize, String), policy: &Policy) -> f64 {
    let (batch, calls) = calls;
    let options = TurnOptions::default();
    let t0 = thread_ns();
    for _ in 0..CALLS / batch {
        let now = Instant::now();
        let step = engine.begin(calls, policy, &options, None, now).unwrap();
        let turn = step.turn.unwrap();
        assert_eq!(step.start.len(), *batch, "every call runs");
        for start in step.start {
            engine.complete(start.run, Outcome::Text("ok".into()), now);
        }
        let results = engine.take_results(turn).unwrap();
        assert!(results.iter().all(|r| r.success));
    }
    (thread_ns() - t0) as f64 / CALLS as f64
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    xs[xs.len() / 2]
}

fn main() {
    let samples: usize = std::env::args().nth(1).map_or(11, |s| s.parse().unwrap());
    let alone: Option<usize> = std::env::args().nth(2).map(|s| s.parse().unwrap());
    let batches: Vec<usize> = std::env::args().nth(3).map_or(BATCHES.to_vec(), |s| vec![s.parse().unwrap()]);
    let schema = json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]});
    let tool = |extra: serde_json::Value| {
        let mut spec = json!({"name": "t", "readOnly": true, "parameters": schema, "dedup": "off"});
        spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        spec
    };
    let many = 1_000_000_000_000u64;
    let one_budget = json!({"maxCalls": many});
    let four_budgets = json!({"maxCallsPerTurn": 1_000, "maxCalls": many, "maxCallsPerWindow": {"calls": many, "windowMs": 60_000}, "maxCost": 1e15});
    let mut contenders = vec![
        ("no guards", engine(json!({"concurrency": 16}), tool(json!({})))),
        ("a closed breaker", engine(json!({"concurrency": 16}), tool(json!({"breaker": true})))),
        ("a budget of calls per session", engine(json!({"concurrency": 16, "budget": one_budget}), tool(json!({})))),
        ("budgets per turn, session, window and of cost (4 limits)", engine(json!({"concurrency": 16, "budget": four_budgets}), tool(json!({"cost": 1})))),
        ("a closed breaker and the 4 budgets", engine(json!({"concurrency": 16, "budget": four_budgets}), tool(json!({"breaker": true, "cost": 1})))),
    ];
    if let Some(i) = alone {
        contenders = vec![contenders.swap_remove(i)];
    }
    let turn_of = |n: usize| (n, serde_json::to_string(&(0..n).map(|i| json!({"type": "function_call", "call_id": format!("c{i}"), "name": "t", "arguments": format!("{{\"q\":\"query {i}\"}}")})).collect::<Vec<_>>()).unwrap());
    let turns: Vec<(usize, String)> = batches.iter().map(|&n| turn_of(n)).collect();
    let policy = Policy { fields: [("sessionId".to_string(), "s1".to_string())].into_iter().collect(), ..Policy::default() };
    // figures[batch][contender]: one per sample.
    let mut figures = vec![vec![Vec::new(); contenders.len()]; turns.len()];
    for (_, engine) in contenders.iter_mut() {
        per_call(engine, &turns[turns.len() - 1], &policy); // warm up
    }
    for _ in 0..samples {
        for (b, turn) in turns.iter().enumerate() {
            for (i, (_, engine)) in contenders.iter_mut().enumerate() {
                figures[b][i].push(per_call(engine, turn, &policy));
            }
        }
    }
    // The guards' own cost is each sample's difference from the unguarded engine's in the same round.
    println!("{samples} samples interleaved, median CPU ns per call in the engine (release build, mimalloc), and the median of each");
    println!("sample's difference from the engine without guards in the same round");
    let heads: Vec<String> = batches.iter().map(|n| format!("turns of {n}: ns per call | more")).collect();
    println!("| engine | {} |", heads.join(" | "));
    println!("|---|{}", "---|---|".repeat(batches.len()));
    for (i, (name, _)) in contenders.iter().enumerate() {
        let cells: Vec<String> = figures.iter().map(|by_contender| {
            let extra = median(by_contender[i].iter().zip(&by_contender[0]).map(|(a, b)| a - b).collect());
            format!("{:.0} | {:+.0} ns", median(by_contender[i].clone()), extra)
        }).collect();
        println!("| {name} | {} |", cells.join(" | "));
    }
}
