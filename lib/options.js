// @ts-check
'use strict'
// Executor, tool and turn options as the programmer writes them: unknown keys refused, the ones that can be turned
// off written in the engine's "off" form, and the listeners and observers the JS layer keeps for itself.

const observe = require('./observe.js')
// The keys the engine reads are declared with the wire.
const { ENGINE_OPTIONS, SPEC_FIELDS, TURN_OPTIONS } = require('./engine/wire.generated.js')

/** Executor options the JS layer keeps for itself: listeners and callbacks, and the observability sinks. */
const LISTENER_OPTIONS = ['onProgress', 'onTrace', 'approve']
const OBSERVER_OPTIONS = ['audit', 'otel']

/** What `false` means for the options that can be turned off, in the form the engine reads. */
const OFF = {
  retry: { maxRetries: 0 },
  redact: { builtin: false },
  repair: { json: false, keys: false, types: false, wrappers: false, toolNames: false, note: false },
}

/** `retry: false`, `redact: false`, `repair: false` → their "off" forms. Only the options themselves: a schema property named
 * `retry` is left alone. */
function offAsOptions(options) {
  let out = options
  for (const [key, off] of Object.entries(OFF)) if (options[key] === false) out = { ...out, [key]: off }
  return out
}

/** Moves the listener options out of `options`, checking they are functions. */
function takeListeners(options, what) {
  const listeners = {}
  for (const key of LISTENER_OPTIONS) {
    if (options[key] === undefined) continue
    if (typeof options[key] !== 'function') throw new TypeError(`${what}: ${key} must be a function`)
    listeners[key] = options[key]
    delete options[key]
  }
  return listeners
}

/** The audit file, the audit callback and OpenTelemetry, from the executor options; undefined when none is on. */
function takeObservers(options, onTrace) {
  const { audit, otel = true } = options
  delete options.audit
  delete options.otel
  const observers = { onTrace }
  if (audit !== undefined) {
    if (audit === null || typeof audit !== 'object') throw new TypeError('ToolExecutor options: audit must be { file?, maxBytes?, keep?, onRecord? }')
    const { file, maxBytes, keep, onRecord } = pick(audit, ['file', 'maxBytes', 'keep', 'onRecord'], 'ToolExecutor options: audit')
    if (onRecord !== undefined && typeof onRecord !== 'function') throw new TypeError('ToolExecutor options: audit.onRecord must be a function')
    if (file !== undefined) observers.auditSink = new observe.JsonlSink({ file, maxBytes, keep })
    observers.onRecord = onRecord
  }
  if (typeof otel !== 'boolean') throw new TypeError('ToolExecutor options: otel must be a boolean')
  const api = otel ? observe.loadOtel() : undefined
  if (api) {
    observers.otel = api
    observers.tracer = api.trace.getTracer('toolgate')
  }
  const on = observers.onTrace || observers.auditSink || observers.onRecord || observers.otel
  return on ? observers : undefined
}

/** Copies the known keys, refusing unknown ones so that a typo is caught at once. */
function pick(source, keys, what) {
  const out = {}
  for (const key of Object.keys(source)) {
    if (!keys.includes(key)) throw new TypeError(`${what}: unknown option "${key}" (known: ${keys.join(', ')})`)
    if (source[key] !== undefined) out[key] = source[key]
  }
  return out
}

/** A JSON.stringify replacer for options: NaN and Infinity would cross as null, which reads as "not set" (a budget
 * silently off), so they throw instead. The top-level keys in `skip` (schemas) are left to the schema compiler. */
function finiteNumbers(what, skip = []) {
  let root
  return function (key, value) {
    if (key === '') root = value
    else if (this === root && skip.includes(key)) return value
    if (typeof value === 'number' && !Number.isFinite(value)) throw new TypeError(`${what}: ${key} must be a finite number; got ${value}`)
    return value
  }
}

module.exports = { ENGINE_OPTIONS, LISTENER_OPTIONS, OBSERVER_OPTIONS, SPEC_FIELDS, TURN_OPTIONS, finiteNumbers, offAsOptions, pick, takeListeners, takeObservers }
