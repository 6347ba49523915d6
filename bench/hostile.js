'use strict'
// What hostile model input costs: how long one turn holds the event loop (the engine reads a turn in one
// synchronous call) and how large the texts it writes back are. Run by hand after `npm run build`:
// node bench/hostile.js [samples]. Prints a Markdown table for bench/RESULTS.md.

const { ToolExecutor } = require('..')

const SAMPLES = Number(process.argv[2] ?? 5)

const gate = new ToolExecutor({ audit: { onRecord: (r) => lastRecord.push(r) } })
let lastRecord = []
for (let i = 0; i < 500; i++) gate.register({ name: `tool_number_${i}`, handler: () => 'x' })
const properties = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`property_${i}`, { type: 'string' }]))
gate.register({ name: 'keys', parameters: { type: 'object', properties, required: ['property_0'] }, handler: () => 'x' })
const values = Array.from({ length: 200_000 }, (_, i) => `v${i}`)
gate.register({ name: 'pick', parameters: { type: 'object', properties: { v: { enum: values } }, required: ['v'] }, handler: () => 'x' })

/** 200 unknown keys making about `bytes` of arguments. */
const manyKeys = (bytes) => Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`k${i}_${'y'.repeat(bytes / 200 - 8)}`, 1]))

const cases = {
  '100 calls with 1,000-character names, 500 tools': () => Array.from({ length: 100 }, (_, i) => ({ name: `${'x'.repeat(999)}${i}` })),
  '200 KB of arguments, 200 unknown keys': () => [{ name: 'keys', input: manyKeys(200_000) }],
  '1 MB of arguments, 200 unknown keys': () => [{ name: 'keys', input: manyKeys(1_000_000) }],
  'a 1 MB tool name': () => [{ name: 'n'.repeat(1_000_000) }],
  'a value outside a 200,000-value enum': () => [{ name: 'pick', input: { v: 'nope' } }],
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

async function main() {
  const rows = ['| input | event loop held (ms, median) | longest error (chars) | audit line (chars) |', '|---|---|---|---|']
  for (const [what, make] of Object.entries(cases)) {
    const held = []
    let errorChars = 0
    let auditChars = 0
    for (let s = 0; s < SAMPLES; s++) {
      const calls = make()
      lastRecord = []
      const t0 = performance.now()
      const turn = gate.execute(calls) // the engine reads, checks and answers these calls before this returns
      held.push(performance.now() - t0)
      const results = await turn
      errorChars = Math.max(...results.map((r) => r.error?.length ?? 0))
      auditChars = Math.max(...lastRecord.map((r) => JSON.stringify(r).length))
    }
    rows.push(`| ${what} | ${median(held).toFixed(1)} | ${errorChars} | ${auditChars} |`)
  }
  console.log(rows.join('\n'))
}

main()
