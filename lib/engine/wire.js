// @ts-check
'use strict'
// The wire between the JS layer and the engine: calls and contexts in, results out (see the engine's
// `results_to_wire`), and the engine's refusals of a programmer's input as TypeErrors.

const { clip, textOf, thrownText } = require('./describe.js')
const { RESULT_FLAG, readResultRow } = require('./wire.generated.js')

/** Marker the engine reads in place of a call that JSON.stringify could not serialize. */
const UNSERIALIZABLE = '__toolgateUnserializable'

/** The keys of the objects that nest a call's fields (Chat Completions, Gemini, Bedrock Converse), in the order the
 * engine reads them: it takes the first that holds an object. */
const NESTS = ['function', 'functionCall', 'toolUse']

function nestOf(call) {
  for (const key of NESTS) {
    const value = call?.[key]
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) return value
  }
  return undefined
}

/** A call's arguments as the model sent them (parsed when they are JSON text), for traces and audit records: the
 * field the engine reads, the first of `arguments`, `input` and `args` that is there (`null` too, which means none),
 * the call's own before the nested one's. */
function argumentsOf(call) {
  let raw
  try {
    const nest = nestOf(call)
    for (const key of ['arguments', 'input', 'args']) {
      raw = call?.[key] !== undefined ? call[key] : nest?.[key]
      if (raw !== undefined) break
    }
  } catch {
    return '(arguments that cannot be read)'
  }
  if (typeof raw !== 'string') return raw ?? {}
  if (raw.trim() === '') return {}
  try {
    return JSON.parse(raw)
  } catch {
    return raw
  }
}

/** The engine's refusals of a programmer's input, thrown as the TypeError the JS-side checks throw. */
function programmerError(fn) {
  try {
    return fn()
  } catch (err) {
    throw err?.code === 'InvalidArg' ? new TypeError(err.message) : err
  }
}

function policyJson(context) {
  if (context == null) return ''
  if (typeof context !== 'object') throw new TypeError('execute(calls, { context }): context must be an object')
  // Plain fields (sessionId, userId, tenantId, …) key dedup sessions, cache scopes and rate-limit buckets.
  const fields = {}
  for (const [key, value] of Object.entries(context)) {
    if (typeof value === 'string' || typeof value === 'number') fields[key] = String(value)
  }
  const policy = { fields }
  if (context.permissions !== undefined) policy.permissions = context.permissions
  if (context.maxRisk !== undefined) policy.maxRisk = context.maxRisk
  if (context.budget !== undefined) policy.budget = context.budget
  for (const key of ['allowedTools', 'deniedTools', 'approvedTools']) {
    const list = context[key]
    if (list === undefined) continue
    if (!Array.isArray(list) || !list.every((n) => typeof n === 'string')) {
      throw new TypeError(`context.${key} must be an array of tool names`)
    }
    policy[key] = list
  }
  return JSON.stringify(policy)
}

/** A turn's results from the engine's wire form (see `results_to_wire` in the engine): a JSON array whose first
 * entry holds the stage sequences new to `stages` (the executor's table of them, by id) and whose other entries are
 * the results, a plain success as its `ResultRow`, built here into the same object key for key; then the
 * outputs of those plain successes that are not the text their handler sent (`sent`, by call), in order. */
function readResults(wire, sent, stages) {
  const rows = JSON.parse(wire[0])
  for (const fresh of rows[0]) stages.push(fresh)
  const results = new Array(rows.length - 1)
  let output = 1
  for (let i = 0; i < results.length; i++) {
    const row = rows[i + 1]
    if (!Array.isArray(row)) {
      results[i] = row
      continue
    }
    const plain = readResultRow(/** @type {import('./wire.generated').ResultRowRecord} */ (row))
    const text = plain.flags & RESULT_FLAG.asSent ? sent[i] : wire[output++]
    results[i] = plainResult(plain, text, typeof plain.stages === 'number' ? stages[plain.stages].slice() : plain.stages)
  }
  return results
}

/** @param {import('./wire.generated').ResultRow} row */
function plainResult({ callId, name, flags, latencyMs, attempts, startedAt, queuedMs, structured, redactions, timings, starts }, output, stages) {
  const metadata = {}
  if (flags & RESULT_FLAG.structured) metadata.structured = structured
  if (redactions !== null) metadata.redactions = redactions
  metadata.stages = stages
  metadata.startedAt = startedAt
  if (queuedMs !== null) metadata.queuedMs = queuedMs
  if (timings !== null) metadata.timings = timings
  if (starts !== null) metadata.starts = starts
  return {
    callId,
    name,
    success: (flags & RESULT_FLAG.success) !== 0,
    output,
    retryable: (flags & RESULT_FLAG.retryable) !== 0,
    latencyMs,
    attempts,
    cached: (flags & RESULT_FLAG.cached) !== 0,
    truncated: (flags & RESULT_FLAG.truncated) !== 0,
    metadata,
  }
}

function serializeCalls(calls) {
  try {
    return JSON.stringify(calls)
  } catch {
    // One call that cannot be serialized (a BigInt or a cycle in its input, a getter that throws) must not sink
    // the others.
  }
  let each
  try {
    each = Array.from(calls, serializeCall)
  } catch (err) {
    throw new TypeError(`execute(calls): calls cannot be read as an array (${textOf(err)})`)
  }
  return `[${each.join(',')}]`
}

/** The fields that pair a call's result with it and name its tool, in any provider's shape (ids in the order the
 * engine reads them). */
const ID_FIELDS = ['call_id', 'toolCallId', 'toolUseId', 'id']
const NAME_FIELDS = ['name', 'toolName']

/** What can be read of a call's id and name fields (and MCP's progress token), one field at a time, and whether
 * reading any of them threw. */
function readIds(call) {
  const fields = {}
  let threw = false
  const read = (object, keys, into) => {
    for (const key of keys) {
      try {
        const value = object?.[key]
        if (typeof value === 'string') into[key] = value
      } catch {
        threw = true
      }
    }
  }
  read(call, [...ID_FIELDS, ...NAME_FIELDS], fields)
  const nested = {}
  let token
  try {
    read(nestOf(call), [...ID_FIELDS, ...NAME_FIELDS], nested)
    token = call?._meta?.progressToken
  } catch {
    threw = true
  }
  if ((typeof token === 'string' && token !== '') || Number.isSafeInteger(token)) fields._meta = { progressToken: token }
  return { fields, nested, threw }
}

/** A call's id and tool name as sent, read as the engine reads them: the call's own fields before its nest's, ids in
 * the engine's order, MCP's progress token when it has no id. Either is undefined when the call has none. */
function sentIds(call) {
  const { fields, nested } = readIds(call)
  const pick = (keys) => keys.map((k) => fields[k] || nested[k]).find(Boolean)
  const token = fields._meta?.progressToken
  return { callId: pick(ID_FIELDS) ?? (token === undefined ? undefined : String(token)), name: pick(NAME_FIELDS) }
}

/** One error result per call, for a turn the engine failed on as a whole (a bug: see `#guard` in executor.js). */
function internalFailures(calls, bug) {
  const error = `toolgate failed while running this turn (an internal error: ${clip(bug)}). This is a bug in toolgate, not in the call; report it.`
  return Array.from(calls, (call) => {
    const { callId, name } = sentIds(call)
    return {
      callId: callId ?? `call_${Math.random().toString(36).slice(2, 18)}`,
      name: name ?? '',
      success: false,
      output: `Error (handler_error): ${error}`,
      error,
      errorKind: 'handler_error',
      retryable: false,
      latencyMs: 0,
      attempts: 0,
      cached: false,
      truncated: false,
      metadata: { stages: [], startedAt: Date.now() },
    }
  })
}

function serializeCall(call) {
  try {
    return JSON.stringify(call) ?? 'null'
  } catch (err) {
    // What can be read of the call still pairs and names its result; the rest is its error.
    const { fields, nested, threw } = readIds(call)
    const why = threw ? `reading its fields threw ${thrownText(err)}` : `its arguments cannot be serialized as JSON (${textOf(err)})`
    return JSON.stringify({ ...fields, function: nested, [UNSERIALIZABLE]: why })
  }
}

/** Sets `key` as an own property, `__proto__` included (an assignment would set the prototype). */
function put(object, key, value) {
  if (key === '__proto__') Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true })
  else object[key] = value
}

/** A copy of plain data as the engine gives it (parsed from JSON: results, a handler's arguments), made by hand:
 * several times faster than structuredClone, and the same on such data. */
function copyOf(value) {
  if (value === null || typeof value !== 'object') return value
  if (Array.isArray(value)) return value.map(copyOf)
  const copy = {}
  for (const key of Object.keys(value)) put(copy, key, copyOf(value[key]))
  return copy
}

module.exports = { argumentsOf, copyOf, internalFailures, programmerError, policyJson, put, readResults, sentIds, serializeCalls }
