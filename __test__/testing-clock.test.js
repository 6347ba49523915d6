'use strict'
// Time that tests control, and time that fake timers do not touch. On `manualClock()`, every deadline the gate
// keeps falls due only when the test moves the clock, in order, whatever the real time; under fake timers
// (@sinonjs/fake-timers, as vitest and jest install them) nothing in the gate stalls or changes.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const FakeTimers = require('@sinonjs/fake-timers')
const { ToolExecutor, RetryableError } = require('..')
const { manualClock, hangs, flaky, progressThenSilence, ok } = require('toolgate/testing')
const { spawnSync } = require('node:child_process')
const { assertFailure, assertSuccess, lastJsonLine } = require('./helpers')

// The test's own real timers, taken before any test fakes them.
const { setTimeout: realTimeout, setImmediate: realImmediate } = require('node:timers')
const turnOfTheLoop = () => new Promise((resolve) => realImmediate(resolve))

/** A real-time bound on a turn that must not wait on real time: it fails the test rather than hang it. */
const within = (promise, ms, what) => Promise.race([
  promise,
  new Promise((_, reject) => realTimeout(() => reject(new Error(`${what} still pending after ${ms} ms of real time`)), ms).unref()),
])

/** Moves the clock on until `promise` settles (each step to the next due moment), and resolves to its value. */
async function untilSettled(clock, promise) {
  let done = false
  promise.then(() => { done = true }, () => { done = true })
  for (let i = 0; i < 1_000 && !done; i++) await clock.next()
  return promise
}

/** A handler reporting progress three times 4 s apart on `progressClock`, under a 5 s idle limit on `clock`: the
 * 12 s of reports, in one move, keep it alive; `silenceMs` more of silence end it as `idle_timeout`. */
async function assertIdleAfterProgress(clock, progressClock, silenceMs) {
  const gate = new ToolExecutor({ clock })
  gate.register({ name: 'stream', timeoutMs: 60_000, idleTimeoutMs: 5_000, handler: progressThenSilence(3, { everyMs: 4_000, clock: progressClock }) })
  let result
  const turn = gate.execute([{ name: 'stream' }]).then(([r]) => { result = r })
  await clock.advance(12_000)
  assert.equal(result, undefined, 'never 5 s of silence while it reports')
  await clock.advance(silenceMs)
  await within(turn, 5_000, 'the turn')
  assertFailure(result, 'idle_timeout')
  await gate.close()
}

describe('manualClock', () => {
  it('keeps a 30 s limit until the clock passes it, however long real time runs', async () => {
    const clock = manualClock()
    const gate = new ToolExecutor({ clock })
    const handler = hangs()
    gate.register({ name: 'wait', timeoutMs: 30_000, handler })
    let result
    const turn = gate.execute([{ id: 'w', name: 'wait' }]).then(([r]) => { result = r })
    await clock.advance(29_999)
    await new Promise((resolve) => realTimeout(resolve, 50)) // real time passes; the clock does not
    assert.equal(result, undefined, 'not due at 29 999 ms on the clock')
    await clock.advance(1)
    await within(turn, 5_000, 'the turn')
    assertFailure(result, 'timeout', 'did not finish within its time limit of 30000 ms')
    assert.equal(handler.calls[0].signalAborted, true)
    await gate.close()
  })

  it('runs a 30 s timeout with two retries and their backoffs in order, in milliseconds of real time', async () => {
    const clock = manualClock()
    const gate = new ToolExecutor({ clock })
    const handler = hangs()
    gate.register({ name: 'fetch', readOnly: true, timeoutMs: 30_000, retry: { maxRetries: 2, initialDelayMs: 1_000, onTimeout: true }, handler })
    const started = Date.now()
    const [r] = await within(untilSettled(clock, gate.execute([{ id: 'f', name: 'fetch' }])), 10_000, 'the retried turn')
    assertFailure(r, 'timeout')
    assert.equal(r.attempts, 3)
    assert.deepEqual(r.metadata.attemptErrors.map((e) => e.errorKind), ['timeout', 'timeout'])
    // Three limits of 30 s and two backoffs below 1 s and 2 s passed on the clock.
    assert.ok(clock.now() >= 90_000 && clock.now() < 93_000, `the clock is at ${clock.now()} ms`)
    assert.ok(Date.now() - started < 10_000)
    await gate.close()
  })

  it('holds an idle limit to the progress the handler reports, on the clock', async () => {
    const clock = manualClock()
    await assertIdleAfterProgress(clock, clock, 5_000)
  })

  it('refills a rate limit and expires cache entries on the clock', async () => {
    const clock = manualClock()
    const gate = new ToolExecutor({ clock, cache: { ttlMs: 10_000 } })
    const handler = ok('fresh')
    gate.register({ name: 'quote', readOnly: true, idempotent: true, rateLimit: '1/min', handler })
    const run = async (args) => (await gate.execute([{ name: 'quote', arguments: args }]))[0]
    assertSuccess(await run({ q: 1 }))
    const limited = await run({ q: 2 })
    assertFailure(limited, 'rate_limited')
    assert.ok(limited.retryAfterMs > 59_000 && limited.retryAfterMs <= 60_000, String(limited.retryAfterMs))
    assert.equal((await run({ q: 1 })).cached, true, 'cached within its TTL')
    await clock.advance(60_000)
    assertSuccess(await run({ q: 2 }))
    assert.equal((await run({ q: 1 })).cached, false, 'gone after 10 s on the clock')
    await gate.close()
  })

  it('times out an approval on the clock, and a rate-limit wait ends when the token comes', async () => {
    const clock = manualClock()
    const gate = new ToolExecutor({ clock, approvalTimeoutMs: 60_000, approve: () => new Promise(() => {}) })
    gate.register({ name: 'deploy', needsApproval: true, handler: () => 'deployed' })
    gate.register({ name: 'ping', readOnly: true, rateLimit: { limit: '1/s', maxWaitMs: 5_000 }, handler: () => 'pong' })
    const pending = gate.execute([{ id: 'd', name: 'deploy' }])
    await clock.advance(60_000)
    const [denied] = await within(pending, 5_000, 'the approval')
    assertFailure(denied, 'approval_denied', 'no approval came within 60000 ms')
    const waits = gate.execute([{ id: 'a', name: 'ping' }, { id: 'b', name: 'ping' }])
    await clock.advance(1_000)
    const [a, b] = await within(waits, 5_000, 'the rate-limited turn')
    assertSuccess(a, 'pong')
    assertSuccess(b, 'pong')
    await gate.close()
  })

  it('ends a turn at its deadline on the clock, and moves every executor on it in step', async () => {
    const clock = manualClock()
    const gates = [new ToolExecutor({ clock }), new ToolExecutor({ clock })]
    for (const gate of gates) gate.register({ name: 'wait', timeoutMs: 100_000, handler: hangs() })
    const turns = gates.map((gate, i) => gate.execute([{ name: 'wait' }], { deadlineMs: (i + 1) * 1_000 }))
    const order = []
    turns.forEach((turn, i) => turn.then(() => order.push(i)))
    await clock.advance(1_000)
    await turnOfTheLoop()
    assert.deepEqual(order, [0])
    await clock.advance(1_000)
    const results = await within(Promise.all(turns), 5_000, 'the turns')
    assert.deepEqual(order, [0, 1])
    for (const [r] of results) assert.equal(r.errorKind, 'timeout')
    await Promise.all(gates.map((gate) => gate.close()))
  })

  it('times out a tool\'s check on the clock, and ages artifacts on it', async () => {
    const clock = manualClock()
    const gate = new ToolExecutor({ clock, checkTimeoutMs: 10_000, artifacts: { ttlMs: 60_000 } })
    gate.register({ name: 'checked', check: () => new Promise(() => {}), handler: () => 'ran' })
    gate.register({ name: 'dump', handler: () => 'y'.repeat(50_000) })
    const pending = gate.execute([{ name: 'checked' }])
    await clock.advance(10_000)
    const [refused] = await within(pending, 5_000, 'the check')
    assertFailure(refused, 'handler_error', 'its argument check failed (no check came within 10000 ms)')
    const [saved] = await gate.execute([{ name: 'dump' }])
    const fs = require('node:fs')
    assert.ok(fs.existsSync(saved.metadata.artifactPath))
    await clock.advance(59_000)
    assert.ok(fs.existsSync(saved.metadata.artifactPath), 'kept within its TTL')
    await clock.advance(1_000)
    assert.equal(fs.existsSync(saved.metadata.artifactPath), false, 'gone once 60 s passed on the clock')
    await gate.close()
  })

  it('reaches deadlines of fractional ms on a clock started at Date.now()', async () => {
    const clock = manualClock({ now: Date.now() })
    const gate = new ToolExecutor({ clock })
    gate.register({ name: 'ping', readOnly: true, rateLimit: { limit: '3/s', maxWaitMs: 2_000 }, handler: () => 'pong' })
    gate.register({ name: 'busy', retry: { maxRetries: 3, initialDelayMs: 333 }, handler: flaky(3, undefined, 'done') })
    const turn = gate.execute([...Array.from({ length: 6 }, () => ({ name: 'ping' })), { name: 'busy' }])
    await clock.advance(5_000)
    const results = await within(turn, 5_000, 'the turn')
    assert.deepEqual(results.map((r) => r.output), [...Array(6).fill('pong'), 'done'])
    await gate.close()
  })

  it('queues next() behind an advance under way, each reading the clock where the one before left it', async () => {
    const clock = manualClock()
    const fired = []
    clock.setTimeout(() => fired.push(1_500), 1_500)
    clock.setTimeout(() => fired.push(3_000), 3_000)
    const [, moved] = await Promise.all([clock.advance(1_000), clock.next()])
    assert.deepEqual([moved, clock.now(), fired], [500, 1_500, [1_500]])
    assert.deepEqual(await Promise.all([clock.next(), clock.next()]), [1_500, 0])
    assert.deepEqual([clock.now(), fired], [3_000, [1_500, 3_000]])
  })

  it('tied to another clock, sees what a handler does on it within a slice of the move', async () => {
    const faked = manualClock() // stands for a test's faked timers
    const clock = manualClock({ onAdvance: (ms) => faked.advance(ms) })
    // Seen within a slice: the last report, at 12 s on the other clock, may count from up to a slice earlier.
    await assertIdleAfterProgress(clock, faked, 5_100)
  })

  it('tells onAdvance of every move, and refuses what cannot work', async () => {
    const moves = []
    const clock = manualClock({ now: 1_000, onAdvance: (ms) => moves.push(ms), tieStepMs: 1_000 })
    let fired = 0
    clock.setTimeout(() => fired++, 500)
    await clock.advance(2_000)
    assert.deepEqual([clock.now(), fired, moves], [3_000, 1, [500, 1_000, 500]], 'to the timer, then in slices of at most tieStepMs')
    await assert.rejects(clock.advance(-1), /ms must be a finite number ≥ 0/)
    assert.throws(() => new ToolExecutor({ clock: { now: () => 0 } }), /clock must be a clock of toolgate\/testing/)
    assert.throws(() => manualClock({ onAdvance: 5 }), /onAdvance must be a function/)
    assert.throws(() => manualClock({ tieStepMs: 0 }), /tieStepMs must be a positive number/)
  })
})

describe('manualClock and garbage collection', () => {
  /** Runs `script` in a child Node with --expose-gc (cwd: this folder, so `require('..')` is the package). */
  const gcChild = (script) => spawnSync(process.execPath, ['--expose-gc', '-e', script], { cwd: __dirname, encoding: 'utf8', timeout: 20_000 })
  const collect = `const collected = async () => { for (let i = 0; i < 5; i++) { global.gc(); await new Promise((r) => setImmediate(r)) } }`

  it('holds an executor with a turn open while its clock lives, so a turn of a dropped executor still ends', () => {
    const child = gcChild(`
      const { ToolExecutor } = require('..')
      const { manualClock, hangs } = require('toolgate/testing')
      ${collect}
      const clock = manualClock()
      const turn = new ToolExecutor({ clock }).register({ name: 'wait', timeoutMs: 1000, handler: hangs() }).execute([{ name: 'wait' }])
      collected().then(() => clock.advance(1000)).then(() => turn).then(([r]) => console.log(JSON.stringify({ kind: r.errorKind })))`)
    assert.equal(child.status, 0, child.stderr)
    assert.deepEqual(lastJsonLine(child.stdout), { kind: 'timeout' })
  })

  it('lets an executor and its clock go together when a test drops both with a turn open', () => {
    const child = gcChild(`
      const { ToolExecutor } = require('..')
      const { manualClock, hangs } = require('toolgate/testing')
      ${collect}
      let gone = 0
      const registry = new FinalizationRegistry(() => { gone++ })
      ;(() => {
        const clock = manualClock()
        const gate = new ToolExecutor({ clock }).register({ name: 'wait', handler: hangs() })
        gate.execute([{ name: 'wait' }])
        registry.register(gate, 'gate')
        registry.register(clock, 'clock')
      })()
      collected().then(() => console.log(JSON.stringify({ gone })))`)
    assert.equal(child.status, 0, child.stderr)
    assert.deepEqual(lastJsonLine(child.stdout), { gone: 2 })
  })
})

describe('under fake timers', () => {
  /** Runs `fn` with @sinonjs/fake-timers installed as vitest and jest install it (setTimeout, setImmediate,
   * setInterval, Date and the node:timers module faked), uninstalled afterwards. */
  async function faked(fn) {
    const fake = FakeTimers.install({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'setInterval', 'clearInterval', 'Date', 'queueMicrotask'] })
    try {
      return await fn(fake)
    } finally {
      fake.uninstall()
    }
  }

  it('keeps a limit on real time, neither earlier nor never', async () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'wait', timeoutMs: 50, handler: hangs() })
    const [r] = await faked(async (fake) => {
      const turn = gate.execute([{ name: 'wait' }])
      fake.tick(60_000) // moving fake time does nothing to the gate's deadline
      return within(turn, 5_000, 'the turn')
    })
    assertFailure(r, 'timeout', 'time limit of 50 ms')
    await gate.close()
  })

  it('passes outputs over 262 144 characters on, delivers traces and closes without fake time moving', async () => {
    const events = []
    const gate = new ToolExecutor({ onTrace: (batch) => events.push(...batch), artifacts: { maxBytes: 64 * 1024 * 1024 } })
    gate.register({ name: 'dump', handler: () => 'x'.repeat(600_000) })
    gate.register({ name: 'stuck', handler: () => new Promise(() => {}) })
    await faked(async () => {
      const [big] = await within(gate.execute([{ name: 'dump' }]), 10_000, 'the large output')
      assert.equal(big.truncated, true)
      assert.equal(big.metadata.originalChars, 600_000)
      await within((async () => { while (events.length === 0) await turnOfTheLoop() })(), 5_000, 'the trace')
      assert.ok(events.some((e) => e.type === 'station' && e.toolName === 'dump'))
      gate.execute([{ name: 'stuck' }])
      const { stillRunning } = await within(gate.close({ timeoutMs: 100 }), 5_000, 'close()')
      assert.deepEqual(stillRunning.map((h) => h.toolName), ['stuck'])
    })
  })

  it('retries after a real backoff, and a manual clock still drives a gate on it', async () => {
    const gate = new ToolExecutor({ retry: { maxRetries: 2, initialDelayMs: 5 } })
    const handler = flaky(2, new RetryableError('busy'), 'done')
    gate.register({ name: 'busy', handler })
    const clock = manualClock()
    const timed = new ToolExecutor({ clock })
    timed.register({ name: 'wait', timeoutMs: 10_000, handler: hangs() })
    await faked(async () => {
      const [r] = await within(gate.execute([{ name: 'busy' }]), 5_000, 'the retried turn')
      assertSuccess(r, 'done')
      assert.equal(r.attempts, 3)
      const turn = timed.execute([{ name: 'wait' }])
      await clock.advance(10_000)
      const [late] = await within(turn, 5_000, 'the turn on the manual clock')
      assertFailure(late, 'timeout')
    })
    await Promise.all([gate.close(), timed.close()])
  })
})

describe('toolgate/testing entries', () => {
  it('the ESM entry exports exactly what the CommonJS entry does, the same objects', async () => {
    const esm = await import('toolgate/testing')
    const cjs = require('toolgate/testing')
    assert.deepEqual(Object.keys(esm).sort(), Object.keys(cjs).sort())
    for (const key of Object.keys(cjs)) assert.equal(esm[key], cjs[key], key)
  })
})
