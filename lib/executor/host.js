// @ts-check
'use strict'
// What only the host can answer before a call may run, asked by the engine and answered into it: a schema's own
// validation of the arguments, the tool's check of them, what the call costs, and the approval callback, with
// arguments edited at approval validated, checked and priced again. Whatever the application's function does
// (answers, throws, hangs past the engine's time limit), the call gets a result.

const { reprOf } = require('../engine/describe.js')
const { HOST_KIND } = require('../engine/wire.generated.js')
const { callHost, describeProblem, readApproval } = require('../callbacks.js')
const { validationResult } = require('../schemas.js')
const { withinTime } = require('./lifecycle.js')

class HostRequests {
  #tools
  #engine
  #drive
  #turnOf
  #checkTimeoutMs
  #timers
  #watchers
  #traceIdOf

  /**
   * `drive(engineCall)`: an engine call of the executor's turn machinery, its step applied; `turnOf(id)`: an open
   * turn, or undefined; `timers()`: the executor's timers (a test's clock, once one is attached); `watchers`: those
   * watching turns live (some may answer approvals), with `traceIdOf(turnId)` the id they know a turn by.
   */
  constructor({ tools, engine, drive, turnOf, checkTimeoutMs, timers, watchers, traceIdOf }) {
    this.#tools = tools
    this.#engine = engine
    this.#drive = drive
    this.#turnOf = turnOf
    this.#checkTimeoutMs = checkTimeoutMs
    this.#timers = timers
    this.#watchers = watchers
    this.#traceIdOf = traceIdOf
  }

  /** A call waits on the host: the schema's own validation, the tool's check of its arguments, or the approval
   * callback. Whatever the function does (answers, throws, hangs past the engine's time limit), the call gets a
   * result.
   * @param {import('../engine/wire.generated').HostRequest} request */
  ask({ ticket, kind, turn: turnId, callId, name: toolName, args, rule, reason, index }) {
    const turn = this.#turnOf(turnId)
    const context = turn?.context
    const recording = kind === HOST_KIND.validate ? undefined : turn?.recording
    recording?.asked(index, kind)
    // A replayed turn's check, cost and approval answer as they did when recorded; a schema validates afresh. What
    // runs live meanwhile is real work, which the replay's clock waits for (`live`).
    const recorded = kind === HOST_KIND.validate ? undefined : turn?.standIn?.answer(kind, index)
    const live = recorded === undefined ? turn?.standIn?.live : undefined
    live?.(1)
    if (kind === HOST_KIND.cost && turn !== undefined) (turn.priced ??= new Set()).add(index)
    // The watchers that answer approvals and follow this turn are asked beside the callback.
    const watching = kind === HOST_KIND.approve && recorded === undefined
      ? this.#watchers.approvals(this.#traceIdOf(turnId), index, { callId, toolName, arguments: args, rule, reason: reason ?? undefined })
      : undefined
    let pending
    if (recorded !== undefined && kind !== HOST_KIND.approve) {
      pending = recorded
    } else if (kind === HOST_KIND.validate) {
      pending = this.#validated(turn, index, toolName, args)
    } else if (kind === HOST_KIND.check) {
      pending = this.#checked(turn, index, toolName, callId, args).then((problem) => (problem === undefined ? {} : { problem }))
    } else if (kind === HOST_KIND.cost) {
      pending = this.#costOf(turn, index, toolName, callId, args).then((cost) => ({ cost }))
    } else if (recorded === undefined && turn?.approve === undefined && watching === undefined) {
      pending = Promise.resolve({ decision: 'deny', reason: 'no approval callback is set' })
    } else {
      const request = { callId, toolName, arguments: args, rule, reason: reason ?? undefined, context }
      const decided = recorded ?? this.#approved(turn, request, watching)
      // The decision is recorded as given; edited arguments are validated, checked and priced again on replay.
      if (recording) decided.then((answer) => recording.answered(index, kind, answer), (err) => recording.answered(index, kind, { error: describeProblem(err) }))
      pending = decided.then((answer) => {
        if (answer.arguments === undefined) return answer
        // Edited arguments are validated, checked and priced live, a recorded approval's too.
        if (recorded !== undefined) turn?.standIn?.live(1)
        const checked = this.#editsPass(turn, index, toolName, callId, answer.arguments).then((issues) => {
          // Priced again only when the model's arguments were (a cost budget applies to the call).
          if (issues || !turn?.priced?.has(index)) return issues ? { ...answer, issues } : answer
          // What edited arguments cost replaces what the model's did (the engine keeps it only under a cost budget).
          return this.#costOf(turn, index, toolName, callId, answer.arguments).then(
            (cost) => ({ ...answer, cost }),
            (err) => ({ ...answer, costError: describeProblem(err) }),
          )
        })
        if (recorded !== undefined) checked.finally(() => turn?.standIn?.live(-1)).catch(() => {})
        return checked
      })
    }
    pending
      .catch((err) => ({ error: describeProblem(err) }))
      .then((answer) => {
        if (recording && kind !== HOST_KIND.approve) recording.answered(index, kind, answer)
        return JSON.stringify(answer)
      })
      // An answer that cannot be passed on (edited arguments holding a BigInt, say) denies the call.
      .catch((err) => JSON.stringify({ error: `its answer could not be read (${describeProblem(err)})` }))
      .then((json) => {
        live?.(-1)
        this.#answer(ticket, json)
      })
  }

  /** The approval callback and the watchers that answer approvals, asked together: the first answer decides (a
   * rejection decides only when every one of them rejects). */
  #approved(turn, request, watching) {
    const asked = turn?.approve === undefined ? [] : [callHost(() => turn.approve(request)).then(readApproval)]
    if (watching === undefined) return asked[0]
    const first = Promise.any([...asked, ...watching.answers]).catch((err) => Promise.reject(err.errors[0]))
    first.then(watching.decided, watching.decided)
    return first
  }

  #answer(ticket, json) {
    this.#drive(() => {
      try {
        return this.#engine.answer(ticket, json)
      } catch (err) {
        // One the engine cannot read (edited arguments nested too deeply, say) denies the call, as above.
        if (err?.code !== 'InvalidArg') throw err
        return this.#engine.answer(ticket, JSON.stringify({ error: `its answer could not be read (${describeProblem(err)})` }))
      }
    })
  }

  /** Arguments edited at approval meet what the model's did in JS: the schema's own validation (its output is what
   * the handler then receives) and the tool's check, each within `checkTimeoutMs`. Resolves to the issues that
   * refuse the edit, or undefined. */
  #editsPass(turn, index, toolName, callId, edited) {
    const within = (what, step) => withinTime(step(), this.#checkTimeoutMs, this.#timers()).then(
      (verdict) => verdict ?? { issues: [['', `${what} gave no answer within ${this.#checkTimeoutMs} ms`]] },
      (err) => ({ issues: [['', `${what} failed (${describeProblem(err)})`]] }),
    )
    const validated = this.#tools.validations.has(toolName)
      ? within("the schema's own validation of them", () => this.#validated(turn, index, toolName, edited))
      : Promise.resolve({})
    return validated.then(({ issues }) => {
      if (issues || !this.#tools.checks.has(toolName)) return issues
      return within("the tool's check of them", () => this.#checked(turn, index, toolName, callId, edited)
        .then((problem) => (problem === undefined ? {} : { issues: [['', problem]] })))
        .then((verdict) => verdict.issues)
    })
  }

  /** The tool's check of a call's arguments (the schema's output when its own validation ran, else the arguments
   * as the handler gets them): the problem it found, as text, or undefined. */
  #checked(turn, index, toolName, callId, args) {
    const input = turn?.parsed?.has(index) ? turn.parsed.get(index) : this.#tools.pruned(toolName, args)
    return callHost(() => this.#tools.checks.get(toolName)(input, { callId, toolName, context: turn?.context }))
      .then((problem) => (problem == null || problem === true ? undefined : describeProblem(problem)))
  }

  /** What a call costs, by the tool's cost function (on the arguments as the handler gets them): a number of at
   * least 0, or a rejection saying what it gave instead. */
  #costOf(turn, index, toolName, callId, args) {
    const input = turn?.parsed?.has(index) ? turn.parsed.get(index) : this.#tools.pruned(toolName, args)
    return callHost(() => this.#tools.costs.get(toolName)(input, { callId, toolName, context: turn?.context })).then((cost) => {
      if (typeof cost === 'number' && Number.isFinite(cost) && cost >= 0) return cost
      throw new TypeError(`it returned ${reprOf(cost)}, not a number of at least 0`)
    })
  }

  /** The schema's own validation of a call's arguments: `{ issues }` for the engine when they fail it; when they
   * pass, its output is kept for the handler and the answer is empty. */
  #validated(turn, index, toolName, args) {
    const validate = this.#tools.validations.get(toolName)
    return callHost(() => validate(args)).then((result) => {
      const { issues, value } = validationResult(result)
      if (issues) return { issues }
      if (turn !== undefined) (turn.parsed ??= new Map()).set(index, value)
      return {}
    })
  }
}

module.exports = { HostRequests }
