'use strict'
// The executor. The engine (crates/core, through native.js) runs every station; this layer only runs the handlers
// on the JS thread, turns what they return or throw into strings, and settles them with synchronous calls into the
// engine. See ARCHITECTURE.md, "The boundary".

const { Engine } = require('./engine/native.js')
const observe = require('./observe.js')
const { DEFINITION_FORMATS } = require('./formats.js')
const { describeReturn, describeThrown, abortReasonText, errorAsData, jsonOf, textOf, reprOf } = require('./engine/describe.js')
const { argumentsOf, internalFailures, programmerError, policyJson, readResults, serializeCalls } = require('./engine/wire.js')
const { ENGINE_OPTIONS, LISTENER_OPTIONS, OBSERVER_OPTIONS, SPEC_FIELDS, TURN_OPTIONS, finiteNumbers, offAsOptions, pick, takeListeners, takeObservers } = require('./options.js')
const { callHost, describeProblem, readApproval, judgeValue, callListener, warn } = require('./callbacks.js')
const { toolSchema, validationResult } = require('./schemas.js')
const { takeStore, runTickets } = require('./shared-store.js')
const { readCommandSpec, jobToolSpecs } = require('./commands.js')
const { setTimeout, clearTimeout, setInterval, clearInterval, setImmediate, queueMicrotask, now } = require('./timers.js')

/** Records kept of handlers that were stopped but have not settled (`pendingHandlers()`, late settlements). */
const MAX_ABANDONED = 10_000
/** Shared-store batches `close()` waits for at most (a store that never answers leaves the rest unwatched). */
const MAX_STORE_BATCHES = 10_000
/** How long `close()` waits for handlers still running after their calls ended, unless told otherwise. */
const CLOSE_TIMEOUT_MS = 5_000
/** Strings at least this long cross as UTF-8 bytes, a slice of this many characters per turn of the event loop:
 * encoding 10 MB at once would stall the loop for 15–20 ms. The engine shapes them off the JS thread. */
const LARGE_CHARS = 256 * 1024
/** How long a tool's check, or a schema's own validation, may take unless the executor says otherwise (the
 * engine's default for `checkTimeoutMs`). */
const CHECK_TIMEOUT_MS = 10_000
/** What a handler's promise resolves to when its call ended while a retry's validation was still running: the
 * handler never started. */
const NEVER_STARTED = Symbol('never started')
/** What a command tool's call resolves to when the engine reports its command ended (the engine holds the rest). */
const COMMAND_ENDED = Symbol('command ended')
/** How often `close()` and `job_kill` look whether the processes they stopped are gone. */
const COMMAND_POLL_MS = 20
/** What a clock a test moves (toolgate/testing's `manualClock()`) offers an executor under this key: `attach(driver)`
 * and its own `setTimeout`/`clearTimeout`. A global symbol: every copy of the package knows it. */
const CLOCK = Symbol.for('toolgate.clock')
/** How often artifacts past their TTL are looked for. */
const SWEEP_MS = 60_000
/** The most characters `read_artifact` returns per call (the engine's cap), and room for its header. */
const ARTIFACT_PAGE_CHARS = 20_000

/**
 * Executors with a turn in flight, by engine id. Held strongly while a turn is open so that a turn waiting only
 * on a deadline is never collected; the engine's wake-up finds its executor here.
 */
const live = new Map()

/** Engines with command tools: their processes get SIGKILL when this process (or worker) exits. */
const withCommands = new Set()
let exitHooked = false

function killCommandsAtExit(engine) {
  withCommands.add(engine)
  if (exitHooked) return
  exitHooked = true
  process.on('exit', () => {
    for (const e of withCommands) {
      try {
        e.killCommands()
      } catch {
        // An engine that cannot answer holds no process to kill.
      }
    }
  })
}

function wake(engineId) {
  const onWake = live.get(engineId)
  if (onWake) onWake()
}

class ToolExecutor {
  #engine
  /** The store shared between processes, when the executor has one (`store` option). */
  #store
  /** Its batches not answered yet: `close()` waits for them, so that what they took (a lease, a token) goes back. */
  #storeBatches = new Set()
  #handlers = new Map()
  /** `rollbackWhen` functions, by tool name: they judge a handler's value in JS, the engine counts the flags. */
  #judges = new Map()
  /** `check` functions, by tool name: business checks of the arguments, run before permission. */
  #checks = new Map()
  /** `cost` functions, by tool name: what a call costs against cost budgets, from its arguments. */
  #costs = new Map()
  /** The schemas' own validations that run in JS, by tool name: `parameters` (after the engine's validation; the
   * handler receives its output) and `outputSchema` (on what the handler returns). */
  #validations = new Map()
  #outputValidations = new Map()
  /** For zod tools whose own validation is skipped: drops the keys zod would strip, by tool name. */
  #prunes = new Map()
  /** Command tools' calls waiting on their processes, by run: resolved when the engine reports the end. */
  #commandWaits = new Map()
  #checkTimeoutMs
  #turns = new Map()
  #runs = new Map()
  /** Handlers whose calls timed out or were cancelled but which have not settled yet, by run. */
  #abandoned = new Map()
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
  /** Runs a step has handed out whose handlers have not started yet, with their turn: a handler that aborts
   * its own turn must tell the engine these never ran. */
  #notStarted = new Map()
  /** The engine's stage sequences by id, as its results name them. */
  #stages = []
  /** Settlements not yet sent to the engine (see `#sendSettled`). */
  #settled = { runs: [], kinds: [], payloads: [] }
  /** Calls whose settlements are crossing into the engine, which may find them past their deadline. */
  #crossing = new Map()
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

  /** @param {import('./index').ExecutorOptions} [options] */
  constructor(options = {}) {
    if (options === null || typeof options !== 'object') throw new TypeError('new ToolExecutor(options): options must be an object')
    const engineOptions = pick(options, [...ENGINE_OPTIONS, ...LISTENER_OPTIONS, ...OBSERVER_OPTIONS, 'clock', 'store'], 'ToolExecutor options')
    const shared = takeStore(engineOptions)
    this.#store = shared?.store
    if (shared) engineOptions.store = shared.engine
    const { clock } = engineOptions
    delete engineOptions.clock
    const clockHooks = clock?.[CLOCK]
    if (clock !== undefined && typeof clockHooks?.attach !== 'function') {
      throw new TypeError('ToolExecutor options: clock must be a clock of toolgate/testing (manualClock())')
    }
    this.#listeners = takeListeners(engineOptions, 'ToolExecutor options')
    this.#observers = takeObservers(engineOptions, this.#listeners.onTrace)
    this.#checkTimeoutMs = engineOptions.checkTimeoutMs ?? CHECK_TIMEOUT_MS
    // Stage timings cost a little per call: results carry them when asked (`trace: true`, for timelines) or when
    // trace events or audit records are wanted.
    if (this.#observers?.onTrace || this.#observers?.auditSink || this.#observers?.onRecord) engineOptions.trace = true
    const json = JSON.stringify(offAsOptions(engineOptions), finiteNumbers('ToolExecutor options'))
    this.#engine = programmerError(() => new Engine(json, wake, clockHooks !== undefined))
    sweepArtifactsWhileAlive(this.#engine)
    if (clockHooks) this.#onClock(clockHooks)
  }

  /** Every deadline the engine keeps, and the executor's own waits, run on a clock a test moves. */
  #onClock(hooks) {
    this.#clockHooks = hooks
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
    const handler = (args, ctx) => this.#runCommand(ctx, invocation(args, ctx))
    this.#register({ ...tool, handler }, limits)
    killCommandsAtExit(this.#engine)
    if (background && !this.#handlers.has('job_status')) {
      for (const jobTool of jobToolSpecs(this.#jobs())) this.register(jobTool)
    }
    return this
  }

  /** `command`: for a command tool, what the engine keeps of its process's limits. */
  #register(spec, command) {
    if (spec === null || typeof spec !== 'object') throw new TypeError('register(spec): spec must be an object')
    if (typeof spec.handler !== 'function') {
      throw new TypeError(`register(spec): tool "${spec.name}" needs a handler function (args, ctx) => result`)
    }
    const { handler, ...rest } = spec
    const judge = typeof rest.rollbackWhen === 'function' ? rest.rollbackWhen : undefined
    if (judge) rest.rollbackWhen = { host: true }
    const check = rest.check
    if (check !== undefined && typeof check !== 'function') throw new TypeError(`tool "${spec.name}": check must be a function (args, ctx) => problem | undefined`)
    if (check) rest.check = true
    const cost = typeof rest.cost === 'function' ? rest.cost : undefined
    if (rest.cost !== undefined && !cost && !(Number.isFinite(rest.cost) && rest.cost >= 0)) {
      throw new TypeError(`tool "${spec.name}": cost must be a number of at least 0, or a function (args, ctx) => number`)
    }
    if (cost) rest.cost = 'host'
    const fields = offAsOptions(pick(rest, SPEC_FIELDS, `tool "${spec.name}"`))
    const parameters = toolSchema(fields.parameters, 'parameters', spec.name)
    const output = toolSchema(fields.outputSchema, 'outputSchema', spec.name)
    if (parameters) fields.parameters = parameters.json
    if (output) fields.outputSchema = output.json
    if (parameters?.validate) Object.assign(fields, { schemaCheck: true, validationSchema: parameters.lenient })
    if (output?.validate) fields.outputCheck = true
    if (command) fields.command = command
    programmerError(() => this.#engine.register(JSON.stringify(fields, finiteNumbers(`tool "${spec.name}"`, ['parameters', 'outputSchema', 'validationSchema']))))
    this.#handlers.set(spec.name, handler)
    const kept = [judge, check, cost, parameters?.validate, output?.validate, parameters?.prune]
    this.#perTool().forEach((map, i) => {
      if (kept[i]) map.set(spec.name, kept[i])
      else map.delete(spec.name)
    })
    return this
  }

  /** The functions kept per tool name besides its handler, in the order `#register` fills them. */
  #perTool() {
    return [this.#judges, this.#checks, this.#costs, this.#validations, this.#outputValidations, this.#prunes]
  }

  /**
   * Registers `read_artifact` and `search_artifact`, with which a model pages through an output that was too long
   * to show and was saved to an artifact. They read only this executor's artifacts.
   */
  registerArtifactTools() {
    const engine = this.#engine
    const path = { type: 'string', description: 'The artifact path given in the truncated result.' }
    this.register({
      name: 'read_artifact',
      description: 'Read part of a tool output that was too long to show in full and was saved to an artifact file. ' +
        'Offset and limit count characters; the answer says where to read on.',
      parameters: {
        type: 'object',
        properties: {
          path,
          offset: { type: 'integer', minimum: 0, description: 'The first character to read (0 = the start).' },
          limit: { type: 'integer', minimum: 1, maximum: ARTIFACT_PAGE_CHARS, description: 'How many characters to read (default 10000).' },
        },
        required: ['path'],
        additionalProperties: false,
      },
      readOnly: true,
      maxOutputChars: ARTIFACT_PAGE_CHARS + 1_000,
      handler: ({ path, offset = 0, limit }, { context }) => engine.readArtifact(path, offset, limit, policyJson(context)),
    })
    this.register({
      name: 'search_artifact',
      description: 'Find where a pattern (a regular expression, or plain text) occurs in a saved tool output: ' +
        'line, character offset and the text around each match, for reading on with read_artifact.',
      parameters: {
        type: 'object',
        properties: { path, pattern: { type: 'string', minLength: 1, description: 'A regular expression or plain text.' } },
        required: ['path', 'pattern'],
        additionalProperties: false,
      },
      readOnly: true,
      handler: ({ path, pattern }, { context }) => engine.searchArtifact(path, pattern, policyJson(context)),
    })
    return this
  }

  /** The engine's job calls, for the job tools. */
  #jobs() {
    const engine = this.#engine
    return {
      status: (id) => engine.jobStatus(id),
      output: (id, stream, offset, limit) => engine.jobOutput(id, stream, offset, limit),
      kill: (id) => engine.killJob(id),
      ended: (id, signal) => lookUntil(() => signal.aborted || JSON.parse(engine.jobStatus(id)).state !== 'running'),
    }
  }

  /** A command tool's call: its invocation, once `command(args)` gave it, spawned by the engine; resolves when the
   * engine reports the command ended. */
  #runCommand(ctx, invocation) {
    const call = ctx[CALL]
    return invocation.then((json) => {
      // Its call may have ended while `command(args)` ran: nothing is spawned for it.
      if (this.#runs.get(call.run) !== call) return NEVER_STARTED
      this.#engine.spawnCommand(call.run, json)
      return new Promise((resolve) => this.#commandWaits.set(call.run, resolve))
    })
  }

  unregister(name) {
    this.#handlers.delete(name)
    for (const map of this.#perTool()) map.delete(name)
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

  /** How many handlers are running now, across all turns. */
  get running() {
    return this.#engine.running
  }

  /** Every handler that has not settled: running ones, and those whose calls already timed out or were cancelled. */
  pendingHandlers() {
    const at = now()
    const entry = (call, state) => ({
      callId: call.callId, toolName: call.toolName, attempt: call.attempt, state, reason: call.endedBy,
      runningMs: at - call.startedAt,
    })
    return [...[...this.#runs.values()].map((c) => entry(c, 'running')), ...[...this.#abandoned.values()].map((c) => entry(c, 'abandoned'))]
  }

  /** Per tool and in total: calls, successes, failures by kind, latency percentiles, in flight, and the counters. */
  stats() {
    return JSON.parse(this.#engine.counters())
  }

  /** `stats()` in Prometheus text format, for a Node server's `/metrics`. */
  prometheus() {
    return observe.prometheus(this.stats())
  }

  /** Each tool's status (`ok`, `degraded`, `failing`) from its error and timeout rates, and the worst of them. */
  healthReport() {
    return observe.healthReport(this.stats(), this.pendingHandlers())
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
    const closeBy = now() + timeoutMs
    for (const turn of this.#turns.values()) turn.abortReason = new DOMException('The tool executor was closed', 'AbortError')
    this.#sendSettled()
    const unstarted = [...this.#notStarted.keys()]
    this.#notStarted.clear()
    this.#guard(() => this.#engine.closeCommands())
    this.#drive(() => this.#engine.cancelAll('the tool executor was closed', unstarted))
    if (this.#abandoned.size > 0 || this.#turns.size > 0) {
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
    await this.#commandsGone(closeBy)
    this.#guard(() => this.#engine.removeArtifacts())
    this.#observers?.auditSink?.close()
    const stillRunning = this.pendingHandlers()
    // Handlers that never settle are the application's to find in `stillRunning`; the executor lets them go.
    this.#abandoned.clear()
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
    let step, turn, list, signal, context, onProgress, approve
    try {
      if (this.#closed) throw new TypeError('execute(calls): this ToolExecutor is closed')
      if (!Array.isArray(calls)) throw new TypeError(`execute(calls): calls must be an array of tool calls, got ${typeof calls}`)
      let turnOptions
      ;({ signal, context, onProgress, approve, ...turnOptions } = options ?? {})
      if (onProgress !== undefined && typeof onProgress !== 'function') throw new TypeError('execute(calls, { onProgress }): onProgress must be a function')
      if (approve !== undefined && typeof approve !== 'function') throw new TypeError('execute(calls, { approve }): approve must be a function (request) => answer')
      const turnJson = JSON.stringify(pick(turnOptions, TURN_OPTIONS, 'execute options'))
      if (signal != null && !(typeof signal.aborted === 'boolean' && typeof signal.addEventListener === 'function' && typeof signal.removeEventListener === 'function')) {
        throw new TypeError('execute(calls, { signal }): signal must be an AbortSignal')
      }
      // The turn's own copy: the caller may change the array while it runs, and a hole in it is a call too.
      list = Array.from(calls)
      const cancelled = signal?.aborted ? abortReasonText(signal.reason) : undefined
      const policy = policyJson(context)
      const json = serializeCalls(list)
      // Listening before the engine begins the turn: a signal that cannot be listened to rejects, beginning nothing.
      let onAbort = null
      if (signal && !signal.aborted) {
        onAbort = () => {
          if (turn === undefined || !this.#turns.has(turn.id)) return
          this.#sendSettled() // a handler that settled before the abort keeps its result
          turn.abortReason = signal.reason
          this.#drive(() => this.#engine.cancel(turn.id, abortReasonText(signal.reason), this.#takeUnstarted(turn.id)))
        }
        signal.addEventListener('abort', onAbort, { once: true })
      }
      try {
        step = JSON.parse(programmerError(() => this.#engine.begin(json, policy, turnJson, cancelled)))
      } catch (err) {
        if (onAbort) unlisten(signal, onAbort)
        if (err instanceof TypeError) throw err
        return Promise.resolve(internalFailures(list, textOf(err)))
      }
      // `sent`: the text each call's handler settled with, which the engine does not send back when it is the output.
      turn = { id: step.turn, resolve: undefined, context, signal, onProgress, approve: approve ?? this.#listeners.approve, onAbort, abortReason: undefined, calls: list, span: undefined, sent: [], parsed: undefined }
    } catch (err) {
      return Promise.reject(err)
    }
    return new Promise((resolve) => {
      turn.resolve = resolve
      const otel = this.#observers?.otel
      if (otel) turn.span = observe.startTurnSpan(otel, this.#observers.tracer, list.length)
      this.#turns.set(turn.id, turn)
      live.set(this.#engine.id, this.#wakeDriver)
      this.#guard(() => this.#applyStep(step))
      this.#releaseIfIdle()
    })
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
    this.#wakeTimer = setTimeout(() => executor.deref()?.#wakeDriver(true), ms)
    this.#wakeTimer.unref()
  }

  #releaseIfIdle() {
    const turnsOpen = this.#turns.size > 0
    // `hold?.`: a clock of an older copy of the package (the symbol is global) offers only `attach`.
    if (this.#clockDriver) this.#clockHooks.hold?.(this.#clockDriver, turnsOpen)
    // On a manual clock no deadline wakes the engine: only a value shaped on another thread does.
    const waiting = (turnsOpen && !this.#clockDriver) || this.#crossing.size > 0 || this.#engine.holding
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
    const runs = [...this.#runs]
    this.#runs.clear()
    const settled = new Set(this.#settled.runs)
    this.#settled = { runs: [], kinds: [], payloads: [] }
    this.#notStarted.clear()
    // The engine, if it still answers, forgets those turns and their deadlines, which would keep the process up;
    // the stage sequences it sends with them keep the two tables in step.
    try {
      const wire = this.#engine.cancelAll('toolgate failed', [])
      for (const turnId of wire === '' ? [] : JSON.parse(wire).done ?? []) readResults(this.#engine.finish(turnId), [], this.#stages)
    } catch {
      // It does not: nothing more to do for it.
    }
    for (const [run, call] of runs) {
      // A handler that settled already (its settlement was waiting to cross) is not left running.
      if (!settled.has(run)) {
        this.#abandoned.set(run, call)
        call.endedBy = 'cancelled'
        call.endedAt = now()
        call.abort('cancelled', new DOMException('The tool call was cancelled: toolgate failed', 'AbortError'))
      }
      call.release()
    }
    for (const turn of turns) {
      if (turn.onAbort) unlisten(turn.signal, turn.onAbort)
      turn.resolve(internalFailures(turn.calls, bug))
    }
    this.#releaseIfIdle()
    if (this.#abandoned.size === 0 && this.#turns.size === 0) this.#onIdle?.()
  }

  #applyStep(step) {
    if (step.wake !== undefined) this.#armWake(step.wake)
    // Runs handed out are known before any application code runs (an abort listener may cancel the turn).
    if (step.start) for (const [run, turnId] of step.start) this.#notStarted.set(run, turnId)
    if (step.late) for (const late of step.late) this.#overdue(late)
    if (step.breaker) for (const change of step.breaker) this.#traceBreaker(change)
    if (step.host) for (const request of step.host) this.#askHost(request)
    if (step.store) {
      const batch = runTickets(this.#store, step.store, (ticket, json) => this.#drive(() => this.#engine.answerStore(ticket, json)))
      // Kept only up to a bound: a store whose batches never settle must not grow this set for ever.
      if (this.#storeBatches.size < MAX_STORE_BATCHES) {
        this.#storeBatches.add(batch)
        batch.finally(() => this.#storeBatches.delete(batch))
      }
    }
    if (step.abort) for (const run of step.abort) this.#abort(run)
    if (step.progress) for (const [run, line] of step.progress) this.#commandProgress(run, line)
    if (step.commands) for (const run of step.commands) this.#commandEnded(run)
    if (step.start) for (const start of step.start) this.#start(start)
    if (step.done) for (const turnId of step.done) this.#finish(turnId)
  }

  /** A call waits on the host: the schema's own validation, the tool's check of its arguments, or the approval
   * callback. Whatever the function does (answers, throws, hangs past the engine's time limit), the call gets a
   * result. */
  #askHost([ticket, kind, turnId, callId, toolName, args, rule, reason, index]) {
    const turn = this.#turns.get(turnId)
    const context = turn?.context
    let pending
    if (kind === 'validate') {
      pending = this.#validated(turn, index, toolName, args)
    } else if (kind === 'check') {
      pending = this.#checked(turn, index, toolName, callId, args).then((problem) => (problem === undefined ? {} : { problem }))
    } else if (kind === 'cost') {
      if (turn !== undefined) (turn.priced ??= new Set()).add(index)
      pending = this.#costOf(turn, index, toolName, callId, args).then((cost) => ({ cost }))
    } else if (turn?.approve === undefined) {
      pending = Promise.resolve({ decision: 'deny', reason: 'no approval callback is set' })
    } else {
      const request = { callId, toolName, arguments: args, rule, reason: reason ?? undefined, context }
      pending = callHost(() => turn.approve(request)).then(readApproval).then((answer) => {
        if (answer.arguments === undefined) return answer
        return this.#editsPass(turn, index, toolName, callId, answer.arguments).then((issues) => {
          // Priced again only when the model's arguments were (a cost budget applies to the call).
          if (issues || !turn?.priced?.has(index)) return issues ? { ...answer, issues } : answer
          // What edited arguments cost replaces what the model's did (the engine keeps it only under a cost budget).
          return this.#costOf(turn, index, toolName, callId, answer.arguments).then(
            (cost) => ({ ...answer, cost }),
            (err) => ({ ...answer, costError: describeProblem(err) }),
          )
        })
      })
    }
    pending
      .catch((err) => ({ error: describeProblem(err) }))
      .then((answer) => JSON.stringify(answer))
      // An answer that cannot be passed on (edited arguments holding a BigInt, say) denies the call.
      .catch((err) => JSON.stringify({ error: `its answer could not be read (${describeProblem(err)})` }))
      .then((json) => this.#drive(() => {
        try {
          return this.#engine.answer(ticket, json)
        } catch (err) {
          // One the engine cannot read (edited arguments nested too deeply, say) denies the call, as above.
          if (err?.code !== 'InvalidArg') throw err
          return this.#engine.answer(ticket, JSON.stringify({ error: `its answer could not be read (${describeProblem(err)})` }))
        }
      }))
  }

  /** Arguments edited at approval meet what the model's did in JS: the schema's own validation (its output is what
   * the handler then receives) and the tool's check, each within `checkTimeoutMs`. Resolves to the issues that
   * refuse the edit, or undefined. */
  #editsPass(turn, index, toolName, callId, edited) {
    const within = (what, step) => withinTime(step(), this.#checkTimeoutMs, this.#timers).then(
      (verdict) => verdict ?? { issues: [['', `${what} gave no answer within ${this.#checkTimeoutMs} ms`]] },
      (err) => ({ issues: [['', `${what} failed (${describeProblem(err)})`]] }),
    )
    const validated = this.#validations.has(toolName)
      ? within("the schema's own validation of them", () => this.#validated(turn, index, toolName, edited))
      : Promise.resolve({})
    return validated.then(({ issues }) => {
      if (issues || !this.#checks.has(toolName)) return issues
      return within("the tool's check of them", () => this.#checked(turn, index, toolName, callId, edited)
        .then((problem) => (problem === undefined ? {} : { issues: [['', problem]] })))
        .then((verdict) => verdict.issues)
    })
  }

  /** The tool's check of a call's arguments (the schema's output when its own validation ran, else the arguments
   * as the handler gets them): the problem it found, as text, or undefined. */
  #checked(turn, index, toolName, callId, args) {
    const input = turn?.parsed?.has(index) ? turn.parsed.get(index) : this.#pruned(toolName, args)
    return callHost(() => this.#checks.get(toolName)(input, { callId, toolName, context: turn?.context }))
      .then((problem) => (problem == null || problem === true ? undefined : describeProblem(problem)))
  }

  /** What a call costs, by the tool's cost function (on the arguments as the handler gets them): a number of at
   * least 0, or a rejection saying what it gave instead. */
  #costOf(turn, index, toolName, callId, args) {
    const input = turn?.parsed?.has(index) ? turn.parsed.get(index) : this.#pruned(toolName, args)
    return callHost(() => this.#costs.get(toolName)(input, { callId, toolName, context: turn?.context })).then((cost) => {
      if (typeof cost === 'number' && Number.isFinite(cost) && cost >= 0) return cost
      throw new TypeError(`it returned ${reprOf(cost)}, not a number of at least 0`)
    })
  }

  /** The schema's own validation of a call's arguments: `{ issues }` for the engine when they fail it; when they
   * pass, its output is kept for the handler and the answer is empty. */
  #validated(turn, index, toolName, args) {
    const validate = this.#validations.get(toolName)
    return callHost(() => validate(args)).then((result) => {
      const { issues, value } = validationResult(result)
      if (issues) return { issues }
      if (turn !== undefined) (turn.parsed ??= new Map()).set(index, value)
      return {}
    })
  }

  /** The turn's runs handed out but not started, which now never will be. */
  #takeUnstarted(turnId) {
    const runs = []
    for (const [run, turn] of this.#notStarted) if (turn === turnId) runs.push(run)
    for (const run of runs) this.#notStarted.delete(run)
    return runs
  }

  #start([run, turnId, callId, name, args, attempt, index]) {
    // A handler earlier in this step may have aborted the turn: the engine answered this run as not started.
    if (!this.#notStarted.delete(run)) return
    const turn = this.#turns.get(turnId)
    const call = new RunningCall(turn, callId, name, attempt, args, index)
    call.run = run
    this.#runs.set(run, call)
    call.judge = this.#judges.get(name)
    const handler = this.#handlers.get(name)
    const ctx = new HandlerContext(call, attempt, (info) => this.#progress(run, call, info))
    let returned
    try {
      if (!handler) throw new Error(`tool "${name}" was unregistered before this call started`)
      const input = this.#inputOf(turn, index, name, args, attempt)
      returned = input instanceof Promise ? this.#startValidated(run, call, handler, input, ctx) : handler(input, ctx)
    } catch (err) {
      returned = Promise.reject(err)
    }
    const checkOutput = this.#outputValidations.get(name)
    // Promise.resolve also absorbs thenables whose `then` throws; a plain value settles on the next microtask.
    Promise.resolve(returned).then(
      (value) => {
        // A command whose call ended before it did (cancelled, the executor closed) was stopped: nothing settles.
        if (value === NEVER_STARTED || (value === COMMAND_ENDED && !this.#runs.has(run))) this.#neverStarted(run)
        else if (value === COMMAND_ENDED) this.#settle(run, value, describeCommand)
        else if (checkOutput && !isContent(value)) this.#settleChecked(run, value, checkOutput)
        else this.#settle(run, value, describeReturn)
      },
      (err) => this.#settle(run, err, describeThrown),
    )
  }

  /** A handler whose input a retry's own validation is still making. That validation may outlast its call: the
   * handler then never starts, whatever the validation said. */
  #startValidated(run, call, handler, input, ctx) {
    const live = () => this.#runs.get(run) === call
    return input.then((value) => (live() ? handler(value, ctx) : NEVER_STARTED), (err) => (live() ? Promise.reject(err) : NEVER_STARTED))
  }

  #commandEnded(run) {
    const resolve = this.#commandWaits.get(run)
    this.#commandWaits.delete(run)
    resolve?.(COMMAND_ENDED)
  }

  /** The latest line a running command wrote: progress, as a handler's `ctx.progress(info)` reports it. */
  #commandProgress(run, line) {
    const call = this.#runs.get(run)
    if (call) this.#progress(run, call, { line })
  }

  /** A run the engine ended before its handler could start: nothing of it is left to wait for. */
  #neverStarted(run) {
    if (!this.#abandoned.delete(run)) return
    if (this.#abandoned.size === 0 && this.#turns.size === 0) this.#onIdle?.()
  }

  /** The arguments with the keys a zod schema strips dropped, for a tool whose zod validation is skipped. */
  #pruned(name, args) {
    const prune = this.#prunes.get(name)
    return prune === undefined ? args : prune(args)
  }

  /** What the handler receives: the arguments, or the output of the schema's own validation of them (kept from
   * admission for the first attempt; a retry validates its fresh copy again). */
  #inputOf(turn, index, name, args, attempt) {
    const validate = this.#validations.get(name)
    if (validate === undefined) return this.#pruned(name, args)
    if (attempt === 1 && turn.parsed?.has(index)) {
      const value = turn.parsed.get(index)
      turn.parsed.delete(index)
      return value
    }
    const verdict = validate(args)
    const passed = (result) => {
      const { issues, value } = validationResult(result)
      if (issues) throw new Error(`its arguments no longer pass the schema's own validation: ${issues.map(([at, message]) => `${at || '(arguments)'}: ${message}`).join('; ')}`)
      return value
    }
    return typeof verdict?.then === 'function' ? Promise.resolve(verdict).then(passed) : passed(verdict)
  }

  /** A returned value checked by the tool's Standard Schema `outputSchema` before it settles the run. Whatever the
   * validation does (throws, rejects, answers nonsense), the run settles. */
  #settleChecked(run, value, validate) {
    callHost(() => validate(value)).then((result) => {
      let issues
      try {
        ;({ issues } = validationResult(result))
      } catch (err) {
        return this.#settle(run, err, describeThrown)
      }
      if (issues) this.#settle(run, issues, describeMismatch)
      else this.#settle(run, value, describeReturn)
    }, (err) => this.#settle(run, err, describeThrown))
  }

  #settle(run, value, describe) {
    const call = this.#runs.get(run)
    if (call === undefined) {
      this.#lateSettlement(run, describe === describeThrown ? 'rejected' : 'resolved')
      return
    }
    if (call.judge && describe === describeReturn) {
      const reason = judgeValue(call, value)
      if (reason) this.#guard(() => this.#engine.judged(run, reason))
    }
    // Never throws: whatever a value's getters, toJSON or proxy traps do, it is described.
    let [kind, payload] = describe(value)
    // rollbackWhen and the value's own code (toJSON, getters) may have cancelled the turn or closed the executor.
    if (this.#runs.get(run) !== call) return this.#lateSettlement(run, describe === describeThrown ? 'rejected' : 'resolved')
    if (typeof payload === 'string' && payload.length < LARGE_CHARS) {
      // Kept as the engine will read it (a lone surrogate becomes U+FFFD): an output equal to it is not sent back.
      if (!payload.isWellFormed()) payload = payload.toWellFormed()
      call.turn.sent[call.index] = payload
      // The run stays in #runs until the settlement crosses, so that an abort meanwhile makes it a late one.
      const settled = this.#settled
      settled.runs.push(run)
      settled.kinds.push(kind)
      settled.payloads.push(payload)
      if (settled.runs.length === 1) queueMicrotask(this.#sendSettled)
      return
    }
    this.#sendSettled() // settlements cross in the order they came
    if (this.#runs.get(run) !== call) return this.#lateSettlement(run, kind === 'thrown' ? 'rejected' : 'resolved')
    this.#runs.delete(run)
    this.#crossing.set(run, call)
    live.set(this.#engine.id, this.#wakeDriver) // a value shaped on another thread wakes the engine when done
    if (typeof payload === 'string') return this.#sendInSlices(run, kind, payload, 0)
    this.#drive(() => this.#engine.completeBytes(run, kind, payload))
    this.#crossed(run)
  }

  /** Handlers settling in one turn of the event loop (a batch of quick ones settles in one microtask checkpoint)
   * cross into the engine in one call; a cancellation, `close()` or a settlement that crosses apart sends them
   * first. A run the engine ended meanwhile all the same was answered without it: its settlement is a late one. */
  #sendSettled = () => {
    const { runs, kinds, payloads } = this.#settled
    if (runs.length === 0) return
    this.#settled = { runs: [], kinds: [], payloads: [] }
    for (let i = runs.length - 1; i >= 0; i--) {
      const call = this.#runs.get(runs[i])
      if (call !== undefined) {
        this.#runs.delete(runs[i])
        this.#crossing.set(runs[i], call)
        continue
      }
      this.#lateSettlement(runs[i], kinds[i] === 'thrown' ? 'rejected' : 'resolved')
      runs.splice(i, 1)
      kinds.splice(i, 1)
      payloads.splice(i, 1)
    }
    if (runs.length === 0) return
    // Packed (see the engine's `complete`): two values cross, not three per settlement.
    const heads = new Uint32Array(runs.length * 3)
    let text = ''
    for (let i = 0; i < runs.length; i++) {
      heads[3 * i] = runs[i]
      heads[3 * i + 1] = kinds[i].length
      heads[3 * i + 2] = payloads[i].length
      text += kinds[i] + payloads[i]
    }
    this.#drive(() => this.#engine.complete(heads, text))
    for (const run of runs) this.#released(run)
    this.#releaseIfIdle()
  }

  /** A settlement has crossed: the executor is done with its call. */
  #crossed(run) {
    this.#released(run)
    this.#releaseIfIdle()
  }

  #released(run) {
    this.#crossing.get(run)?.release()
    this.#crossing.delete(run)
  }

  /** A large string crosses a slice per turn of the event loop; no slice ends inside a surrogate pair. */
  #sendInSlices(run, kind, text, from) {
    let to = Math.min(text.length, from + LARGE_CHARS)
    const code = text.charCodeAt(to - 1)
    if (to < text.length && code >= 0xd800 && code <= 0xdbff) to -= 1
    const more = to < text.length
    let next = false
    this.#drive(() => {
      const wire = this.#engine.completeBytes(run, kind, Buffer.from(text.slice(from, to)), more)
      // A slice taken in answers nothing; an answer (the run was past its deadline) ends the crossing.
      next = more && wire === ''
      return wire
    })
    if (next) setImmediate(() => this.#sendInSlices(run, kind, text, to))
    else this.#crossed(run)
  }

  #abort([run, kind]) {
    const call = this.#runs.get(run)
    if (!call) return
    this.#runs.delete(run)
    this.#abandoned.set(run, call)
    call.endedBy = kind
    call.endedAt = now()
    const { turn } = call
    call.abort(kind, kind === 'cancelled' ? turn.abortReason : undefined)
    this.#abandon(call)
  }

  /** A handler the engine stopped waiting for may never settle: what it keeps of its call is a small record (the
   * turn, its calls and their outputs, and the arguments go), with the arguments as a late-settlement trace
   * would show them when one can be sent. */
  #abandon(call) {
    this.#snapshotForTrace(call)
    call.release()
    // Handlers that never settle may pile up on a server that runs for weeks: the oldest records go.
    if (this.#abandoned.size > MAX_ABANDONED) this.#abandoned.delete(this.#abandoned.keys().next().value)
  }

  /** A handler settled after its call was answered: its side effects happened past the deadline. Recorded. */
  #lateSettlement(run, outcome) {
    const call = this.#abandoned.get(run)
    if (call === undefined) return
    this.#abandoned.delete(run)
    this.#guard(() => this.#engine.noteLateSettlement(call.toolName))
    this.#traceLate(call, call.endedBy, outcome, now() - call.endedAt)
    if (this.#abandoned.size === 0 && this.#turns.size === 0) this.#onIdle?.()
  }

  /** A settlement the engine found past its run's deadline (the event loop was blocked, so the deadline could
   * not fire first): the call timed out, and the engine counted it late; the trace says so. */
  #overdue([run, endedBy, outcome, afterMs]) {
    const call = this.#crossing.get(run)
    if (call === undefined) return
    this.#snapshotForTrace(call)
    this.#traceLate(call, endedBy, outcome, afterMs)
  }

  /** A circuit breaker changed phase (an opening says what opened it). */
  #traceBreaker({ tool, from, to, calls, failures }) {
    const event = { type: 'breaker', toolName: tool, from, to, at: Date.now() }
    if (calls !== undefined) Object.assign(event, { calls, failures })
    this.#emitTrace(event)
  }

  /** The call's arguments (and id) as a late-settlement trace shows them, taken while it still has them. */
  #snapshotForTrace(call) {
    if (this.#listeners.onTrace) this.#guard(() => { [call.argsSnapshot, call.idSnapshot] = this.#snapshots([call.args, call.callId]) })
  }

  #traceLate(call, endedBy, outcome, afterMs) {
    this.#emitTrace({
      type: 'late_settlement', callId: this.#shownId(call), toolName: call.toolName, attempt: call.attempt, endedBy, outcome, afterMs,
      args: call.argsSnapshot,
    })
  }

  /** Arguments as a trace shows them, one crossing for a whole turn: secrets redacted, each one's size capped.
   * One that cannot be shown as JSON (a handler may have changed it) says so. */
  #snapshots(list) {
    const json = list.map((args) => jsonOf(args, 'arguments'))
    return JSON.parse(this.#engine.snapshots(`[${json.join(',')}]`))
  }

  #progress(run, call, info) {
    // Progress from a run that already ended neither revives it nor reaches the listeners.
    let alive = false
    if (this.#runs.has(run)) this.#guard(() => { alive = this.#engine.progress(run) })
    if (!alive) return
    const listeners = [this.#listeners.onProgress, call.turn.onProgress].filter(Boolean)
    if (listeners.length === 0) return
    const event = { callId: this.#shownId(call), toolName: call.toolName, attempt: call.attempt, info: this.#shapedProgress(info) }
    for (const listener of listeners) callListener(listener, event, 'onProgress')
  }

  /** Progress reaches the user or a client's model as its JSON value, secrets redacted and size capped as a trace
   * shows arguments: never the object itself, whose getters, `toJSON` or Error message could show what its JSON
   * does not. */
  #shapedProgress(info) {
    if (info === null || (typeof info !== 'object' && typeof info !== 'string')) return info
    const json = jsonOf(errorAsData(info), 'progress')
    let shaped
    this.#guard(() => { shaped = this.#engine.shapeProgress(json) })
    // An engine that failed to shape it shows nothing of it.
    if (shaped === undefined) return undefined
    return JSON.parse(shaped ?? json)
  }

  /** The call's id as an observer may see it (a model may put a secret in it), worked out once per call. */
  #shownId(call) {
    if (call.idSnapshot === undefined) this.#guard(() => { call.idSnapshot = this.#snapshots([call.callId])[0] })
    return call.idSnapshot
  }

  #emitTrace(event) {
    const onTrace = this.#listeners.onTrace
    if (onTrace) queueMicrotask(() => callListener(onTrace, [event], 'onTrace'))
  }

  #finish(turnId) {
    const turn = this.#turns.get(turnId)
    if (turn === undefined) return
    // Read while the turn is still open: should reading fail, the guard finds it and answers it.
    const results = readResults(this.#engine.finish(turnId), turn.sent, this.#stages)
    this.#turns.delete(turnId)
    this.#releaseIfIdle()
    if (turn.onAbort) unlisten(turn.signal, turn.onAbort)
    if (this.#observers) {
      try {
        this.#report(turn, results)
      } catch (err) {
        // An audit file that cannot be written must not cost the turn its results.
        warn('reporting a finished turn failed', err)
      }
    }
    turn.resolve(results)
    if (this.#turns.size === 0 && this.#abandoned.size === 0) this.#onIdle?.()
  }

  /** A finished turn to the observers: audit records now (each one line, written whole), spans, and trace events
   * on a later turn of the event loop, so that a slow listener never holds the pipeline. */
  #report(turn, results) {
    const { onTrace, auditSink, onRecord, otel, tracer } = this.#observers
    const traceId = `${this.#engine.id}-${turn.id}`
    const recorded = auditSink || onRecord || onTrace
    const spans = turn.span?.isRecording()
    // A model may put a secret in a call's id as in its arguments: both as an observer may see them, in one crossing.
    const shown = recorded || spans ? this.#snapshots([...results.map((r) => r.callId), ...(recorded ? turn.calls.map(argumentsOf) : [])]) : []
    const ids = shown.slice(0, results.length)
    const args = shown.slice(results.length)
    if (auditSink || onRecord) {
      for (const [i, r] of results.entries()) {
        const record = observe.auditRecord(traceId, r, ids[i], args[i], turn.context)
        if (auditSink) auditSink.write(record)
        if (onRecord) callListener(onRecord, record, 'audit.onRecord')
      }
    }
    if (turn.span) {
      // Without an SDK the API hands out spans that record nothing: no call spans are made then.
      if (spans) observe.callSpans(otel, tracer, turn.span, results, ids)
      turn.span.end()
    }
    if (onTrace) {
      const events = observe.traceEvents(traceId, results, ids, args)
      setImmediate(() => callListener(onTrace, events, 'onTrace'))
    }
  }
}

/** A handler in flight. Its AbortController is made only when the handler reads `ctx.signal`: most never do,
 * and making one costs more than the rest of a trivial call's bookkeeping in JS. */
class RunningCall {
  constructor(turn, callId, toolName, attempt, args, index) {
    this.turn = turn
    this.index = index
    this.callId = callId
    this.toolName = toolName
    this.attempt = attempt
    this.args = args
    /** The engine's id for this attempt. */
    this.run = undefined
    /** The arguments and the id as a late-settlement trace shows them, taken when the call is abandoned. */
    this.argsSnapshot = undefined
    this.idSnapshot = undefined
    this.startedAt = now()
    this.controller = undefined
    /** Why the call was aborted: the caller's reason, or (made only when a signal needs it: a DOMException costs a
     * stack trace) the kind of limit that stopped it. */
    this.abortReason = undefined
    this.abortKind = undefined
    /** Set when the engine answered the call without the handler: 'timeout', 'idle_timeout' or 'cancelled'. */
    this.endedBy = undefined
    this.endedAt = undefined
  }

  get signal() {
    if (this.controller === undefined) {
      this.controller = new AbortController()
      if (this.abortKind !== undefined) this.controller.abort(this.#reason())
    }
    return this.controller.signal
  }

  /** `reason`: the caller's, for a cancellation; none for a limit, whose DOMException is made when needed. */
  abort(kind, reason) {
    this.abortKind = kind
    this.abortReason = reason
    if (this.controller !== undefined) this.controller.abort(this.#reason())
  }

  #reason() {
    this.abortReason ??= new DOMException(TIMEOUT_MESSAGES[this.abortKind], this.abortKind === 'cancelled' ? 'AbortError' : 'TimeoutError')
    return this.abortReason
  }

  /** The call is over for the executor: a handler that keeps its `ctx` keeps nothing of the turn through it. */
  release() {
    this.turn = undefined
    this.args = undefined
    // The signal's listeners (and what they hold) go too; a signal asked for later is made aborted.
    this.controller = undefined
  }
}

const CALL = Symbol('toolgate.call')
/** `signal` as an own enumerable getter, so that `{ ...ctx }` keeps it. One descriptor for every context: V8 then
 * shares the object's shape, where a getter made per call costs half a microsecond. */
const SIGNAL = { get() { return this[CALL].signal }, enumerable: true }

/** What a handler gets as `ctx`. */
class HandlerContext {
  constructor(call, attempt, progress) {
    this.callId = call.callId
    this.toolName = call.toolName
    this.context = call.turn.context
    this.attempt = attempt
    this.progress = progress
    this[CALL] = call
    Object.defineProperty(this, 'signal', SIGNAL)
  }
}

const TIMEOUT_MESSAGES = {
  timeout: 'The tool call exceeded its time limit',
  idle_timeout: 'The tool call reported no progress within its idle limit',
  cancelled: 'The tool call was cancelled',
}

/** Bytes, or an image (alone or among text parts): content, which an output schema does not describe. */
function isContent(value) {
  if (value instanceof ArrayBuffer || ArrayBuffer.isView(value)) return true
  const parts = Array.isArray(value) ? value : [value]
  try {
    return parts.some((part) => part !== null && typeof part === 'object' && part.type === 'image')
  } catch {
    return false // a value that cannot be read is for the validation to judge
  }
}

/** What `promise` resolves to, or undefined once `ms` pass first (the timer holds no process open). */
function withinTime(promise, ms, timers) {
  let timer
  const late = new Promise((resolve) => {
    timer = timers.setTimeout(resolve, ms)
    timer?.unref?.()
  })
  return Promise.race([promise, late]).finally(() => timers.clearTimeout(timer))
}

/** Resolves once `done()` is true, looking every `COMMAND_POLL_MS` in real time, whatever clock the executor runs
 * on: processes end in real time. */
async function lookUntil(done) {
  while (!done()) await new Promise((resolve) => setTimeout(resolve, COMMAND_POLL_MS))
}

/** A command's end: the engine holds what it wrote. */
function describeCommand() {
  return ['command', '']
}

/** Issues an output schema found, as the engine's settlement kind for them. */
function describeMismatch(issues) {
  return ['mismatch', JSON.stringify(issues)]
}

/** Stops listening to a turn's signal; a signal-like object that fails at it costs nothing more. */
function unlisten(signal, onAbort) {
  try {
    signal.removeEventListener('abort', onAbort)
  } catch {
    // Its listener stays; it checks that its turn is still open before doing anything.
  }
}

/** Sweeps the engine's artifacts past their TTL now and then, without keeping the process or the engine alive. */
function sweepArtifactsWhileAlive(engine) {
  const ref = new WeakRef(engine)
  const timer = setInterval(() => {
    const alive = ref.deref()
    if (alive === undefined) clearInterval(timer)
    else alive.sweepArtifacts()
  }, SWEEP_MS)
  timer.unref()
}

module.exports = { ToolExecutor }
