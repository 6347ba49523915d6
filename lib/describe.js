'use strict'
// Values from handlers and callbacks described in the engine's terms: a return value or a thrown value as an outcome
// kind and payload, and any foreign value as text.

function bigintToString(_key, value) {
  return typeof value === 'bigint' ? value.toString() : value
}

/** A handler's return value → [outcome kind, payload] for the engine's normalize station. */
function describeReturn(value) {
  if (typeof value === 'string') return ['text', value]
  if (value === undefined || value === null) return ['none', '']
  switch (typeof value) {
    case 'bigint': return ['text', value.toString()]
    case 'function': return ['unrepresentable', 'a function']
    case 'symbol': return ['unrepresentable', `a symbol (${value.description ?? ''})`]
    case 'number': if (!Number.isFinite(value)) return ['text', String(value)]
  }
  if (ArrayBuffer.isView(value)) return ['binary', Buffer.from(value.buffer, value.byteOffset, value.byteLength)]
  if (value instanceof ArrayBuffer) return ['binary', Buffer.from(value)]
  let json
  try {
    json = JSON.stringify(value)
  } catch (err) {
    if (!(err instanceof TypeError) || !/BigInt/i.test(err.message)) return ['unrepresentable', err.message]
    json = JSON.stringify(value, bigintToString)
  }
  // A toJSON that returns undefined leaves nothing to show.
  return json === undefined ? ['none', ''] : ['json', json]
}

/** A thrown value → ['thrown', JSON the engine reads]; name and message for the model, the rest for metadata. */
function describeThrown(err) {
  try {
    if (err instanceof Error || (err && typeof err === 'object' && typeof err.message === 'string')) {
      const code = err.code
      const status = [err.status, err.statusCode, err.response?.status].find((v) => Number.isInteger(v))
      return ['thrown', JSON.stringify({
        name: typeof err.name === 'string' ? err.name : 'Error',
        message: typeof err.message === 'string' ? err.message : reprOf(err.message),
        stack: typeof err.stack === 'string' ? err.stack : undefined,
        code: typeof code === 'string' || typeof code === 'number' ? code : undefined,
        retryable: typeof err.retryable === 'boolean' ? err.retryable : undefined,
        status: status >= 0 ? status : undefined,
        causeCode: typeof err.cause?.code === 'string' ? err.cause.code : undefined,
        retryAfterMs: retryAfterMs(err),
      })]
    }
    return ['thrown', JSON.stringify({ nonError: reprOf(err) })]
  } catch {
    return ['thrown', JSON.stringify({ nonError: 'a value that could not be read' })]
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
  const at = Date.parse(header)
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now())
}

/** A plain headers object's value, whatever the case of its key. */
function headerOf(headers, name) {
  if (headers === null || typeof headers !== 'object') return undefined
  const key = Object.keys(headers).find((k) => k.toLowerCase() === name)
  return key === undefined ? undefined : headers[key]
}

function reprOf(value) {
  if (value === undefined) return 'undefined (it rejected without a reason)'
  if (typeof value === 'string') return JSON.stringify(value.length > 500 ? `${value.slice(0, 500)}…` : value)
  if (typeof value !== 'object' || value === null) return String(value)
  try {
    const json = JSON.stringify(value, bigintToString)
    return json.length > 500 ? `${json.slice(0, 500)}…` : json
  } catch {
    return Object.prototype.toString.call(value)
  }
}

function abortReasonText(reason) {
  if (reason instanceof Error || (reason && typeof reason.message === 'string')) return `aborted by the caller: ${reason.message}`
  if (typeof reason === 'string' && reason) return `aborted by the caller: ${reason}`
  return 'aborted by the caller'
}

module.exports = { bigintToString, describeReturn, describeThrown, reprOf, abortReasonText }
