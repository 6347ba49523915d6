'use strict'
// Frameworks hand a tool call over one `execute` at a time, all the calls of one model step within the same turn of
// the event loop. Gathered into one turn of the gate, they meet its scheduler (reads together, writes alone and in
// order), and its dedup, rate limits and approvals apply to the turn as the model sent it.

/** Taken at load: a test that fakes the global timers must not stall the gathering. */
const nextTurnOfTheLoop = setImmediate

/**
 * A function `(call, { signal, context, run }) → Promise<ToolResult>` for an adapter's tools: the calls it gets
 * before the event loop turns run as one `gate.execute`, one turn per signal, context and run (`run`: what the
 * framework hands every call of one run or step, and no other's, such as the step's messages: two runs that share
 * a signal and a context, or have neither, are still two turns), and each promise gets its own call's result.
 */
function gatherTurns(gate) {
  let open = []
  const flush = () => {
    const batches = open
    open = []
    for (const batch of batches) {
      gate.execute(batch.calls, { signal: batch.signal, context: batch.context }).then(
        (results) => results.forEach((result, i) => batch.waiters[i].resolve(result)),
        (err) => batch.waiters.forEach((waiter) => waiter.reject(err)),
      )
    }
  }
  return (call, { signal, context, run } = {}) => new Promise((resolve, reject) => {
    let batch = open.find((b) => b.signal === signal && b.context === context && b.run === run)
    if (batch === undefined) {
      batch = { signal, context, run, calls: [], waiters: [] }
      if (open.length === 0) nextTurnOfTheLoop(flush)
      open.push(batch)
    }
    batch.calls.push(call)
    batch.waiters.push({ resolve, reject })
  })
}

/** A cache emptied at the next turn of the event loop: what the calls of one step share, which the next step reads
 * afresh. `(key, make) → value`. */
function perStep() {
  let entries = null
  return (key, make) => {
    if (entries === null) {
      entries = new Map()
      nextTurnOfTheLoop(() => {
        entries = null
      })
    }
    let value = entries.get(key)
    if (value === undefined) entries.set(key, (value = make()))
    return value
  }
}

module.exports = { gatherTurns, perStep }
