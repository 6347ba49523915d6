'use strict'
// A whole turn per provider through its own SDK, on recorded replies: the definitions go out, the model's calls
// come back in the provider's shape, the gate runs them (a structured output, an image, a failure) and the next
// request carries the formatted results. Each SDK gets a transport that records the request and answers the next
// recorded reply, so what it would send to the API is checked without a network.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { Readable } = require('node:stream')
const { formatResults } = require('..')
const { gateWith, assertFailure, assertSuccess } = require('./helpers')
const gemini = require('./fixtures/providers/gemini.json')
const bedrock = require('./fixtures/providers/bedrock.json')

const GENERATED_ID = /^call_[A-Za-z0-9]{16}$/
/** A 1×1 PNG, base64: what the screenshot tool returns. */
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='
const FORECAST = { city: 'Lisbon', days: [{ date: '2026-12-02', highC: 14, rain: true }, { date: '2026-12-03', highC: 16, rain: false }] }
const PROMPT = 'Do I need a coat in Lisbon tomorrow? Also check the status page and restart ingest-3.'

const NODE_MAJOR = Number(process.versions.node.split('.')[0])
const needsNode22 = (packages) => NODE_MAJOR < 22 && `${packages}: Node >= 22 in engines; this is Node ${process.versions.node}`

/** The tools the recorded turns call: one structured output, one image, one failure. */
function weatherGate() {
  return gateWith([
    {
      name: 'get_forecast',
      description: 'Daily forecast for a city',
      readOnly: true,
      parameters: {
        type: 'object',
        properties: {
          city: { type: 'string', minLength: 1 },
          days: { type: 'integer', minimum: 1, maximum: 7 },
          units: { enum: ['c', 'f'] },
        },
        required: ['city'],
        additionalProperties: false,
      },
      handler: () => FORECAST,
    },
    {
      name: 'screenshot',
      description: 'A screenshot of a web page',
      readOnly: true,
      parameters: { type: 'object', properties: { url: { type: 'string', format: 'uri' } }, required: ['url'] },
      handler: () => [{ type: 'text', text: 'status page' }, { type: 'image', data: PNG, mediaType: 'image/png' }],
    },
    {
      name: 'restart_worker',
      description: 'Restarts a worker',
      parameters: { type: 'object', properties: { worker: { type: 'string' } }, required: ['worker'] },
      handler: () => {
        throw Object.assign(new Error('permission denied'), { code: 'EACCES' })
      },
    },
  ]).gate
}

/** The three results of the recorded turn, whichever provider's shape the calls came in. */
function checkResults(results, ids) {
  assert.deepEqual(results.map((r) => r.callId), ids)
  assert.deepEqual(results.map((r) => r.name), ['get_forecast', 'screenshot', 'restart_worker'])
  assertSuccess(results[0], JSON.stringify(FORECAST))
  assertSuccess(results[1], 'status page\n[image 1: image/png, 70 bytes]')
  assertFailure(results[2], 'handler_error', 'Tool "restart_worker" failed: Error: permission denied')
}

describe('Gemini through @google/genai', { skip: needsNode22('@google/genai') }, () => {
  const requests = []
  let realFetch
  before(() => {
    realFetch = globalThis.fetch
    globalThis.fetch = async (url, init) => {
      requests.push({ url: String(url), body: JSON.parse(init.body) })
      // Each conversation is a turn of calls, then the answer.
      const reply = gemini.replies[(requests.length - 1) % gemini.replies.length]
      return new Response(JSON.stringify(reply), { status: 200, headers: { 'content-type': 'application/json' } })
    }
  })
  after(() => {
    globalThis.fetch = realFetch
  })

  it('definitions in, functionCall parts out, functionResponse parts in the next request', async () => {
    const { GoogleGenAI } = await import('@google/genai')
    const gate = weatherGate()
    const ai = new GoogleGenAI({ apiKey: 'test-key' })
    const config = { tools: [{ functionDeclarations: gate.definitions('gemini') }] }
    const contents = [{ role: 'user', parts: [{ text: PROMPT }] }]

    const first = await ai.models.generateContent({ model: 'gemini-3-pro-preview', contents, config })
    contents.push(first.candidates[0].content)
    const calls = first.candidates[0].content.parts.filter((part) => part.functionCall)
    const results = await gate.execute(calls)
    const generated = results[0].callId
    assert.match(generated, GENERATED_ID, 'Gemini sent no id for the first call')
    checkResults(results, [generated, 'fc_7d2e', 'fc_8a11'])
    contents.push(formatResults(results, 'gemini'))
    const second = await ai.models.generateContent({ model: 'gemini-3-pro-preview', contents, config })
    assert.match(second.text, /^Take a coat/)

    assert.deepEqual(requests[0].body.tools, [{
      functionDeclarations: [
        {
          name: 'get_forecast',
          description: 'Daily forecast for a city',
          parameters: {
            type: 'OBJECT',
            properties: {
              city: { type: 'STRING', minLength: '1' },
              days: { type: 'INTEGER', minimum: 1, maximum: 7 },
              units: { type: 'STRING', enum: ['c', 'f'] },
            },
            required: ['city'],
          },
        },
        {
          name: 'screenshot',
          description: 'A screenshot of a web page',
          parameters: { type: 'OBJECT', properties: { url: { type: 'STRING', format: 'uri' } }, required: ['url'] },
        },
        {
          name: 'restart_worker',
          description: 'Restarts a worker',
          parameters: { type: 'OBJECT', properties: { worker: { type: 'STRING' } }, required: ['worker'] },
        },
      ],
    }])
    const sent = requests[1].body.contents
    assert.deepEqual(sent[1], gemini.replies[0].candidates[0].content, "the model's turn goes back as it came, thought signature and all")
    assert.deepEqual(sent[2], {
      role: 'user',
      parts: [
        { functionResponse: { name: 'get_forecast', id: generated, response: { output: FORECAST } } },
        {
          functionResponse: {
            name: 'screenshot',
            id: 'fc_7d2e',
            response: { output: 'status page\n[image 1: image/png, 70 bytes]' },
            parts: [{ inlineData: { mimeType: 'image/png', data: PNG } }],
          },
        },
        { functionResponse: { name: 'restart_worker', id: 'fc_8a11', response: { error: results[2].output } } },
      ],
    })
  })

  it("takes response.functionCalls as they are, and Vertex AI's client sends the same content", async () => {
    const { GoogleGenAI } = await import('@google/genai')
    const gate = weatherGate()
    const first = await new GoogleGenAI({ apiKey: 'test-key' }).models.generateContent({ model: 'gemini-3-pro-preview', contents: PROMPT })
    const results = await gate.execute(first.functionCalls)
    checkResults(results, [results[0].callId, 'fc_7d2e', 'fc_8a11'])
    assert.match(results[0].callId, GENERATED_ID)

    const authClient = { getRequestHeaders: async () => new Headers({ authorization: 'Bearer t' }), getAccessToken: async () => ({ token: 't' }) }
    const vertex = new GoogleGenAI({ vertexai: true, project: 'p', location: 'us-central1', googleAuthOptions: { authClient } })
    const message = formatResults(results, 'gemini')
    await vertex.models.generateContent({ model: 'gemini-3-pro-preview', contents: [{ role: 'user', parts: [{ text: PROMPT }] }, first.candidates[0].content, message] })
    const request = requests.at(-1)
    assert.match(request.url, /aiplatform\.googleapis\.com/)
    assert.deepEqual(request.body.contents.at(-1), message)
  })
})

/** A Bedrock runtime client whose transport records each request and answers the next recorded reply. */
function recordingBedrock(BedrockRuntimeClient, requests) {
  const requestHandler = {
    handle: async (request) => {
      requests.push({ path: request.path, body: JSON.parse(new TextDecoder().decode(request.body)) })
      const reply = Buffer.from(JSON.stringify(bedrock.replies[requests.length - 1]))
      return { response: { statusCode: 200, headers: { 'content-type': 'application/json' }, body: Readable.from([reply]) } }
    },
  }
  return new BedrockRuntimeClient({ region: 'us-east-1', credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'test-secret' }, requestHandler })
}

describe('Bedrock Converse through @aws-sdk/client-bedrock-runtime', () => {
  it('toolSpec definitions in, toolUse blocks out, toolResult blocks in the next request', async () => {
    const { BedrockRuntimeClient, ConverseCommand } = require('@aws-sdk/client-bedrock-runtime')
    const requests = []
    const client = recordingBedrock(BedrockRuntimeClient, requests)
    const gate = weatherGate()
    const modelId = 'anthropic.claude-sonnet-4-5-20250929-v1:0'
    const toolConfig = { tools: gate.definitions('bedrock') }
    const messages = [{ role: 'user', content: [{ text: PROMPT }] }]

    const first = await client.send(new ConverseCommand({ modelId, messages, toolConfig }))
    assert.equal(first.stopReason, 'tool_use')
    messages.push(first.output.message)
    const calls = first.output.message.content.filter((block) => block.toolUse)
    const results = await gate.execute(calls)
    checkResults(results, ['tooluse_kZJMlvQmRJ6eAyJE5GIl7Q', 'tooluse_3nJj1Tw2RguYqOSRR1d4iA', 'tooluse_Q2hpbmEtQmxvY2stMDAx'])
    messages.push(formatResults(results, 'bedrock'))
    const second = await client.send(new ConverseCommand({ modelId, messages, toolConfig }))
    assert.equal(second.stopReason, 'end_turn')

    assert.equal(requests[0].path, `/model/${encodeURIComponent(modelId)}/converse`)
    assert.deepEqual(requests[0].body.toolConfig.tools, gate.list().map((t) => ({
      toolSpec: { name: t.name, description: t.description, inputSchema: { json: t.parameters } },
    })), 'the JSON Schema as the gate holds it')
    const sent = requests[1].body.messages
    assert.deepEqual(sent[1], bedrock.replies[0].output.message)
    // The SDK sends image bytes as base64.
    assert.deepEqual(sent[2], {
      role: 'user',
      content: [
        { toolResult: { toolUseId: 'tooluse_kZJMlvQmRJ6eAyJE5GIl7Q', content: [{ json: FORECAST }] } },
        {
          toolResult: {
            toolUseId: 'tooluse_3nJj1Tw2RguYqOSRR1d4iA',
            content: [{ text: 'status page\n[image 1: image/png, 70 bytes]' }, { image: { format: 'png', source: { bytes: PNG } } }],
          },
        },
        { toolResult: { toolUseId: 'tooluse_Q2hpbmEtQmxvY2stMDAx', content: [{ text: results[2].output }], status: 'error' } },
      ],
    })
  })
})

describe("LangChain's and the MCP SDK's own call objects", () => {
  it('AIMessage.tool_calls and invalid_tool_calls run as they are', async () => {
    const { AIMessage } = await import('@langchain/core/messages')
    const gate = weatherGate()
    const message = new AIMessage({
      content: '',
      tool_calls: [{ id: 'lc_1', name: 'get_forecast', args: { city: 'Lisbon' }, type: 'tool_call' }],
      invalid_tool_calls: [{ id: 'lc_2', name: 'get_forecast', args: '{"city": "Lisbon",}', error: 'Unexpected token', type: 'invalid_tool_call' }],
    })
    const results = await gate.execute([...message.tool_calls, ...message.invalid_tool_calls])
    assert.deepEqual(results.map((r) => r.callId), ['lc_1', 'lc_2'])
    assertSuccess(results[0], JSON.stringify(FORECAST))
    assertSuccess(results[1], `${JSON.stringify(FORECAST)}\n[arguments adjusted before running: trailing commas in the JSON]`)
    assert.deepEqual(results[1].metadata.repairs.map((r) => r.rule), ['json-trailing-commas'])
  })

  it('tools/call params parsed by the MCP SDK run as a call named by the progress token', async () => {
    const { CallToolRequestSchema } = require('@modelcontextprotocol/sdk/types.js')
    const gate = weatherGate()
    const request = CallToolRequestSchema.parse({
      method: 'tools/call',
      params: { name: 'get_forecast', arguments: { city: 'Lisbon', days: 2 }, _meta: { progressToken: 'prog-1' } },
    })
    const [withToken, without] = await gate.execute([request.params, { name: 'get_forecast', arguments: { city: 'Porto' } }])
    assert.equal(withToken.callId, 'prog-1')
    assertSuccess(withToken, JSON.stringify(FORECAST))
    assert.match(without.callId, GENERATED_ID)
  })
})
