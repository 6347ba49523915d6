'use strict'
// The application's own functions (checks, the approval callback, rollbackWhen, listeners) called so that nothing
// they do, throw or return can sink a call or the process.

const { reprOf, textOf, clip } = require('./engine/describe.js')

/** Calls a host function; its exception becomes a rejection. */
function callHost(fn) {
  try {
    return Promise.resolve(fn())
  } catch (err) {
    return Promise.reject(err)
  }
}

/** A check's problem, or what a host function threw, as text: a string, an Error's message, or false ("not
 * allowed", with no detail). */
function describeProblem(problem) {
  return problem === false ? 'the arguments were refused by the tool\'s check' : textOf(problem)
}

/** An approval callback's answer in the engine's form: true / 'approve' / { decision: 'approve', arguments?,
 * remember? } approves; anything else denies (with its reason when it gives one). */
function readApproval(answer) {
  if (answer === true || answer === 'approve') return { decision: 'approve' }
  if (answer && typeof answer === 'object' && (answer.decision === 'approve' || answer.decision === 'deny')) {
    const out = { decision: answer.decision }
    if (typeof answer.reason === 'string') out.reason = answer.reason
    if (answer.decision === 'approve' && answer.arguments !== undefined) out.arguments = answer.arguments
    if (answer.remember === 'session') out.remember = 'session'
    return out
  }
  if (answer === false || answer === 'deny') return { decision: 'deny' }
  return { decision: 'deny', reason: `the approval callback gave no decision (it returned ${reprOf(answer)})` }
}

/** A `rollbackWhen` function's verdict on a returned value: the reason to roll back, or undefined. It must not
 * sink the call: one that throws counts as no verdict, with a process warning. */
function judgeValue(call, value) {
  try {
    const verdict = call.judge(value, { callId: call.callId, toolName: call.toolName, context: call.turn.context })
    if (typeof verdict === 'string' && verdict !== '') return verdict
    return verdict === true ? 'the tool\'s rollbackWhen function flagged the result' : undefined
  } catch (err) {
    warn(`the rollbackWhen function of "${call.toolName}" threw`, err)
    return undefined
  }
}

/** A listener's exception, or its promise's rejection, must not reach the handler or the turn: it becomes a process
 * warning. */
function callListener(listener, payload, name) {
  try {
    const returned = listener(payload)
    if (typeof returned?.then === 'function') Promise.resolve(returned).catch((err) => warn(`the ${name} listener rejected`, err))
  } catch (err) {
    warn(`the ${name} listener threw`, err)
  }
}

/** A process warning about what an application function threw; never throws itself. */
function warn(what, err) {
  process.emitWarning(`toolgate: ${what}: ${clip(textOf(err))}`)
}

module.exports = { callHost, describeProblem, readApproval, judgeValue, callListener, warn }
