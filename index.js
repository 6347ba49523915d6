'use strict'
// The package entry. The engine (crates/core, through binding.js) runs every station; this layer only runs the
// handlers on the JS thread, turns what they return or throw into strings, and settles them with synchronous
// calls into the engine. See ../shared/DESIGN.md, "The boundary".

const { Engine } = require('./binding.js')

/** Marker the engine reads in place of a call that JSON.stringify could not serialize. */
const UNSERIALIZABLE = '__toolgateUnserializable'
const ERROR_KINDS = Object.freeze([
  'unknown_tool', 'invalid_arguments', 'permission_denied', 'approval_denied', 'rate_limited', 'timeout',
  'idle_timeout', 'cancelled', 'not_executed', 'handler_error', 'duplicate',
])
const DEFINITION_FORMATS = ['openai-responses', 'openai-chat', 'anthropic', 'ai-sdk']
const RESULT_FORMATS = ['anthropic', 'openai-responses', 'openai-chat', 'ai-sdk']
const ENGINE_OPTIONS = ['defaultTimeoutMs', 'maxTimeoutMs', 'concurrency', 'maxOutputChars', 'maxErrorChars']
const SPEC_FIELDS = ['name', 'description', 'parameters', 'readOnly', 'idempotent', 'timeoutMs', 'maxOutputChars', 'needsApproval', 'replace']

/**
 * Executors with a turn in flight, by engine id. Held strongly while a turn is open so that a turn waiting only
 * on a deadline is never collected; the engine's wake-up finds its executor here.
 */
const live = new Map()

function wake(engineId) {
  const onWake = live.get(engineId)
  if (onWake) onWake()
}

class ToolExecutor {
  #engine
  #handlers = new Map()
  #turns = new Map()
  #runs = new Map()
  /** The starts of the step being applied, and which one is starting now. */
  #pendingStarts = null
  #startIndex = 0

  /** @param {import('./index').ExecutorOptions} [options] */
  constructor(options = {}) {
    if (options === null || typeof options !== 'object') throw new TypeError('new ToolExecutor(options): options must be an object')
    const json = JSON.stringify(pick(options, ENGINE_OPTIONS, 'ToolExecutor options'))
    this.#engine = programmerError(() => new Engine(json, wake))
  }

  /** Registers a tool. Throws at once when the spec cannot work (bad name, schema that does not compile, duplicate). */
  register(spec) {
    if (spec === null || typeof spec !== 'object') throw new TypeError('register(spec): spec must be an object')
    if (typeof spec.handler !== 'function') {
      throw new TypeError(`register(spec): tool "${spec.name}" needs a handler function (args, ctx) => result`)
    }
    const { handler, ...rest } = spec
    const json = JSON.stringify(pick(rest, SPEC_FIELDS, `tool "${spec.name}"`))
    programmerError(() => this.#engine.register(json))
    this.#handlers.set(spec.name, handler)
    return this
  }

  unregister(name) {
    this.#handlers.delete(name)
    return this.#engine.unregister(String(name))
  }

  /** The registered tools (without handlers), optionally only those a context may use. */
  list(options = {}) {
    return JSON.parse(this.#engine.list(policyJson(options.context)))
  }

  /** The registered tools as a provider's tool definitions. */
  definitions(format, options = {}) {
    if (!DEFINITION_FORMATS.includes(format)) {
      throw new TypeError(`definitions(format): format must be one of ${DEFINITION_FORMATS.join(', ')}; got ${String(format)}`)
    }
    const policy = policyJson(options.context)
    const defs = JSON.parse(this.#engine.definitions(format, policy))
    if (format !== 'ai-sdk' || typeof options.jsonSchema !== 'function') return defs
    // With the AI SDK's jsonSchema helper: the `tools` record generateText/streamText take (no execute: toolgate runs them).
    return Object.fromEntries(defs.map((d) => [d.name, { description: d.description, inputSchema: options.jsonSchema(d.inputSchema) }]))
  }

  /** How many handlers are running now, across all turns. */
  get running() {
    return this.#engine.running
  }

  /**
   * Runs one turn of tool calls. Resolves to one ToolResult per call, in input order; rejects only for
   * programmer errors (calls not an array, a malformed context or signal).
   */
  execute(calls, options = {}) {
    const { signal, context } = options ?? {}
    let step
    try {
      if (!Array.isArray(calls)) throw new TypeError(`execute(calls): calls must be an array of tool calls, got ${typeof calls}`)
      if (signal != null && !(typeof signal.aborted === 'boolean' && typeof signal.addEventListener === 'function')) {
        throw new TypeError('execute(calls, { signal }): signal must be an AbortSignal')
      }
      const cancelled = signal?.aborted ? abortReasonText(signal.reason) : undefined
      const policy = policyJson(context)
      step = JSON.parse(programmerError(() => this.#engine.begin(serializeCalls(calls), policy, cancelled)))
    } catch (err) {
      return Promise.reject(err)
    }
    return new Promise((resolve) => {
      const turn = { id: step.turn, resolve, context, signal, onAbort: null, abortReason: undefined }
      if (signal && !signal.aborted) {
        turn.onAbort = () => {
          turn.abortReason = signal.reason
          this.#apply(this.#engine.cancel(turn.id, abortReasonText(signal.reason), this.#unstartedRuns(turn.id)))
        }
        signal.addEventListener('abort', turn.onAbort, { once: true })
      }
      this.#turns.set(turn.id, turn)
      if (this.#turns.size === 1) live.set(this.#engine.id, () => this.#apply(this.#engine.expire()))
      this.#applyStep(step)
    })
  }

  #apply(wire) {
    if (wire !== '') this.#applyStep(JSON.parse(wire))
  }

  #applyStep(step) {
    if (step.abort) for (const run of step.abort) this.#abort(run)
    if (step.start) {
      // A handler may abort its own turn while later starts of this step wait: they are then answered as not run.
      const [outerStarts, outerIndex] = [this.#pendingStarts, this.#startIndex]
      this.#pendingStarts = step.start
      for (let i = 0; i < step.start.length; i++) {
        this.#startIndex = i
        this.#start(step.start[i])
      }
      ;[this.#pendingStarts, this.#startIndex] = [outerStarts, outerIndex]
    }
    if (step.done) for (const turnId of step.done) this.#finish(turnId)
  }

  #unstartedRuns(turnId) {
    const pending = this.#pendingStarts
    if (pending === null) return []
    return pending.slice(this.#startIndex + 1).filter((start) => start[1] === turnId).map((start) => start[0])
  }

  #start([run, turnId, callId, name, args]) {
    const turn = this.#turns.get(turnId)
    // A handler earlier in the same step may have aborted the turn's signal: the turn is answered already.
    if (turn === undefined) return
    const call = new RunningCall(turn)
    this.#runs.set(run, call)
    const handler = this.#handlers.get(name)
    const ctx = handlerContext(call, callId, name, turn.context)
    let returned
    try {
      if (!handler) throw new Error(`tool "${name}" was unregistered before this call started`)
      returned = handler(args, ctx)
    } catch (err) {
      returned = Promise.reject(err)
    }
    // Promise.resolve also absorbs thenables whose `then` throws; a plain value settles on the next microtask.
    Promise.resolve(returned).then(
      (value) => this.#settle(run, value, describeReturn),
      (err) => this.#settle(run, err, describeThrown),
    )
  }

  #settle(run, value, describe) {
    // A run no longer listed timed out or was cancelled: the engine has already answered for it.
    if (!this.#runs.delete(run)) return
    let outcome
    try {
      outcome = describe(value)
    } catch (err) {
      // A getter or toJSON that throws while being read: the call fails, the turn goes on.
      outcome = ['unrepresentable', `reading it threw (${err?.message ?? String(err)})`]
    }
    this.#apply(this.#engine.complete(run, outcome[0], outcome[1]))
  }

  #abort(run) {
    const call = this.#runs.get(run)
    if (!call) return
    this.#runs.delete(run)
    const { turn } = call
    call.abort(turn.abortReason !== undefined ? turn.abortReason : new DOMException('The tool call exceeded its time limit', 'TimeoutError'))
  }

  #finish(turnId) {
    const turn = this.#turns.get(turnId)
    this.#turns.delete(turnId)
    if (this.#turns.size === 0) live.delete(this.#engine.id)
    if (turn.onAbort) turn.signal.removeEventListener('abort', turn.onAbort)
    turn.resolve(JSON.parse(this.#engine.finish(turnId)))
  }
}

/** A handler in flight. Its AbortController is made only when the handler reads `ctx.signal`: most never do,
 * and making one costs more than the rest of a trivial call's bookkeeping in JS. */
class RunningCall {
  constructor(turn) {
    this.turn = turn
    this.controller = undefined
    this.abortReason = undefined
  }

  get signal() {
    if (this.controller === undefined) {
      this.controller = new AbortController()
      if (this.abortReason !== undefined) this.controller.abort(this.abortReason)
    }
    return this.controller.signal
  }

  abort(reason) {
    this.abortReason = reason
    this.controller?.abort(reason)
  }
}

/** What a handler gets as `ctx`. `signal` is an own enumerable getter, so `{ ...ctx }` keeps it. */
function handlerContext(call, callId, toolName, context) {
  const ctx = { callId, toolName, context }
  Object.defineProperty(ctx, 'signal', { get: () => call.signal, enumerable: true })
  return ctx
}

/** The engine's refusals of a programmer's input, thrown as the TypeError the JS-side checks throw. */
function programmerError(fn) {
  try {
    return fn()
  } catch (err) {
    throw err?.code === 'InvalidArg' ? new TypeError(err.message) : err
  }
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

function policyJson(context) {
  if (context == null) return ''
  if (typeof context !== 'object') throw new TypeError('execute(calls, { context }): context must be an object')
  const policy = {}
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

function serializeCalls(calls) {
  try {
    return JSON.stringify(calls)
  } catch {
    // One call that cannot be serialized (a BigInt or a cycle in its input) must not sink the others.
    return `[${calls.map(serializeCall).join(',')}]`
  }
}

function serializeCall(call) {
  try {
    return JSON.stringify(call) ?? 'null'
  } catch (err) {
    const strings = (o) => Object.fromEntries(Object.entries(o ?? {}).filter(([, v]) => typeof v === 'string'))
    const { arguments: _a, input: _i, args: _g, ...ids } = strings(call)
    return JSON.stringify({ ...ids, function: strings(call.function), [UNSERIALIZABLE]: `its arguments cannot be serialized as JSON (${err.message})` })
  }
}

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
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return ['text', `(binary data: ${value.byteLength} bytes, not shown)`]
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
      return ['thrown', JSON.stringify({
        name: typeof err.name === 'string' ? err.name : 'Error',
        message: typeof err.message === 'string' ? err.message : reprOf(err.message),
        stack: typeof err.stack === 'string' ? err.stack : undefined,
        code: typeof code === 'string' || typeof code === 'number' ? code : undefined,
        retryable: err.retryable === true,
      })]
    }
    return ['thrown', JSON.stringify({ nonError: reprOf(err) })]
  } catch {
    return ['thrown', JSON.stringify({ nonError: 'a value that could not be read' })]
  }
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

/** The text a model should read for a result: its output on success, "Error (kind): …" on failure. */
function forLlm(result) {
  if (result.success) return result.output
  if (typeof result.output === 'string' && result.output.startsWith('Error (')) return result.output
  return `Error (${result.errorKind ?? 'handler_error'}): ${result.error ?? result.output}`
}

/** Results → the message(s) a provider expects next in the conversation. */
function formatResults(results, format) {
  if (!Array.isArray(results)) throw new TypeError('formatResults(results, format): results must be an array of ToolResult')
  switch (format) {
    case 'anthropic':
      return {
        role: 'user',
        content: results.map((r) => ({ type: 'tool_result', tool_use_id: r.callId, content: forLlm(r), ...(r.success ? {} : { is_error: true }) })),
      }
    case 'openai-responses':
      return results.map((r) => ({ type: 'function_call_output', call_id: r.callId, output: forLlm(r) }))
    case 'openai-chat':
      return results.map((r) => ({ role: 'tool', tool_call_id: r.callId, content: forLlm(r) }))
    case 'ai-sdk':
      return {
        role: 'tool',
        content: results.map((r) => ({
          type: 'tool-result',
          toolCallId: r.callId,
          toolName: r.name,
          output: { type: r.success ? 'text' : 'error-text', value: forLlm(r) },
        })),
      }
    default:
      throw new TypeError(`formatResults(results, format): format must be one of ${RESULT_FORMATS.join(', ')}; got ${String(format)}`)
  }
}

module.exports = { ToolExecutor, formatResults, forLlm, ERROR_KINDS }
