'use strict'
// Station 14 on the JS side: a finished turn's results become trace events (one per station a call passed), audit
// records (a callback and an append-only JSONL file), OpenTelemetry spans (when the application has
// @opentelemetry/api) and, from the engine's counters, Prometheus text and a health report.

const fs = require('node:fs')
const { clip } = require('./engine/describe.js')

/** Context fields an audit record carries when the execution context has them. */
const AUDIT_IDS = ['agentId', 'sessionId', 'userId', 'tenantId']

/** Trace events of one finished turn: per call, one event per station it passed, with what decided it. `ids` and
 * `args`: the calls' ids and arguments as a trace shows them (redacted, capped). */
function traceEvents(traceId, results, ids, args) {
  const events = []
  for (const [i, r] of results.entries()) {
    const { stages, timings, startedAt } = r.metadata
    let attempt = 0
    for (const [s, mark] of stages.entries()) {
      const colon = mark.indexOf(':')
      const station = mark.slice(0, colon)
      const outcome = mark.slice(colon + 1)
      const at = timings ? timings[s] : undefined
      const next = timings && s + 1 < stages.length ? timings[s + 1] : undefined
      if (station === 'invoke') attempt += 1
      const event = {
        type: 'station', traceId, callId: ids[i], toolName: r.name, station, outcome,
        at: at === undefined ? startedAt : startedAt + at,
        durationMs: at === undefined || next === undefined ? 0 : next - at,
      }
      const decided = decidedBy(r, station, outcome, attempt)
      if (decided !== undefined) event.decided = decided
      if (s === 0) event.args = args[i]
      events.push(event)
    }
  }
  return events
}

/** What decided a station's outcome, where there is more to say than the outcome. */
function decidedBy(r, station, outcome, attempt) {
  const m = r.metadata
  switch (station) {
    case 'permission':
    case 'approval':
      return m.permission?.by
    case 'repair':
    case 'parse':
      return outcome === 'ok' ? undefined : m.repairs
    case 'cache':
      return outcome === 'hit' ? 'answered from the cache' : undefined
    case 'rate_limit':
      return outcome === 'waited' ? 'waited for a token' : 'no token within the wait allowed'
    case 'invoke':
      return { attempt }
    case 'retry': {
      const failed = m.attemptErrors?.[attempt - 1]
      return failed && { attempt, errorKind: failed.errorKind, retryInMs: failed.retryInMs }
    }
    case 'judge':
      return r.rollback?.reason
    default:
      return undefined
  }
}

/** The longest text an audit record holds in one field: a model's id or an error may be any length. */
const AUDIT_FIELD_CHARS = 2_000

/** One audit record per call; its texts capped, so that no call can write a line of unbounded size. `callId` and
 * `args` as a trace shows them (redacted, capped). */
function auditRecord(traceId, r, callId, args, context) {
  const record = { traceId, callId, tool: clip(r.name, AUDIT_FIELD_CHARS) }
  for (const key of AUDIT_IDS) {
    const value = context?.[key]
    if (typeof value === 'string' || typeof value === 'number') record[key] = clip(String(value), AUDIT_FIELD_CHARS)
  }
  Object.assign(record, {
    args,
    startedAt: new Date(r.metadata.startedAt + (r.metadata.queuedMs ?? 0)).toISOString(),
    durationMs: r.latencyMs,
    status: r.success ? 'ok' : 'error',
  })
  if (!r.success) Object.assign(record, { errorKind: r.errorKind, error: clip(r.error, AUDIT_FIELD_CHARS) })
  Object.assign(record, { attempts: r.attempts, cached: r.cached, truncated: r.truncated, outputChars: r.output.length })
  return record
}

/**
 * An append-only JSONL file of audit records, rotated by size. Each record is one `write` of one whole line, so a
 * crash loses at most the line being written; on opening, a last line cut short by such a crash is dropped, so the
 * file always parses line by line.
 */
class JsonlSink {
  constructor({ file, maxBytes = 10 * 1024 * 1024, keep = 5 }) {
    if (typeof file !== 'string' || file === '') throw new TypeError('audit.file must be a file path')
    if (!(Number.isInteger(maxBytes) && maxBytes > 0)) throw new TypeError('audit.maxBytes must be a positive integer')
    if (!(Number.isInteger(keep) && keep >= 0)) throw new TypeError('audit.keep must be a non-negative integer')
    this.file = file
    this.maxBytes = maxBytes
    this.keep = keep
    this.fd = undefined
    this.size = 0
    /** Set by close(): a record that comes later (a turn that ended after the executor closed) is not written. */
    this.closed = false
  }

  #open() {
    this.fd = fs.openSync(this.file, 'a+', 0o600)
    this.size = fs.fstatSync(this.fd).size
    if (this.size > 0) this.#dropCutLine()
  }

  /** A crash mid-write can leave a last line without its newline: it is cut back to the last whole line. */
  #dropCutLine() {
    const tail = Buffer.alloc(Math.min(this.size, 64 * 1024))
    let end = this.size
    while (end > 0) {
      const from = Math.max(0, end - tail.length)
      const n = fs.readSync(this.fd, tail, 0, end - from, from)
      const last = tail.subarray(0, n).lastIndexOf(0x0a)
      if (last === n - 1 && end === this.size) return // ends in a newline: whole
      if (last >= 0) {
        fs.ftruncateSync(this.fd, from + last + 1)
        this.size = from + last + 1
        return
      }
      end = from
    }
    fs.ftruncateSync(this.fd, 0)
    this.size = 0
  }

  write(record) {
    this.writeLine(JSON.stringify(record))
  }

  /** A record already written as one line of JSON. */
  writeLine(json) {
    if (this.closed) return
    const line = Buffer.from(`${json}\n`)
    if (this.fd === undefined) this.#open()
    if (this.size > 0 && this.size + line.length > this.maxBytes) this.#rotate()
    let written = 0
    try {
      while (written < line.length) written += fs.writeSync(this.fd, line, written)
    } catch (err) {
      // A line written in part (disk full, a file size limit) is taken back: the file keeps parsing line by line.
      if (written > 0) fs.ftruncateSync(this.fd, this.size)
      throw err
    }
    this.size += line.length
  }

  #rotate() {
    fs.closeSync(this.fd)
    // Closed now: should a rename below fail, the next write opens the file again rather than use a number the
    // process may have handed to someone else.
    this.fd = undefined
    for (let i = this.keep; i >= 1; i--) {
      const from = i === 1 ? this.file : `${this.file}.${i - 1}`
      if (fs.existsSync(from)) {
        if (i === this.keep) fs.rmSync(`${this.file}.${i}`, { force: true })
        fs.renameSync(from, `${this.file}.${i}`)
      }
    }
    if (this.keep === 0) fs.rmSync(this.file, { force: true })
    this.#open()
  }

  close() {
    this.closed = true
    if (this.fd !== undefined) fs.closeSync(this.fd)
    this.fd = undefined
  }
}

/** The OpenTelemetry API, when the application has it: spans then go wherever its SDK sends them. */
function loadOtel() {
  try {
    return require('@opentelemetry/api')
  } catch {
    return undefined
  }
}

/** A span for a turn, parented to the caller's active context; none while no SDK is registered (the API alone
 * only hands out spans that record nothing). */
function startTurnSpan(otel, tracer, callCount) {
  const provider = otel.trace.getTracerProvider()
  const delegate = typeof provider.getDelegate === 'function' ? provider.getDelegate() : provider
  if (delegate?.constructor?.name === 'NoopTracerProvider') return undefined
  return tracer.startSpan('toolgate.execute', { attributes: { 'toolgate.calls': callCount } }, otel.context.active())
}

/** A span per call under the turn's span, with the GenAI semantic conventions' attribute names. */
function callSpans(otel, tracer, turnSpan, results, ids) {
  const parent = otel.trace.setSpan(otel.context.active(), turnSpan)
  for (const [i, r] of results.entries()) {
    const start = r.metadata.startedAt + (r.metadata.queuedMs ?? 0)
    const attributes = {
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': r.name,
      'gen_ai.tool.call.id': ids[i],
      'gen_ai.tool.type': 'function',
      'toolgate.attempts': r.attempts,
      'toolgate.cached': r.cached,
    }
    if (!r.success) attributes['error.type'] = r.errorKind
    const span = tracer.startSpan(`execute_tool ${r.name}`, { startTime: start, attributes }, parent)
    if (!r.success) span.setStatus({ code: otel.SpanStatusCode.ERROR, message: r.error })
    span.end(start + r.latencyMs)
  }
}

const PROM_COUNTERS = {
  retries: 'Retries started after a transient failure.',
  timeouts: 'Calls stopped at their time limit.',
  idleTimeouts: 'Calls stopped for reporting no progress.',
  lateSettlements: 'Handlers that settled after their call was answered.',
  cacheHits: 'Calls answered from the cache.',
  cacheMisses: 'Cache lookups that found nothing.',
  sharedFlights: 'Calls that shared an identical call\'s execution.',
  duplicates: 'Repeated queries within a session.',
  rateLimited: 'Calls refused a rate-limit token.',
  breakerOpened: 'Times the tool\'s circuit breaker opened.',
  breakerRefused: 'Calls answered unavailable because the tool\'s circuit breaker was open.',
  budgetExceeded: 'Calls refused because a budget would have been passed.',
}

const BREAKER_STATES = ['closed', 'open', 'half_open']

const PROM_STORE = {
  operations: 'Operations sent to the shared store.',
  errors: 'Shared store operations that failed or timed out.',
  timeouts: 'Shared store round trips not answered within timeoutMs.',
  unavailable: 'Calls the shared store failed (went on without it, or not run).',
}

/** `stats()` as Prometheus text exposition (version 0.0.4), for a Node server's /metrics. */
function prometheus(stats) {
  const lines = []
  const label = (v) => String(v).replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')
  const family = (name, type, help, samples) => {
    lines.push(`# HELP toolgate_${name} ${help}`, `# TYPE toolgate_${name} ${type}`)
    for (const [labels, value] of samples) {
      const text = Object.entries(labels).map(([k, v]) => `${k}="${label(v)}"`).join(',')
      lines.push(`toolgate_${name}${text ? `{${text}}` : ''} ${value}`)
    }
  }
  const tools = Object.entries(stats.tools)
  family('calls_total', 'counter', 'Tool calls that ended, by outcome (ok or the error kind).', tools.flatMap(([tool, t]) => [
    [{ tool, outcome: 'ok' }, t.successes],
    ...Object.entries(t.failures).map(([kind, n]) => [{ tool, outcome: kind }, n]),
  ]))
  for (const [key, help] of Object.entries(PROM_COUNTERS)) {
    const name = `${key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}_total`
    family(name, 'counter', help, tools.map(([tool, t]) => [{ tool }, t[key]]))
  }
  family('in_flight', 'gauge', 'Handlers running now.', tools.map(([tool, t]) => [{ tool }, t.inFlight]))
  family('breaker_state', 'gauge', 'The circuit breaker\'s state: 1 for the one it is in.', tools.filter(([, t]) => t.breaker !== undefined)
    .flatMap(([tool, t]) => BREAKER_STATES.map((state) => [{ tool, state }, t.breaker === state ? 1 : 0])))
  const quantiles = { p50: '0.5', p95: '0.95', p99: '0.99' }
  family('handler_latency_ms', 'summary', 'How long handlers ran, in ms (quantiles within 10%).', tools.flatMap(([tool, t]) =>
    Object.entries(quantiles).filter(([q]) => t.latencyMs[q] !== null).map(([q, quantile]) => [{ tool, quantile }, t.latencyMs[q]])))
  for (const [tool, t] of tools) {
    lines.push(`toolgate_handler_latency_ms_sum{tool="${label(tool)}"} ${t.latencyMs.sum}`)
    lines.push(`toolgate_handler_latency_ms_count{tool="${label(tool)}"} ${t.latencyMs.count}`)
  }
  if (stats.store) {
    for (const [key, help] of Object.entries(PROM_STORE)) family(`store_${key}_total`, 'counter', help, [[{}, stats.store[key]]])
  }
  return `${lines.join('\n')}\n`
}

/** Health from the counters: a tool is failing when most of its calls fail or its circuit breaker is open, degraded
 * past 10% failures or timeouts, or while its breaker lets trial calls through. */
function healthReport(stats, pending) {
  const tools = {}
  let worst = 'ok'
  const rank = { ok: 0, degraded: 1, failing: 2 }
  for (const [name, t] of Object.entries(stats.tools)) {
    const failures = t.calls - t.successes
    const errorRate = t.calls === 0 ? 0 : failures / t.calls
    const timeoutRate = t.calls === 0 ? 0 : (t.timeouts + t.idleTimeouts) / t.calls
    const status = errorRate > 0.5 || t.breaker === 'open' ? 'failing'
      : errorRate > 0.1 || timeoutRate > 0.1 || t.breaker === 'half_open' ? 'degraded' : 'ok'
    if (rank[status] > rank[worst]) worst = status
    tools[name] = { status, calls: t.calls, errorRate, timeoutRate, p95Ms: t.latencyMs.p95, inFlight: t.inFlight, lateSettlements: t.lateSettlements }
    if (t.breaker !== undefined) tools[name].breaker = t.breaker
  }
  const abandoned = pending.filter((p) => p.state === 'abandoned').length
  return { status: worst, tools, inFlight: stats.total.inFlight, abandonedHandlers: abandoned }
}

module.exports = { traceEvents, auditRecord, JsonlSink, loadOtel, startTurnSpan, callSpans, prometheus, healthReport }
