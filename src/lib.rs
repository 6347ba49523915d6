//! The Node binding: conversions between JS and the core engine, and the wake-up from the deadline watcher.
//! Data crosses as strings; the JS layer (index.js) runs the handlers and drives the engine.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use napi::bindgen_prelude::{BufferSlice, Function, Result, Uint32ArraySlice};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Error, Status};
use napi_derive::napi;
use toolgate_core::{DefinitionFormat, EngineOptions, HostAnswer, Outcome, Policy, Shaped, Step, ToolSpec, TurnOptions};

/// Called with the engine's id when one of its deadlines has passed. Weak: it never keeps Node alive by itself;
/// the engine holds a reference only while deadlines are armed or settlements are shaped elsewhere (`keep_alive`).
type Wake = ThreadsafeFunction<u32, (), u32, Status, false, true>;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

static NEXT_ENGINE_ID: AtomicU32 = AtomicU32::new(1);

/// Settlements at least this large are normalized and shaped on a blocking thread: redacting, cutting and
/// saving megabytes must not hold the JS thread.
const OFF_THREAD_BYTES: usize = 256 * 1024;

#[napi]
pub struct Engine {
    inner: toolgate_core::Engine,
    id: u32,
    /// Shared with the deadline watcher, which calls it from a tokio thread.
    wake: Arc<Mutex<Wake>>,
    watching: bool,
    /// Whether `wake` holds Node's event loop open now; changed only when it must change.
    holding: bool,
    /// Settlements shaped on another thread, waiting for the next `expire` to take them in.
    shaped: Arc<Mutex<Vec<Shaped>>>,
    /// Settlements handed to another thread and not taken in yet: the process must stay up for them.
    shaping: usize,
    /// Large values arriving in slices, by run, until their last slice.
    slices: HashMap<u32, Vec<Vec<u8>>>,
    /// A clock the host moves (a test's manual clock). No watcher runs then, and no deadline holds Node's event
    /// loop open: only `advance_clock` makes time pass.
    manual: Option<ManualClock>,
}

/// Time on a clock the host moves: the engine's deadlines read `now`, artifacts' ages `wall`.
struct ManualClock {
    now: Instant,
    wall: SystemTime,
}

fn fail(message: String) -> Error {
    Error::new(Status::InvalidArg, message)
}

fn policy(json: &str) -> Result<Policy> {
    Policy::from_json(json).map_err(fail)
}

#[napi]
impl Engine {
    #[napi(constructor, catch_unwind)]
    pub fn new(options_json: String, wake: Function<u32, ()>, manual_clock: Option<bool>) -> Result<Self> {
        log_to_stderr();
        let options = EngineOptions::from_json(&options_json).map_err(fail)?;
        let wake = wake.build_threadsafe_function().weak::<true>().callee_handled::<false>().build()?;
        let mut inner = toolgate_core::Engine::new(options).map_err(fail)?;
        let manual = manual_clock.unwrap_or(false).then(|| ManualClock { now: Instant::now(), wall: SystemTime::now() });
        if let Some(clock) = &manual {
            inner.set_clock(clock.wall);
            inner.fix_jitter(0);
        }
        Ok(Engine {
            inner,
            id: NEXT_ENGINE_ID.fetch_add(1, Ordering::Relaxed),
            wake: Arc::new(Mutex::new(wake)),
            watching: false,
            holding: false,
            shaped: Arc::new(Mutex::new(Vec::new())),
            shaping: 0,
            slices: HashMap::new(),
            manual,
        })
    }

    /// Now, on the engine's clock.
    fn now(&self) -> Instant {
        self.manual.as_ref().map_or_else(Instant::now, |clock| clock.now)
    }

    /// With a manual clock: ms until the earliest armed deadline (0 when it has passed), or null when none is.
    #[napi(catch_unwind)]
    pub fn next_deadline_ms(&self) -> Option<f64> {
        let now = self.now();
        self.inner.deadlines().next().map(|at| at.saturating_duration_since(now).as_secs_f64() * 1000.0)
    }

    /// Moves a manual clock `ms` forward and answers what fell due (as `expire` does).
    #[napi(catch_unwind)]
    pub fn advance_clock(&mut self, env: Env, ms: f64) -> Result<String> {
        let Some(clock) = self.manual.as_mut() else { return Err(fail("advanceClock: this engine runs on the system clock".into())) };
        let by = toolgate_core::timer::seconds(ms / 1000.0);
        clock.now = toolgate_core::timer::after(clock.now, by);
        // A move to the deadline `next_deadline_ms` named lands on it: ms as a double may fall a few ns short.
        if let Some(next) = self.inner.deadlines().next().filter(|&at| at > clock.now && at - clock.now < Duration::from_micros(1)) {
            clock.now = next;
        }
        clock.wall = clock.wall.checked_add(by).unwrap_or(clock.wall);
        self.inner.set_clock(clock.wall);
        self.expire(env, None)
    }

    #[napi(getter, catch_unwind)]
    pub fn id(&self) -> u32 {
        self.id
    }

    #[napi(catch_unwind)]
    pub fn register(&mut self, spec_json: String) -> Result<()> {
        let spec = ToolSpec::from_json(&spec_json).map_err(fail)?;
        self.inner.register(spec).map_err(fail)
    }

    #[napi(catch_unwind)]
    pub fn unregister(&mut self, name: String) -> bool {
        self.inner.unregister(&name)
    }

    #[napi(catch_unwind)]
    pub fn list(&self, policy_json: String) -> Result<String> {
        Ok(self.inner.list(&policy(&policy_json)?).to_string())
    }

    #[napi(catch_unwind)]
    /// `{ definitions, leftOut }`: leftOut names each mounted tool the format cannot take, with why.
    pub fn definitions(&self, format: String, policy_json: String) -> Result<String> {
        let format = DefinitionFormat::parse(&format).map_err(fail)?;
        self.inner.definitions_to_wire(format, &policy(&policy_json)?).map_err(fail)
    }

    /// Opens a turn: the step names the turn and the handlers to start (or says it is already done).
    /// `cancelled` is the reason when the turn's signal had fired before it began.
    #[napi(catch_unwind)]
    pub fn begin(
        &mut self,
        env: Env,
        calls_json: String,
        policy_json: String,
        turn_json: String,
        cancelled: Option<String>,
    ) -> Result<String> {
        let policy = policy(&policy_json)?;
        let options = TurnOptions::from_json(&turn_json).map_err(fail)?;
        let step = self.inner.begin(&calls_json, &policy, &options, cancelled.as_deref(), self.now()).map_err(fail)?;
        self.reply(&env, step)
    }

    /// Opens a streaming turn, which takes its calls with `add` until `end`; the step names it.
    #[napi(catch_unwind)]
    pub fn begin_streaming(&mut self, env: Env, policy_json: String, turn_json: String, cancelled: Option<String>) -> Result<String> {
        let policy = policy(&policy_json)?;
        let options = TurnOptions::from_json(&turn_json).map_err(fail)?;
        let step = self.inner.begin_streaming(&policy, &options, cancelled.as_deref(), self.now());
        self.reply(&env, step)
    }

    /// More calls for a streaming turn, after those it has.
    #[napi(catch_unwind)]
    pub fn add(&mut self, env: Env, turn: u32, calls_json: String) -> Result<String> {
        let step = self.inner.add(turn, &calls_json, self.now()).map_err(fail)?;
        self.reply(&env, step)
    }

    /// A streaming turn takes no more calls.
    #[napi(catch_unwind)]
    pub fn end(&mut self, env: Env, turn: u32) -> Result<String> {
        let step = self.inner.end(turn, self.now());
        self.reply(&env, step)
    }

    /// The sealed results of a streaming turn's calls at `indices` (as a step's `settled` names them), in the wire
    /// form of `finish`.
    #[napi(catch_unwind)]
    pub fn take_settled(&mut self, turn: u32, indices: Uint32ArraySlice) -> Result<Vec<String>> {
        self.inner.take_settled(turn, &indices).map_err(fail)
    }

    /// Handlers that settled since the last call, packed so that they cross in two values rather than three per
    /// settlement: `heads` holds, for each, its run, the length of its kind and the length of its payload (in
    /// UTF-16 units, as JS counts them), and `text` is every kind followed by its payload, in order. The host sends
    /// what settles in one turn of its event loop together: one crossing, one step.
    #[napi(catch_unwind)]
    pub fn complete(&mut self, env: Env, heads: Uint32ArraySlice, text: String) -> Result<String> {
        // Every outcome read before any is applied: a bad one must not leave the others half-settled.
        let outcomes = Outcome::unpack(&heads, &text).map_err(fail)?;
        let now = self.now();
        let mut step = Step::default();
        for (run, outcome) in outcomes {
            step.absorb(self.inner.complete(run, outcome, now));
        }
        self.reply(&env, step)
    }

    /// A settlement that crosses as bytes: binary data, or large text or JSON as UTF-8. `more`: a slice, with more
    /// to come (the host encodes a large string a slice per turn of its event loop, so that encoding never stalls
    /// it); the run's time limits stop at the first slice. A large value is shaped on another thread; its step
    /// comes from a later `expire`.
    #[napi(catch_unwind)]
    pub fn complete_bytes(&mut self, env: Env, run: u32, kind: String, data: BufferSlice, more: Option<bool>) -> Result<String> {
        if let Some(step) = self.inner.overdue(run, kind == "thrown", self.now()) {
            return self.reply(&env, step);
        }
        if more == Some(true) {
            if !self.slices.contains_key(&run) && !self.inner.hold(run) {
                return Ok(String::new()); // already answered (cancelled): the rest is a late settlement
            }
            // Kept apart and joined on the thread that shapes them: a growing buffer would copy megabytes here.
            self.slices.entry(run).or_default().push(data.to_vec());
            // Empty, so that the host sends the next slice: nothing here moves a deadline sooner.
            self.keep_alive(&env)?;
            return Ok(String::new());
        }
        let mut slices = self.slices.remove(&run).unwrap_or_default();
        slices.push(data.to_vec());
        if slices.iter().map(Vec::len).sum::<usize>() < OFF_THREAD_BYTES {
            let outcome = Outcome::from_slices(&kind, slices).map_err(fail)?;
            let step = self.inner.complete(run, outcome, self.now());
            return self.reply(&env, step);
        }
        let Some(shaping) = self.inner.begin_shaping(run) else { return Ok(String::new()) };
        self.shaping += 1;
        let (shaped, wake, id) = (self.shaped.clone(), self.wake.clone(), self.id);
        napi::bindgen_prelude::spawn_blocking(move || {
            let done = shaping.run_bytes(&kind, slices);
            lock(&shaped).push(done);
            lock(&wake).call(id, ThreadsafeFunctionCallMode::NonBlocking);
        });
        self.reply(&env, Step::default())
    }

    /// Starts the command of a command tool's run, as its `command(args)` gave it (JSON: argv or shell, cwd, the
    /// whole environment, stdin). Its end comes in a later step's `commands`.
    #[napi(catch_unwind)]
    pub fn spawn_command(&mut self, env: Env, run: u32, invocation_json: String) -> Result<()> {
        let (wake, id) = (self.wake.clone(), self.id);
        let waker: toolgate_core::command::Wake = Arc::new(move || {
            lock(&wake).call(id, ThreadsafeFunctionCallMode::NonBlocking);
        });
        if let Some(task) = self.inner.spawn_command(run, &invocation_json, waker).map_err(fail)? {
            napi::bindgen_prelude::spawn(task);
        }
        self.keep_alive(&env)
    }

    /// A background job's state, as JSON.
    #[napi(catch_unwind)]
    pub fn job_status(&self, id: u32) -> Result<String> {
        Ok(self.inner.commands().job_status(id).map_err(fail)?.to_string())
    }

    /// A page of what a background job wrote to `stream` (`stdout` or `stderr`) from byte `offset`, as JSON.
    #[napi(catch_unwind)]
    pub fn job_output(&self, id: u32, stream: String, offset: f64, limit: u32) -> Result<String> {
        let offset = if offset.is_finite() && offset > 0.0 { offset as u64 } else { 0 };
        Ok(self.inner.commands().job_output(id, &stream, offset, limit as usize).map_err(fail)?.to_string())
    }

    /// Stops a background job (SIGTERM to its group, SIGKILL after the grace); false when it had ended already.
    #[napi(catch_unwind)]
    pub fn kill_job(&self, id: u32) -> Result<bool> {
        self.inner.commands().kill_job(id).map_err(fail)
    }

    /// Stops every command and job, and starts no more (closing the executor).
    #[napi(catch_unwind)]
    pub fn close_commands(&self) {
        self.inner.commands().close();
    }

    /// SIGKILL to every command's group at once: the process is exiting.
    #[napi(catch_unwind)]
    pub fn kill_commands(&self) {
        self.inner.commands().kill_now();
    }

    /// Commands and background jobs whose processes may still run.
    #[napi(getter, catch_unwind)]
    pub fn commands_alive(&self) -> u32 {
        self.inner.commands().alive() as u32
    }

    /// The longest `killGraceMs` of the registered command tools (0 without any): how long a stopped command may
    /// take to be gone.
    #[napi(getter, catch_unwind)]
    pub fn longest_kill_grace_ms(&self) -> u32 {
        self.inner.longest_kill_grace_ms().min(u64::from(u32::MAX)) as u32
    }

    /// Each value of a JSON array with secrets redacted and its size capped, as a trace shows arguments.
    #[napi(catch_unwind)]
    pub fn snapshots(&self, json_array: String) -> Result<String> {
        self.inner.snapshots(&json_array).map_err(fail)
    }

    /// Whether each step reports the stations calls met (`marks`), for a host that watches turns live.
    #[napi(catch_unwind)]
    pub fn observe(&mut self, on: bool) {
        self.inner.observe(on);
    }

    /// A JSON value with secrets redacted and nothing cut, as a recorded turn keeps it; with `jsonTexts`, strings
    /// holding JSON are redacted as the values they hold (a call's arguments as JSON text).
    #[napi(catch_unwind)]
    pub fn redacted(&self, json: String, json_texts: bool) -> Result<String> {
        self.inner.redacted(&json, json_texts).map_err(fail)
    }

    #[napi(catch_unwind)]
    pub fn read_artifact(&self, path: String, offset: f64, limit: Option<f64>, policy_json: String) -> Result<String> {
        // JS numbers, saturated into the engine's range: an offset past any file's end reads as such, not wrapped.
        let count = |n: f64| if n.is_finite() && n > 0.0 { n.min(usize::MAX as f64) as usize } else { 0 };
        self.inner.read_artifact(&path, count(offset), limit.map(count), &policy(&policy_json)?).map_err(fail)
    }

    #[napi(catch_unwind)]
    pub fn search_artifact(&self, path: String, pattern: String, policy_json: String) -> Result<String> {
        self.inner.search_artifact(&path, &pattern, &policy(&policy_json)?).map_err(fail)
    }

    #[napi(catch_unwind)]
    pub fn sweep_artifacts(&self) -> u32 {
        self.inner.sweep_artifacts() as u32
    }

    #[napi(catch_unwind)]
    pub fn remove_artifacts(&self) {
        self.inner.remove_artifacts()
    }

    /// Cancels every open turn in one step (closing the executor).
    #[napi(catch_unwind)]
    pub fn cancel_all(&mut self, env: Env, reason: String, unstarted: Vec<u32>) -> Result<String> {
        let step = self.inner.cancel_all(&reason, &unstarted, self.now());
        self.reply(&env, step)
    }

    /// The host's answer to a request a step made (a check, an approval), as JSON.
    #[napi(catch_unwind)]
    pub fn answer(&mut self, env: Env, ticket: u32, answer_json: String) -> Result<String> {
        let answer = HostAnswer::from_json(&answer_json).map_err(fail)?;
        let step = self.inner.answer(ticket, answer, self.now());
        self.reply(&env, step)
    }

    /// The shared store's answer to a ticket a step sent, whole or in part: a JSON array of one entry per
    /// operation, its reply or null while it is not answered yet.
    #[napi(catch_unwind)]
    pub fn answer_store(&mut self, env: Env, ticket: u32, replies_json: String) -> Result<String> {
        let step = self.inner.answer_store(ticket, &replies_json, self.now());
        self.reply(&env, step)
    }

    /// The prefix of the cache keys `invalidate(tool, args)` forgets, for a shared store to forget its own.
    #[napi(catch_unwind)]
    pub fn cache_prefix(&self, tool: String, args_json: Option<String>) -> Result<String> {
        self.inner.cache_prefix(&tool, args_json.as_deref()).map_err(fail)
    }

    /// The tool's `rollbackWhen` function judged what `run` returned useless; call before completing it.
    #[napi(catch_unwind)]
    pub fn judged(&mut self, run: u32, reason: String) {
        self.inner.judged(run, reason);
    }

    /// The handler of `run` reported progress; false when the run is already over.
    #[napi(catch_unwind)]
    pub fn progress(&mut self, run: u32) -> bool {
        let now = self.now();
        self.inner.progress(run, now)
    }

    /// What listeners see of a progress report (JSON): redacted and cut; null when it is so already.
    #[napi(catch_unwind)]
    pub fn shape_progress(&self, info_json: String) -> Option<String> {
        self.inner.shape_progress(&info_json)
    }

    /// A handler that timed out or was cancelled settled anyway.
    #[napi(catch_unwind)]
    pub fn note_late_settlement(&mut self, tool: String) {
        self.inner.note_late_settlement(&tool);
    }

    /// The engine's counters as JSON, per tool and in total.
    #[napi(catch_unwind)]
    pub fn counters(&self) -> String {
        self.inner.counters(self.now()).to_string()
    }

    /// What the gate holds now as JSON: breakers, and the memory store's cache, buckets and budget counters (at
    /// most `limit` of each list).
    #[napi(catch_unwind)]
    pub fn inspect(&self, limit: u32) -> String {
        self.inner.inspect(self.now(), limit as usize).to_string()
    }

    /// Forgets cached results of `tool`, or only those for the arguments in `args_json`; returns how many.
    #[napi(catch_unwind)]
    pub fn invalidate(&mut self, tool: String, args_json: Option<String>) -> Result<u32> {
        Ok(self.inner.invalidate(&tool, args_json.as_deref()).map_err(fail)? as u32)
    }

    #[napi(catch_unwind)]
    pub fn clear_cache(&mut self) {
        self.inner.clear_cache();
    }

    /// Takes in what was shaped on other threads, then everything whose deadline has passed. `timer`: the host's
    /// own timer (set by a step's `wake`) fired.
    #[napi(catch_unwind)]
    pub fn expire(&mut self, env: Env, timer: Option<bool>) -> Result<String> {
        if timer == Some(true) {
            self.inner.host_timer_fired();
        }
        let now = self.now();
        let shaped = std::mem::take(&mut *lock(&self.shaped));
        self.shaping -= shaped.len();
        let mut step = Step::default();
        for done in shaped {
            step.absorb(self.inner.shaped(done, now));
        }
        step.absorb(self.inner.expire(now));
        self.reply(&env, step)
    }

    /// `unstarted`: runs handed out whose handlers JS had not started when the turn's signal fired.
    #[napi(catch_unwind)]
    pub fn cancel(&mut self, env: Env, turn: u32, reason: String, unstarted: Vec<u32>) -> Result<String> {
        let step = self.inner.cancel(turn, &reason, &unstarted, self.now());
        self.reply(&env, step)
    }

    /// The turn's results: a JSON array, then the outputs of its plain successes (see `results_to_wire`).
    #[napi(catch_unwind)]
    pub fn finish(&mut self, turn: u32) -> Result<Vec<String>> {
        self.inner.finish(turn).map_err(fail)
    }

    #[napi(getter, catch_unwind)]
    pub fn running(&self) -> u32 {
        self.inner.running() as u32
    }

    /// Whether the engine holds Node's event loop open now: a deadline armed, a value shaped on another thread, or a
    /// command running.
    #[napi(getter, catch_unwind)]
    pub fn holding(&self) -> bool {
        self.holding
    }

    fn reply(&mut self, env: &Env, mut step: Step) -> Result<String> {
        self.keep_alive(env)?;
        // On a manual clock only `advance_clock` makes time pass: no timer of the host's may.
        if self.manual.is_none() {
            step.wake = self.inner.host_timer(Instant::now());
        }
        Ok(step.to_wire())
    }

    /// While any deadline is armed, the process must stay up to deliver it (a handler that never settles holds
    /// nothing in Node's event loop); once none is, the engine must not keep Node alive.
    #[allow(deprecated)] // ref/unref of a tsfn: exactly napi_ref_threadsafe_function, which is what is meant
    fn keep_alive(&mut self, env: &Env) -> Result<()> {
        // A running command wakes the engine when it ends, on a manual clock too.
        let hold = (self.manual.is_none() && !self.inner.deadlines().is_empty()) || self.shaping > 0 || self.inner.commands().running() > 0;
        if hold == self.holding {
            return Ok(());
        }
        self.holding = hold;
        if !hold {
            return lock(&self.wake).unref(env);
        }
        if !self.watching && self.manual.is_none() {
            let wake = self.wake.clone();
            let id = self.id;
            napi::bindgen_prelude::spawn(self.inner.deadlines().watch(move || {
                lock(&wake).call(id, ThreadsafeFunctionCallMode::NonBlocking);
            }));
            self.watching = true;
        }
        lock(&self.wake).refer(env)
    }
}

/// `text` fenced as data from outside that reached the model through the tool `source`, as an untrusted tool's output
/// is: for what a host hands the model from outside other than a result (a mounted MCP server's tool descriptions).
#[napi(catch_unwind)]
pub fn fence_untrusted(source: String, text: String) -> String {
    toolgate_core::fence::fence(&source, &text)
}

/// Rust-side spans and events go to stderr when `TOOLGATE_LOG` names a level or filter (`debug`,
/// `toolgate_core=trace`); without it nothing is collected.
fn log_to_stderr() {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        if let Ok(filter) = std::env::var("TOOLGATE_LOG") {
            let filter = tracing_subscriber::EnvFilter::try_new(filter).unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
            let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(false).try_init();
        }
    });
}

fn lock<T>(shared: &Mutex<T>) -> MutexGuard<'_, T> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}
