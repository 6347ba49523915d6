'use strict'
// One process of bench/redis.js's fleet: its own executor and ioredis client on the Redis the parent started, one
// rate-limited tool whose bucket (shared by the whole fleet, one key in Redis) never runs out. Forked with the
// port, the store's timeout and the bucket; it warms up, says `{ ready }`, and on `{ start, end }` (Date.now()
// times, the same for every process) runs turns back to back from `start` until `end`, then answers with its
// count. Every call must get its token: a refused or failed one costs less and would flatter the fleet, so the
// parent stops the run on any failure this process reports.

const Redis = require('ioredis')
const { ToolExecutor } = require('..')
const { redisStore } = require('toolgate/redis')
const { threadCpuNs } = require('./lib.js')

const [port, timeoutMs, capacity, refillPerSecond, batch] = process.argv.slice(2).map(Number)
const WARMUP_TURNS = 50

const client = new Redis({ port, host: '127.0.0.1' })
// concurrency: the whole turn runs at once, so its tokens go to Redis as one pipelined batch.
const gate = new ToolExecutor({ store: redisStore({ client, prefix: 'bench:fleet:', timeoutMs }), concurrency: batch })
gate.register({ name: 'limited', readOnly: true, rateLimit: { capacity, refillPerSecond }, handler: () => 'ok' })
const turn = Array.from({ length: batch }, () => ({ name: 'limited', arguments: {} }))

/** Runs one turn; the first result that is not a plain success, if any. */
async function runTurn() {
  const results = await gate.execute(turn)
  return results.find((r) => r.success !== true || r.output !== 'ok' || r.metadata.store !== undefined)
}

async function measure({ start, end }) {
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, start - Date.now())))
  const cpu0 = threadCpuNs()
  let calls = 0
  let failed
  while (Date.now() < end && failed === undefined) {
    failed = await runTurn()
    calls += batch
  }
  return { calls, lastAt: Date.now(), threadNs: threadCpuNs() - cpu0, failed, store: gate.stats().store }
}

async function warmUp() {
  await client.ping()
  for (let i = 0; i < WARMUP_TURNS; i++) {
    const failed = await runTurn()
    if (failed !== undefined) return { failed }
  }
  return { ready: true }
}

process.on('message', (message) => {
  measure(message).then((answer) => process.send(answer), (err) => process.send({ failed: String(err?.stack ?? err) }))
})
// The parent disconnects when it is done with this process (or has failed): close and go.
process.on('disconnect', () => {
  gate.close().then(() => client.quit()).finally(() => process.exit(0))
})
warmUp().then((answer) => process.send(answer), (err) => process.send({ failed: String(err?.stack ?? err) }))
