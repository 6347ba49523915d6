'use strict'
// Observability: trace events per station, audit records (callback and JSONL file), metrics, Prometheus text,
// health, and OpenTelemetry spans against an in-memory exporter.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const otel = require('@opentelemetry/api')
const { BasicTracerProvider, SimpleSpanProcessor, InMemorySpanExporter } = require('@opentelemetry/sdk-trace-base')
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks')
const { ToolExecutor, RetryableError } = require('..')
const { gateWith, sleep, never, runChild, collectWarnings } = require('./helpers')

const TOKEN = 'ghp_R8mQ2vX7kL4pN9wT3zJ6yH1sD5fG0aB2cE4u'
const Q = { type: 'object', properties: { q: { type: 'string' } }, required: ['q'], additionalProperties: false }

/** Runs one turn and waits for its trace batch. */
async function traced(tools, calls, options = {}, context) {
  const batches = []
  const { gate } = gateWith(tools, { ...options, onTrace: (events) => batches.push(events) })
  const results = await gate.execute(calls, { context })
  const delivered = batches.length
  await new Promise((resolve) => setImmediate(resolve))
  return { gate, results, delivered, events: batches.flat() }
}

const sequence = (events, callId) => events.filter((e) => e.callId === callId).map((e) => `${e.station}:${e.outcome}`)

describe('trace events', () => {
  it('gives one event per station, in order, with times, durations and what decided', async () => {
    let attempt = 0
    const { results, events, delivered } = await traced([
      { name: 'search', readOnly: true, idempotent: true, parameters: Q, handler: async ({ q }) => `found ${q}` },
      { name: 'flaky', readOnly: true, retry: { initialDelayMs: 1, maxDelayMs: 2 }, handler: () => { if (++attempt === 1) throw new RetryableError('busy'); return 'ok' } },
      { name: 'slow', readOnly: true, timeoutMs: 20, retry: false, handler: never },
    ], [
      { id: 'a', name: 'search', input: { q: 'x' } },
      { id: 'b', name: 'search', input: { q: ['y'] } },
      { id: 'c', name: 'nope' },
      { id: 'd', name: 'flaky' },
      { id: 'e', name: 'slow' },
      { id: 'f', name: 'search', input: { Q: 'z' } },
    ], { permissions: { deny: ['nope'] } })
    assert.equal(delivered, 0, 'events come after execute resolves, never inside it')
    assert.deepEqual(sequence(events, 'a'), ['lookup:found', 'parse:ok', 'validate:ok', 'permission:allowed', 'cache:miss', 'invoke:returned', 'normalize:text', 'shape:ok'])
    assert.deepEqual(sequence(events, 'b'), ['lookup:found', 'parse:ok', 'validate:invalid_arguments'])
    assert.deepEqual(sequence(events, 'c'), ['lookup:unknown_tool'])
    assert.deepEqual(sequence(events, 'd'), ['lookup:found', 'parse:ok', 'validate:ok', 'permission:allowed', 'invoke:failed', 'normalize:error', 'shape:ok', 'retry:scheduled', 'invoke:returned', 'normalize:text', 'shape:ok'])
    assert.deepEqual(sequence(events, 'e'), ['lookup:found', 'parse:ok', 'validate:ok', 'permission:allowed', 'invoke:timeout'])
    assert.deepEqual(sequence(events, 'f'), ['lookup:found', 'parse:ok', 'repair:applied', 'validate:ok', 'permission:allowed', 'cache:miss', 'invoke:returned', 'normalize:text', 'shape:ok'])
    const a = events.filter((e) => e.callId === 'a')
    assert.ok(a.every((e, i) => i === 0 || e.at >= a[i - 1].at), 'timestamps in order')
    assert.ok(a.every((e) => e.durationMs >= 0 && e.traceId === a[0].traceId && e.toolName === 'search'))
    assert.equal(a[0].at >= results[0].metadata.startedAt, true)
    assert.deepEqual(a[0].args, { q: 'x' }, 'the first event of a call carries its arguments')
    const d = events.filter((e) => e.callId === 'd')
    assert.deepEqual(d.filter((e) => e.station === 'invoke').map((e) => e.decided), [{ attempt: 1 }, { attempt: 2 }])
    assert.deepEqual(d.find((e) => e.station === 'retry').decided, { attempt: 1, errorKind: 'handler_error', retryInMs: results[3].metadata.attemptErrors[0].retryInMs })
    assert.equal(events.find((e) => e.callId === 'a' && e.station === 'permission').decided, undefined, 'nothing to say: no rule applied')
    assert.equal(events.find((e) => e.callId === 'c' && e.station === 'lookup').outcome, 'unknown_tool')
    assert.deepEqual(events.find((e) => e.callId === 'f' && e.station === 'repair').decided, [{ path: '', before: 'Q', after: 'q', rule: 'key-case' }])
  })

  it('redacts and caps the argument snapshots', async () => {
    const { events } = await traced([{ name: 'post', handler: () => 'ok' }], [
      { id: 'a', name: 'post', input: { token: TOKEN, body: 'x'.repeat(10_000) } },
    ])
    const args = events[0].args
    assert.equal(args.token, '[REDACTED:github-token]')
    assert.ok(JSON.stringify(args).length < 2_100, 'capped')
    assert.match(args.body, /more characters\]$/)
  })

  it('marks a cache hit, an approval and a refusal with what decided them', async () => {
    const { gate } = gateWith([{ name: 'search', readOnly: true, idempotent: true, parameters: Q }, { name: 'deploy', needsApproval: true }], {
      onTrace: (events) => batches.push(events), approve: () => ({ decision: 'approve' }),
    })
    const batches = []
    await gate.execute([{ id: 'a', name: 'search', input: { q: 'x' } }])
    await gate.execute([{ id: 'b', name: 'search', input: { q: 'x' } }, { id: 'c', name: 'deploy' }])
    await new Promise((resolve) => setImmediate(resolve))
    const events = batches.flat()
    assert.equal(events.find((e) => e.callId === 'b' && e.station === 'cache').decided, 'answered from the cache')
    assert.deepEqual(sequence(events, 'c').slice(3, 5), ['permission:asked', 'approval:approved'])
    assert.match(events.find((e) => e.callId === 'c' && e.station === 'approval').decided, /approved by the approval callback/)
  })
})

describe('audit', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolgate-audit-'))
  after(() => fs.rmSync(dir, { recursive: true, force: true }))

  it('writes one redacted record per call to the callback and the JSONL file', async () => {
    const file = path.join(dir, 'audit.jsonl')
    const records = []
    const { gate } = gateWith([{ name: 'push', handler: ({ q }) => `pushed ${q}`, parameters: Q }], { audit: { file, onRecord: (r) => records.push(r) } })
    const context = { agentId: 'agent-7', sessionId: 's1', userId: 'ada', other: { x: 1 } }
    await gate.execute([{ id: 'c1', name: 'push', input: { q: TOKEN } }, { id: 'c2', name: 'push', input: {} }], { context })
    const lines = fs.readFileSync(file, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l))
    assert.deepEqual(lines, records)
    const [ok, bad] = lines
    assert.deepEqual(Object.keys(ok), ['traceId', 'callId', 'tool', 'agentId', 'sessionId', 'userId', 'args', 'startedAt', 'durationMs', 'status', 'attempts', 'cached', 'truncated', 'outputChars'])
    assert.deepEqual([ok.callId, ok.tool, ok.agentId, ok.sessionId, ok.userId, ok.status, ok.attempts, ok.cached], ['c1', 'push', 'agent-7', 's1', 'ada', 'ok', 1, false])
    assert.deepEqual(ok.args, { q: '[REDACTED:github-token]' })
    assert.ok(!fs.readFileSync(file, 'utf8').includes(TOKEN), 'no secret in the file')
    assert.equal(ok.outputChars, 'pushed [REDACTED:github-token]'.length)
    assert.ok(!Number.isNaN(Date.parse(ok.startedAt)))
    assert.deepEqual([bad.status, bad.errorKind, bad.attempts], ['error', 'invalid_arguments', 0])
    assert.match(bad.error, /missing required property "q"/)
    assert.equal(ok.traceId, bad.traceId)
    await gate.close()
  })

  it("records the arguments of calls in every shape, nested ones included, as the handler got them", async () => {
    const records = []
    const { gate } = gateWith([{ name: 'push', handler: ({ q }) => `pushed ${q}`, parameters: Q }], { audit: { onRecord: (r) => records.push(r) } })
    await gate.execute([
      { functionCall: { id: 'g', name: 'push', args: { q: 'gemini' } } },
      { toolUse: { toolUseId: 'b', name: 'push', input: { q: 'bedrock' } } },
      { id: 'o', type: 'function', function: { name: 'push', arguments: '{"q":"chat"}' } },
      { name: 'push', arguments: { q: 'mcp' }, _meta: { progressToken: 'm' } },
    ])
    assert.deepEqual(records.map((r) => [r.callId, r.args]), [['g', { q: 'gemini' }], ['b', { q: 'bedrock' }], ['o', { q: 'chat' }], ['m', { q: 'mcp' }]])
    // A field that is there as null means no arguments, as the engine reads it, and an array is no nesting object.
    records.length = 0
    await gate.execute([
      { id: 'n1', name: 'push', arguments: null, input: { q: 'not sent' } },
      { id: 'n2', arguments: null, function: { name: 'push', arguments: '{"q":"not sent"}' } },
      { function: [], functionCall: { id: 'n3', name: 'push', args: { q: 'nested' } } },
      { id: 'n4', name: 'push', arguments: ' ' },
    ])
    assert.deepEqual(records.map((r) => [r.callId, r.args]), [['n1', {}], ['n2', {}], ['n3', { q: 'nested' }], ['n4', {}]])
    await gate.close()
  })

  it('drops a last line cut short by a crash, and keeps every whole line', async () => {
    const file = path.join(dir, 'crashed.jsonl')
    fs.writeFileSync(file, '{"callId":"old1"}\n{"callId":"old2"}\n{"callId":"cut-in-the-mi')
    const { gate } = gateWith([{ name: 't' }], { audit: { file } })
    await gate.execute([{ id: 'new', name: 't' }])
    const lines = fs.readFileSync(file, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l))
    assert.deepEqual(lines.map((l) => l.callId), ['old1', 'old2', 'new'])
    await gate.close()
  })

  it('rotates by size, keeping the newest files', async () => {
    const file = path.join(dir, 'rotating.jsonl')
    const { gate } = gateWith([{ name: 't' }], { audit: { file, maxBytes: 600, keep: 2 } })
    for (let i = 0; i < 12; i++) await gate.execute([{ id: `c${i}`, name: 't' }])
    await gate.close()
    const files = fs.readdirSync(dir).filter((f) => f.startsWith('rotating')).sort()
    assert.deepEqual(files, ['rotating.jsonl', 'rotating.jsonl.1', 'rotating.jsonl.2'])
    for (const f of files) {
      const text = fs.readFileSync(path.join(dir, f), 'utf8')
      assert.ok(text.length <= 600, `${f} is ${text.length} bytes`)
      for (const line of text.trimEnd().split('\n')) JSON.parse(line)
    }
    const newest = fs.readFileSync(file, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l).callId)
    assert.equal(newest.at(-1), 'c11')
  })

  it('keeps the turn\'s results when the audit file cannot be written, with a warning', async () => {
    const warnings = []
    const onWarning = (w) => warnings.push(w.message)
    process.on('warning', onWarning)
    const { gate } = gateWith([{ name: 't' }], { audit: { file: path.join(dir, 'no-such-dir', 'a.jsonl') } })
    const [r] = await gate.execute([{ name: 't' }])
    await new Promise((resolve) => setImmediate(resolve))
    process.off('warning', onWarning)
    assert.equal(r.output, 'ok')
    assert.ok(warnings.some((w) => /reporting a finished turn failed: ENOENT/.test(w)), warnings.join('\n'))
  })

  it('opens the file again after a rotation that failed, never writing through a closed descriptor', async () => {
    const file = path.join(dir, 'blocked.jsonl')
    fs.mkdirSync(`${file}.1`) // in the way of the rotation
    fs.writeFileSync(path.join(`${file}.1`, 'x'), '')
    const { gate } = gateWith([{ name: 't' }], { audit: { file, maxBytes: 250, keep: 1 } })
    const { warnings, stop } = collectWarnings()
    try {
      await gate.execute([{ id: 'one', name: 't' }])
      await gate.execute([{ id: 'two', name: 't' }]) // the rotation fails part-way
      const mine = path.join(dir, 'application.txt')
      const fd = fs.openSync(mine, 'w') // the process hands the freed descriptor number to the application
      fs.rmSync(`${file}.1`, { recursive: true })
      await gate.execute([{ id: 'three', name: 't' }])
      fs.writeSync(fd, 'APPLICATION DATA\n')
      fs.closeSync(fd)
      assert.equal(fs.readFileSync(mine, 'utf8'), 'APPLICATION DATA\n', "the application's file keeps its data")
      assert.ok(!fs.readFileSync(file, 'utf8').includes('APPLICATION DATA'), 'the audit log holds only records')
      await new Promise((resolve) => setImmediate(resolve))
      assert.ok(warnings.some((w) => /reporting a finished turn failed/.test(w.message)))
    } finally {
      stop()
      await gate.close()
    }
  })

  it('writes nothing after close(), even for a turn that ends later', async () => {
    const file = path.join(dir, 'after-close.jsonl')
    const { gate } = gateWith([{ name: 'big', readOnly: true, handler: () => 'x'.repeat(5_000_000) }], { audit: { file }, maxOutputChars: 1000 })
    await gate.execute([{ id: 'first', name: 'big' }])
    const turn = gate.execute([{ id: 'late', name: 'big' }])
    await new Promise((resolve) => setImmediate(resolve))
    await gate.close({ timeoutMs: 1 })
    await turn
    await sleep(50)
    const ids = fs.readFileSync(file, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l).callId)
    assert.deepEqual(ids, ['first'], 'the turn that ended after close() wrote no record')
    const open = fs.readdirSync('/proc/self/fd').filter((f) => { try { return fs.readlinkSync(`/proc/self/fd/${f}`) === file } catch { return false } })
    assert.deepEqual(open, [], 'no descriptor of the audit file is left open')
  })

  it("records each call of a turn against the turn's own calls: holes in the array are calls, later changes are not", async () => {
    const records = []
    const traces = []
    const { gate } = gateWith([{ name: 'ok', parameters: Q, handler: ({ q }) => q }], { audit: { onRecord: (r) => records.push(r) }, onTrace: (e) => traces.push(...e) })
    const calls = [{ id: 'a', name: 'ok', input: { q: 'A' } }, , { id: 'c', name: 'ok', input: { q: 'C' } }]
    const turn = gate.execute(calls)
    calls.reverse() // the caller reuses its array
    const results = await turn
    await new Promise((resolve) => setImmediate(resolve))
    assert.deepEqual(results.map((r) => r.errorKind ?? r.output), ['A', 'invalid_arguments', 'C'])
    assert.deepEqual(records.map((r) => [r.callId === results[1].callId ? 'hole' : r.callId, r.args]), [['a', { q: 'A' }], ['hole', {}], ['c', { q: 'C' }]])
    assert.ok(traces.length > 0)
  })

  it('refuses audit options it cannot use', () => {
    assert.throws(() => new ToolExecutor({ audit: { file: '' } }), TypeError)
    assert.throws(() => new ToolExecutor({ audit: { file: 'x', maxBytes: 0 } }), TypeError)
    assert.throws(() => new ToolExecutor({ audit: { onRecord: 1 } }), TypeError)
    assert.throws(() => new ToolExecutor({ audit: { path: 'x' } }), /audit: unknown option "path" \(known: file, maxBytes, keep, onRecord\)/)
  })
})

describe('metrics', () => {
  it('counts calls by outcome, latency percentiles and what is in flight', async () => {
    const { gate } = gateWith([
      { name: 'ok', readOnly: true, handler: async () => { await sleep(5); return 'ok' } },
      { name: 'bad', readOnly: true, retry: false, handler: () => { throw new Error('no') } },
      { name: 'hang', readOnly: true, timeoutMs: 15, retry: false, handler: never },
    ])
    await gate.execute([{ name: 'ok' }, { name: 'ok' }, { name: 'bad' }, { name: 'hang' }, { name: 'missing' }, { name: 'ok', input: [] }])
    const stats = gate.stats()
    const ok = stats.tools.ok
    assert.deepEqual([ok.calls, ok.successes, ok.failures], [3, 2, { invalid_arguments: 1 }])
    assert.equal(ok.latencyMs.count, 2)
    assert.ok(ok.latencyMs.p50 >= 4 && ok.latencyMs.p50 <= ok.latencyMs.p95 && ok.latencyMs.p95 <= ok.latencyMs.p99, JSON.stringify(ok.latencyMs))
    assert.deepEqual(stats.tools.bad.failures, { handler_error: 1 })
    assert.deepEqual([stats.tools.hang.failures, stats.tools.hang.timeouts], [{ timeout: 1 }, 1])
    assert.deepEqual([stats.total.calls, stats.total.successes], [6, 2])
    assert.deepEqual(stats.total.failures, { handler_error: 1, invalid_arguments: 1, timeout: 1, unknown_tool: 1 })
    assert.equal(stats.tools.missing, undefined, 'a name the model made up is not a tool')
    const running = gate.execute([{ name: 'hang' }])
    assert.equal(gate.stats().tools.hang.inFlight, 1)
    assert.equal(gate.stats().total.inFlight, 1)
    await running
  })

  it('speaks Prometheus text and reports health', async () => {
    const { gate } = gateWith([
      { name: 'good', readOnly: true },
      { name: 'broken', readOnly: true, retry: false, handler: () => { throw new Error('down') } },
    ])
    await gate.execute([{ name: 'good' }, { name: 'good' }, { name: 'broken' }])
    const text = gate.prometheus()
    assert.match(text, /^# HELP toolgate_calls_total /m)
    assert.match(text, /^# TYPE toolgate_calls_total counter$/m)
    assert.match(text, /^toolgate_calls_total\{tool="good",outcome="ok"\} 2$/m)
    assert.match(text, /^toolgate_calls_total\{tool="broken",outcome="handler_error"\} 1$/m)
    assert.match(text, /^toolgate_timeouts_total\{tool="good"\} 0$/m)
    assert.match(text, /^toolgate_handler_latency_ms\{tool="good",quantile="0.5"\} [\d.]+$/m)
    assert.match(text, /^toolgate_handler_latency_ms_count\{tool="good"\} 2$/m)
    assert.match(text, /^toolgate_handler_latency_ms_sum\{tool="good"\} [\d.]+$/m)
    assert.ok(text.endsWith('\n'))
    for (const line of text.trimEnd().split('\n')) assert.match(line, /^(# (HELP|TYPE) \w+ .+|\w+(\{[^}]*\})? [\d.]+)$/, line)
    const health = gate.healthReport()
    assert.equal(health.status, 'failing')
    assert.equal(health.tools.good.status, 'ok')
    assert.equal(health.tools.broken.status, 'failing')
    assert.equal(health.tools.broken.errorRate, 1)
  })
})

describe('Rust-side tracing', () => {
  it('writes spans and events to stderr when TOOLGATE_LOG is set, and nothing otherwise', async () => {
    const script = `
      const { ToolExecutor } = require('..')
      const gate = new ToolExecutor()
      gate.register({ name: 'echo', handler: () => 'ok' })
      gate.execute([{ id: 'c1', name: 'echo' }, { id: 'c2', name: 'missing' }]).then(() => console.log('done'))
    `
    const child = await runChild(script, { env: { TOOLGATE_LOG: 'debug' } })
    assert.equal(child.code, 0, child.stderr)
    assert.match(child.stderr, /DEBUG .*call settled turn=1 call=c1 tool=echo outcome="ok"/)
    assert.match(child.stderr, /call answered without running turn=1 call=c2 tool=missing outcome="unknown_tool"/)
    const quiet = await runChild(script)
    assert.equal(quiet.stderr, '')
  })
})

describe('OpenTelemetry', () => {
  const exporter = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
  const contextManager = new AsyncLocalStorageContextManager()
  before(() => {
    otel.context.setGlobalContextManager(contextManager.enable())
    otel.trace.setGlobalTracerProvider(provider)
  })
  after(() => {
    otel.trace.disable()
    otel.context.disable()
  })

  it('makes a span per call with the GenAI attributes, under a turn span parented to the caller\'s span', async () => {
    const { gate } = gateWith([{ name: 'search', readOnly: true, parameters: Q, handler: async () => { await sleep(5); return 'r' } }, { name: 'fail', retry: false, handler: () => { throw new Error('x') } }])
    const outer = provider.getTracer('app').startSpan('agent step')
    await otel.context.with(otel.trace.setSpan(otel.context.active(), outer), () =>
      gate.execute([{ id: 'c1', name: 'search', input: { q: 'a' } }, { id: 'c2', name: 'fail' }]))
    outer.end()
    const spans = exporter.getFinishedSpans()
    const byName = Object.fromEntries(spans.map((s) => [s.name, s]))
    const turn = byName['toolgate.execute']
    const call = byName['execute_tool search']
    const failed = byName['execute_tool fail']
    assert.ok(turn && call && failed, spans.map((s) => s.name).join(', '))
    const parentOf = (s) => s.parentSpanContext?.spanId ?? s.parentSpanId
    assert.equal(parentOf(turn), outer.spanContext().spanId, 'the turn is under the caller\'s active span')
    assert.equal(parentOf(call), turn.spanContext().spanId)
    assert.equal(call.spanContext().traceId, outer.spanContext().traceId)
    assert.deepEqual(call.attributes, {
      'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'search', 'gen_ai.tool.call.id': 'c1', 'gen_ai.tool.type': 'function',
      'toolgate.attempts': 1, 'toolgate.cached': false,
    })
    assert.equal(failed.attributes['error.type'], 'handler_error')
    assert.equal(failed.status.code, otel.SpanStatusCode.ERROR)
    const ms = (t) => t[0] * 1e3 + t[1] / 1e6
    assert.ok(ms(call.endTime) - ms(call.startTime) >= 4, 'the span covers the handler run')
  })

  it('can be turned off', async () => {
    exporter.reset()
    const { gate } = gateWith([{ name: 't' }], { otel: false })
    await gate.execute([{ name: 't' }])
    assert.deepEqual(exporter.getFinishedSpans(), [])
  })
})
