'use strict'
// Provider formats: the names `definitions` and `formatResults` take, and results turned into the messages each
// provider expects next in the conversation.

const DEFINITION_FORMATS = ['openai-responses', 'openai-chat', 'anthropic', 'ai-sdk']
const RESULT_FORMATS = ['anthropic', 'openai-responses', 'openai-chat', 'ai-sdk']

/** The image types the Anthropic API takes; its SDK types `media_type` as exactly these. */
const ANTHROPIC_IMAGE_TYPES = ['image/jpeg', 'image/png', 'image/gif', 'image/webp']

/**
 * An image in an AI SDK tool result's `content` output, by major. 5 validates messages and knows only `media`; 6
 * turns `media` into `image-data` itself (deprecated); 7 passes `media` on and its providers drop it, and it turns
 * `image-data` into `file` with a deprecation warning.
 */
const AI_SDK_IMAGE_PARTS = {
  5: (image) => ({ type: 'media', data: image.data, mediaType: image.mediaType }),
  6: (image) => ({ type: 'image-data', data: image.data, mediaType: image.mediaType }),
  7: (image) => ({ type: 'file', mediaType: image.mediaType, data: { type: 'data', data: image.data } }),
}
const AI_SDK_VERSIONS = Object.keys(AI_SDK_IMAGE_PARTS).map(Number)
/** The current major: what a new project installs. */
const AI_SDK_DEFAULT_VERSION = 7

/** The text a model should read for a result: its output on success, "Error (kind): …" on failure. */
function forLlm(result) {
  if (result.success) return result.output
  if (typeof result.output === 'string' && result.output.startsWith('Error (')) return result.output
  return `Error (${result.errorKind ?? 'handler_error'}): ${result.error ?? result.output}`
}

/**
 * A result's content for a format that takes images: its text alone, or its text and then as parts the images
 * `accepts` lets through (the text's "[image n: …]" line stands for any left out).
 */
function withImages(result, textPart, imagePart, accepts = () => true) {
  const images = (result.metadata?.images ?? []).filter(accepts)
  if (images.length === 0) return forLlm(result)
  return [textPart(forLlm(result)), ...images.map(imagePart)]
}

/** Throws a TypeError that says what to fix when `formatResults` is called wrongly (a programmer error). */
function checkArguments(results, format, options) {
  const usage = 'formatResults(results, format, options?)'
  if (!Array.isArray(results)) throw new TypeError(`${usage}: results must be an array of ToolResult`)
  results.forEach((r, i) => {
    if (r === null || typeof r !== 'object' || typeof r.callId !== 'string' || typeof r.success !== 'boolean') {
      throw new TypeError(`${usage}: results[${i}] is not a ToolResult (pass the array execute() resolved to)`)
    }
  })
  if (!RESULT_FORMATS.includes(format)) {
    throw new TypeError(`${usage}: format must be one of ${RESULT_FORMATS.join(', ')}; got ${String(format)}`)
  }
  if (options === undefined) return
  if (format !== 'ai-sdk') throw new TypeError(`${usage}: only 'ai-sdk' takes options; remove them for '${format}'`)
  if (options === null || typeof options !== 'object') throw new TypeError(`${usage}: options must be { version? }`)
  for (const key of Object.keys(options)) {
    if (key !== 'version') throw new TypeError(`${usage}: unknown option "${key}" (known: version)`)
  }
  if (options.version !== undefined && !AI_SDK_VERSIONS.includes(options.version)) {
    throw new TypeError(`${usage}: version must be the AI SDK major, one of ${AI_SDK_VERSIONS.join(', ')}; got ${typeof options.version === 'string' ? `"${options.version}"` : String(options.version)}`)
  }
}

/**
 * Results → the message(s) a provider expects next in the conversation (Chat Completions tool messages take no
 * images: there the text's "[image n: …]" lines stand for them). For 'ai-sdk', `options.version` names the AI SDK
 * major the images are written for (default 7).
 */
function formatResults(results, format, options) {
  checkArguments(results, format, options)
  const textPart = (text) => ({ type: 'text', text })
  switch (format) {
    case 'anthropic':
      return {
        role: 'user',
        content: results.map((r) => ({
          type: 'tool_result',
          tool_use_id: r.callId,
          content: withImages(
            r,
            textPart,
            (i) => ({ type: 'image', source: { type: 'base64', media_type: i.mediaType, data: i.data } }),
            (i) => ANTHROPIC_IMAGE_TYPES.includes(i.mediaType),
          ),
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
    case 'ai-sdk': {
      const imagePart = AI_SDK_IMAGE_PARTS[options?.version ?? AI_SDK_DEFAULT_VERSION]
      return {
        role: 'tool',
        content: results.map((r) => {
          const content = withImages(r, textPart, imagePart)
          return {
            type: 'tool-result',
            toolCallId: r.callId,
            toolName: r.name,
            output: typeof content === 'string' ? { type: r.success ? 'text' : 'error-text', value: content } : { type: 'content', value: content },
          }
        }),
      }
    }
  }
}

module.exports = { DEFINITION_FORMATS, RESULT_FORMATS, forLlm, formatResults }
