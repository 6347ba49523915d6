// @ts-check
'use strict'
// Turns watched live (`gate.watch(listener)`): each turn as it begins, its calls as they come, each station a call
// meets as it meets it (a wait begun, a decision, the call sealed), each handler started, each question put to the
// application, and the results. Nothing of it is done while nobody watches; a listener hears a step's events in one
// batch, on a later microtask, so that it never holds the pipeline.

const { argumentsOf, copyOf, sentIds } = require('../engine/wire.js')
const { readLiveMark } = require('../engine/wire.generated.js')
const { callListener } = require('../callbacks.js')
const { queueMicrotask } = require('../timers.js')
const { WatchApprovals } = require('./approving.js')

class Watchers {
  /** One entry per `watch()`: the same function watching twice is two watchers. */
  #subscriptions = new Set()
  #engine
  #reporter
  /** Events not yet handed to the watchers, each with its turn's place in the order turns began. */
  #pending = []
  #pendingSeqs = []
  /** Start events of the pending batch, with the arguments each is yet to show. */
  #unshown = []
  #approvals = new WatchApprovals()
  /** The turns announced to the watchers (a turn begun before anyone watched is not followed): each call's id as
   * its `call` event showed it, and the turn's place in the order turns began. A watcher follows the turns begun
   * after it began watching. */
  #turns = new Map()
  #seq = 0

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
    const subscription = { listener, approve, since: this.#seq, asked: new Set() }
    this.#subscriptions.add(subscription)
    this.#engine.observe(true)
    return () => {
      if (!this.#subscriptions.delete(subscription)) return
      this.#approvals.stopped(subscription)
      if (this.#subscriptions.size > 0) return
      this.#engine.observe(false)
      for (const traceId of this.#turns.keys()) this.#approvals.turnEnded(traceId)
      this.#turns.clear()
    }
  }

  /**
   * The watchers that answer approvals and follow this call's turn, asked about it with its id and arguments as a
   * trace shows them (see WatchApprovals). Undefined when none does.
   */
  approvals(traceId, index, { callId, toolName, arguments: args, rule, reason }) {
    const seq = this.#turns.get(traceId)?.seq
    const approvers = seq === undefined ? [] : [...this.#subscriptions].filter((s) => s.approve && s.since < seq)
    if (approvers.length === 0) return undefined
    const [shownId, shownArgs] = this.#shown([callId, args])
    return this.#approvals.ask(approvers, traceId, index, { args, shownId, shownArgs, toolName, rule, reason })
  }

  /** An event of an announced turn, queued for the next batch; false for another turn's. */
  #emit(event) {
    const turn = this.#turns.get(event.turn)
    if (turn === undefined) return false
    this.#pending.push(event)
    this.#pendingSeqs.push(turn.seq)
    if (this.#pending.length > 1) return true
    queueMicrotask(() => this.#deliver())
    return true
  }

  /** The batch to each watcher: one frozen array (none can take events from the others), the events of turns begun
   * before a watcher came left out of its own. */
  #deliver() {
    // The handlers' arguments of the batch's starts, shown in one crossing.
    if (this.#unshown.length > 0) {
      const shown = this.#shown(this.#unshown.map(([, args]) => args))
      this.#unshown.forEach(([event], i) => { event.args = shown[i] })
      this.#unshown = []
    }
    const events = Object.freeze(this.#pending)
    const seqs = this.#pendingSeqs
    this.#pending = []
    this.#pendingSeqs = []
    const oldest = seqs.reduce((a, b) => Math.min(a, b))
    for (const { listener, since } of this.#subscriptions) {
      const own = since < oldest ? events : Object.freeze(events.filter((_, i) => since < seqs[i]))
      if (own.length > 0) callListener(listener, own, 'watch')
    }
  }

  /** A turn began, with its calls so far (a streaming turn's come later, one `call` each). */
  turn(turn, traceId) {
    this.#turns.set(traceId, { ids: [], seq: ++this.#seq })
    this.#emit({ type: 'turn', turn: traceId, at: Date.now(), streaming: turn.streaming !== undefined })
    this.calls(turn.calls, 0, traceId)
  }

  /** Calls from `first` on, each with its id, name and arguments as a trace shows them. */
  calls(calls, first, traceId) {
    const ids = this.#turns.get(traceId)?.ids
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

  /** The stations a step says calls met. An approval the engine took an answer for (or gave up on), or a call
   * sealed, no longer waits on the watchers. */
  step(step, traceIdOf) {
    if (!step.marks) return
    for (const record of step.marks) {
      const { turn, index, mark, ms } = readLiveMark(record)
      const colon = mark.indexOf(':')
      const station = mark.slice(0, colon)
      const traceId = traceIdOf(turn)
      if (station === 'approval') this.#approvals.ended(traceId, index, 'the approval ended')
      else if (station === 'sealed') this.#approvals.ended(traceId, index, 'the call ended')
      this.#emit({ type: 'station', turn: traceId, index, station, outcome: mark.slice(colon + 1), ms })
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
    const ids = this.#turns.get(traceId)?.ids
    if (ids === undefined) return
    indices.forEach((index, i) => {
      // A call answered while an approval waited on a watcher, its sealing not heard (an engine failure).
      this.#approvals.ended(traceId, index, 'the call ended')
      const result = Object.freeze({ ...copyOf(results[i]), callId: ids[index] ?? results[i].callId })
      this.#emit({ type: 'result', turn: traceId, index, result })
    })
  }

  done(traceId) {
    this.#emit({ type: 'done', turn: traceId, at: Date.now() })
    this.#turns.delete(traceId)
    this.#approvals.turnEnded(traceId)
  }
}

module.exports = { Watchers }
