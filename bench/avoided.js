'use strict'
// What avoided work costs next to doing it: a cache hit next to running the handler, and a failure (arguments
// that fail the schema, a rate-limit refusal) next to a plain call. Run by hand after `npm run build`:
// node bench/avoided.js [samples]. All contenders run interleaved in one process, so their ratios hold on a noisy
// machine.

const { ToolExecutor } = require('..')

const SAMPLES = Number(process.argv[2] ?? 11)
const BATCH = 16
const TURNS = 600
const payload = JSON.stringify({ items: Array.from({ length: 40 }, (_, i) => ({ id: i, title: `result ${i}`, score: i / 40 })) })

const gate = new ToolExecutor({ dedup: { policy: 'off' } })
const schema = { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] }
gate.register({ name: 'plain', readOnly: true, parameters: schema, handler: async () => payload })
gate.register({ name: 'short', readOnly: true, parameters: schema, handler: async () => 'ok' })
gate.register({ name: 'io', readOnly: true, parameters: schema, handler: () => new Promise((r) => setTimeout(() => r(payload), 1)) })
gate.register({ name: 'cached', readOnly: true, idempotent: true, cache: { ttlMs: 3_600_000 }, parameters: schema, handler: async () => payload })
gate.register({ name: 'limited', readOnly: true, rateLimit: '1/day', parameters: schema, handler: async () => payload })

const turn = (name, args = (i) => `{"q":"query ${i}"}`) => Array.from({ length: BATCH }, (_, i) => ({ type: 'function_call', call_id: `c${i}`, name, arguments: args(i) }))
const scenarios = {
  'handler runs (async, returns 1.7 KB)': turn('plain'),
  'handler runs (1 ms of I/O)': turn('io'),
  'cache hit': turn('cached'),
  'handler runs (async, returns "ok")': turn('short'),
  'invalid arguments': turn('short', (i) => `{"query":"${i}"}`),
  'rate-limit refusal': turn('limited'),
}

async function perCall(calls) {
  const turns = calls === scenarios['handler runs (1 ms of I/O)'] ? TURNS / 10 : TURNS
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < turns; i++) await gate.execute(calls)
  return Number(process.hrtime.bigint() - t0) / 1e3 / (turns * calls.length)
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

async function main() {
  await gate.execute(turn('cached')) // fill the cache
  await gate.execute(turn('limited')) // use up the bucket
  const samples = Object.fromEntries(Object.keys(scenarios).map((k) => [k, []]))
  for (let s = 0; s < SAMPLES; s++) {
    for (const [name, calls] of Object.entries(scenarios)) samples[name].push(await perCall(calls))
  }
  const m = Object.fromEntries(Object.entries(samples).map(([k, xs]) => [k, median(xs)]))
  const check = await gate.execute(turn('limited'))
  if (!check.every((r) => r.errorKind === 'rate_limited')) throw new Error('the bucket refilled: the refusal figure would be wrong')
  if (!(await gate.execute(scenarios['invalid arguments'])).every((r) => r.errorKind === 'invalid_arguments')) throw new Error('the invalid arguments passed')
  console.log(`node ${process.version}; turns of ${BATCH} calls, ${SAMPLES} samples, median µs per call (wall)`)
  console.log('| scenario | µs per call | vs the handler running |')
  console.log('|---|---|---|')
  const base = m['handler runs (async, returns 1.7 KB)']
  for (const [name, v] of Object.entries(m)) console.log(`| ${name} | ${v.toFixed(2)} | ${(v / base).toFixed(2)}× |`)
  console.log(`cache hit / handler with 1 ms of I/O: ${(m['cache hit'] / m['handler runs (1 ms of I/O)']).toFixed(3)}×`)
  const short = m['handler runs (async, returns "ok")']
  for (const failure of ['invalid arguments', 'rate-limit refusal']) console.log(`${failure} / a call returning "ok": ${(m[failure] / short).toFixed(2)}×`)
}

main()
