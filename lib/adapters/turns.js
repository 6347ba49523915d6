'use strict'
// Frameworks hand a tool call over one `execute` at a time, all the calls of one model step within the same turn of
// the event loop. Gathered into one turn of the gate, they meet its scheduler (reads together, writes alone and in
// order), and its dedup, rate limits and approvals apply to the turn as the model sent it.

/** Taken at load: a test that fakes the global timers must not stall the gathering. */
const nextTurnOfTheLoop = setImmediate

/**
 * A function `(call, { signal, context }) → Promise<ToolResult>` for an adapter's tools: the calls it gets before
 * the event loop turns run as one `gate.execute`, one turn per signal and context (calls of different runs never
 * share a turn), and each promise gets its own call's result.
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
  return (call, { signal, context } = {}) => new Promise((resolve, reject) => {
    let batch = open.find((b) => b.signal === signal && b.context === context)
    if (batch === undefined) {
      batch = { signal, context, calls: [], waiters: [] }
      if (open.length === 0) nextTurnOfTheLoop(flush)
      open.push(batch)
    }
    batch.calls.push(call)
    batch.waiters.push({ resolve, reject })
  })
}

module.exports = { gatherTurns }
