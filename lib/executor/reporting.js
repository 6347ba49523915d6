'use strict'
// Station 14's JS side for one executor: what its listeners and observers hear. Trace events (a breaker's change,
// a late settlement, a finished turn's stations), progress, audit records and OpenTelemetry spans, each showing a
// call's id and arguments as the engine redacts them, and none able to hold the pipeline or sink a turn.

const observe = require('../observe.js')
const { errorAsData, jsonOf } = require('../engine/describe.js')
const { argumentsOf } = require('../engine/wire.js')
const { callListener, warn } = require('../callbacks.js')
const { setImmediate, queueMicrotask } = require('../timers.js')

class Reporter {
  #engineId
  #engine
  #listeners
  #observers
  #guard

  /** `guard(work)`: runs work of the executor's turn machinery, ending every open turn should it throw. */
  constructor({ engine, listeners, observers, guard }) {
    this.#engine = engine
    // Read once: each read of the engine's id crosses into it.
    this.#engineId = engine.id
    this.#listeners = listeners
    this.#observers = observers
    this.#guard = guard
  }

  /** A circuit breaker changed phase (an opening says what opened it).
   * @param {import('../engine/wire.generated').Step['breaker'][number]} change */
  breaker({ tool, from, to, calls, failures }) {
    const event = { type: 'breaker', toolName: tool, from, to, at: Date.now() }
    if (calls !== undefined) Object.assign(event, { calls, failures })
    this.#emitTrace(event)
  }

  /** A turn as trace events, audit records and watchers name it. */
  traceId(turnId) {
    return `${this.#engineId}-${turnId}`
  }

  /** Recording turns failed (`record` option): said once, with why. */
  recordFailed(error) {
    this.#emitTrace({ type: 'record_failed', error, at: Date.now() })
  }

  /** The call's arguments (and id) as a late-settlement trace shows them, taken while it still has them. */
  snapshotForTrace(call) {
    if (this.#listeners.onTrace) this.#guard(() => { [call.argsSnapshot, call.idSnapshot] = this.#snapshots([call.args, call.callId]) })
  }

  late(call, endedBy, outcome, afterMs) {
    this.#emitTrace({
      type: 'late_settlement', callId: this.#shownId(call), toolName: call.toolName, attempt: call.attempt, endedBy, outcome, afterMs,
      args: call.argsSnapshot,
    })
  }

  /** Values (calls' ids and arguments) as a trace shows them, for a watcher of live turns. */
  shown(list) {
    let shown = []
    this.#guard(() => { shown = this.#snapshots(list) })
    return shown
  }

  /** Arguments as a trace shows them, one crossing for a whole turn: secrets redacted, each one's size capped.
   * One that cannot be shown as JSON (a handler may have changed it) says so. */
  #snapshots(list) {
    const json = list.map((args) => jsonOf(args, 'arguments'))
    return JSON.parse(this.#engine.snapshots(`[${json.join(',')}]`))
  }

  /** A live run's progress to the executor's and the turn's listeners. */
  progress(call, info) {
    const listeners = [this.#listeners.onProgress, call.turn.onProgress].filter(Boolean)
    if (listeners.length === 0) return
    const event = { callId: this.#shownId(call), toolName: call.toolName, attempt: call.attempt, info: this.#shapedProgress(info) }
    for (const listener of listeners) callListener(listener, event, 'onProgress')
  }

  /** A finished turn reported, when anything observes turns. */
  finished(turn, results) {
    if (!this.#observers) return
    try {
      this.#report(turn, results)
    } catch (err) {
      // An audit file that cannot be written must not cost the turn its results.
      warn('reporting a finished turn failed', err)
    }
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

  /** A finished turn to the observers: audit records now (each one line, written whole), spans, and trace events
   * on a later turn of the event loop, so that a slow listener never holds the pipeline. */
  #report(turn, results) {
    const { onTrace, auditSink, onRecord, otel, tracer } = this.#observers
    const traceId = this.traceId(turn.id)
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

module.exports = { Reporter }
