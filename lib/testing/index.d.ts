// Types of toolgate/testing: the manual clock and replay here, the mocks, the scripted model and the assertions in
// kit.d.ts.
export * from './kit.js'
import type { RecordedTurn, ToolExecutor, ToolResult } from '../../index.js'

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

/** Recorded turns, as `loadRecording` read them. */
export interface Recording {
  entries: RecordedTurn[]
}

/** Reads a recording: the JSONL file a `record: { to }` wrote, or its entries. Rejects on a line it cannot replay,
 * naming the line and what is wrong with it. */
export declare function loadRecording(fileOrEntries: string | readonly RecordedTurn[]): Promise<Recording>

/** One field in which a call's result now differs from its recorded one. */
export interface ReplayChange {
  callId: string
  name: string
  /** A result's field (`success`, `errorKind`, `error`, `output`, `attempts`, `cached`, `truncated`, `name`) or what a
   * station decided (`metadata.permission`, `metadata.repairs`, `metadata.sharedFlight`, `metadata.reused`). */
  field: string
  recorded: unknown
  now: unknown
}

export interface ReplayedTurn {
  at: number
  /** What the gate gives now. */
  results: ToolResult[]
  /** What it gave when recorded. */
  recorded: ToolResult[]
  changes: ReplayChange[]
}

export interface ReplayReport {
  turns: ReplayedTurn[]
  /** How many calls differ. */
  changed: number
}

export interface ReplayOptions {
  /** `recorded` (default): no registered handler, check or cost function runs; each answers as recorded, at its
   * recorded time on the manual clock. `live`: the registered ones run. Approvals are answered as recorded either
   * way (the gate's own callback answers those not recorded). */
  handlers?: 'recorded' | 'live'
}

/** Replays each recorded turn against the gate `setup` builds (as the application does, on the clock it is given). */
export declare function replay(
  recording: Recording | readonly RecordedTurn[],
  setup: (env: { clock: ManualClock }) => ToolExecutor | Promise<ToolExecutor>,
  options?: ReplayOptions,
): Promise<ReplayReport>

/** Throws an AssertionError listing each change, when the report has any. */
export declare function expectUnchanged(report: ReplayReport): void
