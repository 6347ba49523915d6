'use strict'
// A model that replays a script, and the agent loop every provider's docs show, so that a test drives the gate
// through whole conversations in any provider's format without a network or a key.

const { formatResults } = require('../../index.js')
const { STREAMS } = require('./model-streams.js')

/** Taken at load: a test that fakes the global timers must not stall a stream that runs in real time. */
const realSetTimeout = setTimeout

/** A turn as the script gives it → `{ calls, text }`: a string is a final answer, without calls. */
function normalizeTurn(turn, index) {
  if (typeof turn === 'string') return { calls: [], text: turn }
  if (turn === null || typeof turn !== 'object' || !(turn.calls === undefined || Array.isArray(turn.calls))) {
    throw new TypeError(`scriptedModel(turns): turns[${index}] must be a string or { calls: [...], text? }`)
  }
  return { calls: turn.calls ?? [], text: turn.text }
}

/**
 * Replays `turns` one per `respond(messages)` (or `stream(messages, …)`), keeping a deep copy of every request's
 * messages in `requests`. `respond(messages, { stream })` also gives the turn as `stream.format`'s events.
 */
function scriptedModel(turns) {
  if (!Array.isArray(turns)) throw new TypeError('scriptedModel(turns): turns must be an array')
  const script = turns.map(normalizeTurn)
  const requests = []
  /** `streamed`: the stream's options, read (`readStream`), when the turn is to come as events too. */
  const next = (messages, streamed) => {
    requests.push(structuredClone(messages))
    if (requests.length > script.length) {
      throw new Error(`scriptedModel: the script has ${script.length} turns and the model was asked for turn ${requests.length}`)
    }
    const turn = script[requests.length - 1]
    return streamed === undefined ? turn : { ...turn, events: eventsOf(turn, requests.length, streamed) }
  }
  return {
    requests,
    async respond(messages, options) {
      const stream = options?.stream
      return next(messages, stream === undefined ? undefined : readStream(stream, 'scriptedModel: respond(messages, { stream })'))
    },
    stream(messages, options) {
      return next(messages, readStream(options, 'scriptedModel: stream(messages, options)')).events
    },
  }
}

/** A stream's options read: `format`, the `clock` its waits run on (a manualClock, or real time), `everyMs`
 * between two events. */
function readStream(options, usage) {
  const { format, clock, everyMs = 0 } = options ?? {}
  if (!Object.hasOwn(STREAMS, format)) throw new TypeError(`${usage}: format must be one of ${Object.keys(STREAMS).join(', ')}; got ${String(format)}`)
  if (!(Number.isFinite(everyMs) && everyMs >= 0)) throw new TypeError(`${usage}: everyMs must be a number ≥ 0; got ${String(everyMs)}`)
  if (clock !== undefined && typeof clock?.sleep !== 'function') throw new TypeError(`${usage}: clock must be a manualClock()`)
  return { format, clock, everyMs }
}

/** The turn's events, one every `everyMs`: its calls with the ids they carry (one made up for a call without). */
async function* eventsOf(turn, asked, { format, clock, everyMs }) {
  const calls = turn.calls.map((call, i) => {
    const { id, name, args } = partsOf(call)
    return { id: typeof id === 'string' && id !== '' ? id : `call_${asked}_${i}`, name: name ?? '', args }
  })
  const wait = (ms) => (clock ? clock.sleep(ms) : new Promise((resolve) => realSetTimeout(resolve, ms)))
  for (const [i, event] of STREAMS[format](turn.text, calls).entries()) {
    if (i > 0 && everyMs > 0) await wait(everyMs)
    yield event
  }
}

/** A call in any provider's shape, as `{ id, name, args }`: the id its result carries (the gate's, when the call
 * had none), the name and arguments as the model sent them, read as the gate reads them: the call's own fields
 * first, then those of the first object that nests them (`function`, `functionCall`, `toolUse`). */
function readCall(call, result) {
  const { name, args } = partsOf(call)
  return { id: result.callId, name: name ?? result.name, args }
}

/** A call's id, name and arguments as the model sent them, in any provider's shape. */
function partsOf(call) {
  const nested = [call?.function, call?.functionCall, call?.toolUse].find((n) => n !== null && typeof n === 'object' && !Array.isArray(n))
  // The first field that is there, `null` too (no arguments), as the gate reads them.
  const field = (keys) => keys.map((key) => (call?.[key] !== undefined ? call[key] : nested?.[key])).find((value) => value !== undefined)
  return { id: field(['call_id', 'toolCallId', 'toolUseId', 'id']), name: field(['name', 'toolName']), args: field(['arguments', 'input', 'args']) }
}

/** Arguments as an object, for the formats whose calls carry one; text that is not JSON stays as it came. */
function argsObject(args) {
  if (typeof args !== 'string') return args ?? {}
  try {
    return JSON.parse(args || '{}')
  } catch {
    return args
  }
}

/** Arguments as JSON text, for the formats whose calls carry a string. */
const argsText = (args) => (typeof args === 'string' ? args : JSON.stringify(args ?? {}))

const textParts = (text) => (text === undefined ? [] : [{ type: 'text', text }])

const userPrompt = (text) => ({ role: 'user', content: text })

/** Per format: the user's prompt, a call written in its shape, and the transcript entries of an assistant turn (no
 * calls: the final answer). */
const FORMATS = {
  anthropic: {
    prompt: userPrompt,
    toCall: ({ id, name, args }) => ({ type: 'tool_use', id, name, input: argsObject(args) }),
    assistant: (text, calls) => [{ role: 'assistant', content: [...textParts(text), ...calls] }],
  },
  'openai-responses': {
    prompt: userPrompt,
    toCall: ({ id, name, args }) => ({ type: 'function_call', call_id: id, name, arguments: argsText(args) }),
    assistant: (text, calls) => [
      ...(text === undefined ? [] : [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text }] }]),
      ...calls,
    ],
  },
  'openai-chat': {
    prompt: userPrompt,
    toCall: ({ id, name, args }) => ({ id, type: 'function', function: { name, arguments: argsText(args) } }),
    assistant: (text, calls) => [calls.length === 0 ? { role: 'assistant', content: text } : { role: 'assistant', content: text ?? null, tool_calls: calls }],
  },
  'ai-sdk': {
    prompt: userPrompt,
    toCall: ({ id, name, args }) => ({ type: 'tool-call', toolCallId: id, toolName: name, input: argsObject(args) }),
    assistant: (text, calls) => [{ role: 'assistant', content: [...textParts(text), ...calls] }],
  },
  gemini: {
    prompt: (text) => ({ role: 'user', parts: [{ text }] }),
    toCall: ({ id, name, args }) => ({ functionCall: { id, name, args: argsObject(args) } }),
    assistant: (text, calls) => [{ role: 'model', parts: [...(text === undefined ? [] : [{ text }]), ...calls] }],
  },
  bedrock: {
    prompt: (text) => ({ role: 'user', content: [{ text }] }),
    toCall: ({ id, name, args }) => ({ toolUse: { toolUseId: id, name, input: argsObject(args) } }),
    assistant: (text, calls) => [{ role: 'assistant', content: [...(text === undefined ? [] : [{ text }]), ...calls] }],
  },
}

/**
 * The usual agent loop: the prompt, then model turns until one has no calls. Each turn's calls run through the
 * gate; the assistant message holding them and the results go into the transcript in `format`'s shape. Each call
 * is written in that shape whatever shape the script used, with the id its result carries, so every call and its
 * result pair up (a call without an id gets the one the gate generated).
 */
async function runAgentLoop(gate, model, { format, context, signal, maxTurns = 20, prompt = 'Go.', stream } = {}) {
  if (!(Number.isInteger(maxTurns) && maxTurns > 0)) throw new TypeError(`runAgentLoop: maxTurns must be a positive integer; got ${String(maxTurns)}`)
  if (!Object.hasOwn(FORMATS, format)) {
    throw new TypeError(`runAgentLoop: format must be one of ${Object.keys(FORMATS).join(', ')}; got ${String(format)}`)
  }
  if (stream && format === 'ai-sdk') throw new TypeError('runAgentLoop: stream is for the providers\' formats; the AI SDK streams through streamText')
  // The model writes each turn as the provider's stream events; `stream` may set `clock` and `everyMs`.
  const streaming = stream ? { ...(stream === true ? {} : stream), format } : undefined
  const shape = FORMATS[format]
  const transcript = [shape.prompt(prompt)]
  const turns = []
  for (let asked = 0; asked < maxTurns; asked++) {
    // An aborted run asks the model nothing more: what its turns would run could only be cancelled.
    signal?.throwIfAborted()
    const { calls, text, events } = await model.respond(transcript, streaming ? { signal, stream: streaming } : { signal })
    if (calls.length === 0) {
      transcript.push(...shape.assistant(text, []))
      return { transcript, turns, text }
    }
    const results = events === undefined ? await gate.execute(calls, { context, signal }) : await runStreamed(gate, events, format, { context, signal })
    const written = calls.map((call, i) => shape.toCall(readCall(call, results[i])))
    transcript.push(...shape.assistant(text, written), ...[formatResults(results, format)].flat())
    turns.push({ calls, results })
  }
  throw new Error(`runAgentLoop: the model still called tools after maxTurns (${maxTurns}) turns`)
}

/** A turn's calls run as its stream brings them: a streaming turn the stream feeds and ends. */
async function runStreamed(gate, events, format, options) {
  const turn = gate.turn(options)
  for await (const _event of turn.tap(events, format));
  return turn.results
}

module.exports = { scriptedModel, runAgentLoop }
