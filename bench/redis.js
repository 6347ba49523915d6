'use strict'
// What the shared store costs: toolgate over redisStore (toolgate/redis) against its memory store, per call and per
// turn of 64, with an ioredis and a node-redis client; its limiter against rate-limiter-flexible's RateLimiterRedis
// on the same ioredis client; and the calls per second a fleet of processes sharing one bucket gets. Run by hand
// after `npm run build`: node bench/redis.js (about a minute). It starts its own redis-server on a free loopback
// port (no persistence) and stops it at the end; prints a Markdown section for bench/RESULTS.md, progress to
// stderr. Contenders run interleaved, block by block in rounds, so that noise on the machine hits them alike.
// Every result is checked: a call that failed, or that the store did not serve (metadata.store), costs something
// else and would flatter its contender, so it stops the run.

const os = require('node:os')
const path = require('node:path')
const { fork } = require('node:child_process')
const Redis = require('ioredis')
const { createClient } = require('redis')
const { RateLimiterRedis } = require('rate-limiter-flexible')
const { ToolExecutor } = require('..')
const { redisStore } = require('toolgate/redis')
const { startRedis } = require('../__test__/redis/servers.js')
const { threadCpuNs } = require('./lib.js')
const { run, versionOf } = require('./versions.js')

const ROUNDS = 10
/** Calls (or turns) per contender per round: 5,000 single calls and 300 turns of 64 per contender in all. */
const CALLS_PER_ROUND = 500
const TURNS_PER_ROUND = 30
const BATCH = 64
const FLEET_SIZES = [1, 8]
const FLEET_MS = 5_000
/** Far above any answer's time on a busy machine: the figures are of the store answering, not of its fallback. */
const TIMEOUT_MS = 1_000
/** One bucket size for every limiter: POINTS tokens per WINDOW_S, far more than the run takes, so none refuses. */
const POINTS = 1e9
const WINDOW_S = 3_600
const BUCKET = { capacity: POINTS, refillPerSecond: POINTS / WINDOW_S }
const WORKER = path.join(__dirname, 'redis-fleet-worker.js')
/** The 1.7 KB of JSON text of bench/avoided.js: what the cached tools answer. */
const payload = JSON.stringify({ items: Array.from({ length: 40 }, (_, i) => ({ id: i, title: `result ${i}`, score: i / 40 })) })
const schema = { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] }

// ── Machine and versions ──────────────────────────────────────────────────────────────────────────────────────────

function machineLine() {
  const root = path.join(__dirname, '..')
  const rev = run(['git', '-C', root, 'rev-parse', '--short', 'HEAD'])
  // Figures of a tree that differs from its commit belong to no commit: say so.
  const dirty = run(['git', '-C', root, 'status', '--porcelain', '--untracked-files=no']) !== ''
  const server = run(['redis-server', '--version']).match(/v=(\S+)/)?.[1] ?? 'unknown'
  return `Run on ${new Date().toISOString().slice(0, 10)}: ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown CPU'}, `
    + `${os.type()} ${os.release()}; Node ${process.version}; redis-server ${server} on loopback (no persistence); `
    + `ioredis ${versionOf('ioredis')}, redis (node-redis) ${versionOf('redis')}, rate-limiter-flexible ${versionOf('rate-limiter-flexible')}; `
    + `toolgate at ${rev}${dirty ? ' with uncommitted changes' : ''}.`
}

// ── Measuring ─────────────────────────────────────────────────────────────────────────────────────────────────────

const yieldToLoop = () => new Promise(setImmediate)
/** Nearest-rank quantile of an ascending array. */
const quantile = (xs, q) => xs[Math.min(xs.length - 1, Math.max(0, Math.ceil(q * xs.length) - 1))]
const storeOps = (gate) => gate.stats().store?.operations ?? 0

/**
 * A contender: `run()` does one call or one turn (`perRun` calls) and checks what came back; `gate`, when it has
 * one, counts the store operations.
 */
const contender = (label, runOnce, { gate, perRun = 1 } = {}) => ({ label, run: runOnce, gate, perRun })

/** `n` runs back to back, yielding to the event loop between them as a server does between requests: each run's
 * wall time, and the JS-thread CPU and store operations of the whole block. */
async function block(c, n, figures) {
  const ops0 = c.gate ? storeOps(c.gate) : 0
  await yieldToLoop()
  const cpu0 = threadCpuNs()
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint()
    await c.run()
    figures.wall.push(Number(process.hrtime.bigint() - t0) / 1e3)
    await yieldToLoop()
  }
  figures.threadNs += threadCpuNs() - cpu0
  figures.calls += n * c.perRun
  if (c.gate) figures.ops += storeOps(c.gate) - ops0
}

/** A warm-up block each, then ROUNDS rounds of a block each; every round starts one contender further on, so
 * that none always runs right after the same other. */
async function interleave(contenders, perRound) {
  const figures = contenders.map(() => ({ wall: [], threadNs: 0, calls: 0, ops: 0 }))
  for (const c of contenders) await block(c, perRound, { wall: [], threadNs: 0, calls: 0, ops: 0 })
  for (let r = 0; r < ROUNDS; r++) {
    for (let k = 0; k < contenders.length; k++) {
      const i = (k + r) % contenders.length
      await block(contenders[i], perRound, figures[i])
    }
  }
  return figures.map((f) => {
    const wall = f.wall.sort((a, b) => a - b)
    return { p50: quantile(wall, 0.5), p99: quantile(wall, 0.99), thread: f.threadNs / 1e3 / f.calls, ops: f.ops / f.calls }
  })
}

/** Fails the run on a result other than the expected success. */
function check(what, r, { output, cached }) {
  if (r?.success !== true || r.output !== output || r.cached !== cached || r.metadata?.store !== undefined) {
    throw new Error(`${what}: not the expected result: ${JSON.stringify(r)}`)
  }
}

// ── Output ────────────────────────────────────────────────────────────────────────────────────────────────────────

const num = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2))
const count = (x) => Math.round(x).toLocaleString('en-US')
const ratio = (x, base) => `${(x / base).toFixed(2)}×`
const table = (head, rows) => [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)]
const progress = (text) => process.stderr.write(`redis bench: ${text}\n`)

// ── The scenarios ─────────────────────────────────────────────────────────────────────────────────────────────────

function makeGate(options) {
  // concurrency: a turn's 64 read-only calls all start together, so that their tokens go to the store as one batch
  // (at the default of 8 they would start in waves of 8, a round trip each).
  // maxEntries: room for every miss of the run, so that the memory store never evicts the entry the hits read
  // (Redis keeps every entry for its TTL).
  const gate = new ToolExecutor({ ...options, concurrency: BATCH, cache: { maxEntries: 100_000 } })
  gate.register({ name: 'limited', readOnly: true, rateLimit: BUCKET, handler: () => 'ok' })
  gate.register({ name: 'cached', readOnly: true, idempotent: true, cache: { ttlMs: 3_600_000 }, parameters: schema, handler: async () => payload })
  gate.register({ name: 'fresh', readOnly: true, idempotent: true, cache: { ttlMs: 3_600_000 }, parameters: schema, handler: async () => payload })
  return gate
}

/** Arguments no call had before: every call of `fresh` misses. */
let nextMiss = 0

function singleCalls(stores) {
  const kinds = [
    { label: 'rate-limited, gets its token', call: () => ({ name: 'limited', arguments: {} }), expect: { output: 'ok', cached: false } },
    { label: 'cache hit', call: () => ({ name: 'cached', arguments: { q: 'hit' } }), expect: { output: payload, cached: true } },
    { label: 'cache miss: the handler runs, the entry is written', call: () => ({ name: 'fresh', arguments: { q: `miss ${nextMiss++}` } }), expect: { output: payload, cached: false } },
  ]
  return kinds.flatMap((kind) => stores.map((s) => ({
    kind: kind.label,
    store: s.label,
    ...contender(`${kind.label}, ${s.label}`, async () => {
      const [r] = await s.gate.execute([kind.call()])
      check(`${kind.label} (${s.label})`, r, kind.expect)
    }, { gate: s.gate }),
  })))
}

function batches(stores) {
  const turn = Array.from({ length: BATCH }, () => ({ name: 'limited', arguments: {} }))
  return stores.map((s) => contender(s.label, async () => {
    const results = await s.gate.execute(turn)
    for (const r of results) check(`a turn of ${BATCH} (${s.label})`, r, { output: 'ok', cached: false })
  }, { gate: s.gate, perRun: BATCH }))
}

function limiters(io, ioGate, ioStore) {
  const flexible = new RateLimiterRedis({ storeClient: io, keyPrefix: 'bench:rlf', points: POINTS, duration: WINDOW_S })
  const take = [{ op: 'take', key: 'bench:take-alone', capacity: BUCKET.capacity, refillPerSec: BUCKET.refillPerSecond, maxWaitMs: 0 }]
  return [
    contender('rate-limiter-flexible `RateLimiterRedis.consume(key)`', async () => {
      // consume rejects when it refuses: a resolved answer is a point taken.
      const res = await flexible.consume('k')
      if (!(res.remainingPoints > 0)) throw new Error(`rate-limiter-flexible: unexpected answer ${JSON.stringify(res)}`)
    }),
    contender('toolgate `gate.execute` of one rate-limited call (handler returns \'ok\')', async () => {
      const [r] = await ioGate.execute([{ name: 'limited', arguments: {} }])
      check('the limited call (ioredis)', r, { output: 'ok', cached: false })
    }, { gate: ioGate }),
    // No rival, a reading aid: the store's take alone, without the executor, splits toolgate's row into the Redis
    // round trip and the pipeline around it.
    contender('its store op alone: `redisStore(…).run([{ op: \'take\' }])`', async () => {
      const [reply] = await ioStore.run(take)
      if (reply?.take !== 'now') throw new Error(`the take op: unexpected reply ${JSON.stringify(reply)}`)
    }),
  ]
}

/** The server's CPU seconds so far (its user and system time, from INFO). */
async function redisCpuSeconds(io) {
  const info = await io.info('cpu')
  const field = (name) => Number(info.match(new RegExp(`^${name}:([0-9.]+)`, 'm'))?.[1])
  return field('used_cpu_user') + field('used_cpu_sys')
}

/** The next message of a worker; rejects on a failure it reports or its exit. */
function nextMessage(worker, what) {
  return new Promise((resolve, reject) => {
    const onExit = (code, signal) => reject(new Error(`a fleet worker ended (${signal ?? `exit code ${code}`}) before ${what}`))
    worker.once('exit', onExit)
    worker.once('message', (message) => {
      worker.off('exit', onExit)
      if (message.failed !== undefined) reject(new Error(`a fleet worker failed ${what}: ${typeof message.failed === 'string' ? message.failed : JSON.stringify(message.failed)}`))
      else resolve(message)
    })
  })
}

/** Lets a worker go (it closes its executor and client), and kills it should it not be gone within 2 s. */
async function stopWorker(worker) {
  if (worker.exitCode !== null || worker.signalCode !== null) return
  const exited = new Promise((resolve) => worker.once('exit', resolve))
  if (worker.connected) worker.disconnect()
  const timer = setTimeout(() => worker.kill('SIGKILL'), 2_000)
  await exited
  clearTimeout(timer)
}

async function fleet(size, port, io) {
  const workers = []
  try {
    for (let i = 0; i < size; i++) {
      workers.push(fork(WORKER, [port, TIMEOUT_MS, BUCKET.capacity, BUCKET.refillPerSecond, BATCH].map(String)))
    }
    await Promise.all(workers.map((w) => nextMessage(w, 'warming up')))
    const cpu0 = await redisCpuSeconds(io)
    const t0 = Date.now()
    // One start for all, a little ahead, so that every process runs over the same window.
    const start = t0 + 200
    const answers = await Promise.all(workers.map((w) => {
      const answer = nextMessage(w, 'its run')
      w.send({ start, end: start + FLEET_MS })
      return answer
    }))
    const serverSeconds = (await redisCpuSeconds(io)) - cpu0
    const seconds = (Math.max(...answers.map((a) => a.lastAt)) - start) / 1e3
    const calls = answers.reduce((sum, a) => sum + a.calls, 0)
    const store = { operations: 0, errors: 0, timeouts: 0, unavailable: 0 }
    for (const a of answers) for (const key of Object.keys(store)) store[key] += a.store[key]
    return {
      size,
      perSecond: calls / seconds,
      thread: answers.reduce((sum, a) => sum + a.threadNs, 0) / 1e3 / calls,
      server: (serverSeconds * 1e6) / calls,
      serverBusy: serverSeconds / ((Date.now() - t0) / 1e3),
      store,
    }
  } finally {
    await Promise.all(workers.map(stopWorker))
  }
}

// ── The run ───────────────────────────────────────────────────────────────────────────────────────────────────────

async function main() {
  const server = await startRedis()
  const io = new Redis({ port: server.port, host: '127.0.0.1' })
  const nodeRedis = createClient({ url: server.url })
  const gates = []
  try {
    await Promise.all([io.ping(), nodeRedis.connect()])
    const ioStore = redisStore({ client: io, prefix: 'bench:io:', timeoutMs: TIMEOUT_MS })
    const stores = [
      { label: 'memory (no store)', gate: makeGate({}) },
      { label: 'Redis, ioredis', gate: makeGate({ store: ioStore }) },
      { label: 'Redis, node-redis', gate: makeGate({ store: redisStore({ client: nodeRedis, prefix: 'bench:nr:', timeoutMs: TIMEOUT_MS }) }) },
    ]
    gates.push(...stores.map((s) => s.gate))

    progress('single calls')
    const single = singleCalls(stores)
    // The entry every hit reads, written before any hit is checked.
    for (const s of stores) await s.gate.execute([{ name: 'cached', arguments: { q: 'hit' } }])
    const singleFigures = await interleave(single, CALLS_PER_ROUND)
    progress(`turns of ${BATCH}`)
    const batchFigures = await interleave(batches(stores), TURNS_PER_ROUND)
    progress('the limiter against rate-limiter-flexible')
    const limiterContenders = limiters(io, stores[1].gate, ioStore)
    const limiterFigures = await interleave(limiterContenders, CALLS_PER_ROUND)
    const fleets = []
    for (const size of FLEET_SIZES) {
      progress(`a fleet of ${size}`)
      fleets.push(await fleet(size, server.port, io))
    }

    // What the results do not show: errors and timeouts the store counted without a result carrying them.
    const counted = [...stores.slice(1).map((s) => [s.label, s.gate.stats().store]), ...fleets.map((f) => [`the fleet of ${f.size}`, f.store])]
    const troubled = counted.some(([, c]) => c.errors > 0 || c.timeouts > 0 || c.unavailable > 0)
    const out = [
      '### Shared store: Redis against memory',
      '',
      machineLine(),
      '',
      `\`node bench/redis.js\`. Every executor has \`concurrency: ${BATCH}\`, a cache with room for every entry of the run, and`,
      `the same tools; the Redis ones \`redisStore({ client, prefix, timeoutMs: ${TIMEOUT_MS} })\`, a timeout no answer comes near,`,
      `so that no call falls back. The rate-limited tool's bucket holds ${count(POINTS)} tokens and refills ${count(BUCKET.refillPerSecond)}`,
      'a second (it never runs out); its handler returns `\'ok\'`. The cached tools answer 1.7 KB of JSON text. One',
      'redis-server on loopback serves every contender; they run interleaved, block by block in rounds, and every result',
      'is checked. *Store ops/call* is `stats().store.operations` per call.',
      '',
      `One call per turn, turns one after another (${count(ROUNDS * CALLS_PER_ROUND)} calls per row, after ${count(CALLS_PER_ROUND)} to warm up):`,
      '',
      ...table(['call', 'store', 'wall p50 µs', 'wall p99 µs', 'JS-thread CPU µs/call', 'JS-thread CPU against memory', 'store ops/call'], single.map((c, i) => {
        const f = singleFigures[i]
        const memory = singleFigures[single.findIndex((m) => m.kind === c.kind)]
        return [c.kind, c.store, num(f.p50), num(f.p99), num(f.thread), ratio(f.thread, memory.thread), num(f.ops)]
      })),
      '',
      `A turn of ${BATCH} read-only rate-limited calls, turns one after another (${count(ROUNDS * TURNS_PER_ROUND)} turns per row):`,
      '',
      ...table(['store', 'turn wall p50 µs', 'turn wall p99 µs', `wall µs/call (p50 turn / ${BATCH})`, 'JS-thread CPU µs/call', 'JS-thread CPU against memory', 'store ops/call'],
        stores.map((s, i) => {
          const f = batchFigures[i]
          return [s.label, num(f.p50), num(f.p99), num(f.p50 / BATCH), num(f.thread), ratio(f.thread, batchFigures[0].thread), num(f.ops)]
        })),
      '',
      `The limiter alone: one take at a time on the same ioredis client, buckets of the same size (${count(POINTS)} per`,
      `${count(WINDOW_S)} s; rate-limiter-flexible's is a fixed window), ${count(ROUNDS * CALLS_PER_ROUND)} takes per row:`,
      '',
      ...table(['limiter', 'wall p50 µs', 'wall p99 µs', 'JS-thread CPU µs/take', 'JS-thread CPU against rate-limiter-flexible'], limiterContenders.map((c, i) => {
        const f = limiterFigures[i]
        return [c.label, num(f.p50), num(f.p99), num(f.thread), ratio(f.thread, limiterFigures[0].thread)]
      })),
      '',
      `A fleet: child processes, each with its own executor and ioredis client, all taking from one bucket in Redis in turns`,
      `of ${BATCH}, back to back for ${FLEET_MS / 1e3} s. The machine's ${os.cpus().length} cores serve the fleet and redis-server alike.`,
      '',
      ...table(['processes', 'calls/s, fleet', 'calls/s per process', 'JS-thread CPU µs/call', 'redis-server CPU µs/call', 'redis-server CPU busy'], fleets.map((f) => [
        String(f.size), count(f.perSecond), count(f.perSecond / f.size), num(f.thread), num(f.server), `${(f.serverBusy * 100).toFixed(0)}%`,
      ])),
      '',
      `${FLEET_SIZES.at(-1)} processes: ${ratio(fleets.at(-1).perSecond, fleets[0].perSecond)} the calls/s of ${FLEET_SIZES[0]}.`,
      '',
      `\`stats().store\` at the end: ${counted.map(([label, c]) => `${label}: ${count(c.operations)} operations, ${c.errors} errors, ${c.timeouts} timeouts, ${c.unavailable} unavailable`).join('; ')}.`,
    ]
    console.log(out.join('\n'))
    if (troubled) {
      progress('the store counted errors, timeouts or unavailable results: the figures are not of the store answering')
      process.exitCode = 1
    }
  } finally {
    await Promise.all(gates.map((g) => g.close()))
    await Promise.allSettled([io.quit(), nodeRedis.close()])
    await server.stop()
  }
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
