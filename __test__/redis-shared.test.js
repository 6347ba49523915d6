'use strict'
// The executor over a real Redis (redis-server on a free port, and a 3-node cluster, started here): what each
// station keeps in the shared store, what a call costs it, and what happens when the store fails.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { createClient, createCluster } = require('redis')
const { ToolExecutor } = require('..')
const { redisStore } = require('toolgate/redis')
const { startRedis, startCluster } = require('./redis/servers.js')

let server
let cluster
const clients = []
before(async () => {
  server = await startRedis()
  cluster = await startCluster()
})
after(async () => {
  await Promise.all(clients.map((c) => Promise.resolve(c.quit?.() ?? c.close?.()).catch(() => {})))
  await server?.stop()
  await cluster?.stop()
})

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
let prefixes = 0
/** A fresh key space per test, so tests share the servers and nothing else. */
const freshPrefix = () => `t${++prefixes}-${process.pid}:`

/** The four kinds of client an application may hand over, each connected to the servers started above. */
const CLIENTS = {
  ioredis: async () => new Redis({ port: server.port, host: '127.0.0.1', maxRetriesPerRequest: 1 }),
  'ioredis cluster': async () => {
    const c = new Redis.Cluster(cluster.nodes)
    await new Promise((resolve, reject) => c.once('ready', resolve).once('error', reject))
    return c
  },
  'node-redis': async () => createClient({ url: server.url }).on('error', () => {}).connect(),
  'node-redis cluster': async () => createCluster({ rootNodes: cluster.nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })) }).on('error', () => {}).connect(),
}

async function connect(kind) {
  const client = await CLIENTS[kind]()
  clients.push(client)
  return client
}

/** Resolves once Redis is asleep (a DEBUG SLEEP sent on another connection has begun): a PING on `pinger` goes
 * unanswered for a while. A fixed pause before the calls would race the sleep on a loaded machine. The replies that
 * arrived meanwhile are read before the PING counts as unanswered: on a loaded machine the timer may fire late, with
 * the answer already in. */
async function asleep(pinger) {
  for (let tries = 0; tries < 100; tries++) {
    const unanswered = sleep(100).then(() => new Promise((resolve) => setImmediate(resolve, false)))
    const answered = await Promise.race([pinger.ping().then(() => true), unanswered])
    if (!answered) return
  }
  throw new Error('Redis never went to sleep: DEBUG SLEEP did not take')
}

/** A server of the test's own (to kill, or to guard with a password) and an ioredis client of it; `end()` closes
 * the executors given and both. */
async function ownServer({ password, clientPassword } = {}) {
  const own = await startRedis({ password })
  const client = new Redis({ port: own.port, host: '127.0.0.1', password: clientPassword, maxRetriesPerRequest: 1 })
  client.on('error', () => {})
  const end = async (...gates) => {
    await Promise.all(gates.map((gate) => gate.close()))
    client.disconnect()
    await own.stop()
  }
  return { own, client, end }
}

/** Two executors (as two processes would be) over one store of `client`, with the same tools. */
function pair(client, { onError, register } = {}) {
  const store = redisStore({ client, prefix: freshPrefix(), timeoutMs: 1_000, onError })
  const made = [0, 1].map(() => {
    const gate = new ToolExecutor({ store })
    const runs = { lookup: 0, api: 0 }
    gate.register({
      name: 'lookup', readOnly: true, idempotent: true,
      parameters: { type: 'object', properties: { q: { type: 'string' } } },
      handler: ({ q }) => {
        runs.lookup++
        return `answer to ${q}`
      },
    })
    gate.register({ name: 'api', readOnly: true, rateLimit: { capacity: 3, refillPerSecond: 0.001 }, handler: () => { runs.api++; return 'ok' } })
    register?.(gate)
    return { gate, runs }
  })
  return { store, a: made[0], b: made[1] }
}

for (const kind of Object.keys(CLIENTS)) {
  test(`${kind}: cache, invalidation and rate limits hold across executors`, async () => {
    const client = await connect(kind)
    const { a, b } = pair(client)
    try {
      const keys = ['x', 'y', 'z', 'w']
      const first = await a.gate.execute(keys.map((q) => ({ name: 'lookup', arguments: { q } })))
      assert.deepEqual(first.map((r) => [r.success, r.cached]), keys.map(() => [true, false]))
      const second = await b.gate.execute(keys.map((q) => ({ name: 'lookup', arguments: { q } })))
      assert.deepEqual(second.map((r) => [r.output, r.cached]), keys.map((q) => [`answer to ${q}`, true]))
      assert.equal(b.runs.lookup, 0)
      // Entries of several keys sit in several slots of the cluster: invalidation finds them all.
      assert.equal(await b.gate.invalidate('lookup', { q: 'x' }), 1)
      assert.equal(await a.gate.clearCache(), 3)
      const third = await b.gate.execute([{ name: 'lookup', arguments: { q: 'y' } }])
      assert.equal(third[0].cached, false)
      assert.equal(b.runs.lookup, 1)

      const limited = [...await a.gate.execute([{ name: 'api' }, { name: 'api' }]), ...await b.gate.execute([{ name: 'api' }, { name: 'api' }])]
      assert.deepEqual(limited.map((r) => r.success), [true, true, true, false], 'one bucket of 3 for both')
      assert.equal(limited[3].errorKind, 'rate_limited')
      assert.ok(limited[3].retryAfterMs > 0)
      assert.equal(limited[3].metadata.store, undefined, 'the store answered: an ordinary refusal')
    } finally {
      await Promise.all([a.gate.close(), b.gate.close()])
    }
  })
}

for (const kind of ['ioredis', 'node-redis cluster']) {
  test(`${kind}: budgets per session, per window and of cost hold across executors`, async () => {
    const client = await connect(kind)
    const { a, b } = pair(client, {
      register: (gate) => {
        gate.register({ name: 'search', readOnly: true, budget: { maxCalls: 3 }, handler: () => 'found' })
        gate.register({ name: 'render', readOnly: true, cost: ({ pages }) => pages, handler: () => 'rendered' })
        gate.register({ name: 'fetch', readOnly: true, budget: { maxCallsPerWindow: { calls: 2, windowMs: 60_000 } }, handler: () => 'page' })
      },
    })
    const context = { sessionId: `s-${kind}` }
    const kinds = (results) => results.map((r) => r.errorKind ?? 'ok')
    try {
      const searches = [...await a.gate.execute([{ name: 'search' }, { name: 'search' }], { context }), ...await b.gate.execute([{ name: 'search' }, { name: 'search' }], { context })]
      assert.deepEqual(kinds(searches), ['ok', 'ok', 'ok', 'budget_exceeded'], 'one budget of 3 for both')
      assert.match(searches[3].error, /the call budget of session "s-.*" \(this tool's maxCalls\) is used up: 3 of 3 calls/)
      assert.equal(searches[3].metadata.store, undefined, 'the store answered: an ordinary refusal')
      const other = await b.gate.execute([{ name: 'search' }], { context: { sessionId: `other-${kind}` } })
      assert.deepEqual(kinds(other), ['ok'], 'another session, another budget')

      const costed = { ...context, budget: { maxCost: 10 } }
      const render = (pages) => ({ name: 'render', arguments: { pages } })
      const spent = [...await a.gate.execute([render(4)], { context: costed }), ...await b.gate.execute([render(5), render(2), render(1)], { context: costed })]
      assert.deepEqual(kinds(spent), ['ok', 'ok', 'budget_exceeded', 'ok'], '4 + 5 = 9: 2 more would pass 10, 1 fits')
      assert.deepEqual([spent[2].metadata.budget.used, spent[2].metadata.budget.cost], [9, 2])

      const fetched = [...await a.gate.execute([{ name: 'fetch' }], { context }), ...await b.gate.execute([{ name: 'fetch' }, { name: 'fetch' }], { context })]
      assert.deepEqual(kinds(fetched), ['ok', 'ok', 'budget_exceeded'])
      assert.ok(fetched[2].retryAfterMs > 0 && fetched[2].retryAfterMs <= 60_000, `starts over on the server's clock: ${fetched[2].retryAfterMs}`)
    } finally {
      await Promise.all([a.gate.close(), b.gate.close()])
    }
  })
}

test('a breaker opened by one executor\'s failures stops the other once it hears, and a trial in either closes it for both', async () => {
  const client = await connect('ioredis')
  const backend = { up: false, runs: 0 }
  const { a, b } = pair(client, {
    register: (gate) => gate.register({
      name: 'payments', retry: false, breaker: { minCalls: 3, failureRate: 0.5, openMs: 400 },
      handler: () => {
        backend.runs++
        if (!backend.up) throw new Error('503 from the payments API')
        return 'paid'
      },
    }),
  })
  const kinds = (results) => results.map((r) => r.errorKind ?? 'ok')
  try {
    const failing = []
    for (let i = 0; i < 3; i++) failing.push(...await a.gate.execute([{ name: 'payments' }]))
    assert.deepEqual(kinds(failing), ['handler_error', 'handler_error', 'handler_error'])
    await waitFor(() => a.gate.stats().tools.payments.breaker === 'open', 'the third failure\'s answer says it opened')
    assert.deepEqual(kinds(await a.gate.execute([{ name: 'payments' }])), ['unavailable'])
    assert.equal(a.gate.stats().store.operations, 3, 'a refusal by an open breaker asks the store nothing')
    // The other executor runs one more call (it has not heard), and its answer tells it.
    assert.deepEqual(kinds(await b.gate.execute([{ name: 'payments' }])), ['handler_error'])
    await waitFor(() => b.gate.stats().tools.payments.breaker === 'open', 'the other executor heard')
    const refused = await b.gate.execute([{ name: 'payments' }])
    assert.deepEqual(kinds(refused), ['unavailable'])
    assert.ok(refused[0].retryAfterMs > 0 && refused[0].retryAfterMs <= 400)
    assert.equal(backend.runs, 4)
    await sleep(450)
    backend.up = true
    assert.deepEqual(kinds(await b.gate.execute([{ name: 'payments' }])), ['ok'], 'the trial call')
    await waitFor(() => b.gate.stats().tools.payments.breaker === 'closed', 'the trial closed it')
    assert.deepEqual(kinds(await a.gate.execute([{ name: 'payments' }])), ['ok'], 'the store says closed when a asks')
    assert.equal(a.gate.stats().tools.payments.breaker, 'closed')
    assert.equal(a.gate.stats().tools.payments.breakerOpened + b.gate.stats().tools.payments.breakerOpened, 1, 'the opening is counted where the call that opened it ran')
  } finally {
    await Promise.all([a.gate.close(), b.gate.close()])
  }
})

// One scenario for both stores: the memory store's breaker (the engine's) and Redis's (the Lua) must open, refuse
// and close on the same calls. Each step is a handler outcome, or a pause past openMs.
const BREAKER_SCENARIO = [
  ['fail', 'closed'], ['fail', 'closed'], ['fail', 'closed'],
  ['ok', 'open'], // the fourth call reaches minCalls: 3 of 4 failed, and a success does not hide that
  ['refused', 'open'],
  ['pause'],
  ['ok', 'closed'], // the trial
  ['ok', 'closed'], ['fail', 'closed'], ['fail', 'closed'],
  ['ok', 'closed'], // 2 of 4 failed: below 0.6
  ['fail', 'open'], // 3 of 5
  ['refused', 'open'],
]

async function breakerScenario(store) {
  const gate = new ToolExecutor({ store })
  let next = 'ok'
  gate.register({
    name: 'quote', retry: false, breaker: { minCalls: 4, failureRate: 0.6, openMs: 300, halfOpenCalls: 1 },
    handler: () => {
      if (next === 'fail') throw new Error('503 from the quotes API')
      return 'quoted'
    },
  })
  const seen = []
  try {
    for (const [step] of BREAKER_SCENARIO) {
      if (step === 'pause') {
        await sleep(400)
        continue
      }
      next = step
      const [r] = await gate.execute([{ name: 'quote' }])
      const outcome = r.success ? 'ok' : r.errorKind === 'unavailable' ? 'refused' : 'fail'
      // With Redis, the phase is known once the answer to the outcome told the store is in.
      await waitFor(() => (gate.stats().store?.pending ?? 0) === 0, 'the store answered')
      seen.push([outcome, gate.stats().tools.quote.breaker])
    }
  } finally {
    await gate.close()
  }
  return seen
}

test('a breaker opens, refuses and closes on the same calls in memory and in Redis, judged after every counted outcome', async () => {
  const expected = BREAKER_SCENARIO.filter(([step]) => step !== 'pause')
  assert.deepEqual(await breakerScenario(undefined), expected, 'the memory store')
  for (const kind of ['ioredis', 'node-redis cluster']) {
    const store = redisStore({ client: await connect(kind), prefix: freshPrefix(), timeoutMs: 1_000 })
    assert.deepEqual(await breakerScenario(store), expected, kind)
  }
})

test('garbage under a breaker key never opens the breaker of any executor, and none is left refusing after FLUSHALL', async () => {
  const { client, end } = await ownServer()
  const { store, a, b } = pair(client, {
    register: (gate) => gate.register({ name: 'pay', retry: false, breaker: { minCalls: 2, openMs: 1_000 }, handler: () => 'paid' }),
  })
  const key = `${store.prefix}{k:pay}`
  const week = String(Date.now() + 7 * 24 * 3600 * 1000)
  const kinds = (results) => results.map((r) => r.errorKind ?? 'ok')
  try {
    for (const garbage of [['phase', 'open', 'until', week], ['phase', 'open', 'until', '1e400'], ['phase', 'half_open', 'gen', '1', 'adm', '999']]) {
      for (const gate of [a.gate, b.gate]) {
        await client.hset(key, ...garbage)
        assert.deepEqual(kinds([...await gate.execute([{ name: 'pay' }]), ...await gate.execute([{ name: 'pay' }])]), ['ok', 'ok'], `${garbage}`)
        await waitFor(() => gate.stats().store.pending === 0, 'the outcomes told')
        assert.equal(gate.stats().tools.pay.breaker, 'closed', `${garbage}`)
      }
    }
    await client.hset(key, 'phase', 'open', 'until', week)
    assert.deepEqual(kinds(await a.gate.execute([{ name: 'pay' }])), ['ok'])
    await waitFor(() => a.gate.stats().store.pending === 0, 'the outcome told')
    await client.flushall()
    assert.deepEqual(kinds(await a.gate.execute([{ name: 'pay' }])), ['ok'], 'nothing of the garbage kept by the executor')
    assert.equal(a.gate.stats().tools.pay.breakerOpened + b.gate.stats().tools.pay.breakerOpened, 0)
  } finally {
    await end(a.gate, b.gate)
  }
})

/** Waits (real time, a few seconds at most) until `ok()` holds. */
async function waitFor(ok, what) {
  for (let i = 0; i < 200 && !ok(); i++) await sleep(10)
  assert.ok(ok(), what)
}

for (const kind of ['ioredis cluster', 'node-redis cluster']) {
  test(`${kind}: a paused master costs the store only to the calls whose keys live on it`, { timeout: 30_000 }, async () => {
    const client = await connect(kind)
    const store = redisStore({ client, prefix: freshPrefix(), timeoutMs: 500 })
    const gate = new ToolExecutor({ store, concurrency: 64 })
    const ran = new Set()
    gate.register({
      name: 'lookup', readOnly: true, idempotent: true, parameters: { type: 'object', properties: { q: { type: 'string' } } },
      handler: ({ q }) => {
        ran.add(q)
        return `answer to ${q}`
      },
    })
    gate.register({ name: 'charge', readOnly: true, budget: { maxCalls: 1_000 }, handler: () => 'charged' })
    const turn = [...Array.from({ length: 30 }, (_, i) => ({ name: 'lookup', arguments: { q: String(i) } })), { name: 'charge' }]
    // Each master, by a connection of its own: which cache entries and which budget counter it holds.
    const direct = cluster.ports.map((port) => new Redis({ port, host: '127.0.0.1' }))
    const paused = []
    try {
      await gate.execute(turn)
      await waitFor(() => gate.stats().store.pending === 0, 'the entries kept')
      const held = await Promise.all(direct.map(async (node) => {
        const keys = []
        let cursor = '0'
        do {
          const [next, page] = await node.scan(cursor, 'MATCH', `${store.prefix}*`, 'COUNT', '1000')
          keys.push(...page)
          cursor = next
        } while (cursor !== '0')
        const entries = keys.map((key) => /}e:.*"q":"(\d+)"/.exec(key)?.[1]).filter((q) => q !== undefined)
        return { entries: new Set(entries), budget: keys.some((key) => key.includes('{g:')) }
      }))
      assert.equal(held.reduce((n, node) => n + node.entries.size, 0), 30, 'every entry kept once')
      const down = held.findIndex((node) => node.entries.size > 0 && !node.budget)
      assert.ok(down >= 0, 'a master with entries and without the budget counter')
      ran.clear()
      paused.push(cluster.ports[down])
      await cluster.kill(cluster.ports[down], 'SIGSTOP')
      const results = await gate.execute(turn)
      for (const [i, r] of results.slice(0, 30).entries()) {
        const lost = held[down].entries.has(String(i))
        assert.deepEqual([r.success, r.cached, r.metadata.store], [true, !lost, lost ? 'unavailable' : undefined], `lookup ${i}`)
        if (lost) assert.match(r.metadata.storeError, /no answer within 500 ms/)
      }
      assert.deepEqual([...ran].sort(), [...held[down].entries].sort(), 'only the calls whose entries live on the paused master ran')
      const charged = results[30]
      assert.deepEqual([charged.success, charged.metadata.store], [true, undefined], 'its budget lives on a master that answered')
    } finally {
      for (const port of paused) await cluster.kill(port, 'SIGCONT')
      await gate.close()
      for (const node of direct) node.disconnect()
    }
  })
}

test('a store of the application\'s own: a reply told early is used at once; a short, odd or failed answer fails what it leaves out', async () => {
  const batches = []
  const store = {
    timeoutMs: 5_000,
    run: (ops, onReply) => new Promise((resolve, reject) => batches.push({ ops, onReply, resolve, reject })),
    invalidate: async () => 0,
  }
  const gate = new ToolExecutor({ store })
  const ran = []
  gate.register({ name: 'api', readOnly: true, rateLimit: '10/s', parameters: { type: 'object', properties: { n: { type: 'number' } } }, handler: ({ n }) => { ran.push(n); return `ran ${n}` } })
  const three = () => gate.execute([0, 1, 2].map((n) => ({ name: 'api', arguments: { n } })))
  const outcomes = (results) => results.map((r) => r.metadata.storeError ?? r.output)
  try {
    const first = three()
    await waitFor(() => batches.length === 1, 'one batch')
    assert.equal(batches[0].ops.length, 3)
    batches[0].onReply(0, { take: 'now' })
    await waitFor(() => ran.length === 1, 'the call told its token ran')
    batches[0].resolve([{ take: 'now' }])
    assert.deepEqual(outcomes(await first), ['ran 0', 'the store gave no answer for this operation', 'the store gave no answer for this operation'])
    const second = three()
    await waitFor(() => batches.length === 2, 'a second batch')
    batches[1].resolve([7, { take: 'now' }, null])
    assert.deepEqual(outcomes(await second), ['the store answered 7 for this operation, not a reply', 'ran 1', 'the store answered null for this operation, not a reply'])
    const third = three()
    await waitFor(() => batches.length === 3, 'a third batch')
    batches[2].reject(new Error('connection reset'))
    assert.deepEqual(outcomes(await third), ['connection reset', 'connection reset', 'connection reset'])
  } finally {
    await gate.close()
  }
})

test('a call that needs no store never reaches it; one that does costs one ticket', async () => {
  const client = await connect('ioredis')
  const { a } = pair(client, { register: (gate) => gate.register({ name: 'plain', handler: () => 'p' }) })
  try {
    const results = await a.gate.execute([{ name: 'nope' }, { name: 'lookup', arguments: '{bad' }, { name: 'plain' }])
    assert.deepEqual(results.map((r) => r.errorKind ?? 'ok'), ['unknown_tool', 'invalid_arguments', 'ok'])
    assert.equal(a.gate.stats().store.operations, 0)
    await a.gate.execute([{ name: 'lookup', arguments: { q: 'one' } }])
    // Its lookup (with the lease), then the entry kept with the lease let go.
    assert.equal(a.gate.stats().store.operations, 2)
  } finally {
    await a.gate.close()
  }
})

test('sessions: dedup counts, remembered approvals and rollback counts are the session\'s, whichever executor serves it', async () => {
  const client = await connect('node-redis')
  const asked = [0, 0]
  let which = 0
  const { a, b } = pair(client, {
    register: (gate) => {
      const me = which++
      gate.register({ name: 'search', readOnly: true, dedup: 'refuse', handler: ({ q }) => `found ${q}`, parameters: { type: 'object', properties: { q: { type: 'string' } } } })
      gate.register({ name: 'deploy', needsApproval: true, handler: () => 'deployed' })
      gate.register({ name: 'probe', readOnly: true, rollbackWhen: () => 'empty', handler: () => '[]' })
      gate.approve = () => {
        asked[me]++
        return { decision: 'approve', remember: 'session' }
      }
    },
  })
  const context = { sessionId: 'session-1' }
  const approve = (i) => () => {
    asked[i]++
    return { decision: 'approve', remember: 'session' }
  }
  try {
    const [first] = await a.gate.execute([{ name: 'search', arguments: { q: 'q' } }], { context })
    const [repeat] = await b.gate.execute([{ name: 'search', arguments: { q: 'q' } }], { context })
    assert.equal(first.success, true)
    assert.equal(repeat.errorKind, 'duplicate', 'the other executor saw the session\'s earlier query')
    const [elsewhere] = await b.gate.execute([{ name: 'search', arguments: { q: 'q' } }], { context: { sessionId: 'session-2' } })
    assert.equal(elsewhere.success, true)

    const [approved] = await a.gate.execute([{ name: 'deploy' }], { context, approve: approve(0) })
    const [remembered] = await b.gate.execute([{ name: 'deploy' }], { context, approve: approve(1) })
    assert.equal(approved.success, true)
    assert.equal(remembered.success, true)
    assert.deepEqual(asked, [1, 0], 'approved for the session in one executor, not asked again in the other')
    assert.match(remembered.metadata.permission.by, /approved earlier in this session/)

    const flags = []
    for (const gate of [a.gate, b.gate, a.gate, b.gate]) {
      const [r] = await gate.execute([{ name: 'probe' }], { context })
      flags.push(r.rollback !== undefined)
    }
    // maxConsecutiveRollbacks (default 3) counts across executors: the fourth flag in a row is held back.
    assert.deepEqual(flags, [true, true, true, false])
  } finally {
    await Promise.all([a.gate.close(), b.gate.close()])
  }
})

test('Redis killed mid-run: every call gets a result per its station\'s policy, and the executor recovers when it returns', async () => {
  const { own, client, end } = await ownServer()
  const { a } = pair(client, { register: (gate) => gate.register({ name: 'fetch', readOnly: true, idempotent: true, rateLimit: '1000/s', handler: () => 'fetched' }) })
  try {
    const before = await a.gate.execute([{ name: 'lookup', arguments: { q: 'k' } }, { name: 'api' }])
    assert.deepEqual(before.map((r) => [r.success, r.metadata.store]), [[true, undefined], [true, undefined]])
    await own.kill()
    const during = await a.gate.execute([{ name: 'lookup', arguments: { q: 'k' } }, { name: 'api' }, { name: 'fetch' }])
    const [cached, limited, both] = during
    assert.equal(cached.success, true, 'the cache fails open: the call ran without it')
    assert.equal(cached.cached, false)
    assert.equal(cached.metadata.store, 'unavailable')
    assert.ok(cached.metadata.storeError.length > 0)
    assert.equal(limited.success, false, 'the rate limit fails closed')
    assert.equal(limited.errorKind, 'rate_limited')
    assert.equal(limited.retryable, true)
    assert.equal(limited.retryAfterMs, 1000)
    assert.match(limited.error, /shared store that keeps its rate limit is unavailable/)
    assert.equal(limited.output, `Error (rate_limited): ${limited.error}`, 'what the model reads, as for every failure')
    assert.equal(both.errorKind, 'rate_limited', 'a cached tool with a limit: the limit decides')
    assert.equal(a.runs.lookup, 2)
    const stats = a.gate.stats().store
    assert.ok(stats.errors >= 3 && stats.unavailable >= 3, JSON.stringify(stats))
    assert.match(a.gate.prometheus(), /^toolgate_store_errors_total \d+$/m)

    await own.restart()
    for (let i = 0; client.status !== 'ready' && i < 200; i++) await sleep(25)
    const back = await a.gate.execute([{ name: 'lookup', arguments: { q: 'k' } }, { name: 'api' }])
    assert.deepEqual(back.map((r) => [r.success, r.metadata.store]), [[true, undefined], [true, undefined]], 'the store is used again')
    const [hit] = await a.gate.execute([{ name: 'lookup', arguments: { q: 'k' } }])
    assert.equal(hit.cached, true)
  } finally {
    await end(a.gate)
  }
})

test('a slow Redis (DEBUG SLEEP) past timeoutMs: calls go on or stop at the timeout, counted as timeouts', async () => {
  const client = await connect('ioredis')
  const sleeper = await connect('ioredis')
  const store = redisStore({ client, prefix: freshPrefix(), timeoutMs: 50 })
  const gate = new ToolExecutor({ store })
  gate.register({ name: 'lookup', readOnly: true, idempotent: true, handler: () => 'v' })
  gate.register({ name: 'api', readOnly: true, rateLimit: '10/s', handler: () => 'ok' })
  try {
    const slept = sleeper.call('DEBUG', 'SLEEP', '0.5')
    await asleep(await connect('ioredis'))
    const started = Date.now()
    const [cached, limited] = await gate.execute([{ name: 'lookup' }, { name: 'api' }])
    const tookMs = Date.now() - started
    assert.equal(cached.success, true)
    assert.match(cached.metadata.storeError, /no answer within 50 ms/)
    assert.equal(limited.errorKind, 'rate_limited')
    assert.equal(limited.metadata.store, 'unavailable')
    assert.ok(tookMs < 500, `answered at the store's timeout, not when Redis woke (${tookMs} ms)`)
    assert.ok(gate.stats().store.timeouts >= 1)
    await slept
    const [later] = await gate.execute([{ name: 'api' }])
    assert.equal(later.success, true)
    assert.equal(later.metadata.store, undefined)
  } finally {
    await gate.close()
  }
})

test('onError closed for the cache: the call is not run, as unavailable with a retry hint', async () => {
  const { own, client, end } = await ownServer()
  const { a } = pair(client, { onError: { cache: 'closed', rateLimit: 'open' } })
  try {
    await own.kill()
    const [cached, limited] = await a.gate.execute([{ name: 'lookup', arguments: { q: 'k' } }, { name: 'api' }])
    assert.equal(cached.errorKind, 'unavailable')
    assert.equal(cached.retryable, true)
    assert.equal(cached.retryAfterMs, 1000)
    assert.match(cached.error, /shared store its cache needs is unavailable/)
    assert.equal(a.runs.lookup, 0)
    assert.equal(limited.success, true, 'the rate limit fails open here')
    assert.equal(limited.metadata.store, 'unavailable')
  } finally {
    await end(a.gate)
  }
})

test('a wrong password: the first call says so, and nothing hangs', async () => {
  const { client, end } = await ownServer({ password: 'right', clientPassword: 'wrong' })
  const { a } = pair(client)
  try {
    await sleep(200)
    const [cached, limited] = await a.gate.execute([{ name: 'lookup', arguments: { q: 'k' } }, { name: 'api' }])
    assert.equal(cached.success, true)
    assert.match(cached.metadata.storeError, /WRONGPASS|NOAUTH|auth/i)
    assert.equal(limited.errorKind, 'rate_limited')
    assert.match(limited.error, /WRONGPASS|NOAUTH|auth/i)
  } finally {
    await end(a.gate)
  }
})

test('a result saved to this machine\'s artifact folder is not shared: another executor runs the call itself', async () => {
  const client = await connect('ioredis')
  const { a, b } = pair(client, { register: (gate) => gate.register({ name: 'dump', readOnly: true, idempotent: true, maxOutputChars: 100, handler: () => 'x'.repeat(5_000) }) })
  try {
    const [saved] = await a.gate.execute([{ name: 'dump' }])
    assert.ok(saved.metadata.artifactPath, 'the output went to an artifact')
    const [other] = await b.gate.execute([{ name: 'dump' }])
    assert.equal(other.cached, false)
    assert.notEqual(other.metadata.artifactPath, saved.metadata.artifactPath, 'its own artifact, which it can read')
  } finally {
    await Promise.all([a.gate.close(), b.gate.close()])
  }
})

test('invalidate while an identical call runs in another executor: that call keeps nothing, later calls start afresh', async () => {
  const client = await connect('ioredis')
  let price = 'v1'
  const { a, b } = pair(client, {
    register: (gate) => gate.register({ name: 'price', readOnly: true, idempotent: true, handler: async () => {
      const quoted = price
      await sleep(200)
      return quoted
    } }),
  })
  try {
    const running = a.gate.execute([{ name: 'price' }])
    await sleep(50)
    price = 'v2'
    await b.gate.invalidate('price')
    assert.equal((await running)[0].output, 'v1')
    const [later] = await b.gate.execute([{ name: 'price' }])
    assert.equal(later.output, 'v2', 'not the result computed before the invalidation')
    assert.equal(later.cached, false)
  } finally {
    await Promise.all([a.gate.close(), b.gate.close()])
  }
})

test('with Redis down, clearCache and invalidate reject for a caller that awaits them, and crash nothing for one that does not', async () => {
  const { own, client, end } = await ownServer()
  const { a } = pair(client)
  const unhandled = []
  const onUnhandled = (reason) => unhandled.push(reason)
  process.on('unhandledRejection', onUnhandled)
  try {
    await own.kill()
    for (let i = 0; client.status === 'ready' && i < 200; i++) await sleep(10)
    a.gate.clearCache()
    a.gate.invalidate('lookup')
    await assert.rejects(a.gate.invalidate('lookup'), /could not invalidate the Redis cache/)
    await sleep(50)
    assert.deepEqual(unhandled, [])
  } finally {
    process.off('unhandledRejection', onUnhandled)
    await end(a.gate)
  }
})

test('close() waits for the store\'s answers still out, so the lease a cancelled call took does not outlive it', async () => {
  const client = await connect('ioredis')
  const sleeper = await connect('ioredis')
  const prefix = freshPrefix()
  const gate = new ToolExecutor({ store: redisStore({ client, prefix, timeoutMs: 2_000 }) })
  gate.register({ name: 'lookup', readOnly: true, idempotent: true, handler: () => 'v' })
  // Asleep long enough that close() comes while the lookup waits, however loaded the machine (0.3 s was not).
  const slept = sleeper.call('DEBUG', 'SLEEP', '1')
  await asleep(await connect('ioredis'))
  const turn = gate.execute([{ name: 'lookup' }])
  await sleep(20)
  await gate.close()
  const [r] = await turn
  assert.equal(r.errorKind, 'cancelled')
  await slept
  const [, keys] = await client.scan('0', 'MATCH', `${prefix}*`, 'COUNT', '1000')
  assert.deepEqual(keys.filter((k) => k.includes('}l:')), [], 'the lease its late answer took was let go before close() resolved')
})

test('invalidate on a node-redis cluster client that is not connected yet rejects rather than report nothing dropped', async () => {
  const idle = createCluster({ rootNodes: cluster.nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })) }).on('error', () => {})
  const store = redisStore({ client: idle, prefix: freshPrefix() })
  await assert.rejects(store.invalidate(''), /could not invalidate the Redis cache: the Redis client is not connected/)
})

test('close({ timeoutMs }) keeps to one deadline for handlers still running and store answers still out', async () => {
  const client = await connect('ioredis')
  const sleeper = await connect('ioredis')
  const gate = new ToolExecutor({ store: redisStore({ client, prefix: freshPrefix(), timeoutMs: 5_000 }) })
  gate.register({ name: 'stuck', readOnly: true, handler: () => new Promise(() => {}) })
  gate.register({ name: 'lookup', readOnly: true, idempotent: true, handler: () => 'v' })
  void gate.execute([{ name: 'stuck' }])
  await sleep(20)
  const slept = sleeper.call('DEBUG', 'SLEEP', '3')
  await asleep(await connect('ioredis'))
  void gate.execute([{ name: 'lookup' }])
  await sleep(20)
  const started = Date.now()
  const { stillRunning } = await gate.close({ timeoutMs: 1_000 })
  const tookMs = Date.now() - started
  assert.equal(stillRunning.length, 1)
  assert.ok(tookMs < 1_800, `close took ${tookMs} ms: its one deadline is 1,000 ms, not one per wait`)
  await slept
})
