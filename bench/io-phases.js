'use strict'
// `node bench/io-phases.js [calls]`: where a call's JS-thread time goes when its handler settles at once, on the next
// turn of the event loop, or after 1 ms of I/O (one call per turn, turns back to back): the time inside each call
// into the engine and inside JSON.parse, per call, beside the JS thread's whole CPU time per call. With
// BENCH_MANUAL_CLOCK=1 the executor runs on a manual clock, which arms no deadline watcher on the engine's threads.

const { threadCpuNs } = require('./lib')
const native = require('../lib/engine/native.js')

const CALLS = Number(process.argv[2] ?? 3000)
const ENGINE_CALLS = ['begin', 'complete', 'finish', 'expire']

/** Time spent inside each timed function, in ns, by name; counted only while `on`. */
const spent = new Map()
let on = false
function timed(owner, name, label = name) {
  const original = owner[name]
  owner[name] = function (...args) {
    if (!on) return original.apply(this, args)
    const t0 = process.hrtime.bigint()
    try {
      return original.apply(this, args)
    } finally {
      spent.set(label, (spent.get(label) ?? 0n) + process.hrtime.bigint() - t0)
    }
  }
}
for (const name of ENGINE_CALLS) timed(native.Engine.prototype, name)
timed(JSON, 'parse', 'JSON.parse')

const { ToolExecutor } = require('..')
const { manualClock } = require('../lib/testing/index.js')

const HANDLERS = {
  'answers at once': async ({ n }) => n + 1,
  'next setImmediate': ({ n }) => new Promise((resolve) => setImmediate(() => resolve(n + 1))),
  'a 1 ms timer': ({ n }) => new Promise((resolve) => setTimeout(() => resolve(n + 1), 1)),
}

async function measure(handler) {
  const gate = new ToolExecutor(process.env.BENCH_MANUAL_CLOCK ? { clock: manualClock() } : {})
  gate.register({ name: 'inc', description: 'Adds one.', parameters: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] }, readOnly: true, handler })
  const turn = (i) => [{ type: 'function_call', call_id: `c${i}`, name: 'inc', arguments: `{"n":${i}}` }]
  for (let i = 0; i < CALLS; i++) await gate.execute(turn(i)) // warm-up: the JIT settles
  spent.clear()
  on = true
  const thread0 = threadCpuNs()
  for (let i = 0; i < CALLS; i++) {
    await gate.execute(turn(i))
    await new Promise(setImmediate)
  }
  const thread = (threadCpuNs() - thread0) / 1e3 / CALLS
  on = false
  await gate.close()
  return { thread, ...Object.fromEntries([...spent].map(([name, ns]) => [name, Number(ns) / 1e3 / CALLS])) }
}

async function main() {
  const columns = [...ENGINE_CALLS, 'JSON.parse']
  console.log(`| handler | JS-thread CPU µs/call | ${columns.map((c) => `${c} µs`).join(' | ')} |`)
  console.log(`|---|---|${columns.map(() => '---').join('|')}|`)
  for (const [what, handler] of Object.entries(HANDLERS)) {
    const figures = await measure(handler)
    console.log(`| ${what} | ${figures.thread.toFixed(1)} | ${columns.map((c) => (figures[c] ?? 0).toFixed(2)).join(' | ')} |`)
  }
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
