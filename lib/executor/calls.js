'use strict'
// A handler's run as the executor keeps it (its call, its signal made only when read, what it keeps once it ends)
// and the context the handler gets.

const { now } = require('../timers.js')

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
    /** The tool's `rollbackWhen` function, when it has one. */
    this.judge = undefined
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

module.exports = { RunningCall, HandlerContext, CALL }
