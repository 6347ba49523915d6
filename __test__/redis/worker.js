'use strict'
// One process of a fleet sharing one Redis: an executor over `redisStore`, driven by its parent through IPC
// messages `{ id, do, ... }`, each answered with `{ id, ... }`. Not a test file itself.

const Redis = require('ioredis')
const { ToolExecutor } = require('toolgate')
const { redisStore } = require('toolgate/redis')

const port = Number(process.argv[2])
const client = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 1 })
let runs = 0
/** Set by the parent: the `hold` handler of this process never returns (until the process is killed). */
let hang = false
let releaseHold
const gate = new ToolExecutor({ store: redisStore({ client, prefix: 'fleet:', timeoutMs: 2_000 }), concurrency: 64 })
gate.register({
  name: 'api',
  readOnly: true,
  rateLimit: { capacity: 1_000, refillPerSecond: 1_000 / 60 },
  handler: () => 'ok',
})
gate.register({
  name: 'lookup',
  readOnly: true,
  idempotent: true,
  parameters: { type: 'object', properties: { q: { type: 'string' } } },
  handler: async ({ q }) => {
    runs++
    await new Promise((resolve) => setTimeout(resolve, 200))
    return `answer to ${q} from ${process.pid}`
  },
})
// Budgeted per session (by the parent's sessionId): 150 calls, and what the context's budget says of cost.
gate.register({ name: 'metered', readOnly: true, cost: 2.5, budget: { maxCalls: 150 }, handler: () => 'ok' })
// Runs until its parent kills the process (`hang`) or lets it go.
gate.register({
  name: 'hold',
  readOnly: true,
  idempotent: true,
  timeoutMs: 1_500,
  retry: false,
  handler: () => {
    runs++
    if (hang) return new Promise((resolve) => { releaseHold = resolve })
    return `ran in ${process.pid}`
  },
})

const actions = {
  ready: async () => {
    await client.ping()
    return {}
  },
  /** `calls` calls of the limited tool in turns of `batch`: how many got a token. */
  limit: async ({ calls, batch }) => {
    let admitted = 0
    let refused = 0
    const other = []
    for (let done = 0; done < calls; done += batch) {
      const results = await gate.execute(Array.from({ length: Math.min(batch, calls - done) }, () => ({ name: 'api', arguments: {} })))
      for (const r of results) {
        if (r.success) admitted++
        else if (r.errorKind === 'rate_limited' && r.metadata.store === undefined) refused++
        else other.push(r.error)
      }
    }
    return { admitted, refused, other: other.slice(0, 3), otherCount: other.length }
  },
  /** `calls` calls of the budgeted tool in turns of `batch`, in the parent's session: how many ran, how many a
   * budget refused. */
  budget: async ({ calls, batch, context }) => {
    let admitted = 0
    let refused = 0
    const other = []
    for (let done = 0; done < calls; done += batch) {
      const results = await gate.execute(Array.from({ length: Math.min(batch, calls - done) }, () => ({ name: 'metered', arguments: {} })), { context })
      for (const r of results) {
        if (r.success) admitted++
        else if (r.errorKind === 'budget_exceeded') refused++
        else other.push(r.error)
      }
    }
    return { admitted, refused, other: other.slice(0, 3), otherCount: other.length }
  },
  call: async ({ name, args }) => {
    const [r] = await gate.execute([{ name, arguments: args }])
    return { success: r.success, output: r.output, cached: r.cached, errorKind: r.errorKind, store: r.metadata.store, runs }
  },
  hang: async () => {
    hang = true
    return {}
  },
  invalidate: async ({ name }) => ({ dropped: await gate.invalidate(name) }),
  stats: async () => ({ stats: gate.stats(), runs }),
}

process.on('message', (message) => {
  Promise.resolve()
    .then(() => actions[message.do](message))
    .then((answer) => process.send({ id: message.id, ...answer }), (err) => process.send({ id: message.id, error: String(err?.stack ?? err) }))
})
process.on('disconnect', () => {
  releaseHold?.('let go')
  gate.close().then(() => client.quit()).finally(() => process.exit(0))
})
process.send({ up: true })
