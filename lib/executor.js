// @ts-check
'use strict'
// The executor. The engine (crates/core, through engine/native.js) runs every station; this layer only runs the
// handlers on the JS thread, turns what they return or throw into strings, and settles them with synchronous calls
// into the engine. See ARCHITECTURE.md, "The boundary". Here: the public class, a turn begun, the engine's steps
// applied and close; in executor/: the tools kept in JS (registry), what only the host answers (host), handlers
// from start to settlement (runs), what listeners and observers hear (reporting), wake-ups and waits (lifecycle).

const { Engine } = require('./engine/native.js')
const observe = require('./observe.js')
const { DEFINITION_FORMATS } = require('./formats.js')
const { abortReasonText, reasonText, textOf } = require('./engine/describe.js')
const { internalFailures, programmerError, policyJson, readResults, serializeCalls } = require('./engine/wire.js')
const { readAbort, readHostRequest, readLate, readProgress, readSettled, readStart, readStoreTicket } = require('./engine/wire.generated.js')
const { ToolTurn, TurnFeed } = require('./executor/turn.js')
const { ENGINE_OPTIONS, LISTENER_OPTIONS, OBSERVER_OPTIONS, TURN_OPTIONS, finiteNumbers, offAsOptions, pick, takeListeners, takeObservers } = require('./options.js')
const { warn } = require('./callbacks.js')
const { takeStore, runTickets } = require('./shared-store.js')
const { readCommandSpec, jobToolSpecs } = require('./commands.js')
const { setTimeout, clearTimeout, now, preciseNow } = require('./timers.js')
const { Registry, artifactTools, jobCalls } = require('./executor/registry.js')
const { HostRequests } = require('./executor/host.js')
const { Reporter } = require('./executor/reporting.js')
const { Runs } = require('./executor/runs.js')
const { Watchers } = require('./executor/watching.js')
const { Recorder, readRecordOptions } = require('./executor/recording.js')
const { live, withCommands, killCommandsAtExit, wake, withinTime, lookUntil, sweepArtifactsWhileAlive } = require('./executor/lifecycle.js')

/** Why the calls of turns still open when the executor closes end cancelled. */
const CLOSED = 'the tool executor was closed'
/** Why a call a tapped stream completed after its turn ended was not run. */
const ARRIVED_LATE = 'the turn had ended before the stream completed this call'
/** Shared-store batches `close()` waits for at most (a store that never answers leaves the rest unwatched). */
const MAX_STORE_BATCHES = 10_000
/** Past a command's grace for SIGTERM, how long its SIGKILLed processes may take to be reaped. */
const COMMANDS_GONE_MARGIN_MS = 1_000
/** How long `close()` waits for handlers still running after their calls ended, unless told otherwise: well inside
 * a test runner's default test timeout (5 s in vitest and jest), so that `afterEach(() => gate.close())` never fails
 * a test; a longer graceful wait is `close({ timeoutMs })`. */
const CLOSE_TIMEOUT_MS = 1_000
/** How long a tool's check, or a schema's own validation, may take unless the executor says otherwise (the
 * engine's default for `checkTimeoutMs`). */
const CHECK_TIMEOUT_MS = 10_000
/** What a clock a test moves (toolgate/testing's `manualClock()`) offers an executor under this key: `attach(driver)`
 * and its own `setTimeout`/`clearTimeout`. A global symbol: every copy of the package knows it. */
const CLOCK = Symbol.for('toolgate.clock')
/** The turn option under which `replay()` of toolgate/testing hands a turn what its handlers, checks, costs and
 * approvals answered when it was recorded (`handler(name, index, attempt)`, `answer(kind, index)`). A global symbol, as
 * the clock's. */
const REPLAY = Symbol.for('toolgate.replay')
/** The method that makes a gate like this one on a replay's clock (`gate[TWIN]({ clock })`), for a page that replays a
 * recording against the gate it shows. A global symbol, as the clock's. */
const TWIN = Symbol.for('toolgate.twin')

class ToolExecutor {
  #engine
  /** The store shared between processes, when the executor has one (`store` option). */
  #store
  /** Its batches not answered yet: `close()` waits for them, so that what they took (a lease, a token) goes back. */
  #storeBatches = new Set()
  /** The tools' handlers and the functions of their specs that run in JS. */
  #tools = new Registry()
  /** What a twin is made of: the engine's options as given, and each registered tool's spec, by name. */
  #settings
  #specs = new Map()
  /** What the engine asks of the application's functions before a call runs. */
  #host
  /** What the listeners and observers hear. */
  #reporter
  #turns = new Map()
  /** The handlers, from start to settlement. */
  #runs
  #listeners
  /** Where finished turns are reported: `{ onTrace?, auditSink?, onRecord?, otel?, tracer? }`; undefined when nowhere. */
  #observers
  #closed = false
  /** Mounted tools left out of a format's definitions already warned about (`format\u0001name`). */
  #leftOut = new Set()
  /** Set while `close()` waits for the last abandoned handler and the last turn (a large value still crossing or
   * being shaped ends its turn after the cancellation). */
  #onIdle = null
  /** The one `close()` in progress or done: closing twice waits for the same thing. */
  #closing = null
  /** The engine's stage sequences by id, as its results name them. */
  #stages = []
  /** The timers of the executor's own waits on JS work (an edited approval's checks): the real ones, or a manual
   * clock's. */
  #timers = { setTimeout, clearTimeout }
  /** What a manual clock moves, held here so that the clock, which holds it weakly, lets a dropped executor go.
   * While a turn is open the clock holds it strongly instead of `live`: only the clock can end such a turn, so a
   * test that drops both lets both go. */
  #clockDriver
  #clockHooks
  /** The timer that calls the engine back at its next deadline (see `#armWake`). */
  #wakeTimer
  /** Who watches turns live (`watch`). */
  #watchers
  /** Where turns are recorded (`record` option), when they are. */
  #recorder
  /** The time as the executor's deadlines run on it, in epoch ms to a fraction: a test's clock's, when it has one. */
  #now = preciseNow

  /** @param {import('../index').ExecutorOptions} [options] */
  constructor(options = {}) {
    if (options === null || typeof options !== 'object') throw new TypeError('new ToolExecutor(options): options must be an object')
    const engineOptions = pick(options, [...ENGINE_OPTIONS, ...LISTENER_OPTIONS, ...OBSERVER_OPTIONS, 'clock', 'store', 'record'], 'ToolExecutor options')
    this.#settings = Object.fromEntries(ENGINE_OPTIONS.filter((key) => options[key] !== undefined).map((key) => [key, options[key]]))
    const shared = takeStore(engineOptions)
    this.#store = shared?.store
    if (shared) engineOptions.store = shared.engine
    const { clock, record } = engineOptions
    delete engineOptions.clock
    delete engineOptions.record
    const recordOptions = record === undefined ? undefined : readRecordOptions(record)
    const clockHooks = clock?.[CLOCK]
    if (clock !== undefined && typeof clockHooks?.attach !== 'function') {
      throw new TypeError('ToolExecutor options: clock must be a clock of toolgate/testing (manualClock())')
    }
    this.#listeners = takeListeners(engineOptions, 'ToolExecutor options')
    this.#observers = takeObservers(engineOptions, this.#listeners.onTrace)
    // Stage timings cost a little per call: results carry them when asked (`trace: true`, for timelines) or when
    // trace events or audit records are wanted.
    if (this.#observers?.onTrace || this.#observers?.auditSink || this.#observers?.onRecord) engineOptions.trace = true
    const json = JSON.stringify(offAsOptions(engineOptions), finiteNumbers('ToolExecutor options'))
    this.#engine = programmerError(() => new Engine(json, wake, clockHooks !== undefined))
    this.#reporter = new Reporter({ engine: this.#engine, listeners: this.#listeners, observers: this.#observers, guard: (work) => this.#guard(work) })
    this.#runs = new Runs({
      engine: this.#engine,
      tools: this.#tools,
      reporter: this.#reporter,
      drive: (engineCall) => this.#drive(engineCall),
      guard: (work) => this.#guard(work),
      turnOf: (id) => this.#turns.get(id),
      awake: () => live.set(this.#engine.id, this.#wakeDriver),
      releaseIfIdle: () => this.#releaseIfIdle(),
      settledAll: () => {
        if (this.#turns.size === 0) this.#onIdle?.()
      },
    })
    this.#watchers = new Watchers({ engine: this.#engine, reporter: this.#reporter })
    this.#host = new HostRequests({
      tools: this.#tools,
      engine: this.#engine,
      drive: (engineCall) => this.#drive(engineCall),
      turnOf: (id) => this.#turns.get(id),
      checkTimeoutMs: engineOptions.checkTimeoutMs ?? CHECK_TIMEOUT_MS,
      timers: () => this.#timers,
      watchers: this.#watchers,
      traceIdOf: this.#traceIdOf,
    })
    sweepArtifactsWhileAlive(this.#engine)
    if (clockHooks) this.#onClock(clockHooks)
    if (recordOptions) {
      this.#recorder = new Recorder(recordOptions, { engine: this.#engine, now: () => this.#now(), failed: (message) => this.#reporter.recordFailed(message) })
    }
  }

  /** Every deadline the engine keeps, and the executor's own waits, run on a clock a test moves. */
  #onClock(hooks) {
    this.#clockHooks = hooks
    // `?.`: a clock of an older copy of the package offers no `now`.
    if (typeof hooks.now === 'function') this.#now = hooks.now
    // Its timers are tracked: `close()` clears them, so that the clock holds nothing of a closed executor.
    const waits = new Set()
    this.#timers = {
      setTimeout: (fn, ms) => {
        const id = hooks.setTimeout(() => {
          waits.delete(id)
          fn()
        }, ms)
        waits.add(id)
        return id
      },
      clearTimeout: (id) => {
        waits.delete(id)
        hooks.clearTimeout(id)
      },
      clearAll: () => {
        for (const id of waits) hooks.clearTimeout(id)
        waits.clear()
      },
    }
    this.#clockDriver = {
      nextDeadlineMs: () => (this.#closed ? null : this.#engine.nextDeadlineMs()),
      advance: (ms) => {
        if (this.#closed) return
        this.#drive(() => this.#engine.advanceClock(ms))
        this.#guard(() => this.#engine.sweepArtifacts())
        this.#releaseIfIdle()
      },
    }
    hooks.attach(this.#clockDriver)
  }

  /** Registers a tool. Throws at once when the spec cannot work (bad name, schema that does not compile, duplicate). */
  register(spec) {
    return this.#register(spec, undefined)
  }

  /**
   * Registers a command tool: each call runs the process its `command(args)` names, spawned, read and stopped by
   * the engine (see the README's "Command tools"). Throws at once when the spec cannot work, and on Windows.
   */
  registerCommand(spec) {
    const { tool, limits, background, invocation } = readCommandSpec(spec, process.platform)
    const handler = (args, ctx) => this.#runs.runCommand(ctx, invocation(args, ctx))
    this.#register({ ...tool, handler }, limits)
    killCommandsAtExit(this.#engine)
    if (background && !this.#tools.handlers.has('job_status')) {
      for (const jobTool of jobToolSpecs(jobCalls(this.#engine))) this.register(jobTool)
    }
    return this
  }

  /** `command`: for a command tool, what the engine keeps of its process's limits. */
  #register(spec, command) {
    const { json, kept } = this.#tools.read(spec, command)
    programmerError(() => this.#engine.register(json))
    this.#tools.keep(spec.name, kept)
    this.#specs.set(spec.name, [spec, command])
    return this
  }

  /** A gate like this one on `clock`: the same options and tools, its own memory store, no observers, no recording,
   * so that a replay against it changes nothing of this one's state or a shared store's. */
  [TWIN]({ clock }) {
    const twin = new ToolExecutor({ ...this.#settings, clock })
    for (const [spec, command] of this.#specs.values()) twin.#register(spec, command)
    return twin
  }

  /**
   * Registers `read_artifact` and `search_artifact`, with which a model pages through an output that was too long
   * to show and was saved to an artifact. They read only this executor's artifacts.
   */
  registerArtifactTools() {
    for (const tool of artifactTools(this.#engine)) this.register(tool)
    return this
  }

  unregister(name) {
    this.#tools.remove(name)
    this.#specs.delete(name)
    return this.#engine.unregister(String(name))
  }

  /** A mounted tool a format cannot take is left out of its definitions, with a warning once per tool and format. */
  #warnLeftOut(format, name, reason) {
    const key = `${format}\u0001${name}`
    if (this.#leftOut.has(key)) return
    this.#leftOut.add(key)
    warn(`the mounted tool "${name}" is left out of definitions('${format}')`, reason)
  }

  /** The registered tools (without handlers), optionally only those a context may use. */
  list(options = {}) {
    return JSON.parse(this.#engine.list(policyJson(options.context)))
  }

  /** The registered tools as a provider's tool definitions. */
  definitions(format, options = {}) {
    if (!DEFINITION_FORMATS.includes(format)) {
      throw new TypeError(`definitions(format): format must be one of ${DEFINITION_FORMATS.join(', ')}; got ${String(format)}`)
    }
    const policy = policyJson(options.context)
    const { definitions: defs, leftOut } = JSON.parse(programmerError(() => this.#engine.definitions(format, policy)))
    for (const [name, reason] of leftOut) this.#warnLeftOut(format, name, reason)
    if (format !== 'ai-sdk' || typeof options.jsonSchema !== 'function') return defs
    // With the AI SDK's jsonSchema helper: the `tools` record generateText/streamText take (no execute: toolgate runs them).
    return Object.fromEntries(defs.map((d) => {
      const tool = { description: d.description, inputSchema: options.jsonSchema(d.inputSchema) }
      if (d.outputSchema !== undefined) tool.outputSchema = options.jsonSchema(d.outputSchema)
      return [d.name, tool]
    }))
  }

  /**
   * Watches turns live: `listener(events)` hears, in batches, each turn as it begins, its calls, each station a call
   * meets as it meets it (a wait begun, a decision, the call sealed), each handler started, each question put to the
   * application, and the results. Returns what stops it. Nothing of it is done while nobody watches. With
   * `approve`, the watcher also answers the approvals of the calls it follows, beside the approval callback: the
   * first answer decides.
   */
  watch(listener, options) {
    return this.#watchers.add(listener, options)
  }

  #traceIdOf = (turnId) => this.#reporter.traceId(turnId)

  /** How many handlers are running now, across all turns. */
  get running() {
    return this.#engine.running
  }

  /** Every handler that has not settled: running ones, and those whose calls already timed out or were cancelled. */
  pendingHandlers() {
    return this.#runs.pending()
  }

  /** Per tool and in total: calls, successes, failures by kind, latency percentiles, in flight, and the counters. */
  stats() {
    const stats = JSON.parse(this.#engine.counters())
    if (this.#recorder) stats.recording = this.#recorder.counts()
    return stats
  }

  /** `stats()` in Prometheus text format, for a Node server's `/metrics`. */
  prometheus() {
    return observe.prometheus(this.stats())
  }

  /** Each tool's status (`ok`, `degraded`, `failing`) from its error and timeout rates, and the worst of them. */
  healthReport() {
    return observe.healthReport(this.stats(), this.pendingHandlers())
  }

  /** What the gate holds now: each breaker (state, its window's calls and failures, the wait before a trial), and
   * the memory store's cache, sessions, rate-limit buckets and budget counters, the `limit` most used of each. */
  inspect({ limit = 50 } = {}) {
    if (!Number.isInteger(limit) || limit < 0) throw new TypeError('inspect({ limit }): limit must be a whole number of entries, 0 or more')
    return JSON.parse(this.#engine.inspect(Math.min(limit, 0xffffffff)))
  }

  /** Forgets cached results of `tool`, or only those for `args`; returns how many were dropped. With a shared
   * store, every process forgets them: the count comes as a promise, once the store has dropped them. */
  invalidate(tool, args) {
    if (typeof tool !== 'string') throw new TypeError('invalidate(tool, args?): tool must be a tool name')
    const argsJson = args === undefined ? undefined : JSON.stringify(args)
    const dropped = this.#engine.invalidate(tool, argsJson)
    return this.#store ? this.#sharedInvalidation(this.#engine.cachePrefix(tool, argsJson)) : dropped
  }

  /** Forgets every cached result (in every process, with a shared store: then a promise of how many). */
  clearCache() {
    this.#engine.clearCache()
    return this.#store ? this.#sharedInvalidation('') : undefined
  }

  /** The shared store's invalidation: a caller that awaits it learns when it failed; one that does not (as with the
   * memory store) must not have its process brought down by an unhandled rejection. */
  #sharedInvalidation(prefix) {
    const done = Promise.resolve().then(() => this.#store.invalidate(prefix))
    done.catch(() => {})
    return done
  }

  /**
   * Cancels every open turn, then waits (at most `timeoutMs`) for handlers still running to settle. Resolves to
   * the handlers that were still running at the end; after it, `execute` rejects.
   */
  close(options) {
    this.#closing ??= this.#close(options)
    return this.#closing
  }

  async #close(options) {
    this.#closed = true
    this.#timers.clearAll?.()
    clearTimeout(this.#wakeTimer)
    const timeoutMs = options?.timeoutMs ?? CLOSE_TIMEOUT_MS
    const started = now()
    const closeBy = started + timeoutMs
    for (const turn of this.#turns.values()) {
      turn.abortReason = new DOMException('The tool executor was closed', 'AbortError')
      turn.recording?.cancelled(CLOSED, { closed: true })
    }
    this.#runs.sendSettled()
    const unstarted = [...this.#runs.notStarted.keys()]
    this.#runs.notStarted.clear()
    this.#guard(() => this.#engine.closeCommands())
    this.#drive(() => this.#engine.cancelAll(CLOSED, unstarted))
    if (this.#runs.abandoned.size > 0 || this.#turns.size > 0) {
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, timeoutMs)
        this.#onIdle = () => {
          clearTimeout(timer)
          resolve()
        }
      })
      this.#onIdle = null
    }
    await this.#storeAnswered(closeBy - now())
    // A command stopped now is gone once its grace for SIGTERM has passed and SIGKILL has done its work: close()
    // waits that long for it, whatever the wait for handlers.
    await this.#commandsGone(Math.max(closeBy, started + this.#engine.longestKillGraceMs + COMMANDS_GONE_MARGIN_MS))
    this.#guard(() => this.#engine.removeArtifacts())
    this.#observers?.auditSink?.close()
    this.#recorder?.close()
    const stillRunning = this.pendingHandlers()
    // Handlers that never settle are the application's to find in `stillRunning`; the executor lets them go.
    this.#runs.abandoned.clear()
    return { stillRunning }
  }

  /** Waits (until `by`) for the processes of commands and jobs `close()` stopped to be gone; once they are, the
   * process's exit has nothing of this executor to kill. */
  async #commandsGone(by) {
    await lookUntil(() => this.#engine.commandsAlive === 0 || now() >= by)
    if (this.#engine.commandsAlive === 0) withCommands.delete(this.#engine)
  }

  /** Waits (at most `timeoutMs`, in real time: the store's answers are real I/O) for the shared store's batches
   * still out, and the give-backs their answers send. */
  #storeAnswered(timeoutMs) {
    if (this.#storeBatches.size === 0 || timeoutMs <= 0) return undefined
    return withinTime(this.#allStoreAnswered(), timeoutMs, { setTimeout, clearTimeout })
  }

  async #allStoreAnswered() {
    // An answer may send give-backs of its own, in a batch of their own: wait for those too.
    while (this.#storeBatches.size > 0) await Promise.allSettled([...this.#storeBatches])
  }

  /**
   * Runs one turn of tool calls. Resolves to one ToolResult per call, in input order; rejects only for
   * programmer errors (calls not an array, a malformed context or signal).
   */
  execute(calls, options) {
    let list, opened
    try {
      if (this.#closed) throw new TypeError('execute(calls): this ToolExecutor is closed')
      if (!Array.isArray(calls)) throw new TypeError(`execute(calls): calls must be an array of tool calls, got ${typeof calls}`)
      // The turn's own copy: the caller may change the array while it runs, and a hole in it is a call too.
      list = Array.from(calls)
      const json = serializeCalls(list)
      opened = this.#open(options, 'execute(calls, ', list, (read) => this.#engine.begin(json, read.policy, read.turnJson, read.cancelled))
    } catch (err) {
      return Promise.reject(err)
    }
    return this.#whole(opened, list)
  }

  /** A turn handed over whole, once opened (`#open`): its results, or the engine's failure answered for each call. */
  #whole(opened, list) {
    if (typeof opened === 'string') return Promise.resolve(internalFailures(list, opened))
    return new Promise((resolve) => {
      opened.resolve = resolve
      this.#started(opened)
    })
  }

  /**
   * Opens a streaming turn: calls are added as they arrive (`add`), each started as soon as the scheduler
   * allows, until `end()`. See `ToolTurn`. Throws only for programmer errors, as `execute` rejects.
   */
  turn(options) {
    if (this.#closed) throw new TypeError('turn(): this ToolExecutor is closed')
    let turn
    const feed = new TurnFeed()
    const control = {
      add: (call) => {
        const json = serializeCalls([call])
        turn.calls.push(call)
        turn.recording?.arrived()
        if (this.#watchers.on) this.#watchers.calls(turn.calls, turn.calls.length - 1, this.#traceIdOf(turn.id))
        this.#drive(() => this.#engine.add(turn.id, json))
        this.#releaseIfIdle()
      },
      end: () => {
        turn.recording?.ended()
        this.#drive(() => this.#engine.end(turn.id))
      },
      cancel: (reason) => this.#cancelTurn(turn, reason ?? new DOMException('The turn was cancelled', 'AbortError')),
      // Calls a tapped stream completes after the turn took its last: each answered, not run, in a turn begun
      // cancelled (even once the executor is closed), so that every call the model sent has its result.
      late: (calls) => {
        const list = Array.from(calls)
        const json = serializeCalls(list)
        const opened = this.#open({ context: turn.context }, 'turn(', list, (read) => this.#engine.begin(json, read.policy, read.turnJson, ARRIVED_LATE))
        if (typeof opened !== 'string') opened.recording?.cancelled(ARRIVED_LATE, { before: true })
        return this.#whole(opened, list)
      },
    }
    const opened = this.#open(options, 'turn(', [], (read) => this.#engine.beginStreaming(read.policy, read.turnJson, read.cancelled), true)
    if (typeof opened === 'string') {
      warn('the engine failed to begin a streaming turn, so it takes no calls', opened)
      feed.finish([])
    } else {
      turn = opened
      turn.streaming = feed
      turn.resolve = (all) => feed.finish(all)
      this.#started(turn)
    }
    return new ToolTurn(control, feed)
  }

  /**
   * A turn's options read, its signal listened to, and the engine asked to begin it (`begin(read)` gives the
   * step). Returns the turn, or the engine's failure as text; throws a programmer's error, `label` naming the
   * method that was called.
   */
  #open(options, label, list, begin, streaming = false) {
    let turn
    let { signal, context, onProgress, approve, [REPLAY]: standIn, ...turnOptions } = options ?? {}
    if (onProgress !== undefined && typeof onProgress !== 'function') throw new TypeError(`${label}{ onProgress }): onProgress must be a function`)
    if (approve !== undefined && typeof approve !== 'function') throw new TypeError(`${label}{ approve }): approve must be a function (request) => answer`)
    const turnJson = JSON.stringify(pick(turnOptions, TURN_OPTIONS, label === 'turn(' ? 'turn options' : 'execute options'))
    if (signal != null && !(typeof signal.aborted === 'boolean' && typeof signal.addEventListener === 'function' && typeof signal.removeEventListener === 'function')) {
      throw new TypeError(`${label}{ signal }): signal must be an AbortSignal`)
    }
    // A replayed turn that began cancelled begins so again, as the engine was told.
    const cancelled = standIn?.cancelled ?? (signal?.aborted ? abortReasonText(signal.reason) : undefined)
    const policy = policyJson(context)
    // Listening before the engine begins the turn: a signal that cannot be listened to rejects, beginning nothing.
    let onAbort = null
    if (signal && !signal.aborted) {
      onAbort = () => {
        if (turn !== undefined) this.#cancelTurn(turn, signal.reason)
      }
      signal.addEventListener('abort', onAbort, { once: true })
    }
    let step
    try {
      step = JSON.parse(programmerError(() => begin({ policy, turnJson, cancelled })))
    } catch (err) {
      if (onAbort) unlisten(signal, onAbort)
      if (err instanceof TypeError) throw err
      return textOf(err)
    }
    // `sent`: the text each call's handler settled with, which the engine does not send back when it is the output.
    turn = { id: step.turn, resolve: undefined, context, signal, onProgress, approve: approve ?? this.#listeners.approve, onAbort, abortReason: undefined, calls: list, span: undefined, sent: [], parsed: undefined, streaming: undefined, step, standIn, recording: undefined }
    const recording = this.#recorder?.begin({ calls: list, turnOptions: JSON.parse(turnJson), context, streaming })
    if (cancelled !== undefined) recording?.cancelled(cancelled, { before: true })
    turn.recording = recording
    return turn
  }

  /** A turn the engine has begun: kept, and the step that began it applied. */
  #started(turn) {
    const otel = this.#observers?.otel
    if (otel) turn.span = observe.startTurnSpan(otel, this.#observers.tracer, turn.calls.length)
    this.#turns.set(turn.id, turn)
    live.set(this.#engine.id, this.#wakeDriver)
    if (this.#watchers.on) this.#watchers.turn(turn, this.#traceIdOf(turn.id))
    const step = turn.step
    turn.step = undefined
    this.#guard(() => this.#applyStep(step))
    this.#releaseIfIdle()
  }

  /** As the turn's signal firing: running and waiting calls end as cancelled. */
  #cancelTurn(turn, reason) {
    if (!this.#turns.has(turn.id)) return
    this.#runs.sendSettled() // a handler that settled before the abort keeps its result
    turn.abortReason = reason
    turn.recording?.cancelled(reasonText(reason))
    this.#drive(() => this.#engine.cancel(turn.id, abortReasonText(reason), this.#runs.takeUnstarted(turn.id)))
  }

  /** What the engine's wake-up runs: its deadlines and off-thread work taken in. The executor stays reachable from
   * `live` while its engine holds Node's event loop open (an open turn, an armed deadline, a value being shaped),
   * so that no wake-up finds nobody. */
  #wakeDriver = (timer) => {
    this.#drive(() => this.#engine.expire(timer === true))
    this.#releaseIfIdle()
  }

  /** The engine's next deadline, on this thread's own real-time timer: it fires on time, where a wake-up sent from
   * the engine's watcher thread waits its turn on a busy event loop (the watcher still covers what it misses). It
   * holds neither the process open nor the executor: a timer left from a finished turn finds nothing due. */
  #armWake(ms) {
    clearTimeout(this.#wakeTimer)
    if (this.#closed) return
    const executor = new WeakRef(this)
    this.#wakeTimer = setTimeout(() => {
      const alive = executor.deref()
      if (alive !== undefined) alive.#wakeDriver(true)
    }, ms)
    this.#wakeTimer.unref()
  }

  #releaseIfIdle() {
    const turnsOpen = this.#turns.size > 0
    // `hold?.`: a clock of an older copy of the package (the symbol is global) offers only `attach`.
    if (this.#clockDriver) this.#clockHooks.hold?.(this.#clockDriver, turnsOpen)
    // On a manual clock no deadline wakes the engine: only a value shaped on another thread does.
    const waiting = (turnsOpen && !this.#clockDriver) || this.#runs.crossing.size > 0 || this.#engine.holding
    if (!waiting) live.delete(this.#engine.id)
  }

  /** An engine call of the turn machinery, and the step it answers applied. */
  #drive(engineCall) {
    this.#guard(() => {
      const wire = engineCall()
      if (wire !== '') this.#applyStep(JSON.parse(wire))
    })
  }

  /** The engine answers a bug on one call's data in that call's result. Should anything in the turn machinery
   * throw all the same, every open turn ends at once with an error result for each of its calls: none may hang,
   * and nothing escapes into the event loop. */
  #guard(work) {
    try {
      work()
    } catch (err) {
      this.#engineFailed(textOf(err))
    }
  }

  #engineFailed(bug) {
    warn('the engine failed, so every open turn ends with an error result for each call', bug)
    // All the bookkeeping first, then the application's code (abort listeners, the turns' continuations), which
    // may start new turns: those are not this failure's.
    const turns = [...this.#turns.values()]
    this.#turns.clear()
    const taken = this.#runs.takeAll()
    // The engine, if it still answers, forgets those turns and their deadlines, which would keep the process up;
    // the stage sequences it sends with them keep the two tables in step.
    try {
      const wire = this.#engine.cancelAll('toolgate failed', [])
      for (const turnId of wire === '' ? [] : JSON.parse(wire).done ?? []) readResults(this.#engine.finish(turnId), [], this.#stages)
    } catch {
      // It does not: nothing more to do for it.
    }
    this.#runs.endAll(taken)
    for (const turn of turns) {
      if (turn.onAbort) unlisten(turn.signal, turn.onAbort)
      // A streaming turn keeps the results it already handed on; only the calls still in the engine fail.
      const failing = Array.from(turn.streaming ? turn.streaming.untaken(turn.calls.length) : turn.calls.keys())
      const failures = internalFailures(failing.map((i) => turn.calls[i]), bug)
      if (this.#watchers.on) this.#watchersHear(turn.id, failing, failures)
      turn.resolve(turn.streaming ? turn.streaming.whole(turn.calls.length, failures) : failures)
    }
    this.#releaseIfIdle()
    if (this.#runs.abandoned.size === 0 && this.#turns.size === 0) this.#onIdle?.()
  }

  /** @param {import('./engine/wire.generated').Step} step */
  #applyStep(step) {
    // Before any application code runs (an abort listener may add a call): these turns take no more.
    if (step.ended) for (const turnId of step.ended) this.#turns.get(turnId)?.streaming?.close()
    if (step.wake !== undefined) this.#armWake(step.wake)
    // Runs handed out are known before any application code runs (an abort listener may cancel the turn).
    const starts = step.start?.map(readStart)
    const watching = this.#watchers.on
    if (watching) this.#watchers.step(step, this.#traceIdOf)
    if (starts) for (const { run, turn } of starts) this.#runs.notStarted.set(run, turn)
    if (step.late) for (const late of step.late) this.#runs.overdue(readLate(late))
    if (step.breaker) for (const change of step.breaker) this.#reporter.breaker(change)
    if (step.host) {
      for (const record of step.host) {
        const request = readHostRequest(record)
        if (watching) this.#watchers.asked(request, this.#traceIdOf)
        this.#host.ask(request)
      }
    }
    if (step.store) {
      const batch = runTickets(this.#store, step.store.map(readStoreTicket), (ticket, json) => this.#drive(() => this.#engine.answerStore(ticket, json)))
      // Kept only up to a bound: a store whose batches never settle must not grow this set for ever.
      if (this.#storeBatches.size < MAX_STORE_BATCHES) {
        this.#storeBatches.add(batch)
        batch.finally(() => this.#storeBatches.delete(batch))
      }
    }
    if (step.abort) for (const abort of step.abort) this.#runs.abort(readAbort(abort))
    if (step.progress) for (const progress of step.progress) this.#runs.commandProgress(readProgress(progress))
    if (step.commands) for (const run of step.commands) this.#runs.commandEnded(run)
    if (starts) {
      for (const start of starts) {
        if (watching) this.#watchers.started(start, this.#traceIdOf)
        this.#runs.start(start)
      }
    }
    if (step.settled) this.#settled(step.settled)
    if (step.done) for (const turnId of step.done) this.#finish(turnId)
  }

  /** Results of streaming turns sealed in this step: taken from the engine, one crossing per turn, and handed to
   * the turn as they came. */
  #settled(records) {
    const byTurn = new Map()
    for (const record of records) {
      const { turn, index } = readSettled(record)
      const indices = byTurn.get(turn)
      if (indices === undefined) byTurn.set(turn, [index])
      else indices.push(index)
    }
    for (const [turnId, indices] of byTurn) {
      const turn = this.#turns.get(turnId)
      if (turn === undefined) continue
      const results = readResults(this.#engine.takeSettled(turnId, Uint32Array.from(indices)), indices.map((i) => turn.sent[i]), this.#stages)
      if (this.#watchers.on) this.#watchers.results(this.#traceIdOf(turnId), indices, results)
      indices.forEach((index, i) => turn.streaming.settled(index, results[i]))
    }
  }

  /** A turn's last results (those of the calls at `indices`, in that order), and that it is done, to its watchers. */
  #watchersHear(turnId, indices, results) {
    this.#watchers.results(this.#traceIdOf(turnId), indices, results)
    this.#watchers.done(this.#traceIdOf(turnId))
  }

  /** What the engine still holds of a streaming turn's results (those at `untaken`: no step named them settled), in
   * call order. */
  #untaken(turn, untaken) {
    return readResults(this.#engine.finish(turn.id), untaken.map((i) => turn.sent[i]), this.#stages)
  }

  #finish(turnId) {
    const turn = this.#turns.get(turnId)
    if (turn === undefined) return
    // Read while the turn is still open: should reading fail, the guard finds it and answers it.
    const untaken = turn.streaming?.untaken(turn.calls.length)
    const results = turn.streaming ? turn.streaming.whole(turn.calls.length, this.#untaken(turn, untaken)) : readResults(this.#engine.finish(turnId), turn.sent, this.#stages)
    if (this.#watchers.on) {
      const indices = untaken ?? [...results.keys()]
      this.#watchersHear(turnId, indices, indices.map((i) => results[i]))
    }
    this.#turns.delete(turnId)
    this.#releaseIfIdle()
    if (turn.onAbort) unlisten(turn.signal, turn.onAbort)
    // A streaming turn's span was begun before its calls came.
    if (turn.streaming) turn.span?.setAttribute('toolgate.calls', results.length)
    this.#reporter.finished(turn, results)
    turn.recording?.finish(results)
    turn.resolve(results)
    if (this.#turns.size === 0 && this.#runs.abandoned.size === 0) this.#onIdle?.()
  }
}

/** Stops listening to a turn's signal; a signal-like object that fails at it costs nothing more. */
function unlisten(signal, onAbort) {
  try {
    signal.removeEventListener('abort', onAbort)
  } catch {
    // Its listener stays; it checks that its turn is still open before doing anything.
  }
}

module.exports = { ToolExecutor }
