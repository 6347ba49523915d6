'use strict'
// Several processes behind one Redis (a real redis-server on a free port, started here): one rate limit, one
// cache, one single flight, whatever process a call lands on.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { fork } = require('node:child_process')
const { startRedis } = require('./redis/servers.js')

let server
before(async () => {
  server = await startRedis()
})
after(() => server?.stop())

/** A worker process (redis/worker.js) and a way to ask it things. */
async function worker() {
  const child = fork(path.join(__dirname, 'redis', 'worker.js'), [String(server.port)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const waiting = new Map()
  let next = 1
  child.on('message', (message) => {
    const resolve = waiting.get(message.id)
    waiting.delete(message.id)
    resolve?.(message)
  })
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
  exited.then(() => {
    for (const resolve of waiting.values()) resolve({ error: 'the worker exited' })
  })
  await new Promise((resolve) => child.once('message', resolve))
  const ask = async (what, args = {}) => {
    const id = next++
    const answer = new Promise((resolve) => waiting.set(id, resolve))
    child.send({ id, do: what, ...args })
    const reply = await answer
    if (reply.error) throw new Error(`worker ${child.pid}: ${reply.error}`)
    return reply
  }
  await ask('ready')
  return { child, ask, exited, stop: () => (child.connected ? child.disconnect() : undefined) }
}

const fleet = (n) => Promise.all(Array.from({ length: n }, worker))
const stopAll = (workers) => Promise.all(workers.map(async (w) => {
  w.stop()
  await w.exited
}))

test('8 processes x 10,000 calls against one bucket of 1,000 (refilling 1,000/min) admit no more than it holds', async () => {
  const workers = await fleet(8)
  try {
    const started = Date.now()
    const answers = await Promise.all(workers.map((w) => w.ask('limit', { calls: 10_000, batch: 200 })))
    const elapsedS = (Date.now() - started) / 1000
    const admitted = answers.reduce((n, a) => n + a.admitted, 0)
    const refused = answers.reduce((n, a) => n + a.refused, 0)
    assert.deepEqual(answers.map((a) => a.otherCount), Array(8).fill(0), `only successes and rate_limited: ${JSON.stringify(answers.map((a) => a.other))}`)
    assert.equal(admitted + refused, 80_000)
    // The bucket starts full and refills 1,000/min on the server's clock for as long as the run takes, no more.
    const most = 1_000 + Math.ceil(elapsedS * 1_000 / 60)
    assert.ok(admitted <= most, `admitted ${admitted}, at most ${most} in ${elapsedS} s`)
    assert.ok(admitted >= 990, `admitted ${admitted}: every token the bucket held was used`)
  } finally {
    await stopAll(workers)
  }
})

test('4 processes share one session\'s budgets exactly: 150 calls, and a cost budget of 100 at 2.5 a call', async () => {
  const workers = await fleet(4)
  try {
    const sum = (answers, key) => answers.reduce((n, a) => n + a[key], 0)
    const calls = await Promise.all(workers.map((w) => w.ask('budget', { calls: 100, batch: 25, context: { sessionId: 'fleet-calls' } })))
    assert.deepEqual(calls.map((a) => a.otherCount), [0, 0, 0, 0], JSON.stringify(calls.map((a) => a.other)))
    assert.deepEqual([sum(calls, 'admitted'), sum(calls, 'refused')], [150, 250], 'exactly the 150 calls of the budget ran')
    const context = { sessionId: 'fleet-cost', budget: { maxCost: 100 } }
    const cost = await Promise.all(workers.map((w) => w.ask('budget', { calls: 30, batch: 10, context })))
    assert.deepEqual(cost.map((a) => a.otherCount), [0, 0, 0, 0], JSON.stringify(cost.map((a) => a.other)))
    assert.deepEqual([sum(cost, 'admitted'), sum(cost, 'refused')], [40, 80], '40 calls of 2.5 make 100')
  } finally {
    await stopAll(workers)
  }
})

test('a result cached by one process is a hit in the others, and invalidate in one is seen by all', async () => {
  const [a, b, c] = await fleet(3)
  try {
    const first = await a.ask('call', { name: 'lookup', args: { q: 'shared' } })
    assert.equal(first.success, true)
    assert.equal(first.cached, false)
    for (const other of [b, c]) {
      const again = await other.ask('call', { name: 'lookup', args: { q: 'shared' } })
      assert.equal(again.cached, true, 'answered from the entry the first process wrote')
      assert.equal(again.output, first.output)
      assert.equal(again.runs, 0, 'its own handler never ran')
    }
    assert.equal((await b.ask('invalidate', { name: 'lookup' })).dropped, 1)
    const after = await c.ask('call', { name: 'lookup', args: { q: 'shared' } })
    assert.equal(after.cached, false, 'the entry is gone for every process')
    assert.equal(after.runs, 1)
    assert.match(after.output, new RegExp(`from ${c.child.pid}$`))
  } finally {
    await stopAll([a, b, c])
  }
})

test('8 processes calling the same idempotent key at once run its handler exactly once', async () => {
  const workers = await fleet(8)
  try {
    const answers = await Promise.all(workers.map((w) => w.ask('call', { name: 'lookup', args: { q: 'stampede' } })))
    assert.ok(answers.every((r) => r.success), JSON.stringify(answers))
    assert.equal(new Set(answers.map((r) => r.output)).size, 1, 'every process got the one result')
    assert.equal(answers.reduce((n, r) => n + r.runs, 0), 1, 'one handler ran in the whole fleet')
  } finally {
    await stopAll(workers)
  }
})

test('a leader killed with SIGKILL while holding the lease: a waiter takes over once the lease ends', async () => {
  const [leader, waiter] = await fleet(2)
  try {
    await leader.ask('hang')
    const led = leader.ask('call', { name: 'hold' }).catch(() => 'killed')
    // The leader's handler is running (its lease taken) before the waiter asks.
    await new Promise((resolve) => setTimeout(resolve, 300))
    const waited = waiter.ask('call', { name: 'hold' })
    await new Promise((resolve) => setTimeout(resolve, 200))
    leader.child.kill('SIGKILL')
    await leader.exited
    assert.equal(await led, 'killed')
    const r = await waited
    assert.equal(r.success, true, JSON.stringify(r))
    assert.equal(r.runs, 1, 'the waiter ran the handler itself, after the dead leader\'s lease ended')
    assert.match(r.output, new RegExp(`ran in ${waiter.child.pid}`))
  } finally {
    await stopAll([leader, waiter])
  }
})
