'use strict'
// 1,000,000 trivial calls through one contender (named on the command line), in turns of 16: how RSS and the JS
// heap grow, and whether anything is left behind (handles, timers, running calls). Run with --expose-gc, one
// process per contender so that each starts from the same state. Prints one JSON line.

const { ToolExecutor } = require('../..')
const { createReference } = require('../contenders/reference')

const CALLS = Number(process.env.BENCH_MEMORY_CALLS ?? 1_000_000)
const BATCH = 16
const CHECKPOINTS = 10
const WARM_UP = 200_000

const inc = {
  name: 'inc',
  readOnly: true,
  parameters: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] },
  handler: async ({ n }) => n + 1,
}

async function contender(name) {
  if (name === 'toolgate') {
    const gate = new ToolExecutor()
    gate.register(inc)
    return { execute: (c) => gate.execute(c), close: () => gate.close(), inFlight: () => gate.running + gate.pendingHandlers().length }
  }
  if (name === 'reference') {
    const reference = await createReference()
    reference.register(inc)
    return { execute: (c) => reference.execute(c), close: () => reference.close(), inFlight: () => 0 }
  }
  if (name === 'floor') {
    return { execute: (calls) => Promise.all(calls.map((c) => inc.handler(JSON.parse(c.arguments)))), close: async () => {}, inFlight: () => 0 }
  }
  throw new Error(`no contender named ${name}`)
}

function settledMemory() {
  global.gc()
  global.gc()
  const m = process.memoryUsage()
  return { rss: m.rss / 2 ** 20, heap: m.heapUsed / 2 ** 20, external: (m.external + m.arrayBuffers) / 2 ** 20 }
}

async function main() {
  const c = await contender(process.argv[2])
  // Fresh calls every turn, as a model emits them: nothing the contender could keep by identity.
  const turn = (t) => Array.from({ length: BATCH }, (_, i) => ({ type: 'function_call', call_id: `c${t}-${i}`, name: 'inc', arguments: `{"n":${t * BATCH + i}}` }))
  // Warm-up: the JIT, and V8 growing its young generation to the size this allocation rate keeps it at (which
  // shows as RSS, and is not growth of what the contender holds).
  for (let t = 0; t < WARM_UP / BATCH; t++) {
    await c.execute(turn(t))
    if (t % 64 === 63) await new Promise(setImmediate)
  }
  await new Promise(setImmediate)
  const resources0 = process.getActiveResourcesInfo().length
  const start = settledMemory()
  const checkpoints = []
  const turns = CALLS / BATCH
  const t0 = performance.now()
  for (let t = 0; t < turns; t++) {
    await c.execute(turn(t))
    if (t % 64 === 63) await new Promise(setImmediate) // let timers and I/O in, as a server would
    if ((t + 1) % (turns / CHECKPOINTS) === 0) checkpoints.push(process.memoryUsage.rss() / 2 ** 20)
  }
  const seconds = (performance.now() - t0) / 1e3
  await new Promise(setImmediate)
  const end = settledMemory()
  const result = {
    contender: process.argv[2],
    calls: CALLS,
    seconds,
    start,
    end,
    peakRss: Math.max(...checkpoints),
    checkpoints,
    resourcesBefore: resources0,
    resourcesAfter: process.getActiveResourcesInfo().length,
    inFlightAfter: c.inFlight(),
  }
  await c.close()
  console.log(JSON.stringify(result))
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
