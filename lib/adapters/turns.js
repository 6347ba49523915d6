'use strict'
// Frameworks hand a tool call over one `execute` at a time: all the calls of a step within one turn of the event loop
// (generateText, agents), or each as the model streams it (streamText). The calls of one step join one streaming
// turn of the gate as they arrive, and meet its scheduler (reads together, a write alone and in its place), its
// dedup, rate limits and approvals, as the model sent them.

/** Taken at load: a test that fakes the global timers must not stall a turn's end. */
const nextTurnOfTheLoop = setImmediate

/**
 * A function `(call, { signal, context, run }) → Promise<ToolResult>` for an adapter's tools: the calls of one step
 * join one streaming turn, one per signal, context and run, and each promise gets its own call's result. `run` is
 * what the framework hands every call of one run or step and no other's (the step's messages): a step so named
 * takes its calls as they come, until every call it took has settled (a call of the step that comes later opens
 * the next turn, with nothing left running it would have waited for). Without `run`,
 * nothing tells one request's calls from another's that shares its signal and context: the turn takes the calls of
 * one turn of the event loop, as the framework hands over a step's calls together.
 */
function gatherTurns(gate) {
  const open = []
  const seal = (step) => {
    const at = open.indexOf(step)
    if (at === -1) return
    open.splice(at, 1)
    step.turn.end()
  }
  return async (call, { signal, context, run } = {}) => {
    // A turn under a signal that has fired takes no calls: execute() answers them, cancelled.
    if (signal?.aborted) return (await gate.execute([call], { signal, context }))[0]
    let step = open.find((s) => s.signal === signal && s.context === context && s.run === run && s.turn.open)
    if (step === undefined) {
      step = { signal, context, run, turn: gate.turn({ signal, context }), unsettled: 0 }
      open.push(step)
      if (run === undefined) nextTurnOfTheLoop(() => seal(step))
    }
    step.unsettled += 1
    try {
      return await step.turn.add(call)
    } finally {
      // Once its calls have all settled, the step's next call meets the gate as it is then (a context changed
      // since, a deny added): it opens a turn of its own.
      step.unsettled -= 1
      if (step.unsettled === 0) seal(step)
    }
  }
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
