'use strict'
// Tool calls read out of a provider's stream as it arrives: each call whole the moment its arguments are complete,
// and, when the stream ends early, those it cut inside their arguments.

/** The marker the engine reads on a call whose arguments the stream cut short: it is answered, never run. */
const CUT = '__toolgateCut'

/**
 * Calls being streamed, by the key the format gives each: `open` starts one, `more` adds to its arguments, `close`
 * hands it over whole. What is still open when the stream ends was cut.
 */
class Assembly {
  #open = new Map()
  #ignored = new Set()

  /** `group`: what closes together (a Chat Completions choice). */
  open(key, id, name, text = '', group = undefined) {
    this.#open.set(key, { id, name, text, group })
  }

  /** `name`: streamed in pieces by Chat Completions; the others send it whole at the start. */
  more(key, text, name) {
    const call = this.#open.get(key)
    if (call === undefined) return
    if (typeof text === 'string') call.text += text
    if (typeof name === 'string') call.name += name
  }

  /** Sets one argument at a JSON path (`$.a.b[0]`), as Vertex AI streams a Gemini call's arguments; a string
   * streamed in pieces at one path is joined. */
  argument(key, { jsonPath, stringValue, numberValue, boolValue, nullValue }) {
    const call = this.#open.get(key)
    const steps = typeof jsonPath === 'string' ? pathSteps(jsonPath) : undefined
    if (call === undefined || steps === undefined || steps.length === 0) return
    call.args ??= {}
    let holder = call.args
    for (const [i, step] of steps.entries()) {
      // An array grows by one item at a time, as arguments are streamed in order: a path that skips ahead, or
      // names a key of an array, is not the arguments' (it is dropped, and validation says what is missing).
      if (Array.isArray(holder) ? !(typeof step === 'number' && step <= holder.length) : typeof step !== 'string') return
      if (i === steps.length - 1) break
      if (holder[step] === null || typeof holder[step] !== 'object') holder[step] = typeof steps[i + 1] === 'number' ? [] : {}
      holder = holder[step]
    }
    const last = steps[steps.length - 1]
    if (typeof stringValue === 'string') holder[last] = (typeof holder[last] === 'string' ? holder[last] : '') + stringValue
    else if (numberValue !== undefined) holder[last] = numberValue
    else if (boolValue !== undefined) holder[last] = boolValue
    else if (nullValue !== undefined) holder[last] = null
  }

  has(key) {
    return this.#open.has(key) || this.#ignored.has(key)
  }

  /** A call of a kind the gate does not run (a provider's custom tool): its pieces are passed over. */
  ignore(key) {
    this.#ignored.add(key)
  }

  /** The call, whole, with `text` as its arguments when the format sends them again at the end. */
  close(key, text) {
    const call = this.#open.get(key)
    if (call === undefined) return []
    this.#open.delete(key)
    return [{ id: call.id, name: call.name, arguments: typeof text === 'string' ? text : argumentsOf(call) }]
  }

  closeGroup(group) {
    return [...this.#open].filter(([, call]) => call.group === group).flatMap(([key]) => this.close(key))
  }

  /** The calls the stream ended inside: their arguments as far as they came, marked so that none of them runs. */
  cut() {
    const calls = [...this.#open.values()].map((call) => ({ id: call.id, name: call.name, arguments: argumentsOf(call), [CUT]: true }))
    this.#open.clear()
    return calls
  }
}

/** A call's arguments as far as they came: streamed text, or the object built path by path. */
const argumentsOf = (call) => (call.args === undefined ? call.text : JSON.stringify(call.args))

/** The steps of a JSON path (RFC 9535's simple form: `$.name`, `$['name']`, `[0]`); undefined when it is not one. */
function pathSteps(jsonPath) {
  if (!jsonPath.startsWith('$')) return undefined
  const steps = []
  const step = /\.([^.[\]]+)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\["((?:[^"\\]|\\.)*)"\]/y
  step.lastIndex = 1
  while (step.lastIndex < jsonPath.length) {
    const at = step.lastIndex
    const match = step.exec(jsonPath)
    if (match === null || step.lastIndex === at) return undefined
    const [, name, index, single, double] = match
    if (['__proto__', 'constructor', 'prototype'].includes(name ?? single ?? double)) return undefined
    steps.push(index !== undefined ? Number(index) : (name ?? single ?? double))
  }
  return steps
}

const isObject = (value) => value !== null && typeof value === 'object'
const listOf = (value) => (Array.isArray(value) ? value : [])

/** The Messages API's raw stream events: `tool_use` blocks opened, their `input_json_delta`s, and their stop. */
function anthropic(assembly, event) {
  switch (event.type) {
    case 'content_block_start': {
      const block = event.content_block
      if (block?.type !== 'tool_use') return []
      // A tool with no parameters sends no delta: its input is the start's.
      const whole = isObject(block.input) && Object.keys(block.input).length > 0 ? JSON.stringify(block.input) : ''
      assembly.open(event.index, block.id, block.name, whole)
      return []
    }
    case 'content_block_delta':
      if (event.delta?.type === 'input_json_delta') assembly.more(event.index, event.delta.partial_json)
      return []
    case 'content_block_stop':
      return assembly.close(event.index)
    default:
      return []
  }
}

/** The Responses API's stream events: a `function_call` item added, its argument deltas, and its end (`.done`,
 * or the item done, whichever comes first). */
function openaiResponses(assembly, event) {
  switch (event.type) {
    case 'response.output_item.added': {
      const item = event.item
      if (item?.type === 'function_call') assembly.open(event.output_index, item.call_id ?? item.id, item.name, item.arguments ?? '')
      return []
    }
    case 'response.function_call_arguments.delta':
      assembly.more(event.output_index, event.delta)
      return []
    case 'response.function_call_arguments.done':
      return assembly.close(event.output_index, event.arguments)
    case 'response.output_item.done':
      return event.item?.type === 'function_call' ? assembly.close(event.output_index, event.item.arguments) : []
    default:
      return []
  }
}

/** Chat Completions chunks: `delta.tool_calls[i]` by index, one call complete when the next index of its choice
 * starts or the choice finishes (several choices stream side by side when `n` > 1). */
function openaiChat(assembly, chunk) {
  const calls = []
  for (const choice of listOf(chunk.choices)) {
    const group = choice?.index ?? 0
    for (const piece of listOf(choice?.delta?.tool_calls)) {
      const key = `${group}:${piece?.index ?? 0}`
      if (!assembly.has(key)) {
        calls.push(...assembly.closeGroup(group))
        if (piece?.type === 'custom') assembly.ignore(key)
        else assembly.open(key, piece?.id, '', '', group)
      }
      assembly.more(key, piece?.function?.arguments, piece?.function?.name)
    }
    if (choice?.finish_reason != null) calls.push(...assembly.closeGroup(group))
  }
  return calls
}

/** Gemini's `GenerateContentResponse` chunks: a `functionCall` part comes whole, or (Vertex AI with
 * `streamFunctionCallArguments`) opened with `willContinue`, its arguments in `partialArgs` by JSON path, until a
 * part that does not continue. */
function gemini(assembly, chunk) {
  const calls = []
  for (const candidate of listOf(chunk.candidates)) {
    const key = `gemini:${candidate?.index ?? 0}`
    for (const part of listOf(candidate?.content?.parts)) {
      const call = part?.functionCall
      if (!isObject(call)) continue
      const streamed = assembly.has(key)
      if (!streamed && call.willContinue !== true && call.partialArgs === undefined) {
        calls.push({ functionCall: call })
        continue
      }
      if (!streamed) assembly.open(key, call.id, call.name ?? '')
      for (const argument of listOf(call.partialArgs)) if (isObject(argument)) assembly.argument(key, argument)
      if (call.willContinue !== true) calls.push(...assembly.close(key))
    }
  }
  return calls
}

/** Bedrock ConverseStream events: a `toolUse` block started, its input deltas, and its stop. */
function bedrock(assembly, event) {
  if (isObject(event.contentBlockStart)) {
    const toolUse = event.contentBlockStart.start?.toolUse
    if (isObject(toolUse)) assembly.open(event.contentBlockStart.contentBlockIndex, toolUse.toolUseId, toolUse.name)
  } else if (isObject(event.contentBlockDelta)) {
    assembly.more(event.contentBlockDelta.contentBlockIndex, event.contentBlockDelta.delta?.toolUse?.input)
  } else if (isObject(event.contentBlockStop)) {
    return assembly.close(event.contentBlockStop.contentBlockIndex)
  }
  return []
}

const READERS = { anthropic, 'openai-responses': openaiResponses, 'openai-chat': openaiChat, gemini, bedrock }
const STREAM_FORMATS = Object.keys(READERS)

module.exports = { STREAM_FORMATS, READERS, Assembly }
