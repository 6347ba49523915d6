'use strict'
// A scripted model turn written as a provider's stream events: its text, then each call with its arguments in
// pieces, as the provider's API streams them (what `turn.tap(stream, format)` reads).

/** Arguments as JSON text, cut in two pieces: a call's arguments arrive over more than one event. */
function pieces(args) {
  const text = typeof args === 'string' ? args : JSON.stringify(args ?? {})
  const half = Math.ceil(text.length / 2)
  return [text.slice(0, half), text.slice(half)].filter((piece) => piece !== '')
}

const argsObject = (args) => {
  if (typeof args !== 'string') return args ?? {}
  try {
    return JSON.parse(args || '{}')
  } catch {
    return {}
  }
}

/** Per format: `(text, calls)` → the events, calls as `{ id, name, args }`. */
const STREAMS = {
  anthropic(text, calls) {
    const events = [{ type: 'message_start', message: { id: 'msg_scripted', type: 'message', role: 'assistant', content: [] } }]
    let index = 0
    if (text !== undefined) {
      events.push(
        { type: 'content_block_start', index, content_block: { type: 'text', text: '' } },
        { type: 'content_block_delta', index, delta: { type: 'text_delta', text } },
        { type: 'content_block_stop', index },
      )
      index += 1
    }
    for (const { id, name, args } of calls) {
      events.push({ type: 'content_block_start', index, content_block: { type: 'tool_use', id, name, input: {} } })
      for (const piece of pieces(args)) events.push({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: piece } })
      events.push({ type: 'content_block_stop', index })
      index += 1
    }
    events.push({ type: 'message_delta', delta: { stop_reason: calls.length > 0 ? 'tool_use' : 'end_turn' } }, { type: 'message_stop' })
    return events
  },
  'openai-responses'(text, calls) {
    const events = [{ type: 'response.created', response: { id: 'resp_scripted', status: 'in_progress' } }]
    let output = 0
    if (text !== undefined) {
      events.push(
        { type: 'response.output_item.added', output_index: output, item: { type: 'message', id: 'msg_scripted', role: 'assistant', content: [] } },
        { type: 'response.output_text.delta', output_index: output, item_id: 'msg_scripted', content_index: 0, delta: text },
        { type: 'response.output_item.done', output_index: output, item: { type: 'message', id: 'msg_scripted', role: 'assistant', content: [{ type: 'output_text', text }] } },
      )
      output += 1
    }
    for (const { id, name, args } of calls) {
      const item = { type: 'function_call', id: `fc_${id}`, call_id: id, name, arguments: '' }
      events.push({ type: 'response.output_item.added', output_index: output, item })
      for (const piece of pieces(args)) events.push({ type: 'response.function_call_arguments.delta', output_index: output, item_id: item.id, delta: piece })
      const whole = pieces(args).join('')
      events.push(
        { type: 'response.function_call_arguments.done', output_index: output, item_id: item.id, arguments: whole },
        { type: 'response.output_item.done', output_index: output, item: { ...item, arguments: whole } },
      )
      output += 1
    }
    events.push({ type: 'response.completed', response: { id: 'resp_scripted', status: 'completed' } })
    return events
  },
  'openai-chat'(text, calls) {
    const chunk = (delta, finish = null) => ({ id: 'chatcmpl_scripted', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] })
    const events = [chunk({ role: 'assistant', content: text ?? null })]
    calls.forEach(({ id, name, args }, index) => {
      const [first = '', ...rest] = pieces(args)
      events.push(chunk({ tool_calls: [{ index, id, type: 'function', function: { name, arguments: first } }] }))
      for (const piece of rest) events.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }))
    })
    events.push(chunk({}, calls.length > 0 ? 'tool_calls' : 'stop'))
    return events
  },
  gemini(text, calls) {
    const chunk = (parts, finishReason) => ({ candidates: [{ content: { role: 'model', parts }, index: 0, ...(finishReason ? { finishReason } : {}) }] })
    const events = text === undefined ? [] : [chunk([{ text }])]
    for (const { id, name, args } of calls) events.push(chunk([{ functionCall: { id, name, args: argsObject(args) } }]))
    events.push(chunk([], 'STOP'))
    return events
  },
  bedrock(text, calls) {
    const events = [{ messageStart: { role: 'assistant' } }]
    let index = 0
    if (text !== undefined) {
      events.push({ contentBlockDelta: { contentBlockIndex: index, delta: { text } } }, { contentBlockStop: { contentBlockIndex: index } })
      index += 1
    }
    for (const { id, name, args } of calls) {
      events.push({ contentBlockStart: { contentBlockIndex: index, start: { toolUse: { toolUseId: id, name } } } })
      for (const piece of pieces(args)) events.push({ contentBlockDelta: { contentBlockIndex: index, delta: { toolUse: { input: piece } } } })
      events.push({ contentBlockStop: { contentBlockIndex: index } })
      index += 1
    }
    events.push({ messageStop: { stopReason: calls.length > 0 ? 'tool_use' : 'end_turn' } })
    return events
  },
}

module.exports = { STREAMS }
