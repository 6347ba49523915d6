'use strict'
// Values from handlers and from the application's own functions that break the usual ways of reading them:
// getters, toJSON methods and proxy traps that throw, and throws of things that are not Errors (a string, a
// Symbol, an object without a prototype, an object whose `message` is not text). Each becomes a result at once,
// or a process warning; none crashes the process or holds a call until its time limit.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { gateWith, assertFailure, assertSuccess, collectWarnings, sleep } = require('./helpers')

/** What application code may throw, other than an Error. */
const NON_ERRORS = {
  'a string': () => 'a string',
  'a Symbol': () => Symbol('s'),
  'an object without a prototype': () => Object.create(null),
  'an object whose message is a number': () => ({ message: 42 }),
}

/** A proxy whose every trap throws. */
const hostile = () => new Proxy({}, Object.fromEntries(
  ['get', 'has', 'ownKeys', 'getOwnPropertyDescriptor', 'getPrototypeOf'].map((trap) => [trap, () => { throw Object.create(null) }]),
))

describe('a return value that throws when it is read', () => {
  for (const [what, make] of Object.entries(NON_ERRORS)) {
    it(`fails at once as handler_error when its toJSON or a getter throws ${what}`, async () => {
      const { gate } = gateWith([
        { name: 'tojson', timeoutMs: 10_000, handler: () => ({ toJSON() { throw make() } }) },
        { name: 'getter', timeoutMs: 10_000, handler: () => ({ get field() { throw make() } }) },
        { name: 'fine', handler: () => 'fine' },
      ])
      const started = Date.now()
      const [tojson, getter, fine] = await gate.execute([{ name: 'tojson' }, { name: 'getter' }, { name: 'fine' }])
      assert.ok(Date.now() - started < 2_000, 'answered at once, not at the time limit')
      for (const r of [tojson, getter]) {
        assertFailure(r, 'handler_error', 'cannot be passed on as text or JSON', 'reading it threw')
        assert.equal(r.attempts, 1)
      }
      assertSuccess(fine, 'fine')
    })
  }

  it('fails a returned proxy whose traps throw as handler_error', async () => {
    // Awaiting it reads its `then`, which throws: as if the handler had thrown that.
    const { gate } = gateWith([{ name: 'proxy', handler: () => hostile() }])
    const [r] = await gate.execute([{ name: 'proxy' }])
    assertFailure(r, 'handler_error', 'it threw a non-Error value')
  })
})

describe('a call object that throws when it is read', () => {
  it('answers each such call invalid_arguments on its own and runs the others', async () => {
    const { gate, calls } = gateWith([{ name: 'ok', handler: () => 'ran' }])
    const results = await gate.execute([
      { id: 'name', get name() { throw new Error('no name') } },
      { id: 'args', name: 'ok', get arguments() { throw Object.create(null) } },
      hostile(),
      { id: 'fine', name: 'ok' },
    ])
    assert.equal(results.length, 4)
    assertFailure(results[0], 'invalid_arguments', 'The tool call could not be read', 'no name')
    assert.equal(results[0].callId, 'name', 'the fields that could be read pair the result')
    assertFailure(results[1], 'invalid_arguments', 'The tool call could not be read')
    assert.equal(results[1].callId, 'args')
    assertFailure(results[2], 'invalid_arguments', 'The tool call could not be read')
    assertSuccess(results[3], 'ran')
    assert.equal(calls.ok, 1)
  })
})

describe("the application's own functions throwing what is not an Error", () => {
  it('cancels on an abort reason whose message getter throws', async () => {
    const { gate } = gateWith([{ name: 'hang', handler: () => new Promise(() => {}) }])
    const controller = new AbortController()
    const turn = gate.execute([{ name: 'hang' }], { signal: controller.signal })
    await sleep(10)
    controller.abort({ get message() { throw Object.create(null) } })
    const [r] = await turn
    assertFailure(r, 'cancelled', 'aborted by the caller')
  })

  it('turns a null-prototype throw from rollbackWhen, onProgress and onTrace into warnings, results intact', async () => {
    const { warnings, stop } = collectWarnings()
    try {
      const throwing = () => { throw Object.create(null) }
      const { gate } = gateWith([{
        name: 'j',
        rollbackWhen: throwing,
        handler: (_args, ctx) => {
          ctx.progress({ step: 1 }) // the listener's throw must not reach the handler
          return 'value'
        },
      }], { onProgress: throwing, onTrace: throwing })
      const [r] = await gate.execute([{ name: 'j' }])
      assertSuccess(r, 'value')
      assert.equal(r.rollback, undefined)
      await sleep(30)
      const texts = warnings.map((w) => w.message)
      for (const what of ['rollbackWhen function of "j" threw', 'onProgress listener threw', 'onTrace listener threw']) {
        assert.ok(texts.some((t) => t.includes(what)), `${what} in ${JSON.stringify(texts)}`)
      }
    } finally {
      stop()
    }
  })

  it('fails closed when a check or the approval callback throws a null-prototype object', async () => {
    const throwing = () => { throw Object.create(null) }
    const { gate, calls } = gateWith([
      { name: 'checked', check: throwing },
      { name: 'asks', needsApproval: true },
    ], { approve: throwing })
    const [checked, asks] = await gate.execute([{ name: 'checked' }, { name: 'asks' }])
    assertFailure(checked, 'handler_error', 'its argument check failed')
    assertFailure(asks, 'approval_denied', 'the approval callback failed')
    assert.deepEqual(calls, { checked: 0, asks: 0 })
  })
})

describe("the application's own code re-entering the executor", () => {
  it('counts a value as late when rollbackWhen or its own toJSON cancelled the turn or closed the executor', async () => {
    for (const how of ['rollbackWhen aborts', 'rollbackWhen closes', 'toJSON aborts', 'a large value, rollbackWhen aborts']) {
      const controller = new AbortController()
      let gate
      const interrupt = () => (how.includes('closes') ? gate.close() : controller.abort(new Error('bad result')))
      const judged = how.includes('rollbackWhen')
      ;({ gate } = gateWith([
        {
          name: 'fetch',
          rollbackWhen: judged ? () => { interrupt(); return false } : undefined,
          handler: () => (how.includes('toJSON') ? { toJSON() { interrupt(); return { ok: 1 } } } : how.includes('large') ? 'x'.repeat(300 * 1024) : 'bad'),
        },
        { name: 'slow', handler: () => sleep(100, 'slow') },
      ]))
      const results = await gate.execute([{ id: 'a', name: 'fetch' }, { id: 'b', name: 'slow' }], { signal: controller.signal })
      assert.deepEqual(results.map((r) => r.errorKind), ['cancelled', 'cancelled'], how)
      assert.equal(gate.stats().total.lateSettlements, 1, `${how}: what fetch returned is a late settlement`)
      assert.deepEqual(gate.pendingHandlers().filter((p) => p.callId === 'a'), [], `${how}: and not left pending`)
      await gate.close({ timeoutMs: 200 })
    }
  })

  it('keeps other turns whole when an abort listener cancels its own turn as its next call is being started', async () => {
    const controller = new AbortController()
    const { gate, calls } = gateWith([
      { name: 'step', timeoutMs: 20, handler: (_a, ctx) => new Promise((resolve) => {
        ctx.signal.addEventListener('abort', () => { controller.abort(new Error('give up')); resolve('stopped') })
      }) },
      { name: 'other', readOnly: true, handler: () => sleep(100, 'other finished') },
    ])
    const unrelated = gate.execute([{ id: 'o', name: 'other' }])
    const mine = await gate.execute([{ id: 's1', name: 'step' }, { id: 's2', name: 'step' }], { signal: controller.signal })
    assert.deepEqual(mine.map((r) => r.errorKind), ['timeout', 'cancelled'])
    assert.equal(calls.step, 1, 's2 never ran')
    assertSuccess((await unrelated)[0], 'other finished')
    await sleep(20)
    assert.deepEqual(gate.pendingHandlers(), [])
  })

  it('denies an approval whose edited arguments cannot be read, and keeps other turns whole', async () => {
    let deep = 'x'
    for (let i = 0; i < 200; i++) deep = { d: deep }
    const { gate, calls } = gateWith([
      { name: 'asks', needsApproval: true },
      { name: 'other', readOnly: true, handler: () => sleep(50, 'other done') },
    ], { approve: async () => ({ decision: 'approve', arguments: { q: deep } }) })
    const unrelated = gate.execute([{ id: 'u', name: 'other' }])
    const [asked] = await gate.execute([{ id: 'a', name: 'asks' }])
    assertFailure(asked, 'approval_denied', 'its answer could not be read')
    assert.equal(calls.asks, 0)
    assertSuccess((await unrelated)[0], 'other done')
  })

  it('refuses a signal it cannot stop listening to, and begins nothing for a signal that throws when listened to', async () => {
    const { gate, calls } = gateWith([{ name: 'ok', readOnly: true }])
    await assert.rejects(gate.execute([{ name: 'ok' }], { signal: { aborted: false, addEventListener() {} } }), /signal must be an AbortSignal/)
    const throwing = { aborted: false, addEventListener() { throw new Error('nope') }, removeEventListener() {} }
    await assert.rejects(gate.execute([{ name: 'ok' }], { signal: throwing }), /nope/)
    assert.equal(gate.running, 0)
    assert.equal(calls.ok, 0)
    await assert.rejects(gate.execute([], { get signal() { throw new Error('getter') } }), /getter/, 'rejects, does not throw')
  })

  it("keeps an Error's message when one of its other fields throws", async () => {
    const { gate } = gateWith([{ name: 't', handler: () => {
      const err = new Error('upstream returned 503')
      Object.defineProperty(err, 'response', { get() { throw new Error('body already consumed') } })
      throw err
    } }])
    const [r] = await gate.execute([{ name: 't' }])
    assertFailure(r, 'handler_error', 'Tool "t" failed: Error: upstream returned 503')
  })

  it('closes with close(null), and then refuses to execute', async () => {
    const { gate } = gateWith([{ name: 'ok' }])
    assert.deepEqual(await gate.close(null), { stillRunning: [] })
    await assert.rejects(gate.execute([{ name: 'ok' }]), /closed/)
  })
})
