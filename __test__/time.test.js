'use strict'
// Time and failure: progress and idle limits, retries with backoff, turn deadlines, stopOnError, per-tool
// maxConcurrency, late settlements and close(). Order is asserted from recorded events and from timers the test
// itself starts, never from measured durations.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { ToolExecutor, RetryableError } = require('..')
const {
  runChild, lastJsonLine, gateWith, assertFailure, assertSuccess, marks, never, untilAborted, collectWarnings, deferred, sleep, recorder, ADMITTED, counts, counterView,
} = require('./helpers')

/**
 * A quick executor policy, so that retried tests take milliseconds.
 */
const FAST = { maxRetries: 2, initialDelayMs: 5, backoffFactor: 2, maxDelayMs: 20, maxElapsedMs: 120_000, onTimeout: false }

/** The marks of an attempt whose handler failed. */
const FAILED = ['invoke:failed', 'normalize:error', 'shape:ok']
const RETURNED = ['invoke:returned', 'normalize:text', 'shape:ok']

const ID = { type: 'object', properties: { id: { type: 'string' }, ms: { type: 'integer' } }, required: ['id'] }

/** A pending handler without its `runningMs` (a duration), after checking it is one. */
function pending(handler) {
  const { runningMs, ...rest } = handler
  assert.equal(typeof runningMs, 'number')
  assert.ok(runningMs >= 0)
  return rest
}

/** An Error with extra fields, as HTTP clients and Node's sockets throw them. */
const error = (message, fields) => Object.assign(new Error(message), fields)

/** Lets settled handlers reach the engine and trace events their listener (both happen on microtasks). */
const turnOfLoop = () => new Promise(setImmediate)

const count = (list, item) => list.filter((x) => x === item).length

describe('progress and idle timeouts', () => {
  it('stops a handler that goes silent with idle_timeout while a chatty sibling runs on to its total limit', async () => {
    const log = []
    const signals = {}
    const { gate } = gateWith([{
      name: 'crawl', readOnly: true, idleTimeoutMs: 80, timeoutMs: 300, retry: false, parameters: ID,
      handler: (args, ctx) => {
        signals[args.id] = ctx.signal
        ctx.signal.addEventListener('abort', () => log.push(`abort:${args.id}`))
        ctx.progress('started')
        if (args.id === 'chatty') {
          // Well inside the idle limit, until stopped.
          const timer = setInterval(() => {
            log.push('progress:chatty')
            ctx.progress()
          }, 10)
          ctx.signal.addEventListener('abort', () => clearInterval(timer))
        }
        // Neither settles by itself nor on its signal.
        return never()
      },
    }])
    const [chatty, silent] = await gate.execute([
      { id: 'c', name: 'crawl', input: { id: 'chatty' } },
      { id: 's', name: 'crawl', input: { id: 'silent' } },
    ])

    assertFailure(silent, 'idle_timeout',
      'Tool "crawl" reported no progress for 80 ms (its idle limit) and was stopped. It only reads, so nothing changed: retry with a narrower request')
    assert.equal(silent.retryable, true)
    assert.deepEqual(marks(silent), [...ADMITTED, 'invoke:idle_timeout'])
    assert.equal(signals.silent.reason.name, 'TimeoutError')
    assert.equal(signals.silent.reason.message, 'The tool call reported no progress within its idle limit')

    // Progress kept the sibling alive past the idle limit, but not past its total limit.
    assertFailure(chatty, 'timeout', 'Tool "crawl" did not finish within its time limit of 300 ms and was stopped.', 'narrower request')
    assert.equal(signals.chatty.reason.message, 'The tool call exceeded its time limit')
    assert.ok(log.indexOf('abort:silent') < log.lastIndexOf('progress:chatty'), 'the chatty call reported progress after the silent one was stopped')
    assert.equal(log.at(-1), 'abort:chatty')
    assert.deepEqual(counterView(gate.stats().tools.crawl), counts({ retries: 0, timeouts: 1, idleTimeouts: 1, lateSettlements: 0 }))
  })

  it('words the idle timeout of a state-changing call as of unknown effect, and never retries it', async () => {
    // The default policy would retry a read here (after about a second); a write is not retried at all.
    const { gate, calls } = gateWith([{ name: 'upload', idleTimeoutMs: 50, handler: never }])
    const [r] = await gate.execute([{ name: 'upload' }])
    assertFailure(r, 'idle_timeout', 'Tool "upload" reported no progress for 50 ms (its idle limit) and was stopped.',
      'It can change state and was stopped part-way, so its effect is unknown: check whether it took effect before retrying.')
    assert.equal(r.retryable, false)
    assert.equal(r.attempts, 1)
    assert.equal(calls.upload, 1)
  })

  it('passes each report to the executor’s and the turn’s onProgress, with callId, toolName, attempt and info', async () => {
    const seen = { executor: [], turn: [] }
    const info = { done: 1, of: 3 }
    const { gate } = gateWith([{ name: 'job', handler: (_a, ctx) => {
      ctx.progress(info)
      ctx.progress()
      return 'done'
    } }], { onProgress: (event) => seen.executor.push(event) })
    const [r] = await gate.execute([{ id: 'j1', name: 'job' }], { onProgress: (event) => seen.turn.push(event) })
    assertSuccess(r, 'done')
    const expected = [
      { callId: 'j1', toolName: 'job', attempt: 1, info },
      { callId: 'j1', toolName: 'job', attempt: 1, info: undefined },
    ]
    assert.deepEqual(seen.executor, expected)
    assert.deepEqual(seen.turn, expected)
    assert.notEqual(seen.turn[0].info, info, "a copy: listeners see the report's JSON, redacted, never the object")

    // A turn without a listener of its own: only the executor's hears it.
    await gate.execute([{ id: 'j2', name: 'job' }])
    assert.deepEqual(seen.executor.slice(2).map((e) => e.callId), ['j2', 'j2'])
    assert.equal(seen.turn.length, 2)
  })

  it('keeps a throwing listener away from the handler and the other listener: it becomes a process warning', async () => {
    const caught = collectWarnings()
    const heard = []
    const { gate } = gateWith([{ name: 'job', handler: (_a, ctx) => {
      ctx.progress('half')
      ctx.progress('all')
      return 'finished'
    } }], { onProgress: () => {
      throw new Error('listener bug')
    } })
    const [r] = await gate.execute([{ name: 'job' }], { onProgress: (event) => heard.push(event.info) })
    assertSuccess(r, 'finished')
    assert.deepEqual(heard, ['half', 'all'])
    // Warnings are emitted on the next tick.
    await turnOfLoop()
    caught.stop()
    assert.deepEqual(caught.warnings.map((w) => w.message), Array(2).fill('toolgate: the onProgress listener threw: listener bug'))
  })

  it('drops progress from a call that already ended, including an earlier attempt of a retried call', async () => {
    const heard = []
    let first
    const { gate } = gateWith([{ name: 'fetch', readOnly: true, timeoutMs: 50, retry: { maxRetries: 1, onTimeout: true }, handler: (_a, ctx) => {
      if (ctx.attempt === 1) {
        // Ignores its signal and is still around when the retry runs.
        first = ctx
        return never()
      }
      first.progress('stale')
      ctx.progress('fresh')
      return 'ok'
    } }], { retry: FAST, onProgress: (event) => heard.push([event.attempt, event.info]) })
    const [r] = await gate.execute([{ name: 'fetch' }])
    assertSuccess(r, 'ok')
    first.progress('after the turn')
    assert.deepEqual(heard, [[2, 'fresh']])
  })
})

describe('retries', () => {
  it('retries a transient failure until it succeeds, each attempt with its ctx.attempt and a fresh signal', async () => {
    const attempts = []
    const { gate, calls } = gateWith([{ name: 'flaky', handler: (_a, ctx) => {
      attempts.push({ attempt: ctx.attempt, signal: ctx.signal })
      if (ctx.attempt < 3) throw error('socket hang up', { code: 'ECONNRESET' })
      return 'third time lucky'
    } }], { retry: FAST })
    assert.deepEqual(counterView(gate.stats()), { total: counts({ retries: 0, timeouts: 0, idleTimeouts: 0, lateSettlements: 0 }), tools: {} })
    const [r] = await gate.execute([{ id: 'f', name: 'flaky' }])
    assertSuccess(r, 'third time lucky')
    assert.equal(r.attempts, 3)
    assert.equal(calls.flaky, 3)
    assert.equal(r.retryable, false)
    assert.deepEqual(attempts.map((a) => a.attempt), [1, 2, 3])
    assert.equal(new Set(attempts.map((a) => a.signal)).size, 3, 'one signal per attempt')
    assert.ok(attempts.every((a) => !a.signal.aborted), 'a failed attempt’s signal is not aborted')

    const attemptErrors = r.metadata.attemptErrors
    assert.deepEqual(attemptErrors.map(({ retryInMs: _, ...rest }) => rest), [1, 2].map((attempt) => (
      { attempt, errorKind: 'handler_error', error: 'Tool "flaky" failed: Error: socket hang up' }
    )))
    // Full jitter below the policy's ceiling.
    for (const { retryInMs } of attemptErrors) assert.ok(retryInMs >= 0 && retryInMs <= FAST.maxDelayMs, String(retryInMs))
    assert.deepEqual(marks(r), [...ADMITTED, ...FAILED, 'retry:scheduled', ...FAILED, 'retry:scheduled', ...RETURNED])
    assert.deepEqual(counterView(gate.stats()), {
      total: counts({ retries: 2, timeouts: 0, idleTimeouts: 0, lateSettlements: 0 }),
      tools: { flaky: counts({ retries: 2, timeouts: 0, idleTimeouts: 0, lateSettlements: 0 }) },
    })
  })

  it('gives up after maxRetries: the last failure stands, with the earlier ones in attemptErrors', async () => {
    const { gate, calls } = gateWith([{ name: 'down', handler: (_a, ctx) => {
      throw error(`unavailable (attempt ${ctx.attempt})`, { status: 503 })
    } }], { retry: FAST })
    const [r] = await gate.execute([{ name: 'down' }])
    assertFailure(r, 'handler_error', 'Tool "down" failed: Error: unavailable (attempt 3)')
    assert.equal(r.retryable, true)
    assert.equal(r.attempts, 3)
    assert.equal(calls.down, 3)
    assert.deepEqual(r.metadata.attemptErrors.map((e) => [e.attempt, e.error]), [
      [1, 'Tool "down" failed: Error: unavailable (attempt 1)'],
      [2, 'Tool "down" failed: Error: unavailable (attempt 2)'],
    ])
    assert.equal(count(marks(r), 'retry:scheduled'), 2)
    assert.equal(gate.stats().tools.down.retries, 2)
  })

  /** Every kind of failure the retry station treats as transient. */
  const TRANSIENT = {
    'retryable: true': () => error('try later', { retryable: true }),
    'RetryableError': () => new RetryableError('busy'),
    'RetryableError with a cause': () => new RetryableError('busy', { cause: new Error('upstream') }),
    'code ECONNRESET': () => error('socket hang up', { code: 'ECONNRESET' }),
    'code ETIMEDOUT': () => error('connect ETIMEDOUT', { code: 'ETIMEDOUT' }),
    'code EAI_AGAIN': () => error('getaddrinfo EAI_AGAIN', { code: 'EAI_AGAIN' }),
    'code ECONNREFUSED': () => error('connect ECONNREFUSED', { code: 'ECONNREFUSED' }),
    'code UND_ERR_SOCKET': () => error('other side closed', { code: 'UND_ERR_SOCKET' }),
    'cause.code (as fetch throws it)': () => new TypeError('fetch failed', { cause: error('connect ECONNREFUSED', { code: 'ECONNREFUSED' }) }),
    'status 429': () => error('Too Many Requests', { status: 429 }),
    'status 500': () => error('Internal Server Error', { status: 500 }),
    'status 503': () => error('Service Unavailable', { status: 503 }),
    'statusCode 502': () => error('Bad Gateway', { statusCode: 502 }),
    'response.status 504': () => error('Gateway Timeout', { response: { status: 504 } }),
    'a non-Error object with retryable: true': () => ({ message: 'queue full', retryable: true }),
  }

  it('marks each transient kind retryable and retries it', async () => {
    const cases = Object.entries(TRANSIENT)
    const tools = (retry) => cases.map(([, make], i) => ({ name: `t${i}`, readOnly: true, retry, handler: (_a, ctx) => {
      if (ctx.attempt === 1) throw make()
      return 'recovered'
    } }))
    const calls = cases.map((_c, i) => ({ name: `t${i}` }))

    // Without retries: each failure says it is retryable.
    const once = gateWith(tools(false), { retry: FAST })
    const failures = await once.gate.execute(calls)
    failures.forEach((r, i) => {
      assert.equal(r.errorKind, 'handler_error', cases[i][0])
      assert.equal(r.retryable, true, cases[i][0])
      assert.equal(r.attempts, 1, cases[i][0])
    })

    // With them: each is retried once and succeeds.
    const again = gateWith(tools({ maxRetries: 1 }), { retry: FAST })
    const results = await again.gate.execute(calls)
    results.forEach((r, i) => {
      assertSuccess(r, 'recovered')
      assert.equal(r.attempts, 2, cases[i][0])
      assert.equal(again.calls[`t${i}`], 2, cases[i][0])
    })
  })

  it('never retries a refused call, a plain error or retryable: false', async () => {
    const PERMANENT = {
      'a plain Error': () => new Error('bad input'),
      'a TypeError': () => new TypeError('x is undefined'),
      'retryable: false, even with a 503': () => error('no', { status: 503, retryable: false }),
      'retryable: false, even with ECONNRESET': () => error('no', { code: 'ECONNRESET', retryable: false }),
      'status 404': () => error('Not Found', { status: 404 }),
      'status 400': () => error('Bad Request', { response: { status: 400 } }),
      'code ENOENT': () => error('no such file', { code: 'ENOENT' }),
      'a numeric code (not a status)': () => error('http', { code: 503 }),
      'a thrown string': () => 'ECONNRESET',
    }
    const cases = Object.entries(PERMANENT)
    const { gate, calls } = gateWith([
      ...cases.map(([, make], i) => ({ name: `p${i}`, readOnly: true, handler: () => {
        throw make()
      } })),
      { name: 'strict', parameters: ID },
      { name: 'guarded', needsApproval: true },
      { name: 'secret' },
    ], { retry: { ...FAST, maxRetries: 3 } })
    const results = await gate.execute([
      ...cases.map((_c, i) => ({ name: `p${i}` })),
      { name: 'missing' },
      { name: 'strict', input: { id: [7] } },
      { name: 'guarded' },
      { name: 'secret', input: { x: 'y' } },
    ], { context: { permissions: { deny: [{ tool: 'secret', args: { x: '*' } }] } } })
    results.slice(0, cases.length).forEach((r, i) => {
      assert.equal(r.errorKind, 'handler_error', cases[i][0])
      assert.equal(r.retryable, false, cases[i][0])
      assert.equal(r.attempts, 1, cases[i][0])
      assert.equal(r.metadata.attemptErrors, undefined, cases[i][0])
      assert.equal(calls[`p${i}`], 1, cases[i][0])
    })
    assert.deepEqual(results.slice(cases.length).map((r) => [r.errorKind, r.attempts, r.retryable]), [
      ['unknown_tool', 0, false], ['invalid_arguments', 0, false], ['approval_denied', 0, false], ['permission_denied', 0, false],
    ])
    assert.deepEqual([calls.strict, calls.guarded, calls.secret], [0, 0, 0])
    assert.ok(results.every((r) => !marks(r).includes('retry:scheduled')))
    assert.equal(gate.stats().total.retries, 0)
  })

  it('answers a timeout at its limit unless the tool opts in to retrying it', async () => {
    const { gate, calls } = gateWith([{ name: 'slow', readOnly: true, timeoutMs: 50, handler: never }], { retry: { ...FAST, onTimeout: undefined } })
    const [r] = await gate.execute([{ name: 'slow' }])
    assertFailure(r, 'timeout', 'within its time limit of 50 ms')
    assert.equal(r.attempts, 1)
    assert.equal(calls.slow, 1)
    assert.equal(r.metadata.attemptErrors, undefined)
    assert.equal(r.retryable, true, 'the model may call it again; the executor does not on its own')
  })

  it('retries opted-in timeouts and idle timeouts of read-only and idempotent tools only', async () => {
    const signals = []
    // The first attempt hangs (ignoring its signal), the second answers.
    const hangOnce = (_a, ctx) => {
      signals.push(ctx.signal)
      return ctx.attempt === 1 ? never() : `attempt ${ctx.attempt}`
    }
    const retry = { maxRetries: 1, onTimeout: true }
    const { gate, calls } = gateWith([
      { name: 'read', readOnly: true, timeoutMs: 50, retry, handler: hangOnce },
      { name: 'put', idempotent: true, timeoutMs: 50, retry, handler: hangOnce },
      { name: 'write', timeoutMs: 50, retry, handler: hangOnce },
      { name: 'watch', readOnly: true, idleTimeoutMs: 50, retry, handler: hangOnce },
      { name: 'push', idleTimeoutMs: 50, retry, handler: hangOnce },
    ], { retry: FAST })
    const [read, put, write, watch, push] = await gate.execute(['read', 'put', 'write', 'watch', 'push'].map((name) => ({ name })))

    for (const [r, kind] of [[read, 'timeout'], [put, 'timeout'], [watch, 'idle_timeout']]) {
      assertSuccess(r, 'attempt 2')
      assert.equal(r.attempts, 2)
      assert.equal(r.metadata.attemptErrors[0].errorKind, kind)
      // An idempotent tool is also cached, so its trace shows the cache miss before it ran.
      const looked = r === put ? ['cache:miss'] : []
      assert.deepEqual(marks(r), [...ADMITTED, ...looked, `invoke:${kind}`, 'retry:scheduled', ...RETURNED])
    }
    assertFailure(write, 'timeout', 'its effect is unknown')
    assertFailure(push, 'idle_timeout', 'its effect is unknown')
    for (const r of [write, push]) {
      assert.equal(r.attempts, 1)
      assert.equal(r.retryable, false)
    }
    assert.deepEqual(calls, { read: 2, put: 2, write: 1, watch: 2, push: 1 })
    // Each retried call: the hung attempt's signal aborted, the retry's a fresh one, left alone.
    assert.deepEqual(signals.map((s) => s.aborted).sort(), [false, false, false, true, true, true, true, true])
    assert.deepEqual(counterView(gate.stats().total), counts({ retries: 3, timeouts: 3, idleTimeouts: 2, lateSettlements: 0, cacheMisses: 1 }))
  })

  it('lets a tool override the executor’s policy field by field, or turn retries off with false', async () => {
    const fail = () => {
      throw new RetryableError('still down')
    }
    const { gate, calls } = gateWith([
      { name: 'inherits', handler: fail },
      { name: 'once', retry: { maxRetries: 1 }, handler: fail },
      { name: 'never', retry: false, handler: fail },
    ], { retry: { ...FAST, maxRetries: 3 } })
    const policies = Object.fromEntries(gate.list().map((t) => [t.name, t.retry]))
    assert.deepEqual(policies, {
      inherits: { ...FAST, maxRetries: 3 },
      once: { ...FAST, maxRetries: 1 },
      never: { ...FAST, maxRetries: 0 },
    })
    const results = await gate.execute([{ name: 'inherits' }, { name: 'once' }, { name: 'never' }])
    assert.deepEqual(results.map((r) => r.attempts), [4, 2, 1])
    assert.deepEqual(calls, { inherits: 4, once: 2, never: 1 })
    assert.equal(results[2].retryable, true, 'not retried here, but the failure is still transient')
  })

  it('waits at least retryAfterMs: the retry comes after a shorter timer started at the failure', async () => {
    const log = []
    const { gate } = gateWith([{ name: 'api', handler: (_a, ctx) => {
      log.push(`attempt ${ctx.attempt}`)
      if (ctx.attempt > 1) return 'ok'
      // Far beyond the policy's own delays (at most 5 ms before the first retry).
      setTimeout(() => log.push('timer'), 50)
      throw new RetryableError('slow down', { retryAfterMs: 150 })
    } }], { retry: FAST })
    const [r] = await gate.execute([{ name: 'api' }])
    assertSuccess(r, 'ok')
    assert.deepEqual(log, ['attempt 1', 'timer', 'attempt 2'])
    assert.ok(r.metadata.attemptErrors[0].retryInMs >= 150, String(r.metadata.attemptErrors[0].retryInMs))
  })

  it('honours a Retry-After header on err.headers (plain or Headers) and on err.response.headers', async () => {
    const FORMS = {
      plain: (seconds) => error('429', { status: 429, headers: { 'retry-after': seconds } }),
      Headers: (seconds) => error('429', { status: 429, headers: new Headers({ 'Retry-After': seconds }) }),
      response: (seconds) => error('503', { response: { status: 503, headers: new Headers({ 'Retry-After': seconds }) } }),
    }
    const logs = {}
    const { gate } = gateWith(Object.entries(FORMS).map(([name, make]) => ({ name, readOnly: true, handler: (_a, ctx) => {
      const log = (logs[name] ??= [])
      log.push(`attempt ${ctx.attempt}`)
      if (ctx.attempt > 1) return 'ok'
      setTimeout(() => log.push('timer'), 50)
      throw make('0.15')
    } })), { retry: FAST })
    const results = await gate.execute(Object.keys(FORMS).map((name) => ({ name })))
    for (const r of results) {
      assertSuccess(r, 'ok')
      assert.deepEqual(logs[r.name], ['attempt 1', 'timer', 'attempt 2'], r.name)
      assert.ok(r.metadata.attemptErrors[0].retryInMs >= 150, `${r.name}: ${r.metadata.attemptErrors[0].retryInMs}`)
    }
  })

  it('reports retryAfterMs on the result: from the error, or a Retry-After header in seconds or as a date', async () => {
    const CASES = [
      ['retryAfterMs', error('x', { retryAfterMs: 1234, status: 429 }), 1234],
      ['retryAfterMs, rounded', new RetryableError('x', { retryAfterMs: 12.6 }), 13],
      ['retryAfterMs wins over a header', error('x', { retryAfterMs: 10, status: 429, headers: { 'retry-after': '5' } }), 10],
      ['a negative retryAfterMs falls back to the header', error('x', { retryAfterMs: -1, status: 429, headers: { 'retry-after': '3' } }), 3000],
      ['plain headers, seconds', error('x', { status: 429, headers: { 'retry-after': '3' } }), 3000],
      ['a number header', error('x', { status: 429, headers: { 'retry-after': 2 } }), 2000],
      ['Headers', error('x', { status: 503, headers: new Headers({ 'Retry-After': '2' }) }), 2000],
      ['response.headers', error('x', { response: { status: 503, headers: { 'retry-after': '1' } } }), 1000],
      ['a date in the past', error('x', { status: 503, headers: { 'retry-after': 'Wed, 21 Oct 2015 07:28:00 GMT' } }), 0],
      ['not a delay', error('x', { status: 503, headers: { 'retry-after': 'soon' } }), undefined],
      ['no header', error('x', { status: 503, headers: new Headers() }), undefined],
    ]
    const inFiveSeconds = new Date(Date.now() + 5000).toUTCString()
    CASES.push(['a date ahead', error('x', { status: 503, headers: { 'retry-after': inFiveSeconds } }), 'ahead'])
    const { gate } = gateWith(CASES.map(([, err], i) => ({ name: `h${i}`, retry: false, handler: () => {
      throw err
    } })))
    const results = await gate.execute(CASES.map((_c, i) => ({ name: `h${i}` })))
    results.forEach((r, i) => {
      const [label, , expected] = CASES[i]
      assert.equal(r.retryable, true, label)
      // An HTTP date holds whole seconds: at most 5 s ahead, and more than 3 s (one lost to rounding, one of slack).
      if (expected === 'ahead') assert.ok(r.retryAfterMs > 3000 && r.retryAfterMs <= 5000, `${label}: ${r.retryAfterMs}`)
      else assert.equal(r.retryAfterMs, expected, label)
    })
  })

  it('reads a Retry-After header whatever the case of its name in a plain object', async () => {
    const { gate } = gateWith([{ name: 'api', retry: false, handler: () => {
      throw error('429', { status: 429, headers: { 'Retry-After': '2' } })
    } }])
    const [r] = await gate.execute([{ name: 'api' }])
    assert.equal(r.retryAfterMs, 2000)
  })

  it('keeps an error whose retryAfterMs is out of range an Error', async () => {
    const { gate } = gateWith([{ name: 'api', retry: false, handler: () => {
      throw new RetryableError('busy', { retryAfterMs: 1e20 })
    } }])
    const [r] = await gate.execute([{ name: 'api' }])
    assertFailure(r, 'handler_error')
    assert.equal(r.error, 'Tool "api" failed: RetryableError: busy')
    assert.equal(r.retryable, true)
  })

  /** A turn whose first call fails with a retryAfterMs hint (a second call waits behind it), aborted as soon as that failure is in. */
  async function abortedInBackoff() {
    const failed = deferred()
    const { gate, calls } = gateWith([
      { name: 'busy', handler: () => {
        failed.resolve()
        throw new RetryableError('busy', { retryAfterMs: 80 })
      } },
      { name: 'next', handler: () => 'ran' },
    ], { retry: FAST })
    const controller = new AbortController()
    const turn = gate.execute([{ id: 'b', name: 'busy' }, { id: 'n', name: 'next' }], { signal: controller.signal })
    await failed.promise
    await turnOfLoop()
    controller.abort(new Error('user left'))
    return { gate, calls, results: await turn }
  }

  it('lets the last failure stand when the turn is aborted during a backoff, and starts nothing more', async () => {
    const { gate, calls, results: [busy, next] } = await abortedInBackoff()
    assertFailure(busy, 'handler_error', 'Tool "busy" failed: RetryableError: busy')
    assert.equal(busy.retryable, true)
    assert.equal(busy.retryAfterMs, 80)
    assert.equal(busy.attempts, 1)
    assert.equal(marks(busy).at(-1), 'retry:scheduled')
    assertFailure(next, 'cancelled', 'Tool "next" was not run: the turn was cancelled before it started (aborted by the caller: user left).')
    // Past the end of the backoff that was planned: still one attempt.
    await sleep(120)
    assert.deepEqual(calls, { busy: 1, next: 0 })
    assert.equal(gate.stats().total.retries, 0)
  })

  it('lists in attemptErrors only attempts before the last, when a backoff is cut short', async () => {
    const { results: [busy] } = await abortedInBackoff()
    assert.equal(busy.attempts, 1)
    assert.equal(busy.metadata.attemptErrors, undefined)
  })

  it('plans no retry that would start later than maxElapsedMs after the first attempt started', async () => {
    const { gate, calls } = gateWith([
      // The hint alone carries the retry past the budget.
      { name: 'hinted', retry: { maxElapsedMs: 100 }, handler: () => {
        throw new RetryableError('later', { retryAfterMs: 200 })
      } },
      // The first attempt alone uses up the budget.
      { name: 'slow', retry: { maxElapsedMs: 40 }, handler: async () => {
        await sleep(80)
        throw new RetryableError('too slow')
      } },
      { name: 'within', retry: { maxElapsedMs: 10_000 }, handler: (_a, ctx) => {
        if (ctx.attempt === 1) throw new RetryableError('once')
        return 'ok'
      } },
    ], { retry: FAST })
    const [hinted, slow, within] = await gate.execute([{ name: 'hinted' }, { name: 'slow' }, { name: 'within' }])
    for (const r of [hinted, slow]) {
      assertFailure(r, 'handler_error')
      assert.equal(r.attempts, 1)
      assert.equal(r.retryable, true)
      assert.ok(!marks(r).includes('retry:scheduled'))
    }
    assertSuccess(within, 'ok')
    assert.deepEqual(calls, { hinted: 1, slow: 1, within: 2 })
  })

  it('plans no retry past the turn’s deadline', async () => {
    const { gate, calls } = gateWith([{ name: 'busy', handler: () => {
      throw new RetryableError('busy', { retryAfterMs: 300 })
    } }], { retry: FAST })
    const [r] = await gate.execute([{ name: 'busy' }], { deadlineMs: 150 })
    // The failure is answered at once, not held until the deadline.
    assertFailure(r, 'handler_error', 'RetryableError: busy')
    assert.equal(r.attempts, 1)
    assert.equal(calls.busy, 1)
    assert.ok(!marks(r).includes('retry:scheduled'))
  })
})

describe('turn deadline', () => {
  it('stops a running call with timeout naming the deadline, and answers calls not started as not_executed', async () => {
    let signal
    const { gate, calls } = gateWith([
      // Ignores its signal.
      { name: 'write', handler: (_a, ctx) => {
        signal = ctx.signal
        return never()
      } },
      { name: 'read', readOnly: true, handler: () => 'read' },
    ], { retry: FAST })
    const [w, r, w2] = await gate.execute([{ id: 'w', name: 'write' }, { id: 'r', name: 'read' }, { id: 'w2', name: 'write' }], { deadlineMs: 80 })
    assertFailure(w, 'timeout',
      'Tool "write" was stopped when the turn\'s deadline of 80 ms passed. It can change state and was stopped part-way, so its effect is unknown: check whether it took effect before retrying.')
    assert.equal(w.retryable, false)
    assert.equal(w.attempts, 1)
    assert.deepEqual(marks(w), [...ADMITTED, 'invoke:timeout'])
    assert.equal(signal.aborted, true)
    assert.equal(signal.reason.name, 'TimeoutError')
    for (const [result, name] of [[r, 'read'], [w2, 'write']]) {
      assertFailure(result, 'not_executed', `Tool "${name}" was not run: the turn's deadline of 80 ms passed before it started.`)
      assert.equal(result.retryable, true)
      assert.equal(result.attempts, 0)
      assert.equal(result.latencyMs, 0)
      assert.equal(marks(result).at(-1), 'invoke:not_started')
    }
    assert.deepEqual(calls, { write: 1, read: 0 })
    assert.deepEqual(gate.pendingHandlers().map(pending), [{ callId: 'w', toolName: 'write', attempt: 1, state: 'abandoned', reason: 'timeout' }])
  })

  it('words a read-only call stopped by the deadline as harmless, and does not retry it', async () => {
    const { gate, calls } = gateWith([{ name: 'search', readOnly: true, handler: never }], { retry: FAST })
    const [r] = await gate.execute([{ name: 'search' }], { deadlineMs: 60 })
    assertFailure(r, 'timeout', 'Tool "search" was stopped when the turn\'s deadline of 60 ms passed. It only reads, so nothing changed: retry with a narrower request')
    assert.equal(r.retryable, true)
    assert.equal(calls.search, 1)
  })

  it('stops a retry that runs into the deadline', async () => {
    const { gate } = gateWith([{ name: 'fetch', readOnly: true, handler: (_a, ctx) => {
      if (ctx.attempt === 1) throw new RetryableError('reset')
      return never()
    } }], { retry: FAST })
    const [r] = await gate.execute([{ name: 'fetch' }], { deadlineMs: 80 })
    assertFailure(r, 'timeout', 'the turn\'s deadline of 80 ms passed')
    assert.equal(r.attempts, 2)
    assert.deepEqual(r.metadata.attemptErrors.map((e) => e.errorKind), ['handler_error'])
  })

  it('leaves a turn that ends in time alone', async () => {
    const { gate } = gateWith([{ name: 'quick', handler: () => sleep(5, 'done') }])
    const results = await gate.execute([{ name: 'quick' }, { name: 'quick' }], { deadlineMs: 5_000 })
    for (const r of results) assertSuccess(r, 'done')
  })
})

describe('stopOnError', () => {
  function tools() {
    return gateWith([
      { name: 'read', readOnly: true, handler: () => {
        throw new Error('read failed')
      } },
      { name: 'write', parameters: ID, handler: () => {
        throw new Error('disk full')
      } },
      { name: 'ok', handler: () => 'fine' },
    ], { retry: FAST })
  }

  it('after a failed state-changing call, answers the calls after it as not_executed, naming that call', async () => {
    const { gate, calls } = tools()
    const results = await gate.execute([
      { name: 'read' }, { name: 'ok' }, { id: 'w1', name: 'write', input: { id: 'x' } }, { name: 'ok' }, { name: 'read' },
    ], { stopOnError: true })
    assert.deepEqual(results.map((r) => r.errorKind ?? 'ok'), ['handler_error', 'ok', 'handler_error', 'not_executed', 'not_executed'])
    for (const r of results.slice(3)) {
      assertFailure(r, 'not_executed',
        `Tool "${r.name}" was not run: call w1 ("write") before it failed, and this turn stops at the first failed call that changes state.`)
      assert.equal(r.attempts, 0)
      assert.equal(r.retryable, true)
    }
    // The failed read stopped nothing; the failed write stopped what followed it.
    assert.deepEqual(calls, { read: 1, write: 1, ok: 1 })
  })

  it('is stopped by a state-changing call refused before it ran, and by one that timed out', async () => {
    const { gate, calls } = tools()
    gate.register({ name: 'hang', timeoutMs: 50, handler: never })
    const refused = await gate.execute([{ id: 'w2', name: 'write', input: { id: [1] } }, { name: 'ok' }], { stopOnError: true })
    assert.deepEqual(refused.map((r) => r.errorKind), ['invalid_arguments', 'not_executed'])
    assert.ok(refused[1].error.includes('call w2 ("write") before it failed'), refused[1].error)
    const timedOut = await gate.execute([{ id: 'h', name: 'hang' }, { name: 'ok' }], { stopOnError: true })
    assert.deepEqual(timedOut.map((r) => r.errorKind), ['timeout', 'not_executed'])
    assert.equal(calls.ok, 0)
  })

  it('is not stopped by a state-changing call that succeeds on a retry', async () => {
    const { gate } = gateWith([
      { name: 'save', handler: (_a, ctx) => {
        if (ctx.attempt === 1) throw new RetryableError('conflict')
        return 'saved'
      } },
      { name: 'ok', handler: () => 'fine' },
    ], { retry: FAST })
    const [save, ok] = await gate.execute([{ name: 'save' }, { name: 'ok' }], { stopOnError: true })
    assertSuccess(save, 'saved')
    assert.equal(save.attempts, 2)
    assertSuccess(ok, 'fine')
  })

  it('cascades nothing by default, nor with stopOnError: false', async () => {
    for (const options of [undefined, { stopOnError: false }]) {
      const { gate, calls } = tools()
      const results = await gate.execute([{ name: 'write', input: { id: 'x' } }, { name: 'ok' }, { name: 'write', input: { id: [1] } }, { name: 'ok' }], options)
      assert.deepEqual(results.map((r) => r.errorKind ?? 'ok'), ['handler_error', 'ok', 'invalid_arguments', 'ok'])
      assert.deepEqual(calls, { read: 0, write: 1, ok: 2 })
    }
  })
})

describe('maxConcurrency', () => {
  const browse = (id) => ({ name: 'browser', input: { id } })

  it('runs one call of the tool at a time, within a turn and across turns, while other tools run alongside', async () => {
    const rec = recorder()
    const { gate } = gateWith([
      { name: 'browser', readOnly: true, maxConcurrency: 1, parameters: ID, handler: rec.handler(20) },
      // Not counted by the recorder: it may overlap the browser.
      { name: 'other', readOnly: true, parameters: ID, handler: async (args) => {
        rec.events.push(`start:${args.id}`)
        await sleep(40)
        rec.events.push(`end:${args.id}`)
        return args.id
      } },
    ])
    const [a, b] = await Promise.all([
      gate.execute([browse('a1'), browse('a2'), { name: 'other', input: { id: 'o' } }]),
      gate.execute([browse('b1'), browse('b2')]),
    ])
    assert.deepEqual(a.map((r) => r.output), ['a1', 'a2', 'o'])
    assert.deepEqual(b.map((r) => r.output), ['b1', 'b2'])
    assert.equal(rec.maxRunning, 1)
    const browserEvents = rec.events.filter((e) => !e.endsWith(':o'))
    assert.equal(browserEvents.length, 8)
    browserEvents.forEach((e, i) => assert.ok(e.startsWith(i % 2 === 0 ? 'start:' : 'end:'), browserEvents.join(' ')))
    assert.ok(rec.index('start:o') < rec.index('end:a1'), rec.events.join(' '))
  })

  it('frees the place when the turn holding it is cancelled', async () => {
    const { gate, calls } = gateWith([{ name: 'browser', readOnly: true, maxConcurrency: 1, parameters: ID, handler: (args, ctx) => (
      args.id === 'hold' ? untilAborted(ctx.signal) : args.id
    ) }])
    const controller = new AbortController()
    const holding = gate.execute([browse('hold')], { signal: controller.signal })
    const waiting = gate.execute([browse('next')])
    assert.equal(calls.browser, 1, 'the second turn waits for the place')
    controller.abort()
    assert.equal((await holding)[0].errorKind, 'cancelled')
    assertSuccess((await waiting)[0], 'next')
  })

  it('keeps the place while its call waits to retry', async () => {
    const log = []
    const { gate } = gateWith([{ name: 'browser', readOnly: true, maxConcurrency: 1, parameters: ID, handler: (args, ctx) => {
      log.push(`${args.id}#${ctx.attempt}`)
      if (args.id === 'a' && ctx.attempt === 1) throw new RetryableError('page crashed', { retryAfterMs: 30 })
      return args.id
    } }], { retry: FAST })
    const results = await gate.execute([browse('a'), browse('b')])
    assert.deepEqual(results.map((r) => r.output), ['a', 'b'])
    assert.deepEqual(log, ['a#1', 'a#2', 'b#1'])
  })
})

describe('late settlement', () => {
  it('times out a handler that blocks the event loop past its limit, and counts what it returned as late', async () => {
    const traces = []
    const busy = (ms) => {
      const end = Date.now() + ms
      while (Date.now() < end);
    }
    const { gate } = gateWith([
      { name: 'cpu', timeoutMs: 100, handler: () => { busy(300); return 'done' } },
      { name: 'quiet', readOnly: true, idleTimeoutMs: 50, handler: async () => { busy(150); throw new Error('too late to matter') } },
      { name: 'big', timeoutMs: 50, handler: () => { busy(150); return 'x'.repeat(300 * 1024) } },
    ], { onTrace: (events) => traces.push(...events.filter((e) => e.type === 'late_settlement')) })
    const [cpu, quiet, big] = await gate.execute([{ id: 'c', name: 'cpu' }, { id: 'q', name: 'quiet' }, { id: 'b', name: 'big' }])
    assertFailure(cpu, 'timeout', 'within its time limit of 100 ms')
    assertFailure(quiet, 'idle_timeout', 'no progress for 50 ms')
    assertFailure(big, 'timeout', 'within its time limit of 50 ms')
    await turnOfLoop()
    assert.deepEqual(traces.map((e) => [e.callId, e.endedBy, e.outcome]), [['c', 'timeout', 'resolved'], ['q', 'idle_timeout', 'rejected'], ['b', 'timeout', 'resolved']])
    assert.ok(traces.every((e) => e.afterMs > 0))
    assert.equal(gate.stats().total.lateSettlements, 3)
  })

  it('records a handler that resolves after its call timed out: trace event, counters, pendingHandlers', async () => {
    const traces = []
    const release = deferred()
    let state
    const { gate } = gateWith([{ name: 'stubborn', timeoutMs: 50, retry: false, handler: () => {
      state = gate.pendingHandlers().map(pending)
      return release.promise
    } }], { onTrace: (events) => traces.push(...events.filter((e) => e.type === 'late_settlement')) })
    const results = await gate.execute([{ id: 's1', name: 'stubborn' }])
    assertFailure(results[0], 'timeout')
    assert.deepEqual(state, [{ callId: 's1', toolName: 'stubborn', attempt: 1, state: 'running', reason: undefined }])
    assert.deepEqual(gate.pendingHandlers().map(pending), [{ callId: 's1', toolName: 'stubborn', attempt: 1, state: 'abandoned', reason: 'timeout' }])
    assert.deepEqual(counterView(gate.stats().tools.stubborn), counts({ retries: 0, timeouts: 1, idleTimeouts: 0, lateSettlements: 0 }))
    const snapshot = structuredClone(results)

    release.resolve('done at last')
    await turnOfLoop()
    assert.equal(traces.length, 1)
    const { afterMs, ...event } = traces[0]
    assert.deepEqual(event, { type: 'late_settlement', callId: 's1', toolName: 'stubborn', attempt: 1, endedBy: 'timeout', outcome: 'resolved', args: {} })
    assert.equal(typeof afterMs, 'number')
    assert.ok(afterMs >= 0)
    assert.deepEqual(gate.pendingHandlers(), [])
    assert.deepEqual(counterView(gate.stats()), {
      total: counts({ retries: 0, timeouts: 1, idleTimeouts: 0, lateSettlements: 1 }),
      tools: { stubborn: counts({ retries: 0, timeouts: 1, idleTimeouts: 0, lateSettlements: 1 }) },
    })
    assert.deepEqual(results, snapshot, 'the answered result does not change')
  })

  it('records a handler that rejects after its turn was cancelled', async () => {
    const traces = []
    const release = deferred()
    const started = deferred()
    const { gate } = gateWith([{ name: 'deploy', handler: () => {
      started.resolve()
      return release.promise
    } }], { onTrace: (events) => traces.push(...events.filter((e) => e.type === 'late_settlement')) })
    const controller = new AbortController()
    const turn = gate.execute([{ id: 'd1', name: 'deploy' }], { signal: controller.signal })
    await started.promise
    controller.abort()
    assert.equal((await turn)[0].errorKind, 'cancelled')
    assert.deepEqual(gate.pendingHandlers().map(pending), [{ callId: 'd1', toolName: 'deploy', attempt: 1, state: 'abandoned', reason: 'cancelled' }])

    release.reject(new Error('rolled back'))
    await turnOfLoop()
    assert.deepEqual(traces.map(({ afterMs: _, ...e }) => e), [
      { type: 'late_settlement', callId: 'd1', toolName: 'deploy', attempt: 1, endedBy: 'cancelled', outcome: 'rejected', args: {} },
    ])
    assert.deepEqual(gate.pendingHandlers(), [])
    assert.equal(gate.stats().tools.deploy.lateSettlements, 1)
  })

  it('records the attempt it belongs to and the idle timeout that ended it, counted per tool', async () => {
    const traces = []
    const releases = []
    const held = (_a, ctx) => {
      const d = deferred()
      releases.push(d)
      return ctx.attempt === 1 ? d.promise : 'second'
    }
    const { gate } = gateWith([
      { name: 'poll', readOnly: true, idleTimeoutMs: 50, retry: { maxRetries: 1, onTimeout: true }, handler: held },
      { name: 'other', timeoutMs: 50, retry: false, handler: held },
    ], { retry: FAST, onTrace: (events) => traces.push(...events.filter((e) => e.type === 'late_settlement')) })
    const [poll, other] = await gate.execute([{ id: 'p', name: 'poll' }, { id: 'o', name: 'other' }])
    assertSuccess(poll, 'second')
    assertFailure(other, 'timeout')
    for (const d of releases) d.resolve('late')
    await turnOfLoop()
    assert.deepEqual(traces.map((e) => [e.callId, e.attempt, e.endedBy, e.outcome]), [['p', 1, 'idle_timeout', 'resolved'], ['o', 1, 'timeout', 'resolved']])
    assert.deepEqual(counterView(gate.stats()), {
      total: counts({ retries: 1, timeouts: 1, idleTimeouts: 1, lateSettlements: 2 }),
      tools: {
        other: counts({ retries: 0, timeouts: 1, idleTimeouts: 0, lateSettlements: 1 }),
        poll: counts({ retries: 1, timeouts: 0, idleTimeouts: 1, lateSettlements: 1 }),
      },
    })
  })
})

describe("the JS thread's own deadline timer", () => {
  it('delivers a deadline by itself when no wake-up comes from the engine', async () => {
    // The engine's watcher wakes JS through the function given to the engine: here it does nothing, so only the
    // executor's own timer can end the hung call.
    const child = await runChild(`
      const bindingPath = require.resolve('../binding.js')
      const binding = require(bindingPath)
      class Unwoken extends binding.Engine {
        constructor(options, wake, manual) { super(options, () => {}, manual) }
      }
      require.cache[bindingPath].exports = { ...binding, Engine: Unwoken }
      const { ToolExecutor } = require('..')
      const gate = new ToolExecutor()
      gate.register({ name: 'hang', timeoutMs: 30, retry: false, handler: () => new Promise(() => {}) })
      gate.register({ name: 'later', timeoutMs: 60, retry: false, handler: () => new Promise(() => {}) })
      const guard = setTimeout(() => { console.log(JSON.stringify('no result')); process.exit(0) }, 10000)
      Promise.all([gate.execute([{ name: 'hang' }]), gate.execute([{ name: 'later' }])]).then((turns) => {
        clearTimeout(guard)
        console.log(JSON.stringify(turns.map(([r]) => r.errorKind)))
        process.exit(0)
      })
    `)
    assert.equal(child.code, 0, child.stderr)
    assert.deepEqual(lastJsonLine(child.stdout), ['timeout', 'timeout'])
  })

  it('waits out a deadline longer than a Node timer can hold without firing early', async () => {
    // Node fires a timer set past 2^31 - 1 ms after 1 ms, with a TimeoutOverflowWarning each time.
    const { warnings, stop } = collectWarnings()
    const gate = new ToolExecutor({ approvalTimeoutMs: 30 * 86_400_000, permissions: { ask: [{ tool: 'deploy' }] }, approve: () => sleep(30).then(() => true) })
    gate.register({ name: 'deploy', handler: () => 'deployed' })
    const [r] = await gate.execute([{ name: 'deploy' }])
    stop()
    assertSuccess(r, 'deployed')
    assert.deepEqual(warnings.map((w) => w.name).filter((n) => n === 'TimeoutOverflowWarning'), [])
    await gate.close()
  })
})

describe('close()', () => {
  it('cancels every open turn, waits at most timeoutMs for a hung handler and reports it still running', async () => {
    let signal
    const { gate, calls } = gateWith([
      { name: 'hung', handler: (_a, ctx) => {
        signal = ctx.signal
        return never()
      } },
      { name: 'busy', handler: () => {
        throw new RetryableError('busy', { retryAfterMs: 10_000 })
      } },
    ], { retry: FAST })
    const hungTurn = gate.execute([{ id: 'h', name: 'hung' }, { id: 'h2', name: 'hung' }])
    const backoffTurn = gate.execute([{ id: 'b', name: 'busy' }])
    await turnOfLoop()
    const log = []
    const closing = gate.close({ timeoutMs: 60 }).then((closed) => {
      log.push('closed')
      return closed
    })
    // Shorter than close's own wait: it fires first because close waited for the hung handler.
    setTimeout(() => log.push('timer'), 30)

    const [h, h2] = await hungTurn
    assertFailure(h, 'cancelled', 'Tool "hung" was stopped while running: the turn was cancelled (the tool executor was closed).', 'its effect is unknown')
    assertFailure(h2, 'cancelled', 'Tool "hung" was not run: the turn was cancelled before it started (the tool executor was closed).')
    assert.equal(signal.reason.name, 'AbortError')
    assert.equal(signal.reason.message, 'The tool executor was closed')
    // A call waiting to retry is not waited for: its failure stands.
    const [b] = await backoffTurn
    assertFailure(b, 'handler_error', 'RetryableError: busy')

    const { stillRunning } = await closing
    assert.deepEqual(log, ['timer', 'closed'])
    assert.deepEqual(stillRunning.map(pending), [{ callId: 'h', toolName: 'hung', attempt: 1, state: 'abandoned', reason: 'cancelled' }])
    assert.deepEqual(calls, { hung: 1, busy: 1 })
  })

  it('waits for an abandoned handler that settles soon, then reports none', async () => {
    const log = []
    const { gate } = gateWith([{ name: 'finishing', handler: async () => {
      // Ignores its signal and finishes its work.
      await sleep(40)
      log.push('settled')
      return 'done'
    } }])
    const turn = gate.execute([{ name: 'finishing' }])
    const closed = await gate.close({ timeoutMs: 5_000 })
    log.push('closed')
    assert.deepEqual(closed, { stillRunning: [] })
    assert.deepEqual(log, ['settled', 'closed'])
    assert.equal((await turn)[0].errorKind, 'cancelled')
    assert.equal(gate.stats().total.lateSettlements, 1)
  })

  it('waits about a second by default for a handler that ignores its signal, well inside a test runner\'s 5 s test timeout', async () => {
    const { gate } = gateWith([{ name: 'hung', handler: () => never() }])
    const turn = gate.execute([{ id: 'h', name: 'hung' }])
    await turnOfLoop()
    const started = Date.now()
    const { stillRunning } = await gate.close()
    const waited = Date.now() - started
    assert.ok(waited >= 900, `it waited ${waited} ms for the handler`)
    assert.ok(waited < 2_000, `close() took ${waited} ms: an afterEach(() => gate.close()) would fail a test`)
    assert.deepEqual(stillRunning.map(pending), [{ callId: 'h', toolName: 'hung', attempt: 1, state: 'abandoned', reason: 'cancelled' }])
    assert.equal((await turn)[0].errorKind, 'cancelled')
  })

  it('closes an idle executor at once; execute afterwards rejects with a TypeError', async () => {
    const { gate, calls } = gateWith([{ name: 'tool' }])
    assert.deepEqual(await gate.close(), { stillRunning: [] })
    await assert.rejects(gate.execute([{ name: 'tool' }]), { name: 'TypeError', message: 'execute(calls): this ToolExecutor is closed' })
    assert.equal(calls.tool, 0)
  })

  it('resolves every close() as soon as the last abandoned handler settles', async () => {
    const release = deferred()
    const { gate } = gateWith([{ name: 'finishing', handler: () => release.promise }])
    const turn = gate.execute([{ name: 'finishing' }])
    const closed = []
    gate.close({ timeoutMs: 500 }).then(() => closed.push('first'))
    gate.close({ timeoutMs: 500 }).then(() => closed.push('second'))
    await turn
    release.resolve('done')
    await turnOfLoop()
    assert.deepEqual(closed.sort(), ['first', 'second'])
  })

  it('answers a sibling a closing handler kept from starting as not run', async () => {
    const { gate, calls } = gateWith([
      { name: 'shutdown', readOnly: true, handler: () => {
        gate.close()
        return 'bye'
      } },
      { name: 'look', readOnly: true, handler: () => 'seen' },
    ])
    const [, look] = await gate.execute([{ name: 'shutdown' }, { name: 'look' }])
    assert.equal(calls.look, 0)
    assertFailure(look, 'cancelled', 'Tool "look" was not run: the turn was cancelled before it started (the tool executor was closed).')
    assert.equal(look.attempts, 0)
  })
})

describe('options', () => {
  it('refuses tool fields that cannot work when the tool is registered', () => {
    const gate = new ToolExecutor()
    const handler = () => 'x'
    const refused = [
      [{ idleTimeoutMs: 0 }, 'tool "t": idleTimeoutMs must be a positive number'],
      [{ maxConcurrency: 0 }, 'tool "t": maxConcurrency must be a positive number'],
      [{ retry: true }, 'tool "t": retry must be an object like { maxRetries: 2, initialDelayMs: 1000 } or false'],
      [{ retry: { backoffFactor: 0.5 } }, 'tool "t": retry.backoffFactor must be a number of at least 1'],
      [{ retry: { maxRetry: 1 } }, /^tool "t": invalid retry policy: unknown field `maxRetry`/],
    ]
    for (const [fields, message] of refused) {
      assert.throws(() => gate.register({ name: 't', handler, ...fields }), { name: 'TypeError', message }, JSON.stringify(fields))
    }
    assert.deepEqual(gate.list(), [])
    gate.register({ name: 't', handler, idleTimeoutMs: 50, maxConcurrency: 2 })
    assert.deepEqual([gate.list()[0].idleTimeoutMs, gate.list()[0].maxConcurrency], [50, 2])
  })

  it('rejects turn options that cannot work', async () => {
    const { gate, calls } = gateWith([{ name: 'tool' }])
    const refused = [
      [{ deadlineMs: 0 }, 'deadlineMs must be a positive number'],
      [{ deadlineMs: -5 }, /^invalid execute options: /],
      [{ deadlineMs: '100' }, /^invalid execute options: /],
      [{ stopOnError: 'yes' }, /^invalid execute options: /],
      [{ deadline: 100 }, 'execute options: unknown option "deadline" (known: deadlineMs, stopOnError)'],
      [{ onProgress: 'log' }, 'execute(calls, { onProgress }): onProgress must be a function'],
    ]
    for (const [options, message] of refused) {
      await assert.rejects(gate.execute([{ name: 'tool' }], options), { name: 'TypeError', message }, JSON.stringify(options))
    }
    assert.equal(calls.tool, 0)
    assert.throws(() => new ToolExecutor({ onTrace: 1 }), { name: 'TypeError', message: 'ToolExecutor options: onTrace must be a function' })
  })

  it('takes a partial executor retry policy, or false, filling in the defaults', () => {
    const policy = (retry) => {
      const gate = new ToolExecutor({ retry })
      gate.register({ name: 't', handler: () => 'x' })
      return gate.list()[0].retry
    }
    const defaults = { maxRetries: 2, initialDelayMs: 1000, backoffFactor: 2, maxDelayMs: 60_000, maxElapsedMs: 120_000, onTimeout: false }
    assert.deepEqual(policy({ maxRetries: 1 }), { ...defaults, maxRetries: 1 })
    assert.deepEqual(policy(false), { ...defaults, maxRetries: 0 })
  })
})

describe('retry: false', () => {
  it('turns retries off for the option only, never for a schema property named retry', () => {
    const gate = new ToolExecutor({ retry: false })
    gate.register({ name: 't', retry: false, parameters: { type: 'object', properties: { retry: false } }, handler: () => 'x' })
    const [tool] = gate.list()
    assert.deepEqual(tool.parameters, { type: 'object', properties: { retry: false } })
    assert.equal(tool.retry.maxRetries, 0)
  })
})
