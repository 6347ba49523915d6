'use strict'
// Frameworks hand a tool call over one `execute` at a time: all the calls of a step within one turn of the event loop
// (generateText, agents), or each as the model streams it (streamText). The calls of one step join one streaming
// turn of the gate as they arrive, and meet its scheduler (reads together, a write alone and in its place), its
// dedup, rate limits and approvals, as the model sent them.

/** Taken at load: a test that fakes the global timers must not stall a turn's end. */
const nextTurnOfTheLoop = setImmediate

/**
 * A function `(call, { signal, context, run }) → Promise<ToolResult>` for an adapter's tools: the calls of one step
 * join one streaming turn, one per signal, context and run (`run`: what the framework hands every call of one run
 * or step, and no other's, such as the step's messages: two runs that share a signal and a context, or have
 * neither, are still two turns), and each promise gets its own call's result. A turn ends once every call it took
 * has settled and the event loop has turned with no new one: a call of the step that comes later opens the next,
 * with nothing left running that it would have waited for.
 */
function gatherTurns(gate) {
  const open = []
  const close = (step) => {
    if (step.unsettled > 0 || !open.includes(step)) return
    open.splice(open.indexOf(step), 1)
    step.turn.end()
  }
  return async (call, { signal, context, run } = {}) => {
    // A turn under a signal that has fired takes no calls: execute() answers them, cancelled.
    if (signal?.aborted) return (await gate.execute([call], { signal, context }))[0]
    let step = open.find((s) => s.signal === signal && s.context === context && s.run === run && s.turn.open)
    if (step === undefined) {
      step = { signal, context, run, turn: gate.turn({ signal, context }), unsettled: 0 }
      open.push(step)
    }
    step.unsettled += 1
    try {
      return await step.turn.add(call)
    } finally {
      step.unsettled -= 1
      if (step.unsettled === 0) nextTurnOfTheLoop(() => close(step))
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
