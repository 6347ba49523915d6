'use strict'
// Avoided and bounded work: the result cache, single flight, session dedup and rate limits. What is avoided is
// proved by counting handler invocations; order by events the handlers record. Expiry uses tiny TTLs and sleeps
// well past them; no test asserts that something happened within a measured time.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { ToolExecutor } = require('..')
const {
  gateWith, assertFailure, assertSuccess, marks, deferred, sleep, untilAborted, recorder, counts, counterView, kinds, ADMITTED,
} = require('./helpers')

const Q = { type: 'object', properties: { q: { type: 'string' }, page: { type: 'integer' } } }
const ID = { type: 'object', properties: { id: { type: 'string' }, ms: { type: 'integer' } }, required: ['id'] }

/** The marks of a call whose handler ran and returned text. */
const RAN = ['invoke:returned', 'normalize:text', 'shape:ok']

const call = (name, input, id) => (id === undefined ? { name, input } : { id, name, input })
const times = (n, make) => Array.from({ length: n }, (_, i) => make(i))
const note = (n) => `\n[note] This exact query already ran ${n === 1 ? 'once' : `${n} times`} in this session.`

/** A refusal for want of a token: retryable, with a positive retryAfterMs that the wording repeats. */
function assertRateLimited(result, whose) {
  assertFailure(result, 'rate_limited', `Tool "${result.name}" was not run:`, whose, 'or continue with what you already have.')
  assert.equal(result.retryable, true)
  assert.ok(Number.isInteger(result.retryAfterMs) && result.retryAfterMs > 0, String(result.retryAfterMs))
  assert.ok(result.error.includes(`is used up. Wait about ${result.retryAfterMs} ms before calling it again`), result.error)
  assert.equal(result.attempts, 0)
  assert.equal(marks(result).at(-1), 'rate_limit:refused')
}

/** The tool's own bucket, or the one every call shares, in either wording the engine has used. */
const TOOL_LIMIT = /this tool's rate limit/i
const SHARED_LIMIT = /all tools share/i

describe('cache', () => {
  it('answers a repeated call from the cache without running the handler, and marks the hit', async () => {
    let served = 0
    const { gate, calls } = gateWith([{ name: 'fetch', idempotent: true, parameters: Q, handler: (args) => ({ page: args.q, served: ++served }) }])
    const [miss] = await gate.execute([call('fetch', { q: 'x' }, 'm')])
    const [hit] = await gate.execute([call('fetch', { q: 'x' }, 'h')])
    assert.equal(calls.fetch, 1)
    assertSuccess(miss, '{"page":"x","served":1}')
    assert.equal(miss.cached, false)
    assert.deepEqual(marks(miss), [...ADMITTED, 'cache:miss', 'invoke:returned', 'normalize:structured', 'shape:ok'])
    // The hit is the first call's answer under the second call's own id, with no attempt made.
    assertSuccess(hit, miss.output)
    assert.equal(hit.callId, 'h')
    assert.equal(hit.cached, true)
    assert.equal(hit.attempts, 0)
    assert.equal(hit.latencyMs, 0)
    assert.deepEqual(hit.metadata.structured, { page: 'x', served: 1 })
    assert.deepEqual(marks(hit), [...ADMITTED, 'cache:hit'])
    assert.deepEqual(counterView(gate.stats().tools.fetch), counts({ cacheHits: 1, cacheMisses: 1 }))
  })

  it('keys by canonical arguments: key order and number spelling hit the same entry, a string does not', async () => {
    const ANY = { type: 'object', properties: { a: {}, b: {} } }
    const { gate, calls } = gateWith([{ name: 'calc', idempotent: true, parameters: ANY, handler: (args) => `a=${JSON.stringify(args.a)}` }])
    // Raw argument strings, so the spelling reaches the engine as the model wrote it.
    const [first] = await gate.execute([{ name: 'calc', arguments: '{"a":1,"b":2}' }])
    const same = await gate.execute([
      { name: 'calc', arguments: '{"b":2.0,"a":1}' },
      { name: 'calc', arguments: '{"b":2,"a":1e0}' },
      { name: 'calc', arguments: '{"a":1.00,"b":20e-1}' },
    ])
    assert.deepEqual(same.map((r) => r.cached), [true, true, true])
    assert.ok(same.every((r) => r.output === first.output))
    assert.equal(calls.calc, 1)
    const [text] = await gate.execute([{ name: 'calc', arguments: '{"a":"1","b":2}' }])
    assert.equal(text.cached, false, '"1" is not 1')
    assert.equal(calls.calc, 2)
  })

  it('lets an entry expire after ttlMs: the executor default, unless the tool declares its own', async () => {
    const { gate, calls } = gateWith([
      { name: 'short', idempotent: true },
      { name: 'long', idempotent: true, cache: { ttlMs: 60_000 } },
    ], { cache: { ttlMs: 60 } })
    await gate.execute([call('short'), call('long')])
    assert.deepEqual((await gate.execute([call('short'), call('long')])).map((r) => r.cached), [true, true])
    await sleep(200)
    const [short, long] = await gate.execute([call('short'), call('long')])
    assert.equal(short.cached, false, 'expired after the executor ttlMs')
    assert.ok(marks(short).includes('cache:miss'))
    assert.equal(long.cached, true, "the tool's own ttlMs wins")
    assert.deepEqual(calls, { short: 2, long: 1 })
  })

  it('evicts the least recently used entry beyond maxEntries', async () => {
    const { gate, calls } = gateWith([{ name: 'fetch', idempotent: true, parameters: Q, handler: (args) => args.q }], { cache: { maxEntries: 2 } })
    const fetch = async (q) => (await gate.execute([call('fetch', { q })]))[0].cached
    assert.equal(await fetch('a'), false)
    assert.equal(await fetch('b'), false)
    assert.equal(await fetch('a'), true, 'a is now the most recently used')
    assert.equal(await fetch('c'), false, 'a third entry evicts the least recently used: b')
    assert.equal(await fetch('a'), true)
    assert.equal(await fetch('c'), true)
    assert.equal(await fetch('b'), false, 'b was evicted')
    assert.equal(calls.fetch, 4)
  })

  it('evicts the least recently used entries beyond maxBytes, and keeps no result larger than the whole budget', async () => {
    // About 1 KB per entry: two fit in 2500 bytes, three do not.
    const { gate, calls } = gateWith([{
      name: 'fetch', idempotent: true, parameters: Q, handler: (args) => (args.q === 'big' ? 'x'.repeat(3000) : args.q.repeat(1000)),
    }], { cache: { maxBytes: 2500 } })
    const fetch = async (q) => (await gate.execute([call('fetch', { q })]))[0].cached
    assert.equal(await fetch('a'), false)
    assert.equal(await fetch('b'), false)
    assert.equal(await fetch('a'), true)
    assert.equal(await fetch('c'), false, 'c needs the room b took')
    assert.equal(await fetch('big'), false)
    assert.equal(await fetch('big'), false, 'over the budget on its own: never kept')
    assert.equal(await fetch('a'), true, 'and the oversized result evicted nothing')
    assert.equal(await fetch('c'), true)
    assert.equal(await fetch('b'), false, 'b was evicted')
    assert.equal(calls.fetch, 6)
  })

  it('never caches a failure: the next identical call runs again', async () => {
    let n = 0
    const { gate, calls } = gateWith([{ name: 'fetch', idempotent: true, retry: false, handler: () => {
      n += 1
      if (n === 1) throw new Error('upstream down')
      return 'fine'
    } }])
    const [failed] = await gate.execute([call('fetch')])
    assertFailure(failed, 'handler_error', 'upstream down')
    const [ran] = await gate.execute([call('fetch')])
    assertSuccess(ran, 'fine')
    assert.equal(ran.cached, false)
    const [hit] = await gate.execute([call('fetch')])
    assertSuccess(hit, 'fine')
    assert.equal(hit.cached, true)
    assert.equal(calls.fetch, 2)
    assert.deepEqual(counterView(gate.stats().tools.fetch), counts({ cacheHits: 1, cacheMisses: 2 }))
  })

  it('with cache: false, an idempotent tool runs every call, even identical calls at once', async () => {
    const { gate, calls } = gateWith([{ name: 'fetch', idempotent: true, readOnly: true, cache: false, handler: async () => {
      await sleep(5)
      return 'fresh'
    } }])
    await gate.execute([call('fetch')])
    const results = await gate.execute(times(3, () => call('fetch')))
    assert.equal(calls.fetch, 4)
    for (const r of results) {
      assertSuccess(r, 'fresh')
      assert.equal(r.cached, false)
      assert.equal(r.metadata.sharedFlight, undefined)
      assert.deepEqual(marks(r), [...ADMITTED, ...RAN], 'no cache station at all')
    }
    assert.deepEqual(counterView(gate.stats()), { total: counts(), tools: {} }, 'nothing counted')
  })

  it('with scope, one tenant never reads (or joins) another tenant\'s result', async () => {
    const release = deferred()
    const { gate, calls } = gateWith([{
      name: 'balance', idempotent: true, readOnly: true, cache: { scope: 'tenantId' },
      handler: async (_args, ctx) => {
        await release.promise
        return `balance of ${ctx.context?.tenantId ?? 'nobody'}`
      },
    }])
    const as = (tenantId) => ({ context: tenantId === undefined ? {} : { tenantId } })
    // In flight at once: the same arguments under two tenants are two executions, not one shared flight.
    const a = gate.execute([call('balance')], as('A'))
    const b = gate.execute([call('balance')], as('B'))
    assert.equal(calls.balance, 2)
    release.resolve()
    const [[ra], [rb]] = await Promise.all([a, b])
    assertSuccess(ra, 'balance of A')
    assertSuccess(rb, 'balance of B')
    assert.equal(rb.metadata.sharedFlight, undefined)
    // Later, each tenant hits its own entry.
    const [[ha], [hb]] = await Promise.all([gate.execute([call('balance')], as('A')), gate.execute([call('balance')], as('B'))])
    assert.deepEqual([ha.output, ha.cached, hb.output, hb.cached], ['balance of A', true, 'balance of B', true])
    // A context without the field is its own scope too.
    const [none] = await gate.execute([call('balance')], as(undefined))
    assertSuccess(none, 'balance of nobody')
    assert.equal(none.cached, false)
    assert.equal(calls.balance, 3)
  })

  it('invalidate(tool, args) drops those arguments in every scope, invalidate(tool) the tool, clearCache() all', async () => {
    const { gate, calls } = gateWith([
      { name: 'fetch', idempotent: true, parameters: Q, handler: (args) => args.q },
      // Its name starts like the other's: invalidating "fetch" must not touch it.
      { name: 'fetch_all', idempotent: true, parameters: Q, handler: (args) => args.q },
      { name: 'scoped', idempotent: true, parameters: Q, cache: { scope: 'tenantId' }, handler: (args) => args.q },
    ])
    const cached = async (name, input, context) => (await gate.execute([call(name, input)], { context }))[0].cached
    for (const input of [{ q: 'x', page: 1 }, { q: 'y' }]) await gate.execute([call('fetch', input)])
    await gate.execute([call('fetch_all', { q: 'x' })])
    for (const tenantId of ['A', 'B']) await gate.execute([call('scoped', { q: 'x' })], { context: { tenantId } })

    // The arguments are matched canonically, as the cache keys them.
    assert.equal(gate.invalidate('fetch', { page: 1.0, q: 'x' }), 1)
    assert.equal(await cached('fetch', { q: 'x', page: 1 }), false, 'dropped, so it ran again')
    assert.equal(await cached('fetch', { q: 'y' }), true, 'other arguments kept')
    assert.equal(gate.invalidate('scoped', { q: 'x' }), 2, 'one entry per tenant')
    assert.equal(await cached('scoped', { q: 'x' }, { tenantId: 'A' }), false)

    assert.equal(gate.invalidate('fetch'), 2)
    assert.equal(gate.invalidate('fetch'), 0, 'nothing left to drop')
    assert.equal(gate.invalidate('no_such_tool'), 0)
    assert.equal(await cached('fetch', { q: 'y' }), false)
    assert.equal(await cached('fetch_all', { q: 'x' }), true)

    gate.clearCache()
    assert.equal(await cached('fetch_all', { q: 'x' }), false)
    assert.equal(await cached('scoped', { q: 'x' }, { tenantId: 'A' }), false)
    assert.deepEqual(calls, { fetch: 4, fetch_all: 2, scoped: 4 })
    assert.throws(() => gate.invalidate(undefined), { name: 'TypeError', message: /tool must be a tool name/ })
  })
})

describe('single flight', () => {
  /** An idempotent read whose handler waits for `release`, so that identical calls overlap. */
  function slowFetch(handler = (args) => `page ${args.q}`) {
    const release = deferred()
    const { gate, calls } = gateWith([{ name: 'fetch', idempotent: true, readOnly: true, retry: false, parameters: Q, handler: async (args, ctx) => {
      await release.promise
      return handler(args, ctx)
    } }])
    return { gate, calls, release }
  }

  it('runs 10 identical calls of one turn once: each gets the result under its own callId', async () => {
    const { gate, calls, release } = slowFetch()
    const turn = gate.execute(times(10, (i) => call('fetch', { q: 'x' }, `c${i}`)))
    // Handlers start inside execute(): the joiners never reached one.
    assert.equal(calls.fetch, 1)
    release.resolve()
    const results = await turn
    assert.equal(calls.fetch, 1)
    assert.deepEqual(results.map((r) => r.callId), times(10, (i) => `c${i}`))
    for (const r of results) assertSuccess(r, 'page x')
    // The call that ran is not marked; every one that joined it is.
    assert.equal(results[0].metadata.sharedFlight, undefined)
    assert.deepEqual(marks(results[0]), [...ADMITTED, 'cache:miss', ...RAN])
    for (const r of results.slice(1)) {
      assert.equal(r.metadata.sharedFlight, true)
      assert.equal(r.cached, false)
      assert.equal(r.attempts, 0)
      assert.deepEqual(marks(r), [...ADMITTED, 'cache:joined', 'invoke:shared'])
    }
    // A joined call missed the cache too.
    assert.deepEqual(counterView(gate.stats().tools.fetch), counts({ cacheMisses: 10, sharedFlights: 9 }))
    const [after] = await gate.execute([call('fetch', { q: 'x' })])
    assert.equal(after.cached, true, 'and the flight filled the cache')
  })

  it('shares one execution across two concurrent turns, but not with other arguments', async () => {
    const { gate, calls, release } = slowFetch()
    const one = gate.execute(times(5, (i) => call('fetch', { q: 'x' }, `a${i}`)))
    const two = gate.execute([...times(5, (i) => call('fetch', { q: 'x' }, `b${i}`)), call('fetch', { q: 'y' }, 'y')])
    assert.equal(calls.fetch, 2, 'x once, y once')
    release.resolve()
    const [first, second] = await Promise.all([one, two])
    assert.equal(calls.fetch, 2)
    const xs = [...first, ...second.slice(0, 5)]
    assert.deepEqual(xs.map((r) => r.callId), [...times(5, (i) => `a${i}`), ...times(5, (i) => `b${i}`)])
    for (const r of xs) assertSuccess(r, 'page x')
    assert.deepEqual(xs.map((r) => r.metadata.sharedFlight === true), [false, ...Array(9).fill(true)])
    assertSuccess(second[5], 'page y')
    assert.equal(second[5].metadata.sharedFlight, undefined)
    assert.equal(gate.stats().tools.fetch.sharedFlights, 9)
  })

  it('shares a failed flight too, and caches nothing: the next call runs again', async () => {
    const { gate, calls, release } = slowFetch(() => {
      throw new Error('upstream down')
    })
    const one = gate.execute([call('fetch', {}, 'a1'), call('fetch', {}, 'a2')])
    const two = gate.execute([call('fetch', {}, 'b1'), call('fetch', {}, 'b2')])
    release.resolve()
    const results = [...await one, ...await two]
    assert.equal(calls.fetch, 1)
    assert.deepEqual(results.map((r) => r.callId), ['a1', 'a2', 'b1', 'b2'])
    for (const r of results) assertFailure(r, 'handler_error', 'Tool "fetch" failed: Error: upstream down')
    assert.deepEqual(results.map((r) => r.metadata.sharedFlight === true), [false, true, true, true])
    const [again] = await gate.execute([call('fetch')])
    assert.equal(calls.fetch, 2, 'a failure fills no cache entry')
    assertFailure(again, 'handler_error')
    assert.equal(again.metadata.sharedFlight, undefined)
  })

  it('a turn that shares another turn\'s flight is not cancelled when the other turn is', async () => {
    const release = deferred()
    const { gate, calls } = gateWith([{ name: 'fetch', idempotent: true, readOnly: true, handler: async (_args, ctx) => {
      await Promise.race([release.promise, untilAborted(ctx.signal)])
      return 'page'
    } }])
    const controller = new AbortController()
    const owner = gate.execute([call('fetch', {}, 'a')], { signal: controller.signal })
    const joiner = gate.execute([call('fetch', {}, 'b')])
    controller.abort()
    release.resolve()
    const [[a], [b]] = await Promise.all([owner, joiner])
    assertFailure(a, 'cancelled')
    // Nobody aborted b's turn: it should get the page (by running, or by a flight that goes on without a).
    assertSuccess(b, 'page')
    assert.ok(calls.fetch <= 2)
  })

  it('a call that stopOnError kept from running leaves no flight behind for later identical calls', async () => {
    const { gate, calls } = gateWith([
      { name: 'write', retry: false, handler: () => {
        throw new Error('disk full')
      } },
      { name: 'fetch', idempotent: true, readOnly: true, handler: () => 'page' },
    ])
    const first = await gate.execute([call('write'), call('fetch')], { stopOnError: true })
    assert.deepEqual(kinds(first), ['handler_error', 'not_executed'])
    // The deadline only keeps this test from hanging: without the bug the call runs at once.
    const [again] = await gate.execute([call('fetch')], { deadlineMs: 300 })
    assertSuccess(again, 'page')
    assert.equal(calls.fetch, 1)
  })
})

describe('dedup', () => {
  const SESSION = { sessionId: 's1' }

  it("'note' (the default) runs a repeat and appends how often the query ran in the session", async () => {
    const { gate, calls } = gateWith([
      { name: 'search', parameters: Q, handler: (args) => `results for ${args.q}` },
      { name: 'broken', retry: false, handler: () => {
        throw new Error('no index')
      } },
    ])
    const run = async (input) => (await gate.execute([call('search', input)], { context: SESSION }))[0]
    const first = await run({ q: 'x' })
    const second = await run({ q: 'x' })
    const third = await run({ q: 'x' })
    assertSuccess(first, 'results for x')
    assertSuccess(second, 'results for x' + note(1))
    assertSuccess(third, 'results for x' + note(2))
    assert.deepEqual([first, second, third].map((r) => r.metadata.repeats), [undefined, 1, 2])
    assert.deepEqual(marks(first), [...ADMITTED, 'dedup:first', ...RAN])
    assert.deepEqual(marks(second), [...ADMITTED, 'dedup:repeat', ...RAN])
    assertSuccess(await run({ q: 'y' }), 'results for y')
    // Within one turn as well.
    const pair = await gate.execute([call('search', { q: 'z' }), call('search', { q: 'z' })], { context: SESSION })
    assert.deepEqual(pair.map((r) => r.output), ['results for z', 'results for z' + note(1)])
    assert.equal(calls.search, 6)
    // A failed repeat counts, but its error is left as it is.
    await gate.execute([call('broken')], { context: SESSION })
    const [failed] = await gate.execute([call('broken')], { context: SESSION })
    assertFailure(failed, 'handler_error', 'no index')
    assert.equal(failed.metadata.repeats, 1)
    assert.deepEqual(counterView(gate.stats().tools.search), counts({ duplicates: 3 }))
    assert.deepEqual(counterView(gate.stats().tools.broken), counts({ duplicates: 1 }))
  })

  it("'note' marks a cache hit too: a repeat answered from the cache still says it is one", async () => {
    const { gate, calls } = gateWith([{ name: 'fetch', idempotent: true, handler: () => 'page' }])
    await gate.execute([call('fetch')], { context: SESSION })
    const [hit] = await gate.execute([call('fetch')], { context: SESSION })
    assert.equal(calls.fetch, 1)
    assert.equal(hit.cached, true)
    assertSuccess(hit, 'page' + note(1))
    assert.equal(hit.metadata.repeats, 1)
    assert.deepEqual(marks(hit), [...ADMITTED, 'dedup:repeat', 'cache:hit'])
    // The note belongs to the call, not to the cached answer.
    const [other] = await gate.execute([call('fetch')], { context: { sessionId: 's2' } })
    assertSuccess(other, 'page')
  })

  it("'note' gives a joined call only its own note, not the one of the call it shared", async () => {
    const { gate } = gateWith([{ name: 'fetch', idempotent: true, readOnly: true, handler: () => 'page' }])
    await gate.execute([call('fetch')], { context: SESSION })
    gate.clearCache()
    const [ran, joined] = await gate.execute([call('fetch'), call('fetch')], { context: SESSION })
    assertSuccess(ran, 'page' + note(1))
    assert.equal(joined.metadata.sharedFlight, true)
    assert.equal(joined.metadata.repeats, 2)
    assertSuccess(joined, 'page' + note(2))
  })

  it("'refuse' answers a repeat with duplicate and never runs it", async () => {
    const { gate, calls } = gateWith([{ name: 'send', parameters: Q, dedup: 'refuse', handler: (args) => `sent ${args.q}` }])
    const run = async (input) => (await gate.execute([call('send', input)], { context: SESSION }))[0]
    assertSuccess(await run({ q: 'x' }), 'sent x')
    const second = await run({ q: 'x' })
    assertFailure(second, 'duplicate',
      'Tool "send" was not run: this exact query already ran once in this session. Use the earlier result, or change the query if you need something different.')
    assert.equal(second.retryable, false)
    assert.equal(second.attempts, 0)
    assert.equal(second.metadata.repeats, 1)
    assert.deepEqual(marks(second), [...ADMITTED, 'dedup:refused'])
    // The refused repeat did not run, so the count of runs stays at one.
    assertFailure(await run({ q: 'x' }), 'duplicate', 'already ran once in this session')
    assertSuccess(await run({ q: 'y' }), 'sent y')
    // The second of two identical calls in one turn is refused as well.
    const pair = await gate.execute([call('send', { q: 'z' }), call('send', { q: 'z' })], { context: SESSION })
    assert.deepEqual(kinds(pair), ['ok', 'duplicate'])
    assert.equal(calls.send, 3)
    assert.deepEqual(counterView(gate.stats().tools.send), counts({ duplicates: 3 }))
  })

  it("'refuse' does not call a query that was never run (rate limited) a repeat", async () => {
    const { gate, calls } = gateWith([{ name: 'send', parameters: Q, dedup: 'refuse', rateLimit: '1/min', handler: () => 'sent' }])
    const first = await gate.execute([call('send', { q: 'a' }), call('send', { q: 'b' })], { context: SESSION })
    assert.deepEqual(kinds(first), ['ok', 'rate_limited'])
    const [retry] = await gate.execute([call('send', { q: 'b' })], { context: SESSION })
    // The bucket is still empty: the honest answer is rate_limited, not "this exact query already ran once".
    assert.equal(retry.errorKind, 'rate_limited', retry.error)
    assert.equal(calls.send, 1)
  })

  it("'reuse' answers a repeat with the session's earlier success, and runs when there is none", async () => {
    let n = 0
    let failed = false
    const { gate, calls } = gateWith([{ name: 'search', parameters: Q, dedup: { policy: 'reuse' }, retry: false, handler: (args) => {
      n += 1
      if (args.q === 'flaky' && !failed) {
        failed = true
        throw new Error('timeout upstream')
      }
      return { q: args.q, n }
    } }])
    const run = async (input, id, context = SESSION) => (await gate.execute([call('search', input, id)], { context }))[0]
    const first = await run({ q: 'x' }, 'first')
    const reused = await run({ q: 'x' }, 'again')
    assert.equal(calls.search, 1)
    assertSuccess(reused, first.output)
    assert.equal(reused.callId, 'again')
    assert.deepEqual(reused.metadata.structured, { q: 'x', n: 1 })
    assert.equal(reused.metadata.reused, true)
    assert.equal(reused.metadata.repeats, 1)
    assert.equal(reused.cached, false)
    assert.equal(reused.attempts, 0)
    assert.deepEqual(marks(reused), [...ADMITTED, 'dedup:reused'])
    // Another session has nothing to reuse.
    assert.deepEqual((await run({ q: 'x' }, 'other', { sessionId: 's2' })).metadata.structured, { q: 'x', n: 2 })

    // No earlier success kept: the repeat runs, and its success is what the next repeat reuses.
    assertFailure(await run({ q: 'flaky' }), 'handler_error', 'timeout upstream')
    const rerun = await run({ q: 'flaky' })
    assertSuccess(rerun, '{"q":"flaky","n":4}')
    assert.equal(rerun.metadata.reused, undefined)
    assert.equal(rerun.metadata.repeats, 1)
    assert.deepEqual(marks(rerun), [...ADMITTED, 'dedup:repeat', ...RAN.with(1, 'normalize:structured')])
    const third = await run({ q: 'flaky' })
    assertSuccess(third, rerun.output)
    assert.equal(third.metadata.reused, true)
    assert.equal(third.metadata.repeats, 2)
    assert.equal(calls.search, 4)
    assert.deepEqual(counterView(gate.stats().tools.search), counts({ duplicates: 3 }))
  })

  it("keys: ['query'] makes calls that differ only in other arguments the same query", async () => {
    const { gate, calls } = gateWith([{
      name: 'search', dedup: { policy: 'refuse', keys: ['query'] },
      parameters: { type: 'object', properties: { query: { type: 'string' }, page: { type: 'integer' } } },
    }])
    const results = await gate.execute([
      call('search', { query: 'x', page: 1 }),
      call('search', { query: 'x', page: 2 }),
      call('search', { query: 'x' }),
      call('search', { query: 'y', page: 1 }),
    ], { context: SESSION })
    assert.deepEqual(kinds(results), ['ok', 'duplicate', 'duplicate', 'ok'])
    assert.equal(calls.search, 2)
  })

  it('does nothing without a sessionId, or under policy off', async () => {
    const { gate, calls } = gateWith([{ name: 'strict', dedup: 'refuse' }, { name: 'lax', dedup: { policy: 'off' } }])
    // A context with other fields but no sessionId: there is no session to count in.
    for (const context of [undefined, { userId: 'u1' }]) {
      assert.deepEqual(kinds(await gate.execute([call('strict'), call('strict')], { context })), ['ok', 'ok'])
    }
    const off = await gate.execute([call('lax'), call('lax')], { context: SESSION })
    for (const r of off) {
      assertSuccess(r, 'ok')
      assert.equal(r.metadata.repeats, undefined)
      assert.deepEqual(marks(r), [...ADMITTED, ...RAN])
    }
    assert.deepEqual(calls, { strict: 4, lax: 2 })
    assert.deepEqual(counterView(gate.stats().total), counts())
  })

  it("takes the executor's dedup.policy for tools that declare none", async () => {
    const { gate, calls } = gateWith([{ name: 'plain' }, { name: 'noted', dedup: 'note' }], { dedup: { policy: 'refuse' } })
    const results = await gate.execute([call('plain'), call('plain'), call('noted'), call('noted')], { context: SESSION })
    assert.deepEqual(kinds(results), ['ok', 'duplicate', 'ok', 'ok'])
    assert.equal(results[3].output, 'ok' + note(1))
    assert.deepEqual(calls, { plain: 1, noted: 2 })
  })

  it('keeps sessions apart, within maxSessions and maxQueriesPerSession', async () => {
    const { gate, calls } = gateWith([{ name: 'send', parameters: Q, dedup: 'refuse' }], { dedup: { maxSessions: 2, maxQueriesPerSession: 1 } })
    const send = async (sessionId, q) => (await gate.execute([call('send', { q })], { context: { sessionId } }))[0].errorKind ?? 'ok'
    assert.equal(await send('s1', 'x'), 'ok')
    assert.equal(await send('s2', 'x'), 'ok', 'another session')
    assert.equal(await send('s1', 'x'), 'duplicate')
    // One query per session is remembered: y pushes x out of s1.
    assert.equal(await send('s1', 'y'), 'ok')
    assert.equal(await send('s1', 'x'), 'ok')
    // Two sessions are remembered: s3 pushes out s2, the least recently used.
    assert.equal(await send('s3', 'x'), 'ok')
    assert.equal(await send('s2', 'x'), 'ok')
    assert.equal(calls.send, 6)
  })

  it('forgets a session after sessionTtlMs without calls', async () => {
    const { gate, calls } = gateWith([{ name: 'send', dedup: 'refuse' }], { dedup: { sessionTtlMs: 80 } })
    const send = async () => (await gate.execute([call('send')], { context: SESSION }))[0].errorKind ?? 'ok'
    assert.equal(await send(), 'ok')
    assert.equal(await send(), 'duplicate')
    await sleep(250)
    assert.equal(await send(), 'ok')
    assert.equal(calls.send, 2)
  })
})

describe('rate limits', () => {
  it("admits no more calls than the bucket holds: '3/min' runs 3 of 10, the rest get rate_limited", async () => {
    const { gate, calls } = gateWith([{ name: 'send', parameters: ID, rateLimit: '3/min', handler: (args) => args.id }])
    const results = await gate.execute(times(10, (i) => call('send', { id: `m${i}` })))
    assert.deepEqual(kinds(results), [...Array(3).fill('ok'), ...Array(7).fill('rate_limited')])
    assert.equal(calls.send, 3)
    for (const r of results.slice(3)) {
      assertRateLimited(r, TOOL_LIMIT)
      // One token refills every 20 s: never a longer wait than that.
      assert.ok(r.retryAfterMs <= 20_000, String(r.retryAfterMs))
      assert.deepEqual(marks(r), [...ADMITTED, 'rate_limit:refused'])
    }
    // The window holds across turns.
    const [later] = await gate.execute([call('send', { id: 'later' })])
    assertRateLimited(later, TOOL_LIMIT)
    assert.equal(calls.send, 3)
    assert.deepEqual(counterView(gate.stats().tools.send), counts({ rateLimited: 8 }))
  })

  it('with key: userId, gives each user a bucket of its own', async () => {
    const { gate, calls } = gateWith([{ name: 'send', rateLimit: { limit: '2/min', key: 'userId' } }])
    const as = async (userId) => kinds(await gate.execute(times(3, () => call('send')), { context: userId === undefined ? {} : { userId } }))
    assert.deepEqual(await as('alice'), ['ok', 'ok', 'rate_limited'])
    assert.deepEqual(await as('bob'), ['ok', 'ok', 'rate_limited'], "alice's calls took none of bob's tokens")
    assert.deepEqual(await as(undefined), ['ok', 'ok', 'rate_limited'], 'no userId: one bucket for all such calls')
    assert.deepEqual(await as('alice'), ['rate_limited', 'rate_limited', 'rate_limited'])
    assert.equal(calls.send, 6)
  })

  it("with the executor's rateLimit, every tool's calls share one bucket", async () => {
    const { gate, calls } = gateWith([{ name: 'a', readOnly: true }, { name: 'b', readOnly: true }], { rateLimit: '3/min' })
    const results = await gate.execute([call('a'), call('b'), call('a'), call('b')])
    assert.deepEqual(kinds(results), ['ok', 'ok', 'ok', 'rate_limited'])
    assertRateLimited(results[3], SHARED_LIMIT)
    const [later] = await gate.execute([call('a')])
    assertRateLimited(later, SHARED_LIMIT)
    assert.deepEqual(calls, { a: 2, b: 1 })
    assert.deepEqual(counterView(gate.stats().tools), { a: counts({ rateLimited: 1 }), b: counts({ rateLimited: 1 }) })
  })

  it("spends the executor's tokens only on calls that run", async () => {
    const { gate, calls } = gateWith([
      { name: 'scarce', readOnly: true, rateLimit: '1/min' },
      { name: 'plenty', readOnly: true },
    ], { rateLimit: '4/min' })
    assert.deepEqual(kinds(await gate.execute(times(3, () => call('scarce')))), ['ok', 'rate_limited', 'rate_limited'])
    // One call ran, so three of the executor's four tokens are left.
    assert.deepEqual(kinds(await gate.execute(times(3, () => call('plenty')))), ['ok', 'ok', 'ok'])
    assert.deepEqual(calls, { scarce: 1, plenty: 3 })
  })

  it('with maxWaitMs, calls wait for their tokens and start in arrival order, across turns', async () => {
    const rec = recorder()
    // One token, then one every 50 ms.
    const { gate, calls } = gateWith([{
      name: 'fetch', readOnly: true, parameters: ID, rateLimit: { capacity: 1, refillPerSecond: 20, maxWaitMs: 1000 }, handler: rec.handler(1),
    }])
    const one = gate.execute([call('fetch', { id: 'a1' }), call('fetch', { id: 'a2' })])
    const two = gate.execute([call('fetch', { id: 'b1' }), call('fetch', { id: 'b2' })])
    assert.equal(calls.fetch, 1, 'only the first had a token at once')
    const results = [...await one, ...await two]
    assert.deepEqual(kinds(results), ['ok', 'ok', 'ok', 'ok'])
    assert.deepEqual(rec.events.filter((e) => e.startsWith('start:')), ['start:a1', 'start:a2', 'start:b1', 'start:b2'])
    assert.deepEqual(marks(results[0]), [...ADMITTED, ...RAN])
    for (const r of results.slice(1)) assert.deepEqual(marks(r), [...ADMITTED, 'rate_limit:waited', ...RAN])
    assert.deepEqual(counterView(gate.stats()), { total: counts(), tools: {} }, 'a wait is not a refusal')
  })

  it('refuses a call whose token is further away than maxWaitMs, without reserving it', async () => {
    // One token, then one every 100 ms; a call may wait 150 ms.
    const { gate, calls } = gateWith([{ name: 'fetch', readOnly: true, rateLimit: { capacity: 1, refillPerSecond: 10, maxWaitMs: 150 } }])
    const results = await gate.execute(times(4, () => call('fetch')))
    assert.deepEqual(kinds(results), ['ok', 'ok', 'rate_limited', 'rate_limited'])
    for (const r of results.slice(2)) {
      assertRateLimited(r, TOOL_LIMIT)
      // Behind the one reservation: 200 ms away, past the 150 ms allowed. The fourth queued behind nothing.
      assert.ok(r.retryAfterMs > 150, String(r.retryAfterMs))
    }
    assert.equal(results[2].retryAfterMs, results[3].retryAfterMs, 'a refusal reserves nothing')
    assert.equal(calls.fetch, 2)
  })

  it("never waits past the turn's deadline: a token due after it is refused at once, and nothing runs later", async () => {
    const events = []
    // One token, then one every 200 ms; the calls could wait 5 s, but the turn has 390 ms.
    const { gate, calls } = gateWith([{
      name: 'fetch', readOnly: true, parameters: ID, rateLimit: { capacity: 1, refillPerSecond: 5, maxWaitMs: 5000 },
      handler: (args) => {
        events.push(`start:${args.id}`)
        return args.id
      },
    }])
    const results = await gate.execute(times(3, (i) => call('fetch', { id: `c${i}` })), { deadlineMs: 390 })
    events.push('turn:done')
    // c1 waits 200 ms for its token; c2's would come at 400 ms, after the deadline: rate_limited, not not_executed.
    assert.deepEqual(kinds(results), ['ok', 'ok', 'rate_limited'])
    assertRateLimited(results[2], TOOL_LIMIT)
    assert.deepEqual(marks(results[1]), [...ADMITTED, 'rate_limit:waited', ...RAN])
    // Well past the moment c2's token would have been due: no handler started after the turn.
    await sleep(300)
    assert.deepEqual(events, ['start:c0', 'start:c1', 'turn:done'])
    assert.equal(calls.fetch, 2)
  })

  it('takes no token for a cache hit or a joined flight', async () => {
    const release = deferred()
    const { gate, calls } = gateWith([
      { name: 'get', idempotent: true, parameters: Q, rateLimit: '2/min', handler: (args) => args.q },
      { name: 'slow', idempotent: true, readOnly: true, rateLimit: '1/min', handler: async () => {
        await release.promise
        return 'shared'
      } },
    ])
    const run = async (q) => kinds(await gate.execute([call('get', { q })]))[0]
    assert.equal(await run('x'), 'ok')
    const hits = await gate.execute(times(3, () => call('get', { q: 'x' })))
    assert.ok(hits.every((r) => r.cached))
    assert.ok(hits.every((r) => !marks(r).some((m) => m.startsWith('rate_limit'))))
    assert.equal(await run('y'), 'ok', 'the hits left the second token')
    assert.equal(await run('z'), 'rate_limited')
    assert.equal(calls.get, 2)

    // Five identical calls under a one-token bucket: one runs, four join it.
    const flight = gate.execute(times(5, () => call('slow')))
    release.resolve()
    const shared = await flight
    for (const r of shared) assertSuccess(r, 'shared')
    assert.equal(calls.slow, 1)
    assert.deepEqual(counterView(gate.stats().tools), {
      get: counts({ cacheHits: 3, cacheMisses: 3, rateLimited: 1 }),
      slow: counts({ cacheMisses: 5, sharedFlights: 4 }),
    })
  })
})

describe('programmer errors', () => {
  const ok = () => 'ok'
  const register = (spec) => () => new ToolExecutor().register({ name: 't', handler: ok, ...spec })

  it('throws a TypeError at register for a rate limit it cannot read, and accepts every written form', () => {
    for (const limit of ['10/fortnight', 'ten/min', '0/min', '5/weeks']) {
      assert.throws(register({ rateLimit: limit }), {
        name: 'TypeError', message: `tool "t": invalid rateLimit "${limit}": write it as N/s, N/min, N/hour or N/day (e.g. '10/min')`,
      })
    }
    assert.throws(register({ rateLimit: { capacity: 3 } }), {
      name: 'TypeError', message: /needs either limit \('10\/min'\) or both capacity and refillPerSecond/,
    })
    assert.throws(register({ rateLimit: 5 }), { name: 'TypeError', message: /rateLimit must be like '10\/min'/ })
    assert.throws(register({ rateLimit: { limit: '1/s', burst: 2 } }), { name: 'TypeError', message: /unknown field `burst`/ })
    const forms = ['5/s', '10/min', '100/hour', '1000/day', { capacity: 3, refillPerSecond: 0.5 }, { limit: '2/s', key: 'userId', maxWaitMs: 500 }]
    for (const limit of forms) {
      assert.doesNotThrow(register({ rateLimit: limit }), JSON.stringify(limit))
    }
  })

  it('throws a TypeError at register for an unknown dedup policy, and for cache on a tool that is not idempotent', () => {
    assert.throws(register({ dedup: 'sometimes' }), {
      name: 'TypeError', message: `tool "t": unknown dedup policy "sometimes": use 'off', 'note', 'refuse' or 'reuse'`,
    })
    assert.throws(register({ dedup: { policy: 'never' } }), { name: 'TypeError', message: /unknown dedup policy "never"/ })
    assert.throws(register({ dedup: { keyz: ['q'] } }), { name: 'TypeError', message: /invalid dedup: unknown field `keyz`/ })
    assert.throws(register({ cache: { ttlMs: 10 } }), {
      name: 'TypeError', message: 'tool "t": cache is only for idempotent tools: add idempotent: true (same arguments, same result)',
    })
    assert.throws(register({ idempotent: true, cache: { ttl: 10 } }), { name: 'TypeError', message: /cache must be true, false or \{ ttlMs\?, scope\? \} \(unknown field `ttl`/ })
    // Turning off what is not on is harmless.
    assert.doesNotThrow(register({ cache: false }))
    // A tool that failed to register is not there.
    const gate = new ToolExecutor()
    assert.throws(() => gate.register({ name: 'x', dedup: 'sometimes', handler: ok }), TypeError)
    assert.deepEqual(gate.list(), [])
  })

  it('takes cache: true on an idempotent tool as the defaults, and explains a malformed cache in its own terms', () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'on', idempotent: true, cache: true, handler: () => 'x' })
    assert.throws(register({ idempotent: true, cache: 5 }), (err) => (
      err instanceof TypeError && !err.message.includes('DeclaredCache') && /ttlMs/.test(err.message)
    ))
  })

  it('throws a TypeError at construction for bad cache, dedup or rateLimit options', () => {
    const cases = [
      [{ rateLimit: '10/fortnight' }, /invalid rateLimit "10\/fortnight"/],
      [{ dedup: { policy: 'maybe' } }, /unknown dedup policy "maybe"/],
      [{ dedup: { maxSessions: 0 } }, /dedup.maxSessions must be a positive number/],
      [{ cache: { maxEntries: 0 } }, /cache.maxEntries must be a positive number/],
      [{ cache: { maxItems: 5 } }, /unknown field `maxItems`/],
    ]
    for (const [options, message] of cases) assert.throws(() => new ToolExecutor(options), { name: 'TypeError', message }, JSON.stringify(options))
  })
})

describe('stats', () => {
  it('counts hits, misses, shared flights, duplicates and refusals per tool, and adds them up in total', async () => {
    const { gate } = gateWith([
      { name: 'fetch', idempotent: true, readOnly: true, parameters: Q, handler: async (args) => {
        await sleep(5)
        return args.q
      } },
      { name: 'search', dedup: 'refuse' },
      { name: 'send', rateLimit: '1/min' },
    ])
    assert.deepEqual(counterView(gate.stats()), { total: counts(), tools: {} })
    await gate.execute([call('fetch', { q: 'x' })]) // miss
    await gate.execute([call('fetch', { q: 'x' })]) // hit
    await gate.execute(times(3, () => call('fetch', { q: 'y' }))) // three misses, two of them joined
    await gate.execute(times(3, () => call('search')), { context: { sessionId: 's' } }) // two duplicates
    await gate.execute([call('send'), call('send')]) // one refused
    const fetch = counts({ cacheHits: 1, cacheMisses: 4, sharedFlights: 2 })
    const search = counts({ duplicates: 2 })
    const send = counts({ rateLimited: 1 })
    assert.deepEqual(counterView(gate.stats()), {
      total: counts({ cacheHits: 1, cacheMisses: 4, sharedFlights: 2, duplicates: 2, rateLimited: 1 }),
      tools: { fetch, search, send },
    })
  })
})
