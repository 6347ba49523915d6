'use strict'
// What toolgate/langchain costs per call against LangGraph's own tool execution, on the same handler: LangGraph's
// ToolNode over `tool()`s (zod validates, LangChain runs each call), toolNode(gate) (one turn of the gate per
// AIMessage), and LangGraph's ToolNode over langchainTools(gate) (LangChain runs each call, the gate gathers them
// into one turn). Also gate.execute on the message's tool_calls, the gate without the adapter. Every contender
// invokes a node on a state holding one AIMessage of BATCH calls, made before the clock starts. The contenders run
// interleaved in one process, so their ratios hold on a noisy machine. Every call must succeed: a refused call
// costs less and would flatter its contender.
// Run: node --expose-gc bench/adapters/langchain.js [samples]

const { AIMessage } = require('@langchain/core/messages')
const { tool } = require('@langchain/core/tools')
const { ToolNode } = require('@langchain/langgraph/prebuilt')
const { ToolExecutor } = require('../..')
const { langchainTools, toolNode } = require('toolgate/langchain')
const { compare, searchTool } = require('../lib.js')

const { parameters, handler } = searchTool
const zodSchema = searchTool.zodSchema()

const SAMPLES = Number(process.argv[2] ?? 11)
const BATCH = 16
const CALLS_PER_SAMPLE = 4_000


// Read-only calls of one message run together in every contender (the gate's concurrency set to the batch).
const gate = new ToolExecutor({ concurrency: BATCH, dedup: { policy: 'off' }, otel: false })
gate.register({ name: 'search', description: 'Search.', readOnly: true, parameters, handler })

/** Fails the run at once should a call fail. */
function checked(messages) {
  if (messages.length !== BATCH || !messages.every((m) => m.status === 'success')) {
    throw new Error(`a call failed: ${JSON.stringify(messages.find((m) => m.status !== 'success') ?? messages.length)}`)
  }
}

const node = (n) => async (turn) => checked((await n.invoke(turn.state)).messages)
const contenders = [
  { name: "LangGraph ToolNode, tool() with zod", execute: node(new ToolNode([tool(handler, { name: 'search', description: 'Search.', schema: zodSchema })])) },
  { name: 'toolNode(gate)', execute: node(toolNode(gate)) },
  { name: 'LangGraph ToolNode, langchainTools(gate)', execute: node(new ToolNode(langchainTools(gate))) },
  { name: 'gate.execute(message.tool_calls), no adapter', execute: async (turn) => {
    const results = await gate.execute(turn.state.messages[0].tool_calls)
    if (!results.every((r) => r.success)) throw new Error(`a call failed: ${JSON.stringify(results.find((r) => !r.success))}`)
  } },
]

/** A turn: the calls (for the count) and the state a node takes, one AIMessage holding them. */
function makeTurn(t) {
  const calls = Array.from({ length: BATCH }, (_, i) => ({ id: `c${t}_${i}`, name: 'search', args: { query: `q${i}`, limit: 1 + (i % 50), sort: 'new' }, type: 'tool_call' }))
  return Object.assign(calls, { state: { messages: [new AIMessage({ content: '', tool_calls: calls })] } })
}

const num = (x) => x.toFixed(1)

async function main() {
  const turns = Array.from({ length: CALLS_PER_SAMPLE / BATCH }, (_, t) => makeTurn(t))
  const figures = await compare(contenders, () => turns, SAMPLES)
  const base = figures[contenders[0].name].thread.median
  console.log(`node ${process.version}, @langchain/core ${require('@langchain/core/package.json').version}, @langchain/langgraph ${require('@langchain/langgraph/package.json').version}`)
  console.log(`one AIMessage of ${BATCH} read-only calls of one tool (3 fields) per node invocation; ${SAMPLES} samples of ${CALLS_PER_SAMPLE} calls; median per call`)
  console.log('| contender | wall µs/call | JS-thread CPU µs/call | process CPU µs/call | JS-thread CPU against ToolNode + tool() |')
  console.log('|---|---|---|---|---|')
  for (const { name } of contenders) {
    const f = figures[name]
    console.log(`| ${name} | ${num(f.wall.median)} | ${num(f.thread.median)} | ${num(f.process.median)} | ${(f.thread.median / base).toFixed(2)}× |`)
  }
  await gate.close()
}

main()
