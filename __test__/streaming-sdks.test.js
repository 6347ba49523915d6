'use strict'
// tap() on the stream objects the provider SDKs themselves return: each client talks to a fake transport that answers
// with a canned streaming HTTP response (the wire format each SDK parses), so no request leaves the process. What the
// SDK yields must pass through tap unchanged, and the calls it carries must run with the provider's ids.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { Readable } = require('node:stream')
const { ToolExecutor } = require('..')
const { deferred, kinds } = require('./helpers.js')

const Anthropic = require('@anthropic-ai/sdk')
const OpenAI = require('openai')
const { GoogleGenAI } = require('@google/genai')
const { BedrockRuntimeClient, ConverseStreamCommand } = require('@aws-sdk/client-bedrock-runtime')

// The Smithy helpers ship inside @smithy/core (no separate eventstream-codec package in this tree): resolved from
// the Bedrock client, so that the codec is the one its deserializer reads with.
const smithy = (name) => require(require.resolve(name, { paths: [require.resolve('@aws-sdk/client-bedrock-runtime')] }))
const { EventStreamCodec } = smithy('@smithy/core/event-streams')
const { toUtf8, fromUtf8 } = smithy('@smithy/core/serde')
const { HttpResponse } = smithy('@smithy/core/protocols')

const OUTPUTS = ['search {"q":"cats"}', 'save {"text":"hi"}']

/** A gate with a read-only `search` and a state-changing `save`, both echoing their arguments; `searchRan` settles
 * when search's handler starts. */
function echoGate() {
  const gate = new ToolExecutor()
  const started = []
  const searchRan = deferred()
  const handler = (name) => (args) => {
    started.push(name)
    if (name === 'search') searchRan.resolve()
    return `${name} ${JSON.stringify(args)}`
  }
  gate.register({ name: 'search', readOnly: true, parameters: { type: 'object', properties: { q: { type: 'string' } } }, handler: handler('search') })
  gate.register({ name: 'save', parameters: { type: 'object', properties: { text: { type: 'string' } } }, handler: handler('save') })
  return { gate, started, searchRan }
}

/** Everything an async iterable yields. */
async function drain(iterable) {
  const events = []
  for await (const event of iterable) events.push(event)
  return events
}

/** `promise`, or a failure naming `what` if it has not settled in a long while: a missing step fails, not hangs. */
function within(promise, what) {
  let timer
  const late = new Promise((_resolve, reject) => (timer = setTimeout(() => reject(new Error(`never happened: ${what}`)), 5000)))
  return Promise.race([promise, late]).finally(() => clearTimeout(timer))
}

/** A response body that sends each chunk separately, as a server flushing event by event does, then closes or, with
 * `error`, breaks off as a dropped connection does. */
function bodyOf(chunks, { error } = {}) {
  const encoder = new TextEncoder()
  let next = 0
  return new ReadableStream({
    pull(controller) {
      if (next < chunks.length) controller.enqueue(encoder.encode(chunks[next++]))
      else if (error) controller.error(error)
      else controller.close()
    },
  })
}

/** A fetch that answers every request with a fresh SSE response of `chunks`, and records what was asked. */
function fakeFetch(chunks, options) {
  const requests = []
  const fetch = async (url, init) => {
    requests.push({ url: String(url), body: JSON.parse(init.body) })
    return new Response(bodyOf(chunks, options), { status: 200, headers: { 'content-type': 'text/event-stream' } })
  }
  return { fetch, requests }
}

/**
 * Reads one SDK stream through tap while the test watches: at the event `secondCallBegins` picks out, waits until the
 * first call's handler has run, and notes which handlers had started by then. Returns what tap yielded and the
 * turn's results.
 */
async function tapped(gateParts, stream, format, secondCallBegins) {
  const { gate, started, searchRan } = gateParts
  const turn = gate.turn()
  const yielded = []
  let startedAtSecondCall
  for await (const event of turn.tap(stream, format)) {
    yielded.push(event)
    if (startedAtSecondCall === undefined && secondCallBegins(event)) {
      await within(searchRan.promise, 'the first call ran while the stream went on')
      startedAtSecondCall = [...started]
    }
  }
  return { yielded, startedAtSecondCall, results: await turn.results, turn, gate }
}

/** What every provider's stream must give: the calls, by the provider's ids, each run once with its arguments. */
function assertBothCallsRan(results, ids) {
  assert.deepEqual(results.map((r) => r.callId), ids)
  assert.deepEqual(results.map((r) => r.name), ['search', 'save'])
  assert.deepEqual(kinds(results), ['ok', 'ok'])
  assert.deepEqual(results.map((r) => r.output), OUTPUTS)
}

describe('tap() on @anthropic-ai/sdk streams', () => {
  const usage = { input_tokens: 412, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
  // The Messages API's wire events, as the SDK's RawMessageStreamEvent types spell them; `ping` is on the wire but
  // the SDK drops it.
  const EVENTS = [
    { type: 'message_start', message: { id: 'msg_01XFDUDYJgAACzvnptvVoYEL', type: 'message', role: 'assistant', model: 'claude-sonnet-4-5', content: [], stop_reason: null, stop_sequence: null, usage } },
    { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
    { type: 'ping' },
    { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Let me look ' } },
    { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'that up.' } },
    { type: 'content_block_stop', index: 0 },
    { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'toolu_01T1x1fJ34qAmk2tNTrN7Up6', name: 'search', input: {}, caller: { type: 'direct' } } },
    { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '' } },
    { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"q": "c' } },
    { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: 'ats"}' } },
    { type: 'content_block_stop', index: 1 },
    { type: 'content_block_start', index: 2, content_block: { type: 'tool_use', id: 'toolu_01AbCdEf9Gh8Ij7Kl6Mn5Op4', name: 'save', input: {}, caller: { type: 'direct' } } },
    { type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: '{"text"' } },
    { type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: ': "hi"}' } },
    { type: 'content_block_stop', index: 2 },
    { type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null, container: null, stop_details: null }, usage: { output_tokens: 89 } },
    { type: 'message_stop' },
  ]
  const IDS = ['toolu_01T1x1fJ34qAmk2tNTrN7Up6', 'toolu_01AbCdEf9Gh8Ij7Kl6Mn5Op4']
  const sse = (events) => events.map((event) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`)
  const secondCallBegins = (event) => event.type === 'content_block_start' && event.index === 2
  const request = { model: 'claude-sonnet-4-5', max_tokens: 1024, messages: [{ role: 'user', content: 'Find cats, then save hi.' }] }

  it('messages.create({ stream: true }): tap yields the Stream\'s events unchanged and runs both calls, the first before the second streams', async () => {
    const { fetch, requests } = fakeFetch(sse(EVENTS))
    const client = new Anthropic({ apiKey: 'test', fetch, maxRetries: 0 })
    const plain = await drain(await client.messages.create({ ...request, stream: true }))
    assert.equal(plain.length, EVENTS.length - 1, 'the SDK itself drops the ping')

    const parts = echoGate()
    const stream = await client.messages.create({ ...request, stream: true })
    assert.equal(stream.constructor.name, 'Stream')
    const { yielded, startedAtSecondCall, results, turn, gate } = await tapped(parts, stream, 'anthropic', secondCallBegins)
    assert.deepEqual(yielded, plain)
    assert.deepEqual(yielded.filter((e) => e.content_block?.type === 'tool_use').map((e) => e.content_block.id), IDS)
    assert.deepEqual(startedAtSecondCall, ['search'], 'search ran while save was still streaming')
    assertBothCallsRan(results, IDS)
    assert.equal(turn.open, false, 'the turn ended with the stream')
    assert.equal(requests.length, 2)
    assert.match(requests[1].url, /\/v1\/messages$/)
    assert.equal(requests[1].body.stream, true)
    await gate.close()
  })

  it('messages.stream(): the MessageStream iterates the raw events, and tap reads them as it reads the Stream', async () => {
    const { fetch } = fakeFetch(sse(EVENTS))
    const client = new Anthropic({ apiKey: 'test', fetch, maxRetries: 0 })
    const plain = await drain(client.messages.stream(request))
    assert.equal(plain.length, EVENTS.length - 1)

    const parts = echoGate()
    const messageStream = client.messages.stream(request)
    const { yielded, startedAtSecondCall, results, gate } = await tapped(parts, messageStream, 'anthropic', secondCallBegins)
    assert.deepEqual(yielded, plain)
    assert.deepEqual(startedAtSecondCall, ['search'])
    assertBothCallsRan(results, IDS)
    // The SDK's own accumulation saw the same stream: its final message holds the calls tap ran.
    const message = await messageStream.finalMessage()
    assert.deepEqual(message.content.filter((b) => b.type === 'tool_use').map((b) => [b.id, b.input]), [[IDS[0], { q: 'cats' }], [IDS[1], { text: 'hi' }]])
    await gate.close()
  })

  it('a body that ends inside the second call\'s arguments: the first call runs, the second is answered invalid_arguments, unrun', async () => {
    // The connection closes cleanly after the first half of save's arguments: no content_block_stop, no message_stop.
    const cut = EVENTS.slice(0, 13)
    const { fetch } = fakeFetch(sse(cut))
    const client = new Anthropic({ apiKey: 'test', fetch, maxRetries: 0 })
    const { gate, started } = echoGate()
    const turn = gate.turn()
    const yielded = await drain(turn.tap(await client.messages.create({ ...request, stream: true }), 'anthropic'))
    assert.equal(yielded.length, cut.length - 1, 'the SDK ends its iteration without an error')
    const results = await turn.results
    assert.deepEqual(results.map((r) => r.callId), IDS)
    assert.deepEqual(kinds(results), ['ok', 'invalid_arguments'])
    assert.equal(results[0].output, OUTPUTS[0])
    assert.match(results[1].error, /the stream ended inside this call's arguments/)
    assert.match(results[1].error, /\{"text"/, 'what arrived is quoted')
    assert.deepEqual(started, ['search'], 'save never ran')
    await gate.close()
  })

  it('a connection that breaks inside the second call\'s arguments: the SDK\'s error reaches the reader, and the calls are answered as when the body ends', async () => {
    const { fetch } = fakeFetch(sse(EVENTS.slice(0, 13)), { error: new TypeError('terminated') })
    const client = new Anthropic({ apiKey: 'test', fetch, maxRetries: 0 })
    const { gate, started } = echoGate()
    const turn = gate.turn()
    const stream = await client.messages.create({ ...request, stream: true })
    const yielded = []
    await assert.rejects(async () => {
      for await (const event of turn.tap(stream, 'anthropic')) yielded.push(event)
    }, { name: 'TypeError', message: 'terminated' })
    assert.equal(yielded.length, 12, 'every event before the break was yielded')
    const results = await turn.results
    assert.deepEqual(kinds(results), ['ok', 'invalid_arguments'])
    assert.deepEqual(results.map((r) => r.callId), IDS)
    assert.match(results[1].error, /the stream ended inside this call's arguments/)
    assert.deepEqual(started, ['search'])
    await gate.close()
  })

  it('a MessageStream whose connection breaks inside the second call\'s arguments: the calls are answered the same, rethrown or not', async () => {
    // A MessageStream reads ahead of its reader; once its events are queued, its iterator ends quietly on a broken
    // connection instead of throwing (the error reaches done() and finalMessage() only). Either way the turn is the same.
    const { fetch } = fakeFetch(sse(EVENTS.slice(0, 13)), { error: new TypeError('terminated') })
    const client = new Anthropic({ apiKey: 'test', fetch, maxRetries: 0 })
    const { gate, started } = echoGate()
    const turn = gate.turn()
    const messageStream = client.messages.stream(request)
    const yielded = []
    try {
      for await (const event of turn.tap(messageStream, 'anthropic')) yielded.push(event)
    } catch (error) {
      assert.match(String(error), /terminated/)
    }
    await assert.rejects(messageStream.done(), /terminated/)
    assert.equal(yielded.length, 12)
    const results = await turn.results
    assert.deepEqual(results.map((r) => r.callId), IDS)
    assert.deepEqual(kinds(results), ['ok', 'invalid_arguments'])
    assert.match(results[1].error, /the stream ended inside this call's arguments/)
    assert.deepEqual(started, ['search'])
    await gate.close()
  })
})

describe('tap() on openai streams', () => {
  const chunk = (delta, finish = null) => ({ id: 'chatcmpl-BqTz3', object: 'chat.completion.chunk', created: 1767225600, model: 'gpt-4.1-2025-04-14', system_fingerprint: 'fp_b3f1157249', service_tier: 'default', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], usage: null })
  // Chat Completions chunks as ChatCompletionChunk spells them: a call's id and name in its first piece, its
  // arguments in the pieces after; the usage chunk (stream_options.include_usage) has no choices.
  const CHUNKS = [
    chunk({ role: 'assistant', content: '', refusal: null }),
    chunk({ content: 'Let me look that up.' }),
    chunk({ tool_calls: [{ index: 0, id: 'call_Xv1GQp8HqWk4', type: 'function', function: { name: 'search', arguments: '' } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: '{"q":' } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: '"cats"}' } }] }),
    chunk({ tool_calls: [{ index: 1, id: 'call_Lm7sRt2NbZy9', type: 'function', function: { name: 'save', arguments: '' } }] }),
    chunk({ tool_calls: [{ index: 1, function: { arguments: '{"text":' } }] }),
    chunk({ tool_calls: [{ index: 1, function: { arguments: '"hi"}' } }] }),
    chunk({}, 'tool_calls'),
    { ...chunk({}), choices: [], usage: { prompt_tokens: 81, completion_tokens: 40, total_tokens: 121 } },
  ]
  const chatSse = (chunks) => [...chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`), 'data: [DONE]\n\n']

  it('chat.completions.create({ stream: true }): tap yields the chunks unchanged and runs each call once the next one starts', async () => {
    const { fetch, requests } = fakeFetch(chatSse(CHUNKS))
    const client = new OpenAI({ apiKey: 'test', fetch, maxRetries: 0 })
    const request = { model: 'gpt-4.1', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'Find cats, then save hi.' }] }
    const plain = await drain(await client.chat.completions.create(request))
    assert.equal(plain.length, CHUNKS.length, '[DONE] ends the SDK\'s iteration and is not an event')

    const secondCallBegins = (c) => c.choices[0]?.delta?.tool_calls?.[0]?.index === 1
    const { yielded, startedAtSecondCall, results, gate } = await tapped(echoGate(), await client.chat.completions.create(request), 'openai-chat', secondCallBegins)
    assert.deepEqual(yielded, plain)
    assert.equal(yielded.at(-1).usage.total_tokens, 121)
    assert.deepEqual(startedAtSecondCall, ['search'], 'index 1 starting completes index 0')
    assertBothCallsRan(results, ['call_Xv1GQp8HqWk4', 'call_Lm7sRt2NbZy9'])
    assert.match(requests[1].url, /\/chat\/completions$/)
    await gate.close()
  })

  it('chat.completions.create({ stream: true }) ending without a finish_reason: the last call is cut, not run', async () => {
    // The body ends after save's first argument piece, before its choice finishes.
    const { fetch } = fakeFetch(CHUNKS.slice(0, 7).map((c) => `data: ${JSON.stringify(c)}\n\n`))
    const client = new OpenAI({ apiKey: 'test', fetch, maxRetries: 0 })
    const { gate, started } = echoGate()
    const turn = gate.turn()
    const yielded = await drain(turn.tap(await client.chat.completions.create({ model: 'gpt-4.1', stream: true, messages: [] }), 'openai-chat'))
    assert.equal(yielded.length, 7)
    const results = await turn.results
    assert.deepEqual(results.map((r) => r.callId), ['call_Xv1GQp8HqWk4', 'call_Lm7sRt2NbZy9'])
    assert.deepEqual(kinds(results), ['ok', 'invalid_arguments'])
    assert.match(results[1].error, /the stream ended inside this call's arguments/)
    assert.deepEqual(started, ['search'])
    await gate.close()
  })

  const response = (status, output) => ({
    id: 'resp_68a1b2c3d4e5f6', object: 'response', created_at: 1767225600, status, background: false, error: null,
    incomplete_details: null, instructions: null, model: 'gpt-4.1-2025-04-14', output, parallel_tool_calls: true,
    previous_response_id: null, temperature: 1, text: { format: { type: 'text' } }, tool_choice: 'auto', tools: [], top_p: 1,
    truncation: 'disabled', usage: null, metadata: {},
  })
  const message = { id: 'msg_68a1b2c3', type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', annotations: [], logprobs: [], text: 'Let me look that up.' }] }
  const searchItem = (status, args) => ({ id: 'fc_68a1b2c4', type: 'function_call', status, arguments: args, call_id: 'call_Q2w3E4r5T6y7', name: 'search' })
  const saveItem = (status, args) => ({ id: 'fc_68a1b2c5', type: 'function_call', status, arguments: args, call_id: 'call_U8i9O0p1A2s3', name: 'save' })
  // Responses API events as ResponseStreamEvent spells them: a text message, then two function_call items whose
  // arguments stream as deltas; each is complete at its `.done`, before its item is.
  const RESPONSE_EVENTS = [
    { type: 'response.created', response: response('in_progress', []) },
    { type: 'response.in_progress', response: response('in_progress', []) },
    { type: 'response.output_item.added', output_index: 0, item: { ...message, status: 'in_progress', content: [] } },
    { type: 'response.content_part.added', item_id: message.id, output_index: 0, content_index: 0, part: { type: 'output_text', annotations: [], logprobs: [], text: '' } },
    { type: 'response.output_text.delta', item_id: message.id, output_index: 0, content_index: 0, delta: 'Let me look that up.', logprobs: [] },
    { type: 'response.output_text.done', item_id: message.id, output_index: 0, content_index: 0, text: 'Let me look that up.', logprobs: [] },
    { type: 'response.content_part.done', item_id: message.id, output_index: 0, content_index: 0, part: message.content[0] },
    { type: 'response.output_item.done', output_index: 0, item: message },
    { type: 'response.output_item.added', output_index: 1, item: searchItem('in_progress', '') },
    { type: 'response.function_call_arguments.delta', item_id: 'fc_68a1b2c4', output_index: 1, delta: '{"q":' },
    { type: 'response.function_call_arguments.delta', item_id: 'fc_68a1b2c4', output_index: 1, delta: '"cats"}' },
    { type: 'response.function_call_arguments.done', item_id: 'fc_68a1b2c4', output_index: 1, arguments: '{"q":"cats"}' },
    { type: 'response.output_item.done', output_index: 1, item: searchItem('completed', '{"q":"cats"}') },
    { type: 'response.output_item.added', output_index: 2, item: saveItem('in_progress', '') },
    { type: 'response.function_call_arguments.delta', item_id: 'fc_68a1b2c5', output_index: 2, delta: '{"text":' },
    { type: 'response.function_call_arguments.delta', item_id: 'fc_68a1b2c5', output_index: 2, delta: '"hi"}' },
    { type: 'response.function_call_arguments.done', item_id: 'fc_68a1b2c5', output_index: 2, arguments: '{"text":"hi"}' },
    { type: 'response.output_item.done', output_index: 2, item: saveItem('completed', '{"text":"hi"}') },
    { type: 'response.completed', response: response('completed', [message, searchItem('completed', '{"q":"cats"}'), saveItem('completed', '{"text":"hi"}')]) },
  ].map((event, i) => ({ ...event, sequence_number: i }))

  it('responses.create({ stream: true }): tap yields the events unchanged and runs both calls by call_id, not item id', async () => {
    const { fetch, requests } = fakeFetch(RESPONSE_EVENTS.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`))
    const client = new OpenAI({ apiKey: 'test', fetch, maxRetries: 0 })
    const request = { model: 'gpt-4.1', stream: true, input: 'Find cats, then save hi.' }
    const plain = await drain(await client.responses.create(request))
    assert.equal(plain.length, RESPONSE_EVENTS.length)

    const secondCallBegins = (e) => e.type === 'response.output_item.added' && e.output_index === 2
    const { yielded, startedAtSecondCall, results, gate } = await tapped(echoGate(), await client.responses.create(request), 'openai-responses', secondCallBegins)
    assert.deepEqual(yielded, plain)
    assert.deepEqual(yielded.map((e) => e.sequence_number), RESPONSE_EVENTS.map((_, i) => i))
    assert.deepEqual(startedAtSecondCall, ['search'])
    assertBothCallsRan(results, ['call_Q2w3E4r5T6y7', 'call_U8i9O0p1A2s3'])
    assert.match(requests[1].url, /\/responses$/)
    await gate.close()
  })

  it('the helper streams chat.completions.stream() and responses.stream() iterate the same chunks and events, and tap reads them alike', async () => {
    const chat = new OpenAI({ apiKey: 'test', fetch: fakeFetch(chatSse(CHUNKS)).fetch, maxRetries: 0 })
    const chatRequest = { model: 'gpt-4.1', messages: [{ role: 'user', content: 'Find cats, then save hi.' }] }
    const chatGate = echoGate()
    const chatTurn = chatGate.gate.turn()
    const chatYielded = await drain(chatTurn.tap(chat.chat.completions.stream(chatRequest), 'openai-chat'))
    assert.deepEqual(chatYielded, CHUNKS, 'the ChatCompletionStream hands on the chunks as they came')
    assertBothCallsRan(await chatTurn.results, ['call_Xv1GQp8HqWk4', 'call_Lm7sRt2NbZy9'])
    await chatGate.gate.close()

    const responses = new OpenAI({ apiKey: 'test', fetch: fakeFetch(RESPONSE_EVENTS.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`)).fetch, maxRetries: 0 })
    const { gate } = echoGate()
    const turn = gate.turn()
    const responseStream = responses.responses.stream({ model: 'gpt-4.1', input: 'Find cats, then save hi.' })
    const yielded = await drain(turn.tap(responseStream, 'openai-responses'))
    assert.deepEqual(yielded, RESPONSE_EVENTS)
    assertBothCallsRan(await turn.results, ['call_Q2w3E4r5T6y7', 'call_U8i9O0p1A2s3'])
    const final = await responseStream.finalResponse()
    assert.deepEqual(final.output.filter((item) => item.type === 'function_call').map((item) => item.call_id), ['call_Q2w3E4r5T6y7', 'call_U8i9O0p1A2s3'])
    await gate.close()
  })
})

describe('tap() on @google/genai streams', () => {
  // GenerateContentResponse chunks as the Gemini API sends them with alt=sse: each functionCall part whole, with its
  // id, the first carrying the thought signature; the last chunk has the finishReason and the usage.
  const meta = { modelVersion: 'gemini-3-pro-preview', responseId: 'kX9haOr2Dq2m1dkP' }
  const CHUNKS = [
    { candidates: [{ content: { parts: [{ text: 'Let me look that up.' }], role: 'model' }, index: 0 }], usageMetadata: { promptTokenCount: 40, totalTokenCount: 40 }, ...meta },
    { candidates: [{ content: { parts: [{ functionCall: { id: 'fc-7d1e0a', name: 'search', args: { q: 'cats' } }, thoughtSignature: 'CiQB0e2Kb0F5' }], role: 'model' }, index: 0 }], usageMetadata: { promptTokenCount: 40, totalTokenCount: 52 }, ...meta },
    { candidates: [{ content: { parts: [{ functionCall: { id: 'fc-8f2b1c', name: 'save', args: { text: 'hi' } } }], role: 'model' }, index: 0 }], usageMetadata: { promptTokenCount: 40, totalTokenCount: 60 }, ...meta },
    { candidates: [{ content: { parts: [{ text: '' }], role: 'model' }, finishReason: 'STOP', index: 0 }], usageMetadata: { promptTokenCount: 40, candidatesTokenCount: 24, totalTokenCount: 64 }, ...meta },
  ]
  const sse = (chunks) => chunks.map((c) => `data: ${JSON.stringify(c)}\r\n\r\n`)

  it('models.generateContentStream(): tap yields the SDK\'s GenerateContentResponse chunks unchanged and runs each whole call by its id', async () => {
    const { fetch, requests } = fakeFetch(sse(CHUNKS))
    // httpOptions.fetch: the SDK's own way to swap its transport.
    const ai = new GoogleGenAI({ apiKey: 'test', httpOptions: { fetch } })
    const request = { model: 'gemini-3-pro-preview', contents: 'Find cats, then save hi.', config: { tools: [{ functionDeclarations: [{ name: 'search' }, { name: 'save' }] }] } }
    const plain = await drain(await ai.models.generateContentStream(request))
    assert.equal(plain.length, CHUNKS.length)
    assert.deepEqual(plain.flatMap((c) => c.functionCalls ?? []).map((call) => call.id), ['fc-7d1e0a', 'fc-8f2b1c'], 'the SDK parsed the calls')

    const parts = echoGate()
    const stream = await ai.models.generateContentStream(request)
    // Gemini sends a call whole: by the chunk with save, search (the chunk before) has run; save may have started too.
    const secondCallBegins = (c) => c.functionCalls?.[0]?.name === 'save'
    const { yielded, startedAtSecondCall, results, gate } = await tapped(parts, stream, 'gemini', secondCallBegins)
    assert.deepEqual(yielded, plain)
    assert.equal(yielded[0].constructor, plain[0].constructor, 'the SDK\'s class, not a copy')
    assert.equal(yielded[0].text, 'Let me look that up.')
    assert.equal(startedAtSecondCall?.[0], 'search')
    assertBothCallsRan(results, ['fc-7d1e0a', 'fc-8f2b1c'])
    assert.match(requests[1].url, /models\/gemini-3-pro-preview:streamGenerateContent\?alt=sse$/)
    await gate.close()
  })
})

describe('tap() on @aws-sdk/client-bedrock-runtime streams', () => {
  const codec = new EventStreamCodec(toUtf8, fromUtf8)
  const header = (value) => ({ type: 'string', value })
  /** One ConverseStream event as the service frames it: `{ [eventType]: body }` → an AWS event-stream message. */
  const frame = (event) => {
    const [type, body] = Object.entries(event)[0]
    return codec.encode({ headers: { ':message-type': header('event'), ':event-type': header(type), ':content-type': header('application/json') }, body: fromUtf8(JSON.stringify(body)) })
  }
  // ConverseStreamOutput events, as the client's models spell them.
  const EVENTS = [
    { messageStart: { role: 'assistant' } },
    { contentBlockDelta: { contentBlockIndex: 0, delta: { text: 'Let me look ' } } },
    { contentBlockDelta: { contentBlockIndex: 0, delta: { text: 'that up.' } } },
    { contentBlockStop: { contentBlockIndex: 0 } },
    { contentBlockStart: { contentBlockIndex: 1, start: { toolUse: { toolUseId: 'tooluse_kZJMlvQmRJ6eAyJE5GIl7Q', name: 'search' } } } },
    { contentBlockDelta: { contentBlockIndex: 1, delta: { toolUse: { input: '{"q": "c' } } } },
    { contentBlockDelta: { contentBlockIndex: 1, delta: { toolUse: { input: 'ats"}' } } } },
    { contentBlockStop: { contentBlockIndex: 1 } },
    { contentBlockStart: { contentBlockIndex: 2, start: { toolUse: { toolUseId: 'tooluse_Wq3b8nTyQ0mY2vX1cZr9aA', name: 'save' } } } },
    { contentBlockDelta: { contentBlockIndex: 2, delta: { toolUse: { input: '{"text":' } } } },
    { contentBlockDelta: { contentBlockIndex: 2, delta: { toolUse: { input: ' "hi"}' } } } },
    { contentBlockStop: { contentBlockIndex: 2 } },
    { messageStop: { stopReason: 'tool_use' } },
    { metadata: { usage: { inputTokens: 412, outputTokens: 89, totalTokens: 501 }, metrics: { latencyMs: 1520 } } },
  ]
  const IDS = ['tooluse_kZJMlvQmRJ6eAyJE5GIl7Q', 'tooluse_Wq3b8nTyQ0mY2vX1cZr9aA']

  /** A client whose request handler answers every request with `events` framed, and records the requests. */
  function clientOf(events) {
    const requests = []
    const requestHandler = {
      handle: async (request) => {
        requests.push(request)
        const body = Readable.from(events.map((event) => Buffer.from(frame(event))))
        return { response: new HttpResponse({ statusCode: 200, headers: { 'content-type': 'application/vnd.amazon.eventstream' }, body }) }
      },
    }
    const client = new BedrockRuntimeClient({ region: 'us-east-1', credentials: { accessKeyId: 'x', secretAccessKey: 'y' }, requestHandler })
    return { client, requests }
  }
  const command = () => new ConverseStreamCommand({ modelId: 'anthropic.claude-sonnet-4-5-v1:0', messages: [{ role: 'user', content: [{ text: 'Find cats, then save hi.' }] }] })

  it('client.send(ConverseStreamCommand): tap takes the whole response, yields its stream\'s events unchanged and runs both calls', async () => {
    const { client, requests } = clientOf(EVENTS)
    const plainResponse = await client.send(command())
    const plain = await drain(plainResponse.stream)
    assert.equal(plain.length, EVENTS.length)
    assert.deepEqual(plain, EVENTS, 'the SDK decoded what was framed')

    const secondCallBegins = (e) => e.contentBlockStart?.contentBlockIndex === 2
    const response = await client.send(command())
    assert.equal(typeof response.stream[Symbol.asyncIterator], 'function')
    const { yielded, startedAtSecondCall, results, gate } = await tapped(echoGate(), response, 'bedrock', secondCallBegins)
    assert.deepEqual(yielded, plain)
    assert.deepEqual(startedAtSecondCall, ['search'])
    assertBothCallsRan(results, IDS)
    assert.equal(requests.length, 2)
    assert.equal(requests[1].path, '/model/anthropic.claude-sonnet-4-5-v1%3A0/converse-stream')
    client.destroy()
    await gate.close()
  })

  it('a ConverseStream that ends inside the second call\'s input: the first call runs, the second is cut', async () => {
    const { client } = clientOf(EVENTS.slice(0, 10))
    const { gate, started } = echoGate()
    const turn = gate.turn()
    const yielded = await drain(turn.tap(await client.send(command()), 'bedrock'))
    assert.equal(yielded.length, 10)
    const results = await turn.results
    assert.deepEqual(results.map((r) => r.callId), IDS)
    assert.deepEqual(kinds(results), ['ok', 'invalid_arguments'])
    assert.match(results[1].error, /the stream ended inside this call's arguments/)
    assert.deepEqual(started, ['search'])
    client.destroy()
    await gate.close()
  })
})
