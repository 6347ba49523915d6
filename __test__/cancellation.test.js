'use strict'
// Cancellation through execute's signal: running handlers are aborted, calls not started are answered unrun.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { gateWith, assertFailure, assertSuccess, marks, deferred, sleep, runChild, lastJsonLine, ADMITTED, counterView, counts } = require('./helpers')

const SCHEMA = { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] }

/**
 * `read` (read-only) and `write` record that they started and the signal they got, then wait for an abort
 * (they would hang forever without one; their time limit is far beyond the test).
 */
function tools() {
  const started = deferred()
  const seen = { read: [], write: [] }
  const waitForAbort = (name) => (_args, ctx) => {
    seen[name].push(ctx.signal)
    started.resolve()
    return new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)))
  }
  const { gate, calls } = gateWith([
    { name: 'read', readOnly: true, parameters: SCHEMA, handler: waitForAbort('read') },
    { name: 'write', parameters: SCHEMA, handler: waitForAbort('write') },
  ], { defaultTimeoutMs: 60_000 })
  return { gate, calls, seen, started: started.promise }
}

describe('cancelling a turn in flight', () => {
  it('aborts running handlers with the caller’s reason and answers calls not started as not run', async () => {
    const { gate, calls, seen, started } = tools()
    const controller = new AbortController()
    const reason = new Error('user pressed stop')
    const turn = gate.execute([
      { id: 'r', name: 'read', input: { q: 'a' } },
      { id: 'w', name: 'write', input: { q: 'b' } },
      { id: 'u', name: 'nope' },
      { id: 'i', name: 'write', input: {} },
    ], { signal: controller.signal })
    await started
    assert.equal(gate.running, 1)
    controller.abort(reason)
    const [read, write, unknown, invalid] = await turn

    // The running read: aborted with the caller's own reason object.
    assert.equal(seen.read.length, 1)
    assert.equal(seen.read[0].aborted, true)
    assert.equal(seen.read[0].reason, reason)
    assertFailure(read, 'cancelled',
      'Tool "read" was stopped while running: the turn was cancelled (aborted by the caller: user pressed stop). It only reads, so nothing changed.')
    assert.equal(read.retryable, true)
    assert.equal(read.attempts, 1)
    assert.deepEqual(marks(read), [...ADMITTED, 'invoke:cancelled'])

    // The write waiting behind it: never started.
    assert.equal(calls.write, 0)
    assertFailure(write, 'cancelled', 'Tool "write" was not run: the turn was cancelled before it started (aborted by the caller: user pressed stop).')
    assert.equal(write.retryable, true)
    assert.equal(write.attempts, 0)
    assert.equal(write.latencyMs, 0)
    assert.deepEqual(marks(write), [...ADMITTED, 'invoke:not_started'])

    // Calls refused before invoke keep their own kind.
    assert.equal(unknown.errorKind, 'unknown_tool')
    assert.equal(invalid.errorKind, 'invalid_arguments')
    assert.equal(gate.running, 0)
  })

  it('keeps the results of calls that finished before the abort', async () => {
    const { gate, started } = tools()
    gate.register({ name: 'quick', handler: () => 'finished first' })
    const controller = new AbortController()
    const turn = gate.execute([{ name: 'quick' }, { name: 'read', input: { q: 'a' } }], { signal: controller.signal })
    // The read starts only after the write-like `quick` ended.
    await started
    controller.abort()
    const [quick, read] = await turn
    assertSuccess(quick, 'finished first')
    assert.equal(read.errorKind, 'cancelled')
  })

  it('says a running write’s effect is unknown and does not mark it retryable', async () => {
    const { gate, seen, started } = tools()
    const controller = new AbortController()
    const turn = gate.execute([{ name: 'write', input: { q: 'x' } }], { signal: controller.signal })
    await started
    controller.abort('shutting down')
    const [r] = await turn
    assertFailure(r, 'cancelled', 'Tool "write" was stopped while running: the turn was cancelled (aborted by the caller: shutting down).',
      'It can change state, so its effect is unknown: check whether it took effect before retrying.')
    assert.equal(r.retryable, false)
    assert.equal(seen.write[0].reason, 'shutting down')
  })

  it('gives a signal first read after the cancellation the caller’s reason', async () => {
    let ctx
    const entered = deferred()
    const { gate } = gateWith([{ name: 'lazy', readOnly: true, handler: (_a, c) => {
      ctx = c
      entered.resolve()
      return new Promise(() => {})
    } }], { defaultTimeoutMs: 60_000 })
    const controller = new AbortController()
    const reason = new Error('stopped from outside')
    const turn = gate.execute([{ name: 'lazy' }], { signal: controller.signal })
    await entered.promise
    controller.abort(reason)
    assert.equal((await turn)[0].errorKind, 'cancelled')
    assert.equal(ctx.signal.aborted, true)
    assert.equal(ctx.signal.reason, reason)
  })

  it('ignores what an aborted handler settles with later', async () => {
    const late = deferred()
    const { gate } = gateWith([{ name: 'stubborn', readOnly: true, handler: async (_a, ctx) => {
      // Does not listen to its signal; finishes on its own schedule.
      await sleep(100)
      late.resolve(ctx.signal.aborted)
      return 'finished anyway'
    } }])
    const controller = new AbortController()
    const turn = gate.execute([{ name: 'stubborn' }], { signal: controller.signal })
    setImmediate(() => controller.abort())
    const results = await turn
    assertFailure(results[0], 'cancelled', '(aborted by the caller: This operation was aborted)')
    const snapshot = structuredClone(results)
    assert.equal(await late.promise, true, 'the handler ran on and saw its signal aborted')
    await sleep(20)
    assert.deepEqual(results, snapshot)
    assert.equal(gate.running, 0)
  })

  it('leaves a finished turn alone when its signal fires afterwards', async () => {
    const { gate } = gateWith([{ name: 'quick', handler: () => 'done' }])
    const controller = new AbortController()
    const results = await gate.execute([{ name: 'quick' }], { signal: controller.signal })
    controller.abort()
    await sleep(1)
    assertSuccess(results[0], 'done')
  })
})

describe('a signal aborted before execute', () => {
  it('runs no handler and answers every runnable call as not run, with the reason', async () => {
    const { gate, calls } = tools()
    const controller = new AbortController()
    controller.abort(new Error('too late'))
    const results = await gate.execute([
      { id: '1', name: 'read', input: { q: 'a' } },
      { id: '2', name: 'read', input: { q: 'b' } },
      { id: '3', name: 'write', input: { q: 'c' } },
      { id: '4', name: 'missing' },
      { id: '5', name: 'read', input: { q: [5] } },
    ], { signal: controller.signal })
    assert.deepEqual(calls, { read: 0, write: 0 })
    for (const r of results.slice(0, 3)) {
      assertFailure(r, 'cancelled', `Tool "${r.name}" was not run: the turn was cancelled before it started (aborted by the caller: too late).`)
      assert.equal(r.retryable, true)
      assert.equal(r.attempts, 0)
      assert.equal(marks(r).at(-1), 'invoke:not_started')
    }
    assert.equal(results[3].errorKind, 'unknown_tool')
    assert.equal(results[4].errorKind, 'invalid_arguments')
    assert.deepEqual(results.map((r) => r.callId), ['1', '2', '3', '4', '5'])
    assert.equal(gate.running, 0)
  })

  it('words the default abort reason and a string reason', async () => {
    const { gate } = tools()
    const plain = AbortSignal.abort()
    const [a] = await gate.execute([{ name: 'read', input: { q: 'a' } }], { signal: plain })
    assertFailure(a, 'cancelled', '(aborted by the caller: This operation was aborted)')
    const [b] = await gate.execute([{ name: 'read', input: { q: 'a' } }], { signal: AbortSignal.abort('the user left') })
    assertFailure(b, 'cancelled', '(aborted by the caller: the user left)')
  })
})

describe('a handler that cancels its own turn', () => {
  // A write, then two reads started in one step; the first read aborts the turn's signal synchronously (a "stop"
  // tool). Run in a child: a throw on the settle path would be an unhandled rejection that ends the process.
  const SCRIPT = `
    const { ToolExecutor } = require('..')
    const gate = new ToolExecutor({ defaultTimeoutMs: 2000 })
    const ran = []
    gate.register({ name: 'prepare', handler: async () => { ran.push('prepare'); return 'ready' } })
    gate.register({ name: 'stop', readOnly: true, handler: (a, ctx) => { ran.push('stop'); ctx.context.controller.abort(new Error('stop requested')); return 'stopping' } })
    gate.register({ name: 'look', readOnly: true, handler: async () => { ran.push('look'); return 'seen' } })
    const controller = new AbortController()
    gate.execute([{ name: 'prepare' }, { name: 'stop' }, { name: 'look' }], { signal: controller.signal, context: { controller } })
      .then((r) => setTimeout(() => console.log(JSON.stringify({ kinds: r.map((x) => x.errorKind ?? 'ok'), look: r[2], ran, running: gate.running })), 50))
  `

  async function run() {
    const child = await runChild(SCRIPT)
    assert.equal(child.timedOut, false)
    assert.equal(child.code, 0, child.stderr)
    return lastJsonLine(child.stdout)
  }

  it('neither crashes nor starts the calls the cancellation already answered', async () => {
    const out = await run()
    assert.deepEqual(out.kinds, ['ok', 'cancelled', 'cancelled'])
    assert.deepEqual(out.ran, ['prepare', 'stop'], 'look never started')
    assert.equal(out.running, 0)
  })

  it('says a call that never started was not run', async () => {
    const { look } = await run()
    assertFailure(look, 'cancelled', 'Tool "look" was not run: the turn was cancelled before it started (aborted by the caller: stop requested).')
    assert.equal(look.attempts, 0)
  })
})

describe('cancellation and siblings', () => {
  it('cancels only the turn whose signal fired', async () => {
    const { gate, started } = tools()
    const { gate: other } = gateWith([{ name: 'slow', handler: () => sleep(30, 'unaffected') }])
    const controller = new AbortController()
    const cancelled = gate.execute([{ name: 'read', input: { q: 'a' } }], { signal: controller.signal })
    const untouched = other.execute([{ name: 'slow' }])
    await started
    controller.abort()
    assert.equal((await cancelled)[0].errorKind, 'cancelled')
    assertSuccess((await untouched)[0], 'unaffected')
  })

  it('never aborts a handler that has no reason to stop', async () => {
    const signals = []
    const { gate } = gateWith([{ name: 'quiet', readOnly: true, handler: (_a, ctx) => {
      signals.push(ctx.signal)
      return 'ok'
    } }, { name: 'fails', readOnly: true, handler: () => {
      throw new Error('mine alone')
    } }])
    const results = await gate.execute([{ name: 'quiet' }, { name: 'fails' }, { name: 'quiet' }])
    assert.deepEqual(results.map((r) => r.errorKind ?? 'ok'), ['ok', 'handler_error', 'ok'])
    assert.deepEqual(signals.map((s) => s.aborted), [false, false])
  })
})

describe('a cancellation between a settlement and its crossing', () => {
  it('keeps the result of a handler that settled before the turn was cancelled', async () => {
    // `quick` settles first; `canceller`'s microtask cancels the turn before that settlement has crossed.
    const controller = new AbortController()
    const traced = []
    const { gate } = gateWith([
      { name: 'quick', readOnly: true, parameters: SCHEMA, handler: async () => 'done' },
      { name: 'canceller', readOnly: true, parameters: SCHEMA, handler: () => Promise.resolve().then(() => controller.abort(new Error('stop'))) },
    ], { onTrace: (events) => traced.push(...events) })
    const turn = [{ name: 'quick', input: { q: 'a' } }, { name: 'canceller', input: { q: 'b' } }]
    const [quick, canceller] = await gate.execute(turn, { signal: controller.signal })
    assertSuccess(quick, 'done')
    assertFailure(canceller, 'cancelled')
    assert.deepEqual(counterView(gate.stats().tools.quick), counts({}))
    await sleep(10)
    // `canceller` itself resolves after the cancellation it made: a late settlement.
    const late = traced.filter((e) => e.type === 'late_settlement')
    assert.deepEqual(late.map((e) => [e.toolName, e.outcome, e.endedBy]), [['canceller', 'resolved', 'cancelled']])
  })

  it('keeps what the engine reads of a string with a lone surrogate, cached or not', async () => {
    const { gate } = gateWith([
      { name: 'odd', readOnly: true, idempotent: true, cache: { ttlMs: 60_000 }, parameters: SCHEMA, handler: async () => 'a\uD800b' },
    ])
    const [first] = await gate.execute([{ name: 'odd', input: { q: 'a' } }])
    const [again] = await gate.execute([{ name: 'odd', input: { q: 'a' } }])
    assert.equal(first.output, 'a\uFFFDb')
    assert.equal(again.output, 'a\uFFFDb')
    assert.equal(again.cached, true)
  })
})
