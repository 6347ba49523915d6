'use strict'
// The Redis store alone (no engine) against real redis-server processes, nothing mocked: one node and a cluster
// of three masters, each through ioredis and through node-redis. The ops' semantics, the keys they leave (TTLs),
// the NOSCRIPT fallback, invalidation across slots, outages, a wrong password and the programmer errors.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { createHash } = require('node:crypto')
const Redis = require('ioredis')
const { createClient, createCluster, RESP_TYPES } = require('redis')
const { redisStore } = require('../lib/stores/redis.js')
const { startRedis, startCluster, assertRedisServer } = require('./redis/servers.js')

assertRedisServer()

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const ignore = () => {}

async function until(what, check) {
  for (let waited = 0; !(await check()); waited += 10) {
    if (waited > 10_000) throw new Error(`timed out waiting until ${what}`)
    await sleep(10)
  }
}

/** One server of each shape for the whole file, started on first use. */
const memo = (start) => {
  let started = null
  return { get: () => (started ??= start()), stop: async () => (await started)?.stop() }
}
const servers = { single: memo(() => startRedis()), cluster: memo(() => startCluster()) }

const clients = []
// Clients first (a client left open keeps reconnecting, and the process alive), then servers; each whatever the
// others do, so that a failed start leaves nothing behind.
after(async () => {
  await Promise.allSettled(clients.map(async (client) => client.destroy?.() ?? client.disconnect()))
  await Promise.allSettled(Object.values(servers).map((server) => server.stop()))
})
/** Tracks a client to close at the end; errors are expected (outages), so they are listened to. */
const track = (client) => {
  client.on('error', ignore)
  clients.push(client)
  return client
}

async function ioredisSingle(options = {}) {
  const client = track(new Redis({ port: (await servers.single.get()).port, lazyConnect: true, ...options }))
  await client.connect()
  return client
}
async function nodeRedisSingle(url) {
  const client = track(createClient({ url: url ?? (await servers.single.get()).url }))
  await client.connect()
  return client
}

/** The four kinds of client, and what a test needs beside the store: a raw command (routed by its key in a
 * cluster), and one function per master for commands every master must run. */
const KINDS = [
  {
    name: 'ioredis',
    connect: ioredisSingle,
    raw: (client, _key, args) => client.call(...args),
    masters: async (client) => [(args) => client.call(...args)],
  },
  {
    name: 'ioredis cluster',
    cluster: true,
    async connect(options = {}) {
      const client = track(new Redis.Cluster((await servers.cluster.get()).nodes, { lazyConnect: true, ...options }))
      await client.connect()
      return client
    },
    raw: (client, _key, args) => client.call(...args),
    masters: async (client) => client.nodes('master').map((node) => (args) => node.call(...args)),
  },
  {
    name: 'node-redis',
    connect: () => nodeRedisSingle(),
    raw: (client, _key, args) => client.sendCommand(args),
    masters: async (client) => [(args) => client.sendCommand(args)],
  },
  {
    name: 'node-redis cluster',
    cluster: true,
    async connect() {
      const { nodes } = await servers.cluster.get()
      const client = track(createCluster({ rootNodes: nodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })) }))
      await client.connect()
      return client
    },
    raw: (client, key, args) => client.sendCommand(key, false, args),
    masters: async (client) => (await Promise.all(client.masters.map((m) => client.nodeClient(m)))).map((node) => (args) => node.sendCommand(args)),
  },
]

let unique = 0
const fresh = (name) => `${name}-${process.pid}-${++unique}`
const TTL = 60_000

for (const kind of KINDS) {
  describe(`redisStore over ${kind.name}`, () => {
    const prefix = `test:${kind.name.replace(' ', '-')}:`
    let client
    let store
    let raw
    const one = async (op) => (await store.run([op]))[0]
    const sessionKey = (session) => `${prefix}{s:${session}}`
    const cacheKeys = (key, storePrefix = prefix) => {
      const tag = `${storePrefix}{c:${createHash('sha1').update(key).digest('hex').slice(0, 16)}}`
      return { entry: `${tag}e:${key}`, lease: `${tag}l:${key}` }
    }

    before(async () => {
      client = await kind.connect()
      store = redisStore({ client, prefix, timeoutMs: 5_000 })
      raw = (key, ...args) => kind.raw(client, key, args.map(String))
    })

    it('is a frozen plain object with the defaults filled in', () => {
      assert.ok(Object.isFrozen(store))
      assert.equal(store.kind, 'redis')
      assert.equal(store.prefix, prefix)
      assert.equal(store.timeoutMs, 5_000)
      assert.equal(store.maxEntryBytes, 1_048_576)
      assert.deepEqual(store.onError, { cache: 'open', dedup: 'open', rateLimit: 'closed', sessions: 'open', budget: 'closed', breaker: 'open' })
    })

    it('count: counts each dedup key, gives the count back on refuse, reads what was kept and the rollbacks', async () => {
      const session = fresh('s')
      const count = (extra) => one({ op: 'count', session, ttlMs: TTL, refuse: false, reuse: true, rollbacks: true, ...extra })
      assert.deepEqual(await count({ key: 'k' }), { earlier: 0, reused: null, rollbacks: 0 })
      assert.deepEqual(await one({ op: 'keep', session, key: 'k', value: '{"kept":1}', ttlMs: TTL }), {})
      assert.deepEqual(await count({ key: 'k' }), { earlier: 1, reused: '{"kept":1}', rollbacks: 0 })
      assert.deepEqual(await count({ key: 'k', reuse: false, rollbacks: false }), { earlier: 2, reused: null, rollbacks: null })
      // Refused repeats do not count: the next call sees the same number.
      assert.deepEqual(await count({ key: 'k', refuse: true }), { earlier: 3, reused: '{"kept":1}', rollbacks: 0 })
      assert.deepEqual(await count({ key: 'k', refuse: true }), { earlier: 3, reused: '{"kept":1}', rollbacks: 0 })
      // A first call refused keeps its count: nothing earlier to refuse it for.
      assert.deepEqual(await count({ key: 'new', refuse: true }), { earlier: 0, reused: null, rollbacks: 0 })
      assert.deepEqual(await count({ key: 'new' }), { earlier: 1, reused: null, rollbacks: 0 })
      assert.deepEqual(await count({ rollbacks: false }), { earlier: 0, reused: null, rollbacks: null })
      for (const flagged of [true, true, true]) assert.deepEqual(await one({ op: 'rollbacks', session, flagged, ttlMs: TTL }), {})
      assert.deepEqual(await count({}), { earlier: 0, reused: null, rollbacks: 3 }, 'each flag adds one')
      await one({ op: 'rollbacks', session, flagged: false, ttlMs: TTL })
      assert.deepEqual(await count({}), { earlier: 0, reused: null, rollbacks: 0 }, 'a result not flagged ends the run')
      const pttl = Number(await raw(sessionKey(session), 'PTTL', sessionKey(session)))
      assert.ok(pttl > 0 && pttl <= TTL, `the session's PTTL is ${pttl}`)
    })

    it('uncount: takes one back, never below zero, and creates no counter', async () => {
      const session = fresh('s')
      await one({ op: 'count', session, key: 'k', ttlMs: TTL, refuse: false, reuse: false, rollbacks: false })
      await one({ op: 'count', session, key: 'k', ttlMs: TTL, refuse: false, reuse: false, rollbacks: false })
      assert.deepEqual(await one({ op: 'uncount', session, key: 'k' }), {})
      assert.equal(String(await raw(sessionKey(session), 'HGET', sessionKey(session), 'd:k')), '1')
      await one({ op: 'uncount', session, key: 'k' })
      await one({ op: 'uncount', session, key: 'k' })
      assert.equal(String(await raw(sessionKey(session), 'HGET', sessionKey(session), 'd:k')), '0')
      assert.deepEqual(await one({ op: 'uncount', session, key: 'never' }), {})
      assert.equal(Number(await raw(sessionKey(session), 'HEXISTS', sessionKey(session), 'd:never')), 0)
    })

    it('maxSessionKeys: a full session counts, keeps and remembers nothing new, but still records rollbacks', async () => {
      const small = redisStore({ client, prefix, timeoutMs: 5_000, maxSessionKeys: 3 })
      const session = fresh('s')
      const count = async (key) => (await small.run([{ op: 'count', session, key, ttlMs: TTL, refuse: false, reuse: true, rollbacks: false }]))[0]
      for (const key of ['a', 'b', 'c']) assert.equal((await count(key)).earlier, 0)
      assert.equal((await count('d')).earlier, 0)
      assert.equal((await count('d')).earlier, 0, 'a key past the cap is never recorded')
      assert.equal((await count('a')).earlier, 1, 'a key already there still counts')
      const [keep, remember, rollbacks] = await small.run([
        { op: 'keep', session, key: 'd', value: 'v', ttlMs: TTL },
        { op: 'remember', session, field: 'tool', ttlMs: TTL },
        { op: 'rollbacks', session, flagged: true, ttlMs: TTL },
      ])
      assert.deepEqual([keep, remember, rollbacks], [{ skipped: true }, { skipped: true }, {}])
      assert.equal(Number(await raw(sessionKey(session), 'HLEN', sessionKey(session))), 4)
    })

    it('remember and remembered', async () => {
      const session = fresh('s')
      assert.deepEqual(await one({ op: 'remembered', session, field: 'delete_file' }), { remembered: false })
      assert.deepEqual(await one({ op: 'remember', session, field: 'delete_file', ttlMs: TTL }), {})
      assert.deepEqual(await one({ op: 'remembered', session, field: 'delete_file' }), { remembered: true })
      assert.deepEqual(await one({ op: 'remembered', session, field: 'other' }), { remembered: false })
      const pttl = Number(await raw(sessionKey(session), 'PTTL', sessionKey(session)))
      assert.ok(pttl > 0 && pttl <= TTL, `the session's PTTL is ${pttl}`)
    })

    it('lookup: a miss elects one owner by lease; the others see it held; the owner renews it', async () => {
      const key = fresh('tool\u001f{"a":[1,"}"]}')
      const { lease } = cacheKeys(key)
      assert.deepEqual(await one({ op: 'lookup', key }), { value: null })
      assert.deepEqual(await one({ op: 'lookup', key, owner: 'A', leaseMs: 10_000 }), { value: null, lease: 'taken' })
      const held = await one({ op: 'lookup', key, owner: 'B', leaseMs: 10_000 })
      assert.equal(held.lease, 'held')
      assert.ok(held.leaseLeftMs > 0 && held.leaseLeftMs <= 10_000, `leaseLeftMs ${held.leaseLeftMs}`)
      assert.deepEqual(held, { value: null, lease: 'held', leaseLeftMs: held.leaseLeftMs })
      assert.deepEqual(await one({ op: 'lookup', key, owner: 'A', leaseMs: 30_000 }), { value: null, lease: 'taken' })
      assert.ok(Number(await raw(lease, 'PTTL', lease)) > 10_000, "the owner's lookup renewed its lease")
      assert.equal(await raw(lease, 'GET', lease), 'A')
    })

    it('put: stores with a TTL and releases only its own lease; release likewise', async () => {
      const key = fresh('k')
      const { entry, lease } = cacheKeys(key)
      await one({ op: 'lookup', key, owner: 'A', leaseMs: 10_000 })
      assert.deepEqual(await one({ op: 'put', key, value: 'by B', ttlMs: TTL, owner: 'B' }), { skipped: true }, 'B holds no lease: its result is not written')
      assert.equal(await raw(lease, 'GET', lease), 'A', "B's put left A's lease alone")
      assert.equal(await raw(entry, 'EXISTS', entry), 0)
      assert.deepEqual(await one({ op: 'put', key, value: 'by A', ttlMs: TTL, owner: 'A' }), {})
      assert.equal(await raw(lease, 'EXISTS', lease), 0)
      assert.deepEqual(await one({ op: 'lookup', key, owner: 'C', leaseMs: 10_000 }), { value: 'by A' })
      const pttl = Number(await raw(entry, 'PTTL', entry))
      assert.ok(pttl > 0 && pttl <= TTL, `the entry's PTTL is ${pttl}`)

      const other = fresh('k')
      await one({ op: 'lookup', key: other, owner: 'A', leaseMs: 10_000 })
      assert.deepEqual(await one({ op: 'release', key: other, owner: 'B' }), {})
      assert.equal(await raw(cacheKeys(other).lease, 'GET', cacheKeys(other).lease), 'A')
      assert.deepEqual(await one({ op: 'release', key: other, owner: 'A' }), {})
      assert.equal(await raw(cacheKeys(other).lease, 'EXISTS', cacheKeys(other).lease), 0)
      assert.deepEqual(await one({ op: 'put', key: other, value: 'no owner', ttlMs: TTL }), {})
      assert.deepEqual(await one({ op: 'lookup', key: other }), { value: 'no owner' })
    })

    it('put and keep: a value over maxEntryBytes (in UTF-8 bytes) is skipped, the lease still released', async () => {
      const small = redisStore({ client, prefix, timeoutMs: 5_000, maxEntryBytes: 10 })
      const key = fresh('k')
      const session = fresh('s')
      await one({ op: 'lookup', key, owner: 'A', leaseMs: 10_000 })
      const replies = await small.run([
        { op: 'put', key, value: 'é'.repeat(6), ttlMs: TTL, owner: 'A' }, // 6 characters, 12 bytes
        { op: 'put', key: fresh('k'), value: 'x'.repeat(11), ttlMs: TTL },
        { op: 'keep', session, key: 'k', value: 'x'.repeat(11), ttlMs: TTL },
        { op: 'put', key: fresh('k'), value: 'x'.repeat(10), ttlMs: TTL },
      ])
      assert.deepEqual(replies, [{ skipped: true }, { skipped: true }, { skipped: true }, {}])
      // What is left is an empty entry: no result, and no reason for identical calls elsewhere to wait for one.
      assert.equal(await raw(cacheKeys(key).entry, 'GET', cacheKeys(key).entry), '')
      assert.equal(await raw(cacheKeys(key).lease, 'EXISTS', cacheKeys(key).lease), 0, 'the skipped put released its lease')
    })

    it('take: a bucket of 2 refilling 1/s answers now, after (reserving, so takers queue) and refused', async () => {
      const key = fresh('b')
      const take = (maxWaitMs) => ({ op: 'take', key, capacity: 2, refillPerSec: 1, maxWaitMs })
      const replies = await store.run([take(0), take(0), take(0), take(1_500), take(1_500), take(5_000)])
      assert.deepEqual(replies.map((r) => r.take), ['now', 'now', 'refused', 'after', 'refused', 'after'])
      assert.deepEqual(Object.keys(replies[0]), ['take'])
      const waits = replies.slice(2).map((r) => r.waitMs)
      // Empty: about 1 s to the next token; one reserved: about 2 s (the refill since shaves a little off; the
      // margin is wide so that a slow machine passes, and still tells 1 s from 2 s).
      const near = (actual, expected) => actual > expected - 500 && actual <= expected
      assert.ok(near(waits[0], 1_000) && near(waits[1], 1_000) && near(waits[2], 2_000) && near(waits[3], 2_000), `waits ${waits}`)
      const bucket = `${prefix}{b:${key}}`
      const pttl = Number(await raw(bucket, 'PTTL', bucket))
      // Tokens at -2: full again after 4 s, plus a second.
      assert.ok(pttl > 0 && pttl <= 5_000, `the bucket's PTTL is ${pttl}`)

      assert.deepEqual(await one({ op: 'refund', key, capacity: 2 }), {})
      const after = await one(take(0))
      assert.equal(after.take, 'refused')
      assert.ok(near(after.waitMs, 2_000), `after a refund the wait is ${after.waitMs}, not about 3000`)
    })

    it('refund: never above capacity, and nothing for a bucket that is gone', async () => {
      const key = fresh('b')
      const bucket = `${prefix}{b:${key}}`
      await one({ op: 'take', key, capacity: 2, refillPerSec: 1, maxWaitMs: 0 })
      await store.run([{ op: 'refund', key, capacity: 2 }, { op: 'refund', key, capacity: 2 }])
      assert.equal(Number(await raw(bucket, 'HGET', bucket, 'tokens')), 2)
      const gone = fresh('b')
      assert.deepEqual(await one({ op: 'refund', key: gone, capacity: 2 }), {})
      assert.equal(await raw(`${prefix}{b:${gone}}`, 'EXISTS', `${prefix}{b:${gone}}`), 0)
    })

    it('NOSCRIPT: after SCRIPT FLUSH every op runs again by EVAL', async () => {
      const key = fresh('k')
      const session = fresh('s')
      const ops = [
        { op: 'put', key, value: 'v', ttlMs: TTL },
        { op: 'count', session, key: 'k', ttlMs: TTL, refuse: false, reuse: false, rollbacks: false },
        { op: 'take', key, capacity: 2, refillPerSec: 1, maxWaitMs: 0 },
      ]
      assert.deepEqual(await store.run(ops), [{}, { earlier: 0, reused: null, rollbacks: null }, { take: 'now' }])
      for (const master of await kind.masters(client)) assert.equal(String(await master(['SCRIPT', 'FLUSH'])), 'OK')
      assert.deepEqual(await store.run(ops), [{}, { earlier: 1, reused: null, rollbacks: null }, { take: 'now' }])
      assert.deepEqual(await store.run([{ op: 'lookup', key }]), [{ value: 'v' }])
    })

    it('runs a batch of 200 mixed ops in one run(), one reply each, in order', async () => {
      const tag = fresh('batch')
      const ops = Array.from({ length: 200 }, (_, i) => [
        { op: 'put', key: `${tag}:${i}`, value: `v${i}`, ttlMs: TTL },
        { op: 'take', key: `${tag}:${i}`, capacity: 2, refillPerSec: 1, maxWaitMs: 0 },
        { op: 'count', session: `${tag}:${i}`, key: 'k', ttlMs: TTL, refuse: false, reuse: false, rollbacks: true },
        { op: 'lookup', key: `${tag}:missing:${i}` },
        { op: 'remember', session: `${tag}:${i}`, field: 'f', ttlMs: TTL },
      ][i % 5])
      const replies = await store.run(ops)
      const expected = [{}, { take: 'now' }, { earlier: 0, reused: null, rollbacks: 0 }, { value: null }, {}]
      assert.deepEqual(replies, ops.map((_, i) => expected[i % 5]))
      const lookups = await store.run(ops.filter((op) => op.op === 'put').map(({ key }) => ({ op: 'lookup', key })))
      assert.deepEqual(lookups, ops.filter((op) => op.op === 'put').map(({ value }) => ({ value })))
    })

    it('invalidate: deletes the entries whose cache key starts with the prefix, in every slot; then all with ""', async () => {
      const own = `${prefix}inv-${++unique}:`
      const inv = redisStore({ client, prefix: own, timeoutMs: 5_000 })
      const neighbour = redisStore({ client, prefix: `${own}x:`, timeoutMs: 5_000 })
      const keys = ['user:1:a', 'user:1:b', 'user:1:c', 'user:2:a', 'x}e:user:1:z', 'gl*b?[x]\\1', 'glAb?[x]\\1', 'other']
      const put = (target, key) => target.run([{ op: 'put', key, value: key, ttlMs: TTL }])
      for (const key of keys) await put(inv, key)
      await put(neighbour, 'user:1:a')
      if (kind.cluster) {
        const slots = new Set(await Promise.all(keys.map((key) => raw(undefined, 'CLUSTER', 'KEYSLOT', cacheKeys(key, own).entry))))
        assert.ok(slots.size > 1, 'the entries lie in several slots')
      }
      const present = async (target, list) => (await target.run(list.map((key) => ({ op: 'lookup', key })))).map((r) => r.value !== null)
      // A lease taken for a key under the prefix goes with the entries (uncounted), so its holder keeps nothing.
      await inv.run([{ op: 'lookup', key: 'user:1:d', owner: 'A', leaseMs: 10_000 }])
      assert.equal(await inv.invalidate('user:1:'), 3)
      assert.deepEqual(await present(inv, keys), [false, false, false, true, true, true, true, true])
      assert.equal(await raw(cacheKeys('user:1:d', own).lease, 'EXISTS', cacheKeys('user:1:d', own).lease), 0)
      assert.deepEqual(await inv.run([{ op: 'put', key: 'user:1:d', value: 'stale', ttlMs: TTL, owner: 'A' }]), [{ skipped: true }])
      assert.deepEqual(await present(inv, ['user:1:d']), [false], 'a flight that was invalidated keeps nothing')
      assert.equal(await inv.invalidate('gl*b?[x]\\'), 1, 'the glob characters of the prefix match themselves only')
      assert.deepEqual(await present(inv, keys), [false, false, false, true, true, false, true, true])
      assert.equal(await inv.invalidate('nothing'), 0)
      assert.equal(await inv.invalidate(''), 4)
      assert.deepEqual(await present(inv, keys), keys.map(() => false))
      assert.deepEqual(await present(neighbour, ['user:1:a']), [true], "another store's prefix is untouched")
      await assert.rejects(inv.invalidate(7), { name: 'TypeError', message: /prefix must be a string/ })
    })

    if (kind.name.startsWith('ioredis')) {
      it('an ioredis keyPrefix: the keys carry it, and invalidate finds and deletes them', async () => {
        const keyPrefix = `app-${++unique}:`
        const prefixed = redisStore({ client: await kind.connect({ keyPrefix }), prefix, timeoutMs: 5_000 })
        const key = fresh('k')
        assert.deepEqual(await prefixed.run([{ op: 'put', key, value: 'v', ttlMs: TTL }, { op: 'lookup', key }]), [{}, { value: 'v' }])
        assert.equal(await raw(keyPrefix + cacheKeys(key).entry, 'EXISTS', keyPrefix + cacheKeys(key).entry), 1)
        assert.equal(await prefixed.invalidate(key), 1)
        assert.deepEqual(await prefixed.run([{ op: 'lookup', key }]), [{ value: null }])
      })
    } else {
      it('a client that maps RESP strings to Buffers still gets strings in the replies', async () => {
        const buffers = redisStore({ client: client.withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer }), prefix, timeoutMs: 5_000 })
        const key = fresh('k')
        const session = fresh('s')
        await buffers.run([{ op: 'put', key, value: 'v', ttlMs: TTL }, { op: 'keep', session, key: 'k', value: 'kept', ttlMs: TTL }])
        const ops = [
          { op: 'lookup', key },
          { op: 'count', session, key: 'k', ttlMs: TTL, refuse: false, reuse: true, rollbacks: false },
          { op: 'count', session, key: 'k', ttlMs: TTL, refuse: false, reuse: true, rollbacks: false },
          { op: 'take', key, capacity: 1, refillPerSec: 1, maxWaitMs: 0 },
          { op: 'take', key, capacity: 1, refillPerSec: 1, maxWaitMs: 0 },
        ]
        const replies = await buffers.run(ops)
        assert.deepEqual(replies.slice(0, 4), [{ value: 'v' }, { earlier: 0, reused: null, rollbacks: null }, { earlier: 1, reused: 'kept', rollbacks: null }, { take: 'now' }])
        assert.equal(replies[4].take, 'refused')
        assert.equal(typeof replies[4].waitMs, 'number')
        assert.equal(await buffers.invalidate(key), 1)
      })
    }

    it('breakers: garbage under a breaker key reads as a closed breaker with no history, and is dropped', async () => {
      const config = { halfOpenCalls: 1, openMs: 1_000, ttlMs: TTL }
      const admit = (key) => one({ op: 'breakerAdmit', key, trialWaitMs: 5_000, ...config })
      const record = (key, outcome) => one({
        op: 'breakerRecord', key, admission: 'counted', generation: 0, outcome, failureRate: 0.5, minCalls: 2, windowMs: 10_000, ...config,
      })
      const breakerKey = (tool) => `${prefix}{k:${tool}}`
      // What the scripts write themselves still holds: two failures open it for openMs, and it refuses meanwhile.
      const tool = fresh('t')
      assert.equal((await record(tool, 'failure')).phase, 'closed')
      const opened = await record(tool, 'failure')
      assert.deepEqual([opened.phase, opened.from, opened.calls, opened.failures], ['open', 'closed', 2, 2])
      const refused = await admit(tool)
      assert.deepEqual([refused.admit, refused.phase], ['refused', 'open'])
      assert.ok(refused.waitMs > 0 && refused.waitMs <= 1_000, `waitMs ${refused.waitMs}`)

      const week = 7 * 24 * 3600 * 1000
      const inAWeek = String(Date.now() + week)
      const garbage = [
        ['an opening that ends past the openMs it was written with', ['HSET', 'phase', 'open', 'until', inAWeek, 'oms', '1000', 'gen', '3']],
        ['an opening that does not say its openMs', ['HSET', 'phase', 'open', 'until', inAWeek, 'gen', '3']],
        ['an openMs past a century', ['HSET', 'phase', 'open', 'until', inAWeek, 'oms', String(101 * 365 * 24 * 3600 * 1000)]],
        ['an opening 17 digits long', ['HSET', 'phase', 'open', 'until', '99999999999999999']],
        ['an opening with no end', ['HSET', 'phase', 'open']],
        ['an end that is no number', ['HSET', 'phase', 'open', 'until', 'soon']],
        ['an end in exponent form', ['HSET', 'phase', 'open', 'until', '1e400']],
        ['more trials out than the halfOpenCalls it was written with', ['HSET', 'phase', 'half_open', 'gen', '1', 'adm', '999', 'hoc', '1']],
        ['a half-open phase that does not say its halfOpenCalls', ['HSET', 'phase', 'half_open', 'gen', '1', 'adm', '0']],
        ['a negative generation', ['HSET', 'phase', 'half_open', 'gen', '-1']],
        ['a phase it does not know', ['HSET', 'phase', 'stuck']],
        ['a window cell that is no count', ['HSET', 's3', '1:0:many']],
        ['a count past 15 digits', ['HSET', 's0', '1:0:1234567890123456']],
        ['a string', ['SET', 'open']],
        ['a list', ['RPUSH', 'open']],
      ]
      for (const [what, [command, ...args]] of garbage) {
        const admitted = fresh('t')
        await raw(breakerKey(admitted), command, breakerKey(admitted), ...args)
        const reply = await admit(admitted)
        assert.deepEqual([reply.admit, reply.phase, reply.waitMs], ['counted', 'closed', 0], what)
        assert.equal(Number(await raw(breakerKey(admitted), 'EXISTS', breakerKey(admitted))), 0, `${what}: dropped`)

        const recorded = fresh('t')
        await raw(breakerKey(recorded), command, breakerKey(recorded), ...args)
        const after = await record(recorded, 'failure')
        assert.deepEqual([after.phase, after.from, after.waitMs], ['closed', undefined, 0], what)
        const left = (await raw(breakerKey(recorded), 'HVALS', breakerKey(recorded))).map(String)
        assert.equal(left.length, 1, `${what}: one window cell left, ${left}`)
        assert.match(left[0], /^\d+:0:1$/, `${what}: the failure just counted, alone`)
      }
      // What another process's settings give is no garbage: its week-long opening holds, and so do its trials.
      const openedElsewhere = fresh('t')
      await raw(breakerKey(openedElsewhere), 'HSET', breakerKey(openedElsewhere), 'phase', 'open', 'until', inAWeek, 'oms', String(week))
      const held = await admit(openedElsewhere)
      assert.deepEqual([held.admit, held.phase], ['refused', 'open'])
      assert.ok(held.waitMs > week - 60_000, `waitMs ${held.waitMs}`)
      const trialsElsewhere = fresh('t')
      await raw(breakerKey(trialsElsewhere), 'HSET', breakerKey(trialsElsewhere), 'phase', 'half_open', 'gen', '1', 'adm', '5', 'hoc', '9')
      const busy = await admit(trialsElsewhere)
      assert.deepEqual([busy.admit, busy.phase], ['refused', 'half_open'])
    })

    if (kind.cluster) {
      it('a paused master: the others\' replies are told as they come, and only the ops left on it are in flight', { timeout: 20_000 }, async () => {
        const { ports, kill } = await servers.cluster.get()
        const slots = await raw(undefined, 'CLUSTER', 'SLOTS')
        const portOf = async (key) => {
          const slot = Number(await raw(undefined, 'CLUSTER', 'KEYSLOT', `${prefix}{b:${key}}`))
          return Number(slots.find(([first, last]) => slot >= Number(first) && slot <= Number(last))[2][1])
        }
        const [paused, live] = [[], []]
        while (paused.length < 2 || live.length < 4) {
          const key = fresh('b')
          ;((await portOf(key)) === ports[0] ? paused : live).push(key)
        }
        const take = (key) => ({ op: 'take', key, capacity: 5, refillPerSec: 1, maxWaitMs: 0 })
        const ops = [...paused, ...live].map(take)
        const small = redisStore({ client, prefix, timeoutMs: 5_000, maxInFlight: ops.length })
        const told = []
        let batch
        await kill(ports[0], 'SIGSTOP')
        try {
          batch = small.run(ops, (at, reply) => told.push([at, reply]))
          await until('the live masters answered', () => told.length === live.length)
          assert.deepEqual(told.map(([at]) => at).sort((x, y) => x - y), live.map((_, i) => paused.length + i))
          assert.ok(told.every(([, reply]) => reply.take === 'now'))
          // Still out: the ops on the paused master alone, so there is room for as many more as answered.
          assert.deepEqual(await small.run(live.map(take)), live.map(() => ({ take: 'now' })))
        } finally {
          await kill(ports[0], 'SIGCONT')
        }
        assert.deepEqual(await batch, ops.map(() => ({ take: 'now' })))
        assert.equal(told.length, ops.length, 'each reply told once')
      })
    }

    it('answers an unknown op with an error reply, not a throw', async () => {
      const replies = await store.run([{ op: 'frobnicate' }, { op: 'lookup', key: fresh('k') }, null])
      assert.match(replies[0].error, /^unknown store op "frobnicate"/)
      assert.deepEqual(replies[1], { value: null })
      assert.match(replies[2].error, /^unknown store op/)
    })
  })
}

describe('redisStore when Redis is down or refuses the client', () => {
  let server
  before(async () => {
    server = await startRedis()
  })
  after(() => server?.stop())

  const SINGLE = [
    ['ioredis', () => ioredisSingle({ port: server.port }), (client) => client.status === 'ready'],
    ['node-redis', () => nodeRedisSingle(server.url), (client) => client.isReady],
  ]

  it('a stopped server: every reply an error at once, no rejection; back to work once the client reconnects', async () => {
    const connected = await Promise.all(SINGLE.map(async ([name, connect, ready]) => ({ name, ready, client: await connect() })))
    const ops = [{ op: 'lookup', key: 'k' }, { op: 'take', key: 'b', capacity: 1, refillPerSec: 1, maxWaitMs: 0 }]
    for (const entry of connected) entry.store = redisStore({ client: entry.client, prefix: `down:${entry.name}:`, timeoutMs: 5_000 })
    await server.kill()
    for (const { name, client, ready, store } of connected) {
      await until(`${name} notices`, () => !ready(client))
      const replies = await store.run(ops)
      assert.equal(replies.length, 2)
      for (const reply of replies) assert.match(reply.error, /^the Redis client is not connected \(status: \w+\)/, name)
      await assert.rejects(store.invalidate(''), /could not invalidate the Redis cache: the Redis client is not connected/)
    }
    await server.restart()
    for (const { name, client, ready, store } of connected) {
      await until(`${name} reconnects`, () => ready(client))
      assert.deepEqual(await store.run(ops), [{ value: null }, { take: 'now' }], name)
    }
  })

  it('a server that stops answering (SIGSTOP): operations past maxInFlight are refused at once, the rest answered when it resumes', { timeout: 20_000 }, async () => {
    const connected = await Promise.all(SINGLE.map(async ([, connect]) => connect()))
    await server.kill('SIGSTOP')
    let pending
    try {
      pending = connected.map((client) => {
        const store = redisStore({ client, prefix: 'stopped:', maxInFlight: 2 })
        const waiting = store.run([{ op: 'lookup', key: 'k' }, { op: 'remembered', session: 's', field: 'f' }])
        return { store, waiting }
      })
      for (const { store } of pending) {
        const [refused] = await store.run([{ op: 'lookup', key: 'k' }])
        assert.match(refused.error, /2 operations are still waiting on Redis \(maxInFlight 2\)/)
      }
    } finally {
      await server.kill('SIGCONT')
    }
    for (const { waiting } of pending) assert.deepEqual(await waiting, [{ value: null }, { remembered: false }])
  })

  it("a wrong password: the reply's error names the server's reason", async () => {
    const guarded = await startRedis({ password: 'right' })
    try {
      const ops = [{ op: 'lookup', key: 'k' }]
      const wrong = [
        track(new Redis({ port: guarded.port, password: 'wrong' })),
        track(createClient({ url: `redis://:wrong@127.0.0.1:${guarded.port}` })),
      ]
      wrong[1].connect().catch(ignore) // it retries with the same password, and never resolves
      for (const client of wrong) {
        const store = redisStore({ client })
        await new Promise((resolve) => client.once('error', resolve))
        const [reply] = await store.run(ops)
        assert.match(reply.error, /WRONGPASS|NOAUTH|auth/i)
      }
      const right = await nodeRedisSingle(guarded.url)
      assert.deepEqual(await redisStore({ client: right }).run(ops), [{ value: null }])
    } finally {
      await guarded.stop()
    }
  })
})

describe('redisStore programmer errors', () => {
  let client
  before(async () => {
    client = track(new Redis({ port: (await servers.single.get()).port, lazyConnect: true }))
  })

  const rejects = (options, message) => assert.throws(() => redisStore(options), { name: 'TypeError', message })

  it('refuses a missing or foreign client', () => {
    rejects(undefined, /pass an options object with a `client`/)
    rejects({}, /`client` must be an ioredis client .* or a node-redis client .*; got no client/)
    rejects({ client: { get() {} } }, /`client` must be an ioredis client/)
    rejects({ client: 'redis://localhost' }, /`client` must be an ioredis client .*; got "redis:\/\/localhost"/)
  })

  it('refuses a bad prefix, timeoutMs, sizes or onError, and unknown options', () => {
    rejects({ client, prefix: 7 }, /`prefix` must be a string; got number/)
    rejects({ client, prefix: 'app{1}:' }, /`prefix` must not contain '\{' or '\}'/)
    for (const timeoutMs of [0, -1, Infinity, NaN, '50']) rejects({ client, timeoutMs }, /`timeoutMs` must be a positive finite number/)
    rejects({ client, maxEntryBytes: 0 }, /`maxEntryBytes` must be a positive integer/)
    rejects({ client, maxSessionKeys: 1.5 }, /`maxSessionKeys` must be a positive integer/)
    rejects({ client, onError: 'ignore' }, /`onError` must be 'open', 'closed' or an object/)
    rejects({ client, onError: { cache: 'shut' } }, /`onError.cache` must be 'open' or 'closed'; got "shut"/)
    rejects({ client, onError: { lookup: 'open' } }, /`onError.lookup` is not a station: use cache, dedup, rateLimit, sessions, budget, breaker/)
    rejects({ client, timeout: 50 }, /unknown option timeout; the options are client, prefix/)
  })

  it('takes onError as one mode for every station or by station over the defaults', () => {
    assert.deepEqual(redisStore({ client, onError: 'closed' }).onError, { cache: 'closed', dedup: 'closed', rateLimit: 'closed', sessions: 'closed', budget: 'closed', breaker: 'closed' })
    assert.deepEqual(redisStore({ client, onError: { rateLimit: 'open', cache: 'closed' } }).onError, { cache: 'closed', dedup: 'open', rateLimit: 'open', sessions: 'open', budget: 'closed', breaker: 'open' })
  })
})
