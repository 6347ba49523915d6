// @ts-check
'use strict'
// Turns watched live (`gate.watch(listener)`): each turn as it begins, its calls as they come, each station a call
// meets as it meets it (a wait begun, a decision, the call sealed), each handler started, each question put to the
// application, and the results. Nothing of it is done while nobody watches; a listener hears a step's events in one
// batch, on a later microtask, so that it never holds the pipeline.

const { argumentsOf, nestOf } = require('../engine/wire.js')
const { readLiveMark } = require('../engine/wire.generated.js')
const { callListener } = require('../callbacks.js')
const { queueMicrotask } = require('../timers.js')

class Watchers {
  #listeners = new Set()
  #engine
  #reporter
  /** Events not yet handed to the listeners. */
  #pending = []

  /** `reporter`: shows a call's id and arguments as a trace does (redacted, capped). */
  constructor({ engine, reporter }) {
    this.#engine = engine
    this.#reporter = reporter
  }

  get on() {
    return this.#listeners.size > 0
  }

  /** Adds a listener; returns what removes it. The engine reports stations only while someone listens. */
  add(listener) {
    if (typeof listener !== 'function') throw new TypeError('watch(listener): listener must be a function (events) => void')
    this.#listeners.add(listener)
    this.#engine.observe(true)
    return () => {
      if (!this.#listeners.delete(listener) || this.#listeners.size > 0) return
      this.#engine.observe(false)
    }
  }

  #emit(event) {
    this.#pending.push(event)
    if (this.#pending.length > 1) return
    queueMicrotask(() => {
      const events = this.#pending
      this.#pending = []
      for (const listener of this.#listeners) callListener(listener, events, 'watch')
    })
  }

  /** A turn began, with its calls so far (a streaming turn's come later, one `call` each). */
  turn(turn, traceId) {
    this.#emit({ type: 'turn', turn: traceId, at: Date.now(), streaming: turn.streaming !== undefined })
    this.calls(turn.calls, 0, traceId)
  }

  /** Calls from `first` on, each with its id, name and arguments as a trace shows them. */
  calls(calls, first, traceId) {
    if (calls.length === first) return
    const added = calls.slice(first)
    const shown = this.#reporter.shown(added.flatMap((call) => [idOf(call), argumentsOf(call)]))
    added.forEach((call, i) => {
      this.#emit({ type: 'call', turn: traceId, index: first + i, callId: shown[2 * i], name: nameOf(call), args: shown[2 * i + 1] })
    })
  }

  /** What a step says that a watcher shows: handlers started, questions put to the application, stations met. */
  step(step, traceIdOf) {
    if (step.marks) {
      for (const record of step.marks) {
        const { turn, index, mark, ms } = readLiveMark(record)
        const colon = mark.indexOf(':')
        this.#emit({ type: 'station', turn: traceIdOf(turn), index, station: mark.slice(0, colon), outcome: mark.slice(colon + 1), ms })
      }
    }
  }

  /** A handler started (`start`: its Start record, read). */
  started({ turn, index, name, attempt }, traceIdOf) {
    this.#emit({ type: 'start', turn: traceIdOf(turn), index, name, attempt, at: Date.now() })
  }

  /** The application was asked something for a call: its check, its cost, a schema's validation, an approval. */
  asked({ turn, index, kind }, traceIdOf) {
    this.#emit({ type: 'ask', turn: traceIdOf(turn), index, kind, at: Date.now() })
  }

  /** Results handed on: a streaming turn's as they settle, a whole turn's at its end. */
  results(traceId, indices, results) {
    indices.forEach((index, i) => this.#emit({ type: 'result', turn: traceId, index, result: results[i] }))
  }

  done(traceId) {
    this.#emit({ type: 'done', turn: traceId, at: Date.now() })
  }
}

/** A call's id and tool name as sent (the engine reads them the same way: the call's own, else its nest's). */
function idOf(call) {
  return field(call, ['id', 'call_id', 'toolCallId', 'toolUseId'])
}

function nameOf(call) {
  return field(call, ['name', 'toolName'])
}

function field(call, keys) {
  try {
    const nest = nestOf(call)
    for (const key of keys) {
      const value = call?.[key] ?? nest?.[key]
      if (typeof value === 'string') return value
    }
  } catch {
    // A call whose fields cannot be read shows none.
  }
  return undefined
}

module.exports = { Watchers }
