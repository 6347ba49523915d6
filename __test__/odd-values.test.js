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
