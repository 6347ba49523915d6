// @ts-check
'use strict'
// The handlers of one executor from start to settlement: started on the engine's word, their values described and
// sent into the engine in batches (a large one in slices), aborted at a deadline or a cancellation, and followed
// after that until they settle, late, since a handler may ignore its signal.

const { describeReturn, describeThrown } = require('../engine/describe.js')
const { SETTLEMENT_HEAD_LENGTH, SETTLEMENT_KIND, writeSettlementHead } = require('../engine/wire.generated.js')
const { callHost, judgeValue } = require('../callbacks.js')
const { validationResult } = require('../schemas.js')
const { setImmediate, queueMicrotask, now } = require('../timers.js')
const { RunningCall, HandlerContext, CALL } = require('./calls.js')

/** Records kept of handlers that were stopped but have not settled (`pendingHandlers()`, late settlements). */
const MAX_ABANDONED = 10_000
/** Strings at least this long cross as UTF-8 bytes, a slice of this many characters per turn of the event loop:
 * encoding 10 MB at once would stall the loop for 15–20 ms. The engine shapes them off the JS thread. */
const LARGE_CHARS = 256 * 1024
/** What a handler's promise resolves to when its call ended while a retry's validation was still running: the
 * handler never started. */
const NEVER_STARTED = Symbol('never started')
/** What a command tool's call resolves to when the engine reports its command ended (the engine holds the rest). */
const COMMAND_ENDED = Symbol('command ended')

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

/** A command's end: the engine holds what it wrote. */
function describeCommand() {
  return [SETTLEMENT_KIND.command, '']
}

/** Issues an output schema found, as the engine's settlement kind for them. */
function describeMismatch(issues) {
  return [SETTLEMENT_KIND.mismatch, JSON.stringify(issues)]
}

class Runs {
  /** Handlers running, by run. */
  running = new Map()
  /** Handlers whose calls timed out or were cancelled but which have not settled yet, by run. */
  abandoned = new Map()
  /** Runs a step has handed out whose handlers have not started yet, with their turn: a handler that aborts
   * its own turn must tell the engine these never ran. */
  notStarted = new Map()
  /** Calls whose settlements are crossing into the engine, which may find them past their deadline. */
  crossing = new Map()
  /** Settlements not yet sent to the engine (see `sendSettled`). */
  #settled = { runs: [], kinds: [], payloads: [] }
  /** Command tools' calls waiting on their processes, by run: resolved when the engine reports the end. */
  #commandWaits = new Map()
  #engine
  #tools
  #reporter
  #drive
  #guard
  #turnOf
  #awake
  #releaseIfIdle
  #settledAll

  /**
   * The executor's side: `drive(engineCall)` and `guard(work)` run work of its turn machinery (see the executor),
   * `turnOf(id)` finds an open turn, `awake()` keeps the executor where the engine's wake-up finds it,
   * `releaseIfIdle()` lets it go when nothing is left to wake it for, `settledAll()` says no abandoned handler is
   * left.
   */
  constructor({ engine, tools, reporter, drive, guard, turnOf, awake, releaseIfIdle, settledAll }) {
    this.#engine = engine
    this.#tools = tools
    this.#reporter = reporter
    this.#drive = drive
    this.#guard = guard
    this.#turnOf = turnOf
    this.#awake = awake
    this.#releaseIfIdle = releaseIfIdle
    this.#settledAll = settledAll
  }

  /** Every handler that has not settled: running ones, and those whose calls already timed out or were cancelled. */
  pending() {
    const at = now()
    const entry = (call, state) => ({
      callId: call.callId, toolName: call.toolName, attempt: call.attempt, state, reason: call.endedBy,
      runningMs: at - call.startedAt,
    })
    return [...[...this.running.values()].map((c) => entry(c, 'running')), ...[...this.abandoned.values()].map((c) => entry(c, 'abandoned'))]
  }

  /** Takes every run out, for an engine that failed: their calls and which had settled, to end them after. */
  takeAll() {
    const runs = [...this.running]
    this.running.clear()
    const settled = new Set(this.#settled.runs)
    this.#settled = { runs: [], kinds: [], payloads: [] }
    this.notStarted.clear()
    return { runs, settled }
  }

  /** Ends the runs `takeAll` took: a handler that settled already (its settlement was waiting to cross) is not left
   * running; the others are aborted as cancelled and followed until they settle. */
  endAll({ runs, settled }) {
    for (const [run, call] of runs) {
      if (!settled.has(run)) {
        this.abandoned.set(run, call)
        call.endedBy = 'cancelled'
        call.endedAt = now()
        call.abort('cancelled', new DOMException('The tool call was cancelled: toolgate failed', 'AbortError'))
      }
      call.release()
    }
  }

  /** A command tool's call: its invocation, once `command(args)` gave it, spawned by the engine; resolves when the
   * engine reports the command ended. */
  runCommand(ctx, invocation) {
    const call = ctx[CALL]
    return invocation.then((json) => {
      // Its call may have ended while `command(args)` ran: nothing is spawned for it.
      if (this.running.get(call.run) !== call) return NEVER_STARTED
      this.#engine.spawnCommand(call.run, json)
      return new Promise((resolve) => this.#commandWaits.set(call.run, resolve))
    })
  }

  /** The turn's runs handed out but not started, which now never will be. */
  takeUnstarted(turnId) {
    const runs = []
    for (const [run, turn] of this.notStarted) if (turn === turnId) runs.push(run)
    for (const run of runs) this.notStarted.delete(run)
    return runs
  }

  /** @param {import('../engine/wire.generated').Start} start */
  start({ run, turn: turnId, callId, name, args, attempt, index }) {
    // A handler earlier in this step may have aborted the turn: the engine answered this run as not started.
    if (!this.notStarted.delete(run)) return
    const turn = this.#turnOf(turnId)
    const call = new RunningCall(turn, callId, name, attempt, args, index)
    call.run = run
    this.running.set(run, call)
    call.judge = this.#tools.judges.get(name)
    turn.recording?.started(run, index, attempt)
    const ctx = new HandlerContext(call, attempt, (info) => this.#progress(run, call, info))
    let returned
    try {
      // A replayed turn's run answers as it did when recorded (see toolgate/testing's `replay`).
      const handler = turn.standIn?.handler(name, index, attempt) ?? this.#tools.handlers.get(name)
      if (!handler) throw new Error(`tool "${name}" was unregistered before this call started`)
      const input = this.#tools.inputOf(turn, index, name, args, attempt)
      returned = input instanceof Promise ? this.#startValidated(run, call, handler, input, ctx) : handler(input, ctx)
    } catch (err) {
      returned = Promise.reject(err)
    }
    const checkOutput = this.#tools.outputValidations.get(name)
    // Promise.resolve also absorbs thenables whose `then` throws; a plain value settles on the next microtask.
    Promise.resolve(returned).then(
      (value) => {
        // A command whose call ended before it did (cancelled, the executor closed) was stopped: nothing settles.
        if (value === NEVER_STARTED || (value === COMMAND_ENDED && !this.running.has(run))) this.#neverStarted(run)
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
    const live = () => this.running.get(run) === call
    return input.then((value) => (live() ? handler(value, ctx) : NEVER_STARTED), (err) => (live() ? Promise.reject(err) : NEVER_STARTED))
  }

  commandEnded(run) {
    const resolve = this.#commandWaits.get(run)
    this.#commandWaits.delete(run)
    resolve?.(COMMAND_ENDED)
  }

  /** The latest line a running command wrote: progress, as a handler's `ctx.progress(info)` reports it.
   * @param {import('../engine/wire.generated').Progress} progress */
  commandProgress({ run, line }) {
    const call = this.running.get(run)
    if (call) this.#progress(run, call, { line })
  }

  /** A run the engine ended before its handler could start: nothing of it is left to wait for. */
  #neverStarted(run) {
    if (!this.abandoned.delete(run)) return
    if (this.abandoned.size === 0) this.#settledAll()
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
      if (issues) {
        // Recorded as the handler returned it: a replay checks it against the output schema of its day.
        const recording = this.running.get(run)?.turn?.recording
        if (recording) recording.settled(run, ...describeReturn(value))
        this.#settle(run, issues, describeMismatch)
      }
      else this.#settle(run, value, describeReturn)
    }, (err) => this.#settle(run, err, describeThrown))
  }

  #settle(run, value, describe) {
    const call = this.running.get(run)
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
    if (this.running.get(run) !== call) return this.#lateSettlement(run, describe === describeThrown ? 'rejected' : 'resolved')
    if (describe !== describeMismatch) call.turn.recording?.settled(run, kind, payload)
    if (typeof payload === 'string' && payload.length < LARGE_CHARS) {
      // Kept as the engine will read it (a lone surrogate becomes U+FFFD): an output equal to it is not sent back.
      if (!payload.isWellFormed()) payload = payload.toWellFormed()
      call.turn.sent[call.index] = payload
      // The run stays in #runs until the settlement crosses, so that an abort meanwhile makes it a late one.
      const settled = this.#settled
      settled.runs.push(run)
      settled.kinds.push(kind)
      settled.payloads.push(payload)
      if (settled.runs.length === 1) queueMicrotask(this.sendSettled)
      return
    }
    this.sendSettled() // settlements cross in the order they came
    if (this.running.get(run) !== call) return this.#lateSettlement(run, kind === SETTLEMENT_KIND.thrown ? 'rejected' : 'resolved')
    this.running.delete(run)
    this.crossing.set(run, call)
    this.#awake() // a value shaped on another thread wakes the engine when done
    if (typeof payload === 'string') return this.#sendInSlices(run, kind, payload, 0)
    this.#drive(() => this.#engine.completeBytes(run, kind, payload))
    this.#crossed(run)
  }

  /** Handlers settling in one turn of the event loop (a batch of quick ones settles in one microtask checkpoint)
   * cross into the engine in one call; a cancellation, `close()` or a settlement that crosses apart sends them
   * first. A run the engine ended meanwhile all the same was answered without it: its settlement is a late one. */
  sendSettled = () => {
    const { runs, kinds, payloads } = this.#settled
    if (runs.length === 0) return
    this.#settled = { runs: [], kinds: [], payloads: [] }
    for (let i = runs.length - 1; i >= 0; i--) {
      const call = this.running.get(runs[i])
      if (call !== undefined) {
        this.running.delete(runs[i])
        this.crossing.set(runs[i], call)
        continue
      }
      this.#lateSettlement(runs[i], kinds[i] === SETTLEMENT_KIND.thrown ? 'rejected' : 'resolved')
      runs.splice(i, 1)
      kinds.splice(i, 1)
      payloads.splice(i, 1)
    }
    if (runs.length === 0) return
    // Packed (see the engine's `complete`): two values cross, not three per settlement.
    const heads = new Uint32Array(runs.length * SETTLEMENT_HEAD_LENGTH)
    let text = ''
    for (let i = 0; i < runs.length; i++) {
      writeSettlementHead(heads, i, { run: runs[i], kindLength: kinds[i].length, payloadLength: payloads[i].length })
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
    this.crossing.get(run)?.release()
    this.crossing.delete(run)
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

  /** @param {import('../engine/wire.generated').Abort} abort */
  abort({ run, kind }) {
    const call = this.running.get(run)
    if (!call) return
    this.running.delete(run)
    this.abandoned.set(run, call)
    call.endedBy = kind
    call.endedAt = now()
    const { turn } = call
    turn.recording?.stopped(run)
    call.abort(kind, kind === 'cancelled' ? turn.abortReason : undefined)
    this.#abandon(call)
  }

  /** A handler the engine stopped waiting for may never settle: what it keeps of its call is a small record (the
   * turn, its calls and their outputs, and the arguments go), with the arguments as a late-settlement trace
   * would show them when one can be sent. */
  #abandon(call) {
    this.#reporter.snapshotForTrace(call)
    call.release()
    // Handlers that never settle may pile up on a server that runs for weeks: the oldest records go.
    if (this.abandoned.size > MAX_ABANDONED) this.abandoned.delete(this.abandoned.keys().next().value)
  }

  /** A handler settled after its call was answered: its side effects happened past the deadline. Recorded. */
  #lateSettlement(run, outcome) {
    const call = this.abandoned.get(run)
    if (call === undefined) return
    this.abandoned.delete(run)
    this.#guard(() => this.#engine.noteLateSettlement(call.toolName))
    this.#reporter.late(call, call.endedBy, outcome, now() - call.endedAt)
    if (this.abandoned.size === 0) this.#settledAll()
  }

  /** A settlement the engine found past its run's deadline (the event loop was blocked, so the deadline could
   * not fire first): the call timed out, and the engine counted it late; the trace says so. */
  /** @param {import('../engine/wire.generated').Late} late */
  overdue({ run, endedBy, outcome, afterMs }) {
    const call = this.crossing.get(run)
    if (call === undefined) return
    this.#reporter.snapshotForTrace(call)
    this.#reporter.late(call, endedBy, outcome, afterMs)
  }

  #progress(run, call, info) {
    // Progress from a run that already ended neither revives it nor reaches the listeners.
    let alive = false
    if (this.running.has(run)) this.#guard(() => { alive = this.#engine.progress(run) })
    if (!alive) return
    call.turn?.recording?.progressed(run)
    this.#reporter.progress(call, info)
  }
}

module.exports = { Runs }
