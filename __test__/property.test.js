'use strict'
// Random turns against the promise toolgate makes: whatever the calls look like, whatever the handlers do (return,
// throw anything, hang, settle late, return huge or odd values, ignore their signal) and whenever the turn is
// aborted or the executor closed, every turn resolves, with exactly one result per call, in order, paired by id,
// and nothing is left running. Seeded: TOOLGATE_PROPERTY_SEED and TOOLGATE_PROPERTY_TURNS pick another run.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { ToolExecutor, ERROR_KINDS } = require('..')
const { generator } = require('./helpers.js')

const SEED = Number(process.env.TOOLGATE_PROPERTY_SEED ?? 20261201)
const TURNS = Number(process.env.TOOLGATE_PROPERTY_TURNS ?? 200)
/** Longer than any turn can take here (every limit below is tens of ms): a turn still open then hangs. */
const TURN_GUARD_MS = 10_000

const cyclic = () => {
  const o = { a: 1 }
  o.self = o
  return o
}
const deep = (n) => {
  let v = 'x'
  for (let i = 0; i < n; i++) v = { d: v }
  return v
}
const hostile = () => new Proxy({}, { get() { throw Object.create(null) }, ownKeys() { throw new Error('trap') } })

/** What a handler may return. */
const VALUES = [
  () => 'text', () => '', () => undefined, () => null, () => 42, () => NaN, () => 10n ** 30n, () => ({ a: [1, { b: 'c' }] }),
  () => [1, 'two', null], () => Symbol('s'), () => function named() {}, cyclic, () => deep(300), () => 'Zo\uD83D',
  () => ({ text: 'Zo\uD83D' }), () => 'x'.repeat(300 * 1024), () => Buffer.from('bytes \u0000 here'), () => new Uint8Array([0x89, 0x50, 0x4e, 0x47]),
  () => ({ stdout: 'out', stderr: 'err', exitCode: 1 }), () => ({ type: 'image', data: 'AAAA', mediaType: 'image/png' }),
  () => ({ toJSON() { throw 'a string' } }), () => ({ get x() { throw Symbol('s') } }), hostile,
  () => ({ password: 'hunter2 ghp_Zq4R8sT2vW6xY1bN3mK5pL7jH9gF0dC2aE4x' }), () => 'y'.repeat(40_000),
]
/** What a handler may throw. */
const THROWN = [
  () => new Error('plain'), () => Object.assign(new Error('transient'), { retryable: true }), () => Object.assign(new Error('reset'), { code: 'ECONNRESET' }),
  () => 'a string', () => undefined, () => null, () => Object.create(null), () => ({ message: 42 }), () => Symbol('thrown'),
  () => { const e = new Error('x'); Object.defineProperty(e, 'message', { get() { throw new Error('no') } }); return e },
]

/** A handler that does what the call's `do` says; `r` is shared, so each run's choices follow from the seed. */
function handlerFor(r) {
  return async (args, ctx) => {
    const what = typeof args?.do === 'number' ? args.do : 0
    switch (what % 9) {
      case 0: return VALUES[args.v % VALUES.length]()
      case 1: throw THROWN[args.v % THROWN.length]()
      case 2: return new Promise(() => {}) // hangs, holding nothing
      case 3: return new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve('stopped'))) // honours its signal
      case 4: return new Promise((resolve) => setTimeout(resolve, 30 + (args.v % 40), 'late')) // may settle after its limit
      case 5: // reports progress, then answers
        ctx.progress({ step: 1 })
        await new Promise((resolve) => setTimeout(resolve, args.v % 15))
        ctx.progress({ step: 2 })
        return `progressed ${ctx.attempt}`
      case 6: { // busy on the JS thread past its limit, then answers
        const end = Date.now() + (args.v % 30)
        while (Date.now() < end);
        return 'busy'
      }
      case 7: return Promise.reject(THROWN[args.v % THROWN.length]())
      default: return r.chance(0.5) ? 'quick' : VALUES[args.v % VALUES.length]()
    }
  }
}

const PARAMS = { type: 'object', properties: { do: { type: 'integer' }, v: { type: 'integer' }, pad: { type: 'string' } } }

function executor(r) {
  const gate = new ToolExecutor({
    defaultTimeoutMs: 40,
    maxOutputChars: 2_000,
    approvalTimeoutMs: 30,
    checkTimeoutMs: 30,
    retry: { maxRetries: 1, initialDelayMs: 1, maxDelayMs: 5 },
    approve: () => r.pick([() => true, () => false, () => 'deny', () => ({ decision: 'approve', remember: 'session' }), () => new Promise(() => {}), () => Promise.reject(new Error('no'))])(),
    onTrace: () => {},
  })
  const handler = handlerFor(r)
  gate.register({ name: 'read', readOnly: true, parameters: PARAMS, handler })
  gate.register({ name: 'write', parameters: PARAMS, handler })
  gate.register({ name: 'idem', readOnly: true, idempotent: true, idleTimeoutMs: 25, parameters: PARAMS, handler })
  gate.register({ name: 'limited', readOnly: true, rateLimit: { limit: '3/s', maxWaitMs: 15 }, parameters: PARAMS, handler })
  gate.register({ name: 'checked', parameters: PARAMS, check: () => r.pick([() => undefined, () => 'no', () => false, () => new Promise(() => {}), () => Promise.reject('x')])(), handler })
  gate.register({ name: 'asks', needsApproval: true, retry: { onTimeout: true }, parameters: PARAMS, handler })
  // A breaker that opens and half-opens within a turn or two, and budgets priced by a cost function that may fail.
  gate.register({
    name: 'guarded', readOnly: true, parameters: PARAMS, handler,
    breaker: { minCalls: 2, failureRate: 0.5, windowMs: 200, openMs: 20, halfOpenCalls: 1 },
    budget: { maxCallsPerTurn: 3, maxCalls: 12, maxCallsPerWindow: { calls: 4, windowMs: 50 }, maxCost: 30 },
    cost: (args) => r.pick([() => args.v % 7, () => Promise.resolve(1), () => NaN, () => { throw new Error('no price') }, () => new Promise(() => {})])(),
  })
  gate.registerArtifactTools()
  return gate
}

const NAMES = ['read', 'write', 'idem', 'limited', 'checked', 'asks', 'guarded', 'read_artifact', 'nope', 'Read', '']

/** A call in one of the shapes a provider (or a mistake) makes, and the id its result must carry, when it has one. */
function call(r, i) {
  const name = r.pick(NAMES)
  const args = { do: r.int(9), v: r.int(1000) }
  if (r.chance(0.1)) args.pad = 'p'.repeat(r.int(5_000))
  const id = `id_${i}`
  const text = JSON.stringify(args)
  switch (r.int(12)) {
    case 0: return [{ type: 'tool_use', id, name, input: args }, id]
    case 1: return [{ type: 'function_call', call_id: id, name, arguments: text }, id]
    case 2: return [{ id, type: 'function', function: { name, arguments: text } }, id]
    case 3: return [{ type: 'tool-call', toolCallId: id, toolName: name, input: args }, id]
    case 4: return [{ name, arguments: text.slice(0, r.int(text.length)) }, undefined] // cut off, no id
    case 5: return [{ id, name, arguments: `{'do': ${args.do}, v: ${args.v},}` }, id] // malformed
    case 6: return [r.pick([3, null, 'call', [1]]), undefined]
    case 7: return [{ id, get name() { throw new Error('unreadable') } }, id]
    case 8: return [{ id, name, input: { ...args, q: 'Zo\uD83D' } }, id]
    case 9: return [{ id, name, input: deep(200) }, id]
    case 10: return [{ id, name, input: { ...args, big: 10n } }, id]
    default: return [{ id, name, input: args }, id]
  }
}

/** Resolves to the turn's results, or rejects when it does not resolve in time. */
function settled(turn) {
  let timer
  const guard = new Promise((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`a turn did not resolve within ${TURN_GUARD_MS} ms`)), TURN_GUARD_MS)
  })
  return Promise.race([turn, guard]).finally(() => clearTimeout(timer))
}

function checkTurn(results, expected, where) {
  assert.ok(Array.isArray(results), `${where}: results are an array`)
  assert.equal(results.length, expected.length, `${where}: one result per call`)
  for (const [i, r] of results.entries()) {
    const at = `${where}, call ${i}`
    if (expected[i] !== undefined) assert.equal(r.callId, expected[i], `${at}: paired by id`)
    else assert.equal(typeof r.callId, 'string', `${at}: an id`)
    assert.equal(typeof r.success, 'boolean', at)
    assert.equal(typeof r.output, 'string', at)
    assert.ok(Array.isArray(r.metadata?.stages), at)
    if (r.success) {
      assert.equal(r.errorKind, undefined, at)
    } else {
      assert.ok(ERROR_KINDS.includes(r.errorKind), `${at}: a known kind (${r.errorKind})`)
      assert.equal(r.output, `Error (${r.errorKind}): ${r.error}`, at)
    }
  }
}

describe('random turns', () => {
  it(`keep the promise for ${TURNS} turns (seed ${SEED})`, async () => {
    const r = generator(SEED)
    let gate = executor(r)
    for (let t = 0; t < TURNS; t++) {
      const pairs = Array.from({ length: 1 + r.int(6) }, (_, i) => call(r, `${t}_${i}`))
      const calls = pairs.map(([c]) => c)
      const expected = pairs.map(([, id]) => id)
      const options = {}
      if (r.chance(0.2)) options.deadlineMs = 5 + r.int(60)
      if (r.chance(0.2)) options.stopOnError = true
      if (r.chance(0.3)) options.context = { sessionId: `s${r.int(3)}`, tenantId: r.pick(['a', 'b']) }
      let controller
      if (r.chance(0.3)) {
        controller = new AbortController()
        options.signal = controller.signal
        const when = r.int(60)
        if (when < 5) controller.abort(r.pick([undefined, 'stop', new Error('stop'), Object.create(null)]))
        else setTimeout(() => controller.abort(new Error('stopped')), when)
      }
      const turns = [gate.execute(calls, options)]
      if (r.chance(0.2)) turns.push(gate.execute(calls.slice(0, 2), {})) // another turn at the same time
      const closing = r.chance(0.1) ? new Promise((resolve) => setTimeout(resolve, r.int(40))).then(() => gate.close({ timeoutMs: 20 })) : undefined
      const [first, second] = await Promise.all(turns.map(settled))
      checkTurn(first, expected, `turn ${t}`)
      if (second) checkTurn(second, expected.slice(0, 2), `turn ${t} (second)`)
      if (closing) {
        const { stillRunning } = await closing
        assert.ok(Array.isArray(stillRunning))
        assert.equal(gate.running, 0, `turn ${t}: nothing runs after close()`)
        assert.deepEqual(gate.pendingHandlers(), [], `turn ${t}: close() lets go of what never settled`)
        await assert.rejects(() => gate.execute(calls), TypeError)
        gate = executor(r)
      }
    }
    await gate.close({ timeoutMs: 50 })
    assert.equal(gate.running, 0, 'nothing left running')
  })
})
