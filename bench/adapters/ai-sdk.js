'use strict'
// What toolgate/ai-sdk costs per call inside the AI SDK's own loop: one `generateText` step whose mock model answers
// with 16 tool calls, run (a) by the SDK itself, each tool's `execute` being the handler, and (b) through
// `aiSdkTools(gate)` and `aiSdkRepairToolCall(gate)`, the same handlers registered on a gate. Majors 5 and 6, and 7
// on Node 22 or later (its engines). The contenders run interleaved in one process, so their differences hold on a
// noisy machine. Run by hand: node --expose-gc bench/adapters/ai-sdk.js [samples]. Every call must succeed: a
// failing one costs less and would flatter its contender, so a failure stops the run.

const { ToolExecutor } = require('../..')
const { aiSdkTools, aiSdkRepairToolCall } = require('toolgate/ai-sdk')
const { compare, searchTool } = require('../lib.js')

const { parameters, handler } = searchTool

const SAMPLES = Number(process.argv[2] ?? 11)
const BATCH = 16
const CALLS_PER_SAMPLE = 4_000


const MAJORS = [
  { major: 5, pkg: 'ai', test: 'ai/test', mock: 'MockLanguageModelV2' },
  { major: 6, pkg: 'ai6', test: 'ai6/test', mock: 'MockLanguageModelV3' },
  { major: 7, pkg: 'ai7', test: 'ai7/test', mock: 'MockLanguageModelV4', minNode: 22 },
]

/** One generateText step over `tools` whose model emits the turn's calls; fails the run should a call fail. */
function stepRunner({ ai, test, mock, major, repairKey }, tools, repair) {
  const usage = major === 5
    ? { inputTokens: 0, outputTokens: 0, totalTokens: 0 }
    : { inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 0, text: 0, reasoning: 0 } }
  const finishReason = major === 5 ? 'tool-calls' : { unified: 'tool-calls', raw: 'tool_use' }
  return async (turn) => {
    // A fresh mock per turn: it records every call it gets, which would grow without bound.
    const model = new test[mock]({ doGenerate: async () => ({ content: turn, finishReason, usage, warnings: [] }) })
    const result = await ai.generateText({ model, tools, prompt: 'Use the tools.', stopWhen: ai.stepCountIs(1), maxRetries: 0, ...(repair ? { [repairKey]: repair } : {}) })
    const done = result.steps[0].content.filter((p) => p.type === 'tool-result').length
    if (done !== turn.length) throw new Error(`AI SDK ${major}: ${turn.length - done} calls failed: ${JSON.stringify(result.steps[0].content.find((p) => p.type === 'tool-error'))}`)
  }
}

async function contendersOf(spec) {
  const loaded = { ...spec, ai: await import(spec.pkg), test: await import(spec.test), repairKey: spec.major === 7 ? 'repairToolCall' : 'experimental_repairToolCall' }
  const own = { search: { description: 'Search.', inputSchema: loaded.ai.jsonSchema(parameters), execute: handler } }
  const gate = new ToolExecutor({ dedup: { policy: 'off' }, otel: false })
  gate.register({ name: 'search', description: 'Search.', readOnly: true, parameters, handler })
  return [
    { name: `AI SDK ${spec.major}, its own execute`, major: spec.major, execute: stepRunner(loaded, own) },
    { name: `AI SDK ${spec.major}, toolgate/ai-sdk`, major: spec.major, execute: stepRunner(loaded, aiSdkTools(gate, { version: spec.major }), aiSdkRepairToolCall(gate)) },
  ]
}

const turn = Array.from({ length: BATCH }, (_, i) => ({
  type: 'tool-call', toolCallId: `c${i}`, toolName: 'search', input: JSON.stringify({ query: `q${i}`, limit: 1 + (i % 50), sort: 'new' }),
}))

const num = (x) => x.toFixed(1)
/** The median of the per-sample differences a − b: the samples were taken side by side. */
const pairedDifference = (a, b) => a.values.map((x, i) => x - b.values[i]).sort((x, y) => x - y)[Math.floor(a.values.length / 2)]

async function main() {
  const nodeMajor = Number(process.versions.node.split('.')[0])
  const specs = MAJORS.filter((m) => nodeMajor >= (m.minNode ?? 0))
  const list = (await Promise.all(specs.map(contendersOf))).flat()
  const turns = Array.from({ length: CALLS_PER_SAMPLE / BATCH }, () => turn)
  const figures = await compare(list, () => turns, SAMPLES)
  console.log(`node ${process.version}; one generateText step of ${BATCH} calls of one read-only tool, ${SAMPLES} samples of ${CALLS_PER_SAMPLE} calls; median µs per call`)
  console.log('| contender | wall µs/call | JS-thread CPU µs/call | process CPU µs/call |')
  console.log('|---|---|---|---|')
  for (const c of list) {
    const f = figures[c.name]
    console.log(`| ${c.name} | ${num(f.wall.median)} | ${num(f.thread.median)} | ${num(f.process.median)} |`)
  }
  console.log('')
  console.log('| added by toolgate/ai-sdk, per call (median of paired differences) | wall µs | JS-thread CPU µs | process CPU µs |')
  console.log('|---|---|---|---|')
  for (const spec of specs) {
    const [own, gated] = list.filter((c) => c.major === spec.major).map((c) => figures[c.name])
    console.log(`| AI SDK ${spec.major} | ${num(pairedDifference(gated.wall, own.wall))} | ${num(pairedDifference(gated.thread, own.thread))} | ${num(pairedDifference(gated.process, own.process))} |`)
  }
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
