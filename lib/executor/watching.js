// @ts-check
'use strict'
// Turns watched live (`gate.watch(listener)`): each turn as it begins, its calls as they come, each station a call
// meets as it meets it (a wait begun, a decision, the call sealed), each handler started, each question put to the
// application, and the results. Nothing of it is done while nobody watches; a listener hears a step's events in one
// batch, on a later microtask, so that it never holds the pipeline.

const { argumentsOf, sentIds } = require('../engine/wire.js')
const { readLiveMark } = require('../engine/wire.generated.js')
const { callHost, callListener, readApproval } = require('../callbacks.js')
const { queueMicrotask } = require('../timers.js')

/** A copy of a result or of arguments: plain data as the engine gives it (parsed from JSON), copied by hand, several times faster
 * than structuredClone. */
function copyOf(value) {
  if (value === null || typeof value !== 'object') return value
  if (Array.isArray(value)) return value.map(copyOf)
  const copy = {}
  for (const key of Object.keys(value)) copy[key] = copyOf(value[key])
  return copy
}

const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value)

/** Arguments a watcher edited, applied to the call's own: a value left as the watcher was shown it (redacted, cut)
 * keeps the call's; a value changed, added or removed is the watcher's; a key it was not shown is kept. */
function applyEdits(own, shown, edited) {
  if (isObject(own) && isObject(shown) && isObject(edited)) {
    const out = {}
    for (const key of Object.keys(edited)) out[key] = Object.hasOwn(shown, key) ? applyEdits(own[key], shown[key], edited[key]) : edited[key]
    for (const key of Object.keys(own)) if (!Object.hasOwn(shown, key) && !Object.hasOwn(out, key)) out[key] = own[key]
    return out
  }
  return JSON.stringify(edited) === JSON.stringify(shown) ? own : edited
}

class Watchers {
  /** One entry per `watch()`: the same function watching twice is two watchers. */
  #subscriptions = new Set()
  #engine
  #reporter
  /** Events not yet handed to the watchers. */
  #pending = []
  /** Start events of the pending batch, with the arguments each is yet to show. */
  #unshown = []
  /** Per followed turn, the approvals waiting on the watchers, by the call's index. */
  #asking = new Map()
  /** The turns announced to the watchers (a turn begun before anyone watched is not followed), with each call's id
   * as its `call` event showed it. */
  #turns = new Map()

  /** `reporter`: shows a call's id and arguments as a trace does (redacted, capped). */
  constructor({ engine, reporter }) {
    this.#engine = engine
    this.#reporter = reporter
  }

  get on() {
    return this.#subscriptions.size > 0
  }

  /**
   * Adds a watcher; returns what removes it. The engine reports stations only while someone watches. With
   * `approve`, the watcher is asked each approval of a turn it follows, beside the application's callback.
   * @param {(events: object[]) => void} listener
   * @param {{ approve?: Function }} [options]
   */
  add(listener, { approve } = {}) {
    if (typeof listener !== 'function') throw new TypeError('watch(listener): listener must be a function (events) => void')
    if (approve !== undefined && typeof approve !== 'function') throw new TypeError('watch(listener, { approve }): approve must be a function (request) => answer')
    const subscription = { listener, approve }
    this.#subscriptions.add(subscription)
    this.#engine.observe(true)
    return () => {
      if (!this.#subscriptions.delete(subscription) || this.#subscriptions.size > 0) return
      this.#engine.observe(false)
      this.#turns.clear()
      for (const asking of this.#asking.values()) for (const decided of asking.values()) decided.abort('watching stopped')
      this.#asking.clear()
    }
  }

  /**
   * The watchers that answer approvals, asked for a call of a turn they follow: its id and arguments as a trace
   * shows them, and a signal that aborts once the approval no longer waits on them (decided, the call ended, or
   * watching stopped). Returns each one's answer, read as the callback's is (one that gives no decision, or throws,
   * rejects: it decides nothing while another may answer; edited arguments are applied to the call's own), and what
   * tells them the approval was decided. Undefined when none answers for this turn.
   */
  approvals(traceId, index, { callId, toolName, arguments: args, rule, reason }) {
    const asking = this.#asking.get(traceId)
    const approvers = asking === undefined ? [] : [...this.#subscriptions].filter((s) => s.approve)
    if (approvers.length === 0) return undefined
    const decided = new AbortController()
    asking.set(index, decided)
    const [shownId, shownArgs] = this.#shown([callId, args])
    const request = Object.freeze({ turn: traceId, index, callId: shownId, toolName, arguments: shownArgs, rule, reason, signal: decided.signal })
    const answers = approvers.map(({ approve }) => callHost(() => approve(request)).then((answer) => {
      if (answer === undefined || answer === null) throw new Error('a watcher gave no decision')
      const read = readApproval(answer)
      if (read.arguments !== undefined) read.arguments = applyEdits(args, shownArgs, read.arguments)
      return read
    }))
    const over = () => {
      if (asking.get(index) === decided) asking.delete(index)
      decided.abort('the approval was decided')
    }
    return { answers, decided: over }
  }

  /** An event of an announced turn, queued for the next batch; false for another turn's. */
  #emit(event) {
    if (!this.#turns.has(event.turn)) return false
    this.#pending.push(event)
    if (this.#pending.length > 1) return true
    queueMicrotask(() => {
      // The handlers' arguments of the batch's starts, shown in one crossing.
      if (this.#unshown.length > 0) {
        const shown = this.#shown(this.#unshown.map(([, args]) => args))
        this.#unshown.forEach(([event], i) => { event.args = shown[i] })
        this.#unshown = []
      }
      // One array for every watcher, frozen: none can take events from the others.
      const events = Object.freeze(this.#pending)
      this.#pending = []
      for (const { listener } of this.#subscriptions) callListener(listener, events, 'watch')
    })
    return true
  }

  /** A turn began, with its calls so far (a streaming turn's come later, one `call` each). */
  turn(turn, traceId) {
    this.#turns.set(traceId, [])
    this.#asking.set(traceId, new Map())
    this.#emit({ type: 'turn', turn: traceId, at: Date.now(), streaming: turn.streaming !== undefined })
    this.calls(turn.calls, 0, traceId)
  }

  /** Calls from `first` on, each with its id, name and arguments as a trace shows them. */
  calls(calls, first, traceId) {
    const ids = this.#turns.get(traceId)
    if (ids === undefined || calls.length === first) return
    const added = calls.slice(first)
    const sent = added.map(sentIds)
    const shown = this.#shown(added.flatMap((call, i) => [sent[i].callId, argumentsOf(call)]))
    const at = Date.now()
    sent.forEach(({ name }, i) => {
      ids[first + i] = shown[2 * i]
      this.#emit({ type: 'call', turn: traceId, index: first + i, callId: shown[2 * i], name, args: shown[2 * i + 1], at })
    })
  }

  /** Values as a trace shows them; should that fail, placeholders: watching never ends a turn. */
  #shown(list) {
    try {
      return this.#reporter.shown(list)
    } catch {
      return list.map(() => '(not shown)')
    }
  }

  /** The stations a step says calls met. */
  step(step, traceIdOf) {
    if (!step.marks) return
    for (const record of step.marks) {
      const { turn, index, mark, ms } = readLiveMark(record)
      const colon = mark.indexOf(':')
      this.#emit({ type: 'station', turn: traceIdOf(turn), index, station: mark.slice(0, colon), outcome: mark.slice(colon + 1), ms })
    }
  }

  /** A handler started (`start`: its Start record, read); the first attempt says the arguments it was given (after
   * repair), as a trace shows them. */
  started({ turn, index, name, attempt, args }, traceIdOf) {
    const event = { type: 'start', turn: traceIdOf(turn), index, name, attempt, at: Date.now() }
    // A copy: the handler may change its arguments before the batch is shown.
    if (this.#emit(event) && attempt === 1) this.#unshown.push([event, copyOf(args)])
  }

  /** The application was asked something for a call: its check, its cost, a schema's validation, an approval. */
  asked({ turn, index, kind }, traceIdOf) {
    this.#emit({ type: 'ask', turn: traceIdOf(turn), index, kind, at: Date.now() })
  }

  /** Results handed on: a streaming turn's as they settle, a whole turn's at its end. Each watcher gets a copy of
   * its own, with the call's id as its `call` event showed it: the caller's results stay the caller's. */
  results(traceId, indices, results) {
    const ids = this.#turns.get(traceId)
    if (ids === undefined) return
    const asking = this.#asking.get(traceId)
    indices.forEach((index, i) => {
      // A call answered while an approval waited on a watcher (its time ran out, its turn was cancelled).
      asking?.get(index)?.abort('the call ended')
      asking?.delete(index)
      const result = Object.freeze({ ...copyOf(results[i]), callId: ids[index] ?? results[i].callId })
      this.#emit({ type: 'result', turn: traceId, index, result })
    })
  }

  done(traceId) {
    this.#emit({ type: 'done', turn: traceId, at: Date.now() })
    this.#turns.delete(traceId)
    for (const decided of this.#asking.get(traceId)?.values() ?? []) decided.abort('the call ended')
    this.#asking.delete(traceId)
  }
}

module.exports = { Watchers }
