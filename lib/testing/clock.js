'use strict'
// Time that tests control. An executor given `clock: manualClock()` keeps every deadline on it: total and idle
// limits, retry backoffs, rate-limit refills and waits, cache and dedup TTLs, approval and check timeouts, turn
// deadlines, artifact TTLs. Nothing falls due until the test moves the clock: `await clock.advance(ms)` moves it
// from one due moment to the next, in order, letting the JS work each one sets off run before the next.

// Taken at load: the steps of `advance` must run on real turns of the event loop even under faked timers.
const { setImmediate } = require('node:timers')

/** The key under which an executor finds what it needs of a clock (a global symbol: any copy of the package). */
const CLOCK = Symbol.for('toolgate.clock')
/** Real turns of the event loop after each step, for what it set off (a handler's abort, a settlement, a retry's
 * start) to run and arm what comes next. */
const TURNS_PER_STEP = 5
/** How far a clock tied to other clocks (`onAdvance`) moves at once by default, in ms. */
const TIE_STEP_MS = 100
/** More due moments than this in one `advance` is a loop that re-arms at once (a retry without backoff, forever). */
const MAX_STEPS = 100_000

const turnOfTheLoop = () => new Promise((resolve) => setImmediate(resolve))

async function settle() {
  for (let i = 0; i < TURNS_PER_STEP; i++) await turnOfTheLoop()
}

/** Resolves after `ms` on `timers` (their `setTimeout`/`clearTimeout`); rejects with the signal's reason when it
 * aborts first. */
function sleepOn(timers, ms, signal) {
  if (signal?.aborted) return Promise.reject(signal.reason)
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      timers.clearTimeout(id)
      reject(signal.reason)
    }
    const id = timers.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}

class ManualClock {
  #now
  /** The executors on this clock, held weakly: a test that drops one does not keep it. Those with a turn open are
   * also held strongly (`#busy`): only this clock can end their turns. */
  #drivers = new Set()
  #busy = new Set()
  /** Timers set on the clock (`setTimeout`, `sleep`), by id, with the ms left until each runs: kept relative, so
   * that a clock started at `Date.now()` (where a double resolves only a fraction of a µs) still reaches them. */
  #timers = new Map()
  #nextTimer = 1
  #onAdvance
  #tieStepMs
  /** The advance under way: the next one starts after it. */
  #queue = Promise.resolve()

  constructor({ now = 0, onAdvance, tieStepMs = TIE_STEP_MS } = {}) {
    if (!Number.isFinite(now)) throw new TypeError('manualClock({ now }): now must be a finite number of ms')
    if (onAdvance !== undefined && typeof onAdvance !== 'function') throw new TypeError('manualClock({ onAdvance }): onAdvance must be a function (ms) => void')
    if (!(Number.isFinite(tieStepMs) && tieStepMs > 0)) throw new TypeError('manualClock({ tieStepMs }): tieStepMs must be a positive number of ms')
    this.#now = now
    this.#onAdvance = onAdvance
    this.#tieStepMs = tieStepMs
  }

  /** The clock's time, in ms (what `now` it was made with, plus every advance). */
  now() {
    return this.#now
  }

  /** Runs `fn` once the clock has been moved `ms` on (a wait that never ends, `Infinity`, never runs). Returns an
   * id for `clearTimeout`. */
  setTimeout(fn, ms = 0, ...args) {
    if (typeof fn !== 'function') throw new TypeError('clock.setTimeout(fn, ms): fn must be a function')
    const id = this.#nextTimer++
    const left = Math.max(0, Number(ms) || 0)
    if (Number.isFinite(left)) this.#timers.set(id, { left, fn, args })
    return id
  }

  clearTimeout(id) {
    this.#timers.delete(id)
  }

  /** Resolves once the clock has been moved `ms` on; rejects with the signal's reason when it aborts first. */
  sleep(ms, signal) {
    return sleepOn(this, ms, signal)
  }

  /**
   * Moves the clock `ms` on: to each due moment in turn (a deadline of any executor on it, a timer set on it), what
   * falls due then fires, and the JS work it sets off runs before the clock moves again. Resolves once at `now +
   * ms` with that work done. Advances never overlap: one asked for while another runs starts after it.
   */
  advance(ms) {
    if (!(Number.isFinite(ms) && ms >= 0)) return Promise.reject(new TypeError(`clock.advance(ms): ms must be a finite number ≥ 0; got ${String(ms)}`))
    return this.#queued(() => this.#advanceBy(ms))
  }

  /** Moves the clock to the next due moment, however far (nothing is due: it stays). Resolves to how far it moved. */
  next() {
    return this.#queued(async () => {
      await settle()
      const due = this.#nextDueIn()
      if (due === undefined) return 0
      await this.#advanceBy(due)
      return due
    })
  }

  #queued(job) {
    const run = this.#queue.then(job)
    this.#queue = run.catch(() => {})
    return run
  }

  /** Moves `ms` on: each move to the next due moment, tied to other clocks (`onAdvance`) in slices of at most
   * `tieStepMs`, each told to them first (what a handler does on faked timers, it answers or reports progress,
   * reaches the gate within a slice, before a limit it met falls due). Each move looks again at what is due: what
   * the one before armed (a retry's backoff) falls due at its own time. */
  async #advanceBy(ms) {
    let left = ms
    await settle() // what was set off before, a turn begun, arms its deadlines first
    for (let steps = 0; ; steps++) {
      if (steps === MAX_STEPS) throw new Error(`clock.advance: more than ${MAX_STEPS} due moments within ${ms} ms; something re-arms at once`)
      const due = this.#nextDueIn()
      if (left === 0 && due !== 0) return
      let step = Math.min(left, due ?? Infinity)
      if (this.#onAdvance !== undefined) step = Math.min(step, this.#tieStepMs)
      if (step > 0 && this.#onAdvance !== undefined) {
        await this.#onAdvance(step)
        await settle()
      }
      await this.#move(step)
      left -= step
    }
  }

  /** Every executor and timer on this clock moved `delta` on, and the work that sets off run. */
  async #move(delta) {
    this.#now += delta
    for (const driver of this.#live()) driver.advance(delta)
    for (const timer of this.#timers.values()) timer.left -= delta
    const due = [...this.#timers].filter(([, t]) => t.left <= 0).sort(([a, x], [b, y]) => x.left - y.left || a - b)
    for (const [id, timer] of due) {
      // An earlier timer of this step may have cleared it.
      if (!this.#timers.delete(id)) continue
      timer.fn(...timer.args)
    }
    await settle()
  }

  /** How far off, in ms, the earliest thing due on this clock is; undefined when nothing is. */
  #nextDueIn() {
    let due
    for (const driver of this.#live()) {
      const ms = driver.nextDeadlineMs()
      if (ms !== null && (due === undefined || ms < due)) due = ms
    }
    for (const timer of this.#timers.values()) if (due === undefined || timer.left < due) due = Math.max(0, timer.left)
    return due
  }

  *#live() {
    for (const ref of this.#drivers) {
      const driver = ref.deref()
      if (driver === undefined) this.#drivers.delete(ref)
      else yield driver
    }
  }

  /** What an executor given this clock uses. */
  get [CLOCK]() {
    return {
      attach: (driver) => { this.#drivers.add(new WeakRef(driver)) },
      now: () => this.now(),
      hold: (driver, busy) => { if (busy) this.#busy.add(driver); else this.#busy.delete(driver) },
      setTimeout: (fn, ms) => this.setTimeout(fn, ms),
      clearTimeout: (id) => this.clearTimeout(id),
    }
  }
}

/** A clock for `new ToolExecutor({ clock })` that only tests move. `onAdvance(ms)` is told of every move, in slices
 * of at most `tieStepMs`, and awaited before the gate's time moves: pass vitest's
 * `(ms) => vi.advanceTimersByTimeAsync(ms)` to move faked timers along. */
function manualClock(options) {
  return new ManualClock(options)
}

module.exports = { manualClock, ManualClock, sleepOn }
