// An agent's conversation, end to end without a network: mocked tools behind the gate, a model that replays a
// script, and the loop that passes the results back in Anthropic's shape.
import { expect, onTestFinished, test } from 'vitest'
import { ToolExecutor } from 'toolgate'
import { flaky, hangs, leaksSecret, ok, runAgentLoop, scriptedModel, throws, toolgateMatchers } from 'toolgate/testing'

expect.extend(toolgateMatchers)

const use = (id, name, input = {}) => ({ type: 'tool_use', id, name, input })

/** The support agent's gate, closed when the test ends, and its tools: each a mock with the behaviour under test. */
function supportAgent() {
  const tools = {
    search_orders: ok([{ id: 'o_17', status: 'shipped' }]),
    refund: throws('payments API is down'),
    carrier_status: flaky(1, undefined, 'in transit'),
    read_config: leaksSecret('aws'),
    warehouse: hangs(),
  }
  const gate = new ToolExecutor({ retry: { maxRetries: 1, initialDelayMs: 1 } })
  onTestFinished(() => gate.close({ timeoutMs: 100 }))
  gate.register({
    name: 'search_orders',
    readOnly: true,
    parameters: { type: 'object', properties: { email: { type: 'string' } }, required: ['email'] },
    handler: tools.search_orders,
  })
  gate.register({ name: 'refund', handler: tools.refund })
  gate.register({ name: 'carrier_status', readOnly: true, handler: tools.carrier_status })
  gate.register({ name: 'read_config', readOnly: true, handler: tools.read_config })
  gate.register({ name: 'warehouse', readOnly: true, timeoutMs: 50, handler: tools.warehouse })
  return { gate, tools }
}

/** Each assistant message's tool_use blocks against the user message after it: exactly one tool_result per
 * tool_use, same ids in the same order, and no other results; returns their is_error flags, turn by turn. */
function pairedResults(transcript) {
  const flags = []
  transcript.forEach((message, i) => {
    const uses = message.role === 'assistant' ? message.content.filter((block) => block.type === 'tool_use') : []
    if (uses.length === 0) return
    const answer = transcript[i + 1]
    expect(answer.role).toBe('user')
    expect(answer.content.map((block) => [block.type, block.tool_use_id])).toEqual(uses.map((use) => ['tool_result', use.id]))
    flags.push(answer.content.map((block) => block.is_error === true))
  })
  expect(transcript.filter((message) => message.role === 'user')).toHaveLength(flags.length + 1) // the prompt, then one per turn
  return flags
}

test('every tool_use gets exactly one tool_result, is_error on the failed ones only', async () => {
  const { gate, tools } = supportAgent()
  const model = scriptedModel([
    { text: 'Let me look that order up.', calls: [use('u1', 'search_orders', { email: 'ana@example.com' }), use('u2', 'refund', { order: 'o_17' })] },
    { calls: [use('u3', 'carrier_status'), use('u4', 'warehouse'), use('u5', 'search_order'), use('u6', 'search_orders')] },
    'Your order o_17 is in transit; the refund could not go through yet.',
  ])
  const { transcript, turns, text } = await runAgentLoop(gate, model, { format: 'anthropic', prompt: 'Where is my order?' })

  expect(text).toMatch(/in transit/)
  expect(pairedResults(transcript)).toEqual([
    [false, true],
    [false, true, true, true],
  ])
  const [[found, refund], [carrier, warehouse, typo, noEmail]] = turns.map((turn) => turn.results)
  expect(found).toSucceed(/"status":"shipped"/)
  expect(refund).toFailWith('handler_error', 'payments API is down')
  expect(refund).toHaveRetried(0) // a plain Error is not transient
  expect(carrier).toSucceed('in transit')
  expect(carrier).toHaveRetried(1)
  expect(warehouse).toFailWith('timeout', 'time limit of 50 ms')
  expect(typo).toFailWith('unknown_tool', 'Did you mean "search_orders"?')
  expect(noEmail).toFailWith('invalid_arguments', 'email')

  expect(tools.search_orders.calls.map((call) => call.args)).toEqual([{ email: 'ana@example.com' }])
  expect(tools.warehouse.calls[0].signalAborted).toBe(true)
  expect(model.requests).toHaveLength(3)
})

test('a secret a tool returns never reaches the model', async () => {
  const { gate, tools: { read_config: leak } } = supportAgent()
  const model = scriptedModel([{ calls: [use('c1', 'read_config')] }, 'Configured.'])
  const { transcript, turns } = await runAgentLoop(gate, model, { format: 'anthropic' })

  expect(turns[0].results[0]).toSucceed(new RegExp(`\\[REDACTED:${leak.rule}\\]`))
  expect(JSON.stringify(transcript)).not.toContain(leak.secret)
  expect(JSON.stringify(model.requests)).not.toContain(leak.secret)
})
