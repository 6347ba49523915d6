'use strict'
// What a zod-declared tool costs per call: the same tool declared as a JSON Schema, as a zod schema that JSON Schema
// says whole (its own pass is skipped), as a zod schema with a refinement (zod's validate runs after the engine's),
// and the AI SDK 5 running the zod tool itself (it validates with zod's safeParse). Run by hand after `npm run
// build`: node bench/schemas.js [samples]. The contenders run interleaved in one process, so their differences hold
// on a noisy machine. Every call must succeed: a failing one would make the figures wrong.

const { ToolExecutor } = require('..')
const { createAiSdk } = require('./contenders/aisdk.js')
const { compare, searchTool } = require('./lib.js')

const { parameters: json, handler } = searchTool

const SAMPLES = Number(process.argv[2] ?? 11)
const BATCH = 16
const CALLS_PER_SAMPLE = 8_000

const plain = searchTool.zodSchema()
const refined = plain.refine((a) => a.query !== 'forbidden', { message: 'not that query', path: ['query'] })
/** Fails the run at once should a call fail: a refused call costs less and would flatter its contender. */
function checked(gate) {
  return { execute: async (turn) => {
    const results = await gate.execute(turn)
    if (!results.every((r) => r.success)) throw new Error(`a call failed: ${JSON.stringify(results.find((r) => !r.success))}`)
  } }
}

function gateWith(parameters) {
  const gate = new ToolExecutor({ dedup: { policy: 'off' }, otel: false })
  gate.register({ name: 'search', readOnly: true, parameters, handler })
  return gate
}

const contenders = {
  'toolgate, JSON Schema': checked(gateWith(json)),
  'toolgate, zod (no refinements: one pass, in the engine)': checked(gateWith(plain)),
  'toolgate, zod with a refinement (engine, then zod)': checked(gateWith(refined)),
  'AI SDK 5 `generateText`, the zod schema with a refinement': checked(createAiSdk().register({ name: 'search', zodSchema: refined, handler })),
}

const calls = Array.from({ length: BATCH }, (_, i) => ({
  type: 'function_call', call_id: `c${i}`, name: 'search', arguments: JSON.stringify({ query: `q${i}`, limit: 1 + (i % 50), sort: 'new' }),
}))

const num = (x) => x.toFixed(2)

async function main() {
  const list = Object.entries(contenders).map(([name, c]) => ({ name, execute: (turn) => c.execute(turn) }))
  const turns = Array.from({ length: CALLS_PER_SAMPLE / BATCH }, () => calls)
  const figures = await compare(list, () => turns, SAMPLES)
  const base = figures['toolgate, JSON Schema'].thread.median
  console.log(`node ${process.version}; turns of ${BATCH} calls of one tool (3 fields), ${SAMPLES} samples of ${CALLS_PER_SAMPLE} calls; median µs per call`)
  console.log('| tool declared as | wall µs/call | JS-thread CPU µs/call | process CPU µs/call | JS-thread CPU against JSON Schema |')
  console.log('|---|---|---|---|---|')
  for (const [name, f] of Object.entries(figures)) {
    console.log(`| ${name} | ${num(f.wall.median)} | ${num(f.thread.median)} | ${num(f.process.median)} | ${(f.thread.median / base).toFixed(2)}× |`)
  }
}

main()
