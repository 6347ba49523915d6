'use strict'
// What toolgate/openai-agents costs per call against the Agents SDK's own tool execution, on the same handler.
// Two levels:
// - a whole Runner.run over the SDK's ScriptedModel (one response of BATCH calls, then a final message): the
//   SDK's `tool()` with zod (zod validates), its `tool()` with the JSON Schema (the SDK only parses), and
//   openAiAgentsTools(gate) behind openAiAgentsModel and openAiAgentsRunConfig. The Runner's own work per run
//   (items, history, the two model requests) is in every one of them alike;
// - the tools' `invoke` alone, as the Runner calls it for one response (all of its calls at once, with their
//   call ids): `tool()` with zod, `tool()` with the JSON Schema, openAiAgentsTools(gate), and gate.execute on the
//   same calls (the gate without the adapter).
// Every run is built (its model, its agent) before the clock starts. The contenders run interleaved in one
// process, so their ratios hold on a noisy machine. Every call must succeed: a refused call costs less and would
// flatter its contender.
// Run: node --expose-gc bench/adapters/openai-agents.js [samples]

const fs = require('node:fs')
const path = require('node:path')
const { Agent, Runner, RunContext, tool } = require('@openai/agents')
const { ScriptedModel, functionCall, assistantMessage } = require('@openai/agents/testing')
const { ToolExecutor } = require('../..')
const { openAiAgentsTools, openAiAgentsModel, openAiAgentsRunConfig } = require('toolgate/openai-agents')
const { compare, searchTool } = require('../lib.js')

const { parameters, handler } = searchTool
const zodSchema = searchTool.zodSchema()

const SAMPLES = Number(process.argv[2] ?? 11)
const BATCH = 16
const RUN_CALLS_PER_SAMPLE = 1_600
const INVOKE_CALLS_PER_SAMPLE = 8_000


// Read-only calls of one response run together in every contender (the gate's concurrency set to the batch).
const gate = new ToolExecutor({ concurrency: BATCH, dedup: { policy: 'off' }, otel: false })
gate.register({ name: 'search', description: 'Search.', readOnly: true, parameters, handler })

const sdkZod = tool({ name: 'search', description: 'Search.', parameters: zodSchema, execute: handler })
const sdkJson = tool({ name: 'search', description: 'Search.', parameters, strict: false, execute: handler })
const [gated] = openAiAgentsTools(gate)

/** A response's calls, with the output each must get. */
function makeCalls(t) {
  return Array.from({ length: BATCH }, (_, i) => {
    const args = { query: `q${i}`, limit: 1 + (i % 50), sort: 'new' }
    return { call: functionCall('search', args, { callId: `c${t}_${i}` }), expected: `${args.query}:${args.limit}` }
  })
}

/** Fails the run at once should a call fail. */
function checked(outputs, turn) {
  const wrong = outputs.findIndex((output, i) => output !== turn[i].expected)
  if (wrong !== -1) throw new Error(`a call failed: ${JSON.stringify(outputs[wrong])}`)
}

// ── Whole runs ──

const runner = new Runner({ tracingDisabled: true })
const gatedRunner = new Runner({ tracingDisabled: true, ...openAiAgentsRunConfig(gate) })
const runContenders = [
  { name: 'Runner, tool() with zod', tools: [sdkZod], runner, wrap: (m) => m },
  { name: 'Runner, tool() with the JSON Schema', tools: [sdkJson], runner, wrap: (m) => m },
  { name: 'Runner, openAiAgentsTools(gate) + openAiAgentsModel', tools: openAiAgentsTools(gate), runner: gatedRunner, wrap: (m) => openAiAgentsModel(gate, m) },
].map((c) => ({
  ...c,
  execute: async (turn) => {
    await c.runner.run(turn.agent, 'Search')
    checked(turn.model.calls[1].request.input.filter((i) => i.type === 'function_call_result').map((i) => i.output.text), turn)
  },
}))

function makeRun(c, t) {
  const turn = makeCalls(t)
  turn.model = new ScriptedModel([turn.map((x) => x.call), [assistantMessage('done')]])
  turn.agent = new Agent({ name: 'assistant', model: c.wrap(turn.model), tools: c.tools })
  return turn
}

// ── invoke alone ──

const runContext = new RunContext({})
/** The Runner's invoke of one response's calls: together, each with its call and the response's one signal. */
const invokeAll = (t) => (turn) => {
  const signal = new AbortController().signal
  return Promise.all(turn.map(({ call }) => t.invoke(runContext, call.arguments, { toolCall: call, signal }))).then((out) => checked(out, turn))
}
const invokeContenders = [
  { name: 'tool() with zod: invoke', execute: invokeAll(sdkZod) },
  { name: 'tool() with the JSON Schema: invoke', execute: invokeAll(sdkJson) },
  { name: 'openAiAgentsTools(gate): invoke', execute: invokeAll(gated) },
  {
    name: 'gate.execute on the same calls, no adapter',
    execute: async (turn) => {
      const results = await gate.execute(turn.map(({ call }) => ({ id: call.callId, name: call.name, arguments: call.arguments })))
      checked(results.map((r) => r.output), turn)
    },
  },
]

const num = (x) => x.toFixed(1)

/** The SDK's version (its package.json is not in its exports). */
function sdkVersion() {
  const file = path.join(path.dirname(require.resolve('@openai/agents')), '..', 'package.json')
  return JSON.parse(fs.readFileSync(file, 'utf8')).version
}

function table(title, contenders, figures) {
  const base = figures[contenders[0].name].thread.median
  console.log(`\n${title}`)
  console.log(`| contender | wall µs/call | JS-thread CPU µs/call | process CPU µs/call | JS-thread CPU against ${contenders[0].name} |`)
  console.log('|---|---|---|---|---|')
  for (const { name } of contenders) {
    const f = figures[name]
    console.log(`| ${name} | ${num(f.wall.median)} | ${num(f.thread.median)} | ${num(f.process.median)} | ${(f.thread.median / base).toFixed(2)}× |`)
  }
}

async function main() {
  console.log(`node ${process.version}, @openai/agents ${sdkVersion()}, zod ${require('zod/package.json').version}`)
  console.log(`one model response of ${BATCH} read-only calls of one tool (3 fields); ${SAMPLES} samples; median per call`)
  const runs = await compare(runContenders, (c) => Array.from({ length: RUN_CALLS_PER_SAMPLE / BATCH }, (_, t) => makeRun(c, t)), SAMPLES)
  table(`Runner.run (${RUN_CALLS_PER_SAMPLE} calls per sample)`, runContenders, runs)
  const turns = Array.from({ length: INVOKE_CALLS_PER_SAMPLE / BATCH }, (_, t) => makeCalls(t))
  const invokes = await compare(invokeContenders, () => turns, SAMPLES)
  table(`invoke alone (${INVOKE_CALLS_PER_SAMPLE} calls per sample)`, invokeContenders, invokes)
  await gate.close()
}

main()
