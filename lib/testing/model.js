'use strict'
// A model that replays a script, and the agent loop every provider's docs show, so that a test drives the gate
// through whole conversations in any provider's format without a network or a key.

const { formatResults } = require('../../index.js')

/** A turn as the script gives it → `{ calls, text }`: a string is a final answer, without calls. */
function normalizeTurn(turn, index) {
  if (typeof turn === 'string') return { calls: [], text: turn }
  if (turn === null || typeof turn !== 'object' || !(turn.calls === undefined || Array.isArray(turn.calls))) {
    throw new TypeError(`scriptedModel(turns): turns[${index}] must be a string or { calls: [...], text? }`)
  }
  return { calls: turn.calls ?? [], text: turn.text }
}

/** Replays `turns` one per `respond(messages)`, keeping a deep copy of every request's messages in `requests`. */
function scriptedModel(turns) {
  if (!Array.isArray(turns)) throw new TypeError('scriptedModel(turns): turns must be an array')
  const script = turns.map(normalizeTurn)
  const requests = []
  return {
    requests,
    async respond(messages) {
      requests.push(structuredClone(messages))
      if (requests.length > script.length) {
        throw new Error(`scriptedModel: the script has ${script.length} turns and the model was asked for turn ${requests.length}`)
      }
      return script[requests.length - 1]
    },
  }
}

/** A call in any provider's shape, as `{ id, name, args }`: the id its result carries (the gate's, when the call
 * had none), the name and arguments as the model sent them, read as the gate reads them: the call's own fields
 * first, then those of the first object that nests them (`function`, `functionCall`, `toolUse`). */
function readCall(call, result) {
  const nested = [call?.function, call?.functionCall, call?.toolUse].find((n) => n !== null && typeof n === 'object' && !Array.isArray(n))
  // The first field that is there, `null` too (no arguments), as the gate reads them.
  const field = (keys) => keys.map((key) => (call?.[key] !== undefined ? call[key] : nested?.[key])).find((value) => value !== undefined)
  return { id: result.callId, name: field(['name', 'toolName']) ?? result.name, args: field(['arguments', 'input', 'args']) }
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
async function runAgentLoop(gate, model, { format, context, signal, maxTurns = 20, prompt = 'Go.' } = {}) {
  if (!(Number.isInteger(maxTurns) && maxTurns > 0)) throw new TypeError(`runAgentLoop: maxTurns must be a positive integer; got ${String(maxTurns)}`)
  if (!Object.hasOwn(FORMATS, format)) {
    throw new TypeError(`runAgentLoop: format must be one of ${Object.keys(FORMATS).join(', ')}; got ${String(format)}`)
  }
  const shape = FORMATS[format]
  const transcript = [shape.prompt(prompt)]
  const turns = []
  for (let asked = 0; asked < maxTurns; asked++) {
    // An aborted run asks the model nothing more: what its turns would run could only be cancelled.
    signal?.throwIfAborted()
    const { calls, text } = await model.respond(transcript, { signal })
    if (calls.length === 0) {
      transcript.push(...shape.assistant(text, []))
      return { transcript, turns, text }
    }
    const results = await gate.execute(calls, { context, signal })
    const written = calls.map((call, i) => shape.toCall(readCall(call, results[i])))
    transcript.push(...shape.assistant(text, written), ...[formatResults(results, format)].flat())
    turns.push({ calls, results })
  }
  throw new Error(`runAgentLoop: the model still called tools after maxTurns (${maxTurns}) turns`)
}

module.exports = { scriptedModel, runAgentLoop }
