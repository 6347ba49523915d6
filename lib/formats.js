'use strict'
// Provider formats: the names `definitions` and `formatResults` take, and results turned into the messages each
// provider expects next in the conversation.

const DEFINITION_FORMATS = ['openai-responses', 'openai-chat', 'anthropic', 'ai-sdk', 'gemini', 'bedrock']
const RESULT_FORMATS = ['anthropic', 'openai-responses', 'openai-chat', 'ai-sdk', 'gemini', 'bedrock']

/** The image types the Anthropic API takes; its SDK types `media_type` as exactly these. */
const ANTHROPIC_IMAGE_TYPES = ['image/jpeg', 'image/png', 'image/gif', 'image/webp']
/** The image types Gemini takes in a function response's parts. */
const GEMINI_IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/webp']
/** Bedrock Converse's image formats (`ImageFormat`), by media type. */
const BEDROCK_IMAGE_FORMATS = { 'image/png': 'png', 'image/jpeg': 'jpeg', 'image/gif': 'gif', 'image/webp': 'webp' }

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

/** The result's images a format takes (`accepts`): the text's "[image n: …]" line stands for any left out. */
function imagesOf(result, accepts) {
  return (result.metadata?.images ?? []).filter(accepts)
}

/** A result's content for a format that takes images: its text alone, or its text and then the images as parts. */
function withImages(result, textPart, imagePart, accepts = () => true) {
  const images = imagesOf(result, accepts)
  if (images.length === 0) return forLlm(result)
  return [textPart(forLlm(result)), ...images.map(imagePart)]
}

/** Each format's options: the check of each option's value, which returns what is wrong with it or nothing. */
const FORMAT_OPTIONS = {
  'ai-sdk': {
    version: (v) => AI_SDK_VERSIONS.includes(v) ? undefined : `must be the AI SDK major, one of ${AI_SDK_VERSIONS.join(', ')}; got ${typeof v === 'string' ? `"${v}"` : String(v)}`,
  },
  gemini: {
    images: (v) => typeof v === 'boolean' ? undefined : `must be true or false; got ${String(v)}`,
  },
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
  const known = FORMAT_OPTIONS[format]
  if (known === undefined) {
    throw new TypeError(`${usage}: only ${Object.keys(FORMAT_OPTIONS).map((f) => `'${f}'`).join(' and ')} take options; remove them for '${format}'`)
  }
  const names = Object.keys(known)
  if (options === null || typeof options !== 'object') throw new TypeError(`${usage}: options for '${format}' must be { ${names.map((n) => `${n}?`).join(', ')} }`)
  for (const [key, value] of Object.entries(options)) {
    if (!Object.hasOwn(known, key)) throw new TypeError(`${usage}: unknown option "${key}" for '${format}' (known: ${names.join(', ')})`)
    const wrong = value === undefined ? undefined : known[key](value)
    if (wrong !== undefined) throw new TypeError(`${usage}: ${key} ${wrong}`)
  }
}

/**
 * A successful result's structure, when the text the model would read is exactly its JSON (not a process's
 * stdout, not fenced as outside data, not cut), so sending the structure instead loses nothing.
 */
function structureOf(result, accepts) {
  const structured = result.metadata?.structured
  if (!result.success || result.truncated || structured === null || typeof structured !== 'object' || !accepts(structured)) return undefined
  return JSON.stringify(structured) === result.output ? structured : undefined
}

/**
 * Results → the message(s) a provider expects next in the conversation (Chat Completions tool messages take no
 * images: there the text's "[image n: …]" lines stand for them). For 'ai-sdk', `options.version` names the AI SDK
 * major the images are written for (default 7); for 'gemini', `options.images: false` leaves images out of the
 * function responses, for models before Gemini 3, which take none.
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
    case 'gemini':
      return { role: 'user', parts: results.map((r) => ({ functionResponse: geminiResponse(r, options?.images ?? true) })) }
    case 'bedrock':
      return { role: 'user', content: results.map((r) => ({ toolResult: bedrockResult(r) })) }
  }
}

/** A `functionResponse`: the output (the structure itself when it says all) or the error, and the images inline. */
function geminiResponse(result, images) {
  const response = result.success ? { output: structureOf(result, () => true) ?? result.output } : { error: forLlm(result) }
  const inline = images ? imagesOf(result, (i) => GEMINI_IMAGE_TYPES.includes(i.mediaType)) : []
  const parts = inline.map((i) => ({ inlineData: { mimeType: i.mediaType, data: i.data } }))
  return { name: result.name, id: result.callId, response, ...(parts.length > 0 ? { parts } : {}) }
}

/** A `toolResult` block: `json` for an object output, else the text (Converse refuses an empty one), then images. */
function bedrockResult(result) {
  const structure = structureOf(result, (s) => !Array.isArray(s))
  const content = [structure === undefined ? { text: forLlm(result) || '(no output)' } : { json: structure }]
  for (const image of imagesOf(result, (i) => Object.hasOwn(BEDROCK_IMAGE_FORMATS, i.mediaType))) {
    content.push({ image: { format: BEDROCK_IMAGE_FORMATS[image.mediaType], source: { bytes: Buffer.from(image.data, 'base64') } } })
  }
  return { toolUseId: result.callId, content, ...(result.success ? {} : { status: 'error' }) }
}

module.exports = { DEFINITION_FORMATS, RESULT_FORMATS, forLlm, formatResults }
