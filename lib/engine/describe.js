// @ts-check
'use strict'
// Values from handlers and callbacks described in the engine's terms: a return value or a thrown value as an outcome
// kind and payload, and any foreign value as text.

const { SETTLEMENT_KIND } = require('./wire.generated.js')

function bigintToString(_key, value) {
  return typeof value === 'bigint' ? value.toString() : value
}

/** A handler's return value → [outcome kind, payload] for the engine's normalize station. Never throws: a value
 * whose getters, `toJSON` or proxy traps throw, whatever they throw, is described as unrepresentable. */
function describeReturn(value) {
  try {
    return describeValue(value)
  } catch (err) {
    return [SETTLEMENT_KIND.unrepresentable, unreadable(err)]
  }
}

/** Why a value could not be read: the message of the Error its getters, toJSON or traps threw, or what they threw. */
function unreadable(err) {
  return messageOf(err) ?? `reading it threw ${reprOf(err)}`
}

function describeValue(value) {
  if (typeof value === 'string') return [SETTLEMENT_KIND.text, value]
  if (value === undefined || value === null) return [SETTLEMENT_KIND.none, '']
  switch (typeof value) {
    case 'bigint': return [SETTLEMENT_KIND.text, value.toString()]
    case 'function': return [SETTLEMENT_KIND.unrepresentable, 'a function']
    case 'symbol': return [SETTLEMENT_KIND.unrepresentable, `a symbol (${value.description ?? ''})`]
    case 'number': if (!Number.isFinite(value)) return [SETTLEMENT_KIND.text, String(value)]
  }
  if (ArrayBuffer.isView(value)) return [SETTLEMENT_KIND.binary, Buffer.from(value.buffer, value.byteOffset, value.byteLength)]
  if (value instanceof ArrayBuffer) return [SETTLEMENT_KIND.binary, Buffer.from(value)]
  let json
  try {
    json = JSON.stringify(value)
  } catch (err) {
    if (!(err instanceof TypeError) || !/BigInt/i.test(err.message)) return [SETTLEMENT_KIND.unrepresentable, unreadable(err)]
    json = JSON.stringify(value, bigintToString)
  }
  // A toJSON that returns undefined leaves nothing to show.
  return json === undefined ? [SETTLEMENT_KIND.none, ''] : [SETTLEMENT_KIND.json, json]
}

/** A thrown value → [SETTLEMENT_KIND.thrown, JSON the engine reads]; name and message for the model, the rest for
 * metadata. Each field is read on its own: an Error whose `response` getter throws still has its message. */
function describeThrown(err) {
  try {
    if (err instanceof Error || (err && typeof err === 'object' && typeof err.message === 'string')) {
      const read = (get) => {
        try {
          return get()
        } catch {
          return undefined
        }
      }
      const [name, message, stack, code, retryable] = [read(() => err.name), read(() => err.message), read(() => err.stack), read(() => err.code), read(() => err.retryable)]
      const status = [read(() => err.status), read(() => err.statusCode), read(() => err.response?.status)].find((v) => Number.isInteger(v))
      const causeCode = read(() => err.cause?.code)
      return [SETTLEMENT_KIND.thrown, JSON.stringify({
        name: typeof name === 'string' ? name : 'Error',
        message: typeof message === 'string' ? message : reprOf(message),
        stack: typeof stack === 'string' ? stack : undefined,
        code: typeof code === 'string' || typeof code === 'number' ? code : undefined,
        retryable: typeof retryable === 'boolean' ? retryable : undefined,
        status: status >= 0 ? status : undefined,
        causeCode: typeof causeCode === 'string' ? causeCode : undefined,
        retryAfterMs: read(() => retryAfterMs(err)),
      })]
    }
    return [SETTLEMENT_KIND.thrown, JSON.stringify({ nonError: err === undefined ? 'undefined (it rejected without a reason)' : reprOf(err) })]
  } catch {
    return [SETTLEMENT_KIND.thrown, JSON.stringify({ nonError: 'a value that could not be read' })]
  }
}

/** `err.retryAfterMs`, or an HTTP `Retry-After` header (seconds or a date) on `err.headers` / `err.response.headers`. */
function retryAfterMs(err) {
  if (Number.isFinite(err.retryAfterMs) && err.retryAfterMs >= 0) return Math.round(err.retryAfterMs)
  const headers = err.headers ?? err.response?.headers
  const header = typeof headers?.get === 'function' ? headers.get('retry-after') : headerOf(headers, 'retry-after')
  if (typeof header !== 'string' && typeof header !== 'number') return undefined
  const seconds = Number(header)
  if (Number.isFinite(seconds)) return Math.max(0, Math.round(seconds * 1000))
  const at = Date.parse(String(header))
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now())
}

/** A plain headers object's value, whatever the case of its key. */
function headerOf(headers, name) {
  if (headers === null || typeof headers !== 'object') return undefined
  const key = Object.keys(headers).find((k) => k.toLowerCase() === name)
  return key === undefined ? undefined : headers[key]
}

/** The most of a foreign value's text that a message quotes. */
const QUOTED_CHARS = 500

/** `text` cut to at most `max` UTF-16 units (never inside a surrogate pair), with "…" where it was cut. */
function clip(text, max = QUOTED_CHARS) {
  if (text.length <= max) return text
  const end = text.charCodeAt(max - 1) >= 0xd800 && text.charCodeAt(max - 1) <= 0xdbff ? max - 1 : max
  return `${text.slice(0, end)}…`
}

/** A value as a message quotes it (strings in quotes, objects as JSON, cut at 500 characters). Never throws,
 * whatever the value's getters, `toJSON` or proxy traps do. */
function reprOf(value) {
  try {
    if (typeof value === 'string') return JSON.stringify(clip(value))
    if (typeof value === 'symbol') return value.toString()
    if (typeof value === 'function') return `a function${value.name ? ` (${clip(String(value.name))})` : ''}`
    if (typeof value !== 'object' || value === null) return String(value)
    const json = JSON.stringify(value, bigintToString)
    if (json !== undefined) return clip(json)
  } catch {
    // Cyclic, or its getters throw: its tag, at least.
  }
  try {
    return Object.prototype.toString.call(value)
  } catch {
    return 'a value that cannot be shown'
  }
}

/** An Error as the data it shows (its JSON is `{}`): its name and message; any other value as it is. Never throws. */
function errorAsData(value) {
  try {
    if (value instanceof Error) return { name: String(value.name), message: messageOf(value) ?? '' }
  } catch {
    return '(an error that cannot be read)'
  }
  return value
}

/** A value as JSON text for the engine to read; one that cannot be shown as JSON (a cycle, a getter that throws)
 * says so, as `what`. */
function jsonOf(value, what) {
  try {
    return JSON.stringify(value, bigintToString) ?? 'null'
  } catch {
    return `"(${what} that cannot be shown as JSON)"`
  }
}

/** The message an Error-like value carries, when it is a string; never throws. */
function messageOf(value) {
  try {
    const message = value?.message
    return typeof message === 'string' ? message : undefined
  } catch {
    return undefined
  }
}

/** What a foreign value says, as text: a string itself, an Error's message, else its quoted form. */
function textOf(value) {
  return typeof value === 'string' ? value : messageOf(value) ?? reprOf(value)
}

/** What a thrown value says, to follow "it threw": an Error's message in parentheses, anything else quoted. */
function thrownText(err) {
  const message = messageOf(err)
  return message === undefined ? reprOf(err) : `(${message})`
}

/** What an abort's reason says: a string itself, an Error's message; undefined when it says nothing. */
function reasonText(reason) {
  return typeof reason === 'string' ? reason : messageOf(reason)
}

function abortReasonText(reason) {
  const text = reasonText(reason)
  return text ? `aborted by the caller: ${text}` : 'aborted by the caller'
}

module.exports = { bigintToString, describeReturn, describeThrown, errorAsData, jsonOf, reprOf, textOf, thrownText, clip, abortReasonText, reasonText }
