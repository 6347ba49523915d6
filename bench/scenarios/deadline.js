'use strict'
// How far past its deadline a hung handler's result arrives while other calls keep the event loop busy: toolgate,
// the pure-JS reference pipeline, and the bare pure-JS guard (Promise.race against a setTimeout). Each contender
// also carries the background load. Prints one JSON line.

const { ToolExecutor } = require('../..')
const { createReference } = require('../contenders/reference')

const HUNG = Number(process.env.BENCH_HUNG ?? 1000)
const LIMIT_MS = 50
const IN_FLIGHT = 20
const never = () => new Promise(() => {})

const hang = { name: 'hang', readOnly: true, parameters: { type: 'object', properties: {} }, timeoutMs: LIMIT_MS, handler: never }
const work = {
  name: 'work',
  readOnly: true,
  parameters: { type: 'object', properties: { n: { type: 'integer' } } },
  handler: async ({ n }) => JSON.stringify({ n, items: Array.from({ length: 20 }, (_, i) => i * n) }),
}
const hangCall = [{ type: 'function_call', call_id: 'h', name: 'hang', arguments: '{}' }]
const workBatch = Array.from({ length: 16 }, (_, i) => ({ type: 'function_call', call_id: `w${i}`, name: 'work', arguments: `{"n":${i}}` }))

/** Keeps the loop busy with turns of 16 small calls until told to stop; returns how many calls ran. */
function backgroundLoad(execute) {
  let stop = false
  let calls = 0
  const done = (async () => {
    while (!stop) {
      await execute(workBatch)
      calls += workBatch.length
      // Yield between turns, as real work does (I/O): microtasks alone would starve every timer.
      await new Promise(setImmediate)
    }
    return calls
  })()
  return () => {
    stop = true
    return done
  }
}

/** `HUNG` measurements, `IN_FLIGHT` at a time, each started at a random offset so deadlines interleave. */
async function overshoots(one) {
  const xs = []
  let next = 0
  async function lane() {
    while (next < HUNG) {
      next++
      await new Promise((r) => setTimeout(r, Math.random() * 10))
      const t0 = performance.now()
      await one()
      xs.push(performance.now() - t0 - LIMIT_MS)
    }
  }
  await Promise.all(Array.from({ length: IN_FLIGHT }, lane))
  return xs.sort((a, b) => a - b)
}

async function main() {
  const gate = new ToolExecutor()
  const reference = await createReference()
  for (const t of [hang, work]) {
    gate.register({ ...t, retry: false })
    reference.register({ ...t, maxRetries: 0 })
  }
  const expectTimeout = (r) => {
    if (r.error?.kind !== 'timeout' && r.errorKind !== 'timeout') throw new Error(`expected a timeout, got ${JSON.stringify(r)}`)
  }
  const race = async () => {
    let timer
    const timeout = new Promise((resolve) => { timer = setTimeout(() => resolve('timeout'), LIMIT_MS) })
    await Promise.race([never(), timeout])
    clearTimeout(timer)
  }
  const contenders = [
    ['toolgate', async () => expectTimeout((await gate.execute(hangCall))[0]), (c) => gate.execute(c)],
    ['reference', async () => expectTimeout((await reference.execute(hangCall))[0]), (c) => reference.execute(c)],
    ['race', race, (c) => reference.execute(c)],
  ]
  const out = { limitMs: LIMIT_MS, hung: HUNG, inFlight: IN_FLIGHT }
  for (const [name, one, load] of contenders) {
    const stop = backgroundLoad(load)
    const xs = await overshoots(one)
    const background = await stop()
    const pct = (p) => xs[Math.min(xs.length - 1, Math.floor(xs.length * p))]
    out[name] = { p50: pct(0.5), p90: pct(0.9), p99: pct(0.99), max: xs[xs.length - 1], background }
  }
  await gate.close()
  await reference.close()
  console.log(JSON.stringify(out))
  process.exit(0) // the hung handlers' promises never settle; nothing else is pending
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
