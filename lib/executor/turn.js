'use strict'
// A streaming turn: calls added as they arrive, each result handed on as it settles, and a provider's stream read
// for its calls while its events pass through.

const { READERS, STREAM_FORMATS, Assembly } = require('../streams.js')

/** What the executor feeds a streaming turn: its results, by call and in the order they settled. */
class TurnFeed {
  /** Results by call index. */
  #byCall = []
  /** What `resultOf` promised for calls not settled yet, by call index. */
  #promised = new Map()
  /** Results in the order they settled, for the turn's readers. */
  #inOrder = []
  #wakers = []
  /** Results of calls a tapped stream completed after the turn took its last, and those still coming. */
  #late = []
  #lateTaken = []
  #lateComing = 0
  /** Streams being tapped into the turn: its readers wait for the calls they may still complete. */
  #tapping = 0
  /** The turn takes no more calls (the engine said so; it may not be over yet). */
  closed = false
  finished = false
  /** @type {Promise<unknown[]>} */
  results
  #resolve

  constructor() {
    this.results = new Promise((resolve) => (this.#resolve = resolve))
  }

  settled(index, result) {
    this.#byCall[index] = result
    this.#promised.get(index)?.(result)
    this.#promised.delete(index)
    this.#hand(result)
  }

  /** The result of the call at `index`, once it settles. */
  resultOf(index) {
    if (this.#byCall[index] !== undefined) return Promise.resolve(this.#byCall[index])
    return new Promise((resolve) => this.#promised.set(index, resolve))
  }

  /** The calls (of `count`) whose results no step named: the engine still holds them, in call order. */
  untaken(count) {
    const untaken = []
    for (let i = 0; i < count; i++) if (this.#byCall[i] === undefined) untaken.push(i)
    return untaken
  }

  /** Every call's result: those taken as they settled, `rest` in the places still empty. */
  whole(count, rest) {
    let next = 0
    return Array.from({ length: count }, (_, i) => this.#byCall[i] ?? rest[next++])
  }

  /** The turn is over with `all` its results; any not handed on yet go to the readers now. */
  finish(all) {
    all.forEach((result, i) => {
      if (this.#byCall[i] !== undefined) return
      this.#promised.get(i)?.(result)
      this.#hand(result)
    })
    this.#promised.clear()
    this.finished = true
    this.#wake()
    this.#resolve(all)
  }

  close() {
    this.closed = true
  }

  tapping(change) {
    this.#tapping += change
    this.#wake()
  }

  /** Results of calls that came after the turn took its last (`late` answers them, not run), after the others. */
  late(promise) {
    this.#lateComing += 1
    const taken = promise.then((results) => {
      this.#late.push(...results)
      for (const result of results) this.#hand(result)
      this.#lateComing -= 1
      this.#wake()
    })
    this.#lateTaken.push(taken)
  }

  /** Every call's result in the order the calls came, once the turn is over and late calls are answered. */
  async everything() {
    const all = await this.results
    await Promise.all(this.#lateTaken)
    return this.#late.length === 0 ? all : [...all, ...this.#late]
  }

  #hand(result) {
    this.#inOrder.push(result)
    this.#wake()
  }

  #wake() {
    const wakers = this.#wakers
    this.#wakers = []
    for (const wake of wakers) wake()
  }

  /** Each result once, as it settles, from the first. */
  async *each() {
    let next = 0
    for (;;) {
      while (next < this.#inOrder.length) yield this.#inOrder[next++]
      if (this.finished && this.#lateComing === 0 && this.#tapping === 0) return
      await new Promise((resolve) => this.#wakers.push(resolve))
    }
  }
}

/**
 * A turn that takes its calls as they come (`gate.turn(options)`). Scheduled as `execute` schedules a turn handed
 * over whole: a read-only call starts at once while only read-only calls run or wait before it, a state-changing
 * call waits for every call before it and holds every call after it.
 */
class ToolTurn {
  #control
  #feed
  /** How many calls were added. */
  #added = 0
  /** Why the turn takes no more calls: `ended`, `cancelled`; undefined while it takes them. */
  #closedBy
  /** @param {{ add(call: unknown): void, end(): void, cancel(reason: unknown): void, late(calls: unknown[]): Promise<unknown[]> }} control */
  constructor(control, feed) {
    this.#control = control
    this.#feed = feed
  }

  /**
   * Every call's result, in the order added, once the turn is over: what `execute` resolves to. Calls a tapped
   * stream completed after the turn took its last follow, each answered `cancelled`, not run.
   */
  get results() {
    return this.#feed.everything()
  }

  /** Whether the turn still takes calls. */
  get open() {
    return this.#closedBy === undefined && !this.#feed.closed && !this.#feed.finished
  }

  /** Adds a call in any shape `execute` takes; it starts as soon as the scheduler allows. Resolves to its result. */
  add(call) {
    if (!this.open) {
      const why = this.#closedBy ?? 'ended by its signal, its time limit, the executor closing or a failure of the engine'
      throw new TypeError(`turn.add(call): this turn takes no more calls (it was ${why})`)
    }
    const result = this.#feed.resultOf(this.#added++)
    this.#control.add(call)
    return result
  }

  /** No more calls: the turn is over when the calls it has are. Ending it again changes nothing. */
  end() {
    if (!this.open) return
    this.#closedBy = 'ended'
    this.#control.end()
  }

  /** As aborting `execute`'s signal: running and waiting calls end as cancelled, and the turn takes no more. */
  cancel(reason) {
    if (this.#feed.finished) return
    this.#closedBy = 'cancelled'
    this.#control.cancel(reason)
  }

  [Symbol.asyncIterator]() {
    return this.#feed.each()
  }

  /**
   * Reads a provider's stream, yielding its events unchanged, and adds each tool call to the turn the moment its
   * arguments are complete; when the stream ends the turn ends. A call the stream ends inside is answered
   * `invalid_arguments`, never run; an error of the stream reaches the reader after the calls it completed.
   */
  tap(stream, format) {
    const read = Object.hasOwn(READERS, format) ? READERS[format] : undefined
    if (read === undefined) throw new TypeError(`turn.tap(stream, format): format must be one of ${STREAM_FORMATS.join(', ')}; got ${String(format)}`)
    const events = eventsOf(stream)
    if (!this.open) throw new TypeError('turn.tap(stream, format): this turn takes no more calls')
    return this.#tap(events, read)
  }

  async *#tap(events, read) {
    const assembly = new Assembly()
    // Once the turn takes no more calls (ended, cancelled, past its time limit, closed), the stream's later calls
    // are answered without running: every call the model sent has a result.
    const take = (calls) => {
      for (const [i, call] of calls.entries()) {
        if (this.open) {
          this.add(call)
          continue
        }
        this.#feed.late(this.#control.late(calls.slice(i)))
        return
      }
    }
    this.#feed.tapping(+1)
    try {
      for await (const event of events) {
        if (event !== null && typeof event === 'object') take(read(assembly, event))
        yield event
      }
    } finally {
      take(assembly.cut())
      this.end()
      this.#feed.tapping(-1)
    }
  }
}

/** A stream's events: an async or sync iterable, or an SDK's response holding one as `stream` (Bedrock's). */
function eventsOf(stream) {
  const iterable = (value) => value != null && (typeof value[Symbol.asyncIterator] === 'function' || typeof value[Symbol.iterator] === 'function')
  if (iterable(stream) && typeof stream !== 'string') return stream
  if (iterable(stream?.stream)) return stream.stream
  throw new TypeError('turn.tap(stream, format): stream must be an async iterable of the provider\'s stream events')
}

module.exports = { ToolTurn, TurnFeed }
