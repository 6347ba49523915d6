'use strict'
// toolgate/redis: the store that lets rate limits, the result cache, dedup and sessions hold across processes,
// through the Redis client the app already has (ioredis or node-redis, one node or a cluster). Neither package is
// a dependency: the client is recognised by its shape. Every operation is one Lua script on one hash slot.

const { createHash } = require('node:crypto')
const { errorMonitor } = require('node:events')
const { SCRIPTS } = require('./redis-scripts.js')
// What each station does when the store fails, unless told otherwise: declared with the wire, the engine's default.
const { ON_ERROR_DEFAULTS } = require('../engine/wire.generated.js')

const STATIONS = Object.keys(ON_ERROR_DEFAULTS)
const OPTIONS = ['client', 'prefix', 'timeoutMs', 'onError', 'maxEntryBytes', 'maxSessionKeys', 'maxInFlight']
/** The cache-key hash in key names: 64 bits, so two cache keys share a lease only by a 1-in-2^64 chance. */
const HASH_CHARS = 16

const describe = (value) => (typeof value === 'string' ? JSON.stringify(value) : value === null ? 'null' : typeof value)
const errorText = (err) => String(err?.message ?? err)
const globEscape = (text) => text.replace(/[*?[\]\\]/g, '\\$&')
const flag = (value) => (value ? '1' : '0')
/** A reply with Buffers made strings: a node-redis client may map RESP strings to Buffers for the app's own use. */
const plain = (reply) => (Array.isArray(reply) ? reply.map(plain) : Buffer.isBuffer(reply) ? reply.toString() : reply)

/** What the store needs of a client: the same few operations over ioredis and node-redis, one node or a cluster. */
function clientAdapter(client) {
  if (client !== null && typeof client === 'object' && typeof client.call === 'function' && typeof client.status === 'string') {
    const cluster = client.isCluster === true && typeof client.nodes === 'function'
    const call = (node) => (args) => node.call(...args)
    return {
      status: () => (client.status === 'ready' ? null : client.status),
      send: (_key, args) => client.call(...args),
      masters: async () => (cluster ? client.nodes('master') : [client]).map(call),
      cluster,
      // ioredis adds its keyPrefix to the keys of commands, not to SCAN's pattern nor to the keys SCAN returns.
      keyPrefix: client.options?.keyPrefix ?? '',
    }
  }
  if (client !== null && typeof client === 'object' && typeof client.sendCommand === 'function' && typeof client.isReady === 'boolean') {
    const cluster = Array.isArray(client.masters) && typeof client.nodeClient === 'function'
    const call = (node) => (args) => node.sendCommand(args)
    return {
      status: () => (client.isReady ? null : client.isOpen ? 'connecting' : 'closed'),
      send: cluster ? (key, args) => client.sendCommand(key, false, args) : (_key, args) => client.sendCommand(args),
      masters: async () => (cluster ? await Promise.all(client.masters.map((master) => client.nodeClient(master))) : [client]).map(call),
      cluster,
      keyPrefix: '',
    }
  }
  throw new TypeError('redisStore: `client` must be an ioredis client (new Redis(…) or new Redis.Cluster(…)) or a '
    + `node-redis client (createClient(…) or createCluster(…)); got ${client === undefined ? 'no client' : describe(client)}`)
}

function failureModes(onError) {
  if (onError === 'open' || onError === 'closed') return Object.freeze(Object.fromEntries(STATIONS.map((s) => [s, onError])))
  if (onError === null || typeof onError !== 'object') {
    throw new TypeError(`redisStore: \`onError\` must be 'open', 'closed' or an object of them by station (${STATIONS.join(', ')}); got ${describe(onError)}`)
  }
  for (const [station, mode] of Object.entries(onError)) {
    if (!STATIONS.includes(station)) throw new TypeError(`redisStore: \`onError.${station}\` is not a station: use ${STATIONS.join(', ')}`)
    if (mode !== 'open' && mode !== 'closed') throw new TypeError(`redisStore: \`onError.${station}\` must be 'open' or 'closed'; got ${describe(mode)}`)
  }
  return Object.freeze({ ...ON_ERROR_DEFAULTS, ...onError })
}

function positiveInteger(name, value) {
  if (!Number.isSafeInteger(value) || value < 1) throw new TypeError(`redisStore: \`${name}\` must be a positive integer; got ${describe(value)}`)
}

/**
 * The Redis store for `new ToolExecutor({ store })`. `run(ops)` answers one reply per op and never rejects (a
 * failed op's reply is `{ error }`); `invalidate(prefix)` deletes cached entries and rejects when it could not.
 */
function redisStore(options) {
  if (options === null || typeof options !== 'object') throw new TypeError('redisStore: pass an options object with a `client` (an ioredis or node-redis client)')
  const unknown = Object.keys(options).filter((key) => !OPTIONS.includes(key))
  if (unknown.length > 0) throw new TypeError(`redisStore: unknown option${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}; the options are ${OPTIONS.join(', ')}`)
  const { client, prefix = 'toolgate:', timeoutMs = 50, onError = {}, maxEntryBytes = 1048576, maxSessionKeys = 10000, maxInFlight = 10000 } = options
  const redis = clientAdapter(client)
  if (typeof prefix !== 'string') throw new TypeError(`redisStore: \`prefix\` must be a string; got ${describe(prefix)}`)
  // A brace in the prefix would become the hash tag of every key, and the keys of one operation could land in
  // different slots of a cluster.
  if (/[{}]/.test(prefix)) throw new TypeError(`redisStore: \`prefix\` must not contain '{' or '}' (toolgate uses them for hash tags); got ${describe(prefix)}`)
  if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new TypeError(`redisStore: \`timeoutMs\` must be a positive finite number of milliseconds; got ${describe(timeoutMs)}`)
  }
  positiveInteger('maxEntryBytes', maxEntryBytes)
  positiveInteger('maxSessionKeys', maxSessionKeys)
  positiveInteger('maxInFlight', maxInFlight)
  const modes = failureModes(onError)

  // The client's last error, so that "not connected" can say why (WRONGPASS, ECONNREFUSED…). errorMonitor sees
  // errors without handling them: an app without its own 'error' listener behaves as it did before.
  let lastError = null
  // A client still making its first connection queues commands until it is up (the engine bounds the wait); one
  // that was up and lost it, or failed to connect, answers at once.
  let wasReady = redis.status() === null
  client.on(errorMonitor, (err) => { lastError = errorText(err) })
  client.on('ready', () => {
    lastError = null
    wasReady = true
  })
  const notConnected = () => {
    const status = redis.status()
    if (status === null || (!wasReady && lastError === null)) return null
    return `the Redis client is not connected (status: ${status})${lastError === null ? '' : `: ${lastError}`}`
  }
  // Operations sent and not answered: a server that stops answering without closing the connection must not let
  // them pile up in the client.
  let inFlight = 0

  const sessionKey = (session) => `${prefix}{s:${session}}`
  const bucketKey = (key) => `${prefix}{b:${key}}`
  const budgetKey = (key) => `${prefix}{g:${key}}`
  const breakerKey = (tool) => `${prefix}{k:${tool}}`
  /** A Lua false (nothing) as undefined, so that the engine reads no field. */
  const some = (value) => (value === null || value === false ? undefined : value)
  const cacheKeys = (key) => {
    const tag = `${prefix}{c:${createHash('sha1').update(key).digest('hex').slice(0, HASH_CHARS)}}`
    // The lease names its cache key too, so that an invalidation finds (and drops) it with the entry.
    return [`${tag}e:${key}`, `${tag}l:${key}`]
  }

  async function evalScript(script, keys, argv) {
    const args = [String(keys.length), ...keys, ...argv.map(String)]
    try {
      return plain(await redis.send(keys[0], ['EVALSHA', script.sha, ...args]))
    } catch (err) {
      // A restarted, failed-over or flushed server has forgotten the script: EVAL loads it again (the calls after
      // use EVALSHA once more).
      if (!errorText(err).startsWith('NOSCRIPT')) throw err
      return plain(await redis.send(keys[0], ['EVAL', script.source, ...args]))
    }
  }

  const tooLarge = (value) => Buffer.byteLength(value) > maxEntryBytes
  /** 1 from a script that writes a session field: skipped, the session holds maxSessionKeys fields already. */
  const capped = (written) => (written === 1 ? { skipped: true } : {})
  const handlers = {
    async count(op) {
      const argv = [op.ttlMs, flag(op.refuse), flag(op.reuse), flag(op.rollbacks), maxSessionKeys]
      if (op.key !== undefined && op.key !== null) argv.push(op.key)
      const [earlier, reused, rollbacks] = await evalScript(SCRIPTS['dedup.count'], [sessionKey(op.session)], argv)
      return { earlier, reused, rollbacks }
    },
    async remembered(op) {
      return { remembered: (await evalScript(SCRIPTS['permission.remembered'], [sessionKey(op.session)], [op.field])) === 1 }
    },
    async lookup(op) {
      const owned = op.owner !== undefined && op.owner !== null
      const [state, detail] = await evalScript(SCRIPTS['cache.lookup'], cacheKeys(op.key), owned ? [op.owner, op.leaseMs] : [])
      if (state === 'hit') return { value: detail }
      if (state === 'taken') return { value: null, lease: 'taken' }
      if (state === 'held') return { value: null, lease: 'held', leaseLeftMs: Math.max(0, detail) }
      return { value: null }
    },
    async take(op) {
      const [take, waitMs] = await evalScript(SCRIPTS['ratelimit.take'], [bucketKey(op.key)], [op.capacity, op.refillPerSec, op.maxWaitMs])
      return take === 'now' ? { take } : { take, waitMs: Number(waitMs) }
    },
    async refund(op) {
      await evalScript(SCRIPTS['ratelimit.refund'], [bucketKey(op.key)], [op.capacity])
      return {}
    },
    async put(op) {
      const owned = op.owner !== undefined && op.owner !== null
      // Too large to share: an empty entry (which no call can read as a result) tells the others not to wait for
      // one, so that they run at once rather than one after another under the lease.
      const skipped = tooLarge(op.value)
      const value = skipped ? '' : op.value
      const notWritten = await evalScript(SCRIPTS['cache.put'], cacheKeys(op.key), [value, op.ttlMs, ...(owned ? [op.owner] : [])])
      return skipped || notWritten === 1 ? { skipped: true } : {}
    },
    async release(op) {
      await evalScript(SCRIPTS['cache.release'], cacheKeys(op.key), [op.owner])
      return {}
    },
    async uncount(op) {
      await evalScript(SCRIPTS['dedup.uncount'], [sessionKey(op.session)], [op.key])
      return {}
    },
    async keep(op) {
      if (tooLarge(op.value)) return { skipped: true }
      return capped(await evalScript(SCRIPTS['dedup.keep'], [sessionKey(op.session)], [op.key, op.value, op.ttlMs, maxSessionKeys]))
    },
    async remember(op) {
      return capped(await evalScript(SCRIPTS['permission.remember'], [sessionKey(op.session)], [op.field, op.ttlMs, maxSessionKeys]))
    },
    // Not capped: a rollback count left unrecorded would let a full session roll back more than allowed.
    async rollbacks(op) {
      await evalScript(SCRIPTS['judge.rollbacks'], [sessionKey(op.session)], [flag(op.flagged), op.ttlMs])
      return {}
    },
    async spend(op) {
      const argv = [op.amount, op.limit, op.ttlMs, ...(op.windowMs === undefined || op.windowMs === null ? [] : [op.windowMs])]
      const [spent, used, detail] = await evalScript(SCRIPTS['budget.spend'], [budgetKey(op.key)], argv)
      return spent === 'ok' ? { spent, used: Number(used), window: detail } : { spent, used: Number(used), waitMs: some(detail) }
    },
    async unspend(op) {
      await evalScript(SCRIPTS['budget.unspend'], [budgetKey(op.key)], [op.amount, op.window])
      return {}
    },
    async breakerAdmit(op) {
      const [admit, waitMs, phase, generation, from] = await evalScript(SCRIPTS['breaker.admit'], [breakerKey(op.key)], [op.halfOpenCalls, op.trialWaitMs, op.ttlMs])
      return { admit, waitMs, phase, generation, from: some(from) }
    },
    async breakerRecord(op) {
      const argv = [op.admission, op.generation, op.outcome, op.failureRate, op.minCalls, op.windowMs, op.openMs, op.halfOpenCalls, op.ttlMs]
      const [phase, from, calls, failures, waitMs] = await evalScript(SCRIPTS['breaker.record'], [breakerKey(op.key)], argv)
      return { phase, from: some(from), calls: some(calls), failures: some(failures), waitMs }
    },
  }

  async function perform(op) {
    try {
      const handler = Object.hasOwn(handlers, op?.op) ? handlers[op.op] : null
      if (handler === null) return { error: `unknown store op ${describe(op?.op)}: the ops are ${Object.keys(handlers).join(', ')}` }
      return await handler(op)
    } catch (err) {
      return { error: errorText(err) }
    }
  }

  /** Every op of the batch at once: all commands go out in this tick, and both clients pipeline them on the wire.
   * Each reply is told to `onReply(index, reply)` as its node answers, so that a node that is down or slow holds up
   * only the ops on it. How long an answer may take is the engine's to bound (`timeoutMs`); a late one is still
   * cleaned up. */
  async function run(ops, onReply) {
    // Not connected: answer at once rather than pile commands up in the client's offline queue.
    const down = notConnected() ?? (inFlight + ops.length > maxInFlight ? `${inFlight} operations are still waiting on Redis (maxInFlight ${maxInFlight})` : null)
    if (down !== null) return ops.map(() => ({ error: down }))
    inFlight += ops.length
    return Promise.all(ops.map(async (op, at) => {
      const reply = await perform(op)
      // Each op is out until its own node answers, not until the slowest of its batch does.
      inFlight -= 1
      onReply?.(at, reply)
      return reply
    }))
  }

  async function unlink(keys) {
    if (keys.length === 0) return 0
    // One UNLINK per key in a cluster: the keys of one SCAN page lie in many slots, and one command may not span two.
    const groups = redis.cluster ? keys.map((key) => [key]) : [keys]
    const counts = await Promise.all(groups.map((group) => redis.send(group[0], ['UNLINK', ...group])))
    return counts.reduce((sum, count) => sum + Number(count), 0)
  }

  /**
   * Deletes the cached entries whose cache key starts with `cachePrefix` ('' = all) on every master, by SCAN (KEYS
   * would block the server). It rejects rather than answer a count when a step fails: the caller awaits it and
   * must learn that the cache was not (entirely) invalidated.
   */
  async function invalidate(cachePrefix) {
    if (typeof cachePrefix !== 'string') throw new TypeError(`invalidate: the prefix must be a string ('' for every entry); got ${describe(cachePrefix)}`)
    // Only a client that is up: one still connecting may not know its nodes yet (a cluster's masters), and a sweep
    // that found no node would report nothing deleted.
    const status = redis.status()
    if (status !== null) throw new Error(`toolgate could not invalidate the Redis cache: ${notConnected() ?? `the Redis client is not connected (status: ${status})`}`)
    // The hash is exactly HASH_CHARS characters: a '*' there could run on into a cache key containing '}e:'.
    // Entries and their leases: a flight running elsewhere then keeps nothing it computed before the invalidation.
    const match = `${globEscape(redis.keyPrefix + prefix)}{c:${'?'.repeat(HASH_CHARS)}}[el]:${globEscape(cachePrefix)}*`
    const entryAt = prefix.length + '{c:'.length + HASH_CHARS + '}'.length
    const isEntry = (name) => name[entryAt] === 'e'
    let deleted = 0
    const sweep = async (node) => {
      let cursor = '0'
      do {
        const [next, keys] = await node(['SCAN', cursor, 'MATCH', match, 'COUNT', '1000'])
        cursor = String(next)
        // Added after the await: the masters are swept at once, and `deleted += await …` would add to a stale sum.
        const names = keys.map((key) => String(key).slice(redis.keyPrefix.length))
        // Leases go too, uncounted: the count is of cached results.
        const [count] = await Promise.all([unlink(names.filter(isEntry)), unlink(names.filter((name) => !isEntry(name)))])
        deleted += count
      } while (cursor !== '0')
    }
    try {
      await Promise.all((await redis.masters()).map(sweep))
    } catch (err) {
      throw new Error(`toolgate could not invalidate the Redis cache (${deleted} entries deleted before): ${errorText(err)}`, { cause: err })
    }
    return deleted
  }

  return Object.freeze({ kind: 'redis', prefix, timeoutMs, maxEntryBytes, onError: modes, run, invalidate })
}

module.exports = { redisStore }
