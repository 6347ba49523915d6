'use strict'
// How far past its deadline a hung handler's result arrives, while other calls keep the event loop busy.
// Run by hand after `npm run build`: node bench/deadline.js [hungCalls]. Next to toolgate, the same measurement
// for the usual pure-JS guard (Promise.race against a setTimeout), under the same load in the same process.

const { ToolExecutor } = require('..')

const HUNG = Number(process.argv[2] ?? 1000)
const LIMIT_MS = 50
const IN_FLIGHT = 20
const never = () => new Promise(() => {})

const gate = new ToolExecutor()
gate.register({ name: 'hang', readOnly: true, timeoutMs: LIMIT_MS, retry: false, handler: never })
gate.register({ name: 'work', readOnly: true, handler: async ({ n }) => JSON.stringify({ n, items: Array.from({ length: 20 }, (_, i) => i * n) }) })

/** Keeps the loop busy with turns of 16 small calls until told to stop; returns how many calls ran. */
function backgroundLoad() {
  let stop = false
  let calls = 0
  const batch = Array.from({ length: 16 }, (_, i) => ({ name: 'work', input: { n: i } }))
  const done = (async () => {
    while (!stop) {
      await gate.execute(batch)
      calls += batch.length
      // Yield to the event loop between turns, as real work does (I/O): a loop of microtasks alone starves
      // every timer, toolgate's and setTimeout's alike.
      await new Promise(setImmediate)
    }
    return calls
  })()
  return { stop: () => { stop = true; return done } }
}

async function viaGate() {
  const t0 = performance.now()
  const [r] = await gate.execute([{ name: 'hang' }])
  if (r.errorKind !== 'timeout') throw new Error(`expected a timeout, got ${r.errorKind}`)
  return performance.now() - t0 - LIMIT_MS
}

async function viaRace() {
  const t0 = performance.now()
  let timer
  const timeout = new Promise((resolve) => { timer = setTimeout(() => resolve('timeout'), LIMIT_MS) })
  const outcome = await Promise.race([never(), timeout])
  clearTimeout(timer)
  if (outcome !== 'timeout') throw new Error('expected a timeout')
  return performance.now() - t0 - LIMIT_MS
}

/** Runs `HUNG` measurements, `IN_FLIGHT` at a time, each started at a random offset so deadlines interleave. */
async function measure(one) {
  const overshoots = []
  let next = 0
  async function lane() {
    while (next < HUNG) {
      next++
      await new Promise((r) => setTimeout(r, Math.random() * 10))
      overshoots.push(await one())
    }
  }
  await Promise.all(Array.from({ length: IN_FLIGHT }, lane))
  return overshoots.sort((a, b) => a - b)
}

const pct = (xs, p) => xs[Math.min(xs.length - 1, Math.floor(xs.length * p))]

async function main() {
  const rows = []
  for (const [name, one] of [['toolgate (tokio deadline, wakes JS)', viaGate], ['Promise.race + setTimeout', viaRace]]) {
    const load = backgroundLoad()
    const xs = await measure(one)
    const calls = await load.stop()
    rows.push(`| ${name} | ${pct(xs, 0.5).toFixed(2)} | ${pct(xs, 0.9).toFixed(2)} | ${pct(xs, 0.99).toFixed(2)} | ${xs[xs.length - 1].toFixed(2)} | ${calls} |`)
  }
  console.log(`node ${process.version}; ${HUNG} hung calls with a ${LIMIT_MS} ms limit, ${IN_FLIGHT} in flight, under a background load of 16-call turns`)
  console.log('| deadline | p50 overshoot ms | p90 | p99 | max | background calls meanwhile |')
  console.log('|---|---|---|---|---|---|')
  for (const row of rows) console.log(row)
}

main()
