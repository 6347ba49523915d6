'use strict'
// Provider formats: the names `definitions` and `formatResults` take, and results turned into the messages each
// provider expects next in the conversation.

const DEFINITION_FORMATS = ['openai-responses', 'openai-chat', 'anthropic', 'ai-sdk']
const RESULT_FORMATS = ['anthropic', 'openai-responses', 'openai-chat', 'ai-sdk']

/** The text a model should read for a result: its output on success, "Error (kind): …" on failure. */
function forLlm(result) {
  if (result.success) return result.output
  if (typeof result.output === 'string' && result.output.startsWith('Error (')) return result.output
  return `Error (${result.errorKind ?? 'handler_error'}): ${result.error ?? result.output}`
}

/** A result's content for a format that takes images: its text alone, or its text and then its images as parts. */
function withImages(result, textPart, imagePart) {
  const images = result.metadata?.images
  if (!images?.length) return forLlm(result)
  return [textPart(forLlm(result)), ...images.map(imagePart)]
}

/** Results → the message(s) a provider expects next in the conversation (Chat Completions tool messages take no
 * images: there the text's "[image n: …]" lines stand for them). */
function formatResults(results, format) {
  if (!Array.isArray(results)) throw new TypeError('formatResults(results, format): results must be an array of ToolResult')
  switch (format) {
    case 'anthropic':
      return {
        role: 'user',
        content: results.map((r) => ({
          type: 'tool_result',
          tool_use_id: r.callId,
          content: withImages(r, (text) => ({ type: 'text', text }), (i) => ({ type: 'image', source: { type: 'base64', media_type: i.mediaType, data: i.data } })),
          ...(r.success ? {} : { is_error: true }),
        })),
      }
    case 'openai-responses':
      return results.map((r) => ({
        type: 'function_call_output',
        call_id: r.callId,
        output: withImages(r, (text) => ({ type: 'input_text', text }), (i) => ({ type: 'input_image', image_url: `data:${i.mediaType};base64,${i.data}` })),
      }))
    case 'openai-chat':
      return results.map((r) => ({ role: 'tool', tool_call_id: r.callId, content: forLlm(r) }))
    case 'ai-sdk':
      return {
        role: 'tool',
        content: results.map((r) => ({
          type: 'tool-result',
          toolCallId: r.callId,
          toolName: r.name,
          output: r.metadata?.images?.length
            ? { type: 'content', value: withImages(r, (text) => ({ type: 'text', text }), (i) => ({ type: 'media', data: i.data, mediaType: i.mediaType })) }
            : { type: r.success ? 'text' : 'error-text', value: forLlm(r) },
        })),
      }
    default:
      throw new TypeError(`formatResults(results, format): format must be one of ${RESULT_FORMATS.join(', ')}; got ${String(format)}`)
  }
}

module.exports = { DEFINITION_FORMATS, RESULT_FORMATS, forLlm, formatResults }
