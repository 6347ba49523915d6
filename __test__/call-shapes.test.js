'use strict'
// Intake: every provider's tool-call shape, mixed in one turn, read into one result per call in input order.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { gateWith, assertSuccess, assertFailure, recorder } = require('./helpers')

const GENERATED_ID = /^call_[A-Za-z0-9]{16}$/

/** A read-only echo tool: returns the arguments and the call id it saw, so intake can be checked end to end. */
function echoGate() {
  return gateWith([
    {
      name: 'echo',
      readOnly: true,
      parameters: { type: 'object', properties: { q: { type: 'string' } }, additionalProperties: false },
      handler: (args, ctx) => ({ args, callId: ctx.callId }),
    },
    { name: 'other', readOnly: true, handler: (args) => ({ other: args }) },
  ])
}

describe('call shapes', () => {
  it('reads every provider shape mixed in one array, in input order with matching ids and names', async () => {
    const { gate } = echoGate()
    const calls = [
      { type: 'tool_use', id: 'toolu_01', name: 'echo', input: { q: 'anthropic' } },
      // Responses items carry both an item id and a call_id; outputs pair by call_id.
      { type: 'function_call', id: 'fc_01', call_id: 'call_resp', name: 'echo', arguments: '{"q":"responses"}' },
      { id: 'call_chat', type: 'function', function: { name: 'other', arguments: '{"q":"chat"}' } },
      { type: 'tool-call', toolCallId: 'aisdk_1', toolName: 'echo', input: { q: 'ai-sdk' } },
      // AI SDK v4 put the arguments under `args`.
      { type: 'tool-call', toolCallId: 'aisdk_v4', toolName: 'echo', args: { q: 'v4' } },
      { id: 'gen_obj', name: 'echo', arguments: { q: 'generic object' } },
    ]
    const results = await gate.execute(calls)
    assert.equal(results.length, calls.length)
    const expected = [
      ['toolu_01', 'echo', { q: 'anthropic' }],
      ['call_resp', 'echo', { q: 'responses' }],
      ['call_chat', 'other', { other: { q: 'chat' } }],
      ['aisdk_1', 'echo', { q: 'ai-sdk' }],
      ['aisdk_v4', 'echo', { q: 'v4' }],
      ['gen_obj', 'echo', { q: 'generic object' }],
    ]
    results.forEach((r, i) => {
      const [callId, name, value] = expected[i]
      assertSuccess(r)
      assert.equal(r.callId, callId)
      assert.equal(r.name, name)
      if (name === 'echo') {
        assert.deepEqual(r.metadata.structured, { args: value, callId })
        assert.equal(r.output, JSON.stringify({ args: value, callId }))
      } else {
        assert.deepEqual(r.metadata.structured, value)
      }
    })
  })

  it('generates a call_ id of 16 characters when none is given, and hands the same id to the handler', async () => {
    const { gate } = echoGate()
    const results = await gate.execute([{ name: 'echo', arguments: '{"q":"a"}' }, { name: 'echo' }, { name: 'echo', id: '' }])
    const ids = results.map((r) => r.callId)
    for (const r of results) {
      assertSuccess(r)
      assert.match(r.callId, GENERATED_ID)
      assert.equal(r.metadata.structured.callId, r.callId, 'ctx.callId is the result callId')
    }
    assert.equal(new Set(ids).size, ids.length, 'generated ids are distinct')
  })

  it('treats an empty or blank arguments string, null and a missing field as {}', async () => {
    const { gate } = echoGate()
    const results = await gate.execute([
      { id: 'a', type: 'function', function: { name: 'echo', arguments: '' } },
      { type: 'function_call', call_id: 'b', name: 'echo', arguments: '   ' },
      { id: 'c', name: 'echo', arguments: null },
      { id: 'd', name: 'echo' },
    ])
    for (const r of results) {
      assertSuccess(r)
      assert.deepEqual(r.metadata.structured.args, {})
    }
    assert.deepEqual(results.map((r) => r.callId), ['a', 'b', 'c', 'd'])
  })

  it('keeps input order when later calls finish first', async () => {
    const rec = recorder()
    const { gate } = gateWith([
      { name: 'read', readOnly: true, parameters: { type: 'object', properties: { id: { type: 'string' }, ms: { type: 'integer' } } }, handler: rec.handler() },
    ])
    const results = await gate.execute([
      { id: '1', name: 'read', input: { id: 'slow', ms: 120 } },
      { id: '2', name: 'read', input: { id: 'fast', ms: 1 } },
      { id: '3', name: 'nope' },
    ])
    // The second call ended before the first: order of results is input order, not completion order.
    assert.ok(rec.index('end:fast') < rec.index('end:slow'), rec.events.join(','))
    assert.deepEqual(results.map((r) => r.callId), ['1', '2', '3'])
    assert.deepEqual(results.map((r) => r.output.slice(0, 26)), ['slow', 'fast', 'Error (unknown_tool): Ther'])
  })

  it('answers an empty turn with an empty array', async () => {
    const { gate } = echoGate()
    assert.deepEqual(await gate.execute([]), [])
  })

  it('answers a call that is not an object as invalid_arguments, and its siblings still run', async () => {
    const { gate, calls } = echoGate()
    const results = await gate.execute([3, null, 'echo', { id: 'ok', name: 'echo' }])
    assertFailure(results[0], 'invalid_arguments', 'The tool call could not be read', 'must be an object, got a number')
    assertFailure(results[1], 'invalid_arguments', 'could not be read', 'got null')
    assertFailure(results[2], 'invalid_arguments', 'could not be read', 'got a string')
    for (const r of results.slice(0, 3)) {
      assert.match(r.callId, GENERATED_ID)
      assert.equal(r.name, '')
      assert.equal(r.attempts, 0)
    }
    assertSuccess(results[3])
    assert.equal(calls.echo, 1)
  })
  it('reads Gemini functionCall parts, Bedrock toolUse blocks, LangChain ToolCalls and MCP tools/call params', async () => {
    const { gate } = echoGate()
    const calls = [
      // A Gemini model part: the call nested under functionCall, beside a thought signature; Gemini may send no id.
      { functionCall: { id: 'gem_1', name: 'echo', args: { q: 'gemini' } }, thoughtSignature: 'c2lnbmF0dXJl' },
      { functionCall: { name: 'echo', args: { q: 'gemini without id' } } },
      // What the SDK's response.functionCalls lists: the FunctionCall itself.
      { name: 'echo', args: { q: 'gemini functionCalls' } },
      { toolUse: { toolUseId: 'tooluse_bedrock', name: 'echo', input: { q: 'bedrock' } } },
      { id: 'lc_1', name: 'echo', args: { q: 'langchain' }, type: 'tool_call' },
      { name: 'echo', arguments: { q: 'mcp' }, _meta: { progressToken: 'tok-7' } },
      { name: 'echo', arguments: { q: 'mcp number' }, _meta: { progressToken: 8 } },
    ]
    const results = await gate.execute(calls)
    const ids = results.map((r) => r.callId)
    assert.deepEqual([ids[0], ...ids.slice(3)], ['gem_1', 'tooluse_bedrock', 'lc_1', 'tok-7', '8'])
    assert.match(ids[1], GENERATED_ID)
    assert.match(ids[2], GENERATED_ID)
    const sent = ['gemini', 'gemini without id', 'gemini functionCalls', 'bedrock', 'langchain', 'mcp', 'mcp number']
    results.forEach((r, i) => {
      assertSuccess(r)
      assert.equal(r.name, 'echo')
      assert.deepEqual(r.metadata.structured, { args: { q: sent[i] }, callId: ids[i] }, 'the handler saw the id the result carries')
    })
  })

  it('answers an object with no field of any call shape with the shapes it reads, and its siblings run', async () => {
    const { gate, calls } = echoGate()
    const results = await gate.execute([
      { text: 'Let me look that up.' },
      { tool: 'echo', params: { q: 'x' } },
      { id: 'ok', name: 'echo' },
    ])
    for (const r of results.slice(0, 2)) {
      assertFailure(r, 'invalid_arguments', 'The tool call could not be read: it has none of the fields of the shapes toolgate reads.',
        'Anthropic tool_use', 'function_call', 'Chat Completions', 'AI SDK tool-call', 'Gemini { functionCall',
        'Bedrock Converse { toolUse', 'LangChain', 'MCP tools/call')
      assert.equal(r.attempts, 0)
      assert.deepEqual(r.metadata.stages, ['lookup:invalid_arguments'])
    }
    assertSuccess(results[2])
    assert.equal(calls.echo, 1)
  })

  it('answers a call in a known shape that lacks a name with the tools there are, keeping its id', async () => {
    const { gate } = echoGate()
    const results = await gate.execute([
      { id: 'e', name: '' },
      { functionCall: { id: 'g', args: { q: 'x' } } },
      { toolUse: { toolUseId: 't1', input: {} } },
      { id: 'lc', args: '{"q":', type: 'invalid_tool_call', error: 'no name' },
    ])
    assert.deepEqual(results.map((r) => r.callId), ['e', 'g', 't1', 'lc'])
    for (const r of results) assertFailure(r, 'unknown_tool', 'The call names no tool. Available tools: echo, other.')
  })
})
