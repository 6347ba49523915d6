// Types of toolgate/testing: the manual clock here, the mocks, the scripted model and the assertions in kit.d.ts.
export * from './kit.js'

export interface ManualClockOptions {
  /** The clock's time to begin with, in ms. Default 0. */
  now?: number
  /** Told of every move, in ms, and awaited before the gate's time moves: `(ms) => vi.advanceTimersByTimeAsync(ms)`
   * moves vitest's faked timers along, so that a handler waiting on them finishes before a limit it met. */
  onAdvance?: (ms: number) => void | PromiseLike<unknown>
  /** With `onAdvance`: the longest slice the clock moves at once, in ms (what a handler does on the faked timers
   * reaches the gate within a slice). Default 100. */
  tieStepMs?: number
}

/** Time that tests control: pass it as `new ToolExecutor({ clock })`; nothing on it falls due until it is moved. */
export declare class ManualClock {
  constructor(options?: ManualClockOptions)
  /** The clock's time in ms: the `now` it was made with plus every advance. */
  now(): number
  /**
   * Moves the clock `ms` on, from one due moment to the next (a deadline of any executor on it: limits, backoffs,
   * refills, TTLs, approval and check timeouts; a timer set on it), letting the JS work each sets off run before
   * the next. Advances never overlap.
   */
  advance(ms: number): Promise<void>
  /** Moves the clock to the next due moment, if any; resolves to how far it moved. */
  next(): Promise<number>
  setTimeout<A extends unknown[]>(fn: (...args: A) => void, ms?: number, ...args: A): number
  clearTimeout(id: number): void
  /** Resolves once the clock has moved `ms` on; rejects with the signal's reason when it aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>
}

export declare function manualClock(options?: ManualClockOptions): ManualClock
