'use strict'
// Circuit breakers and budgets through the executor, with the memory store: a failing backend is not hammered while
// it is down, and an agent in a loop is stopped by its budget, not by the bill.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { ToolExecutor } = require('..')
const { manualClock } = require('toolgate/testing')
const { assertFailure, assertSuccess, marks } = require('./helpers')

/** A handler that fails or succeeds by `pattern` (true: succeeds), one entry per call; the last entry repeats. */
function scripted(pattern) {
  const state = { calls: 0 }
  state.handler = () => {
    const ok = pattern[Math.min(state.calls, pattern.length - 1)]
    state.calls += 1
    if (!ok) throw new Error('backend down')
    return 'ok'
  }
  return state
}

const one = (gate, name, args = {}, options) => gate.execute([{ name, arguments: args }], options).then((r) => r[0])

describe('circuit breaker', () => {
  it('opens on a tool failing 60% of its calls, answers unavailable without running it, half-opens on the clock and closes or reopens', async () => {
    const clock = manualClock()
    const events = []
    const gate = new ToolExecutor({ clock, onTrace: (batch) => events.push(...batch.filter((e) => e.type === 'breaker')) })
    // F F S F S, then trials: S F (reopens), later S S (closes).
    const backend = scripted([false, false, true, false, true, true, false, true])
    const parameters = { type: 'object', properties: { q: { type: 'string' } }, additionalProperties: false }
    gate.register({
      name: 'flaky', readOnly: true, retry: false, parameters, handler: backend.handler,
      breaker: { failureRate: 0.5, minCalls: 5, windowMs: 10_000, openMs: 1_000, halfOpenCalls: 2 },
    })
    // Invalid arguments never reach the handler and never move the breaker.
    for (const r of await gate.execute(Array.from({ length: 20 }, () => ({ name: 'flaky', arguments: { nope: 1 } })))) {
      assertFailure(r, 'invalid_arguments')
    }
    assert.equal(gate.stats().tools.flaky.breaker, 'closed')
    const first = []
    for (let i = 0; i < 5; i++) first.push(await one(gate, 'flaky'))
    assert.deepEqual(first.map((r) => r.errorKind ?? 'ok'), ['handler_error', 'handler_error', 'ok', 'handler_error', 'ok'])
    assert.equal(gate.stats().tools.flaky.breaker, 'open', '3 of 5 counted calls failed: the fifth, a success, found the rate reached')
    const refused = await one(gate, 'flaky')
    assertFailure(refused, 'unavailable', 'Tool "flaky" is unavailable: too many of its recent calls failed')
    assert.equal(refused.retryable, true)
    assert.equal(refused.retryAfterMs, 1_000)
    assert.equal(marks(refused).at(-1), 'breaker:open')
    assert.equal(backend.calls, 5, 'not run while open')
    await clock.advance(1_000)
    assert.equal(gate.stats().tools.flaky.breaker, 'half_open')
    // Two trials at once, a third told to wait: the first passes, the second fails and reopens it.
    const trials = await gate.execute([{ name: 'flaky' }, { name: 'flaky' }, { name: 'flaky' }])
    assert.deepEqual(trials.map((r) => r.errorKind ?? 'ok'), ['ok', 'handler_error', 'unavailable'])
    assert.match(trials[2].error, /being tried again with a trial call now/)
    assert.equal(gate.stats().tools.flaky.breaker, 'open')
    await clock.advance(1_000)
    assert.deepEqual((await gate.execute([{ name: 'flaky' }, { name: 'flaky' }])).map((r) => r.errorKind ?? 'ok'), ['ok', 'ok'])
    assert.equal(gate.stats().tools.flaky.breaker, 'closed', 'two trials passed')
    await new Promise((resolve) => setImmediate(resolve))
    assert.deepEqual(events.map((e) => `${e.from}>${e.to}`), ['closed>open', 'open>half_open', 'half_open>open', 'open>half_open', 'half_open>closed'])
    assert.deepEqual({ calls: events[0].calls, failures: events[0].failures, toolName: events[0].toolName }, { calls: 5, failures: 3, toolName: 'flaky' })
    const stats = gate.stats().tools.flaky
    assert.deepEqual([stats.breakerOpened, stats.breakerRefused], [2, 2])
    await gate.close()
  })

  it('shows its state in stats, Prometheus and the health report', async () => {
    const gate = new ToolExecutor({ breaker: { minCalls: 2, openMs: 60_000 } })
    gate.register({ name: 'down', retry: false, handler: () => { throw new Error('503') } })
    gate.register({ name: 'off', retry: false, breaker: false, handler: () => { throw new Error('503') } })
    for (let i = 0; i < 3; i++) await gate.execute([{ name: 'down' }, { name: 'off' }])
    assert.equal(gate.stats().tools.down.breaker, 'open', "the executor's breaker")
    assert.equal(gate.stats().tools.off.breaker, undefined, 'turned off for this tool')
    const metrics = gate.prometheus()
    assert.match(metrics, /toolgate_breaker_state\{tool="down",state="open"\} 1/)
    assert.match(metrics, /toolgate_breaker_state\{tool="down",state="closed"\} 0/)
    assert.match(metrics, /toolgate_breaker_opened_total\{tool="down"\} 1/)
    assert.match(metrics, /toolgate_breaker_refused_total\{tool="down"\} 1/)
    const health = gate.healthReport()
    assert.deepEqual([health.tools.down.status, health.tools.down.breaker], ['failing', 'open'])
    const { breakers } = gate.inspect()
    assert.deepEqual(Object.keys(breakers), ['down'], 'only tools with a breaker')
    assert.equal(breakers.down.state, 'open')
    assert.ok(breakers.down.halfOpenInMs > 59_000 && breakers.down.halfOpenInMs <= 60_000, `${breakers.down.halfOpenInMs}`)
    await gate.close()
  })

  it('inspect() shows what the memory store holds, the most used first, keys redacted', async () => {
    const gate = new ToolExecutor({ budget: { maxCalls: 10, by: 'userId' } })
    gate.register({ name: 'api', readOnly: true, idempotent: true, cache: { ttlMs: 60_000 }, rateLimit: { limit: '5/min', key: 'userId' }, handler: ({ q }) => `found ${q}` })
    const secret = 'sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd'
    await gate.execute([{ name: 'api', arguments: { q: 'a' } }, { name: 'api', arguments: { q: 'b' } }], { context: { userId: 'ann' } })
    await gate.execute([{ name: 'api', arguments: { q: 'c' } }], { context: { userId: secret } })
    const { store, memory } = gate.inspect({ limit: 1 })
    assert.equal(store, 'memory')
    assert.equal(memory.cacheEntries, 3)
    assert.equal(memory.bucketCount, 2)
    assert.deepEqual(memory.buckets.map((b) => [b.tokens, b.key.includes('ann')]), [[3, true]], "the emptiest first: ann's")
    assert.equal(memory.budgetCount, 2)
    assert.deepEqual(memory.budgets.map((b) => [b.used, b.key.includes('ann')]), [[2, true]])
    assert.ok(!JSON.stringify(gate.inspect()).includes('sk-proj-AbCd'), 'keys redacted')
    assert.throws(() => gate.inspect({ limit: -1 }), /limit must be a whole number/)
    await gate.close()
  })

  it('is listed with its tool, with the defaults filled in, as are budgets and costs', () => {
    const gate = new ToolExecutor({ breaker: { openMs: 5_000 } })
    gate.register({ name: 'a', handler: () => 'ok', budget: { maxCalls: 5, by: ['tenantId'] }, cost: 2 })
    gate.register({ name: 'b', breaker: false, cost: () => 1, handler: () => 'ok' })
    gate.register({ name: 'c', breaker: { minCalls: 3 }, handler: () => 'ok' })
    const [a, b, c] = gate.list()
    assert.deepEqual(a.breaker, { failureRate: 0.5, minCalls: 10, windowMs: 60_000, openMs: 5_000, halfOpenCalls: 1 })
    assert.deepEqual([a.budget, a.cost], [{ maxCalls: 5, by: ['tenantId'] }, 2])
    assert.deepEqual([b.breaker, b.budget, b.cost], [undefined, undefined, 'function'])
    assert.deepEqual(c.breaker, { failureRate: 0.5, minCalls: 3, windowMs: 60_000, openMs: 5_000, halfOpenCalls: 1 }, "the tool's fields over the executor's")
  })

  it('refuses options it cannot read, at registration', () => {
    const gate = new ToolExecutor()
    const register = (breaker) => gate.register({ name: 't', breaker, handler: () => 'ok' })
    assert.throws(() => register({ failureRate: 1.5 }), /breaker.failureRate must be above 0 and at most 1/)
    assert.throws(() => register({ openMs: 0 }), /breaker.openMs must be a positive number/)
    assert.throws(() => register({ minCall: 3 }), /breaker must be true, false or \{ failureRate\?/)
    assert.throws(() => new ToolExecutor({ breaker: 'on' }), /breaker must be true, false or/)
  })
})

describe('budgets', () => {
  it('refuses the 101st call of a session with a 100-call budget, after the 100 before it ran', async () => {
    let ran = 0
    const gate = new ToolExecutor({ budget: { maxCalls: 100 } })
    gate.register({ name: 'search', readOnly: true, handler: () => { ran++; return 'found' } })
    const calls = (n) => Array.from({ length: n }, (_, i) => ({ id: `c${i}`, name: 'search', arguments: { i } }))
    const first = await gate.execute(calls(60), { context: { sessionId: 's1' } })
    const second = await gate.execute(calls(41), { context: { sessionId: 's1' } })
    assert.ok([...first, ...second.slice(0, 40)].every((r) => r.success))
    const last = second[40]
    assertFailure(last, 'budget_exceeded', 'the call budget of session "s1" (the executor\'s maxCalls) is used up: 100 of 100 calls')
    assert.equal(last.retryable, false)
    assert.deepEqual(last.metadata.budget, { budget: 'maxCalls', source: 'executor', limit: 100, used: 100, by: { sessionId: 's1' } })
    assert.equal(marks(last).at(-1), 'budget:exceeded')
    assert.equal(ran, 100)
    const other = await gate.execute(calls(3), { context: { sessionId: 's2' } })
    assert.ok(other.every((r) => r.success), 'another session has its own budget')
    assert.equal(gate.stats().tools.search.budgetExceeded, 1)
    assert.match(gate.prometheus(), /toolgate_budget_exceeded_total\{tool="search"\} 1/)
  })

  it('charges each call what its tool costs, by a number or a function of the arguments, and refuses the call that would pass the cost budget', async () => {
    const priced = []
    const gate = new ToolExecutor()
    gate.register({ name: 'search', readOnly: true, cost: 1, handler: () => 'found' })
    gate.register({
      name: 'render', readOnly: true,
      parameters: { type: 'object', properties: { pages: { type: 'integer' } }, required: ['pages'] },
      cost: async ({ pages }, { toolName }) => {
        priced.push(toolName)
        return pages * 2
      },
      handler: ({ pages }) => `${pages} pages`,
    })
    // No cost budget: the function is never asked.
    assertSuccess(await one(gate, 'render', { pages: 50 }))
    assert.deepEqual(priced, [])
    const context = { sessionId: 's', budget: { maxCost: 10 } }
    const results = await gate.execute([
      { name: 'render', arguments: { pages: 3 } }, { name: 'search' }, { name: 'render', arguments: { pages: 2 } }, { name: 'search' },
    ], { context })
    assert.deepEqual(results.map((r) => r.errorKind ?? 'ok'), ['ok', 'ok', 'budget_exceeded', 'ok'], 'the searches need no cost function and spend first (2), then 6; 4 more would be 12')
    assertFailure(results[2], 'budget_exceeded', 'this call costs 4, and 8 of the cost budget of session "s" (the context\'s maxCost: 10) is spent')
    assert.equal(results[2].metadata.budget.cost, 4)
    assert.deepEqual(priced, ['render', 'render'])
  })

  it('fails a call whose cost function throws, hangs or returns something other than a number', async () => {
    const gate = new ToolExecutor({ checkTimeoutMs: 50, budget: { maxCost: 100 } })
    const costs = { throws: () => { throw new Error('no price list') }, nan: () => NaN, text: () => 'cheap', negative: () => -1, hangs: () => new Promise(() => {}) }
    for (const [name, cost] of Object.entries(costs)) gate.register({ name, cost, handler: () => 'ran' })
    const results = await gate.execute(Object.keys(costs).map((name) => ({ name })))
    const [throws, nan, text, negative, hangs] = results
    assertFailure(throws, 'handler_error', 'Tool "throws" was not run: its cost could not be computed (no price list)')
    assertFailure(nan, 'handler_error', 'its cost could not be computed (it returned NaN, not a number of at least 0)')
    assertFailure(text, 'handler_error', 'it returned "cheap", not a number of at least 0')
    assertFailure(negative, 'handler_error', 'it returned -1, not a number of at least 0')
    assertFailure(hangs, 'handler_error', 'no cost came within 50 ms')
    assert.ok(results.every((r) => marks(r).at(-1) === 'cost:failed'))
    await gate.close()
  })

  it('prices arguments edited at approval by the edit', async () => {
    const gate = new ToolExecutor({ budget: { maxCost: 10 }, approve: () => ({ decision: 'approve', arguments: { pages: 20 } }) })
    gate.register({ name: 'print', needsApproval: true, cost: ({ pages }) => pages, handler: ({ pages }) => `${pages} pages` })
    const r = await one(gate, 'print', { pages: 1 })
    assertFailure(r, 'budget_exceeded', 'this call costs 20')
  })

  it('holds per-turn, per-tool, per-window and context budgets, keyed by the fields they name', async () => {
    const clock = manualClock()
    const gate = new ToolExecutor({ clock, budget: { maxCallsPerTurn: 3 } })
    gate.register({ name: 'search', readOnly: true, handler: () => 'found' })
    gate.register({ name: 'fetch', readOnly: true, budget: { maxCallsPerWindow: { calls: 2, windowMs: 60_000 } }, handler: () => 'page' })
    const turn = await gate.execute([{ name: 'search' }, { name: 'fetch' }, { name: 'fetch' }, { name: 'search' }], { context: { sessionId: 's' } })
    assert.deepEqual(turn.map((r) => r.errorKind ?? 'ok'), ['ok', 'ok', 'ok', 'budget_exceeded'])
    assertFailure(turn[3], 'budget_exceeded', "the executor's budget of 3 calls per turn is used up (3 ran in this turn)")
    const windowed = await one(gate, 'fetch', {}, { context: { sessionId: 's' } })
    assertFailure(windowed, 'budget_exceeded', 'calls in the current 60 s window, which starts over in')
    assert.ok(windowed.retryAfterMs > 0 && windowed.retryAfterMs <= 60_000)
    await clock.advance(windowed.retryAfterMs)
    assertSuccess(await one(gate, 'fetch', {}, { context: { sessionId: 's' } }))
    // A tenant's budget, shared by every session and user of the tenant.
    const tenant = (sessionId) => ({ context: { sessionId, tenantId: 'acme', budget: { maxCalls: 2, by: 'tenantId' } } })
    assertSuccess(await one(gate, 'search', {}, tenant('a')))
    assertSuccess(await one(gate, 'search', {}, tenant('b')))
    assertFailure(await one(gate, 'search', {}, tenant('c')), 'budget_exceeded', 'the call budget of tenantId "acme" (the context\'s maxCalls)')
    await gate.close()
  })

  it('never lets two holders share a budget, whatever their values hold', async () => {
    const gate = new ToolExecutor({ budget: { maxCalls: 1, by: ['tenantId', 'userId'] } })
    gate.register({ name: 'work', handler: () => 'ok' })
    // Joined without care, these two would be the same holder: "tenantId=a␁userId=b␁userId=c".
    const one = { tenantId: 'a\u0001userId=b', userId: 'c' }
    const other = { tenantId: 'a', userId: 'b\u0001userId=c' }
    assertSuccess((await gate.execute([{ name: 'work' }], { context: one }))[0], 'ok')
    assertSuccess((await gate.execute([{ name: 'work' }], { context: other }))[0], 'ok')
    assertFailure((await gate.execute([{ name: 'work' }], { context: one }))[0], 'budget_exceeded')
  })

  it('gives back what a call that never ran spent, and never touches calls already running', async () => {
    const gate = new ToolExecutor({ budget: { maxCalls: 2 } })
    let release
    gate.register({ name: 'slow', readOnly: true, handler: () => new Promise((resolve) => { release = resolve }) })
    gate.register({ name: 'limited', readOnly: true, rateLimit: '1/min', handler: () => 'ok' })
    const context = { sessionId: 's' }
    assertSuccess(await one(gate, 'limited', {}, { context }))
    assertFailure(await one(gate, 'limited', {}, { context }), 'rate_limited')
    // The rate-limited call gave its budget back: one is left, the slow call takes it while it runs.
    const running = one(gate, 'slow', {}, { context })
    await new Promise((resolve) => setImmediate(resolve))
    assertFailure(await one(gate, 'slow', {}, { context }), 'budget_exceeded', '2 of 2 calls')
    release('done')
    assertSuccess(await running, 'done')
    await gate.close()
  })

  it('refuses budgets it cannot read: at construction, at registration, and a context that sends one', async () => {
    assert.throws(() => new ToolExecutor({ budget: {} }), /budget needs at least one of maxCallsPerTurn, maxCalls/)
    assert.throws(() => new ToolExecutor({ budget: { maxCalls: 0 } }), /budget.maxCalls must be a positive number/)
    const gate = new ToolExecutor()
    assert.throws(() => gate.register({ name: 't', budget: { maxCost: -1 }, handler: () => 'ok' }), /budget.maxCost must be a finite number of at least 0/)
    assert.throws(() => gate.register({ name: 't', cost: 'cheap', handler: () => 'ok' }), /cost must be a number of at least 0, or a function/)
    assert.throws(() => gate.register({ name: 't', budget: { maxCalls: 5, per: 'user' }, handler: () => 'ok' }), /unknown field `per`/)
    gate.register({ name: 't', handler: () => 'ok' })
    await assert.rejects(gate.execute([{ name: 't' }], { context: { budget: { maxCalls: 2, by: [] } } }), /context.budget.by must name one or more context fields/)
  })
})

describe('guards: options and edges', () => {
  it('a cost or a budget that is not a finite number throws at once instead of switching the guard off', () => {
    const gate = new ToolExecutor()
    for (const cost of [NaN, Infinity, -1]) {
      assert.throws(() => gate.register({ name: 'x', cost, handler: () => 1 }), /cost must be a number of at least 0/)
    }
    assert.throws(() => gate.register({ name: 'x', budget: { maxCalls: NaN }, handler: () => 1 }), /tool "x": maxCalls must be a finite number; got NaN/)
    assert.throws(() => new ToolExecutor({ budget: { maxCost: Infinity } }), /ToolExecutor options: maxCost must be a finite number; got Infinity/)
    assert.equal(gate.list().length, 0)
  })

  it('without a cost budget, a cost function is not run on arguments edited at approval, and cannot refuse them', async () => {
    let priced = 0
    const gate = new ToolExecutor({ approve: () => ({ decision: 'approve', arguments: { pages: 2 } }) })
    gate.register({
      name: 'print', needsApproval: true, parameters: { type: 'object', properties: { pages: { type: 'integer' } } },
      cost: () => { priced += 1; throw new Error('no price for that') },
      handler: ({ pages }) => `printed ${pages}`,
    })
    assertSuccess(await one(gate, 'print', { pages: 1 }), 'printed 2')
    assert.equal(priced, 0)
  })

  it('a tool registered again under the same name starts with a closed breaker of its own', async () => {
    const gate = new ToolExecutor()
    const failing = scripted([false])
    gate.register({ name: 'search', retry: false, handler: failing.handler, breaker: { minCalls: 2, openMs: 600_000 } })
    await gate.execute([{ name: 'search' }, { name: 'search' }])
    assertFailure(await one(gate, 'search'), 'unavailable')
    gate.unregister('search')
    gate.register({ name: 'search', handler: () => 'fresh', breaker: { minCalls: 2, openMs: 1_000 } })
    assertSuccess(await one(gate, 'search'), 'fresh')
  })
})
