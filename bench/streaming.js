'use strict'
// Streaming turns. (1) A model streams 4 read-only calls 250 ms apart and ends its message 250 ms after the last;
// each tool takes 400 ms: the time from the first event to the last result, a streaming turn (`turn.tap`) against
// running the calls once the stream has ended (`execute`) and against the AI SDK's `streamText` with a mock model
// streaming the same calls. (2) What adding a trivial call costs on the JS thread, `add()` one at a time against
// one `execute` of the same calls. Run by hand:
//   node bench/streaming.js [samples]

const { ToolExecutor } = require('..')
const { threadCpuNs, median, spread } = require('./lib.js')

const GAP_MS = 250
const TOOL_MS = 400
const CALLS = 4
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

function gateOf() {
  const gate = new ToolExecutor()
  gate.register({ name: 'lookup', readOnly: true, parameters: { type: 'object', properties: { k: { type: 'number' } } }, handler: async ({ k }) => (await sleep(TOOL_MS), `found ${k}`) })
  return gate
}

/** The model's stream, in the Messages API's events: a call every GAP_MS, then the message's end GAP_MS later. */
async function* anthropicStream() {
  yield { type: 'message_start', message: { id: 'msg', content: [] } }
  for (let k = 0; k < CALLS; k++) {
    if (k > 0) await sleep(GAP_MS)
    yield { type: 'content_block_start', index: k, content_block: { type: 'tool_use', id: `c${k}`, name: 'lookup', input: {} } }
    yield { type: 'content_block_delta', index: k, delta: { type: 'input_json_delta', partial_json: `{"k": ${k}}` } }
    yield { type: 'content_block_stop', index: k }
  }
  await sleep(GAP_MS)
  yield { type: 'message_delta', delta: { stop_reason: 'tool_use' } }
  yield { type: 'message_stop' }
}

async function streamingTurn() {
  const gate = gateOf()
  const started = performance.now()
  const turn = gate.turn()
  for await (const _event of turn.tap(anthropicStream(), 'anthropic'));
  const results = await turn.results
  const ms = performance.now() - started
  await gate.close()
  if (results.length !== CALLS || !results.every((r) => r.success)) throw new Error('streaming turn: a call failed')
  return ms
}

async function executeAfterStream() {
  const gate = gateOf()
  const started = performance.now()
  const calls = []
  for await (const event of anthropicStream()) {
    if (event.type === 'content_block_start') calls.push({ ...event.content_block, input: { k: event.index } })
  }
  const results = await gate.execute(calls)
  const ms = performance.now() - started
  await gate.close()
  if (!results.every((r) => r.success)) throw new Error('execute after the stream: a call failed')
  return ms
}

async function aiSdkStreamText() {
  const ai = await import('ai')
  const { MockLanguageModelV2 } = await import('ai/test')
  const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 }
  const chunks = (async function* () {
    for (let k = 0; k < CALLS; k++) {
      if (k > 0) await sleep(GAP_MS)
      yield { type: 'tool-call', toolCallId: `c${k}`, toolName: 'lookup', input: `{"k":${k}}` }
    }
    await sleep(GAP_MS)
    yield { type: 'finish', finishReason: 'tool-calls', usage }
  })()
  const model = new MockLanguageModelV2({ doStream: async () => ({ stream: ReadableStream.from(chunks) }) })
  const lookup = { inputSchema: ai.jsonSchema({ type: 'object', properties: { k: { type: 'number' } } }), execute: async ({ k }) => (await sleep(TOOL_MS), `found ${k}`) }
  const started = performance.now()
  const result = ai.streamText({ model, prompt: 'Go.', tools: { lookup } })
  await result.consumeStream()
  const ms = performance.now() - started
  if ((await result.toolResults).length !== CALLS) throw new Error('streamText: a call has no result')
  return ms
}

/** JS-thread CPU per trivial call: `n` calls added one at a time to a streaming turn, or one `execute` of them. */
async function perCall(n, via) {
  const gate = new ToolExecutor()
  gate.register({ name: 'echo', readOnly: true, handler: () => 'ok' })
  const calls = Array.from({ length: n }, (_, i) => ({ id: `c${i}`, name: 'echo', arguments: {} }))
  const run = async () => {
    if (via === 'execute') return gate.execute(calls)
    const turn = gate.turn()
    for (const call of calls) turn.add(call)
    turn.end()
    return turn.results
  }
  // About 20,000 calls measured, after a fifth as many to warm up.
  const rounds = Math.ceil(20_000 / n)
  for (let i = 0; i < rounds / 5; i++) await run()
  const before = threadCpuNs()
  for (let i = 0; i < rounds; i++) await run()
  const perCallUs = (threadCpuNs() - before) / 1000 / (rounds * n)
  await gate.close()
  return perCallUs
}

const fmt = (xs, digits = 0) => `${median(xs).toFixed(digits)} (${spread(xs).map((x) => x.toFixed(digits)).join('–')})`

async function main() {
  const samples = Number(process.argv[2] ?? 5)
  const wall = { streaming: [], afterStream: [], streamText: [] }
  for (let i = 0; i < samples; i++) {
    wall.streaming.push(await streamingTurn())
    wall.afterStream.push(await executeAfterStream())
    wall.streamText.push(await aiSdkStreamText())
  }
  console.log(`${CALLS} read-only calls streamed ${GAP_MS} ms apart, the message ending ${GAP_MS} ms after the last; each tool ${TOOL_MS} ms`)
  console.log('| contender | first event to last result, ms (median, spread) |')
  console.log('|---|---|')
  console.log(`| toolgate, streaming turn (turn.tap) | ${fmt(wall.streaming)} |`)
  console.log(`| toolgate, execute() after the stream | ${fmt(wall.afterStream)} |`)
  console.log(`| AI SDK 5 streamText | ${fmt(wall.streamText)} |`)
  console.log()
  console.log('| calls per turn | add() one at a time, JS-thread µs/call | execute(), JS-thread µs/call |')
  console.log('|---|---|---|')
  for (const n of [1, 16, 256]) {
    const add = []
    const execute = []
    for (let i = 0; i < samples; i++) {
      add.push(await perCall(n, 'add'))
      execute.push(await perCall(n, 'execute'))
    }
    console.log(`| ${n} | ${fmt(add, 2)} | ${fmt(execute, 2)} |`)
  }
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
