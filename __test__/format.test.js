'use strict'
// Results → the messages each provider expects next, and the text a model reads for one result.

const { describe, it, before } = require('node:test')
const assert = require('node:assert/strict')
const { formatResults, forLlm, ERROR_KINDS } = require('..')
const { gateWith } = require('./helpers')

/** A real turn: one success with structured output, one handler failure, one refusal. */
async function turnResults() {
  const { gate } = gateWith([
    { name: 'search', readOnly: true, handler: () => ({ hits: ['a'] }) },
    { name: 'boom', handler: () => {
      throw new Error('disk full')
    } },
  ])
  return gate.execute([
    { type: 'tool_use', id: 'toolu_1', name: 'search', input: {} },
    { type: 'tool_use', id: 'toolu_2', name: 'boom', input: {} },
    { type: 'tool_use', id: 'toolu_3', name: 'serch', input: {} },
  ])
}

describe('formatResults', () => {
  let results
  let texts
  before(async () => {
    results = await turnResults()
    texts = results.map((r) => r.output)
    assert.equal(texts[0], '{"hits":["a"]}')
    assert.equal(texts[1], 'Error (handler_error): Tool "boom" failed: Error: disk full')
    assert.ok(texts[2].startsWith('Error (unknown_tool): There is no tool named "serch".'))
  })

  it("'anthropic': one user message of tool_result blocks, is_error only on failures", () => {
    const message = formatResults(results, 'anthropic')
    assert.deepEqual(message, {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'toolu_1', content: texts[0] },
        { type: 'tool_result', tool_use_id: 'toolu_2', content: texts[1], is_error: true },
        { type: 'tool_result', tool_use_id: 'toolu_3', content: texts[2], is_error: true },
      ],
    })
    assert.equal(Object.hasOwn(message.content[0], 'is_error'), false, 'no is_error: false on a success')
  })

  it("'openai-responses': function_call_output items paired by call_id", () => {
    assert.deepEqual(formatResults(results, 'openai-responses'), [
      { type: 'function_call_output', call_id: 'toolu_1', output: texts[0] },
      { type: 'function_call_output', call_id: 'toolu_2', output: texts[1] },
      { type: 'function_call_output', call_id: 'toolu_3', output: texts[2] },
    ])
  })

  it("'openai-chat': one tool message per result", () => {
    assert.deepEqual(formatResults(results, 'openai-chat'), [
      { role: 'tool', tool_call_id: 'toolu_1', content: texts[0] },
      { role: 'tool', tool_call_id: 'toolu_2', content: texts[1] },
      { role: 'tool', tool_call_id: 'toolu_3', content: texts[2] },
    ])
  })

  it("'ai-sdk': one tool message of tool-result parts, error-text on failures", () => {
    assert.deepEqual(formatResults(results, 'ai-sdk'), {
      role: 'tool',
      content: [
        { type: 'tool-result', toolCallId: 'toolu_1', toolName: 'search', output: { type: 'text', value: texts[0] } },
        { type: 'tool-result', toolCallId: 'toolu_2', toolName: 'boom', output: { type: 'error-text', value: texts[1] } },
        { type: 'tool-result', toolCallId: 'toolu_3', toolName: 'serch', output: { type: 'error-text', value: texts[2] } },
      ],
    })
  })

  it('formats an empty turn', () => {
    assert.deepEqual(formatResults([], 'anthropic'), { role: 'user', content: [] })
    assert.deepEqual(formatResults([], 'openai-responses'), [])
    assert.deepEqual(formatResults([], 'openai-chat'), [])
    assert.deepEqual(formatResults([], 'ai-sdk'), { role: 'tool', content: [] })
  })

  it('throws a TypeError on an unknown format or results that are not an array', () => {
    assert.throws(() => formatResults(results, 'gemini'), {
      name: 'TypeError',
      message: 'formatResults(results, format): format must be one of anthropic, openai-responses, openai-chat, ai-sdk; got gemini',
    })
    assert.throws(() => formatResults(results[0], 'anthropic'), {
      name: 'TypeError',
      message: 'formatResults(results, format): results must be an array of ToolResult',
    })
  })
})

describe('forLlm', () => {
  it('gives the output of a success and the Error (kind) text of a failure', async () => {
    const [ok, failed, unknown] = await turnResults()
    assert.equal(forLlm(ok), '{"hits":["a"]}')
    assert.equal(forLlm(failed), 'Error (handler_error): Tool "boom" failed: Error: disk full')
    assert.equal(forLlm(unknown), unknown.output)
  })

  it('builds the Error (kind) text for a failure whose output lacks it', () => {
    const base = { callId: 'c', name: 't', success: false, retryable: false, latencyMs: 0, attempts: 0, cached: false, truncated: false, metadata: { stages: [], startedAt: 0 } }
    assert.equal(forLlm({ ...base, output: 'raw', error: 'went wrong', errorKind: 'timeout' }), 'Error (timeout): went wrong')
    assert.equal(forLlm({ ...base, output: 'raw', error: 'went wrong' }), 'Error (handler_error): went wrong')
    assert.equal(forLlm({ ...base, output: 'only output', errorKind: 'cancelled' }), 'Error (cancelled): only output')
    assert.equal(forLlm({ ...base, success: true, output: 'Error (timeout): a success that looks like one' }), 'Error (timeout): a success that looks like one')
  })
})

describe('ERROR_KINDS', () => {
  it('lists every kind, frozen', () => {
    assert.deepEqual([...ERROR_KINDS].sort(), [
      'approval_denied', 'cancelled', 'duplicate', 'handler_error', 'idle_timeout', 'invalid_arguments',
      'not_executed', 'permission_denied', 'rate_limited', 'timeout', 'unknown_tool',
    ])
    assert.equal(Object.isFrozen(ERROR_KINDS), true)
  })
})
